//! Clocks: the library's [`Clock`] stopped, offset or adjustable, to make leases expire or skew a
//! client without sleeping; and the machine's monotonic clock, comparable across its processes.

use chrono::{DateTime, Utc};
use ddb_lock::Clock;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// A clock stopped at one instant.
#[derive(Debug, Clone, Copy)]
pub struct FixedClock(pub DateTime<Utc>);

impl FixedClock {
    /// The clock as the trait object the builder takes.
    pub fn shared(at: DateTime<Utc>) -> Arc<dyn Clock> {
        Arc::new(FixedClock(at))
    }
}

impl Clock for FixedClock {
    fn now(&self) -> DateTime<Utc> {
        self.0
    }
}

/// A clock running a fixed offset from the system clock.
#[derive(Debug, Clone, Copy)]
pub struct OffsetClock(pub chrono::TimeDelta);

impl OffsetClock {
    /// The clock as the trait object the builder takes.
    pub fn shared(offset: chrono::TimeDelta) -> Arc<dyn Clock> {
        Arc::new(OffsetClock(offset))
    }
}

impl Clock for OffsetClock {
    fn now(&self) -> DateTime<Utc> {
        Utc::now() + self.0
    }
}

/// A clock running an adjustable offset from the system clock, shared by the clients given it:
/// [`advance`](Self::advance) makes time pass for them at once (leases expire with no sleep).
#[derive(Debug, Default)]
pub struct AdjustableClock {
    offset_ms: AtomicI64,
}

impl AdjustableClock {
    /// A clock reading the system clock until advanced.
    pub fn new() -> Arc<AdjustableClock> {
        Arc::new(AdjustableClock::default())
    }

    /// Moves the clock `by` ahead, for every client that reads it.
    pub fn advance(&self, by: Duration) {
        let ms = i64::try_from(by.as_millis()).expect("a test duration");
        self.offset_ms.fetch_add(ms, Ordering::SeqCst);
    }

    /// Moves the clock `by` back, as a clock corrected by NTP may step, for every client that
    /// reads it.
    pub fn set_back(&self, by: Duration) {
        let ms = i64::try_from(by.as_millis()).expect("a test duration");
        self.offset_ms.fetch_sub(ms, Ordering::SeqCst);
    }
}

impl Clock for AdjustableClock {
    fn now(&self) -> DateTime<Utc> {
        let offset = self.offset_ms.load(Ordering::SeqCst);
        Utc::now() + chrono::TimeDelta::milliseconds(offset)
    }
}

/// A clock stopped at an instant it can be moved to, shared by the clients given it: every one
/// of them reads the same millisecond until [`set`](Self::set) moves it.
#[derive(Debug)]
pub struct StoppedClock {
    at_ms: AtomicI64,
}

impl StoppedClock {
    /// A clock stopped at the system clock's reading now.
    pub fn now() -> Arc<StoppedClock> {
        Arc::new(StoppedClock {
            at_ms: AtomicI64::new(Utc::now().timestamp_millis()),
        })
    }

    /// Stops the clock at `at` (to the millisecond), for every client that reads it.
    pub fn set(&self, at: DateTime<Utc>) {
        self.at_ms.store(at.timestamp_millis(), Ordering::SeqCst);
    }
}

impl Clock for StoppedClock {
    fn now(&self) -> DateTime<Utc> {
        DateTime::from_timestamp_millis(self.at_ms.load(Ordering::SeqCst))
            .expect("a millisecond within chrono's range")
    }
}

/// The current `CLOCK_MONOTONIC` reading in nanoseconds: comparable between the processes of one
/// machine (the fault suite's client histories, the benchmark harness's timings).
pub fn monotonic_ns() -> u64 {
    let now = nix::time::clock_gettime(nix::time::ClockId::CLOCK_MONOTONIC)
        .expect("CLOCK_MONOTONIC is available");
    u64::try_from(now.tv_sec()).unwrap_or(0) * 1_000_000_000
        + u64::try_from(now.tv_nsec()).unwrap_or(0)
}
