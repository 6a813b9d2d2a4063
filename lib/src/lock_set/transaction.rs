//! One try at a lock set: a `TransactWriteItems` of every member's acquisition write, and the
//! reading of its cancellation, member by member, with the rules of a single acquisition.
//!
//! ```text
//! TransactWriteItems  [member 1's write] [member 2's write] …     (each asks for ALL_OLD)
//!                     [fence of fenced member 1] …                 (fenced sets: one per exclusive member)
//!                     [the root path's fence]                      (fenced path locks)
//! ```
//!
//! A fenced set's exclusive members take one token, and each raises its fence item's token to it
//! in the same transaction, guessed as a single fenced acquisition guesses it; path locks raise
//! the root path's fence too ([`common_fence`](crate::path::common_fence)); a fence that refuses
//! a stale guess gives its current token, and the set is sent again with the next one.
//!
//! A cancellation carries one reason per member, in order. A member whose condition failed is read
//! as its single acquisition would read it: held (the set is refused, naming it and its holder),
//! lapsed shared holders in an exclusive member's way (cleared, then the set is tried again), a
//! full semaphore with lapsed holders (the member's write becomes the reclaim), our own write (an
//! SDK retry after a lost answer: the transaction was applied, so the whole set is ours). A
//! concurrent write to a member is contention. Nothing was written by a cancelled transaction,
//! and one that may have been applied (an answer lost for good, a dropped future) releases every
//! member in the background, as a single acquisition does.

use super::LockSet;
use crate::conditional::{answer, Answer, Transmissions};
use crate::error::Error;
use crate::fencing::FencingToken;
use crate::item::{Item, LOCK_ID};
use crate::lock::{Holder, Lock, LockId};
use crate::lock_table::LockTable;
use crate::mode::Mode;
use crate::ops::acquire::{self, NewItem, Request};
use crate::ops::fenced_acquire;
use crate::ops::in_flight::{AfterResend, InFlightAcquisition};
use crate::record::Record;
use crate::shared::acquire::{self as shared_acquire, Refusal as SharedRefusal, Write};
use crate::shared::writer::{self, SharedRefusal as InTheWay};
use crate::time::span;
use aws_sdk_dynamodb::operation::transact_write_items::TransactWriteItemsError;
use aws_sdk_dynamodb::types::TransactWriteItem;
use chrono::{DateTime, Utc};
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;

/// How many transactions one try sends at most: the first, and again after clearing lapsed
/// holders or turning a member's write into a reclaim.
const MAX_WRITES: usize = 3;
/// How many tries `try_acquire_set` makes when concurrent writes cancel them.
pub(crate) const MAX_CONFLICTS: u32 = 3;

/// The outcome of one try.
pub(crate) enum Attempt {
    Acquired(LockSet),
    Held {
        resource: String,
        holder: Holder,
        retry_at: Instant,
    },
    Conflict,
}

/// One member's acquisition in the making.
enum Member<'r> {
    Exclusive {
        request: &'r Request<'r>,
        /// Its lock carries the token guessed for it, if fenced.
        new: NewItem,
    },
    Shared {
        request: &'r Request<'r>,
        lock: Lock,
        version: String,
        now: DateTime<Utc>,
        reclaim: Vec<Record>,
    },
}

impl Member<'_> {
    fn lock(&self) -> &Lock {
        match self {
            Member::Exclusive { new, .. } => &new.lock,
            Member::Shared { lock, .. } => lock,
        }
    }

    fn resource(&self) -> &str {
        self.lock().resource()
    }

    /// The `Version` an exclusive member's write stores: its clean-up, if the set's acquisition
    /// is dropped unanswered, releases only that version. An idempotent acquisition of the same
    /// owner in another process may be handed the member back meanwhile (a saga's single acquire
    /// of one of its set's resources), writing a new version, and a clean-up of any version
    /// deleted the lock it went on believing it held (found by review). Shared holds are never
    /// handed back.
    fn stored_version(&self) -> Option<&str> {
        match self {
            Member::Exclusive { new, .. } => Some(new.version()),
            Member::Shared { .. } => None,
        }
    }

    /// The fence item raise of a fenced exclusive member.
    fn fence(&self, table: &LockTable) -> Option<Result<TransactWriteItem, Error>> {
        match self {
            Member::Exclusive { new, .. } => new.lock.fencing_token().map(|token| {
                fenced_acquire::fence_write(table, new.lock.resource(), token)
                    .map(|update| TransactWriteItem::builder().update(update).build())
            }),
            Member::Shared { .. } => None,
        }
    }

    fn write(&self, table: &LockTable) -> Result<TransactWriteItem, Error> {
        match self {
            Member::Exclusive { request, new } => {
                fenced_acquire::lock_write(table, request, new, &new.lock)
            }
            Member::Shared {
                request,
                lock,
                version,
                now,
                reclaim,
            } => Write::new(table, request, lock, version, *now, reclaim)?
                .into_transact_item(table, request.resource),
        }
    }
}

/// What a member's refusal says.
#[derive(Debug, PartialEq)]
enum MemberRefusal {
    OwnWrite,
    Held(Holder),
    /// Holders whose leases all ended stand in a member's way (with their modes).
    Lapsed(Vec<(Mode, Record)>),
    /// A full semaphore with lapsed holders: these, to reclaim.
    Reclaim(Vec<Record>),
    /// Refused by an item that changed since the member's write was made (a reclaim gone stale).
    Changed,
    /// Not refused: another member's refusal (or a conflict) cancelled the transaction.
    Passed,
}

/// One try at the set of `requests` (distinct resources).
pub(crate) async fn attempt(
    table: &Arc<LockTable>,
    requests: &[Request<'_>],
) -> Result<Attempt, Error> {
    let mut members = requests
        .iter()
        .map(|request| {
            Ok(match request.mode {
                Mode::Exclusive => {
                    let mut new = acquire::new_item(table, request)?;
                    if request.fencing {
                        let token =
                            fenced_acquire::first_guess(table, new.lock.acquired_at(), None);
                        new.lock = new.lock.clone().with_fencing_token(Some(token));
                    }
                    Member::Exclusive { request, new }
                }
                Mode::Shared | Mode::IntentShared | Mode::IntentExclusive => {
                    let (lock, version, now) = shared_acquire::new_lock(table, request)?;
                    Member::Shared {
                        request,
                        lock,
                        version,
                        now,
                        reclaim: Vec::new(),
                    }
                }
            })
        })
        .collect::<Result<Vec<_>, Error>>()?;
    // One token for every fenced member, above every first guess; raised at the root path's
    // fence too for path locks.
    let common_fence = crate::path::common_fence(
        members
            .iter()
            .filter(|member| member.lock().fencing_token().is_some())
            .map(Member::resource),
    );
    let token = set_token_of(&members);
    set_token(&mut members, token);
    // The members' lock ids and versions are the same in every transaction of the attempt.
    let mut after_resend = AfterResend::new(
        table,
        members
            .iter()
            .map(|member| {
                (
                    member.lock().handle().clone(),
                    member.stored_version().map(str::to_owned),
                )
            })
            .collect(),
    );
    for _ in 0..MAX_WRITES {
        let common_write = match (&common_fence, set_token_of(&members)) {
            (Some(resource), Some(token)) => Some(
                fenced_acquire::fence_write(table, resource, token)
                    .map(|update| TransactWriteItem::builder().update(update).build()),
            ),
            _ => None,
        };
        let writes = members
            .iter()
            .map(|member| member.write(table))
            .chain(members.iter().filter_map(|member| member.fence(table)))
            .chain(common_write)
            .collect::<Result<Vec<_>, Error>>()?;
        let in_flight: Vec<InFlightAcquisition<'_>> = members
            .iter()
            .map(|member| {
                InFlightAcquisition::new(table, member.lock().handle(), member.stored_version())
            })
            .collect();
        let transmissions = Transmissions::default();
        let sent = table
            .dynamodb
            .transact_write_items()
            .set_transact_items(Some(writes))
            .customize()
            .interceptor(transmissions.clone())
            .send();
        // An unsettled answer leaves every member's clean-up armed.
        let answer = answer("TransactWriteItems", sent.await, |err| match err {
            TransactWriteItemsError::TransactionCanceledException(cancelled) => {
                Some(cancelled.cancellation_reasons().to_vec())
            }
            _ => None,
        })?;
        // Only an answer that settles the outcome disarms the clean-ups: a cancellation by a
        // conflict after an attempt without a definite answer, or one whose reasons are not read,
        // may follow an earlier attempt of this very transaction that applied and whose answer
        // was lost (disarmed, its members stayed held by nobody for their lease; found by
        // review).
        let settled = || {
            in_flight
                .into_iter()
                .for_each(InFlightAcquisition::answered);
        };
        let reasons = match answer {
            Answer::Applied(_) => {
                settled();
                // (A late attempt of this very transaction is ignored: its client request
                // token, which the SDK sets, was applied. One of an earlier, cancelled
                // transaction is not.)
                after_resend.acquired(false);
                return Ok(acquired(table, &members));
            }
            Answer::Refused(reasons) => {
                after_resend.refused(transmissions.retried());
                reasons
            }
        };
        if let Some(unread) = UnreadReasons::of(&reasons) {
            return Err(Error::backend_other("TransactWriteItems", unread));
        }
        let received = Instant::now();
        let mut refusals = Vec::new();
        let mut conflict = false;
        for (member, reason) in members.iter().zip(&reasons) {
            match reason.code() {
                Some("ConditionalCheckFailed") => {
                    refusals.push(read_member(table, member, reason.item())?);
                }
                // Pushed all the same, so that the refusals stay aligned with the members.
                Some("TransactionConflict") => {
                    conflict = true;
                    refusals.push(MemberRefusal::Passed);
                }
                _ => refusals.push(MemberRefusal::Passed),
            }
        }
        if refusals.contains(&MemberRefusal::OwnWrite) {
            settled();
            let acquired = acquired(table, &members);
            after_resend.acquired(false);
            return Ok(acquired);
        }
        if let Some((member, holder)) =
            members
                .iter()
                .zip(&refusals)
                .find_map(|(member, refusal)| match refusal {
                    MemberRefusal::Held(holder) => Some((member, holder)),
                    _ => None,
                })
        {
            // (Held after a resend, an earlier attempt may still land once the members are free:
            // `after_resend` cleans up after it.)
            settled();
            let now = table.now();
            return Ok(Attempt::Held {
                resource: member.resource().to_owned(),
                retry_at: received + span(now, holder.expires_at) + Duration::from_millis(1),
                holder: holder.clone(),
            });
        }
        // The fences' reasons follow the members', in the order of the fenced members, then the
        // root path's.
        let mut stale = Vec::new();
        let fenced = members
            .iter()
            .filter(|member| member.lock().fencing_token().is_some())
            .map(|member| (member.resource(), member.lock().acquired_at()));
        let acquired_at = members.first().map(|member| member.lock().acquired_at());
        let common = common_fence.as_deref().zip(acquired_at);
        for ((resource, acquired_at), reason) in
            fenced.chain(common).zip(reasons.iter().skip(members.len()))
        {
            match reason.code() {
                Some("ConditionalCheckFailed") => stale.push(fenced_acquire::next_guess(
                    table,
                    resource,
                    acquired_at,
                    reason.item(),
                )?),
                Some("TransactionConflict") => conflict = true,
                _ => {}
            }
        }
        if conflict {
            // A conflict of an attempt sent once (or after attempts each refused by a client
            // error) wrote nothing: the clean-ups are disarmed. Armed, every conflicted try sent
            // a few writes per member and held `flush` up for a quarter second (found by review).
            // After an attempt without a definite answer, `after_resend` is armed, and cleans up
            // after the same members (kept armed here too, each member was released twice).
            settled();
            return Ok(Attempt::Conflict);
        }
        if refusals.is_empty() && stale.is_empty() {
            return Err(Error::UnexpectedResponse {
                operation: "TransactWriteItems",
                detail: "the transaction was cancelled without a reason this library reads",
            });
        }
        // Refused by conditions, each read: nothing of this transaction was written.
        settled();
        if let Some(next) = stale.into_iter().max() {
            set_token(&mut members, Some(next));
        }
        for (member, refusal) in members.iter_mut().zip(refusals) {
            match (member, refusal) {
                (member, MemberRefusal::Lapsed(lapsed)) => {
                    let now = table.now();
                    writer::clear_lapsed(table, member.resource(), &lapsed, now).await?;
                }
                (Member::Shared { reclaim, .. }, MemberRefusal::Reclaim(seen)) => *reclaim = seen,
                // A reclaim refused by a set that changed (a holder left): plain again.
                (Member::Shared { reclaim, .. }, MemberRefusal::Changed) => reclaim.clear(),
                _ => {}
            }
        }
    }
    Ok(Attempt::Conflict)
}

/// The highest token of the fenced members of `members` (all of them carry it once
/// [`set_token`] gave it).
fn set_token_of(members: &[Member<'_>]) -> Option<FencingToken> {
    members
        .iter()
        .filter_map(|member| member.lock().fencing_token())
        .max()
}

/// Gives every fenced member of `members` the token `token`.
fn set_token(members: &mut [Member<'_>], token: Option<FencingToken>) {
    for member in members {
        if let Member::Exclusive { new, .. } = member {
            if new.lock.fencing_token().is_some() {
                new.lock = new.lock.clone().with_fencing_token(token);
            }
        }
    }
}

/// Reads the refusal of `member` from the item that refused it.
fn read_member(
    table: &LockTable,
    member: &Member<'_>,
    item: Option<&Item>,
) -> Result<MemberRefusal, Error> {
    let resource = member.resource();
    let item = item.ok_or(Error::UnexpectedResponse {
        operation: "TransactWriteItems",
        detail: "a member's condition failed but no item came back for ALL_OLD",
    })?;
    if !item.contains_key(LOCK_ID) {
        return Err(table.not_a_lock_item(item));
    }
    let ours = member.lock().lock_id();
    match member {
        Member::Exclusive { .. } => read_exclusive(table, resource, ours, item, table.now()),
        // By the reading its write was made with, as the reclaim it leads to is: read later, a
        // holder that lapsed in between was counted out, the reclaim kept it live, and the set
        // left one holder more than the item takes.
        Member::Shared { request, now, .. } => Ok(
            match shared_acquire::read_refused(request, ours, item, *now)? {
                SharedRefusal::OwnWrite => MemberRefusal::OwnWrite,
                SharedRefusal::Blocked(holder) => MemberRefusal::Held(holder),
                SharedRefusal::Reclaim(seen) => MemberRefusal::Reclaim(seen),
                SharedRefusal::Clear(lapsed) => MemberRefusal::Lapsed(lapsed),
                SharedRefusal::Changed(_) => MemberRefusal::Changed,
            },
        ),
    }
}

/// An exclusive member's refusal, by the single exclusive acquisition's rules.
fn read_exclusive(
    table: &LockTable,
    resource: &str,
    ours: LockId,
    item: &Item,
    now: DateTime<Utc>,
) -> Result<MemberRefusal, Error> {
    if let Some(in_the_way) = acquire::shared_in_the_way(resource, Some(item), now)? {
        return Ok(match in_the_way {
            InTheWay::Live(holder) => MemberRefusal::Held(holder),
            InTheWay::Lapsed(lapsed) => MemberRefusal::Lapsed(lapsed),
        });
    }
    Ok(match table.record(resource, Some(item))? {
        Some(record) if record.lock_id == ours => MemberRefusal::OwnWrite,
        Some(record) if record.holder.is_live_at(now) => MemberRefusal::Held(record.holder),
        _ => MemberRefusal::Changed,
    })
}

/// Every member taken: each is remembered as a single acquisition is.
fn acquired(table: &LockTable, members: &[Member<'_>]) -> Attempt {
    let locks = members
        .iter()
        .map(|member| acquire::took(table, member.lock().clone()))
        .collect();
    Attempt::Acquired(LockSet { locks })
}

/// The reasons of a cancelled transaction other than a condition, a conflict, or none (a member
/// that did not fail): a validation error (an item grown past 400 KB, say), throttling,
/// capacity. Such a transaction was read as refused by nobody, sent again, and at last reported
/// as a conflict, or waited on until the deadline; it is an error naming the reasons.
#[derive(Debug, PartialEq)]
pub(crate) struct UnreadReasons(Vec<String>);

impl UnreadReasons {
    /// The reasons among `reasons` this library does not read, if any.
    fn of(reasons: &[aws_sdk_dynamodb::types::CancellationReason]) -> Option<Self> {
        let unread: Vec<String> = reasons
            .iter()
            .filter_map(|reason| reason.code())
            .filter(|code| {
                !matches!(
                    *code,
                    "None" | "ConditionalCheckFailed" | "TransactionConflict"
                )
            })
            .map(str::to_owned)
            .collect();
        (!unread.is_empty()).then_some(UnreadReasons(unread))
    }
}

impl std::fmt::Display for UnreadReasons {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "the lock set's transaction was cancelled: {}",
            self.0.join(", ")
        )
    }
}

impl std::error::Error for UnreadReasons {}

#[cfg(test)]
mod tests {
    use super::*;
    use aws_sdk_dynamodb::types::CancellationReason;

    fn reason(code: &str) -> CancellationReason {
        CancellationReason::builder().code(code).build()
    }

    #[test]
    fn reasons_other_than_conditions_and_conflicts_are_errors() {
        let read = [
            reason("None"),
            reason("ConditionalCheckFailed"),
            reason("TransactionConflict"),
        ];
        assert_eq!(UnreadReasons::of(&read), None);
        let unread = [
            reason("None"),
            reason("ValidationError"),
            reason("ThrottlingError"),
        ];
        let error = UnreadReasons::of(&unread).expect("unread reasons");
        assert_eq!(
            error.to_string(),
            "the lock set's transaction was cancelled: ValidationError, ThrottlingError"
        );
        assert_eq!(
            UnreadReasons::of(&[CancellationReason::builder().build()]),
            None
        );
    }
}
