//! A vendor controller written on the controller kit (`ccm_core::runtime`): the model to copy.
//!
//! The `tagging-controller` (alias `tagging`, off unless `--controllers` names it) makes sure the cloud instance
//! of every initialized Node carries the tags `kubernetes.io/cluster/<cluster-name>=owned` and
//! `ccm.example/node-name=<node name>`, as AWS's tagging controller does. Here the cloud is the in-memory
//! [`FakeCloud`] and the tags are its instances' labels.
//!
//! A kit controller is three things:
//! - a **pure plan**, [`plan_tags`]: what to change, decided from the cached Node and the cloud's answer;
//! - a **reconcile function** for one key (a Node name) and its context: read, plan, write, emit an Event, and
//!   say when to look again ([`Action`]);
//! - a few **builder lines** ([`Controller`]): which informer events queue which keys, and how many workers.
//!
//! The kit does the rest: the shared Node informer and its cache, waiting for it, the initial enqueue and
//! resyncs, the work queue with Go's `workqueue_*` metrics, the workers and the retry decision, Events that
//! never block ([`EventRecorder`]), and, in the runtime, `--controllers`, leader election,
//! `running_managed_controllers` and shutdown.
//!
//! ```no_run
//! use std::time::Duration;
//! use ccm_core::ProviderRegistry;
//! use ccm_provider_fake::FakeCloud;
//!
//! # async fn demo() -> std::process::ExitCode {
//! let cloud = FakeCloud::new();
//! let registry = ProviderRegistry::new();
//! cloud.register_shared(&registry, "fake").expect("a fresh registry");
//! ccm_app::CloudControllerManager::builder(registry)
//!     .with_default_controllers()
//!     .register_controller(examples::tagging::descriptor(cloud, Duration::from_secs(300)))
//!     .run_from_args() // with --controllers=*,tagging
//!     .await
//! # }
//! ```

use std::{collections::BTreeMap, sync::Arc, time::Duration};

use ccm_core::runtime::prelude::*;
use ccm_core::{CloudError, helpers::node_name, helpers::node_provider_id};
use ccm_provider_fake::FakeCloud;
use k8s_openapi::api::core::v1::Node;

/// The controller's name in `--controllers`.
pub const NAME: &str = "tagging-controller";
/// Its alias, also its `running_managed_controllers` name and the name of its work queue in the `workqueue_*`
/// metrics.
pub const ALIAS: &str = "tagging";
/// The `source.component` of its Events.
pub const COMPONENT: &str = "tagging-controller";
/// The reason of the Normal Event emitted when an instance was tagged.
pub const TAGGED_INSTANCE: &str = "TaggedInstance";
/// The tag naming the Node an instance serves.
pub const NODE_NAME_TAG: &str = "ccm.example/node-name";

/// An instance's tags.
pub type Tags = BTreeMap<String, String>;

/// The tag marking an instance as owned by the cluster: `kubernetes.io/cluster/<cluster>`, value `owned`.
pub fn cluster_tag(cluster: &str) -> String {
    format!("kubernetes.io/cluster/{cluster}")
}

/// The tags to set on `node`'s instance, whose tags are `current`: `None` when there is nothing to do (every tag
/// is there with its value, the Node has no providerID yet, or there is no cluster name). Other tags are left
/// alone.
pub fn plan_tags(current: &Tags, node: &Node, cluster: &str) -> Option<Tags> {
    let name = node_name(node);
    if node_provider_id(node).is_empty() || name.is_empty() || cluster.is_empty() {
        return None;
    }
    let mut missing = Tags::new();
    let owned = (cluster_tag(cluster), "owned");
    for (key, value) in [owned, (NODE_NAME_TAG.to_owned(), name)] {
        if current.get(&key).map(String::as_str) != Some(value) {
            missing.insert(key, value.to_owned());
        }
    }
    (!missing.is_empty()).then_some(missing)
}

/// The controller descriptor for the runtime: `tagging-controller`, alias `tagging`, disabled by default. Each
/// tagged Node is checked again every `resync` (someone may remove the tags).
pub fn descriptor(cloud: FakeCloud, resync: Duration) -> ControllerDescriptor {
    describe(resync, move |_| Some(cloud.clone()))
}

/// The same, for a binary whose cloud is built by its provider factory (the reference CCM): the factory shares
/// its cloud (`settings.vendor.share(cloud)`) and the controller takes it from its context
/// (`ctx.vendor.shared::<FakeCloud>()`) when it starts; without one (not on the fake cloud) it stays off, which
/// the runtime logs.
pub fn descriptor_from_factory(resync: Duration) -> ControllerDescriptor {
    describe(resync, |ctx| ctx.vendor.shared::<FakeCloud>())
}

/// The builder lines: every added or changed Node is queued, two workers [`reconcile`] it with a [`Tagger`].
fn describe(
    resync: Duration,
    cloud: impl Fn(&ControllerContext) -> Option<FakeCloud> + Send + Sync + 'static,
) -> ControllerDescriptor {
    ControllerDescriptor::new(NAME, move |ctx: &ControllerContext| {
        let nodes = ctx.informers.nodes();
        Ok(cloud(ctx).map(|cloud| {
            let tagger = Arc::new(Tagger {
                cloud,
                cluster: ctx.cluster_name.clone(),
                resync,
                recorder: ctx.recorder(COMPONENT),
            });
            ctx.controller(NAME, ALIAS)
                .watches(nodes, added_or_updated)
                .workers(2)
                .boxed_objects(nodes, tagger, reconcile)
        }))
    })
    .with_aliases(&[ALIAS])
    .disabled_by_default()
}

/// What a reconcile needs: its context.
struct Tagger {
    cloud: FakeCloud,
    cluster: String,
    resync: Duration,
    recorder: EventRecorder,
}

/// Tag the instance of `node` if it lacks a tag. The fake cloud cannot fail; a real cloud's [`CloudError`] is
/// returned from here, and the kit retries after the delay it asks for, or with backoff.
async fn reconcile(node: Arc<Node>, ctx: Arc<Tagger>) -> Result<Action, CloudError> {
    let Some(instance) = ctx.cloud.instance(node_name(&node)) else {
        return Ok(Action::Done); // no instance in this cloud: nothing to do
    };
    let id = node_provider_id(&node);
    if instance.provider_id.as_deref() != Some(id) {
        return Ok(Action::Done); // not initialized yet (the update will queue it), or not this instance
    }
    if let Some(tags) = plan_tags(&instance.labels, &node, &ctx.cluster) {
        let list: Vec<String> = tags.iter().map(|(k, v)| format!("{k}={v}")).collect();
        let message = format!("Tagged instance {id} with {}", list.join(", "));
        ctx.cloud
            .update_instance(&instance.name, |i| i.labels.extend(tags));
        ctx.recorder.normal_about(&*node, TAGGED_INSTANCE, message);
    }
    Ok(Action::RequeueAfter(ctx.resync))
}

#[cfg(test)]
mod tests {
    use super::*;
    use ccm_core::runtime::informer::{InformerScope, NodeStore, SharedInformers, StoreWriter};
    use ccm_core::runtime::metrics::SharedRegistry;
    use ccm_provider_fake::FakeInstance;
    use k8s_openapi::api::core::v1::NodeSpec;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
    use kube::ResourceExt;

    const CLUSTER_TAG: &str = "kubernetes.io/cluster/prod";

    fn node(name: Option<&str>, provider_id: Option<&str>) -> Node {
        Node {
            metadata: ObjectMeta {
                name: name.map(str::to_owned),
                ..ObjectMeta::default()
            },
            spec: Some(NodeSpec {
                provider_id: provider_id.map(str::to_owned),
                ..NodeSpec::default()
            }),
            ..Node::default()
        }
    }

    fn tags(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn the_cluster_tag_names_the_cluster() {
        assert_eq!(cluster_tag("prod"), CLUSTER_TAG);
    }

    #[test]
    fn plan_tags_covers_every_case() {
        let n1 = node(Some("n1"), Some("fake://n1"));
        let plan = |current: &[(&str, &str)], node: &Node, cluster: &str| {
            plan_tags(&tags(current), node, cluster)
        };
        let owned = (CLUSTER_TAG, "owned");
        let named = (NODE_NAME_TAG, "n1");
        let both = Some(tags(&[owned, named]));
        // Missing or wrong tags are planned, and only those; other tags are left alone.
        assert_eq!(plan(&[], &n1, "prod"), both, "untagged");
        assert_eq!(plan(&[("team", "a")], &n1, "prod"), both, "other tags");
        assert_eq!(
            plan(&[named], &n1, "prod"),
            Some(tags(&[owned])),
            "no cluster tag"
        );
        assert_eq!(
            plan(&[owned], &n1, "prod"),
            Some(tags(&[named])),
            "no name tag"
        );
        let shared = (CLUSTER_TAG, "shared");
        assert_eq!(
            plan(&[shared, named], &n1, "prod"),
            Some(tags(&[owned])),
            "shared"
        );
        let other_node = (NODE_NAME_TAG, "n0");
        assert_eq!(
            plan(&[owned, other_node], &n1, "prod"),
            Some(tags(&[named])),
            "renamed"
        );
        let dev = ("kubernetes.io/cluster/dev", "owned");
        assert_eq!(
            plan(&[dev, named], &n1, "prod"),
            Some(tags(&[owned])),
            "other cluster"
        );
        // Tagged: nothing to do.
        assert_eq!(plan(&[owned, named], &n1, "prod"), None, "tagged");
        assert_eq!(
            plan(&[owned, named, ("team", "a")], &n1, "prod"),
            None,
            "tagged, more tags"
        );
        // Not in the cloud yet, or nothing to tag with: nothing to do.
        assert_eq!(
            plan(&[], &node(Some("n1"), None), "prod"),
            None,
            "no providerID"
        );
        assert_eq!(
            plan(&[], &node(Some("n1"), Some("")), "prod"),
            None,
            "empty providerID"
        );
        let no_spec = Node {
            spec: None,
            ..n1.clone()
        };
        assert_eq!(plan(&[], &no_spec, "prod"), None, "no spec");
        assert_eq!(
            plan(&[], &node(None, Some("fake://n1")), "prod"),
            None,
            "no name"
        );
        assert_eq!(plan(&[], &n1, ""), None, "no cluster name");
    }

    /// The reconcile over a cache filled by hand, reached by key as the kit reaches it ([`Controller::boxed_objects`]:
    /// a key whose Node is gone from the cache is done without a call).
    struct Keyed {
        context: Arc<Tagger>,
        nodes: NodeStore,
    }

    impl Keyed {
        async fn reconcile(&self, name: &str) -> Result<Action, CloudError> {
            match self.nodes.get(name) {
                Some(node) => reconcile(node, self.context.clone()).await,
                None => Ok(Action::Done),
            }
        }
    }

    /// A controller over a cache filled by hand; its client points nowhere (the Events are only attempted).
    fn tagger(cloud: &FakeCloud, nodes: &[Node]) -> Keyed {
        let config = kube::Config::new("http://127.0.0.1:9".parse().expect("a URL"));
        let client = kube::Client::try_from(config).expect("a client");
        let informers = SharedInformers::new(client.clone(), &InformerScope::all());
        let cache = StoreWriter::new();
        for node in nodes {
            cache.insert(node.name_any(), Arc::new(node.clone()));
        }
        let provider = Arc::new(cloud.clone());
        let ctx =
            ControllerContext::new(client, provider, informers, SharedRegistry::new(), "prod");
        let context = Arc::new(Tagger {
            cloud: cloud.clone(),
            cluster: ctx.cluster_name.clone(),
            resync: Duration::from_secs(60),
            recorder: ctx.recorder(COMPONENT),
        });
        Keyed {
            context,
            nodes: cache.store(),
        }
    }

    #[tokio::test]
    async fn reconcile_tags_initialized_nodes_and_looks_again_later() {
        let cloud = FakeCloud::new();
        for name in ["n1", "gone", "uninitialized", "elsewhere"] {
            cloud.add_instance(FakeInstance::new(name));
        }
        let tagger = tagger(
            &cloud,
            &[
                node(Some("n1"), Some("fake://n1")),
                node(Some("uninitialized"), None),
                node(Some("elsewhere"), Some("other://elsewhere")),
                node(Some("no-instance"), Some("fake://no-instance")),
            ],
        );
        let resync = Some(Action::RequeueAfter(Duration::from_secs(60)));
        assert_eq!(tagger.reconcile("n1").await.ok(), resync);
        let want = tags(&[(CLUSTER_TAG, "owned"), (NODE_NAME_TAG, "n1")]);
        assert_eq!(cloud.instance("n1").unwrap().labels, want);
        // Tagged already: nothing changes, the check repeats.
        assert_eq!(tagger.reconcile("n1").await.ok(), resync);
        assert_eq!(cloud.instance("n1").unwrap().labels, want);
        for name in ["gone", "uninitialized", "elsewhere", "no-instance"] {
            assert_eq!(
                tagger.reconcile(name).await.ok(),
                Some(Action::Done),
                "{name}"
            );
            if let Some(instance) = cloud.instance(name) {
                assert!(instance.labels.is_empty(), "{name} is left alone");
            }
        }
    }
}
