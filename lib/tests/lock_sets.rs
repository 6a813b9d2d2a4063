//! Lock sets against the local endpoint: all or nothing in one TransactWriteItems, a refusal
//! naming the member in the way, redundant members, the limits, lapsed readers in a member's way,
//! waiting, fencing, the guards and `with_lock_set` (under faults: `lock_set_faults.rs`).

use ddb_lock::{AcquireOptions, Error, InvalidInput, LockStatus, Mode, ReleaseOutcome, SetAttempt};
use ddb_lock_test_kit::clocks::AdjustableClock;
use ddb_lock_test_kit::proxy::Proxy;
use ddb_lock_test_kit::{
    builder, client_at, dynamodb, endpoint, lock_client, raw_item, unique, writer_options,
};
use std::time::Duration;

#[tokio::test]
async fn a_set_is_taken_in_one_transaction_and_each_member_is_an_ordinary_lock() {
    lock_client().await;
    let proxy = Proxy::start(&endpoint()).await;
    let client = client_at(&proxy.endpoint());
    let (a, b) = (unique("set/a"), unique("set/b"));
    let set = client
        .acquire_set(
            &[(&a, Mode::Exclusive), (&b, Mode::Shared)],
            &writer_options("s"),
        )
        .await
        .unwrap();
    assert_eq!(proxy.counts("TransactWriteItems").requests, 1);
    assert_eq!(proxy.total_requests(), 1);
    assert_eq!(set.locks().len(), 2);
    assert_eq!(set.get(&a).unwrap().mode(), Mode::Exclusive);
    assert_eq!(set.get(&b).unwrap().mode(), Mode::Shared);
    // The members exclude single locks as single locks do.
    assert!(client
        .try_acquire(&a, &writer_options("x"))
        .await
        .unwrap()
        .is_none());
    assert!(client
        .try_acquire(&b, &writer_options("x"))
        .await
        .unwrap()
        .is_none());
    let reader = client
        .try_acquire(&b, &writer_options("r").mode(Mode::Shared))
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
        .try_acquire(&b, &writer_options("holder"))
        .await
        .unwrap()
        .unwrap();
    let reader = client
        .try_acquire(&c, &writer_options("reader").mode(Mode::Shared))
        .await
        .unwrap()
        .unwrap();
    match client
        .try_acquire_set(
            &[(&a, Mode::Exclusive), (&b, Mode::Shared)],
            &writer_options("s"),
        )
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
        .try_acquire_set(
            &[(&a, Mode::Exclusive), (&c, Mode::Exclusive)],
            &writer_options("s"),
        )
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
            &writer_options("s"),
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
    let client = client_at(&proxy.endpoint());
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
        (vec![], writer_options("s"), InvalidInput::EmptySet),
        (
            too_many,
            writer_options("s"),
            InvalidInput::TooManyMembers {
                count: 101,
                max: 100,
            },
        ),
        (
            too_many_fenced,
            writer_options("s").fencing(true),
            InvalidInput::TooManyWrites {
                members: 51,
                fences: 50,
                max: 100,
            },
        ),
        (
            vec![("a", Mode::Exclusive)],
            writer_options("s").permits(2),
            InvalidInput::NotForSets { field: "permits" },
        ),
        (
            vec![("a", Mode::Exclusive)],
            writer_options("s").fair(true),
            InvalidInput::NotForSets { field: "fair" },
        ),
        (
            vec![("", Mode::Exclusive)],
            writer_options("s"),
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
    let client = client_at(&proxy.endpoint());
    let base = unique("set/hundred");
    let names: Vec<String> = (0..100).map(|i| format!("{base}/{i}")).collect();
    let members: Vec<(&str, Mode)> = names
        .iter()
        .map(|n| (n.as_str(), Mode::Exclusive))
        .collect();
    let set = client
        .acquire_set(&members, &writer_options("s"))
        .await
        .unwrap();
    assert_eq!(set.locks().len(), 100);
    assert_eq!(proxy.total_requests(), 1);
    assert!(client
        .try_acquire(&names[57], &writer_options("x"))
        .await
        .unwrap()
        .is_none());
    for (_, outcome) in client.release_set(&set).await {
        assert_eq!(outcome.unwrap(), ReleaseOutcome::Released);
    }
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
            &writer_options("r")
                .mode(Mode::Shared)
                .lease(Duration::from_secs(5)),
        )
        .await
        .unwrap()
        .unwrap();
    clock.advance(Duration::from_secs(6));
    let set = late
        .acquire_set(
            &[(&a, Mode::Exclusive), (&b, Mode::Exclusive)],
            &writer_options("s"),
        )
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
        .try_acquire(&b, &writer_options("holder"))
        .await
        .unwrap()
        .unwrap();
    let waiting = {
        let (client, a, b) = (client.clone(), a.clone(), b.clone());
        tokio::spawn(async move {
            client
                .acquire_set(
                    &[(&a, Mode::Exclusive), (&b, Mode::Exclusive)],
                    &writer_options("s").timeout(Duration::from_secs(30)),
                )
                .await
        })
    };
    client.release(&held).await.unwrap();
    let set = waiting.await.unwrap().unwrap();
    assert_eq!(set.locks().len(), 2);
    client.release_set(&set).await;

    let held = client
        .try_acquire(&b, &writer_options("holder"))
        .await
        .unwrap()
        .unwrap();
    let err = client
        .acquire_set(
            &[(&a, Mode::Exclusive), (&b, Mode::Exclusive)],
            &writer_options("s").timeout(Duration::from_millis(30)),
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
            &writer_options("s"),
            |watches| async move { Ok::<_, Error>(watches.iter().all(|w| w.is_held())) },
        )
        .await
        .unwrap();
    assert!(seen);
    assert_eq!(client.status(&a).await.unwrap(), LockStatus::Free);
    assert_eq!(client.status(&b).await.unwrap(), LockStatus::Free);
    let guards = client
        .lock_set(
            &[(&a, Mode::Exclusive), (&b, Mode::Exclusive)],
            &writer_options("g"),
        )
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
    let client = client_at(&proxy.endpoint());
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
        .acquire_set(&members, &writer_options("s").fencing(true))
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
        .acquire(&a, &writer_options("one").fencing(true))
        .await
        .unwrap();
    assert!(single.fencing_token() > token(&first, &a));
    client.release(&single).await.unwrap();
    let second = client
        .acquire_set(&members, &writer_options("s").fencing(true))
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
        .acquire(&b, &writer_options("ahead").fencing(true))
        .await
        .unwrap();
    ahead.release(&high).await.unwrap();
    // …so a client on time guesses a stale token for b: the fence refuses it and says its token.
    let proxy = Proxy::start(&endpoint()).await;
    let client = client_at(&proxy.endpoint());
    let set = client
        .acquire_set(
            &[(&a, Mode::Exclusive), (&b, Mode::Exclusive)],
            &writer_options("s").fencing(true),
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
    let next = client
        .acquire(&c, &writer_options("s").fencing(true))
        .await
        .unwrap();
    assert!(next.fencing_token() > high.fencing_token());
}
