//! `ddb-lock run KEY -- CMD ARGS…`: the command runs only while this process holds the lock.
//!
//! The lock is a [`LockGuard`]: extended every third of its lease while the command runs. When
//! the command exits, what it left running in its process group is ended (see [`child`]), the
//! lock is released and ddb-lock exits with the command's code. When the lock is lost (its lease
//! ran out, or an extension finds it expired, taken or gone), the command's group gets SIGTERM and
//! SIGKILL at once, and ddb-lock exits with `--lost-exit-code`; when no extension has succeeded by the
//! lesser of `--grace` and a third of the lease before the lease's end (a partition), SIGTERM
//! comes then and SIGKILL a quarter of that before the end, so that the command is gone before
//! another process can take the lock. SIGINT,
//! SIGTERM and SIGHUP are passed on to the command's group; caught while waiting for the lock,
//! they end the wait.

use crate::args::RunArgs;
use crate::child::{self, Signals};
use crate::failure::Failure;
use crate::output::seconds;
use crate::settings::Settings;
use ddb_lock::{limits, AcquireOptions, Error, LockGuard, LockStatus, Mode, ReleaseOutcome};
use std::io::IsTerminal;
use std::time::Duration;

/// The variables the command gets.
pub mod var {
    /// The lock's resource name.
    pub const RESOURCE: &str = "DDB_LOCK_RESOURCE";
    /// The owner stored with the lock.
    pub const OWNER: &str = "DDB_LOCK_OWNER";
    /// The acquisition's lock id (with the owner, what `ddb-lock release` needs).
    pub const LOCK_ID: &str = "DDB_LOCK_ID";
    /// The fencing token, with `--fencing`.
    pub const FENCING_TOKEN: &str = "DDB_LOCK_FENCING_TOKEN";
}

/// How often a terminal is told who holds the lock while ddb-lock waits.
const PROGRESS_EVERY: Duration = Duration::from_secs(5);

/// Runs the command under the lock; the exit code.
pub async fn run(settings: &Settings, args: &RunArgs) -> Result<u8, Failure> {
    let owner = args.owner.clone().unwrap_or_else(default_owner);
    let mut opts = AcquireOptions::new()
        .owner(owner.as_str())
        .lease(args.lease)
        .fencing(args.fencing)
        .fair(args.fair)
        .timeout(args.wait.unwrap_or(limits::MAX_DURATION));
    if args.shared {
        opts = opts.mode(Mode::Shared);
    }
    if let Some(permits) = args.permits {
        opts = opts.permits(permits);
    }
    let mut signals = Signals::catch()?;
    let guard = tokio::select! {
        acquired = acquire(settings, args, &opts) => acquired?,
        signal = signals.next() => {
            // An acquisition dropped mid-request is released in the background; the caller's
            // flush waits for that release before ddb-lock exits.
            eprintln!("ddb-lock: {signal} while waiting for `{}`: not run", args.key);
            return Ok(128 + signal as u8);
        }
    };
    let Some(guard) = guard else {
        return Ok(args.conflict_exit_code);
    };
    let lock = guard
        .lock()
        .ok_or_else(|| Failure::new(args.lost_exit_code, "the lock was lost at once"))?;
    let mut vars = vec![
        (var::RESOURCE, lock.resource().to_owned()),
        (var::OWNER, lock.owner().to_owned()),
        (var::LOCK_ID, lock.lock_id().to_string()),
    ];
    if let Some(token) = lock.fencing_token() {
        vars.push((var::FENCING_TOKEN, token.value().to_string()));
    }
    let mut command = match child::spawn(&args.command, &vars) {
        Ok(command) => command,
        Err(failure) => {
            release(&args.key, guard).await;
            return Err(failure);
        }
    };
    let watch = guard.watch();
    // The end of the lease as last extended, on the monotonic clock (`None` once not held).
    let current_lease_end = || {
        watch
            .lock()
            .map(|lock| tokio::time::Instant::from_std(lock.valid_until()))
    };
    let early = args.grace.min(args.lease / 3);
    // When the command's group must be gone at the latest: set by an early stop.
    let mut kill_by = None;
    let ended = loop {
        // The lease as last extended ends at `lease_end`; unextended until `early` before that
        // (a partition), the command is stopped then, and killed `early / 4` before the end, so
        // that it is gone before another process can take the lock (stopped only once the lease
        // had run out, it worked on beside the next holder for up to `--grace`).
        let lease_end = current_lease_end();
        let stop_at = lease_end.and_then(|end| end.checked_sub(early));
        tokio::select! {
            biased;
            status = command.wait() => break status.map(Some),
            signal = signals.next() => command.forward(signal),
            lost = watch.lost() => {
                eprintln!("ddb-lock: lost the lock on `{}` ({lost}): stopping the command", args.key);
                // Its lease over (run out while ddb-lock was paused, or found expired, the lock
                // then released at once), the lock taken or gone: the next holder may hold it
                // now, and the command, given `--grace`, worked on beside it (found by review).
                // Killed at once, as an early stop kills it by the lease's end.
                break command
                    .stop(Duration::ZERO, std::future::pending())
                    .await
                    .map(|_| None);
            }
            () = sleep_until_some(stop_at) => {
                if current_lease_end() != lease_end {
                    continue; // extended meanwhile (or lost: the next turn says so)
                }
                eprintln!(
                    "ddb-lock: no extension of the lock on `{}` succeeded; stopping the command before its lease runs out",
                    args.key
                );
                let kill_at = lease_end
                    .and_then(|end| end.checked_sub(early / 4))
                    .unwrap_or_else(tokio::time::Instant::now);
                kill_by = Some(kill_at);
                let grace = kill_at.saturating_duration_since(tokio::time::Instant::now());
                break command
                    .stop(grace, lock_lost(&watch))
                    .await
                    .map(|_| None);
            }
        }
    };
    // What the command left running gets `--grace` (after an early stop, to the same moment as
    // the command), and no longer than the lease as it stands: it is killed `early / 4` before
    // the lease's end, as the command would be (with `--grace` alone, a partition then left it
    // working beside the next holder). Gone at once if the lock is.
    let now = tokio::time::Instant::now();
    let by_grace = kill_by.unwrap_or(now + args.grace);
    let by_lease = current_lease_end()
        .and_then(|end| end.checked_sub(early / 4))
        .unwrap_or(now);
    command
        .end_the_rest(
            by_grace.min(by_lease).saturating_duration_since(now),
            lock_lost(&watch),
        )
        .await;
    // Whether the lock was still ours when the command exited (its lease counted on this
    // process's monotonic clock), read before the release, and whether the release found it so.
    let held = guard.is_held();
    let held_to_the_end = release(&args.key, guard).await && held;
    match ended {
        Err(err) => Err(Failure::new(
            crate::failure::UNAVAILABLE,
            format!("lost track of the command: {err}"),
        )),
        Ok(None) => Ok(args.lost_exit_code),
        Ok(Some(_)) if !held_to_the_end => {
            eprintln!(
                "ddb-lock: the lock on `{}` was lost before the command exited",
                args.key
            );
            Ok(args.lost_exit_code)
        }
        Ok(Some(status)) => Ok(child::exit_code(status)),
    }
}

/// Completes once the lock `watch` watches is lost (taken, gone, its lease over).
async fn lock_lost(watch: &ddb_lock::LockWatch) {
    let lost = watch.lost().await;
    eprintln!("ddb-lock: the lock is lost ({lost}): killing the command's processes at once");
}

/// Completes at `at`, never without one.
async fn sleep_until_some(at: Option<tokio::time::Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// The lock, `None` if it is held by someone else (said on standard error), or why not.
async fn acquire(
    settings: &Settings,
    args: &RunArgs,
    opts: &AcquireOptions,
) -> Result<Option<LockGuard>, Failure> {
    let client = &settings.client;
    if args.no_wait {
        let guard = client
            .try_lock(&args.key, opts)
            .await
            .map_err(|e| settings.failure(e))?;
        if guard.is_none() {
            // Read for the message only: a failed read leaves the answer a conflict (it was an
            // unavailable DynamoDB, to a script that retries on the one and alerts on the other).
            match client.status(&args.key).await {
                Ok(status) => eprintln!("ddb-lock: `{}` is {}", args.key, holders(&status)),
                Err(err) => eprintln!(
                    "ddb-lock: `{}` is held (its holder could not be read: {err})",
                    args.key
                ),
            }
        }
        return Ok(guard);
    }
    let waiting = client.lock(&args.key, opts);
    let outcome = if std::io::stderr().is_terminal() {
        tokio::select! {
            outcome = waiting => outcome,
            never = progress(settings, &args.key) => match never {},
        }
    } else {
        waiting.await
    };
    match outcome {
        Ok(guard) => Ok(Some(guard)),
        Err(timeout @ Error::Timeout { .. }) => {
            eprintln!("ddb-lock: {timeout}");
            Ok(None)
        }
        Err(err) => Err(settings.failure(err)),
    }
}

/// Tells the terminal who holds `key`, when that changes and every [`PROGRESS_EVERY`]; never
/// ends (the wait it accompanies does).
async fn progress(settings: &Settings, key: &str) -> std::convert::Infallible {
    let mut said = String::new();
    let mut ticks = tokio::time::interval(PROGRESS_EVERY);
    loop {
        ticks.tick().await;
        let line = match settings.client.status(key).await {
            Ok(status) => holders(&status),
            Err(err) => format!("unreadable: {err}"),
        };
        if line != said {
            eprintln!("ddb-lock: waiting for `{key}`: {line}");
            said = line;
        }
    }
}

/// Who holds a lock, in words.
fn holders(status: &LockStatus) -> String {
    match status {
        LockStatus::Free => "free".to_owned(),
        LockStatus::Held {
            holder,
            remaining,
            queue,
        } => {
            let line = if queue.is_empty() {
                String::new()
            } else {
                format!(", {} in line", queue.len())
            };
            format!(
                "held by `{}` until {} ({} left{line})",
                holder.owner,
                ddb_lock::timestamp::format(holder.expires_at),
                seconds(u64::try_from(remaining.as_millis()).unwrap_or(u64::MAX)),
            )
        }
        LockStatus::Shared { holders, .. } => format!(
            "shared by {}",
            holders
                .iter()
                .map(|holder| format!("`{}`", holder.owner))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

/// Releases the guard's lock. False if the release found it released, taken or expired: then
/// it was lost at some point while held. A failed release is said on standard error (the lock
/// ends with its lease) and does not count as a loss, nor does a release sent again after a lost
/// answer that found the lock gone (its first send released it, or it was lost: exit 76 then
/// had the job run again for a network fault).
async fn release(key: &str, guard: LockGuard) -> bool {
    match guard.release().await {
        Ok(ReleaseOutcome::Released | ReleaseOutcome::Unconfirmed) => true,
        Ok(
            ReleaseOutcome::NotFound
            | ReleaseOutcome::NotOwner { .. }
            | ReleaseOutcome::AlreadyReleased { .. },
        ) => false,
        Err(err) => {
            eprintln!("ddb-lock: could not release `{key}` ({err}); it ends with its lease");
            true
        }
    }
}

/// `host:pid`, so that an operator reading `status` knows where the holder runs.
fn default_owner() -> String {
    let host = nix::unistd::gethostname()
        .ok()
        .and_then(|name| name.into_string().ok())
        .unwrap_or_else(|| "localhost".to_owned());
    format!("{host}:{}", std::process::id())
}
