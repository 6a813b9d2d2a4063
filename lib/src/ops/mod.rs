//! The lock requests, one module per family: each builds its DynamoDB request, owns its condition
//! and update expressions, and reads the answer into the caller's outcome, the rules for a refused
//! request being pure functions (`read_refused`, `read_cancellation`, `status_of`, …) tested
//! case by case against the tables of `lib/DESIGN.md`.
//!
//! Operations work on a [`LockTable`](crate::lock_table::LockTable) and know nothing of the
//! [`LockClient`](crate::LockClient) façade above them, nor of the waiting loop
//! ([`wait`](crate::wait)) that repeats an acquire attempt.

pub(crate) mod acquire;
pub(crate) mod cleanup;
pub(crate) mod extend;
pub(crate) mod fenced_acquire;
pub(crate) mod in_flight;
pub(crate) mod inspect;
pub(crate) mod kept;
pub(crate) mod list;
pub(crate) mod release;
pub(crate) mod table;

use crate::error::Error;
use crate::fencing::FencingToken;
use crate::lock_table::LockTable;
use crate::mode::Mode;
use crate::shared;
use acquire::{Attempt, Request};
use std::sync::Arc;

/// How many times an exclusive attempt is made again at once after clearing shared holders whose
/// leases had ended (each clearing needs every holder it saw still lapsed), or forty waiters of a
/// dead line (a fair try: a line of up to two hundred is cleared in one try).
const MAX_CLEARINGS: usize = 6;

/// One acquisition attempt: a conditional PutItem of a new lock item, or with fencing a
/// TransactWriteItems of that Put and the fence item's token; in shared mode, the shared
/// acquisition's UpdateItem ([`shared::acquire`](crate::shared::acquire)). `floor` is a fencing
/// token known to be issued already (the holder's, from an earlier refusal).
pub(crate) async fn attempt_acquire(
    table: &Arc<LockTable>,
    request: &Request<'_>,
    floor: Option<FencingToken>,
) -> Result<Attempt, Error> {
    if request.mode != Mode::Exclusive {
        return shared::acquire::attempt(table, request).await;
    }
    for _ in 0..MAX_CLEARINGS {
        match exclusive_attempt(table, request, floor).await? {
            Attempt::Cleared => continue,
            attempt => return Ok(attempt),
        }
    }
    // Shared holders keep lapsing under this attempt: contention.
    Ok(Attempt::Conflict)
}

/// One exclusive attempt.
async fn exclusive_attempt(
    table: &Arc<LockTable>,
    request: &Request<'_>,
    floor: Option<FencingToken>,
) -> Result<Attempt, Error> {
    let new = acquire::new_item(table, request)?;
    if request.fencing {
        return fenced_acquire::put(table, request, new, floor).await;
    }
    acquire::put(table, request, new).await
}
