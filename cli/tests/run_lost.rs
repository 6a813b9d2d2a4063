//! `ddb-lock run` whose lock is lost while the command runs, or while what it left running is
//! ended: the command, and what it left, are killed at once (given their grace, they worked on
//! beside whoever took the free lock).

mod common;

use aws_sdk_dynamodb::types::AttributeValue;
use common::{ddb_lock, runs, Running, WORK_A_MINUTE};
use ddb_lock::LockStatus;
use ddb_lock_test_kit::{lock_client, unique};
use std::time::Duration;

/// `ddb-lock run` of `key` with `lease` and a minute of grace, its command `script`, which says
/// a process id first; the running `ddb-lock` and that id.
async fn run_saying_a_pid(key: &str, lease: &str, script: &str) -> (Running, i32) {
    let args = ["run", key, "--lease", lease, "--grace", "60s"];
    let args = [
        &args[..],
        &["--lost-exit-code", "80", "--", "sh", "-c", script],
    ]
    .concat();
    let mut running = Running::start(ddb_lock(&args));
    let pid = running.line().await.parse().unwrap();
    (running, pid)
}

/// Waits (half a minute at most) for `running` to exit, as it does when its lock is lost, well
/// before the minute of grace; asserts the lost-lock exit code and that `pid` was killed.
async fn exits_lost_with_killed(running: Running, pid: i32) {
    let (status, _) = tokio::time::timeout(Duration::from_secs(30), running.exit())
        .await
        .expect("ddb-lock exits before the grace is over");
    assert_eq!(status.code(), Some(80), "--lost-exit-code");
    assert!(!runs(pid), "the process was killed");
}

/// A command that ignores SIGTERM, whose lock is force-released: killed at once, not after
/// `--grace` (a minute), which it spent working beside whoever took the free lock.
#[tokio::test]
async fn a_command_whose_lock_is_taken_away_is_killed_at_once() {
    let client = lock_client().await;
    let key = unique("cli-kill");
    let script = format!("trap '' TERM; echo $$; {WORK_A_MINUTE}");
    let (running, pid) = run_saying_a_pid(&key, "3s", &script).await;
    // Taken away: the guard's next extension (within a second) finds the lock gone.
    client.force_release(&key).await.unwrap().expect("held");
    exits_lost_with_killed(running, pid).await;
}

/// A command that exits at once, leaving a process that ignores SIGTERM, whose lock is then
/// force-released: what it left is killed at once, not at the end of the time it is given (up to
/// the lease's end, here 45 s), which it spent working beside whoever took the free lock (found by
/// review).
#[tokio::test]
async fn what_a_command_left_running_is_killed_at_once_when_the_lock_is_lost() {
    let client = lock_client().await;
    let key = unique("cli-kill-left");
    let script = format!("sh -c 'trap \"\" TERM; {WORK_A_MINUTE}' >/dev/null 2>&1 & echo $!");
    let (running, pid) = run_saying_a_pid(&key, "45s", &script).await;
    // Taken away: the guard's next extension (within 15 s) finds the lock gone.
    client.force_release(&key).await.unwrap().expect("held");
    exits_lost_with_killed(running, pid).await;
}

/// The lease found expired (a clock that jumped past it, set here in the item): the library
/// releases the lock at once, and the command, which ignores SIGTERM, must be killed at once too:
/// given the whole `--grace` (a minute), it worked on beside whoever took the free lock.
#[tokio::test]
async fn a_command_whose_lease_is_found_expired_is_killed_at_once() {
    let client = lock_client().await;
    let key = unique("cli-expired");
    let script = format!("trap '' TERM; echo $$; {WORK_A_MINUTE}");
    let (running, pid) = run_saying_a_pid(&key, "3s", &script).await;
    let past = ddb_lock_test_kit::stored(chrono::Utc::now() - chrono::TimeDelta::seconds(10));
    ddb_lock_test_kit::dynamodb()
        .update_item()
        .table_name(ddb_lock_test_kit::TABLE)
        .key("PK", AttributeValue::S(format!("LOCK#{key}")))
        .key("SK", AttributeValue::S("LOCK".into()))
        .update_expression("SET ExpiresAt = :past")
        .expression_attribute_values(":past", AttributeValue::S(past))
        .send()
        .await
        .unwrap();
    // The next extension (within a second) finds it expired.
    exits_lost_with_killed(running, pid).await;
    assert_eq!(client.status(&key).await.unwrap(), LockStatus::Free);
}
