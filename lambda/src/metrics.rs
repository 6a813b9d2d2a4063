//! One CloudWatch Embedded Metric Format (EMF) document per operation, written as a log line:
//! CloudWatch turns it into metrics with no extra request.
//!
//! Dimensions `Operation` and `Outcome`; metrics `WaitMs` (time in the operation) and `Attempts`
//! (conditional writes, each billed); `Resource` as a searchable property, not a dimension (its
//! cardinality is unbounded). A crate such as `metrics_cloudwatch_embedded` aggregates a global
//! recorder until a flush; one document per operation is simpler written directly.

use serde_json::json;

/// What one operation did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OperationMetrics {
    /// The event's `op` (`unknown` if it had none).
    pub operation: String,
    /// `acquired`, `released`, … on success; the `errorType` on failure.
    pub outcome: String,
    /// Milliseconds spent in the operation.
    pub wait_ms: u64,
    /// Conditional writes made.
    pub attempts: u32,
    /// The resource, when the event named one.
    pub resource: Option<String>,
}

/// The EMF document for `metrics`, as one line.
///
/// # Examples
///
/// ```
/// use ddb_lock_lambda::metrics::{emf_line, OperationMetrics};
///
/// let line = emf_line("ddb-lock", 1_795_000_000_000, &OperationMetrics {
///     operation: "acquire".into(),
///     outcome: "acquired".into(),
///     wait_ms: 12,
///     attempts: 2,
///     resource: Some("orders/42".into()),
/// });
/// let doc: serde_json::Value = serde_json::from_str(&line).unwrap();
/// assert_eq!(doc["Attempts"], 2);
/// assert_eq!(doc["_aws"]["CloudWatchMetrics"][0]["Namespace"], "ddb-lock");
/// ```
pub fn emf_line(namespace: &str, timestamp_ms: i64, metrics: &OperationMetrics) -> String {
    let mut doc = json!({
        "_aws": {
            "Timestamp": timestamp_ms,
            "CloudWatchMetrics": [{
                "Namespace": namespace,
                "Dimensions": [["Operation", "Outcome"]],
                "Metrics": [
                    {"Name": "WaitMs", "Unit": "Milliseconds"},
                    {"Name": "Attempts", "Unit": "Count"}
                ]
            }]
        },
        "Operation": metrics.operation,
        "Outcome": metrics.outcome,
        "WaitMs": metrics.wait_ms,
        "Attempts": metrics.attempts,
    });
    if let Some(resource) = &metrics.resource {
        doc["Resource"] = json!(resource);
    }
    doc.to_string()
}
