//! A fresh control plane per benchmark run: its admin client, the API server's metrics, and waiting until
//! a CCM's writes have stopped.

use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use ccm_testenv::TestEnv;
use ccm_testenv::controlplane::{ControlPlane, Supervision};

use super::ccm::CcmProcess;
use super::objects::pause;
use crate::bench::prom::{self, RequestCounts, Sample};
use crate::controlplane;
use crate::paths;
use crate::process::Interrupt;

/// A fresh control plane for one run, with an admin client. Stopped when dropped.
pub struct Cluster {
    control_plane: ControlPlane,
    /// The control plane's test environment (clients and tokens for other identities).
    pub env: TestEnv,
    /// Cluster-admin client.
    pub client: kube::Client,
    /// The admin kubeconfig file (for the CCM).
    pub kubeconfig: PathBuf,
}

impl Cluster {
    /// Launches a new control plane under `<target>/controlplane/bench-<pid>-<n>`.
    ///
    /// # Errors
    /// If it does not start or no client can be built.
    pub async fn start(interrupt: &Interrupt) -> anyhow::Result<Self> {
        static RUNS: AtomicUsize = AtomicUsize::new(0);
        let run = RUNS.fetch_add(1, Ordering::Relaxed);
        let dir = paths::target_dir()
            .join("controlplane")
            .join(format!("bench-{}-{run}", std::process::id()));
        let control_plane = controlplane::launch(&dir, Supervision::Watchdog, interrupt).await?;
        let env = TestEnv::attach(&control_plane.env_file_path())
            .context("reading the control plane's env file")?;
        let client = env.try_client().context("building the admin client")?;
        let kubeconfig = env.kubeconfig_path().to_owned();
        Ok(Cluster {
            control_plane,
            env,
            client,
            kubeconfig,
        })
    }

    /// The API server's metrics.
    ///
    /// # Errors
    /// If `/metrics` cannot be read or parsed.
    pub async fn apiserver_samples(&self) -> anyhow::Result<Vec<Sample>> {
        let request = http::Request::get("/metrics")
            .body(Vec::new())
            .context("building the /metrics request")?;
        let text = self
            .client
            .request_text(request)
            .await
            .context("reading the API server's /metrics")?;
        prom::parse(&text).context("parsing the API server's /metrics")
    }

    /// The API server's request counters.
    ///
    /// # Errors
    /// If `/metrics` cannot be read or parsed.
    pub async fn request_counts(&self) -> anyhow::Result<RequestCounts> {
        Ok(RequestCounts::from_samples(
            &self.apiserver_samples().await?,
        ))
    }

    /// Waits until the CCM's writes have stopped: the API server's count of writes to the CCM's
    /// resources stays the same for `quiet` (checked every second), at most `limit`. Returns the
    /// writes since `before` and whether they settled (false: still changing at `limit`).
    ///
    /// # Errors
    /// If the metrics cannot be read, the CCM exits, or on Ctrl-C.
    pub async fn settled_requests(
        &self,
        before: &RequestCounts,
        ccm: &mut CcmProcess,
        quiet: Duration,
        limit: Duration,
        interrupt: &Interrupt,
    ) -> anyhow::Result<(RequestCounts, bool)> {
        let started = Instant::now();
        let mut last = self.request_counts().await?.since(before).ccm_requests();
        let mut unchanged_since = Instant::now();
        loop {
            if unchanged_since.elapsed() >= quiet {
                return Ok((last, true));
            }
            if started.elapsed() >= limit {
                return Ok((last, false));
            }
            pause(Duration::from_secs(1), interrupt).await?;
            ccm.check_running()?;
            let now = self.request_counts().await?.since(before).ccm_requests();
            if now.writes() != last.writes() {
                unchanged_since = Instant::now();
            }
            last = now;
        }
    }

    /// Stops the control plane and removes its directory.
    ///
    /// # Errors
    /// If a server cannot be stopped.
    pub fn stop(self) -> anyhow::Result<()> {
        self.control_plane
            .stop()
            .context("stopping the benchmark's control plane")
    }
}
