//! The fixed-width timestamp format of `AcquiredAt` and `ExpiresAt`.
//!
//! DynamoDB compares strings byte by byte, so the condition `ExpiresAt < :now` is only chronological
//! if every timestamp has the same width and field order: RFC 3339 in UTC, always with exactly three
//! fractional digits and a `Z` (`2026-11-21T22:01:22.123Z`, 24 bytes). Sub-millisecond precision is
//! truncated. Parsing accepts only that canonical form, so an item written in another format is
//! reported as malformed instead of being compared wrongly.

use chrono::{DateTime, SecondsFormat, Utc};

/// Width in bytes of every formatted timestamp.
pub const WIDTH: usize = 24;

/// Formats `t` in the canonical fixed-width form.
///
/// # Examples
///
/// ```
/// use chrono::{TimeZone, Utc};
///
/// let t = Utc.with_ymd_and_hms(2026, 11, 21, 9, 5, 7).unwrap();
/// assert_eq!(ddb_lock::timestamp::format(t), "2026-11-21T09:05:07.000Z");
/// ```
pub fn format(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Millis, true)
}

/// Parses a canonical timestamp; `None` for anything not in exactly the form [`format()`] writes.
///
/// # Examples
///
/// ```
/// use ddb_lock::timestamp;
///
/// assert!(timestamp::parse("2026-11-21T09:05:07.000Z").is_some());
/// assert!(timestamp::parse("2026-11-21T09:05:07Z").is_none());
/// ```
pub fn parse(s: &str) -> Option<DateTime<Utc>> {
    if s.len() != WIDTH {
        return None;
    }
    let t = DateTime::parse_from_rfc3339(s).ok()?.with_timezone(&Utc);
    (format(t) == s).then_some(t)
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::{TimeDelta, TimeZone};

    fn at(y: i32, mo: u32, d: u32, h: u32, mi: u32, s: u32, ms: u32) -> DateTime<Utc> {
        Utc.with_ymd_and_hms(y, mo, d, h, mi, s).unwrap() + TimeDelta::milliseconds(ms.into())
    }

    #[test]
    fn every_timestamp_has_the_same_width() {
        for t in [
            at(2026, 1, 1, 0, 0, 0, 0),
            at(2099, 12, 31, 23, 59, 59, 999),
        ] {
            assert_eq!(format(t).len(), WIDTH, "{}", format(t));
        }
        assert_eq!(
            format(at(2026, 11, 21, 9, 5, 7, 30)),
            "2026-11-21T09:05:07.030Z"
        );
    }

    #[test]
    fn string_order_is_chronological_across_millisecond_second_and_year_boundaries() {
        let anchors = [
            at(2026, 11, 21, 9, 59, 59, 998),
            at(2026, 12, 31, 23, 59, 59, 990),
            at(2099, 12, 31, 23, 59, 59, 995),
        ];
        for anchor in anchors {
            // A window of instants straddling the boundaries, at millisecond and
            // sub-millisecond steps (sub-millisecond parts are truncated, never rounded up).
            let instants: Vec<_> = (0..40)
                .map(|i| anchor + TimeDelta::microseconds(i * 250))
                .collect();
            for a in &instants {
                for b in &instants {
                    let (fa, fb) = (format(*a), format(*b));
                    let (ta, tb) = (parse(&fa).unwrap(), parse(&fb).unwrap());
                    assert_eq!(fa.cmp(&fb), ta.cmp(&tb), "{fa} vs {fb}");
                }
            }
        }
    }

    #[test]
    fn truncates_below_a_millisecond() {
        let t = at(2026, 1, 1, 0, 0, 0, 1) + TimeDelta::microseconds(999);
        assert_eq!(format(t), "2026-01-01T00:00:00.001Z");
    }

    #[test]
    fn rejects_non_canonical_forms() {
        for s in [
            "2026-11-21T22:01:22Z",
            "2026-11-21T22:01:22.123+00:00",
            "2026-11-21T22:01:22.123456Z",
            "2026-11-21T23:01:22.123+01:00",
            "not a time at all, really",
        ] {
            assert_eq!(parse(s), None, "{s}");
        }
        assert!(parse("2026-11-21T22:01:22.123Z").is_some());
    }
}
