//! Task claims under requests that arrive late or twice, or are dropped: copies of claims,
//! status writes and renewals delivered late, a renewal that finds its claim's lease over, a
//! completion whose caller is gone.

use super::{claim_until, queue_of, LEASE};
use aws_sdk_dynamodb::config::retry::RetryConfig;
use ddb_lock::{TaskQueue, TaskStatus};
use ddb_lock_test_kit::clocks::AdjustableClock;
use ddb_lock_test_kit::proxy::Proxy;
use ddb_lock_test_kit::{
    builder, dynamodb, dynamodb_at, dynamodb_with, endpoint, lock_client, unique,
};
use std::sync::Arc;
use std::time::Duration;

/// A copy of a claim delivered after the claim was completed, its completer's clock stepped back
/// (so the task's `ClaimableAt` is no later than the copy's `:now`): the copy took the task again,
/// claimed by a worker that had finished with it, for a whole lease.
#[tokio::test]
async fn a_late_copy_of_a_completed_claim_does_not_take_the_task_again() {
    let (name, proxy, clock, queue) = queue_through_a_proxy("q-claim-copy").await;
    queue.set_status("job", TaskStatus::Pending).await.unwrap();
    clock.advance(Duration::from_secs(1));
    let copy = proxy.duplicate_next_request_containing("UpdateItem", "#claimed_by = :owner");
    let task = claim_until(&queue, 1).await.pop().expect("claimed");
    clock.set_back(Duration::from_secs(2));
    assert!(queue.complete(&task, TaskStatus::Failed).await.unwrap());

    assert!(copy.deliver().await, "the copy reached the endpoint");
    assert_status(&name, "job", "failed").await;
}

/// A copy of a claim delivered after an administrator set the task's status again (its clock
/// behind the worker's, so the task's `ClaimableAt` is no later than the copy's `:now`): the copy
/// took the task the administrator had just made claimable, for a whole lease, for a worker whose
/// completion had been refused (found by review).
#[tokio::test]
async fn a_late_copy_of_a_claim_does_not_undo_a_status_write_made_since() {
    let (name, proxy, clock, queue) = queue_through_a_proxy("q-claim-copy-reset").await;
    queue.set_status("job", TaskStatus::Pending).await.unwrap();
    clock.advance(Duration::from_secs(1));
    let copy = proxy.duplicate_next_request_containing("UpdateItem", "#claimed_by = :owner");
    let task = claim_until(&queue, 1).await.pop().expect("claimed");
    clock.set_back(Duration::from_secs(2));
    queue.set_status("job", TaskStatus::Pending).await.unwrap();
    assert!(
        !queue.complete(&task, TaskStatus::Done).await.unwrap(),
        "the status write ended the claim"
    );

    assert!(copy.deliver().await, "the copy reached the endpoint");
    assert_status(&name, "job", "pending").await;
}

/// A copy of a claim delivered after that claim was completed (its completer's clock stepped back)
/// and one more claim was made and completed: with only the last claim's token remembered, the
/// copy found neither its token nor its completion there, and took the finished task again, for a
/// lease (found by review). Claims are ordered by their time: a copy's is no later than the last.
#[tokio::test]
async fn a_late_copy_of_a_claim_does_not_take_the_task_after_another_claim() {
    let (name, proxy, clock, queue) = queue_through_a_proxy("q-claim-copy-twice").await;
    queue.set_status("job", TaskStatus::Pending).await.unwrap();
    clock.advance(Duration::from_secs(1));
    let copy = proxy.duplicate_next_request_containing("UpdateItem", "#claimed_by = :owner");
    let first = claim_until(&queue, 1).await.pop().expect("claimed");
    clock.set_back(Duration::from_secs(2));
    assert!(queue.complete(&first, TaskStatus::Failed).await.unwrap());
    let second = claim_until(&queue, 1).await.pop().expect("claimed again");
    assert!(queue.complete(&second, TaskStatus::Done).await.unwrap());

    assert!(copy.deliver().await, "the copy reached the endpoint");
    assert_status(&name, "job", "done").await;
}

/// A claim by a worker whose clock is ahead, then one by a worker whose clock is not, once the
/// task is claimable again: the second goes just after the first by the order of claims, and
/// claims the task.
#[tokio::test]
async fn a_claim_after_one_from_a_clock_ahead_still_claims() {
    let (name, _proxy, clock, queue) = queue_through_a_proxy("q-claim-ahead").await;
    queue.set_status("job", TaskStatus::Pending).await.unwrap();
    let ahead = AdjustableClock::new();
    ahead.advance(Duration::from_secs(3600));
    let ahead = queue_of(builder(dynamodb()).clock(ahead).build().unwrap(), &name);
    let task = claim_until(&ahead, 1).await.pop().expect("claimed ahead");
    assert!(ahead.complete(&task, TaskStatus::Failed).await.unwrap());
    // Claimable again by this worker's clock: failed at a time behind it.
    clock.advance(Duration::from_secs(1));
    queue.set_status("job", TaskStatus::Pending).await.unwrap();
    clock.advance(Duration::from_secs(1));
    let again = claim_until(&queue, 1).await;
    assert_eq!(
        again.len(),
        1,
        "claimed after the claim from the clock ahead"
    );
}

/// An administrative status write whose answer was lost, sent again by the SDK after a worker
/// claimed the task, took the task from that worker: the next claim ran it a second time.
#[tokio::test]
async fn a_late_copy_of_a_status_write_leaves_a_claim_made_since() {
    let (_, proxy, clock, queue) = queue_through_a_proxy("q-status-copy").await;
    let copy = proxy.duplicate_next_request_containing("UpdateItem", "#task_status = :status");
    queue.set_status("job", TaskStatus::Pending).await.unwrap();
    clock.advance(Duration::from_secs(1));
    let task = claim_until(&queue, 1).await.pop().expect("claimed");

    assert!(copy.deliver().await, "the copy reached the endpoint");
    clock.advance(Duration::from_secs(1));
    assert!(
        queue
            .claim(1, Duration::from_secs(60))
            .await
            .unwrap()
            .is_empty(),
        "claimed once"
    );
    assert!(
        queue.complete(&task, TaskStatus::Done).await.unwrap(),
        "the worker's claim stands"
    );
}

/// A copy of an administrative status write delivered late, after a later status write: with the
/// last write's id alone in the condition, the copy set the cancelled task pending again, and the
/// next claim ran it (found by review).
#[tokio::test]
async fn a_late_copy_of_a_status_write_leaves_a_later_status_write() {
    let (name, proxy, clock, queue) = queue_through_a_proxy("q-status-copy-later").await;
    let copy = proxy.duplicate_next_request_containing("UpdateItem", "#task_status = :status");
    queue.set_status("job", TaskStatus::Pending).await.unwrap();
    queue
        .set_status("job", TaskStatus::Cancelled)
        .await
        .unwrap();

    assert!(copy.deliver().await, "the copy reached the endpoint");
    assert_status(&name, "job", "cancelled").await;
    clock.advance(Duration::from_secs(1));
    assert!(
        queue
            .claim(1, Duration::from_secs(60))
            .await
            .unwrap()
            .is_empty(),
        "a cancelled task was claimed"
    );
}

/// A status write applied with its answer lost, a later status write applied meanwhile, then the
/// SDK's resend of the first, refused by the later one: it was written again after it, over it,
/// and the cancelled task was pending again (found by review). The resend stands as applied
/// before the later write.
#[tokio::test]
async fn a_status_write_resent_after_a_later_one_does_not_undo_it() {
    let (name, proxy, clock, queue) = queue_through_a_proxy("q-status-resent-late").await;
    let mut first = proxy.withhold_next_answer("UpdateItem");
    let pending = {
        let queue = queue.clone();
        tokio::spawn(async move { queue.set_status("job", TaskStatus::Pending).await })
    };
    first.applied().await;
    clock.advance(Duration::from_secs(1));
    queue
        .set_status("job", TaskStatus::Cancelled)
        .await
        .unwrap();
    first.drop_it();
    pending.await.unwrap().unwrap();

    assert_status(&name, "job", "cancelled").await;
    clock.advance(Duration::from_secs(1));
    assert!(
        queue
            .claim(1, Duration::from_secs(60))
            .await
            .unwrap()
            .is_empty(),
        "a cancelled task was claimed"
    );
}

/// A status write refused by one from a clock ahead, the refusal's answer lost and the SDK's resend
/// refused too: it was never applied, and was answered `Ok` (found by review). It is sent again
/// just after that write, as without the lost answer.
#[tokio::test]
async fn a_status_write_refused_by_a_clock_ahead_with_its_answer_lost_still_lands() {
    let (name, proxy, clock, queue) = queue_through_a_proxy("q-status-ahead-lost").await;
    clock.advance(Duration::from_secs(60));
    queue
        .set_status("job", TaskStatus::Cancelled)
        .await
        .unwrap();
    clock.set_back(Duration::from_secs(60));
    proxy.drop_next_answer("UpdateItem");
    queue.set_status("job", TaskStatus::Pending).await.unwrap();
    assert_eq!(proxy.counts("UpdateItem").dropped, 1);
    assert_status(&name, "job", "pending").await;
}

/// Status writes of two writers whose clocks disagree: the later write by arrival is the one that
/// stands, whichever clock is ahead.
#[tokio::test]
async fn a_status_write_after_one_from_a_clock_ahead_still_lands() {
    let (name, _proxy, clock, queue) = queue_through_a_proxy("q-status-clock-ahead").await;
    clock.advance(Duration::from_secs(60));
    queue
        .set_status("job", TaskStatus::Cancelled)
        .await
        .unwrap();
    clock.set_back(Duration::from_secs(60));
    queue.set_status("job", TaskStatus::Pending).await.unwrap();
    assert_status(&name, "job", "pending").await;
    queue.set_status("job", TaskStatus::Done).await.unwrap();
    assert_status(&name, "job", "done").await;
}

/// A queue named after `name` whose client goes through a proxy, on a clock the test moves.
async fn queue_through_a_proxy(name: &str) -> (String, Proxy, Arc<AdjustableClock>, TaskQueue) {
    lock_client().await;
    let name = unique(name);
    let proxy = Proxy::start(&endpoint()).await;
    let clock = AdjustableClock::new();
    let queue = queue_of(
        builder(dynamodb_at(&proxy.endpoint()))
            .clock(clock.clone())
            .build()
            .unwrap(),
        &name,
    );
    (name, proxy, clock, queue)
}

/// A renewal held in the network (its caller gave up on it), then one that finds the claim's
/// lease over (answered `false`: lost): the first, sent while the lease stood, landed after and
/// held the task for its whole lease, claimed by a worker told it had lost it; no other worker
/// could claim it. A renewal that finds its claim's lease over gives the claim back.
#[tokio::test]
async fn a_late_renewal_after_one_found_the_claim_over_holds_nothing() {
    let (name, proxy, clock, queue) = queue_through_a_proxy("q-renew-late").await;
    queue.set_status("job", TaskStatus::Pending).await.unwrap();
    let task = claim_until(&queue, 1).await.pop().expect("claimed");
    let mut late = proxy.delay_next_request_containing("UpdateItem", "#claimable_at >= :now");
    tokio::select! {
        answer = queue.renew(&task, Duration::from_secs(3600)) => panic!("answered while held: {answer:?}"),
        () = late.captured() => {}
    }
    clock.advance(LEASE + Duration::from_secs(1));
    assert!(
        !queue.renew(&task, LEASE).await.unwrap(),
        "the claim is over"
    );
    assert!(
        late.deliver().await,
        "the late renewal reached the endpoint"
    );
    let other = queue_of(
        builder(dynamodb()).clock(clock.clone()).build().unwrap(),
        &name,
    );
    let again = claim_until(&other, 1).await;
    assert_eq!(again.len(), 1, "a claim answered lost holds the task");
    assert!(!queue.complete(&task, TaskStatus::Done).await.unwrap());
}

/// The same late renewal, landing between the later renewal's refusal (the claim's lease over)
/// and its give-back: the give-back, refused by the late renewal's lease end, was taken as done,
/// and the renewal answered that the claim was lost while it stood for an hour, the task claimed
/// by nobody who knew. The renewal is sent again, and the claim is the worker's.
#[tokio::test]
async fn a_late_renewal_landing_before_the_give_back_leaves_the_claim_renewed() {
    let (_, proxy, clock, queue) = queue_through_a_proxy("q-renew-between").await;
    queue.set_status("job", TaskStatus::Pending).await.unwrap();
    let task = claim_until(&queue, 1).await.pop().expect("claimed");
    let mut late = proxy.delay_next_request_containing("UpdateItem", "#claimable_at >= :now");
    tokio::select! {
        answer = queue.renew(&task, Duration::from_secs(3600)) => panic!("answered while held: {answer:?}"),
        () = late.captured() => {}
    }
    clock.advance(LEASE + Duration::from_secs(1));
    let mut give_back = proxy.delay_next_request_containing("UpdateItem", ":seen_end");
    let renewal = tokio::spawn({
        let (queue, task) = (queue.clone(), task.clone());
        async move { queue.renew(&task, LEASE).await }
    });
    give_back.captured().await;
    assert!(
        late.deliver().await,
        "the late renewal reached the endpoint"
    );
    assert!(
        give_back.deliver().await,
        "the give-back reached the endpoint"
    );
    assert!(
        renewal.await.unwrap().unwrap(),
        "the claim stands, renewed by the late renewal"
    );
    assert!(queue.complete(&task, TaskStatus::Done).await.unwrap());
}

/// A completion dropped while the SDK waited to send it again (DynamoDB throttled its first
/// attempt; a worker's shutdown `select!`, an outer timeout): awaited in place, its retry was never
/// sent, and the task stayed claimed by nobody until its lease ended. It is sent from a task of
/// the client, which `flush` waits for.
#[tokio::test]
async fn a_completion_dropped_before_its_retry_left_still_completes() {
    lock_client().await;
    let name = unique("q-complete-dropped");
    let proxy = Proxy::start(&endpoint()).await;
    // A retry two seconds at most after the refusal (the SDK draws its wait below that): the
    // completion is dropped meanwhile.
    let client = builder(dynamodb_with(&proxy.endpoint(), |config| {
        config.retry_config(
            RetryConfig::standard()
                .with_max_attempts(2)
                .with_initial_backoff(Duration::from_secs(2)),
        )
    }))
    .build()
    .unwrap();
    let queue = queue_of(client.clone(), &name);
    queue.set_status("job", TaskStatus::Pending).await.unwrap();
    let task = claim_until(&queue, 1).await.pop().expect("claimed");
    proxy.refuse_next("UpdateItem", "ThrottlingException");
    tokio::select! {
        // (Answered first only if the SDK drew a wait of next to nothing.)
        completed = queue.complete(&task, TaskStatus::Done) => assert!(completed.unwrap()),
        () = proxy.wait_for("UpdateItem", |counts| counts.throttled == 1) => {}
    }
    client.flush().await;
    assert_status(&name, "job", "done").await;
}

/// The task `id` of queue `name` has the status `status` in its item.
async fn assert_status(name: &str, id: &str, status: &str) {
    let item = ddb_lock_test_kit::raw_item(&format!("task:{name}/{id}")).await;
    let stored = item
        .as_ref()
        .and_then(|item| item.get("TaskStatus"))
        .and_then(|stored| stored.as_s().ok());
    assert_eq!(stored.map(String::as_str), Some(status), "{item:?}");
}
