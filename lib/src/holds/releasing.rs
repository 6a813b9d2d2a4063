//! The releases that start through the client: each lock a release may end is marked as ended
//! and its guards stopped before the request is sent, and the release is on its way (see
//! [`underway`](super::underway)) while its token is kept.

use super::ended::Ending;
use super::underway::Reach;
use super::{acquired_after, Held, Holds, Inner, ReleaseUnderway, StopGuard};
use crate::lock::{LockHandle, LockId};
use crate::mode::Mode;
use crate::outcome::LockLost;
use chrono::{DateTime, Utc};

impl Holds {
    /// The client no longer holds the lock `lock_id`.
    pub(crate) fn freed(&self, lock_id: LockId) {
        self.inner().held.remove(&lock_id);
    }

    /// [`freed`](Self::freed) by a release by owner of the locks acquired by `acquired_by`
    /// (`None`: any time), answered: only if the lock is not known acquired after it. Handed back
    /// to this client while the release was on its way (the item then showing a later time, the
    /// release's mark did not refuse the hand-back), the hold of the new acquisition went with
    /// the refused release, its guard left out of `release_all` (found by review).
    pub(crate) fn freed_acquired_by(&self, lock_id: LockId, acquired_by: Option<DateTime<Utc>>) {
        let mut inner = self.inner();
        let spared = inner
            .held
            .get(&lock_id)
            .is_some_and(|hold| acquired_after(hold.acquired_at, acquired_by));
        if !spared {
            inner.held.remove(&lock_id);
        }
    }

    /// Every lock remembered, taken out at once and marked as ended: a guard starting on one of
    /// them from now on starts lost ([`guarded`](Self::guarded) says false), no idempotent
    /// acquisition is handed one back, and `release_all` puts back ([`acquired`](Self::acquired))
    /// those whose release failed.
    /// Those kept to their lease end ([`keep_until_expiry`](Self::keep_until_expiry)) stay, and
    /// so do those only extended through this client (taken elsewhere), and those whose release
    /// is on its way ([`underway`]; a failed one's lock is taken by the next call).
    pub(crate) fn take_all(&self) -> Vec<Held> {
        let mut inner = self.inner();
        let Inner {
            held,
            ended,
            underway,
            ..
        } = &mut *inner;
        let (kept, taken): (Vec<_>, Vec<_>) = held.drain().partition(|(lock_id, hold)| {
            hold.until_expiry || !hold.taken_here || underway.contains(*lock_id, hold.acquired_at)
        });
        held.extend(kept);
        taken
            .into_iter()
            .map(|(lock_id, hold)| {
                // Marked with the take, not when each release's task first runs: an idempotent
                // acquisition in between was handed back a lock about to be released.
                ended.insert(lock_id, Ending::released_by(&hold.handle));
                Held {
                    handle: hold.handle,
                    acquired_at: hold.acquired_at,
                    until: hold.until,
                    stop_guards: hold.stop_guards,
                }
            })
            .collect()
    }

    /// A release of the lock of `handle` starts: it is marked as ended (whether or not this
    /// client took it), and its guards turn lost, as released, before the request is sent. It is
    /// on its way while the answer is kept (see [`underway`]).
    pub(crate) fn release_starts(&self, handle: &LockHandle) -> ReleaseUnderway {
        self.release_reaching(handle, Reach::Acquisition)
    }

    /// [`release_starts`](Self::release_starts), for a release only of a version of the lock
    /// (see [`Reach::Version`]).
    pub(crate) fn release_of_version_starts(&self, handle: &LockHandle) -> ReleaseUnderway {
        self.release_reaching(handle, Reach::Version)
    }

    fn release_reaching(&self, handle: &LockHandle, reach: Reach) -> ReleaseUnderway {
        // On its way before the guards are stopped: one dropped once stopped leaves the lock to
        // this release.
        let underway = ReleaseUnderway::start(&self.inner, handle.lock_id(), reach);
        self.end(
            [handle.lock_id()],
            &Ending::released_by(handle),
            &LockLost::Released,
        );
        underway
    }

    /// A release through the client (a force release, a release by owner) is about to remove the
    /// locks `lock_ids`, as read in the item: each is marked as ended, held through this client
    /// or not, and its guards turn lost, as released. An acquisition of this client whose write
    /// made one of them, answered only after the removal, then starts no guard as held (with only
    /// the locks the client remembered marked, its late answer started a guard held on a lock
    /// already deleted).
    pub(crate) fn removing(&self, lock_ids: impl IntoIterator<Item = LockId>) {
        self.end(lock_ids, &Ending::released_by_any(), &LockLost::Released);
    }

    /// [`removing`](Self::removing), by a force release that is on its way already for the locks
    /// `on_its_way` (see [`releases_start_on`](Self::releases_start_on)): it is on its way for
    /// the others too (a lock taken while it read the item), from before their guards stop. A
    /// guard's release of one, without, was sent at once and said `NotFound` where the force
    /// release's delete landed first (found by review).
    pub(crate) fn removing_by_force(
        &self,
        lock_ids: Vec<LockId>,
        on_its_way: &[LockId],
    ) -> Vec<ReleaseUnderway> {
        let underway = {
            let mut inner = self.inner();
            lock_ids
                .iter()
                .filter(|lock_id| !on_its_way.contains(lock_id))
                .map(|lock_id| {
                    ReleaseUnderway::start_in(
                        &self.inner,
                        &mut inner.underway,
                        *lock_id,
                        Reach::AnyHolder,
                    )
                })
                .collect()
        };
        // Marked while the force release is on its way (its tokens), as ended by any holder.
        self.stop_guards(lock_ids, &LockLost::Released);
        underway
    }

    /// Turns the guards of `lock_ids` lost for `lost` (outside the set's mutex: a guard's stop
    /// takes its own state's lock).
    fn stop_guards(&self, lock_ids: Vec<LockId>, lost: &LockLost) {
        let stops: Vec<StopGuard> = {
            let inner = self.inner();
            lock_ids
                .iter()
                .flat_map(|lock_id| {
                    inner
                        .held
                        .get(lock_id)
                        .map(|hold| hold.stop_guards.clone())
                        .unwrap_or_default()
                })
                .collect()
        };
        for stop in stops {
            stop(lost.clone());
        }
    }

    /// Marks `lock_ids` as ended by `ending` and turns their guards lost for `lost` (outside the
    /// set's mutex: a guard's stop takes its own state's lock).
    pub(super) fn end(
        &self,
        lock_ids: impl IntoIterator<Item = LockId>,
        ending: &Ending,
        lost: &LockLost,
    ) {
        let stops: Vec<StopGuard> = {
            let mut inner = self.inner();
            lock_ids
                .into_iter()
                .flat_map(|lock_id| {
                    inner.ended.insert(lock_id, ending.clone());
                    inner
                        .held
                        .get(&lock_id)
                        .map(|hold| hold.stop_guards.clone())
                        .unwrap_or_default()
                })
                .collect()
        };
        for stop in stops {
            stop(lost.clone());
        }
    }

    /// A release of `owner`'s lock on `resource` acquired no later than `acquired_by` (`None`:
    /// any owner, any time: a force release, which removes every holder) starts: every lock of
    /// this client it can end is marked as being released, and its guards turn lost, as released,
    /// before the request is sent. A release by owner ends only the exclusive holder's lock.
    /// Each such lock's release is on its way while its token returned is kept (a guard it
    /// stopped, dropped or released meanwhile, sent a DeleteItem of its own that could land
    /// first, and the release by owner answered `NotFound` for a lock its own client released;
    /// found by review); a force release's, waited for by the releases that start after it, is
    /// not one the lock is left to (see [`ReleaseUnderway::overtake_earlier`]).
    pub(crate) fn releases_start_on(
        &self,
        resource: &str,
        owner: Option<&str>,
        acquired_by: Option<DateTime<Utc>>,
    ) -> Vec<ReleaseUnderway> {
        let (underway, stops) = {
            let mut inner = self.inner();
            let ending: Vec<(LockId, Ending, Vec<StopGuard>)> = inner
                .held
                .values()
                .filter(|hold| {
                    hold.handle.resource() == resource
                        && owner.is_none_or(|owner| {
                            hold.handle.owner() == owner && hold.handle.mode() == Mode::Exclusive
                        })
                        && acquired_by.is_none_or(|by| hold.acquired_at.is_some_and(|at| at <= by))
                })
                .map(|hold| {
                    // A force release removes every holder; a release by owner, the owner's.
                    let by = match owner {
                        Some(_) => Ending::released_by_owner(&hold.handle, acquired_by),
                        None => Ending::released_by_any(),
                    };
                    (hold.handle.lock_id(), by, hold.stop_guards.clone())
                })
                .collect();
            let mut underway = Vec::new();
            let mut stops = Vec::new();
            for (lock_id, by, stops_of_lock) in ending {
                // On its way before the guards are stopped, as a release's (`release_starts`);
                // sent at once, a release by owner overtakes a guard's release on its way (which,
                // refused after it, said `NotFound` for a lock its own client released; found by
                // review). A force release reads the item first, and overtakes as it deletes.
                let forced = owner.is_none();
                let reach = match (forced, acquired_by) {
                    (true, _) => Reach::AnyHolder,
                    (false, Some(by)) => Reach::AcquiredBy(by),
                    (false, None) => Reach::Acquisition,
                };
                let started =
                    ReleaseUnderway::start_in(&self.inner, &mut inner.underway, lock_id, reach);
                // A force release's marks the lock while it is on its way, and after only if it
                // may have removed it (see `ReleaseUnderway`'s drop).
                if forced {
                    underway.push(started);
                } else {
                    underway.push(started.overtaking());
                    inner.ended.insert(lock_id, by);
                }
                stops.extend(stops_of_lock);
            }
            (underway, stops)
        };
        for stop in stops {
            stop(LockLost::Released);
        }
        underway
    }
}
