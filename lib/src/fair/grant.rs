//! The grant: one UpdateItem that makes the first live waiter of a fair lock's line its holder.
//!
//! It writes the waiter's `LockID` and `Owner`, `AcquiredAt` now and `ExpiresAt` a lease (the
//! waiter's) from now by the granting client's clock, a new `Version`, and removes the waiter's
//! entry, with the waiters before it whose deadline is gone (forty at most: the next grants pass
//! over the others), and the previous holder's release record, from the line. Its condition pins
//! what the grant was computed from: each removed waiter still at its place, and the line's size
//! (exactly those, when the grant empties it and removes `Queue`; more, when some stay), besides
//! who may grant: the holder releasing ([`Over::Released`]), or anyone once the holder's lease
//! has run out ([`Over::Lapsed`], the same clauses as an acquisition's).
//!
//! A waiter that asked for a fencing token is granted by a `TransactWriteItems` of that same
//! update, writing the token into the lock item, and the raise of the resource's fence item to
//! it, as a fenced acquisition does ([`fenced_acquire`](crate::ops::fenced_acquire)): the
//! granter guesses the token (above the current holder's), a stale guess is refused by the fence
//! alone and sent again one above the fence's token, so that token order is grant order.

use super::line::{self, Entry};
use super::timing::LineTiming;
use crate::conditional::{answer, update_refused, Answer, Transmissions};
use crate::error::Error;
use crate::fencing::FencingToken;
use crate::item::{self, s, Item, GRANTED_BY, VERSION};
use crate::lock::LockId;
use crate::lock_table::LockTable;
use crate::ops::fenced_acquire::{self, Cancellation, MAX_FENCE_TRIES};
use crate::ops::inspect;
use crate::record;
use crate::time::{after, span};
use crate::timestamp;
use aws_sdk_dynamodb::operation::transact_write_items::TransactWriteItemsError;
use aws_sdk_dynamodb::types::{
    AttributeValue, ReturnValuesOnConditionCheckFailure, TransactWriteItem, Update,
};
use chrono::{DateTime, Utc};
use std::collections::HashMap;
use std::time::Duration;
use tracing::debug;

/// The holder `#lock_id = :holder` releasing grants.
const RELEASED: &str = "#lock_id = :holder AND #owner = :holder_owner";
/// Anyone grants a lock item whose holder's lease has run out (or that has none), with no shared
/// or intention holder.
const LAPSED: &str = "attribute_exists(#lock_id) AND (attribute_not_exists(#owner) OR #expires_at < :now) AND attribute_not_exists(#shared) AND attribute_not_exists(#intent_shared) AND attribute_not_exists(#intent_exclusive)";
/// How many times a releasing holder computes its grant again from a refusal (waiters joining or
/// leaving meanwhile) before releasing without one.
const MAX_GRANT_TRIES: usize = 8;

/// Who grants.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Over<'a> {
    /// The holder of acquisition `lock_id`, by `owner`, releasing it after holding it `held_for`
    /// (if known: folded into the line's figures, see [`timing`](super::timing)).
    Released {
        lock_id: LockId,
        owner: &'a str,
        held_for: Option<Duration>,
        /// Only of the item as this `Version` (a dropped acquisition's clean-up: see
        /// [`Release::version`](crate::ops::release::Release::version)).
        version: Option<&'a str>,
    },
    /// A waiter that saw the holder's lease run out.
    Lapsed,
}

/// What a grant did.
#[derive(Debug)]
pub(crate) enum Grant {
    /// The waiter `to` holds the lock, acquired at `acquired_at` until `expires_at`, with the
    /// fencing token its grant issued, if it asked for one.
    Granted {
        to: LockId,
        acquired_at: DateTime<Utc>,
        expires_at: DateTime<Utc>,
        fencing_token: Option<FencingToken>,
    },
    /// Nobody in line waits any more (every deadline gone, or no line).
    NoWaiter,
    /// The condition failed on this item (`None`: there is none); `retried` if the SDK sent the
    /// request more than once.
    Refused { item: Option<Item>, retried: bool },
    /// A fenced grant's transaction was cancelled by a concurrent write to the lock item or the
    /// fence item: nothing was written by this request (an earlier attempt of it may have been, if
    /// `retried`); the item is to be read again.
    Conflict { retried: bool },
}

/// The first waiter of `line` a grant at `now` goes to, with its place: not one whose deadline
/// is gone, nor an entry of the acquisition that holds the lock (`holder`), which no join leaves
/// but which is passed over all the same: granting the holder's own entry on its release would
/// leave the lock held by nobody.
pub(crate) fn first_live(
    line: &[Entry],
    now: DateTime<Utc>,
    holder: Option<LockId>,
) -> Option<(usize, &Entry)> {
    line.iter()
        .enumerate()
        .find(|(_, entry)| !entry.gave_up_at(now) && Some(entry.lock_id) != holder)
}

/// The most dead entries one grant removes (those before the grantee; the others stay in line,
/// passed over by the grants after it): each adds a clause and a name, and an expression over
/// DynamoDB's 4 KB (about 170 of them) was refused, and the line with it, until a force release
/// (found by review).
const MAX_REMOVED_DEAD: usize = 40;

/// The places in a line of `len` a grant to the waiter at `place` removes, in order: the dead
/// entries before it, the first [`MAX_REMOVED_DEAD`] of them, and its own. Whether they are the
/// whole line.
fn removed_places(place: usize, len: usize) -> (Vec<usize>, bool) {
    let places: Vec<usize> = (0..place.min(MAX_REMOVED_DEAD))
        .chain(std::iter::once(place))
        .collect();
    let whole = places.len() == len;
    (places, whole)
}

/// One grant's update of the lock item, its condition and their names and values.
struct GrantWrite {
    update: String,
    condition: String,
    names: HashMap<String, String>,
    values: Item,
}

/// Grants `resource`'s lock, whose item was last seen as `item`, to its first live waiter.
pub(crate) async fn send(
    table: &LockTable,
    resource: &str,
    item: &Item,
    over: Over<'_>,
) -> Result<Grant, Error> {
    let now = table.now();
    let line = line::decode(resource, item)?;
    let record = table.record(resource, Some(item))?;
    let holder = record.as_ref().map(|record| record.lock_id);
    let Some((place, to)) = first_live(&line, now, holder) else {
        return Ok(Grant::NoWaiter);
    };
    let expires_at = after(now, to.waiter.lease, "lease")?;
    // The line's figures, with the releasing holder's hold and whole turn (its grant to this).
    let timing = match (over, &record) {
        (
            Over::Released {
                held_for: Some(held_for),
                ..
            },
            Some(record),
        ) => {
            let turn = span(record.holder.acquired_at, now);
            Some(LineTiming::after(LineTiming::of(item), held_for, turn))
        }
        _ => None,
    };
    let write = grant_write(table, &line, place, (now, expires_at), over, timing)?;
    let granted = |fencing_token| Grant::Granted {
        to: to.lock_id,
        acquired_at: now,
        expires_at,
        fencing_token,
    };
    // A refusal that shows `to` as holder is a grant that stands: this one's (an earlier
    // attempt's, whose answer was lost), or, of a lapsed lock, another waiter's. A releasing
    // holder's grant is only its own, which names it (`GrantedBy`): another waiter granted the
    // lock after this holder's lease ran out, and the holder was not holding it (it answered
    // `Released`; found by review, and again, told by the grant's `AcquiredAt`, when both were
    // made in the same millisecond).
    if to.fenced {
        let floor = record::decode_fence(resource, item)?;
        return send_fenced(table, resource, write, (to.lock_id, now, over), floor)
            .await
            .map(|fenced| match fenced {
                Fenced::Granted(token) => granted(Some(token)),
                Fenced::Found(grant) => grant,
            });
    }
    let transmissions = Transmissions::default();
    let sent = table
        .update_item(resource, &write.update, &write.condition)
        .set_expression_attribute_names(Some(write.names))
        .set_expression_attribute_values(Some(write.values))
        .customize()
        .interceptor(transmissions.clone())
        .send();
    Ok(match answer("UpdateItem", sent.await, update_refused)? {
        Answer::Applied(_) => granted(None),
        // An earlier attempt of this very grant, whose answer was lost, was applied; or another
        // waiter's grant, from a later look, made `to` the holder: the item's times either way.
        Answer::Refused(Some(item)) if stands(&item, to.lock_id, over) => {
            granted_in(table, resource, to.lock_id, &item)?
        }
        Answer::Refused(item) => Grant::Refused {
            item,
            retried: transmissions.retried(),
        },
    })
}

/// Whether `item`, which refused a grant to `to` by `over`, shows a grant to `to` that stands for
/// it: any, of a lapsed lock; only the releasing holder's own (`GrantedBy`, which extensions
/// leave as it is), of a released one. (Whether the request was sent more than once does not
/// tell: an attempt throttled and never applied is resent too.)
fn stands(item: &Item, to: LockId, over: Over<'_>) -> bool {
    line::held_by(item, to)
        && match over {
            Over::Lapsed => true,
            Over::Released { lock_id, .. } => granted_by(item, lock_id),
        }
}

/// Whether `item`'s holder was granted the lock by the releasing holder `lock_id`.
fn granted_by(item: &Item, lock_id: LockId) -> bool {
    matches!(item.get(GRANTED_BY), Some(AttributeValue::S(by)) if *by == lock_id.to_string())
}

/// The grant `item` shows to `to`, who holds it there: its own times and token, not those of the
/// grant that found it so (which may have been made later than the one that stands).
fn granted_in(table: &LockTable, resource: &str, to: LockId, item: &Item) -> Result<Grant, Error> {
    let record = table
        .record(resource, Some(item))?
        .ok_or(Error::UnexpectedResponse {
            operation: "UpdateItem",
            detail: "a granted lock item has no holder",
        })?;
    Ok(Grant::Granted {
        to,
        acquired_at: record.holder.acquired_at,
        expires_at: record.holder.expires_at,
        fencing_token: record.holder.fencing_token,
    })
}

/// The version a grant to the waiter `lock_id` writes: known to the waiter without a read, so
/// that a waiter gone before it saw its grant releases only the item as the grant left it. A
/// hand-back to an idempotent acquisition of its owner since (in whichever process) writes a new
/// version and is spared: released by id and owner, it was deleted under that acquisition, or
/// handed over to the next in line beside it (found by review). (Unique as the waiter's lock id
/// is, one per turn in a line.)
pub(crate) fn version_granted_to(lock_id: LockId) -> String {
    format!("granted-{lock_id}")
}

/// The update of a grant to the waiter at `place` of `line`, at `now` until `expires_at`. A
/// fenced waiter's grant sets `#fencing_token` to `:fencing_token`, whose value each try adds;
/// any other removes the last holder's token.
fn grant_write(
    table: &LockTable,
    line: &[Entry],
    place: usize,
    (now, expires_at): (DateTime<Utc>, DateTime<Utc>),
    over: Over<'_>,
    timing: Option<LineTiming>,
) -> Result<GrantWrite, Error> {
    let to = &line[place];
    let (removed, whole_line) = removed_places(place, line.len());
    let mut values = Item::from([
        (":to".to_owned(), s(to.lock_id.to_string())),
        (":to_owner".to_owned(), s(&to.waiter.owner)),
        (":now".to_owned(), s(timestamp::format(now))),
        (":expires".to_owned(), s(timestamp::format(expires_at))),
        (":version".to_owned(), s(version_granted_to(to.lock_id))),
        (":lease_ms".to_owned(), item::millis(to.waiter.lease)),
        (
            ":removed".to_owned(),
            AttributeValue::N(removed.len().to_string()),
        ),
    ]);
    let mut set = vec![
        "#lock_id = :to",
        "#owner = :to_owner",
        "#acquired_at = :now",
        "#expires_at = :expires",
        "#version = :version",
        "#lease_ms = :lease_ms",
    ];
    if let Some((_, at)) = table.ttl(expires_at)? {
        set.push("#ttl = :ttl");
        values.insert(":ttl".to_owned(), AttributeValue::N(at.to_string()));
    }
    if let Some(timing) = timing {
        timing.write(&mut set, &mut values);
    }
    let mut remove: Vec<String> = removed.iter().map(|i| format!("#e{i}")).collect();
    match over {
        Over::Released { .. } => set.push("#granted_by = :holder"),
        Over::Lapsed => remove.push("#granted_by".to_owned()),
    }
    let mut clauses = vec![match over {
        Over::Released {
            lock_id,
            owner,
            version,
            ..
        } => {
            values.insert(":holder".to_owned(), s(lock_id.to_string()));
            values.insert(":holder_owner".to_owned(), s(owner));
            match version {
                Some(version) => {
                    values.insert(":holder_version".to_owned(), s(version));
                    format!("{RELEASED} AND #version = :holder_version")
                }
                None => RELEASED.to_owned(),
            }
        }
        Over::Lapsed => LAPSED.to_owned(),
    }];
    for &i in &removed {
        clauses.push(format!("#queue[{i}] = :q{i}"));
        values.insert(format!(":q{i}"), s(line[i].lock_id.to_string()));
    }
    if whole_line {
        clauses.push("size(#queue) = :removed".to_owned());
        remove.push("#queue".to_owned());
    } else {
        clauses.push("size(#queue) > :removed".to_owned());
        remove.extend(removed.iter().map(|i| format!("#queue[{i}]")));
    }
    if to.fenced {
        set.push("#fencing_token = :fencing_token");
    } else {
        remove.push("#fencing_token".to_owned());
    }
    remove.push("#writer_waiting".to_owned());
    if table.delete_on_release {
        // A fresh holder has no payload; a client that keeps items keeps it for the next one.
        remove.push("#data".to_owned());
    }
    // The record of the previous holder's release (one by a client that keeps items and replaced
    // the payload clears the holder and keeps the line), whoever grants: left on the granted
    // item, a release of the grantee that found its lock lost answered `AlreadyReleased` with
    // that time, and `with_lock` took it for no loss (found by review), as a kept acquisition
    // removes it.
    remove.extend(["#released_by".to_owned(), "#released_at".to_owned()]);
    let update = format!("SET {} REMOVE {}", set.join(", "), remove.join(", "));
    let condition = clauses.join(" AND ");
    let mut names = table.names_for(&[&update, &condition]);
    for &i in &removed {
        names.insert(format!("#e{i}"), line::attribute(line[i].lock_id));
    }
    Ok(GrantWrite {
        update,
        condition,
        names,
        values,
    })
}

/// How a fenced grant ended.
enum Fenced {
    /// Granted by this write, with this token.
    Granted(FencingToken),
    /// Not by this write: the grant the item shows (an earlier attempt's, or another waiter's,
    /// with its own times and token), or a refusal, or a conflict.
    Found(Grant),
}

/// Sends `write`, a grant by `over` at `now` to the fenced waiter `to`, with the raise of the
/// fence item, in one transaction; `floor` is the current holder's token, if it has one. The
/// token is guessed from `now`, the grant's `AcquiredAt`, as a fenced acquisition's from its own.
async fn send_fenced(
    table: &LockTable,
    resource: &str,
    mut write: GrantWrite,
    (to, now, over): (LockId, DateTime<Utc>, Over<'_>),
    floor: Option<FencingToken>,
) -> Result<Fenced, Error> {
    let mut token = fenced_acquire::first_guess(table, now, floor);
    for _ in 0..MAX_FENCE_TRIES {
        // Per request: this loop's own resends (a stale guess refused by the fence alone, which
        // wrote nothing) are not retries of an applied grant.
        let transmissions = Transmissions::default();
        write
            .values
            .insert(":fencing_token".to_owned(), item::token(token));
        let grant = Update::builder()
            .table_name(&table.name)
            .set_key(Some(table.key(resource)))
            .update_expression(&write.update)
            .condition_expression(&write.condition)
            .set_expression_attribute_names(Some(write.names.clone()))
            .set_expression_attribute_values(Some(write.values.clone()))
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
            .build()
            .map_err(|e| Error::backend_other("TransactWriteItems", e))?;
        let fence = fenced_acquire::fence_write(table, resource, token)?;
        let sent = table
            .dynamodb
            .transact_write_items()
            .transact_items(TransactWriteItem::builder().update(grant).build())
            .transact_items(TransactWriteItem::builder().update(fence).build())
            .customize()
            .interceptor(transmissions.clone())
            .send();
        let answer = answer("TransactWriteItems", sent.await, |err| match err {
            TransactWriteItemsError::TransactionCanceledException(cancelled) => {
                fenced_acquire::read_cancellation(cancelled.cancellation_reasons())
            }
            _ => None,
        })?;
        let cancellation = match answer {
            Answer::Applied(_) => return Ok(Fenced::Granted(token)),
            Answer::Refused(cancellation) => cancellation,
        };
        match cancellation {
            // An earlier attempt of this grant (the SDK's, whose answer was lost), or another
            // waiter's grant of a lapsed lock, made `to` the holder: its token is in the item.
            Cancellation::LockRefused(Some(item)) if stands(&item, to, over) => {
                let grant = granted_in(table, resource, to, &item)?;
                return match grant {
                    Grant::Granted {
                        fencing_token: Some(_),
                        ..
                    } => Ok(Fenced::Found(grant)),
                    _ => Err(Error::UnexpectedResponse {
                        operation: "TransactWriteItems",
                        detail: "a fenced waiter was granted the lock without a fencing token",
                    }),
                };
            }
            Cancellation::LockRefused(item) => {
                return Ok(Fenced::Found(Grant::Refused {
                    item,
                    retried: transmissions.retried(),
                }))
            }
            // Only the fence refused: the guess was stale, nothing was written.
            Cancellation::FenceRefused(item) => {
                let next = fenced_acquire::next_guess(table, resource, now, item.as_ref())?;
                debug!(resource, %next, guessed = %token, "a grant's fencing token guess was stale");
                token = next;
            }
            Cancellation::Conflict => {
                return Ok(Fenced::Found(Grant::Conflict {
                    retried: transmissions.retried(),
                }))
            }
        }
    }
    Ok(Fenced::Found(Grant::Conflict { retried: false }))
}

/// How a release through a line ended.
#[derive(Debug)]
pub(crate) enum HandOver {
    /// The lock went to the next waiter: released.
    HandedOver,
    /// Nobody waits any more: release the lock as if there were no line.
    NoWaiter,
    /// The lock is not (any more) the releaser's: the item that says so, and whether a grant was
    /// sent more than once (an earlier attempt may have handed it over).
    NotOurs { item: Option<Item>, retried: bool },
}

/// Releases the lock `lock_id` of `owner` on `resource`, held `held_for` (if known), only as
/// `version` left it (if given), whose item `item` has a line, by granting it to the next waiter.
pub(crate) async fn hand_over(
    table: &LockTable,
    resource: &str,
    (lock_id, owner, held_for, version): (LockId, &str, Option<Duration>, Option<&str>),
    mut item: Item,
) -> Result<HandOver, Error> {
    let mut retried = false;
    for _ in 0..MAX_GRANT_TRIES {
        // Granted by this release already (an earlier attempt, whose answer was lost or met a
        // conflict on its resend), whoever holds the lock now: only its grants name it.
        if granted_by(&item, lock_id) {
            return Ok(HandOver::HandedOver);
        }
        let changed = version.is_some_and(|version| item.get(VERSION) != Some(&s(version)));
        if changed || !line::held_by(&item, lock_id) {
            return Ok(HandOver::NotOurs {
                item: Some(item),
                retried,
            });
        }
        let over = Over::Released {
            lock_id,
            owner,
            held_for,
            version,
        };
        match send(table, resource, &item, over).await? {
            Grant::Granted { to, .. } => {
                debug!(resource, to = %to.short(), "lock handed to the next in line");
                return Ok(HandOver::HandedOver);
            }
            Grant::NoWaiter => return Ok(HandOver::NoWaiter),
            // A fenced grant met a concurrent write: computed again from the item as it is now.
            Grant::Conflict { retried: again } => {
                retried |= again;
                match inspect::read(table, resource).await? {
                    Some(now) => item = now,
                    None => {
                        return Ok(HandOver::NotOurs {
                            item: None,
                            retried,
                        })
                    }
                }
            }
            Grant::Refused {
                item: None,
                retried: again,
            } => {
                return Ok(HandOver::NotOurs {
                    item: None,
                    retried: retried || again,
                })
            }
            Grant::Refused {
                item: Some(next),
                retried: again,
            } => {
                retried |= again;
                item = next;
            }
        }
    }
    Ok(HandOver::NoWaiter)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fair::QueuedWaiter;
    use crate::schema::tests::assert_every_placeholder_named;
    use chrono::{TimeDelta, TimeZone};
    use std::time::Duration;

    #[test]
    fn a_grant_removes_at_most_forty_dead_entries_before_its_own() {
        assert_eq!(removed_places(0, 1), (vec![0], true));
        assert_eq!(removed_places(2, 5), (vec![0, 1, 2], false));
        let (places, whole) = removed_places(200, 201);
        assert_eq!(places.len(), MAX_REMOVED_DEAD + 1);
        assert_eq!(places.last(), Some(&200));
        assert_eq!(places[MAX_REMOVED_DEAD - 1], MAX_REMOVED_DEAD - 1);
        assert!(!whole);
    }

    fn entry(until: Option<DateTime<Utc>>) -> Entry {
        Entry {
            lock_id: LockId::generate(),
            fenced: false,
            waiter: QueuedWaiter {
                owner: "w".to_owned(),
                joined_at: Utc.with_ymd_and_hms(2026, 11, 24, 12, 0, 0).unwrap(),
                lease: Duration::from_secs(1),
                until,
            },
        }
    }

    #[test]
    fn the_grant_passes_over_waiters_whose_deadline_is_gone() {
        let now = Utc.with_ymd_and_hms(2026, 11, 24, 12, 0, 10).unwrap();
        let line = [
            entry(Some(now - TimeDelta::milliseconds(1))),
            entry(Some(now)),
            entry(None),
        ];
        let (place, to) = first_live(&line, now, None).unwrap();
        assert_eq!((place, to.lock_id), (1, line[1].lock_id));
        assert!(first_live(&line[..1], now, None).is_none());
        assert_eq!(first_live(&line[2..], now, None).unwrap().0, 0);
    }

    #[test]
    fn the_grant_passes_over_an_entry_of_the_holder() {
        let now = Utc.with_ymd_and_hms(2026, 11, 24, 12, 0, 10).unwrap();
        let line = [entry(None), entry(None)];
        let (place, to) = first_live(&line, now, Some(line[0].lock_id)).unwrap();
        assert_eq!((place, to.lock_id), (1, line[1].lock_id));
        assert!(first_live(&line[..1], now, Some(line[0].lock_id)).is_none());
    }

    #[test]
    fn every_placeholder_is_named() {
        for expr in [RELEASED, LAPSED] {
            assert_every_placeholder_named(expr);
        }
    }
}
