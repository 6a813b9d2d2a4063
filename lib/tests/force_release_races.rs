//! A force release through a client racing that client's own guards and releases of the lock it
//! removes: a guard's release says what the force release did (`Unconfirmed`, never a loss, where
//! it removed the lock), whatever order the requests land in and whichever answers are lost.

use ddb_lock::{AcquireOptions, LockLost, ReleaseOutcome};
use ddb_lock_test_kit::proxy::Proxy;
use ddb_lock_test_kit::{client_through, endpoint, guard_options, lock_client, raw_item, unique};
use std::time::Duration;

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
    let mut deleted = proxy.withhold_next_answer("DeleteItem");
    let forcing = tokio::spawn({
        let (client, resource) = (client.clone(), resource.clone());
        async move { client.force_release(&resource).await }
    });
    read.captured().await;
    let guard = client
        .lock(&resource, &guard_options("alice", 60_000, 20_000))
        .await
        .unwrap();
    assert!(read.deliver().await, "the read reached the endpoint");
    deleted.applied().await;
    assert_eq!(guard.lost().await, LockLost::Released);
    let releasing = tokio::spawn(guard.release());
    // (Past the wait's bound, the guard's own request is sent while the force release is still
    // unanswered.)
    proxy
        .wait_for("DeleteItem", |counts| counts.answered >= 1)
        .await;
    deleted.deliver();
    assert!(
        forcing.await.unwrap().unwrap().is_some(),
        "alice's lock removed"
    );
    assert_eq!(
        releasing.await.unwrap().unwrap(),
        ReleaseOutcome::Unconfirmed
    );
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
    let forcing = tokio::spawn({
        let (client, resource) = (client.clone(), resource.clone());
        async move { client.force_release(&resource).await }
    });
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
    let client = ddb_lock_test_kit::builder(ddb_lock_test_kit::dynamodb_at(&proxy.endpoint()))
        .delete_on_release(false)
        .build()
        .unwrap();
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
