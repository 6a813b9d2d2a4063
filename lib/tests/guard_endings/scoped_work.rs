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

fn not_found(result: &Result<u32, Error>) -> bool {
    matches!(result, Err(Error::Lost { reason, .. }) if matches!(&**reason, LockLost::NotFound))
}

fn taken_by_bob(result: &Result<u32, Error>) -> bool {
    matches!(result, Err(Error::Lost { reason, .. })
        if matches!(&**reason, LockLost::TakenOver { holder } if holder.owner == "bob"))
}

#[tokio::test]
async fn with_lock_whose_lock_was_taken_during_the_work_is_lost() {
    let client = lock_client().await;
    let resource = unique("with-lock-taken-during-work");
    // A heartbeat too slow to notice within the work: only the release can tell.
    let result = timeout(
        PATIENCE,
        client.with_lock(&resource, &guard_options("alice", 60_000, 20_000), |_| {
            let resource = resource.clone();
            async move {
                take_away(&resource).await;
                Ok::<_, Error>(42)
            }
        }),
    )
    .await
    .expect("the work ends");
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
    let (first, second) = (unique("set-taken-a"), unique("set-taken-b"));
    let result = timeout(
        PATIENCE,
        client.with_lock_set(
            &[(&first, Mode::Exclusive), (&second, Mode::Exclusive)],
            &guard_options("alice", 60_000, 20_000),
            |_| {
                let second = second.clone();
                async move {
                    take_away(&second).await;
                    Ok::<_, Error>(42)
                }
            },
        ),
    )
    .await
    .expect("the work ends");
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
    let resource = unique("with-lock-forced-during-work");
    let result = timeout(
        PATIENCE,
        client.with_lock(&resource, &guard_options("alice", 60_000, 20_000), |_| {
            let resource = resource.clone();
            async move {
                force_away(&resource).await;
                Ok::<_, Error>(42)
            }
        }),
    )
    .await
    .expect("the work ends");
    assert!(not_found(&result), "{result:?}");
    let (first, second) = (unique("set-forced-a"), unique("set-forced-b"));
    let result = timeout(
        PATIENCE,
        client.with_lock_set(
            &[(&first, Mode::Exclusive), (&second, Mode::Exclusive)],
            &guard_options("alice", 60_000, 20_000),
            |_| {
                let second = second.clone();
                async move {
                    force_away(&second).await;
                    Ok::<_, Error>(42)
                }
            },
        ),
    )
    .await
    .expect("the work ends");
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
