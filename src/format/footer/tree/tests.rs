use super::*;
use crate::format::footer::keys::block_crc;
use crate::format::footer::tests::{leaves, many};
use crate::format::footer::{
    FooterEntry, LOCATION_HEADER_LEN, TRAILER_LEN, Trailer, decode_footer, encode_footer,
};

const SEG: u64 = 9;
const AT: u64 = 1 << 20;

/// A key section of `n` fake key blocks (random bytes, `block_len` each) whose first keys are
/// `key(i)`, then the tree over them; returns the bytes (from file offset [`AT`]), the tree and
/// the header that names it.
fn section(
    n: usize,
    block_len: u32,
    key: impl Fn(usize) -> Vec<u8>,
) -> (Vec<u8>, TreeInfo, LocationHeader) {
    let mut out = b"PODK\0\0\0\0".to_vec();
    let keys: Vec<Vec<u8>> = (0..n).map(key).collect();
    let mut blocks = Vec::new();
    for k in &keys {
        let offset = AT + out.len() as u64;
        out.extend((0..block_len).map(|i| (i as u8).wrapping_mul(31)));
        blocks.push((
            BlockRef {
                offset,
                len: block_len,
            },
            k.as_slice(),
        ));
    }
    let info = encode_tree(&mut out, SEG, AT, 0, blocks);
    let header = info.header(AT, out.len() as u64, 0);
    (out, info, header)
}

/// Every level of the tree of `bytes`, top down: its nodes, each with its child count.
fn levels(bytes: &[u8], h: &LocationHeader) -> Vec<Vec<(BlockRef, usize)>> {
    let mut out = Vec::new();
    let mut level = vec![h.root().unwrap()];
    for depth in (1..=h.depth).rev() {
        let mut row = Vec::new();
        let mut below = Vec::new();
        for node in &level {
            let n =
                decode_index_node(SEG, depth, node, &bytes[(node.offset - AT) as usize..]).unwrap();
            row.push((*node, n.children.len()));
            below.extend(n.children.iter().map(|c| c.block));
        }
        out.push(row);
        level = below;
    }
    out
}

fn key17(i: usize) -> Vec<u8> {
    format!("{i:017}").into_bytes()
}

/// Entries of 20 bytes (a 17-byte key, its length and a 2-byte child length): 204 of them fill
/// a node to exactly NODE_TARGET bytes (12 + 204 × 20 + 4). One more child needs a second node,
/// and a root above both.
#[test]
fn a_node_fills_to_exactly_the_target() {
    let (bytes, info, h) = section(204, 4100, key17);
    assert_eq!(info.depth, 1);
    assert_eq!(h.root_len as usize, NODE_TARGET);
    assert_eq!(levels(&bytes, &h), vec![vec![(h.root().unwrap(), 204)]]);
    assert_eq!(decode_tree(SEG, &h, &bytes).unwrap().len(), 204);

    let (bytes, info, h) = section(205, 4100, key17);
    assert_eq!(info.depth, 2);
    let lv = levels(&bytes, &h);
    assert_eq!(lv[0][0].1, 2, "root over two nodes");
    let counts: Vec<usize> = lv[1].iter().map(|(_, c)| *c).collect();
    assert_eq!(counts, vec![204, 1]);
    assert_eq!(lv[1][0].0.len as usize, NODE_TARGET);
    let blocks = decode_tree(SEG, &h, &bytes).unwrap();
    assert_eq!(blocks.len(), 205);
    for (i, b) in blocks.iter().enumerate() {
        assert_eq!(b.key, key17(i));
        assert_eq!(b.block.offset, AT + 8 + i as u64 * 4100);
    }
}

/// Fence keys of 4 KiB: a node takes two of them (and is longer than the target), so the tree
/// is as deep as a binary tree, and every level but the root halves the one below.
#[test]
fn long_keys_make_two_entry_nodes_and_deep_trees() {
    let key = |i: usize| {
        let mut k = format!("{i:08}").into_bytes();
        k.resize(MAX_KEY_LEN, b'k');
        k
    };
    for (n, depth) in [
        (1usize, 1u8),
        (2, 1),
        (3, 2),
        (4, 2),
        (5, 3),
        (40, 6),
        (64, 6),
        (65, 7),
    ] {
        let (bytes, info, h) = section(n, 8192, key);
        assert_eq!(info.depth, depth, "{n} blocks");
        let lv = levels(&bytes, &h);
        assert_eq!(lv.len(), depth as usize);
        for (d, row) in lv.iter().enumerate() {
            for (node, count) in row {
                assert!(*count <= 2 && node.len as usize <= MAX_NODE_LEN);
                if n > 1 {
                    assert!(node.len as usize > NODE_TARGET || *count == 1);
                }
            }
            if d + 1 < lv.len() {
                assert!(row.len() < lv[d + 1].len(), "levels shrink");
            }
        }
        let blocks = decode_tree(SEG, &h, &bytes).unwrap();
        let want: Vec<Vec<u8>> = (0..n).map(key).collect();
        let got: Vec<Vec<u8>> = blocks.iter().map(|b| b.key.to_vec()).collect();
        assert_eq!(got, want);
    }
}

/// The greedy rule at every size around the points where a level gains a node: every node but
/// the last of its level was closed only because the next entry would pass the target.
#[test]
fn nodes_close_at_the_target_and_levels_shrink() {
    for n in [0usize, 1, 2, 3, 203, 204, 205, 407, 408, 409, 3000] {
        let (bytes, info, h) = section(n, 300, key17);
        if n == 0 {
            assert_eq!((info.depth, info.root), (0, None));
            assert!(decode_tree(SEG, &h, &bytes).unwrap().is_empty());
            continue;
        }
        let lv = levels(&bytes, &h);
        for row in &lv {
            for (node, count) in &row[..row.len() - 1] {
                assert!(
                    node.len as usize + 20 > NODE_TARGET && *count >= 2,
                    "{n}: {node:?}"
                );
            }
        }
        assert_eq!(lv[0].len(), 1, "one root");
        assert_eq!(decode_tree(SEG, &h, &bytes).unwrap().len(), n);
    }
}

fn entries(n: usize, key_len: usize) -> Vec<FooterEntry> {
    many(n, |_| key_len)
}

/// 100 keys of 1000 bytes: 5 keys a block, 4 fence keys a node: 20 blocks, 5 nodes, 2, a root.
fn deep_footer() -> (Vec<u8>, Trailer, LocationHeader) {
    let e = entries(100, 1000);
    let footer = encode_footer(SEG, AT, AT, 4096, &e);
    let len = footer.len();
    let t = Trailer::decode(&footer[len - TRAILER_LEN..], AT + len as u64).unwrap();
    let h = LocationHeader::decode(&t, &footer[(t.table_offset - AT) as usize..]).unwrap();
    assert_eq!(h.depth, 3);
    assert_eq!(decode_footer(&t, &footer, AT).unwrap().len(), 100);
    (footer, t, h)
}

/// Every node of the footer (offset, length, level), top down.
fn nodes(footer: &[u8], h: &LocationHeader) -> Vec<(BlockRef, u8)> {
    let mut out = Vec::new();
    let mut level = vec![h.root().unwrap()];
    for depth in (1..=h.depth).rev() {
        let mut below = Vec::new();
        for node in &level {
            out.push((*node, depth));
            let n = decode_index_node(SEG, depth, node, &footer[(node.offset - AT) as usize..])
                .unwrap();
            below.extend(n.children.iter().map(|c| c.block));
        }
        level = below;
    }
    out
}

#[test]
fn a_flip_in_any_node_fails_the_whole_decode_and_the_node() {
    let (footer, t, h) = deep_footer();
    let all = nodes(&footer, &h);
    assert_eq!(all.len(), 1 + 2 + 5);
    for (node, level) in all {
        let from = (node.offset - AT) as usize;
        let len = node.len as usize;
        for i in (0..16).chain((16..len).step_by(61)).chain(len - 8..len) {
            let mut bad = footer.clone();
            bad[from + i] ^= 0x20;
            assert!(
                matches!(
                    decode_index_node(SEG, level, &node, &bad[from..]),
                    Err(Corruption::ChecksumMismatch { .. })
                ),
                "node {node:?} byte {i}"
            );
            assert!(
                decode_footer(&t, &bad, AT).is_err(),
                "node {node:?} byte {i} undetected"
            );
        }
    }
}

#[test]
fn a_node_read_at_another_place_level_or_file_fails() {
    let (footer, _, h) = deep_footer();
    let all = nodes(&footer, &h);
    let (node, level) = all[3];
    let bytes = &footer[(node.offset - AT) as usize..];
    assert!(decode_index_node(SEG, level, &node, bytes).is_ok());
    let moved = BlockRef {
        offset: all[4].0.offset,
        ..node
    };
    assert!(matches!(
        decode_index_node(SEG, level, &moved, bytes),
        Err(Corruption::ChecksumMismatch { .. })
    ));
    assert!(matches!(
        decode_index_node(SEG + 1, level, &node, bytes),
        Err(Corruption::ChecksumMismatch { .. })
    ));
    for wrong in [0, level + 1, MAX_TREE_DEPTH + 1] {
        assert!(matches!(
            decode_index_node(SEG, wrong, &node, bytes),
            Err(Corruption::InvalidField {
                field: "footer index node level",
                ..
            })
        ));
    }
    // Another node's bytes copied over it (same length: both hold four 1000-byte keys).
    let (other, _) = all[4];
    assert_eq!(other.len, node.len);
    let mut bad = footer.clone();
    let src = footer[(other.offset - AT) as usize..][..other.len as usize].to_vec();
    bad[(node.offset - AT) as usize..][..node.len as usize].copy_from_slice(&src);
    let t = Trailer::decode(&bad[bad.len() - TRAILER_LEN..], AT + bad.len() as u64).unwrap();
    assert!(matches!(
        decode_footer(&t, &bad, AT),
        Err(Corruption::ChecksumMismatch { .. })
    ));
}

/// Rewrites the node at `node` with `edit` applied to its bytes and a crc that matches again:
/// what a writer that got the tree wrong would produce. The whole decode must still refuse it.
fn recrc(footer: &mut [u8], node: BlockRef, edit: impl Fn(&mut [u8])) {
    let from = (node.offset - AT) as usize;
    let body_end = from + node.len as usize - 4;
    edit(&mut footer[from..body_end]);
    let crc = block_crc(SEG, node.offset, &footer[from..body_end]);
    footer[body_end..body_end + 4].copy_from_slice(&crc.to_le_bytes());
}

#[test]
fn a_consistent_but_wrong_tree_is_refused() {
    let (footer, t, h) = deep_footer();
    let all = nodes(&footer, &h);
    let decode = |f: &[u8]| decode_footer(&t, f, AT);
    let field = |r: Result<Vec<FooterEntry>, Corruption>| match r {
        Err(Corruption::InvalidField { field, .. }) => field,
        other => panic!("{other:?}"),
    };
    // A fence key that is not its child's first key: in a node of level 1 (over key blocks),
    // and in the root (over nodes). The keys stay ascending within the node.
    for (node, _) in [all[3], all[0]] {
        let mut bad = footer.clone();
        // The first entry's key starts after the count, level, reserved byte, first child
        // offset and a 2-byte key length; its last byte is a padding 'x'.
        recrc(&mut bad, node, |b| b[NODE_HEADER_LEN + 2 + 999] = b'w');
        assert_eq!(field(decode(&bad)), "footer fence key");
    }
    // The first child moved by one byte: the children no longer lie back to back.
    let mut bad = footer.clone();
    recrc(&mut bad, all[4].0, |b| b[4] = b[4].wrapping_add(1));
    assert_eq!(field(decode(&bad)), "footer index child offset");
    // A wrong level recorded in a node.
    let mut bad = footer.clone();
    recrc(&mut bad, all[1].0, |b| b[2] = 1);
    assert_eq!(field(decode(&bad)), "footer index node level");
    // A child length one longer: its children end past the node.
    let mut bad = footer;
    recrc(&mut bad, all[7].0, |b| {
        let last = b.len() - 1;
        b[last] += 1;
    });
    assert!(decode(&bad).is_err());
}

/// The location table's header names the root; each of its fields is checked against the
/// trailer, and the key reader, which does not read the table's crc, relies on that.
#[test]
fn a_header_naming_a_wrong_root_is_refused() {
    let (footer, t, h) = deep_footer();
    let table = (t.table_offset - AT) as usize;
    let head = &footer[table..table + LOCATION_HEADER_LEN];
    assert_eq!(LocationHeader::decode_header(&t, head), Ok(h));
    let cases: [(usize, u8); 5] = [
        (4, 1),  // root length
        (24, 1), // root offset
        (32, 0), // depth 0 with keys
        (32, MAX_TREE_DEPTH + 1),
        (33, 1), // reserved
    ];
    for (at, v) in cases {
        let mut bad = head.to_vec();
        if at == 32 {
            bad[at] = v;
        } else {
            bad[at] ^= v;
        }
        assert!(
            matches!(
                LocationHeader::decode_header(&t, &bad),
                Err(Corruption::InvalidField { .. })
            ),
            "byte {at}"
        );
    }
    // Depth 2 instead of 3 passes the header (nothing there says otherwise) but not the root,
    // which records its level.
    let mut bad = head.to_vec();
    bad[32] = 2;
    let wrong = LocationHeader::decode_header(&t, &bad).unwrap();
    let root = wrong.root().unwrap();
    assert!(matches!(
        decode_index_node(
            SEG,
            wrong.depth,
            &root,
            &footer[(root.offset - AT) as usize..]
        ),
        Err(Corruption::InvalidField {
            field: "footer index node level",
            ..
        })
    ));
    // The leaves as the listing decoders see them agree with the whole decode.
    let blocks = leaves(&footer, AT, &h);
    assert_eq!(blocks.len(), 20);
}

#[test]
fn a_deep_footer_round_trips() {
    // 4 KiB keys: one a block, two a node: 40 blocks make six levels.
    let e = entries(40, MAX_KEY_LEN);
    let footer = encode_footer(SEG, AT, AT, 4096, &e);
    let len = footer.len();
    let t = Trailer::decode(&footer[len - TRAILER_LEN..], AT + len as u64).unwrap();
    let h = LocationHeader::decode(&t, &footer[(t.table_offset - AT) as usize..]).unwrap();
    assert_eq!(h.depth, 6);
    let mut want = e;
    want.sort_by(|a, b| a.key.cmp(&b.key));
    assert_eq!(decode_footer(&t, &footer, AT).unwrap(), want);
}
