//! Building blocks shared by the floating-point units: leading-zero count, right shift with a
//! sticky bit, and IEEE field decoding.

use crate::{bits_for, ModuleBuilder, Sig};

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
        m.cat(&[x, one, z])
    } else {
        m.cat(&[x, one])
    };
    let (_, count) = lzc_tree(m, padded);
    count
}

/// (all bits zero, leading-zero count) of a power-of-two-wide value of at least two bits.
fn lzc_tree(m: &mut ModuleBuilder, x: Sig) -> (Sig, Sig) {
    let w = x.width();
    let hi = m.slice(x, w - 1, w / 2);
    let lo = m.slice(x, w / 2 - 1, 0);
    if w == 2 {
        let zero = m.is_zero(x);
        let count = m.not(hi);
        return (zero, count);
    }
    let (hi_zero, hi_count) = lzc_tree(m, hi);
    let (lo_zero, lo_count) = lzc_tree(m, lo);
    let zero = m.and(hi_zero, lo_zero);
    // The top bit of the count says "the upper half is all zeros"; the rest comes from the
    // half that holds the leading one.
    let rest = m.mux(hi_zero, lo_count, hi_count);
    (zero, m.cat(&[hi_zero, rest]))
}

/// `x >> amount`, with the OR of all bits shifted out folded into bit 0 (the sticky bit).
/// Shifts of `x.width` or more leave only the sticky bit.
pub fn shift_right_sticky(m: &mut ModuleBuilder, x: Sig, amount: Sig) -> Sig {
    let w = x.width();
    let shifted = m.shr(x, amount);
    let shifted = m.hint("shifted", shifted);
    let ones = m.ones(w);
    let kept_mask = m.shl(ones, amount);
    let lost_mask = m.not(kept_mask);
    let lost = m.and(x, lost_mask);
    let sticky = m.any(lost);
    let sticky = m.hint("sticky", sticky);
    let top = m.slice(shifted, w - 1, 1);
    let bit0 = m.bit(shifted, 0);
    let bit0 = m.or(bit0, sticky);
    m.cat(&[top, bit0])
}

/// `min(x, limit)` as a `width`-bit value, for clamping a shift amount.
pub fn clamp(m: &mut ModuleBuilder, x: Sig, limit: u64, width: u32) -> Sig {
    let lim = m.lit(x.width(), limit);
    let over = m.gt(x, lim);
    let low = m.trunc(x, width);
    let lim_w = m.lit(width, limit);
    m.mux(over, lim_w, low)
}

/// The fields and classes of an IEEE binary value with `exp_bits` and `frac_bits`.
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

/// Splits `x` into IEEE fields; `prefix` names the exponent and fraction wires (`a` gives
/// `a_exp`, `a_frac`) and hints names for the rest (`a_is_nan`, `a_sig`, ...).
pub fn unpack(
    m: &mut ModuleBuilder,
    x: Sig,
    exp_bits: u32,
    frac_bits: u32,
    prefix: &str,
) -> Unpacked {
    assert_eq!(x.width(), 1 + exp_bits + frac_bits);
    let sign = m.msb(x);
    let exp = m.slice(x, exp_bits + frac_bits - 1, frac_bits);
    let exp = m.name(&format!("{prefix}_exp"), exp);
    let frac = m.slice(x, frac_bits - 1, 0);
    let frac = m.name(&format!("{prefix}_frac"), frac);
    let exp_zero = m.is_zero(exp);
    let exp_max = m.all(exp);
    let frac_zero = m.is_zero(frac);
    let frac_nonzero = m.not(frac_zero);
    let hidden = m.not(exp_zero);
    let sig = m.cat(&[hidden, frac]);
    let exp_hi = m.slice(exp, exp_bits - 1, 1);
    let exp_lo = m.bit(exp, 0);
    let exp_lo = m.or(exp_lo, exp_zero);
    let exp_eff = m.cat(&[exp_hi, exp_lo]);
    let is_zero = m.and(exp_zero, frac_zero);
    let is_inf = m.and(exp_max, frac_zero);
    let is_nan = m.and(exp_max, frac_nonzero);
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
    let w = sig.width();
    let ew = exp.width();
    assert!(
        w >= 24 && ew >= 10,
        "round_pack_f32 needs a 24-bit significand and a 10-bit exponent"
    );
    let one = m.lit(ew, 1);
    let normal = m.ge_signed(exp, one);
    let normal = m.hint("normal", normal);
    let max_exp = m.lit(ew, 255);
    let overflow = m.ge_signed(exp, max_exp);
    // Subnormal: shift right by 1 - exp; 31 places already move everything below the guard bit.
    let under = m.sub(one, exp);
    let limit = m_lit_signed(m, ew, 31);
    let neg_or_big = m.gt_signed(under, limit);
    let under5 = m.trunc(under, 5);
    let max5 = m.lit(5, 31);
    let under5 = m.mux(neg_or_big, max5, under5);
    let zero5 = m.zero(5);
    let shift = m.mux(normal, zero5, under5);
    let zero2 = m.zero(2);
    let ext = m.cat(&[sig, zero2]);
    let shifted = shift_right_sticky(m, ext, shift);
    let kept_hidden = m.bit(shifted, w + 1);
    m.discard(kept_hidden); // implied by the exponent field
    let frac = m.slice(shifted, w, w - 22);
    let lsb = m.bit(shifted, w - 22);
    let guard = m.bit(shifted, w - 23);
    let low = m.slice(shifted, w - 24, 0);
    let low_any = m.any(low);
    let sticky_all = m.or(low_any, sticky);
    let tie_or_above = m.or(sticky_all, lsb);
    let round_up = m.and(guard, tie_or_above);
    let round_up = m.hint("round_up", round_up);
    let exp8 = m.trunc(exp, 8);
    let zero8 = m.zero(8);
    let exp_field = m.mux(normal, exp8, zero8);
    let packed = m.cat(&[exp_field, frac]);
    let round31 = m.zext(round_up, 31);
    let packed = m.add(packed, round31);
    let inf = m.lit(31, crate::ieee::F32_INF);
    let magnitude = m.mux(overflow, inf, packed);
    m.cat(&[sign, magnitude])
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
    let sig = m.shl(u.sig, lz);
    let exp = m.zext(u.exp_eff, 10);
    let lz10 = m.zext(lz, 10);
    let exp = m.sub(exp, lz10);
    (sig, exp)
}

/// Special cases of a product: (sign, is NaN, is Inf, is zero) from the operands' classes, with
/// wire names for the flags. NaN × y and Inf × 0 are NaN; Inf × nonzero is Inf.
pub fn mul_specials(m: &mut ModuleBuilder, a: &Unpacked, b: &Unpacked) -> (Sig, Sig, Sig, Sig) {
    let sign = m.xor(a.sign, b.sign);
    let sign = m.hint("sign", sign);
    let a_zero_b_inf = m.and(a.is_zero, b.is_inf);
    let a_inf_b_zero = m.and(a.is_inf, b.is_zero);
    let is_nan = m.or_all(&[a.is_nan, b.is_nan, a_zero_b_inf, a_inf_b_zero]);
    let is_nan = m.name("is_nan", is_nan);
    let is_inf = m.or(a.is_inf, b.is_inf);
    let is_inf = m.name("is_inf", is_inf);
    let is_zero = m.or(a.is_zero, b.is_zero);
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
    let inf_bits = m.lit(31, crate::ieee::F32_INF);
    let inf = m.cat(&[inf_sign, inf_bits]);
    let zero_bits = m.zero(31);
    let zero = m.cat(&[zero_sign, zero_bits]);
    let nan = m.lit(32, crate::ieee::F32_QNAN);
    let y = m.mux(is_zero, zero, finite);
    let y = m.mux(is_inf, inf, y);
    m.mux(is_nan, nan, y)
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
    let xe = m.zext(x, xw);
    let biased = m.add_lit(xe, divisor - 1);
    let magic_s = m.lit(bits_for(magic), magic);
    let prod = m.mul(biased, magic_s);
    let q = m.slice(prod, prod.width() - 1, shift);
    let low = m.slice(prod, shift - 1, 0);
    m.discard(low);
    match q.width().cmp(&w) {
        std::cmp::Ordering::Greater => {
            // The quotient never exceeds x, so its top bits are zero.
            let high = m.slice(q, q.width() - 1, w);
            m.discard(high);
            m.trunc(q, w)
        }
        std::cmp::Ordering::Equal => q,
        std::cmp::Ordering::Less => m.zext(q, w),
    }
}
