//! The Lambda function's figures: its binary's size, its start-up, its memory.

use crate::figures::{ms, percentile, sorted};
use ddb_lock_test_kit::runtime_api::{FunctionProcess, RuntimeApi};
use ddb_lock_test_kit::{dynamodb_at, ensure_table, monotonic_ns, TableKind, TABLE};
use serde_json::json;
use std::path::Path;

/// The Lambda function's figures.
#[derive(Debug, Clone, Default)]
pub struct LambdaFigures {
    /// Size of the arm64 release binary, if it has been built (`cargo lambda build`).
    pub arm64_bytes: Option<u64>,
    /// The binary the start-up figures were measured with.
    pub measured_binary: String,
    /// From exec to the first poll of the Runtime API, ms (median of 5).
    pub ready_ms: f64,
    /// From exec to the first invocation answered, ms (median of 5).
    pub first_answer_ms: f64,
    /// Peak resident memory after 200 invocations, KiB.
    pub peak_rss_kib: Option<u64>,
}

/// Starts the function binary next to the harness 5 times against a local Runtime API.
pub async fn lambda_figures(harness: &Path, endpoint: &str) -> LambdaFigures {
    let root = harness
        .parent()
        .and_then(Path::parent)
        .map(Path::to_path_buf)
        .unwrap_or_default();
    let arm64 = root.join("lambda/bootstrap/bootstrap");
    let bootstrap = harness.with_file_name("bootstrap");
    let mut figures = LambdaFigures {
        arm64_bytes: std::fs::metadata(&arm64).ok().map(|m| m.len()),
        measured_binary: bootstrap.display().to_string(),
        ..LambdaFigures::default()
    };
    if !bootstrap.exists() {
        return figures;
    }
    ensure_table(&dynamodb_at(endpoint), TABLE, TableKind::Locks).await;
    let binary = bootstrap.display().to_string();
    let (mut ready, mut answered) = (Vec::new(), Vec::new());
    for attempt in 0..5 {
        let api = RuntimeApi::start().await;
        let started = monotonic_ns();
        let function = FunctionProcess::spawn(&binary, &api, endpoint, TABLE, &[]);
        api.wait_for_polls(1).await;
        ready.push(ms(monotonic_ns() - started));
        let status = json!({"op": "status", "resource": "bench/cold-start"});
        api.invoke(&status).await.response();
        answered.push(ms(monotonic_ns() - started));
        if attempt == 4 {
            for _ in 0..200 {
                api.invoke(&status).await.response();
            }
            figures.peak_rss_kib = function.id().and_then(peak_rss_kib);
        }
    }
    figures.ready_ms = percentile(&sorted(ready), 50.0);
    figures.first_answer_ms = percentile(&sorted(answered), 50.0);
    figures
}

/// `VmHWM` of a process, from `/proc`.
fn peak_rss_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
}
