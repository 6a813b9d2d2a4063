//! The scheduled-job guard against the local endpoint: two nodes (clients of their own, as two
//! processes are) running the same ticks run each tick once, a node late to a tick finds it
//! taken or missed, a tick run before its start stays taken, a job longer than its lease is reported, a lock lost mid-run is reported, and
//! the hints without a backend.

use ddb_lock::{
    BackendFuture, BackendLock, DynamoDbBackend, InvalidInput, LockBackend, LockClient,
    LockingHint, ScheduledJob, Scheduler, TickOutcome,
};
use ddb_lock_test_kit::clocks::AdjustableClock;
use ddb_lock_test_kit::proxy::{Faults, Proxy};
use ddb_lock_test_kit::{
    builder, dynamodb, dynamodb_at, endpoint, lock_client, quickly_retrying_dynamodb, unique,
};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

const HOUR: Duration = Duration::from_secs(3600);
/// Upper bound on any wait, so that a bug fails the test instead of hanging it.
const PATIENCE: Duration = Duration::from_secs(20);

/// A node whose requests go through `proxy`, retried quickly by the SDK.
fn node_through(proxy: &Proxy) -> Scheduler {
    let client = builder(quickly_retrying_dynamodb(&proxy.endpoint()))
        .build()
        .unwrap();
    Scheduler::new(Some(Arc::new(DynamoDbBackend::new(client))))
}

/// The tick ran under its lock, which was never lost.
fn assert_ran_holding_its_lock<T: std::fmt::Debug>(outcome: &TickOutcome<T>) {
    assert!(
        matches!(
            outcome,
            TickOutcome::Ran {
                locked: true,
                lock_lost: false,
                ..
            }
        ),
        "{outcome:?}"
    );
}

/// The tick ran, and its lock was lost while it ran.
fn assert_ran_and_lost_its_lock<T: std::fmt::Debug>(outcome: &TickOutcome<T>) {
    assert!(
        matches!(
            outcome,
            TickOutcome::Ran {
                lock_lost: true,
                ..
            }
        ),
        "{outcome:?}"
    );
}

/// A job of a two-second lease (a renewal every 667 ms), for tests that watch its renewals.
fn renewed_job(name: &str) -> ScheduledJob {
    ScheduledJob::every(unique(name), HOUR)
        .expected_run(Duration::from_secs(1))
        .margin(Duration::from_secs(1))
}

fn node(owner: &str) -> (LockClient, Scheduler) {
    let client = builder(dynamodb()).owner(owner).build().unwrap();
    let backend: Arc<dyn LockBackend> = Arc::new(DynamoDbBackend::new(client.clone()));
    (client, Scheduler::new(Some(backend)))
}

#[tokio::test]
async fn two_nodes_run_each_tick_once() {
    lock_client().await;
    let (_, a) = node("node-a");
    let (_, b) = node("node-b");
    let job = ScheduledJob::every(unique("report"), HOUR);
    let runs: Arc<Mutex<BTreeMap<u64, Vec<&str>>>> = Arc::default();
    let first = a.current_tick(&job) + 1;
    for tick in first..first + 5 {
        let record = |name: &'static str| {
            let runs = Arc::clone(&runs);
            move || async move { runs.lock().unwrap().entry(tick).or_default().push(name) }
        };
        let (ran_a, ran_b) = tokio::join!(
            a.run_tick(&job, tick, record("a")),
            b.run_tick(&job, tick, record("b"))
        );
        let ran = [ran_a.unwrap(), ran_b.unwrap()];
        assert_eq!(
            ran.iter()
                .filter(|r| matches!(r, TickOutcome::Ran { locked: true, .. }))
                .count(),
            1,
            "tick {tick}: {ran:?}"
        );
        assert_eq!(
            ran.iter()
                .filter(|r| matches!(r, TickOutcome::Skipped))
                .count(),
            1,
            "tick {tick}: {ran:?}"
        );
    }
    let runs = runs.lock().unwrap();
    assert_eq!(runs.len(), 5);
    assert!(runs.values().all(|nodes| nodes.len() == 1), "{runs:?}");
}

#[tokio::test]
async fn a_node_late_to_a_tick_finds_it_taken_and_one_later_than_a_lease_misses_it() {
    lock_client().await;
    let (_, a) = node("node-a");
    let clock = AdjustableClock::new();
    let client = builder(dynamodb()).owner("node-b").build().unwrap();
    let b = Scheduler::new(Some(Arc::new(DynamoDbBackend::new(client)))).with_clock(clock.clone());
    let job = ScheduledJob::every(unique("late"), HOUR);
    let tick = a.current_tick(&job);
    // The job ended on a; b's timer fires afterwards for the same tick: the lock was kept.
    let ran = a.run_tick(&job, tick + 1, || async {}).await.unwrap();
    assert!(matches!(ran, TickOutcome::Ran { .. }));
    let late = b
        .run_tick(&job, tick + 1, || async { panic!("ran twice") })
        .await
        .unwrap();
    assert!(matches!(late, TickOutcome::Skipped), "{late:?}");
    // A node coming more than a lease after a tick's start does not run it.
    clock.advance(HOUR + job.lease() + Duration::from_secs(1));
    let missed = b
        .run_tick(&job, tick + 1, || async { panic!("ran a missed tick") })
        .await
        .unwrap();
    assert!(matches!(missed, TickOutcome::Missed), "{missed:?}");
}

/// A node whose check found it within a lease of the tick's start, and whose request then went
/// out after the lease (held up between them: its client's clock, which the acquisition's
/// condition reads, is past the lease) takes the lapsed lock of the node that ran the tick: it
/// must not run it again (found by review).
#[tokio::test]
async fn a_node_held_up_past_the_lease_between_its_check_and_its_request_misses_the_tick() {
    lock_client().await;
    let (_, on_time) = node("node-on-time");
    let (at_check, at_request) = (AdjustableClock::new(), AdjustableClock::new());
    let client = builder(dynamodb())
        .owner("node-held-up")
        .clock(at_request.clone())
        .build()
        .unwrap();
    let held_up =
        Scheduler::new(Some(Arc::new(DynamoDbBackend::new(client)))).with_clock(at_check.clone());
    let job = ScheduledJob::every(unique("held-up"), HOUR);
    let tick = on_time.current_tick(&job) + 1;
    let ran = on_time.run_tick(&job, tick, || async {}).await.unwrap();
    assert_ran_holding_its_lock(&ran);
    let ahead = (job.tick_start(tick) - ddb_lock::Clock::now(&*at_check))
        .to_std()
        .unwrap();
    at_check.advance(ahead);
    at_request.advance(ahead + job.lease() + Duration::from_secs(1));
    let again = held_up
        .run_tick(&job, tick, || async { panic!("ran twice") })
        .await
        .unwrap();
    assert!(matches!(again, TickOutcome::Missed), "{again:?}");
}

#[tokio::test]
async fn a_tick_run_before_its_start_stays_locked_until_a_lease_past_it() {
    lock_client().await;
    let (_, early) = node("node-early");
    let clock = AdjustableClock::new();
    let client = builder(dynamodb())
        .owner("node-late")
        .clock(clock.clone())
        .build()
        .unwrap();
    let late =
        Scheduler::new(Some(Arc::new(DynamoDbBackend::new(client)))).with_clock(clock.clone());
    let job = ScheduledJob::every(unique("early"), HOUR);
    let tick = early.current_tick(&job) + 1;
    let ran = early.run_tick(&job, tick, || async {}).await.unwrap();
    assert_ran_holding_its_lock(&ran);
    // The other node comes within a lease of the tick's start, well past a lease after the early
    // run: the tick has run.
    let ahead = (job.tick_start(tick) - ddb_lock::Clock::now(&*clock))
        .to_std()
        .unwrap();
    clock.advance(ahead + job.lease() - Duration::from_secs(1));
    let again = late
        .run_tick(&job, tick, || async { panic!("ran twice") })
        .await
        .unwrap();
    assert!(matches!(again, TickOutcome::Skipped), "{again:?}");
}

#[tokio::test]
async fn a_tick_more_than_the_longest_lease_ahead_is_refused_by_name() {
    lock_client().await;
    let (_, scheduler) = node("far-ahead");
    let job = ScheduledJob::every(unique("far-ahead"), Duration::from_secs(24 * 3600));
    let tick = scheduler.current_tick(&job) + 400;
    let refused = scheduler
        .run_tick(&job, tick, || async {
            panic!("ran a tick it cannot lock long enough")
        })
        .await
        .unwrap_err();
    assert_eq!(refused.field(), "tick", "{refused}");
}

#[tokio::test]
async fn a_job_longer_than_its_lease_is_reported_and_keeps_its_lock_renewed() {
    lock_client().await;
    let (_, scheduler) = node("slow");
    let job = ScheduledJob::every(unique("slow"), HOUR)
        .expected_run(Duration::from_millis(200))
        .margin(Duration::from_millis(100));
    let tick = scheduler.current_tick(&job) + 1;
    let outcome = scheduler
        .run_tick(&job, tick, || {
            tokio::time::sleep(Duration::from_millis(700))
        })
        .await
        .unwrap();
    match outcome {
        TickOutcome::Ran {
            overran, lock_lost, ..
        } => assert_eq!((overran, lock_lost), (true, false), "renewed while it ran"),
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn a_lock_lost_while_the_job_runs_is_reported() {
    lock_client().await;
    let (_, scheduler) = node("loser");
    let admin = builder(dynamodb()).build().unwrap();
    let id = unique("lost");
    let job = ScheduledJob::every(id.clone(), HOUR)
        .expected_run(Duration::from_millis(150))
        .margin(Duration::from_millis(150));
    let tick = scheduler.current_tick(&job) + 1;
    let key = format!("schedule:{id}:{tick}");
    let outcome = scheduler
        .run_tick(&job, tick, || async {
            // Another hand removes the tick's lock; the next renewal finds it gone.
            admin.force_release(&key).await.unwrap();
            tokio::time::sleep(job.lease()).await;
        })
        .await
        .unwrap();
    assert_ran_and_lost_its_lock(&outcome);
}

/// A job that blocks its thread past its lease (no renewal can run meanwhile) ends in the very
/// poll in which the lease ran out: its lock is reported lost (it was said held throughout;
/// found by review).
#[tokio::test]
async fn a_job_that_blocks_its_thread_past_its_lease_reports_its_lock_lost() {
    lock_client().await;
    let clock = AdjustableClock::new();
    let client = builder(dynamodb())
        .owner("blocker")
        .clock(clock.clone())
        .build()
        .unwrap();
    let scheduler =
        Scheduler::new(Some(Arc::new(DynamoDbBackend::new(client)))).with_clock(clock.clone());
    let job = ScheduledJob::every(unique("blocking"), HOUR)
        .expected_run(Duration::from_millis(150))
        .margin(Duration::from_millis(150));
    // Run at the tick's start: locked for a lease.
    let tick = scheduler.current_tick(&job) + 1;
    let ahead = (job.tick_start(tick) - ddb_lock::Clock::now(&*clock))
        .to_std()
        .unwrap();
    clock.advance(ahead);
    let blocked_for = job.lease() + Duration::from_millis(200);
    let outcome = scheduler
        .run_tick(
            &job,
            tick,
            || async move { std::thread::sleep(blocked_for) },
        )
        .await
        .unwrap();
    assert_ran_and_lost_its_lock(&outcome);
}

#[tokio::test]
async fn the_hints_without_a_backend_and_a_broken_backend() {
    let no_backend = Scheduler::new(None);
    let job = ScheduledJob::every(unique("hints"), HOUR);
    let tick = no_backend.current_tick(&job);
    let required = no_backend.run_tick(&job, tick, || async {}).await;
    assert!(matches!(required, Err(InvalidInput::NeedsBackend)));
    for hint in [LockingHint::PreferGlobal, LockingHint::NodeLocal] {
        let job = job.clone().hint(hint);
        let ran = no_backend
            .run_tick(&job, tick, || async { 7 })
            .await
            .unwrap();
        assert!(
            matches!(
                ran,
                TickOutcome::Ran {
                    output: 7,
                    locked: false,
                    ..
                }
            ),
            "{hint:?}: {ran:?}"
        );
    }
    // A backend that cannot answer: logged, and the tick skipped.
    let unreachable = builder(dynamodb_at("http://127.0.0.1:9")).build().unwrap();
    let broken = Scheduler::new(Some(Arc::new(DynamoDbBackend::new(unreachable))));
    let tick = broken.current_tick(&job) + 1;
    let skipped = broken
        .run_tick(&job, tick, || async { panic!("ran") })
        .await
        .unwrap();
    assert!(
        matches!(skipped, TickOutcome::BackendFailed(_)),
        "{skipped:?}"
    );
    // An invalid job is refused.
    let bad = ScheduledJob::every("", HOUR);
    assert!(matches!(
        broken.run_tick(&bad, tick, || async {}).await,
        Err(InvalidInput::Empty { field: "id" })
    ));
    // A period with a fraction of a millisecond: ticks are counted in whole milliseconds.
    let fraction = ScheduledJob::every(unique("fraction"), Duration::from_micros(1_500));
    assert!(matches!(
        broken.run_tick(&fraction, tick, || async {}).await,
        Err(InvalidInput::NotWholeMillis {
            field: "period",
            ..
        })
    ));
}

/// The DynamoDB backend, each renewal sent from a task of its own, which says when the renewal
/// starts and when its answer is in (before the scheduler reads it).
struct WatchedRenewals {
    backend: Arc<DynamoDbBackend>,
    started: Arc<tokio::sync::Notify>,
    answered: Arc<AtomicBool>,
}

impl LockBackend for WatchedRenewals {
    fn name(&self) -> &str {
        self.backend.name()
    }

    fn try_lock<'a>(
        &'a self,
        key: &'a str,
        ttl: Duration,
    ) -> BackendFuture<'a, Option<BackendLock>> {
        self.backend.try_lock(key, ttl)
    }

    fn renew<'a>(&'a self, lock: &'a BackendLock) -> BackendFuture<'a, ()> {
        let (backend, lock) = (Arc::clone(&self.backend), lock.clone());
        let answered = Arc::clone(&self.answered);
        let (answer, answer_in) = tokio::sync::oneshot::channel();
        tokio::spawn(async move {
            let _ = answer.send(backend.renew(&lock).await);
            answered.store(true, Ordering::SeqCst);
        });
        self.started.notify_one();
        Box::pin(async move { answer_in.await.expect("the renewal's task answers") })
    }

    fn release(&self, lock: BackendLock) -> BackendFuture<'_, ()> {
        self.backend.release(lock)
    }

    fn keep_until_expiry(&self, lock: &BackendLock) -> bool {
        self.backend.keep_until_expiry(lock)
    }
}

/// A renewal that finds the tick's lock gone, answered while the job blocks its thread: the job
/// ends in the poll in which the answer is in, and the tick reported its lock held throughout
/// (the answer was dropped unread; found by review).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_renewal_answered_as_the_job_ends_that_found_the_lock_gone_reports_it_lost() {
    lock_client().await;
    let admin = builder(dynamodb()).build().unwrap();
    let (started, answered) = (Arc::new(tokio::sync::Notify::new()), Arc::default());
    let backend = WatchedRenewals {
        backend: Arc::new(DynamoDbBackend::new(builder(dynamodb()).build().unwrap())),
        started: Arc::clone(&started),
        answered: Arc::clone(&answered),
    };
    let scheduler = Scheduler::new(Some(Arc::new(backend)));
    let id = unique("renewal-at-the-end");
    let job = ScheduledJob::every(id.clone(), HOUR)
        .expected_run(Duration::from_secs(1))
        .margin(Duration::from_secs(1));
    let tick = scheduler.current_tick(&job) + 1;
    let key = format!("schedule:{id}:{tick}");
    let outcome = scheduler
        .run_tick(&job, tick, || async {
            admin.force_release(&key).await.unwrap();
            started.notified().await;
            // Blocks its thread until the renewal's answer is in, then ends.
            while !answered.load(Ordering::SeqCst) {
                std::hint::spin_loop();
            }
        })
        .await
        .unwrap();
    assert_ran_and_lost_its_lock(&outcome);
}

/// A renewal answered renewed while the job blocks its thread, past the first lease: the answer,
/// unread, left the lease counted from the lock's acquisition, and the tick said its lock lost
/// though the renewal kept it held (found by review).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_renewal_answered_as_the_job_ends_that_renewed_the_lock_keeps_it_held() {
    lock_client().await;
    let clock = AdjustableClock::new();
    let (started, answered) = (Arc::new(tokio::sync::Notify::new()), Arc::default());
    let client = builder(dynamodb()).clock(clock.clone()).build().unwrap();
    let backend = WatchedRenewals {
        backend: Arc::new(DynamoDbBackend::new(client)),
        started: Arc::clone(&started),
        answered: Arc::clone(&answered),
    };
    let scheduler = Scheduler::new(Some(Arc::new(backend))).with_clock(clock.clone());
    // A four-second lease, renewed at a third of it: the renewal keeps the lock held until well
    // after the job, which ends a little past the first lease.
    let job = ScheduledJob::every(unique("renewed-at-the-end"), HOUR)
        .expected_run(Duration::from_secs(2))
        .margin(Duration::from_secs(2));
    // Run at the tick's start: locked for a lease.
    let tick = scheduler.current_tick(&job) + 1;
    let ahead = (job.tick_start(tick) - ddb_lock::Clock::now(&*clock))
        .to_std()
        .unwrap();
    clock.advance(ahead);
    let past_the_lease = job.lease() + Duration::from_millis(200);
    let outcome = scheduler
        .run_tick(&job, tick, || async {
            let began = std::time::Instant::now();
            started.notified().await;
            // Blocks its thread until the renewal's answer is in and the first lease is over.
            while !answered.load(Ordering::SeqCst) || began.elapsed() < past_the_lease {
                std::hint::spin_loop();
            }
        })
        .await
        .unwrap();
    assert_ran_holding_its_lock(&outcome);
}

#[tokio::test]
async fn a_renewal_left_unanswered_does_not_hold_up_the_job() {
    lock_client().await;
    let proxy = Proxy::start(&endpoint()).await;
    let scheduler = node_through(&proxy);
    let job = renewed_job("unanswered-renewal");
    let tick = scheduler.current_tick(&job) + 1;
    let mut renewal = proxy.withhold_next_answer("UpdateItem");

    // The job ends once the first renewal was applied, its answer withheld: the job must not
    // wait for that answer to be polled again.
    let outcome = tokio::time::timeout(
        PATIENCE,
        scheduler.run_tick(&job, tick, || async { renewal.applied().await }),
    )
    .await
    .expect("the job ran to its end while its renewal was unanswered")
    .unwrap();
    assert_ran_holding_its_lock(&outcome);
}

#[tokio::test]
async fn a_renewal_that_fails_is_tried_again_and_the_lock_is_not_reported_lost() {
    lock_client().await;
    let proxy = Proxy::start(&endpoint()).await;
    let scheduler = node_through(&proxy);
    let job = renewed_job("failed-renewal");
    let tick = scheduler.current_tick(&job) + 1;

    let outcome = tokio::time::timeout(
        PATIENCE,
        scheduler.run_tick(&job, tick, || async {
            // Every attempt of the first renewal is throttled: it fails, the lock still held.
            proxy.set_faults(Faults {
                throttle_every: 1,
                ..Faults::default()
            });
            proxy.wait_for("UpdateItem", |c| c.throttled >= 3).await;
            proxy.set_faults(Faults::default());
            // The next renewal goes through.
            proxy.wait_for("UpdateItem", |c| c.answered >= 1).await;
        }),
    )
    .await
    .expect("a renewal after the failed one")
    .unwrap();
    assert_ran_holding_its_lock(&outcome);
}

/// `run_every` after the wall clock stepped back: it ran the tick it had just run a second time
/// (it took the next tick from the clock alone), here on a node-local job, where no lock stops it.
#[tokio::test]
async fn run_every_runs_each_tick_once_when_the_clock_steps_back() {
    let clock = AdjustableClock::new();
    let job = ScheduledJob::every(unique("stepped-back"), Duration::from_millis(200))
        .hint(LockingHint::NodeLocal);
    let scheduler = Scheduler::new(None).with_clock(clock.clone());
    let (ran, mut runs) = tokio::sync::mpsc::unbounded_channel();
    let running = {
        let job = job.clone();
        let clock = clock.clone();
        tokio::spawn(async move {
            let mut first = true;
            scheduler
                .run_every(&job, || {
                    // The tick this run belongs to, by the clock when it starts.
                    let _ = ran.send(job.tick_at(ddb_lock::Clock::now(clock.as_ref())));
                    if std::mem::take(&mut first) {
                        // Back a whole period, into the previous tick, as a clock corrected by
                        // NTP steps.
                        clock.set_back(Duration::from_millis(200));
                    }
                    async {}
                })
                .await
        })
    };
    let mut ticks = Vec::new();
    while ticks.len() < 3 {
        ticks.push(
            tokio::time::timeout(PATIENCE, runs.recv())
                .await
                .unwrap()
                .unwrap(),
        );
    }
    running.abort();
    // The first run's tick is read before the step; the later ones after it, on the stepped
    // clock, which is what run_every counts by.
    assert!(
        ticks[0] < ticks[1] && ticks[1] < ticks[2],
        "a tick ran twice: {ticks:?}"
    );
}

/// A node that ran a tick, then released everything its client holds (the end of a Lambda
/// invocation, a container's SIGTERM): the tick's lock stays, and a node reaching the tick later
/// skips it (`release_all` deleted the lock, and the tick ran twice).
#[tokio::test]
async fn a_release_of_everything_leaves_the_ticks_lock() {
    lock_client().await;
    let (client_a, a) = node("node-a");
    let (_, b) = node("node-b");
    let job = ScheduledJob::every(unique("report"), HOUR);
    let tick = a.current_tick(&job) + 1;
    let ran = a.run_tick(&job, tick, || async {}).await.unwrap();
    assert_ran_holding_its_lock(&ran);
    let released = client_a.release_all().await;
    assert!(released.is_empty(), "{released:?}");
    let again = b
        .run_tick(&job, tick, || async { panic!("ran twice") })
        .await
        .unwrap();
    assert!(matches!(again, TickOutcome::Skipped), "{again:?}");
}
