//! The protobuf Node watch against a real kube-apiserver: the decoder gives exactly the JSON decoder's Node, and the
//! list-watch yields kube's `watcher` events, resumes after the server closes a watch and re-lists after 410 Gone.

use std::collections::BTreeMap;
use std::time::Duration;

use ccm_testenv::TestEnv;
use ccm_testenv::controlplane::{Binaries, ControlPlane, LaunchOptions, Supervision};
use futures::StreamExt;
use k8s_openapi::api::core::v1::{
    Node, NodeAddress, NodeCondition, NodeSpec, NodeStatus, NodeSystemInfo, Taint,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference, Time};
use k8s_openapi::jiff::Timestamp;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use kube::runtime::watcher::{Error, Event};
use kube::{Api, ResourceExt};
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::super::{InformerEvent, InformerScope, STRIPPED_VALUE_PREFIX, SharedInformers};
use super::*;
use crate::names::annotations::LAST_APPLIED_CONFIGURATION;

const WAIT: Duration = Duration::from_secs(30);
const RUN: &str = "ccm-core.test/protowatch";

fn at(seconds: i64) -> Time {
    Time(Timestamp::from_second(seconds).unwrap())
}

/// A Node with every kept field set (and some that are not kept).
fn rich_node(name: &str, run: &str) -> Node {
    Node {
        metadata: ObjectMeta {
            name: Some(name.into()),
            labels: Some(BTreeMap::from([
                (RUN.into(), run.into()),
                ("topology.kubernetes.io/zone".into(), "zone-a".into()),
            ])),
            annotations: Some(BTreeMap::from([
                ("example.com/note".into(), "kept".into()),
                (
                    LAST_APPLIED_CONFIGURATION.into(),
                    format!(
                        r#"{{"apiVersion":"v1","kind":"Node","metadata":{{"name":"{name}"}}}}"#
                    ),
                ),
            ])),
            finalizers: Some(vec!["example.com/keep".into()]),
            owner_references: Some(vec![OwnerReference {
                api_version: "v1".into(),
                kind: "ConfigMap".into(),
                name: "owner".into(),
                uid: "7b0d5f8e-0000-4000-8000-000000000001".into(),
                controller: Some(true),
                block_owner_deletion: Some(false),
            }]),
            ..Default::default()
        },
        spec: Some(NodeSpec {
            provider_id: Some(format!("fake://{name}")),
            pod_cidr: Some("10.1.0.0/24".into()),
            pod_cidrs: Some(vec!["10.1.0.0/24".into(), "fd00:1::/64".into()]),
            unschedulable: Some(true),
            taints: Some(vec![
                Taint {
                    key: "example.com/timed".into(),
                    value: Some("v".into()),
                    effect: "NoExecute".into(),
                    time_added: Some(at(1_700_000_000)),
                },
                Taint {
                    key: "node.cloudprovider.kubernetes.io/uninitialized".into(),
                    value: None,
                    effect: "NoSchedule".into(),
                    time_added: None,
                },
            ]),
            ..Default::default()
        }),
        status: None,
    }
}

fn rich_status() -> NodeStatus {
    NodeStatus {
        addresses: Some(vec![
            NodeAddress {
                type_: "InternalIP".into(),
                address: "10.0.0.7".into(),
            },
            NodeAddress {
                type_: "Hostname".into(),
                address: "node-7".into(),
            },
        ]),
        conditions: Some(vec![
            NodeCondition {
                type_: "Ready".into(),
                status: "True".into(),
                last_heartbeat_time: Some(at(1_700_000_100)),
                last_transition_time: Some(at(1_700_000_050)),
                reason: Some("KubeletReady".into()),
                message: Some("kubelet is posting ready status".into()),
            },
            NodeCondition {
                type_: "NetworkUnavailable".into(),
                status: "False".into(),
                ..Default::default()
            },
        ]),
        node_info: Some(NodeSystemInfo {
            architecture: "arm64".into(),
            boot_id: "boot".into(),
            machine_id: "machine".into(),
            operating_system: "linux".into(),
            system_uuid: "uuid".into(),
            kubelet_version: "v1.36.2".into(),
            os_image: "not kept".into(),
            ..Default::default()
        }),
        images: Some(vec![Default::default()]),
        ..Default::default()
    }
}

async fn create(client: &kube::Client, node: &Node, status: Option<NodeStatus>) -> Node {
    let api: Api<Node> = Api::all(client.clone());
    let created = api
        .create(&PostParams::default(), node)
        .await
        .expect("create node");
    let Some(status) = status else {
        return created;
    };
    api.patch_status(
        &created.name_any(),
        &PatchParams::default(),
        &Patch::Merge(json!({ "status": status })),
    )
    .await
    .expect("patch node status")
}

/// Remove the finalizers and delete.
async fn remove(client: &kube::Client, name: &str) {
    let api: Api<Node> = Api::all(client.clone());
    let _ = api
        .patch(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"finalizers": null}})),
        )
        .await;
    let _ = api.delete(name, &DeleteParams::default()).await;
}

/// `name` read in protobuf and decoded as the watch decodes it.
async fn get_protobuf(client: &kube::Client, name: &str) -> Node {
    let request = http::Request::get(format!("/api/v1/nodes/{name}"))
        .header(http::header::ACCEPT, "application/vnd.kubernetes.protobuf")
        .body(kube::client::Body::from(Vec::new()))
        .unwrap();
    let response = client.send(request).await.expect("get in protobuf");
    assert!(response.status().is_success(), "{}", response.status());
    let body = response.into_body().collect().await.unwrap().to_bytes();
    protobuf::decode_node(body).expect("decode the protobuf node")
}

async fn get_json(client: &kube::Client, name: &str) -> Node {
    let api: Api<CachedNode> = Api::all(client.clone());
    api.get(name).await.expect("get in JSON").0
}

async fn next(stream: &mut BoxStream<'static, Step>) -> Step {
    tokio::time::timeout(WAIT, stream.next())
        .await
        .expect("an event in time")
        .expect("the list-watch never ends")
}

async fn next_ok(stream: &mut BoxStream<'static, Step>) -> Event<Node> {
    next(stream).await.expect("an event, not an error")
}

fn list_watch(client: &kube::Client, run: &str, timeout_secs: u32) -> NodeListWatch {
    NodeListWatch {
        client: client.clone(),
        selector: Some(format!("{RUN}={run}")),
        timeout_secs,
    }
}

#[tokio::test]
async fn protobuf_and_json_decode_the_same_cached_node() {
    let env = TestEnv::shared().await;
    let client = env.client();
    let run = env.unique_name("pbeq");
    let rich = format!("{run}-rich");
    let bare = format!("{run}-bare");
    create(&client, &rich_node(&rich, &run), Some(rich_status())).await;
    let mut minimal = Node::default();
    minimal.metadata.name = Some(bare.clone());
    create(&client, &minimal, None).await;

    for name in [&rich, &bare] {
        let json = get_json(&client, name).await;
        let proto = get_protobuf(&client, name).await;
        assert_eq!(proto, json, "{name}");
    }
    // the comparison covered every kept field, and what is not kept is gone from both
    let proto = get_protobuf(&client, &rich).await;
    let spec = proto.spec.as_ref().unwrap();
    assert_eq!(spec.unschedulable, Some(true));
    assert_eq!(spec.pod_cidrs.as_ref().unwrap().len(), 2);
    assert_eq!(
        spec.taints.as_ref().unwrap()[0].time_added,
        Some(at(1_700_000_000))
    );
    assert_eq!(spec.taints.as_ref().unwrap()[1].value, None);
    let status = proto.status.as_ref().unwrap();
    assert_eq!(
        status.conditions.as_ref().unwrap()[0].last_heartbeat_time,
        Some(at(1_700_000_100))
    );
    assert_eq!(
        status.conditions.as_ref().unwrap()[1].last_heartbeat_time,
        None
    );
    assert_eq!(status.node_info.as_ref().unwrap().system_uuid, "uuid");
    assert_eq!(status.node_info.as_ref().unwrap().kubelet_version, "");
    assert_eq!(status.images, None);
    assert_eq!(
        proto.metadata.owner_references.as_ref().unwrap()[0].controller,
        Some(true)
    );
    assert_eq!(
        proto.metadata.finalizers.as_deref(),
        Some(&["example.com/keep".to_owned()][..])
    );
    assert!(proto.metadata.creation_timestamp.is_some());
    assert_eq!(proto.metadata.managed_fields, None);
    let applied = &proto.metadata.annotations.as_ref().unwrap()[LAST_APPLIED_CONFIGURATION];
    assert!(applied.starts_with(STRIPPED_VALUE_PREFIX), "{applied}");

    // a Node being deleted (held by its finalizer): deletionTimestamp and deletionGracePeriodSeconds 0
    let api: Api<Node> = Api::all(client.clone());
    api.delete(&rich, &DeleteParams::default())
        .await
        .expect("delete");
    let json = get_json(&client, &rich).await;
    assert!(json.metadata.deletion_timestamp.is_some());
    assert_eq!(json.metadata.deletion_grace_period_seconds, Some(0));
    assert_eq!(get_protobuf(&client, &rich).await, json);

    remove(&client, &rich).await;
    remove(&client, &bare).await;
}

#[tokio::test]
async fn the_list_watch_yields_watcher_events_and_resumes_after_the_server_closes_the_watch() {
    let env = TestEnv::shared().await;
    let client = env.client();
    let run = env.unique_name("pbwatch");
    let name = format!("{run}-a");
    create(&client, &rich_node(&name, &run), Some(rich_status())).await;

    // the server ends each watch after a second
    let mut stream = list_watch(&client, &run, 1).stream();
    assert!(matches!(next_ok(&mut stream).await, Event::Init));
    let Event::InitApply(listed) = next_ok(&mut stream).await else {
        panic!("the node from the list");
    };
    assert_eq!(listed, get_json(&client, &name).await);
    assert!(matches!(next_ok(&mut stream).await, Event::InitDone));

    let api: Api<Node> = Api::all(client.clone());
    for round in 0..3 {
        let label = json!({"metadata": {"labels": {"round": round.to_string()}}});
        api.patch(&name, &PatchParams::default(), &Patch::Merge(label))
            .await
            .expect("patch");
        let Event::Apply(seen) = next_ok(&mut stream).await else {
            panic!("an apply from the watch");
        };
        // decoded from protobuf, equal to the JSON decode of the same version
        assert_eq!(seen, get_json(&client, &name).await, "round {round}");
        // longer than the watch's timeout: the watch is re-opened in between, without a re-list
        assert!(
            tokio::time::timeout(Duration::from_millis(2500), stream.next())
                .await
                .is_err(),
            "nothing happens while the watch is re-opened"
        );
    }
    remove(&client, &name).await;
    // the finalizer's removal, then the delete
    assert!(matches!(next_ok(&mut stream).await, Event::Apply(_)));
    let Event::Delete(gone) = next_ok(&mut stream).await else {
        panic!("a delete from the watch");
    };
    assert_eq!(gone.name_any(), name);
}

#[tokio::test]
async fn the_shared_node_informer_in_protobuf_sees_adds_updates_and_deletes() {
    let env = TestEnv::shared().await;
    let client = env.client();
    let run = env.unique_name("pbinf");
    let scope = InformerScope::all().with_node_selector(format!("{RUN}={run}"));
    assert_eq!(scope.node_watch, super::super::WatchEncoding::Protobuf);
    let informers = SharedInformers::new(client.clone(), &scope);
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let _registration = informers.nodes().on_event(move |event| {
        let what = match event {
            InformerEvent::Added(n) => format!("add {}", n.name_any()),
            InformerEvent::Updated { new, .. } => format!("update {}", new.name_any()),
            InformerEvent::Deleted(n) => format!("delete {}", n.name_any()),
            InformerEvent::Resync => "resync".into(),
        };
        let _ = tx.send(what);
    });
    let shutdown = tokio_util::sync::CancellationToken::new();
    tokio::spawn(informers.clone().run(shutdown.clone()));
    informers.wait_synced().await;

    let name = format!("{run}-a");
    create(&client, &rich_node(&name, &run), None).await;
    assert_eq!(recv(&mut rx).await, format!("add {name}"));
    let with_status = create_status(&client, &name).await;
    assert_eq!(recv(&mut rx).await, format!("update {name}"));
    let cached = informers.nodes().store().get(&name).unwrap();
    assert_eq!(*cached, get_json(&client, &name).await);
    assert_eq!(
        cached.metadata.resource_version,
        with_status.metadata.resource_version
    );
    remove(&client, &name).await;
    // the finalizer's removal is an update, then the delete
    assert_eq!(recv(&mut rx).await, format!("update {name}"));
    assert_eq!(recv(&mut rx).await, format!("delete {name}"));
    assert!(informers.nodes().store().is_empty());
    shutdown.cancel();
}

async fn recv(rx: &mut tokio::sync::mpsc::UnboundedReceiver<String>) -> String {
    tokio::time::timeout(WAIT, rx.recv())
        .await
        .expect("an informer event in time")
        .expect("the handler lives")
}

async fn create_status(client: &kube::Client, name: &str) -> Node {
    Api::<Node>::all(client.clone())
        .patch_status(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({ "status": rich_status() })),
        )
        .await
        .expect("patch status")
}

/// POST `body` to etcd's JSON gateway at `url` and return the response.
async fn etcd_post(url: &str, path: &str, body: &str) -> String {
    let address = url.trim_start_matches("http://");
    let mut socket = tokio::net::TcpStream::connect(address)
        .await
        .expect("reach etcd");
    let request = format!(
        "POST {path} HTTP/1.1\r\nHost: {address}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    socket.write_all(request.as_bytes()).await.unwrap();
    let mut response = String::new();
    socket.read_to_string(&mut response).await.unwrap();
    assert!(response.starts_with("HTTP/1.1 200"), "{response}");
    response
}

/// Compact etcd's history up to its current revision: every older resourceVersion is gone.
async fn compact_etcd(url: &str) {
    let range = etcd_post(url, "/v3/kv/range", r#"{"key":"AA=="}"#).await;
    let (_, rest) = range.split_once(r#""revision":""#).expect("a revision");
    let revision: u64 = rest.split('"').next().unwrap().parse().unwrap();
    etcd_post(
        url,
        "/v3/kv/compaction",
        &format!(r#"{{"revision":"{revision}","physical":true}}"#),
    )
    .await;
}

#[tokio::test]
async fn a_watch_from_a_compacted_resource_version_is_gone_and_lists_again() {
    // An API server of its own without a watch cache, so a watch from a compacted resourceVersion reaches etcd
    // and is answered 410 Gone (the shared server's watch cache would still serve it).
    let base = tempfile::tempdir().expect("tempdir");
    let mut launch = LaunchOptions::new(
        Binaries::find().expect("binaries (set CCM_CONTROLPLANE_BIN)"),
        base.path().join("cp"),
        Supervision::Watchdog,
    );
    launch
        .extra_apiserver_args
        .push("--watch-cache=false".into());
    let control_plane = ControlPlane::launch(launch).await.expect("launch");
    let etcd_url = control_plane.env().etcd_url.clone();
    let env = TestEnv::attach(&control_plane.env_file_path()).expect("attach");
    let client = env.client();
    let run = env.unique_name("pbgone");
    let name = format!("{run}-a");
    create(&client, &rich_node(&name, &run), None).await;

    let mut stream = list_watch(&client, &run, 1).stream();
    assert!(matches!(next_ok(&mut stream).await, Event::Init));
    assert!(matches!(next_ok(&mut stream).await, Event::InitApply(_)));
    assert!(matches!(next_ok(&mut stream).await, Event::InitDone));

    // two other objects move the revision past the list's, and the history is compacted away: the watch
    // re-opened from the list's resourceVersion X starts at X + 1, which must be older than the compaction
    for other in ["other-1", "other-2"] {
        let mut node = Node::default();
        node.metadata.name = Some(format!("{run}-{other}"));
        create(&client, &node, None).await;
    }
    compact_etcd(&etcd_url).await;

    // the next re-opened watch is refused with 410 Gone, and the list starts again
    match next(&mut stream).await {
        Err(Error::WatchError(status)) => assert_eq!(status.code, 410, "{status:?}"),
        Err(Error::WatchStartFailed(kube::Error::Api(status))) => {
            assert_eq!(status.code, 410, "{status:?}");
        }
        other => panic!("410 Gone expected, got {other:?}"),
    }
    assert!(matches!(next_ok(&mut stream).await, Event::Init));
    let Event::InitApply(listed) = next_ok(&mut stream).await else {
        panic!("the node from the new list");
    };
    assert_eq!(listed.name_any(), name);
    assert!(matches!(next_ok(&mut stream).await, Event::InitDone));
    drop(stream);
    control_plane.stop().expect("stop");
}
