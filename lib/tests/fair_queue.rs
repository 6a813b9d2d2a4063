//! Fair locks against the local endpoint: waiters with clients of their own are granted in the
//! order they joined; the holder's release hands over in one more request; `status` lists the
//! line; a waiter that times out or whose future is dropped leaves it (and releases a lock granted
//! as it went); a lapsed holder's lock goes to the first in line; a waiter whose deadline is gone
//! is passed over; lost answers of a join and of a grant are recognised; bad input names the
//! option.

use ddb_lock::{
    AcquireOptions, Error, InvalidInput, Lock, LockClient, LockStatus, Mode, QueuedWaiter,
    ReleaseOutcome,
};
use ddb_lock_test_kit::proxy::Proxy;
use ddb_lock_test_kit::{
    dynamodb, endpoint, hold, lock_client, quickly_retrying_client, raw_item, unique, TABLE,
};
use std::time::Duration;
use tokio::sync::mpsc;

const LEASE: Duration = Duration::from_secs(60);
const TIMEOUT: Duration = Duration::from_secs(60);

fn fair(owner: &str) -> AcquireOptions {
    AcquireOptions::new()
        .owner(owner)
        .lease(LEASE)
        .timeout(TIMEOUT)
        .fair(true)
}

/// The line of `resource` as `status` shows it (empty unless held).
async fn line(client: &LockClient, resource: &str) -> Vec<QueuedWaiter> {
    match client.status(resource).await.expect("status") {
        LockStatus::Held { queue, .. } => queue,
        _ => Vec::new(),
    }
}

/// Waits until `resource`'s line is `owners`, in that order.
async fn line_becomes(client: &LockClient, resource: &str, owners: &[&str]) {
    loop {
        let line = line(client, resource).await;
        let now: Vec<&str> = line.iter().map(|w| w.owner.as_str()).collect();
        if now == owners {
            return;
        }
        tokio::task::yield_now().await;
    }
}

/// A waiter with a client of its own, in a task: it sends its owner name once it holds the lock,
/// then the lock.
fn spawn_waiter(
    resource: &str,
    owner: &str,
    opts: AcquireOptions,
    granted: mpsc::UnboundedSender<(String, Lock, LockClient)>,
) -> tokio::task::JoinHandle<Result<(), Error>> {
    let (resource, owner) = (resource.to_owned(), owner.to_owned());
    tokio::spawn(async move {
        let client = lock_client().await;
        let lock = client.acquire(&resource, &opts).await?;
        let _ = granted.send((owner, lock, client));
        Ok(())
    })
}

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

#[tokio::test]
async fn a_lost_answer_of_a_grant_is_recognised_as_the_hand_over() {
    let proxy = Proxy::start(&endpoint()).await;
    let holder = quickly_retrying_client(&proxy.endpoint());
    let resource = unique("fair");
    let lock = hold(&lock_client().await, &resource, "holder", LEASE).await;
    let (granted_tx, mut granted) = mpsc::unbounded_channel();
    let task = spawn_waiter(&resource, "next", fair("next"), granted_tx);
    line_becomes(&holder, &resource, &["next"]).await;

    // The grant is applied; its answer is lost; the SDK's retry is refused by the new holder.
    proxy.drop_next_answer("UpdateItem");
    assert_eq!(
        holder.release(&lock).await.unwrap(),
        ReleaseOutcome::Released
    );
    assert_eq!(proxy.counts("UpdateItem").dropped, 1);
    let (_, next, client) = granted.recv().await.unwrap();
    assert_eq!(next.owner(), "next");
    client.release(&next).await.unwrap();
    task.await.unwrap().unwrap();
}

#[tokio::test]
async fn a_lost_answer_of_a_join_keeps_one_place() {
    let proxy = Proxy::start(&endpoint()).await;
    let waiter = quickly_retrying_client(&proxy.endpoint());
    let holder = lock_client().await;
    let resource = unique("fair");
    let lock = hold(&holder, &resource, "holder", LEASE).await;
    proxy.drop_next_answer("UpdateItem");
    let acquiring = {
        let resource = resource.clone();
        tokio::spawn(async move {
            let lock = waiter.acquire(&resource, &fair("waiter")).await;
            (waiter, lock)
        })
    };
    line_becomes(&holder, &resource, &["waiter"]).await;
    proxy
        .wait_for("UpdateItem", |counts| {
            counts.dropped == 1 && counts.answered >= 1
        })
        .await;
    assert_eq!(line(&holder, &resource).await.len(), 1);
    holder.release(&lock).await.unwrap();
    let (waiter, granted) = acquiring.await.unwrap();
    let granted = granted.unwrap();
    assert_eq!(granted.owner(), "waiter");
    waiter.release(&granted).await.unwrap();
    assert_eq!(raw_item(&resource).await, None);
}

/// The join's answer is lost, and the waiter is granted the lock before the SDK sends the join
/// again: the retry must not put it in line a second time (it did, and its own release then granted
/// that entry, leaving the lock held by nobody for a lease).
#[tokio::test]
async fn a_join_retried_after_its_waiter_was_granted_does_not_join_again() {
    let proxy = Proxy::start(&endpoint()).await;
    let waiter = quickly_retrying_client(&proxy.endpoint());
    let holder = lock_client().await;
    let resource = unique("fair");
    let lock = hold(&holder, &resource, "holder", LEASE).await;
    let mut join = proxy.withhold_next_answer("UpdateItem");
    let acquiring = {
        let resource = resource.clone();
        tokio::spawn(async move {
            let lock = waiter.acquire(&resource, &fair("waiter")).await;
            (waiter, lock)
        })
    };
    join.applied().await;
    assert_eq!(
        holder.release(&lock).await.unwrap(),
        ReleaseOutcome::Released
    );
    join.drop_it(); // the SDK sends the join again, to a lock granted to its waiter
    let (waiter, granted) = acquiring.await.unwrap();
    let granted = granted.unwrap();
    assert_eq!(granted.owner(), "waiter");
    assert!(
        line(&holder, &resource).await.is_empty(),
        "in line once, granted"
    );
    assert_eq!(
        waiter.release(&granted).await.unwrap(),
        ReleaseOutcome::Released
    );
    assert_eq!(raw_item(&resource).await, None, "held by nobody");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_that_times_out_leaves_the_line_and_the_next_is_granted() {
    let holder = lock_client().await;
    let resource = unique("fair");
    let lock = hold(&holder, &resource, "holder", LEASE).await;
    let (granted_tx, mut granted) = mpsc::unbounded_channel();
    let quitter = spawn_waiter(
        &resource,
        "quitter",
        fair("quitter").timeout(Duration::from_millis(300)),
        granted_tx.clone(),
    );
    line_becomes(&holder, &resource, &["quitter"]).await;
    let stayer = spawn_waiter(&resource, "stayer", fair("stayer"), granted_tx);
    line_becomes(&holder, &resource, &["quitter", "stayer"]).await;

    let err = quitter.await.unwrap().unwrap_err();
    assert!(
        matches!(err, Error::Timeout { ref holder, .. } if holder.owner == "holder"),
        "{err:?}"
    );
    line_becomes(&holder, &resource, &["stayer"]).await;

    holder.release(&lock).await.unwrap();
    let (owner, next, client) = granted.recv().await.unwrap();
    assert_eq!(owner, "stayer");
    client.release(&next).await.unwrap();
    stayer.await.unwrap().unwrap();
    assert_eq!(raw_item(&resource).await, None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_waiter_leaves_the_line() {
    let holder = lock_client().await;
    let resource = unique("fair");
    let lock = hold(&holder, &resource, "holder", LEASE).await;
    let waiter = lock_client().await;
    let acquiring = {
        let (waiter, resource) = (waiter.clone(), resource.clone());
        tokio::spawn(async move { waiter.acquire(&resource, &fair("gone")).await })
    };
    line_becomes(&holder, &resource, &["gone"]).await;
    acquiring.abort();
    assert!(acquiring.await.unwrap_err().is_cancelled());
    waiter.flush().await;
    assert!(line(&holder, &resource).await.is_empty());
    // Nobody to hand over to: the release deletes the item.
    holder.release(&lock).await.unwrap();
    assert_eq!(raw_item(&resource).await, None);
}

/// A waiter dropped around the moment of its grant: whether it returned the lock first or was
/// dropped with the grant made, no lock is left behind once it is released or flushed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_dropped_around_its_grant_leaves_no_lock_behind() {
    let holder = lock_client().await;
    for yields in [0, 1, 2, 4, 8, 16, 32, 64] {
        let resource = unique("fair");
        let lock = hold(&holder, &resource, "holder", LEASE).await;
        let waiter = lock_client().await;
        let acquiring = {
            let (waiter, resource) = (waiter.clone(), resource.clone());
            tokio::spawn(async move { waiter.acquire(&resource, &fair("racer")).await })
        };
        line_becomes(&holder, &resource, &["racer"]).await;
        let releasing = {
            let (holder, lock) = (holder.clone(), lock.clone());
            tokio::spawn(async move { holder.release(&lock).await })
        };
        for _ in 0..yields {
            tokio::task::yield_now().await;
        }
        acquiring.abort();
        assert_eq!(releasing.await.unwrap().unwrap(), ReleaseOutcome::Released);
        match acquiring.await {
            Ok(granted) => {
                waiter.release(&granted.unwrap()).await.unwrap();
            }
            Err(cancelled) => assert!(cancelled.is_cancelled()),
        }
        waiter.flush().await;
        assert_eq!(
            raw_item(&resource).await,
            None,
            "after {yields} yields: a lock or a line was left behind"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lapsed_holders_lock_goes_to_the_first_in_line() {
    let holder = lock_client().await;
    let resource = unique("fair");
    // A holder that crashes: it never releases, its short lease runs out.
    let _crashed = hold(&holder, &resource, "crashed", Duration::from_millis(800)).await;
    let (granted_tx, mut granted) = mpsc::unbounded_channel();
    let tasks = [
        spawn_waiter(&resource, "w0", fair("w0"), granted_tx.clone()),
        {
            line_becomes(&holder, &resource, &["w0"]).await;
            spawn_waiter(&resource, "w1", fair("w1"), granted_tx)
        },
    ];
    let (first, lock, client) = granted.recv().await.unwrap();
    assert_eq!(first, "w0");
    client.release(&lock).await.unwrap();
    let (second, lock, client) = granted.recv().await.unwrap();
    assert_eq!(second, "w1");
    client.release(&lock).await.unwrap();
    for task in tasks {
        task.await.unwrap().unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_whose_deadline_is_gone_is_passed_over() {
    let holder = lock_client().await;
    let resource = unique("fair");
    let lock = hold(&holder, &resource, "holder", LEASE).await;
    // A waiter that vanished without leaving (its process died): its entry stays, with its
    // deadline, which is already gone.
    let dead = uuid::Uuid::new_v4().to_string();
    let now = chrono::Utc::now();
    let entry = |name: &str, value: String| {
        (
            name.to_owned(),
            aws_sdk_dynamodb::types::AttributeValue::S(value),
        )
    };
    let entry = aws_sdk_dynamodb::types::AttributeValue::M(
        [
            entry("LockID", dead.clone()),
            entry("Owner", "dead".to_owned()),
            entry("AcquiredAt", ddb_lock::timestamp::format(now)),
            entry(
                "ExpiresAt",
                ddb_lock::timestamp::format(now - chrono::TimeDelta::seconds(1)),
            ),
            (
                "LeaseMs".to_owned(),
                aws_sdk_dynamodb::types::AttributeValue::N("60000".to_owned()),
            ),
        ]
        .into(),
    );
    dynamodb()
        .update_item()
        .table_name(TABLE)
        .key(
            "PK",
            aws_sdk_dynamodb::types::AttributeValue::S(format!("LOCK#{resource}")),
        )
        .key(
            "SK",
            aws_sdk_dynamodb::types::AttributeValue::S("LOCK".into()),
        )
        .update_expression("SET #queue = :line, #entry = :entry")
        .expression_attribute_names("#queue", "Queue")
        .expression_attribute_names("#entry", format!("Queued:{dead}"))
        .expression_attribute_values(
            ":line",
            aws_sdk_dynamodb::types::AttributeValue::L(vec![
                aws_sdk_dynamodb::types::AttributeValue::S(dead.clone()),
            ]),
        )
        .expression_attribute_values(":entry", entry)
        .send()
        .await
        .unwrap();
    let (granted_tx, mut granted) = mpsc::unbounded_channel();
    let task = spawn_waiter(&resource, "live", fair("live"), granted_tx);
    line_becomes(&holder, &resource, &["dead", "live"]).await;

    holder.release(&lock).await.unwrap();
    let (owner, next, client) = granted.recv().await.unwrap();
    assert_eq!(owner, "live");
    // The dead waiter's entry went with the grant.
    let item = raw_item(&resource).await.unwrap();
    assert!(!item.contains_key("Queue") && !item.contains_key(&format!("Queued:{dead}")));
    client.release(&next).await.unwrap();
    task.await.unwrap().unwrap();
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

#[tokio::test]
async fn options_a_fair_acquisition_does_not_offer_are_refused_by_name() {
    let client = lock_client().await;
    let resource = unique("fair");
    let refused = |opts: AcquireOptions| {
        let (client, resource) = (client.clone(), resource.clone());
        async move { client.acquire(&resource, &opts).await.unwrap_err() }
    };
    let err = refused(fair("a").mode(Mode::Shared)).await;
    assert!(matches!(
        err,
        Error::InvalidInput(InvalidInput::NotForMode { field: "fair", .. })
    ));
    for (opts, field) in [
        (fair("a").idempotent(true), "idempotent"),
        (fair("a").data(b"x".to_vec()), "data"),
        (fair("a").only_if_exists(true), "only_if_exists"),
    ] {
        let err = refused(opts).await;
        assert!(
            matches!(err, Error::InvalidInput(InvalidInput::NotForFair { field: f }) if f == field),
            "{field}: {err:?}"
        );
    }
    assert_eq!(raw_item(&resource).await, None);
}

/// `middle` joins the line behind `first`'s lock: its acquisition, in a task.
async fn join_as_middle(
    first: &LockClient,
    middle: &LockClient,
    resource: &str,
) -> tokio::task::JoinHandle<Result<Lock, Error>> {
    let acquiring = {
        let (middle, resource) = (middle.clone(), resource.to_owned());
        tokio::spawn(async move { middle.acquire(&resource, &fair("middle")).await })
    };
    line_becomes(first, resource, &["middle"]).await;
    acquiring
}

/// A holder granted the lock from a line, with a waiter behind it, hands over with one request:
/// the grant it read showed the line, so its release skips the delete the line would refuse.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_holder_granted_from_a_line_hands_over_in_one_request() {
    let first = lock_client().await;
    let resource = unique("fair");
    let lock = hold(&first, &resource, "first", LEASE).await;
    let proxy = Proxy::start(&endpoint()).await;
    let middle = quickly_retrying_client(&proxy.endpoint());
    let granted_middle = join_as_middle(&first, &middle, &resource).await;
    let (granted_tx, mut granted) = mpsc::unbounded_channel();
    let last = spawn_waiter(&resource, "last", fair("last"), granted_tx);
    line_becomes(&first, &resource, &["middle", "last"]).await;

    first.release(&lock).await.unwrap();
    let held = granted_middle.await.unwrap().unwrap();
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
