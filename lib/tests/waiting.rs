//! Blocking acquire: it waits while the lock is held, wins when the holder releases within the
//! timeout, and otherwise fails with an error naming the resource, the wait and the holder.

use ddb_lock::{AcquireOptions, Error};
use ddb_lock_test_kit::proxy::Proxy;
use ddb_lock_test_kit::{builder, dynamodb_at, endpoint, hold, lock_client, unique};
use std::time::Duration;

#[tokio::test]
async fn acquire_waits_and_wins_when_the_holder_releases_within_the_timeout() {
    let holder_client = lock_client().await;
    let resource = unique("handoff");
    let held = hold(&holder_client, &resource, "holder", Duration::from_secs(60)).await;

    // The waiter talks through a proxy so the test can see its attempts.
    let proxy = Proxy::start(&endpoint()).await;
    let waiter_client = builder(dynamodb_at(&proxy.endpoint())).build().unwrap();
    let waiter_resource = resource.clone();
    let waiter = tokio::spawn(async move {
        let opts = AcquireOptions::new()
            .owner("waiter")
            .timeout(Duration::from_secs(60));
        waiter_client.acquire(&waiter_resource, &opts).await
    });

    // Release only once the waiter has been refused at least once: it is really waiting.
    proxy.wait_for("PutItem", |c| c.answered >= 1).await;
    assert!(
        !waiter.is_finished(),
        "the waiter must still be waiting while the lock is held"
    );
    holder_client.release(&held).await.unwrap();

    let won = waiter
        .await
        .unwrap()
        .expect("waiter acquires after the release");
    assert_eq!(won.owner(), "waiter");
    assert!(proxy.counts("PutItem").requests >= 2, "the waiter retried");
    // The lease was 60 s: the waiter won because of the release, not an expiry.
    assert!(won.acquired_at() < held.expires_at());
}

#[tokio::test]
async fn acquire_times_out_naming_the_resource_the_wait_and_the_holder() {
    let client = lock_client().await;
    let resource = unique("timeout");
    let held = hold(&client, &resource, "holder", Duration::from_secs(60)).await;

    let timeout = Duration::from_millis(300);
    let opts = AcquireOptions::new().owner("waiter").timeout(timeout);
    let err = client.acquire(&resource, &opts).await.unwrap_err();
    match &err {
        Error::Timeout {
            resource: r,
            waited,
            holder,
        } => {
            assert_eq!(r, &resource);
            assert!(
                *waited >= timeout,
                "gave up after {waited:?}, before the timeout"
            );
            assert_eq!(holder.owner, "holder");
            assert_eq!(holder.expires_at, held.expires_at());
        }
        other => panic!("expected a timeout naming the holder, got {other:?}"),
    }
    let message = err.to_string();
    assert!(
        message.contains(&resource) && message.contains("holder"),
        "{message}"
    );
}

#[tokio::test]
async fn zero_timeout_makes_exactly_one_attempt() {
    let client = lock_client().await;
    let resource = unique("zero-timeout");
    hold(&client, &resource, "holder", Duration::from_secs(30)).await;
    let proxy = Proxy::start(&endpoint()).await;
    let through_proxy = builder(dynamodb_at(&proxy.endpoint())).build().unwrap();
    let opts = AcquireOptions::new().timeout(Duration::ZERO);
    assert!(matches!(
        through_proxy.acquire(&resource, &opts).await,
        Err(Error::Timeout { .. })
    ));
    assert_eq!(proxy.counts("PutItem").requests, 1);
}
