//! An item under a lock's key that this library did not write (or that was edited by hand), whose
//! `ExpiresAt` DynamoDB does not judge expired, is reported, never overwritten or mistaken for a free
//! lock; force release clears it.

use aws_sdk_dynamodb::types::AttributeValue;
use ddb_lock::{AcquireOptions, Error, LockStatus};
use ddb_lock_test_kit::{dynamodb, lock_client, raw_item, unique, TABLE};

#[tokio::test]
async fn a_malformed_lock_item_is_reported_and_left_alone_until_force_released() {
    let client = lock_client().await;
    let resource = unique("malformed");
    dynamodb()
        .put_item()
        .table_name(TABLE)
        .item("PK", AttributeValue::S(format!("LOCK#{resource}")))
        .item("SK", AttributeValue::S("LOCK".into()))
        .item(
            "LockID",
            AttributeValue::S(uuid::Uuid::new_v4().to_string()),
        )
        .item("Owner", AttributeValue::S("legacy".into()))
        .item(
            "AcquiredAt",
            AttributeValue::S("2026-11-21T22:00:00.000Z".into()),
        )
        .item("ExpiresAt", AttributeValue::S("someday".into()))
        .send()
        .await
        .unwrap();
    let before = raw_item(&resource).await.unwrap();

    let err = client
        .try_acquire(&resource, &AcquireOptions::new())
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            Error::MalformedItem {
                attribute: "ExpiresAt",
                ..
            }
        ),
        "{err}"
    );
    assert!(matches!(
        client.status(&resource).await,
        Err(Error::MalformedItem { .. })
    ));
    assert_eq!(raw_item(&resource).await.unwrap(), before, "item untouched");

    assert_eq!(client.force_release(&resource).await.unwrap(), None);
    assert_eq!(client.status(&resource).await.unwrap(), LockStatus::Free);
}

/// A fence item holding the largest token (written by hand: no client issues it) refuses a
/// fenced acquisition with a typed error naming the attribute; the next guess was one more, and
/// the addition overflowed (a panic in a debug build, a guess of 0 in a release build).
#[tokio::test]
async fn a_fence_at_the_largest_token_is_reported() {
    let client = lock_client().await;
    let resource = unique("largest-token");
    dynamodb()
        .put_item()
        .table_name(TABLE)
        .item("PK", AttributeValue::S(format!("LOCK#{resource}")))
        .item("SK", AttributeValue::S("FENCE".into()))
        .item("FencingToken", AttributeValue::N(u64::MAX.to_string()))
        .send()
        .await
        .unwrap();
    let err = client
        .try_acquire(&resource, &AcquireOptions::new().fencing(true))
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            Error::MalformedItem {
                attribute: "FencingToken",
                ..
            }
        ),
        "{err}"
    );
}
