//! Guarded Node writes: plan from the node as last seen, patch, and on a failed guard re-read and plan again.

use ccm_core::names;
use k8s_openapi::api::core::v1::Node;
use kube::Api;
use kube::api::{Patch, PatchParams};

use crate::error::Error;
pub(crate) use crate::patch::{Step, Target};

/// How many times a guarded patch is retried after its `test` failed (the node changed meanwhile).
pub const MAX_GUARD_RETRIES: u32 = 5;

/// Successful writes one [`guarded_update`] may make before it stops (a plan that never converges is a bug).
const MAX_WRITES: usize = 4;

/// 404.
pub(crate) fn is_not_found(err: &kube::Error) -> bool {
    matches!(err, kube::Error::Api(s) if s.code == 404)
}

/// 409 (conflict) or 422 (a JSON Patch `test` failed, which the API server reports as unprocessable).
pub(crate) fn is_guard_failure(err: &kube::Error) -> bool {
    matches!(err, kube::Error::Api(s) if s.code == 409 || s.code == 422)
}

/// Wraps a Kubernetes API error of `action` on the node `node`.
pub(crate) fn kube_err(node: &str, action: &'static str) -> impl FnOnce(kube::Error) -> Error {
    let node = node.to_owned();
    move |source| Error::Kube {
        node,
        action,
        source,
    }
}

/// Patch parameters with the node controllers' field manager.
pub(crate) fn patch_params() -> PatchParams {
    PatchParams {
        field_manager: Some(names::controllers::NODE_CONTROLLER_CLIENT.to_owned()),
        ..Default::default()
    }
}

/// What [`guarded_update`] ended with.
#[derive(Debug)]
pub(crate) struct Outcome {
    /// The node after the last write (or as last read); `None` if it was deleted meanwhile.
    pub node: Option<Node>,
    /// The writes that succeeded, in order.
    pub written: Vec<Target>,
}

/// Write `start` towards what `plan` wants, one guarded JSON Patch at a time.
///
/// `plan(node, written)` returns the next patch for `node` (given the writes already made), or `None` when the
/// node is as wanted. After a successful write it is asked again with the server's answer; after a failed guard
/// (409/422) it is asked again with a fresh read, at most [`MAX_GUARD_RETRIES`] times. A node that disappears
/// ends the update without error.
pub(crate) async fn guarded_update(
    api: &Api<Node>,
    start: Node,
    mut plan: impl FnMut(&Node, &[Target]) -> Step,
) -> Result<Outcome, Error> {
    let name = ccm_core::helpers::node_name(&start).to_owned();
    let mut node = Some(start);
    let mut written = Vec::new();
    let mut retries = 0;
    while let Some(current) = &node {
        let Some((target, ops)) = plan(current, &written)? else {
            break;
        };
        if ops.is_empty() || written.len() >= MAX_WRITES {
            break;
        }
        let patch: Patch<()> = Patch::Json(json_patch::Patch(ops));
        let sent = match target {
            Target::Spec => api.patch(&name, &patch_params(), &patch).await,
            Target::Status => api.patch_status(&name, &patch_params(), &patch).await,
        };
        node = match sent {
            Ok(updated) => {
                written.push(target);
                Some(updated)
            }
            Err(err) if is_not_found(&err) => None,
            Err(err) if is_guard_failure(&err) && retries < MAX_GUARD_RETRIES => {
                retries += 1;
                tracing::debug!(node = %name, error = %err, "node changed since it was read; re-reading");
                api.get_opt(&name).await.map_err(kube_err(&name, "read"))?
            }
            Err(source) if is_guard_failure(&source) => {
                return Err(Error::Contended {
                    node: name,
                    action: target.action(),
                    attempts: retries + 1,
                    source,
                });
            }
            Err(err) => return Err(kube_err(&name, target.action())(err)),
        };
    }
    Ok(Outcome { node, written })
}
