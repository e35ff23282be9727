//! `fp_cvt_e8m23_e5m10`: binary32 → binary16, round to nearest even (the unit's name is its
//! formats', [`module_name`]); and `fp_cvt_e8m23_e8m7`, binary32 → bfloat16, the same with
//! [`Format::BF16`] as the target.
//!
//! Ports: `a` (32 bits) → `y` (16 bits). Combinational (latency 0).
//!
//! Numerics (bit-exact model: `kernels::fp::convert`, for binary16 also
//! `kernels::fp::fp32_to_fp16`): values beyond the target's range (after rounding) give ±Inf;
//! small values round to the target's subnormals or ±0; binary32 subnormals give ±0 in
//! binary16 and round to bfloat16's subnormals (bfloat16 has binary32's exponent range, so only
//! the fraction is rounded); NaN gives the target's canonical NaN (0x7E00, 0x7FC0).

use crate::format::Format;
use crate::fp::arith::{clamp, shift_right_sticky};
use crate::ir::iface::Block;
use crate::operands::UnaryBlock;
use crate::{cat, mux, Design, ModuleBuilder, Sig};

/// The format converted from.
pub const IN: Format = Format::FP32;
/// The format converted to by default.
pub const OUT: Format = Format::FP16;
/// The formats converted to: every operand format.
pub const TARGETS: [Format; 4] = [
    Format::FP16,
    Format::BF16,
    Format::FP8_E4M3,
    Format::FP8_E5M2,
];

/// The unit's and its module's name, from its formats (the block has no parameters):
/// `fp_cvt_e8m23_e5m10`.
pub fn module_name() -> String {
    module_name_to(OUT)
}

/// The name of the conversion to `to`: `fp_cvt_e8m23_e8m7` for bfloat16.
pub fn module_name_to(to: Format) -> String {
    crate::fp::unit_name("cvt", &[IN, to])
}

/// Defines `fp_cvt_e8m23_e5m10` in `d`.
pub fn build(d: &mut Design) -> UnaryBlock {
    build_to(d, OUT)
}

/// Defines the conversion to `to` (one of [`TARGETS`]) in `d`.
pub fn build_to(d: &mut Design, to: Format) -> UnaryBlock {
    let name = module_name_to(to);
    Block::of(d.define(&name, |_, m| {
        if to == OUT {
            m.doc(&format!(
                "{name}: binary32 -> binary16, round to nearest even. Combinational.\n\
                 Overflow gives Inf, NaN results are 0x7E00. Bit-exact model: kernels::fp::fp32_to_fp16."
            ));
        } else {
            m.doc(&format!(
                "{name}: binary32 -> {}, round to nearest even. Combinational.\n\
                 Overflow gives {}, NaN results are {:#x}. Bit-exact model: kernels::fp::convert.",
                to.name(),
                if to.has_inf() {
                    "Inf"
                } else {
                    "the largest finite value (saturating; Inf too)"
                },
                to.qnan()
            ));
        }
        let a = m.input("a", IN.bits());
        let y = logic_to(m, a, to);
        m.output("y", y);
    }))
}

/// The conversion to `to` (one of [`TARGETS`]).
pub fn logic_to(m: &mut ModuleBuilder, a: Sig, to: Format) -> Sig {
    assert!(TARGETS.contains(&to), "no conversion to {}", to.name());
    if to.exp < IN.exp {
        logic_narrow_range(m, a, to)
    } else {
        logic_same_range(m, a, to)
    }
}

/// The conversion to a format with binary32's exponent field (bfloat16): the fraction rounds
/// to `to.man` bits, to nearest even, and a carry out of it moves the exponent up (the largest
/// subnormal to the smallest normal, the largest finite to Inf); Inf passes.
fn logic_same_range(m: &mut ModuleBuilder, a: Sig, to: Format) -> Sig {
    assert_eq!(to.exp, IN.exp);
    let cut = IN.man - to.man;
    let (sign, exp, frac, is_nan) = fields(m, a);
    let is_nan = m.name("is_nan", is_nan);
    let kept = frac.slice(22, cut);
    let lsb = frac.bit(cut);
    let guard = frac.bit(cut - 1);
    let below = frac.slice(cut - 2, 0);
    let sticky = below.any();
    let tie_or_above = sticky | lsb;
    let round_up = guard & tie_or_above;
    let round_up = m.name("round_up", round_up);
    let packed = cat(&[exp, kept]);
    let round = round_up.zext(to.bits() - 1);
    let packed = packed + round;
    let finite = cat(&[sign, packed]);
    let nan = m.lit(to.bits(), to.qnan());
    mux(is_nan, nan, finite)
}

/// A binary32 value's (sign, exponent field, fraction field, is NaN).
fn fields(m: &mut ModuleBuilder, a: Sig) -> (Sig, Sig, Sig, Sig) {
    let sign = a.msb();
    let exp = a.slice(30, 23);
    let exp = m.name("a_exp", exp);
    let frac = a.slice(22, 0);
    let exp_max = exp.all();
    let frac_nonzero = frac.any();
    let is_nan = exp_max & frac_nonzero;
    (sign, exp, frac, is_nan)
}

/// The conversion logic (to binary16).
pub fn logic(m: &mut ModuleBuilder, a: Sig) -> Sig {
    logic_narrow_range(m, a, OUT)
}

/// The conversion to a format with fewer exponent bits than binary32's (binary16, the FP8
/// formats): the exponent is rebiased, results below the target's normal range shift right
/// into its subnormals, and beyond its range a value overflows to ±Inf, or in a saturating
/// format (E4M3) to ±its largest finite value, as a rounding carry past that value does.
fn logic_narrow_range(m: &mut ModuleBuilder, a: Sig, to: Format) -> Sig {
    let (sign, exp, frac, is_nan) = fields(m, a);
    // Binary32 zeros and subnormals are far below half the target's smallest subnormal.
    let to_zero = exp.is_zero();
    // Unbiased exponent above the target's largest (binary16: biased 143..254), or Inf itself.
    let rebias = IN.bias() - to.bias();
    let e_over = m.lit(IN.exp, IN.bias() + to.emax() as u64 + 1);
    let overflow = exp.ge(e_over);
    let overflow = m.name("overflow", overflow);

    // Normal results keep man + 1 significant bits (binary16: shift right by 13); below the
    // target's smallest normal each step down shifts one more, up to 25, where everything has
    // become sticky.
    let normal_shift = IN.man - to.man;
    let e_normal = m.lit(IN.exp, rebias + 1);
    let normal = exp.ge(e_normal);
    let normal = m.name("normal", normal);
    let c_sub = m.lit(IN.exp, normal_shift as u64 + rebias + 1);
    let sub_shift = c_sub - exp;
    let sub_shift = clamp(m, sub_shift, 25, 5);
    let c_normal = m.lit(5, normal_shift as u64);
    let shift = mux(normal, c_normal, sub_shift);
    let shift = m.name("shift", shift);
    // Two extra low bits: after the shift, bit 1 is the guard bit and bit 0 the sticky bit.
    let one = m.lit(1, 1);
    let zero2 = m.zero(2);
    let sig = cat(&[one, frac, zero2]);
    let shifted = shift_right_sticky(m, sig, shift);
    let shifted = m.name("shifted", shifted);
    // At least `normal_shift` places were shifted out: above the kept fraction bits there is
    // only the hidden bit (implied by the exponent field) and zeros.
    let known_zero = shifted.slice(25, to.man + 2);
    m.discard(known_zero);
    let kept = shifted.slice(to.man + 1, 2);
    let lsb = shifted.bit(2);
    let guard = shifted.bit(1);
    let sticky = shifted.bit(0);
    let tie_or_above = sticky | lsb;
    let round_up = guard & tie_or_above;
    let round_up = m.name("round_up", round_up);
    let exp_low = exp.trunc(to.exp);
    let exp_field = exp_low - (rebias % (1 << to.exp));
    let zero_exp = m.zero(to.exp);
    let exp_field = mux(normal, exp_field, zero_exp);
    let packed = cat(&[exp_field, kept]);
    let packed = if to.has_inf() {
        let round = round_up.zext(to.bits() - 1);
        packed + round
    } else {
        // A carry past the largest finite value reaches the NaN's encoding, or past the
        // field: with one more bit, anything above the largest finite value saturates.
        let round = round_up.zext(to.bits());
        let packed = packed.zext(to.bits()) + round;
        let packed = m.name("packed", packed);
        let max = m.lit(to.bits(), to.max_finite_bits());
        let past = packed.gt(max);
        let max = max.trunc(to.bits() - 1);
        let packed = packed.trunc(to.bits() - 1);
        mux(past, max, packed)
    };
    let finite = cat(&[sign, packed]);

    let nan = m.lit(to.bits(), to.qnan());
    let over_bits = m.lit(to.bits() - 1, to.overflow());
    let over = cat(&[sign, over_bits]);
    let zero_bits = m.zero(to.bits() - 1);
    let zero = cat(&[sign, zero_bits]);
    let y = mux(to_zero, zero, finite);
    let y = mux(overflow, over, y);
    mux(is_nan, nan, y)
}
