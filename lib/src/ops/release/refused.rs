//! How a release reads what it found: a refusal's item (`ALL_OLD`), a resend's or an overtaken
//! release's answer.

use crate::error::Error;
use crate::item::{Item, LOCK_ID, OWNER, RELEASED_AT, RELEASED_BY};
use crate::lock::LockId;
use crate::outcome::ReleaseOutcome;
use crate::record::Record;
use crate::timestamp;
use aws_sdk_dynamodb::types::AttributeValue;
use chrono::{DateTime, Utc};

/// `outcome`, of a release that `keeps_data` or not, `overtaken` by a later release of the lock or not:
/// what an overtaken one found gone, released or another's may be that one's doing, as a
/// resend's. Released already says so still where the release replaced the payload: no other
/// release wrote it, and `Unconfirmed` said it may have been written (found by review).
pub(super) fn read_overtaken(
    outcome: Result<ReleaseOutcome, Error>,
    overtaken: bool,
    keeps_data: bool,
) -> Result<ReleaseOutcome, Error> {
    match outcome {
        Ok(ReleaseOutcome::AlreadyReleased { .. }) if !keeps_data => outcome,
        Ok(
            ReleaseOutcome::NotFound
            | ReleaseOutcome::NotOwner { .. }
            | ReleaseOutcome::AlreadyReleased { .. },
        ) if overtaken => Ok(ReleaseOutcome::Unconfirmed),
        outcome => outcome,
    }
}

/// What a refusal on `item`, an item a release kept, says of the release of `owner`'s lock
/// `lock_id` (`None`: any lock of `owner`): [`ReleaseOutcome::AlreadyReleased`] if the item
/// records the release of this very acquisition, or of a lock of this owner; `None` if it is no
/// such record (a held item, another acquisition's or owner's record, or one kept before releases
/// recorded themselves).
pub(crate) fn already_released(
    owner: &str,
    lock_id: Option<LockId>,
    item: &Item,
) -> Option<ReleaseOutcome> {
    let string = |name: &str| match item.get(name) {
        Some(AttributeValue::S(value)) => Some(value.as_str()),
        _ => None,
    };
    if item.contains_key(OWNER) {
        return None;
    }
    let released_at = timestamp::parse(string(RELEASED_AT)?)?;
    let ours = match lock_id {
        Some(lock_id) => string(LOCK_ID) == Some(lock_id.to_string().as_str()),
        None => string(RELEASED_BY) == Some(owner),
    };
    ours.then_some(ReleaseOutcome::AlreadyReleased { released_at })
}

/// Whether the item a retried release failed on is someone else's: our own earlier attempt may
/// have deleted our item, after which someone else may have acquired.
pub(super) fn gone_after_retry(
    owner: &str,
    lock_id: Option<LockId>,
    record: Option<&Record>,
    retried: bool,
) -> bool {
    let ours = |r: &Record| match lock_id {
        Some(id) => r.lock_id == id,
        None => r.holder.owner == owner,
    };
    retried && record.is_some_and(|record| !ours(record))
}

/// What a release whose condition failed on `record` (`ALL_OLD`, `None` if there was no item)
/// tells its caller, `retried` saying whether the SDK sent the request more than once.
pub(crate) fn read_refused(
    owner: &str,
    lock_id: Option<LockId>,
    record: Option<Record>,
    retried: bool,
    now: DateTime<Utc>,
) -> ReleaseOutcome {
    // A retry may have failed on what our own earlier attempt did. Never call that a mismatch or
    // a loss: it is unconfirmed.
    if gone_after_retry(owner, lock_id, record.as_ref(), retried) {
        return ReleaseOutcome::Unconfirmed;
    }
    match record {
        Some(record) if record.holder.is_live_at(now) => ReleaseOutcome::NotOwner {
            holder: record.holder,
        },
        _ if retried => ReleaseOutcome::Unconfirmed,
        _ => ReleaseOutcome::NotFound,
    }
}
