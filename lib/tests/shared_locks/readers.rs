//! Readers and writers: who excludes whom, each at one request uncontended; crashed readers
//! cleared and a lapsed writer changing nothing; lost, dropped and late requests; extensions, the
//! guard, kept items, and the options shared holds do not take.

use super::*;

#[tokio::test]
async fn readers_share_a_writer_excludes_them_and_each_costs_one_request_uncontended() {
    lock_client().await; // the table
    let proxy = Proxy::start(&endpoint()).await;
    let client = builder(dynamodb_at(&proxy.endpoint())).build().unwrap();
    let resource = unique("shared/readers");

    let r1 = client
        .try_acquire(&resource, &reader("r1"))
        .await
        .unwrap()
        .expect("free");
    let r2 = client
        .try_acquire(&resource, &reader("r2"))
        .await
        .unwrap()
        .expect("readers share");
    assert_eq!(r1.mode(), Mode::Shared);
    assert_eq!(
        proxy.total_requests(),
        2,
        "one UpdateItem per shared acquisition"
    );
    let mut owners = shared_owners(&client.status(&resource).await.unwrap());
    owners.sort();
    assert_eq!(owners, ["r1", "r2"]);

    match client
        .try_acquire_with_holder(&resource, &writer("w"))
        .await
        .unwrap()
    {
        AcquireAttempt::Held(holder) => assert!(["r1", "r2"].contains(&holder.owner.as_str())),
        AcquireAttempt::Acquired(lock) => panic!("a writer joined readers: {lock:?}"),
    }
    assert_eq!(client.release(&r1).await.unwrap(), ReleaseOutcome::Released);
    assert!(
        client
            .try_acquire(&resource, &writer("w"))
            .await
            .unwrap()
            .is_none(),
        "r2 still reads"
    );
    assert_eq!(client.release(&r2).await.unwrap(), ReleaseOutcome::Released);
    assert!(
        raw_item(&resource).await.is_none(),
        "the last reader's release deletes the empty item"
    );

    let w = client
        .try_acquire(&resource, &writer("w"))
        .await
        .unwrap()
        .expect("free again");
    match client
        .try_acquire_with_holder(&resource, &reader("r3"))
        .await
        .unwrap()
    {
        AcquireAttempt::Held(holder) => assert_eq!(holder.owner, "w"),
        AcquireAttempt::Acquired(lock) => panic!("a reader joined a writer: {lock:?}"),
    }
    before_and_after(&proxy, || client.release(&w), 1).await;
    assert_eq!(client.status(&resource).await.unwrap(), LockStatus::Free);
}

#[tokio::test]
async fn a_writer_clears_crashed_readers_and_takes_the_lock() {
    lock_client().await;
    let proxy = Proxy::start(&endpoint()).await;
    let clock = AdjustableClock::new();
    let early = builder(dynamodb()).build().unwrap();
    let late = client_with_clock(&proxy.endpoint(), clock.clone());
    let resource = unique("shared/crashed-readers");
    let crashed = early
        .try_acquire(&resource, &reader("r1").lease(Duration::from_secs(5)))
        .await
        .unwrap()
        .expect("free");
    clock.advance(Duration::from_secs(6));
    let before = proxy.total_requests();
    let w = late
        .try_acquire(&resource, &writer("w"))
        .await
        .unwrap()
        .expect("the reader's lease ended");
    assert_eq!(
        proxy.total_requests() - before,
        3,
        "refused, cleared, acquired"
    );
    assert_eq!(
        early.release(&crashed).await.unwrap(),
        ReleaseOutcome::NotFound
    );
    match late.status(&resource).await.unwrap() {
        LockStatus::Held { holder, .. } => assert_eq!(holder.owner, "w"),
        other => panic!("{other:?}"),
    }
    late.release(&w).await.unwrap();
}

#[tokio::test]
async fn a_lapsed_writer_comes_back_to_readers_and_changes_nothing() {
    lock_client().await;
    let clock = AdjustableClock::new();
    let early = builder(dynamodb()).build().unwrap();
    let late = client_with_clock(&endpoint(), clock.clone());
    let resource = unique("shared/lapsed-writer");
    let w = early
        .try_acquire(&resource, &writer("w").lease(Duration::from_secs(5)))
        .await
        .unwrap()
        .expect("free");
    clock.advance(Duration::from_secs(6));
    let r = late
        .try_acquire(&resource, &reader("r"))
        .await
        .unwrap()
        .expect("the writer's lease ended");
    assert_eq!(early.release(&w).await.unwrap(), ReleaseOutcome::NotFound);
    assert_eq!(
        early.extend(&w, Duration::from_secs(60)).await.unwrap(),
        ExtendOutcome::NotFound
    );
    assert_eq!(
        early.release_owned(&resource, "w").await.unwrap(),
        ReleaseOutcome::NotFound
    );
    assert_eq!(shared_owners(&late.status(&resource).await.unwrap()), ["r"]);
    assert_eq!(late.release(&r).await.unwrap(), ReleaseOutcome::Released);
}

#[tokio::test]
async fn a_shared_acquisition_whose_answer_was_lost_is_one_holder_not_two() {
    lock_client().await;
    let proxy = Proxy::start(&endpoint()).await;
    let client = quickly_retrying_client(&proxy.endpoint());
    let resource = unique("shared/lost-answer");
    // A semaphore of one: the retry is refused by the first attempt's own entry.
    proxy.drop_next_answer("UpdateItem");
    let lock = client
        .try_acquire(&resource, &permit("a", 1))
        .await
        .unwrap()
        .expect("the first attempt's entry is ours: acquired");
    assert_eq!(proxy.counts("UpdateItem").dropped, 1);
    assert_eq!(
        shared_owners(&client.status(&resource).await.unwrap()),
        ["a"]
    );
    assert_eq!(
        client.release(&lock).await.unwrap(),
        ReleaseOutcome::Released
    );
    assert!(raw_item(&resource).await.is_none());
}

#[tokio::test]
async fn a_shared_acquisition_dropped_mid_request_leaves_no_holder() {
    lock_client().await;
    let proxy = Proxy::start(&endpoint()).await;
    let client = quickly_retrying_client(&proxy.endpoint());
    let resource = unique("shared/dropped");
    let mut answer = proxy.withhold_next_answer("UpdateItem");
    let attempt = {
        let client = client.clone();
        let resource = resource.clone();
        tokio::spawn(async move { client.try_acquire(&resource, &reader("r")).await })
    };
    answer.applied().await;
    attempt.abort();
    let _ = attempt.await;
    answer.drop_it();
    client.flush().await;
    assert_eq!(client.status(&resource).await.unwrap(), LockStatus::Free);
}

#[tokio::test]
async fn an_extension_of_a_shared_hold_never_shortens_it_and_a_late_one_is_refused() {
    let client = lock_client().await;
    let resource = unique("shared/extend");
    let r = client
        .try_acquire(&resource, &reader("r"))
        .await
        .unwrap()
        .expect("free");
    let ExtendOutcome::Extended(long) = client.extend(&r, Duration::from_secs(600)).await.unwrap()
    else {
        panic!("extend")
    };
    assert!(long.expires_at() > r.expires_at());
    // A shorter extension leaves the stored end: sent through another client (a handle from
    // elsewhere), as the lock's own client asks for an end past every one it sent.
    let elsewhere = ddb_lock_test_kit::builder(ddb_lock_test_kit::dynamodb())
        .build()
        .unwrap();
    let ExtendOutcome::Extended(short) =
        elsewhere.extend(&r, Duration::from_secs(30)).await.unwrap()
    else {
        panic!("extend")
    };
    assert_eq!(short.expires_at(), long.expires_at());
    match client.status(&resource).await.unwrap() {
        LockStatus::Shared { holders, .. } => assert_eq!(holders[0].expires_at, long.expires_at()),
        other => panic!("{other:?}"),
    }
    client.release(&r).await.unwrap();
    assert_eq!(
        client.extend(&r, Duration::from_secs(30)).await.unwrap(),
        ExtendOutcome::NotFound
    );
    assert_eq!(client.release(&r).await.unwrap(), ReleaseOutcome::NotFound);
}

#[tokio::test]
async fn a_shared_guard_extends_its_own_entry_and_releases_it_on_drop() {
    let client = lock_client().await;
    let resource = unique("shared/guard");
    let opts = reader("g").lease(Duration::from_millis(300));
    let guard = client.lock(&resource, &opts).await.unwrap();
    let other = client.lock(&resource, &reader("h")).await.unwrap();
    // Outlive several leases: the heartbeat keeps the entry alive.
    let first = guard.lock().expect("held").expires_at();
    loop {
        let now = guard.lock().expect("held").expires_at();
        if now > first + chrono::TimeDelta::milliseconds(600) {
            break;
        }
        tokio::task::yield_now().await;
        assert!(guard.is_held());
    }
    let mut owners = shared_owners(&client.status(&resource).await.unwrap());
    owners.sort();
    assert_eq!(owners, ["g", "h"]);
    drop(guard);
    client.flush().await;
    assert_eq!(
        shared_owners(&client.status(&resource).await.unwrap()),
        ["h"]
    );
    let outcome = client
        .with_lock(&resource, &reader("k"), |_| async { Ok::<_, Error>(7) })
        .await
        .unwrap();
    assert_eq!(outcome, 7);
    assert_eq!(other.release().await.unwrap(), ReleaseOutcome::Released);
    assert_eq!(client.status(&resource).await.unwrap(), LockStatus::Free);
}

#[tokio::test]
async fn options_shared_holds_do_not_take_are_refused_before_any_request() {
    lock_client().await;
    let proxy = Proxy::start(&endpoint()).await;
    let client = builder(dynamodb_at(&proxy.endpoint())).build().unwrap();
    let resource = unique("shared/refused-options");
    let cases: Vec<(AcquireOptions, InvalidInput)> = vec![
        (
            AcquireOptions::new().permits(0),
            InvalidInput::Permits { permits: 0 },
        ),
        (
            AcquireOptions::new().permits(101),
            InvalidInput::Permits { permits: 101 },
        ),
        (
            AcquireOptions::new().permits(3).mode(Mode::Exclusive),
            InvalidInput::NotForMode {
                field: "permits",
                mode: Mode::Exclusive,
            },
        ),
        (
            AcquireOptions::new().mode(Mode::Shared).fencing(true),
            InvalidInput::NotForMode {
                field: "fencing",
                mode: Mode::Shared,
            },
        ),
        (
            AcquireOptions::new().mode(Mode::Shared).idempotent(true),
            InvalidInput::NotForMode {
                field: "idempotent",
                mode: Mode::Shared,
            },
        ),
        (
            AcquireOptions::new().mode(Mode::Shared).data("x"),
            InvalidInput::NotForMode {
                field: "data",
                mode: Mode::Shared,
            },
        ),
    ];
    for (opts, expected) in cases {
        match client.try_acquire(&resource, &opts).await {
            Err(Error::InvalidInput(found)) => {
                assert_eq!(found, expected);
                assert_eq!(found.field(), expected.field());
            }
            other => panic!("{opts:?}: {other:?}"),
        }
    }
    assert_eq!(proxy.total_requests(), 0);
}

#[tokio::test]
async fn a_keeping_client_keeps_the_item_and_its_payload_through_shared_holds() {
    lock_client().await;
    let client = builder(dynamodb())
        .delete_on_release(false)
        .build()
        .unwrap();
    let resource = unique("shared/kept");
    assert!(client
        .create_lock_item(&resource, Some(b"config v3"))
        .await
        .unwrap());
    let r = client
        .try_acquire(&resource, &reader("r").only_if_exists(true))
        .await
        .unwrap()
        .expect("the kept item is free");
    assert_eq!(client.release(&r).await.unwrap(), ReleaseOutcome::Released);
    let item = raw_item(&resource).await.expect("kept");
    assert!(!item.contains_key("Shared"), "{item:?}");
    assert_eq!(client.status(&resource).await.unwrap(), LockStatus::Free);
    let w = client
        .try_acquire(&resource, &writer("w").only_if_exists(true))
        .await
        .unwrap()
        .expect("free");
    assert_eq!(w.data(), Some(&b"config v3"[..]));
    client.release(&w).await.unwrap();
}

/// A copy of a reader's acquisition, delivered after the reader extended its hold, changes
/// nothing: it put back the entry's first lease end, and a writer whose clock is past that end
/// cleared the entry as lapsed and took the lock while the reader held it.
#[tokio::test]
async fn a_late_copy_of_a_shared_acquisition_does_not_shorten_the_hold() {
    lock_client().await;
    let proxy = Proxy::start(&endpoint()).await;
    let readers = quickly_retrying_client(&proxy.endpoint());
    // The writer's clock is 10 s ahead: past the reader's first lease, not its extended one.
    let ahead = AdjustableClock::new();
    ahead.advance(Duration::from_secs(10));
    let writers = client_with_clock(&endpoint(), ahead);
    let resource = unique("shared/late-copy");

    let copy = proxy.duplicate_next_request_containing("UpdateItem", "ADD #shared");
    let r = readers
        .try_acquire(&resource, &reader("r").lease(Duration::from_secs(5)))
        .await
        .unwrap()
        .expect("free");
    let extended = readers.extend(&r, Duration::from_secs(60)).await.unwrap();
    assert!(
        matches!(extended, ExtendOutcome::Extended(_)),
        "{extended:?}"
    );
    assert!(copy.deliver().await, "the copy reached the endpoint");

    assert!(
        writers
            .try_acquire(&resource, &writer("w"))
            .await
            .unwrap()
            .is_none(),
        "a writer took the lock from a reader holding it"
    );
    assert_eq!(
        shared_owners(&readers.status(&resource).await.unwrap()),
        ["r"]
    );
    readers.release(&r).await.unwrap();
}

/// A handle that names a hold in another mode than its own (an intention's id with the shared
/// mode) is refused with a typed error, and changes nothing: its release removed the entry and
/// left the id in the other set, and from then on no request could read the item (every exclusive
/// acquisition, status and list failed on it as malformed).
#[tokio::test]
async fn a_handle_of_another_mode_is_refused() {
    let client = lock_client().await;
    let resource = unique("shared/mode-mismatch");
    let reader = client
        .try_acquire(&resource, &reader("r"))
        .await
        .unwrap()
        .expect("free");
    let intention = client
        .try_acquire(
            &resource,
            &AcquireOptions::new().owner("i").mode(Mode::IntentShared),
        )
        .await
        .unwrap()
        .expect("an intention beside a reader");
    let mislabelled =
        ddb_lock::LockHandle::new(&resource, "i", intention.lock_id()).with_mode(Mode::Shared);
    let mismatch = |result: Result<_, Error>| match result {
        Err(Error::InvalidInput(InvalidInput::ModeMismatch { given, held })) => {
            assert_eq!((given, held), (Mode::Shared, Mode::IntentShared));
        }
        other => panic!("expected ModeMismatch, got {other:?}"),
    };
    mismatch(client.release(&mislabelled).await.map(|_| ()));
    mismatch(
        client
            .extend(&mislabelled, Duration::from_secs(60))
            .await
            .map(|_| ()),
    );
    let status = client.status(&resource).await.expect("the item reads");
    assert_eq!(shared_owners(&status), ["r"]);
    assert_eq!(
        client.release(&intention).await.unwrap(),
        ReleaseOutcome::Released
    );
    assert_eq!(
        client.release(&reader).await.unwrap(),
        ReleaseOutcome::Released
    );
    assert_free_for_a_writer(&client, &resource).await;
}

/// A reader's release that applied, whose follow-up deletion of the emptied item failed, is
/// `Released`: it answered the deletion's error, for a hold that was released.
#[tokio::test]
async fn a_release_whose_empty_item_deletion_fails_is_released() {
    lock_client().await;
    let proxy = Proxy::start(&endpoint()).await;
    let client = ddb_lock_test_kit::client_without_retries(&proxy.endpoint());
    let resource = unique("shared/empty-delete-fails");
    let lock = client
        .try_acquire(&resource, &reader("r"))
        .await
        .unwrap()
        .expect("free");
    proxy.drop_next_answer("DeleteItem");
    assert_eq!(
        client.release(&lock).await.unwrap(),
        ReleaseOutcome::Released
    );
    assert_eq!(proxy.counts("DeleteItem").requests, 1);
    assert_free_for_a_writer(&client, &resource).await;
}

/// An item full of lapsed holders (80 readers and 80 intentions, as a root path's item can carry)
/// is cleared by a writer: the clearing named every holder in one condition, over DynamoDB's
/// 4 KB for expressions, and every exclusive acquisition of the item failed until a force
/// release.
#[tokio::test]
async fn a_writer_clears_more_lapsed_holders_than_one_expression_can_name() {
    lock_client().await;
    let clock = AdjustableClock::new();
    let early = client_with_clock(&endpoint(), clock.clone());
    let resource = unique("shared/many-lapsed");
    let short = |owner: String, mode: Mode| {
        AcquireOptions::new()
            .owner(owner)
            .mode(mode)
            .lease(Duration::from_secs(5))
    };
    for i in 0..80 {
        for (mode, name) in [(Mode::Shared, "r"), (Mode::IntentShared, "i")] {
            early
                .try_acquire(&resource, &short(format!("{name}{i}"), mode))
                .await
                .unwrap()
                .expect("room for it");
        }
    }
    clock.advance(Duration::from_secs(6));
    let lock = early
        .try_acquire(&resource, &writer("w"))
        .await
        .unwrap()
        .expect("every holder lapsed");
    assert_eq!(lock.owner(), "w");
}

/// A writer takes `resource`'s lock at once: no holder is left.
async fn assert_free_for_a_writer(client: &LockClient, resource: &str) {
    assert!(
        client
            .try_acquire(resource, &writer("w"))
            .await
            .unwrap()
            .is_some(),
        "the lock is not free for a writer"
    );
}

/// The refusal of a handle of another mode comes before the hold's guards are stopped: the
/// release stopped them first (the guard said lost, its heartbeat gone) for a release the item
/// then refused.
#[tokio::test]
async fn a_handle_of_another_mode_leaves_the_holds_guard_held() {
    let client = lock_client().await;
    let resource = unique("shared/mode-mismatch-guard");
    let guard = client
        .lock(
            &resource,
            &AcquireOptions::new().owner("i").mode(Mode::IntentShared),
        )
        .await
        .unwrap();
    let lock = guard.lock().expect("held");
    let mislabelled =
        ddb_lock::LockHandle::new(&resource, "i", lock.lock_id()).with_mode(Mode::Shared);
    assert!(matches!(
        client.release(&mislabelled).await,
        Err(Error::InvalidInput(InvalidInput::ModeMismatch { .. }))
    ));
    assert!(guard.is_held(), "the guard of the real hold was stopped");
    assert_eq!(guard.release().await.unwrap(), ReleaseOutcome::Released);
}

/// A release or an extension by a handle of another mode (a set mode's, or an exclusive one left
/// so by a caller rebuilding a shared hold's handle) changes nothing of the hold, and the client
/// keeps it: `release_all` still ends it, and its guard says lost only then. The client forgot the
/// hold (a release), or stopped its guard for a hold that stood (an extension), and `release_all`
/// left it, its guard saying held, to its lease.
#[tokio::test]
async fn a_handle_of_another_mode_leaves_the_hold_to_its_client() {
    let client = lock_client().await;
    for (taken, given) in [
        (Mode::Shared, Mode::Exclusive),
        (Mode::IntentShared, Mode::Shared),
        (Mode::Shared, Mode::IntentExclusive),
    ] {
        let resource = unique("shared/mode-mismatch-kept");
        let guard = client
            .lock(&resource, &AcquireOptions::new().owner("r").mode(taken))
            .await
            .unwrap();
        let lock_id = guard.lock().expect("held").lock_id();
        let wrong = ddb_lock::LockHandle::new(&resource, "r", lock_id).with_mode(given);
        let released = client.release(&wrong).await;
        assert!(
            matches!(
                released,
                Ok(ReleaseOutcome::NotFound)
                    | Err(Error::InvalidInput(InvalidInput::ModeMismatch { .. }))
            ),
            "{taken:?} released as {given:?}: {released:?}"
        );
        let extended = client.extend(&wrong, Duration::from_secs(30)).await;
        assert!(
            matches!(
                extended,
                Ok(ddb_lock::ExtendOutcome::NotFound)
                    | Err(Error::InvalidInput(InvalidInput::ModeMismatch { .. }))
            ),
            "{taken:?} extended as {given:?}: {extended:?}"
        );
        assert!(
            guard.is_held(),
            "{taken:?} as {given:?}: the guard was stopped"
        );
        let context = format!("{taken:?} as {given:?}");
        ddb_lock_test_kit::assert_release_all_releases(&client, lock_id, &context).await;
        assert!(
            !guard.is_held(),
            "{taken:?} as {given:?}: the guard says held"
        );
        assert_eq!(
            client.status(&resource).await.unwrap(),
            ddb_lock::LockStatus::Free
        );
    }
}
