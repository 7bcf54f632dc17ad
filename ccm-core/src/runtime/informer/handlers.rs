//! Inline event handlers ([`Informer::on_event`](super::Informer::on_event)). A task fed through a channel would
//! wake up per event (with 1,000 heartbeating nodes, twenty times a second per consumer, mostly for nothing); a
//! handler runs where the event is made, in the order of registration, and never lags (so it never misses an
//! event; it sees [`InformerEvent::Resync`] only from the periodic resync).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock, Weak};

use super::InformerEvent;

type Handler<K> = Arc<dyn Fn(&InformerEvent<K>) + Send + Sync>;
/// The handlers with their registration numbers, in registration order.
type List<K> = Vec<(u64, Handler<K>)>;

/// The handlers of one informer. Copy-on-write: an event takes a snapshot without holding the lock while the
/// handlers run, so a handler may register or drop handlers.
pub(super) struct Handlers<K> {
    next_id: AtomicU64,
    list: RwLock<Arc<List<K>>>,
}

impl<K> Default for Handlers<K> {
    fn default() -> Self {
        Handlers {
            next_id: AtomicU64::new(0),
            list: RwLock::new(Arc::new(Vec::new())),
        }
    }
}

impl<K: 'static> Handlers<K> {
    pub(super) fn call(&self, event: &InformerEvent<K>) {
        let snapshot = self.list.read().unwrap_or_else(|e| e.into_inner()).clone();
        for (_, handler) in snapshot.iter() {
            handler(event);
        }
    }

    pub(super) fn add(
        self: &Arc<Self>,
        handler: impl Fn(&InformerEvent<K>) + Send + Sync + 'static,
    ) -> HandlerRegistration
    where
        K: Send + Sync,
    {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        self.update(|list| list.push((id, Arc::new(handler))));
        let handlers: Weak<Self> = Arc::downgrade(self);
        HandlerRegistration {
            _remove: scopeguard::guard(
                (),
                Box::new(move |()| {
                    if let Some(handlers) = handlers.upgrade() {
                        handlers.update(|list| list.retain(|(other, _)| *other != id));
                    }
                }),
            ),
        }
    }

    fn update(&self, change: impl FnOnce(&mut List<K>)) {
        let mut list = self.list.write().unwrap_or_else(|e| e.into_inner());
        let mut next = Vec::clone(&list);
        change(&mut next);
        *list = Arc::new(next);
    }
}

/// A registered handler ([`Informer::on_event`](super::Informer::on_event)): dropping it removes the handler.
#[derive(Debug)]
#[must_use = "dropping the registration removes the handler at once"]
pub struct HandlerRegistration {
    _remove: scopeguard::ScopeGuard<(), Box<dyn FnOnce(()) + Send + Sync>>,
}

#[cfg(test)]
impl<K> Handlers<K> {
    pub(super) fn len(&self) -> usize {
        self.list.read().unwrap_or_else(|e| e.into_inner()).len()
    }
}
