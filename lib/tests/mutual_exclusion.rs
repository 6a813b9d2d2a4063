//! Many tasks contending for one resource: each acquisition is exclusive. Every task, inside its
//! critical section, reads a counter item and writes it back incremented (a lost update shows up as
//! a short count) and records when it held the lock (an overlap shows up directly).

use aws_sdk_dynamodb::types::AttributeValue;
use ddb_lock::{AcquireOptions, LockClient};
use ddb_lock_test_kit::{builder, dynamodb, lock_client, unique, TABLE};
use std::time::Duration;
use tokio::time::Instant;

const TASKS: usize = 16;
const ACQUISITIONS_PER_TASK: usize = 50;

async fn read_counter(dynamodb: &aws_sdk_dynamodb::Client, key: &str) -> u64 {
    let item = dynamodb
        .get_item()
        .table_name(TABLE)
        .key("PK", AttributeValue::S(key.to_owned()))
        .key("SK", AttributeValue::S("COUNTER".into()))
        .consistent_read(true)
        .send()
        .await
        .expect("read counter")
        .item;
    match item.as_ref().and_then(|i| i.get("Count")) {
        Some(AttributeValue::N(n)) => n.parse().expect("numeric count"),
        _ => 0,
    }
}

async fn write_counter(dynamodb: &aws_sdk_dynamodb::Client, key: &str, count: u64) {
    dynamodb
        .put_item()
        .table_name(TABLE)
        .item("PK", AttributeValue::S(key.to_owned()))
        .item("SK", AttributeValue::S("COUNTER".into()))
        .item("Count", AttributeValue::N(count.to_string()))
        .send()
        .await
        .expect("write counter");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sixteen_tasks_of_sixteen_clients_never_hold_one_lock_at_once_and_lose_no_update() {
    // Each task its own client: they contend through DynamoDB's conditional writes only, as
    // separate processes do.
    lock_client().await; // the table exists
    let clients: Vec<LockClient> = (0..TASKS)
        .map(|_| builder(dynamodb()).build().unwrap())
        .collect();
    count_under_the_lock(clients).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sixteen_tasks_sharing_a_client_never_hold_one_lock_at_once_and_lose_no_update() {
    // One client: the tasks line up in it and releases hand the lock over.
    let client = lock_client().await;
    count_under_the_lock(vec![client; TASKS]).await;
}

/// Task `i` takes the lock through `clients[i]` `ACQUISITIONS_PER_TASK` times, each time
/// incrementing a counter item by a read and a write; no update may be lost and no two critical
/// sections may overlap.
async fn count_under_the_lock(clients: Vec<LockClient>) {
    let resource = unique("stress");
    let counter = format!("COUNTER#{resource}");
    let started = Instant::now();

    let tasks: Vec<_> = clients
        .into_iter()
        .enumerate()
        .map(|(task, client)| {
            let resource = resource.clone();
            let counter = counter.clone();
            tokio::spawn(async move {
                let dynamodb = dynamodb();
                let opts = AcquireOptions::new()
                    .owner(format!("task-{task}"))
                    .lease(Duration::from_secs(120))
                    .timeout(Duration::from_secs(600));
                let mut intervals = Vec::with_capacity(ACQUISITIONS_PER_TASK);
                for _ in 0..ACQUISITIONS_PER_TASK {
                    let lock = client.acquire(&resource, &opts).await.expect("acquire");
                    let entered = Instant::now();
                    let count = read_counter(&dynamodb, &counter).await;
                    tokio::task::yield_now().await; // invite interleaving inside the section
                    write_counter(&dynamodb, &counter, count + 1).await;
                    let left = Instant::now();
                    assert_eq!(
                        client.release(&lock).await.expect("release"),
                        ddb_lock::ReleaseOutcome::Released
                    );
                    intervals.push((entered - started, left - started, task));
                }
                intervals
            })
        })
        .collect();

    let mut intervals = Vec::new();
    for task in tasks {
        intervals.extend(task.await.expect("task finished"));
    }
    let total = TASKS * ACQUISITIONS_PER_TASK;
    assert_eq!(intervals.len(), total);
    assert_eq!(
        read_counter(&dynamodb(), &counter).await,
        total as u64,
        "lost updates: the critical sections overlapped"
    );
    intervals.sort();
    for pair in intervals.windows(2) {
        let ((_, end, a), (start, _, b)) = (pair[0], pair[1]);
        assert!(
            end < start,
            "task {a} held the lock until {end:?} but task {b} entered at {start:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn of_simultaneous_attempts_on_a_free_lock_exactly_one_wins() {
    const ROUNDS: usize = 25;
    const CONTENDERS: usize = 16;
    let client = lock_client().await;
    for round in 0..ROUNDS {
        let resource = unique("race");
        let barrier = std::sync::Arc::new(tokio::sync::Barrier::new(CONTENDERS));
        let attempts: Vec<_> = (0..CONTENDERS)
            .map(|i| {
                let (client, resource, barrier) =
                    (client.clone(), resource.clone(), barrier.clone());
                tokio::spawn(async move {
                    barrier.wait().await;
                    let opts = AcquireOptions::new().owner(format!("contender-{i}"));
                    client
                        .try_acquire(&resource, &opts)
                        .await
                        .expect("try_acquire")
                })
            })
            .collect();
        let mut winners = Vec::new();
        for attempt in attempts {
            winners.extend(attempt.await.expect("task"));
        }
        assert_eq!(
            winners.len(),
            1,
            "round {round}: {} winners for one free lock: {winners:?}",
            winners.len()
        );
    }
}
