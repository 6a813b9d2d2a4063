//! One client process of the fault suite: until its time is up, it acquires a random resource with
//! a fenced lock (or, a third of the time, every resource as one fenced lock set), claims each
//! resource's register, reads its counter, writes the counter + 1 (both writes fenced), and
//! releases; every step is recorded in a history file, a set's once per member.
//!
//! Configured by environment (set by the suite): `FAULT_ENDPOINT`, `FAULT_SCHEMA`, `FAULT_CLIENT`,
//! `FAULT_RESOURCES` (comma-separated), `FAULT_LEASE_MS`, `FAULT_DURATION_MS`,
//! `FAULT_CLOCK_OFFSET_MS` (signed), `FAULT_TAKEOVER` (`wall-clock` or `observed-lease`),
//! `FAULT_HISTORY` (the file to write), and `FAULT_UNLOCKED=1` for the suite's negative control:
//! no lock and unfenced writes, which must produce violations.

use chrono::TimeDelta;
use ddb_lock::{AcquireOptions, Error, LockSet, Mode, ReleaseOutcome, TakeoverRule};
use ddb_lock_fault_suite::history::{Op, Outcome, Recorder};
use ddb_lock_fault_suite::layout::Layout;
use ddb_lock_fault_suite::register;
use ddb_lock_test_kit::{dynamodb_with, OffsetClock};
use rand::seq::IndexedRandom;
use rand::Rng;
use std::path::PathBuf;
use std::time::Duration;
use tokio::time::Instant;

fn setting(name: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| panic!("{name} is not set"))
}

fn millis(name: &str) -> i64 {
    setting(name)
        .parse()
        .unwrap_or_else(|_| panic!("{name} is not a number of milliseconds"))
}

#[tokio::main]
async fn main() {
    let client_name = setting("FAULT_CLIENT");
    let resources: Vec<String> = setting("FAULT_RESOURCES")
        .split(',')
        .map(str::to_owned)
        .collect();
    let lease = Duration::from_millis(millis("FAULT_LEASE_MS").unsigned_abs());
    let duration = Duration::from_millis(millis("FAULT_DURATION_MS").unsigned_abs());
    let takeover = match setting("FAULT_TAKEOVER").as_str() {
        "observed-lease" => TakeoverRule::ObservedLease,
        _ => TakeoverRule::WallClock,
    };
    let dynamodb = dynamodb_with(&setting("FAULT_ENDPOINT"), |config| {
        config.timeout_config(
            aws_sdk_dynamodb::config::timeout::TimeoutConfig::builder()
                .operation_timeout(lease * 3)
                .build(),
        )
    });
    let layout: Layout = setting("FAULT_SCHEMA").parse().expect("FAULT_SCHEMA");
    let client = layout
        .builder(dynamodb.clone())
        .clock(OffsetClock::shared(TimeDelta::milliseconds(millis(
            "FAULT_CLOCK_OFFSET_MS",
        ))))
        .takeover(takeover)
        .build()
        .expect("valid settings");
    let mut history = Recorder::create(&client_name, &PathBuf::from(setting("FAULT_HISTORY")))
        .expect("history file");
    let opts = AcquireOptions::new()
        .owner(&client_name)
        .lease(lease)
        .timeout(lease * 3)
        .fencing(true);

    let unlocked = std::env::var("FAULT_UNLOCKED").is_ok_and(|v| v == "1");
    let started = Instant::now();
    while started.elapsed() < duration {
        let resource = resources
            .choose(&mut rand::rng())
            .expect("at least one resource");
        if unlocked {
            let seq = history.invoke(Op::Read, resource, None);
            let counter = register::read(&dynamodb, resource)
                .await
                .map(|r| r.counter.unwrap_or(0));
            let outcome = if counter.is_some() {
                Outcome::Ok
            } else {
                Outcome::Info
            };
            history.complete(seq, Op::Read, resource, outcome, None, counter);
            if let Some(counter) = counter {
                let seq = history.invoke(Op::Write, resource, None);
                let written =
                    register::write_unfenced(&dynamodb, resource, &client_name, counter + 1).await;
                history.complete(seq, Op::Write, resource, written, None, Some(counter + 1));
            }
            continue;
        }
        // A third of the critical sections take every resource as one fenced lock set (not
        // under the observed-lease rule, which sets do not take).
        let as_set = takeover == TakeoverRule::WallClock
            && resources.len() > 1
            && rand::rng().random_bool(1.0 / 3.0);
        let members: Vec<&str> = if as_set {
            resources.iter().map(String::as_str).collect()
        } else {
            vec![resource.as_str()]
        };
        let seqs: Vec<u64> = members
            .iter()
            .map(|member| history.invoke(Op::Acquire, member, None))
            .collect();
        let acquired = if as_set {
            let set: Vec<(&str, Mode)> = members.iter().map(|m| (*m, Mode::Exclusive)).collect();
            client
                .acquire_set(&set, &opts)
                .await
                .map(LockSet::into_locks)
        } else {
            client.acquire(resource, &opts).await.map(|lock| vec![lock])
        };
        let locks = match acquired {
            Ok(locks) => locks,
            Err(err) => {
                let outcome = match err {
                    Error::Timeout { .. } => Outcome::Fail,
                    _ => Outcome::Info,
                };
                for (seq, member) in seqs.iter().zip(&members) {
                    history.complete(*seq, Op::Acquire, member, outcome, None, None);
                }
                continue;
            }
        };
        for (seq, lock) in seqs.iter().zip(&locks) {
            let token = lock.fencing_token().map(|t| t.value());
            history.complete(*seq, Op::Acquire, lock.resource(), Outcome::Ok, token, None);
        }
        for lock in &locks {
            let token = lock
                .fencing_token()
                .expect("fenced acquisitions carry a token")
                .value();
            critical_section(
                &dynamodb,
                &mut history,
                &client_name,
                lock.resource(),
                token,
            )
            .await;
        }

        for lock in &locks {
            let token = lock.fencing_token().map(|t| t.value());
            let seq = history.invoke(Op::Release, lock.resource(), token);
            let outcome = match client.release(lock).await {
                Ok(ReleaseOutcome::Released) => Outcome::Ok,
                // Sent again after a lost answer, the lock gone: released by its first send,
                // or lost before; unknown.
                Ok(ReleaseOutcome::Unconfirmed) | Err(_) => Outcome::Info,
                Ok(_) => Outcome::Fail,
            };
            history.complete(seq, Op::Release, lock.resource(), outcome, token, None);
        }
    }
}

/// The critical section on `resource`'s register with `token`: claim it (raising its fence),
/// read its counter, write the counter + 1, each recorded.
async fn critical_section(
    dynamodb: &aws_sdk_dynamodb::Client,
    history: &mut Recorder,
    client_name: &str,
    resource: &str,
    token: u64,
) {
    let seq = history.invoke(Op::Claim, resource, Some(token));
    let claimed = register::claim(dynamodb, resource, client_name, token).await;
    history.complete(seq, Op::Claim, resource, claimed, Some(token), None);
    if claimed != Outcome::Ok {
        return;
    }
    let seq = history.invoke(Op::Read, resource, Some(token));
    let read = register::read(dynamodb, resource).await;
    let counter = read.as_ref().map(|r| r.counter.unwrap_or(0));
    let outcome = if read.is_some() {
        Outcome::Ok
    } else {
        Outcome::Info
    };
    history.complete(seq, Op::Read, resource, outcome, Some(token), counter);
    if let Some(counter) = counter {
        let seq = history.invoke(Op::Write, resource, Some(token));
        let written = register::write(dynamodb, resource, client_name, token, counter + 1).await;
        history.complete(
            seq,
            Op::Write,
            resource,
            written,
            Some(token),
            Some(counter + 1),
        );
    }
}
