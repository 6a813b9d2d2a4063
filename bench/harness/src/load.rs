//! The endpoint's ceiling: a load generator of PutItem + DeleteItem pairs that is not the
//! bottleneck itself.
//!
//! It speaks DynamoDB's JSON protocol over plain HTTP/1.1 keep-alive connections, straight to the
//! endpoint (no proxy), with request bodies formatted in place and a fixed, unsigned
//! `Authorization` header (local engines do not verify signatures). So its CPU cost per pair is a
//! small fraction of an SDK client's (whose signing and (de)serialization, in a debug build, cost
//! the client more CPU than the engine spends on the request). It runs at several concurrency
//! levels and keeps the best, and reads the CPU time it used and the engine used at each level, so
//! that the report can show which of the two was saturated.

use crate::cpu::{Reading, Spent};
use ddb_lock_test_kit::{dynamodb_at, ensure_table, TableKind};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

/// The table the generator writes to, in ddb-lock's schema (`PK` hash, `SK` range).
pub const TABLE: &str = ddb_lock_test_kit::TABLE;

/// A signature-shaped header that local engines accept without checking it.
const AUTHORIZATION: &str = "AWS4-HMAC-SHA256 Credential=test/20260101/us-east-1/dynamodb/aws4_request, SignedHeaders=content-type;host;x-amz-date;x-amz-target, Signature=0000000000000000000000000000000000000000000000000000000000000000";

/// How the generator loads the endpoint.
#[derive(Debug, Clone)]
pub struct Plan {
    /// Concurrency levels (workers, each with its own connection and key).
    pub levels: Vec<usize>,
    /// Load before the measured window of each level (connections open, engine at speed).
    pub warm_up: Duration,
    /// The measured window of each level.
    pub window: Duration,
}

impl Plan {
    /// The CI form: four levels, short windows.
    pub fn quick() -> Plan {
        Plan {
            levels: vec![1, 4, 16, 64],
            warm_up: Duration::from_millis(300),
            window: Duration::from_secs(1),
        }
    }

    /// The documented run.
    pub fn full() -> Plan {
        Plan {
            levels: vec![1, 2, 4, 8, 16, 32, 64],
            warm_up: Duration::from_millis(500),
            window: Duration::from_secs(3),
        }
    }
}

/// What one concurrency level measured.
#[derive(Debug, Clone, Copy)]
pub struct Level {
    /// Concurrent workers.
    pub workers: usize,
    /// PutItem + DeleteItem pairs per second in the window.
    pub pairs_per_s: f64,
    /// CPU time, wall time of the window.
    pub spent: Spent,
    /// Pairs completed in the window.
    pub pairs: u64,
}

impl Level {
    /// Cores the generator kept busy.
    pub fn generator_cores(&self) -> f64 {
        self.spent.own / self.spent.wall
    }

    /// Cores the engine kept busy, if its process is known.
    pub fn engine_cores(&self) -> Option<f64> {
        self.spent.engine.map(|e| e / self.spent.wall)
    }

    /// The generator's CPU time per pair, ms.
    pub fn generator_ms_per_pair(&self) -> f64 {
        1e3 * self.spent.own / self.pairs.max(1) as f64
    }

    /// The engine's CPU time per pair, ms.
    pub fn engine_ms_per_pair(&self) -> Option<f64> {
        self.spent
            .engine
            .map(|e| 1e3 * e / self.pairs.max(1) as f64)
    }
}

/// The levels of one kind of pair, and the best of them.
#[derive(Debug, Clone)]
pub struct Sweep {
    /// Every level, in the order run.
    pub levels: Vec<Level>,
}

impl Sweep {
    /// The level of the highest rate.
    pub fn best(&self) -> Option<&Level> {
        self.levels
            .iter()
            .max_by(|a, b| a.pairs_per_s.total_cmp(&b.pairs_per_s))
    }
}

/// The ceiling of one run: both kinds of pair.
#[derive(Debug, Clone)]
pub struct Ceiling {
    /// Unconditional PutItem + DeleteItem.
    pub unconditional: Sweep,
    /// With the least conditions a lock needs.
    pub conditional: Sweep,
}

impl Ceiling {
    /// Measures both kinds (creating the table if missing).
    pub async fn measure(
        endpoint: &str,
        plan: &Plan,
        engine: Option<u32>,
    ) -> Result<Ceiling, String> {
        ensure_table(&dynamodb_at(endpoint), TABLE, TableKind::Locks).await;
        Ok(Ceiling {
            unconditional: sweep(endpoint, false, plan, engine).await?,
            conditional: sweep(endpoint, true, plan, engine).await?,
        })
    }
}

/// One keep-alive HTTP/1.1 connection to the endpoint.
struct Connection {
    stream: BufReader<TcpStream>,
    host: String,
    line: String,
}

impl Connection {
    async fn open(host: &str) -> Result<Connection, String> {
        let stream = TcpStream::connect(host)
            .await
            .map_err(|e| format!("connecting to {host}: {e}"))?;
        stream.set_nodelay(true).map_err(|e| e.to_string())?;
        Ok(Connection {
            stream: BufReader::new(stream),
            host: host.to_owned(),
            line: String::new(),
        })
    }

    /// Sends one request and reads its answer; an answer other than 200 is an error.
    async fn call(&mut self, operation: &str, body: &str) -> Result<(), String> {
        let request = format!(
            "POST / HTTP/1.1\r\nHost: {}\r\nContent-Type: application/x-amz-json-1.0\r\n\
             X-Amz-Target: DynamoDB_20120810.{operation}\r\nX-Amz-Date: 20260101T000000Z\r\n\
             Authorization: {AUTHORIZATION}\r\nContent-Length: {}\r\n\r\n{body}",
            self.host,
            body.len()
        );
        let io = |e: std::io::Error| format!("{operation}: {e}");
        self.stream
            .get_mut()
            .write_all(request.as_bytes())
            .await
            .map_err(io)?;
        self.line.clear();
        self.stream.read_line(&mut self.line).await.map_err(io)?;
        let ok = self.line.starts_with("HTTP/1.1 200");
        let status = self.line.trim_end().to_owned();
        let mut length = 0usize;
        loop {
            self.line.clear();
            if self.stream.read_line(&mut self.line).await.map_err(io)? == 0 {
                return Err(format!("{operation}: the connection closed"));
            }
            if self.line == "\r\n" {
                break;
            }
            if let Some((name, value)) = self.line.split_once(':') {
                if name.eq_ignore_ascii_case("content-length") {
                    length = value.trim().parse().map_err(|_| "bad Content-Length")?;
                }
            }
        }
        let mut body = vec![0; length];
        self.stream.read_exact(&mut body).await.map_err(io)?;
        if ok {
            Ok(())
        } else {
            Err(format!(
                "{operation}: {status}: {}",
                String::from_utf8_lossy(&body)
            ))
        }
    }
}

/// One worker: pairs on its own key until `stop`, counting them in `done`.
async fn worker(
    host: String,
    key: String,
    conditional: bool,
    stop: Arc<AtomicBool>,
    done: Arc<AtomicU64>,
) -> Result<(), String> {
    let mut connection = Connection::open(&host).await?;
    let mut round = 0u64;
    while !stop.load(Ordering::Relaxed) {
        round += 1;
        let (put_condition, delete_condition) = if conditional {
            (
                r#","ConditionExpression":"attribute_not_exists(PK)""#.to_owned(),
                format!(
                    r#","ConditionExpression":"LockID = :id","ExpressionAttributeValues":{{":id":{{"S":"{round}"}}}}"#
                ),
            )
        } else {
            (String::new(), String::new())
        };
        let key_json = format!(r#"{{"PK":{{"S":"{key}"}},"SK":{{"S":"LOCK"}}}}"#);
        let put = format!(
            r#"{{"TableName":"{TABLE}","Item":{{"PK":{{"S":"{key}"}},"SK":{{"S":"LOCK"}},"LockID":{{"S":"{round}"}}}}{put_condition}}}"#
        );
        let delete = format!(r#"{{"TableName":"{TABLE}","Key":{key_json}{delete_condition}}}"#);
        connection.call("PutItem", &put).await?;
        connection.call("DeleteItem", &delete).await?;
        done.fetch_add(1, Ordering::Relaxed);
    }
    Ok(())
}

/// `host:port` of an `http://` endpoint.
fn host_of(endpoint: &str) -> Result<String, String> {
    let rest = endpoint
        .strip_prefix("http://")
        .ok_or_else(|| format!("{endpoint}: the load generator speaks plain http only"))?;
    Ok(rest.trim_end_matches('/').to_owned())
}

/// Runs `workers` workers: `plan.warm_up` of load, then the measured window.
async fn level(
    host: &str,
    workers: usize,
    conditional: bool,
    plan: &Plan,
    engine: Option<u32>,
) -> Result<Level, String> {
    let run = uuid::Uuid::new_v4().simple().to_string();
    let stop = Arc::new(AtomicBool::new(false));
    let done = Arc::new(AtomicU64::new(0));
    let tasks: Vec<_> = (0..workers)
        .map(|i| {
            tokio::spawn(worker(
                host.to_owned(),
                format!("LOCK#bench-ceiling/{run}/{i}"),
                conditional,
                Arc::clone(&stop),
                Arc::clone(&done),
            ))
        })
        .collect();
    tokio::time::sleep(plan.warm_up).await;
    let (before, count) = (Reading::now(engine), done.load(Ordering::Relaxed));
    tokio::time::sleep(plan.window).await;
    let (spent, pairs) = (before.since(engine), done.load(Ordering::Relaxed) - count);
    stop.store(true, Ordering::Relaxed);
    for task in tasks {
        task.await.map_err(|e| format!("load worker: {e}"))??;
    }
    Ok(Level {
        workers,
        pairs_per_s: pairs as f64 / spent.wall,
        spent,
        pairs,
    })
}

/// Sweeps the plan's levels with unconditional pairs or with the least conditions a lock needs
/// (`attribute_not_exists(PK)` on the put, `LockID = :id` on the delete). The table must exist.
pub async fn sweep(
    endpoint: &str,
    conditional: bool,
    plan: &Plan,
    engine: Option<u32>,
) -> Result<Sweep, String> {
    let host = host_of(endpoint)?;
    let mut levels = Vec::with_capacity(plan.levels.len());
    for &workers in &plan.levels {
        levels.push(level(&host, workers, conditional, plan, engine).await?);
    }
    Ok(Sweep { levels })
}

/// Prints a sweep as a table (for `bench ceiling`).
pub fn print(title: &str, sweep: &Sweep) {
    println!("{title}");
    println!("| workers | pairs/s | engine cores | engine CPU ms/pair | generator cores | generator CPU ms/pair |");
    println!("|---:|---:|---:|---:|---:|---:|");
    for l in &sweep.levels {
        let opt = |v: Option<f64>| v.map_or("?".to_owned(), |v| format!("{v:.2}"));
        println!(
            "| {} | {:.0} | {} | {} | {:.2} | {:.3} |",
            l.workers,
            l.pairs_per_s,
            opt(l.engine_cores()),
            opt(l.engine_ms_per_pair()),
            l.generator_cores(),
            l.generator_ms_per_pair()
        );
    }
}
