//! Shared holds: the readers of a read-write lock ([`Mode::Shared`](crate::Mode::Shared)) and
//! the permits of a semaphore ([`AcquireOptions::permits`](crate::AcquireOptions::permits)),
//! in the same lock item as the exclusive holder, so that the two modes of one resource exclude
//! each other by their conditions alone.
//!
//! - [`holders`]: how the item stores them (a string set of ids, one map per holder, the
//!   waiting writer's marker) and how an answer's item is read back;
//! - [`acquire`]: a shared acquisition, and the reclaim of crashed holders' slots in the same
//!   write;
//! - [`hold`]: the extension and release of one shared hold;
//! - [`writer`]: what an exclusive acquirer does about shared holders: announce that it waits
//!   (new shared holders are then refused) and clear holders whose leases have all ended.
//!
//! `lib/DESIGN.md`, *Shared holds*, lists every request and condition.

pub(crate) mod acquire;
pub(crate) mod hold;
pub(crate) mod holders;
pub(crate) mod writer;
