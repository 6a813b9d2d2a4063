//! An acquisition whose future is dropped while its write is in flight.
//!
//! A caller may stop waiting for `acquire` at any moment: a `tokio::select!`, an outer timeout,
//! an aborted task. If that happens while the PutItem (or the fenced TransactWriteItems) is on its
//! way, DynamoDB may apply it after nobody is left to hold the lock, which would then block every
//! other acquirer for a whole lease. The write's `LockID` is known before it is sent, so a dropped
//! attempt releases it: one DeleteItem conditioned on that `LockID` and `Owner` (the release's
//! request, [`release::send`]), from a background task
//! ([`LockClient::flush`](crate::LockClient::flush) waits for it). The same goes for an attempt
//! answered with an error that does not say whether the write was applied: a timeout, or a
//! connection lost after the SDK's last retry (the acquire then fails with `Err(Backend)`), or a transaction cancelled by a
//! conflict after an earlier attempt's answer was lost. If the write was never applied, or someone
//! else holds the lock by then, the condition fails and nothing changes. A clean-up looks again
//! 50 and 200 ms later, whatever it found, for a write still on its way (the SDK's resend of a
//! write whose answer was lost lands after a first look that released the first attempt's lock);
//! one delayed longer is not caught: it expires with its lease.

use crate::background::{looking_again, looking_later};
use crate::error::Error;
use crate::fair;
use crate::holds::ResentWrite;
use crate::lock::LockHandle;
use crate::lock_table::LockTable;
use crate::ops::acquire::Attempt;
use crate::ops::extend::DataChange;
use crate::ops::release::{self, Release};
use crate::outcome::ReleaseOutcome;
use std::sync::Arc;
use tracing::{debug, warn};

/// Armed while an acquisition's write is in flight; releases what it may have written if dropped
/// before [`answered`](Self::answered), which only an answer that settles the outcome calls.
pub(crate) struct InFlightAcquisition<'a> {
    table: &'a Arc<LockTable>,
    handle: Option<LockHandle>,
    /// The `Version` the write stores, if it is one an idempotent acquisition can be handed back
    /// (an exclusive lock's): the clean-up releases only that version.
    version: Option<String>,
}

impl<'a> InFlightAcquisition<'a> {
    /// Arms the clean-up for the write of `handle`'s lock, about to be sent, storing `version`
    /// if given (see the field).
    pub(crate) fn new(
        table: &'a Arc<LockTable>,
        handle: &LockHandle,
        version: Option<&str>,
    ) -> Self {
        InFlightAcquisition {
            table,
            handle: Some(handle.clone()),
            version: version.map(str::to_owned),
        }
    }

    /// The write's outcome is known (applied, or refused by a condition): its caller decides from
    /// here.
    pub(crate) fn answered(mut self) {
        self.handle = None;
    }

    /// The write was refused by a condition, the refusal read (`attempt`): settled, unless an
    /// earlier attempt of the request ended unanswered (`unsure`, the SDK sent it again) and the
    /// refusal did not find the write's own lock, handed to the caller: that attempt may still be
    /// on its way, and land once the lock is free, for nobody (found by review). The clean-up
    /// then runs, and looks for it.
    pub(crate) fn refused(self, unsure: bool, attempt: &Result<Attempt, Error>) {
        let own = self.handle.as_ref().map(LockHandle::lock_id);
        let taken = matches!(attempt, Ok(Attempt::Acquired(lock)) if Some(lock.lock_id()) == own);
        if !unsure || taken {
            self.answered();
        }
    }
}

/// The writes of one acquisition attempt that may write a lock more than once (a shared hold's
/// plain write and reclaims, a lock set's transactions), each lock with the version it stores
/// (see [`InFlightAcquisition`]'s field). Armed once a write of the attempt was refused after the
/// SDK sent it again (an attempt of it ended unanswered): that attempt may still be on its way,
/// and land once the locks are free, for nobody (found by review). Dropped armed (the attempt
/// ended held or in conflicts, failed, or was dropped, at a later write or the clearing of lapsed
/// holders), it cleans up after each lock as a write dropped in flight is; once the attempt
/// acquired, the locks' first release looks for that attempt (a later write took the locks,
/// and the earlier one's attempt, refused only while they are held, took them for nobody once
/// released; found by review).
pub(crate) struct AfterResend<'a> {
    table: &'a Arc<LockTable>,
    locks: Vec<(LockHandle, Option<String>)>,
    armed: bool,
}

impl<'a> AfterResend<'a> {
    /// The attempt writing `locks`, none refused after a resend yet.
    pub(crate) fn new(table: &'a Arc<LockTable>, locks: Vec<(LockHandle, Option<String>)>) -> Self {
        AfterResend {
            table,
            locks,
            armed: false,
        }
    }

    /// A write of the attempt was refused; `unsure` if an attempt of it ended unanswered.
    pub(crate) fn refused(&mut self, unsure: bool) {
        self.armed |= unsure;
    }

    /// The attempt acquired its locks, by a write the SDK sent more than once if `resent`: a late
    /// attempt of one of its writes finds them held, and may land once they are released; if
    /// one may be on its way, their first release looks for it
    /// ([`look_again_after_release`]).
    pub(crate) fn acquired(mut self, resent: bool) {
        if self.armed || resent {
            // (An exclusive write on a client that keeps items refuses its own late attempt: it
            // is conditioned on not being this attempt's.)
            let exclusive_kept =
                |version: &Option<String>| version.is_some() && !self.table.delete_on_release;
            for (handle, version) in self
                .locks
                .iter()
                .filter(|(_, version)| !exclusive_kept(version))
            {
                written_after_resend(
                    self.table,
                    handle,
                    ResentWrite::Acquisition(version.clone()),
                );
            }
        }
        self.armed = false;
    }
}

impl Drop for AfterResend<'_> {
    fn drop(&mut self) {
        if self.armed {
            for (handle, version) in &self.locks {
                drop(InFlightAcquisition::new(
                    self.table,
                    handle,
                    version.as_deref(),
                ));
            }
        }
    }
}

/// After the first release of `handle`'s lock, whose acquisition's `write` was applied after the
/// SDK sent it more than once ([`Holds::written_after_resend`](crate::holds::Holds::written_after_resend)):
/// looks for that write's earlier attempt 50 and 200 ms later, as a dropped acquisition's
/// clean-up does: an acquisition's write is released, only of the version it stored (landing
/// once the lock was released, it took it for nobody for a whole lease); a fair waiter's join is
/// taken out of the line, and a lock granted to it released (landing after the waiter held and
/// released the lock, it put the waiter back in line behind the next holder, whose release
/// granted the lock to nobody). Both found by review. One delayed longer is not caught.
pub(crate) fn look_again_after_release(
    table: &Arc<LockTable>,
    handle: LockHandle,
    write: ResentWrite,
) {
    let looking = Arc::clone(table);
    let spawned = table.release_in_background(async move {
        looking_later(|| async {
            // Whether it found an earlier attempt that had landed (and undid it).
            let found = match &write {
                ResentWrite::Acquisition(version) => {
                    let release = Release::of(&handle).only_of_version(version.as_deref());
                    release::send_retrying(&looking, &release, DataChange::Keep, None)
                        .await
                        .map(|outcome| outcome == ReleaseOutcome::Released)
                }
                ResentWrite::Join => fair::wait::leave_gone_waiter(&looking, &handle).await,
            };
            match found {
                Ok(found) => debug!(resource = handle.resource(), ?write, found, "looked for an earlier attempt of a resent write"),
                Err(err) => warn!(resource = handle.resource(), ?write, %err, "could not look for an earlier attempt of a resent write; one that landed expires with its lease"),
            }
        })
        .await;
    });
    if !spawned {
        warn!("a released lock whose acquisition's write was resent could not be looked at outside a runtime");
    }
}

/// `handle`'s lock was written by a `write` applied after the SDK sent it more than once
/// ([`Holds::written_after_resend`](crate::holds::Holds::written_after_resend)): its first
/// release looks for the write's earlier attempt; or, its release started through this client
/// already (a release by owner or a force release that removed it before the acquisition's
/// answer came), it is looked for at once: no release of it is to come (found by review).
pub(crate) fn written_after_resend(
    table: &Arc<LockTable>,
    handle: &LockHandle,
    write: ResentWrite,
) {
    table.holds.written_after_resend(handle.lock_id(), write);
    // (Not while a force release that read it is on its way: its delete, beaten by the look,
    // said it removed nobody; found by review. It looks as it ends, however it ends.)
    let lock_id = handle.lock_id();
    if table.holds.release_started(lock_id) && !table.holds.being_forced(lock_id) {
        look_again_if_resent(table, handle.clone());
    }
}

/// [`look_again_after_release`], if `handle`'s lock, just released (by a release by owner, or a
/// force release, through this client), was written after a resend; the first release of it
/// only (see [`Holds::resent_write_released`](crate::holds::Holds::resent_write_released)).
pub(crate) fn look_again_if_resent(table: &Arc<LockTable>, handle: LockHandle) {
    if let Some(write) = table.holds.resent_write_released(handle.lock_id()) {
        look_again_after_release(table, handle, write);
    }
}

impl Drop for InFlightAcquisition<'_> {
    fn drop(&mut self) {
        let Some(handle) = self.handle.take() else {
            return;
        };
        // An exclusive write's clean-up releases only the version it stored, which a hand-back
        // (in this client or another) replaces: one already handed back to this client is left
        // to its holder, and nothing is marked, so that an idempotent acquisition of this
        // client may still be handed it back (its extension, landing first, makes the clean-up
        // change nothing; landing after it, it finds nothing and the acquisition tries again).
        // Marked, an acquisition whose hand-back was on its way waited out the lease of a lock
        // held by nobody (a set's exclusive member alike). Otherwise (shared holds: never handed
        // back) the lock is marked as ended at once, so that no idempotent acquisition of this client is handed
        // it back before the release is sent; unless one was handed it back already.
        let left = match self.version {
            Some(_) => self.table.holds.handed_back(handle.lock_id()),
            None => !self.table.holds.abandoned(&handle),
        };
        if left {
            debug!(
                resource = handle.resource(),
                "a dropped acquisition's lock was handed back to another acquisition of this client; left to it"
            );
            return;
        }
        let table = Arc::clone(self.table);
        let version = self.version.take();
        let spawned = self.table.release_in_background(async move {
            let resource = handle.resource();
            // Only the version the write stored: an idempotent acquisition of the same owner in
            // another process, handed the lock back meanwhile, wrote a new one, and this deleted
            // the lock it went on believing it held (found by review).
            let release = Release::of(&handle).only_of_version(version.as_deref());
            // The write, or the SDK's resend of it after a lost answer, may still be on its way:
            // look again, after a release too (one that released the first attempt's lock looked
            // no more, and the resend, landing just after, took the lock for nobody for a lease;
            // found by review). A failed look is not looked at again: it was retried already.
            let released = looking_again(
                || release::send_retrying(&table, &release, DataChange::Keep, None),
                Result::is_ok,
            )
            .await;
            match released {
                Ok(outcome) => {
                    debug!(resource, ?outcome, "released what a dropped acquisition may have written")
                }
                Err(err) => {
                    warn!(resource, %err, "a dropped acquisition's write could not be released; it expires with its lease")
                }
            }
        });
        if !spawned {
            warn!("acquisition dropped mid-request outside a runtime; what it wrote expires with its lease");
        }
    }
}
