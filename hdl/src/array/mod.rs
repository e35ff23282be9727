//! The PE array: the MAC, the PE (MAC + register file), the PE tiers and the PE row with its
//! row engine, the vertical links' spare lanes and repair, and the causal-mask generator the
//! rows are masked by.

pub mod int_dot;
pub mod mac;
pub mod mask;
pub mod noc;
pub mod noc_path;
pub mod pe;
pub mod pe_row;
pub mod pe_tier;
