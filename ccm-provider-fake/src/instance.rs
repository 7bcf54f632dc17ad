//! [`FakeInstance`]: one virtual machine of the fake cloud.

use std::collections::BTreeMap;

use ccm_core::InstanceMetadata;
use k8s_openapi::api::core::v1::NodeAddress;

/// Kubernetes node address types.
pub(crate) mod address_types {
    pub const HOSTNAME: &str = "Hostname";
    pub const INTERNAL_IP: &str = "InternalIP";
    pub const EXTERNAL_IP: &str = "ExternalIP";
}

/// One instance (virtual machine) of the fake cloud, matched to a Node by providerID or by name.
///
/// Build it with [`FakeInstance::new`] and the `with_*` methods; read or change it through its public fields
/// (for example inside [`FakeCloud::update_instance`](crate::FakeCloud::update_instance)).
///
/// ```
/// use ccm_provider_fake::FakeInstance;
///
/// let vm = FakeInstance::new("node-a")
///     .with_internal_ip("10.0.0.11")
///     .with_hostname("node-a")
///     .with_instance_type("fake.large")
///     .with_zone("zone-a", "region-1")
///     .with_label("fake.example.com/rack", "r1");
/// assert_eq!(vm.name, "node-a");
/// assert_eq!(vm.addresses.len(), 2);
/// assert_eq!(vm.provider_id, None); // resolved to "<provider>://node-a" by the cloud
/// ```
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct FakeInstance {
    /// The node name this instance serves.
    pub name: String,
    /// The providerID: `None` = `<provider name>://<name>` (resolved when read), `Some("")` = the instance has
    /// none, `Some(id)` = exactly `id`.
    pub provider_id: Option<String>,
    /// The node addresses, in order.
    pub addresses: Vec<NodeAddress>,
    /// The instance type (`""` = unknown).
    pub instance_type: String,
    /// The zone (`""` = unknown).
    pub zone: String,
    /// The region (`""` = unknown).
    pub region: String,
    /// Extra labels reported in the instance metadata.
    pub labels: BTreeMap<String, String>,
    /// Whether the instance is shut down (it still exists).
    pub shutdown: bool,
    /// When true, `instance_metadata` answers [`InstanceLookup::Skip`](ccm_core::InstanceLookup::Skip) (the node
    /// controller then skips the node on purpose).
    pub no_metadata: bool,
}

impl FakeInstance {
    /// A running instance for the node `name`, with no addresses, type, zone or labels and the default
    /// providerID `<provider name>://<name>`.
    pub fn new(name: impl Into<String>) -> Self {
        FakeInstance {
            name: name.into(),
            provider_id: None,
            addresses: Vec::new(),
            instance_type: String::new(),
            zone: String::new(),
            region: String::new(),
            labels: BTreeMap::new(),
            shutdown: false,
            no_metadata: false,
        }
    }

    /// Use exactly this providerID.
    pub fn with_provider_id(mut self, provider_id: impl Into<String>) -> Self {
        self.provider_id = Some(provider_id.into());
        self
    }

    /// The instance has no providerID: it is found only by node name, and the V1 `instance_id` answers
    /// [`CloudError::NotImplemented`](ccm_core::CloudError::NotImplemented).
    pub fn without_provider_id(mut self) -> Self {
        self.provider_id = Some(String::new());
        self
    }

    /// Append an `InternalIP` address.
    pub fn with_internal_ip(self, ip: impl Into<String>) -> Self {
        self.with_address(address_types::INTERNAL_IP, ip)
    }

    /// Append an `ExternalIP` address.
    pub fn with_external_ip(self, ip: impl Into<String>) -> Self {
        self.with_address(address_types::EXTERNAL_IP, ip)
    }

    /// Append a `Hostname` address.
    pub fn with_hostname(self, hostname: impl Into<String>) -> Self {
        self.with_address(address_types::HOSTNAME, hostname)
    }

    /// Append an address of any type (`InternalDNS`, `ExternalDNS`, ...).
    pub fn with_address(mut self, type_: impl Into<String>, address: impl Into<String>) -> Self {
        self.addresses.push(NodeAddress {
            type_: type_.into(),
            address: address.into(),
        });
        self
    }

    /// Replace all addresses.
    pub fn with_addresses(mut self, addresses: Vec<NodeAddress>) -> Self {
        self.addresses = addresses;
        self
    }

    /// Set the instance type.
    pub fn with_instance_type(mut self, instance_type: impl Into<String>) -> Self {
        self.instance_type = instance_type.into();
        self
    }

    /// Set the zone and region.
    pub fn with_zone(mut self, zone: impl Into<String>, region: impl Into<String>) -> Self {
        self.zone = zone.into();
        self.region = region.into();
        self
    }

    /// Add an extra label reported in the metadata.
    pub fn with_label(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.labels.insert(key.into(), value.into());
        self
    }

    /// Set the shutdown state.
    pub fn with_shutdown(mut self, shutdown: bool) -> Self {
        self.shutdown = shutdown;
        self
    }

    /// Make `instance_metadata` answer [`InstanceLookup::Skip`](ccm_core::InstanceLookup::Skip) for this
    /// instance.
    pub fn with_no_metadata(mut self) -> Self {
        self.no_metadata = true;
        self
    }

    /// The providerID as the cloud reports it under `provider_name` (`""` if the instance has none).
    pub fn resolved_provider_id(&self, provider_name: &str) -> String {
        match &self.provider_id {
            Some(id) => id.clone(),
            None => format!("{provider_name}://{}", self.name),
        }
    }

    /// Whether the instance's providerID under `provider_name` is `provider_id` (what
    /// [`resolved_provider_id`](Self::resolved_provider_id) would return, without building it); never for an
    /// empty `provider_id`.
    pub(crate) fn has_provider_id(&self, provider_name: &str, provider_id: &str) -> bool {
        match &self.provider_id {
            _ if provider_id.is_empty() => false,
            Some(id) => id == provider_id,
            None => {
                provider_id
                    .strip_prefix(provider_name)
                    .and_then(|rest| rest.strip_prefix("://"))
                    == Some(self.name.as_str())
            }
        }
    }

    /// The instance ID: what follows `://` in the providerID (the whole providerID if it has no `://`), or
    /// `None` if the instance has no providerID.
    pub fn instance_id(&self, provider_name: &str) -> Option<String> {
        let id = self.resolved_provider_id(provider_name);
        if id.is_empty() {
            return None;
        }
        Some(match id.split_once("://") {
            Some((_, rest)) => rest.to_owned(),
            None => id,
        })
    }

    /// The metadata `instance_metadata` reports for this instance under `provider_name`.
    pub fn metadata(&self, provider_name: &str) -> InstanceMetadata {
        let mut meta = InstanceMetadata::new(self.resolved_provider_id(provider_name))
            .with_instance_type(self.instance_type.clone())
            .with_addresses(self.addresses.clone())
            .with_zone(self.zone.clone())
            .with_region(self.region.clone());
        for (key, value) in &self.labels {
            meta = meta.with_label(key.clone(), value.clone());
        }
        meta
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn provider_id_default_explicit_and_absent() {
        let vm = FakeInstance::new("n1");
        assert_eq!(vm.resolved_provider_id("fake"), "fake://n1");
        assert_eq!(vm.resolved_provider_id("acme"), "acme://n1");
        assert_eq!(vm.instance_id("fake").as_deref(), Some("n1"));

        let vm = FakeInstance::new("n1").with_provider_id("fake:///zone-a/i-1");
        assert_eq!(vm.resolved_provider_id("acme"), "fake:///zone-a/i-1");
        assert_eq!(vm.instance_id("fake").as_deref(), Some("/zone-a/i-1"));

        let vm = FakeInstance::new("n1").without_provider_id();
        assert_eq!(vm.resolved_provider_id("fake"), "");
        assert_eq!(vm.instance_id("fake"), None);
    }

    #[test]
    fn has_provider_id_agrees_with_the_resolved_provider_id() {
        let instances = [
            FakeInstance::new("n1"),
            FakeInstance::new("n1").with_provider_id("fake:///zone-a/i-1"),
            FakeInstance::new("n1").with_provider_id("fake://n2"),
            FakeInstance::new("n1").without_provider_id(),
        ];
        let ids = [
            "",
            "fake://n1",
            "acme://n1",
            "fake://n",
            "fake://n1x",
            "fakefake://n1",
            "fake:/n1",
            "fake://n2",
            "fake:///zone-a/i-1",
            "n1",
        ];
        for vm in &instances {
            for provider in ["fake", "acme"] {
                for id in ids {
                    let resolved = vm.resolved_provider_id(provider);
                    assert_eq!(
                        vm.has_provider_id(provider, id),
                        !resolved.is_empty() && resolved == id,
                        "{vm:?} under {provider} against {id:?}"
                    );
                }
            }
        }
    }

    #[test]
    fn builder_sets_every_field_and_metadata_reports_them() {
        let vm = FakeInstance::new("n1")
            .with_internal_ip("10.0.0.1")
            .with_external_ip("203.0.113.9")
            .with_hostname("n1.example")
            .with_address("InternalDNS", "n1.internal")
            .with_instance_type("fake.small")
            .with_zone("z", "r")
            .with_label("a.example.com/x", "1")
            .with_shutdown(true);
        let types: Vec<&str> = vm.addresses.iter().map(|a| a.type_.as_str()).collect();
        assert_eq!(
            types,
            ["InternalIP", "ExternalIP", "Hostname", "InternalDNS"]
        );
        assert!(vm.shutdown);
        let meta = vm.metadata("fake");
        assert_eq!(meta.provider_id, "fake://n1");
        assert_eq!(meta.instance_type, "fake.small");
        assert_eq!((meta.zone.as_str(), meta.region.as_str()), ("z", "r"));
        assert_eq!(meta.node_addresses, vm.addresses);
        assert_eq!(
            meta.additional_labels
                .get("a.example.com/x")
                .map(String::as_str),
            Some("1")
        );

        let replaced = vm.with_addresses(vec![]).with_no_metadata();
        assert!(replaced.addresses.is_empty());
        assert!(replaced.no_metadata);
    }
}
