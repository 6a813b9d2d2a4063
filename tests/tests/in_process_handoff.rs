//! Tasks of one process waiting through one client: they line up, and a release through that
//! client writes the first waiter's lock in place of its own (one PutItem), so no waiter polls.
//!
//! These tests run on tokio's single-threaded runtime, where `yield_now` lets every other ready
//! task run up to its next wait: that is how a test knows the waiters are in line (no sleeps).

use aws_sdk_dynamodb::config::retry::RetryConfig;
use ddb_lock::{AcquireOptions, BackoffBounds, Lock, LockClient, ReleaseOutcome};
use ddb_lock_tests::proxy::Proxy;
use ddb_lock_tests::{
    builder, dynamodb_at, dynamodb_with, endpoint, lock_client, raw_item, string_attr, unique,
};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::task::{yield_now, JoinHandle};

const LEASE: Duration = Duration::from_secs(60);

/// A client through `proxy` whose waiters never poll during a test: its backoff's largest delay
/// is longer than any of these tests. The SDK retries quickly (three attempts).
async fn patient_client(proxy: &Proxy) -> LockClient {
    lock_client().await; // the table exists
    let dynamodb = dynamodb_with(&proxy.endpoint(), |config| {
        config.retry_config(
            RetryConfig::standard()
                .with_max_attempts(3)
                .with_initial_backoff(Duration::from_millis(10)),
        )
    });
    builder(dynamodb)
        .lease(LEASE)
        .backoff(BackoffBounds::new(
            Duration::from_millis(20),
            Duration::from_secs(30),
        ))
        .build()
        .unwrap()
}

fn owner(name: &str) -> AcquireOptions {
    AcquireOptions::new().owner(name).timeout(LEASE)
}

/// A task acquiring `resource` for `name` through `client`, once it is waiting.
async fn in_line(
    client: &LockClient,
    resource: &str,
    name: &str,
) -> JoinHandle<Result<Lock, ddb_lock::Error>> {
    let (client, resource, opts) = (client.clone(), resource.to_owned(), owner(name));
    let waiter = tokio::spawn(async move { client.acquire(&resource, &opts).await });
    yield_now().await;
    waiter
}

#[tokio::test]
async fn each_release_hands_the_lock_to_the_next_waiting_task_in_one_request() {
    let proxy = Proxy::start(&endpoint()).await;
    let client = patient_client(&proxy).await;
    let resource = unique("in-process-handoff");
    let first = client.acquire(&resource, &owner("first")).await.unwrap();

    const WAITERS: usize = 5;
    let order = Arc::new(Mutex::new(Vec::new()));
    let waiters: Vec<_> = (0..WAITERS)
        .map(|i| {
            let (client, resource, order) = (client.clone(), resource.clone(), order.clone());
            tokio::spawn(async move {
                let name = format!("waiter-{i}");
                let lock = client.acquire(&resource, &owner(&name)).await.unwrap();
                // The stored item is this acquisition's, whoever wrote it.
                let item = raw_item(&resource).await.expect("a lock item");
                assert_eq!(string_attr(&item, "LockID"), lock.lock_id().to_string());
                assert_eq!(string_attr(&item, "Owner"), name);
                assert_eq!(lock.owner(), name);
                order.lock().unwrap().push(name);
                yield_now().await; // the next waiter gets in line
                client.release(&lock).await.unwrap()
            })
        })
        .collect();
    yield_now().await; // every waiter is in line

    assert_eq!(
        client.release(&first).await.unwrap(),
        ReleaseOutcome::Released
    );
    for waiter in waiters {
        assert_eq!(waiter.await.unwrap(), ReleaseOutcome::Released);
    }
    assert_eq!(order.lock().unwrap().len(), WAITERS);
    assert!(raw_item(&resource).await.is_none(), "the last one released");
    assert_eq!(
        proxy.counts("PutItem").requests,
        1 + WAITERS,
        "one PutItem per acquisition: the first acquire, then one per hand-off; no waiter polled"
    );
    assert_eq!(
        proxy.counts("DeleteItem").requests,
        1,
        "only the last release deletes"
    );
}

#[tokio::test]
async fn a_hand_off_whose_answer_was_lost_is_recognised_on_the_retry() {
    let proxy = Proxy::start(&endpoint()).await;
    let client = patient_client(&proxy).await;
    let resource = unique("lost-handoff-answer");
    let first = client.acquire(&resource, &owner("first")).await.unwrap();
    let waiter = in_line(&client, &resource, "waiter").await;

    proxy.drop_next_answer("PutItem");
    assert_eq!(
        client.release(&first).await.unwrap(),
        ReleaseOutcome::Released,
        "the retry failed its condition on the waiter's lock: the first attempt handed over"
    );
    let lock = waiter.await.unwrap().expect("the waiter has the lock");
    assert_eq!(proxy.counts("PutItem").dropped, 1);
    assert_eq!(
        proxy.counts("PutItem").requests,
        3,
        "the first acquire, the hand-off and its retry; the waiter never asked"
    );
    assert_eq!(proxy.counts("DeleteItem").requests, 0);
    let item = raw_item(&resource).await.expect("the waiter's lock item");
    assert_eq!(string_attr(&item, "LockID"), lock.lock_id().to_string());
    assert_eq!(
        client.release(&lock).await.unwrap(),
        ReleaseOutcome::Released
    );
}

#[tokio::test]
async fn a_waiter_that_gave_up_leaves_no_offer_behind() {
    let proxy = Proxy::start(&endpoint()).await;
    let client = patient_client(&proxy).await;
    let resource = unique("abandoned-offer");
    let first = client.acquire(&resource, &owner("first")).await.unwrap();
    let waiter = in_line(&client, &resource, "waiter").await;
    waiter.abort();
    assert!(waiter.await.unwrap_err().is_cancelled());

    assert_eq!(
        client.release(&first).await.unwrap(),
        ReleaseOutcome::Released
    );
    assert!(
        raw_item(&resource).await.is_none(),
        "a plain release: nothing written for the waiter that left"
    );
    assert_eq!(proxy.counts("DeleteItem").requests, 1);
    assert_eq!(proxy.counts("PutItem").requests, 1);
}

#[tokio::test]
async fn a_waiting_task_notices_a_release_made_by_another_client() {
    let proxy = Proxy::start(&endpoint()).await;
    let elsewhere = lock_client().await;
    let client = builder(dynamodb_at(&proxy.endpoint()))
        .backoff(BackoffBounds::new(
            Duration::from_millis(20),
            Duration::from_millis(100),
        ))
        .build()
        .unwrap();
    let resource = unique("released-elsewhere");
    let first = client.acquire(&resource, &owner("first")).await.unwrap();
    let waiter = in_line(&client, &resource, "waiter").await;

    let removed = elsewhere.force_release(&resource).await.unwrap();
    assert_eq!(removed.map(|h| h.owner), Some("first".to_owned()));

    let lock = waiter
        .await
        .unwrap()
        .expect("the waiter polls, since this client never saw the release");
    assert_eq!(lock.owner(), "waiter");
    match client.release(&first).await.unwrap() {
        ReleaseOutcome::NotOwner { holder } => assert_eq!(holder.owner, "waiter"),
        other => panic!("the first lock is gone and the waiter holds it: {other:?}"),
    }
    assert_eq!(
        client.release(&lock).await.unwrap(),
        ReleaseOutcome::Released
    );
}
