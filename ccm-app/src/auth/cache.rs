//! A bounded cache of review answers with a time to live per entry, on the Tokio clock (so tests can pause it).

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::Mutex;
use std::time::Duration;

use tokio::time::Instant;

/// At most this many answers are kept per cache (Go's token cache and SubjectAccessReview cache hold a few
/// thousand too).
pub const DEFAULT_CAPACITY: usize = 4096;

/// A map whose entries expire after the TTL given when each was stored, holding at most `capacity` entries: when
/// full, expired entries are dropped first, then the one that expires soonest.
#[derive(Debug)]
pub struct TtlCache<K, V> {
    capacity: usize,
    entries: Mutex<HashMap<K, (V, Instant)>>,
}

impl<K: Eq + Hash + Clone, V: Clone> TtlCache<K, V> {
    /// An empty cache of at most `capacity` entries (at least 1).
    pub fn new(capacity: usize) -> Self {
        TtlCache {
            capacity: capacity.max(1),
            entries: Mutex::new(HashMap::new()),
        }
    }

    /// The unexpired answer for `key`.
    pub fn get(&self, key: &K) -> Option<V> {
        let mut entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        let now = Instant::now();
        let (value, expires) = entries.get(key)?;
        if *expires > now {
            return Some(value.clone());
        }
        entries.remove(key);
        None
    }

    /// Keep `value` for `ttl`; a zero TTL keeps nothing.
    pub fn insert(&self, key: K, value: V, ttl: Duration) {
        if ttl.is_zero() {
            return;
        }
        let mut entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        let now = Instant::now();
        if entries.len() >= self.capacity && !entries.contains_key(&key) {
            entries.retain(|_, (_, expires)| *expires > now);
            if entries.len() >= self.capacity
                && let Some((soonest, _)) = entries.iter().min_by_key(|(_, (_, expires))| *expires)
            {
                let soonest = soonest.clone();
                entries.remove(&soonest);
            }
        }
        entries.insert(key, (value, now + ttl));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    impl<K: Eq + Hash + Clone, V: Clone> TtlCache<K, V> {
        /// The number of entries held (expired ones included until they are dropped).
        pub(crate) fn len(&self) -> usize {
            self.entries.lock().unwrap_or_else(|e| e.into_inner()).len()
        }

        /// Whether the cache holds nothing.
        pub(crate) fn is_empty(&self) -> bool {
            self.len() == 0
        }
    }

    #[tokio::test(start_paused = true)]
    async fn entries_expire_after_their_own_ttl() {
        let cache = TtlCache::new(10);
        cache.insert("allowed", true, Duration::from_secs(10));
        cache.insert("denied", false, Duration::from_secs(2));
        assert_eq!(cache.get(&"allowed"), Some(true));
        assert_eq!(cache.get(&"denied"), Some(false));
        tokio::time::advance(Duration::from_millis(1999)).await;
        assert_eq!(cache.get(&"denied"), Some(false));
        tokio::time::advance(Duration::from_millis(1)).await;
        assert_eq!(cache.get(&"denied"), None, "expired at exactly 2s");
        assert_eq!(cache.get(&"allowed"), Some(true));
        tokio::time::advance(Duration::from_secs(8)).await;
        assert_eq!(cache.get(&"allowed"), None);
        assert!(cache.is_empty(), "expired entries are dropped when read");
    }

    #[tokio::test(start_paused = true)]
    async fn a_zero_ttl_keeps_nothing_and_a_new_answer_replaces_the_old() {
        let cache = TtlCache::new(10);
        cache.insert("k", 1, Duration::ZERO);
        assert_eq!(cache.get(&"k"), None);
        cache.insert("k", 1, Duration::from_secs(1));
        cache.insert("k", 2, Duration::from_secs(5));
        tokio::time::advance(Duration::from_secs(3)).await;
        assert_eq!(cache.get(&"k"), Some(2));
    }

    #[tokio::test(start_paused = true)]
    async fn bounded_expired_first_then_soonest_to_expire() {
        let cache = TtlCache::new(3);
        cache.insert(1, "a", Duration::from_secs(1));
        cache.insert(2, "b", Duration::from_secs(30));
        cache.insert(3, "c", Duration::from_secs(20));
        tokio::time::advance(Duration::from_secs(2)).await;
        // 1 has expired: it goes, the others stay
        cache.insert(4, "d", Duration::from_secs(40));
        assert_eq!(cache.len(), 3);
        assert_eq!(cache.get(&2), Some("b"));
        assert_eq!(cache.get(&3), Some("c"));
        // none expired: the one that expires soonest (3) goes
        cache.insert(5, "e", Duration::from_secs(40));
        assert_eq!(cache.len(), 3);
        assert_eq!(cache.get(&3), None);
        assert_eq!(cache.get(&2), Some("b"));
        assert_eq!(cache.get(&4), Some("d"));
        assert_eq!(cache.get(&5), Some("e"));
        // replacing a key that is present evicts nothing
        cache.insert(5, "f", Duration::from_secs(40));
        assert_eq!(cache.len(), 3);
        assert_eq!(TtlCache::<u8, u8>::new(0).capacity, 1);
    }
}
