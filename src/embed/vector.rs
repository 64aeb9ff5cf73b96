//! Vector arithmetic shared by the embedders, the HNSW graph, the learnings' exact
//! cosine and the seeded test vectors: the dot product (the cosine of unit vectors) and
//! L2 normalisation, from the `cairn-vectors` crate (`crates/vectors`, compiled optimised
//! even in the dev profile); and the codec of a vector stored in the database
//! (little-endian `f32`s), shared by the vault's chunks and the learnings' embeddings.

use super::embedder::DIMENSION;
use crate::error::{Error, Result};

pub use cairn_vectors::{dot, l2_normalize};

/// A vector as stored: little-endian f32s.
pub(crate) fn encode_vector(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// A stored vector back; an error names the chunk when the length is wrong.
pub(crate) fn decode_vector(id: i64, bytes: &[u8]) -> Result<Vec<f32>> {
    if bytes.len() != DIMENSION * 4 {
        return Err(Error::Index(format!(
            "chunk {id} has an embedding of {} bytes, expected {}; run `cairn reindex --rebuild`",
            bytes.len(),
            DIMENSION * 4
        )));
    }
    Ok(bytes
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dot_matches_a_plain_sum_and_normalising_gives_unit_length() {
        let a: Vec<f32> = (0..389).map(|i| (i as f32 * 0.37).sin()).collect();
        let b: Vec<f32> = (0..389).map(|i| (i as f32 * 0.11).cos()).collect();
        let plain: f32 = a.iter().zip(&b).map(|(x, y)| x * y).sum();
        assert!((dot(&a, &b) - plain).abs() < 1e-3 * plain.abs().max(1.0));
        let mut u = a.clone();
        l2_normalize(&mut u);
        assert!((dot(&u, &u) - 1.0).abs() < 1e-5);
        let mut zero = vec![0.0f32; 5];
        l2_normalize(&mut zero);
        assert_eq!(zero, vec![0.0; 5]);
    }

    #[test]
    fn vectors_round_trip_as_little_endian_f32() {
        let v: Vec<f32> = (0..DIMENSION).map(|i| i as f32 / 7.0 - 3.0).collect();
        let bytes = encode_vector(&v);
        assert_eq!(bytes.len(), DIMENSION * 4);
        assert_eq!(&bytes[4..8], &v[1].to_le_bytes());
        assert_eq!(decode_vector(1, &bytes).unwrap(), v);
        assert!(decode_vector(1, &bytes[..8]).is_err());
    }
}
