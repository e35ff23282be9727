//! regflash: a register-level FlashAttention NPU generator. This crate holds the command line
//! and the checks that tie the layers together (generate, simulate, compare).

pub mod area;
pub mod bench;
pub mod claims;
pub mod cli;
pub mod compare;
pub mod cycles;
pub mod design;
pub mod docs;
pub mod estimate;
pub mod pricing;
pub mod report;
pub mod schedule;
pub mod sim;
pub mod tiers;
pub mod units;
pub mod verify;
