//! How a guard's hold ends other than by the guard itself, and what a release leaves behind: a
//! client that ends one of its own holds (release, release by owner, force release, an extension
//! that finds the lock taken) turns its guards lost before its request is sent; an idempotent
//! acquisition is never handed back a lock whose release has started; a release that DynamoDB
//! fails is sent again from the background.

use ddb_lock::{
    AcquireOptions, Error, ExtendOutcome, LockClient, LockLost, LockStatus, ReleaseOutcome,
};
use ddb_lock_test_kit::proxy::{Faults, Proxy};
use ddb_lock_test_kit::{
    client_through, endpoint, guard_options, hold, lock_client, lost_now, raw_item, unique,
    AdjustableClock,
};
use std::time::Duration;

mod failed_releases;
mod given_up;
mod late_answers;
mod scoped_work;
mod turns;

/// How long a test waits for what must come; a bug, not a slow machine, runs out of it.
const PATIENCE: Duration = Duration::from_secs(20);

/// Every way a client ends one of its own holds, other than through the guard itself: each must
/// turn the guard lost before its request is sent, as the guard's own release does.
#[tokio::test]
async fn a_guard_is_lost_as_soon_as_its_own_client_releases_its_lock() {
    let client = lock_client().await;
    for how in ["release", "release_owned", "force_release", "release_all"] {
        let resource = unique(&format!("guard-ended-by-{how}"));
        // A long heartbeat: only the client's own bookkeeping can tell the guard in time.
        let guard = client
            .lock(&resource, &guard_options("alice", 60_000, 20_000))
            .await
            .unwrap();
        match how {
            "release" => drop(client.release(guard.lock().unwrap()).await.unwrap()),
            "release_owned" => drop(client.release_owned(&resource, "alice").await.unwrap()),
            "force_release" => drop(client.force_release(&resource).await.unwrap()),
            _ => drop(client.release_all().await),
        }
        assert_eq!(client.status(&resource).await.unwrap(), LockStatus::Free);
        assert!(
            !guard.is_held(),
            "{how}: the guard says held for a free lock"
        );
        assert!(guard.lock().is_none(), "{how}");
        assert_eq!(
            lost_now(&guard.watch()).await,
            Some(LockLost::Released),
            "{how}"
        );
    }
}

#[tokio::test]
async fn guards_of_one_idempotent_acquisition_are_all_lost_when_one_releases() {
    let client = lock_client().await;
    let resource = unique("guard-idempotent-twice");
    let twice = guard_options("alice", 60_000, 20_000).idempotent(true);
    let first = client.lock(&resource, &twice).await.unwrap();
    let second = client.lock(&resource, &twice).await.unwrap();
    let third = client.lock(&resource, &twice).await.unwrap();
    assert_eq!(
        first.lock().unwrap().lock_id(),
        second.lock().unwrap().lock_id(),
        "one acquisition, handed back"
    );

    assert_eq!(first.release().await.unwrap(), ReleaseOutcome::Released);
    assert_eq!(client.status(&resource).await.unwrap(), LockStatus::Free);
    assert!(
        !second.is_held(),
        "a guard of the released acquisition says held"
    );
    assert_eq!(lost_now(&second.watch()).await, Some(LockLost::Released));
    drop(second);

    // release_all stops every guard of an acquisition, not only the last one made.
    let fourth = client.lock(&resource, &twice).await.unwrap();
    let fifth = client.lock(&resource, &twice).await.unwrap();
    assert!(
        third.lock().is_none(),
        "the third guard was lost with the first acquisition"
    );
    client.release_all().await;
    assert!(
        !fourth.is_held() && !fifth.is_held(),
        "release_all left a guard saying held"
    );
}

#[tokio::test]
async fn a_guard_is_lost_as_soon_as_an_extension_through_its_client_finds_the_lock_taken() {
    let client = lock_client().await;
    let other = lock_client().await;
    let resource = unique("guard-extension-elsewhere");
    let guard = client
        .lock(&resource, &guard_options("alice", 60_000, 20_000))
        .await
        .unwrap();
    let lock = guard.lock().unwrap();
    other.force_release(&resource).await.unwrap();
    let bobs = hold(&other, &resource, "bob", Duration::from_secs(60)).await;

    let outcome = client.extend(&lock, Duration::from_secs(60)).await.unwrap();
    assert!(
        matches!(outcome, ExtendOutcome::NotOwner { .. }),
        "{outcome:?}"
    );
    assert!(!guard.is_held(), "the guard says held for bob's lock");
    assert!(matches!(
        lost_now(&guard.watch()).await,
        Some(LockLost::TakenOver { holder }) if holder.owner == "bob"
    ));
    other.release(&bobs).await.unwrap();
}

#[tokio::test]
async fn an_idempotent_acquire_is_not_handed_a_lock_whose_release_is_under_way() {
    let (resource, proxy, client, again, first) = alice_holds("guard-idempotent-releasing").await;

    // The dropped guard's release is on its way but has not reached DynamoDB.
    let mut release = proxy.delay_next_request("DeleteItem");
    drop(first);
    let second = client.try_lock(&resource, &again).await.unwrap();
    release.captured().await;
    assert!(release.deliver().await, "the release reached DynamoDB");
    client.flush().await;
    not_handed_back(&client, &resource, &again, second).await;
}

/// Alice's guard on a new resource, through a proxy, and the idempotent options that took it.
async fn alice_holds(
    name: &str,
) -> (
    String,
    Proxy,
    LockClient,
    AcquireOptions,
    ddb_lock::LockGuard,
) {
    lock_client().await;
    let resource = unique(name);
    let proxy = Proxy::start(&endpoint()).await;
    let client = client_through(&proxy, None);
    let again = guard_options("alice", 60_000, 20_000).idempotent(true);
    let first = client.lock(&resource, &again).await.unwrap();
    (resource, proxy, client, again, first)
}

/// After its release: the lock is free, `second` (an idempotent try of the same owner made
/// meanwhile) was not handed it back, and the next try takes it.
async fn not_handed_back(
    client: &LockClient,
    resource: &str,
    again: &AcquireOptions,
    second: Option<ddb_lock::LockGuard>,
) {
    assert_eq!(client.status(resource).await.unwrap(), LockStatus::Free);
    assert!(
        second.as_ref().is_none_or(|guard| !guard.is_held()),
        "a guard says held for a released lock"
    );
    assert!(second.is_none(), "handed back a released lock");
    let third = client.try_lock(resource, again).await.unwrap();
    assert!(third.is_some(), "free, and taken by the next try");
}

/// The refusal that shows the owner's lock can be decided before this client's release of that
/// lock is applied, and read after the release was answered: the lock it shows is gone by then,
/// and must not be handed back (it was, with a guard saying held for a deleted item, when the
/// release's answer had cleared the mark that a release was under way).
#[tokio::test]
async fn an_idempotent_acquire_answered_after_a_release_is_not_handed_the_released_lock() {
    let (resource, proxy, client, again, first) = alice_holds("guard-idempotent-released").await;

    let mut refusal = proxy.withhold_next_answer("PutItem");
    let second = {
        let (client, resource, again) = (client.clone(), resource.clone(), again.clone());
        tokio::spawn(async move { client.try_lock(&resource, &again).await })
    };
    refusal.applied().await; // refused by the first lock, still there
    assert_eq!(first.release().await.unwrap(), ReleaseOutcome::Released);
    refusal.deliver();
    let second = second.await.unwrap().unwrap();
    not_handed_back(&client, &resource, &again, second).await;
}

/// A guard's release that DynamoDB fails (every attempt of the SDK throttled) returns the error,
/// and the guard, consumed, sends the release again from the background, which `flush` waits
/// for: the lock does not stay held for its lease (it did, with nobody left to release it).
#[tokio::test]
async fn a_guard_release_that_dynamodb_fails_is_sent_again_in_the_background() {
    lock_client().await;
    let resource = unique("guard-release-failed");
    let proxy = Proxy::start(&endpoint()).await;
    let client = client_through(&proxy, None);
    let guard = client
        .lock(&resource, &guard_options("alice", 60_000, 20_000))
        .await
        .unwrap();

    proxy.set_faults(Faults {
        throttle_every: 1,
        ..Faults::default()
    });
    let failed = guard.release().await;
    assert!(matches!(failed, Err(Error::Backend { .. })), "{failed:?}");
    proxy.set_faults(Faults::default());
    client.flush().await;
    assert_eq!(client.status(&resource).await.unwrap(), LockStatus::Free);
}

/// A heartbeat whose extension was applied but never answered gives the lock up when the lease
/// runs out, and releases it (the extension may have landed). The release must not be cancelled
/// by the guard's own stop, which the release turns (it aborted the heartbeat's task, which was
/// the task sending the release: the lock stayed taken for a whole lease).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_guard_whose_lease_ran_out_releases_the_lock_its_unanswered_extension_kept() {
    let direct = lock_client().await;
    let resource = unique("guard-ran-out-releases");
    let proxy = Proxy::start(&endpoint()).await;
    let client = client_through(&proxy, None);
    let guard = client
        .lock(&resource, &guard_options("alice", 1500, 500))
        .await
        .unwrap();

    let mut extension = proxy.withhold_next_answer("UpdateItem");
    extension.applied().await;
    let lost = tokio::time::timeout(PATIENCE, guard.lost())
        .await
        .expect("loss signalled");
    assert!(matches!(lost, LockLost::LeaseRanOut { .. }), "{lost:?}");
    // The guard is kept: only the heartbeat's own release can free the lock before its lease
    // (lengthened by the extension that landed) ends.
    tokio::time::timeout(
        PATIENCE,
        proxy.wait_for("DeleteItem", |counts| counts.answered >= 1),
    )
    .await
    .expect("the guard's heartbeat released the lock it gave up");
    client.flush().await;
    assert_eq!(direct.status(&resource).await.unwrap(), LockStatus::Free);
    assert!(!guard.is_held());
    extension.drop_it();
}

/// A release by owner that spares a lock acquired after `acquired_by` leaves the client's memory
/// of that lock alone: its guard still says held, `release_all` still releases it (the spared
/// hold was forgotten, with its guard's stop, and `release_all` left the lock taken).
#[tokio::test]
async fn a_release_by_owner_that_spares_a_newer_lock_keeps_the_client_holding_it() {
    let client = lock_client().await;
    let resource = unique("guard-spared-by-owner-release");
    let guard = client
        .lock(&resource, &guard_options("exec", 60_000, 20_000))
        .await
        .unwrap();
    let acquired_at = guard.lock().unwrap().acquired_at();

    let outcome = client
        .release_owned_acquired_by(
            &resource,
            "exec",
            acquired_at - chrono::TimeDelta::seconds(1),
        )
        .await
        .unwrap();
    assert!(
        matches!(outcome, ReleaseOutcome::NotOwner { .. }),
        "{outcome:?}"
    );
    assert!(guard.is_held());

    let released = client.release_all().await;
    assert_eq!(released.len(), 1, "release_all forgot the spared lock");
    assert!(matches!(released[0].1, Ok(ReleaseOutcome::Released)));
    assert!(!guard.is_held());
    assert_eq!(client.status(&resource).await.unwrap(), LockStatus::Free);
}

/// A force release whose read is delayed while this client takes the lock: the delete removes the
/// lock it then reads, and the guard on that lock is lost before the delete is sent (it stayed
/// held for a deleted lock: the force release had stopped only the guards there before its read).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_force_release_stops_the_guard_of_a_lock_taken_while_it_read() {
    let _ = lock_client().await;
    let proxy = Proxy::start(&endpoint()).await;
    let client = client_through(&proxy, None);
    let resource = unique("guard-force-released-while-taken");

    let mut read = proxy.delay_next_request("GetItem");
    let forcing = {
        let (client, resource) = (client.clone(), resource.clone());
        tokio::spawn(async move { client.force_release(&resource).await })
    };
    read.captured().await;
    let guard = client
        .lock(&resource, &guard_options("alice", 60_000, 20_000))
        .await
        .unwrap();
    assert!(read.deliver().await);
    let removed = forcing.await.unwrap().unwrap();

    assert_eq!(removed.map(|holder| holder.owner), Some("alice".to_owned()));
    assert_eq!(client.status(&resource).await.unwrap(), LockStatus::Free);
    assert!(
        !guard.is_held(),
        "the guard says held for a force-released lock"
    );
}

/// A guard whose extension finds its lease over by the wall clock (a clock that jumped) is lost as
/// `Expired`, and releases the lock as when its lease runs out: an extension of it given up on
/// could still land with its earlier `:now` and lengthen the lease of a lock nobody uses.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_guard_found_expired_releases_its_lock() {
    let _ = lock_client().await;
    let proxy = Proxy::start(&endpoint()).await;
    let clock = AdjustableClock::new();
    let client = client_through(&proxy, Some(clock.clone()));
    let resource = unique("guard-found-expired");
    let guard = client
        .lock(&resource, &guard_options("alice", 60_000, 200))
        .await
        .unwrap();

    clock.advance(Duration::from_secs(61));
    let lost = tokio::time::timeout(PATIENCE, guard.lost())
        .await
        .expect("loss signalled");
    assert!(matches!(lost, LockLost::Expired { .. }), "{lost:?}");
    tokio::time::timeout(
        PATIENCE,
        proxy.wait_for("DeleteItem", |counts| counts.answered >= 1),
    )
    .await
    .expect("the guard released the lock it found expired");
    client.flush().await;
    assert_eq!(raw_item(&resource).await, None);
}

/// As a heartbeat does, a data replacement that finds the lease expired (a clock that jumped)
/// answers `Expired` and releases the lock before it returns.
#[tokio::test]
async fn a_data_replacement_that_finds_the_lease_expired_releases_the_lock() {
    let _ = lock_client().await;
    let clock = AdjustableClock::new();
    let client = ddb_lock_test_kit::builder(ddb_lock_test_kit::dynamodb())
        .clock(clock.clone())
        .build()
        .unwrap();
    let resource = unique("guard-replace-finds-expired");
    let guard = client
        .lock(&resource, &guard_options("alice", 60_000, 20_000))
        .await
        .unwrap();

    clock.advance(Duration::from_secs(61));
    let outcome = guard.replace_data(Some(b"step 2".to_vec())).await.unwrap();

    assert!(
        matches!(outcome, ExtendOutcome::Expired { .. }),
        "{outcome:?}"
    );
    assert!(!guard.is_held());
    assert_eq!(raw_item(&resource).await, None, "the expired lock was left");
}

/// A reader's guard asked to release with a payload (which only an exclusive hold keeps) is
/// refused, and its lock is released as a dropped guard's: the refusal came after the lock had
/// been marked released, the guard took it as a release, and the reader's hold stayed, blocking
/// writers, for its lease.
#[tokio::test]
async fn a_readers_guard_refused_a_payload_on_release_still_releases() {
    lock_client().await;
    let client = ddb_lock_test_kit::builder(ddb_lock_test_kit::dynamodb())
        .delete_on_release(false)
        .build()
        .unwrap();
    let resource = unique("guard-reader-payload");
    let guard = client
        .lock(&resource, &ddb_lock_test_kit::reader_options("reader"))
        .await
        .unwrap();
    match guard.release_and_replace_data(Some(b"x".to_vec())).await {
        Err(Error::InvalidInput(ddb_lock::InvalidInput::NotForMode { field: "data", .. })) => {}
        other => panic!("expected NotForMode naming data, got {other:?}"),
    }
    client.flush().await;
    assert_eq!(client.status(&resource).await.unwrap(), LockStatus::Free);
}

/// An acquisition dropped with its write applied but unanswered, after an idempotent acquisition
/// of the same owner through the same client was handed that lock back: the dropped one's
/// clean-up leaves the lock to the acquisition that holds it. It deleted the lock, which the
/// other went on believing it held, and a third client took it.
#[tokio::test]
async fn a_dropped_acquisitions_clean_up_spares_the_lock_handed_back_meanwhile() {
    lock_client().await;
    let proxy = Proxy::start(&endpoint()).await;
    let client = client_through(&proxy, None);
    let resource = unique("dropped-then-handed-back");
    let saga = AcquireOptions::new()
        .owner("saga-1")
        .idempotent(true)
        .lease(Duration::from_secs(60));
    let mut answer = proxy.withhold_next_answer("PutItem");
    let first = {
        let (client, resource, saga) = (client.clone(), resource.clone(), saga.clone());
        tokio::spawn(async move { client.acquire(&resource, &saga).await })
    };
    answer.applied().await;
    let handed_back = client
        .try_acquire(&resource, &saga)
        .await
        .unwrap()
        .expect("the owner's live lock, handed back");
    first.abort();
    assert!(first.await.unwrap_err().is_cancelled());
    answer.drop_it();
    client.flush().await;

    let item = raw_item(&resource)
        .await
        .expect("the lock handed back stands");
    assert_eq!(
        ddb_lock_test_kit::string_attr(&item, "LockID"),
        handed_back.lock_id().to_string()
    );
    assert!(
        lock_client()
            .await
            .try_acquire(&resource, &AcquireOptions::new().owner("other"))
            .await
            .unwrap()
            .is_none(),
        "another client took a lock held"
    );
    assert_eq!(
        client.release(&handed_back).await.unwrap(),
        ReleaseOutcome::Released
    );
}

/// A release or an extension by a handle with the lock's id but another owner (a caller that
/// rebuilt the handle with its default owner) changes nothing of the lock, and the client keeps
/// it: its guard stays held, and `release_all` ends it. The client stopped the guard (taken over,
/// by its own holder) and forgot the hold, which stayed held by nobody for its lease (found by
/// review).
#[tokio::test]
async fn a_handle_of_another_owner_leaves_the_hold_to_its_client() {
    let client = lock_client().await;
    let resource = unique("owner-mismatch-kept");
    let guard = client
        .lock(&resource, &guard_options("alice", 60_000, 20_000))
        .await
        .unwrap();
    let lock_id = guard.lock().unwrap().lock_id();
    let wrong = ddb_lock::LockHandle::new(&resource, "bob", lock_id);
    let extended = client
        .extend(&wrong, Duration::from_secs(30))
        .await
        .unwrap();
    assert!(
        matches!(extended, ExtendOutcome::NotOwner { .. }),
        "{extended:?}"
    );
    let released = client.release(&wrong).await.unwrap();
    assert!(
        matches!(released, ReleaseOutcome::NotOwner { .. }),
        "{released:?}"
    );
    assert!(guard.is_held(), "the guard of the real hold was stopped");
    ddb_lock_test_kit::assert_release_all_releases(&client, lock_id, "bob's handle").await;
    assert_eq!(client.status(&resource).await.unwrap(), LockStatus::Free);
}
