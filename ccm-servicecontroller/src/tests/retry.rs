//! The service queue's retry behaviour, checked against Go's `TestServiceQueueDelay`. The decision itself is
//! the controller kit's ([`ccm_core::runtime::workers::decide`]); these tests pin what it means for Services.

use std::time::Duration;

use ccm_core::CloudError;
use ccm_core::runtime::workers::{Action, Decision, apply, decide, decide_error};
use ccm_core::runtime::workqueue::{ItemExponentialBackoff, WorkQueue};
use tokio::time::Instant;

use crate::error::Error;

fn queue() -> WorkQueue<String> {
    WorkQueue::new(
        "service",
        ItemExponentialBackoff::new(Duration::from_secs(5), Duration::from_secs(300)),
    )
}

fn decision(result: &Result<(), Error>) -> Decision {
    match result {
        Ok(()) => decide::<Error>(&Ok(Action::Done)),
        Err(error) => decide_error(error),
    }
}

#[test]
fn decisions() {
    assert_eq!(decision(&Ok(())), Decision::Forget);
    assert_eq!(
        decision(&Err(Error::Ensure(CloudError::message("boom")))),
        Decision::Backoff
    );
    assert_eq!(decision(&Err(Error::EmptyStatus)), Decision::Backoff);
    let wrapped = Error::Ensure(
        CloudError::retry("LB create in progress", Duration::from_secs(42))
            .context("layer one")
            .context("layer two"),
    );
    assert_eq!(
        decision(&Err(wrapped)),
        Decision::RetryAfter(Duration::from_secs(42))
    );
    let throttled = Error::Delete(CloudError::Throttled {
        message: "quota".into(),
        retry_after: Some(Duration::from_millis(1500)),
    });
    assert_eq!(
        decision(&Err(throttled)),
        Decision::RetryAfter(Duration::from_millis(1500))
    );
    let throttled_no_delay = Error::Delete(CloudError::Throttled {
        message: "quota".into(),
        retry_after: None,
    });
    assert_eq!(decision(&Err(throttled_no_delay)), Decision::Backoff);
}

#[tokio::test(start_paused = true)]
async fn retry_after_requeues_at_exactly_the_delay_without_backoff() {
    // Go: TestServiceQueueDelay "retry error" — AddAfter(42s), zero rate-limited requeues.
    let q = queue();
    let key = "default/web".to_string();
    q.add(key.clone());
    let item = q.get().await.unwrap();
    let start = Instant::now();
    let result: Result<(), Error> = Err(Error::Ensure(CloudError::retry(
        "LB create in progress",
        Duration::from_secs(42),
    )));
    apply(&q, item.key(), decision(&result));
    drop(item);
    assert_eq!(
        q.waiting_deadline(&key),
        Some(start + Duration::from_secs(42))
    );
    assert_eq!(q.num_requeues(&key), 0);
    tokio::time::sleep(Duration::from_millis(41_999)).await;
    assert!(q.is_empty(), "not before the deadline");
    tokio::time::sleep(Duration::from_millis(2)).await;
    assert_eq!(q.len(), 1, "queued at the deadline");
    // A second retry-after error again waits exactly its delay: no growth.
    let item = q.get().await.unwrap();
    let again = Instant::now();
    apply(&q, item.key(), decision(&result));
    drop(item);
    assert_eq!(
        q.waiting_deadline(&key),
        Some(again + Duration::from_secs(42))
    );
    assert_eq!(q.num_requeues(&key), 0);
}

#[tokio::test(start_paused = true)]
async fn other_errors_back_off_and_success_forgets() {
    let q = queue();
    let key = "default/web".to_string();
    let failure: Result<(), Error> = Err(Error::Ensure(CloudError::message("boom")));
    let mut expected = Vec::new();
    for _ in 0..8 {
        q.add(key.clone());
        let item = q.get().await.unwrap();
        let now = Instant::now();
        apply(&q, item.key(), decision(&failure));
        drop(item);
        expected.push(q.waiting_deadline(&key).unwrap() - now);
        tokio::time::sleep(Duration::from_secs(301)).await;
        let item = q.get().await.unwrap();
        drop(item);
    }
    assert_eq!(
        expected,
        [5, 10, 20, 40, 80, 160, 300, 300]
            .map(Duration::from_secs)
            .to_vec()
    );
    apply(&q, &key, decision(&Ok(())));
    assert_eq!(q.num_requeues(&key), 0);
}

#[tokio::test(start_paused = true)]
async fn success_adds_nothing() {
    let q = queue();
    let key = "default/web".to_string();
    q.add(key.clone());
    let item = q.get().await.unwrap();
    apply(&q, item.key(), Decision::Forget);
    drop(item);
    assert!(q.is_empty());
    assert_eq!(q.waiting_len(), 0);
}
