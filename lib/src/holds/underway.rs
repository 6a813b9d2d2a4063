//! Releases on their way: while one of a lock's releases is being sent (from the call that
//! started it to its answer, in whichever task sends it), [`take_all`](super::Holds::take_all)
//! leaves the lock to it. `release_all` sent a second release of such a lock, which could land
//! first: the first, refused, then found the lock gone, and `with_lock` answered that its work
//! had lost its lock; a release with a payload was refused, its payload not written (found by
//! review).
//!
//! A release started while others of the same lock are on their way is sent after them
//! ([`ReleaseUnderway::after_earlier`]), for a while at most, and as a resend if one of them may
//! have released the lock: a guard's `release` called once its twin's release had stopped it (two
//! guards of one idempotent acquisition) sent a second DeleteItem that landed first, with the
//! same harm (found by review).

use super::latest::Latest;
use super::Inner;
use crate::error::Error;
use crate::lock::LockId;
use crate::outcome::ReleaseOutcome;
use chrono::{DateTime, Utc};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;
use tokio::sync::watch;

/// How long a release waits for the releases of its lock on their way before it: past it, one
/// is taken for stuck (on a connection that never answers: the SDK sets no timeout of its own),
/// and the release is sent all the same, as a resend (waiting on, it never answered, and the
/// lock stayed held until its lease ended; found by review).
pub(super) const EARLIER_WAIT: Duration = Duration::from_secs(5);

/// The releases of each lock on their way, in the order they started: each one's number, what
/// tells whether it may have released the lock (its sender, dropped with it, says so until its
/// answer says otherwise), and whether a later release was sent before it was answered; and, of
/// the latest [`ENDED_KEPT`](super::ENDED_KEPT) locks whose releases ended, whether one may have
/// released it (see [`Holds::may_have_been_released`](super::Holds::may_have_been_released)).
#[derive(Default)]
pub(super) struct Underway {
    releases: HashMap<LockId, Vec<(u64, Earlier)>>,
    started: u64,
    pub(super) ended: Latest<MayHaveReleased>,
}

/// Whether the releases of a lock that ended may have released it, and which: a force release's
/// alone, or one asked for by the lock's own handle (or a release by owner).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum MayHaveReleased {
    /// None did (each was refused, or never sent).
    No,
    /// A force release may have.
    ByForce,
    /// A release of the lock asked for, not a force release's, may have.
    ByRequest,
}

/// What a release takes away, as the releases of the same lock that start after it see it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Reach {
    /// The acquisition (its release by lock id, or by owner): the lock is left to it.
    Acquisition,
    /// Only the lock as one write of it stored it (the release of an extension applied after
    /// the acquisition's release started: [`release_late_extension`](crate::ops::extend::release_late_extension)):
    /// refused by a newer version of the same acquisition, it ended nothing, and the lock is
    /// left to it only once it may have released it (left to it as to any release, a guard
    /// dropped after its failed release sent nothing, and `release_all` skipped the lock: held
    /// for nobody for a lease; found by review).
    Version,
    /// Whoever holds the lock (a force release's): waited for as any, but the lock is never left
    /// to it.
    AnyHolder,
    /// The acquisition, if acquired by a moment (a release by owner bounded by one, a stopped
    /// saga run's late stop event): the lock is left to it as to the acquisition's release, but
    /// refused (a hand-back since wrote a later time) it ended nothing, and it counts as an
    /// answer only once it may have released the lock (counted as any, a guard of the redriven
    /// run handed the lock back through this client meanwhile, dropped, sent nothing, and the
    /// lock stayed held for nobody for a lease; found by review).
    AcquiredBy(DateTime<Utc>),
}

/// A release on its way, as the releases that start after it see it.
#[derive(Clone)]
struct Earlier {
    may_have_released: watch::Receiver<bool>,
    overtaken: Arc<AtomicBool>,
    /// Whether it was answered (see [`ReleaseUnderway::earlier_answered`]).
    answered: Arc<AtomicBool>,
    /// What it takes away.
    reach: Reach,
}

impl Underway {
    /// Whether a force release that may remove `lock_id` is on its way: the lock counts as ended
    /// for every holder while it is, and stays so only if it may have removed it (see
    /// [`ReleaseUnderway`]'s drop).
    pub(super) fn forcing(&self, lock_id: LockId) -> bool {
        self.releases.get(&lock_id).is_some_and(|releases| {
            releases
                .iter()
                .any(|(_, earlier)| earlier.reach == Reach::AnyHolder)
        })
    }

    /// Whether a release of `lock_id` (acquired at `acquired_at`, if known) is on its way that the
    /// lock is left to: a force release's is not (it may be cancelled or fail before its delete,
    /// and a guard dropped meanwhile that left the lock to it released nothing; found by review),
    /// nor one only of a version (see [`Reach::Version`]), nor one of the locks acquired by a
    /// moment the lock is known acquired after (`release_all` left a lock handed back during it
    /// to it, refused, and the lock stayed held for nobody; found by review).
    pub(super) fn contains(&self, lock_id: LockId, acquired_at: Option<DateTime<Utc>>) -> bool {
        self.releases.get(&lock_id).is_some_and(|releases| {
            releases.iter().any(|(_, earlier)| match earlier.reach {
                Reach::Acquisition => true,
                Reach::AcquiredBy(by) => !super::acquired_after(acquired_at, Some(by)),
                Reach::Version | Reach::AnyHolder => false,
            })
        })
    }
}

/// One release of a lock on its way, until dropped (answered, failed, or cancelled with its
/// runtime): kept by whoever sends it, moved into the task that does.
#[must_use = "the release is on its way only while this is kept"]
pub(crate) struct ReleaseUnderway {
    inner: Arc<Mutex<Inner>>,
    lock_id: LockId,
    number: u64,
    /// Whether this release may have released the lock (until its answer says it did not);
    /// dropped with this, which ends the waits of the releases that started after it.
    may_have_released: watch::Sender<bool>,
    /// Whether a release that started after this one was sent before this one was answered.
    overtaken: Arc<AtomicBool>,
    /// Whether DynamoDB answered it (whatever it found).
    answered: Arc<AtomicBool>,
    /// Whether its request was sent (or it was answered): one dropped before, it released
    /// nothing, and a guard's release after it reads what it finds as the truth.
    sent: AtomicBool,
    /// The releases of the same lock on their way when this one started.
    earlier: Vec<Earlier>,
    /// What it takes away.
    reach: Reach,
    /// Whether it waited [`EARLIER_WAIT`] for the releases before it already
    /// ([`earlier_answered`](Self::earlier_answered)): it does not wait again.
    waited_out: bool,
}

impl ReleaseUnderway {
    /// A release of `lock_id` that takes away `reach` is on its way, in the holds `inner`.
    pub(super) fn start(inner: &Arc<Mutex<Inner>>, lock_id: LockId, reach: Reach) -> Self {
        let mut locked = inner.lock().unwrap_or_else(PoisonError::into_inner);
        Self::start_in(inner, &mut locked.underway, lock_id, reach)
    }

    /// [`start`](Self::start), with the holds `inner` locked, their releases on their way
    /// `underway`.
    pub(super) fn start_in(
        inner: &Arc<Mutex<Inner>>,
        underway: &mut Underway,
        lock_id: LockId,
        reach: Reach,
    ) -> Self {
        underway.started += 1;
        let number = underway.started;
        let (may_have_released, ended) = watch::channel(true);
        let overtaken = Arc::new(AtomicBool::new(false));
        let answered = Arc::new(AtomicBool::new(false));
        let releases = underway.releases.entry(lock_id).or_default();
        let earlier = releases
            .iter()
            .map(|(_, earlier)| earlier.clone())
            .collect();
        releases.push((
            number,
            Earlier {
                may_have_released: ended,
                overtaken: Arc::clone(&overtaken),
                answered: Arc::clone(&answered),
                reach,
            },
        ));
        ReleaseUnderway {
            inner: Arc::clone(inner),
            lock_id,
            number,
            may_have_released,
            overtaken,
            answered,
            earlier,
            sent: AtomicBool::new(false),
            reach,
            waited_out: false,
        }
    }

    /// The lock this release ends.
    pub(crate) fn lock_id(&self) -> LockId {
        self.lock_id
    }

    /// Its request is about to be sent: from now on it may release the lock.
    pub(crate) fn sending(&self) {
        self.sent.store(true, Ordering::SeqCst);
    }

    /// This release is sent without waiting for the releases of the lock on their way before it
    /// (a release by owner's): each of them is overtaken (see [`overtaken`](Self::overtaken)).
    pub(super) fn overtaking(mut self) -> Self {
        self.overtake_earlier();
        self
    }

    /// [`overtaking`](Self::overtaking), from now: a force release's, as its delete is sent
    /// (marked at its start, a release on its way it then did not overtake, cancelled or failed
    /// before its delete, read a loss as a resend's; found by review).
    pub(crate) fn overtake_earlier(&mut self) {
        for earlier in std::mem::take(&mut self.earlier) {
            earlier.overtaken.store(true, Ordering::SeqCst);
        }
    }

    /// Whether a release of the lock that started after this one was sent before this one was
    /// answered (it waited [`EARLIER_WAIT`] for it): a refusal that finds the lock gone,
    /// released or another's may be that release's doing, and is read as a resend's.
    pub(crate) fn overtaken(&self) -> bool {
        self.overtaken.load(Ordering::SeqCst)
    }

    /// The release was answered `answered`: it may have released the lock unless DynamoDB
    /// refused it (the lock gone, another's, or released already), for the releases that wait
    /// for it.
    pub(crate) fn answered(&self, answered: &Result<ReleaseOutcome, Error>) {
        let may_have_released = !matches!(
            answered,
            Ok(ReleaseOutcome::NotFound
                | ReleaseOutcome::NotOwner { .. }
                | ReleaseOutcome::AlreadyReleased { .. })
                | Err(Error::InvalidInput(_))
        );
        self.may_have_released.send_replace(may_have_released);
        self.answered.store(answered.is_ok(), Ordering::SeqCst);
        self.sending();
    }

    /// Waits, as [`after_earlier`](Self::after_earlier) does, for the releases of the lock on
    /// their way before this one (without taking them: `after_earlier` still reads them); true
    /// if DynamoDB answered one of them, whatever it found: the hold has ended, and a release sent
    /// only in case they failed is not sent (a guard dropped while a release of its lock was on
    /// its way left the lock to it, which then failed, and the lock stayed held for nobody for
    /// its lease; found by review). Past the wait, `after_earlier` waits no more (it waited as
    /// long again, and a dropped guard's release behind a stuck one went out after twice the
    /// wait; found by review).
    pub(crate) async fn earlier_answered(&mut self, acquired_at: Option<DateTime<Utc>>) -> bool {
        let ended = tokio::time::timeout(EARLIER_WAIT, async {
            for ended in &self.earlier {
                let mut ended = ended.may_have_released.clone();
                while ended.changed().await.is_ok() {}
            }
        })
        .await;
        self.waited_out = ended.is_err();
        // A force release's answer does not count: one that gave up (the item kept changing)
        // answers that it found nothing, and the lock, left to it, stayed held for nobody; one
        // that removed the lock may have removed an earlier copy of it, which the SDK's resend of
        // its acquisition wrote again after (found by review). Nor does a refusal of a release
        // only of a version (see [`Reach::Version`]). Sent after it, this one changes nothing
        // else.
        ended.is_ok()
            && self.earlier.iter().any(|earlier| {
                earlier.answered.load(Ordering::SeqCst)
                    && match earlier.reach {
                        Reach::Acquisition => true,
                        Reach::Version => *earlier.may_have_released.borrow(),
                        // Refused, it ended an acquisition by its moment (this one, if acquired
                        // by then: handed back to a later one since, a release of it by its lock
                        // id deleted that one's lock), not a later one.
                        Reach::AcquiredBy(by) => {
                            *earlier.may_have_released.borrow()
                                || acquired_at.is_some_and(|at| at <= by)
                        }
                        Reach::AnyHolder => false,
                    }
            })
    }

    /// Waits until every release of the same lock that was on its way when this one started has
    /// ended (answered, failed, or dropped), or [`EARLIER_WAIT`] has passed; true if one of them
    /// may have released the lock (it did not end, or its answer did not say it changed
    /// nothing): this release, sent after it, is then a resend of the lock's release, and a
    /// refusal that finds the lock gone is read as one. (One answered that the lock was gone,
    /// another's, or released already told its caller so; this one, read as a resend, hid that
    /// loss; found by review.) Whoever keeps this must not wait, meanwhile, for a release of the
    /// same lock started after it.
    pub(crate) async fn after_earlier(&mut self) -> bool {
        let earlier = std::mem::take(&mut self.earlier);
        let wait = match self.waited_out {
            true => Duration::ZERO,
            false => EARLIER_WAIT,
        };
        let waited = tokio::time::timeout(wait, async {
            for ended in &earlier {
                let mut ended = ended.may_have_released.clone();
                // `changed` fails once the sender is dropped.
                while ended.changed().await.is_ok() {}
            }
        })
        .await;
        // One not ended within the wait may yet release the lock (its sender still says so), and
        // this one is sent before it is answered: it is told so (it then found the lock gone,
        // and its caller was told the lock had been lost; found by review).
        if waited.is_err() {
            for earlier in &earlier {
                earlier.overtaken.store(true, Ordering::SeqCst);
            }
        }
        earlier
            .iter()
            .any(|earlier| *earlier.may_have_released.borrow())
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
        if self.sent.load(Ordering::SeqCst) {
            let may_have_released = *self.may_have_released.borrow();
            let forced = self.reach == Reach::AnyHolder;
            let ended = match (may_have_released, forced) {
                (false, _) => MayHaveReleased::No,
                (true, true) => MayHaveReleased::ByForce,
                (true, false) => MayHaveReleased::ByRequest,
            };
            inner.underway.ended.raise(self.lock_id, ended);
            // A force release marks as ended, for every holder, only the locks it may have
            // removed (answered so, or unanswered); the others were ended only while it was on
            // its way (marked at its start for good, one that failed or removed nothing left the
            // lock marked, and its holder's next extension through this client was answered
            // `NotFound` and deleted the live lock; found by review).
            if forced && may_have_released {
                inner
                    .ended
                    .insert(self.lock_id, super::ended::Ending::released_by_any());
            }
        } else {
            // Never sent, it released nothing: a release waiting for it is no resend.
            self.may_have_released.send_replace(false);
        }
        let releases = &mut inner.underway.releases;
        if let Some(of_lock) = releases.get_mut(&self.lock_id) {
            of_lock.retain(|(number, _)| *number != self.number);
            if of_lock.is_empty() {
                releases.remove(&self.lock_id);
            }
        }
    }
}
