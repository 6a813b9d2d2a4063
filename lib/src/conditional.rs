//! Sending a conditional request and telling its refusal from a failure.
//!
//! Every conditional write of the library (acquire, release, extend, the fenced transaction,
//! cleanup's delete, a user's fenced write) is answered in one of three ways: applied; refused by
//! its condition, in which case the answer carries what the request needs to know next (the item
//! that failed the condition when the request asked for `ALL_OLD`, or the transaction's
//! cancellation reasons); or failed, which becomes [`Error::Backend`]. [`answer`] makes
//! that split once. The SDK's fluent builders share no trait, so each caller builds and sends its
//! own request and hands over its result and a function picking its refusal out of the
//! operation's error type; the request's own settings (`ALL_OLD` included) stay visible where it
//! is built.
//!
//! The SDK retries a request whose answer it did not get (a timeout, a dropped connection, a 500).
//! Such an earlier attempt may have been applied, so a retry that then fails its condition is
//! ambiguous: the condition may have failed because of our own earlier attempt. Requests whose
//! outcome depends on it watch their attempts with the [`Transmissions`] interceptor. The SDK
//! also retries a request refused before it was applied (throttled, or in conflict with a
//! transaction): such an attempt changed nothing, and a retry after it is as plain as a first
//! attempt.

use crate::error::Error;
use crate::item::Item;
use aws_sdk_dynamodb::config::http::HttpResponse;
use aws_sdk_dynamodb::config::interceptors::FinalizerInterceptorContextRef;
use aws_sdk_dynamodb::config::{ConfigBag, Intercept, RuntimeComponents};
use aws_sdk_dynamodb::error::{BoxError, SdkError};
use aws_sdk_dynamodb::operation::delete_item::DeleteItemError;
use aws_sdk_dynamodb::operation::update_item::UpdateItemError;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

/// An interceptor watching the attempts of the one request it is attached to: whether one ended
/// without an answer that says it was not applied.
#[derive(Debug, Clone, Default)]
pub(crate) struct Transmissions(Arc<Attempts>);

/// What the attempts of one request told.
#[derive(Debug, Default)]
struct Attempts {
    /// One ended without an answer that says it was not applied (see [`Transmissions::retried`]).
    unsure: AtomicBool,
    /// How many ended.
    ended: AtomicUsize,
}

impl Transmissions {
    /// Whether an attempt of the request ended without a definite answer (none came: a timeout,
    /// a dropped connection; a server error; a success whose body was cut), so that it may have
    /// been applied before the attempt whose answer we have. An attempt refused for throttling or a transaction
    /// conflict was not applied: a refusal after it was not caused by our own request (counted
    /// as a retry, a release refused by a new holder said `NotFound`, hiding that holder).
    pub(crate) fn retried(&self) -> bool {
        self.0.unsure.load(Ordering::Relaxed)
    }

    /// Whether the request was sent more than once (the SDK's resend after an attempt that timed
    /// out, lost its connection or failed): an earlier attempt may still be on its way, and land
    /// after the answer, even one that says applied.
    pub(crate) fn resent(&self) -> bool {
        self.0.ended.load(Ordering::Relaxed) > 1
    }
}

impl Intercept for Transmissions {
    fn name(&self) -> &'static str {
        "ddb_lock::Transmissions"
    }

    fn read_after_attempt(
        &self,
        context: &FinalizerInterceptorContextRef<'_>,
        _runtime_components: &RuntimeComponents,
        _cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        // Only a client error says the request was not applied (a refusal, throttling, a
        // transaction conflict): a 200 whose body could not be read was applied, a 5xx may have
        // been, and no answer at all says nothing.
        let definite = context
            .response()
            .is_some_and(|response| response.status().is_client_error());
        if !definite {
            self.0.unsure.store(true, Ordering::Relaxed);
        }
        self.0.ended.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }
}

/// The answer to a conditional request that settles its outcome.
#[derive(Debug)]
pub(crate) enum Answer<O, R> {
    /// The request was applied; DynamoDB's output.
    Applied(O),
    /// The condition refused it; what the refusal carried.
    Refused(R),
}

impl<O, R> Answer<O, R> {
    /// The same answer with `f` applied to an applied request's output.
    pub(crate) fn map<P>(self, f: impl FnOnce(O) -> P) -> Answer<P, R> {
        match self {
            Answer::Applied(output) => Answer::Applied(f(output)),
            Answer::Refused(refusal) => Answer::Refused(refusal),
        }
    }
}

/// The refusal of a conditional UpdateItem: the item that failed the condition (`ALL_OLD`, if
/// asked for), for [`answer`].
pub(crate) fn update_refused(err: &UpdateItemError) -> Option<Option<Item>> {
    match err {
        UpdateItemError::ConditionalCheckFailedException(failed) => Some(failed.item().cloned()),
        _ => None,
    }
}

/// The refusal of a conditional DeleteItem: the item that failed the condition (`ALL_OLD`, if
/// asked for), for [`answer`].
pub(crate) fn delete_refused(err: &DeleteItemError) -> Option<Option<Item>> {
    match err {
        DeleteItemError::ConditionalCheckFailedException(failed) => Some(failed.item().cloned()),
        _ => None,
    }
}

/// Splits the answer to a conditional request: applied, refused (when `refusal` finds a refusal
/// in the operation's error, and returns what it carried), or any other failure as
/// [`Error::Backend`] naming `operation`. It takes the awaited result rather than the send future
/// so that it adds no layer to the callers' futures.
pub(crate) fn answer<O, E, R>(
    operation: &'static str,
    result: Result<O, SdkError<E, HttpResponse>>,
    refusal: impl FnOnce(&E) -> Option<R>,
) -> Result<Answer<O, R>, Error>
where
    aws_sdk_dynamodb::Error: From<SdkError<E, HttpResponse>>,
{
    match result {
        Ok(output) => Ok(Answer::Applied(output)),
        Err(err) => match err.as_service_error().and_then(refusal) {
            Some(refused) => Ok(Answer::Refused(refused)),
            None => Err(Error::backend(operation, err)),
        },
    }
}
