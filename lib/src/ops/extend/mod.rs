//! Extend: one conditional UpdateItem of the lock item that moves its lease end (and `TTL`),
//! rotates its `Version`, and may replace or remove its payload.
//!
//! The condition holds only for the same acquisition and owner, while the lease stands, and only
//! to a later lease end than the stored one: two extensions of one lock can be applied in the
//! reverse of the order they were sent, and the earlier, shorter one must not shorten the lease a
//! caller of the later one was told of; and a copy of an applied extension (an SDK retry, a
//! duplicate) finds its own lease end stored and changes nothing. A refusal carries the item
//! (`ALL_OLD`), which tells a lost lock from an SDK retry of our own applied write (the item
//! carries the version we wrote) and from a lease as late or later already stored. A data change
//! that met such a lease is written again with that lease end, conditioned on the version it saw
//! (a bounded number of times), since its data was not applied.

mod answered;

pub(crate) use answered::{release_late_extension, Answered};

use crate::conditional::{answer, update_refused, Answer};
use crate::error::{Error, InvalidInput};
use crate::item::{self, s, Item};
use crate::limits;
use crate::lock::LockHandle;
use crate::lock_table::LockTable;
use crate::mode::Mode;
use crate::outcome::ExtendOutcome;
use crate::record::Record;
use crate::shared;
use crate::takeover::TakeoverRule;
use crate::time::after;
use crate::timestamp;
use aws_sdk_dynamodb::primitives::Blob;
use aws_sdk_dynamodb::types::{AttributeValue, ReturnValue};
use chrono::{DateTime, Utc};
use std::collections::HashMap;
use std::time::Duration;
use tokio::time::Instant;

/// Extend (UpdateItem) moves the lease end…
pub(crate) const EXTEND_SET_LEASE: &str = "SET #expires_at = :expires_at";
/// …and the TTL, if the schema has a TTL attribute…
pub(crate) const EXTEND_SET_TTL: &str = ", #ttl = :ttl";
/// …and rotates the version…
pub(crate) const EXTEND_SET_VERSION: &str = ", #version = :version, #lease_ms = :lease_ms";
/// …and, for a hand-back, the acquisition time (a late release by owner of the locks acquired by
/// a moment, a stopped saga run's, spares the lock handed back to its redriven run since)…
pub(crate) const EXTEND_SET_TAKEN_BACK: &str = ", #acquired_at = :taken_back_at";
/// …and may replace the payload…
pub(crate) const EXTEND_REPLACE_DATA: &str = ", #data = :data";
/// …or remove it…
pub(crate) const EXTEND_REMOVE_DATA: &str = " REMOVE #data";
/// …only for the same acquisition and owner, while the lease still stands, and only to a later
/// lease end than the stored one (timestamps are fixed width, so the comparison is chronological):
/// an extension that arrives after a later one of the same lock must not shorten its lease, and a
/// copy of an applied one (its lease end stored) must not apply again over a later write.
pub(crate) const EXTEND_CONDITION: &str =
    "#lock_id = :lock_id AND #owner = :owner AND #expires_at >= :now AND #expires_at < :expires_at";
/// A hand-back's first write adds to the extension's condition: no later acquisition time
/// stored, so that the acquisition time never goes back. A hand-back landing late (its answer
/// lost, sent again) wrote its earlier time over a later hand-back's (a redriven run's), and a
/// stopped run's late stop event released the lock under the redriven run (found by review);
/// refused, it is written again over the item it saw, at the later of the two times.
pub(crate) const TAKE_BACK_CLAUSE: &str = " AND #acquired_at <= :now";
/// A data change written again at the stored lease end: only over the very item its refusal
/// showed (its version), so that no copy of it, nor of the extension that stored that lease end,
/// applies over the other.
pub(crate) const REWRITE_CONDITION: &str =
    "#lock_id = :lock_id AND #owner = :owner AND #version = :stored_version AND #expires_at >= :now";

/// How many times a data replacement is written again because another extension of the same lock
/// stored a later lease end first.
const MAX_EXTEND_TRIES: u32 = 3;

/// What a lock-item update changes besides the lease.
#[derive(Clone, Copy)]
pub(crate) enum DataChange<'a> {
    Keep,
    Replace(&'a [u8]),
    Remove,
}

impl<'a> DataChange<'a> {
    /// The payload change of a release: none (`None`), or the new payload (`Some(None)` removes
    /// it).
    pub(crate) fn of_release(data: Option<&'a Option<Vec<u8>>>) -> Self {
        match data {
            None => DataChange::Keep,
            Some(None) => DataChange::Remove,
            Some(Some(data)) => DataChange::Replace(data),
        }
    }
}

/// A data change's write again, over the stored item its last try was refused by.
struct Rewrite {
    /// The stored item's version: the condition.
    stored_version: String,
    /// A hand-back's acquisition time: the later of the stored one and the hand-back's.
    taken_back_at: DateTime<Utc>,
    /// The lease written: the longer of the stored one and the extension's, so that a waiter
    /// that takes over a version it saw unchanged for its lease (the observed-lease rule) waits
    /// at least as long as for the version it replaces, whose lease end this write keeps.
    lease: Duration,
}

/// One extension's request: the lock, its new lease, when it was computed.
struct Extension<'a> {
    handle: &'a LockHandle,
    /// The lease asked for: its end is `:expires_at`.
    lease: Duration,
    /// The lease written as `LeaseMs` (at least what the client counts on).
    lease_ms: Duration,
    change: DataChange<'a>,
    now: DateTime<Utc>,
    /// A hand-back's: a new version is written even where a later lease end is stored, and the
    /// acquisition time is the extension's.
    hand_back: bool,
}

/// What the item an extension's condition failed on (`ALL_OLD`) says.
#[derive(Debug, PartialEq)]
pub(crate) enum Refusal {
    /// The item carries the version this request wrote: an earlier attempt of it (an SDK retry)
    /// was applied.
    OwnWrite(Record),
    /// Our own live lock, with a lease end as late as this request's or later: only "to a later
    /// lease end" failed.
    LaterLeaseStored(Record),
    /// The lock is lost, and how.
    Lost(ExtendOutcome),
    /// The item holds the lock under another owner: the handle is not the one the lock was taken
    /// with (a wrong owner), and says nothing of the lock's hold; its caller is answered so.
    AnotherHandle(ExtendOutcome),
}

/// Why an extension was not applied, as [`write`] settles it.
#[derive(Debug)]
pub(crate) enum NotExtended {
    /// The lock is lost, and how.
    Lost(ExtendOutcome),
    /// The handle is not the one the lock was taken with ([`Refusal::AnotherHandle`]).
    AnotherHandle(ExtendOutcome),
}

/// The UpdateItem of extend: a new lease, a new version, perhaps a new payload.
pub(crate) async fn extend(
    table: &LockTable,
    handle: &LockHandle,
    lease: Duration,
    change: DataChange<'_>,
) -> Result<Answered, Error> {
    extend_writing(table, handle, lease, change, false).await
}

/// The extension of a lock handed back to an idempotent acquisition of its owner: it always
/// writes a new version, so that a dropped acquisition's clean-up (which releases only the
/// version its write stored) spares the lock, in whichever process (see
/// [`in_flight`](crate::ops::in_flight)).
pub(crate) async fn hand_back(
    table: &LockTable,
    handle: &LockHandle,
    lease: Duration,
) -> Result<Answered, Error> {
    extend_writing(table, handle, lease, DataChange::Keep, true).await
}

/// [`extend`], or a hand-back's ([`hand_back`]) if `hand_back`.
async fn extend_writing(
    table: &LockTable,
    handle: &LockHandle,
    lease: Duration,
    change: DataChange<'_>,
    hand_back: bool,
) -> Result<Answered, Error> {
    table.check_handle(handle)?;
    let lease = limits::lease(lease)?;
    if handle.mode() != Mode::Exclusive && !matches!(change, DataChange::Keep) {
        return Err(InvalidInput::NotForMode {
            field: "data",
            mode: handle.mode(),
        }
        .into());
    }
    // Sent again where its refusal (`Expired`) was read after an earlier extension of this
    // client was applied with a later lease end: out of date (see [`answered::settle`]).
    for _ in 0..MAX_EXTEND_TRIES {
        let sent = Instant::now();
        let now = table.now();
        let leases = table.holds.lease_to_send(handle, now, lease);
        let extension = Extension {
            handle,
            lease: leases.asked,
            lease_ms: leases.written,
            change,
            now,
            hand_back,
        };
        let written = write(table, &extension).await?;
        if let Some(answered) = answered::settle(table, &extension, &leases, written, sent) {
            return Ok(answered);
        }
    }
    Err(Error::UnexpectedResponse {
        operation: "UpdateItem",
        detail: "every try of the extension found the lease over, each answer read after an earlier extension of the lock was applied",
    })
}

/// Writes the extension until its outcome is settled: `Ok` with the stored item, or `Err` with
/// why it was not applied.
async fn write(
    table: &LockTable,
    extension: &Extension<'_>,
) -> Result<Result<Record, NotExtended>, Error> {
    let mut expires_at = after(extension.now, extension.lease, "lease")?;
    let mut rewrite = None;
    let mut tries = 0;
    loop {
        tries += 1;
        let version = uuid::Uuid::new_v4().to_string();
        let written = match extension.handle.mode() {
            Mode::Exclusive => {
                // A rewrite lands whenever the version it names still stands: unanswered (this
                // future dropped, or failed), it may land after an extension found the lease
                // over, and write a new version (see `Answered::to_release`).
                let lock_id = extension.handle.lock_id();
                if rewrite.is_some() {
                    table.holds.rewrite_sent(lock_id, expires_at);
                }
                let written =
                    update_item(table, extension, expires_at, &version, rewrite.as_ref()).await?;
                if rewrite.is_some() {
                    table.holds.rewrite_answered(lock_id);
                }
                written
            }
            Mode::Shared | Mode::IntentShared | Mode::IntentExclusive => {
                let Extension {
                    handle,
                    lease_ms,
                    now,
                    ..
                } = *extension;
                shared::hold::extend_entry(table, handle, lease_ms, now, expires_at, &version)
                    .await?
            }
        };
        let failed_on = match written {
            Ok(record) => return Ok(Ok(record)),
            Err(failed_on) => failed_on,
        };
        let handle = extension.handle;
        match read_refused(handle, &version, expires_at, failed_on, extension.now) {
            Refusal::OwnWrite(record) => return Ok(Ok(record)),
            // The stored lease, as long or longer, stands; the lock is returned with it, and with a
            // monotonic lease counted from this request's send, which cannot outlast the stored
            // one. A data change was not applied: it is written again with the stored lease end,
            // over that very item. So is an exclusive extension under the observed-lease rule,
            // whose waiters count a lease from when they first saw a version: only a new version
            // restarts it. A lease end stored later than this request's (this client's clock
            // stepped back, or a reclaim by a client whose clock is behind) left the version as
            // it was, and a waiter took over while the caller was told it held for a lease more.
            Refusal::LaterLeaseStored(record) => {
                let version_restarts_the_lease = extension.hand_back
                    || table.takeover == TakeoverRule::ObservedLease
                        && extension.handle.mode() == Mode::Exclusive;
                if matches!(extension.change, DataChange::Keep) && !version_restarts_the_lease {
                    return Ok(Ok(record));
                }
                if tries >= MAX_EXTEND_TRIES {
                    return Err(Error::UnexpectedResponse {
                        operation: "UpdateItem",
                        detail: "concurrent extensions of the lock kept moving its lease end; the data (or the version) was not written",
                    });
                }
                // The later end: a hand-back refused by a later acquisition time stored keeps
                // the lease it asked for (its caller counts on it from its send).
                expires_at = expires_at.max(record.holder.expires_at);
                rewrite = Some(Rewrite {
                    lease: extension.lease_ms.max(record.lease),
                    taken_back_at: extension.now.max(record.holder.acquired_at),
                    stored_version: record.version,
                });
            }
            Refusal::Lost(outcome) => return Ok(Err(NotExtended::Lost(outcome))),
            Refusal::AnotherHandle(outcome) => return Ok(Err(NotExtended::AnotherHandle(outcome))),
        }
    }
}

/// One UpdateItem of extend, to `expires_at` (a `rewrite` of a data change, if given):
/// `Ok(Ok(record))` as written, `Ok(Err(record))` with the item its condition failed on
/// (`ALL_OLD`), if any.
async fn update_item(
    table: &LockTable,
    extension: &Extension<'_>,
    expires_at: DateTime<Utc>,
    version: &str,
    rewrite: Option<&Rewrite>,
) -> Result<Result<Record, Option<Record>>, Error> {
    let resource = extension.handle.resource();
    let update = update_expression(
        extension.change,
        table.schema.ttl_attribute_name().is_some(),
        extension.hand_back,
    );
    let condition = match (rewrite, extension.hand_back) {
        (Some(_), _) => REWRITE_CONDITION.to_owned(),
        (None, true) => format!("{EXTEND_CONDITION}{TAKE_BACK_CLAUSE}"),
        (None, false) => EXTEND_CONDITION.to_owned(),
    };
    let values = values(table, extension, expires_at, version, rewrite)?;
    let request = table
        .update_item(resource, &update, &condition)
        .set_expression_attribute_values(Some(values))
        .return_values(ReturnValue::AllNew)
        .send();
    let answer = answer("UpdateItem", request.await, update_refused)?;
    match answer {
        Answer::Applied(out) => Ok(Ok(table.record(resource, out.attributes())?.ok_or(
            Error::UnexpectedResponse {
                operation: "UpdateItem",
                detail: "no attributes despite ReturnValues = ALL_NEW",
            },
        )?)),
        Answer::Refused(item) => {
            // A handle whose lock id holds the lock in a set mode: refused by its mode, not
            // answered `NotFound` while the hold stands (found by review). What its send recorded
            // under it is forgotten, as for a handle of another owner.
            let handle = extension.handle;
            if let Some(item) = &item {
                let checked =
                    shared::holders::check_mode(resource, item, handle.lock_id(), handle.mode());
                if checked.is_err() {
                    table.holds.forget_extended_as(handle);
                }
                checked?;
            }
            Ok(Err(table.record(resource, item.as_ref())?))
        }
    }
}

/// The update expression for a data change, with or without a TTL attribute to move, of a
/// hand-back (`taken_back`) or not.
fn update_expression(change: DataChange<'_>, ttl: bool, taken_back: bool) -> String {
    let ttl = if ttl { EXTEND_SET_TTL } else { "" };
    let taken_back = if taken_back {
        EXTEND_SET_TAKEN_BACK
    } else {
        ""
    };
    let data = match change {
        DataChange::Keep => "",
        DataChange::Replace(_) => EXTEND_REPLACE_DATA,
        DataChange::Remove => EXTEND_REMOVE_DATA,
    };
    format!("{EXTEND_SET_LEASE}{ttl}{EXTEND_SET_VERSION}{taken_back}{data}")
}

/// The values of the update and the condition.
fn values(
    table: &LockTable,
    extension: &Extension<'_>,
    expires_at: DateTime<Utc>,
    version: &str,
    rewrite: Option<&Rewrite>,
) -> Result<Item, Error> {
    let handle = extension.handle;
    let lease = rewrite.map_or(extension.lease_ms, |rewrite| rewrite.lease);
    let mut values = HashMap::from([
        (":expires_at", s(timestamp::format(expires_at))),
        (":version", s(version)),
        (":lease_ms", item::millis(lease)),
        (":lock_id", s(handle.lock_id().to_string())),
        (":owner", s(handle.owner())),
        (":now", s(timestamp::format(extension.now))),
    ]);
    if let Some((_, epoch_seconds)) = table.ttl(expires_at)? {
        values.insert(":ttl", AttributeValue::N(epoch_seconds.to_string()));
    }
    if let DataChange::Replace(data) = extension.change {
        values.insert(":data", AttributeValue::B(Blob::new(data)));
    }
    if let Some(rewrite) = rewrite {
        values.insert(":stored_version", s(&rewrite.stored_version));
    }
    if extension.hand_back {
        let taken_back_at = rewrite.map_or(extension.now, |rewrite| rewrite.taken_back_at);
        values.insert(":taken_back_at", s(timestamp::format(taken_back_at)));
    }
    Ok(values
        .into_iter()
        .map(|(name, value)| (name.to_owned(), value))
        .collect())
}

/// What an extension to `expires_at` that wrote `version` learns from the item its condition
/// failed on (`None`: there was none), its clock reading `now`.
pub(crate) fn read_refused(
    handle: &LockHandle,
    version: &str,
    expires_at: DateTime<Utc>,
    record: Option<Record>,
    now: DateTime<Utc>,
) -> Refusal {
    match record {
        // An SDK retry failed on the item its own earlier attempt wrote.
        Some(record) if record.version == version => Refusal::OwnWrite(record),
        // Only "to a later lease end" failed: an extension of this very lock to as late a lease
        // end or later was stored first (sent later but applied earlier, or this one is a late
        // retry); or, for a data change written again, another write moved the version; or, for
        // a hand-back, only "no later acquisition time": another hand-back's, later, is stored.
        Some(record)
            if record.lock_id == handle.lock_id()
                && record.holder.owner == handle.owner()
                && (record.holder.expires_at >= expires_at
                    || record.holder.expires_at >= now && record.holder.acquired_at > now) =>
        {
            Refusal::LaterLeaseStored(record)
        }
        // The lock id with another owner: the handle's owner is wrong (lock ids are unique). Taken
        // for a loss, it marked the lock lost in the client (a warm Lambda instance, say), and
        // the real owner's idempotent acquisition there was refused its hand-back, its first
        // extension there left untracked (found by review).
        Some(record)
            if record.lock_id == handle.lock_id() && record.holder.owner != handle.owner() =>
        {
            Refusal::AnotherHandle(lost_outcome(handle, Some(record), now))
        }
        record => Refusal::Lost(lost_outcome(handle, record, now)),
    }
}

/// Why an extension's condition failed, from the item it failed on.
fn lost_outcome(handle: &LockHandle, record: Option<Record>, now: DateTime<Utc>) -> ExtendOutcome {
    match record {
        None => ExtendOutcome::NotFound,
        Some(record)
            if record.lock_id == handle.lock_id() && record.holder.owner == handle.owner() =>
        {
            ExtendOutcome::Expired {
                expired_at: record.holder.expires_at,
            }
        }
        Some(record) if record.holder.is_live_at(now) => ExtendOutcome::NotOwner {
            holder: record.holder,
        },
        Some(_) => ExtendOutcome::NotFound,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lock::LockId;
    use crate::record::samples::{self, now};
    use crate::schema::tests::assert_every_placeholder_named;
    use chrono::TimeDelta;

    fn handle() -> LockHandle {
        LockHandle::new("orders/42", "me", LockId::generate())
    }

    /// The item as stored: `version`, expiring `expires_in_secs` after `now()`.
    fn record(lock_id: LockId, owner: &str, version: &str, expires_in_secs: i64) -> Record {
        let mut record = samples::record(lock_id, owner, TimeDelta::seconds(expires_in_secs));
        record.version = version.into();
        record
    }

    /// This request's new lease end.
    fn wanted() -> DateTime<Utc> {
        now() + TimeDelta::seconds(30)
    }

    #[test]
    fn our_own_written_version_is_an_extension() {
        let h = handle();
        let ours = record(h.lock_id(), "me", "v2", 30);
        let refusal = read_refused(&h, "v2", wanted(), Some(ours.clone()), now());
        assert_eq!(refusal, Refusal::OwnWrite(ours));
    }

    #[test]
    fn a_later_stored_lease_of_our_live_lock_stands() {
        let h = handle();
        let later = record(h.lock_id(), "me", "v3", 40);
        let refusal = read_refused(&h, "v2", wanted(), Some(later.clone()), now());
        assert_eq!(refusal, Refusal::LaterLeaseStored(later));
    }

    #[test]
    fn the_same_lease_end_stored_by_another_write_stands() {
        let h = handle();
        let same = record(h.lock_id(), "me", "v3", 30);
        let refusal = read_refused(&h, "v2", wanted(), Some(same.clone()), now());
        assert_eq!(refusal, Refusal::LaterLeaseStored(same));
    }

    #[test]
    fn a_later_hand_back_of_our_live_lock_stands() {
        let h = handle();
        // A shorter lease than asked, taken back after this request's clock reading.
        let mut taken_back = record(h.lock_id(), "me", "v3", 20);
        taken_back.holder.acquired_at = now() + TimeDelta::seconds(1);
        let refusal = read_refused(&h, "v2", wanted(), Some(taken_back.clone()), now());
        assert_eq!(refusal, Refusal::LaterLeaseStored(taken_back));
    }

    #[test]
    fn no_item_is_not_found() {
        let refusal = read_refused(&handle(), "v2", wanted(), None, now());
        assert_eq!(refusal, Refusal::Lost(ExtendOutcome::NotFound));
    }

    #[test]
    fn our_acquisition_whose_lease_ended_is_expired() {
        let h = handle();
        let ended = record(h.lock_id(), "me", "v1", -1);
        let refusal = read_refused(&h, "v2", wanted(), Some(ended.clone()), now());
        assert_eq!(
            refusal,
            Refusal::Lost(ExtendOutcome::Expired {
                expired_at: ended.holder.expires_at
            })
        );
    }

    #[test]
    fn a_live_item_of_another_acquisition_or_owner_is_not_owner() {
        let h = handle();
        for other in [
            record(LockId::generate(), "me", "v9", 5),
            record(LockId::generate(), "them", "v9", 5),
        ] {
            let refusal = read_refused(&h, "v2", wanted(), Some(other.clone()), now());
            assert_eq!(
                refusal,
                Refusal::Lost(ExtendOutcome::NotOwner {
                    holder: other.holder
                })
            );
        }
        // The same acquisition under another owner: the handle's owner is wrong.
        let theirs = record(h.lock_id(), "them", "v9", 5);
        let refusal = read_refused(&h, "v2", wanted(), Some(theirs.clone()), now());
        assert_eq!(
            refusal,
            Refusal::AnotherHandle(ExtendOutcome::NotOwner {
                holder: theirs.holder
            })
        );
    }

    #[test]
    fn an_expired_item_of_another_acquisition_is_not_found() {
        let expired = record(LockId::generate(), "them", "v9", -1);
        let refusal = read_refused(&handle(), "v2", wanted(), Some(expired), now());
        assert_eq!(refusal, Refusal::Lost(ExtendOutcome::NotFound));
    }

    #[test]
    fn the_default_schemas_update_is_unchanged() {
        assert_eq!(
            update_expression(DataChange::Keep, true, false),
            "SET #expires_at = :expires_at, #ttl = :ttl, #version = :version, #lease_ms = :lease_ms"
        );
        assert_eq!(
            update_expression(DataChange::Remove, false, false),
            "SET #expires_at = :expires_at, #version = :version, #lease_ms = :lease_ms REMOVE #data"
        );
        assert_eq!(
            update_expression(DataChange::Keep, false, true),
            "SET #expires_at = :expires_at, #version = :version, #lease_ms = :lease_ms, #acquired_at = :taken_back_at"
        );
    }

    #[test]
    fn every_placeholder_is_named() {
        for expr in [
            EXTEND_SET_LEASE,
            EXTEND_SET_TTL,
            EXTEND_SET_VERSION,
            EXTEND_SET_TAKEN_BACK,
            EXTEND_REPLACE_DATA,
            EXTEND_REMOVE_DATA,
            EXTEND_CONDITION,
            TAKE_BACK_CLAUSE,
            REWRITE_CONDITION,
        ] {
            assert_every_placeholder_named(expr);
        }
    }
}
