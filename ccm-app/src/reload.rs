//! Reloading the provider's configuration without a restart: the runtime polls `--cloud-config` and the files the
//! provider declared ([`ProviderSettings::watch_file`](ccm_core::ProviderSettings::watch_file)) every
//! `--cloud-config-reload-interval`, comparing their contents (by SHA-256, [`digests`]), and hands a change to
//! [`ccm_core::CloudProvider::reload`].
//!
//! Reading the contents (rather than watching inodes) sees every kind of update: an edited file, a replaced file,
//! and the `..data` symlink swap of a Kubernetes Secret or ConfigMap volume. A file that cannot be read at the
//! moment (mid-swap, deleted) is waited for; nothing is reloaded until every watched file reads.
//!
//! The decisions are pure functions ([`decide`], [`verdict`], [`event_of`]); [`run_watcher`] is the thin loop
//! around them, and [`observer`] logs, counts and records (as an Event, [`involved_object`]) each outcome.

use std::collections::BTreeMap;
use std::future::Future;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use ccm_core::names;
use ccm_core::provider::CloudProvider;
use ccm_core::reload::ReloadContext;
use ccm_core::runtime::events::{EventRecorder, EventType};
use ccm_core::runtime::metrics::SharedRegistry;
use ccm_core::{CloudError, ErrorKind};
use k8s_openapi::api::core::v1::ObjectReference;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use tokio::time::MissedTickBehavior;
use tokio_util::sync::CancellationToken;

/// The contents of every watched file by path; `None`: it cannot be read now.
pub type Snapshot = BTreeMap<PathBuf, Option<Vec<u8>>>;

/// What the watcher keeps of a [`Snapshot`] between reads: each file's SHA-256, not its contents (a cloud config
/// may be large, and the contents in force live in the provider).
pub type Digests = BTreeMap<PathBuf, Option<[u8; 32]>>;

/// The SHA-256 of each file in `snapshot`.
pub fn digests(snapshot: &Snapshot) -> Digests {
    let sha256 = |bytes: &Vec<u8>| {
        let mut digest = [0; 32];
        digest.copy_from_slice(ring::digest::digest(&ring::digest::SHA256, bytes).as_ref());
        digest
    };
    snapshot
        .iter()
        .map(|(path, contents)| (path.clone(), contents.as_ref().map(sha256)))
        .collect()
}

/// What to do after reading the watched files.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// Nothing changed since the configuration in force.
    Unchanged,
    /// These files cannot be read now: wait (keep the configuration in force).
    Unreadable(Vec<PathBuf>),
    /// The same contents were already rejected: wait for the next change rather than repeat the failure.
    AlreadyRejected,
    /// Call the provider's reload hook; these paths changed.
    Reload(Vec<PathBuf>),
}

/// Decide what to do with the `current` contents, given the contents in force (`applied`) and the last rejected
/// ones (each file by its digest).
pub fn decide(applied: &Digests, rejected: Option<&Digests>, current: &Digests) -> Step {
    let paths = |keep: &dyn Fn(&PathBuf, &Option<[u8; 32]>) -> bool| -> Vec<PathBuf> {
        current
            .iter()
            .filter(|(p, c)| keep(p, c))
            .map(|(p, _)| p.clone())
            .collect()
    };
    let unreadable = paths(&|_, contents| contents.is_none());
    if !unreadable.is_empty() {
        Step::Unreadable(unreadable)
    } else if current == applied {
        Step::Unchanged
    } else if rejected == Some(current) {
        Step::AlreadyRejected
    } else {
        Step::Reload(paths(&|path, contents| applied.get(path) != Some(contents)))
    }
}

/// How the provider answered a reload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// The new configuration is in force.
    Applied,
    /// The new contents were rejected (the reason); the old configuration stays.
    Rejected(String),
    /// The provider cannot reload: a restart is needed to apply the change.
    Unsupported,
}

impl Verdict {
    /// The `result` label of `cloud_provider_config_reloads_total`.
    pub fn label(&self) -> &'static str {
        match self {
            Verdict::Applied => "success",
            Verdict::Rejected(_) => "failure",
            Verdict::Unsupported => "unsupported",
        }
    }
}

/// The verdict of a reload hook's result.
pub fn verdict(result: &Result<(), CloudError>) -> Verdict {
    match result {
        Ok(()) => Verdict::Applied,
        Err(err) if err.kind() == ErrorKind::NotImplemented => Verdict::Unsupported,
        Err(err) => Verdict::Rejected(err.to_string()),
    }
}

/// The Event of a verdict: type, reason, message.
pub fn event_of(verdict: &Verdict, changed: &[PathBuf]) -> (EventType, &'static str, String) {
    let files: Vec<_> = changed.iter().map(|p| p.display().to_string()).collect();
    let files = files.join(", ");
    match verdict {
        Verdict::Applied => (
            EventType::Normal,
            names::events::CLOUD_CONFIG_RELOADED,
            format!("applied the changed cloud configuration ({files})"),
        ),
        Verdict::Rejected(reason) => (
            EventType::Warning,
            names::events::CLOUD_CONFIG_RELOAD_FAILED,
            format!(
                "the changed cloud configuration ({files}) was rejected, the previous one stays in force: {reason}"
            ),
        ),
        Verdict::Unsupported => (
            EventType::Warning,
            names::events::CLOUD_CONFIG_RELOAD_FAILED,
            format!(
                "the cloud configuration changed ({files}) but the provider cannot reload it; restart the cloud \
                 controller manager to apply it"
            ),
        ),
    }
}

/// The object reload Events are about: the CCM's Pod when `pod` (`$POD_NAME`, `$POD_NAMESPACE`) is known, else the
/// leader-election Lease `lease` (namespace, name).
pub fn involved_object(pod: Option<(String, String)>, lease: (&str, &str)) -> ObjectReference {
    let (api_version, kind, (name, namespace)) = match pod {
        Some(pod) => ("v1", "Pod", pod),
        None => (
            "coordination.k8s.io/v1",
            "Lease",
            (lease.1.to_owned(), lease.0.to_owned()),
        ),
    };
    ObjectReference {
        api_version: Some(api_version.to_owned()),
        kind: Some(kind.to_owned()),
        name: Some(name),
        namespace: Some(namespace),
        ..ObjectReference::default()
    }
}

/// The environment variable with the CCM's namespace (the downward API's `metadata.namespace`).
pub const POD_NAMESPACE_ENV: &str = "POD_NAMESPACE";

/// `$POD_NAME` and `$POD_NAMESPACE`, when both are set and not blank.
pub fn pod_from_env() -> Option<(String, String)> {
    let var = |name: &str| std::env::var(name).ok().filter(|v| !v.trim().is_empty());
    Some((
        var(ccm_leaderelection::POD_NAME_ENV)?,
        var(POD_NAMESPACE_ENV)?,
    ))
}

/// One reload that happened: what changed and how the provider answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reloaded {
    /// The paths that changed.
    pub changed: Vec<PathBuf>,
    /// The provider's answer.
    pub verdict: Verdict,
}

/// What the watcher needs: which files, how often, the provider, and what to do with each outcome.
pub struct Watcher<R> {
    /// The `--cloud-config` path, if any (its contents go to [`ReloadContext::cloud_config`]).
    pub cloud_config: Option<PathBuf>,
    /// How often the files are read.
    pub interval: Duration,
    /// The provider whose hook is called.
    pub provider: Arc<dyn CloudProvider>,
    /// Reads every watched file.
    pub read: R,
    /// Told about every reload (logs, metrics, Events).
    pub observe: Arc<dyn Fn(&Reloaded) + Send + Sync>,
}

/// Read every path in `paths` (missing or unreadable: `None`).
pub async fn read_files(paths: &[PathBuf]) -> Snapshot {
    let mut snapshot = Snapshot::new();
    for path in paths {
        snapshot.insert(path.clone(), tokio::fs::read(path).await.ok());
    }
    snapshot
}

/// Poll the files every `interval` from `initial` (the digests of the contents the provider was created with) until
/// `shutdown`.
pub async fn run_watcher<R, F>(watcher: Watcher<R>, initial: Digests, shutdown: CancellationToken)
where
    R: Fn() -> F + Send,
    F: Future<Output = Snapshot> + Send,
{
    let mut applied = initial;
    let mut rejected: Option<Digests> = None;
    let mut ticks = tokio::time::interval_at(
        tokio::time::Instant::now() + watcher.interval,
        watcher.interval,
    );
    ticks.set_missed_tick_behavior(MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            biased;
            () = shutdown.cancelled() => return,
            _ = ticks.tick() => {}
        }
        let current = (watcher.read)().await;
        let now = digests(&current);
        match decide(&applied, rejected.as_ref(), &now) {
            Step::Unchanged | Step::AlreadyRejected => {}
            Step::Unreadable(paths) => {
                tracing::debug!(files = ?paths, "watched cloud configuration files cannot be read now; waiting");
            }
            Step::Reload(changed) => {
                let mut ctx = ReloadContext::new(None).with_changed(changed.iter().cloned());
                for (path, contents) in &current {
                    if watcher.cloud_config.as_ref() == Some(path) {
                        ctx.cloud_config = contents.clone();
                    } else {
                        ctx.files.insert(path.clone(), contents.clone());
                    }
                }
                let result = tokio::select! {
                    biased;
                    () = shutdown.cancelled() => return,
                    result = watcher.provider.reload(ctx) => result,
                };
                let verdict = verdict(&result);
                match verdict {
                    Verdict::Applied => (applied, rejected) = (now, None),
                    _ => rejected = Some(now),
                }
                (watcher.observe)(&Reloaded { changed, verdict });
            }
        }
    }
}

/// `cloud_provider_config_reloads_total{result="success|failure|unsupported"}`.
#[derive(Clone, Debug)]
pub struct ReloadMetrics {
    reloads: Family<Vec<(String, String)>, Counter>,
}

impl ReloadMetrics {
    /// Register the counter into `registry`.
    pub fn register(registry: &SharedRegistry) -> Self {
        let reloads = Family::default();
        registry.register(
            "cloud_provider_config_reloads",
            "Reloads of the cloud configuration after a watched file changed, by result (success, failure, \
             unsupported)",
            reloads.clone(),
        );
        ReloadMetrics { reloads }
    }

    /// Count one reload.
    pub fn count(&self, verdict: &Verdict) {
        self.reloads
            .get_or_create(&vec![("result".to_owned(), verdict.label().to_owned())])
            .inc();
    }
}

/// The runtime's observer: an error or info log line, the counter and the Event on `regarding`.
pub fn observer(
    recorder: EventRecorder,
    regarding: ObjectReference,
    metrics: ReloadMetrics,
) -> Arc<dyn Fn(&Reloaded) + Send + Sync> {
    Arc::new(move |reloaded: &Reloaded| {
        metrics.count(&reloaded.verdict);
        match &reloaded.verdict {
            Verdict::Applied => {
                tracing::info!(files = ?reloaded.changed, "cloud configuration reloaded")
            }
            Verdict::Rejected(reason) => tracing::error!(
                files = ?reloaded.changed,
                error = %reason,
                "the changed cloud configuration was rejected; the previous one stays in force"
            ),
            Verdict::Unsupported => tracing::warn!(
                files = ?reloaded.changed,
                "the cloud configuration changed but the provider cannot reload it; restart to apply it"
            ),
        }
        let (type_, reason, message) = event_of(&reloaded.verdict, &reloaded.changed);
        recorder.publish(&regarding, type_, reason, message);
    })
}

#[cfg(test)]
mod tests;
