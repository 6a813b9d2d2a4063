//! Extensions that arrive twice or late, against the local endpoint: a copy of an applied
//! extension changes nothing, even after a data change was written again at the lease end it had
//! stored; and that rewrite keeps the stored lease (`LeaseMs`) when it is the longer, which the
//! observed-lease takeover rule counts by.

use aws_sdk_dynamodb::types::AttributeValue;
use ddb_lock::{AcquireOptions, ExtendOutcome};
use ddb_lock_test_kit::proxy::Proxy;
use ddb_lock_test_kit::{client_through, endpoint, lock_client, raw_item, string_attr, unique};
use std::collections::HashMap;
use std::time::Duration;

fn data(item: &HashMap<String, AttributeValue>) -> Vec<u8> {
    match item.get("Data") {
        Some(AttributeValue::B(blob)) => blob.as_ref().to_vec(),
        other => panic!("no Data blob: {other:?}"),
    }
}

fn lease_ms(item: &HashMap<String, AttributeValue>) -> &str {
    match item.get("LeaseMs") {
        Some(AttributeValue::N(ms)) => ms,
        other => panic!("no LeaseMs: {other:?}"),
    }
}

/// A data change with a long lease is applied and arrives a second time after a shorter one,
/// which was refused by the longer stored lease and written again at that lease end. The copy
/// must not put the older data back (with `#expires_at <= :expires_at` it met its own lease end
/// and applied again).
#[tokio::test]
async fn a_copy_of_an_applied_data_change_does_not_undo_a_later_one() {
    let _ = lock_client().await;
    let proxy = Proxy::start(&endpoint()).await;
    let client = client_through(&proxy, None);
    let resource = unique("extension-copy");
    let opts = AcquireOptions::new()
        .owner("alice")
        .lease(Duration::from_secs(30));
    let lock = client.try_acquire(&resource, &opts).await.unwrap().unwrap();

    let copy = proxy.duplicate_next_request_containing("UpdateItem", "#data = :data");
    let long = client
        .extend_and_replace_data(&lock, Duration::from_secs(60), Some(b"old".to_vec()))
        .await
        .unwrap();
    assert!(matches!(long, ExtendOutcome::Extended(_)), "{long:?}");
    let stored_end = string_attr(&raw_item(&resource).await.unwrap(), "ExpiresAt").to_owned();
    let short = client
        .extend_and_replace_data(&lock, Duration::from_secs(5), Some(b"new".to_vec()))
        .await
        .unwrap();
    assert!(matches!(short, ExtendOutcome::Extended(_)), "{short:?}");
    let item = raw_item(&resource).await.unwrap();
    assert_eq!(data(&item), b"new");
    assert_eq!(
        string_attr(&item, "ExpiresAt"),
        stored_end,
        "never shortened"
    );
    let version = string_attr(&item, "Version").to_owned();

    assert!(copy.deliver().await, "the copy reached the endpoint");

    let item = raw_item(&resource).await.unwrap();
    assert_eq!(data(&item), b"new", "the copy put the older data back");
    assert_eq!(string_attr(&item, "Version"), version);
    client.release(&lock).await.unwrap();
}

/// A data change refused by a longer stored lease is written again at that lease end, and keeps
/// the longer `LeaseMs` with it: a waiter under the observed-lease rule takes over a version it saw
/// unchanged for that version's `LeaseMs`, and the shorter one let it take the lock while the
/// caller of the long extension still held it.
#[tokio::test]
async fn a_data_change_written_again_keeps_the_longer_stored_lease() {
    let client = lock_client().await;
    let resource = unique("extension-rewrite-lease");
    let opts = AcquireOptions::new()
        .owner("alice")
        .lease(Duration::from_secs(3));
    let lock = client.try_acquire(&resource, &opts).await.unwrap().unwrap();

    let long = client.extend(&lock, Duration::from_secs(60)).await.unwrap();
    assert!(matches!(long, ExtendOutcome::Extended(_)), "{long:?}");
    let before = raw_item(&resource).await.unwrap();
    assert_eq!(lease_ms(&before), "60000");
    let short = client
        .extend_and_replace_data(&lock, Duration::from_secs(3), Some(b"step 2".to_vec()))
        .await
        .unwrap();
    let ExtendOutcome::Extended(short) = short else {
        panic!("{short:?}");
    };

    let after = raw_item(&resource).await.unwrap();
    assert_eq!(data(&after), b"step 2");
    assert_ne!(
        string_attr(&after, "Version"),
        string_attr(&before, "Version")
    );
    assert_eq!(
        string_attr(&after, "ExpiresAt"),
        string_attr(&before, "ExpiresAt")
    );
    assert_eq!(lease_ms(&after), "60000", "the rewrite shortened LeaseMs");
    // Its caller is promised its own, shorter lease only.
    assert!(short.valid_until() <= std::time::Instant::now() + Duration::from_secs(3));
    client.release(&lock).await.unwrap();
}
