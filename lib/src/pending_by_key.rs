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
    /// Work on `key` starts: under way until the returned [`Work`] is dropped (done, failed, or
    /// cancelled with its runtime: an entry that outlived its task was waited for as done
    /// forever).
    pub(crate) fn start(&self, key: &str) -> Work {
        let (ended, ends) = oneshot::channel();
        let mut pending = self.lock();
        let number = pending.next;
        pending.next += 1;
        pending
            .latest
            .insert(key.to_owned(), (number, ends.shared()));
        Work {
            pending: self.clone(),
            key: key.to_owned(),
            number,
            _ended: ended,
        }
    }

    /// The work `number` on `key` has ended.
    fn ended(&self, key: &str, number: u64) {
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

/// One piece of work under way (see [`PendingByKey::start`]), until dropped.
#[derive(Debug)]
#[must_use = "the work is under way only while this is kept"]
pub(crate) struct Work {
    pending: PendingByKey,
    key: String,
    number: u64,
    /// Dropped, it ends the waits for this work.
    _ended: oneshot::Sender<()>,
}

impl Drop for Work {
    fn drop(&mut self) {
        self.pending.ended(&self.key, self.number);
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
        let stuck = pending.start("k");
        let second = pending.start("k");
        drop(second);
        let newest = pending.start("k");
        drop(stuck);
        assert!(pending.lock().latest.contains_key("k"));
        drop(newest);
        assert!(pending.lock().latest.is_empty());
    }

    /// Work dropped with its task (a runtime shut down) is no longer under way.
    #[tokio::test]
    async fn dropped_work_is_waited_for_no_more() {
        use futures_util::FutureExt;
        let pending = PendingByKey::default();
        let work = pending.start("k");
        assert_eq!(pending.wait("k").now_or_never(), None);
        drop(work);
        assert_eq!(pending.wait("k").now_or_never(), Some(false));
    }
}
