//! The description layer: a small RTL IR with a builder, and the block library built on it.
//!
//! Blocks are Rust functions from a config to a module definition; intermediate values are
//! ordinary `let`s with names that show up in the Verilog and in waveforms. One file per block:
//! `fp16_mul`, `fp32_add`, `fp16_to_fp32`, `fp32_to_fp16`, `mac`, `pe`, `array` (the PE grid);
//! `config` holds whole-design configurations and presets; `units` builds any block by name.

pub mod arith;
mod builder;
pub mod config;
pub mod core;
pub mod ieee;
pub mod ir;
mod signal;

pub mod array;
pub mod dma;
pub mod exp2;
pub mod fault;
pub mod fp16_mul;
pub mod fp16_to_fp32;
pub mod fp32_add;
pub mod fp32_misc;
pub mod fp32_mul;
pub mod fp32_recip;
pub mod fp32_to_fp16;
pub mod fsm;
pub mod iface;
pub mod landing;
pub mod mac;
pub mod mask;
pub mod pe;
pub mod pe_row;
pub mod ports;
pub mod row_reduce;
pub mod softmax;
pub mod units;
pub mod wrap;

pub use builder::{
    addr_bits, bits_for, check_latency, InstOutputs, MemHandle, ModuleBuilder, RegHandle,
};
pub use ir::{Design, ModRef, Sig};
pub use signal::{and_all, cat, mux, mux_index, or_all, Operand};
