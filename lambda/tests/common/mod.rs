//! What the handler tests share: a handler over the local endpoint's test table, invoked as the
//! runtime invokes it (`LambdaEvent::new`), and readers of its answers.

// Each test file is its own crate and uses part of this module.
#![allow(dead_code)]

use ddb_lock_lambda::{Config, Handler, HandlerError};
use ddb_lock_test_kit::{dynamodb, ensure_table, TableKind, TABLE};
use lambda_runtime::{Context, LambdaEvent};
use serde_json::{json, Value};
use std::time::{SystemTime, UNIX_EPOCH};

/// The function's configuration on the test table, with the variables `extra` set.
pub fn config(extra: &[(&str, &str)]) -> Config {
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

/// A handler configured by `config`, once the test table exists.
pub async fn handler_with(config: Config) -> Handler {
    ensure_table(&dynamodb(), TABLE, TableKind::Locks).await;
    Handler::new(config.lock_client(dynamodb()).unwrap(), config)
}

/// A handler with the default configuration.
pub async fn handler() -> Handler {
    handler_with(config(&[])).await
}

/// Invokes the handler with a context that has no deadline.
pub async fn invoke(handler: &Handler, event: Value) -> Result<Value, HandlerError> {
    invoke_with(handler, event, Context::default()).await
}

/// Invokes the handler; the answer as the runtime serializes it.
pub async fn invoke_with(
    handler: &Handler,
    event: Value,
    context: Context,
) -> Result<Value, HandlerError> {
    let answer = handler.handle(LambdaEvent::new(event, context)).await?;
    Ok(serde_json::to_value(answer).expect("answers serialize"))
}

/// Takes the free lock on `resource` for `owner` through the handler.
pub async fn take(handler: &Handler, resource: &str, owner: &str) -> Value {
    let event = json!({"op": "try_acquire", "resource": resource, "owner": owner});
    invoke(handler, event).await.expect("the lock was free")
}

/// The error name of a failed invocation.
pub fn error_name(result: Result<Value, HandlerError>) -> &'static str {
    match result {
        Err(err) => err.name(),
        Ok(answer) => panic!("expected an error, got {answer}"),
    }
}

/// The field an `InvalidRequest` names.
pub fn invalid_field(result: Result<Value, HandlerError>) -> String {
    match result {
        Err(HandlerError::InvalidRequest(invalid)) => invalid.field,
        other => panic!("expected InvalidRequest, got {other:?}"),
    }
}

/// Now, in epoch milliseconds (the unit of an invocation's deadline).
pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}
