//! `fp_mul_e5m10`: exact binary16 × binary16 product in binary32 (the unit's name is its
//! operands' format, [`Fp16MulConfig::unit_name`]; the product's format is the one wide enough
//! to hold every product exactly, `Fp16MulConfig::OUT`).
//!
//! Ports: `a`, `b` (16 bits) → `y` (32 bits). Latency 0, 1 or 2 cycles (module name
//! `fp_mul_e5m10_l<latency>`), one result per cycle. Latency 1 registers the output;
//! latency 2 also registers the raw 22-bit significand product.
//!
//! Numerics (bit-exact model: `kernels::fp::fp16_mul`): the product is exact, no rounding;
//! subnormal inputs are supported; NaN × y and Inf × 0 give the canonical NaN 0x7FC00000;
//! Inf × nonzero gives a signed Inf; a zero factor gives a zero with the XOR of the signs.

use anyhow::Result;

use crate::arith::{leading_zeros, mul_specials, select_special_f32, unpack};
use crate::format::Format;
use crate::iface::Block;
use crate::operands::BinaryBlock;
use crate::{cat, Design, ModuleBuilder, Sig};

/// Configuration of `fp_mul_e5m10`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Fp16MulConfig {
    /// Pipeline registers between input and output: 0, 1 or 2.
    pub latency: u32,
}

impl Fp16MulConfig {
    pub const MAX_LATENCY: u32 = 2;
    /// The operands' format.
    pub const IN: Format = Format::FP16;
    /// The product's format, wide enough that every product of two `IN` values is exact.
    pub const OUT: Format = Format::FP32;

    pub fn validate(&self) -> Result<()> {
        crate::check_latency(&Self::unit_name(), self.latency, Self::MAX_LATENCY)
    }

    /// The unit's name, from its formats: `fp_mul_e5m10`.
    pub fn unit_name() -> String {
        crate::fp::unit_name("mul", &[Self::IN])
    }

    /// The Verilog module's name: the unit's with the latency, `fp_mul_e5m10_l1`.
    pub fn module_name(&self) -> String {
        format!("{}_l{}", Self::unit_name(), self.latency)
    }
}

/// Defines `fp_mul_e5m10_l<latency>` in `d`.
pub fn build(d: &mut Design, cfg: &Fp16MulConfig) -> BinaryBlock {
    Block::of(d.define(&cfg.module_name(), |_, m| {
        m.doc(&format!(
            "{}: exact binary16 x binary16 -> binary32 product.\n\
             Latency {} cycle(s), one result per cycle. NaN results are 0x7FC00000.\n\
             Bit-exact model: kernels::fp::fp16_mul.",
            Fp16MulConfig::unit_name(),
            cfg.latency
        ));
        let a = m.input("a", Fp16MulConfig::IN.bits());
        let b = m.input("b", Fp16MulConfig::IN.bits());
        let y = logic(m, a, b, cfg.latency);
        m.output("y", y);
        m.set_latency(cfg.latency);
    }))
}

/// The multiplier's logic with `latency` pipeline registers; returns the binary32 product.
pub fn logic(m: &mut ModuleBuilder, a: Sig, b: Sig, latency: u32) -> Sig {
    let ua = unpack(m, a, 5, 10, "a");
    let ub = unpack(m, b, 5, 10, "b");
    let (sign, is_nan, is_inf, is_zero) = mul_specials(m, &ua, &ub);
    // Exponent of the product before normalization: ea + eb + 98 - lz (see the model).
    let ea = ua.exp_eff.zext(8);
    let eb = ub.exp_eff.zext(8);
    let exp_sum = ea + eb;
    let exp_sum = m.name("exp_sum", exp_sum);
    let product = ua.sig.mul_wide(ub.sig);
    let product = m.name("product", product);

    // Optional cut after the significand multiply.
    let cut = latency >= 2;
    let sign = m.stage("sign", sign, cut);
    let is_nan = m.stage("is_nan", is_nan, cut);
    let is_inf = m.stage("is_inf", is_inf, cut);
    let is_zero = m.stage("is_zero", is_zero, cut);
    let exp_sum = m.stage("exp_sum", exp_sum, cut);
    let product = m.stage("product", product, cut);

    // Normalize: the leading one of the 22-bit product moves to bit 21 and is dropped.
    let lz = leading_zeros(m, product);
    let lz = m.name("lz", lz);
    let below_top = product.slice(20, 0);
    let norm = below_top << lz;
    let norm = m.name("norm", norm);
    let pad = m.zero(2);
    let frac = cat(&[norm, pad]);
    let bias = m.lit(8, 98);
    let exp = exp_sum + bias;
    let lz8 = lz.zext(8);
    let exp = exp - lz8;
    let exp = m.name("exp", exp);
    let finite = cat(&[sign, exp, frac]);
    let y = select_special_f32(m, finite, is_nan, is_inf, sign, is_zero, sign);
    m.stage("y", y, latency >= 1)
}
