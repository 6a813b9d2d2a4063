//! Acquire, contend, release, extend, status and force release against the endpoint.

use chrono::TimeDelta;
use ddb_lock::{AcquireOptions, ExtendOutcome, LockHandle, LockId, LockStatus, ReleaseOutcome};
use ddb_lock_test_kit::proxy::Proxy;
use ddb_lock_test_kit::{
    builder, dynamodb, dynamodb_at, endpoint, hold, lock_client, raw_item, stored, string_attr,
    unique, OffsetClock,
};
use std::time::Duration;
use tokio::time::timeout;

const LEASE: Duration = Duration::from_secs(30);
/// How long a test waits for what must come; a bug, not a slow machine, runs out of it.
const PATIENCE: Duration = Duration::from_secs(20);

fn as_owner(owner: &str) -> AcquireOptions {
    AcquireOptions::new().owner(owner)
}

#[tokio::test]
async fn acquire_stores_the_documented_item_and_release_deletes_it() {
    let client = lock_client().await;
    let resource = unique("round-trip");
    let lock = client
        .try_acquire(&resource, &as_owner("alice").lease(Duration::from_secs(30)))
        .await
        .unwrap()
        .expect("a free lock is acquired");

    let item = raw_item(&resource).await.expect("lock item stored");
    assert_eq!(string_attr(&item, "PK"), format!("LOCK#{resource}"));
    assert_eq!(string_attr(&item, "SK"), "LOCK");
    assert_eq!(string_attr(&item, "LockID"), lock.lock_id().to_string());
    assert_eq!(string_attr(&item, "Owner"), "alice");
    let acquired_at = string_attr(&item, "AcquiredAt");
    let expires_at = string_attr(&item, "ExpiresAt");
    assert_eq!(acquired_at, stored(lock.acquired_at()));
    assert_eq!(expires_at, stored(lock.expires_at()));
    assert_eq!(
        lock.expires_at() - lock.acquired_at(),
        TimeDelta::seconds(30)
    );
    let ttl: i64 = match &item["TTL"] {
        aws_sdk_dynamodb::types::AttributeValue::N(n) => n.parse().unwrap(),
        other => panic!("TTL is {other:?}, expected a number"),
    };
    // The default grace period is one hour after the lease ends, in whole seconds rounded up.
    let deletable = lock.expires_at() + TimeDelta::hours(1);
    let rounded_up = i64::from(deletable.timestamp_subsec_millis() > 0);
    assert_eq!(ttl, deletable.timestamp() + rounded_up);
    assert_eq!(
        item["LeaseMs"],
        aws_sdk_dynamodb::types::AttributeValue::N("30000".into())
    );
    assert!(uuid::Uuid::try_parse(string_attr(&item, "Version")).is_ok());
    assert_eq!(item.len(), 9, "unexpected attributes in {item:?}");

    assert_eq!(
        client.release(&lock).await.unwrap(),
        ReleaseOutcome::Released
    );
    assert!(
        raw_item(&resource).await.is_none(),
        "release deletes the item"
    );
}

#[tokio::test]
async fn a_held_lock_is_not_acquired_by_another_owner() {
    let client = lock_client().await;
    let resource = unique("contention");
    let held = hold(&client, &resource, "alice", LEASE).await;
    let second = client
        .try_acquire(&resource, &as_owner("bob"))
        .await
        .unwrap();
    assert_eq!(second, None, "bob must not get alice's lock");
    // Not re-entrant either: the same owner contends like anyone else.
    assert_eq!(
        client
            .try_acquire(&resource, &as_owner("alice"))
            .await
            .unwrap(),
        None
    );
    let item = raw_item(&resource).await.unwrap();
    assert_eq!(
        string_attr(&item, "LockID"),
        held.lock_id().to_string(),
        "item unchanged"
    );
}

#[tokio::test]
async fn an_expired_lock_is_taken_over_and_the_old_holder_can_no_longer_release_or_extend() {
    let client = lock_client().await;
    let resource = unique("takeover");
    let old = hold(&client, &resource, "crashed", Duration::from_millis(200)).await;
    // acquire waits until the lease ends (it reads ExpiresAt from the failed attempt), then wins.
    let new = client
        .acquire(
            &resource,
            &as_owner("successor").timeout(Duration::from_secs(30)),
        )
        .await
        .expect("expired lock taken over");
    assert!(
        new.acquired_at() > old.expires_at(),
        "taken over only after expiry"
    );
    assert_ne!(new.lock_id(), old.lock_id());

    match client.release(&old).await.unwrap() {
        ReleaseOutcome::NotOwner { holder } => assert_eq!(holder.owner, "successor"),
        other => panic!("release after takeover must be rejected, got {other:?}"),
    }
    match client.extend(&old, Duration::from_secs(30)).await.unwrap() {
        ExtendOutcome::NotOwner { holder } => assert_eq!(holder.owner, "successor"),
        other => panic!("extend after takeover must be rejected, got {other:?}"),
    }
    let item = raw_item(&resource).await.unwrap();
    assert_eq!(
        string_attr(&item, "LockID"),
        new.lock_id().to_string(),
        "new lock intact"
    );
}

#[tokio::test]
async fn release_with_the_wrong_owner_or_lock_id_is_rejected_and_the_lock_stays_held() {
    let client = lock_client().await;
    let resource = unique("wrong-release");
    let lock = hold(&client, &resource, "alice", LEASE).await;

    let wrong_owner = LockHandle::new(&resource, "mallory", lock.lock_id());
    match client.release(&wrong_owner).await.unwrap() {
        ReleaseOutcome::NotOwner { holder } => assert_eq!(holder.owner, "alice"),
        other => panic!("wrong owner must be rejected, got {other:?}"),
    }
    let other_id = LockId::parse("00000000-0000-4000-8000-000000000000").unwrap();
    let wrong_id = LockHandle::new(&resource, "alice", other_id);
    assert!(matches!(
        client.release(&wrong_id).await.unwrap(),
        ReleaseOutcome::NotOwner { .. }
    ));

    match client.status(&resource).await.unwrap() {
        LockStatus::Held { holder, .. } => assert_eq!(holder.owner, "alice"),
        other => panic!("a rejected release must leave the lock held: {other:?}"),
    }
    assert_eq!(
        client.release(&lock).await.unwrap(),
        ReleaseOutcome::Released
    );
}

#[tokio::test]
async fn releasing_twice_reports_not_found() {
    let client = lock_client().await;
    let resource = unique("double-release");
    let lock = hold(&client, &resource, "alice", LEASE).await;
    assert_eq!(
        client.release(&lock).await.unwrap(),
        ReleaseOutcome::Released
    );
    assert_eq!(
        client.release(&lock).await.unwrap(),
        ReleaseOutcome::NotFound
    );
}

#[tokio::test]
async fn extend_moves_expires_at_and_ttl_of_a_live_lock() {
    let client = lock_client().await;
    let resource = unique("extend");
    let lock = hold(&client, &resource, "alice", Duration::from_secs(10)).await;
    let before = raw_item(&resource).await.unwrap();

    let ExtendOutcome::Extended(extended) = client
        .extend(&lock, Duration::from_secs(3600))
        .await
        .unwrap()
    else {
        panic!("a live lock must be extended");
    };
    assert_eq!(extended.lock_id(), lock.lock_id());
    assert_eq!(extended.acquired_at(), lock.acquired_at());
    assert!(extended.expires_at() >= lock.acquired_at() + TimeDelta::seconds(3600));

    let after = raw_item(&resource).await.unwrap();
    assert_eq!(
        string_attr(&after, "ExpiresAt"),
        stored(extended.expires_at())
    );
    assert_ne!(after["TTL"], before["TTL"], "TTL moves with the lease");
    assert_eq!(
        string_attr(&after, "AcquiredAt"),
        string_attr(&before, "AcquiredAt")
    );
}

#[tokio::test]
async fn extend_of_a_lapsed_lease_is_refused_even_if_nobody_took_it() {
    let client = lock_client().await;
    let resource = unique("extend-lapsed");
    let lock = hold(&client, &resource, "alice", Duration::from_secs(60)).await;
    // The same holder, seen from a clock two minutes later: the lease has ended.
    let later = builder(dynamodb())
        .clock(OffsetClock::shared(TimeDelta::minutes(2)))
        .build()
        .unwrap();
    match later.extend(&lock, Duration::from_secs(60)).await.unwrap() {
        ExtendOutcome::Expired { expired_at } => assert_eq!(expired_at, lock.expires_at()),
        other => panic!("expected Expired, got {other:?}"),
    }
    let item = raw_item(&resource).await.unwrap();
    assert_eq!(
        string_attr(&item, "ExpiresAt"),
        stored(lock.expires_at()),
        "a refused extension changes nothing"
    );
}

#[tokio::test]
async fn extend_of_a_released_lock_reports_not_found_and_creates_nothing() {
    let client = lock_client().await;
    let resource = unique("extend-released");
    let lock = hold(&client, &resource, "alice", LEASE).await;
    client.release(&lock).await.unwrap();
    assert_eq!(
        client.extend(&lock, Duration::from_secs(30)).await.unwrap(),
        ExtendOutcome::NotFound
    );
    assert!(
        raw_item(&resource).await.is_none(),
        "extend must not recreate the item"
    );
}

#[tokio::test]
async fn status_reports_holder_and_remaining_time_and_an_expired_item_as_free() {
    let client = lock_client().await;
    let resource = unique("status");
    assert_eq!(client.status(&resource).await.unwrap(), LockStatus::Free);

    let lock = hold(&client, &resource, "alice", Duration::from_secs(60)).await;
    match client.status(&resource).await.unwrap() {
        LockStatus::Held {
            holder,
            remaining,
            queue,
        } => {
            assert!(queue.is_empty(), "nobody waits in line: {queue:?}");
            assert_eq!(holder.owner, "alice");
            assert_eq!(holder.acquired_at, lock.acquired_at());
            assert_eq!(holder.expires_at, lock.expires_at());
            assert!(remaining <= Duration::from_secs(60) && remaining > Duration::ZERO);
        }
        other => panic!("a held lock must read as held: {other:?}"),
    }

    // Past the lease the item is still there (TTL deletion is late) but the lock is free.
    let later = builder(dynamodb())
        .clock(OffsetClock::shared(TimeDelta::minutes(2)))
        .build()
        .unwrap();
    assert!(raw_item(&resource).await.is_some());
    assert_eq!(later.status(&resource).await.unwrap(), LockStatus::Free);
}

#[tokio::test]
async fn force_release_removes_anyones_lock_and_says_whose() {
    let client = lock_client().await;
    let resource = unique("force");
    assert_eq!(client.force_release(&resource).await.unwrap(), None);

    let lock = hold(&client, &resource, "stuck", LEASE).await;
    let removed = client.force_release(&resource).await.unwrap();
    assert_eq!(removed.map(|h| h.owner), Some("stuck".to_owned()));
    assert_eq!(client.status(&resource).await.unwrap(), LockStatus::Free);
    assert!(raw_item(&resource).await.is_none());
    // The removed holder learns it on its next release.
    assert_eq!(
        client.release(&lock).await.unwrap(),
        ReleaseOutcome::NotFound
    );
    assert!(client
        .try_acquire(&resource, &as_owner("next"))
        .await
        .unwrap()
        .is_some());
}

#[tokio::test]
async fn release_owned_releases_the_owners_lock_whatever_its_id_and_no_one_elses() {
    let client = lock_client().await;
    let resource = unique("release-owned");
    hold(&client, &resource, "execution-7", LEASE).await;
    match client
        .release_owned(&resource, "execution-8")
        .await
        .unwrap()
    {
        ReleaseOutcome::NotOwner { holder } => assert_eq!(holder.owner, "execution-7"),
        other => panic!("another owner's lock must be kept, got {other:?}"),
    }
    assert!(raw_item(&resource).await.is_some());
    assert_eq!(
        client
            .release_owned(&resource, "execution-7")
            .await
            .unwrap(),
        ReleaseOutcome::Released
    );
    assert!(raw_item(&resource).await.is_none());
    assert_eq!(
        client
            .release_owned(&resource, "execution-7")
            .await
            .unwrap(),
        ReleaseOutcome::NotFound
    );
}

/// A release (by lock, by owner, with a new payload) whose future is dropped at its first await
/// (a timeout, a `select!`) still releases: it is sent from a task of the client, which `flush`
/// waits for. Awaited in place, it was dropped before its request left (here: while it opened a
/// connection, the one it had being busy), and the lock stayed held for its lease (found by
/// review).
#[tokio::test]
async fn a_release_dropped_at_its_first_await_still_releases() {
    lock_client().await;
    let proxy = Proxy::start(&endpoint()).await;
    let deleting = ddb_lock_test_kit::client_at(&proxy.endpoint());
    let keeping = builder(dynamodb_at(&proxy.endpoint()))
        .delete_on_release(false)
        .build()
        .unwrap();
    let alice = as_owner("alice").lease(Duration::from_secs(60));
    for way in ["by lock", "by owner", "with a payload"] {
        let resource = unique("dropped-release");
        let client = if way == "with a payload" {
            &keeping
        } else {
            &deleting
        };
        let lock = client
            .try_acquire(&resource, &alice)
            .await
            .unwrap()
            .unwrap();
        // The client's connection is busy with a read whose answer is withheld.
        let mut busy = proxy.withhold_next_answer("GetItem");
        let reading = tokio::spawn({
            let (client, resource) = (client.clone(), resource.clone());
            async move { client.status(&resource).await }
        });
        busy.applied().await;
        let dropped = match way {
            "by lock" => timeout(Duration::ZERO, client.release(&lock)).await,
            "by owner" => {
                let release = client.release_owned(&resource, "alice");
                tokio::time::timeout(Duration::ZERO, release).await
            }
            _ => {
                let release = client.release_and_replace_data(&lock, Some(b"next".to_vec()));
                tokio::time::timeout(Duration::ZERO, release).await
            }
        };
        assert!(dropped.is_err(), "{way}: dropped before its answer");
        busy.deliver();
        reading.await.unwrap().unwrap();
        client.flush().await;
        assert_eq!(
            client.status(&resource).await.unwrap(),
            LockStatus::Free,
            "{way}"
        );
    }
}

#[tokio::test]
async fn a_release_cancelled_at_its_await_still_releases() {
    lock_client().await;
    let resource = unique("guard-release-cancelled");
    let proxy = Proxy::start(&endpoint()).await;
    let client = ddb_lock_test_kit::client_through(&proxy, None);
    let guard = client
        .lock(
            &resource,
            &ddb_lock_test_kit::guard_options("alice", 60_000, 20_000),
        )
        .await
        .unwrap();

    // Polled once and dropped at its first await, as an outer timeout or a `select!` would: on this
    // current-thread runtime its DeleteItem has not left yet.
    let cancelled = timeout(Duration::ZERO, guard.release()).await;
    assert!(cancelled.is_err(), "the release was cancelled");

    // The lease is a minute: only a release frees the lock within the patience.
    timeout(PATIENCE, proxy.wait_for("DeleteItem", |c| c.answered >= 1))
        .await
        .expect("the cancelled release still sent its DeleteItem");
    assert_eq!(client.status(&resource).await.unwrap(), LockStatus::Free);

    // Cancelled after its DeleteItem was applied, its answer still to come: the guard's drop
    // leaves the lock to that release (a copy of its own could land first), and the release's
    // resend after the lost answer finds nothing and touches nobody else's lock.
    let guard = client
        .lock(
            &resource,
            &ddb_lock_test_kit::guard_options("alice", 60_000, 20_000),
        )
        .await
        .unwrap();
    let sent = proxy.counts("DeleteItem").requests;
    let mut answer = proxy.withhold_next_answer("DeleteItem");
    tokio::select! {
        outcome = guard.release() => panic!("the answer was withheld, yet: {outcome:?}"),
        () = answer.applied() => {}
    }
    let direct = lock_client().await;
    let bobs = hold(&direct, &resource, "bob", Duration::from_secs(60)).await;
    answer.drop_it();
    client.flush().await;
    let item = raw_item(&resource).await.expect("bob's lock untouched");
    assert_eq!(string_attr(&item, "LockID"), bobs.lock_id().to_string());
    assert_eq!(
        proxy.counts("DeleteItem").requests,
        sent + 2,
        "the release and the SDK's resend, no copy from the drop"
    );
    direct.release(&bobs).await.unwrap();
}

/// A guard's release dropped at its first await (its request sent from a task of the client),
/// then failed by DynamoDB: the guard's drop left the lock to that release, which was sent once,
/// and the lock stayed held by nobody for its lease. A release nobody awaits any more is tried
/// again, as a dropped guard's is.
#[tokio::test]
async fn a_release_cancelled_at_its_await_then_failed_is_sent_again() {
    lock_client().await;
    let resource = unique("guard-release-cancelled-failed");
    let proxy = Proxy::start(&endpoint()).await;
    let client = ddb_lock_test_kit::client_without_retries(&proxy.endpoint());
    let guard = client
        .lock(
            &resource,
            &ddb_lock_test_kit::guard_options("alice", 60_000, 20_000),
        )
        .await
        .unwrap();
    proxy.refuse_next("DeleteItem", "ThrottlingException");
    let cancelled = timeout(Duration::ZERO, guard.release()).await;
    assert!(cancelled.is_err(), "the release was cancelled");
    client.flush().await;
    assert_eq!(
        proxy.counts("DeleteItem").throttled,
        1,
        "the first send failed"
    );
    assert_eq!(client.status(&resource).await.unwrap(), LockStatus::Free);
}

/// A release DynamoDB fails once, with the SDK's retries off: the client sends it again before
/// answering, and answers what the resend found. Answered the first failure while it went on
/// sending, it told its caller (a saga's retry, `release_all`) the lock was not released, and the
/// caller's own retry then found it gone or someone else's.
#[tokio::test]
async fn a_release_dynamodb_fails_once_is_answered_after_it_is_sent_again() {
    lock_client().await;
    let proxy = Proxy::start(&endpoint()).await;
    let client = ddb_lock_test_kit::client_without_retries(&proxy.endpoint());
    let resource = unique("release-failed-once");
    let lock = hold(&client, &resource, "alice", LEASE).await;
    proxy.refuse_next("DeleteItem", "InternalServerError");
    let outcome = client.release(&lock).await.unwrap();
    assert!(
        matches!(
            outcome,
            ReleaseOutcome::Released | ReleaseOutcome::Unconfirmed
        ),
        "{outcome:?}"
    );
    assert_eq!(client.status(&resource).await.unwrap(), LockStatus::Free);
}
