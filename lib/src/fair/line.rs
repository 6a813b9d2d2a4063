//! The line of a fair lock: its encoding in the lock item, joining it and leaving it.
//!
//! `Queue` lists the waiters' `LockID`s in the order they joined; `Queued:<LockID>` holds each
//! one's entry. Both are written and removed together, and `Queue` is removed (never left empty)
//! with its last waiter, so that "nobody waits" is `attribute_not_exists(#queue)`.

use super::QueuedWaiter;
use crate::conditional::{answer, update_refused, Answer, Transmissions};
use crate::error::Error;
use crate::item::{
    self, s, Item, ACQUIRED_AT, EXPIRES_AT, FENCED, LEASE_MS, LOCK_ID, OWNER, QUEUE,
};
use crate::lock::LockId;
use crate::lock_table::LockTable;
use crate::ops::inspect;
use crate::timestamp;
use aws_sdk_dynamodb::types::{AttributeValue, ReturnValue};
use chrono::{DateTime, Utc};
use std::collections::HashMap;
use std::time::Duration;
use tracing::debug;

/// Joins only a lock item held by a live exclusive holder, or one whose line is already there
/// (a lapsed holder's, which a waiter grants); never twice (an SDK retry after a lost answer),
/// nor after the first attempt was granted the lock (the retry finds the waiter's entry gone and
/// its `LockID` the holder's: joining again would leave an entry of the holder in the line,
/// which its own release would grant it, an orphan).
pub(crate) const JOIN_CONDITION: &str = "attribute_exists(#lock_id) AND #lock_id <> :id AND attribute_not_exists(#entry) AND attribute_not_exists(#shared) AND attribute_not_exists(#intent_shared) AND attribute_not_exists(#intent_exclusive) AND (attribute_exists(#queue) OR (attribute_exists(#owner) AND #expires_at >= :now))";
const JOIN_UPDATE: &str =
    "SET #queue = list_append(if_not_exists(#queue, :empty), :me), #entry = :entry";
/// Leaving as the last waiter removes the line.
const LEAVE_LAST_CONDITION: &str = "#queue[0] = :me AND size(#queue) = :one";
const LEAVE_LAST_UPDATE: &str = "REMOVE #queue, #entry";
/// How many times a waiter reads the line again to find its place when leaving.
const MAX_LEAVE_TRIES: usize = 8;

/// One waiter of the line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Entry {
    /// The `LockID` its lock will carry.
    pub(crate) lock_id: LockId,
    pub(crate) waiter: QueuedWaiter,
    /// It asked for a fencing token: its grant issues one.
    pub(crate) fenced: bool,
}

impl Entry {
    /// Whether a grant at `now` passes this waiter over: its deadline is gone.
    pub(crate) fn gave_up_at(&self, now: DateTime<Utc>) -> bool {
        self.waiter.until.is_some_and(|until| until < now)
    }
}

/// The attribute of the entry of the waiter `lock_id`.
pub(crate) fn attribute(lock_id: LockId) -> String {
    format!("{}{lock_id}", item::QUEUED_PREFIX)
}

/// Whether `item` has a line.
pub(crate) fn has_line(item: &Item) -> bool {
    item.contains_key(QUEUE)
}

/// Whether `item`'s holder is the acquisition `lock_id`: its `LockID`, with a holder. A shared
/// or intention holder that took the lapsed lock keeps the `LockID` and removes the holder (a
/// released kept item too): a waiter whose grant lapsed before it looked took that item for its
/// grant, and its acquisition failed (found by review).
pub(crate) fn held_by(item: &Item, lock_id: LockId) -> bool {
    matches!(item.get(LOCK_ID), Some(AttributeValue::S(id)) if *id == lock_id.to_string())
        && item.contains_key(OWNER)
}

/// The line of `item` (of `resource`), first waiter first; empty without one.
pub(crate) fn decode(resource: &str, item: &Item) -> Result<Vec<Entry>, Error> {
    let malformed = |problem| Error::MalformedItem {
        resource: resource.to_owned(),
        attribute: QUEUE,
        problem,
    };
    let ids = match item.get(QUEUE) {
        None => return Ok(Vec::new()),
        Some(AttributeValue::L(ids)) => ids,
        Some(_) => return Err(malformed("is not a list")),
    };
    ids.iter()
        .map(|id| {
            let AttributeValue::S(id) = id else {
                return Err(malformed("holds a value that is not a string"));
            };
            let lock_id =
                LockId::parse(id).map_err(|_| malformed("holds an id that is not a UUID"))?;
            let Some(AttributeValue::M(entry)) = item.get(&attribute(lock_id)) else {
                return Err(malformed("names a waiter without an entry map"));
            };
            let string = |name| match entry.get(name) {
                Some(AttributeValue::S(value)) => Ok(value.as_str()),
                _ => Err(malformed(
                    "names a waiter whose entry lacks a string it needs",
                )),
            };
            let time = |name| {
                timestamp::parse(string(name)?)
                    .ok_or_else(|| malformed("names a waiter with a malformed timestamp"))
            };
            let lease = match entry.get(LEASE_MS) {
                Some(AttributeValue::N(ms)) => ms
                    .parse::<u64>()
                    .map(Duration::from_millis)
                    .map_err(|_| malformed("names a waiter with a malformed lease"))?,
                _ => return Err(malformed("names a waiter without a lease")),
            };
            if string(LOCK_ID)? != id {
                return Err(malformed("names a waiter whose entry has another LockID"));
            }
            let until = match entry.get(EXPIRES_AT) {
                Some(_) => Some(time(EXPIRES_AT)?),
                None => None,
            };
            let fenced = match entry.get(FENCED) {
                None => false,
                Some(AttributeValue::Bool(fenced)) => *fenced,
                Some(_) => return Err(malformed("names a waiter whose Fenced is not a boolean")),
            };
            Ok(Entry {
                lock_id,
                waiter: QueuedWaiter {
                    owner: string(OWNER)?.to_owned(),
                    joined_at: time(ACQUIRED_AT)?,
                    lease,
                    until,
                },
                fenced,
            })
        })
        .collect()
}

/// The entry of `waiter`, whose lock will be `lock_id` (with a fencing token if `fenced`).
fn encode(lock_id: LockId, waiter: &QueuedWaiter, fenced: bool) -> AttributeValue {
    let mut entry = HashMap::from([
        (LOCK_ID.to_owned(), s(lock_id.to_string())),
        (OWNER.to_owned(), s(&waiter.owner)),
        (
            ACQUIRED_AT.to_owned(),
            s(timestamp::format(waiter.joined_at)),
        ),
        (LEASE_MS.to_owned(), item::millis(waiter.lease)),
    ]);
    if let Some(until) = waiter.until {
        entry.insert(EXPIRES_AT.to_owned(), s(timestamp::format(until)));
    }
    if fenced {
        entry.insert(FENCED.to_owned(), AttributeValue::Bool(true));
    }
    AttributeValue::M(entry)
}

/// Whether a waiter joined.
#[derive(Debug, PartialEq)]
pub(crate) enum Joined {
    /// It is in the line (by this request or an earlier attempt of it), or was granted the lock
    /// after an earlier attempt put it there: the item as the join left it (`ALL_NEW`), or as
    /// the retry that found it so saw it (`ALL_OLD`), so that the waiter need not read it at once;
    /// `resent` if the join was sent more than once: an earlier attempt may still land, and put
    /// the waiter back in line after it left.
    InLine { item: Item, resent: bool },
    /// The lock is not held by a live exclusive holder and has no line (free, lapsed, shared):
    /// try to acquire it again instead. `unanswered` if an earlier attempt of the join went
    /// unanswered: it may still land (delayed in the network), and put the waiter in line.
    NotHeld { unanswered: bool },
}

/// Joins `resource`'s line as `waiter`, whose lock will be `lock_id`, with a fencing token if
/// `fenced`.
pub(crate) async fn join(
    table: &LockTable,
    resource: &str,
    (lock_id, waiter, fenced): (LockId, &QueuedWaiter, bool),
) -> Result<Joined, Error> {
    let values = Item::from([
        (":empty".to_owned(), AttributeValue::L(Vec::new())),
        (
            ":me".to_owned(),
            AttributeValue::L(vec![s(lock_id.to_string())]),
        ),
        (":entry".to_owned(), encode(lock_id, waiter, fenced)),
        (":id".to_owned(), s(lock_id.to_string())),
        (":now".to_owned(), s(timestamp::format(table.now()))),
    ]);
    let mut names = table.names_for(&[JOIN_UPDATE, JOIN_CONDITION]);
    names.insert("#entry".to_owned(), attribute(lock_id));
    let transmissions = Transmissions::default();
    let sent = table
        .update_item(resource, JOIN_UPDATE, JOIN_CONDITION)
        .set_expression_attribute_names(Some(names))
        .set_expression_attribute_values(Some(values))
        .return_values(ReturnValue::AllNew)
        .customize()
        .interceptor(transmissions.clone())
        .send();
    Ok(match answer("UpdateItem", sent.await, update_refused)? {
        Answer::Applied(out) => match out.attributes {
            Some(item) => Joined::InLine {
                item,
                resent: transmissions.resent(),
            },
            None => {
                return Err(Error::UnexpectedResponse {
                    operation: "UpdateItem",
                    detail: "no attributes despite ReturnValues = ALL_NEW",
                })
            }
        },
        // An earlier attempt of this request, whose answer was lost, put us in line, and we may
        // have been granted the lock since: the waiter reads either from the item.
        Answer::Refused(Some(item))
            if item.contains_key(&attribute(lock_id)) || held_by(&item, lock_id) =>
        {
            Joined::InLine { item, resent: true }
        }
        Answer::Refused(_) => Joined::NotHeld {
            unanswered: transmissions.retried(),
        },
    })
}

/// How a waiter's leaving ended.
#[derive(Debug, PartialEq)]
pub(crate) enum Left {
    /// It left the line: its entry was removed by this request.
    Gone,
    /// It was not in the line, nor the holder (never joined, granted and released, or cleared).
    NotInLine,
    /// It was granted the lock meanwhile: the item, which it holds.
    Granted(Item),
    /// It could not find its place in time (the line kept changing); its entry stays, and is
    /// passed over once its deadline is gone, or granted a lease that runs out.
    Stuck,
}

/// Takes the waiter `lock_id` out of `resource`'s line, starting from `seen` (the item as last
/// read, if any).
pub(crate) async fn leave(
    table: &LockTable,
    resource: &str,
    lock_id: LockId,
    mut seen: Option<Item>,
) -> Result<Left, Error> {
    for _ in 0..MAX_LEAVE_TRIES {
        let item = match seen.take() {
            Some(item) => item,
            None => match inspect::read(table, resource).await? {
                Some(item) => item,
                None => return Ok(Left::NotInLine),
            },
        };
        if held_by(&item, lock_id) {
            return Ok(Left::Granted(item));
        }
        let line = decode(resource, &item)?;
        let Some(place) = line.iter().position(|entry| entry.lock_id == lock_id) else {
            return Ok(Left::NotInLine);
        };
        let (update, condition) = if line.len() == 1 {
            (
                LEAVE_LAST_UPDATE.to_owned(),
                LEAVE_LAST_CONDITION.to_owned(),
            )
        } else {
            // Another waiter stays: the line keeps at least one.
            (
                format!("REMOVE #queue[{place}], #entry"),
                format!("#queue[{place}] = :me AND size(#queue) > :one"),
            )
        };
        let mut names = table.names_for(&[&update, &condition]);
        names.insert("#entry".to_owned(), attribute(lock_id));
        let values = Item::from([
            (":me".to_owned(), s(lock_id.to_string())),
            (":one".to_owned(), AttributeValue::N("1".to_owned())),
        ]);
        let sent = table
            .update_item(resource, &update, &condition)
            .set_expression_attribute_names(Some(names))
            .set_expression_attribute_values(Some(values))
            .send();
        match answer("UpdateItem", sent.await, update_refused)? {
            Answer::Applied(_) => return Ok(Left::Gone),
            Answer::Refused(None) => return Ok(Left::NotInLine),
            Answer::Refused(Some(item)) => seen = Some(item),
        }
    }
    Ok(Left::Stuck)
}

/// The longest dead line [`clear_dead`] removes in one request (each waiter adds a name, a value
/// and a check to the expressions, which DynamoDB bounds at 4 KB).
const MAX_CLEARED: usize = 40;

/// Removes `line`, as read in `resource`'s item at `now`, where nobody waits in it any more (every
/// waiter's deadline gone: crashed waiters) and nobody holds the lock (no holder, or a lapsed
/// one): the line and its entries, if the item still shows that line and no live holder. Such a
/// line refused every fair try, which said the lock held while `status` said it free. A line
/// longer than [`MAX_CLEARED`] loses its first [`MAX_CLEARED`] entries, and the try that finds
/// the rest clears them in turn (left to the waiting acquirers' grants, a line of dead waiters
/// left by grants that remove at most forty of them refused every fair try; found by review).
/// Whether anything was removed.
pub(crate) async fn clear_dead(
    table: &LockTable,
    resource: &str,
    line: &[Entry],
    now: DateTime<Utc>,
) -> Result<bool, Error> {
    if line.is_empty() {
        return Ok(false);
    }
    let cleared = line.len().min(MAX_CLEARED);
    let whole = cleared == line.len();
    let mut removed = if whole {
        vec!["#queue".to_owned()]
    } else {
        Vec::new()
    };
    let mut checks = vec!["size(#queue) = :n".to_owned()];
    let mut entries = HashMap::new();
    let mut values = Item::from([
        (":n".to_owned(), AttributeValue::N(line.len().to_string())),
        (":now".to_owned(), s(timestamp::format(now))),
    ]);
    for (place, entry) in line.iter().take(cleared).enumerate() {
        entries.insert(format!("#e{place}"), attribute(entry.lock_id));
        removed.push(format!("#e{place}"));
        if !whole {
            removed.push(format!("#queue[{place}]"));
        }
        checks.push(format!("#queue[{place}] = :q{place}"));
        values.insert(format!(":q{place}"), s(entry.lock_id.to_string()));
    }
    let update = format!("REMOVE {}", removed.join(", "));
    let condition = format!(
        "{} AND (attribute_not_exists(#owner) OR #expires_at < :now)",
        checks.join(" AND ")
    );
    let mut names = table.names_for(&[&update, &condition]);
    names.extend(entries);
    let sent = table
        .update_item(resource, &update, &condition)
        .set_expression_attribute_names(Some(names))
        .set_expression_attribute_values(Some(values))
        .send();
    let cleared = matches!(
        answer("UpdateItem", sent.await, update_refused)?,
        Answer::Applied(_)
    );
    debug!(
        resource,
        waiters = line.len(),
        cleared,
        "removing a line nobody waits in"
    );
    Ok(cleared)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::tests::assert_every_placeholder_named;
    use chrono::TimeZone;

    fn waiter(owner: &str, until: Option<DateTime<Utc>>) -> QueuedWaiter {
        QueuedWaiter {
            owner: owner.to_owned(),
            joined_at: Utc.with_ymd_and_hms(2026, 11, 24, 12, 0, 0).unwrap(),
            lease: Duration::from_millis(1500),
            until,
        }
    }

    fn item_with(line: &[(LockId, QueuedWaiter, bool)]) -> Item {
        let mut item = Item::from([(LOCK_ID.to_owned(), s(LockId::generate().to_string()))]);
        item.insert(
            QUEUE.to_owned(),
            AttributeValue::L(line.iter().map(|(id, ..)| s(id.to_string())).collect()),
        );
        for (id, waiter, fenced) in line {
            item.insert(attribute(*id), encode(*id, waiter, *fenced));
        }
        item
    }

    #[test]
    fn a_line_decodes_in_order_with_its_entries() {
        let until = Utc.with_ymd_and_hms(2026, 11, 24, 12, 0, 5).unwrap();
        let line = [
            (LockId::generate(), waiter("b", None), false),
            (LockId::generate(), waiter("a", Some(until)), true),
        ];
        let decoded = decode("r", &item_with(&line)).unwrap();
        let expected: Vec<_> = line
            .iter()
            .map(|(lock_id, waiter, fenced)| Entry {
                lock_id: *lock_id,
                waiter: waiter.clone(),
                fenced: *fenced,
            })
            .collect();
        assert_eq!(decoded, expected);
        assert!(decoded[1].gave_up_at(until + chrono::TimeDelta::milliseconds(1)));
        assert!(!decoded[1].gave_up_at(until));
        assert!(!decoded[0].gave_up_at(until + chrono::TimeDelta::days(1)));
    }

    #[test]
    fn a_line_naming_a_waiter_without_an_entry_is_malformed() {
        let id = LockId::generate();
        let mut item = item_with(&[(id, waiter("a", None), false)]);
        item.remove(&attribute(id));
        assert!(matches!(
            decode("r", &item),
            Err(Error::MalformedItem {
                attribute: QUEUE,
                ..
            })
        ));
    }

    #[test]
    fn no_line_is_empty() {
        assert_eq!(decode("r", &Item::new()).unwrap(), Vec::new());
    }

    #[test]
    fn every_placeholder_is_named() {
        for expr in [
            JOIN_CONDITION,
            JOIN_UPDATE,
            LEAVE_LAST_CONDITION,
            LEAVE_LAST_UPDATE,
        ] {
            assert_every_placeholder_named(expr.replace("#entry", "#shared").as_str());
        }
    }
}
