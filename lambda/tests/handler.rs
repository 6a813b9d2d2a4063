//! The handler called as the runtime calls it (`LambdaEvent::new`), against the local endpoint:
//! every operation, every error name.

use chrono::TimeDelta;
use ddb_lock::AcquireOptions;
use ddb_lock_lambda::error::name;
use ddb_lock_lambda::{Config, Handler, HandlerError};
use ddb_lock_test_kit::{
    builder, dynamodb, lock_client, raw_item, string_attr, unique, FixedClock, OffsetClock, TABLE,
};
use lambda_runtime::{Context, LambdaEvent};
use serde_json::{json, Value};
use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

fn config(extra: &[(&str, &str)]) -> Config {
    Config::from_lookup(|var| {
        if var == "DDB_LOCK_TABLE" {
            return Some(TABLE.to_owned());
        }
        extra
            .iter()
            .find(|(k, _)| *k == var)
            .map(|(_, v)| (*v).to_owned())
    })
    .unwrap()
}

async fn handler_with(config: Config) -> Handler {
    let client = lock_client().await; // creates the table
    drop(client);
    Handler::new(config.lock_client(dynamodb()).unwrap(), config)
}

async fn handler() -> Handler {
    handler_with(config(&[])).await
}

async fn invoke(handler: &Handler, event: Value) -> Result<Value, HandlerError> {
    invoke_with(handler, event, Context::default()).await
}

/// Invokes the handler; the answer as the runtime serializes it.
async fn invoke_with(
    handler: &Handler,
    event: Value,
    context: Context,
) -> Result<Value, HandlerError> {
    let answer = handler.handle(LambdaEvent::new(event, context)).await?;
    Ok(serde_json::to_value(answer).expect("answers serialize"))
}

/// Takes the free lock on `resource` for `owner` through the handler.
async fn take(handler: &Handler, resource: &str, owner: &str) -> Value {
    let event = json!({"op": "try_acquire", "resource": resource, "owner": owner});
    invoke(handler, event).await.expect("the lock was free")
}

fn error_name(result: Result<Value, HandlerError>) -> &'static str {
    match result {
        Err(err) => err.name(),
        Ok(answer) => panic!("expected an error, got {answer}"),
    }
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

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

#[tokio::test]
async fn a_retried_acquire_by_the_same_owner_returns_the_same_lock() {
    let handler = handler().await;
    let resource = unique("h-retry");
    let event = json!({"op": "acquire", "resource": resource, "owner": "exec-1", "wait_ms": 0});
    let first = invoke(&handler, event.clone()).await.unwrap();
    let retried = invoke(&handler, event).await.unwrap();
    assert_eq!(first["lock_id"], retried["lock_id"]);
    assert_eq!(first["expires_at"], retried["expires_at"]);
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
async fn extend_moves_the_lease_and_reports_lost_locks_by_name() {
    let handler = handler().await;
    let resource = unique("h-extend");
    let lock = invoke(
        &handler,
        json!({"op": "try_acquire", "resource": resource, "owner": "o",
        "lease_ms": 10000}),
    )
    .await
    .unwrap();
    let extend = json!({"op": "extend", "resource": resource, "owner": "o",
        "lock_id": lock["lock_id"], "lease_ms": 60000});
    let extended = invoke(&handler, extend.clone()).await.unwrap();
    assert!(extended["expires_at"].as_str() > lock["expires_at"].as_str());

    // Seen two minutes later, the lease has lapsed.
    let later_config = config(&[]);
    let later_client = builder(dynamodb())
        .clock(OffsetClock::shared(TimeDelta::minutes(2)))
        .build()
        .unwrap();
    let later = Handler::new(later_client, later_config);
    assert_eq!(
        error_name(invoke(&later, extend.clone()).await),
        name::LOCK_EXPIRED
    );

    invoke(
        &handler,
        json!({"op": "release", "resource": resource, "owner": "o",
        "lock_id": lock["lock_id"]}),
    )
    .await
    .unwrap();
    assert_eq!(
        error_name(invoke(&handler, extend).await),
        name::LOCK_NOT_FOUND
    );
}

#[tokio::test]
async fn status_reports_holder_remaining_time_and_data() {
    let handler = handler().await;
    let resource = unique("h-status");
    let free = invoke(&handler, json!({"op": "status", "resource": resource}))
        .await
        .unwrap();
    assert_eq!(free, json!({"resource": resource, "locked": false}));
    invoke(
        &handler,
        json!({"op": "try_acquire", "resource": resource, "owner": "o",
        "data": {"step": "charge"}}),
    )
    .await
    .unwrap();
    let held = invoke(&handler, json!({"op": "status", "resource": resource}))
        .await
        .unwrap();
    assert_eq!(held["locked"], true);
    assert_eq!(held["owner"], "o");
    assert_eq!(held["data"], json!({"step": "charge"}));
    assert!(held["remaining_ms"].as_u64().unwrap() <= 30000);
}

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

    let bad = invoke(&now, json!({"op": "cleanup", "cursor": "nowhere"})).await;
    match bad {
        Err(HandlerError::InvalidRequest(invalid)) => assert_eq!(invalid.field, "cursor"),
        other => panic!("expected InvalidRequest, got {other:?}"),
    }
}

#[tokio::test]
async fn a_malformed_lock_item_is_malformed_lock_item() {
    let handler = handler().await;
    let resource = unique("h-malformed");
    dynamodb()
        .put_item()
        .table_name(TABLE)
        .item(
            "PK",
            aws_sdk_dynamodb::types::AttributeValue::S(format!("LOCK#{resource}")),
        )
        .item(
            "SK",
            aws_sdk_dynamodb::types::AttributeValue::S("LOCK".into()),
        )
        .item(
            "Owner",
            aws_sdk_dynamodb::types::AttributeValue::S("legacy".into()),
        )
        .send()
        .await
        .unwrap();
    let status = invoke(&handler, json!({"op": "status", "resource": resource})).await;
    assert_eq!(error_name(status), name::MALFORMED_LOCK_ITEM);
}

#[tokio::test]
async fn a_failing_backend_is_backend_unavailable() {
    let mut settings = config(&[]);
    settings.table = format!("missing-{}", uuid::Uuid::new_v4());
    let handler = Handler::new(settings.lock_client(dynamodb()).unwrap(), settings);
    let status = invoke(&handler, json!({"op": "status", "resource": "r"})).await;
    assert_eq!(error_name(status), name::BACKEND_UNAVAILABLE);
}

#[tokio::test]
async fn malformed_events_are_invalid_request_naming_the_field_and_change_nothing() {
    let handler = handler().await;
    let resource = unique("h-invalid");
    let lock = take(&handler, &resource, "o").await;
    let before = raw_item(&resource).await.unwrap();
    let huge = "x".repeat(5000);
    let cases = [
        (json!("just a string"), "event"),
        (json!({"resource": resource}), "op"),
        (json!({"op": "explode", "resource": resource}), "op"),
        (
            json!({"op": "release", "resource": resource, "owner": "o"}),
            "lock_id",
        ),
        (
            json!({"op": "release", "resource": resource, "owner": "o", "lock_id": 42}),
            "lock_id",
        ),
        (
            json!({"op": "extend", "resource": resource, "owner": "o", "lock_id": lock["lock_id"], "lease_ms": -1}),
            "lease_ms",
        ),
        (
            json!({"op": "extend", "resource": resource, "owner": "o", "lock_id": lock["lock_id"], "lease_ms": 0}),
            "lease_ms",
        ),
        (
            json!({"op": "acquire", "resource": resource, "owner": "o", "wait_ms": 1e30}),
            "wait_ms",
        ),
        (
            json!({"op": "acquire", "resource": huge, "owner": "o"}),
            "resource",
        ),
        (
            json!({"op": "acquire", "resource": resource, "owner": huge}),
            "owner",
        ),
        (
            json!({"op": "acquire", "resource": resource, "owner": "o", "data": huge.repeat(4)}),
            "data",
        ),
        (
            json!({"op": "status", "resource": resource, "owner": "o"}),
            "owner",
        ),
    ];
    for (event, field) in cases {
        match invoke(&handler, event.clone()).await {
            Err(HandlerError::InvalidRequest(invalid)) => {
                assert_eq!(invalid.field, field, "for {event}: {invalid}")
            }
            other => panic!("{event} should be InvalidRequest on {field}, got {other:?}"),
        }
    }
    assert_eq!(
        raw_item(&resource).await.unwrap(),
        before,
        "no lock changed"
    );
}

#[tokio::test]
async fn every_invocation_writes_one_metrics_line() {
    let lines = Arc::new(Mutex::new(Vec::<String>::new()));
    let sink = Arc::clone(&lines);
    let handler = handler()
        .await
        .with_metrics_writer(move |line| sink.lock().unwrap().push(line));
    let resource = unique("h-metrics");
    invoke(
        &handler,
        json!({"op": "acquire", "resource": resource, "owner": "o"}),
    )
    .await
    .unwrap();
    let _ = invoke(
        &handler,
        json!({"op": "try_acquire", "resource": resource, "owner": "p"}),
    )
    .await;
    let _ = invoke(&handler, json!({"op": "nonsense"})).await;

    let lines = lines.lock().unwrap();
    assert_eq!(lines.len(), 3);
    let docs: Vec<Value> = lines
        .iter()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(
        (docs[0]["Operation"].as_str(), docs[0]["Outcome"].as_str()),
        (Some("acquire"), Some("acquired"))
    );
    assert_eq!(docs[0]["Attempts"], 1);
    assert_eq!(docs[0]["Resource"], resource.as_str());
    assert_eq!(docs[1]["Outcome"], name::LOCK_HELD);
    assert_eq!(docs[2]["Outcome"], name::INVALID_REQUEST);
    for doc in &docs {
        assert!(doc["WaitMs"].is_u64());
        assert_eq!(
            doc["_aws"]["CloudWatchMetrics"][0]["Dimensions"],
            json!([["Operation", "Outcome"]])
        );
    }
}

#[tokio::test]
async fn a_body_that_is_not_json_is_invalid_request_on_the_event() {
    use lambda_runtime::tower::{Layer, Service, ServiceExt};
    use lambda_runtime::LambdaInvocation;

    // The guard rewrites the body; the runtime would then deserialize it into the event.
    let seen = Arc::new(Mutex::new(None));
    let record = Arc::clone(&seen);
    let inner = lambda_runtime::tower::service_fn(move |invocation: LambdaInvocation| {
        let record = Arc::clone(&record);
        async move {
            *record.lock().unwrap() = Some(invocation.body);
            Ok::<(), lambda_runtime::Error>(())
        }
    });
    let mut guarded = ddb_lock_lambda::JsonGuard.layer(inner);
    let response = http::Response::new(());
    let (parts, ()) = response.into_parts();
    let invocation = LambdaInvocation {
        parts,
        body: bytes::Bytes::from_static(b"{not json"),
        context: Context::default(),
    };
    guarded
        .ready()
        .await
        .unwrap()
        .call(invocation)
        .await
        .unwrap();
    let body = seen.lock().unwrap().take().unwrap();
    let event: Value = serde_json::from_slice(&body).unwrap();
    let handler = handler().await;
    match invoke(&handler, event).await {
        Err(HandlerError::InvalidRequest(invalid)) => {
            assert_eq!(invalid.field, "event");
            assert!(invalid.problem.contains("not JSON"), "{invalid}");
        }
        other => panic!("expected InvalidRequest, got {other:?}"),
    }
}

#[tokio::test]
async fn release_execution_frees_the_lock_an_ended_execution_held() {
    let handler = handler().await;
    let resource = unique("h-execution");
    let execution = "arn:aws:states:us-east-1:000000000000:execution:saga:run-1";
    take(&handler, &resource, execution).await;
    // What the EventBridge rule sends for a failed, timed-out or aborted execution.
    let event = |owner: &str| {
        json!({"op": "release_execution", "owner": owner, "resource_field": "invoiceId",
            "execution_input": json!({"invoiceId": resource, "amount": 12}).to_string()})
    };
    let other = invoke(
        &handler,
        event("arn:aws:states:us-east-1:000000000000:execution:saga:run-2"),
    )
    .await;
    assert_eq!(error_name(other), name::LOCK_OWNERSHIP_MISMATCH);
    let answer = invoke(&handler, event(execution)).await.unwrap();
    assert_eq!(answer["released"], true, "{answer}");
    assert!(raw_item(&resource).await.is_none());

    let no_field = json!({"op": "release_execution", "owner": execution,
        "resource_field": "orderId", "execution_input": "{\"invoiceId\": \"x\"}"});
    match invoke(&handler, no_field).await {
        Err(HandlerError::InvalidRequest(invalid)) => assert_eq!(invalid.field, "execution_input"),
        other => panic!("expected InvalidRequest, got {other:?}"),
    }
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

    let bad = json!({"op": "release_execution", "owner": execution, "resource_field": "invoiceId",
        "execution_input": json!({"invoiceId": resource}).to_string(), "stopped_at": "yesterday"});
    match invoke(&handler, bad).await {
        Err(HandlerError::InvalidRequest(invalid)) => assert_eq!(invalid.field, "stopped_at"),
        other => panic!("expected InvalidRequest, got {other:?}"),
    }
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

    let unfenced = take(&handler, &unique("lambda-unfenced"), "saga-3").await;
    assert!(unfenced.get("fencing_token").is_none(), "{unfenced}");
}

#[tokio::test]
async fn extend_replaces_or_removes_the_data_the_holder_stored() {
    let handler = handler().await;
    let resource = unique("lambda-data");
    let lock = invoke(
        &handler,
        json!({"op": "try_acquire", "resource": resource, "owner": "saga-1",
            "data": {"step": 1}}),
    )
    .await
    .unwrap();
    let extend = |data: Value| {
        json!({"op": "extend", "resource": resource, "owner": "saga-1",
            "lock_id": lock["lock_id"], "data": data})
    };
    let status = json!({"op": "status", "resource": resource});

    invoke(&handler, extend(json!({"step": 2}))).await.unwrap();
    let after = invoke(&handler, status.clone()).await.unwrap();
    assert_eq!(after["data"], json!({"step": 2}));

    invoke(&handler, extend(Value::Null)).await.unwrap();
    let after = invoke(&handler, status).await.unwrap();
    assert!(after.get("data").is_none(), "{after}");
}
