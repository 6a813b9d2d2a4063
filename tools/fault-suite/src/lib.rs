//! The fault suite: client processes contend for a few resources through fault-injecting proxies
//! while the suite kills, pauses, delays, cuts off, throttles and skews them, or restarts the
//! endpoint; then it checks the recorded histories and the store. See `docs/reliability.md`.

pub mod check;
pub mod history;
pub mod layout;
pub mod register;
pub mod suite;
