//! `extend` through the handler: the lease moves, a lost lock is named (`LockExpired`,
//! `LockNotFound`), and the data is replaced or removed.

mod common;

use chrono::TimeDelta;
use common::{config, error_name, handler, invoke};
use ddb_lock_lambda::error::name;
use ddb_lock_lambda::Handler;
use ddb_lock_test_kit::{builder, dynamodb, unique, OffsetClock};
use serde_json::{json, Value};

/// A lock on a fresh resource held by `o` for 10 s, and the event that extends it by a minute.
async fn held(handler: &Handler, prefix: &str) -> (Value, Value) {
    let resource = unique(prefix);
    let lock = invoke(
        handler,
        json!({"op": "try_acquire", "resource": resource, "owner": "o",
        "lease_ms": 10000}),
    )
    .await
    .unwrap();
    let extend = json!({"op": "extend", "resource": resource, "owner": "o",
        "lock_id": lock["lock_id"], "lease_ms": 60000});
    (lock, extend)
}

#[tokio::test]
async fn extend_moves_the_end_of_the_lease() {
    let handler = handler().await;
    let (lock, extend) = held(&handler, "h-extend").await;
    let extended = invoke(&handler, extend).await.unwrap();
    assert!(extended["expires_at"].as_str() > lock["expires_at"].as_str());
}

#[tokio::test]
async fn extend_after_the_lease_ended_is_lock_expired() {
    let handler = handler().await;
    let (_, extend) = held(&handler, "h-extend-late").await;
    // Seen two minutes later, the lease has lapsed.
    let later_client = builder(dynamodb())
        .clock(OffsetClock::shared(TimeDelta::minutes(2)))
        .build()
        .unwrap();
    let later = Handler::new(later_client, config(&[]));
    assert_eq!(error_name(invoke(&later, extend).await), name::LOCK_EXPIRED);
}

#[tokio::test]
async fn extend_of_a_released_lock_is_lock_not_found() {
    let handler = handler().await;
    let (lock, extend) = held(&handler, "h-extend-gone").await;
    invoke(
        &handler,
        json!({"op": "release", "resource": lock["resource"], "owner": "o",
        "lock_id": lock["lock_id"]}),
    )
    .await
    .unwrap();
    assert_eq!(
        error_name(invoke(&handler, extend).await),
        name::LOCK_NOT_FOUND
    );
}

#[tokio::test]
async fn extend_replaces_or_removes_the_data_the_holder_stored() {
    let handler = handler().await;
    let resource = unique("lambda-data");
    let lock = invoke(
        &handler,
        json!({"op": "try_acquire", "resource": resource, "owner": "saga-1",
            "data": {"step": 1}}),
    )
    .await
    .unwrap();
    let extend = |data: Value| {
        json!({"op": "extend", "resource": resource, "owner": "saga-1",
            "lock_id": lock["lock_id"], "data": data})
    };
    let status = json!({"op": "status", "resource": resource});

    invoke(&handler, extend(json!({"step": 2}))).await.unwrap();
    let after = invoke(&handler, status.clone()).await.unwrap();
    assert_eq!(after["data"], json!({"step": 2}));

    invoke(&handler, extend(Value::Null)).await.unwrap();
    let after = invoke(&handler, status).await.unwrap();
    assert!(after.get("data").is_none(), "{after}");
}

/// In a namespace, an `extend` whose invocation gave up on it (its request held in the network),
/// then, past the lease, the same `extend` again (a saga's retry): answered `LockExpired`, the
/// lock must be free once the late request lands. The function asks for its namespace's client
/// at each invocation, which was made anew, knew of no earlier extension and left the lock as it
/// was: the late one held it again for its whole lease, and every other owner was refused. (In
/// another instance, the retry cannot know of it: the lock then ends with that lease.)
#[tokio::test]
async fn a_late_extend_after_a_retry_found_the_lease_over_holds_nothing() {
    let _ = handler().await;
    let proxy = ddb_lock_test_kit::proxy::Proxy::start(&ddb_lock_test_kit::endpoint()).await;
    let clock = ddb_lock_test_kit::AdjustableClock::new();
    let handler = Handler::new(
        ddb_lock_test_kit::client_through(&proxy, Some(clock.clone())),
        config(&[]),
    );
    let resource = unique("h-extend-late-namespaced");
    let lock = invoke(
        &handler,
        json!({"op": "try_acquire", "resource": resource, "owner": "o",
            "lease_ms": 10000, "namespace": "ns"}),
    )
    .await
    .unwrap();
    let extend = json!({"op": "extend", "resource": resource, "owner": "o",
        "lock_id": lock["lock_id"], "lease_ms": 60000, "namespace": "ns"});
    let mut late = proxy.delay_next_request("UpdateItem");
    tokio::select! {
        answer = invoke(&handler, extend.clone()) => panic!("answered while held: {answer:?}"),
        () = late.captured() => {}
    }
    clock.advance(std::time::Duration::from_secs(11));
    assert_eq!(
        error_name(invoke(&handler, extend).await),
        name::LOCK_EXPIRED
    );
    assert!(
        late.deliver().await,
        "the late request reached the endpoint"
    );
    let taken = invoke(
        &handler,
        json!({"op": "try_acquire", "resource": resource, "owner": "p", "namespace": "ns"}),
    )
    .await;
    assert!(taken.is_ok(), "{taken:?}");
}
