//! Requests to acquire: of a contended scenario's requests, those each worker sent while it was
//! acquiring (from the start of its wait to its acquisition), its releases' apart.
//!
//! The proxy records which access key signed each request ([`CallerRequest`]); a driver whose
//! workers each have a client of their own signs worker `i`'s requests with `worker<i>`. A driver
//! whose workers share one client signs them all alike, and the figure is unknown (NaN).

use crate::figures::Acquisition;
use ddb_lock_test_kit::proxy::CallerRequest;
use std::collections::HashMap;

/// The prefix of a worker's access key id: worker `i` signs with `worker<i>` (no separator:
/// DynamoDB Local accepts letters and digits only in an access key id).
const WORKER_KEY: &str = "worker";

/// The requests sent to acquire, per acquisition: for each of `acquisitions`, the `calls` signed
/// by its worker's key and received from its wait's start to its acquisition, both included;
/// summed and divided by the acquisitions. NaN if no call is signed by a worker's key, or there
/// are no acquisitions.
pub fn requests_to_acquire(acquisitions: &[Acquisition], calls: &[CallerRequest]) -> f64 {
    // Each worker's calls, by the time they were received.
    let mut by_worker: HashMap<usize, Vec<u64>> = HashMap::new();
    for call in calls {
        let worker = call
            .access_key_id
            .as_deref()
            .and_then(|key| key.strip_prefix(WORKER_KEY))
            .and_then(|index| index.parse().ok());
        if let Some(worker) = worker {
            by_worker.entry(worker).or_default().push(call.received_ns);
        }
    }
    if by_worker.is_empty() || acquisitions.is_empty() {
        return f64::NAN;
    }
    for times in by_worker.values_mut() {
        times.sort_unstable();
    }
    let sent: usize = acquisitions
        .iter()
        .map(|a| {
            by_worker.get(&a.worker).map_or(0, |times| {
                let from = times.partition_point(|&t| t < a.wait_start);
                let to = times.partition_point(|&t| t <= a.acquired);
                to.saturating_sub(from)
            })
        })
        .sum();
    sent as f64 / acquisitions.len() as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    fn acquisition(worker: usize, wait_start: u64, acquired: u64) -> Acquisition {
        Acquisition {
            worker,
            wait_start,
            acquired,
            release_start: acquired + 10,
            released: acquired + 20,
        }
    }

    fn call(key: Option<&str>, received_ns: u64) -> CallerRequest {
        CallerRequest {
            received_ns,
            access_key_id: key.map(str::to_owned),
            operation: "PutItem".into(),
        }
    }

    #[test]
    fn counts_each_workers_requests_while_it_acquires_only() {
        let acquisitions = [acquisition(0, 100, 200), acquisition(1, 100, 250)];
        let calls = [
            call(Some("worker0"), 99),  // before the wait
            call(Some("worker0"), 100), // the wait's start counts
            call(Some("worker0"), 200), // so does its acquisition's instant
            call(Some("worker0"), 215), // its release
            call(Some("worker1"), 150),
            call(Some("worker1"), 240),
            call(Some("worker1"), 265), // its release
            call(Some("test"), 150),    // nobody's
            call(None, 150),
            call(Some("worker7"), 150), // a worker without acquisitions here
        ];
        assert_eq!(requests_to_acquire(&acquisitions, &calls), 2.0);
    }

    #[test]
    fn is_unknown_without_workers_keys() {
        let acquisitions = [acquisition(0, 100, 200)];
        assert!(requests_to_acquire(&acquisitions, &[call(Some("test"), 150)]).is_nan());
        assert!(requests_to_acquire(&acquisitions, &[call(None, 150)]).is_nan());
        assert!(requests_to_acquire(&[], &[call(Some("worker0"), 150)]).is_nan());
    }
}
