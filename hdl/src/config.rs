//! Whole-design configurations and the named presets.
//!
//! A [`CoreConfig`] holds every knob; derived figures are methods; [`CoreConfig::validate`]
//! explains in the user's terms what cannot work. A preset's design is `regflash_top`: the
//! core behind its AXI4-Lite registers.

use anyhow::{bail, ensure, Result};
use serde::{Deserialize, Serialize};

use crate::array::PeGridConfig;
use crate::dma::{self, DmaConfig, MemIf};
use crate::exp2::Exp2Config;
use crate::fp16_mul::Fp16MulConfig;
use crate::fp32_add::Fp32AddConfig;
use crate::fp32_mul::Fp32MulConfig;
use crate::landing::{LandingConfig, Layout};
use crate::mac::MacConfig;
use crate::mask::{self, MaskConfig};
use crate::pe::PeConfig;
use crate::pe_row::{PeRowConfig, RowBuffer, RowTiers};
use crate::row_reduce::RowReduceConfig;
use crate::softmax::SoftmaxExpConfig;

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
    /// fp32_mul pipeline registers (0..=2), in the softmax datapath.
    pub fmul_latency: u32,
    /// exp2 pipeline registers (0..=2).
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
    /// Where S and P live: `reg2d` (PE registers, the default), `buf2d` (an on-chip SRAM
    /// buffer between QK, softmax and PV), `reg3d` (stacked tiers with register-to-register
    /// vertical links).
    #[serde(default)]
    pub variant: Variant,
    /// buf2d: ports of each P buffer bank (2: one read and one write port, so the softmax of
    /// a block may write P while PV reads the previous block's; 1: one shared port, so the
    /// softmax and PV take turns).
    #[serde(default = "default_buf_ports")]
    pub buf_ports: u32,
    /// buf2d: the on-chip buffer capacity available, in bytes (0: no limit). The banks are
    /// sized to what the tiling needs; a tiling that needs more than this is refused.
    #[serde(default)]
    pub buf_bytes: u64,
    /// buf2d: emit the buffer banks as memory-macro blackboxes (same ports) instead of
    /// behavioural synchronous RAM (`gen` and `synth` only; simulation uses the behaviour).
    #[serde(default)]
    pub buf_macro: bool,
    /// buf2d: bits per word of the S and P arrays (0, the default: one element per word, FP32
    /// S and FP16 P; 32 · 2^n: a word of w/32 scores or w/16 weights of one query row, so an
    /// access moves that many and the banks have fewer, wider words).
    #[serde(default)]
    pub buf_word_bits: u32,
    /// buf2d: SRAM banks each row's S array and P array is split into (1, the default, or a
    /// power of two), interleaved on the low bits of the word address: the same accesses, each
    /// to a smaller macro (cheaper per access in the energy model, as in CACTI).
    #[serde(default = "default_buf_banks")]
    pub buf_banks: u32,
    /// reg3d: tiers of the stack (2: QK with the softmax engines, and PV above; 3: QK, a
    /// softmax tier with the row engines and the S registers, and PV).
    #[serde(default = "default_tiers")]
    pub tiers: u32,
    /// reg3d: cycles a transfer over a vertical link takes (register stages, 0..=4).
    #[serde(default = "default_vlink_latency")]
    pub vlink_latency: u32,
    /// reg3d with three tiers: wires of each QK PE's S link to the softmax tier (a power of
    /// two, 1..=32). At 32 a score goes up in the cycle its last product lands; narrower, each
    /// score takes 32/vlink_bits beats, so the QK PEs keep two S blocks and a serializer
    /// sends a finished block while the next one's QK runs (hidden while 32/vlink_bits <= d).
    #[serde(default = "default_vlink_bits")]
    pub vlink_bits: u32,
    /// The name of the generated top (the core behind its AXI4-Lite registers); inner modules
    /// keep their parameterized names.
    #[serde(default = "default_top_name")]
    pub top_name: String,
    /// The memory interface: `simple` (one request per beat, responses in order) or `axi4`
    /// (an AXI4 master with INCR bursts, `m_axi_*`).
    #[serde(default)]
    pub mem_if: MemIf,
    /// AXI4: ID width (2..=16).
    #[serde(default = "default_axi_id_bits")]
    pub axi_id_bits: u32,
    /// AXI4: bursts in flight at most per ID (1..=256).
    #[serde(default = "default_axi_outstanding")]
    pub axi_outstanding: u32,
}

fn default_axi_id_bits() -> u32 {
    4
}

fn default_axi_outstanding() -> u32 {
    8
}

fn default_top_name() -> String {
    "regflash_top".into()
}

fn default_vlink_bits() -> u32 {
    32
}

fn default_buf_banks() -> u32 {
    1
}

fn default_buf_ports() -> u32 {
    2
}

fn default_tiers() -> u32 {
    2
}

fn default_vlink_latency() -> u32 {
    1
}

/// Where a design keeps S and P (docs/variants.md).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Variant {
    /// S and P in PE registers on one tier (register-level FlashAttention).
    #[default]
    Reg2d,
    /// The same array with S and P in an on-chip SRAM buffer (the buffered 2-D baseline).
    Buf2d,
    /// QK, softmax and PV on stacked tiers with register-to-register vertical links.
    Reg3d,
}

impl Variant {
    /// Every variant, by name.
    pub const ALL: [Variant; 3] = [Variant::Reg2d, Variant::Buf2d, Variant::Reg3d];

    pub fn name(self) -> &'static str {
        match self {
            Variant::Reg2d => "reg2d",
            Variant::Buf2d => "buf2d",
            Variant::Reg3d => "reg3d",
        }
    }
}

impl std::fmt::Display for Variant {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for Variant {
    type Err = anyhow::Error;
    fn from_str(s: &str) -> Result<Self> {
        Variant::ALL
            .into_iter()
            .find(|v| v.name() == s)
            .ok_or_else(|| {
                anyhow::anyhow!("unknown variant `{s}`: choose one of reg2d, buf2d, reg3d")
            })
    }
}

/// A configuration file: an optional base preset and any keys of [`CoreConfig`].
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ConfigFile {
    preset: Option<String>,
    name: Option<String>,
    rows: Option<u32>,
    cols: Option<u32>,
    br: Option<u32>,
    bc: Option<u32>,
    head_dim: Option<u32>,
    regs_per_pe: Option<u32>,
    mul_latency: Option<u32>,
    add_latency: Option<u32>,
    fmul_latency: Option<u32>,
    exp_latency: Option<u32>,
    index_bits: Option<u32>,
    mem_width: Option<u32>,
    addr_bits: Option<u32>,
    max_outstanding: Option<u32>,
    clock_mhz: Option<f64>,
    variant: Option<Variant>,
    buf_ports: Option<u32>,
    buf_bytes: Option<u64>,
    buf_macro: Option<bool>,
    buf_word_bits: Option<u32>,
    buf_banks: Option<u32>,
    tiers: Option<u32>,
    vlink_latency: Option<u32>,
    vlink_bits: Option<u32>,
    top_name: Option<String>,
    mem_if: Option<MemIf>,
    axi_id_bits: Option<u32>,
    axi_outstanding: Option<u32>,
}

impl ConfigFile {
    fn resolve(self) -> Result<CoreConfig> {
        let base = match &self.preset {
            Some(p) => Some(CoreConfig::preset(p)?),
            None => None,
        };
        let mut missing = vec![];
        macro_rules! take {
            ($key:ident) => {
                match (self.$key, &base) {
                    (Some(v), _) => v,
                    (None, Some(b)) => b.$key.clone(),
                    (None, None) => {
                        missing.push(stringify!($key));
                        Default::default()
                    }
                }
            };
        }
        // Keys added after the first presets: optional even without a base preset.
        macro_rules! take_or {
            ($key:ident, $default:expr) => {
                self.$key
                    .or(base.as_ref().map(|b| b.$key))
                    .unwrap_or_else(|| $default)
            };
        }
        let cfg = CoreConfig {
            name: take!(name),
            rows: take!(rows),
            cols: take!(cols),
            br: take!(br),
            bc: take!(bc),
            head_dim: take!(head_dim),
            regs_per_pe: take!(regs_per_pe),
            mul_latency: take!(mul_latency),
            add_latency: take!(add_latency),
            fmul_latency: take!(fmul_latency),
            exp_latency: take!(exp_latency),
            index_bits: take!(index_bits),
            mem_width: take!(mem_width),
            addr_bits: take!(addr_bits),
            max_outstanding: take!(max_outstanding),
            clock_mhz: take!(clock_mhz),
            variant: take_or!(variant, Variant::default()),
            buf_ports: take_or!(buf_ports, default_buf_ports()),
            buf_bytes: take_or!(buf_bytes, 0),
            buf_macro: take_or!(buf_macro, false),
            buf_word_bits: take_or!(buf_word_bits, 0),
            buf_banks: take_or!(buf_banks, default_buf_banks()),
            tiers: take_or!(tiers, default_tiers()),
            vlink_latency: take_or!(vlink_latency, default_vlink_latency()),
            vlink_bits: take_or!(vlink_bits, default_vlink_bits()),
            top_name: self
                .top_name
                .or(base.as_ref().map(|b| b.top_name.clone()))
                .unwrap_or_else(default_top_name),
            mem_if: take_or!(mem_if, MemIf::default()),
            axi_id_bits: take_or!(axi_id_bits, default_axi_id_bits()),
            axi_outstanding: take_or!(axi_outstanding, default_axi_outstanding()),
        };
        if !missing.is_empty() {
            bail!(
                "the configuration lacks {}: give every key, or start from a preset with \
                 `preset = \"small\"` (or \"seed\") and set only what differs",
                missing.join(", ")
            );
        }
        Ok(cfg)
    }
}

/// The slowest memory (read latency in cycles) the core's K/V assertion bound is derived for,
/// and so the slowest `regflash` simulates: 4096 cycles, 2.7 µs at 1.5 GHz, far beyond DRAM.
pub const MAX_MEM_LATENCY: u32 = 4096;

/// The widest memory port (bits, a power of two from 32 to 1024) whose beat divides a row
/// of `row_bytes` bytes; 0 if none does (a row narrower than 4 bytes).
fn largest_beat_bits(row_bytes: u64) -> u64 {
    (5..=10)
        .rev()
        .map(|k| 1u64 << k)
        .find(|bits| row_bytes.is_multiple_of(bits / 8))
        .unwrap_or(0)
}

/// Verilog keywords a top name must avoid (the common ones).
const VERILOG_KEYWORDS: &[&str] = &[
    "module",
    "endmodule",
    "input",
    "output",
    "inout",
    "wire",
    "reg",
    "logic",
    "always",
    "assign",
    "begin",
    "end",
    "if",
    "else",
    "case",
    "endcase",
    "for",
    "function",
    "task",
    "generate",
    "parameter",
    "localparam",
    "initial",
    "posedge",
    "negedge",
    "integer",
];

/// Names of the built-in presets.
pub const PRESETS: &[&str] = &["seed", "small", "medium", "npu16"];

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
            fmul_latency: 1,
            exp_latency: 2,
            index_bits: 16,
            mem_width: 256,
            addr_bits: 32,
            max_outstanding: 128,
            clock_mhz: 1500.0,
            variant: Variant::Reg2d,
            buf_ports: default_buf_ports(),
            buf_bytes: 0,
            buf_macro: false,
            buf_word_bits: 0,
            buf_banks: default_buf_banks(),
            tiers: default_tiers(),
            vlink_latency: default_vlink_latency(),
            vlink_bits: default_vlink_bits(),
            top_name: default_top_name(),
            mem_if: MemIf::default(),
            axi_id_bits: default_axi_id_bits(),
            axi_outstanding: default_axi_outstanding(),
        };
        Ok(match name {
            // The source documents' design: 32x32 PEs, 64 registers each, Br = Bc = 64, d = 128,
            // fed by the stacked SRAM over a 512-bit port: a K/V block pair (32 KiB) per 1,024
            // MAC steps needs 256 bits a cycle, Q loads and O writes come on top, so a 256-bit
            // port holds the array at 93 % at seq 1024 and 512 bits at 99 %
            // (presets/seed_port256.toml keeps the narrower port for comparison).
            "seed" => CoreConfig {
                mem_width: 512,
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
            // fill the 64 registers exactly (2 x 16 S + 32 O).
            "npu16" => CoreConfig {
                rows: 16,
                cols: 16,
                ..base
            },
            other => bail!(
                "unknown preset `{other}`: choose one of {}",
                PRESETS.join(", ")
            ),
        })
    }

    /// Checks that the configuration can be built. Errors name the key (as in a TOML config
    /// file), its value and what would be allowed.
    pub fn validate(&self) -> Result<()> {
        let range = |key: &str, v: u32, lo: u32, hi: u32| {
            ensure!(
                (lo..=hi).contains(&v),
                "{key} = {v} is out of range: allowed {lo} to {hi}"
            );
            Ok(())
        };
        range("rows", self.rows, 1, 256)?;
        range("cols", self.cols, 1, 256)?;
        // Widths first: the checks below shift and multiply by them (the blocks' own checks,
        // run again at the end).
        mask::validate_index_bits(self.index_bits)?;
        dma::validate_widths(self.mem_width, self.addr_bits)?;
        range(
            "fmul_latency",
            self.fmul_latency,
            0,
            Fp32MulConfig::MAX_LATENCY,
        )?;
        range("exp_latency", self.exp_latency, 0, Exp2Config::MAX_LATENCY)?;
        range(
            "mul_latency",
            self.mul_latency,
            0,
            Fp16MulConfig::MAX_LATENCY,
        )?;
        range(
            "add_latency",
            self.add_latency,
            0,
            Fp32AddConfig::MAX_LATENCY,
        )?;
        ensure!(
            self.regs_per_pe.is_power_of_two() && (2..=1024).contains(&self.regs_per_pe),
            "regs_per_pe = {} is not supported: allowed are powers of two from 2 to 1024 \
             (the seed design has 64)",
            self.regs_per_pe
        );
        for (key, tile, dim, knob) in [
            ("br", self.br, self.rows, "rows"),
            ("bc", self.bc, self.cols, "cols"),
            ("head_dim", self.head_dim, self.cols, "cols"),
        ] {
            ensure!(
                tile >= dim && tile % dim == 0,
                "{key} = {tile} must be a positive multiple of {knob} = {dim}: each PE owns an \
                 equal share"
            );
        }
        let r = self.row();
        ensure!(
            r.regs_needed() <= self.regs_per_pe,
            "each PE needs {} registers ({} S values: {} block(s) of {}; and {} O values) but \
             has regs_per_pe = {}: raise regs_per_pe or shrink br, bc or head_dim",
            r.regs_needed(),
            r.s_slots() * r.a * r.b,
            r.s_slots(),
            r.a * r.b,
            r.a * r.e,
            self.regs_per_pe
        );
        ensure!(
            self.clock_mhz > 0.0 && self.clock_mhz.is_finite(),
            "clock_mhz = {} is out of range: allowed any positive number of MHz",
            self.clock_mhz
        );
        ensure!(
            (self.br.max(self.bc) as u64) < (1u64 << self.index_bits),
            "index_bits = {} cannot index a {}x{} tile: raise index_bits",
            self.index_bits,
            self.br,
            self.bc
        );
        let beat = self.mem_width / 8;
        let row_bytes = 2 * self.head_dim as u64;
        if !row_bytes.is_multiple_of(beat as u64) {
            let narrower = match largest_beat_bits(row_bytes) {
                0 => String::new(),
                bits => format!(", or mem_width = {bits}"),
            };
            bail!(
                "a row of head_dim = {} FP16 values is {row_bytes} bytes, not a whole number of \
                 {beat}-byte memory beats (mem_width = {} bits): use a head_dim that is a \
                 multiple of {}{narrower}",
                self.head_dim,
                self.mem_width,
                beat / 2
            );
        }
        self.validate_variant()?;
        self.validate_top_name()?;
        ensure!(
            self.mem_if == MemIf::Axi4
                || (self.axi_id_bits == default_axi_id_bits()
                    && self.axi_outstanding == default_axi_outstanding()),
            "axi_id_bits and axi_outstanding apply to the AXI4 master only: set mem_if = \"axi4\" \
             (or --mem-if axi4), or leave them out"
        );
        // The blocks' own checks, in case a knob above maps to more than one.
        self.dma().validate()?;
        self.grid().validate()?;
        self.softmax_exp().validate()?;
        self.mask().validate()
    }

    /// Reads a TOML configuration: either every key, or `preset = "<name>"` and the keys that
    /// differ from that preset. Unknown keys are rejected; the result is validated.
    pub fn from_toml(text: &str) -> Result<CoreConfig> {
        let file: ConfigFile = toml::from_str(text).map_err(|e| anyhow::anyhow!("{e}"))?;
        let cfg = file.resolve()?;
        cfg.validate()?;
        Ok(cfg)
    }

    /// This configuration as a TOML file (every key).
    pub fn to_toml(&self) -> String {
        toml::to_string(self).expect("a CoreConfig always serializes")
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
            counted: true,
        }
    }

    /// The softmax exp stage.
    pub fn softmax_exp(&self) -> SoftmaxExpConfig {
        SoftmaxExpConfig {
            mul: self.fmul(),
            add: Fp32AddConfig {
                latency: self.add_latency,
            },
            exp: Exp2Config {
                latency: self.exp_latency,
            },
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
        let row_beats = (self.head_dim * 2).div_ceil(beat);
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
            o_row_beats: (self.head_dim * 4).div_ceil(beat),
            o_rows_per_bank: self.br / self.rows.max(1),
            mem_if: self.mem_if,
            axi_id_bits: self.axi_id_bits,
            axi_outstanding: self.axi_outstanding,
            faults: false,
        }
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
        (16 * block + 4 * MAX_MEM_LATENCY as u64 + 4096).min(1 << 23) as u32
    }

    /// The row-reduction tree across the PE columns.
    pub fn row_reduce(&self) -> RowReduceConfig {
        RowReduceConfig { cols: self.cols }
    }

    /// The PE grid configuration.
    pub fn grid(&self) -> PeGridConfig {
        PeGridConfig {
            rows: self.rows,
            cols: self.cols,
            pe: PeConfig {
                counted: false,
                ..self.pe()
            },
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
            pe: c.pe(),
            exp: c.softmax_exp(),
            mem_width: c.mem_width,
            faults: false,
            buffer: (c.variant == Variant::Buf2d).then_some({
                let (s_per_word, p_per_word) = c.buf_elems_per_word();
                RowBuffer {
                    ports: c.buf_ports,
                    blackbox: c.buf_macro,
                    s_per_word,
                    p_per_word,
                    banks: c.buf_banks,
                }
            }),
            tiered: (c.variant == Variant::Reg3d).then_some(RowTiers {
                vlink_latency: c.vlink_latency,
                softmax_tier: c.tiers == 3,
                vlink_bits: c.vlink_bits,
            }),
        }
    }

    /// `top_name`: a Verilog identifier, not a keyword (the generator refuses one an inner
    /// module already has).
    fn validate_top_name(&self) -> Result<()> {
        let n = &self.top_name;
        let ok = n
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
            && n.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
            && n.len() <= 64;
        ensure!(
            ok,
            "top_name = {n:?} is not a Verilog identifier: use letters, digits and _ (not first \
             a digit), at most 64 characters"
        );
        ensure!(
            !VERILOG_KEYWORDS.contains(&n.as_str()),
            "top_name = {n:?} is a Verilog keyword: choose another (the default is regflash_top)"
        );
        Ok(())
    }

    /// The variant's own knobs.
    fn validate_variant(&self) -> Result<()> {
        ensure!(
            matches!(self.buf_ports, 1 | 2),
            "buf_ports = {} is not supported: allowed 1 (one shared port per P bank) or 2 (one \
             read and one write port)",
            self.buf_ports
        );
        ensure!(
            self.vlink_bits == 32 || self.variant == Variant::Reg3d,
            "vlink_bits = {} applies to reg3d's S links only: set variant = \"reg3d\" with \
             tiers = 3, or leave vlink_bits at 32",
            self.vlink_bits
        );
        ensure!(
            self.buf_banks == 1 || self.variant == Variant::Buf2d,
            "buf_banks = {} applies to buf2d's SRAM arrays only: set variant = \"buf2d\", or \
             leave buf_banks at 1",
            self.buf_banks
        );
        ensure!(
            self.buf_word_bits == 0 || self.variant == Variant::Buf2d,
            "buf_word_bits = {} applies to buf2d's SRAM banks only: set variant = \"buf2d\", or \
             leave buf_word_bits at 0",
            self.buf_word_bits
        );
        match self.variant {
            Variant::Reg2d => Ok(()),
            Variant::Reg3d => {
                ensure!(
                    matches!(self.tiers, 2 | 3),
                    "tiers = {} is not supported: reg3d has 2 tiers (QK with the softmax \
                     engines below, PV above) or 3 (QK, a softmax tier, PV)",
                    self.tiers
                );
                ensure!(
                    self.vlink_latency <= 4,
                    "vlink_latency = {} is out of range: allowed 0 to 4 cycles",
                    self.vlink_latency
                );
                ensure!(
                    self.vlink_bits.is_power_of_two() && self.vlink_bits <= 32,
                    "vlink_bits = {} is not supported: a QK PE's S link is 1, 2, 4, 8, 16 or 32 \
                     wires wide (a 32-bit score takes 32/vlink_bits cycles)",
                    self.vlink_bits
                );
                ensure!(
                    self.vlink_bits == 32 || self.tiers == 3,
                    "vlink_bits = {} needs tiers = 3: only the softmax tier is fed over per-PE \
                     S links (with two tiers the links are per row: P up, O down); set tiers = 3 \
                     or leave vlink_bits at 32",
                    self.vlink_bits
                );
                Ok(())
            }
            Variant::Buf2d => {
                let w = self.buf_word_bits;
                ensure!(
                    w == 0 || (w >= 32 && w.is_power_of_two() && w <= 1024),
                    "buf_word_bits = {w} is not supported: 0 (one element per word: 32-bit S, \
                     16-bit P words) or a power of two from 32 to 1024"
                );
                ensure!(
                    self.bc.is_multiple_of((w / 16).max(1)),
                    "buf_word_bits = {w} does not fit bc = {}: a P word holds {} weights of one \
                     query row, which must divide the block's bc keys; lower buf_word_bits to at \
                     most {} or use a bc that is a multiple of {}",
                    self.bc,
                    w / 16,
                    16 * (1u32 << self.bc.trailing_zeros()),
                    w / 16
                );
                let (s_words, p_words) = self.buf_array_words();
                let most = s_words.min(p_words) / 2;
                ensure!(
                    self.buf_banks.is_power_of_two() && self.buf_banks as u64 <= most,
                    "buf_banks = {} is not supported here: a power of two from 1 to {most} (each \
                     bank of a row's S array ({s_words} words) and P array ({p_words} words) \
                     holds at least two words)",
                    self.buf_banks
                );
                let need = self.buffer_bytes_needed();
                ensure!(
                    self.buf_bytes == 0 || self.buf_bytes >= need,
                    "buf_bytes = {} is too small: the tiling needs {need} B of buffer (per PE \
                     row a*bc FP32 scores and 2*a*bc FP16 weights, a = br/rows, in words of \
                     buf_word_bits, each count rounded up to a power of two per query row and \
                     word): raise buf_bytes, set \
                     it to 0 (no limit) or shrink br or bc",
                    self.buf_bytes
                );
                Ok(())
            }
        }
    }

    /// Bytes of on-chip buffer a buf2d tiling needs: per PE row an S array (a x Bc FP32, one
    /// block) and a P array (a x Bc FP16, two blocks), addressed by (query row, key), so each
    /// count is rounded up to a power of two.
    pub fn buffer_bytes_needed(&self) -> u64 {
        let (s_per, p_per) = self.buf_elems_per_word();
        let (s_words, p_words) = self.buf_array_words();
        let s_bytes = s_words * 4 * s_per as u64;
        let p_bytes = p_words * 2 * p_per as u64;
        self.rows as u64 * (s_bytes + p_bytes)
    }

    /// buf2d: words of one row's S array and P array (both blocks), each addressed by query
    /// row and word, so each count a power of two (a word that holds a row's whole block
    /// needs no index).
    pub fn buf_array_words(&self) -> (u64, u64) {
        let a = (self.br / self.rows.max(1)).max(1);
        let words = |per: u32| {
            let index = if per > 1 && self.bc == per {
                0
            } else {
                crate::addr_bits((self.bc / per).max(1))
            };
            1u64 << (crate::addr_bits(a) + index)
        };
        let (s_per, p_per) = self.buf_elems_per_word();
        (words(s_per), 2 * words(p_per))
    }

    /// buf2d: scores per S word and weights per P word (`buf_word_bits`; 0: one each).
    pub fn buf_elems_per_word(&self) -> (u32, u32) {
        match self.buf_word_bits {
            0 => (1, 1),
            w => (w / 32, w / 16),
        }
    }

    /// Peak multiply-accumulates per cycle (one per PE).
    pub fn peak_macs_per_cycle(&self) -> u32 {
        self.pes()
    }
}
