//! What the library logs, and what its logs show it decided.

use ddb_lock::{AcquireOptions, BackoffBounds, ExtendOutcome};
use ddb_lock_test_kit::events::CapturedEvents;
use ddb_lock_test_kit::{builder, dynamodb, hold, lock_client, unique};
use std::time::Duration;

#[tokio::test]
async fn a_waiter_sleeps_until_the_holders_expiry_rather_than_its_backoff() {
    let client = lock_client().await;
    let resource = unique("wake-at-expiry");
    let lease = Duration::from_millis(300);
    hold(&client, &resource, "holder", lease).await;

    // A backoff of a full hour: only the holder's ExpiresAt, returned by the refused attempt,
    // can make the waiter come back sooner than its 10 s deadline.
    let hour = Duration::from_secs(3600);
    let waiter = builder(dynamodb())
        .backoff(BackoffBounds::new(hour, hour))
        .build()
        .unwrap();
    let (events, _guard) = CapturedEvents::start();
    let lock = waiter
        .acquire(
            &resource,
            &AcquireOptions::new()
                .owner("waiter")
                .timeout(Duration::from_secs(10)),
        )
        .await
        .expect("acquired once the lease ended");
    assert_eq!(lock.owner(), "waiter");

    let waits = events.with_message("lock held; backing off");
    assert!(!waits.is_empty(), "the waiter was refused at least once");
    for wait in &waits {
        let delay_ms: u64 = wait["delay_ms"].parse().unwrap();
        assert!(
            delay_ms <= lease.as_millis() as u64 + 1,
            "slept {delay_ms} ms, past the end of a {lease:?} lease"
        );
    }
}

#[tokio::test]
async fn events_name_resource_owner_wait_and_hold_but_never_the_full_lock_id() {
    let client = lock_client().await;
    let resource = unique("logged");
    let (events, _guard) = CapturedEvents::start();
    let lock = client
        .acquire(&resource, &AcquireOptions::new().owner("alice"))
        .await
        .unwrap();
    let ExtendOutcome::Extended(lock) =
        client.extend(&lock, Duration::from_secs(60)).await.unwrap()
    else {
        panic!("extend of a live lock");
    };
    client.release(&lock).await.unwrap();

    let acquired = &events.with_message("lock acquired")[0];
    assert_eq!(acquired["resource"], resource);
    assert_eq!(acquired["owner"], "alice");
    assert!(acquired.contains_key("waited_ms") && acquired.contains_key("attempts"));
    let extended = &events.with_message("lock extended")[0];
    assert!(extended.contains_key("held_ms") && extended.contains_key("lease_ms"));
    let released = &events.with_message("lock released")[0];
    assert_eq!(released["owner"], "alice");
    assert_eq!(released["resource"], resource);

    let full_id = lock.lock_id().to_string();
    let short_id: String = full_id.chars().filter(|c| *c != '-').take(8).collect();
    assert_eq!(acquired["lock_id"], short_id);
    for event in events.all() {
        for value in event.values() {
            assert!(
                !value.contains(&full_id) && !value.contains(&full_id.replace('-', "")),
                "the full LockID was logged: {event:?}"
            );
        }
    }
}
