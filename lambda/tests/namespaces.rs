//! Namespaces through the handler: `namespace` on any op keeps its locks apart from the same
//! names elsewhere, `list` answers a namespace's live locks as `status` answers each, and a
//! missing or malformed namespace is an InvalidRequest naming the field.

mod common;

use common::{error_name, handler, invalid_field, invoke};
use ddb_lock_test_kit::unique;
use serde_json::{json, Value};
use std::time::{Duration, Instant};

/// The resources `list` answers for `namespace` once the (eventually consistent) index shows
/// `expected`, and the answer.
async fn list(handler: &ddb_lock_lambda::Handler, namespace: &str, expected: &[&str]) -> Value {
    let started = Instant::now();
    loop {
        let answer = invoke(handler, json!({"op": "list", "namespace": namespace}))
            .await
            .unwrap();
        let names: Vec<&str> = answer["locks"]
            .as_array()
            .unwrap()
            .iter()
            .map(|lock| lock["resource"].as_str().unwrap())
            .collect();
        if names == expected || started.elapsed() > Duration::from_secs(30) {
            assert_eq!(names, expected);
            return answer;
        }
        tokio::task::yield_now().await;
    }
}

#[tokio::test]
async fn a_namespace_keeps_its_locks_apart_and_lists_them() {
    let handler = handler().await;
    let namespace = unique("h-ns");
    let resource = unique("h-ns-lock");
    let held = invoke(
        &handler,
        json!({"op": "try_acquire", "resource": resource, "owner": "a", "namespace": namespace}),
    )
    .await
    .unwrap();
    // The same name outside the namespace is another lock.
    let plain = invoke(
        &handler,
        json!({"op": "try_acquire", "resource": resource, "owner": "b"}),
    )
    .await
    .unwrap();
    let again = invoke(
        &handler,
        json!({"op": "try_acquire", "resource": resource, "owner": "c", "namespace": namespace}),
    )
    .await;
    assert_eq!(error_name(again), "LockHeld");
    let status = invoke(
        &handler,
        json!({"op": "status", "resource": resource, "namespace": namespace}),
    )
    .await
    .unwrap();
    assert_eq!(
        (status["locked"].clone(), status["owner"].clone()),
        (json!(true), json!("a"))
    );

    let listed = list(&handler, &namespace, &[resource.as_str()]).await;
    assert_eq!(listed["namespace"], namespace.as_str());
    assert_eq!(listed["locks"][0]["owner"], "a");
    assert_eq!(listed["locks"][0]["locked"], true);

    // A release outside the namespace does not reach its lock; inside, it does.
    let wrong = invoke(
        &handler,
        json!({"op": "release", "resource": resource, "owner": "a", "lock_id": held["lock_id"]}),
    )
    .await;
    assert_eq!(
        error_name(wrong),
        "LockOwnershipMismatch",
        "b's plain lock is there"
    );
    let released = invoke(
        &handler,
        json!({"op": "release", "resource": resource, "owner": "a", "lock_id": held["lock_id"],
            "namespace": namespace}),
    )
    .await
    .unwrap();
    assert_eq!(released["released"], true);
    list(&handler, &namespace, &[]).await;
    invoke(
        &handler,
        json!({"op": "release", "resource": resource, "owner": "b", "lock_id": plain["lock_id"]}),
    )
    .await
    .unwrap();
}

#[tokio::test]
async fn list_needs_a_namespace_and_a_namespace_must_be_well_formed() {
    let handler = handler().await;
    let missing = invoke(&handler, json!({"op": "list"})).await;
    assert_eq!(invalid_field(missing), "namespace");
    for bad in [json!("a#b"), json!(""), json!(5)] {
        let wrong = invoke(
            &handler,
            json!({"op": "status", "resource": "r", "namespace": bad}),
        )
        .await;
        assert_eq!(invalid_field(wrong), "namespace", "{bad}");
    }
}
