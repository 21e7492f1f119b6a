//! The compression check (`Storage::tune_compression`, storage `tuning`):
//! a table written with random bytes stops compressing its new files, one
//! written with text starts again, a table whose options turn compression
//! off is never switched on, and every row reads back the same whatever
//! mix of compressed and uncompressed files holds it.

mod common;

use bytes::Bytes;
use common::*;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use storage::{ColumnData, Storage};
use uuid::Uuid;

const V: u16 = 17;

fn write(storage: &Storage, table: Uuid, pk: i32, value: Bytes) {
    let ts = now_micros();
    let mut m = mutation(table, pk);
    let mut r = row(Vec::new());
    r.marker = marker(ts);
    r.cells.push(live_cell(V, ts, value));
    m.rows.push(r);
    storage.apply(&[m]).unwrap();
}

fn read(storage: &Storage, table: Uuid, pk: i32) -> Option<Vec<u8>> {
    let p = storage.read_partition(&full_read(table, pk, now_secs())).unwrap()?;
    match p.rows.first()?.column(V)? {
        ColumnData::Simple(c) => Some(c.value.clone()),
        _ => None,
    }
}

fn random_value(rng: &mut StdRng) -> Bytes {
    Bytes::from((0..200).map(|_| rng.gen::<u8>()).collect::<Vec<u8>>())
}

fn text_value(pk: i32) -> Bytes {
    Bytes::from(format!("sensor-{pk:06},temperature=21.5,humidity=40,status=ok;").repeat(4))
}

#[test]
fn random_data_turns_compression_off_and_text_turns_it_back_on() {
    let dir = tempfile::tempdir().unwrap();
    let (storage, _) = open(&config(dir.path(), periodic()));
    let t = Uuid::new_v4();
    storage.set_schema(&[keyspace("ks", true, vec![kv_table("ks", "kv", t)])]).unwrap();
    assert_eq!(storage.compressing(&t), Some(true));
    // Nothing written yet: nothing to decide.
    assert!(storage.tune_compression().is_empty());

    let mut rng = StdRng::seed_from_u64(7);
    let mut expect = Vec::new();
    for pk in 0..2000 {
        let v = random_value(&mut rng);
        write(&storage, t, pk, v.clone());
        expect.push(v);
    }
    assert_eq!(storage.tune_compression(), vec![(t, false)]);
    assert_eq!(storage.compressing(&t), Some(false));
    // Deciding again changes nothing.
    assert!(storage.tune_compression().is_empty());
    storage.flush(None).unwrap();

    // Text overwrites every row: compression comes back for new files.
    for pk in 0..2000 {
        write(&storage, t, pk, text_value(pk));
    }
    assert_eq!(storage.tune_compression(), vec![(t, true)]);
    storage.flush(None).unwrap();
    for pk in 2000..2100 {
        let v = random_value(&mut rng);
        write(&storage, t, pk, v.clone());
        expect.push(v);
    }
    // Rows in uncompressed and compressed files and in the memtable, before
    // and after they are merged into one compressed file.
    for round in 0..2 {
        for pk in 0..2000 {
            assert_eq!(read(&storage, t, pk).as_deref(), Some(&text_value(pk)[..]), "round {round} pk {pk}");
        }
        for pk in 2000..2100 {
            assert_eq!(read(&storage, t, pk).as_deref(), Some(&expect[pk as usize][..]), "round {round} pk {pk}");
        }
        storage.compact(None).unwrap();
    }
}

#[test]
fn a_table_without_compression_stays_without_and_alter_changes_it_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let (storage, _) = open(&config(dir.path(), periodic()));
    let t = Uuid::new_v4();
    let mut table = kv_table("ks", "kv", t);
    table.options.compression.clear();
    table.options.compression.insert("enabled".into(), "false".into());
    storage.set_schema(&[keyspace("ks", true, vec![table.clone()])]).unwrap();
    assert_eq!(storage.compressing(&t), Some(false));
    for pk in 0..2000 {
        write(&storage, t, pk, text_value(pk));
    }
    // Compressible, but the table asks for none.
    assert!(storage.tune_compression().is_empty());
    assert_eq!(storage.compressing(&t), Some(false));

    // ALTER TABLE ... WITH compression = {'class': 'LZ4Compressor'} and new
    // size-tiered thresholds: applied to the open table.
    table.options.compression.clear();
    table.options.compression.insert("class".into(), "org.apache.cassandra.io.compress.LZ4Compressor".into());
    table.options.compaction.insert("min_threshold".into(), "6".into());
    storage.set_schema(&[keyspace("ks", true, vec![table.clone()])]).unwrap();
    assert_eq!(storage.compressing(&t), Some(true));
    storage.flush(None).unwrap();
    for pk in 0..2000 {
        assert_eq!(read(&storage, t, pk).as_deref(), Some(&text_value(pk)[..]));
    }

    // Reopened, the table keeps its options.
    drop(storage);
    let (storage, _) = open(&config(dir.path(), periodic()));
    assert_eq!(storage.compressing(&t), Some(true));
    for pk in (0..2000).step_by(97) {
        assert_eq!(read(&storage, t, pk).as_deref(), Some(&text_value(pk)[..]));
    }
}
