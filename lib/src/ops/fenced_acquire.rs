//! The fenced acquire: the acquire Put of [`acquire`](super::acquire) and the raise of the
//! resource's fence item token, in one `TransactWriteItems`, applied together or not at all, so that
//! token order is acquisition order.
//!
//! Transactions return no values, so the token is guessed rather than read: the larger of one more
//! than a token known to be issued (the holder's, from an earlier refusal) and the clock in
//! microseconds plus the client's token offset. A stale guess fails only the fence item's
//! condition, whose answer carries the current token; the attempt is retried at once with the next
//! one, and the offset raised so that the next guess is not stale either (a hybrid logical clock).
//! A cancellation is read from its reasons: the lock item's refusal is read as the plain acquire's,
//! a concurrent write is contention, anything else an error.

use super::acquire::{self, Attempt, NewItem, Request};
use super::in_flight::InFlightAcquisition;
use super::kept;
use crate::conditional::{answer, Answer, Transmissions};
use crate::error::Error;
use crate::fencing::FencingToken;
use crate::item::{self, Item};
use crate::lock::Lock;
use crate::lock_table::LockTable;
use crate::record;
use aws_sdk_dynamodb::operation::transact_write_items::TransactWriteItemsError;
use aws_sdk_dynamodb::types::{
    CancellationReason, Put, ReturnValuesOnConditionCheckFailure, TransactWriteItem, Update,
};
use std::fmt;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use tracing::debug;

/// A fenced acquisition also raises the fence item's token (in the same transaction)…
pub(crate) const FENCE_UPDATE: &str = "SET #fencing_token = :fencing_token";
/// …which must only grow. The item is new, or a fence item (which always has a token): an
/// application's item at the fence key has none, fails the comparison, and is left alone.
pub(crate) const FENCE_CONDITION: &str =
    "attribute_not_exists(#pk) OR #fencing_token < :fencing_token";

/// How many times a fenced acquisition re-reads a fence token that moved under it, or retries a
/// transaction cancelled by a conflict, within one attempt.
pub(crate) const MAX_FENCE_TRIES: u32 = 3;

/// Why a fenced acquisition's transaction was cancelled, when that settles what happens next.
#[derive(Debug, PartialEq)]
pub(crate) enum Cancellation {
    /// The lock item's condition failed; the item that failed it (`ALL_OLD`).
    LockRefused(Option<Item>),
    /// Only the fence item's condition failed: the token guess was stale; the fence item.
    FenceRefused(Option<Item>),
    /// A concurrent write to either item.
    Conflict,
}

/// The fenced attempt of `new`. `floor` is a fencing token known to be issued already.
pub(crate) async fn put(
    table: &Arc<LockTable>,
    request: &Request<'_>,
    new: NewItem,
    floor: Option<FencingToken>,
) -> Result<Attempt, Error> {
    let mut token = first_guess(table, new.lock.acquired_at(), floor);
    for _ in 0..MAX_FENCE_TRIES {
        let lock = new.lock.clone().with_fencing_token(Some(token));
        let (write, fence) = transaction(table, request, &new, &lock, token)?;
        let in_flight = InFlightAcquisition::new(table, lock.handle(), Some(new.version()));
        let transmissions = Transmissions::default();
        let sent = table
            .dynamodb
            .transact_write_items()
            .transact_items(write)
            .transact_items(TransactWriteItem::builder().update(fence).build())
            .customize()
            .interceptor(transmissions.clone())
            .send();
        // Any other error leaves `in_flight` armed: the transaction may have been applied by an
        // attempt whose answer was lost, and what it wrote is released.
        let answer = answer("TransactWriteItems", sent.await, |err| match err {
            TransactWriteItemsError::TransactionCanceledException(cancelled) => {
                read_cancellation(cancelled.cancellation_reasons())
            }
            _ => None,
        })?;
        let cancellation = match answer {
            Answer::Applied(_) => {
                in_flight.answered();
                // A transaction returns nothing: the payload is known only if this one wrote it.
                let lock = lock.with_data(request.data.map(<[u8]>::to_vec));
                return Ok(acquire::acquired(table, lock));
            }
            Answer::Refused(cancellation) => cancellation,
        };
        match cancellation {
            // The lock item refused it (our own LockID there, if an earlier attempt wrote it).
            Cancellation::LockRefused(item) => {
                let operation = "TransactWriteItems";
                let attempt =
                    acquire::refused(table, request, lock, item.as_ref(), operation).await;
                in_flight.refused(transmissions.retried(), &attempt);
                return attempt;
            }
            // Only the fence refused: nothing of ours is written (an earlier attempt's Put would
            // have failed the lock's condition too), and the next try reuses this LockID, which a
            // clean-up in the background must not delete.
            Cancellation::FenceRefused(item) => {
                in_flight.answered();
                let next = next_guess(
                    table,
                    request.resource,
                    new.lock.acquired_at(),
                    item.as_ref(),
                )?;
                debug!(resource = request.resource, %next, guessed = %token, "fencing token guess was stale");
                token = next;
            }
            Cancellation::Conflict => return Ok(Attempt::Conflict),
        }
    }
    Ok(Attempt::Conflict)
}

/// The transaction's two writes: the lock item's Put (an Update keeping the payload, on a client
/// that keeps items) and the fence item's token raise.
fn transaction(
    table: &LockTable,
    request: &Request<'_>,
    new: &NewItem,
    lock: &Lock,
    token: FencingToken,
) -> Result<(TransactWriteItem, Update), Error> {
    let write = lock_write(table, request, new, lock)?;
    Ok((write, fence_write(table, request.resource, token)?))
}

/// The raise of `resource`'s fence item to `token`, inside a transaction, asking for the refused
/// item (whose token a stale guess then learns).
pub(crate) fn fence_write(
    table: &LockTable,
    resource: &str,
    token: FencingToken,
) -> Result<Update, Error> {
    Update::builder()
        .table_name(&table.name)
        .set_key(Some(table.schema.fence_key(resource)))
        .update_expression(FENCE_UPDATE)
        .condition_expression(FENCE_CONDITION)
        .set_expression_attribute_names(Some(table.names_for(&[FENCE_UPDATE, FENCE_CONDITION])))
        .expression_attribute_values(":fencing_token", item::token(token))
        .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
        .build()
        .map_err(|e| Error::backend_other("TransactWriteItems", e))
}

/// The first token to guess for an acquisition at `acquired_at`: the clock in microseconds plus
/// the client's offset, and above `floor` (a token known to be issued).
pub(crate) fn first_guess(
    table: &LockTable,
    acquired_at: chrono::DateTime<chrono::Utc>,
    floor: Option<FencingToken>,
) -> FencingToken {
    let clock_micros = u64::try_from(acquired_at.timestamp_micros()).unwrap_or(0);
    let guess = clock_micros.saturating_add(table.token_offset.load(Ordering::Relaxed));
    FencingToken::new(guess.max(floor.map_or(0, |t| t.value().saturating_add(1))))
}

/// The next guess after the fence item `item` refused one made at `acquired_at`: one more than
/// its token. Raises the client's offset so that its next first guess is not stale either.
pub(crate) fn next_guess(
    table: &LockTable,
    resource: &str,
    acquired_at: chrono::DateTime<chrono::Utc>,
    item: Option<&Item>,
) -> Result<FencingToken, Error> {
    let current = match current_token(resource, item)? {
        Some(current) => current,
        None => return Err(table.not_a_lock_item(&item.cloned().unwrap_or_default())),
    };
    // The largest token has no successor: an item that holds it can only have been written by
    // hand, and no later token can be issued for the resource.
    let token =
        FencingToken::new(
            current
                .value()
                .checked_add(1)
                .ok_or_else(|| Error::MalformedItem {
                    resource: resource.to_owned(),
                    attribute: crate::item::FENCING_TOKEN,
                    problem: "is the largest token there is; no later one can be issued",
                })?,
        );
    let clock_micros = u64::try_from(acquired_at.timestamp_micros()).unwrap_or(0);
    table.token_offset.fetch_max(
        token.value().saturating_sub(clock_micros),
        Ordering::Relaxed,
    );
    Ok(token)
}

/// The lock item's write of an exclusive acquisition inside a transaction: the acquire's Put (an
/// Update keeping the payload, on a client that keeps items), asking for the refused item.
pub(crate) fn lock_write(
    table: &LockTable,
    request: &Request<'_>,
    new: &NewItem,
    lock: &Lock,
) -> Result<TransactWriteItem, Error> {
    let built = |e| Error::backend_other("TransactWriteItems", e);
    Ok(if table.delete_on_release {
        let put = Put::builder()
            .table_name(&table.name)
            .set_item(Some(new.encode(table, lock, request)))
            .condition_expression(new.condition)
            .set_expression_attribute_names(Some(table.names_for(&[new.condition])))
            .set_expression_attribute_values(new.values.clone())
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
            .build()
            .map_err(built)?;
        TransactWriteItem::builder().put(put).build()
    } else {
        let (update, values) = new.kept_update(table, lock, request);
        // Only where this attempt has not written already, as a single keeping acquisition: a
        // copy of an applied transaction that DynamoDB's token no longer covers (past its ten
        // minutes, or after a resend of it was cancelled) found the released item free and took
        // it again for a holder that had gone.
        let condition = kept::acquire_condition(new.condition);
        let update = Update::builder()
            .table_name(&table.name)
            .set_key(Some(table.key(request.resource)))
            .update_expression(&update)
            .condition_expression(&condition)
            .set_expression_attribute_names(Some(table.names_for(&[&update, &condition])))
            .set_expression_attribute_values(Some(values))
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
            .build()
            .map_err(built)?;
        TransactWriteItem::builder().update(update).build()
    })
}

/// Reads a cancelled transaction's reasons (the lock item's Put first, the fence's Update
/// second); `None` for a cancellation that settles nothing, which is an error.
pub(crate) fn read_cancellation(reasons: &[CancellationReason]) -> Option<Cancellation> {
    let code = |i: usize| reasons.get(i).and_then(CancellationReason::code);
    let item = |i: usize| reasons.get(i).and_then(CancellationReason::item).cloned();
    if code(0) == Some("ConditionalCheckFailed") {
        return Some(Cancellation::LockRefused(item(0)));
    }
    if code(1) == Some("ConditionalCheckFailed") {
        return Some(Cancellation::FenceRefused(item(1)));
    }
    if (0..2).any(|i| code(i) == Some("TransactionConflict")) {
        return Some(Cancellation::Conflict);
    }
    None
}

/// The token in the fence item that refused a guess; `None` if the item there has no token, which
/// makes it no fence item but an application's.
fn current_token(resource: &str, item: Option<&Item>) -> Result<Option<FencingToken>, Error> {
    let item = item.ok_or(Error::UnexpectedResponse {
        operation: "TransactWriteItems",
        detail: "the fence condition failed but no item came back for ALL_OLD",
    })?;
    record::decode_fence(resource, item)
}

/// Every try of a fenced acquisition was cancelled by concurrent writes to the same items.
#[derive(Debug)]
pub(crate) struct TransactionConflicts(pub(crate) u32);

impl fmt::Display for TransactionConflicts {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} tries cancelled by concurrent writes to the lock item",
            self.0
        )
    }
}

impl std::error::Error for TransactionConflicts {}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::tests::assert_every_placeholder_named;
    use aws_sdk_dynamodb::types::AttributeValue;

    fn reason(code: &str, item: Option<Item>) -> CancellationReason {
        CancellationReason::builder()
            .code(code)
            .set_item(item)
            .build()
    }

    fn fence_item(token: &str) -> Item {
        Item::from([(
            item::FENCING_TOKEN.to_owned(),
            AttributeValue::N(token.into()),
        )])
    }

    #[test]
    fn the_lock_items_refusal_is_read_as_the_acquire_puts() {
        let lock_item = fence_item("1");
        let reasons = [
            reason("ConditionalCheckFailed", Some(lock_item.clone())),
            reason("None", None),
        ];
        assert_eq!(
            read_cancellation(&reasons),
            Some(Cancellation::LockRefused(Some(lock_item)))
        );
    }

    #[test]
    fn a_refusal_of_the_fence_alone_is_a_stale_guess() {
        let reasons = [
            reason("None", None),
            reason("ConditionalCheckFailed", Some(fence_item("42"))),
        ];
        let Some(Cancellation::FenceRefused(item)) = read_cancellation(&reasons) else {
            panic!("not a fence refusal");
        };
        assert_eq!(
            current_token("r", item.as_ref()).unwrap(),
            Some(FencingToken::new(42))
        );
        let app_item = Item::from([("PK".to_owned(), AttributeValue::S("LOCK#r".into()))]);
        assert_eq!(current_token("r", Some(&app_item)).unwrap(), None);
        assert!(matches!(
            current_token("r", None),
            Err(Error::UnexpectedResponse { .. })
        ));
    }

    #[test]
    fn a_concurrent_write_to_either_item_is_a_conflict() {
        for reasons in [
            [reason("TransactionConflict", None), reason("None", None)],
            [reason("None", None), reason("TransactionConflict", None)],
        ] {
            assert_eq!(read_cancellation(&reasons), Some(Cancellation::Conflict));
        }
    }

    #[test]
    fn any_other_cancellation_settles_nothing() {
        let reasons = [reason("ThrottlingError", None), reason("None", None)];
        assert_eq!(read_cancellation(&reasons), None);
        assert_eq!(read_cancellation(&[]), None);
    }

    #[test]
    fn every_placeholder_is_named() {
        assert_every_placeholder_named(FENCE_UPDATE);
        assert_every_placeholder_named(FENCE_CONDITION);
    }
}
