//! Work under way in the background, by key, that a later call waits for: a backend's release
//! before a `try_lock` of its key, a dropped window claim's give-back before a claim it refused
//! tries again.

use futures_util::future::{FutureExt, Shared};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use tokio::sync::oneshot;

/// The latest work of each key under way: clones share it.
#[derive(Debug, Clone, Default)]
pub(crate) struct PendingByKey(Arc<Mutex<Pending>>);

/// The latest work of each key under way (its number, and what completes when it has ended),
/// and the next work's number. Numbers are never reused: a stuck piece of work on a key that ends
/// after a later one has ended must not take the entry of one started since (numbered per key
/// from 0 again, it did, and a `try_lock` stopped waiting for a release under way).
#[derive(Debug, Default)]
struct Pending {
    latest: HashMap<String, (u64, Shared<oneshot::Receiver<()>>)>,
    next: u64,
}

impl PendingByKey {
    /// Work on `key` starts: its number, and the sender that says it has ended (dropped, it says
    /// so too).
    pub(crate) fn start(&self, key: &str) -> (u64, oneshot::Sender<()>) {
        let (ended, ends) = oneshot::channel();
        let mut pending = self.lock();
        let number = pending.next;
        pending.next += 1;
        pending
            .latest
            .insert(key.to_owned(), (number, ends.shared()));
        (number, ended)
    }

    /// The work `number` on `key` has ended.
    pub(crate) fn ended(&self, key: &str, number: u64) {
        let mut pending = self.lock();
        if pending
            .latest
            .get(key)
            .is_some_and(|(latest, _)| *latest == number)
        {
            pending.latest.remove(key);
        }
    }

    /// Completes once the latest work on `key` under way, if any, has ended: true if there was
    /// some.
    pub(crate) async fn wait(&self, key: &str) -> bool {
        let latest = self.lock().latest.get(key).map(|(_, ends)| ends.clone());
        match latest {
            Some(ends) => {
                let _ = ends.await;
                true
            }
            None => false,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Pending> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Stuck work on a key that ends after later work on it ended leaves the entry of work
    /// started since: a `try_lock` still waits for that one (found by review).
    #[test]
    fn stuck_work_ending_late_leaves_newer_work_pending() {
        let pending = PendingByKey::default();
        let (stuck, _) = pending.start("k");
        let (second, _) = pending.start("k");
        pending.ended("k", second);
        let (newest, _) = pending.start("k");
        pending.ended("k", stuck);
        assert!(pending.lock().latest.contains_key("k"));
        pending.ended("k", newest);
        assert!(pending.lock().latest.is_empty());
    }
}
