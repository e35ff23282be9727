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
