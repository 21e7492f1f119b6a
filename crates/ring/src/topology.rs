//! Cluster topology and the token ring (Cassandra's `TokenMetadata`).
//!
//! Holds which node owns which token and where every node lives (data
//! center, rack). Pure data: no I/O, no clock.
//!
//! Invariants:
//! - Every token has exactly one owner; a node is present iff it owns at least
//!   one token (Cassandra's topology only counts nodes with tokens).
//! - No node owns `i64::MIN`, Cassandra's minimum token, which no key hashes
//!   to (`token_of` maps it to `i64::MAX`).
//! - Ranges are `(prev, token]`: a key's primary replica is the owner of the
//!   first ring token `>=` the key's token, wrapping past `i64::MAX` to the
//!   smallest token. With a single token, its range is the whole ring.
//! - `ring_from(t)` yields every ring token exactly once, starting at the
//!   first token `>= t` and wrapping around.
//! - The per-DC and per-rack membership indexes always agree with `nodes`.

use std::collections::{btree_map, BTreeMap, BTreeSet};
use std::fmt;
use std::str::FromStr;

use crate::Token;

/// A node's identity (Cassandra's host id, a UUID), as its 128 bits.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct HostId(pub u128);

impl HostId {
    /// From the UUID's 16 bytes (big endian, as `uuid::Uuid::as_bytes`).
    pub const fn from_bytes(bytes: [u8; 16]) -> Self {
        HostId(u128::from_be_bytes(bytes))
    }

    /// The UUID's 16 bytes (big endian, as `uuid::Uuid::from_bytes` takes).
    pub const fn to_bytes(self) -> [u8; 16] {
        self.0.to_be_bytes()
    }
}

impl fmt::Display for HostId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let h = format!("{:032x}", self.0);
        write!(f, "{}-{}-{}-{}-{}", &h[0..8], &h[8..12], &h[12..16], &h[16..20], &h[20..32])
    }
}

impl fmt::Debug for HostId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "HostId({self})")
    }
}

/// Why a host id string did not parse.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParseHostIdError;

impl fmt::Display for ParseHostIdError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a host id is 32 hex digits, optionally hyphenated as a UUID")
    }
}

impl std::error::Error for ParseHostIdError {}

impl FromStr for HostId {
    type Err = ParseHostIdError;

    /// Parses a UUID string (`8-4-4-4-12` hex digits) or 32 bare hex digits.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let hex: String = s.chars().filter(|c| *c != '-').collect();
        let hyphens = s.len() - hex.len();
        if hex.len() != 32 || !(hyphens == 0 || hyphens == 4) {
            return Err(ParseHostIdError);
        }
        if hyphens == 4 && [8, 13, 18, 23].iter().any(|&i| s.as_bytes().get(i) != Some(&b'-')) {
            return Err(ParseHostIdError);
        }
        u128::from_str_radix(&hex, 16).map(HostId).map_err(|_| ParseHostIdError)
    }
}

/// Where a node lives.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct NodeInfo {
    pub host_id: HostId,
    pub dc: String,
    pub rack: String,
}

impl NodeInfo {
    pub fn new(host_id: HostId, dc: impl Into<String>, rack: impl Into<String>) -> Self {
        NodeInfo { host_id, dc: dc.into(), rack: rack.into() }
    }
}

/// Why a topology change was refused. A refused change leaves the metadata
/// untouched.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TopologyError {
    /// A node must own at least one token.
    NoTokens(HostId),
    /// `i64::MIN` is Cassandra's minimum token and cannot be owned.
    InvalidToken(Token),
    /// The token already belongs to another node.
    TokenTaken { token: Token, owner: HostId },
}

impl fmt::Display for TopologyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TopologyError::NoTokens(h) => write!(f, "node {h} has no tokens"),
            TopologyError::InvalidToken(t) => write!(f, "token {t} is the minimum token and cannot be owned"),
            TopologyError::TokenTaken { token, owner } => {
                write!(f, "token {token} is already owned by node {owner}")
            }
        }
    }
}

impl std::error::Error for TopologyError {}

/// The number of tokens in the range `(start, end]`, wrapping; `start == end`
/// is the whole ring (2^64).
pub fn range_size(start: Token, end: Token) -> u128 {
    if start == end {
        1u128 << 64
    } else {
        u128::from(end.wrapping_sub(start) as u64)
    }
}

/// A token range `(start, end]`, wrapping past `i64::MAX`; `start == end` is
/// the whole ring.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct TokenRange {
    /// Exclusive.
    pub start: Token,
    /// Inclusive.
    pub end: Token,
}

impl TokenRange {
    pub fn new(start: Token, end: Token) -> Self {
        TokenRange { start, end }
    }

    /// Number of tokens in the range (2^64 for the whole ring).
    pub fn size(&self) -> u128 {
        range_size(self.start, self.end)
    }

    /// The range's share of the ring, in `(0, 1]`.
    pub fn fraction(&self) -> f64 {
        self.size() as f64 / (1u128 << 64) as f64
    }

    /// Whether `t` lies in `(start, end]`.
    pub fn contains(&self, t: Token) -> bool {
        if self.start == self.end {
            return true;
        }
        if self.start < self.end {
            self.start < t && t <= self.end
        } else {
            t > self.start || t <= self.end
        }
    }
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct DcMembers {
    nodes: BTreeSet<HostId>,
    racks: BTreeMap<String, BTreeSet<HostId>>,
}

/// The token ring and the topology of the nodes that own it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TokenMetadata {
    ring: BTreeMap<Token, HostId>,
    nodes: BTreeMap<HostId, (NodeInfo, BTreeSet<Token>)>,
    dcs: BTreeMap<String, DcMembers>,
}

impl TokenMetadata {
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a node with its tokens, or replaces the location and tokens of a
    /// node already present (a move). Refused, with nothing changed, if
    /// `tokens` is empty, holds `i64::MIN`, or holds a token another node owns.
    pub fn add_node(&mut self, info: NodeInfo, tokens: impl IntoIterator<Item = Token>) -> Result<(), TopologyError> {
        let tokens: BTreeSet<Token> = tokens.into_iter().collect();
        if tokens.is_empty() {
            return Err(TopologyError::NoTokens(info.host_id));
        }
        for &t in &tokens {
            if t == Token::MIN {
                return Err(TopologyError::InvalidToken(t));
            }
            if let Some(&owner) = self.ring.get(&t) {
                if owner != info.host_id {
                    return Err(TopologyError::TokenTaken { token: t, owner });
                }
            }
        }
        self.remove_node(info.host_id);
        for &t in &tokens {
            self.ring.insert(t, info.host_id);
        }
        let dc = self.dcs.entry(info.dc.clone()).or_default();
        dc.nodes.insert(info.host_id);
        dc.racks.entry(info.rack.clone()).or_default().insert(info.host_id);
        self.nodes.insert(info.host_id, (info, tokens));
        Ok(())
    }

    /// Removes a node and its tokens; returns where it lived.
    pub fn remove_node(&mut self, host: HostId) -> Option<NodeInfo> {
        let (info, tokens) = self.nodes.remove(&host)?;
        for t in &tokens {
            self.ring.remove(t);
        }
        if let Some(dc) = self.dcs.get_mut(&info.dc) {
            dc.nodes.remove(&host);
            if let Some(rack) = dc.racks.get_mut(&info.rack) {
                rack.remove(&host);
                if rack.is_empty() {
                    dc.racks.remove(&info.rack);
                }
            }
            if dc.nodes.is_empty() {
                self.dcs.remove(&info.dc);
            }
        }
        Some(info)
    }

    /// Where a node lives, if it is in the ring.
    pub fn node(&self, host: HostId) -> Option<&NodeInfo> {
        self.nodes.get(&host).map(|(info, _)| info)
    }

    /// Every node, in host id order.
    pub fn nodes(&self) -> impl Iterator<Item = &NodeInfo> + '_ {
        self.nodes.values().map(|(info, _)| info)
    }

    pub fn node_count(&self) -> usize {
        self.nodes.len()
    }

    /// Number of tokens in the ring.
    pub fn token_count(&self) -> usize {
        self.ring.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ring.is_empty()
    }

    /// A node's tokens, sorted (empty for an unknown node).
    pub fn tokens_of(&self, host: HostId) -> impl Iterator<Item = Token> + '_ {
        self.nodes.get(&host).into_iter().flat_map(|(_, tokens)| tokens.iter().copied())
    }

    /// The node owning exactly this ring token.
    pub fn owner_of(&self, token: Token) -> Option<HostId> {
        self.ring.get(&token).copied()
    }

    /// All ring tokens with their owners, ascending.
    pub fn sorted_tokens(&self) -> impl Iterator<Item = (Token, HostId)> + '_ {
        self.ring.iter().map(|(&t, &h)| (t, h))
    }

    /// The first ring token `>= t`, wrapping to the smallest token.
    pub fn first_token(&self, t: Token) -> Option<Token> {
        self.ring.range(t..).next().or_else(|| self.ring.iter().next()).map(|(&tok, _)| tok)
    }

    /// The last ring token `< t`, wrapping to the largest token. For a ring
    /// token this is the start of its range.
    pub fn predecessor(&self, t: Token) -> Option<Token> {
        self.ring.range(..t).next_back().or_else(|| self.ring.iter().next_back()).map(|(&tok, _)| tok)
    }

    /// The ring range `(prev, first_token(t)]` that holds `t`.
    pub fn range_of(&self, t: Token) -> Option<TokenRange> {
        let end = self.first_token(t)?;
        let start = self.predecessor(end)?;
        Some(TokenRange { start, end })
    }

    /// The primary replica for a key with token `t`: the owner of the first
    /// ring token `>= t`, wrapping.
    pub fn primary_owner(&self, t: Token) -> Option<HostId> {
        self.first_token(t).and_then(|tok| self.owner_of(tok))
    }

    /// Every ring token once, with its owner, starting at the first token
    /// `>= t` and wrapping around.
    pub fn ring_from(&self, t: Token) -> RingIter<'_> {
        RingIter { first: self.ring.range(t..), second: self.ring.range(..t) }
    }

    /// Every range of the ring with its primary owner, in ring order of the
    /// ranges' end tokens.
    pub fn ranges(&self) -> impl Iterator<Item = (TokenRange, HostId)> + '_ {
        let last = self.ring.keys().next_back().copied();
        let mut prev = last;
        self.ring.iter().map(move |(&t, &h)| {
            let start = prev.unwrap_or(t);
            prev = Some(t);
            (TokenRange { start, end: t }, h)
        })
    }

    /// The data centers that have nodes, sorted.
    pub fn datacenters(&self) -> impl Iterator<Item = &str> + '_ {
        self.dcs.keys().map(String::as_str)
    }

    /// The nodes of a data center, in host id order.
    pub fn nodes_in_dc<'a>(&'a self, dc: &str) -> impl Iterator<Item = HostId> + 'a {
        self.dcs.get(dc).into_iter().flat_map(|m| m.nodes.iter().copied())
    }

    /// The racks of a data center that have nodes, sorted.
    pub fn racks_in_dc<'a>(&'a self, dc: &str) -> impl Iterator<Item = &'a str> + 'a {
        self.dcs.get(dc).into_iter().flat_map(|m| m.racks.keys().map(String::as_str))
    }

    /// Number of nodes in a data center.
    pub fn dc_node_count(&self, dc: &str) -> usize {
        self.dcs.get(dc).map_or(0, |m| m.nodes.len())
    }

    /// Number of racks (with nodes) in a data center.
    pub fn dc_rack_count(&self, dc: &str) -> usize {
        self.dcs.get(dc).map_or(0, |m| m.racks.len())
    }
}

/// Iterator over the ring from a starting token, wrapping once.
pub struct RingIter<'a> {
    first: btree_map::Range<'a, Token, HostId>,
    second: btree_map::Range<'a, Token, HostId>,
}

impl Iterator for RingIter<'_> {
    type Item = (Token, HostId);

    fn next(&mut self) -> Option<Self::Item> {
        self.first.next().or_else(|| self.second.next()).map(|(&t, &h)| (t, h))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h(n: u128) -> HostId {
        HostId(n)
    }

    fn sample() -> TokenMetadata {
        let mut tm = TokenMetadata::new();
        tm.add_node(NodeInfo::new(h(1), "dc1", "r1"), [-100, 50]).unwrap();
        tm.add_node(NodeInfo::new(h(2), "dc1", "r2"), [0, 100]).unwrap();
        tm
    }

    #[test]
    fn primary_owner_wraps() {
        let tm = sample();
        assert_eq!(tm.primary_owner(-100), Some(h(1)));
        assert_eq!(tm.primary_owner(-99), Some(h(2)));
        assert_eq!(tm.primary_owner(0), Some(h(2)));
        assert_eq!(tm.primary_owner(1), Some(h(1)));
        assert_eq!(tm.primary_owner(101), Some(h(1)));
        assert_eq!(tm.primary_owner(i64::MAX), Some(h(1)));
        assert_eq!(tm.primary_owner(i64::MIN + 1), Some(h(1)));
        assert_eq!(tm.range_of(101), Some(TokenRange::new(100, -100)));
        assert_eq!(tm.range_of(-100), Some(TokenRange::new(100, -100)));
        assert_eq!(tm.range_of(0), Some(TokenRange::new(-100, 0)));
    }

    #[test]
    fn ring_from_visits_each_token_once() {
        let tm = sample();
        let from = |t| tm.ring_from(t).map(|(t, _)| t).collect::<Vec<_>>();
        assert_eq!(from(1), vec![50, 100, -100, 0]);
        assert_eq!(from(50), vec![50, 100, -100, 0]);
        assert_eq!(from(101), vec![-100, 0, 50, 100]);
        assert_eq!(from(i64::MIN), vec![-100, 0, 50, 100]);
    }

    #[test]
    fn ranges_cover_the_ring() {
        let tm = sample();
        let total: u128 = tm.ranges().map(|(r, _)| r.size()).sum();
        assert_eq!(total, 1u128 << 64);
        let mut one = TokenMetadata::new();
        one.add_node(NodeInfo::new(h(1), "dc1", "r1"), [7]).unwrap();
        let ranges: Vec<_> = one.ranges().collect();
        assert_eq!(ranges, vec![(TokenRange::new(7, 7), h(1))]);
        assert_eq!(ranges[0].0.size(), 1u128 << 64);
        assert!(ranges[0].0.contains(i64::MIN));
    }

    #[test]
    fn range_contains_wraps() {
        let r = TokenRange::new(100, -100);
        assert!(r.contains(101) && r.contains(i64::MAX) && r.contains(i64::MIN) && r.contains(-100));
        assert!(!r.contains(100) && !r.contains(0) && !r.contains(-99));
        assert_eq!(r.size(), (1u128 << 64) - 200);
    }

    #[test]
    fn changes_are_validated_and_indexed() {
        let mut tm = sample();
        assert_eq!(
            tm.add_node(NodeInfo::new(h(3), "dc2", "r1"), [0]),
            Err(TopologyError::TokenTaken { token: 0, owner: h(2) })
        );
        assert_eq!(tm.add_node(NodeInfo::new(h(3), "dc2", "r1"), []), Err(TopologyError::NoTokens(h(3))));
        assert_eq!(
            tm.add_node(NodeInfo::new(h(3), "dc2", "r1"), [i64::MIN]),
            Err(TopologyError::InvalidToken(i64::MIN))
        );
        assert_eq!(tm.token_count(), 4);
        assert_eq!(tm.datacenters().collect::<Vec<_>>(), vec!["dc1"]);

        // A move replaces location and tokens.
        tm.add_node(NodeInfo::new(h(2), "dc2", "rx"), [5]).unwrap();
        assert_eq!(tm.datacenters().collect::<Vec<_>>(), vec!["dc1", "dc2"]);
        assert_eq!(tm.racks_in_dc("dc1").collect::<Vec<_>>(), vec!["r1"]);
        assert_eq!(tm.tokens_of(h(2)).collect::<Vec<_>>(), vec![5]);
        assert_eq!(tm.owner_of(0), None);
        assert_eq!(tm.remove_node(h(2)).map(|n| n.dc), Some("dc2".to_string()));
        assert_eq!(tm.datacenters().collect::<Vec<_>>(), vec!["dc1"]);
        assert_eq!(tm.dc_node_count("dc1"), 1);
        assert_eq!(tm.dc_rack_count("dc2"), 0);
    }

    #[test]
    fn host_id_formats_as_uuid() {
        let id: HostId = "550e8400-e29b-41d4-a716-446655440000".parse().unwrap();
        assert_eq!(id.to_string(), "550e8400-e29b-41d4-a716-446655440000");
        assert_eq!(HostId::from_bytes(id.to_bytes()), id);
        assert_eq!("550e8400e29b41d4a716446655440000".parse::<HostId>(), Ok(id));
        assert!("550e8400-e29b-41d4-a716".parse::<HostId>().is_err());
        assert!("550e8400e-29b-41d4-a716-446655440000".parse::<HostId>().is_err());
    }
}
