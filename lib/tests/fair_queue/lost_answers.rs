//! Lost answers of a join and of a grant are recognised: a grant whose answer is lost is the
//! hand-over, a join keeps one place, and a join retried after its waiter was granted does not
//! join again; a look that comes back late, after another waiter granted the lock to its waiter,
//! leaves that waiter trusting no more than the lease of that grant.

use super::{fair, line, line_becomes, spawn_waiter, LEASE};
use ddb_lock::{LockClient, ReleaseOutcome};
use ddb_lock_test_kit::proxy::Proxy;
use ddb_lock_test_kit::{
    builder, client_through, client_with_attempt_timeout, dynamodb, endpoint, hold, lock_client,
    quickly_retrying_client, raw_item, stored, string_attr, unique, AdjustableClock,
};
use std::time::Duration;
use tokio::sync::mpsc;

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

/// A waiter's look comes back late: by then the holder's lease has run out and another waiter
/// has granted the lock to it. Its own grant of the lapsed lock is refused by the item that
/// shows it the holder: the lock it returns has the lease that grant gave it, counted from no
/// later than its look's send (it counted from its own refused grant, past the lease the
/// item holds, so it could go on trusting the lock after the next waiter took it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_granted_by_another_while_its_look_was_late_trusts_that_grants_lease() {
    let direct = lock_client().await;
    let resource = unique("fair-late-look");
    let holder = hold(&direct, &resource, "holder", Duration::from_secs(5)).await;
    let clock = AdjustableClock::new();
    let proxy = Proxy::start(&endpoint()).await;
    let first = client_through(&proxy, Some(clock.clone()));
    let second = builder(dynamodb()).clock(clock.clone()).build().unwrap();
    let waiting = {
        let (first, resource) = (first.clone(), resource.clone());
        tokio::spawn(async move { first.acquire(&resource, &fair("first")).await })
    };
    line_becomes(&direct, &resource, &["first"]).await;
    let behind = {
        let (second, resource) = (second.clone(), resource.clone());
        tokio::spawn(async move { second.acquire(&resource, &fair("second")).await })
    };
    line_becomes(&direct, &resource, &["first", "second"]).await;

    // The first waiter's next look, made while the holder is live, comes back late.
    let mut look = proxy.withhold_next_answer("GetItem");
    look.applied().await;
    // The holder's lease runs out for the waiters; the second grants the lock to the first.
    clock.advance(Duration::from_secs(10));
    let granted = loop {
        let item = raw_item(&resource).await.unwrap();
        if item
            .get("Owner")
            .and_then(|o| o.as_s().ok())
            .map(String::as_str)
            == Some("first")
        {
            break item;
        }
        tokio::task::yield_now().await;
    };
    let before_the_late_answer = std::time::Instant::now();
    look.deliver();
    let lock = waiting.await.unwrap().unwrap();

    assert_eq!(
        stored(lock.expires_at()),
        string_attr(&granted, "ExpiresAt"),
        "the lease of the grant that stands"
    );
    assert!(
        lock.valid_until() < before_the_late_answer + LEASE,
        "trusted past the lease of the grant that stands"
    );
    direct.release(&lock).await.unwrap();
    let second_lock = behind.await.unwrap().unwrap();
    second.release(&second_lock).await.unwrap();
    let _ = direct.release(&holder).await;
}

/// A grant written by a holder whose clock is behind ends, by the grantee's clock, before a lease
/// from the look that found it: the grantee holds it until that stored end, not a lease from its
/// look. It counted the whole lease from its look, and held on after others could take the lock.
#[tokio::test]
async fn a_grant_from_a_granter_whose_clock_is_behind_is_held_for_its_stored_lease() {
    let direct = lock_client().await;
    let resource = unique("fair-granter-behind");
    let behind = AdjustableClock::new();
    behind.set_back(Duration::from_secs(20));
    let granter = builder(dynamodb()).clock(behind).build().unwrap();
    let holder = hold(&granter, &resource, "holder", LEASE).await;
    let (granted, mut grants) = mpsc::unbounded_channel();
    let _waiter = spawn_waiter(&resource, "next", fair("next"), granted);
    line_becomes(&direct, &resource, &["next"]).await;
    assert_eq!(
        granter.release(&holder).await.unwrap(),
        ReleaseOutcome::Released
    );
    let (_, lock, client) = grants.recv().await.unwrap();
    assert!(
        lock.valid_until() < std::time::Instant::now() + LEASE - Duration::from_secs(10),
        "held for a lease from its look, past the grant's stored end"
    );
    client.release(&lock).await.unwrap();
}

/// A join's first attempt is delayed in the network and the SDK gives up on it; its retry finds
/// the lock free (the holder released meanwhile), and the waiter takes the lock by a try. The
/// first attempt then lands, and puts the waiter in line behind its own lock: its release granted
/// the lock to that entry, held by nobody for its lease. The waiter looks for such a join after
/// it, as a dropped waiter does, and takes it out.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_join_that_lands_after_its_retry_found_the_lock_free_is_taken_out() {
    let holder = lock_client().await;
    let resource = unique("fair");
    let proxy = Proxy::start(&endpoint()).await;
    // Attempts the SDK gives up on after a second, tried again at once.
    let waiter = client_with_attempt_timeout(&proxy.endpoint(), Duration::from_secs(1));
    let lock = hold(&holder, &resource, "holder", LEASE).await;
    let mut first_join = proxy.delay_next_request_containing("UpdateItem", "list_append");
    let acquiring = {
        let (waiter, resource) = (waiter.clone(), resource.clone());
        tokio::spawn(async move { waiter.acquire(&resource, &fair("waiter")).await })
    };
    first_join.captured().await;
    // The background look for the late join, held until that join has landed.
    let mut look = proxy.delay_next_request("GetItem");
    assert_eq!(
        holder.release(&lock).await.unwrap(),
        ReleaseOutcome::Released
    );
    let taken = acquiring.await.unwrap().unwrap();

    let _ = tokio::time::timeout(Duration::from_secs(20), look.captured()).await;
    assert!(
        first_join.deliver().await,
        "the late join reached the endpoint"
    );
    look.deliver().await;
    waiter.flush().await;
    assert_eq!(
        waiter.release(&taken).await.unwrap(),
        ReleaseOutcome::Released
    );
    let next = holder
        .try_acquire(&resource, &ddb_lock::AcquireOptions::new().owner("next"))
        .await
        .unwrap();
    assert!(
        next.is_some(),
        "the lock is free: {:?}",
        raw_item(&resource).await
    );
}

/// A waiter's look comes back late: the holder granted it the lock, the lease lapsed before the
/// waiter saw it, and a reader took the lapsed lock (a shared acquisition keeps the item's
/// `LockID` and removes its holder). The waiter took its `LockID` for a grant it held, and its
/// acquisition failed with `UnexpectedResponse`; it goes on waiting instead, and takes the lock
/// once the reader has gone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_look_that_finds_its_lapsed_grant_taken_by_a_reader_goes_on_waiting() {
    use super::reader_took_the_lapsed_lock;
    let holder = lock_client().await;
    let resource = unique("fair");
    let proxy = Proxy::start(&endpoint()).await;
    let waiter = quickly_retrying_client(&proxy.endpoint());
    let lock = hold(&holder, &resource, "holder", LEASE).await;
    let acquiring = {
        let (waiter, resource) = (waiter.clone(), resource.clone());
        tokio::spawn(async move { waiter.acquire(&resource, &fair("waiter")).await })
    };
    line_becomes(&holder, &resource, &["waiter"]).await;
    let mut look = proxy.delay_next_request("GetItem");
    look.captured().await;
    assert_eq!(
        holder.release(&lock).await.unwrap(),
        ReleaseOutcome::Released
    );
    let reader = reader_took_the_lapsed_lock(
        &resource,
        chrono::Utc::now() + chrono::TimeDelta::seconds(60),
    )
    .await;
    assert!(look.deliver().await);
    // The reader goes (its entry removed as its release would).
    dynamodb()
        .update_item()
        .table_name(ddb_lock_test_kit::TABLE)
        .key(
            "PK",
            aws_sdk_dynamodb::types::AttributeValue::S(format!("LOCK#{resource}")),
        )
        .key(
            "SK",
            aws_sdk_dynamodb::types::AttributeValue::S("LOCK".to_owned()),
        )
        .update_expression("REMOVE #shared, #entry")
        .expression_attribute_names("#shared", "Shared")
        .expression_attribute_names("#entry", format!("Shared:{reader}"))
        .send()
        .await
        .unwrap();

    let taken = tokio::time::timeout(Duration::from_secs(20), acquiring)
        .await
        .expect("the waiter takes the lock")
        .unwrap()
        .unwrap();
    assert_eq!(taken.owner(), "waiter");
    waiter.release(&taken).await.unwrap();
}

/// alice, through `client`, waits in `resource`'s line behind `holder`'s lock; her next look is
/// held by `proxy` while `holder` releases, granting her the lock: her acquisition, in a task, and
/// the look held.
async fn granted_before_its_look(
    proxy: &Proxy,
    holder: &LockClient,
    client: &LockClient,
    resource: &str,
) -> (
    tokio::task::JoinHandle<Result<ddb_lock::Lock, ddb_lock::Error>>,
    ddb_lock_test_kit::proxy::HeldRequest,
) {
    let lock = hold(holder, resource, "holder", LEASE).await;
    let waiting = {
        let (client, resource) = (client.clone(), resource.to_owned());
        tokio::spawn(async move { client.acquire(&resource, &fair("alice")).await })
    };
    line_becomes(holder, resource, &["alice"]).await;
    let mut look = proxy.delay_next_request("GetItem");
    look.captured().await;
    assert_eq!(
        holder.release(&lock).await.unwrap(),
        ReleaseOutcome::Released
    );
    (waiting, look)
}

/// A waiter is granted the lock; before its look shows it, another task of the same client, an
/// idempotent acquisition of the same owner, is handed that lock back (its refusal showed the
/// owner's live lock); then the waiter's future is dropped. The waiter's leave released the lock
/// under the task that held it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_waiter_leaves_its_grant_to_the_task_it_was_handed_back_to() {
    a_dropped_waiter_leaves_its_grant_to_its_hand_back(false).await;
}

/// As above, the owner's idempotent acquisition made in another process (its own client): the
/// dropped waiter's leave, which knew nothing of it, released the lock by its id and owner, and
/// deleted it under the process it had been handed back to. It releases only the item as the
/// grant left it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_waiter_leaves_its_grant_to_another_process_it_was_handed_back_to() {
    a_dropped_waiter_leaves_its_grant_to_its_hand_back(true).await;
}

/// alice's waiter is granted the lock, her idempotent acquisition (in another process if
/// `elsewhere`, else through the waiter's client) is handed it back before the waiter's look shows
/// it, and the waiter's future is dropped: the lock stays the hand-back's.
async fn a_dropped_waiter_leaves_its_grant_to_its_hand_back(elsewhere: bool) {
    let holder = lock_client().await;
    let resource = unique("fair");
    let proxy = Proxy::start(&endpoint()).await;
    let client = quickly_retrying_client(&proxy.endpoint());
    let (waiting, look) = granted_before_its_look(&proxy, &holder, &client, &resource).await;
    let through = if elsewhere {
        lock_client().await
    } else {
        client.clone()
    };
    let handed_back = through
        .try_acquire(
            &resource,
            &ddb_lock::AcquireOptions::new()
                .owner("alice")
                .idempotent(true),
        )
        .await
        .unwrap()
        .expect("the owner's lock, handed back");

    waiting.abort();
    assert!(waiting.await.unwrap_err().is_cancelled());
    drop(look);
    client.flush().await;
    let item = raw_item(&resource).await.expect("still held");
    assert_eq!(
        string_attr(&item, "LockID"),
        handed_back.lock_id().to_string()
    );
    assert_eq!(
        through.release(&handed_back).await.unwrap(),
        ReleaseOutcome::Released
    );
}

/// As above, the hand-back failing (DynamoDB failed its extension): the grant is nobody's, and
/// the dropped waiter releases it. Its leave took the hand-back's extension, remembered at its
/// send, for a hold of the client, and left the lock granted to nobody for a lease.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_waiter_releases_its_grant_when_a_hand_back_of_it_failed() {
    let holder = lock_client().await;
    let resource = unique("fair");
    let proxy = Proxy::start(&endpoint()).await;
    let client = quickly_retrying_client(&proxy.endpoint());
    let (waiting, look) = granted_before_its_look(&proxy, &holder, &client, &resource).await;
    for _ in 0..3 {
        proxy.refuse_next("UpdateItem", "InternalServerError");
    }
    let failed = client
        .try_acquire(
            &resource,
            &ddb_lock::AcquireOptions::new()
                .owner("alice")
                .idempotent(true),
        )
        .await;
    assert!(
        matches!(failed, Err(ddb_lock::Error::Backend { .. })),
        "{failed:?}"
    );

    waiting.abort();
    assert!(waiting.await.unwrap_err().is_cancelled());
    drop(look);
    client.flush().await;
    assert_eq!(raw_item(&resource).await, None, "granted to nobody");
}

/// A join applied with its answer lost, the SDK's resend held in the network, and the waiter
/// dropped: its clean-up found it in line (the first attempt's place) and left, then looked no
/// more, and the resend, landing just after, put it back in line; the holder's release then
/// granted the lock to nobody, for a lease (found by review). A clean-up whose join was never
/// answered looks again after leaving too.
#[tokio::test]
async fn a_join_resend_landing_after_its_dropped_waiter_left_is_taken_out() {
    let proxy = Proxy::start(&endpoint()).await;
    let waiter = quickly_retrying_client(&proxy.endpoint());
    let holder = lock_client().await;
    let resource = unique("fair");
    let lock = hold(&holder, &resource, "holder", LEASE).await;
    let mut first = proxy.withhold_next_answer("UpdateItem");
    let acquiring = {
        let (waiter, resource) = (waiter.clone(), resource.clone());
        tokio::spawn(async move { waiter.acquire(&resource, &fair("gone")).await })
    };
    first.applied().await;
    let mut resend = proxy.delay_next_request_containing("UpdateItem", "list_append");
    first.drop_it();
    resend.captured().await;
    acquiring.abort();
    assert!(acquiring.await.unwrap_err().is_cancelled());
    // The clean-up's first look leaves the line; the resend lands after it.
    line_becomes(&holder, &resource, &[]).await;
    assert!(resend.deliver().await, "the resend reached the endpoint");
    waiter.flush().await;

    assert_eq!(line(&holder, &resource).await.len(), 0);
    assert_eq!(
        holder.release(&lock).await.unwrap(),
        ReleaseOutcome::Released
    );
    assert_eq!(
        raw_item(&resource).await,
        None,
        "granted to the gone waiter"
    );
}
