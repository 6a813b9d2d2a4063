//! A Step Functions execution stopped while holding its lock, then redriven: the redriven run
//! (the same execution ARN, so the same owner) is handed the lock back by an idempotent acquire,
//! and the stopped run's status-change event, late, releases the owner's locks acquired by the
//! stop (`release_owned_acquired_by`). It must leave the redriven run's lock alone, in DynamoDB
//! and in every client, however the hand-back's requests travel.

use chrono::{TimeDelta, Utc};
use ddb_lock::{AcquireOptions, ExtendOutcome, LockClient, ReleaseOutcome};
use ddb_lock_test_kit::clocks::AdjustableClock;
use ddb_lock_test_kit::proxy::{Proxy, WithheldAnswer};
use ddb_lock_test_kit::{
    builder, client_through, dynamodb, raw_item, string_attr, unique, OffsetClock,
};
use std::time::Duration;

const OWNER: &str = "arn:aws:states:eu-west-1:123456789012:execution:checkout:7b1e";

/// An acquisition of a saga step: idempotent, a minute's lease unless told.
fn saga_step(lease: Duration) -> AcquireOptions {
    AcquireOptions::new()
        .owner(OWNER)
        .idempotent(true)
        .lease(lease)
}

/// The late stop event through `client` is refused, and the lock stays the redriven run's, in
/// DynamoDB and in that client (which extends it).
async fn the_late_stop_event_spares(
    client: &LockClient,
    redriven: &ddb_lock::Lock,
    stopped_at: chrono::DateTime<Utc>,
    case: &str,
) {
    let late = client
        .release_owned_acquired_by(redriven.resource(), OWNER, stopped_at)
        .await
        .unwrap();
    assert!(
        matches!(late, ReleaseOutcome::NotOwner { .. }),
        "{case}: {late:?}"
    );
    let item = raw_item(redriven.resource())
        .await
        .expect("the redriven run's lock");
    assert_eq!(string_attr(&item, "LockID"), redriven.lock_id().to_string());
    // The client that sent the event (a warm Lambda instance) extends the redriven run's lock
    // as any: it was marked released there, and the extension, applied, was answered
    // `NotFound` and the lock deleted.
    let extended = client
        .extend(redriven, Duration::from_secs(60))
        .await
        .unwrap();
    assert!(
        matches!(extended, ExtendOutcome::Extended(_)),
        "{case}: {extended:?}"
    );
    let item = raw_item(redriven.resource()).await.expect("still held");
    assert_eq!(
        string_attr(&item, "LockID"),
        redriven.lock_id().to_string(),
        "{case}"
    );
}

/// Handed back through the client that took the lock, or another: the hand-back kept the old
/// `AcquiredAt` (and in the client that took the lock wrote nothing), and the late event
/// released the lock under the redriven run.
#[tokio::test]
async fn a_late_stop_event_spares_the_lock_handed_back_to_the_redriven_run() {
    for same_client in [true, false] {
        let case = format!("handed back through the same client: {same_client}");
        let clock = AdjustableClock::new();
        let stopped_run = builder(dynamodb()).clock(clock.clone()).build().unwrap();
        let resource = unique("handed-back-after-the-stop");
        let minute = Duration::from_secs(60);
        let first = stopped_run
            .try_acquire(&resource, &saga_step(minute))
            .await
            .unwrap()
            .expect("free");
        let stopped_at = first.acquired_at() + TimeDelta::seconds(1);
        clock.advance(Duration::from_secs(5));
        let redriven_run = match same_client {
            true => stopped_run.clone(),
            false => builder(dynamodb()).clock(clock.clone()).build().unwrap(),
        };
        let redriven = redriven_run
            .try_acquire(&resource, &saga_step(minute))
            .await
            .unwrap()
            .expect("handed back");
        assert_eq!(redriven.lock_id(), first.lock_id(), "{case}");

        the_late_stop_event_spares(&stopped_run, &redriven, stopped_at, &case).await;
        assert_eq!(
            redriven_run.release(&redriven).await.unwrap(),
            ReleaseOutcome::Released,
            "{case}"
        );
    }
}

/// The stopped run's own retry of its acquire (a Step Functions `Retry` still running when the
/// run stopped) is handed the lock back with a long lease, and its UpdateItem arrives only after
/// the redriven run's hand-back: it wrote its earlier time over the redriven run's (its longer
/// lease end passed the condition), and the late stop event released the redriven run's lock.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hand_back_arriving_after_a_later_one_keeps_the_later_time() {
    let stopped_run = builder(dynamodb()).build().unwrap();
    let resource = unique("late-hand-back");
    let first = stopped_run
        .try_acquire(&resource, &saga_step(Duration::from_secs(60)))
        .await
        .unwrap()
        .expect("free");
    let proxy = Proxy::start(&ddb_lock_test_kit::endpoint()).await;
    let retry_client = ddb_lock_test_kit::client_through(&proxy, None);
    let mut late = proxy.delay_next_request("UpdateItem");
    let retry = tokio::spawn({
        let resource = resource.clone();
        async move {
            retry_client
                .try_acquire(&resource, &saga_step(Duration::from_secs(600)))
                .await
        }
    });
    late.captured().await;
    // The run stops after its retry's hand-back was sent; the redriven run is handed the lock
    // back later still (its clock five seconds on).
    let stopped_at = Utc::now() + TimeDelta::seconds(1);
    let redriven_run = builder(dynamodb())
        .clock(OffsetClock::shared(TimeDelta::seconds(5)))
        .build()
        .unwrap();
    let redriven = redriven_run
        .try_acquire(&resource, &saga_step(Duration::from_secs(60)))
        .await
        .unwrap()
        .expect("handed back");
    assert_eq!(redriven.lock_id(), first.lock_id());
    assert!(
        late.deliver().await,
        "the retry's hand-back reached DynamoDB"
    );
    let retried = retry.await.unwrap().unwrap().expect("handed back too");
    assert_eq!(retried.lock_id(), first.lock_id());

    the_late_stop_event_spares(&stopped_run, &redriven, stopped_at, "late hand-back").await;
    assert_eq!(
        redriven_run.release(&redriven).await.unwrap(),
        ReleaseOutcome::Released
    );
}

/// The warm Lambda instance that served the stopped run: a client through a proxy, on a clock
/// the test moves.
async fn warm_instance() -> (Proxy, std::sync::Arc<AdjustableClock>, LockClient) {
    let proxy = Proxy::start(&ddb_lock_test_kit::endpoint()).await;
    let clock = AdjustableClock::new();
    let instance = client_through(&proxy, Some(clock.clone()));
    (proxy, clock, instance)
}

/// The late stop event of the run that stopped at `stopped_at`, sent through `instance`: its
/// DeleteItem decided by DynamoDB, its answer held back by `proxy`. Its task, and the answer.
async fn late_event_unanswered(
    proxy: &Proxy,
    instance: &LockClient,
    resource: &str,
    stopped_at: chrono::DateTime<Utc>,
) -> (
    tokio::task::JoinHandle<Result<ReleaseOutcome, ddb_lock::Error>>,
    WithheldAnswer,
) {
    let mut refusal = proxy.withhold_next_answer("DeleteItem");
    let late_event = tokio::spawn({
        let (instance, resource) = (instance.clone(), resource.to_owned());
        async move {
            instance
                .release_owned_acquired_by(&resource, OWNER, stopped_at)
                .await
        }
    });
    refusal.applied().await;
    (late_event, refusal)
}

/// The redriven run's lock handed back to it (an idempotent acquire of the same owner) through
/// `instance`, under a guard.
async fn handed_back_here(instance: &LockClient, redriven: &ddb_lock::Lock) -> ddb_lock::LockGuard {
    let guard = instance
        .lock(redriven.resource(), &saga_step(Duration::from_secs(60)))
        .await
        .unwrap();
    let held = guard.lock().expect("held");
    assert_eq!(held.lock_id(), redriven.lock_id(), "handed back");
    guard
}

/// A lock taken through `stopped_run` (on `clock`) by a run that stopped a second later, and
/// handed back through another client to the redriven run, five seconds on: the redriven run's
/// lock, and the stop time.
async fn handed_back_elsewhere(
    stopped_run: &LockClient,
    clock: &std::sync::Arc<AdjustableClock>,
    resource: &str,
) -> (ddb_lock::Lock, chrono::DateTime<Utc>) {
    let minute = Duration::from_secs(60);
    let first = stopped_run
        .try_acquire(resource, &saga_step(minute))
        .await
        .unwrap()
        .expect("free");
    clock.advance(Duration::from_secs(5));
    let redriven_run = builder(dynamodb()).clock(clock.clone()).build().unwrap();
    let redriven = redriven_run
        .try_acquire(resource, &saga_step(minute))
        .await
        .unwrap()
        .expect("handed back");
    assert_eq!(redriven.lock_id(), first.lock_id());
    (redriven, first.acquired_at() + TimeDelta::seconds(1))
}

/// The redriven run extends its lock through the warm instance that served the stopped run
/// while the late stop event's DeleteItem, refused, is still unanswered there: the extension,
/// applied, was answered `NotFound` (the lock marked released) and the lock deleted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_extension_answered_before_the_late_stop_events_refusal_keeps_the_lock() {
    let (proxy, clock, instance) = warm_instance().await;
    let resource = unique("extended-during-the-late-event");
    let (redriven, stopped_at) = handed_back_elsewhere(&instance, &clock, &resource).await;
    let (late_event, refusal) =
        late_event_unanswered(&proxy, &instance, &resource, stopped_at).await;
    let extended = instance
        .extend(&redriven, Duration::from_secs(60))
        .await
        .unwrap();
    assert!(
        matches!(extended, ExtendOutcome::Extended(_)),
        "{extended:?}"
    );
    refusal.deliver();
    let late = late_event.await.unwrap().unwrap();
    assert!(matches!(late, ReleaseOutcome::NotOwner { .. }), "{late:?}");
    instance.flush().await;
    let item = raw_item(&resource).await.expect("the redriven run's lock");
    assert_eq!(string_attr(&item, "LockID"), redriven.lock_id().to_string());
}

/// The stop event arrives twice at once at the warm instance that served the stopped run: both
/// refused, each left the other the lock's mark, and the redriven run's next extension there
/// was answered `NotFound` and the lock deleted.
#[tokio::test]
async fn a_stop_event_delivered_twice_at_once_leaves_the_redriven_runs_lock() {
    let clock = AdjustableClock::new();
    let instance = builder(dynamodb()).clock(clock.clone()).build().unwrap();
    let resource = unique("stop-event-twice");
    let (redriven, stopped_at) = handed_back_elsewhere(&instance, &clock, &resource).await;
    let (first, second) = tokio::join!(
        instance.release_owned_acquired_by(&resource, OWNER, stopped_at),
        instance.release_owned_acquired_by(&resource, OWNER, stopped_at),
    );
    // (The one sent while the other was on its way may read its refusal as a resend's.)
    for late in [first.unwrap(), second.unwrap()] {
        assert!(
            matches!(
                late,
                ReleaseOutcome::NotOwner { .. } | ReleaseOutcome::Unconfirmed
            ),
            "{late:?}"
        );
    }
    the_late_stop_event_spares(&instance, &redriven, stopped_at, "twice").await;
}

/// The redriven run is handed its lock back through the warm instance that served the stopped
/// run while the late stop event's DeleteItem, refused, is unanswered there; its guard is then
/// dropped. The refused event took the new hold with it, and counted as the release the guard's
/// drop was left to: nothing was sent, and the lock stayed held for nobody for its lease.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_guard_handed_the_lock_back_during_the_late_stop_event_releases_it_when_dropped() {
    let (proxy, clock, instance) = warm_instance().await;
    let resource = unique("handed-back-during-the-late-event");
    let (redriven, stopped_at) = handed_back_elsewhere(&instance, &clock, &resource).await;
    let (late_event, refusal) =
        late_event_unanswered(&proxy, &instance, &resource, stopped_at).await;
    let guard = handed_back_here(&instance, &redriven).await;
    drop(guard);
    refusal.deliver();
    let late = late_event.await.unwrap().unwrap();
    assert!(matches!(late, ReleaseOutcome::NotOwner { .. }), "{late:?}");
    instance.flush().await;
    assert!(
        raw_item(&resource).await.is_none(),
        "the dropped guard released the lock"
    );
}

/// The late stop event reaches the warm instance where the stopped run's guard still lives, and
/// the guard, stopped by it, is dropped while the event's DeleteItem, refused (the lock handed
/// back to the redriven run elsewhere), is unanswered: the guard's release, sent by the lock's
/// id, deleted the redriven run's lock.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_stopped_runs_guard_dropped_during_the_late_stop_event_leaves_the_redriven_runs_lock() {
    let (proxy, clock, instance) = warm_instance().await;
    let resource = unique("stopped-guard-during-the-late-event");
    let minute = Duration::from_secs(60);
    let stopped_runs_guard = instance.lock(&resource, &saga_step(minute)).await.unwrap();
    let first = stopped_runs_guard.lock().expect("held");
    let stopped_at = first.acquired_at() + TimeDelta::seconds(1);
    clock.advance(Duration::from_secs(5));
    let redriven_run = builder(dynamodb()).clock(clock.clone()).build().unwrap();
    let redriven = redriven_run
        .try_acquire(&resource, &saga_step(minute))
        .await
        .unwrap()
        .expect("handed back");
    assert_eq!(redriven.lock_id(), first.lock_id());
    let (late_event, refusal) =
        late_event_unanswered(&proxy, &instance, &resource, stopped_at).await;
    drop(stopped_runs_guard);
    refusal.deliver();
    let late = late_event.await.unwrap().unwrap();
    assert!(matches!(late, ReleaseOutcome::NotOwner { .. }), "{late:?}");
    instance.flush().await;
    let item = raw_item(&resource).await.expect("the redriven run's lock");
    assert_eq!(string_attr(&item, "LockID"), redriven.lock_id().to_string());
}

/// `release_all` is called at the warm instance while the late stop event is on its way there,
/// after the redriven run was handed its lock back through it: the lock was left to the event,
/// refused, and stayed held for nobody, its guard saying held.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn release_all_during_the_late_stop_event_releases_a_lock_handed_back_after_the_stop() {
    use futures_util::FutureExt;
    let (proxy, clock, instance) = warm_instance().await;
    let resource = unique("release-all-during-the-late-event");
    let (redriven, stopped_at) = handed_back_elsewhere(&instance, &clock, &resource).await;
    let (late_event, refusal) =
        late_event_unanswered(&proxy, &instance, &resource, stopped_at).await;
    let guard = handed_back_here(&instance, &redriven).await;
    // Its first poll takes the locks it releases.
    let mut release_all = Box::pin(instance.release_all());
    let taken = release_all.as_mut().now_or_never();
    refusal.deliver();
    let late = late_event.await.unwrap().unwrap();
    assert!(matches!(late, ReleaseOutcome::NotOwner { .. }), "{late:?}");
    let released = match taken {
        Some(released) => released,
        None => release_all.await,
    };
    assert_eq!(released.len(), 1, "{released:?}");
    instance.flush().await;
    assert!(guard.lock().is_none(), "the guard's lock was released");
    assert!(raw_item(&resource).await.is_none());
}

/// The stop event arrives twice at the warm instance, the second sent while the first is on its
/// way; the redriven run is handed its lock back there meanwhile, and its guard dropped: neither
/// refusal counts as a release the guard's drop is left to (a review feared the first, overtaken,
/// would; it is read as overtaken only if it was before it was sent), and the drop releases the
/// lock.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_guard_dropped_during_a_stop_event_sent_twice_releases_its_lock() {
    let (proxy, clock, instance) = warm_instance().await;
    let resource = unique("guard-during-a-twice-sent-event");
    let (redriven, stopped_at) = handed_back_elsewhere(&instance, &clock, &resource).await;
    let (first, first_refusal) =
        late_event_unanswered(&proxy, &instance, &resource, stopped_at).await;
    let (second, second_refusal) =
        late_event_unanswered(&proxy, &instance, &resource, stopped_at).await;
    let guard = handed_back_here(&instance, &redriven).await;
    drop(guard);
    first_refusal.deliver();
    second_refusal.deliver();
    let answers = [
        first.await.unwrap().unwrap(),
        second.await.unwrap().unwrap(),
    ];
    for late in answers {
        assert!(
            matches!(
                late,
                ReleaseOutcome::NotOwner { .. } | ReleaseOutcome::Unconfirmed
            ),
            "{late:?}"
        );
    }
    instance.flush().await;
    assert!(
        raw_item(&resource).await.is_none(),
        "the dropped guard released the lock"
    );
}
