//! `Routes` on EC2 route tables.
//!
//! The cluster's routes live in the one route table tagged `kubernetes.io/cluster/<id>` (`owned` or `shared`):
//! one route per pod CIDR, to the Node's instance (found by the Node name as its private DNS name; its
//! source/destination check is turned off, as the instance forwards pod traffic). Only routes to instances are
//! the cluster's: the table's local and gateway routes are never listed nor deleted. A route whose instance is
//! gone (AWS state `blackhole`, or an instance that is terminated or unknown) is listed as a blackhole, which
//! the route controller deletes.
//!
//! No table tagged for a cluster name means that cluster has no routes (listing is empty; creating one is an
//! error saying which tag to add); two or more tagged tables are an error.

use std::collections::HashMap;

use async_trait::async_trait;
use aws_sdk_ec2::types::{AttributeBooleanValue, Filter, RouteState, RouteTable};
use ccm_core::{CloudError, Route, Routes};

use crate::errors::{code_of, translate};
use crate::instances::{Presence, presence};
use crate::{AwsCloud, OWNED, SHARED};

impl AwsCloud {
    /// The route table tagged for the cluster; `None` when there is none.
    async fn route_table(&self, cluster_name: &str) -> Result<Option<RouteTable>, CloudError> {
        let key = self.cluster_tag(cluster_name);
        let answer = self
            .clients()
            .ec2
            .describe_route_tables()
            .filters(
                Filter::builder()
                    .name(format!("tag:{key}"))
                    .values(OWNED)
                    .values(SHARED)
                    .build(),
            )
            .send()
            .await
            .map_err(|err| translate("describing the cluster's route table", err))?;
        match answer.route_tables() {
            [] => Ok(None),
            [table] => Ok(Some(table.clone())),
            tables => Err(CloudError::message(format!(
                "{} route tables are tagged {key}; tag exactly one",
                tables.len()
            ))),
        }
    }

    /// The one running instance whose private DNS name is `node_name`.
    async fn instance_of_node(&self, node_name: &str) -> Result<String, CloudError> {
        let instances = self
            .describe_instances("private-dns-name", &[node_name.to_owned()])
            .await?;
        instances
            .iter()
            .filter(|i| presence(i) != Presence::Gone)
            .find_map(|i| i.instance_id().map(str::to_owned))
            .ok_or_else(|| {
                CloudError::InstanceNotFound
                    .context(format!("finding the instance of node {node_name}"))
            })
    }
}

#[async_trait]
impl Routes for AwsCloud {
    async fn list_routes(&self, cluster_name: &str) -> Result<Vec<Route>, CloudError> {
        let Some(table) = self.route_table(cluster_name).await? else {
            return Ok(Vec::new());
        };
        let to_instances: Vec<_> = table
            .routes()
            .iter()
            .filter(|r| r.instance_id().is_some() && r.destination_cidr_block().is_some())
            .collect();
        let ids: Vec<String> = to_instances
            .iter()
            .filter_map(|r| r.instance_id().map(str::to_owned))
            .collect();
        let names: HashMap<String, String> = if ids.is_empty() {
            HashMap::new()
        } else {
            self.describe_instances("instance-id", &ids)
                .await?
                .iter()
                .filter(|i| presence(i) != Presence::Gone)
                .filter_map(|i| {
                    Some((
                        i.instance_id()?.to_owned(),
                        i.private_dns_name()?.to_owned(),
                    ))
                })
                .collect()
        };
        let table_id = table.route_table_id().unwrap_or_default();
        Ok(to_instances
            .into_iter()
            .map(|r| {
                let cidr = r.destination_cidr_block().unwrap_or_default();
                let target = r.instance_id().and_then(|id| names.get(id));
                Route::new(target.cloned().unwrap_or_default(), cidr)
                    .with_name(format!("{table_id}/{cidr}"))
                    .with_blackhole(r.state() == Some(&RouteState::Blackhole) || target.is_none())
            })
            .collect())
    }

    async fn create_route(
        &self,
        cluster_name: &str,
        _name_hint: &str,
        route: &Route,
    ) -> Result<(), CloudError> {
        let table = self.route_table(cluster_name).await?.ok_or_else(|| {
            CloudError::message(format!(
                "no route table is tagged {}=owned or shared; tag the cluster's route table",
                self.cluster_tag(cluster_name)
            ))
        })?;
        let table_id = table.route_table_id().unwrap_or_default();
        let instance = self.instance_of_node(&route.target_node).await?;
        self.clients()
            .ec2
            .modify_instance_attribute()
            .instance_id(&instance)
            .source_dest_check(AttributeBooleanValue::builder().value(false).build())
            .send()
            .await
            .map_err(|err| {
                translate(
                    &format!("turning off source/destination check of {instance}"),
                    err,
                )
            })?;
        let created = self
            .clients()
            .ec2
            .create_route()
            .route_table_id(table_id)
            .destination_cidr_block(&route.destination_cidr)
            .instance_id(&instance)
            .send()
            .await;
        match created {
            Ok(_) => Ok(()),
            // A route for the CIDR exists (a blackhole left behind, or a race): point it at the instance.
            Err(err) if code_of(&err).as_deref() == Some("RouteAlreadyExists") => self
                .clients()
                .ec2
                .replace_route()
                .route_table_id(table_id)
                .destination_cidr_block(&route.destination_cidr)
                .instance_id(&instance)
                .send()
                .await
                .map(|_| ())
                .map_err(|err| {
                    translate(
                        &format!("replacing the route of {}", route.destination_cidr),
                        err,
                    )
                }),
            Err(err) => Err(translate(
                &format!("creating the route of {}", route.destination_cidr),
                err,
            )),
        }
    }

    async fn delete_route(&self, cluster_name: &str, route: &Route) -> Result<(), CloudError> {
        let Some(table) = self.route_table(cluster_name).await? else {
            return Ok(());
        };
        let deleted = self
            .clients()
            .ec2
            .delete_route()
            .route_table_id(table.route_table_id().unwrap_or_default())
            .destination_cidr_block(&route.destination_cidr)
            .send()
            .await;
        match deleted {
            Ok(_) => Ok(()),
            Err(err) if code_of(&err).as_deref() == Some("InvalidRoute.NotFound") => Ok(()),
            Err(err) => Err(translate(
                &format!("deleting the route of {}", route.destination_cidr),
                err,
            )),
        }
    }
}
