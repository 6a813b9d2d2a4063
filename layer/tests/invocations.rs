//! A handler wrapped by the layer, invoked against the local DynamoDB endpoint: it runs only under
//! its lock, and with auto-release the lock is free again however the invocation ended.

mod common;

use common::{counting, event, Calls, Handler};
use ddb_lock::{LockClient, LockLost, LockStatus};
use ddb_lock_layer::{
    code, current_lock, current_watch, LockError, LockLayer, LockService, Locked, LockedError,
    Scope,
};
use ddb_lock_test_kit::events::CapturedEvents;
use ddb_lock_test_kit::{hold, lock_client, unique};
use lambda_runtime::LambdaEvent;
use serde_json::{json, Value};
use std::time::Duration;
use tokio::sync::oneshot;
use tower::util::{BoxCloneService, Oneshot};
use tower::{Layer, ServiceExt};

const FUNCTION: &str = "orders-fn";

fn layer(client: &LockClient) -> ddb_lock_layer::LockLayerBuilder<LambdaEvent<Value>> {
    LockLayer::builder(client.clone()).key_pointer("/order/id")
}

/// The invocation of `handler` under `layer` for the order `key`, as a future of its own (to
/// spawn).
fn invoke(
    layer: &LockLayer<LambdaEvent<Value>>,
    handler: Handler,
    key: &str,
) -> Oneshot<LockService<Handler, LambdaEvent<Value>>, LambdaEvent<Value>> {
    layer
        .layer(handler)
        .oneshot(event(json!({"order": {"id": key}}), FUNCTION))
}

fn lock_error(result: Result<Locked<Value>, LockedError<lambda_runtime::Error>>) -> LockError {
    match result {
        Err(LockedError::Lock(err)) => err,
        Err(LockedError::Handler(err)) => {
            panic!("expected a lock error, the handler failed: {err}")
        }
        Ok(answer) => panic!(
            "expected a lock error, the handler answered {:?}",
            answer.result
        ),
    }
}

async fn assert_free(client: &LockClient, full_key: &str) {
    assert_eq!(
        client.status(full_key).await.expect("status"),
        LockStatus::Free,
        "{full_key} should be free"
    );
}

async fn holder(client: &LockClient, full_key: &str) -> String {
    match client.status(full_key).await.expect("status") {
        LockStatus::Held { holder, .. } => holder.owner,
        other => panic!("{full_key} should be held, is {other:?}"),
    }
}

#[tokio::test]
async fn the_handler_runs_under_the_lock_and_the_lock_is_released_after() {
    let client = lock_client().await;
    let key = unique("order");
    let full_key = format!("lock:{FUNCTION}:{key}");
    let observer = client.clone();
    let seen = full_key.clone();
    let handler: Handler = BoxCloneService::new(lambda_runtime::service_fn(
        move |_event: LambdaEvent<Value>| {
            let (client, full_key) = (observer.clone(), seen.clone());
            async move {
                let lock = current_lock().ok_or("no current lock")?;
                let owner = holder(&client, &full_key).await;
                assert_eq!(owner, lock.owner, "the table names the invocation's owner");
                Ok::<_, lambda_runtime::Error>(json!({"charged": true}))
            }
        },
    ));
    let layer = layer(&client)
        .ttl(Duration::from_secs(60))
        .build()
        .expect("layer");

    let answer = invoke(&layer, handler, &key).await.expect("answer");

    assert_free(&client, &full_key).await;
    assert_eq!(answer.lock.key, key);
    assert_eq!(answer.lock.full_key, full_key);
    assert!(answer.lock.acquired);
    assert_eq!(answer.lock.scope, Scope::Function);
    uuid::Uuid::parse_str(&answer.lock.owner).expect("a generated owner is a UUID");
    let json = serde_json::to_value(&answer).expect("json");
    assert_eq!(json["result"], json!({"charged": true}));
    let data = &json["extensions"][0]["data"];
    assert_eq!(json["extensions"][0]["urn"], "urn:forrst:ext:atomicLock");
    for field in ["key", "acquired", "owner", "scope", "expires_at"] {
        assert!(
            data.get(field).is_some(),
            "the data has no `{field}`: {data}"
        );
    }
    assert_eq!(data["scope"], "function");
}

#[tokio::test]
async fn a_held_lock_fails_at_once_with_lock_acquisition_failed_and_the_handler_is_not_called() {
    let client = lock_client().await;
    let key = unique("order");
    let full_key = format!("lock:{FUNCTION}:{key}");
    hold(&client, &full_key, "someone-else", Duration::from_secs(60)).await;
    let calls = Calls::default();
    let layer = layer(&client).build().expect("layer");

    let err = lock_error(invoke(&layer, counting(&calls), &key).await);

    assert_eq!(err.code(), code::LOCK_ACQUISITION_FAILED, "{err}");
    assert_eq!(err.details()["full_key"], full_key.as_str());
    assert_eq!(err.details()["scope"], "function");
    assert_eq!(calls.count(), 0, "the handler ran without the lock");
    assert_eq!(holder(&client, &full_key).await, "someone-else");
    let diagnostic =
        lambda_runtime::Diagnostic::from(LockedError::<lambda_runtime::Error>::Lock(err));
    assert_eq!(diagnostic.error_type, code::LOCK_ACQUISITION_FAILED);
}

#[tokio::test]
async fn block_waits_for_the_holder_to_release_then_runs() {
    let (events, _capture) = CapturedEvents::start();
    let client = lock_client().await;
    let key = unique("order");
    let full_key = format!("lock:{FUNCTION}:{key}");
    // Another process's client: a holder of the same client would be waited for without requests.
    let other = lock_client().await;
    let held = hold(&other, &full_key, "someone-else", Duration::from_secs(60)).await;
    let calls = Calls::default();
    let layer = layer(&client)
        .block(Duration::from_secs(60))
        .build()
        .expect("layer");

    let waiting = tokio::spawn(invoke(&layer, counting(&calls), &key));
    // Release only once the invocation has found the lock held.
    while events.with_message("lock held; backing off").is_empty() {
        tokio::task::yield_now().await;
    }
    assert_eq!(calls.count(), 0, "the handler ran while the lock was held");
    other.release(&held).await.expect("release");

    let answer = waiting
        .await
        .expect("task")
        .expect("the invocation got the lock");
    assert_eq!(answer.result["ran_under"], full_key.as_str());
    assert_eq!(calls.count(), 1);
    assert_free(&client, &full_key).await;
}

#[tokio::test]
async fn block_running_out_is_lock_timeout() {
    let client = lock_client().await;
    let key = unique("order");
    let full_key = format!("lock:{FUNCTION}:{key}");
    hold(&client, &full_key, "someone-else", Duration::from_secs(60)).await;
    let calls = Calls::default();
    let layer = layer(&client)
        .block(Duration::from_millis(100))
        .build()
        .expect("layer");

    let err = lock_error(invoke(&layer, counting(&calls), &key).await);

    assert_eq!(err.code(), code::LOCK_TIMEOUT, "{err}");
    assert_eq!(err.details()["waited"]["unit"], "second");
    assert_eq!(calls.count(), 0);
}

#[tokio::test]
async fn without_auto_release_the_lock_is_kept_for_its_owner_to_release() {
    let client = lock_client().await;
    let key = unique("order");
    let full_key = format!("lock:{FUNCTION}:{key}");
    let calls = Calls::default();
    let layer = layer(&client)
        .auto_release(false)
        .owner("billing-run-7")
        .build()
        .expect("layer");

    let answer = invoke(&layer, counting(&calls), &key)
        .await
        .expect("answer");

    assert_eq!(answer.lock.owner, "billing-run-7");
    assert_eq!(holder(&client, &full_key).await, "billing-run-7");
    let again = lock_error(invoke(&layer, counting(&calls), &key).await);
    assert_eq!(again.code(), code::LOCK_ACQUISITION_FAILED);
    assert_eq!(calls.count(), 1);
}

#[tokio::test]
async fn a_handler_error_passes_through_and_the_lock_is_released() {
    let client = lock_client().await;
    let key = unique("order");
    let full_key = format!("lock:{FUNCTION}:{key}");
    let failing: Handler = BoxCloneService::new(lambda_runtime::service_fn(
        |_event: LambdaEvent<Value>| async {
            Err::<Value, lambda_runtime::Error>("out of stock".into())
        },
    ));
    let layer = layer(&client).build().expect("layer");

    match invoke(&layer, failing, &key).await {
        Err(LockedError::Handler(err)) => assert_eq!(err.to_string(), "out of stock"),
        other => panic!("expected the handler's error, got {other:?}"),
    }
    assert_free(&client, &full_key).await;
}

#[tokio::test]
async fn a_handler_panic_releases_the_lock_and_the_panic_goes_on() {
    let client = lock_client().await;
    let key = unique("order");
    let full_key = format!("lock:{FUNCTION}:{key}");
    let panicking: Handler = BoxCloneService::new(lambda_runtime::service_fn(
        |_event: LambdaEvent<Value>| async {
            if current_lock().is_some() {
                panic!("handler bug");
            }
            Ok::<Value, lambda_runtime::Error>(Value::Null)
        },
    ));
    let layer = layer(&client).build().expect("layer");

    let invocation = tokio::spawn(invoke(&layer, panicking, &key));
    let err = invocation.await.expect_err("the panic reaches the caller");

    assert!(err.is_panic(), "{err}");
    assert_free(&client, &full_key).await;
}

/// A handler that says it started, then never finishes.
fn stuck(started: oneshot::Sender<()>) -> Handler {
    let started = std::sync::Arc::new(std::sync::Mutex::new(Some(started)));
    BoxCloneService::new(lambda_runtime::service_fn(
        move |_event: LambdaEvent<Value>| {
            let started = started.lock().expect("lock").take();
            async move {
                if let Some(started) = started {
                    let _ = started.send(());
                }
                std::future::pending::<Result<Value, lambda_runtime::Error>>().await
            }
        },
    ))
}

#[tokio::test]
async fn an_invocation_dropped_mid_handler_releases_its_lock() {
    let client = lock_client().await;
    let key = unique("order");
    let full_key = format!("lock:{FUNCTION}:{key}");
    let (started, running) = oneshot::channel();
    let layer = layer(&client).build().expect("layer");

    let invocation = tokio::spawn(invoke(&layer, stuck(started), &key));
    running.await.expect("the handler started");
    holder(&client, &full_key).await;
    invocation.abort();
    assert!(invocation.await.expect_err("aborted").is_cancelled());
    client.flush().await;

    assert_free(&client, &full_key).await;
}

#[tokio::test]
async fn without_auto_release_a_dropped_invocation_leaves_its_lock_to_expire() {
    let client = lock_client().await;
    let key = unique("order");
    let full_key = format!("lock:{FUNCTION}:{key}");
    let (started, running) = oneshot::channel();
    let layer = layer(&client)
        .auto_release(false)
        .owner("kept")
        .build()
        .expect("layer");

    let invocation = tokio::spawn(invoke(&layer, stuck(started), &key));
    running.await.expect("the handler started");
    invocation.abort();
    assert!(invocation.await.expect_err("aborted").is_cancelled());
    client.flush().await;

    assert_eq!(holder(&client, &full_key).await, "kept");
}

#[tokio::test]
async fn function_scope_keeps_the_functions_apart_and_global_scope_does_not() {
    let client = lock_client().await;
    let key = unique("report");
    let calls = Calls::default();
    let keep = |scope, function: &str| {
        layer(&client)
            .scope(scope)
            .function_name(function)
            .auto_release(false)
            .build()
            .expect("layer")
    };

    let first = invoke(&keep(Scope::Function, "fn-a"), counting(&calls), &key).await;
    let other_function = invoke(&keep(Scope::Function, "fn-b"), counting(&calls), &key).await;
    assert_eq!(
        first.expect("fn-a").lock.full_key,
        format!("lock:fn-a:{key}")
    );
    assert_eq!(
        other_function.expect("fn-b").lock.full_key,
        format!("lock:fn-b:{key}")
    );
    let item = ddb_lock_test_kit::raw_item(&format!("lock:fn-a:{key}")).await;
    assert!(
        item.is_some(),
        "the function-scoped lock's item is LOCK#lock:fn-a:<key>"
    );

    let global = invoke(&keep(Scope::Global, "fn-a"), counting(&calls), &key).await;
    let answer = global.expect("global");
    assert_eq!(answer.lock.full_key, format!("lock:{key}"));
    assert_eq!(
        serde_json::to_value(&answer).expect("json")["extensions"][0]["data"]["scope"],
        "global"
    );
    let from_b = lock_error(invoke(&keep(Scope::Global, "fn-b"), counting(&calls), &key).await);
    assert_eq!(
        from_b.code(),
        code::LOCK_ACQUISITION_FAILED,
        "a global lock spans functions"
    );
    assert_eq!(calls.count(), 3);
}

#[tokio::test]
async fn the_function_name_comes_from_the_invocation_context() {
    let client = lock_client().await;
    let calls = Calls::default();
    let key = unique("order");
    let answer = invoke(
        &layer(&client).build().expect("layer"),
        counting(&calls),
        &key,
    )
    .await
    .expect("answer");
    assert_eq!(answer.lock.full_key, format!("lock:{FUNCTION}:{key}"));

    let nameless = layer(&client)
        .build()
        .expect("layer")
        .layer(counting(&calls))
        .oneshot(event(json!({"order": {"id": key}}), ""))
        .await;
    let err = lock_error(nameless);
    assert_eq!(err.field(), Some("function_name"), "{err}");
    assert_eq!(calls.count(), 1);
}

#[tokio::test]
async fn with_auto_release_the_handler_can_watch_its_lock_and_learns_of_its_loss() {
    let client = lock_client().await;
    let key = unique("order");
    let full_key = format!("lock:{FUNCTION}:{key}");
    // Another client: the guard learns of the force release from its next extension. (Through
    // its own client it would know at once, as released.)
    let admin = lock_client().await;
    let handler: Handler = BoxCloneService::new(lambda_runtime::service_fn(
        move |_event: LambdaEvent<Value>| {
            let admin = admin.clone();
            async move {
                let watch = current_watch().ok_or("no watch with auto-release")?;
                let lock = current_lock().ok_or("no current lock")?;
                assert!(watch.is_held());
                admin.force_release(&lock.full_key).await?;
                // The guard's next extension finds the lock gone.
                let lost = watch.lost().await;
                Ok::<_, lambda_runtime::Error>(json!({"lost": lost.to_string()}))
            }
        },
    ));
    let layer = layer(&client)
        .ttl(Duration::from_secs(3))
        .build()
        .expect("layer");

    let answer = invoke(&layer, handler, &key).await.expect("answer");

    assert_eq!(answer.result["lost"], LockLost::NotFound.to_string());
    assert_free(&client, &full_key).await;
}

#[tokio::test]
async fn without_auto_release_there_is_no_watch() {
    let client = lock_client().await;
    let handler: Handler = BoxCloneService::new(lambda_runtime::service_fn(
        |_event: LambdaEvent<Value>| async {
            Ok::<_, lambda_runtime::Error>(json!({"watch": current_watch().is_some()}))
        },
    ));
    let layer = layer(&client).auto_release(false).build().expect("layer");

    let answer = invoke(&layer, handler, &unique("order"))
        .await
        .expect("answer");

    assert_eq!(answer.result["watch"], false);
}

/// A request of a service that is not a Lambda handler.
struct Export {
    tenant: String,
}

#[tokio::test]
async fn any_service_runs_under_the_lock_keyed_by_a_closure_on_its_request() {
    let client = lock_client().await;
    let tenant = unique("tenant");
    let export = tower::service_fn(|export: Export| async move {
        let lock = current_lock().ok_or("no current lock")?;
        Ok::<_, lambda_runtime::Error>(format!("{} under {}", export.tenant, lock.full_key))
    });
    let builder =
        || LockLayer::<Export>::for_requests(client.clone()).key(|e| Some(e.tenant.clone()));
    let layer = builder().function_name("exports").build().expect("layer");

    let answer = layer
        .layer(export)
        .oneshot(Export {
            tenant: tenant.clone(),
        })
        .await
        .expect("answer");

    assert_eq!(
        answer.result,
        format!("{tenant} under lock:exports:{tenant}")
    );
    assert_free(&client, &answer.lock.full_key).await;
    let nameless = builder()
        .build()
        .expect("layer")
        .layer(export)
        .oneshot(Export { tenant })
        .await;
    match nameless {
        Err(LockedError::Lock(err)) => assert_eq!(err.field(), Some("function_name"), "{err}"),
        other => panic!("a function-scoped lock without a function name ran: {other:?}"),
    }
}

/// Two requests of a service that is not a Lambda handler, through one client: the second's
/// answer does not wait for the first's release, held in the network (every invocation waited
/// for all of the client's background work, another request's release included; found by
/// review).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_requests_answer_does_not_wait_for_another_requests_release() {
    lock_client().await;
    let proxy = ddb_lock_test_kit::proxy::Proxy::start(&ddb_lock_test_kit::endpoint()).await;
    let client = ddb_lock_test_kit::quickly_retrying_client(&proxy.endpoint());
    let export =
        tower::service_fn(
            |export: Export| async move { Ok::<_, lambda_runtime::Error>(export.tenant) },
        );
    let layer = LockLayer::<Export>::for_requests(client.clone())
        .key(|e| Some(e.tenant.clone()))
        .function_name("exports")
        .build()
        .expect("layer");
    let mut held = proxy.delay_next_request("DeleteItem");
    let first = tokio::spawn(layer.layer(export).oneshot(Export {
        tenant: unique("tenant-a"),
    }));
    held.captured().await;
    let tenant = unique("tenant-b");
    let second = tokio::time::timeout(
        Duration::from_secs(20),
        layer.layer(export).oneshot(Export {
            tenant: tenant.clone(),
        }),
    )
    .await
    .expect("answered while the other request's release is held");
    assert_eq!(second.expect("answer").result, tenant);
    assert!(held.deliver().await, "the release reached the endpoint");
    first.await.unwrap().expect("answer");
}

/// An acquisition whose write landed but whose every answer was lost leaves a release to the
/// client's background; the invocation answered before it was sent, and a Lambda frozen after
/// its answer sent it only on thaw, the lock held by nobody meanwhile.
#[tokio::test]
async fn an_acquisition_lost_to_the_backend_is_released_before_the_answer() {
    lock_client().await;
    let proxy = ddb_lock_test_kit::proxy::Proxy::start(&ddb_lock_test_kit::endpoint()).await;
    let client = ddb_lock_test_kit::quickly_retrying_client(&proxy.endpoint());
    let key = unique("order");
    let full_key = format!("lock:{FUNCTION}:{key}");
    for _ in 0..3 {
        proxy.drop_next_answer("PutItem");
    }
    let mut release = proxy.delay_next_request("DeleteItem");
    let layer = layer(&client).build().expect("layer");
    let calls = Calls::default();
    let invocation = invoke(&layer, counting(&calls), &key);
    tokio::pin!(invocation);
    tokio::select! {
        biased;
        answer = &mut invocation => panic!("answered with its release unsent: {:?}", answer.map(|a| a.result)),
        () = release.captured() => {}
    }
    assert!(release.deliver().await, "the release reached the endpoint");
    assert_eq!(
        lock_error(invocation.await).code(),
        code::LOCK_BACKEND_UNAVAILABLE
    );
    assert_eq!(calls.count(), 0);
    assert_free(&lock_client().await, &full_key).await;
}

/// A Lambda invocation whose deadline is closer than its `block`: Lambda would cut it off mid-wait
/// (an answer no `Retry` on `LOCK_TIMEOUT` names, and an acquisition in flight left with nothing
/// to release it). The wait ends a margin before the deadline: here the deadline is within the
/// margin already, so the one attempt is the last, and the answer is `LOCK_TIMEOUT`.
#[tokio::test]
async fn block_ends_before_the_invocations_deadline() {
    let client = lock_client().await;
    let key = unique("order");
    let full_key = format!("lock:{FUNCTION}:{key}");
    hold(&client, &full_key, "someone-else", Duration::from_secs(60)).await;
    let calls = Calls::default();
    let layer = layer(&client)
        .block(Duration::from_secs(600))
        .deadline_margin(Duration::from_secs(30))
        .build()
        .expect("layer");
    let mut event = event(json!({"order": {"id": key}}), FUNCTION);
    let in_ten_seconds = chrono::Utc::now().timestamp_millis() + 10_000;
    event.context.deadline = u64::try_from(in_ten_seconds).unwrap();

    let answer = tokio::time::timeout(
        Duration::from_secs(300),
        layer.layer(counting(&calls)).oneshot(event),
    )
    .await
    .expect("the wait went on past the invocation's deadline");

    assert_eq!(lock_error(answer).code(), code::LOCK_TIMEOUT);
    assert_eq!(calls.count(), 0);
}

/// An application's item at the lock's key is no lock item: every invocation of that key fails
/// the same way until it is mended, which a caller must not take for the backend's failure and
/// retry.
#[tokio::test]
async fn an_item_at_the_key_that_is_not_a_lock_is_lock_item_invalid() {
    let client = lock_client().await;
    let key = unique("order");
    let full_key = format!("lock:{FUNCTION}:{key}");
    let string = |value: &str| aws_sdk_dynamodb::types::AttributeValue::S(value.to_owned());
    ddb_lock_test_kit::dynamodb()
        .put_item()
        .table_name(ddb_lock_test_kit::TABLE)
        .item("PK", string(&format!("LOCK#{full_key}")))
        .item("SK", string("LOCK"))
        .item("Invoice", string("not a lock"))
        .send()
        .await
        .unwrap();
    let calls = Calls::default();
    let layer = layer(&client).build().expect("layer");

    let err = lock_error(invoke(&layer, counting(&calls), &key).await);

    assert_eq!(err.code(), code::LOCK_ITEM_INVALID, "{err}");
    assert_eq!(calls.count(), 0);
}
