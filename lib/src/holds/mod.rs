//! The locks a client holds, for [`LockClient::release_all`](crate::LockClient::release_all).
//!
//! Every acquisition through the client is remembered here with its handle and its monotonic
//! lease end (moved by each extension) until it is released through the client, found lost, or
//! its lease has run out (forgotten lazily: the set is pruned of such entries as it grows, so a
//! program that lets its locks expire does not leak).
//!
//! A lock that [`LockGuard`](crate::LockGuard)s hold also carries each guard's way to stop (an
//! idempotent acquisition handed back to the same client can have several guards). Every path
//! of the client that ends a hold stops them before its request is sent: a release, a release
//! by owner or a force release of the resource, `release_all`, and an extension that finds the
//! lock lost. So no guard says "held" for a lock its own client is releasing or has found lost,
//! whichever call (or which of its guards) ended it.
//!
//! A lock whose release has started is marked as released for good: an idempotent acquisition
//! by the same owner is not handed it back, since the release in flight may delete it at any
//! moment after, and, once answered, may have deleted it after DynamoDB decided a refusal that
//! showed it (a request sent before the release was applied, read after its answer). The mark
//! outlives the hold (the last [`ENDED_KEPT`] acquisitions whose release started are kept) so
//! that no answer read late revives an acquisition that ended.
//!
//! Unlike the lines of [`wait_queues`](crate::wait_queues), which may forget holds beyond their
//! bound (costing a waiter some polling), this set forgets no live hold: a lock `release_all`
//! missed would stay held until its lease ends.

use crate::lock::{LockHandle, LockId};
use crate::outcome::LockLost;
use chrono::{DateTime, Utc};
use ended::{Ended, Ending};
use latest::Latest;
use sent::Sent;
pub(crate) use sent::{Applied, ExpiryFound, LeaseToSend};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use tokio::time::Instant;
use underway::MayHaveReleased;
pub(crate) use underway::ReleaseUnderway;
use underway::Underway;

mod ended;
pub(crate) mod latest;
mod releasing;
mod sent;
mod underway;

/// Stops a guard: its heartbeat, and its state to lost for the reason given.
pub(crate) type StopGuard = Arc<dyn Fn(LockLost) + Send + Sync>;

/// Tells a guard of an extension of its lock applied through its client: the lease end counted
/// on, and the one stored.
pub(crate) type ExtendGuard = Arc<dyn Fn(Instant, DateTime<Utc>) + Send + Sync>;

/// Pruning starts at this many remembered locks and doubles with the live ones.
const FIRST_PRUNE_AT: usize = 64;

/// How many acquisitions whose release started the set keeps marked as ended after it forgot
/// them as holds: far more than can start releasing while one request is answered.
pub(crate) const ENDED_KEPT: usize = 4096;

/// The locks one client holds; clones of a client share one.
#[derive(Default)]
pub(crate) struct Holds {
    inner: Arc<Mutex<Inner>>,
}

#[derive(Default)]
struct Inner {
    held: HashMap<LockId, Hold>,
    prune_at: usize,
    /// The acquisitions whose release started, oldest first, at most [`ENDED_KEPT`].
    ended: Ended,
    /// The holds this client took that were pruned (their leases ran out on this process's
    /// clock, unguarded), the latest [`ENDED_KEPT`]: an extension that finds one still live
    /// remembers it again as taken here. A lock this client never took is remembered as only
    /// extended through it (taken for its own, a `release_all` released a lock taken elsewhere,
    /// a saga's, say; found by review).
    pruned: Latest<()>,
    /// The latest lease end an applied extension's answer found stored, for each of the latest
    /// [`ENDED_KEPT`] locks extended: kept apart from the holds, which a lock found lost leaves
    /// (see [`expiry_found`](Holds::expiry_found)).
    applied: Latest<DateTime<Utc>>,
    /// The locks whose releases are on their way, which `take_all` leaves to them.
    underway: Underway,
    /// The locks whose write was applied after the SDK sent it more than once, each with the
    /// version it stored, until a release of it is sent (see
    /// [`written_after_resend`](Holds::written_after_resend)).
    resent_writes: Latest<ResentWrite>,
}

/// A write of an acquisition that the SDK sent more than once, whose earlier attempt may land
/// after the lock it made is released (see [`Holds::written_after_resend`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ResentWrite {
    /// The acquisition's own write, storing this version (if its lock is one an idempotent
    /// acquisition can be handed back: an exclusive lock's), or an entry of its shared hold: an
    /// earlier attempt takes the free lock.
    Acquisition(Option<String>),
    /// A fair waiter's join, granted since: an earlier attempt puts the waiter back in line behind
    /// the next holder, whose release grants the lock to nobody.
    Join,
}

impl Inner {
    /// How the acquisition `lock_id` ended, as this client knows: marked, or ended for every
    /// holder while a force release that may remove it is on its way.
    fn ending(&self, lock_id: LockId) -> Option<Ending> {
        if self.underway.forcing(lock_id) {
            return Some(Ending::released_by_any());
        }
        self.ended.get(lock_id).cloned()
    }

    /// Remembers the lock of `handle` as taken (see [`Holds::acquired`]), pruning the holds whose
    /// leases ran out without a guard once there are many.
    fn remember(
        &mut self,
        handle: &LockHandle,
        acquired_at: Option<DateTime<Utc>>,
        until: Instant,
    ) {
        if self.held.len() >= self.prune_at.max(FIRST_PRUNE_AT) {
            let now = Instant::now();
            let pruned = &mut self.pruned;
            self.held.retain(|lock_id, hold| {
                // Kept while an extension may still be answered: one that finds the lease over
                // must know what the earlier ones sent.
                let keep = hold.until > now
                    || !hold.stop_guards.is_empty()
                    || hold.sent.unanswered_at(now);
                if !keep && hold.taken_here {
                    pruned.insert_new(*lock_id, ());
                }
                keep
            });
            self.prune_at = self.held.len() * 2;
        }
        // A lock taken again keeps the longest lease counted on (a hand-back whose lease is
        // shorter than the first guard's does not make later extensions write less than that
        // guard counts on), and what its extensions sent.
        let (stop_guards, extend_guards, until, sent, until_expiry, acquired_at) =
            match self.held.remove(&handle.lock_id()) {
                Some(hold) => (
                    hold.stop_guards,
                    hold.extend_guards,
                    hold.until.max(until),
                    hold.sent,
                    hold.until_expiry,
                    // The latest, as an extension's answer keeps it.
                    hold.acquired_at.max(acquired_at),
                ),
                None => (
                    Vec::new(),
                    Vec::new(),
                    until,
                    Sent::default(),
                    false,
                    acquired_at,
                ),
            };
        self.held.insert(
            handle.lock_id(),
            Hold {
                handle: handle.clone(),
                acquired_at,
                until,
                stop_guards,
                extend_guards,
                sent,
                until_expiry,
                taken_here: true,
            },
        );
    }
}

/// Whether a lock acquired at `acquired_at` (if known) is known acquired after `moment` (if any):
/// a release by owner of the locks acquired by that moment cannot have removed it, since an
/// acquisition time never goes back (a hand-back writes its own, never an earlier one).
fn acquired_after(acquired_at: Option<DateTime<Utc>>, moment: Option<DateTime<Utc>>) -> bool {
    matches!((acquired_at, moment), (Some(at), Some(moment)) if at > moment)
}

struct Hold {
    handle: LockHandle,
    /// As written: a release by owner of locks acquired no later than a moment spares the others.
    /// Unknown for a lock taken elsewhere until an extension's answer tells it: such a release
    /// then leaves it (the item decides; a hold marked released that the item spared answered
    /// every later extension `NotFound`).
    acquired_at: Option<DateTime<Utc>>,
    until: Instant,
    stop_guards: Vec<StopGuard>,
    /// The guards told of its extensions through this client (see [`Holds::watched`]).
    extend_guards: Vec<ExtendGuard>,
    /// What its extensions through this client sent.
    sent: Sent,
    /// Kept to its lease end: `release_all` leaves it (a scheduled tick's lock).
    until_expiry: bool,
    /// Taken by this client (acquired, handed back): not only extended through it, a handle
    /// taken elsewhere (a saga's lock a worker extends), which `release_all` leaves to its holder.
    taken_here: bool,
}

impl Hold {
    /// Whether `handle` is of another resource, mode or owner than the one this hold was taken
    /// with.
    fn is_another_handle(&self, handle: &LockHandle) -> bool {
        self.handle.mode() != handle.mode()
            || self.handle.owner() != handle.owner()
            || self.handle.resource() != handle.resource()
    }
}

/// One lock as `release_all` takes it: its handle, when it was acquired, its lease end, and the
/// stops of the guards that hold it.
#[derive(Clone)]
pub(crate) struct Held {
    pub(crate) handle: LockHandle,
    pub(crate) acquired_at: Option<DateTime<Utc>>,
    pub(crate) until: Instant,
    pub(crate) stop_guards: Vec<StopGuard>,
}

impl Held {
    /// Turns every guard of the lock lost for `lost`.
    pub(crate) fn stop(&self, lost: &LockLost) {
        for stop in &self.stop_guards {
            stop(lost.clone());
        }
    }
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

    /// The client took the lock of `handle`, acquired at `acquired_at` (as written) and held
    /// until `until`. A lock taken again (handed back to an idempotent acquisition) keeps its
    /// guards.
    pub(crate) fn acquired(&self, handle: &LockHandle, acquired_at: DateTime<Utc>, until: Instant) {
        self.inner().remember(handle, Some(acquired_at), until);
    }

    /// A lock `release_all` took whose release failed: remembered again as it was.
    pub(crate) fn put_back(&self, held: &Held) {
        self.inner()
            .remember(&held.handle, held.acquired_at, held.until);
    }

    /// The client's own live lock of `handle` is handed back to an idempotent acquisition, unless
    /// its release has started: then false, and it is not remembered. One step, under the lock
    /// the release's start takes too (a check before and a remembering after let a dropped
    /// acquisition's clean-up start in between, and delete the lock just handed back).
    pub(crate) fn taken_back(
        &self,
        handle: &LockHandle,
        acquired_at: DateTime<Utc>,
        until: Instant,
    ) -> bool {
        let mut inner = self.inner();
        if inner
            .ending(handle.lock_id())
            .is_some_and(|ending| ending.ends(handle, Some(acquired_at)))
        {
            return false;
        }
        inner.remember(handle, Some(acquired_at), until);
        true
    }

    /// The clean-up of an acquisition dropped with its write unanswered starts, unless the lock
    /// that write may have made is held through this client (an idempotent acquisition of the
    /// same owner was handed it back meanwhile, and its holder will end it): then false, and
    /// nothing is marked. Otherwise it is marked as ended, as a release's start marks it. A lock
    /// only extended here (a hand-back's extension on its way, or one that failed) is not held:
    /// taken for one, it was left to a hand-back that never took it, for a lease (found by
    /// review).
    pub(crate) fn abandoned(&self, handle: &LockHandle) -> bool {
        let mut inner = self.inner();
        if inner
            .held
            .get(&handle.lock_id())
            .is_some_and(|hold| hold.taken_here)
        {
            return false;
        }
        inner
            .ended
            .insert(handle.lock_id(), Ending::released_by(handle));
        true
    }

    /// Whether a release of the lock `lock_id` through this client has ended that may have
    /// released it (answered released, failed, or dropped unanswered; of the last
    /// [`ENDED_KEPT`]): a guard stopped by it (a twin guard's, `with_lock`'s, `release_all`'s)
    /// sends its own release as a resend of it, which reads the lock gone as `Unconfirmed`, not
    /// as a loss. Not for one that DynamoDB refused: the lock was gone or another's, and the
    /// guard's release says so too.
    pub(crate) fn may_have_been_released(&self, lock_id: LockId) -> bool {
        self.inner()
            .underway
            .ended
            .get(lock_id)
            .is_some_and(|ended| *ended > MayHaveReleased::No)
    }

    /// [`may_have_been_released`](Self::may_have_been_released), by a release other than a force
    /// release: one asked for by the lock's holder (its handle's release, or a release by owner).
    /// (A force release through the same client counted, and a saga's release refused by the
    /// next holder was read as a resend of its own, `Unconfirmed`, for a lock lost during its
    /// work; found by review.)
    pub(crate) fn released_on_request(&self, lock_id: LockId) -> bool {
        self.inner().underway.ended.get(lock_id) == Some(&MayHaveReleased::ByRequest)
    }

    /// Whether a release of the lock `lock_id` is on its way (see [`underway`]).
    pub(crate) fn release_underway(&self, lock_id: LockId) -> bool {
        let inner = self.inner();
        let acquired_at = inner.held.get(&lock_id).and_then(|hold| hold.acquired_at);
        inner.underway.contains(lock_id, acquired_at)
    }

    /// A write of the acquisition that made the lock `lock_id` (`write`) was applied after the SDK
    /// sent it more than once (an attempt timed out, or lost its connection): the earlier attempt
    /// may still be on its way, refused while the lock is held (or, a join, while its waiter is
    /// in line or holds), and land once it is released, taking the lock for nobody for a lease (or
    /// putting the waiter back in line, for a grant to nobody). The first release of it looks
    /// again for it ([`resent_write_released`](Self::resent_write_released)).
    pub(crate) fn written_after_resend(&self, lock_id: LockId, write: ResentWrite) {
        self.inner().resent_writes.insert_new(lock_id, write);
    }

    /// A release of the lock `lock_id` was sent: its acquisition's write applied after a resend,
    /// if any (see [`written_after_resend`](Self::written_after_resend)), forgotten now (one
    /// release looks again).
    pub(crate) fn resent_write_released(&self, lock_id: LockId) -> Option<ResentWrite> {
        self.inner().resent_writes.remove(lock_id)
    }

    /// The write of the lock `lock_id` applied after a resend, if any, still remembered (a
    /// release of it that failed looks, and so will the next).
    pub(crate) fn resent_write_of(&self, lock_id: LockId) -> Option<ResentWrite> {
        self.inner().resent_writes.get(lock_id).cloned()
    }

    /// Whether a force release through this client that may remove the lock `lock_id` is on its
    /// way.
    pub(crate) fn being_forced(&self, lock_id: LockId) -> bool {
        self.inner().underway.forcing(lock_id)
    }

    /// Whether this client holds the lock `lock_id` as taken here (acquired, or handed back to
    /// an idempotent acquisition), not only extended through it.
    pub(crate) fn handed_back(&self, lock_id: LockId) -> bool {
        self.inner()
            .held
            .get(&lock_id)
            .is_some_and(|hold| hold.taken_here)
    }

    /// A guard holds the lock of `handle`; `stop` stops it. False if the client no longer
    /// remembers the lock, or has started to release it (by that handle, or any holder's), or
    /// found it lost: a release through the client (such as `release_all`) took it between the
    /// acquisition and the guard's start, and the guard must not start as held. (A release by
    /// another handle, refused, counts for nothing: a hand-back given since started its guard lost,
    /// and its release deleted a lock another process held; found by review.)
    pub(crate) fn guarded(&self, handle: &LockHandle, stop: StopGuard) -> bool {
        let mut inner = self.inner();
        let lock_id = handle.lock_id();
        let acquired_at = inner.held.get(&lock_id).and_then(|hold| hold.acquired_at);
        if inner
            .ending(lock_id)
            .is_some_and(|ending| ending.ends(handle, acquired_at))
        {
            return false;
        }
        match inner.held.get_mut(&lock_id) {
            Some(hold) => {
                hold.stop_guards.push(stop);
                true
            }
            None => false,
        }
    }

    /// The guard [`guarded`](Self::guarded) for `handle` is told of the extensions of its lock
    /// applied through this client by `extended` (its `extend`, a twin guard's heartbeat): it
    /// counts on their lease (its heartbeat's own extension unanswered, it gave up at its own
    /// lease end, and released the lock its client had just answered extended; found by review).
    pub(crate) fn watched(&self, handle: &LockHandle, extended: ExtendGuard) {
        if let Some(hold) = self.inner().held.get_mut(&handle.lock_id()) {
            hold.extend_guards.push(extended);
        }
    }

    /// The client found the lock `lock_id` lost (an extension answered it gone, taken or
    /// expired): it is marked as ended, and its guards turn lost for `lost`. Marked, so that no
    /// idempotent acquisition refused by it before is handed it back after (one was, and its
    /// guard said held for a lock another client had force-released), and no late answer of an
    /// extension remembers it again.
    pub(crate) fn found_lost(&self, lock_id: LockId, lost: &LockLost) {
        self.end([lock_id], &Ending::Lost, lost);
    }

    /// Whether a release of the lock `lock_id` has started through this client (answered or
    /// not: of the last [`ENDED_KEPT`]), or the client found it lost.
    pub(crate) fn release_started(&self, lock_id: LockId) -> bool {
        self.inner().ending(lock_id).is_some()
    }

    /// Whether a release of the lock of `handle` that may take away its hold has started through
    /// this client (of the last [`ENDED_KEPT`]), or the client found the lock lost: one made with
    /// another handle (a wrong owner or resource), which DynamoDB refuses, does not count, nor
    /// does a release by owner of the locks acquired before `acquired_at` (the item's).
    pub(crate) fn ended_for(&self, handle: &LockHandle, acquired_at: DateTime<Utc>) -> bool {
        self.inner()
            .ending(handle.lock_id())
            .is_some_and(|ending| ending.ends(handle, Some(acquired_at)))
    }

    /// The lock of `handle` was extended (`applied`): false if this client has started to release
    /// it (answered, failed or not: a failed release's outcome may be unknown, and it may have
    /// deleted the lock), for the handle it holds it with, and the lock is not counted on;
    /// checked and counted under one lock, against an extension that found the lease over (see
    /// [`expiry_found`](Self::expiry_found)). Remembered again if it had been pruned (its lease
    /// had run out on this process's clock, which times it conservatively, yet the item was still
    /// live and the extension succeeded), unless its release has started or it was found lost:
    /// an extension answered after that does not make it held again. A lock this client did not
    /// take (a handle from elsewhere) is remembered as extended here only: its extensions are
    /// ordered as this client's own are, and `release_all` leaves it to its holder.
    pub(crate) fn extended(&self, handle: &LockHandle, applied: Applied) -> bool {
        let mut inner = self.inner();
        let lock_id = handle.lock_id();
        // Whatever the client makes of it: the item stood extended, and a refusal decided before
        // it, read after, is out of date.
        inner.applied.raise(lock_id, applied.stored_end);
        let marked = inner.ending(lock_id);
        if marked
            .as_ref()
            .is_some_and(|ending| ending.releases(handle, Some(applied.acquired_at)))
        {
            return false;
        }
        // Marked by another handle's release (a wrong owner's, refused) or found lost: a hold it
        // left, or a hand-back took since, counts on the extension all the same (its guards told
        // nothing, a heartbeat whose answer was held gave up at its own lease end and deleted the
        // lock its client had answered extended; found by review); none is remembered anew.
        let marked = marked.is_some();
        if let Some(hold) = inner.held.get_mut(&lock_id) {
            // Never earlier: answers of two extensions can come in either order.
            hold.until = hold.until.max(applied.until);
            // As written (remembered at an extension's send, a lock taken elsewhere had none),
            // the latest: a hand-back writes a later time, and the answer of an extension applied
            // before it, read after, set it back (a late release by owner then ended the lock
            // here that DynamoDB spared; found by review).
            hold.acquired_at = hold.acquired_at.max(Some(applied.acquired_at));
            // Its guards count on it (outside the set's mutex: a guard's state has a lock of its
            // own).
            let extend_guards = hold.extend_guards.clone();
            drop(inner);
            for extended in extend_guards {
                extended(applied.until, applied.stored_end);
            }
            return true;
        }
        if marked {
            return true;
        }
        let taken_here = inner.pruned.take(lock_id);
        inner.held.insert(
            lock_id,
            Hold {
                handle: handle.clone(),
                acquired_at: Some(applied.acquired_at),
                until: applied.until,
                stop_guards: Vec::new(),
                extend_guards: Vec::new(),
                sent: Sent::default(),
                until_expiry: false,
                taken_here,
            },
        );
        true
    }

    /// Whether this client holds the lock of `handle`'s id under another handle: in another mode
    /// than the handle's (an intention's id labelled shared, a shared hold's id in a handle left
    /// exclusive), for another owner (a handle rebuilt with a default owner), or of another
    /// resource. A request made with such a handle changes nothing of the hold (it goes to another
    /// item, or its condition names the mode's entry and the owner), and must neither forget it nor stop its guards (a release or an extension
    /// answered `NotFound`, `NotOwner` or `ModeMismatch` for it did, and the real hold, its guard
    /// stopped or saying held, was left to its lease).
    pub(crate) fn held_by_another_handle(&self, handle: &LockHandle) -> bool {
        self.inner()
            .held
            .get(&handle.lock_id())
            .is_some_and(|hold| hold.is_another_handle(handle))
    }

    /// An extension with `handle` found the lock under another owner: a hold this client
    /// remembers only from such extensions (recorded under that handle at their send, neither
    /// taken here nor guarded) is forgotten; any other is left as it is.
    pub(crate) fn forget_extended_as(&self, handle: &LockHandle) {
        let mut inner = self.inner();
        let lock_id = handle.lock_id();
        if inner.held.get(&lock_id).is_some_and(|hold| {
            hold.handle == *handle && !hold.taken_here && hold.stop_guards.is_empty()
        }) {
            inner.held.remove(&lock_id);
        }
    }

    /// The lock `lock_id` is kept to its lease end: [`take_all`](Self::take_all) leaves it, so
    /// that `release_all` does not release a lock meant to stand (a scheduled tick's). `false` if
    /// this client holds it no longer (`release_all` took it first).
    pub(crate) fn keep_until_expiry(&self, lock_id: LockId) -> bool {
        match self.inner().held.get_mut(&lock_id) {
            Some(hold) => {
                hold.until_expiry = true;
                true
            }
            None => false,
        }
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
mod tests;

#[cfg(test)]
mod extension_tests;

#[cfg(test)]
mod underway_tests;
