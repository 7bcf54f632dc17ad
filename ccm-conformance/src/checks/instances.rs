//! Clauses about the V1 [`Instances`](ccm_core::Instances) API and [`Zones`](ccm_core::Zones).

use std::fmt;

use ccm_core::helpers::ProviderId;
use ccm_core::{CloudError, ErrorKind};

use crate::context::{Check, Ctx, describe_error, fail, skip};
use crate::fixture::InstanceRef;
use crate::validate;

/// `instance_id` of `instance`, which must succeed.
async fn instance_id(ctx: &Ctx, instance: &InstanceRef, state: &str) -> Check<String> {
    let v1 = ctx.v1()?;
    let what = format!("instance_id of the {state} node {}", instance.node_name);
    match ctx.call(&what, v1.instance_id(&instance.node_name)).await? {
        Ok(id) if id.is_empty() => fail(format!("{what} is empty")),
        Ok(id) => Ok(id),
        Err(err) if err.kind() == ErrorKind::InstanceNotFound => fail(format!(
            "{what} failed with InstanceNotFound: {}; only an instance that is gone may be reported so (the lifecycle controller deletes its Node)",
            describe_error(&err)
        )),
        Err(err) => fail(format!("{what} failed: {}", describe_error(&err))),
    }
}

/// The instance's providerID: the fixture's, else the one the node controller builds from `instance_id`.
pub(crate) async fn provider_id(ctx: &Ctx, instance: &InstanceRef, state: &str) -> Check<String> {
    match &instance.provider_id {
        Some(id) => Ok(id.clone()),
        None => {
            let id = instance_id(ctx, instance, state).await?;
            Ok(format!("{}://{id}", ctx.provider.provider_name()))
        }
    }
}

/// [`Clause::InstancesRunningInstanceHasId`](crate::Clause::InstancesRunningInstanceHasId).
pub(crate) async fn running_instance_has_id(ctx: &Ctx) -> Check {
    let running = ctx.running()?;
    instance_id(ctx, &running, "running").await.map(drop)
}

/// [`Clause::InstancesUnknownInstanceNotFound`](crate::Clause::InstancesUnknownInstanceNotFound).
pub(crate) async fn unknown_instance_not_found(ctx: &Ctx) -> Check {
    let v1 = ctx.v1()?;
    let unknown = ctx.unknown();
    let what = format!("instance_id of the unknown node {}", unknown.node_name);
    match ctx.call(&what, v1.instance_id(&unknown.node_name)).await? {
        Err(err) if err.kind() == ErrorKind::InstanceNotFound => {}
        Err(err) => {
            return fail(format!(
                "{what} failed with {}, not InstanceNotFound: the lifecycle controller acts on the kind, never on the text, so it would keep the Node of a deleted machine; return CloudError::InstanceNotFound (or an error whose kind() is InstanceNotFound)",
                describe_error(&err)
            ));
        }
        Ok(id) => {
            return fail(format!(
                "{what} returned {id:?} for an instance the cloud does not have; it must fail with CloudError::InstanceNotFound"
            ));
        }
    }
    if let Some(pid) = &unknown.provider_id {
        let what = format!("instance_exists_by_provider_id of the unknown providerID {pid}");
        match ctx
            .call(&what, v1.instance_exists_by_provider_id(pid))
            .await?
        {
            Ok(false) => {}
            Ok(true) => return fail(format!("{what} is true")),
            Err(err) => {
                return fail(format!(
                    "{what} failed: {}; an instance that does not exist must be reported as Ok(false)",
                    describe_error(&err)
                ));
            }
        }
    }
    Ok(())
}

/// [`Clause::InstancesStoppedInstanceExists`](crate::Clause::InstancesStoppedInstanceExists).
pub(crate) async fn stopped_instance_exists(ctx: &Ctx) -> Check {
    let v1 = ctx.v1()?;
    let stopped = ctx.stopped()?;
    instance_id(ctx, &stopped, "stopped").await?;
    let pid = provider_id(ctx, &stopped, "stopped").await?;
    let what = format!("instance_exists_by_provider_id of the stopped instance {pid}");
    if !ctx
        .ok(&what, v1.instance_exists_by_provider_id(&pid))
        .await?
    {
        return fail(format!(
            "{what} is false; a stopped instance still exists (false makes the lifecycle controller delete the Node)"
        ));
    }
    Ok(())
}

/// [`Clause::InstancesShutdownIsReported`](crate::Clause::InstancesShutdownIsReported).
pub(crate) async fn shutdown_is_reported(ctx: &Ctx) -> Check {
    let v1 = ctx.v1()?;
    let running = ctx.running()?;
    let stopped = ctx.stopped()?;
    for (instance, expected, state) in [(&running, false, "running"), (&stopped, true, "stopped")] {
        let pid = provider_id(ctx, instance, state).await?;
        let what = format!("instance_shutdown_by_provider_id of the {state} instance {pid}");
        match ctx
            .call(&what, v1.instance_shutdown_by_provider_id(&pid))
            .await?
        {
            Ok(answer) if answer == expected => {}
            Ok(answer) => return fail(format!("{what} is {answer}, expected {expected}")),
            Err(err) if err.kind() == ErrorKind::NotImplemented => {
                return skip(format!(
                    "{what} answered NotImplemented, which counts as \"not shut down\"; nothing to check"
                ));
            }
            Err(err) => return fail(format!("{what} failed: {}", describe_error(&err))),
        }
    }
    Ok(())
}

/// [`Clause::InstancesProviderIdRoundTrips`](crate::Clause::InstancesProviderIdRoundTrips).
pub(crate) async fn provider_id_round_trips(ctx: &Ctx) -> Check {
    let v1 = ctx.v1()?;
    let running = ctx.running()?;
    let id = instance_id(ctx, &running, "running").await?;
    let built = format!("{}://{id}", ctx.provider.provider_name());
    if ProviderId::parse(&built).is_err() {
        return fail(format!(
            "the node controller would build providerID {built:?} from instance_id {id:?}, which is not of the form <provider>://<id>"
        ));
    }
    if let Some(expected) = &running.provider_id
        && *expected != built
    {
        return fail(format!(
            "the node controller would set spec.providerID to {built:?} (<provider_name>://<instance_id>), but the instance's providerID is {expected:?}"
        ));
    }
    let what = format!("instance_exists_by_provider_id of {built:?}");
    if !ctx
        .ok(&what, v1.instance_exists_by_provider_id(&built))
        .await?
    {
        return fail(format!(
            "{what} (built from instance_id of the running node {}) is false",
            running.node_name
        ));
    }
    let what = format!("node_addresses_by_provider_id of {built:?}");
    ctx.ok(&what, v1.node_addresses_by_provider_id(&built))
        .await?;
    Ok(())
}

/// Compare a by-name and a by-providerID answer; `NotImplemented` on either side leaves the pair unchecked.
fn compare<T: PartialEq + fmt::Debug>(
    what: &str,
    by_name: Result<T, CloudError>,
    by_id: Result<T, CloudError>,
) -> Check<bool> {
    match (by_name, by_id) {
        (Ok(a), Ok(b)) if a == b => Ok(true),
        (Ok(a), Ok(b)) => fail(format!("{what}: by name {a:?}, by providerID {b:?}")),
        (Err(e), _) | (_, Err(e)) if e.kind() == ErrorKind::NotImplemented => Ok(false),
        (Err(e), _) => fail(format!("{what} by name failed: {}", describe_error(&e))),
        (_, Err(e)) => fail(format!(
            "{what} by providerID failed: {}",
            describe_error(&e)
        )),
    }
}

/// [`Clause::InstancesByProviderIdAndNameAgree`](crate::Clause::InstancesByProviderIdAndNameAgree).
pub(crate) async fn by_provider_id_and_name_agree(ctx: &Ctx) -> Check {
    let v1 = ctx.v1()?;
    let running = ctx.running()?;
    let name = running.node_name.as_str();
    let pid = provider_id(ctx, &running, "running").await?;
    let addresses_by_name = ctx
        .call("node_addresses", v1.node_addresses(name))
        .await?
        .map(|a| validate::address_set(&a));
    let addresses_by_id = ctx
        .call(
            "node_addresses_by_provider_id",
            v1.node_addresses_by_provider_id(&pid),
        )
        .await?
        .map(|a| validate::address_set(&a));
    let what = format!("the node addresses of {name} ({pid})");
    let addresses = compare(&what, addresses_by_name, addresses_by_id)?;

    let type_by_name = ctx.call("instance_type", v1.instance_type(name)).await?;
    let type_by_id = ctx
        .call(
            "instance_type_by_provider_id",
            v1.instance_type_by_provider_id(&pid),
        )
        .await?;
    let what = format!("the instance type of {name} ({pid})");
    let types = compare(&what, type_by_name, type_by_id)?;
    if !addresses && !types {
        return skip(
            "node addresses and instance type are NotImplemented by name or by providerID; nothing to compare",
        );
    }
    Ok(())
}

/// [`Clause::InstancesNodeAddressesAreValid`](crate::Clause::InstancesNodeAddressesAreValid).
pub(crate) async fn node_addresses_are_valid(ctx: &Ctx) -> Check {
    let v1 = ctx.v1()?;
    let running = ctx.running()?;
    let pid = provider_id(ctx, &running, "running").await?;
    let what = format!("node_addresses_by_provider_id of {pid}");
    let by_id = ctx
        .ok(&what, v1.node_addresses_by_provider_id(&pid))
        .await?;
    validate::node_addresses(&by_id).or_else(|why| fail(format!("{what}: {why}")))?;
    let what = format!("node_addresses of {}", running.node_name);
    match ctx
        .call(&what, v1.node_addresses(&running.node_name))
        .await?
    {
        Ok(by_name) => {
            validate::node_addresses(&by_name).or_else(|why| fail(format!("{what}: {why}")))
        }
        Err(err) if err.kind() == ErrorKind::NotImplemented => Ok(()),
        Err(err) => fail(format!("{what} failed: {}", describe_error(&err))),
    }
}

/// [`Clause::ZonesByProviderIdAndNameAgree`](crate::Clause::ZonesByProviderIdAndNameAgree).
pub(crate) async fn zones_agree(ctx: &Ctx) -> Check {
    let zones = ctx.zones()?;
    let running = ctx.running()?;
    let pid = match (
        &running.provider_id,
        std::sync::Arc::clone(&ctx.provider).instances().is_some(),
    ) {
        (Some(pid), _) => pid.clone(),
        (None, true) => provider_id(ctx, &running, "running").await?,
        (None, false) => {
            return skip(
                "needs the running instance's providerID (set it in the fixture; the provider has no V1 instance_id to build it)",
            );
        }
    };
    let name = running.node_name.as_str();
    let by_id = ctx
        .call(
            "get_zone_by_provider_id",
            zones.get_zone_by_provider_id(&pid),
        )
        .await?;
    let by_name = ctx
        .call("get_zone_by_node_name", zones.get_zone_by_node_name(name))
        .await?;
    let zone = match (&by_id, &by_name) {
        (Ok(zone), _) => zone.clone(),
        (Err(_), Ok(zone)) => zone.clone(),
        _ => ccm_core::Zone::default(),
    };
    let what = format!("the zone of {name} ({pid})");
    if !compare(&what, by_name, by_id)? {
        return skip(
            "get_zone_by_node_name or get_zone_by_provider_id is NotImplemented; nothing to compare",
        );
    }
    for (field, value) in [
        ("failure domain", &zone.failure_domain),
        ("region", &zone.region),
    ] {
        validate::label_value(value).or_else(|why| {
            fail(format!(
                "{what}: the {field} becomes a label value, but {why}"
            ))
        })?;
    }
    Ok(())
}
