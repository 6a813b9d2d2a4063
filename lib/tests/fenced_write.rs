//! Fenced writes to an item of the caller's own: DynamoDB refuses a write whose fencing token is
//! lower than the highest token that has written the item.

use aws_sdk_dynamodb::error::SdkError;
use aws_sdk_dynamodb::operation::delete_item::DeleteItemError;
use aws_sdk_dynamodb::operation::put_item::PutItemError;
use aws_sdk_dynamodb::operation::update_item::UpdateItemError;
use aws_sdk_dynamodb::types::AttributeValue;
use ddb_lock::{
    FencedOutcome, FencedWrite, FencingToken, TombstonePurge, FENCE_ATTRIBUTE, TOMBSTONE_ATTRIBUTE,
};
use ddb_lock_test_kit::proxy::Proxy;
use ddb_lock_test_kit::{
    dynamodb, endpoint, fenced_table, quickly_retrying_dynamodb, unique, FENCED_TABLE,
};
use std::collections::HashMap;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

fn key(id: &str) -> AttributeValue {
    AttributeValue::S(id.to_owned())
}

fn n(value: u64) -> AttributeValue {
    AttributeValue::N(value.to_string())
}

fn fence(token: u64) -> FencedWrite {
    FencedWrite::new(FencingToken::new(token))
}

/// The item, read strongly consistently.
async fn item(id: &str) -> Option<HashMap<String, AttributeValue>> {
    dynamodb()
        .get_item()
        .table_name(FENCED_TABLE)
        .key("id", key(id))
        .consistent_read(true)
        .send()
        .await
        .expect("GetItem")
        .item
}

/// A number attribute of the item, which must exist.
async fn number(id: &str, attribute: &str) -> u64 {
    let item = item(id)
        .await
        .unwrap_or_else(|| panic!("item {id} is missing"));
    match item.get(attribute) {
        Some(AttributeValue::N(v)) => v.parse().unwrap(),
        other => panic!("attribute {attribute} of {id} is {other:?}, expected a number"),
    }
}

/// Sets the item's balance with a fenced UpdateItem.
async fn set_balance(
    id: &str,
    token: u64,
    balance: u64,
) -> Result<(), SdkError<UpdateItemError, aws_sdk_dynamodb::config::http::HttpResponse>> {
    fence(token)
        .update(
            dynamodb()
                .update_item()
                .table_name(FENCED_TABLE)
                .key("id", key(id))
                .update_expression("SET balance = :b")
                .expression_attribute_values(":b", n(balance)),
        )
        .send()
        .await
        .map(|_| ())
}

fn is_update_refused<R>(err: &SdkError<UpdateItemError, R>) -> bool {
    matches!(
        err.as_service_error(),
        Some(UpdateItemError::ConditionalCheckFailedException(_))
    )
}

fn is_put_refused<R>(err: &SdkError<PutItemError, R>) -> bool {
    matches!(
        err.as_service_error(),
        Some(PutItemError::ConditionalCheckFailedException(_))
    )
}

fn is_delete_refused<R>(err: &SdkError<DeleteItemError, R>) -> bool {
    matches!(
        err.as_service_error(),
        Some(DeleteItemError::ConditionalCheckFailedException(_))
    )
}

#[tokio::test]
async fn a_write_with_a_lower_token_is_rejected_after_a_higher_token_wrote() {
    fenced_table().await;
    let id = unique("account");

    set_balance(&id, 7, 10).await.expect("token 7 writes first");
    let err = set_balance(&id, 6, 99)
        .await
        .expect_err("token 6 must be refused after token 7 wrote");

    assert!(is_update_refused(&err), "unexpected error: {err:?}");
    assert_eq!(number(&id, "balance").await, 10);
    assert_eq!(number(&id, FENCE_ATTRIBUTE).await, 7);
}

#[tokio::test]
async fn the_same_token_may_write_again() {
    fenced_table().await;
    let id = unique("account");

    set_balance(&id, 7, 10).await.expect("first write");
    set_balance(&id, 7, 20)
        .await
        .expect("second write, same token");

    assert_eq!(number(&id, "balance").await, 20);
    assert_eq!(number(&id, FENCE_ATTRIBUTE).await, 7);
}

#[tokio::test]
async fn a_higher_token_overwrites_and_raises_the_fence() {
    fenced_table().await;
    let id = unique("account");

    set_balance(&id, 7, 10).await.expect("token 7");
    set_balance(&id, 8, 20)
        .await
        .expect("token 8 after token 7");
    let err = set_balance(&id, 7, 30)
        .await
        .expect_err("token 7 must be refused after token 8 wrote");

    assert!(is_update_refused(&err), "unexpected error: {err:?}");
    assert_eq!(number(&id, "balance").await, 20);
    assert_eq!(number(&id, FENCE_ATTRIBUTE).await, 8);
}

#[tokio::test]
async fn a_stale_put_is_rejected() {
    fenced_table().await;
    let id = unique("account");
    let put = |token: u64, balance: u64| {
        fence(token).put(
            dynamodb()
                .put_item()
                .table_name(FENCED_TABLE)
                .item("id", key(&id))
                .item("balance", n(balance)),
        )
    };

    put(3, 10).send().await.expect("token 3 puts first");
    let err = put(2, 99)
        .send()
        .await
        .expect_err("token 2 must be refused after token 3 wrote");

    assert!(is_put_refused(&err), "unexpected error: {err:?}");
    assert_eq!(number(&id, "balance").await, 10);
    assert_eq!(number(&id, FENCE_ATTRIBUTE).await, 3);
}

#[tokio::test]
async fn a_fenced_put_keeps_the_callers_own_condition() {
    fenced_table().await;
    let id = unique("account");
    let put = |token: u64, required_state: &str, balance: u64| {
        fence(token).put(
            dynamodb()
                .put_item()
                .table_name(FENCED_TABLE)
                .item("id", key(&id))
                .item("State", AttributeValue::S("closed".into()))
                .item("balance", n(balance))
                .condition_expression("attribute_not_exists(id) OR #state = :required")
                .expression_attribute_names("#state", "State")
                .expression_attribute_values(":required", AttributeValue::S(required_state.into())),
        )
    };

    put(1, "closed", 10).send().await.expect("first put");
    let err = put(5, "open", 99)
        .send()
        .await
        .expect_err("the caller's condition fails, whatever the token");
    assert!(is_put_refused(&err), "unexpected error: {err:?}");
    assert_eq!(number(&id, "balance").await, 10);
    assert_eq!(number(&id, FENCE_ATTRIBUTE).await, 1);

    put(5, "closed", 20)
        .send()
        .await
        .expect("both the caller's condition and the fence hold");
    assert_eq!(number(&id, "balance").await, 20);
    assert_eq!(number(&id, FENCE_ATTRIBUTE).await, 5);
}

#[tokio::test]
async fn a_fenced_update_keeps_the_callers_other_clauses_and_custom_attribute() {
    fenced_table().await;
    let id = unique("account");
    dynamodb()
        .put_item()
        .table_name(FENCED_TABLE)
        .item("id", key(&id))
        .item("obsolete", AttributeValue::S("x".into()))
        .item("count", n(1))
        .send()
        .await
        .expect("unfenced seed");
    let update = |token: u64| {
        fence(token).attribute("Fence").update(
            dynamodb()
                .update_item()
                .table_name(FENCED_TABLE)
                .key("id", key(&id))
                .update_expression("REMOVE obsolete ADD #count :one set balance = :b")
                .expression_attribute_names("#count", "count")
                .expression_attribute_values(":one", n(1))
                .expression_attribute_values(":b", n(token * 10)),
        )
    };

    update(4).send().await.expect("the first fenced write");
    let err = update(3).send().await.expect_err("token 3 after token 4");

    assert!(is_update_refused(&err), "unexpected error: {err:?}");
    let stored = item(&id).await.expect("item");
    assert!(
        !stored.contains_key("obsolete"),
        "REMOVE applied: {stored:?}"
    );
    assert!(!stored.contains_key(FENCE_ATTRIBUTE), "{stored:?}");
    assert_eq!(number(&id, "count").await, 2);
    assert_eq!(number(&id, "balance").await, 40);
    assert_eq!(number(&id, "Fence").await, 4);
}

/// Regression test for a fenced delete that erased the fence: with the former fenced DeleteItem
/// the item and its token were gone, so the stale holder's put below passed
/// `attribute_not_exists(fence)` and recreated the item.
#[tokio::test]
async fn a_fenced_delete_keeps_the_fence_so_a_stale_holder_cannot_recreate_the_item() {
    fenced_table().await;
    let id = unique("account");
    let tombstone = |token: u64| {
        let key_only = dynamodb()
            .put_item()
            .table_name(FENCED_TABLE)
            .item("id", key(&id));
        async move { fence(token).send_tombstone(key_only).await }
    };
    let put = |token: u64| {
        let put = dynamodb()
            .put_item()
            .table_name(FENCED_TABLE)
            .item("id", key(&id))
            .item("balance", n(99));
        async move { fence(token).send_put(put).await }
    };

    set_balance(&id, 3, 10).await.expect("token 3 writes");
    assert_eq!(
        tombstone(2).await.unwrap(),
        FencedOutcome::Refused,
        "token 2 must not delete token 3's write"
    );
    assert_eq!(number(&id, "balance").await, 10);

    assert!(
        tombstone(4).await.unwrap().is_written(),
        "the newer holder deletes"
    );
    let stored = item(&id).await.expect("a tombstone");
    assert_eq!(
        stored.get(TOMBSTONE_ATTRIBUTE),
        Some(&AttributeValue::Bool(true))
    );
    assert!(!stored.contains_key("balance"), "{stored:?}");
    assert_eq!(number(&id, FENCE_ATTRIBUTE).await, 4);

    assert_eq!(
        put(3).await.unwrap(),
        FencedOutcome::Refused,
        "the superseded holder's late write after the delete"
    );
    assert!(
        set_balance(&id, 3, 11).await.is_err(),
        "and its late update"
    );
    assert!(item(&id).await.unwrap().contains_key(TOMBSTONE_ATTRIBUTE));
    assert!(
        put(5).await.unwrap().is_written(),
        "a newer holder recreates it"
    );
    let stored = item(&id).await.unwrap();
    assert!(!stored.contains_key(TOMBSTONE_ATTRIBUTE), "{stored:?}");
    assert_eq!(number(&id, "balance").await, 99);
}

#[tokio::test]
async fn a_tombstone_is_purged_only_once_its_token_is_older_than_the_bound() {
    fenced_table().await;
    let purge = |id: &str, older_than: Duration| {
        TombstonePurge::new(older_than)
            .delete(
                dynamodb()
                    .delete_item()
                    .table_name(FENCED_TABLE)
                    .key("id", key(id)),
            )
            .send()
    };
    let micros_ago = |ago: Duration| {
        (SystemTime::now().duration_since(UNIX_EPOCH).unwrap() - ago).as_micros() as u64
    };
    let (old, recent, live) = (unique("old"), unique("recent"), unique("live"));
    for (id, token) in [
        (&old, micros_ago(Duration::from_secs(2 * 3600))),
        (&recent, micros_ago(Duration::from_secs(60))),
    ] {
        let tombstone = fence(token).tombstone(
            dynamodb()
                .put_item()
                .table_name(FENCED_TABLE)
                .item("id", key(id)),
        );
        tombstone.send().await.unwrap();
    }
    set_balance(&live, micros_ago(Duration::from_secs(2 * 3600)), 1)
        .await
        .unwrap();

    let hour = Duration::from_secs(3600);
    purge(&old, hour).await.expect("an old tombstone goes");
    assert_eq!(item(&old).await, None);
    let kept = purge(&recent, hour)
        .await
        .expect_err("a recent tombstone stays");
    assert!(is_delete_refused(&kept), "unexpected error: {kept:?}");
    assert!(item(&recent).await.is_some());
    let kept = purge(&live, hour)
        .await
        .expect_err("a live item is no tombstone");
    assert!(is_delete_refused(&kept), "unexpected error: {kept:?}");
    assert_eq!(number(&live, "balance").await, 1);
}

/// A fenced `SET balance` through `dynamodb`, sent with `send_update`.
async fn send_balance(
    dynamodb: &aws_sdk_dynamodb::Client,
    id: &str,
    token: u64,
    balance: u64,
) -> FencedOutcome<()> {
    let outcome = fence(token)
        .send_update(
            dynamodb
                .update_item()
                .table_name(FENCED_TABLE)
                .key("id", key(id))
                .update_expression("SET balance = :b")
                .expression_attribute_values(":b", n(balance)),
        )
        .await
        .expect("the endpoint answers");
    match outcome {
        FencedOutcome::Written(_) => FencedOutcome::Written(()),
        FencedOutcome::Refused => FencedOutcome::Refused,
        FencedOutcome::Unknown => FencedOutcome::Unknown,
    }
}

#[tokio::test]
async fn send_update_reports_written_and_refused() {
    fenced_table().await;
    let id = unique("send-update");
    assert_eq!(
        send_balance(&dynamodb(), &id, 7, 70).await,
        FencedOutcome::Written(())
    );
    assert_eq!(
        send_balance(&dynamodb(), &id, 6, 60).await,
        FencedOutcome::Refused
    );
    assert_eq!(number(&id, "balance").await, 70);
}

// Found by the fault suite: a fenced write whose answer was lost, retried by the SDK after a newer
// holder wrote, was refused, and reported refused although its first attempt had been applied.
#[tokio::test]
async fn a_refused_retry_of_a_fenced_write_whose_first_attempt_applied_is_unknown() {
    fenced_table().await;
    let id = unique("retried-fenced-write");
    let proxy = Proxy::start(&endpoint()).await;
    let through_proxy = quickly_retrying_dynamodb(&proxy.endpoint());

    // The old holder's write (token 7) is applied; while its answer is withheld, a newer holder
    // (token 8) writes; then the old holder's SDK retries and is refused.
    let mut answer = proxy.withhold_next_answer("UpdateItem");
    let old_id = id.clone();
    let old = tokio::spawn(async move { send_balance(&through_proxy, &old_id, 7, 70).await });
    answer.applied().await;
    assert_eq!(
        send_balance(&dynamodb(), &id, 8, 80).await,
        FencedOutcome::Written(())
    );
    answer.drop_it();

    assert_eq!(
        old.await.unwrap(),
        FencedOutcome::Unknown,
        "the first attempt was applied: the write must not be reported refused"
    );
    assert_eq!(proxy.counts("UpdateItem").requests, 2);
    assert_eq!(number(&id, "balance").await, 80);
}

/// A newer holder's fenced update of a deleted item (a tombstone) writes the item again: the
/// tombstone marker goes. It stayed, readers took the newer holder's write for absent, and a
/// purge of old tombstones deleted the live item with its data and its fence.
#[tokio::test]
async fn a_fenced_update_of_a_tombstone_writes_the_item_again() {
    fenced_table().await;
    let id = unique("revived");
    let token = (SystemTime::now().duration_since(UNIX_EPOCH).unwrap()
        - Duration::from_secs(2 * 3600))
    .as_micros() as u64;
    fence(token)
        .tombstone(
            dynamodb()
                .put_item()
                .table_name(FENCED_TABLE)
                .item("id", key(&id)),
        )
        .send()
        .await
        .unwrap();
    set_balance(&id, token + 1, 12)
        .await
        .expect("the newer holder writes");
    let stored = item(&id).await.expect("the item");
    assert!(!stored.contains_key(TOMBSTONE_ATTRIBUTE), "{stored:?}");
    assert_eq!(number(&id, "balance").await, 12);
    let purged = TombstonePurge::new(Duration::from_secs(3600))
        .delete(
            dynamodb()
                .delete_item()
                .table_name(FENCED_TABLE)
                .key("id", key(&id)),
        )
        .send()
        .await
        .expect_err("a live item is no tombstone");
    assert!(is_delete_refused(&purged), "unexpected error: {purged:?}");
    assert_eq!(number(&id, "balance").await, 12);
}
