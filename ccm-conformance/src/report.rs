//! How clauses end: [`Outcome`], [`ClauseResult`] and the [`Report`] of a run.

use std::fmt;
use std::time::Duration;

use crate::clause::Clause;

/// How a clause ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// The provider follows the rule.
    Passed,
    /// The provider breaks the rule; `message` says what was called and what was observed.
    Failed {
        /// What was observed, and what the contract expects instead.
        message: String,
    },
    /// The clause was not checked, for `reason` (a capability the provider lacks without the fixture saying
    /// so, a fixture without the instance the clause needs, a `NotImplemented` answer the contract allows).
    /// Never counts as passed; fails under [`STRICT_ENV_VAR`](crate::STRICT_ENV_VAR).
    Skipped {
        /// Why the clause was not checked.
        reason: String,
    },
    /// The clause does not apply, as the provider author declared: its capability is absent on purpose
    /// ([`ConformanceFixture::without`](crate::ConformanceFixture::without)) or the fixture skips the clause
    /// with a reason ([`ConformanceFixture::skip`](crate::ConformanceFixture::skip)). Not a failure, also
    /// under [`STRICT_ENV_VAR`](crate::STRICT_ENV_VAR).
    NotApplicable {
        /// The declaration: which capability is absent on purpose, or the fixture's reason.
        reason: String,
    },
}

impl Outcome {
    /// A short upper-case label: `PASSED`, `FAILED`, `SKIPPED` or `N/A`.
    pub fn label(&self) -> &'static str {
        match self {
            Outcome::Passed => "PASSED",
            Outcome::Failed { .. } => "FAILED",
            Outcome::Skipped { .. } => "SKIPPED",
            Outcome::NotApplicable { .. } => "N/A",
        }
    }

    /// The message of a failure, the reason of a skip or of a declaration; `None` for a pass.
    pub fn detail(&self) -> Option<&str> {
        match self {
            Outcome::Passed => None,
            Outcome::Failed { message } => Some(message),
            Outcome::Skipped { reason } | Outcome::NotApplicable { reason } => Some(reason),
        }
    }
}

/// The outcome of one clause.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ClauseResult {
    /// The clause.
    pub clause: Clause,
    /// The provider's name (`CloudProvider::provider_name`), or `""` if no provider could be created.
    pub provider: String,
    /// How it ended.
    pub outcome: Outcome,
    /// How long it took (provider calls, retries and clean-up included).
    pub elapsed: Duration,
}

impl ClauseResult {
    /// A result.
    pub fn new(clause: Clause, outcome: Outcome, elapsed: Duration) -> Self {
        ClauseResult {
            clause,
            provider: String::new(),
            outcome,
            elapsed,
        }
    }

    /// The same result, for the provider named `provider`.
    pub fn with_provider(mut self, provider: impl Into<String>) -> Self {
        self.provider = provider.into();
        self
    }

    /// True if the clause passed.
    pub fn passed(&self) -> bool {
        self.outcome == Outcome::Passed
    }

    /// True if the clause failed.
    pub fn failed(&self) -> bool {
        matches!(self.outcome, Outcome::Failed { .. })
    }

    /// True if the clause was skipped without a declaration (see [`Outcome::Skipped`]).
    pub fn skipped(&self) -> bool {
        matches!(self.outcome, Outcome::Skipped { .. })
    }

    /// True if the clause does not apply, as declared (see [`Outcome::NotApplicable`]).
    pub fn not_applicable(&self) -> bool {
        matches!(self.outcome, Outcome::NotApplicable { .. })
    }
}

impl fmt::Display for ClauseResult {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.outcome.label(), self.clause.id())?;
        match self.outcome.detail() {
            None => Ok(()),
            Some(detail) => write!(f, ": {detail}"),
        }
    }
}

/// The outcomes of a run of the suite against one provider.
///
/// Its `Display` is a table, one line per clause, followed by a summary line.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Report {
    /// The provider's name (`CloudProvider::provider_name`), or `""` if no provider could be created.
    pub provider: String,
    /// One result per clause, in the order they ran.
    pub results: Vec<ClauseResult>,
}

impl Report {
    /// A report.
    pub fn new(provider: impl Into<String>, results: Vec<ClauseResult>) -> Self {
        Report {
            provider: provider.into(),
            results,
        }
    }

    /// The result of `clause`, if it ran.
    pub fn result(&self, clause: Clause) -> Option<&ClauseResult> {
        self.results.iter().find(|r| r.clause == clause)
    }

    /// The clauses that passed.
    pub fn passed(&self) -> Vec<Clause> {
        self.select(ClauseResult::passed)
    }

    /// The clauses that failed.
    pub fn failed(&self) -> Vec<Clause> {
        self.select(ClauseResult::failed)
    }

    /// The clauses that were skipped without a declaration.
    pub fn skipped(&self) -> Vec<Clause> {
        self.select(ClauseResult::skipped)
    }

    /// The clauses that do not apply, as declared.
    pub fn not_applicable(&self) -> Vec<Clause> {
        self.select(ClauseResult::not_applicable)
    }

    /// True if no clause failed (skipped clauses do not count as failures; see [`Report::is_complete`]).
    pub fn is_success(&self) -> bool {
        !self.results.iter().any(ClauseResult::failed)
    }

    /// True if every clause passed or was declared not to apply: none failed, none was skipped without a
    /// declaration. This is what [`STRICT_ENV_VAR`](crate::STRICT_ENV_VAR) requires of each generated test.
    pub fn is_complete(&self) -> bool {
        self.results
            .iter()
            .all(|r| r.passed() || r.not_applicable())
    }

    /// Panic with every failure (for a vendor's test) if a clause failed. The panic points at the caller.
    ///
    /// # Panics
    /// If a clause failed; the message lists each failed clause with what was observed.
    #[track_caller]
    pub fn assert_success(&self) {
        self.assert(ClauseResult::failed, "failed");
    }

    /// Panic with every failure and every undeclared skip if the report is not
    /// [complete](Report::is_complete): the strict check, for a provider that declares what it lacks.
    ///
    /// # Panics
    /// If a clause failed or was skipped without a declaration; the message lists each with why.
    #[track_caller]
    pub fn assert_complete(&self) {
        self.assert(|r| r.failed() || r.skipped(), "failed or skipped");
    }

    #[track_caller]
    fn assert(&self, bad: impl Fn(&ClauseResult) -> bool, what: &str) {
        let problems: Vec<String> = self
            .results
            .iter()
            .filter(|r| bad(r))
            .map(ToString::to_string)
            .collect();
        if !problems.is_empty() {
            panic!(
                "provider {:?} {what} {} conformance clause(s):\n{}",
                self.provider,
                problems.len(),
                problems.join("\n")
            );
        }
    }

    fn select(&self, keep: impl Fn(&ClauseResult) -> bool) -> Vec<Clause> {
        self.results
            .iter()
            .filter(|r| keep(r))
            .map(|r| r.clause)
            .collect()
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "conformance of provider {:?}", self.provider)?;
        let width = self
            .results
            .iter()
            .map(|r| r.clause.id().len())
            .max()
            .unwrap_or(0);
        for r in &self.results {
            let detail = r
                .outcome
                .detail()
                .map(|d| format!("  {d}"))
                .unwrap_or_default();
            writeln!(
                f,
                "  {:<7}  {:<width$}  {:>8}{detail}",
                r.outcome.label(),
                r.clause.id(),
                format_elapsed(r.elapsed),
            )?;
        }
        write!(
            f,
            "{} passed, {} failed, {} skipped, {} not applicable",
            self.passed().len(),
            self.failed().len(),
            self.skipped().len(),
            self.not_applicable().len()
        )
    }
}

/// A duration as `12ms`, `3.4s` or `2m05s`.
pub(crate) fn format_elapsed(d: Duration) -> String {
    let ms = d.as_millis();
    if ms < 1000 {
        format!("{ms}ms")
    } else if ms < 60_000 {
        format!("{:.1}s", d.as_secs_f64())
    } else {
        format!("{}m{:02}s", ms / 60_000, (ms % 60_000) / 1000)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn report_counts_and_table() {
        let report = Report::new(
            "acme",
            vec![
                ClauseResult::new(
                    Clause::ProviderNameIsValid,
                    Outcome::Passed,
                    Duration::from_millis(3),
                ),
                ClauseResult::new(
                    Clause::LoadBalancerEnsureReturnsStatus,
                    Outcome::Failed {
                        message: "empty status".into(),
                    },
                    Duration::from_millis(1500),
                ),
                ClauseResult::new(
                    Clause::RoutesScopedToCluster,
                    Outcome::Skipped {
                        reason: "no routes".into(),
                    },
                    Duration::from_secs(125),
                ),
            ],
        );
        assert_eq!(report.passed(), [Clause::ProviderNameIsValid]);
        assert_eq!(report.failed(), [Clause::LoadBalancerEnsureReturnsStatus]);
        assert_eq!(report.skipped(), [Clause::RoutesScopedToCluster]);
        assert!(!report.is_success());
        assert!(!report.is_complete());
        let table = report.to_string();
        assert!(table.contains("PASSED   provider/name-is-valid"), "{table}");
        assert!(
            table.contains("FAILED   load-balancer/ensure-returns-status"),
            "{table}"
        );
        assert!(table.contains("1.5s  empty status"), "{table}");
        assert!(table.contains("2m05s  no routes"), "{table}");
        assert!(
            table.ends_with("1 passed, 1 failed, 1 skipped, 0 not applicable"),
            "{table}"
        );
        let failed = report
            .result(Clause::LoadBalancerEnsureReturnsStatus)
            .expect("ran");
        assert_eq!(
            failed.to_string(),
            "FAILED load-balancer/ensure-returns-status: empty status"
        );
    }

    #[test]
    #[should_panic(expected = "failed 1 conformance clause(s)")]
    fn assert_success_panics_with_the_failures() {
        Report::new(
            "acme",
            vec![ClauseResult::new(
                Clause::RoutesDeleteMissingSucceeds,
                Outcome::Failed {
                    message: "boom".into(),
                },
                Duration::ZERO,
            )],
        )
        .assert_success();
    }

    #[test]
    fn skipped_clauses_are_success_but_not_complete() {
        let report = Report::new(
            "acme",
            vec![ClauseResult::new(
                Clause::RoutesDeleteMissingSucceeds,
                Outcome::Skipped {
                    reason: "no routes".into(),
                },
                Duration::ZERO,
            )],
        );
        assert!(report.is_success());
        assert!(!report.is_complete());
        report.assert_success();
    }

    #[test]
    fn declared_absences_are_complete() {
        let report = Report::new(
            "acme",
            vec![
                ClauseResult::new(Clause::ProviderNameIsValid, Outcome::Passed, Duration::ZERO),
                ClauseResult::new(
                    Clause::RoutesDeleteMissingSucceeds,
                    Outcome::NotApplicable {
                        reason: "routes declared absent".into(),
                    },
                    Duration::ZERO,
                ),
            ],
        );
        assert!(report.is_complete());
        assert_eq!(
            report.not_applicable(),
            [Clause::RoutesDeleteMissingSucceeds]
        );
        report.assert_complete();
        let table = report.to_string();
        assert!(
            table.contains("N/A      routes/delete-missing-succeeds"),
            "{table}"
        );
        assert!(table.ends_with("1 passed, 0 failed, 0 skipped, 1 not applicable"));
    }

    #[test]
    #[should_panic(
        expected = "failed or skipped 1 conformance clause(s):\nSKIPPED routes/scoped-to-cluster: no"
    )]
    fn assert_complete_panics_with_undeclared_skips() {
        Report::new(
            "acme",
            vec![ClauseResult::new(
                Clause::RoutesScopedToCluster,
                Outcome::Skipped {
                    reason: "no".into(),
                },
                Duration::ZERO,
            )],
        )
        .assert_complete();
    }
}
