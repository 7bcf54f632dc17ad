//! The state file: written when set, one appended line per load-balancer change, folded by
//! `CloudSnapshot::from_json`, restored by a later cloud.

mod common;

use std::sync::Arc;

use ccm_core::{CloudProvider, LoadBalancer};
use ccm_provider_fake::{CloudSnapshot, FakeCloud};
use common::{nodes, service};

fn lb(cloud: &FakeCloud) -> Arc<dyn LoadBalancer> {
    CloudProvider::load_balancer(Arc::new(cloud.clone())).expect("load balancers are on")
}

fn read(path: &std::path::Path) -> (String, CloudSnapshot) {
    let text = std::fs::read_to_string(path).expect("the state file exists");
    let snapshot = CloudSnapshot::from_json(&text).expect("a state file");
    (text, snapshot)
}

fn services(snapshot: &CloudSnapshot) -> Vec<(String, Vec<String>)> {
    snapshot
        .load_balancers
        .iter()
        .map(|lb| (lb.service.clone(), lb.backends.clone()))
        .collect()
}

#[tokio::test]
async fn each_change_appends_one_line_and_reading_folds_them() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let path = dir.path().join("state.json");
    let cloud = FakeCloud::new();
    cloud.set_state_file(&path);
    let (text, snapshot) = read(&path);
    assert_eq!(
        text.lines().count(),
        1,
        "set writes the whole state as one line"
    );
    assert!(snapshot.load_balancers.is_empty());

    let lbs = lb(&cloud);
    let (web, api) = (
        service("default", "web", &[80]),
        service("default", "api", &[443]),
    );
    lbs.ensure_load_balancer("kubernetes", &web, &nodes(&["n1", "n2"]))
        .await
        .expect("created");
    lbs.ensure_load_balancer("kubernetes", &api, &nodes(&["n1"]))
        .await
        .expect("created");
    lbs.update_load_balancer("kubernetes", &web, &nodes(&["n3"]))
        .await
        .expect("updated");
    lbs.ensure_load_balancer_deleted("kubernetes", &api)
        .await
        .expect("deleted");

    let (text, snapshot) = read(&path);
    assert_eq!(
        text.lines().count(),
        5,
        "the first line and one per change: {text}"
    );
    assert_eq!(
        services(&snapshot),
        [("default/web".to_owned(), vec!["n3".to_owned()])]
    );
    assert_eq!(
        snapshot,
        cloud.snapshot(),
        "the file says what the cloud holds"
    );
}

#[tokio::test]
async fn a_later_cloud_restores_the_folded_state_and_compacts_the_file() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let path = dir.path().join("state.json");
    let first = FakeCloud::new();
    first.set_state_file(&path);
    for name in ["a", "b", "c"] {
        lb(&first)
            .ensure_load_balancer("kubernetes", &service("ns", name, &[80]), &nodes(&["n1"]))
            .await
            .expect("created");
    }
    assert!(
        first.remove_load_balancer("ns/b"),
        "deleted behind the CCM's back"
    );

    let second = FakeCloud::new();
    assert_eq!(second.restore_state_file(&path).expect("restored"), 2);
    let (text, snapshot) = read(&path);
    assert_eq!(
        text.lines().count(),
        1,
        "restoring rewrites the file as one line"
    );
    let names: Vec<_> = snapshot
        .load_balancers
        .iter()
        .map(|lb| lb.service.as_str())
        .collect();
    assert_eq!(names, ["ns/a", "ns/c"]);
    assert_eq!(snapshot, second.snapshot());
}

#[test]
fn a_line_cut_short_at_the_end_is_ignored_and_garbage_is_an_error() {
    let whole = r#"{"instances":["i"],"loadBalancers":[{"name":"a","service":"ns/a","ingressIP":"10.0.0.1","hosts":0}]}"#;
    let deleted = r#"{"deleted":"ns/a"}"#;
    let folded = CloudSnapshot::from_json(&format!("{whole}\n{deleted}\n")).expect("parses");
    assert!(folded.load_balancers.is_empty());
    assert_eq!(folded.instances, ["i"]);

    let cut = CloudSnapshot::from_json(&format!("{whole}\n{{\"deleted\":\"ns")).expect("parses");
    assert_eq!(
        cut.load_balancers.len(),
        1,
        "the cut-short change is not applied"
    );

    let pretty = serde_json::to_string_pretty(&cut).expect("serializes");
    assert_eq!(
        CloudSnapshot::from_json(&pretty).expect("the whole-state form"),
        cut
    );

    assert!(CloudSnapshot::from_json("").is_err());
    assert!(CloudSnapshot::from_json(&format!("{whole}\n{{\"renamed\":1}}\n")).is_err());
    assert!(CloudSnapshot::from_json("[1, 2]").is_err());
}
