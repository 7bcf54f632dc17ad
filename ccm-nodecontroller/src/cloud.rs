//! The node controllers' view of the provider's instance API: InstancesV2 when the provider has it, otherwise the
//! V1 Instances (and Zones) API with the Go reference's fallbacks. Every call is bounded by a timeout.

use std::sync::Arc;

use ccm_core::helpers::{node_name, node_provider_id};
use ccm_core::intercept::Operation;
use ccm_core::{CloudError, InstanceLookup, InstanceMetadata, Instances, InstancesV2};
use k8s_openapi::api::core::v1::{Node, NodeAddress};

use crate::error::Error;

pub(crate) mod answers;
mod api;

use api::Api;
pub(crate) use api::{CloudInstances, INSTANCES};

pub(crate) use answers::{MetadataResult, ProviderIdLookup, complete};
use answers::{
    both_failed, bulk_items, cloud_err, provider_id_from_instance_id, v1_metadata, v1_shutdown,
};

impl CloudInstances {
    /// The metadata used to initialize a node (Go: `getInstanceMetadata`). V2: `instance_metadata`, then
    /// [`complete`]. V1: the providerID from the spec or `<provider>://<instance_id>` (a NotImplemented
    /// `instance_id` means "no providerID"), then addresses, instance type and (if the provider has Zones) zone,
    /// each by providerID with a fallback by node name.
    pub(crate) async fn metadata(&self, node: &Node) -> MetadataResult {
        match &self.api {
            Api::V2(v2) => {
                let meta = v2
                    .instance_metadata(node)
                    .await
                    .map_err(cloud_err(node, Operation::InstanceMetadata))?;
                complete(node, meta)
            }
            Api::V1 { instances, zones } => {
                let provider_id = match self.v1_provider_id(instances, node).await {
                    Ok(ProviderIdLookup::Found(id)) => id,
                    Ok(ProviderIdLookup::InstanceNotFound) => {
                        return Err(cloud_err(node, Operation::InstanceId)(
                            CloudError::InstanceNotFound,
                        ));
                    }
                    Err(err) if err.is_not_implemented() => {
                        tracing::warn!(
                            node = node_name(node),
                            "cloud provider does not set node provider ID, using node name to discover the node"
                        );
                        String::new()
                    }
                    Err(err) => return Err(cloud_err(node, Operation::InstanceId)(err)),
                };
                let (id, name) = (provider_id.as_str(), node_name(node));
                let addresses = self.v1_addresses(instances, node, id).await?;
                let instance_type = by_id_or_name(
                    node,
                    Operation::InstanceType,
                    id,
                    || instances.instance_type_by_provider_id(id),
                    || instances.instance_type(name),
                )
                .await?;
                let zone = match zones {
                    Some(zones) => Some(
                        by_id_or_name(
                            node,
                            Operation::GetZoneByNodeName,
                            id,
                            || zones.get_zone_by_provider_id(id),
                            || zones.get_zone_by_node_name(name),
                        )
                        .await?,
                    ),
                    None => None,
                };
                Ok(v1_metadata(provider_id, instance_type, addresses, zone).into())
            }
        }
    }

    /// The addresses for the periodic sync (Go: `getInstanceNodeAddresses`), in `node_addresses`: V2
    /// `instance_metadata` (there is no address-only call), V1 addresses by providerID with a fallback by name.
    pub(crate) async fn addresses(&self, node: &Node) -> MetadataResult {
        match &self.api {
            Api::V2(v2) => v2
                .instance_metadata(node)
                .await
                .map_err(cloud_err(node, Operation::InstanceMetadata)),
            Api::V1 { instances, .. } => self
                .v1_addresses(instances, node, node_provider_id(node))
                .await
                .map(|addresses| InstanceMetadata::new("").with_addresses(addresses).into()),
        }
    }

    /// InstancesV2 for a native bulk call `operation` about `nodes` (only when
    /// [`supports_bulk`](Self::supports_bulk)); with the V1 API, the error of the whole call.
    fn bulk_api(&self, nodes: &[Node], operation: Operation) -> Result<&dyn InstancesV2, Error> {
        match &self.api {
            Api::V2(v2) => Ok(v2.as_ref()),
            Api::V1 { .. } => Err(Error::BulkCloud {
                nodes: nodes.len(),
                operation,
                source: CloudError::NotImplemented,
            }),
        }
    }

    /// The metadata of many nodes in one bulk call (InstancesV2 `instance_metadata_bulk`): through the instance
    /// cache, the answers are kept, so a node's next `instance_metadata` question is answered without a call. One
    /// answer per node, in order, each item's error wrapped with its node; the outer error means the whole call
    /// failed.
    pub(crate) async fn metadata_bulk(
        &self,
        nodes: &[Node],
    ) -> Result<Vec<Result<InstanceLookup, Error>>, Error> {
        let operation = Operation::InstanceMetadataBulk;
        let answers = self
            .bulk_api(nodes, operation)?
            .instance_metadata_bulk(nodes)
            .await;
        bulk_items(nodes, operation, Operation::InstanceMetadata, answers)
    }

    /// Whether the instances of many nodes exist (`exists`: InstancesV2 `instance_exists_bulk`) or are shut down
    /// (`instance_shutdown_bulk`), in one bulk call (only when [`supports_bulk`](Self::supports_bulk)): one answer
    /// per node, in order. The outer error means the whole call failed.
    pub(crate) async fn check_bulk(
        &self,
        nodes: &[Node],
        exists: bool,
    ) -> Result<Vec<Result<bool, Error>>, Error> {
        let (operation, item) = if exists {
            (Operation::InstanceExistsBulk, Operation::InstanceExists)
        } else {
            (Operation::InstanceShutdownBulk, Operation::InstanceShutdown)
        };
        let v2 = self.bulk_api(nodes, operation)?;
        let answers = if exists {
            v2.instance_exists_bulk(nodes).await
        } else {
            v2.instance_shutdown_bulk(nodes).await
        };
        bulk_items(nodes, operation, item, answers)
    }

    /// Whether the node's instance exists (Go: `ensureNodeExistsByProviderID`). For V1, also the providerID that
    /// was used, so the shutdown check does not look it up again.
    pub(crate) async fn exists(&self, node: &Node) -> Result<(bool, Option<String>), Error> {
        match &self.api {
            Api::V2(v2) => v2
                .instance_exists(node)
                .await
                .map(|e| (e, None))
                .map_err(cloud_err(node, Operation::InstanceExists)),
            Api::V1 { instances, .. } => {
                let provider_id = match self
                    .v1_provider_id(instances, node)
                    .await
                    .map_err(cloud_err(node, Operation::InstanceId))?
                {
                    ProviderIdLookup::Found(id) => id,
                    ProviderIdLookup::InstanceNotFound => return Ok((false, None)),
                };
                let exists = instances
                    .instance_exists_by_provider_id(&provider_id)
                    .await
                    .map_err(cloud_err(node, Operation::InstanceExistsByProviderId))?;
                Ok((exists, Some(provider_id)))
            }
        }
    }

    /// Whether the node's instance is shut down (Go: `shutdownInCloudProvider`). V1: NotImplemented and
    /// InstanceNotFound mean "not shut down". `provider_id` is the one [`exists`](Self::exists) resolved.
    pub(crate) async fn shutdown(
        &self,
        node: &Node,
        provider_id: Option<&str>,
    ) -> Result<bool, Error> {
        match &self.api {
            Api::V2(v2) => v2
                .instance_shutdown(node)
                .await
                .map_err(cloud_err(node, Operation::InstanceShutdown)),
            Api::V1 { instances, .. } => {
                let lookup = match provider_id {
                    Some(id) => ProviderIdLookup::Found(id.to_owned()),
                    None => self
                        .v1_provider_id(instances, node)
                        .await
                        .map_err(cloud_err(node, Operation::InstanceId))?,
                };
                let ProviderIdLookup::Found(provider_id) = lookup else {
                    return Ok(false);
                };
                let answer = instances
                    .instance_shutdown_by_provider_id(&provider_id)
                    .await;
                v1_shutdown(answer)
                    .map_err(cloud_err(node, Operation::InstanceShutdownByProviderId))
            }
        }
    }

    /// The node's providerID, or `<provider>://<instance_id(name)>` (Go: `GetInstanceProviderID`).
    async fn v1_provider_id(
        &self,
        instances: &Arc<dyn Instances>,
        node: &Node,
    ) -> Result<ProviderIdLookup, CloudError> {
        let spec_id = node_provider_id(node);
        if !spec_id.is_empty() {
            return Ok(ProviderIdLookup::Found(spec_id.to_owned()));
        }
        let answer = instances.instance_id(node_name(node)).await;
        provider_id_from_instance_id(&self.provider_name, answer)
    }

    async fn v1_addresses(
        &self,
        instances: &Arc<dyn Instances>,
        node: &Node,
        provider_id: &str,
    ) -> Result<Vec<NodeAddress>, Error> {
        by_id_or_name(
            node,
            Operation::NodeAddresses,
            provider_id,
            || instances.node_addresses_by_provider_id(provider_id),
            || instances.node_addresses(node_name(node)),
        )
        .await
    }
}

/// Run the by-providerID call, falling back to the by-name call on error. With no providerID only the by-name call
/// is made (Go also tries the by-providerID call with an empty ID, which cannot succeed). Either way a failure is
/// the by-name call's (`by_name_op`) for `node`, with the by-providerID error as context.
async fn by_id_or_name<T>(
    node: &Node,
    by_name_op: Operation,
    provider_id: &str,
    by_id: impl AsyncFnOnce() -> Result<T, CloudError>,
    by_name: impl AsyncFnOnce() -> Result<T, CloudError>,
) -> Result<T, Error> {
    let answer = if provider_id.is_empty() {
        by_name().await
    } else {
        match by_id().await {
            Ok(value) => Ok(value),
            Err(by_id_err) => by_name()
                .await
                .map_err(|by_name_err| both_failed(provider_id, &by_id_err, by_name_err)),
        }
    };
    answer.map_err(cloud_err(node, by_name_op))
}

#[cfg(test)]
mod tests {
    use super::*;
    use ccm_core::{CloudProvider, InstanceMetadata};

    fn retry_after(err: &Error) -> Option<Duration> {
        ccm_core::find_cloud_error(err).and_then(CloudError::retry_after)
    }
    use ccm_core::{
        ErrorKind, MockCloudProvider, MockInstances, MockInstancesV2, MockZones, Zone, Zones,
    };
    use k8s_openapi::api::core::v1::NodeSpec;
    use std::time::Duration;

    fn node(name: &str, provider_id: Option<&str>) -> Node {
        let mut n = Node {
            spec: Some(NodeSpec {
                provider_id: provider_id.map(Into::into),
                ..Default::default()
            }),
            ..Default::default()
        };
        n.metadata.name = Some(name.into());
        n
    }

    fn addr(ip: &str) -> NodeAddress {
        NodeAddress {
            type_: "InternalIP".into(),
            address: ip.into(),
        }
    }

    fn v1_cloud(instances: MockInstances, zones: Option<MockZones>) -> CloudInstances {
        let mut provider = MockCloudProvider::new();
        provider
            .expect_provider_name()
            .return_const("fake".to_owned());
        provider.expect_instances_v2().returning(|| None);
        let instances: Arc<dyn Instances> = Arc::new(instances);
        provider
            .expect_instances()
            .returning(move || Some(instances.clone()));
        let zones: Option<Arc<dyn Zones>> = zones.map(|z| Arc::new(z) as Arc<dyn Zones>);
        provider.expect_zones().returning(move || zones.clone());
        CloudInstances::for_controller(
            &(Arc::new(provider) as Arc<dyn CloudProvider>),
            Duration::from_secs(5),
            "test",
        )
        .expect("instances")
    }

    fn v2_cloud(v2: MockInstancesV2) -> CloudInstances {
        let mut provider = MockCloudProvider::new();
        provider
            .expect_provider_name()
            .return_const("fake".to_owned());
        let v2: Arc<dyn InstancesV2> = Arc::new(v2);
        provider
            .expect_instances_v2()
            .returning(move || Some(v2.clone()));
        CloudInstances::for_controller(
            &(Arc::new(provider) as Arc<dyn CloudProvider>),
            Duration::from_secs(5),
            "test",
        )
        .expect("instances")
    }

    #[test]
    fn no_instances_no_api() {
        let mut provider = MockCloudProvider::new();
        provider
            .expect_provider_name()
            .return_const("none".to_owned());
        provider.expect_instances_v2().returning(|| None);
        provider.expect_instances().returning(|| None);
        assert!(
            CloudInstances::for_controller(
                &(Arc::new(provider) as Arc<dyn CloudProvider>),
                Duration::from_secs(1),
                "test",
            )
            .is_err()
        );
    }

    #[tokio::test]
    async fn v1_metadata_synthesizes_provider_id_and_uses_zones() {
        // Go TestGetInstanceMetadata: "cloud implemented with Instances and provider ID".
        let mut inst = MockInstances::new();
        inst.expect_instance_id()
            .withf(|n| n == "node0")
            .returning(|_| Ok("12345".into()));
        inst.expect_node_addresses_by_provider_id()
            .withf(|id| id == "fake://12345")
            .returning(|_| Ok(vec![addr("10.0.0.1")]));
        inst.expect_instance_type_by_provider_id()
            .returning(|_| Ok("t1.micro".into()));
        let mut zones = MockZones::new();
        zones
            .expect_get_zone_by_provider_id()
            .returning(|_| Ok(Zone::new("zone-a", "region-1")));
        let cloud = v1_cloud(inst, Some(zones));
        assert!(!cloud.is_v2());
        let meta = cloud
            .metadata(&node("node0", None))
            .await
            .unwrap()
            .into_found()
            .unwrap();
        assert_eq!(meta.provider_id, "fake://12345");
        assert_eq!(meta.instance_type, "t1.micro");
        assert_eq!(meta.node_addresses, vec![addr("10.0.0.1")]);
        assert_eq!(
            (meta.zone.as_str(), meta.region.as_str()),
            ("zone-a", "region-1")
        );
    }

    #[tokio::test]
    async fn v1_provider_id_not_implemented_uses_names() {
        // Go: "cloud implemented with Instances (providerID not implemented)".
        let mut inst = MockInstances::new();
        inst.expect_instance_id()
            .returning(|_| Err(CloudError::NotImplemented.context("instance id")));
        inst.expect_node_addresses_by_provider_id().never();
        inst.expect_instance_type_by_provider_id().never();
        inst.expect_node_addresses()
            .withf(|n| n == "node0")
            .returning(|_| Ok(vec![addr("10.0.0.2")]));
        inst.expect_instance_type().returning(|_| Ok("big".into()));
        let cloud = v1_cloud(inst, None);
        let meta = cloud
            .metadata(&node("node0", None))
            .await
            .unwrap()
            .into_found()
            .unwrap();
        assert_eq!(meta.provider_id, "");
        assert_eq!(meta.instance_type, "big");
        assert_eq!(meta.zone, "");
    }

    #[tokio::test]
    async fn v1_spec_provider_id_is_used_without_instance_id_call() {
        // Go: "cloud implemented with Instances (providerID not implemented) and node with providerID".
        let mut inst = MockInstances::new();
        inst.expect_instance_id().never();
        inst.expect_node_addresses_by_provider_id()
            .withf(|id| id == "fake://abc")
            .returning(|_| Ok(vec![addr("10.0.0.3")]));
        inst.expect_instance_type_by_provider_id()
            .returning(|_| Ok("t".into()));
        let cloud = v1_cloud(inst, None);
        let meta = cloud
            .metadata(&node("n", Some("fake://abc")))
            .await
            .unwrap()
            .into_found()
            .unwrap();
        assert_eq!(meta.provider_id, "fake://abc");
    }

    #[tokio::test]
    async fn v1_falls_back_by_name_and_reports_both_errors() {
        let mut inst = MockInstances::new();
        inst.expect_node_addresses_by_provider_id()
            .returning(|_| Err(CloudError::message("by id down")));
        inst.expect_node_addresses()
            .returning(|_| Ok(vec![addr("10.0.0.4")]));
        inst.expect_instance_type_by_provider_id()
            .returning(|_| Err(CloudError::message("by id down")));
        inst.expect_instance_type()
            .returning(|_| Err(CloudError::InstanceNotFound));
        let cloud = v1_cloud(inst, None);
        let err = cloud
            .metadata(&node("n", Some("fake://n")))
            .await
            .unwrap_err();
        assert_eq!(err.cloud_kind(), Some(ErrorKind::InstanceNotFound));
        let text = err.to_string();
        assert!(
            text.contains("by id down") && text.contains("instance not found"),
            "{text}"
        );
    }

    #[tokio::test]
    async fn v1_zone_error_fails_initialization() {
        let mut inst = MockInstances::new();
        inst.expect_node_addresses_by_provider_id()
            .returning(|_| Ok(vec![]));
        inst.expect_instance_type_by_provider_id()
            .returning(|_| Ok("t".into()));
        let mut zones = MockZones::new();
        zones
            .expect_get_zone_by_provider_id()
            .returning(|_| Err(CloudError::message("a")));
        zones
            .expect_get_zone_by_node_name()
            .returning(|_| Err(CloudError::message("b")));
        let cloud = v1_cloud(inst, Some(zones));
        let err = cloud
            .metadata(&node("n", Some("fake://n")))
            .await
            .unwrap_err();
        assert!(
            matches!(
                err,
                Error::Cloud {
                    operation: Operation::GetZoneByNodeName,
                    ..
                }
            ),
            "{err}"
        );
    }

    #[tokio::test]
    async fn v1_other_instance_id_error_is_an_error() {
        let mut inst = MockInstances::new();
        inst.expect_instance_id()
            .returning(|_| Err(CloudError::message("api down")));
        let cloud = v1_cloud(inst, None);
        assert!(cloud.metadata(&node("n", None)).await.is_err());
    }

    #[tokio::test]
    async fn v2_metadata_provider_id_rules() {
        // Go: "cloud implemented with InstancesV2 (without providerID)" and "... and node with providerID".
        let mut v2 = MockInstancesV2::new();
        v2.expect_instance_metadata()
            .returning(|_| Ok(InstanceMetadata::new("").with_zone("z").into()));
        let cloud = v2_cloud(v2);
        assert!(cloud.is_v2());
        let err = cloud.metadata(&node("n", None)).await.unwrap_err();
        assert!(matches!(err, Error::MissingProviderId { .. }));
        let meta = cloud
            .metadata(&node("n", Some("fake://spec")))
            .await
            .unwrap()
            .into_found()
            .unwrap();
        assert_eq!(meta.provider_id, "fake://spec");
    }

    #[tokio::test]
    async fn v2_skip_is_kept_with_its_reason_and_errors_propagate() {
        let mut v2 = MockInstancesV2::new();
        let mut seq = mockall::Sequence::new();
        v2.expect_instance_metadata()
            .times(1)
            .in_sequence(&mut seq)
            .returning(|_| Ok(InstanceLookup::skip("unmanaged node")));
        v2.expect_instance_metadata()
            .times(1)
            .in_sequence(&mut seq)
            .returning(|_| {
                Err(CloudError::Throttled {
                    message: "slow down".into(),
                    retry_after: Some(Duration::from_secs(3)),
                })
            });
        let cloud = v2_cloud(v2);
        assert_eq!(
            cloud.metadata(&node("n", None)).await.unwrap(),
            InstanceLookup::skip("unmanaged node")
        );
        let err = cloud.metadata(&node("n", None)).await.unwrap_err();
        assert_eq!(err.cloud_kind(), Some(ErrorKind::Throttled));
        assert_eq!(retry_after(&err), Some(Duration::from_secs(3)));
    }

    struct Slow;
    #[async_trait::async_trait]
    impl InstancesV2 for Slow {
        async fn instance_exists(&self, _node: &Node) -> Result<bool, CloudError> {
            tokio::time::sleep(Duration::from_secs(3600)).await;
            Ok(true)
        }
        async fn instance_shutdown(&self, _node: &Node) -> Result<bool, CloudError> {
            Ok(false)
        }
        async fn instance_metadata(&self, _node: &Node) -> Result<InstanceLookup, CloudError> {
            tokio::time::sleep(Duration::from_secs(3600)).await;
            Ok(InstanceLookup::skip("never answered"))
        }
    }

    #[tokio::test(start_paused = true)]
    async fn calls_time_out() {
        let mut provider = MockCloudProvider::new();
        provider
            .expect_provider_name()
            .return_const("fake".to_owned());
        provider
            .expect_instances_v2()
            .returning(|| Some(Arc::new(Slow)));
        let provider: Arc<dyn CloudProvider> = Arc::new(provider);
        let cloud =
            CloudInstances::for_controller(&provider, Duration::from_secs(10), "test").unwrap();
        let err = cloud.metadata(&node("n", None)).await.unwrap_err();
        assert_eq!(err.cloud_kind(), Some(ErrorKind::Timeout));
        let err = cloud.exists(&node("n", None)).await.unwrap_err();
        assert_eq!(err.cloud_kind(), Some(ErrorKind::Timeout));
    }

    #[tokio::test]
    async fn v1_lifecycle_semantics() {
        // Go Test_NodesShutdown / Test_NodesDeleted / Test_GetProviderID, V1 rows.
        let mut inst = MockInstances::new();
        inst.expect_instance_id().returning(|name| match name {
            "gone" => Err(CloudError::InstanceNotFound),
            "broken" => Err(CloudError::message("unknown")),
            _ => Ok("id-1".into()),
        });
        inst.expect_instance_exists_by_provider_id()
            .returning(|id| Ok(id == "fake://id-1" || id == "fake://spec"));
        inst.expect_instance_shutdown_by_provider_id()
            .returning(|id| match id {
                "fake://spec" => Err(CloudError::NotImplemented),
                _ => Ok(true),
            });
        let cloud = v1_cloud(inst, None);
        // InstanceID InstanceNotFound → does not exist.
        assert_eq!(
            cloud.exists(&node("gone", None)).await.unwrap(),
            (false, None)
        );
        // Unknown error from InstanceID → error (never "gone").
        assert!(cloud.exists(&node("broken", None)).await.is_err());
        // Synthesized providerID is reused for the shutdown check.
        let (exists, id) = cloud.exists(&node("n", None)).await.unwrap();
        assert!(exists);
        assert_eq!(id.as_deref(), Some("fake://id-1"));
        assert!(
            cloud
                .shutdown(&node("n", None), id.as_deref())
                .await
                .unwrap()
        );
        // NotImplemented shutdown → false; InstanceNotFound while resolving → false.
        assert!(
            !cloud
                .shutdown(&node("n", Some("fake://spec")), None)
                .await
                .unwrap()
        );
        assert!(!cloud.shutdown(&node("gone", None), None).await.unwrap());
        assert!(cloud.shutdown(&node("broken", None), None).await.is_err());
    }

    #[tokio::test]
    async fn addresses_v1_and_v2() {
        let mut inst = MockInstances::new();
        inst.expect_node_addresses_by_provider_id()
            .returning(|_| Ok(vec![addr("10.1.1.1")]));
        let cloud = v1_cloud(inst, None);
        assert_eq!(
            cloud.addresses(&node("n", Some("fake://n"))).await.unwrap(),
            InstanceMetadata::new("")
                .with_addresses(vec![addr("10.1.1.1")])
                .into()
        );
        let mut v2 = MockInstancesV2::new();
        v2.expect_instance_metadata().returning(|_| {
            Ok(InstanceMetadata::new("fake://n")
                .with_addresses(vec![addr("10.2.2.2")])
                .into())
        });
        let cloud = v2_cloud(v2);
        assert_eq!(
            cloud.addresses(&node("n", None)).await.unwrap(),
            InstanceMetadata::new("fake://n")
                .with_addresses(vec![addr("10.2.2.2")])
                .into()
        );
    }

    #[tokio::test]
    async fn bulk_answers_are_checked_and_wrapped_per_node() {
        let mut v2 = MockInstancesV2::new();
        v2.expect_supports_bulk().return_const(true);
        v2.expect_instance_exists_bulk().returning(|nodes| {
            Ok(nodes
                .iter()
                .map(|n| match node_name(n) {
                    "bad" => Err(CloudError::message("item down")),
                    name => Ok(name != "gone"),
                })
                .collect())
        });
        v2.expect_instance_metadata_bulk().returning(|nodes| {
            Ok(nodes
                .iter()
                .skip(1)
                .map(|_| Ok(InstanceLookup::skip("x")))
                .collect())
        });
        let cloud = v2_cloud(v2);
        assert!(cloud.supports_bulk());
        let nodes = vec![node("a", None), node("gone", None), node("bad", None)];
        let answers = cloud.check_bulk(&nodes, true).await.unwrap();
        assert!(matches!(answers[0], Ok(true)));
        assert!(matches!(answers[1], Ok(false)));
        let err = answers[2].as_ref().unwrap_err();
        assert!(
            matches!(err, Error::Cloud { node, operation: Operation::InstanceExists, .. } if node == "bad"),
            "{err}"
        );
        // a provider answering for fewer nodes than asked fails the whole call
        let err = cloud.metadata_bulk(&nodes).await.unwrap_err();
        assert!(
            matches!(
                err,
                Error::BulkCloud {
                    nodes: 3,
                    operation: Operation::InstanceMetadataBulk,
                    ..
                }
            ),
            "{err}"
        );
        assert!(
            err.to_string().contains("returned 2 answers for 3 nodes"),
            "{err}"
        );
    }

    #[tokio::test]
    async fn a_failed_bulk_call_keeps_its_kind_and_v1_has_no_bulk() {
        let mut v2 = MockInstancesV2::new();
        v2.expect_supports_bulk().return_const(true);
        v2.expect_instance_exists_bulk().returning(|_| {
            Err(CloudError::Throttled {
                message: "quota".into(),
                retry_after: Some(Duration::from_secs(2)),
            })
        });
        let cloud = v2_cloud(v2);
        let err = cloud
            .check_bulk(&[node("a", None)], true)
            .await
            .unwrap_err();
        assert_eq!(err.cloud_kind(), Some(ErrorKind::Throttled));
        assert_eq!(retry_after(&err), Some(Duration::from_secs(2)));

        let mut plain = MockInstancesV2::new();
        plain.expect_supports_bulk().return_const(false);
        assert!(!v2_cloud(plain).supports_bulk());
        let v1 = v1_cloud(MockInstances::new(), None);
        assert!(!v1.supports_bulk());
        let err = v1.metadata_bulk(&[node("a", None)]).await.unwrap_err();
        assert_eq!(err.cloud_kind(), Some(ErrorKind::NotImplemented));
    }
}
