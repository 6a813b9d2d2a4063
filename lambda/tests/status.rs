//! `status` through the handler: a free lock, and a held one's holder, remaining time and data.

mod common;

use common::{handler, invalid_field, invoke};
use ddb_lock_test_kit::unique;
use serde_json::json;

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

/// A resource the table refuses is reported on the field that named it: a path's on `path` (it was
/// reported on `resource`, which the event does not have; found by review).
#[tokio::test]
async fn a_path_too_long_for_the_table_is_reported_on_path() {
    let handler = handler().await;
    let long = "x".repeat(3000);
    let refused = invoke(&handler, json!({"op": "status", "path": [long]})).await;
    assert_eq!(invalid_field(refused), "path");
    let refused = invoke(&handler, json!({"op": "status", "resource": ""})).await;
    assert_eq!(invalid_field(refused), "resource");
}
