//! A data replacement answered after the guard was found lost: an extension through the guard's
//! client found the lock expired (the wall clock jumped past the lease) while the replacement
//! was on its way, and the replacement, applied with its earlier `:now`, lengthened the lease.
//! The guard gives the lock up: the answer is `Error::Lost`, and the lock is released, even if
//! the replacement's future is dropped while that release is under way.

use super::*;
use std::future::Future;
use std::pin::Pin;
use tokio::time::timeout;

/// Starts `guard.replace_data` with its UpdateItem held back in the network, lets the wall
/// clock jump past the lease, and has an extension through the client find the lock expired;
/// then delivers the held request, which is applied. The replacement, still to be polled.
async fn replacement_applied_after_the_guard_was_found_expired<'a>(
    proxy: &Proxy,
    clock: &AdjustableClock,
    client: &LockClient,
    guard: &'a ddb_lock::LockGuard,
) -> Pin<Box<impl Future<Output = Result<ExtendOutcome, Error>> + 'a>> {
    let lock = guard.lock().unwrap();
    let mut late = proxy.delay_next_request_containing("UpdateItem", "#data = :data");
    let mut replacing = Box::pin(guard.replace_data(Some(b"x".to_vec())));
    tokio::select! {
        answer = &mut replacing => panic!("answered with its request held back: {answer:?}"),
        () = late.captured() => {}
    }
    clock.advance(Duration::from_secs(10));
    let found = client.extend(&lock, Duration::from_secs(6)).await.unwrap();
    assert!(matches!(found, ExtendOutcome::Expired { .. }), "{found:?}");
    assert!(!guard.is_held());
    assert!(late.deliver().await, "the replacement reached the endpoint");
    replacing
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_data_replacement_applied_after_the_guard_was_found_expired_is_lost() {
    let _ = lock_client().await;
    let proxy = Proxy::start(&endpoint()).await;
    let clock = AdjustableClock::new();
    let client = client_through(&proxy, Some(clock.clone()));
    let resource = unique("replacement-after-expired");
    let guard = client
        .lock(&resource, &guard_options("alice", 6_000, 5_000))
        .await
        .unwrap();
    let replacing =
        replacement_applied_after_the_guard_was_found_expired(&proxy, &clock, &client, &guard)
            .await;
    let answer = timeout(PATIENCE, replacing).await.expect("answered");
    assert!(matches!(answer, Err(Error::Lost { .. })), "{answer:?}");
    client.flush().await;
    assert_eq!(raw_item(&resource).await, None, "released");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_data_replacement_dropped_while_it_releases_the_lock_given_up_still_releases() {
    let _ = lock_client().await;
    let proxy = Proxy::start(&endpoint()).await;
    let clock = AdjustableClock::new();
    let client = client_through(&proxy, Some(clock.clone()));
    let resource = unique("replacement-dropped-releasing");
    let guard = client
        .lock(&resource, &guard_options("alice", 6_000, 5_000))
        .await
        .unwrap();
    // The release's first DeleteItem fails; the replacement is dropped while it waits to try
    // again.
    proxy.refuse_next("DeleteItem", "ValidationException");
    let mut replacing =
        replacement_applied_after_the_guard_was_found_expired(&proxy, &clock, &client, &guard)
            .await;
    tokio::select! {
        answer = &mut replacing => panic!("answered before its release was tried again: {answer:?}"),
        () = proxy.wait_for("DeleteItem", |counts| counts.throttled >= 1) => {}
    }
    drop(replacing);

    timeout(PATIENCE, client.flush()).await.expect("flushed");
    assert_eq!(
        raw_item(&resource).await,
        None,
        "the lock given up is released while the guard stays open"
    );
    drop(guard);
}
