//! Exit codes, and failures as one line each.
//!
//! `run` exits with its command's code; these are the codes of ddb-lock itself.

use ddb_lock::{Error, TableProblem};
use std::fmt;

/// A release that released nothing, a table that does not match.
pub const NOT_DONE: u8 = 1;
/// Bad usage or input (the code clap uses too).
pub const USAGE: u8 = 2;
/// DynamoDB could not be reached or refused the request (`EX_UNAVAILABLE`).
pub const UNAVAILABLE: u8 = 69;
/// An item at a lock's key that the library cannot read, or an answer it cannot (`EX_DATAERR`):
/// retrying changes nothing.
pub const DATA_ERROR: u8 = 65;
/// The table does not fit the lock schema (`EX_CONFIG`): retrying changes nothing.
pub const CONFIG: u8 = 78;
/// The lock is held by someone else (`EX_TEMPFAIL`); `run --conflict-exit-code` changes it.
pub const CONFLICT: u8 = 75;
/// The lock was lost while the command ran; `run --lost-exit-code` changes it.
pub const LOCK_LOST: u8 = 76;
/// The command was found but could not be run (as a shell says).
pub const CANNOT_EXECUTE: u8 = 126;
/// The command was not found (as a shell says).
pub const COMMAND_NOT_FOUND: u8 = 127;

/// Why ddb-lock stops without a result: a message of one line and an exit code.
#[derive(Debug)]
pub struct Failure {
    /// The line printed after `ddb-lock: `.
    pub message: String,
    /// The exit code.
    pub code: u8,
}

impl Failure {
    /// A failure with `message` and `code`.
    pub fn new(code: u8, message: impl Into<String>) -> Failure {
        Failure {
            message: message.into(),
            code,
        }
    }

    /// The failure of a library call on `table`: bad input is a usage error, a missing table, bad
    /// credentials or an unreachable endpoint one line naming the cause.
    pub fn of(table: &str, err: Error) -> Failure {
        match err {
            Error::InvalidInput(invalid) => Failure::new(USAGE, invalid.to_string()),
            Error::Table {
                problem: TableProblem::Missing,
                ..
            } => missing_table(table),
            Error::Backend { operation, source } => {
                let cause = causes(source.as_ref());
                if cause.contains("ResourceNotFoundException") {
                    missing_table(table)
                } else if cause.contains("credentials") || cause.contains("Credentials") {
                    Failure::new(
                        UNAVAILABLE,
                        format!(
                            "no usable AWS credentials for DynamoDB {operation}: {cause} \
                             (set AWS_PROFILE, or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY)"
                        ),
                    )
                } else {
                    Failure::new(UNAVAILABLE, format!("DynamoDB {operation} failed: {cause}"))
                }
            }
            // Data and configuration, not an outage: a script retrying on 69 would loop.
            err @ (Error::MalformedItem { .. }
            | Error::NotALockItem { .. }
            | Error::UnexpectedResponse { .. }) => Failure::new(DATA_ERROR, err.to_string()),
            err @ Error::Table { .. } => Failure::new(CONFIG, err.to_string()),
            other => Failure::new(UNAVAILABLE, other.to_string()),
        }
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

fn missing_table(table: &str) -> Failure {
    Failure::new(
        UNAVAILABLE,
        format!(
            "table `{table}` does not exist at this endpoint and Region \
             (create it with `ddb-lock create-table`)"
        ),
    )
}

/// `err` and its sources, on one line, each said once.
fn causes(err: &(dyn std::error::Error + 'static)) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut next = Some(err);
    while let Some(err) = next {
        let text = err.to_string().replace('\n', " ");
        if !parts.iter().any(|part| part.contains(&text)) {
            parts.push(text);
        }
        next = err.source();
    }
    parts.join(": ")
}
