//! Small binary32 operators of the softmax datapath, each combinational and each named by its
//! format ([`FORMAT`]; [`max_module_name`], [`ceil_module_name`], [`scale2_module_name`]):
//!
//! * `fp_max_e8m23` (`a`, `b` → `y`): IEEE maximum: NaN if either input is NaN (canonical
//!   NaN), −0 below +0, −Inf the identity. Model: `kernels::fp::fp32_max`.
//! * `fp_ceil_e8m23` (`a` → `y`): the smallest integer not below `a` (ceil(−0.5) = −0; NaN
//!   gives the canonical NaN). Model: `kernels::fp::fp32_ceil`.
//! * `fp_scale2_e8m23` (`a`, `n` (8 bits) → `y`): `a · 2^−n`, exact unless the result is
//!   subnormal, then rounded to nearest even. Model: `kernels::fp::fp32_scale2`.

use crate::format::Format;
use crate::fp::arith::{self, unpack};
use crate::interface;
use crate::ir::iface::Block;
use crate::operands::{BinaryBlock, UnaryBlock, Y};
use crate::{cat, mux, Design, ModuleBuilder, Sig};

interface! {
    /// `fp_scale2_e8m23`'s operands: the value and the exponent decrement.
    pub struct Scale2 { a, n }
}

/// The format of the operands and the results.
pub const FORMAT: Format = Format::FP32;

/// The maximum's unit and module name, from its format: `fp_max_e8m23`.
pub fn max_module_name() -> String {
    crate::fp::unit_name("max", &[FORMAT])
}

/// The ceiling's unit and module name, from its format: `fp_ceil_e8m23`.
pub fn ceil_module_name() -> String {
    crate::fp::unit_name("ceil", &[FORMAT])
}

/// The power-of-two scaling's unit and module name, from its format: `fp_scale2_e8m23`.
pub fn scale2_module_name() -> String {
    crate::fp::unit_name("scale2", &[FORMAT])
}

/// A key whose unsigned order is binary32's total order on non-NaN values.
fn order_key(m: &mut ModuleBuilder, x: Sig) -> Sig {
    let sign = x.msb();
    let flipped = !x;
    let sign_bit = m.lit(32, 0x8000_0000);
    let marked = x | sign_bit;
    mux(sign, flipped, marked)
}

/// IEEE maximum of two binary32 values.
pub fn max_logic(m: &mut ModuleBuilder, a: Sig, b: Sig) -> Sig {
    let ua = unpack(m, a, Format::FP32, "a");
    let ub = unpack(m, b, Format::FP32, "b");
    let is_nan = ua.is_nan | ub.is_nan;
    let ka = order_key(m, a);
    let kb = order_key(m, b);
    let a_wins = ka.ge(kb);
    let a_wins = m.hint("a_wins", a_wins);
    let y = mux(a_wins, a, b);
    let nan = m.lit(32, Format::FP32.qnan());
    mux(is_nan, nan, y)
}

/// Defines `fp_max_e8m23`.
pub fn build_max(d: &mut Design) -> BinaryBlock {
    let name = max_module_name();
    Block::of(d.define(&name, |_, m| {
        m.doc(&format!(
            "{name}: IEEE maximum of binary32 a and b: NaN in -> 0x7FC00000, -0 < +0.\n\
             Combinational. Bit-exact model: kernels::fp::fp32_max."
        ));
        let a = m.input("a", FORMAT.bits());
        let b = m.input("b", FORMAT.bits());
        let y = max_logic(m, a, b);
        m.output("y", y);
    }))
}

/// Round toward +Inf to an integer.
pub fn ceil_logic(m: &mut ModuleBuilder, a: Sig) -> Sig {
    let u = unpack(m, a, Format::FP32, "a");
    let negative = u.sign;
    // Exponents 150 and above (and Inf) are integers already; below 127, |a| < 1.
    let c150 = m.lit(8, 150);
    let integral = u.exp.ge(c150);
    let c127 = m.lit(8, 127);
    let below_one = u.exp.lt(c127);
    // 127 <= exp < 150: the low 150 - exp fraction bits are the fractional part.
    // (150 - exp) mod 32, computed in 5 bits.
    let c150_5 = m.lit(5, 150 % 32);
    let exp5 = u.exp.trunc(5);
    let frac_bits = c150_5 - exp5;
    let frac_bits = m.hint("frac_bits", frac_bits);
    let ones = m.ones(32);
    let int_mask = ones << frac_bits;
    let int_mask = m.hint("int_mask", int_mask);
    let truncated = a & int_mask;
    let truncated = m.hint("truncated", truncated);
    let is_int = truncated.eq(a);
    let step = !int_mask;
    let one32 = m.lit(32, 1);
    let step = step + one32;
    let up = truncated + step;
    let round_up = !is_int;
    let positive = !negative;
    let round_up = round_up & positive;
    let in_range = mux(round_up, up, truncated);
    let one = m.lit(32, Format::FP32.one());
    let neg_zero = m.lit(32, Format::FP32.neg_zero());
    let small = mux(negative, neg_zero, one);
    let keep = integral | u.is_zero;
    let y = mux(below_one, small, in_range);
    let y = mux(keep, a, y);
    let nan = m.lit(32, Format::FP32.qnan());
    mux(u.is_nan, nan, y)
}

/// Defines `fp_ceil_e8m23`.
pub fn build_ceil(d: &mut Design) -> UnaryBlock {
    let name = ceil_module_name();
    Block::of(d.define(&name, |_, m| {
        m.doc(&format!(
            "{name}: smallest integer not below binary32 a (ceil(-0.5) = -0).\n\
             Combinational. Bit-exact model: kernels::fp::fp32_ceil."
        ));
        let a = m.input("a", FORMAT.bits());
        let y = ceil_logic(m, a);
        m.output("y", y);
    }))
}

/// `a · 2^-n`. A scale down never needs normalizing: a normal result keeps the fraction
/// under the exponent e − n (exact); a subnormal one is the significand (subnormal inputs
/// as they are, one place up to meet the exponent field 0) shifted right by n + 1 − e and
/// rounded to nearest even, a carry out of the fraction making the smallest normal. One
/// subtract before one right shift ([`scale2_prepare`]), then the shift and the rounding
/// ([`scale2_finish`]): a pipeline may cut between the two.
pub fn scale2_logic(m: &mut ModuleBuilder, a: Sig, n: Sig) -> Sig {
    let parts = scale2_prepare(m, a, n);
    scale2_finish(m, &parts)
}

/// What [`scale2_finish`] needs of `a · 2^-n`: `a` itself (kept when infinite or zero) and
/// whether it is NaN, the result's exponent field if normal, the significand and the places
/// it shifts if not.
#[derive(Clone, Copy, Debug)]
pub struct Scale2Parts {
    pub a: Sig,
    pub is_nan: Sig,
    pub keep: Sig,
    pub normal: Sig,
    pub exp: Sig,
    pub sig: Sig,
    pub places: Sig,
}

impl Scale2Parts {
    /// The fields, in the order [`Scale2Parts::from_fields`] takes them.
    fn fields(&self) -> [Sig; 7] {
        [
            self.a,
            self.is_nan,
            self.keep,
            self.normal,
            self.exp,
            self.sig,
            self.places,
        ]
    }

    fn from_fields([a, is_nan, keep, normal, exp, sig, places]: [Sig; 7]) -> Self {
        Scale2Parts {
            a,
            is_nan,
            keep,
            normal,
            exp,
            sig,
            places,
        }
    }

    /// The parts registered together behind a clock gate (`scale_<tag>`) that `en` opens: for
    /// a user whose operands stand still between its operations (`softmax_row`'s l and shift),
    /// so the register takes no clock edge in between. No reset: read it only after a load.
    pub fn stage_gated(
        self,
        m: &mut ModuleBuilder,
        gate: &crate::clock_gate::ClockGate,
        tag: &str,
        en: Sig,
    ) -> Self {
        let fields = self.fields();
        let q = crate::clock_gate::delay(m, gate, &format!("scale_{tag}"), cat(&fields), en);
        let mut hi = q.width();
        Self::from_fields(fields.map(|f| {
            let part = q.slice(hi - 1, hi - f.width());
            hi -= f.width();
            part
        }))
    }

    /// The parts registered when `cut` (named `<tag>_a`, …).
    pub fn stage(self, m: &mut ModuleBuilder, tag: &str, cut: bool) -> Self {
        let names = [
            "scale_a",
            "scale_nan",
            "scale_keep",
            "scale_normal",
            "scale_exp",
            "scale_sig",
            "scale_places",
        ];
        let fields = self.fields();
        let named = std::array::from_fn(|k| (names[k], fields[k]));
        Self::from_fields(arith::stage_all(m, tag, cut, named))
    }
}

/// [`scale2_logic`]'s first half: the exponents' subtracts.
pub fn scale2_prepare(m: &mut ModuleBuilder, a: Sig, n: Sig) -> Scale2Parts {
    let u = unpack(m, a, Format::FP32, "a");
    let e = u.exp.zext(10);
    let n10 = n.zext(10);
    let diff = m.name("exp", e - n10);
    let one = m.lit(10, 1);
    // Subnormal result: {1, frac} or {frac, 0} at exponent field e, shifted right n + 1 − e
    // places (at least 1 then); 26 places leave every bit below the guard bit.
    let zero1 = m.zero(1);
    let places = (n10 + one) - e;
    Scale2Parts {
        a,
        is_nan: u.is_nan,
        keep: u.is_inf | u.is_zero,
        normal: diff.ge_signed(one),
        exp: diff.trunc(8),
        sig: mux(u.exp_zero, cat(&[u.frac, zero1]), u.sig),
        places: arith::clamp(m, places, 26, 5),
    }
}

/// [`scale2_logic`]'s second half: the shift, the rounding, the special values.
pub fn scale2_finish(m: &mut ModuleBuilder, p: &Scale2Parts) -> Sig {
    let zero2 = m.zero(2);
    let shifted = arith::shift_right_sticky(m, cat(&[p.sig, zero2]), p.places);
    let frac = shifted.slice(24, 2);
    let (lsb, guard, sticky) = (shifted.bit(2), shifted.bit(1), shifted.bit(0));
    m.discard(shifted.bit(25)); // places >= 1: the top bit is always 0
    let round_up = guard & (sticky | lsb);
    let zero8 = m.zero(8);
    let sub_packed = cat(&[zero8, frac]) + round_up.zext(31);
    let normal_packed = cat(&[p.exp, p.a.slice(22, 0)]);
    let magnitude = mux(p.normal, normal_packed, sub_packed);
    let scaled = cat(&[p.a.msb(), magnitude]);
    let y = mux(p.keep, p.a, scaled);
    let nan = m.lit(32, Format::FP32.qnan());
    mux(p.is_nan, nan, y)
}

/// Defines `fp_scale2_e8m23`.
pub fn build_scale2(d: &mut Design) -> Block<Scale2, Y<u32>> {
    let name = scale2_module_name();
    Block::of(d.define(&name, |_, m| {
        m.doc(&format!(
            "{name}: binary32 a * 2^-n for n = 0..255: exact unless the result is\n\
             subnormal, then rounded to nearest even. Combinational.\n\
             Bit-exact model: kernels::fp::fp32_scale2."
        ));
        let a = m.input("a", FORMAT.bits());
        let n = m.input("n", 8);
        let y = scale2_logic(m, a, n);
        m.output("y", y);
    }))
}
