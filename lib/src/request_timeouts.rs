//! Timeouts for the DynamoDB client under a lock client. The SDK sets none on a request's
//! attempt by default, and a request stuck on a connection that never answers (half open after a
//! network blip) holds its caller forever: an AWS Lambda function runs into its own timeout and
//! its caller gets no stable error name, a command line hangs, and a release or an extension is
//! never sent again. With an attempt timeout the SDK gives such an attempt up and sends the
//! request again, which the lock client reads as a resend (an attempt given up may have been
//! applied), as it reads every SDK retry.

use aws_sdk_dynamodb::config::timeout::TimeoutConfig;
use aws_sdk_dynamodb::config::Builder;
use std::time::Duration;

/// How long one attempt of a request may take before the SDK gives it up and tries again: far
/// beyond what DynamoDB takes to answer (milliseconds; a transaction of 100 items, tens), so that
/// only a stuck attempt reaches it.
pub const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(5);

/// How long connecting to DynamoDB may take (the SDK's own default).
pub const CONNECT_TIMEOUT: Duration = Duration::from_millis(3_100);

/// `config` with an attempt timeout of [`ATTEMPT_TIMEOUT`] and a connect timeout of
/// [`CONNECT_TIMEOUT`], for the DynamoDB client a [`LockClient`](crate::LockClient) is built
/// over: the Lambda function and the command line build theirs so.
///
/// # Examples
///
/// ```no_run
/// # async fn run() -> Result<(), ddb_lock::Error> {
/// let aws = aws_config::load_defaults(aws_config::BehaviorVersion::latest()).await;
/// let dynamodb = aws_sdk_dynamodb::Client::from_conf(
///     ddb_lock::with_request_timeouts((&aws).into()).build(),
/// );
/// let client = ddb_lock::LockClient::builder(dynamodb)
///     .table_name("locks")
///     .build()?;
/// # Ok(()) }
/// ```
pub fn with_request_timeouts(config: Builder) -> Builder {
    config.timeout_config(
        TimeoutConfig::builder()
            .operation_attempt_timeout(ATTEMPT_TIMEOUT)
            .connect_timeout(CONNECT_TIMEOUT)
            .build(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_client_so_built_gives_up_a_stuck_attempt() {
        let config = with_request_timeouts(Builder::new()).build();
        let timeouts = config.timeout_config().expect("a timeout configuration");
        assert_eq!(timeouts.operation_attempt_timeout(), Some(ATTEMPT_TIMEOUT));
        assert_eq!(timeouts.connect_timeout(), Some(CONNECT_TIMEOUT));
    }
}
