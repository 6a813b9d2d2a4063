//! The history a fault-suite client records: one JSON line when it invokes an operation and one
//! when the operation completes, with monotonic timestamps comparable across processes of one
//! machine (`CLOCK_MONOTONIC`). A line written before a crash survives it; an operation whose
//! completion is missing is indeterminate.

use ddb_lock_test_kit::monotonic_ns;
use serde::{Deserialize, Serialize};
use std::io::{BufRead, Write};
use std::path::Path;

/// What a client did, in the order of its critical section.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Op {
    /// Acquire the lock (fenced).
    Acquire,
    /// A fenced write of the register item that raises its fence to the holder's token.
    Claim,
    /// A consistent read of the register's counter.
    Read,
    /// A fenced write of the counter, read value + 1.
    Write,
    /// Release the lock.
    Release,
}

/// How an operation ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// It happened (acquired, written, read, released).
    Ok,
    /// It certainly did not happen (held, fenced out, not the owner any more).
    Fail,
    /// Unknown: an error after which the operation may or may not have been applied.
    Info,
}

/// One line of a history.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Line {
    /// The client (and lock owner) name.
    pub client: String,
    /// The operation's number within the client.
    pub seq: u64,
    /// The operation.
    pub op: Op,
    /// The resource.
    pub resource: String,
    /// `None` on invocation; how it ended on completion.
    pub outcome: Option<Outcome>,
    /// The fencing token the operation used or got.
    pub token: Option<u64>,
    /// The counter value read or written.
    pub value: Option<u64>,
    /// `CLOCK_MONOTONIC` in nanoseconds.
    pub at_ns: u64,
}

/// An operation assembled from its invocation and completion lines.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Operation {
    /// The client.
    pub client: String,
    /// The operation.
    pub op: Op,
    /// The resource.
    pub resource: String,
    /// How it ended; `Info` when it never completed (the client was killed).
    pub outcome: Outcome,
    /// The fencing token.
    pub token: Option<u64>,
    /// The counter value read or written.
    pub value: Option<u64>,
    /// When it was invoked.
    pub invoked_ns: u64,
    /// When it completed; `u64::MAX` if it never did.
    pub completed_ns: u64,
}

/// Appends history lines to a file, flushing each, so that a killed process loses none it wrote.
#[derive(Debug)]
pub struct Recorder {
    client: String,
    file: std::fs::File,
    seq: u64,
}

impl Recorder {
    /// A recorder for `client` writing to `path` (created or truncated).
    pub fn create(client: &str, path: &Path) -> std::io::Result<Self> {
        Ok(Recorder {
            client: client.to_owned(),
            file: std::fs::File::create(path)?,
            seq: 0,
        })
    }

    /// Records the invocation of `op`; returns its number for [`complete`](Self::complete).
    pub fn invoke(&mut self, op: Op, resource: &str, token: Option<u64>) -> u64 {
        self.seq += 1;
        self.write(self.seq, op, resource, None, token, None);
        self.seq
    }

    /// Records the completion of operation `seq`.
    pub fn complete(
        &mut self,
        seq: u64,
        op: Op,
        resource: &str,
        outcome: Outcome,
        token: Option<u64>,
        value: Option<u64>,
    ) {
        self.write(seq, op, resource, Some(outcome), token, value);
    }

    fn write(
        &mut self,
        seq: u64,
        op: Op,
        resource: &str,
        outcome: Option<Outcome>,
        token: Option<u64>,
        value: Option<u64>,
    ) {
        let line = Line {
            client: self.client.clone(),
            seq,
            op,
            resource: resource.to_owned(),
            outcome,
            token,
            value,
            at_ns: monotonic_ns(),
        };
        let mut text = serde_json::to_string(&line).expect("history lines serialize");
        text.push('\n');
        self.file
            .write_all(text.as_bytes())
            .and_then(|()| self.file.flush())
            .expect("history file writable");
    }
}

/// Reads a history file into operations. A torn last line (a kill mid-write) is ignored.
pub fn read(path: &Path) -> std::io::Result<Vec<Operation>> {
    let file = std::io::BufReader::new(std::fs::File::open(path)?);
    let mut invoked: Vec<Line> = Vec::new();
    let mut completed: std::collections::HashMap<u64, Line> = std::collections::HashMap::new();
    for line in file.lines() {
        let Ok(line) = serde_json::from_str::<Line>(&line?) else {
            continue;
        };
        if line.outcome.is_some() {
            completed.insert(line.seq, line);
        } else {
            invoked.push(line);
        }
    }
    Ok(invoked
        .into_iter()
        .map(|start| {
            let end = completed.get(&start.seq);
            Operation {
                client: start.client,
                op: start.op,
                resource: start.resource,
                outcome: end.and_then(|e| e.outcome).unwrap_or(Outcome::Info),
                token: end.and_then(|e| e.token).or(start.token),
                value: end.and_then(|e| e.value),
                invoked_ns: start.at_ns,
                completed_ns: end.map_or(u64::MAX, |e| e.at_ns),
            }
        })
        .collect())
}
