//! The pure part of `cargo xtask e2e --scale`: what one steady window measured, the counts taken
//! from the audit log, the figures per address-sync period, the goals and the side-by-side table.

use std::collections::BTreeMap;
use std::time::Duration;

use ccm_testenv::audit::AuditEvent;

use crate::bench::support::Table;

/// What one CCM's steady window measured.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Window {
    /// Nodes in the cluster.
    pub nodes: usize,
    /// Seconds from the CCM's start until every node was initialized.
    pub init_seconds: f64,
    /// Whether the CCM's writes had stopped before the window began (false: the window began at the
    /// settle limit while it was still writing).
    pub settled: bool,
    /// The window's length.
    pub length: Duration,
    /// The CCM's user + system CPU time during the window.
    pub cpu_seconds: Option<f64>,
    /// The CCM's peak resident set size over its whole life (`VmHWM`), in KiB.
    pub peak_rss_kib: Option<u64>,
    /// The CCM's API writes during the window, by `VERB resource[/subresource]`.
    pub ccm_writes: BTreeMap<String, u64>,
    /// The simulated kubelets' (kwok's) API writes during the window: the heartbeats.
    pub heartbeat_writes: u64,
    /// The CCM's cloud calls during the window by operation; `None` when its `/metrics` has no
    /// `cloudprovider_api_requests_total`.
    pub cloud_calls: Option<BTreeMap<String, f64>>,
}

impl Window {
    /// All API writes of the CCM in the window.
    pub fn writes(&self) -> u64 {
        self.ccm_writes.values().sum()
    }

    /// All cloud calls in the window.
    pub fn calls(&self) -> Option<f64> {
        self.cloud_calls.as_ref().map(|calls| calls.values().sum())
    }
}

/// The verbs the audit policy logs that change something.
const WRITE_VERBS: &[&str] = &["create", "update", "patch", "delete", "deletecollection"];

/// Adds the writes of `user` that completed within `[from, to]` (microseconds since the epoch) to
/// `counts`, keyed `VERB resource[/subresource]` (e.g. `PATCH nodes/status`).
pub fn count_writes(
    events: &[AuditEvent],
    user: &str,
    from_micros: i64,
    to_micros: i64,
    counts: &mut BTreeMap<String, u64>,
) {
    for event in events {
        let completed = event.completed_micros();
        if event.user.username != user
            || !WRITE_VERBS.contains(&event.verb.as_str())
            || completed < from_micros
            || completed > to_micros
        {
            continue;
        }
        let resource = event.object_ref.as_ref().map_or_else(
            || "?".to_owned(),
            |r| {
                if r.subresource.is_empty() {
                    r.resource.clone()
                } else {
                    format!("{}/{}", r.resource, r.subresource)
                }
            },
        );
        *counts
            .entry(format!("{} {resource}", event.verb.to_uppercase()))
            .or_default() += 1;
    }
}

/// The latest completion time (microseconds since the epoch) of a write by `user`, if any.
pub fn last_write_micros(events: &[AuditEvent], user: &str) -> Option<i64> {
    events
        .iter()
        .filter(|e| e.user.username == user && WRITE_VERBS.contains(&e.verb.as_str()))
        .map(AuditEvent::completed_micros)
        .max()
}

/// The difference of two per-operation counters (`after - before`), dropping operations that did
/// not move.
pub fn counter_delta(
    before: &BTreeMap<String, f64>,
    after: &BTreeMap<String, f64>,
) -> BTreeMap<String, f64> {
    after
        .iter()
        .map(|(op, value)| (op.clone(), value - before.get(op).copied().unwrap_or(0.0)))
        .filter(|(_, delta)| *delta != 0.0)
        .collect()
}

/// `count` scaled from a window of `length` to one address-sync `period`; `None` for an empty window.
pub fn per_period(count: f64, length: Duration, period: Duration) -> Option<f64> {
    let window = length.as_secs_f64();
    (window > 0.0).then(|| count * period.as_secs_f64() / window)
}

/// Whether a window of `length` holds a whole number of periods (and so exactly that many periodic
/// syncs, wherever they fall).
pub fn whole_periods(length: Duration, period: Duration) -> bool {
    !period.is_zero() && length >= period && length.as_nanos().is_multiple_of(period.as_nanos())
}

/// A goal of the steady state (issue 15; issue 24 lowered the CPU goal from half of Go's to a third).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Goal {
    /// Rust's figure must be 0 (whatever Go's).
    Zero,
    /// Rust's figure must be at most `factor` times Go's.
    AtMostOfGo(f64),
    /// Rust's figure must be at most one `n`-th of Go's (`n` > 0), shown as `≤ 1/n × Go`.
    AtMostPartOfGo(u32),
}

/// Whether a goal was met.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Met.
    Met,
    /// Missed.
    Missed,
    /// A figure it needs was not measured.
    Unknown,
}

impl Verdict {
    /// How the table shows it.
    pub fn label(self) -> &'static str {
        match self {
            Verdict::Met => "yes",
            Verdict::Missed => "NO",
            Verdict::Unknown => "not measured",
        }
    }
}

impl Goal {
    /// Checks `rust` against the goal (and `go` where the goal is relative to it).
    pub fn check(self, rust: Option<f64>, go: Option<f64>) -> Verdict {
        let verdict = |met: bool| if met { Verdict::Met } else { Verdict::Missed };
        match (self, rust, go) {
            (Goal::Zero, Some(rust), _) => verdict(rust == 0.0),
            (Goal::AtMostOfGo(factor), Some(rust), Some(go)) => verdict(rust <= factor * go),
            (Goal::AtMostPartOfGo(n), Some(rust), Some(go)) => verdict(rust * f64::from(n) <= go),
            _ => Verdict::Unknown,
        }
    }

    /// How the table states it.
    pub fn label(self) -> String {
        match self {
            Goal::Zero => "0".to_owned(),
            Goal::AtMostOfGo(1.0) => "≤ Go".to_owned(),
            Goal::AtMostOfGo(factor) => format!("≤ {factor} × Go"),
            Goal::AtMostPartOfGo(n) => format!("≤ 1/{n} × Go"),
        }
    }
}

/// `rust / go` with two decimals; `n/a` when either is missing or Go's is 0.
pub fn ratio(rust: Option<f64>, go: Option<f64>) -> String {
    match (rust, go) {
        (Some(rust), Some(go)) if go != 0.0 => format!("{:.2}", rust / go),
        _ => "n/a".to_owned(),
    }
}

fn number(value: Option<f64>, decimals: usize) -> String {
    value.map_or_else(|| "n/a".to_owned(), |v| format!("{v:.decimals$}"))
}

/// The side-by-side table: one row per figure, with Rust, Go, their ratio, the goal and whether
/// it was met. `period` is the address-sync period (`--node-status-update-frequency`).
pub fn table(rust: Option<&Window>, go: Option<&Window>, period: Duration) -> Table {
    let mut table = Table::new(&["figure", "Rust", "Go", "Rust/Go", "goal", "met?"]);
    let per = |w: Option<&Window>, count: fn(&Window) -> Option<f64>| {
        w.and_then(|w| count(w).and_then(|c| per_period(c, w.length, period)))
    };
    type Figure = (
        &'static str,
        fn(&Window) -> Option<f64>,
        usize,
        bool,
        Option<Goal>,
    );
    let figures: [Figure; 9] = [
        (
            "nodes initialized after (s)",
            |w| Some(w.init_seconds),
            1,
            false,
            None,
        ),
        ("CPU in the window (s)", |w| w.cpu_seconds, 2, false, None),
        (
            "CPU per address-sync period (s)",
            |w| w.cpu_seconds,
            2,
            true,
            Some(Goal::AtMostPartOfGo(3)),
        ),
        (
            "peak RSS (MiB)",
            |w| w.peak_rss_kib.map(|k| k as f64 / 1024.0),
            0,
            false,
            None,
        ),
        (
            "API writes in the window",
            |w| Some(w.writes() as f64),
            0,
            false,
            None,
        ),
        (
            "API writes per address-sync period",
            |w| Some(w.writes() as f64),
            1,
            true,
            Some(Goal::Zero),
        ),
        ("cloud calls in the window", Window::calls, 0, false, None),
        (
            "cloud calls per address-sync period",
            Window::calls,
            1,
            true,
            Some(Goal::AtMostOfGo(1.0)),
        ),
        (
            "heartbeat writes (kwok) in the window",
            |w| Some(w.heartbeat_writes as f64),
            0,
            false,
            None,
        ),
    ];
    for (name, count, decimals, scaled, goal) in figures {
        let (r, g) = if scaled {
            (per(rust, count), per(go, count))
        } else {
            (rust.and_then(count), go.and_then(count))
        };
        let (goal_label, verdict) = match goal {
            Some(goal) if rust.is_some() => (goal.label(), goal.check(r, g).label().to_owned()),
            Some(goal) => (goal.label(), Verdict::Unknown.label().to_owned()),
            None => (String::new(), String::new()),
        };
        table.push(vec![
            name.to_owned(),
            number(r, decimals),
            number(g, decimals),
            ratio(r, g),
            goal_label,
            verdict,
        ]);
    }
    table
}

/// One line per CCM with its writes by kind and its cloud calls by operation.
pub fn details(label: &str, window: &Window) -> String {
    let writes = if window.ccm_writes.is_empty() {
        "none".to_owned()
    } else {
        window
            .ccm_writes
            .iter()
            .map(|(kind, n)| format!("{kind} {n}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let calls = match &window.cloud_calls {
        None => "not counted (no cloudprovider_api_requests_total)".to_owned(),
        Some(calls) if calls.is_empty() => "none".to_owned(),
        Some(calls) => calls
            .iter()
            .map(|(op, n)| format!("{op} {n:.0}"))
            .collect::<Vec<_>>()
            .join(", "),
    };
    let settled = if window.settled {
        ""
    } else {
        " (the window began while the CCM was still writing)"
    };
    format!("- {label}: API writes: {writes}; cloud calls: {calls}{settled}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(user: &str, verb: &str, resource: &str, subresource: &str, micros: i64) -> AuditEvent {
        let seconds = micros / 1_000_000;
        let fraction = micros % 1_000_000;
        let time = format!("1970-01-01T00:00:{seconds:02}.{fraction:06}Z");
        serde_json::from_value(serde_json::json!({
            "auditID": "x",
            "stage": "ResponseComplete",
            "verb": verb,
            "user": {"username": user},
            "objectRef": {"resource": resource, "subresource": subresource, "name": "n"},
            "responseStatus": {"code": 200},
            "requestReceivedTimestamp": time,
            "stageTimestamp": time,
        }))
        .expect("an audit event")
    }

    #[test]
    fn writes_are_counted_by_user_verb_resource_and_time() {
        let events = [
            event("ccm", "patch", "nodes", "status", 2_000_000),
            event("ccm", "patch", "nodes", "status", 3_000_000),
            event("ccm", "create", "events", "", 4_000_000),
            event("ccm", "get", "nodes", "", 4_000_000),
            event("kwok", "update", "leases", "", 4_000_000),
            event("ccm", "patch", "nodes", "", 1_000_000),
            event("ccm", "patch", "nodes", "", 9_000_000),
        ];
        let mut counts = BTreeMap::new();
        count_writes(&events, "ccm", 2_000_000, 5_000_000, &mut counts);
        assert_eq!(
            counts,
            BTreeMap::from([
                ("CREATE events".to_owned(), 1),
                ("PATCH nodes/status".to_owned(), 2)
            ])
        );
        count_writes(&events, "kwok", 0, 10_000_000, &mut counts);
        assert_eq!(counts["UPDATE leases"], 1);
        assert_eq!(last_write_micros(&events, "ccm"), Some(9_000_000));
        assert_eq!(last_write_micros(&events, "kwok"), Some(4_000_000));
        assert_eq!(last_write_micros(&events, "nobody"), None);
    }

    #[test]
    fn counter_deltas_drop_what_did_not_move() {
        let before = BTreeMap::from([("a".to_owned(), 5.0), ("b".to_owned(), 2.0)]);
        let after = BTreeMap::from([
            ("a".to_owned(), 8.0),
            ("b".to_owned(), 2.0),
            ("c".to_owned(), 1.0),
        ]);
        assert_eq!(
            counter_delta(&before, &after),
            BTreeMap::from([("a".to_owned(), 3.0), ("c".to_owned(), 1.0)])
        );
    }

    #[test]
    fn figures_scale_to_one_address_sync_period() {
        let five_minutes = Duration::from_secs(300);
        assert_eq!(
            per_period(3000.0, Duration::from_secs(600), five_minutes),
            Some(1500.0)
        );
        assert_eq!(
            per_period(60.0, Duration::from_secs(180), Duration::from_secs(60)),
            Some(20.0)
        );
        assert_eq!(per_period(1.0, Duration::ZERO, five_minutes), None);
    }

    #[test]
    fn windows_of_whole_periods() {
        let minute = Duration::from_secs(60);
        assert!(whole_periods(
            Duration::from_secs(600),
            Duration::from_secs(300)
        ));
        assert!(whole_periods(Duration::from_secs(180), minute));
        assert!(!whole_periods(
            Duration::from_secs(40),
            Duration::from_secs(15)
        ));
        assert!(!whole_periods(Duration::from_secs(30), minute));
        assert!(!whole_periods(minute, Duration::ZERO));
    }

    #[test]
    fn goals() {
        assert_eq!(Goal::Zero.check(Some(0.0), None), Verdict::Met);
        assert_eq!(Goal::Zero.check(Some(1.0), Some(5.0)), Verdict::Missed);
        assert_eq!(Goal::Zero.check(None, Some(0.0)), Verdict::Unknown);
        let half = Goal::AtMostOfGo(0.5);
        assert_eq!(half.check(Some(5.0), Some(10.0)), Verdict::Met);
        assert_eq!(half.check(Some(5.1), Some(10.0)), Verdict::Missed);
        assert_eq!(half.check(Some(1.0), None), Verdict::Unknown);
        let same = Goal::AtMostOfGo(1.0);
        assert_eq!(same.check(Some(1000.0), Some(1000.0)), Verdict::Met);
        assert_eq!(same.check(Some(0.0), Some(0.0)), Verdict::Met);
        assert_eq!(same.label(), "≤ Go");
        assert_eq!(half.label(), "≤ 0.5 × Go");
        let third = Goal::AtMostPartOfGo(3);
        assert_eq!(third.check(Some(1.0), Some(3.0)), Verdict::Met);
        assert_eq!(third.check(Some(1.01), Some(3.0)), Verdict::Missed);
        assert_eq!(third.check(None, Some(3.0)), Verdict::Unknown);
        assert_eq!(third.label(), "≤ 1/3 × Go");
        assert_eq!(Goal::Zero.label(), "0");
        assert_eq!(ratio(Some(1.0), Some(4.0)), "0.25");
        assert_eq!(ratio(Some(1.0), Some(0.0)), "n/a");
        assert_eq!(ratio(None, Some(1.0)), "n/a");
    }

    fn window(cpu: f64, writes: u64, calls: Option<f64>) -> Window {
        Window {
            nodes: 1000,
            init_seconds: 42.0,
            settled: true,
            length: Duration::from_secs(600),
            cpu_seconds: Some(cpu),
            peak_rss_kib: Some(40 * 1024),
            ccm_writes: if writes == 0 {
                BTreeMap::new()
            } else {
                BTreeMap::from([("PATCH nodes/status".to_owned(), writes)])
            },
            heartbeat_writes: 60_000,
            cloud_calls: calls.map(|c| BTreeMap::from([("instance-metadata-bulk".to_owned(), c)])),
        }
    }

    #[test]
    fn the_table_puts_both_side_by_side_with_the_goals() {
        let rust = window(3.0, 0, Some(4.0));
        let go = window(12.0, 0, Some(2000.0));
        let text = table(Some(&rust), Some(&go), Duration::from_secs(300)).render();
        let row = |name: &str| {
            text.lines()
                .find(|l| l.starts_with(&format!("| {name} ")))
                .unwrap_or_else(|| panic!("no row {name} in\n{text}"))
                .split('|')
                .map(str::trim)
                .filter(|c| !c.is_empty())
                .map(str::to_owned)
                .collect::<Vec<_>>()
        };
        assert_eq!(
            row("CPU per address-sync period (s)"),
            [
                "CPU per address-sync period (s)",
                "1.50",
                "6.00",
                "0.25",
                "≤ 1/3 × Go",
                "yes"
            ]
        );
        assert_eq!(
            row("API writes per address-sync period"),
            [
                "API writes per address-sync period",
                "0.0",
                "0.0",
                "n/a",
                "0",
                "yes"
            ]
        );
        assert_eq!(
            row("cloud calls per address-sync period"),
            [
                "cloud calls per address-sync period",
                "2.0",
                "1000.0",
                "0.00",
                "≤ Go",
                "yes"
            ]
        );
        assert_eq!(row("peak RSS (MiB)")[1], "40");

        let busy = window(10.0, 7, None);
        let text = table(Some(&busy), Some(&go), Duration::from_secs(300)).render();
        assert!(text.contains("| NO "), "{text}");
        assert!(text.contains("not measured"), "{text}");

        let text = table(None, Some(&go), Duration::from_secs(300)).render();
        assert!(text.contains("| n/a "), "{text}");
    }

    #[test]
    fn details_name_every_write_and_call() {
        let line = details("Rust", &window(1.0, 3, Some(2.0)));
        assert_eq!(
            line,
            "- Rust: API writes: PATCH nodes/status 3; cloud calls: instance-metadata-bulk 2"
        );
        let mut w = window(1.0, 0, None);
        w.settled = false;
        let line = details("Go", &w);
        assert!(line.contains("API writes: none"), "{line}");
        assert!(line.contains("not counted"), "{line}");
        assert!(line.contains("still writing"), "{line}");
    }
}
