//! What an exclusive acquirer does about shared holders.
//!
//! Its acquisition's condition requires `attribute_not_exists(#shared)` (and the same of the two
//! intention sets, see [`path`](crate::path)), so shared and intention holders refuse it like an
//! exclusive holder would. Two things follow from such a refusal:
//!
//! - if every shared holder's lease has ended (crashed readers), one UpdateItem removes them,
//!   conditioned on each one's lease still being over, and the acquisition is tried again at once;
//! - if some are live, a waiting acquirer (not `try_acquire`) announces itself once with a
//!   `WriterWaiting` marker lasting until its deadline: every shared acquisition's condition
//!   refuses a live marker (an intention's does not: path locks below the item are not
//!   stopped), so the shared holders drain and no new one starves the writer. The
//!   acquisition that follows replaces the item (or, keeping items, removes the marker); a writer
//!   that gives up withdraws its own marker, and one that vanishes leaves it to end at its
//!   deadline.

use crate::conditional::{answer, update_refused, Answer};
use crate::error::Error;
use crate::item::{s, Item};
use crate::lock::{Holder, LockId};
use crate::lock_table::LockTable;
use crate::mode::Mode;
use crate::record::Record;
use crate::shared::holders;
use crate::timestamp;
use aws_sdk_dynamodb::operation::update_item::UpdateItemError;
use chrono::{DateTime, Utc};
use std::collections::HashMap;
use tracing::debug;

/// The marker is set only over shared holders, and never shortens another writer's; over its own
/// writer's marker lasting as long (placed again), it is set anew.
const ANNOUNCE_CONDITION: &str = "attribute_exists(#lock_id) AND attribute_exists(#shared) AND (attribute_not_exists(#writer_waiting) OR #writer_waiting.#expires_at < :until OR (#writer_waiting.#owner = :owner AND #writer_waiting.#expires_at = :until))";
const ANNOUNCE_UPDATE: &str = "SET #writer_waiting = :writer";
/// A writer withdraws only its own marker.
const WITHDRAW_CONDITION: &str =
    "#writer_waiting.#owner = :owner AND #writer_waiting.#expires_at = :until";
const WITHDRAW_UPDATE: &str = "REMOVE #writer_waiting";

/// What the shared holders of an item that refused an exclusive acquisition mean for it.
#[derive(Debug, PartialEq)]
pub(crate) enum SharedRefusal {
    /// At least one shared holder is live: the one whose lease ends last.
    Live(Holder),
    /// Every shared holder's lease has ended: these (with their modes) are to be cleared.
    Lapsed(Vec<(Mode, Record)>),
}

/// Reads the shared holders of `item`, which refused an exclusive acquisition at `now`; `None`
/// if it has none (the exclusive rules apply).
pub(crate) fn read_refused(
    resource: &str,
    item: &Item,
    now: DateTime<Utc>,
) -> Result<Option<SharedRefusal>, Error> {
    let held = holders::decode_all(resource, item)?;
    if held.is_empty() {
        return Ok(None);
    }
    let last_live = held
        .iter()
        .map(|(_, record)| record)
        .filter(|record| record.holder.is_live_at(now))
        .max_by_key(|record| record.holder.expires_at);
    Ok(Some(match last_live {
        Some(last) => SharedRefusal::Live(last.holder.clone()),
        None => SharedRefusal::Lapsed(held),
    }))
}

/// The most holders one clearing request names: a condition names each (`#h<i>.#expires_at <
/// :now`, about 30 bytes), and DynamoDB refuses expressions over 4 KB. An item can carry up to
/// 100 holders in each of its three sets: all lapsed, they are cleared in several requests.
const CLEARED_PER_REQUEST: usize = 64;

/// Removes the holders `lapsed` (each in its mode's set) from `resource`'s item if each one's
/// lease is still over at `now` (none extended meanwhile), at most [`CLEARED_PER_REQUEST`] per
/// UpdateItem; whether they were all removed. Each request stands alone: one refused (a holder
/// extended meanwhile) leaves the others' removals, which are right on their own.
pub(crate) async fn clear_lapsed(
    table: &LockTable,
    resource: &str,
    lapsed: &[(Mode, Record)],
    now: DateTime<Utc>,
) -> Result<bool, Error> {
    for chunk in lapsed.chunks(CLEARED_PER_REQUEST) {
        if !clear_some(table, resource, chunk, now).await? {
            return Ok(false);
        }
    }
    Ok(true)
}

/// One UpdateItem of [`clear_lapsed`], for at most [`CLEARED_PER_REQUEST`] holders.
async fn clear_some(
    table: &LockTable,
    resource: &str,
    lapsed: &[(Mode, Record)],
    now: DateTime<Utc>,
) -> Result<bool, Error> {
    let mut names = HashMap::new();
    let mut values = Item::from([(":now".to_owned(), s(timestamp::format(now)))]);
    let mut clauses = Vec::new();
    let mut removed = Vec::new();
    for (i, (_, record)) in lapsed.iter().enumerate() {
        let placeholder = format!("#h{i}");
        clauses.push(format!("{placeholder}.#expires_at < :now"));
        removed.push(placeholder.clone());
        names.insert(placeholder, holders::attribute(record.lock_id));
    }
    let mut deletes = Vec::new();
    for mode in holders::SET_MODES {
        let ids: Vec<LockId> = lapsed
            .iter()
            .filter(|(m, _)| *m == mode)
            .map(|(_, record)| record.lock_id)
            .collect();
        if !ids.is_empty() {
            let (set, _) = holders::set_of(mode);
            let value = format!(":ids_{}", mode.as_str());
            deletes.push(format!("{set} {value}"));
            values.insert(value, holders::id_set(ids));
        }
    }
    let condition = clauses.join(" AND ");
    let update = format!(
        "DELETE {} REMOVE {}",
        deletes.join(", "),
        removed.join(", ")
    );
    let mut all_names = table.names_for(&[&update, &condition]);
    all_names.extend(names);
    let sent = table
        .update_item(resource, &update, &condition)
        .set_expression_attribute_names(Some(all_names))
        .set_expression_attribute_values(Some(values))
        .send();
    let answer = answer("UpdateItem", sent.await, |err| {
        matches!(err, UpdateItemError::ConditionalCheckFailedException(_)).then_some(())
    })?;
    let cleared = matches!(answer, Answer::Applied(_));
    debug!(
        resource,
        holders = lapsed.len(),
        cleared,
        "clearing shared holders whose leases ended"
    );
    Ok(cleared)
}

/// Marks `resource` as awaited by the exclusive acquirer `owner` until `until`, the marker
/// dated `at`: whether it is set (refused: no shared holder, or a marker lasting as long; but a
/// refusal by this very marker is an SDK resend of an announce that was applied, and it is set).
pub(crate) async fn announce(
    table: &LockTable,
    resource: &str,
    owner: &str,
    at: DateTime<Utc>,
    until: DateTime<Utc>,
) -> Result<bool, Error> {
    let marker = holders::writer_marker(owner, at, until);
    let sent = table
        .update_item(resource, ANNOUNCE_UPDATE, ANNOUNCE_CONDITION)
        .set_expression_attribute_values(Some(Item::from([
            (":writer".to_owned(), marker.clone()),
            (":owner".to_owned(), s(owner)),
            (":until".to_owned(), s(timestamp::format(until))),
        ])))
        .send();
    let announced = match answer("UpdateItem", sent.await, update_refused)? {
        Answer::Applied(_) => true,
        Answer::Refused(item) => {
            item.is_some_and(|item| item.get(crate::item::WRITER_WAITING) == Some(&marker))
        }
    };
    debug!(
        resource,
        owner, announced, "exclusive acquirer waiting for shared holders"
    );
    Ok(announced)
}

/// Removes the marker `announce(owner, until)` set, if it is still there.
pub(crate) async fn withdraw(
    table: &LockTable,
    resource: &str,
    owner: &str,
    until: DateTime<Utc>,
) -> Result<(), Error> {
    let sent = table
        .update_item(resource, WITHDRAW_UPDATE, WITHDRAW_CONDITION)
        .set_expression_attribute_values(Some(Item::from([
            (":owner".to_owned(), s(owner)),
            (":until".to_owned(), s(timestamp::format(until))),
        ])))
        .send();
    answer("UpdateItem", sent.await, |err| {
        matches!(err, UpdateItemError::ConditionalCheckFailedException(_)).then_some(())
    })?;
    Ok(())
}
