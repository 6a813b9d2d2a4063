//! Deleting locks whose lease ended long ago, for endpoints without TTL deletion (DynamoDB Local)
//! and for operators who want a tidy table sooner than TTL's days-late deletion.
//!
//! Expired items are harmless (they read as free and are overwritten by the next acquire), so
//! this is housekeeping: a bounded Scan for lock items whose `ExpiresAt` is older than a cutoff,
//! then one conditional DeleteItem per item, conditioned on the same `LockID` and the same
//! cutoff so that a lock re-acquired in the meantime is never deleted.

use crate::client::LockClient;
use crate::error::Error;
use crate::item::{self, Item, LOCK_ID, PK, SK, SK_VALUE};
use crate::limits;
use crate::timestamp;
use aws_sdk_dynamodb::operation::delete_item::DeleteItemError;
use aws_sdk_dynamodb::types::AttributeValue;
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

/// What one [`LockClient::delete_expired`] call did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CleanupReport {
    /// Items the scan read (DynamoDB's `ScannedCount`).
    pub scanned: u32,
    /// Expired lock items deleted.
    pub deleted: u32,
    /// Expired items left alone because they were re-acquired or deleted meanwhile.
    pub skipped: u32,
    /// Whether the scan reached the end of the table; if not, call again.
    pub complete: bool,
}

impl LockClient {
    /// Deletes up to `max_deletes` lock items whose lease ended more than `expired_for` ago, and
    /// says whether the whole table was covered. Reads at most 10 scan pages per call.
    ///
    /// Needs `dynamodb:Scan` on the table, which nothing else in the library does.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn run(client: ddb_lock::LockClient) -> Result<(), ddb_lock::Error> {
    /// use std::time::Duration;
    ///
    /// loop {
    ///     let report = client.delete_expired(Duration::from_secs(3600), 100).await?;
    ///     if report.complete && report.deleted < 100 {
    ///         break;
    ///     }
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn delete_expired(
        &self,
        expired_for: Duration,
        max_deletes: u32,
    ) -> Result<CleanupReport, Error> {
        limits::duration("expired_for", expired_for, Duration::ZERO)?;
        let cutoff = self.now() - chrono::TimeDelta::from_std(expired_for).unwrap_or_default();
        let cutoff = AttributeValue::S(timestamp::format(cutoff));
        let mut report = CleanupReport::default();
        let mut start_key: Option<Item> = None;
        for _ in 0..MAX_PAGES {
            let page = self
                .dynamodb()
                .scan()
                .table_name(self.table_name())
                .filter_expression(EXPIRED_FILTER)
                .projection_expression(EXPIRED_PROJECTION)
                .set_expression_attribute_names(Some(item::names_for(&[
                    EXPIRED_FILTER,
                    EXPIRED_PROJECTION,
                ])))
                .expression_attribute_values(":sk", AttributeValue::S(SK_VALUE.to_owned()))
                .expression_attribute_values(":prefix", AttributeValue::S(self.key_prefix().into()))
                .expression_attribute_values(":cutoff", cutoff.clone())
                .consistent_read(true)
                .set_exclusive_start_key(start_key.take())
                .send()
                .await
                .map_err(|e| Error::backend("Scan", e))?;
            report.scanned += u32::try_from(page.scanned_count()).unwrap_or(0);
            for found in page.items() {
                if report.deleted >= max_deletes {
                    return Ok(self.log_cleanup(report));
                }
                if self.delete_if_still_expired(found, &cutoff).await? {
                    report.deleted += 1;
                } else {
                    report.skipped += 1;
                }
            }
            start_key = page.last_evaluated_key;
            if start_key.is_none() {
                report.complete = true;
                break;
            }
        }
        Ok(self.log_cleanup(report))
    }

    async fn delete_if_still_expired(
        &self,
        found: &Item,
        cutoff: &AttributeValue,
    ) -> Result<bool, Error> {
        let key: Item = [PK, SK]
            .into_iter()
            .filter_map(|k| Some((k.to_owned(), found.get(k)?.clone())))
            .collect();
        let Some(lock_id) = found.get(LOCK_ID) else {
            return Ok(false);
        };
        let deleted = self
            .dynamodb()
            .delete_item()
            .table_name(self.table_name())
            .set_key(Some(key))
            .condition_expression(DELETE_EXPIRED_CONDITION)
            .set_expression_attribute_names(Some(item::names_for(&[DELETE_EXPIRED_CONDITION])))
            .expression_attribute_values(":lock_id", lock_id.clone())
            .expression_attribute_values(":cutoff", cutoff.clone())
            .send()
            .await;
        match deleted {
            Ok(_) => Ok(true),
            Err(err)
                if matches!(
                    err.as_service_error(),
                    Some(DeleteItemError::ConditionalCheckFailedException(_))
                ) =>
            {
                Ok(false)
            }
            Err(err) => Err(Error::backend("DeleteItem", err)),
        }
    }

    fn log_cleanup(&self, report: CleanupReport) -> CleanupReport {
        info!(
            table = self.table_name(),
            scanned = report.scanned,
            deleted = report.deleted,
            skipped = report.skipped,
            complete = report.complete,
            "expired locks cleaned up"
        );
        report
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expressions_name_only_known_attributes() {
        let names = item::names_for(&[EXPIRED_FILTER, EXPIRED_PROJECTION]);
        assert_eq!(names.len(), 4);
        assert_eq!(names["#expires_at"], item::EXPIRES_AT);
        assert_eq!(item::names_for(&[DELETE_EXPIRED_CONDITION]).len(), 2);
    }
}
