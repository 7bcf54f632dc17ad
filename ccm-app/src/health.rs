//! Health checks and their Kubernetes-style reports (`/healthz`, `/livez`, `/readyz`): each check has a name and
//! belongs to one or more endpoints, and a report lists every check of the endpoint in the order they were added,
//! as the Kubernetes components do: `ok` when everything passes, otherwise (or with `?verbose`) one line per check
//! — `[+]name ok` or `[-]name failed: reason withheld` — followed by `healthz check passed` / `healthz check
//! failed`. Reasons are logged, not served. `?exclude=name` skips a check; `/healthz/<name>` runs one.

use std::sync::{Arc, RwLock};

pub use ccm_core::runtime::controller::HealthCheck;

/// The endpoint a check contributes to; its name ([`Endpoint::name`]) is its path, lower-case.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, strum::IntoStaticStr)]
#[strum(serialize_all = "lowercase")]
#[non_exhaustive]
pub enum Endpoint {
    /// `/healthz`: everything (the Go CCM's only endpoint).
    Healthz,
    /// `/livez`: checks whose failure means the process should be restarted.
    Livez,
    /// `/readyz`: checks whose failure means the replica should not be considered active.
    Readyz,
}

impl Endpoint {
    /// Every endpoint.
    pub const ALL: &'static [Endpoint] = &[Endpoint::Healthz, Endpoint::Livez, Endpoint::Readyz];

    /// The endpoint's name, as in its path.
    pub fn name(self) -> &'static str {
        self.into()
    }
}

struct Entry {
    name: String,
    endpoints: Vec<Endpoint>,
    check: HealthCheck,
}

/// A shared, growing set of named checks. Cheap to clone; clones share the set.
#[derive(Clone, Default)]
pub struct HealthChecks {
    entries: Arc<RwLock<Vec<Entry>>>,
}

impl std::fmt::Debug for HealthChecks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HealthChecks")
            .field("names", &self.names(Endpoint::Healthz))
            .finish()
    }
}

/// The outcome of running the checks of one endpoint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HealthReport {
    endpoint: Endpoint,
    /// `(name, Ok(()) or the failure reason)`, in order.
    pub results: Vec<(String, Result<(), String>)>,
    /// Names given in `exclude` that matched no check.
    pub unknown_excludes: Vec<String>,
}

impl HealthReport {
    /// Whether every check passed.
    pub fn healthy(&self) -> bool {
        self.results.iter().all(|(_, r)| r.is_ok())
    }

    /// The response body: `ok` when healthy and not verbose, otherwise the per-check listing.
    pub fn render(&self, verbose: bool) -> String {
        let healthy = self.healthy();
        if healthy && !verbose {
            return "ok".to_owned();
        }
        let mut out = String::new();
        for (name, result) in &self.results {
            match result {
                Ok(()) => out.push_str(&format!("[+]{name} ok\n")),
                Err(_) => out.push_str(&format!("[-]{name} failed: reason withheld\n")),
            }
        }
        for name in &self.unknown_excludes {
            out.push_str(&format!(
                "warn: some health checks cannot be excluded: no matches for \"{name}\"\n"
            ));
        }
        out.push_str(&format!(
            "{} check {}\n",
            self.endpoint.name(),
            if healthy { "passed" } else { "failed" }
        ));
        out
    }
}

impl HealthChecks {
    /// Add (or replace) the check `name` on `endpoints`.
    pub fn add(&self, name: &str, endpoints: &[Endpoint], check: HealthCheck) {
        let mut entries = self.entries.write().unwrap_or_else(|e| e.into_inner());
        let entry = Entry {
            name: name.to_owned(),
            endpoints: endpoints.to_vec(),
            check,
        };
        match entries.iter_mut().find(|e| e.name == name) {
            Some(existing) => *existing = entry,
            None => entries.push(entry),
        }
    }

    /// The names of the checks of `endpoint`, in order.
    pub fn names(&self, endpoint: Endpoint) -> Vec<String> {
        self.checks(endpoint)
            .into_iter()
            .map(|(name, _)| name)
            .collect()
    }

    fn checks(&self, endpoint: Endpoint) -> Vec<(String, HealthCheck)> {
        self.entries
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .filter(|e| e.endpoints.contains(&endpoint))
            .map(|e| (e.name.clone(), e.check.clone()))
            .collect()
    }

    /// Run the checks of `endpoint`, skipping those named in `exclude`.
    pub fn report(&self, endpoint: Endpoint, exclude: &[String]) -> HealthReport {
        let checks = self.checks(endpoint);
        let unknown_excludes = exclude
            .iter()
            .filter(|x| !checks.iter().any(|(name, _)| name == *x))
            .cloned()
            .collect();
        let results = checks
            .into_iter()
            .filter(|(name, _)| !exclude.contains(name))
            .map(|(name, check)| {
                let result = check();
                if let Err(reason) = &result {
                    tracing::warn!(endpoint = endpoint.name(), check = %name, %reason, "health check failed");
                }
                (name, result)
            })
            .collect();
        HealthReport {
            endpoint,
            results,
            unknown_excludes,
        }
    }

    /// Run the single check `name` of `endpoint`; `None` if there is no such check.
    pub fn check_one(&self, endpoint: Endpoint, name: &str) -> Option<Result<(), String>> {
        let (_, check) = self.checks(endpoint).into_iter().find(|(n, _)| n == name)?;
        Some(check())
    }
}

/// Parse `verbose` and `exclude=<name>` (repeatable) from a query string.
pub fn parse_query(query: Option<&str>) -> (bool, Vec<String>) {
    let mut verbose = false;
    let mut exclude = Vec::new();
    for (key, value) in form_urlencoded::parse(query.unwrap_or_default().as_bytes()) {
        match &*key {
            "verbose" => verbose = value != "false" && value != "0",
            "exclude" if !value.is_empty() => exclude.push(value.into_owned()),
            _ => {}
        }
    }
    (verbose, exclude)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, Ordering};

    fn ok() -> HealthCheck {
        Arc::new(|| Ok(()))
    }

    fn flag(f: &Arc<AtomicBool>) -> HealthCheck {
        let f = f.clone();
        Arc::new(move || {
            if f.load(Ordering::SeqCst) {
                Ok(())
            } else {
                Err("down".to_owned())
            }
        })
    }

    #[test]
    fn aggregation_per_endpoint() {
        let checks = HealthChecks::default();
        let leader = Arc::new(AtomicBool::new(false));
        checks.add("ping", Endpoint::ALL, ok());
        checks.add("leaderElection", Endpoint::ALL, ok());
        checks.add("leader", &[Endpoint::Readyz], flag(&leader));
        checks.add(
            "service-lb-controller",
            &[Endpoint::Healthz, Endpoint::Readyz],
            ok(),
        );

        assert_eq!(
            checks.names(Endpoint::Healthz),
            vec!["ping", "leaderElection", "service-lb-controller"]
        );
        assert_eq!(
            checks.names(Endpoint::Livez),
            vec!["ping", "leaderElection"]
        );

        let healthz = checks.report(Endpoint::Healthz, &[]);
        assert!(healthz.healthy());
        assert_eq!(healthz.render(false), "ok");
        assert_eq!(
            healthz.render(true),
            "[+]ping ok\n[+]leaderElection ok\n[+]service-lb-controller ok\nhealthz check passed\n"
        );

        let readyz = checks.report(Endpoint::Readyz, &[]);
        assert!(!readyz.healthy());
        assert_eq!(
            readyz.render(false),
            "[+]ping ok\n[+]leaderElection ok\n[-]leader failed: reason withheld\n[+]service-lb-controller ok\nreadyz check failed\n"
        );
        leader.store(true, Ordering::SeqCst);
        assert!(checks.report(Endpoint::Readyz, &[]).healthy());
    }

    #[test]
    fn exclude_and_single_checks() {
        let checks = HealthChecks::default();
        let down = Arc::new(AtomicBool::new(false));
        checks.add("ping", Endpoint::ALL, ok());
        checks.add("broken", &[Endpoint::Healthz], flag(&down));
        let report = checks.report(Endpoint::Healthz, &["broken".into(), "nope".into()]);
        assert!(report.healthy());
        assert_eq!(
            report.render(true),
            "[+]ping ok\nwarn: some health checks cannot be excluded: no matches for \"nope\"\nhealthz check passed\n"
        );
        assert_eq!(checks.check_one(Endpoint::Healthz, "ping"), Some(Ok(())));
        assert_eq!(
            checks.check_one(Endpoint::Healthz, "broken"),
            Some(Err("down".into()))
        );
        assert_eq!(checks.check_one(Endpoint::Livez, "broken"), None);
        assert_eq!(checks.check_one(Endpoint::Healthz, "missing"), None);
    }

    #[test]
    fn adding_a_name_again_replaces_it_in_place() {
        let checks = HealthChecks::default();
        checks.add("a", Endpoint::ALL, ok());
        checks.add("b", Endpoint::ALL, ok());
        checks.add("a", &[Endpoint::Healthz], Arc::new(|| Err("x".into())));
        assert_eq!(checks.names(Endpoint::Healthz), vec!["a", "b"]);
        assert_eq!(checks.names(Endpoint::Livez), vec!["b"]);
        assert!(!checks.report(Endpoint::Healthz, &[]).healthy());
    }

    #[test]
    fn an_empty_set_is_healthy() {
        let report = HealthChecks::default().report(Endpoint::Livez, &[]);
        assert!(report.healthy());
        assert_eq!(report.render(true), "livez check passed\n");
    }

    #[test]
    fn query_parsing() {
        assert_eq!(parse_query(None), (false, vec![]));
        assert_eq!(parse_query(Some("verbose")), (true, vec![]));
        assert_eq!(parse_query(Some("verbose=1")), (true, vec![]));
        assert_eq!(parse_query(Some("verbose=false")), (false, vec![]));
        assert_eq!(
            parse_query(Some(
                "exclude=leaderElection&exclude=a%2Db&x=y&verbose=true"
            )),
            (true, vec!["leaderElection".to_owned(), "a-b".to_owned()])
        );
        assert_eq!(
            parse_query(Some("exclude=&exclude=%zz")),
            (false, vec!["%zz".to_owned()])
        );
        assert_eq!(
            parse_query(Some("exclude=a%2")),
            (false, vec!["a%2".to_owned()])
        );
    }

    /// Formerly the rustdoc example of an item that is now internal.
    #[test]
    fn doc_example_health_report() {
        use crate::health::{Endpoint, HealthChecks};
        use std::sync::Arc;

        let checks = HealthChecks::default();
        checks.add("ping", Endpoint::ALL, Arc::new(|| Ok(())));
        checks.add(
            "leader",
            &[Endpoint::Readyz],
            Arc::new(|| Err("not the leader".to_owned())),
        );
        assert!(checks.report(Endpoint::Healthz, &[]).healthy());
        let readyz = checks.report(Endpoint::Readyz, &[]);
        assert!(!readyz.healthy());
        assert_eq!(
            readyz.render(false),
            "[+]ping ok\n[-]leader failed: reason withheld\nreadyz check failed\n"
        );
    }
}
