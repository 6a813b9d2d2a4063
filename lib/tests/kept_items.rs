//! Keeping the lock item on release (`delete_on_release(false)`), replacing its payload on acquire,
//! extend and release, `acquire_only_if_exists` with `create_lock_item`: each against the local
//! endpoint, with the requests counted by a proxy where the cost is part of the promise.

use aws_sdk_dynamodb::types::AttributeValue;
use ddb_lock::{
    AcquireOptions, Error, ExtendOutcome, InvalidInput, LockClient, LockStatus, ReleaseOutcome,
    TakeoverRule,
};
use ddb_lock_test_kit::proxy::Proxy;
use ddb_lock_test_kit::{
    builder, dynamodb_at, endpoint, lock_client, quickly_retrying_dynamodb, raw_item, stored,
    string_attr, unique,
};
use std::time::Duration;

/// A client that keeps items, talking to `endpoint`.
fn keeping(endpoint: &str) -> LockClient {
    builder(dynamodb_at(endpoint))
        .delete_on_release(false)
        .build()
        .expect("valid settings")
}

fn data(item: &std::collections::HashMap<String, AttributeValue>) -> Option<Vec<u8>> {
    match item.get("Data") {
        Some(AttributeValue::B(blob)) => Some(blob.clone().into_inner()),
        None => None,
        other => panic!("Data is {other:?}"),
    }
}

fn attributes(item: &std::collections::HashMap<String, AttributeValue>) -> Vec<&str> {
    let mut names: Vec<&str> = item.keys().map(String::as_str).collect();
    names.sort_unstable();
    names
}

#[tokio::test]
async fn a_kept_release_clears_the_holder_keeps_the_payload_and_each_costs_one_request() {
    lock_client().await; // the table
    let proxy = Proxy::start(&endpoint()).await;
    let client = keeping(&proxy.endpoint());
    let resource = unique("kept/one-request");

    let lock = client
        .acquire(
            &resource,
            &AcquireOptions::new().owner("first").data("row 10"),
        )
        .await
        .unwrap();
    assert_eq!(lock.data(), Some(&b"row 10"[..]));
    assert_eq!(
        client.release(&lock).await.unwrap(),
        ReleaseOutcome::Released
    );
    assert_eq!(proxy.counts("UpdateItem").requests, 2, "acquire + release");
    assert_eq!(proxy.total_requests(), 2);

    let kept = raw_item(&resource).await.expect("the item is kept");
    assert_eq!(
        attributes(&kept),
        [
            "Data",
            "LockID",
            "PK",
            "ReleasedAt",
            "ReleasedBy",
            "SK",
            "Version"
        ],
        "holder, lease and TTL removed, the release recorded: {kept:?}"
    );
    assert_eq!(string_attr(&kept, "ReleasedBy"), "first");
    assert_eq!(data(&kept).as_deref(), Some(&b"row 10"[..]));
    assert_eq!(client.status(&resource).await.unwrap(), LockStatus::Free);

    // The next holder takes the kept item in one request and reads what the last one left.
    let next = client
        .acquire(&resource, &AcquireOptions::new().owner("second"))
        .await
        .unwrap();
    assert_eq!(next.data(), Some(&b"row 10"[..]));
    assert_eq!(proxy.counts("UpdateItem").requests, 3);
    match client.status(&resource).await.unwrap() {
        LockStatus::Held { holder, .. } => {
            assert_eq!(holder.owner, "second");
            assert_eq!(holder.data.as_deref(), Some(&b"row 10"[..]));
        }
        other => panic!("held by second: {other:?}"),
    }
    // The first holder's credential is spent: its release touches nothing.
    assert_eq!(
        client.release(&lock).await.unwrap(),
        ReleaseOutcome::NotOwner {
            holder: match client.status(&resource).await.unwrap() {
                LockStatus::Held { holder, .. } => holder,
                other => panic!("held by second: {other:?}"),
            }
        }
    );
    client.release(&next).await.unwrap();
}

#[tokio::test]
async fn the_payload_is_replaced_on_acquire_on_extend_and_on_release() {
    lock_client().await;
    let client = keeping(&endpoint());
    let resource = unique("kept/replace");
    let opts = AcquireOptions::new();

    let lock = client
        .acquire(&resource, &opts.clone().data("a"))
        .await
        .unwrap();
    let released = client.release_and_replace_data(&lock, Some(b"b".to_vec()));
    assert_eq!(released.await.unwrap(), ReleaseOutcome::Released);

    let lock = client.acquire(&resource, &opts).await.unwrap();
    assert_eq!(lock.data(), Some(&b"b"[..]), "kept through the release");
    let extended = client
        .extend_and_replace_data(&lock, Duration::from_secs(30), Some(b"c".to_vec()))
        .await
        .unwrap();
    let ExtendOutcome::Extended(extended) = extended else {
        panic!("{extended:?}")
    };
    assert_eq!(extended.data(), Some(&b"c"[..]));
    let released = client.release_and_replace_data(&lock, None).await.unwrap();
    assert_eq!(released, ReleaseOutcome::Released);
    assert_eq!(data(&raw_item(&resource).await.unwrap()), None, "removed");

    let lock = client.acquire(&resource, &opts).await.unwrap();
    assert_eq!(lock.data(), None);
    client
        .release_and_replace_data(&lock, Some(b"d".to_vec()))
        .await
        .unwrap();
    let lock = client
        .acquire(&resource, &opts.clone().data("e"))
        .await
        .unwrap();
    assert_eq!(
        lock.data(),
        Some(&b"e"[..]),
        "an acquisition's payload replaces the kept one"
    );
    client.release(&lock).await.unwrap();
    assert_eq!(
        data(&raw_item(&resource).await.unwrap()).as_deref(),
        Some(&b"e"[..])
    );
}

#[tokio::test]
async fn a_deleting_client_refuses_data_on_release_and_the_lock_stays_held() {
    let client = lock_client().await;
    let resource = unique("kept/refused");
    let lock = client
        .acquire(&resource, &AcquireOptions::new())
        .await
        .unwrap();
    let refused = client
        .release_and_replace_data(&lock, Some(b"x".to_vec()))
        .await;
    assert!(
        matches!(refused, Err(Error::InvalidInput(InvalidInput::DataNotKept))),
        "{refused:?}"
    );
    assert!(matches!(
        client.status(&resource).await.unwrap(),
        LockStatus::Held { .. }
    ));
    client.release(&lock).await.unwrap();
    assert!(
        raw_item(&resource).await.is_none(),
        "a deleting release deletes"
    );
}

#[tokio::test]
async fn keeping_and_deleting_clients_share_a_table() {
    let deleting = lock_client().await;
    let keeping = keeping(&endpoint());
    let resource = unique("kept/shared");
    let opts = AcquireOptions::new();

    let lock = keeping
        .acquire(&resource, &opts.clone().data("kept"))
        .await
        .unwrap();
    keeping.release(&lock).await.unwrap();
    // A deleting client takes a kept item in its one PutItem (which replaces the payload)…
    let lock = deleting
        .try_acquire(&resource, &opts)
        .await
        .unwrap()
        .expect("free");
    assert_eq!(lock.data(), None);
    assert!(
        keeping
            .try_acquire(&resource, &opts)
            .await
            .unwrap()
            .is_none(),
        "held"
    );
    // …and deletes it on release.
    deleting.release(&lock).await.unwrap();
    assert!(raw_item(&resource).await.is_none());
}

#[tokio::test]
async fn only_if_exists_takes_a_lock_only_on_an_item_that_exists() {
    lock_client().await;
    let proxy = Proxy::start(&endpoint()).await;
    let client = keeping(&proxy.endpoint());
    let resource = unique("kept/only-if-exists");
    let only = AcquireOptions::new()
        .only_if_exists(true)
        .timeout(Duration::from_secs(30));

    // No item: refused at once, one request, nothing written.
    let missing = client.acquire(&resource, &only).await;
    match missing {
        Err(Error::NoLockItem { key, .. }) => assert!(key.contains(&resource), "{key}"),
        other => panic!("{other:?}"),
    }
    assert_eq!(proxy.total_requests(), 1);
    assert!(raw_item(&resource).await.is_none());

    // An operator creates it, once.
    assert!(client
        .create_lock_item(&resource, Some(b"cfg"))
        .await
        .unwrap());
    assert!(!client
        .create_lock_item(&resource, Some(b"other"))
        .await
        .unwrap());
    let lock = client.acquire(&resource, &only).await.unwrap();
    assert_eq!(lock.data(), Some(&b"cfg"[..]));
    assert!(
        !client.create_lock_item(&resource, None).await.unwrap(),
        "a held lock is left alone"
    );
    let other = client
        .try_acquire(&resource, &only.clone().owner("other"))
        .await
        .unwrap();
    assert!(other.is_none(), "held, not missing");
    client.release(&lock).await.unwrap();
    let again = client.acquire(&resource, &only).await.unwrap();
    assert_eq!(again.data(), Some(&b"cfg"[..]));
    client.release(&again).await.unwrap();

    // A deleting client's release deletes the item: the next such acquisition finds none.
    let deleting = lock_client().await;
    let lock = deleting.acquire(&resource, &only).await.unwrap();
    deleting.release(&lock).await.unwrap();
    let gone = deleting.acquire(&resource, &only).await;
    assert!(matches!(gone, Err(Error::NoLockItem { .. })), "{gone:?}");
}

#[tokio::test]
async fn a_kept_item_is_free_at_once_under_the_observed_lease_rule() {
    lock_client().await;
    let client = builder(dynamodb_at(&endpoint()))
        .delete_on_release(false)
        .takeover(TakeoverRule::ObservedLease)
        .build()
        .unwrap();
    let resource = unique("kept/observed");
    let opts = AcquireOptions::new().lease(Duration::from_secs(60));
    for round in 0..3 {
        let (lock, stats) = client.acquire_with_stats(&resource, &opts).await;
        let lock = lock.unwrap();
        assert_eq!(stats.attempts, 1, "round {round}: no lease to wait out");
        client.release(&lock).await.unwrap();
    }
}

#[tokio::test]
async fn fenced_acquisitions_of_a_kept_item_raise_the_token_and_keep_the_payload() {
    lock_client().await;
    let client = keeping(&endpoint());
    let resource = unique("kept/fenced");
    let fenced = AcquireOptions::new().fencing(true);

    let first = client
        .acquire(&resource, &fenced.clone().data("p"))
        .await
        .unwrap();
    client.release(&first).await.unwrap();
    let second = client.acquire(&resource, &fenced).await.unwrap();
    assert!(second.fencing_token() > first.fencing_token());
    match client.status(&resource).await.unwrap() {
        LockStatus::Held { holder, .. } => {
            assert_eq!(holder.data.as_deref(), Some(&b"p"[..]));
            assert_eq!(holder.fencing_token, second.fencing_token());
        }
        other => panic!("held: {other:?}"),
    }
    client.release(&second).await.unwrap();
    // An unfenced acquisition removes the earlier holder's token from the lock item.
    let plain = client
        .acquire(&resource, &AcquireOptions::new())
        .await
        .unwrap();
    assert_eq!(plain.fencing_token(), None);
    match client.status(&resource).await.unwrap() {
        LockStatus::Held { holder, .. } => assert_eq!(holder.fencing_token, None),
        other => panic!("held: {other:?}"),
    }
    client.release(&plain).await.unwrap();
}

#[tokio::test]
async fn a_kept_force_release_keeps_the_payload_and_spends_the_holders_credential() {
    lock_client().await;
    let client = keeping(&endpoint());
    let resource = unique("kept/force");
    let lock = client
        .acquire(
            &resource,
            &AcquireOptions::new().owner("stuck").data("state"),
        )
        .await
        .unwrap();
    let removed = client.force_release(&resource).await.unwrap();
    assert_eq!(removed.map(|holder| holder.owner).as_deref(), Some("stuck"));
    assert_eq!(client.status(&resource).await.unwrap(), LockStatus::Free);
    assert_eq!(
        data(&raw_item(&resource).await.unwrap()).as_deref(),
        Some(&b"state"[..])
    );
    assert_eq!(
        client.extend(&lock, Duration::from_secs(30)).await.unwrap(),
        ExtendOutcome::NotFound
    );
    // The item records whose lock the force release ended: the holder's own release learns it.
    assert_eq!(
        string_attr(&raw_item(&resource).await.unwrap(), "ReleasedBy"),
        "stuck"
    );
    assert!(matches!(
        client.release(&lock).await.unwrap(),
        ReleaseOutcome::AlreadyReleased { .. }
    ));
    assert_eq!(
        client.force_release(&resource).await.unwrap(),
        None,
        "nothing held"
    );
    assert_eq!(
        string_attr(&raw_item(&resource).await.unwrap(), "ReleasedBy"),
        "stuck",
        "a force release of a released item leaves its record's owner"
    );
}

/// A kept release whose answer is lost is retried by the SDK; the retry finds the item cleared by
/// its own first attempt (the version it wrote) and says `Released`, and the payload stays.
#[tokio::test]
async fn a_kept_release_retried_after_a_lost_answer_is_released_and_keeps_the_payload() {
    lock_client().await;
    let proxy = Proxy::start(&endpoint()).await;
    let client = builder(quickly_retrying_dynamodb(&proxy.endpoint()))
        .delete_on_release(false)
        .build()
        .unwrap();
    let resource = unique("kept/lost-answer");
    let lock = client
        .acquire(&resource, &AcquireOptions::new().data("keep me"))
        .await
        .unwrap();
    proxy.drop_next_answer("UpdateItem");
    assert_eq!(
        client.release(&lock).await.unwrap(),
        ReleaseOutcome::Released
    );
    assert_eq!(proxy.counts("UpdateItem").dropped, 1);
    assert_eq!(client.status(&resource).await.unwrap(), LockStatus::Free);
    assert_eq!(
        data(&raw_item(&resource).await.unwrap()).as_deref(),
        Some(&b"keep me"[..])
    );
}

/// An acquisition dropped while its UpdateItem is in flight: the clean-up clears what it may have
/// written, keeping the item and its payload (a deleting clean-up would lose the payload).
#[tokio::test]
async fn a_dropped_acquisition_of_a_kept_item_is_cleared_not_deleted() {
    lock_client().await;
    let proxy = Proxy::start(&endpoint()).await;
    let client = keeping(&proxy.endpoint());
    let resource = unique("kept/dropped");
    assert!(client
        .create_lock_item(&resource, Some(b"ledger"))
        .await
        .unwrap());

    let mut withheld = proxy.withhold_next_answer("UpdateItem");
    let opts = AcquireOptions::new();
    let acquire = client.acquire(&resource, &opts);
    tokio::select! {
        outcome = acquire => panic!("answered despite the withheld answer: {outcome:?}"),
        () = withheld.applied() => {} // applied by the endpoint; the caller gives up here
    }
    withheld.drop_it();
    client.flush().await;
    let item = raw_item(&resource).await.expect("kept");
    assert!(!item.contains_key("Owner"), "cleared: {item:?}");
    assert_eq!(data(&item).as_deref(), Some(&b"ledger"[..]));
    assert_eq!(client.status(&resource).await.unwrap(), LockStatus::Free);
}

#[tokio::test]
async fn a_release_of_a_lock_released_already_says_so_by_id_and_by_owner() {
    lock_client().await;
    let client = keeping(&endpoint());
    let resource = unique("kept/twice");
    let opts = AcquireOptions::new().owner("alice");
    let lock = client.acquire(&resource, &opts).await.unwrap();
    assert_eq!(
        client.release(&lock).await.unwrap(),
        ReleaseOutcome::Released
    );
    let released_at = string_attr(&raw_item(&resource).await.unwrap(), "ReleasedAt").to_owned();

    let again = client.release(&lock).await.unwrap();
    assert!(
        matches!(again, ReleaseOutcome::AlreadyReleased { released_at: at } if stored(at) == released_at),
        "{again:?}"
    );
    assert!(matches!(
        client.release_owned(&resource, "alice").await.unwrap(),
        ReleaseOutcome::AlreadyReleased { .. }
    ));
    // Another owner's release, or a release of another acquisition, is no release of theirs.
    assert_eq!(
        client.release_owned(&resource, "bob").await.unwrap(),
        ReleaseOutcome::NotFound
    );
    let bobs = client
        .acquire(&resource, &AcquireOptions::new().owner("bob"))
        .await
        .unwrap();
    assert!(matches!(
        client.release(&lock).await.unwrap(),
        ReleaseOutcome::NotOwner { .. }
    ));
    client.release(&bobs).await.unwrap();
    assert_eq!(
        client.release(&lock).await.unwrap(),
        ReleaseOutcome::NotFound,
        "the item records bob's release now"
    );
    assert!(matches!(
        client.release(&bobs).await.unwrap(),
        ReleaseOutcome::AlreadyReleased { .. }
    ));
    // The next acquisition clears the record.
    let next = client.acquire(&resource, &opts).await.unwrap();
    let held = raw_item(&resource).await.unwrap();
    assert!(
        !held.contains_key("ReleasedBy") && !held.contains_key("ReleasedAt"),
        "{held:?}"
    );
    client.release(&next).await.unwrap();
}

#[tokio::test]
async fn released_items_kept_for_a_while_get_the_ttl_that_ends_them() {
    lock_client().await;
    let client = builder(dynamodb_at(&endpoint()))
        .keep_released_for(Duration::from_secs(600))
        .build()
        .unwrap();
    let resource = unique("kept/for-a-while");
    let lock = client
        .acquire(&resource, &AcquireOptions::new().owner("alice"))
        .await
        .unwrap();
    client.release(&lock).await.unwrap();

    let item = raw_item(&resource).await.expect("kept");
    let released_at = chrono::DateTime::parse_from_rfc3339(string_attr(&item, "ReleasedAt"))
        .unwrap()
        .timestamp();
    let ttl: i64 = match item.get("TTL") {
        Some(AttributeValue::N(n)) => n.parse().unwrap(),
        other => panic!("TTL is {other:?}"),
    };
    assert!(
        (released_at + 600..=released_at + 601).contains(&ttl),
        "TTL {ttl} is not ten minutes after the release at {released_at}"
    );
    assert!(matches!(
        client.release(&lock).await.unwrap(),
        ReleaseOutcome::AlreadyReleased { .. }
    ));
    // A client that deletes takes the kept item, and deletes it on release.
    let deleting = builder(dynamodb_at(&endpoint())).build().unwrap();
    let next = deleting
        .acquire(&resource, &AcquireOptions::new())
        .await
        .unwrap();
    deleting.release(&next).await.unwrap();
    assert!(raw_item(&resource).await.is_none());
}

#[tokio::test]
async fn keeping_released_items_for_a_while_needs_a_ttl_and_at_least_a_second() {
    let without_ttl = builder(dynamodb_at(&endpoint()))
        .schema(ddb_lock::TableSchema::new().without_ttl())
        .keep_released_for(Duration::from_secs(60))
        .build();
    assert!(
        matches!(
            without_ttl,
            Err(Error::InvalidInput(InvalidInput::NeedsTtl {
                field: "keep_released_for"
            }))
        ),
        "{without_ttl:?}"
    );
    let too_short = builder(dynamodb_at(&endpoint()))
        .keep_released_for(Duration::from_millis(500))
        .build();
    assert!(
        matches!(&too_short, Err(Error::InvalidInput(invalid)) if invalid.field() == "keep_released_for"),
        "{too_short:?}"
    );
    // delete_on_release after it replaces it.
    assert!(builder(dynamodb_at(&endpoint()))
        .schema(ddb_lock::TableSchema::new().without_ttl())
        .keep_released_for(Duration::from_secs(60))
        .delete_on_release(true)
        .build()
        .is_ok());
}

/// A force release by a client that keeps items removes the shared and intention holders too, as
/// every force release does: it cleared the exclusive holder only, and the readers stayed in an
/// item whose TTL (where released items are kept for a while) then deleted it under them.
#[tokio::test]
async fn a_kept_force_release_removes_readers_and_intentions_too() {
    lock_client().await;
    let keeper = builder(dynamodb_at(&endpoint()))
        .delete_on_release(false)
        .keep_released_for(Duration::from_secs(60))
        .build()
        .unwrap();
    let resource = unique("kept-force-release-readers");
    let readers = lock_client().await;
    for (owner, mode) in [
        ("r1", ddb_lock::Mode::Shared),
        ("r2", ddb_lock::Mode::Shared),
        ("i1", ddb_lock::Mode::IntentShared),
    ] {
        readers
            .try_acquire(&resource, &AcquireOptions::new().owner(owner).mode(mode))
            .await
            .unwrap()
            .expect("readers coexist");
    }
    let removed = keeper.force_release(&resource).await.unwrap();
    assert!(
        removed.is_none(),
        "no exclusive holder to name: {removed:?}"
    );
    let item = raw_item(&resource).await.expect("kept");
    assert!(
        !attributes(&item)
            .iter()
            .any(|name| ["Shared", "IntentShared"].contains(name) || name.starts_with("Shared:")),
        "readers left in the kept item: {:?}",
        attributes(&item)
    );
    assert_eq!(keeper.status(&resource).await.unwrap(), LockStatus::Free);
    let writer = keeper
        .try_acquire(&resource, &AcquireOptions::new().owner("w"))
        .await
        .unwrap()
        .expect("free for a writer");
    keeper.release(&writer).await.unwrap();
}
