//! Fair acquisitions through the handler: `fair` on acquire joins the lock's line, `status` lists
//! the line, the holder's release hands the lock over (with a fencing token from the grant, if
//! the waiter asked for one); `fair` where it does not apply is
//! `InvalidRequest` naming it (or the option it cannot go with).

mod common;

use common::{handler, invalid_field, invoke, take};
use ddb_lock_test_kit::unique;
use serde_json::{json, Value};
use std::sync::Arc;

/// Waits until `resource`'s line, as `status` answers it, is `owners`.
async fn line_becomes(
    handler: &ddb_lock_lambda::Handler,
    resource: &str,
    owners: &[&str],
) -> Value {
    loop {
        let status = invoke(handler, json!({"op": "status", "resource": resource}))
            .await
            .unwrap();
        let line: Vec<&str> = status["queue"]
            .as_array()
            .map(|line| line.iter().filter_map(|w| w["owner"].as_str()).collect())
            .unwrap_or_default();
        if line == owners {
            return status;
        }
        tokio::task::yield_now().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fair_waiter_is_listed_in_status_and_handed_the_lock_on_release() {
    let handler = Arc::new(handler().await);
    let resource = unique("h-fair");
    let held = take(&handler, &resource, "first").await;
    let waiting = {
        let (handler, resource) = (Arc::clone(&handler), resource.clone());
        tokio::spawn(async move {
            invoke(
                &handler,
                json!({"op": "acquire", "resource": resource, "owner": "second",
                       "fair": true, "fencing": true, "wait_ms": 60000, "lease_ms": 30000}),
            )
            .await
        })
    };
    let status = line_becomes(&handler, &resource, &["second"]).await;
    assert_eq!(status["owner"], "first");
    assert_eq!(status["queue"][0]["lease_ms"], 30000);
    assert!(status["queue"][0]["joined_at"].is_string());
    assert!(status["queue"][0]["until"].is_string());

    let released = invoke(
        &handler,
        json!({"op": "release", "resource": resource, "owner": "first", "lock_id": held["lock_id"]}),
    )
    .await
    .unwrap();
    assert_eq!(released["released"], true);
    let granted = waiting.await.unwrap().unwrap();
    assert_eq!(granted["owner"], "second");
    let token = granted["fencing_token"]
        .as_u64()
        .expect("a token from the grant");
    let status = invoke(&handler, json!({"op": "status", "resource": resource}))
        .await
        .unwrap();
    assert_eq!(status["owner"], "second");
    assert_eq!(status["fencing_token"], token);
    assert!(status.get("queue").is_none(), "nobody waits: {status}");
}

#[tokio::test]
async fn fair_where_it_does_not_apply_is_named() {
    let handler = handler().await;
    let resource = unique("h-fair-bad");
    for (event, field) in [
        (
            json!({"op": "acquire", "resource": resource, "owner": "o", "fair": true, "mode": "shared"}),
            "fair",
        ),
        (
            json!({"op": "acquire", "resources": [resource], "owner": "o", "fair": true}),
            "fair",
        ),
        (
            json!({"op": "acquire", "resource": resource, "owner": "o", "fair": true, "idempotent": true}),
            "idempotent",
        ),
        (
            json!({"op": "acquire", "resource": resource, "owner": "o", "fair": "yes"}),
            "fair",
        ),
    ] {
        assert_eq!(
            invalid_field(invoke(&handler, event.clone()).await),
            field,
            "{event}"
        );
    }
}
