//! The lock as Lambda middleware: a tower [`Layer`](tower::Layer) that runs each invocation of a
//! `lambda_runtime` handler (any tower `Service` over [`LambdaEvent`](lambda_runtime::LambdaEvent))
//! under a ddb-lock lock, after the atomic lock extension of the Forrst protocol. Any other tower
//! `Service` too ([`LockLayer::for_requests`]), its key read by a closure on its requests.
//!
//! - [`LockLayer`]: the key from the event (a JSON pointer or a closure), `ttl`, [`Scope`]
//!   (`lock:{function}:{key}` or `lock:{key}`), `block` or fail at once, `owner`, `auto_release`.
//! - [`Locked`]: the handler's response with the lock's [`LockData`] (`key`, `acquired`, `owner`,
//!   `scope`, `expires_at`), serialized in the seed's response shape; the handler itself reads it
//!   with [`current_lock`], and watches it with [`current_watch`].
//! - [`LockError`] and [`LockedError`]: failures with the seed's error [`code`]s, which a Lambda
//!   reports as its `errorType`.
//! - [`SystemFunctions`]: the seed's release, force-release and status.
//!
//! # Examples
//!
//! ```no_run
//! use ddb_lock_layer::{current_lock, LockLayer};
//! use lambda_runtime::{service_fn, Error, LambdaEvent};
//! use serde_json::{json, Value};
//! use std::time::Duration;
//! use tower::Layer;
//!
//! async fn fulfil(event: LambdaEvent<Value>) -> Result<Value, Error> {
//!     let lock = current_lock().ok_or("not under a LockLayer")?;
//!     Ok(json!({"fulfilled": event.payload["order_id"], "owner": lock.owner}))
//! }
//!
//! #[tokio::main]
//! async fn main() -> Result<(), Error> {
//!     let aws = aws_config::load_from_env().await;
//!     let client = ddb_lock::LockClient::builder(aws_sdk_dynamodb::Client::new(&aws))
//!         .table_name("locks")
//!         .build()?;
//!     let layer = LockLayer::builder(client)
//!         .key_pointer("/order_id")
//!         .ttl(Duration::from_secs(30))
//!         .build()?;
//!     lambda_runtime::run(layer.layer(service_fn(fulfil))).await
//! }
//! ```
#![deny(missing_docs)]

mod data;
mod error;
mod key;
mod layer;
mod response;
mod service;
pub mod system;

pub use data::{current_lock, current_watch, LockData};
pub use error::{code, LockError, LockedError};
pub use key::{KeyError, Scope, KEY_PREFIX};
pub use layer::{LockLayer, LockLayerBuilder, DEFAULT_DEADLINE_MARGIN, DEFAULT_TTL, MIN_TTL};
pub use response::{Locked, EXTENSION_URN};
pub use service::LockService;
pub use system::SystemFunctions;
