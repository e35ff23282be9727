//! The built-in presets.

use anyhow::{bail, Result};

use super::{CoreConfig, Variant};
use crate::mem::dma::MemIf;
use crate::mem::glb::{GlbParams, GlbPlacement};

/// Names of the built-in presets.
pub const PRESETS: &[&str] = &["seed", "small", "medium", "npu16"];

impl CoreConfig {
    /// The built-in preset called `name`.
    pub fn preset(name: &str) -> Result<CoreConfig> {
        let base = CoreConfig {
            rescale: crate::softmax::Rescale::Pow2,
            accumulate: crate::array::pe::Accumulate::Auto,
            in_format: crate::format::Format::FP16,
            qk_format: None,
            name: name.to_string(),
            rows: 32,
            cols: 32,
            br: 64,
            bc: 64,
            head_dim: 128,
            regs_per_pe: 64,
            mul_latency: 1,
            add_latency: 1,
            fmul_latency: 1,
            exp_latency: 2,
            index_bits: 16,
            mem_width: 256,
            addr_bits: 32,
            max_outstanding: 128,
            clock_mhz: 1500.0,
            variant: Variant::Reg2d,
            top_name: super::DEFAULT_TOP_NAME.into(),
            mem_if: MemIf::default(),
            axi_id_bits: crate::mem::dma::DEFAULT_AXI_ID_BITS,
            axi_outstanding: crate::mem::dma::DEFAULT_AXI_OUTSTANDING,
            glb: crate::mem::glb::GlbParams::default(),
        };
        Ok(match name {
            // The source documents' design: 32x32 PEs, 64 registers each, Br = Bc = 64, d = 128,
            // fed by the stacked SRAM over a 512-bit port: a K/V block pair (32 KiB) per 1,024
            // MAC steps needs 256 bits a cycle, Q loads and O writes come on top, so a 256-bit
            // port holds the array at 93 % at seq 1024 and 512 bits at 99 %
            // (presets/seed_port256.toml keeps the narrower port for comparison).
            // Under it, the source's SRAM tier: 4 MB stacked over the logic (TSV), 128 KB per
            // PE row (32 banks of 512-bit words), which keeps K and V of a head up to 8,192
            // keys (presets/seed_noglb.toml is the same array without it).
            "seed" => CoreConfig {
                mem_width: 512,
                glb: GlbParams {
                    bytes: 4 << 20,
                    banks: 32,
                    placement: GlbPlacement::Stacked,
                    ..GlbParams::default()
                },
                ..base
            },
            // Same per-PE mapping (2 query rows, 2 key columns, 4 O columns per PE) on 4x4 PEs.
            "small" => CoreConfig {
                rows: 4,
                cols: 4,
                br: 8,
                bc: 8,
                head_dim: 16,
                ..base
            },
            // The same mapping on 8x8 PEs: Br = Bc = 16, d = 32.
            "medium" => CoreConfig {
                rows: 8,
                cols: 8,
                br: 16,
                bc: 16,
                head_dim: 32,
                ..base
            },
            // 16x16 PEs as in the NPU evaluation: 4 query rows, 4 keys and 8 O columns per PE
            // fill the 64 registers exactly (2 x 16 S + 32 O),
            // with the evaluation's 4 MB of SRAM beside the array, 256 KB per PE row.
            "npu16" => CoreConfig {
                rows: 16,
                cols: 16,
                glb: GlbParams {
                    bytes: 4 << 20,
                    banks: 16,
                    placement: GlbPlacement::Planar,
                    ..GlbParams::default()
                },
                ..base
            },
            other => bail!(
                "unknown preset `{other}`: choose one of {}",
                PRESETS.join(", ")
            ),
        })
    }
}
