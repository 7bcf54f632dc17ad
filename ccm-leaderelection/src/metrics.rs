//! Prometheus metrics with client-go's names.

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

/// The `name` label: the Lease name, as in client-go (`LeaderElectionConfig.Name`).
type NameLabel = [(&'static str, String); 1];

/// Leader-election metrics, registered once and shared by every elector of the process (for
/// example the main lock and a leader-migration lock), each labelled by its Lease name.
///
/// * `leader_election_master_status{name}`: 1 while this replica leads, else 0 (client-go's
///   gauge, so existing dashboards and alerts keep working);
/// * `leader_election_slowpath_total{name}`: renewals that could not use the optimistic fast
///   path and had to read the Lease first (client-go's counter).
///
/// ```
/// use ccm_leaderelection::LeaderElectionMetrics;
/// use prometheus_client::registry::Registry;
///
/// let mut registry = Registry::default();
/// let metrics = LeaderElectionMetrics::register(&mut registry);
/// // pass `metrics.clone()` to `LeaderElectorBuilder::metrics`
/// # drop(metrics);
/// ```
#[derive(Clone, Debug, Default)]
pub struct LeaderElectionMetrics {
    master_status: Family<NameLabel, Gauge>,
    slowpath: Family<NameLabel, Counter>,
}

impl LeaderElectionMetrics {
    /// Creates the metrics and registers them into `registry` (use a sub-registry to add a
    /// prefix; the reference CCM exposes them without one).
    pub fn register(registry: &mut Registry) -> Self {
        let metrics = Self::default();
        registry.register(
            "leader_election_master_status",
            "Gauge of if the reporting system is master of the relevant lease, 0 indicates \
             backup, 1 indicates master. 'name' is the string used to identify the lease.",
            metrics.master_status.clone(),
        );
        registry.register(
            "leader_election_slowpath",
            "Total number of slow path exercised in renewing leader leases. 'name' is the \
             string used to identify the lease.",
            metrics.slowpath.clone(),
        );
        metrics
    }

    /// The current `leader_election_master_status` value for the Lease `name` (0 or 1), `None`
    /// if no elector for that Lease has run yet.
    pub fn master_status(&self, name: &str) -> Option<i64> {
        self.master_status.get(&label(name)).map(|g| g.get())
    }

    /// The current `leader_election_slowpath_total` value for the Lease `name`, `None` if the
    /// slow path was never taken.
    pub fn slowpath_total(&self, name: &str) -> Option<u64> {
        self.slowpath.get(&label(name)).map(|c| c.get())
    }

    pub(crate) fn set_leading(&self, name: &str, leading: bool) {
        self.master_status
            .get_or_create(&label(name))
            .set(i64::from(leading));
    }

    pub(crate) fn slowpath_exercised(&self, name: &str) {
        self.slowpath.get_or_create(&label(name)).inc();
    }
}

fn label(name: &str) -> NameLabel {
    [("name", name.to_owned())]
}

#[cfg(test)]
mod tests {
    use super::*;
    use prometheus_client::encoding::text::encode;

    #[test]
    fn exposes_client_go_metric_names() {
        let mut registry = Registry::default();
        let metrics = LeaderElectionMetrics::register(&mut registry);
        metrics.set_leading("cloud-controller-manager", true);
        metrics.slowpath_exercised("cloud-controller-manager");
        metrics.set_leading("other", false);
        let mut text = String::new();
        encode(&mut text, &registry).expect("encodes");
        assert!(
            text.contains("leader_election_master_status{name=\"cloud-controller-manager\"} 1"),
            "{text}"
        );
        assert!(
            text.contains("leader_election_master_status{name=\"other\"} 0"),
            "{text}"
        );
        assert!(
            text.contains("leader_election_slowpath_total{name=\"cloud-controller-manager\"} 1"),
            "{text}"
        );
        assert_eq!(metrics.master_status("cloud-controller-manager"), Some(1));
        assert_eq!(metrics.slowpath_total("cloud-controller-manager"), Some(1));
        metrics.set_leading("cloud-controller-manager", false);
        assert_eq!(metrics.master_status("cloud-controller-manager"), Some(0));
        assert_eq!(metrics.master_status("never-ran"), None);
        assert_eq!(metrics.slowpath_total("other"), None);
    }
}
