//! `ddb-lock run` as a process against the local endpoint: the command's environment and exit
//! code, contention, runs that never overlap, a lost lock stopping the command, signals.

mod common;

use common::{ddb_lock, ddb_lock_at, environment, finish, holder_of, runs, Running, WORK_A_MINUTE};
use ddb_lock::{AcquireOptions, LockId, LockStatus};
use ddb_lock_test_kit::proxy::Proxy;
use ddb_lock_test_kit::{endpoint, hold, lock_client, unique};
use nix::sys::signal::Signal;
use std::time::Duration;

/// A shell command that says it started, then runs until a signal; on `trapped` it says so and
/// exits with `code`. Unsignalled, it says so after a minute and exits, failing the test
/// rather than hanging it.
fn until_signalled(trapped: &str, code: u8) -> String {
    format!("trap 'echo {trapped}; exit {code}' {trapped}; echo started; {WORK_A_MINUTE}")
}

#[tokio::test]
async fn the_command_runs_holding_the_lock_and_its_exit_code_is_returned() {
    let client = lock_client().await;
    let key = unique("cli-run");
    let script = r#"echo "$DDB_LOCK_RESOURCE|$DDB_LOCK_OWNER|$DDB_LOCK_ID|$DDB_LOCK_FENCING_TOKEN"; "$0" --json status "$DDB_LOCK_RESOURCE"; exit 7"#;
    let bin = env!("CARGO_BIN_EXE_ddb-lock");
    let args = ["run", &key, "--fencing", "--owner", "nightly"];
    let out = finish(ddb_lock(
        &[&args[..], &["--", "sh", "-c", script, bin]].concat(),
    ))
    .await;

    assert_eq!(out.code, Some(7), "{}", out.stderr);
    let mut lines = out.stdout.lines();
    let vars: Vec<&str> = lines.next().expect("the variables").split('|').collect();
    assert_eq!(vars[0], key);
    assert_eq!(vars[1], "nightly");
    LockId::parse(vars[2]).expect("DDB_LOCK_ID is a lock id");
    let token: u64 = vars[3].parse().expect("DDB_LOCK_FENCING_TOKEN is a number");
    // While the command ran, the lock was held with that owner and token.
    let status: serde_json::Value = serde_json::from_str(lines.next().expect("status")).unwrap();
    assert_eq!(status["locked"], true);
    assert_eq!(status["owner"], "nightly");
    assert_eq!(status["fencing_token"], token);
    // And it was released when the command exited.
    assert_eq!(client.status(&key).await.unwrap(), LockStatus::Free);
}

#[tokio::test]
async fn without_fencing_there_is_no_token_and_the_default_owner_names_the_host() {
    lock_client().await;
    let key = unique("cli-run");
    let script = r#"echo "${DDB_LOCK_FENCING_TOKEN-none}|$DDB_LOCK_OWNER""#;
    let out = finish(ddb_lock(&["run", &key, "--", "sh", "-c", script])).await;
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let (token, owner) = out.stdout.trim().split_once('|').unwrap();
    assert_eq!(token, "none");
    let host = nix::unistd::gethostname().unwrap().into_string().unwrap();
    assert!(owner.starts_with(&format!("{host}:")), "{owner}");
}

#[tokio::test]
async fn a_held_lock_is_a_conflict_and_the_command_does_not_run() {
    let client = lock_client().await;
    let key = unique("cli-conflict");
    let held = hold(&client, &key, "the-holder", Duration::from_secs(60)).await;

    let out = finish(ddb_lock(&["run", &key, "--no-wait", "--", "echo", "ran"])).await;
    assert_eq!(out.code, Some(75), "{}", out.stderr);
    assert_eq!(out.stdout, "");
    assert!(out.stderr.contains("the-holder"), "{}", out.stderr);

    let args = ["run", &key, "--wait", "300ms", "--conflict-exit-code", "9"];
    let out = finish(ddb_lock(&[&args[..], &["--", "echo", "ran"]].concat())).await;
    assert_eq!(out.code, Some(9), "{}", out.stderr);
    assert_eq!(out.stdout, "");
    assert!(out.stderr.contains("timed out"), "{}", out.stderr);
    assert!(out.stderr.contains("the-holder"), "{}", out.stderr);

    // The read of the holder, for the message, fails: still a conflict.
    let proxy = Proxy::start(&endpoint()).await;
    proxy.refuse_next("GetItem", "AccessDeniedException");
    let args = ["run", &key, "--no-wait", "--", "echo", "ran"];
    let out = finish(ddb_lock_at(&proxy.endpoint(), &args)).await;
    assert_eq!(out.code, Some(75), "{}", out.stderr);
    assert_eq!(out.stdout, "");

    // The holder still holds it.
    assert_eq!(
        holder_of(&client, &key).await.as_deref(),
        Some("the-holder")
    );
    client.release(&held).await.unwrap();
}

#[tokio::test]
async fn a_waiting_run_gets_the_lock_once_it_is_released() {
    let client = lock_client().await;
    let key = unique("cli-wait");
    let held = hold(&client, &key, "first", Duration::from_secs(60)).await;
    let waiting = Running::start(ddb_lock(&[
        "run", &key, "--wait", "60s", "--", "echo", "ran",
    ]));
    client.release(&held).await.unwrap();
    let (status, out) = waiting.exit().await;
    assert_eq!(status.code(), Some(0));
    assert_eq!(out, ["ran"]);
}

#[tokio::test]
async fn runs_of_one_key_never_overlap() {
    lock_client().await;
    let key = unique("cli-overlap");
    let dir = std::env::temp_dir().join(unique("cli-overlap"));
    std::fs::create_dir_all(&dir).unwrap();
    // mkdir is atomic: a command that finds `busy` made runs while another one does.
    let script = r#"mkdir "$0/busy" 2>/dev/null || echo overlap >> "$0/log"
echo "in $$" >> "$0/log"; sleep 0.05; echo "out $$" >> "$0/log"
rmdir "$0/busy""#;
    let dir_arg = dir.to_str().unwrap();
    let runs: Vec<_> = (0..4)
        .map(|_| {
            let args = [
                "run", &key, "--wait", "120s", "--", "sh", "-c", script, dir_arg,
            ];
            finish(ddb_lock(&args))
        })
        .collect();
    for out in futures_util::future::join_all(runs).await {
        assert_eq!(out.code, Some(0), "{}", out.stderr);
    }
    let log = std::fs::read_to_string(dir.join("log")).unwrap();
    let lines: Vec<&str> = log.lines().collect();
    assert_eq!(lines.len(), 8, "{log}");
    for pair in lines.chunks(2) {
        let (inside, outside) = (pair[0].strip_prefix("in "), pair[1].strip_prefix("out "));
        assert!(inside.is_some() && inside == outside, "{log}");
    }
    std::fs::remove_dir_all(dir).unwrap();
}

#[tokio::test]
async fn a_partition_that_loses_the_lock_stops_the_command() {
    let client = lock_client().await;
    let key = unique("cli-partition");
    let proxy = Proxy::start(&endpoint()).await;
    let script = until_signalled("TERM", 0);
    let args = [
        "run", &key, "--lease", "1s", "--grace", "60s", "--", "sh", "-c", &script,
    ];
    let mut running = Running::start(ddb_lock_at(&proxy.endpoint(), &args));
    assert_eq!(running.line().await, "started");

    proxy.cut_off();
    let (status, rest) = running.exit().await;
    assert_eq!(status.code(), Some(76), "the lost-lock exit code");
    assert_eq!(rest, ["TERM"], "the command got SIGTERM");
    // Its lease ran out: nobody holds the lock.
    assert_eq!(client.status(&key).await.unwrap(), LockStatus::Free);
}

/// A `--grace` longer than any duration the library takes is refused before anything runs,
/// naming the option and the limit: accepted, it overflowed the clock once the command had exited,
/// and ddb-lock panicked with the lock held and the command's leftovers running.
#[tokio::test]
async fn a_grace_beyond_the_longest_duration_is_refused_naming_the_option() {
    let key = unique("cli-grace");
    let args = ["run", &key, "--grace", "300000000000y", "--", "true"];
    let refused = finish(ddb_lock(&args)).await;
    assert_eq!(refused.code, Some(2), "{}", refused.stderr);
    assert!(
        refused.stderr.contains("--grace") && refused.stderr.contains("366 days"),
        "{}",
        refused.stderr
    );
}

#[tokio::test]
async fn signals_are_passed_to_the_command_and_the_lock_is_released_after_it() {
    let client = lock_client().await;
    for (signal, name) in [
        (Signal::SIGINT, "INT"),
        (Signal::SIGTERM, "TERM"),
        (Signal::SIGHUP, "HUP"),
    ] {
        let key = unique("cli-signal");
        let script = until_signalled(name, 5);
        let mut running = Running::start(ddb_lock(&["run", &key, "--", "sh", "-c", &script]));
        assert_eq!(running.line().await, "started");
        running.signal(signal);
        let (status, rest) = running.exit().await;
        assert_eq!(status.code(), Some(5), "{name}: the command's code");
        assert_eq!(rest, [name], "{name} reached the command");
        assert_eq!(
            client.status(&key).await.unwrap(),
            LockStatus::Free,
            "{name}"
        );
    }
}

#[tokio::test]
async fn an_interrupted_wait_runs_nothing_and_leaves_the_holder_alone() {
    let client = lock_client().await;
    let key = unique("cli-interrupt");
    let held = hold(&client, &key, "the-holder", Duration::from_secs(60)).await;
    let proxy = Proxy::start(&endpoint()).await;
    let args = ["run", &key, "--wait", "60s", "--", "echo", "ran"];
    let running = Running::start(ddb_lock_at(&proxy.endpoint(), &args));
    // Refused once: it is waiting, its signal handlers in place.
    proxy
        .wait_for("PutItem", |counts| counts.answered >= 1)
        .await;
    running.signal(Signal::SIGINT);
    let (status, out) = running.exit().await;
    assert_eq!(status.code(), Some(130));
    assert!(out.is_empty(), "{out:?}");
    assert_eq!(
        holder_of(&client, &key).await.as_deref(),
        Some("the-holder")
    );
    client.release(&held).await.unwrap();
}

#[tokio::test]
async fn a_command_that_cannot_be_run_releases_the_lock() {
    let client = lock_client().await;
    let key = unique("cli-missing");
    let out = finish(ddb_lock(&["run", &key, "--", "/no/such/command"])).await;
    assert_eq!(out.code, Some(127));
    assert_eq!(
        out.stderr.trim(),
        "ddb-lock: /no/such/command: command not found"
    );
    assert_eq!(client.status(&key).await.unwrap(), LockStatus::Free);
}

#[tokio::test]
async fn shared_runs_hold_together_and_permits_bound_them() {
    let client = lock_client().await;
    let key = unique("cli-shared");
    let reader = client
        .acquire(&key, &AcquireOptions::new().permits(2).owner("reader"))
        .await
        .unwrap();
    // A second permit is free: this one runs alongside the reader.
    let out = finish(ddb_lock(&[
        "run",
        &key,
        "--permits",
        "2",
        "--no-wait",
        "--",
        "true",
    ]))
    .await;
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    // With one permit only, the reader's hold is a conflict.
    let out = finish(ddb_lock(&[
        "run",
        &key,
        "--permits",
        "1",
        "--no-wait",
        "--",
        "true",
    ]))
    .await;
    assert_eq!(out.code, Some(75), "{}", out.stderr);
    // An exclusive run waits for readers.
    let out = finish(ddb_lock(&["run", &key, "--no-wait", "--", "true"])).await;
    assert_eq!(out.code, Some(75), "{}", out.stderr);
    client.release(&reader).await.unwrap();
}

#[tokio::test]
async fn an_acquisition_interrupted_before_its_answer_leaves_no_lock_behind() {
    let client = lock_client().await;
    let key = unique("cli-dropped");
    let proxy = Proxy::start(&endpoint()).await;
    let mut withheld = proxy.withhold_next_answer("PutItem");
    let args = ["run", &key, "--", "echo", "ran"];
    let running = Running::start(ddb_lock_at(&proxy.endpoint(), &args));
    // The lock is taken in DynamoDB; ddb-lock has not heard so when it is interrupted.
    withheld.applied().await;
    assert!(holder_of(&client, &key).await.is_some());
    running.signal(Signal::SIGINT);
    let (status, out) = running.exit().await;
    assert_eq!(status.code(), Some(130));
    assert!(out.is_empty(), "{out:?}");
    // The acquisition it gave up was released before it exited.
    assert_eq!(client.status(&key).await.unwrap(), LockStatus::Free);
    withheld.drop_it();
}

#[tokio::test]
async fn the_command_is_terminated_when_ddb_lock_is_killed() {
    lock_client().await;
    let key = unique("cli-orphan");
    let script = until_signalled("TERM", 0);
    let mut running = Running::start(ddb_lock(&["run", &key, "--", "sh", "-c", &script]));
    assert_eq!(running.line().await, "started");
    // SIGKILL cannot be caught: nothing extends the lock any more; the command must stop.
    running.signal(Signal::SIGKILL);
    let (status, rest) = running.exit().await;
    assert_eq!(status.code(), None, "ddb-lock was killed");
    assert_eq!(rest, ["TERM"], "the command got SIGTERM");
}

#[tokio::test]
async fn a_lock_lost_unnoticed_before_the_command_exits_is_reported_lost() {
    let client = lock_client().await;
    let key = unique("cli-unnoticed");
    // A long lease: no extension comes before the command exits.
    let script = "echo started; read go; echo done";
    let mut command = ddb_lock(&["run", &key, "--lease", "10m", "--", "sh", "-c", script]);
    command.stdin(std::process::Stdio::piped());
    let mut running = Running::start(command);
    let mut stdin = running.child.stdin.take().unwrap();
    assert_eq!(running.line().await, "started");

    client.force_release(&key).await.unwrap().expect("held");
    use tokio::io::AsyncWriteExt;
    stdin.write_all(b"go\n").await.unwrap();
    let (status, rest) = running.exit().await;
    assert_eq!(rest, ["done"]);
    assert_eq!(
        status.code(),
        Some(76),
        "the command's success is not the lock's"
    );
}

/// The release after the command applied, its answer lost: the SDK's resend finds the lock gone,
/// which its first send did. The command's exit code stands (it was 76, "lock lost", and a
/// wrapper retrying on it ran the job again; found by review).
#[tokio::test]
async fn a_release_whose_answer_was_lost_is_not_a_lost_lock() {
    let client = lock_client().await;
    let proxy = Proxy::start(&endpoint()).await;
    let key = unique("cli-release-answer-lost");
    let script = "echo started; read go; echo done";
    let mut command = ddb_lock_at(
        &proxy.endpoint(),
        &["run", &key, "--lease", "10m", "--", "sh", "-c", script],
    );
    command.stdin(std::process::Stdio::piped());
    let mut running = Running::start(command);
    let mut stdin = running.child.stdin.take().unwrap();
    assert_eq!(running.line().await, "started");
    proxy.drop_next_answer("DeleteItem");
    use tokio::io::AsyncWriteExt;
    stdin.write_all(b"go\n").await.unwrap();
    let (status, rest) = running.exit().await;
    assert_eq!(rest, ["done"]);
    assert_eq!(status.code(), Some(0));
    assert!(proxy.counts("DeleteItem").requests >= 2, "sent again");
    assert_eq!(client.status(&key).await.unwrap(), LockStatus::Free);
}

#[tokio::test]
async fn a_wait_at_a_terminal_shows_who_holds_the_lock() {
    let client = lock_client().await;
    let key = unique("cli-progress");
    let held = hold(&client, &key, "the-holder", Duration::from_secs(60)).await;
    // `script` gives ddb-lock a terminal, and copies what it writes there to its standard output.
    let run = format!(
        "{} run {key} --wait 60s -- echo got-it",
        env!("CARGO_BIN_EXE_ddb-lock")
    );
    let mut terminal = tokio::process::Command::new("script");
    terminal
        .args(["-qec", &run, "/dev/null"])
        .env_clear()
        .envs(environment(&endpoint()))
        .stdin(std::process::Stdio::null())
        .kill_on_drop(true);
    let mut running = Running::start(terminal);
    let waiting = running.line().await;
    assert!(
        waiting.contains(&format!("waiting for `{key}`: held by `the-holder`")),
        "{waiting}"
    );
    client.release(&held).await.unwrap();
    let (status, rest) = running.exit().await;
    assert_eq!(status.code(), Some(0));
    assert_eq!(rest.last().map(|line| line.trim_end()), Some("got-it"));
}

/// A command's own children end with it: ddb-lock's SIGTERM reached the shell alone, which died
/// of it while the work it had started went on after the lock was released (the shell's child,
/// orphaned); and a command that exits leaving work in the background (`cmd &`) has that work
/// ended before the release, not running on unprotected.
#[tokio::test]
async fn the_commands_children_end_with_it_before_the_release() {
    let client = lock_client().await;
    for (script, signalled) in [
        ("sleep 60 >/dev/null & echo $!; wait", true),
        ("sleep 60 >/dev/null & echo $!", false),
    ] {
        let key = unique("cli-group");
        let mut running = Running::start(ddb_lock(&[
            "run", &key, "--grace", "60s", "--", "sh", "-c", script,
        ]));
        let child: i32 = running.line().await.parse().unwrap();
        if signalled {
            running.signal(Signal::SIGTERM);
        }
        let (status, _) = running.exit().await;
        let running_after = runs(child);
        if running_after {
            let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(child), Signal::SIGKILL);
        }
        assert!(
            !running_after,
            "{script}: the command's child outlived ddb-lock ({status:?})"
        );
        assert_eq!(client.status(&key).await.unwrap(), LockStatus::Free);
    }
}

/// A partition: no extension of the lock is answered. The command, which ignores SIGTERM, is
/// killed before the lease stored in the item ends: gone before another process can take the lock
/// (stopped only once the lease had run out, it worked on beside the next holder for the whole
/// `--grace`).
#[tokio::test]
async fn a_partitioned_command_is_gone_before_its_lease_ends() {
    let script = format!("trap '' TERM; echo $$; {WORK_A_MINUTE}");
    gone_before_a_partitioned_lease_ends("cli-partition-early", &script).await;
}

/// The command exits, leaving a process that ignores SIGTERM; then a partition: no extension of
/// the lock is answered. That process is killed before the lease stored in the item ends (it was
/// given the whole `--grace`, and worked on beside the next holder).
#[tokio::test]
async fn what_the_command_leaves_running_is_gone_before_its_lease_ends() {
    // The process left behind says its pid once it ignores SIGTERM; the command then exits.
    let script = format!(
        "f=$(mktemp); inner='trap \"\" TERM; echo $$ > \"$1\"; {WORK_A_MINUTE}'; \
         sh -c \"$inner\" inner \"$f\" & while [ ! -s \"$f\" ]; do sleep 0.01; done; cat \"$f\"; rm -f \"$f\""
    );
    gone_before_a_partitioned_lease_ends("cli-partition-rest", &script).await;
}

/// Runs `script` under a lock of 4 s with a `--grace` of a minute, through a proxy; once the
/// script has said the pid of a process that ignores SIGTERM, cuts the proxy off (a partition):
/// that process must be gone when the lease stored in the item ends, and ddb-lock exits with
/// `--lost-exit-code` (the release could not be confirmed).
async fn gone_before_a_partitioned_lease_ends(name: &str, script: &str) {
    lock_client().await;
    let key = unique(name);
    let proxy = Proxy::start(&endpoint()).await;
    let args = [
        "run",
        &key,
        "--lease",
        "4s",
        "--grace",
        "60s",
        "--lost-exit-code",
        "80",
        "--",
        "sh",
        "-c",
        script,
    ];
    let mut running = Running::start(ddb_lock_at(&proxy.endpoint(), &args));
    let pid: i32 = running.line().await.parse().unwrap();

    proxy.cut_off();
    // The lease as stored stays what the last extension that got through wrote.
    let item = ddb_lock_test_kit::raw_item(&key).await.expect("held");
    let expires_at = ddb_lock::timestamp::parse(ddb_lock_test_kit::string_attr(&item, "ExpiresAt"))
        .expect("a timestamp");
    let until_the_end = (expires_at - chrono::Utc::now())
        .to_std()
        .unwrap_or_default();
    tokio::time::sleep(until_the_end).await;
    let running_at_the_end = runs(pid);
    if running_at_the_end {
        let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), Signal::SIGKILL);
    }
    assert!(
        !running_at_the_end,
        "{name}: it still ran when its lease ended"
    );
    let (status, _) = running.exit().await;
    assert_eq!(status.code(), Some(80), "--lost-exit-code");
}
