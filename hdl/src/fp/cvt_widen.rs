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

/// The formats converted from.
pub const SOURCES: [Format; 2] = [Format::FP16, Format::BF16];

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
    if from == IN {
        return logic(m, a);
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

/// The conversion logic.
pub fn logic(m: &mut ModuleBuilder, a: Sig) -> Sig {
    let u = unpack(m, a, 5, 10, "a");
    // Subnormal: shift the fraction left until its leading one drops out of the 10-bit field;
    // that is lz + 1 places, and the exponent falls by as much (1 + 112 - (lz + 1)).
    let lz = leading_zeros(m, u.frac);
    let lz_plus_one = lz + 1;
    let zero4 = m.zero(4);
    let shift = mux(u.exp_zero, lz_plus_one, zero4);
    let shift = m.name("shift", shift);
    let frac = u.frac << shift;
    let frac = m.name("frac", frac);
    let exp_eff = u.exp_eff.zext(8);
    let exp = exp_eff + 112;
    let shift8 = shift.zext(8);
    let exp = exp - shift8;
    let exp = m.name("exp", exp);
    let pad = m.zero(13);
    let finite = cat(&[u.sign, exp, frac, pad]);
    select_special_f32(m, finite, u.is_nan, u.is_inf, u.sign, u.is_zero, u.sign)
}
