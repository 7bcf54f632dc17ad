//! Value types passed between the controllers and a provider.
//!
//! They are `#[non_exhaustive]` so fields can be added without breaking providers: build them with `new` and the
//! `with_*` methods, read them through their public fields.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::NodeAddress;

/// What the cloud knows about the instance behind a Node (Go: `cloudprovider.InstanceMetadata`).
///
/// An empty string in `provider_id`, `instance_type`, `zone` or `region` means "not set".
///
/// ```
/// use ccm_core::InstanceMetadata;
/// use k8s_openapi::api::core::v1::NodeAddress;
///
/// let meta = InstanceMetadata::new("acme://i-0123")
///     .with_instance_type("m5.large")
///     .with_zone("eu-1a")
///     .with_region("eu-1")
///     .with_addresses(vec![NodeAddress { type_: "InternalIP".into(), address: "10.0.0.5".into() }])
///     .with_label("acme.example.com/rack", "r12");
/// assert_eq!(meta.zone, "eu-1a");
/// ```
#[derive(Debug, Clone, Default, PartialEq)]
#[non_exhaustive]
pub struct InstanceMetadata {
    /// The node's provider ID, conventionally `<provider>://<id>`; written to `spec.providerID` only if empty.
    pub provider_id: String,
    /// The instance type, written to `node.kubernetes.io/instance-type` (and the beta label).
    pub instance_type: String,
    /// The node's addresses, written to `status.addresses`.
    pub node_addresses: Vec<NodeAddress>,
    /// The zone, written to `topology.kubernetes.io/zone` (and the beta label).
    pub zone: String,
    /// The region, written to `topology.kubernetes.io/region` (and the beta label).
    pub region: String,
    /// Extra labels applied at initialization; keys under `kubernetes.io`/`k8s.io` are dropped, existing keys are
    /// never overwritten.
    pub additional_labels: BTreeMap<String, String>,
}

impl InstanceMetadata {
    /// Metadata with a provider ID and nothing else.
    pub fn new(provider_id: impl Into<String>) -> Self {
        InstanceMetadata {
            provider_id: provider_id.into(),
            ..Default::default()
        }
    }
    /// Set the instance type.
    pub fn with_instance_type(mut self, instance_type: impl Into<String>) -> Self {
        self.instance_type = instance_type.into();
        self
    }
    /// Set the addresses.
    pub fn with_addresses(mut self, addresses: Vec<NodeAddress>) -> Self {
        self.node_addresses = addresses;
        self
    }
    /// Set the zone.
    pub fn with_zone(mut self, zone: impl Into<String>) -> Self {
        self.zone = zone.into();
        self
    }
    /// Set the region.
    pub fn with_region(mut self, region: impl Into<String>) -> Self {
        self.region = region.into();
        self
    }
    /// Add one additional label.
    pub fn with_label(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.additional_labels.insert(key.into(), value.into());
        self
    }
    /// Add a set of additional labels (a later value replaces an earlier one for the same key).
    ///
    /// ```
    /// use ccm_core::InstanceMetadata;
    /// use std::collections::BTreeMap;
    ///
    /// let tags = BTreeMap::from([("acme.example.com/rack", "r12"), ("acme.example.com/pool", "gpu")]);
    /// let meta = InstanceMetadata::new("acme://i-0123")
    ///     .with_label("acme.example.com/team", "infra")
    ///     .with_labels(tags)
    ///     .with_labels([("acme.example.com/rack".to_owned(), "r13".to_owned())]);
    /// assert_eq!(meta.additional_labels.len(), 3);
    /// assert_eq!(meta.additional_labels["acme.example.com/rack"], "r13");
    /// ```
    pub fn with_labels<K, V>(mut self, labels: impl IntoIterator<Item = (K, V)>) -> Self
    where
        K: Into<String>,
        V: Into<String>,
    {
        self.additional_labels
            .extend(labels.into_iter().map(|(k, v)| (k.into(), v.into())));
        self
    }
}

/// The answer of [`InstancesV2::instance_metadata`](crate::InstancesV2::instance_metadata) for an instance the
/// cloud could look up.
///
/// An instance that is gone is not a lookup result but the error
/// [`CloudError::InstanceNotFound`](crate::CloudError::InstanceNotFound), so forgetting it cannot silently skip a
/// node; a skip is a deliberate answer with its reason, logged at info level (see `instance_metadata`).
///
/// ```
/// use ccm_core::{InstanceLookup, InstanceMetadata};
///
/// let found: InstanceLookup = InstanceMetadata::new("acme://i-0123").with_zone("eu-1a").into();
/// assert_eq!(found.found().map(|m| m.zone.as_str()), Some("eu-1a"));
///
/// let skip = InstanceLookup::skip("node is managed by the bare-metal provisioner");
/// assert!(skip.found().is_none());
/// assert_eq!(skip.skip_reason(), Some("node is managed by the bare-metal provisioner"));
/// match skip {
///     InstanceLookup::Found(meta) => println!("found {}", meta.provider_id),
///     InstanceLookup::Skip { reason } => println!("skipping: {reason}"),
/// }
/// ```
#[derive(Debug, Clone, PartialEq)]
pub enum InstanceLookup {
    /// The instance exists; its metadata.
    Found(InstanceMetadata),
    /// The provider deliberately does not manage this node; the node controller leaves it alone.
    Skip {
        /// Why, in lower case (logged with the node's name).
        reason: String,
    },
}

impl InstanceLookup {
    /// A deliberate skip with its reason.
    ///
    /// ```
    /// use ccm_core::InstanceLookup;
    ///
    /// let skip = InstanceLookup::skip("node runs on a bare-metal pool this provider does not manage");
    /// assert!(matches!(skip, InstanceLookup::Skip { ref reason } if reason.starts_with("node runs")));
    /// ```
    pub fn skip(reason: impl Into<String>) -> Self {
        InstanceLookup::Skip {
            reason: reason.into(),
        }
    }

    /// The metadata, if the instance was found.
    ///
    /// ```
    /// use ccm_core::{InstanceLookup, InstanceMetadata};
    ///
    /// let found = InstanceLookup::Found(InstanceMetadata::new("acme://1"));
    /// assert_eq!(found.found().map(|m| m.provider_id.as_str()), Some("acme://1"));
    /// assert!(InstanceLookup::skip("unmanaged").found().is_none());
    /// ```
    pub fn found(&self) -> Option<&InstanceMetadata> {
        match self {
            InstanceLookup::Found(meta) => Some(meta),
            InstanceLookup::Skip { .. } => None,
        }
    }

    /// The metadata by value, if the instance was found.
    ///
    /// ```
    /// use ccm_core::{InstanceLookup, InstanceMetadata};
    ///
    /// let meta = InstanceLookup::from(InstanceMetadata::new("acme://1")).into_found();
    /// assert_eq!(meta.map(|m| m.provider_id), Some("acme://1".to_owned()));
    /// assert!(InstanceLookup::skip("unmanaged").into_found().is_none());
    /// ```
    pub fn into_found(self) -> Option<InstanceMetadata> {
        match self {
            InstanceLookup::Found(meta) => Some(meta),
            InstanceLookup::Skip { .. } => None,
        }
    }

    /// The reason, if this is a skip.
    ///
    /// ```
    /// use ccm_core::{InstanceLookup, InstanceMetadata};
    ///
    /// assert_eq!(InstanceLookup::skip("unmanaged").skip_reason(), Some("unmanaged"));
    /// assert_eq!(InstanceLookup::from(InstanceMetadata::new("acme://1")).skip_reason(), None);
    /// ```
    pub fn skip_reason(&self) -> Option<&str> {
        match self {
            InstanceLookup::Found(_) => None,
            InstanceLookup::Skip { reason } => Some(reason),
        }
    }
}

/// Metadata is a [`InstanceLookup::Found`], so a provider writes `Ok(metadata.into())`.
///
/// ```
/// use ccm_core::{InstanceLookup, InstanceMetadata};
///
/// let lookup: InstanceLookup = InstanceMetadata::new("acme://1").into();
/// assert_eq!(lookup, InstanceLookup::Found(InstanceMetadata::new("acme://1")));
/// ```
impl From<InstanceMetadata> for InstanceLookup {
    fn from(meta: InstanceMetadata) -> Self {
        InstanceLookup::Found(meta)
    }
}

/// A failure domain (Go: `cloudprovider.Zone`).
///
/// ```
/// let zone = ccm_core::Zone::new("eu-1a", "eu-1");
/// assert_eq!(zone.region, "eu-1");
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct Zone {
    /// The zone (failure domain) name.
    pub failure_domain: String,
    /// The region name.
    pub region: String,
}

impl Zone {
    /// A zone in a region.
    pub fn new(failure_domain: impl Into<String>, region: impl Into<String>) -> Self {
        Zone {
            failure_domain: failure_domain.into(),
            region: region.into(),
        }
    }
}

/// A cloud route sending a pod CIDR to a node (Go: `cloudprovider.Route`).
///
/// ```
/// let route = ccm_core::Route::new("node-a", "10.244.1.0/24");
/// assert!(!route.blackhole);
/// ```
#[derive(Debug, Clone, Default, PartialEq)]
#[non_exhaustive]
pub struct Route {
    /// The cloud's name for the route; ignored by `create_route` (the name hint is used instead).
    pub name: String,
    /// The node the traffic goes to.
    pub target_node: String,
    /// Whether this provider's routes depend on node addresses (an address change recreates the route).
    pub enable_node_addresses: bool,
    /// The target node's addresses, when `enable_node_addresses` is set.
    pub target_node_addresses: Vec<NodeAddress>,
    /// The destination CIDR (a pod CIDR of the node).
    pub destination_cidr: String,
    /// True if the route's target is gone (the cloud reports it as a blackhole); such routes are deleted.
    pub blackhole: bool,
}

impl Route {
    /// A route of `destination_cidr` to `target_node`.
    pub fn new(target_node: impl Into<String>, destination_cidr: impl Into<String>) -> Self {
        Route {
            target_node: target_node.into(),
            destination_cidr: destination_cidr.into(),
            ..Default::default()
        }
    }
    /// Set the cloud's name for the route.
    pub fn with_name(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
        self
    }
    /// Mark the route as a blackhole.
    pub fn with_blackhole(mut self, blackhole: bool) -> Self {
        self.blackhole = blackhole;
        self
    }
    /// Attach the target node's addresses and opt in to address-aware routing.
    pub fn with_node_addresses(mut self, addresses: Vec<NodeAddress>) -> Self {
        self.enable_node_addresses = true;
        self.target_node_addresses = addresses;
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn lookup_accessors_agree(provider_id in "[a-z]{0,8}", reason in ".{0,16}", skip in any::<bool>()) {
            let lookup = if skip {
                InstanceLookup::skip(reason.clone())
            } else {
                InstanceMetadata::new(provider_id.clone()).into()
            };
            prop_assert_eq!(lookup.found().is_some(), !skip);
            prop_assert_eq!(lookup.skip_reason().is_some(), skip);
            if skip {
                prop_assert_eq!(lookup.skip_reason(), Some(reason.as_str()));
                prop_assert_eq!(lookup.clone().into_found(), None);
            } else {
                prop_assert_eq!(lookup.clone().into_found(), Some(InstanceMetadata::new(provider_id)));
            }
        }

        #[test]
        fn with_labels_equals_repeated_with_label(
            labels in proptest::collection::vec(("[a-c]{1,2}", "[x-z]{0,2}"), 0..8),
        ) {
            let one_by_one = labels
                .iter()
                .fold(InstanceMetadata::new("p"), |m, (k, v)| m.with_label(k.as_str(), v.as_str()));
            let at_once = InstanceMetadata::new("p").with_labels(labels.clone());
            prop_assert_eq!(one_by_one, at_once);
        }
    }
}
