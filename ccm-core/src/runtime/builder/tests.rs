use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use k8s_openapi::api::core::v1::Node;
use kube::runtime::watcher;

use super::*;
use crate::runtime::informer::tests::{node, offline_informer};

type Seen = Arc<Mutex<Vec<String>>>;

fn list(informer: &crate::runtime::informer::NodeInformer, names: &[&str]) {
    let mut events = vec![watcher::Event::Init];
    events.extend(
        names
            .iter()
            .map(|name| watcher::Event::InitApply(node(name, "1"))),
    );
    events.push(watcher::Event::InitDone);
    informer.apply_for_test(events);
}

/// Run a controller over `informer` that records each reconciled key; returns the record, the shutdown token
/// and the task.
fn spawn(controller: Controller) -> (Seen, CancellationToken, tokio::task::JoinHandle<()>) {
    let seen: Seen = Arc::default();
    let shutdown = CancellationToken::new();
    let task = {
        let (seen, shutdown) = (seen.clone(), shutdown.clone());
        tokio::spawn(async move {
            controller
                .run(shutdown, seen, |key: String, seen: Seen| async move {
                    seen.lock().unwrap().push(key);
                    Ok::<_, std::io::Error>(Action::Done)
                })
                .await;
        })
    };
    (seen, shutdown, task)
}

async fn settle() {
    tokio::time::sleep(Duration::from_millis(10)).await;
}

fn sorted(seen: &Seen) -> Vec<String> {
    let mut keys = seen.lock().unwrap().clone();
    keys.sort();
    keys
}

#[tokio::test(start_paused = true)]
async fn waits_for_the_cache_then_queues_every_key_once_and_follows_events() {
    let informer = offline_informer();
    let (seen, shutdown, task) =
        spawn(Controller::new("test").watches(&informer, added_or_updated));
    settle().await;
    assert!(seen.lock().unwrap().is_empty(), "nothing before the sync");
    list(&informer, &["a", "b"]);
    settle().await;
    assert_eq!(sorted(&seen), ["a", "b"], "the initial list is queued once");
    seen.lock().unwrap().clear();
    informer.apply_for_test(vec![
        watcher::Event::Apply(node("c", "1")),
        watcher::Event::Apply(node("a", "2")),
        watcher::Event::Delete(node("b", "2")),
    ]);
    settle().await;
    assert_eq!(
        sorted(&seen),
        ["a", "c"],
        "mapped events; the delete maps to no key"
    );
    seen.lock().unwrap().clear();
    informer.resync();
    settle().await;
    assert_eq!(
        sorted(&seen),
        ["a", "c"],
        "a resync queues every cached key"
    );
    shutdown.cancel();
    task.await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn enqueue_all_and_on_events_see_only_what_follows_the_sync() {
    let informer = offline_informer();
    let triggered = Arc::new(AtomicUsize::new(0));
    let controller = {
        let triggered = triggered.clone();
        Controller::new("test")
            .enqueue_all(|| vec!["everything".to_owned()])
            .watches(&informer, added_or_updated)
            .on_events(&informer, move |_| {
                triggered.fetch_add(1, Ordering::Relaxed);
            })
    };
    // Changes before the controller runs and during the list are in the cache that the start reads.
    list(&informer, &["a"]);
    let (seen, shutdown, task) = spawn(controller);
    settle().await;
    assert_eq!(sorted(&seen), ["everything"]);
    assert_eq!(
        triggered.load(Ordering::Relaxed),
        0,
        "the initial list is skipped"
    );
    informer.apply_for_test(vec![watcher::Event::Apply(node("b", "1"))]);
    informer.resync();
    settle().await;
    assert_eq!(sorted(&seen), ["b", "everything", "everything"]);
    assert_eq!(triggered.load(Ordering::Relaxed), 2);
    shutdown.cancel();
    task.await.unwrap();
    // Stopped: the handlers are gone.
    informer.apply_for_test(vec![watcher::Event::Apply(node("c", "1"))]);
    assert_eq!(triggered.load(Ordering::Relaxed), 2);
}

#[tokio::test(start_paused = true)]
async fn initial_keys_replace_the_first_enqueue_only() {
    let informer = offline_informer();
    let controller = Controller::new("test")
        .watches(&informer, added_or_updated)
        .initial_keys(|| async {
            // Something slow to ask first (a cloud listing): the workers wait for it.
            tokio::time::sleep(Duration::from_secs(1)).await;
            vec!["b".to_owned()]
        });
    list(&informer, &["a", "b"]);
    let (seen, shutdown, task) = spawn(controller);
    settle().await;
    assert!(
        seen.lock().unwrap().is_empty(),
        "nothing before the initial keys are known"
    );
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(sorted(&seen), ["b"], "only the initial keys at start");
    seen.lock().unwrap().clear();
    informer.resync();
    settle().await;
    assert_eq!(
        sorted(&seen),
        ["a", "b"],
        "a resync queues every cached key"
    );
    shutdown.cancel();
    task.await.unwrap();

    // Shutdown while the initial keys are being computed returns at once.
    let informer = offline_informer();
    list(&informer, &["a"]);
    let controller = Controller::new("test")
        .watches(&informer, added_or_updated)
        .initial_keys(std::future::pending::<Vec<String>>);
    let (seen, shutdown, task) = spawn(controller);
    settle().await;
    shutdown.cancel();
    task.await.unwrap();
    assert!(seen.lock().unwrap().is_empty());
}

#[tokio::test(start_paused = true)]
async fn shutdown_before_the_sync_returns_at_once() {
    let informer = offline_informer();
    let ran = Arc::new(AtomicUsize::new(0));
    let controller = {
        let ran = ran.clone();
        Controller::new("test")
            .waits_for(&informer)
            .with_loop(move |_| async move {
                ran.fetch_add(1, Ordering::Relaxed);
            })
    };
    let (_seen, shutdown, task) = spawn(controller);
    settle().await;
    shutdown.cancel();
    task.await.unwrap();
    assert_eq!(
        ran.load(Ordering::Relaxed),
        0,
        "no loop starts before the sync"
    );
}

#[tokio::test(start_paused = true)]
async fn loops_start_after_the_sync_and_shutdown_waits_for_them() {
    let informer = offline_informer();
    list(&informer, &[]);
    let finished = Arc::new(AtomicUsize::new(0));
    let controller = {
        let finished = finished.clone();
        Controller::new("test")
            .waits_for(&informer)
            .with_loop(move |shutdown| async move {
                shutdown.cancelled().await;
                // Cleaning up takes a while; shutdown waits for it.
                tokio::time::sleep(Duration::from_secs(3)).await;
                finished.fetch_add(1, Ordering::Relaxed);
            })
    };
    let shutdown = CancellationToken::new();
    let task = tokio::spawn(controller.run_loops(shutdown.clone()));
    settle().await;
    let start = tokio::time::Instant::now();
    shutdown.cancel();
    task.await.unwrap();
    assert_eq!(start.elapsed(), Duration::from_secs(3));
    assert_eq!(finished.load(Ordering::Relaxed), 1);
}

#[tokio::test(start_paused = true)]
async fn a_boxed_controller_reconciles_with_its_context_and_retries() {
    let informer = offline_informer();
    list(&informer, &["a"]);
    let attempts = Arc::new(AtomicUsize::new(0));
    let controller = Controller::new("test")
        .watches(&informer, added_or_updated)
        .workers(0)
        .boxed(attempts.clone(), |_key: String, attempts| async move {
            match attempts.fetch_add(1, Ordering::Relaxed) {
                0 => Err(std::io::Error::other("first try fails")),
                _ => Ok(Action::Done),
            }
        });
    let shutdown = CancellationToken::new();
    let task = tokio::spawn(controller.run(shutdown.clone()));
    // Go's default limiter retries after 5 ms.
    settle().await;
    assert_eq!(attempts.load(Ordering::Relaxed), 2);
    shutdown.cancel();
    task.await.unwrap().unwrap();
}

#[tokio::test(start_paused = true)]
async fn boxed_objects_hands_over_cached_objects_and_skips_gone_keys() {
    let informer = offline_informer();
    let seen: Seen = Arc::default();
    let shutdown = CancellationToken::new();
    let controller = Controller::new("objects")
        .watches(&informer, added_or_updated)
        .boxed_objects(
            &informer,
            seen.clone(),
            |node: Arc<Node>, seen: Seen| async move {
                let name = node.metadata.name.clone().unwrap_or_default();
                seen.lock().unwrap().push(name);
                Ok::<_, std::io::Error>(Action::Done)
            },
        );
    let task = tokio::spawn(controller.run(shutdown.clone()));
    list(&informer, &["a", "b"]);
    settle().await;
    assert_eq!(sorted(&seen), ["a", "b"], "each object once");
    seen.lock().unwrap().clear();
    // Updated then deleted before its key is handed out: nothing to reconcile.
    informer.apply_for_test(vec![
        watcher::Event::Apply(node("a", "2")),
        watcher::Event::Delete(node("a", "3")),
    ]);
    settle().await;
    assert!(sorted(&seen).is_empty(), "a gone object is not reconciled");
    shutdown.cancel();
    task.await.unwrap().unwrap();
}
