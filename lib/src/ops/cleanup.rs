//! Deleting locks whose lease ended long ago, for endpoints without TTL deletion (DynamoDB Local)
//! and for operators who want a tidy table sooner than TTL's days-late deletion.
//!
//! Expired items are harmless (they read as free and are overwritten by the next acquire), so
//! this is housekeeping: a bounded Scan for lock items whose `ExpiresAt` is older than a cutoff,
//! then one conditional DeleteItem per item, conditioned on the same `LockID` and the same
//! cutoff so that a lock re-acquired in the meantime is never deleted. Each call covers a bounded
//! part of the table and returns a [`CleanupCursor`] where it stopped; passing it to the next call
//! resumes there, so that a table of any size is covered in full.

use crate::conditional::{answer, Answer};
use crate::error::Error;
use crate::item::{self, Item, LOCK_ID, PK, SK, SK_VALUE};
use crate::limits;
use crate::lock_table::LockTable;
use crate::timestamp;
use aws_sdk_dynamodb::operation::delete_item::DeleteItemError;
use aws_sdk_dynamodb::types::AttributeValue;
use std::fmt;
use std::str::FromStr;
use std::time::Duration;
use tracing::info;

/// Scan filter: lock items of this client's key prefix whose lease ended before `:cutoff`.
const EXPIRED_FILTER: &str = "#sk = :sk AND begins_with(#pk, :prefix) AND #expires_at < :cutoff";
/// What the scan reads of each item.
const EXPIRED_PROJECTION: &str = "#pk, #sk, #lock_id, #expires_at";
/// Delete only the acquisition that was seen expired, if it still is.
const DELETE_EXPIRED_CONDITION: &str = "#lock_id = :lock_id AND #expires_at < :cutoff";
/// Scan pages (of up to 1 MB each) read per call at most.
const MAX_PAGES: u32 = 10;

/// What one [`LockClient::delete_expired`](crate::LockClient::delete_expired) call did.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CleanupReport {
    /// Items the scan read (DynamoDB's `ScannedCount`).
    pub scanned: u32,
    /// Expired lock items deleted.
    pub deleted: u32,
    /// Expired items left alone because they were re-acquired or deleted meanwhile.
    pub skipped: u32,
    /// Whether the scan reached the end of the table; if not, call again with [`next`](Self::next).
    pub complete: bool,
    /// Where the next call resumes (`None` once the scan reached the end of the table).
    pub next: Option<CleanupCursor>,
}

/// Where a [`LockClient::delete_expired`](crate::LockClient::delete_expired) scan stopped: the key of the last item it dealt with.
///
/// Opaque; to keep it between processes or invocations, store its string form
/// ([`Display`](fmt::Display)) and read it back with [`str::parse`].
///
/// # Examples
///
/// ```no_run
/// # async fn run(client: ddb_lock::LockClient) -> Result<(), Box<dyn std::error::Error>> {
/// use ddb_lock::CleanupCursor;
/// use std::time::Duration;
///
/// let report = client.delete_expired(Duration::from_secs(3600), 100, None).await?;
/// if let Some(next) = report.next {
///     let saved = next.to_string();
///     // ... later, perhaps in another invocation ...
///     let resume: CleanupCursor = saved.parse()?;
///     client.delete_expired(Duration::from_secs(3600), 100, Some(&resume)).await?;
/// }
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CleanupCursor {
    pk: String,
    sk: String,
}

impl CleanupCursor {
    fn from_key(key: &Item) -> Option<Self> {
        let text = |name: &str| key.get(name)?.as_s().ok().cloned();
        Some(CleanupCursor {
            pk: text(PK)?,
            sk: text(SK)?,
        })
    }

    fn key(&self) -> Item {
        Item::from([
            (PK.to_owned(), AttributeValue::S(self.pk.clone())),
            (SK.to_owned(), AttributeValue::S(self.sk.clone())),
        ])
    }
}

/// The string form: the sort key, a space, then the partition key (sort keys hold no spaces).
impl fmt::Display for CleanupCursor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.sk, self.pk)
    }
}

/// A string that is not a [`CleanupCursor`]'s string form.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("not a cleanup cursor: expected `<sort key> <partition key>`")]
pub struct InvalidCleanupCursor;

impl FromStr for CleanupCursor {
    type Err = InvalidCleanupCursor;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let (sk, pk) = s.split_once(' ').ok_or(InvalidCleanupCursor)?;
        if sk.is_empty() || pk.is_empty() {
            return Err(InvalidCleanupCursor);
        }
        Ok(CleanupCursor {
            pk: pk.to_owned(),
            sk: sk.to_owned(),
        })
    }
}

/// Deletes up to `max_deletes` lock items whose lease ended more than `expired_for` ago, scanning
/// from `resume`; see [`LockClient::delete_expired`](crate::LockClient::delete_expired)(crate::LockClient::delete_expired).
pub(crate) async fn delete_expired(
    table: &LockTable,
    expired_for: Duration,
    max_deletes: u32,
    resume: Option<&CleanupCursor>,
) -> Result<CleanupReport, Error> {
    limits::duration("expired_for", expired_for, Duration::ZERO)?;
    let cutoff = table.now() - chrono::TimeDelta::from_std(expired_for).unwrap_or_default();
    let cutoff = AttributeValue::S(timestamp::format(cutoff));
    let mut report = CleanupReport::default();
    // The key of the last item dealt with, or where the scan starts: the next call's start.
    let mut position: Option<Item> = resume.map(CleanupCursor::key);
    if max_deletes == 0 {
        report.next = resume.cloned();
        return Ok(log_cleanup(table, report));
    }
    for _ in 0..MAX_PAGES {
        let page = table
            .dynamodb
            .scan()
            .table_name(&table.name)
            .filter_expression(EXPIRED_FILTER)
            .projection_expression(EXPIRED_PROJECTION)
            .set_expression_attribute_names(Some(item::names_for(&[
                EXPIRED_FILTER,
                EXPIRED_PROJECTION,
            ])))
            .expression_attribute_values(":sk", AttributeValue::S(SK_VALUE.to_owned()))
            .expression_attribute_values(":prefix", AttributeValue::S(table.key_prefix.clone()))
            .expression_attribute_values(":cutoff", cutoff.clone())
            .consistent_read(true)
            .set_exclusive_start_key(position.clone())
            .send()
            .await
            .map_err(|e| Error::backend("Scan", e))?;
        report.scanned += u32::try_from(page.scanned_count()).unwrap_or(0);
        for found in page.items() {
            if delete_if_still_expired(table, found, &cutoff).await? {
                report.deleted += 1;
            } else {
                report.skipped += 1;
            }
            if report.deleted >= max_deletes {
                // Stopped inside the page: the next call resumes after this item (any
                // item's key is a valid start key for a scan).
                report.next = CleanupCursor::from_key(&key_of(found));
                return Ok(log_cleanup(table, report));
            }
        }
        position = page.last_evaluated_key;
        if position.is_none() {
            report.complete = true;
            break;
        }
    }
    report.next = position.as_ref().and_then(CleanupCursor::from_key);
    Ok(log_cleanup(table, report))
}

/// Deletes the lock item `found` if it still holds the same acquisition, expired before `cutoff`;
/// whether it did.
async fn delete_if_still_expired(
    table: &LockTable,
    found: &Item,
    cutoff: &AttributeValue,
) -> Result<bool, Error> {
    let key = key_of(found);
    let Some(lock_id) = found.get(LOCK_ID) else {
        return Ok(false);
    };
    let request = table
        .dynamodb
        .delete_item()
        .table_name(&table.name)
        .set_key(Some(key))
        .condition_expression(DELETE_EXPIRED_CONDITION)
        .set_expression_attribute_names(Some(item::names_for(&[DELETE_EXPIRED_CONDITION])))
        .expression_attribute_values(":lock_id", lock_id.clone())
        .expression_attribute_values(":cutoff", cutoff.clone())
        .send();
    // A refusal only means the lock was re-acquired or deleted meanwhile: leave it.
    let answer = answer("DeleteItem", request.await, |err| {
        matches!(err, DeleteItemError::ConditionalCheckFailedException(_)).then_some(())
    })?;
    Ok(matches!(answer, Answer::Applied(_)))
}

/// Logs what a cleanup call did.
fn log_cleanup(table: &LockTable, report: CleanupReport) -> CleanupReport {
    let next = report.next.as_ref().map(ToString::to_string);
    info!(
        table = table.name.as_str(),
        scanned = report.scanned,
        deleted = report.deleted,
        skipped = report.skipped,
        complete = report.complete,
        next,
        "expired locks cleaned up"
    );
    report
}

/// The primary key of a scanned item.
fn key_of(found: &Item) -> Item {
    [PK, SK]
        .into_iter()
        .filter_map(|k| Some((k.to_owned(), found.get(k)?.clone())))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cursor_survives_its_string_form() {
        let cursor = CleanupCursor {
            pk: "LOCK#orders/42 with spaces".into(),
            sk: "LOCK".into(),
        };
        assert_eq!(cursor.to_string().parse::<CleanupCursor>(), Ok(cursor));
        assert_eq!("LOCK".parse::<CleanupCursor>(), Err(InvalidCleanupCursor));
        assert_eq!(
            " LOCK#a".parse::<CleanupCursor>(),
            Err(InvalidCleanupCursor)
        );
    }

    #[test]
    fn expressions_name_only_known_attributes() {
        let names = item::names_for(&[EXPIRED_FILTER, EXPIRED_PROJECTION]);
        assert_eq!(names.len(), 4);
        assert_eq!(names["#expires_at"], item::EXPIRES_AT);
        assert_eq!(item::names_for(&[DELETE_EXPIRED_CONDITION]).len(), 2);
    }
}
