//! Running the `ddb-lock` binary as a process against the local endpoint.
#![allow(dead_code)] // each test file uses its own part

use ddb_lock_test_kit::{endpoint, TABLE};
use std::process::{ExitStatus, Stdio};
use tokio::io::{AsyncBufReadExt, BufReader, Lines};
use tokio::process::{Child, ChildStdout, Command};

/// The whole environment of a `ddb-lock` process talking to `endpoint` (the local endpoint, or a
/// proxy in front of it) about the tests' lock table: nothing else from the test's environment.
pub fn environment(endpoint: &str) -> Vec<(&'static str, String)> {
    vec![
        ("PATH", std::env::var("PATH").unwrap_or_default()),
        ("HOME", std::env::temp_dir().display().to_string()),
        ("AWS_EC2_METADATA_DISABLED", "true".into()),
        ("AWS_ACCESS_KEY_ID", "local".into()),
        ("AWS_SECRET_ACCESS_KEY", "local".into()),
        ("AWS_REGION", "us-east-1".into()),
        ("AWS_ENDPOINT_URL_DYNAMODB", endpoint.into()),
        ("DDB_LOCK_TABLE", TABLE.into()),
    ]
}

/// `ddb-lock` with `args` in the [`environment`] of `endpoint`.
pub fn ddb_lock_at(endpoint: &str, args: &[&str]) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_ddb-lock"));
    command
        .env_clear()
        .envs(environment(endpoint))
        .args(args)
        .stdin(Stdio::null())
        .kill_on_drop(true);
    command
}

/// `ddb-lock` with `args` against the local endpoint.
pub fn ddb_lock(args: &[&str]) -> Command {
    ddb_lock_at(&endpoint(), args)
}

/// What a finished process said.
#[derive(Debug)]
pub struct Finished {
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
}

impl Finished {
    /// Standard output parsed as JSON.
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.stdout)
            .unwrap_or_else(|e| panic!("stdout is not JSON ({e}): {}", self.stdout))
    }
}

/// Runs `command` to its end.
pub async fn finish(mut command: Command) -> Finished {
    let out = command.output().await.expect("run ddb-lock");
    Finished {
        code: out.status.code(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// A `ddb-lock` process still running, its standard output read line by line.
pub struct Running {
    pub child: Child,
    pub stdout: Lines<BufReader<ChildStdout>>,
}

impl Running {
    /// Starts `command` with its standard output piped.
    pub fn start(mut command: Command) -> Running {
        let mut child = command
            .stdout(Stdio::piped())
            .spawn()
            .expect("spawn ddb-lock");
        let stdout = BufReader::new(child.stdout.take().expect("stdout")).lines();
        Running { child, stdout }
    }

    /// The next line the process (or its command) wrote; panics at the end of the output.
    pub async fn line(&mut self) -> String {
        self.stdout
            .next_line()
            .await
            .expect("read stdout")
            .expect("a line before the end of the output")
    }

    /// Sends `signal` to the ddb-lock process.
    pub fn signal(&self, signal: nix::sys::signal::Signal) {
        let pid = self.child.id().expect("running") as i32;
        nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), signal).expect("kill");
    }

    /// Waits for the exit; the rest of the output.
    pub async fn exit(mut self) -> (ExitStatus, Vec<String>) {
        let mut rest = Vec::new();
        while let Some(line) = self.stdout.next_line().await.expect("read stdout") {
            rest.push(line);
        }
        (self.child.wait().await.expect("wait"), rest)
    }
}

/// The owner of the live exclusive lock on `key`, if there is one.
pub async fn holder_of(client: &ddb_lock::LockClient, key: &str) -> Option<String> {
    match client.status(key).await.expect("status") {
        ddb_lock::LockStatus::Held { holder, .. } => Some(holder.owner),
        _ => None,
    }
}

/// The body of a command that works until signalled.
pub const WORK_A_MINUTE: &str =
    "i=0; while [ $i -lt 1200 ]; do sleep 0.05; i=$((i+1)); done; echo unsignalled";

/// Whether process `pid` runs (a zombie, ended but not yet reaped by whoever inherited it, does
/// not).
pub fn runs(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        let state = stat.rsplit_once(") ").map(|(_, rest)| rest.trim_start());
        !state.is_some_and(|state| state.starts_with('Z'))
    })
}
