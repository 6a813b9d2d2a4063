//! Every public input of the library, generated: resources, owners, durations, payloads, lock
//! ids. Whatever the values, a call returns a value or a typed error (never a panic, never a
//! request DynamoDB rejects), and a lock it has no credential for is left exactly as it was.

use ddb_lock::limits::{MAX_DATA_BYTES, MAX_OWNER_BYTES, MAX_PARTITION_KEY_BYTES};
use ddb_lock::{AcquireOptions, Error, LockHandle, LockId};
use ddb_lock_test_kit::{hold, lock_client, raw_item, unique};
use proptest::prelude::*;
use std::time::Duration;

/// One library call with generated arguments.
#[derive(Debug, Clone)]
enum Call {
    TryAcquire,
    Acquire,
    TryLock,
    Status,
    Release,
    ReleaseOwned,
    Extend,
    ExtendAndReplaceData,
}

#[derive(Debug, Clone)]
struct Input {
    call: Call,
    on_the_guarded_lock: bool,
    resource: String,
    owner: String,
    lease_ms: u64,
    heartbeat_ms: Option<u64>,
    data: Option<usize>,
    fencing: bool,
    lock_id: String,
}

/// Strings around the limits and of any characters.
fn text(limit: usize) -> impl Strategy<Value = String> {
    prop_oneof![
        Just(String::new()),
        ".{1,40}",
        (limit - 8..limit + 8).prop_map(|n| "x".repeat(n)),
        (limit / 2 - 4..limit / 2 + 4).prop_map(|n| "é".repeat(n)),
    ]
}

fn duration_ms() -> impl Strategy<Value = u64> {
    prop_oneof![
        Just(0u64),
        1u64..5_000,
        Just(366 * 24 * 3_600_000),
        Just(366 * 24 * 3_600_000 + 1),
        any::<u64>(),
    ]
}

fn input() -> impl Strategy<Value = Input> {
    (
        prop::sample::select(vec![
            Call::TryAcquire,
            Call::Acquire,
            Call::TryLock,
            Call::Status,
            Call::Release,
            Call::ReleaseOwned,
            Call::Extend,
            Call::ExtendAndReplaceData,
        ]),
        any::<bool>(),
        text(MAX_PARTITION_KEY_BYTES - 5),
        text(MAX_OWNER_BYTES),
        duration_ms(),
        prop::option::of(duration_ms()),
        prop::option::of(prop_oneof![
            Just(0usize),
            Just(MAX_DATA_BYTES),
            Just(MAX_DATA_BYTES + 1),
            0usize..64
        ]),
        any::<bool>(),
        prop_oneof![
            Just("67e55044-10b1-426f-9247-bb680e5fe0c8".to_owned()),
            ".{0,40}"
        ],
    )
        .prop_map(
            |(
                call,
                on_the_guarded_lock,
                resource,
                owner,
                lease_ms,
                heartbeat_ms,
                data,
                fencing,
                lock_id,
            )| {
                Input {
                    call,
                    on_the_guarded_lock,
                    resource,
                    owner,
                    lease_ms,
                    heartbeat_ms,
                    data,
                    fencing,
                    lock_id,
                }
            },
        )
}

/// Runs one call; `Err` only for outcomes that break the contract.
async fn call(client: &ddb_lock::LockClient, resource: &str, input: &Input) -> Result<(), String> {
    let mut opts = AcquireOptions::new()
        .owner(input.owner.as_str())
        .lease(Duration::from_millis(input.lease_ms))
        .timeout(Duration::ZERO)
        .fencing(input.fencing);
    if let Some(ms) = input.heartbeat_ms {
        opts = opts.heartbeat(Duration::from_millis(ms));
    }
    if let Some(len) = input.data {
        opts = opts.data(vec![7u8; len]);
    }
    let handle =
        || LockId::parse(&input.lock_id).map(|id| LockHandle::new(resource, &input.owner, id));
    let lease = Duration::from_millis(input.lease_ms);
    let result: Result<(), Error> = match input.call {
        Call::TryAcquire => match client.try_acquire(resource, &opts).await {
            Ok(Some(lock)) => client.release(&lock).await.map(|_| ()),
            other => other.map(|_| ()),
        },
        Call::Acquire => match client.acquire(resource, &opts).await {
            Ok(lock) => client.release(&lock).await.map(|_| ()),
            Err(Error::Timeout { .. }) => Ok(()),
            Err(other) => Err(other),
        },
        Call::TryLock => match client.try_lock(resource, &opts).await {
            Ok(Some(guard)) => guard.release().await.map(|_| ()),
            other => other.map(|_| ()),
        },
        Call::Status => client.status(resource).await.map(|_| ()),
        Call::Release => match handle() {
            Ok(handle) => client.release(&handle).await.map(|_| ()),
            Err(invalid) => Err(invalid.into()),
        },
        Call::ReleaseOwned => client
            .release_owned(resource, &input.owner)
            .await
            .map(|_| ()),
        Call::Extend => match handle() {
            Ok(handle) => client.extend(&handle, lease).await.map(|_| ()),
            Err(invalid) => Err(invalid.into()),
        },
        Call::ExtendAndReplaceData => match handle() {
            Ok(handle) => {
                let data = input.data.map(|len| vec![7u8; len]);
                client
                    .extend_and_replace_data(&handle, lease, data)
                    .await
                    .map(|_| ())
            }
            Err(invalid) => Err(invalid.into()),
        },
    };
    match result {
        Ok(()) | Err(Error::InvalidInput(_)) => Ok(()),
        Err(other) => Err(format!("{other}")),
    }
}

#[test]
fn any_input_gets_a_value_or_a_typed_error_and_leaves_others_locks_alone() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let guarded = unique("guarded");
    let (client, before) = runtime.block_on(async {
        let client = lock_client().await;
        hold(&client, &guarded, "the-guardian", Duration::from_secs(600)).await;
        let before = raw_item(&guarded).await.unwrap();
        (client, before)
    });
    let config = ProptestConfig {
        cases: 160,
        failure_persistence: None,
        ..ProptestConfig::default()
    };
    let mut runner = proptest::test_runner::TestRunner::new(config);
    runner
        .run(&input(), |input| {
            if input.owner == "the-guardian" {
                return Ok(()); // the guardian's own name is a credential for release_owned
            }
            let resource = if input.on_the_guarded_lock {
                guarded.clone()
            } else {
                format!("{}{}", unique("bad-input-"), input.resource)
            };
            let resource = if input.resource.is_empty() && !input.on_the_guarded_lock {
                String::new()
            } else {
                resource
            };
            let outcome = runtime.block_on(call(&client, &resource, &input));
            prop_assert!(
                outcome.is_ok(),
                "{:?} on {resource:?}: {}",
                input.call,
                outcome.unwrap_err()
            );
            let after = runtime.block_on(raw_item(&guarded));
            prop_assert_eq!(
                after.as_ref(),
                Some(&before),
                "the guarded lock changed after {:?}",
                input
            );
            Ok(())
        })
        .unwrap();
}
