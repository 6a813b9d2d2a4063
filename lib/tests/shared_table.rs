//! A single-table design (`pk`/`sk`, TTL on `ttl`) holding lock items and the application's own
//! items side by side. No lock request writes, updates or deletes an item it did not write: an
//! application item at a lock's key (or a fence item's) is reported as `Error::NotALockItem`
//! naming the key, and left exactly as it was, even when it has attributes named like the lock's
//! (`ExpiresAt` in the past, `Owner`, `ttl`).

use aws_sdk_dynamodb::types::AttributeValue;
use chrono::TimeDelta;
use ddb_lock::{AcquireOptions, Error, LockClient, LockHandle, LockId, TableSchema};
use ddb_lock_test_kit::{builder, dynamodb, unique, OffsetClock};
use std::collections::HashMap;
use std::time::Duration;

const TABLE: &str = "ddb-lock-shared-table";
const OWNER: &str = "app-owner";

type Item = HashMap<String, AttributeValue>;

fn schema() -> TableSchema {
    TableSchema::new()
        .partition_key("pk")
        .sort_key("sk", "LOCK")
        .key_prefix("ORDER#")
        .ttl_attribute("ttl")
}

async fn client() -> LockClient {
    let client = builder(dynamodb())
        .table_name(TABLE)
        .schema(schema())
        .owner(OWNER)
        .build()
        .expect("valid settings");
    client.create_table().await.expect("shared table");
    client
}

fn s(value: &str) -> AttributeValue {
    AttributeValue::S(value.to_owned())
}

/// An application item at `(pk, sk)` whose attributes look like a lock's: an `ExpiresAt` long
/// past, an `Owner` equal to the client's owner, a `ttl`, and data of its own.
fn app_item(pk: &str, sk: &str) -> Item {
    HashMap::from([
        ("pk".to_owned(), s(pk)),
        ("sk".to_owned(), s(sk)),
        ("ExpiresAt".to_owned(), s("2001-01-01T00:00:00.000Z")),
        ("Owner".to_owned(), s(OWNER)),
        ("ttl".to_owned(), AttributeValue::N("978307200".into())),
        ("Total".to_owned(), AttributeValue::N("42".into())),
    ])
}

async fn put(item: &Item) {
    dynamodb()
        .put_item()
        .table_name(TABLE)
        .set_item(Some(item.clone()))
        .send()
        .await
        .expect("PutItem");
}

async fn get(pk: &str, sk: &str) -> Option<Item> {
    dynamodb()
        .get_item()
        .table_name(TABLE)
        .key("pk", s(pk))
        .key("sk", s(sk))
        .consistent_read(true)
        .send()
        .await
        .expect("GetItem")
        .item
}

/// Puts an application item at `resource`'s lock key; returns it.
async fn app_item_at_lock_key(resource: &str) -> Item {
    let item = app_item(&format!("ORDER#{resource}"), "LOCK");
    put(&item).await;
    item
}

/// Asserts that `result` is `NotALockItem` naming `key`, and that the item is unchanged.
async fn assert_refused_and_untouched<T: std::fmt::Debug>(
    result: Result<T, Error>,
    key: &str,
    before: &Item,
) {
    match result {
        Err(Error::NotALockItem { table, key: found }) => {
            assert_eq!(table, TABLE);
            assert_eq!(found, key);
        }
        other => panic!("expected NotALockItem at {key}, got {other:?}"),
    }
    let (pk, sk) = (string(before, "pk"), string(before, "sk"));
    assert_eq!(
        get(pk, sk).await.as_ref(),
        Some(before),
        "item at {key} changed"
    );
}

fn string<'a>(item: &'a Item, name: &str) -> &'a str {
    item[name].as_s().expect("string attribute")
}

fn key_of(resource: &str) -> String {
    format!("pk=ORDER#{resource}, sk=LOCK")
}

#[tokio::test]
async fn acquire_refuses_an_application_item_with_an_expired_looking_expires_at() {
    let client = client().await;
    let resource = unique("acquire");
    let before = app_item_at_lock_key(&resource).await;
    let result = client.try_acquire(&resource, &AcquireOptions::new()).await;
    assert_refused_and_untouched(result, &key_of(&resource), &before).await;
}

#[tokio::test]
async fn fenced_acquire_refuses_an_application_item_at_the_lock_key() {
    let client = client().await;
    let resource = unique("fenced");
    let before = app_item_at_lock_key(&resource).await;
    let result = client
        .try_acquire(&resource, &AcquireOptions::new().fencing(true))
        .await;
    assert_refused_and_untouched(result, &key_of(&resource), &before).await;
}

#[tokio::test]
async fn fenced_acquire_refuses_an_application_item_at_the_fence_key() {
    let client = client().await;
    let resource = unique("fence-key");
    let before = app_item(&format!("ORDER#{resource}"), "FENCE");
    put(&before).await;
    let result = client
        .try_acquire(&resource, &AcquireOptions::new().fencing(true))
        .await;
    let key = format!("pk=ORDER#{resource}, sk=FENCE");
    assert_refused_and_untouched(result, &key, &before).await;
    // The lock was not taken either: the transaction wrote nothing.
    assert_eq!(get(&format!("ORDER#{resource}"), "LOCK").await, None);
}

#[tokio::test]
async fn release_by_lock_id_refuses_an_application_item() {
    let client = client().await;
    let resource = unique("release");
    let before = app_item_at_lock_key(&resource).await;
    let handle = LockHandle::new(
        &resource,
        OWNER,
        LockId::parse(&uuid::Uuid::new_v4().to_string()).unwrap(),
    );
    let result = client.release(&handle).await;
    assert_refused_and_untouched(result, &key_of(&resource), &before).await;
}

#[tokio::test]
async fn release_by_owner_refuses_an_application_item_with_the_same_owner() {
    let client = client().await;
    let resource = unique("release-owned");
    let before = app_item_at_lock_key(&resource).await;
    let result = client.release_owned(&resource, OWNER).await;
    assert_refused_and_untouched(result, &key_of(&resource), &before).await;
    let stop = chrono::Utc::now();
    let result = client
        .release_owned_acquired_by(&resource, OWNER, stop)
        .await;
    assert_refused_and_untouched(result, &key_of(&resource), &before).await;
}

#[tokio::test]
async fn extend_refuses_an_application_item() {
    let client = client().await;
    let resource = unique("extend");
    let before = app_item_at_lock_key(&resource).await;
    let handle = LockHandle::new(
        &resource,
        OWNER,
        LockId::parse(&uuid::Uuid::new_v4().to_string()).unwrap(),
    );
    let result = client.extend(&handle, Duration::from_secs(30)).await;
    assert_refused_and_untouched(result, &key_of(&resource), &before).await;
}

#[tokio::test]
async fn status_reports_an_application_item() {
    let client = client().await;
    let resource = unique("status");
    let before = app_item_at_lock_key(&resource).await;
    let result = client.status(&resource).await;
    assert_refused_and_untouched(result, &key_of(&resource), &before).await;
}

#[tokio::test]
async fn force_release_refuses_an_application_item() {
    let client = client().await;
    let resource = unique("force");
    let before = app_item_at_lock_key(&resource).await;
    let result = client.force_release(&resource).await;
    assert_refused_and_untouched(result, &key_of(&resource), &before).await;
}

#[tokio::test]
async fn locks_live_beside_application_items_of_the_same_partition() {
    let client = client().await;
    let resource = unique("beside");
    let details = app_item(&format!("ORDER#{resource}"), "DETAILS");
    put(&details).await;
    let lock = client
        .try_acquire(&resource, &AcquireOptions::new().fencing(true))
        .await
        .unwrap()
        .expect("free");
    let stored = get(&format!("ORDER#{resource}"), "LOCK")
        .await
        .expect("lock item");
    assert!(
        stored.contains_key("ttl"),
        "TTL under the schema's name: {stored:?}"
    );
    assert!(!stored.contains_key("TTL"));
    client.release(&lock).await.unwrap();
    assert_eq!(get(&format!("ORDER#{resource}"), "LOCK").await, None);
    assert_eq!(
        get(&format!("ORDER#{resource}"), "DETAILS").await.as_ref(),
        Some(&details)
    );
}

#[tokio::test]
async fn cleanup_never_deletes_application_items() {
    client().await;
    // A prefix of its own, so that the cleanup, run an hour ahead, sees no other test's locks.
    let prefix = format!("{}#", unique("CLEANUP"));
    let client_at = |offset| {
        builder(dynamodb())
            .table_name(TABLE)
            .schema(schema().key_prefix(&prefix))
            .clock(OffsetClock::shared(offset))
            .build()
            .expect("valid settings")
    };
    let (now, later) = (client_at(TimeDelta::zero()), client_at(TimeDelta::hours(1)));
    // An application item at a lock key, one beside it, and a lock that expires within the hour.
    let at_lock_key = app_item(&format!("{prefix}app"), "LOCK");
    let beside = app_item(&format!("{prefix}app"), "DETAILS");
    put(&at_lock_key).await;
    put(&beside).await;
    now.try_acquire(
        "lock",
        &AcquireOptions::new().lease(Duration::from_secs(60)),
    )
    .await
    .unwrap()
    .expect("free");
    let mut cursor = None;
    loop {
        let report = later
            .delete_expired(Duration::ZERO, 1000, cursor.as_ref())
            .await
            .unwrap();
        cursor = report.next;
        if report.complete {
            break;
        }
    }
    assert_eq!(
        get(&format!("{prefix}lock"), "LOCK").await,
        None,
        "the expired lock is deleted"
    );
    assert_eq!(
        get(&format!("{prefix}app"), "LOCK").await.as_ref(),
        Some(&at_lock_key)
    );
    assert_eq!(
        get(&format!("{prefix}app"), "DETAILS").await.as_ref(),
        Some(&beside)
    );
}
