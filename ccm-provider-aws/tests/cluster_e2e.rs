//! The cluster in a box (kube-apiserver, etcd, kube-scheduler, kube-controller-manager, kwok kubelets) with
//! `aws-ccm` as its CCM, against the emulator this test binary starts: kwok Nodes named after emulator instances
//! are initialized with AWS providerIDs, labels and addresses; a LoadBalancer Service gets a network load
//! balancer whose targets are the Nodes and follows a Node added or excluded; pod-CIDR routes appear in the
//! cluster's route table; a terminated instance's Node is deleted within one `--node-monitor-period` plus the
//! call's latency; a stopped instance's Node gets the shutdown taint; once the Service is deleted nothing tagged
//! for the cluster is left.

mod support;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use ccm_testenv::cluster::{
    Cluster, ClusterOptions, EXCLUDE_FROM_LOAD_BALANCERS, NodeRole, register_node, stop_heartbeats,
};
use ccm_testenv::controlplane::{Binaries, LaunchOptions, Supervision};
use ccm_testenv::wait_for;
use k8s_openapi::api::core::v1::{Node, Service};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use support::faults::FaultQueue;
use support::{Machine, routes_of, run_instances};

const STEP: Duration = Duration::from_secs(90);
const CLUSTER: &str = "e2e";
/// aws-ccm's `--node-monitor-period`.
const MONITOR_PERIOD: Duration = Duration::from_secs(2);
/// What one lifecycle pass may add to the period: the cloud call, the Node delete, the informer's delay.
const LATENCY: Duration = Duration::from_secs(3);

fn taint_keys(node: &Node) -> Vec<String> {
    node.spec
        .as_ref()
        .and_then(|s| s.taints.as_ref())
        .map(|t| t.iter().map(|t| t.key.clone()).collect())
        .unwrap_or_default()
}

fn ready_status(node: &Node) -> Option<String> {
    node.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == "Ready")
        .map(|c| c.status.clone())
}

fn initialized_as(node: &Node, machine: &Machine) -> bool {
    let labels = node.metadata.labels.clone().unwrap_or_default();
    let addresses: Vec<(String, String)> = node
        .status
        .as_ref()
        .and_then(|s| s.addresses.as_ref())
        .map(|a| {
            a.iter()
                .map(|a| (a.type_.clone(), a.address.clone()))
                .collect()
        })
        .unwrap_or_default();
    node.spec.as_ref().and_then(|s| s.provider_id.as_deref())
        == Some(machine.provider_id().as_str())
        && !taint_keys(node)
            .iter()
            .any(|k| k == ccm_testenv::cluster::UNINITIALIZED_TAINT)
        && labels
            .get("topology.kubernetes.io/zone")
            .map(String::as_str)
            == Some("us-east-1a")
        && labels
            .get("topology.kubernetes.io/region")
            .map(String::as_str)
            == Some("us-east-1")
        && labels
            .get("node.kubernetes.io/instance-type")
            .map(String::as_str)
            == Some("m5.large")
        && addresses.contains(&("InternalIP".to_owned(), machine.ip.clone()))
        && addresses.contains(&("InternalDNS".to_owned(), machine.dns.clone()))
        && addresses.contains(&("Hostname".to_owned(), machine.dns.clone()))
}

async fn wait_targets(
    elbv2: &aws_sdk_elasticloadbalancingv2::Client,
    lb_name: &str,
    machines: &[&Machine],
    what: &str,
) {
    let mut want: Vec<String> = machines.iter().map(|m| m.id.clone()).collect();
    want.sort();
    wait_for(what, STEP, || async {
        (support::registered_targets(elbv2, lb_name).await.as_ref() == Some(&want)).then_some(())
    })
    .await
    .unwrap_or_else(|err| panic!("{err}"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn aws_ccm_runs_the_cluster_in_a_box_against_the_emulator() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let cluster = Cluster::launch(ClusterOptions::new(LaunchOptions::new(
        Binaries::find().expect("control-plane binaries (cargo xtask controlplane build)"),
        dir.path().join("cluster"),
        Supervision::Watchdog,
    )))
    .await
    .unwrap_or_else(|err| panic!("the cluster in a box: {err}"));
    let client = cluster.client().expect("admin client");
    let nodes: Api<Node> = Api::all(client.clone());

    // The cloud: three running instances, the subnet and a route table tagged for the cluster.
    let moto = support::moto();
    let aws = support::clients(&FaultQueue::default()).await;
    let world = support::world().await;
    let machines = run_instances(&aws.ec2, &world.subnet, 3, &[]).await;
    support::cluster_subnet(&aws.ec2, &world.vpc, CLUSTER).await;
    let table = support::cluster_route_table(&aws.ec2, &world.vpc, CLUSTER).await;
    for m in &machines {
        register_node(&client, &m.dns, NodeRole::Worker)
            .await
            .expect("register node");
    }

    let log = dir.path().join("aws-ccm.log");
    let mut ccm = tokio::process::Command::new(env!("CARGO_BIN_EXE_aws-ccm"))
        .args([
            format!("--kubeconfig={}", cluster.kubeconfig_path().display()),
            format!("--cluster-name={CLUSTER}"),
            format!("--cluster-cidr={}", ccm_testenv::cluster::CLUSTER_CIDR),
            "--allocate-node-cidrs=true".to_owned(),
            "--configure-cloud-routes=true".to_owned(),
            "--node-monitor-period=2s".to_owned(),
            "--route-reconciliation-period=2s".to_owned(),
            "--leader-elect=false".to_owned(),
            "--secure-port=0".to_owned(),
        ])
        .envs(moto.aws_env())
        .stdout(std::process::Stdio::null())
        .stderr(std::fs::File::create(&log).expect("log"))
        .kill_on_drop(true)
        .spawn()
        .expect("start aws-ccm");
    let ccm_log = || std::fs::read_to_string(&log).unwrap_or_default();

    // 1. Initialization: providerID, labels, addresses from EC2.
    wait_for("every Node initialized from its instance", STEP, || async {
        let list = nodes.list(&ListParams::default()).await.ok()?;
        machines
            .iter()
            .all(|m| {
                list.items
                    .iter()
                    .any(|n| n.metadata.name.as_deref() == Some(&m.dns) && initialized_as(n, m))
            })
            .then_some(())
    })
    .await
    .unwrap_or_else(|err| panic!("{err}\naws-ccm log:\n{}", ccm_log()));

    // 2. Routes: one per pod CIDR, to the Node's instance.
    wait_for(
        "a route per pod CIDR in the cluster's route table",
        STEP,
        || async {
            let list = nodes.list(&ListParams::default()).await.ok()?;
            let mut want: Vec<(String, String)> = Vec::new();
            for node in &list.items {
                let cidr = node.spec.as_ref()?.pod_cidr.clone()?;
                let m = machines
                    .iter()
                    .find(|m| node.metadata.name.as_deref() == Some(&m.dns))?;
                want.push((cidr, m.id.clone()));
            }
            want.sort();
            (routes_of(&aws.ec2, &table).await == want).then_some(())
        },
    )
    .await
    .unwrap_or_else(|err| panic!("{err}\naws-ccm log:\n{}", ccm_log()));

    // 3. A LoadBalancer Service: a network load balancer whose targets are the Nodes.
    let services: Api<Service> = Api::namespaced(client.clone(), "default");
    let service: Service = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "web"},
        "spec": {"type": "LoadBalancer", "selector": {"app": "web"},
                 "ports": [{"port": 80, "protocol": "TCP", "targetPort": 8080}]}
    }))
    .unwrap();
    let service = services
        .create(&PostParams::default(), &service)
        .await
        .expect("service");
    let lb_name = ccm_core::helpers::default_load_balancer_name(&service);
    let hostname = wait_for("the Service's load balancer hostname", STEP, || async {
        services
            .get("web")
            .await
            .ok()?
            .status?
            .load_balancer?
            .ingress?
            .first()?
            .hostname
            .clone()
    })
    .await
    .unwrap_or_else(|err| panic!("{err}\naws-ccm log:\n{}", ccm_log()));
    let lb = aws
        .elbv2
        .describe_load_balancers()
        .names(&lb_name)
        .send()
        .await
        .expect("the load balancer exists");
    let lb = &lb.load_balancers()[0];
    assert_eq!(lb.dns_name(), Some(hostname.as_str()));
    assert_eq!(lb.r#type().map(|t| t.as_str()), Some("network"));
    wait_targets(
        &aws.elbv2,
        &lb_name,
        &machines.iter().collect::<Vec<_>>(),
        "the Nodes as targets",
    )
    .await;

    // 4. A Node added joins the targets; a Node excluded leaves them.
    let added = run_instances(&aws.ec2, &world.subnet, 1, &[])
        .await
        .remove(0);
    register_node(&client, &added.dns, NodeRole::Worker)
        .await
        .expect("register node");
    let mut all: Vec<&Machine> = machines.iter().collect();
    all.push(&added);
    wait_targets(&aws.elbv2, &lb_name, &all, "the added Node as a target").await;
    nodes
        .patch(
            &machines[0].dns,
            &PatchParams::default(),
            &Patch::Merge(
                serde_json::json!({"metadata": {"labels": {EXCLUDE_FROM_LOAD_BALANCERS: ""}}}),
            ),
        )
        .await
        .expect("exclude a node");
    let kept: Vec<&Machine> = all
        .iter()
        .copied()
        .filter(|m| m.id != machines[0].id)
        .collect();
    wait_targets(
        &aws.elbv2,
        &lb_name,
        &kept,
        "the excluded Node gone from the targets",
    )
    .await;

    // 5. Terminated → the Node is deleted within one monitor period (plus latency) of its kubelet going silent.
    let gone = &machines[1];
    aws.ec2
        .terminate_instances()
        .instance_ids(&gone.id)
        .send()
        .await
        .expect("terminate");
    stop_heartbeats(&client, &gone.dns)
        .await
        .expect("stop heartbeats");
    let silent_at = wait_for("the terminated instance's Node not Ready", STEP, || async {
        let node = nodes.get_opt(&gone.dns).await.ok()?;
        match node {
            None => Some(Instant::now()),
            Some(n) if ready_status(&n).as_deref() != Some("True") => Some(Instant::now()),
            Some(_) => None,
        }
    })
    .await
    .unwrap_or_else(|err| panic!("{err}"));
    wait_for("the terminated instance's Node deleted", STEP, || async {
        nodes.get_opt(&gone.dns).await.ok()?.is_none().then_some(())
    })
    .await
    .unwrap_or_else(|err| panic!("{err}\naws-ccm log:\n{}", ccm_log()));
    let took = silent_at.elapsed();
    eprintln!("terminated instance: Node deleted {took:?} after it turned not Ready");
    assert!(
        took <= MONITOR_PERIOD + LATENCY,
        "the Node of a terminated instance was deleted {took:?} after it turned not Ready (period {MONITOR_PERIOD:?})"
    );

    // 6. Stopped → the shutdown taint.
    let stopped = &machines[2];
    aws.ec2
        .stop_instances()
        .instance_ids(&stopped.id)
        .send()
        .await
        .expect("stop");
    stop_heartbeats(&client, &stopped.dns)
        .await
        .expect("stop heartbeats");
    wait_for(
        "the shutdown taint on the stopped instance's Node",
        STEP,
        || async {
            let node = nodes.get_opt(&stopped.dns).await.ok()??;
            taint_keys(&node)
                .iter()
                .any(|k| k == ccm_core::names::taints::SHUTDOWN)
                .then_some(())
        },
    )
    .await
    .unwrap_or_else(|err| panic!("{err}\naws-ccm log:\n{}", ccm_log()));
    assert!(
        nodes.get_opt(&stopped.dns).await.expect("get").is_some(),
        "a stopped instance's Node stays"
    );

    // 7. The Service deleted → nothing tagged for the cluster is left in ELBv2.
    services
        .delete("web", &DeleteParams::default())
        .await
        .expect("delete the Service");
    wait_for("the Service gone", STEP, || async {
        services.get_opt("web").await.ok()?.is_none().then_some(())
    })
    .await
    .unwrap_or_else(|err| panic!("{err}\naws-ccm log:\n{}", ccm_log()));
    let left = support::tagged_elb_resources(&aws.elbv2, CLUSTER).await;
    assert!(
        left.is_empty(),
        "tagged for the cluster after the Service was deleted: {left:?}"
    );
    let by_id: BTreeMap<_, _> = routes_of(&aws.ec2, &table).await.into_iter().collect();
    assert!(
        !by_id.values().any(|id| id == &gone.id),
        "the terminated instance's route is removed with its Node: {by_id:?}"
    );

    ccm.start_kill().expect("stop aws-ccm");
    let _ = ccm.wait().await;
    cluster.stop().expect("stop the cluster");
}
