//! Polling for eventually-consistent state with an overall timeout.

use std::time::Duration;

/// How often [`wait_for`] polls.
pub const POLL_INTERVAL: Duration = Duration::from_millis(100);

/// [`wait_for`] gave up.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("timed out after {timeout:?} waiting for {what} ({attempts} checks)")]
pub struct WaitError {
    /// The description given to [`wait_for`].
    pub what: String,
    /// The timeout given to [`wait_for`].
    pub timeout: Duration,
    /// How many times the condition was evaluated.
    pub attempts: u32,
}

/// Polls `f` every 100 ms until it returns `Some(value)`, and returns that value; gives up once
/// `timeout` has passed since the call.
///
/// `f` runs at once, then after each interval; it runs one last time at the deadline, so a
/// condition that becomes true just in time is still seen. Uses tokio's clock, so tests with a
/// paused clock (`tokio::time::pause`) do not wait in real time.
///
/// ```no_run
/// use std::time::Duration;
/// use ccm_testenv::{wait_for, TestEnv};
/// use k8s_openapi::api::core::v1::Node;
/// use kube::Api;
///
/// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
/// let nodes: Api<Node> = Api::all(TestEnv::shared().await.client());
/// let provider_id = wait_for("node n1 to get a providerID", Duration::from_secs(30), || async {
///     nodes.get_opt("n1").await.ok().flatten()?.spec?.provider_id
/// })
/// .await?;
/// # Ok(())
/// # }
/// ```
///
/// # Errors
/// [`WaitError`] naming `what` when the timeout passes without a value.
pub async fn wait_for<T, F, Fut>(what: &str, timeout: Duration, mut f: F) -> Result<T, WaitError>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + timeout;
    let mut attempts = 0u32;
    loop {
        attempts += 1;
        if let Some(value) = f().await {
            return Ok(value);
        }
        let now = tokio::time::Instant::now();
        if now >= deadline {
            return Err(WaitError {
                what: what.to_owned(),
                timeout,
                attempts,
            });
        }
        tokio::time::sleep_until((now + POLL_INTERVAL).min(deadline)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU32, Ordering};

    #[tokio::test(start_paused = true)]
    async fn returns_the_first_value() {
        let calls = AtomicU32::new(0);
        let start = tokio::time::Instant::now();
        let value = wait_for("third call", Duration::from_secs(10), || async {
            let n = calls.fetch_add(1, Ordering::SeqCst) + 1;
            (n == 3).then_some(n * 10)
        })
        .await
        .expect("value");
        assert_eq!(value, 30);
        assert_eq!(calls.load(Ordering::SeqCst), 3);
        assert_eq!(start.elapsed(), 2 * POLL_INTERVAL);
    }

    #[tokio::test(start_paused = true)]
    async fn immediate_success_does_not_sleep() {
        let start = tokio::time::Instant::now();
        let value = wait_for("now", Duration::ZERO, || async { Some("x") })
            .await
            .expect("value");
        assert_eq!(value, "x");
        assert_eq!(start.elapsed(), Duration::ZERO);
    }

    #[tokio::test(start_paused = true)]
    async fn times_out_with_a_description() {
        let start = tokio::time::Instant::now();
        let err = wait_for("never", Duration::from_millis(350), || async { None::<()> })
            .await
            .expect_err("timeout");
        // Checks at 0, 100, 200, 300 and a final one at the 350 ms deadline.
        assert_eq!(err.attempts, 5);
        assert_eq!(start.elapsed(), Duration::from_millis(350));
        assert_eq!(err.what, "never");
        assert_eq!(
            err.to_string(),
            "timed out after 350ms waiting for never (5 checks)"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_value_at_the_deadline_counts() {
        let start = tokio::time::Instant::now();
        let value = wait_for("deadline", Duration::from_millis(250), || async {
            (start.elapsed() >= Duration::from_millis(250)).then_some(())
        })
        .await;
        assert!(value.is_ok());
    }
}
