//! The inventory: a YAML description of a fake cloud, so a CCM can be pointed at a described "cloud" with
//! `--cloud-provider=fake --cloud-config=inventory.yaml`.
//!
//! The format is documented in `docs/fake-provider.md`; its JSON schema (generated from these types) is
//! `docs/schema/fake-inventory.schema.json`. Unknown keys are rejected, and every error names the file and the
//! field path, for example `inventory.yaml: instances[2].addresses[0].address: invalid IP address "10.0.0.300"`.
//!
//! One concern per file: `schema` (the document's types), `yaml` (reading the YAML, error wording),
//! `check` (value validation) and `build` (the cloud it describes).

mod build;
mod check;
mod schema;
mod yaml;

pub(crate) use check::Checker;
use check::{label_key_problem, label_value_problem};
pub use schema::{
    AddressSpec, AddressType, CapabilitiesSpec, FaultKind, FaultSpec, InstanceSpec, Inventory,
    IpModeSpec, QuotaSpec, RouteSpec, ZoneSpec,
};
pub use yaml::{InventoryError, Position};
