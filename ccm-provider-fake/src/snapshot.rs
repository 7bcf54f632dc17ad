//! The state file: what the cloud holds (instances and load balancers), written as JSON whenever its load
//! balancers change, so that a test can inspect the cloud of a CCM running in another process.

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::cloud::{FakeCloud, State};

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
}

impl CloudSnapshot {
    /// Parse the content of a state file.
    ///
    /// # Errors
    /// If the text is not a state file's JSON.
    pub fn from_json(text: &str) -> Result<CloudSnapshot, serde_json::Error> {
        serde_json::from_str(text)
    }

    fn of(st: &State) -> CloudSnapshot {
        CloudSnapshot {
            instances: st.instances.keys().cloned().collect(),
            load_balancers: st
                .load_balancers
                .values()
                .map(|lb| LoadBalancerSnapshot {
                    name: lb.name.clone(),
                    service: lb.service.clone(),
                    ingress_ip: lb.ingress_ip.clone(),
                    hosts: lb.hosts.len(),
                })
                .collect(),
        }
    }
}

impl FakeCloud {
    /// What the cloud holds now.
    pub fn snapshot(&self) -> CloudSnapshot {
        CloudSnapshot::of(&self.lock())
    }

    /// Write the state to `path` (JSON, see [`CloudSnapshot`]) now and whenever the load balancers change.
    /// The file is replaced atomically (written beside it, then renamed).
    pub fn set_state_file(&self, path: &Path) {
        self.lock().state_file = Some(path.to_owned());
        self.persist();
    }

    /// Write the state file, if there is one.
    pub(crate) fn persist(&self) {
        persist_locked(&self.lock());
    }
}

/// Write the state file of `st`, if it has one, while the caller holds the state lock (so that writes happen
/// in the order of the changes); a failure is logged, not returned (the cloud keeps working).
pub(crate) fn persist_locked(st: &State) {
    let Some(path) = &st.state_file else {
        return;
    };
    if let Err(err) = write_atomically(path, &CloudSnapshot::of(st)) {
        tracing::warn!(file = %path.display(), error = %err, "cannot write the fake cloud's state file");
    }
}

fn write_atomically(path: &Path, snapshot: &CloudSnapshot) -> std::io::Result<()> {
    let mut text = serde_json::to_string_pretty(snapshot).map_err(std::io::Error::other)?;
    text.push('\n');
    let mut temporary = path.as_os_str().to_owned();
    temporary.push(".tmp");
    std::fs::write(&temporary, text)?;
    std::fs::rename(&temporary, path)
}
