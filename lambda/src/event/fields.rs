//! The readers serde calls for the event's fields (`deserialize_with`): durations and instants
//! in whole milliseconds, flags, JSON payloads, modes, lock ids and cleanup cursors, each with the
//! checks and the message that names what was expected.

use chrono::{DateTime, TimeZone, Utc};
use ddb_lock::{CleanupCursor, LockId, Mode};
use serde::de::{self, Deserializer, Unexpected, Visitor};
use serde::Deserialize;
use serde_json::Value;
use std::fmt;
use std::time::Duration;

/// A duration in whole, non-negative milliseconds.
pub(super) fn duration<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Duration>, D::Error> {
    d.deserialize_option(Millis {
        expecting: "a whole number of milliseconds, not negative",
        convert: |ms| u64::try_from(ms).ok().map(Duration::from_millis),
    })
}

/// An instant in milliseconds since the epoch, as EventBridge's Step Functions events carry it.
pub(super) fn epoch_millis<'de, D: Deserializer<'de>>(
    d: D,
) -> Result<Option<DateTime<Utc>>, D::Error> {
    d.deserialize_option(Millis {
        expecting: "a whole number of milliseconds since the epoch",
        convert: |ms| Utc.timestamp_millis_opt(ms).single(),
    })
}

/// An instant as the function answers it (`expires_at`: RFC 3339 in UTC, to the millisecond).
pub(super) fn answered_instant<'de, D: Deserializer<'de>>(
    d: D,
) -> Result<Option<DateTime<Utc>>, D::Error> {
    let text = Option::<String>::deserialize(d)?;
    text.map(|text| {
        ddb_lock::timestamp::parse(&text).ok_or_else(|| {
            de::Error::invalid_value(
                Unexpected::Str(&text),
                &"an instant as the function answers it, such as 2026-11-21T09:05:07.000Z",
            )
        })
    })
    .transpose()
}

/// Reads an optional whole number of milliseconds and converts it; serde's errors then say what
/// was `expecting` (`1.5` is "floating point `1.5`, expected a whole number of milliseconds…").
struct Millis<T> {
    expecting: &'static str,
    convert: fn(i64) -> Option<T>,
}

impl<'de, T> Visitor<'de> for Millis<T> {
    type Value = Option<T>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str(self.expecting)
    }

    fn visit_none<E: de::Error>(self) -> Result<Option<T>, E> {
        Ok(None)
    }

    fn visit_unit<E: de::Error>(self) -> Result<Option<T>, E> {
        Ok(None)
    }

    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Option<T>, D::Error> {
        d.deserialize_i64(self)
    }

    fn visit_i64<E: de::Error>(self, ms: i64) -> Result<Option<T>, E> {
        match (self.convert)(ms) {
            Some(value) => Ok(Some(value)),
            None => Err(E::invalid_value(Unexpected::Signed(ms), &self)),
        }
    }

    fn visit_u64<E: de::Error>(self, ms: u64) -> Result<Option<T>, E> {
        match i64::try_from(ms).ok().and_then(self.convert) {
            Some(value) => Ok(Some(value)),
            None => Err(E::invalid_value(Unexpected::Unsigned(ms), &self)),
        }
    }
}

/// `true` or `false`; absent or `null` is `false`.
pub(super) fn flag<'de, D: Deserializer<'de>>(d: D) -> Result<bool, D::Error> {
    Option::<bool>::deserialize(d).map(Option::unwrap_or_default)
}

/// Any JSON value, kept as its text; `null` is none.
pub(super) fn json_text<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    Option::<Value>::deserialize(d).map(|value| value.as_ref().map(Value::to_string))
}

/// A present `data` of `extend`: a value replaces the data, `null` removes it.
pub(super) fn replacement<'de, D: Deserializer<'de>>(
    d: D,
) -> Result<Option<Option<String>>, D::Error> {
    json_text(d).map(Some)
}

/// `exclusive` or `shared`; `null` is none.
pub(super) fn mode<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Mode>, D::Error> {
    let Some(mode) = Option::<String>::deserialize(d)? else {
        return Ok(None);
    };
    mode.parse()
        .map(Some)
        .map_err(|_| de::Error::invalid_value(Unexpected::Str(&mode), &"`exclusive` or `shared`"))
}

/// A lock id, or `null`.
pub(super) fn optional_lock_id<'de, D: Deserializer<'de>>(
    d: D,
) -> Result<Option<LockId>, D::Error> {
    Option::<String>::deserialize(d)?
        .map(|id| {
            LockId::parse(&id).map_err(|_| {
                de::Error::invalid_value(
                    Unexpected::Str(&id),
                    &"a lock id returned by acquire (a UUID)",
                )
            })
        })
        .transpose()
}

/// A lock id.
pub(super) fn lock_id<'de, D: Deserializer<'de>>(d: D) -> Result<LockId, D::Error> {
    let id = String::deserialize(d)?;
    LockId::parse(&id).map_err(|_| {
        de::Error::invalid_value(
            Unexpected::Str(&id),
            &"a lock id returned by acquire (a UUID)",
        )
    })
}

/// The `next_cursor` of an earlier cleanup; `null` is the start of the table.
pub(super) fn cursor<'de, D: Deserializer<'de>>(d: D) -> Result<Option<CleanupCursor>, D::Error> {
    let Some(cursor) = Option::<String>::deserialize(d)? else {
        return Ok(None);
    };
    cursor.parse().map(Some).map_err(|_| {
        de::Error::invalid_value(
            Unexpected::Str(&cursor),
            &"the next_cursor of an earlier cleanup",
        )
    })
}
