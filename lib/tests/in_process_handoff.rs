//! Tasks of one process waiting through one client: they line up, and a release through that
//! client wakes the first waiter, which takes the lock with one PutItem, so no waiter polls. An
//! acquisition dropped mid-request leaves nothing held.
//!
//! These tests run on tokio's single-threaded runtime, where `yield_now` lets every other ready
//! task run up to its next wait: that is how a test knows the waiters are in line (no sleeps).

use ddb_lock::{AcquireOptions, BackoffBounds, Lock, LockClient, ReleaseOutcome};
use ddb_lock_test_kit::proxy::Proxy;
use ddb_lock_test_kit::{
    builder, dynamodb_at, endpoint, lock_client, quickly_retrying_dynamodb, raw_item, string_attr,
    unique,
};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::task::{yield_now, JoinHandle};

const LEASE: Duration = Duration::from_secs(60);

/// A client through `proxy` whose waiters never poll during a test: its backoff's largest delay
/// is longer than any of these tests. The SDK retries quickly (three attempts).
async fn patient_client(proxy: &Proxy) -> LockClient {
    lock_client().await; // the table exists
    let dynamodb = quickly_retrying_dynamodb(&proxy.endpoint());
    builder(dynamodb)
        .lease(LEASE)
        .backoff(BackoffBounds::new(
            Duration::from_millis(20),
            Duration::from_secs(30),
        ))
        .build()
        .unwrap()
}

fn owner(name: &str) -> AcquireOptions {
    AcquireOptions::new().owner(name).timeout(LEASE)
}

/// A task acquiring `resource` for `name` through `client`, once it is waiting.
async fn in_line(
    client: &LockClient,
    resource: &str,
    name: &str,
) -> JoinHandle<Result<Lock, ddb_lock::Error>> {
    let (client, resource, opts) = (client.clone(), resource.to_owned(), owner(name));
    let waiter = tokio::spawn(async move { client.acquire(&resource, &opts).await });
    yield_now().await;
    waiter
}

#[tokio::test]
async fn each_release_wakes_the_next_waiting_task_which_takes_the_lock_in_one_request() {
    hand_off_through_one_client(owner).await;
}

/// Idempotent waiters of other owners line up too: only a lock of their own owner held here is
/// taken back at once (written first, and seen failing: the first idempotent waiter polled).
#[tokio::test]
async fn idempotent_waiters_of_other_owners_also_take_the_lock_in_one_request_each() {
    hand_off_through_one_client(|name| owner(name).idempotent(true)).await;
}

/// A holder and five waiters of distinct owners with options `opts`: each release through the
/// client wakes the next waiter, which takes the lock with one PutItem.
async fn hand_off_through_one_client(opts: fn(&str) -> AcquireOptions) {
    let proxy = Proxy::start(&endpoint()).await;
    let client = patient_client(&proxy).await;
    let resource = unique("in-process-handoff");
    let first = client.acquire(&resource, &opts("first")).await.unwrap();

    const WAITERS: usize = 5;
    let order = Arc::new(Mutex::new(Vec::new()));
    let waiters: Vec<_> = (0..WAITERS)
        .map(|i| {
            let (client, resource, order) = (client.clone(), resource.clone(), order.clone());
            tokio::spawn(async move {
                let name = format!("waiter-{i}");
                let lock = client.acquire(&resource, &opts(&name)).await.unwrap();
                // The stored item is this acquisition's, whoever wrote it.
                let item = raw_item(&resource).await.expect("a lock item");
                assert_eq!(string_attr(&item, "LockID"), lock.lock_id().to_string());
                assert_eq!(string_attr(&item, "Owner"), name);
                assert_eq!(lock.owner(), name);
                order.lock().unwrap().push(name);
                yield_now().await; // the next waiter gets in line
                client.release(&lock).await.unwrap()
            })
        })
        .collect();
    yield_now().await; // every waiter is in line

    assert_eq!(
        client.release(&first).await.unwrap(),
        ReleaseOutcome::Released
    );
    for waiter in waiters {
        assert_eq!(waiter.await.unwrap(), ReleaseOutcome::Released);
    }
    assert_eq!(order.lock().unwrap().len(), WAITERS);
    assert!(raw_item(&resource).await.is_none(), "the last one released");
    assert_eq!(
        proxy.counts("PutItem").requests,
        1 + WAITERS,
        "one PutItem per acquisition: no waiter polled or was refused"
    );
    assert_eq!(
        proxy.counts("DeleteItem").requests,
        1 + WAITERS,
        "one DeleteItem per release"
    );
}

/// Written first, and seen failing before the fix: the lock stayed held for its whole lease.
#[tokio::test]
async fn an_acquisition_dropped_while_its_put_is_in_flight_leaves_nothing_held() {
    let proxy = Proxy::start(&endpoint()).await;
    let client = patient_client(&proxy).await;
    let resource = unique("dropped-acquisition");
    let mut withheld = proxy.withhold_next_answer("PutItem");
    let acquiring = {
        let (client, resource) = (client.clone(), resource.clone());
        tokio::spawn(async move { client.acquire(&resource, &owner("dropped")).await })
    };
    withheld.applied().await;
    let item = raw_item(&resource).await.expect("the PutItem was applied");
    assert_eq!(string_attr(&item, "Owner"), "dropped");

    acquiring.abort();
    assert!(acquiring.await.unwrap_err().is_cancelled());
    client.flush().await;
    assert_eq!(
        proxy.counts("DeleteItem").answered,
        3,
        "one clean-up: its release, and two looks for a resend still on its way"
    );
    assert!(
        raw_item(&resource).await.is_none(),
        "the dropped acquisition's lock was released"
    );
    let other = lock_client().await;
    let lock = other
        .try_acquire(&resource, &owner("next"))
        .await
        .unwrap()
        .expect("free at once, not after a lease");
    other.release(&lock).await.unwrap();
}

/// The scenario of a review finding against the former one-request hand-over: an idempotent
/// waiter's poll saw the lock written for it, returned it without taking the hand-over, and the
/// releaser then deleted that live lock as orphaned, so another client could acquire while the
/// waiter held a `Lock`.
#[tokio::test]
async fn an_idempotent_waiter_keeps_the_lock_it_gets_after_a_release() {
    let proxy = Proxy::start(&endpoint()).await;
    let client = builder(dynamodb_at(&proxy.endpoint()))
        .lease(LEASE)
        .backoff(BackoffBounds::new(
            Duration::from_millis(1),
            Duration::from_millis(2),
        ))
        .build()
        .unwrap();
    lock_client().await; // the table exists
    let resource = unique("idempotent-waiter");
    let first = client.acquire(&resource, &owner("first")).await.unwrap();
    let waiter = {
        let (client, resource) = (client.clone(), resource.clone());
        let opts = owner("waiter").idempotent(true);
        tokio::spawn(async move { client.acquire(&resource, &opts).await })
    };
    // The waiter polls every 2 ms: let it be refused at least once before the release.
    proxy.wait_for("PutItem", |c| c.answered >= 2).await;
    client.release(&first).await.unwrap();
    let lock = waiter.await.unwrap().expect("the waiter has the lock");

    let item = raw_item(&resource).await.expect("the waiter's live lock");
    assert_eq!(string_attr(&item, "LockID"), lock.lock_id().to_string());
    let other = lock_client().await;
    assert_eq!(
        other.try_acquire(&resource, &owner("other")).await.unwrap(),
        None,
        "nobody else gets it while the waiter holds it"
    );
    assert_eq!(
        client.release(&lock).await.unwrap(),
        ReleaseOutcome::Released
    );
}

#[tokio::test]
async fn a_waiter_that_gave_up_does_not_hold_up_the_next_in_line() {
    let proxy = Proxy::start(&endpoint()).await;
    let client = patient_client(&proxy).await;
    let resource = unique("abandoned-place");
    let first = client.acquire(&resource, &owner("first")).await.unwrap();
    let quitter = in_line(&client, &resource, "quitter").await;
    let next = in_line(&client, &resource, "next").await;
    quitter.abort();
    assert!(quitter.await.unwrap_err().is_cancelled());

    assert_eq!(
        client.release(&first).await.unwrap(),
        ReleaseOutcome::Released
    );
    let lock = next.await.unwrap().expect("the next in line has the lock");
    assert_eq!(lock.owner(), "next");
    assert_eq!(
        proxy.counts("PutItem").requests,
        2,
        "the first acquire and the next one's; the quitter never asked"
    );
    assert_eq!(proxy.counts("DeleteItem").requests, 1);
    client.release(&lock).await.unwrap();
}

#[tokio::test]
async fn a_waiting_task_notices_a_release_made_by_another_client() {
    let proxy = Proxy::start(&endpoint()).await;
    let elsewhere = lock_client().await;
    let client = builder(dynamodb_at(&proxy.endpoint()))
        .backoff(BackoffBounds::new(
            Duration::from_millis(20),
            Duration::from_millis(100),
        ))
        .build()
        .unwrap();
    let resource = unique("released-elsewhere");
    let first = client.acquire(&resource, &owner("first")).await.unwrap();
    let waiter = in_line(&client, &resource, "waiter").await;

    let removed = elsewhere.force_release(&resource).await.unwrap();
    assert_eq!(removed.map(|h| h.owner), Some("first".to_owned()));

    let lock = waiter
        .await
        .unwrap()
        .expect("the waiter polls, since this client never saw the release");
    assert_eq!(lock.owner(), "waiter");
    match client.release(&first).await.unwrap() {
        ReleaseOutcome::NotOwner { holder } => assert_eq!(holder.owner, "waiter"),
        other => panic!("the first lock is gone and the waiter holds it: {other:?}"),
    }
    assert_eq!(
        client.release(&lock).await.unwrap(),
        ReleaseOutcome::Released
    );
}

/// An idempotent acquisition whose owner holds the lock through this client takes it back at
/// once, even with another task of the client waiting for that lock: it waited behind that task
/// for its whole timeout (or until the lease ended, and the lock went to the other task).
#[tokio::test]
async fn an_idempotent_acquisition_of_the_holder_does_not_wait_behind_the_line() {
    takes_its_own_lock_back_at_once("in-process-idempotent-first", false).await;
}

/// As above, after a release through the client that removed nothing of its own (a release by
/// another owner, refused): the client still knows it holds the lock, and the idempotent
/// acquisition takes it back at once. The refused release made the client forget its hold, and
/// the acquisition waited behind the line.
#[tokio::test]
async fn an_idempotent_acquisition_of_the_holder_after_a_refused_release_does_not_wait() {
    takes_its_own_lock_back_at_once("in-process-idempotent-after-refused", true).await;
}

/// An idempotent acquisition of the holder, with another task of the client waiting behind the
/// lock (and, if `refused_release_first`, after a refused release by another owner), takes the
/// lock back at once; then the other task gets it.
async fn takes_its_own_lock_back_at_once(name: &str, refused_release_first: bool) {
    let (events, _capturing) = ddb_lock_test_kit::events::CapturedEvents::start();
    let proxy = Proxy::start(&endpoint()).await;
    let client = patient_client(&proxy).await;
    let resource = unique(name);
    let saga = owner("saga-1").idempotent(true);
    let (held, waiter) = held_with_a_waiter_behind(&events, &client, &resource, &saga).await;
    if refused_release_first {
        assert!(matches!(
            client.release_owned(&resource, "nobody").await.unwrap(),
            ReleaseOutcome::NotOwner { .. }
        ));
    }
    // Not a timing threshold: waiting behind the other task takes the timeout, a minute.
    let again = tokio::time::timeout(Duration::from_secs(30), client.acquire(&resource, &saga))
        .await
        .expect("waited behind the line for its own lock")
        .unwrap();
    // The same acquisition, extended by the hand-back.
    assert_eq!(again.handle(), held.handle());
    assert!(again.expires_at() >= held.expires_at());
    client.release(&again).await.unwrap();
    let other = waiter.await.unwrap().unwrap();
    assert_eq!(other.owner(), "other");
    client.release(&other).await.unwrap();
}

/// `client` takes `resource` as `saga`, and another of its tasks waits for it behind (it knows
/// the lock is held here, and sends no request): the lock, and the waiting task.
async fn held_with_a_waiter_behind(
    events: &ddb_lock_test_kit::events::CapturedEvents,
    client: &LockClient,
    resource: &str,
    saga: &AcquireOptions,
) -> (Lock, JoinHandle<Result<Lock, ddb_lock::Error>>) {
    let held = client.acquire(resource, saga).await.unwrap();
    let waiter = {
        let (client, resource) = (client.clone(), resource.to_owned());
        tokio::spawn(async move { client.acquire(&resource, &owner("other")).await })
    };
    while events
        .with_message("lock held by this client; waiting for its release")
        .is_empty()
    {
        yield_now().await;
    }
    (held, waiter)
}
