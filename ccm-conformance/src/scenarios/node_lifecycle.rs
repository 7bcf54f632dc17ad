//! The node-lifecycle scenario (cloud node lifecycle controller).

use std::time::Duration;

use ccm_core::helpers::node_has_taint;
use ccm_core::names;

use super::world::{NodeShape, World};
use crate::context::{Check, fail};
use crate::fixture::InstanceRef;

pub(super) async fn node_lifecycle(world: &World) -> Check {
    let fixture = world.fixture().clone();
    let ctx = world.context(&fixture.cluster_name, None);
    let config = ccm_nodecontroller::CloudNodeLifecycleConfig::default()
        .with_node_monitor_period(Duration::from_secs(1));
    let controller =
        ccm_nodecontroller::CloudNodeLifecycleController::new(&ctx, config).or_else(|e| {
            fail(format!(
                "building the cloud node lifecycle controller failed: {e}"
            ))
        })?;

    let unknown = match &fixture.unknown {
        Some(unknown) => unknown.clone(),
        None => {
            let name = format!("ccm-conformance-absent-{}", world.id);
            let id = format!("{}://{name}", world.provider.provider_name());
            InstanceRef::new(name).with_provider_id(id)
        }
    };
    let unknown_id = world.provider_id(&unknown).await?;
    fn shape(provider_id: &str, ready: bool) -> NodeShape<'_> {
        NodeShape {
            provider_id: Some(provider_id),
            uninitialized: false,
            ready,
            pod_cidr: None,
        }
    }
    world
        .create_node(&world.node(&unknown, shape(&unknown_id, false)))
        .await?;
    world.step(format!(
        "created NotReady Node {} for the unknown instance {unknown_id}",
        unknown.node_name
    ));
    let stopped = match &fixture.stopped {
        Some(stopped) => {
            let id = world.provider_id(stopped).await?;
            world
                .create_node(&world.node(stopped, shape(&id, false)))
                .await?;
            world.step(format!(
                "created NotReady Node {} for the stopped instance {id}",
                stopped.node_name
            ));
            Some(stopped.clone())
        }
        None => None,
    };
    let running = match &fixture.running {
        Some(running) => {
            let id = world.provider_id(running).await?;
            world
                .create_node(&world.node(running, shape(&id, true)))
                .await?;
            world.step(format!(
                "created Ready Node {} for the running instance {id}",
                running.node_name
            ));
            Some(running.clone())
        }
        None => None,
    };
    world.start(&ctx, Box::new(controller));

    let gone = unknown.node_name.as_str();
    world
        .wait(
            &format!("Node {gone} (instance gone, NotReady) to be deleted"),
            || async {
                match world.get_node(gone).await? {
                    None => Ok(()),
                    Some(_) => Err("the Node still exists".to_owned()),
                }
            },
        )
        .await?;
    world
        .wait_event(
            "default",
            gone,
            names::events::DELETING_NODE,
            names::components::CLOUD_NODE_LIFECYCLE_CONTROLLER,
        )
        .await?;
    let shutdown = names::taints::SHUTDOWN;
    if let Some(stopped) = &stopped {
        let name = stopped.node_name.as_str();
        world
            .wait(
                &format!("Node {name} (instance stopped, NotReady) to get the {shutdown} taint"),
                || async {
                    match world.get_node(name).await? {
                        None => {
                            Err("the Node was deleted, but a stopped instance still exists"
                                .to_owned())
                        }
                        Some(node) if node_has_taint(&node, shutdown) => Ok(()),
                        Some(_) => Err("no shutdown taint".to_owned()),
                    }
                },
            )
            .await?;
    }
    if let Some(running) = &running {
        // The lifecycle controller has made at least one full pass (the other nodes changed); the Ready Node
        // must be untouched.
        match world.get_node(&running.node_name).await.or_else(fail)? {
            None => {
                return fail(format!(
                    "Node {} of the running instance was deleted",
                    running.node_name
                ));
            }
            Some(node) if node_has_taint(&node, shutdown) => {
                return fail(format!(
                    "Node {} of the running instance got the {shutdown} taint",
                    running.node_name
                ));
            }
            Some(_) => world.step(format!(
                "Node {} (running, Ready) left alone",
                running.node_name
            )),
        }
    }
    if let Some(stopped) = &stopped {
        let name = stopped.node_name.as_str();
        world.set_ready(name, true).await?;
        world
            .wait(
                &format!("Node {name}, Ready again, to lose the {shutdown} taint"),
                || async {
                    match world.get_node(name).await? {
                        None => Err("the Node was deleted".to_owned()),
                        Some(node) if node_has_taint(&node, shutdown) => {
                            Err("the shutdown taint is still there".to_owned())
                        }
                        Some(_) => Ok(()),
                    }
                },
            )
            .await?;
    }
    Ok(())
}
