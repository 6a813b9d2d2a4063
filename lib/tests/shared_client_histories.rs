//! Tasks sharing a client under random cancellation, checked on recorded histories. Two clients
//! (two processes, say) behind one fault-injecting proxy that delays every answer, drops every n-th
//! answer after applying the request, and throttles; several tasks on each, so that waiters line up
//! inside a client as well as across clients. Each task takes guards on one resource with `lock`,
//! waiting, plain, idempotent or fair at random, or runs work under `with_lock`, and a third of the
//! acquisitions are cancelled at a random moment (a timeout drops the future at whichever await it
//! reached: in line, mid-request, around a grant; for `with_lock`, in its work or its release too).
//! A guard holds a while, then releases, drops its guard, or cancels its release at a random
//! moment. Each hold is recorded from the guard's return to the start of its release or drop, on
//! the monotonic clock: inside the true hold.
//!
//! Idempotent acquisitions (`lock` and `with_lock`) name one owner per client, shared by its tasks,
//! so that one of them may be handed back the lock another task of the client holds: two guards of
//! one acquisition, twins, whose holds overlap by right. Half the idempotent guards also get a twin
//! in their own task (a second acquisition, by `lock` or `with_lock`, while the first holds).
//! Either twin's release or drop ends the acquisition and turns the other lost as released, which
//! then releases at once, while the first release is on its way (a twin's release landing before
//! `with_lock`'s made it report its finished work's lock lost). So a twin's hold is recorded only
//! up to a moment it was still known held (read before a look at the guard), and a twin may be
//! lost as released, for no other reason. Then:
//!
//! - every guard but a twin says held from its return to its release (leases are long: nothing
//!   expires, and nobody force-releases);
//! - no acquisition waits its whole wait (long beside holds of milliseconds): a lock left held by
//!   nobody would make every other task wait for its lease;
//! - no two holds of different acquisitions overlap;
//! - a release started while its guard said held never finds the lock gone or another's, and
//!   `with_lock` never says its work lost its lock for any reason but a twin's release: either
//!   means a later send of the acquisition's release landed first (an SDK retry or the client's
//!   resend after a lost answer is read as one, and answers `Unconfirmed`);
//! - once every task is done and both clients have flushed their background work, the lock is
//!   free: no cancelled acquisition or release left it held.
//!
//! `SHARED_CLIENT_SEEDS=a..b` (or one seed `a`) picks the seeds; a failure names its seed.

use ddb_lock::{
    AcquireOptions, Error, LockClient, LockGuard, LockId, LockLost, LockStatus, ReleaseOutcome,
};
use ddb_lock_test_kit::proxy::{Faults, Proxy};
use ddb_lock_test_kit::{builder, endpoint, lock_client, quickly_retrying_dynamodb, unique};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::time::Duration;
use tokio::sync::Notify;
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

/// One recorded hold, of the acquisition `lock_id` (twins share one).
#[derive(Debug)]
struct Hold {
    task: usize,
    how: &'static str,
    lock_id: LockId,
    start: Instant,
    end: Instant,
}

/// One task's way to the lock: the kind of acquisition (named in the history) and its options.
/// The idempotent kinds name the owner the tasks of the client share, so that they make twins.
struct Kind {
    how: &'static str,
    opts: AcquireOptions,
    twin: bool,
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
                let shared_owner = format!("client-{c}");
                tasks.push(tokio::spawn(async move {
                    run_task(task, client, rng, &resource, &shared_owner).await
                }));
            }
        }
        let mut history = Vec::new();
        for task in tasks {
            history.extend(
                task.await
                    .unwrap_or_else(|err| panic!("seed {seed}: {err}")),
            );
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

/// The task's steps, each one acquisition of a kind picked at random; its recorded holds.
async fn run_task(
    task: usize,
    client: LockClient,
    mut rng: StdRng,
    resource: &str,
    shared_owner: &str,
) -> Vec<Hold> {
    let mut history = Vec::new();
    for _ in 0..STEPS {
        let own = AcquireOptions::new()
            .owner(format!("task-{task}"))
            .lease(LEASE)
            .timeout(WAIT);
        let shared = AcquireOptions::new()
            .owner(shared_owner)
            .lease(LEASE)
            .timeout(WAIT)
            .idempotent(true);
        let (how, opts, twin) = match rng.random_range(0..4) {
            0 => ("plain", own, false),
            1 => ("idempotent", shared, true),
            2 => ("fair", own.fair(true), false),
            _ => {
                with_lock(
                    task,
                    &client,
                    &mut rng,
                    resource,
                    &shared,
                    None,
                    &mut history,
                )
                .await;
                continue;
            }
        };
        let kind = Kind { how, opts, twin };
        let Some(guard) = acquire(task, &client, &mut rng, resource, &kind).await else {
            continue;
        };
        if !twin || rng.random_bool(0.5) {
            hold(task, &kind, guard, &mut rng, None, &mut history).await;
            continue;
        }
        // A second acquisition of the owner while this guard holds, by `lock` or `with_lock`,
        // handed back the lock: a twin in this very task (twins across tasks need one to start
        // while the other holds, which lines of waiters make rare), released close to its own.
        // The first holds until the second's acquisition has ended, then a while as usual.
        let mut other = StdRng::seed_from_u64(rng.random());
        let (mut twins, taken) = (Vec::new(), Notify::new());
        let second = async {
            if other.random_bool(0.5) {
                let opts = kind.opts.clone();
                let taken = Some(&taken);
                with_lock(
                    task, &client, &mut other, resource, &opts, taken, &mut twins,
                )
                .await;
            } else if let Some(twin) = acquire(task, &client, &mut other, resource, &kind).await {
                taken.notify_one();
                hold(task, &kind, twin, &mut other, None, &mut twins).await;
            }
            taken.notify_one();
        };
        let first = hold(task, &kind, guard, &mut rng, Some(&taken), &mut history);
        tokio::join!(first, second);
        history.extend(twins);
    }
    history
}

/// A guard of `kind` on `resource`, unless the acquisition failed, or was one of the third
/// cancelled at a random moment. Not an idempotent one (a twin's): one handed the lock back and
/// cancelled before the hand-back's answer leaves the lock to its lease when the lock's first
/// acquisition was cancelled too, a limit the design documents (releasing what the hand-back
/// wrote could delete another hand-back's lock).
async fn acquire(
    task: usize,
    client: &LockClient,
    rng: &mut StdRng,
    resource: &str,
    kind: &Kind,
) -> Option<LockGuard> {
    let acquiring = client.lock(resource, &kind.opts);
    if !kind.twin && rng.random_bool(1.0 / 3.0) {
        let after = Duration::from_micros(rng.random_range(0..20_000));
        return timeout(after, acquiring).await.ok()?.ok();
    }
    match acquiring.await {
        Ok(guard) => Some(guard),
        Err(err @ Error::Timeout { .. }) => {
            panic!(
                "task {task} ({}): {err}: a lock left held by nobody?",
                kind.how
            )
        }
        Err(_) => None,
    }
}

/// Holds `guard` a while (first until `twin_taken` is notified, if given), records the hold, then
/// releases it, drops it, or cancels its release. A twin may be lost as released by its twin from
/// any moment, its start included (the client released the lock before the guard started): its
/// hold is recorded up to the last moment it was known held, its end or, if it was lost in the
/// while, the end of the wait for its twin (read before a look at the guard), if any. The hold
/// ends early when the guard is lost, and its release follows at once, as `with_lock` releases
/// a guard it finds lost: two releases of one acquisition then start close together, the
/// second while the first's request is on its way.
async fn hold(
    task: usize,
    kind: &Kind,
    guard: LockGuard,
    rng: &mut StdRng,
    twin_taken: Option<&Notify>,
    history: &mut Vec<Hold>,
) {
    let how = kind.how;
    let start = Instant::now();
    assert!(
        kind.twin || guard.is_held(),
        "task {task} ({how}): a new guard says lost"
    );
    // The moment read, and the lock as held after it, if it was.
    let known_held = || {
        let at = Instant::now();
        guard.lock().map(|lock| (lock.lock_id(), at))
    };
    let mut last_held = None;
    if let Some(taken) = twin_taken {
        tokio::select! {
            () = taken.notified() => {}
            _ = guard.lost() => {}
        }
        last_held = known_held();
    }
    let holding = Duration::from_micros(rng.random_range(0..3_000));
    tokio::select! {
        () = tokio::time::sleep(holding) => {}
        _ = guard.lost() => {}
    }
    if let Some(now) = known_held() {
        last_held = Some(now);
    } else {
        let lost = guard.lost().await;
        assert!(
            kind.twin && lost == LockLost::Released,
            "task {task}: a guard was lost while held ({how}): {lost:?}"
        );
    }
    if let Some((lock_id, end)) = last_held {
        history.push(Hold {
            task,
            how,
            lock_id,
            start,
            end,
        });
    }
    // Nothing awaited between this look and the release's start.
    let held = guard.is_held();
    match rng.random_range(0..3) {
        0 => released(task, how, held, guard.release().await),
        1 => drop(guard),
        _ => {
            let after = Duration::from_micros(rng.random_range(0..5_000));
            if let Ok(outcome) = timeout(after, guard.release()).await {
                released(task, how, held, outcome);
            }
        }
    }
}

/// Checks the `outcome` of a guard's release that started while the guard said `held`: no other
/// release of the acquisition had started (one would have turned it lost first), and nothing
/// else ends a hold here (leases are long, nobody force-releases), so the lock was there and its
/// own, whatever a twin's release started after it did. `NotFound` or `NotOwner` means another
/// send of the acquisition's release landed before this one's first (an SDK retry or a resend of
/// its own that finds the lock gone is read as one: `Unconfirmed`).
fn released(task: usize, how: &str, held: bool, outcome: Result<ReleaseOutcome, Error>) {
    assert!(
        !(held
            && matches!(
                outcome,
                Ok(ReleaseOutcome::NotFound | ReleaseOutcome::NotOwner { .. })
            )),
        "task {task} ({how}): the release of a held guard found the lock lost: {outcome:?} (a \
         later release of the same acquisition landed first?)"
    );
}

/// Runs work of 0 to 3 ms under `with_lock`, idempotent with the owner the tasks of the client
/// share (`opts`), so that it may be a twin of their guards; a third of the calls are cancelled at
/// a random moment once the work has started (in the work, or in the release after it; not while
/// acquiring, as [`acquire`] says). The work records its hold as a twin's (it is one), into
/// `history` so that a call cancelled after its work keeps it.
///
/// Its answer must not say that the work lost its lock unless a twin released it
/// ([`LockLost::Released`]): leases are long, nobody force-releases, and no other client's owner
/// can take the lock while it is held, so the lock gone (`NotFound`) or another's (`TakenOver`)
/// at its release means another send of the same acquisition's release landed before its own (a
/// twin's release, or a dropped twin's, sent after `with_lock`'s had started but landing first).
/// An SDK retry or a resend of its own release that finds the lock gone is read as one, not as a
/// loss. Its answer when a twin's release came first is `Lost { Released }` if the twin's release
/// started before the work finished, else `Ok`: both are right.
async fn with_lock(
    task: usize,
    client: &LockClient,
    rng: &mut StdRng,
    resource: &str,
    opts: &AcquireOptions,
    taken: Option<&Notify>,
    history: &mut Vec<Hold>,
) {
    let how = "with_lock";
    let work_for = Duration::from_micros(rng.random_range(0..3_000));
    let cancel_after = rng
        .random_bool(1.0 / 3.0)
        .then(|| Duration::from_micros(rng.random_range(0..20_000)));
    let working = Notify::new();
    let started = &working;
    let running = client.with_lock(resource, opts, |watch| async move {
        started.notify_one();
        if let Some(taken) = taken {
            taken.notify_one();
        }
        let start = Instant::now();
        tokio::time::sleep(work_for).await;
        let end = Instant::now();
        if let Some(lock) = watch.lock() {
            history.push(Hold {
                task,
                how,
                lock_id: lock.lock_id(),
                start,
                end,
            });
        }
        Ok::<_, Error>(())
    });
    let result = match cancel_after {
        Some(after) => {
            let cancelled = async {
                working.notified().await;
                tokio::time::sleep(after).await;
            };
            tokio::select! {
                result = running => result,
                () = cancelled => return,
            }
        }
        None => running.await,
    };
    match result {
        Ok(()) => {}
        Err(err @ Error::Timeout { .. }) => {
            panic!("task {task} ({how}): {err}: a lock left held by nobody?")
        }
        Err(Error::Lost { reason, .. }) => assert_eq!(
            *reason,
            LockLost::Released,
            "task {task} ({how}): the work's lock was lost other than by a twin's release (another \
             release of the acquisition landed before with_lock's?)"
        ),
        Err(_) => {}
    }
}

/// No two holds of different acquisitions overlap (twins, of one acquisition, may).
fn check(seed: u64, history: &mut [Hold]) {
    history.sort_by_key(|hold| hold.start);
    for (i, earlier) in history.iter().enumerate() {
        for later in &history[i + 1..] {
            if later.start >= earlier.end {
                continue;
            }
            assert!(
                later.lock_id == earlier.lock_id,
                "seed {seed}: the holds of task {} ({}) and task {} ({}) overlap: {:?} and {:?}",
                earlier.task,
                earlier.how,
                later.task,
                later.how,
                earlier,
                later
            );
        }
    }
}
