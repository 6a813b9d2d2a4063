//! The lock client the global options and the environment describe.
//!
//! The table's schema and defaults come from the Lambda function's variables
//! ([`ddb_lock_lambda::config::var`]), read by its own [`Config`], so a shell and a deployed
//! function configured alike see the same locks; `--table` stands for `DDB_LOCK_TABLE`.

use crate::args::Place;
use crate::failure::{Failure, USAGE};
use aws_config::{BehaviorVersion, Region};
use ddb_lock::{LockClient, Namespace};
use ddb_lock_lambda::config::var;
use ddb_lock_lambda::Config;

/// A lock client and the configuration it was built from.
pub struct Settings {
    /// The client, in the namespace of `--namespace` if one was given.
    pub client: LockClient,
    /// The configuration (table, defaults).
    pub config: Config,
    /// The namespace of `--namespace`.
    pub namespace: Option<Namespace>,
}

impl Settings {
    /// Reads the configuration and builds the client; nothing is sent to DynamoDB.
    pub async fn load(place: &Place) -> Result<Settings, Failure> {
        let config = Config::from_lookup(|name| {
            if name == var::TABLE {
                place.table.clone()
            } else {
                std::env::var(name).ok()
            }
        })
        .map_err(|err| {
            let message = if err.var == var::TABLE {
                "no lock table: pass --table or set DDB_LOCK_TABLE".to_owned()
            } else {
                err.to_string()
            };
            Failure::new(USAGE, message)
        })?;
        let namespace = place
            .namespace
            .as_deref()
            .map(Namespace::new)
            .transpose()
            .map_err(|err| Failure::new(USAGE, format!("--namespace: {err}")))?;
        let mut aws = aws_config::defaults(BehaviorVersion::latest());
        if let Some(region) = &place.region {
            aws = aws.region(Region::new(region.clone()));
        }
        if let Some(profile) = &place.profile {
            aws = aws.profile_name(profile);
        }
        if let Some(endpoint) = &place.endpoint_url {
            aws = aws.endpoint_url(endpoint);
        }
        let aws = aws.load().await;
        if aws.region().is_none() {
            return Err(Failure::new(
                USAGE,
                "no AWS Region: pass --region, set AWS_REGION, or give the profile a region",
            ));
        }
        let dynamodb = aws_sdk_dynamodb::Client::from_conf(
            ddb_lock::with_request_timeouts((&aws).into()).build(),
        );
        let client = config
            .lock_client(dynamodb)
            .map_err(|err| Failure::of(&config.table, err))?;
        let client = match &namespace {
            Some(namespace) => client
                .in_namespace(namespace.clone())
                .map_err(|err| Failure::of(&config.table, err))?,
            None => client,
        };
        Ok(Settings {
            client,
            config,
            namespace,
        })
    }

    /// The failure of a library call on this table.
    pub fn failure(&self, err: ddb_lock::Error) -> Failure {
        Failure::of(&self.config.table, err)
    }
}
