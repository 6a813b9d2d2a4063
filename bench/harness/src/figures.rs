//! Measuring one contender: its driver run through each scenario behind a counting proxy.

use crate::acquiring::requests_to_acquire;
use crate::contenders::Contender;
use ddb_lock_test_kit::monotonic_ns;
use ddb_lock_test_kit::proxy::{CallerRequest, Proxy};
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use serde_json::Value;
use std::process::Stdio;
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};

/// The lease every contender is configured with (its own default poll period otherwise).
pub const LEASE_MS: u64 = 2000;

/// How much work each scenario does.
#[derive(Debug, Clone, Copy)]
pub struct Sizes {
    /// Uncontended acquire + release rounds.
    pub uncontended: usize,
    /// Acquisitions per worker, 8 workers on one resource.
    pub contended: usize,
    /// Hold time in the contended scenario.
    pub hold_ms: u64,
    /// Acquisitions per worker, 64 workers on 64 resources.
    pub many: usize,
    /// Rounds of a 10-resource set, one worker.
    pub sets: usize,
}

impl Sizes {
    /// The CI form: every scenario runs, briefly.
    pub const QUICK: Sizes = Sizes {
        uncontended: 10,
        contended: 2,
        hold_ms: 10,
        many: 1,
        sets: 2,
    };
    /// The documented run.
    pub const FULL: Sizes = Sizes {
        uncontended: 100,
        contended: 10,
        hold_ms: 10,
        many: 10,
        sets: 20,
    };
}

/// Workers of the contended scenarios (hand-off, readers, semaphore).
pub const CONTENDED_WORKERS: usize = 8;
/// The holds of the varying scenario, least and most, in ms: the contended scenario with holds
/// that follow one sequence through this range in every driver (`--hold-max-ms`).
pub const VARYING_HOLD_MS: (u64, u64) = (1, 30);
/// The semaphore's permits in the semaphore scenario.
pub const PERMITS: usize = 4;
/// Resources per acquisition in the set scenario.
pub const SET_SIZE: usize = 10;

/// One acquisition as a driver reports it (CLOCK_MONOTONIC nanoseconds).
#[derive(Debug, Clone, Copy)]
pub struct Acquisition {
    /// The worker that acquired.
    pub worker: usize,
    /// When it started waiting.
    pub wait_start: u64,
    /// When it had acquired.
    pub acquired: u64,
    /// When it started its release.
    pub release_start: u64,
    /// When it had released.
    pub released: u64,
}

/// What one run of a contender measured.
#[derive(Debug, Clone)]
pub struct Figures {
    /// The settings the driver reported.
    pub settings: Value,
    /// Requests per uncontended acquire + release.
    pub requests_per_round: f64,
    /// Uncontended acquire + release latency, p50 and p99, in ms.
    pub round_ms: (f64, f64),
    /// Contended hand-off: acquisitions per second.
    pub handoff_per_s: f64,
    /// Contended: time from a release to the next acquisition, p50 and p99, in ms.
    pub gap_ms: (f64, f64),
    /// Contended: requests per acquisition.
    pub requests_per_acquisition: f64,
    /// Contended: the requests a worker sent while acquiring, per acquisition, its release apart
    /// (NaN: the driver's workers do not sign with keys of their own).
    pub acquire_requests_per_acquisition: f64,
    /// Contended: the longest any worker waited, in ms.
    pub longest_wait_ms: f64,
    /// 64 workers on 64 resources: acquisitions per second.
    pub many_per_s: f64,
    /// From SIGKILL of the holder to the next acquisition, in ms; NaN if no takeover happened
    /// within 5 leases (a lock without a lease is never taken over).
    pub takeover_ms: f64,
    /// The contended scenario in shared mode: acquisitions per second (NaN: no shared mode).
    pub readers_per_s: f64,
    /// The contended scenario with [`PERMITS`] permits: acquisitions per second (NaN: none).
    pub semaphore_per_s: f64,
    /// [`SET_SIZE`] resources together, one worker: acquire + release p50 and p99 in ms (NaN:
    /// the driver has no set scenario).
    pub set_round_ms: (f64, f64),
    /// Requests per acquire + release of [`SET_SIZE`] resources together.
    pub requests_per_set: f64,
    /// The contended scenario with holds that vary ([`VARYING_HOLD_MS`]).
    pub varying: Handoff,
}

/// How a contended scenario's lock went from holder to holder.
#[derive(Debug, Clone, Copy)]
pub struct Handoff {
    /// Acquisitions per second.
    pub per_s: f64,
    /// Time from a release to the next acquisition, p50 and p99, in ms.
    pub gap_ms: (f64, f64),
    /// Requests per acquisition.
    pub requests_per_acquisition: f64,
    /// Requests sent while acquiring, per acquisition, its release apart (NaN: unknown).
    pub acquire_requests_per_acquisition: f64,
    /// The longest any worker waited, in ms.
    pub longest_wait_ms: f64,
}

impl Handoff {
    /// The hand-off of `acquisitions`, which made `requests`, the proxy's `calls` among them; an
    /// error if two holds overlapped.
    fn of(
        requests: usize,
        acquisitions: &[Acquisition],
        calls: &[CallerRequest],
    ) -> Result<Handoff, String> {
        let mut by_acquisition = acquisitions.to_vec();
        by_acquisition.sort_by_key(|a| a.acquired);
        if by_acquisition
            .windows(2)
            .any(|w| w[1].acquired < w[0].release_start)
        {
            return Err("contended holds overlapped".into());
        }
        let gaps = sorted(
            by_acquisition
                .windows(2)
                .map(|w| ms(w[1].acquired.saturating_sub(w[0].released)))
                .collect(),
        );
        Ok(Handoff {
            per_s: acquisitions.len() as f64 / span(acquisitions),
            gap_ms: (percentile(&gaps, 50.0), percentile(&gaps, 99.0)),
            requests_per_acquisition: requests as f64 / acquisitions.len() as f64,
            acquire_requests_per_acquisition: requests_to_acquire(acquisitions, calls),
            longest_wait_ms: acquisitions
                .iter()
                .map(|a| ms(a.acquired - a.wait_start))
                .fold(0.0, f64::max),
        })
    }
}

impl Figures {
    /// One line for the console.
    pub fn summary(&self) -> String {
        format!(
            "{:.1} req/round, p50 {:.1} ms; hand-off {:.1}/s gap p50 {:.1} ms, {:.2} req/acq ({:.2} to acquire); many {:.0}/s; takeover {:.0} ms",
            self.requests_per_round,
            self.round_ms.0,
            self.handoff_per_s,
            self.gap_ms.0,
            self.requests_per_acquisition,
            self.acquire_requests_per_acquisition,
            self.many_per_s,
            self.takeover_ms
        )
    }
}

pub(crate) fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = ((p / 100.0) * (sorted.len() - 1) as f64).round() as usize;
    sorted[rank.min(sorted.len() - 1)]
}

pub(crate) fn sorted(mut values: Vec<f64>) -> Vec<f64> {
    values.sort_by(f64::total_cmp);
    values
}

pub(crate) fn ms(ns: u64) -> f64 {
    ns as f64 / 1e6
}

/// A running driver: its process and its output lines.
struct Driver {
    child: Child,
    lines: Lines<BufReader<ChildStdout>>,
    /// Where the driver waits for `go` after its ready line.
    stdin: ChildStdin,
}

impl Driver {
    fn start(
        contender: &Contender,
        proxy: &Proxy,
        scenario: &str,
        resource: &str,
        args: &[String],
    ) -> Driver {
        let mut child = Command::new(&contender.command[0])
            .args(&contender.command[1..])
            .args(["--endpoint", &proxy.endpoint()])
            .args(["--table", &contender.table])
            .args(["--scenario", scenario])
            .args(["--resource", resource])
            .args(["--lease-ms", &LEASE_MS.to_string()])
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .unwrap_or_else(|e| panic!("start {:?}: {e}", contender.command));
        let stdout = child.stdout.take().expect("piped stdout");
        let stdin = child.stdin.take().expect("piped stdin");
        Driver {
            child,
            lines: BufReader::new(stdout).lines(),
            stdin,
        }
    }

    async fn next(&mut self) -> Result<Value, String> {
        let line = self
            .lines
            .next_line()
            .await
            .map_err(|e| e.to_string())?
            .ok_or("the driver ended early")?;
        let value: Value =
            serde_json::from_str(&line).map_err(|e| format!("bad line {line:?}: {e}"))?;
        match value.get("error") {
            Some(error) => Err(format!("driver error: {error}")),
            None => Ok(value),
        }
    }

    /// Waits for the ready line; returns the settings. The driver then waits for [`go`](Self::go),
    /// so that requests counted from here on are the timed work's only (its setup's requests,
    /// such as creating the table, come before the ready line).
    async fn ready(&mut self) -> Result<Value, String> {
        let line = self.next().await?;
        Ok(line.get("settings").cloned().unwrap_or(Value::Null))
    }

    /// Lets the driver start its timed work.
    async fn go(&mut self) -> Result<(), String> {
        self.stdin
            .write_all(b"go\n")
            .await
            .map_err(|e| format!("go: {e}"))?;
        self.stdin.flush().await.map_err(|e| format!("go: {e}"))
    }

    /// Reads acquisition lines to the end and waits for a clean exit.
    async fn acquisitions(mut self) -> Result<Vec<Acquisition>, String> {
        let mut found = Vec::new();
        loop {
            match self.next().await {
                Ok(line) => {
                    let field = |name: &str| {
                        line.get(name)
                            .and_then(Value::as_u64)
                            .ok_or_else(|| format!("no {name} in {line}"))
                    };
                    let worker = field("worker")?;
                    found.push(Acquisition {
                        worker: usize::try_from(worker).map_err(|e| e.to_string())?,
                        wait_start: field("wait_start_ns")?,
                        acquired: field("acquired_ns")?,
                        release_start: field("release_start_ns")?,
                        released: field("released_ns")?,
                    });
                }
                Err(end) if end == "the driver ended early" => break,
                Err(other) => return Err(other),
            }
        }
        let status = self.child.wait().await.map_err(|e| e.to_string())?;
        if !status.success() {
            return Err(format!("the driver exited with {status}"));
        }
        Ok(found)
    }
}

/// What a scenario did: the driver's settings, the requests made after its `go`, its
/// acquisitions, and the proxy's record of those requests.
struct Ran {
    settings: Value,
    requests: usize,
    acquisitions: Vec<Acquisition>,
    calls: Vec<CallerRequest>,
}

/// Runs a scenario.
async fn scenario(
    contender: &Contender,
    proxy: &Proxy,
    name: &str,
    workers: usize,
    ops: usize,
    hold_ms: u64,
    extra: &[&str],
) -> Result<Ran, String> {
    let args: Vec<String> = [
        "--workers".to_owned(),
        workers.to_string(),
        "--ops".into(),
        ops.to_string(),
        "--hold-ms".into(),
        hold_ms.to_string(),
    ]
    .into_iter()
    .chain(extra.iter().map(|s| (*s).to_owned()))
    .collect();
    let mut driver = Driver::start(contender, proxy, name, &fresh_resource(), &args);
    let settings = driver.ready().await?;
    let before = proxy.total_requests();
    let go_ns = monotonic_ns();
    driver.go().await?;
    let acquisitions = driver.acquisitions().await?;
    if acquisitions.len() != workers * ops {
        return Err(format!(
            "{name}: {} acquisitions, expected {}",
            acquisitions.len(),
            workers * ops
        ));
    }
    let requests = proxy.total_requests() - before;
    let mut calls = proxy.requests_by_caller();
    calls.retain(|call| call.received_ns >= go_ns);
    Ok(Ran {
        settings,
        requests,
        acquisitions,
        calls,
    })
}

/// Measures every figure of `contender` once.
pub async fn measure(
    contender: &Contender,
    proxy: &Proxy,
    sizes: Sizes,
    _run: usize,
) -> Result<Figures, String> {
    let Ran {
        settings,
        requests: uncontended_requests,
        acquisitions: rounds,
        ..
    } = scenario(
        contender,
        proxy,
        "uncontended",
        1,
        sizes.uncontended,
        0,
        &[],
    )
    .await?;
    let round_ms = sorted(
        rounds
            .iter()
            .map(|a| ms(a.released - a.wait_start))
            .collect(),
    );

    let contended = scenario(
        contender,
        proxy,
        "contended",
        CONTENDED_WORKERS,
        sizes.contended,
        sizes.hold_ms,
        &[],
    )
    .await?;
    let handoff = Handoff::of(
        contended.requests,
        &contended.acquisitions,
        &contended.calls,
    )?;
    let most = VARYING_HOLD_MS.1.to_string();
    let varying = scenario(
        contender,
        proxy,
        "contended",
        CONTENDED_WORKERS,
        sizes.contended,
        VARYING_HOLD_MS.0,
        &["--hold-max-ms", &most],
    )
    .await?;
    let varying = Handoff::of(varying.requests, &varying.acquisitions, &varying.calls)?;

    let many = scenario(contender, proxy, "many", 64, sizes.many, 0, &[])
        .await?
        .acquisitions;
    let (readers_per_s, semaphore_per_s) = if contender.kinds {
        (
            kind_throughput(contender, proxy, sizes, &["--shared"], None).await?,
            kind_throughput(
                contender,
                proxy,
                sizes,
                &["--permits", &PERMITS.to_string()],
                Some(PERMITS),
            )
            .await?,
        )
    } else {
        (f64::NAN, f64::NAN)
    };
    let (set_round_ms, requests_per_set) = if contender.sets {
        let size = SET_SIZE.to_string();
        let Ran {
            requests,
            acquisitions: sets,
            ..
        } = scenario(
            contender,
            proxy,
            "set",
            1,
            sizes.sets,
            0,
            &["--set-size", &size],
        )
        .await?;
        let round_ms = sorted(sets.iter().map(|a| ms(a.released - a.wait_start)).collect());
        (
            (percentile(&round_ms, 50.0), percentile(&round_ms, 99.0)),
            requests as f64 / sets.len() as f64,
        )
    } else {
        ((f64::NAN, f64::NAN), f64::NAN)
    };

    Ok(Figures {
        settings,
        requests_per_round: uncontended_requests as f64 / rounds.len() as f64,
        round_ms: (percentile(&round_ms, 50.0), percentile(&round_ms, 99.0)),
        handoff_per_s: handoff.per_s,
        gap_ms: handoff.gap_ms,
        requests_per_acquisition: handoff.requests_per_acquisition,
        acquire_requests_per_acquisition: handoff.acquire_requests_per_acquisition,
        longest_wait_ms: handoff.longest_wait_ms,
        many_per_s: many.len() as f64 / span(&many),
        takeover_ms: takeover(contender, proxy).await.unwrap_or(f64::NAN),
        readers_per_s,
        semaphore_per_s,
        set_round_ms,
        requests_per_set,
        varying,
    })
}

/// The seconds from the first wait to the last release.
fn span(all: &[Acquisition]) -> f64 {
    let first = all.iter().map(|a| a.wait_start).min().unwrap_or(0);
    let last = all.iter().map(|a| a.released).max().unwrap_or(0);
    (last - first) as f64 / 1e9
}

/// The contended scenario in a lock kind (`extra`: `--shared`, `--permits N`): acquisitions per
/// second. With `at_most` holders allowed, more at once (by the drivers' time stamps, from
/// acquired to release start) is an error.
async fn kind_throughput(
    contender: &Contender,
    proxy: &Proxy,
    sizes: Sizes,
    extra: &[&str],
    at_most: Option<usize>,
) -> Result<f64, String> {
    let held = scenario(
        contender,
        proxy,
        "contended",
        CONTENDED_WORKERS,
        sizes.contended,
        sizes.hold_ms,
        extra,
    )
    .await?
    .acquisitions;
    if let Some(limit) = at_most {
        let most = most_at_once(&held);
        if most > limit {
            return Err(format!("{most} holders at once, over {limit} permits"));
        }
    }
    Ok(held.len() as f64 / span(&held))
}

/// The most acquisitions held at one moment (held from `acquired` to `release_start`).
fn most_at_once(all: &[Acquisition]) -> usize {
    let mut events: Vec<(u64, i32)> = all
        .iter()
        .flat_map(|a| [(a.acquired, 1), (a.release_start, -1)])
        .collect();
    // At one instant, a release before an acquisition: touching holds do not overlap.
    events.sort();
    let (mut now, mut most) = (0i32, 0i32);
    for (_, change) in events {
        now += change;
        most = most.max(now);
    }
    usize::try_from(most).unwrap_or(0)
}

fn fresh_resource() -> String {
    format!("bench/{}", uuid::Uuid::new_v4().simple())
}

/// SIGKILL of a holder, then the time until a waiting process acquires.
async fn takeover(contender: &Contender, proxy: &Proxy) -> Result<f64, String> {
    let resource = fresh_resource();
    let mut holder = Driver::start(contender, proxy, "hold", &resource, &[]);
    holder.ready().await?;
    holder.go().await?;
    holder.next().await?; // acquired
    let mut taker = Driver::start(contender, proxy, "takeover", &resource, &[]);
    taker.ready().await?;
    taker.go().await?;
    // Let the taker reach its wait loop (it is refused at least once) before the crash.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let pid = holder
        .child
        .id()
        .and_then(|p| i32::try_from(p).ok())
        .ok_or("holder has no pid")?;
    let killed = monotonic_ns();
    kill(Pid::from_raw(pid), Signal::SIGKILL).map_err(|e| e.to_string())?;
    let line = tokio::time::timeout(Duration::from_millis(LEASE_MS * 5), taker.next())
        .await
        .map_err(|_| "no takeover within 5 leases".to_owned())??;
    let acquired = line
        .get("acquired_ns")
        .and_then(Value::as_u64)
        .ok_or(format!("no acquired_ns in {line}"))?;
    let _ = taker.child.wait().await;
    Ok(ms(acquired.saturating_sub(killed)))
}
