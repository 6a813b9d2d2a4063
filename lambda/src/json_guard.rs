//! A runtime layer that lets a body which is not JSON reach the handler as an invalid request.
//!
//! `lambda_runtime` deserializes the body before calling the handler and reports a failure as
//! `lambda_runtime::deserializer::DeserializeError`, a name no state machine should have to know.
//! This layer, which sees the raw invocation first, replaces such a body with a JSON object that
//! [`event::parse`](crate::event::parse) reports as `InvalidRequest` on the field `event`.

use crate::event::NOT_JSON_MARKER;
use lambda_runtime::tower::{Layer, Service};
use lambda_runtime::LambdaInvocation;
use serde::de::IgnoredAny;
use std::task::{Context, Poll};

/// The layer; add it last (`Runtime::layer` runs the last-added layer first).
///
/// # Examples
///
/// ```no_run
/// use ddb_lock_lambda::JsonGuard;
/// use lambda_runtime::{service_fn, LambdaEvent, Runtime};
///
/// # async fn run() -> Result<(), lambda_runtime::Error> {
/// let echo = service_fn(|event: LambdaEvent<serde_json::Value>| async move {
///     Ok::<_, lambda_runtime::Error>(event.payload)
/// });
/// Runtime::new(echo).layer(JsonGuard).run().await
/// # }
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct JsonGuard;

impl<S> Layer<S> for JsonGuard {
    type Service = JsonGuardService<S>;

    fn layer(&self, inner: S) -> Self::Service {
        JsonGuardService { inner }
    }
}

/// The service [`JsonGuard`] wraps around the runtime.
#[derive(Debug, Clone)]
pub struct JsonGuardService<S> {
    inner: S,
}

impl<S: Service<LambdaInvocation>> Service<LambdaInvocation> for JsonGuardService<S> {
    type Response = S::Response;
    type Error = S::Error;
    type Future = S::Future;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut invocation: LambdaInvocation) -> Self::Future {
        if let Err(err) = serde_json::from_slice::<IgnoredAny>(&invocation.body) {
            let replacement = serde_json::json!({ NOT_JSON_MARKER: err.to_string() });
            invocation.body = bytes::Bytes::from(replacement.to_string());
        }
        self.inner.call(invocation)
    }
}
