//! One shared hold's extension and release: the exclusive holder's requests, scoped to the
//! holder's own entry of the lock item (`Shared:<LockID>`).
//!
//! The extension is the exclusive extension's UpdateItem with every holder attribute read and
//! written inside the entry, so the same rules read its refusal
//! ([`extend::read_refused`](crate::ops::extend::read_refused)): an entry gone is `NotFound`, an
//! entry whose lease ended is `Expired`, and a stored later lease end stands. The release
//! removes the entry and the id from the set in one UpdateItem; when that leaves the item with
//! no holder at all, a client that deletes on release deletes it with a second, conditional
//! DeleteItem, which changes nothing if anyone joined meanwhile.

use crate::conditional::{answer, update_refused, Answer, Transmissions};
use crate::error::{Error, InvalidInput};
use crate::item::{s, Item, INTENT_EXCLUSIVE, INTENT_SHARED, OWNER, SHARED};
use crate::lock::LockHandle;
use crate::lock_table::LockTable;
use crate::outcome::ReleaseOutcome;
use crate::record::Record;
use crate::shared::holders;
use crate::timestamp;
use aws_sdk_dynamodb::operation::delete_item::DeleteItemError;
use aws_sdk_dynamodb::types::ReturnValue;
use chrono::{DateTime, Utc};
use std::time::Duration;
use tracing::{debug, info, warn};

/// The exclusive extension's update and condition, inside the entry.
const EXTEND_UPDATE: &str = "SET #entry.#expires_at = :expires_at, #entry.#version = :version, #entry.#lease_ms = :lease_ms";
/// Both requests also check that the hold is in the set of the mode the handle says: a handle
/// of another mode removed the entry and left its id in the other set, an id without an entry,
/// which no request could read again (found by review; `a_handle_of_another_mode_is_refused`).
const EXTEND_CONDITION: &str = "contains(#set, :lock_id) AND #entry.#lock_id = :lock_id AND #entry.#owner = :owner AND #entry.#expires_at >= :now AND #entry.#expires_at < :expires_at";
/// The release: the entry and its id (in the set of the hold's mode) go together.
const RELEASE_UPDATE: &str = "DELETE #set :ids REMOVE #entry";
const RELEASE_CONDITION: &str =
    "contains(#set, :lock_id) AND #entry.#lock_id = :lock_id AND #entry.#owner = :owner";
/// The deletion of an item the release left without any holder: a lock item, with no shared
/// holder, no exclusive holder, no waiting writer and no line (fair waiters, whose places the
/// deletion lost).
const DELETE_EMPTY_CONDITION: &str = "attribute_exists(#lock_id) AND attribute_not_exists(#shared) AND attribute_not_exists(#intent_shared) AND attribute_not_exists(#intent_exclusive) AND attribute_not_exists(#owner) AND attribute_not_exists(#writer_waiting) AND attribute_not_exists(#queue)";

/// One UpdateItem extending the shared hold `handle` to `expires_at` with `version`:
/// `Ok(Ok(record))` as written, `Ok(Err(record))` with its entry in the refusing item, if any.
pub(crate) async fn extend_entry(
    table: &LockTable,
    handle: &LockHandle,
    lease: Duration,
    now: DateTime<Utc>,
    expires_at: DateTime<Utc>,
    version: &str,
) -> Result<Result<Record, Option<Record>>, Error> {
    let resource = handle.resource();
    let values = Item::from([
        (":expires_at".to_owned(), s(timestamp::format(expires_at))),
        (":version".to_owned(), s(version)),
        (":lease_ms".to_owned(), crate::item::millis(lease)),
        (":lock_id".to_owned(), s(handle.lock_id().to_string())),
        (":owner".to_owned(), s(handle.owner())),
        (":now".to_owned(), s(timestamp::format(now))),
    ]);
    let (_, set) = holders::set_of(handle.mode());
    let sent = table
        .update_item(resource, EXTEND_UPDATE, EXTEND_CONDITION)
        .expression_attribute_names("#entry", holders::attribute(handle.lock_id()))
        .expression_attribute_names("#set", set)
        .set_expression_attribute_values(Some(values))
        .return_values(ReturnValue::AllNew)
        .send();
    let answer = answer("UpdateItem", sent.await, update_refused)?;
    match answer {
        Answer::Applied(out) => {
            own_entry(table, handle, out.attributes())?
                .map(Ok)
                .ok_or(Error::UnexpectedResponse {
                    operation: "UpdateItem",
                    detail: "no entry in the item despite ReturnValues = ALL_NEW",
                })
        }
        Answer::Refused(item) => Ok(Err(own_entry(table, handle, item.as_ref())?)),
    }
}

/// The entry of `handle` in `item`, if both are there; an error if the hold is there in
/// another mode than the handle's.
fn own_entry(
    table: &LockTable,
    handle: &LockHandle,
    item: Option<&Item>,
) -> Result<Option<Record>, Error> {
    let Some(item) = item else {
        return Ok(None);
    };
    if !item.contains_key(crate::item::LOCK_ID) {
        return Err(table.not_a_lock_item(item));
    }
    let held = holders::decode_all(handle.resource(), item)?
        .into_iter()
        .find(|(_, r)| r.lock_id == handle.lock_id());
    match held {
        Some((mode, _)) if mode != handle.mode() => Err(InvalidInput::ModeMismatch {
            given: handle.mode(),
            held: mode,
        }
        .into()),
        held => Ok(held.map(|(_, record)| record)),
    }
}

/// Releases the shared hold `handle`: one UpdateItem, and one DeleteItem of an item left empty
/// on a client that deletes on release. `mismatched`: this client holds the lock in another mode
/// than the handle's, and keeps remembering it (the request changes nothing of it). `resent`: an
/// earlier send of this release failed without an answer, and may have been applied.
pub(crate) async fn release(
    table: &LockTable,
    handle: &LockHandle,
    mismatched: bool,
    resent: bool,
) -> Result<ReleaseOutcome, Error> {
    let resource = handle.resource();
    let values = Item::from([
        (":ids".to_owned(), holders::id_set([handle.lock_id()])),
        (":lock_id".to_owned(), s(handle.lock_id().to_string())),
        (":owner".to_owned(), s(handle.owner())),
    ]);
    let (_, set) = holders::set_of(handle.mode());
    let transmissions = Transmissions::default();
    let sent = table
        .update_item(resource, RELEASE_UPDATE, RELEASE_CONDITION)
        .expression_attribute_names("#entry", holders::attribute(handle.lock_id()))
        .expression_attribute_names("#set", set)
        .set_expression_attribute_values(Some(values))
        .return_values(ReturnValue::AllNew)
        .customize()
        .interceptor(transmissions.clone())
        .send();
    let answer = answer("UpdateItem", sent.await, update_refused)?;
    if !mismatched {
        table.queues.wake(resource);
        table.holds.freed(handle.lock_id());
    }
    match answer {
        Answer::Applied(out) => {
            info!(resource, owner = handle.owner(), lock_id = %handle.lock_id().short(), "shared lock released");
            delete_if_empty(table, resource, out.attributes()).await;
            Ok(ReleaseOutcome::Released)
        }
        Answer::Refused(item) => {
            // Resent (by the SDK, or by the client after the SDK gave up), and the item holds
            // nothing: this release's own earlier attempt emptied it, and its answer was lost.
            // Nothing else would ever delete it (it has no lease). So too after a release of this
            // hold through the client that may have emptied it (sent, then failed: the caller's
            // release again, or its guard's drop, is a first send, and left the item; found by
            // review). (Not on a refusal of a first send alone: an item kept by a client that
            // keeps items, or made by `create_lock_item`, holds nothing either.)
            let retried = transmissions.retried() || resent;
            if retried || table.holds.may_have_been_released(handle.lock_id()) {
                delete_if_empty(table, resource, item.as_ref()).await;
            }
            // The entry is keyed by this hold's id: a refusal finds it gone, or (a handle with
            // another owner) someone else's.
            let outcome = match own_entry(table, handle, item.as_ref())? {
                Some(entry) if entry.holder.owner != handle.owner() => ReleaseOutcome::NotOwner {
                    holder: entry.holder,
                },
                _ if retried => ReleaseOutcome::Unconfirmed,
                _ => ReleaseOutcome::NotFound,
            };
            info!(
                resource,
                owner = handle.owner(),
                ?outcome,
                "shared lock not released"
            );
            Ok(outcome)
        }
    }
}

/// On a client that deletes items, deletes `item`, `resource`'s item as a release wrote or found
/// it, if it holds nothing. The hold is released whatever becomes of the deletion (an item left
/// with no holder takes nothing from anyone): its failure answered the release with an error, and
/// the release was sent again, to find its entry gone.
async fn delete_if_empty(table: &LockTable, resource: &str, item: Option<&Item>) {
    let empty = item.is_some_and(|item| {
        !item.contains_key(OWNER)
            && [SHARED, INTENT_SHARED, INTENT_EXCLUSIVE]
                .iter()
                .all(|set| !item.contains_key(*set))
    });
    if empty && table.delete_on_release {
        if let Err(err) = delete_empty(table, resource).await {
            warn!(resource, %err, "a shared lock was released, and its emptied item could not be deleted; it stays, holding nothing");
        }
    }
}

/// Deletes `resource`'s item if it has no holder, no waiting writer and no line; a refusal means
/// someone came meanwhile, and the item stays.
async fn delete_empty(table: &LockTable, resource: &str) -> Result<(), Error> {
    let sent = table
        .dynamodb
        .delete_item()
        .table_name(&table.name)
        .set_key(Some(table.key(resource)))
        .condition_expression(DELETE_EMPTY_CONDITION)
        .set_expression_attribute_names(Some(table.names_for(&[DELETE_EMPTY_CONDITION])))
        .send();
    let answer = answer("DeleteItem", sent.await, |err| {
        matches!(err, DeleteItemError::ConditionalCheckFailedException(_)).then_some(())
    })?;
    if let Answer::Refused(()) = answer {
        debug!(
            resource,
            "the emptied lock item was taken meanwhile; it stays"
        );
    }
    Ok(())
}
