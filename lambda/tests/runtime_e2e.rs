//! The built `bootstrap` binary, run as Lambda runs it: against a Runtime API (our emulator) and
//! the local DynamoDB endpoint.

use ddb_lock_lambda::error::name;
use ddb_lock_test_kit::proxy::Proxy;
use ddb_lock_test_kit::runtime_api::{now_ms, FunctionProcess, RuntimeApi};
use ddb_lock_test_kit::{endpoint, lock_client, unique, TABLE};
use serde_json::{json, Value};
use std::time::{Duration, Instant};

const BOOTSTRAP: &str = env!("CARGO_BIN_EXE_bootstrap");

async fn function(api: &RuntimeApi, env: &[(&str, &str)]) -> FunctionProcess {
    lock_client().await; // the table
    FunctionProcess::spawn(BOOTSTRAP, api, &endpoint(), TABLE, env)
}

#[tokio::test]
async fn the_function_serves_each_operation_and_names_its_errors() {
    let api = RuntimeApi::start().await;
    let mut process = function(&api, &[]).await;
    let resource = unique("e2e");

    let lock = api
        .invoke(&json!({"op": "acquire", "resource": resource, "owner": "exec-1"}))
        .await
        .response();
    assert_eq!(lock["owner"], "exec-1");
    let held = api
        .invoke(&json!({"op": "try_acquire", "resource": resource, "owner": "exec-2"}))
        .await;
    assert_eq!(held.error_type(), name::LOCK_HELD);
    let timeout = api
        .invoke(&json!({"op": "acquire", "resource": resource, "owner": "exec-2", "wait_ms": 100}))
        .await;
    assert_eq!(timeout.error_type(), name::LOCK_TIMEOUT);
    let not_json = api
        .invoke_raw(b"{\"op\": \"acquire\",".to_vec(), now_ms() + 60_000)
        .await;
    assert_eq!(not_json.error_type(), name::INVALID_REQUEST);
    let forced = api
        .invoke(&json!({"op": "force_release", "resource": resource}))
        .await;
    assert_eq!(forced.error_type(), name::FORCE_RELEASE_DISABLED);
    let released = api
        .invoke(
            &json!({"op": "release", "resource": resource, "owner": "exec-1",
            "lock_id": lock["lock_id"]}),
        )
        .await
        .response();
    assert_eq!(released["released"], true);
    let mismatch = api
        .invoke(
            &json!({"op": "extend", "resource": resource, "owner": "exec-1",
            "lock_id": lock["lock_id"]}),
        )
        .await;
    assert_eq!(mismatch.error_type(), name::LOCK_NOT_FOUND);

    assert!(process.is_running(), "one process served every invocation");
    assert!(api.init_errors().is_empty());
    let metrics = process
        .stdout()
        .iter()
        .filter(|line| line.contains("\"CloudWatchMetrics\""))
        .count();
    assert_eq!(metrics, 7, "one metrics line per invocation");
}

#[tokio::test]
async fn a_missing_table_setting_stops_the_function_at_start_naming_the_variable() {
    let api = RuntimeApi::start().await;
    let mut process = FunctionProcess::spawn(BOOTSTRAP, &api, &endpoint(), "", &[]);
    let status = process.exit_status().await;
    assert!(
        !status.success(),
        "a function without a table must not start"
    );
    // Give the stderr reader the last lines: it ends when the pipe closes after exit.
    let deadline = async {
        loop {
            let stderr = process.stderr().join("\n");
            if stderr.contains("DDB_LOCK_TABLE") {
                return stderr;
            }
            tokio::task::yield_now().await;
        }
    };
    let stderr = deadline.await;
    assert!(stderr.contains("must name the lock table"), "{stderr}");
}

#[tokio::test]
async fn json_log_format_makes_every_output_line_json() {
    let api = RuntimeApi::start().await;
    let process = function(
        &api,
        &[
            ("AWS_LAMBDA_LOG_FORMAT", "JSON"),
            ("AWS_LAMBDA_LOG_LEVEL", "INFO"),
        ],
    )
    .await;
    api.invoke(&json!({"op": "status", "resource": unique("json-logs")}))
        .await
        .response();
    let lines = process.stdout();
    assert!(
        lines.iter().any(|l| l.contains("invocation handled")),
        "{lines:?}"
    );
    for line in &lines {
        serde_json::from_str::<Value>(line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}"));
    }
}

#[tokio::test]
async fn concurrent_invocations_on_several_instances_hold_the_lock_one_at_a_time() {
    const INSTANCES: usize = 4;
    const ROUNDS: usize = 5;
    let api = RuntimeApi::start().await;
    let mut processes = Vec::new();
    for _ in 0..INSTANCES {
        processes.push(function(&api, &[]).await);
    }
    let started = Instant::now();
    api.wait_for_polls(INSTANCES).await;
    println!("{INSTANCES} instances ready in {:?}", started.elapsed());

    let resource = unique("e2e-contended");
    let api = std::sync::Arc::new(api);
    let sagas: Vec<_> = (0..INSTANCES)
        .map(|saga| {
            let (api, resource) = (std::sync::Arc::clone(&api), resource.clone());
            tokio::spawn(async move {
                let owner = format!("execution-{saga}");
                let mut holds = Vec::new();
                for _ in 0..ROUNDS {
                    let lock = api
                        .invoke(
                            &json!({"op": "acquire", "resource": resource, "owner": owner,
                            "wait_ms": 60000, "lease_ms": 60000}),
                        )
                        .await
                        .response();
                    let entered = Instant::now();
                    let status = api
                        .invoke(&json!({"op": "status", "resource": resource}))
                        .await
                        .response();
                    assert_eq!(status["owner"], owner.as_str(), "the holder sees itself");
                    let left = Instant::now();
                    let released = api
                        .invoke(
                            &json!({"op": "release", "resource": resource, "owner": owner,
                            "lock_id": lock["lock_id"]}),
                        )
                        .await
                        .response();
                    assert_eq!(released["released"], true);
                    holds.push((entered, left));
                }
                holds
            })
        })
        .collect();
    let mut holds = Vec::new();
    for saga in sagas {
        holds.extend(saga.await.unwrap());
    }
    assert_eq!(holds.len(), INSTANCES * ROUNDS);
    holds.sort();
    for pair in holds.windows(2) {
        assert!(
            pair[0].1 < pair[1].0,
            "two invocations held the lock at once"
        );
    }
    for process in &mut processes {
        assert!(process.is_running());
    }
}

/// A request stuck on its connection (held in the network, never answered): the function gives
/// the attempt up after its timeout (`ddb_lock::request_timeouts`) and sends it again, and the
/// invocation is answered. Built with the SDK's defaults, it waited on the stuck connection until
/// the invocation's deadline, and its caller got Lambda's own timeout rather than an answer.
#[tokio::test]
async fn a_request_stuck_on_its_connection_is_sent_again_and_answered() {
    lock_client().await; // the table
    let proxy = Proxy::start(&endpoint()).await;
    let api = RuntimeApi::start().await;
    let mut process = FunctionProcess::spawn(BOOTSTRAP, &api, &proxy.endpoint(), TABLE, &[]);
    let resource = unique("e2e-stuck");
    let mut stuck = proxy.delay_next_request("PutItem");
    let event = json!({"op": "try_acquire", "resource": resource, "owner": "exec-1"});
    let lock = tokio::time::timeout(Duration::from_secs(30), api.invoke(&event))
        .await
        .expect("the invocation is answered")
        .response();
    assert_eq!(lock["owner"], "exec-1");
    assert!(stuck.is_captured(), "the first attempt was stuck");
    assert!(process.is_running());
}
