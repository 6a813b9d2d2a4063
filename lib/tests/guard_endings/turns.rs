//! A guard's lease end as its two extenders (the heartbeat and `replace_data`) and its readers
//! (`lost`, `lock`) see it: the heartbeat waiting its turn behind a data replacement waits to the
//! lease that replacement's predecessor lengthened; a `lost` future polled late does not report a
//! lease end that an extension replaced; `lock` says nothing once the lease has run out.

use super::*;
use ddb_lock::LockGuard;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use tokio::time::Instant;

/// A guard of alice's on a resource of its own (named after `name`), with a lease of 3 s and a
/// heartbeat of `heartbeat_ms`, through a proxy: the proxy, the client, the resource, the guard
/// and its first lease end.
async fn guard_through_a_proxy(
    name: &str,
    heartbeat_ms: u64,
) -> (Proxy, LockClient, String, LockGuard, Instant) {
    let _ = lock_client().await;
    let proxy = Proxy::start(&endpoint()).await;
    let client = client_through(&proxy, None);
    let resource = unique(name);
    let guard = client
        .lock(&resource, &guard_options("alice", 3_000, heartbeat_ms))
        .await
        .unwrap();
    let first_end = Instant::from_std(guard.lock().unwrap().valid_until());
    (proxy, client, resource, guard, first_end)
}

/// Extends `guard`'s lock for 3 s through `client`, the extension ending well after `first_end`.
async fn extended_through_the_client(
    client: &LockClient,
    guard: &LockGuard,
    first_end: Instant,
) -> ddb_lock::Lock {
    let extended = client
        .extend(&guard.lock().unwrap(), Duration::from_secs(3))
        .await
        .unwrap();
    let ExtendOutcome::Extended(extended) = extended else {
        panic!("{extended:?}")
    };
    assert!(Instant::from_std(extended.valid_until()) >= first_end + Duration::from_millis(500));
    extended
}

/// Whether `future` is ready when polled once now.
fn ready_now<F: Future + Unpin>(future: &mut F) -> bool {
    let mut context = Context::from_waker(std::task::Waker::noop());
    matches!(Pin::new(future).poll(&mut context), Poll::Ready(_))
}

/// The heartbeat planned its extension against the lease end it read before it slept; a data
/// replacement lengthened the lease meanwhile, and a second one held the turn (its answer slow):
/// the heartbeat waited for the turn only until the earlier end, then said the lease had run out
/// and released the lock, which the guard held until the later end.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_heartbeat_behind_a_data_replacement_waits_for_the_lease_that_was_lengthened() {
    // The heartbeat is due a second in, two seconds before the first lease end.
    let (proxy, _client, resource, guard, first_end) =
        guard_through_a_proxy("heartbeat-behind-replacement", 1_000).await;
    // Some of the lease passes before the replacements, so that theirs ends well after the first.
    tokio::time::sleep_until(first_end - Duration::from_millis(2_700)).await;
    guard.replace_data(Some(b"a".to_vec())).await.unwrap();
    let lengthened_end = tokio::time::Instant::from_std(guard.lock().unwrap().valid_until());
    assert!(lengthened_end >= first_end + Duration::from_millis(300));

    let mut answer = proxy.withhold_next_answer("UpdateItem");
    let mut replacing = Box::pin(guard.replace_data(Some(b"b".to_vec())));
    tokio::select! {
        biased;
        replaced = &mut replacing => panic!("answered while withheld: {replaced:?}"),
        () = answer.applied() => {}
    }
    // Past the first lease end, before the lengthened one: the guard still holds its lock.
    tokio::time::sleep_until(first_end + Duration::from_millis(150)).await;
    assert!(
        guard.is_held(),
        "the guard gave up a lease it had lengthened"
    );
    assert_eq!(lost_now(&guard.watch()).await, None);
    let item = raw_item(&resource).await.expect("the lock was released");
    assert_eq!(
        ddb_lock_test_kit::string_attr(&item, "LockID"),
        guard.lock().unwrap().lock_id().to_string()
    );

    answer.deliver();
    let replaced = replacing.await.unwrap();

    assert!(
        matches!(replaced, ExtendOutcome::Extended(_)),
        "{replaced:?}"
    );
    assert_eq!(guard.release().await.unwrap(), ReleaseOutcome::Released);
}

/// The heartbeat's extension landed with its answer held in the network, and the lock was
/// extended through the guard's client meanwhile (`LockClient::extend`, answered, say by the work
/// storing its progress): at the guard's first lease end the heartbeat gave up, said the lease had
/// run out and deleted the lock its own client had just answered extended (found by review). The
/// guard counts on every extension of its lock its client was answered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_guard_counts_on_its_clients_extension_while_its_heartbeats_answer_is_held() {
    // The heartbeat is due a second in, two seconds before the first lease end.
    let (proxy, client, resource, guard, first_end) =
        guard_through_a_proxy("heartbeat-held-client-extended", 1_000).await;
    let mut answer = proxy.withhold_next_answer("UpdateItem");
    answer.applied().await;
    let extended = extended_through_the_client(&client, &guard, first_end).await;

    // Past the first lease end, before the client's: the guard still holds its lock.
    tokio::time::sleep_until(first_end + Duration::from_millis(150)).await;
    assert!(
        guard.is_held(),
        "the guard gave up a lease its client extended"
    );
    assert_eq!(lost_now(&guard.watch()).await, None);
    let item = raw_item(&resource).await.expect("the lock was released");
    assert_eq!(
        ddb_lock_test_kit::string_attr(&item, "LockID"),
        extended.lock_id().to_string()
    );
    answer.deliver();
    assert_eq!(guard.release().await.unwrap(), ReleaseOutcome::Released);
}

/// A data replacement landed with its answer held in the network, and the lock was extended
/// through the guard's client meanwhile: at the guard's first lease end the replacement gave up,
/// said the lock lost, and released the lock its client had just answered extended (found by
/// review). It waits for its answer to the lease its client extended.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_data_replacement_counts_on_its_clients_extension_while_its_answer_is_held() {
    // The heartbeat is due a tenth of a second before the first lease end.
    let (proxy, client, resource, guard, first_end) =
        guard_through_a_proxy("replacement-held-client-extended", 2_900).await;
    // Some of the lease passes first, so that the client's extension ends well after the first.
    tokio::time::sleep_until(first_end - Duration::from_millis(2_000)).await;
    let mut answer = proxy.withhold_next_answer("UpdateItem");
    let mut replacing = Box::pin(guard.replace_data(Some(b"progress".to_vec())));
    tokio::select! {
        biased;
        replaced = &mut replacing => panic!("answered while withheld: {replaced:?}"),
        () = answer.applied() => {}
    }
    extended_through_the_client(&client, &guard, first_end).await;

    // Past the first lease end, before the client's: still waiting, the guard holding its lock.
    tokio::select! {
        biased;
        replaced = &mut replacing => panic!("given up on: {replaced:?}"),
        () = tokio::time::sleep_until(first_end + Duration::from_millis(150)) => {}
    }
    assert!(
        guard.is_held(),
        "the guard gave up a lease its client extended"
    );
    assert!(raw_item(&resource).await.is_some(), "the lock was released");
    answer.deliver();
    let replaced = replacing.await.unwrap();
    assert!(
        matches!(replaced, ExtendOutcome::Extended(_)),
        "{replaced:?}"
    );
    assert_eq!(guard.release().await.unwrap(), ReleaseOutcome::Released);
}

/// A `lost` future polled once, then not again until after the lease end it was waiting for,
/// while the heartbeat extended the lease in time: both its branches were ready at that poll, and
/// one time in two it took the old lease end for the end of the hold (work under `with_lock` was
/// dropped, its lock released, while the guard held it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_future_polled_late_does_not_report_a_lease_end_an_extension_replaced() {
    let client = lock_client().await;
    let resource = unique("lost-polled-late");
    let guard = client
        .lock(&resource, &guard_options("alice", 3_000, 500))
        .await
        .unwrap();
    let first_end = tokio::time::Instant::from_std(guard.lock().unwrap().valid_until());
    let watch = guard.watch();
    let mut futures: Vec<_> = (0..20).map(|_| Box::pin(watch.lost())).collect();
    for future in &mut futures {
        assert!(!ready_now(future), "lost at once");
    }

    tokio::time::sleep_until(first_end + Duration::from_millis(200)).await;
    assert!(guard.is_held(), "the heartbeat extended the lease");
    let reported = futures
        .iter_mut()
        .map(ready_now)
        .filter(|ready| *ready)
        .count();
    assert_eq!(
        reported, 0,
        "lost futures said the lock was lost while held"
    );
    drop(futures);
    assert_eq!(guard.release().await.unwrap(), ReleaseOutcome::Released);
}

/// A guard whose lease ran out before its background task could notice (a blocked runtime): it
/// says not held, and its lock is no longer handed out as if it were (its fencing token is, for
/// the store that checks it to refuse its writes once a later holder's was seen).
#[tokio::test(flavor = "current_thread")]
async fn a_lease_run_out_unnoticed_hands_out_no_lock() {
    let client = lock_client().await;
    let resource = unique("lease-out-unnoticed");
    let guard = client
        .lock(&resource, &guard_options("alice", 1_500, 500).fencing(true))
        .await
        .unwrap();
    let token = guard.fencing_token().expect("fenced");
    let end = tokio::time::Instant::from_std(guard.lock().unwrap().valid_until());
    // The runtime's only thread blocked past the lease end: no heartbeat runs.
    std::thread::sleep(end.saturating_duration_since(tokio::time::Instant::now()));
    assert!(!guard.is_held());
    assert_eq!(guard.lock(), None);
    assert_eq!(
        guard.fencing_token(),
        Some(token),
        "the token stays, for the store to refuse"
    );
    assert_eq!(guard.watch().lock(), None);
    assert_eq!(guard.watch().fencing_token(), Some(token));
}
