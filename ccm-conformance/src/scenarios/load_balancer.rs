//! The load-balancer scenario (service controller).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::PoisonError;
use std::time::Duration;

use ccm_core::names;
use k8s_openapi::api::core::v1::{Namespace, Service, ServicePort, ServiceSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::api::{Api, DeleteParams, PostParams};

use super::RUN_LABEL;
use super::world::{NodeShape, World};
use crate::context::{Check, fail, skip};
use crate::validate::{describe_status, status_addresses};

/// The Service of the load-balancer scenario.
fn scenario_service(world: &World, namespace: &str) -> Service {
    let mut service = Service {
        metadata: ObjectMeta {
            name: Some("conformance".to_owned()),
            namespace: Some(namespace.to_owned()),
            labels: Some(BTreeMap::from([(RUN_LABEL.to_owned(), world.id.clone())])),
            ..Default::default()
        },
        spec: Some(ServiceSpec {
            type_: Some("LoadBalancer".to_owned()),
            selector: Some(BTreeMap::from([(
                "app".to_owned(),
                "conformance".to_owned(),
            )])),
            ports: Some(vec![ServicePort {
                name: Some("http".to_owned()),
                protocol: Some("TCP".to_owned()),
                port: 80,
                target_port: Some(IntOrString::Int(8080)),
                ..Default::default()
            }]),
            ..Default::default()
        }),
        status: None,
    };
    if let Some(customize) = &world.fixture().customize_service {
        customize(&mut service);
        service.metadata.uid = None;
        service.metadata.resource_version = None;
        service.metadata.namespace = Some(namespace.to_owned());
    }
    service
}

pub(super) async fn load_balancer(world: &World) -> Check {
    let fixture = world.fixture().clone();
    let backends = fixture.effective_backends();
    if backends.is_empty() {
        return skip(
            "the fixture names no backend nodes or running instance (set ConformanceFixture::with_backend_nodes)",
        );
    }
    let lb = std::sync::Arc::clone(&world.provider)
        .load_balancer()
        .map_or_else(|| fail("CloudProvider::load_balancer() returned None"), Ok)?;
    let namespace = format!("ccm-conformance-{}", world.id);
    let namespaces: Api<Namespace> = Api::all(world.client.clone());
    let ns = Namespace {
        metadata: ObjectMeta {
            name: Some(namespace.clone()),
            labels: Some(BTreeMap::from([(RUN_LABEL.to_owned(), world.id.clone())])),
            ..Default::default()
        },
        ..Default::default()
    };
    namespaces
        .create(&PostParams::default(), &ns)
        .await
        .or_else(|e| fail(format!("creating namespace {namespace} failed: {e}")))?;
    *world
        .namespace
        .lock()
        .unwrap_or_else(PoisonError::into_inner) = Some(namespace.clone());

    for backend in &backends {
        let id = world.provider_id(backend).await?;
        let node = world.node(
            backend,
            NodeShape {
                provider_id: Some(&id),
                uninitialized: false,
                ready: true,
                pod_cidr: None,
            },
        );
        world.create_node(&node).await?;
    }
    let backend_names: BTreeSet<String> = backends.iter().map(|b| b.node_name.clone()).collect();
    world.step(format!(
        "created initialized Nodes {}",
        backend_names.iter().cloned().collect::<Vec<_>>().join(", ")
    ));

    let ctx = world.context(&fixture.cluster_name, Some(&namespace));
    let controller = ccm_servicecontroller::ServiceController::new(
        &ctx,
        ccm_servicecontroller::Config::default()
            .with_node_sync_debounce(Duration::from_millis(200)),
    )
    .or_else(|e| fail(format!("building the service controller failed: {e}")))?;
    world.start(&ctx, Box::new(controller));
    ctx.informers.wait_synced().await;

    let services: Api<Service> = Api::namespaced(world.client.clone(), &namespace);
    let service = scenario_service(world, &namespace);
    let key = format!("{namespace}/conformance");
    services
        .create(&PostParams::default(), &service)
        .await
        .or_else(|e| fail(format!("creating Service {key} failed: {e}")))?;
    world.step(format!("created Service {key} of type LoadBalancer"));

    let finalizer = names::finalizers::LOAD_BALANCER_CLEANUP;
    let ready = world
        .wait(
            &format!("Service {key} to get the {finalizer} finalizer and a load-balancer ingress"),
            || async {
                let svc = services
                    .get_opt("conformance")
                    .await
                    .map_err(|e| format!("reading the Service failed: {e}"))?
                    .ok_or_else(|| "the Service is gone".to_owned())?;
                let has_finalizer = svc
                    .metadata
                    .finalizers
                    .as_ref()
                    .is_some_and(|f| f.iter().any(|f| f == finalizer));
                let status = svc
                    .status
                    .as_ref()
                    .and_then(|s| s.load_balancer.clone())
                    .unwrap_or_default();
                match (has_finalizer, status_addresses(&status).is_empty()) {
                    (true, false) => Ok(svc),
                    (f, _) => Err(format!(
                        "finalizer present: {f}, status: {}",
                        describe_status(&status)
                    )),
                }
            },
        )
        .await?;
    world
        .wait_event(
            &namespace,
            "conformance",
            names::events::ENSURED_LOAD_BALANCER,
            names::components::SERVICE_CONTROLLER,
        )
        .await?;
    let written = ready
        .status
        .as_ref()
        .and_then(|s| s.load_balancer.clone())
        .unwrap_or_default();
    let cluster = fixture.cluster_name.as_str();
    world
        .wait(
            "the cloud to report the same ingress as the Service status",
            || async {
                match lb.get_load_balancer(cluster, &ready).await {
                    Ok(Some(cloud)) if status_addresses(&cloud) == status_addresses(&written) => {
                        Ok(())
                    }
                    Ok(Some(cloud)) => Err(format!(
                        "the cloud reports {}, the Service {}",
                        describe_status(&cloud),
                        describe_status(&written)
                    )),
                    Ok(None) => Err("get_load_balancer answers \"does not exist\"".to_owned()),
                    Err(e) => Err(format!("get_load_balancer failed: {e}")),
                }
            },
        )
        .await?;

    if let Some(inspector) = world.options.inspector.clone() {
        let expect_backends = |want: BTreeSet<String>, what: String| {
            let inspector = inspector.clone();
            let ready = &ready;
            async move {
                world
                    .wait(&what, || {
                        let inspector = inspector.clone();
                        let want = want.clone();
                        async move {
                            let seen = inspector
                                .backend_nodes(cluster, ready)
                                .await
                                .map_err(|e| format!("the inspector failed: {e}"))?
                                .ok_or_else(|| "the inspector finds no load balancer".to_owned())?;
                            let seen: BTreeSet<String> = seen.into_iter().collect();
                            if seen == want {
                                Ok(())
                            } else {
                                Err(format!("backends {seen:?}"))
                            }
                        }
                    })
                    .await
            }
        };
        expect_backends(
            backend_names.clone(),
            format!("the load balancer's backends to be {backend_names:?}"),
        )
        .await?;
        if backends.len() > 1 {
            let leaving = backends[backends.len() - 1].node_name.clone();
            world.delete_node(&leaving).await?;
            world.step(format!("deleted backend Node {leaving}"));
            let mut rest = backend_names.clone();
            rest.remove(&leaving);
            expect_backends(
                rest.clone(),
                format!("the load balancer's backends to follow the Nodes: {rest:?}"),
            )
            .await?;
        }
    } else {
        world.step("no inspector: backend checks left out");
    }

    services
        .delete("conformance", &DeleteParams::default())
        .await
        .or_else(|e| fail(format!("deleting Service {key} failed: {e}")))?;
    world.step(format!("deleted Service {key}"));
    world
        .wait(
            &format!("Service {key} to be gone (the controller removes its finalizer)"),
            || async {
                match services.get_opt("conformance").await {
                    Ok(None) => Ok(()),
                    Ok(Some(svc)) => Err(format!(
                        "the Service still exists with finalizers {:?}",
                        svc.metadata.finalizers.unwrap_or_default()
                    )),
                    Err(e) => Err(format!("reading the Service failed: {e}")),
                }
            },
        )
        .await?;
    world
        .wait_event(
            &namespace,
            "conformance",
            names::events::DELETED_LOAD_BALANCER,
            names::components::SERVICE_CONTROLLER,
        )
        .await?;
    world
        .wait(
            "the cloud to report the load balancer as deleted",
            || async {
                match lb.get_load_balancer(cluster, &ready).await {
                    Ok(None) => Ok(()),
                    Ok(Some(status)) => Err(format!(
                        "get_load_balancer reports {}",
                        describe_status(&status)
                    )),
                    Err(e) => Err(format!("get_load_balancer failed: {e}")),
                }
            },
        )
        .await
}
