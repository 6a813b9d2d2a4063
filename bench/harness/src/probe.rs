//! `bench probe`: the latency and the CPU cost of each request shape of an uncontended
//! acquire + release, measured directly against the endpoint (no proxy), one request at a time.
//!
//! The shapes go from dynamodb-lease's (three attributes, a hash key) to ddb-lock's (nine
//! attributes, hash and range key, attribute-name placeholders, `ReturnValuesOnConditionCheckFailure`)
//! one difference at a time, and ddb-lock's own `acquire` + `release` for reference. They run in
//! interleaved blocks, so that a drift of the machine or of the engine weighs on each alike, and
//! each block's CPU time is read for this process (the client side) and for the engine.

use crate::cpu::{Reading, Spent};
use aws_sdk_dynamodb::types::{AttributeValue, ReturnValuesOnConditionCheckFailure};
use aws_sdk_dynamodb::Client;
use ddb_lock::{AcquireOptions, LockClient};
use ddb_lock_test_kit::{dynamodb_at, ensure_table, TableKind};
use std::collections::HashMap;
use std::time::{Duration, Instant};

/// The lock table of the probe (ddb-lock's schema: `PK` hash, `SK` range).
const LOCK_TABLE: &str = "bench-probe-ddb-lock";
/// A table with a hash key only, as dynamodb-lease's (`key`).
const HASH_TABLE: &str = "bench-probe-hash";

/// One request shape: a PutItem and a DeleteItem of one key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Shape {
    /// dynamodb-lease's requests on a hash-key table: 3 attributes, conditions on plain names.
    Lease,
    /// The same on ddb-lock's table (the range key `SK` added).
    LeaseCompositeKey,
    /// ddb-lock's conditions and placeholders, but only the key and `LockID`, `Owner`, `ExpiresAt`.
    SmallItem,
    /// ddb-lock's full item without any condition.
    FullItemUnconditional,
    /// ddb-lock's full item and conditions, without `ReturnValuesOnConditionCheckFailure`.
    FullItemNoReturnValues,
    /// ddb-lock's requests exactly, built by hand.
    FullItem,
    /// `LockClient::acquire` + `LockClient::release`.
    Library,
}

impl Shape {
    const ALL: [Shape; 7] = [
        Shape::Lease,
        Shape::LeaseCompositeKey,
        Shape::SmallItem,
        Shape::FullItemUnconditional,
        Shape::FullItemNoReturnValues,
        Shape::FullItem,
        Shape::Library,
    ];

    fn name(self) -> &'static str {
        match self {
            Shape::Lease => "dynamodb-lease's put + delete (hash key, 3 attributes)",
            Shape::LeaseCompositeKey => "the same, hash + range key",
            Shape::SmallItem => "ddb-lock's conditions, 5 attributes",
            Shape::FullItemUnconditional => "ddb-lock's 9 attributes, no conditions",
            Shape::FullItemNoReturnValues => "ddb-lock's requests without ReturnValuesOnCCF",
            Shape::FullItem => "ddb-lock's requests, by hand",
            Shape::Library => "ddb-lock acquire + release (the library)",
        }
    }
}

fn s(value: impl Into<String>) -> AttributeValue {
    AttributeValue::S(value.into())
}

fn n(value: impl ToString) -> AttributeValue {
    AttributeValue::N(value.to_string())
}

/// A time stamp as ddb-lock stores it.
fn timestamp(at: chrono::DateTime<chrono::Utc>) -> String {
    ddb_lock::timestamp::format(at)
}

/// What the probe needs: an SDK client, a lock client of the probe's table, a run id.
struct Probe {
    sdk: Client,
    locks: LockClient,
    run: String,
}

impl Probe {
    /// One put + delete of `shape` on key number `i`; the put's and the delete's latency.
    async fn pair(&self, shape: Shape, i: usize) -> Result<(Duration, Duration), String> {
        let resource = format!("probe/{}/{i}", self.run);
        let owner = "bench-probe-owner-with-a-realistic-length-0123456789";
        let now = chrono::Utc::now();
        let expires = now + chrono::TimeDelta::milliseconds(2000);
        let lock_id = uuid::Uuid::new_v4().to_string();
        let started = Instant::now();
        if shape == Shape::Library {
            let opts = AcquireOptions::new()
                .owner(owner)
                .lease(Duration::from_secs(2));
            let lock = self
                .locks
                .acquire(&resource, &opts)
                .await
                .map_err(|e| e.to_string())?;
            let put = started.elapsed();
            self.locks.release(&lock).await.map_err(|e| e.to_string())?;
            return Ok((put, started.elapsed() - put));
        }
        let hash_only = shape == Shape::Lease;
        let table = if hash_only { HASH_TABLE } else { LOCK_TABLE };
        let mut key = HashMap::new();
        if hash_only {
            key.insert("key".to_owned(), s(&resource));
        } else {
            key.insert("PK".to_owned(), s(format!("LOCK#{resource}")));
            key.insert("SK".to_owned(), s("LOCK"));
        }
        let mut item = key.clone();
        let full = matches!(
            shape,
            Shape::FullItem | Shape::FullItemNoReturnValues | Shape::FullItemUnconditional
        );
        if matches!(shape, Shape::Lease | Shape::LeaseCompositeKey) {
            item.insert("lease_expiry".into(), n(expires.timestamp()));
            item.insert("lease_version".into(), s(&lock_id));
        } else {
            item.insert("LockID".into(), s(&lock_id));
            item.insert("Owner".into(), s(owner));
            item.insert("ExpiresAt".into(), s(timestamp(expires)));
        }
        if full {
            item.insert("AcquiredAt".into(), s(timestamp(now)));
            item.insert("TTL".into(), n(expires.timestamp() + 3600));
            item.insert("Version".into(), s(uuid::Uuid::new_v4().to_string()));
            item.insert("LeaseMs".into(), n(2000));
        }
        let return_values = matches!(shape, Shape::FullItem | Shape::SmallItem)
            .then_some(ReturnValuesOnConditionCheckFailure::AllOld);
        let put = self
            .sdk
            .put_item()
            .table_name(table)
            .set_item(Some(item))
            .set_return_values_on_condition_check_failure(return_values.clone());
        let put = match shape {
            Shape::Lease | Shape::LeaseCompositeKey => put
                .condition_expression("attribute_not_exists(lease_version) OR lease_expiry < :now")
                .expression_attribute_values(":now", n(now.timestamp())),
            Shape::FullItemUnconditional => put,
            _ => put
                .condition_expression("attribute_not_exists(#pk) OR #expires_at < :now")
                .expression_attribute_names("#pk", "PK")
                .expression_attribute_names("#expires_at", "ExpiresAt")
                .expression_attribute_values(":now", s(timestamp(now))),
        };
        put.send().await.map_err(|e| format!("PutItem: {e:?}"))?;
        let put = started.elapsed();
        let delete = self
            .sdk
            .delete_item()
            .table_name(table)
            .set_key(Some(key))
            .set_return_values_on_condition_check_failure(return_values);
        let delete = match shape {
            Shape::Lease | Shape::LeaseCompositeKey => delete
                .condition_expression("lease_version=:lease_v")
                .expression_attribute_values(":lease_v", s(&lock_id)),
            Shape::FullItemUnconditional => delete,
            _ => delete
                .condition_expression("#lock_id = :lock_id AND #owner = :owner")
                .expression_attribute_names("#lock_id", "LockID")
                .expression_attribute_names("#owner", "Owner")
                .expression_attribute_values(":lock_id", s(&lock_id))
                .expression_attribute_values(":owner", s(owner)),
        };
        delete
            .send()
            .await
            .map_err(|e| format!("DeleteItem: {e:?}"))?;
        Ok((put, started.elapsed() - put))
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(f64::NAN)
}

/// Runs `rounds` rounds of `block` pairs of every shape, interleaved, and prints a table.
pub async fn run(endpoint: &str, engine: Option<u32>, rounds: usize, block: usize) {
    let sdk = dynamodb_at(endpoint);
    let locks = LockClient::builder(sdk.clone())
        .table_name(LOCK_TABLE)
        .build()
        .expect("valid lock client settings");
    ensure_table(&sdk, LOCK_TABLE, TableKind::Locks).await;
    ensure_table(&sdk, HASH_TABLE, TableKind::Items { key: "key" }).await;
    let probe = Probe {
        sdk,
        locks,
        run: uuid::Uuid::new_v4().simple().to_string(),
    };
    println!(
        "probe: {endpoint}, engine pid {}, {rounds} rounds of {block} pairs per shape, interleaved",
        engine.map_or("unknown".to_owned(), |p| p.to_string())
    );
    // Warm-up: the engine compiles each request path on first use (JIT).
    for shape in Shape::ALL {
        for i in 0..block {
            probe.pair(shape, i).await.expect("warm-up pair");
        }
    }
    let mut puts: Vec<Vec<f64>> = vec![Vec::new(); Shape::ALL.len()];
    let mut deletes: Vec<Vec<f64>> = vec![Vec::new(); Shape::ALL.len()];
    let mut spent: Vec<Vec<Spent>> = vec![Vec::new(); Shape::ALL.len()];
    for round in 0..rounds {
        // Rotate the order from round to round.
        for k in 0..Shape::ALL.len() {
            let index = (k + round) % Shape::ALL.len();
            let shape = Shape::ALL[index];
            let before = Reading::now(engine);
            for i in 0..block {
                let (put, delete) = probe.pair(shape, i).await.expect("probe pair");
                puts[index].push(put.as_secs_f64() * 1e3);
                deletes[index].push(delete.as_secs_f64() * 1e3);
            }
            spent[index].push(before.since(engine));
        }
    }
    println!(
        "| shape | put p50 ms | delete p50 ms | pair p50 ms | client CPU ms/pair | engine CPU ms/pair |"
    );
    println!("|---|---:|---:|---:|---:|---:|");
    for (index, shape) in Shape::ALL.iter().enumerate() {
        let pairs: Vec<f64> = puts[index]
            .iter()
            .zip(&deletes[index])
            .map(|(p, d)| p + d)
            .collect();
        let per_pair = |f: fn(&Spent) -> f64| {
            median(
                spent[index]
                    .iter()
                    .map(|s| 1e3 * f(s) / block as f64)
                    .collect(),
            )
        };
        println!(
            "| {} | {:.2} | {:.2} | {:.2} | {:.2} | {:.2} |",
            shape.name(),
            median(puts[index].clone()),
            median(deletes[index].clone()),
            median(pairs),
            per_pair(|s| s.own),
            per_pair(|s| s.engine.unwrap_or(f64::NAN)),
        );
    }
}
