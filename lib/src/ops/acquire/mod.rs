//! Acquire: one conditional PutItem of a new lock item, with a new `LockID` and `Version`, that
//! succeeds only if no live lock stands under the client's takeover rule.
//!
//! The request asks for the refused item (`ALL_OLD`), which is all a refused attempt needs to
//! know, at no extra request: who holds the lock and until when (the waiter's next try), whether
//! the item is our own write (an SDK retry after a lost answer: a success, not contention), and,
//! for an idempotent request, whether the holder is this very owner (handed back, extended first
//! under the observed-lease rule). The fenced variant sends the same Put inside a transaction
//! ([`fenced_acquire`](super::fenced_acquire)) and reads a refusal with the same rules, here.
//!
//! While the write is in flight an [`InFlightAcquisition`] is armed: an attempt dropped, or
//! answered with an error that leaves the outcome unknown, releases what it may have written.

mod refusal;

pub(crate) use refusal::{refused, shared_in_the_way};

use super::in_flight::{self, InFlightAcquisition};
use super::kept;
use crate::conditional::{answer, update_refused, Answer, Transmissions};
use crate::error::{Error, InvalidInput};
use crate::holds::ResentWrite;
use crate::item::{s, Item};
use crate::limits;
use crate::lock::{Holder, Lock, LockHandle, LockId};
use crate::lock_table::LockTable;
use crate::mode::Mode;
use crate::options::AcquireOptions;
use crate::record::{self, Written};
use crate::takeover::TakeoverRule;
use crate::time::after;
use crate::timestamp;
use aws_sdk_dynamodb::operation::put_item::PutItemError;
use aws_sdk_dynamodb::types::{AttributeValue, ReturnValue, ReturnValuesOnConditionCheckFailure};
use chrono::{DateTime, Utc};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;

/// Acquire (PutItem) succeeds if no item exists or the existing one is a lock item (it has a
/// `LockID`: an application's item sharing the table is never overwritten, whatever its
/// `ExpiresAt` says) that is kept without a holder (no `Owner`, see [`kept`](super::kept)) or has
/// expired, and has no shared holder ([`shared`](crate::shared)). Every exclusive condition
/// below ends with that last clause.
pub(crate) const ACQUIRE_CONDITION: &str = "attribute_not_exists(#pk) OR (attribute_exists(#lock_id) AND (attribute_not_exists(#owner) OR #expires_at < :now) AND attribute_not_exists(#shared) AND attribute_not_exists(#intent_shared) AND attribute_not_exists(#intent_exclusive))";
/// A fair acquisition ([`fair`](crate::fair)): [`ACQUIRE_CONDITION`], and nobody waits in the
/// lock's line (a lapsed holder's lock with waiters is theirs: one of them grants it).
pub(crate) const FAIR_ACQUIRE_CONDITION: &str = "attribute_not_exists(#pk) OR (attribute_exists(#lock_id) AND (attribute_not_exists(#owner) OR #expires_at < :now) AND attribute_not_exists(#shared) AND attribute_not_exists(#intent_shared) AND attribute_not_exists(#intent_exclusive) AND attribute_not_exists(#queue))";
/// Acquire in observed-lease mode, before any version has been seen unchanged for a lease.
pub(crate) const ACQUIRE_FREE_CONDITION: &str =
    "attribute_not_exists(#pk) OR (attribute_exists(#lock_id) AND attribute_not_exists(#owner) AND attribute_not_exists(#shared) AND attribute_not_exists(#intent_shared) AND attribute_not_exists(#intent_exclusive))";
/// Acquire in observed-lease mode: take over the version seen unchanged for a whole lease, on a
/// lock item only.
pub(crate) const TAKEOVER_CONDITION: &str = "attribute_not_exists(#pk) OR (attribute_exists(#lock_id) AND (attribute_not_exists(#owner) OR #version = :version) AND attribute_not_exists(#shared) AND attribute_not_exists(#intent_shared) AND attribute_not_exists(#intent_exclusive))";
/// [`AcquireOptions::only_if_exists`]: [`ACQUIRE_CONDITION`] without "no item".
pub(crate) const ACQUIRE_EXISTING_CONDITION: &str =
    "attribute_exists(#lock_id) AND (attribute_not_exists(#owner) OR #expires_at < :now) AND attribute_not_exists(#shared) AND attribute_not_exists(#intent_shared) AND attribute_not_exists(#intent_exclusive)";
/// [`AcquireOptions::only_if_exists`]: [`ACQUIRE_FREE_CONDITION`] without "no item".
pub(crate) const ACQUIRE_FREE_EXISTING_CONDITION: &str =
    "attribute_exists(#lock_id) AND attribute_not_exists(#owner) AND attribute_not_exists(#shared) AND attribute_not_exists(#intent_shared) AND attribute_not_exists(#intent_exclusive)";
/// [`AcquireOptions::only_if_exists`]: [`TAKEOVER_CONDITION`] without "no item".
pub(crate) const TAKEOVER_EXISTING_CONDITION: &str =
    "attribute_exists(#lock_id) AND (attribute_not_exists(#owner) OR #version = :version) AND attribute_not_exists(#shared) AND attribute_not_exists(#intent_shared) AND attribute_not_exists(#intent_exclusive)";

/// A validated acquisition request.
#[derive(Clone, Copy)]
pub(crate) struct Request<'a> {
    pub(crate) resource: &'a str,
    pub(crate) owner: &'a str,
    pub(crate) lease: Duration,
    pub(crate) idempotent: bool,
    pub(crate) fencing: bool,
    pub(crate) only_if_exists: bool,
    pub(crate) data: Option<&'a [u8]>,
    pub(crate) mode: Mode,
    /// A semaphore's permits (shared mode only).
    pub(crate) permits: Option<u32>,
    /// A waiting acquisition takes a place in the lock's line ([`fair`](crate::fair)).
    pub(crate) fair: bool,
}

impl<'a> Request<'a> {
    /// Validates `opts` for `resource`, with the client's owner and lease where `opts` has none.
    pub(crate) fn new(
        table: &LockTable,
        resource: &'a str,
        opts: &'a AcquireOptions,
        (default_owner, default_lease): (&'a str, Duration),
    ) -> Result<Self, Error> {
        table.check_resource(resource)?;
        let owner = opts.owner_name().unwrap_or(default_owner);
        limits::owner(owner)?;
        let lease = limits::lease(opts.lease_duration().unwrap_or(default_lease))?;
        let data = opts.data_bytes();
        data.map(limits::data).transpose()?;
        let mode = opts.lock_mode();
        let permits = opts.permit_count().map(limits::permits).transpose()?;
        if permits.is_some() && mode != Mode::Shared && mode != Mode::Exclusive {
            return Err(InvalidInput::NotForMode {
                field: "permits",
                mode,
            }
            .into());
        }
        let not_for_mode = |field| InvalidInput::NotForMode { field, mode };
        match mode {
            Mode::Exclusive if permits.is_some() => return Err(not_for_mode("permits").into()),
            Mode::Exclusive => {}
            Mode::Shared | Mode::IntentShared | Mode::IntentExclusive => {
                let unsupported = [
                    ("fencing", opts.is_fencing()),
                    ("idempotent", opts.is_idempotent()),
                    ("data", data.is_some()),
                    (
                        "takeover_rule",
                        table.takeover == TakeoverRule::ObservedLease,
                    ),
                ];
                if let Some((field, _)) = unsupported.iter().find(|(_, set)| *set) {
                    return Err(not_for_mode(field).into());
                }
            }
        }
        if opts.is_fair() {
            if mode != Mode::Exclusive {
                return Err(not_for_mode("fair").into());
            }
            let unsupported = [
                ("idempotent", opts.is_idempotent()),
                ("data", data.is_some()),
                ("only_if_exists", opts.is_only_if_exists()),
                (
                    "takeover_rule",
                    table.takeover == TakeoverRule::ObservedLease,
                ),
            ];
            if let Some((field, _)) = unsupported.iter().find(|(_, set)| *set) {
                return Err(InvalidInput::NotForFair { field }.into());
            }
        }
        Ok(Request {
            resource,
            owner,
            lease,
            idempotent: opts.is_idempotent(),
            fencing: opts.is_fencing(),
            only_if_exists: opts.is_only_if_exists(),
            data,
            mode,
            permits,
            fair: opts.is_fair(),
        })
    }
}

/// The outcome of one acquisition attempt.
pub(crate) enum Attempt {
    Acquired(Lock),
    /// Someone else holds the lock; this client's rule lets it try again at `retry_at`.
    /// `readers`: the holders in the way of this exclusive attempt are shared ones (a waiting
    /// acquirer announces itself, see [`shared::writer`](crate::shared::writer)).
    Held {
        holder: Holder,
        retry_at: Instant,
        readers: bool,
    },
    /// The item was freed meanwhile (shared holders whose leases had all ended were cleared from
    /// it, or the refusal showed it released): try again at once.
    Cleared,
    /// A concurrent write to the same items cancelled a fenced acquisition's transaction, or
    /// changed the item between a refusal and the reclaim that followed it.
    Conflict,
}

/// A new lock item about to be written, with its condition.
pub(crate) struct NewItem {
    pub(crate) lock: Lock,
    version: String,
    ttl: Option<(String, i64)>,
    pub(crate) condition: &'static str,
    pub(crate) values: Option<HashMap<String, AttributeValue>>,
}

impl NewItem {
    /// The `Version` the write stores.
    pub(crate) fn version(&self) -> &str {
        &self.version
    }

    /// What is written besides `lock`'s own values.
    fn written<'a>(&'a self, table: &'a LockTable, request: &Request<'a>) -> Written<'a> {
        Written {
            version: &self.version,
            ttl: self.ttl.as_ref().map(|(name, at)| (name.as_str(), *at)),
            data: request.data,
            namespace: table.schema.namespace_name(),
        }
    }

    /// The lock item of `lock` (a variant of this item's lock, such as with a fencing token).
    pub(crate) fn encode(&self, table: &LockTable, lock: &Lock, request: &Request<'_>) -> Item {
        record::encode(
            table.key(lock.resource()),
            lock,
            &self.written(table, request),
        )
    }

    /// The update that writes `lock` over a kept item, keeping its payload unless `request` sets
    /// one, and the values of both the update and the condition.
    pub(crate) fn kept_update(
        &self,
        table: &LockTable,
        lock: &Lock,
        request: &Request<'_>,
    ) -> (String, Item) {
        let (update, mut values) = kept::acquire_update(lock, &self.written(table, request));
        values.extend(self.values.clone().unwrap_or_default());
        (update, values)
    }
}

/// The item and condition of the next attempt: a new `LockID` and `Version`, a lease from now.
pub(crate) fn new_item(table: &LockTable, request: &Request<'_>) -> Result<NewItem, Error> {
    let sent = Instant::now();
    let now = table.now();
    let handle = LockHandle::new(request.resource, request.owner, LockId::generate());
    let lock = Lock::new(
        handle,
        now,
        after(now, request.lease, "lease")?,
        sent + request.lease,
    );
    let version = uuid::Uuid::new_v4().to_string();
    let ttl = table
        .ttl(lock.expires_at())?
        .map(|(name, at)| (name.to_owned(), at));
    let (condition, values) = condition(table, request, now, sent);
    Ok(NewItem {
        lock,
        version,
        ttl,
        condition,
        values,
    })
}

/// The acquire condition under this client's takeover rule, and its values.
fn condition(
    table: &LockTable,
    request: &Request<'_>,
    now: DateTime<Utc>,
    sent: Instant,
) -> (&'static str, Option<HashMap<String, AttributeValue>>) {
    let pick = |any, existing| {
        if request.only_if_exists {
            existing
        } else {
            any
        }
    };
    let (condition, value) = match table.takeover {
        // Fair requests are neither `only_if_exists` nor under the observed-lease rule.
        TakeoverRule::WallClock if request.fair => (
            FAIR_ACQUIRE_CONDITION,
            Some((":now", s(timestamp::format(now)))),
        ),
        TakeoverRule::WallClock => (
            pick(ACQUIRE_CONDITION, ACQUIRE_EXISTING_CONDITION),
            Some((":now", s(timestamp::format(now)))),
        ),
        TakeoverRule::ObservedLease => match table.observations.ripe(request.resource, sent) {
            Some(version) => (
                pick(TAKEOVER_CONDITION, TAKEOVER_EXISTING_CONDITION),
                Some((":version", s(version))),
            ),
            None => (
                pick(ACQUIRE_FREE_CONDITION, ACQUIRE_FREE_EXISTING_CONDITION),
                None,
            ),
        },
    };
    let values = value.map(|(name, value)| HashMap::from([(name.to_owned(), value)]));
    (condition, values)
}

/// The unfenced attempt: one conditional PutItem of `new`, or, on a client that keeps items,
/// one conditional UpdateItem that keeps the payload it finds.
pub(crate) async fn put(
    table: &Arc<LockTable>,
    request: &Request<'_>,
    new: NewItem,
) -> Result<Attempt, Error> {
    if !table.delete_on_release {
        return update(table, request, new).await;
    }
    let in_flight = InFlightAcquisition::new(table, new.lock.handle(), Some(new.version()));
    let transmissions = Transmissions::default();
    let sent = table
        .dynamodb
        .put_item()
        .table_name(&table.name)
        .set_item(Some(new.encode(table, &new.lock, request)))
        .condition_expression(new.condition)
        .set_expression_attribute_names(Some(table.names_for(&[new.condition])))
        .set_expression_attribute_values(new.values.clone())
        .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
        .customize()
        .interceptor(transmissions.clone())
        .send();
    // An answer that does not say whether the write was applied (a timeout, a lost connection
    // after the SDK's last retry) is an error here, and `in_flight` is dropped armed, releasing
    // what may have been written.
    let answer = answer("PutItem", sent.await, |err| match err {
        PutItemError::ConditionalCheckFailedException(failed) => Some(failed.item().cloned()),
        _ => None,
    })?;
    match answer {
        Answer::Applied(_) => {
            in_flight.answered();
            if transmissions.resent() {
                in_flight::written_after_resend(
                    table,
                    new.lock.handle(),
                    ResentWrite::Acquisition(Some(new.version().to_owned())),
                );
            }
            let lock = new.lock.with_data(request.data.map(<[u8]>::to_vec));
            Ok(acquired(table, lock))
        }
        Answer::Refused(item) => {
            let (own, version) = (new.lock.handle().clone(), new.version().to_owned());
            let attempt = refused(table, request, new.lock, item.as_ref(), "PutItem").await;
            // Its own write found, after the SDK sent it more than once: an earlier attempt may
            // land after the release, as after a resend applied (found by review).
            if transmissions.resent()
                && matches!(&attempt, Ok(Attempt::Acquired(lock)) if lock.lock_id() == own.lock_id())
            {
                in_flight::written_after_resend(
                    table,
                    &own,
                    ResentWrite::Acquisition(Some(version)),
                );
            }
            in_flight.refused(transmissions.retried(), &attempt);
            attempt
        }
    }
}

/// The unfenced attempt of a client that keeps items: one conditional UpdateItem, which returns
/// the item as written (`ALL_NEW`) for the payload it kept.
async fn update(
    table: &Arc<LockTable>,
    request: &Request<'_>,
    new: NewItem,
) -> Result<Attempt, Error> {
    let (update, values) = new.kept_update(table, &new.lock, request);
    let condition = kept::acquire_condition(new.condition);
    let in_flight = InFlightAcquisition::new(table, new.lock.handle(), Some(new.version()));
    let transmissions = Transmissions::default();
    let sent = table
        .update_item(request.resource, &update, &condition)
        .set_expression_attribute_values(Some(values))
        .return_values(ReturnValue::AllNew)
        .customize()
        .interceptor(transmissions.clone())
        .send();
    // As for the PutItem: an unsettled answer leaves `in_flight` armed.
    let answer = answer("UpdateItem", sent.await, update_refused)?;
    match answer {
        Answer::Applied(out) => {
            in_flight.answered();
            let data = out.attributes().and_then(record::data);
            Ok(acquired(table, new.lock.with_data(data)))
        }
        // Refused by its own earlier write, released since (an SDK resend whose first attempt
        // applied, then a force release, say): the lock is free, and this attempt holds nothing.
        Answer::Refused(Some(item))
            if record::is_released(&item) && record::lock_id(&item) == Some(new.lock.lock_id()) =>
        {
            in_flight.answered();
            Ok(Attempt::Cleared)
        }
        Answer::Refused(item) => {
            let attempt = refused(table, request, new.lock, item.as_ref(), "UpdateItem").await;
            in_flight.refused(transmissions.retried(), &attempt);
            attempt
        }
    }
}

/// A successful attempt.
pub(crate) fn acquired(table: &LockTable, lock: Lock) -> Attempt {
    Attempt::Acquired(took(table, lock))
}

/// This client has taken `lock`: it no longer waits on the resource, and its waiters know who
/// holds it.
pub(crate) fn took(table: &LockTable, lock: Lock) -> Lock {
    // A lock this client removed before this acquisition's answer came (a force release that
    // read it, a release by owner that returned it) is not remembered as held: `release_all`
    // and the client's waiters went on counting on a deleted lock.
    if table.holds.release_started(lock.lock_id()) {
        return lock;
    }
    table.holds.acquired(
        lock.handle(),
        lock.acquired_at(),
        lock.valid_until_instant(),
    );
    now_held(table, lock)
}

/// This client's own live lock is handed back to an idempotent acquisition, as [`took`] records
/// it, unless its release started through this client (checked and recorded in one step): then
/// `None`, the lock being released is not handed back.
pub(crate) fn took_back(table: &LockTable, lock: Lock) -> Option<Lock> {
    table
        .holds
        .taken_back(
            lock.handle(),
            lock.acquired_at(),
            lock.valid_until_instant(),
        )
        .then(|| now_held(table, lock))
}

/// What taking `lock` changes besides the holds: the observed versions and the client's line.
fn now_held(table: &LockTable, lock: Lock) -> Lock {
    // Only the observed-lease rule remembers versions; the wall-clock path skips the lock.
    if table.takeover == TakeoverRule::ObservedLease {
        table.observations.forget(lock.resource());
    }
    // The line makes this client's waiters wait for its own release: right for an exclusive
    // hold, wrong for a shared one, which other shared acquirers of this client may join.
    if lock.mode() != Mode::Exclusive {
        return lock;
    }
    table.queues.acquired(
        lock.resource(),
        lock.lock_id(),
        lock.owner(),
        lock.valid_until_instant(),
    );
    lock
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::tests::assert_every_placeholder_named;

    #[test]
    fn every_placeholder_is_named() {
        for expr in [
            ACQUIRE_CONDITION,
            FAIR_ACQUIRE_CONDITION,
            ACQUIRE_FREE_CONDITION,
            TAKEOVER_CONDITION,
        ] {
            assert_every_placeholder_named(expr);
        }
    }
}
