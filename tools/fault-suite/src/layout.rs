//! Which table layout a run uses: the default schema, or a table of the user's own keyed by `id`
//! alone. The suite and its client processes build their clients from the same [`Layout`]
//! (passed to the clients as `FAULT_SCHEMA`).

use ddb_lock::{LockClient, LockClientBuilder, TableSchema};
use std::fmt;
use std::str::FromStr;

/// A table layout the suite can run on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Layout {
    /// `PK`/`SK`, `LOCK#<resource>`, TTL on `TTL`, in the table `ddb-lock-faults`.
    #[default]
    Default,
    /// `id` alone, `lock:<resource>` and `fence:<resource>`, TTL on `ttl`, in the table
    /// `ddb-lock-faults-id-only`.
    IdOnly,
}

impl Layout {
    /// The lock table of this layout, apart from the integration tests' tables.
    pub fn table(self) -> &'static str {
        match self {
            Layout::Default => "ddb-lock-faults",
            Layout::IdOnly => "ddb-lock-faults-id-only",
        }
    }

    /// The schema of this layout's table.
    pub fn schema(self) -> TableSchema {
        match self {
            Layout::Default => TableSchema::new(),
            Layout::IdOnly => ddb_lock_test_kit::schemas::id_only(),
        }
    }

    /// A builder of a client of this layout's table.
    pub fn builder(self, dynamodb: aws_sdk_dynamodb::Client) -> LockClientBuilder {
        LockClient::builder(dynamodb)
            .table_name(self.table())
            .schema(self.schema())
    }
}

impl fmt::Display for Layout {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Layout::Default => "default",
            Layout::IdOnly => "id-only",
        })
    }
}

impl FromStr for Layout {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "default" => Ok(Layout::Default),
            "id-only" => Ok(Layout::IdOnly),
            other => Err(format!("{other:?} is not default or id-only")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_layout_survives_its_name_and_its_schema_is_valid() {
        for layout in [Layout::Default, Layout::IdOnly] {
            assert_eq!(layout.to_string().parse(), Ok(layout));
            assert!(layout.schema().validate().is_ok());
        }
        assert!("pk-sk".parse::<Layout>().is_err());
    }
}
