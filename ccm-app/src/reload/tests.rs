use std::sync::Mutex;

use async_trait::async_trait;

use super::*;

impl ReloadMetrics {
    /// The reloads counted with `result`.
    fn total(&self, result: &str) -> u64 {
        self.reloads
            .get_or_create(&vec![("result".to_owned(), result.to_owned())])
            .get()
    }
}

fn files(entries: &[(&str, Option<&str>)]) -> Snapshot {
    entries
        .iter()
        .map(|(p, c)| (PathBuf::from(p), c.map(|c| c.as_bytes().to_vec())))
        .collect()
}

fn snap(entries: &[(&str, Option<&str>)]) -> Digests {
    digests(&files(entries))
}

#[test]
fn decide_covers_every_case() {
    let applied = snap(&[("/cfg", Some("a")), ("/token", Some("t1"))]);
    assert_eq!(decide(&applied, None, &applied), Step::Unchanged);
    assert_eq!(
        decide(
            &applied,
            None,
            &snap(&[("/cfg", Some("b")), ("/token", Some("t1"))])
        ),
        Step::Reload(vec![PathBuf::from("/cfg")])
    );
    assert_eq!(
        decide(
            &applied,
            None,
            &snap(&[("/cfg", Some("b")), ("/token", Some("t2"))])
        ),
        Step::Reload(vec![PathBuf::from("/cfg"), PathBuf::from("/token")])
    );
    // mid-swap or deleted: wait, whatever else changed
    assert_eq!(
        decide(
            &applied,
            None,
            &snap(&[("/cfg", Some("b")), ("/token", None)])
        ),
        Step::Unreadable(vec![PathBuf::from("/token")])
    );
    // the rejected contents are not tried again; other contents are
    let bad = snap(&[("/cfg", Some("bad")), ("/token", Some("t1"))]);
    assert_eq!(decide(&applied, Some(&bad), &bad), Step::AlreadyRejected);
    assert_eq!(
        decide(
            &applied,
            Some(&bad),
            &snap(&[("/cfg", Some("c")), ("/token", Some("t1"))])
        ),
        Step::Reload(vec![PathBuf::from("/cfg")])
    );
    // going back to the contents in force after a rejection is no change
    assert_eq!(decide(&applied, Some(&bad), &applied), Step::Unchanged);
    // a file that could not be read at start and now reads is a change
    let unread_at_start = snap(&[("/cfg", Some("a")), ("/token", None)]);
    assert_eq!(
        decide(&unread_at_start, None, &applied),
        Step::Reload(vec![PathBuf::from("/token")])
    );
}

#[test]
fn verdicts_events_and_labels() {
    assert_eq!(verdict(&Ok(())), Verdict::Applied);
    assert_eq!(
        verdict(&Err(CloudError::NotImplemented)),
        Verdict::Unsupported
    );
    let rejected = verdict(&Err(CloudError::message("zone \"x\" is unknown")));
    assert!(matches!(&rejected, Verdict::Rejected(r) if r.contains("zone \"x\" is unknown")));
    assert_eq!(
        [
            Verdict::Applied.label(),
            rejected.label(),
            Verdict::Unsupported.label()
        ],
        ["success", "failure", "unsupported"]
    );

    let changed = [PathBuf::from("/etc/cloud.yaml")];
    let (t, reason, message) = event_of(&Verdict::Applied, &changed);
    assert_eq!((t, reason), (EventType::Normal, "CloudConfigReloaded"));
    assert!(message.contains("/etc/cloud.yaml"), "{message}");
    let (t, reason, message) = event_of(&rejected, &changed);
    assert_eq!((t, reason), (EventType::Warning, "CloudConfigReloadFailed"));
    assert!(
        message.contains("previous one stays in force: "),
        "{message}"
    );
    let (t, reason, message) = event_of(&Verdict::Unsupported, &changed);
    assert_eq!((t, reason), (EventType::Warning, "CloudConfigReloadFailed"));
    assert!(message.contains("restart"), "{message}");
}

#[test]
fn events_are_about_the_pod_or_else_the_lease() {
    let pod = involved_object(
        Some(("ccm-0".into(), "kube-system".into())),
        ("kube-system", "cloud-controller-manager"),
    );
    assert_eq!(pod.kind.as_deref(), Some("Pod"));
    assert_eq!(pod.name.as_deref(), Some("ccm-0"));
    assert_eq!(pod.namespace.as_deref(), Some("kube-system"));
    let lease = involved_object(None, ("ccm-ns", "my-ccm"));
    assert_eq!(lease.kind.as_deref(), Some("Lease"));
    assert_eq!(lease.api_version.as_deref(), Some("coordination.k8s.io/v1"));
    assert_eq!(
        (lease.namespace.as_deref(), lease.name.as_deref()),
        (Some("ccm-ns"), Some("my-ccm"))
    );
}

/// A provider that records each reload's cloud config and rejects `bad`.
#[derive(Default)]
struct Recording {
    calls: Mutex<Vec<(tokio::time::Instant, String)>>,
}

#[async_trait]
impl CloudProvider for Recording {
    fn provider_name(&self) -> &str {
        "recording"
    }
    async fn reload(&self, ctx: ReloadContext) -> Result<(), CloudError> {
        let text = ctx
            .cloud_config_str()
            .unwrap()
            .unwrap_or_default()
            .to_owned();
        self.calls
            .lock()
            .unwrap()
            .push((tokio::time::Instant::now(), text.clone()));
        assert_eq!(
            ctx.file("/token"),
            Some(&b"t"[..]),
            "declared files are passed"
        );
        if text == "bad" {
            Err(CloudError::message("bad config"))
        } else {
            Ok(())
        }
    }
}

#[tokio::test(start_paused = true)]
async fn the_watcher_reloads_at_the_next_tick_and_does_not_repeat_a_rejection() {
    let provider = Arc::new(Recording::default());
    let files = Arc::new(Mutex::new(self::files(&[
        ("/cfg", Some("a")),
        ("/token", Some("t")),
    ])));
    let seen: Arc<Mutex<Vec<Reloaded>>> = Arc::default();
    let interval = Duration::from_secs(10);
    let source = files.clone();
    let sink = seen.clone();
    let watcher = Watcher {
        cloud_config: Some(PathBuf::from("/cfg")),
        interval,
        provider: provider.clone(),
        read: move || {
            let snapshot = source.lock().unwrap().clone();
            async move { snapshot }
        },
        observe: Arc::new(move |r: &Reloaded| sink.lock().unwrap().push(r.clone())),
    };
    let shutdown = CancellationToken::new();
    let start = tokio::time::Instant::now();
    let initial = digests(&files.lock().unwrap());
    let task = tokio::spawn(run_watcher(watcher, initial, shutdown.clone()));
    let set_cfg = |text: Option<&str>| {
        files
            .lock()
            .unwrap()
            .insert(PathBuf::from("/cfg"), text.map(|t| t.as_bytes().to_vec()));
    };
    let calls = || -> Vec<(Duration, String)> {
        provider
            .calls
            .lock()
            .unwrap()
            .iter()
            .map(|(at, text)| (at.duration_since(start), text.clone()))
            .collect()
    };

    tokio::time::sleep(Duration::from_secs(25)).await;
    assert!(calls().is_empty(), "nothing changed, nothing reloaded");

    set_cfg(Some("b")); // at 25s: seen at the tick of 30s
    tokio::time::sleep(Duration::from_secs(10)).await;
    assert_eq!(calls(), [(Duration::from_secs(30), "b".to_owned())]);

    set_cfg(Some("bad")); // rejected once at 40s, not again at 50s and 60s
    tokio::time::sleep(Duration::from_secs(30)).await;
    assert_eq!(calls().len(), 2);
    assert_eq!(calls()[1], (Duration::from_secs(40), "bad".to_owned()));

    set_cfg(None); // mid-swap at 65s: waited for
    tokio::time::sleep(Duration::from_secs(10)).await;
    assert_eq!(calls().len(), 2);

    set_cfg(Some("c")); // fixed: applied at 80s
    tokio::time::sleep(Duration::from_secs(10)).await;
    assert_eq!(calls()[2], (Duration::from_secs(80), "c".to_owned()));

    let verdicts: Vec<&'static str> = seen
        .lock()
        .unwrap()
        .iter()
        .map(|r| r.verdict.label())
        .collect();
    assert_eq!(verdicts, ["success", "failure", "success"]);
    assert_eq!(seen.lock().unwrap()[0].changed, [PathBuf::from("/cfg")]);

    shutdown.cancel();
    task.await.unwrap();
}

#[test]
fn the_counter_counts_by_result() {
    let registry = SharedRegistry::new();
    let metrics = ReloadMetrics::register(&registry);
    metrics.count(&Verdict::Applied);
    metrics.count(&Verdict::Rejected("x".into()));
    metrics.count(&Verdict::Rejected("y".into()));
    assert_eq!(metrics.total("success"), 1);
    assert_eq!(metrics.total("failure"), 2);
    assert!(
        registry
            .encode()
            .contains("cloud_provider_config_reloads_total{result=\"failure\"} 2"),
        "{}",
        registry.encode()
    );
}
