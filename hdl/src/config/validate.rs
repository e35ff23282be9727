//! What cannot be built, said in the configuration file's terms.

use anyhow::{bail, ensure, Result};

use super::CoreConfig;
use crate::array::mask;
use crate::fp::add::Fp32AddConfig;
use crate::fp::mul::Fp32MulConfig;
use crate::fp::mul_exact::MulExactConfig;
use crate::mem::dma::{self, MemIf};
use crate::softmax::exp2::Exp2Config;

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

impl CoreConfig {
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
        let spares = match self.variant {
            crate::variants::Variant::Reg3d(s) => s.spares,
            _ => 0,
        } + self.glb.spares;
        ensure!(
            spares == 0 || self.rows < 256,
            "rows = 256 with spare lanes: the link test numbers 255 PE rows (row 255 is the \
             GLB's bond); use at most 255 rows or no spares"
        );
        if let crate::softmax::Rescale::Lazy { threshold } = self.rescale {
            ensure!(
                !self.row().two_pass(),
                "rescale = \"lazy\" applies to the online softmax (reg2d, buf2d, reg3d), but the \
                 variant is {}: it finds a row's max before any weight and never rescales; drop \
                 rescale (or set it to \"pow2\")",
                self.variant
            );
            range(
                "lazy_threshold",
                threshold as u32,
                1,
                crate::softmax::Rescale::MAX_THRESHOLD as u32,
            )?;
        }
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
            MulExactConfig::MAX_LATENCY,
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
        let op = self.formats().operand;
        let row_bytes = (self.head_dim * op.bytes()) as u64;
        if !row_bytes.is_multiple_of(beat as u64) {
            let narrower = match largest_beat_bits(row_bytes) {
                0 => String::new(),
                bits => format!(", or mem_width = {bits}"),
            };
            bail!(
                "a row of head_dim = {} {}-bit values is {row_bytes} bytes, not a whole number \
                 of {beat}-byte memory beats (mem_width = {} bits): use a head_dim that is a \
                 multiple of {}{narrower}",
                self.head_dim,
                op.bits(),
                self.mem_width,
                beat / op.bytes()
            );
        }
        self.validate_variant()?;
        self.validate_top_name()?;
        self.glb.validate(
            self.mem_width,
            self.kv_row_bytes(),
            self.bc,
            self.variant.plan().scratch(),
        )?;
        ensure!(
            self.mem_if == MemIf::Axi4
                || (self.axi_id_bits == dma::DEFAULT_AXI_ID_BITS
                    && self.axi_outstanding == dma::DEFAULT_AXI_OUTSTANDING),
            "axi_id_bits and axi_outstanding apply to the AXI4 master only: set mem_if = \"axi4\" \
             (or --mem-if axi4), or leave them out"
        );
        // The blocks' own checks, in case a knob above maps to more than one.
        self.dma().validate()?;
        if self.accumulate == crate::array::pe::Accumulate::Pipeline {
            if let Some(why) = self.pipeline_accumulation_blocker() {
                anyhow::bail!(
                    "accumulate = \"pipeline\" cannot be built: {why}; use accumulate = \
                     \"auto\" (the pipeline where the design can) or \"register-file\""
                );
            }
        }
        self.pe().validate()?;
        self.softmax_exp().validate()?;
        self.row().validate_qk()?;
        self.mask().validate()
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

    /// The variant's own knobs, then its plan: a combination of homes the shared RTL builds.
    fn validate_variant(&self) -> Result<()> {
        self.variant.flow().validate(&self.tile())?;
        self.variant
            .plan()
            .validate()
            .map_err(|e| anyhow::anyhow!("variant {}'s plan: {e}", self.variant.name()))
    }
}
