//! Priority classes of cloud calls (see [`CallPriority`]).

use std::future::Future;

use strum::{Display, IntoStaticStr};

tokio::task_local! {
    static PRIORITY: CallPriority;
}

/// How urgent a cloud call is: who goes first when calls must wait for the cloud-call budget.
///
/// The budget sits in the provider middleware and sees only an [`Operation`](crate::intercept::Operation), not
/// who made the call: a controller runs the code that makes its calls inside [`CallPriority::scope`], and the
/// budget reads the priority of the task the call runs in ([`CallPriority::current`]).
///
/// Waiting calls are served strictly by class, and in arrival order within a class: a call never waits behind a
/// call of a lower class. The class only matters while calls wait; with no limit in force every call goes at
/// once.
///
/// The priority is a tokio task-local: it follows the future through every `.await`, but not into a task the
/// future spawns (give that task its own scope). When the instance cache lets several callers share one call, the
/// call carries the priority of the caller that started it.
///
/// ```
/// use ccm_core::budget::CallPriority;
///
/// # async fn demo() {
/// assert_eq!(CallPriority::current(), CallPriority::Normal);
/// CallPriority::Low
///     .scope(async {
///         // every cloud call made here waits behind High and Normal calls
///         assert_eq!(CallPriority::current(), CallPriority::Low);
///     })
///     .await;
/// # }
/// ```
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash, IntoStaticStr, Display,
)]
#[strum(serialize_all = "lowercase")]
pub enum CallPriority {
    /// Served first: work a user is waiting for right now (initializing a new node).
    High,
    /// The default, for everything not marked (load balancers, routes, vendor controllers) and every call made
    /// outside any [`scope`](CallPriority::scope).
    #[default]
    Normal,
    /// Served last: periodic sweeps that are repeated anyway (the lifecycle pass, the periodic address sync).
    Low,
}

impl CallPriority {
    /// Every class, the first served first.
    pub const ALL: [CallPriority; 3] =
        [CallPriority::High, CallPriority::Normal, CallPriority::Low];

    /// The label value in metrics: `high`, `normal`, `low`.
    pub fn as_str(self) -> &'static str {
        self.into()
    }

    /// The position in [`ALL`](CallPriority::ALL) (0 is served first).
    pub fn index(self) -> usize {
        self as usize
    }

    /// The priority of the calls the current task makes: the innermost [`scope`](CallPriority::scope), or
    /// [`Normal`](CallPriority::Normal) outside any.
    pub fn current() -> CallPriority {
        PRIORITY.try_with(|p| *p).unwrap_or_default()
    }

    /// Run `future` with every cloud call it makes (in this task) at this priority.
    pub async fn scope<F: Future>(self, future: F) -> F::Output {
        PRIORITY.scope(self, future).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn order_names_and_indexes() {
        assert!(CallPriority::High < CallPriority::Normal);
        assert!(CallPriority::Normal < CallPriority::Low);
        for (i, p) in CallPriority::ALL.into_iter().enumerate() {
            assert_eq!(p.index(), i);
        }
        assert_eq!(
            CallPriority::ALL.map(CallPriority::as_str),
            ["high", "normal", "low"]
        );
        assert_eq!(CallPriority::default(), CallPriority::Normal);
    }

    #[tokio::test]
    async fn scopes_nest_and_follow_awaits_but_not_spawns() {
        assert_eq!(CallPriority::current(), CallPriority::Normal);
        CallPriority::Low
            .scope(async {
                tokio::task::yield_now().await;
                assert_eq!(CallPriority::current(), CallPriority::Low);
                CallPriority::High
                    .scope(async { assert_eq!(CallPriority::current(), CallPriority::High) })
                    .await;
                assert_eq!(CallPriority::current(), CallPriority::Low);
                let spawned = tokio::spawn(async { CallPriority::current() })
                    .await
                    .unwrap();
                assert_eq!(spawned, CallPriority::Normal);
            })
            .await;
        assert_eq!(CallPriority::current(), CallPriority::Normal);
    }
}
