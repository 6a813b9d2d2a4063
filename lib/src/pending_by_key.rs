//! Work under way in the background, by key, that a later call waits for: a backend's release
//! before a `try_lock` of its key, a dropped window claim's give-back before a claim it refused
//! tries again.

use futures_util::future::{FutureExt, Shared};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use tokio::sync::oneshot;

/// The work of each key under way: clones share it.
#[derive(Debug, Clone, Default)]
pub(crate) struct PendingByKey(Arc<Mutex<Pending>>);

/// What completes when a work has ended.
type Ends = Shared<oneshot::Receiver<()>>;

/// Every work of each key under way (its number, and what completes when it has ended), and the
/// next work's number. Each ends its own entry only: a work that ends before an earlier one must
/// not take that one's entry (with the latest work kept alone, a release refused at once ended the
/// entry of a slow release started before it, and a `try_lock` stopped waiting for that one;
/// found by review), nor a stuck one that of a work started since (numbers are never reused).
#[derive(Debug, Default)]
struct Pending {
    under_way: HashMap<String, Vec<(u64, Ends)>>,
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
            .under_way
            .entry(key.to_owned())
            .or_default()
            .push((number, ends.shared()));
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
        if let Some(works) = pending.under_way.get_mut(key) {
            works.retain(|(under_way, _)| *under_way != number);
            if works.is_empty() {
                pending.under_way.remove(key);
            }
        }
    }

    /// Completes once every work on `key` under way at the call has ended: true if there was
    /// some.
    pub(crate) async fn wait(&self, key: &str) -> bool {
        let works: Vec<_> = self
            .lock()
            .under_way
            .get(key)
            .map(|works| works.iter().map(|(_, ends)| ends.clone()).collect())
            .unwrap_or_default();
        for ends in &works {
            let _ = ends.clone().await;
        }
        !works.is_empty()
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
        assert!(pending.lock().under_way.contains_key("k"));
        drop(newest);
        assert!(pending.lock().under_way.is_empty());
    }

    /// Work that ends before work started earlier on the key leaves that one under way: a
    /// `try_lock` still waits for a slow release when a later release of the key was refused at
    /// once (found by review).
    #[tokio::test]
    async fn work_ending_first_leaves_earlier_work_waited_for() {
        use futures_util::FutureExt;
        let pending = PendingByKey::default();
        let slow = pending.start("k");
        let quick = pending.start("k");
        drop(quick);
        assert_eq!(pending.wait("k").now_or_never(), None);
        drop(slow);
        assert_eq!(pending.wait("k").now_or_never(), Some(false));
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
