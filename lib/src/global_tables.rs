//! What a client does with a global table: a table with replicas in other Regions.
//!
//! DynamoDB serializes conditional writes within one Region only. Across Regions, replication is
//! asynchronous and the last writer wins, so two clients writing to two replicas can each see the
//! lock free and each be granted it. A lock is only sound on a global table if every client of it
//! writes through one and the same Region (the other replicas serve reads, or stand by for a
//! failover that the application switches deliberately). That cannot be checked from the table,
//! so the client refuses a table with replicas unless told, with
//! [`LockClientBuilder::global_tables`](crate::LockClientBuilder::global_tables), that this holds.

use aws_sdk_dynamodb::types::TableDescription;

/// Whether a client accepts a global table (one with replicas in other Regions).
///
/// # Examples
///
/// ```
/// # fn run(dynamodb: aws_sdk_dynamodb::Client) -> Result<(), ddb_lock::Error> {
/// use ddb_lock::{GlobalTables, LockClient};
///
/// // Every client of this table writes through eu-west-1, whatever Region it runs in.
/// let client = LockClient::builder(dynamodb)
///     .table_name("locks")
///     .global_tables(GlobalTables::WritesThroughOneRegion)
///     .build()?;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum GlobalTables {
    /// [`check_table`](crate::LockClient::check_table) and
    /// [`create_table`](crate::LockClient::create_table) refuse a table with replicas
    /// ([`TableProblem::GlobalTable`](crate::TableProblem::GlobalTable)). The default.
    #[default]
    Refuse,
    /// Accept a table with replicas: the caller states that every client of the table sends
    /// its lock requests to one and the same Region (configure the SDK client's Region, not the
    /// Region the code runs in). Clients writing to two replicas can both hold the same lock.
    WritesThroughOneRegion,
}

/// The Regions of the table's replicas, as DescribeTable reports them (empty: not a global
/// table).
pub(crate) fn replica_regions(description: &TableDescription) -> Vec<String> {
    description
        .replicas()
        .iter()
        .map(|replica| replica.region_name().unwrap_or("?").to_owned())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use aws_sdk_dynamodb::types::ReplicaDescription;

    fn replica(region: &str) -> ReplicaDescription {
        ReplicaDescription::builder().region_name(region).build()
    }

    #[test]
    fn a_table_without_replicas_is_not_global() {
        assert!(replica_regions(&TableDescription::builder().build()).is_empty());
        let empty = TableDescription::builder()
            .set_replicas(Some(vec![]))
            .build();
        assert!(replica_regions(&empty).is_empty());
    }

    #[test]
    fn every_replica_region_is_named() {
        let global = TableDescription::builder()
            .replicas(replica("eu-west-1"))
            .replicas(replica("us-east-1"))
            .build();
        assert_eq!(replica_regions(&global), ["eu-west-1", "us-east-1"]);
    }
}
