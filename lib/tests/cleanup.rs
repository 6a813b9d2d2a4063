//! Deleting long-expired locks, and only those.

use aws_sdk_dynamodb::types::AttributeValue;
use chrono::TimeDelta;
use ddb_lock::{AcquireOptions, LockClient};
use ddb_lock_test_kit::{builder, dynamodb, unique, OffsetClock};
use std::time::Duration;

/// A client of its own table, so that a scan sees only this test's items.
async fn client_of_fresh_table() -> LockClient {
    let client = builder(dynamodb())
        .table_name(format!("cleanup-{}", uuid::Uuid::new_v4()))
        .build()
        .unwrap();
    client.create_table().await.unwrap();
    client
}

#[tokio::test]
async fn delete_expired_removes_long_expired_locks_and_spares_live_and_recent_ones() {
    let client = client_of_fresh_table().await;
    let table = client.table_name().to_owned();
    let lease = AcquireOptions::new().lease(Duration::from_secs(60));
    let (old_a, old_b, live) = (unique("old"), unique("old"), unique("live"));
    for resource in [&old_a, &old_b, &live] {
        client.try_acquire(resource, &lease).await.unwrap().unwrap();
    }
    // Seen from three hours on, the first two ended more than an hour ago...
    let later = builder(dynamodb())
        .table_name(&table)
        .clock(OffsetClock::shared(TimeDelta::hours(3)))
        .build()
        .unwrap();
    // ...but the third was re-acquired in the meantime (its lease now runs from "later").
    later.force_release(&live).await.unwrap();
    later.try_acquire(&live, &lease).await.unwrap().unwrap();

    let report = later
        .delete_expired(Duration::from_secs(3600), 100, None)
        .await
        .unwrap();
    assert_eq!(report.deleted, 2, "{report:?}");
    assert!(report.complete);
    let exists = |r: &str| {
        let (table, r) = (table.clone(), r.to_owned());
        async move {
            dynamodb()
                .get_item()
                .table_name(table)
                .key(
                    "PK",
                    aws_sdk_dynamodb::types::AttributeValue::S(format!("LOCK#{r}")),
                )
                .key(
                    "SK",
                    aws_sdk_dynamodb::types::AttributeValue::S("LOCK".into()),
                )
                .consistent_read(true)
                .send()
                .await
                .unwrap()
                .item
                .is_some()
        }
    };
    assert!(
        !exists(&old_a).await && !exists(&old_b).await,
        "expired items deleted"
    );
    assert!(exists(&live).await, "the live lock is kept");

    // Expired for less than the cutoff: kept.
    let report = later
        .delete_expired(Duration::from_secs(6 * 3600), 100, None)
        .await
        .unwrap();
    assert_eq!(report.deleted, 0);
}

#[tokio::test]
async fn delete_expired_stops_at_its_bound_and_says_so() {
    let client = client_of_fresh_table().await;
    let lease = AcquireOptions::new().lease(Duration::from_secs(1));
    for _ in 0..5 {
        client
            .try_acquire(&unique("bounded"), &lease)
            .await
            .unwrap()
            .unwrap();
    }
    let later = builder(dynamodb())
        .table_name(client.table_name())
        .clock(OffsetClock::shared(TimeDelta::hours(2)))
        .build()
        .unwrap();
    let first = later
        .delete_expired(Duration::from_secs(60), 3, None)
        .await
        .unwrap();
    assert_eq!(first.deleted, 3);
    assert!(!first.complete, "stopped early: more may remain");
    let resume = first.next.expect("where to resume");
    let second = later
        .delete_expired(Duration::from_secs(60), 3, Some(&resume))
        .await
        .unwrap();
    assert_eq!(second.deleted, 2);
    assert!(second.complete);
    assert_eq!(second.next, None);
}

/// Written first, and seen failing before the fix: every call restarted the scan, so on a table
/// larger than one call reads (10 pages of 1 MB) the expired locks beyond were never reached.
#[tokio::test]
async fn delete_expired_resumes_where_it_stopped_and_covers_a_table_larger_than_one_call_reads() {
    let client = client_of_fresh_table().await;
    let table = client.table_name().to_owned();
    // About 12 MB of application items sharing the table, more than one call's 10 pages.
    let filler = AttributeValue::S("x".repeat(100 * 1024));
    let mut puts = tokio::task::JoinSet::new();
    for i in 0..120 {
        let put = dynamodb()
            .put_item()
            .table_name(&table)
            .item("PK", AttributeValue::S(format!("APP#{i}")))
            .item("SK", AttributeValue::S("DATA".into()))
            .item("Blob", filler.clone());
        puts.spawn(put.send());
    }
    while let Some(put) = puts.join_next().await {
        put.unwrap().unwrap();
    }
    const EXPIRED: u32 = 40;
    let lease = AcquireOptions::new().lease(Duration::from_secs(1));
    for _ in 0..EXPIRED {
        client
            .try_acquire(&unique("scattered"), &lease)
            .await
            .unwrap()
            .unwrap();
    }
    let later = builder(dynamodb())
        .table_name(&table)
        .clock(OffsetClock::shared(TimeDelta::hours(2)))
        .build()
        .unwrap();

    let first = later
        .delete_expired(Duration::from_secs(60), 1000, None)
        .await
        .unwrap();
    assert!(
        !first.complete && first.next.is_some(),
        "one call reads 10 pages of 1 MB, less than the table: {first:?}"
    );
    let (mut deleted, mut calls, mut resume) = (first.deleted, 1, first.next);
    while let Some(from) = resume {
        let report = later
            .delete_expired(Duration::from_secs(60), 1000, Some(&from))
            .await
            .unwrap();
        deleted += report.deleted;
        calls += 1;
        assert!(calls < 10, "the scan must move on: {report:?}");
        resume = report.next;
    }
    assert_eq!(
        deleted, EXPIRED,
        "every expired lock, wherever the scan found it"
    );
}

/// A once-per-window claim's item outlives its window for the cleanup: deleted, it let a caller
/// whose clock is behind (or whose request came late) claim that window a second time.
#[tokio::test]
async fn delete_expired_keeps_window_claims_which_refuse_a_window_claimed_already() {
    let client = client_of_fresh_table().await;
    let table = client.table_name().to_owned();
    let on = |offset: TimeDelta| {
        builder(dynamodb())
            .table_name(&table)
            .clock(OffsetClock::shared(offset))
            .build()
            .unwrap()
    };
    let hourly = ddb_lock::Window::every(Duration::from_secs(3600));
    let claimed = client.claim_window("report", &hourly).await.unwrap();
    assert!(
        matches!(claimed, ddb_lock::WindowClaim::Claimed { .. }),
        "{claimed:?}"
    );
    let report = on(TimeDelta::hours(3))
        .delete_expired(Duration::ZERO, 100, None)
        .await
        .unwrap();
    assert_eq!(report.deleted, 0, "{report:?}");
    let again = on(TimeDelta::zero())
        .claim_window("report", &hourly)
        .await
        .unwrap();
    assert!(
        matches!(again, ddb_lock::WindowClaim::Taken { .. }),
        "{again:?}"
    );
}

/// A client of no namespace cleans every namespace's expired locks too; it scanned for its own
/// key prefix only, and a namespace's locks, whose keys start `NS#<namespace>#`, waited for TTL.
#[tokio::test]
async fn delete_expired_covers_the_namespaces() {
    let client = client_of_fresh_table().await;
    let table = client.table_name().to_owned();
    let past = builder(dynamodb())
        .table_name(&table)
        .clock(OffsetClock::shared(TimeDelta::hours(-3)))
        .build()
        .unwrap()
        .in_namespace("billing".parse().unwrap())
        .unwrap();
    past.try_acquire(
        "invoice",
        &AcquireOptions::new().lease(Duration::from_secs(60)),
    )
    .await
    .unwrap()
    .unwrap();
    let report = client
        .delete_expired(Duration::from_secs(3600), 100, None)
        .await
        .unwrap();
    assert_eq!(report.deleted, 1, "{report:?}");
}
