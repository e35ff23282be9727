//! regflash: a register-level FlashAttention NPU generator. This crate holds the command line
//! (the default feature `cli`) and the checks that tie the layers together (generate,
//! simulate, compare); the Python extension uses it without the command line.

pub mod area;
pub mod backward;
pub mod bench;
pub mod claims;
#[cfg(feature = "cli")]
pub mod cli;
pub mod compare;
pub mod design;
pub mod die_stack;
#[cfg(feature = "cli")]
pub mod docs;
pub mod estimate;
pub mod power;
pub mod sim;
pub mod solve;
pub mod units;
pub mod verify;

// The analysis model, a crate of its own (analysis/): under its old paths too.
pub use analysis::{cycles, pricing, report, schedule, thermal, tiers, watch};
