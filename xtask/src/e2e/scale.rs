//! The runs of `cargo xtask e2e --scale`: per CCM, a fresh cluster in a box with audit logging,
//! N registered nodes, the CCM until they are initialized and its writes have stopped, then the
//! steady window. Everything started here is stopped when a run ends, fails or is interrupted
//! (the cluster's components are supervised by the control plane's watchdog, the CCM by its own).

use std::collections::BTreeMap;
use std::io::{Read as _, Seek as _, SeekFrom};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::Context as _;
use ccm_testenv::audit::{self, AuditEvent};
use ccm_testenv::cluster::{self, Cluster, ClusterOptions, KWOK_USER, NodeRole, NodeTimings};
use ccm_testenv::controlplane::{LaunchOptions, Supervision};
use ccm_testenv::kubeconfig::{self, KubeconfigSpec};
use ccm_testenv::pki::CertificateAuthority;
use k8s_openapi::api::core::v1::Node;
use kube::Api;

use super::E2eArgs;
use super::figures::{self, Window};
use crate::bench::nodes::{cloud_calls_by_operation, node_initialized, rust_inventory};
use crate::bench::support::{
    self, BenchBinaries, CcmProcess, CcmSpec, CommonArgs, Implementation, LimitMode, ProcStats,
    Tracker,
};
use crate::controlplane;
use crate::process::{self, Interrupt, Interrupted};

/// Node registrations in flight.
const CREATE_CONCURRENCY: usize = 16;

/// How often the window checks the CCM, the cluster and the audit log.
const TICK: Duration = Duration::from_secs(5);

/// Runs both measurements and prints the table.
pub async fn run(args: &E2eArgs, interrupt: &Interrupt) -> anyhow::Result<()> {
    let common = common_args(args);
    let binaries = support::prepare(&common, interrupt).await?;
    let summary = support::environment_summary(&binaries, &common).await;
    let period = args.node_status_update_frequency.get();
    if !figures::whole_periods(args.duration.get(), period) {
        eprintln!(
            "warning: the window ({}) is not a whole number of address-sync periods ({}): the \
             figures per period depend on where the syncs fall",
            args.duration, args.node_status_update_frequency
        );
    }
    let mut results: Vec<(Implementation, anyhow::Result<Window>)> = Vec::new();
    for &implementation in &args.implementations {
        eprintln!(
            "\n== {}: {} nodes, steady window {} ==",
            implementation.label(),
            args.nodes,
            args.duration
        );
        let result = measure(args, implementation, &binaries, interrupt).await;
        if let Err(err) = &result
            && err.is::<Interrupted>()
        {
            return result.map(|_| ());
        }
        results.push((implementation, result));
    }
    let of = |which: Implementation| {
        results
            .iter()
            .find(|(i, _)| *i == which)
            .and_then(|(_, r)| r.as_ref().ok())
    };
    println!(
        "\nSteady state in the cluster in a box: {} kwok nodes, a {} window, --controllers={}, \
         --node-status-update-frequency={} (the address-sync period){}\n{summary}\n",
        args.nodes,
        args.duration,
        args.controllers,
        args.node_status_update_frequency,
        if args.rust_bulk {
            "; the Rust fake answers bulk calls natively (--rust-bulk)"
        } else {
            ""
        }
    );
    println!(
        "{}\n",
        figures::table(of(Implementation::Rust), of(Implementation::Go), period).render()
    );
    let mut failed = false;
    for (implementation, result) in &results {
        match result {
            Ok(window) => println!("{}", figures::details(implementation.label(), window)),
            Err(err) => {
                failed = true;
                println!("- {}: FAILED: {err:#}", implementation.label());
            }
        }
    }
    if failed {
        anyhow::bail!("a run failed (see above)");
    }
    Ok(())
}

/// The benchmarks' common options for `support::prepare` and the environment line.
fn common_args(args: &E2eArgs) -> CommonArgs {
    CommonArgs {
        implementations: args.implementations.clone(),
        limits: vec![LimitMode::Shipped],
        raised_qps: 1000.0,
        raised_burst: 2000,
        timeout_seconds: args.timeout_seconds,
        quiet_seconds: args.quiet_seconds,
        no_build: args.no_build,
        rust_ccm: args.rust_ccm.clone(),
        repeat: 1,
        rust_args: Vec::new(),
        go_args: Vec::new(),
    }
}

/// The user a CCM authenticates as in the cluster (a client certificate in `system:masters`), so
/// that the audit log tells its writes from everyone else's.
fn ccm_user(implementation: Implementation) -> String {
    format!("ccm-scale-{}", implementation.label().to_ascii_lowercase())
}

/// The node names: `node-0001`, `node-0002`, ...
fn node_names(count: usize) -> Vec<String> {
    (1..=count).map(|i| format!("node-{i:04}")).collect()
}

/// The CCM's flags beyond the benchmarks' common ones.
fn extra_args(args: &E2eArgs) -> Vec<String> {
    vec![format!(
        "--node-status-update-frequency={}",
        args.node_status_update_frequency
    )]
}

async fn measure(
    args: &E2eArgs,
    implementation: Implementation,
    binaries: &BenchBinaries,
    interrupt: &Interrupt,
) -> anyhow::Result<Window> {
    let dir = support::output_dir("e2e-scale")?.join(implementation.label().to_lowercase());
    if dir.exists() {
        std::fs::remove_dir_all(&dir).with_context(|| format!("removing {}", dir.display()))?;
    }
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let timeout = Duration::from_secs(args.timeout_seconds);

    let stopwatch = process::Stopwatch::start();
    let mut options = ClusterOptions::new(
        LaunchOptions::new(
            controlplane::binaries()?,
            dir.join("cluster"),
            Supervision::Watchdog,
        )
        .with_audit(),
    )
    .with_timings(NodeTimings::GO_DEFAULTS);
    options.ready_timeout = timeout;
    let mut cluster = tokio::select! {
        launched = Cluster::launch(options) => launched?,
        () = interrupt.interrupted() => return Err(Interrupted.into()),
    };
    eprintln!(
        "cluster in a box ready in {}",
        process::seconds(stopwatch.elapsed())
    );
    let audit_log = cluster
        .control_plane()
        .audit_log_path()
        .context("the cluster runs without an audit log")?;
    let client = cluster.client()?;

    let user = ccm_user(implementation);
    let kubeconfig = dir.join("ccm.kubeconfig");
    write_client_kubeconfig(&cluster, &user, &kubeconfig)?;

    let names = node_names(args.nodes as usize);
    let inventory = dir.join("inventory.yaml");
    std::fs::write(&inventory, rust_inventory(&names, args.rust_bulk))
        .with_context(|| format!("writing {}", inventory.display()))?;
    let nodes: Api<Node> = Api::all(client.clone());
    let stopwatch = process::Stopwatch::start();
    let objects = names
        .iter()
        .map(|name| cluster::kubelet_node(name, NodeRole::Worker))
        .collect();
    support::create_all(&nodes, objects, CREATE_CONCURRENCY, interrupt).await?;
    eprintln!(
        "registered {} nodes in {}",
        names.len(),
        process::seconds(stopwatch.elapsed())
    );

    let mut tracker = Tracker::start(nodes, node_initialized);
    let spec = CcmSpec {
        implementation,
        controllers: args.controllers.clone(),
        kubeconfig,
        admin_kubeconfig: cluster.kubeconfig_path().to_owned(),
        inventory: Some(inventory),
        admin_port: support::free_port()?,
        limits: None,
        extra: extra_args(args),
        leader_elect: false,
    };
    let started = Instant::now();
    let mut ccm = CcmProcess::start(
        binaries.of(implementation),
        &spec,
        &dir.join(format!("{}.log", implementation.label().to_lowercase())),
    )?;
    let expected = names.len();
    let initialized = tracker
        .wait_until(
            "nodes initialized",
            |p| p.done >= expected,
            timeout,
            Some(&mut ccm),
            interrupt,
        )
        .await?;
    let init_seconds = initialized.duration_since(started).as_secs_f64();
    drop(tracker);
    eprintln!("{expected} nodes initialized after {init_seconds:.1} s");

    let mut tail = AuditTail::new(audit_log);
    let settled = settle(
        &mut tail,
        &user,
        Duration::from_secs(args.quiet_seconds),
        timeout,
        &mut ccm,
        interrupt,
    )
    .await?;

    let length = args.duration.get();
    eprintln!(
        "steady window of {} begins{}",
        args.duration,
        if settled { "" } else { " (still writing)" }
    );
    let start_micros = now_micros();
    let stats_before = ccm.stats();
    let calls_before = cloud_calls(&ccm).await;
    let window_start = Instant::now();
    let mut ccm_writes = BTreeMap::new();
    let mut kwok_writes = BTreeMap::new();
    let mut reported = Instant::now();
    while window_start.elapsed() < length {
        let left = length.saturating_sub(window_start.elapsed());
        support::pause(left.min(TICK), interrupt).await?;
        ccm.check_running()?;
        cluster.check_alive()?;
        let events = tail.read_new()?;
        figures::count_writes(&events, &user, start_micros, i64::MAX, &mut ccm_writes);
        figures::count_writes(&events, KWOK_USER, start_micros, i64::MAX, &mut kwok_writes);
        if reported.elapsed() >= Duration::from_secs(60) {
            eprintln!(
                "  {} of {}: CCM writes {}, heartbeat writes {}",
                process::seconds(window_start.elapsed()),
                args.duration,
                ccm_writes.values().sum::<u64>(),
                kwok_writes.values().sum::<u64>()
            );
            reported = Instant::now();
        }
    }
    let end_micros = now_micros();
    let stats_after = ccm.stats();
    let calls_after = cloud_calls(&ccm).await;
    // Events logged after the last tick but completed within the window.
    let events = tail.read_new()?;
    figures::count_writes(&events, &user, start_micros, end_micros, &mut ccm_writes);
    figures::count_writes(
        &events,
        KWOK_USER,
        start_micros,
        end_micros,
        &mut kwok_writes,
    );

    let window = Window {
        nodes: expected,
        init_seconds,
        settled,
        length,
        cpu_seconds: cpu_delta(&stats_before, &stats_after),
        peak_rss_kib: stats_after.peak_rss_kib,
        ccm_writes,
        heartbeat_writes: kwok_writes.values().sum(),
        cloud_calls: calls_before
            .zip(calls_after)
            .map(|(before, after)| figures::counter_delta(&before, &after)),
    };
    ccm.stop().await?;
    cluster.stop().context("stopping the cluster in a box")?;
    Ok(window)
}

/// Waits until the CCM has written nothing for `quiet` (by the audit log), at most `limit`.
/// Returns whether it settled.
async fn settle(
    tail: &mut AuditTail,
    user: &str,
    quiet: Duration,
    limit: Duration,
    ccm: &mut CcmProcess,
    interrupt: &Interrupt,
) -> anyhow::Result<bool> {
    let quiet_micros = i64::try_from(quiet.as_micros()).unwrap_or(i64::MAX);
    let started = Instant::now();
    let mut last_write = figures::last_write_micros(&tail.read_new()?, user);
    loop {
        let now = now_micros();
        if last_write.is_none_or(|last| now - last >= quiet_micros) {
            return Ok(true);
        }
        if started.elapsed() >= limit {
            return Ok(false);
        }
        support::pause(Duration::from_secs(1), interrupt).await?;
        ccm.check_running()?;
        if let Some(latest) = figures::last_write_micros(&tail.read_new()?, user) {
            last_write = Some(last_write.map_or(latest, |last| last.max(latest)));
        }
    }
}

fn now_micros() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_micros()).unwrap_or(i64::MAX))
}

fn cpu_delta(before: &ProcStats, after: &ProcStats) -> Option<f64> {
    Some(after.cpu_seconds? - before.cpu_seconds?)
}

/// The CCM's cloud calls so far by operation; `None` if its `/metrics` cannot be read or has no
/// `cloudprovider_api_requests_total`.
async fn cloud_calls(ccm: &CcmProcess) -> Option<BTreeMap<String, f64>> {
    let samples = ccm
        .metrics()
        .await
        .map_err(|err| eprintln!("warning: cannot read the CCM's /metrics: {err:#}"))
        .ok()?;
    let has_counter = samples
        .iter()
        .any(|s| s.name == "cloudprovider_api_requests_total");
    has_counter.then(|| cloud_calls_by_operation(&samples))
}

/// Writes a kubeconfig for `user` (in `system:masters`) signed by the cluster's CA.
fn write_client_kubeconfig(cluster: &Cluster, user: &str, path: &Path) -> anyhow::Result<()> {
    let env = cluster.env();
    let read = |path: &Path| {
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))
    };
    let ca_pem = read(&env.ca_cert)?;
    let ca = CertificateAuthority::from_pem(&ca_pem, &read(&env.ca_key)?)
        .context("loading the cluster's CA")?;
    let certified = ca
        .issue_client(user, &["system:masters"])
        .with_context(|| format!("issuing a client certificate for {user}"))?;
    let yaml = kubeconfig::render(&KubeconfigSpec {
        name: user,
        server: &env.server,
        ca_pem: &ca_pem,
        client_cert_pem: &certified.cert_pem,
        client_key_pem: &certified.key_pem,
    });
    std::fs::write(path, yaml).with_context(|| format!("writing {}", path.display()))
}

/// Reads an audit log as it grows: each call parses the complete lines added since the last one.
struct AuditTail {
    path: PathBuf,
    offset: u64,
}

impl AuditTail {
    fn new(path: PathBuf) -> Self {
        AuditTail { path, offset: 0 }
    }

    fn read_new(&mut self) -> anyhow::Result<Vec<AuditEvent>> {
        let mut file = std::fs::File::open(&self.path)
            .with_context(|| format!("opening {}", self.path.display()))?;
        file.seek(SeekFrom::Start(self.offset))
            .with_context(|| format!("reading {}", self.path.display()))?;
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes)
            .with_context(|| format!("reading {}", self.path.display()))?;
        let complete = complete_lines(&bytes);
        self.offset += complete.len() as u64;
        let text = String::from_utf8_lossy(complete);
        Ok(audit::parse_log(&text, &self.path)?)
    }
}

/// The bytes up to and including the last newline (a line being written is left for later).
fn complete_lines(bytes: &[u8]) -> &[u8] {
    bytes
        .iter()
        .rposition(|b| *b == b'\n')
        .map_or(&[][..], |end| &bytes[..=end])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_complete_lines_are_read() {
        assert_eq!(complete_lines(b"a\nb\npart"), b"a\nb\n");
        assert_eq!(complete_lines(b"a\n"), b"a\n");
        assert_eq!(complete_lines(b"part"), b"");
        assert_eq!(complete_lines(b""), b"");
    }

    #[test]
    fn the_tail_reads_each_event_once() {
        let dir = tempfile::tempdir().expect("dir");
        let path = dir.path().join("audit.log");
        let line = |verb: &str| {
            format!(
                "{{\"auditID\":\"1\",\"stage\":\"ResponseComplete\",\"verb\":\"{verb}\",\
                 \"user\":{{\"username\":\"u\"}},\"requestReceivedTimestamp\":\"2026-11-23T17:00:00.000000Z\",\
                 \"stageTimestamp\":\"2026-11-23T17:00:00.000000Z\"}}\n"
            )
        };
        std::fs::write(&path, format!("{}{}", line("patch"), &line("create")[..20]))
            .expect("write");
        let mut tail = AuditTail::new(path.clone());
        let first = tail.read_new().expect("read");
        assert_eq!(first.len(), 1);
        assert_eq!(first[0].verb, "patch");
        let mut text = std::fs::read_to_string(&path).expect("read back");
        text.push_str(&line("create")[20..]);
        std::fs::write(&path, text).expect("write");
        let second = tail.read_new().expect("read");
        assert_eq!(second.len(), 1);
        assert_eq!(second[0].verb, "create");
        assert!(tail.read_new().expect("read").is_empty());
    }

    #[test]
    fn the_inventory_turns_bulk_calls_on_only_when_asked() {
        let names = node_names(3);
        for bulk in [false, true] {
            let yaml = rust_inventory(&names, bulk);
            let inventory = ccm_provider_fake::Inventory::from_yaml_str(&yaml, "test")
                .unwrap_or_else(|e| panic!("{e}\n{yaml}"));
            assert_eq!(inventory.supports_bulk, bulk);
            assert_eq!(inventory.instances.len(), 3);
        }
    }

    #[test]
    fn names_users_and_flags() {
        assert_eq!(node_names(2), ["node-0001", "node-0002"]);
        assert_eq!(ccm_user(Implementation::Rust), "ccm-scale-rust");
        assert_eq!(ccm_user(Implementation::Go), "ccm-scale-go");
        assert_eq!(
            cpu_delta(
                &ProcStats {
                    peak_rss_kib: None,
                    cpu_seconds: Some(1.5)
                },
                &ProcStats {
                    peak_rss_kib: Some(1),
                    cpu_seconds: Some(4.0)
                }
            ),
            Some(2.5)
        );
        assert_eq!(
            cpu_delta(&ProcStats::default(), &ProcStats::default()),
            None
        );
    }
}
