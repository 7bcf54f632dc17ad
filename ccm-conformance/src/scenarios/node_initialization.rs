//! The node-initialization scenario (cloud node controller).

use ccm_core::helpers::node_has_taint;
use ccm_core::{CloudProvider, names};
use k8s_openapi::api::core::v1::{Node, NodeAddress};

use super::world::{NodeShape, World};
use crate::context::{Check, fail, skip};
use crate::fixture::InstanceRef;
use crate::validate::address_set;

/// What the node controller should write for an instance, asked from the provider the way the controller asks.
#[derive(Debug, Clone, Default, PartialEq)]
pub(super) struct Expected {
    pub(super) provider_id: Option<String>,
    zone: String,
    region: String,
    instance_type: String,
    addresses: Vec<NodeAddress>,
}

pub(super) async fn expected_init(
    provider: &std::sync::Arc<dyn CloudProvider>,
    instance: &InstanceRef,
    with_provider_id: bool,
) -> Result<Expected, String> {
    let node = if with_provider_id {
        instance.node()
    } else {
        instance.node_without_provider_id()
    };
    if let Some(v2) = std::sync::Arc::clone(provider).instances_v2() {
        let meta = v2
            .instance_metadata(&node)
            .await
            .map_err(|e| format!("instance_metadata of {} failed: {e}", instance.node_name))?
            .into_found()
            .ok_or_else(|| {
                format!(
                    "instance_metadata of {} is InstanceLookup::Skip, so the node controller skips the Node",
                    instance.node_name
                )
            })?;
        let provider_id = (!meta.provider_id.is_empty())
            .then_some(meta.provider_id)
            .or_else(|| instance.provider_id.clone());
        return Ok(Expected {
            provider_id,
            zone: meta.zone,
            region: meta.region,
            instance_type: meta.instance_type,
            addresses: meta.node_addresses,
        });
    }
    let v1 = std::sync::Arc::clone(provider)
        .instances()
        .ok_or_else(|| "the provider supports neither InstancesV2 nor Instances".to_owned())?;
    let id = v1
        .instance_id(&instance.node_name)
        .await
        .map_err(|e| format!("instance_id of {} failed: {e}", instance.node_name))?;
    let provider_id = format!("{}://{id}", provider.provider_name());
    let instance_type = v1
        .instance_type_by_provider_id(&provider_id)
        .await
        .unwrap_or_default();
    let addresses = v1
        .node_addresses_by_provider_id(&provider_id)
        .await
        .unwrap_or_default();
    let zone = match std::sync::Arc::clone(provider).zones() {
        Some(zones) => zones
            .get_zone_by_provider_id(&provider_id)
            .await
            .unwrap_or_default(),
        None => ccm_core::Zone::default(),
    };
    Ok(Expected {
        provider_id: Some(provider_id),
        zone: zone.failure_domain,
        region: zone.region,
        instance_type,
        addresses,
    })
}

/// What is still missing on `node` compared with `expected` (`Ok` when initialized as expected).
fn initialization_gaps(node: &Node, expected: &Expected) -> Result<(), String> {
    let mut gaps = Vec::new();
    if node_has_taint(node, names::taints::UNINITIALIZED) {
        gaps.push("the uninitialized taint is still there".to_owned());
    }
    let provider_id = ccm_core::helpers::node_provider_id(node);
    if let Some(want) = &expected.provider_id
        && provider_id != want
    {
        gaps.push(format!(
            "spec.providerID is {provider_id:?}, expected {want:?}"
        ));
    }
    let labels = node.metadata.labels.clone().unwrap_or_default();
    for (key, want) in [
        (names::labels::TOPOLOGY_ZONE, &expected.zone),
        (names::labels::TOPOLOGY_REGION, &expected.region),
        (names::labels::INSTANCE_TYPE, &expected.instance_type),
    ] {
        if !want.is_empty() && labels.get(key) != Some(want) {
            gaps.push(format!(
                "label {key} is {:?}, expected {want:?}",
                labels.get(key)
            ));
        }
    }
    let have = address_set(
        node.status
            .as_ref()
            .and_then(|s| s.addresses.as_deref())
            .unwrap_or_default(),
    );
    let missing: Vec<String> = address_set(&expected.addresses)
        .difference(&have)
        .cloned()
        .collect();
    if !missing.is_empty() {
        gaps.push(format!("status.addresses lacks {}", missing.join(", ")));
    }
    if gaps.is_empty() {
        Ok(())
    } else {
        Err(gaps.join("; "))
    }
}

pub(super) async fn node_initialization(world: &World) -> Check {
    let running = world.fixture().running.clone().map_or_else(
        || skip("the fixture names no running instance (set ConformanceFixture::with_running)"),
        Ok,
    )?;
    // Without --provider-id unless the provider cannot look nodes up by name.
    let provider_id = (!world.fixture().lookup_by_name)
        .then_some(running.provider_id.as_deref())
        .flatten();
    let what = format!("the cloud to describe instance {}", running.node_name);
    let expected = world
        .wait(&what, || {
            expected_init(&world.provider, &running, provider_id.is_some())
        })
        .await?;
    let ctx = world.context(&world.fixture().cluster_name, None);
    let controller = ccm_nodecontroller::CloudNodeController::new(&ctx, Default::default())
        .or_else(|e| fail(format!("building the cloud node controller failed: {e}")))?;
    let node = world.node(
        &running,
        NodeShape {
            provider_id,
            uninitialized: true,
            ready: true,
            pod_cidr: None,
        },
    );
    world.create_node(&node).await?;
    world.step(format!(
        "created Node {} with the uninitialized taint{}",
        running.node_name,
        if provider_id.is_some() {
            " and its providerID"
        } else {
            ", without providerID"
        }
    ));
    world.start(&ctx, Box::new(controller));
    let name = running.node_name.as_str();
    let what = format!(
        "Node {name} to be initialized (providerID {}, zone {:?}, region {:?}, instance type {:?}, {} cloud addresses)",
        expected.provider_id.as_deref().unwrap_or("kept"),
        expected.zone,
        expected.region,
        expected.instance_type,
        expected.addresses.len()
    );
    world
        .wait(&what, || async {
            match world.get_node(name).await? {
                None => Err("the Node is gone".to_owned()),
                Some(node) => initialization_gaps(&node, &expected),
            }
        })
        .await?;
    world
        .wait_event(
            "default",
            name,
            names::events::SYNCED,
            names::components::CLOUD_NODE_CONTROLLER,
        )
        .await
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenarios::RUN_LABEL;
    use crate::scenarios::world::build_node;

    #[test]
    fn initialization_gaps_name_what_is_missing() {
        let expected = Expected {
            provider_id: Some("fake://n1".into()),
            zone: "zone-a".into(),
            region: String::new(),
            instance_type: "m".into(),
            addresses: vec![NodeAddress {
                type_: "InternalIP".into(),
                address: "10.0.0.1".into(),
            }],
        };
        let instance = InstanceRef::new("n1");
        let fresh = build_node(
            &instance,
            (RUN_LABEL, "x"),
            NodeShape {
                provider_id: None,
                uninitialized: true,
                ready: true,
                pod_cidr: None,
            },
        );
        let gaps = initialization_gaps(&fresh, &expected).unwrap_err();
        assert!(gaps.contains("uninitialized taint"), "{gaps}");
        assert!(gaps.contains("spec.providerID is \"\""), "{gaps}");
        assert!(gaps.contains("topology.kubernetes.io/zone"), "{gaps}");
        assert!(!gaps.contains("topology.kubernetes.io/region"), "{gaps}");
        assert!(gaps.contains("lacks InternalIP=10.0.0.1"), "{gaps}");

        let mut done = build_node(
            &instance.clone().with_internal_ip("10.0.0.1"),
            (RUN_LABEL, "x"),
            NodeShape {
                provider_id: Some("fake://n1"),
                uninitialized: false,
                ready: true,
                pod_cidr: None,
            },
        );
        let labels = done.metadata.labels.get_or_insert_default();
        labels.insert(names::labels::TOPOLOGY_ZONE.into(), "zone-a".into());
        labels.insert(names::labels::INSTANCE_TYPE.into(), "m".into());
        assert_eq!(initialization_gaps(&done, &expected), Ok(()));
    }
}
