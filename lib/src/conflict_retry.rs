//! Writes refused because a transaction is writing the same item, retried as the SDK retries
//! throttling.
//!
//! DynamoDB refuses a PutItem, UpdateItem or DeleteItem of an item that a TransactWriteItems in
//! progress also writes, with `TransactionConflictException`; nothing was written. Lock sets and
//! paths write in transactions, a path's ancestors (the namespace's root above all) in nearly
//! every one, so a plain acquisition, a shared release or a clearing of lapsed holders of such an
//! item meets the error under load. The SDK's standard retry strategy does not retry it: the
//! client this crate builds its requests on adds a classifier that does, with the SDK's backoff
//! and within its attempts. A refused write changed nothing, so sending it again is safe.

use aws_sdk_dynamodb::config::interceptors::InterceptorContext;
use aws_sdk_dynamodb::config::retry::{ClassifyRetry, RetryAction};
use aws_sdk_dynamodb::error::ProvideErrorMetadata;
use aws_sdk_dynamodb::operation::delete_item::DeleteItemError;
use aws_sdk_dynamodb::operation::put_item::PutItemError;
use aws_sdk_dynamodb::operation::update_item::UpdateItemError;

/// The error DynamoDB answers a single-item write that a transaction in progress conflicts with.
const TRANSACTION_CONFLICT: &str = "TransactionConflictException";

/// `dynamodb`, with single-item writes refused by a transaction in progress retried.
pub(crate) fn retrying_transaction_conflicts(
    dynamodb: aws_sdk_dynamodb::Client,
) -> aws_sdk_dynamodb::Client {
    let config = dynamodb
        .config()
        .to_builder()
        .retry_classifier(TransactionConflicts)
        .build();
    aws_sdk_dynamodb::Client::from_conf(config)
}

/// Classifies `TransactionConflictException` answers of PutItem, UpdateItem and DeleteItem as
/// transient errors.
#[derive(Debug)]
struct TransactionConflicts;

impl ClassifyRetry for TransactionConflicts {
    fn classify_retry(&self, ctx: &InterceptorContext) -> RetryAction {
        let Some(Err(error)) = ctx.output_or_error() else {
            return RetryAction::NoActionIndicated;
        };
        let Some(error) = error.as_operation_error() else {
            return RetryAction::NoActionIndicated;
        };
        let code = error
            .downcast_ref::<PutItemError>()
            .and_then(ProvideErrorMetadata::code)
            .or_else(|| {
                error
                    .downcast_ref::<UpdateItemError>()
                    .and_then(ProvideErrorMetadata::code)
            })
            .or_else(|| {
                error
                    .downcast_ref::<DeleteItemError>()
                    .and_then(ProvideErrorMetadata::code)
            });
        if code == Some(TRANSACTION_CONFLICT) {
            RetryAction::transient_error()
        } else {
            RetryAction::NoActionIndicated
        }
    }

    fn name(&self) -> &'static str {
        "transaction conflicts of single-item writes"
    }
}
