//! Concurrent force-release storms and release/extend races: whatever interleaving happens, the
//! lock item stays well-formed, fencing tokens keep growing, outcomes agree with each other, and the
//! lock can be taken at the end.

use ddb_lock::{AcquireOptions, ExtendOutcome, LockStatus, ReleaseOutcome};
use ddb_lock_test_kit::lock_client;
use ddb_lock_test_kit::unique;
use std::time::Duration;
use tokio::time::Instant;

#[tokio::test]
async fn force_release_storms_and_release_extend_races_leave_a_consistent_lock() {
    let client = lock_client().await;
    let resource = unique("storm");
    let started = Instant::now();

    let forcers: Vec<_> = (0..3)
        .map(|_| {
            let (client, resource) = (client.clone(), resource.clone());
            tokio::spawn(async move {
                for _ in 0..40 {
                    client
                        .force_release(&resource)
                        .await
                        .expect("force release");
                }
            })
        })
        .collect();
    let holders: Vec<_> = (0..4)
        .map(|n| {
            let (client, resource) = (client.clone(), resource.clone());
            tokio::spawn(async move {
                let opts = AcquireOptions::new()
                    .owner(format!("holder-{n}"))
                    .lease(Duration::from_secs(30))
                    .timeout(Duration::from_secs(5))
                    .fencing(true);
                // (invoked, completed, token) of each acquisition
                let mut acquisitions = Vec::new();
                for _ in 0..10 {
                    let invoked = started.elapsed();
                    let Ok(lock) = client.acquire(&resource, &opts).await else {
                        continue;
                    };
                    let token = lock.fencing_token().unwrap();
                    acquisitions.push((invoked, started.elapsed(), token));
                    // Race an extension against the release of the same lock.
                    let (extended, released) = tokio::join!(
                        client.extend(&lock, Duration::from_secs(30)),
                        client.release(&lock)
                    );
                    let (extended, released) = (extended.unwrap(), released.unwrap());
                    // Neither reports this holder as someone else: it has one acquisition at a
                    // time, and the item of another acquisition is another holder's.
                    if let ExtendOutcome::NotOwner { holder } = &extended {
                        assert_ne!(holder.owner, format!("holder-{n}"), "{extended:?}");
                    }
                    if let ReleaseOutcome::NotOwner { holder } = &released {
                        assert_ne!(holder.owner, format!("holder-{n}"), "{released:?}");
                    }
                }
                acquisitions
            })
        })
        .collect();

    for forcer in forcers {
        forcer.await.unwrap();
    }
    let mut acquisitions = Vec::new();
    for holder in holders {
        acquisitions.extend(holder.await.unwrap());
    }

    assert!(
        !acquisitions.is_empty(),
        "someone acquired during the storm"
    );
    // An acquisition that completed before another was invoked has the smaller token.
    for earlier in &acquisitions {
        for later in &acquisitions {
            if earlier.1 < later.0 {
                assert!(
                    earlier.2 < later.2,
                    "tokens out of order: {earlier:?} then {later:?}"
                );
            }
        }
    }
    let highest = acquisitions.iter().map(|a| a.2).max().unwrap();
    // Whatever is left is readable, and the lock can be taken.
    assert!(matches!(
        client.status(&resource).await,
        Ok(LockStatus::Free | LockStatus::Held { .. })
    ));
    client.force_release(&resource).await.unwrap();
    let last = client
        .try_acquire(&resource, &AcquireOptions::new().fencing(true))
        .await
        .unwrap()
        .expect("free after the storm");
    assert!(last.fencing_token().unwrap() > highest);
    client.release(&last).await.unwrap();
}
