//! The command line: global options (where the locks are) and one subcommand per job.

use clap::{Args, Parser, Subcommand};
use std::ffi::OsString;
use std::time::Duration;

/// Distributed locks on Amazon DynamoDB: run a command under a lock, inspect and administer locks.
///
/// The table's key attributes and formats are read from the same DDB_LOCK_* variables as the
/// ddb-lock Lambda function; the endpoint, region, profile and credentials from the AWS SDK's
/// usual sources (AWS_ENDPOINT_URL_DYNAMODB points it at DynamoDB Local).
#[derive(Debug, Parser)]
#[command(name = "ddb-lock", version)]
pub struct Cli {
    /// Where the locks are.
    #[command(flatten)]
    pub place: Place,
    /// Print JSON (the Lambda function's answer shapes) instead of text.
    #[arg(long, global = true)]
    pub json: bool,
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The lock table and how to reach it.
#[derive(Debug, Args)]
pub struct Place {
    /// The lock table.
    #[arg(long, global = true, env = "DDB_LOCK_TABLE")]
    pub table: Option<String>,
    /// Work in this namespace: its locks are apart from every other namespace's.
    #[arg(long, global = true, env = "DDB_LOCK_NAMESPACE")]
    pub namespace: Option<String>,
    /// The DynamoDB endpoint (else AWS_ENDPOINT_URL_DYNAMODB, AWS_ENDPOINT_URL, or AWS's).
    #[arg(long, global = true)]
    pub endpoint_url: Option<String>,
    /// The AWS Region (else AWS_REGION, or the profile's).
    #[arg(long, global = true)]
    pub region: Option<String>,
    /// The AWS profile (else AWS_PROFILE, or `default`).
    #[arg(long, global = true)]
    pub profile: Option<String>,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run a command while holding the lock on KEY: acquire, keep it extended while the command
    /// runs, release it when the command exits, and exit with the command's code.
    Run(RunArgs),
    /// Show who holds the lock on KEY, until when, and who waits in line.
    Status {
        /// The lock's resource name.
        key: String,
    },
    /// List the live locks of a namespace (`--namespace`): a Query of the namespace index.
    List,
    /// Release the lock on KEY held by OWNER with LOCK_ID (as `run` gave its command).
    Release {
        /// The lock's resource name.
        key: String,
        /// The holder's owner name.
        #[arg(long)]
        owner: String,
        /// The acquisition's lock id.
        #[arg(long)]
        lock_id: String,
        /// The hold's mode: `exclusive` or `shared`.
        #[arg(long, default_value = "exclusive")]
        mode: String,
    },
    /// Delete the lock on KEY whoever holds it. Its holder is not told.
    ForceRelease {
        /// The lock's resource name.
        key: String,
        /// Confirm the override.
        #[arg(long)]
        yes: bool,
    },
    /// Delete lock items whose lease ended long ago (a Scan of the table).
    Cleanup {
        /// How long a lease must have ended.
        #[arg(long, default_value = "1h", value_parser = duration)]
        expired_for: Duration,
        /// Items to delete at most.
        #[arg(long, default_value_t = 1000)]
        max_deletes: u32,
    },
    /// Create the lock table (on demand, TTL on), unless it exists, and check it.
    CreateTable,
    /// Check that the lock table has the keys and TTL the configuration expects.
    CheckTable,
}

/// `ddb-lock run`.
#[derive(Debug, Args)]
pub struct RunArgs {
    /// The lock's resource name.
    pub key: String,
    /// How long to wait for the lock (default: until it is free).
    #[arg(long, value_parser = duration, conflicts_with = "no_wait")]
    pub wait: Option<Duration>,
    /// Fail at once if the lock is held.
    #[arg(long)]
    pub no_wait: bool,
    /// The lease: how long the lock outlives this process if it dies.
    #[arg(long, default_value = "30s", value_parser = duration)]
    pub lease: Duration,
    /// Take a fencing token and give it to the command (DDB_LOCK_FENCING_TOKEN).
    #[arg(long)]
    pub fencing: bool,
    /// Hold the lock shared: other shared holders run at the same time, exclusive ones wait.
    #[arg(long, conflicts_with = "permits")]
    pub shared: bool,
    /// A semaphore: at most N holders of KEY at once (shared holds).
    #[arg(long, value_name = "N")]
    pub permits: Option<u32>,
    /// Wait in line: granted in the order of arrival, across processes.
    #[arg(long)]
    pub fair: bool,
    /// The owner name stored with the lock (default: host name and process id).
    #[arg(long)]
    pub owner: Option<String>,
    /// After signalling what the command left running when it exited (SIGTERM), how long to wait
    /// before killing it (SIGKILL); before a lease about to run out unextended, the command is
    /// stopped this long (at most a third of the lease) before its end. A command whose lock was
    /// lost is killed at once.
    #[arg(long, default_value = "10s", value_parser = duration)]
    pub grace: Duration,
    /// The exit code when the lock is held by someone else (and `--wait` ran out).
    #[arg(long, default_value_t = crate::failure::CONFLICT)]
    pub conflict_exit_code: u8,
    /// The exit code when the lock was lost while the command ran.
    #[arg(long, default_value_t = crate::failure::LOCK_LOST)]
    pub lost_exit_code: u8,
    /// The command and its arguments.
    #[arg(
        required = true,
        trailing_var_arg = true,
        allow_hyphen_values = true,
        value_name = "CMD"
    )]
    pub command: Vec<OsString>,
}

/// A duration such as `500ms`, `30s`, `2m` or `1h 30m`, no longer than the library takes
/// ([`limits::MAX_DURATION`](ddb_lock::limits::MAX_DURATION)): clap names the option in the error.
/// (A `--grace` of millions of years overflowed the clock after the command exited, and ddb-lock
/// panicked with the lock held and the command's leftovers running; found by review.)
fn duration(text: &str) -> Result<Duration, String> {
    let duration = humantime::parse_duration(text).map_err(|err| err.to_string())?;
    let max = ddb_lock::limits::MAX_DURATION;
    if duration > max {
        return Err(format!(
            "{} is longer than the maximum of {} days",
            humantime::format_duration(duration),
            max.as_secs() / 86_400
        ));
    }
    Ok(duration)
}
