//! Looking at a lock without holding it: status (a strongly consistent GetItem) and force release
//! (that read, then a DeleteItem of exactly the lock item it read, which returns what it removed).
//!
//! On a client that keeps items, force release clears the holder with an UpdateItem instead of
//! deleting the item ([`kept`](super::kept)); a kept item reads as free.
//!
//! Both judge the item by its `ExpiresAt` and this client's clock: status is information, not a
//! takeover decision, and force release is an administrative override that removes any lock item
//! (an expired or malformed one too) and only reports whose live lock it removed. It removes the
//! holders it read and no others: its condition is the item's `LockID` and `Version` (every
//! exclusive acquisition writes a new `LockID`, every extension a new `Version`) and its sets of
//! shared and intention holders as read. A copy of the request that arrives late, or an SDK retry
//! after a lost answer, therefore finds nothing or a later holder's item, and leaves it alone:
//! deleting "whatever is there" blindly, a retry would delete the lock of whoever acquired between
//! the first attempt and the retry. An item of another acquisition by the time of the write (the
//! lock read was released, and someone acquired) is spared: nothing was removed. An item of the
//! same acquisition that changed (extended, shared holders come or gone) is written again as the
//! refusal found it (`ALL_OLD`), up to [`MAX_FORCE_RELEASE_TRIES`] writes. An application's item
//! sharing the table (no `LockID`) is reported, never deleted.

use super::extend::DataChange;
use super::in_flight;
use super::kept;
use crate::conditional::{answer, delete_refused, update_refused, Answer, Transmissions};
use crate::error::Error;
use crate::fair::line;
use crate::item::{Item, INTENT_EXCLUSIVE, INTENT_SHARED, LOCK_ID, OWNER, SHARED, VERSION};
use crate::lock::{Holder, LockHandle, LockId};
use crate::lock_table::LockTable;
use crate::mode::Mode;
use crate::outcome::{LockStatus, ReleaseOutcome};
use crate::record::Record;
use crate::shared::holders;
use crate::time::span;
use aws_sdk_dynamodb::types::AttributeValue;
use chrono::{DateTime, Utc};
use std::sync::Arc;
use tracing::warn;

/// Force release removes the lock item as it was read: the same acquisition…
pub(crate) const FORCE_RELEASE_SAME_ACQUISITION: &str = "#lock_id = :lock_id";
/// …and, for the exclusive lease (every extension writes a new version) and for each set of
/// shared and intention holders: the attribute, its value's placeholder, the clause for the value
/// as read, and the clause for an attribute read absent.
pub(crate) const FORCE_RELEASE_AS_READ: [(&str, &str, &str, &str); 4] = [
    (
        VERSION,
        ":version",
        " AND #version = :version",
        " AND attribute_not_exists(#version)",
    ),
    (
        SHARED,
        ":shared",
        " AND #shared = :shared",
        " AND attribute_not_exists(#shared)",
    ),
    (
        INTENT_SHARED,
        ":intent_shared",
        " AND #intent_shared = :intent_shared",
        " AND attribute_not_exists(#intent_shared)",
    ),
    (
        INTENT_EXCLUSIVE,
        ":intent_exclusive",
        " AND #intent_exclusive = :intent_exclusive",
        " AND attribute_not_exists(#intent_exclusive)",
    ),
];

/// How many writes force release makes at most, each with the item as the last one's refusal
/// found it, while the same acquisition's item keeps changing under it (extensions, shared
/// holders).
const MAX_FORCE_RELEASE_TRIES: u32 = 16;

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
    table: &Arc<LockTable>,
    resource: &str,
) -> Result<Option<Holder>, Error> {
    table.check_resource(resource)?;
    // This client's own guards on the resource say "held" no more, from before the request. Its
    // releases of them are on their way, but not ones the locks are left to: a guard dropped
    // meanwhile still sends its own release, for the force release may be cancelled or fail
    // before its delete (left to it, the lock was then released by nobody until its lease ended;
    // found by review). A guard's release started meanwhile waits for it, and is a resend of it
    // once it removed the lock (sent at once, it found nothing, and said `NotFound` for a lock its
    // own client removed; found by review).
    // (Declared first, dropped last: after the tokens, so that an acquisition answered in
    // between, which sees no force release on its way, looks itself.)
    let mut looked_for = LookedForAfter {
        table: Arc::clone(table),
        handles: Vec::new(),
    };
    let mut stopped = table.holds.releases_start_on(resource, None, None);
    let mut tries = 0;
    let mut found = read(table, resource).await?;
    let deleted = loop {
        tries += 1;
        let Some(item) = found else {
            break None;
        };
        if !item.contains_key(LOCK_ID) {
            return Err(table.not_a_lock_item(&item));
        }
        // And every lock the item shows, which the delete removes: one this client took while
        // the item was read, or whose acquisition is still to be answered (its late answer
        // must not start a guard held). Only those: a lock taken after the read is spared by the
        // delete's condition, and its guard stays held.
        let on_its_way: Vec<LockId> = stopped.iter().map(|release| release.lock_id()).collect();
        let holders = handles_in(table, resource, &item);
        let removing = holders.iter().map(LockHandle::lock_id).collect();
        stopped.extend(table.holds.removing_by_force(removing, &on_its_way));
        for release in &mut stopped {
            release.sending();
            release.overtake_earlier();
        }
        looked_for.add(holders);
        let (answer, retried) = remove_as_read(table, resource, &item).await?;
        match answer {
            Answer::Applied(()) => break Some(item),
            // Gone: by this request's own first attempt, if the SDK sent it again after a lost
            // answer (the holder read was removed, and is reported so), else meanwhile (nothing
            // left to release).
            Answer::Refused(None) => break retried.then_some(item),
            // Another acquisition's now: the lock read was released meanwhile (by this request's
            // own first attempt, if the SDK sent it again after a lost answer: reported so, as
            // above; found by review), and the later holder is spared.
            Answer::Refused(Some(changed)) if changed.get(LOCK_ID) != item.get(LOCK_ID) => {
                break retried.then_some(item)
            }
            // Kept, with its holder cleared: by this request's first attempt if it was sent
            // again, else by a release meanwhile. Not written again: it wrote a second version
            // over the kept item and reported nothing removed.
            Answer::Refused(Some(changed))
                if item.contains_key(OWNER) && !changed.contains_key(OWNER) =>
            {
                break retried.then_some(item)
            }
            // The same acquisition, extended, or its shared holders changed: written again as
            // the refusal found it (`ALL_OLD`).
            Answer::Refused(changed) if tries < MAX_FORCE_RELEASE_TRIES => found = changed,
            Answer::Refused(_) => {
                // Every delete refused: it removed nothing, and looks for nothing (a shared
                // hold's look, pinned to no version, removed the live entry its holder keeps;
                // found by review).
                looked_for.handles.clear();
                for release in &stopped {
                    release.answered(&Ok(ReleaseOutcome::NotFound));
                }
                return Err(Error::UnexpectedResponse {
                    operation: "DeleteItem",
                    detail: "the lock item kept changing under force release; nothing was released",
                });
            }
        }
    };
    // The locks it removed, whether it stopped them or they were taken while it read (a guard's
    // release of one said `NotFound`; found by review), and only those: one of this client's that
    // was lost before (taken over, another's lock removed) reads its loss (marked with whatever
    // the delete removed, a guard's release of it answered `Unconfirmed`; found by review). Each
    // answered `Released` marks its lock as one this client may have released as it ends (a guard
    // stopped by it then sends its release as a resend).
    let removed: Vec<LockId> = deleted
        .as_ref()
        .map(|item| lock_ids_in(table, resource, item))
        .unwrap_or_default();
    for release in stopped {
        release.answered(&Ok(if removed.contains(&release.lock_id()) {
            ReleaseOutcome::Released
        } else {
            ReleaseOutcome::NotFound
        }));
    }
    // The line forgets the lock it removed, and only that one (a newer lock of this client,
    // spared, stays held).
    match deleted
        .as_ref()
        .and_then(|item| table.record(resource, Some(item)).ok().flatten())
    {
        Some(record) => table.queues.freed(resource, record.lock_id),
        None => table.queues.wake(resource),
    }
    // Only the holds of the locks it removed: one this client took after the delete was sent
    // is spared by its condition, and stays, and so does one it stopped but did not remove
    // (another task's force release, still on its way, may fail).
    for lock_id in &removed {
        table.holds.freed(*lock_id);
    }
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

/// The locks a force release read in the items it sent deletes for: each one whose write the SDK
/// sent more than once is looked for once the force release ends, however it ends (answered,
/// failed, or dropped at its await), as after its holder's release. An acquisition answered while
/// the force release was on its way left the look to it (looked for at the answer, the look beat
/// the force release's delete, which said it removed nobody; left to it, one cancelled after its
/// delete landed looked for nothing; both found by review).
struct LookedForAfter {
    table: Arc<LockTable>,
    handles: Vec<LockHandle>,
}

impl LookedForAfter {
    /// `handles`, read in the item a delete is about to be sent for.
    fn add(&mut self, handles: Vec<LockHandle>) {
        for handle in handles {
            if !self.handles.contains(&handle) {
                self.handles.push(handle);
            }
        }
    }
}

impl Drop for LookedForAfter {
    fn drop(&mut self) {
        for handle in self.handles.drain(..) {
            in_flight::look_again_if_resent(&self.table, handle);
        }
    }
}

/// The acquisitions `item` holds the lock for: its exclusive holder's and its shared holders'
/// (unreadable ones are left out: the item is reported malformed elsewhere).
fn lock_ids_in(table: &LockTable, resource: &str, item: &Item) -> Vec<LockId> {
    handles_in(table, resource, item)
        .iter()
        .map(LockHandle::lock_id)
        .collect()
}

/// [`lock_ids_in`], as handles: each holder's lock with its owner and mode.
fn handles_in(table: &LockTable, resource: &str, item: &Item) -> Vec<LockHandle> {
    let exclusive = table
        .record(resource, Some(item))
        .ok()
        .flatten()
        .map(|record| LockHandle::new(resource, &record.holder.owner, record.lock_id));
    let shared = holders::decode_all(resource, item)
        .unwrap_or_default()
        .into_iter()
        .map(|(mode, record)| {
            LockHandle::new(resource, &record.holder.owner, record.lock_id).with_mode(mode)
        });
    exclusive.into_iter().chain(shared).collect()
}

/// The attributes of the shared and intention holders' entries `item` carries.
fn shared_entries(resource: &str, item: &Item) -> Vec<String> {
    holders::decode_all(resource, item)
        .unwrap_or_default()
        .into_iter()
        .map(|(_, record)| holders::attribute(record.lock_id))
        .collect()
}

/// Removes `resource`'s lock item if it is still `item` (its acquisition, lease and holder
/// sets): a DeleteItem, or on a client that keeps items an UpdateItem clearing the holder.
/// Refused, the item it found instead (`ALL_OLD`), if any; and whether the SDK sent the request
/// more than once (an earlier attempt may have been applied).
async fn remove_as_read(
    table: &LockTable,
    resource: &str,
    item: &Item,
) -> Result<(Answer<(), Option<Item>>, bool), Error> {
    let (condition, values) = as_read(item);
    let transmissions = Transmissions::default();
    let answer = if table.delete_on_release {
        let sent = table
            .delete_item(resource, &condition)
            .set_expression_attribute_values(Some(values))
            .customize()
            .interceptor(transmissions.clone())
            .send();
        answer("DeleteItem", sent.await, delete_refused)?.map(drop)
    } else {
        // The item is kept, cleared of its holder (a kept item already is: cleared again), and
        // records the release of its holder's lock.
        let holder = match item.get(OWNER) {
            Some(AttributeValue::S(owner)) => Some(owner.as_str()),
            _ => None,
        };
        let record = kept::release_record(table, holder)?;
        let (mut update, mut update_values) = kept::release_update(DataChange::Keep, &record);
        update_values.extend(values);
        // And its shared and intention holders, every one the read found: the update cleared
        // the exclusive holder only, and left the readers in an item its TTL then deleted under
        // them (a writer took the lock while they held).
        let entries = shared_entries(resource, item);
        for i in 0..entries.len() {
            update.push_str(&format!(", #held{i}"));
        }
        for (set, name) in [
            ("#shared", SHARED),
            ("#intent_shared", INTENT_SHARED),
            ("#intent_exclusive", INTENT_EXCLUSIVE),
        ] {
            if item.contains_key(name) {
                update.push_str(&format!(", {set}"));
            }
        }
        let mut request = table.update_item(resource, &update, &condition);
        for (i, entry) in entries.into_iter().enumerate() {
            request = request.expression_attribute_names(format!("#held{i}"), entry);
        }
        let sent = request
            .set_expression_attribute_values(Some(update_values))
            .customize()
            .interceptor(transmissions.clone())
            .send();
        answer("UpdateItem", sent.await, update_refused)?.map(drop)
    };
    Ok((answer, transmissions.retried()))
}

/// The condition that `item` is unchanged in what makes its holders, and its values.
fn as_read(item: &Item) -> (String, Item) {
    let mut condition = FORCE_RELEASE_SAME_ACQUISITION.to_owned();
    let mut values = Item::new();
    if let Some(lock_id) = item.get(LOCK_ID) {
        values.insert(":lock_id".to_owned(), lock_id.clone());
    }
    for (attribute, placeholder, same, absent) in FORCE_RELEASE_AS_READ {
        match item.get(attribute) {
            Some(value) => {
                condition.push_str(same);
                values.insert(placeholder.to_owned(), value.clone());
            }
            None => condition.push_str(absent),
        }
    }
    (condition, values)
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
    use crate::record::samples::{self, now};
    use crate::schema::tests::assert_every_placeholder_named;
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
    fn force_release_asks_for_the_item_as_read() {
        let lock_id = AttributeValue::S(LockId::generate().to_string());
        let version = AttributeValue::S("v7".into());
        let shared = AttributeValue::Ss(vec![LockId::generate().to_string()]);
        let item = Item::from([
            (LOCK_ID.to_owned(), lock_id.clone()),
            (VERSION.to_owned(), version.clone()),
            (SHARED.to_owned(), shared.clone()),
        ]);
        let (condition, values) = as_read(&item);
        assert_eq!(
            condition,
            "#lock_id = :lock_id AND #version = :version AND #shared = :shared \
             AND attribute_not_exists(#intent_shared) AND attribute_not_exists(#intent_exclusive)"
        );
        assert_eq!(
            values,
            Item::from([
                (":lock_id".to_owned(), lock_id),
                (":version".to_owned(), version),
                (":shared".to_owned(), shared),
            ])
        );
    }

    #[test]
    fn every_force_release_placeholder_is_named() {
        assert_every_placeholder_named(FORCE_RELEASE_SAME_ACQUISITION);
        for (_, _, same, absent) in FORCE_RELEASE_AS_READ {
            assert_every_placeholder_named(same);
            assert_every_placeholder_named(absent);
        }
    }

    #[test]
    fn force_release_names_only_a_live_holder() {
        let live = record(5000);
        assert_eq!(removed_holder(Some(live.clone()), now()), Some(live.holder));
        assert_eq!(removed_holder(Some(record(-1)), now()), None);
        assert_eq!(removed_holder(None, now()), None);
    }
}
