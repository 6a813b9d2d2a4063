//! What the layer's tests share: a Lambda event for a named function, and a handler that counts
//! its calls and answers with the lock it ran under.

use ddb_lock_layer::current_lock;
use lambda_runtime::{Config, Context, LambdaEvent};
use serde_json::{json, Value};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use tower::util::BoxCloneService;

/// An event with `payload`, invoked as the function `function`.
pub fn event(payload: Value, function: &str) -> LambdaEvent<Value> {
    let mut context = Context::default();
    context.env_config = Arc::new(Config {
        function_name: function.into(),
        ..Config::default()
    });
    LambdaEvent::new(payload, context)
}

/// A handler as the tests wrap it.
pub type Handler = BoxCloneService<LambdaEvent<Value>, Value, lambda_runtime::Error>;

/// How many times a [`counting`] handler ran.
#[derive(Clone, Default)]
pub struct Calls(Arc<AtomicUsize>);

impl Calls {
    pub fn count(&self) -> usize {
        self.0.load(Ordering::SeqCst)
    }
}

/// A handler that counts its calls and answers with the full key of its current lock.
pub fn counting(calls: &Calls) -> Handler {
    let calls = calls.clone();
    Handler::new(lambda_runtime::service_fn(
        move |_event: LambdaEvent<Value>| {
            let calls = calls.clone();
            async move {
                calls.0.fetch_add(1, Ordering::SeqCst);
                let lock = current_lock().ok_or("no current lock")?;
                Ok::<_, lambda_runtime::Error>(json!({"ran_under": lock.full_key}))
            }
        },
    ))
}
