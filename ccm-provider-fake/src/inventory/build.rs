//! Building the fake cloud an inventory describes.

use std::collections::HashMap;
use std::io::Read;
use std::path::Path;

use ccm_core::intercept::Capability;
use ccm_core::{Route, Zone};
use k8s_openapi::api::core::v1::NodeAddress;

use super::*;
use crate::cloud::{DEFAULT_CLUSTER, FakeCloud, PROVIDER_NAME};
use crate::fault::{Fault, Times};
use crate::instance::FakeInstance;
use crate::quota::QuotaError;

impl FakeCloud {
    /// Build a cloud from a parsed inventory, checking every value; `origin` names the file in errors.
    pub fn from_inventory(inventory: Inventory, origin: &str) -> Result<FakeCloud, InventoryError> {
        let check = Checker { file: origin };
        let provider_name = match inventory.provider_name.as_deref() {
            None => PROVIDER_NAME.to_owned(),
            Some(name) => {
                let valid = !name.is_empty()
                    && name
                        .bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || b == b'.');
                if !valid {
                    return Err(check.invalid(
                        "providerName".into(),
                        format!("{name:?} is not a valid provider name; use letters, digits, '-', '_' or '.'"),
                    ));
                }
                name.to_owned()
            }
        };
        let cloud = FakeCloud::new().with_provider_name(&provider_name);

        let caps = &inventory.capabilities;
        for (cap, on) in [
            (Capability::InstancesV2, caps.instances_v2),
            (Capability::Instances, caps.instances),
            (Capability::Zones, caps.zones),
            (Capability::LoadBalancer, caps.load_balancer),
            (Capability::Routes, caps.routes),
            (Capability::Clusters, caps.clusters),
        ] {
            cloud.set_capability(cap, on);
        }
        if let Some(pool) = inventory.load_balancer_ip_pool.as_deref() {
            let net = check.cidr("loadBalancerIPPool".into(), pool)?;
            if net.hosts().next().is_none() {
                return Err(check.invalid(
                    "loadBalancerIPPool".into(),
                    "the pool has no usable address",
                ));
            }
            cloud.set_load_balancer_ip_pool(net);
        }
        cloud.set_ip_mode(inventory.load_balancer_ip_mode.map(IpModeSpec::as_str));
        cloud.set_has_cluster_id(inventory.has_cluster_id);
        cloud.set_bulk(inventory.supports_bulk);
        if inventory.load_balancer_listing_page_size == Some(0) {
            return Err(check.invalid(
                "loadBalancerListingPageSize".into(),
                "a page must hold at least one load balancer; use 1 or more, or leave it out for no listing",
            ));
        }
        cloud.set_listing(
            inventory
                .load_balancer_listing_page_size
                .and_then(|n| usize::try_from(n).ok()),
        );

        let mut cluster_names = HashMap::new();
        for (i, cluster) in inventory.clusters.iter().enumerate() {
            let path = format!("clusters[{i}]");
            check.non_empty(path.clone(), cluster, "a cluster name")?;
            check.unique(&mut cluster_names, path, "cluster", cluster)?;
        }
        cloud.set_clusters(inventory.clusters.clone());
        if let Some(zone) = &inventory.local_zone {
            check.non_empty("localZone.zone".into(), &zone.zone, "the zone")?;
            cloud.set_local_zone(Some(Zone::new(zone.zone.clone(), zone.region.clone())));
        }

        let mut names = HashMap::new();
        let mut provider_ids = HashMap::new();
        for (i, spec) in inventory.instances.iter().enumerate() {
            let base = format!("instances[{i}]");
            check.non_empty(format!("{base}.name"), &spec.name, "the instance name")?;
            check.unique(
                &mut names,
                format!("{base}.name"),
                "instance name",
                &spec.name,
            )?;
            let mut instance = FakeInstance::new(spec.name.clone())
                .with_instance_type(spec.instance_type.clone())
                .with_zone(spec.zone.clone(), spec.region.clone())
                .with_shutdown(spec.shutdown);
            let resolved = match spec.provider_id.as_deref() {
                None => format!("{provider_name}://{}", spec.name),
                Some("") => {
                    instance = instance.without_provider_id();
                    String::new()
                }
                Some(id) => {
                    check.provider_id(format!("{base}.providerID"), id, &provider_name)?;
                    instance = instance.with_provider_id(id);
                    id.to_owned()
                }
            };
            if !resolved.is_empty() {
                check.unique(
                    &mut provider_ids,
                    format!("{base}.providerID"),
                    "provider ID",
                    &resolved,
                )?;
            }
            let mut addresses = Vec::with_capacity(spec.addresses.len());
            for (j, address) in spec.addresses.iter().enumerate() {
                let path = format!("{base}.addresses[{j}].address");
                let value = if address.type_.is_ip() {
                    check.ip(path, &address.address)?.to_string()
                } else {
                    check.non_empty(path, &address.address, "the address")?;
                    address.address.clone()
                };
                addresses.push(NodeAddress {
                    type_: address.type_.as_str().to_owned(),
                    address: value,
                });
            }
            instance = instance.with_addresses(addresses);
            for (key, value) in &spec.labels {
                let path = format!("{base}.labels.{key}");
                if let Some(problem) = label_key_problem(key) {
                    return Err(check.invalid(path, problem));
                }
                if let Some(problem) = label_value_problem(value) {
                    return Err(check.invalid(path, format!("label value {value:?} {problem}")));
                }
                instance = instance.with_label(key.clone(), value.clone());
            }
            if !spec.metadata {
                instance = instance.with_no_metadata();
            }
            cloud.add_instance(instance);
        }

        let mut route_keys = HashMap::new();
        for (i, spec) in inventory.routes.iter().enumerate() {
            let base = format!("routes[{i}]");
            let cluster = spec
                .cluster
                .clone()
                .unwrap_or_else(|| DEFAULT_CLUSTER.to_owned());
            check.non_empty(format!("{base}.cluster"), &cluster, "the cluster")?;
            check.non_empty(
                format!("{base}.targetNode"),
                &spec.target_node,
                "the target node",
            )?;
            let cidr = check.cidr(format!("{base}.destinationCIDR"), &spec.destination_cidr)?;
            let key = format!("{cluster} {cidr}");
            check.unique(
                &mut route_keys,
                format!("{base}.destinationCIDR"),
                "route (cluster and CIDR)",
                &key,
            )?;
            let mut route = Route::new(spec.target_node.clone(), cidr.to_string())
                .with_blackhole(spec.blackhole);
            if let Some(name) = &spec.name {
                check.non_empty(format!("{base}.name"), name, "the route name")?;
                route = route.with_name(name.clone());
            }
            cloud.insert_route_in(&cluster, route);
        }

        if let Some(latency) = inventory.default_latency {
            cloud.set_default_latency(latency);
        }
        for (name, latency) in &inventory.latency {
            let op = check.operation(format!("latency.{name}"), name)?;
            cloud.set_latency(op, latency.get());
        }
        for (i, spec) in inventory.faults.iter().enumerate() {
            let base = format!("faults[{i}]");
            let op = check.operation(format!("{base}.operation"), &spec.operation)?;
            let error = check.injected_error(
                &base,
                spec.error,
                spec.message.as_deref(),
                spec.retry_after,
            )?;
            let times = match spec.times {
                None => Times::Always,
                Some(0) => {
                    return Err(check.invalid(
                        format!("{base}.times"),
                        "must be at least 1; omit it to fail every call",
                    ));
                }
                Some(1) => Times::Once,
                Some(n) => Times::N(n),
            };
            let fault = Fault { error, times };
            match spec.target.as_deref() {
                Some(target) => cloud.inject_for(op, target, fault),
                None => cloud.inject(op, fault),
            }
        }
        if let Some(quota) = &inventory.quota {
            cloud
                .set_quota(quota.requests_per_second, quota.effective_burst())
                .map_err(|err| {
                    let path = match err {
                        QuotaError::ZeroBurst => "quota.burst",
                        _ => "quota.requestsPerSecond",
                    };
                    check.invalid(path.into(), err.to_string())
                })?;
        }
        if let Some(spec) = &inventory.random_faults {
            cloud.lock().faults.set_random(spec.build(&check)?);
        }
        if let Some(path) = &inventory.state_file {
            check.non_empty("stateFile".into(), path, "the state file path")?;
            if inventory.restore_state_file {
                cloud
                    .restore_state_file(Path::new(path))
                    .map_err(|err| check.invalid("stateFile".into(), err.to_string()))?;
            } else {
                cloud.set_state_file(Path::new(path));
            }
        }
        Ok(cloud)
    }

    /// Build a cloud from inventory YAML; `origin` (usually the file name) prefixes every error.
    ///
    /// ```
    /// use ccm_provider_fake::FakeCloud;
    ///
    /// let err = FakeCloud::from_inventory_str(
    ///     "instances:\n  - name: a\n    addresses: [{type: InternalIP, address: 10.0.0.300}]\n",
    ///     "inventory.yaml",
    /// )
    /// .unwrap_err();
    /// assert_eq!(
    ///     err.to_string(),
    ///     r#"inventory.yaml: instances[0].addresses[0].address: invalid IP address "10.0.0.300""#
    /// );
    /// ```
    pub fn from_inventory_str(yaml: &str, origin: &str) -> Result<FakeCloud, InventoryError> {
        FakeCloud::from_inventory(Inventory::from_yaml_str(yaml, origin)?, origin)
    }

    /// Build a cloud from an inventory file; errors name the file as given.
    ///
    /// ```no_run
    /// use std::path::Path;
    /// use ccm_provider_fake::FakeCloud;
    ///
    /// match FakeCloud::from_inventory_file(Path::new("inventory.yaml")) {
    ///     Ok(cloud) => println!("{} instances", cloud.instances().len()),
    ///     Err(err) => eprintln!("{err}"), // inventory.yaml: instances[0].name: ...
    /// }
    /// ```
    pub fn from_inventory_file(path: &Path) -> Result<FakeCloud, InventoryError> {
        let file = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|source| InventoryError::Read {
            file: file.clone(),
            source,
        })?;
        FakeCloud::from_inventory_str(&text, &file)
    }

    /// Build a cloud from inventory YAML read from `reader` (such as the opened `--cloud-config`).
    pub fn from_inventory_reader(
        reader: &mut dyn Read,
        origin: &str,
    ) -> Result<FakeCloud, InventoryError> {
        let mut text = String::new();
        reader
            .read_to_string(&mut text)
            .map_err(|source| InventoryError::Read {
                file: origin.to_owned(),
                source,
            })?;
        FakeCloud::from_inventory_str(&text, origin)
    }
}
