//! Fair locks against the local endpoint: waiters with clients of their own are granted in the
//! order they joined; the holder's release hands over in one more request; `status` lists the
//! line; a waiter that times out or whose future is dropped leaves it (and releases a lock granted
//! as it went); a lapsed holder's lock goes to the first in line; a waiter whose deadline is gone
//! is passed over; lost answers of a join and of a grant are recognised; bad input names the
//! option.

mod hand_over;
mod leaving;
mod lost_answers;
mod options;
mod resent_joins;

use ddb_lock::{AcquireOptions, Error, Lock, LockClient, LockStatus, QueuedWaiter};
use ddb_lock_test_kit::{dynamodb, lock_client, TABLE};
use std::time::Duration;
use tokio::sync::mpsc;

const LEASE: Duration = Duration::from_secs(60);
const TIMEOUT: Duration = Duration::from_secs(60);

fn fair(owner: &str) -> AcquireOptions {
    AcquireOptions::new()
        .owner(owner)
        .lease(LEASE)
        .timeout(TIMEOUT)
        .fair(true)
}

/// A client of its own that keeps released items (`delete_on_release(false)`) if `keeping`, else
/// deletes them.
fn client_keeping(keeping: bool) -> LockClient {
    ddb_lock_test_kit::builder(dynamodb())
        .delete_on_release(!keeping)
        .build()
        .unwrap()
}

/// The line of `resource` as `status` shows it (empty unless held).
async fn line(client: &LockClient, resource: &str) -> Vec<QueuedWaiter> {
    match client.status(resource).await.expect("status") {
        LockStatus::Held { queue, .. } => queue,
        _ => Vec::new(),
    }
}

/// Waits until `resource`'s line is `owners`, in that order.
async fn line_becomes(client: &LockClient, resource: &str, owners: &[&str]) {
    loop {
        let line = line(client, resource).await;
        let now: Vec<&str> = line.iter().map(|w| w.owner.as_str()).collect();
        if now == owners {
            return;
        }
        tokio::task::yield_now().await;
    }
}

/// A waiter with a client of its own, in a task: it sends its owner name once it holds the lock,
/// then the lock.
fn spawn_waiter(
    resource: &str,
    owner: &str,
    opts: AcquireOptions,
    granted: mpsc::UnboundedSender<(String, Lock, LockClient)>,
) -> tokio::task::JoinHandle<Result<(), Error>> {
    let (resource, owner) = (resource.to_owned(), owner.to_owned());
    tokio::spawn(async move {
        let client = lock_client().await;
        let lock = client.acquire(&resource, &opts).await?;
        let _ = granted.send((owner, lock, client));
        Ok(())
    })
}

/// `middle` joins the line behind `first`'s lock: its acquisition, in a task.
async fn join_as_middle(
    first: &LockClient,
    middle: &LockClient,
    resource: &str,
) -> tokio::task::JoinHandle<Result<Lock, Error>> {
    let acquiring = {
        let (middle, resource) = (middle.clone(), resource.to_owned());
        tokio::spawn(async move { middle.acquire(&resource, &fair("middle")).await })
    };
    line_becomes(first, resource, &["middle"]).await;
    acquiring
}

/// Puts in `resource`'s line a waiter that vanished without leaving (its process died): its entry
/// stays, with its deadline, which is already gone. Its `LockID`.
async fn add_dead_waiter(resource: &str) -> String {
    add_dead_waiters(resource, 1).await.remove(0)
}

/// Puts `n` waiters that vanished without leaving at the end of `resource`'s line, forty to a
/// request. Their `LockID`s.
async fn add_dead_waiters(resource: &str, n: usize) -> Vec<String> {
    use aws_sdk_dynamodb::types::AttributeValue;
    let dead: Vec<String> = (0..n).map(|_| uuid::Uuid::new_v4().to_string()).collect();
    let now = chrono::Utc::now();
    let s = |value: String| AttributeValue::S(value);
    for chunk in dead.chunks(40) {
        let mut update = dynamodb()
            .update_item()
            .table_name(TABLE)
            .key("PK", s(format!("LOCK#{resource}")))
            .key("SK", s("LOCK".into()))
            .expression_attribute_names("#queue", "Queue")
            .expression_attribute_values(
                ":line",
                AttributeValue::L(chunk.iter().map(|id| s(id.clone())).collect()),
            )
            .expression_attribute_values(":empty", AttributeValue::L(Vec::new()));
        let mut set = vec!["#queue = list_append(if_not_exists(#queue, :empty), :line)".to_owned()];
        for (i, id) in chunk.iter().enumerate() {
            let entry = AttributeValue::M(
                [
                    ("LockID".to_owned(), s(id.clone())),
                    ("Owner".to_owned(), s("dead".to_owned())),
                    ("AcquiredAt".to_owned(), s(ddb_lock::timestamp::format(now))),
                    (
                        "ExpiresAt".to_owned(),
                        s(ddb_lock::timestamp::format(
                            now - chrono::TimeDelta::seconds(1),
                        )),
                    ),
                    ("LeaseMs".to_owned(), AttributeValue::N("60000".to_owned())),
                ]
                .into(),
            );
            set.push(format!("#e{i} = :e{i}"));
            update = update
                .expression_attribute_names(format!("#e{i}"), format!("Queued:{id}"))
                .expression_attribute_values(format!(":e{i}"), entry);
        }
        update
            .update_expression(format!("SET {}", set.join(", ")))
            .send()
            .await
            .unwrap();
    }
    dead
}

/// Makes `resource`'s item what a reader's acquisition of its lapsed lock leaves (shared
/// acquisitions do not look at the line): no exclusive holder, one shared entry whose lease ends
/// at `expires_at`. The reader's lock id.
pub(crate) async fn reader_took_the_lapsed_lock(
    resource: &str,
    expires_at: chrono::DateTime<chrono::Utc>,
) -> String {
    use aws_sdk_dynamodb::types::AttributeValue;
    let reader = uuid::Uuid::new_v4().to_string();
    let acquired_at =
        ddb_lock::timestamp::format(chrono::Utc::now() - chrono::TimeDelta::seconds(2));
    let s = |value: &str| AttributeValue::S(value.to_owned());
    let entry = AttributeValue::M(
        [
            ("LockID".to_owned(), s(&reader)),
            ("Owner".to_owned(), s("reader")),
            ("AcquiredAt".to_owned(), s(&acquired_at)),
            (
                "ExpiresAt".to_owned(),
                s(&ddb_lock::timestamp::format(expires_at)),
            ),
            ("Version".to_owned(), s("v")),
            ("LeaseMs".to_owned(), AttributeValue::N("1000".to_owned())),
        ]
        .into(),
    );
    dynamodb()
        .update_item()
        .table_name(ddb_lock_test_kit::TABLE)
        .key("PK", s(&format!("LOCK#{resource}")))
        .key("SK", s("LOCK"))
        .update_expression(
            "REMOVE #owner, #acquired_at, #expires_at, #lease_ms ADD #shared :ids SET #entry = :entry",
        )
        .expression_attribute_names("#owner", "Owner")
        .expression_attribute_names("#acquired_at", "AcquiredAt")
        .expression_attribute_names("#expires_at", "ExpiresAt")
        .expression_attribute_names("#lease_ms", "LeaseMs")
        .expression_attribute_names("#shared", "Shared")
        .expression_attribute_names("#entry", format!("Shared:{reader}"))
        .expression_attribute_values(":ids", AttributeValue::Ss(vec![reader.clone()]))
        .expression_attribute_values(":entry", entry)
        .send()
        .await
        .unwrap();
    reader
}
