//! The shared register each fault-suite critical section works on: one item per resource in the
//! fenced-writes table, holding a counter, its last writer and the highest fencing token.

use crate::check::Register;
use crate::history::Outcome;
use aws_sdk_dynamodb::types::AttributeValue;
use ddb_lock::{FencedOutcome, FencedWrite, FencingToken, FENCE_ATTRIBUTE};
use ddb_lock_test_kit::FENCED_TABLE;

/// The register item's key for `resource`.
fn key(resource: &str) -> AttributeValue {
    AttributeValue::S(format!("register/{resource}"))
}

/// A fenced UpdateItem of the register: `SET Holder = :holder` plus `extra` assignments.
async fn fenced_set(
    dynamodb: &aws_sdk_dynamodb::Client,
    resource: &str,
    holder: &str,
    token: u64,
    counter: Option<u64>,
) -> Outcome {
    let mut update = dynamodb
        .update_item()
        .table_name(FENCED_TABLE)
        .key("id", key(resource))
        .update_expression(match counter {
            Some(_) => "SET Holder = :holder, #counter = :counter",
            None => "SET Holder = :holder",
        })
        .expression_attribute_values(":holder", AttributeValue::S(holder.to_owned()));
    if let Some(counter) = counter {
        update = update
            .expression_attribute_names("#counter", "Counter")
            .expression_attribute_values(":counter", AttributeValue::N(counter.to_string()));
    }
    match FencedWrite::new(FencingToken::new(token))
        .send_update(update)
        .await
    {
        Ok(FencedOutcome::Written(_)) => Outcome::Ok,
        Ok(FencedOutcome::Refused) => Outcome::Fail,
        Ok(FencedOutcome::Unknown) | Err(_) => Outcome::Info,
    }
}

/// Raises the register's fence to `token`, so that older holders' late writes are refused.
pub async fn claim(
    dynamodb: &aws_sdk_dynamodb::Client,
    resource: &str,
    holder: &str,
    token: u64,
) -> Outcome {
    fenced_set(dynamodb, resource, holder, token, None).await
}

/// Writes `counter` to the register, fenced by `token`.
pub async fn write(
    dynamodb: &aws_sdk_dynamodb::Client,
    resource: &str,
    holder: &str,
    token: u64,
    counter: u64,
) -> Outcome {
    fenced_set(dynamodb, resource, holder, token, Some(counter)).await
}

/// Writes `counter` without a fence: the suite's negative control, which must lose updates.
pub async fn write_unfenced(
    dynamodb: &aws_sdk_dynamodb::Client,
    resource: &str,
    holder: &str,
    counter: u64,
) -> Outcome {
    let result = dynamodb
        .update_item()
        .table_name(FENCED_TABLE)
        .key("id", key(resource))
        .update_expression("SET Holder = :holder, #counter = :counter")
        .expression_attribute_names("#counter", "Counter")
        .expression_attribute_values(":holder", AttributeValue::S(holder.to_owned()))
        .expression_attribute_values(":counter", AttributeValue::N(counter.to_string()))
        .send()
        .await;
    if result.is_ok() {
        Outcome::Ok
    } else {
        Outcome::Info
    }
}

/// Reads the register (strongly consistent); `None` on an error.
pub async fn read(dynamodb: &aws_sdk_dynamodb::Client, resource: &str) -> Option<Register> {
    let item = dynamodb
        .get_item()
        .table_name(FENCED_TABLE)
        .key("id", key(resource))
        .consistent_read(true)
        .send()
        .await
        .ok()?
        .item
        .unwrap_or_default();
    let number = |name: &str| match item.get(name) {
        Some(AttributeValue::N(n)) => n.parse().ok(),
        _ => None,
    };
    Some(Register {
        counter: number("Counter"),
        token: number(FENCE_ATTRIBUTE),
        holder: match item.get("Holder") {
            Some(AttributeValue::S(s)) => Some(s.clone()),
            _ => None,
        },
    })
}
