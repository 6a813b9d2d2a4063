//! Concurrency invariants of shared and exclusive holds, lock sets and a semaphore, checked on
//! recorded histories: workers with clients of their own (behind one fault-injecting proxy that
//! drops answers after applying the request, and throttles) take, extend, release, abandon (a
//! crash), cancel the release of, drop the acquisition of (in a fair line, say), and guard holds
//! on two read-write resources (singly, or both as a lock set in random modes; exclusive holds
//! fenced or not, fair or not) and one semaphore, each at random (deterministic given a seed).
//! Each hold is recorded as the interval, on the monotonic clock, from its acquisition's answer to
//! the earlier of its release's send and its lease end: inside the true hold, so any overlap found
//! is a real one. Then:
//!
//! - no exclusive interval overlaps any other interval on its resource (a set's members are
//!   recorded one interval each);
//! - at no moment are more than `PERMITS` semaphore intervals open;
//! - the fencing tokens of the exclusive holds of a resource (sets, single and fair acquisitions
//!   are fenced at random) grow in the order of the holds.
//!
//! `SHARED_HISTORY_SEEDS=a..b` (or one seed `a`) picks the seeds; a failure names its seed.

use ddb_lock::{AcquireOptions, ExtendOutcome, Lock, LockClient, Mode};
use ddb_lock_test_kit::proxy::{Faults, Proxy};
use ddb_lock_test_kit::{builder, endpoint, lock_client, quickly_retrying_dynamodb, unique};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::time::{Duration, Instant};

const WORKERS: usize = 6;
const STEPS: usize = 16;
const PERMITS: u32 = 2;
const SEEDS: std::ops::Range<u64> = 0..3;
/// Short, so that abandoned holds end within the test and extensions race their leases.
const LEASE: Duration = Duration::from_millis(250);
const TIMEOUT: Duration = Duration::from_secs(10);

#[derive(Debug, Clone, Copy, PartialEq)]
enum Kind {
    Exclusive,
    Shared,
    Permit,
}

impl Kind {
    fn of(mode: Mode) -> Kind {
        match mode {
            Mode::Exclusive => Kind::Exclusive,
            // Sets of this test take the two plain modes only.
            Mode::Shared | Mode::IntentShared | Mode::IntentExclusive => Kind::Shared,
        }
    }
}

/// One recorded hold.
#[derive(Debug, Clone)]
struct Interval {
    worker: usize,
    resource: String,
    kind: Kind,
    start: Instant,
    end: Instant,
    token: Option<u64>,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn random_histories_of_shared_exclusive_and_semaphore_holds_keep_the_invariants() {
    lock_client().await; // the table
    for seed in ddb_lock_test_kit::seeds::from_env("SHARED_HISTORY_SEEDS", SEEDS) {
        let proxy = Proxy::start(&endpoint()).await;
        proxy.set_faults(Faults {
            drop_every: 9,
            throttle_every: 13,
            ..Faults::default()
        });
        let rw = unique("history/rw");
        let rw2 = unique("history/rw2");
        let sem = unique("history/semaphore");
        let workers: Vec<_> = (0..WORKERS)
            .map(|worker| {
                let client = builder(quickly_retrying_dynamodb(&proxy.endpoint()))
                    .build()
                    .expect("valid settings");
                let resources = [rw.clone(), rw2.clone(), sem.clone()];
                let rng = StdRng::seed_from_u64(seed * 1000 + worker as u64);
                tokio::spawn(async move { run_worker(worker, client, rng, &resources).await })
            })
            .collect();
        let mut history = Vec::new();
        for worker in workers {
            history.extend(worker.await.expect("worker"));
        }
        check(seed, &history);
        assert!(
            history.iter().any(|i| i.kind == Kind::Exclusive)
                && history.iter().any(|i| i.kind == Kind::Shared)
                && history.iter().filter(|i| i.kind == Kind::Permit).count() > 1,
            "seed {seed}: the history exercised every kind: {history:?}"
        );
        assert!(
            history.iter().any(|i| i.resource == rw2),
            "seed {seed}: the history took lock sets"
        );
        assert!(
            history.iter().filter(|i| i.token.is_some()).count() > 1,
            "seed {seed}: the history took fenced holds"
        );
    }
}

async fn run_worker(
    worker: usize,
    client: LockClient,
    mut rng: StdRng,
    [rw, rw2, sem]: &[String; 3],
) -> Vec<Interval> {
    let mut history = Vec::new();
    for _ in 0..STEPS {
        let base = AcquireOptions::new()
            .owner(format!("worker-{worker}"))
            .lease(LEASE)
            .timeout(TIMEOUT);
        let record = |history: &mut Vec<Interval>, lock: &Lock, kind, start, end| {
            history.push(Interval {
                worker,
                resource: lock.resource().to_owned(),
                kind,
                start,
                end,
                token: lock.fencing_token().map(|t| t.value()),
            });
        };
        if rng.random_bool(0.25) {
            // Both read-write resources as one set, each in a random mode.
            let modes = [random_mode(&mut rng), random_mode(&mut rng)];
            let members = [(rw.as_str(), modes[0]), (rw2.as_str(), modes[1])];
            let fenced = base.clone().fencing(rng.random_bool(0.5));
            let Ok(set) = client.acquire_set(&members, &fenced).await else {
                continue;
            };
            let start = Instant::now();
            work(&mut rng).await;
            let crashed = rng.random_bool(0.1);
            for lock in set.locks() {
                let end = if crashed {
                    lock.valid_until()
                } else {
                    lock.valid_until().min(Instant::now())
                };
                record(&mut history, lock, Kind::of(lock.mode()), start, end);
            }
            if !crashed {
                client.release_set(&set).await;
            }
            continue;
        }
        let kind = match rng.random_range(0..3) {
            0 => Kind::Exclusive,
            1 => Kind::Shared,
            _ => Kind::Permit,
        };
        let (resource, opts) = match kind {
            // Exclusive holds are fenced at random and wait in the fair line at random (and
            // meet the others there): fenced fair holds take their tokens from their grants.
            Kind::Exclusive => {
                let fenced = base.fencing(rng.random_bool(0.5));
                (rw, fenced.fair(rng.random_bool(0.6)))
            }
            Kind::Shared => (rw, base.mode(Mode::Shared)),
            Kind::Permit => (sem, base.permits(PERMITS)),
        };
        if rng.random_bool(0.2) {
            // A guard: extended in the background, dropped (released in the background).
            let Ok(guard) = client.lock(resource, &opts).await else {
                continue;
            };
            let start = Instant::now();
            work(&mut rng).await;
            let end = if guard.is_held() {
                Instant::now()
            } else {
                start
            };
            if let Some(lock) = guard.lock() {
                record(&mut history, &lock, kind, start, end);
            }
            drop(guard);
            continue;
        }
        if rng.random_bool(0.1) {
            // An acquisition dropped at a random point (in line, say): it leaves nothing held.
            let cut = Duration::from_millis(rng.random_range(0..40));
            if let Ok(Ok(lock)) = tokio::time::timeout(cut, client.acquire(resource, &opts)).await {
                let start = Instant::now();
                record(&mut history, &lock, kind, start, Instant::now());
                let _ = client.release(&lock).await;
            }
            continue;
        }
        let Ok(lock) = client.acquire(resource, &opts).await else {
            continue; // timed out, or an error after the SDK's retries: nothing held
        };
        let start = Instant::now();
        let mut valid_until = lock.valid_until();
        work(&mut rng).await;
        if rng.random_bool(0.3) {
            match client.extend(&lock, LEASE).await {
                Ok(ExtendOutcome::Extended(extended)) => valid_until = extended.valid_until(),
                _ => {
                    let end = valid_until.min(Instant::now());
                    record(&mut history, &lock, kind, start, end);
                    continue;
                }
            }
            work(&mut rng).await;
        }
        let end = valid_until.min(Instant::now());
        match rng.random_range(0..10) {
            // A crash: the hold stands until its lease ends.
            0 => record(&mut history, &lock, kind, start, valid_until),
            // A release cancelled at its first await.
            1 => {
                let _ = tokio::time::timeout(Duration::ZERO, client.release(&lock)).await;
                record(&mut history, &lock, kind, start, end);
            }
            _ => {
                let _ = client.release(&lock).await;
                record(&mut history, &lock, kind, start, end);
            }
        }
    }
    client.flush().await;
    history
}

fn random_mode(rng: &mut StdRng) -> Mode {
    if rng.random_bool(0.5) {
        Mode::Exclusive
    } else {
        Mode::Shared
    }
}

/// A few milliseconds of work (not synchronisation: nothing waits for anything).
async fn work(rng: &mut StdRng) {
    tokio::time::sleep(Duration::from_millis(rng.random_range(0..8))).await;
}

fn check(seed: u64, history: &[Interval]) {
    let overlaps = |a: &Interval, b: &Interval| a.start < b.end && b.start < a.end;
    let rw: Vec<&Interval> = history.iter().filter(|i| i.kind != Kind::Permit).collect();
    for (i, a) in rw.iter().enumerate() {
        for b in rw[i + 1..].iter().filter(|b| b.resource == a.resource) {
            let exclusive = a.kind == Kind::Exclusive || b.kind == Kind::Exclusive;
            assert!(
                !(exclusive && overlaps(a, b)),
                "seed {seed}: an exclusive hold of worker {} overlapped one of worker {}: {a:?} and {b:?}",
                a.worker,
                b.worker
            );
        }
    }
    for resource in rw.iter().map(|i| &i.resource) {
        let mut fenced: Vec<&&Interval> = rw
            .iter()
            .filter(|i| &i.resource == resource && i.kind == Kind::Exclusive && i.token.is_some())
            .collect();
        fenced.sort_by_key(|i| i.start);
        for pair in fenced.windows(2) {
            assert!(
                pair[0].token < pair[1].token,
                "seed {seed}: fencing tokens out of hold order on {resource}: {:?} then {:?}",
                pair[0],
                pair[1]
            );
        }
    }
    let mut events: Vec<(Instant, i32)> = history
        .iter()
        .filter(|i| i.kind == Kind::Permit && i.start < i.end)
        .flat_map(|i| [(i.start, 1), (i.end, -1)])
        .collect();
    // Ends before starts at the same instant: touching intervals do not overlap.
    events.sort_by_key(|&(at, delta)| (at, delta));
    let mut open = 0;
    for (at, delta) in events {
        open += delta;
        assert!(
            open <= PERMITS as i32,
            "seed {seed}: {open} semaphore holds at {at:?}, over {PERMITS} permits"
        );
    }
}
