//! Writes whose first attempt succeeded but whose answer was lost: the SDK retries, and the retry
//! must not turn our own success into contention (acquire), a lost lock (extend) or an ownership
//! mismatch (release); and a kept item's acquisition that arrives again after its release must
//! not take the lock again.

use ddb_lock::{AcquireOptions, Error, ExtendOutcome, ReleaseOutcome};
use ddb_lock_test_kit::proxy::{Faults, Proxy};
use ddb_lock_test_kit::{
    endpoint, hold, lock_client, quickly_retrying_client, raw_item, stored, string_attr, unique,
};
use std::time::Duration;

#[tokio::test]
async fn a_retried_acquire_whose_first_answer_was_lost_is_acquired_not_held() {
    let direct = lock_client().await;
    let resource = unique("lost-answer");
    let proxy = Proxy::start(&endpoint()).await;
    let client = quickly_retrying_client(&proxy.endpoint());

    proxy.drop_next_answer("PutItem");
    let lock = client
        .try_acquire(&resource, &AcquireOptions::new().owner("alice"))
        .await
        .unwrap()
        .expect("the first attempt's write is ours: acquired");

    let puts = proxy.counts("PutItem");
    assert_eq!(
        puts.dropped, 1,
        "the first answer was really lost: {puts:?}"
    );
    assert_eq!(puts.requests, 2, "the SDK retried once: {puts:?}");
    let item = raw_item(&resource).await.unwrap();
    assert_eq!(string_attr(&item, "LockID"), lock.lock_id().to_string());
    assert_eq!(string_attr(&item, "Owner"), "alice");

    // It is really held, and really ours to release.
    let other = direct
        .try_acquire(&resource, &AcquireOptions::new().owner("bob"))
        .await
        .unwrap();
    assert!(other.is_none());
    assert_eq!(
        direct.release(&lock).await.unwrap(),
        ddb_lock::ReleaseOutcome::Released
    );
}

#[tokio::test]
async fn a_retried_extend_whose_first_answer_was_lost_is_extended() {
    let direct = lock_client().await;
    let resource = unique("lost-extend");
    let proxy = Proxy::start(&endpoint()).await;
    let client = quickly_retrying_client(&proxy.endpoint());
    let lock = hold(&direct, &resource, "alice", Duration::from_secs(5)).await;

    proxy.drop_next_answer("UpdateItem");
    let outcome = client.extend(&lock, Duration::from_secs(60)).await.unwrap();

    let updates = proxy.counts("UpdateItem");
    assert_eq!(
        updates.dropped, 1,
        "the first answer was really lost: {updates:?}"
    );
    assert_eq!(updates.requests, 2, "the SDK retried once: {updates:?}");
    let ExtendOutcome::Extended(extended) = outcome else {
        panic!("our own extension was reported as {outcome:?}");
    };
    let item = raw_item(&resource).await.unwrap();
    assert_eq!(
        string_attr(&item, "ExpiresAt"),
        stored(extended.expires_at())
    );
    assert!(extended.expires_at() > lock.expires_at());
}

#[tokio::test]
async fn a_retried_release_whose_first_answer_was_lost_never_reports_a_mismatch() {
    let direct = lock_client().await;
    let resource = unique("lost-release");
    let proxy = Proxy::start(&endpoint()).await;
    let client = quickly_retrying_client(&proxy.endpoint());
    let lock = hold(&direct, &resource, "alice", Duration::from_secs(60)).await;

    // The first DeleteItem is applied; while its answer is withheld, bob takes the free lock.
    let mut answer = proxy.withhold_next_answer("DeleteItem");
    let release = tokio::spawn(async move { client.release(&lock).await });
    answer.applied().await;
    let bobs = hold(&direct, &resource, "bob", Duration::from_secs(60)).await;
    answer.drop_it();
    let outcome = release.await.unwrap().unwrap();

    let deletes = proxy.counts("DeleteItem");
    assert_eq!(deletes.requests, 2, "the SDK retried once: {deletes:?}");
    assert_eq!(
        outcome,
        ReleaseOutcome::Unconfirmed,
        "alice's lock is gone (by her own first attempt); bob's is not hers to be mismatched with"
    );
    let item = raw_item(&resource).await.expect("bob's lock untouched");
    assert_eq!(string_attr(&item, "LockID"), bobs.lock_id().to_string());
}

/// Written first, and seen failing before the fix: when every answer is lost the SDK gives up and
/// the acquire fails, but its first attempt was applied, and the lock stayed held by nobody for
/// its whole lease.
#[tokio::test]
async fn an_acquire_whose_every_answer_is_lost_fails_and_leaves_nothing_held() {
    lock_client().await; // the table exists
    for fencing in [false, true] {
        let resource = unique("every-answer-lost");
        let proxy = Proxy::start(&endpoint()).await;
        let client = quickly_retrying_client(&proxy.endpoint());
        proxy.set_faults(Faults {
            drop_every: 1,
            ..Faults::default()
        });
        let opts = AcquireOptions::new()
            .owner("alice")
            .fencing(fencing)
            .lease(Duration::from_secs(3600));
        let err = client.try_acquire(&resource, &opts).await.unwrap_err();
        assert!(matches!(err, Error::Backend { .. }), "{err:?}");
        let operation = if fencing {
            "TransactWriteItems"
        } else {
            "PutItem"
        };
        assert!(
            proxy.counts(operation).dropped >= 1,
            "an attempt was applied"
        );

        client.flush().await;
        assert!(
            raw_item(&resource).await.is_none(),
            "fenced: {fencing}: what the failed acquire wrote was released"
        );
    }
}

/// A force release whose first attempt was applied and whose answer was lost names the holder it
/// removed, on a client that deletes items and on one that keeps them: its retry, refused by the
/// item gone (or kept without its holder), reported that no live lock was removed, and where
/// items are kept wrote a second version over the kept item.
#[tokio::test]
async fn a_force_release_whose_answer_was_lost_names_the_holder_it_removed() {
    lock_client().await;
    for keep in [false, true] {
        let proxy = Proxy::start(&endpoint()).await;
        let admin = ddb_lock_test_kit::builder(ddb_lock_test_kit::quickly_retrying_dynamodb(
            &proxy.endpoint(),
        ))
        .delete_on_release(!keep)
        .build()
        .unwrap();
        let resource = unique("force-release-lost-answer");
        ddb_lock_test_kit::hold(
            &lock_client().await,
            &resource,
            "victim",
            Duration::from_secs(60),
        )
        .await;
        proxy.drop_next_answer(if keep { "UpdateItem" } else { "DeleteItem" });
        let removed = admin.force_release(&resource).await.unwrap();
        assert_eq!(
            removed.map(|holder| holder.owner).as_deref(),
            Some("victim"),
            "items kept: {keep}"
        );
        assert_eq!(
            admin.status(&resource).await.unwrap(),
            ddb_lock::LockStatus::Free
        );
    }
}

/// A keeping client (`delete_on_release(false)`).
fn keeping_through(proxy: &Proxy) -> ddb_lock::LockClient {
    ddb_lock_test_kit::builder(ddb_lock_test_kit::quickly_retrying_dynamodb(
        &proxy.endpoint(),
    ))
    .delete_on_release(false)
    .build()
    .unwrap()
}

fn data(
    item: &std::collections::HashMap<String, aws_sdk_dynamodb::types::AttributeValue>,
) -> &[u8] {
    match item.get("Data") {
        Some(aws_sdk_dynamodb::types::AttributeValue::B(blob)) => blob.as_ref(),
        other => panic!("no Data blob: {other:?}"),
    }
}

/// A copy of a kept item's acquisition that arrives after the lock was released finds the item
/// free: it took the lock again, for a holder that had gone, and put its payload back over the
/// one the release wrote.
#[tokio::test]
async fn a_late_copy_of_a_kept_acquisition_does_not_take_the_released_lock_again() {
    lock_client().await;
    let proxy = Proxy::start(&endpoint()).await;
    let client = keeping_through(&proxy);
    let resource = unique("kept-acquisition-copy");

    let copy = proxy.duplicate_next_request_containing("UpdateItem", "#owner = :owner");
    let lock = client
        .try_acquire(
            &resource,
            &AcquireOptions::new().owner("alice").data("first"),
        )
        .await
        .unwrap()
        .expect("free");
    let released = client
        .release_and_replace_data(&lock, Some(b"after".to_vec()))
        .await
        .unwrap();
    assert_eq!(released, ReleaseOutcome::Released);

    assert!(copy.deliver().await, "the copy reached the endpoint");

    let item = raw_item(&resource).await.expect("kept");
    assert!(
        !item.contains_key("Owner"),
        "taken again by the copy: {item:?}"
    );
    assert_eq!(data(&item), b"after", "the copy put its payload back");
    assert_eq!(
        client.status(&resource).await.unwrap(),
        ddb_lock::LockStatus::Free
    );
}

/// A kept item's acquisition whose first attempt applied and whose answer was lost, force
/// released before the SDK's resend: the resend is refused by its own write, released since, and
/// the acquisition takes the free lock with its next attempt (it holds what the item says).
#[tokio::test]
async fn a_kept_acquisition_resent_after_its_lock_was_force_released_takes_it_again() {
    lock_client().await;
    let proxy = Proxy::start(&endpoint()).await;
    let client = keeping_through(&proxy);
    let resource = unique("kept-acquisition-resent");

    let mut answer = proxy.withhold_next_answer("UpdateItem");
    let acquire = tokio::spawn({
        let client = client.clone();
        let resource = resource.clone();
        async move {
            client
                .try_acquire(&resource, &AcquireOptions::new().owner("alice"))
                .await
        }
    });
    answer.applied().await;
    let admin = ddb_lock_test_kit::builder(ddb_lock_test_kit::dynamodb_at(&endpoint()))
        .delete_on_release(false)
        .build()
        .unwrap();
    let removed = admin.force_release(&resource).await.unwrap();
    assert_eq!(removed.map(|holder| holder.owner).as_deref(), Some("alice"));
    answer.drop_it();
    let lock = acquire
        .await
        .unwrap()
        .unwrap()
        .expect("the lock was free for the next attempt");

    let item = raw_item(&resource).await.expect("kept");
    assert_eq!(string_attr(&item, "LockID"), lock.lock_id().to_string());
    assert_eq!(string_attr(&item, "Owner"), "alice");
    assert_eq!(
        client.release(&lock).await.unwrap(),
        ReleaseOutcome::Released
    );
}

/// The last reader's release applied, its answer lost: the SDK's resend finds the entry gone, and
/// the item, emptied of every holder, stayed for good (it has no lease, so nothing expires it).
#[tokio::test]
async fn a_last_readers_release_whose_answer_was_lost_leaves_no_item() {
    lock_client().await;
    let proxy = Proxy::start(&endpoint()).await;
    let client = quickly_retrying_client(&proxy.endpoint());
    let resource = unique("reader-release-lost-answer");
    let reader = client
        .try_acquire(
            &resource,
            &AcquireOptions::new()
                .owner("reader")
                .mode(ddb_lock::Mode::Shared),
        )
        .await
        .unwrap()
        .expect("free");
    proxy.drop_next_answer("UpdateItem");
    let outcome = client.release(&reader).await.unwrap();
    assert_eq!(proxy.counts("UpdateItem").dropped, 1, "{outcome:?}");
    assert!(
        raw_item(&resource).await.is_none(),
        "the emptied item was left"
    );
}

/// A release whose first attempt was answered with a definite refusal to retry (a transaction
/// conflict, throttling: not applied), and whose retry found the lock taken by someone else, is
/// no ambiguous retry: it says `NotOwner`, never `NotFound` (which hid the new holder from
/// `with_lock`).
#[tokio::test]
async fn a_release_retried_after_a_conflict_names_the_new_holder() {
    let direct = lock_client().await;
    let resource = unique("release-after-conflict");
    let proxy = Proxy::start(&endpoint()).await;
    let client = quickly_retrying_client(&proxy.endpoint());
    let lock = hold(&client, &resource, "alice", Duration::from_secs(60)).await;
    direct.force_release(&resource).await.unwrap();
    hold(&direct, &resource, "bob", Duration::from_secs(60)).await;

    for refusal in ["TransactionConflictException", "ThrottlingException"] {
        proxy.refuse_next("DeleteItem", refusal);
        let outcome = client.release(&lock).await.unwrap();
        assert!(
            matches!(&outcome, ReleaseOutcome::NotOwner { holder } if holder.owner == "bob"),
            "{refusal}: {outcome:?}"
        );
    }
}

/// A lock item's creation whose answer was lost: the SDK's retry finds the item its first attempt
/// wrote, which this call created (it answered false, and an operator skipped what follows a
/// creation).
#[tokio::test]
async fn a_lock_item_creation_whose_answer_was_lost_says_created() {
    lock_client().await;
    let resource = unique("created-lost-answer");
    let proxy = Proxy::start(&endpoint()).await;
    let client = quickly_retrying_client(&proxy.endpoint());
    proxy.drop_next_answer("PutItem");
    assert!(client
        .create_lock_item(&resource, Some(b"cfg"))
        .await
        .unwrap());
    assert_eq!(proxy.counts("PutItem").dropped, 1);
    assert!(
        !client.create_lock_item(&resource, None).await.unwrap(),
        "there already"
    );
}

/// A release applied whose answer came cut (a 200 whose body never arrived whole): the SDK sends
/// it again, and the retry finds the next holder. The first attempt was applied: `NotFound`,
/// never `NotOwner` (a cut success is no refusal, and the retry after it stays ambiguous).
#[tokio::test]
async fn a_release_whose_answer_came_cut_never_names_the_next_holder() {
    let direct = lock_client().await;
    let resource = unique("release-cut-answer");
    let proxy = Proxy::start(&endpoint()).await;
    let client = quickly_retrying_client(&proxy.endpoint());
    let lock = hold(&client, &resource, "alice", Duration::from_secs(60)).await;
    let mut answer = proxy.withhold_next_answer("DeleteItem");
    let releasing = {
        let client = client.clone();
        tokio::spawn(async move { client.release(&lock).await })
    };
    answer.applied().await;
    hold(&direct, &resource, "bob", Duration::from_secs(60)).await;
    answer.truncate();
    let outcome = releasing.await.unwrap().unwrap();
    assert_eq!(outcome, ReleaseOutcome::Unconfirmed);
}

/// A last reader's release that emptied the item, its answer lost and every resend failed
/// (`Err`), released again by its caller once the network is back: the second release is a
/// plain first send, refused; it deletes the emptied item all the same, which nothing else would
/// ever delete (it has no lease, and a plain refusal left it; found by review).
#[tokio::test]
async fn a_last_readers_release_sent_again_after_a_failed_one_leaves_no_item() {
    lock_client().await;
    let proxy = Proxy::start(&endpoint()).await;
    let client = quickly_retrying_client(&proxy.endpoint());
    let resource = unique("reader-release-failed");
    let reader = client
        .try_acquire(
            &resource,
            &AcquireOptions::new()
                .owner("reader")
                .mode(ddb_lock::Mode::Shared),
        )
        .await
        .unwrap()
        .expect("free");
    let mut answer = proxy.withhold_next_answer("UpdateItem");
    let release = tokio::spawn({
        let (client, reader) = (client.clone(), reader.clone());
        async move { client.release(&reader).await }
    });
    answer.applied().await;
    proxy.cut_off();
    answer.drop_it();
    let failed = release.await.unwrap();
    assert!(failed.is_err(), "{failed:?}");
    assert!(raw_item(&resource).await.is_some(), "emptied, not deleted");

    proxy.set_faults(Faults::default());
    let again = client.release(&reader).await.unwrap();
    assert!(
        matches!(
            again,
            ReleaseOutcome::NotFound | ReleaseOutcome::Unconfirmed
        ),
        "{again:?}"
    );
    assert!(
        raw_item(&resource).await.is_none(),
        "the emptied item was left"
    );
}
