//! Audit logging of a private control plane: requests made with per-user kubeconfigs show up in
//! the audit log under their users, Lease writes with their bodies, reads not at all; a restarted
//! API server keeps the data and the log.

use std::time::Duration;

use ccm_testenv::audit::{self, AuditEvent};
use ccm_testenv::controlplane::{Binaries, ControlPlane, LaunchOptions, Supervision};
use ccm_testenv::{TestEnv, wait_for};
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, ListParams, PostParams};

fn lease(holder: &str) -> Lease {
    let mut lease = Lease {
        spec: Some(LeaseSpec {
            holder_identity: Some(holder.to_owned()),
            lease_duration_seconds: Some(4),
            ..LeaseSpec::default()
        }),
        ..Lease::default()
    };
    lease.metadata.name = Some("audit-test".to_owned());
    lease
}

#[tokio::test]
async fn writes_are_audited_per_user_with_lease_bodies() {
    let base = tempfile::tempdir().expect("tempdir");
    let options = LaunchOptions::new(
        Binaries::find().expect("binaries (run `cargo xtask controlplane build`)"),
        base.path().join("cp"),
        Supervision::Watchdog,
    )
    .with_audit();
    let mut control_plane = ControlPlane::launch(options).await.expect("launch");
    let log = control_plane.audit_log_path().expect("an audit log");
    let env = TestEnv::attach(&control_plane.env_file_path()).expect("attach");

    let kubeconfig = base.path().join("replica-a.kubeconfig");
    env.write_user_kubeconfig("replica-a", &["system:masters"], &kubeconfig)
        .expect("kubeconfig");
    let config = kube::Config::from_custom_kubeconfig(
        kube::config::Kubeconfig::read_from(&kubeconfig).expect("read kubeconfig"),
        &kube::config::KubeConfigOptions::default(),
    )
    .await
    .expect("config");
    let client = kube::Client::try_from(config).expect("client");

    let leases: Api<Lease> = Api::namespaced(client.clone(), "kube-system");
    leases
        .create(&PostParams::default(), &lease("holder-a"))
        .await
        .expect("create the lease");
    // A conflicting create fails and is audited with its code.
    let conflict = leases
        .create(&PostParams::default(), &lease("holder-b"))
        .await;
    assert!(conflict.is_err(), "the second create must conflict");
    let nodes: Api<Node> = Api::all(client);
    nodes
        .list(&ListParams::default())
        .await
        .expect("list nodes");
    let mut node = Node::default();
    node.metadata.name = Some("audited-node".to_owned());
    nodes
        .create(&PostParams::default(), &node)
        .await
        .expect("create a node");

    let events: Vec<AuditEvent> = wait_for("the audit events", Duration::from_secs(30), || {
        let log = log.clone();
        async move {
            let events = audit::read_log(&log).ok()?;
            let mine: Vec<AuditEvent> = events
                .into_iter()
                .filter(|e| e.user.username == "replica-a")
                .collect();
            (mine.len() >= 3).then_some(mine)
        }
    })
    .await
    .expect("events");

    let of = |resource: &str| {
        events
            .iter()
            .filter(|e| {
                e.object_ref
                    .as_ref()
                    .is_some_and(|o| o.resource == resource)
            })
            .collect::<Vec<_>>()
    };
    let lease_writes = of("leases");
    assert_eq!(lease_writes.len(), 2, "{lease_writes:?}");
    assert!(lease_writes[0].succeeded());
    assert_eq!(lease_writes[0].verb, "create");
    assert_eq!(
        lease_writes[0].request_str("/spec/holderIdentity"),
        Some("holder-a")
    );
    assert_eq!(lease_writes[1].code(), Some(409));
    let node_writes = of("nodes");
    assert_eq!(
        node_writes.len(),
        1,
        "reads are not audited: {node_writes:?}"
    );
    assert_eq!(node_writes[0].verb, "create");
    assert!(node_writes[0].succeeded());
    // Metadata level: no request body for anything but Leases.
    assert!(node_writes[0].request_object.is_none());
    assert!(
        node_writes[0]
            .user
            .groups
            .iter()
            .any(|g| g == "system:masters")
    );
    assert!(node_writes[0].completed_micros() >= node_writes[0].received_micros());
    assert!(events.iter().all(|e| e.stage == "ResponseComplete"));

    // A restarted API server (same etcd, same port) keeps the data and appends to the same log.
    let old_pid = control_plane.env().pids.kube_apiserver;
    control_plane.restart_apiserver().await.expect("restart");
    assert_ne!(control_plane.env().pids.kube_apiserver, old_pid);
    let admin: Api<Node> = Api::all(env.client());
    admin.get("audited-node").await.expect("the node survived");
    let mut second = Node::default();
    second.metadata.name = Some("after-restart".to_owned());
    admin
        .create(&PostParams::default(), &second)
        .await
        .expect("create after the restart");
    wait_for(
        "the audit event after the restart",
        Duration::from_secs(30),
        || {
            let log = log.clone();
            async move {
                let events = audit::read_log(&log).ok()?;
                let mine = events
                    .iter()
                    .filter(|e| e.user.username == "replica-a")
                    .count();
                let after = events.iter().any(|e| {
                    e.object_ref
                        .as_ref()
                        .is_some_and(|o| o.name == "after-restart")
                });
                (mine >= 3 && after).then_some(())
            }
        },
    )
    .await
    .expect("the log goes on");

    control_plane.stop().expect("stop");
}
