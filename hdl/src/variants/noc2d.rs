//! noc2d: the 2-D multi-array baseline 3D-Flow compares against (its "2-D multi-array
//! architectures limited by NoC-based router-to-router transfers"): reg3d's two arrays, QK
//! with the row engines and PV, placed side by side on one die, each on its own step bus and
//! running at once, with P crossing from the QK array's row engines to the PV array's P banks
//! over a line of mesh routers (`array::noc_path`: a source bank, flits of `flit_bits`, `hops`
//! router hops with `buffer_depth`-flit FIFOs, a receiver) instead of vertical links.
//!
//! All the rows share the one line: each word of a block's P (one weight of every PE row) is
//! cut into flits, so the flit width against R weights a word sets how fast P crosses, and the
//! PV of a block waits for its last word. The per-block shifts and the per-tile l, a words a
//! row (1/Bc of P), and O's readout stay on point-to-point wires as in reg3d (the readout
//! belongs beside the PV array in such a design; it is the row engine's here).

use anyhow::{ensure, Result};
use serde::{Deserialize, Serialize};

use super::{Arrays, Dataflow, NocPlan, Plan, Tile};

/// noc2d's knobs (the `[noc2d]` section).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct NocParams {
    /// Bits of a flit: the destination's x and y, the block's slot bit, and whole weights, one
    /// per PE row, as many as fit.
    pub flit_bits: u32,
    /// Router hops between the QK array's router and the PV array's (1: neighbours).
    pub hops: u32,
    /// Flits each router input FIFO holds (4 or more: a flit a cycle; d < 4: d every four
    /// cycles, a credit's round trip).
    pub buffer_depth: u32,
}

impl Default for NocParams {
    /// 128-bit flits (DSENT's and Orion's 45 nm reference router), neighbouring arrays, and
    /// FIFOs deep enough for a flit a cycle.
    fn default() -> Self {
        NocParams {
            flit_bits: 128,
            hops: 1,
            buffer_depth: 4,
        }
    }
}

impl Dataflow for NocParams {
    /// reg3d's two arrays, side by side, P over the NoC.
    fn plan(&self) -> Plan {
        Plan {
            arrays: Arrays::PerPhase,
            noc: Some(NocPlan {
                flit_bits: self.flit_bits,
                hops: self.hops,
                depth: self.buffer_depth,
            }),
            ..Plan::default()
        }
    }

    fn row_name(&self) -> String {
        "_noc".into()
    }

    fn validate(&self, _: &Tile) -> Result<()> {
        ensure!(
            (1..=15).contains(&self.hops),
            "noc2d.hops = {} is out of range: the arrays are 1 to 15 router hops apart",
            self.hops
        );
        ensure!(
            (1..=16).contains(&self.buffer_depth),
            "noc2d.buffer_depth = {} is out of range: a router's input FIFO holds 1 to 16 flits \
             (4 pass a flit a cycle)",
            self.buffer_depth
        );
        let coords = 2 * kernels::noc::coord_bits(self.hops);
        ensure!(
            (coords + 17..=1024).contains(&self.flit_bits),
            "noc2d.flit_bits = {} is out of range: a flit holds its destination ({coords} bits), \
             the block's slot (1 bit) and at least one 16-bit weight, up to 1024 bits",
            self.flit_bits
        );
        Ok(())
    }
}
