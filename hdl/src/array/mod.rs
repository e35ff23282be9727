//! The PE array: the MAC, the PE (MAC + register file), the PE row with its row engine, the
//! PE grid, and the causal-mask generator the rows are masked by.

pub mod grid;
pub mod mac;
pub mod mask;
pub mod pe;
pub mod pe_row;
pub mod pe_tier;

pub use grid::*;
