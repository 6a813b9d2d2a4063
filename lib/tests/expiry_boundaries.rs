//! `ExpiresAt < :now` is a string comparison inside DynamoDB: it must order timestamps
//! chronologically, to the millisecond, across second, minute, hour, day and year boundaries.
//! Clients with fixed clocks make each comparison exact.

use chrono::{DateTime, TimeDelta, Utc};
use ddb_lock::{AcquireOptions, LockClient, LockStatus};
use ddb_lock_test_kit::{
    builder, dynamodb, lock_client, raw_item, stored, string_attr, unique, FixedClock,
};
use std::time::Duration;

fn at(rfc3339: &str) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(rfc3339)
        .unwrap()
        .with_timezone(&Utc)
}

fn client_at(now: DateTime<Utc>) -> LockClient {
    builder(dynamodb())
        .clock(FixedClock::shared(now))
        .build()
        .unwrap()
}

/// Locks `resource` so that its lease ends at `expires_at`, then checks who may take it when.
async fn assert_expiry_boundary(expires_at: &str) {
    lock_client().await; // the table
    let expires_at = at(expires_at);
    let resource = unique("boundary");
    let lease = Duration::from_millis(999);
    let holder = client_at(expires_at - TimeDelta::milliseconds(999));
    let lock = holder
        .try_acquire(
            &resource,
            &AcquireOptions::new().owner("holder").lease(lease),
        )
        .await
        .unwrap()
        .unwrap();
    assert_eq!(lock.expires_at(), expires_at);

    for before in [
        expires_at - TimeDelta::milliseconds(1),
        expires_at, // still live during its last millisecond
    ] {
        let contender = client_at(before);
        assert!(
            matches!(
                contender.status(&resource).await.unwrap(),
                LockStatus::Held { .. }
            ),
            "at {before} a lock expiring at {expires_at} is held"
        );
        let taken = contender
            .try_acquire(&resource, &AcquireOptions::new().owner("early"))
            .await
            .unwrap();
        assert!(
            taken.is_none(),
            "taken at {before}, before expiry {expires_at}"
        );
    }

    let after = client_at(expires_at + TimeDelta::milliseconds(1));
    assert_eq!(after.status(&resource).await.unwrap(), LockStatus::Free);
    let taken = after
        .try_acquire(&resource, &AcquireOptions::new().owner("next"))
        .await
        .unwrap();
    assert!(taken.is_some(), "free one millisecond after {expires_at}");
}

#[tokio::test]
async fn expiry_is_exact_across_a_millisecond_boundary() {
    assert_expiry_boundary("2099-06-15T10:20:30.123Z").await;
}

#[tokio::test]
async fn expiry_is_exact_across_a_second_boundary() {
    assert_expiry_boundary("2099-06-15T10:20:30.999Z").await;
}

#[tokio::test]
async fn expiry_is_exact_across_an_hour_boundary_where_digits_change_width() {
    assert_expiry_boundary("2099-06-15T09:59:59.999Z").await;
}

#[tokio::test]
async fn expiry_is_exact_across_a_year_boundary() {
    assert_expiry_boundary("2099-12-31T23:59:59.999Z").await;
}

/// Regression test: the `TTL` (whole epoch seconds) was rounded down, so with no grace DynamoDB
/// could delete an item up to a second before its lease ended.
#[tokio::test]
async fn with_no_grace_the_ttl_never_falls_before_expires_at() {
    lock_client().await; // the table
    let client = builder(dynamodb())
        .clock(FixedClock::shared(at("2026-11-23T10:00:00.250Z")))
        .ttl_grace(Duration::ZERO)
        .build()
        .unwrap();
    let resource = unique("ttl-rounding");
    let lock = client
        .try_acquire(
            &resource,
            &AcquireOptions::new().lease(Duration::from_millis(1500)),
        )
        .await
        .unwrap()
        .unwrap();
    assert_eq!(lock.expires_at(), at("2026-11-23T10:00:01.750Z"));
    let item = raw_item(&resource).await.unwrap();
    let ttl: i64 = item["TTL"].as_n().unwrap().parse().unwrap();
    assert_eq!(ttl, at("2026-11-23T10:00:02Z").timestamp(), "rounded up");
}

/// Regression test: a lease with a fraction of a millisecond was stored truncated while the `Lock`
/// kept the fraction, promising its holder a lease the item did not have.
#[tokio::test]
async fn a_sub_millisecond_lease_is_counted_as_stored() {
    lock_client().await; // the table
    let client = client_at(at("2026-11-23T10:00:00.250Z"));
    let resource = unique("sub-millisecond");
    let lease = Duration::from_micros(1_500_900);
    let lock = client
        .try_acquire(&resource, &AcquireOptions::new().lease(lease))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(lock.expires_at(), at("2026-11-23T10:00:01.750Z"));
    let item = raw_item(&resource).await.unwrap();
    assert_eq!(string_attr(&item, "ExpiresAt"), stored(lock.expires_at()));
    assert_eq!(item["LeaseMs"].as_n().unwrap(), "1500");
}
