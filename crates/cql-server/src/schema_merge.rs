//! How two nodes' schemas merge: per object, last write wins, as the rows of
//! Cassandra's schema tables do. The objects are a keyspace's properties
//! (replication, durable writes), each table and each user type; each has a
//! [`Stamp`]: when it last changed and whether it exists. A DDL stamps what
//! it changed (a drop stamps the objects it removed as dead); a merge keeps,
//! per object, the side with the newer stamp.
//!
//! Each keyspace also has a drop register ([`Kind::Dropped`]): the time of
//! its latest drop, which only grows. A table or type stamped at or before
//! it is dead, whatever its own stamp says.
//!
//! Invariants:
//! - [`merge`] is commutative, associative and idempotent: nodes that have
//!   exchanged their schemas in any order hold the same objects and stamps.
//!   Ties on the timestamp: a drop wins over a live object (as a tombstone
//!   wins over a cell), then the larger serialized definition.
//! - DDL made at the same time on two nodes keeps both changes when they
//!   touch different objects (two new tables, a table and a type); on the
//!   same object the newer one wins whole.
//! - A keyspace dropped at `D` takes down every table and type of it stamped
//!   at or before `D`: a table created on a node that had not yet heard of
//!   the drop is gone too, and a later re-creation of the keyspace brings
//!   none of them back.
//! - A live table or type whose keyspace is absent (made after the drop on a
//!   node that had not heard of it) is kept as an orphan: its definition
//!   rides in its stamp, and it shows again if its keyspace is made again,
//!   as a row of Cassandra's schema tables newer than the keyspace's
//!   partition tombstone does. Without it, whether such an object showed in
//!   a re-created keyspace would depend on the order of merges.
//! - An object without a stamp (a schema stored before stamps existed, or a
//!   peer that sends none) counts as written at its schema's timestamp.

use std::collections::BTreeMap;

use types::schema::{KeyspaceDef, TableDef, UdtDef};

/// What an object is: a keyspace's own properties, a table, a user type, or
/// a keyspace's drop register.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, serde::Serialize, serde::Deserialize)]
pub enum Kind {
    Keyspace,
    Table,
    Type,
    /// The keyspace's latest drop; its stamp is always dead.
    Dropped,
}

/// An object's name: its kind, its keyspace and (for tables and types) its own name.
pub type Key = (Kind, String, String);

/// When an object last changed (microseconds) and whether it exists; for a
/// live orphan (a table or type whose keyspace is absent), its definition.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Stamp {
    pub ts: i64,
    pub live: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub orphan: Option<String>,
}

impl Stamp {
    pub fn new(ts: i64, live: bool) -> Stamp {
        Stamp { ts, live, orphan: None }
    }
}

/// Every object's stamp, the dead ones included.
pub type Stamps = BTreeMap<Key, Stamp>;

/// One schema object's definition.
#[derive(Clone, Debug, PartialEq)]
enum Object {
    /// A keyspace without its tables and types.
    Keyspace(KeyspaceDef),
    Table(TableDef),
    Type(UdtDef),
}

impl Object {
    fn bytes(&self) -> Vec<u8> {
        match self {
            Object::Keyspace(k) => serde_json::to_vec(k),
            Object::Table(t) => serde_json::to_vec(t),
            Object::Type(u) => serde_json::to_vec(u),
        }
        .unwrap_or_default()
    }

    /// An orphan's definition read back from its stamp.
    fn from_orphan(kind: Kind, json: &str) -> Option<Object> {
        match kind {
            Kind::Table => serde_json::from_str(json).ok().map(Object::Table),
            Kind::Type => serde_json::from_str(json).ok().map(Object::Type),
            Kind::Keyspace | Kind::Dropped => None,
        }
    }
}

/// The objects of `keyspaces`, and the orphans that `stamps` carry.
fn objects(keyspaces: &[KeyspaceDef], stamps: &Stamps) -> BTreeMap<Key, Object> {
    let mut out = BTreeMap::new();
    for (key, stamp) in stamps {
        if let (true, Some(json)) = (stamp.live, &stamp.orphan) {
            if let Some(object) = Object::from_orphan(key.0, json) {
                out.insert(key.clone(), object);
            }
        }
    }
    for ks in keyspaces {
        let props = KeyspaceDef { tables: BTreeMap::new(), types: BTreeMap::new(), ..ks.clone() };
        out.insert((Kind::Keyspace, ks.name.clone(), String::new()), Object::Keyspace(props));
        for (name, t) in &ks.tables {
            out.insert((Kind::Table, ks.name.clone(), name.clone()), Object::Table(t.clone()));
        }
        for (name, u) in &ks.types {
            out.insert((Kind::Type, ks.name.clone(), name.clone()), Object::Type(u.clone()));
        }
    }
    out
}

/// The keyspaces the live objects make; each child whose keyspace is absent
/// has its definition put in its stamp, every other stamp loses its own.
fn assemble(objects: BTreeMap<Key, Object>, stamps: &mut Stamps) -> Vec<KeyspaceDef> {
    let mut keyspaces: BTreeMap<String, KeyspaceDef> = BTreeMap::new();
    let mut children = Vec::new();
    for ((kind, ks, name), object) in objects {
        match object {
            Object::Keyspace(def) if kind == Kind::Keyspace => {
                keyspaces.insert(ks, def);
            }
            other => children.push((kind, ks, name, other)),
        }
    }
    for stamp in stamps.values_mut() {
        stamp.orphan = None;
    }
    for (kind, ks, name, object) in children {
        match keyspaces.get_mut(&ks) {
            Some(def) => match object {
                Object::Table(t) => {
                    def.tables.insert(name, t);
                }
                Object::Type(u) => {
                    def.types.insert(name, u);
                }
                Object::Keyspace(_) => {}
            },
            None => {
                if let Some(stamp) = stamps.get_mut(&(kind, ks, name)) {
                    stamp.orphan = Some(String::from_utf8_lossy(&object.bytes()).into_owned());
                }
            }
        }
    }
    keyspaces.into_values().collect()
}

/// The keyspaces and stamps after a local change from `before` (with
/// `stamps`) to `after` at `ts`: each object added or changed is stamped
/// live at `ts`, each removed one dead at `ts` (a removed keyspace's drop
/// register too); the others keep theirs (or get `fallback`, live). Orphans
/// whose keyspace `after` makes again join it.
pub fn local_change(
    stamps: &Stamps,
    fallback: i64,
    before: &[KeyspaceDef],
    after: &[KeyspaceDef],
    ts: i64,
) -> (Vec<KeyspaceDef>, Stamps) {
    let (old, new) = (objects(before, &Stamps::new()), objects(after, &Stamps::new()));
    let mut out = complete(stamps, &old, fallback);
    for (key, object) in &new {
        if old.get(key) != Some(object) {
            out.insert(key.clone(), Stamp::new(ts, true));
        }
    }
    for key in old.keys().filter(|k| !new.contains_key(*k)) {
        out.insert(key.clone(), Stamp::new(ts, false));
        if key.0 == Kind::Keyspace {
            out.insert((Kind::Dropped, key.1.clone(), String::new()), Stamp::new(ts, false));
        }
    }
    let side = Side { keyspaces: after, stamps: &out, timestamp: fallback };
    merge(side, Side { keyspaces: after, stamps: &out, timestamp: fallback })
}

/// `stamps` made to agree with `keyspaces`: each present object has a live
/// stamp (`fallback` where it had none or a dead one, which a crash between
/// storing the schema and its stamps can leave), and no live stamp names an
/// absent object but an orphan.
pub fn settle(stamps: &Stamps, keyspaces: &[KeyspaceDef], fallback: i64) -> Stamps {
    complete(stamps, &objects(keyspaces, &Stamps::new()), fallback)
}

/// `stamps` completed for `present` (see [`settle`]), each keyspace's drop
/// register at least its dead stamp (stamps from before the registers).
fn complete(stamps: &Stamps, present: &BTreeMap<Key, Object>, fallback: i64) -> Stamps {
    let mut out: Stamps = stamps
        .iter()
        .filter(|(k, s)| !s.live || present.contains_key(*k) || s.orphan.is_some())
        .map(|(k, s)| (k.clone(), s.clone()))
        .collect();
    for key in present.keys() {
        match out.get(key) {
            Some(s) if s.live => {}
            _ => {
                out.insert(key.clone(), Stamp::new(fallback, true));
            }
        }
    }
    let dead_keyspaces: Vec<(String, i64)> = out
        .iter()
        .filter(|((kind, _, _), s)| *kind == Kind::Keyspace && !s.live)
        .map(|((_, ks, _), s)| (ks.clone(), s.ts))
        .collect();
    for (ks, ts) in dead_keyspaces {
        let register = out.entry((Kind::Dropped, ks, String::new())).or_insert(Stamp::new(ts, false));
        register.ts = register.ts.max(ts);
    }
    out
}

/// One side of a merge: its keyspaces, stamps, and the timestamp that
/// objects without a stamp count as written at.
pub struct Side<'a> {
    pub keyspaces: &'a [KeyspaceDef],
    pub stamps: &'a Stamps,
    pub timestamp: i64,
}

/// Merges two schemas object by object (see the module's invariants):
/// the merged keyspaces and stamps.
pub fn merge(a: Side<'_>, b: Side<'_>) -> (Vec<KeyspaceDef>, Stamps) {
    let (a_objects, b_objects) = (objects(a.keyspaces, a.stamps), objects(b.keyspaces, b.stamps));
    let a_stamps = complete(a.stamps, &a_objects, a.timestamp);
    let b_stamps = complete(b.stamps, &b_objects, b.timestamp);
    let mut stamps = Stamps::new();
    let mut winners: BTreeMap<Key, Object> = BTreeMap::new();
    for key in a_stamps.keys().chain(b_stamps.keys()) {
        if stamps.contains_key(key) {
            continue;
        }
        let a_side = a_stamps.get(key).map(|s| (s, a_objects.get(key)));
        let b_side = b_stamps.get(key).map(|s| (s, b_objects.get(key)));
        let (stamp, object) = match (a_side, b_side) {
            (Some(x), Some(y)) => newer(x, y),
            (Some(x), None) | (None, Some(x)) => x,
            (None, None) => continue,
        };
        stamps.insert(key.clone(), Stamp::new(stamp.ts, stamp.live));
        if let (true, Some(object)) = (stamp.live, object) {
            winners.insert(key.clone(), object.clone());
        }
    }
    // A keyspace's latest drop takes down its children stamped at or before it.
    let drops: BTreeMap<String, i64> = stamps
        .iter()
        .filter(|((kind, _, _), _)| *kind == Kind::Dropped)
        .map(|((_, ks, _), s)| (ks.clone(), s.ts))
        .collect();
    for ((kind, ks, name), stamp) in stamps.iter_mut() {
        if let (Kind::Table | Kind::Type, Some(&dropped)) = (kind, drops.get(ks)) {
            if stamp.ts <= dropped {
                *stamp = Stamp::new(dropped, false);
                winners.remove(&(*kind, ks.clone(), name.clone()));
            }
        }
    }
    let keyspaces = assemble(winners, &mut stamps);
    (keyspaces, stamps)
}

fn newer<'s, 'o>(
    x: (&'s Stamp, Option<&'o Object>),
    y: (&'s Stamp, Option<&'o Object>),
) -> (&'s Stamp, Option<&'o Object>) {
    let rank = |(s, o): &(&Stamp, Option<&Object>)| (s.ts, !s.live, o.map(|o| o.bytes()));
    if rank(&y) > rank(&x) {
        y
    } else {
        x
    }
}

/// The stamps as a list for an export or storage (JSON maps need string keys).
pub fn to_list(stamps: &Stamps) -> Vec<(Kind, String, String, Stamp)> {
    stamps.iter().map(|((k, ks, name), s)| (*k, ks.clone(), name.clone(), s.clone())).collect()
}

pub fn from_list(list: Vec<(Kind, String, String, Stamp)>) -> Stamps {
    list.into_iter().map(|(k, ks, name, s)| ((k, ks, name), s)).collect()
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use types::schema::{KeyspaceDef, Replication, UdtDef};
    use types::CqlType;

    use super::{local_change, merge, settle, Kind, Side, Stamp, Stamps};

    fn keyspace(name: &str, rf: u32, types: &[&str]) -> KeyspaceDef {
        KeyspaceDef {
            name: name.into(),
            replication: Replication::Simple { replication_factor: rf },
            durable_writes: true,
            tables: BTreeMap::new(),
            types: types
                .iter()
                .map(|t| {
                    let def =
                        UdtDef { keyspace: name.into(), name: (*t).into(), fields: vec![("f".into(), CqlType::Int)] };
                    ((*t).to_string(), def)
                })
                .collect(),
        }
    }

    /// A node: its keyspaces and stamps, changed by local "DDL" at `ts`.
    #[derive(Clone)]
    struct Node {
        keyspaces: Vec<KeyspaceDef>,
        stamps: Stamps,
    }

    impl Node {
        fn new(keyspaces: Vec<KeyspaceDef>, ts: i64) -> Node {
            Node { stamps: settle(&Stamps::new(), &keyspaces, ts), keyspaces }
        }
        fn ddl(&mut self, ts: i64, change: impl FnOnce(&mut Vec<KeyspaceDef>)) {
            let mut after = self.keyspaces.clone();
            change(&mut after);
            after.sort_by(|a, b| a.name.cmp(&b.name));
            let (keyspaces, stamps) = local_change(&self.stamps, 0, &self.keyspaces, &after, ts);
            *self = Node { keyspaces, stamps };
        }
        fn side(&self) -> Side<'_> {
            Side { keyspaces: &self.keyspaces, stamps: &self.stamps, timestamp: 0 }
        }
        fn hear(&mut self, other: &Node) {
            let (keyspaces, stamps) = merge(self.side(), other.side());
            *self = Node { keyspaces, stamps };
        }
        fn types(&self, ks: &str) -> Vec<String> {
            self.keyspaces.iter().find(|k| k.name == ks).map(|k| k.types.keys().cloned().collect()).unwrap_or_default()
        }
    }

    fn add_type<'a>(ks: &'a str, name: &str) -> impl FnOnce(&mut Vec<KeyspaceDef>) + 'a {
        let name = name.to_string();
        move |all| {
            if let Some(k) = all.iter_mut().find(|k| k.name == ks) {
                let def = UdtDef { keyspace: ks.into(), name: name.clone(), fields: vec![] };
                k.types.insert(name, def);
            }
        }
    }

    #[test]
    fn ddl_at_the_same_time_on_two_nodes_keeps_both() {
        let base = Node::new(vec![keyspace("ks", 1, &[])], 10);
        let (mut a, mut b) = (base.clone(), base);
        a.ddl(100, add_type("ks", "x"));
        b.ddl(101, add_type("ks", "y"));
        let a_before = a.clone();
        a.hear(&b);
        b.hear(&a_before);
        assert_eq!(a.types("ks"), vec!["x", "y"]);
        assert_eq!(a.keyspaces, b.keyspaces);
        assert_eq!(a.stamps, b.stamps);
    }

    #[test]
    fn a_drop_is_not_undone_by_a_node_that_missed_it_and_a_later_create_wins() {
        let base = Node::new(vec![keyspace("ks", 1, &["x"])], 10);
        let (mut a, stale) = (base.clone(), base);
        a.ddl(100, |all| {
            all.iter_mut().for_each(|k| {
                k.types.remove("x");
            })
        });
        a.hear(&stale);
        assert!(a.types("ks").is_empty(), "the stale node's older type came back");
        let mut c = stale.clone();
        c.hear(&a);
        assert!(c.types("ks").is_empty(), "the drop did not reach the stale node");
        c.ddl(200, add_type("ks", "x"));
        a.hear(&c);
        assert_eq!(a.types("ks"), vec!["x"], "a newer re-creation must win over the drop");
    }

    #[test]
    fn a_dropped_keyspace_takes_its_older_children_and_a_recreation_brings_none_back() {
        let base = Node::new(vec![keyspace("ks", 1, &["x"])], 10);
        let (mut a, mut b) = (base.clone(), base);
        a.ddl(100, |all| all.retain(|k| k.name != "ks"));
        b.ddl(90, add_type("ks", "late")); // made on b before it heard of the drop
        a.hear(&b);
        assert!(a.keyspaces.iter().all(|k| k.name != "ks"));
        a.ddl(300, |all| all.push(keyspace("ks", 3, &[])));
        a.hear(&b);
        assert!(a.types("ks").is_empty(), "children of the dropped keyspace came back: {:?}", a.types("ks"));
        assert_eq!(
            a.keyspaces.iter().find(|k| k.name == "ks").map(|k| k.replication.clone()),
            Some(Replication::Simple { replication_factor: 3 })
        );
    }

    #[test]
    fn a_child_made_after_a_drop_it_had_not_heard_of_waits_as_an_orphan_for_a_recreation() {
        let base = Node::new(vec![keyspace("ks", 1, &[])], 10);
        let (mut a, mut b) = (base.clone(), base);
        a.ddl(100, |all| all.retain(|k| k.name != "ks"));
        b.ddl(120, add_type("ks", "late")); // b has not heard of the drop
        let mut c = a.clone();
        c.ddl(130, |all| all.push(keyspace("ks", 3, &[])));
        // The orphan reaches a before the re-creation; c hears b directly.
        a.hear(&b);
        assert!(a.keyspaces.is_empty());
        assert!(a.stamps.get(&(Kind::Type, "ks".into(), "late".into())).is_some_and(|s| s.orphan.is_some()));
        a.hear(&c);
        c.hear(&b);
        assert_eq!(a.types("ks"), vec!["late"]);
        assert_eq!((&a.keyspaces, &a.stamps), (&c.keyspaces, &c.stamps));
        // A re-creation made locally on the node holding the orphan adopts it too.
        let mut d = base_after_drop_and_orphan();
        d.ddl(130, |all| all.push(keyspace("ks", 3, &[])));
        assert_eq!(d.types("ks"), vec!["late"]);
        assert_eq!((&d.keyspaces, &d.stamps), (&a.keyspaces, &a.stamps));
    }

    fn base_after_drop_and_orphan() -> Node {
        let base = Node::new(vec![keyspace("ks", 1, &[])], 10);
        let (mut a, mut b) = (base.clone(), base);
        a.ddl(100, |all| all.retain(|k| k.name != "ks"));
        b.ddl(120, add_type("ks", "late"));
        a.hear(&b);
        a
    }

    #[test]
    fn the_same_object_changed_on_two_nodes_the_newer_wins_and_ties_agree() {
        let base = Node::new(vec![keyspace("ks", 1, &[])], 10);
        let (mut a, mut b) = (base.clone(), base);
        a.ddl(100, |all| all[0].replication = Replication::Simple { replication_factor: 2 });
        b.ddl(100, |all| all[0].replication = Replication::Simple { replication_factor: 3 });
        let (a0, b0) = (a.clone(), b.clone());
        a.hear(&b0);
        b.hear(&a0);
        assert_eq!(a.keyspaces, b.keyspaces, "a tie must resolve the same way on both nodes");
        let mut c = a.clone();
        c.ddl(101, |all| all[0].replication = Replication::Simple { replication_factor: 1 });
        a.hear(&c);
        assert_eq!(a.keyspaces[0].replication, Replication::Simple { replication_factor: 1 });
    }

    #[test]
    fn merge_is_commutative_associative_and_idempotent() {
        let base = Node::new(vec![keyspace("ks", 1, &["t0"]), keyspace("other", 1, &[])], 10);
        let mut nodes = [base.clone(), base.clone(), base];
        nodes[0].ddl(100, add_type("ks", "a"));
        nodes[1].ddl(110, |all| all.retain(|k| k.name != "other"));
        nodes[1].ddl(120, add_type("ks", "b"));
        nodes[2].ddl(105, |all| {
            all.iter_mut().for_each(|k| {
                k.types.remove("t0");
            })
        });
        let orders = [[0, 1, 2], [2, 1, 0], [1, 0, 2], [1, 2, 0]];
        let mut results = Vec::new();
        for order in orders {
            let mut n = nodes[order[0]].clone();
            n.hear(&nodes[order[1]]);
            n.hear(&nodes[order[2]]);
            let again = n.clone();
            n.hear(&again);
            results.push((n.keyspaces.clone(), n.stamps.clone()));
        }
        assert!(results.windows(2).all(|w| w[0] == w[1]), "orders disagree");
        let (keyspaces, stamps) = &results[0];
        assert_eq!(keyspaces.iter().map(|k| k.name.as_str()).collect::<Vec<_>>(), vec!["ks"]);
        assert_eq!(keyspaces[0].types.keys().cloned().collect::<Vec<_>>(), vec!["a", "b"]);
        assert_eq!(stamps.get(&(Kind::Keyspace, "other".into(), String::new())), Some(&Stamp::new(110, false)));
    }

    #[test]
    fn objects_without_stamps_count_as_written_at_their_schemas_timestamp() {
        let ours = Node::new(vec![keyspace("ks", 1, &["x"])], 50);
        let legacy = vec![keyspace("ks", 2, &[])];
        let none = Stamps::new();
        let (merged, _) = merge(ours.side(), Side { keyspaces: &legacy, stamps: &none, timestamp: 60 });
        // The legacy peer's keyspace properties (at 60) win; our type (at 50) is kept: it has no drop.
        assert_eq!(merged[0].replication, Replication::Simple { replication_factor: 2 });
        assert_eq!(merged[0].types.keys().cloned().collect::<Vec<_>>(), vec!["x"]);
    }

    /// A small deterministic generator (xorshift64*), so the randomized test needs no dependency.
    struct Rng(u64);

    impl Rng {
        fn below(&mut self, n: u64) -> u64 {
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) % n
        }
    }

    /// One random local DDL on `node` at `ts`: a type added or dropped, a
    /// keyspace created, dropped or its replication changed.
    fn random_ddl(rng: &mut Rng, node: &mut Node, ts: i64, keyspace_drops: bool) {
        let ks = ["a", "b", "c"][rng.below(3) as usize];
        let ty = format!("t{}", rng.below(4));
        let rf = 1 + rng.below(3) as u32;
        match rng.below(5) {
            0 => node.ddl(ts, add_type(ks, &ty)),
            1 => node.ddl(ts, |all| {
                all.iter_mut().filter(|k| k.name == ks).for_each(|k| {
                    k.types.remove(&ty);
                })
            }),
            2 => node.ddl(ts, |all| {
                if all.iter().all(|k| k.name != ks) {
                    all.push(keyspace(ks, rf, &[]));
                }
            }),
            3 if keyspace_drops => node.ddl(ts, |all| all.retain(|k| k.name != ks)),
            _ => node.ddl(ts, |all| {
                all.iter_mut()
                    .filter(|k| k.name == ks)
                    .for_each(|k| k.replication = Replication::Simple { replication_factor: rf })
            }),
        }
    }

    /// Randomized: three nodes make random DDL (timestamps drawn from a
    /// small range, so ties happen) and hear each other at random; once
    /// every node has heard every other, all hold the same keyspaces and
    /// stamps, whatever the order, and what they hold agrees with the stamps.
    /// Keyspace drops are left out here: the next test has them.
    #[test]
    fn random_ddl_and_exchanges_converge_in_any_order() {
        random_runs(false);
    }

    /// The same with keyspace drops. Before the drop registers and orphans it
    /// failed: seed 9's stamps differed by merge order, and in seed 56 a type
    /// showed in a re-created keyspace after one order and not another.
    #[test]
    fn random_ddl_with_keyspace_drops_converges_in_any_order() {
        random_runs(true);
    }

    fn random_runs(keyspace_drops: bool) {
        for seed in 1..=300u64 {
            let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
            let base = Node::new(vec![keyspace("a", 1, &["t0"]), keyspace("b", 1, &[])], 10);
            let mut nodes = vec![base.clone(), base.clone(), base];
            for _ in 0..rng.below(30) + 5 {
                let n = rng.below(3) as usize;
                if rng.below(3) == 0 {
                    let other = nodes[rng.below(3) as usize].clone();
                    nodes[n].hear(&other);
                } else {
                    let ts = 100 + rng.below(40) as i64;
                    random_ddl(&mut rng, &mut nodes[n], ts, keyspace_drops);
                }
            }
            // Two merges of everything in different orders agree.
            let (x, y) = (nodes[0].clone(), nodes[2].clone());
            let mut forward = x.clone();
            forward.hear(&nodes[1]);
            forward.hear(&y);
            let mut backward = y.clone();
            backward.hear(&nodes[1]);
            backward.hear(&x);
            assert_eq!(forward.keyspaces, backward.keyspaces, "seed {seed}: merge order changed the result");
            assert_eq!(forward.stamps, backward.stamps, "seed {seed}");
            // Gossip-style: each node hears the others in a random order until all agree.
            for _ in 0..2 {
                for n in 0..3 {
                    let other = nodes[(n + 1 + rng.below(2) as usize) % 3].clone();
                    nodes[n].hear(&other);
                    let third = nodes[(n + 1) % 3].clone();
                    nodes[n].hear(&third);
                    let fourth = nodes[(n + 2) % 3].clone();
                    nodes[n].hear(&fourth);
                }
            }
            for n in &nodes {
                assert_eq!(n.keyspaces, forward.keyspaces, "seed {seed}: a node did not converge");
                assert_eq!(n.stamps, forward.stamps, "seed {seed}");
            }
            // What is held agrees with the stamps: every object present has a live stamp.
            for ks in &forward.keyspaces {
                let live = |kind, name: &str| {
                    forward.stamps.get(&(kind, ks.name.clone(), name.to_string())).is_some_and(|s| s.live)
                };
                assert!(live(Kind::Keyspace, ""), "seed {seed}: keyspace {} without a live stamp", ks.name);
                for t in ks.types.keys() {
                    assert!(live(Kind::Type, t), "seed {seed}: type {}.{t} without a live stamp", ks.name);
                }
            }
        }
    }
}
