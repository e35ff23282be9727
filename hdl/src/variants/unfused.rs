//! unfused: standard attention on the same array, row engines and DMA (docs/baselines.md). A tile
//! runs in three passes, and S and P go through memory in between:
//!
//! 1. every block's QK; the row engines' max sweep over each block's S in the PE registers
//!    (the exact row max, block by block: the QK pass's epilogue) also packs the scores into
//!    the DMA's staging buffer, and the write channel writes the block to the scratch region;
//! 2. the softmax pass: per block, the scratch channel lands S back, the exp sweep reads it
//!    against the row's final max (no rescale), packs the FP16 weights into the staging
//!    buffer, and the write channel writes P over the block's S;
//! 3. the PV pass: per block, the scratch channel lands P, which the PV steps read as their
//!    row operand, with the V block.
//!
//! No S array and no P bank: the only on-chip home of S and P is the DMA's landing and
//! staging buffers. Its arithmetic is standard attention's
//! (`kernels::flash::SoftmaxPass::TwoPass`), as rowfused's is.

use anyhow::{ensure, Result};

use super::{Arrays, Dataflow, PHome, Plan, SHome, Tile};

/// unfused has no knobs of its own.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Unfused;

impl Dataflow for Unfused {
    /// S and P through memory between the passes of a tile.
    fn plan(&self) -> Plan {
        Plan {
            arrays: Arrays::Shared { interleaves: false },
            s: SHome::Memory,
            p: PHome::Memory,
            ..Plan::default()
        }
    }

    fn row_name(&self) -> String {
        "_uf".into()
    }

    fn validate(&self, cfg: &Tile) -> Result<()> {
        // A block row of S (bc FP32 scores) goes through the O staging buffer, whose rows
        // hold head_dim FP32 values.
        ensure!(
            cfg.bc <= cfg.head_dim,
            "unfused writes S through the O staging buffer: bc = {} must not exceed head_dim = \
             {}; lower bc",
            cfg.bc,
            cfg.head_dim
        );
        Ok(())
    }
}
