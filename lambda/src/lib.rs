//! The ddb-lock AWS Lambda function: the lock as a saga-friendly API.
//!
//! A thin adapter over the `ddb-lock` library. An event `{"op": …, "resource": …, …}` is parsed
//! ([`event`]), executed by [`Handler`], answered with one JSON shape per operation ([`response`]),
//! or refused with a stable `errorType` ([`error::name`]) that Step Functions can `Retry` and
//! `Catch` on. Each invocation writes one CloudWatch Embedded Metric Format line ([`metrics`]).
//! The README documents every operation with an example.
#![deny(missing_docs)]

pub mod config;
pub mod error;
pub mod event;
mod handler;
mod json_guard;
pub mod metrics;
pub mod response;

pub use config::Config;
pub use ddb_lock::wait_budget;
pub use error::HandlerError;
pub use handler::Handler;
pub use json_guard::{JsonGuard, JsonGuardService};
