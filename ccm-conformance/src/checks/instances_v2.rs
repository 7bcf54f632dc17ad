//! Clauses about [`InstancesV2`](ccm_core::InstancesV2).

use std::sync::Arc;

use ccm_core::helpers::ProviderId;
use ccm_core::{ErrorKind, InstanceLookup, InstanceMetadata};
use k8s_openapi::api::core::v1::Node;

use crate::context::{Check, Ctx, declared, describe_error, fail, skip};
use crate::fixture::InstanceRef;
use crate::validate;

/// How a Node is presented: with its providerID (if the fixture knows it) or by name only.
pub(crate) fn describe_node(node: &Node) -> String {
    let name = ccm_core::helpers::node_name(node);
    match ccm_core::helpers::node_provider_id(node) {
        "" => format!("node {name} (no spec.providerID)"),
        id => format!("node {name} (providerID {id})"),
    }
}

/// The forms of a Node the provider must find: with the fixture's providerID, and (if the provider looks
/// nodes up by name) without one.
fn node_forms(ctx: &Ctx, instance: &InstanceRef) -> Vec<Node> {
    let mut forms = vec![instance.node()];
    if instance.provider_id.is_some() && ctx.fixture.lookup_by_name {
        forms.push(instance.node_without_provider_id());
    }
    forms
}

async fn exists(ctx: &Ctx, node: &Node) -> Check<bool> {
    let v2 = ctx.v2()?;
    let what = format!("instance_exists of {}", describe_node(node));
    ctx.ok(&what, v2.instance_exists(node)).await
}

/// An `instance_metadata` answer as the node controller reads it: metadata to initialize the Node with, or a
/// deliberate skip (described as the provider wrote it). The one place that knows the trait's return type.
pub(crate) enum Lookup {
    Found(InstanceMetadata),
    Skip(String),
}

impl Lookup {
    pub(crate) fn from_answer(answer: InstanceLookup) -> Lookup {
        match answer {
            InstanceLookup::Found(meta) => Lookup::Found(meta),
            InstanceLookup::Skip { reason } => {
                Lookup::Skip(format!("InstanceLookup::Skip {{ reason: {reason:?} }}"))
            }
        }
    }
}

/// `instance_metadata` of an instance that exists, which must find it; `consequence` says what a skip
/// would do.
async fn metadata(ctx: &Ctx, node: &Node, consequence: &str) -> Check<InstanceMetadata> {
    let v2 = ctx.v2()?;
    let what = format!("instance_metadata of the running {}", describe_node(node));
    match Lookup::from_answer(ctx.ok(&what, v2.instance_metadata(node)).await?) {
        Lookup::Found(meta) => Ok(meta),
        Lookup::Skip(skip) => fail(format!("{what} answered {skip}; {consequence}")),
    }
}

/// Check a providerID the cloud reported for `node` against the provider name and the fixture.
fn check_provider_id(ctx: &Ctx, node: &Node, expected: Option<&str>, reported: &str) -> Check {
    let name = ctx.provider.provider_name();
    let id = match ProviderId::parse(reported) {
        Ok(id) => id,
        Err(_) => {
            return fail(format!(
                "instance_metadata of {} reports providerID {reported:?}, which is not of the form {name}://<id>",
                describe_node(node)
            ));
        }
    };
    if id.provider() != name {
        return fail(format!(
            "instance_metadata of {} reports providerID {reported:?} with scheme {:?}, but provider_name() is {name:?}",
            describe_node(node),
            id.provider()
        ));
    }
    if let Some(expected) = expected
        && reported != expected
    {
        return fail(format!(
            "instance_metadata of {} reports providerID {reported:?}, but the instance's providerID is {expected:?} (spec.providerID never changes once set)",
            describe_node(node)
        ));
    }
    Ok(())
}

/// [`Clause::InstancesV2RunningInstanceExists`](crate::Clause::InstancesV2RunningInstanceExists).
pub(crate) async fn running_instance_exists(ctx: &Ctx) -> Check {
    let running = ctx.running()?;
    for node in node_forms(ctx, &running) {
        if !exists(ctx, &node).await? {
            return fail(format!(
                "instance_exists of the running {} is false; the lifecycle controller would delete the Node",
                describe_node(&node)
            ));
        }
    }
    Ok(())
}

/// [`Clause::InstancesV2StoppedInstanceExists`](crate::Clause::InstancesV2StoppedInstanceExists).
pub(crate) async fn stopped_instance_exists(ctx: &Ctx) -> Check {
    let stopped = ctx.stopped()?;
    for node in node_forms(ctx, &stopped) {
        if !exists(ctx, &node).await? {
            return fail(format!(
                "instance_exists of the stopped {} is false; a stopped instance still exists (false makes the lifecycle controller delete the Node)",
                describe_node(&node)
            ));
        }
    }
    Ok(())
}

/// [`Clause::InstancesV2UnknownInstanceDoesNotExist`](crate::Clause::InstancesV2UnknownInstanceDoesNotExist).
pub(crate) async fn unknown_instance_does_not_exist(ctx: &Ctx) -> Check {
    let v2 = ctx.v2()?;
    let unknown = ctx.unknown();
    for node in node_forms(ctx, &unknown) {
        let what = format!("instance_exists of the unknown {}", describe_node(&node));
        match ctx.call(&what, v2.instance_exists(&node)).await? {
            Ok(false) => {}
            Ok(true) => {
                return fail(format!(
                    "{what} is true for an instance the cloud does not have"
                ));
            }
            Err(err) => {
                return fail(format!(
                    "{what} failed: {}; an instance that does not exist must be reported as Ok(false), not as an error (an error keeps the Node forever)",
                    describe_error(&err)
                ));
            }
        }
    }
    Ok(())
}

/// [`Clause::InstancesV2ShutdownIsReported`](crate::Clause::InstancesV2ShutdownIsReported).
pub(crate) async fn shutdown_is_reported(ctx: &Ctx) -> Check {
    let v2 = ctx.v2()?;
    let running = ctx.running()?;
    let stopped = ctx.stopped()?;
    for (instance, expected) in [(&running, false), (&stopped, true)] {
        let node = instance.node();
        let state = if expected { "stopped" } else { "running" };
        let what = format!("instance_shutdown of the {state} {}", describe_node(&node));
        match ctx.call(&what, v2.instance_shutdown(&node)).await? {
            Ok(answer) if answer == expected => {}
            Ok(answer) => {
                return fail(format!("{what} is {answer}, expected {expected}"));
            }
            Err(err) if err.kind() == ErrorKind::NotImplemented => {
                return skip(format!(
                    "{what} answered NotImplemented, so shut-down Nodes are never tainted; nothing to check"
                ));
            }
            Err(err) => {
                return fail(format!("{what} failed: {}", describe_error(&err)));
            }
        }
    }
    Ok(())
}

/// [`Clause::InstancesV2MetadataProviderId`](crate::Clause::InstancesV2MetadataProviderId).
pub(crate) async fn metadata_provider_id(ctx: &Ctx) -> Check {
    let running = ctx.running()?;
    let node = running.node();
    let meta = metadata(
        ctx,
        &node,
        "the node controller would never initialize the Node",
    )
    .await?;
    if meta.provider_id.is_empty() {
        if running.provider_id.is_some() {
            // The Node already has its providerID; the controller keeps it.
            return Ok(());
        }
        return fail(format!(
            "instance_metadata of the running {} has an empty providerID and the Node has none; the node controller cannot initialize it",
            describe_node(&node)
        ));
    }
    check_provider_id(
        ctx,
        &node,
        running.provider_id.as_deref(),
        &meta.provider_id,
    )
}

/// [`Clause::InstancesV2MetadataByNodeName`](crate::Clause::InstancesV2MetadataByNodeName).
pub(crate) async fn metadata_by_node_name(ctx: &Ctx) -> Check {
    if !ctx.fixture.lookup_by_name {
        return declared(
            "the fixture says the provider needs spec.providerID (ConformanceFixture::without_lookup_by_name)",
        );
    }
    let running = ctx.running()?;
    let node = running.node_without_provider_id();
    let meta = metadata(
        ctx,
        &node,
        "a Node whose kubelet was not given --provider-id must be found by name",
    )
    .await?;
    if meta.provider_id.is_empty() {
        return fail(format!(
            "instance_metadata of the running {} has an empty providerID; the node controller needs one to initialize a Node without spec.providerID",
            describe_node(&node)
        ));
    }
    check_provider_id(
        ctx,
        &node,
        running.provider_id.as_deref(),
        &meta.provider_id,
    )
}

/// [`Clause::InstancesV2MetadataIsValid`](crate::Clause::InstancesV2MetadataIsValid).
pub(crate) async fn metadata_is_valid(ctx: &Ctx) -> Check {
    let running = ctx.running()?;
    let node = running.node();
    let meta = metadata(
        ctx,
        &node,
        "the node controller would never initialize the Node",
    )
    .await?;
    let whose = format!("the metadata of {}", describe_node(&node));
    validate::node_addresses(&meta.node_addresses)
        .or_else(|why| fail(format!("{whose}: {why}")))?;
    for (field, value, label) in [
        ("zone", &meta.zone, ccm_core::names::labels::TOPOLOGY_ZONE),
        (
            "region",
            &meta.region,
            ccm_core::names::labels::TOPOLOGY_REGION,
        ),
        (
            "instance type",
            &meta.instance_type,
            ccm_core::names::labels::INSTANCE_TYPE,
        ),
    ] {
        validate::label_value(value).or_else(|why| {
            fail(format!(
                "{whose}: the {field} becomes the value of label {label}, but {why}"
            ))
        })?;
    }
    for (key, value) in &meta.additional_labels {
        validate::label_key(key).or_else(|why| fail(format!("{whose}: {why}")))?;
        validate::label_value(value).or_else(|why| {
            fail(format!(
                "{whose}: the value of additional label {key:?}: {why}"
            ))
        })?;
    }
    Ok(())
}

/// [`Clause::InstancesV2UnknownInstanceMetadataNotFound`](crate::Clause::InstancesV2UnknownInstanceMetadataNotFound).
pub(crate) async fn unknown_instance_metadata_not_found(ctx: &Ctx) -> Check {
    let v2 = ctx.v2()?;
    let unknown = ctx.unknown();
    for node in node_forms(ctx, &unknown) {
        let what = format!("instance_metadata of the unknown {}", describe_node(&node));
        let answer = ctx
            .call(&what, v2.instance_metadata(&node))
            .await?
            .map(Lookup::from_answer);
        if let Err(problem) = judge_unknown_metadata(&what, answer) {
            return fail(problem);
        }
    }
    Ok(())
}

/// The verdict on `instance_metadata` of an instance the cloud does not have: only `InstanceNotFound` is
/// right.
pub(crate) fn judge_unknown_metadata(
    what: &str,
    answer: Result<Lookup, ccm_core::CloudError>,
) -> Result<(), String> {
    const FIX: &str =
        "return Err(CloudError::InstanceNotFound) (or an error whose kind() is InstanceNotFound)";
    match answer {
        Err(err) if err.kind() == ErrorKind::InstanceNotFound => Ok(()),
        Err(err) => Err(format!(
            "{what} failed with {}, not InstanceNotFound: the controllers act on the kind, so they would retry forever instead of knowing the instance is gone; {FIX}",
            describe_error(&err)
        )),
        Ok(Lookup::Skip(skip)) => Err(format!(
            "{what} answered {skip} for an instance the cloud does not have: the node controller would skip the Node forever, so it would never be initialized, and never learn that its instance is gone; {FIX}"
        )),
        Ok(Lookup::Found(meta)) => Err(format!(
            "{what} reports metadata (providerID {:?}) for an instance the cloud does not have: the node controller would initialize a Node for a machine that is not there; {FIX}",
            meta.provider_id
        )),
    }
}

/// One instance's answers: existence and the providerID of its metadata (errors as text).
type Answers = (Result<bool, String>, Result<Option<String>, String>);

async fn answers(v2: Arc<dyn ccm_core::InstancesV2>, node: Node) -> Answers {
    let exists = v2
        .instance_exists(&node)
        .await
        .map_err(|e| e.kind().as_str().to_owned());
    let meta = v2
        .instance_metadata(&node)
        .await
        .map(|answer| match Lookup::from_answer(answer) {
            Lookup::Found(meta) => Some(meta.provider_id),
            Lookup::Skip(_) => None,
        })
        .map_err(|e| e.kind().as_str().to_owned());
    (exists, meta)
}

/// [`Clause::InstancesV2ConcurrentLookupsAgree`](crate::Clause::InstancesV2ConcurrentLookupsAgree).
pub(crate) async fn concurrent_lookups_agree(ctx: &Ctx) -> Check {
    let v2 = ctx.v2()?;
    let running = ctx.running()?;
    let mut nodes = vec![running.node(), ctx.unknown().node()];
    if let Some(stopped) = &ctx.fixture.stopped {
        nodes.push(stopped.node());
    }
    let limit = ctx.fixture.call_timeout;
    let mut expected = Vec::with_capacity(nodes.len());
    for node in &nodes {
        match tokio::time::timeout(limit, answers(v2.clone(), node.clone())).await {
            Ok(a) => expected.push(a),
            Err(_) => {
                return fail(format!(
                    "looking up {} did not answer within the call timeout",
                    describe_node(node)
                ));
            }
        }
    }
    let tasks = (0..ctx.fixture.concurrency).map(|i| {
        let node = nodes[i % nodes.len()].clone();
        let v2 = v2.clone();
        tokio::spawn(async move {
            let got = tokio::time::timeout(limit, answers(v2, node.clone())).await;
            (i, node, got)
        })
    });
    for joined in futures::future::join_all(tasks).await {
        let (i, node, got) = match joined {
            Ok(result) => result,
            Err(join) => return fail(format!("a concurrent lookup panicked: {join}")),
        };
        let Ok(got) = got else {
            return fail(format!(
                "a concurrent lookup of {} did not answer within the call timeout",
                describe_node(&node)
            ));
        };
        let want = &expected[i % nodes.len()];
        if &got != want {
            return fail(format!(
                "concurrently, {} gave exists={:?} and metadata providerID={:?}; sequentially it gave exists={:?} and {:?}",
                describe_node(&node),
                got.0,
                got.1,
                want.0,
                want.1
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use ccm_core::CloudError;

    #[test]
    fn only_instance_not_found_is_right_for_an_unknown_instance() {
        let what = "instance_metadata of the unknown node ghost";
        assert_eq!(
            judge_unknown_metadata(what, Err(CloudError::InstanceNotFound.context("acme"))),
            Ok(())
        );
        let skipped = judge_unknown_metadata(what, Ok(Lookup::Skip("a skip".into()))).unwrap_err();
        assert!(
            skipped.contains("would skip the Node forever, so it would never be initialized"),
            "{skipped}"
        );
        assert!(
            skipped.contains("return Err(CloudError::InstanceNotFound)"),
            "{skipped}"
        );
        let text =
            judge_unknown_metadata(what, Err(CloudError::message("no such instance"))).unwrap_err();
        assert!(
            text.contains("(kind other), not InstanceNotFound"),
            "{text}"
        );
        let found = judge_unknown_metadata(
            what,
            Ok(Lookup::Found(InstanceMetadata::new("acme://ghost"))),
        )
        .unwrap_err();
        assert!(found.contains("a machine that is not there"), "{found}");
    }
}
