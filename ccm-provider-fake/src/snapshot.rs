//! The state file: what the cloud holds (instances and load balancers), kept on disk as its load balancers change,
//! so that a test can inspect the cloud of a CCM running in another process and a later process can restore it.
//!
//! The file is a journal, so that a change costs what it changes and not what the cloud holds (a rewrite of the
//! whole state after every change made provisioning quadratic: 5,000 load balancers of 1,000 backends each meant
//! 5,000 rewrites of up to 75 MB). Its first line is the whole state as [`CloudSnapshot`] JSON, written when the
//! file is set (which compacts it); each further line is one [`Change`]: a load balancer as it is after a change,
//! or the service key of a deleted one. [`CloudSnapshot::from_json`] folds the lines into one snapshot.

use std::collections::BTreeMap;
use std::io::Write as _;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::cloud::{FakeCloud, FakeLoadBalancer, FakePort, State};

/// Why [`FakeCloud::restore_state_file`] could not restore.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RestoreError {
    /// The file exists but could not be read.
    #[error("cannot read the fake cloud's state file {}: {source}; check its permissions or remove it", path.display())]
    Read {
        /// The file.
        path: std::path::PathBuf,
        /// The read error.
        source: std::io::Error,
    },
    /// The file is not a state file.
    #[error("the fake cloud's state file {} is not a state file ({source}); remove it or point stateFile elsewhere", path.display())]
    Parse {
        /// The file.
        path: std::path::PathBuf,
        /// The parse error.
        source: serde_json::Error,
    },
}

/// What the fake cloud holds, as written to the inventory's `stateFile`.
///
/// ```
/// use ccm_provider_fake::{CloudSnapshot, FakeCloud, FakeInstance};
///
/// let cloud = FakeCloud::new();
/// cloud.add_instance(FakeInstance::new("node-a"));
/// let snapshot = cloud.snapshot();
/// assert_eq!(snapshot.instances, ["node-a"]);
/// let json = serde_json::to_string(&snapshot).unwrap();
/// assert_eq!(CloudSnapshot::from_json(&json).unwrap(), snapshot);
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct CloudSnapshot {
    /// The instance names, sorted.
    pub instances: Vec<String>,
    /// The load balancers, sorted by service key.
    pub load_balancers: Vec<LoadBalancerSnapshot>,
}

/// One load balancer of a [`CloudSnapshot`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct LoadBalancerSnapshot {
    /// The cloud name of the load balancer.
    pub name: String,
    /// The service key, `namespace/name`.
    pub service: String,
    /// The ingress IP.
    #[serde(rename = "ingressIP")]
    pub ingress_ip: String,
    /// How many backend hosts it has.
    pub hosts: usize,
    /// The cluster name it was ensured for.
    #[serde(default)]
    pub cluster: String,
    /// The backend node names, sorted.
    #[serde(default)]
    pub backends: Vec<String>,
    /// The ports.
    #[serde(default)]
    pub ports: Vec<PortSnapshot>,
    /// The `ipMode` of its status, if set.
    #[serde(default)]
    pub ip_mode: Option<String>,
    /// The allowed source CIDRs.
    #[serde(default)]
    pub source_ranges: Vec<String>,
    /// The health check `(path, node port)`, if any.
    #[serde(default)]
    pub health_check: Option<(String, i32)>,
    /// The fingerprint of the Service as last ensured.
    #[serde(default)]
    pub fingerprint: String,
}

/// A port of a [`LoadBalancerSnapshot`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct PortSnapshot {
    /// The port name.
    #[serde(default)]
    pub name: String,
    /// The protocol.
    pub protocol: String,
    /// The load balancer's port.
    pub port: i32,
    /// The node port, if allocated.
    #[serde(default)]
    pub node_port: Option<i32>,
}

impl From<&FakeLoadBalancer> for LoadBalancerSnapshot {
    fn from(lb: &FakeLoadBalancer) -> Self {
        LoadBalancerSnapshot {
            name: lb.name.clone(),
            service: lb.service.clone(),
            ingress_ip: lb.ingress_ip.clone(),
            hosts: lb.hosts.len(),
            cluster: lb.cluster.clone(),
            backends: lb.hosts.clone(),
            ports: lb
                .ports
                .iter()
                .map(|p| PortSnapshot {
                    name: p.name.clone(),
                    protocol: p.protocol.clone(),
                    port: p.port,
                    node_port: p.node_port,
                })
                .collect(),
            ip_mode: lb.ip_mode.clone(),
            source_ranges: lb.source_ranges.clone(),
            health_check: lb.health_check.clone(),
            fingerprint: lb.fingerprint.clone(),
        }
    }
}

impl From<&LoadBalancerSnapshot> for FakeLoadBalancer {
    fn from(lb: &LoadBalancerSnapshot) -> Self {
        FakeLoadBalancer::from(lb.clone())
    }
}

impl From<LoadBalancerSnapshot> for FakeLoadBalancer {
    fn from(lb: LoadBalancerSnapshot) -> Self {
        FakeLoadBalancer {
            name: lb.name,
            service: lb.service,
            cluster: lb.cluster,
            hosts: lb.backends,
            ports: lb
                .ports
                .into_iter()
                .map(|p| FakePort {
                    name: p.name,
                    protocol: p.protocol,
                    port: p.port,
                    node_port: p.node_port,
                })
                .collect(),
            ingress_ip: lb.ingress_ip,
            ip_mode: lb.ip_mode,
            source_ranges: lb.source_ranges,
            health_check: lb.health_check,
            fingerprint: lb.fingerprint,
        }
    }
}

/// One line of the state file after the first.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
enum Change {
    /// A load balancer as it is after it was created or changed.
    LoadBalancer(Box<LoadBalancerSnapshot>),
    /// The service key of a load balancer that was deleted.
    Deleted(String),
}

impl CloudSnapshot {
    /// Parse the content of a state file: the whole state on its first line, then the changes made since, one
    /// JSON value a line, applied in order (a last line cut short by a writer appending while the file is read is
    /// ignored); or a single whole-state document, on any number of lines.
    ///
    /// # Errors
    /// If the text is not a state file's JSON.
    pub fn from_json(text: &str) -> Result<CloudSnapshot, serde_json::Error> {
        let mut lines = text.lines();
        let Ok(mut snapshot) =
            serde_json::from_str::<CloudSnapshot>(lines.next().unwrap_or_default())
        else {
            return serde_json::from_str(text); // one document over several lines (pretty), or not a state file
        };
        let mut by_service: BTreeMap<String, LoadBalancerSnapshot> =
            std::mem::take(&mut snapshot.load_balancers)
                .into_iter()
                .map(|lb| (lb.service.clone(), lb))
                .collect();
        let mut lines = lines.filter(|line| !line.trim().is_empty()).peekable();
        while let Some(line) = lines.next() {
            match serde_json::from_str(line) {
                Ok(Change::LoadBalancer(lb)) => {
                    by_service.insert(lb.service.clone(), *lb);
                }
                Ok(Change::Deleted(service)) => {
                    by_service.remove(&service);
                }
                Err(err) if err.is_eof() && lines.peek().is_none() => break,
                Err(err) => return Err(err),
            }
        }
        snapshot.load_balancers = by_service.into_values().collect();
        Ok(snapshot)
    }

    fn of(st: &State) -> CloudSnapshot {
        CloudSnapshot {
            instances: st.instances.keys().cloned().collect(),
            load_balancers: st
                .load_balancers
                .values()
                .map(LoadBalancerSnapshot::from)
                .collect(),
        }
    }
}

impl FakeCloud {
    /// What the cloud holds now.
    pub fn snapshot(&self) -> CloudSnapshot {
        CloudSnapshot::of(&self.lock())
    }

    /// Write the state to `path` now (JSON, see [`CloudSnapshot`]; the file is replaced atomically: written beside
    /// it, then renamed) and append each change of the load balancers to it from then on (see the module docs).
    pub fn set_state_file(&self, path: &Path) {
        let mut st = self.lock();
        st.state_file = Some(path.to_owned());
        if let Err(err) = write_atomically(path, &CloudSnapshot::of(&st)) {
            tracing::warn!(file = %path.display(), error = %err, "cannot write the fake cloud's state file");
        }
    }

    /// Take the load balancers of a state file written earlier (by this or another process: a cloud outlives
    /// the CCMs that use it), replacing those the cloud holds, then write the state to `path` as
    /// [`set_state_file`](Self::set_state_file) does. A missing file restores nothing.
    ///
    /// # Errors
    /// If the file exists but cannot be read or is not a state file.
    pub fn restore_state_file(&self, path: &Path) -> Result<usize, RestoreError> {
        let restored = match std::fs::read_to_string(path) {
            Ok(text) => {
                let snapshot =
                    CloudSnapshot::from_json(&text).map_err(|source| RestoreError::Parse {
                        path: path.to_owned(),
                        source,
                    })?;
                drop(text);
                let mut st = self.lock();
                st.load_balancers = snapshot
                    .load_balancers
                    .into_iter()
                    .map(|lb| (lb.service.clone(), FakeLoadBalancer::from(lb)))
                    .collect();
                st.load_balancers.len()
            }
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => 0,
            Err(source) => {
                return Err(RestoreError::Read {
                    path: path.to_owned(),
                    source,
                });
            }
        };
        self.set_state_file(path);
        Ok(restored)
    }
}

/// Append the change of the load balancer of `service_key` (as it is now in `st`, or deleted) to the state file of
/// `st`, if it has one, while the caller holds the state lock (so that lines follow the order of the changes); a
/// failure is logged, not returned (the cloud keeps working).
pub(crate) fn persist_locked(st: &State, service_key: &str) {
    let Some(path) = &st.state_file else {
        return;
    };
    let change = match st.load_balancers.get(service_key) {
        Some(lb) => Change::LoadBalancer(Box::new(LoadBalancerSnapshot::from(lb))),
        None => Change::Deleted(service_key.to_owned()),
    };
    if let Err(err) = append(path, &change) {
        tracing::warn!(file = %path.display(), error = %err, "cannot append to the fake cloud's state file");
    }
}

/// Append one change as one line, in one write (a reader sees whole lines, or a last one cut short).
fn append(path: &Path, change: &Change) -> std::io::Result<()> {
    let mut line = serde_json::to_vec(change).map_err(std::io::Error::other)?;
    line.push(b'\n');
    std::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .open(path)?
        .write_all(&line)
}

fn write_atomically(path: &Path, snapshot: &CloudSnapshot) -> std::io::Result<()> {
    let mut text = serde_json::to_string(snapshot).map_err(std::io::Error::other)?;
    text.push('\n');
    let mut temporary = path.as_os_str().to_owned();
    temporary.push(".tmp");
    std::fs::write(&temporary, text)?;
    std::fs::rename(&temporary, path)
}
