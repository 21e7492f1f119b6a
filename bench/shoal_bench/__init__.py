"""shoal_bench: the benchmark of record, Shoal side by side with Apache Cassandra (issue 5).

`bench/compare` is its entry point; `cli` holds the command line and its --help text. The modules:

  util         paths and environment (ROOT, SHOAL_BIN, CASS_REF, ...), log, sh, Fail, ports, shown(),
               start_shoal (one local node on free ports: bench/ab.py and bench/paired.py)
  proc         /proc readers: machine ticks, CPU and memory probes, peak RSS, thread CPU, the Sampler
  servers      Shoal and Cassandra nodes and clusters; the registry of running servers and stop_all
  compare      the comparison: Bench, its runs, tables, issue-5 targets, the max-rate phase, RESULTS.md
  settle       issue 24: settling a server after a write phase (flush, compactions done, CPU idle), the
               compaction status parsers, verify counts, the settled CPU per op, the --long run's n
  cassconf     issue 24: Cassandra's template and cassandra_latest.yaml configurations, cassandra-env.sh's heap
  steadiness   --steadiness: one long write run per system, the rate per minute, STEADINESS.md
  durability   --durability: commitlog_sync modes vs client threads and the disk's fsync rate, DURABILITY.md
  plots        chart specs (JSON) drawn to SVG by `shoal stress plot`
  lifecycle    bench/lifecycle (issue 21): bootstrap, decommission and repair, timed and metered; LIFECYCLE.md
  scaling      bench/scaling (issue 24): server CPU per client write from 1 to 8 nodes; SCALING.md
  soak         bench/soak (issue 26): a 3-node RF=3 cluster at half its max with a node restarted on a schedule,
               per-minute throughput, p99, RSS, disk and errors, their slopes per hour and a verdict; SOAK.md
  cli          argparse, main, signal handling

Standard library only.
"""
