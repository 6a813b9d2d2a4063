//! The lock backend contract, one suite over the trait run against both backends: the DynamoDB
//! backend on the local endpoint and the in-memory backend, with the same calls, each on a clock
//! the test moves. Both must give the same outcomes, which are the contract's.

use ddb_lock::{BackendError, BackendLock, DynamoDbBackend, LockBackend, MemoryBackend};
use ddb_lock_test_kit::clocks::AdjustableClock;
use ddb_lock_test_kit::{builder, dynamodb, lock_client, unique};
use std::sync::Arc;
use std::time::Duration;

const TTL: Duration = Duration::from_secs(10);

/// What a call answered, as the transcript records it.
fn acquired(answer: &Result<Option<BackendLock>, BackendError>) -> String {
    match answer {
        Ok(Some(_)) => "acquired".into(),
        Ok(None) => "held by another".into(),
        Err(e) => error(e),
    }
}

fn done(answer: &Result<(), BackendError>) -> String {
    match answer {
        Ok(()) => "ok".into(),
        Err(e) => error(e),
    }
}

fn error(e: &BackendError) -> String {
    match e {
        BackendError::NotHeld { .. } => "not held".into(),
        BackendError::Invalid(invalid) => format!("invalid {}", invalid.field()),
        BackendError::Unavailable(e) => format!("unavailable: {e}"),
    }
}

/// The contract, step by step; returns the transcript.
async fn contract(locks: &dyn LockBackend, clock: &AdjustableClock) -> Vec<String> {
    let mut t = Vec::new();
    let key = unique("backend/job");
    let a = locks.try_lock(&key, TTL).await;
    t.push(format!("try_lock free: {}", acquired(&a)));
    let a = a.unwrap().unwrap();
    t.push(format!(
        "try_lock held: {}",
        acquired(&locks.try_lock(&key, TTL).await)
    ));
    t.push(format!("renew: {}", done(&locks.renew(&a).await)));
    t.push(format!(
        "release: {}",
        done(&locks.release(a.clone()).await)
    ));
    t.push(format!(
        "release again: {}",
        done(&locks.release(a.clone()).await)
    ));
    let b = locks.try_lock(&key, TTL).await.unwrap().unwrap();
    t.push(format!("a new token: {}", b.token() != a.token()));
    t.push(format!(
        "a higher fencing token: {}",
        b.fencing_token() > a.fencing_token()
    ));
    clock.advance(TTL + Duration::from_secs(1));
    t.push(format!(
        "renew after the ttl: {}",
        done(&locks.renew(&b).await)
    ));
    let c = locks.try_lock(&key, TTL).await;
    t.push(format!("try_lock after the ttl: {}", acquired(&c)));
    let c = c.unwrap().unwrap();
    t.push(format!(
        "stale release: {}",
        done(&locks.release(b.clone()).await)
    ));
    t.push(format!(
        "still held: {}",
        acquired(&locks.try_lock(&key, TTL).await)
    ));
    t.push(format!(
        "higher again: {}",
        c.fencing_token() > b.fencing_token()
    ));
    t.push(format!("release: {}", done(&locks.release(c).await)));

    // A lapsed lock nobody took can still be released by its holder.
    let lapsed_key = unique("backend/lapsed");
    let d = locks
        .try_lock(&lapsed_key, Duration::from_secs(1))
        .await
        .unwrap()
        .unwrap();
    clock.advance(Duration::from_secs(2));
    t.push(format!(
        "release after the ttl, not taken: {}",
        done(&locks.release(d).await)
    ));

    // Keys are apart; bad input is refused and names the field.
    let other = unique("backend/other");
    let e = locks.try_lock(&other, TTL).await;
    t.push(format!("another key: {}", acquired(&e)));
    t.push(format!(
        "empty key: {}",
        acquired(&locks.try_lock("", TTL).await)
    ));
    t.push(format!(
        "zero ttl: {}",
        acquired(&locks.try_lock(&other, Duration::ZERO).await)
    ));
    t.push(format!(
        "too long a key: {}",
        acquired(&locks.try_lock(&"k".repeat(4096), TTL).await)
    ));
    locks.release(e.unwrap().unwrap()).await.unwrap();

    // A renewal on a clock stepped back never shortens the lease it renews.
    let renewed_key = unique("backend/renewed-back");
    let f = locks.try_lock(&renewed_key, TTL).await.unwrap().unwrap();
    clock.set_back(Duration::from_secs(5));
    t.push(format!(
        "renew on a clock set back: {}",
        done(&locks.renew(&f).await)
    ));
    clock.advance(Duration::from_secs(5) + TTL - Duration::from_secs(1));
    t.push(format!(
        "held until its first ttl: {}",
        acquired(&locks.try_lock(&renewed_key, TTL).await)
    ));

    // A release whose future is dropped before it is polled (a select!, a timeout) still
    // releases: the lock was handed over to it, nobody else can release it any more.
    let dropped_key = unique("backend/release-dropped");
    let g = locks.try_lock(&dropped_key, TTL).await.unwrap().unwrap();
    drop(locks.release(g));
    locks.flush().await;
    t.push(format!(
        "after a dropped release: {}",
        acquired(&locks.try_lock(&dropped_key, TTL).await)
    ));
    // A try_lock right after a release whose future was dropped: the key is free, as the memory
    // backend, which releases at the call, finds it (the DynamoDB backend's try_lock met its own
    // lock, its release still on its way, and said held by another).
    let at_once_key = unique("backend/release-dropped-at-once");
    let h = locks.try_lock(&at_once_key, TTL).await.unwrap().unwrap();
    drop(locks.release(h));
    t.push(format!(
        "at once after a dropped release: {}",
        acquired(&locks.try_lock(&at_once_key, TTL).await)
    ));
    let fraction = locks
        .try_lock(
            &unique("backend/fraction"),
            Duration::from_micros(10_000_500),
        )
        .await;
    t.push(format!(
        "a ttl in part of a millisecond, as written: {:?}",
        fraction.map(|lock| lock.map(|lock| lock.ttl()))
    ));
    t.push(format!("cleanup: {}", done(&locks.cleanup().await)));
    t
}

const EXPECTED: [&str; 24] = [
    "try_lock free: acquired",
    "try_lock held: held by another",
    "renew: ok",
    "release: ok",
    "release again: not held",
    "a new token: true",
    "a higher fencing token: true",
    "renew after the ttl: not held",
    "try_lock after the ttl: acquired",
    "stale release: not held",
    "still held: held by another",
    "higher again: true",
    "release: ok",
    "release after the ttl, not taken: ok",
    "another key: acquired",
    "empty key: invalid resource",
    "zero ttl: invalid lease",
    "too long a key: invalid resource",
    "renew on a clock set back: ok",
    "held until its first ttl: held by another",
    "after a dropped release: acquired",
    "at once after a dropped release: acquired",
    "a ttl in part of a millisecond, as written: Ok(Some(10s))",
    "cleanup: ok",
];

#[tokio::test]
async fn the_dynamodb_backend_keeps_the_contract() {
    lock_client().await;
    let clock = AdjustableClock::new();
    let client = builder(dynamodb()).clock(clock.clone()).build().unwrap();
    let locks = DynamoDbBackend::new(client).fencing(true);
    assert_eq!(locks.name(), "dynamodb");
    assert_eq!(contract(&locks, &clock).await, EXPECTED);
}

#[tokio::test]
async fn the_memory_backend_keeps_the_same_contract() {
    let clock = AdjustableClock::new();
    let locks = MemoryBackend::with_clock(clock.clone());
    assert_eq!(locks.name(), "memory");
    assert_eq!(contract(&locks, &clock).await, EXPECTED);
}

/// Swept once its lease and the sweep's grace have passed, in time (tokio's, paused here) as well
/// as by the backend's clock.
#[tokio::test(start_paused = true)]
async fn the_memory_backend_sweeps_entries_long_expired() {
    let clock = AdjustableClock::new();
    let locks = MemoryBackend::with_clock(clock.clone());
    let lock = locks.try_lock("swept", TTL).await.unwrap().unwrap();
    let later = TTL + MemoryBackend::SWEEP_AFTER + Duration::from_secs(1);
    clock.advance(later);
    tokio::time::advance(later).await;
    // Another key's call sweeps it: its holder no longer has anything to release.
    locks.try_lock("another", TTL).await.unwrap().unwrap();
    assert!(matches!(
        locks.release(lock).await,
        Err(BackendError::NotHeld { .. })
    ));
}

/// A clock that jumps past a lock's lease and the sweep's grace, then back: a call made meanwhile
/// swept the holder's entry in memory, and the next `try_lock` took its key, while the lock's
/// lease, by the same clock, still ran (found by review). DynamoDB's time to live deletes by AWS's
/// clock, which the client's steps do not move.
async fn a_clock_jump_ahead_and_back(locks: &dyn LockBackend, clock: &AdjustableClock) -> String {
    let key = unique("backend/swept-step");
    let a = locks.try_lock(&key, TTL).await.unwrap().unwrap();
    let jump = TTL + MemoryBackend::SWEEP_AFTER + Duration::from_secs(60);
    clock.advance(jump);
    locks
        .try_lock(&unique("backend/other"), TTL)
        .await
        .unwrap()
        .unwrap();
    clock.set_back(jump);
    format!(
        "try_lock: {}; renew: {}",
        acquired(&locks.try_lock(&key, TTL).await),
        done(&locks.renew(&a).await)
    )
}

#[tokio::test]
async fn a_clock_jump_ahead_and_back_leaves_the_holder_on_both_backends() {
    lock_client().await;
    let clock = AdjustableClock::new();
    let client = builder(dynamodb()).clock(clock.clone()).build().unwrap();
    let dynamodb = a_clock_jump_ahead_and_back(&DynamoDbBackend::new(client), &clock).await;
    let clock = AdjustableClock::new();
    let memory =
        a_clock_jump_ahead_and_back(&MemoryBackend::with_clock(clock.clone()), &clock).await;
    assert_eq!(dynamodb, "try_lock: held by another; renew: ok");
    assert_eq!(memory, dynamodb);
}

/// Two releases of one lock (a handle and its clone), the second called while the first is on its
/// way: in memory the second finds the lock released already; DynamoDB's read it as a resend of the
/// first and answered released too (found by review).
async fn a_second_release_at_once(locks: &dyn LockBackend) -> String {
    let a = locks
        .try_lock(&unique("backend/twice"), TTL)
        .await
        .unwrap()
        .unwrap();
    let first = locks.release(a.clone());
    let second = locks.release(a);
    let (first, second) = tokio::join!(first, second);
    format!("first: {}; second: {}", done(&first), done(&second))
}

#[tokio::test]
async fn a_second_release_at_once_finds_the_lock_released_on_both_backends() {
    lock_client().await;
    let client = builder(dynamodb()).build().unwrap();
    let dynamodb = a_second_release_at_once(&DynamoDbBackend::new(client)).await;
    let memory = a_second_release_at_once(&MemoryBackend::new()).await;
    assert_eq!(memory, "first: ok; second: not held");
    assert_eq!(dynamodb, memory);
}

/// Time paused in a test runs on while the system clock does not: swept by the monotonic clock
/// alone, a holder's entry went while its lease, by the backend's clock, still ran, and the next
/// `try_lock` took its key (found by review).
#[tokio::test(start_paused = true)]
async fn a_memory_backend_in_paused_time_keeps_a_live_holder() {
    let locks = MemoryBackend::new();
    let lease = Duration::from_secs(600);
    let key = "paused";
    let a = locks.try_lock(key, lease).await.unwrap().unwrap();
    tokio::time::sleep(lease + MemoryBackend::SWEEP_AFTER + Duration::from_secs(1)).await;
    locks.try_lock("another", TTL).await.unwrap().unwrap();
    let answers = format!(
        "try_lock: {}; renew: {}",
        acquired(&locks.try_lock(key, TTL).await),
        done(&locks.renew(&a).await)
    );
    assert_eq!(answers, "try_lock: held by another; renew: ok");
}

#[tokio::test]
async fn one_memory_backend_serves_many_tasks_and_exactly_one_wins_each_key() {
    let locks = Arc::new(MemoryBackend::new());
    let tasks: Vec<_> = (0..32)
        .map(|_| {
            let locks = Arc::clone(&locks);
            tokio::spawn(async move { locks.try_lock("contended", TTL).await.unwrap() })
        })
        .collect();
    let mut winners = 0;
    for task in tasks {
        winners += usize::from(task.await.unwrap().is_some());
    }
    assert_eq!(winners, 1);
}

/// Fencing tokens on the clock's scale, and rising when the clock steps back: a token is at least
/// the acquisition's time in microseconds (at the millisecond the item stores) (what a store that purges by token age assumes), and
/// above every earlier one. The memory backend counted acquisitions per key, from 1, and kept a
/// counter for every key ever locked.
async fn tokens_follow_the_clock(locks: &dyn LockBackend, clock: &AdjustableClock) {
    let key = unique("tokens-clock");
    // The acquisition's time, at the millisecond precision the item stores, in microseconds.
    let before = u64::try_from(ddb_lock::Clock::now(clock).timestamp_millis()).unwrap() * 1000;
    let first = locks.try_lock(&key, TTL).await.unwrap().unwrap();
    let token = first.fencing_token().expect("fenced").value();
    assert!(
        token >= before,
        "token {token} below the clock's {before} µs"
    );
    locks.release(first).await.unwrap();
    clock.set_back(Duration::from_secs(10));
    let second = locks.try_lock(&key, TTL).await.unwrap().unwrap();
    assert!(second.fencing_token().expect("fenced").value() > token);
    locks.release(second).await.unwrap();
}

#[tokio::test]
async fn dynamodb_tokens_follow_the_clock() {
    lock_client().await;
    let clock = AdjustableClock::new();
    let client = builder(dynamodb()).clock(clock.clone()).build().unwrap();
    tokens_follow_the_clock(&DynamoDbBackend::new(client).fencing(true), &clock).await;
}

#[tokio::test]
async fn memory_tokens_follow_the_clock_as_dynamodb_tokens_do() {
    let clock = AdjustableClock::new();
    tokens_follow_the_clock(&MemoryBackend::with_clock(clock.clone()), &clock).await;
}

/// A clock that only the test moves, in whole milliseconds.
#[derive(Debug)]
struct SteppedClock(std::sync::atomic::AtomicI64);

impl SteppedClock {
    fn at_now() -> Arc<SteppedClock> {
        Arc::new(SteppedClock(std::sync::atomic::AtomicI64::new(
            chrono::Utc::now().timestamp_millis(),
        )))
    }

    fn step(&self, ms: i64) {
        self.0.fetch_add(ms, std::sync::atomic::Ordering::SeqCst);
    }
}

impl ddb_lock::Clock for SteppedClock {
    fn now(&self) -> chrono::DateTime<chrono::Utc> {
        chrono::DateTime::from_timestamp_millis(self.0.load(std::sync::atomic::Ordering::SeqCst))
            .unwrap()
    }
}

/// A renewal made while the clock reads earlier than an earlier renewal's ends a millisecond
/// past the stored end, on both backends (the DynamoDB backend's client orders its extensions
/// so); the memory backend kept the stored end, and answered "acquired" where DynamoDB answers
/// "held".
async fn renewals_after_a_step_back(locks: &dyn LockBackend, clock: &SteppedClock) -> String {
    let key = unique("backend/renew-step-back");
    let lock = locks.try_lock(&key, TTL).await.unwrap().unwrap();
    clock.step(1_000);
    locks.renew(&lock).await.unwrap(); // ends 11 s after the acquisition
    clock.step(-5_000);
    locks.renew(&lock).await.unwrap(); // one millisecond past that
    clock.step(15_001); // 11.001 s after the acquisition
    acquired(&locks.try_lock(&key, TTL).await)
}

#[tokio::test]
async fn renewals_after_a_step_back_end_past_the_stored_end_on_both_backends() {
    lock_client().await;
    let clock = SteppedClock::at_now();
    let client = builder(dynamodb()).clock(clock.clone()).build().unwrap();
    let dynamodb_answer = renewals_after_a_step_back(&DynamoDbBackend::new(client), &clock).await;
    let clock = SteppedClock::at_now();
    let memory_answer =
        renewals_after_a_step_back(&MemoryBackend::with_clock(clock.clone()), &clock).await;
    assert_eq!(dynamodb_answer, "held by another");
    assert_eq!(memory_answer, dynamodb_answer);
}

/// A renewal after a step back asks for an end a millisecond past the one the renewal before it
/// asked for, applied or not, on both backends: here the first renewal asks for less than the
/// stored lease (refused, the stored end stands) and the second a millisecond past that, still
/// less. The memory backend counted from the stored end and held a millisecond longer.
async fn renewals_after_two_step_backs(locks: &dyn LockBackend, clock: &SteppedClock) -> String {
    let key = unique("backend/renew-two-step-backs");
    let lock = locks.try_lock(&key, TTL).await.unwrap().unwrap(); // ends at 10 s
    clock.step(-5_000);
    locks.renew(&lock).await.unwrap(); // asks for 5 s: the stored 10 s stands
    clock.step(-1_000);
    locks.renew(&lock).await.unwrap(); // asks for 5.001 s: still 10 s
    clock.step(16_001); // 10.001 s after the acquisition
    acquired(&locks.try_lock(&key, TTL).await)
}

#[tokio::test]
async fn renewals_after_two_step_backs_keep_the_stored_end_on_both_backends() {
    lock_client().await;
    let clock = SteppedClock::at_now();
    let client = builder(dynamodb()).clock(clock.clone()).build().unwrap();
    let dynamodb_answer =
        renewals_after_two_step_backs(&DynamoDbBackend::new(client), &clock).await;
    let clock = SteppedClock::at_now();
    let memory_answer =
        renewals_after_two_step_backs(&MemoryBackend::with_clock(clock.clone()), &clock).await;
    assert_eq!(dynamodb_answer, "acquired");
    assert_eq!(memory_answer, dynamodb_answer);
}

/// A renewal made once the release has been called, before its answer: `held` is the release's
/// request, held in the network (DynamoDB) or `None` (memory, which releases at the call).
async fn renewal_during_a_release(
    locks: &dyn LockBackend,
    held: Option<ddb_lock_test_kit::proxy::HeldRequest>,
) -> String {
    let key = unique("backend/renewed-while-released");
    let a = locks.try_lock(&key, TTL).await.unwrap().unwrap();
    let releasing = locks.release(a.clone());
    let renewed = match held {
        Some(mut held) => {
            held.captured().await;
            let renewed = locks.renew(&a).await;
            assert!(held.deliver().await, "the release reached the endpoint");
            renewed
        }
        None => locks.renew(&a).await,
    };
    let released = releasing.await;
    format!("renew: {}; release: {}", done(&renewed), done(&released))
}

/// The DynamoDB backend renewed a lock whose release had been called (applied ahead of the
/// delete, answered `ok`), where the memory backend said not held.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_renewal_after_the_release_was_called_is_refused_on_both_backends() {
    lock_client().await;
    let proxy = ddb_lock_test_kit::proxy::Proxy::start(&ddb_lock_test_kit::endpoint()).await;
    let dynamo = DynamoDbBackend::new(ddb_lock_test_kit::client_through(&proxy, None));
    let held = proxy.delay_next_request("DeleteItem");
    let expected = "renew: not held; release: ok";
    assert_eq!(
        renewal_during_a_release(&dynamo, Some(held)).await,
        expected
    );
    let memory = MemoryBackend::new();
    assert_eq!(renewal_during_a_release(&memory, None).await, expected);
}

/// A renewal refused as expired, then, after the clock stepped back, tried again: the lock's
/// stored lease end is still ahead of that clock, and both backends renew it (the DynamoDB
/// client wrote the renewal and answered not held, leaving the lock held by nobody).
async fn renewal_after_a_step_back_past_an_expiry(
    locks: &dyn LockBackend,
    clock: &AdjustableClock,
) -> String {
    let key = unique("backend/renewed-after-expiry");
    let a = locks.try_lock(&key, TTL).await.unwrap().unwrap();
    clock.advance(TTL + Duration::from_secs(1));
    let expired = done(&locks.renew(&a).await);
    clock.set_back(TTL - Duration::from_secs(1));
    let renewed = done(&locks.renew(&a).await);
    let released = done(&locks.release(a).await);
    format!("expired: {expired}; after the step back: {renewed}; release: {released}")
}

#[tokio::test]
async fn a_renewal_after_an_expiry_and_a_step_back_agrees_on_both_backends() {
    lock_client().await;
    let clock = AdjustableClock::new();
    let client = builder(dynamodb()).clock(clock.clone()).build().unwrap();
    let dynamo = DynamoDbBackend::new(client);
    let expected = "expired: not held; after the step back: ok; release: ok";
    assert_eq!(
        renewal_after_a_step_back_past_an_expiry(&dynamo, &clock).await,
        expected
    );
    let clock = AdjustableClock::new();
    let memory = MemoryBackend::with_clock(clock.clone());
    assert_eq!(
        renewal_after_a_step_back_past_an_expiry(&memory, &clock).await,
        expected
    );
}

/// A release whose future is dropped at once, its DeleteItem failed by DynamoDB (throttled past
/// the SDK's retries): sent again from the background, as a dropped guard's release is (tried
/// once, it left the key held for its time to live, where the memory backend had released it).
#[tokio::test]
async fn a_dropped_release_that_dynamodb_failed_is_sent_again() {
    lock_client().await;
    let proxy = ddb_lock_test_kit::proxy::Proxy::start(&ddb_lock_test_kit::endpoint()).await;
    let locks = DynamoDbBackend::new(ddb_lock_test_kit::client_without_retries(&proxy.endpoint()));
    let key = unique("backend/dropped-failed-release");
    let a = locks.try_lock(&key, TTL).await.unwrap().unwrap();
    proxy.refuse_next("DeleteItem", "ThrottlingException");
    drop(locks.release(a));
    locks.flush().await;
    assert_eq!(proxy.counts("DeleteItem").throttled, 1);
    assert_eq!(
        acquired(&locks.try_lock(&key, TTL).await),
        "acquired",
        "the key stayed held"
    );
}

/// A release whose DeleteItem gets no answer (a connection stuck; the SDK sets no timeout of its
/// own) holds up a `try_lock` of the same key for a while at most: it then tries as before, and
/// finds its own lock still there.
#[tokio::test]
async fn a_try_lock_behind_a_stuck_release_still_answers() {
    lock_client().await;
    let proxy = ddb_lock_test_kit::proxy::Proxy::start(&ddb_lock_test_kit::endpoint()).await;
    let locks = DynamoDbBackend::new(ddb_lock_test_kit::client_without_retries(&proxy.endpoint()));
    let key = unique("backend/stuck-release");
    let a = locks.try_lock(&key, TTL).await.unwrap().unwrap();
    let mut stuck = proxy.delay_next_request("DeleteItem");
    drop(locks.release(a));
    stuck.captured().await;
    let answered = tokio::time::timeout(Duration::from_secs(20), locks.try_lock(&key, TTL)).await;
    assert_eq!(
        acquired(&answered.expect("try_lock answered")),
        "held by another"
    );
    assert!(stuck.deliver().await);
    locks.flush().await;
}

/// A release whose answer was lost, sent again and finding the lock gone (its first send's
/// doing, as far as anyone can tell), is a release, as the memory backend, which loses no
/// answer, says: the DynamoDB backend said not held.
#[tokio::test]
async fn a_release_whose_answer_was_lost_is_released() {
    lock_client().await;
    let proxy = ddb_lock_test_kit::proxy::Proxy::start(&ddb_lock_test_kit::endpoint()).await;
    let locks = DynamoDbBackend::new(ddb_lock_test_kit::client_through(&proxy, None));
    let key = unique("backend/release-answer-lost");
    let a = locks.try_lock(&key, TTL).await.unwrap().unwrap();
    proxy.drop_next_answer("DeleteItem");
    locks.release(a).await.expect("released");
    assert!(proxy.counts("DeleteItem").requests >= 2, "sent again");
    assert!(locks.try_lock(&key, TTL).await.unwrap().is_some());
}

/// As above, on a table that keeps released items, with the SDK's retries off: the client's own
/// resend (a new version) met its first send's release record and answered `AlreadyReleased`,
/// which the backend took for a lock it no longer held (`NotHeld`).
#[tokio::test]
async fn a_release_whose_answer_was_lost_is_released_where_items_are_kept() {
    lock_client().await;
    let proxy = ddb_lock_test_kit::proxy::Proxy::start(&ddb_lock_test_kit::endpoint()).await;
    let dynamodb = ddb_lock_test_kit::dynamodb_with(&proxy.endpoint(), |config| {
        config.retry_config(aws_sdk_dynamodb::config::retry::RetryConfig::disabled())
    });
    let locks = DynamoDbBackend::new(builder(dynamodb).delete_on_release(false).build().unwrap());
    let key = unique("backend/kept-release-answer-lost");
    let a = locks.try_lock(&key, TTL).await.unwrap().unwrap();
    let sent = proxy.counts("UpdateItem").requests;
    proxy.drop_next_answer("UpdateItem");
    locks.release(a).await.expect("released");
    assert!(
        proxy.counts("UpdateItem").requests >= sent + 2,
        "sent again"
    );
    assert!(locks.try_lock(&key, TTL).await.unwrap().is_some());
}
