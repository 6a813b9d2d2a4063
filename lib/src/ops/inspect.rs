//! Looking at a lock without holding it: status (a strongly consistent GetItem) and force release
//! (a DeleteItem of whatever lock item is there, which returns what it removed).
//!
//! On a client that keeps items, force release clears the holder with an UpdateItem instead of
//! deleting the item ([`kept`](super::kept)); a kept item reads as free.
//!
//! Both judge the item by its `ExpiresAt` and this client's clock: status is information, not a
//! takeover decision, and force release is an administrative override that deletes any lock item
//! (an expired or malformed one too) and only reports whose live lock it removed. It is
//! conditional on one thing, that the item is a lock item (it has a `LockID`), so that an
//! application's item sharing the table is reported, never deleted. If the SDK retried the
//! DeleteItem after a lost answer, the retry finds nothing, and the removed holder is unknown:
//! force release then says `None`.

use super::extend::DataChange;
use super::kept;
use crate::conditional::{answer, update_refused, Answer};
use crate::error::Error;
use crate::fair::line;
use crate::item::{Item, LOCK_ID};
use crate::lock::Holder;
use crate::lock_table::LockTable;
use crate::mode::Mode;
use crate::outcome::LockStatus;
use crate::record::Record;
use crate::shared::holders;
use crate::time::span;
use aws_sdk_dynamodb::operation::delete_item::DeleteItemError;
use aws_sdk_dynamodb::types::ReturnValue;
use chrono::{DateTime, Utc};
use tracing::warn;

/// Force release deletes any lock item, and only a lock item.
pub(crate) const FORCE_RELEASE_CONDITION: &str = "attribute_exists(#lock_id)";

/// The lock on `resource`, read without taking it.
pub(crate) async fn status(table: &LockTable, resource: &str) -> Result<LockStatus, Error> {
    table.check_resource(resource)?;
    let item = read(table, resource).await?;
    item_status(table, resource, item.as_ref(), table.now())
}

/// A strongly consistent read of `resource`'s lock item (one GetItem).
pub(crate) async fn read(table: &LockTable, resource: &str) -> Result<Option<Item>, Error> {
    let out = table
        .dynamodb
        .get_item()
        .table_name(&table.name)
        .set_key(Some(table.key(resource)))
        .consistent_read(true)
        .send()
        .await
        .map_err(|e| Error::backend("GetItem", e))?;
    Ok(out.item)
}

/// The status at `now` of the lock whose item (or none) is `item`.
pub(crate) fn item_status(
    table: &LockTable,
    resource: &str,
    item: Option<&Item>,
    now: DateTime<Utc>,
) -> Result<LockStatus, Error> {
    if let Some(item) = item.filter(|item| item.contains_key(LOCK_ID)) {
        let shared = holders::decode_all(resource, item)?;
        let writer = holders::writer_waiting(resource, item)?;
        if let Some(status) = shared_status_of(shared, writer, now) {
            return Ok(status);
        }
    }
    let record = table.record(resource, item)?;
    let mut status = status_of(record, now);
    if let (LockStatus::Held { queue, .. }, Some(item)) = (&mut status, item) {
        *queue = line::decode(resource, item)?
            .into_iter()
            .map(|entry| entry.waiter)
            .collect();
    }
    Ok(status)
}

/// Deletes the lock on `resource` whoever holds it; the holder whose live lock it removed.
pub(crate) async fn force_release(
    table: &LockTable,
    resource: &str,
) -> Result<Option<Holder>, Error> {
    table.check_resource(resource)?;
    // This client's own guards on the resource say "held" no more, from before the request.
    table.holds.stop_on(resource, None, None);
    let answer = if table.delete_on_release {
        let sent = table
            .delete_item(resource, FORCE_RELEASE_CONDITION)
            .return_values(ReturnValue::AllOld)
            .send();
        answer("DeleteItem", sent.await, |err| match err {
            DeleteItemError::ConditionalCheckFailedException(failed) => {
                Some(failed.item().cloned())
            }
            _ => None,
        })?
        .map(|out| out.attributes)
    } else {
        // The item is kept, cleared of its holder (a kept item already is: cleared again).
        let ttl = table.schema.ttl_attribute_name().is_some();
        let (update, values) = kept::release_update(ttl, DataChange::Keep);
        let sent = table
            .update_item(resource, &update, FORCE_RELEASE_CONDITION)
            .set_expression_attribute_values(Some(values))
            .return_values(ReturnValue::AllOld)
            .send();
        answer("UpdateItem", sent.await, update_refused)?.map(|out| out.attributes)
    };
    let deleted = match answer {
        Answer::Applied(attributes) => attributes,
        // No item at all: nothing to release.
        Answer::Refused(None) => None,
        Answer::Refused(Some(item)) => return Err(table.not_a_lock_item(&item)),
    };
    table.queues.freed(resource, None);
    table.holds.freed_on(resource, None);
    let now = table.now();
    let removed = match table.record(resource, deleted.as_ref()) {
        Ok(record) => removed_holder(record, now),
        Err(malformed) => {
            warn!(resource, %malformed, "force release deleted a malformed lock item");
            None
        }
    };
    warn!(
        resource,
        removed_owner = removed.as_ref().map(|h| h.owner.as_str()),
        "lock force-released"
    );
    Ok(removed)
}

/// The status of a lock whose item is `record` (`None`: no item) at `now`.
pub(crate) fn status_of(record: Option<Record>, now: DateTime<Utc>) -> LockStatus {
    match record {
        Some(record) if record.holder.is_live_at(now) => LockStatus::Held {
            remaining: span(now, record.holder.expires_at),
            holder: record.holder,
            queue: Vec::new(),
        },
        _ => LockStatus::Free,
    }
}

/// The status of a lock item with live holders kept in sets (`held`, read at `now`): shared
/// ones and intention ones; `None` if it has none, and the exclusive rules apply.
pub(crate) fn shared_status_of(
    held: Vec<(Mode, Record)>,
    writer: Option<Holder>,
    now: DateTime<Utc>,
) -> Option<LockStatus> {
    let live = |shared: bool| {
        let mut holders: Vec<Holder> = held
            .iter()
            .filter(|(mode, _)| (*mode == Mode::Shared) == shared)
            .map(|(_, record)| record.holder.clone())
            .filter(|holder| holder.is_live_at(now))
            .collect();
        holders.sort_by_key(|holder| holder.expires_at);
        holders
    };
    let (holders, intents) = (live(true), live(false));
    if holders.is_empty() && intents.is_empty() {
        return None;
    }
    Some(LockStatus::Shared {
        holders,
        intents,
        writer_waiting: writer.filter(|writer| writer.is_live_at(now)),
    })
}

/// The holder whose live lock a force release removed, from the deleted item (`ALL_OLD`).
pub(crate) fn removed_holder(record: Option<Record>, now: DateTime<Utc>) -> Option<Holder> {
    record
        .filter(|record| record.holder.is_live_at(now))
        .map(|record| record.holder)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lock::LockId;
    use crate::record::samples::{self, now};
    use chrono::TimeDelta;
    use std::time::Duration;

    fn record(expires_in_millis: i64) -> Record {
        samples::record(
            LockId::generate(),
            "them",
            TimeDelta::milliseconds(expires_in_millis),
        )
    }

    #[test]
    fn no_item_or_an_expired_one_is_free() {
        assert_eq!(status_of(None, now()), LockStatus::Free);
        assert_eq!(status_of(Some(record(-1)), now()), LockStatus::Free);
    }

    #[test]
    fn a_live_item_is_held_with_the_time_left() {
        let live = record(1500);
        assert_eq!(
            status_of(Some(live.clone()), now()),
            LockStatus::Held {
                holder: live.holder,
                remaining: Duration::from_millis(1500),
                queue: Vec::new(),
            }
        );
        // Live up to and including its `ExpiresAt`.
        assert!(matches!(
            status_of(Some(record(0)), now()),
            LockStatus::Held { .. }
        ));
    }

    #[test]
    fn force_release_names_only_a_live_holder() {
        let live = record(5000);
        assert_eq!(removed_holder(Some(live.clone()), now()), Some(live.holder));
        assert_eq!(removed_holder(Some(record(-1)), now()), None);
        assert_eq!(removed_holder(None, now()), None);
    }
}
