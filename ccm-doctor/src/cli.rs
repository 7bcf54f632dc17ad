//! The `doctor` command line: [`DoctorArgs`] (a `clap::Args` to embed as a subcommand) and [`run`].

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use crate::cluster::{DEFAULT_NAMESPACE, DoctorError, DoctorOptions, connect, diagnose_cluster};
use crate::manifest::{WorkloadFilter, lint_manifest_file};
use crate::report::{EXIT_DOCTOR_FAILED, Report};
use crate::selector::{LabelSelector, parse_selector_arg};
use ccm_core::duration::parse_go_duration;

/// How to print the report.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum OutputFormat {
    /// For people.
    #[default]
    Text,
    /// For tools (see `docs/doctor.md` for the schema).
    Json,
}

/// Diagnose why nodes stay uninitialized or the cloud controller manager cannot start (the "chicken and egg"
/// problem), in a live cluster or, with `--manifest`, in a Deployment or DaemonSet manifest.
///
/// Exit status: 0 healthy, 1 warnings, 2 errors, 3 the doctor could not run.
///
/// ```
/// use clap::Parser;
/// use ccm_doctor::DoctorArgs;
///
/// #[derive(Parser)]
/// struct Cli {
///     #[command(flatten)]
///     doctor: DoctorArgs,
/// }
///
/// let cli = Cli::parse_from(["doctor", "--uninitialized-threshold", "5m", "--output", "json"]);
/// assert_eq!(cli.doctor.uninitialized_threshold.as_secs(), 300);
/// ```
#[derive(Debug, Clone, clap::Args)]
pub struct DoctorArgs {
    /// The kubeconfig file (default: $KUBECONFIG, ~/.kube/config, or the in-cluster service account).
    #[arg(long, value_name = "FILE")]
    pub kubeconfig: Option<PathBuf>,

    /// The kubeconfig context to use (default: its current context).
    #[arg(long, value_name = "NAME")]
    pub context: Option<String>,

    /// Lint this Deployment or DaemonSet manifest (YAML, several documents allowed; `-` reads standard input)
    /// instead of examining a cluster.
    #[arg(long, value_name = "FILE")]
    pub manifest: Option<PathBuf>,

    /// The CCM's namespace.
    #[arg(long, short = 'n', value_name = "NAMESPACE", default_value = DEFAULT_NAMESPACE)]
    pub namespace: String,

    /// The name of the CCM Deployment or DaemonSet. Without this and --workload-selector the doctor looks for
    /// the name `cloud-controller-manager` and the label `k8s-app=cloud-controller-manager`; in lint mode it
    /// checks every Deployment and DaemonSet of the manifest.
    #[arg(long, value_name = "NAME")]
    pub workload: Option<String>,

    /// A label selector for the CCM Deployment or DaemonSet (its pods are found by its own selector and by
    /// this one).
    #[arg(long, value_name = "SELECTOR", value_parser = parse_selector_arg)]
    pub workload_selector: Option<LabelSelector>,

    /// Only examine the nodes with these labels.
    #[arg(long, value_name = "SELECTOR", value_parser = parse_selector_arg)]
    pub node_selector: Option<LabelSelector>,

    /// A label selector for the CNI's pods (default: the pods of the DaemonSets calico-node, canal, cilium,
    /// kube-flannel-ds, flannel, weave-net, kube-router and antrea-agent).
    #[arg(long, value_name = "SELECTOR", value_parser = parse_selector_arg)]
    pub cni_selector: Option<LabelSelector>,

    /// Look for the CNI only in this namespace (default: all namespaces).
    #[arg(long, value_name = "NAMESPACE")]
    pub cni_namespace: Option<String>,

    /// The namespace of the leader-election Lease (default: the CCM's --leader-elect-resource-namespace, else
    /// kube-system).
    #[arg(long, value_name = "NAMESPACE")]
    pub lease_namespace: Option<String>,

    /// The name of the leader-election Lease (default: the CCM's --leader-elect-resource-name, else
    /// cloud-controller-manager).
    #[arg(long, value_name = "NAME")]
    pub lease_name: Option<String>,

    /// How long a node may carry the uninitialized taint before it is an error (Go duration: 90s, 2m, 1h).
    #[arg(long, value_name = "DURATION", default_value = "2m", value_parser = parse_go_duration)]
    pub uninitialized_threshold: Duration,

    /// How long a live run may take (Go duration).
    #[arg(long, value_name = "DURATION", default_value = "30s", value_parser = parse_go_duration)]
    pub timeout: Duration,

    /// The output format.
    #[arg(long, short = 'o', value_enum, default_value_t = OutputFormat::Text)]
    pub output: OutputFormat,
}

impl DoctorArgs {
    /// The live-run options these flags describe.
    pub fn options(&self) -> DoctorOptions {
        DoctorOptions {
            namespace: self.namespace.clone(),
            workload: self.workload.clone(),
            workload_selector: self.workload_selector.clone(),
            node_selector: self.node_selector.clone(),
            cni_selector: self.cni_selector.clone(),
            cni_namespace: self.cni_namespace.clone(),
            lease_namespace: self.lease_namespace.clone(),
            lease_name: self.lease_name.clone(),
            uninitialized_threshold: self.uninitialized_threshold,
            timeout: self.timeout,
        }
    }

    /// The lint-mode filter these flags describe.
    pub fn workload_filter(&self) -> WorkloadFilter {
        WorkloadFilter {
            name: self.workload.clone(),
            selector: self.workload_selector.clone(),
        }
    }

    /// Render `report` in the chosen format.
    pub fn render(&self, report: &Report) -> String {
        match self.output {
            OutputFormat::Text => report.render_text(),
            OutputFormat::Json => {
                let mut json = report.render_json();
                json.push('\n');
                json
            }
        }
    }

    /// Render a failure of the doctor itself in the chosen format (JSON: `{"status": "failed", "error": ...}`).
    pub fn render_failure(&self, error: &DoctorError) -> String {
        match self.output {
            OutputFormat::Text => format!("ccm doctor: {error}\n"),
            OutputFormat::Json => {
                let value = serde_json::json!({
                    "status": "failed",
                    "exitCode": EXIT_DOCTOR_FAILED,
                    "error": error.to_string(),
                });
                format!("{value:#}\n")
            }
        }
    }
}

/// Lint the manifest (with `--manifest`) or examine the cluster, and return the report.
///
/// # Errors
/// [`DoctorError`] when the manifest or the cluster cannot be read.
pub async fn execute(args: &DoctorArgs) -> Result<Report, DoctorError> {
    if let Some(path) = &args.manifest {
        return Ok(lint_manifest_file(path, &args.workload_filter())?);
    }
    let options = args.options();
    let (client, server) = tokio::time::timeout(
        options.timeout,
        connect(args.kubeconfig.as_deref(), args.context.as_deref()),
    )
    .await
    .map_err(|_| DoctorError::Timeout {
        server: "(kubeconfig)".to_owned(),
        timeout: options.timeout,
    })??;
    diagnose_cluster(client, &server, &options).await
}

/// The `doctor` command: run [`execute`], print the report on standard output (or the failure: on standard
/// error for text, on standard output for JSON) and return the exit status (0 healthy, 1 warnings, 2 errors, 3
/// the doctor could not run).
///
/// ```no_run
/// use clap::Parser;
///
/// #[derive(Parser)]
/// enum Command {
///     /// Diagnose node initialization problems.
///     Doctor(ccm_doctor::DoctorArgs),
/// }
///
/// #[tokio::main]
/// async fn main() -> std::process::ExitCode {
///     match Command::parse() {
///         Command::Doctor(args) => ccm_doctor::run(args).await,
///     }
/// }
/// ```
pub async fn run(args: DoctorArgs) -> ExitCode {
    match execute(&args).await {
        Ok(report) => {
            print!("{}", args.render(&report));
            report.process_exit_code()
        }
        Err(error) => {
            let text = args.render_failure(&error);
            match args.output {
                OutputFormat::Text => eprint!("{text}"),
                OutputFormat::Json => print!("{text}"),
            }
            ExitCode::from(EXIT_DOCTOR_FAILED)
        }
    }
}

/// The subcommand name a CCM binary dispatches to [`run_from`].
pub const SUBCOMMAND: &str = "doctor";

#[derive(Debug, clap::Parser)]
struct DoctorCommand {
    #[command(flatten)]
    doctor: DoctorArgs,
}

/// The `doctor` command as a standalone clap command named `bin_name` (for `--help` and usage lines).
pub fn command(bin_name: &str) -> clap::Command {
    use clap::CommandFactory as _;
    DoctorCommand::command()
        .name(bin_name.to_owned())
        .bin_name(bin_name.to_owned())
        .about(
            "Diagnose why nodes stay uninitialized or the cloud controller manager cannot start (the \
             chicken-and-egg problem), in a live cluster or, with --manifest, in a manifest. Exit status: 0 \
             healthy, 1 warnings, 2 errors, 3 the doctor could not run.",
        )
}

/// Parse the doctor's flags (`args` without the program name or subcommand); `bin_name` names the command in
/// help and errors (for example `my-ccm doctor`).
///
/// # Errors
/// clap's error for unknown flags or bad values, and for `--help` (print it with [`clap::Error::print`]).
pub fn parse_from<I, T>(bin_name: &str, args: I) -> Result<DoctorArgs, clap::Error>
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    use clap::FromArgMatches as _;
    let argv =
        std::iter::once(std::ffi::OsString::from(bin_name)).chain(args.into_iter().map(Into::into));
    let matches = command(bin_name).try_get_matches_from(argv)?;
    DoctorCommand::from_arg_matches(&matches).map(|c| c.doctor)
}

/// Parse the doctor's flags and [`run`] it: the whole `doctor` subcommand for a CCM binary, which hands over the
/// arguments after `doctor`. `--help` prints the help and returns 0; bad flags print the error and return 2.
///
/// ```no_run
/// # async fn main_of_a_ccm() -> std::process::ExitCode {
/// let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
/// if args.get(1).is_some_and(|a| a == ccm_doctor::cli::SUBCOMMAND) {
///     return ccm_doctor::cli::run_from("my-ccm doctor", args.into_iter().skip(2)).await;
/// }
/// // ... run the CCM
/// # std::process::ExitCode::SUCCESS
/// # }
/// ```
pub async fn run_from<I, T>(bin_name: &str, args: I) -> ExitCode
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    match parse_from(bin_name, args) {
        Ok(args) => run(args).await,
        Err(err) => {
            let _ = err.print();
            ExitCode::from(u8::try_from(err.exit_code()).unwrap_or(2))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser, Debug)]
    struct Cli {
        #[command(flatten)]
        doctor: DoctorArgs,
    }

    fn parse(args: &[&str]) -> Result<DoctorArgs, clap::Error> {
        Cli::try_parse_from(std::iter::once("doctor").chain(args.iter().copied())).map(|c| c.doctor)
    }

    #[test]
    fn defaults() {
        let args = parse(&[]).unwrap();
        let options = args.options();
        assert_eq!(options, DoctorOptions::default());
        assert_eq!(options.namespace, "kube-system");
        assert_eq!(options.lease_namespace, None);
        assert_eq!(options.lease_name, None);
        assert_eq!(options.uninitialized_threshold, Duration::from_secs(120));
        assert_eq!(options.timeout, Duration::from_secs(30));
        assert_eq!(args.output, OutputFormat::Text);
        assert!(args.workload_filter().is_empty());
        let (name, selector) = options.effective_workload_query();
        assert_eq!(name.as_deref(), Some("cloud-controller-manager"));
        assert_eq!(
            selector.map(|s| s.to_string()).as_deref(),
            Some("k8s-app=cloud-controller-manager")
        );
    }

    #[test]
    fn every_flag() {
        let args = parse(&[
            "--kubeconfig",
            "/tmp/kc",
            "--context",
            "prod",
            "-n",
            "ccm",
            "--workload",
            "my-ccm",
            "--workload-selector",
            "app=ccm",
            "--node-selector",
            "pool=a",
            "--cni-selector",
            "k8s-app=calico-node",
            "--cni-namespace",
            "calico-system",
            "--lease-namespace",
            "ccm",
            "--lease-name",
            "lock",
            "--uninitialized-threshold",
            "0s",
            "--timeout",
            "1m30s",
            "-o",
            "json",
        ])
        .unwrap();
        assert_eq!(args.kubeconfig, Some(PathBuf::from("/tmp/kc")));
        assert_eq!(args.context.as_deref(), Some("prod"));
        assert_eq!(args.output, OutputFormat::Json);
        let o = args.options();
        assert_eq!(o.namespace, "ccm");
        assert_eq!(o.workload.as_deref(), Some("my-ccm"));
        assert_eq!(o.workload_selector.unwrap().to_string(), "app=ccm");
        assert_eq!(o.node_selector.unwrap().to_string(), "pool=a");
        assert_eq!(o.cni_selector.unwrap().to_string(), "k8s-app=calico-node");
        assert_eq!(o.cni_namespace.as_deref(), Some("calico-system"));
        assert_eq!(o.lease_namespace.as_deref(), Some("ccm"));
        assert_eq!(o.lease_name.as_deref(), Some("lock"));
        assert_eq!(o.uninitialized_threshold, Duration::ZERO);
        assert_eq!(o.timeout, Duration::from_secs(90));

        // Only the name given: no default selector.
        let args = parse(&["--workload", "x"]).unwrap();
        let (name, selector) = args.options().effective_workload_query();
        assert_eq!((name.as_deref(), selector), (Some("x"), None));
    }

    #[test]
    fn bad_flags_are_clear() {
        let err = parse(&["--uninitialized-threshold", "5"])
            .unwrap_err()
            .to_string();
        assert!(err.contains("missing unit"), "{err}");
        let err = parse(&["--node-selector", "a in (b"])
            .unwrap_err()
            .to_string();
        assert!(err.contains("invalid label selector"), "{err}");
        let err = parse(&["--output", "yaml"]).unwrap_err().to_string();
        assert!(err.contains("yaml"), "{err}");
    }

    #[test]
    fn a_standalone_command() {
        let args = parse_from("my-ccm doctor", ["--workload", "x", "-o", "json"]).unwrap();
        assert_eq!(args.workload.as_deref(), Some("x"));
        assert_eq!(args.output, OutputFormat::Json);
        let help = parse_from("my-ccm doctor", ["--help"]).unwrap_err();
        assert_eq!(help.kind(), clap::error::ErrorKind::DisplayHelp);
        assert_eq!(help.exit_code(), 0);
        let rendered = help.render().to_string();
        assert!(
            rendered.contains("Usage: my-ccm doctor [OPTIONS]"),
            "{rendered}"
        );
        assert!(
            rendered.contains("--uninitialized-threshold <DURATION>"),
            "{rendered}"
        );
        let bad = parse_from("my-ccm doctor", ["--nope"]).unwrap_err();
        assert_eq!(bad.exit_code(), 2);
        command("x").debug_assert();
    }

    #[tokio::test]
    async fn run_from_returns_the_exit_status() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ccm.yaml");
        std::fs::write(
            &path,
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\n",
        )
        .unwrap();
        let failed = run_from("d", ["--manifest", path.to_str().unwrap()]).await;
        assert_eq!(failed, ExitCode::from(EXIT_DOCTOR_FAILED));
        assert_eq!(run_from("d", ["--bogus"]).await, ExitCode::from(2));
    }

    #[tokio::test]
    async fn lint_mode_runs_without_a_cluster() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ccm.yaml");
        std::fs::write(
            &path,
            "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: ccm}\nspec:\n  selector: {matchLabels: \
             {a: b}}\n  template:\n    spec: {containers: [{name: c, image: i}]}\n",
        )
        .unwrap();
        let args = parse(&["--manifest", path.to_str().unwrap(), "-o", "json"]).unwrap();
        let report = execute(&args).await.unwrap();
        assert_eq!(report.exit_code(), 2);
        let json: serde_json::Value = serde_json::from_str(&args.render(&report)).unwrap();
        assert_eq!(json["status"], "error");
        assert_eq!(
            json["findings"][0]["check"],
            "missing-uninitialized-toleration"
        );

        std::fs::write(&path, "kind: [").unwrap();
        let err = execute(&args).await.unwrap_err();
        assert!(matches!(err, DoctorError::Manifest(_)), "{err:?}");
        let failure: serde_json::Value = serde_json::from_str(&args.render_failure(&err)).unwrap();
        assert_eq!(failure["status"], "failed");
        assert_eq!(failure["exitCode"], 3);
        assert!(
            failure["error"]
                .as_str()
                .unwrap()
                .contains("cannot parse manifest"),
            "{failure}"
        );
    }

    #[tokio::test]
    async fn a_silent_server_times_out() {
        // Accepts connections and never answers.
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let hold = tokio::spawn(async move {
            let mut held = Vec::new();
            while let Ok((socket, _)) = listener.accept().await {
                held.push(socket);
            }
        });
        let dir = tempfile::tempdir().unwrap();
        let kubeconfig = dir.path().join("kubeconfig");
        std::fs::write(
            &kubeconfig,
            format!(
                "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: https://127.0.0.1:{port}\n\
                 users:\n- name: u\n  user:\n    token: t\ncontexts:\n- name: x\n  context:\n    cluster: c\n    \
                 user: u\ncurrent-context: x\n"
            ),
        )
        .unwrap();
        let args = parse(&[
            "--kubeconfig",
            kubeconfig.to_str().unwrap(),
            "--timeout",
            "500ms",
        ])
        .unwrap();
        let err = execute(&args).await.unwrap_err();
        assert!(matches!(err, DoctorError::Timeout { .. }), "{err:?}");
        assert_eq!(
            err.to_string(),
            format!(
                "the cluster at https://127.0.0.1:{port} did not answer within 500ms; check that it is reachable, \
                 or raise --timeout"
            )
        );
        hold.abort();
    }

    #[tokio::test]
    async fn a_missing_kubeconfig_is_a_clear_error() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("nope");
        let args = parse(&["--kubeconfig", missing.to_str().unwrap()]).unwrap();
        let err = execute(&args).await.unwrap_err();
        assert!(matches!(err, DoctorError::Kubeconfig { .. }), "{err:?}");
        let text = args.render_failure(&err);
        assert!(
            text.starts_with("ccm doctor: cannot load the kubeconfig "),
            "{text}"
        );
        assert!(text.contains("nope"), "{text}");

        std::fs::write(&missing, "this: is: not: a kubeconfig").unwrap();
        let err = execute(&args).await.unwrap_err();
        assert!(matches!(err, DoctorError::Kubeconfig { .. }), "{err:?}");
    }
}
