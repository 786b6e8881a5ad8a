//! Percent-decoding of the client API's paths and queries into bytes (keys need not be UTF-8,
//! which axum's `Path<String>` and `Query` extractors require), and the hex of listing tokens.
//!
//! Hand-written rather than the `percent-encoding` crate: its decoder passes a malformed `%`
//! through as it is, where a key must be refused (`400`) rather than stored under a name the
//! client did not mean.

/// `raw` with each `%XX` replaced by the byte it encodes; every other byte kept as it is (a
/// `+` too, and `/`). A `%` not followed by two hex digits is an error.
pub(super) fn decode_path(raw: &str) -> Result<Vec<u8>, String> {
    decode(raw.as_bytes(), false)
}

fn hex_digit(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

fn decode(raw: &[u8], plus_is_space: bool) -> Result<Vec<u8>, String> {
    let mut out = Vec::with_capacity(raw.len());
    let mut i = 0;
    while i < raw.len() {
        match raw[i] {
            b'%' => {
                let pair = raw.get(i + 1..i + 3);
                match pair.and_then(|p| Some(hex_digit(p[0])? << 4 | hex_digit(p[1])?)) {
                    Some(b) => out.push(b),
                    None => {
                        let bad = String::from_utf8_lossy(&raw[i..(i + 3).min(raw.len())]);
                        return Err(format!(
                            "invalid percent-encoding at byte {i}: \"{}\" (a % must be followed \
                             by two hex digits; a literal % is %25)",
                            bad.escape_default()
                        ));
                    }
                }
                i += 3;
            }
            b'+' if plus_is_space => {
                out.push(b' ');
                i += 1;
            }
            b => {
                out.push(b);
                i += 1;
            }
        }
    }
    Ok(out)
}

/// A request's query: `name=value` pairs split on `&`, each percent-decoded (and `+` read as a
/// space, as HTML forms and most clients' query builders send it). The last of a repeated
/// name counts.
#[derive(Debug, Default)]
pub(super) struct Query {
    pairs: Vec<(Vec<u8>, Vec<u8>)>,
}

impl Query {
    /// Parses `query` (the part of the URI after `?`, if any).
    pub(super) fn parse(query: Option<&str>) -> Result<Query, String> {
        let mut pairs = Vec::new();
        for part in query.unwrap_or("").split('&').filter(|p| !p.is_empty()) {
            let (name, value) = part.split_once('=').unwrap_or((part, ""));
            let name = decode(name.as_bytes(), true)?;
            let value = decode(value.as_bytes(), true)?;
            pairs.push((name, value));
        }
        Ok(Query { pairs })
    }

    /// The bytes of parameter `name`.
    pub(super) fn bytes(&self, name: &str) -> Option<Vec<u8>> {
        self.pairs
            .iter()
            .rev()
            .find(|(n, _)| n == name.as_bytes())
            .map(|(_, v)| v.clone())
    }

    /// Parameter `name` as text.
    pub(super) fn text(&self, name: &str) -> Result<Option<String>, String> {
        self.bytes(name)
            .map(|v| String::from_utf8(v).map_err(|_| format!("{name}: not UTF-8")))
            .transpose()
    }

    /// Parameter `name` as a number.
    pub(super) fn u64(&self, name: &str) -> Result<Option<u64>, String> {
        self.text(name)?
            .map(|v| {
                v.parse::<u64>()
                    .map_err(|_| format!("{name}={v}: not a number of bytes"))
            })
            .transpose()
    }
}

/// `bytes` in lowercase hex.
pub(super) fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write;
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        let _ = write!(s, "{b:02x}");
    }
    s
}

/// The bytes `hex` spells (either case), if it is hex.
pub(super) fn unhex(hex: &str) -> Option<Vec<u8>> {
    let h = hex.as_bytes();
    if !h.len().is_multiple_of(2) {
        return None;
    }
    h.chunks(2)
        .map(|p| Some(hex_digit(p[0])? << 4 | hex_digit(p[1])?))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_decode_to_bytes_and_malformed_escapes_are_refused() {
        assert_eq!(decode_path("photo/42").unwrap(), b"photo/42");
        assert_eq!(decode_path("photo%2F42").unwrap(), b"photo/42");
        assert_eq!(decode_path("a+b%20c").unwrap(), b"a+b c");
        assert_eq!(decode_path("%ff%00%C3%bc").unwrap(), [0xff, 0, 0xc3, 0xbc]);
        for bad in ["%", "%4", "%zz", "a%g1", "%%41"] {
            assert!(decode_path(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn queries_decode_plus_as_space_and_the_last_repeat_counts() {
        let q = Query::parse(Some("prefix=a+b%2F&limit=5&limit=7&flag")).unwrap();
        assert_eq!(q.bytes("prefix").unwrap(), b"a b/");
        assert_eq!(q.u64("limit").unwrap(), Some(7));
        assert_eq!(q.bytes("flag").unwrap(), b"");
        assert_eq!(q.bytes("none"), None);
        assert!(q.u64("prefix").is_err());
        assert!(Query::parse(Some("a=%x1")).is_err());
    }

    #[test]
    fn hex_round_trips_and_refuses_other_text() {
        let key = [0u8, 0x7f, 0xff, b'a'];
        assert_eq!(hex(&key), "007fff61");
        assert_eq!(unhex(&hex(&key)).unwrap(), key);
        assert_eq!(unhex("0A").unwrap(), [10]);
        for bad in ["0", "zz", "0x"] {
            assert!(unhex(bad).is_none(), "{bad}");
        }
    }
}
