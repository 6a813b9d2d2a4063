//! Fair locks with fencing tokens, against the local endpoint: a fenced waiter's grant issues
//! its token in the same transaction that raises the fence item, so tokens follow the order of
//! the line (waiters that are not fenced get none in between); a stale guess of the granter is
//! refused by the fence alone and sent again above it; a grant whose answer was lost is still the
//! hand-over; a lapsed holder's lock granted by the waiter itself carries a token.

use aws_sdk_dynamodb::types::AttributeValue;
use ddb_lock::{
    AcquireOptions, FencingToken, Lock, LockClient, LockStatus, ReleaseOutcome, TableSchema,
};
use ddb_lock_test_kit::proxy::Proxy;
use ddb_lock_test_kit::schemas::raw_item_at;
use ddb_lock_test_kit::{
    dynamodb, endpoint, lock_client, quickly_retrying_client, raw_item, unique, TABLE,
};
use std::time::Duration;
use tokio::sync::mpsc;

const LEASE: Duration = Duration::from_secs(60);

fn fair(owner: &str, fencing: bool) -> AcquireOptions {
    AcquireOptions::new()
        .owner(owner)
        .lease(LEASE)
        .timeout(Duration::from_secs(60))
        .fair(true)
        .fencing(fencing)
}

/// The fencing token stored in `item`, if any.
fn stored_token(item: &std::collections::HashMap<String, AttributeValue>) -> Option<u64> {
    match item.get("FencingToken") {
        Some(AttributeValue::N(n)) => Some(n.parse().expect("a number")),
        None => None,
        Some(other) => panic!("FencingToken is {other:?}"),
    }
}

/// The token in `resource`'s fence item.
async fn fence_token(resource: &str) -> Option<u64> {
    let fence = raw_item_at(TABLE, TableSchema::default().fence_key(resource)).await?;
    stored_token(&fence)
}

fn token(lock: &Lock) -> u64 {
    lock.fencing_token()
        .map(FencingToken::value)
        .expect("a fenced grant has a token")
}

/// Waits until `resource`'s line is `owners`, in that order.
async fn line_becomes(client: &LockClient, resource: &str, owners: &[&str]) {
    loop {
        let now: Vec<String> = match client.status(resource).await.expect("status") {
            LockStatus::Held { queue, .. } => queue.into_iter().map(|w| w.owner).collect(),
            _ => Vec::new(),
        };
        if now == owners {
            return;
        }
        tokio::task::yield_now().await;
    }
}

/// A waiter with a client of its own, in a task: sends its lock and client once granted.
fn spawn_waiter(
    resource: &str,
    opts: AcquireOptions,
    granted: mpsc::UnboundedSender<(Lock, LockClient)>,
) -> tokio::task::JoinHandle<()> {
    let resource = resource.to_owned();
    tokio::spawn(async move {
        let client = lock_client().await;
        let lock = client.acquire(&resource, &opts).await.expect("granted");
        let _ = granted.send((lock, client));
    })
}

/// A fenced fair holder (through a proxy) and one fenced waiter in line behind it.
struct Line {
    resource: String,
    proxy: Proxy,
    holder: LockClient,
    first: Lock,
    granted: mpsc::UnboundedReceiver<(Lock, LockClient)>,
    task: tokio::task::JoinHandle<()>,
}

async fn fenced_holder_and_waiter() -> Line {
    let _ = lock_client().await; // the table
    let resource = unique("fair-fenced");
    let proxy = Proxy::start(&endpoint()).await;
    let holder = quickly_retrying_client(&proxy.endpoint());
    let first = holder
        .acquire(&resource, &fair("holder", true))
        .await
        .unwrap();
    let (granted_tx, granted) = mpsc::unbounded_channel();
    let task = spawn_waiter(&resource, fair("next", true), granted_tx);
    line_becomes(&holder, &resource, &["next"]).await;
    Line {
        resource,
        proxy,
        holder,
        first,
        granted,
        task,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fenced_waiters_get_tokens_in_the_order_of_the_line() {
    let holder = lock_client().await;
    let resource = unique("fair-fenced");
    // Uncontended: the fenced acquisition's transaction, with the line's clause.
    let first = holder
        .acquire(&resource, &fair("holder", true))
        .await
        .unwrap();
    let mut last_token = token(&first);
    assert_eq!(fence_token(&resource).await, Some(last_token));

    let waiters = [("w0", true), ("w1", false), ("w2", true), ("w3", true)];
    let (granted_tx, mut granted) = mpsc::unbounded_channel();
    let mut tasks = Vec::new();
    for (i, (owner, fencing)) in waiters.iter().enumerate() {
        tasks.push(spawn_waiter(
            &resource,
            fair(owner, *fencing),
            granted_tx.clone(),
        ));
        let owners: Vec<&str> = waiters[..=i].iter().map(|(o, _)| *o).collect();
        line_becomes(&holder, &resource, &owners).await;
    }
    assert_eq!(
        holder.release(&first).await.unwrap(),
        ReleaseOutcome::Released
    );
    for (owner, fencing) in waiters {
        let (lock, client) = granted.recv().await.expect("a grant");
        assert_eq!(lock.owner(), owner, "granted in the order of the line");
        let item = raw_item(&resource).await.expect("held");
        if fencing {
            let issued = token(&lock);
            assert!(issued > last_token, "{owner}: {issued} after {last_token}");
            assert_eq!(stored_token(&item), Some(issued), "{owner}'s lock item");
            assert_eq!(
                fence_token(&resource).await,
                Some(issued),
                "{owner}'s fence"
            );
            last_token = issued;
        } else {
            assert_eq!(lock.fencing_token(), None, "{owner} asked for none");
            assert_eq!(stored_token(&item), None, "{owner}'s lock item");
            assert_eq!(fence_token(&resource).await, Some(last_token));
        }
        assert_eq!(
            client.release(&lock).await.unwrap(),
            ReleaseOutcome::Released
        );
    }
    for task in tasks {
        task.await.unwrap();
    }
    assert_eq!(raw_item(&resource).await, None);

    // A fenced acquisition that is not fair continues the sequence; so does a guard's.
    let after = holder
        .acquire(&resource, &AcquireOptions::new().lease(LEASE).fencing(true))
        .await
        .unwrap();
    assert!(token(&after) > last_token);
    holder.release(&after).await.unwrap();
    let guard = holder
        .lock(&resource, &fair("guarded", true))
        .await
        .unwrap();
    assert!(guard.fencing_token().unwrap().value() > token(&after));
    guard.release().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stale_token_guess_of_a_grant_is_sent_again_above_the_fence() {
    let Line {
        resource,
        proxy,
        holder,
        first,
        mut granted,
        task,
    } = fenced_holder_and_waiter().await;
    // Tokens were issued meanwhile far beyond the holder's clock (another process's, say).
    let raised = token(&first) + 3_600_000_000;
    dynamodb()
        .update_item()
        .table_name(TABLE)
        .set_key(Some(TableSchema::default().fence_key(&resource)))
        .update_expression("SET FencingToken = :t")
        .expression_attribute_values(":t", AttributeValue::N(raised.to_string()))
        .send()
        .await
        .unwrap();

    let before = proxy.counts("TransactWriteItems").requests;
    assert_eq!(
        holder.release(&first).await.unwrap(),
        ReleaseOutcome::Released
    );
    assert_eq!(
        proxy.counts("TransactWriteItems").requests - before,
        2,
        "the clock's guess, refused by the fence, then one above the fence's token"
    );
    let (lock, client) = granted.recv().await.unwrap();
    assert_eq!(token(&lock), raised + 1);
    assert_eq!(fence_token(&resource).await, Some(raised + 1));
    client.release(&lock).await.unwrap();
    task.await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_answer_of_a_fenced_grant_is_the_hand_over() {
    let Line {
        resource,
        proxy,
        holder,
        first,
        mut granted,
        task,
    } = fenced_holder_and_waiter().await;

    // The grant is applied; its answer is lost; the SDK sends it again.
    proxy.drop_next_answer("TransactWriteItems");
    assert_eq!(
        holder.release(&first).await.unwrap(),
        ReleaseOutcome::Released
    );
    assert_eq!(proxy.counts("TransactWriteItems").dropped, 1);
    let (lock, client) = granted.recv().await.unwrap();
    assert_eq!(lock.owner(), "next");
    assert!(token(&lock) > token(&first));
    let item = raw_item(&resource).await.expect("held by next");
    assert_eq!(stored_token(&item), Some(token(&lock)));
    assert_eq!(fence_token(&resource).await, Some(token(&lock)));
    client.release(&lock).await.unwrap();
    task.await.unwrap();
    assert_eq!(raw_item(&resource).await, None);
}

/// The same lost answer, the SDK's resend then cancelled by a conflict (a waiter joining as it
/// was sent): the holder read the item, which showed the waiter as holder, and its release,
/// taking the item for someone else's, answered `NotOwner` for the lock it had handed over. The
/// item names the holder that granted it (`GrantedBy`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_answer_of_a_fenced_grant_then_a_conflict_is_the_hand_over() {
    let Line {
        resource,
        proxy,
        holder,
        first,
        mut granted,
        task,
    } = fenced_holder_and_waiter().await;

    let mut withheld = proxy.withhold_next_answer("TransactWriteItems");
    let releasing = tokio::spawn({
        let (holder, first) = (holder.clone(), first.clone());
        async move { holder.release(&first).await }
    });
    withheld.applied().await;
    proxy.cancel_next_transaction(&["TransactionConflict", "None"]);
    withheld.drop_it();
    assert_eq!(releasing.await.unwrap().unwrap(), ReleaseOutcome::Released);
    let (lock, client) = granted.recv().await.unwrap();
    assert_eq!(lock.owner(), "next");
    client.release(&lock).await.unwrap();
    task.await.unwrap();
    assert_eq!(raw_item(&resource).await, None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lapsed_holders_lock_goes_to_a_fenced_waiter_with_a_token() {
    let crashed = lock_client().await;
    let resource = unique("fair-fenced");
    let short = fair("crashed", true).lease(Duration::from_secs(1));
    // It never releases nor extends: its lease runs out.
    let gone = crashed.acquire(&resource, &short).await.unwrap();
    let waiter = lock_client().await;
    let lock = waiter
        .acquire(&resource, &fair("waiter", true))
        .await
        .unwrap();
    assert!(token(&lock) > token(&gone));
    assert_eq!(fence_token(&resource).await, Some(token(&lock)));
    // The crashed holder's late release finds another acquisition there and leaves it.
    assert_ne!(
        crashed.release(&gone).await.unwrap(),
        ReleaseOutcome::Released
    );
    let item = raw_item(&resource).await.expect("held by the waiter");
    assert_eq!(stored_token(&item), Some(token(&lock)));
    waiter.release(&lock).await.unwrap();
}
