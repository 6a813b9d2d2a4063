//! The administration commands as a process against the local endpoint: `status`, `list`,
//! `release`, `force-release`, `cleanup`, `create-table`, `check-table`, in text and `--json`,
//! with their exit codes, and configuration mistakes as one line.

mod common;

use common::{ddb_lock, finish, holder_of};
use ddb_lock::{AcquireOptions, LockStatus, Namespace};
use ddb_lock_test_kit::{
    builder, dynamodb, ensure_table, hold, lock_client, unique, FixedClock, TableKind,
};
use std::time::Duration;

#[tokio::test]
async fn status_says_who_holds_a_lock_in_text_and_json() {
    let client = lock_client().await;
    let key = unique("cli-status");
    let out = finish(ddb_lock(&["--json", "status", &key])).await;
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert_eq!(
        out.json(),
        serde_json::json!({"resource": key, "locked": false})
    );

    let opts = AcquireOptions::new()
        .owner("deployer")
        .fencing(true)
        .lease(Duration::from_secs(60));
    let lock = client.acquire(&key, &opts).await.unwrap();
    let status = finish(ddb_lock(&["status", &key, "--json"])).await.json();
    assert_eq!(status["locked"], true);
    assert_eq!(status["owner"], "deployer");
    assert_eq!(
        status["fencing_token"],
        lock.fencing_token().unwrap().value()
    );
    assert_eq!(
        status["expires_at"],
        ddb_lock::timestamp::format(lock.expires_at())
    );

    let text = finish(ddb_lock(&["status", &key])).await;
    assert_eq!(text.code, Some(0));
    assert!(text.stdout.contains("held"), "{}", text.stdout);
    assert!(text.stdout.contains("deployer"), "{}", text.stdout);
    client.release(&lock).await.unwrap();
}

#[tokio::test]
async fn list_shows_the_live_locks_of_a_namespace_and_needs_one() {
    let client = lock_client().await;
    let name = unique("cli").replace('-', "")[..20].to_owned();
    let namespace: Namespace = name.parse().unwrap();
    let billing = client.in_namespace(namespace).unwrap();
    let lock = hold(&billing, "invoices/7", "biller", Duration::from_secs(60)).await;
    // The namespace index is eventually consistent: read until the lock is listed.
    let listed = loop {
        let out = finish(ddb_lock(&["--namespace", &name, "--json", "list"])).await;
        assert_eq!(out.code, Some(0), "{}", out.stderr);
        let answer = out.json();
        if !answer["locks"].as_array().unwrap().is_empty() {
            break answer;
        }
    };
    assert_eq!(listed["namespace"], name.as_str());
    assert_eq!(listed["locks"][0]["resource"], "invoices/7");
    assert_eq!(listed["locks"][0]["owner"], "biller");

    let text = finish(ddb_lock(&["list", "--namespace", &name])).await;
    assert!(text.stdout.contains("invoices/7"), "{}", text.stdout);
    assert!(text.stdout.contains("biller"), "{}", text.stdout);

    let without = finish(ddb_lock(&["list"])).await;
    assert_eq!(without.code, Some(2));
    assert!(without.stderr.contains("--namespace"), "{}", without.stderr);
    billing.release(&lock).await.unwrap();
}

#[tokio::test]
async fn release_takes_the_owner_and_lock_id_and_says_when_nothing_was_released() {
    let client = lock_client().await;
    let key = unique("cli-release");
    let lock = hold(&client, &key, "worker-1", Duration::from_secs(60)).await;
    let id = lock.lock_id().to_string();

    let wrong = finish(ddb_lock(&[
        "release",
        &key,
        "--owner",
        "worker-2",
        "--lock-id",
        &id,
    ]))
    .await;
    assert_eq!(wrong.code, Some(1), "{}", wrong.stderr);
    assert!(wrong.stderr.contains("worker-1"), "{}", wrong.stderr);
    assert_eq!(holder_of(&client, &key).await.as_deref(), Some("worker-1"));

    let args = [
        "--json",
        "release",
        &key,
        "--owner",
        "worker-1",
        "--lock-id",
        &id,
    ];
    let out = finish(ddb_lock(&args)).await;
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert_eq!(out.json()["released"], true);
    assert_eq!(client.status(&key).await.unwrap(), LockStatus::Free);

    let again = finish(ddb_lock(&args)).await;
    assert_eq!(again.code, Some(1));
    assert_eq!(again.json()["released"], false);

    let bad = finish(ddb_lock(&[
        "release",
        &key,
        "--owner",
        "w",
        "--lock-id",
        "nope",
    ]))
    .await;
    assert_eq!(bad.code, Some(2));
    assert!(bad.stderr.contains("lock_id"), "{}", bad.stderr);
}

#[tokio::test]
async fn force_release_needs_yes_and_names_the_holder_it_removed() {
    let client = lock_client().await;
    let key = unique("cli-force");
    hold(&client, &key, "stuck-job", Duration::from_secs(60)).await;

    let unconfirmed = finish(ddb_lock(&["force-release", &key])).await;
    assert_eq!(unconfirmed.code, Some(2));
    assert!(
        unconfirmed.stderr.contains("--yes"),
        "{}",
        unconfirmed.stderr
    );
    assert_eq!(holder_of(&client, &key).await.as_deref(), Some("stuck-job"));

    let out = finish(ddb_lock(&["force-release", &key, "--yes", "--json"])).await;
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert_eq!(
        out.json(),
        serde_json::json!({"resource": key, "released": true, "previous_owner": "stuck-job"})
    );
    assert_eq!(client.status(&key).await.unwrap(), LockStatus::Free);
}

#[tokio::test]
async fn create_table_check_table_and_cleanup_on_a_table_of_their_own() {
    let table = unique("cli-table");
    let missing = finish(ddb_lock(&["--table", &table, "status", "k"])).await;
    assert_eq!(missing.code, Some(69));
    assert_eq!(missing.stderr.lines().count(), 1, "{}", missing.stderr);
    assert!(
        missing.stderr.contains("create-table"),
        "{}",
        missing.stderr
    );

    let created = finish(ddb_lock(&["--table", &table, "create-table"])).await;
    assert_eq!(created.code, Some(0), "{}", created.stderr);
    let checked = finish(ddb_lock(&["--table", &table, "--json", "check-table"])).await;
    assert_eq!(
        checked.json(),
        serde_json::json!({"table": table, "ok": true})
    );

    // A lock whose lease ended an hour ago, by a client whose clock says so.
    let past = chrono::Utc::now() - chrono::TimeDelta::hours(2);
    let old = builder(dynamodb())
        .table_name(&table)
        .clock(FixedClock::shared(past))
        .build()
        .unwrap();
    hold(&old, "expired-long-ago", "gone", Duration::from_secs(60)).await;
    let args = [
        "--table",
        &table,
        "--json",
        "cleanup",
        "--expired-for",
        "30m",
    ];
    let cleaned = finish(ddb_lock(&args)).await;
    assert_eq!(cleaned.code, Some(0), "{}", cleaned.stderr);
    let answer = cleaned.json();
    assert_eq!(answer["deleted"], 1);
    assert_eq!(answer["complete"], true);
}

#[tokio::test]
async fn a_table_of_another_shape_fails_its_check_naming_the_differences() {
    let table = unique("cli-other");
    ensure_table(&dynamodb(), &table, TableKind::Items { key: "id" }).await;
    let out = finish(ddb_lock(&["--table", &table, "check-table"])).await;
    assert_eq!(out.code, Some(1), "{}", out.stderr);
    assert!(out.stdout.contains("PK"), "{}", out.stdout);
}

#[tokio::test]
async fn configuration_mistakes_are_one_line() {
    let no_table = finish({
        let mut command = ddb_lock(&["status", "k"]);
        command.env_remove("DDB_LOCK_TABLE");
        command
    })
    .await;
    assert_eq!(no_table.code, Some(2));
    assert_eq!(
        no_table.stderr.trim(),
        "ddb-lock: no lock table: pass --table or set DDB_LOCK_TABLE"
    );

    let no_credentials = finish({
        let mut command = ddb_lock(&["status", "k"]);
        command.env_remove("AWS_ACCESS_KEY_ID");
        command.env_remove("AWS_SECRET_ACCESS_KEY");
        command
    })
    .await;
    assert_eq!(no_credentials.code, Some(69));
    assert_eq!(no_credentials.stderr.lines().count(), 1);
    assert!(
        no_credentials.stderr.contains("no usable AWS credentials"),
        "{}",
        no_credentials.stderr
    );

    let bad_schema = finish({
        let mut command = ddb_lock(&["status", "k"]);
        command.env("DDB_LOCK_PARTITION_KEY", "");
        command
    })
    .await;
    assert_eq!(bad_schema.code, Some(2));
    assert!(
        bad_schema.stderr.contains("DDB_LOCK_PARTITION_KEY"),
        "{}",
        bad_schema.stderr
    );
}

/// An item at a lock's key that is not a lock (written by something else) fails with 65, which
/// trying again does not change; it was 69, "DynamoDB unreachable", on which scripts retry.
#[tokio::test]
async fn an_item_that_is_not_a_lock_is_a_data_error_not_an_outage() {
    lock_client().await;
    let key = unique("cli-not-a-lock");
    dynamodb()
        .put_item()
        .table_name(ddb_lock_test_kit::TABLE)
        .item(
            "PK",
            aws_sdk_dynamodb::types::AttributeValue::S(format!("LOCK#{key}")),
        )
        .item(
            "SK",
            aws_sdk_dynamodb::types::AttributeValue::S("LOCK".into()),
        )
        .item(
            "Balance",
            aws_sdk_dynamodb::types::AttributeValue::N("7".into()),
        )
        .send()
        .await
        .unwrap();
    let out = finish(ddb_lock(&["status", &key])).await;
    assert_eq!(out.code, Some(65), "{}", out.stderr);
    assert_eq!(out.stderr.lines().count(), 1, "{}", out.stderr);
}
