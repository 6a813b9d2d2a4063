//! Bad settings fail the build, and an event without a usable key fails the invocation before
//! any request, each with an error naming the field.

mod common;

use common::{counting, event, Calls};
use ddb_lock_layer::{code, LockError, LockLayer, LockedError};
use ddb_lock_test_kit::lock_client;
use lambda_runtime::LambdaEvent;
use serde_json::{json, Value};
use std::time::Duration;
use tower::{Layer, ServiceExt};

async fn key_error(layer: &LockLayer<LambdaEvent<Value>>, payload: Value) -> LockError {
    let calls = Calls::default();
    let answer = layer
        .layer(counting(&calls))
        .oneshot(event(payload, "orders-fn"))
        .await;
    assert_eq!(calls.count(), 0, "the handler ran without a key");
    match answer {
        Err(LockedError::Lock(err)) => {
            assert_eq!(err.code(), code::LOCK_INVALID_ARGUMENT, "{err}");
            err
        }
        other => panic!("expected a key error, got {other:?}"),
    }
}

#[tokio::test]
async fn a_missing_key_names_the_pointer() {
    let layer = LockLayer::builder(lock_client().await)
        .key_pointer("/order/id")
        .build()
        .expect("layer");
    for payload in [
        json!({}),
        json!({"order": {}}),
        json!({"order": {"id": null}}),
    ] {
        let err = key_error(&layer, payload).await;
        assert_eq!(err.field(), Some("/order/id"));
        assert!(err.to_string().contains("no lock key"), "{err}");
    }
}

#[tokio::test]
async fn a_key_that_is_not_a_string_names_the_pointer_and_the_type_found() {
    let layer = LockLayer::builder(lock_client().await)
        .key_pointer("/order/id")
        .build()
        .expect("layer");
    let err = key_error(&layer, json!({"order": {"id": 17}})).await;
    assert_eq!(err.field(), Some("/order/id"));
    assert!(err.to_string().contains("found a number"), "{err}");
    let err = key_error(&layer, json!({"order": {"id": ""}})).await;
    assert!(err.to_string().contains("must not be empty"), "{err}");
}

#[tokio::test]
async fn a_closure_without_a_key_names_key() {
    let layer = LockLayer::builder(lock_client().await)
        .key(|event: &LambdaEvent<Value>| event.payload["tenant"].as_str().map(str::to_owned))
        .build()
        .expect("layer");
    let err = key_error(&layer, json!({"order": "o-1"})).await;
    assert_eq!(err.field(), Some("key"));
    assert_eq!(
        lambda_runtime::Diagnostic::from(err).error_type,
        code::LOCK_INVALID_ARGUMENT
    );
}

#[tokio::test]
async fn a_key_over_the_size_limit_names_key() {
    let layer = LockLayer::builder(lock_client().await)
        .key_pointer("/id")
        .build()
        .expect("layer");
    let err = key_error(&layer, json!({"id": "k".repeat(4096)})).await;
    assert_eq!(err.field(), Some("key"), "{err}");
}

#[tokio::test]
async fn bad_settings_fail_the_build_naming_the_field() {
    let client = lock_client().await;
    let field = |built: Result<LockLayer<LambdaEvent<Value>>, ddb_lock::InvalidInput>| {
        built.expect_err("bad settings").field()
    };
    assert_eq!(field(LockLayer::builder(client.clone()).build()), "key");
    let keyed = || LockLayer::builder(client.clone()).key_pointer("/id");
    assert_eq!(field(keyed().ttl(Duration::ZERO).build()), "ttl");
    assert_eq!(field(keyed().ttl(Duration::from_millis(2)).build()), "ttl");
    assert_eq!(
        field(keyed().ttl(Duration::from_secs(400 * 24 * 3600)).build()),
        "ttl"
    );
    assert_eq!(
        field(keyed().block(Duration::from_secs(400 * 24 * 3600)).build()),
        "block"
    );
    assert_eq!(field(keyed().owner("").build()), "owner");
    assert_eq!(field(keyed().owner("o".repeat(2000)).build()), "owner");
    assert_eq!(field(keyed().function_name("").build()), "function_name");
    keyed().build().expect("the defaults are valid");
}
