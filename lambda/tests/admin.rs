//! The operator's operations through the handler: `force_release` (only where the deployment
//! enables it) and `cleanup` of long-expired locks, resumable by cursor.

mod common;

use chrono::TimeDelta;
use common::{config, error_name, handler, handler_with, invalid_field, invoke, take};
use ddb_lock_lambda::error::name;
use ddb_lock_lambda::Handler;
use ddb_lock_test_kit::{builder, dynamodb, raw_item, unique, OffsetClock};
use serde_json::json;

#[tokio::test]
async fn force_release_is_refused_unless_the_deployment_enables_it() {
    let resource = unique("h-force");
    let disabled = handler().await;
    take(&disabled, &resource, "stuck").await;
    let force = json!({"op": "force_release", "resource": resource});
    assert_eq!(
        error_name(invoke(&disabled, force.clone()).await),
        name::FORCE_RELEASE_DISABLED
    );
    assert!(raw_item(&resource).await.is_some(), "nothing deleted");

    let enabled = handler_with(config(&[("DDB_LOCK_ALLOW_FORCE_RELEASE", "true")])).await;
    let answer = invoke(&enabled, force).await.unwrap();
    assert_eq!(
        answer,
        json!({"resource": resource, "released": true, "previous_owner": "stuck"})
    );
}

/// Handlers of a fresh table configured by `env`: one whose clock is an hour behind (its locks
/// are long expired now) and one on the real clock.
async fn cleanup_handlers(env: &[(&str, &str)]) -> (Handler, Handler) {
    let table = format!("h-cleanup-{}", uuid::Uuid::new_v4());
    let table_client = builder(dynamodb()).table_name(&table).build().unwrap();
    table_client.create_table().await.unwrap();
    let mut settings = config(env);
    settings.table = table.clone();
    let past = builder(dynamodb())
        .table_name(&table)
        .clock(OffsetClock::shared(TimeDelta::hours(-1)))
        .build()
        .unwrap();
    let old = Handler::new(past, settings.clone());
    let now = Handler::new(settings.lock_client(dynamodb()).unwrap(), settings);
    (old, now)
}

#[tokio::test]
async fn cleanup_deletes_long_expired_locks() {
    let (old, now) = cleanup_handlers(&[("DDB_LOCK_CLEANUP_EXPIRED_FOR_MS", "1000")]).await;
    invoke(
        &old,
        json!({"op": "try_acquire", "resource": "abandoned", "owner": "crashed"}),
    )
    .await
    .unwrap();
    let answer = invoke(&now, json!({"op": "cleanup"})).await.unwrap();
    assert_eq!(answer["deleted"], 1, "{answer}");
    assert_eq!(answer["complete"], true);
    assert!(answer.get("next_cursor").is_none(), "{answer}");
}

#[tokio::test]
async fn cleanup_stopped_by_its_bound_answers_a_cursor_that_the_next_cleanup_resumes_from() {
    let (old, now) = cleanup_handlers(&[
        ("DDB_LOCK_CLEANUP_EXPIRED_FOR_MS", "1000"),
        ("DDB_LOCK_CLEANUP_MAX_DELETES", "2"),
    ])
    .await;
    for i in 0..5 {
        let event =
            json!({"op": "try_acquire", "resource": format!("abandoned-{i}"), "owner": "crashed"});
        invoke(&old, event).await.unwrap();
    }
    let (mut deleted, mut event, mut invocations) = (0, json!({"op": "cleanup"}), 0);
    loop {
        let answer = invoke(&now, event.clone()).await.unwrap();
        invocations += 1;
        deleted += answer["deleted"].as_u64().unwrap();
        match answer.get("next_cursor") {
            Some(cursor) => {
                assert_eq!(answer["complete"], false, "{answer}");
                event = json!({"op": "cleanup", "cursor": cursor});
            }
            None => break,
        }
        assert!(invocations < 5, "each cleanup must move on: {answer}");
    }
    assert_eq!(deleted, 5);
    assert_eq!(invocations, 3, "2 + 2 + 1");
}

#[tokio::test]
async fn cleanup_from_a_cursor_no_cleanup_answered_names_the_cursor() {
    let (_, now) = cleanup_handlers(&[]).await;
    let bad = invoke(&now, json!({"op": "cleanup", "cursor": "nowhere"})).await;
    assert_eq!(invalid_field(bad), "cursor");
}

/// A saga's release through the instance that force released its lock, the lock taken by another
/// since: a mismatch, as through any other instance (the force release counted as the saga's own
/// earlier release, and the answer said not released, unconfirmed, for a lock lost during the
/// saga's work; found by review).
#[tokio::test]
async fn a_release_after_a_force_release_through_the_same_instance_is_a_mismatch() {
    let resource = unique("h-force-then-release");
    let enabled = handler_with(config(&[("DDB_LOCK_ALLOW_FORCE_RELEASE", "true")])).await;
    let taken = take(&enabled, &resource, "saga-e").await;
    let force = json!({"op": "force_release", "resource": resource});
    invoke(&enabled, force).await.unwrap();
    take(&handler().await, &resource, "saga-f").await;
    let release = json!({"op": "release", "resource": resource, "owner": "saga-e",
        "lock_id": taken["lock_id"]});
    assert_eq!(
        error_name(invoke(&enabled, release).await),
        name::LOCK_OWNERSHIP_MISMATCH
    );
}
