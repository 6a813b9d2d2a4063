//! Releases on their way: while one of a lock's releases is being sent (from the call that
//! started it to its answer, in whichever task sends it), [`take_all`](super::Holds::take_all)
//! leaves the lock to it. `release_all` sent a second release of such a lock, which could land
//! first: the first, refused, then found the lock gone, and `with_lock` answered that its work
//! had lost its lock; a release with a payload was refused, its payload not written (found by
//! review).

use super::Inner;
use crate::lock::LockId;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

/// How many releases of each lock are on their way.
#[derive(Default)]
pub(super) struct Underway(HashMap<LockId, usize>);

impl Underway {
    /// Whether a release of `lock_id` is on its way.
    pub(super) fn contains(&self, lock_id: LockId) -> bool {
        self.0.contains_key(&lock_id)
    }
}

/// One release of a lock on its way, until dropped (answered, failed, or cancelled with its
/// runtime): kept by whoever sends it, moved into the task that does.
#[must_use = "the release is on its way only while this is kept"]
pub(crate) struct ReleaseUnderway {
    inner: Arc<Mutex<Inner>>,
    lock_id: LockId,
}

impl ReleaseUnderway {
    /// A release of `lock_id` is on its way, in the holds `inner`.
    pub(super) fn start(inner: &Arc<Mutex<Inner>>, lock_id: LockId) -> Self {
        let mut locked = inner.lock().unwrap_or_else(PoisonError::into_inner);
        *locked.underway.0.entry(lock_id).or_default() += 1;
        ReleaseUnderway {
            inner: Arc::clone(inner),
            lock_id,
        }
    }
}

impl std::fmt::Debug for ReleaseUnderway {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("ReleaseUnderway")
            .field(&self.lock_id)
            .finish()
    }
}

impl Drop for ReleaseUnderway {
    fn drop(&mut self) {
        let mut inner = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(count) = inner.underway.0.get_mut(&self.lock_id) {
            *count -= 1;
            if *count == 0 {
                inner.underway.0.remove(&self.lock_id);
            }
        }
    }
}
