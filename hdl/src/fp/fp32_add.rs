//! `fp_add_e8m23`: binary32 addition, round to nearest even (the unit's name is its
//! format's, [`Fp32AddConfig::unit_name`]).
//!
//! Ports: `a`, `b` (32 bits) → `y` (32 bits). Latency 0, 1 or 2 cycles (module name
//! `fp_add_e8m23_l<latency>`), one result per cycle. Latency 1 registers the output; latency
//! 2 also registers the aligned operands.
//!
//! Numerics (bit-exact model: `kernels::fp::fp32_add`): IEEE 754 round to nearest even with
//! subnormal inputs and results (no flush to zero); x + (−x) = +0 and (−0) + (−0) = −0;
//! overflow gives ±Inf; Inf − Inf and any NaN input give the canonical NaN 0x7FC00000.
//!
//! Structure: order the operands by magnitude, align the smaller one with guard/round/sticky
//! bits, add or subtract, normalize (one step right on carry, or left by the leading-zero count
//! but never below the smallest exponent, which yields subnormals), round, and pack; the
//! rounding increment is added to the packed exponent and fraction so that carries into the
//! exponent (including to Inf) come out right without extra logic.

use anyhow::Result;

use crate::arith::{clamp, leading_zeros, select_special_f32, shift_right_sticky, unpack};
use crate::format::Format;
use crate::iface::Block;
use crate::operands::BinaryBlock;
use crate::{cat, mux, or_all, Design, ModuleBuilder, Sig};

/// Configuration of `fp_add_e8m23`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Fp32AddConfig {
    /// Pipeline registers between input and output: 0, 1 or 2.
    pub latency: u32,
}

impl Fp32AddConfig {
    pub const MAX_LATENCY: u32 = 2;
    /// The format of the operands and the result.
    pub const FORMAT: Format = Format::FP32;

    pub fn validate(&self) -> Result<()> {
        crate::check_latency(&Self::unit_name(), self.latency, Self::MAX_LATENCY)
    }

    /// The unit's name, from its format: `fp_add_e8m23`.
    pub fn unit_name() -> String {
        crate::fp::unit_name("add", &[Self::FORMAT])
    }

    /// The Verilog module's name: the unit's with the latency, `fp_add_e8m23_l1`.
    pub fn module_name(&self) -> String {
        format!("{}_l{}", Self::unit_name(), self.latency)
    }
}

/// Defines `fp_add_e8m23_l<latency>` in `d`.
pub fn build(d: &mut Design, cfg: &Fp32AddConfig) -> BinaryBlock {
    Block::of(d.define(&cfg.module_name(), |_, m| {
        m.doc(&format!(
            "{}: binary32 a + b, round to nearest even, subnormals supported.\n\
             Latency {} cycle(s), one result per cycle. NaN results are 0x7FC00000.\n\
             Bit-exact model: kernels::fp::fp32_add.",
            Fp32AddConfig::unit_name(),
            cfg.latency
        ));
        let a = m.input("a", Fp32AddConfig::FORMAT.bits());
        let b = m.input("b", Fp32AddConfig::FORMAT.bits());
        let y = logic(m, a, b, cfg.latency);
        m.output("y", y);
        m.set_latency(cfg.latency);
    }))
}

/// The adder's logic with `latency` pipeline registers; returns the binary32 sum.
pub fn logic(m: &mut ModuleBuilder, a: Sig, b: Sig, latency: u32) -> Sig {
    let ua = unpack(m, a, 8, 23, "a");
    let ub = unpack(m, b, 8, 23, "b");
    let a_sign = ua.sign;
    let b_sign = ub.sign;
    let subtract = a_sign ^ b_sign;
    let subtract = m.name("subtract", subtract);
    let both_inf = ua.is_inf & ub.is_inf;
    let inf_minus_inf = both_inf & subtract;
    let is_nan = or_all(&[ua.is_nan, ub.is_nan, inf_minus_inf]);
    let is_nan = m.name("is_nan", is_nan);
    let is_inf = ua.is_inf | ub.is_inf;
    let is_inf = m.name("is_inf", is_inf);
    // An exact zero sum is -0 only when both operands are -0.
    let zero_sign = a_sign & b_sign;
    let zero_sign = m.name("zero_sign", zero_sign);

    // Order by magnitude: x is the larger, y the smaller.
    let a_mag = a.slice(30, 0);
    let b_mag = b.slice(30, 0);
    let swap = a_mag.lt(b_mag);
    let swap = m.name("swap", swap);
    let sign = mux(swap, b_sign, a_sign);
    let sign = m.hint("sign", sign);
    let x_sig = mux(swap, ub.sig, ua.sig);
    let x_sig = m.hint("x_sig", x_sig);
    let y_sig = mux(swap, ua.sig, ub.sig);
    let y_sig = m.hint("y_sig", y_sig);
    let x_exp = mux(swap, ub.exp_eff, ua.exp_eff);
    let y_exp = mux(swap, ua.exp_eff, ub.exp_eff);
    let x_exp = m.name("x_exp", x_exp);
    let exp_diff = x_exp - y_exp;
    let exp_diff = m.name("exp_diff", exp_diff);
    // Shifting 27 bits by 31 already moves everything into the sticky bit.
    let align = clamp(m, exp_diff, 31, 5);
    let align = m.hint("align", align);
    let grs = m.zero(3);
    let y_ext = cat(&[y_sig, grs]);
    let y_aligned = shift_right_sticky(m, y_ext, align);
    let y_aligned = m.name("y_aligned", y_aligned);

    // Optional cut after alignment.
    let cut = latency >= 2;
    let is_nan = m.stage("is_nan", is_nan, cut);
    let is_inf = m.stage("is_inf", is_inf, cut);
    let zero_sign = m.stage("zero_sign", zero_sign, cut);
    let subtract = m.stage("subtract", subtract, cut);
    let sign = m.stage("sign", sign, cut);
    let x_sig = m.stage("x_sig", x_sig, cut);
    let x_exp = m.stage("x_exp", x_exp, cut);
    let y_aligned = m.stage("y_aligned", y_aligned, cut);

    // Add or subtract in 28 bits: bit 27 is the carry, bit 26 the hidden-bit position.
    let zero1 = m.zero(1);
    let big = cat(&[zero1, x_sig, grs]);
    let small = cat(&[zero1, y_aligned]);
    let invert = subtract.repeat(28);
    let small = small ^ invert;
    let carry_in = subtract.zext(28);
    let sum = big + small;
    let sum = sum + carry_in;
    let sum = m.name("sum", sum);
    let sum_zero = sum.is_zero();
    let sum_zero = m.name("sum_zero", sum_zero);
    let carry = sum.bit(27);
    let carry = m.hint("carry", carry);

    // Carry: one step right, the dropped bit joins the sticky bit.
    let sum_hi = sum.slice(27, 2);
    let sum_b1 = sum.bit(1);
    let sum_b0 = sum.bit(0);
    let sticky_r = sum_b1 | sum_b0;
    let norm_right = cat(&[sum_hi, sticky_r]);
    let exp_right = x_exp + 1;
    let exp_right = m.hint("exp_right", exp_right);
    let overflow = exp_right.eq(0xFF);
    let overflow = carry & overflow;
    let overflow = m.name("overflow", overflow);

    // No carry: left by the leading-zero count, but not below exponent 1 (subnormal result).
    let sum_low = sum.slice(26, 0);
    let lz = leading_zeros(m, sum_low);
    let lz = m.name("lz", lz);
    let max_left = x_exp - 1;
    let max_left = m.hint("max_left", max_left);
    let lz8 = lz.zext(8);
    let limited = max_left.lt(lz8);
    let max_left5 = max_left.trunc(5);
    let left = mux(limited, max_left5, lz);
    let left = m.name("left", left);
    let norm_left = sum_low << left;
    let left8 = left.zext(8);
    let exp_left = x_exp - left8;

    let norm = mux(carry, norm_right, norm_left);
    let norm = m.name("norm", norm);
    let exp = mux(carry, exp_right, exp_left);
    // Without the hidden bit the value is subnormal: exponent field 0.
    let hidden = norm.bit(26);
    let zero8 = m.zero(8);
    let exp_field = mux(hidden, exp, zero8);

    // Round to nearest even on guard (bit 2) and sticky (bits 1..0).
    let frac = norm.slice(25, 3);
    let lsb = norm.bit(3);
    let guard = norm.bit(2);
    let sticky_bits = norm.slice(1, 0);
    let sticky = sticky_bits.any();
    let tie_or_above = sticky | lsb;
    let round_up = guard & tie_or_above;
    let round_up = m.name("round_up", round_up);
    let packed = cat(&[exp_field, frac]);
    let round31 = round_up.zext(31);
    let packed = packed + round31;
    let finite = cat(&[sign, packed]);
    let infinite = is_inf | overflow;
    let y = select_special_f32(m, finite, is_nan, infinite, sign, sum_zero, zero_sign);
    m.stage("y", y, latency >= 1)
}
