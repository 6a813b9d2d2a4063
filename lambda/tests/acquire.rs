//! `acquire` and `try_acquire` through the handler: the answer, idempotent retries, contention
//! (`LockHeld`, `LockTimeout`), the invocation's deadline, fencing tokens.

mod common;

use common::{error_name, handler, invoke, invoke_with, now_ms, take};
use ddb_lock_lambda::error::name;
use ddb_lock_test_kit::{raw_item, unique};
use lambda_runtime::Context;
use serde_json::json;

#[tokio::test]
async fn acquire_then_release_answers_with_the_documented_fields() {
    let handler = handler().await;
    let resource = unique("h-acquire");
    let acquired = invoke(
        &handler,
        json!({"op": "acquire", "resource": resource,
        "owner": "exec-1", "lease_ms": 30000, "wait_ms": 1000}),
    )
    .await
    .unwrap();
    for field in [
        "resource",
        "lock_id",
        "owner",
        "acquired_at",
        "expires_at",
        "waited_ms",
        "attempts",
    ] {
        assert!(
            acquired.get(field).is_some(),
            "{field} missing from {acquired}"
        );
    }
    assert_eq!(acquired["owner"], "exec-1");
    let released = invoke(
        &handler,
        json!({"op": "release", "resource": resource,
        "owner": "exec-1", "lock_id": acquired["lock_id"]}),
    )
    .await
    .unwrap();
    assert_eq!(released["released"], true);
    assert!(raw_item(&resource).await.is_none());
}

/// A retried acquire handled by another instance (another sandbox): the same lock, extended with
/// a new version, which a first invocation still running (its write's answer lost) spares when it
/// cleans up after that write.
#[tokio::test]
async fn a_retried_acquire_in_another_instance_returns_the_same_lock_with_a_new_version() {
    let (first_instance, retry_instance) = (handler().await, handler().await);
    let resource = unique("h-retry-elsewhere");
    let event = json!({"op": "acquire", "resource": resource, "owner": "exec-1", "wait_ms": 0});
    let first = invoke(&first_instance, event.clone()).await.unwrap();
    let version = |item: Option<std::collections::HashMap<String, _>>| {
        ddb_lock_test_kit::string_attr(&item.expect("held"), "Version").to_owned()
    };
    let before = version(raw_item(&resource).await);
    let retried = invoke(&retry_instance, event).await.unwrap();
    assert_eq!(first["lock_id"], retried["lock_id"]);
    assert_ne!(version(raw_item(&resource).await), before);
}

#[tokio::test]
async fn a_retried_acquire_by_the_same_owner_returns_the_same_lock() {
    let handler = handler().await;
    let resource = unique("h-retry");
    let event = json!({"op": "acquire", "resource": resource, "owner": "exec-1", "wait_ms": 0});
    let first = invoke(&handler, event.clone()).await.unwrap();
    let retried = invoke(&handler, event).await.unwrap();
    assert_eq!(first["lock_id"], retried["lock_id"]);
    // Handed back as it is by this instance; by another, extended (a new version, which a
    // dropped first attempt's clean-up spares): never shorter (fixed-width timestamps).
    let ends = |answer: &serde_json::Value| answer["expires_at"].as_str().unwrap().to_owned();
    assert!(ends(&retried) >= ends(&first), "{first} {retried}");
    let other = json!({"op": "try_acquire", "resource": resource, "owner": "exec-2"});
    assert_eq!(error_name(invoke(&handler, other).await), name::LOCK_HELD);
}

#[tokio::test]
async fn try_acquire_on_a_held_lock_is_lock_held_naming_the_holder() {
    let handler = handler().await;
    let resource = unique("h-held");
    take(&handler, &resource, "first").await;
    let err = invoke(
        &handler,
        json!({"op": "try_acquire", "resource": resource, "owner": "second"}),
    )
    .await
    .unwrap_err();
    assert_eq!(err.name(), name::LOCK_HELD);
    let message = err.to_string();
    assert!(
        message.contains(&resource) && message.contains("first"),
        "{message}"
    );
}

#[tokio::test]
async fn acquire_of_a_held_lock_times_out_as_lock_timeout() {
    let handler = handler().await;
    let resource = unique("h-timeout");
    take(&handler, &resource, "first").await;
    let err = invoke(
        &handler,
        json!({"op": "acquire", "resource": resource, "owner": "second",
        "wait_ms": 100}),
    )
    .await
    .unwrap_err();
    assert_eq!(err.name(), name::LOCK_TIMEOUT);
    assert!(err.to_string().contains("first"), "{err}");
}

#[tokio::test]
async fn the_wait_ends_before_the_invocation_deadline() {
    let handler = handler().await;
    let resource = unique("h-deadline");
    // Held for 3 s; the caller would wait a minute, but the invocation has 1.5 s left.
    invoke(
        &handler,
        json!({"op": "try_acquire", "resource": resource, "owner": "first",
        "lease_ms": 3000}),
    )
    .await
    .unwrap();
    let mut context = Context::default();
    context.deadline = now_ms() + 1500;
    let event = json!({"op": "acquire", "resource": resource, "owner": "second", "wait_ms": 60000});
    let result = invoke_with(&handler, event, context).await;
    assert_eq!(
        error_name(result),
        name::LOCK_TIMEOUT,
        "a wait past the deadline would have won the lock at its expiry"
    );
}

#[tokio::test]
async fn a_deadline_in_the_past_is_clamped_not_fatal() {
    let handler = handler().await;
    let mut context = Context::default();
    context.deadline = 1_000; // what local emulators send
    let event =
        json!({"op": "acquire", "resource": unique("h-past"), "owner": "o", "wait_ms": 1000});
    let answer = invoke_with(&handler, event, context).await.unwrap();
    assert_eq!(answer["attempts"], 1);
}

#[tokio::test]
async fn a_fenced_acquire_returns_a_fencing_token_that_grows_and_status_shows_it() {
    let handler = handler().await;
    let resource = unique("lambda-fencing");
    let acquire = json!({"op": "try_acquire", "resource": resource, "owner": "saga-1",
        "fencing": true});
    let first = invoke(&handler, acquire.clone()).await.unwrap();
    let first_token = first["fencing_token"].as_u64().expect("a numeric token");
    let status = invoke(&handler, json!({"op": "status", "resource": resource}))
        .await
        .unwrap();
    assert_eq!(status["fencing_token"], first["fencing_token"]);
    invoke(
        &handler,
        json!({"op": "release", "resource": resource, "owner": "saga-1",
            "lock_id": first["lock_id"]}),
    )
    .await
    .unwrap();

    let mut second_event = acquire;
    second_event["owner"] = json!("saga-2");
    let second = invoke(&handler, second_event).await.unwrap();
    assert!(second["fencing_token"].as_u64().unwrap() > first_token);
}

#[tokio::test]
async fn an_unfenced_acquire_answers_no_fencing_token() {
    let handler = handler().await;
    let unfenced = take(&handler, &unique("lambda-unfenced"), "saga-3").await;
    assert!(unfenced.get("fencing_token").is_none(), "{unfenced}");
}
