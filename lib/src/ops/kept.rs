//! Kept lock items ([`delete_on_release(false)`](crate::LockClientBuilder::delete_on_release)): the
//! update that acquires while keeping the payload found, and the update that releases by clearing
//! the holder instead of deleting the item.
//!
//! A kept item is a lock item (it has a `LockID`) without an `Owner`: the release removes the
//! holder's attributes (`Owner`, `AcquiredAt`, `ExpiresAt`, `LeaseMs`, `FencingToken`), writes a
//! new `Version`, records itself (`ReleasedBy`, the owner it released, and `ReleasedAt`) and keeps
//! or replaces `Data`. Its `TTL` goes (kept for good), or, where releases are kept for a while
//! ([`keep_released_for`](crate::LockClientBuilder::keep_released_for)), is set to end the record
//! then. Every acquire condition takes such an item as free (`attribute_not_exists(#owner)`), and
//! every release, extend and takeover condition names an `Owner` or an `ExpiresAt`, which it
//! lacks: nothing but an acquisition changes it (and removes the release's record). A later
//! release of the same acquisition or owner reads the record and answers `AlreadyReleased`; a
//! retry of the release itself finds the version it wrote. Each is still one request: an
//! UpdateItem in place of the PutItem or DeleteItem.

use super::extend::DataChange;
use crate::conditional::{answer, Answer};
use crate::error::Error;
use crate::item::{self, s, Item, DATA, LOCK_ID, NAMESPACE, VERSION};
use crate::limits;
use crate::lock::{Lock, LockId};
use crate::lock_table::LockTable;
use crate::record::{self, Written};
use crate::time;
use crate::timestamp;
use aws_sdk_dynamodb::operation::put_item::PutItemError;
use aws_sdk_dynamodb::primitives::Blob;
use aws_sdk_dynamodb::types::{AttributeValue, ReturnValuesOnConditionCheckFailure};
use chrono::{DateTime, Utc};

/// A kept item is created only where there is no item at all.
pub(crate) const CREATE_CONDITION: &str = "attribute_not_exists(#pk)";

/// An acquisition that keeps the item takes it only where its own attempt has not written already
/// (its `LockID` is new to every attempt): a copy of an applied acquisition's request that comes
/// after the lock was released (a late copy, the SDK's resend, the write of a dropped acquisition
/// after its clean-up cleared it) finds the kept item free and would take it again, for a holder
/// that has gone, with the payload it carried over the one released since.
pub(crate) const NOT_WRITTEN_BY_THIS_ATTEMPT: &str =
    "attribute_not_exists(#lock_id) OR #lock_id <> :lock_id";

/// `condition`, the acquire condition, for an acquisition that keeps the item: with
/// [`NOT_WRITTEN_BY_THIS_ATTEMPT`].
pub(crate) fn acquire_condition(condition: &str) -> String {
    format!("({condition}) AND ({NOT_WRITTEN_BY_THIS_ATTEMPT})")
}

/// An acquisition that keeps the item sets the holder…
pub(crate) const ACQUIRE_SET_HOLDER: &str = "SET #lock_id = :lock_id, #owner = :owner, #acquired_at = :acquired_at, #expires_at = :expires_at, #version = :new_version, #lease_ms = :lease_ms";
/// …and the TTL, if the schema has a TTL attribute…
pub(crate) const ACQUIRE_SET_TTL: &str = ", #ttl = :ttl";
/// …and its fencing token, if fenced…
pub(crate) const ACQUIRE_SET_TOKEN: &str = ", #fencing_token = :fencing_token";
/// …and the payload, if the acquisition sets one (otherwise the payload found stays)…
pub(crate) const ACQUIRE_SET_DATA: &str = ", #data = :data";
/// …and the client's namespace, on an item the acquisition may create…
pub(crate) const SET_NAMESPACE: &str = ", #namespace = :namespace";
/// …and removes the marker of an exclusive acquirer waiting for shared holders (this one, or
/// another that can announce itself again) and the record of the last release…
pub(crate) const ACQUIRE_REMOVE_WAITER: &str =
    " REMOVE #writer_waiting, #released_by, #released_at";
/// …and an earlier holder's token, if unfenced.
pub(crate) const ACQUIRE_REMOVE_TOKEN: &str = ", #fencing_token";

/// A release that keeps the item writes a new version…
pub(crate) const RELEASE_SET_VERSION: &str = "SET #version = :new_version";
/// …and when it released whose lock (a force release of an item released already leaves the
/// record as it was)…
pub(crate) const RELEASE_SET_RECORD: &str =
    ", #released_at = :released_at, #released_by = :released_by";
/// …the TTL that ends the record, where releases are kept for a while…
pub(crate) const RELEASE_SET_TTL: &str = ", #ttl = :ttl";
/// …removes the holder…
pub(crate) const RELEASE_REMOVE_HOLDER: &str =
    " REMOVE #owner, #acquired_at, #expires_at, #lease_ms, #fencing_token";
/// …and the TTL where items are kept for good, so that DynamoDB does not delete the kept item.
pub(crate) const RELEASE_REMOVE_TTL: &str = ", #ttl";

/// What a release that keeps the item records of itself.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ReleaseRecord<'a> {
    /// The owner whose lock it releases (`None`: the item is released already, and its record is
    /// left as it is).
    pub(crate) by: Option<&'a str>,
    /// The clock's reading.
    pub(crate) at: DateTime<Utc>,
    /// The schema's TTL attribute: `None` without one; `Some(None)` to remove it (kept for good);
    /// `Some(Some(epoch_seconds))` to end the record then.
    pub(crate) ttl: Option<Option<i64>>,
}

/// The update expression of an acquisition that keeps the item, and its values (besides the
/// condition's): `lock` as written with `written`.
pub(crate) fn acquire_update(lock: &Lock, written: &Written<'_>) -> (String, Item) {
    let lease = (lock.expires_at() - lock.acquired_at())
        .to_std()
        .unwrap_or_default();
    let mut expression = ACQUIRE_SET_HOLDER.to_owned();
    let mut values = Item::from([
        (":lock_id".to_owned(), s(lock.lock_id().to_string())),
        (":owner".to_owned(), s(lock.owner())),
        (
            ":acquired_at".to_owned(),
            s(timestamp::format(lock.acquired_at())),
        ),
        (
            ":expires_at".to_owned(),
            s(timestamp::format(lock.expires_at())),
        ),
        (":new_version".to_owned(), s(written.version)),
        (":lease_ms".to_owned(), item::millis(lease)),
    ]);
    if let Some((_, epoch_seconds)) = written.ttl {
        expression.push_str(ACQUIRE_SET_TTL);
        values.insert(":ttl".into(), AttributeValue::N(epoch_seconds.to_string()));
    }
    if let Some(token) = lock.fencing_token() {
        expression.push_str(ACQUIRE_SET_TOKEN);
        values.insert(":fencing_token".into(), item::token(token));
    }
    if let Some(data) = written.data {
        expression.push_str(ACQUIRE_SET_DATA);
        values.insert(":data".into(), AttributeValue::B(Blob::new(data)));
    }
    if let Some(namespace) = written.namespace {
        expression.push_str(SET_NAMESPACE);
        values.insert(":namespace".into(), s(namespace));
    }
    expression.push_str(ACQUIRE_REMOVE_WAITER);
    if lock.fencing_token().is_none() {
        expression.push_str(ACQUIRE_REMOVE_TOKEN);
    }
    (expression, values)
}

/// What a release that keeps the item records, now: `by` the owner it releases (`None` to leave
/// the record's owner as it is), and the TTL the schema and
/// [`keep_released_for`](crate::LockClientBuilder::keep_released_for) give the kept item.
pub(crate) fn release_record<'a>(
    table: &LockTable,
    by: Option<&'a str>,
) -> Result<ReleaseRecord<'a>, Error> {
    let at = table.now();
    let ttl = match (table.schema.ttl_attribute_name(), table.keep_released_for) {
        (None, _) => None,
        (Some(_), None) => Some(None),
        (Some(_), Some(keep)) => {
            let until = time::after(at, keep, "keep_released_for")?;
            let rounded_up = i64::from(until.timestamp_subsec_nanos() > 0);
            Some(Some(until.timestamp() + rounded_up))
        }
    };
    Ok(ReleaseRecord { by, at, ttl })
}

/// The update expression of a release that keeps the item, recording `record`, and its values
/// (besides the condition's). The new version is `:new_version`: a retry of this very request
/// finds it in the item.
pub(crate) fn release_update(change: DataChange<'_>, record: &ReleaseRecord<'_>) -> (String, Item) {
    let mut expression = RELEASE_SET_VERSION.to_owned();
    let mut values = Item::from([(
        ":new_version".to_owned(),
        s(uuid::Uuid::new_v4().to_string()),
    )]);
    if let Some(by) = record.by {
        expression.push_str(RELEASE_SET_RECORD);
        values.insert(":released_at".into(), s(timestamp::format(record.at)));
        values.insert(":released_by".into(), s(by));
    }
    if let Some(Some(epoch_seconds)) = record.ttl {
        expression.push_str(RELEASE_SET_TTL);
        values.insert(":ttl".into(), AttributeValue::N(epoch_seconds.to_string()));
    }
    if let DataChange::Replace(data) = change {
        expression.push_str(", #data = :data");
        values.insert(":data".into(), AttributeValue::B(Blob::new(data)));
    }
    expression.push_str(RELEASE_REMOVE_HOLDER);
    if record.ttl == Some(None) {
        expression.push_str(RELEASE_REMOVE_TTL);
    }
    if let DataChange::Remove = change {
        expression.push_str(", #data");
    }
    (expression, values)
}

/// Creates the kept item of a free lock on `resource`, with `data`, unless an item is there:
/// whether it created one. An application's item there is [`Error::NotALockItem`].
pub(crate) async fn create(
    table: &LockTable,
    resource: &str,
    data: Option<&[u8]>,
) -> Result<bool, Error> {
    table.check_resource(resource)?;
    data.map(limits::data).transpose()?;
    let mut item = table.key(resource);
    let lock_id = LockId::generate();
    item.insert(LOCK_ID.into(), s(lock_id.to_string()));
    item.insert(VERSION.into(), s(uuid::Uuid::new_v4().to_string()));
    if let Some(data) = data {
        item.insert(DATA.into(), AttributeValue::B(Blob::new(data)));
    }
    if let Some(namespace) = table.schema.namespace_name() {
        item.insert(NAMESPACE.into(), s(namespace));
    }
    let sent = table
        .dynamodb
        .put_item()
        .table_name(&table.name)
        .set_item(Some(item))
        .condition_expression(CREATE_CONDITION)
        .set_expression_attribute_names(Some(table.names_for(&[CREATE_CONDITION])))
        .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
        .send();
    let answer = answer("PutItem", sent.await, |err| match err {
        PutItemError::ConditionalCheckFailedException(failed) => Some(failed.item().cloned()),
        _ => None,
    })?;
    match answer {
        Answer::Applied(_) => Ok(true),
        // The item an earlier attempt of this request wrote (its answer lost, the SDK sent it
        // again): created (it answered false, found by review).
        Answer::Refused(Some(found)) if record::lock_id(&found) == Some(lock_id) => Ok(true),
        // A lock item, held or kept: left as it is.
        Answer::Refused(Some(found)) if found.contains_key(LOCK_ID) => Ok(false),
        Answer::Refused(Some(found)) => Err(table.not_a_lock_item(&found)),
        Answer::Refused(None) => Err(Error::UnexpectedResponse {
            operation: "PutItem",
            detail: "condition failed but no item came back for ALL_OLD",
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lock::LockHandle;
    use crate::record::samples::now;
    use crate::schema::tests::assert_every_placeholder_named;
    use chrono::TimeDelta;

    fn lock() -> Lock {
        let handle = LockHandle::new("orders/42", "me", LockId::generate());
        let expires_at = now() + TimeDelta::seconds(30);
        Lock::new(handle, now(), expires_at, tokio::time::Instant::now())
    }

    fn written<'a>(data: Option<&'a [u8]>, ttl: Option<(&'a str, i64)>) -> Written<'a> {
        Written {
            version: "v1",
            ttl,
            data,
            namespace: None,
        }
    }

    #[test]
    fn an_acquisition_keeps_the_payload_unless_it_sets_one() {
        let (kept, values) = acquire_update(&lock(), &written(None, None));
        assert!(!kept.contains("#data"), "{kept}");
        assert!(!values.contains_key(":data"));
        let (replaced, values) = acquire_update(&lock(), &written(Some(b"x"), None));
        assert!(replaced.contains("#data = :data"), "{replaced}");
        assert_eq!(
            values.get(":data"),
            Some(&AttributeValue::B(Blob::new("x")))
        );
    }

    #[test]
    fn an_unfenced_acquisition_removes_an_earlier_token_and_a_fenced_one_sets_its_own() {
        let (unfenced, _) = acquire_update(&lock(), &written(None, Some(("TTL", 9))));
        assert!(
            unfenced
                .ends_with(" REMOVE #writer_waiting, #released_by, #released_at, #fencing_token"),
            "{unfenced}"
        );
        assert!(unfenced.contains("#ttl = :ttl"), "{unfenced}");
        let fenced = lock().with_fencing_token(Some(crate::FencingToken::new(7)));
        let (expression, values) = acquire_update(&fenced, &written(None, None));
        assert!(
            expression.ends_with(" REMOVE #writer_waiting, #released_by, #released_at"),
            "{expression}"
        );
        assert_eq!(
            values.get(":fencing_token"),
            Some(&item::token(crate::FencingToken::new(7)))
        );
    }

    /// A release by "me" now, on a schema with a TTL attribute (`ttl`) or without.
    fn record(ttl: Option<Option<i64>>) -> ReleaseRecord<'static> {
        ReleaseRecord {
            by: Some("me"),
            at: now(),
            ttl,
        }
    }

    #[test]
    fn a_release_removes_the_holder_and_the_ttl_and_changes_the_payload_as_asked() {
        let (keep, values) = release_update(DataChange::Keep, &record(Some(None)));
        assert_eq!(
            keep,
            "SET #version = :new_version, #released_at = :released_at, #released_by = :released_by \
             REMOVE #owner, #acquired_at, #expires_at, #lease_ms, #fencing_token, #ttl"
        );
        assert_eq!(values.get(":released_by"), Some(&s("me")));
        assert_eq!(
            values.get(":released_at"),
            Some(&s(timestamp::format(now())))
        );
        let (replace, values) = release_update(DataChange::Replace(b"next"), &record(None));
        assert!(replace.contains(", #data = :data REMOVE"), "{replace}");
        assert!(!replace.contains("#ttl"), "{replace}");
        assert!(values.contains_key(":data"));
        let (remove, _) = release_update(DataChange::Remove, &record(None));
        assert!(remove.ends_with(", #fencing_token, #data"), "{remove}");
    }

    #[test]
    fn a_release_kept_for_a_while_sets_the_ttl_that_ends_it() {
        let (kept_for, values) = release_update(DataChange::Keep, &record(Some(Some(99))));
        assert!(kept_for.contains(", #ttl = :ttl REMOVE"), "{kept_for}");
        assert!(!kept_for.ends_with(", #ttl"), "{kept_for}");
        assert_eq!(values.get(":ttl"), Some(&AttributeValue::N("99".into())));
        // A force release of an item released already leaves its record's owner as it was.
        let again = ReleaseRecord {
            by: None,
            ..record(None)
        };
        let (update, values) = release_update(DataChange::Keep, &again);
        assert!(!update.contains("#released"), "{update}");
        assert!(!values.contains_key(":released_by") && !values.contains_key(":released_at"));
    }

    #[test]
    fn every_placeholder_is_named() {
        let (acquire, _) = acquire_update(&lock(), &written(Some(b"x"), Some(("TTL", 9))));
        let (release, _) = release_update(DataChange::Remove, &record(Some(Some(9))));
        for expression in [acquire, release] {
            assert_every_placeholder_named(&expression);
        }
    }
}
