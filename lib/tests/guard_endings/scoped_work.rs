//! What `with_lock` and `with_lock_set` say when the lock was taken from under the work without
//! the guard learning of it before the work finished (an operator's force release, then perhaps
//! another acquirer): the release finds someone else's lock, or none, and the result is
//! `Error::Lost` naming the new holder or saying not found, never the work's `Ok`; and what they
//! say when the release's answer was lost and its resend found the lock gone (the work's `Ok`).

use super::*;
use ddb_lock::Mode;
use tokio::time::timeout;

/// Takes `resource` away from its holder: a force release, then bob's acquisition.
async fn take_away(resource: &str) {
    let other = lock_client().await;
    force_away(resource).await;
    hold(&other, resource, "bob", Duration::from_secs(60)).await;
}

/// Takes `resource` away from its holder and leaves it free: a force release.
async fn force_away(resource: &str) {
    let other = lock_client().await;
    other.force_release(resource).await.unwrap().expect("held");
}

/// A client that keeps lock items on release, recording the release.
fn keeping_client() -> LockClient {
    ddb_lock_test_kit::builder(ddb_lock_test_kit::dynamodb())
        .delete_on_release(false)
        .build()
        .unwrap()
}

/// Takes `resource` away from its holder and leaves it free, the item kept: a force release by a
/// client that keeps items.
async fn force_away_keeping(resource: &str) {
    lock_client().await;
    let other = keeping_client();
    other.force_release(resource).await.unwrap().expect("held");
}

fn not_found(result: &Result<u32, Error>) -> bool {
    matches!(result, Err(Error::Lost { reason, .. }) if matches!(&**reason, LockLost::NotFound))
}

fn taken_by_bob(result: &Result<u32, Error>) -> bool {
    matches!(result, Err(Error::Lost { reason, .. })
        if matches!(&**reason, LockLost::TakenOver { holder } if holder.owner == "bob"))
}

/// How the work takes its lock away from under itself.
#[derive(Clone, Copy)]
enum Away {
    /// [`take_away`]: bob holds it at the release.
    ToBob,
    /// [`force_away`]: free at the release.
    Forced,
    /// [`force_away_keeping`]: free at the release, the item kept with the release's record.
    ForcedKept,
}

impl Away {
    async fn run(self, resource: &str) {
        match self {
            Away::ToBob => take_away(resource).await,
            Away::Forced => force_away(resource).await,
            Away::ForcedKept => force_away_keeping(resource).await,
        }
    }
}

/// `with_lock` on a resource of its own (named after `name`) whose work takes its lock away,
/// with a heartbeat too slow to notice within the work: only the release can tell. Its result,
/// and the resource.
async fn with_lock_losing(
    client: &LockClient,
    name: &str,
    away: Away,
) -> (Result<u32, Error>, String) {
    let resource = unique(name);
    let result = timeout(
        PATIENCE,
        client.with_lock(&resource, &guard_options("alice", 60_000, 20_000), |_| {
            let resource = resource.clone();
            async move {
                away.run(&resource).await;
                Ok::<_, Error>(42)
            }
        }),
    )
    .await
    .expect("the work ends");
    (result, resource)
}

/// `with_lock_set` on two resources of their own whose work takes the second's lock away. Its
/// result, and the two resources.
async fn with_lock_set_losing(
    client: &LockClient,
    away: Away,
) -> (Result<u32, Error>, String, String) {
    let (first, second) = (unique("set-lost-a"), unique("set-lost-b"));
    let result = timeout(
        PATIENCE,
        client.with_lock_set(
            &[(&first, Mode::Exclusive), (&second, Mode::Exclusive)],
            &guard_options("alice", 60_000, 20_000),
            |_| {
                let second = second.clone();
                async move {
                    away.run(&second).await;
                    Ok::<_, Error>(42)
                }
            },
        ),
    )
    .await
    .expect("the work ends");
    (result, first, second)
}

#[tokio::test]
async fn with_lock_whose_lock_was_taken_during_the_work_is_lost() {
    let client = lock_client().await;
    let (result, resource) =
        with_lock_losing(&client, "with-lock-taken-during-work", Away::ToBob).await;
    assert!(taken_by_bob(&result), "{result:?}");
    let status = client.status(&resource).await.unwrap();
    assert!(
        matches!(&status, LockStatus::Held { holder, .. } if holder.owner == "bob"),
        "bob's lock is left alone: {status:?}"
    );
}

#[tokio::test]
async fn with_lock_set_whose_member_was_taken_during_the_work_is_lost() {
    let client = lock_client().await;
    let (result, first, second) = with_lock_set_losing(&client, Away::ToBob).await;
    assert!(taken_by_bob(&result), "{result:?}");
    assert!(
        matches!(&result, Err(Error::Lost { resource, .. }) if *resource == second),
        "the member taken is named: {result:?}"
    );
    assert_eq!(client.status(&first).await.unwrap(), LockStatus::Free);
}

/// A lock force-released during the work and left free: the release after the work, sent once,
/// finds nothing, and the work ran partly without the lock (it answered the work's `Ok`; found
/// by review).
#[tokio::test]
async fn with_lock_and_with_lock_set_whose_lock_was_force_released_during_the_work_are_lost() {
    let client = lock_client().await;
    let (result, _) = with_lock_losing(&client, "with-lock-forced-during-work", Away::Forced).await;
    assert!(not_found(&result), "{result:?}");
    let (result, first, second) = with_lock_set_losing(&client, Away::Forced).await;
    assert!(
        matches!(&result, Err(Error::Lost { resource, .. }) if *resource == second)
            && not_found(&result),
        "{result:?}"
    );
    assert_eq!(client.status(&first).await.unwrap(), LockStatus::Free);
}

/// As above, with items kept: the release after the work, sent once, finds the force release's
/// record of this very acquisition (`AlreadyReleased`), which is the same loss (it answered the
/// work's `Ok`; found by review).
#[tokio::test]
async fn with_lock_and_with_lock_set_whose_kept_lock_was_force_released_during_the_work_are_lost() {
    lock_client().await;
    let client = keeping_client();
    let (result, _) = with_lock_losing(
        &client,
        "with-lock-kept-forced-during-work",
        Away::ForcedKept,
    )
    .await;
    assert!(not_found(&result), "{result:?}");
    let (result, first, second) = with_lock_set_losing(&client, Away::ForcedKept).await;
    assert!(
        matches!(&result, Err(Error::Lost { resource, .. }) if *resource == second)
            && not_found(&result),
        "{result:?}"
    );
    assert_eq!(client.status(&first).await.unwrap(), LockStatus::Free);
}

/// The release after the work applied, its answer lost: the SDK's resend finds the lock gone,
/// which its first send did; the work's `Ok` stands, and the lock is free.
#[tokio::test]
async fn with_lock_whose_release_answer_was_lost_answers_the_work() {
    lock_client().await;
    let proxy = Proxy::start(&endpoint()).await;
    let client = client_through(&proxy, None);
    let resource = unique("with-lock-release-answer-lost");
    let result = timeout(
        PATIENCE,
        client.with_lock(&resource, &guard_options("alice", 60_000, 20_000), |_| {
            proxy.drop_next_answer("DeleteItem");
            async { Ok::<_, Error>(42) }
        }),
    )
    .await
    .expect("the work ends");
    assert_eq!(result.unwrap(), 42);
    assert!(
        proxy.counts("DeleteItem").requests >= 2,
        "the release was sent again"
    );
    assert_eq!(client.status(&resource).await.unwrap(), LockStatus::Free);
}
