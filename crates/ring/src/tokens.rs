//! Token generation for a node's vnodes and token formatting.

use rand::Rng;

use crate::Token;

/// `num_tokens` distinct random tokens, sorted, never `i64::MIN`. For nodes
/// joining a cluster, `allocation::allocate_tokens` balances ownership far
/// better (Cassandra 4's `allocate_tokens_for_local_replication_factor`).
pub fn random_tokens(rng: &mut impl Rng, num_tokens: usize) -> Vec<Token> {
    let mut tokens = std::collections::BTreeSet::new();
    while tokens.len() < num_tokens {
        let t: i64 = rng.gen();
        if t != i64::MIN {
            tokens.insert(t);
        }
    }
    tokens.into_iter().collect()
}

/// The CompositeType serialization Cassandra hashes for a compound partition
/// key: per component `u16 length (big endian) | bytes | 0x00`. A single-column
/// partition key is hashed as its raw bytes instead.
pub fn compound_key(components: &[&[u8]]) -> Vec<u8> {
    let mut out = Vec::with_capacity(components.iter().map(|c| c.len() + 3).sum());
    for c in components {
        let len = u16::try_from(c.len()).unwrap_or(u16::MAX);
        out.extend_from_slice(&len.to_be_bytes());
        out.extend_from_slice(c);
        out.push(0);
    }
    out
}
