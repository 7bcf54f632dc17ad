//! What the cloud's instance answers mean for the node controllers: the lookups' results, a bulk answer checked
//! and split per node, the providerID rule of InstancesV2, and the errors naming the node and the operation.

use ccm_core::helpers::{node_name, node_provider_id};
use ccm_core::intercept::Operation;
use ccm_core::{CloudError, InstanceLookup, InstanceMetadata, Zone};
use k8s_openapi::api::core::v1::{Node, NodeAddress};

use crate::error::Error;

/// Where the V1 path found the node's providerID.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ProviderIdLookup {
    /// The providerID (from the spec, or `<provider>://<instance id>`).
    Found(String),
    /// The instance is gone (`instance_id` returned InstanceNotFound).
    InstanceNotFound,
}

/// [`InstanceLookup::Skip`] → the node controller skips the node on purpose, as Go does for nil metadata.
pub(crate) type MetadataResult = Result<InstanceLookup, Error>;

/// Wraps a cloud error of `operation` for `node`.
pub(crate) fn cloud_err(node: &Node, operation: Operation) -> impl FnOnce(CloudError) -> Error {
    let node = node_name(node).to_owned();
    move |source| Error::Cloud {
        node,
        operation,
        source,
    }
}

/// An InstancesV2 metadata answer as initialization uses it: [`fill_provider_id`], or [`Error::MissingProviderId`].
pub(crate) fn complete(node: &Node, lookup: InstanceLookup) -> MetadataResult {
    match lookup {
        InstanceLookup::Skip { reason } => Ok(InstanceLookup::Skip { reason }),
        InstanceLookup::Found(meta) => fill_provider_id(node, meta)
            .map(InstanceLookup::Found)
            .ok_or_else(|| Error::MissingProviderId {
                node: node_name(node).to_owned(),
            }),
    }
}

/// Check a bulk answer's length and wrap each item's error with its node.
pub(crate) fn bulk_items<T>(
    nodes: &[Node],
    operation: Operation,
    item_operation: Operation,
    answers: Result<Vec<Result<T, CloudError>>, CloudError>,
) -> Result<Vec<Result<T, Error>>, Error> {
    let failed = |source| Error::BulkCloud {
        nodes: nodes.len(),
        operation,
        source,
    };
    let answers = answers.map_err(failed)?;
    if answers.len() != nodes.len() {
        return Err(failed(CloudError::message(format!(
            "the provider returned {} answers for {} nodes; a bulk call must answer every node, in order",
            answers.len(),
            nodes.len()
        ))));
    }
    Ok(nodes
        .iter()
        .zip(answers)
        .map(|(node, answer)| answer.map_err(cloud_err(node, item_operation)))
        .collect())
}

/// Go `GetInstanceProviderID` for a node without one: the V1 `instance_id` answer as `<provider>://<instance id>`;
/// InstanceNotFound means the instance is gone, any other error stays an error (never "gone").
pub(crate) fn provider_id_from_instance_id(
    provider_name: &str,
    instance_id: Result<String, CloudError>,
) -> Result<ProviderIdLookup, CloudError> {
    match instance_id {
        Ok(id) => Ok(ProviderIdLookup::Found(format!("{provider_name}://{id}"))),
        Err(err) if err.is_instance_not_found() => Ok(ProviderIdLookup::InstanceNotFound),
        Err(err) => Err(err),
    }
}

/// The error of a V1 call made by providerID and then by node name, both failed: the by-name error (its kind
/// decides the retry) with the by-providerID one as context.
pub(crate) fn both_failed(
    provider_id: &str,
    by_id: &CloudError,
    by_name: CloudError,
) -> CloudError {
    by_name.context(format!(
        "by provider ID {provider_id}: {by_id}; by node name"
    ))
}

/// Go `shutdownInCloudProvider` on V1: a provider that cannot tell (NotImplemented) means "not shut down".
pub(crate) fn v1_shutdown(answer: Result<bool, CloudError>) -> Result<bool, CloudError> {
    match answer {
        Err(err) if err.is_not_implemented() => Ok(false),
        other => other,
    }
}

/// The metadata the V1 answers make up (Go: `getInstanceMetadata` without InstancesV2); no zone or region when
/// the provider has no Zones.
pub(crate) fn v1_metadata(
    provider_id: String,
    instance_type: String,
    addresses: Vec<NodeAddress>,
    zone: Option<Zone>,
) -> InstanceMetadata {
    let meta = InstanceMetadata::new(provider_id)
        .with_instance_type(instance_type)
        .with_addresses(addresses);
    match zone {
        Some(zone) => meta.with_zone(zone.failure_domain).with_region(zone.region),
        None => meta,
    }
}

/// V2 rule (Go 1.30+): metadata without a providerID takes the node's; if the node has none either, `None` (the
/// node must stay tainted).
///
/// ```
/// use ccm_core::InstanceMetadata;
/// use ccm_nodecontroller::fill_provider_id;
/// use k8s_openapi::api::core::v1::{Node, NodeSpec};
///
/// let node = Node { spec: Some(NodeSpec { provider_id: Some("fake://a".into()), ..Default::default() }), ..Default::default() };
/// assert_eq!(fill_provider_id(&node, InstanceMetadata::new("")).unwrap().provider_id, "fake://a");
/// assert!(fill_provider_id(&Node::default(), InstanceMetadata::new("")).is_none());
/// ```
pub fn fill_provider_id(node: &Node, mut meta: InstanceMetadata) -> Option<InstanceMetadata> {
    if meta.provider_id.is_empty() {
        let spec_id = node_provider_id(node);
        if spec_id.is_empty() {
            return None;
        }
        meta.provider_id = spec_id.to_owned();
    }
    Some(meta)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_instance_id_becomes_a_provider_id_and_only_not_found_means_gone() {
        assert_eq!(
            provider_id_from_instance_id("fake", Ok("i-1".into())).unwrap(),
            ProviderIdLookup::Found("fake://i-1".into())
        );
        assert_eq!(
            provider_id_from_instance_id("fake", Err(CloudError::InstanceNotFound)).unwrap(),
            ProviderIdLookup::InstanceNotFound
        );
        let err = provider_id_from_instance_id("fake", Err(CloudError::message("down")));
        assert!(err.unwrap_err().to_string().contains("down"));
    }

    #[test]
    fn both_errors_are_reported_with_the_by_name_kind() {
        let err = both_failed(
            "fake://a",
            &CloudError::message("by id down"),
            CloudError::InstanceNotFound,
        );
        assert!(err.is_instance_not_found());
        let text = err.to_string();
        assert!(
            text.contains("fake://a") && text.contains("by id down"),
            "{text}"
        );
    }

    #[test]
    fn v1_shutdown_not_implemented_is_not_shut_down() {
        assert!(!v1_shutdown(Err(CloudError::NotImplemented)).unwrap());
        assert!(v1_shutdown(Ok(true)).unwrap());
        assert!(v1_shutdown(Err(CloudError::InstanceNotFound)).is_err());
    }

    #[test]
    fn v1_metadata_has_a_zone_only_with_zones() {
        let meta = v1_metadata("fake://a".into(), "t".into(), vec![], None);
        assert_eq!((meta.zone.as_str(), meta.region.as_str()), ("", ""));
        let meta = v1_metadata(
            "fake://a".into(),
            "t".into(),
            vec![],
            Some(Zone::new("z", "r")),
        );
        assert_eq!((meta.zone.as_str(), meta.region.as_str()), ("z", "r"));
        assert_eq!(
            (meta.provider_id.as_str(), meta.instance_type.as_str()),
            ("fake://a", "t")
        );
    }
}
