//! The lock guard: it extends in the background, reports loss, releases on drop and on release,
//! replaces the payload; and `with_lock` always releases.

use ddb_lock::{AcquireOptions, Error, ExtendOutcome, LockLost, LockStatus, ReleaseOutcome};
use ddb_lock_test_kit::proxy::Proxy;
use ddb_lock_test_kit::{
    builder, client_through, dynamodb_at, endpoint, guard_options, hold, lock_client, lost_now,
    raw_item, stored, string_attr, unique, AdjustableClock, OffsetClock,
};
use std::time::Duration;
use tokio::time::timeout;

/// Upper bound on any wait in these tests, so that a bug fails the test instead of hanging it.
const PATIENCE: Duration = Duration::from_secs(20);

#[tokio::test]
async fn a_guard_keeps_its_lock_past_the_first_lease() {
    let client = lock_client().await;
    let resource = unique("guard-extends");
    let guard = client
        .lock(&resource, &guard_options("alice", 600, 100))
        .await
        .unwrap();
    let first_expiry = guard.lock().unwrap().expires_at();

    // Letting three leases pass is the behaviour under test, not synchronisation.
    tokio::time::sleep(Duration::from_millis(1800)).await;

    assert!(guard.is_held());
    let LockStatus::Held { holder, .. } = client.status(&resource).await.unwrap() else {
        panic!("the guarded lock expired");
    };
    assert_eq!(holder.owner, "alice");
    assert!(holder.expires_at > first_expiry + chrono::TimeDelta::milliseconds(1000));
    let other = client
        .try_acquire(&resource, &AcquireOptions::new().owner("bob"))
        .await
        .unwrap();
    assert!(other.is_none(), "bob must not get a guarded lock");
    assert_eq!(guard.release().await.unwrap(), ReleaseOutcome::Released);
    assert_eq!(client.status(&resource).await.unwrap(), LockStatus::Free);
}

#[tokio::test]
async fn a_guard_reports_loss_when_its_lock_is_force_released() {
    let client = lock_client().await;
    let resource = unique("guard-force-released");
    let guard = client
        .lock(&resource, &guard_options("alice", 5000, 50))
        .await
        .unwrap();

    // Through another client: the guard learns it from its next extension.
    lock_client().await.force_release(&resource).await.unwrap();
    let lost = timeout(PATIENCE, guard.lost())
        .await
        .expect("loss signalled");

    assert_eq!(lost, LockLost::NotFound);
    assert!(!guard.is_held());
    // The guard's release does not touch a lock that is not its own.
    let bobs = hold(&client, &resource, "bob", Duration::from_secs(60)).await;
    assert!(matches!(
        guard.release().await.unwrap(),
        ReleaseOutcome::NotOwner { .. }
    ));
    assert_eq!(
        client.release(&bobs).await.unwrap(),
        ReleaseOutcome::Released
    );
}

#[tokio::test]
async fn a_guard_reports_the_new_holder_when_its_lock_is_taken_over() {
    let client = lock_client().await;
    let resource = unique("guard-taken-over");
    let guard = client
        .lock(&resource, &guard_options("alice", 8000, 2000))
        .await
        .unwrap();

    // Through another client: the guard learns it from its next extension.
    let other = lock_client().await;
    other.force_release(&resource).await.unwrap();
    let bobs = hold(&other, &resource, "bob", Duration::from_secs(60)).await;
    let lost = timeout(PATIENCE, guard.lost())
        .await
        .expect("loss signalled");

    let LockLost::TakenOver { holder } = lost else {
        panic!("expected a takeover, got {lost:?}");
    };
    assert_eq!(holder.owner, "bob");
    assert!(!guard.is_held());
    client.release(&bobs).await.unwrap();
}

#[tokio::test]
async fn a_guard_cut_off_from_dynamodb_is_lost_when_its_lease_runs_out() {
    lock_client().await;
    let resource = unique("guard-cut-off");
    let proxy = Proxy::start(&endpoint()).await;
    let cut_off = builder(dynamodb_at(&proxy.endpoint())).build().unwrap();
    let guard = cut_off
        .lock(&resource, &guard_options("alice", 1500, 200))
        .await
        .unwrap();
    let valid_until = guard.lock().unwrap().valid_until();

    proxy.cut_off();
    let lost = timeout(PATIENCE, guard.lost())
        .await
        .expect("loss signalled");

    assert!(
        matches!(lost, LockLost::LeaseRanOut { .. }),
        "expected the lease to run out, got {lost:?}"
    );
    assert!(
        std::time::Instant::now() >= valid_until,
        "not lost before its lease ended"
    );
    assert!(!guard.is_held());
}

#[tokio::test]
async fn dropping_a_guard_releases_its_lock() {
    let client = lock_client().await;
    let resource = unique("guard-dropped");
    let guard = client
        .lock(&resource, &guard_options("alice", 60_000, 20_000))
        .await
        .unwrap();

    drop(guard);
    // The lease is a minute: only the release frees the lock within the timeout.
    let bobs = client
        .acquire(
            &resource,
            &AcquireOptions::new()
                .owner("bob")
                .timeout(Duration::from_secs(10)),
        )
        .await
        .expect("the dropped guard's lock was released");
    client.release(&bobs).await.unwrap();
}

#[tokio::test]
async fn flush_returns_once_a_dropped_guards_release_is_answered() {
    let client = lock_client().await;
    let resource = unique("guard-flushed");
    let guard = client
        .lock(&resource, &guard_options("alice", 60_000, 20_000))
        .await
        .unwrap();

    drop(guard);
    client.flush().await;
    assert!(
        raw_item(&resource).await.is_none(),
        "released before flush returned, not after the minute's lease"
    );
    client.flush().await; // nothing left: at once
}

#[tokio::test]
async fn the_holder_replaces_and_removes_the_lock_data() {
    let client = lock_client().await;
    let resource = unique("guard-data");
    let guard = client
        .lock(
            &resource,
            &guard_options("alice", 60_000, 20_000).data(b"step 1".to_vec()),
        )
        .await
        .unwrap();
    let data = |status: LockStatus| match status {
        LockStatus::Held { holder, .. } => holder.data,
        other => panic!("the lock should be held: {other:?}"),
    };
    assert_eq!(
        data(client.status(&resource).await.unwrap()).as_deref(),
        Some(&b"step 1"[..])
    );

    guard.replace_data(Some(b"step 2".to_vec())).await.unwrap();
    assert_eq!(
        data(client.status(&resource).await.unwrap()).as_deref(),
        Some(&b"step 2"[..])
    );
    guard.replace_data(None).await.unwrap();
    assert_eq!(data(client.status(&resource).await.unwrap()), None);

    let too_large = vec![0u8; ddb_lock::limits::MAX_DATA_BYTES + 1];
    let err = guard.replace_data(Some(too_large)).await.unwrap_err();
    assert!(
        matches!(&err, Error::InvalidInput(e) if e.field() == "data"),
        "{err}"
    );
    assert!(guard.is_held(), "bad input changes nothing");
    guard.release().await.unwrap();
}

#[tokio::test]
async fn only_the_holder_can_replace_the_lock_data() {
    let client = lock_client().await;
    let resource = unique("data-not-owner");
    let alices = hold(&client, &resource, "alice", Duration::from_secs(60)).await;
    client.release(&alices).await.unwrap();
    let bobs = client
        .try_acquire(
            &resource,
            &AcquireOptions::new().owner("bob").data(b"bob's".to_vec()),
        )
        .await
        .unwrap()
        .unwrap();

    let outcome = client
        .extend_and_replace_data(&alices, Duration::from_secs(60), Some(b"alice's".to_vec()))
        .await
        .unwrap();

    assert!(
        matches!(outcome, ddb_lock::ExtendOutcome::NotOwner { .. }),
        "{outcome:?}"
    );
    let LockStatus::Held { holder, .. } = client.status(&resource).await.unwrap() else {
        panic!("bob's lock should be held");
    };
    assert_eq!(holder.data.as_deref(), Some(&b"bob's"[..]));
    client.release(&bobs).await.unwrap();
}

#[tokio::test]
async fn with_lock_releases_after_ok_after_an_error_and_after_a_panic() {
    let client = lock_client().await;
    let resource = unique("with-lock");

    let value = client
        .with_lock(
            &resource,
            &guard_options("alice", 60_000, 20_000),
            |watch| async move {
                assert!(watch.is_held());
                Ok::<_, Error>(7)
            },
        )
        .await
        .unwrap();
    assert_eq!(value, 7);
    assert_eq!(client.status(&resource).await.unwrap(), LockStatus::Free);

    #[derive(Debug)]
    enum WorkError {
        Failed,
        Lock,
    }
    impl From<Error> for WorkError {
        fn from(_: Error) -> Self {
            WorkError::Lock
        }
    }
    let failed = client
        .with_lock(
            &resource,
            &guard_options("alice", 60_000, 20_000),
            |_| async { Err::<(), _>(WorkError::Failed) },
        )
        .await;
    assert!(matches!(failed, Err(WorkError::Failed)), "{failed:?}");
    assert_eq!(client.status(&resource).await.unwrap(), LockStatus::Free);

    let panicking = client.clone();
    let panicked_resource = resource.clone();
    let joined = tokio::spawn(async move {
        panicking
            .with_lock(
                &panicked_resource,
                &guard_options("alice", 60_000, 20_000),
                |_| async {
                    panic!("the work panics");
                    #[allow(unreachable_code)]
                    Ok::<(), Error>(())
                },
            )
            .await
    })
    .await;
    assert!(joined.unwrap_err().is_panic(), "the panic resumes");
    assert_eq!(client.status(&resource).await.unwrap(), LockStatus::Free);
}

#[tokio::test]
async fn with_lock_stops_the_work_and_says_so_when_the_lock_is_lost() {
    let client = lock_client().await;
    let resource = unique("with-lock-lost");
    let (started_tx, started_rx) = tokio::sync::oneshot::channel();
    // Another client: the guard learns of it from its next extension.
    let admin = lock_client().await;
    let admin_resource = resource.clone();
    let intruder = tokio::spawn(async move {
        started_rx.await.unwrap();
        admin.force_release(&admin_resource).await.unwrap();
    });

    let result = timeout(
        PATIENCE,
        client.with_lock(
            &resource,
            &guard_options("alice", 5000, 50),
            |_| async move {
                started_tx.send(()).unwrap();
                std::future::pending::<()>().await;
                Ok::<_, Error>(())
            },
        ),
    )
    .await
    .expect("the work was stopped");

    intruder.await.unwrap();
    assert!(
        matches!(&result, Err(Error::Lost { reason, .. }) if **reason == LockLost::NotFound),
        "{result:?}"
    );
}

#[tokio::test]
async fn a_released_or_dropped_guard_tells_every_watch_at_once() {
    lock_client().await;
    let resource = unique("guard-watch-released");
    let proxy = Proxy::start(&endpoint()).await;
    let client = client_through(&proxy, None);

    // release(): lost while its DeleteItem is still unanswered.
    let guard = client
        .lock(&resource, &guard_options("alice", 60_000, 20_000))
        .await
        .unwrap();
    let watch = guard.watch();
    let mut answer = proxy.withhold_next_answer("DeleteItem");
    let release = tokio::spawn(guard.release());
    answer.applied().await;
    assert!(
        !watch.is_held(),
        "a watch says held while the guard releases"
    );
    assert_eq!(lost_now(&watch).await, Some(LockLost::Released));
    answer.drop_it();
    release.await.unwrap().unwrap();
    assert!(!watch.is_held());

    // Drop.
    let guard = client
        .lock(&resource, &guard_options("alice", 60_000, 20_000))
        .await
        .unwrap();
    let watch = guard.watch();
    drop(guard);
    assert!(
        !watch.is_held(),
        "a watch says held after its guard was dropped"
    );
    assert_eq!(lost_now(&watch).await, Some(LockLost::Released));

    // with_lock's own release.
    let (sender, receiver) = tokio::sync::oneshot::channel();
    client
        .with_lock(
            &resource,
            &guard_options("alice", 60_000, 20_000),
            |watch| {
                sender.send(watch.clone()).unwrap();
                async move { Ok::<_, Error>(()) }
            },
        )
        .await
        .unwrap();
    let watch = receiver.await.unwrap();
    assert!(
        !watch.is_held(),
        "a watch says held after with_lock released"
    );
    assert_eq!(lost_now(&watch).await, Some(LockLost::Released));
}

#[tokio::test]
async fn an_extension_applied_late_never_shortens_the_stored_lease() {
    lock_client().await;
    let resource = unique("extend-reordered");
    let proxy = Proxy::start(&endpoint()).await;
    let clock = AdjustableClock::new();
    let client = client_through(&proxy, Some(clock.clone()));
    let lock = hold(&client, &resource, "alice", Duration::from_secs(60)).await;

    // The first extension is applied and its answer withheld; the SDK retries it (the same
    // request, the same lease end) only after a second extension, sent later, was applied.
    let mut answer = proxy.withhold_next_answer("UpdateItem");
    let first = tokio::spawn({
        let (client, lock) = (client.clone(), lock.clone());
        async move { client.extend(&lock, Duration::from_secs(60)).await }
    });
    answer.applied().await;
    clock.advance(Duration::from_secs(5));
    let ExtendOutcome::Extended(second) =
        client.extend(&lock, Duration::from_secs(60)).await.unwrap()
    else {
        panic!("the second extension was refused");
    };
    answer.drop_it();
    let ExtendOutcome::Extended(first) = first.await.unwrap().unwrap() else {
        panic!("the retried first extension was refused");
    };

    let item = raw_item(&resource).await.unwrap();
    assert_eq!(
        string_attr(&item, "ExpiresAt"),
        stored(second.expires_at()),
        "the late retry shortened the stored lease"
    );
    assert!(first.expires_at() <= second.expires_at());
    assert!(
        first.valid_until() <= second.valid_until(),
        "the late answer promises no more than the later extension"
    );
    client.release(&lock).await.unwrap();
}

#[tokio::test]
async fn a_data_replacement_unanswered_within_the_lease_loses_the_guard() {
    lock_client().await;
    let resource = unique("guard-late-extension");
    let proxy = Proxy::start(&endpoint()).await;
    let client = client_through(&proxy, None);
    let guard = client
        .lock(&resource, &guard_options("alice", 1500, 1000))
        .await
        .unwrap();

    // While the replacement's answer is withheld the guard makes no other extension: letting its
    // lease run out on the monotonic clock is the behaviour under test.
    let mut answer = proxy.withhold_next_answer("UpdateItem");
    let (replaced, lost) = timeout(PATIENCE, async {
        tokio::join!(guard.replace_data(Some(b"step 2".to_vec())), async {
            answer.applied().await;
            guard.lost().await
        })
    })
    .await
    .expect("the guard was lost and the replacement gave up");

    assert!(
        matches!(lost, LockLost::LeaseRanOut { .. }),
        "expected the lease to run out, got {lost:?}"
    );
    assert!(
        matches!(&replaced, Err(Error::Lost { reason, .. }) if matches!(**reason, LockLost::LeaseRanOut { .. })),
        "{replaced:?}"
    );
    // The answer, when it comes, revives nothing.
    answer.drop_it();
    assert!(!guard.is_held());
    assert!(guard.lock().is_none());
    assert!(matches!(
        lost_now(&guard.watch()).await,
        Some(LockLost::LeaseRanOut { .. })
    ));
}

#[tokio::test]
async fn a_guard_extends_a_lock_handed_back_with_little_lease_left_at_once() {
    let direct = lock_client().await;
    let resource = unique("guard-idempotent-short");
    // Alice's lock, taken by a clock 57 s behind: three seconds of its minute are left.
    let behind = builder(ddb_lock_test_kit::dynamodb())
        .clock(OffsetClock::shared(chrono::TimeDelta::seconds(-57)))
        .build()
        .unwrap();
    let alices = hold(&behind, &resource, "alice", Duration::from_secs(60)).await;
    let proxy = Proxy::start(&endpoint()).await;
    let client = client_through(&proxy, None);

    let guard = client
        .lock(
            &resource,
            &guard_options("alice", 60_000, 20_000).idempotent(true),
        )
        .await
        .unwrap();
    assert_eq!(
        guard.lock().unwrap().lock_id(),
        alices.lock_id(),
        "handed back"
    );
    tokio::select! {
        biased;
        lost = guard.lost() => panic!("lost before the first extension: {lost}"),
        () = proxy.wait_for("UpdateItem", |c| c.answered >= 1) => {}
    }

    assert!(guard.is_held());
    let LockStatus::Held { holder, .. } = direct.status(&resource).await.unwrap() else {
        panic!("the handed-back lock expired");
    };
    assert!(holder.expires_at > alices.expires_at() + chrono::TimeDelta::seconds(30));
    guard.release().await.unwrap();
}

/// A guard handed back a lock with more lease than it asks for (an idempotent acquisition of a
/// lock its owner holds with a longer lease): its data replacement writes the payload, and the
/// guard's lock must say so. It kept the old payload, since the answer's lease was not the later.
#[tokio::test]
async fn a_handed_back_guards_data_replacement_shows_in_its_lock() {
    let client = lock_client().await;
    let resource = unique("guard-handed-back-data");
    let first = client
        .lock(
            &resource,
            &guard_options("alice", 60_000, 20_000)
                .idempotent(true)
                .data("old"),
        )
        .await
        .unwrap();
    let second = client
        .lock(
            &resource,
            &guard_options("alice", 10_000, 3_000).idempotent(true),
        )
        .await
        .unwrap();
    assert_eq!(
        second.lock().unwrap().lock_id(),
        first.lock().unwrap().lock_id()
    );

    let replaced = second.replace_data(Some(b"new".to_vec())).await.unwrap();
    assert!(
        matches!(replaced, ExtendOutcome::Extended(_)),
        "{replaced:?}"
    );
    assert_eq!(second.lock().unwrap().data(), Some(&b"new"[..]));
    assert_eq!(
        second.lock().unwrap().expires_at(),
        first.lock().unwrap().expires_at(),
        "the stored lease end, which the replacement kept"
    );
    assert_eq!(second.release().await.unwrap(), ReleaseOutcome::Released);
    drop(first);
}
