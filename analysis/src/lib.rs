//! regflash's analysis model: what a design does with a problem, computed rather than
//! simulated. It answers in microseconds what the RTL answers in minutes, and is held to the
//! RTL: every simulated run checks its counters against [`schedule`] and its cycles against
//! [`cycles`].
//!
//! - [`schedule`]: a problem's block schedule and its counts (MACs, blocks, memory beats,
//!   buffer and link traffic) for a design, the counters' expected values.
//! - [`cycles`]: the cycle model, the sequencer and the memory replayed per block, equal to
//!   the RTL's cycle count at every simulated point.
//! - [`pricing`]: energy from the counters and an energy table (`kernels::energy`).
//! - [`tiers`]: the area of a design's tiers from synthesis reports.
//! - [`thermal`]: a die stack's steady-state temperatures (a compact RC grid).
//! - [`report`]: how JSON reports write numbers.
//! - [`watch`]: progress and stop requests of long runs.
//!
//! The CLI (`regflash bench`, `estimate`, `compare`) and the Python package use it; the
//! verification drivers in the `regflash` crate check the RTL against it.

pub mod cycles;
pub mod pricing;
pub mod report;
pub mod schedule;
pub mod thermal;
pub mod tiers;
pub mod watch;
