//! The handler's metrics: one CloudWatch EMF line per invocation, whatever its outcome.

mod common;

use common::{handler, invoke};
use ddb_lock_lambda::error::name;
use ddb_lock_test_kit::unique;
use serde_json::{json, Value};
use std::sync::{Arc, Mutex};

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
