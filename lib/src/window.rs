//! Once-per-window locks (a "timeout lock"): a key runs at most once per window of a period,
//! window `floor(now / period)` (Unix time, milliseconds). The first caller of a window wins in
//! one conditional PutItem; later callers of the same window are refused; the first caller of
//! the next window wins again. Nothing is released.
//!
//! The claim is an ordinary lock item at resource `window:<key>` whose lease ends with its
//! window, and which records the window number (`Window`). The condition lets a claim replace
//! the item only for a later window (`#window < :window`), and never a live lock of another kind
//! on the same name:
//!
//! ```text
//! PutItem  attribute_not_exists(#pk) OR (attribute_exists(#lock_id)
//!          AND (attribute_not_exists(#window) OR #window < :window)
//!          AND (attribute_not_exists(#owner) OR #expires_at < :now) AND <no shared or intention holder>)
//! ```
//!
//! **Clocks at a window boundary.** Windows are counted by each caller's clock. Window numbers
//! only grow (a caller whose clock is behind, asking for a window already passed, is refused and
//! told the window taken), so each window is claimed once. But a caller whose clock runs ahead
//! enters the next window early: with clocks 2 ms apart, one caller may claim window `w` at
//! 09:59:59.999 and another window `w + 1` 1 ms later in real time, and the job runs twice within
//! milliseconds. [`Window::max_skew`] is the skew-safe variant: a caller claims a window only once
//! its clock is `max_skew` past the window's start ([`WindowClaim::TooEarly`] before), so with
//! clocks within `max_skew` of each other no window starts before the previous one ended in real
//! time.

use crate::background::{looking_again, retrying};
use crate::client::LockClient;
use crate::conditional::{answer, update_refused, Answer, Transmissions};
use crate::error::{Error, InvalidInput};
use crate::holds::latest::Latest;
use crate::item::{s, Item, WINDOW};
use crate::limits;
use crate::lock::{Holder, Lock, LockHandle, LockId};
use crate::lock_table::LockTable;
use crate::pending_by_key::Work;
use crate::record::{self, Written};
use crate::timestamp;
use aws_sdk_dynamodb::operation::put_item::PutItemError;
use aws_sdk_dynamodb::types::{AttributeValue, ReturnValuesOnConditionCheckFailure};
use chrono::{DateTime, TimeZone, Utc};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;
use tokio::time::Instant;
use tracing::{debug, warn};

/// A claim replaces the item only for a later window, and never a live lock of another kind. An
/// earlier window's claim ends where the claimant's window begins (its `ExpiresAt`, exclusive):
/// it is replaced whatever its lease says, or the first millisecond of every window was refused.
/// Nor the item its own attempt wrote (`LockID` is new to each claim): a copy of it that comes
/// after the claim gave its window back (below) claimed the window again, for nobody.
const CLAIM_CONDITION: &str = "attribute_not_exists(#pk) OR (attribute_exists(#lock_id) AND #lock_id <> :lock_id AND (attribute_not_exists(#window) OR #window < :window) AND (attribute_not_exists(#owner) OR attribute_exists(#window) OR #expires_at < :now) AND attribute_not_exists(#shared) AND attribute_not_exists(#intent_shared) AND attribute_not_exists(#intent_exclusive))";

/// A claim whose outcome is unknown (every answer lost, or its future dropped) gives its window
/// back: the item keeps its `LockID`, and records the window before, so that this window can be
/// claimed again, while earlier ones stay refused; its lease ends where it began, so that
/// `status` says the window free (it said it held by the claimant that had gone). Only over its
/// own claim of that window.
/// The longest a claim refused by a claim of this client's waits for that one to be settled.
const GIVE_BACK_WAIT: Duration = Duration::from_secs(5);

const GIVE_BACK_UPDATE: &str = "SET #window = :previous, #expires_at = #acquired_at";
const GIVE_BACK_CONDITION: &str = "#lock_id = :lock_id AND #window = :window";

/// What comes before a key in the resource name of its window item.
pub const WINDOW_RESOURCE_PREFIX: &str = "window:";

/// How a key's windows are cut: a period, and an optional skew allowance (the skew-safe
/// variant, see [`max_skew`](Self::max_skew)).
///
/// # Examples
///
/// ```
/// use ddb_lock::Window;
/// use std::time::Duration;
///
/// let hourly = Window::every(Duration::from_secs(3600)).max_skew(Duration::from_secs(2));
/// assert_eq!(hourly.period(), Duration::from_secs(3600));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Window {
    period: Duration,
    max_skew: Duration,
    owner: Option<String>,
}

impl Window {
    /// Windows of `period` (at least 1 ms), counted from the Unix epoch: hourly windows start on
    /// the hour (UTC).
    ///
    /// # Examples
    ///
    /// ```
    /// let daily = ddb_lock::Window::every(std::time::Duration::from_secs(24 * 3600));
    /// ```
    pub fn every(period: Duration) -> Self {
        Window {
            period,
            max_skew: Duration::ZERO,
            owner: None,
        }
    }

    /// The skew-safe variant: claim a window only once this caller's clock is `max_skew` past
    /// its start, so that a caller whose clock runs up to `max_skew` ahead of another's cannot
    /// start a window before the previous one ended in real time. Must be shorter than the
    /// period.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// let w = ddb_lock::Window::every(Duration::from_secs(60)).max_skew(Duration::from_millis(500));
    /// assert_eq!(w.skew(), Duration::from_millis(500));
    /// ```
    pub fn max_skew(mut self, max_skew: Duration) -> Self {
        self.max_skew = max_skew;
        self
    }

    /// The claimant named in the item (default: the client's owner).
    ///
    /// # Examples
    ///
    /// ```
    /// let w = ddb_lock::Window::every(std::time::Duration::from_secs(60)).owner("node-a");
    /// ```
    pub fn owner(mut self, owner: impl Into<String>) -> Self {
        self.owner = Some(owner.into());
        self
    }

    /// The period.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// assert_eq!(ddb_lock::Window::every(Duration::from_secs(1)).period(), Duration::from_secs(1));
    /// ```
    pub fn period(&self) -> Duration {
        self.period
    }

    /// The skew allowance (zero unless set).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// assert_eq!(ddb_lock::Window::every(Duration::from_secs(1)).skew(), Duration::ZERO);
    /// ```
    pub fn skew(&self) -> Duration {
        self.max_skew
    }

    /// The period and the skew in whole milliseconds, checked.
    fn millis(&self) -> Result<(u64, u64), InvalidInput> {
        limits::duration("period", self.period, Duration::from_millis(1))?;
        let period = limits::whole_millis("period", self.period)?;
        let skew = limits::whole_millis("max_skew", self.max_skew)?;
        if skew >= period {
            return Err(InvalidInput::DurationTooLong {
                field: "max_skew",
                value: self.max_skew,
                max: self.period.saturating_sub(Duration::from_millis(1)),
            });
        }
        Ok((period, skew))
    }
}

/// What [`LockClient::claim_window`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WindowClaim {
    /// This caller won the window: run the job. Nothing to release.
    Claimed {
        /// The window's number, `floor(now / period)`.
        window: u64,
        /// When the window ends (by this caller's clock).
        ends_at: DateTime<Utc>,
    },
    /// The window was claimed already (or a later one, by a caller whose clock is ahead).
    Taken {
        /// The window claimed last, if the item records one (a lock of another kind held under
        /// the same name records none).
        window: Option<u64>,
        /// Who claimed it, and when.
        holder: Holder,
    },
    /// The skew-safe variant: this caller's clock is within `max_skew` of the window's start.
    TooEarly {
        /// The window's number.
        window: u64,
        /// When (by this caller's clock) a claim may be made.
        retry_at: DateTime<Utc>,
    },
}

impl LockClient {
    /// Claims the current window of `key`: the first caller of each window wins. One conditional
    /// PutItem (none when [`TooEarly`](WindowClaim::TooEarly)).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn run(client: ddb_lock::LockClient) -> Result<(), ddb_lock::Error> {
    /// use ddb_lock::{Window, WindowClaim};
    /// use std::time::Duration;
    ///
    /// let hourly = Window::every(Duration::from_secs(3600)).max_skew(Duration::from_secs(1));
    /// match client.claim_window("nightly-report", &hourly).await? {
    ///     WindowClaim::Claimed { .. } => println!("this node runs it"),
    ///     WindowClaim::Taken { holder, .. } => println!("{} ran it", holder.owner),
    ///     WindowClaim::TooEarly { retry_at, .. } => println!("try again at {retry_at}"),
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn claim_window(&self, key: &str, window: &Window) -> Result<WindowClaim, Error> {
        self.claim_window_by(key, window, None).await
    }

    /// [`claim_window`](Self::claim_window), waiting until `deadline` at most (from the first
    /// wait on, [`GIVE_BACK_WAIT`]) for the claims of this client's that refuse it to be settled:
    /// claimed again after each one given back (waiting once only, a claim refused by a second
    /// such claim, its retry's, answered `Taken`, and that one's give-back then left the window
    /// to nobody; found by review).
    async fn claim_window_by(
        &self,
        key: &str,
        window: &Window,
        deadline: Option<tokio::time::Instant>,
    ) -> Result<WindowClaim, Error> {
        let table = &self.settings.table;
        let (period_ms, skew_ms) = window.millis()?;
        if key.is_empty() {
            return Err(InvalidInput::Empty { field: "key" }.into());
        }
        let resource = format!("{WINDOW_RESOURCE_PREFIX}{key}");
        table.check_resource(&resource)?;
        let owner = window.owner.as_deref().unwrap_or(&self.settings.owner);
        limits::owner(owner)?;
        let now = table.now();
        let now_ms = u64::try_from(now.timestamp_millis()).unwrap_or(0);
        let number = now_ms / period_ms;
        let start_ms = number * period_ms;
        if now_ms - start_ms < skew_ms {
            return Ok(WindowClaim::TooEarly {
                window: number,
                retry_at: instant(start_ms + skew_ms)?,
            });
        }
        let ends_at = instant(start_ms.saturating_add(period_ms))?;
        let handle = LockHandle::new(&resource, owner, LockId::generate());
        let lease = (ends_at - now).to_std().unwrap_or_default();
        let lock = Lock::new(handle, now, ends_at, Instant::now() + lease);
        let version = uuid::Uuid::new_v4().to_string();
        let written = Written {
            version: &version,
            ttl: table.ttl(ends_at)?,
            data: None,
            namespace: table.schema.namespace_name(),
        };
        let mut item = record::encode(table.key(&resource), &lock, &written);
        item.insert(WINDOW.to_owned(), AttributeValue::N(number.to_string()));
        let transmissions = Transmissions::default();
        let sent = table
            .dynamodb
            .put_item()
            .table_name(&table.name)
            .set_item(Some(item))
            .condition_expression(CLAIM_CONDITION)
            .set_expression_attribute_names(Some(table.names_for(&[CLAIM_CONDITION])))
            .expression_attribute_values(":window", AttributeValue::N(number.to_string()))
            .expression_attribute_values(":now", s(timestamp::format(now)))
            .expression_attribute_values(":lock_id", s(lock.lock_id().to_string()))
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
            .customize()
            .interceptor(transmissions.clone())
            .send();
        let unsettled = UnsettledClaim {
            table: Arc::clone(table),
            resource: resource.clone(),
            lock_id: lock.lock_id(),
            window: number,
            armed: true,
            unsettled: Some(table.window_claims.start(&lock.lock_id().to_string())),
        };
        let answer = match answer("PutItem", sent.await, |err| match err {
            PutItemError::ConditionalCheckFailedException(failed) => Some(failed.item().cloned()),
            _ => None,
        }) {
            // Refused by another claim after an attempt that went unanswered (the SDK sent it
            // again): that attempt may still land, after the window was given back by the claim
            // that refused this one, and claim it for nobody, this caller told it taken (found
            // by review). Given back from the background, as a dropped claim is (it finds
            // nothing of its own now and looks again later); claims of this client's that it
            // refuses meanwhile wait for that.
            Ok(Answer::Refused(item))
                if transmissions.retried()
                    && item.as_ref().and_then(record::lock_id) != Some(lock.lock_id()) =>
            {
                drop(unsettled);
                Answer::Refused(item)
            }
            Ok(answer) => {
                unsettled.settled();
                answer
            }
            // The claim may have landed, and its caller, told of an error, will not run the
            // job: the window is given back before the error is, so that a retry can claim it.
            Err(err) => {
                unsettled.give_back().await;
                return Err(err);
            }
        };
        match answer {
            Answer::Applied(_) => Ok(WindowClaim::Claimed {
                window: number,
                ends_at,
            }),
            Answer::Refused(item) => {
                let item = item.unwrap_or_default();
                let record = table.record(&resource, Some(&item))?;
                let claimed = window_of(&item);
                // From the first wait on, at most `GIVE_BACK_WAIT` in all.
                let wait_until =
                    deadline.unwrap_or_else(|| tokio::time::Instant::now() + GIVE_BACK_WAIT);
                match record {
                    // Our own claim, written by an attempt whose answer was lost.
                    Some(record) if record.lock_id == lock.lock_id() => Ok(WindowClaim::Claimed {
                        window: number,
                        ends_at,
                    }),
                    // A claim of this client's not settled yet (its answer to come, or, dropped
                    // before it, its give-back under way): claimed again once it is settled (for
                    // a while at most: one stuck must not hold up the claim). Answered at once,
                    // the window was said taken by this very caller, and the give-back then left
                    // it to nobody (found by review). So too for one given back already (the
                    // refusal's answer read after the give-back landed; found by review).
                    Some(record)
                        if tokio::time::Instant::now() < wait_until
                            && (tokio::time::timeout_at(
                                wait_until,
                                table.window_claims.wait(&record.lock_id.to_string()),
                            )
                            .await
                                == Ok(true)
                                || table.claims_given_back.contains(record.lock_id)) =>
                    {
                        Box::pin(self.claim_window_by(key, window, Some(wait_until))).await
                    }
                    Some(record) => Ok(WindowClaim::Taken {
                        window: claimed,
                        holder: record.holder,
                    }),
                    None => Err(Error::UnexpectedResponse {
                        operation: "PutItem",
                        detail: "a window claim was refused by an item without a claimant",
                    }),
                }
            }
        }
    }
}

/// A claim sent and not yet answered in a way that settles it. Dropped armed (the caller's future
/// dropped mid-request), it gives the window back from a task of the client (`flush` waits for
/// it): a claim that landed with nobody to run the job left its window run by nobody, every other
/// caller refused (found by review). Under way for the client's claims it refuses until it is
/// settled or given back.
struct UnsettledClaim {
    table: Arc<LockTable>,
    resource: String,
    lock_id: LockId,
    window: u64,
    armed: bool,
    /// Under way until settled, or given back (handed to the give-back's task when dropped armed:
    /// a new one started there, the first one's drop woke the claims waiting for it before the
    /// give-back landed; found by review).
    unsettled: Option<Work>,
}

impl UnsettledClaim {
    /// The claim's outcome is known: claimed, or refused.
    fn settled(mut self) {
        self.armed = false;
    }

    /// Gives the window back now (tried again when DynamoDB fails it). Armed until it is done:
    /// dropped meanwhile (the caller's own timeout), it is sent from the background.
    async fn give_back(mut self) {
        give_back(&self.table, &self.resource, self.lock_id, self.window).await;
        self.armed = false;
    }
}

impl Drop for UnsettledClaim {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        let (table, resource) = (Arc::clone(&self.table), self.resource.clone());
        let (lock_id, window) = (self.lock_id, self.window);
        // Unsettled until given back (the client's claims it refuses wait for it).
        let unsettled = self.unsettled.take();
        let spawned = self.table.release_in_background(async move {
            give_back(&table, &resource, lock_id, window).await;
            drop(unsettled);
        });
        if !spawned {
            warn!(
                resource = self.resource,
                "a window claim dropped outside a runtime keeps its window if it landed"
            );
        }
    }
}

/// Gives window `window` of `resource` back, if the claim `lock_id` holds it: the item then
/// records the window before, and the claim is remembered as given back. Logged, not returned:
/// the caller already has its answer.
async fn give_back(table: &LockTable, resource: &str, lock_id: LockId, window: u64) {
    let Some(previous) = window.checked_sub(1) else {
        return;
    };
    // The claim may still be on its way (two connections, either order): a give-back that finds
    // nothing of its own looks again, as a dropped acquisition's clean-up does.
    let sent = looking_again(
        || {
            retrying(|| async {
                let request = table
                    .update_item(resource, GIVE_BACK_UPDATE, GIVE_BACK_CONDITION)
                    .expression_attribute_values(
                        ":previous",
                        AttributeValue::N(previous.to_string()),
                    )
                    .expression_attribute_values(":window", AttributeValue::N(window.to_string()))
                    .expression_attribute_values(":lock_id", s(lock_id.to_string()))
                    .send();
                answer("UpdateItem", request.await, update_refused)
            })
        },
        // A refusal that shows this give-back written (its answer lost, the SDK's resend or a
        // later look refused by it) needs no other look.
        |sent| matches!(sent, Ok(Answer::Refused(item)) if !given_back(item.as_ref(), lock_id, previous)),
    )
    .await;
    // Refused by the give-back itself, whose answer was lost: given back all the same (taken for
    // a claim that never landed, the claims it refused, read after, said the window taken by this
    // very client; found by review).
    let landed = match &sent {
        Ok(Answer::Applied(_)) => true,
        Ok(Answer::Refused(item)) => given_back(item.as_ref(), lock_id, previous),
        Err(_) => false,
    };
    match sent {
        Ok(_) if landed => {
            table.claims_given_back.insert(lock_id);
            debug!(
                resource,
                window, "gave back a window whose claim's outcome was unknown"
            )
        }
        Ok(_) => debug!(
            resource,
            window, "the unsettled window claim had not landed"
        ),
        Err(err) => {
            warn!(resource, window, %err, "could not give back a window whose claim's outcome was unknown; it stays claimed")
        }
    }
}

/// Whether `item`, which refused a give-back, shows it written: the claim `lock_id`'s item, back
/// at window `previous`.
fn given_back(item: Option<&Item>, lock_id: LockId, previous: u64) -> bool {
    item.is_some_and(|item| {
        record::lock_id(item) == Some(lock_id) && window_of(item) == Some(previous)
    })
}

/// The window a window item records, if it records one.
fn window_of(item: &Item) -> Option<u64> {
    item.get(WINDOW)
        .and_then(|v| v.as_n().ok())
        .and_then(|n| n.parse().ok())
}

/// The window claims of a client given back (their callers gone or told of an error), the latest
/// few thousand: a claim they refused, whose answer is read once the give-back landed, claims the
/// window again rather than say it taken by this very caller.
#[derive(Default)]
pub(crate) struct ClaimsGivenBack(Mutex<Latest<()>>);

impl ClaimsGivenBack {
    /// The claim `lock_id` was given back.
    fn insert(&self, lock_id: LockId) {
        self.lock().insert_new(lock_id, ());
    }

    /// Whether the claim `lock_id` was given back.
    fn contains(&self, lock_id: LockId) -> bool {
        self.lock().contains(lock_id)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Latest<()>> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl std::fmt::Debug for ClaimsGivenBack {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClaimsGivenBack").finish_non_exhaustive()
    }
}

/// The instant `ms` milliseconds after the Unix epoch.
fn instant(ms: u64) -> Result<DateTime<Utc>, InvalidInput> {
    i64::try_from(ms)
        .ok()
        .and_then(|ms| Utc.timestamp_millis_opt(ms).single())
        .ok_or(InvalidInput::DurationTooLong {
            field: "period",
            value: Duration::from_millis(ms),
            max: limits::MAX_DURATION,
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::tests::assert_every_placeholder_named;

    #[test]
    fn the_condition_names_its_attributes() {
        assert_every_placeholder_named(CLAIM_CONDITION);
        assert_every_placeholder_named(GIVE_BACK_UPDATE);
        assert_every_placeholder_named(GIVE_BACK_CONDITION);
    }

    #[test]
    fn periods_and_skews_are_checked() {
        let field = |w: Window| w.millis().unwrap_err().field();
        assert_eq!(field(Window::every(Duration::ZERO)), "period");
        let minute = Window::every(Duration::from_secs(60));
        assert_eq!(
            field(minute.clone().max_skew(Duration::from_secs(60))),
            "max_skew"
        );
        assert_eq!(
            minute
                .clone()
                .max_skew(Duration::from_secs(1))
                .millis()
                .unwrap(),
            (60_000, 1_000)
        );
        // Fractions of a millisecond were dropped: this skew became the period, and every claim
        // answered TooEarly.
        let fraction = Window::every(Duration::from_micros(1_000_600))
            .max_skew(Duration::from_micros(1_000_300));
        assert_eq!(field(fraction), "period");
        assert_eq!(
            field(minute.max_skew(Duration::from_micros(1_500))),
            "max_skew"
        );
    }
}
