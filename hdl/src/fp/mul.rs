//! `fp_mul_e8m23`: binary32 multiplication, round to nearest even (the unit's name is its
//! format's, [`Fp32MulConfig::unit_name`]).
//!
//! Ports: `a`, `b` (32 bits) → `y` (32 bits). Latency 0 to 6 cycles (module name
//! `fp_mul_e8m23_l<latency>`), one result per cycle. Latency 1 registers the output; 2 also
//! the significand product; 3 also the normalized operands (before the multiplier); 4 also
//! the carry-save pair of the significands' partial products; 5 also the rounding's decision
//! (before its increment); 6 also the operands as they arrive.
//!
//! Numerics (bit-exact model: `kernels::fp::fp32_mul`): subnormal inputs are normalized first
//! and subnormal results rounded; overflow gives ±Inf; NaN inputs and Inf × 0 give the canonical
//! NaN 0x7FC00000.

use anyhow::Result;

use crate::format::Format;
use crate::fp::arith::{
    mul_specials, normalize_f32, round_finish_f32, round_prepare_f32, select_special_f32,
    split_product, stage_all, stage_fields, stage_product, unpack,
};
use crate::ir::iface::Block;
use crate::operands::BinaryBlock;
use crate::{cat, mux, Design, ModuleBuilder, Sig};

/// Configuration of `fp_mul_e8m23`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Fp32MulConfig {
    /// Pipeline registers: 0 to [`Fp32MulConfig::MAX_LATENCY`].
    pub latency: u32,
}

impl Fp32MulConfig {
    pub const MAX_LATENCY: u32 = 6;
    /// The format of the operands and the result.
    pub const FORMAT: Format = Format::FP32;

    pub fn validate(&self) -> Result<()> {
        crate::check_latency(&Self::unit_name(), self.latency, Self::MAX_LATENCY)
    }

    /// The unit's name, from its format: `fp_mul_e8m23`.
    pub fn unit_name() -> String {
        crate::fp::unit_name("mul", &[Self::FORMAT])
    }

    /// The Verilog module's name: the unit's with the latency, `fp_mul_e8m23_l1`.
    pub fn module_name(&self) -> String {
        format!("{}_l{}", Self::unit_name(), self.latency)
    }
}

/// Defines `fp_mul_e8m23_l<latency>` in `d`.
pub fn build(d: &mut Design, cfg: &Fp32MulConfig) -> BinaryBlock {
    Block::of(d.define(&cfg.module_name(), |_, m| {
        m.doc(&format!(
            "{}: binary32 a * b, round to nearest even, subnormals supported.\n\
             Latency {} cycle(s), one result per cycle. NaN results are 0x7FC00000.\n\
             Bit-exact model: kernels::fp::fp32_mul.",
            Fp32MulConfig::unit_name(),
            cfg.latency
        ));
        let a = m.input("a", Fp32MulConfig::FORMAT.bits());
        let b = m.input("b", Fp32MulConfig::FORMAT.bits());
        let y = logic(m, a, b, cfg.latency);
        m.output("y", y);
        m.set_latency(cfg.latency);
    }))
}

/// The multiplier's logic with `latency` pipeline registers.
pub fn logic(m: &mut ModuleBuilder, a: Sig, b: Sig, latency: u32) -> Sig {
    let [a, b] = stage_all(m, "in", latency >= 6, [("a", a), ("b", b)]);
    let ua = unpack(m, a, Format::FP32, "a");
    let ub = unpack(m, b, Format::FP32, "b");
    let (sign, is_nan, is_inf, is_zero) = mul_specials(m, &ua, &ub);
    let (sig_a, exp_a) = normalize_f32(m, &ua);
    let (sig_b, exp_b) = normalize_f32(m, &ub);
    let exp_sum = exp_a + exp_b;
    let exp_sum = exp_sum - 127;
    let exp_sum = m.name("exp_sum", exp_sum);
    // Optional cut after the operands' normalization, and (latency 4) between the partial
    // products of b's halves and their sum.
    let cut = latency >= 3;
    let fields = [sign, is_nan, is_inf, is_zero, exp_sum];
    let (fields, [sig_a, sig_b]) =
        stage_fields(m, "n", cut, fields, [("sig_a", sig_a), ("sig_b", sig_b)]);
    let (fields, product) = split_product(m, fields, sig_a, sig_b, latency >= 4);
    let product = m.name("product", product);
    let ([sign, is_nan, is_inf, is_zero, exp_sum], product) =
        stage_product(m, fields, product, latency >= 2);

    // The product of two normalized significands has its leading one at bit 47 or 46.
    let top = product.bit(47);
    let low47 = product.slice(46, 0);
    let zero1 = m.zero(1);
    let shifted = cat(&[low47, zero1]);
    let sig = mux(top, product, shifted);
    let top10 = top.zext(10);
    let exp = exp_sum + top10;
    let exp = m.name("exp", exp);
    let r = round_prepare_f32(m, sig, exp, zero1);
    // Optional cut (latency 5) between the rounding's shift and decision and its increment.
    let cut = latency >= 5;
    let r = r.stage(m, "r", cut);
    let [sign, is_nan, is_inf, is_zero] = stage_all(
        m,
        "r",
        cut,
        [
            ("sign", sign),
            ("is_nan", is_nan),
            ("is_inf", is_inf),
            ("is_zero", is_zero),
        ],
    );
    let finite = round_finish_f32(m, sign, r);
    let y = select_special_f32(m, finite, is_nan, is_inf, sign, is_zero, sign);
    m.stage("y", y, latency >= 1)
}
