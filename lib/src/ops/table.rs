//! Creating and checking the lock table.
//!
//! The table needs the key schema the client's [`TableSchema`] describes (string partition key,
//! and string sort key unless it has none), and time to live on its TTL attribute unless it has
//! none. [`create`] makes one (on-demand billing, with the namespace index that
//! [`list`](super::list) queries) or accepts a matching one, never touching the
//! TTL of a table whose key schema is not the schema's; [`check`] verifies an existing table at
//! start-up so that a misconfigured table fails loudly before the first lock, naming every
//! difference at once rather than one per restart. Both refuse a global table unless told that
//! every client writes through one Region ([`GlobalTables`]). Both serve the methods of the same names on
//! [`LockClient`](crate::LockClient); the comparisons are pure functions, tested case by case.

use crate::error::{Error, TableDifference, TableProblem};
use crate::global_tables::{self, GlobalTables};
use crate::item::NAMESPACE;
use crate::lock_table::LockTable;
use crate::schema::TableSchema;
use crate::tasks::{CLAIMABLE_AT, DEFAULT_TASKS_INDEX, TASK_QUEUE};
use aws_sdk_dynamodb::client::Waiters;
use aws_sdk_dynamodb::operation::create_table::CreateTableError;
use aws_sdk_dynamodb::operation::describe_table::DescribeTableError;
use aws_sdk_dynamodb::types::{
    AttributeDefinition, BillingMode, GlobalSecondaryIndex, KeySchemaElement, KeyType, Projection,
    ProjectionType, ScalarAttributeType, TableDescription, TimeToLiveSpecification,
    TimeToLiveStatus,
};
use std::time::Duration;

/// How long [`LockClient::create_table`](crate::LockClient::create_table) waits for a new table to become active.
const CREATE_WAIT: Duration = Duration::from_secs(300);

/// A key attribute as DescribeTable reports it: name, key type (`HASH`, `RANGE`), attribute type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FoundKey {
    name: String,
    key_type: KeyType,
    attribute_type: String,
}

/// A table's time to live as DescribeTimeToLive reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FoundTtl {
    status: Option<TimeToLiveStatus>,
    attribute: Option<String>,
}

impl FoundTtl {
    fn is_on(&self) -> bool {
        matches!(
            self.status,
            Some(TimeToLiveStatus::Enabled | TimeToLiveStatus::Enabling)
        )
    }
}

/// Creates the lock table unless it exists, enables TTL if it is off, and checks the result; see
/// [`LockClient::create_table`](crate::LockClient::create_table).
pub(crate) async fn create(table: &LockTable) -> Result<(), Error> {
    create_unless_exists(table).await?;
    table
        .dynamodb
        .wait_until_table_exists()
        .table_name(&table.name)
        .wait(CREATE_WAIT)
        .await
        .map_err(|e| Error::backend_other("DescribeTable", e))?;
    // Never touch the TTL setting of a table whose keys are not the schema's.
    let description = describe(table)
        .await?
        .ok_or_else(|| table_error(table, TableProblem::Missing))?;
    // Nor of a global table the client refuses.
    if let Some(problem) = global_table_problem(table.global_tables, &description) {
        return Err(table_error(table, problem));
    }
    let differences = key_differences(&table.schema, &found_keys(&description));
    if !differences.is_empty() {
        return Err(table_error(table, TableProblem::Mismatch { differences }));
    }
    if let Some(attribute) = table.schema.ttl_attribute_name() {
        if !describe_ttl(table).await?.is_on() {
            enable_ttl(table, attribute).await?;
        }
    }
    check(table).await
}

/// The CreateTable request; a table that exists already is no error (it is checked next).
async fn create_unless_exists(table: &LockTable) -> Result<(), Error> {
    let definition = |name| {
        AttributeDefinition::builder()
            .attribute_name(name)
            .attribute_type(ScalarAttributeType::S)
            .build()
            .map_err(|e| Error::backend_other("CreateTable", e))
    };
    let key = |name, key_type| {
        KeySchemaElement::builder()
            .attribute_name(name)
            .key_type(key_type)
            .build()
            .map_err(|e| Error::backend_other("CreateTable", e))
    };
    let mut request = table
        .dynamodb
        .create_table()
        .table_name(&table.name)
        .billing_mode(BillingMode::PayPerRequest);
    for (name, key_type) in expected_keys(&table.schema) {
        request = request
            .attribute_definitions(definition(name)?)
            .key_schema(key(name, key_type)?);
    }
    // The sparse index of namespaced lock items, which only they write to.
    let namespace_index = GlobalSecondaryIndex::builder()
        .index_name(table.schema.namespace_index_name())
        .key_schema(key(NAMESPACE, KeyType::Hash)?)
        .projection(
            Projection::builder()
                .projection_type(ProjectionType::All)
                .build(),
        )
        .build()
        .map_err(|e| Error::backend_other("CreateTable", e))?;
    // The sparse index of claimable tasks (`TaskQueue`, `ClaimableAt`), which claims query.
    let tasks_index = GlobalSecondaryIndex::builder()
        .index_name(DEFAULT_TASKS_INDEX)
        .key_schema(key(TASK_QUEUE, KeyType::Hash)?)
        .key_schema(key(CLAIMABLE_AT, KeyType::Range)?)
        .projection(
            Projection::builder()
                .projection_type(ProjectionType::KeysOnly)
                .build(),
        )
        .build()
        .map_err(|e| Error::backend_other("CreateTable", e))?;
    request = request
        .attribute_definitions(definition(NAMESPACE)?)
        .attribute_definitions(definition(TASK_QUEUE)?)
        .attribute_definitions(definition(CLAIMABLE_AT)?)
        .global_secondary_indexes(namespace_index)
        .global_secondary_indexes(tasks_index);
    match request.send().await {
        Ok(_) => {}
        Err(err)
            if matches!(
                err.as_service_error(),
                Some(CreateTableError::ResourceInUseException(_))
            ) => {}
        Err(err) => return Err(Error::backend("CreateTable", err)),
    }
    Ok(())
}

/// Enables TTL on `attribute`.
async fn enable_ttl(table: &LockTable, attribute: &str) -> Result<(), Error> {
    let spec = TimeToLiveSpecification::builder()
        .enabled(true)
        .attribute_name(attribute)
        .build()
        .map_err(|e| Error::backend_other("UpdateTimeToLive", e))?;
    let enabled = table
        .dynamodb
        .update_time_to_live()
        .table_name(&table.name)
        .time_to_live_specification(spec)
        .send()
        .await;
    // Another process may have enabled it between our check and our update; DynamoDB
    // then refuses ours, and the check below decides.
    if let Err(err) = enabled {
        if !describe_ttl(table).await?.is_on() {
            return Err(Error::backend("UpdateTimeToLive", err));
        }
    }
    Ok(())
}

/// Verifies replicas, key schema and TTL; see
/// [`LockClient::check_table`](crate::LockClient::check_table).
pub(crate) async fn check(table: &LockTable) -> Result<(), Error> {
    let Some(description) = describe(table).await? else {
        return Err(table_error(table, TableProblem::Missing));
    };
    if let Some(problem) = global_table_problem(table.global_tables, &description) {
        return Err(table_error(table, problem));
    }
    let mut differences = key_differences(&table.schema, &found_keys(&description));
    if table.schema.ttl_attribute_name().is_some() {
        differences.extend(ttl_difference(&table.schema, &describe_ttl(table).await?));
    }
    if differences.is_empty() {
        return Ok(());
    }
    Err(table_error(table, TableProblem::Mismatch { differences }))
}

/// The problem with a table that has replicas, under `policy`.
pub(crate) fn global_table_problem(
    policy: GlobalTables,
    description: &TableDescription,
) -> Option<TableProblem> {
    let regions = global_tables::replica_regions(description);
    match policy {
        GlobalTables::Refuse if !regions.is_empty() => Some(TableProblem::GlobalTable { regions }),
        GlobalTables::Refuse | GlobalTables::WritesThroughOneRegion => None,
    }
}

/// The error for a table with `problem`.
fn table_error(table: &LockTable, problem: TableProblem) -> Error {
    Error::Table {
        table: table.name.clone(),
        problem,
    }
}

/// The key attributes the schema needs, partition key first.
fn expected_keys(schema: &TableSchema) -> impl Iterator<Item = (&str, KeyType)> {
    std::iter::once((schema.partition_key_name(), KeyType::Hash))
        .chain(schema.sort_key_name().map(|name| (name, KeyType::Range)))
}

/// The table as DescribeTable reports it (`None`: no such table).
async fn describe(table: &LockTable) -> Result<Option<TableDescription>, Error> {
    let described = table
        .dynamodb
        .describe_table()
        .table_name(&table.name)
        .send()
        .await;
    match described {
        Ok(out) => Ok(out.table),
        Err(err)
            if matches!(
                err.as_service_error(),
                Some(DescribeTableError::ResourceNotFoundException(_))
            ) =>
        {
            Ok(None)
        }
        Err(err) => Err(Error::backend("DescribeTable", err)),
    }
}

/// The table's key attributes.
fn found_keys(description: &TableDescription) -> Vec<FoundKey> {
    let type_of = |name: &str| {
        description
            .attribute_definitions()
            .iter()
            .find(|d| d.attribute_name() == name)
            .map_or("?", |d| d.attribute_type().as_str())
            .to_owned()
    };
    description
        .key_schema()
        .iter()
        .map(|k| FoundKey {
            name: k.attribute_name().to_owned(),
            key_type: k.key_type().clone(),
            attribute_type: type_of(k.attribute_name()),
        })
        .collect()
}

/// The table's time to live.
async fn describe_ttl(table: &LockTable) -> Result<FoundTtl, Error> {
    let out = table
        .dynamodb
        .describe_time_to_live()
        .table_name(&table.name)
        .send()
        .await
        .map_err(|e| Error::backend("DescribeTimeToLive", e))?;
    let description = out.time_to_live_description();
    Ok(FoundTtl {
        status: description.and_then(|d| d.time_to_live_status()).cloned(),
        attribute: description
            .and_then(|d| d.attribute_name())
            .map(str::to_owned),
    })
}

/// Each way the table's key attributes differ from the schema's: the partition key, then the
/// sort key (expected or found `none`).
pub(crate) fn key_differences(schema: &TableSchema, found: &[FoundKey]) -> Vec<TableDifference> {
    let describe = |key: Option<(&str, &str)>| match key {
        Some((name, attribute_type)) => format!("`{name}` ({attribute_type})"),
        None => "none".to_owned(),
    };
    let found_of = |key_type: KeyType| {
        found
            .iter()
            .find(|k| k.key_type == key_type)
            .map(|k| (k.name.as_str(), k.attribute_type.as_str()))
    };
    [
        (
            "partition key",
            Some((schema.partition_key_name(), "S")),
            found_of(KeyType::Hash),
        ),
        (
            "sort key",
            schema.sort_key_name().map(|name| (name, "S")),
            found_of(KeyType::Range),
        ),
    ]
    .into_iter()
    .filter(|(_, expected, found)| expected != found)
    .map(|(setting, expected, found)| TableDifference {
        setting,
        expected: describe(expected),
        found: describe(found),
    })
    .collect()
}

/// How the table's time to live differs from the schema's TTL attribute, if it does. A schema
/// without one needs nothing of the table.
pub(crate) fn ttl_difference(schema: &TableSchema, found: &FoundTtl) -> Option<TableDifference> {
    let expected = schema.ttl_attribute_name()?;
    let found = match (&found.attribute, found.is_on()) {
        (Some(attribute), true) if attribute == expected => return None,
        (Some(attribute), true) => format!("enabled on `{attribute}`"),
        _ => found
            .status
            .as_ref()
            .map_or("unknown", |s| s.as_str())
            .to_owned(),
    };
    Some(TableDifference {
        setting: "time to live",
        expected: format!("enabled on `{expected}`"),
        found,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use aws_sdk_dynamodb::types::ReplicaDescription;

    #[test]
    fn a_global_table_is_refused_unless_every_client_writes_through_one_region() {
        let global = TableDescription::builder()
            .replicas(
                ReplicaDescription::builder()
                    .region_name("eu-west-1")
                    .build(),
            )
            .replicas(
                ReplicaDescription::builder()
                    .region_name("us-east-2")
                    .build(),
            )
            .build();
        let problem = global_table_problem(GlobalTables::Refuse, &global);
        assert_eq!(
            problem,
            Some(TableProblem::GlobalTable {
                regions: vec!["eu-west-1".into(), "us-east-2".into()]
            })
        );
        let message = problem.map(|p| p.to_string()).unwrap_or_default();
        assert!(message.contains("eu-west-1, us-east-2"), "{message}");
        assert!(
            message.contains("not serialized across Regions"),
            "{message}"
        );
        assert!(
            message.contains("GlobalTables::WritesThroughOneRegion"),
            "{message}"
        );
        assert_eq!(
            global_table_problem(GlobalTables::WritesThroughOneRegion, &global),
            None
        );
        let plain = TableDescription::builder().build();
        assert_eq!(global_table_problem(GlobalTables::Refuse, &plain), None);
    }

    fn key(name: &str, key_type: KeyType, attribute_type: &str) -> FoundKey {
        FoundKey {
            name: name.into(),
            key_type,
            attribute_type: attribute_type.into(),
        }
    }

    fn ttl(status: TimeToLiveStatus, attribute: Option<&str>) -> FoundTtl {
        FoundTtl {
            status: Some(status),
            attribute: attribute.map(str::to_owned),
        }
    }

    fn lines(differences: &[TableDifference]) -> Vec<String> {
        differences.iter().map(ToString::to_string).collect()
    }

    #[test]
    fn the_schemas_own_keys_have_no_difference() {
        let found = [
            key("PK", KeyType::Hash, "S"),
            key("SK", KeyType::Range, "S"),
        ];
        assert!(key_differences(&TableSchema::new(), &found).is_empty());
        let id_only = TableSchema::new().partition_key("id").without_sort_key();
        assert!(key_differences(&id_only, &[key("id", KeyType::Hash, "S")]).is_empty());
    }

    #[test]
    fn every_key_difference_names_expected_and_found() {
        let found = [key("pk", KeyType::Hash, "N")];
        assert_eq!(
            lines(&key_differences(&TableSchema::new(), &found)),
            [
                "partition key: expected `PK` (S), found `pk` (N)",
                "sort key: expected `SK` (S), found none",
            ]
        );
        let id_only = TableSchema::new().partition_key("id").without_sort_key();
        let found = [
            key("id", KeyType::Hash, "S"),
            key("sk", KeyType::Range, "S"),
        ];
        assert_eq!(
            lines(&key_differences(&id_only, &found)),
            ["sort key: expected none, found `sk` (S)"]
        );
    }

    #[test]
    fn ttl_must_be_on_the_schemas_attribute() {
        let schema = TableSchema::new().ttl_attribute("ttl");
        assert_eq!(
            ttl_difference(&schema, &ttl(TimeToLiveStatus::Enabled, Some("ttl"))),
            None
        );
        assert_eq!(
            ttl_difference(&schema, &ttl(TimeToLiveStatus::Enabling, Some("ttl"))),
            None
        );
        assert_eq!(
            ttl_difference(&schema, &ttl(TimeToLiveStatus::Enabled, Some("TTL")))
                .unwrap()
                .to_string(),
            "time to live: expected enabled on `ttl`, found enabled on `TTL`"
        );
        assert_eq!(
            ttl_difference(&schema, &ttl(TimeToLiveStatus::Disabled, None))
                .unwrap()
                .to_string(),
            "time to live: expected enabled on `ttl`, found DISABLED"
        );
    }

    #[test]
    fn a_schema_without_ttl_needs_none() {
        let schema = TableSchema::new().without_ttl();
        assert_eq!(
            ttl_difference(&schema, &ttl(TimeToLiveStatus::Disabled, None)),
            None
        );
        assert_eq!(
            ttl_difference(&schema, &ttl(TimeToLiveStatus::Enabled, Some("x"))),
            None
        );
    }
}
