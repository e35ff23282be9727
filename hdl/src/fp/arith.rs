//! Building blocks shared by the floating-point units: leading-zero count, right shift with a
//! sticky bit, and IEEE field decoding.

use crate::format::{Format, Specials};
use crate::{bits_for, cat, mux, or_all, ModuleBuilder, Sig};

/// Number of leading zeros of `x` (x.width when x is zero), `bits_for(x.width)` bits wide.
///
/// A balanced tree: the value is padded below with a one (so it is never all zeros) up to a
/// power of two, and each level merges the counts of two halves.
pub fn leading_zeros(m: &mut ModuleBuilder, x: Sig) -> Sig {
    let n = x.width();
    let out_width = bits_for(n as u64);
    let padded_width = 1u32 << out_width;
    let one = m.lit(1, 1);
    let padded = if padded_width - n - 1 > 0 {
        let z = m.zero(padded_width - n - 1);
        cat(&[x, one, z])
    } else {
        cat(&[x, one])
    };
    let (_, count) = lzc_tree(padded);
    count
}

/// (all bits zero, leading-zero count) of a power-of-two-wide value of at least two bits.
fn lzc_tree(x: Sig) -> (Sig, Sig) {
    let w = x.width();
    let hi = x.slice(w - 1, w / 2);
    let lo = x.slice(w / 2 - 1, 0);
    if w == 2 {
        let zero = x.is_zero();
        let count = !hi;
        return (zero, count);
    }
    let (hi_zero, hi_count) = lzc_tree(hi);
    let (lo_zero, lo_count) = lzc_tree(lo);
    let zero = hi_zero & lo_zero;
    // The top bit of the count says "the upper half is all zeros"; the rest comes from the
    // half that holds the leading one.
    let rest = mux(hi_zero, lo_count, hi_count);
    (zero, cat(&[hi_zero, rest]))
}

/// `x >> amount`, with the OR of all bits shifted out folded into bit 0 (the sticky bit).
/// Shifts of `x.width` or more leave only the sticky bit.
pub fn shift_right_sticky(m: &mut ModuleBuilder, x: Sig, amount: Sig) -> Sig {
    let w = x.width();
    let shifted = x >> amount;
    let shifted = m.hint("shifted", shifted);
    let ones = m.ones(w);
    let kept_mask = ones << amount;
    let lost_mask = !kept_mask;
    let lost = x & lost_mask;
    let sticky = lost.any();
    let sticky = m.hint("sticky", sticky);
    let top = shifted.slice(w - 1, 1);
    let bit0 = shifted.bit(0);
    let bit0 = bit0 | sticky;
    cat(&[top, bit0])
}

/// `min(x, limit)` as a `width`-bit value, for clamping a shift amount.
pub fn clamp(m: &mut ModuleBuilder, x: Sig, limit: u64, width: u32) -> Sig {
    let lim = m.lit(x.width(), limit);
    let over = x.gt(lim);
    let low = x.trunc(width);
    let lim_w = m.lit(width, limit);
    mux(over, lim_w, low)
}

/// The fields and classes of a binary floating-point value.
#[derive(Clone, Copy, Debug)]
pub struct Unpacked {
    pub sign: Sig,
    pub exp: Sig,
    pub frac: Sig,
    /// Significand with the hidden bit (0 for zeros and subnormals).
    pub sig: Sig,
    /// Biased exponent, with 1 for zeros and subnormals (their true scale).
    pub exp_eff: Sig,
    pub exp_zero: Sig,
    pub is_zero: Sig,
    pub is_inf: Sig,
    pub is_nan: Sig,
}

/// Splits `x`, a value of `f`, into its fields and classes (by `f`'s [`Specials`]: a
/// finite-only format's all-ones exponent is a normal number, and only its all-ones pattern
/// NaN); `prefix` names the exponent and fraction wires (`a` gives `a_exp`, `a_frac`) and
/// hints names for the rest (`a_is_nan`, `a_sig`, ...).
pub fn unpack(m: &mut ModuleBuilder, x: Sig, f: Format, prefix: &str) -> Unpacked {
    let (exp_bits, frac_bits) = (f.exp, f.man);
    assert_eq!(x.width(), f.bits());
    let sign = x.msb();
    let exp = x.slice(exp_bits + frac_bits - 1, frac_bits);
    let exp = m.name(&format!("{prefix}_exp"), exp);
    let frac = x.slice(frac_bits - 1, 0);
    let frac = m.name(&format!("{prefix}_frac"), frac);
    let exp_zero = exp.is_zero();
    let exp_max = exp.all();
    let frac_zero = frac.is_zero();
    let frac_nonzero = !frac_zero;
    let hidden = !exp_zero;
    let sig = cat(&[hidden, frac]);
    let exp_hi = exp.slice(exp_bits - 1, 1);
    let exp_lo = exp.bit(0);
    let exp_lo = exp_lo | exp_zero;
    let exp_eff = cat(&[exp_hi, exp_lo]);
    let is_zero = exp_zero & frac_zero;
    let (is_inf, is_nan) = match f.specials {
        Specials::Ieee => (exp_max & frac_zero, exp_max & frac_nonzero),
        Specials::FiniteSaturating => (m.zero(1), exp_max & frac.all()),
    };
    let mut h = |what: &str, s: Sig| m.hint(&format!("{prefix}_{what}"), s);
    h("exp_max", exp_max);
    h("frac_zero", frac_zero);
    h("frac_nonzero", frac_nonzero);
    h("hidden", hidden);
    Unpacked {
        sign: h("sign", sign),
        exp,
        frac,
        sig: h("sig", sig),
        exp_eff: h("exp_eff", exp_eff),
        exp_zero: h("exp_zero", exp_zero),
        is_zero: h("is_zero", is_zero),
        is_inf: h("is_inf", is_inf),
        is_nan: h("is_nan", is_nan),
    }
}

/// Rounds `sig · 2^(exp − 127 − (W − 1))` to binary32 (round to nearest even) and applies `sign`:
/// the hardware twin of `kernels::fp::round_to_f32`.
///
/// `sig` (W ≥ 24 bits) must have its leading one at bit W − 1; `exp` (two's complement, at least
/// 10 bits) is the biased exponent of that leading one; `sticky` says whether bits below `sig`
/// were already lost. Subnormal results shift right with a sticky bit; exponents of 255 and
/// above, and rounding carries past the largest finite value, give Inf.
pub fn round_pack_f32(m: &mut ModuleBuilder, sign: Sig, sig: Sig, exp: Sig, sticky: Sig) -> Sig {
    let r = round_prepare_f32(m, sig, exp, sticky);
    round_finish_f32(m, sign, r)
}

/// A binary32 rounding's first half ([`round_pack_f32`]'s): the magnitude's exponent and
/// fraction fields before the rounding increment, whether to add it, and whether the exponent
/// overflows. A pipeline may register it before [`round_finish_f32`].
pub fn round_prepare_f32(m: &mut ModuleBuilder, sig: Sig, exp: Sig, sticky: Sig) -> Rounding {
    let plan = round_plan_f32(m, exp);
    round_apply_f32(m, sig, plan, sticky)
}

/// What a binary32 rounding takes from the exponent alone: the exponent field (0 for a
/// subnormal result), the subnormal right shift, and the overflow to Inf. A pipeline that knows
/// the exponent before the significand may register it ([`ExpPlan::stage`]).
#[derive(Clone, Copy, Debug)]
pub struct ExpPlan {
    pub exp_field: Sig,
    pub shift: Sig,
    pub overflow: Sig,
}

impl ExpPlan {
    /// Registered as `<name>_<tag>` each when `cut` (see [`stage_all`]).
    pub fn stage(self, m: &mut ModuleBuilder, tag: &str, cut: bool) -> ExpPlan {
        let [exp_field, shift, overflow] = stage_all(
            m,
            tag,
            cut,
            [
                ("exp_field", self.exp_field),
                ("exp_shift", self.shift),
                ("exp_overflow", self.overflow),
            ],
        );
        ExpPlan {
            exp_field,
            shift,
            overflow,
        }
    }
}

/// [`round_prepare_f32`]'s exponent half: `exp` (two's complement, at least 10 bits) the
/// biased exponent of the significand's leading one.
pub fn round_plan_f32(m: &mut ModuleBuilder, exp: Sig) -> ExpPlan {
    let ew = exp.width();
    assert!(ew >= 10, "binary32 rounding needs a 10-bit exponent");
    let one = m.lit(ew, 1);
    let normal = exp.ge_signed(one);
    let normal = m.hint("normal", normal);
    let max_exp = m.lit(ew, 255);
    let overflow = exp.ge_signed(max_exp);
    // Subnormal: shift right by 1 - exp; 31 places already move everything below the guard bit.
    let under = one - exp;
    let limit = m_lit_signed(m, ew, 31);
    let neg_or_big = under.gt_signed(limit);
    let under5 = under.trunc(5);
    let max5 = m.lit(5, 31);
    let under5 = mux(neg_or_big, max5, under5);
    let zero5 = m.zero(5);
    let shift = mux(normal, zero5, under5);
    let exp8 = exp.trunc(8);
    let zero8 = m.zero(8);
    let exp_field = mux(normal, exp8, zero8);
    ExpPlan {
        exp_field,
        shift,
        overflow,
    }
}

/// [`round_prepare_f32`]'s significand half, given its exponent's [`ExpPlan`]: `sig` (W ≥ 24
/// bits) has its leading one at bit W − 1.
pub fn round_apply_f32(m: &mut ModuleBuilder, sig: Sig, plan: ExpPlan, sticky: Sig) -> Rounding {
    let w = sig.width();
    assert!(w >= 24, "binary32 rounding needs a 24-bit significand");
    let ExpPlan {
        exp_field,
        shift,
        overflow,
    } = plan;
    let zero2 = m.zero(2);
    let ext = cat(&[sig, zero2]);
    let shifted = shift_right_sticky(m, ext, shift);
    let kept_hidden = shifted.bit(w + 1);
    m.discard(kept_hidden); // implied by the exponent field
    let frac = shifted.slice(w, w - 22);
    let lsb = shifted.bit(w - 22);
    let guard = shifted.bit(w - 23);
    let low = shifted.slice(w - 24, 0);
    let low_any = low.any();
    let sticky_all = low_any | sticky;
    let tie_or_above = sticky_all | lsb;
    let round_up = guard & tie_or_above;
    let round_up = m.hint("round_up", round_up);
    let packed = cat(&[exp_field, frac]);
    Rounding {
        packed,
        round_up,
        overflow,
    }
}

/// A binary32 rounding between its halves: the 31-bit magnitude before the increment, the
/// increment, and the overflow to Inf.
#[derive(Clone, Copy, Debug)]
pub struct Rounding {
    pub packed: Sig,
    pub round_up: Sig,
    pub overflow: Sig,
}

impl Rounding {
    /// Registered as `<name>_<tag>` each when `cut` (see [`stage_all`]).
    pub fn stage(self, m: &mut ModuleBuilder, tag: &str, cut: bool) -> Rounding {
        let [packed, round_up, overflow] = stage_all(
            m,
            tag,
            cut,
            [
                ("packed", self.packed),
                ("round_up", self.round_up),
                ("overflow", self.overflow),
            ],
        );
        Rounding {
            packed,
            round_up,
            overflow,
        }
    }
}

/// A binary32 rounding's second half: the increment (which carries into the exponent field
/// when the fraction is all ones), the overflow to Inf, and `sign`.
pub fn round_finish_f32(m: &mut ModuleBuilder, sign: Sig, r: Rounding) -> Sig {
    let round31 = r.round_up.zext(31);
    let packed = r.packed + round31;
    let inf = m.lit(31, Format::FP32.inf());
    let magnitude = mux(r.overflow, inf, packed);
    cat(&[sign, magnitude])
}

/// A `width`-bit two's complement constant.
fn m_lit_signed(m: &mut ModuleBuilder, width: u32, value: i64) -> Sig {
    let mask = if width >= 64 {
        u64::MAX
    } else {
        (1u64 << width) - 1
    };
    m.lit(width, value as u64 & mask)
}

/// A binary32 significand normalized so its leading one is at bit 23, and the matching biased
/// exponent (10-bit two's complement, below 1 for subnormal inputs). Zero inputs give garbage:
/// callers handle zeros as special values.
pub fn normalize_f32(m: &mut ModuleBuilder, u: &Unpacked) -> (Sig, Sig) {
    let lz = leading_zeros(m, u.sig);
    let sig = u.sig << lz;
    let exp = u.exp_eff.zext(10);
    let lz10 = lz.zext(10);
    let exp = exp - lz10;
    (sig, exp)
}

/// `xs` registered as `<name>_<tag>` each (`<name>` with an empty tag) when `cut`: one
/// pipeline cut across several signals.
pub fn stage_all<const N: usize>(
    m: &mut ModuleBuilder,
    tag: &str,
    cut: bool,
    xs: [(&str, Sig); N],
) -> [Sig; N] {
    xs.map(|(name, x)| match tag {
        "" => m.stage(name, x, cut),
        t => m.stage(&format!("{name}_{t}"), x, cut),
    })
}

/// A product's fields (sign, is NaN, is Inf, is zero, exponent sum) and what travels with
/// them (`more`: significands, partial products or the product), registered as
/// `<name>_<tag>` each (`<name>` with an empty tag) when `cut`: one cut of a multiplier.
pub fn stage_fields<const N: usize>(
    m: &mut ModuleBuilder,
    tag: &str,
    cut: bool,
    fields: [Sig; 5],
    more: [(&str, Sig); N],
) -> ([Sig; 5], [Sig; N]) {
    let [sign, is_nan, is_inf, is_zero, exp_sum] = fields;
    let fields = stage_all(
        m,
        tag,
        cut,
        [
            ("sign", sign),
            ("is_nan", is_nan),
            ("is_inf", is_inf),
            ("is_zero", is_zero),
            ("exp_sum", exp_sum),
        ],
    );
    (fields, stage_all(m, tag, cut, more))
}

/// The significands' product beside the product's fields `v` (sign, is NaN, is Inf, is zero,
/// exponent sum); with `cut`, as the carry-save pair of its partial products' adder tree
/// ([`carry_save_product`]), registered with `v` (as `<name>_p`), then summed: the tree and the
/// carry-propagate adder in two stages.
pub fn split_product(
    m: &mut ModuleBuilder,
    v: [Sig; 5],
    sig_a: Sig,
    sig_b: Sig,
    cut: bool,
) -> ([Sig; 5], Sig) {
    if !cut {
        return (v, sig_a.mul_wide(sig_b));
    }
    let (sum, carry) = carry_save_product(sig_a, sig_b);
    let (v, [sum, carry]) = stage_fields(m, "p", true, v, [("pp_sum", sum), ("pp_carry", carry)]);
    (v, sum + carry)
}

/// `a · b` (unsigned, `a.width() + b.width()` bits) as two words whose sum it is: one partial
/// product per bit of `b`, reduced three to two by carry-save adders (a Wallace tree, whose depth
/// grows with the logarithm of `b`'s width) until two are left. The carry-propagate add is the
/// caller's, so that a pipeline can register between them.
pub fn carry_save_product(a: Sig, b: Sig) -> (Sig, Sig) {
    carry_save_sum(partial_products(a, b, a.width() + b.width()))
}

/// The partial products of `a · b` (unsigned), one per bit of `b`, each `width` bits.
pub fn partial_products(a: Sig, b: Sig, width: u32) -> Vec<Sig> {
    (0..b.width())
        .map(|i| (a & b.bit(i).repeat(a.width())).zext(width) << i)
        .collect()
}

/// Rows of one width reduced three to two by carry-save adders (a Wallace tree) until two are
/// left, whose sum (the caller's carry-propagate add) is the rows' sum, wrapping at the width.
pub fn carry_save_sum(mut rows: Vec<Sig>) -> (Sig, Sig) {
    while rows.len() > 2 {
        let mut next = Vec::with_capacity(rows.len() * 2 / 3 + 2);
        for group in rows.chunks(3) {
            match *group {
                [x, y, z] => {
                    next.push(x ^ y ^ z);
                    next.push(((x & y) | (x & z) | (y & z)) << 1);
                }
                _ => next.extend_from_slice(group),
            }
        }
        rows = next;
    }
    (rows[0], rows[1])
}

/// A multiplier's optional cut after the significand product: its fields `v` and the
/// product, each registered under its own name when `cut`.
pub fn stage_product(
    m: &mut ModuleBuilder,
    v: [Sig; 5],
    product: Sig,
    cut: bool,
) -> ([Sig; 5], Sig) {
    let (v, [product]) = stage_fields(m, "", cut, v, [("product", product)]);
    (v, product)
}

/// Special cases of a product: (sign, is NaN, is Inf, is zero) from the operands' classes, with
/// wire names for the flags. NaN × y and Inf × 0 are NaN; Inf × nonzero is Inf.
pub fn mul_specials(m: &mut ModuleBuilder, a: &Unpacked, b: &Unpacked) -> (Sig, Sig, Sig, Sig) {
    let sign = a.sign ^ b.sign;
    let sign = m.hint("sign", sign);
    let a_zero_b_inf = a.is_zero & b.is_inf;
    let a_inf_b_zero = a.is_inf & b.is_zero;
    let is_nan = or_all(&[a.is_nan, b.is_nan, a_zero_b_inf, a_inf_b_zero]);
    let is_nan = m.name("is_nan", is_nan);
    let is_inf = a.is_inf | b.is_inf;
    let is_inf = m.name("is_inf", is_inf);
    let is_zero = a.is_zero | b.is_zero;
    let is_zero = m.name("is_zero", is_zero);
    (sign, is_nan, is_inf, is_zero)
}

/// The binary32 result with special cases applied, in priority order: NaN (canonical), then a
/// signed Inf (`inf_sign`), then a signed zero (`zero_sign`), else `finite`.
pub fn select_special_f32(
    m: &mut ModuleBuilder,
    finite: Sig,
    is_nan: Sig,
    is_inf: Sig,
    inf_sign: Sig,
    is_zero: Sig,
    zero_sign: Sig,
) -> Sig {
    select_special(
        m,
        Format::FP32,
        finite,
        is_nan,
        is_inf,
        inf_sign,
        is_zero,
        zero_sign,
    )
}

/// [`select_special_f32`] for a result in `fmt`.
#[allow(clippy::too_many_arguments)]
pub fn select_special(
    m: &mut ModuleBuilder,
    fmt: Format,
    finite: Sig,
    is_nan: Sig,
    is_inf: Sig,
    inf_sign: Sig,
    is_zero: Sig,
    zero_sign: Sig,
) -> Sig {
    let w = fmt.bits();
    let inf_bits = m.lit(w - 1, fmt.inf());
    let inf = cat(&[inf_sign, inf_bits]);
    let zero_bits = m.zero(w - 1);
    let zero = cat(&[zero_sign, zero_bits]);
    let nan = m.lit(w, fmt.qnan());
    let y = mux(is_zero, zero, finite);
    let y = mux(is_inf, inf, y);
    mux(is_nan, nan, y)
}

/// `ceil(x / divisor)` for an unsigned `x` and a constant divisor, by multiplying with a
/// reciprocal ("magic number") and shifting: no divider. Exact for every `x.width()`-bit value:
/// with n = x + d − 1 < 2^(w+1), s = w + 1 + bits(d) and magic = ceil(2^s / d) = (2^s + e) / d
/// with 0 ≤ e < d, n·magic / 2^s = n/d + n·e/(d·2^s) and n·e < 2^s, so the floor is floor(n/d)
/// (Granlund & Montgomery 1994). Up to 20 bits the generator also checks every value; above,
/// the boundary values.
pub fn div_ceil_const(m: &mut ModuleBuilder, x: Sig, divisor: u64) -> Sig {
    let w = x.width();
    assert!(
        divisor >= 1 && w <= 32 && divisor < 1 << 32,
        "div_ceil_const: divisor >= 1, inputs and divisor up to 32 bits"
    );
    if divisor == 1 {
        return x;
    }
    // ceil(x / d) = floor((x + d - 1) / d) = floor((x + d - 1) * magic >> shift).
    let xw = w + 1;
    let shift = xw + bits_for(divisor);
    let magic = (1u128 << shift).div_ceil(divisor as u128);
    let ok = |v: u64| {
        ((v as u128 + divisor as u128 - 1) * magic) >> shift == v.div_ceil(divisor) as u128
    };
    let max = (1u64 << w) - 1;
    let exact = if w <= 20 {
        (0..=max).all(ok)
    } else {
        [
            0,
            1,
            divisor - 1,
            divisor,
            divisor + 1,
            max - divisor,
            max - 1,
            max,
        ]
        .into_iter()
        .filter(|&v| v <= max)
        .all(ok)
    };
    assert!(
        exact,
        "div_ceil_const: no exact reciprocal for {divisor} at {w} bits"
    );
    let magic = magic as u64;
    let xe = x.zext(xw);
    let biased = xe + (divisor - 1);
    let magic_s = m.lit(bits_for(magic), magic);
    let prod = biased.mul_wide(magic_s);
    let q = prod.slice(prod.width() - 1, shift);
    let low = prod.slice(shift - 1, 0);
    m.discard(low);
    match q.width().cmp(&w) {
        std::cmp::Ordering::Greater => {
            // The quotient never exceeds x, so its top bits are zero.
            let high = q.slice(q.width() - 1, w);
            m.discard(high);
            q.trunc(w)
        }
        std::cmp::Ordering::Equal => q,
        std::cmp::Ordering::Less => q.zext(w),
    }
}

/// A `width`-bit counter: `+= inc` every cycle, cleared by `clear`. No carry ripples through
/// its width in a cycle: the low part (12 bits, or `inc`'s width) adds `inc`, and its carry is
/// registered (`cy`) into the high part's increment a cycle later. The count is the high part
/// with that pending carry beside the low part: cycle for cycle the value one `width`-bit
/// register would hold (wrapping at its width).
pub fn split_counter(
    m: &mut ModuleBuilder,
    name: &str,
    width: u32,
    inc: Sig,
    clear: Option<Sig>,
) -> Sig {
    let low = inc.width().max(12).min(width);
    let lo = m.reg(&format!("{name}_lo"), low, Some(0));
    let sum = lo.q.zext(low + 1) + inc.zext(low + 1);
    let clear = clear.unwrap_or_else(|| m.zero(1));
    let zero_lo = m.zero(low);
    m.set_next(lo, mux(clear, zero_lo, sum.slice(low - 1, 0)));
    if low == width {
        m.discard(sum.bit(low));
        return lo.q;
    }
    let high = width - low;
    let cy = m.reg(&format!("{name}_cy"), 1, Some(0));
    let hi = m.reg(&format!("{name}_hi"), high, Some(0));
    let hi_now = hi.q + cy.q.zext(high);
    let (zero_hi, zero1) = (m.zero(high), m.zero(1));
    m.set_next(cy, mux(clear, zero1, sum.bit(low)));
    m.set_next(hi, mux(clear, zero_hi, hi_now));
    cat(&[hi_now, lo.q])
}
