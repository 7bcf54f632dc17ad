//! Figures of processes and of the machine from `/proc`: peak memory, CPU time, the load average.

#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct ProcStats {
    /// Peak resident set size (`VmHWM`), in KiB.
    pub peak_rss_kib: Option<u64>,
    /// User + system CPU time, in seconds.
    pub cpu_seconds: Option<f64>,
}

impl ProcStats {
    /// Reads the figures of process `pid`; unreadable parts are `None`.
    pub fn read(pid: u32) -> Self {
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok();
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok();
        ProcStats {
            peak_rss_kib: status.as_deref().and_then(|s| status_kib(s, "VmHWM")),
            cpu_seconds: stat
                .as_deref()
                .and_then(cpu_ticks)
                .map(|ticks| ticks as f64 / clock_ticks_per_second()),
        }
    }
}

/// A `kB` field of `/proc/<pid>/status`, e.g. `VmHWM:    93424 kB`.
pub fn status_kib(status: &str, field: &str) -> Option<u64> {
    status.lines().find_map(|line| {
        let rest = line.strip_prefix(field)?.strip_prefix(':')?;
        let mut parts = rest.split_whitespace();
        let value = parts.next()?.parse().ok()?;
        (parts.next() == Some("kB")).then_some(value)
    })
}

/// `utime + stime` (clock ticks) from `/proc/<pid>/stat`. The command name (field 2) may contain
/// spaces and parentheses, so fields are counted after its last `)`.
pub fn cpu_ticks(stat: &str) -> Option<u64> {
    let after_comm = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<&str> = after_comm.split_whitespace().collect();
    // After the name come field 3 (state) ... field 14 (utime) and field 15 (stime).
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    Some(utime + stime)
}

/// `getconf CLK_TCK`, 100 (Linux's value on every common architecture) if it cannot be read.
fn clock_ticks_per_second() -> f64 {
    static TICKS: std::sync::OnceLock<f64> = std::sync::OnceLock::new();
    *TICKS.get_or_init(|| {
        std::process::Command::new("getconf")
            .arg("CLK_TCK")
            .output()
            .ok()
            .and_then(|out| String::from_utf8(out.stdout).ok())
            .and_then(|text| text.trim().parse::<f64>().ok())
            .filter(|ticks| *ticks > 0.0)
            .unwrap_or(100.0)
    })
}

pub fn load_average() -> Option<f64> {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|text| parse_load_average(&text))
}

/// The first field of `/proc/loadavg`.
pub fn parse_load_average(text: &str) -> Option<f64> {
    text.split_whitespace().next()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proc_status_fields() {
        let status = "Name:\tccm\nVmPeak:\t  900 kB\nVmHWM:\t   93424 kB\nVmRSS:\t   80000 kB\n";
        assert_eq!(status_kib(status, "VmHWM"), Some(93_424));
        assert_eq!(status_kib(status, "VmRSS"), Some(80_000));
        assert_eq!(status_kib(status, "VmSwap"), None);
        assert_eq!(status_kib("VmHWM: 12 MB\n", "VmHWM"), None);
        assert_eq!(
            status_kib("MemTotal:       24584020 kB\n", "MemTotal"),
            Some(24_584_020)
        );
    }

    #[test]
    fn proc_stat_cpu_time_survives_odd_command_names() {
        let stat = "4242 (my (odd) ccm) S 1 4242 4242 0 -1 4194560 1000 0 0 0 250 50 0 0 20 0 8 0";
        assert_eq!(cpu_ticks(stat), Some(300));
        assert_eq!(cpu_ticks("4242 (ccm) S 1 2"), None);
        assert_eq!(cpu_ticks("garbage"), None);
    }

    #[test]
    fn own_process_stats_are_readable() {
        let stats = ProcStats::read(std::process::id());
        assert!(stats.peak_rss_kib.is_some_and(|kib| kib > 0));
        assert!(stats.cpu_seconds.is_some_and(|s| s >= 0.0));
    }

    #[test]
    fn load_average_is_the_first_field() {
        assert_eq!(
            parse_load_average("5.11 3.67 3.65 2/300 1234\n"),
            Some(5.11)
        );
        assert_eq!(parse_load_average(""), None);
    }
}
