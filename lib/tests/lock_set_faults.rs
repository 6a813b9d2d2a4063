//! Lock sets under faults, against the local endpoint: a set's answer lost or its acquisition
//! dropped mid-request, writes refused by a transaction in progress, a set's release dropped or
//! failed in part, a resend cancelled for reasons not read, a release sent again, a try cancelled
//! by a conflict.

use ddb_lock::{LockClient, LockStatus, Mode, ReleaseOutcome, SetAttempt};
use ddb_lock_test_kit::proxy::Proxy;
use ddb_lock_test_kit::{
    client_at, client_with_attempt_timeout, endpoint, hold, lock_client, quickly_retrying_client,
    raw_item, unique, writer_options,
};
use std::time::Duration;

#[tokio::test]
async fn a_set_whose_answer_was_lost_is_acquired_once() {
    lock_client().await;
    let proxy = Proxy::start(&endpoint()).await;
    let client = quickly_retrying_client(&proxy.endpoint());
    let (a, b) = (unique("set/lost-a"), unique("set/lost-b"));
    proxy.drop_next_answer("TransactWriteItems");
    let set = client
        .acquire_set(
            &[(&a, Mode::Exclusive), (&b, Mode::Shared)],
            &writer_options("s"),
        )
        .await
        .unwrap();
    assert_eq!(proxy.counts("TransactWriteItems").dropped, 1);
    match client.status(&b).await.unwrap() {
        LockStatus::Shared { holders, .. } => {
            assert_eq!(holders.len(), 1, "one shared hold, not two")
        }
        other => panic!("{other:?}"),
    }
    for (_, outcome) in client.release_set(&set).await {
        assert_eq!(outcome.unwrap(), ReleaseOutcome::Released);
    }
    assert!(raw_item(&a).await.is_none() && raw_item(&b).await.is_none());
}

#[tokio::test]
async fn a_set_acquisition_dropped_mid_request_leaves_nothing_held() {
    lock_client().await;
    let proxy = Proxy::start(&endpoint()).await;
    let client = quickly_retrying_client(&proxy.endpoint());
    let (a, b) = (unique("set/dropped-a"), unique("set/dropped-b"));
    let mut answer = proxy.withhold_next_answer("TransactWriteItems");
    let attempt = {
        let (client, a, b) = (client.clone(), a.clone(), b.clone());
        tokio::spawn(async move {
            client
                .try_acquire_set(
                    &[(&a, Mode::Exclusive), (&b, Mode::Shared)],
                    &writer_options("s"),
                )
                .await
        })
    };
    answer.applied().await;
    attempt.abort();
    let _ = attempt.await;
    answer.drop_it();
    client.flush().await;
    assert_eq!(client.status(&a).await.unwrap(), LockStatus::Free);
    assert_eq!(client.status(&b).await.unwrap(), LockStatus::Free);
}

/// A set acquired by a saga's execution, its answer lost and its future dropped, its clean-up's
/// request on its way; meanwhile the same owner's idempotent acquire of one member in another
/// process is handed it back. The clean-up must spare that lock: releasing any version of it, it
/// deleted the lock the other process went on believing it held, and bob took it (found by
/// review).
#[tokio::test]
async fn a_dropped_sets_clean_up_spares_a_member_handed_back_to_another_process() {
    let elsewhere = lock_client().await;
    let proxy = Proxy::start(&endpoint()).await;
    let client = quickly_retrying_client(&proxy.endpoint());
    let (a, b) = (unique("set/handed-back-a"), unique("set/handed-back-b"));
    let execution = writer_options("execution-1");
    let mut answer = proxy.withhold_next_answer("TransactWriteItems");
    let attempt = {
        let (client, a, b, execution) = (client.clone(), a.clone(), b.clone(), execution.clone());
        tokio::spawn(async move {
            client
                .try_acquire_set(&[(&a, Mode::Exclusive), (&b, Mode::Exclusive)], &execution)
                .await
        })
    };
    answer.applied().await;
    let mut clean_up = proxy.delay_next_request_containing("DeleteItem", &a);
    attempt.abort();
    let _ = attempt.await;
    answer.drop_it();
    clean_up.captured().await;
    let handed_back = elsewhere
        .try_acquire(&a, &execution.clone().idempotent(true))
        .await
        .unwrap()
        .expect("the member handed back");
    assert!(
        clean_up.deliver().await,
        "the clean-up reached the endpoint"
    );
    client.flush().await;
    let bob = elsewhere
        .try_acquire(&a, &writer_options("bob"))
        .await
        .unwrap();
    assert!(bob.is_none(), "bob took the lock handed back: {bob:?}");
    elsewhere.release(&handed_back).await.unwrap();
}

/// A single-item write that DynamoDB refuses because a transaction (a lock set's, a path's) is
/// writing the same item is sent again: nothing was written. The SDK does not retry the error,
/// and an acquisition, a shared release, or the clearing of lapsed readers of an item that sets
/// and paths write failed with `Err(Backend)`.
#[tokio::test]
async fn writes_refused_by_a_transaction_in_progress_are_sent_again() {
    lock_client().await;
    let proxy = Proxy::start(&endpoint()).await;
    let client = quickly_retrying_client(&proxy.endpoint());
    let resource = unique("set-conflict");
    proxy.refuse_next("PutItem", "TransactionConflictException");
    let lock = client
        .try_acquire(&resource, &writer_options("alice"))
        .await
        .unwrap()
        .expect("the lock is free");
    assert_eq!(proxy.counts("PutItem").throttled, 1, "refused once");
    proxy.refuse_next("DeleteItem", "TransactionConflictException");
    assert_eq!(
        client.release(&lock).await.unwrap(),
        ReleaseOutcome::Released
    );
    let reader = client
        .try_acquire(&resource, &writer_options("reader").mode(Mode::Shared))
        .await
        .unwrap()
        .expect("free");
    proxy.refuse_next("UpdateItem", "TransactionConflictException");
    assert_eq!(
        client.release(&reader).await.unwrap(),
        ReleaseOutcome::Released
    );
    assert_eq!(client.status(&resource).await.unwrap(), LockStatus::Free);
}

/// `count` new exclusive members named after `name`.
fn exclusive_members(name: &str, count: usize) -> Vec<String> {
    (0..count)
        .map(|i| unique(&format!("set/{name}-{i}")))
        .collect()
}

/// Each of `members` in exclusive mode.
fn exclusively(members: &[String]) -> Vec<(&str, Mode)> {
    members
        .iter()
        .map(|m| (m.as_str(), Mode::Exclusive))
        .collect()
}

/// Fails the test unless every one of `members` is free.
async fn all_free(client: &LockClient, members: &[String]) {
    for member in members {
        assert_eq!(
            client.status(member).await.unwrap(),
            LockStatus::Free,
            "{member} stayed held"
        );
    }
}

/// A set's release dropped at its first await (a timeout, a `select!`) releases every member all
/// the same: the members whose requests were not yet sent stayed held for their lease.
#[tokio::test]
async fn a_set_release_dropped_at_once_releases_every_member() {
    let client = lock_client().await;
    let members = exclusive_members("dropped", 4);
    let set = client
        .acquire_set(&exclusively(&members), &writer_options("s"))
        .await
        .unwrap();
    // Polled once, then dropped.
    let cancelled = tokio::time::timeout(Duration::ZERO, client.release_set(&set)).await;
    assert!(cancelled.is_err(), "a set's release finished in one poll");
    client.flush().await;
    all_free(&client, &members).await;
}

/// A set's release dropped at once, one member's DeleteItem failed by DynamoDB (throttled past
/// the SDK's retries): the member release, sent from the client's background, is tried again as
/// a dropped guard's is (tried once, it left the member held for its lease).
#[tokio::test]
async fn a_dropped_set_release_tries_a_failed_member_again() {
    lock_client().await;
    let proxy = ddb_lock_test_kit::proxy::Proxy::start(&ddb_lock_test_kit::endpoint()).await;
    let client = ddb_lock_test_kit::client_without_retries(&proxy.endpoint());
    let members = exclusive_members("dropped-failed", 2);
    let set = client
        .acquire_set(&exclusively(&members), &writer_options("s"))
        .await
        .unwrap();
    proxy.refuse_next("DeleteItem", "ThrottlingException");
    let cancelled = tokio::time::timeout(Duration::ZERO, client.release_set(&set)).await;
    assert!(cancelled.is_err(), "a set's release finished in one poll");
    client.flush().await;
    assert_eq!(proxy.counts("DeleteItem").throttled, 1);
    all_free(&client, &members).await;
}

/// A set's transaction applied, its answer lost, and the SDK's resend cancelled with reasons this
/// library does not read: the outcome is unknown, and the members' clean-ups stay armed (they
/// were disarmed by any cancellation, and the members stayed held by nobody for their lease).
#[tokio::test]
async fn a_set_whose_resend_was_cancelled_unread_leaves_nothing_held() {
    lock_client().await;
    let proxy = Proxy::start(&ddb_lock_test_kit::endpoint()).await;
    let client = ddb_lock_test_kit::quickly_retrying_client(&proxy.endpoint());
    let members = exclusive_members("resend-cancelled", 2);
    let mut answer = proxy.withhold_next_answer("TransactWriteItems");
    let taking = {
        let (client, members) = (client.clone(), members.clone());
        tokio::spawn(async move {
            client
                .try_acquire_set(&exclusively(&members), &writer_options("s"))
                .await
        })
    };
    answer.applied().await;
    proxy.refuse_next("TransactWriteItems", "TransactionCanceledException");
    answer.drop_it();
    let outcome = taking.await.unwrap();
    assert!(outcome.is_err(), "{outcome:?}");
    client.flush().await;
    all_free(&client, &members).await;
}

/// A member's release applied, its answer lost, and the SDK sending it no more: the client sends
/// it again, and finds the lock taken by bob since. Its own first send released the member: the
/// outcome is unconfirmed, never bob's (`NotOwner` named him, found by review).
#[tokio::test]
async fn a_set_release_sent_again_by_the_client_never_names_the_next_holder() {
    let bob = lock_client().await;
    let proxy = Proxy::start(&endpoint()).await;
    let client = ddb_lock_test_kit::client_without_retries(&proxy.endpoint());
    let a = unique("set-resent");
    let SetAttempt::Acquired(set) = client
        .try_acquire_set(&[(&a, Mode::Exclusive)], &writer_options("alice"))
        .await
        .unwrap()
    else {
        panic!("a free lock is taken");
    };
    let mut withheld = proxy.withhold_next_answer("DeleteItem");
    let releasing = tokio::spawn({
        let client = client.clone();
        async move { client.release_set(&set).await }
    });
    withheld.applied().await;
    ddb_lock_test_kit::hold(&bob, &a, "bob", Duration::from_secs(60)).await;
    withheld.drop_it();
    let outcomes = releasing.await.unwrap();
    assert_eq!(outcomes.len(), 1);
    assert_eq!(
        outcomes[0].1.as_ref().unwrap(),
        &ReleaseOutcome::Unconfirmed,
        "{outcomes:?}"
    );
    assert!(proxy.counts("DeleteItem").requests >= 2, "sent again");
}

/// A set's try cancelled by a transaction conflict, sent once, wrote nothing: no clean-up is sent
/// for its members, and `flush` has nothing to wait for. Each conflicted try sent a few writes per
/// member, and held `flush` up a quarter second (found by review).
#[tokio::test]
async fn a_set_try_cancelled_by_a_conflict_sends_no_clean_up() {
    lock_client().await;
    let proxy = Proxy::start(&endpoint()).await;
    let client = client_at(&proxy.endpoint());
    let (a, b) = (unique("set-conflict-a"), unique("set-conflict-b"));
    proxy.cancel_next_transaction(&["TransactionConflict", "None"]);
    let attempt = client
        .try_acquire_set(
            &[(&a, Mode::Exclusive), (&b, Mode::Exclusive)],
            &writer_options("alice"),
        )
        .await;
    client.flush().await;
    let (deletes, updates) = (
        proxy.counts("DeleteItem").requests,
        proxy.counts("UpdateItem").requests,
    );
    assert_eq!(
        (deletes, updates),
        (0, 0),
        "clean-ups sent; the try: {attempt:?}"
    );
    assert_eq!(
        proxy.counts("TransactWriteItems").throttled,
        1,
        "{attempt:?}"
    );
}

/// A set try written while a member's holder was live by its clock, its refusal read once that
/// lease had ended (by its clock): answered, as a single try is, held by that holder or acquired,
/// never an error (a review read the same transaction sent again until it was reported as a
/// conflict).
#[tokio::test]
async fn a_set_refused_by_a_lease_that_ended_before_the_refusal_was_read_is_answered() {
    let alice = lock_client().await;
    let proxy = Proxy::start(&endpoint()).await;
    let clock = ddb_lock_test_kit::AdjustableClock::new();
    let client = ddb_lock_test_kit::client_through(&proxy, Some(clock.clone()));
    let a = unique("set-refused-then-lapsed");
    ddb_lock_test_kit::hold(&alice, &a, "alice", Duration::from_secs(10)).await;
    let mut held = proxy.delay_next_request("TransactWriteItems");
    let (members, bob) = ([(a.as_str(), Mode::Exclusive)], writer_options("bob"));
    let mut trying = Box::pin(client.try_acquire_set(&members, &bob));
    tokio::select! {
        answer = &mut trying => panic!("answered with its request held back: {answer:?}"),
        () = held.captured() => {}
    }
    clock.advance(Duration::from_secs(11));
    assert!(held.deliver().await, "the set's write reached the endpoint");
    match trying.await.expect("answered") {
        SetAttempt::Held { holder, .. } => assert_eq!(holder.owner, "alice"),
        SetAttempt::Acquired(set) => {
            client.release_set(&set).await;
        }
    }
}

/// `client` (through `proxy`) takes `members` as a set and releases it, and a copy of the set's
/// transaction (the network delivered it twice, the second time late) lands after the release.
async fn late_copy_after_release(client: &LockClient, proxy: &Proxy, members: &[(&str, Mode)]) {
    let copy = proxy.duplicate_next_request("TransactWriteItems");
    let set = match client
        .try_acquire_set(members, &writer_options("s"))
        .await
        .unwrap()
    {
        SetAttempt::Acquired(set) => set,
        other => panic!("a free set: {other:?}"),
    };
    for (_, outcome) in client.release_set(&set).await {
        assert_eq!(outcome.unwrap(), ReleaseOutcome::Released);
    }
    client.flush().await;
    assert!(copy.deliver().await, "the copy reached the endpoint");
}

/// A copy of a set's transaction landing after the set was released, on a client that keeps
/// items: the kept items are free, and the copy must not take them again for a holder that has
/// gone. DynamoDB answers a copy within ten minutes of its token as the first was, changing
/// nothing; past them, or after a resend of it was cancelled, the members' condition that the
/// attempt has not written the item already refuses it (as for a single keeping acquisition).
#[tokio::test]
async fn a_late_copy_of_a_sets_transaction_takes_nothing_after_its_release_on_kept_items() {
    lock_client().await;
    let proxy = Proxy::start(&endpoint()).await;
    let client = ddb_lock_test_kit::builder(ddb_lock_test_kit::dynamodb_at(&proxy.endpoint()))
        .delete_on_release(false)
        .build()
        .unwrap();
    let (a, b) = (unique("set/copy-a"), unique("set/copy-b"));
    late_copy_after_release(
        &client,
        &proxy,
        &[(&a, Mode::Exclusive), (&b, Mode::Exclusive)],
    )
    .await;
    for resource in [&a, &b] {
        assert_eq!(
            client.status(resource).await.unwrap(),
            LockStatus::Free,
            "{:?}",
            raw_item(resource).await
        );
    }
}

/// The same on a client that deletes items, with an exclusive and a shared member: there nothing
/// in the members' conditions refuses the copy (the items are gone), and DynamoDB's request token
/// is what does: a copy of an applied transaction within ten minutes of its token succeeds and
/// changes nothing. Pinned here, since the set's release counts on it.
#[tokio::test]
async fn a_late_copy_of_a_sets_transaction_takes_nothing_after_its_release() {
    lock_client().await;
    let proxy = Proxy::start(&endpoint()).await;
    let client = client_at(&proxy.endpoint());
    let (a, b) = (unique("set/copy-deleted-a"), unique("set/copy-deleted-b"));
    late_copy_after_release(
        &client,
        &proxy,
        &[(&a, Mode::Exclusive), (&b, Mode::Shared)],
    )
    .await;
    for resource in [&a, &b] {
        assert_eq!(raw_item(resource).await, None, "{resource}");
    }
}

/// A set tried while a member is held, the transaction's first attempt held in the network past
/// the SDK's attempt timeout and its resend refused by that member: the first attempt, landing
/// once the member was released, took every member for nobody, for a whole lease (a request token
/// does not cover a copy of a cancelled transaction; found by review). A refusal after a resend
/// leaves the members' clean-ups armed, and they look for it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sets_first_attempt_landing_after_its_refused_resend_is_released() {
    let direct = lock_client().await;
    let proxy = Proxy::start(&endpoint()).await;
    let client = client_with_attempt_timeout(&proxy.endpoint(), Duration::from_secs(1));
    let (a, b) = (unique("set/late-first-a"), unique("set/late-first-b"));
    let bob = hold(&direct, &b, "bob", Duration::from_secs(60)).await;
    let first = proxy.delay_next_request_containing("TransactWriteItems", &a);
    let tried = client
        .try_acquire_set(
            &[(&a, Mode::Exclusive), (&b, Mode::Exclusive)],
            &writer_options("alice"),
        )
        .await
        .unwrap();
    assert!(matches!(tried, SetAttempt::Held { .. }), "{tried:?}");
    assert_eq!(
        direct.release(&bob).await.unwrap(),
        ReleaseOutcome::Released
    );
    assert!(
        first.deliver().await,
        "the first attempt reached the endpoint"
    );
    client.flush().await;
    assert_eq!(raw_item(&a).await, None, "taken for nobody");
    assert_eq!(raw_item(&b).await, None, "taken for nobody");
}
