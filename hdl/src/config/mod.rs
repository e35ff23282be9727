//! Whole-design configurations and the named presets.
//!
//! Files: this one holds [`CoreConfig`] and the block configurations derived from it;
//! `file` TOML files (and the older format's keys),
//! `presets` the built-in presets, `validate` what cannot be built. The variants and their
//! knobs are `crate::variants`.
//!
//! A [`CoreConfig`] holds every knob; derived figures are methods; [`CoreConfig::validate`]
//! explains in the user's terms what cannot work. A preset's design is `regflash_top`: the
//! core behind its AXI4-Lite registers.

use anyhow::{ensure, Result};
use kernels::quant::QkFormat;
use serde::{Deserialize, Serialize};

mod file;
mod presets;
mod validate;

pub use crate::variants::{
    BufParams, Dataflow, NocParams, RowParams, StackParams, Variant, VariantKind,
};
use file::ConfigFile;
pub use presets::PRESETS;

use crate::array::mac::MacConfig;
use crate::array::mask::MaskConfig;
use crate::array::pe::{Accumulate, PeConfig};
use crate::array::pe_row::PeRowConfig;
use crate::format::{Format, Formats};
use crate::fp::add::Fp32AddConfig;
use crate::fp::mul::Fp32MulConfig;
use crate::mem::dma::{DmaConfig, MemIf};
use crate::mem::glb::{GlbParams, GlbPlacement};
use crate::mem::landing::{LandingConfig, Layout};
use crate::softmax::exp2::Exp2Config;
use crate::softmax::row_reduce::RowReduceConfig;
use crate::softmax::Rescale;
use crate::softmax::SoftmaxExpConfig;

/// The generated top's name unless a configuration gives one (`top_name`).
pub const DEFAULT_TOP_NAME: &str = "regflash_top";

/// Every knob of a regflash design.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(into = "ConfigFile", try_from = "ConfigFile")]
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
    /// `fp_mul_e5m10` (the MAC's multiplier) pipeline registers (0..=4).
    pub mul_latency: u32,
    /// `fp_add_e8m23` (the MAC's adder and the softmax datapath's) pipeline registers (0..=6).
    pub add_latency: u32,
    /// `fp_mul_e8m23` pipeline registers (0..=6), in the softmax datapath.
    pub fmul_latency: u32,
    /// `fp_exp2_e8m23` pipeline registers (0..=6).
    pub exp_latency: u32,
    /// Bits of a sequence index or length (sequences up to 2^index_bits - 1 long).
    pub index_bits: u32,
    /// DMA memory port width in bits.
    pub mem_width: u32,
    /// DMA byte address width (the address range is 2^addr_bits bytes).
    pub addr_bits: u32,
    /// DMA reads in flight at most (hides this many cycles of memory latency).
    pub max_outstanding: u32,
    /// Target clock in MHz (for constraints and reports).
    pub clock_mhz: f64,
    /// Where S and P live, with the variant's own knobs: `reg2d` (PE registers, the
    /// default), `buf2d` (an on-chip SRAM buffer between QK, softmax and PV), `reg3d` (stacked
    /// tiers with register-to-register vertical links). In a file: `variant = "..."` and a
    /// `[buf2d]` or `[reg3d]` section.
    pub variant: Variant,
    /// The name of the generated top (the core behind its AXI4-Lite registers); inner modules
    /// keep their parameterized names.
    pub top_name: String,
    /// The memory interface: `simple` (one request per beat, responses in order) or `axi4`
    /// (an AXI4 master with INCR bursts, `m_axi_*`).
    pub mem_if: MemIf,
    /// AXI4: ID width (2..=16).
    pub axi_id_bits: u32,
    /// AXI4: bursts in flight at most per ID (1..=256).
    pub axi_outstanding: u32,
    /// The global buffer (GLB) between the K/V channels and memory: `glb_bytes` (0: none),
    /// `glb_banks`, `glb_word_bits`, `glb_ports`, `glb_macro`, `glb_placement`,
    /// `glb_wire_mm` in a file (see `crate::mem::glb`).
    pub glb: GlbParams,
    /// How the online softmax rescales: `rescale = "pow2"` (the default) or `"lazy"` with
    /// `lazy_threshold` (see [`Rescale`]).
    pub rescale: Rescale,
    /// Q, K, V and P's format: `in_format = "fp16"` (binary16, the default) or `"bf16"`
    /// (bfloat16); the MAC accumulates in FP32 either way, and O's short form is this format.
    pub in_format: Format,
    /// QKᵀ in integers: `qk_format = "int8"` or `"int4"`, Q and K quantized with
    /// their scales (see `kernels::quant`); absent (None), QKᵀ is in the operand format.
    pub qk_format: Option<QkFormat>,
    /// Where a PE's MAC runs accumulate: `accumulate = "auto"` (the default: in the MAC's
    /// pipeline where the design can), `"pipeline"` or `"register-file"` (see [`Accumulate`]).
    pub accumulate: Accumulate,
}

pub const MAX_MEM_LATENCY: u32 = 4096;

impl CoreConfig {
    /// What a variant sizes and checks its knobs against.
    pub fn tile(&self) -> crate::variants::Tile {
        crate::variants::Tile {
            rows: self.rows,
            br: self.br,
            bc: self.bc,
            head_dim: self.head_dim,
            index_bits: self.index_bits,
        }
    }

    /// Reads a TOML configuration: either every key, or `preset = "<name>"` and the keys that
    /// differ from that preset. Unknown keys are rejected; the result is validated.
    pub fn from_toml(text: &str) -> Result<CoreConfig> {
        Ok(CoreConfig::from_toml_with_notes(text)?.0)
    }

    /// [`CoreConfig::from_toml`], with notes on keys read from an older format (for the
    /// caller to show).
    pub fn from_toml_with_notes(text: &str) -> Result<(CoreConfig, Vec<String>)> {
        let (cfg, notes) = ConfigFile::parse(text)?.resolve()?;
        cfg.validate()?;
        Ok((cfg, notes))
    }

    /// This configuration as a TOML file (every key).
    pub fn to_toml(&self) -> String {
        toml::to_string(self).expect("a CoreConfig always serializes")
    }

    /// Operands in `f`, the memory interface keeping its operands per beat: `mem_width`
    /// scales with the operands' width (the `small` preset's beat of 16 binary16 values,
    /// 256 bits, becomes 128 bits of 16 FP8 values), so a preset's rows still fill whole
    /// beats. How `--in-format` and a file's `in_format` without `mem_width` change a base.
    pub fn set_in_format(&mut self, f: Format) {
        let (old, new) = (self.in_format.bits(), f.bits());
        self.mem_width = (self.mem_width * new / old).max(8);
        self.in_format = f;
    }

    /// The number formats: operands, accumulator, short output.
    pub fn formats(&self) -> Formats {
        self.pe().mac.formats()
    }

    /// The PE configuration.
    pub fn pe(&self) -> PeConfig {
        let mut pe = self.pe_accumulating_in_registers();
        pe.mac.feedback = match self.accumulate {
            Accumulate::Pipeline => true,
            Accumulate::RegisterFile => false,
            Accumulate::Auto => self.pipeline_accumulation_blocker().is_none(),
        };
        pe
    }

    /// The PE with its runs in the register file.
    fn pe_accumulating_in_registers(&self) -> PeConfig {
        PeConfig {
            regs: self.regs_per_pe,
            mac: MacConfig::new(self.in_format, self.mul_latency, self.add_latency),
            qk: self.qk_format,
        }
    }

    /// Why the MAC's runs cannot accumulate in its pipeline (`accumulate = "pipeline"`), if
    /// they cannot.
    pub fn pipeline_accumulation_blocker(&self) -> Option<String> {
        let pe = self.pe_accumulating_in_registers();
        if let Some(why) = pe.feedback_blocker() {
            return Some(why);
        }
        if self.row_with(pe).interleaved() {
            return Some(
                "the array interleaves QK and PV step by step (a MAC deeper than a PE's S \
                 accumulators hide)"
                    .into(),
            );
        }
        None
    }

    /// The softmax exp stage.
    pub fn softmax_exp(&self) -> SoftmaxExpConfig {
        SoftmaxExpConfig {
            mul: self.fmul(),
            add: Fp32AddConfig::new(self.add_latency),
            exp: Exp2Config {
                latency: self.exp_latency,
            },
            p: self.in_format,
        }
    }

    /// The FP32 multiplier of the softmax datapath.
    pub fn fmul(&self) -> Fp32MulConfig {
        Fp32MulConfig {
            latency: self.fmul_latency,
        }
    }

    /// The causal-mask generator of one tile.
    pub fn mask(&self) -> MaskConfig {
        MaskConfig {
            br: self.br,
            bc: self.bc,
            index_bits: self.index_bits,
        }
    }

    /// The DMA: Q and K land in banks per PE row / column, V one row per read, O in FP32 rows.
    pub fn dma(&self) -> DmaConfig {
        let beat = (self.mem_width / 8).max(1);
        let f = self.formats();
        let row_beats = (self.head_dim * f.operand.bytes()).div_ceil(beat);
        let land = |rows: u32, layout: Layout| LandingConfig {
            rows,
            row_beats,
            width: self.mem_width,
            layout,
        };
        DmaConfig {
            width: self.mem_width,
            addr_bits: self.addr_bits,
            index_bits: self.index_bits,
            max_outstanding: self.max_outstanding,
            q: land(
                self.br,
                Layout::RowBanked {
                    rows_per_bank: self.br / self.rows.max(1),
                },
            ),
            k: land(
                self.bc,
                Layout::RowBanked {
                    rows_per_bank: self.bc / self.cols.max(1),
                },
            ),
            v: land(self.bc, Layout::BeatSliced),
            o_rows: self.br,
            o_row_beats: (self.head_dim * f.acc.bytes()).div_ceil(beat),
            o_rows_per_bank: self.br / self.rows.max(1),
            mem_if: self.mem_if,
            axi_id_bits: self.axi_id_bits,
            axi_outstanding: self.axi_outstanding,
            faults: false,
            glb: self.glb.rtl(
                self.mem_width,
                row_beats,
                self.bc,
                self.variant.plan().scratch(),
            ),
            kv_max_rows: self
                .variant
                .plan()
                .row_keys()
                .filter(|_| !self.variant.plan().spills()),
            // unfused: S (the larger) and P land a block at a time, a query row of the block
            // per row, in the Q buffer's layout (a bank per PE row); rowfused's spilled S the
            // same way.
            x: self.variant.plan().scratch().then(|| {
                let per = self.row().scratch_per_beat().0.max(1);
                LandingConfig {
                    rows: self.br,
                    row_beats: (self.bc / per).max(1),
                    width: self.mem_width,
                    layout: Layout::RowBanked {
                        rows_per_bank: self.br / self.rows.max(1),
                    },
                }
            }),
        }
    }

    /// Bytes of one K or V row (`head_dim` operands).
    pub fn kv_row_bytes(&self) -> u64 {
        (self.head_dim * self.formats().operand.bytes()) as u64
    }

    /// Cycles a landed K/V block may wait to be consumed before the core's assertion fires. A
    /// landed block waits at most for the phases before its own (a few blocks of MAC steps) and
    /// for the memory to deliver the blocks those phases need: with memory latency up to
    /// [`MAX_MEM_LATENCY`] cycles, 16 blocks of steps + 4 latencies + 4096 cycles of slack.
    pub fn kv_bound(&self) -> u32 {
        let (a, b, e) = (
            self.br / self.rows.max(1),
            self.bc / self.cols.max(1),
            self.head_dim / self.cols.max(1),
        );
        let block =
            self.head_dim as u64 * a as u64 * b as u64 + self.bc as u64 * a as u64 * e as u64;
        // rowfused: a V block's wait counts from the tile's last QK (`check.rs`), then it
        // waits for that QK's max pass and its own exp pass (a copy and two sweeps a block).
        let two_pass = match self.variant.plan().row_keys() {
            Some(_) => 2 * (3 * a as u64 * self.bc as u64 + 64 * a as u64),
            None => 0,
        };
        (16 * block + two_pass + 4 * MAX_MEM_LATENCY as u64 + 4096).min(1 << 23) as u32
    }

    /// The row-reduction tree across the PE columns.
    pub fn row_reduce(&self) -> RowReduceConfig {
        self.row().tree()
    }

    /// This configuration as `kind`: its own knobs when it already is one, else the variant's
    /// defaults.
    pub fn with_variant(&self, kind: VariantKind) -> CoreConfig {
        let variant = if self.variant.kind() == kind {
            self.variant
        } else {
            kind.with_defaults()
        };
        CoreConfig {
            variant,
            ..self.clone()
        }
    }

    /// reg3d's knobs to change, or an error that names `what` (the key or flag being set) when
    /// the design is not reg3d.
    pub fn stack_mut(&mut self, what: &str) -> Result<&mut StackParams> {
        match &mut self.variant {
            Variant::Reg3d(s) => Ok(s),
            v => anyhow::bail!(
                "{what} applies to reg3d only, but the variant is {v}: choose reg3d (--variant \
                 reg3d, or variant = \"reg3d\" in the file), or leave it out"
            ),
        }
    }

    /// noc2d's knobs to change, or an error that names `what` when the design is not noc2d.
    pub fn noc_mut(&mut self, what: &str) -> Result<&mut NocParams> {
        match &mut self.variant {
            Variant::Noc2d(n) => Ok(n),
            v => anyhow::bail!(
                "{what} applies to noc2d only, but the variant is {v}: choose noc2d (--variant \
                 noc2d, or variant = \"noc2d\" in the file), or leave it out"
            ),
        }
    }

    /// Sets (`set(spares, spare_group)`) the spare lanes of every vertical bundle the design
    /// has: reg3d's links and a stacked GLB's bond; an error that names `what` when it has
    /// neither.
    pub fn vertical_mut(&mut self, what: &str, set: impl Fn(&mut u32, &mut u32)) -> Result<()> {
        let glb = self.glb.present() && self.glb.placement == GlbPlacement::Stacked;
        let stack = matches!(self.variant, Variant::Reg3d(_));
        ensure!(
            glb || stack,
            "{what} applies to vertical links, and this design has none: choose reg3d \
             (--variant reg3d) or a stacked GLB (glb_bytes with glb_placement = \"stacked\" in \
             a file), or leave it out"
        );
        if let Variant::Reg3d(st) = &mut self.variant {
            set(&mut st.spares, &mut st.spare_group);
        }
        if glb {
            set(&mut self.glb.spares, &mut self.glb.spare_group);
        }
        Ok(())
    }

    /// rowfused's knobs to change, or an error that names `what` when the design is not
    /// rowfused.
    pub fn rowfused_mut(&mut self, what: &str) -> Result<&mut RowParams> {
        match &mut self.variant {
            Variant::Rowfused(r) => Ok(r),
            v => anyhow::bail!(
                "{what} applies to rowfused only, but the variant is {v}: choose rowfused \
                 (--variant rowfused, or variant = \"rowfused\" in the file), or leave it out"
            ),
        }
    }

    /// buf2d's knobs to change, or an error that names `what` when the design is not buf2d.
    pub fn buf_mut(&mut self, what: &str) -> Result<&mut BufParams> {
        match &mut self.variant {
            Variant::Buf2d(b) => Ok(b),
            v => anyhow::bail!(
                "{what} applies to buf2d only, but the variant is {v}: choose buf2d (--variant \
                 buf2d, or variant = \"buf2d\" in the file), or leave it out"
            ),
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

    /// Register bytes the S blocks and the O accumulator need (32-bit registers, as the PE
    /// row maps them: [`PeRowConfig::regs_needed`] per PE).
    pub fn register_bytes_needed(&self) -> u64 {
        self.pes() as u64 * self.row().regs_needed() as u64 * 4
    }

    /// The PE row (not validated: `CoreParams::from_config` checks it against the MAC).
    pub fn row(&self) -> PeRowConfig {
        self.row_with(self.pe())
    }

    /// [`CoreConfig::row`] with PE `pe`.
    fn row_with(&self, pe: PeConfig) -> PeRowConfig {
        let c = self;
        let (a, b, e) = (
            c.br / c.rows.max(1),
            c.bc / c.cols.max(1),
            c.head_dim / c.cols.max(1),
        );
        PeRowConfig {
            cols: c.cols,
            a,
            b,
            e,
            pe,
            exp: c.softmax_exp(),
            mem_width: c.mem_width,
            faults: false,
            variant: c.variant,
            rescale: c.rescale,
        }
    }

    /// Peak multiply-accumulates per cycle (one per PE).
    pub fn peak_macs_per_cycle(&self) -> u32 {
        self.pes()
    }
}
