//! Waiters that go: one that times out or whose future is dropped leaves the line (and releases
//! a lock granted as it went); a lapsed holder's lock goes to the first in line; a waiter whose
//! deadline is gone is passed over.

use super::{fair, line, line_becomes, spawn_waiter, LEASE};
use ddb_lock::{Error, ReleaseOutcome};
use ddb_lock_test_kit::{dynamodb, hold, lock_client, raw_item, unique, TABLE};
use std::time::Duration;
use tokio::sync::mpsc;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_that_times_out_leaves_the_line_and_the_next_is_granted() {
    let holder = lock_client().await;
    let resource = unique("fair");
    let lock = hold(&holder, &resource, "holder", LEASE).await;
    let (granted_tx, mut granted) = mpsc::unbounded_channel();
    let quitter = spawn_waiter(
        &resource,
        "quitter",
        fair("quitter").timeout(Duration::from_millis(300)),
        granted_tx.clone(),
    );
    line_becomes(&holder, &resource, &["quitter"]).await;
    let stayer = spawn_waiter(&resource, "stayer", fair("stayer"), granted_tx);
    line_becomes(&holder, &resource, &["quitter", "stayer"]).await;

    let err = quitter.await.unwrap().unwrap_err();
    assert!(
        matches!(err, Error::Timeout { ref holder, .. } if holder.owner == "holder"),
        "{err:?}"
    );
    line_becomes(&holder, &resource, &["stayer"]).await;

    holder.release(&lock).await.unwrap();
    let (owner, next, client) = granted.recv().await.unwrap();
    assert_eq!(owner, "stayer");
    client.release(&next).await.unwrap();
    stayer.await.unwrap().unwrap();
    assert_eq!(raw_item(&resource).await, None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_waiter_leaves_the_line() {
    let holder = lock_client().await;
    let resource = unique("fair");
    let lock = hold(&holder, &resource, "holder", LEASE).await;
    let waiter = lock_client().await;
    let acquiring = {
        let (waiter, resource) = (waiter.clone(), resource.clone());
        tokio::spawn(async move { waiter.acquire(&resource, &fair("gone")).await })
    };
    line_becomes(&holder, &resource, &["gone"]).await;
    acquiring.abort();
    assert!(acquiring.await.unwrap_err().is_cancelled());
    waiter.flush().await;
    assert!(line(&holder, &resource).await.is_empty());
    // Nobody to hand over to: the release deletes the item.
    holder.release(&lock).await.unwrap();
    assert_eq!(raw_item(&resource).await, None);
}

/// A waiter dropped around the moment of its grant: whether it returned the lock first or was
/// dropped with the grant made, no lock is left behind once it is released or flushed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_dropped_around_its_grant_leaves_no_lock_behind() {
    let holder = lock_client().await;
    for yields in [0, 1, 2, 4, 8, 16, 32, 64] {
        let resource = unique("fair");
        let lock = hold(&holder, &resource, "holder", LEASE).await;
        let waiter = lock_client().await;
        let acquiring = {
            let (waiter, resource) = (waiter.clone(), resource.clone());
            tokio::spawn(async move { waiter.acquire(&resource, &fair("racer")).await })
        };
        line_becomes(&holder, &resource, &["racer"]).await;
        let releasing = {
            let (holder, lock) = (holder.clone(), lock.clone());
            tokio::spawn(async move { holder.release(&lock).await })
        };
        for _ in 0..yields {
            tokio::task::yield_now().await;
        }
        acquiring.abort();
        assert_eq!(releasing.await.unwrap().unwrap(), ReleaseOutcome::Released);
        match acquiring.await {
            Ok(granted) => {
                waiter.release(&granted.unwrap()).await.unwrap();
            }
            Err(cancelled) => assert!(cancelled.is_cancelled()),
        }
        waiter.flush().await;
        assert_eq!(
            raw_item(&resource).await,
            None,
            "after {yields} yields: a lock or a line was left behind"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lapsed_holders_lock_goes_to_the_first_in_line() {
    let holder = lock_client().await;
    let resource = unique("fair");
    // A holder that crashes: it never releases, its short lease runs out.
    let _crashed = hold(&holder, &resource, "crashed", Duration::from_millis(800)).await;
    let (granted_tx, mut granted) = mpsc::unbounded_channel();
    let tasks = [
        spawn_waiter(&resource, "w0", fair("w0"), granted_tx.clone()),
        {
            line_becomes(&holder, &resource, &["w0"]).await;
            spawn_waiter(&resource, "w1", fair("w1"), granted_tx)
        },
    ];
    let (first, lock, client) = granted.recv().await.unwrap();
    assert_eq!(first, "w0");
    client.release(&lock).await.unwrap();
    let (second, lock, client) = granted.recv().await.unwrap();
    assert_eq!(second, "w1");
    client.release(&lock).await.unwrap();
    for task in tasks {
        task.await.unwrap().unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_whose_deadline_is_gone_is_passed_over() {
    let holder = lock_client().await;
    let resource = unique("fair");
    let lock = hold(&holder, &resource, "holder", LEASE).await;
    // A waiter that vanished without leaving (its process died): its entry stays, with its
    // deadline, which is already gone.
    let dead = uuid::Uuid::new_v4().to_string();
    let now = chrono::Utc::now();
    let entry = |name: &str, value: String| {
        (
            name.to_owned(),
            aws_sdk_dynamodb::types::AttributeValue::S(value),
        )
    };
    let entry = aws_sdk_dynamodb::types::AttributeValue::M(
        [
            entry("LockID", dead.clone()),
            entry("Owner", "dead".to_owned()),
            entry("AcquiredAt", ddb_lock::timestamp::format(now)),
            entry(
                "ExpiresAt",
                ddb_lock::timestamp::format(now - chrono::TimeDelta::seconds(1)),
            ),
            (
                "LeaseMs".to_owned(),
                aws_sdk_dynamodb::types::AttributeValue::N("60000".to_owned()),
            ),
        ]
        .into(),
    );
    dynamodb()
        .update_item()
        .table_name(TABLE)
        .key(
            "PK",
            aws_sdk_dynamodb::types::AttributeValue::S(format!("LOCK#{resource}")),
        )
        .key(
            "SK",
            aws_sdk_dynamodb::types::AttributeValue::S("LOCK".into()),
        )
        .update_expression("SET #queue = :line, #entry = :entry")
        .expression_attribute_names("#queue", "Queue")
        .expression_attribute_names("#entry", format!("Queued:{dead}"))
        .expression_attribute_values(
            ":line",
            aws_sdk_dynamodb::types::AttributeValue::L(vec![
                aws_sdk_dynamodb::types::AttributeValue::S(dead.clone()),
            ]),
        )
        .expression_attribute_values(":entry", entry)
        .send()
        .await
        .unwrap();
    let (granted_tx, mut granted) = mpsc::unbounded_channel();
    let task = spawn_waiter(&resource, "live", fair("live"), granted_tx);
    line_becomes(&holder, &resource, &["dead", "live"]).await;

    holder.release(&lock).await.unwrap();
    let (owner, next, client) = granted.recv().await.unwrap();
    assert_eq!(owner, "live");
    // The dead waiter's entry went with the grant.
    let item = raw_item(&resource).await.unwrap();
    assert!(!item.contains_key("Queue") && !item.contains_key(&format!("Queued:{dead}")));
    client.release(&next).await.unwrap();
    task.await.unwrap().unwrap();
}
