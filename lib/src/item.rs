//! The lock item: attribute names, the expressions every request uses, and conversion between an
//! item and the library's values. This module is the one source of truth for the stored format;
//! `lib/DESIGN.md` describes the same thing for people.
//!
//! Expressions refer to attributes through placeholders (`#owner`, `#ttl`, …) because `OWNER` and
//! `TTL` are DynamoDB reserved words.

use crate::error::Error;
use crate::lock::{Holder, Lock, LockId};
use crate::timestamp;
use aws_sdk_dynamodb::primitives::Blob;
use aws_sdk_dynamodb::types::AttributeValue;
use std::collections::HashMap;

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

/// Optional payload (binary) stored by the acquirer, at most `MAX_DATA_BYTES`.
pub const DATA: &str = "Data";

/// Acquire (PutItem) succeeds if no lock item exists or the existing one has expired.
pub(crate) const ACQUIRE_CONDITION: &str = "attribute_not_exists(#pk) OR #expires_at < :now";
/// Release (DeleteItem) succeeds only for the same acquisition and owner.
pub(crate) const RELEASE_CONDITION: &str = "#lock_id = :lock_id AND #owner = :owner";
/// Release by owner alone (DeleteItem), for owners that lost their lock id.
pub(crate) const RELEASE_OWNED_CONDITION: &str = "#owner = :owner";
/// Extend (UpdateItem) moves the lease end and the TTL…
pub(crate) const EXTEND_UPDATE: &str = "SET #expires_at = :expires_at, #ttl = :ttl";
/// …only for the same acquisition and owner, while the lease still stands.
pub(crate) const EXTEND_CONDITION: &str =
    "#lock_id = :lock_id AND #owner = :owner AND #expires_at >= :now";

/// An item map as the SDK wants it.
pub(crate) type Item = HashMap<String, AttributeValue>;

/// A decoded lock item.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Record {
    pub(crate) lock_id: LockId,
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

/// The full item written by acquire.
pub(crate) fn encode(
    key_prefix: &str,
    lock: &Lock,
    ttl_epoch_seconds: i64,
    data: Option<&[u8]>,
) -> Item {
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
    ]);
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
    let data = match item.get(DATA) {
        Some(AttributeValue::B(blob)) => Some(blob.clone().into_inner()),
        Some(_) => return Err(malformed(DATA, "is not binary")),
        None => None,
    };
    Ok(Record {
        lock_id,
        holder: Holder {
            owner: string(OWNER)?.to_owned(),
            acquired_at: time(ACQUIRED_AT)?,
            expires_at: time(EXPIRES_AT)?,
            data,
        },
    })
}

/// Each placeholder used in the expressions, and the attribute it stands for.
const PLACEHOLDERS: [(&str, &str); 6] = [
    ("#pk", PK),
    ("#sk", SK),
    ("#lock_id", LOCK_ID),
    ("#owner", OWNER),
    ("#expires_at", EXPIRES_AT),
    ("#ttl", TTL),
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
        )
    }

    #[test]
    fn encode_then_decode_round_trips() {
        let lock = sample();
        let item = encode("LOCK#", &lock, 1_800_000_000, Some(b"{}"));
        assert_eq!(item[PK], s("LOCK#orders/42"));
        assert_eq!(item[SK], s("LOCK"));
        assert_eq!(item[TTL], AttributeValue::N("1800000000".into()));
        let record = decode("orders/42", &item).unwrap();
        assert_eq!(record.lock_id, lock.lock_id());
        assert_eq!(record.holder.owner, "worker-1");
        assert_eq!(record.holder.expires_at, lock.expires_at());
        assert_eq!(record.holder.data.as_deref(), Some(&b"{}"[..]));
    }

    #[test]
    fn decode_names_the_malformed_attribute() {
        let mut item = encode("LOCK#", &sample(), 0, None);
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
            RELEASE_CONDITION,
            RELEASE_OWNED_CONDITION,
            EXTEND_UPDATE,
            EXTEND_CONDITION,
        ] {
            let used: Vec<&str> = expr
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
