//! The Acme cloud's API client: the stand-in for a vendor's own SDK, which a real provider already has. An
//! in-memory cloud whose machines come from an inventory (the `--cloud-config` file) and whose load balancers take
//! a moment to provision; it answers in its own terms ([`ApiError`], HTTP-like), which the provider (`acme.rs`)
//! translates into the SDK's error kinds. Tests arm it to fail a call with [`AcmeApi::fail_next`].

use std::collections::BTreeMap;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use tokio::time::Instant;

/// How long a new load balancer takes to provision.
pub const PROVISIONING: Duration = Duration::from_millis(50);

/// A machine, as the API describes it and as the inventory lists it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Machine {
    /// The machine id (`i-0001`), unique in the region.
    pub id: String,
    /// The machine's host name: the name of its Kubernetes Node.
    pub name: String,
    /// The zone it runs in.
    pub zone: String,
    /// Its private IPv4 address.
    pub ip: String,
    /// Its size (the Nodes' instance type).
    pub size: String,
    /// Whether it runs (a stopped machine still exists).
    pub running: bool,
}

/// The inventory file.
#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Inventory {
    machines: Vec<Machine>,
}

/// A load balancer: its public host name and its member machines' names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Balancer {
    /// The public host name.
    pub hostname: String,
    /// The names of the member machines.
    pub members: Vec<String>,
    ready_at: Instant,
}

/// What the Acme API answers instead of a result.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ApiError {
    /// 404: no such object.
    #[error("404 not found: {0}")]
    NotFound(String),
    /// 429: the account's rate limit is exceeded.
    #[error("429 too many requests, retry in {0:?}")]
    RateLimited(Duration),
    /// 409: the object is still being provisioned.
    #[error("409 conflict: {0} is being provisioned, ready in {1:?}")]
    Provisioning(String, Duration),
    /// 400: the request (or the inventory) is invalid.
    #[error("400 bad request: {0}")]
    BadRequest(String),
}

/// The API calls, to arm a failure of one ([`AcmeApi::fail_next`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Call {
    /// Describe a machine (by id or by name).
    Describe,
    /// Read a load balancer.
    GetLoadBalancer,
    /// Create or update a load balancer.
    PutLoadBalancer,
    /// Delete a load balancer.
    DeleteLoadBalancer,
}

#[derive(Debug, Default)]
struct State {
    balancers: BTreeMap<String, Balancer>,
    faults: Vec<(Call, ApiError)>,
}

/// A connection to one region of the Acme cloud.
#[derive(Debug)]
pub struct AcmeApi {
    region: String,
    machines: Vec<Machine>,
    state: Mutex<State>,
}

impl AcmeApi {
    /// Connect to `region`, whose machines the YAML `inventory` lists (`machines: [{id, name, zone, ip, size,
    /// running}]`).
    ///
    /// # Errors
    ///
    /// [`ApiError::BadRequest`] if the inventory does not parse.
    pub async fn connect(region: &str, inventory: &str) -> Result<Self, ApiError> {
        let inventory: Inventory = serde_saphyr::from_str(inventory)
            .map_err(|err| ApiError::BadRequest(format!("inventory: {err}")))?;
        Ok(AcmeApi {
            region: region.to_owned(),
            machines: inventory.machines,
            state: Mutex::default(),
        })
    }

    /// The region.
    pub fn region(&self) -> &str {
        &self.region
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The next `call` fails with `error` (once).
    #[allow(
        dead_code,
        reason = "only the conformance suite (tests/conformance_acme.rs includes this file) arms failures; the CCM \
                  binary and its own test build do not"
    )]
    pub fn fail_next(&self, call: Call, error: ApiError) {
        self.lock().faults.push((call, error));
    }

    fn fault(&self, call: Call) -> Result<MutexGuard<'_, State>, ApiError> {
        let mut state = self.lock();
        match state.faults.iter().position(|(c, _)| *c == call) {
            Some(i) => Err(state.faults.remove(i).1),
            None => Ok(state),
        }
    }

    /// Describe the machine with id `id`, or (`by_name`) the machine named `id`.
    ///
    /// # Errors
    ///
    /// [`ApiError::NotFound`] if there is no such machine.
    pub async fn describe(&self, id: &str, by_name: bool) -> Result<Machine, ApiError> {
        drop(self.fault(Call::Describe)?);
        self.machines
            .iter()
            .find(|m| if by_name { m.name == id } else { m.id == id })
            .cloned()
            .ok_or_else(|| ApiError::NotFound(format!("machine {id}")))
    }

    /// The load balancer `name`, `None` if there is none.
    ///
    /// # Errors
    ///
    /// An armed failure.
    pub async fn get_load_balancer(&self, name: &str) -> Result<Option<Balancer>, ApiError> {
        Ok(self
            .fault(Call::GetLoadBalancer)?
            .balancers
            .get(name)
            .cloned())
    }

    /// Create the load balancer `name` or update its members; [`ApiError::Provisioning`] until it is ready.
    ///
    /// # Errors
    ///
    /// [`ApiError::Provisioning`] while it is being provisioned.
    pub async fn put_load_balancer(
        &self,
        name: &str,
        members: Vec<String>,
    ) -> Result<Balancer, ApiError> {
        let mut state = self.fault(Call::PutLoadBalancer)?;
        let balancer = state
            .balancers
            .entry(name.to_owned())
            .or_insert_with(|| Balancer {
                hostname: format!("{name}.{}.lb.acme.example", self.region),
                members: Vec::new(),
                ready_at: Instant::now() + PROVISIONING,
            });
        balancer.members = members;
        match balancer.ready_at.checked_duration_since(Instant::now()) {
            Some(wait) if !wait.is_zero() => Err(ApiError::Provisioning(name.to_owned(), wait)),
            _ => Ok(balancer.clone()),
        }
    }

    /// Delete the load balancer `name` (nothing to do if there is none).
    ///
    /// # Errors
    ///
    /// An armed failure.
    pub async fn delete_load_balancer(&self, name: &str) -> Result<(), ApiError> {
        self.fault(Call::DeleteLoadBalancer)?.balancers.remove(name);
        Ok(())
    }
}
