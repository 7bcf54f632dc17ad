//! The command line, the builder a vendor's `main` calls, and start-up: clients, the provider with its budget
//! and cache, health checks, the admin server, leader election.

use std::ffi::OsString;
use std::process::ExitCode;
use std::sync::{Arc, OnceLock};

use ccm_core::background::BackgroundTasks;
use ccm_core::fence::LeadershipFence;
use ccm_core::names;
use ccm_core::registry::{ProviderRegistry, RegistryError};
use ccm_core::runtime::controller::{ControllerDescriptor, HealthCheck};
use ccm_core::runtime::events::EventSink;
use ccm_core::runtime::informer::SharedInformers;
use ccm_core::runtime::metrics::{ControllerManagerMetrics, SharedRegistry};
use clap::{CommandFactory, FromArgMatches, Parser};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::assemble;
use super::provider::{create_provider, start_reload_watcher};
use super::signals::handle_signals;
use super::supervisor::{RunningCcm, Supervisor};
use super::vendor::VendorSpec;
use super::{CcmStatus, RunError, StartupError};
use crate::client::user_agent_prefix;
use crate::controllers::ControllerCatalog;
use crate::options::{CcmOptions, Settings, invalid};
use crate::webhook::{WebhookContext, WebhookDescriptor};

/// The client name (user agent suffix) of the webhooks' Kubernetes client.
const WEBHOOK_CLIENT: &str = "cloud-controller-manager-webhook";

/// The command line: `--config` plus every [`Settings`] flag.
#[derive(Debug, Parser)]
#[command(name = "cloud-controller-manager")]
struct Cli {
    /// A YAML file with settings (the camelCase names of the flags, see docs/schema/ccm-config.schema.json);
    /// flags given on the command line override it.
    #[arg(long, value_name = "FILE", help_heading = "Configuration")]
    config: Option<std::path::PathBuf>,
    #[command(flatten)]
    settings: Settings,
}

type DescriptorFn = Arc<dyn Fn(&CcmOptions) -> ControllerDescriptor + Send + Sync>;

/// The entry point of a cloud controller manager.
///
/// ```no_run
/// # async fn demo() -> std::process::ExitCode {
/// let registry = ccm_core::ProviderRegistry::new();
/// // AcmeCloud::register(&registry)?;
/// ccm_app::CloudControllerManager::builder(registry)
///     .with_default_controllers()
///     .run_from_args()
///     .await
/// # }
/// ```
#[derive(Debug)]
pub struct CloudControllerManager;

impl CloudControllerManager {
    /// Start building a CCM over the providers in `registry`.
    pub fn builder(registry: impl Into<Arc<ProviderRegistry>>) -> CcmBuilder {
        CcmBuilder {
            registry: registry.into(),
            default_controllers: false,
            controllers: Vec::new(),
            defaults: CcmOptions::default(),
            command_name: names::MANAGER_NAME.to_owned(),
            version: env!("CARGO_PKG_VERSION").to_owned(),
            about: "A Kubernetes cloud controller manager: initializes Nodes from the cloud, deletes Nodes whose \
                    instances are gone, provisions load balancers for Services and configures pod routes."
                .to_owned(),
            client: None,
            service_account_connection: None,
            admin_listener: None,
            health_checks: Vec::new(),
            vendor: VendorSpec::default(),
            webhooks: Vec::new(),
        }
    }
}

/// Builds and runs a CCM; made by [`CloudControllerManager::builder`].
#[must_use = "a builder does nothing until run"]
#[derive(educe::Educe)]
#[educe(Debug)]
pub struct CcmBuilder {
    registry: Arc<ProviderRegistry>,
    default_controllers: bool,
    #[educe(Debug(ignore))]
    controllers: Vec<DescriptorFn>,
    defaults: CcmOptions,
    command_name: String,
    version: String,
    about: String,
    #[educe(Debug(ignore))]
    client: Option<kube::Client>,
    #[educe(Debug(ignore))]
    service_account_connection: Option<kube::Client>,
    admin_listener: Option<std::net::TcpListener>,
    #[educe(Debug(ignore))]
    health_checks: Vec<(String, HealthCheck)>,
    pub(super) vendor: VendorSpec,
    webhooks: Vec<WebhookDescriptor>,
}

impl CcmBuilder {
    /// Register the four standard controllers (cloud-node, cloud-node-lifecycle, service, route), configured from
    /// the flags, and, with the `doctor` feature, the doctor's bootstrap self-check (`node-bootstrap-selfcheck`).
    pub fn with_default_controllers(mut self) -> Self {
        self.default_controllers = true;
        self
    }

    /// Register a vendor controller. Its name and aliases become valid in `--controllers`; a descriptor marked
    /// [`disabled_by_default`](ControllerDescriptor::disabled_by_default) runs only when named there.
    pub fn register_controller(self, descriptor: ControllerDescriptor) -> Self {
        self.register_controller_with(move |_| descriptor.clone())
    }

    /// Register an admission webhook (`crate::webhook`): its name becomes valid in `--webhooks`, which enables it
    /// (none is enabled by default, as in Go); it is served on the webhook port.
    pub fn register_webhook(mut self, webhook: WebhookDescriptor) -> Self {
        self.webhooks.push(webhook);
        self
    }

    /// Register a vendor controller whose configuration depends on the resolved settings.
    pub fn register_controller_with<F>(mut self, make: F) -> Self
    where
        F: Fn(&CcmOptions) -> ControllerDescriptor + Send + Sync + 'static,
    {
        self.controllers.push(Arc::new(make));
        self
    }

    /// Add the vendor's own flags, the `clap::Args` type `A`, to the command line. They are listed in `--help`
    /// under the heading of `A` (`#[command(next_help_heading = "Acme")]`) or else [`crate::VENDOR_HELP_HEADING`], may
    /// read environment variables (`#[arg(env = "ACME_REGION")]`), and reach the provider factory as
    /// [`ProviderSettings::vendor_args`](ccm_core::ProviderSettings::vendor_args) and the controllers as
    /// `ctx.vendor.args::<A>()`. A bad value is a usage error (exit code 2) like a bad runtime flag; a flag named
    /// like a runtime flag is a [`StartupError::VendorExtension`].
    ///
    /// ```no_run
    /// # async fn demo(registry: ccm_core::ProviderRegistry) -> std::process::ExitCode {
    /// #[derive(Debug, Clone, clap::Args)]
    /// #[command(next_help_heading = "Acme")]
    /// struct AcmeArgs {
    ///     /// The Acme region to manage.
    ///     #[arg(long = "acme-region", env = "ACME_REGION", default_value = "eu-1")]
    ///     region: String,
    /// }
    ///
    /// #[derive(Debug, Default, serde::Deserialize)]
    /// #[serde(deny_unknown_fields, rename_all = "camelCase")]
    /// struct AcmeConfig {
    ///     api_endpoint: Option<String>,
    /// }
    ///
    /// // The factory: `settings.vendor_args::<AcmeArgs>()`, `settings.vendor_config::<AcmeConfig>()`.
    /// ccm_app::CloudControllerManager::builder(registry)
    ///     .with_default_controllers()
    ///     .with_vendor_args::<AcmeArgs>()
    ///     .with_vendor_config::<AcmeConfig>("acme") // `acme:` in the --config file
    ///     .run_from_args()
    ///     .await
    /// # }
    /// ```
    pub fn with_vendor_args<A: clap::Args + Send + Sync + 'static>(mut self) -> Self {
        self.vendor.set_args::<A>();
        self
    }

    /// Read the vendor's own section of the `--config` file, the top-level key `section` (for example the
    /// provider's name), into `C` (`C::default()` when the file has none). Reaches the provider factory as
    /// [`ProviderSettings::vendor_config`](ccm_core::ProviderSettings::vendor_config) and the controllers as
    /// `ctx.vendor.config::<C>()`. A bad section is a config-file error naming the section (exit code 1); use
    /// `#[serde(deny_unknown_fields)]` so misspelled keys are caught. See
    /// [`with_vendor_args`](Self::with_vendor_args) for an example.
    pub fn with_vendor_config<C>(mut self, section: &str) -> Self
    where
        C: serde::de::DeserializeOwned + Default + Send + Sync + 'static,
    {
        self.vendor.set_config::<C>(section);
        self
    }

    /// The default of `--cloud-provider` (so it may be omitted).
    pub fn with_default_provider(mut self, name: &str) -> Self {
        self.defaults.cloud_provider = name.to_owned();
        self
    }

    /// Change any default before flags and the config file are applied (for example a higher `kube_api_qps`).
    pub fn with_defaults(mut self, change: impl FnOnce(&mut CcmOptions)) -> Self {
        change(&mut self.defaults);
        self
    }

    /// The command name used in `--help`, user agents and logs (default `cloud-controller-manager`).
    pub fn with_command_name(mut self, name: &str) -> Self {
        self.command_name = name.to_owned();
        self
    }

    /// The version shown by `--version` and sent in user agents (default: this crate's version).
    pub fn with_version(mut self, version: &str) -> Self {
        self.version = version.to_owned();
        self
    }

    /// The description shown by `--help`.
    pub fn with_about(mut self, about: &str) -> Self {
        self.about = about.to_owned();
        self
    }

    /// Use this client instead of `--kubeconfig` / `--master` / in-cluster configuration (embedding, tests). Each
    /// controller still gets its own token bucket and user agent on top of it.
    pub fn with_client(mut self, client: kube::Client) -> Self {
        self.client = Some(client);
        self
    }

    /// With `--use-service-account-credentials`, send the controllers' requests over this client, which must
    /// carry no credentials of its own (each request gets the controller's ServiceAccount token). Needed with
    /// [`with_client`](Self::with_client); otherwise the connection of `--kubeconfig` / `--master` is used without
    /// its credentials.
    ///
    /// ```no_run
    /// # fn demo(registry: ccm_core::ProviderRegistry, main: kube::Client, config: kube::Config) -> Result<(), kube::Error> {
    /// // the same connection as `main`, without its credentials
    /// let mut bare_config = config.clone();
    /// bare_config.auth_info = kube::config::AuthInfo::default();
    /// let bare = kube::Client::try_from(bare_config)?;
    /// let builder = ccm_app::CloudControllerManager::builder(registry)
    ///     .with_default_controllers()
    ///     .with_client(main)
    ///     .with_service_account_connection(bare);
    /// # Ok(())
    /// # }
    /// ```
    pub fn with_service_account_connection(mut self, client: kube::Client) -> Self {
        self.service_account_connection = Some(client);
        self
    }

    /// Serve the admin endpoints on this already-bound listener instead of binding
    /// `--bind-address:--secure-port` (socket activation, tests binding port 0).
    pub fn with_admin_listener(mut self, listener: std::net::TcpListener) -> Self {
        self.admin_listener = Some(listener);
        self
    }

    /// Add a health check served at `/healthz/<name>`, `/livez/<name>` and `/readyz/<name>`.
    pub fn with_health_check(mut self, name: &str, check: HealthCheck) -> Self {
        self.health_checks.push((name.to_owned(), check));
        self
    }

    /// The clap command (flags, help text) of this CCM.
    pub fn command(&self) -> clap::Command {
        // After the vendor's flags: clap's derive gives the command the doc comment of the vendor's Args type as
        // its description, which must not replace the CCM's own.
        self.vendor
            .augment(
                Cli::command()
                    .name(self.command_name.clone())
                    .bin_name(self.command_name.clone())
                    .version(self.version.clone()),
            )
            .about(self.about.clone())
            .long_about(None::<&str>)
    }

    /// Parse a command line (the first item is the program name), read `--config`, apply the precedence
    /// defaults < file < flags, and validate. Nothing is started. The vendor's flags and config section are kept
    /// for the [`start`](Self::start) that follows.
    ///
    /// # Errors
    ///
    /// [`StartupError`] for unknown flags, bad values, an unusable config file or invalid settings.
    pub fn parse_args<I, T>(&self, args: I) -> Result<CcmOptions, StartupError>
    where
        I: IntoIterator<Item = T>,
        T: Into<OsString> + Clone,
    {
        self.vendor.check(&Cli::command())?;
        let matches = self
            .command()
            .try_get_matches_from(args)
            .map_err(StartupError::Args)?;
        let cli = Cli::from_arg_matches(&matches).map_err(StartupError::Args)?;
        let (file, section) = match &cli.config {
            Some(path) => self.vendor.load_file(path)?,
            None => (Settings::default(), None),
        };
        let vendor = self
            .vendor
            .parse(&matches, section)
            .map_err(StartupError::Args)?;
        let options = CcmOptions::resolve(&self.defaults, &file, &cli.settings);
        self.validate(&options)?;
        self.vendor.remember(vendor);
        Ok(options)
    }

    /// Check `options` against every rule, including the binary's controllers and providers; returns the
    /// controllers that will run, in order.
    ///
    /// # Errors
    ///
    /// [`StartupError::Invalid`] listing every violation, or [`StartupError::Catalog`].
    pub fn validate(
        &self,
        options: &CcmOptions,
    ) -> Result<Vec<ControllerDescriptor>, StartupError> {
        let mut errors = options.validate();
        let (provider, known) = (&options.cloud_provider, self.registry.names().join(", "));
        let reason = if provider == names::EXTERNAL_PROVIDER {
            Some(format!(
                "\"external\" means no provider runs in this process, but a cloud controller manager needs one; \
                 use one of: {known}"
            ))
        } else if !provider.is_empty() && !self.registry.is_registered(provider) {
            let name = provider.clone();
            Some(RegistryError::Unknown { name, known }.to_string())
        } else {
            None
        };
        if let Some(reason) = reason {
            errors.push(invalid("cloud-provider", reason));
        }
        // The controllers this binary knows under `options`, in start order.
        let mut descriptors = match self.default_controllers {
            true => crate::defaults::default_controllers(options),
            false => Vec::new(),
        };
        descriptors.extend(self.controllers.iter().map(|make| make(options)));
        let catalog = ControllerCatalog::from_descriptors(&descriptors)?;
        let enabled = catalog
            .enabled(&options.controllers)
            .unwrap_or_else(|unknown| {
                errors.push(unknown.into());
                Vec::new()
            });
        if self.default_controllers {
            errors.extend(crate::defaults::validate(options, &enabled));
        }
        match crate::webhook::enabled(&self.webhooks, &options.webhooks) {
            Ok(_) => {}
            Err(Ok(invalid)) => errors.push(invalid),
            Err(Err(registration)) => return Err(StartupError::Webhook(registration)),
        }
        if !errors.is_empty() {
            return Err(StartupError::Invalid(errors));
        }
        Ok(descriptors
            .into_iter()
            .filter(|d| enabled.contains(&d.name))
            .collect())
    }

    /// Parse the process's command line, set up logging and signal handling, run until SIGTERM/SIGINT or a fatal
    /// error, and return the exit code: 0 after a clean shutdown, 1 after an error (including lost leadership),
    /// clap's code for bad flags (2) and `--help` (0).
    pub async fn run_from_args(self) -> ExitCode {
        self.run_from(std::env::args_os()).await
    }

    /// [`run_from_args`](Self::run_from_args) with an explicit command line (the first item is the program
    /// name). With the `doctor` feature, `<command> doctor [...]` runs the chicken-and-egg doctor instead
    /// (`docs/doctor.md`).
    pub async fn run_from<I, T>(self, args: I) -> ExitCode
    where
        I: IntoIterator<Item = T>,
        T: Into<OsString> + Clone,
    {
        let args: Vec<OsString> = args.into_iter().map(Into::into).collect();
        #[cfg(feature = "doctor")]
        if args.get(1).is_some_and(|a| a == ccm_doctor::SUBCOMMAND) {
            let name = format!("{} {}", self.command_name, ccm_doctor::SUBCOMMAND);
            return ccm_doctor::run_from(&name, args.into_iter().skip(2)).await;
        }
        let options = match self.parse_args(args) {
            Ok(options) => options,
            Err(err) => {
                if let StartupError::Args(usage) = &err {
                    let _ = usage.print();
                } else {
                    eprintln!(
                        "{}: error: {}",
                        self.command_name,
                        ccm_core::error::report(&err)
                    );
                }
                return ExitCode::from(err.exit_code());
            }
        };
        crate::logging::init(&options);
        let shutdown = CancellationToken::new();
        let signals = tokio::spawn(handle_signals(shutdown.clone()));
        let command = self.command_name.clone();
        let result = self.run(options, shutdown).await;
        signals.abort();
        match result {
            Ok(()) => {
                tracing::info!(command = %command, "stopped");
                ExitCode::SUCCESS
            }
            Err(err) => {
                let error = ccm_core::error::report(&err);
                tracing::error!(command = %command, %error, "exiting with an error");
                ExitCode::FAILURE
            }
        }
    }

    /// Run with already parsed options until `shutdown` is cancelled or a fatal error. Logging and signals are
    /// the caller's business.
    ///
    /// # Errors
    ///
    /// [`RunError`] describing why the CCM stopped.
    pub async fn run(
        self,
        options: CcmOptions,
        shutdown: CancellationToken,
    ) -> Result<(), RunError> {
        self.start(options, shutdown).await?.wait().await
    }

    /// Start the CCM and return once the provider is created, the admin server listens and leader election runs;
    /// the controllers start when this replica leads. Cancel `shutdown` to stop it, then
    /// [`wait`](RunningCcm::wait).
    ///
    /// ```no_run
    /// # async fn demo(registry: ccm_core::ProviderRegistry) -> Result<(), ccm_app::RunError> {
    /// use tokio_util::sync::CancellationToken;
    ///
    /// let builder = ccm_app::CloudControllerManager::builder(registry).with_default_controllers();
    /// let options = builder.parse_args(["ccm", "--cloud-provider=fake", "--secure-port=0"])?;
    /// let shutdown = CancellationToken::new();
    /// let running = builder.start(options, shutdown.clone()).await?;
    /// shutdown.cancel();
    /// running.wait().await?;
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// # Errors
    ///
    /// [`RunError`] if the settings are invalid or the client, provider, admin server or leader election cannot
    /// be set up.
    pub async fn start(
        self,
        options: CcmOptions,
        shutdown: CancellationToken,
    ) -> Result<RunningCcm, RunError> {
        let plan = self.validate(&options)?;
        self.vendor.check(&Cli::command())?;
        let vendor = self.vendor.take(&self.command_name)?;
        note_compatibility_settings(&options);
        tracing::info!(
            command = %self.command_name,
            version = %self.version,
            provider = %options.cloud_provider,
            controllers = ?plan.iter().map(|d| d.name.as_str()).collect::<Vec<_>>(),
            leader_elect = options.leader_elect,
            "starting"
        );
        let (status_tx, status_rx) = watch::channel(CcmStatus::Starting);

        let agent_prefix = user_agent_prefix(&self.command_name, &self.version);
        let mut clients = assemble::clients(
            &options,
            self.client,
            self.service_account_connection,
            &agent_prefix,
        )
        .await?;
        // With `--leader-elect`, no controller write, Event write or cloud call is sent unless the lease was
        // confirmed recently (see `ccm_core::fence`); without it the fence is always open.
        let fence = if options.leader_elect {
            LeadershipFence::new()
        } else {
            LeadershipFence::unfenced()
        };

        // The cloud initializer runs in every replica, before leader election (Go parity).
        let background = BackgroundTasks::new(shutdown.clone());
        // Cancels the background tasks the factory started if start-up fails; disarmed once it succeeded.
        let stop_on_failure = background.shutdown_token().drop_guard();
        let (provider, reload_watch) = create_provider(
            &self.registry,
            &options,
            clients.factory.client("cloud-provider"),
            vendor.clone(),
            background.clone(),
        )
        .await?;
        if !provider.has_cluster_id() {
            if options.allow_untagged_cloud {
                tracing::warn!(
                    "detected a cluster without a cluster ID; --allow-untagged-cloud lets it start"
                );
            } else {
                return Err(RunError::NoClusterId);
            }
        }

        let metrics = SharedRegistry::new();
        let manager_metrics = ControllerManagerMetrics::register(&metrics, names::MANAGER_NAME);
        clients.factory.register_metrics(&metrics);
        let created = provider.clone();
        let stack =
            assemble::provider_stack(provider, &options, fence.clone(), &metrics, &shutdown)?;
        // In every replica, with the provider as created and a client without the leadership fence (Go parity).
        let webhook = crate::webhook::start_from_options(
            &options,
            &self.webhooks,
            WebhookContext::new(created, clients.factory.client(WEBHOOK_CLIENT)),
            &metrics,
            &background,
        )
        .await
        .map_err(StartupError::Webhook)?;
        let identity = instance_name();
        let events = EventSink::new().with_metrics(&metrics);
        let reload_client = clients.factory.client("cloud-config-reload");
        start_reload_watcher(
            reload_watch,
            stack.provider.clone(),
            &options,
            &background,
            (&events, reload_client, &identity),
            &metrics,
        );
        let informers_slot: Arc<OnceLock<SharedInformers>> = Arc::default();
        let checks = assemble::health_checks(self.health_checks, &shutdown, &informers_slot);

        // Made before the fence is installed: the Lease requests are never fenced.
        let lease_client = options
            .leader_elect
            .then(|| clients.factory.client("leader-election"));
        clients.factory = clients.factory.with_fence(fence.clone());
        let leader = lease_client
            .map(|lease_client| {
                assemble::leader_elector(
                    &options,
                    lease_client,
                    &clients.factory,
                    fence,
                    (&metrics, &events, &identity),
                )
            })
            .transpose()?;

        let admin = crate::admin::start_from_options(
            &options,
            clients.factory.limits(),
            self.admin_listener,
            &checks,
            &metrics,
        )
        .await?;

        let leader = leader.map(|elector| assemble::campaign(elector, &checks));
        let leader_identity = leader.as_ref().map(|(h, _)| h.identity().to_owned());

        let supervisor = Supervisor {
            options,
            plan,
            clients,
            stack,
            metrics: metrics.clone(),
            manager_metrics,
            checks,
            status: status_tx,
            shutdown,
            instance: identity,
            informers_slot,
            events,
            vendor,
            background,
        };
        stop_on_failure.disarm();
        let admin_addr = admin.as_ref().map(|a| a.local_addr);
        let admin_cert_pem = admin.as_ref().map(|a| a.cert_pem.clone());
        let task = tokio::spawn(supervisor.supervise(leader, admin));
        Ok(RunningCcm {
            admin_addr,
            admin_cert_pem,
            webhook,
            status: status_rx,
            metrics,
            identity: leader_identity,
            task,
        })
    }
}

fn note_compatibility_settings(options: &CcmOptions) {
    if options.use_service_account_credentials {
        tracing::info!(
            namespace = crate::service_accounts::SERVICE_ACCOUNT_NAMESPACE,
            "--use-service-account-credentials: each controller acts as its own ServiceAccount"
        );
    }
    if options.allocate_node_cidrs {
        tracing::info!(
            "--allocate-node-cidrs is accepted for compatibility; the CCM does not allocate node CIDRs"
        );
    }
    if !options.node_sync_period.is_zero() {
        tracing::warn!("--node-sync-period is deprecated and has no effect");
    }
    if options.enable_leader_migration {
        tracing::warn!(
            "--enable-leader-migration: in-tree cloud providers were removed in Kubernetes 1.31, so \
             kube-controller-manager runs no cloud controllers and there is nothing to migrate; this CCM uses its \
             own leader election only"
        );
    }
    if !options.external_cloud_volume_plugin.is_empty() {
        tracing::warn!(
            "--external-cloud-volume-plugin is accepted for compatibility and has no effect"
        );
    }
}

/// The replica's name for events: `$POD_NAME`, else the host name.
fn instance_name() -> String {
    std::env::var(ccm_leaderelection::POD_NAME_ENV)
        .ok()
        .filter(|p| !p.trim().is_empty())
        .or_else(|| {
            hostname::get()
                .ok()
                .map(|h| h.to_string_lossy().into_owned())
        })
        .unwrap_or_else(|| names::MANAGER_NAME.to_owned())
}

#[cfg(test)]
mod tests {
    use std::io::Write as _;
    use std::time::Duration;

    use super::*;
    use crate::app::test_support::{Named, builder, error, parse};
    use ccm_core::provider::CloudProvider;

    #[test]
    fn defaults_with_only_the_provider() {
        let o = parse(&["--cloud-provider=fake"]).unwrap();
        assert_eq!(
            o,
            CcmOptions {
                cloud_provider: "fake".into(),
                ..CcmOptions::default()
            }
        );
    }

    #[test]
    fn every_go_flag_is_accepted() {
        let o = parse(&[
            "--cloud-provider",
            "fake",
            "--cloud-config=/etc/cloud.conf",
            "--kubeconfig=/etc/kubeconfig",
            "--master=https://10.0.0.1:6443",
            "--controllers=*,-route",
            "--leader-elect=false",
            "--leader-elect-lease-duration=30s",
            "--leader-elect-renew-deadline=20s",
            "--leader-elect-retry-period=5s",
            "--leader-elect-resource-lock=leases",
            "--leader-elect-resource-name=my-ccm",
            "--leader-elect-resource-namespace=ccm-system",
            "--cluster-name=prod",
            "--cluster-cidr=10.244.0.0/16",
            "--configure-cloud-routes=false",
            "--allocate-node-cidrs=true",
            "--cidr-allocator-type=RangeAllocator",
            "--concurrent-node-syncs=5",
            "--concurrent-node-status-updates=3",
            "--concurrent-service-syncs=4",
            "--node-monitor-period=10s",
            "--node-status-update-frequency=1m",
            "--route-reconciliation-period=30s",
            "--min-resync-period=1h",
            "--kube-api-qps=100",
            "--kube-api-burst=200",
            "--kube-api-content-type=application/json",
            "--secure-port=0",
            "--bind-address=127.0.0.1",
            "--controller-start-interval=1s",
            "--use-service-account-credentials=true",
            "--allow-untagged-cloud",
            "--node-sync-period=0s",
            "--external-cloud-volume-plugin=",
            "--v=4",
            "--logging-format=json",
            "--authentication-kubeconfig=/etc/authn.kubeconfig",
            "--authentication-skip-lookup",
            "--authentication-tolerate-lookup-failure=true",
            "--authentication-token-webhook-cache-ttl=1m",
            "--client-ca-file=/etc/ca.crt",
            "--requestheader-client-ca-file=/etc/front-proxy-ca.crt",
            "--requestheader-allowed-names=front-proxy-client,aggregator",
            "--requestheader-username-headers=X-Remote-User",
            "--requestheader-group-headers=X-Remote-Group",
            "--requestheader-extra-headers-prefix=X-Remote-Extra-",
            "--authorization-kubeconfig=/etc/authz.kubeconfig",
            "--authorization-always-allow-paths=/healthz,/metrics/*",
            "--authorization-webhook-cache-authorized-ttl=5m",
            "--authorization-webhook-cache-unauthorized-ttl=30s",
            "--tls-min-version=VersionTLS13",
            "--tls-cipher-suites=TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,TLS_AES_128_GCM_SHA256",
        ])
        .unwrap();
        assert!(o.authentication_skip_lookup && o.authentication_tolerate_lookup_failure);
        assert_eq!(
            o.authentication_token_webhook_cache_ttl,
            Duration::from_secs(60)
        );
        assert_eq!(
            o.requestheader_allowed_names,
            vec!["front-proxy-client", "aggregator"]
        );
        assert_eq!(
            o.authorization_always_allow_paths,
            vec!["/healthz", "/metrics/*"]
        );
        assert_eq!(
            o.authorization_webhook_cache_authorized_ttl,
            Duration::from_secs(300)
        );
        assert_eq!(
            o.authorization_webhook_cache_unauthorized_ttl,
            Duration::from_secs(30)
        );
        assert_eq!(o.tls_min_version.as_deref(), Some("VersionTLS13"));
        assert_eq!(o.tls_cipher_suites.len(), 2);
        assert_eq!(
            o.cloud_config.as_deref(),
            Some(std::path::Path::new("/etc/cloud.conf"))
        );
        assert_eq!(o.master.as_deref(), Some("https://10.0.0.1:6443"));
        assert_eq!(o.controllers, vec!["*", "-route"]);
        assert!(!o.leader_elect);
        assert_eq!(o.leader_elect_lease_duration, Duration::from_secs(30));
        assert_eq!(o.leader_elect_resource_namespace, "ccm-system");
        assert_eq!(o.cluster_name, "prod");
        assert!(!o.configure_cloud_routes);
        assert!(o.allocate_node_cidrs);
        assert_eq!(o.concurrent_node_syncs, 5);
        assert_eq!(o.concurrent_node_status_updates, 3);
        assert_eq!(o.concurrent_service_syncs, 4);
        assert_eq!(o.node_status_update_frequency, Duration::from_secs(60));
        assert_eq!(o.min_resync_period, Duration::from_secs(3600));
        assert_eq!(o.kube_api_qps, 100.0);
        assert_eq!(o.kube_api_burst, 200);
        assert_eq!(o.secure_port, 0);
        assert_eq!(o.controller_start_interval, Duration::from_secs(1));
        assert!(o.use_service_account_credentials);
        assert!(o.allow_untagged_cloud);
        assert_eq!(o.verbosity, 4);
        assert_eq!(o.logging_format, crate::LogFormat::Json);
    }

    #[test]
    fn go_style_booleans_and_verbosity() {
        assert!(
            parse(&["--cloud-provider=fake", "--leader-elect"])
                .unwrap()
                .leader_elect
        );
        assert!(
            !parse(&["--cloud-provider=fake", "--leader-elect=f"])
                .unwrap()
                .leader_elect
        );
        // as with Go's flag package, a separate value is not the flag's value
        assert!(
            error(&["--cloud-provider=fake", "--leader-elect", "false"])
                .contains("unexpected argument")
        );
        assert!(
            error(&["--cloud-provider=fake", "--leader-elect=nope"]).contains("invalid boolean")
        );
        assert_eq!(
            parse(&["--cloud-provider=fake", "-v", "5"])
                .unwrap()
                .verbosity,
            5
        );
        assert_eq!(
            parse(&["--cloud-provider=fake", "-v=6"]).unwrap().verbosity,
            6
        );
    }

    #[test]
    fn controllers_flag_forms() {
        let o = parse(&["--cloud-provider=fake", "--controllers", "-route"]).unwrap();
        assert_eq!(o.controllers, vec!["-route"]);
        let o = parse(&[
            "--cloud-provider=fake",
            "--controllers=service",
            "--controllers=route",
        ])
        .unwrap();
        assert_eq!(o.controllers, vec!["service", "route"]);
        let o = parse(&["--cloud-provider=fake", "--controllers="]).unwrap();
        assert!(o.controllers.is_empty());
        let enabled: Vec<String> = builder()
            .validate(
                &parse(&["--cloud-provider=fake", "--controllers=cloud-node,service"]).unwrap(),
            )
            .unwrap()
            .into_iter()
            .map(|d| d.name)
            .collect();
        assert_eq!(enabled, ["cloud-node-controller", "service-lb-controller"]);
    }

    #[test]
    fn bad_input_is_rejected_before_anything_starts() {
        let unknown = parse(&["--cloud-provider=fake", "--no-such-flag"]).unwrap_err();
        assert!(matches!(unknown, StartupError::Args(_)));
        assert_eq!(unknown.exit_code(), 2);
        assert!(unknown.to_string().contains("--no-such-flag"), "{unknown}");

        let message = error(&["--cloud-provider=fake", "--node-monitor-period=5 minutes"]);
        assert!(
            message.contains("invalid duration \"5 minutes\""),
            "{message}"
        );
        let message = error(&["--cloud-provider=fake", "--node-monitor-period=5"]);
        assert!(message.contains("missing unit"), "{message}");

        // the secure port's flags
        for (flag, expected) in [
            (
                "--authentication-token-webhook-cache-ttl=10",
                "missing unit",
            ),
            (
                "--authorization-webhook-cache-authorized-ttl=-1s",
                "--authorization-webhook-cache-authorized-ttl",
            ),
            (
                "--tls-min-version=VersionTLS11",
                "invalid --tls-min-version: VersionTLS11 is not supported: the secure port serves TLS 1.2 and \
                 1.3 only; use VersionTLS12 or VersionTLS13",
            ),
            (
                "--tls-min-version=1.2",
                "invalid --tls-min-version: unknown TLS version \"1.2\"",
            ),
            (
                "--tls-cipher-suites=TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,TLS_FOO",
                "invalid --tls-cipher-suites: unknown cipher suite \"TLS_FOO\"",
            ),
            (
                "--tls-cipher-suites=TLS_RSA_WITH_AES_256_CBC_SHA",
                "invalid --tls-cipher-suites: TLS_RSA_WITH_AES_256_CBC_SHA is not implemented by rustls",
            ),
            (
                "--authorization-always-allow-paths=/a*b",
                "invalid --authorization-always-allow-paths: only a trailing * is allowed in \"/a*b\"",
            ),
        ] {
            let message = error(&["--cloud-provider=fake", flag]);
            assert!(message.contains(expected), "{flag}: {message}");
        }

        let message = error(&["--cloud-provider=fake", "--controllers=*,bogus"]);
        assert!(
            message.contains("\"bogus\" is not in the list of known controllers"),
            "{message}"
        );

        let message = error(&[]);
        assert!(
            message.contains("--cloud-provider cannot be empty"),
            "{message}"
        );
        let message = error(&["--cloud-provider=acme"]);
        assert!(
            message.contains("unknown cloud provider \"acme\"; registered providers: fake"),
            "{message}"
        );
        let message = error(&["--cloud-provider=external"]);
        assert!(
            message.contains("\"external\" means no provider"),
            "{message}"
        );

        let message = error(&["--cloud-provider=fake", "--config=/nonexistent/ccm.yaml"]);
        assert!(
            message.starts_with("cannot read config file /nonexistent/ccm.yaml"),
            "{message}"
        );

        let message = error(&["--cloud-provider=fake", "--kube-api-qps=lots"]);
        assert!(message.contains("--kube-api-qps"), "{message}");
        let message = error(&["--cloud-provider=fake", "--secure-port=70000"]);
        assert!(message.contains("--secure-port"), "{message}");
        let message = error(&["--cloud-provider=fake", "--cluster-cidr=10.0.0.0/33"]);
        assert!(message.contains("invalid --cluster-cidr"), "{message}");
        let message = error(&["--cloud-provider=fake", "--leader-elect-renew-deadline=20s"]);
        assert!(
            message.contains("must be greater than the renew deadline"),
            "{message}"
        );
        let message = error(&["--cloud-provider=fake", "positional"]);
        assert!(message.contains("unexpected argument"), "{message}");
    }

    #[test]
    fn help_and_version_are_not_errors() {
        let help = parse(&["--help"]).unwrap_err();
        assert_eq!(help.exit_code(), 0);
        let text = help.to_string();
        for flag in [
            "--cloud-provider",
            "--kube-api-qps",
            "--leader-elect-lease-duration",
            "--config",
        ] {
            assert!(text.contains(flag), "{flag} missing from --help");
        }
        assert_eq!(parse(&["--version"]).unwrap_err().exit_code(), 0);
    }

    #[test]
    fn config_file_precedence() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ccm.yaml");
        let mut file = std::fs::File::create(&path).unwrap();
        writeln!(
            file,
            "cloudProvider: fake\nkubeApiQps: 50\nkubeApiBurst: 60\nclusterName: from-file\nnodeMonitorPeriod: 7s"
        )
        .unwrap();
        let config = format!("--config={}", path.display());
        let o = builder()
            .parse_args(["ccm", &config, "--kube-api-qps=100", "--kube-api-burst=30"])
            .unwrap();
        assert_eq!(o.cloud_provider, "fake");
        assert_eq!(o.kube_api_qps, 100.0, "an explicit flag beats the file");
        assert_eq!(o.kube_api_burst, 30, "even when it equals the default");
        assert_eq!(o.cluster_name, "from-file");
        assert_eq!(o.node_monitor_period, Duration::from_secs(7));
        assert_eq!(o.node_status_update_frequency, Duration::from_secs(300));

        std::fs::write(&path, "cloudProvider: fake\nkubeAPIQPS: 5\n").unwrap();
        let err = builder().parse_args(["ccm", &config]).unwrap_err();
        assert!(matches!(err, StartupError::ConfigFile(_)));
        let message = err.to_string();
        assert!(message.contains(&path.display().to_string()), "{message}");
        assert!(message.contains("\"kubeAPIQPS\""), "{message}");
    }

    #[test]
    fn cloud_budget_and_cache_flags_and_file() {
        let o = parse(&["--cloud-provider=fake"]).unwrap();
        assert_eq!(o.cloud_instance_cache_ttl, Duration::from_secs(30));
        assert_eq!(o.cloud_budget(), ccm_core::budget::CloudBudget::default());

        let o = parse(&[
            "--cloud-provider=fake",
            "--cloud-api-qps=45",
            "--cloud-api-burst=40",
            "--cloud-api-operation-limit=create=2:4",
            "--cloud-api-operation-limit",
            "list-routes=0.5",
            "--cloud-instance-cache-ttl=0s",
        ])
        .unwrap();
        let budget = o.cloud_budget();
        assert_eq!((budget.qps, budget.burst), (45.0, 40));
        assert_eq!(
            (
                budget.operations["create"].qps,
                budget.operations["create"].burst
            ),
            (2.0, 4)
        );
        assert_eq!(budget.operations["list-routes"].burst, 1);
        assert_eq!(o.cloud_instance_cache_ttl, Duration::ZERO);
        // the effective settings show the limits in the config file's form
        let settings = o.to_settings();
        assert_eq!(settings.cloud_api_operation_limits.unwrap().len(), 2);
        assert!(settings.cloud_api_operation_limit.is_none());

        for (flag, expected) in [
            (
                "--cloud-api-operation-limit=creat=2:4",
                "unknown cloud operation \"creat\"",
            ),
            (
                "--cloud-api-operation-limit=create",
                "expected OPERATION=QPS:BURST",
            ),
            (
                "--cloud-api-operation-limit=create=fast",
                "the rate \"fast\" is not a number",
            ),
            (
                "--cloud-api-operation-limit=create=-1:2",
                "is not a number >= 0",
            ),
            (
                "--cloud-api-operation-limit=create=1:many",
                "the burst \"many\"",
            ),
            (
                "--cloud-api-operation-limit=create=1:0",
                "burst must be at least 1",
            ),
            ("--cloud-instance-cache-ttl=soon", "soon"),
        ] {
            let message = error(&["--cloud-provider=fake", flag]);
            assert!(message.contains(expected), "{flag}: {message}");
        }

        // the file's map, then the flags on top (per operation)
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ccm.yaml");
        std::fs::write(
            &path,
            "cloudProvider: fake\ncloudApiQps: 10\ncloudInstanceCacheTtl: 1m\ncloudApiOperationLimits:\n  \
             create: {qps: 1, burst: 1}\n  update: {qps: 3, burst: 3}\n",
        )
        .unwrap();
        let config = format!("--config={}", path.display());
        let o = builder()
            .parse_args(["ccm", &config, "--cloud-api-operation-limit=create=5:10"])
            .unwrap();
        let budget = o.cloud_budget();
        assert_eq!(budget.qps, 10.0);
        assert_eq!(budget.operations["create"].burst, 10, "the flag wins");
        assert_eq!(
            budget.operations["update"].burst, 3,
            "the file's other limits stay"
        );
        assert_eq!(o.cloud_instance_cache_ttl, Duration::from_secs(60));
    }

    #[test]
    fn vendor_defaults_and_controllers() {
        let registry = ProviderRegistry::new();
        registry
            .register("acme", |_| async {
                Ok(Arc::new(Named) as Arc<dyn CloudProvider>)
            })
            .unwrap();
        let builder = CloudControllerManager::builder(registry)
            .with_default_provider("acme")
            .with_defaults(|o| o.kube_api_qps = 40.0.into())
            .with_default_controllers()
            .register_controller(
                ControllerDescriptor::new("tagging-controller", |_| Ok(None))
                    .with_aliases(&["tagging"])
                    .disabled_by_default(),
            )
            .register_controller_with(|o: &CcmOptions| {
                let cluster = o.cluster_name.clone();
                ControllerDescriptor::new(format!("{cluster}-extra"), |_| Ok(None))
            });
        let o = builder.parse_args(["ccm"]).unwrap();
        assert_eq!(o.cloud_provider, "acme");
        assert_eq!(o.kube_api_qps, 40.0);
        let names = |o: &CcmOptions| -> Vec<String> {
            builder
                .validate(o)
                .unwrap()
                .into_iter()
                .map(|d| d.name)
                .collect()
        };
        let mut expected = vec![
            "cloud-node-controller",
            "cloud-node-lifecycle-controller",
            "service-lb-controller",
            "node-route-controller",
        ];
        if cfg!(feature = "doctor") {
            expected.push("node-bootstrap-selfcheck");
        }
        expected.push("kubernetes-extra");
        assert_eq!(names(&o), expected);
        let o = builder
            .parse_args(["ccm", "--controllers=tagging,-route,*"])
            .unwrap();
        assert!(names(&o).contains(&"tagging-controller".to_owned()));
        assert!(!names(&o).contains(&"node-route-controller".to_owned()));

        let clash = CloudControllerManager::builder(ProviderRegistry::new())
            .with_default_provider("x")
            .with_default_controllers()
            .register_controller(
                ControllerDescriptor::new("mine", |_| Ok(None)).with_aliases(&["service"]),
            );
        let err = clash.validate(&CcmOptions::default()).unwrap_err();
        assert!(matches!(err, StartupError::Catalog(_)), "{err}");
    }

    #[tokio::test]
    async fn run_from_reports_bad_input_with_a_non_zero_exit_code() {
        assert_eq!(
            builder().run_from(["ccm", "--bogus"]).await,
            ExitCode::from(2)
        );
        assert_eq!(builder().run_from(["ccm"]).await, ExitCode::from(1));
        assert_eq!(
            builder()
                .run_from(["ccm", "--cloud-provider=fake", "--controllers=nope"])
                .await,
            ExitCode::from(1)
        );
        assert_eq!(
            builder().run_from(["ccm", "--help"]).await,
            ExitCode::SUCCESS
        );
    }
}
