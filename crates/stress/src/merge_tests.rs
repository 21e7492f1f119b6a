//! `merge` on synthetic reports: counts and histograms add up, intervals align
//! on wall-clock time, rates add per slot, a write and a read process make a
//! mixed report, server CPU of overlapping windows is not counted twice.

use std::time::{Duration, SystemTime};

use super::*;
use crate::report::JsonSettings;
use crate::run::Measured;
use crate::settings::{Command, Settings};
use crate::stats::{Outcome, Recorder};

/// One interval of a synthetic run: its length and its latencies (µs) per type.
struct Fake {
    seconds: f64,
    writes: Vec<u64>,
    reads: Vec<u64>,
    errors: u64,
}

fn fake(command: Command, start_unix_s: f64, intervals: &[Fake], server_cpu: Option<(f64, f64)>) -> Report {
    let mut settings = Settings::new(command);
    settings.length = crate::settings::RunLength::Time(Duration::from_secs(10));
    if server_cpu.is_some() {
        settings.server_pids = vec![42];
    }
    let mixed = command == Command::Mixed;
    let fresh = || if mixed { Recorder::with_types() } else { Recorder::new() };
    let mut total = fresh();
    let mut rows = Vec::new();
    let mut at = 0.0;
    for f in intervals {
        let mut r = fresh();
        for &us in &f.writes {
            r.record(OpType::Write, Outcome::Written, us, us, 0);
        }
        for &us in &f.reads {
            r.record(OpType::Read, Outcome::Read, us, us, 0);
        }
        for _ in 0..f.errors {
            r.record(OpType::Write, Outcome::Failed, 1, 1, 0);
        }
        total.merge(&r);
        let of = |t: OpType| r.of_type(t).map(|x| TypeStats::of(x, f.seconds, false));
        rows.push(IntervalRow {
            total_ops: total.ops,
            op_rate: r.ops as f64 / f.seconds,
            row_rate: r.rows as f64 / f.seconds,
            elapsed_s: at + f.seconds,
            duration_s: f.seconds,
            errors: r.errors,
            latency: Percentiles::of(&r.latency),
            service_time: Percentiles::of(&r.service),
            start_unix_s: start_unix_s + at,
            ops: r.ops,
            rows: r.rows,
            latency_hdr: Some(hdr::encode(&r.latency)),
            service_hdr: None,
            read: of(OpType::Read),
            write: of(OpType::Write),
            applied: None,
            not_applied: None,
        });
        at += f.seconds;
    }
    let measured = Measured {
        total,
        intervals: rows.clone(),
        elapsed: Duration::from_secs_f64(at),
        started: SystemTime::UNIX_EPOCH + Duration::from_secs_f64(start_unix_s),
        client_cpu_s: Some(at * 0.5),
        client_threads: 1,
        server_cpu,
        stopped_by: None,
    };
    let summary = Summary::new(&settings, &measured);
    Report::new(&["write".to_string()], JsonSettings::of(&settings), summary, rows)
}

fn writes(seconds: f64, latencies: &[u64]) -> Fake {
    Fake { seconds, writes: latencies.to_vec(), reads: Vec::new(), errors: 0 }
}

fn count(text: &Option<String>) -> u64 {
    hdr::decode(text.as_deref().expect("histogram")).expect("decodes").len()
}

#[test]
fn counts_and_histograms_add_and_intervals_align_on_wall_clock() {
    const T: f64 = 1_800_000_000.0;
    let a = fake(
        Command::Write,
        T,
        &[writes(1.0, &[100, 200, 300]), writes(1.0, &[400, 500]), writes(0.2, &[600])],
        Some((10.0, 12.0)),
    );
    // B starts 0.3 s later and has the slowest operation.
    let b = fake(
        Command::Write,
        T + 0.3,
        &[writes(1.0, &[1_000, 2_000]), writes(1.0, &[50_000]), Fake { errors: 3, ..writes(1.0, &[700]) }],
        Some((11.0, 13.5)),
    );
    let merged = merge(&[("a.json".to_string(), a.clone()), ("b.json".to_string(), b.clone())]).expect("merges");
    let s = &merged.summary;
    assert_eq!(s.ops, a.summary.ops + b.summary.ops);
    assert_eq!((s.ops, s.errors, s.writes, s.clients), (10, 3, 10, 2));
    assert_eq!(count(&s.latency_hdr), count(&a.summary.latency_hdr) + count(&b.summary.latency_hdr));
    assert_eq!(s.latency.max_ms, a.summary.latency.max_ms.max(b.summary.latency.max_ms));
    assert!((s.latency.max_ms - 50.0).abs() < 0.1, "{:?}", s.latency);
    assert!((s.elapsed_s - 3.3).abs() < 1e-6, "from A's start to B's end: {}", s.elapsed_s);
    assert!((s.op_rate - 10.0 / 3.3).abs() < 1e-6);
    assert_eq!(s.command, "write");
    assert!(s.read.is_none() && s.write.is_none(), "one type only: no per-type statistics");
    // Same server: the union of the windows (10..13.5), not 2 + 2.5.
    assert_eq!(s.server_cpu_s, Some(3.5));
    assert_eq!(s.client_cpu_s, Some(2.2 * 0.5 + 3.0 * 0.5));

    // Slots: [T, T+1) holds A1 and B1 (midpoint T+0.8), [T+1, T+2) A2, A's 0.2 s
    // sliver (it joins the slot before it) and B2, [T+2, T+3) B3.
    let rows = &merged.intervals;
    assert_eq!(rows.len(), 3, "{rows:#?}");
    assert_eq!(rows.iter().map(|r| r.ops).collect::<Vec<_>>(), vec![5, 4, 1]);
    assert_eq!(rows.last().map(|r| r.total_ops), Some(10));
    assert_eq!(rows[2].errors, 3);
    // Rates add per process: A's 3 ops in 1.2 s plus B's 1 op in 1 s.
    assert!((rows[1].op_rate - 3.5).abs() < 1e-9, "{}", rows[1].op_rate);
    assert!((rows[0].op_rate - 5.0).abs() < 1e-9);
    assert!((rows[2].op_rate - 1.0).abs() < 1e-9);
    assert_eq!(rows[0].start_unix_s, T);
    assert_eq!(rows.iter().map(|r| count(&r.latency_hdr)).sum::<u64>(), 10);
    assert!((rows[1].latency.max_ms - 50.0).abs() < 0.1);

    // The merged report is a report: it round-trips through JSON and merges again.
    let text = serde_json::to_string(&merged).expect("serializes");
    let again: Report = serde_json::from_str(&text).expect("parses");
    assert_eq!(again.merged_from, vec!["a.json".to_string(), "b.json".to_string()]);
    let twice = merge(&[("m".to_string(), again), ("a".to_string(), a)]).expect("merges again");
    assert_eq!((twice.summary.ops, twice.summary.clients), (16, 3));
}

#[test]
fn a_write_process_and_a_read_process_make_a_mixed_report() {
    const T: f64 = 1_800_000_000.0;
    let w = fake(Command::Write, T, &[writes(1.0, &[100, 200])], None);
    let r = fake(
        Command::Read,
        T,
        &[Fake { seconds: 1.0, writes: Vec::new(), reads: vec![5_000, 6_000, 7_000], errors: 0 }],
        None,
    );
    let m = fake(Command::Mixed, T, &[Fake { seconds: 1.0, writes: vec![300], reads: vec![8_000], errors: 0 }], None);
    let merged = merge(&[("w".to_string(), w.clone()), ("r".to_string(), r), ("m".to_string(), m)]).expect("merges");
    let s = &merged.summary;
    assert_eq!(s.command, "mixed");
    let (read, write) = (s.read.as_ref().expect("reads"), s.write.as_ref().expect("writes"));
    assert_eq!((read.ops, write.ops, s.reads, s.writes), (4, 3, 4, 3));
    assert_eq!(count(&read.latency_hdr), 4);
    assert!((read.latency.max_ms - 8.0).abs() < 0.01 && write.latency.max_ms < 0.31);
    assert!(s.server_cpu_s.is_none());
    let row = &merged.intervals[0];
    assert_eq!(row.read.as_ref().map(|t| t.op_rate), Some(4.0));
    assert_eq!(row.write.as_ref().map(|t| t.op_rate), Some(3.0));
    assert_eq!(row.line(true).split(',').count(), 18, "mixed lines carry per-type columns");
    assert!(s.text().contains("Read latency"));

    // A last sliver (0.1 s) joins the slot before it: one slot, its rate from 1.1 s of work.
    let tail = fake(Command::Write, T, &[writes(1.0, &[100, 200]), writes(0.1, &[300])], None);
    let merged = merge(&[("w".to_string(), w), ("tail".to_string(), tail)]).expect("merges");
    assert_eq!(merged.intervals.len(), 1, "{:#?}", merged.intervals);
    assert_eq!(merged.intervals[0].ops, 5);
    assert!((merged.intervals[0].op_rate - (2.0 + 3.0 / 1.1)).abs() < 1e-9);
}

#[test]
fn refuses_reports_without_histograms() {
    let mut old = fake(Command::Write, 1_800_000_000.0, &[writes(1.0, &[100])], None);
    old.summary.latency_hdr = None;
    let e = merge(&[("old.json".to_string(), old)]).expect_err("refused");
    assert!(e.contains("old.json has no latency histogram"), "{e}");
    assert!(parse(&[]).is_err());
    let (files, json, plot) = parse(&["a".into(), "--json".into(), "o.json".into(), "b".into(), "--plot=p.svg".into()])
        .expect("parses")
        .expect("not help");
    assert_eq!((files.len(), json.is_some(), plot.is_some()), (2, true, true));
    assert!(parse(&["a".into(), "--bogus".into()]).is_err());
}
