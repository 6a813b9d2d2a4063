//! The locks a client holds, for [`LockClient::release_all`](crate::LockClient::release_all).
//!
//! Every acquisition through the client is remembered here with its handle and its monotonic
//! lease end (moved by each extension) until it is released through the client, found lost, or
//! its lease has run out (forgotten lazily: the set is pruned of such entries as it grows, so a
//! program that lets its locks expire does not leak). A lock a [`LockGuard`](crate::LockGuard)
//! holds also carries the guard's way to stop: `release_all` turns the guard to released before
//! it sends the release, so that no guard says "held" for a lock being released.
//!
//! Unlike the lines of [`wait_queues`](crate::wait_queues), which may forget holds beyond their
//! bound (costing a waiter some polling), this set forgets no live hold: a lock `release_all`
//! missed would stay held until its lease ends.

use crate::lock::{LockHandle, LockId};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use tokio::time::Instant;

/// Stops a guard: its heartbeat, and its state to released.
pub(crate) type StopGuard = Arc<dyn Fn() + Send + Sync>;

/// Pruning starts at this many remembered locks and doubles with the live ones.
const FIRST_PRUNE_AT: usize = 64;

/// The locks one client holds; clones of a client share one.
#[derive(Default)]
pub(crate) struct Holds {
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    held: HashMap<LockId, Hold>,
    prune_at: usize,
}

struct Hold {
    handle: LockHandle,
    until: Instant,
    stop_guard: Option<StopGuard>,
}

/// One lock as `release_all` takes it: its handle, its lease end, and its guard's stop, if a
/// guard holds it.
#[derive(Clone)]
pub(crate) struct Held {
    pub(crate) handle: LockHandle,
    pub(crate) until: Instant,
    pub(crate) stop_guard: Option<StopGuard>,
}

impl std::fmt::Debug for Holds {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Holds")
            .field("held", &self.inner().held.len())
            .finish()
    }
}

impl Holds {
    fn inner(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The client took the lock of `handle`, held until `until`.
    pub(crate) fn acquired(&self, handle: &LockHandle, until: Instant) {
        let mut inner = self.inner();
        if inner.held.len() >= inner.prune_at.max(FIRST_PRUNE_AT) {
            let now = Instant::now();
            inner
                .held
                .retain(|_, hold| hold.until > now || hold.stop_guard.is_some());
            inner.prune_at = inner.held.len() * 2;
        }
        let stop_guard = inner
            .held
            .remove(&handle.lock_id())
            .and_then(|hold| hold.stop_guard);
        inner.held.insert(
            handle.lock_id(),
            Hold {
                handle: handle.clone(),
                until,
                stop_guard,
            },
        );
    }

    /// A guard holds the lock `lock_id`; `stop` stops it. False if the client no longer
    /// remembers the lock: a release through the client (such as `release_all`) took it between
    /// the acquisition and the guard's start, and the guard must not start as held.
    pub(crate) fn guarded(&self, lock_id: LockId, stop: StopGuard) -> bool {
        match self.inner().held.get_mut(&lock_id) {
            Some(hold) => {
                hold.stop_guard = Some(stop);
                true
            }
            None => false,
        }
    }

    /// The lock of `handle` was extended to `until`. Remembered again if it had been pruned (its
    /// lease had run out on this process's clock, which times it conservatively, yet the item was
    /// still live and the extension succeeded).
    pub(crate) fn extended(&self, handle: &LockHandle, until: Instant) {
        self.inner()
            .held
            .entry(handle.lock_id())
            .and_modify(|hold| hold.until = until)
            .or_insert_with(|| Hold {
                handle: handle.clone(),
                until,
                stop_guard: None,
            });
    }

    /// The client no longer holds the lock `lock_id`.
    pub(crate) fn freed(&self, lock_id: LockId) {
        self.inner().held.remove(&lock_id);
    }

    /// The client no longer holds a lock on `resource`: any, or only `owner`'s.
    pub(crate) fn freed_on(&self, resource: &str, owner: Option<&str>) {
        self.inner().held.retain(|_, hold| {
            hold.handle.resource() != resource || owner.is_some_and(|o| hold.handle.owner() != o)
        });
    }

    /// Every lock remembered, taken out at once: a guard starting on one of them from now on
    /// starts lost ([`guarded`](Self::guarded) says false), and `release_all` puts back
    /// ([`acquired`](Self::acquired)) those whose release failed.
    pub(crate) fn take_all(&self) -> Vec<Held> {
        self.inner()
            .held
            .drain()
            .map(|(_, hold)| Held {
                handle: hold.handle,
                until: hold.until,
                stop_guard: hold.stop_guard,
            })
            .collect()
    }

    /// The locks remembered (test only).
    #[cfg(test)]
    fn handles(&self) -> Vec<LockHandle> {
        self.inner()
            .held
            .values()
            .map(|hold| hold.handle.clone())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn handle(resource: &str) -> LockHandle {
        LockHandle::new(resource, "me", LockId::generate())
    }

    #[test]
    fn a_hold_is_remembered_until_freed() {
        let holds = Holds::default();
        let (a, b) = (handle("a"), handle("b"));
        let until = Instant::now() + Duration::from_secs(30);
        holds.acquired(&a, until);
        holds.acquired(&b, until);
        assert_eq!(holds.handles().len(), 2);
        holds.freed(a.lock_id());
        assert_eq!(holds.handles(), vec![b.clone()]);
        holds.freed_on("b", Some("someone else"));
        assert_eq!(holds.handles().len(), 1);
        holds.freed_on("b", Some("me"));
        assert!(holds.handles().is_empty());
        holds.acquired(&b, until);
        holds.freed_on("b", None);
        assert!(holds.handles().is_empty());
    }

    #[test]
    fn pruning_forgets_only_holds_whose_lease_ran_out_without_a_guard() {
        let holds = Holds::default();
        let ran_out = Instant::now();
        let guarded = handle("guarded");
        holds.acquired(&guarded, ran_out);
        assert!(holds.guarded(guarded.lock_id(), Arc::new(|| {})));
        for i in 0..FIRST_PRUNE_AT - 1 {
            holds.acquired(&handle(&format!("ran-out/{i}")), ran_out);
        }
        let live = handle("live");
        holds.acquired(&live, Instant::now() + Duration::from_secs(30));
        let mut left: Vec<_> = holds
            .handles()
            .iter()
            .map(|handle| handle.resource().to_owned())
            .collect();
        left.sort();
        assert_eq!(left, vec!["guarded", "live"]);
    }

    #[test]
    fn a_lock_taken_back_keeps_its_guard() {
        let holds = Holds::default();
        let lock = handle("a");
        holds.acquired(&lock, Instant::now());
        assert!(holds.guarded(lock.lock_id(), Arc::new(|| {})));
        holds.acquired(&lock, Instant::now() + Duration::from_secs(30));
        let taken = holds.take_all();
        assert!(taken[0].stop_guard.is_some());
    }

    #[test]
    fn an_extension_remembers_a_hold_pruned_before_it_succeeded() {
        let holds = Holds::default();
        let lock = handle("a");
        let until = Instant::now() + Duration::from_secs(30);
        holds.extended(&lock, until);
        assert_eq!(holds.handles(), vec![lock.clone()]);
        holds.extended(&lock, until + Duration::from_secs(30));
        assert_eq!(holds.take_all()[0].until, until + Duration::from_secs(30));
    }

    #[test]
    fn a_guard_cannot_join_a_hold_taken_by_release_all() {
        let holds = Holds::default();
        let lock = handle("a");
        holds.acquired(&lock, Instant::now() + Duration::from_secs(30));
        assert_eq!(holds.take_all().len(), 1);
        assert!(!holds.guarded(lock.lock_id(), Arc::new(|| {})));
        assert!(holds.handles().is_empty());
    }
}
