//! Seeded property tests tying the codec, the comparators and the
//! order-preserving key encoding together, plus fixed edge cases.

#![allow(clippy::unwrap_used, reason = "an integration test: a failed unwrap names its line")]

use std::cmp::Ordering;

use num_bigint::BigInt;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use types::codec::{allows_empty, normalize, validate};
use types::compare::{compare_serialized, compare_values};
use types::order::{decode_key_component, encode_key_component};
use types::value::ValueError;
use types::{CqlType, Value};

// ---------------------------------------------------------------------------
// Generators.

fn simple_types() -> Vec<CqlType> {
    use CqlType::*;
    vec![
        Ascii, Text, Blob, Boolean, TinyInt, SmallInt, Int, BigInt, Counter, Varint, Float, Double, Decimal, Uuid,
        TimeUuid, Timestamp, Date, Time, Duration, Inet,
    ]
}

fn random_type(rng: &mut StdRng, depth: u32) -> CqlType {
    let simple = simple_types();
    if depth == 0 || rng.gen_bool(0.6) {
        return simple[rng.gen_range(0..simple.len())].clone();
    }
    let sub = |rng: &mut StdRng| Box::new(random_type(rng, depth - 1));
    match rng.gen_range(0..5) {
        0 => CqlType::List { elem: sub(rng), frozen: true },
        1 => CqlType::Set { elem: sub(rng), frozen: true },
        2 => CqlType::Map { key: sub(rng), value: sub(rng), frozen: true },
        3 => CqlType::Tuple((0..rng.gen_range(1..4)).map(|_| random_type(rng, depth - 1)).collect()),
        _ => CqlType::Udt {
            keyspace: "ks".into(),
            name: "u".into(),
            fields: (0..rng.gen_range(1..4)).map(|i| (format!("f{i}"), random_type(rng, depth - 1))).collect(),
            frozen: true,
        },
    }
}

fn pick<T: Clone>(items: &[T], rng: &mut StdRng) -> T {
    items[rng.gen_range(0..items.len())].clone()
}

fn with_len(parts: &[Vec<u8>]) -> Vec<u8> {
    let mut out = Vec::new();
    for p in parts {
        out.extend_from_slice(&(p.len() as i32).to_be_bytes());
        out.extend_from_slice(p);
    }
    out
}

/// Random valid serialized bytes of `ty` (including empty values where
/// allowed and non-canonical encodings), drawn from small pools so that equal
/// values are frequent.
fn random_bytes(rng: &mut StdRng, ty: &CqlType) -> Vec<u8> {
    if allows_empty(ty) && rng.gen_bool(0.08) {
        return Vec::new();
    }
    match ty {
        CqlType::Ascii => {
            let n = rng.gen_range(0..4);
            (0..n).map(|_| pick(&[0u8, b'a', b'b', 0x7f], rng)).collect()
        }
        CqlType::Text => {
            let n = rng.gen_range(0..4);
            let s: String = (0..n).map(|_| pick(&['\0', 'a', 'b', 'é', '€', '😀', '\u{7f}'], rng)).collect();
            s.into_bytes()
        }
        CqlType::Blob => {
            let n = rng.gen_range(0..5);
            (0..n).map(|_| pick(&[0u8, 1, 0xff, 0x80, 0x7f], rng)).collect()
        }
        CqlType::Boolean => vec![pick(&[0u8, 1, 2, 0xff], rng)],
        CqlType::TinyInt => vec![pick(&[0u8, 1, 0x7f, 0x80, 0xff, rng.gen()], rng)],
        CqlType::SmallInt => pick(&[0i16, 1, -1, i16::MIN, i16::MAX, rng.gen()], rng).to_be_bytes().to_vec(),
        CqlType::Int => pick(&[0i32, 1, -1, i32::MIN, i32::MAX, 255, 256, rng.gen()], rng).to_be_bytes().to_vec(),
        CqlType::BigInt | CqlType::Counter | CqlType::Timestamp => {
            pick(&[0i64, 1, -1, i64::MIN, i64::MAX, rng.gen::<i32>() as i64, rng.gen()], rng).to_be_bytes().to_vec()
        }
        CqlType::Varint => random_varint_bytes(rng),
        CqlType::Float => {
            let bits = pick(
                &[
                    0f32.to_bits(),
                    (-0f32).to_bits(),
                    1f32.to_bits(),
                    (-1f32).to_bits(),
                    f32::INFINITY.to_bits(),
                    f32::NEG_INFINITY.to_bits(),
                    f32::NAN.to_bits(),
                    0x7fc0_0001,
                    0xffc0_0000,
                    0x7f80_0001,
                    f32::MIN_POSITIVE.to_bits(),
                    1,
                    0x8000_0001,
                    f32::MAX.to_bits(),
                    f32::MIN.to_bits(),
                    rng.gen(),
                ],
                rng,
            );
            bits.to_be_bytes().to_vec()
        }
        CqlType::Double => {
            let bits = pick(
                &[
                    0f64.to_bits(),
                    (-0f64).to_bits(),
                    1.5f64.to_bits(),
                    (-1.5f64).to_bits(),
                    f64::INFINITY.to_bits(),
                    f64::NEG_INFINITY.to_bits(),
                    f64::NAN.to_bits(),
                    0xfff8_0000_0000_0001,
                    0x7ff0_0000_0000_0001,
                    1,
                    f64::MAX.to_bits(),
                    rng.gen(),
                ],
                rng,
            );
            bits.to_be_bytes().to_vec()
        }
        CqlType::Decimal => {
            let scale: i32 = pick(&[0, 1, 2, -1, -2, 30, -30, i32::MAX, i32::MIN, rng.gen()], rng);
            let mut out = scale.to_be_bytes().to_vec();
            if rng.gen_bool(0.02) {
                return out; // Zero-length unscaled: accepted by Cassandra's validate.
            }
            out.extend_from_slice(&random_varint_bytes(rng));
            out
        }
        CqlType::Uuid => {
            let mut b: [u8; 16] = pick(&[[0u8; 16], [0xff; 16], [0x11; 16], rng.gen(), rng.gen()], rng);
            if rng.gen_bool(0.7) {
                let version = pick(&[1u8, 4, 1, 0, 15, rng.gen_range(0..16)], rng);
                b[6] = (b[6] & 0x0f) | (version << 4);
            }
            b.to_vec()
        }
        CqlType::TimeUuid => {
            let mut b: [u8; 16] = pick(&[[0u8; 16], [0xff; 16], [0x80; 16], [0x7f; 16], rng.gen(), rng.gen()], rng);
            b[6] = (b[6] & 0x0f) | 0x10;
            b.to_vec()
        }
        CqlType::Date => pick(&[0u32, 1, 1 << 31, u32::MAX, rng.gen()], rng).to_be_bytes().to_vec(),
        CqlType::Time => {
            pick(&[0i64, 1, 86_399_999_999_999, rng.gen_range(0..86_400_000_000_000)], rng).to_be_bytes().to_vec()
        }
        CqlType::Duration => {
            let sign: i64 = pick(&[1, -1], rng);
            let v = Value::Duration {
                months: (sign * pick(&[0i64, 1, 12, i32::MAX as i64], rng)) as i32,
                days: (sign * pick(&[0i64, 1, 30], rng)) as i32,
                nanos: sign * pick(&[0i64, 1, 1_000_000_000, i64::MAX], rng),
            };
            v.to_bytes()
        }
        CqlType::Inet => {
            if rng.gen_bool(0.5) {
                pick(&[vec![1u8, 2, 3, 4], vec![0, 0, 0, 0], vec![255, 255, 255, 255]], rng)
            } else {
                let mut v = pick(&[vec![0u8; 16], vec![1u8, 2, 3, 4], vec![255; 16]], rng);
                v.resize(16, rng.gen());
                v
            }
        }
        CqlType::List { elem, .. } | CqlType::Set { elem, .. } => {
            let n: i32 = rng.gen_range(0..4);
            let elems: Vec<Vec<u8>> = (0..n).map(|_| random_bytes(rng, elem)).collect();
            let mut out = n.to_be_bytes().to_vec();
            out.extend_from_slice(&with_len(&elems));
            out
        }
        CqlType::Map { key, value, .. } => {
            let n: i32 = rng.gen_range(0..3);
            let mut parts = Vec::new();
            for _ in 0..n {
                parts.push(random_bytes(rng, key));
                parts.push(random_bytes(rng, value));
            }
            let mut out = n.to_be_bytes().to_vec();
            out.extend_from_slice(&with_len(&parts));
            out
        }
        CqlType::Tuple(types) => random_fields(rng, &types.iter().collect::<Vec<_>>()),
        CqlType::Udt { fields, .. } => random_fields(rng, &fields.iter().map(|(_, t)| t).collect::<Vec<_>>()),
    }
}

fn random_fields(rng: &mut StdRng, types: &[&CqlType]) -> Vec<u8> {
    // Possibly truncated (fewer fields than declared), with nulls, including trailing ones.
    let n = if rng.gen_bool(0.2) { rng.gen_range(0..=types.len()) } else { types.len() };
    let mut out = Vec::new();
    for ty in &types[..n] {
        if rng.gen_bool(0.25) {
            out.extend_from_slice(&(-1i32).to_be_bytes());
        } else {
            let b = random_bytes(rng, ty);
            out.extend_from_slice(&(b.len() as i32).to_be_bytes());
            out.extend_from_slice(&b);
        }
    }
    out
}

fn random_varint_bytes(rng: &mut StdRng) -> Vec<u8> {
    let v: BigInt = match rng.gen_range(0..5) {
        0 => BigInt::from(pick(&[0i64, 1, -1, 127, 128, -128, -129, 255, 256], rng)),
        1 => BigInt::from(rng.gen::<i64>()),
        2 => BigInt::from(rng.gen::<i64>()) * BigInt::from(rng.gen::<i64>()) * BigInt::from(rng.gen::<i64>()),
        3 => BigInt::from(rng.gen_range(-3i64..3)) * BigInt::from(10).pow(rng.gen_range(0..40)),
        _ => BigInt::from(rng.gen::<i8>()),
    };
    let mut b = v.to_signed_bytes_be();
    if rng.gen_bool(0.15) {
        let fill = if v.sign() == num_bigint::Sign::Minus { 0xff } else { 0x00 };
        for _ in 0..rng.gen_range(1..3) {
            b.insert(0, fill);
        }
    }
    b
}

// ---------------------------------------------------------------------------
// Helpers.

/// `PROP_SCALE=N` multiplies the iteration counts; `PROP_SEED=S` shifts the seeds.
fn rounds(n: usize) -> usize {
    n * std::env::var("PROP_SCALE").ok().and_then(|v| v.parse().ok()).unwrap_or(1)
}

fn rng_for(test: u64) -> StdRng {
    let shift: u64 = std::env::var("PROP_SEED").ok().and_then(|v| v.parse().ok()).unwrap_or(0);
    StdRng::seed_from_u64(test.wrapping_add(shift.wrapping_mul(1000)))
}

fn enc(ty: &CqlType, bytes: &[u8], desc: bool) -> Vec<u8> {
    let mut out = Vec::new();
    encode_key_component(ty, bytes, desc, &mut out);
    out
}

fn sign(o: Ordering, desc: bool) -> Ordering {
    if desc {
        o.reverse()
    } else {
        o
    }
}

// ---------------------------------------------------------------------------
// Properties.

#[test]
fn generated_values_validate() {
    let mut rng = rng_for(1);
    for _ in 0..rounds(3000) {
        let ty = random_type(&mut rng, 2);
        let b = random_bytes(&mut rng, &ty);
        assert_eq!(validate(&ty, &b), Ok(()), "{ty} {b:02x?}");
    }
}

#[test]
fn order_encoding_agrees_with_comparator_and_round_trips() {
    let mut rng = rng_for(2);
    for round in 0..rounds(400) {
        let ty = random_type(&mut rng, 2);
        let pool: Vec<Vec<u8>> = (0..12).map(|_| random_bytes(&mut rng, &ty)).collect();
        for desc in [false, true] {
            let encs: Vec<Vec<u8>> = pool.iter().map(|b| enc(&ty, b, desc)).collect();
            for (b, e) in pool.iter().zip(&encs) {
                // Round trip, with arbitrary bytes following the component.
                let mut with_tail = e.clone();
                with_tail.extend_from_slice(&[0x00, 0xff, 0x01]);
                let (dec, used) = decode_key_component(&ty, &with_tail, desc)
                    .unwrap_or_else(|err| panic!("round {round} {ty} {b:02x?}: {err}"));
                assert_eq!(&dec, b, "{ty} desc={desc}");
                assert_eq!(used, e.len());
            }
            for (i, a) in pool.iter().enumerate() {
                for (j, b) in pool.iter().enumerate() {
                    let c = compare_serialized(&ty, a, b);
                    assert_eq!(c, compare_serialized(&ty, b, a).reverse(), "antisymmetry {ty}");
                    let m = encs[i].cmp(&encs[j]);
                    if a == b {
                        assert_eq!(m, Ordering::Equal);
                    } else {
                        assert_ne!(m, Ordering::Equal, "{ty}: distinct values share an encoding");
                        if c != Ordering::Equal {
                            assert_eq!(m, sign(c, desc), "{ty} desc={desc} {a:02x?} vs {b:02x?}");
                            // Prefix-freeness: any following bytes keep the order.
                            let mut ea = encs[i].clone();
                            ea.extend_from_slice(&[0xff; 4]);
                            let mut eb = encs[j].clone();
                            eb.extend_from_slice(&[0x00; 4]);
                            assert_eq!(ea.cmp(&eb), sign(c, desc));
                        }
                    }
                }
            }
        }
    }
}

#[test]
fn multi_component_keys_order_and_decode() {
    let mut rng = rng_for(3);
    for _ in 0..rounds(200) {
        let n = rng.gen_range(1..4);
        let cols: Vec<(CqlType, bool)> = (0..n).map(|_| (random_type(&mut rng, 1), rng.gen_bool(0.5))).collect();
        let rows: Vec<Vec<Vec<u8>>> =
            (0..10).map(|_| cols.iter().map(|(t, _)| random_bytes(&mut rng, t)).collect()).collect();
        let keys: Vec<Vec<u8>> = rows
            .iter()
            .map(|r| {
                let mut k = Vec::new();
                for ((t, d), b) in cols.iter().zip(r) {
                    encode_key_component(t, b, *d, &mut k);
                }
                k
            })
            .collect();
        for (r, k) in rows.iter().zip(&keys) {
            let mut pos = 0;
            for ((t, d), b) in cols.iter().zip(r) {
                let (v, used) = decode_key_component(t, &k[pos..], *d).unwrap();
                assert_eq!(&v, b);
                pos += used;
            }
            assert_eq!(pos, k.len());
        }
        for (ra, ka) in rows.iter().zip(&keys) {
            for (rb, kb) in rows.iter().zip(&keys) {
                let mut expected = Some(Ordering::Equal);
                for ((t, d), (a, b)) in cols.iter().zip(ra.iter().zip(rb)) {
                    if a == b {
                        continue;
                    }
                    let c = compare_serialized(t, a, b);
                    expected = if c == Ordering::Equal { None } else { Some(sign(c, *d)) };
                    break;
                }
                if let Some(e) = expected {
                    assert_eq!(ka.cmp(kb), e, "{cols:?}");
                }
            }
        }
    }
}

#[test]
fn values_round_trip_and_compare_like_bytes() {
    let mut rng = rng_for(4);
    let mut built = 0;
    for _ in 0..rounds(3000) {
        let ty = random_type(&mut rng, 2);
        let a = random_bytes(&mut rng, &ty);
        let b = random_bytes(&mut rng, &ty);
        let (Ok(va), Ok(vb)) = (Value::deserialize(&ty, &a), Value::deserialize(&ty, &b)) else {
            continue;
        };
        built += 1;
        assert!(va.is_of_type(&ty), "{ty} {va:?}");
        let ca = va.to_bytes();
        let cb = vb.to_bytes();
        // Canonical bytes are a fixed point.
        let again = Value::deserialize(&ty, &ca).unwrap();
        assert_eq!(again.to_bytes(), ca, "{ty}");
        assert_eq!(compare_values(&va, &vb), compare_serialized(&ty, &ca, &cb), "{ty} {va:?} {vb:?}");
        // Canonical bytes are fixed points of normalize(), which is idempotent. (normalize keeps
        // empty tuple fields that Value turns into nulls, so the two may differ there.)
        assert_eq!(normalize(&ty, &ca).unwrap(), ca, "{ty}");
        let na = normalize(&ty, &a).unwrap();
        assert_eq!(normalize(&ty, &na).unwrap(), na, "{ty}");
    }
    assert!(built > 1000, "only {built} values built");
}

#[test]
fn garbage_never_panics() {
    let mut rng = rng_for(5);
    for _ in 0..rounds(3000) {
        let ty = random_type(&mut rng, 2);
        let n = rng.gen_range(0..40);
        let mut g: Vec<u8> = (0..n).map(|_| rng.gen()).collect();
        if rng.gen_bool(0.5) {
            // Mutate a valid value instead.
            g = random_bytes(&mut rng, &ty);
            if !g.is_empty() {
                let i = rng.gen_range(0..g.len());
                g[i] = rng.gen();
                if rng.gen_bool(0.5) {
                    g.truncate(i);
                }
            }
        }
        let _ = validate(&ty, &g);
        let _ = Value::deserialize(&ty, &g);
        let _ = normalize(&ty, &g);
        let _ = compare_serialized(&ty, &g, &g);
        let e = enc(&ty, &g, false);
        // Even invalid bytes round-trip through the key encoding.
        assert_eq!(decode_key_component(&ty, &e, false).unwrap().0, g);
        let _ = decode_key_component(&ty, &g, rng.gen());
    }
}

// ---------------------------------------------------------------------------
// Fixed cases.

fn ser(v: &Value) -> Vec<u8> {
    v.to_bytes()
}

#[test]
fn fixed_width_round_trips() {
    let cases: Vec<(CqlType, Value)> = vec![
        (CqlType::TinyInt, Value::TinyInt(i8::MIN)),
        (CqlType::SmallInt, Value::SmallInt(i16::MIN)),
        (CqlType::Int, Value::Int(i32::MIN)),
        (CqlType::BigInt, Value::BigInt(i64::MIN)),
        (CqlType::BigInt, Value::BigInt(i64::MAX)),
        (CqlType::Counter, Value::Counter(-1)),
        (CqlType::Timestamp, Value::Timestamp(i64::MIN)),
        (CqlType::Date, Value::Date(0)),
        (CqlType::Time, Value::Time(86_399_999_999_999)),
        (CqlType::Float, Value::Float(-0.0)),
        (CqlType::Double, Value::Double(f64::MIN_POSITIVE)),
        (CqlType::Boolean, Value::Boolean(true)),
        (CqlType::Text, Value::Text(String::new())),
        (CqlType::Text, Value::Text("héllo 😀".into())),
        (CqlType::Ascii, Value::Ascii("abc".into())),
        (CqlType::Blob, Value::Blob(vec![])),
        (CqlType::Varint, Value::Varint(BigInt::from(-129))),
        (CqlType::Varint, Value::Varint(BigInt::from(0))),
        (CqlType::Decimal, Value::Decimal { unscaled: BigInt::from(-5), scale: -3 }),
        (CqlType::Inet, Value::Inet("::1".parse().unwrap())),
        (CqlType::Duration, Value::Duration { months: -1, days: -2, nanos: i64::MIN + 1 }),
        (CqlType::Duration, Value::Duration { months: i32::MAX, days: 0, nanos: i64::MAX }),
    ];
    for (ty, v) in cases {
        let b = ser(&v);
        assert_eq!(validate(&ty, &b), Ok(()), "{ty}");
        let back = Value::deserialize(&ty, &b).unwrap();
        assert_eq!(ser(&back), b, "{ty}");
        let e = enc(&ty, &b, false);
        assert_eq!(decode_key_component(&ty, &e, false).unwrap(), (b.clone(), e.len()));
    }
    assert_eq!(ser(&Value::Varint(BigInt::from(0))), vec![0]);
    assert_eq!(ser(&Value::Varint(BigInt::from(128))), vec![0, 0x80]);
    assert_eq!(ser(&Value::Varint(BigInt::from(-128))), vec![0x80]);
    assert_eq!(ser(&Value::Decimal { unscaled: BigInt::from(12345), scale: 2 }), vec![0, 0, 0, 2, 0x30, 0x39]);
    // Duration vints: zig-zag then Cassandra's length-prefix-in-first-byte encoding.
    assert_eq!(ser(&Value::Duration { months: 1, days: 2, nanos: 3 }), vec![2, 4, 6]);
    assert_eq!(ser(&Value::Duration { months: -1, days: 0, nanos: 0 }), vec![1, 0, 0]);
    assert_eq!(ser(&Value::Duration { months: 0, days: 0, nanos: 64 }), vec![0, 0, 0x80, 0x80]);
    let max = ser(&Value::Duration { months: 0, days: 0, nanos: i64::MIN });
    assert_eq!(max, [vec![0, 0, 0xff], vec![0xff; 8]].concat());
}

#[test]
fn empty_values() {
    assert_eq!(validate(&CqlType::Int, &[]), Ok(()));
    assert_eq!(validate(&CqlType::Uuid, &[]), Ok(()));
    assert_eq!(validate(&CqlType::Set { elem: Box::new(CqlType::Int), frozen: true }, &[]), Ok(()));
    assert!(validate(&CqlType::TinyInt, &[]).is_err());
    assert!(validate(&CqlType::Date, &[]).is_err());
    assert!(validate(&CqlType::List { elem: Box::new(CqlType::Int), frozen: true }, &[]).is_err());
    assert_eq!(Value::deserialize(&CqlType::Int, &[]), Err(ValueError::Empty("int".into())));
    assert_eq!(Value::deserialize(&CqlType::Text, &[]), Ok(Value::Text(String::new())));
    // Empty sorts first, before i32::MIN.
    let min = Value::Int(i32::MIN).to_bytes();
    assert_eq!(compare_serialized(&CqlType::Int, &[], &min), Ordering::Less);
    assert!(enc(&CqlType::Int, &[], false) < enc(&CqlType::Int, &min, false));
    assert!(enc(&CqlType::Int, &[], true) > enc(&CqlType::Int, &min, true));
    // An empty int inside a tuple becomes a null field.
    let ty = CqlType::Tuple(vec![CqlType::Int, CqlType::Text]);
    let b = [0u8, 0, 0, 0, 0, 0, 0, 0].to_vec();
    assert_eq!(Value::deserialize(&ty, &b), Ok(Value::Tuple(vec![None, Some(Value::Text(String::new()))])));
}

#[test]
fn validation_messages_are_cassandras() {
    let err = |ty: CqlType, b: &[u8]| validate(&ty, b).unwrap_err().to_string();
    assert_eq!(err(CqlType::Int, &[1, 2, 3]), "Expected 4 or 0 byte int (3)");
    assert_eq!(err(CqlType::BigInt, &[1]), "Expected 8 or 0 byte long (1)");
    assert_eq!(err(CqlType::TinyInt, &[1, 2]), "Expected 1 byte for a tinyint (2)");
    assert_eq!(err(CqlType::SmallInt, &[1]), "Expected 2 bytes for a smallint (1)");
    assert_eq!(err(CqlType::Boolean, &[1, 2]), "Expected 1 or 0 byte value (2)");
    assert_eq!(err(CqlType::Float, &[1]), "Expected 4 or 0 byte value for a float (1)");
    assert_eq!(err(CqlType::Double, &[1]), "Expected 8 or 0 byte value for a double (1)");
    assert_eq!(err(CqlType::Decimal, &[1]), "Expected 0 or at least 4 bytes (1)");
    assert_eq!(err(CqlType::Uuid, &[1]), "UUID should be 16 or 0 bytes (1)");
    assert_eq!(err(CqlType::TimeUuid, &[0; 16]), "Invalid version for TimeUUID type.");
    assert_eq!(err(CqlType::Timestamp, &[1]), "Expected 8 or 0 byte long for date (1)");
    assert_eq!(err(CqlType::Date, &[]), "Expected 4 byte long for date (0)");
    assert_eq!(err(CqlType::Time, &[1]), "Expected 8 byte long for time (1)");
    assert_eq!(err(CqlType::Ascii, &[b'a', 0xc3]), "Invalid byte for ascii: -61");
    assert_eq!(err(CqlType::Text, &[0xff]), "String didn't validate.");
    assert_eq!(err(CqlType::Inet, &[1, 2, 3]), "Expected 4 or 16 byte inetaddress; got 010203");
    assert_eq!(err(CqlType::Duration, &[0, 0]), "Expected at least 3 bytes for a duration (2)");
    assert_eq!(
        err(CqlType::Duration, &[2, 1, 0]),
        "The duration months, days and nanoseconds must be all of the same sign (1, -1, 0)"
    );
    let list = CqlType::List { elem: Box::new(CqlType::Int), frozen: true };
    assert_eq!(err(list.clone(), &[0, 0, 0, 1]), "Not enough bytes to read a list");
    assert_eq!(err(list.clone(), &[0, 0, 0, 0, 9]), "Unexpected extraneous bytes after list value");
    assert_eq!(err(list, &[0, 0, 0, 1, 0, 0, 0, 3, 1, 2, 3]), "Expected 4 or 0 byte int (3)");
    let map = CqlType::Map { key: Box::new(CqlType::Int), value: Box::new(CqlType::Int), frozen: true };
    assert_eq!(err(map, &[0, 0, 0, 1, 0, 0, 0, 0]), "Not enough bytes to read a map");
    let tuple = CqlType::Tuple(vec![CqlType::Int]);
    assert_eq!(err(tuple.clone(), &[0, 0]), "Not enough bytes to read size of 0th component");
    assert_eq!(err(tuple.clone(), &[0, 0, 0, 4, 1]), "Not enough bytes to read 0th component");
    assert_eq!(err(tuple, &[0, 0, 0, 0, 0, 0, 0, 0]), "Invalid remaining data after end of tuple value");
    let udt = CqlType::Udt {
        keyspace: "ks".into(),
        name: "u".into(),
        fields: vec![("a".into(), CqlType::Int)],
        frozen: true,
    };
    assert_eq!(err(udt, &[0, 0]), "Not enough bytes to read size of 0th field a");
    // Values of the right shape pass.
    assert_eq!(validate(&CqlType::TimeUuid, &[0x10; 16]), Ok(()));
    assert_eq!(validate(&CqlType::Varint, &[]), Ok(()));
    assert_eq!(validate(&CqlType::Tuple(vec![CqlType::Int, CqlType::Int]), &[0, 0, 0, 0]), Ok(()));
}

#[test]
fn comparator_edge_cases() {
    let f = |x: f32| Value::Float(x).to_bytes();
    let d = |x: f64| Value::Double(x).to_bytes();
    assert_eq!(compare_serialized(&CqlType::Float, &f(-0.0), &f(0.0)), Ordering::Less);
    assert_eq!(compare_serialized(&CqlType::Float, &f(f32::NAN), &f(f32::INFINITY)), Ordering::Greater);
    assert_eq!(compare_serialized(&CqlType::Float, &f(-f32::NAN), &f(f32::NAN)), Ordering::Equal);
    assert_eq!(compare_serialized(&CqlType::Double, &d(-1e300), &d(-1.0)), Ordering::Less);
    let dec = |u: i64, s: i32| Value::Decimal { unscaled: BigInt::from(u), scale: s }.to_bytes();
    assert_eq!(compare_serialized(&CqlType::Decimal, &dec(10, 1), &dec(100, 2)), Ordering::Equal);
    assert_eq!(compare_serialized(&CqlType::Decimal, &dec(-10, 1), &dec(-2, 0)), Ordering::Greater);
    assert_eq!(compare_serialized(&CqlType::Decimal, &dec(5, -3), &dec(4999, 0)), Ordering::Greater);
    assert_eq!(compare_serialized(&CqlType::Varint, &[0, 0, 5], &[5]), Ordering::Equal);
    assert_eq!(compare_serialized(&CqlType::Varint, &[0xff, 0xff], &[0x80]), Ordering::Greater);
    assert_eq!(compare_serialized(&CqlType::Boolean, &[0], &[1]), Ordering::Less);
    assert_eq!(compare_serialized(&CqlType::Boolean, &[2], &[1]), Ordering::Equal);
    assert_eq!(compare_serialized(&CqlType::Int, &(-1i32).to_be_bytes(), &1i32.to_be_bytes()), Ordering::Less);
    assert_eq!(compare_serialized(&CqlType::Text, b"a", b"ab"), Ordering::Less);
    assert_eq!(compare_serialized(&CqlType::Inet, &[9, 9, 9, 9], &[1; 16]), Ordering::Greater);
    // uuid: version first; timeuuid: time first; lsb unsigned vs signed.
    let v1 = types::literal::timeuuid_from_parts(1000, 0x0000_0000_0000_0000);
    let v1_later = types::literal::timeuuid_from_parts(2000, 0x0000_0000_0000_0000);
    let v4 = uuid::Uuid::from_u128(0x0000_0000_0000_4000_8000_0000_0000_0000);
    assert_eq!(compare_serialized(&CqlType::Uuid, v1_later.as_bytes(), v4.as_bytes()), Ordering::Less);
    assert_eq!(compare_serialized(&CqlType::Uuid, v1.as_bytes(), v1_later.as_bytes()), Ordering::Less);
    let hi = types::literal::timeuuid_from_parts(1000, 0x8000_0000_0000_0000);
    let lo = types::literal::timeuuid_from_parts(1000, 0x7f00_0000_0000_0000);
    assert_eq!(compare_serialized(&CqlType::TimeUuid, hi.as_bytes(), lo.as_bytes()), Ordering::Less);
    assert_eq!(compare_serialized(&CqlType::Uuid, hi.as_bytes(), lo.as_bytes()), Ordering::Greater);
    let min = types::literal::min_timeuuid(1000);
    let max = types::literal::max_timeuuid(1000);
    for lsb in [0u64, u64::MAX, 0x8080_8080_8080_8081, 0x7f7f_7f7f_7f7f_7f7e] {
        let u = types::literal::timeuuid_from_parts(1000, lsb);
        assert_eq!(compare_serialized(&CqlType::TimeUuid, min.as_bytes(), u.as_bytes()), Ordering::Less);
        assert_eq!(compare_serialized(&CqlType::TimeUuid, u.as_bytes(), max.as_bytes()), Ordering::Less);
    }
    assert_eq!(
        compare_serialized(&CqlType::TimeUuid, max.as_bytes(), types::literal::min_timeuuid(1001).as_bytes()),
        Ordering::Less
    );
    // Collections: element-wise then length; tuples ignore trailing nulls.
    let l = |xs: &[i32]| Value::List(xs.iter().map(|x| Value::Int(*x)).collect()).to_bytes();
    let lt = CqlType::List { elem: Box::new(CqlType::Int), frozen: true };
    assert_eq!(compare_serialized(&lt, &l(&[1, 2]), &l(&[1, 2, 0])), Ordering::Less);
    assert_eq!(compare_serialized(&lt, &l(&[2]), &l(&[1, 9, 9])), Ordering::Greater);
    let tt = CqlType::Tuple(vec![CqlType::Int, CqlType::Int]);
    let t1 = Value::Tuple(vec![Some(Value::Int(1)), None]).to_bytes();
    let t2 = Value::Tuple(vec![Some(Value::Int(1))]).to_bytes();
    let t3 = Value::Tuple(vec![Some(Value::Int(1)), Some(Value::Int(i32::MIN))]).to_bytes();
    assert_eq!(compare_serialized(&tt, &t1, &t2), Ordering::Equal);
    assert_eq!(compare_serialized(&tt, &t1, &t3), Ordering::Less);
    assert!(enc(&tt, &t1, false) != enc(&tt, &t2, false));
}

#[test]
fn sets_and_maps_are_canonical() {
    let st = CqlType::Set { elem: Box::new(CqlType::Int), frozen: true };
    let v = Value::Set(vec![Value::Int(3), Value::Int(-1), Value::Int(3), Value::Int(0)]);
    let b = v.to_bytes();
    assert_eq!(Value::deserialize(&st, &b), Ok(Value::Set(vec![Value::Int(-1), Value::Int(0), Value::Int(3)])));
    // Unsorted wire bytes are normalized on deserialize and by normalize().
    let unsorted = Value::List(vec![Value::Int(3), Value::Int(1), Value::Int(3)]).to_bytes();
    assert_eq!(normalize(&st, &unsorted).unwrap(), Value::Set(vec![Value::Int(1), Value::Int(3)]).to_bytes());
    let mt = CqlType::Map { key: Box::new(CqlType::Text), value: Box::new(CqlType::Int), frozen: true };
    let m = Value::Map(vec![
        (Value::Text("b".into()), Value::Int(1)),
        (Value::Text("a".into()), Value::Int(2)),
        (Value::Text("b".into()), Value::Int(3)),
    ]);
    assert_eq!(
        Value::deserialize(&mt, &m.to_bytes()),
        Ok(Value::Map(vec![(Value::Text("a".into()), Value::Int(2)), (Value::Text("b".into()), Value::Int(3))]))
    );
}

#[test]
fn literals_round_trip_through_parsers() {
    use types::literal::*;
    let mut rng = rng_for(6);
    for _ in 0..rounds(2000) {
        let ms: i64 = rng.gen_range(-62_135_596_800_000..253_402_300_800_000);
        let lit = Value::Timestamp(ms).to_cql_literal();
        assert_eq!(parse_timestamp(lit.trim_matches('\'')), Ok(ms), "{lit}");
        let d: u32 = rng.gen();
        let lit = Value::Date(d).to_cql_literal();
        assert_eq!(parse_date(lit.trim_matches('\'')), Ok(d), "{lit}");
        let t: i64 = rng.gen_range(0..NANOS_PER_DAY);
        let lit = Value::Time(t).to_cql_literal();
        assert_eq!(parse_time(lit.trim_matches('\'')), Ok(t), "{lit}");
        let sign: i64 = if rng.gen() { 1 } else { -1 };
        let (mo, dd, ns) = (
            (sign * rng.gen_range(0..i32::MAX as i64)) as i32,
            (sign * rng.gen_range(0..1000)) as i32,
            sign * rng.gen_range(0..i64::MAX),
        );
        let lit = Value::Duration { months: mo, days: dd, nanos: ns }.to_cql_literal();
        assert_eq!(parse_duration(&lit), Ok((mo, dd, ns)), "{lit}");
        let f: f64 = f64::from_bits(rng.gen());
        let lit = Value::Double(f).to_cql_literal();
        if f.is_finite() {
            assert_eq!(lit.parse::<f64>().map(f64::to_bits), Ok(f.to_bits()), "{lit}");
        }
    }
}

#[test]
fn text_prefixes_order_inside_multi_component_keys() {
    let key = |a: &str, b: i32, desc: bool| {
        let mut k = Vec::new();
        encode_key_component(&CqlType::Text, a.as_bytes(), desc, &mut k);
        encode_key_component(&CqlType::Int, &b.to_be_bytes(), false, &mut k);
        k
    };
    for desc in [false, true] {
        let flip = |o: Ordering| if desc { o.reverse() } else { o };
        assert_eq!(key("a", i32::MAX, desc).cmp(&key("ab", i32::MIN, desc)), flip(Ordering::Less));
        assert_eq!(key("", i32::MAX, desc).cmp(&key("\0", i32::MIN, desc)), flip(Ordering::Less));
        assert_eq!(key("a\0", 0, desc).cmp(&key("a\u{1}", 0, desc)), flip(Ordering::Less));
        assert_eq!(key("a", 1, desc).cmp(&key("a", 2, desc)), Ordering::Less);
        let k = key("a\0b", -5, desc);
        let (v, used) = decode_key_component(&CqlType::Text, &k, desc).unwrap();
        assert_eq!(v, b"a\0b");
        assert_eq!(decode_key_component(&CqlType::Int, &k[used..], false).unwrap().0, (-5i32).to_be_bytes());
    }
}
