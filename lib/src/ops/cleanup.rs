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
use crate::item::{Item, LOCK_ID};
use crate::limits;
use crate::lock_table::LockTable;
use crate::schema::TableSchema;
use crate::timestamp;
use aws_sdk_dynamodb::operation::delete_item::DeleteItemError;
use aws_sdk_dynamodb::types::AttributeValue;
use std::fmt;
use std::str::FromStr;
use std::time::Duration;
use tracing::info;

/// Scan filter: lock items (with a sort key: of the lock items' sort-key value)…
const FILTER_SORT_KEY: &str = "#sk = :sk AND ";
/// …of this client's key prefix (unless it is empty)…
const FILTER_PREFIX: &str = "begins_with(#pk, :prefix) AND ";
/// …or, for a client of no namespace, of any namespace's (`NS#<namespace>#` before the prefix:
/// every namespace's locks are the table's locks; they were left to TTL)…
const FILTER_PREFIX_OR_NAMESPACED: &str =
    "(begins_with(#pk, :prefix) OR begins_with(#pk, :namespaced)) AND ";
/// …whose lease ended before `:cutoff`, and which are no once-per-window claim: a window's
/// item, past its window's end, is what refuses a second claim of that window by a caller whose
/// clock is behind (or whose request was delayed); deleted, it let that window be claimed again.
/// Each key keeps one (the next window's claim replaces it), and TTL deletes it a grace later.
const FILTER_EXPIRED: &str = "#expires_at < :cutoff AND attribute_not_exists(#window)";
/// What the scan reads of each item, without a sort key…
const PROJECTION: &str = "#pk, #lock_id, #expires_at";
/// …and with one.
const PROJECTION_WITH_SORT_KEY: &str = "#pk, #sk, #lock_id, #expires_at";
/// Delete only the acquisition that was seen expired, if it still is.
const DELETE_EXPIRED_CONDITION: &str =
    "#lock_id = :lock_id AND #expires_at < :cutoff AND attribute_not_exists(#shared) AND attribute_not_exists(#intent_shared) AND attribute_not_exists(#intent_exclusive) AND attribute_not_exists(#window)";
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
    /// `None` in a table without a sort key.
    sk: Option<String>,
}

impl CleanupCursor {
    fn from_key(schema: &TableSchema, key: &Item) -> Option<Self> {
        let text = |name: &str| key.get(name)?.as_s().ok().cloned();
        let sk = match schema.sort_key_name() {
            Some(name) => Some(text(name)?),
            None => None,
        };
        Some(CleanupCursor {
            pk: text(schema.partition_key_name())?,
            sk,
        })
    }

    fn key(&self, schema: &TableSchema) -> Item {
        let sort = schema.sort_key_name().zip(self.sk.as_ref());
        std::iter::once((schema.partition_key_name(), &self.pk))
            .chain(sort)
            .map(|(name, value)| (name.to_owned(), AttributeValue::S(value.clone())))
            .collect()
    }
}

/// The string form: the sort key's length in bytes, a colon, the sort key, a space, then the
/// partition key (`4:LOCK LOCK#orders/42`); in a table without a sort key, a space, then the
/// partition key (` LOCK#orders/42`). The length makes any sort key safe, spaces included: a scan
/// of a shared table can stop at an application's item whose sort key has some.
impl fmt::Display for CleanupCursor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.sk {
            Some(sk) => write!(f, "{}:{sk} {}", sk.len(), self.pk),
            None => write!(f, " {}", self.pk),
        }
    }
}

/// A string that is not a [`CleanupCursor`]'s string form.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "not a cleanup cursor: expected `<length>:<sort key> <partition key>` or ` <partition key>`"
)]
pub struct InvalidCleanupCursor;

impl FromStr for CleanupCursor {
    type Err = InvalidCleanupCursor;

    /// Also reads the form of earlier versions, `<sort key> <partition key>` (a sort key without
    /// spaces, such as `LOCK`), so that a saved cursor still resumes.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let (sk, pk) = match s.strip_prefix(' ') {
            Some(pk) => (None, pk),
            None => {
                let (sk, rest) = length_prefixed(s)
                    .or_else(|| s.split_once(' '))
                    .ok_or(InvalidCleanupCursor)?;
                (Some(sk), rest)
            }
        };
        if pk.is_empty() || sk.is_some_and(str::is_empty) {
            return Err(InvalidCleanupCursor);
        }
        Ok(CleanupCursor {
            pk: pk.to_owned(),
            sk: sk.map(str::to_owned),
        })
    }
}

/// Splits `<length>:<value> <rest>` into value and rest, if `s` has that form.
fn length_prefixed(s: &str) -> Option<(&str, &str)> {
    let (length, tail) = s.split_once(':')?;
    if length.is_empty() || !length.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let length: usize = length.parse().ok()?;
    let value = tail.get(..length)?;
    let rest = tail.get(length..)?.strip_prefix(' ')?;
    Some((value, rest))
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
    let schema = &table.schema;
    let mut position: Option<Item> = resume.map(|cursor| cursor.key(schema));
    let (filter, projection) = scan_expressions(schema);
    if max_deletes == 0 {
        report.next = resume.cloned();
        return Ok(log_cleanup(table, report));
    }
    for _ in 0..MAX_PAGES {
        let page = table
            .dynamodb
            .scan()
            .table_name(&table.name)
            .filter_expression(&filter)
            .projection_expression(projection)
            .set_expression_attribute_names(Some(table.names_for(&[&filter, projection])))
            .set_expression_attribute_values(Some(scan_values(schema, &cutoff)))
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
                report.next = schema
                    .key_attributes(found)
                    .and_then(|key| CleanupCursor::from_key(schema, &key));
                return Ok(log_cleanup(table, report));
            }
        }
        position = page.last_evaluated_key;
        if position.is_none() {
            report.complete = true;
            break;
        }
    }
    report.next = position
        .as_ref()
        .and_then(|key| CleanupCursor::from_key(schema, key));
    Ok(log_cleanup(table, report))
}

/// Deletes the lock item `found` if it still holds the same acquisition, expired before `cutoff`;
/// whether it did.
async fn delete_if_still_expired(
    table: &LockTable,
    found: &Item,
    cutoff: &AttributeValue,
) -> Result<bool, Error> {
    // The filter cannot test a key suffix; an item in the prefix's range that is not at a lock
    // key is not ours, whatever its attributes.
    let Some(key) = table.schema.key_attributes(found) else {
        return Ok(false);
    };
    let Some(lock_id) = found
        .get(LOCK_ID)
        .filter(|_| table.schema.is_lock_key_in_any_namespace(&key))
    else {
        return Ok(false);
    };
    let request = table
        .dynamodb
        .delete_item()
        .table_name(&table.name)
        .set_key(Some(key))
        .condition_expression(DELETE_EXPIRED_CONDITION)
        .set_expression_attribute_names(Some(table.names_for(&[DELETE_EXPIRED_CONDITION])))
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

/// The scan's filter and projection under `schema`.
fn scan_expressions(schema: &TableSchema) -> (String, &'static str) {
    let (sort_key, projection) = match schema.sort_key_name() {
        Some(_) => (FILTER_SORT_KEY, PROJECTION_WITH_SORT_KEY),
        None => ("", PROJECTION),
    };
    // `begins_with` with an empty prefix matches everything; DynamoDB need not see it.
    let prefix = match (schema.lock_key_prefix().is_empty(), schema.namespace()) {
        (true, _) => "",
        (false, Some(_)) => FILTER_PREFIX,
        (false, None) => FILTER_PREFIX_OR_NAMESPACED,
    };
    (format!("{sort_key}{prefix}{FILTER_EXPIRED}"), projection)
}

/// The scan filter's values: exactly those [`scan_expressions`] uses.
fn scan_values(schema: &TableSchema, cutoff: &AttributeValue) -> Item {
    let sort_key = schema.lock_sort_key_value().map(|v| (":sk", v));
    let prefix = Some(schema.lock_key_prefix())
        .filter(|p| !p.is_empty())
        .map(|p| (":prefix", p));
    let namespaced = (prefix.is_some() && schema.namespace().is_none()).then(|| {
        (
            ":namespaced",
            crate::namespace::NAMESPACE_KEY_PREFIX.to_owned(),
        )
    });
    sort_key
        .map(|(name, value)| (name, value.to_owned()))
        .into_iter()
        .chain(prefix)
        .chain(namespaced)
        .map(|(name, value)| (name.to_owned(), AttributeValue::S(value)))
        .chain([(":cutoff".to_owned(), cutoff.clone())])
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::item::EXPIRES_AT;
    use crate::schema::tests::assert_every_placeholder_named;

    #[test]
    fn a_cursor_survives_its_string_form() {
        for sk in [Some("LOCK".to_owned()), None] {
            let cursor = CleanupCursor {
                pk: "LOCK#orders/42 with spaces".into(),
                sk,
            };
            assert_eq!(cursor.to_string().parse::<CleanupCursor>(), Ok(cursor));
        }
        assert_eq!("LOCK".parse::<CleanupCursor>(), Err(InvalidCleanupCursor));
        assert_eq!("LOCK ".parse::<CleanupCursor>(), Err(InvalidCleanupCursor));
        assert_eq!(" ".parse::<CleanupCursor>(), Err(InvalidCleanupCursor));
    }

    #[test]
    fn a_sort_key_with_spaces_and_colons_survives_the_string_form() {
        for sk in ["ORDER 7 LINE 2", "3:a b", " ", "é ü", "LOCK"] {
            let cursor = CleanupCursor {
                pk: "CUSTOMER#1 two".into(),
                sk: Some(sk.into()),
            };
            let text = cursor.to_string();
            assert_eq!(text.parse::<CleanupCursor>(), Ok(cursor), "{text}");
        }
        let cursor = CleanupCursor {
            pk: "LOCK#a".into(),
            sk: Some("LOCK".into()),
        };
        assert_eq!(cursor.to_string(), "4:LOCK LOCK#a");
    }

    #[test]
    fn an_earlier_versions_cursor_still_resumes() {
        assert_eq!(
            "LOCK LOCK#orders/42".parse::<CleanupCursor>(),
            Ok(CleanupCursor {
                pk: "LOCK#orders/42".into(),
                sk: Some("LOCK".into()),
            })
        );
    }

    #[test]
    fn a_cursor_is_a_key_of_the_schema() {
        let schema = TableSchema::new().partition_key("id").without_sort_key();
        let key = schema.lock_key("a");
        let cursor = CleanupCursor::from_key(&schema, &key).unwrap();
        assert_eq!(cursor.to_string(), " LOCK#a");
        assert_eq!(cursor.key(&schema), key);
        let default = TableSchema::new();
        let key = default.lock_key("a");
        assert_eq!(
            CleanupCursor::from_key(&default, &key)
                .unwrap()
                .key(&default),
            key
        );
    }

    #[test]
    fn the_default_schemas_scan_is_unchanged() {
        let (filter, projection) = scan_expressions(&TableSchema::new());
        assert_eq!(
            filter,
            "#sk = :sk AND (begins_with(#pk, :prefix) OR begins_with(#pk, :namespaced)) AND #expires_at < :cutoff AND attribute_not_exists(#window)"
        );
        assert_eq!(projection, "#pk, #sk, #lock_id, #expires_at");
    }

    #[test]
    fn the_scan_uses_exactly_the_values_and_names_it_sends() {
        let cutoff = AttributeValue::S("2026-11-21T22:00:00.000Z".into());
        let schemas = [
            TableSchema::new(),
            TableSchema::new().partition_key("id").without_sort_key(),
            TableSchema::new()
                .partition_key("id")
                .without_sort_key()
                .key_prefix("")
                .key_suffix("#LOCK")
                .fence_key_format("", "#FENCE"),
        ];
        for schema in schemas {
            let (filter, projection) = scan_expressions(&schema);
            let values = scan_values(&schema, &cutoff);
            for name in values.keys() {
                assert!(filter.contains(name.as_str()), "{filter}: {name}");
            }
            assert_eq!(filter.matches(':').count(), values.len(), "{filter}");
            let names = schema.names_for(&[&filter, projection]);
            assert_eq!(names["#expires_at"], EXPIRES_AT);
            assert_every_placeholder_named(&filter);
        }
        assert_every_placeholder_named(PROJECTION_WITH_SORT_KEY);
        assert_every_placeholder_named(DELETE_EXPIRED_CONDITION);
    }
}
