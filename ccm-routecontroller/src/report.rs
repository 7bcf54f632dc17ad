//! What a route pass reports: the counts of a [`PassReport`], tallied from the outcomes of its calls, and the
//! `FailedToCreateRoute` Event of a failed create.

use std::collections::HashSet;
use std::time::Duration;

use k8s_openapi::api::core::v1::ObjectReference;

use crate::error::Error;
use crate::plan::RouteCreate;

/// What one pass did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct PassReport {
    /// Routes the cloud listed.
    pub routes_listed: usize,
    /// Routes deleted.
    pub deleted: usize,
    /// Route deletions that failed.
    pub failed_deletes: usize,
    /// Routes created.
    pub created: usize,
    /// Route creations that failed (each also produced a `FailedToCreateRoute` event on its Node).
    pub failed_creates: usize,
    /// `NetworkUnavailable` conditions written.
    pub conditions_written: usize,
    /// `NetworkUnavailable` condition writes that failed.
    pub failed_conditions: usize,
}

impl PassReport {
    /// True if every operation of the pass succeeded.
    pub fn is_complete(&self) -> bool {
        self.failed_deletes == 0 && self.failed_creates == 0 && self.failed_conditions == 0
    }

    /// `Ok(self)` if complete, else [`Error::Incomplete`].
    pub fn into_result(self) -> Result<Self, Error> {
        if self.is_complete() {
            Ok(self)
        } else {
            Err(Error::Incomplete {
                failed_deletes: self.failed_deletes,
                failed_creates: self.failed_creates,
                failed_conditions: self.failed_conditions,
            })
        }
    }

    /// Count the deletes (`true`: done) and the creates with their outcomes; returns the `(node, cidr)` of the
    /// creates that failed (their Nodes keep `NetworkUnavailable`).
    pub(crate) fn tally_routes<'a>(
        &mut self,
        deletes: &[bool],
        creates: impl IntoIterator<Item = (&'a RouteCreate, bool)>,
    ) -> HashSet<(String, String)> {
        self.deleted = deletes.iter().filter(|ok| **ok).count();
        self.failed_deletes = deletes.len() - self.deleted;
        let mut failed = HashSet::new();
        for (create, ok) in creates {
            if ok {
                self.created += 1;
            } else {
                self.failed_creates += 1;
                failed.insert((
                    create.node_name.clone(),
                    create.route.destination_cidr.clone(),
                ));
            }
        }
        failed
    }

    /// Count one condition write.
    pub(crate) fn tally_condition(&mut self, written: bool) {
        if written {
            self.conditions_written += 1;
        } else {
            self.failed_conditions += 1;
        }
    }
}

/// The message of the Warning `FailedToCreateRoute` on the Node of a create that failed after `elapsed`.
pub(crate) fn failed_create_message(
    create: &RouteCreate,
    elapsed: Duration,
    error: &dyn std::fmt::Display,
) -> String {
    format!(
        "Could not create route {} {} for node {} after {:?}: {}",
        create.name_hint, create.route.destination_cidr, create.node_name, elapsed, error
    )
}

/// The Node the `FailedToCreateRoute` Event is about: its name, and its UID when known.
pub(crate) fn node_reference(name: &str, uid: &str) -> ObjectReference {
    ObjectReference {
        api_version: Some("v1".to_owned()),
        kind: Some("Node".to_owned()),
        name: Some(name.to_owned()),
        uid: (!uid.is_empty()).then(|| uid.to_owned()),
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::CidrAction;
    use ccm_core::Route;

    fn create(node: &str, cidr: &str) -> RouteCreate {
        RouteCreate {
            node_name: node.into(),
            name_hint: format!("uid-{node}"),
            route: Route::new(node, cidr),
            action: CidrAction::Add,
            after_deletes: false,
        }
    }

    #[test]
    fn a_pass_is_complete_only_without_failures() {
        let mut report = PassReport::default();
        let (a, b) = (create("a", "10.0.0.0/24"), create("b", "10.0.1.0/24"));
        let failed = report.tally_routes(&[true, false, true], [(&a, true), (&b, false)]);
        assert_eq!(failed, [("b".to_owned(), "10.0.1.0/24".to_owned())].into());
        report.tally_condition(true);
        report.tally_condition(false);
        let counts = (
            report.deleted,
            report.failed_deletes,
            report.created,
            report.failed_creates,
        );
        assert_eq!(counts, (2, 1, 1, 1));
        assert_eq!(
            (report.conditions_written, report.failed_conditions),
            (1, 1)
        );
        assert!(!report.is_complete());
        assert!(matches!(
            report.into_result(),
            Err(Error::Incomplete {
                failed_deletes: 1,
                ..
            })
        ));
        let done = PassReport::default();
        assert!(done.is_complete());
        assert_eq!(done.clone().into_result().unwrap(), done);
    }

    #[test]
    fn a_failed_create_names_the_node_and_the_cidr() {
        let a = create("a", "10.0.0.0/24");
        let message = failed_create_message(&a, Duration::from_millis(5), &"quota");
        assert_eq!(
            message,
            "Could not create route uid-a 10.0.0.0/24 for node a after 5ms: quota"
        );
        let reference = node_reference("a", "uid-a");
        assert_eq!(reference.kind.as_deref(), Some("Node"));
        assert_eq!(reference.uid.as_deref(), Some("uid-a"));
        assert_eq!(node_reference("a", "").uid, None);
    }
}
