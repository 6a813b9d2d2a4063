//! Waiters are granted in the order they joined, and a holder hands the lock over in its
//! release: in one more request, or in one where its grant showed the line; a line gone stale by
//! the release still goes to the waiter there; a free lock is taken in one request; a grant
//! carries no record of the previous holder's release.

use super::{client_keeping, fair, join_as_middle, line, line_becomes, spawn_waiter, LEASE};
use ddb_lock::{Error, Lock, LockClient, LockStatus, ReleaseOutcome};
use ddb_lock_test_kit::proxy::Proxy;
use ddb_lock_test_kit::{
    endpoint, hold, lock_client, quickly_retrying_client, raw_item, string_attr, unique,
};
use std::time::Duration;
use tokio::sync::mpsc;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiters_are_granted_in_the_order_they_joined() {
    let holder = lock_client().await;
    let resource = unique("fair");
    let first = hold(&holder, &resource, "holder", LEASE).await;
    let (granted_tx, mut granted) = mpsc::unbounded_channel();
    let owners = ["w0", "w1", "w2", "w3"];
    let mut tasks = Vec::new();
    for (i, owner) in owners.iter().enumerate() {
        tasks.push(spawn_waiter(
            &resource,
            owner,
            fair(owner),
            granted_tx.clone(),
        ));
        line_becomes(&holder, &resource, &owners[..=i]).await;
    }
    let line = line(&holder, &resource).await;
    assert!(line.iter().all(|w| w.lease == LEASE && w.until.is_some()));

    assert_eq!(
        holder.release(&first).await.unwrap(),
        ReleaseOutcome::Released
    );
    let mut order = Vec::new();
    for _ in owners {
        let (owner, lock, client) = granted.recv().await.expect("a grant");
        // Every later waiter is still in line behind this holder.
        assert_eq!(lock.owner(), owner);
        match client.status(&resource).await.unwrap() {
            LockStatus::Held { holder, queue, .. } => {
                assert_eq!(holder.owner, owner);
                let rest: Vec<&str> = queue.iter().map(|w| w.owner.as_str()).collect();
                assert_eq!(rest, owners[order.len() + 1..]);
            }
            other => panic!("{owner} holds the lock: {other:?}"),
        }
        order.push(owner);
        assert_eq!(
            client.release(&lock).await.unwrap(),
            ReleaseOutcome::Released
        );
    }
    assert_eq!(order, owners);
    for task in tasks {
        task.await.unwrap().unwrap();
    }
    // The last release deleted the item: nothing left, no line.
    assert_eq!(raw_item(&resource).await, None);
}

#[tokio::test]
async fn a_release_with_a_line_hands_over_in_one_more_request() {
    let proxy = Proxy::start(&endpoint()).await;
    let holder = quickly_retrying_client(&proxy.endpoint());
    let _ = lock_client().await; // the table
    let resource = unique("fair");
    let lock = hold(&holder, &resource, "holder", LEASE).await;
    let (granted_tx, mut granted) = mpsc::unbounded_channel();
    let task = spawn_waiter(&resource, "next", fair("next"), granted_tx);
    line_becomes(&lock_client().await, &resource, &["next"]).await;

    let (deletes, updates) = (proxy.counts("DeleteItem"), proxy.counts("UpdateItem"));
    assert_eq!(
        holder.release(&lock).await.unwrap(),
        ReleaseOutcome::Released
    );
    assert_eq!(proxy.counts("DeleteItem").requests - deletes.requests, 1);
    assert_eq!(proxy.counts("UpdateItem").requests - updates.requests, 1);

    let (_, next, client) = granted.recv().await.unwrap();
    assert_eq!(next.owner(), "next");
    // Never free in between: the item went from one holder to the next.
    assert!(next.acquired_at() >= lock.acquired_at());
    assert_eq!(
        client.release(&next).await.unwrap(),
        ReleaseOutcome::Released
    );
    task.await.unwrap().unwrap();
}

/// [`granted_from_a_line`]: the middle waiter, behind a proxy, holds the lock granted from the
/// line, the last waiter behind it.
struct GrantedFromALine {
    proxy: Proxy,
    middle: LockClient,
    held: Lock,
    granted: mpsc::UnboundedReceiver<(String, Lock, LockClient)>,
    last: tokio::task::JoinHandle<Result<(), Error>>,
}

/// First holds `resource`; middle (its client behind a proxy) and last (a client of its own, in
/// a task that sends on `granted` once it holds) join the line; first releases, and the lock is
/// granted to middle, with last behind it.
async fn granted_from_a_line(resource: &str) -> GrantedFromALine {
    let first = lock_client().await;
    let lock = hold(&first, resource, "first", LEASE).await;
    let proxy = Proxy::start(&endpoint()).await;
    let middle = quickly_retrying_client(&proxy.endpoint());
    let granted_middle = join_as_middle(&first, &middle, resource).await;
    let (granted_tx, granted) = mpsc::unbounded_channel();
    let last = spawn_waiter(resource, "last", fair("last"), granted_tx);
    line_becomes(&first, resource, &["middle", "last"]).await;
    first.release(&lock).await.unwrap();
    let held = granted_middle.await.unwrap().unwrap();
    GrantedFromALine {
        proxy,
        middle,
        held,
        granted,
        last,
    }
}

/// A holder granted the lock from a line, with a waiter behind it, hands over with one request:
/// the grant it read showed the line, so its release skips the delete the line would refuse.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_holder_granted_from_a_line_hands_over_in_one_request() {
    let resource = unique("fair");
    let GrantedFromALine {
        proxy,
        middle,
        held,
        mut granted,
        last,
    } = granted_from_a_line(&resource).await;
    let (deletes, updates) = (proxy.counts("DeleteItem"), proxy.counts("UpdateItem"));
    assert_eq!(
        middle.release(&held).await.unwrap(),
        ReleaseOutcome::Released
    );
    assert_eq!(
        proxy.counts("DeleteItem").requests,
        deletes.requests,
        "no delete tried"
    );
    assert_eq!(
        proxy.counts("UpdateItem").requests - updates.requests,
        1,
        "the grant alone"
    );

    let (owner, next, client) = granted.recv().await.unwrap();
    assert_eq!(owner, "last");
    // The hand-overs say how long holds and whole turns take (from a grant, which the hold
    // follows), smoothed over the two hand-overs, and how much the turns vary, for the waiters'
    // reads.
    let handed = raw_item(&resource).await.expect("held by the last");
    let millis = |name: &str| match handed.get(name) {
        Some(aws_sdk_dynamodb::types::AttributeValue::N(n)) => n.parse::<f64>().expect("a number"),
        other => panic!("{name} is {other:?} in {handed:?}"),
    };
    assert!(millis("TurnMs") >= millis("HoldMs"), "{handed:?}");
    assert!(millis("HoldMs") > 0.0, "{handed:?}");
    assert!(millis("TurnDevMs") > 0.0, "{handed:?}");
    client.release(&next).await.unwrap();
    last.await.unwrap().unwrap();
    assert_eq!(raw_item(&resource).await, None);
}

/// The item a holder was granted with may be stale by its release: the waiter it showed left, and
/// another joined. The grant computed from it is refused, computed again from the refusal, and
/// the lock goes to the waiter that is there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hand_over_from_a_stale_line_goes_to_the_waiter_there_now() {
    let first = lock_client().await;
    let resource = unique("fair");
    let lock = hold(&first, &resource, "first", LEASE).await;
    let middle = lock_client().await;
    let granted_middle = join_as_middle(&first, &middle, &resource).await;
    let (granted_tx, mut granted) = mpsc::unbounded_channel();
    let quitter = spawn_waiter(
        &resource,
        "quitter",
        fair("quitter").timeout(Duration::from_millis(1500)),
        granted_tx.clone(),
    );
    line_becomes(&first, &resource, &["middle", "quitter"]).await;
    first.release(&lock).await.unwrap();
    let held = granted_middle.await.unwrap().unwrap();
    // The quitter's deadline passes and it leaves; a stayer joins.
    assert!(matches!(quitter.await.unwrap(), Err(Error::Timeout { .. })));
    line_becomes(&first, &resource, &[]).await;
    let stayer = spawn_waiter(&resource, "stayer", fair("stayer"), granted_tx);
    line_becomes(&first, &resource, &["stayer"]).await;

    assert_eq!(
        middle.release(&held).await.unwrap(),
        ReleaseOutcome::Released
    );
    let (owner, next, client) = granted.recv().await.unwrap();
    assert_eq!(owner, "stayer");
    client.release(&next).await.unwrap();
    stayer.await.unwrap().unwrap();
    assert_eq!(raw_item(&resource).await, None);
}

/// A client that last saw the lock held with a line joins it first, with no try; a guess gone
/// wrong (the lock is free by now) costs the join it refuses, and the lock is taken as usual.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_last_saw_a_line_joins_it_first() {
    let _ = lock_client().await; // the table
    let resource = unique("fair");
    let proxy = Proxy::start(&endpoint()).await;
    let client = quickly_retrying_client(&proxy.endpoint());
    let mine = client.acquire(&resource, &fair("me")).await.unwrap();
    let (granted_tx, mut granted) = mpsc::unbounded_channel();
    let other = spawn_waiter(&resource, "other", fair("other"), granted_tx);
    line_becomes(&lock_client().await, &resource, &["other"]).await;
    client.release(&mine).await.unwrap(); // handed over: the line is what this client saw
    let (_, theirs, their_client) = granted.recv().await.unwrap();

    let puts = proxy.counts("PutItem").requests;
    let again = {
        let (client, resource) = (client.clone(), resource.clone());
        tokio::spawn(async move { client.acquire(&resource, &fair("me")).await })
    };
    line_becomes(&their_client, &resource, &["me"]).await;
    assert_eq!(
        proxy.counts("PutItem").requests,
        puts,
        "joined without a try"
    );
    their_client.release(&theirs).await.unwrap();
    let mine = again.await.unwrap().unwrap();
    other.await.unwrap().unwrap();
    assert_eq!(mine.owner(), "me");
    client.release(&mine).await.unwrap(); // nobody waits: deleted, and seen free

    // Seen held again by a hand-over, but free by the next acquisition: the join is refused.
    let (granted_tx, mut granted) = mpsc::unbounded_channel();
    let mine = client.acquire(&resource, &fair("me")).await.unwrap();
    let other = spawn_waiter(&resource, "other", fair("other"), granted_tx);
    line_becomes(&lock_client().await, &resource, &["other"]).await;
    client.release(&mine).await.unwrap();
    let (_, theirs, their_client) = granted.recv().await.unwrap();
    their_client.release(&theirs).await.unwrap();
    other.await.unwrap().unwrap();
    let (puts, updates) = (
        proxy.counts("PutItem").requests,
        proxy.counts("UpdateItem").requests,
    );
    let mine = client.acquire(&resource, &fair("me")).await.unwrap();
    assert_eq!(
        (
            proxy.counts("UpdateItem").requests - updates,
            proxy.counts("PutItem").requests - puts
        ),
        (1, 1),
        "a refused join, then the try that takes it"
    );
    client.release(&mine).await.unwrap();
    assert_eq!(raw_item(&resource).await, None);
}

#[tokio::test]
async fn a_fair_acquirer_takes_a_free_lock_in_one_request_and_try_acquire_never_joins() {
    let proxy = Proxy::start(&endpoint()).await;
    let client = quickly_retrying_client(&proxy.endpoint());
    let _ = lock_client().await;
    let resource = unique("fair");
    let lock = client.acquire(&resource, &fair("first")).await.unwrap();
    assert_eq!(proxy.total_requests(), 1);
    assert!(client
        .try_acquire(&resource, &fair("second"))
        .await
        .unwrap()
        .is_none());
    assert!(line(&client, &resource).await.is_empty());
    client.release(&lock).await.unwrap();
    assert_eq!(proxy.counts("DeleteItem").requests, 1);
}

/// A holder granted the lock from a line, with a waiter behind it, overruns its lease; the waiter
/// takes the lapsed lock. The holder's release, handing over from the item its grant showed,
/// meets the waiter as holder: it is not the holder's hand-over (it never held the lock then),
/// and the release answers `NotOwner`, not `Released` (its grant's refusal, showing the grantee
/// as holder, was read as its own grant applied).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lapsed_holders_release_meets_the_waiter_that_took_over() {
    let first = lock_client().await;
    let resource = unique("fair-lapsed-release");
    let lock = hold(&first, &resource, "first", LEASE).await;
    let middle = lock_client().await;
    let granted_middle = join_as_middle(&first, &middle, &resource).await;
    // The last waiter's clock will run past the middle's lease (its own deadline further on).
    let clock = ddb_lock_test_kit::AdjustableClock::new();
    let last = ddb_lock_test_kit::builder(ddb_lock_test_kit::dynamodb())
        .clock(clock.clone())
        .build()
        .unwrap();
    let taking = {
        let (last, resource) = (last.clone(), resource.clone());
        let opts = fair("last").timeout(Duration::from_secs(600));
        tokio::spawn(async move { last.acquire(&resource, &opts).await })
    };
    line_becomes(&first, &resource, &["middle", "last"]).await;

    first.release(&lock).await.unwrap();
    let held = granted_middle.await.unwrap().unwrap();
    clock.advance(LEASE + Duration::from_secs(1));
    let took_over = taking.await.unwrap().unwrap();
    assert_eq!(took_over.owner(), "last");

    match middle.release(&held).await.unwrap() {
        ReleaseOutcome::NotOwner { holder } => assert_eq!(holder.owner, "last"),
        other => panic!("the lapsed holder's release answered {other:?}"),
    }
    assert_eq!(
        ddb_lock_test_kit::string_attr(&raw_item(&resource).await.unwrap(), "LockID"),
        took_over.lock_id().to_string(),
        "the release left the new holder's lock as it was"
    );
    last.release(&took_over).await.unwrap();
}

/// On a client that keeps items, a holder's release that replaces the payload clears the holder
/// and records its release, keeping the line; the waiter grants itself the lock. The grant
/// removes that record, as a kept acquisition does: left on the granted item, a release of the
/// grantee that found its lock lost said `AlreadyReleased` at the previous holder's time, which
/// `with_lock` took for no loss (found by review).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_grant_after_a_release_with_a_payload_carries_no_release_record() {
    let _ = lock_client().await;
    let (first, middle) = (client_keeping(true), client_keeping(true));
    let resource = unique("fair-grant-release-record");
    let lock = first.acquire(&resource, &fair("first")).await.unwrap();
    let waiting = join_as_middle(&first, &middle, &resource).await;
    first
        .release_and_replace_data(&lock, Some(b"next".to_vec()))
        .await
        .unwrap();
    let granted = waiting.await.unwrap().unwrap();
    let item = raw_item(&resource).await.unwrap();
    assert_eq!(string_attr(&item, "Owner"), "middle");
    assert!(
        !item.contains_key("ReleasedAt") && !item.contains_key("ReleasedBy"),
        "the granted item carries the previous release: {item:?}"
    );
    middle.release(&granted).await.unwrap();
}

/// As above, the holder's release and the waiter's grant of the lapsed lock made in the same
/// millisecond (two clocks that agree): the refusal of the release's grant showed the waiter as
/// holder with an `AcquiredAt` equal to the grant's own `:now`, which was read as its own grant
/// applied, and the release answered `Released`. A releasing holder's grant names it
/// (`GrantedBy`), and only that tells its own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lapsed_holders_release_in_the_millisecond_of_the_takeover_is_not_owner() {
    let first = lock_client().await;
    let resource = unique("fair-lapsed-same-ms");
    let lock = hold(&first, &resource, "first", LEASE).await;
    let clock = ddb_lock_test_kit::StoppedClock::now();
    let stopped = || {
        ddb_lock_test_kit::builder(ddb_lock_test_kit::dynamodb())
            .clock(clock.clone())
            .build()
            .unwrap()
    };
    let (middle, last) = (stopped(), stopped());
    let granted_middle = join_as_middle(&first, &middle, &resource).await;
    let taking = {
        let (last, resource) = (last.clone(), resource.clone());
        let opts = fair("last").timeout(Duration::from_secs(600));
        tokio::spawn(async move { last.acquire(&resource, &opts).await })
    };
    line_becomes(&first, &resource, &["middle", "last"]).await;

    first.release(&lock).await.unwrap();
    let held = granted_middle.await.unwrap().unwrap();
    // Both clocks past the middle's lease, and stopped: the takeover and the release read the
    // same millisecond.
    clock.set(held.expires_at() + chrono::TimeDelta::seconds(1));
    let took_over = taking.await.unwrap().unwrap();
    assert_eq!(took_over.acquired_at(), ddb_lock::Clock::now(&*clock));

    match middle.release(&held).await.unwrap() {
        ReleaseOutcome::NotOwner { holder } => assert_eq!(holder.owner, "last"),
        other => panic!("the lapsed holder's release answered {other:?}"),
    }
    last.release(&took_over).await.unwrap();
}

/// A holder granted the lock from a line whose extension was applied after its client's release
/// by owner failed every try: the extension, answered `NotFound`, releases only the version it
/// wrote, and that release hands the lock over to the waiter in line. (It decided from the item
/// the grant showed, whose version the extension had replaced, and sent nothing: the lock stayed
/// held for nobody for the extension's lease, the waiter waiting.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_late_extensions_release_of_a_lock_granted_from_a_line_hands_it_over() {
    let resource = unique("fair");
    let GrantedFromALine {
        proxy,
        middle,
        held,
        mut granted,
        last,
    } = granted_from_a_line(&resource).await;

    let mut extension = proxy.withhold_next_answer("UpdateItem");
    let extending = {
        let (middle, handle) = (middle.clone(), held.handle().clone());
        tokio::spawn(async move { middle.extend(&handle, LEASE * 2).await })
    };
    extension.applied().await;
    for _ in 0..4 {
        proxy.refuse_next("DeleteItem", "ValidationException");
    }
    let released = middle.release_owned(&resource, "middle").await;
    assert!(released.is_err(), "every try failed: {released:?}");
    extension.deliver();
    assert_eq!(
        extending.await.unwrap().unwrap(),
        ddb_lock::ExtendOutcome::NotFound
    );
    middle.flush().await;
    let item = raw_item(&resource).await.expect("held");
    assert_eq!(string_attr(&item, "Owner"), "last", "{item:?}");
    let (owner, next, client) = granted.recv().await.unwrap();
    assert_eq!(owner, "last");
    client.release(&next).await.unwrap();
    last.await.unwrap().unwrap();
}
