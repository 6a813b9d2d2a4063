//! What `with_lock` and `with_lock_set` say when the lock was taken from under the work without
//! the guard learning of it before the work finished (an operator's force release, then another
//! acquirer): the release finds someone else's lock, and the result is `Error::Lost` naming the
//! new holder, never the work's `Ok`.

use super::*;
use ddb_lock::Mode;
use tokio::time::timeout;

/// Takes `resource` away from its holder: a force release, then bob's acquisition.
async fn take_away(resource: &str) {
    let other = lock_client().await;
    other.force_release(resource).await.unwrap();
    hold(&other, resource, "bob", Duration::from_secs(60)).await;
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
