//! A lock item as the library's values: the full item acquire writes, and the [`Record`] decoded
//! from any item an answer carries back (`ALL_OLD`, `ALL_NEW`, a read).
//!
//! Decoding is strict: every attribute the library reads back must be present and well formed, or
//! the answer is [`Error::MalformedItem`] naming it, so that no decision is taken on a guess. `TTL`
//! is written and never read: nothing decides by it.

use crate::error::Error;
use crate::fencing::FencingToken;
use crate::item::{
    self, s, Item, ACQUIRED_AT, DATA, EXPIRES_AT, FENCING_TOKEN, LEASE_MS, LOCK_ID, NAMESPACE,
    OWNER, VERSION,
};
use crate::lock::{Holder, Lock, LockId};
use crate::timestamp;
use aws_sdk_dynamodb::primitives::Blob;
use aws_sdk_dynamodb::types::AttributeValue;
use std::time::Duration;

/// A decoded lock item.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Record {
    pub(crate) lock_id: LockId,
    pub(crate) version: String,
    pub(crate) lease: Duration,
    pub(crate) holder: Holder,
}

/// What acquire writes besides the lock's own values.
pub(crate) struct Written<'a> {
    pub(crate) version: &'a str,
    /// The TTL attribute and its epoch seconds, if the schema has one.
    pub(crate) ttl: Option<(&'a str, i64)>,
    pub(crate) data: Option<&'a [u8]>,
    /// The client's namespace, written on the lock item (not on a shared holder's entry).
    pub(crate) namespace: Option<&'a str>,
}

/// The full item written by acquire, under the lock item's primary `key`.
pub(crate) fn encode(key: Item, lock: &Lock, written: &Written<'_>) -> Item {
    let Written {
        version,
        ttl,
        data,
        namespace,
    } = *written;
    let lease = (lock.expires_at() - lock.acquired_at())
        .to_std()
        .unwrap_or_default();
    let mut item = key;
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
        (VERSION.to_owned(), s(version)),
        (LEASE_MS.to_owned(), item::millis(lease)),
    ]);
    if let Some((attribute, epoch_seconds)) = ttl {
        item.insert(
            attribute.to_owned(),
            AttributeValue::N(epoch_seconds.to_string()),
        );
    }
    if let Some(fencing_token) = lock.fencing_token() {
        item.insert(FENCING_TOKEN.to_owned(), item::token(fencing_token));
    }
    if let Some(data) = data {
        item.insert(DATA.to_owned(), AttributeValue::B(Blob::new(data)));
    }
    if let Some(namespace) = namespace {
        item.insert(NAMESPACE.to_owned(), s(namespace));
    }
    item
}

/// Whether `item`, a lock item (it has a `LockID`), was released and kept rather than deleted
/// ([`delete_on_release(false)`](crate::LockClientBuilder::delete_on_release)): it has no
/// `Owner`, which every held lock item has.
pub(crate) fn is_released(item: &Item) -> bool {
    !item.contains_key(OWNER)
}

/// The `LockID` of any lock item, held or kept, if it has a readable one.
pub(crate) fn lock_id(item: &Item) -> Option<LockId> {
    match item.get(LOCK_ID) {
        Some(AttributeValue::S(id)) => LockId::parse(id).ok(),
        _ => None,
    }
}

/// The payload of any lock item, held or kept, if it has one that is binary.
pub(crate) fn data(item: &Item) -> Option<Vec<u8>> {
    match item.get(DATA) {
        Some(AttributeValue::B(blob)) => Some(blob.clone().into_inner()),
        _ => None,
    }
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

/// Records for the unit tests of the rules that read refused answers.
#[cfg(test)]
pub(crate) mod samples {
    use super::Record;
    use crate::lock::{Holder, LockId};
    use chrono::{DateTime, TimeDelta, TimeZone, Utc};
    use std::time::Duration;

    /// The tests' "now".
    pub(crate) fn now() -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 11, 21, 22, 0, 0).unwrap()
    }

    /// Lock `lock_id` of `owner`, version `v1`, a 30 s lease taken 10 s before [`now`] and
    /// expiring `expires_in` after it, without data or token.
    pub(crate) fn record(lock_id: LockId, owner: &str, expires_in: TimeDelta) -> Record {
        Record {
            lock_id,
            version: "v1".into(),
            lease: Duration::from_secs(30),
            holder: Holder {
                owner: owner.into(),
                acquired_at: now() - TimeDelta::seconds(10),
                expires_at: now() + expires_in,
                fencing_token: None,
                data: None,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::item::{PK, SK, TTL};
    use crate::lock::LockHandle;
    use crate::schema::TableSchema;
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
            TableSchema::new().lock_key(lock.resource()),
            &lock,
            &Written {
                version: "v1",
                ttl: Some((TTL, 1_800_000_000)),
                data: Some(b"{}"),
                namespace: None,
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
            TableSchema::new().lock_key("orders/42"),
            &sample(),
            &Written {
                version: "v1",
                ttl: None,
                data: None,
                namespace: None,
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
}
