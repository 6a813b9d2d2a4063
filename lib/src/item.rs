//! The attribute names of the lock and fence items, the defaults of their keys, and the
//! placeholders through which expressions name the lock's own attributes. This module,
//! [`TableSchema`](crate::TableSchema) (the key and TTL attributes, configurable) and `record`
//! (the conversion between an item and the library's values) are the one source of truth for the
//! stored format; `lib/DESIGN.md` describes the same thing for people.
//! Each request's expressions live with the request, in its operation module.
//!
//! Public as `ddb_lock::item` so that tools reading the table (dashboards, audits, migrations) use
//! the same names as the library. It keeps that path rather than a name like `schema` because the
//! path is public API.
//!
//! Expressions refer to attributes through placeholders (`#owner`, `#ttl`, …) because `OWNER` and
//! `TTL` are DynamoDB reserved words, and so may be any key or TTL name a schema chooses.

use crate::fencing::FencingToken;
use aws_sdk_dynamodb::types::AttributeValue;
use std::collections::HashMap;
use std::time::Duration;

/// The default partition key attribute (see [`TableSchema`](crate::TableSchema)): `<key
/// prefix><resource>`.
pub const PK: &str = "PK";
/// The default sort key attribute, [`SK_VALUE`] in every lock item.
pub const SK: &str = "SK";
/// The default sort key value of every lock item.
pub const SK_VALUE: &str = "LOCK";
/// The acquisition's [`LockId`](crate::LockId), a UUID string, new on every acquisition.
pub const LOCK_ID: &str = "LockID";
/// The owner named at acquisition.
pub const OWNER: &str = "Owner";
/// Acquisition time, fixed-width RFC 3339 UTC with milliseconds.
pub const ACQUIRED_AT: &str = "AcquiredAt";
/// Lease end, same format; the only attribute that decides expiry.
pub const EXPIRES_AT: &str = "ExpiresAt";
/// The default TTL attribute: epoch seconds for DynamoDB's TTL deletion: `ExpiresAt` plus a grace period. Never read to
/// decide expiry, since TTL deletion happens late (hours, sometimes days).
pub const TTL: &str = "TTL";

/// Optional payload (binary) stored by the acquirer, at most `MAX_DATA_BYTES`; replaceable by the
/// holder.
pub const DATA: &str = "Data";
/// The record version: a fresh UUID on every write (acquire, extend, data replacement). A waiter in
/// [`TakeoverRule::ObservedLease`](crate::TakeoverRule::ObservedLease) mode takes over only an item
/// whose version it has seen unchanged for a whole lease.
pub const VERSION: &str = "Version";
/// The lease of the last write in milliseconds (a number): how long a waiter that sees this
/// version must see it unchanged before taking over.
pub const LEASE_MS: &str = "LeaseMs";
/// The fencing token (a number) of a fenced acquisition, in the lock item and in the resource's
/// fence item.
pub const FENCING_TOKEN: &str = "FencingToken";
/// The default sort key value of a resource's fence item, which keeps the highest fencing token issued
/// and, unlike the lock item, is never deleted.
pub const FENCE_SK_VALUE: &str = "FENCE";

/// The ids of a lock's shared holders ([`Mode::Shared`](crate::Mode::Shared)), a string set:
/// absent while there are none (DynamoDB removes a set whose last element is deleted), so every
/// exclusive acquisition's condition needs only `attribute_not_exists(#shared)`.
pub const SHARED: &str = "Shared";
/// The ids of the holders in [`Mode::IntentShared`](crate::Mode::IntentShared) (path locks
/// below this resource, shared), a string set, absent while there are none.
pub const INTENT_SHARED: &str = "IntentShared";
/// The ids of the holders in [`Mode::IntentExclusive`](crate::Mode::IntentExclusive) (path
/// locks below this resource, exclusive), a string set, absent while there are none.
pub const INTENT_EXCLUSIVE: &str = "IntentExclusive";
/// Prefix of the attribute of one shared holder: `Shared:<LockID>`, a map with that holder's
/// `LockID`, `Owner`, `AcquiredAt`, `ExpiresAt`, `Version` and `LeaseMs`, the same names and
/// formats as an exclusive holder's attributes.
pub const SHARED_HOLDER_PREFIX: &str = "Shared:";
/// An exclusive waiter that found shared holders: a map with its `Owner` and the `ExpiresAt`
/// until which no new shared holder may join (its deadline).
pub const WRITER_WAITING: &str = "WriterWaiting";

/// The [`Namespace`](crate::Namespace) of a lock item made by a client in one: the partition key
/// of the sparse index [`list`](crate::LockClient::list) queries. Absent on the items of a
/// client without a namespace, which the index therefore never holds (nor any fence item).
pub const NAMESPACE: &str = "Namespace";

/// The window number of a once-per-window claim ([`Window`](crate::Window)), a number:
/// `floor(now / period)` in Unix milliseconds.
pub const WINDOW: &str = "Window";

/// The line of a fair lock ([`AcquireOptions::fair`](crate::AcquireOptions::fair)), a list of
/// the waiters' `LockID`s in the order they joined: absent while nobody waits, so that a release
/// needs only `attribute_not_exists(#queue)` to know it may delete the item.
pub const QUEUE: &str = "Queue";
/// Prefix of the attribute of one waiter in the line: `Queued:<LockID>`, a map with the waiter's
/// `LockID` (the id its lock will have), `Owner`, `LeaseMs`, `AcquiredAt` (when it joined) and,
/// if it waits until a deadline, `ExpiresAt` (that deadline), the names and formats of a holder's;
/// and [`FENCED`] if it asked for a fencing token.
pub const QUEUED_PREFIX: &str = "Queued:";
/// In a waiter's entry of a fair lock's line: `true` (a boolean) when the waiter asked for a
/// fencing token, which the grant that makes it the holder then issues, raising the fence item
/// in the same transaction.
pub const FENCED: &str = "Fenced";

/// On an item a release kept ([`delete_on_release(false)`](crate::LockClientBuilder::delete_on_release)
/// or [`keep_released_for`](crate::LockClientBuilder::keep_released_for)): the owner whose lock it
/// released…
pub const RELEASED_BY: &str = "ReleasedBy";
/// …and when, a timestamp in `AcquiredAt`'s format: a later release of the same acquisition, or by
/// the same owner, answers [`AlreadyReleased`](crate::ReleaseOutcome::AlreadyReleased). The next
/// acquisition removes both.
pub const RELEASED_AT: &str = "ReleasedAt";

/// On a fair lock's item whose holder a releasing holder granted it to: that holder's `LockID`,
/// so that its grant, sent again after a lost answer, tells its own applied grant from another
/// waiter's grant of the lapsed lock made in the same millisecond (a grant of a lapsed lock
/// removes it).
pub const GRANTED_BY: &str = "GrantedBy";

/// How long the holders of a fair lock hold it, in milliseconds: the smoothed mean of their holds
/// (each measured by its holder's monotonic clock, from when it learned it holds the lock to its
/// release), as the hand-overs write it. The waiters time their reads by it.
pub const HOLD_MS: &str = "HoldMs";

/// How long a turn of a fair lock takes, in milliseconds: the smoothed mean of whole turns, from
/// a holder's grant (its `AcquiredAt`) to the grant that ended its turn (both by the granters'
/// wall clocks): its hold and the hand-overs' delays. The waiters further back time their reads
/// by it.
pub const TURN_MS: &str = "TurnMs";

/// How much the turns of a fair lock vary, in milliseconds: the smoothed mean deviation of the
/// turns from `TurnMs`, as the hand-overs write it. The waiters read earlier by it.
pub const TURN_DEV_MS: &str = "TurnDevMs";

/// An item map as the SDK wants it.
pub(crate) type Item = HashMap<String, AttributeValue>;

/// A string attribute value.
pub(crate) fn s(value: impl Into<String>) -> AttributeValue {
    AttributeValue::S(value.into())
}

/// A duration in whole milliseconds, as `LeaseMs` stores it.
pub(crate) fn millis(d: Duration) -> AttributeValue {
    AttributeValue::N(d.as_millis().to_string())
}

/// A fencing token as a number attribute.
pub(crate) fn token(token: FencingToken) -> AttributeValue {
    AttributeValue::N(token.value().to_string())
}

/// The placeholder of each of the lock item's own attributes, whose names are fixed; the key and
/// TTL placeholders (`#pk`, `#sk`, `#ttl`) name what the [`TableSchema`](crate::TableSchema)
/// says.
pub(crate) const LOCK_PLACEHOLDERS: [(&str, &str); 21] = [
    ("#lock_id", LOCK_ID),
    ("#owner", OWNER),
    ("#acquired_at", ACQUIRED_AT),
    ("#expires_at", EXPIRES_AT),
    ("#version", VERSION),
    ("#lease_ms", LEASE_MS),
    ("#fencing_token", FENCING_TOKEN),
    ("#data", DATA),
    ("#shared", SHARED),
    ("#writer_waiting", WRITER_WAITING),
    ("#intent_shared", INTENT_SHARED),
    ("#intent_exclusive", INTENT_EXCLUSIVE),
    ("#namespace", NAMESPACE),
    ("#window", WINDOW),
    ("#queue", QUEUE),
    ("#released_by", RELEASED_BY),
    ("#released_at", RELEASED_AT),
    ("#granted_by", GRANTED_BY),
    ("#hold_ms", HOLD_MS),
    ("#turn_ms", TURN_MS),
    ("#turn_dev_ms", TURN_DEV_MS),
];
