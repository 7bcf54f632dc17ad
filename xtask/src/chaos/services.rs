//! The LoadBalancer Services a scenario churns, and what "converged" means for them: every
//! live Service has an ingress and exactly one load balancer in the fake cloud (read from the
//! cloud's state file), no deleted Service is left (stuck on its finalizer or never deleted),
//! and the cloud holds no load balancer without a Service.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use ccm_provider_fake::CloudSnapshot;
use k8s_openapi::api::core::v1::Service;
use kube::Api;
use tokio::task::JoinHandle;

use super::world::{self, SERVICE};
use crate::bench::lbs::{has_ingress, lb_service};
use crate::bench::support::pause;
use crate::process::Interrupt;

/// The state file's name in the run's directory.
pub const STATE_FILE: &str = "cloud-state.json";

/// The inventory line that makes the fake cloud write its state to `dir`'s [`STATE_FILE`].
pub fn state_file_yaml(dir: &Path) -> String {
    format!("stateFile: {:?}\n", state_file(dir).display().to_string())
}

/// The state file of the run whose directory is `dir`.
pub fn state_file(dir: &Path) -> PathBuf {
    dir.join(STATE_FILE)
}

/// A set of Services named `<prefix>-<index>` (zero-padded to `width` digits), of which every
/// `delete_every`-th (the last of each group) is deleted again after all are created.
#[derive(Debug, Clone, Copy)]
pub struct Churn {
    /// The name prefix.
    pub prefix: &'static str,
    /// How many Services are created.
    pub count: usize,
    /// Digits of the index in the name.
    pub width: usize,
    /// Every this many Services, one is deleted.
    pub delete_every: usize,
}

/// A Service as listed: name, has an ingress, is being deleted.
pub type Listed = (String, bool, bool);

impl Churn {
    /// The name of the `index`-th Service.
    pub fn name(&self, index: usize) -> String {
        format!("{}-{index:0width$}", self.prefix, width = self.width)
    }

    /// Whether the `index`-th Service is deleted during the run.
    pub fn deleted(&self, index: usize) -> bool {
        index % self.delete_every == self.delete_every - 1
    }

    /// How many Services are deleted.
    pub fn deleted_count(&self) -> usize {
        (0..self.count).filter(|i| self.deleted(*i)).count()
    }

    /// Creates every Service, then deletes the ones to delete, in the background (retrying
    /// through API server outages).
    pub fn spawn(self, services: Api<Service>) -> JoinHandle<anyhow::Result<()>> {
        tokio::spawn(async move {
            for index in 0..self.count {
                world::create_retrying(&services, &lb_service(&self.name(index))).await?;
            }
            for index in (0..self.count).filter(|i| self.deleted(*i)) {
                world::delete_retrying(&services, &self.name(index)).await?;
            }
            anyhow::Ok(())
        })
    }

    /// What is wrong with the Services of namespace `default` (`live`; others than these and the
    /// workload's own [`SERVICE`], such as `kubernetes`, are ignored) and the service keys of
    /// the cloud's load balancers (`default/<name>`, one entry per load balancer).
    pub fn problems(&self, live: &[Listed], cloud: &[String]) -> Vec<String> {
        let mut wanted: Vec<String> = (0..self.count)
            .filter(|i| !self.deleted(*i))
            .map(|i| self.name(i))
            .collect();
        wanted.push(SERVICE.to_owned());
        let mut problems = Vec::new();
        for name in &wanted {
            let key = format!("default/{name}");
            match live.iter().find(|(n, _, _)| n == name) {
                None => problems.push(format!("{name}: missing")),
                Some((_, false, _)) => problems.push(format!("{name}: no ingress")),
                Some(_) => {}
            }
            match cloud.iter().filter(|k| **k == key).count() {
                1 => {}
                n => problems.push(format!("{name}: {n} load balancers in the cloud")),
            }
        }
        for name in (0..self.count)
            .filter(|i| self.deleted(*i))
            .map(|i| self.name(i))
        {
            if let Some((_, _, deleting)) = live.iter().find(|(n, _, _)| *n == name) {
                let what = if *deleting {
                    "stuck with its finalizer"
                } else {
                    "still exists"
                };
                problems.push(format!("{name}: {what} after its delete"));
            }
        }
        let wanted_keys: BTreeSet<String> = wanted.iter().map(|n| format!("default/{n}")).collect();
        for key in cloud.iter().collect::<BTreeSet<_>>() {
            if !wanted_keys.contains(key) {
                problems.push(format!("leaked load balancer of {key}"));
            }
        }
        problems
    }

    /// Polls the Services and the cloud's state file until there is no problem or `bound` has
    /// passed since `since`; returns the problems left (empty when converged).
    ///
    /// # Errors
    /// If the API server cannot list the Services, the state file cannot be read, or on Ctrl-C.
    pub async fn wait(
        &self,
        services: &Api<Service>,
        state_file: &Path,
        since: Instant,
        bound: Duration,
        interrupt: &Interrupt,
    ) -> anyhow::Result<Vec<String>> {
        loop {
            let list = services.list(&Default::default()).await?;
            let live: Vec<Listed> = list
                .items
                .iter()
                .map(|s| {
                    (
                        s.metadata.name.clone().unwrap_or_default(),
                        has_ingress(s),
                        s.metadata.deletion_timestamp.is_some(),
                    )
                })
                .collect();
            let cloud = cloud_load_balancers(state_file)?;
            let problems = self.problems(&live, &cloud);
            if problems.is_empty() || since.elapsed() >= bound {
                return Ok(problems);
            }
            pause(Duration::from_millis(500), interrupt).await?;
        }
    }
}

/// The service keys of the load balancers in the fake cloud's state file.
fn cloud_load_balancers(state_file: &Path) -> anyhow::Result<Vec<String>> {
    let text = std::fs::read_to_string(state_file)
        .with_context(|| format!("reading the fake cloud's {}", state_file.display()))?;
    let snapshot = CloudSnapshot::from_json(&text)
        .with_context(|| format!("parsing {}", state_file.display()))?;
    Ok(snapshot
        .load_balancers
        .iter()
        .map(|lb| lb.service.clone())
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    const CHURN: Churn = Churn {
        prefix: "faults-lb",
        count: 10,
        width: 2,
        delete_every: 5,
    };

    fn converged() -> (Vec<Listed>, Vec<String>) {
        let mut live: Vec<Listed> = (0..CHURN.count)
            .filter(|i| !CHURN.deleted(*i))
            .map(|i| (CHURN.name(i), true, false))
            .collect();
        live.push((SERVICE.to_owned(), true, false));
        live.push(("kubernetes".to_owned(), false, false));
        let cloud = live
            .iter()
            .filter(|(n, _, _)| n != "kubernetes")
            .map(|(n, _, _)| format!("default/{n}"))
            .collect();
        (live, cloud)
    }

    #[test]
    fn names_and_deletions_follow_the_churn() {
        assert_eq!(CHURN.name(4), "faults-lb-04");
        assert!(CHURN.deleted(4) && CHURN.deleted(9) && !CHURN.deleted(5));
        assert_eq!(CHURN.deleted_count(), 2);
        let halves = Churn {
            prefix: "chaos-lb",
            count: 100,
            width: 3,
            delete_every: 2,
        };
        assert_eq!(halves.name(7), "chaos-lb-007");
        assert!(halves.deleted(7) && !halves.deleted(8));
        assert_eq!(halves.deleted_count(), 50);
    }

    #[test]
    fn a_converged_cluster_has_no_problem() {
        let (live, cloud) = converged();
        assert_eq!(CHURN.problems(&live, &cloud), Vec::<String>::new());
    }

    #[test]
    fn missing_ingresses_leaks_duplicates_leftovers_and_stuck_finalizers_are_reported() {
        let (mut live, mut cloud) = converged();
        live[0].1 = false; // faults-lb-00 without an ingress
        live.retain(|(n, _, _)| n != "faults-lb-01"); // missing
        live.push((CHURN.name(4), true, true)); // deleted, stuck on its finalizer
        live.push((CHURN.name(9), true, false)); // delete never happened
        cloud.push("default/faults-lb-02".into()); // two load balancers
        cloud.push("default/faults-lb-09".into()); // its Service was deleted: a leak
        cloud.retain(|k| k != "default/faults-lb-03"); // no load balancer
        assert_eq!(
            CHURN.problems(&live, &cloud),
            [
                "faults-lb-00: no ingress",
                "faults-lb-01: missing",
                "faults-lb-02: 2 load balancers in the cloud",
                "faults-lb-03: 0 load balancers in the cloud",
                "faults-lb-04: stuck with its finalizer after its delete",
                "faults-lb-09: still exists after its delete",
                "leaked load balancer of default/faults-lb-09",
            ]
        );
    }
}
