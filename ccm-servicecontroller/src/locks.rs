//! One lock per Service, so an ensure and a host update of one load balancer never overlap.

use std::collections::HashMap;
use std::sync::Arc;

use parking_lot::Mutex;
use tokio::sync::OwnedMutexGuard;

type Lock = Arc<tokio::sync::Mutex<()>>;

/// The per-Service locks; a lock exists only while someone holds or waits for it. Cheap to clone.
#[derive(Clone, Default)]
pub(crate) struct ServiceLocks {
    locks: Arc<Mutex<HashMap<String, Lock>>>,
}

/// Holds a Service's lock; removes the lock when nobody else holds or waits for it.
pub(crate) struct ServiceGuard {
    locks: ServiceLocks,
    key: String,
    guard: Option<OwnedMutexGuard<()>>,
}

impl Drop for ServiceGuard {
    fn drop(&mut self) {
        self.guard.take();
        let mut map = self.locks.locks.lock();
        if map
            .get(&self.key)
            .is_some_and(|l| Arc::strong_count(l) == 1)
        {
            map.remove(&self.key);
        }
    }
}

impl ServiceLocks {
    fn guard(&self, key: &str, guard: Option<OwnedMutexGuard<()>>) -> ServiceGuard {
        ServiceGuard {
            locks: self.clone(),
            key: key.to_owned(),
            guard,
        }
    }

    fn of(&self, key: &str) -> Lock {
        self.locks.lock().entry(key.to_owned()).or_default().clone()
    }

    /// Wait for, then hold, the lock of `key`.
    pub(crate) async fn lock(&self, key: &str) -> ServiceGuard {
        let guard = self.of(key).lock_owned().await;
        self.guard(key, Some(guard))
    }

    /// Hold the lock of `key` if it is free.
    pub(crate) fn try_lock(&self, key: &str) -> Option<ServiceGuard> {
        // A failed attempt still drops through ServiceGuard, which tidies the lock up.
        let out = self.guard(key, self.of(key).try_lock_owned().ok());
        out.guard.is_some().then_some(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    impl ServiceLocks {
        fn entries(&self) -> usize {
            self.locks.lock().len()
        }
    }
    use std::time::Duration;

    #[tokio::test(start_paused = true)]
    async fn lock_serialises_and_entries_are_tidied() {
        let t = ServiceLocks::default();
        let g = t.lock("ns/a").await;
        assert!(t.try_lock("ns/a").is_none());
        let waiter = {
            let t = t.clone();
            tokio::spawn(async move {
                let _g = t.lock("ns/a").await;
            })
        };
        tokio::time::sleep(Duration::from_millis(10)).await;
        assert!(!waiter.is_finished());
        drop(g);
        waiter.await.unwrap();
        assert_eq!(t.entries(), 0, "empty entry removed once unlocked");

        let g = t.try_lock("ns/b").unwrap();
        drop(g);
        assert_eq!(t.entries(), 0);
    }
}
