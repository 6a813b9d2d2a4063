//! The system functions answer the seed's result shapes, and its error codes when the lock is
//! missing or someone else's.

use ddb_lock_layer::system::{FORCE_RELEASE, RELEASE, STATUS};
use ddb_lock_layer::{code, LockError, SystemFunctions};
use ddb_lock_test_kit::{builder, dynamodb, hold, lock_client, unique};
use serde_json::json;
use std::time::Duration;

fn full_key() -> String {
    format!("lock:{}", unique("billing"))
}

fn code_of<T: std::fmt::Debug>(result: Result<T, LockError>) -> &'static str {
    result.expect_err("expected an error").code()
}

#[tokio::test]
async fn release_by_its_owner_answers_released_and_frees_the_lock() {
    let client = lock_client().await;
    let key = full_key();
    hold(&client, &key, "owner-1", Duration::from_secs(60)).await;
    let system = SystemFunctions::new(client);

    let answer = system
        .call(&json!({"function": RELEASE, "arguments": {"key": key, "owner": "owner-1"}}))
        .await
        .expect("released");

    assert_eq!(answer, json!({"released": true, "key": key}));
    let status = system.status(&key).await.expect("status");
    assert!(!status.locked);
}

#[tokio::test]
async fn release_by_another_owner_is_lock_ownership_mismatch_and_leaves_the_lock() {
    let client = lock_client().await;
    let key = full_key();
    hold(&client, &key, "owner-1", Duration::from_secs(60)).await;
    let system = SystemFunctions::new(client);

    let err = system.release(&key, "owner-2").await.expect_err("mismatch");

    assert_eq!(err.code(), code::LOCK_OWNERSHIP_MISMATCH);
    assert_eq!(err.to_json()["details"]["key"], key.as_str());
    let status = system.status(&key).await.expect("status");
    assert_eq!(status.owner.as_deref(), Some("owner-1"));
}

#[tokio::test]
async fn releasing_a_missing_lock_is_lock_not_found() {
    let system = SystemFunctions::new(lock_client().await);
    assert_eq!(
        code_of(system.release(&full_key(), "owner-1").await),
        code::LOCK_NOT_FOUND
    );
    assert_eq!(
        code_of(system.force_release(&full_key()).await),
        code::LOCK_NOT_FOUND
    );
}

#[tokio::test]
async fn releasing_twice_is_lock_already_released_where_released_locks_are_kept() {
    lock_client().await;
    let client = builder(dynamodb())
        .keep_released_for(Duration::from_secs(3600))
        .build()
        .unwrap();
    let key = full_key();
    hold(&client, &key, "owner-1", Duration::from_secs(60)).await;
    let system = SystemFunctions::new(client.clone());
    system
        .release(&key, "owner-1")
        .await
        .expect("first release");

    let again = system
        .call(&json!({"function": RELEASE, "arguments": {"key": key, "owner": "owner-1"}}))
        .await;
    let err = again.expect_err("released already");
    assert_eq!(err.code(), code::LOCK_ALREADY_RELEASED);
    assert_eq!(err.to_json()["details"]["key"], key.as_str());
    // Another owner never held it: not found, as a force release of the released lock is.
    assert_eq!(
        code_of(system.release(&key, "owner-2").await),
        code::LOCK_NOT_FOUND
    );
    assert_eq!(
        code_of(system.force_release(&key).await),
        code::LOCK_NOT_FOUND
    );
}

/// A client that deletes released locks cannot tell a released lock from one never taken.
#[tokio::test]
async fn releasing_twice_is_lock_not_found_the_second_time() {
    let client = lock_client().await;
    let key = full_key();
    hold(&client, &key, "owner-1", Duration::from_secs(60)).await;
    let system = SystemFunctions::new(client);
    system
        .release(&key, "owner-1")
        .await
        .expect("first release");
    assert_eq!(
        code_of(system.release(&key, "owner-1").await),
        code::LOCK_NOT_FOUND
    );
}

#[tokio::test]
async fn force_release_answers_forced_whoever_holds_the_lock() {
    let client = lock_client().await;
    let key = full_key();
    hold(&client, &key, "owner-1", Duration::from_secs(60)).await;
    let system = SystemFunctions::new(client);

    let answer = system
        .call(&json!({"function": FORCE_RELEASE, "arguments": {"key": key}}))
        .await
        .expect("forced");

    assert_eq!(
        answer,
        json!({"released": true, "key": key, "forced": true})
    );
    assert!(!system.status(&key).await.expect("status").locked);
}

#[tokio::test]
async fn status_answers_the_holder_and_its_lease_or_only_locked_false() {
    let client = lock_client().await;
    let key = full_key();
    let system = SystemFunctions::new(client.clone());
    let free = system
        .call(&json!({"function": STATUS, "arguments": {"key": key}}))
        .await
        .expect("status");
    assert_eq!(free, json!({"key": key, "locked": false}));

    let lock = hold(&client, &key, "owner-1", Duration::from_secs(600)).await;
    let held = system
        .call(&json!({"function": STATUS, "arguments": {"key": key}}))
        .await
        .expect("status");

    assert_eq!(held["locked"], true);
    assert_eq!(held["owner"], "owner-1");
    assert_eq!(
        held["acquired_at"],
        ddb_lock::timestamp::format(lock.acquired_at())
    );
    assert_eq!(
        held["expires_at"],
        ddb_lock::timestamp::format(lock.expires_at())
    );
    let remaining = held["ttl_remaining"].as_u64().expect("whole seconds");
    assert!((1..=600).contains(&remaining), "ttl_remaining {remaining}");
}

#[tokio::test]
async fn a_bad_call_names_the_argument() {
    let system = SystemFunctions::new(lock_client().await);
    let field = |err: LockError| {
        assert_eq!(err.code(), code::LOCK_INVALID_ARGUMENT);
        err.field().map(str::to_owned)
    };
    let cases = [
        (json!({"arguments": {"key": "lock:k"}}), "function"),
        (
            json!({"function": "urn:cline:forrst:ext:atomic-lock:fn:renew"}),
            "function",
        ),
        (json!({"function": STATUS}), "key"),
        (json!({"function": STATUS, "arguments": {"key": 7}}), "key"),
        (
            json!({"function": RELEASE, "arguments": {"key": "lock:k"}}),
            "owner",
        ),
        (json!({"function": STATUS, "arguments": {"key": ""}}), "key"),
    ];
    for (request, expected) in cases {
        let err = system.call(&request).await.expect_err("bad call");
        assert_eq!(field(err).as_deref(), Some(expected), "{request}");
    }
}
