//! The checks run on a fault-suite history and the store's final state. Each names what it
//! protects; a violation is a bug in the lock (or in the way the client uses it).

use crate::history::{Op, Operation, Outcome};
use std::collections::BTreeMap;
use std::fmt;

/// The register item of one resource at the end of a run.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Register {
    /// The counter, if it was ever written.
    pub counter: Option<u64>,
    /// The highest fencing token that wrote it.
    pub token: Option<u64>,
    /// The client that wrote it last.
    pub holder: Option<String>,
}

/// A broken guarantee.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Violation {
    /// The store accepted a write with a lower token after one with a higher token had completed.
    FencingOrder {
        /// The resource.
        resource: String,
        /// The earlier, higher token.
        earlier: u64,
        /// The later, lower token.
        later: u64,
    },
    /// The counter does not equal the number of counter writes that happened.
    Counter {
        /// The resource.
        resource: String,
        /// The final counter.
        counter: u64,
        /// Writes reported done.
        ok: u64,
        /// Writes that may have happened.
        indeterminate: u64,
    },
    /// Two holds, each proven by its successful release, overlapped in time.
    OverlappingHolds {
        /// The resource.
        resource: String,
        /// The two holders.
        holders: (String, String),
    },
    /// The store's last writer is not one that believes (or may believe) it wrote.
    StoreDisagrees {
        /// The resource.
        resource: String,
        /// What the store shows.
        detail: String,
    },
    /// The lock could not be taken after the run.
    Wedged {
        /// The resource.
        resource: String,
        /// Why.
        detail: String,
    },
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Violation::FencingOrder { resource, earlier, later } => write!(
                f,
                "{resource}: token {later} was accepted after token {earlier} had written"
            ),
            Violation::Counter { resource, counter, ok, indeterminate } => write!(
                f,
                "{resource}: counter is {counter}, but {ok} writes succeeded and {indeterminate} may have (lost or phantom update)"
            ),
            Violation::OverlappingHolds { resource, holders } => write!(
                f,
                "{resource}: {} and {} held the lock at the same time",
                holders.0, holders.1
            ),
            Violation::StoreDisagrees { resource, detail } => write!(f, "{resource}: {detail}"),
            Violation::Wedged { resource, detail } => {
                write!(f, "{resource}: not acquirable after the run: {detail}")
            }
        }
    }
}

/// Checks a run's operations against the registers' final states (keyed by resource).
pub fn check(operations: &[Operation], registers: &BTreeMap<String, Register>) -> Vec<Violation> {
    let mut violations = Vec::new();
    for (resource, register) in registers {
        let ops: Vec<&Operation> = operations
            .iter()
            .filter(|o| &o.resource == resource)
            .collect();
        violations.extend(fencing_order(resource, &ops));
        violations.extend(counter(resource, &ops, register));
        violations.extend(overlapping_holds(resource, &ops));
        violations.extend(store_agrees(resource, &ops, register));
    }
    violations
}

/// Tokens accepted by the register only grow in real time.
fn fencing_order(resource: &str, ops: &[&Operation]) -> Vec<Violation> {
    let accepted: Vec<&&Operation> = ops
        .iter()
        .filter(|o| matches!(o.op, Op::Claim | Op::Write) && o.outcome == Outcome::Ok)
        .collect();
    let mut found = Vec::new();
    for first in &accepted {
        for second in &accepted {
            let (Some(a), Some(b)) = (first.token, second.token) else {
                continue;
            };
            if first.completed_ns < second.invoked_ns && a > b {
                found.push(Violation::FencingOrder {
                    resource: resource.to_owned(),
                    earlier: a,
                    later: b,
                });
            }
        }
    }
    found.truncate(1);
    found
}

/// The counter equals the number of counter writes applied: none lost, none invented.
fn counter(resource: &str, ops: &[&Operation], register: &Register) -> Option<Violation> {
    let count = |outcome| {
        ops.iter()
            .filter(|o| o.op == Op::Write && o.outcome == outcome)
            .count() as u64
    };
    let (ok, indeterminate) = (count(Outcome::Ok), count(Outcome::Info));
    let counter = register.counter.unwrap_or(0);
    (counter < ok || counter > ok + indeterminate).then(|| Violation::Counter {
        resource: resource.to_owned(),
        counter,
        ok,
        indeterminate,
    })
}

/// A successful release proves its lock item stood from acquisition to release, so two such holds
/// cannot overlap.
fn overlapping_holds(resource: &str, ops: &[&Operation]) -> Option<Violation> {
    let mut holds: Vec<(u64, u64, &str)> = Vec::new();
    let mut by_client: BTreeMap<&str, Vec<&&Operation>> = BTreeMap::new();
    for op in ops {
        by_client.entry(op.client.as_str()).or_default().push(op);
    }
    for (client, client_ops) in &by_client {
        let mut acquired: Option<u64> = None;
        for op in client_ops {
            match (op.op, op.outcome) {
                (Op::Acquire, Outcome::Ok) => acquired = Some(op.completed_ns),
                (Op::Acquire, _) => acquired = None,
                (Op::Release, Outcome::Ok) => {
                    if let Some(start) = acquired.take() {
                        holds.push((start, op.invoked_ns, client));
                    }
                }
                (Op::Release, _) => acquired = None,
                _ => {}
            }
        }
    }
    holds.sort();
    holds
        .windows(2)
        .find(|w| w[1].0 < w[0].1)
        .map(|w| Violation::OverlappingHolds {
            resource: resource.to_owned(),
            holders: (w[0].2.to_owned(), w[1].2.to_owned()),
        })
}

/// The register's last writer believes it may have written, and nobody saw a write accepted
/// with a token above the register's.
fn store_agrees(resource: &str, ops: &[&Operation], register: &Register) -> Option<Violation> {
    let writes = || ops.iter().filter(|o| matches!(o.op, Op::Claim | Op::Write));
    if let (Some(token), Some(holder)) = (register.token, &register.holder) {
        let believed = writes()
            .any(|o| &o.client == holder && o.token == Some(token) && o.outcome != Outcome::Fail);
        if !believed {
            return Some(Violation::StoreDisagrees {
                resource: resource.to_owned(),
                detail: format!(
                    "the register was last written by {holder} with token {token}, a write it saw refused or never made"
                ),
            });
        }
    }
    let highest_seen = writes()
        .filter(|o| o.outcome == Outcome::Ok)
        .filter_map(|o| o.token)
        .max();
    match (highest_seen, register.token) {
        (Some(seen), Some(stored)) if seen > stored => Some(Violation::StoreDisagrees {
            resource: resource.to_owned(),
            detail: format!("a write with token {seen} succeeded but the register holds {stored}"),
        }),
        (Some(seen), None) => Some(Violation::StoreDisagrees {
            resource: resource.to_owned(),
            detail: format!("a write with token {seen} succeeded but the register is empty"),
        }),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn op(client: &str, op: Op, outcome: Outcome, token: u64, span: (u64, u64)) -> Operation {
        Operation {
            client: client.into(),
            op,
            resource: "r".into(),
            outcome,
            token: Some(token),
            value: None,
            invoked_ns: span.0,
            completed_ns: span.1,
        }
    }

    fn register(counter: u64, token: u64, holder: &str) -> BTreeMap<String, Register> {
        BTreeMap::from([(
            "r".to_owned(),
            Register {
                counter: Some(counter),
                token: Some(token),
                holder: Some(holder.into()),
            },
        )])
    }

    #[test]
    fn a_clean_history_passes() {
        let ops = [
            op("a", Op::Acquire, Outcome::Ok, 1, (0, 1)),
            op("a", Op::Claim, Outcome::Ok, 1, (2, 3)),
            op("a", Op::Write, Outcome::Ok, 1, (4, 5)),
            op("a", Op::Release, Outcome::Ok, 1, (6, 7)),
            op("b", Op::Acquire, Outcome::Ok, 2, (5, 8)),
            op("b", Op::Claim, Outcome::Ok, 2, (9, 10)),
            op("b", Op::Write, Outcome::Ok, 2, (11, 12)),
            op("b", Op::Release, Outcome::Ok, 2, (13, 14)),
        ];
        assert_eq!(check(&ops, &register(2, 2, "b")), []);
    }

    #[test]
    fn each_broken_guarantee_is_found() {
        let ops = [
            op("a", Op::Acquire, Outcome::Ok, 2, (0, 1)),
            op("a", Op::Write, Outcome::Ok, 2, (2, 3)),
            op("b", Op::Acquire, Outcome::Ok, 1, (2, 4)),
            op("b", Op::Write, Outcome::Ok, 1, (5, 6)),
            op("a", Op::Release, Outcome::Ok, 2, (7, 8)),
            op("b", Op::Release, Outcome::Ok, 1, (9, 10)),
        ];
        let found = check(&ops, &register(1, 1, "b"));
        assert!(
            found
                .iter()
                .any(|v| matches!(v, Violation::FencingOrder { .. })),
            "{found:?}"
        );
        assert!(
            found.iter().any(|v| matches!(v, Violation::Counter { .. })),
            "{found:?}"
        );
        assert!(
            found
                .iter()
                .any(|v| matches!(v, Violation::OverlappingHolds { .. })),
            "{found:?}"
        );
        assert!(
            found
                .iter()
                .any(|v| matches!(v, Violation::StoreDisagrees { .. })),
            "{found:?}"
        );
    }
}
