//! Releases of one acquisition started through one client while another of it is on its way
//! (two tasks releasing the same lock, a twin guard's release, `release_all` beside a release):
//! each is sent after the one before it, within a bound, and reads what it finds as the truth
//! about the lock, a resend only where an earlier one may have released it.

use ddb_lock::{AcquireOptions, LockClient, ReleaseOutcome};
use ddb_lock_test_kit::proxy::Proxy;
use ddb_lock_test_kit::{
    client_through, endpoint, guard_options, lock_client, unique, AdjustableClock,
};
use std::time::Duration;

/// How long a test waits for an answer that must come, so that a hang fails it.
const PATIENCE: Duration = Duration::from_secs(20);

/// Alice's ten-second lock on `resource`, taken through `client`.
async fn alices(client: &LockClient, resource: &str) -> ddb_lock::Lock {
    client
        .try_acquire(resource, &owner("alice"))
        .await
        .unwrap()
        .expect("a free lock")
}

fn owner(name: &str) -> AcquireOptions {
    AcquireOptions::new()
        .owner(name)
        .lease(Duration::from_secs(10))
}

/// Two releases of alice's lock at once, the first held in the network until `before_delivery`
/// has run; their outcomes, in order.
async fn two_releases(
    proxy: &Proxy,
    client: &LockClient,
    lock: &ddb_lock::Lock,
    operation: &str,
    second_with_data: bool,
) -> (ReleaseOutcome, ReleaseOutcome) {
    let mut held = proxy.delay_next_request(operation);
    let first = tokio::spawn({
        let (client, lock) = (client.clone(), lock.clone());
        async move { client.release(&lock).await }
    });
    held.captured().await;
    let second = tokio::spawn({
        let (client, lock) = (client.clone(), lock.clone());
        async move {
            if second_with_data {
                client
                    .release_and_replace_data(&lock, Some(b"next".to_vec()))
                    .await
            } else {
                client.release(&lock).await
            }
        }
    });
    assert!(
        held.deliver().await,
        "the first release reached the endpoint"
    );
    let first = first.await.unwrap().unwrap();
    let second = tokio::time::timeout(PATIENCE, second)
        .await
        .expect("the second release is answered")
        .unwrap()
        .unwrap();
    (first, second)
}

/// The lock, lapsed, taken by bob; two releases of alice's acquisition at once: the first finds
/// bob's lock, and so must the second. Sent after the first as a resend, it read bob's lock as
/// its own first send's doing and answered `Unconfirmed`, hiding the loss.
#[tokio::test]
async fn a_release_after_one_that_found_the_lock_taken_finds_it_taken_too() {
    let _ = lock_client().await;
    let proxy = Proxy::start(&endpoint()).await;
    let clock = AdjustableClock::new();
    let alice = client_through(&proxy, Some(clock.clone()));
    let resource = unique("releases-after-taken");
    let lock = alices(&alice, &resource).await;
    clock.advance(Duration::from_secs(11));
    let bob = client_through(&proxy, Some(clock.clone()));
    let bobs = bob
        .try_acquire(&resource, &owner("bob"))
        .await
        .unwrap()
        .expect("the lapsed lock");
    let (first, second) = two_releases(&proxy, &alice, &lock, "DeleteItem", false).await;
    for outcome in [first, second] {
        assert!(
            matches!(&outcome, ReleaseOutcome::NotOwner { holder } if holder.owner == "bob"),
            "{outcome:?}"
        );
    }
    bob.release(&bobs).await.unwrap();
}

/// The same with twin guards (two guards of one idempotent acquisition), the second released
/// once the first was answered: it is sent after a release that found bob's lock, which told its
/// caller so, and says so too (read as a resend of it, it answered `Unconfirmed`; found by
/// review).
#[tokio::test]
async fn a_twin_guards_release_after_one_that_found_the_lock_taken_finds_it_taken_too() {
    let _ = lock_client().await;
    let proxy = Proxy::start(&endpoint()).await;
    let clock = AdjustableClock::new();
    let alice = client_through(&proxy, Some(clock.clone()));
    let resource = unique("twin-releases-after-taken");
    let opts = guard_options("alice", 10_000, 3_000).idempotent(true);
    let guard = alice.lock(&resource, &opts).await.unwrap();
    let twin = alice.lock(&resource, &opts).await.unwrap();
    clock.advance(Duration::from_secs(11));
    let bob = client_through(&proxy, Some(clock.clone()));
    let bobs = bob
        .try_acquire(&resource, &owner("bob"))
        .await
        .unwrap()
        .expect("the lapsed lock");
    for outcome in [
        guard.release().await.unwrap(),
        twin.release().await.unwrap(),
    ] {
        assert!(
            matches!(&outcome, ReleaseOutcome::NotOwner { holder } if holder.owner == "bob"),
            "{outcome:?}"
        );
    }
    bob.release(&bobs).await.unwrap();
}

/// Two releases at once, the second replacing the payload, on a client that keeps items: the
/// first released the lock with the payload as it was, and the second, meeting its record, must
/// say so (`AlreadyReleased`): read as a resend, it answered `Unconfirmed`, as if it may have
/// written its payload.
#[tokio::test]
async fn a_release_with_a_payload_after_another_release_says_it_was_released_already() {
    let _ = lock_client().await;
    let proxy = Proxy::start(&endpoint()).await;
    let client = ddb_lock_test_kit::keeping_client_at(&proxy.endpoint());
    let resource = unique("releases-payload-after");
    let lock = alices(&client, &resource).await;
    let (first, second) = two_releases(&proxy, &client, &lock, "UpdateItem", true).await;
    assert_eq!(first, ReleaseOutcome::Released);
    assert!(
        matches!(second, ReleaseOutcome::AlreadyReleased { .. }),
        "{second:?}"
    );
}

/// Two plain releases at once: the first releases the lock, the second, sent after it, finds it
/// gone as a resend does (`Unconfirmed`, not a loss), and one DeleteItem follows the other.
#[tokio::test]
async fn a_release_after_one_that_released_the_lock_is_unconfirmed() {
    let _ = lock_client().await;
    let proxy = Proxy::start(&endpoint()).await;
    let client = client_through(&proxy, None);
    let resource = unique("releases-after-released");
    let lock = alices(&client, &resource).await;
    let (first, second) = two_releases(&proxy, &client, &lock, "DeleteItem", false).await;
    assert_eq!(first, ReleaseOutcome::Released);
    assert_eq!(second, ReleaseOutcome::Unconfirmed);
}

/// A release stuck on a connection (held in the network): a second release of the lock waited
/// for it for as long as it stayed stuck, never answered, and the lock stayed held. It waits a
/// while, then is sent all the same. The stuck one, answered after it, found the lock gone, and
/// its caller was told the lock had been lost (`NotFound`): overtaken, it reads what it finds as
/// a resend does.
#[tokio::test]
async fn a_release_behind_a_stuck_one_is_sent_after_a_while_and_overtakes_it() {
    let _ = lock_client().await;
    let proxy = Proxy::start(&endpoint()).await;
    let client = client_through(&proxy, None);
    let resource = unique("release-behind-stuck");
    let lock = alices(&client, &resource).await;
    let mut stuck = proxy.delay_next_request("DeleteItem");
    let first = tokio::spawn({
        let (client, lock) = (client.clone(), lock.clone());
        async move { client.release(&lock).await }
    });
    stuck.captured().await;
    let second = tokio::time::timeout(PATIENCE, client.release(&lock))
        .await
        .expect("the release behind the stuck one is answered");
    assert_eq!(second.unwrap(), ReleaseOutcome::Released);
    assert_eq!(
        client.status(&resource).await.unwrap(),
        ddb_lock::LockStatus::Free
    );
    assert!(
        stuck.deliver().await,
        "the stuck release reached the endpoint"
    );
    assert_eq!(
        first.await.unwrap().unwrap(),
        ReleaseOutcome::Unconfirmed,
        "the release overtaken reads the lock gone as a resend does"
    );
}

/// The same, with both releases started before the first one's task ran (both called at once,
/// as `join!` does): the overtaken one was told so through the token its call made, while its
/// task read another, made when it sent, and the stuck release, answered after the second had
/// released the lock, answered `NotFound` (found by review).
#[tokio::test]
async fn a_release_started_at_once_with_another_and_stuck_is_overtaken_as_a_resend() {
    let _ = lock_client().await;
    let proxy = Proxy::start(&endpoint()).await;
    let client = client_through(&proxy, None);
    let resource = unique("release-at-once-stuck");
    let lock = alices(&client, &resource).await;
    let stuck = proxy.delay_next_request("DeleteItem");
    let (first, second) = tokio::time::timeout(PATIENCE, async {
        tokio::join!(client.release(&lock), async {
            let second = client.release(&lock).await;
            assert!(
                stuck.deliver().await,
                "the stuck release reached the endpoint"
            );
            second
        })
    })
    .await
    .expect("both releases are answered");
    assert_eq!(second.unwrap(), ReleaseOutcome::Released);
    assert_eq!(
        first.unwrap(),
        ReleaseOutcome::Unconfirmed,
        "the release overtaken reads the lock gone as a resend does"
    );
}

/// A twin guard (two guards of one idempotent acquisition) released after its twin's release was
/// answered: it found the lock gone and said `NotFound`, a loss, of a lock its own acquisition
/// had released. It is a resend of that release; so is the release of a guard whose lock
/// `release_all` or a force release through its client released, while a release sent once of a
/// lock gone still says `NotFound`.
#[tokio::test]
async fn a_guards_release_after_another_release_of_its_lock_was_answered_is_a_resend() {
    let client = lock_client().await;
    let resource = unique("twin-released-after");
    let opts = guard_options("alice", 60_000, 20_000).idempotent(true);
    let guard = client.lock(&resource, &opts).await.unwrap();
    let twin = client.lock(&resource, &opts).await.unwrap();
    assert_eq!(guard.release().await.unwrap(), ReleaseOutcome::Released);
    assert_eq!(
        twin.release().await.unwrap(),
        ReleaseOutcome::Unconfirmed,
        "the twin's acquisition was released, not lost"
    );

    let guard = client.lock(&resource, &opts).await.unwrap();
    let released = client.release_all().await;
    assert!(
        matches!(&released[..], [(_, Ok(ReleaseOutcome::Released))]),
        "{released:?}"
    );
    assert_eq!(guard.release().await.unwrap(), ReleaseOutcome::Unconfirmed);

    let guard = client.lock(&resource, &opts).await.unwrap();
    assert!(client.force_release(&resource).await.unwrap().is_some());
    assert_eq!(
        guard.release().await.unwrap(),
        ReleaseOutcome::Unconfirmed,
        "force-released through its own client, not lost"
    );

    let lock = alices(&client, &resource).await;
    assert_eq!(
        client.release(&lock).await.unwrap(),
        ReleaseOutcome::Released
    );
    assert_eq!(
        client.release(&lock).await.unwrap(),
        ReleaseOutcome::NotFound,
        "released once more, outside a guard, the lock is gone"
    );
}

/// A guard of alice's lock on a fresh resource (named after `prefix`), taken through a client
/// behind a proxy: the proxy, the client, the resource, the guard.
async fn guarded_through_a_proxy(prefix: &str) -> (Proxy, LockClient, String, ddb_lock::LockGuard) {
    let _ = lock_client().await;
    let proxy = Proxy::start(&endpoint()).await;
    let client = client_through(&proxy, None);
    let resource = unique(prefix);
    let guard = client
        .lock(&resource, &guard_options("alice", 60_000, 20_000))
        .await
        .unwrap();
    (proxy, client, resource, guard)
}

/// A release by owner (`release_owned`, a saga's clean-up) through the client whose guard holds
/// the lock, the guard dropped while that release is on its way: the guard, stopped by it, sent
/// a DeleteItem of its own, which could land first, and the release by owner answered `NotFound`
/// for a lock its own client released. The guard leaves the lock to it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_guard_dropped_while_a_release_by_owner_is_on_its_way_leaves_the_lock_to_it() {
    let (proxy, client, resource, guard) = guarded_through_a_proxy("release-owned-guard").await;
    let mut held = proxy.delay_next_request_containing("DeleteItem", "attribute_exists");
    let by_owner = tokio::spawn({
        let (client, resource) = (client.clone(), resource.clone());
        async move { client.release_owned(&resource, "alice").await }
    });
    held.captured().await;
    assert_eq!(guard.lost().await, ddb_lock::LockLost::Released);
    drop(guard);
    assert!(held.deliver().await, "the release reached the endpoint");
    assert_eq!(by_owner.await.unwrap().unwrap(), ReleaseOutcome::Released);
    client.flush().await;
    assert_eq!(proxy.counts("DeleteItem").requests, 1, "released once");
}

/// A release by owner while a guard's release of the same lock is held in the network: sent at
/// once, it releases the lock, and the guard's release, refused after it, said `NotFound`, a
/// loss, for a lock its own client released. It is overtaken, and reads what it finds as a
/// resend.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_guards_release_overtaken_by_a_release_by_owner_is_not_a_loss() {
    let (proxy, client, resource, guard) = guarded_through_a_proxy("release-owned-overtakes").await;
    let mut held = proxy.delay_next_request_containing("DeleteItem", ":lock_id");
    let releasing = tokio::spawn(guard.release());
    held.captured().await;
    assert_eq!(
        client.release_owned(&resource, "alice").await.unwrap(),
        ReleaseOutcome::Released
    );
    assert!(
        held.deliver().await,
        "the guard's release reached the endpoint"
    );
    assert_eq!(
        releasing.await.unwrap().unwrap(),
        ReleaseOutcome::Unconfirmed
    );
}

/// A force release through the client whose guard holds the lock, cancelled before its delete
/// (its read held in the network), the guard dropped meanwhile: kept on its way for the guard's
/// lock, it made the guard's drop send nothing, and the lock was released by nobody. The guard's
/// drop releases it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_guard_dropped_while_a_cancelled_force_release_reads_the_lock_releases_it() {
    let (proxy, client, resource, guard) = guarded_through_a_proxy("force-release-cancelled").await;
    let mut read = proxy.delay_next_request("GetItem");
    let forcing = tokio::spawn({
        let (client, resource) = (client.clone(), resource.clone());
        async move { client.force_release(&resource).await }
    });
    read.captured().await;
    assert_eq!(guard.lost().await, ddb_lock::LockLost::Released);
    drop(guard);
    // (The drop's release waits for the force release, which may yet delete the lock.)
    forcing.abort();
    assert!(forcing.await.unwrap_err().is_cancelled());
    client.flush().await;
    assert_eq!(
        ddb_lock_test_kit::raw_item(&resource).await,
        None,
        "released by the guard's drop"
    );
}

/// A guard's lock lost (its lease over, bob took the lock), then a force release through the
/// guard's client that removes bob's lock: the guard's release was read as a resend of the force
/// release, and answered `Unconfirmed` for a lock lost before it. It finds its lock gone.
#[tokio::test]
async fn a_guards_release_after_a_force_release_of_another_lock_finds_its_own_lost() {
    let _ = lock_client().await;
    let proxy = Proxy::start(&endpoint()).await;
    let clock = AdjustableClock::new();
    let alice = client_through(&proxy, Some(clock.clone()));
    let resource = unique("force-release-of-another");
    let guard = alice
        .lock(&resource, &guard_options("alice", 10_000, 3_000))
        .await
        .unwrap();
    clock.advance(Duration::from_secs(11));
    let bob = client_through(&proxy, Some(clock.clone()));
    bob.try_acquire(&resource, &owner("bob"))
        .await
        .unwrap()
        .expect("the lapsed lock");
    let removed = alice.force_release(&resource).await.unwrap();
    assert_eq!(removed.map(|holder| holder.owner), Some("bob".to_owned()));
    assert_eq!(guard.release().await.unwrap(), ReleaseOutcome::NotFound);
}

/// A release that replaces a kept item's payload, held in the network while a release by owner
/// through the same client releases the lock: refused after it, it found the lock released by
/// that one, and said `Unconfirmed`, as if its payload may have been written. It was not: it
/// says released already, and the payload is the one acquired with.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_payload_release_overtaken_by_a_release_by_owner_says_released_already() {
    let _ = lock_client().await;
    let proxy = Proxy::start(&endpoint()).await;
    let client = ddb_lock_test_kit::keeping_client_at(&proxy.endpoint());
    let resource = unique("payload-release-overtaken");
    let lock = client
        .try_acquire(&resource, &owner("alice").data("first"))
        .await
        .unwrap()
        .expect("a free lock");
    let mut held = proxy.delay_next_request_containing("UpdateItem", ":data");
    let replacing = tokio::spawn({
        let (client, lock) = (client.clone(), lock.clone());
        async move {
            client
                .release_and_replace_data(&lock, Some(b"next".to_vec()))
                .await
        }
    });
    held.captured().await;
    assert_eq!(
        client.release_owned(&resource, "alice").await.unwrap(),
        ReleaseOutcome::Released
    );
    assert!(
        held.deliver().await,
        "the payload release reached the endpoint"
    );
    let outcome = replacing.await.unwrap().unwrap();
    assert!(
        matches!(outcome, ReleaseOutcome::AlreadyReleased { .. }),
        "{outcome:?}"
    );
    let item = ddb_lock_test_kit::raw_item(&resource).await.unwrap();
    assert_eq!(
        item.get("Data"),
        Some(&aws_sdk_dynamodb::types::AttributeValue::B(
            b"first".to_vec().into()
        ))
    );
}
