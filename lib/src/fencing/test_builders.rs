//! Request builders and expression maps for the fencing module's unit tests.

use aws_sdk_dynamodb::types::AttributeValue;
use std::collections::HashMap;

/// A client that is never sent anything: its builders are only inspected.
pub(super) fn client() -> aws_sdk_dynamodb::Client {
    aws_sdk_dynamodb::Client::from_conf(
        aws_sdk_dynamodb::Config::builder()
            .behavior_version_latest()
            .region(aws_sdk_dynamodb::config::Region::new("us-east-1"))
            .build(),
    )
}

/// Expression attribute names as the SDK's builders hold them.
pub(super) fn names(pairs: &[(&str, &str)]) -> Option<HashMap<String, String>> {
    Some(
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
    )
}

/// Expression attribute values as the SDK's builders hold them.
pub(super) fn values(pairs: &[(&str, AttributeValue)]) -> Option<HashMap<String, AttributeValue>> {
    Some(
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.clone()))
            .collect(),
    )
}

/// A number attribute value.
pub(super) fn n(value: &str) -> AttributeValue {
    AttributeValue::N(value.into())
}
