//! [`LockService`]: one invocation under its lock. Read the key, take the lock (once, or waiting
//! up to `block`), run the handler with the lock as its [`current_lock`](crate::current_lock),
//! and with auto-release release it whichever way the handler ends.
//!
//! With auto-release the lock is held by a [`LockGuard`]: it extends the lease every third of the
//! `ttl` while the handler runs (so a handler that outlives its `ttl` keeps its lock; one whose
//! lock is lost meanwhile is not stopped, and can tell from its
//! [`current_watch`](crate::current_watch)), and if the
//! invocation's future is dropped at any await (an outer timeout, a `select!`) the guard's drop
//! releases the lock from a task the client tracks ([`LockClient::flush`](ddb_lock::LockClient::flush)
//! waits for it). A handler's panic is caught, the lock released, and the panic resumed, for the
//! runtime to report as it does any panic. A Lambda invocation waits for the client's background
//! releases before it answers (or its panic goes on), as a Lambda must before it may be frozen; a
//! request of another service does not (a Lambda function serving one calls
//! [`LockClient::flush`](ddb_lock::LockClient::flush) before it returns).
//! Without auto-release the lock is a plain acquisition,
//! never extended, kept until released with its owner token or expired, whatever happens to the
//! invocation.

use crate::data::{with_current, LockData};
use crate::error::{LockError, LockedError};
use crate::key::Scope;
use crate::layer::Settings;
use crate::response::Locked;
use ddb_lock::{AcquireOptions, Lock, LockGuard, ReleaseOutcome};
use futures_util::future::BoxFuture;
use futures_util::FutureExt;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;
use tower::Service;
use tracing::{debug, warn};

/// A handler (a tower `Service` over requests `R`, usually a Lambda handler over
/// [`LambdaEvent`](lambda_runtime::LambdaEvent)) wrapped by a [`LockLayer`](crate::LockLayer):
/// each call runs it under the invocation's lock. Its response is the handler's wrapped in [`Locked`] (with the lock's data);
/// its error a [`LockedError`].
///
/// # Examples
///
/// ```no_run
/// # async fn run(client: ddb_lock::LockClient) -> Result<(), Box<dyn std::error::Error>> {
/// use ddb_lock_layer::LockLayer;
/// use lambda_runtime::{service_fn, Context, LambdaEvent};
/// use serde_json::{json, Value};
/// use tower::{Layer, ServiceExt};
///
/// let layer = LockLayer::builder(client).key_pointer("/id").function_name("orders").build()?;
/// let service = layer.layer(service_fn(|_event: LambdaEvent<Value>| async {
///     Ok::<_, lambda_runtime::Error>(json!("done"))
/// }));
/// let event = LambdaEvent::new(json!({"id": "o-1"}), Context::default());
/// let answer = service.oneshot(event).await?;
/// assert_eq!(answer.lock.full_key, "lock:orders:o-1");
/// # Ok(()) }
/// ```
pub struct LockService<S, R> {
    inner: S,
    settings: Arc<Settings<R>>,
}

impl<S: Clone, R> Clone for LockService<S, R> {
    fn clone(&self) -> Self {
        LockService {
            inner: self.inner.clone(),
            settings: Arc::clone(&self.settings),
        }
    }
}

impl<S, R> LockService<S, R> {
    pub(crate) fn new(inner: S, settings: Arc<Settings<R>>) -> Self {
        LockService { inner, settings }
    }
}

/// How the lock of a running invocation is held.
enum Hold {
    /// Extended while the handler runs, released when it ends.
    Guard(LockGuard),
    /// Kept after the handler, until released by its owner or expired.
    Kept,
}

impl<S, R> Service<R> for LockService<S, R>
where
    S: Service<R> + Clone + Send + 'static,
    S::Future: Send,
    S::Response: Send,
    S::Error: Send,
    R: Send + 'static,
{
    type Response = Locked<S::Response>;
    type Error = LockedError<S::Error>;
    type Future = BoxFuture<'static, Result<Self::Response, Self::Error>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx).map_err(LockedError::Handler)
    }

    fn call(&mut self, request: R) -> Self::Future {
        // The clone is ready (poll_ready was called on it); the fresh one waits for its own.
        let fresh = self.inner.clone();
        let inner = std::mem::replace(&mut self.inner, fresh);
        let settings = Arc::clone(&self.settings);
        Box::pin(invoke(inner, settings, request))
    }
}

/// One invocation, and, a Lambda invocation's (its deadline known), before its answer (or its
/// handler's panic goes on) the releases it left to the client's background, done: once a Lambda
/// answers, its sandbox may be frozen, and the lock such a release ends (an acquisition whose
/// write landed unanswered leaves one, as does a guard whose release failed) stays held by nobody
/// until a thaw or its lease end. A request of any other service does not wait: its process goes
/// on, and the client's background work is that of every request in flight (waiting for all of
/// it, an answer waited for another request's release, held in the network; found by review).
async fn invoke<S, R>(
    inner: S,
    settings: Arc<Settings<R>>,
    request: R,
) -> Result<Locked<S::Response>, LockedError<S::Error>>
where
    S: Service<R>,
{
    let outcome = AssertUnwindSafe(locked_call(inner, &settings, request))
        .catch_unwind()
        .await;
    if settings.deadline_of.is_some() {
        settings.client.flush().await;
    }
    outcome.unwrap_or_else(|panic| std::panic::resume_unwind(panic))
}

/// The handler's call under the lock: it runs only once the lock is taken.
async fn locked_call<S, R>(
    mut inner: S,
    settings: &Settings<R>,
    request: R,
) -> Result<Locked<S::Response>, LockedError<S::Error>>
where
    S: Service<R>,
{
    let key = (settings.key)(&request).map_err(LockError::from)?;
    let function = match (&settings.function_name, settings.function_of) {
        (Some(name), _) => name.as_str(),
        (None, Some(function_of)) => function_of(&request),
        (None, None) => "",
    };
    if function.is_empty() && settings.scope == Scope::Function {
        return Err(LockError::InvalidArgument {
            field: "function_name",
            problem: "a function-scoped lock needs the function's name, and the request has none; set LockLayer's function_name or use Scope::Global".into(),
        }
        .into());
    }
    let full_key = settings.scope.full_key(function, &key);
    let owner = settings
        .owner
        .clone()
        .unwrap_or_else(|| uuid::Uuid::new_v4().to_string());
    let budget = settings.deadline_of.and_then(|deadline_of| {
        ddb_lock::wait_budget(
            deadline_of(&request),
            chrono::Utc::now().timestamp_millis(),
            settings.deadline_margin,
        )
    });
    let (hold, lock) = acquire(settings, &key, &full_key, &owner, budget).await?;
    let data = LockData {
        key,
        acquired: true,
        owner,
        scope: settings.scope,
        expires_at: lock.expires_at(),
        full_key,
    };
    let watch = match &hold {
        Hold::Guard(guard) => Some(guard.watch()),
        Hold::Kept => None,
    };
    // Calling the handler inside the future catches a panic of `call` too.
    let handled = AssertUnwindSafe(with_current(data.clone(), watch, async move {
        inner.call(request).await
    }))
    .catch_unwind()
    .await;
    if let Hold::Guard(guard) = hold {
        release(guard, &data.full_key).await;
    }
    match handled {
        Ok(Ok(result)) => Ok(Locked { result, lock: data }),
        Ok(Err(err)) => Err(LockedError::Handler(err)),
        Err(panic) => std::panic::resume_unwind(panic),
    }
}

/// Takes the lock on `full_key`: once, or waiting up to `block`, within `budget` (the time left
/// before the invocation's deadline, less the margin); as a guard with auto-release.
async fn acquire<R>(
    settings: &Settings<R>,
    key: &str,
    full_key: &str,
    owner: &str,
    budget: Option<Duration>,
) -> Result<(Hold, Lock), LockError> {
    let mut opts = AcquireOptions::new().owner(owner).lease(settings.ttl);
    if let Some(block) = settings.block {
        opts = opts.timeout(budget.map_or(block, |budget| block.min(budget)));
    }
    let client = &settings.client;
    let failed = || LockError::AcquisitionFailed {
        key: key.to_owned(),
        scope: settings.scope,
        full_key: full_key.to_owned(),
    };
    let timed_out = |err: ddb_lock::Error| match err {
        ddb_lock::Error::Timeout { waited, .. } => LockError::Timeout {
            key: key.to_owned(),
            scope: settings.scope,
            full_key: full_key.to_owned(),
            waited,
        },
        other => other.into(),
    };
    if !settings.auto_release {
        let lock = match settings.block {
            Some(_) => client.acquire(full_key, &opts).await.map_err(timed_out)?,
            None => client
                .try_acquire(full_key, &opts)
                .await
                .map_err(LockError::from)?
                .ok_or_else(failed)?,
        };
        return Ok((Hold::Kept, lock));
    }
    let guard = match settings.block {
        Some(_) => client.lock(full_key, &opts).await.map_err(timed_out)?,
        None => client
            .try_lock(full_key, &opts)
            .await
            .map_err(LockError::from)?
            .ok_or_else(failed)?,
    };
    // `None` only if the client's `release_all` released it since: not ours to run under.
    let lock = guard.lock().ok_or_else(failed)?;
    Ok((Hold::Guard(guard), lock))
}

/// Releases the invocation's lock; a lock found lost, or a failed release, is logged (the lock then
/// expires with its lease), never turned into the invocation's error.
async fn release(guard: LockGuard, full_key: &str) {
    match guard.release().await {
        Ok(ReleaseOutcome::Released) => debug!(full_key, "invocation's lock released"),
        Ok(ReleaseOutcome::Unconfirmed) => debug!(
            full_key,
            "invocation's lock released, unconfirmed (sent again after a lost answer, it found the lock gone)"
        ),
        Ok(outcome) => warn!(
            full_key,
            ?outcome,
            "the invocation's lock was lost before its release"
        ),
        Err(err) => {
            warn!(full_key, %err, "could not release the invocation's lock; it expires with its lease")
        }
    }
}
