//! A shared acquisition (or one in an intention mode, for a path lock's ancestors): one
//! conditional UpdateItem that adds this holder to its mode's set and writes its entry, if no
//! exclusive holder's lease stands, no exclusive acquirer is waiting (for a shared holder: a
//! writer's marker stops no intention), no holder of the conflicting set is there
//! (intention-exclusive for shared, shared for intention-exclusive), and (for a semaphore) a
//! permit is free.
//!
//! A semaphore whose permits are all taken, some by holders whose leases have ended, is taken
//! with a second write that replaces those holders by this one: its condition names every holder
//! it saw (the set's size, the live ones present, the lapsed ones still lapsed), so it applies
//! only to the item the refusal showed, and no sweeper is needed. The refusal's item (`ALL_OLD`)
//! says which case holds, at no extra request.

use crate::conditional::{answer, update_refused, Answer, Transmissions};
use crate::error::Error;
use crate::item::{s, Item, EXPIRES_AT, LOCK_ID, OWNER};
use crate::limits::MAX_SHARED_HOLDERS;
use crate::lock::{Holder, Lock, LockHandle, LockId};
use crate::lock_table::LockTable;
use crate::mode::Mode;
use crate::ops::acquire::{acquired, Attempt, Request};
use crate::ops::in_flight::{AfterResend, InFlightAcquisition};
use crate::ops::kept::SET_NAMESPACE;
use crate::record::{self, Record};
use crate::shared::{holders, writer};
use crate::time::{after, span};
use crate::timestamp;
use aws_sdk_dynamodb::types::{
    AttributeValue, ReturnValuesOnConditionCheckFailure, TransactWriteItem, Update,
};
use chrono::{DateTime, Utc};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;

/// No live exclusive holder, on a lock item or none…
const FREE_FOR_SHARED: &str = "(attribute_not_exists(#owner) OR #expires_at < :now)";
/// …and, for a reader of the item itself, no exclusive acquirer waiting: a writer's marker stops
/// new readers, never intentions (path locks below the item). It stands over readers only, and a
/// holder of a path below asking for another (an intention on the same ancestor) waited behind
/// the writer, which waited for that holder (found by review).
const NO_WRITER_WAITING: &str =
    " AND (attribute_not_exists(#writer_waiting) OR #writer_waiting.#expires_at < :now)";

/// The item is a lock item or there is none.
const ANY_ITEM: &str = "(attribute_not_exists(#pk) OR attribute_exists(#lock_id)) AND ";
/// The item is a lock item ([`AcquireOptions::only_if_exists`](crate::AcquireOptions::only_if_exists)).
const EXISTING_ITEM: &str = "attribute_exists(#lock_id) AND ";
/// Writes the holder's entry and keeps the item a lock item (it has a `LockID`)…
const SET_ENTRY: &str = "SET #entry = :entry, #lock_id = if_not_exists(#lock_id, :lock_id)";
/// …and removes a lapsed exclusive holder, whose late release or extension then finds no
/// `Owner` and changes nothing.
const REMOVE_EXCLUSIVE: &str = "#owner, #acquired_at, #expires_at, #lease_ms, #fencing_token";

/// How many writes one attempt makes at most: the plain one, a reclaim, and one more after a
/// reclaim that found the item changed.
const MAX_WRITES: usize = 3;

/// One shared acquisition attempt.
pub(crate) async fn attempt(
    table: &Arc<LockTable>,
    request: &Request<'_>,
) -> Result<Attempt, Error> {
    let (lock, version, now) = new_lock(table, request)?;
    let mut reclaim: Vec<Record> = Vec::new();
    let mut last_seen = None;
    let mut after_resend = AfterResend::new(table, vec![(lock.handle().clone(), None)]);
    for _ in 0..MAX_WRITES {
        let write = Write::new(table, request, &lock, &version, now, &reclaim)?;
        let in_flight = InFlightAcquisition::new(table, lock.handle(), None);
        let transmissions = Transmissions::default();
        let sent = table
            .update_item(request.resource, &write.update, &write.condition)
            .set_expression_attribute_names(Some(write.names))
            .set_expression_attribute_values(Some(write.values))
            .customize()
            .interceptor(transmissions.clone())
            .send();
        let answer = answer("UpdateItem", sent.await, update_refused)?;
        in_flight.answered();
        let item = match answer {
            Answer::Applied(_) => {
                after_resend.acquired(transmissions.resent());
                return Ok(acquired(table, lock));
            }
            Answer::Refused(Some(item)) => {
                after_resend.refused(transmissions.retried());
                item
            }
            Answer::Refused(None) if request.only_if_exists => {
                return Err(Error::NoLockItem {
                    table: table.name.clone(),
                    key: table.schema.describe_key(&table.key(request.resource)),
                })
            }
            Answer::Refused(None) => {
                return Err(Error::UnexpectedResponse {
                    operation: "UpdateItem",
                    detail: "condition failed but no item came back for ALL_OLD",
                })
            }
        };
        if !item.contains_key(LOCK_ID) {
            return Err(table.not_a_lock_item(&item));
        }
        let received = Instant::now();
        match read_refused(request, lock.lock_id(), &item, now)? {
            Refusal::OwnWrite => {
                after_resend.acquired(transmissions.resent());
                return Ok(acquired(table, lock));
            }
            Refusal::Blocked(holder) => {
                let retry_at = received + span(now, holder.expires_at) + Duration::from_millis(1);
                return Ok(Attempt::Held {
                    holder,
                    retry_at,
                    readers: false,
                });
            }
            Refusal::Reclaim(seen) => reclaim = seen,
            Refusal::Clear(lapsed) => {
                writer::clear_lapsed(table, request.resource, &lapsed, table.now()).await?;
            }
            // The item changed since the last refusal (a holder left, say): a reclaim of the
            // holders it showed is stale, and the plain write is tried again.
            Refusal::Changed(holder) => {
                reclaim.clear();
                last_seen = holder;
            }
        }
    }
    // The item kept changing under the attempt: contention, tried again after a backoff step.
    Ok(match last_seen {
        Some(holder) => Attempt::Held {
            holder,
            retry_at: Instant::now(),
            readers: false,
        },
        None => Attempt::Conflict,
    })
}

/// A new shared hold for `request`, its entry's version, and the clock reading its lease counts
/// from.
pub(crate) fn new_lock(
    table: &LockTable,
    request: &Request<'_>,
) -> Result<(Lock, String, DateTime<Utc>), Error> {
    let sent = Instant::now();
    let now = table.now();
    let handle = LockHandle::new(request.resource, request.owner, LockId::generate())
        .with_mode(request.mode);
    let expires_at = after(now, request.lease, "lease")?;
    let lock = Lock::new(handle, now, expires_at, sent + request.lease);
    Ok((lock, uuid::Uuid::new_v4().to_string(), now))
}

/// One write of the attempt: the plain acquisition, or the reclaim of the lapsed holders among
/// those the last refusal showed.
pub(crate) struct Write {
    update: String,
    condition: String,
    names: HashMap<String, String>,
    values: Item,
}

impl Write {
    /// The write of `lock` for `request`, as a reclaim of `reclaim` if that is not empty.
    pub(crate) fn new(
        table: &LockTable,
        request: &Request<'_>,
        lock: &Lock,
        version: &str,
        now: DateTime<Utc>,
        reclaim: &[Record],
    ) -> Result<Write, Error> {
        let mut condition = String::from(if request.only_if_exists {
            EXISTING_ITEM
        } else {
            ANY_ITEM
        });
        condition.push_str(FREE_FOR_SHARED);
        if request.mode == Mode::Shared {
            condition.push_str(NO_WRITER_WAITING);
        }
        // Never over an entry of the same acquisition: a late copy of this write (or an SDK
        // retry after it was applied) would put back its first lease end over a later one, and
        // a writer could then clear the entry as lapsed while its holder still holds.
        condition.push_str(" AND attribute_not_exists(#entry)");
        let (own_set, _) = holders::set_of(request.mode);
        if let Some(conflicting) = conflicting_set(request.mode) {
            condition.push_str(&format!(" AND attribute_not_exists({conflicting})"));
        }
        let mut remove: Vec<String> = vec![REMOVE_EXCLUSIVE.to_owned()];
        if table.schema.ttl_attribute_name().is_some() {
            // An exclusive holder's TTL could delete the item under this holder's lease.
            remove.push("#ttl".to_owned());
        }
        let mut values = Item::from([
            (":now".to_owned(), s(timestamp::format(now))),
            (":entry".to_owned(), holders::entry(lock, version)),
            (":lock_id".to_owned(), s(lock.lock_id().to_string())),
        ]);
        let set_entry = match table.schema.namespace_name() {
            Some(namespace) => {
                values.insert(":namespace".into(), s(namespace));
                format!("{SET_ENTRY}{SET_NAMESPACE}")
            }
            None => SET_ENTRY.to_owned(),
        };
        let mut entry_names = vec![("#entry".to_owned(), holders::attribute(lock.lock_id()))];
        let update = if reclaim.is_empty() {
            condition.push_str(&format!(
                " AND (attribute_not_exists({own_set}) OR size({own_set}) < :permits)"
            ));
            values.insert(
                ":permits".into(),
                AttributeValue::N(permits(request).to_string()),
            );
            values.insert(":ids".into(), holders::id_set([lock.lock_id()]));
            format!(
                "{set_entry} ADD {own_set} :ids REMOVE {}",
                remove.join(", ")
            )
        } else {
            // The set is exactly the holders seen: its size, every one of them still there, the
            // lapsed ones still lapsed. It becomes the live ones and this one.
            condition.push_str(&format!(" AND size({own_set}) = :seen"));
            values.insert(":seen".into(), AttributeValue::N(reclaim.len().to_string()));
            let mut kept = vec![lock.lock_id()];
            for (i, seen) in reclaim.iter().enumerate() {
                let placeholder = format!("#h{i}");
                if seen.holder.is_live_at(now) {
                    condition.push_str(&format!(" AND attribute_exists({placeholder})"));
                    kept.push(seen.lock_id);
                } else {
                    condition.push_str(&format!(" AND {placeholder}.#expires_at < :now"));
                    remove.push(placeholder.clone());
                }
                entry_names.push((placeholder, holders::attribute(seen.lock_id)));
            }
            values.insert(":ids".into(), holders::id_set(kept));
            format!("{set_entry}, {own_set} = :ids REMOVE {}", remove.join(", "))
        };
        let mut names = table.names_for(&[&update, &condition]);
        names.extend(entry_names);
        Ok(Write {
            update,
            condition,
            names,
            values,
        })
    }
}

impl Write {
    /// The same write as one item of a transaction (a lock set), asking for the refused item.
    pub(crate) fn into_transact_item(
        self,
        table: &LockTable,
        resource: &str,
    ) -> Result<TransactWriteItem, Error> {
        let update = Update::builder()
            .table_name(&table.name)
            .set_key(Some(table.key(resource)))
            .update_expression(self.update)
            .condition_expression(self.condition)
            .set_expression_attribute_names(Some(self.names))
            .set_expression_attribute_values(Some(self.values))
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
            .build()
            .map_err(|e| Error::backend_other("TransactWriteItems", e))?;
        Ok(TransactWriteItem::builder().update(update).build())
    }
}

/// What the item that refused a shared attempt says.
#[derive(Debug, PartialEq)]
pub(crate) enum Refusal {
    /// The item holds this attempt's entry: an earlier try of this very request (an SDK retry
    /// after a lost answer) wrote it.
    OwnWrite,
    /// A live exclusive holder, a waiting exclusive acquirer, or a full semaphore: the holder
    /// whose lease ends first among those in the way (for a full semaphore, the first permit to
    /// come free).
    Blocked(Holder),
    /// Every permit is taken, some by holders whose leases have ended: these are the holders
    /// seen, to be replaced by this one in a reclaim.
    Reclaim(Vec<Record>),
    /// Holders of the conflicting set stand in the way, every one of them lapsed: these, to be
    /// cleared before the next write.
    Clear(Vec<(Mode, Record)>),
    /// Nothing in the item refuses a shared holder any more: it changed since the write was
    /// judged (a release, a reclaim by someone else). The holder seen last, if any.
    Changed(Option<Holder>),
}

/// Reads the item that refused the shared attempt `ours` at the clock reading `now`.
pub(crate) fn read_refused(
    request: &Request<'_>,
    ours: LockId,
    item: &Item,
    now: DateTime<Utc>,
) -> Result<Refusal, Error> {
    let resource = request.resource;
    let shared = holders::decode(resource, item, request.mode)?;
    if shared.iter().any(|r| r.lock_id == ours) {
        return Ok(Refusal::OwnWrite);
    }
    if item.contains_key(OWNER) {
        let exclusive = record::decode(resource, item)?;
        if exclusive.holder.is_live_at(now) {
            return Ok(Refusal::Blocked(exclusive.holder));
        }
    } else if item.contains_key(EXPIRES_AT) {
        // Never written so; decode reports what is missing.
        record::decode(resource, item)?;
    }
    if let Some(writer) = holders::writer_waiting(resource, item)? {
        if request.mode == Mode::Shared && writer.is_live_at(now) {
            return Ok(Refusal::Blocked(writer));
        }
    }
    if let Some(conflicting) = conflicting_mode(request.mode) {
        let in_the_way = holders::decode(resource, item, conflicting)?;
        let last_live = holders::live(&in_the_way, now).max_by_key(|r| r.holder.expires_at);
        if let Some(last) = last_live {
            return Ok(Refusal::Blocked(last.holder.clone()));
        }
        if !in_the_way.is_empty() {
            return Ok(Refusal::Clear(
                in_the_way.into_iter().map(|r| (conflicting, r)).collect(),
            ));
        }
    }
    let permits = permits(request) as usize;
    let first_free = holders::live(&shared, now)
        .min_by_key(|r| r.holder.expires_at)
        .map(|r| r.holder.clone());
    let live = holders::live(&shared, now).count();
    Ok(match first_free {
        _ if shared.len() < permits => Refusal::Changed(first_free),
        Some(holder) if live >= permits => Refusal::Blocked(holder),
        _ => Refusal::Reclaim(shared),
    })
}

/// The set-kept mode whose holders exclude holders in `mode`, besides an exclusive holder.
fn conflicting_mode(mode: Mode) -> Option<Mode> {
    match mode {
        Mode::Shared => Some(Mode::IntentExclusive),
        Mode::IntentExclusive => Some(Mode::Shared),
        Mode::IntentShared | Mode::Exclusive => None,
    }
}

/// The placeholder of [`conflicting_mode`]'s set.
fn conflicting_set(mode: Mode) -> Option<&'static str> {
    conflicting_mode(mode).map(|mode| holders::set_of(mode).0)
}

/// The most shared holders `request` lets in: its permits, or the bound on any shared lock.
fn permits(request: &Request<'_>) -> u32 {
    request.permits.unwrap_or(MAX_SHARED_HOLDERS)
}
