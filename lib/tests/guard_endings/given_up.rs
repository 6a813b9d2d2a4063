//! A guard given up: an extension through the guard's client found the lock expired (the wall
//! clock jumped past the lease), which stops the guard, while an extension of the guard was on
//! its way, or a data replacement found it so. The lock is released whoever found it expired,
//! even if the data replacement's future is dropped while it releases, and an extension that
//! lands late is never answered `Extended`.

use super::*;
use ddb_lock_test_kit::proxy::HeldRequest;
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

/// The replacement landed with its earlier `:now` after the guard was found expired: it was
/// answered `Extended`, for a lock then released.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_data_replacement_applied_after_the_guard_was_found_expired_is_not_extended() {
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
    assert!(
        matches!(
            answer,
            Err(Error::Lost { .. }) | Ok(ExtendOutcome::NotFound)
        ),
        "{answer:?}"
    );
    client.flush().await;
    assert_eq!(raw_item(&resource).await, None, "released");
}

/// A data replacement sent after the wall clock jumped past the lease finds the lock expired, and
/// releases it; its future is dropped while the release, failed once, waits to be tried again.
/// The release was the replacement's own: dropped with it, it left the lock to its lease while
/// the guard stayed open.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_data_replacement_found_expired_and_dropped_while_it_releases_still_releases() {
    let _ = lock_client().await;
    let proxy = Proxy::start(&endpoint()).await;
    let clock = AdjustableClock::new();
    let client = client_through(&proxy, Some(clock.clone()));
    let resource = unique("replacement-dropped-releasing");
    let guard = client
        .lock(&resource, &guard_options("alice", 6_000, 5_000))
        .await
        .unwrap();
    clock.advance(Duration::from_secs(10));
    proxy.refuse_next("DeleteItem", "ValidationException");
    let mut replacing = Box::pin(guard.replace_data(Some(b"x".to_vec())));
    tokio::select! {
        answer = &mut replacing => panic!("answered before its release was tried again: {answer:?}"),
        () = proxy.wait_for("DeleteItem", |counts| counts.throttled >= 1) => {}
    }
    drop(replacing);

    timeout(PATIENCE, client.flush()).await.expect("flushed");
    assert_eq!(
        raw_item(&resource).await,
        None,
        "released while the guard stays open"
    );
    drop(guard);
}

/// A guard of alice's on `resource` through `proxy` (a lease of 6 s, its heartbeat a tenth of a
/// second in) whose heartbeat's extension is held in the network; the wall clock then jumps past
/// the lease, and an extension through `client` finds the lock expired, which stops the guard:
/// the guard, its lock and the held extension.
pub(super) async fn found_expired_with_its_heartbeat_held(
    proxy: &Proxy,
    clock: &AdjustableClock,
    client: &LockClient,
    resource: &str,
) -> (ddb_lock::LockGuard, ddb_lock::Lock, HeldRequest) {
    let mut late = proxy.delay_next_request_containing("UpdateItem", "SET #expires_at");
    let guard = client
        .lock(resource, &guard_options("alice", 6_000, 100))
        .await
        .unwrap();
    let lock = guard.lock().unwrap();
    timeout(PATIENCE, late.captured())
        .await
        .expect("the heartbeat extends");
    clock.advance(Duration::from_secs(10));
    let found = client.extend(&lock, Duration::from_secs(6)).await.unwrap();
    assert!(matches!(found, ExtendOutcome::Expired { .. }), "{found:?}");
    assert!(!guard.is_held());
    (guard, lock, late)
}

/// The heartbeat's extension is on its way when the wall clock jumps past the lease and the
/// client's own `extend` finds the lock expired, which stops the guard; the heartbeat's extension
/// then lands with its earlier `:now` and lengthens the lease. The guard, open, released nothing
/// (only the heartbeat released a lock found expired, and it had been stopped): the lock stayed
/// held for that lease, for nobody.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_guard_found_expired_by_another_extension_releases_its_lock() {
    let _ = lock_client().await;
    let proxy = Proxy::start(&endpoint()).await;
    let clock = AdjustableClock::new();
    let client = client_through(&proxy, Some(clock.clone()));
    let resource = unique("guard-found-expired-elsewhere");
    let (guard, _, late) =
        found_expired_with_its_heartbeat_held(&proxy, &clock, &client, &resource).await;
    late.deliver().await;
    clock.set_back(Duration::from_secs(10));

    timeout(PATIENCE, client.flush()).await.expect("flushed");
    assert_eq!(client.status(&resource).await.unwrap(), LockStatus::Free);
    drop(guard);
}

/// A data replacement applied (its answer withheld) holds the guard's turn; a second one waits
/// for it and gives up when the lease runs out, and the first is dropped then, unpolled (a
/// `select!` on the guard's loss). Its extension, sent with the wall clock ahead, keeps the item
/// held well past the guard's lease. The heartbeat, finding the guard lost, released nothing, nor
/// did the replacement that gave up: the lock stayed held for that lease while the guard stayed
/// open (found by review). Which timer fires first at the lease end decided it: three rounds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_data_replacement_given_up_behind_another_releases_the_lock() {
    let _ = lock_client().await;
    let proxy = Proxy::start(&endpoint()).await;
    let clock = AdjustableClock::new();
    let client = client_through(&proxy, Some(clock.clone()));
    for round in 0..3 {
        let resource = unique("replacement-behind-another");
        let guard = client
            .lock(&resource, &guard_options("alice", 4_000, 3_000))
            .await
            .unwrap();
        clock.advance(Duration::from_secs(3));
        let mut withheld = proxy.withhold_next_answer("UpdateItem");
        let mut first = Box::pin(guard.replace_data(Some(b"first".to_vec())));
        tokio::select! {
            answer = &mut first => panic!("answered, its answer withheld: {answer:?}"),
            () = withheld.applied() => {}
        }
        let second = timeout(PATIENCE, guard.replace_data(Some(b"second".to_vec())))
            .await
            .expect("given up at the lease end");
        assert!(matches!(second, Err(Error::Lost { .. })), "{second:?}");
        drop(first);
        withheld.drop_it();
        timeout(PATIENCE, client.flush()).await.expect("flushed");
        clock.set_back(Duration::from_secs(3));
        assert_eq!(
            lock_client().await.status(&resource).await.unwrap(),
            LockStatus::Free,
            "round {round}: released while the guard stays open"
        );
        drop(guard);
    }
}
