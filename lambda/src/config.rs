//! The function's configuration, from environment variables.

use ddb_lock::{duration_from_millis, GlobalTables, LockClient, TableSchema};
use std::time::Duration;

/// Environment variable names, documented in the README.
pub mod var {
    /// The lock table (required).
    pub const TABLE: &str = "DDB_LOCK_TABLE";
    /// Key prefix of lock items (default `LOCK#`).
    pub const KEY_PREFIX: &str = "DDB_LOCK_KEY_PREFIX";
    /// Key suffix of lock items (default none).
    pub const KEY_SUFFIX: &str = "DDB_LOCK_KEY_SUFFIX";
    /// The table's partition key attribute (default `PK`).
    pub const PARTITION_KEY: &str = "DDB_LOCK_PARTITION_KEY";
    /// The table's sort key attribute (default `SK`); empty for a table without a sort key.
    pub const SORT_KEY: &str = "DDB_LOCK_SORT_KEY";
    /// The sort key value of lock items (default `LOCK`).
    pub const SORT_KEY_VALUE: &str = "DDB_LOCK_SORT_KEY_VALUE";
    /// The sort key value of fence items (default `FENCE`).
    pub const FENCE_SORT_KEY_VALUE: &str = "DDB_LOCK_FENCE_SORT_KEY_VALUE";
    /// Key prefix of fence items in a table without a sort key (default `FENCE#`).
    pub const FENCE_KEY_PREFIX: &str = "DDB_LOCK_FENCE_KEY_PREFIX";
    /// Key suffix of fence items in a table without a sort key (default none).
    pub const FENCE_KEY_SUFFIX: &str = "DDB_LOCK_FENCE_KEY_SUFFIX";
    /// The TTL attribute (default `TTL`); empty for none.
    pub const TTL_ATTRIBUTE: &str = "DDB_LOCK_TTL_ATTRIBUTE";
    /// `false` to keep lock items on release (default `true`).
    pub const DELETE_ON_RELEASE: &str = "DDB_LOCK_DELETE_ON_RELEASE";
    /// Keep released items this long, then let the TTL delete them (default unset).
    pub const KEEP_RELEASED_FOR_MS: &str = "DDB_LOCK_KEEP_RELEASED_FOR_MS";
    /// `writes-through-one-region` to accept a global table (default `refuse`).
    pub const GLOBAL_TABLES: &str = "DDB_LOCK_GLOBAL_TABLES";
    /// Lease when an event gives no `lease_ms` (default 30000).
    pub const DEFAULT_LEASE_MS: &str = "DDB_LOCK_DEFAULT_LEASE_MS";
    /// Wait of `acquire` when an event gives no `wait_ms` (default 10000).
    pub const DEFAULT_WAIT_MS: &str = "DDB_LOCK_DEFAULT_WAIT_MS";
    /// Time kept free before the invocation's deadline (default 500).
    pub const DEADLINE_MARGIN_MS: &str = "DDB_LOCK_DEADLINE_MARGIN_MS";
    /// `true` to accept `force_release` (default `false`).
    pub const ALLOW_FORCE_RELEASE: &str = "DDB_LOCK_ALLOW_FORCE_RELEASE";
    /// How long a lease must have ended before `cleanup` deletes it (default 3600000).
    pub const CLEANUP_EXPIRED_FOR_MS: &str = "DDB_LOCK_CLEANUP_EXPIRED_FOR_MS";
    /// Items `cleanup` deletes per invocation at most (default 100).
    pub const CLEANUP_MAX_DELETES: &str = "DDB_LOCK_CLEANUP_MAX_DELETES";
    /// CloudWatch namespace of the embedded metrics (default `ddb-lock`).
    pub const METRICS_NAMESPACE: &str = "DDB_LOCK_METRICS_NAMESPACE";
}

/// A variable that is missing or unreadable.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("environment variable {var}: {problem}")]
pub struct ConfigError {
    /// The variable.
    pub var: &'static str,
    /// What is wrong with it.
    pub problem: String,
}

/// The function's settings.
///
/// # Examples
///
/// ```
/// use ddb_lock_lambda::Config;
///
/// let config = Config::from_lookup(|var| (var == "DDB_LOCK_TABLE").then(|| "locks".to_owned()))
///     .unwrap();
/// assert_eq!(config.table, "locks");
/// assert!(!config.allow_force_release);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// The lock table.
    pub table: String,
    /// The table's key and TTL attributes and key formats.
    pub schema: TableSchema,
    /// Whether a release deletes the lock item (else it keeps it, cleared of its holder).
    pub delete_on_release: bool,
    /// How long a kept item is kept after its release (`None`: for good, if items are kept).
    pub keep_released_for: Option<Duration>,
    /// Whether the table may be a global table.
    pub global_tables: GlobalTables,
    /// Lease when an event gives none.
    pub default_lease: Duration,
    /// Wait of `acquire` when an event gives none.
    pub default_wait: Duration,
    /// Time kept free before the invocation's deadline.
    pub deadline_margin: Duration,
    /// Whether `force_release` is accepted.
    pub allow_force_release: bool,
    /// How long a lease must have ended before `cleanup` deletes it.
    pub cleanup_expired_for: Duration,
    /// Items `cleanup` deletes per invocation at most.
    pub cleanup_max_deletes: u32,
    /// CloudWatch namespace of the embedded metrics.
    pub metrics_namespace: String,
}

impl Config {
    /// Reads the process environment.
    pub fn from_env() -> Result<Config, ConfigError> {
        Self::from_lookup(|var| std::env::var(var).ok())
    }

    /// Reads settings through `lookup` (the environment, or a map in tests).
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Config, ConfigError> {
        let millis = |var: &'static str, default: u64| -> Result<Duration, ConfigError> {
            match lookup(var) {
                None => Ok(Duration::from_millis(default)),
                Some(text) => text
                    .trim()
                    .parse::<i64>()
                    .map_err(|_| format!("{text:?} is not a whole number of milliseconds"))
                    .and_then(|ms| duration_from_millis(var, ms).map_err(|e| e.to_string()))
                    .map_err(|problem| ConfigError { var, problem }),
            }
        };
        let table = lookup(var::TABLE)
            .filter(|t| !t.trim().is_empty())
            .ok_or(ConfigError {
                var: var::TABLE,
                problem: "must name the lock table".into(),
            })?;
        let flag = |var: &'static str, default: bool| match lookup(var).as_deref() {
            None | Some("") => Ok(default),
            Some("false") | Some("0") => Ok(false),
            Some("true") | Some("1") => Ok(true),
            Some(other) => Err(ConfigError {
                var,
                problem: format!("{other:?} is not true or false"),
            }),
        };
        let allow_force_release = flag(var::ALLOW_FORCE_RELEASE, false)?;
        let keep_released_for = match lookup(var::KEEP_RELEASED_FOR_MS) {
            None => None,
            Some(_) => Some(millis(var::KEEP_RELEASED_FOR_MS, 0)?),
        };
        // Keeping released items for a while implies keeping them.
        let delete_on_release = flag(var::DELETE_ON_RELEASE, keep_released_for.is_none())?;
        let schema = schema(&lookup)?;
        if let Some(keep) = keep_released_for {
            let problem = if delete_on_release {
                Some(format!(
                    "keeps released items, but {} is true",
                    var::DELETE_ON_RELEASE
                ))
            } else if keep < Duration::from_secs(1) {
                Some(format!(
                    "{} ms is under the minimum of 1000 ms (TTL counts seconds)",
                    keep.as_millis()
                ))
            } else if schema.ttl_attribute_name().is_none() {
                Some(format!(
                    "needs a TTL attribute to delete what it keeps, and {} is empty",
                    var::TTL_ATTRIBUTE
                ))
            } else {
                None
            };
            if let Some(problem) = problem {
                return Err(ConfigError {
                    var: var::KEEP_RELEASED_FOR_MS,
                    problem,
                });
            }
        }
        let global_tables = match lookup(var::GLOBAL_TABLES).as_deref() {
            None | Some("") | Some("refuse") => GlobalTables::Refuse,
            Some("writes-through-one-region") => GlobalTables::WritesThroughOneRegion,
            Some(other) => {
                return Err(ConfigError {
                    var: var::GLOBAL_TABLES,
                    problem: format!("{other:?} is not refuse or writes-through-one-region"),
                })
            }
        };
        let cleanup_max_deletes = match lookup(var::CLEANUP_MAX_DELETES) {
            None => 100,
            Some(text) => text.trim().parse().map_err(|_| ConfigError {
                var: var::CLEANUP_MAX_DELETES,
                problem: format!("{text:?} is not a whole number"),
            })?,
        };
        Ok(Config {
            table,
            schema,
            delete_on_release,
            keep_released_for,
            global_tables,
            default_lease: millis(var::DEFAULT_LEASE_MS, 30_000)?,
            default_wait: millis(var::DEFAULT_WAIT_MS, 10_000)?,
            deadline_margin: millis(var::DEADLINE_MARGIN_MS, 500)?,
            allow_force_release,
            cleanup_expired_for: millis(var::CLEANUP_EXPIRED_FOR_MS, 3_600_000)?,
            cleanup_max_deletes,
            metrics_namespace: lookup(var::METRICS_NAMESPACE).unwrap_or_else(|| "ddb-lock".into()),
        })
    }

    /// A lock client for this configuration over `dynamodb`.
    pub fn lock_client(
        &self,
        dynamodb: aws_sdk_dynamodb::Client,
    ) -> Result<LockClient, ddb_lock::Error> {
        let builder = LockClient::builder(dynamodb)
            .table_name(&self.table)
            .schema(self.schema.clone())
            .delete_on_release(self.delete_on_release)
            .global_tables(self.global_tables)
            .lease(self.default_lease)
            .acquire_timeout(self.default_wait);
        match self.keep_released_for {
            Some(keep) => builder.keep_released_for(keep),
            None => builder,
        }
        .build()
    }
}

/// The table schema the variables describe (each unset one keeps the library's default), checked
/// by the library, its error naming the variable of the setting at fault.
fn schema(lookup: &impl Fn(&str) -> Option<String>) -> Result<TableSchema, ConfigError> {
    let defaults = TableSchema::new();
    let mut schema = defaults.clone();
    if let Some(name) = lookup(var::PARTITION_KEY) {
        schema = schema.partition_key(name);
    }
    schema = match lookup(var::SORT_KEY).as_deref() {
        Some("") => schema.without_sort_key(),
        sort_key => {
            let name = sort_key.unwrap_or(defaults.sort_key_name().unwrap_or("SK"));
            let value = lookup(var::SORT_KEY_VALUE).unwrap_or_else(|| "LOCK".into());
            let mut schema = schema.sort_key(name, value);
            if let Some(fence) = lookup(var::FENCE_SORT_KEY_VALUE) {
                schema = schema.fence_sort_key_value(fence);
            }
            schema
        }
    };
    if let Some(prefix) = lookup(var::KEY_PREFIX) {
        schema = schema.key_prefix(prefix);
    }
    if let Some(suffix) = lookup(var::KEY_SUFFIX) {
        schema = schema.key_suffix(suffix);
    }
    let fence_prefix = lookup(var::FENCE_KEY_PREFIX);
    let fence_suffix = lookup(var::FENCE_KEY_SUFFIX);
    if fence_prefix.is_some() || fence_suffix.is_some() {
        schema = schema.fence_key_format(
            fence_prefix.unwrap_or_else(|| ddb_lock::DEFAULT_FENCE_KEY_PREFIX.into()),
            fence_suffix.unwrap_or_default(),
        );
    }
    schema = match lookup(var::TTL_ATTRIBUTE).as_deref() {
        Some("") => schema.without_ttl(),
        Some(name) => schema.ttl_attribute(name),
        None => schema,
    };
    schema.validate().map_err(|err| ConfigError {
        var: schema_var(err.field()),
        problem: err.to_string(),
    })?;
    Ok(schema)
}

/// The variable of a schema setting, as [`TableSchema::validate`] names it.
fn schema_var(field: &str) -> &'static str {
    match field {
        "partition_key" => var::PARTITION_KEY,
        "sort_key" => var::SORT_KEY,
        "sort_key_value" => var::SORT_KEY_VALUE,
        "fence_sort_key_value" => var::FENCE_SORT_KEY_VALUE,
        "fence_key" => var::FENCE_KEY_PREFIX,
        "ttl_attribute" => var::TTL_ATTRIBUTE,
        _ => var::KEY_PREFIX,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn config(vars: &[(&str, &str)]) -> Result<Config, ConfigError> {
        let vars: HashMap<String, String> = vars
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        Config::from_lookup(|k| vars.get(k).cloned())
    }

    #[test]
    fn the_table_is_required() {
        assert_eq!(config(&[]).unwrap_err().var, var::TABLE);
    }

    #[test]
    fn bad_values_name_their_variable() {
        let err = config(&[(var::TABLE, "t"), (var::DEFAULT_LEASE_MS, "-5")]).unwrap_err();
        assert_eq!(err.var, var::DEFAULT_LEASE_MS);
        let err = config(&[(var::TABLE, "t"), (var::ALLOW_FORCE_RELEASE, "yes")]).unwrap_err();
        assert_eq!(err.var, var::ALLOW_FORCE_RELEASE);
    }

    #[test]
    fn the_schema_defaults_to_the_librarys() {
        let c = config(&[(var::TABLE, "t")]).unwrap();
        assert_eq!(c.schema, TableSchema::new());
        assert!(c.delete_on_release);
        assert_eq!(c.global_tables, GlobalTables::Refuse);
    }

    #[test]
    fn every_schema_setting_comes_from_its_variable() {
        let c = config(&[
            (var::TABLE, "t"),
            (var::PARTITION_KEY, "pk"),
            (var::SORT_KEY, "sk"),
            (var::SORT_KEY_VALUE, "MUTEX"),
            (var::FENCE_SORT_KEY_VALUE, "TOKEN"),
            (var::KEY_PREFIX, "L#"),
            (var::KEY_SUFFIX, "#1"),
            (var::TTL_ATTRIBUTE, "expires"),
            (var::DELETE_ON_RELEASE, "false"),
            (var::GLOBAL_TABLES, "writes-through-one-region"),
        ])
        .unwrap();
        let expected = TableSchema::new()
            .partition_key("pk")
            .sort_key("sk", "MUTEX")
            .fence_sort_key_value("TOKEN")
            .key_prefix("L#")
            .key_suffix("#1")
            .ttl_attribute("expires");
        assert_eq!(c.schema, expected);
        assert!(!c.delete_on_release);
        assert_eq!(c.global_tables, GlobalTables::WritesThroughOneRegion);

        let id_only = config(&[
            (var::TABLE, "t"),
            (var::PARTITION_KEY, "id"),
            (var::SORT_KEY, ""),
            (var::KEY_PREFIX, ""),
            (var::KEY_SUFFIX, "#LOCK"),
            (var::FENCE_KEY_PREFIX, ""),
            (var::FENCE_KEY_SUFFIX, "#FENCE"),
            (var::TTL_ATTRIBUTE, ""),
        ])
        .unwrap();
        let expected = TableSchema::new()
            .partition_key("id")
            .without_sort_key()
            .key_prefix("")
            .key_suffix("#LOCK")
            .fence_key_format("", "#FENCE")
            .without_ttl();
        assert_eq!(id_only.schema, expected);
    }

    #[test]
    fn released_items_are_kept_for_a_while_when_asked() {
        let c = config(&[(var::TABLE, "t"), (var::KEEP_RELEASED_FOR_MS, "86400000")]).unwrap();
        assert!(!c.delete_on_release, "keeping for a while keeps");
        assert_eq!(c.keep_released_for, Some(Duration::from_secs(86_400)));
        assert_eq!(
            config(&[(var::TABLE, "t")]).unwrap().keep_released_for,
            None
        );
        let table = (var::TABLE, "t");
        for (vars, mentioned) in [
            (
                vec![
                    table,
                    (var::KEEP_RELEASED_FOR_MS, "5000"),
                    (var::DELETE_ON_RELEASE, "true"),
                ],
                "true",
            ),
            (vec![table, (var::KEEP_RELEASED_FOR_MS, "999")], "1000"),
            (
                vec![
                    table,
                    (var::KEEP_RELEASED_FOR_MS, "5000"),
                    (var::TTL_ATTRIBUTE, ""),
                ],
                var::TTL_ATTRIBUTE,
            ),
            (vec![table, (var::KEEP_RELEASED_FOR_MS, "soon")], "soon"),
        ] {
            let err = config(&vars).unwrap_err();
            assert_eq!(err.var, var::KEEP_RELEASED_FOR_MS, "{vars:?}: {err}");
            assert!(err.to_string().contains(mentioned), "{err}");
        }
    }

    #[test]
    fn a_bad_schema_names_the_variable_and_the_limit() {
        let table = (var::TABLE, "t");
        let cases = [
            (
                vec![table, (var::PARTITION_KEY, "Owner")],
                var::PARTITION_KEY,
                "Owner",
            ),
            (
                vec![table, (var::PARTITION_KEY, "")],
                var::PARTITION_KEY,
                "empty",
            ),
            (vec![table, (var::SORT_KEY, "PK")], var::SORT_KEY, "PK"),
            (
                vec![table, (var::SORT_KEY_VALUE, "FENCE")],
                var::FENCE_SORT_KEY_VALUE,
                "",
            ),
            (
                vec![table, (var::SORT_KEY, ""), (var::KEY_PREFIX, "")],
                var::FENCE_KEY_PREFIX,
                "",
            ),
            (
                vec![table, (var::TTL_ATTRIBUTE, "LockID")],
                var::TTL_ATTRIBUTE,
                "LockID",
            ),
            (
                vec![table, (var::DELETE_ON_RELEASE, "no")],
                var::DELETE_ON_RELEASE,
                "no",
            ),
            (
                vec![table, (var::GLOBAL_TABLES, "allow")],
                var::GLOBAL_TABLES,
                "allow",
            ),
        ];
        for (vars, var, mentioned) in cases {
            let err = config(&vars).unwrap_err();
            assert_eq!(err.var, var, "{vars:?}: {err}");
            assert!(err.to_string().contains(mentioned), "{err}");
        }
        let long = "k".repeat(256);
        let err = config(&[table, (var::PARTITION_KEY, &long)]).unwrap_err();
        assert_eq!(err.var, var::PARTITION_KEY);
        assert!(err.to_string().contains("255"), "{err}");
    }

    #[test]
    fn values_override_defaults() {
        let c = config(&[
            (var::TABLE, "t"),
            (var::DEFAULT_WAIT_MS, "2500"),
            (var::ALLOW_FORCE_RELEASE, "true"),
        ])
        .unwrap();
        assert_eq!(c.default_wait, Duration::from_millis(2500));
        assert!(c.allow_force_release);
        assert_eq!(c.default_lease, Duration::from_secs(30));
    }
}
