//! Balanced token allocation for a node joining a data center (the job of
//! Cassandra 4's `allocate_tokens_for_local_replication_factor`).
//!
//! The joining node's tokens are chosen against a model of its own data
//! center only: under `NetworkTopologyStrategy` a DC's replicas depend only
//! on the DC's own tokens, so the model is the DC-local ring, and replica
//! placement in it is computed exactly as `NetworkTopologyStrategy` does it
//! with `{dc: local_rf}` (racks included, the joining node counted).
//!
//! - The first node of a DC gets evenly spaced tokens from a random offset.
//!   So does the first node of a new rack while the DC has at most
//!   `local_rf` racks: every range then needs a replica from that rack, so
//!   the node replicates everything and, as replica walks take the first node
//!   of each rack plus the first `rf - racks` rack repeats wherever its
//!   tokens lie, its tokens cannot change anyone's effective ownership; even
//!   spacing is what later nodes of its rack split best.
//! - While the DC (joining node included) has at most `local_rf` nodes,
//!   every node replicates everything, so balance cannot be measured yet;
//!   tokens come from repeatedly splitting the largest DC-local range at a
//!   ratio near the golden section (varied range sizes, which later joins can
//!   balance well, as Cassandra does).
//! - Otherwise tokens are placed greedily, one at a time. For every range of
//!   the DC-local ring the best split point is found in closed form and
//!   scored by the change it makes to an objective summing, over the DC's
//!   nodes, `(ownership / tokens - opt)^2` and, over the DC's tokens,
//!   `(vnode ownership - opt)^2 / tokens^2`, where ownership is the exact
//!   replicated (effective) ownership, a vnode's ownership is the ranges whose
//!   replica walk takes its node at that vnode, and `opt` is the rack's share
//!   of the replicas over its tokens after the join (shares water-filled by
//!   node count within what racks allow: with `rf` racks, exactly one replica
//!   per rack, so a node in a smaller rack must own more). Targets move in
//!   step: after `p` of `k` tokens the joining node aims at `p` tokens' worth
//!   and every other node at `p / k` of the way from its ownership before the
//!   join to its final share, so each token takes its part. After all `k` are
//!   placed, one local-search sweep takes each out and places it again with
//!   all the others known (never worse: its old spot is a candidate).
//!   Inserting a token only changes the replica sets of the ranges whose walk
//!   reaches it, so a candidate is scored by re-walking just those. When a
//!   rack holds few tokens those walks are long; scoring then stops after a
//!   fixed budget of walk steps per token (at least 64 candidates, visited in
//!   an order spread over the ring), so a join stays fast on any ring.
//!
//! Invariants:
//! - Returns exactly `num_tokens` distinct sorted tokens, none `i64::MIN`,
//!   none owned by any node of `tm` (any DC).
//! - Deterministic given `tm`, the arguments and the RNG's output; the RNG is
//!   used only for the first nodes of a DC.
//! - No I/O, no clock; randomness only from the `rng` argument.

use std::collections::{BTreeMap, BTreeSet};

use rand::Rng;

use crate::topology::{range_size, TokenMetadata};
use crate::Token;

const RING: f64 = 18_446_744_073_709_551_616.0; // 2^64

/// Walk steps scoring may spend per token before it settles for the
/// candidates seen so far (only reached when some rack holds few tokens, so
/// replica walks are long); at least `MIN_CANDIDATES` are always scored.
const STEP_BUDGET: u64 = 1_000_000;
const MIN_CANDIDATES: usize = 64;

/// Local-search sweeps over the joining unit's tokens after placing them.
const REFINE_SWEEPS: usize = 1;

/// Initial splits use ratios in `[1 - 1/sqrt(5), 1 - 1/sqrt(5) + 0.075)`.
const SPLIT_MIN: f64 = 0.552_786_404_500_042;
const SPLIT_SPREAD: f64 = 0.075;

/// Chooses `num_tokens` tokens for a node joining data center `dc`, rack
/// `rack`, balancing the effective ownership of the DC's nodes for a
/// keyspace replicated `local_rf` times in that DC (0 is taken as 1).
/// `tm` must not contain the joining node.
pub fn allocate_tokens(
    tm: &TokenMetadata,
    dc: &str,
    rack: &str,
    num_tokens: usize,
    local_rf: u32,
    rng: &mut impl Rng,
) -> Vec<Token> {
    if num_tokens == 0 {
        return Vec::new();
    }
    let rf = local_rf.max(1) as usize;

    let mut unit_of = BTreeMap::new();
    let mut rack_of = BTreeMap::new();
    let mut unit_rack = Vec::new();
    let mut ring: Vec<(Token, u32)> = Vec::new();
    for (token, host) in tm.sorted_tokens() {
        let Some(info) = tm.node(host) else { continue };
        if info.dc != dc {
            continue;
        }
        let unit = *unit_of.entry(host).or_insert_with(|| {
            let racks = rack_of.len() as u32;
            let r = *rack_of.entry(info.rack.clone()).or_insert(racks);
            unit_rack.push(r);
            unit_rack.len() as u32 - 1
        });
        ring.push((token, unit));
    }
    let racks = rack_of.len() as u32;
    let new_rack = *rack_of.entry(rack.to_string()).or_insert(racks);
    unit_rack.push(new_rack);

    let alone_in_rack = !unit_rack[..unit_rack.len() - 1].contains(&new_rack);
    let mut out = if ring.is_empty() || (alone_in_rack && rack_of.len() <= rf) {
        even_tokens(tm, num_tokens, rng)
    } else if unit_rack.len() <= rf {
        split_tokens(tm, ring.iter().map(|&(t, _)| t).collect(), num_tokens, rng)
    } else {
        let mut model = Model::new(ring, unit_rack, rack_of.len(), rf, num_tokens);
        model.allocate(tm)
    };
    out.sort_unstable();
    out
}

/// The ideal replicated ownership of one token, per rack, once the joining
/// unit has `num_tokens` tokens. Each rack's share of the replicas is
/// water-filled: proportional to its nodes, but when there are at most `rf`
/// racks every rack holds at least one replica of every range and at most
/// one plus the `rf - racks` rack repeats, and with more racks than `rf` a
/// rack holds at most one. A rack's share is spread evenly over its tokens.
fn rack_targets(unit_rack: &[u32], unit_tokens: &[usize], racks: usize, rf: usize, num_tokens: usize) -> Vec<f64> {
    let new_unit = unit_rack.len() - 1;
    let mut nodes = vec![0usize; racks];
    let mut tokens = vec![0usize; racks];
    for (u, &r) in unit_rack.iter().enumerate() {
        nodes[r as usize] += 1;
        tokens[r as usize] += if u == new_unit { num_tokens } else { unit_tokens[u] };
    }
    let total = rf.min(unit_rack.len()) as f64;
    let (lo, extra) = if racks <= rf { (1.0, (rf - racks) as f64 + 1.0) } else { (0.0, 1.0) };
    let share = |lambda: f64, r: usize| (lambda * nodes[r] as f64).clamp(lo, extra.min(nodes[r] as f64));
    let (mut a, mut b) = (0.0, total);
    for _ in 0..100 {
        let mid = (a + b) / 2.0;
        if (0..racks).map(|r| share(mid, r)).sum::<f64>() < total {
            a = mid;
        } else {
            b = mid;
        }
    }
    (0..racks).map(|r| share(b, r) / tokens[r].max(1) as f64).collect()
}

fn gcd(mut a: usize, mut b: usize) -> usize {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

fn is_free(tm: &TokenMetadata, chosen: &BTreeSet<Token>, t: Token) -> bool {
    t != Token::MIN && tm.owner_of(t).is_none() && !chosen.contains(&t)
}

/// `start + off` (wrapping), moved forward past taken tokens but staying
/// inside `(start, start + size)`.
fn free_token_in(tm: &TokenMetadata, chosen: &BTreeSet<Token>, start: Token, size: u128, off: u128) -> Option<Token> {
    let mut off = off.max(1);
    while off < size {
        let t = start.wrapping_add(off as u64 as i64);
        if is_free(tm, chosen, t) {
            return Some(t);
        }
        off += 1;
    }
    None
}

/// Evenly spaced tokens from a random offset (the first node of a DC).
fn even_tokens(tm: &TokenMetadata, num_tokens: usize, rng: &mut impl Rng) -> Vec<Token> {
    let offset: u64 = rng.gen();
    let step = (1u128 << 64) / num_tokens as u128;
    let mut chosen = BTreeSet::new();
    for i in 0..num_tokens as u128 {
        let mut t = (u128::from(offset) + i * step) as u64 as i64;
        while !is_free(tm, &chosen, t) {
            t = t.wrapping_add(1);
        }
        chosen.insert(t);
    }
    chosen.into_iter().collect()
}

/// Repeatedly splits the largest range of the DC-local ring `dc_tokens`.
fn split_tokens(tm: &TokenMetadata, mut dc_tokens: Vec<Token>, num_tokens: usize, rng: &mut impl Rng) -> Vec<Token> {
    dc_tokens.sort_unstable();
    let mut chosen = BTreeSet::new();
    while chosen.len() < num_tokens {
        let n = dc_tokens.len();
        let (mut best, mut best_size) = (0, 0u128);
        for i in 0..n {
            let size = range_size(dc_tokens[(i + n - 1) % n], dc_tokens[i]);
            if size > best_size {
                best = i;
                best_size = size;
            }
        }
        let start = dc_tokens[(best + n - 1) % n];
        let ratio = SPLIT_MIN + SPLIT_SPREAD * rng.gen::<f64>();
        let off = (best_size as f64 * ratio) as u128;
        let t = match free_token_in(tm, &chosen, start, best_size, off) {
            Some(t) => t,
            // The ring is packed solid: any free token will do.
            None => loop {
                let t: Token = rng.gen();
                if is_free(tm, &chosen, t) {
                    break t;
                }
            },
        };
        chosen.insert(t);
        let at = dc_tokens.partition_point(|&x| x < t);
        dc_tokens.insert(at, t);
    }
    chosen.into_iter().collect()
}

/// The DC-local ring with the joining unit, and its replicated ownership.
#[derive(Clone)]
struct Model {
    num_tokens: usize,
    /// Replicas each range gets once the walk completes: `min(rf, units)`.
    rf_left: usize,
    /// Rack repeats allowed per walk: `rf - racks`.
    repeats: i64,
    unit_rack: Vec<u32>,
    unit_tokens: Vec<usize>,
    new_unit: u32,
    /// Per rack: the ideal replicated ownership of one of its tokens.
    opt: Vec<f64>,
    /// Per unit: replicated ownership before the join.
    own_before: Vec<f64>,
    ring: Vec<(Token, u32)>,
    // Derived by `rebuild`.
    size: Vec<f64>,
    size_int: Vec<u128>,
    /// Per range (by end index): the token indices at which its walk
    /// accepted a replica.
    accepted: Vec<Vec<u32>>,
    /// Per range: tokens examined by its walk; `usize::MAX` if it never
    /// completes (the joining unit has no token yet).
    walk_len: Vec<usize>,
    max_walk: usize,
    own: Vec<f64>,
    vown: Vec<f64>,
}

/// Dense per-candidate accumulator of `constant + g * x` deltas.
#[derive(Default)]
struct Deltas {
    a: Vec<f64>,
    g: Vec<f64>,
    mark: Vec<u32>,
    touched: Vec<u32>,
}

impl Deltas {
    fn reset(&mut self, len: usize) {
        self.a.resize(len, 0.0);
        self.g.resize(len, 0.0);
        self.mark.clear();
        self.mark.resize(len, 0);
        self.touched.clear();
    }

    fn add(&mut self, stamp: u32, key: u32, a: f64, g: f64) {
        let k = key as usize;
        if self.mark[k] != stamp {
            self.mark[k] = stamp;
            self.a[k] = 0.0;
            self.g[k] = 0.0;
            self.touched.push(key);
        }
        self.a[k] += a;
        self.g[k] += g;
    }
}

/// `F(x) = s0 + 2 s1 x + s2 x^2` minus the terms it replaces.
#[derive(Default)]
struct Quadratic {
    s0: f64,
    s1: f64,
    s2: f64,
    old: f64,
}

impl Quadratic {
    fn term(&mut self, c: f64, a: f64, g: f64, old: f64) {
        self.s0 += c * a * a;
        self.s1 += c * a * g;
        self.s2 += c * g * g;
        self.old += c * old * old;
    }

    /// The best `x` in `[lo, hi]` and the change of the objective there.
    fn minimise(&self, lo: f64, hi: f64) -> (f64, f64) {
        let x = if self.s2 > 0.0 { (-self.s1 / self.s2).clamp(lo, hi) } else { (lo + hi) / 2.0 };
        (x, self.at(x))
    }

    fn at(&self, x: f64) -> f64 {
        self.s0 + 2.0 * self.s1 * x + self.s2 * x * x - self.old
    }
}

impl Model {
    fn new(ring: Vec<(Token, u32)>, unit_rack: Vec<u32>, racks: usize, rf: usize, num_tokens: usize) -> Self {
        let units = unit_rack.len();
        let mut unit_tokens = vec![0; units];
        for &(_, u) in &ring {
            unit_tokens[u as usize] += 1;
        }
        let rf_left = rf.min(units);
        let opt = rack_targets(&unit_rack, &unit_tokens, racks, rf, num_tokens);
        let mut model = Model {
            num_tokens,
            rf_left,
            repeats: rf as i64 - racks as i64,
            new_unit: units as u32 - 1,
            unit_rack,
            unit_tokens,
            opt,
            own_before: Vec::new(),
            ring,
            size: Vec::new(),
            size_int: Vec::new(),
            accepted: Vec::new(),
            walk_len: Vec::new(),
            max_walk: 0,
            own: Vec::new(),
            vown: Vec::new(),
        };
        model.rebuild();
        model.own_before = model.own.clone();
        model
    }

    /// What unit `u` should own once the joining unit has `placed` of its
    /// tokens: existing units move from their ownership before the join
    /// towards their final share in step with the joining unit's progress.
    fn unit_target(&self, u: usize, placed: usize) -> f64 {
        let count = if u as u32 == self.new_unit { placed } else { self.unit_tokens[u] };
        let fin = count as f64 * self.opt[self.unit_rack[u] as usize];
        if u as u32 == self.new_unit {
            return fin;
        }
        let progress = placed as f64 / self.num_tokens as f64;
        self.own_before[u] + progress * (fin - self.own_before[u])
    }

    /// The replica walk (NTS for one DC) over a ring of `n` tokens given by
    /// `at(index) -> (token key, unit)`, from index `start`. Fills `out` with
    /// the accepted `(key, unit)`s; returns the tokens examined, or
    /// `usize::MAX` if the walk cannot complete.
    fn walk(
        &self,
        n: usize,
        start: usize,
        at: impl Fn(usize) -> (u32, u32),
        out: &mut Vec<(u32, u32)>,
        racks: &mut Vec<u32>,
    ) -> usize {
        out.clear();
        racks.clear();
        let mut left = self.rf_left;
        let mut repeats = self.repeats;
        for step in 0..n {
            let (key, unit) = at((start + step) % n);
            if out.iter().any(|&(_, u)| u == unit) {
                continue;
            }
            let rack = self.unit_rack[unit as usize];
            if !racks.contains(&rack) {
                racks.push(rack);
            } else if repeats > 0 {
                repeats -= 1;
            } else {
                continue;
            }
            out.push((key, unit));
            left -= 1;
            if left == 0 {
                return step + 1;
            }
        }
        usize::MAX
    }

    fn rebuild(&mut self) {
        let n = self.ring.len();
        self.size = Vec::with_capacity(n);
        self.size_int = Vec::with_capacity(n);
        for i in 0..n {
            let s = range_size(self.ring[(i + n - 1) % n].0, self.ring[i].0);
            self.size_int.push(s);
            self.size.push(s as f64 / RING);
        }
        self.own = vec![0.0; self.unit_rack.len()];
        self.vown = vec![0.0; n];
        self.accepted = Vec::with_capacity(n);
        self.walk_len = Vec::with_capacity(n);
        self.max_walk = 0;
        let (mut out, mut racks) = (Vec::new(), Vec::new());
        for i in 0..n {
            let len = self.walk(n, i, |v| (v as u32, self.ring[v].1), &mut out, &mut racks);
            for &(key, unit) in &out {
                self.vown[key as usize] += self.size[i];
                self.own[unit as usize] += self.size[i];
            }
            self.accepted.push(out.iter().map(|&(k, _)| k).collect());
            self.walk_len.push(len);
            self.max_walk = self.max_walk.max(len);
        }
    }

    /// Scores inserting a joining-unit token into range `j` (ending at ring
    /// index `j`): the split point `x` (a ring fraction from the range's start;
    /// the best one unless `fixed_x`) and the change of the objective.
    fn score(&self, sc: &mut Scratch, j: usize, fixed_x: Option<f64>) -> (f64, f64) {
        let n = self.ring.len();
        let new_key = n as u32;
        sc.stamp += 1;
        let stamp = sc.stamp;
        let Scratch { toks, units, out, racks, steps, .. } = sc;
        *steps += self.max_walk.min(n) as u64;
        toks.touched.clear();
        units.touched.clear();
        let at = |v: usize| -> (u32, u32) {
            if v < j {
                (v as u32, self.ring[v].1)
            } else if v == j {
                (new_key, self.new_unit)
            } else {
                ((v - 1) as u32, self.ring[v - 1].1)
            }
        };
        // The split range: (prev, t] is walked from the new token and grows
        // with x; (t, end] keeps range j's replicas and shrinks.
        *steps += self.walk(n + 1, j, at, out, racks).min(n + 1) as u64;
        for &(key, unit) in out.iter() {
            toks.add(stamp, key, 0.0, 1.0);
            units.add(stamp, unit, 0.0, 1.0);
        }
        for &key in &self.accepted[j] {
            toks.add(stamp, key, 0.0, -1.0);
            units.add(stamp, self.ring[key as usize].1, 0.0, -1.0);
        }
        // Earlier ranges whose walk reaches the new token.
        for d in 1..self.max_walk.min(n) {
            let i = (j + n - d) % n;
            if self.walk_len[i] <= d {
                continue;
            }
            let s = self.size[i];
            for &key in &self.accepted[i] {
                toks.add(stamp, key, -s, 0.0);
                units.add(stamp, self.ring[key as usize].1, -s, 0.0);
            }
            let vi = if i < j { i } else { i + 1 };
            *steps += self.walk(n + 1, vi, at, out, racks).min(n + 1) as u64;
            for &(key, unit) in out.iter() {
                toks.add(stamp, key, s, 0.0);
                units.add(stamp, unit, s, 0.0);
            }
        }
        let placed = self.unit_tokens[self.new_unit as usize];
        let mut q = Quadratic::default();
        for &key in &toks.touched {
            let k = key as usize;
            let (base, unit) = if key == new_key { (0.0, self.new_unit) } else { (self.vown[k], self.ring[k].1) };
            let count = if unit == self.new_unit { self.num_tokens } else { self.unit_tokens[unit as usize] } as f64;
            let opt = self.opt[self.unit_rack[unit as usize] as usize];
            let old = if key == new_key { 0.0 } else { base - opt };
            q.term(1.0 / (count * count), base + toks.a[k] - opt, toks.g[k], old);
        }
        for &unit in &units.touched {
            let u = unit as usize;
            let count = if unit == self.new_unit { placed + 1 } else { self.unit_tokens[u] } as f64;
            let target = self.unit_target(u, placed + 1);
            q.term(1.0 / (count * count), self.own[u] + units.a[u] - target, units.g[u], self.own[u] - target);
        }
        let size = self.size[j];
        match fixed_x {
            Some(x) => (q.at(x), x),
            None => {
                let (x, change) = q.minimise(size * 0.001, size * 0.999);
                (change, x)
            }
        }
    }

    fn insert(&mut self, t: Token) {
        self.ring.push((t, self.new_unit));
        self.ring.sort_unstable_by_key(|&(t, _)| t);
        self.unit_tokens[self.new_unit as usize] += 1;
        self.rebuild();
    }

    fn remove(&mut self, t: Token) {
        self.ring.retain(|&(x, _)| x != t);
        self.unit_tokens[self.new_unit as usize] -= 1;
        self.rebuild();
    }

    /// Scores the candidate ranges and inserts one joining-unit token at the
    /// best free spot; `round` varies the order of a budget-cut sample.
    fn place_one(
        &mut self,
        tm: &TokenMetadata,
        chosen: &mut BTreeSet<Token>,
        sc: &mut Scratch,
        round: usize,
    ) -> Option<Token> {
        let n = self.ring.len();
        sc.reset(n + 1, self.unit_rack.len());
        let mut candidates: Vec<(f64, usize, f64)> = Vec::with_capacity(n);
        // Visit the ranges in a well spread order (a stride coprime with n,
        // near n / golden ratio), so a cut-off sample covers the ring.
        let mut stride = ((n as f64 * 0.618) as usize).max(1);
        while gcd(stride, n) != 1 {
            stride += 1;
        }
        let rotate = round * 7919;
        for m in 0..n {
            let j = (rotate + m * stride) % n;
            if self.size_int[j] >= 2 {
                let (change, x) = self.score(sc, j, None);
                candidates.push((change, j, x));
            }
            if sc.steps > STEP_BUDGET && candidates.len() >= MIN_CANDIDATES {
                break;
            }
        }
        candidates.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
        let t = candidates.iter().find_map(|&(_, j, x)| {
            let start = self.ring[(j + n - 1) % n].0;
            let size = self.size_int[j];
            let off = ((x * RING) as u128).clamp(1, size - 1);
            free_token_in(tm, chosen, start, size, off)
        })?;
        chosen.insert(t);
        self.insert(t);
        Some(t)
    }

    fn allocate(&mut self, tm: &TokenMetadata) -> Vec<Token> {
        let mut chosen = BTreeSet::new();
        let mut sc = Scratch::default();
        let mut round = 0;
        while chosen.len() < self.num_tokens {
            round += 1;
            if self.place_one(tm, &mut chosen, &mut sc, round).is_none() {
                break;
            }
        }
        // Local search: each token in turn is taken out and placed again,
        // now knowing where all the others are. Its old spot is among the
        // candidates, so the objective never gets worse.
        for _ in 0..REFINE_SWEEPS {
            if chosen.len() < self.num_tokens {
                break;
            }
            for t in chosen.clone() {
                chosen.remove(&t);
                self.remove(t);
                round += 1;
                if self.place_one(tm, &mut chosen, &mut sc, round).is_none() {
                    chosen.insert(t);
                    self.insert(t);
                }
            }
        }
        // Only a DC packed solid leaves tokens to find; any free ones will do.
        let mut filler = 0u64;
        while chosen.len() < self.num_tokens {
            filler = filler.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let t = filler as i64;
            if is_free(tm, &chosen, t) {
                chosen.insert(t);
            }
        }
        chosen.into_iter().collect()
    }
}

/// Reusable buffers for scoring candidates.
#[derive(Default)]
struct Scratch {
    toks: Deltas,
    units: Deltas,
    out: Vec<(u32, u32)>,
    racks: Vec<u32>,
    stamp: u32,
    /// Walk steps spent on the current token.
    steps: u64,
}

impl Scratch {
    fn reset(&mut self, tokens: usize, units: usize) {
        self.toks.reset(tokens);
        self.units.reset(units);
        self.stamp = 0;
        self.steps = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::StdRng;
    use rand::SeedableRng;

    impl Model {
        /// The full objective, the joining unit counted with `new_count` tokens.
        fn objective(&self, new_count: usize) -> f64 {
            let mut f = 0.0;
            for (k, &(_, unit)) in self.ring.iter().enumerate() {
                let count =
                    if unit == self.new_unit { self.num_tokens } else { self.unit_tokens[unit as usize] } as f64;
                let opt = self.opt[self.unit_rack[unit as usize] as usize];
                f += (self.vown[k] - opt).powi(2) / (count * count);
            }
            for (u, own) in self.own.iter().enumerate() {
                let count = if u as u32 == self.new_unit { new_count } else { self.unit_tokens[u] } as f64;
                f += ((own - self.unit_target(u, new_count)) / count).powi(2);
            }
            f
        }
    }

    #[test]
    fn incremental_score_matches_full_recomputation() {
        let mut rng = StdRng::seed_from_u64(7);
        for racks in [1u32, 2, 3, 4] {
            for rf in [1usize, 2, 3] {
                let units = 6;
                let mut ring: Vec<(Token, u32)> = Vec::new();
                for u in 0..units as u32 - 1 {
                    for _ in 0..4 {
                        ring.push((rng.gen(), u));
                    }
                }
                ring.sort_unstable();
                let unit_rack: Vec<u32> = (0..units as u32).map(|u| u % racks).collect();
                let mut model = Model::new(ring, unit_rack, racks as usize, rf, 4);
                for _step in 0..3 {
                    let placed = model.unit_tokens[model.new_unit as usize];
                    let before = model.objective(placed + 1);
                    let n = model.ring.len();
                    // Score every candidate at a fixed x and compare.
                    let mut sc = Scratch::default();
                    sc.reset(n + 1, model.unit_rack.len());
                    for j in 0..n {
                        let x = model.size[j] * 0.3;
                        let (change, _) = model.score(&mut sc, j, Some(x));
                        let mut m2 = model.clone();
                        let start = m2.ring[(j + n - 1) % n].0;
                        let off = ((x * RING) as u128).clamp(1, m2.size_int[j] - 1);
                        m2.insert(start.wrapping_add(off as u64 as i64));
                        let actual = m2.objective(placed + 1) - before;
                        assert!(
                            (actual - change).abs() < 1e-9,
                            "racks {racks} rf {rf} j {j}: predicted {change} actual {actual}"
                        );
                    }
                    let (_, j, x) = (0..n)
                        .map(|j| {
                            let (c, x) = model.score(&mut sc, j, None);
                            (c, j, x)
                        })
                        .fold((f64::MAX, 0, 0.0), |a, b| if b.0 < a.0 { b } else { a });
                    let start = model.ring[(j + n - 1) % n].0;
                    model.insert(start.wrapping_add((x * RING) as u128 as u64 as i64));
                }
            }
        }
    }
}
