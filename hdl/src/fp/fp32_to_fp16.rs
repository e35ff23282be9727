//! `fp_cvt_e8m23_e5m10`: binary32 → binary16, round to nearest even (the unit's name is its
//! formats', [`module_name`]).
//!
//! Ports: `a` (32 bits) → `y` (16 bits). Combinational (latency 0).
//!
//! Numerics (bit-exact model: `kernels::fp::fp32_to_fp16`): values beyond the binary16 range
//! (after rounding) give ±Inf; small values round to binary16 subnormals or ±0; binary32
//! subnormals give ±0; NaN gives the canonical NaN 0x7E00.

use crate::arith::{clamp, shift_right_sticky};
use crate::format::Format;
use crate::iface::Block;
use crate::operands::UnaryBlock;
use crate::{cat, mux, Design, ModuleBuilder, Sig};

/// The format converted from.
pub const IN: Format = Format::FP32;
/// The format converted to.
pub const OUT: Format = Format::FP16;

/// The unit's and its module's name, from its formats (the block has no parameters):
/// `fp_cvt_e8m23_e5m10`.
pub fn module_name() -> String {
    crate::fp::unit_name("cvt", &[IN, OUT])
}

/// Defines `fp_cvt_e8m23_e5m10` in `d`.
pub fn build(d: &mut Design) -> UnaryBlock {
    let name = module_name();
    Block::of(d.define(&name, |_, m| {
        m.doc(&format!(
            "{name}: binary32 -> binary16, round to nearest even. Combinational.\n\
             Overflow gives Inf, NaN results are 0x7E00. Bit-exact model: kernels::fp::fp32_to_fp16."
        ));
        let a = m.input("a", IN.bits());
        let y = logic(m, a);
        m.output("y", y);
    }))
}

/// The conversion logic.
pub fn logic(m: &mut ModuleBuilder, a: Sig) -> Sig {
    let sign = a.msb();
    let exp = a.slice(30, 23);
    let exp = m.name("a_exp", exp);
    let frac = a.slice(22, 0);
    let exp_max = exp.all();
    let frac_nonzero = frac.any();
    let is_nan = exp_max & frac_nonzero;
    // Binary32 zeros and subnormals are far below half the smallest binary16 subnormal.
    let to_zero = exp.is_zero();
    // Unbiased exponent above 15 (biased 143..254), or Inf itself.
    let e143 = m.lit(8, 143);
    let overflow = exp.ge(e143);
    let overflow = m.name("overflow", overflow);

    // Normal results keep 11 significant bits (shift right by 13); below 2^-14 each step down
    // shifts one more (126 - exp), up to 25, where everything has become sticky.
    let e113 = m.lit(8, 113);
    let normal = exp.ge(e113);
    let normal = m.name("normal", normal);
    let c126 = m.lit(8, 126);
    let sub_shift = c126 - exp;
    let sub_shift = clamp(m, sub_shift, 25, 5);
    let c13 = m.lit(5, 13);
    let shift = mux(normal, c13, sub_shift);
    let shift = m.name("shift", shift);
    // Two extra low bits: after the shift, bit 1 is the guard bit and bit 0 the sticky bit.
    let one = m.lit(1, 1);
    let zero2 = m.zero(2);
    let sig = cat(&[one, frac, zero2]);
    let shifted = shift_right_sticky(m, sig, shift);
    let shifted = m.name("shifted", shifted);
    // At least 13 places were shifted out: above the 10 kept fraction bits there is only the
    // hidden bit (implied by the exponent field) and zeros.
    let known_zero = shifted.slice(25, 12);
    m.discard(known_zero);
    let kept = shifted.slice(11, 2);
    let lsb = shifted.bit(2);
    let guard = shifted.bit(1);
    let sticky = shifted.bit(0);
    let tie_or_above = sticky | lsb;
    let round_up = guard & tie_or_above;
    let round_up = m.name("round_up", round_up);
    let exp_low = exp.trunc(5);
    let exp_field = exp_low - (112 % 32);
    let zero5 = m.zero(5);
    let exp_field = mux(normal, exp_field, zero5);
    let packed = cat(&[exp_field, kept]);
    let round15 = round_up.zext(15);
    let packed = packed + round15;
    let finite = cat(&[sign, packed]);

    let nan = m.lit(16, Format::FP16.qnan());
    let inf_bits = m.lit(15, Format::FP16.inf());
    let inf = cat(&[sign, inf_bits]);
    let zero_bits = m.zero(15);
    let zero = cat(&[sign, zero_bits]);
    let y = mux(to_zero, zero, finite);
    let y = mux(overflow, inf, y);
    mux(is_nan, nan, y)
}
