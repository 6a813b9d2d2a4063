//! Answers that come after this client ended the lock they are about: an acquisition answered
//! after its own client removed (or found gone) the lock it made, a force release whose read
//! comes back after the client took the lock anew.

use super::*;
use ddb_lock_test_kit::proxy::WithheldAnswer;

/// An acquisition of this client whose write was applied but whose answer comes only after the
/// client removed that lock (a force release, a release by owner, reading or matching it): the
/// guard the late answer makes must not say held. It did: the removal had marked only the locks
/// the client already knew of, and the guard said held for a deleted lock (another client could
/// take it) until its heartbeat found it gone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lock_removed_before_its_acquisition_was_answered_starts_no_guard_held() {
    let _ = lock_client().await;
    for how in ["force_release", "release_owned"] {
        let proxy = Proxy::start(&endpoint()).await;
        let client = client_through(&proxy, None);
        let resource = unique(&format!("guard-removed-before-answered-{how}"));
        let (taking, answer) = guard_answered_later(&proxy, &client, &resource, "PutItem").await;
        match how {
            "force_release" => {
                let removed = client.force_release(&resource).await.unwrap();
                assert_eq!(removed.map(|holder| holder.owner), Some("alice".to_owned()));
            }
            _ => assert_eq!(
                client.release_owned(&resource, "alice").await.unwrap(),
                ReleaseOutcome::Released
            ),
        }
        starts_lost(&client, &resource, taking, answer, how).await;
    }
}

/// `client` takes a guard on `resource` as alice, in a task: once the endpoint has applied its
/// write (`operation`), the write's answer is withheld until the caller delivers it.
async fn guard_answered_later(
    proxy: &Proxy,
    client: &LockClient,
    resource: &str,
    operation: &str,
) -> (
    tokio::task::JoinHandle<Result<ddb_lock::LockGuard, Error>>,
    WithheldAnswer,
) {
    let mut answer = proxy.withhold_next_answer(operation);
    let taking = {
        let (client, resource) = (client.clone(), resource.to_owned());
        tokio::spawn(async move {
            client
                .lock(&resource, &guard_options("alice", 60_000, 20_000))
                .await
        })
    };
    answer.applied().await;
    (taking, answer)
}

/// Delivers `answer` to the acquisition `taking`, whose lock was removed meanwhile (`how`): the
/// guard it makes says lost, and the lock is free.
async fn starts_lost(
    client: &LockClient,
    resource: &str,
    taking: tokio::task::JoinHandle<Result<ddb_lock::LockGuard, Error>>,
    answer: WithheldAnswer,
    how: &str,
) {
    answer.deliver();
    let guard = taking.await.unwrap().unwrap();
    assert_eq!(client.status(resource).await.unwrap(), LockStatus::Free);
    assert!(
        !guard.is_held(),
        "{how}: the guard says held for a lock removed before its acquisition was answered"
    );
    drop(guard);
    client.flush().await;
}

/// A force release reads a lapsed lock of another client; while its read's answer is on its way
/// this client takes the lock anew. The delete, conditioned on the lock read, spares the new
/// one, and so must the force release spare its guard: it stopped every guard of the client on
/// the resource before the delete, and the new lock's guard said lost (its heartbeat stopped)
/// while the lock stood.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_force_release_spares_the_guard_of_a_lock_taken_after_its_read() {
    let other = lock_client().await;
    let proxy = Proxy::start(&endpoint()).await;
    let clock = AdjustableClock::new();
    let client = client_through(&proxy, Some(clock.clone()));
    let resource = unique("guard-force-release-spares");
    let _lapsed = hold(&other, &resource, "bob", Duration::from_secs(60)).await;
    // This client's clock is past bob's lease: it can take the lock, and the force release reads
    // bob's lock.
    clock.advance(Duration::from_secs(61));
    let mut read = proxy.withhold_next_answer("GetItem");
    let forcing = {
        let (client, resource) = (client.clone(), resource.clone());
        tokio::spawn(async move { client.force_release(&resource).await })
    };
    read.applied().await;
    let guard = client
        .lock(&resource, &guard_options("alice", 60_000, 20_000))
        .await
        .unwrap();
    read.deliver();
    let removed = forcing.await.unwrap().unwrap();

    assert_eq!(removed, None, "bob's lapsed lock was gone already");
    assert!(guard.is_held(), "the guard of the spared lock says lost");
    assert!(matches!(
        client.status(&resource).await.unwrap(),
        LockStatus::Held { .. }
    ));
    guard.release().await.unwrap();
}

/// An extension through the client finds the lock gone (another client force-released it) while
/// an idempotent acquisition of the same owner, refused by that lock before, is still to be
/// answered: the hand-back must not start a guard held on the lock the client found gone. The
/// extension stopped and forgot the hold without marking it ended, and the hand-back took it back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lock_an_extension_found_gone_is_not_handed_back() {
    let other = lock_client().await;
    let proxy = Proxy::start(&endpoint()).await;
    let client = client_through(&proxy, None);
    let resource = unique("guard-extension-found-gone");
    let saga = guard_options("saga", 60_000, 20_000).idempotent(true);
    let first = client.lock(&resource, &saga).await.unwrap();
    let lock = first.lock().expect("held");

    let mut refusal = proxy.withhold_next_answer("PutItem");
    let again = {
        let (client, resource, saga) = (client.clone(), resource.clone(), saga.clone());
        tokio::spawn(async move { client.try_lock(&resource, &saga).await })
    };
    refusal.applied().await;
    assert!(other.force_release(&resource).await.unwrap().is_some());
    assert!(matches!(
        client.extend(&lock, Duration::from_secs(60)).await.unwrap(),
        ExtendOutcome::NotFound
    ));
    refusal.deliver();
    let again = again.await.unwrap().unwrap();

    assert!(!first.is_held());
    if let Some(guard) = &again {
        if guard.is_held() {
            let held = guard.lock().expect("held").lock_id();
            assert_ne!(held, lock.lock_id(), "handed back the lock found gone");
        }
    }
    drop(again);
    drop(first);
    client.flush().await;
}

/// As above, by a release by owner on a client that keeps items, whose answer is lost and whose
/// retry is refused by the item its first attempt wrote: the kept item names the lock it removed,
/// which is marked all the same (the retry's refusal marked nothing).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lock_removed_by_a_retried_release_by_owner_starts_no_guard_held() {
    let _ = lock_client().await;
    let proxy = Proxy::start(&endpoint()).await;
    let client = ddb_lock_test_kit::builder(ddb_lock_test_kit::quickly_retrying_dynamodb(
        &proxy.endpoint(),
    ))
    .delete_on_release(false)
    .build()
    .unwrap();
    let resource = unique("guard-removed-by-retried-release-owned");
    // A keeping client acquires with an UpdateItem.
    let (taking, answer) = guard_answered_later(&proxy, &client, &resource, "UpdateItem").await;
    proxy.drop_next_answer("UpdateItem");
    assert_eq!(
        client.release_owned(&resource, "alice").await.unwrap(),
        ReleaseOutcome::Released
    );
    starts_lost(
        &client,
        &resource,
        taking,
        answer,
        "a retried release_owned",
    )
    .await;
}

/// A plain acquisition (no guard) answered after its own client force-released the lock it made:
/// the client does not remember the deleted lock as held (`release_all` went on to release it,
/// and the client's waiters counted on it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lock_removed_before_its_acquisition_was_answered_is_not_remembered() {
    let _ = lock_client().await;
    let proxy = Proxy::start(&endpoint()).await;
    let client = client_through(&proxy, None);
    let resource = unique("removed-before-answered-plain");
    let mut answer = proxy.withhold_next_answer("PutItem");
    let taking = {
        let (client, resource) = (client.clone(), resource.clone());
        tokio::spawn(async move {
            client
                .try_acquire(&resource, &AcquireOptions::new().owner("alice"))
                .await
        })
    };
    answer.applied().await;
    assert!(client.force_release(&resource).await.unwrap().is_some());
    answer.deliver();
    let lock = taking
        .await
        .unwrap()
        .unwrap()
        .expect("its write was applied");
    assert_eq!(lock.owner(), "alice");
    let ended = client.release_all().await;
    assert!(
        ended.is_empty(),
        "the client remembered a lock it had removed: {ended:?}"
    );
}

/// A guard's release with a payload, dropped once its request left (a shutdown deadline): the
/// guard's drop sent the release again, and that copy kept the old payload; landing first, it
/// released the lock, and the release with the payload was refused (the lock already released):
/// the next holder found the old payload. The drop now leaves the lock to the release on its way.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_guards_release_with_a_payload_dropped_on_its_way_keeps_the_payload() {
    let _ = lock_client().await;
    let proxy = Proxy::start(&endpoint()).await;
    let client = ddb_lock_test_kit::keeping_client_at(&proxy.endpoint());
    let resource = unique("guard-release-payload-dropped");
    let guard = client
        .lock(&resource, &guard_options("alice", 60_000, 20_000))
        .await
        .unwrap();
    // A keeping client acquires with an UpdateItem too.
    let sent = proxy.counts("UpdateItem").requests;
    let mut held = proxy.delay_next_request("UpdateItem");
    tokio::select! {
        answer = guard.release_and_replace_data(Some(b"next".to_vec())) => {
            panic!("answered with its request held back: {answer:?}")
        }
        () = held.captured() => {}
    }
    assert!(held.deliver().await, "the release reached the endpoint");
    client.flush().await;
    let item = raw_item(&resource).await.expect("a kept item");
    assert_eq!(
        item.get("Data"),
        Some(&aws_sdk_dynamodb::types::AttributeValue::B(
            b"next".to_vec().into()
        )),
        "{item:?}"
    );
    assert_eq!(
        proxy.counts("UpdateItem").requests,
        sent + 1,
        "released once"
    );
}

/// A guard of alice's idempotent acquisition of a fresh resource (named after `prefix`) through a
/// proxy, and `with_lock` of the same acquisition (its twin) in a task, whose work returns 7 and
/// whose release's DeleteItem the proxy holds: the guard, stopped by that release, says
/// released. The proxy, the client, the resource, the guard, the held release and the task.
async fn twin_beside_with_lock(
    prefix: &str,
) -> (
    Proxy,
    LockClient,
    String,
    ddb_lock::LockGuard,
    ddb_lock_test_kit::proxy::HeldRequest,
    tokio::task::JoinHandle<Result<u32, Error>>,
) {
    let _ = lock_client().await;
    let proxy = Proxy::start(&endpoint()).await;
    let client = client_through(&proxy, None);
    let resource = unique(prefix);
    let opts = guard_options("alice", 60_000, 20_000).idempotent(true);
    let twin = client.lock(&resource, &opts).await.unwrap();
    let mut held = proxy.delay_next_request("DeleteItem");
    let job = tokio::spawn({
        let (client, resource, opts) = (client.clone(), resource.clone(), opts.clone());
        async move {
            client
                .with_lock(&resource, &opts, |_| async { Ok::<_, Error>(7) })
                .await
        }
    });
    held.captured().await;
    assert_eq!(twin.lost().await, LockLost::Released);
    (proxy, client, resource, twin, held, job)
}

/// A guard stopped by its twin's release (two guards of one idempotent acquisition), dropped
/// while that release is on its way: it sent a release of its own, which landed first, and
/// `with_lock`, whose release was then refused, answered that its work had lost its lock.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_twin_guard_dropped_while_with_lock_releases_leaves_the_release_to_it() {
    let (proxy, client, _, twin, held, job) = twin_beside_with_lock("twin-guard-dropped").await;
    drop(twin);
    assert!(held.deliver().await, "the release reached the endpoint");
    assert_eq!(job.await.unwrap().unwrap(), 7);
    client.flush().await;
    assert_eq!(proxy.counts("DeleteItem").requests, 1, "released once");
}

/// The same twin, released rather than dropped (as `with_lock` releases a guard it finds lost):
/// its `release` sent a DeleteItem of its own at once, which landed first, and `with_lock`
/// answered that its work had lost its lock. It is sent after the release on its way, as a
/// resend.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_twin_guard_released_while_with_lock_releases_is_sent_after_it() {
    let (_, client, resource, twin, held, job) = twin_beside_with_lock("twin-guard-released").await;
    let twins_release = tokio::spawn(twin.release());
    assert!(held.deliver().await, "the release reached the endpoint");
    assert_eq!(job.await.unwrap().unwrap(), 7);
    assert_eq!(
        twins_release.await.unwrap().unwrap(),
        ReleaseOutcome::Unconfirmed,
        "the twin's release, sent after the lock was released, is read as a resend"
    );
    assert_eq!(client.status(&resource).await.unwrap(), LockStatus::Free);
}

/// A twin's release while a guard's release with a payload is on its way, on a client that keeps
/// items: sent at once, it landed first and released the lock with the old payload, and the
/// payload was never written.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_twin_guard_released_while_its_twin_releases_with_a_payload_keeps_the_payload() {
    let _ = lock_client().await;
    let proxy = Proxy::start(&endpoint()).await;
    let client = ddb_lock_test_kit::keeping_client_at(&proxy.endpoint());
    let resource = unique("twin-guard-payload");
    let opts = guard_options("alice", 60_000, 20_000).idempotent(true);
    let guard = client.lock(&resource, &opts).await.unwrap();
    let twin = client.lock(&resource, &opts).await.unwrap();
    let mut held = proxy.delay_next_request("UpdateItem");
    let releasing = tokio::spawn(guard.release_and_replace_data(Some(b"next".to_vec())));
    held.captured().await;
    assert_eq!(twin.lost().await, LockLost::Released);
    let twins_release = tokio::spawn(twin.release());
    assert!(held.deliver().await, "the release reached the endpoint");
    assert_eq!(releasing.await.unwrap().unwrap(), ReleaseOutcome::Released);
    assert_eq!(
        twins_release.await.unwrap().unwrap(),
        ReleaseOutcome::Unconfirmed
    );
    let item = raw_item(&resource).await.expect("a kept item");
    assert_eq!(
        item.get("Data"),
        Some(&aws_sdk_dynamodb::types::AttributeValue::B(
            b"next".to_vec().into()
        )),
        "{item:?}"
    );
}
