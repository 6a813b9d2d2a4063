//! [`LockLayer`]: the settings of the lock each invocation runs under, checked once when built,
//! and the tower [`Layer`] that wraps a handler in a [`LockService`].

use crate::key::{self, KeySource, Scope};
use crate::service::LockService;
use ddb_lock::limits::{MAX_DURATION, MIN_LEASE};
use ddb_lock::{InvalidInput, LockClient};
use lambda_runtime::LambdaEvent;
use serde_json::Value;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;
use tower::Layer;

/// The lease when none is set: the seed's example's 30 seconds.
pub const DEFAULT_TTL: Duration = Duration::from_secs(30);

/// How long before a Lambda invocation's deadline a `block` ends when none is set: the time left
/// for the handler and the answer (the Lambda function's default too).
pub const DEFAULT_DEADLINE_MARGIN: Duration = Duration::from_millis(500);

/// The shortest lease: with auto-release a guard extends it every third of it, at least the
/// library's [`MIN_LEASE`].
pub const MIN_TTL: Duration = MIN_LEASE.saturating_mul(3);

/// A tower [`Layer`] that runs each invocation of the wrapped handler under a lock: the lock is
/// taken before the handler is called (or the invocation fails with
/// [`LOCK_ACQUISITION_FAILED`](crate::code::LOCK_ACQUISITION_FAILED) or
/// [`LOCK_TIMEOUT`](crate::code::LOCK_TIMEOUT) without calling it), and with auto-release it is
/// released when the handler returns, fails, panics or is dropped.
///
/// Built by [`LockLayer::builder`] for a Lambda handler (requests `R` = [`LambdaEvent`]), or
/// [`LockLayer::for_requests`] for any other tower `Service`; cheap to clone.
///
/// # Examples
///
/// ```no_run
/// # async fn run(client: ddb_lock::LockClient) -> Result<(), lambda_runtime::Error> {
/// use ddb_lock_layer::{LockLayer, Scope};
/// use lambda_runtime::{service_fn, LambdaEvent};
/// use serde_json::{json, Value};
/// use std::time::Duration;
/// use tower::Layer;
///
/// async fn charge(event: LambdaEvent<Value>) -> Result<Value, lambda_runtime::Error> {
///     Ok(json!({"charged": event.payload["user_id"]}))
/// }
///
/// let layer = LockLayer::builder(client)
///     .key_pointer("/user_id")
///     .ttl(Duration::from_secs(30))
///     .scope(Scope::Function)
///     .block(Duration::from_secs(5))
///     .build()?;
/// lambda_runtime::run(layer.layer(service_fn(charge))).await
/// # }
/// ```
pub struct LockLayer<R> {
    pub(crate) settings: Arc<Settings<R>>,
}

/// Where a request type keeps the invoked function's name.
pub(crate) type FunctionOf<R> = for<'a> fn(&'a R) -> &'a str;

/// Where a request type keeps its deadline, in epoch milliseconds.
pub(crate) type DeadlineOf<R> = fn(&R) -> u64;

/// What every invocation of a layer's service uses.
pub(crate) struct Settings<R> {
    pub(crate) client: LockClient,
    pub(crate) key: KeySource<R>,
    pub(crate) ttl: Duration,
    pub(crate) scope: Scope,
    pub(crate) block: Option<Duration>,
    pub(crate) owner: Option<String>,
    pub(crate) auto_release: bool,
    pub(crate) function_name: Option<String>,
    pub(crate) function_of: Option<FunctionOf<R>>,
    pub(crate) deadline_of: Option<DeadlineOf<R>>,
    pub(crate) deadline_margin: Duration,
}

impl<R> Clone for LockLayer<R> {
    fn clone(&self) -> Self {
        LockLayer {
            settings: Arc::clone(&self.settings),
        }
    }
}

impl<R> fmt::Debug for LockLayer<R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = &self.settings;
        f.debug_struct("LockLayer")
            .field("table", &s.client.table_name())
            .field("ttl", &s.ttl)
            .field("scope", &s.scope)
            .field("block", &s.block)
            .field("owner", &s.owner)
            .field("auto_release", &s.auto_release)
            .finish_non_exhaustive()
    }
}

impl<T> LockLayer<LambdaEvent<T>> {
    /// Starts configuring a layer around a Lambda handler (a tower `Service` over
    /// [`LambdaEvent`]), whose locks live in `client`'s table. The function name of
    /// [`Scope::Function`] keys comes from the invocation context, and a
    /// [`block`](LockLayerBuilder::block) ends a
    /// [`deadline_margin`](LockLayerBuilder::deadline_margin) before the invocation's deadline.
    pub fn builder(client: LockClient) -> LockLayerBuilder<LambdaEvent<T>> {
        LockLayerBuilder::new(
            client,
            Some(lambda_function_name::<T>),
            Some(lambda_deadline::<T>),
        )
    }
}

/// The function a Lambda event invokes, from its context (`AWS_LAMBDA_FUNCTION_NAME`).
fn lambda_function_name<T>(event: &LambdaEvent<T>) -> &str {
    &event.context.env_config.function_name
}

/// A Lambda invocation's deadline, from its context (epoch milliseconds).
fn lambda_deadline<T>(event: &LambdaEvent<T>) -> u64 {
    event.context.deadline
}

impl<R> LockLayer<R> {
    /// Starts configuring a layer around a tower `Service` of any request type `R` (an HTTP
    /// service, a queue consumer): the key comes from a [`key`](LockLayerBuilder::key) closure on
    /// the request, and [`Scope::Function`] needs a
    /// [`function_name`](LockLayerBuilder::function_name).
    ///
    /// # Examples
    ///
    /// ```
    /// # fn run(client: ddb_lock::LockClient) {
    /// use ddb_lock_layer::LockLayer;
    ///
    /// struct Job { tenant: String }
    ///
    /// let layer = LockLayer::<Job>::for_requests(client)
    ///     .key(|job| Some(job.tenant.clone()))
    ///     .function_name("nightly-export")
    ///     .build()
    ///     .expect("valid settings");
    /// # }
    /// ```
    pub fn for_requests(client: LockClient) -> LockLayerBuilder<R> {
        LockLayerBuilder::new(client, None, None)
    }
}

impl<S, R> Layer<S> for LockLayer<R> {
    type Service = LockService<S, R>;

    fn layer(&self, inner: S) -> Self::Service {
        LockService::new(inner, Arc::clone(&self.settings))
    }
}

/// The settings of a [`LockLayer`], checked by [`build`](Self::build).
///
/// # Examples
///
/// ```
/// # fn run(client: ddb_lock::LockClient) {
/// use ddb_lock_layer::{LockLayer, Scope};
/// use std::time::Duration;
///
/// #[derive(serde::Deserialize)]
/// struct Order { id: String }
///
/// let layer = LockLayer::builder(client)
///     .key(|event: &lambda_runtime::LambdaEvent<Order>| Some(format!("order:{}", event.payload.id)))
///     .scope(Scope::Global)
///     .ttl(Duration::from_secs(60))
///     .auto_release(false)
///     .build()
///     .expect("valid settings");
/// # }
/// ```
pub struct LockLayerBuilder<R> {
    client: LockClient,
    key: Option<KeySource<R>>,
    ttl: Duration,
    scope: Scope,
    block: Option<Duration>,
    owner: Option<String>,
    auto_release: bool,
    function_name: Option<String>,
    function_of: Option<FunctionOf<R>>,
    deadline_of: Option<DeadlineOf<R>>,
    deadline_margin: Duration,
}

impl<R> fmt::Debug for LockLayerBuilder<R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LockLayerBuilder")
            .field("ttl", &self.ttl)
            .field("scope", &self.scope)
            .field("block", &self.block)
            .finish_non_exhaustive()
    }
}

impl LockLayerBuilder<LambdaEvent<Value>> {
    /// Reads each invocation's key at `pointer` (RFC 6901, such as `/order/id`) in the JSON
    /// event's payload; it must be a non-empty string there, else the invocation fails with
    /// [`LOCK_INVALID_ARGUMENT`](crate::code::LOCK_INVALID_ARGUMENT) naming the pointer.
    pub fn key_pointer(mut self, pointer: impl Into<String>) -> Self {
        let pointer = pointer.into();
        self.key = Some(key::pointer(pointer));
        self
    }
}

impl<R> LockLayerBuilder<R> {
    fn new(
        client: LockClient,
        function_of: Option<FunctionOf<R>>,
        deadline_of: Option<DeadlineOf<R>>,
    ) -> Self {
        LockLayerBuilder {
            client,
            key: None,
            ttl: DEFAULT_TTL,
            scope: Scope::default(),
            block: None,
            owner: None,
            auto_release: true,
            function_name: None,
            function_of,
            deadline_of,
            deadline_margin: DEFAULT_DEADLINE_MARGIN,
        }
    }

    /// Reads each invocation's key with `key`; `None` (or an empty key) fails the invocation with
    /// [`LOCK_INVALID_ARGUMENT`](crate::code::LOCK_INVALID_ARGUMENT) naming `key`.
    pub fn key<F>(mut self, key: F) -> Self
    where
        F: Fn(&R) -> Option<String> + Send + Sync + 'static,
    {
        self.key = Some(key::closure(key));
        self
    }

    /// The lock's lease (the seed's `ttl`), at least [`MIN_TTL`]. Default [`DEFAULT_TTL`].
    pub fn ttl(mut self, ttl: Duration) -> Self {
        self.ttl = ttl;
        self
    }

    /// [`Scope::Function`] (the default) or [`Scope::Global`].
    pub fn scope(mut self, scope: Scope) -> Self {
        self.scope = scope;
        self
    }

    /// Waits up to `block` for a held lock (then [`LOCK_TIMEOUT`](crate::code::LOCK_TIMEOUT));
    /// without it a held lock fails the invocation at once
    /// ([`LOCK_ACQUISITION_FAILED`](crate::code::LOCK_ACQUISITION_FAILED)). A Lambda handler's
    /// wait also ends a [`deadline_margin`](Self::deadline_margin) before the invocation's
    /// deadline: cut off by Lambda mid-wait, it would answer no error a `Retry` names, and an
    /// acquisition in flight then could land with nothing left to release it.
    pub fn block(mut self, block: Duration) -> Self {
        self.block = Some(block);
        self
    }

    /// How long before a Lambda invocation's deadline a [`block`](Self::block) ends, left for the
    /// handler and the answer. Default [`DEFAULT_DEADLINE_MARGIN`]; requests without a deadline
    /// ([`LockLayer::for_requests`]) wait their whole `block`.
    pub fn deadline_margin(mut self, margin: Duration) -> Self {
        self.deadline_margin = margin;
        self
    }

    /// The owner token of every lock the layer takes. Default: a new UUID v4 per invocation.
    pub fn owner(mut self, owner: impl Into<String>) -> Self {
        self.owner = Some(owner.into());
        self
    }

    /// Whether the lock is released when the handler ends (`true`, the default: after success, an
    /// error, a panic, or the invocation's future being dropped), or kept until released with its
    /// owner token or expired (`false`).
    pub fn auto_release(mut self, auto_release: bool) -> Self {
        self.auto_release = auto_release;
        self
    }

    /// The function name of [`Scope::Function`] keys. Default, for a Lambda handler: the
    /// invocation context's (`AWS_LAMBDA_FUNCTION_NAME`).
    pub fn function_name(mut self, name: impl Into<String>) -> Self {
        self.function_name = Some(name.into());
        self
    }

    /// Checks the settings: a key source is set, the `ttl` and `block` are within the library's
    /// limits, the `owner` and `function_name` are not empty. Each error names its field.
    pub fn build(self) -> Result<LockLayer<R>, InvalidInput> {
        let key = self.key.ok_or(InvalidInput::Empty { field: "key" })?;
        if self.ttl < MIN_TTL {
            return Err(InvalidInput::DurationTooShort {
                field: "ttl",
                value: self.ttl,
                min: MIN_TTL,
            });
        }
        for (field, value) in [
            ("ttl", Some(self.ttl)),
            ("block", self.block),
            ("deadline_margin", Some(self.deadline_margin)),
        ] {
            if let Some(value) = value.filter(|v| *v > MAX_DURATION) {
                return Err(InvalidInput::DurationTooLong {
                    field,
                    value,
                    max: MAX_DURATION,
                });
            }
        }
        if let Some(owner) = &self.owner {
            ddb_lock::limits::owner(owner)?;
        }
        if self.function_name.as_deref() == Some("") {
            return Err(InvalidInput::Empty {
                field: "function_name",
            });
        }
        Ok(LockLayer {
            settings: Arc::new(Settings {
                client: self.client,
                key,
                ttl: self.ttl,
                scope: self.scope,
                block: self.block,
                owner: self.owner,
                auto_release: self.auto_release,
                function_name: self.function_name,
                function_of: self.function_of,
                deadline_of: self.deadline_of,
                deadline_margin: self.deadline_margin,
            }),
        })
    }
}
