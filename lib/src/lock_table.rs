//! The lock table as the operations see it: the SDK client, the table's name, its schema (key and
//! TTL attributes, key formats), the clock, and the memory a client shares between its requests (its waiters' lines and the locks it
//! holds, the versions it has seen, its background releases, its fencing-token offset).
//!
//! Operations take a `&LockTable` rather than the [`LockClient`](crate::LockClient), so that
//! nothing below the façade depends on it: the façade resolves its own defaults (owner, lease,
//! timeout, backoff) before calling an operation. One struct rather than a list of arguments
//! keeps the operations' signatures short, at the price that an operation can reach memory it
//! does not use.

use crate::background::BackgroundReleases;
use crate::clock::Clock;
use crate::error::{Error, InvalidInput};
use crate::global_tables::GlobalTables;
use crate::holds::Holds;
use crate::item::{Item, LOCK_ID};
use crate::limits;
use crate::lines_seen::LinesSeen;
use crate::lock::LockHandle;
use crate::pending_by_key::PendingByKey;
use crate::record::{self, Record};
use crate::schema::TableSchema;
use crate::takeover::{Observations, TakeoverRule};
use crate::time;
use crate::wait_queues::WaitQueues;
use crate::window::ClaimsGivenBack;
use aws_sdk_dynamodb::operation::delete_item::builders::DeleteItemFluentBuilder;
use aws_sdk_dynamodb::operation::update_item::builders::UpdateItemFluentBuilder;
use aws_sdk_dynamodb::types::ReturnValuesOnConditionCheckFailure;
use chrono::{DateTime, SubsecRound, Utc};
use std::future::Future;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::time::Duration;

/// One client's table and the memory its requests share; clones of a client share one.
#[derive(Debug)]
pub(crate) struct LockTable {
    pub(crate) dynamodb: aws_sdk_dynamodb::Client,
    pub(crate) name: String,
    pub(crate) schema: TableSchema,
    pub(crate) ttl_grace: Duration,
    pub(crate) clock: Arc<dyn Clock>,
    pub(crate) takeover: TakeoverRule,
    /// Whether a release deletes the lock item or keeps it, cleared of its holder.
    pub(crate) delete_on_release: bool,
    /// How long a kept item records its release before its TTL ends it (`None`: for good).
    pub(crate) keep_released_for: Option<Duration>,
    /// Whether the table may have replicas in other Regions.
    pub(crate) global_tables: GlobalTables,
    pub(crate) observations: Observations,
    /// This client's waiters, in line per resource, and the locks it holds.
    pub(crate) queues: WaitQueues,
    /// Every lock this client holds, for `release_all`.
    pub(crate) holds: Holds,
    /// The fair locks this client last saw with a line.
    pub(crate) lines_seen: LinesSeen,
    /// Releases sent from spawned tasks (dropped guards, dropped acquisitions).
    pub(crate) background: BackgroundReleases,
    /// The window claims not settled yet (their answer to come, or their give-back under way), by
    /// the claim's `LockID`: a claim they refused waits for them.
    pub(crate) window_claims: PendingByKey,
    /// The window claims of this client given back (see [`ClaimsGivenBack`]).
    pub(crate) claims_given_back: ClaimsGivenBack,
    /// Added to the clock (in microseconds) when guessing a fencing token: raised whenever a guess
    /// was stale, so that a client behind the tokens already issued pays for it once (a hybrid
    /// logical clock).
    pub(crate) token_offset: AtomicU64,
}

impl LockTable {
    /// A table of the same table and settings under `schema` (another namespace), with a memory
    /// of its own.
    pub(crate) fn with_schema(&self, schema: TableSchema) -> LockTable {
        LockTable {
            dynamodb: self.dynamodb.clone(),
            name: self.name.clone(),
            schema,
            ttl_grace: self.ttl_grace,
            clock: Arc::clone(&self.clock),
            takeover: self.takeover,
            delete_on_release: self.delete_on_release,
            keep_released_for: self.keep_released_for,
            global_tables: self.global_tables,
            observations: Default::default(),
            queues: Default::default(),
            holds: Default::default(),
            lines_seen: Default::default(),
            background: Default::default(),
            window_claims: Default::default(),
            claims_given_back: Default::default(),
            token_offset: Default::default(),
        }
    }

    /// The clock's reading at the stored precision, so that every `Lock` and `Holder` carries
    /// exactly the timestamps DynamoDB holds.
    pub(crate) fn now(&self) -> DateTime<Utc> {
        self.clock.now().trunc_subsecs(3)
    }

    /// The primary key of `resource`'s lock item.
    pub(crate) fn key(&self, resource: &str) -> Item {
        self.schema.lock_key(resource)
    }

    /// A conditional UpdateItem of `resource`'s lock item: `update` under `condition`, with the
    /// names both use, asking for the refused item (`ALL_OLD`). The caller adds the values.
    pub(crate) fn update_item(
        &self,
        resource: &str,
        update: &str,
        condition: &str,
    ) -> UpdateItemFluentBuilder {
        self.dynamodb
            .update_item()
            .table_name(&self.name)
            .set_key(Some(self.key(resource)))
            .update_expression(update)
            .condition_expression(condition)
            .set_expression_attribute_names(Some(self.names_for(&[update, condition])))
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
    }

    /// A conditional DeleteItem of `resource`'s lock item under `condition`, with the names it
    /// uses, asking for the refused item (`ALL_OLD`). The caller adds the values.
    pub(crate) fn delete_item(&self, resource: &str, condition: &str) -> DeleteItemFluentBuilder {
        self.dynamodb
            .delete_item()
            .table_name(&self.name)
            .set_key(Some(self.key(resource)))
            .condition_expression(condition)
            .set_expression_attribute_names(Some(self.names_for(&[condition])))
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
    }

    /// The expression attribute names for exactly the placeholders `expressions` use.
    pub(crate) fn names_for(
        &self,
        expressions: &[&str],
    ) -> std::collections::HashMap<String, String> {
        self.schema.names_for(expressions)
    }

    /// Decodes the lock item of `resource` an answer carried, if any. An item without a `LockID`
    /// is not a lock item at all but an application's, sharing the table:
    /// [`Error::NotALockItem`]. (Every lock write's condition requires a `LockID` on an item it
    /// replaces, updates or deletes, so such an item is always one a request left alone.) A kept
    /// item, released without being deleted ([`delete_on_release`]), has no holder: `None`, as
    /// for no item.
    ///
    /// [`delete_on_release`]: crate::LockClientBuilder::delete_on_release
    pub(crate) fn record(
        &self,
        resource: &str,
        item: Option<&Item>,
    ) -> Result<Option<Record>, Error> {
        match item {
            Some(item) if !item.contains_key(LOCK_ID) => Err(self.not_a_lock_item(item)),
            Some(item) if record::is_released(item) => Ok(None),
            item => item.map(|item| record::decode(resource, item)).transpose(),
        }
    }

    /// The error for an item of the application's found where a lock or fence item belongs;
    /// `item` carries its key attributes.
    pub(crate) fn not_a_lock_item(&self, item: &Item) -> Error {
        Error::NotALockItem {
            table: self.name.clone(),
            key: self.schema.describe_key(item),
        }
    }

    /// The TTL attribute and its value (epoch seconds) for a lease ending at `expires_at`, if the
    /// schema has a TTL attribute: rounded up, so that even with no grace DynamoDB never deletes
    /// an item before its lease has ended.
    pub(crate) fn ttl(&self, expires_at: DateTime<Utc>) -> Result<Option<(&str, i64)>, Error> {
        let Some(attribute) = self.schema.ttl_attribute_name() else {
            return Ok(None);
        };
        let deletable = time::after(expires_at, self.ttl_grace, "ttl_grace")?;
        let rounded_up = i64::from(deletable.timestamp_subsec_nanos() > 0);
        Ok(Some((attribute, deletable.timestamp() + rounded_up)))
    }

    /// Checks a resource name against the partition key's limit under this schema's key formats.
    pub(crate) fn check_resource(&self, resource: &str) -> Result<(), InvalidInput> {
        limits::resource(resource, self.schema.max_resource_bytes())
    }

    /// Checks the resource and owner of a handle.
    pub(crate) fn check_handle(&self, handle: &LockHandle) -> Result<(), InvalidInput> {
        self.check_resource(handle.resource())?;
        limits::owner(handle.owner())
    }

    /// Sends `release` from a spawned task that [`LockClient::flush`](crate::LockClient::flush)
    /// waits for; false if there is no runtime to spawn it on.
    pub(crate) fn release_in_background(
        &self,
        release: impl Future<Output = ()> + Send + 'static,
    ) -> bool {
        self.background.spawn(release)
    }
}
