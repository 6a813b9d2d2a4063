//! The lock table's schema: the attribute names of the lock and fence items, their keys, and the
//! placeholders through which expressions name attributes. This module and
//! `record` (the conversion between an item and the library's values) are the one
//! source of truth for the stored format; `lib/DESIGN.md` describes the same thing for people.
//! Each request's expressions live with the request, in its operation module.
//!
//! Public as `ddb_lock::item` so that tools reading the table (dashboards, audits, migrations) use
//! the same names as the library. It keeps that path rather than a name like `schema` because the
//! path is public API.
//!
//! Expressions refer to attributes through placeholders (`#owner`, `#ttl`, …) because `OWNER` and
//! `TTL` are DynamoDB reserved words.

use crate::fencing::FencingToken;
use aws_sdk_dynamodb::types::AttributeValue;
use std::collections::HashMap;
use std::time::Duration;

/// Partition key attribute: `<key prefix><resource>`.
pub const PK: &str = "PK";
/// Sort key attribute, always [`SK_VALUE`].
pub const SK: &str = "SK";
/// The sort key value of every lock item.
pub const SK_VALUE: &str = "LOCK";
/// The acquisition's [`LockId`](crate::LockId), a UUID string, new on every acquisition.
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

/// An item map as the SDK wants it.
pub(crate) type Item = HashMap<String, AttributeValue>;

/// A string attribute value.
pub(crate) fn s(value: impl Into<String>) -> AttributeValue {
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
pub(crate) mod tests {
    use super::*;

    /// Asserts that `names_for` names exactly the placeholders `expr` uses: each operation's tests
    /// call it for its own expressions.
    pub(crate) fn assert_every_placeholder_named(expr: &str) {
        let used: std::collections::HashSet<&str> = expr
            .split(|c: char| !(c.is_alphanumeric() || c == '#' || c == '_'))
            .filter(|word| word.starts_with('#'))
            .collect();
        let names = names_for(&[expr]);
        assert_eq!(names.len(), used.len(), "{expr}: {names:?}");
        assert!(used.iter().all(|p| names.contains_key(*p)), "{expr}");
    }

    #[test]
    fn names_are_only_those_used() {
        let names = names_for(&["#lock_id = :lock_id AND #owner = :owner"]);
        assert_eq!(names.len(), 2);
        assert_eq!(names["#owner"], OWNER);
    }

    #[test]
    fn a_placeholder_is_matched_as_a_whole_word() {
        assert_eq!(names_for(&["#pk = :a AND #pkx = :b"]).len(), 1);
        assert_every_placeholder_named("#pk, #sk, #lock_id, #expires_at");
    }
}
