//! CPU time of processes from `/proc/PID/stat` (utime + stime, fields 14 and
//! 15, in clock ticks), the same measure `shared/cassandra/bench.sh` uses for
//! the server: sampled at the start and the end of the measured phase, the
//! difference divided by the operations gives CPU-microseconds per operation.
//!
//! Invariant: a sample is all-or-nothing: if any PID cannot be read, the
//! sample is `None` and nothing per-op is reported (a partial sum would
//! understate the cost).

use std::process::Command;
use std::sync::OnceLock;

/// Clock ticks per second (`getconf CLK_TCK`; 100 on every mainstream Linux).
pub fn clock_ticks_per_second() -> u64 {
    static TICKS: OnceLock<u64> = OnceLock::new();
    *TICKS.get_or_init(|| {
        Command::new("getconf")
            .arg("CLK_TCK")
            .output()
            .ok()
            .and_then(|o| String::from_utf8(o.stdout).ok())
            .and_then(|s| s.trim().parse::<u64>().ok())
            .filter(|&t| t > 0)
            .unwrap_or(100)
    })
}

/// utime + stime of one process, in ticks, parsed from the text of `/proc/PID/stat`.
pub fn ticks_from_stat(stat: &str) -> Option<u64> {
    // The command name (field 2) is in parentheses and may contain spaces: split after the last ')'.
    let rest = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // `rest` starts at field 3 (state); utime is field 14, stime field 15.
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    Some(utime + stime)
}

/// CPU seconds used so far by a process (`"self"` or a PID).
pub fn cpu_seconds(pid: &str) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    Some(ticks_from_stat(&stat)? as f64 / clock_ticks_per_second() as f64)
}

/// The summed CPU seconds of all `pids`, or `None` if any cannot be read.
pub fn cpu_seconds_of(pids: &[u32]) -> Option<f64> {
    let mut total = 0.0;
    for pid in pids {
        total += cpu_seconds(&pid.to_string())?;
    }
    Some(total)
}

/// The client process's own CPU seconds.
pub fn own_cpu_seconds() -> Option<f64> {
    cpu_seconds("self")
}

/// CPUs this process may use (affinity and cgroup quota aware).
pub fn available_cores() -> usize {
    std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_stat_with_spaces_in_the_name() {
        let stat = "1234 (tokio runtime) S 1 1234 1234 0 -1 4194560 100 0 0 0 250 75 0 0 20 0 8 0 100 0 0";
        assert_eq!(ticks_from_stat(stat), Some(325));
        assert_eq!(ticks_from_stat("garbage"), None);
    }

    #[test]
    fn reads_own_cpu() {
        let t = own_cpu_seconds().expect("/proc/self/stat");
        assert!(t >= 0.0);
        assert!(clock_ticks_per_second() > 0);
    }
}
