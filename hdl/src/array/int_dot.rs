//! `int_dot_i8` / `int_dot_i4`: the PE's integer QKᵀ step, `y = acc + Σ a_i × b_i`
//! over the lanes packed in two 16-bit elements (two INT8 values, or four INT4, lane 0 in the
//! low bits), in two's complement int32; with `last` the sum leaves as binary32.
//!
//! Ports: `a`, `b` (16 bits: packed lanes), `acc` (32 bits, int32), `last` (1 bit) → `y` (32
//! bits). Combinational (latency 0): the PE delays the result to its MAC's latency, so the
//! integer and floating-point operations share one write-back pipeline.
//!
//! Numerics (bit-exact model: `kernels::quant::dot_packed`, `kernels::quant::int_to_f32`): the
//! products are exact, the sum wraps at 2^32 (a head dimension's sum never reaches 2^31:
//! d · 2 · 128² < 2^31 for d ≤ 1024); the conversion is exact below 2^24 in magnitude and
//! rounds to nearest even above (a score of d · 127² stays below 2^24 for d ≤ 1040).

use kernels::quant::QkFormat;

use crate::fp::arith::{leading_zeros, round_pack_f32};
use crate::interface;
use crate::ir::iface::Block;
use crate::{mux, Design, ModuleBuilder, Sig};

interface! {
    /// The integer step's inputs: the packed operands, the int32 accumulator, and whether the
    /// result leaves as binary32.
    pub struct IntDotIn { a, b, acc, last }
}

interface! {
    /// The result: int32, or binary32 with `last`.
    pub struct IntDotOut { y }
}

/// The unit's name: `int_dot_i8`, `int_dot_i4`.
pub fn module_name(f: QkFormat) -> String {
    format!("int_dot_i{}", f.bits())
}

/// Defines the unit for `f` in `d`.
pub fn build(d: &mut Design, f: QkFormat) -> Block<IntDotIn, IntDotOut<u32>> {
    let name = module_name(f);
    Block::of(d.define(&name, |_, m| {
        m.doc(&format!(
            "{name}: y = acc + sum of {} {}-bit products of the lanes of a and b (int32,\n\
             wrapping); with last, y = binary32(that sum), round to nearest even.\n\
             Combinational. Bit-exact model: kernels::quant::dot_packed, int_to_f32.",
            f.lanes(),
            f.bits()
        ));
        let a = m.input("a", 16);
        let b = m.input("b", 16);
        let acc = m.input("acc", 32);
        let last = m.input("last", 1);
        let y = logic(m, f, a, b, acc, last);
        m.output("y", y);
    }))
}

/// The step's logic: int32 `acc + Σ a_i × b_i`, converted to binary32 when `last`.
pub fn logic(m: &mut ModuleBuilder, f: QkFormat, a: Sig, b: Sig, acc: Sig, last: Sig) -> Sig {
    let w = f.bits();
    let mut sum = acc;
    for i in 0..f.lanes() {
        let (x, y) = (a.slice(w * i + w - 1, w * i), b.slice(w * i + w - 1, w * i));
        let p = x.mul_wide_signed(y);
        sum = sum + p.sext(32);
    }
    let sum = m.name("isum", sum);
    let fp = to_fp32(m, sum);
    mux(last, fp, sum)
}

/// An int32 as binary32, round to nearest even.
pub fn to_fp32(m: &mut ModuleBuilder, x: Sig) -> Sig {
    let sign = x.msb();
    let zero32 = m.zero(32);
    // |x| as an unsigned 32-bit value (2^31 for the most negative).
    let mag = mux(sign, zero32 - x, x);
    let lz = leading_zeros(m, mag);
    let sig = mag << lz;
    // The leading one at bit 31 stands for 2^(31 − lz): biased exponent 158 − lz.
    let exp = m.lit(10, 127 + 31) - lz.zext(10);
    let no = m.lit(1, 0);
    let packed = round_pack_f32(m, sign, sig, exp, no);
    let pos_zero = m.zero(32);
    mux(x.is_zero(), pos_zero, packed)
}
