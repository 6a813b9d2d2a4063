//! Creating and checking the lock table.
//!
//! The table needs a string partition key `PK`, a string sort key `SK` and time to live on `TTL`.
//! [`create`] makes one (on-demand billing) or accepts a matching one, never touching the TTL of a
//! table whose key schema is not ours; [`check`] verifies an existing table at start-up so that a
//! misconfigured table fails loudly before the first lock. Both serve the methods of the same
//! names on [`LockClient`](crate::LockClient).

use crate::error::{Error, TableProblem};
use crate::item::{PK, SK, TTL};
use crate::lock_table::LockTable;
use aws_sdk_dynamodb::client::Waiters;
use aws_sdk_dynamodb::operation::create_table::CreateTableError;
use aws_sdk_dynamodb::operation::describe_table::DescribeTableError;
use aws_sdk_dynamodb::types::{
    AttributeDefinition, BillingMode, KeySchemaElement, KeyType, ScalarAttributeType,
    TimeToLiveSpecification, TimeToLiveStatus,
};
use std::time::Duration;

/// How long [`LockClient::create_table`](crate::LockClient::create_table) waits for a new table to become active.
const CREATE_WAIT: Duration = Duration::from_secs(300);

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
    // Never touch the TTL setting of a table that is not a lock table.
    if let Some(problem) = key_schema_problem(table).await? {
        return Err(table_error(table, problem));
    }
    if let Some(TableProblem::TtlDisabled { .. }) = ttl_problem(table).await? {
        enable_ttl(table).await?;
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
    let created = table
        .dynamodb
        .create_table()
        .table_name(&table.name)
        .attribute_definitions(definition(PK)?)
        .attribute_definitions(definition(SK)?)
        .key_schema(key(PK, KeyType::Hash)?)
        .key_schema(key(SK, KeyType::Range)?)
        .billing_mode(BillingMode::PayPerRequest)
        .send()
        .await;
    match created {
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

/// Enables TTL on `TTL`.
async fn enable_ttl(table: &LockTable) -> Result<(), Error> {
    let spec = TimeToLiveSpecification::builder()
        .enabled(true)
        .attribute_name(TTL)
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
        if ttl_problem(table).await?.is_some() {
            return Err(Error::backend("UpdateTimeToLive", err));
        }
    }
    Ok(())
}

/// Verifies key schema and TTL; see [`LockClient::check_table`](crate::LockClient::check_table).
pub(crate) async fn check(table: &LockTable) -> Result<(), Error> {
    let problem = match key_schema_problem(table).await? {
        Some(problem) => Some(problem),
        None => ttl_problem(table).await?,
    };
    problem.map_or(Ok(()), |problem| Err(table_error(table, problem)))
}

/// The error for a table with `problem`.
fn table_error(table: &LockTable, problem: TableProblem) -> Error {
    Error::Table {
        table: table.name.clone(),
        problem,
    }
}

/// What is wrong with the table's key schema, if anything (a missing table included).
async fn key_schema_problem(table: &LockTable) -> Result<Option<TableProblem>, Error> {
    let described = table
        .dynamodb
        .describe_table()
        .table_name(&table.name)
        .send()
        .await;
    let table = match described {
        Ok(out) => out.table,
        Err(err)
            if matches!(
                err.as_service_error(),
                Some(DescribeTableError::ResourceNotFoundException(_))
            ) =>
        {
            return Ok(Some(TableProblem::Missing))
        }
        Err(err) => return Err(Error::backend("DescribeTable", err)),
    };
    let Some(table) = table else {
        return Ok(Some(TableProblem::Missing));
    };
    let type_of = |name: &str| {
        table
            .attribute_definitions()
            .iter()
            .find(|d| d.attribute_name() == name)
            .map_or("?", |d| d.attribute_type().as_str())
    };
    let found: Vec<(String, String, String)> = table
        .key_schema()
        .iter()
        .map(|k| {
            let name = k.attribute_name().to_owned();
            let kind = type_of(&name).to_owned();
            (name, k.key_type().as_str().to_owned(), kind)
        })
        .collect();
    let expected = [(PK, "HASH", "S"), (SK, "RANGE", "S")];
    let matches = found.len() == expected.len()
        && found
            .iter()
            .zip(expected)
            .all(|((n, k, t), (en, ek, et))| n == en && k == ek && t == et);
    Ok((!matches).then(|| TableProblem::KeySchema {
        found: found
            .iter()
            .map(|(n, k, t)| format!("{n} ({k}, {t})"))
            .collect::<Vec<_>>()
            .join(" + "),
    }))
}

/// What is wrong with the table's time to live, if anything.
async fn ttl_problem(table: &LockTable) -> Result<Option<TableProblem>, Error> {
    let out = table
        .dynamodb
        .describe_time_to_live()
        .table_name(&table.name)
        .send()
        .await
        .map_err(|e| Error::backend("DescribeTimeToLive", e))?;
    let description = out.time_to_live_description();
    let status = description.and_then(|d| d.time_to_live_status());
    let attribute = description.and_then(|d| d.attribute_name());
    Ok(match status {
        Some(TimeToLiveStatus::Enabled | TimeToLiveStatus::Enabling) => match attribute {
            Some(TTL) => None,
            other => Some(TableProblem::TtlAttribute {
                attribute: other.unwrap_or_default().to_owned(),
            }),
        },
        other => Some(TableProblem::TtlDisabled {
            status: other.map_or("unknown", |s| s.as_str()).to_owned(),
        }),
    })
}
