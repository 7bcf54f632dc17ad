//! Creating the provider (in every replica, before leader election, as in Go): the `--cloud-config` contents and
//! the vendor's settings handed to the async factory, background tasks tied to the runtime's shutdown, and the
//! watcher that hands changed files to the provider's reload hook.

use std::path::PathBuf;
use std::sync::Arc;

use ccm_core::background::BackgroundTasks;
use ccm_core::names;
use ccm_core::provider::CloudProvider;
use ccm_core::registry::{ProviderRegistry, ProviderSettings, read_cloud_config};
use ccm_core::runtime::events::EventSink;
use ccm_core::runtime::metrics::SharedRegistry;
use ccm_core::vendor::VendorSettings;

use super::RunError;
use crate::options::CcmOptions;
use crate::reload::{
    Digests, ReloadMetrics, Watcher, digests, involved_object, observer, pod_from_env, read_files,
    run_watcher,
};

/// The files to watch for reload and the digests of their contents when the provider was created.
pub(super) struct ReloadWatch {
    cloud_config: Option<PathBuf>,
    paths: Vec<PathBuf>,
    initial: Digests,
}

/// Await the factory of `--cloud-provider` with the resolved settings.
pub(super) async fn create_provider(
    registry: &ProviderRegistry,
    options: &CcmOptions,
    client: kube::Client,
    vendor: VendorSettings,
    tasks: BackgroundTasks,
) -> Result<(Arc<dyn CloudProvider>, ReloadWatch), RunError> {
    let cloud_config = options
        .cloud_config
        .as_deref()
        .map(read_cloud_config)
        .transpose()?;
    let mut settings = ProviderSettings::new(client)
        .with_cluster_name(options.cluster_name.clone())
        .with_vendor(vendor)
        .with_tasks(tasks);
    if let (Some(path), Some(contents)) = (&options.cloud_config, &cloud_config) {
        settings = settings
            .with_cloud_config_path(path.clone())
            .with_cloud_config(contents.clone());
    }
    let kept = settings.clone();
    let provider = registry
        .init_cloud_provider(&options.cloud_provider, settings)
        .await?
        .ok_or_else(|| RunError::NoProvider {
            name: options.cloud_provider.clone(),
            known: registry.names().join(", "),
        })?;
    let mut paths = kept.watched_files();
    let mut initial = read_files(&paths).await;
    if let (Some(path), Some(contents)) = (&options.cloud_config, cloud_config) {
        // What the factory was given, not a second read that might already see a newer file.
        initial.insert(path.clone(), Some(contents));
        paths.insert(0, path.clone());
    }
    Ok((
        provider,
        ReloadWatch {
            cloud_config: options.cloud_config.clone(),
            paths,
            initial: digests(&initial),
        },
    ))
}

/// Start the reload watcher as a background task, unless there is nothing to watch or
/// `--cloud-config-reload-interval=0s`. `events_client` must not be fenced: every replica reloads.
pub(super) fn start_reload_watcher(
    watch: ReloadWatch,
    provider: Arc<dyn CloudProvider>,
    options: &CcmOptions,
    tasks: &BackgroundTasks,
    (events, events_client, instance): (&EventSink, kube::Client, &str),
    metrics: &SharedRegistry,
) {
    if watch.paths.is_empty() {
        return;
    }
    if options.cloud_config_reload_interval.is_zero() {
        tracing::info!(
            "--cloud-config-reload-interval=0s: changes to the cloud configuration need a restart"
        );
        return;
    }
    let ns = &options.leader_elect_resource_namespace;
    let regarding = involved_object(pod_from_env(), (ns, &options.leader_elect_resource_name));
    let recorder = events.recorder(
        events_client,
        names::components::CLOUD_CONTROLLER_MANAGER,
        Some(instance.to_owned()),
    );
    let paths = watch.paths;
    tracing::info!(files = ?paths, interval = ?options.cloud_config_reload_interval, "watching the cloud configuration for changes");
    let watcher = Watcher {
        cloud_config: watch.cloud_config,
        interval: options.cloud_config_reload_interval,
        provider,
        read: move || {
            let paths = paths.clone();
            async move { read_files(&paths).await }
        },
        observe: observer(recorder, regarding, ReloadMetrics::register(metrics)),
    };
    tasks.spawn(
        "cloud-config-reload",
        run_watcher(watcher, watch.initial, tasks.shutdown_token()),
    );
}
