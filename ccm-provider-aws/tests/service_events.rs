//! A Service whose load balancer AWS refuses to build gets a Warning Event carrying AWS's error code, and once
//! the Service is deleted nothing tagged for the cluster is left in the emulator (and the resource that was in
//! the way, not the cluster's, is left alone). `aws-ccm` runs as a process against a private control plane and
//! the emulator this test binary starts.

mod support;

use std::time::Duration;

use ccm_testenv::controlplane::{Binaries, ControlPlane, LaunchOptions, Supervision};
use ccm_testenv::{TestEnv, wait_for};
use k8s_openapi::api::core::v1::{Event, Namespace, Service, ServicePort, ServiceSpec};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use support::faults::FaultQueue;

const STEP: Duration = Duration::from_secs(60);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_load_balancer_is_a_warning_with_the_aws_code_and_nothing_leaks() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let control_plane = ControlPlane::launch(LaunchOptions::new(
        Binaries::find().expect("control-plane binaries (cargo xtask controlplane build)"),
        dir.path().join("cp"),
        Supervision::Watchdog,
    ))
    .await
    .expect("a private control plane");
    let env = TestEnv::attach(&control_plane.env_file_path()).expect("attach");
    let client = env.client();

    let moto = support::moto();
    let aws = support::clients(&FaultQueue::default()).await;
    let world = support::world().await;
    let cluster = format!("ev-{}", &uuid::Uuid::new_v4().simple().to_string()[..8]);
    support::cluster_subnet(&aws.ec2, &world.vpc, &cluster).await;

    // The Service exists first as a NodePort Service, so its UID and NodePort (hence its target group's name)
    // are known before the CCM sees it as a LoadBalancer.
    let namespace = "events";
    Api::<Namespace>::all(client.clone())
        .create(
            &PostParams::default(),
            &serde_json::from_value(serde_json::json!({"metadata": {"name": namespace}})).unwrap(),
        )
        .await
        .expect("namespace");
    let services: Api<Service> = Api::namespaced(client.clone(), namespace);
    let mut service = Service::default();
    service.metadata.name = Some("web".into());
    service.spec = Some(ServiceSpec {
        type_: Some("NodePort".into()),
        selector: Some([("app".to_owned(), "web".to_owned())].into()),
        ports: Some(vec![ServicePort {
            port: 80,
            protocol: Some("TCP".into()),
            node_port: Some(31080),
            ..Default::default()
        }]),
        ..Default::default()
    });
    let service = services
        .create(&PostParams::default(), &service)
        .await
        .expect("service");
    let lb_name = ccm_core::helpers::default_load_balancer_name(&service);
    let in_the_way = format!(
        "{}t31080",
        ccm_provider_aws::load_balancer::target_group_prefix(&lb_name)
    );
    // A target group of that name, not the cluster's, with other settings: AWS refuses to create ours.
    aws.elbv2
        .create_target_group()
        .name(&in_the_way)
        .protocol(aws_sdk_elasticloadbalancingv2::types::ProtocolEnum::Udp)
        .port(31999)
        .vpc_id(&world.vpc)
        .send()
        .await
        .expect("create the target group in the way");

    let mut ccm = tokio::process::Command::new(env!("CARGO_BIN_EXE_aws-ccm"))
        .args([
            format!("--kubeconfig={}", env.kubeconfig_path().display()),
            format!("--cluster-name={cluster}"),
            "--controllers=service".to_owned(),
            "--leader-elect=false".to_owned(),
            "--secure-port=0".to_owned(),
        ])
        .envs(moto.aws_env())
        .stdout(std::process::Stdio::null())
        .stderr(std::fs::File::create(dir.path().join("aws-ccm.log")).expect("log"))
        .kill_on_drop(true)
        .spawn()
        .expect("start aws-ccm");

    services
        .patch(
            "web",
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({"spec": {"type": "LoadBalancer"}})),
        )
        .await
        .expect("make it a LoadBalancer Service");

    let events: Api<Event> = Api::namespaced(client.clone(), namespace);
    let warning = wait_for("a Warning Event naming AWS's error code", STEP, || async {
        events
            .list(&ListParams::default().fields("involvedObject.name=web"))
            .await
            .ok()?
            .items
            .into_iter()
            .find(|e| {
                e.type_.as_deref() == Some("Warning")
                    && e.message
                        .as_deref()
                        .is_some_and(|m| m.contains("DuplicateTargetGroupName"))
            })
    })
    .await
    .unwrap_or_else(|err| {
        panic!(
            "{err}\naws-ccm log:\n{}",
            std::fs::read_to_string(dir.path().join("aws-ccm.log")).unwrap_or_default()
        )
    });
    assert_eq!(warning.reason.as_deref(), Some("SyncLoadBalancerFailed"));
    // The load balancer itself was created (and tagged) before the refusal: a partial failure.
    assert!(
        support::tagged_elb_resources(&aws.elbv2, &cluster)
            .await
            .contains(&lb_name),
        "the load balancer was created before the target group failed"
    );

    services
        .delete("web", &DeleteParams::default())
        .await
        .expect("delete");
    wait_for(
        "the Service to be gone (finalizer removed)",
        STEP,
        || async { services.get_opt("web").await.ok()?.is_none().then_some(()) },
    )
    .await
    .unwrap_or_else(|err| panic!("{err}"));
    let left = support::tagged_elb_resources(&aws.elbv2, &cluster).await;
    assert!(
        left.is_empty(),
        "tagged for the cluster after the delete: {left:?}"
    );
    // The target group that was not the cluster's is still there.
    let all = aws
        .elbv2
        .describe_target_groups()
        .names(&in_the_way)
        .send()
        .await;
    assert!(
        all.is_ok(),
        "the untagged target group was deleted: {all:?}"
    );

    ccm.start_kill().expect("stop aws-ccm");
    let _ = ccm.wait().await;
    drop(control_plane);
}
