//! The lock item: attribute names, the expressions every request uses, and conversion between an
//! item and the library's values. This module is the one source of truth for the stored format;
//! `lib/DESIGN.md` describes the same thing for people.
//!
//! Expressions refer to attributes through placeholders (`#owner`, `#ttl`, …) because `OWNER` and
//! `TTL` are DynamoDB reserved words.

use crate::error::Error;
use crate::fencing::FencingToken;
use crate::lock::{Holder, Lock, LockId};
use crate::timestamp;
use aws_sdk_dynamodb::primitives::Blob;
use aws_sdk_dynamodb::types::AttributeValue;
use std::collections::HashMap;
use std::time::Duration;

/// Partition key attribute: `<key prefix><resource>`.
pub const PK: &str = "PK";
/// Sort key attribute, always [`SK_VALUE`].
pub const SK: &str = "SK";
/// The sort key value of every lock item.
pub const SK_VALUE: &str = "LOCK";
/// The acquisition's [`LockId`], a UUID string, new on every acquisition.
pub const LOCK_ID: &str = "LockID";
/// The owner named at acquisition.
pub const OWNER: &str = "Owner";
/// Acquisition time, fixed-width RFC 3339 UTC with milliseconds.
pub const ACQUIRED_AT: &str = "AcquiredAt";
/// Lease end, same format; the only attribute that decides expiry.
pub const EXPIRES_AT: &str = "ExpiresAt";
/// Epoch seconds for DynamoDB's TTL deletion: `ExpiresAt` plus a grace period. Never read to
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
/// The sort key value of a resource's fence item, which keeps the highest fencing token issued
/// and, unlike the lock item, is never deleted.
pub const FENCE_SK_VALUE: &str = "FENCE";

/// Acquire (PutItem) succeeds if no lock item exists or the existing one has expired.
pub(crate) const ACQUIRE_CONDITION: &str = "attribute_not_exists(#pk) OR #expires_at < :now";
/// Acquire in observed-lease mode, before any version has been seen unchanged for a lease.
pub(crate) const ACQUIRE_FREE_CONDITION: &str = "attribute_not_exists(#pk)";
/// Acquire in observed-lease mode: take over the version seen unchanged for a whole lease.
pub(crate) const TAKEOVER_CONDITION: &str = "attribute_not_exists(#pk) OR #version = :version";
/// Release (DeleteItem) succeeds only for the same acquisition and owner.
pub(crate) const RELEASE_CONDITION: &str = "#lock_id = :lock_id AND #owner = :owner";
/// Release by owner alone (DeleteItem), for owners that lost their lock id.
pub(crate) const RELEASE_OWNED_CONDITION: &str = "#owner = :owner";
/// Release by owner alone of a lock acquired no later than a moment (an execution's stop), so
/// that a later acquisition by the same owner (a redriven execution) is spared.
pub(crate) const RELEASE_OWNED_BY_CONDITION: &str =
    "#owner = :owner AND #acquired_at <= :acquired_by";
/// Extend (UpdateItem) moves the lease end and the TTL and rotates the version…
pub(crate) const EXTEND_UPDATE: &str =
    "SET #expires_at = :expires_at, #ttl = :ttl, #version = :version, #lease_ms = :lease_ms";
/// …and may replace the payload…
pub(crate) const EXTEND_REPLACE_DATA: &str = ", #data = :data";
/// …or remove it…
pub(crate) const EXTEND_REMOVE_DATA: &str = " REMOVE #data";
/// …only for the same acquisition and owner, while the lease still stands, and never to an earlier
/// lease end than the stored one (timestamps are fixed width, so the comparison is chronological):
/// an extension that arrives after a later one of the same lock must not shorten its lease.
pub(crate) const EXTEND_CONDITION: &str =
    "#lock_id = :lock_id AND #owner = :owner AND #expires_at >= :now AND #expires_at <= :expires_at";

/// A fenced acquisition also raises the fence item's token (in the same transaction)…
pub(crate) const FENCE_UPDATE: &str = "SET #fencing_token = :fencing_token";
/// …which must only grow.
pub(crate) const FENCE_CONDITION: &str =
    "attribute_not_exists(#fencing_token) OR #fencing_token < :fencing_token";

/// An item map as the SDK wants it.
pub(crate) type Item = HashMap<String, AttributeValue>;

/// A decoded lock item.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Record {
    pub(crate) lock_id: LockId,
    pub(crate) version: String,
    pub(crate) lease: Duration,
    pub(crate) holder: Holder,
}

fn s(value: impl Into<String>) -> AttributeValue {
    AttributeValue::S(value.into())
}

/// The primary key of `resource`'s lock item.
pub(crate) fn key(key_prefix: &str, resource: &str) -> Item {
    HashMap::from([
        (PK.to_owned(), s(format!("{key_prefix}{resource}"))),
        (SK.to_owned(), s(SK_VALUE)),
    ])
}

/// The primary key of `resource`'s fence item.
pub(crate) fn fence_key(key_prefix: &str, resource: &str) -> Item {
    HashMap::from([
        (PK.to_owned(), s(format!("{key_prefix}{resource}"))),
        (SK.to_owned(), s(FENCE_SK_VALUE)),
    ])
}

/// A duration in whole milliseconds, as `LeaseMs` stores it.
pub(crate) fn millis(d: Duration) -> AttributeValue {
    AttributeValue::N(d.as_millis().to_string())
}

/// A fencing token as a number attribute.
pub(crate) fn token(token: FencingToken) -> AttributeValue {
    AttributeValue::N(token.value().to_string())
}

/// What acquire writes besides the lock's own values.
pub(crate) struct Written<'a> {
    pub(crate) version: &'a str,
    pub(crate) ttl_epoch_seconds: i64,
    pub(crate) data: Option<&'a [u8]>,
}

/// The full item written by acquire.
pub(crate) fn encode(key_prefix: &str, lock: &Lock, written: &Written<'_>) -> Item {
    let Written {
        version,
        ttl_epoch_seconds,
        data,
    } = *written;
    let lease = (lock.expires_at() - lock.acquired_at())
        .to_std()
        .unwrap_or_default();
    let mut item = key(key_prefix, lock.resource());
    item.extend([
        (LOCK_ID.to_owned(), s(lock.lock_id().to_string())),
        (OWNER.to_owned(), s(lock.owner())),
        (
            ACQUIRED_AT.to_owned(),
            s(timestamp::format(lock.acquired_at())),
        ),
        (
            EXPIRES_AT.to_owned(),
            s(timestamp::format(lock.expires_at())),
        ),
        (
            TTL.to_owned(),
            AttributeValue::N(ttl_epoch_seconds.to_string()),
        ),
        (VERSION.to_owned(), s(version)),
        (LEASE_MS.to_owned(), millis(lease)),
    ]);
    if let Some(fencing_token) = lock.fencing_token() {
        item.insert(FENCING_TOKEN.to_owned(), token(fencing_token));
    }
    if let Some(data) = data {
        item.insert(DATA.to_owned(), AttributeValue::B(Blob::new(data)));
    }
    item
}

/// Decodes a lock item read back from DynamoDB.
pub(crate) fn decode(resource: &str, item: &Item) -> Result<Record, Error> {
    let malformed = |attribute, problem| Error::MalformedItem {
        resource: resource.to_owned(),
        attribute,
        problem,
    };
    let string = |attribute: &'static str| match item.get(attribute) {
        Some(AttributeValue::S(v)) => Ok(v.as_str()),
        Some(_) => Err(malformed(attribute, "is not a string")),
        None => Err(malformed(attribute, "is missing")),
    };
    let time = |attribute: &'static str| {
        timestamp::parse(string(attribute)?).ok_or_else(|| {
            malformed(
                attribute,
                "is not a fixed-width RFC 3339 UTC timestamp with milliseconds",
            )
        })
    };
    let lock_id =
        LockId::parse(string(LOCK_ID)?).map_err(|_| malformed(LOCK_ID, "is not a UUID"))?;
    let number = |attribute: &'static str| match item.get(attribute) {
        Some(AttributeValue::N(v)) => v
            .parse::<u64>()
            .map_err(|_| malformed(attribute, "is not a non-negative integer")),
        Some(_) => Err(malformed(attribute, "is not a number")),
        None => Err(malformed(attribute, "is missing")),
    };
    let fencing_token = match item.get(FENCING_TOKEN) {
        Some(_) => Some(FencingToken::new(number(FENCING_TOKEN)?)),
        None => None,
    };
    let data = match item.get(DATA) {
        Some(AttributeValue::B(blob)) => Some(blob.clone().into_inner()),
        Some(_) => return Err(malformed(DATA, "is not binary")),
        None => None,
    };
    let holder = Holder {
        owner: string(OWNER)?.to_owned(),
        acquired_at: time(ACQUIRED_AT)?,
        expires_at: time(EXPIRES_AT)?,
        fencing_token,
        data,
    };
    Ok(Record {
        lock_id,
        version: string(VERSION)?.to_owned(),
        lease: Duration::from_millis(number(LEASE_MS)?),
        holder,
    })
}

/// The fencing token of a fence item, if it has one.
pub(crate) fn decode_fence(resource: &str, item: &Item) -> Result<Option<FencingToken>, Error> {
    match item.get(FENCING_TOKEN) {
        None => Ok(None),
        Some(AttributeValue::N(v)) => {
            v.parse()
                .map(FencingToken::new)
                .map(Some)
                .map_err(|_| Error::MalformedItem {
                    resource: resource.to_owned(),
                    attribute: FENCING_TOKEN,
                    problem: "is not a non-negative integer",
                })
        }
        Some(_) => Err(Error::MalformedItem {
            resource: resource.to_owned(),
            attribute: FENCING_TOKEN,
            problem: "is not a number",
        }),
    }
}

/// Each placeholder used in the expressions, and the attribute it stands for.
const PLACEHOLDERS: [(&str, &str); 11] = [
    ("#pk", PK),
    ("#sk", SK),
    ("#lock_id", LOCK_ID),
    ("#owner", OWNER),
    ("#acquired_at", ACQUIRED_AT),
    ("#expires_at", EXPIRES_AT),
    ("#ttl", TTL),
    ("#version", VERSION),
    ("#lease_ms", LEASE_MS),
    ("#fencing_token", FENCING_TOKEN),
    ("#data", DATA),
];

/// The expression attribute names for exactly the placeholders that `expressions` use: DynamoDB
/// rejects a request that names an attribute none of its expressions use.
pub(crate) fn names_for(expressions: &[&str]) -> HashMap<String, String> {
    PLACEHOLDERS
        .iter()
        .filter(|(placeholder, _)| {
            expressions.iter().any(|expr| {
                expr.match_indices(placeholder).any(|(at, _)| {
                    let next = expr[at + placeholder.len()..].chars().next();
                    !next.is_some_and(|c| c.is_alphanumeric() || c == '_')
                })
            })
        })
        .map(|(placeholder, attribute)| ((*placeholder).to_owned(), (*attribute).to_owned()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lock::LockHandle;
    use chrono::{TimeDelta, TimeZone, Utc};

    fn sample() -> Lock {
        let at = Utc.with_ymd_and_hms(2026, 11, 21, 22, 0, 0).unwrap();
        Lock::new(
            LockHandle::new("orders/42", "worker-1", LockId::generate()),
            at,
            at + TimeDelta::seconds(30),
            tokio::time::Instant::now(),
        )
    }

    #[test]
    fn encode_then_decode_round_trips() {
        let lock = sample();
        let item = encode(
            "LOCK#",
            &lock,
            &Written {
                version: "v1",
                ttl_epoch_seconds: 1_800_000_000,
                data: Some(b"{}"),
            },
        );
        assert_eq!(item[PK], s("LOCK#orders/42"));
        assert_eq!(item[SK], s("LOCK"));
        assert_eq!(item[TTL], AttributeValue::N("1800000000".into()));
        let record = decode("orders/42", &item).unwrap();
        assert_eq!(record.lock_id, lock.lock_id());
        assert_eq!(record.holder.owner, "worker-1");
        assert_eq!(record.holder.expires_at, lock.expires_at());
        assert_eq!(record.holder.data.as_deref(), Some(&b"{}"[..]));
        assert_eq!(record.version, "v1");
        assert_eq!(record.lease, Duration::from_secs(30));
        assert_eq!(record.holder.fencing_token, None);
    }

    #[test]
    fn decode_names_the_malformed_attribute() {
        let mut item = encode(
            "LOCK#",
            &sample(),
            &Written {
                version: "v1",
                ttl_epoch_seconds: 0,
                data: None,
            },
        );
        item.insert(EXPIRES_AT.into(), s("tomorrow"));
        let err = decode("orders/42", &item).unwrap_err();
        assert!(
            matches!(
                err,
                Error::MalformedItem {
                    attribute: EXPIRES_AT,
                    ..
                }
            ),
            "{err}"
        );
        item.remove(OWNER);
        let err = decode("orders/42", &item).unwrap_err();
        assert!(
            matches!(
                err,
                Error::MalformedItem {
                    attribute: OWNER,
                    ..
                }
            ),
            "{err}"
        );
    }

    #[test]
    fn every_placeholder_in_the_expressions_has_a_name() {
        for expr in [
            ACQUIRE_CONDITION,
            ACQUIRE_FREE_CONDITION,
            TAKEOVER_CONDITION,
            EXTEND_REPLACE_DATA,
            EXTEND_REMOVE_DATA,
            FENCE_UPDATE,
            FENCE_CONDITION,
            RELEASE_CONDITION,
            RELEASE_OWNED_CONDITION,
            RELEASE_OWNED_BY_CONDITION,
            EXTEND_UPDATE,
            EXTEND_CONDITION,
        ] {
            let used: std::collections::HashSet<&str> = expr
                .split(|c: char| !(c.is_alphanumeric() || c == '#' || c == '_'))
                .filter(|word| word.starts_with('#'))
                .collect();
            let names = names_for(&[expr]);
            assert_eq!(names.len(), used.len(), "{expr}: {names:?}");
            assert!(used.iter().all(|p| names.contains_key(*p)), "{expr}");
        }
    }

    #[test]
    fn names_are_only_those_used() {
        let names = names_for(&[RELEASE_CONDITION]);
        assert_eq!(names.len(), 2);
        assert_eq!(names["#owner"], OWNER);
    }
}
