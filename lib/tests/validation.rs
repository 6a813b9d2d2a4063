//! Bad input is refused with an error naming the field and the limit, before any request, and
//! never changes a lock.

use ddb_lock::limits::{MAX_DURATION, MAX_OWNER_BYTES, MAX_PARTITION_KEY_BYTES};
use ddb_lock::{AcquireOptions, BackoffBounds, Error, ExtendOutcome, InvalidInput, LockHandle};
use ddb_lock_test_kit::{builder, dynamodb, lock_client, raw_item, unique};
use std::time::Duration;

fn invalid<T: std::fmt::Debug>(result: Result<T, Error>) -> InvalidInput {
    match result {
        Err(Error::InvalidInput(invalid)) => invalid,
        other => panic!("expected InvalidInput, got {other:?}"),
    }
}

#[tokio::test]
async fn empty_and_oversized_resources_are_refused_with_the_limit() {
    let client = lock_client().await;
    let opts = AcquireOptions::new();
    assert_eq!(
        invalid(client.try_acquire("", &opts).await),
        InvalidInput::Empty { field: "resource" }
    );
    // "LOCK#" takes 5 of DynamoDB's 2048 partition-key bytes.
    let too_long = "x".repeat(MAX_PARTITION_KEY_BYTES - 4);
    let err = invalid(client.acquire(&too_long, &opts).await);
    assert_eq!(
        err,
        InvalidInput::TooLarge {
            field: "resource",
            bytes: MAX_PARTITION_KEY_BYTES - 4,
            limit: MAX_PARTITION_KEY_BYTES - 5
        }
    );
    assert!(err.to_string().contains("2043"), "{err}");
    assert!(invalid(client.status("").await) == InvalidInput::Empty { field: "resource" });
    assert!(matches!(
        invalid(client.force_release(&too_long).await),
        InvalidInput::TooLarge {
            field: "resource",
            ..
        }
    ));

    // The longest resource that fits is accepted by DynamoDB as a key.
    let longest = "x".repeat(MAX_PARTITION_KEY_BYTES - 5);
    let lock = client.try_acquire(&longest, &opts).await.unwrap().unwrap();
    client.release(&lock).await.unwrap();
}

#[tokio::test]
async fn empty_and_oversized_owners_are_refused() {
    let client = lock_client().await;
    let resource = unique("owner-limits");
    assert_eq!(
        invalid(
            client
                .try_acquire(&resource, &AcquireOptions::new().owner(""))
                .await
        ),
        InvalidInput::Empty { field: "owner" }
    );
    let huge = "o".repeat(MAX_OWNER_BYTES + 1);
    assert_eq!(
        invalid(
            client
                .try_acquire(&resource, &AcquireOptions::new().owner(&huge))
                .await
        ),
        InvalidInput::TooLarge {
            field: "owner",
            bytes: MAX_OWNER_BYTES + 1,
            limit: MAX_OWNER_BYTES
        }
    );
    assert!(raw_item(&resource).await.is_none(), "nothing was written");
}

#[tokio::test]
async fn zero_and_absurd_leases_and_timeouts_are_refused() {
    let client = lock_client().await;
    let resource = unique("duration-limits");
    let zero = invalid(
        client
            .try_acquire(&resource, &AcquireOptions::new().lease(Duration::ZERO))
            .await,
    );
    assert!(
        matches!(zero, InvalidInput::DurationTooShort { field: "lease", .. }),
        "{zero}"
    );
    let absurd = MAX_DURATION + Duration::from_secs(1);
    assert_eq!(
        invalid(
            client
                .try_acquire(&resource, &AcquireOptions::new().lease(absurd))
                .await
        ),
        InvalidInput::DurationTooLong {
            field: "lease",
            value: absurd,
            max: MAX_DURATION
        }
    );
    assert!(matches!(
        invalid(
            client
                .acquire(&resource, &AcquireOptions::new().timeout(absurd))
                .await
        ),
        InvalidInput::DurationTooLong {
            field: "timeout",
            ..
        }
    ));
    assert!(raw_item(&resource).await.is_none(), "nothing was written");
}

#[tokio::test]
async fn a_refused_extension_leaves_the_lock_as_it_was() {
    let client = lock_client().await;
    let resource = unique("bad-extend");
    let lock = client
        .try_acquire(&resource, &AcquireOptions::new())
        .await
        .unwrap()
        .unwrap();
    let before = raw_item(&resource).await.unwrap();
    for lease in [Duration::ZERO, MAX_DURATION * 2] {
        assert!(matches!(
            invalid(client.extend(&lock, lease).await),
            InvalidInput::DurationTooShort { field: "lease", .. }
                | InvalidInput::DurationTooLong { field: "lease", .. }
        ));
    }
    let bad_owner = LockHandle::new(&resource, "", lock.lock_id());
    assert_eq!(
        invalid(client.release(&bad_owner).await),
        InvalidInput::Empty { field: "owner" }
    );
    assert_eq!(raw_item(&resource).await.unwrap(), before, "lock unchanged");
    assert!(matches!(
        client.extend(&lock, Duration::from_secs(5)).await.unwrap(),
        ExtendOutcome::Extended(_)
    ));
}

#[test]
fn malformed_lock_ids_are_refused() {
    assert_eq!(
        ddb_lock::LockId::parse("12345"),
        Err(InvalidInput::MalformedLockId)
    );
}

#[test]
fn the_builder_refuses_bad_settings_naming_them() {
    let build = |b: ddb_lock::LockClientBuilder| invalid(b.build());
    assert_eq!(
        build(ddb_lock::LockClient::builder(dynamodb())),
        InvalidInput::Empty {
            field: "table_name"
        }
    );
    assert!(matches!(
        build(builder(dynamodb()).table_name("no spaces allowed")),
        InvalidInput::TableName { .. }
    ));
    assert_eq!(
        build(builder(dynamodb()).owner("")),
        InvalidInput::Empty { field: "owner" }
    );
    assert!(matches!(
        build(builder(dynamodb()).lease(Duration::ZERO)),
        InvalidInput::DurationTooShort { field: "lease", .. }
    ));
    let inverted = BackoffBounds::new(Duration::from_secs(2), Duration::from_secs(1));
    assert!(matches!(
        build(builder(dynamodb()).backoff(inverted)),
        InvalidInput::BackoffOrder { .. }
    ));
    assert!(matches!(
        build(builder(dynamodb()).key_prefix("p".repeat(MAX_PARTITION_KEY_BYTES))),
        InvalidInput::TooLarge {
            field: "key_prefix",
            ..
        }
    ));
}

#[test]
fn negative_millisecond_durations_are_refused_by_name() {
    let err = ddb_lock::duration_from_millis("wait_ms", -5).unwrap_err();
    assert_eq!(
        err,
        InvalidInput::NegativeDuration {
            field: "wait_ms",
            millis: -5
        }
    );
    assert!(err.to_string().contains("wait_ms"));
}
