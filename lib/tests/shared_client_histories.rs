//! Tasks sharing a client under random cancellation, checked on recorded histories. Two clients
//! (two processes, say) behind one fault-injecting proxy that delays every answer, drops every n-th
//! answer after applying the request, and throttles; several tasks on each, so that waiters line up
//! inside a client as well as across clients. Each task takes guards on one resource with `lock`,
//! waiting, plain, idempotent or fair at random, and a third of the acquisitions are cancelled at a
//! random moment (a timeout drops the future at whichever await it reached: in line, mid-request,
//! around a grant). It holds a while, then releases, drops its guard, or cancels its release at a
//! random moment. Each hold is recorded from the guard's return to the start of its release or
//! drop, on the monotonic clock: inside the true hold. Then:
//!
//! - every guard says held from its return to its release (leases are long: nothing expires);
//! - no acquisition waits its whole wait (long beside holds of milliseconds): a lock left held by
//!   nobody would make every other task wait for its lease;
//! - no two holds overlap;
//! - once every task is done and both clients have flushed their background work, the lock is
//!   free: no cancelled acquisition or release left it held.
//!
//! `SHARED_CLIENT_SEEDS=a..b` (or one seed `a`) picks the seeds; a failure names its seed.

use ddb_lock::{AcquireOptions, Error, LockClient, LockStatus};
use ddb_lock_test_kit::proxy::{Faults, Proxy};
use ddb_lock_test_kit::{builder, endpoint, lock_client, quickly_retrying_dynamodb, unique};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::time::Duration;
use tokio::time::{timeout, Instant};

const SEEDS: std::ops::Range<u64> = 0..8;
const CLIENTS: usize = 2;
const TASKS_PER_CLIENT: usize = 3;
const STEPS: usize = 8;
/// Longer than any seed runs: no lease runs out, so a guard has no reason to be lost.
const LEASE: Duration = Duration::from_secs(60);
/// Upper bound on an acquisition's wait, so that a lock left held by nobody (whose lease is
/// [`LEASE`]) fails the test instead of stalling it: holds last milliseconds.
const WAIT: Duration = Duration::from_secs(20);

/// One recorded hold.
#[derive(Debug)]
struct Hold {
    task: usize,
    how: &'static str,
    start: Instant,
    end: Instant,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tasks_sharing_clients_never_overlap_and_leave_nothing_held_under_cancellation() {
    let admin = lock_client().await; // the table
    for seed in ddb_lock_test_kit::seeds::from_env("SHARED_CLIENT_SEEDS", SEEDS) {
        let started = std::time::Instant::now();
        let proxy = Proxy::start(&endpoint()).await;
        proxy.set_faults(Faults {
            latency: Duration::from_millis(1),
            drop_every: 7,
            throttle_every: 11,
            ..Faults::default()
        });
        let resource = unique("shared-client");
        let clients: Vec<LockClient> = (0..CLIENTS)
            .map(|_| {
                builder(quickly_retrying_dynamodb(&proxy.endpoint()))
                    .build()
                    .expect("valid settings")
            })
            .collect();
        let mut tasks = Vec::new();
        for (c, client) in clients.iter().enumerate() {
            for t in 0..TASKS_PER_CLIENT {
                let task = c * TASKS_PER_CLIENT + t;
                let rng = StdRng::seed_from_u64(seed * 1000 + task as u64);
                let (client, resource) = (client.clone(), resource.clone());
                tasks.push(tokio::spawn(async move {
                    run_task(task, client, rng, &resource).await
                }));
            }
        }
        let mut history = Vec::new();
        for task in tasks {
            history.extend(task.await.expect("task"));
        }
        for client in &clients {
            client.flush().await;
        }
        check(seed, &mut history);
        assert!(
            history.len() > STEPS,
            "seed {seed}: the history took holds: {history:?}"
        );
        assert_eq!(
            admin.status(&resource).await.expect("status"),
            LockStatus::Free,
            "seed {seed}: every task done and every background release flushed, but the lock is held"
        );
        eprintln!("seed {seed}: {:?}", started.elapsed());
    }
}

async fn run_task(task: usize, client: LockClient, mut rng: StdRng, resource: &str) -> Vec<Hold> {
    let mut history = Vec::new();
    for _ in 0..STEPS {
        let base = AcquireOptions::new()
            .owner(format!("task-{task}"))
            .lease(LEASE)
            .timeout(WAIT);
        let (opts, how) = match rng.random_range(0..3) {
            0 => (base, "plain"),
            1 => (base.idempotent(true), "idempotent"),
            _ => (base.fair(true), "fair"),
        };
        let acquiring = client.lock(resource, &opts);
        let guard = if rng.random_bool(1.0 / 3.0) {
            let after = Duration::from_micros(rng.random_range(0..20_000));
            match timeout(after, acquiring).await {
                Ok(Ok(guard)) => guard,
                Ok(Err(_)) | Err(_) => continue,
            }
        } else {
            match acquiring.await {
                Ok(guard) => guard,
                Err(err @ Error::Timeout { .. }) => {
                    panic!("task {task} ({how}): {err}: a lock left held by nobody?")
                }
                Err(_) => continue,
            }
        };
        let start = Instant::now();
        assert!(guard.is_held(), "task {task}: a new guard says lost");
        tokio::time::sleep(Duration::from_micros(rng.random_range(0..3_000))).await;
        assert!(
            guard.is_held(),
            "task {task}: a guard was lost while held ({how}): {:?}",
            guard.lost().await
        );
        history.push(Hold {
            task,
            how,
            start,
            end: Instant::now(),
        });
        match rng.random_range(0..3) {
            0 => drop(guard.release().await),
            1 => drop(guard),
            _ => {
                let after = Duration::from_micros(rng.random_range(0..5_000));
                drop(timeout(after, guard.release()).await);
            }
        }
    }
    history
}

/// No two holds overlap.
fn check(seed: u64, history: &mut [Hold]) {
    history.sort_by_key(|hold| hold.start);
    for pair in history.windows(2) {
        assert!(
            pair[1].start >= pair[0].end,
            "seed {seed}: the holds of task {} ({}) and task {} ({}) overlap: {:?} and {:?}",
            pair[0].task,
            pair[0].how,
            pair[1].task,
            pair[1].how,
            pair[0],
            pair[1]
        );
    }
}
