//! `mask_gen`: the causal mask of a Br × Bc tile.
//!
//! Ports: `q_base`, `k_base` (first query row and first key of the tile), `k_alt0`, `k_take0`,
//! `k_alt1`, `k_take1` (the first keys the block may move to instead: `k_alt0` when `k_take0`,
//! else `k_alt1` when `k_take1`), `q_len`, `k_len` (sequence lengths), `causal` → `mask`
//! (Br·Bc bits, bit i·Bc + j set when query q_base + i must not see key k + j, k the chosen
//! first key). Latency 1: the differences below are registered (for each of the three keys, and
//! the choice among them), and the mask compares the chosen ones.
//! The sequencer gives its blocks as they will be after this cycle, each as where it stands
//! and where it may move, all from registers: the differences of all three run beside the
//! phase choice, which only picks one (`k_take*`). (Which blocks a tile skips the sequencer
//! and fetch count from the keys it needs, `keys_needed`.) Bottom-right alignment as
//! FlashAttention: query i sees key j when
//! j ≤ i + (k_len − q_len); positions past either sequence's end are masked
//! (bit-exact model: `kernels::mask::MaskSpec`).
//!
//! Structure: one subtraction gives δ = q_base + k_len − k_base − q_len; position (i, j) is
//! causally masked when j − i > δ, and j − i takes only Br + Bc − 1 values, so one comparator
//! per value (a thermometer code) serves the whole tile, plus one per row and one per column for
//! the sequence ends: about 2(Br + Bc) comparators, not Br·Bc.

use anyhow::{ensure, Result};

use crate::interface;
use crate::ir::iface::Block;
use crate::{cat, mux, Design, ModuleBuilder, Sig};

interface! {
    /// The block: its first query row and key (`k_base`, or `k_alt0` when `k_take0`, else
    /// `k_alt1` when `k_take1`), the sequence lengths, causal.
    pub struct MaskIn { q_base, k_base, k_alt0, k_take0, k_alt1, k_take1, q_len, k_len, causal }
}

interface! {
    /// The block's mask bits.
    pub struct MaskOut { mask }
}

/// Configuration of `mask_gen`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MaskConfig {
    pub br: u32,
    pub bc: u32,
    /// Bits of a sequence index or length.
    pub index_bits: u32,
}

/// The narrowest and widest sequence indices.
pub const MIN_INDEX_BITS: u32 = 4;
pub const MAX_INDEX_BITS: u32 = 30;

/// `index_bits` within [`MIN_INDEX_BITS`, `MAX_INDEX_BITS`], checked before anything shifts
/// by it.
pub fn validate_index_bits(index_bits: u32) -> Result<()> {
    ensure!(
        (MIN_INDEX_BITS..=MAX_INDEX_BITS).contains(&index_bits),
        "index_bits = {index_bits} is out of range: allowed {MIN_INDEX_BITS} to {MAX_INDEX_BITS}"
    );
    Ok(())
}

impl MaskConfig {
    pub fn validate(&self) -> Result<()> {
        ensure!(self.br >= 1 && self.bc >= 1, "mask_gen needs Br, Bc >= 1");
        validate_index_bits(self.index_bits)?;
        ensure!(
            (self.br as u64) < (1 << self.index_bits) && (self.bc as u64) < (1 << self.index_bits),
            "a {}x{} tile needs indices wider than {} bits",
            self.br,
            self.bc,
            self.index_bits
        );
        Ok(())
    }

    pub fn module_name(&self) -> String {
        format!("mask_gen_{}x{}_i{}", self.br, self.bc, self.index_bits)
    }
}

fn signed_lit(m: &mut ModuleBuilder, width: u32, v: i64) -> Sig {
    m.lit(width, (v as u64) & ((1u64 << width) - 1))
}

/// Defines `mask_gen`.
pub fn build(d: &mut Design, cfg: &MaskConfig) -> Block<MaskIn, MaskOut<u32>> {
    Block::of(d.define(&cfg.module_name(), |_, m| {
        m.doc(&format!(
            "mask_gen: causal mask of a {} x {} tile (bit i*Bc + j: query q_base+i must not see\n\
             key k+j, k = k_alt0 if k_take0, else k_alt1 if k_take1, else k_base).\n\
             Bottom-right aligned. Latency 1 (the differences of all three registered as\n\
             picked). Model: kernels::mask::MaskSpec.",
            cfg.br, cfg.bc
        ));
        let iw = cfg.index_bits;
        let w = iw + 2; // signed arithmetic on sums and differences of indices
        let q_base = m.input("q_base", iw);
        let k_base = m.input("k_base", iw);
        let k_alt0 = m.input("k_alt0", iw);
        let k_take0 = m.input("k_take0", 1);
        let k_alt1 = m.input("k_alt1", iw);
        let k_take1 = m.input("k_take1", 1);
        let q_len = m.input("q_len", iw);
        let k_len = m.input("k_len", iw);
        let causal = m.input("causal", 1);
        let (qb, ql, kl) = (q_base.zext(w), q_len.zext(w), k_len.zext(w));
        // δ = (q_base + k_len − q_len) − k and k_len − k for each first key k, then the pick.
        let lead = qb + kl;
        let lead = lead - ql;
        // Each block's differences are registered, and so is the choice, which picks among
        // them after the registers: the choice arrives late in the cycle (the sequencer's phase
        // choice), and a synthesis tool that takes every input as early would otherwise fold
        // it into the subtractions.
        let (take0, take1) = (m.delay("take0", k_take0), m.delay("take1", k_take1));
        let pick = |m: &mut ModuleBuilder, name: &str, f: &dyn Fn(Sig) -> Sig| {
            let stay = m.delay(&format!("{name}_now"), f(k_base.zext(w)));
            let alt0 = m.delay(&format!("{name}_alt0"), f(k_alt0.zext(w)));
            let alt1 = m.delay(&format!("{name}_alt1"), f(k_alt1.zext(w)));
            let one = mux(take1, alt1, stay);
            m.name(name, mux(take0, alt0, one))
        };
        let delta = pick(m, "delta", &|kb| lead - kb);
        let q_rem = ql - qb;
        let q_rem = m.delay("q_rem", q_rem);
        let k_rem = pick(m, "k_rem", &|kb| kl - kb);
        let causal = m.delay("causal", causal);

        // Thermometer: causal mask of relative position v = j - i.
        let mut past_diag = vec![];
        for v in -(cfg.br as i64 - 1)..cfg.bc as i64 {
            let lit = signed_lit(m, w, v);
            let gt = lit.gt_signed(delta);
            past_diag.push(causal & gt);
        }
        let rows_out: Vec<Sig> = (0..cfg.br)
            .map(|i| {
                let lit = signed_lit(m, w, i as i64);
                lit.ge_signed(q_rem)
            })
            .collect();
        let cols_out: Vec<Sig> = (0..cfg.bc)
            .map(|j| {
                let lit = signed_lit(m, w, j as i64);
                lit.ge_signed(k_rem)
            })
            .collect();
        let mut bits = vec![];
        for i in 0..cfg.br {
            for j in 0..cfg.bc {
                let v = (j as i64 - i as i64 + cfg.br as i64 - 1) as usize;
                let out = rows_out[i as usize] | cols_out[j as usize];
                bits.push(out | past_diag[v]);
            }
        }
        bits.reverse(); // bit 0 = (0, 0)
        let mask = cat(&bits);
        m.output("mask", mask);
        m.set_latency(1);
    }))
}
