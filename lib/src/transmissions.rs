//! Counting how many times the SDK sent one request.
//!
//! The SDK retries a request whose answer it did not get (a timeout, a dropped connection, a 500).
//! Such an earlier attempt may have been applied, so a retry that then fails its condition is
//! ambiguous: the condition may have failed because of our own earlier attempt. Operations whose
//! outcome depends on it count their attempts with this interceptor.

use aws_sdk_dynamodb::config::interceptors::BeforeTransmitInterceptorContextRef;
use aws_sdk_dynamodb::config::{ConfigBag, Intercept, RuntimeComponents};
use aws_sdk_dynamodb::error::BoxError;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

/// An interceptor counting the attempts of the one request it is attached to.
#[derive(Debug, Clone, Default)]
pub(crate) struct Transmissions(Arc<AtomicU32>);

impl Transmissions {
    /// Whether the request was sent more than once, so that an earlier attempt may have been
    /// applied before the one whose answer we have.
    pub(crate) fn retried(&self) -> bool {
        self.0.load(Ordering::Relaxed) > 1
    }
}

impl Intercept for Transmissions {
    fn name(&self) -> &'static str {
        "ddb_lock::Transmissions"
    }

    fn read_before_transmit(
        &self,
        _context: &BeforeTransmitInterceptorContextRef<'_>,
        _runtime_components: &RuntimeComponents,
        _cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        self.0.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }
}
