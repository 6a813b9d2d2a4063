//! `ddb-lock`: the command line of the ddb-lock library. `run` keeps a command from running twice
//! at once across machines (as `flock` does on one); `status`, `list`, `release`,
//! `force-release`, `cleanup`, `create-table` and `check-table` inspect and administer locks.
//! A thin adapter: every decision about a lock is the library's.
//!
//! ```text
//! ddb-lock --table locks run nightly-report --wait 10m -- ./report.sh
//! ddb-lock --table locks status nightly-report --json
//! ```
//!
//! Exit codes: `run` exits with its command's code (128 + the signal that killed it); ddb-lock's
//! own are in [`failure`].

// The acquisition's future nests the library's and the AWS SDK's deep futures.
#![recursion_limit = "256"]

mod admin;
mod args;
mod child;
mod failure;
mod output;
mod run;
mod settings;

use args::{Cli, Command};
use clap::Parser;
use settings::Settings;
use std::io::IsTerminal;
use std::process::ExitCode;

// One thread: the command's parent-death signal follows the thread that started it.
#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    // ddb-lock says what matters in its own lines; RUST_LOG=ddb_lock=debug shows the library's
    // own log (each extension, each retry) on standard error.
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "off".into()),
        )
        .with_ansi(std::io::stderr().is_terminal())
        .init();
    match execute(&cli).await {
        Ok(code) => ExitCode::from(code),
        Err(failure) => {
            eprintln!("ddb-lock: {failure}");
            ExitCode::from(failure.code)
        }
    }
}

/// Runs the subcommand; its exit code.
async fn execute(cli: &Cli) -> Result<u8, failure::Failure> {
    let settings = Settings::load(&cli.place).await?;
    let json = cli.json;
    let code = match &cli.command {
        Command::Run(args) => run::run(&settings, args).await,
        Command::Status { key } => admin::status(&settings, key, json).await,
        Command::List => admin::list(&settings, json).await,
        Command::Release {
            key,
            owner,
            lock_id,
            mode,
        } => admin::release(&settings, key, owner, lock_id, mode, json).await,
        Command::ForceRelease { key, yes } => {
            admin::force_release(&settings, key, *yes, json).await
        }
        Command::Cleanup {
            expired_for,
            max_deletes,
        } => admin::cleanup(&settings, *expired_for, *max_deletes, json).await,
        Command::CreateTable => admin::create_table(&settings, json).await,
        Command::CheckTable => admin::check_table(&settings, json).await,
    };
    // Releases sent in the background (a guard dropped on the way out) finish before the exit.
    settings.client.flush().await;
    code
}
