//! Task claims against the local endpoint: claims take claimable tasks only, many workers never
//! claim one task twice, a crashed worker's task is claimed again once its lease ends, a lost
//! claim cannot complete, candidates come from a Query of the index (never a Scan), and bad
//! input names the field.

mod late_requests;

use ddb_lock::{ClaimedTask, Error, InvalidInput, LockClient, TaskQueue, TaskStatus};
use ddb_lock_test_kit::clocks::AdjustableClock;
use ddb_lock_test_kit::proxy::Proxy;
use ddb_lock_test_kit::{builder, dynamodb, dynamodb_at, endpoint, lock_client, unique};
use std::collections::HashSet;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const LEASE: Duration = Duration::from_secs(60);
/// How long the (eventually consistent) index may lag before a test gives up on it.
const INDEX_LAG: Duration = Duration::from_secs(30);

fn queue_of(client: LockClient, name: &str) -> TaskQueue {
    TaskQueue::new(client, name.parse().unwrap())
}

/// Claims through `queue` until `want` tasks are claimed (the index may lag the writes), one
/// claim of at most `want` at a time.
async fn claim_until(queue: &TaskQueue, want: usize) -> Vec<ClaimedTask> {
    let started = Instant::now();
    let mut claimed = Vec::new();
    while claimed.len() < want && started.elapsed() < INDEX_LAG {
        claimed.extend(queue.claim(want - claimed.len(), LEASE).await.unwrap());
    }
    claimed
}

#[tokio::test]
async fn a_claim_takes_claimable_tasks_only_and_completes_them() {
    let client = lock_client().await;
    let name = unique("q");
    let queue = queue_of(client, &name);
    for (id, status) in [
        ("pending", TaskStatus::Pending),
        ("done", TaskStatus::Done),
        ("failed", TaskStatus::Failed),
        ("cancelled", TaskStatus::Cancelled),
    ] {
        queue.set_status(id, status).await.unwrap();
    }
    let claimed = claim_until(&queue, 3).await;
    let ids: HashSet<&str> = claimed.iter().map(|t| t.id.as_str()).collect();
    assert_eq!(ids, HashSet::from(["pending", "done", "failed"]));
    assert!(
        queue.claim(10, LEASE).await.unwrap().is_empty(),
        "in progress and cancelled tasks are not claimed"
    );
    for task in &claimed {
        assert!(queue.renew(task, LEASE).await.unwrap());
        assert!(queue.complete(task, TaskStatus::Done).await.unwrap());
        assert!(
            queue.complete(task, TaskStatus::Done).await.unwrap(),
            "completing again is answered as done, as a retry must be"
        );
        assert!(
            !queue.complete(task, TaskStatus::Failed).await.unwrap(),
            "the claim is over: it cannot end a second way"
        );
    }
    // Done is claimable again (the seed's initial state).
    assert_eq!(claim_until(&queue, 3).await.len(), 3);
}

#[tokio::test]
async fn many_workers_never_claim_one_task_twice() {
    lock_client().await;
    let name = unique("q-many");
    let admin = queue_of(lock_client().await, &name);
    const TASKS: usize = 60;
    for i in 0..TASKS {
        admin
            .set_status(&format!("task-{i}"), TaskStatus::Pending)
            .await
            .unwrap();
    }
    let total = Arc::new(AtomicUsize::new(0));
    let workers: Vec<_> = (0..16)
        .map(|w| {
            let total = Arc::clone(&total);
            let queue = queue_of(
                builder(dynamodb())
                    .owner(format!("worker-{w}"))
                    .build()
                    .unwrap(),
                &name,
            );
            tokio::spawn(async move {
                let started = Instant::now();
                let mut mine = Vec::new();
                // Each worker claims until the index has nothing left for anyone (or it lags too long).
                while started.elapsed() < INDEX_LAG {
                    let got = queue.claim(3, LEASE).await.unwrap();
                    let claimed = total.fetch_add(got.len(), Ordering::SeqCst) + got.len();
                    if (got.is_empty() && claimed > 0) || claimed >= TASKS {
                        mine.extend(got.into_iter().map(|t| t.id));
                        break;
                    }
                    mine.extend(got.into_iter().map(|t| t.id));
                }
                mine
            })
        })
        .collect();
    let mut all = Vec::new();
    for worker in workers {
        all.extend(worker.await.unwrap());
    }
    let distinct: HashSet<&String> = all.iter().collect();
    assert_eq!(
        distinct.len(),
        all.len(),
        "a task claimed twice within its lease: {all:?}"
    );
    // The index may have hidden a few from the workers; none is claimable twice, and all are claimed in the end.
    let rest = claim_until(&admin, TASKS - all.len()).await;
    assert_eq!(all.len() + rest.len(), TASKS);
}

#[tokio::test]
async fn a_crashed_workers_task_is_claimed_again_once_its_lease_ends() {
    lock_client().await;
    let name = unique("q-crash");
    let clock = AdjustableClock::new();
    let client = builder(dynamodb()).clock(clock.clone()).build().unwrap();
    let queue = queue_of(client, &name);
    queue.set_status("job", TaskStatus::Pending).await.unwrap();
    let crashed = claim_until(&queue, 1).await.pop().expect("claimed");
    assert!(
        queue.claim(1, LEASE).await.unwrap().is_empty(),
        "claimed within its lease"
    );
    clock.advance(LEASE + Duration::from_secs(1));
    let again = claim_until(&queue, 1)
        .await
        .pop()
        .expect("claimable again by condition");
    assert_eq!(again.id, "job");
    assert!(
        !queue.renew(&crashed, LEASE).await.unwrap(),
        "the first claim is lost"
    );
    assert!(!queue.complete(&crashed, TaskStatus::Done).await.unwrap());
    assert!(queue.complete(&again, TaskStatus::Failed).await.unwrap());
}

#[tokio::test]
async fn candidates_come_from_a_query_never_a_scan() {
    lock_client().await;
    let proxy = Proxy::start(&endpoint()).await;
    let client = builder(dynamodb_at(&proxy.endpoint())).build().unwrap();
    let queue = queue_of(client, &unique("q-query"));
    queue.set_status("a", TaskStatus::Pending).await.unwrap();
    claim_until(&queue, 1).await;
    assert!(proxy.counts("Query").requests >= 1);
    assert_eq!(proxy.counts("Scan").requests, 0);
}

#[tokio::test]
async fn bad_input_names_the_field() {
    let queue = queue_of(lock_client().await, "q-bad");
    let field = |err: Error| match err {
        Error::InvalidInput(invalid) => invalid.field(),
        other => panic!("{other:?}"),
    };
    assert_eq!(
        field(queue.set_status("", TaskStatus::Done).await.unwrap_err()),
        "id"
    );
    assert_eq!(
        field(
            queue
                .set_status("a", TaskStatus::InProgress)
                .await
                .unwrap_err()
        ),
        "status"
    );
    assert_eq!(field(queue.claim(0, LEASE).await.unwrap_err()), "limit");
    assert_eq!(field(queue.claim(101, LEASE).await.unwrap_err()), "limit");
    assert_eq!(
        field(queue.claim(1, Duration::ZERO).await.unwrap_err()),
        "lease"
    );
    assert!(matches!(
        "a#b".parse::<ddb_lock::Namespace>(),
        Err(InvalidInput::Namespace { .. })
    ));
}

#[tokio::test]
async fn a_claim_or_completion_whose_answer_was_lost_is_still_ours() {
    lock_client().await;
    let name = unique("q-lost");
    let proxy = Proxy::start(&endpoint()).await;
    let queue = queue_of(
        ddb_lock_test_kit::quickly_retrying_client(&proxy.endpoint()),
        &name,
    );
    queue.set_status("job", TaskStatus::Pending).await.unwrap();
    // Wait until the index shows it, so that the claim below finds it at once.
    let started = Instant::now();
    while !in_the_index(&name).await {
        assert!(
            started.elapsed() < INDEX_LAG,
            "the index never showed the task"
        );
    }
    proxy.drop_next_answer("UpdateItem");
    let task = queue
        .claim(1, LEASE)
        .await
        .unwrap()
        .pop()
        .expect("the claim whose first answer was lost is ours");
    assert_eq!(task.id, "job");
    assert!(
        proxy.counts("UpdateItem").requests >= 3,
        "set_status, the claim, and its retry"
    );
    proxy.drop_next_answer("UpdateItem");
    assert!(
        queue.complete(&task, TaskStatus::Done).await.unwrap(),
        "the completion whose first answer was lost is ours"
    );
}

/// Whether the tasks index shows a task of queue `name`.
async fn in_the_index(name: &str) -> bool {
    index_count(name).await > 0
}

/// How many tasks of queue `name` the tasks index shows.
async fn index_count(name: &str) -> i32 {
    dynamodb()
        .query()
        .table_name(ddb_lock_test_kit::TABLE)
        .index_name("Tasks")
        .key_condition_expression("TaskQueue = :queue")
        .expression_attribute_values(
            ":queue",
            aws_sdk_dynamodb::types::AttributeValue::S(name.to_owned()),
        )
        .send()
        .await
        .expect("Query")
        .count()
}

/// A renewal's copy delivered after a later, longer renewal changes nothing: it moved the claim's
/// lease end back, and another worker claimed the task while this one held it. A renewal shorter
/// than the stored lease end leaves it, and the claim is still this worker's.
#[tokio::test]
async fn a_late_copy_of_a_renewal_does_not_shorten_the_claim() {
    lock_client().await;
    let name = unique("q-renew-copy");
    let proxy = Proxy::start(&endpoint()).await;
    let queue = queue_of(
        ddb_lock_test_kit::quickly_retrying_client(&proxy.endpoint()),
        &name,
    );
    queue.set_status("job", TaskStatus::Pending).await.unwrap();
    let task = claim_until(&queue, 1).await.pop().expect("claimed");

    let copy = proxy.duplicate_next_request_containing("UpdateItem", "#claimable_at >= :now");
    assert!(queue.renew(&task, Duration::from_secs(120)).await.unwrap());
    assert!(queue.renew(&task, Duration::from_secs(3600)).await.unwrap());
    assert!(copy.deliver().await, "the copy reached the endpoint");
    assert!(
        queue.renew(&task, Duration::from_secs(60)).await.unwrap(),
        "a shorter renewal leaves the longer claim, still ours"
    );

    // Another worker, 10 minutes ahead: past the first renewal's end, not the second's.
    let ahead = AdjustableClock::new();
    ahead.advance(Duration::from_secs(600));
    let other = queue_of(builder(dynamodb()).clock(ahead).build().unwrap(), &name);
    assert!(
        other.claim(1, LEASE).await.unwrap().is_empty(),
        "another worker claimed a task this one holds"
    );
    assert!(queue.complete(&task, TaskStatus::Done).await.unwrap());
}

/// A claim that took a task and then failed on the next candidate hands over the task it took:
/// it answered the error alone, and the task it had claimed stayed claimed by nobody who knew,
/// until its lease ended.
#[tokio::test]
async fn a_claim_failing_after_it_took_a_task_answers_the_task() {
    lock_client().await;
    let name = unique("q-partial");
    let proxy = Proxy::start(&endpoint()).await;
    let client = ddb_lock_test_kit::client_without_retries(&proxy.endpoint());
    let queue = queue_of(client.clone(), &name);
    two_pending_tasks(&queue, &name).await;
    // The first candidate's claim is answered (late, once the rule behind it is queued); the
    // second one's answer is lost, and the client does not retry.
    let mut first = proxy.withhold_next_answer("UpdateItem");
    proxy.drop_next_answer("UpdateItem");
    let claim = tokio::spawn(async move { queue.claim(2, LEASE).await });
    first.applied().await;
    first.deliver();
    let claimed = claim
        .await
        .unwrap()
        .expect("the tasks taken before the error");
    assert_eq!(claimed.len(), 1, "{claimed:?}");
    // The give-back runs in the background.
    client.flush().await;
    assert_eq!(
        proxy.counts("UpdateItem").requests,
        5,
        "2 set_status, 2 claims, the give-back of the one whose answer was lost"
    );
    // That one had landed: given back, another worker claims it at once (it stayed claimed by
    // nobody until its lease ended).
    let other = queue_of(lock_client().await, &name);
    let again = claim_until(&other, 1).await;
    assert_eq!(
        again.len(),
        1,
        "the task whose claim was unanswered stayed claimed"
    );
    assert_ne!(again[0].id, claimed[0].id);
}

/// A claim dropped mid-way (a timeout, a `select!`), one task taken and another's claim applied
/// but unanswered: both are given back, and another worker claims them at once. Its caller never
/// saw them, and they stayed claimed by nobody until their leases ended.
#[tokio::test]
async fn a_claim_dropped_mid_way_gives_its_tasks_back() {
    lock_client().await;
    let name = unique("q-dropped");
    let proxy = Proxy::start(&endpoint()).await;
    let client = builder(dynamodb_at(&proxy.endpoint())).build().unwrap();
    let queue = queue_of(client.clone(), &name);
    two_pending_tasks(&queue, &name).await;
    let mut first = proxy.withhold_next_answer("UpdateItem");
    let mut second = proxy.withhold_next_answer("UpdateItem");
    let mut claiming = Box::pin(queue.claim(2, LEASE));
    tokio::select! {
        answer = &mut claiming => panic!("answered before its first claim was: {answer:?}"),
        () = first.applied() => {}
    }
    first.deliver();
    tokio::select! {
        answer = &mut claiming => panic!("answered before its second claim was: {answer:?}"),
        () = second.applied() => {}
    }
    drop(claiming);
    second.drop_it();
    client.flush().await;

    let other = queue_of(lock_client().await, &name);
    let again = claim_until(&other, 2).await;
    assert_eq!(
        again.len(),
        2,
        "the dropped claim's tasks stayed claimed: {again:?}"
    );
}

/// Sets tasks `a` and `b` of `queue` (named `name`) pending, and waits until the index shows
/// both, so that a claim finds them at once.
async fn two_pending_tasks(queue: &TaskQueue, name: &str) {
    queue.set_status("a", TaskStatus::Pending).await.unwrap();
    queue.set_status("b", TaskStatus::Pending).await.unwrap();
    let started = Instant::now();
    while index_count(name).await < 2 {
        assert!(
            started.elapsed() < INDEX_LAG,
            "the index never showed the tasks"
        );
    }
}

/// A completion whose answer was lost is recognised by its retry even when another worker
/// claimed the task (done is claimable again) between the completion and the retry: the retry
/// answered false, "the claim was lost and nothing was written", for a completion that applied.
#[tokio::test]
async fn a_completion_whose_answer_was_lost_is_ours_after_another_claim() {
    lock_client().await;
    let name = unique("q-complete-reclaimed");
    let proxy = Proxy::start(&endpoint()).await;
    let queue = queue_of(
        ddb_lock_test_kit::quickly_retrying_client(&proxy.endpoint()),
        &name,
    );
    queue.set_status("job", TaskStatus::Pending).await.unwrap();
    let task = claim_until(&queue, 1).await.pop().expect("claimed");

    let mut answer = proxy.withhold_next_answer("UpdateItem");
    let completing = {
        let queue = queue.clone();
        let task = task.clone();
        tokio::spawn(async move { queue.complete(&task, TaskStatus::Done).await })
    };
    answer.applied().await;
    let other = queue_of(lock_client().await, &name);
    let again = claim_until(&other, 1).await.pop().expect("claimed again");
    answer.drop_it();
    assert!(
        completing.await.unwrap().unwrap(),
        "the completion applied before the other claim"
    );
    assert!(
        !queue.renew(&task, LEASE).await.unwrap(),
        "the first claim is over"
    );
    assert!(other.complete(&again, TaskStatus::Done).await.unwrap());
}

/// A claim that goes on for longer than its lease (its first candidate's answer came late) gives
/// its next candidate a lease from the time of that candidate's claim: it gave it the lease it
/// computed at the start, ended already, and another worker claimed the task at once.
#[tokio::test]
async fn each_task_of_a_long_claim_gets_its_lease_from_its_own_claim() {
    lock_client().await;
    let name = unique("q-long-claim");
    let proxy = Proxy::start(&endpoint()).await;
    let clock = AdjustableClock::new();
    let queue = queue_of(
        ddb_lock_test_kit::client_through(&proxy, Some(clock.clone())),
        &name,
    );
    two_pending_tasks(&queue, &name).await;
    let mut first = proxy.withhold_next_answer("UpdateItem");
    let claim = tokio::spawn({
        let queue = queue.clone();
        async move { queue.claim(2, LEASE).await }
    });
    first.applied().await;
    // Two leases pass before the first candidate's answer arrives.
    clock.advance(2 * LEASE);
    first.deliver();
    let claimed = claim.await.unwrap().unwrap();
    assert_eq!(claimed.len(), 2, "{claimed:?}");
    let other = queue_of(builder(dynamodb()).clock(clock).build().unwrap(), &name);
    let ids: Vec<String> = other
        .claim(2, LEASE)
        .await
        .unwrap()
        .into_iter()
        .map(|t| t.id)
        .collect();
    assert_eq!(
        ids,
        ["a"],
        "only the task whose lease ran out is claimed again"
    );
}
