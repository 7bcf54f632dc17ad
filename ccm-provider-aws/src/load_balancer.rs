//! `LoadBalancer` on ELBv2: one `network` load balancer per Service.
//!
//! | Kubernetes | AWS |
//! |---|---|
//! | the Service | a `network` load balancer named `a<uid without dashes>` (Go's `GetLoadBalancerName`), in the subnets tagged for the cluster, tagged `kubernetes.io/cluster/<id>=owned` and `kubernetes.io/service-name=<ns>/<name>` |
//! | each port (TCP or UDP) | a target group `k8s-<20 hex of the uid>-<t\|u><nodePort>` of `instance` targets on the NodePort, and a listener on the port forwarding to it |
//! | the Nodes | the Nodes' instances (from their providerIDs) registered in every target group |
//! | the status | the load balancer's DNS name as `hostname` |
//!
//! `ensure` converges whatever exists: it creates what is missing, re-points listeners that drifted, registers
//! and deregisters targets, and removes listeners and target groups of ports the Service no longer has. A
//! partial failure (the load balancer created, a listener not) is repaired by the next ensure: every step reads
//! what exists first. `update` changes only target registrations. `delete` removes the load balancer and every
//! target group of the Service, and never a resource without this cluster's tag.
//!
//! Target groups are found by their name prefix (a target group is linked to a load balancer only through a
//! listener, so one whose listener was never created is still found and deleted).

use std::collections::{BTreeMap, BTreeSet};

use async_trait::async_trait;
use aws_sdk_elasticloadbalancingv2::types::LoadBalancer as ElbLoadBalancer;
use aws_sdk_elasticloadbalancingv2::types::{
    Action, ActionTypeEnum, LoadBalancerSchemeEnum, LoadBalancerTypeEnum, ProtocolEnum, Tag,
    TargetDescription, TargetGroup, TargetTypeEnum,
};
use ccm_core::helpers::{default_load_balancer_name, node_name, node_provider_id, service_key};
use ccm_core::{CloudError, LoadBalancer};
use k8s_openapi::api::core::v1::{LoadBalancerIngress, LoadBalancerStatus, Node, Service};

use crate::errors::{code_of, translate};
use crate::instances::instance_id_of;
use crate::{AwsCloud, OWNED, SERVICE_NAME_TAG, has_cluster_tag};

/// One port of the Service as ELBv2 serves it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct PortPlan {
    /// The listener's port.
    pub port: i32,
    /// `TCP` or `UDP`.
    pub protocol: String,
    /// The NodePort the targets receive traffic on.
    pub node_port: i32,
    /// The target group's name.
    pub target_group: String,
}

/// The target-group name prefix of the load balancer `lb_name` (`a` + 32 hex digits): `k8s-<20 hex>-`.
///
/// ```
/// assert_eq!(
///     ccm_provider_aws::load_balancer::target_group_prefix("a5f1c2a9e0b7d4c1e9f001234567890a"),
///     "k8s-5f1c2a9e0b7d4c1e9f00-"
/// );
/// ```
pub fn target_group_prefix(lb_name: &str) -> String {
    let hex: String = lb_name.chars().skip(1).take(20).collect();
    format!("k8s-{hex}-")
}

/// The ports of `service` to serve, in port order; an error for a port ELBv2 cannot serve.
///
/// # Errors
/// A port whose protocol is neither TCP nor UDP, or that has no NodePort yet.
pub fn plan_ports(service: &Service, lb_name: &str) -> Result<Vec<PortPlan>, CloudError> {
    let prefix = target_group_prefix(lb_name);
    let mut plans = Vec::new();
    for port in service
        .spec
        .as_ref()
        .and_then(|s| s.ports.as_ref())
        .into_iter()
        .flatten()
    {
        let protocol = port
            .protocol
            .as_deref()
            .unwrap_or("TCP")
            .to_ascii_uppercase();
        let letter = match protocol.as_str() {
            "TCP" => 't',
            "UDP" => 'u',
            other => {
                return Err(CloudError::message(format!(
                    "service {}: port {} uses protocol {other}; a network load balancer serves TCP and UDP",
                    service_key(service),
                    port.port
                )));
            }
        };
        let node_port = port.node_port.unwrap_or(0);
        if node_port <= 0 {
            return Err(CloudError::message(format!(
                "service {}: port {} has no nodePort yet",
                service_key(service),
                port.port
            )));
        }
        plans.push(PortPlan {
            port: port.port,
            protocol,
            node_port,
            target_group: format!("{prefix}{letter}{node_port}"),
        });
    }
    plans.sort();
    Ok(plans)
}

/// The instance IDs of `nodes` (from their providerIDs); Nodes without an AWS providerID are left out.
pub fn target_instances(nodes: &[Node]) -> BTreeSet<String> {
    nodes
        .iter()
        .filter_map(|node| {
            let id = instance_id_of(node_provider_id(node));
            if id.is_none() {
                tracing::debug!(
                    node = node_name(node),
                    "node without an AWS providerID is not a target"
                );
            }
            id.map(str::to_owned)
        })
        .collect()
}

fn elb_tag(key: &str, value: &str) -> Tag {
    Tag::builder().key(key).value(value).build()
}

fn status(lb: &ElbLoadBalancer) -> LoadBalancerStatus {
    LoadBalancerStatus {
        ingress: Some(vec![LoadBalancerIngress {
            hostname: lb.dns_name().map(str::to_owned),
            ..Default::default()
        }]),
    }
}

impl AwsCloud {
    /// The load balancer named `name`, if it exists.
    async fn find_load_balancer(&self, name: &str) -> Result<Option<ElbLoadBalancer>, CloudError> {
        match self
            .clients()
            .elbv2
            .describe_load_balancers()
            .names(name)
            .send()
            .await
        {
            Ok(answer) => Ok(answer.load_balancers().first().cloned()),
            Err(err) if code_of(&err).as_deref() == Some("LoadBalancerNotFound") => Ok(None),
            Err(err) => Err(translate(&format!("describing load balancer {name}"), err)),
        }
    }

    /// Whether the resources `arns` carry the ownership tag `key`, by ARN.
    async fn owned_arns(&self, arns: &[String], key: &str) -> Result<BTreeSet<String>, CloudError> {
        let mut owned = BTreeSet::new();
        for chunk in arns.chunks(20) {
            let answer = self
                .clients()
                .elbv2
                .describe_tags()
                .set_resource_arns(Some(chunk.to_vec()))
                .send()
                .await
                .map_err(|err| translate("describing load balancer tags", err))?;
            for description in answer.tag_descriptions() {
                let tags = description.tags().iter().map(|t| (t.key(), t.value()));
                if has_cluster_tag(tags, key)
                    && let Some(arn) = description.resource_arn()
                {
                    owned.insert(arn.to_owned());
                }
            }
        }
        Ok(owned)
    }

    /// The load balancer of `service` if it exists and belongs to the cluster.
    async fn owned_load_balancer(
        &self,
        cluster_name: &str,
        name: &str,
    ) -> Result<Option<ElbLoadBalancer>, CloudError> {
        let Some(lb) = self.find_load_balancer(name).await? else {
            return Ok(None);
        };
        let arn = lb.load_balancer_arn().unwrap_or_default().to_owned();
        let owned = self
            .owned_arns(std::slice::from_ref(&arn), &self.cluster_tag(cluster_name))
            .await?;
        if owned.contains(&arn) {
            Ok(Some(lb))
        } else {
            tracing::warn!(
                load_balancer = name,
                "load balancer exists without this cluster's tag; leaving it alone"
            );
            Ok(None)
        }
    }

    /// The target groups named with `prefix` that carry the ownership tag, by name.
    async fn owned_target_groups(
        &self,
        cluster_name: &str,
        prefix: &str,
    ) -> Result<BTreeMap<String, TargetGroup>, CloudError> {
        let mut named = Vec::new();
        let mut marker = None;
        loop {
            let answer = self
                .clients()
                .elbv2
                .describe_target_groups()
                .page_size(400)
                .set_marker(marker)
                .send()
                .await
                .map_err(|err| translate("listing target groups", err))?;
            named.extend(
                answer
                    .target_groups()
                    .iter()
                    .filter(|tg| {
                        tg.target_group_name()
                            .is_some_and(|n| n.starts_with(prefix))
                    })
                    .cloned(),
            );
            marker = answer
                .next_marker()
                .filter(|m| !m.is_empty())
                .map(str::to_owned);
            if marker.is_none() {
                break;
            }
        }
        let arns: Vec<String> = named
            .iter()
            .filter_map(|tg| tg.target_group_arn().map(str::to_owned))
            .collect();
        let owned = self
            .owned_arns(&arns, &self.cluster_tag(cluster_name))
            .await?;
        Ok(named
            .into_iter()
            .filter(|tg| tg.target_group_arn().is_some_and(|a| owned.contains(a)))
            .filter_map(|tg| Some((tg.target_group_name()?.to_owned(), tg)))
            .collect())
    }

    /// The subnets tagged for the cluster.
    async fn cluster_subnets(&self, cluster_name: &str) -> Result<Vec<String>, CloudError> {
        let key = self.cluster_tag(cluster_name);
        let answer = self
            .clients()
            .ec2
            .describe_subnets()
            .filters(
                aws_sdk_ec2::types::Filter::builder()
                    .name(format!("tag:{key}"))
                    .values(OWNED)
                    .values(crate::SHARED)
                    .build(),
            )
            .send()
            .await
            .map_err(|err| translate("describing the cluster's subnets", err))?;
        let subnets: Vec<String> = answer
            .subnets()
            .iter()
            .filter_map(|s| s.subnet_id().map(str::to_owned))
            .collect();
        if subnets.is_empty() {
            return Err(CloudError::message(format!(
                "no subnet is tagged {key}=owned or shared; tag the subnets the cluster's load balancers use"
            )));
        }
        Ok(subnets)
    }

    /// Register exactly `wanted` (instance IDs on `port`) in the target group `arn`.
    async fn set_targets(
        &self,
        arn: &str,
        port: i32,
        wanted: &BTreeSet<String>,
    ) -> Result<(), CloudError> {
        let health = self
            .clients()
            .elbv2
            .describe_target_health()
            .target_group_arn(arn)
            .send()
            .await
            .map_err(|err| translate("describing targets", err))?;
        let current: BTreeSet<(String, i32)> = health
            .target_health_descriptions()
            .iter()
            .filter_map(|d| d.target())
            .filter_map(|t| Some((t.id()?.to_owned(), t.port().unwrap_or(port))))
            .collect();
        let wanted_pairs: BTreeSet<(String, i32)> =
            wanted.iter().map(|id| (id.clone(), port)).collect();
        let target =
            |(id, port): &(String, i32)| TargetDescription::builder().id(id).port(*port).build();
        let add: Vec<_> = wanted_pairs.difference(&current).map(target).collect();
        let remove: Vec<_> = current.difference(&wanted_pairs).map(target).collect();
        if !add.is_empty() {
            self.clients()
                .elbv2
                .register_targets()
                .target_group_arn(arn)
                .set_targets(Some(add))
                .send()
                .await
                .map_err(|err| translate("registering targets", err))?;
        }
        if !remove.is_empty() {
            self.clients()
                .elbv2
                .deregister_targets()
                .target_group_arn(arn)
                .set_targets(Some(remove))
                .send()
                .await
                .map_err(|err| translate("deregistering targets", err))?;
        }
        Ok(())
    }

    async fn create_load_balancer(
        &self,
        cluster_name: &str,
        service: &Service,
        name: &str,
    ) -> Result<ElbLoadBalancer, CloudError> {
        let subnets = self.cluster_subnets(cluster_name).await?;
        let answer = self
            .clients()
            .elbv2
            .create_load_balancer()
            .name(name)
            .r#type(LoadBalancerTypeEnum::Network)
            .scheme(LoadBalancerSchemeEnum::InternetFacing)
            .set_subnets(Some(subnets))
            .tags(elb_tag(&self.cluster_tag(cluster_name), OWNED))
            .tags(elb_tag(SERVICE_NAME_TAG, &service_key(service)))
            .send()
            .await
            .map_err(|err| translate(&format!("creating load balancer {name}"), err))?;
        answer.load_balancers().first().cloned().ok_or_else(|| {
            CloudError::message(format!("creating load balancer {name}: AWS returned none"))
        })
    }

    async fn create_target_group(
        &self,
        cluster_name: &str,
        service: &Service,
        vpc: &str,
        plan: &PortPlan,
    ) -> Result<TargetGroup, CloudError> {
        let answer = self
            .clients()
            .elbv2
            .create_target_group()
            .name(&plan.target_group)
            .protocol(ProtocolEnum::from(plan.protocol.as_str()))
            .port(plan.node_port)
            .vpc_id(vpc)
            .target_type(TargetTypeEnum::Instance)
            .tags(elb_tag(&self.cluster_tag(cluster_name), OWNED))
            .tags(elb_tag(SERVICE_NAME_TAG, &service_key(service)))
            .send()
            .await
            .map_err(|err| {
                translate(&format!("creating target group {}", plan.target_group), err)
            })?;
        answer.target_groups().first().cloned().ok_or_else(|| {
            CloudError::message(format!(
                "creating target group {}: AWS returned none",
                plan.target_group
            ))
        })
    }

    /// Make listeners of `lb_arn` exactly `plans`, each forwarding to its target group (`arns` by name).
    async fn converge_listeners(
        &self,
        lb_arn: &str,
        plans: &[PortPlan],
        arns: &BTreeMap<String, String>,
    ) -> Result<(), CloudError> {
        let listeners = self
            .clients()
            .elbv2
            .describe_listeners()
            .load_balancer_arn(lb_arn)
            .send()
            .await
            .map_err(|err| translate("describing listeners", err))?;
        let forward = |tg: &str| {
            Action::builder()
                .r#type(ActionTypeEnum::Forward)
                .target_group_arn(tg)
                .build()
        };
        let mut seen = BTreeSet::new();
        for listener in listeners.listeners() {
            let listener_arn = listener.listener_arn().unwrap_or_default();
            let plan = plans.iter().find(|p| Some(p.port) == listener.port());
            let Some(plan) = plan.filter(|p| seen.insert(p.port)) else {
                self.clients()
                    .elbv2
                    .delete_listener()
                    .listener_arn(listener_arn)
                    .send()
                    .await
                    .map_err(|err| translate("deleting a listener", err))?;
                continue;
            };
            let tg_arn = arns
                .get(&plan.target_group)
                .map(String::as_str)
                .unwrap_or_default();
            let points_right = listener
                .default_actions()
                .iter()
                .any(|a| a.target_group_arn() == Some(tg_arn))
                && listener.protocol().map(|p| p.as_str()) == Some(plan.protocol.as_str());
            if !points_right {
                self.clients()
                    .elbv2
                    .modify_listener()
                    .listener_arn(listener_arn)
                    .protocol(ProtocolEnum::from(plan.protocol.as_str()))
                    .port(plan.port)
                    .default_actions(forward(tg_arn))
                    .send()
                    .await
                    .map_err(|err| translate("modifying a listener", err))?;
            }
        }
        for plan in plans.iter().filter(|p| !seen.contains(&p.port)) {
            let tg_arn = arns
                .get(&plan.target_group)
                .map(String::as_str)
                .unwrap_or_default();
            self.clients()
                .elbv2
                .create_listener()
                .load_balancer_arn(lb_arn)
                .protocol(ProtocolEnum::from(plan.protocol.as_str()))
                .port(plan.port)
                .default_actions(forward(tg_arn))
                .send()
                .await
                .map_err(|err| {
                    translate(&format!("creating the listener of port {}", plan.port), err)
                })?;
        }
        Ok(())
    }

    async fn delete_target_group(&self, arn: &str) -> Result<(), CloudError> {
        match self
            .clients()
            .elbv2
            .delete_target_group()
            .target_group_arn(arn)
            .send()
            .await
        {
            Ok(_) => Ok(()),
            Err(err) if code_of(&err).as_deref() == Some("TargetGroupNotFound") => Ok(()),
            Err(err) => Err(translate("deleting a target group", err)),
        }
    }
}

#[async_trait]
impl LoadBalancer for AwsCloud {
    async fn get_load_balancer(
        &self,
        cluster_name: &str,
        service: &Service,
    ) -> Result<Option<LoadBalancerStatus>, CloudError> {
        let name = default_load_balancer_name(service);
        Ok(self
            .owned_load_balancer(cluster_name, &name)
            .await?
            .as_ref()
            .map(status))
    }

    async fn ensure_load_balancer(
        &self,
        cluster_name: &str,
        service: &Service,
        nodes: &[Node],
    ) -> Result<LoadBalancerStatus, CloudError> {
        let name = default_load_balancer_name(service);
        let plans = plan_ports(service, &name)?;
        let lb = match self.find_load_balancer(&name).await? {
            Some(lb) => {
                let arn = lb.load_balancer_arn().unwrap_or_default().to_owned();
                let key = self.cluster_tag(cluster_name);
                if !self
                    .owned_arns(std::slice::from_ref(&arn), &key)
                    .await?
                    .contains(&arn)
                {
                    return Err(CloudError::message(format!(
                        "load balancer {name} exists without the tag {key}; refusing to manage it"
                    )));
                }
                lb
            }
            None => {
                self.create_load_balancer(cluster_name, service, &name)
                    .await?
            }
        };
        let lb_arn = lb.load_balancer_arn().unwrap_or_default().to_owned();
        let vpc = lb.vpc_id().unwrap_or_default().to_owned();
        let mut groups = self
            .owned_target_groups(cluster_name, &target_group_prefix(&name))
            .await?;
        let targets = target_instances(nodes);
        let mut arns = BTreeMap::new();
        for plan in &plans {
            let group = match groups.remove(&plan.target_group) {
                Some(group) => group,
                None => {
                    self.create_target_group(cluster_name, service, &vpc, plan)
                        .await?
                }
            };
            let arn = group.target_group_arn().unwrap_or_default().to_owned();
            self.set_targets(&arn, plan.node_port, &targets).await?;
            arns.insert(plan.target_group.clone(), arn);
        }
        self.converge_listeners(&lb_arn, &plans, &arns).await?;
        // Target groups of ports the Service no longer has (their listeners are gone now).
        for extra in groups.values() {
            self.delete_target_group(extra.target_group_arn().unwrap_or_default())
                .await?;
        }
        Ok(status(&lb))
    }

    async fn update_load_balancer(
        &self,
        cluster_name: &str,
        service: &Service,
        nodes: &[Node],
    ) -> Result<(), CloudError> {
        let name = default_load_balancer_name(service);
        if self
            .owned_load_balancer(cluster_name, &name)
            .await?
            .is_none()
        {
            return Err(CloudError::message(format!(
                "load balancer {name} of service {} does not exist; it is created by the next ensure",
                service_key(service)
            )));
        }
        let plans = plan_ports(service, &name)?;
        let groups = self
            .owned_target_groups(cluster_name, &target_group_prefix(&name))
            .await?;
        let targets = target_instances(nodes);
        for plan in &plans {
            if let Some(arn) = groups
                .get(&plan.target_group)
                .and_then(|g| g.target_group_arn())
            {
                self.set_targets(arn, plan.node_port, &targets).await?;
            }
        }
        Ok(())
    }

    async fn ensure_load_balancer_deleted(
        &self,
        cluster_name: &str,
        service: &Service,
    ) -> Result<(), CloudError> {
        let name = default_load_balancer_name(service);
        if let Some(lb) = self.owned_load_balancer(cluster_name, &name).await? {
            // Deleting the load balancer deletes its listeners.
            match self
                .clients()
                .elbv2
                .delete_load_balancer()
                .load_balancer_arn(lb.load_balancer_arn().unwrap_or_default())
                .send()
                .await
            {
                Ok(_) => {}
                Err(err) if code_of(&err).as_deref() == Some("LoadBalancerNotFound") => {}
                Err(err) => return Err(translate(&format!("deleting load balancer {name}"), err)),
            }
        }
        let groups = self
            .owned_target_groups(cluster_name, &target_group_prefix(&name))
            .await?;
        for group in groups.values() {
            self.delete_target_group(group.target_group_arn().unwrap_or_default())
                .await?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{NodeSpec, ServicePort, ServiceSpec};

    fn service(ports: &[(i32, &str, i32)]) -> Service {
        let mut svc = Service::default();
        svc.metadata.uid = Some("5f1c2a9e-0b7d-4c1e-9f00-1234567890ab".into());
        svc.spec = Some(ServiceSpec {
            ports: Some(
                ports
                    .iter()
                    .map(|(port, protocol, node_port)| ServicePort {
                        port: *port,
                        protocol: Some((*protocol).to_owned()),
                        node_port: Some(*node_port),
                        ..Default::default()
                    })
                    .collect(),
            ),
            ..Default::default()
        });
        svc
    }

    #[test]
    fn ports_become_target_groups_within_the_name_limit() {
        let svc = service(&[(443, "TCP", 30443), (53, "UDP", 30053)]);
        let name = default_load_balancer_name(&svc);
        let plans = plan_ports(&svc, &name).unwrap();
        assert_eq!(plans[0].port, 53);
        assert_eq!(plans[0].target_group, "k8s-5f1c2a9e0b7d4c1e9f00-u30053");
        assert_eq!(plans[1].target_group, "k8s-5f1c2a9e0b7d4c1e9f00-t30443");
        assert!(plans.iter().all(|p| p.target_group.len() <= 32));
    }

    #[test]
    fn unsupported_ports_are_errors_not_panics() {
        let svc = service(&[(80, "SCTP", 30080)]);
        assert!(
            plan_ports(&svc, "a1")
                .unwrap_err()
                .to_string()
                .contains("SCTP")
        );
        let svc = service(&[(80, "TCP", 0)]);
        assert!(
            plan_ports(&svc, "a1")
                .unwrap_err()
                .to_string()
                .contains("nodePort")
        );
    }

    #[test]
    fn targets_come_from_aws_provider_ids() {
        let node = |pid: &str| Node {
            spec: Some(NodeSpec {
                provider_id: Some(pid.to_owned()),
                ..Default::default()
            }),
            ..Default::default()
        };
        let nodes = [
            node("aws:///us-east-1a/i-1"),
            node("gce://x/y/z"),
            node("aws:///us-east-1b/i-2"),
        ];
        assert_eq!(
            target_instances(&nodes).into_iter().collect::<Vec<_>>(),
            ["i-1", "i-2"]
        );
    }
}
