//! A guard whose release DynamoDB fails, every try, while the guard is dropped: the guard's own
//! release cancelled at its await, or the release the guard's stop sent when an extension found
//! the lock expired. The drop sends the release again once that one has failed, as it does
//! after a release awaited to its failure; left to it, the lock stayed held for nobody for its
//! lease.

use super::*;
use ddb_lock_test_kit::proxy::WithheldAnswer;
use tokio::time::timeout;

/// DynamoDB fails the next `tries` DeleteItems (a validation error, which the SDK does not retry).
fn fail_deletes(proxy: &Proxy, tries: usize) {
    for _ in 0..tries {
        proxy.refuse_next("DeleteItem", "ValidationException");
    }
}

/// The release's every try fails (four); the future of `release` is dropped
/// once its first try failed, which drops the guard (the release goes on from the client's task).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_guard_dropped_with_its_release_cancelled_releases_once_that_release_failed() {
    let _ = lock_client().await;
    let proxy = Proxy::start(&endpoint()).await;
    let client = client_through(&proxy, None);
    let resource = unique("guard-release-cancelled-failed");
    let guard = client
        .lock(&resource, &guard_options("alice", 60_000, 20_000))
        .await
        .unwrap();
    fail_deletes(&proxy, 4);
    let mut releasing = Box::pin(guard.release());
    tokio::select! {
        answer = &mut releasing => panic!("answered before its first try failed: {answer:?}"),
        () = proxy.wait_for("DeleteItem", |counts| counts.throttled >= 1) => {}
    }
    drop(releasing);

    timeout(PATIENCE, client.flush()).await.expect("flushed");
    assert_eq!(proxy.counts("DeleteItem").throttled, 4, "every try failed");
    assert_eq!(raw_item(&resource).await, None, "released by the drop");
}

/// The control: the same release, awaited to its failure, then the guard's drop.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_guard_whose_awaited_release_failed_releases_when_dropped() {
    let _ = lock_client().await;
    let proxy = Proxy::start(&endpoint()).await;
    let client = client_through(&proxy, None);
    let resource = unique("guard-release-awaited-failed");
    let guard = client
        .lock(&resource, &guard_options("alice", 60_000, 20_000))
        .await
        .unwrap();
    fail_deletes(&proxy, 4);
    let answer = timeout(PATIENCE, guard.release()).await.expect("answered");
    assert!(matches!(answer, Err(Error::Backend { .. })), "{answer:?}");

    timeout(PATIENCE, client.flush()).await.expect("flushed");
    assert_eq!(raw_item(&resource).await, None, "released by the drop");
}

/// The heartbeat's extension is held in the network; the wall clock jumps past the lease and an
/// extension through the client finds the lock expired, which stops the guard and releases the
/// lock, every try of it failed. The heartbeat's extension then lands with its earlier `:now`,
/// and lengthens the lease: the guard's drop releases it (a guard found expired sent nothing,
/// taking its stop's release for done).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_guard_found_expired_whose_release_failed_releases_when_dropped() {
    let _ = lock_client().await;
    let proxy = Proxy::start(&endpoint()).await;
    let clock = AdjustableClock::new();
    let client = client_through(&proxy, Some(clock.clone()));
    let resource = unique("guard-expired-release-failed");
    fail_deletes(&proxy, 4);
    let (guard, lock, late) =
        super::given_up::found_expired_with_its_heartbeat_held(&proxy, &clock, &client, &resource)
            .await;
    timeout(PATIENCE, client.flush()).await.expect("flushed");
    assert_eq!(proxy.counts("DeleteItem").throttled, 4, "every try failed");
    assert!(late.deliver().await, "the extension reached the endpoint");
    clock.set_back(Duration::from_secs(10));
    let item = raw_item(&resource)
        .await
        .expect("the late extension stands");
    assert_eq!(
        ddb_lock_test_kit::string_attr(&item, "LockID"),
        lock.lock_id().to_string()
    );

    drop(guard);
    timeout(PATIENCE, client.flush()).await.expect("flushed");
    assert_eq!(raw_item(&resource).await, None, "released by the drop");
}

/// What an idempotent acquisition left running while its hand-back's answer is held.
type Taking = tokio::task::JoinHandle<Result<Option<ddb_lock::Lock>, Error>>;

/// Under the observed-lease rule an idempotent acquisition refused by its owner's own live lock
/// extends that lock to be handed it back; the extension is applied, its answer held, while the
/// lock's guard is dropped and its release fails every try: the client, the resource, the held
/// answer and the acquisition still to answer.
async fn hand_back_held_past_a_failed_release(
    proxy: &Proxy,
    name: &str,
) -> (LockClient, String, WithheldAnswer, Taking) {
    let client = ddb_lock_test_kit::builder(ddb_lock_test_kit::quickly_retrying_dynamodb(
        &proxy.endpoint(),
    ))
    .takeover(ddb_lock::TakeoverRule::ObservedLease)
    .build()
    .unwrap();
    let resource = unique(name);
    let options = guard_options("alice", 60_000, 20_000);
    let guard = client.lock(&resource, &options).await.unwrap();
    let mut answer = proxy.withhold_next_answer("UpdateItem");
    let taking = tokio::spawn({
        let (client, resource) = (client.clone(), resource.clone());
        let options = options.clone().idempotent(true);
        async move { client.try_acquire(&resource, &options).await }
    });
    timeout(PATIENCE, answer.applied())
        .await
        .expect("the hand-back's extension is applied");
    fail_deletes(proxy, 4);
    drop(guard);
    timeout(PATIENCE, client.flush()).await.expect("flushed");
    assert_eq!(proxy.counts("DeleteItem").throttled, 4, "every try failed");
    (client, resource, answer, taking)
}

/// The hand-back's answer, read after the release failed, finds the lock's release started: the
/// acquisition is not handed it back, and the lock, extended for a new lease, stayed held for
/// nobody.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hand_back_applied_after_its_locks_release_failed_is_released() {
    let _ = lock_client().await;
    let proxy = Proxy::start(&endpoint()).await;
    let (client, resource, answer, taking) =
        hand_back_held_past_a_failed_release(&proxy, "hand-back-after-failed-release").await;
    answer.deliver();
    let taken = timeout(PATIENCE, taking)
        .await
        .expect("answered")
        .unwrap()
        .unwrap();
    // Handed back (the lock released meanwhile, taken anew) or not: released either way.
    if let Some(lock) = taken {
        client.release(&lock).await.unwrap();
    }

    timeout(PATIENCE, client.flush()).await.expect("flushed");
    assert_eq!(raw_item(&resource).await, None, "released");
}

/// The same, the lock handed back meanwhile to an idempotent acquisition of the same owner in
/// another process (its own extension, a new version): the late answer's release must spare it
/// (released by its lock id alone, it deleted the lock under that guard; found by review).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_late_hand_back_spares_the_lock_handed_back_elsewhere_since() {
    let elsewhere = lock_client().await;
    let proxy = Proxy::start(&endpoint()).await;
    let (client, resource, answer, taking) =
        hand_back_held_past_a_failed_release(&proxy, "hand-back-late-elsewhere").await;
    let options = guard_options("alice", 60_000, 20_000).idempotent(true);
    let other = elsewhere.lock(&resource, &options).await.unwrap();
    answer.deliver();
    let taken = timeout(PATIENCE, taking).await.expect("answered").unwrap();
    assert!(matches!(taken, Ok(None)), "{taken:?}");

    still_held_by(&client, &resource, other).await;
}

/// A lock whose release through its client failed every try, then extended through that client
/// (answered `NotFound`: applied after its release started), is released, but only as that
/// extension wrote it: an idempotent acquisition of the same owner in another process, handed
/// the lock back meanwhile (a new version), keeps it (released by its lock id alone, it was
/// deleted under that guard; found by review).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_extension_after_a_failed_release_spares_the_lock_handed_back_elsewhere_since() {
    let elsewhere = lock_client().await;
    let proxy = Proxy::start(&endpoint()).await;
    let client = client_through(&proxy, None);
    let resource = unique("extension-after-failed-release");
    let options = guard_options("alice", 60_000, 20_000).idempotent(true);
    let lock = client.try_acquire(&resource, &options).await.unwrap();
    let lock = lock.expect("a free lock");
    fail_deletes(&proxy, 4);
    let failed = client.release(&lock).await;
    assert!(matches!(failed, Err(Error::Backend { .. })), "{failed:?}");
    let mut late = proxy.delay_next_request("DeleteItem");
    let extended = client.extend(&lock, Duration::from_secs(60)).await.unwrap();
    assert_eq!(extended, ExtendOutcome::NotFound);
    timeout(PATIENCE, late.captured())
        .await
        .expect("the extended lock is released");
    let other = elsewhere.lock(&resource, &options).await.unwrap();
    assert_eq!(
        other.lock().unwrap().lock_id(),
        lock.lock_id(),
        "handed back"
    );
    assert!(late.deliver().await, "the release reached the endpoint");

    still_held_by(&client, &resource, other).await;
}

/// Once `client`'s background work is done, the lock on `resource` is still the one `other` (a
/// guard in another process, handed it back) holds, and `other` says so; then it releases.
async fn still_held_by(client: &LockClient, resource: &str, other: ddb_lock::LockGuard) {
    timeout(PATIENCE, client.flush()).await.expect("flushed");
    let item = raw_item(resource)
        .await
        .expect("the lock handed back elsewhere stands");
    assert_eq!(
        ddb_lock_test_kit::string_attr(&item, "LockID"),
        other.lock().unwrap().lock_id().to_string()
    );
    assert!(other.is_held());
    assert_eq!(other.release().await.unwrap(), ReleaseOutcome::Released);
}

/// Two extensions of a lock through its client, both applied (each a new version) with their
/// answers held, then the lock's release fails every try: the first answer's release (of its own
/// version) is refused by the second's version, and the second, read while that release was on
/// its way, released nothing: the lock stood for nobody for a lease (found by review).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_extensions_applied_after_a_failed_release_leave_nothing_held() {
    let _ = lock_client().await;
    let proxy = Proxy::start(&endpoint()).await;
    let client = client_through(&proxy, None);
    let resource = unique("two-extensions-after-failed-release");
    let lock = client
        .try_acquire(&resource, &guard_options("alice", 60_000, 20_000))
        .await
        .unwrap()
        .expect("a free lock");
    let extend = |client: &LockClient| {
        let (client, lock) = (client.clone(), lock.clone());
        tokio::spawn(async move { client.extend(&lock, Duration::from_secs(60)).await })
    };
    let mut first = proxy.withhold_next_answer("UpdateItem");
    let first_extension = extend(&client);
    timeout(PATIENCE, first.applied()).await.expect("applied");
    let mut second = proxy.withhold_next_answer("UpdateItem");
    let second_extension = extend(&client);
    timeout(PATIENCE, second.applied()).await.expect("applied");
    fail_deletes(&proxy, 4);
    let failed = client.release(&lock).await;
    assert!(matches!(failed, Err(Error::Backend { .. })), "{failed:?}");
    let mut first_release = proxy.delay_next_request("DeleteItem");
    first.deliver();
    let answered = first_extension.await.unwrap().unwrap();
    assert_eq!(answered, ExtendOutcome::NotFound);
    timeout(PATIENCE, first_release.captured())
        .await
        .expect("the first extension's version is released");
    second.deliver();
    let answered = second_extension.await.unwrap().unwrap();
    assert_eq!(answered, ExtendOutcome::NotFound);
    assert!(first_release.deliver().await, "it reached the endpoint");

    timeout(PATIENCE, client.flush()).await.expect("flushed");
    assert_eq!(raw_item(&resource).await, None, "held for nobody");
}
