//! The live doctor's I/O: read a [`Snapshot`] from a cluster, then run the pure analysis on it.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::time::Duration;

use ccm_core::names;
use k8s_openapi::api::apps::v1::{DaemonSet, Deployment};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector as K8sLabelSelector;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, ListParams};
use kube::core::Selector;
use serde::de::DeserializeOwned;

use crate::analysis::{
    AnalysisConfig, DEFAULT_UNINITIALIZED_THRESHOLD, Snapshot, analyze, lease_location,
    needs_cni_pods,
};
use crate::report::Report;
use crate::selector::LabelSelector;
use crate::workload::{Workload, WorkloadError};

/// The name the doctor looks for when neither `--workload` nor `--workload-selector` is given.
pub const DEFAULT_WORKLOAD_NAME: &str = names::MANAGER_NAME;

/// The label key of the default workload selector (`k8s-app=cloud-controller-manager`).
pub const DEFAULT_WORKLOAD_LABEL: &str = "k8s-app";

/// The namespace searched for the CCM by default.
pub const DEFAULT_NAMESPACE: &str = "kube-system";

/// How long a live run may take by default.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);

/// The names of the DaemonSets of well-known CNIs, whose pods are the CNI pods unless `--cni-selector` says
/// otherwise: Calico, Canal, Cilium, Flannel, Weave Net, kube-router and Antrea.
pub const WELL_KNOWN_CNI_DAEMONSETS: &[&str] = &[
    "calico-node",
    "canal",
    "cilium",
    "kube-flannel-ds",
    "flannel",
    "weave-net",
    "kube-router",
    "antrea-agent",
];

/// The doctor could not examine the cluster or the manifest.
#[derive(Debug, thiserror::Error)]
pub enum DoctorError {
    /// The kubeconfig could not be loaded.
    #[error("cannot load the kubeconfig{}: {detail}", path.as_ref().map(|p| format!(" {}", p.display())).unwrap_or_default())]
    Kubeconfig {
        /// The file given with `--kubeconfig`, if any.
        path: Option<PathBuf>,
        /// What went wrong (with its causes).
        detail: String,
    },
    /// No client could be built from the configuration.
    #[error("cannot build a client for {server}: {detail}")]
    Client {
        /// The API server URL.
        server: String,
        /// What went wrong (with its causes).
        detail: String,
    },
    /// A request failed.
    #[error("failed to {action} on {server}: {detail} ({hint})")]
    Api {
        /// What was being read.
        action: String,
        /// The API server URL.
        server: String,
        /// What went wrong (with its causes).
        detail: String,
        /// What to check.
        hint: &'static str,
        /// The client error.
        error: Box<kube::Error>,
    },
    /// The cluster did not answer in time.
    #[error(
        "the cluster at {server} did not answer within {}; check that it is reachable, or raise --timeout",
        ccm_core::duration::format_go_duration(*timeout)
    )]
    Timeout {
        /// The API server URL.
        server: String,
        /// The limit.
        timeout: Duration,
    },
    /// The manifest could not be linted.
    #[error(transparent)]
    Manifest(#[from] crate::manifest::ManifestError),
    /// A workload read from the cluster lacks what the checks need.
    #[error("{0}")]
    Workload(#[from] WorkloadError),
}

/// An error and its causes, each once (kube's errors keep the useful part, such as "connection refused", in
/// their causes).
pub(crate) fn error_chain(error: &(dyn std::error::Error + 'static)) -> String {
    ccm_core::error::report(error)
}

/// What to check after a failed request.
fn hint_for(error: &kube::Error) -> &'static str {
    match error {
        kube::Error::Api(status) if status.code == 401 => {
            "the API server rejected the kubeconfig's credentials: check that they are current"
        }
        kube::Error::Api(status) if status.code == 403 => {
            "the kubeconfig's user needs to list nodes, pods, deployments and daemonsets and get leases; see \
             docs/doctor.md for the permissions"
        }
        kube::Error::Api(_) => "the API server refused the request",
        _ => {
            "check that the cluster is reachable: the server URL, the network and TLS settings of the kubeconfig"
        }
    }
}

/// What to examine in the cluster and how to judge it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DoctorOptions {
    /// The CCM's namespace.
    pub namespace: String,
    /// The CCM Deployment or DaemonSet's name.
    pub workload: Option<String>,
    /// A label selector for the CCM Deployment or DaemonSet (and its pods).
    pub workload_selector: Option<LabelSelector>,
    /// Only nodes with these labels.
    pub node_selector: Option<LabelSelector>,
    /// A label selector for the CNI's pods (default: the pods of [`WELL_KNOWN_CNI_DAEMONSETS`]).
    pub cni_selector: Option<LabelSelector>,
    /// Look for CNI pods (or DaemonSets) in this namespace only (default: all namespaces).
    pub cni_namespace: Option<String>,
    /// The leader Lease's namespace (default: the CCM's `--leader-elect-resource-namespace`, else
    /// `kube-system`).
    pub lease_namespace: Option<String>,
    /// The leader Lease's name (default: the CCM's `--leader-elect-resource-name`, else
    /// `cloud-controller-manager`).
    pub lease_name: Option<String>,
    /// How long a node may wait for initialization.
    pub uninitialized_threshold: Duration,
    /// How long the whole live run may take.
    pub timeout: Duration,
}

impl Default for DoctorOptions {
    fn default() -> Self {
        DoctorOptions {
            namespace: DEFAULT_NAMESPACE.to_owned(),
            workload: None,
            workload_selector: None,
            node_selector: None,
            cni_selector: None,
            cni_namespace: None,
            lease_namespace: None,
            lease_name: None,
            uninitialized_threshold: DEFAULT_UNINITIALIZED_THRESHOLD,
            timeout: DEFAULT_TIMEOUT,
        }
    }
}

impl DoctorOptions {
    /// The workload name and selector actually used: those given, or, when neither is given, the name
    /// `cloud-controller-manager` and the selector `k8s-app=cloud-controller-manager`.
    pub fn effective_workload_query(&self) -> (Option<String>, Option<LabelSelector>) {
        if self.workload.is_none() && self.workload_selector.is_none() {
            let selector = format!("{DEFAULT_WORKLOAD_LABEL}={DEFAULT_WORKLOAD_NAME}")
                .parse()
                .ok();
            return (Some(DEFAULT_WORKLOAD_NAME.to_owned()), selector);
        }
        (self.workload.clone(), self.workload_selector.clone())
    }

    fn ccm_search(&self) -> String {
        let (name, selector) = self.effective_workload_query();
        let what = match (name, selector) {
            (Some(n), Some(s)) => format!("named {n} or labelled {s}"),
            (Some(n), None) => format!("named {n}"),
            (None, Some(s)) => format!("labelled {s}"),
            (None, None) => String::new(),
        };
        format!(
            "searched: Deployment or DaemonSet {what} in namespace {}",
            self.namespace
        )
    }

    fn cni_search(&self) -> String {
        let place = match &self.cni_namespace {
            Some(ns) => format!("in namespace {ns}"),
            None => "in all namespaces".to_owned(),
        };
        match &self.cni_selector {
            Some(sel) => format!("pods labelled {sel} {place}"),
            None => format!(
                "pods of the DaemonSets {} {place}",
                WELL_KNOWN_CNI_DAEMONSETS.join(", ")
            ),
        }
    }

    fn analysis(&self) -> AnalysisConfig {
        AnalysisConfig {
            uninitialized_threshold: self.uninitialized_threshold,
        }
    }
}

struct Reader<'a> {
    client: kube::Client,
    server: &'a str,
}

impl Reader<'_> {
    fn api_err(&self, action: impl Into<String>) -> impl FnOnce(kube::Error) -> DoctorError + '_ {
        let action = action.into();
        move |error| DoctorError::Api {
            action,
            server: self.server.to_owned(),
            detail: error_chain(&error),
            hint: hint_for(&error),
            error: Box::new(error),
        }
    }

    async fn list<K>(
        &self,
        api: &Api<K>,
        labels: Option<&str>,
        what: &str,
    ) -> Result<Vec<K>, DoctorError>
    where
        K: Clone + DeserializeOwned + std::fmt::Debug,
    {
        let mut params = ListParams::default().limit(500);
        if let Some(labels) = labels {
            params = params.labels(labels);
        }
        let mut items = Vec::new();
        loop {
            let page = api
                .list(&params)
                .await
                .map_err(self.api_err(format!("list {what}")))?;
            items.extend(page.items);
            match page.metadata.continue_.filter(|c| !c.is_empty()) {
                Some(token) => params = params.continue_token(&token),
                None => return Ok(items),
            }
        }
    }

    async fn get_opt<K>(
        &self,
        api: &Api<K>,
        name: &str,
        what: &str,
    ) -> Result<Option<K>, DoctorError>
    where
        K: Clone + DeserializeOwned + std::fmt::Debug,
    {
        api.get_opt(name)
            .await
            .map_err(self.api_err(format!("get {what} {name}")))
    }
}

fn selector_string(selector: &K8sLabelSelector) -> Option<String> {
    let parsed = Selector::try_from(selector.clone()).ok()?;
    if parsed.selects_all() {
        return None;
    }
    Some(parsed.to_string())
}

/// Read everything the checks need from the cluster.
///
/// # Errors
/// [`DoctorError::Api`] when a request fails.
pub async fn gather(
    client: kube::Client,
    server: &str,
    options: &DoctorOptions,
) -> Result<Snapshot, DoctorError> {
    let reader = Reader { client, server };
    let client = reader.client.clone();

    // Nodes.
    let node_labels = options.node_selector.as_ref().map(ToString::to_string);
    let nodes: Vec<Node> = reader
        .list(&Api::all(client.clone()), node_labels.as_deref(), "nodes")
        .await?;

    // The CCM workloads.
    let ns = options.namespace.as_str();
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), ns);
    let daemon_sets: Api<DaemonSet> = Api::namespaced(client.clone(), ns);
    let (name, selector) = options.effective_workload_query();
    let selector_text = selector.as_ref().map(ToString::to_string);
    let mut found_deployments = Vec::new();
    let mut found_daemon_sets = Vec::new();
    if let Some(name) = &name {
        found_deployments.extend(reader.get_opt(&deployments, name, "deployment").await?);
        found_daemon_sets.extend(reader.get_opt(&daemon_sets, name, "daemonset").await?);
    }
    if let Some(labels) = &selector_text {
        found_deployments.extend(
            reader
                .list(
                    &deployments,
                    Some(labels),
                    &format!("deployments in namespace {ns}"),
                )
                .await?,
        );
        found_daemon_sets.extend(
            reader
                .list(
                    &daemon_sets,
                    Some(labels),
                    &format!("daemonsets in namespace {ns}"),
                )
                .await?,
        );
    }
    let mut seen = BTreeSet::new();
    let mut workloads = Vec::new();
    for d in &found_deployments {
        if seen.insert(("Deployment", d.metadata.name.clone())) {
            workloads.push(Workload::from_deployment(d)?);
        }
    }
    for d in &found_daemon_sets {
        if seen.insert(("DaemonSet", d.metadata.name.clone())) {
            workloads.push(Workload::from_daemon_set(d)?);
        }
    }

    // The CCM pods: those of each workload, and those carrying the workload labels.
    let pods_api: Api<Pod> = Api::namespaced(client.clone(), ns);
    let mut pod_selectors: Vec<String> = workloads
        .iter()
        .filter_map(|w| w.selector.as_ref().and_then(selector_string))
        .collect();
    pod_selectors.extend(selector_text.clone());
    pod_selectors.sort();
    pod_selectors.dedup();
    let mut ccm_pods: Vec<Pod> = Vec::new();
    let mut pod_names = BTreeSet::new();
    for labels in &pod_selectors {
        for pod in reader
            .list(&pods_api, Some(labels), &format!("pods in namespace {ns}"))
            .await?
        {
            if pod_names.insert(pod.metadata.name.clone()) {
                ccm_pods.push(pod);
            }
        }
    }

    // The CNI pods, only when a node needs them.
    let analysis = options.analysis();
    let cni_pods = if needs_cni_pods(&nodes, Timestamp::now(), &analysis) {
        Some(gather_cni_pods(&reader, options).await?)
    } else {
        None
    };

    // The leader Lease.
    let (lease_namespace, lease_name) = lease_location(
        &workloads,
        &ccm_pods,
        options.lease_namespace.as_deref(),
        options.lease_name.as_deref(),
    );
    let leases: Api<Lease> = Api::namespaced(client.clone(), &lease_namespace);
    let lease = reader
        .get_opt(
            &leases,
            &lease_name,
            &format!("lease in namespace {lease_namespace}"),
        )
        .await?;

    Ok(Snapshot {
        now: Timestamp::now(),
        nodes,
        workloads,
        ccm_pods,
        ccm_search: options.ccm_search(),
        cni_pods,
        cni_search: options.cni_search(),
        lease_namespace,
        lease_name,
        lease,
    })
}

async fn gather_cni_pods(
    reader: &Reader<'_>,
    options: &DoctorOptions,
) -> Result<Vec<Pod>, DoctorError> {
    let client = reader.client.clone();
    let place = match &options.cni_namespace {
        Some(ns) => format!("in namespace {ns}"),
        None => "in all namespaces".to_owned(),
    };
    if let Some(selector) = &options.cni_selector {
        let pods: Api<Pod> = match &options.cni_namespace {
            Some(ns) => Api::namespaced(client, ns),
            None => Api::all(client),
        };
        return reader
            .list(&pods, Some(&selector.to_string()), &format!("pods {place}"))
            .await;
    }
    let daemon_sets: Api<DaemonSet> = match &options.cni_namespace {
        Some(ns) => Api::namespaced(client.clone(), ns),
        None => Api::all(client.clone()),
    };
    let mut pods = Vec::new();
    for ds in reader
        .list(&daemon_sets, None, &format!("daemonsets {place}"))
        .await?
    {
        let name = ds.metadata.name.as_deref().unwrap_or("");
        if !WELL_KNOWN_CNI_DAEMONSETS.contains(&name) {
            continue;
        }
        let Some(ns) = ds.metadata.namespace.as_deref() else {
            continue;
        };
        let Some(labels) = ds.spec.as_ref().and_then(|s| selector_string(&s.selector)) else {
            continue;
        };
        let api: Api<Pod> = Api::namespaced(client.clone(), ns);
        pods.extend(
            reader
                .list(
                    &api,
                    Some(&labels),
                    &format!("pods of daemonset {ns}/{name}"),
                )
                .await?,
        );
    }
    Ok(pods)
}

/// Examine the cluster behind `client` and report, naming it `target` (usually its URL) in the report and in
/// errors. Bounded by `options.timeout`.
///
/// # Errors
/// [`DoctorError`] when the cluster cannot be read (unreachable, forbidden, too slow).
pub async fn diagnose_cluster(
    client: kube::Client,
    target: &str,
    options: &DoctorOptions,
) -> Result<Report, DoctorError> {
    let snapshot = tokio::time::timeout(options.timeout, gather(client, target, options))
        .await
        .map_err(|_| DoctorError::Timeout {
            server: target.to_owned(),
            timeout: options.timeout,
        })??;
    let findings = analyze(&snapshot, &options.analysis());
    Ok(Report::new(format!("cluster {target}"), findings))
}

/// [`diagnose_cluster`] for a client whose URL is not at hand.
///
/// ```no_run
/// use ccm_doctor::{DoctorOptions, run_with_client};
///
/// # async fn demo(client: kube::Client) -> Result<(), ccm_doctor::DoctorError> {
/// let report = run_with_client(client, &DoctorOptions::default()).await?;
/// print!("{}", report.render_text());
/// std::process::exit(i32::from(report.exit_code()));
/// # }
/// ```
///
/// # Errors
/// As [`diagnose_cluster`].
pub async fn run_with_client(
    client: kube::Client,
    options: &DoctorOptions,
) -> Result<Report, DoctorError> {
    diagnose_cluster(client, "(kube client)", options).await
}

/// Build a client from `--kubeconfig` (and `--context`), or, without a path, from the usual places
/// (`$KUBECONFIG`, `~/.kube/config`, the in-cluster service account). Returns the client and the server URL.
///
/// ```no_run
/// use ccm_doctor::{DoctorOptions, connect, diagnose_cluster};
///
/// # async fn demo() -> Result<(), ccm_doctor::DoctorError> {
/// let (client, server) = connect(Some(std::path::Path::new("/etc/kubernetes/admin.conf")), None).await?;
/// let report = diagnose_cluster(client, &server, &DoctorOptions::default()).await?;
/// println!("{}", report.render_text());
/// # Ok(())
/// # }
/// ```
///
/// # Errors
/// [`DoctorError::Kubeconfig`] if the configuration cannot be loaded, [`DoctorError::Client`] if no client can
/// be built from it.
pub async fn connect(
    kubeconfig: Option<&std::path::Path>,
    context: Option<&str>,
) -> Result<(kube::Client, String), DoctorError> {
    let kube_err = |detail: String| DoctorError::Kubeconfig {
        path: kubeconfig.map(std::path::Path::to_path_buf),
        detail,
    };
    let options = kube::config::KubeConfigOptions {
        context: context.map(str::to_owned),
        ..Default::default()
    };
    let config = match kubeconfig {
        Some(path) => {
            let file =
                kube::config::Kubeconfig::read_from(path).map_err(|e| kube_err(error_chain(&e)))?;
            kube::Config::from_custom_kubeconfig(file, &options)
                .await
                .map_err(|e| kube_err(error_chain(&e)))?
        }
        None if context.is_some() => kube::Config::from_kubeconfig(&options)
            .await
            .map_err(|e| kube_err(error_chain(&e)))?,
        None => kube::Config::infer()
            .await
            .map_err(|e| kube_err(error_chain(&e)))?,
    };
    let server = config.cluster_url.to_string();
    let server = server.trim_end_matches('/').to_owned();
    let client = kube::Client::try_from(config).map_err(|e| DoctorError::Client {
        server: server.clone(),
        detail: error_chain(&e),
    })?;
    Ok((client, server))
}
