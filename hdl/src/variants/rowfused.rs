//! rowfused, the row-materializing fused baseline (FLAT, docs/baselines.md): buf2d's array, row
//! engines and P banks, with each PE row's S array deep enough for its query rows' whole rows
//! of S (`keys` keys). A tile runs in two passes:
//!
//! 1. every block's QK, each followed by the copy of its S into the array at the block's place
//!    and a max sweep (the rows' max over the complete row of S, block by block);
//! 2. per block, an exp sweep over S read back from the array against the row's final max (no
//!    online rescale: every shift is 0), then the block's PV.
//!
//! Its arithmetic is standard attention's (`kernels::flash::SoftmaxPass::TwoPass`).

use anyhow::{ensure, Result};
use serde::{Deserialize, Serialize};

use super::{Arrays, Dataflow, Plan, SHome, Sram, Tile, WholeRows};

/// rowfused's knobs (the `[rowfused]` section).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RowParams {
    /// Keys of a query row the S array holds: the longest row of S (the keys a query tile
    /// sees) the design runs. A multiple of bc, with a power-of-two number of blocks.
    pub keys: u32,
    /// Emit the S and P arrays as memory-macro blackboxes (`gen` and `synth` only).
    #[serde(rename = "macro")]
    pub macro_blackbox: bool,
    /// Rows longer than `keys` spill: the blocks past the S array's capacity go to the next
    /// level (the GLB's scratch region as far as it reaches, else memory) through the O
    /// channel, and come back through the scratch channel for their exp pass. Without it such
    /// a problem is refused. (Left out of a written config when off, so a design without it
    /// keeps the header it had.)
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub spill: bool,
}

impl Default for RowParams {
    fn default() -> Self {
        RowParams {
            keys: 1024,
            macro_blackbox: false,
            spill: false,
        }
    }
}

impl RowParams {
    /// Bytes of the S arrays (per PE row a × keys FP32 scores) and the P banks (per PE row two
    /// blocks of a × bc FP16 weights), each count rounded up to a power of two per query row.
    pub fn bytes_needed(&self, cfg: &Tile) -> u64 {
        let a = (cfg.br / cfg.rows.max(1)).max(1);
        let rows = 1u64 << crate::addr_bits(a);
        // Addressed as (query row, block, key): each field rounded up to a power of two.
        let block = 1u64 << crate::addr_bits(cfg.bc);
        let blocks = (self.keys / cfg.bc.max(1)).max(1) as u64;
        let s = rows * blocks * block * 4;
        let p = 2 * rows * block * 2;
        cfg.rows as u64 * (s + p)
    }
}

impl Dataflow for RowParams {
    /// buf2d's array with whole rows of S in the S array: every QK of a tile first.
    fn plan(&self) -> Plan {
        Plan {
            arrays: Arrays::Shared { interleaves: false },
            s: SHome::Array {
                rows: Some(WholeRows {
                    keys: self.keys,
                    spill: self.spill,
                }),
            },
            s_slots: 1,
            sram: Sram {
                blackbox: self.macro_blackbox,
                ..Sram::default()
            },
            ..Plan::default()
        }
    }

    fn sram_bank_bytes(&self, cfg: &Tile) -> Option<u64> {
        Some(self.bytes_needed(cfg) / cfg.rows.max(1) as u64)
    }

    fn row_name(&self) -> String {
        format!(
            "_rf{}{}{}",
            self.keys,
            if self.macro_blackbox { "m" } else { "" },
            if self.spill { "s" } else { "" }
        )
    }

    fn validate(&self, cfg: &Tile) -> Result<()> {
        let blocks = self.keys / cfg.bc.max(1);
        ensure!(
            self.keys >= cfg.bc
                && self.keys.is_multiple_of(cfg.bc.max(1))
                && blocks.is_power_of_two(),
            "rowfused.keys = {} is not supported with bc = {}: the S array holds whole blocks of \
             a query row, a power of two of them (bc, 2·bc, 4·bc, …); use keys = {}",
            self.keys,
            cfg.bc,
            cfg.bc.max(1) * blocks.max(1).next_power_of_two()
        );
        if self.spill {
            // A spilled block row of S (bc FP32 scores) goes through the O staging buffer, as
            // unfused's S does.
            ensure!(
                cfg.bc <= cfg.head_dim,
                "rowfused.spill writes the blocks past the S array through the O staging \
                 buffer: bc = {} must not exceed head_dim = {}; lower bc, or leave spill out",
                cfg.bc,
                cfg.head_dim
            );
        }
        // The sequencer counts a tile's max and exp passes (2 per block) in index_bits.
        let most = (1u64 << cfg.index_bits) - 1;
        ensure!(
            self.keys as u64 <= most && 2 * blocks as u64 <= most,
            "rowfused.keys = {} does not fit index_bits = {}: a row of S holds at most {most} \
             keys and {} blocks of bc = {}; lower keys or raise index_bits",
            self.keys,
            cfg.index_bits,
            most / 2,
            cfg.bc
        );
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The spill's block rows of S go through the O staging buffer's rows (head_dim FP32
    /// values): a wider block is refused with what to change; without the spill it runs.
    #[test]
    fn spill_needs_block_rows_that_fit_the_staging_buffer() {
        let mut cfg = crate::config::CoreConfig::preset("small").unwrap();
        cfg.head_dim = 4;
        cfg.bc = 8;
        let cfg = cfg.tile();
        let mut r = RowParams {
            keys: 64,
            ..RowParams::default()
        };
        r.validate(&cfg).unwrap();
        r.spill = true;
        let e = r.validate(&cfg).unwrap_err().to_string();
        assert!(e.contains("bc = 8 must not exceed head_dim = 4"), "{e}");
    }
}
