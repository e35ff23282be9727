//! `fp_cvt_e5m10_e8m23`: exact binary16 → binary32 conversion (the unit's name is its formats',
//! [`module_name`]); and `fp_cvt_e8m7_e8m23`, the exact bfloat16 → binary32 conversion (the
//! fraction padded with zeros).
//!
//! Ports: `a` (16 bits) → `y` (32 bits). Combinational (latency 0).
//!
//! Numerics (bit-exact model: `kernels::fp::fp16_to_fp32`): every binary16 value is exactly
//! representable; subnormals are normalized; ±0 and ±Inf keep their sign; NaN gives the
//! canonical NaN 0x7FC00000.

use crate::format::Format;
use crate::fp::arith::{leading_zeros, select_special_f32, unpack};
use crate::ir::iface::Block;
use crate::operands::UnaryBlock;
use crate::{cat, mux, Design, ModuleBuilder, Sig};

/// The format converted from.
pub const IN: Format = Format::FP16;
/// The format converted to.
pub const OUT: Format = Format::FP32;

/// The unit's and its module's name, from its formats (the block has no parameters):
/// `fp_cvt_e5m10_e8m23`.
pub fn module_name() -> String {
    crate::fp::unit_name("cvt", &[IN, OUT])
}

/// The formats converted from: every operand format.
pub const SOURCES: [Format; 4] = [
    Format::FP16,
    Format::BF16,
    Format::FP8_E4M3,
    Format::FP8_E5M2,
];

/// The name of the conversion from `from`: `fp_cvt_e8m7_e8m23` for bfloat16.
pub fn module_name_from(from: Format) -> String {
    crate::fp::unit_name("cvt", &[from, OUT])
}

/// Defines `fp_cvt_e5m10_e8m23` in `d`.
pub fn build(d: &mut Design) -> UnaryBlock {
    build_from(d, IN)
}

/// Defines the conversion from `from` (one of [`SOURCES`]) in `d`.
pub fn build_from(d: &mut Design, from: Format) -> UnaryBlock {
    let name = module_name_from(from);
    Block::of(d.define(&name, |_, m| {
        if from == IN {
            m.doc(&format!(
                "{name}: exact binary16 -> binary32 conversion. Combinational.\n\
                 NaN results are 0x7FC00000. Bit-exact model: kernels::fp::fp16_to_fp32."
            ));
        } else {
            m.doc(&format!(
                "{name}: exact {} -> binary32 conversion. Combinational.\n\
                 NaN results are 0x7FC00000. Bit-exact model: kernels::fp::convert.",
                from.name()
            ));
        }
        let a = m.input("a", from.bits());
        let y = logic_from(m, a, from);
        m.output("y", y);
    }))
}

/// The conversion from `from` (one of [`SOURCES`]).
pub fn logic_from(m: &mut ModuleBuilder, a: Sig, from: Format) -> Sig {
    assert!(
        SOURCES.contains(&from),
        "no conversion from {}",
        from.name()
    );
    if from.exp < OUT.exp {
        return logic_narrow_range(m, a, from);
    }
    // binary32's exponent field: the value is the same bits with the fraction padded.
    assert_eq!(from.exp, OUT.exp);
    let exp = a.slice(from.bits() - 2, from.man);
    let frac = a.slice(from.man - 1, 0);
    let exp_max = exp.all();
    let frac_nonzero = frac.any();
    let is_nan = exp_max & frac_nonzero;
    let is_nan = m.name("is_nan", is_nan);
    let pad = m.zero(OUT.man - from.man);
    let finite = cat(&[a, pad]);
    let nan = m.lit(OUT.bits(), OUT.qnan());
    mux(is_nan, nan, finite)
}

/// The conversion logic (from binary16).
pub fn logic(m: &mut ModuleBuilder, a: Sig) -> Sig {
    logic_narrow_range(m, a, IN)
}

/// The conversion from a format with fewer exponent bits than binary32's (binary16, the FP8
/// formats): every value is a binary32 normal number (or a zero), so subnormals are normalized
/// and the exponent rebiased; NaN and (where the format has them) ±Inf map to binary32's.
fn logic_narrow_range(m: &mut ModuleBuilder, a: Sig, from: Format) -> Sig {
    let u = unpack(m, a, from, "a");
    // Subnormal: shift the fraction left until its leading one drops out of the field; that is
    // lz + 1 places, and the exponent falls by as much (1 + rebias - (lz + 1)).
    let lz = leading_zeros(m, u.frac);
    let lz_plus_one = lz + 1;
    let zero = m.zero(lz.width());
    let shift = mux(u.exp_zero, lz_plus_one, zero);
    let shift = m.name("shift", shift);
    let frac = u.frac << shift;
    let frac = m.name("frac", frac);
    let exp_eff = u.exp_eff.zext(OUT.exp);
    let exp = exp_eff + (OUT.bias() - from.bias());
    let shift_wide = shift.zext(OUT.exp);
    let exp = exp - shift_wide;
    let exp = m.name("exp", exp);
    let pad = m.zero(OUT.man - from.man);
    let finite = cat(&[u.sign, exp, frac, pad]);
    select_special_f32(m, finite, u.is_nan, u.is_inf, u.sign, u.is_zero, u.sign)
}
