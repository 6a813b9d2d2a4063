//! Takeover under clock skew, with a clock offset injected into one client. The wall-clock rule
//! trusts `ExpiresAt` against the waiter's clock and moves with skew; the observed-lease rule
//! takes over only a version seen unchanged for a whole lease on the waiter's monotonic clock.

use chrono::TimeDelta;
use ddb_lock::{AcquireOptions, LockClient, LockStatus, TakeoverRule};
use ddb_lock_test_kit::{
    builder, dynamodb, hold, lock_client, raw_item, string_attr, unique, OffsetClock,
};
use std::time::Duration;
use tokio::time::Instant;

const LEASE: Duration = Duration::from_millis(800);

fn skewed(offset: TimeDelta, rule: TakeoverRule) -> LockClient {
    builder(dynamodb())
        .clock(OffsetClock::shared(offset))
        .takeover(rule)
        .build()
        .unwrap()
}

fn as_owner(owner: &str) -> AcquireOptions {
    AcquireOptions::new().owner(owner).lease(LEASE)
}

#[tokio::test]
async fn a_wall_clock_waiter_whose_clock_runs_ahead_takes_over_early() {
    // The hazard the observed-lease rule exists for.
    let holder = lock_client().await;
    let resource = unique("skew-wall-clock");
    let _alices = hold(&holder, &resource, "alice", Duration::from_secs(60)).await;
    let ahead = skewed(TimeDelta::minutes(5), TakeoverRule::WallClock);

    let taken = ahead
        .try_acquire(&resource, &as_owner("bob"))
        .await
        .unwrap();

    assert!(
        taken.is_some(),
        "a clock five minutes ahead sees a one-minute lease as over"
    );
}

#[tokio::test]
async fn an_observed_lease_waiter_whose_clock_runs_ahead_waits_for_the_whole_lease() {
    let holder = lock_client().await;
    let resource = unique("skew-ahead");
    let alices = hold(&holder, &resource, "alice", LEASE).await;
    let ahead = skewed(TimeDelta::minutes(5), TakeoverRule::ObservedLease);

    let started = Instant::now();
    let first = ahead
        .try_acquire(&resource, &as_owner("bob"))
        .await
        .unwrap();
    assert!(first.is_none(), "no takeover before the lease was observed");
    assert!(matches!(
        holder.status(&resource).await.unwrap(),
        LockStatus::Held { .. }
    ));

    let bobs = ahead
        .acquire(&resource, &as_owner("bob").timeout(Duration::from_secs(20)))
        .await
        .expect("taken over once the version stood for a lease");
    assert!(
        started.elapsed() >= LEASE,
        "took over after {:?}, before a whole lease",
        started.elapsed()
    );
    assert!(matches!(
        holder.release(&alices).await.unwrap(),
        ddb_lock::ReleaseOutcome::NotOwner { .. }
    ));
    ahead.release(&bobs).await.unwrap();
}

#[tokio::test]
async fn an_observed_lease_waiter_takes_over_from_a_holder_whose_clock_runs_ahead_within_a_lease() {
    // Alice's clock runs an hour ahead: her ExpiresAt is an hour late, and a wall-clock waiter
    // would wait that hour.
    let alice = skewed(TimeDelta::hours(1), TakeoverRule::WallClock);
    let resource = unique("skew-holder-ahead");
    let _alices = hold(&alice, &resource, "alice", LEASE).await;
    let wall_clock = lock_client().await;
    assert!(wall_clock
        .try_acquire(&resource, &as_owner("carol"))
        .await
        .unwrap()
        .is_none());
    let observer = skewed(TimeDelta::zero(), TakeoverRule::ObservedLease);

    let started = Instant::now();
    let bobs = observer
        .acquire(&resource, &as_owner("bob").timeout(Duration::from_secs(20)))
        .await
        .expect("taken over after one observed lease, not an hour");

    assert!(started.elapsed() >= LEASE);
    observer.release(&bobs).await.unwrap();
}

#[tokio::test]
async fn an_extension_restarts_the_observed_lease() {
    let holder = lock_client().await;
    let resource = unique("skew-extension");
    let alices = hold(&holder, &resource, "alice", LEASE).await;
    let observer = skewed(TimeDelta::zero(), TakeoverRule::ObservedLease);
    assert!(observer
        .try_acquire(&resource, &as_owner("bob"))
        .await
        .unwrap()
        .is_none());

    let ddb_lock::ExtendOutcome::Extended(_) = holder.extend(&alices, LEASE).await.unwrap() else {
        panic!("alice's extension failed");
    };
    // A lease passing is the behaviour under test.
    tokio::time::sleep(LEASE + Duration::from_millis(100)).await;
    let stale = observer
        .try_acquire(&resource, &as_owner("bob"))
        .await
        .unwrap();
    assert!(
        stale.is_none(),
        "the version seen before the extension is gone"
    );
    let item = raw_item(&resource).await.unwrap();
    assert_eq!(
        string_attr(&item, "LockID"),
        alices.lock_id().to_string(),
        "still alice's"
    );

    tokio::time::sleep(LEASE + Duration::from_millis(100)).await;
    let bobs = observer
        .try_acquire(&resource, &as_owner("bob"))
        .await
        .unwrap()
        .expect("the extended version stood unchanged for a lease");
    observer.release(&bobs).await.unwrap();
}

#[tokio::test]
async fn an_observed_lease_waiter_takes_a_free_lock_at_once() {
    let observer = skewed(TimeDelta::minutes(-5), TakeoverRule::ObservedLease);
    lock_client().await;
    let resource = unique("skew-free");

    let lock = observer
        .try_acquire(&resource, &as_owner("bob"))
        .await
        .unwrap()
        .expect("a free lock needs no observation");
    assert_eq!(
        observer.release(&lock).await.unwrap(),
        ddb_lock::ReleaseOutcome::Released
    );
}

/// Under the observed-lease rule an extension refused because the stored lease end is later than
/// its own (its clock stepped back) writes a new version all the same: it answered `Extended`
/// and changed nothing, and a waiter that had seen that version for a lease took the lock from a
/// holder told it held for a lease more.
#[tokio::test]
async fn an_extension_behind_the_stored_lease_end_restarts_the_observed_lease() {
    let (clock, holder, resource, lock) =
        observed_holder_on_an_adjustable_clock("skew-observed-step-back").await;
    let version = |item: &std::collections::HashMap<_, _>| string_attr(item, "Version").to_owned();
    let before = version(&raw_item(&resource).await.unwrap());
    clock.set_back(Duration::from_secs(30));
    match holder.extend(&lock, Duration::from_secs(10)).await.unwrap() {
        ddb_lock::ExtendOutcome::Extended(_) => {}
        other => panic!("expected Extended, got {other:?}"),
    }
    let after = raw_item(&resource).await.unwrap();
    assert_ne!(
        version(&after),
        before,
        "the extension wrote no new version"
    );
    assert_eq!(
        after.get("LeaseMs"),
        Some(&aws_sdk_dynamodb::types::AttributeValue::N("60000".into())),
        "the longer lease stands for the waiters"
    );
}

/// The wall clock jumps forward, then an extension asks for a lease shorter than the one its
/// holder still counts on: its end is later than the stored one, so it is applied, and under the observed-lease rule a waiter times the new version for its `LeaseMs`.
/// It wrote the shorter lease, and a waiter took the lock while the holder counted on the longer
/// (found by review).
#[tokio::test]
async fn an_extension_after_the_clock_jumped_forward_writes_the_lease_its_holder_counts_on() {
    let (clock, holder, resource, lock) =
        observed_holder_on_an_adjustable_clock("skew-observed-jump").await;
    // 50 s on: a 20 s lease from there ends after the stored end, 40 s before the one counted on.
    clock.advance(Duration::from_secs(50));
    match holder.extend(&lock, Duration::from_secs(20)).await.unwrap() {
        ddb_lock::ExtendOutcome::Extended(_) => {}
        other => panic!("expected Extended, got {other:?}"),
    }
    let item = raw_item(&resource).await.unwrap();
    let lease_ms: u64 = match item.get("LeaseMs") {
        Some(aws_sdk_dynamodb::types::AttributeValue::N(ms)) => ms.parse().unwrap(),
        other => panic!("no LeaseMs: {other:?}"),
    };
    let counted_on = lock
        .valid_until()
        .saturating_duration_since(std::time::Instant::now());
    assert!(
        Duration::from_millis(lease_ms) >= counted_on,
        "the new version's lease ({lease_ms} ms) is shorter than the {counted_on:?} its holder counts on"
    );
}

/// A client under the observed-lease rule on a clock the test moves, holding a fresh lock (60 s)
/// on a resource named after `name`.
async fn observed_holder_on_an_adjustable_clock(
    name: &str,
) -> (
    std::sync::Arc<ddb_lock_test_kit::AdjustableClock>,
    LockClient,
    String,
    ddb_lock::Lock,
) {
    lock_client().await;
    let clock = ddb_lock_test_kit::AdjustableClock::new();
    let holder = builder(dynamodb())
        .clock(clock.clone())
        .takeover(TakeoverRule::ObservedLease)
        .build()
        .unwrap();
    let resource = unique(name);
    let lock = holder
        .try_acquire(&resource, &as_owner("alice").lease(Duration::from_secs(60)))
        .await
        .unwrap()
        .expect("free");
    (clock, holder, resource, lock)
}
