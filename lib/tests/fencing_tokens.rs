//! Fencing tokens: strictly increasing per resource across release, expiry, takeover, force
//! release and deletion of the lock item; one request per fenced acquisition; and what they are
//! for: a paused old holder's late write is refused after a new holder wrote.

use aws_sdk_dynamodb::operation::update_item::UpdateItemError;
use aws_sdk_dynamodb::types::AttributeValue;
use chrono::TimeDelta;
use ddb_lock::{AcquireOptions, FencedWrite, FencingToken, Lock, LockClient, ReleaseOutcome};
use ddb_lock_test_kit::proxy::Proxy;
use ddb_lock_test_kit::{
    builder, dynamodb, dynamodb_at, endpoint, fenced_table, lock_client, quickly_retrying_client,
    raw_item, string_attr, unique, OffsetClock, FENCED_TABLE, TABLE,
};
use std::time::Duration;

fn fenced(owner: &str) -> AcquireOptions {
    AcquireOptions::new()
        .owner(owner)
        .lease(Duration::from_secs(60))
        .fencing(true)
}

async fn take(client: &LockClient, resource: &str, owner: &str) -> Lock {
    client
        .try_acquire(resource, &fenced(owner))
        .await
        .unwrap()
        .unwrap_or_else(|| panic!("{resource} should be free for {owner}"))
}

fn token(lock: &Lock) -> FencingToken {
    lock.fencing_token()
        .expect("a fenced acquisition has a token")
}

/// A client whose clock runs an hour ahead: it sees every lock of the others as expired.
fn ahead() -> LockClient {
    builder(dynamodb())
        .clock(OffsetClock::shared(TimeDelta::hours(1)))
        .build()
        .unwrap()
}

#[tokio::test]
async fn fencing_tokens_increase_across_release_expiry_takeover_force_release_and_deletion() {
    let client = lock_client().await;
    let resource = unique("fence-sequence");
    let mut tokens = Vec::new();

    let first = take(&client, &resource, "a").await;
    tokens.push(token(&first));
    client.release(&first).await.unwrap();

    let second = take(&client, &resource, "b").await;
    tokens.push(token(&second));
    // b's lease has ended for a client an hour ahead: expiry and takeover.
    let third = take(&ahead(), &resource, "c").await;
    tokens.push(token(&third));

    client.force_release(&resource).await.unwrap();
    let fourth = take(&client, &resource, "d").await;
    tokens.push(token(&fourth));

    // TTL deletion removes the lock item: delete it as TTL would.
    dynamodb()
        .delete_item()
        .table_name(TABLE)
        .key("PK", AttributeValue::S(format!("LOCK#{resource}")))
        .key("SK", AttributeValue::S("LOCK".into()))
        .send()
        .await
        .unwrap();
    let fifth = take(&client, &resource, "e").await;
    tokens.push(token(&fifth));
    client.release(&fifth).await.unwrap();

    // An unfenced acquisition in between has no token and does not disturb the sequence.
    let unfenced = client
        .try_acquire(&resource, &AcquireOptions::new().owner("f"))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(unfenced.fencing_token(), None);
    client.release(&unfenced).await.unwrap();
    let last = take(&client, &resource, "g").await;
    tokens.push(token(&last));

    assert!(
        tokens.windows(2).all(|pair| pair[0] < pair[1]),
        "tokens must strictly increase: {tokens:?}"
    );
    let item = raw_item(&resource).await.unwrap();
    assert_eq!(
        item["FencingToken"],
        AttributeValue::N(token(&last).to_string())
    );
}

#[tokio::test]
async fn a_paused_old_holders_late_write_is_rejected_after_a_new_holder_wrote() {
    let client = lock_client().await;
    fenced_table().await;
    let resource = unique("fence-paused");
    let register = unique("register");
    let write = |lock: &Lock, value: &str| {
        FencedWrite::new(token(lock))
            .update(
                dynamodb()
                    .update_item()
                    .table_name(FENCED_TABLE)
                    .key("id", AttributeValue::S(register.clone()))
                    .update_expression("SET #v = :v")
                    .expression_attribute_names("#v", "Value")
                    .expression_attribute_values(":v", AttributeValue::S(value.to_owned())),
            )
            .send()
    };

    let old = take(&client, &resource, "old").await;
    write(&old, "old 1").await.expect("the holder writes");
    // The old holder pauses past its lease (as seen by a client an hour ahead); a new holder
    // takes over and writes.
    let new = take(&ahead(), &resource, "new").await;
    assert!(token(&new) > token(&old));
    write(&new, "new 1").await.expect("the new holder writes");

    let late = write(&old, "old 2 (late)").await;
    assert!(
        matches!(
            late.as_ref().map_err(|e| e.as_service_error()),
            Err(Some(UpdateItemError::ConditionalCheckFailedException(_)))
        ),
        "the late write must be refused: {late:?}"
    );
    let item = dynamodb()
        .get_item()
        .table_name(FENCED_TABLE)
        .key("id", AttributeValue::S(register.clone()))
        .consistent_read(true)
        .send()
        .await
        .unwrap()
        .item
        .unwrap();
    assert_eq!(string_attr(&item, "Value"), "new 1");
    // Its late release is refused too, and the new holder's lock stands.
    assert!(matches!(
        client.release(&old).await.unwrap(),
        ReleaseOutcome::NotOwner { .. }
    ));
    let lock_item = raw_item(&resource).await.unwrap();
    assert_eq!(string_attr(&lock_item, "LockID"), new.lock_id().to_string());
}

#[tokio::test]
async fn a_fenced_acquire_is_one_request_and_a_stale_token_guess_costs_one_more() {
    lock_client().await;
    let resource = unique("fence-requests");
    // A client an hour ahead issues tokens an hour "late" in clock microseconds.
    let first = take(&ahead(), &resource, "a").await;
    ahead().release(&first).await.unwrap();

    let proxy = Proxy::start(&endpoint()).await;
    let counted = builder(dynamodb_at(&proxy.endpoint())).build().unwrap();
    let second = take(&counted, &resource, "b").await;
    assert!(token(&second) > token(&first));
    assert_eq!(
        proxy.counts("TransactWriteItems").requests,
        2,
        "one guess from the clock, refused by the fence item, then the next token"
    );
    counted.release(&second).await.unwrap();

    let third = take(&counted, &resource, "c").await;
    assert!(token(&third) > token(&second));
    let transactions = proxy.counts("TransactWriteItems").requests;
    assert_eq!(transactions, 3, "a right guess is one request");
    assert_eq!(proxy.counts("PutItem").requests, 0);
    assert_eq!(proxy.counts("GetItem").requests, 0);
    counted.release(&third).await.unwrap();
}

#[tokio::test]
async fn a_retried_fenced_acquire_whose_first_answer_was_lost_is_acquired() {
    lock_client().await;
    let resource = unique("fence-lost-answer");
    let proxy = Proxy::start(&endpoint()).await;
    let client = quickly_retrying_client(&proxy.endpoint());

    proxy.drop_next_answer("TransactWriteItems");
    let lock = take(&client, &resource, "a").await;

    assert_eq!(proxy.counts("TransactWriteItems").dropped, 1);
    let item = raw_item(&resource).await.unwrap();
    assert_eq!(string_attr(&item, "LockID"), lock.lock_id().to_string());
    assert_eq!(
        item["FencingToken"],
        AttributeValue::N(token(&lock).to_string())
    );
    client.release(&lock).await.unwrap();
}
