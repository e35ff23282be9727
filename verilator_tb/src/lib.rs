//! Build, load and drive Verilator models of regflash designs from Rust.
//!
//! The `verilated` crates do not work with Verilator 5 (docs/architecture.md, "Why our own description layer"), so the bridge is ours: a
//! C++ shim rendered with tera from the manifest's port list ([`compile`]), compiled into a
//! shared library by `verilator --build` and cached by content hash, then loaded with
//! libloading and driven through [`Dut`] ([`dut`]): ports of any width, ticks, reset, and
//! batched streaming of many cycles per call. [`memory`] is the testbench memory behind a
//! design's memory port; [`npy`] reads and writes `.npy` tensors.

pub mod axi;
pub mod compile;
pub mod dut;
pub mod memory;
pub mod npy;
pub mod pch;
pub mod runtime;

pub use compile::{BuildOptions, Profile, WaveFormat};
pub use dut::{Dut, Model, PortId, WaveOptions};
