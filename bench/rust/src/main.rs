//! `bench-driver`: one benchmark driver for three DynamoDB lock contenders, speaking the driver
//! contract that every driver of the benchmark (Rust, Python, Node) implements, so that one
//! orchestrator can run them all and compare their numbers.
//!
//! ```text
//! bench-driver --contender C --endpoint URL --table NAME --scenario S --resource PREFIX
//!              --workers N --ops N --lease-ms L --hold-ms H [--poll-ms P]
//! ```
//!
//! Contenders (`--contender`):
//! - `ddb-lock`: the library of this workspace; `LockClient::acquire` (timeout 60 s) and
//!   `release`. `--poll-ms P` sets its backoff bounds to `[2P, 2P]`: its delays stay full-jitter,
//!   uniform in `[0, 2P]` (a mean of P, the same average polling rate as a fixed period P), and
//!   never past the holder's lease end. The workers share one client, as the tasks of one process
//!   would (they line up in it, and a release hands the lock to the next in one request);
//!   `--client-per-worker` gives each its own, so that they contend through DynamoDB only, as
//!   separate processes (Lambda functions) do.
//! - `ddb-lock-lambda`: the Lambda handler of this workspace, invoked in-process with the events
//!   of its README (`acquire` with `wait_ms` 60000, `release`); its answers are serialized to JSON
//!   as the Lambda runtime does, and its metrics lines are formatted but discarded (stdout belongs
//!   to this contract). `--poll-ms` does not apply (the function has no such setting); the ready
//!   line says so.
//! - `dynamodb-lease`: the crates.io crate with its defaults; `acquire_timeout` and
//!   `Lease::release`. Its lease is whole seconds, at least 2: `--lease-ms` is rounded up to that.
//!   `--poll-ms P` sets its acquire cooldown (default 1 s). Each worker has its own client (over
//!   the shared SDK client): the crate serializes acquisitions of one client in-process with a
//!   local mutex, so a shared client would not contend through DynamoDB. `--shared-lease-client`
//!   shares one client between the workers instead.
//!
//! Every contender uses one SDK client per process (region `us-east-1`, credentials
//! `test`/`test`, endpoint `--endpoint`), shared by the workers, except where each worker has a
//! lock client of its own (ddb-lock with `--client-per-worker`, dynamodb-lease without
//! `--shared-lease-client`): there worker `i`'s lock client has an SDK client of its own, built
//! from the shared one's configuration with the access key id `worker<i>` (secret `test`; DynamoDB Local accepts
//! letters and digits only in an access key id), so
//! that the orchestrator's proxy can tell the workers' requests apart; these clients share the one
//! HTTP client, and its connection pool. The ready line's `callers` says which. `--table` is
//! created if missing, in the contender's schema, before anything is timed.
//!
//! Scenarios (`--scenario`):
//! - `uncontended`: one worker, on `PREFIX/0`, `--ops` times acquire, hold, release.
//! - `contended`: `--workers` concurrent tasks, all on `PREFIX/0`, `--ops` acquisitions each.
//! - `many`: like `contended`, but worker `i` on `PREFIX/i`.
//! - `hold`: acquire `PREFIX/0`, keep it (extending it as the contender does: ddb-lock's guard
//!   heartbeat, the Lambda's `extend` every lease/3, dynamodb-lease's own extension), print, sleep
//!   until killed. If the lock is lost meanwhile, print an error and exit 1.
//! - `takeover`: acquire `PREFIX/0`, waiting up to max(10 × lease, 60 s), print, release, exit 0.
//! - `set`: like `contended`, but each acquisition takes `PREFIX/0` … `PREFIX/{N-1}` (`--set-size
//!   N`) together: ddb-lock in one lock set (`acquire_set`, one transaction; `release_set`),
//!   dynamodb-lease one lease after another in name order (the deadlock-free way to take several
//!   without sets), released together. Not for the Lambda contender.
//!
//! Lock kinds (ddb-lock only): `--shared` takes every acquisition in shared mode (readers), and
//! `--permits N` in shared mode with at most N holders (a semaphore); `--fair` makes every
//! acquisition fair (waiters join the lock's line and are granted in turn).
//!
//! Each acquisition is held `--hold-ms` (0: released at once) before it is released; with
//! `--hold-max-ms M`, holds vary: worker `i`'s `n`-th acquisition (from 0) is held `--hold-ms` +
//! ((7n + 11i) mod (M - `--hold-ms` + 1)) ms, the sequence every driver follows. A release
//! that finds the lock lost (held past its lease: outside `hold`, only dynamodb-lease extends its
//! leases, always, in the background) is a failure.
//!
//! Output, stdout, one JSON object per line, flushed after each line. Time stamps are
//! `CLOCK_MONOTONIC` in integer nanoseconds, comparable between processes of one machine:
//! - first, before any timed work: `{"ready": true, "settings": {…}}`, the options actually used;
//!   then the driver waits for a line `go` on stdin before it starts (so that the orchestrator
//!   counts the timed work's requests only, none of the setup's);
//! - per acquisition (`uncontended`, `contended`, `many`): `{"worker": i, "resource": "…",
//!   "wait_start_ns": t0, "acquired_ns": t1, "release_start_ns": t2, "released_ns": t3}`;
//! - `hold`, `takeover`: `{"acquired_ns": t}`;
//! - on failure: `{"error": "…"}`, and exit code 1 (also for invalid arguments).

use aws_sdk_dynamodb::client::Waiters;
use aws_sdk_dynamodb::config::{Credentials, Region};
use aws_sdk_dynamodb::types::{
    AttributeDefinition, BillingMode, KeySchemaElement, KeyType, ScalarAttributeType,
    TimeToLiveSpecification, TimeToLiveStatus,
};
use clap::{Parser, ValueEnum};
use ddb_lock::{AcquireOptions, BackoffBounds, LockClient, LockSet, Mode, ReleaseOutcome};
use ddb_lock_lambda::{Config, Handler, HandlerError};
use lambda_runtime::{Context, LambdaEvent};
use nix::time::{clock_gettime, ClockId};
use serde::Serialize;
use serde_json::{json, Value};
use std::error::Error as StdError;
use std::io::Write;
use std::sync::Arc;
use std::time::Duration;
use tokio::task::JoinSet;

/// How long a waiting acquire of the timed scenarios may wait.
const ACQUIRE_TIMEOUT: Duration = Duration::from_secs(60);
/// The smallest lease dynamodb-lease accepts, in seconds.
const LEASE_MIN_TTL_SECONDS: u64 = 2;
/// Its key attribute and its TTL attribute (its `DESIGN.md`).
const LEASE_KEY: &str = "key";
const LEASE_EXPIRY: &str = "lease_expiry";

type Result<T, E = String> = std::result::Result<T, E>;

/// The command line of the contract.
#[derive(Debug, Parser)]
#[command(name = "bench-driver", about = "Benchmark driver for DynamoDB locks")]
struct Args {
    /// The lock implementation under test.
    #[arg(long, value_enum)]
    contender: Contender,
    /// DynamoDB endpoint URL.
    #[arg(long)]
    endpoint: String,
    /// Lock table, created if missing.
    #[arg(long)]
    table: String,
    /// What to run.
    #[arg(long, value_enum)]
    scenario: Scenario,
    /// Resource name prefix: resources are `PREFIX/0`, `PREFIX/1`, …
    #[arg(long)]
    resource: String,
    /// Concurrent workers (`contended`, `many`).
    #[arg(long, default_value_t = 1)]
    workers: usize,
    /// Acquisitions per worker (`uncontended`, `contended`, `many`).
    #[arg(long, default_value_t = 1)]
    ops: usize,
    /// Lease of every acquisition, in milliseconds.
    #[arg(long)]
    lease_ms: u64,
    /// How long each acquisition is held before release, in milliseconds.
    #[arg(long, default_value_t = 0)]
    hold_ms: u64,
    /// Holds vary from `--hold-ms` up to this many milliseconds (see the module documentation).
    #[arg(long)]
    hold_max_ms: Option<u64>,
    /// Pins the contender's retry delay while waiting (see the module documentation).
    #[arg(long)]
    poll_ms: Option<u64>,
    /// dynamodb-lease only: one client shared by all workers instead of one each.
    #[arg(long)]
    shared_lease_client: bool,
    /// ddb-lock only: one client per worker instead of one shared by all.
    #[arg(long)]
    client_per_worker: bool,
    /// ddb-lock only: shared mode (readers).
    #[arg(long)]
    shared: bool,
    /// ddb-lock only: shared mode with at most this many holders (a semaphore).
    #[arg(long)]
    permits: Option<u32>,
    /// ddb-lock only: fair acquisitions (waiters join the lock's line and are granted in turn).
    #[arg(long)]
    fair: bool,
    /// `set`: resources per acquisition.
    #[arg(long, default_value_t = 10)]
    set_size: usize,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Contender {
    /// The library of this workspace.
    DdbLock,
    /// The Lambda handler of this workspace, invoked in-process.
    DdbLockLambda,
    /// The dynamodb-lease crate, with its defaults.
    DynamodbLease,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Scenario {
    Uncontended,
    Contended,
    Many,
    Hold,
    Takeover,
    Set,
}

/// One acquisition's time stamps.
#[derive(Debug, Serialize)]
struct Record<'a> {
    worker: usize,
    resource: &'a str,
    wait_start_ns: i64,
    acquired_ns: i64,
    release_start_ns: i64,
    released_ns: i64,
}

/// `CLOCK_MONOTONIC` in nanoseconds.
fn now_ns() -> i64 {
    let ts = clock_gettime(ClockId::CLOCK_MONOTONIC).expect("CLOCK_MONOTONIC is readable");
    ts.tv_sec() * 1_000_000_000 + ts.tv_nsec()
}

/// Writes one line to stdout and flushes it.
fn emit(line: &impl Serialize) -> Result<()> {
    let text = serde_json::to_string(line).map_err(|e| format!("serializing output: {e}"))?;
    let mut out = std::io::stdout().lock();
    writeln!(out, "{text}")
        .and_then(|()| out.flush())
        .map_err(|e| format!("writing stdout: {e}"))
}

/// Reports a failure as the contract says, and exits 1.
fn fail(error: &str) -> ! {
    // Nothing more can be reported if stdout itself is broken.
    let _ = emit(&json!({ "error": error }));
    std::process::exit(1)
}

/// An error and its sources, on one line.
fn describe(error: &(dyn StdError + 'static)) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.contains(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    text
}

fn lambda_error(error: &HandlerError) -> String {
    format!("{}: {}", error.name(), describe(error))
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// The SDK client of the process. Its HTTP client is set here, not left to the SDK's default (the
/// same HTTP stack, built the way the SDK builds its default), so that the clients built from its
/// configuration ([`worker_dynamodb`]) share it and its connection pool: the SDK makes a default
/// HTTP client for every client it builds.
fn dynamodb(endpoint: &str) -> aws_sdk_dynamodb::Client {
    use aws_smithy_http_client::proxy::ProxyConfig;
    use aws_smithy_http_client::tls::{rustls_provider::CryptoMode, Provider};
    use aws_smithy_http_client::{Builder, ConnectorBuilder};
    let http = Builder::new().build_with_connector_fn(|settings, components| {
        let mut connector =
            ConnectorBuilder::default().tls_provider(Provider::Rustls(CryptoMode::AwsLc));
        connector.set_connector_settings(settings.cloned());
        if let Some(components) = components {
            connector.set_sleep_impl(components.sleep_impl());
        }
        connector.set_proxy_config(Some(ProxyConfig::from_env()));
        connector.build()
    });
    let config = aws_sdk_dynamodb::Config::builder()
        .behavior_version_latest()
        .region(Region::new("us-east-1"))
        .credentials_provider(Credentials::new("test", "test", None, None, "bench"))
        .endpoint_url(endpoint)
        .http_client(http)
        .build();
    aws_sdk_dynamodb::Client::from_conf(config)
}

/// Worker `index`'s SDK client: `sdk`'s configuration (and HTTP client) with the access key id
/// `worker<index>`, by which the orchestrator's proxy tells its requests from the others'.
fn worker_dynamodb(sdk: &aws_sdk_dynamodb::Client, index: usize) -> aws_sdk_dynamodb::Client {
    let credentials = Credentials::new(format!("worker{index}"), "test", None, None, "bench");
    let config = sdk
        .config()
        .to_builder()
        .credentials_provider(credentials)
        .build();
    aws_sdk_dynamodb::Client::from_conf(config)
}

/// What the ready line says of the credentials: one access key per worker, or one for all.
fn callers(per_worker: bool) -> &'static str {
    if per_worker {
        "one access key per worker: worker<i>"
    } else {
        "one access key for all workers: test"
    }
}

/// A worker's identity: its index and its owner name, unique across processes and runs.
#[derive(Debug, Clone)]
struct Worker {
    index: usize,
    owner: String,
}

/// A contender, ready to use.
enum Contestant {
    DdbLock {
        /// One shared by the workers, or one per worker.
        clients: Vec<LockClient>,
        /// Exclusive, or shared (`--shared`, `--permits`).
        mode: Mode,
        /// A semaphore's permits.
        permits: Option<u32>,
        /// Fair acquisitions (`--fair`).
        fair: bool,
    },
    Lambda {
        handler: Arc<Handler>,
    },
    Lease {
        /// One per worker, or a single one shared by all.
        clients: Vec<dynamodb_lease::Client>,
        ttl_seconds: u64,
    },
}

/// An acquisition, to release.
enum Held {
    DdbLock {
        lock: ddb_lock::Lock,
        /// The worker's client: a release goes through the client that acquired.
        client: LockClient,
    },
    Lambda {
        resource: String,
        owner: String,
        lock_id: String,
    },
    Lease(dynamodb_lease::Lease),
    DdbLockSet {
        set: LockSet,
        client: LockClient,
    },
    Leases(Vec<dynamodb_lease::Lease>),
}

impl Contestant {
    /// Prepares the contender: its table, its clients. Returns it and the settings it uses.
    async fn prepare(args: &Args, workers: usize) -> Result<(Contestant, Value)> {
        let sdk = dynamodb(&args.endpoint);
        let lease = Duration::from_millis(args.lease_ms);
        let heartbeat = (args.scenario == Scenario::Hold).then(|| millis(lease / 3));
        let wait = wait_for(args.scenario, lease);
        let mut settings = json!({
            "driver": args.contender.to_possible_value().map(|v| v.get_name().to_owned()),
            "scenario": args.scenario.to_possible_value().map(|v| v.get_name().to_owned()),
            "table": args.table,
            "workers": workers,
            "ops": args.ops,
            "hold_ms": args.hold_ms,
            "lease_ms": args.lease_ms,
            "acquire_timeout_ms": millis(wait),
            "poll_ms": args.poll_ms,
            "sdk_clients": 1,
            "callers": callers(false),
        });
        let kinds = args.shared || args.permits.is_some();
        if (kinds || args.fair) && args.contender != Contender::DdbLock {
            return Err("--shared, --permits and --fair are for ddb-lock only".to_owned());
        }
        if args.scenario == Scenario::Set {
            if args.contender == Contender::DdbLockLambda {
                return Err("the set scenario is not for the Lambda contender".to_owned());
            }
            merge(
                &mut settings,
                json!({
                    "set_size": args.set_size,
                    "set_acquisition": match args.contender {
                        Contender::DynamodbLease => "one lease after another, in name order",
                        _ => "one lock set: one TransactWriteItems",
                    },
                }),
            );
        }
        let contestant = match args.contender {
            Contender::DdbLock => {
                let backoff = match args.poll_ms {
                    Some(p) => BackoffBounds::new(
                        Duration::from_millis(2 * p),
                        Duration::from_millis(2 * p),
                    ),
                    None => BackoffBounds::default(),
                };
                let count = if args.client_per_worker { workers } else { 1 };
                let clients = (0..count)
                    .map(|index| {
                        let sdk = if args.client_per_worker {
                            worker_dynamodb(&sdk, index)
                        } else {
                            sdk.clone()
                        };
                        LockClient::builder(sdk)
                            .table_name(&args.table)
                            .lease(lease)
                            .acquire_timeout(wait)
                            .backoff(backoff)
                            .build()
                            .map_err(|e| describe(&e))
                    })
                    .collect::<Result<Vec<_>>>()?;
                clients[0]
                    .create_table()
                    .await
                    .map_err(|e| format!("creating the table: {}", describe(&e)))?;
                merge(
                    &mut settings,
                    json!({
                        "sdk_clients": count,
                        "callers": callers(args.client_per_worker),
                        "backoff": backoff_settings(backoff),
                        "heartbeat_ms": heartbeat,
                        "takeover_rule": "wall_clock",
                        "lock_clients": if args.client_per_worker {
                            "one per worker: waiters contend through DynamoDB only, as separate processes do"
                        } else {
                            "one, shared by the workers: waiters line up in the client and a release wakes the first"
                        },
                    }),
                );
                let mode = if kinds { Mode::Shared } else { Mode::Exclusive };
                merge(
                    &mut settings,
                    json!({ "mode": mode.to_string(), "permits": args.permits, "fair": args.fair }),
                );
                Contestant::DdbLock {
                    clients,
                    mode,
                    permits: args.permits,
                    fair: args.fair,
                }
            }
            Contender::DdbLockLambda => {
                let table = args.table.clone();
                let config = Config::from_lookup(|var| {
                    (var == ddb_lock_lambda::config::var::TABLE).then(|| table.clone())
                })
                .map_err(|e| describe(&e))?;
                let client = config.lock_client(sdk).map_err(|e| describe(&e))?;
                client
                    .create_table()
                    .await
                    .map_err(|e| format!("creating the table: {}", describe(&e)))?;
                let handler = Handler::new(client, config.clone()).with_metrics_writer(|_line| {});
                merge(
                    &mut settings,
                    json!({
                        "wait_ms": millis(wait),
                        "backoff": backoff_settings(BackoffBounds::default()),
                        "poll_ms": null,
                        "poll_ms_ignored": args.poll_ms,
                        "idempotent_acquire": true,
                        "heartbeat_ms": heartbeat,
                        "heartbeat": heartbeat.map(|_| "extend op every lease/3"),
                        "deadline_margin_ms": millis(config.deadline_margin),
                        "invocation": "in-process Handler::handle, answers serialized to JSON",
                        "metrics_lines": "formatted, discarded",
                        "handlers": "one, shared by the workers",
                    }),
                );
                Contestant::Lambda {
                    handler: Arc::new(handler),
                }
            }
            Contender::DynamodbLease => {
                let ttl_seconds = args.lease_ms.div_ceil(1000).max(LEASE_MIN_TTL_SECONDS);
                create_lease_table(&sdk, &args.table).await?;
                let count = if args.shared_lease_client { 1 } else { workers };
                let mut clients = Vec::with_capacity(count);
                for index in 0..count {
                    let mut builder = dynamodb_lease::Client::builder()
                        .table_name(&args.table)
                        .lease_ttl_seconds(
                            u32::try_from(ttl_seconds).map_err(|_| "--lease-ms is too large")?,
                        );
                    if let Some(p) = args.poll_ms {
                        builder = builder.acquire_cooldown(Duration::from_millis(p));
                    }
                    let sdk = if args.shared_lease_client {
                        sdk.clone()
                    } else {
                        worker_dynamodb(&sdk, index)
                    };
                    let client = builder
                        .build_and_check_db(sdk)
                        .await
                        .map_err(|e| format!("dynamodb-lease table check: {e:#}"))?;
                    clients.push(client);
                }
                // The crate's defaults, as its builder computes them.
                let extend_every = Duration::from_secs_f64(ttl_seconds as f64 / 2.0);
                let cooldown = args.poll_ms.unwrap_or(1000);
                merge(
                    &mut settings,
                    json!({
                        "lease_ms": ttl_seconds * 1000,
                        "requested_lease_ms": args.lease_ms,
                        "lease_ttl_seconds": ttl_seconds,
                        "expiry_resolution": "whole unix seconds",
                        "extend_every_ms": millis(extend_every),
                        "acquire_cooldown_ms": cooldown,
                        "acquire_timeout_ms": millis(wait_for(
                            args.scenario,
                            Duration::from_secs(ttl_seconds)
                        )),
                        "sdk_clients": count,
                        "callers": callers(!args.shared_lease_client),
                        "lease_clients": if args.shared_lease_client {
                            "one, shared by the workers"
                        } else {
                            "one per worker"
                        },
                    }),
                );
                Contestant::Lease {
                    clients,
                    ttl_seconds,
                }
            }
        };
        Ok((contestant, settings))
    }

    /// The longest lease the contender really uses for `lease`.
    fn lease(&self, lease: Duration) -> Duration {
        match self {
            Contestant::Lease { ttl_seconds, .. } => Duration::from_secs(*ttl_seconds),
            _ => lease,
        }
    }

    /// Acquires `resource`, waiting up to `wait` with the contender's own strategy.
    async fn acquire(
        &self,
        worker: &Worker,
        resource: &str,
        lease: Duration,
        wait: Duration,
    ) -> Result<Held> {
        match self {
            Contestant::DdbLock {
                clients,
                mode,
                permits,
                fair,
            } => {
                let (client, opts) = ddb_lock_request(clients, worker, lease, wait);
                let opts = match permits {
                    Some(permits) => opts.permits(*permits),
                    None => opts.mode(*mode),
                };
                let opts = opts.fair(*fair);
                client
                    .acquire(resource, &opts)
                    .await
                    .map(|lock| Held::DdbLock {
                        lock,
                        client: client.clone(),
                    })
                    .map_err(|e| format!("acquire: {}", describe(&e)))
            }
            Contestant::Lambda { handler } => {
                let event = json!({
                    "op": "acquire", "resource": resource, "owner": worker.owner,
                    "lease_ms": millis(lease), "wait_ms": millis(wait),
                });
                let answer = invoke(handler, event).await?;
                let lock_id = answer
                    .get("lock_id")
                    .and_then(Value::as_str)
                    .ok_or_else(|| format!("acquire answered without a lock_id: {answer}"))?;
                Ok(Held::Lambda {
                    resource: resource.to_owned(),
                    owner: worker.owner.clone(),
                    lock_id: lock_id.to_owned(),
                })
            }
            Contestant::Lease { clients, .. } => {
                let client = &clients[worker.index % clients.len()];
                client
                    .acquire_timeout(resource, wait)
                    .await
                    .map(Held::Lease)
                    .map_err(|e| format!("acquire: {e:#}"))
            }
        }
    }

    /// Acquires every one of `resources` together, waiting up to `wait`: a lock set, or one
    /// lease after another in name order.
    async fn acquire_set(
        &self,
        worker: &Worker,
        resources: &[String],
        lease: Duration,
        wait: Duration,
    ) -> Result<Held> {
        match self {
            Contestant::DdbLock { clients, .. } => {
                let (client, opts) = ddb_lock_request(clients, worker, lease, wait);
                let members: Vec<(&str, Mode)> = resources
                    .iter()
                    .map(|r| (r.as_str(), Mode::Exclusive))
                    .collect();
                client
                    .acquire_set(&members, &opts)
                    .await
                    .map(|set| Held::DdbLockSet {
                        set,
                        client: client.clone(),
                    })
                    .map_err(|e| format!("acquire_set: {}", describe(&e)))
            }
            Contestant::Lease { .. } => {
                let mut sorted = resources.to_vec();
                sorted.sort();
                let mut leases = Vec::with_capacity(sorted.len());
                for resource in &sorted {
                    match self.acquire(worker, resource, lease, wait).await? {
                        Held::Lease(one) => leases.push(one),
                        _ => return Err("acquire: an acquisition of another contender".to_owned()),
                    }
                }
                Ok(Held::Leases(leases))
            }
            Contestant::Lambda { .. } => {
                Err("the set scenario is not for the Lambda contender".to_owned())
            }
        }
    }

    /// Releases an acquisition; an acquisition that was lost meanwhile is an error.
    async fn release(&self, held: Held) -> Result<()> {
        match (self, held) {
            (Contestant::DdbLock { .. }, Held::DdbLock { lock, client }) => {
                match client
                    .release(&lock)
                    .await
                    .map_err(|e| format!("release: {}", describe(&e)))?
                {
                    ReleaseOutcome::Released => Ok(()),
                    other => Err(format!("release: the lock was lost: {other:?}")),
                }
            }
            (
                Contestant::Lambda { handler },
                Held::Lambda {
                    resource,
                    owner,
                    lock_id,
                },
            ) => {
                let event = json!({
                    "op": "release", "resource": resource, "owner": owner, "lock_id": lock_id,
                });
                let answer = invoke(handler, event).await?;
                match answer.get("released") {
                    Some(Value::Bool(true)) => Ok(()),
                    _ => Err(format!("release: the lock was lost: {answer}")),
                }
            }
            (Contestant::Lease { .. }, Held::Lease(lease)) => {
                lease.release().await.map_err(|e| format!("release: {e:#}"))
            }
            (Contestant::DdbLock { .. }, Held::DdbLockSet { set, client }) => {
                for (handle, outcome) in client.release_set(&set).await {
                    match outcome.map_err(|e| format!("release: {}", describe(&e)))? {
                        ReleaseOutcome::Released => {}
                        other => {
                            return Err(format!(
                                "release: {} was lost: {other:?}",
                                handle.resource()
                            ))
                        }
                    }
                }
                Ok(())
            }
            (Contestant::Lease { .. }, Held::Leases(leases)) => {
                for lease in leases {
                    lease
                        .release()
                        .await
                        .map_err(|e| format!("release: {e:#}"))?;
                }
                Ok(())
            }
            _ => Err("release: an acquisition of another contender".to_owned()),
        }
    }

    /// Acquires `resource` and keeps it, extending it as the contender does. Returns once acquired,
    /// with a future that completes (with the reason) only if the lock is lost.
    async fn acquire_and_keep(
        &self,
        worker: &Worker,
        resource: &str,
        lease: Duration,
        wait: Duration,
    ) -> Result<tokio::task::JoinHandle<String>> {
        match self {
            Contestant::DdbLock { clients, .. } => {
                let (client, opts) = ddb_lock_request(clients, worker, lease, wait);
                let guard = client
                    .lock(resource, &opts)
                    .await
                    .map_err(|e| format!("acquire: {}", describe(&e)))?;
                Ok(tokio::spawn(async move {
                    format!("the lock was lost: {}", guard.lost().await)
                }))
            }
            Contestant::Lambda { handler } => {
                let Held::Lambda {
                    resource,
                    owner,
                    lock_id,
                } = self.acquire(worker, resource, lease, wait).await?
                else {
                    return Err("acquire: an acquisition of another contender".to_owned());
                };
                let handler = Arc::clone(handler);
                Ok(tokio::spawn(async move {
                    let mut beat = tokio::time::interval(lease / 3);
                    beat.tick().await;
                    loop {
                        beat.tick().await;
                        let event = json!({
                            "op": "extend", "resource": resource, "owner": owner,
                            "lock_id": lock_id, "lease_ms": millis(lease),
                        });
                        if let Err(e) = invoke(&handler, event).await {
                            return format!("the lock was lost: extend: {e}");
                        }
                    }
                }))
            }
            Contestant::Lease { .. } => {
                let Held::Lease(lease) = self.acquire(worker, resource, lease, wait).await? else {
                    return Err("acquire: an acquisition of another contender".to_owned());
                };
                Ok(tokio::spawn(async move {
                    let mut check = tokio::time::interval(Duration::from_millis(100));
                    while lease.is_healthy() {
                        check.tick().await;
                    }
                    "the lease's extension task stopped: its lease is lost".to_owned()
                }))
            }
        }
    }
}

/// The client of `worker` (its own, or the one shared by all) and its acquire options.
fn ddb_lock_request<'a>(
    clients: &'a [LockClient],
    worker: &Worker,
    lease: Duration,
    wait: Duration,
) -> (&'a LockClient, AcquireOptions) {
    let opts = AcquireOptions::new()
        .owner(&worker.owner)
        .lease(lease)
        .timeout(wait);
    (&clients[worker.index % clients.len()], opts)
}

/// Invokes the Lambda handler as its runtime does; the answer as the runtime serializes it.
async fn invoke(handler: &Handler, event: Value) -> Result<Value> {
    let op = event
        .get("op")
        .and_then(Value::as_str)
        .unwrap_or("?")
        .to_owned();
    let answer = handler
        .handle(LambdaEvent::new(event, Context::default()))
        .await
        .map_err(|e| format!("{op}: {}", lambda_error(&e)))?;
    serde_json::to_value(answer).map_err(|e| format!("{op}: serializing the answer: {e}"))
}

fn backoff_settings(bounds: BackoffBounds) -> Value {
    json!({
        "initial_ms": millis(bounds.initial()),
        "max_ms": millis(bounds.max()),
        "jitter": "full: uniform in [0, min(max, initial * 2^n)], capped at the holder's lease end",
    })
}

/// Adds `extra`'s fields to `settings`, replacing those already there.
fn merge(settings: &mut Value, extra: Value) {
    if let (Value::Object(settings), Value::Object(extra)) = (settings, extra) {
        settings.extend(extra);
    }
}

/// How long a waiting acquire of `scenario` may wait, for a contender whose lease is `lease`.
fn wait_for(scenario: Scenario, lease: Duration) -> Duration {
    match scenario {
        Scenario::Takeover => (lease * 10).max(ACQUIRE_TIMEOUT),
        _ => ACQUIRE_TIMEOUT,
    }
}

/// Creates dynamodb-lease's table if missing: hash key `key` (S), TTL on `lease_expiry`, which is
/// what its `build_and_check_db` checks. A table of another schema is left alone (the check then
/// fails and says why).
async fn create_lease_table(sdk: &aws_sdk_dynamodb::Client, table: &str) -> Result<()> {
    let attribute = AttributeDefinition::builder()
        .attribute_name(LEASE_KEY)
        .attribute_type(ScalarAttributeType::S)
        .build()
        .map_err(|e| describe(&e))?;
    let key = KeySchemaElement::builder()
        .attribute_name(LEASE_KEY)
        .key_type(KeyType::Hash)
        .build()
        .map_err(|e| describe(&e))?;
    let created = sdk
        .create_table()
        .table_name(table)
        .attribute_definitions(attribute)
        .key_schema(key)
        .billing_mode(BillingMode::PayPerRequest)
        .send()
        .await;
    if let Err(e) = created {
        if !e
            .as_service_error()
            .is_some_and(|e| e.is_resource_in_use_exception())
        {
            return Err(format!("creating the table: {}", describe(&e)));
        }
    }
    sdk.wait_until_table_exists()
        .table_name(table)
        .wait(Duration::from_secs(60))
        .await
        .map_err(|e| format!("waiting for the table: {}", describe(&e)))?;
    let ttl = sdk
        .describe_time_to_live()
        .table_name(table)
        .send()
        .await
        .map_err(|e| format!("reading the table's TTL: {}", describe(&e)))?;
    let description = ttl.time_to_live_description();
    let enabled = description.is_some_and(|d| {
        d.attribute_name() == Some(LEASE_EXPIRY)
            && matches!(
                d.time_to_live_status(),
                Some(TimeToLiveStatus::Enabled | TimeToLiveStatus::Enabling)
            )
    });
    let other_ttl = description.is_some_and(|d| {
        d.attribute_name().is_some_and(|name| name != LEASE_EXPIRY)
            && !matches!(d.time_to_live_status(), Some(TimeToLiveStatus::Disabled))
    });
    if !enabled && !other_ttl {
        let spec = TimeToLiveSpecification::builder()
            .enabled(true)
            .attribute_name(LEASE_EXPIRY)
            .build()
            .map_err(|e| describe(&e))?;
        let updated = sdk
            .update_time_to_live()
            .table_name(table)
            .time_to_live_specification(spec)
            .send()
            .await;
        // Another driver may have enabled it meanwhile: the crate's check decides.
        if let Err(e) = updated {
            eprintln!("enabling TTL on {table}: {}", describe(&e));
        }
    }
    Ok(())
}

/// How long the acquisitions are held: from `least_ms` to `most_ms` milliseconds.
#[derive(Debug, Clone, Copy)]
struct Holds {
    least_ms: u64,
    most_ms: u64,
}

impl Holds {
    /// The hold of worker `worker`'s `op`-th acquisition: the sequence every driver follows.
    fn of(self, worker: usize, op: usize) -> Duration {
        let steps = self.most_ms - self.least_ms + 1;
        let step = (7 * op as u64 + 11 * worker as u64) % steps;
        Duration::from_millis(self.least_ms + step)
    }
}

/// Runs `ops` acquisitions of `resources` by `worker` (one resource, or a set), printing one
/// record each.
async fn work(
    contestant: Arc<Contestant>,
    worker: Worker,
    resources: Vec<String>,
    ops: usize,
    lease: Duration,
    holds: Holds,
) -> Result<()> {
    let resource = resources.join(",");
    for op in 0..ops {
        let wait_start_ns = now_ns();
        let held = match resources.as_slice() {
            [one] => {
                contestant
                    .acquire(&worker, one, lease, ACQUIRE_TIMEOUT)
                    .await?
            }
            set => {
                contestant
                    .acquire_set(&worker, set, lease, ACQUIRE_TIMEOUT)
                    .await?
            }
        };
        let acquired_ns = now_ns();
        let hold = holds.of(worker.index, op);
        if !hold.is_zero() {
            tokio::time::sleep(hold).await;
        }
        let release_start_ns = now_ns();
        contestant.release(held).await?;
        let released_ns = now_ns();
        emit(&Record {
            worker: worker.index,
            resource: &resource,
            wait_start_ns,
            acquired_ns,
            release_start_ns,
            released_ns,
        })?;
    }
    Ok(())
}

/// Waits for the orchestrator's `go` line on stdin (see the output contract above).
fn wait_for_go() -> Result<()> {
    let mut line = String::new();
    std::io::stdin()
        .read_line(&mut line)
        .map_err(|e| format!("waiting for go: {e}"))?;
    match line.trim() {
        "go" => Ok(()),
        other => Err(format!("expected go on stdin, got {other:?}")),
    }
}

async fn run(args: Args) -> Result<()> {
    if args.lease_ms == 0 {
        return Err("--lease-ms must be positive".to_owned());
    }
    let workers = match args.scenario {
        Scenario::Contended | Scenario::Many | Scenario::Set => args.workers,
        Scenario::Uncontended | Scenario::Hold | Scenario::Takeover => 1,
    };
    if workers == 0 {
        return Err("--workers must be positive".to_owned());
    }
    let run_id = uuid::Uuid::new_v4().simple().to_string();
    let owner = |index: usize| Worker {
        index,
        owner: format!("bench-{}-{}-w{index}", std::process::id(), &run_id[..8]),
    };
    let (contestant, settings) = Contestant::prepare(&args, workers).await?;
    let lease = contestant.lease(Duration::from_millis(args.lease_ms));
    let holds = Holds {
        least_ms: args.hold_ms,
        most_ms: args.hold_max_ms.unwrap_or(args.hold_ms),
    };
    if holds.most_ms < holds.least_ms {
        return Err("--hold-max-ms must not be below --hold-ms".into());
    }
    let first = format!("{}/0", args.resource);
    emit(&json!({ "ready": true, "settings": settings }))?;
    wait_for_go()?;

    match args.scenario {
        Scenario::Uncontended | Scenario::Contended | Scenario::Many | Scenario::Set => {
            let contestant = Arc::new(contestant);
            let mut tasks = JoinSet::new();
            for index in 0..workers {
                let resources = match args.scenario {
                    Scenario::Many => vec![format!("{}/{index}", args.resource)],
                    Scenario::Set => (0..args.set_size)
                        .map(|i| format!("{}/{i}", args.resource))
                        .collect(),
                    _ => vec![first.clone()],
                };
                tasks.spawn(work(
                    Arc::clone(&contestant),
                    owner(index),
                    resources,
                    args.ops,
                    lease,
                    holds,
                ));
            }
            while let Some(done) = tasks.join_next().await {
                done.map_err(|e| format!("worker task: {e}"))??;
            }
            Ok(())
        }
        Scenario::Hold => {
            let lost = contestant
                .acquire_and_keep(&owner(0), &first, lease, ACQUIRE_TIMEOUT)
                .await?;
            emit(&json!({ "acquired_ns": now_ns() }))?;
            Err(lost.await.map_err(|e| format!("keeper task: {e}"))?)
        }
        Scenario::Takeover => {
            let held = contestant
                .acquire(&owner(0), &first, lease, wait_for(args.scenario, lease))
                .await?;
            emit(&json!({ "acquired_ns": now_ns() }))?;
            contestant.release(held).await
        }
    }
}

#[tokio::main]
async fn main() {
    let args = match Args::try_parse() {
        Ok(args) => args,
        Err(e) if !e.use_stderr() => {
            // --help, --version
            let _ = e.print();
            std::process::exit(0)
        }
        Err(e) => fail(&e.render().to_string()),
    };
    match run(args).await {
        Ok(()) => std::process::exit(0),
        Err(error) => fail(&error),
    }
}
