//! Lock sets against the local endpoint: all or nothing in one TransactWriteItems, a refusal
//! naming the member in the way, redundant members, the limits, lost answers and a dropped
//! acquisition, lapsed readers in a member's way, waiting, the guards and `with_lock_set`.

use ddb_lock::{
    AcquireOptions, Error, InvalidInput, LockClient, LockStatus, Mode, ReleaseOutcome, SetAttempt,
};
use ddb_lock_test_kit::clocks::AdjustableClock;
use ddb_lock_test_kit::proxy::Proxy;
use ddb_lock_test_kit::{
    builder, dynamodb, dynamodb_at, endpoint, lock_client, quickly_retrying_client, raw_item,
    unique,
};
use std::time::Duration;

fn opts(owner: &str) -> AcquireOptions {
    AcquireOptions::new()
        .owner(owner)
        .lease(Duration::from_secs(60))
}

fn proxied(proxy: &Proxy) -> LockClient {
    builder(dynamodb_at(&proxy.endpoint())).build().unwrap()
}

#[tokio::test]
async fn a_set_is_taken_in_one_transaction_and_each_member_is_an_ordinary_lock() {
    lock_client().await;
    let proxy = Proxy::start(&endpoint()).await;
    let client = proxied(&proxy);
    let (a, b) = (unique("set/a"), unique("set/b"));
    let set = client
        .acquire_set(&[(&a, Mode::Exclusive), (&b, Mode::Shared)], &opts("s"))
        .await
        .unwrap();
    assert_eq!(proxy.counts("TransactWriteItems").requests, 1);
    assert_eq!(proxy.total_requests(), 1);
    assert_eq!(set.locks().len(), 2);
    assert_eq!(set.get(&a).unwrap().mode(), Mode::Exclusive);
    assert_eq!(set.get(&b).unwrap().mode(), Mode::Shared);
    // The members exclude single locks as single locks do.
    assert!(client.try_acquire(&a, &opts("x")).await.unwrap().is_none());
    assert!(client.try_acquire(&b, &opts("x")).await.unwrap().is_none());
    let reader = client
        .try_acquire(&b, &opts("r").mode(Mode::Shared))
        .await
        .unwrap()
        .expect("a shared member admits other readers");
    client.release(&reader).await.unwrap();
    for (handle, outcome) in client.release_set(&set).await {
        assert_eq!(outcome.unwrap(), ReleaseOutcome::Released, "{handle:?}");
    }
    assert_eq!(client.status(&a).await.unwrap(), LockStatus::Free);
    assert_eq!(client.status(&b).await.unwrap(), LockStatus::Free);
}

#[tokio::test]
async fn a_refused_set_names_the_member_in_the_way_and_takes_nothing() {
    let client = lock_client().await;
    let (a, b, c) = (unique("set/free"), unique("set/held"), unique("set/read"));
    let held = client
        .try_acquire(&b, &opts("holder"))
        .await
        .unwrap()
        .unwrap();
    let reader = client
        .try_acquire(&c, &opts("reader").mode(Mode::Shared))
        .await
        .unwrap()
        .unwrap();
    match client
        .try_acquire_set(&[(&a, Mode::Exclusive), (&b, Mode::Shared)], &opts("s"))
        .await
        .unwrap()
    {
        SetAttempt::Held { resource, holder } => {
            assert_eq!(resource, b);
            assert_eq!(holder.owner, "holder");
        }
        SetAttempt::Acquired(set) => panic!("{set:?}"),
    }
    assert!(
        raw_item(&a).await.is_none(),
        "nothing of the set was written"
    );
    match client
        .try_acquire_set(&[(&a, Mode::Exclusive), (&c, Mode::Exclusive)], &opts("s"))
        .await
        .unwrap()
    {
        SetAttempt::Held { resource, holder } => {
            assert_eq!(resource, c);
            assert_eq!(holder.owner, "reader");
        }
        SetAttempt::Acquired(set) => panic!("{set:?}"),
    }
    assert!(raw_item(&a).await.is_none());
    client.release(&held).await.unwrap();
    client.release(&reader).await.unwrap();
}

#[tokio::test]
async fn a_redundant_member_is_taken_once_in_its_stronger_mode() {
    let client = lock_client().await;
    let a = unique("set/redundant");
    let set = client
        .acquire_set(
            &[
                (&a, Mode::Shared),
                (&a, Mode::Exclusive),
                (&a, Mode::Shared),
            ],
            &opts("s"),
        )
        .await
        .unwrap();
    assert_eq!(set.locks().len(), 1);
    assert_eq!(set.locks()[0].mode(), Mode::Exclusive);
    client.release_set(&set).await;
}

#[tokio::test]
async fn sets_are_checked_before_any_request() {
    lock_client().await;
    let proxy = Proxy::start(&endpoint()).await;
    let client = proxied(&proxy);
    let names: Vec<String> = (0..101).map(|i| format!("set/too-many/{i}")).collect();
    let too_many: Vec<(&str, Mode)> = names
        .iter()
        .map(|n| (n.as_str(), Mode::Exclusive))
        .collect();
    // 50 exclusive members and their fences, and one shared member (no fence): 101 writes.
    let too_many_fenced: Vec<(&str, Mode)> = names[..51]
        .iter()
        .enumerate()
        .map(|(i, n)| {
            (
                n.as_str(),
                if i < 50 {
                    Mode::Exclusive
                } else {
                    Mode::Shared
                },
            )
        })
        .collect();
    type Case<'a> = (Vec<(&'a str, Mode)>, AcquireOptions, InvalidInput);
    let cases: Vec<Case<'_>> = vec![
        (vec![], opts("s"), InvalidInput::EmptySet),
        (
            too_many,
            opts("s"),
            InvalidInput::TooManyMembers {
                count: 101,
                max: 100,
            },
        ),
        (
            too_many_fenced,
            opts("s").fencing(true),
            InvalidInput::TooManyWrites {
                members: 51,
                fences: 50,
                max: 100,
            },
        ),
        (
            vec![("a", Mode::Exclusive)],
            opts("s").permits(2),
            InvalidInput::NotForSets { field: "permits" },
        ),
        (
            vec![("a", Mode::Exclusive)],
            opts("s").fair(true),
            InvalidInput::NotForSets { field: "fair" },
        ),
        (
            vec![("", Mode::Exclusive)],
            opts("s"),
            InvalidInput::Empty { field: "resource" },
        ),
    ];
    for (members, opts, expected) in cases {
        match client.try_acquire_set(&members, &opts).await {
            Err(Error::InvalidInput(found)) => assert_eq!(found, expected),
            other => panic!("{expected:?}: {other:?}"),
        }
    }
    assert_eq!(proxy.total_requests(), 0);
}

#[tokio::test]
async fn a_set_of_a_hundred_resources_is_one_transaction() {
    lock_client().await;
    let proxy = Proxy::start(&endpoint()).await;
    let client = proxied(&proxy);
    let base = unique("set/hundred");
    let names: Vec<String> = (0..100).map(|i| format!("{base}/{i}")).collect();
    let members: Vec<(&str, Mode)> = names
        .iter()
        .map(|n| (n.as_str(), Mode::Exclusive))
        .collect();
    let set = client.acquire_set(&members, &opts("s")).await.unwrap();
    assert_eq!(set.locks().len(), 100);
    assert_eq!(proxy.total_requests(), 1);
    assert!(client
        .try_acquire(&names[57], &opts("x"))
        .await
        .unwrap()
        .is_none());
    for (_, outcome) in client.release_set(&set).await {
        assert_eq!(outcome.unwrap(), ReleaseOutcome::Released);
    }
}

#[tokio::test]
async fn a_set_whose_answer_was_lost_is_acquired_once() {
    lock_client().await;
    let proxy = Proxy::start(&endpoint()).await;
    let client = quickly_retrying_client(&proxy.endpoint());
    let (a, b) = (unique("set/lost-a"), unique("set/lost-b"));
    proxy.drop_next_answer("TransactWriteItems");
    let set = client
        .acquire_set(&[(&a, Mode::Exclusive), (&b, Mode::Shared)], &opts("s"))
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
                .try_acquire_set(&[(&a, Mode::Exclusive), (&b, Mode::Shared)], &opts("s"))
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

#[tokio::test]
async fn lapsed_readers_in_a_members_way_are_cleared_and_the_set_taken() {
    lock_client().await;
    let clock = AdjustableClock::new();
    let early = builder(dynamodb()).build().unwrap();
    let late = builder(dynamodb()).clock(clock.clone()).build().unwrap();
    let (a, b) = (unique("set/lapsed-a"), unique("set/lapsed-b"));
    early
        .try_acquire(
            &a,
            &opts("r").mode(Mode::Shared).lease(Duration::from_secs(5)),
        )
        .await
        .unwrap()
        .unwrap();
    clock.advance(Duration::from_secs(6));
    let set = late
        .acquire_set(&[(&a, Mode::Exclusive), (&b, Mode::Exclusive)], &opts("s"))
        .await
        .unwrap();
    match late.status(&a).await.unwrap() {
        LockStatus::Held { holder, .. } => assert_eq!(holder.owner, "s"),
        other => panic!("{other:?}"),
    }
    late.release_set(&set).await;
}

#[tokio::test]
async fn a_waiting_set_is_taken_once_the_member_in_its_way_is_released() {
    let client = lock_client().await;
    let (a, b) = (unique("set/wait-a"), unique("set/wait-b"));
    let held = client
        .try_acquire(&b, &opts("holder"))
        .await
        .unwrap()
        .unwrap();
    let waiting = {
        let (client, a, b) = (client.clone(), a.clone(), b.clone());
        tokio::spawn(async move {
            client
                .acquire_set(
                    &[(&a, Mode::Exclusive), (&b, Mode::Exclusive)],
                    &opts("s").timeout(Duration::from_secs(30)),
                )
                .await
        })
    };
    client.release(&held).await.unwrap();
    let set = waiting.await.unwrap().unwrap();
    assert_eq!(set.locks().len(), 2);
    client.release_set(&set).await;

    let held = client
        .try_acquire(&b, &opts("holder"))
        .await
        .unwrap()
        .unwrap();
    let err = client
        .acquire_set(
            &[(&a, Mode::Exclusive), (&b, Mode::Exclusive)],
            &opts("s").timeout(Duration::from_millis(30)),
        )
        .await
        .unwrap_err();
    match err {
        Error::Timeout {
            resource, holder, ..
        } => {
            assert_eq!(resource, b);
            assert_eq!(holder.owner, "holder");
        }
        other => panic!("{other:?}"),
    }
    client.release(&held).await.unwrap();
}

#[tokio::test]
async fn with_lock_set_runs_the_work_under_every_member_and_releases_them() {
    let client = lock_client().await;
    let (a, b) = (unique("set/with-a"), unique("set/with-b"));
    let seen = client
        .with_lock_set(
            &[(&a, Mode::Exclusive), (&b, Mode::Shared)],
            &opts("s"),
            |watches| async move { Ok::<_, Error>(watches.iter().all(|w| w.is_held())) },
        )
        .await
        .unwrap();
    assert!(seen);
    assert_eq!(client.status(&a).await.unwrap(), LockStatus::Free);
    assert_eq!(client.status(&b).await.unwrap(), LockStatus::Free);
    let guards = client
        .lock_set(&[(&a, Mode::Exclusive), (&b, Mode::Exclusive)], &opts("g"))
        .await
        .unwrap();
    assert!(guards.iter().all(|g| g.is_held()));
    for guard in guards {
        assert_eq!(guard.release().await.unwrap(), ReleaseOutcome::Released);
    }
}

#[tokio::test]
async fn a_fenced_set_gives_each_exclusive_member_a_growing_token_in_the_same_transaction() {
    lock_client().await;
    let proxy = Proxy::start(&endpoint()).await;
    let client = proxied(&proxy);
    let (a, b, r) = (
        unique("set/fenced-a"),
        unique("set/fenced-b"),
        unique("set/fenced-r"),
    );
    let members = [
        (a.as_str(), Mode::Exclusive),
        (b.as_str(), Mode::Exclusive),
        (r.as_str(), Mode::Shared),
    ];
    let first = client
        .acquire_set(&members, &opts("s").fencing(true))
        .await
        .unwrap();
    assert_eq!(
        proxy.total_requests(),
        1,
        "members and fences in one transaction"
    );
    let token =
        |set: &ddb_lock::LockSet, resource: &str| set.get(resource).unwrap().fencing_token();
    assert!(token(&first, &a).is_some() && token(&first, &b).is_some());
    assert_eq!(token(&first, &r), None, "a shared member takes no token");
    // The single fenced acquisition's tokens and the set's come from one counter per resource.
    for (_, outcome) in client.release_set(&first).await {
        assert_eq!(outcome.unwrap(), ReleaseOutcome::Released);
    }
    let single = client
        .acquire(&a, &opts("one").fencing(true))
        .await
        .unwrap();
    assert!(single.fencing_token() > token(&first, &a));
    client.release(&single).await.unwrap();
    let second = client
        .acquire_set(&members, &opts("s").fencing(true))
        .await
        .unwrap();
    assert!(token(&second, &a) > single.fencing_token());
    assert!(token(&second, &b) > token(&first, &b));
    // The status shows the member's token as its holder's.
    match client.status(&a).await.unwrap() {
        LockStatus::Held { holder, .. } => assert_eq!(holder.fencing_token, token(&second, &a)),
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn a_fenced_set_behind_a_clock_learns_the_token_from_the_fence_and_tries_again() {
    lock_client().await;
    let (a, b) = (unique("set/stale-a"), unique("set/stale-b"));
    // A client an hour ahead issues tokens from its clock…
    let ahead = builder(dynamodb())
        .clock(ddb_lock_test_kit::OffsetClock::shared(
            chrono::TimeDelta::hours(1),
        ))
        .build()
        .unwrap();
    let high = ahead
        .acquire(&b, &opts("ahead").fencing(true))
        .await
        .unwrap();
    ahead.release(&high).await.unwrap();
    // …so a client on time guesses a stale token for b: the fence refuses it and says its token.
    let proxy = Proxy::start(&endpoint()).await;
    let client = proxied(&proxy);
    let set = client
        .acquire_set(
            &[(&a, Mode::Exclusive), (&b, Mode::Exclusive)],
            &opts("s").fencing(true),
        )
        .await
        .unwrap();
    assert_eq!(
        proxy.counts("TransactWriteItems").requests,
        2,
        "refused once by b's fence, then applied"
    );
    assert!(set.get(&b).unwrap().fencing_token() > high.fencing_token());
    assert!(set.get(&a).unwrap().fencing_token().is_some());
    // The offset was raised: the next guess is not stale.
    let c = unique("set/stale-c");
    let next = client.acquire(&c, &opts("s").fencing(true)).await.unwrap();
    assert!(next.fencing_token() > high.fencing_token());
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
        .try_acquire(&resource, &opts("alice"))
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
        .try_acquire(&resource, &opts("reader").mode(Mode::Shared))
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
        .acquire_set(&exclusively(&members), &opts("s"))
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
        .acquire_set(&exclusively(&members), &opts("s"))
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
                .try_acquire_set(&exclusively(&members), &opts("s"))
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
        .try_acquire_set(&[(&a, Mode::Exclusive)], &opts("alice"))
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
    let client = proxied(&proxy);
    let (a, b) = (unique("set-conflict-a"), unique("set-conflict-b"));
    proxy.cancel_next_transaction(&["TransactionConflict", "None"]);
    let attempt = client
        .try_acquire_set(
            &[(&a, Mode::Exclusive), (&b, Mode::Exclusive)],
            &opts("alice"),
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
