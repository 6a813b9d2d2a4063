//! The `bootstrap` binary: the Lambda function (custom runtime, `provided.al2023`).
//!
//! Configuration comes from the environment (see `ddb_lock_lambda::config::var`); the DynamoDB
//! endpoint, region and credentials from the AWS SDK's usual sources (`AWS_ENDPOINT_URL_DYNAMODB`
//! points it at DynamoDB Local).

// The runtime's future nests the handler's, each operation's, and the AWS SDK's deep futures:
// computing its layout needs more than the default 128 levels.
#![recursion_limit = "256"]

use ddb_lock_lambda::{Config, Handler, JsonGuard};
use lambda_runtime::{layers::TracingLayer, service_fn, LambdaEvent, Runtime};
use serde_json::Value;
use std::sync::Arc;

#[tokio::main]
async fn main() -> Result<(), lambda_runtime::Error> {
    // Text logs, or JSON when the function's log format is JSON (AWS_LAMBDA_LOG_FORMAT).
    lambda_runtime::tracing::init_default_subscriber();
    let config = Config::from_env()?;
    let aws = aws_config::load_defaults(aws_config::BehaviorVersion::latest()).await;
    let dynamodb =
        aws_sdk_dynamodb::Client::from_conf(ddb_lock::with_request_timeouts((&aws).into()).build());
    let client = config.lock_client(dynamodb)?;
    let handler = Arc::new(Handler::new(client, config));
    let service = service_fn(move |event: LambdaEvent<Value>| {
        let handler = Arc::clone(&handler);
        async move { handler.handle(event).await }
    });
    Runtime::new(service)
        .layer(TracingLayer::new())
        .layer(JsonGuard)
        .run()
        .await
}
