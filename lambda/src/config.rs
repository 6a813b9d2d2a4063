//! The function's configuration, from environment variables.

use ddb_lock::{duration_from_millis, LockClient};
use std::time::Duration;

/// Environment variable names, documented in the README.
pub mod var {
    /// The lock table (required).
    pub const TABLE: &str = "DDB_LOCK_TABLE";
    /// Key prefix of lock items (default `LOCK#`).
    pub const KEY_PREFIX: &str = "DDB_LOCK_KEY_PREFIX";
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
    /// Key prefix of lock items.
    pub key_prefix: String,
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
        let allow_force_release = match lookup(var::ALLOW_FORCE_RELEASE).as_deref() {
            None | Some("false") | Some("0") | Some("") => false,
            Some("true") | Some("1") => true,
            Some(other) => {
                return Err(ConfigError {
                    var: var::ALLOW_FORCE_RELEASE,
                    problem: format!("{other:?} is not true or false"),
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
            key_prefix: lookup(var::KEY_PREFIX).unwrap_or_else(|| "LOCK#".into()),
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
        LockClient::builder(dynamodb)
            .table_name(&self.table)
            .key_prefix(&self.key_prefix)
            .lease(self.default_lease)
            .acquire_timeout(self.default_wait)
            .build()
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
