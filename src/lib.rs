//! regflash: a register-level FlashAttention NPU generator. This crate holds the command line
//! (the default feature `cli`) and the checks that tie the layers together (generate,
//! simulate, compare); the Python extension uses it without the command line.

pub mod area;
pub mod bench;
pub mod claims;
#[cfg(feature = "cli")]
pub mod cli;
pub mod compare;
pub mod cycles;
pub mod design;
#[cfg(feature = "cli")]
pub mod docs;
pub mod estimate;
pub mod power;
pub mod pricing;
pub mod report;
pub mod schedule;
pub mod sim;
pub mod tiers;
pub mod units;
pub mod verify;
pub mod watch;
