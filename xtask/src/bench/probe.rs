//! A second, unrelated API client during a run: how the CCM's traffic affects everybody else.
//!
//! The probe authenticates as its own ServiceAccount (`default/bench-probe`, so API Priority and
//! Fairness puts it in the `service-accounts` flow schema, not with the CCM's `kube-system`
//! accounts) and reads one ConfigMap every [`PROBE_INTERVAL`] until it is stopped. It reports
//! the latency of those reads and how many the API server rejected with 429.

use std::time::{Duration, Instant};

use anyhow::Context as _;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::Api;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use super::identity;
use super::support::Cluster;

/// How often the probe reads.
pub const PROBE_INTERVAL: Duration = Duration::from_millis(100);
/// The probe's namespace, ServiceAccount and ConfigMap.
const NAMESPACE: &str = "default";
const NAME: &str = "bench-probe";

/// One read: how long it took and the HTTP status of a failure (`None`: success; `Some(0)`: no
/// answer at all).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Read {
    /// From sending the request to the complete answer.
    pub latency: Duration,
    /// The status of a failed read.
    pub failure: Option<u16>,
}

/// What the probe saw.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ProbeStats {
    /// Reads made.
    pub reads: usize,
    /// Median latency of all reads.
    pub p50: Duration,
    /// 99th percentile latency.
    pub p99: Duration,
    /// Slowest read.
    pub max: Duration,
    /// Reads rejected with 429 (Too Many Requests).
    pub throttled: usize,
    /// Other failed reads.
    pub failed: usize,
}

impl ProbeStats {
    /// Summarizes the reads (nearest-rank percentiles over all of them, failed ones included:
    /// a rejection is part of what the other client experiences).
    pub fn of(reads: &[Read]) -> ProbeStats {
        let mut latencies: Vec<Duration> = reads.iter().map(|r| r.latency).collect();
        latencies.sort_unstable();
        let rank = |q: f64| -> Duration {
            if latencies.is_empty() {
                return Duration::ZERO;
            }
            let index = ((q * latencies.len() as f64).ceil() as usize).clamp(1, latencies.len());
            latencies[index - 1]
        };
        ProbeStats {
            reads: reads.len(),
            p50: rank(0.50),
            p99: rank(0.99),
            max: latencies.last().copied().unwrap_or_default(),
            throttled: reads.iter().filter(|r| r.failure == Some(429)).count(),
            failed: reads
                .iter()
                .filter(|r| r.failure.is_some_and(|code| code != 429))
                .count(),
        }
    }

    /// `p50 / p99 / max` in milliseconds.
    pub fn latencies_ms(&self) -> String {
        let ms = |d: Duration| format!("{:.0}", d.as_secs_f64() * 1000.0);
        format!("{} / {} / {}", ms(self.p50), ms(self.p99), ms(self.max))
    }
}

/// A running probe.
pub struct Probe {
    stop: watch::Sender<bool>,
    task: JoinHandle<Vec<Read>>,
}

impl Probe {
    /// Creates the probe's account, its ConfigMap and a Role that lets it read the ConfigMap, then
    /// starts reading.
    ///
    /// # Errors
    /// If the objects or the account's token cannot be created.
    pub async fn start(cluster: &Cluster) -> anyhow::Result<Probe> {
        for object in objects() {
            identity::apply(&cluster.client, object).await?;
        }
        let client = cluster
            .env
            .try_client_for_service_account(NAMESPACE, NAME)
            .await
            .context("a client for the probe's ServiceAccount")?;
        let config_maps: Api<ConfigMap> = Api::namespaced(client, NAMESPACE);
        let (stop, mut stopped) = watch::channel(false);
        let task = tokio::spawn(async move {
            let mut reads = Vec::new();
            let mut ticks = tokio::time::interval(PROBE_INTERVAL);
            ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tokio::select! {
                    _ = stopped.changed() => break,
                    _ = ticks.tick() => {}
                }
                let sent = Instant::now();
                let failure = match config_maps.get(NAME).await {
                    Ok(_) => None,
                    Err(kube::Error::Api(status)) => Some(status.code),
                    Err(_) => Some(0),
                };
                reads.push(Read {
                    latency: sent.elapsed(),
                    failure,
                });
            }
            reads
        });
        Ok(Probe { stop, task })
    }

    /// Stops reading and summarizes.
    pub async fn finish(self) -> ProbeStats {
        let _ = self.stop.send(true);
        ProbeStats::of(&self.task.await.unwrap_or_default())
    }
}

/// The probe's ServiceAccount, ConfigMap, Role and RoleBinding.
fn objects() -> Vec<serde_json::Value> {
    let metadata = serde_json::json!({ "name": NAME, "namespace": NAMESPACE });
    vec![
        serde_json::json!({ "apiVersion": "v1", "kind": "ServiceAccount", "metadata": metadata }),
        serde_json::json!({
            "apiVersion": "v1", "kind": "ConfigMap", "metadata": metadata,
            "data": { "purpose": "read by the benchmark's second client" },
        }),
        serde_json::json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": metadata,
            "rules": [{
                "apiGroups": [""], "resources": ["configmaps"], "resourceNames": [NAME],
                "verbs": ["get"],
            }],
        }),
        serde_json::json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": metadata,
            "roleRef": { "apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": NAME },
            "subjects": [{ "kind": "ServiceAccount", "name": NAME, "namespace": NAMESPACE }],
        }),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(ms: u64, failure: Option<u16>) -> Read {
        Read {
            latency: Duration::from_millis(ms),
            failure,
        }
    }

    #[test]
    fn percentiles_use_the_nearest_rank_over_all_reads() {
        let reads: Vec<Read> = (1..=100).map(|ms| read(ms, None)).collect();
        let stats = ProbeStats::of(&reads);
        assert_eq!(stats.reads, 100);
        assert_eq!(stats.p50, Duration::from_millis(50));
        assert_eq!(stats.p99, Duration::from_millis(99));
        assert_eq!(stats.max, Duration::from_millis(100));
        assert_eq!(stats.latencies_ms(), "50 / 99 / 100");
        assert_eq!((stats.throttled, stats.failed), (0, 0));
    }

    #[test]
    fn rejections_are_counted_apart_from_other_failures() {
        let stats = ProbeStats::of(&[
            read(5, Some(429)),
            read(7, Some(429)),
            read(3, Some(500)),
            read(1, Some(0)),
        ]);
        assert_eq!((stats.throttled, stats.failed), (2, 2));
        assert_eq!(stats.max, Duration::from_millis(7));
        assert_eq!(stats.p50, Duration::from_millis(3));
    }

    #[test]
    fn no_reads_give_zeros() {
        assert_eq!(ProbeStats::of(&[]), ProbeStats::default());
        let one = ProbeStats::of(&[read(9, None)]);
        assert_eq!(
            (one.p50, one.p99, one.max),
            (
                Duration::from_millis(9),
                Duration::from_millis(9),
                Duration::from_millis(9)
            )
        );
    }

    #[test]
    fn the_probe_may_read_only_its_own_config_map() {
        let objects = objects();
        let kinds: Vec<&str> = objects.iter().filter_map(|o| o["kind"].as_str()).collect();
        assert_eq!(
            kinds,
            ["ServiceAccount", "ConfigMap", "Role", "RoleBinding"]
        );
        let rule = &objects[2]["rules"][0];
        assert_eq!(rule["resourceNames"][0], NAME);
        assert_eq!(rule["verbs"], serde_json::json!(["get"]));
    }
}
