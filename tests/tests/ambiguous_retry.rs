//! A PutItem whose first attempt succeeded but whose answer was lost: the SDK retries, the retry's
//! condition fails on our own item, and that must be reported as acquired, not as contention.

use ddb_lock::AcquireOptions;
use ddb_lock_tests::proxy::Proxy;
use ddb_lock_tests::{
    builder, dynamodb_with, endpoint, lock_client, raw_item, string_attr, unique,
};
use std::time::Duration;

#[tokio::test]
async fn a_retried_acquire_whose_first_answer_was_lost_is_acquired_not_held() {
    let direct = lock_client().await;
    let resource = unique("lost-answer");
    let proxy = Proxy::start(&endpoint()).await;
    let dynamodb = dynamodb_with(&proxy.endpoint(), |config| {
        config.retry_config(
            aws_sdk_dynamodb::config::retry::RetryConfig::standard()
                .with_max_attempts(3)
                .with_initial_backoff(Duration::from_millis(10)),
        )
    });
    let client = builder(dynamodb).build().unwrap();

    proxy.drop_next_answer("PutItem");
    let lock = client
        .try_acquire(&resource, &AcquireOptions::new().owner("alice"))
        .await
        .unwrap()
        .expect("the first attempt's write is ours: acquired");

    let puts = proxy.counts("PutItem");
    assert_eq!(
        puts.dropped, 1,
        "the first answer was really lost: {puts:?}"
    );
    assert_eq!(puts.requests, 2, "the SDK retried once: {puts:?}");
    let item = raw_item(&resource).await.unwrap();
    assert_eq!(string_attr(&item, "LockID"), lock.lock_id().to_string());
    assert_eq!(string_attr(&item, "Owner"), "alice");

    // It is really held, and really ours to release.
    let other = direct
        .try_acquire(&resource, &AcquireOptions::new().owner("bob"))
        .await
        .unwrap();
    assert!(other.is_none());
    assert_eq!(
        direct.release(&lock).await.unwrap(),
        ddb_lock::ReleaseOutcome::Released
    );
}
