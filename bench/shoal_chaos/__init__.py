"""shoal_chaos: Shoal's fault harness on real processes (issue 26). `bench/chaos` is its entry point.

A run builds a cluster of real `shoal server` processes, each in its own network namespace (veth pairs
to a bridge in a namespace of the run's own; the client workload in one more), runs a workload of
QUORUM writes of unique values and QUORUM reads that records every operation, injects faults (the
nemesis), heals, repairs, and checks the history. The modules:

  netns      the namespaces, the bridge, the veths and addresses (10.77.0.0/24, inside them only);
             nft drop rules (partitions, packet loss) and tc netem (delay, reordering) where the
             kernel has it; teardown of everything a run created
  cluster    the nodes: YAML configs, start/kill -9/SIGSTOP/SIGCONT, tmpfs data dirs and their
             filler (full disk), libfaketime clock offsets, `shoal tool` through the client namespace,
             process exits and RSS sampling
  client     runs inside the client namespace under $SHOAL_VENV's Python (the DataStax driver): the
             workload and its history (JSON lines), the verification reads (ALL, and ONE per node)
  checkers   pure functions over a history and the final reads: lost acknowledged writes, QUORUM
             reads that miss a write acknowledged before they began, replica convergence, crashes, RSS
  scenarios  the nemesis schedules by name, a scenario run (workload + nemesis + heal + repair +
             checks), its one-line verdict and JSON report, and `ci` (every scenario on one cluster)
  cli        argparse and main

Invariants: every name a run creates (namespaces, files) carries the run's prefix with its PID, so
parallel runs do not clash; everything a run creates is removed in a `finally` (and on SIGINT/SIGTERM);
the harness never changes Shoal, only its environment. The orchestrator uses the standard library only;
the client module needs the DataStax Python driver.
"""
