//! What a scenario run found, and the summary table over runs.

use std::time::Duration;

use crate::bench::support::Table;

/// The result of one run of a scenario.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Outcome {
    /// Faults injected.
    pub faults: usize,
    /// Violations of the election found in the audit log (see `proof.rs`), described.
    pub overlaps: Vec<String>,
    /// Replicas that did not exit within the grace period after SIGTERM.
    pub leaks: usize,
    /// From the end of the last fault until every Node was initialized and the Service had its
    /// load balancer.
    pub converge: Duration,
    /// For each fault that hit the leader: how long until another replica held the Lease.
    pub failovers: Vec<Duration>,
    /// Leader faults after which no other replica took over (e.g. the leader came back first).
    pub no_failover: usize,
    /// Observations worth printing (not failures).
    pub notes: Vec<String>,
}

impl Outcome {
    /// Whether the run proved what it should: no overlap and no leak.
    pub fn passed(&self) -> bool {
        self.overlaps.is_empty() && self.leaks == 0
    }
}

/// The runs of one scenario.
#[derive(Debug)]
pub struct ScenarioRuns {
    /// The scenario's name.
    pub name: &'static str,
    /// Each run's outcome, or why it could not finish.
    pub runs: Vec<Result<Outcome, String>>,
    /// The bound its failovers are compared with (it depends on the scenario's lease settings).
    pub failover_bound: Duration,
}

fn max_secs(values: impl Iterator<Item = Duration>) -> String {
    values
        .max()
        .map_or_else(|| "-".to_owned(), |d| format!("{:.1} s", d.as_secs_f64()))
}

/// The summary table: one row per scenario.
pub fn table(scenarios: &[ScenarioRuns]) -> Table {
    let mut table = Table::new(&[
        "scenario",
        "runs",
        "faults",
        "overlaps found",
        "leaks",
        "time to converge (max)",
        "failovers (max)",
        "bound",
        "failovers over bound",
        "result",
    ]);
    for scenario in scenarios {
        let outcomes: Vec<&Outcome> = scenario
            .runs
            .iter()
            .filter_map(|r| r.as_ref().ok())
            .collect();
        let errors = scenario.runs.len() - outcomes.len();
        let failovers: Vec<Duration> = outcomes
            .iter()
            .flat_map(|o| o.failovers.iter().copied())
            .collect();
        let over = failovers
            .iter()
            .filter(|d| **d > scenario.failover_bound)
            .count();
        let failed = outcomes.iter().filter(|o| !o.passed()).count();
        let result = match (failed, errors) {
            (0, 0) => "pass".to_owned(),
            (f, 0) => format!("FAIL ({f} runs)"),
            (0, e) => format!("ERROR ({e} runs)"),
            (f, e) => format!("FAIL ({f} runs), ERROR ({e} runs)"),
        };
        table.push(vec![
            scenario.name.to_owned(),
            scenario.runs.len().to_string(),
            outcomes.iter().map(|o| o.faults).sum::<usize>().to_string(),
            outcomes
                .iter()
                .map(|o| o.overlaps.len())
                .sum::<usize>()
                .to_string(),
            outcomes.iter().map(|o| o.leaks).sum::<usize>().to_string(),
            max_secs(outcomes.iter().map(|o| o.converge)),
            if failovers.is_empty() {
                "-".to_owned()
            } else {
                format!(
                    "{} ({} measured)",
                    max_secs(failovers.iter().copied()),
                    failovers.len()
                )
            },
            format!("{:.0} s", scenario.failover_bound.as_secs_f64()),
            over.to_string(),
            result,
        ]);
    }
    table
}

/// Whether every run of every scenario finished and passed.
pub fn all_passed(scenarios: &[ScenarioRuns]) -> bool {
    scenarios
        .iter()
        .all(|s| s.runs.iter().all(|r| r.as_ref().is_ok_and(Outcome::passed)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn outcome(overlaps: usize, leaks: usize, failovers: &[u64]) -> Outcome {
        Outcome {
            faults: 3,
            overlaps: (0..overlaps).map(|i| format!("overlap {i}")).collect(),
            leaks,
            converge: Duration::from_millis(1500),
            failovers: failovers.iter().map(|s| Duration::from_secs(*s)).collect(),
            ..Outcome::default()
        }
    }

    #[test]
    fn an_overlap_or_a_leak_fails_a_run() {
        assert!(outcome(0, 0, &[]).passed());
        assert!(!outcome(1, 0, &[]).passed());
        assert!(!outcome(0, 1, &[]).passed());
    }

    #[test]
    fn the_table_sums_runs_and_flags_failures() {
        let scenarios = [
            ScenarioRuns {
                name: "leader-freeze",
                runs: vec![Ok(outcome(0, 0, &[5])), Ok(outcome(0, 0, &[4]))],
                failover_bound: Duration::from_secs(5),
            },
            ScenarioRuns {
                name: "random-faults",
                runs: vec![Ok(outcome(2, 1, &[3, 7])), Err("no leader".to_owned())],
                failover_bound: Duration::from_secs(5),
            },
            ScenarioRuns {
                name: "failover",
                runs: vec![Ok(outcome(0, 0, &[15, 16, 17]))],
                failover_bound: Duration::from_secs(16),
            },
        ];
        let text = table(&scenarios).render();
        let rows: Vec<&str> = text.lines().collect();
        assert!(rows[0].contains("overlaps found"), "{text}");
        let freeze = rows
            .iter()
            .find(|r| r.contains("leader-freeze"))
            .expect("row");
        assert!(freeze.contains("| pass"), "{freeze}");
        assert!(freeze.contains("5.0 s (2 measured)"), "{freeze}");
        let random = rows
            .iter()
            .find(|r| r.contains("random-faults"))
            .expect("row");
        assert!(random.contains("FAIL (1 runs), ERROR (1 runs)"), "{random}");
        assert!(random.contains("7.0 s (2 measured)"), "{random}");
        // (bound, failovers over it): the first cell of a row is empty (the line starts with '|').
        let bound_and_over = |row: &str| {
            let cells: Vec<String> = row.split('|').map(|c| c.trim().to_owned()).collect();
            (cells[8].clone(), cells[9].clone())
        };
        assert_eq!(bound_and_over(random), ("5 s".to_owned(), "1".to_owned()));
        let failover = rows
            .iter()
            .find(|r| r.starts_with("| failover "))
            .expect("row");
        assert_eq!(
            bound_and_over(failover),
            ("16 s".to_owned(), "1".to_owned())
        );
        assert!(!all_passed(&scenarios));
        assert!(all_passed(&scenarios[..1]));
    }
}
