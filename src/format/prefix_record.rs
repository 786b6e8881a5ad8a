//! `REMOTE-PREFIX`: the remote prefix a store directory belongs to, written when it first
//! opens with a remote (or is restored from one), so that opening it with another prefix is
//! refused (docs/design-remote.md, "The prefix a directory belongs to"). Text: a header line,
//! then the prefix, then a newline; nothing else.

use crate::error::Corruption;

/// The record's name in the store directory.
pub const PREFIX_RECORD_NAME: &str = "REMOTE-PREFIX";
/// [`PREFIX_RECORD_NAME`] being written (renamed over it once synced).
pub const PREFIX_RECORD_TMP: &str = "REMOTE-PREFIX.tmp";
/// The first line, version included.
const HEADER: &[u8] = b"podstore remote prefix 1\n";

/// The bytes of the record of `prefix`.
pub fn encode(prefix: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(HEADER.len() + prefix.len() + 1);
    out.extend_from_slice(HEADER);
    out.extend_from_slice(prefix.as_bytes());
    out.push(b'\n');
    out
}

/// The prefix `bytes` record: [`Corruption`] for anything [`encode`] does not write (another
/// header or version, no final newline, a prefix that is not UTF-8).
pub fn decode(bytes: &[u8]) -> Result<String, Corruption> {
    let Some(rest) = bytes.strip_prefix(HEADER) else {
        let mut found = [0u8; 4];
        let n = bytes.len().min(4);
        found[..n].copy_from_slice(&bytes[..n]);
        return Err(Corruption::BadMagic {
            structure: "remote prefix record",
            found,
        });
    };
    let Some(prefix) = rest.strip_suffix(b"\n") else {
        return Err(Corruption::Truncated {
            needed: bytes.len() as u64 + 1,
            available: bytes.len() as u64,
        });
    };
    String::from_utf8(prefix.to_vec()).map_err(|e| Corruption::InvalidField {
        field: "remote prefix (not UTF-8)",
        value: e.utf8_error().valid_up_to() as u64,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_decodes_to_its_prefix_and_nothing_else_decodes() {
        for prefix in ["tenant/store", "", "a\nb", "ünï/cödé"] {
            assert_eq!(decode(&encode(prefix)).unwrap(), prefix);
        }
        let good = encode("p/q");
        assert!(decode(&good[..good.len() - 1]).is_err(), "no final newline");
        assert!(
            decode(b"podstore remote prefix 2\np\n").is_err(),
            "another version"
        );
        assert!(decode(b"").is_err());
        let mut bad = encode("p");
        bad.insert(bad.len() - 1, 0xff);
        assert!(decode(&bad).is_err(), "not UTF-8");
    }
}
