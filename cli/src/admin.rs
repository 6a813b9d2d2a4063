//! The commands that inspect and administer locks: each is one library call (cleanup, a few),
//! answered in the Lambda function's shape.

use crate::failure::{Failure, NOT_DONE, USAGE};
use crate::output;
use crate::settings::Settings;
use ddb_lock::{Error, LockHandle, LockId, Mode};
use ddb_lock_lambda::error::reason;
use ddb_lock_lambda::response::{
    CleanupResponse, ForceReleaseResponse, ListResponse, ReleaseResponse, StatusResponse,
};
use std::time::Duration;

/// What a command found: success, or a result the exit code reports (`NOT_DONE`).
pub type Done = Result<u8, Failure>;

/// `status KEY`.
pub async fn status(settings: &Settings, key: &str, json: bool) -> Done {
    let status = settings
        .client
        .status(key)
        .await
        .map_err(|e| settings.failure(e))?;
    let answer = StatusResponse::of(key, status);
    if json {
        output::json(&answer);
    } else {
        output::status(&answer);
    }
    Ok(0)
}

/// `list`: the namespace of `--namespace`.
pub async fn list(settings: &Settings, json: bool) -> Done {
    let Some(namespace) = &settings.namespace else {
        return Err(Failure::new(
            USAGE,
            "list needs a namespace (--namespace or DDB_LOCK_NAMESPACE): only the locks of a \
             namespace are indexed, and listing never scans the table",
        ));
    };
    let locks = settings
        .client
        .list(namespace)
        .await
        .map_err(|e| settings.failure(e))?;
    let answer = ListResponse {
        namespace: namespace.to_string(),
        locks: locks
            .into_iter()
            .map(|listed| StatusResponse::of(&listed.resource, listed.status))
            .collect(),
    };
    if json {
        output::json(&answer);
    } else {
        output::list(&answer);
    }
    Ok(0)
}

/// `release KEY --owner O --lock-id ID [--mode M]`: exits `NOT_DONE` when nothing was released.
pub async fn release(
    settings: &Settings,
    key: &str,
    owner: &str,
    lock_id: &str,
    mode: &str,
    json: bool,
) -> Done {
    let lock_id = LockId::parse(lock_id).map_err(|e| Failure::new(USAGE, e.to_string()))?;
    let mode: Mode = mode
        .parse()
        .map_err(|e| Failure::new(USAGE, format!("--mode: {e}")))?;
    let handle = LockHandle::new(key, owner, lock_id).with_mode(mode);
    let outcome = settings
        .client
        .release(&handle)
        .await
        .map_err(|e| settings.failure(e))?;
    let answer = ReleaseResponse::of(
        key.to_owned(),
        owner.to_owned(),
        Some(lock_id.to_string()),
        outcome,
    )
    .map_err(|mismatch| Failure::new(NOT_DONE, mismatch.to_string()))?;
    if json {
        output::json(&answer);
    } else if answer.released {
        println!("released `{key}`");
    } else if answer.reason == Some(reason::ALREADY_RELEASED) {
        println!("nothing to release: `{key}` of `{owner}` was released already");
    } else if answer.reason == Some(reason::UNCONFIRMED) {
        println!("released `{key}`, unconfirmed: its answer was lost, and sent again it found the lock gone");
    } else {
        println!("nothing to release: `{key}` of `{owner}` was already released, or expired");
    }
    // Unconfirmed: gone either way, most likely by its first send; not "nothing done".
    let gone = answer.released || answer.reason == Some(reason::UNCONFIRMED);
    Ok(if gone { 0 } else { NOT_DONE })
}

/// `force-release KEY --yes`.
pub async fn force_release(settings: &Settings, key: &str, yes: bool, json: bool) -> Done {
    if !yes {
        return Err(Failure::new(
            USAGE,
            format!(
                "force-release deletes the lock on `{key}` whoever holds it, without telling \
                 the holder: pass --yes to confirm"
            ),
        ));
    }
    let removed = settings
        .client
        .force_release(key)
        .await
        .map_err(|e| settings.failure(e))?;
    let answer = ForceReleaseResponse {
        resource: key.to_owned(),
        released: removed.is_some(),
        previous_owner: removed.map(|holder| holder.owner),
    };
    if json {
        output::json(&answer);
    } else {
        match &answer.previous_owner {
            Some(owner) => println!("removed the lock of `{owner}` on `{key}`"),
            None => println!("`{key}` was not locked"),
        }
    }
    Ok(0)
}

/// `cleanup`: scans the whole table, call after call, or until `max_deletes`.
pub async fn cleanup(
    settings: &Settings,
    expired_for: Duration,
    max_deletes: u32,
    json: bool,
) -> Done {
    let mut answer = CleanupResponse::starting_at(None);
    while !answer.complete && answer.deleted < max_deletes {
        let report = settings
            .client
            .delete_expired(
                expired_for,
                max_deletes - answer.deleted,
                answer.next_cursor().as_ref(),
            )
            .await
            .map_err(|e| settings.failure(e))?;
        answer.add(report);
    }
    if json {
        output::json(&answer);
    } else {
        println!(
            "scanned {} items, deleted {} long-expired locks, left {} taken again meanwhile{}",
            answer.scanned,
            answer.deleted,
            answer.skipped,
            if answer.complete {
                ""
            } else {
                " (stopped at --max-deletes: run again for more)"
            }
        );
    }
    Ok(0)
}

/// `create-table`.
pub async fn create_table(settings: &Settings, json: bool) -> Done {
    settings
        .client
        .create_table()
        .await
        .map_err(|e| settings.failure(e))?;
    table_ok(settings, "ready", json);
    Ok(0)
}

/// `check-table`: exits `NOT_DONE`, listing every difference, when the table does not fit.
pub async fn check_table(settings: &Settings, json: bool) -> Done {
    match settings.client.check_table().await {
        Ok(()) => {
            table_ok(settings, "ok", json);
            Ok(0)
        }
        Err(Error::Table { table, problem }) if !missing(&problem) => {
            if json {
                output::json(&serde_json::json!({
                    "table": table,
                    "ok": false,
                    "problem": problem.to_string(),
                }));
            } else {
                println!("table `{table}` does not fit: {problem}");
            }
            Ok(NOT_DONE)
        }
        Err(err) => Err(settings.failure(err)),
    }
}

fn missing(problem: &ddb_lock::TableProblem) -> bool {
    matches!(problem, ddb_lock::TableProblem::Missing)
}

fn table_ok(settings: &Settings, state: &str, json: bool) {
    let table = settings.client.table_name();
    if json {
        output::json(&serde_json::json!({ "table": table, "ok": true }));
    } else {
        println!("table `{table}`: {state}");
    }
}
