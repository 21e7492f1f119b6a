"""The two Cassandra configurations of `bench/compare --cassandra-config template|latest|both` (issue 24).

- template: scripts/cassandra/cassandra.yaml.template as it is (Cassandra 5.0's compatible defaults, the
  run of record so far), start.sh's 2 GB heap.
- latest: the same template with the settings in which Cassandra 5.0.9's conf/cassandra_latest.yaml (the
  distribution's "latest features, higher performance" configuration for new clusters) differs from its
  conf/cassandra.yaml where they touch this benchmark (`LATEST`): trie memtables allocated off heap, BTI
  sstables, the unified compaction strategy as the default, storage_compatibility_mode NONE (5.0's formats
  and commit log), no key cache (BTI needs none), trickle fsync, 8 concurrent compactors, 4 KiB column index,
  UUID sstable ids, SAI as the default secondary index (5.0's file leaves Paxos at v1; later versions' files
  set paxos_variant v2, which is not taken here); and the heap Cassandra's own cassandra-env.sh would pick on
  this machine
  (`env_heap_mb`, its calculate_heap_sizes: max(min(1/2 RAM, 1 GB), min(1/4 RAM, 8 GB))).

The install (Maven Central jars, scripts/cassandra/install.sh) has no conf/ directory, so `LATEST` is kept
here, written from the cassandra-5.0 line's conf/cassandra_latest.yaml (read, not copied: the settings only);
every key it sets is one Cassandra 5.0.9 accepts (an unknown key stops Cassandra at startup, so a run shows it
at once; its log's "Node configuration" line shows them applied). `merge_yaml` replaces each top-level key of the template that
`LATEST` sets (with its indented block) and appends the others."""

import os
import re
import shutil

from .util import Fail, read_text

CONFIGS = ("template", "latest")

LATEST = """\
memtable:
  configurations:
    skiplist:
      class_name: SkipListMemtable
    trie:
      class_name: TrieMemtable
    default:
      inherits: trie
memtable_allocation_type: offheap_objects
sstable:
  selected_format: bti
storage_compatibility_mode: NONE
column_index_size: 4KiB
default_compaction:
  class_name: UnifiedCompactionStrategy
  parameters:
    scaling_parameters: T4
    max_sstables_to_compact: 64
    target_sstable_size: 1GiB
    sstable_growth: 0.3333333333333333
    min_sstable_size: 100MiB
concurrent_compactors: 8
key_cache_size: 0MiB
trickle_fsync: true
trickle_fsync_interval: 10240KiB
commitlog_disk_access_mode: auto
uuid_sstable_identifiers_enabled: true
default_secondary_index: sai
default_secondary_index_enabled: true
"""


def top_level_blocks(text):
    """[(key or None, lines)] of a YAML text: each top-level `key:` with the indented, blank and comment
    lines after it; None for lines before the first key."""
    blocks = [(None, [])]
    for line in text.split("\n"):
        m = re.match(r"^([A-Za-z_][A-Za-z0-9_]*)\s*:", line)
        if m:
            blocks.append((m.group(1), [line]))
        else:
            blocks[-1][1].append(line)
    return blocks


def merge_yaml(template, overrides):
    """The template with each top-level key of `overrides` replaced by its block there (in place), and the
    keys the template lacks appended at the end under a comment."""
    new = {k: lines for k, lines in top_level_blocks(overrides) if k}
    out, done = [], set()
    for key, lines in top_level_blocks(template):
        if key in new:
            # Keep the comment and blank lines that trail the replaced block (they belong to the next key).
            tail = []
            while len(lines) > 1 and (not lines[-1].strip() or lines[-1].lstrip().startswith("#")):
                tail.insert(0, lines.pop())
            out += [ln for ln in new[key] if ln.strip()] + tail
            done.add(key)
        else:
            out += lines
    rest = [k for k in new if k not in done]
    text = "\n".join(out).rstrip("\n") + "\n"
    if rest:
        text += "\n# bench/compare --cassandra-config latest: Cassandra 5.0.9's cassandra_latest.yaml settings\n"
        for k in rest:
            text += "\n".join(ln for ln in new[k] if ln.strip()) + "\n"
    return text


def yaml_keys(text):
    return [k for k, _ in top_level_blocks(text) if k]


def env_heap_mb(mem_total_kib=None):
    """The heap cassandra-env.sh's calculate_heap_sizes picks: half the RAM capped at 1 GB, a quarter
    capped at 8 GB, the larger of the two (MiB; RAM as `free -m` reports MemTotal)."""
    if mem_total_kib is None:
        m = re.search(r"^MemTotal:\s*(\d+)", read_text("/proc/meminfo"), re.M)
        mem_total_kib = int(m.group(1)) if m else 2 << 20
    system_mb = mem_total_kib // 1024
    half, quarter = min(system_mb // 2, 1024), min(system_mb // 2 // 2, 8192)
    return max(half, quarter)


def heap_of(config, override=None, env=None):
    """start.sh's CASSANDRA_HEAP for a configuration: the override, else for the template the environment's
    CASSANDRA_HEAP or start.sh's 2G, for latest env_heap_mb (what cassandra-env.sh would pick)."""
    if override:
        return override
    env = os.environ if env is None else env
    return env.get("CASSANDRA_HEAP") or "2G" if config == "template" else f"{env_heap_mb()}M"


def scripts_with_template(cass_ref, directory, scripts, edit, why):
    """A copy of cass_ref's `scripts` in `directory` beside its template edited by `edit` (start.sh reads its
    template beside itself); `why` names the option that needs it in the error for a missing script."""
    os.makedirs(directory, exist_ok=True)
    for name in scripts:
        src = os.path.join(cass_ref, name)
        if not os.path.isfile(src):
            raise Fail(f"no {src}: {why} start Cassandra through a copy of {cass_ref}'s scripts")
        shutil.copy2(src, os.path.join(directory, name))
    with open(os.path.join(cass_ref, "cassandra.yaml.template")) as f:
        template = f.read()
    with open(os.path.join(directory, "cassandra.yaml.template"), "w") as f:
        f.write(edit(template))
    return directory


def cassandra_ref(config, cass_ref, directory, scripts):
    """For `latest`: a copy of the scripts in `directory` with the merged template; for `template`: cass_ref
    itself."""
    if config == "template":
        return cass_ref
    return scripts_with_template(cass_ref, directory, scripts, lambda t: merge_yaml(t, LATEST),
                                 "--cassandra-config latest")
