//! Whole-design configurations and the named presets.
//!
//! A [`CoreConfig`] holds every knob; derived figures are methods; [`CoreConfig::validate`]
//! explains in the user's terms what cannot work. Until the FlashAttention core exists, a
//! preset's top is its PE grid.

use anyhow::{bail, ensure, Result};
use serde::{Deserialize, Serialize};

use crate::array::PeGridConfig;
use crate::fp16_mul::Fp16MulConfig;
use crate::fp32_add::Fp32AddConfig;
use crate::mac::MacConfig;
use crate::pe::PeConfig;

/// Every knob of a regflash design.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CoreConfig {
    /// Preset or user-given name (appears in reports, not in module names).
    pub name: String,
    /// PE array rows (R).
    pub rows: u32,
    /// PE array columns (C).
    pub cols: u32,
    /// Query rows per tile (Br).
    pub br: u32,
    /// Key/value rows per block (Bc).
    pub bc: u32,
    /// Head dimension (d).
    pub head_dim: u32,
    /// 32-bit registers per PE.
    pub regs_per_pe: u32,
    /// fp16_mul pipeline registers (0..=2).
    pub mul_latency: u32,
    /// fp32_add pipeline registers (0..=2).
    pub add_latency: u32,
    /// Target clock in MHz (for constraints and reports).
    pub clock_mhz: f64,
}

/// Names of the built-in presets.
pub const PRESETS: &[&str] = &["seed", "small"];

impl CoreConfig {
    /// The built-in preset called `name`.
    pub fn preset(name: &str) -> Result<CoreConfig> {
        let base = CoreConfig {
            name: name.to_string(),
            rows: 32,
            cols: 32,
            br: 64,
            bc: 64,
            head_dim: 128,
            regs_per_pe: 64,
            mul_latency: 1,
            add_latency: 1,
            clock_mhz: 1500.0,
        };
        Ok(match name {
            // The source documents' design: 32x32 PEs, 64 registers each, Br = Bc = 64, d = 128.
            "seed" => base,
            // Same per-PE mapping (2 query rows, 2 key columns, 4 O columns per PE) on 4x4 PEs.
            "small" => CoreConfig {
                rows: 4,
                cols: 4,
                br: 8,
                bc: 8,
                head_dim: 16,
                ..base
            },
            other => bail!(
                "unknown preset `{other}`: choose one of {}",
                PRESETS.join(", ")
            ),
        })
    }

    /// Checks that the configuration can be built, explaining what is wrong otherwise.
    pub fn validate(&self) -> Result<()> {
        self.grid().validate()?;
        for (what, tile, dim, knob) in [
            ("Br (query rows per tile)", self.br, self.rows, "rows"),
            ("Bc (key rows per block)", self.bc, self.cols, "cols"),
            ("head_dim", self.head_dim, self.cols, "cols"),
        ] {
            ensure!(
                tile >= dim && tile % dim == 0,
                "{what} = {tile} must be a positive multiple of {knob} = {dim}: each PE owns an \
                 equal share"
            );
        }
        let need = self.register_bytes_needed();
        let have = self.register_bytes();
        ensure!(
            need <= have,
            "the S tile (Br*Bc*2 B = {} B) and the O accumulator (Br*d*4 B = {} B) need {need} B \
             of registers but the array has {have} B (rows*cols*regs_per_pe*4): raise \
             regs_per_pe or shrink br, bc or head_dim",
            self.br * self.bc * 2,
            self.br * self.head_dim * 4
        );
        ensure!(
            self.clock_mhz > 0.0 && self.clock_mhz.is_finite(),
            "clock_mhz = {} must be a positive number",
            self.clock_mhz
        );
        Ok(())
    }

    /// The PE configuration.
    pub fn pe(&self) -> PeConfig {
        PeConfig {
            regs: self.regs_per_pe,
            mac: MacConfig {
                mul: Fp16MulConfig {
                    latency: self.mul_latency,
                },
                add: Fp32AddConfig {
                    latency: self.add_latency,
                },
            },
        }
    }

    /// The PE grid configuration.
    pub fn grid(&self) -> PeGridConfig {
        PeGridConfig {
            rows: self.rows,
            cols: self.cols,
            pe: self.pe(),
        }
    }

    /// Number of PEs.
    pub fn pes(&self) -> u32 {
        self.rows * self.cols
    }

    /// Register-file bytes in the whole array.
    pub fn register_bytes(&self) -> u64 {
        self.pes() as u64 * self.regs_per_pe as u64 * 4
    }

    /// Register bytes the S tile (FP16) and O accumulator (FP32) need.
    pub fn register_bytes_needed(&self) -> u64 {
        self.br as u64 * self.bc as u64 * 2 + self.br as u64 * self.head_dim as u64 * 4
    }

    /// Peak multiply-accumulates per cycle (one per PE).
    pub fn peak_macs_per_cycle(&self) -> u32 {
        self.pes()
    }
}
