//! The example's binary run as Lambda runs it, against the Runtime API emulator and the local
//! DynamoDB endpoint: two instances, one order at a time.

use ddb_lock::LockStatus;
use ddb_lock_test_kit::runtime_api::{FunctionProcess, RuntimeApi};
use ddb_lock_test_kit::{endpoint, lock_client, unique, TABLE};
use serde_json::json;
use std::sync::Arc;

const BINARY: &str = env!("CARGO_BIN_EXE_locked-handler");
/// The function name the emulator's processes run under (`AWS_LAMBDA_FUNCTION_NAME`).
const FUNCTION: &str = "ddb-lock";
const STATUS: &str = "urn:cline:forrst:ext:atomic-lock:fn:status";
const RELEASE: &str = "urn:cline:forrst:ext:atomic-lock:fn:release";

async fn instances(api: &RuntimeApi, count: usize) -> Vec<FunctionProcess> {
    lock_client().await; // the table
    let processes = (0..count)
        .map(|_| FunctionProcess::spawn(BINARY, api, &endpoint(), TABLE, &[]))
        .collect();
    api.wait_for_polls(count).await;
    processes
}

#[tokio::test]
async fn two_invocations_of_one_order_at_once_one_is_refused_with_lock_acquisition_failed() {
    let api = Arc::new(RuntimeApi::start().await);
    let mut processes = instances(&api, 2).await;
    let order = unique("order");
    let full_key = format!("lock:{FUNCTION}:{order}");
    let client = lock_client().await;

    // The first invocation works for far longer than the test needs to see it holding the lock.
    let first = tokio::spawn({
        let (api, order) = (Arc::clone(&api), order.clone());
        async move {
            api.invoke(&json!({"order_id": order, "work_ms": 60_000}))
                .await
        }
    });
    while client.status(&full_key).await.expect("status") == LockStatus::Free {
        assert!(
            !first.is_finished(),
            "the first invocation ended before taking the lock"
        );
        tokio::task::yield_now().await;
    }
    let second = api.invoke(&json!({"order_id": order})).await;

    assert_eq!(second.error_type(), "LOCK_ACQUISITION_FAILED");
    assert!(
        !first.is_finished(),
        "the first invocation still holds the lock"
    );
    first.abort();
    for process in &mut processes {
        assert!(process.is_running());
    }
    assert!(api.init_errors().is_empty());
}

#[tokio::test]
async fn invocations_of_one_order_one_after_the_other_both_run_and_leave_it_free() {
    let api = RuntimeApi::start().await;
    let _processes = instances(&api, 1).await;
    let order = unique("order");
    let full_key = format!("lock:{FUNCTION}:{order}");

    let mut owners = Vec::new();
    for _ in 0..2 {
        let answer = api.invoke(&json!({"order_id": order})).await.response();
        assert_eq!(answer["result"]["fulfilled"], true, "{answer}");
        assert_eq!(answer["result"]["order_id"], order.as_str());
        let data = &answer["extensions"][0]["data"];
        assert_eq!(answer["extensions"][0]["urn"], "urn:forrst:ext:atomicLock");
        assert_eq!(data["key"], order.as_str());
        assert_eq!(data["acquired"], true);
        assert_eq!(data["scope"], "function");
        assert_eq!(data["full_key"], full_key.as_str());
        assert_eq!(data["owner"], answer["result"]["lock_owner"]);
        assert!(data["expires_at"].is_string(), "{data}");
        owners.push(data["owner"].clone());
    }
    assert_ne!(
        owners[0], owners[1],
        "each invocation has its own owner token"
    );

    let status = api
        .invoke(&json!({"function": STATUS, "arguments": {"key": full_key}}))
        .await
        .response();
    assert_eq!(status, json!({"key": full_key, "locked": false}));
    let release = |owner: serde_json::Value| {
        let call = json!({"function": RELEASE, "arguments": {"key": full_key, "owner": owner}});
        let api = &api;
        async move { api.invoke(&call).await.error_type() }
    };
    assert_eq!(
        release(owners[1].clone()).await,
        "LOCK_ALREADY_RELEASED",
        "released after the invocation"
    );
    assert_eq!(
        release(owners[0].clone()).await,
        "LOCK_NOT_FOUND",
        "the lock was taken and released again since the first owner's release"
    );
    assert_eq!(release(json!("nobody")).await, "LOCK_NOT_FOUND");
}

#[tokio::test]
async fn an_event_without_the_key_fails_naming_it() {
    let api = RuntimeApi::start().await;
    let _processes = instances(&api, 1).await;
    let outcome = api.invoke(&json!({"order": "o-1"})).await;
    match outcome {
        ddb_lock_test_kit::runtime_api::Outcome::Error {
            error_type,
            error_message,
        } => {
            assert_eq!(error_type, "LOCK_INVALID_ARGUMENT");
            assert!(error_message.contains("/order_id"), "{error_message}");
        }
        other => panic!("expected an error, got {other:?}"),
    }
}
