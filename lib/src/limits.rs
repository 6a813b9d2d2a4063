//! Input limits and their validation.
//!
//! Every value a caller hands the library is checked here before any request is sent, so bad input
//! is an [`InvalidInput`] naming the field and the limit, and never reaches DynamoDB half-formed.

use crate::error::InvalidInput;
use std::time::Duration;

/// DynamoDB's maximum size of a partition key value, in bytes. The key prefix counts towards it.
pub const MAX_PARTITION_KEY_BYTES: usize = 2048;

/// DynamoDB's maximum size of a sort key value, in bytes.
pub const MAX_SORT_KEY_BYTES: usize = 1024;

/// DynamoDB's maximum length of a key attribute's name, in bytes.
pub const MAX_KEY_ATTRIBUTE_NAME_BYTES: usize = 255;

/// DynamoDB's maximum length of an index name, in bytes.
pub const MAX_INDEX_NAME_BYTES: usize = 255;

/// DynamoDB's maximum length of any other attribute's name, in bytes (64 KB).
pub const MAX_ATTRIBUTE_NAME_BYTES: usize = 64 * 1024 - 1;

/// Maximum size of an owner name, in bytes (a Step Functions execution ARN is well under this).
pub const MAX_OWNER_BYTES: usize = 1024;

/// Largest payload stored with a lock (`Data`), in bytes. Every 1 KB of an item costs a write
/// unit on every acquire and extend, so the payload is meant to be small.
pub const MAX_DATA_BYTES: usize = 16 * 1024;

/// Most shared holders of one lock at a time, and most permits of a semaphore. Holders live in the
/// lock item (each entry a hundred-odd bytes of its 400 KB), and a reclaim of crashed holders
/// names each holder in one condition expression (at most 4 KB), so the bound keeps every
/// request within DynamoDB's limits.
pub const MAX_SHARED_HOLDERS: u32 = 100;

/// Most resources in one lock set: the items one `TransactWriteItems` can write.
pub const MAX_SET_MEMBERS: usize = 100;

/// Shortest lease: timestamps have millisecond precision.
pub const MIN_LEASE: Duration = Duration::from_millis(1);

/// Longest lease, acquire timeout, backoff delay or TTL grace period: 366 days, a little over the
/// longest Step Functions standard workflow (one year). Anything longer is a mistake.
pub const MAX_DURATION: Duration = Duration::from_secs(366 * 24 * 60 * 60);

/// Shortest table name DynamoDB accepts.
pub const MIN_TABLE_NAME_LEN: usize = 3;

/// Longest table name DynamoDB accepts.
pub const MAX_TABLE_NAME_LEN: usize = 255;

/// Checks a resource name: not empty, and at most `limit` bytes (what the key format leaves of
/// [`MAX_PARTITION_KEY_BYTES`]).
pub(crate) fn resource(resource: &str, limit: usize) -> Result<(), InvalidInput> {
    if resource.is_empty() {
        return Err(InvalidInput::Empty { field: "resource" });
    }
    if resource.len() > limit {
        return Err(InvalidInput::TooLarge {
            field: "resource",
            bytes: resource.len(),
            limit,
        });
    }
    Ok(())
}

/// Checks an owner name as every acquisition does: not empty, within [`MAX_OWNER_BYTES`]; for
/// adapters that take an owner in their configuration and refuse a bad one when they are built.
///
/// # Examples
///
/// ```
/// assert!(ddb_lock::limits::owner("worker-1").is_ok());
/// assert_eq!(ddb_lock::limits::owner("").unwrap_err().field(), "owner");
/// ```
pub fn owner(owner: &str) -> Result<(), InvalidInput> {
    if owner.is_empty() {
        return Err(InvalidInput::Empty { field: "owner" });
    }
    if owner.len() > MAX_OWNER_BYTES {
        return Err(InvalidInput::TooLarge {
            field: "owner",
            bytes: owner.len(),
            limit: MAX_OWNER_BYTES,
        });
    }
    Ok(())
}

/// Checks a lock payload's size against [`MAX_DATA_BYTES`].
pub(crate) fn data(data: &[u8]) -> Result<(), InvalidInput> {
    if data.len() > MAX_DATA_BYTES {
        return Err(InvalidInput::TooLarge {
            field: "data",
            bytes: data.len(),
            limit: MAX_DATA_BYTES,
        });
    }
    Ok(())
}

/// Checks that `value` lies in `min..=MAX_DURATION`.
pub(crate) fn duration(
    field: &'static str,
    value: Duration,
    min: Duration,
) -> Result<(), InvalidInput> {
    if value < min {
        return Err(InvalidInput::DurationTooShort { field, value, min });
    }
    if value > MAX_DURATION {
        return Err(InvalidInput::DurationTooLong {
            field,
            value,
            max: MAX_DURATION,
        });
    }
    Ok(())
}

/// Checks that `value` is a whole number of milliseconds, and gives that number.
pub(crate) fn whole_millis(field: &'static str, value: Duration) -> Result<u64, InvalidInput> {
    if value.subsec_nanos() % 1_000_000 != 0 {
        return Err(InvalidInput::NotWholeMillis { field, value });
    }
    Ok(u64::try_from(value.as_millis()).unwrap_or(u64::MAX))
}

/// Checks a lease (`MIN_LEASE..=MAX_DURATION`) and cuts it to whole milliseconds, the precision at
/// which `ExpiresAt` is stored: a `Lock` must not count on a fraction the item does not hold.
pub(crate) fn lease(value: Duration) -> Result<Duration, InvalidInput> {
    duration("lease", value, MIN_LEASE)?;
    let millis = u64::try_from(value.as_millis()).unwrap_or(u64::MAX);
    Ok(Duration::from_millis(millis))
}

/// Checks a table name against DynamoDB's rules: 3 to 255 characters of `a-z A-Z 0-9 _ - .`.
pub(crate) fn table_name(name: &str) -> Result<(), InvalidInput> {
    let valid_chars = name
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'));
    if !(MIN_TABLE_NAME_LEN..=MAX_TABLE_NAME_LEN).contains(&name.len()) || !valid_chars {
        return Err(InvalidInput::TableName {
            name: name.to_owned(),
        });
    }
    Ok(())
}

/// Converts a signed millisecond count from an untyped source (a JSON event, a command line) into a
/// [`Duration`], rejecting negative values with an error naming `field`.
///
/// Range checks (zero, too long) happen where the duration is used, as for any other duration.
///
/// # Examples
///
/// ```
/// use ddb_lock::{duration_from_millis, InvalidInput};
/// use std::time::Duration;
///
/// assert_eq!(duration_from_millis("lease_ms", 1500), Ok(Duration::from_millis(1500)));
/// assert_eq!(
///     duration_from_millis("lease_ms", -1),
///     Err(InvalidInput::NegativeDuration { field: "lease_ms", millis: -1 })
/// );
/// ```
pub fn duration_from_millis(field: &'static str, millis: i64) -> Result<Duration, InvalidInput> {
    u64::try_from(millis)
        .map(Duration::from_millis)
        .map_err(|_| InvalidInput::NegativeDuration { field, millis })
}

/// Checks a semaphore's permits: 1 to [`MAX_SHARED_HOLDERS`].
pub(crate) fn permits(permits: u32) -> Result<u32, InvalidInput> {
    if (1..=MAX_SHARED_HOLDERS).contains(&permits) {
        Ok(permits)
    } else {
        Err(InvalidInput::Permits { permits })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resource_limit_counts_the_prefix() {
        let fits = "r".repeat(MAX_PARTITION_KEY_BYTES - 5);
        assert_eq!(
            resource(&fits, MAX_PARTITION_KEY_BYTES - "LOCK#".len()),
            Ok(())
        );
        let over = "r".repeat(MAX_PARTITION_KEY_BYTES - 4);
        assert_eq!(
            resource(&over, MAX_PARTITION_KEY_BYTES - "LOCK#".len()),
            Err(InvalidInput::TooLarge {
                field: "resource",
                bytes: MAX_PARTITION_KEY_BYTES - 4,
                limit: MAX_PARTITION_KEY_BYTES - 5
            })
        );
    }

    #[test]
    fn resource_limit_is_in_bytes_not_characters() {
        let wide = "é".repeat(1022); // 2044 bytes
        assert!(resource(&wide, MAX_PARTITION_KEY_BYTES - "LOCK#".len()).is_err());
    }

    #[test]
    fn durations_outside_the_range_are_rejected() {
        assert!(duration("lease", Duration::ZERO, MIN_LEASE).is_err());
        assert!(duration("lease", MIN_LEASE, MIN_LEASE).is_ok());
        assert_eq!(
            lease(Duration::from_micros(1_500_900)),
            Ok(Duration::from_millis(1500)),
            "stored to the millisecond"
        );
        assert!(lease(Duration::from_micros(999)).is_err());
        assert!(duration("lease", MAX_DURATION, MIN_LEASE).is_ok());
        assert!(duration("lease", MAX_DURATION + Duration::from_millis(1), MIN_LEASE).is_err());
    }

    #[test]
    fn table_names_follow_dynamodb_rules() {
        assert!(table_name("locks.v1_prod-A").is_ok());
        for bad in ["ab", "has space", "x".repeat(256).as_str(), "slash/"] {
            assert!(table_name(bad).is_err(), "{bad}");
        }
    }
}
