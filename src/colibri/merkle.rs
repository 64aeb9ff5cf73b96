//! The Merkle tree over an audit session's records (pure functions).
//!
//! Rules (decisions, since the document only says `SHA256(left + right)`):
//! - A leaf is a record's own SHA-256, used as its 32 raw bytes (the record hash is
//!   not hashed again).
//! - An internal node is `SHA-256(left || right)` over the two children's 32 raw bytes
//!   (64 bytes in, not their hex text).
//! - An odd node at the end of a level is promoted unchanged to the next level (it is
//!   not duplicated: duplication lets two different leaf lists share a root,
//!   CVE-2012-2459).
//! - `tree_depth` counts levels including the leaves and the root: 1 leaf → 1,
//!   2 → 2, 3 → 3, 8 → 4 (the document's example: 8 leaves, depth 4).
//! - The empty tree's root is SHA-256 of no bytes (`e3b0c442…`), depth 0.
//!
//! Roots are written as lower-case hex.

use sha2::{Digest, Sha256};

use crate::error::{Error, Result};

/// A computed tree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Tree {
    pub(crate) root: String,
    pub(crate) depth: u32,
    pub(crate) leaf_count: usize,
}

/// Decode a record hash (64 hex characters) into a leaf.
pub(crate) fn leaf(hash_hex: &str) -> Result<[u8; 32]> {
    let mut out = [0u8; 32];
    hex::decode_to_slice(hash_hex, &mut out).map_err(|_| {
        Error::FailedPrecondition(format!(
            "a record's stored hash {hash_hex:?} is not 64 hex characters; \
             run audit_verify_chain to find it"
        ))
    })?;
    Ok(out)
}

/// Build the tree over `leaves`, in order.
pub(crate) fn build(leaves: &[[u8; 32]]) -> Tree {
    if leaves.is_empty() {
        return Tree {
            root: hex::encode(Sha256::digest([])),
            depth: 0,
            leaf_count: 0,
        };
    }
    let mut level = leaves.to_vec();
    let mut depth = 1;
    while level.len() > 1 {
        level = level
            .chunks(2)
            .map(|pair| match pair {
                [l, r] => {
                    let mut h = Sha256::new();
                    h.update(l);
                    h.update(r);
                    h.finalize().into()
                }
                [odd] => *odd,
                _ => unreachable!("chunks(2) yields one or two"),
            })
            .collect();
        depth += 1;
    }
    Tree {
        root: hex::encode(level[0]),
        depth,
        leaf_count: leaves.len(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h(b: &[u8]) -> [u8; 32] {
        Sha256::digest(b).into()
    }

    #[test]
    fn shapes() {
        assert_eq!(build(&[]).depth, 0);
        let one = build(&[h(b"a")]);
        assert_eq!((one.depth, one.root.clone()), (1, hex::encode(h(b"a"))));
        let three = build(&[h(b"a"), h(b"b"), h(b"c")]);
        let ab = h(&[h(b"a"), h(b"b")].concat());
        assert_eq!(three.root, hex::encode(h(&[ab, h(b"c")].concat())));
        assert_eq!(three.depth, 3);
        assert_eq!(build(&[h(b"x"); 8]).depth, 4);
        assert_eq!(build(&[h(b"x"); 5]).depth, 4);
    }

    #[test]
    fn bad_leaf_is_refused() {
        assert!(leaf("zz").is_err());
        assert_eq!(leaf(&"ab".repeat(32)).unwrap(), [0xab; 32]);
    }
}
