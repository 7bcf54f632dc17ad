//! What happens to a Service key after a sync (Go: `processNextServiceItem`).

use std::error::Error as StdError;
use std::time::Duration;

use ccm_core::CloudError;
use ccm_core::runtime::workqueue::WorkQueue;

/// The queue action after a sync.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RetryDecision {
    /// Success: reset the key's backoff.
    Forget,
    /// A retry-after error: requeue after exactly this delay, leaving the backoff untouched.
    After(Duration),
    /// Any other error: requeue with the key's exponential backoff (one more failure).
    Backoff,
}

/// The delay of the first retry-after error (see [`CloudError::retry_after`]) anywhere in `err`'s source chain.
///
/// ```
/// use std::time::Duration;
/// use ccm_core::CloudError;
/// use ccm_servicecontroller::{retry::retry_after, Error};
///
/// let err = Error::Ensure(CloudError::retry("still building", Duration::from_secs(42)).context("ensure"));
/// assert_eq!(retry_after(&err), Some(Duration::from_secs(42)));
/// assert_eq!(retry_after(&Error::EmptyStatus), None);
/// ```
pub fn retry_after(err: &(dyn StdError + 'static)) -> Option<Duration> {
    let mut current: Option<&(dyn StdError + 'static)> = Some(err);
    while let Some(e) = current {
        if let Some(cloud) = e.downcast_ref::<CloudError>() {
            return cloud.retry_after();
        }
        current = e.source();
    }
    None
}

/// The queue action for a sync result.
pub fn retry_decision<E: StdError + 'static>(result: &Result<(), E>) -> RetryDecision {
    match result {
        Ok(()) => RetryDecision::Forget,
        Err(err) => match retry_after(err) {
            Some(after) => RetryDecision::After(after),
            None => RetryDecision::Backoff,
        },
    }
}

/// Apply `decision` to `key` on `queue` (call before `queue.done(key)`).
pub fn apply_decision(queue: &WorkQueue<String>, key: &str, decision: RetryDecision) {
    match decision {
        RetryDecision::Forget => queue.forget(&key.to_owned()),
        RetryDecision::After(after) => queue.add_after(key.to_owned(), after),
        RetryDecision::Backoff => queue.add_rate_limited(key.to_owned()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Error;
    use ccm_core::runtime::workqueue::ItemExponentialBackoff;
    use tokio::time::Instant;

    fn queue() -> WorkQueue<String> {
        WorkQueue::new(
            "service",
            ItemExponentialBackoff::new(Duration::from_secs(5), Duration::from_secs(300)),
        )
    }

    #[test]
    fn decisions() {
        assert_eq!(retry_decision::<Error>(&Ok(())), RetryDecision::Forget);
        assert_eq!(
            retry_decision(&Err(Error::Ensure(CloudError::msg("boom")))),
            RetryDecision::Backoff
        );
        assert_eq!(
            retry_decision(&Err(Error::EmptyStatus)),
            RetryDecision::Backoff
        );
        let wrapped = Error::Ensure(
            CloudError::retry("LB create in progress", Duration::from_secs(42))
                .context("layer one")
                .context("layer two"),
        );
        assert_eq!(
            retry_decision(&Err(wrapped)),
            RetryDecision::After(Duration::from_secs(42))
        );
        let throttled = Error::Delete(CloudError::Throttled {
            message: "quota".into(),
            retry_after: Some(Duration::from_millis(1500)),
        });
        assert_eq!(
            retry_decision(&Err(throttled)),
            RetryDecision::After(Duration::from_millis(1500))
        );
        let throttled_no_delay = Error::Delete(CloudError::Throttled {
            message: "quota".into(),
            retry_after: None,
        });
        assert_eq!(
            retry_decision(&Err(throttled_no_delay)),
            RetryDecision::Backoff
        );
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
        apply_decision(&q, &item, retry_decision(&result));
        q.done(&item);
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
        apply_decision(&q, &item, retry_decision(&result));
        q.done(&item);
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
        let failure: Result<(), Error> = Err(Error::Ensure(CloudError::msg("boom")));
        let mut expected = Vec::new();
        for _ in 0..8 {
            q.add(key.clone());
            let item = q.get().await.unwrap();
            let now = Instant::now();
            apply_decision(&q, &item, retry_decision(&failure));
            q.done(&item);
            expected.push(q.waiting_deadline(&key).unwrap() - now);
            tokio::time::sleep(Duration::from_secs(301)).await;
            let item = q.get().await.unwrap();
            q.done(&item);
        }
        assert_eq!(
            expected,
            [5, 10, 20, 40, 80, 160, 300, 300]
                .map(Duration::from_secs)
                .to_vec()
        );
        apply_decision(&q, &key, retry_decision::<Error>(&Ok(())));
        assert_eq!(q.num_requeues(&key), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn success_adds_nothing() {
        let q = queue();
        let key = "default/web".to_string();
        q.add(key.clone());
        let item = q.get().await.unwrap();
        apply_decision(&q, &item, RetryDecision::Forget);
        q.done(&item);
        assert!(q.is_empty());
        assert_eq!(q.waiting_len(), 0);
    }
}
