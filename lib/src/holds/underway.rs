//! Releases on their way: while one of a lock's releases is being sent (from the call that
//! started it to its answer, in whichever task sends it), [`take_all`](super::Holds::take_all)
//! leaves the lock to it. `release_all` sent a second release of such a lock, which could land
//! first: the first, refused, then found the lock gone, and `with_lock` answered that its work
//! had lost its lock; a release with a payload was refused, its payload not written (found by
//! review).
//!
//! A release started while others of the same lock are on their way is sent after them
//! ([`ReleaseUnderway::after_earlier`]), as a resend: a guard's `release` called once its twin's
//! release had stopped it (two guards of one idempotent acquisition) sent a second DeleteItem
//! that landed first, with the same harm (found by review).

use super::Inner;
use crate::lock::LockId;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use tokio::sync::watch;

/// The releases of each lock on their way, in the order they started: each one's number and
/// what tells its end (its sender is dropped with it).
#[derive(Default)]
pub(super) struct Underway {
    releases: HashMap<LockId, Vec<(u64, watch::Receiver<()>)>>,
    started: u64,
}

impl Underway {
    /// Whether a release of `lock_id` is on its way.
    pub(super) fn contains(&self, lock_id: LockId) -> bool {
        self.releases.contains_key(&lock_id)
    }
}

/// One release of a lock on its way, until dropped (answered, failed, or cancelled with its
/// runtime): kept by whoever sends it, moved into the task that does.
#[must_use = "the release is on its way only while this is kept"]
pub(crate) struct ReleaseUnderway {
    inner: Arc<Mutex<Inner>>,
    lock_id: LockId,
    number: u64,
    /// Dropped with this: ends the waits of the releases that started after it.
    _ends: watch::Sender<()>,
    /// The releases of the same lock on their way when this one started.
    earlier: Vec<watch::Receiver<()>>,
}

impl ReleaseUnderway {
    /// A release of `lock_id` is on its way, in the holds `inner`.
    pub(super) fn start(inner: &Arc<Mutex<Inner>>, lock_id: LockId) -> Self {
        let mut locked = inner.lock().unwrap_or_else(PoisonError::into_inner);
        let underway = &mut locked.underway;
        underway.started += 1;
        let number = underway.started;
        let (ends, ended) = watch::channel(());
        let releases = underway.releases.entry(lock_id).or_default();
        let earlier = releases.iter().map(|(_, ended)| ended.clone()).collect();
        releases.push((number, ended));
        ReleaseUnderway {
            inner: Arc::clone(inner),
            lock_id,
            number,
            _ends: ends,
            earlier,
        }
    }

    /// Waits until every release of the same lock that was on its way when this one started has
    /// ended (answered, failed, or dropped); true if there was one: this release, sent after it,
    /// is a resend of the lock's release, and its refusal is read as one. Whoever keeps this must
    /// not wait, meanwhile, for a release of the same lock started after it.
    pub(crate) async fn after_earlier(&mut self) -> bool {
        let earlier = !self.earlier.is_empty();
        for mut ended in self.earlier.drain(..) {
            // Nothing is ever sent: `changed` fails once the sender is dropped.
            while ended.changed().await.is_ok() {}
        }
        earlier
    }
}

impl std::fmt::Debug for ReleaseUnderway {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("ReleaseUnderway")
            .field(&self.lock_id)
            .field(&self.number)
            .finish()
    }
}

impl Drop for ReleaseUnderway {
    fn drop(&mut self) {
        let mut inner = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        let releases = &mut inner.underway.releases;
        if let Some(of_lock) = releases.get_mut(&self.lock_id) {
            of_lock.retain(|(number, _)| *number != self.number);
            if of_lock.is_empty() {
                releases.remove(&self.lock_id);
            }
        }
    }
}
