//! A waiting exclusive acquirer's marker (`WriterWaiting`) on a lock held by shared holders: it
//! stops new shared holders, so that the acquirer is not starved by overlapping readers.
//!
//! The marker is placed when shared holders refuse the acquirer, and placed again whenever they
//! show that it no longer stands: the announce was refused (the readers had left, the item was
//! gone), or a shared holder took the lock after it was placed (another writer's acquisition
//! removed it). An acquisition removes it; an acquirer that gives up withdraws it, and one whose
//! future is dropped (or fails) withdraws it from the background, so that shared acquirers need
//! not wait for its deadline: from the moment its announce is sent, since the future can be
//! dropped after the marker landed and before the answer was read. (An announce still on its way
//! when the withdrawal is answered lands after it, and stands until the deadline.)

use crate::background::retrying;
use crate::lock::Holder;
use crate::lock_table::LockTable;
use crate::shared::writer;
use chrono::{DateTime, Utc};
use std::sync::Arc;
use tokio::time::Instant;
use tracing::debug;

/// The marker of one waiting exclusive acquirer, withdrawn from the background if dropped while
/// placed.
pub(crate) struct WriterMarker {
    table: Arc<LockTable>,
    resource: String,
    owner: String,
    placed: Option<Placed>,
    /// The deadline every marker of this acquisition lasts until, from its first announce on.
    until: Option<DateTime<Utc>>,
}

/// A marker set: when (the acquirer's clock) and until when.
#[derive(Clone, Copy)]
struct Placed {
    at: DateTime<Utc>,
    until: DateTime<Utc>,
}

impl WriterMarker {
    /// No marker yet, for `owner`'s acquisition of `resource`.
    pub(crate) fn new(table: &Arc<LockTable>, resource: &str, owner: &str) -> Self {
        WriterMarker {
            table: Arc::clone(table),
            resource: resource.to_owned(),
            owner: owner.to_owned(),
            placed: None,
            until: None,
        }
    }

    /// Shared holders refused the acquisition, `holder` the one whose lease ends last: the
    /// marker is placed, until `deadline`, unless one placed before that holder took the lock
    /// stands.
    pub(crate) async fn refused_by_readers(&mut self, holder: &Holder, deadline: Instant) {
        if self
            .placed
            .is_some_and(|placed| holder.acquired_at <= placed.at)
        {
            return;
        }
        let at = self.table.now();
        let remaining = deadline.saturating_duration_since(Instant::now());
        // No time left to wait (the last attempt, or `timeout(0)`'s only one): a marker would
        // stop readers for nobody, and cost its announce and its withdrawal.
        if remaining.is_zero() {
            return;
        }
        // One deadline for every marker of this acquisition: placed again until a deadline of
        // its own (a clock set back, milliseconds cut), the second was refused by the first, yet
        // counted as placed, and a writer dropped before its answer withdrew the second alone,
        // leaving the first to keep readers out until its deadline (found by review). An announce
        // over its own marker is applied (see `writer::announce`).
        let until = match self.until {
            Some(until) => until,
            None => match crate::time::after(at, remaining, "timeout") {
                Ok(until) => *self.until.insert(until),
                Err(_) => return,
            },
        };
        // Counted as placed from before the request: an acquirer dropped while it is on its way
        // (or after it landed, before its answer was read) withdraws it. Refused, it was not.
        let before = self.placed.replace(Placed { at, until });
        match writer::announce(&self.table, &self.resource, &self.owner, at, until).await {
            Ok(true) => {}
            Ok(false) => self.placed = before,
            // It may have landed: kept, withdrawn in the end (a withdrawal of no marker changes
            // nothing), and placed again should a reader that came after it refuse us.
            Err(err) => {
                debug!(resource = self.resource, %err, "could not announce a waiting exclusive acquirer");
            }
        }
    }

    /// The lock was acquired: its write removed the marker.
    pub(crate) fn acquired(&mut self) {
        self.placed = None;
    }

    /// The acquirer gives up: withdraws its marker now, if placed.
    pub(crate) async fn withdraw(&mut self) {
        if let Some(placed) = self.placed.take() {
            let withdrawn =
                writer::withdraw(&self.table, &self.resource, &self.owner, placed.until).await;
            if let Err(err) = withdrawn {
                debug!(resource = self.resource, %err, "could not withdraw a waiting exclusive acquirer's marker; it ends at its deadline");
            }
        }
    }
}

impl Drop for WriterMarker {
    fn drop(&mut self) {
        let Some(placed) = self.placed.take() else {
            return;
        };
        let table = Arc::clone(&self.table);
        let (resource, owner) = (
            std::mem::take(&mut self.resource),
            std::mem::take(&mut self.owner),
        );
        let spawned = self.table.release_in_background(async move {
            let withdrawn =
                retrying(|| writer::withdraw(&table, &resource, &owner, placed.until)).await;
            if let Err(err) = withdrawn {
                debug!(resource, %err, "a dropped exclusive acquirer's marker could not be withdrawn; it ends at its deadline");
            }
        });
        if !spawned {
            debug!("a dropped exclusive acquirer's marker ends at its deadline (no runtime)");
        }
    }
}
