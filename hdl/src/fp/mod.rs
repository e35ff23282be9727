//! Floating-point units: IEEE binary16/binary32 multipliers, adder, conversions, max, ceil,
//! scale by a power of two, reciprocal, and the building blocks they share (`arith`; the
//! encodings are `crate::format::Format`'s).
//!
//! A unit is named by its operation and number formats, as HardFloat names its modules:
//! `fp_<op>_<format>` when operands and result share one format (`fp_add_e8m23`), and
//! `fp_<op>_<in>_<out>` when they differ (`fp_mul_e5m10`, the exact widening product;
//! `fp_cvt_e8m23_e5m10`). [`unit_name`] builds every such name from the formats' own
//! [`Format::name`]; a unit with a latency parameter appends `_l<latency>` for its Verilog
//! module.

use crate::format::Format;

pub mod add;
pub mod arith;
pub mod cvt_narrow;
pub mod cvt_widen;
pub mod misc;
pub mod mul;
pub mod mul_exact;
pub mod recip;

/// The name of the floating-point unit doing `op` on `formats`: `fp_<op>` followed by each
/// format's [`Format::name`] (the operands' format; a conversion's source, then its target).
pub fn unit_name(op: &str, formats: &[Format]) -> String {
    let mut name = format!("fp_{op}");
    for f in formats {
        name.push('_');
        name.push_str(&f.name());
    }
    name
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units_are_named_by_their_formats() {
        assert_eq!(unit_name("add", &[Format::FP32]), "fp_add_e8m23");
        assert_eq!(unit_name("mul", &[Format::FP16]), "fp_mul_e5m10");
        assert_eq!(
            unit_name("cvt", &[Format::FP16, Format::FP32]),
            "fp_cvt_e5m10_e8m23"
        );
    }
}
