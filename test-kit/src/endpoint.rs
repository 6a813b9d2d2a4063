//! The endpoint under test, named by `DYNAMODB_ENDPOINT` (set by `scripts/test.sh`, or exported
//! after `scripts/dynamodb-local.sh start`), and SDK clients for it or for a proxy in front of it.

use aws_sdk_dynamodb::config::retry::RetryConfig;
use aws_sdk_dynamodb::config::{Credentials, Region};
use std::time::Duration;

/// The endpoint under test. Panics, saying how to start one, when `DYNAMODB_ENDPOINT` is not set.
pub fn endpoint() -> String {
    std::env::var("DYNAMODB_ENDPOINT").expect(
        "DYNAMODB_ENDPOINT is not set: run the tests through scripts/test.sh, or start an endpoint \
         with scripts/dynamodb-local.sh start and export DYNAMODB_ENDPOINT",
    )
}

/// An SDK client for the endpoint under test.
pub fn dynamodb() -> aws_sdk_dynamodb::Client {
    dynamodb_at(&endpoint())
}

/// An SDK client for `endpoint` with dummy credentials, and the SDK's default retries.
pub fn dynamodb_at(endpoint: &str) -> aws_sdk_dynamodb::Client {
    dynamodb_with(endpoint, |b| b)
}

/// An SDK client for `endpoint` (dummy credentials, region `us-east-1`), further configured by
/// `configure`.
pub fn dynamodb_with(
    endpoint: &str,
    configure: impl FnOnce(aws_sdk_dynamodb::config::Builder) -> aws_sdk_dynamodb::config::Builder,
) -> aws_sdk_dynamodb::Client {
    let config = aws_sdk_dynamodb::Config::builder()
        .behavior_version_latest()
        .region(Region::new("us-east-1"))
        .credentials_provider(Credentials::new("test", "test", None, None, "tests"))
        .endpoint_url(endpoint);
    aws_sdk_dynamodb::Client::from_conf(configure(config).build())
}

/// An SDK client for `endpoint` (usually a fault-injecting proxy) whose requests the SDK retries
/// quickly: three attempts, 10 ms initial backoff.
pub fn quickly_retrying_dynamodb(endpoint: &str) -> aws_sdk_dynamodb::Client {
    dynamodb_with(endpoint, |config| {
        config.retry_config(
            RetryConfig::standard()
                .with_max_attempts(3)
                .with_initial_backoff(Duration::from_millis(10)),
        )
    })
}
