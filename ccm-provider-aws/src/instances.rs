//! `InstancesV2` on EC2.
//!
//! A Node's instance is found by its providerID `aws:///<az>/<instance-id>` or, without one, by its name as the
//! instance's private DNS name (the AWS convention for Node names). `terminated` or not found → gone
//! (`InstanceNotFound`, `instance_exists` false); `stopped` and `stopping` → shut down. The metadata: instance
//! type, zone (the availability zone), region (the zone without its letter) and the addresses InternalIP,
//! ExternalIP, InternalDNS, ExternalDNS and Hostname.
//!
//! The bulk calls are native: one `DescribeInstances` with the `instance-id` filter (and `private-dns-name` for
//! Nodes without providerID) per [`FILTER_VALUES`] nodes, paginated. Filters, not `InstanceIds`: with IDs, one
//! gone instance fails the whole request; with a filter it is simply absent from the answer.

use std::collections::HashMap;

use async_trait::async_trait;
use aws_sdk_ec2::types::{Filter, Instance, InstanceStateName};
use ccm_core::helpers::{node_name, node_provider_id};
use ccm_core::{CloudError, InstanceLookup, InstanceMetadata, InstancesV2};
use k8s_openapi::api::core::v1::{Node, NodeAddress};

use crate::errors::translate;
use crate::{AwsCloud, PROVIDER};

/// Values per filter of one `DescribeInstances` request (AWS accepts up to 200).
pub const FILTER_VALUES: usize = 200;

/// Results per page of `DescribeInstances`.
pub const PAGE_SIZE: i32 = 1000;

/// The instance ID of an AWS providerID (`aws:///us-east-1a/i-0123`, also `aws://us-east-1a/i-0123` and
/// `aws:///i-0123`); `None` when it is not one.
///
/// ```
/// use ccm_provider_aws::instances::instance_id_of;
/// assert_eq!(instance_id_of("aws:///us-east-1a/i-0abc"), Some("i-0abc"));
/// assert_eq!(instance_id_of("aws:///i-0abc"), Some("i-0abc"));
/// assert_eq!(instance_id_of("gce://p/z/n"), None);
/// assert_eq!(instance_id_of("aws:///us-east-1a/"), None);
/// ```
pub fn instance_id_of(provider_id: &str) -> Option<&str> {
    let rest = provider_id.strip_prefix("aws://")?;
    let id = rest.rsplit('/').next()?;
    (id.starts_with("i-") && id.len() > 2 && id[2..].chars().all(|c| c.is_ascii_alphanumeric()))
        .then_some(id)
}

/// The providerID of an instance in a zone: `aws:///<az>/<instance-id>`.
///
/// ```
/// assert_eq!(ccm_provider_aws::instances::provider_id("us-east-1a", "i-0abc"), "aws:///us-east-1a/i-0abc");
/// ```
pub fn provider_id(zone: &str, instance_id: &str) -> String {
    format!("{PROVIDER}:///{zone}/{instance_id}")
}

/// The region of an availability zone: the zone without its trailing letter.
///
/// ```
/// use ccm_provider_aws::instances::region_of_zone;
/// assert_eq!(region_of_zone("us-east-1a"), "us-east-1");
/// assert_eq!(region_of_zone("us-west-2-lax-1b"), "us-west-2-lax-1");
/// assert_eq!(region_of_zone(""), "");
/// ```
pub fn region_of_zone(zone: &str) -> &str {
    match zone.chars().last() {
        Some(c) if c.is_ascii_lowercase() => &zone[..zone.len() - 1],
        _ => zone,
    }
}

/// The instance's state as the lifecycle sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Presence {
    /// Exists and is not shut down.
    Running,
    /// Exists, shut down (`stopped`, `stopping`).
    Stopped,
    /// Terminated or not found.
    Gone,
}

/// The presence of an instance by its state.
pub fn presence(instance: &Instance) -> Presence {
    match instance.state().and_then(|s| s.name()) {
        Some(InstanceStateName::Terminated) => Presence::Gone,
        Some(InstanceStateName::Stopped | InstanceStateName::Stopping) => Presence::Stopped,
        _ => Presence::Running,
    }
}

/// The Node metadata of an instance.
pub fn metadata(instance: &Instance) -> InstanceMetadata {
    let zone = instance
        .placement()
        .and_then(|p| p.availability_zone())
        .unwrap_or_default();
    let mut addresses = Vec::new();
    let mut push = |type_: &str, value: Option<&str>| {
        if let Some(value) = value.filter(|v| !v.is_empty()) {
            let address = NodeAddress {
                type_: type_.to_owned(),
                address: value.to_owned(),
            };
            if !addresses.contains(&address) {
                addresses.push(address);
            }
        }
    };
    push("InternalIP", instance.private_ip_address());
    push("ExternalIP", instance.public_ip_address());
    push("InternalDNS", instance.private_dns_name());
    push("ExternalDNS", instance.public_dns_name());
    push("Hostname", instance.private_dns_name());
    InstanceMetadata::new(provider_id(
        zone,
        instance.instance_id().unwrap_or_default(),
    ))
    .with_instance_type(
        instance
            .instance_type()
            .map(|t| t.as_str())
            .unwrap_or_default(),
    )
    .with_zone(zone)
    .with_region(region_of_zone(zone))
    .with_addresses(addresses)
}

/// How a Node is looked up.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Key {
    Id(String),
    DnsName(String),
}

fn key_of(node: &Node) -> Result<Key, CloudError> {
    let provider_id = node_provider_id(node);
    if provider_id.is_empty() {
        let name = node_name(node);
        if name.is_empty() {
            return Err(CloudError::message(
                "the node has neither a providerID nor a name",
            ));
        }
        return Ok(Key::DnsName(name.to_owned()));
    }
    instance_id_of(provider_id)
        .map(|id| Key::Id(id.to_owned()))
        .ok_or_else(|| {
            CloudError::message(format!(
                "node {}: providerID {provider_id:?} is not an AWS providerID (aws:///<zone>/<instance-id>)",
                node_name(node)
            ))
        })
}

impl AwsCloud {
    /// Every instance matching `filter` = `values` (all pages); terminated instances included.
    pub async fn describe_instances(
        &self,
        filter: &str,
        values: &[String],
    ) -> Result<Vec<Instance>, CloudError> {
        let mut found = Vec::new();
        for chunk in values.chunks(FILTER_VALUES) {
            let mut token = None;
            loop {
                let answer = self
                    .clients()
                    .ec2
                    .describe_instances()
                    .filters(
                        Filter::builder()
                            .name(filter)
                            .set_values(Some(chunk.to_vec()))
                            .build(),
                    )
                    .max_results(PAGE_SIZE)
                    .set_next_token(token)
                    .send()
                    .await
                    .map_err(|err| translate("describing instances", err))?;
                for reservation in answer.reservations() {
                    found.extend(reservation.instances().iter().cloned());
                }
                token = answer
                    .next_token()
                    .filter(|t| !t.is_empty())
                    .map(str::to_owned);
                if token.is_none() {
                    break;
                }
            }
        }
        Ok(found)
    }

    /// The instances of `nodes` by key; a key with no instance (or only terminated ones) is absent.
    async fn lookup(&self, nodes: &[Node]) -> Result<HashMap<Key, Instance>, CloudError> {
        let mut ids = Vec::new();
        let mut names = Vec::new();
        for node in nodes {
            match key_of(node) {
                Ok(Key::Id(id)) => ids.push(id),
                Ok(Key::DnsName(name)) => names.push(name),
                Err(_) => {}
            }
        }
        let mut out = HashMap::new();
        if !ids.is_empty() {
            for instance in self.describe_instances("instance-id", &ids).await? {
                if let Some(id) = instance.instance_id() {
                    out.insert(Key::Id(id.to_owned()), instance);
                }
            }
        }
        if !names.is_empty() {
            for instance in self.describe_instances("private-dns-name", &names).await? {
                if presence(&instance) == Presence::Gone {
                    // A terminated instance's name may be reused by a new one: prefer the live one.
                    continue;
                }
                if let Some(name) = instance.private_dns_name() {
                    out.insert(Key::DnsName(name.to_owned()), instance);
                }
            }
        }
        Ok(out)
    }

    /// The instance of one Node; `InstanceNotFound` when it is terminated or unknown.
    async fn instance(&self, node: &Node) -> Result<Instance, CloudError> {
        let key = key_of(node)?;
        let instance = match &key {
            // One ID: `InstanceIds`, whose "not found" error is the answer for a gone instance.
            Key::Id(id) => self
                .clients()
                .ec2
                .describe_instances()
                .instance_ids(id)
                .send()
                .await
                .map_err(|err| translate(&format!("describing instance {id}"), err))?
                .reservations()
                .iter()
                .flat_map(|r| r.instances())
                .find(|i| i.instance_id() == Some(id.as_str()))
                .cloned(),
            Key::DnsName(_) => self.lookup(std::slice::from_ref(node)).await?.remove(&key),
        };
        match instance {
            Some(instance) if presence(&instance) != Presence::Gone => Ok(instance),
            _ => Err(not_found(node)),
        }
    }
}

#[async_trait]
impl InstancesV2 for AwsCloud {
    async fn instance_exists(&self, node: &Node) -> Result<bool, CloudError> {
        match self.instance(node).await {
            Ok(_) => Ok(true),
            Err(err) if err.is_instance_not_found() => Ok(false),
            Err(err) => Err(err),
        }
    }

    async fn instance_shutdown(&self, node: &Node) -> Result<bool, CloudError> {
        Ok(presence(&self.instance(node).await?) == Presence::Stopped)
    }

    async fn instance_metadata(&self, node: &Node) -> Result<InstanceLookup, CloudError> {
        Ok(metadata(&self.instance(node).await?).into())
    }

    fn supports_bulk(&self) -> bool {
        self.bulk_lookups
    }

    async fn instance_metadata_bulk(
        &self,
        nodes: &[Node],
    ) -> Result<Vec<Result<InstanceLookup, CloudError>>, CloudError> {
        let found = self.lookup(nodes).await?;
        Ok(per_node(nodes, &found, |node, live| {
            Ok(metadata(live.ok_or_else(|| not_found(node))?).into())
        }))
    }

    async fn instance_exists_bulk(
        &self,
        nodes: &[Node],
    ) -> Result<Vec<Result<bool, CloudError>>, CloudError> {
        let found = self.lookup(nodes).await?;
        Ok(per_node(nodes, &found, |_, live| Ok(live.is_some())))
    }

    async fn instance_shutdown_bulk(
        &self,
        nodes: &[Node],
    ) -> Result<Vec<Result<bool, CloudError>>, CloudError> {
        let found = self.lookup(nodes).await?;
        Ok(per_node(nodes, &found, |node, live| {
            Ok(presence(live.ok_or_else(|| not_found(node))?) == Presence::Stopped)
        }))
    }
}

/// The error of a Node whose instance is terminated or unknown.
fn not_found(node: &Node) -> CloudError {
    CloudError::InstanceNotFound.context(format!("node {}", node_name(node)))
}

/// One answer per node of a bulk lookup: `answer` gets the node's instance unless it is gone or unknown
/// (`None`); a node without a usable key gets its key's error.
fn per_node<T>(
    nodes: &[Node],
    found: &HashMap<Key, Instance>,
    answer: impl Fn(&Node, Option<&Instance>) -> Result<T, CloudError>,
) -> Vec<Result<T, CloudError>> {
    nodes
        .iter()
        .map(|node| {
            let key = key_of(node)?;
            let live = found.get(&key).filter(|i| presence(i) != Presence::Gone);
            answer(node, live)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use aws_sdk_ec2::types::{InstanceState, InstanceType, Placement};

    fn instance(state: InstanceStateName, public: bool) -> Instance {
        let mut b = Instance::builder()
            .instance_id("i-0abc")
            .instance_type(InstanceType::M5Large)
            .placement(Placement::builder().availability_zone("eu-west-1b").build())
            .state(InstanceState::builder().name(state).build())
            .private_ip_address("10.0.1.4")
            .private_dns_name("ip-10-0-1-4.ec2.internal");
        if public {
            b = b
                .public_ip_address("54.1.2.3")
                .public_dns_name("ec2-54-1-2-3.compute-1.amazonaws.com");
        }
        b.build()
    }

    #[test]
    fn metadata_maps_every_field() {
        let meta = metadata(&instance(InstanceStateName::Running, true));
        assert_eq!(meta.provider_id, "aws:///eu-west-1b/i-0abc");
        assert_eq!(meta.instance_type, "m5.large");
        assert_eq!(meta.zone, "eu-west-1b");
        assert_eq!(meta.region, "eu-west-1");
        let types: Vec<&str> = meta
            .node_addresses
            .iter()
            .map(|a| a.type_.as_str())
            .collect();
        assert_eq!(
            types,
            [
                "InternalIP",
                "ExternalIP",
                "InternalDNS",
                "ExternalDNS",
                "Hostname"
            ]
        );
        let private_only = metadata(&instance(InstanceStateName::Running, false));
        assert_eq!(private_only.node_addresses.len(), 3);
    }

    #[test]
    fn states_map_to_presence() {
        for (state, want) in [
            (InstanceStateName::Pending, Presence::Running),
            (InstanceStateName::Running, Presence::Running),
            (InstanceStateName::Stopping, Presence::Stopped),
            (InstanceStateName::Stopped, Presence::Stopped),
            (InstanceStateName::ShuttingDown, Presence::Running),
            (InstanceStateName::Terminated, Presence::Gone),
        ] {
            assert_eq!(presence(&instance(state.clone(), false)), want, "{state:?}");
        }
    }

    proptest::proptest! {
        #[test]
        fn provider_ids_round_trip(zone in "[a-z]{2}-[a-z]{4}-[1-9][a-f]", id in "[0-9a-f]{8,17}") {
            let instance = format!("i-{id}");
            let pid = provider_id(&zone, &instance);
            proptest::prop_assert_eq!(instance_id_of(&pid), Some(instance.as_str()));
        }

        #[test]
        fn parsing_never_panics(text in ".{0,40}") {
            let _ = instance_id_of(&text);
            let _ = region_of_zone(&text);
        }
    }
}
