//! A force release through a client racing that client's own guards and releases of the lock it
//! removes: a guard's release says what the force release did (`Unconfirmed`, never a loss, where
//! it removed the lock), whatever order the requests land in and whichever answers are lost.

use ddb_lock::{AcquireOptions, LockLost, ReleaseOutcome};
use ddb_lock_test_kit::proxy::{Proxy, WithheldAnswer};
use ddb_lock_test_kit::{client_through, endpoint, guard_options, lock_client, raw_item, unique};
use std::time::Duration;

/// Releases `guard` while `forcing`, a force release through its client, has its delete
/// (`deleted`) applied and unanswered, then lets that answer through: the guard's release (past
/// its wait for the force release, sent while that one is still unanswered), and the force
/// release's outcome.
async fn guard_released_while_the_force_release_is_unanswered(
    proxy: &Proxy,
    mut deleted: WithheldAnswer,
    forcing: Forcing,
    guard: ddb_lock::LockGuard,
) -> (ReleaseOutcome, Option<ddb_lock::Holder>) {
    deleted.applied().await;
    assert_eq!(guard.lost().await, LockLost::Released);
    let releasing = tokio::spawn(guard.release());
    proxy
        .wait_for("DeleteItem", |counts| counts.answered >= 1)
        .await;
    deleted.deliver();
    let removed = forcing.await.unwrap().unwrap();
    (releasing.await.unwrap().unwrap(), removed)
}

/// A force release in a task.
type Forcing = tokio::task::JoinHandle<Result<Option<ddb_lock::Holder>, ddb_lock::Error>>;

/// A force release of `resource` through `client`, in a task.
fn force_release(client: &ddb_lock::LockClient, resource: &str) -> Forcing {
    let (client, resource) = (client.clone(), resource.to_owned());
    tokio::spawn(async move { client.force_release(&resource).await })
}

/// A guard's release while a force release through its client is unanswered (its delete applied,
/// the answer held in the network): sent at once, it found nothing and said `NotFound`, a loss,
/// for a lock its own client removed. It waits for the force release (here past the wait's bound,
/// so its own request is sent while the force release is still unanswered) and reads what it
/// finds as a resend.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_guards_release_while_its_clients_force_release_is_unanswered_is_a_resend() {
    let _ = lock_client().await;
    let proxy = Proxy::start(&endpoint()).await;
    let client = client_through(&proxy, None);
    let resource = unique("force-release-unanswered");
    let guard = client
        .lock(&resource, &guard_options("alice", 60_000, 20_000))
        .await
        .unwrap();
    let deleted = proxy.withhold_next_answer("DeleteItem");
    let forcing = force_release(&client, &resource);
    let (released, removed) =
        guard_released_while_the_force_release_is_unanswered(&proxy, deleted, forcing, guard).await;
    assert!(removed.is_some(), "alice's lock removed");
    assert_eq!(released, ReleaseOutcome::Unconfirmed);
}

/// A lock taken through a client while its force release reads the item, which the force release
/// then removes: its guard's release was no resend of it, and said `NotFound`, a loss, for a lock
/// its own client removed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_guards_release_after_a_force_release_that_removed_it_mid_read_is_a_resend() {
    let _ = lock_client().await;
    let proxy = Proxy::start(&endpoint()).await;
    let client = client_through(&proxy, None);
    let resource = unique("force-release-mid-read");
    let mut read = proxy.delay_next_request("GetItem");
    let forcing = force_release(&client, &resource);
    read.captured().await;
    let guard = client
        .lock(&resource, &guard_options("alice", 60_000, 20_000))
        .await
        .unwrap();
    assert!(read.deliver().await, "the read reached the endpoint");
    assert!(
        forcing.await.unwrap().unwrap().is_some(),
        "alice's lock removed"
    );
    assert_eq!(guard.lost().await, LockLost::Released);
    assert_eq!(guard.release().await.unwrap(), ReleaseOutcome::Unconfirmed);
}

/// A lock taken through a client while its force release reads the item, the force release's
/// delete applied and its answer held in the network when the guard's release is called: the
/// guard's release, on its way only for the locks the force release stopped at its start, was
/// sent at once, found nothing, and said `NotFound` for a lock its own client removed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_guards_release_while_a_force_release_removes_its_lock_taken_mid_read_is_a_resend() {
    let _ = lock_client().await;
    let proxy = Proxy::start(&endpoint()).await;
    let client = client_through(&proxy, None);
    let resource = unique("force-release-mid-read-unanswered");
    let mut read = proxy.delay_next_request("GetItem");
    let deleted = proxy.withhold_next_answer("DeleteItem");
    let forcing = force_release(&client, &resource);
    read.captured().await;
    let guard = client
        .lock(&resource, &guard_options("alice", 60_000, 20_000))
        .await
        .unwrap();
    assert!(read.deliver().await, "the read reached the endpoint");
    let (released, removed) =
        guard_released_while_the_force_release_is_unanswered(&proxy, deleted, forcing, guard).await;
    assert!(removed.is_some(), "alice's lock removed");
    assert_eq!(released, ReleaseOutcome::Unconfirmed);
}

/// A force release whose delete landed and whose answer was lost, the lock taken by bob before
/// the SDK sent the delete again: the resend, refused by bob's lock, was read as "released
/// meanwhile by another", the force release said it removed nothing, and the guard's release of
/// alice's lock said `NotOwner`, a loss, for a lock its own client removed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_force_release_resent_after_a_lost_answer_onto_a_new_holder_removed_the_lock() {
    let _ = lock_client().await;
    let proxy = Proxy::start(&endpoint()).await;
    let client = client_through(&proxy, None);
    let resource = unique("force-release-lost-answer");
    let guard = client
        .lock(&resource, &guard_options("alice", 60_000, 20_000))
        .await
        .unwrap();
    let mut deleted = proxy.withhold_next_answer("DeleteItem");
    let forcing = force_release(&client, &resource);
    deleted.applied().await;
    let bob = lock_client().await;
    bob.try_acquire(
        &resource,
        &AcquireOptions::new()
            .owner("bob")
            .lease(Duration::from_secs(10)),
    )
    .await
    .unwrap()
    .expect("the lock alice's force release freed");
    deleted.drop_it();
    let removed = forcing.await.unwrap().unwrap();
    assert_eq!(removed.map(|holder| holder.owner), Some("alice".to_owned()));
    assert_eq!(guard.release().await.unwrap(), ReleaseOutcome::Unconfirmed);
    assert!(raw_item(&resource).await.is_some(), "bob's lock spared");
}

/// A release that replaces a kept item's payload, applied and its answer lost, then a force
/// release through the same client, which writes the cleared item again under a version of its
/// own: the SDK's resend of the release, refused by that version, said released already, as if
/// its payload had not been written. It may have been (here it was): `Unconfirmed`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_payload_release_resent_after_a_force_release_rewrote_it_is_unconfirmed() {
    let _ = lock_client().await;
    let proxy = Proxy::start(&endpoint()).await;
    let client = ddb_lock_test_kit::keeping_client_at(&proxy.endpoint());
    let resource = unique("payload-release-force-rewritten");
    let lock = client
        .try_acquire(
            &resource,
            &AcquireOptions::new()
                .owner("alice")
                .lease(Duration::from_secs(10))
                .data("first"),
        )
        .await
        .unwrap()
        .expect("a free lock");
    let mut released = proxy.withhold_next_answer("UpdateItem");
    let replacing = tokio::spawn({
        let (client, lock) = (client.clone(), lock.clone());
        async move {
            client
                .release_and_replace_data(&lock, Some(b"next".to_vec()))
                .await
        }
    });
    released.applied().await;
    client.force_release(&resource).await.unwrap();
    released.drop_it();
    assert_eq!(
        replacing.await.unwrap().unwrap(),
        ReleaseOutcome::Unconfirmed
    );
    let item = raw_item(&resource).await.unwrap();
    assert_eq!(
        item.get("Data"),
        Some(&aws_sdk_dynamodb::types::AttributeValue::B(
            b"next".to_vec().into()
        )),
        "the payload was written"
    );
}

/// A force release through the holder's own client that fails before its delete (its read
/// failed) removes nothing: the holder's next extension through that client is answered extended,
/// and an idempotent acquisition of the holder is handed the lock back. (Marked as released at
/// the force release's start for good, the extension was taken for one applied after the lock's
/// release started, answered `NotFound`, and the live lock deleted; found by review.)
#[tokio::test]
async fn a_force_release_that_failed_leaves_the_lock_to_its_holder() {
    let _ = lock_client().await;
    let proxy = Proxy::start(&endpoint()).await;
    let client = ddb_lock_test_kit::client_without_retries(&proxy.endpoint());
    let resource = unique("force-release-failed");
    let alice = AcquireOptions::new().owner("alice").idempotent(true);
    let lock = client.try_acquire(&resource, &alice).await.unwrap();
    let lock = lock.expect("a free lock");
    proxy.refuse_next("GetItem", "ValidationException");
    let forced = client.force_release(&resource).await;
    assert!(forced.is_err(), "{forced:?}");

    let extended = client.extend(&lock, Duration::from_secs(30)).await.unwrap();
    assert!(
        matches!(extended, ddb_lock::ExtendOutcome::Extended(_)),
        "{extended:?}"
    );
    let handed_back = client.try_acquire(&resource, &alice).await.unwrap();
    assert_eq!(handed_back.map(|l| l.lock_id()), Some(lock.lock_id()));
    client.flush().await;
    let item = raw_item(&resource).await.expect("the lock stands");
    assert_eq!(
        ddb_lock_test_kit::string_attr(&item, "LockID"),
        lock.lock_id().to_string()
    );
}
