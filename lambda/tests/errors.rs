//! The error names not tied to one operation: `InvalidRequest` for a malformed event or a body
//! that is not JSON (naming the field, changing nothing), `MalformedLockItem`, `NotALockItem`,
//! `BackendUnavailable`.

mod common;

use common::{config, error_name, handler, invalid_field, invoke, take};
use ddb_lock_lambda::error::name;
use ddb_lock_lambda::{Handler, HandlerError};
use ddb_lock_test_kit::proxy::Proxy;
use ddb_lock_test_kit::{dynamodb, endpoint, quickly_retrying_dynamodb, raw_item, unique, TABLE};
use lambda_runtime::Context;
use serde_json::{json, Value};
use std::sync::{Arc, Mutex};

/// Writes an item with string `attributes` at `resource`'s lock key, as something other than the
/// library would.
async fn put_at_lock_key(resource: &str, attributes: &[(&str, &str)]) {
    let string = |value: &str| aws_sdk_dynamodb::types::AttributeValue::S(value.to_owned());
    let mut put = dynamodb()
        .put_item()
        .table_name(TABLE)
        .item("PK", string(&format!("LOCK#{resource}")))
        .item("SK", string("LOCK"));
    for (name, value) in attributes {
        put = put.item(*name, string(value));
    }
    put.send().await.unwrap();
}

#[tokio::test]
async fn a_lock_item_this_library_cannot_read_is_malformed_lock_item() {
    let handler = handler().await;
    let resource = unique("h-malformed");
    let lock_id = uuid::Uuid::new_v4().to_string();
    put_at_lock_key(&resource, &[("LockID", &lock_id), ("Owner", "legacy")]).await;
    let status = invoke(&handler, json!({"op": "status", "resource": resource})).await;
    assert_eq!(error_name(status), name::MALFORMED_LOCK_ITEM);
}

#[tokio::test]
async fn an_application_item_at_the_key_is_not_a_lock_item_and_stays_as_it_was() {
    let handler = handler().await;
    let resource = unique("h-foreign");
    let attributes = [
        ("Owner", "the application"),
        ("ExpiresAt", "2001-01-01T00:00:00.000Z"),
    ];
    put_at_lock_key(&resource, &attributes).await;
    let before = raw_item(&resource).await;
    for event in [
        json!({"op": "status", "resource": resource}),
        json!({"op": "try_acquire", "resource": resource, "owner": "o"}),
    ] {
        let answer = invoke(&handler, event).await;
        assert_eq!(error_name(answer), name::NOT_A_LOCK_ITEM);
    }
    assert_eq!(raw_item(&resource).await, before);
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
        assert_eq!(
            invalid_field(invoke(&handler, event.clone()).await),
            field,
            "for {event}"
        );
    }
    assert_eq!(
        raw_item(&resource).await.unwrap(),
        before,
        "no lock changed"
    );
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

/// A handler through a proxy that will drop the answers of the next acquisition's every attempt:
/// applied (the first), refused by its own write (the others), and no answer comes back.
async fn handler_whose_acquisitions_lose_every_answer() -> (Handler, Proxy) {
    let _ = handler().await;
    let proxy = Proxy::start(&endpoint()).await;
    let settings = config(&[]);
    let handler = Handler::new(
        settings
            .lock_client(quickly_retrying_dynamodb(&proxy.endpoint()))
            .unwrap(),
        settings,
    );
    for _ in 0..3 {
        proxy.drop_next_answer("PutItem");
    }
    (handler, proxy)
}

/// An acquisition whose write landed but whose every answer was lost is `BackendUnavailable`, and
/// the lock it may hold is released before the answer: once answered, the sandbox may be frozen,
/// and the lock held by nobody until a thaw or its lease end.
#[tokio::test]
async fn an_acquisition_lost_to_the_backend_leaves_no_lock_when_answered() {
    let (handler, proxy) = handler_whose_acquisitions_lose_every_answer().await;
    let resource = unique("h-lost-acquisition");
    let answer = invoke(
        &handler,
        json!({"op": "try_acquire", "resource": resource, "owner": "saga-1"}),
    )
    .await;
    assert_eq!(error_name(answer), name::BACKEND_UNAVAILABLE);
    assert!(proxy.counts("PutItem").requests >= 1);
    assert_eq!(
        raw_item(&resource).await,
        None,
        "the lock the acquisition took was still there when it answered"
    );
}

/// The same acquisition at the end of the invocation's budget: its answer comes after the time
/// the budget left, and the handler answered without waiting for the release it left behind,
/// which a frozen sandbox sent only later, the lock held by nobody meanwhile.
/// Past the deadline, Lambda stops the sandbox and resets it, spawned work and all, so waiting
/// for the release however long it takes harms nobody.
#[tokio::test]
async fn an_acquisition_lost_at_the_end_of_the_budget_is_released_before_the_answer() {
    let (handler, proxy) = handler_whose_acquisitions_lose_every_answer().await;
    let settings = config(&[]);
    let resource = unique("h-lost-at-deadline");
    let mut release = proxy.delay_next_request("DeleteItem");
    // A millisecond of budget beyond the margin: the acquisition's answer comes after it.
    let mut context = Context::default();
    context.deadline = common::now_ms() + settings.deadline_margin.as_millis() as u64 + 1;
    let event = json!({"op": "try_acquire", "resource": resource, "owner": "saga-1"});
    let invocation = common::invoke_with(&handler, event, context);
    tokio::pin!(invocation);
    tokio::select! {
        biased;
        answer = &mut invocation => panic!("answered with its release unsent: {answer:?}"),
        () = release.captured() => {}
    }
    assert!(release.deliver().await, "the release reached the endpoint");
    assert_eq!(error_name(invocation.await), name::BACKEND_UNAVAILABLE);
    assert_eq!(raw_item(&resource).await, None);
}

/// An acquisition whose request DynamoDB leaves unanswered (a connection that hangs, and no
/// attempt timeout to give it up) when the invocation's deadline draws near: answered
/// `BackendUnavailable` before the deadline, a name the saga retries (it ran past the deadline,
/// and Lambda's own timeout reached the saga as `Sandbox.Timedout`; found by review).
#[tokio::test]
async fn an_acquisition_unanswered_near_the_deadline_is_backend_unavailable() {
    let _ = handler().await;
    let proxy = Proxy::start(&endpoint()).await;
    let settings = config(&[]);
    let handler = Handler::new(
        settings
            .lock_client(ddb_lock_test_kit::dynamodb_at(&proxy.endpoint()))
            .unwrap(),
        settings,
    );
    let resource = unique("h-unanswered");
    let mut hung = proxy.delay_next_request("PutItem");
    let mut context = Context::default();
    context.deadline = common::now_ms() + 2_000;
    let event = json!({"op": "acquire", "resource": resource, "owner": "saga-1", "wait_ms": 60000});
    let answer = tokio::time::timeout(
        std::time::Duration::from_secs(20),
        common::invoke_with(&handler, event, context),
    )
    .await
    .expect("answered while its request hangs");
    assert_eq!(error_name(answer), name::BACKEND_UNAVAILABLE);
    assert!(hung.is_captured(), "the acquisition's request was held");
    drop(hung);
}

/// A deadline margin longer than the time the invocation has left: the operation still runs (it
/// was cut at once, and every operation answered `BackendUnavailable`; found by review).
#[tokio::test]
async fn a_margin_longer_than_the_time_left_still_lets_the_operation_run() {
    let handler = common::handler_with(config(&[("DDB_LOCK_DEADLINE_MARGIN_MS", "60000")])).await;
    let mut context = Context::default();
    context.deadline = common::now_ms() + 2_000;
    let resource = unique("h-long-margin");
    let event = json!({"op": "try_acquire", "resource": resource, "owner": "saga-1"});
    let answer = common::invoke_with(&handler, event, context).await.unwrap();
    assert_eq!(answer["resource"], resource);
}

/// A set's release where one member's lock was taken by another owner and DynamoDB failed the
/// other member's release: the answer is the retryable `BackendUnavailable`, whatever the order
/// of the members, so that the saga's retry releases that member (answered
/// `LockOwnershipMismatch` when the taken member came first, which a saga does not retry, the
/// other stayed held for its lease).
#[tokio::test]
async fn a_set_release_that_dynamodb_failed_in_part_is_retryable_whatever_the_order() {
    let _ = handler().await;
    let proxy = Proxy::start(&endpoint()).await;
    let settings = config(&[]);
    let handler = Handler::new(
        settings
            .lock_client(ddb_lock_test_kit::dynamodb_with(&proxy.endpoint(), |sdk| {
                sdk.retry_config(aws_sdk_dynamodb::config::retry::RetryConfig::disabled())
            }))
            .unwrap(),
        settings,
    );
    let (taken, failing) = (unique("h-set-taken"), unique("h-set-failing"));
    let set = invoke(
        &handler,
        json!({"op": "try_acquire", "owner": "s", "resources": [taken, failing]}),
    )
    .await
    .unwrap();
    let mut locks = set["locks"].as_array().unwrap().clone();
    // The taken member first.
    locks.sort_by_key(|lock| lock["resource"] != json!(taken));
    let other = ddb_lock_test_kit::lock_client().await;
    other.force_release(&taken).await.unwrap();
    ddb_lock_test_kit::hold(&other, &taken, "other", std::time::Duration::from_secs(60)).await;

    // Failed each time the client sends it (it sends a failed release again, four tries in all).
    for _ in 0..4 {
        proxy.refuse_next_containing("DeleteItem", &failing, "InternalServerError");
    }
    let released = invoke(
        &handler,
        json!({"op": "release", "owner": "s", "locks": locks}),
    )
    .await;
    assert_eq!(error_name(released), name::BACKEND_UNAVAILABLE);
    let retried = invoke(
        &handler,
        json!({"op": "release", "owner": "s", "locks": locks}),
    )
    .await;
    assert_eq!(error_name(retried), name::LOCK_OWNERSHIP_MISMATCH);
    assert_eq!(raw_item(&failing).await, None, "the retry released it");
}
