//! Running fault scenarios: processes, proxies, the fault schedule, and the checks afterwards.

use crate::check::{self, Violation};
use crate::history::{self, Op, Operation, Outcome};
use crate::layout::Layout;
use crate::register;
use ddb_lock::{AcquireOptions, LockClient, LockStatus};
use ddb_lock_test_kit::proxy::{Faults, Proxy};
use ddb_lock_test_kit::{dynamodb, fenced_table};
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;
use tokio::process::{Child, Command};

/// A fault the suite injects into a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// No fault: the baseline.
    None,
    /// SIGKILL of a client while it holds a lock.
    KillHolder,
    /// SIGSTOP of a holder for 2.5 leases, then SIGCONT: its late writes and release must fail.
    PauseHolder,
    /// 1.5 leases of latency added to every answer of one client, for a third of the run.
    Latency,
    /// One client's every third answer dropped after the request was applied (SDK retries).
    DropAnswers,
    /// One client cut off from the endpoint for 2.5 leases.
    Partition,
    /// Every second request of one client answered with throttling, for a third of the run.
    Throttle,
    /// The endpoint restarted (keeping its data) in the middle of the run.
    RestartEndpoint,
    /// The endpoint process stopped (SIGSTOP) for 2.5 leases, then continued (SIGCONT): every
    /// client's requests hang, then are answered late.
    PauseEndpoint,
    /// One client's clock 0.8 leases ahead, wall-clock takeover rule.
    ClockAhead,
    /// One client's clock 0.8 leases ahead, observed-lease takeover rule for everyone.
    ClockAheadObservedLease,
    /// The negative control: no lock, unfenced writes. The checks must find violations here, or
    /// they could not find them anywhere.
    NoLock,
}

impl Fault {
    /// Every fault, in the order of the report.
    pub const ALL: [Fault; 12] = [
        Fault::None,
        Fault::KillHolder,
        Fault::PauseHolder,
        Fault::Latency,
        Fault::DropAnswers,
        Fault::Partition,
        Fault::Throttle,
        Fault::RestartEndpoint,
        Fault::PauseEndpoint,
        Fault::ClockAhead,
        Fault::ClockAheadObservedLease,
        Fault::NoLock,
    ];

    /// Whether a correct lock shows no violation under this fault (false for the control).
    pub fn expects_no_violation(self) -> bool {
        self != Fault::NoLock
    }
}

impl fmt::Display for Fault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Fault::None => "none",
            Fault::KillHolder => "SIGKILL holder",
            Fault::PauseHolder => "SIGSTOP holder past lease",
            Fault::Latency => "latency > lease",
            Fault::DropAnswers => "answers dropped (retries)",
            Fault::Partition => "partition > lease",
            Fault::Throttle => "throttling",
            Fault::RestartEndpoint => "endpoint restart",
            Fault::PauseEndpoint => "SIGSTOP endpoint past lease",
            Fault::ClockAhead => "clock ahead (wall clock)",
            Fault::ClockAheadObservedLease => "clock ahead (observed lease)",
            Fault::NoLock => "control: no lock, unfenced (must fail)",
        })
    }
}

/// How big a run is.
#[derive(Debug, Clone, Copy)]
pub struct Settings {
    /// Client processes.
    pub clients: usize,
    /// Resources they contend for.
    pub resources: usize,
    /// The lease of every lock.
    pub lease: Duration,
    /// How long the clients run.
    pub duration: Duration,
    /// The table layout.
    pub layout: Layout,
}

/// What one run found.
#[derive(Debug, Clone)]
pub struct RunReport {
    /// Critical sections completed (counter writes that succeeded).
    pub critical_sections: u64,
    /// Faults actually injected (0 when, say, no holder could be found to kill).
    pub injected: u32,
    /// Whether the fault could not be run here (restarting an external endpoint).
    pub skipped: bool,
    /// What was broken.
    pub violations: Vec<Violation>,
}

/// Runs one scenario against the endpoint at `endpoint`, with the client binary `client_bin`.
pub async fn run(
    fault: Fault,
    settings: Settings,
    endpoint: &str,
    client_bin: &Path,
    workdir: &Path,
) -> RunReport {
    fenced_table().await;
    let admin = settings
        .layout
        .builder(dynamodb())
        .build()
        .expect("valid settings");
    admin.create_table().await.expect("the lock table");
    let run_id = uuid::Uuid::new_v4().simple().to_string();
    let resources: Vec<String> = (0..settings.resources)
        .map(|i| format!("faults/{run_id}/r{i}"))
        .collect();
    let takeover = match fault {
        Fault::ClockAheadObservedLease => "observed-lease",
        _ => "wall-clock",
    };
    let skew_ms = settings.lease.as_millis() as i64 * 4 / 5;

    let mut proxies = Vec::new();
    let mut children = Vec::new();
    let mut histories = Vec::new();
    for i in 0..settings.clients {
        let proxy = Proxy::start(endpoint).await;
        let history = workdir.join(format!("{run_id}-client-{i}.jsonl"));
        let offset = match (fault, i) {
            (Fault::ClockAhead | Fault::ClockAheadObservedLease, 0) => skew_ms,
            _ => 0,
        };
        let child = Command::new(client_bin)
            .env("FAULT_ENDPOINT", proxy.endpoint())
            .env("FAULT_SCHEMA", settings.layout.to_string())
            .env("FAULT_CLIENT", format!("client-{i}"))
            .env("FAULT_RESOURCES", resources.join(","))
            .env("FAULT_LEASE_MS", settings.lease.as_millis().to_string())
            .env(
                "FAULT_DURATION_MS",
                settings.duration.as_millis().to_string(),
            )
            .env("FAULT_CLOCK_OFFSET_MS", offset.to_string())
            .env("FAULT_TAKEOVER", takeover)
            .env("FAULT_HISTORY", &history)
            .env(
                "FAULT_UNLOCKED",
                if fault == Fault::NoLock { "1" } else { "0" },
            )
            .stdout(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .expect("fault client starts");
        proxies.push(proxy);
        children.push(child);
        histories.push(history);
    }

    // The fault schedule: a third of the way in, the fault; then the rest of the run.
    let third = settings.duration / 3;
    tokio::time::sleep(third).await;
    let (injected, skipped) =
        inject(fault, settings, &admin, &resources, &proxies, &children).await;

    let mut violations = Vec::new();
    let patience = settings.duration + settings.lease * 10;
    for (i, child) in children.iter_mut().enumerate() {
        if tokio::time::timeout(patience, child.wait()).await.is_err() {
            violations.push(Violation::Wedged {
                resource: format!("client-{i}"),
                detail: "the client process did not finish its run".into(),
            });
            let _ = child.start_kill();
        }
    }
    drop(proxies);

    let mut operations: Vec<Operation> = Vec::new();
    for history in &histories {
        operations.extend(history::read(history).unwrap_or_default());
        let _ = std::fs::remove_file(history);
    }
    let mut registers = BTreeMap::new();
    for resource in &resources {
        match register::read(&dynamodb(), resource).await {
            Some(state) => {
                registers.insert(resource.clone(), state);
            }
            None => violations.push(Violation::Wedged {
                resource: resource.clone(),
                detail: "its register could not be read".into(),
            }),
        }
    }
    violations.extend(check::check(&operations, &registers));
    violations.extend(acquirable(&admin, &resources, settings.lease).await);
    RunReport {
        critical_sections: count(&operations, Op::Write, Outcome::Ok),
        injected,
        skipped,
        violations,
    }
}

fn count(operations: &[Operation], op: Op, outcome: Outcome) -> u64 {
    operations
        .iter()
        .filter(|o| o.op == op && o.outcome == outcome)
        .count() as u64
}

/// Every resource can be locked after the run (no wedged key), within a few leases.
async fn acquirable(admin: &LockClient, resources: &[String], lease: Duration) -> Vec<Violation> {
    let mut violations = Vec::new();
    let opts = AcquireOptions::new()
        .owner("fault-suite-checker")
        .timeout(lease * 4)
        .fencing(true);
    for resource in resources {
        match admin.acquire(resource, &opts).await {
            Ok(lock) => {
                let _ = admin.release(&lock).await;
            }
            Err(err) => violations.push(Violation::Wedged {
                resource: resource.clone(),
                detail: err.to_string(),
            }),
        }
    }
    violations
}

/// The client index holding one of `resources` now, if any (read through the admin client).
async fn holder(admin: &LockClient, resources: &[String]) -> Option<usize> {
    for resource in resources {
        if let Ok(LockStatus::Held { holder, .. }) = admin.status(resource).await {
            if let Some(i) = holder.owner.strip_prefix("client-") {
                return i.parse().ok();
            }
        }
    }
    None
}

/// Waits (briefly) for a client that holds a lock.
async fn find_holder(admin: &LockClient, resources: &[String]) -> Option<usize> {
    for _ in 0..100 {
        if let Some(i) = holder(admin, resources).await {
            return Some(i);
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    None
}

fn signal(child: &Child, signal: Signal) -> bool {
    child
        .id()
        .and_then(|pid| i32::try_from(pid).ok())
        .is_some_and(|pid| kill(Pid::from_raw(pid), signal).is_ok())
}

/// Injects `fault`; returns how many times it was injected and whether it was skipped.
async fn inject(
    fault: Fault,
    settings: Settings,
    admin: &LockClient,
    resources: &[String],
    proxies: &[Proxy],
    children: &[Child],
) -> (u32, bool) {
    let lease = settings.lease;
    let for_a_while = |faults: Faults, how_long: Duration| async move {
        proxies[0].set_faults(faults);
        tokio::time::sleep(how_long).await;
        proxies[0].set_faults(Faults::default());
        (1, false)
    };
    match fault {
        Fault::None | Fault::ClockAhead | Fault::ClockAheadObservedLease | Fault::NoLock => {
            (1, false)
        }
        Fault::KillHolder => match find_holder(admin, resources).await {
            Some(i) => (u32::from(signal(&children[i], Signal::SIGKILL)), false),
            None => (0, false),
        },
        Fault::PauseHolder => match find_holder(admin, resources).await {
            Some(i) if signal(&children[i], Signal::SIGSTOP) => {
                tokio::time::sleep(lease * 5 / 2).await;
                signal(&children[i], Signal::SIGCONT);
                (1, false)
            }
            _ => (0, false),
        },
        Fault::Latency => {
            let faults = Faults {
                latency: lease * 3 / 2,
                ..Faults::default()
            };
            for_a_while(faults, settings.duration / 3).await
        }
        Fault::DropAnswers => {
            let faults = Faults {
                drop_every: 3,
                ..Faults::default()
            };
            for_a_while(faults, settings.duration / 3).await
        }
        Fault::Partition => {
            let faults = Faults {
                cut_off: true,
                ..Faults::default()
            };
            for_a_while(faults, lease * 5 / 2).await
        }
        Fault::Throttle => {
            let faults = Faults {
                throttle_every: 2,
                ..Faults::default()
            };
            for_a_while(faults, settings.duration / 3).await
        }
        Fault::RestartEndpoint => restart_endpoint().await,
        Fault::PauseEndpoint => pause_endpoint(lease * 5 / 2).await,
    }
}

/// `scripts/dynamodb-local.sh ARG`: its exit code and what it printed.
async fn endpoint_script(arg: &str) -> (Option<i32>, String) {
    let script: PathBuf = [
        env!("CARGO_MANIFEST_DIR"),
        "..",
        "..",
        "scripts",
        "dynamodb-local.sh",
    ]
    .iter()
    .collect();
    let output = Command::new(script)
        .arg(arg)
        .stderr(Stdio::inherit())
        .output()
        .await
        .expect("the endpoint script runs");
    let printed = String::from_utf8_lossy(&output.stdout).trim().to_owned();
    (output.status.code(), printed)
}

/// Restarts the endpoint with `scripts/dynamodb-local.sh restart`, which keeps its data.
async fn restart_endpoint() -> (u32, bool) {
    match endpoint_script("restart").await.0 {
        Some(0) => (1, false),
        Some(3) => (0, true), // an external endpoint: not ours to restart
        other => panic!("restarting the endpoint failed: {other:?}"),
    }
}

/// Stops the endpoint process for `how_long`, then continues it.
async fn pause_endpoint(how_long: Duration) -> (u32, bool) {
    let pid = match endpoint_script("pid").await {
        (Some(0), pid) => Pid::from_raw(pid.parse().expect("a process id")),
        (Some(3), _) => return (0, true), // an external endpoint: not ours to pause
        other => panic!("finding the endpoint process failed: {other:?}"),
    };
    kill(pid, Signal::SIGSTOP).expect("SIGSTOP the endpoint");
    tokio::time::sleep(how_long).await;
    kill(pid, Signal::SIGCONT).expect("SIGCONT the endpoint");
    (1, false)
}
