//! Concurrency invariant of path locks, checked on recorded histories: workers with clients of
//! their own, behind a proxy that drops answers after applying the request and throttles, lock
//! random paths of a small tree (`[]` to three segments of `a` or `b`) in random modes, one path
//! or two at a time, and release them, abandon them (a crash) or cancel their release, at random
//! (deterministic given a seed). Each path held is recorded as the interval, on the monotonic
//! clock, from the answer to the earlier of its release's send and its lease end, inside the true
//! hold. Then no two intervals of conflicting path locks (one path the other or its ancestor, not
//! both shared: [`LockPath::conflicts_with`]) overlap.
//!
//! `PATH_HISTORY_SEEDS=a..b` (or one seed `a`) picks the seeds; a failure names its seed.

use ddb_lock::{AcquireOptions, LockClient, LockPath, Mode};
use ddb_lock_test_kit::proxy::{Faults, Proxy};
use ddb_lock_test_kit::{builder, endpoint, lock_client, quickly_retrying_dynamodb, unique};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::time::{Duration, Instant};

const WORKERS: usize = 6;
const STEPS: usize = 14;
const SEEDS: std::ops::Range<u64> = 0..3;
const LEASE: Duration = Duration::from_millis(250);
const TIMEOUT: Duration = Duration::from_secs(10);

/// One recorded hold of a path.
#[derive(Debug, Clone)]
struct Interval {
    worker: usize,
    path: LockPath,
    mode: Mode,
    start: Instant,
    end: Instant,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn random_histories_of_path_locks_never_hold_two_conflicting_paths() {
    lock_client().await; // the table
    for seed in ddb_lock_test_kit::seeds::from_env("PATH_HISTORY_SEEDS", SEEDS) {
        let proxy = Proxy::start(&endpoint()).await;
        proxy.set_faults(Faults {
            drop_every: 9,
            throttle_every: 13,
            ..Faults::default()
        });
        let tree = unique("path-history");
        let workers: Vec<_> = (0..WORKERS)
            .map(|worker| {
                let client = builder(quickly_retrying_dynamodb(&proxy.endpoint()))
                    .build()
                    .expect("valid settings");
                let rng = StdRng::seed_from_u64(seed * 1000 + worker as u64);
                let tree = tree.clone();
                tokio::spawn(async move { run_worker(worker, client, rng, &tree).await })
            })
            .collect();
        let mut history = Vec::new();
        for worker in workers {
            history.extend(worker.await.expect("worker"));
        }
        check(seed, &history);
        assert!(
            history.iter().any(|i| i.mode == Mode::Exclusive)
                && history.iter().any(|i| i.mode == Mode::Shared)
                && history.iter().any(|i| i.path.segments().len() == 1)
                && history.iter().any(|i| i.path.segments().len() == 4),
            "seed {seed}: the history exercised both modes and every depth: {history:?}"
        );
    }
}

/// A random path under `tree`: the tree's own node or up to three segments below it.
fn random_path(rng: &mut StdRng, tree: &str) -> LockPath {
    let depth = rng.random_range(0..=3);
    let below = (0..depth).map(|_| if rng.random_bool(0.5) { "a" } else { "b" });
    LockPath::new(std::iter::once(tree).chain(below))
}

async fn run_worker(
    worker: usize,
    client: LockClient,
    mut rng: StdRng,
    tree: &str,
) -> Vec<Interval> {
    let mut history = Vec::new();
    for _ in 0..STEPS {
        let count = rng.random_range(1..=2);
        let paths: Vec<(LockPath, Mode)> = (0..count)
            .map(|_| {
                let mode = if rng.random_bool(0.5) {
                    Mode::Exclusive
                } else {
                    Mode::Shared
                };
                (random_path(&mut rng, tree), mode)
            })
            .collect();
        let opts = AcquireOptions::new()
            .owner(format!("worker-{worker}"))
            .lease(LEASE)
            .timeout(TIMEOUT);
        let Ok(set) = client.acquire_paths(&paths, &opts).await else {
            continue;
        };
        let start = Instant::now();
        tokio::time::sleep(Duration::from_millis(rng.random_range(0..8))).await;
        let action = rng.random_range(0..10);
        for lock in set.locks() {
            let Some(path) = LockPath::from_resource(lock.resource()) else {
                continue;
            };
            // Only the paths asked for; ancestors' intentions are the means, not the hold.
            if !paths.iter().any(|(p, _)| *p == path) {
                continue;
            }
            let end = match action {
                0 => lock.valid_until(),
                _ => lock.valid_until().min(Instant::now()),
            };
            history.push(Interval {
                worker,
                path,
                mode: lock.mode(),
                start,
                end,
            });
        }
        match action {
            0 => {} // a crash: every lock stands until its lease ends
            1 => {
                let _ = tokio::time::timeout(Duration::ZERO, client.release_set(&set)).await;
            }
            _ => {
                client.release_set(&set).await;
            }
        }
    }
    client.flush().await;
    history
}

fn check(seed: u64, history: &[Interval]) {
    for (i, a) in history.iter().enumerate() {
        for b in &history[i + 1..] {
            let overlap = a.start < b.end && b.start < a.end;
            let same_hold = a.worker == b.worker && a.start == b.start;
            assert!(
                same_hold || !(overlap && a.path.conflicts_with(a.mode, &b.path, b.mode)),
                "seed {seed}: conflicting paths held at once by workers {} and {}: {a:?} and {b:?}",
                a.worker,
                b.worker
            );
        }
    }
}
