//! The description layer: a small RTL IR with a builder, and the block library built on it.
//!
//! Blocks are Rust functions from a config to a module definition; intermediate values are
//! ordinary `let`s (operators on signals) with names that show up in the Verilog and in
//! waveforms. By subsystem:
//!
//! * `ir/`: the IR (`mod.rs`), signals and their operators (`signal.rs`), the module builder
//!   (`builder.rs`), typed port groups (`iface.rs`), state machines (`fsm.rs`);
//! * `fp/`: the floating-point units; `softmax/`: exp2, the row state, the row reduction;
//! * `array/`: MAC, PE, PE tiers, PE row, causal mask; `mem/`: DMA and landing buffers;
//! * `core/`: the FlashAttention core (sequencer, fetch, readout, counters, checker);
//! * `soc/`: the stable top, its AXI4-Lite registers and the register map;
//! * `variants/`: reg2d, buf2d, reg3d, rowfused and unfused, each with its knobs and its
//!   phase plan (`Dataflow::plan`);
//! * `config/` (whole-design configurations, TOML files and presets), `fault` (fault
//!   injection), `wrap` (the pin-limited serial wrapper of FPGA smoke builds), `operands` (the
//!   operand port groups the small blocks share).
//!
//! The folders are layers, and a file imports only from its own layer and the ones below
//! (docs/architecture.md, "Layers"; the `layering` test holds it). The registry of blocks by
//! name (RTL, model, stimulus, checker) is the `regflash` crate's `units`.

pub mod array;
pub mod clock_gate;
pub mod config;
pub mod core;
pub mod fault;
pub mod format;
pub mod fp;
pub mod ir;
pub mod link;
pub mod mem;
pub mod operands;
pub mod soc;
pub mod softmax;
pub mod variants;
pub mod wrap;

// The description layer's own names, used by every block: the IR's types, the builder and the
// signal operators. The blocks are reached by their folders (`hdl::fp::add`,
// `hdl::array::pe_row`, `hdl::mem::dma`), so this root imports from nothing above the IR.
use ir::{builder, signal};

pub use builder::{check_latency, InstOutputs, MemHandle, ModuleBuilder, RegHandle};
pub use ir::{Design, ModRef, Sig};
pub use signal::{addr_bits, and_all, bits_for, cat, mux, mux_index, or_all, Operand};
