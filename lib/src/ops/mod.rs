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
mod in_flight;
pub(crate) mod inspect;
pub(crate) mod kept;
pub(crate) mod release;
pub(crate) mod table;

use crate::error::Error;
use crate::fencing::FencingToken;
use crate::lock_table::LockTable;
use acquire::{Attempt, Request};
use std::sync::Arc;

/// One acquisition attempt: a conditional PutItem of a new lock item, or with fencing a
/// TransactWriteItems of that Put and the fence item's token. `floor` is a fencing token known to
/// be issued already (the holder's, from an earlier refusal).
pub(crate) async fn attempt_acquire(
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
