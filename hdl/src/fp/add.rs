//! `fp_add_e8m23`: binary32 addition, round to nearest even (the unit's name is its
//! format's, [`Fp32AddConfig::unit_name`]); and its wide form `fp_add_<addend>_e8m23`, which
//! adds an addend of a wider exponent range (a MAC's exact bfloat16 product, `e10m15`) to a
//! binary32 accumulator with one rounding.
//!
//! Ports: `a`, `b` (32 bits) → `y` (32 bits). Latency 0 to 6 cycles (module name
//! `fp_add_e8m23_l<latency>`), one result per cycle. Latency 1 registers the output; each
//! more cuts the logic once more ([`Fp32AddConfig::cuts`]): 2 after the alignment shift, 3
//! also after normalization, 4 also after the sum, 5 also before the alignment shift, 6 also
//! between the leading-zero count and the normalizing shift.
//!
//! Numerics (bit-exact model: `kernels::fp::fp32_add`; the wide form's
//! `kernels::fp::add_wide`): IEEE 754 round to nearest even with
//! subnormal inputs and results (no flush to zero); x + (−x) = +0 and (−0) + (−0) = −0;
//! overflow gives ±Inf; Inf − Inf and any NaN input give the canonical NaN 0x7FC00000.
//!
//! Structure: order the operands by magnitude, align the smaller one with guard/round/sticky
//! bits, add or subtract, normalize (one step right on carry, or left by the leading-zero count
//! but never below the smallest exponent, which yields subnormals), round, and pack; the
//! rounding increment is added to the packed exponent and fraction so that carries into the
//! exponent (including to Inf) come out right without extra logic.
//!
//! The wide form works on exponents biased as the addend's (10 bits for `e10m15`). An addend
//! below binary32's smallest normal is first shifted right onto binary32's subnormal grid,
//! keeping three more bits and a sticky bit; both operands are then binary32 values of a
//! wider exponent range, ordered by (exponent, significand), and the sum is normalized no
//! lower than binary32's smallest exponent, so subnormal results round once, at their own
//! grid. A pre-shifted addend's sticky bit is the lowest bit of an odd sum: no midpoint of
//! the rounding grid lies between it and the exact sum, which is why one rounding is right.
//! Exponents past binary32's largest give Inf.

use anyhow::Result;

use crate::format::Format;
use crate::fp::arith::{
    clamp, leading_zeros, select_special_f32, shift_right_sticky, stage_all, unpack, Unpacked,
};
use crate::ir::iface::Block;
use crate::operands::BinaryBlock;
use crate::{cat, mux, or_all, Design, ModuleBuilder, Sig};

/// Configuration of `fp_add_e8m23` (and of its wide form).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Fp32AddConfig {
    /// Pipeline registers between input and output: 0 to [`Fp32AddConfig::MAX_LATENCY`].
    pub latency: u32,
    /// The format of operand `b`: binary32, or a MAC's exact product format with a wider
    /// exponent ([`Format::exact_product`]). Operand `a` and the sum are binary32.
    pub addend: Format,
}

impl Fp32AddConfig {
    pub const MAX_LATENCY: u32 = 6;
    /// The format of the accumulator `a` and of the result.
    pub const FORMAT: Format = Format::FP32;

    /// The binary32 adder at `latency`.
    pub fn new(latency: u32) -> Self {
        Fp32AddConfig {
            latency,
            addend: Self::FORMAT,
        }
    }

    pub fn validate(&self) -> Result<()> {
        let f = Self::FORMAT;
        anyhow::ensure!(
            self.addend == f
                || (self.addend.exp > f.exp && self.addend.exp <= 12 && self.addend.man <= f.man),
            "{}: an addend in {} is not supported (binary32, or a format with a wider exponent \
             and at most binary32's fraction)",
            self.unit_name(),
            self.addend.name()
        );
        crate::check_latency(&self.unit_name(), self.latency, Self::MAX_LATENCY)
    }

    /// The unit's name, from its formats: `fp_add_e8m23`; `fp_add_e10m15_e8m23` for an
    /// `e10m15` addend into binary32.
    pub fn unit_name(&self) -> String {
        if self.addend == Self::FORMAT {
            crate::fp::unit_name("add", &[Self::FORMAT])
        } else {
            crate::fp::unit_name("add", &[self.addend, Self::FORMAT])
        }
    }

    /// The Verilog module's name: the unit's with the latency, `fp_add_e8m23_l1`.
    pub fn module_name(&self) -> String {
        format!("{}_l{}", self.unit_name(), self.latency)
    }

    /// Where the pipeline registers sit besides the output's (from latency 1), added in the
    /// order that keeps the stages closest in depth (measured at nangate45 and asap7): after
    /// the alignment shift, after normalization, after the sum, before the alignment shift
    /// (after the magnitude compare), after the leading-zero count.
    pub fn cuts(&self) -> AddCuts {
        let l = self.latency;
        AddCuts {
            aligned: l >= 2,
            normalized: l >= 3,
            summed: l >= 4,
            ordered: l >= 5,
            counted: l >= 6,
        }
    }
}

/// The adder's inner pipeline cuts (see [`Fp32AddConfig::cuts`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AddCuts {
    /// After ordering the operands (before the alignment shift).
    pub ordered: bool,
    /// After the alignment shift.
    pub aligned: bool,
    /// After the significands' sum.
    pub summed: bool,
    /// After the leading-zero count (before the normalizing shift).
    pub counted: bool,
    /// After normalization (before rounding).
    pub normalized: bool,
}

/// Defines `fp_add_e8m23_l<latency>` (or the wide form's module) in `d`.
pub fn build(d: &mut Design, cfg: &Fp32AddConfig) -> BinaryBlock {
    Block::of(d.define(&cfg.module_name(), |_, m| {
        if cfg.addend == Fp32AddConfig::FORMAT {
            m.doc(&format!(
                "{}: binary32 a + b, round to nearest even, subnormals supported.\n\
                 Latency {} cycle(s), one result per cycle. NaN results are 0x7FC00000.\n\
                 Bit-exact model: kernels::fp::fp32_add.",
                cfg.unit_name(),
                cfg.latency
            ));
        } else {
            m.doc(&format!(
                "{}: binary32 a + {} b, one rounding to binary32 (nearest even),\n\
                 subnormals supported. Latency {} cycle(s), one result per cycle.\n\
                 NaN results are 0x7FC00000. Bit-exact model: kernels::fp::add_wide.",
                cfg.unit_name(),
                cfg.addend.name(),
                cfg.latency
            ));
        }
        let a = m.input("a", Fp32AddConfig::FORMAT.bits());
        let b = m.input("b", cfg.addend.bits());
        let y = if cfg.addend == Fp32AddConfig::FORMAT {
            logic(m, a, b, cfg.latency)
        } else {
            logic_wide(m, a, b, cfg)
        };
        m.output("y", y);
        m.set_latency(cfg.latency);
    }))
}

/// The adder's logic with `latency` pipeline registers; returns the binary32 sum.
pub fn logic(m: &mut ModuleBuilder, a: Sig, b: Sig, latency: u32) -> Sig {
    let ua = unpack(m, a, Format::FP32, "a");
    let ub = unpack(m, b, Format::FP32, "b");
    let (a_sign, b_sign) = (ua.sign, ub.sign);
    let (subtract, is_nan, is_inf) = add_specials(m, &ua, &ub);
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
    let cuts = Fp32AddConfig::new(latency).cuts();
    let [is_nan, is_inf, zero_sign, subtract, sign, x_sig, y_sig, x_exp, align] = stage_all(
        m,
        "o",
        cuts.ordered,
        [
            ("is_nan", is_nan),
            ("is_inf", is_inf),
            ("zero_sign", zero_sign),
            ("subtract", subtract),
            ("sign", sign),
            ("x_sig", x_sig),
            ("y_sig", y_sig),
            ("x_exp", x_exp),
            ("align", align),
        ],
    );
    let grs = m.zero(3);
    let y_ext = cat(&[y_sig, grs]);
    let y_aligned = shift_right_sticky(m, y_ext, align);
    let y_aligned = m.name("y_aligned", y_aligned);

    // Optional cut after alignment.
    let cut = cuts.aligned;
    let aligned = Aligned {
        is_nan: m.stage("is_nan", is_nan, cut),
        is_inf: m.stage("is_inf", is_inf, cut),
        inf_sign: None,
        zero_sign: m.stage("zero_sign", zero_sign, cut),
        subtract: m.stage("subtract", subtract, cut),
        sign: m.stage("sign", sign, cut),
        x_ext: vec![m.stage("x_sig", x_sig, cut), grs],
        x_exp: m.stage("x_exp", x_exp, cut),
        y_aligned: m.stage("y_aligned", y_aligned, cut),
    };
    let y = add_round(m, aligned, 0, cuts);
    m.stage("y", y, latency >= 1)
}

/// The wide form's logic (`cfg.addend` wider than binary32 in its exponent); returns the
/// binary32 sum. See the module's documentation for the structure.
pub fn logic_wide(m: &mut ModuleBuilder, a: Sig, b: Sig, cfg: &Fp32AddConfig) -> Sig {
    let (f, w) = (Fp32AddConfig::FORMAT, cfg.addend);
    let ew = w.exp;
    // Exponents are biased as the addend's: binary32's exponent e is e + off.
    let off = w.bias() - f.bias();
    let ua = unpack(m, a, f, "a");
    let ub = unpack(m, b, w, "b");
    let (subtract, is_nan, is_inf) = add_specials(m, &ua, &ub);
    // Inf plus anything finite is that Inf, whatever the finite addend's magnitude.
    let inf_sign = mux(ua.is_inf, ua.sign, ub.sign);
    let inf_sign = m.name("inf_sign", inf_sign);
    let zero_sign = ua.sign & ub.sign;
    let zero_sign = m.name("zero_sign", zero_sign);

    // Both operands as binary32 values of the wider exponent range, with three bits below.
    let grs = m.zero(3);
    let a_ext = cat(&[ua.sig, grs]);
    let a_exp = ua.exp_eff.zext(ew);
    let a_exp = a_exp + off;
    let a_exp = m.name("a_exp_wide", a_exp);
    let b_ext = if w.man < f.man {
        let b_pad = m.zero(f.man - w.man);
        cat(&[ub.sig, b_pad, grs])
    } else {
        cat(&[ub.sig, grs])
    };
    // An addend below binary32's smallest normal moves onto binary32's subnormal grid.
    let min_exp = m.lit(ew, off + 1);
    let tiny = ub.exp_eff.lt(min_exp);
    let tiny = m.name("b_tiny", tiny);
    let under = min_exp - ub.exp_eff;
    let under = clamp(m, under, 31, 5);
    let zero5 = m.zero(5);
    let under = mux(tiny, under, zero5);
    let b_ext = shift_right_sticky(m, b_ext, under);
    let b_ext = m.name("b_ext", b_ext);
    let b_exp = mux(tiny, min_exp, ub.exp_eff);
    let b_exp = m.name("b_exp_wide", b_exp);

    // Order by magnitude: x is the larger, y the smaller.
    let a_mag = cat(&[a_exp, a_ext]);
    let b_mag = cat(&[b_exp, b_ext]);
    let swap = a_mag.lt(b_mag);
    let swap = m.name("swap", swap);
    let sign = mux(swap, ub.sign, ua.sign);
    let sign = m.hint("sign", sign);
    let x_ext = mux(swap, b_ext, a_ext);
    let x_ext = m.hint("x_ext", x_ext);
    let y_ext = mux(swap, a_ext, b_ext);
    let x_exp = mux(swap, b_exp, a_exp);
    let y_exp = mux(swap, a_exp, b_exp);
    let x_exp = m.name("x_exp", x_exp);
    let exp_diff = x_exp - y_exp;
    let exp_diff = m.name("exp_diff", exp_diff);
    let align = clamp(m, exp_diff, 31, 5);
    let align = m.hint("align", align);
    let cuts = cfg.cuts();
    let [is_nan, is_inf, inf_sign, zero_sign, subtract, sign, x_ext, y_ext, x_exp, align] =
        stage_all(
            m,
            "o",
            cuts.ordered,
            [
                ("is_nan", is_nan),
                ("is_inf", is_inf),
                ("inf_sign", inf_sign),
                ("zero_sign", zero_sign),
                ("subtract", subtract),
                ("sign", sign),
                ("x_ext", x_ext),
                ("y_ext", y_ext),
                ("x_exp", x_exp),
                ("align", align),
            ],
        );
    let y_aligned = shift_right_sticky(m, y_ext, align);
    let y_aligned = m.name("y_aligned", y_aligned);

    let cut = cuts.aligned;
    let aligned = Aligned {
        is_nan: m.stage("is_nan", is_nan, cut),
        is_inf: m.stage("is_inf", is_inf, cut),
        inf_sign: Some(m.stage("inf_sign", inf_sign, cut)),
        zero_sign: m.stage("zero_sign", zero_sign, cut),
        subtract: m.stage("subtract", subtract, cut),
        sign: m.stage("sign", sign, cut),
        x_ext: vec![m.stage("x_ext", x_ext, cut)],
        x_exp: m.stage("x_exp", x_exp, cut),
        y_aligned: m.stage("y_aligned", y_aligned, cut),
    };
    let y = add_round(m, aligned, off, cuts);
    m.stage("y", y, cfg.latency >= 1)
}

/// (the signs differ, the sum is NaN, the sum is ±Inf) of `a + b`: any NaN or Inf − Inf is
/// NaN; an Inf operand otherwise makes the sum Inf.
fn add_specials(m: &mut ModuleBuilder, ua: &Unpacked, ub: &Unpacked) -> (Sig, Sig, Sig) {
    let subtract = ua.sign ^ ub.sign;
    let subtract = m.name("subtract", subtract);
    let both_inf = ua.is_inf & ub.is_inf;
    let inf_minus_inf = both_inf & subtract;
    let is_nan = or_all(&[ua.is_nan, ub.is_nan, inf_minus_inf]);
    let is_nan = m.name("is_nan", is_nan);
    let is_inf = ua.is_inf | ub.is_inf;
    let is_inf = m.name("is_inf", is_inf);
    (subtract, is_nan, is_inf)
}

/// What the back end carries past the sum to the result's special cases: NaN, Inf (and its
/// sign when not the larger operand's), the sign of an exact zero, the larger operand's sign.
#[derive(Clone, Copy)]
struct Flags {
    is_nan: Sig,
    is_inf: Sig,
    inf_sign: Option<Sig>,
    zero_sign: Sig,
    sign: Sig,
}

impl Flags {
    /// The flags registered as `<name>_<tag>` when `cut`.
    fn stage(self, m: &mut ModuleBuilder, tag: &str, cut: bool) -> Flags {
        let [is_nan, is_inf, zero_sign, sign] = stage_all(
            m,
            tag,
            cut,
            [
                ("is_nan", self.is_nan),
                ("is_inf", self.is_inf),
                ("zero_sign", self.zero_sign),
                ("sign", self.sign),
            ],
        );
        Flags {
            is_nan,
            is_inf,
            inf_sign: self
                .inf_sign
                .map(|s| m.stage(&format!("inf_sign_{tag}"), s, cut)),
            zero_sign,
            sign,
        }
    }
}

/// The operands ordered and aligned: what the adder's back end takes.
struct Aligned {
    is_nan: Sig,
    is_inf: Sig,
    /// Inf's sign when it is not `sign` (the wide form's); `None`: Inf is the larger operand.
    inf_sign: Option<Sig>,
    zero_sign: Sig,
    subtract: Sig,
    /// The larger operand's sign.
    sign: Sig,
    /// The larger operand's significand with three bits below (27 bits), as the parts that
    /// concatenate to it.
    x_ext: Vec<Sig>,
    /// The larger operand's exponent, biased as binary32's plus `off`.
    x_exp: Sig,
    /// The smaller operand's significand aligned to `x_ext`, with a sticky bit 0.
    y_aligned: Sig,
}

/// The normalized sum `norm` (hidden bit at 26, guard at 2, sticky below) with its exponent,
/// rounded to nearest even and packed, or the special value the flags, an overflow or a zero
/// sum call for.
fn round_pack(
    m: &mut ModuleBuilder,
    (norm, exp): (Sig, Sig),
    overflow: Sig,
    sum_zero: Sig,
    flags: Flags,
) -> Sig {
    let Flags {
        is_nan,
        is_inf,
        inf_sign,
        zero_sign,
        sign,
    } = flags;
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
    let infinite_sign = inf_sign.map_or(sign, |s| mux(is_inf, s, sign));
    select_special_f32(
        m,
        finite,
        is_nan,
        infinite,
        infinite_sign,
        sum_zero,
        zero_sign,
    )
}

/// The back end: add or subtract, normalize, round to nearest even, pack to binary32, special
/// values. `off` is what the exponents' bias exceeds binary32's by (0 for binary32 operands);
/// `cuts` says where to register (after the sum, after normalization).
fn add_round(m: &mut ModuleBuilder, v: Aligned, off: u64, cuts: AddCuts) -> Sig {
    let Aligned {
        is_nan,
        is_inf,
        inf_sign,
        zero_sign,
        subtract,
        sign,
        x_ext,
        x_exp,
        y_aligned,
    } = v;
    let ew = x_exp.width();
    // Add or subtract in 28 bits: bit 27 is the carry, bit 26 the hidden-bit position.
    let zero1 = m.zero(1);
    let big = cat(&[&[zero1][..], &x_ext[..]].concat());
    let small = cat(&[zero1, y_aligned]);
    let invert = subtract.repeat(28);
    let small = small ^ invert;
    let carry_in = subtract.zext(28);
    let sum = big + small;
    let sum = sum + carry_in;
    let sum = m.name("sum", sum);
    // Optional cut after the sum: what the back end still needs.
    let flags = Flags {
        is_nan,
        is_inf,
        inf_sign,
        zero_sign,
        sign,
    };
    let flags = flags.stage(m, "s", cuts.summed);
    let [sum, x_exp] = stage_all(m, "s", cuts.summed, [("sum", sum), ("x_exp", x_exp)]);
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
    // binary32 operands: only a carry out of the largest exponent reaches 255.
    let carry_overflow = (off == 0).then(|| {
        let top = exp_right.eq(0xFF);
        let overflow = carry & top;
        m.name("overflow", overflow)
    });

    // No carry: left by the leading-zero count, but not below binary32's exponent 1
    // (subnormal result).
    let sum_low = sum.slice(26, 0);
    let lz = leading_zeros(m, sum_low);
    let lz = m.name("lz", lz);
    let max_left = x_exp - (off + 1);
    let max_left = m.hint("max_left", max_left);
    let lz_wide = lz.zext(ew);
    let limited = max_left.lt(lz_wide);
    let max_left5 = max_left.trunc(5);
    let left = mux(limited, max_left5, lz);
    let left = m.name("left", left);
    // Optional cut between the count and the shift.
    let c = cuts.counted;
    let flags = flags.stage(m, "c", c);
    let [sum_low, left, carry, norm_right, exp_right, x_exp, sum_zero] = stage_all(
        m,
        "c",
        c,
        [
            ("sum_low", sum_low),
            ("left", left),
            ("carry", carry),
            ("norm_right", norm_right),
            ("exp_right", exp_right),
            ("x_exp", x_exp),
            ("sum_zero", sum_zero),
        ],
    );
    let carry_overflow = carry_overflow.map(|o| m.stage("overflow_c", o, c));
    let norm_left = sum_low << left;
    let left_wide = left.zext(ew);
    let exp_left = x_exp - left_wide;

    let norm = mux(carry, norm_right, norm_left);
    let norm = m.name("norm", norm);
    let exp = mux(carry, exp_right, exp_left);
    let overflow = match carry_overflow {
        Some(overflow) => overflow,
        None => {
            let exp = m.hint("exp_wide", exp);
            let overflow = exp.ge(off + 0xFF);
            m.name("overflow", overflow)
        }
    };
    let exp = if off == 0 {
        exp
    } else {
        // exp − off in 8 bits (the overflow test above reads the bits above).
        let e = exp.trunc(8);
        e - (off % 256)
    };
    // Optional cut after normalization.
    let c = cuts.normalized;
    let flags = flags.stage(m, "n", c);
    let [norm, exp, overflow, sum_zero] = stage_all(
        m,
        "n",
        c,
        [
            ("norm", norm),
            ("exp", exp),
            ("overflow", overflow),
            ("sum_zero", sum_zero),
        ],
    );
    round_pack(m, (norm, exp), overflow, sum_zero, flags)
}
