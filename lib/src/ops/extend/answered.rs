//! An extension's answer, read: the outcome its caller is told, and what it leaves to do.
//!
//! Two extensions of one lock through one client can be decided by DynamoDB in one order and
//! read by the client in the other. One that found the lease over (`Expired`) tells of an earlier
//! extension that may still land, and the lock is released; but read after that earlier one was
//! applied and answered `Extended`, its refusal is out of date: the lock stood, extended, and the
//! release deleted it under the caller told it held (found by review). Such a refusal is sent
//! again ([`settle`] says `None`). Which of the two a client reads first is decided under the
//! holds' lock ([`Holds::extended`](crate::holds::Holds::extended),
//! [`Holds::expiry_found`](crate::holds::Holds::expiry_found)): an applied extension read after
//! the lock was marked for release answers `NotFound`.

use super::{Extension, NotExtended};
use crate::holds::{Applied, ExpiryFound, LeaseToSend};
use crate::lock::{Lock, LockHandle};
use crate::lock_table::LockTable;
use crate::ops::extend::DataChange;
use crate::ops::release::{self, Release};
use crate::outcome::ExtendOutcome;
use crate::record::Record;
use crate::time::{millis, span};
use std::sync::Arc;
use tokio::time::Instant;
use tracing::{debug, info, warn};

/// An extension's outcome, and what it leaves behind.
#[derive(Debug)]
pub(crate) struct Answered {
    pub(crate) outcome: ExtendOutcome,
    /// The lock is to be released, unless a release of it is on its way
    /// ([`LockClient::extend`](crate::LockClient::extend) releases it; a hand-back's extension
    /// releases only the version it wrote, applied after the release started, and, whose
    /// `Expired` answers no caller, retries the acquisition and leaves it to its lease):
    ///
    /// - The extension found the lease over while an earlier extension of the lock, sent
    ///   through this client, was not applied (or a rewrite of one was not answered): that one
    ///   may land yet (unanswered, or dropped with its request on the way), sent while the lease
    ///   stood, and hold the lock again for its lease (or, a rewrite under the observed-lease
    ///   rule, write a version that waiters count a whole lease from) while its caller was told
    ///   it expired. Only then: an extension through another client (its holder's, alive) may
    ///   land as well, between this answer and the release, and its caller, answered
    ///   `Extended`, would hold a lock the release deleted; through this client, its answer
    ///   read after the lock was marked for release says `NotFound`, and read before it makes
    ///   this answer out of date (see the module's comment).
    /// - The extension was applied after this client started to release the lock (answered
    ///   `NotFound`), and no release of it is on its way: that release failed (or landed after
    ///   it: a second finds nothing), and the lock stood extended for nobody (found by review).
    pub(crate) to_release: bool,
    /// The version the extension wrote, where it was applied after this client started to
    /// release the lock (the second case above): a release of only that version spares a
    /// hand-back written over it since (an idempotent acquisition of the same owner in another
    /// process).
    pub(crate) applied_version: Option<String>,
}

/// The answer `written` of `extension` (whose leases were `leases`, sent at `sent`), read:
/// `None` if it is out of date and the extension is to be sent again (a refusal that found the
/// lease over, read after an earlier extension of this client was applied with a later lease
/// end).
pub(super) fn settle(
    table: &LockTable,
    extension: &Extension<'_>,
    leases: &LeaseToSend,
    written: Result<Record, NotExtended>,
    sent: Instant,
) -> Option<Answered> {
    let handle = extension.handle;
    let mut applied_version = None;
    let (outcome, to_release) = match written {
        Ok(record) => {
            let version = record.version.clone();
            match extended(table, extension, record, sent) {
                Some(outcome) => (outcome, false),
                // This client started the lock's release before the answer came: applied ahead
                // of the release's delete, the extension was answered `Extended`, a lease its
                // caller counted on while the release took the lock away.
                None => {
                    applied_version = Some(version);
                    (ExtendOutcome::NotFound, true)
                }
            }
        }
        // A handle of another owner than the item's finds nothing of its own: whatever this
        // client knows of the lock stays, but for what this extension's send recorded under it.
        Err(NotExtended::AnotherHandle(outcome)) => {
            table.holds.forget_extended_as(handle);
            warn!(
                resource = handle.resource(),
                ?outcome,
                "lock not extended: the handle's owner is not the one it was taken with"
            );
            (outcome, false)
        }
        // A handle of another mode or owner than this client's hold finds nothing of its own:
        // the hold is left as it is (it was stopped and forgotten, its guard saying lost while
        // it stood).
        Err(NotExtended::Lost(outcome)) if table.holds.held_by_another_handle(handle) => {
            warn!(
                resource = handle.resource(),
                ?outcome,
                "lock not extended: the handle's mode or owner is not the one it was taken with"
            );
            (outcome, false)
        }
        Err(NotExtended::Lost(outcome)) => {
            let mut to_release = false;
            if let Err(lost) = outcome.lock_or_lost() {
                match outcome {
                    ExtendOutcome::Expired { expired_at } => {
                        match table.holds.expiry_found(handle, leases, expired_at, &lost) {
                            ExpiryFound::OutOfDate => return None,
                            ExpiryFound::Lost { to_release: found } => to_release = found,
                        }
                    }
                    _ => table.holds.found_lost(handle.lock_id(), &lost),
                }
            }
            table.queues.freed(handle.resource(), handle.lock_id());
            table.holds.freed(handle.lock_id());
            warn!(
                resource = handle.resource(),
                owner = handle.owner(),
                ?outcome,
                "lock not extended"
            );
            (outcome, to_release)
        }
    };
    Some(Answered {
        outcome,
        to_release,
        applied_version,
    })
}

/// The lock as extended to `record`'s lease, remembered by this client's line and logged; `None`
/// if this client has started to release it (see [`Holds::extended`](crate::holds::Holds::extended)).
fn extended(
    table: &LockTable,
    extension: &Extension<'_>,
    record: Record,
    sent: Instant,
) -> Option<ExtendOutcome> {
    let handle = extension.handle;
    let stored_end = record.holder.expires_at;
    let lock = Lock::new(
        handle.clone(),
        record.holder.acquired_at,
        record.holder.expires_at,
        sent + extension.lease,
    )
    .with_fencing_token(record.holder.fencing_token)
    .with_data(record.holder.data);
    let applied = Applied {
        acquired_at: lock.acquired_at(),
        stored_end,
        until: lock.valid_until_instant(),
    };
    if !table.holds.extended(handle, applied) {
        return None;
    }
    table.queues.extended(
        handle.resource(),
        handle.lock_id(),
        lock.valid_until_instant(),
    );
    info!(
        resource = handle.resource(),
        owner = handle.owner(),
        lock_id = %handle.lock_id().short(),
        lease_ms = millis(extension.lease),
        held_ms = millis(span(lock.acquired_at(), extension.now)),
        "lock extended"
    );
    Some(ExtendOutcome::Extended(lock))
}

/// Releases the lock of `handle` that an extension through this client, applied after the client
/// started to release it ([`Answered::applied_version`]), wrote at `version`: only that version (a hand-back of the same owner in
/// another process, written over it since, is that one's: released by its lock id alone, it was
/// deleted under that holder; found by review), from a task of the client
/// ([`LockClient::flush`](crate::LockClient::flush) waits for it), marked as being released at
/// once, after the releases of it on their way (a force release's: sent first, this one made it
/// answer that it removed nothing), tried again when DynamoDB fails it.
pub(crate) fn release_late_extension(table: &Arc<LockTable>, handle: &LockHandle, version: &str) {
    let mut underway = table.holds.release_of_version_starts(handle);
    let (releaser, handle, version) = (Arc::clone(table), handle.clone(), version.to_owned());
    let spawned = table.release_in_background(async move {
        let resent = underway.after_earlier().await;
        let release = Release::of(&handle)
            .only_of_version(Some(&version))
            .resent_if(resent);
        let outcome =
            release::send_retrying(&releaser, &release, DataChange::Keep, Some(&underway)).await;
        underway.answered(&outcome);
        match outcome {
            Ok(outcome) => debug!(resource = handle.resource(), ?outcome, "released a lock extended after its release"),
            Err(err) => warn!(resource = handle.resource(), %err, "could not release a lock extended after its release; it expires with its lease"),
        }
    });
    if !spawned {
        warn!("a lock extended after its release could not be released outside a runtime; it expires with its lease");
    }
}
