//! The shared holders of a lock item, as stored and as read back.
//!
//! `Shared` is a string set of the shared holders' `LockID`s, `IntentShared` and
//! `IntentExclusive` those of the holders in the two intention modes (path locks below the
//! resource); each holder, whatever its set, has an attribute
//! `Shared:<LockID>`, a map with the same attributes, in the same formats, as an exclusive
//! holder's (`LockID`, `Owner`, `AcquiredAt`, `ExpiresAt`, `Version`, `LeaseMs`), so that one
//! decoder ([`record::decode`]) reads both. The set and the maps change together in every write.
//! DynamoDB removes a set whose last element is deleted, so "no shared holder" is
//! `attribute_not_exists(#shared)`, with no value to send.
//!
//! `WriterWaiting` is the marker of an exclusive acquirer waiting for shared holders to leave:
//! its `Owner`, when it started waiting (`AcquiredAt`) and until when it waits (`ExpiresAt`).

use crate::error::Error;
use crate::item::{
    Item, ACQUIRED_AT, EXPIRES_AT, INTENT_EXCLUSIVE, INTENT_SHARED, OWNER, SHARED,
    SHARED_HOLDER_PREFIX, WRITER_WAITING,
};
use crate::lock::{Holder, Lock, LockId};
use crate::mode::Mode;
use crate::record::{self, Record, Written};
use crate::timestamp;
use aws_sdk_dynamodb::types::AttributeValue;
use chrono::{DateTime, Utc};

/// The modes whose holders live in sets of ids and entries, each with its set.
pub(crate) const SET_MODES: [Mode; 3] = [Mode::Shared, Mode::IntentShared, Mode::IntentExclusive];

/// The placeholder and attribute of the set of the holders in `mode` (an exclusive holder has
/// none: `Shared` is returned, unused).
pub(crate) fn set_of(mode: Mode) -> (&'static str, &'static str) {
    match mode {
        Mode::Shared | Mode::Exclusive => ("#shared", SHARED),
        Mode::IntentShared => ("#intent_shared", INTENT_SHARED),
        Mode::IntentExclusive => ("#intent_exclusive", INTENT_EXCLUSIVE),
    }
}

/// Every holder of `item` kept in a set, live or not, with its mode.
pub(crate) fn decode_all(resource: &str, item: &Item) -> Result<Vec<(Mode, Record)>, Error> {
    let mut all = Vec::new();
    for mode in SET_MODES {
        all.extend(decode(resource, item, mode)?.into_iter().map(|r| (mode, r)));
    }
    Ok(all)
}

/// Refuses a handle of mode `given` whose lock id holds `item`'s lock in another mode kept in a
/// set (shared, or an intention): its requests' conditions never match that entry, and its caller
/// is told of the mistake, not that the lock is gone (a release without the shared mode was
/// answered `NotFound`, "released already, or expired", while the hold stood; found by review).
pub(crate) fn check_mode(
    resource: &str,
    item: &Item,
    lock_id: LockId,
    given: Mode,
) -> Result<(), Error> {
    match decode_all(resource, item)?
        .into_iter()
        .find(|(_, record)| record.lock_id == lock_id)
    {
        Some((held, _)) if held != given => {
            Err(crate::error::InvalidInput::ModeMismatch { given, held }.into())
        }
        _ => Ok(()),
    }
}

/// The attribute of the shared holder `lock_id`.
pub(crate) fn attribute(lock_id: LockId) -> String {
    format!("{SHARED_HOLDER_PREFIX}{lock_id}")
}

/// The map stored for a shared `lock`, written with `version`.
pub(crate) fn entry(lock: &Lock, version: &str) -> AttributeValue {
    let written = Written {
        version,
        ttl: None,
        data: None,
        namespace: None,
    };
    AttributeValue::M(record::encode(Item::new(), lock, &written))
}

/// A set of lock ids, as `Shared` stores them. DynamoDB refuses an empty set: callers pass at
/// least one id.
pub(crate) fn id_set(ids: impl IntoIterator<Item = LockId>) -> AttributeValue {
    AttributeValue::Ss(ids.into_iter().map(|id| id.to_string()).collect())
}

/// The holders of `item` (of `resource`) in `mode`'s set, live or not, in the order of the set.
pub(crate) fn decode(resource: &str, item: &Item, mode: Mode) -> Result<Vec<Record>, Error> {
    let (_, set) = set_of(mode);
    let malformed = |problem| Error::MalformedItem {
        resource: resource.to_owned(),
        attribute: set,
        problem,
    };
    let ids = match item.get(set) {
        None => return Ok(Vec::new()),
        Some(AttributeValue::Ss(ids)) => ids,
        Some(_) => return Err(malformed("is not a string set")),
    };
    ids.iter()
        .map(|id| {
            let id = LockId::parse(id).map_err(|_| malformed("holds an id that is not a UUID"))?;
            match item.get(&attribute(id)) {
                Some(AttributeValue::M(entry)) => {
                    let record = record::decode(resource, entry)?;
                    if record.lock_id == id {
                        Ok(record)
                    } else {
                        Err(malformed("names a holder whose entry has another LockID"))
                    }
                }
                Some(_) => Err(malformed("names a holder whose entry is not a map")),
                None => Err(malformed("names a holder without an entry")),
            }
        })
        .collect()
}

/// The exclusive acquirer waiting for the shared holders of `item` to leave, if any (live or not).
pub(crate) fn writer_waiting(resource: &str, item: &Item) -> Result<Option<Holder>, Error> {
    let malformed = |problem| Error::MalformedItem {
        resource: resource.to_owned(),
        attribute: WRITER_WAITING,
        problem,
    };
    let marker = match item.get(WRITER_WAITING) {
        None => return Ok(None),
        Some(AttributeValue::M(marker)) => marker,
        Some(_) => return Err(malformed("is not a map")),
    };
    let string = |name| match marker.get(name) {
        Some(AttributeValue::S(value)) => Ok(value.as_str()),
        _ => Err(malformed("lacks a string attribute it needs")),
    };
    let time = |name| {
        timestamp::parse(string(name)?).ok_or_else(|| malformed("has a malformed timestamp"))
    };
    Ok(Some(Holder {
        owner: string(OWNER)?.to_owned(),
        acquired_at: time(ACQUIRED_AT)?,
        expires_at: time(EXPIRES_AT)?,
        fencing_token: None,
        data: None,
    }))
}

/// The marker of an exclusive acquirer `owner`, waiting since `since` and until `until`.
pub(crate) fn writer_marker(
    owner: &str,
    since: DateTime<Utc>,
    until: DateTime<Utc>,
) -> AttributeValue {
    AttributeValue::M(Item::from([
        (OWNER.to_owned(), AttributeValue::S(owner.to_owned())),
        (
            ACQUIRED_AT.to_owned(),
            AttributeValue::S(timestamp::format(since)),
        ),
        (
            EXPIRES_AT.to_owned(),
            AttributeValue::S(timestamp::format(until)),
        ),
    ]))
}

/// Of `holders`, the live ones at `now`.
pub(crate) fn live(holders: &[Record], now: DateTime<Utc>) -> impl Iterator<Item = &Record> {
    holders.iter().filter(move |r| r.holder.is_live_at(now))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lock::LockHandle;
    use crate::record::samples::now;
    use chrono::TimeDelta;
    use tokio::time::Instant;

    fn shared_lock(owner: &str, expires_in: TimeDelta) -> Lock {
        let handle = LockHandle::new("r", owner, LockId::generate()).with_mode(Mode::Shared);
        Lock::new(handle, now(), now() + expires_in, Instant::now())
    }

    fn item_with(locks: &[&Lock]) -> Item {
        let mut item = Item::new();
        item.insert(SHARED.into(), id_set(locks.iter().map(|l| l.lock_id())));
        for lock in locks {
            item.insert(attribute(lock.lock_id()), entry(lock, "v1"));
        }
        item
    }

    #[test]
    fn holders_read_back_as_written() {
        let a = shared_lock("a", TimeDelta::seconds(5));
        let b = shared_lock("b", TimeDelta::seconds(-5));
        let holders = decode("r", &item_with(&[&a, &b]), Mode::Shared).unwrap();
        assert_eq!(holders.len(), 2);
        let a_read = holders.iter().find(|r| r.lock_id == a.lock_id()).unwrap();
        assert_eq!(a_read.holder.owner, "a");
        assert_eq!(a_read.holder.expires_at, a.expires_at());
        assert_eq!(a_read.version, "v1");
        let live: Vec<_> = live(&holders, now()).map(|r| r.lock_id).collect();
        assert_eq!(live, vec![a.lock_id()]);
    }

    #[test]
    fn no_set_is_no_holder() {
        assert!(decode("r", &Item::new(), Mode::Shared).unwrap().is_empty());
        assert!(decode_all("r", &Item::new()).unwrap().is_empty());
    }

    #[test]
    fn a_set_member_without_its_entry_is_malformed() {
        let a = shared_lock("a", TimeDelta::seconds(5));
        let mut item = item_with(&[&a]);
        item.remove(&attribute(a.lock_id()));
        let err = decode("r", &item, Mode::Shared).unwrap_err();
        assert!(
            matches!(
                err,
                Error::MalformedItem {
                    attribute: SHARED,
                    ..
                }
            ),
            "{err:?}"
        );
    }

    #[test]
    fn an_entry_under_another_id_is_malformed() {
        let a = shared_lock("a", TimeDelta::seconds(5));
        let b = shared_lock("b", TimeDelta::seconds(5));
        let mut item = item_with(&[&a]);
        item.insert(attribute(a.lock_id()), entry(&b, "v1"));
        assert!(decode("r", &item, Mode::Shared).is_err());
    }

    #[test]
    fn the_writer_marker_reads_back() {
        let until = now() + TimeDelta::seconds(10);
        let item = Item::from([(WRITER_WAITING.to_owned(), writer_marker("w", now(), until))]);
        let writer = writer_waiting("r", &item).unwrap().unwrap();
        assert_eq!(writer.owner, "w");
        assert_eq!(writer.expires_at, until);
        assert_eq!(writer_waiting("r", &Item::new()).unwrap(), None);
    }
}
