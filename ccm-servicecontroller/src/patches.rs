//! The bodies of the controller's Service writes, as pure functions.
//!
//! All writes go to the `services/status` subresource, as in Go (its `PatchService` helper patches the status
//! subresource, which also persists metadata such as finalizers): the finalizer is changed with a JSON patch
//! guarded by `test` operations (a concurrent change of the list makes the patch fail instead of being
//! overwritten), and `status.loadBalancer.ingress` is replaced with a JSON merge patch.

use ccm_core::names;
use k8s_openapi::api::core::v1::LoadBalancerStatus;
use serde_json::{Value, json};

/// A JSON patch adding the cleanup finalizer to a Service whose finalizers are `current`.
///
/// With no finalizers the patch tests that the list is absent and creates it; otherwise it tests the whole list
/// and appends.
pub fn add_finalizer(current: &[String]) -> Value {
    let finalizer = names::finalizers::LOAD_BALANCER_CLEANUP;
    if current.is_empty() {
        json!([
            {"op": "test", "path": "/metadata/finalizers", "value": null},
            {"op": "add", "path": "/metadata/finalizers", "value": [finalizer]},
        ])
    } else {
        json!([
            {"op": "test", "path": "/metadata/finalizers", "value": current},
            {"op": "add", "path": "/metadata/finalizers/-", "value": finalizer},
        ])
    }
}

/// A JSON patch removing every occurrence of the cleanup finalizer from `current`, or `None` if it has none.
///
/// Each removal tests the entry first; entries are removed from the end so earlier indices stay valid.
pub fn remove_finalizer(current: &[String]) -> Option<Value> {
    let finalizer = names::finalizers::LOAD_BALANCER_CLEANUP;
    let ops: Vec<Value> = current
        .iter()
        .enumerate()
        .rev()
        .filter(|(_, f)| f.as_str() == finalizer)
        .flat_map(|(i, _)| {
            let path = format!("/metadata/finalizers/{i}");
            [
                json!({"op": "test", "path": path, "value": finalizer}),
                json!({"op": "remove", "path": path}),
            ]
        })
        .collect();
    (!ops.is_empty()).then_some(Value::Array(ops))
}

/// A JSON merge patch setting `status.loadBalancer.ingress` (removing it when `status` has no ingress).
pub fn load_balancer_status(status: &LoadBalancerStatus) -> Value {
    let ingress = match status.ingress.as_deref() {
        Some(list) if !list.is_empty() => json!(list),
        _ => Value::Null,
    };
    json!({"status": {"loadBalancer": {"ingress": ingress}}})
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::LoadBalancerIngress;

    const F: &str = names::finalizers::LOAD_BALANCER_CLEANUP;

    #[test]
    fn add_to_empty_and_existing() {
        assert_eq!(
            add_finalizer(&[]),
            json!([
                {"op": "test", "path": "/metadata/finalizers", "value": null},
                {"op": "add", "path": "/metadata/finalizers", "value": [F]},
            ])
        );
        assert_eq!(
            add_finalizer(&["other".into()]),
            json!([
                {"op": "test", "path": "/metadata/finalizers", "value": ["other"]},
                {"op": "add", "path": "/metadata/finalizers/-", "value": F},
            ])
        );
    }

    #[test]
    fn remove_every_occurrence_from_the_end() {
        assert_eq!(remove_finalizer(&[]), None);
        assert_eq!(remove_finalizer(&["other".into()]), None);
        assert_eq!(
            remove_finalizer(&[F.into(), "other".into(), F.into()]),
            Some(json!([
                {"op": "test", "path": "/metadata/finalizers/2", "value": F},
                {"op": "remove", "path": "/metadata/finalizers/2"},
                {"op": "test", "path": "/metadata/finalizers/0", "value": F},
                {"op": "remove", "path": "/metadata/finalizers/0"},
            ]))
        );
    }

    #[test]
    fn status_set_and_clear() {
        let status = LoadBalancerStatus {
            ingress: Some(vec![LoadBalancerIngress {
                ip: Some("203.0.113.1".into()),
                ip_mode: Some("VIP".into()),
                ..Default::default()
            }]),
        };
        assert_eq!(
            load_balancer_status(&status),
            json!({"status": {"loadBalancer": {"ingress": [{"ip": "203.0.113.1", "ipMode": "VIP"}]}}})
        );
        assert_eq!(
            load_balancer_status(&LoadBalancerStatus::default()),
            json!({"status": {"loadBalancer": {"ingress": null}}})
        );
        assert_eq!(
            load_balancer_status(&LoadBalancerStatus {
                ingress: Some(vec![])
            }),
            json!({"status": {"loadBalancer": {"ingress": null}}})
        );
    }
}
