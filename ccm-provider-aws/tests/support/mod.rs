//! What the tests share: the emulator (started by the test binary itself), SDK clients pointing at it, and the
//! world seeded once per test binary (a VPC, a subnet, four instances of which `worker-2` is stopped).

#![allow(dead_code)]

pub mod faults;

use std::time::Duration;

use aws_sdk_ec2::config::{Credentials, Region};
use aws_sdk_ec2::types::{Filter, InstanceType, ResourceType, Tag, TagSpecification};
use ccm_provider_aws::config::{self, share_interceptor};
use ccm_provider_aws::{AwsClients, CLUSTER_TAG_PREFIX, OWNED};
use ccm_testenv::emulator::{self, Emulator};
use tokio::sync::OnceCell;

use faults::{Api, FaultQueue};

/// The emulator of this test binary.
pub fn moto() -> &'static Emulator {
    match Emulator::shared() {
        Ok(moto) => moto,
        Err(err) => panic!("the cloud emulator did not start: {err}"),
    }
}

/// Clients of the emulator, with the fault interceptors of `faults`.
pub async fn clients(faults: &FaultQueue) -> AwsClients {
    let moto = moto();
    let sdk = config::loader(Duration::from_secs(30))
        .endpoint_url(moto.endpoint_url())
        .region(Region::new(emulator::REGION))
        .credentials_provider(Credentials::new("testing", "testing", None, None, "tests"))
        .load()
        .await;
    let ec2 = share_interceptor(faults.interceptor(Api::Ec2));
    let elbv2 = share_interceptor(faults.interceptor(Api::Elbv2));
    // Each client gets the interceptor writing its own API's error format.
    AwsClients {
        ec2: aws_sdk_ec2::Client::from_conf(
            aws_sdk_ec2::config::Builder::from(&sdk)
                .interceptor(ec2)
                .build(),
        ),
        elbv2: aws_sdk_elasticloadbalancingv2::Client::from_conf(
            aws_sdk_elasticloadbalancingv2::config::Builder::from(&sdk)
                .interceptor(elbv2)
                .build(),
        ),
    }
}

/// An instance of the seeded world.
#[derive(Debug, Clone)]
pub struct Machine {
    /// The instance ID.
    pub id: String,
    /// Its private DNS name: the Node name.
    pub dns: String,
    /// Its private IP.
    pub ip: String,
    /// Its zone.
    pub zone: String,
}

impl Machine {
    /// `aws:///<zone>/<id>`.
    pub fn provider_id(&self) -> String {
        format!("aws:///{}/{}", self.zone, self.id)
    }
}

/// The seeded world.
#[derive(Debug, Clone)]
pub struct World {
    /// The VPC.
    pub vpc: String,
    /// The subnet (zone `us-east-1a`).
    pub subnet: String,
    /// `worker-1` .. `worker-4`; index 1 is stopped.
    pub machines: Vec<Machine>,
}

/// The world of this test binary, seeded on first use.
pub async fn world() -> &'static World {
    static WORLD: OnceCell<World> = OnceCell::const_new();
    WORLD
        .get_or_init(|| async {
            let clients = clients(&FaultQueue::default()).await;
            seed(&clients.ec2, 4).await
        })
        .await
}

/// A VPC, a subnet and `count` m5.large instances (the second stopped).
pub async fn seed(ec2: &aws_sdk_ec2::Client, count: i32) -> World {
    let vpc = ec2
        .create_vpc()
        .cidr_block("10.0.0.0/16")
        .send()
        .await
        .expect("create vpc")
        .vpc()
        .and_then(|v| v.vpc_id())
        .expect("vpc id")
        .to_owned();
    let subnet = ec2
        .create_subnet()
        .vpc_id(&vpc)
        .cidr_block("10.0.0.0/18")
        .availability_zone("us-east-1a")
        .send()
        .await
        .expect("create subnet")
        .subnet()
        .and_then(|s| s.subnet_id())
        .expect("subnet id")
        .to_owned();
    let machines = run_instances(ec2, &subnet, count, &[]).await;
    if machines.len() > 1 {
        ec2.stop_instances()
            .instance_ids(&machines[1].id)
            .send()
            .await
            .expect("stop instance");
    }
    World {
        vpc,
        subnet,
        machines,
    }
}

/// Start `count` instances in `subnet` with `tags`.
pub async fn run_instances(
    ec2: &aws_sdk_ec2::Client,
    subnet: &str,
    count: i32,
    tags: &[(&str, &str)],
) -> Vec<Machine> {
    let mut request = ec2
        .run_instances()
        .image_id("ami-12c6146b")
        .instance_type(InstanceType::M5Large)
        .subnet_id(subnet)
        .min_count(count)
        .max_count(count);
    if !tags.is_empty() {
        let mut spec = TagSpecification::builder().resource_type(ResourceType::Instance);
        for (k, v) in tags {
            spec = spec.tags(Tag::builder().key(*k).value(*v).build());
        }
        request = request.tag_specifications(spec.build());
    }
    let answer = request.send().await.expect("run instances");
    answer
        .instances()
        .iter()
        .map(|i| Machine {
            id: i.instance_id().expect("id").to_owned(),
            dns: i.private_dns_name().expect("dns").to_owned(),
            ip: i.private_ip_address().expect("ip").to_owned(),
            zone: i
                .placement()
                .and_then(|p| p.availability_zone())
                .expect("zone")
                .to_owned(),
        })
        .collect()
}

/// Tag `resource` for the cluster `cluster_id` (`owned`).
pub async fn tag_for_cluster(ec2: &aws_sdk_ec2::Client, resource: &str, cluster_id: &str) {
    ec2.create_tags()
        .resources(resource)
        .tags(
            Tag::builder()
                .key(format!("{CLUSTER_TAG_PREFIX}{cluster_id}"))
                .value(OWNED)
                .build(),
        )
        .send()
        .await
        .expect("create tags");
}

/// A subnet of its own in `vpc` tagged for `cluster_id` (a /28 of `10.0.64.0/18`, one per call in this process):
/// AWS allows 50 tags per resource, so clusters cannot all tag one subnet.
pub async fn cluster_subnet(ec2: &aws_sdk_ec2::Client, vpc: &str, cluster_id: &str) -> String {
    static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let cidr = format!("10.0.{}.{}/28", 64 + n / 16, (n % 16) * 16);
    let subnet = ec2
        .create_subnet()
        .vpc_id(vpc)
        .cidr_block(cidr)
        .availability_zone("us-east-1a")
        .send()
        .await
        .expect("create subnet")
        .subnet()
        .and_then(|s| s.subnet_id())
        .expect("subnet id")
        .to_owned();
    tag_for_cluster(ec2, &subnet, cluster_id).await;
    subnet
}

/// A route table in `vpc` tagged for `cluster_id`.
pub async fn cluster_route_table(ec2: &aws_sdk_ec2::Client, vpc: &str, cluster_id: &str) -> String {
    let table = ec2
        .create_route_table()
        .vpc_id(vpc)
        .send()
        .await
        .expect("create route table")
        .route_table()
        .and_then(|t| t.route_table_id())
        .expect("table id")
        .to_owned();
    tag_for_cluster(ec2, &table, cluster_id).await;
    table
}

/// Every ELBv2 load balancer and target group tagged for `cluster_id`, by name.
pub async fn tagged_elb_resources(
    elbv2: &aws_sdk_elasticloadbalancingv2::Client,
    cluster_id: &str,
) -> Vec<String> {
    let key = format!("{CLUSTER_TAG_PREFIX}{cluster_id}");
    let mut arns: Vec<(String, String)> = Vec::new();
    let lbs = elbv2
        .describe_load_balancers()
        .send()
        .await
        .expect("describe lbs");
    for lb in lbs.load_balancers() {
        arns.push((
            lb.load_balancer_arn().unwrap_or_default().to_owned(),
            lb.load_balancer_name().unwrap_or_default().to_owned(),
        ));
    }
    let tgs = elbv2
        .describe_target_groups()
        .send()
        .await
        .expect("describe tgs");
    for tg in tgs.target_groups() {
        arns.push((
            tg.target_group_arn().unwrap_or_default().to_owned(),
            tg.target_group_name().unwrap_or_default().to_owned(),
        ));
    }
    let mut tagged = Vec::new();
    for chunk in arns.chunks(20) {
        let answer = elbv2
            .describe_tags()
            .set_resource_arns(Some(chunk.iter().map(|(a, _)| a.clone()).collect()))
            .send()
            .await
            .expect("describe tags");
        for description in answer.tag_descriptions() {
            if description
                .tags()
                .iter()
                .any(|t| t.key() == Some(key.as_str()))
                && let Some((_, name)) = chunk
                    .iter()
                    .find(|(a, _)| Some(a.as_str()) == description.resource_arn())
            {
                tagged.push(name.clone());
            }
        }
    }
    tagged
}

/// The instance IDs registered in the target groups of the load balancer `lb_name`.
pub async fn registered_targets(
    elbv2: &aws_sdk_elasticloadbalancingv2::Client,
    lb_name: &str,
) -> Option<Vec<String>> {
    let prefix = ccm_provider_aws::load_balancer::target_group_prefix(lb_name);
    match elbv2.describe_load_balancers().names(lb_name).send().await {
        Ok(_) => {}
        Err(_) => return None,
    }
    let tgs = elbv2
        .describe_target_groups()
        .send()
        .await
        .expect("describe tgs");
    let mut ids = Vec::new();
    for tg in tgs.target_groups().iter().filter(|tg| {
        tg.target_group_name()
            .is_some_and(|n| n.starts_with(&prefix))
    }) {
        let health = elbv2
            .describe_target_health()
            .target_group_arn(tg.target_group_arn().unwrap_or_default())
            .send()
            .await
            .expect("describe target health");
        for d in health.target_health_descriptions() {
            if let Some(id) = d.target().and_then(|t| t.id())
                && !ids.iter().any(|x| x == id)
            {
                ids.push(id.to_owned());
            }
        }
    }
    ids.sort();
    Some(ids)
}

/// The routes (destination → instance) of a route table, to instances only.
pub async fn routes_of(ec2: &aws_sdk_ec2::Client, table: &str) -> Vec<(String, String)> {
    let answer = ec2
        .describe_route_tables()
        .filters(
            Filter::builder()
                .name("route-table-id")
                .values(table)
                .build(),
        )
        .send()
        .await
        .expect("describe route tables");
    let mut routes: Vec<(String, String)> = answer
        .route_tables()
        .iter()
        .flat_map(|t| t.routes())
        .filter_map(|r| {
            Some((
                r.destination_cidr_block()?.to_owned(),
                r.instance_id()?.to_owned(),
            ))
        })
        .collect();
    routes.sort();
    routes
}
