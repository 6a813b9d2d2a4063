//! `release` and `release_execution` through the handler: a lock gone already is a success
//! (safe saga compensation), another holder's is `LockOwnershipMismatch` for `release` and nothing
//! to release for `release_execution`, and an ended execution's lock is freed without sparing a
//! redriven run's.

mod common;

use chrono::TimeDelta;
use common::{config, error_name, handler, handler_with, invalid_field, invoke, take};
use ddb_lock::AcquireOptions;
use ddb_lock_lambda::error::{name, reason};
use ddb_lock_test_kit::{builder, dynamodb, raw_item, string_attr, unique, FixedClock};
use serde_json::{json, Value};

/// An execution's ARN, the owner of its locks.
const EXECUTION: &str = "arn:aws:states:us-east-1:000000000000:execution:saga:run-1";

/// What the EventBridge rule sends for a failed, timed-out or aborted execution `owner` whose
/// input names `resource` as `invoiceId`.
fn execution_ended(owner: &str, resource: &str) -> Value {
    json!({"op": "release_execution", "owner": owner, "resource_field": "invoiceId",
        "execution_input": json!({"invoiceId": resource, "amount": 12}).to_string()})
}

#[tokio::test]
async fn release_of_a_lock_already_gone_succeeds_with_released_false() {
    let handler = handler().await;
    let resource = unique("h-gone");
    let lock = take(&handler, &resource, "o").await;
    let release = json!({"op": "release", "resource": resource, "owner": "o",
        "lock_id": lock["lock_id"]});
    invoke(&handler, release.clone()).await.unwrap();
    let again = invoke(&handler, release).await.unwrap();
    assert_eq!(again["released"], false);
    assert!(again["reason"].as_str().unwrap().starts_with("not_found"));
}

#[tokio::test]
async fn a_second_release_where_released_items_are_kept_says_already_released() {
    let handler = handler_with(config(&[("DDB_LOCK_KEEP_RELEASED_FOR_MS", "3600000")])).await;
    let resource = unique("h-already");
    let lock = take(&handler, &resource, EXECUTION).await;
    let release = json!({"op": "release", "resource": resource, "owner": EXECUTION,
        "lock_id": lock["lock_id"]});
    let first = invoke(&handler, release.clone()).await.unwrap();
    assert_eq!(first["released"], true);
    let again = invoke(&handler, release).await.unwrap();
    assert_eq!(again["released"], false);
    assert_eq!(again["reason"], reason::ALREADY_RELEASED);
    // By owner too: an ended execution's release event that comes after its own release.
    let ended = invoke(&handler, execution_ended(EXECUTION, &resource))
        .await
        .unwrap();
    assert_eq!(ended["reason"], reason::ALREADY_RELEASED, "{ended}");
    let item = raw_item(&resource).await.expect("kept for an hour");
    assert_eq!(string_attr(&item, "ReleasedBy"), EXECUTION);
}

#[tokio::test]
async fn release_by_another_owner_is_lock_ownership_mismatch_and_keeps_the_lock() {
    let handler = handler().await;
    let resource = unique("h-mismatch");
    let lock = take(&handler, &resource, "o").await;
    let err = invoke(
        &handler,
        json!({"op": "release", "resource": resource, "owner": "intruder",
        "lock_id": lock["lock_id"]}),
    )
    .await;
    assert_eq!(error_name(err), name::LOCK_OWNERSHIP_MISMATCH);
    let status = invoke(&handler, json!({"op": "status", "resource": resource}))
        .await
        .unwrap();
    assert_eq!(status["locked"], true);
    assert_eq!(status["owner"], "o");
}

#[tokio::test]
async fn release_execution_frees_the_lock_an_ended_execution_held() {
    let handler = handler().await;
    let resource = unique("h-execution");
    take(&handler, &resource, EXECUTION).await;
    let answer = invoke(&handler, execution_ended(EXECUTION, &resource))
        .await
        .unwrap();
    assert_eq!(answer["released"], true, "{answer}");
    assert!(raw_item(&resource).await.is_none());
}

/// An ended execution that holds nothing on the resource (another execution holds the lock) has
/// nothing to release, which is no failure of the clean-up: it answered LockOwnershipMismatch, and
/// EventBridge invoked the function twice more for nothing.
#[tokio::test]
async fn release_execution_of_an_execution_that_holds_nothing_there_releases_nothing() {
    let handler = handler().await;
    let resource = unique("h-execution-other");
    take(&handler, &resource, EXECUTION).await;
    let other = "arn:aws:states:us-east-1:000000000000:execution:saga:run-2";
    let answer = invoke(&handler, execution_ended(other, &resource))
        .await
        .unwrap();
    assert_eq!(answer["released"], false, "{answer}");
    assert_eq!(answer["reason"], reason::NOT_HELD, "{answer}");
    assert!(raw_item(&resource).await.is_some(), "the lock stays");
}

#[tokio::test]
async fn release_execution_whose_input_lacks_the_resource_field_names_execution_input() {
    let handler = handler().await;
    let no_field = json!({"op": "release_execution", "owner": EXECUTION,
        "resource_field": "orderId", "execution_input": "{\"invoiceId\": \"x\"}"});
    assert_eq!(
        invalid_field(invoke(&handler, no_field).await),
        "execution_input"
    );
}

/// Written first, and seen failing before the fix: the late event deleted the redriven
/// execution's live lock.
#[tokio::test]
async fn a_late_release_execution_spares_the_lock_a_redriven_execution_took_again() {
    let handler = handler().await;
    let resource = unique("h-redrive");
    let execution = "arn:aws:states:us-east-1:000000000000:execution:saga:redriven";
    // What the EventBridge rule sends for a run of `execution` that stopped a second after it
    // took the lock `taken`.
    let stop_event = |taken: &Value| {
        let acquired_at = chrono::DateTime::parse_from_rfc3339(
            taken["acquired_at"].as_str().expect("acquired_at"),
        )
        .expect("an RFC 3339 time");
        let stopped_at = acquired_at.timestamp_millis() + 1000;
        let event = json!({"op": "release_execution", "owner": execution,
            "resource_field": "invoiceId", "stopped_at": stopped_at,
            "execution_input": json!({"invoiceId": resource}).to_string()});
        (event, acquired_at + TimeDelta::seconds(5))
    };
    let first = take(&handler, &resource, execution).await;
    let (late_event, redriven_at) = stop_event(&first);
    // The run failed and released its lock; it was redriven (same ARN) and the redriven run took
    // the lock again, after the stop.
    let release = json!({"op": "release", "resource": resource, "owner": execution,
        "lock_id": first["lock_id"]});
    invoke(&handler, release).await.unwrap();
    let redriven_client = builder(dynamodb())
        .clock(FixedClock::shared(redriven_at.with_timezone(&chrono::Utc)))
        .build()
        .unwrap();
    let redriven = redriven_client
        .try_acquire(&resource, &AcquireOptions::new().owner(execution))
        .await
        .unwrap()
        .expect("free");

    // The stopped run's status-change event arrives late (or again): the new lock stays.
    assert_eq!(
        error_name(invoke(&handler, late_event).await),
        name::LOCK_OWNERSHIP_MISMATCH,
        "the lock of the redriven run is not the stopped run's"
    );
    let item = raw_item(&resource).await.expect("the redriven run's lock");
    assert_eq!(string_attr(&item, "LockID"), redriven.lock_id().to_string());
    redriven_client.release(&redriven).await.unwrap();

    // Without a redrive, the event frees the lock the stopped run held.
    let second = take(&handler, &resource, execution).await;
    let (event, _) = stop_event(&second);
    let answer = invoke(&handler, event).await.unwrap();
    assert_eq!(answer["released"], true, "{answer}");
    assert!(raw_item(&resource).await.is_none());
}

#[tokio::test]
async fn release_execution_with_a_stop_time_that_is_not_epoch_milliseconds_names_stopped_at() {
    let handler = handler().await;
    let mut bad = execution_ended(EXECUTION, &unique("h-stopped-at"));
    bad["stopped_at"] = json!("yesterday");
    assert_eq!(invalid_field(invoke(&handler, bad).await), "stopped_at");
}

#[tokio::test]
async fn release_with_data_where_items_are_deleted_is_invalid_request_on_data_and_keeps_the_lock() {
    let handler = handler().await;
    let resource = unique("h-release-data");
    let lock = take(&handler, &resource, "o").await;
    let err = invoke(
        &handler,
        json!({"op": "release", "resource": resource, "owner": "o",
        "lock_id": lock["lock_id"], "data": {"next": 1}}),
    )
    .await;
    assert_eq!(invalid_field(err), "data");
    let status = invoke(&handler, json!({"op": "status", "resource": resource}))
        .await
        .unwrap();
    assert_eq!(status["locked"], true, "nothing was sent");
}

/// A saga's release applied in a warm instance and its answer lost on the way to Step Functions,
/// which retries it in the same instance after another execution took the lock in another: it
/// failed with `LockOwnershipMismatch`, which the saga takes for a lock lost during its work,
/// though this instance released it itself. Unconfirmed, and the other execution's lock stays.
#[tokio::test]
async fn a_release_retried_in_its_instance_after_another_took_the_lock_is_unconfirmed() {
    let (first, second) = (handler().await, handler().await);
    let resource = unique("h-retried-release");
    let lock = take(&first, &resource, "exec-1").await;
    let release = json!({"op": "release", "resource": resource, "owner": "exec-1",
        "lock_id": lock["lock_id"]});
    let released = invoke(&first, release.clone()).await.unwrap();
    assert_eq!(released["released"], true);
    take(&second, &resource, "exec-2").await;
    let again = invoke(&first, release).await.unwrap();
    assert_eq!(again["released"], false);
    assert_eq!(again["reason"], reason::UNCONFIRMED);
    // Through another instance, which released nothing of it: the mismatch, as before.
    let elsewhere = invoke(
        &second,
        json!({"op": "release", "resource": resource, "owner": "exec-1",
            "lock_id": lock["lock_id"]}),
    )
    .await;
    assert_eq!(error_name(elsewhere), name::LOCK_OWNERSHIP_MISMATCH);
    let status = invoke(&first, json!({"op": "status", "resource": resource}))
        .await
        .unwrap();
    assert_eq!(status["owner"], "exec-2");
}

/// A resource the table refuses, named in the execution's input, is reported on
/// `execution_input` (it was reported on `resource`, which the event does not have; found by
/// review).
#[tokio::test]
async fn release_execution_of_an_empty_resource_names_the_execution_input() {
    let handler = handler().await;
    let refused = invoke(&handler, execution_ended(EXECUTION, "")).await;
    assert_eq!(invalid_field(refused), "execution_input");
}

/// A release retried on another warm instance after its answer was lost, once another execution
/// took the lock: with the lease end its acquire answered in the event, the new holder acquired
/// the lock by then, so the lock was released, not taken over at its expiry, and the release is
/// unconfirmed (it was `LockOwnershipMismatch`, which a saga takes for a lock lost during its
/// work; found by review). Without it the instance cannot tell, and the mismatch stands; so it
/// does for a holder that took the lock over once the lease had ended, and for a first release
/// (a retry count of zero), which no earlier attempt of its own released: the lock was forced
/// away (found by review).
#[tokio::test]
async fn a_release_retried_on_another_instance_after_another_execution_took_the_lock() {
    let (first, second) = (handler().await, handler().await);
    let resource = unique("h-retried-elsewhere");
    let lock = take(&first, &resource, "exec-1").await;
    let release = json!({"op": "release", "resource": resource, "owner": "exec-1",
        "lock_id": lock["lock_id"], "expires_at": lock["expires_at"], "retry_count": 1});
    invoke(&first, release.clone()).await.unwrap();
    take(&second, &resource, "exec-2").await;

    let again = invoke(&second, release.clone()).await.unwrap();
    assert_eq!(again["released"], false, "{again}");
    assert_eq!(again["reason"], reason::UNCONFIRMED, "{again}");
    let mut without = release;
    without.as_object_mut().unwrap().remove("expires_at");
    assert_eq!(
        error_name(invoke(&second, without).await),
        name::LOCK_OWNERSHIP_MISMATCH
    );

    // Taken over once its lease had ended (by a clock an hour ahead): a lock lost.
    let resource = unique("h-taken-over");
    let lock = take(&first, &resource, "exec-1").await;
    let ahead = ddb_lock_test_kit::AdjustableClock::new();
    ahead.advance(std::time::Duration::from_secs(3600));
    let later = builder(dynamodb()).clock(ahead).build().unwrap();
    later
        .try_acquire(&resource, &AcquireOptions::new().owner("exec-2"))
        .await
        .unwrap()
        .expect("taken over");
    let release = json!({"op": "release", "resource": resource, "owner": "exec-1",
        "lock_id": lock["lock_id"], "expires_at": lock["expires_at"], "retry_count": 1});
    assert_eq!(
        error_name(invoke(&second, release).await),
        name::LOCK_OWNERSHIP_MISMATCH
    );

    // Forced away before the work ended, and taken: its first release learns it lost the lock.
    let resource = unique("h-forced-away");
    let lock = take(&first, &resource, "exec-1").await;
    ddb_lock_test_kit::lock_client()
        .await
        .force_release(&resource)
        .await
        .unwrap();
    take(&second, &resource, "exec-2").await;
    let release = json!({"op": "release", "resource": resource, "owner": "exec-1",
        "lock_id": lock["lock_id"], "expires_at": lock["expires_at"], "retry_count": 0});
    assert_eq!(
        error_name(invoke(&second, release).await),
        name::LOCK_OWNERSHIP_MISMATCH
    );
}
