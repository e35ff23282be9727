//! Bit-exact models of the floating-point operators the hardware implements.
//!
//! Every function here works on raw IEEE-754 bit patterns with integer arithmetic only, so the
//! model does not depend on the host FPU. The RTL in `hdl/` must equal these functions bit for bit
//! on every input. The contract, shared by all operators:
//!
//! * round to nearest, ties to even (the only rounding mode);
//! * subnormal inputs and results are supported, nothing is flushed to zero;
//! * overflow rounds to ±Inf;
//! * every NaN result is the canonical quiet NaN ([`F32_QNAN`], [`F16_QNAN`], [`Format::qnan`]
//!   in any format); NaN payloads and signs are not propagated (the hardware does not spend
//!   logic on them);
//! * an exact zero sum is +0, except (−0) + (−0) = −0.

use crate::format::Format;

/// Canonical quiet NaN in binary32.
pub const F32_QNAN: u32 = 0x7FC0_0000;
/// Canonical quiet NaN in binary16.
pub const F16_QNAN: u16 = 0x7E00;
/// +Inf in binary32.
pub const F32_INF: u32 = 0x7F80_0000;
/// +Inf in binary16.
pub const F16_INF: u16 = 0x7C00;
/// Sign bit of binary32.
pub const F32_SIGN: u32 = 0x8000_0000;
/// Sign bit of binary16.
pub const F16_SIGN: u16 = 0x8000;

/// True if `x` is a binary32 NaN.
pub fn f32_is_nan(x: u32) -> bool {
    (x & 0x7FFF_FFFF) > F32_INF
}

/// True if `x` is a binary16 NaN.
pub fn f16_is_nan(x: u16) -> bool {
    (x & 0x7FFF) > F16_INF
}

/// True if `x` is ±Inf in binary32.
pub fn f32_is_inf(x: u32) -> bool {
    (x & 0x7FFF_FFFF) == F32_INF
}

/// True if `x` is ±Inf in binary16.
pub fn f16_is_inf(x: u16) -> bool {
    (x & 0x7FFF) == F16_INF
}

/// Exact binary16 × binary16 product, returned as binary32.
///
/// The product of two 11-bit significands has at most 22 bits and the exponent of any nonzero
/// product lies in [2⁻⁴⁸, 2³²), inside binary32's normal range, so the result is exact: no
/// rounding happens. NaN × y, Inf × 0 → canonical NaN; Inf × nonzero → signed Inf; a zero factor
/// gives a zero with the XOR of the signs.
pub fn fp16_mul(a: u16, b: u16) -> u32 {
    let sign = (((a ^ b) & F16_SIGN) as u32) << 16;
    let class = |x: u16| (f16_is_nan(x), f16_is_inf(x), x & 0x7FFF == 0);
    if let Some(special) = mul_special(class(a), class(b), sign) {
        return special;
    }
    let (ma, ea) = f16_unpack(a);
    let (mb, eb) = f16_unpack(b);
    let product = ma * mb; // < 2^22
                           // Leading-one position p: value = product * 2^(ea + eb - 30 - 20)
                           //                              = 1.f * 2^(p + ea + eb - 50), biased: + 127.
    let p = 31 - product.leading_zeros();
    let exp = p + ea + eb + 77;
    let frac = (product << (23 - p)) & 0x7F_FFFF;
    sign | (exp << 23) | frac
}

/// The binary32 result of a product with a special operand, given each operand's
/// (is NaN, is Inf, is zero) and the result's sign bit; `None` when both are finite nonzero.
/// NaN × y and Inf × 0 give the canonical NaN, Inf × nonzero a signed Inf, a zero factor a zero.
fn mul_special(a: (bool, bool, bool), b: (bool, bool, bool), sign: u32) -> Option<u32> {
    let ((a_nan, a_inf, a_zero), (b_nan, b_inf, b_zero)) = (a, b);
    if a_nan || b_nan || (a_inf && b_zero) || (a_zero && b_inf) {
        Some(F32_QNAN)
    } else if a_inf || b_inf {
        Some(sign | F32_INF)
    } else if a_zero || b_zero {
        Some(sign)
    } else {
        None
    }
}

/// Significand (hidden bit included when normal) and effective biased exponent (1 for
/// subnormals) of a finite binary16 value.
fn f16_unpack(x: u16) -> (u32, u32) {
    let e = ((x >> 10) & 0x1F) as u32;
    let f = (x & 0x3FF) as u32;
    if e == 0 {
        (f, 1)
    } else {
        (f | 0x400, e)
    }
}

/// Conversion between two binary formats, `x` holding a `from` value in its low
/// `from.bits()` bits (the bits above must be zero).
///
/// Integer arithmetic only, under the module's contract: round to nearest even, subnormal inputs
/// and results supported, overflow to ±Inf (to ±the largest finite value in a saturating
/// format such as E4M3, ±Inf included), every NaN gives `to.qnan()` (payload and sign
/// dropped), signed zeros and infinities kept. A conversion to a format at least as wide in both
/// fields is exact. Supported formats have 2 to 11 exponent bits and 1 to 52 fraction bits.
pub fn convert(x: u64, from: Format, to: Format) -> u64 {
    for f in [from, to] {
        assert!(
            (2..=11).contains(&f.exp) && (1..=52).contains(&f.man),
            "unsupported format {}",
            f.name()
        );
    }
    assert!(
        x & !from.mask() == 0,
        "{x:#x} is wider than {}",
        from.name()
    );
    let sign = |negative: bool| if negative { to.sign_mask() } else { 0 };
    match decode(x, from) {
        Value::Nan => to.qnan(),
        Value::Inf(negative) => sign(negative) | to.overflow(),
        Value::Finite(negative, sig, exp) => round_to(to, sign(negative), sig, exp, false),
    }
}

/// A value of a binary format, decoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Value {
    Nan,
    /// ±Inf (true: negative).
    Inf(bool),
    /// ±sig · 2^exp, exactly (sig 0 for the zeros).
    Finite(bool, u64, i32),
}

/// `x` (a `fmt` value in its low bits) decoded: value = sig · 2^(e − bias − man), with e = 1
/// and no hidden bit for zeros and subnormals.
fn decode(x: u64, fmt: Format) -> Value {
    let negative = x & fmt.sign_mask() != 0;
    let e = (x >> fmt.man) & fmt.max_exp();
    let f = x & fmt.frac_mask();
    if fmt.is_nan(x) {
        return Value::Nan;
    }
    if fmt.is_inf(x) {
        return Value::Inf(negative);
    }
    let (sig, e) = if e == 0 {
        (f, 1)
    } else {
        (f | (1 << fmt.man), e)
    };
    Value::Finite(negative, sig, e as i32 - fmt.bias() as i32 - fmt.man as i32)
}

/// A MAC of `fmt` operands into a binary32 accumulator: `acc + a × b` with the product exact
/// (whatever its exponent: a BF16 × BF16 product can reach 2^256, or 2^-266, beyond binary32's
/// range) and one rounding to binary32, round to nearest even: a fused multiply-add of the
/// widened operands. NaN, Inf × 0 and Inf − Inf give the canonical NaN; an exact zero sum is
/// +0 unless both addends are −0 (or a −0 product meets a −0 accumulator). For FP16 operands
/// this is [`mac`]. It is the hardware's two steps: [`mul_exact`] into
/// [`Format::exact_product`], then [`add_wide`].
pub fn mac_fused(acc: u32, a: u64, b: u64, fmt: Format) -> u32 {
    let p = fmt.exact_product();
    add_wide(acc, mul_exact(a, b, fmt), p)
}

/// The exact product of two `fmt` values in [`Format::exact_product`]`(fmt)`: no rounding
/// happens (that format holds every product as a normal number). NaN × y and Inf × 0 give the
/// product format's canonical NaN, Inf × nonzero a signed Inf, a zero factor a zero with the
/// XOR of the signs. For FP16 this is [`fp16_mul`].
pub fn mul_exact(a: u64, b: u64, fmt: Format) -> u64 {
    let p = fmt.exact_product();
    let sign = |negative: bool| if negative { p.sign_mask() } else { 0 };
    match (decode(a, fmt), decode(b, fmt)) {
        (Value::Nan, _) | (_, Value::Nan) => p.qnan(),
        (Value::Inf(_), Value::Finite(_, 0, _)) | (Value::Finite(_, 0, _), Value::Inf(_)) => {
            p.qnan()
        }
        (Value::Inf(x), Value::Inf(y))
        | (Value::Inf(x), Value::Finite(y, _, _))
        | (Value::Finite(x, _, _), Value::Inf(y)) => sign(x != y) | p.inf(),
        (Value::Finite(x, m, e), Value::Finite(y, n, f)) => {
            round_to(p, sign(x != y), m * n, e + f, false)
        }
    }
}

/// `acc + p` for a binary32 accumulator and an addend `p` in the format `pfmt` (binary32, or
/// a MAC's [`Format::exact_product`], whose exponents reach beyond binary32's range both
/// ways), rounded once to binary32, round to nearest even, subnormals kept. NaN and Inf − Inf
/// give the canonical NaN; an exact zero sum is +0 unless both addends are −0. For a binary32
/// `p` this is [`fp32_add`].
pub fn add_wide(acc: u32, p: u64, pfmt: Format) -> u32 {
    let (pn, pm, pe, cn, cm, ce) = match (decode(p, pfmt), decode(acc as u64, Format::FP32)) {
        (Value::Nan, _) | (_, Value::Nan) => return F32_QNAN,
        (Value::Inf(x), Value::Inf(y)) if x != y => return F32_QNAN,
        (Value::Inf(x), _) | (_, Value::Inf(x)) => return if x { F32_NEG_INF } else { F32_INF },
        (Value::Finite(pn, pm, pe), Value::Finite(cn, cm, ce)) => (pn, pm, pe, cn, cm, ce),
    };
    let sign = |negative: bool| if negative { F32_SIGN } else { 0 };
    if pm == 0 && cm == 0 {
        return sign(pn && cn);
    }
    // Both addends in a window of 100 bits below the larger's top; bits of the smaller below
    // the window (it is then far below the result's rounding point) become a sticky remainder.
    let top = |m: u64, e: i32| {
        if m == 0 {
            i32::MIN
        } else {
            e + 64 - m.leading_zeros() as i32
        }
    };
    let base = top(pm, pe).max(top(cm, ce)) - 100;
    let place = |m: u64, e: i32| -> (i128, bool) {
        if m == 0 {
            (0, false)
        } else if e >= base {
            ((m as i128) << (e - base), false)
        } else {
            let k = (base - e).min(127) as u32;
            let m = m as u128;
            ((m >> k) as i128, m & ((1u128 << k) - 1) != 0)
        }
    };
    let ((p, p_lost), (q, q_lost)) = (place(pm, pe), place(cm, ce));
    let total = if pn { -p } else { p } + if cn { -q } else { q };
    if total == 0 && !p_lost && !q_lost {
        return 0; // exact cancellation: +0
    }
    let negative = total < 0;
    let mut mag = total.unsigned_abs();
    // The lost bits belong to the smaller addend: they add to the magnitude when its sign is
    // the sum's, and take from it otherwise ((mag − 1) plus a remainder below one unit).
    let lost_negative = if p_lost { pn } else { cn };
    let lost = p_lost || q_lost;
    if lost && lost_negative != negative {
        mag -= 1;
    }
    // At most 102 bits: narrow to 64 with the rest sticky.
    let shift = (128 - mag.leading_zeros()).saturating_sub(64);
    let sticky = lost || mag & ((1u128 << shift) - 1) != 0;
    round_to_f32(
        sign(negative),
        (mag >> shift) as u64,
        base + shift as i32,
        sticky,
    )
}

/// Exact binary16 → binary32 conversion (every binary16 value is representable).
pub fn fp16_to_fp32(x: u16) -> u32 {
    convert(x as u64, Format::FP16, Format::FP32) as u32
}

/// binary32 → binary16 with round to nearest even; overflow gives ±Inf, tiny values round to
/// binary16 subnormals or ±0.
pub fn fp32_to_fp16(x: u32) -> u16 {
    convert(x as u64, Format::FP32, Format::FP16) as u16
}

// An operand format's arithmetic on the host, as the hardware does it, at host speed. Every
// operand format up to 16 bits widens exactly to binary32.

/// `x`, an operand of `fmt`, widened (exactly) to binary32: [`convert`]'s result, by the
/// host's conversion for binary16 and by a shift for a format of binary32's exponent range
/// (bfloat16), NaNs made canonical.
#[inline]
pub fn widen(x: u16, fmt: Format) -> u32 {
    let y = if fmt == Format::FP16 {
        half::f16::from_bits(x).to_f32().to_bits()
    } else if fmt.exp == Format::FP32.exp && fmt.has_inf() {
        (x as u32) << (Format::FP32.bits() - fmt.bits())
    } else {
        return convert(x as u64, fmt, Format::FP32) as u32;
    };
    if f32_is_nan(y) {
        F32_QNAN
    } else {
        y
    }
}

/// The binary32 `x` rounded to `fmt` (nearest even, [`convert`]'s specials), by `half`'s
/// conversion where `fmt` is binary16.
#[inline]
pub fn narrow(x: u32, fmt: Format) -> u16 {
    if fmt == Format::FP16 {
        fp32_to_fp16_native(x)
    } else {
        convert(x as u64, Format::FP32, fmt) as u16
    }
}

/// binary32 addition, round to nearest even, full IEEE special-value handling (see module docs).
pub fn fp32_add(a: u32, b: u32) -> u32 {
    if f32_is_nan(a) || f32_is_nan(b) {
        return F32_QNAN;
    }
    if f32_is_inf(a) || f32_is_inf(b) {
        if f32_is_inf(a) && f32_is_inf(b) && (a ^ b) & F32_SIGN != 0 {
            return F32_QNAN;
        }
        return if f32_is_inf(a) { a } else { b };
    }
    // Order by magnitude so that |x| >= |y|; the result takes x's sign unless it is zero.
    let (x, y) = if (a & 0x7FFF_FFFF) >= (b & 0x7FFF_FFFF) {
        (a, b)
    } else {
        (b, a)
    };
    let (mx, ex) = f32_unpack(x);
    let (my, ey) = f32_unpack(y);
    let subtract = (x ^ y) & F32_SIGN != 0;
    // Three extra low bits (guard, round, sticky) carry everything rounding needs.
    let big = (mx as u64) << 3;
    let small = shift_right_sticky((my as u64) << 3, ex - ey);
    let sum = if subtract { big - small } else { big + small };
    if sum == 0 {
        // Exact zero: +0 under round-to-nearest, except (-0) + (-0).
        return a & b & F32_SIGN;
    }
    let sign = x & F32_SIGN;
    // Normalize so the leading one sits at bit 26 (the hidden-bit position of `big`).
    let (norm, exp) = if sum >> 27 != 0 {
        (shift_right_sticky(sum, 1), ex + 1)
    } else {
        let lz = sum.leading_zeros() - (64 - 27);
        // Never shift below the smallest normal exponent: what remains is a subnormal.
        let shift = lz.min(ex - 1);
        (sum << shift, ex - shift)
    };
    if exp >= 0xFF {
        return sign | F32_INF;
    }
    let exp_field = if norm >> 26 != 0 { exp } else { 0 };
    let kept = (norm >> 3) as u32;
    let guard = norm & 0b100 != 0;
    let sticky = norm & 0b011 != 0;
    let round_up = guard && (sticky || kept & 1 == 1);
    // Same packed-increment trick as round_to: carries into the exponent are the IEEE result.
    let packed = (exp_field << 23) | (kept & 0x7F_FFFF);
    sign | (packed + round_up as u32)
}

/// Significand (hidden bit included when normal) and effective biased exponent (1 for zeros and
/// subnormals) of a finite binary32 value.
fn f32_unpack(x: u32) -> (u32, u32) {
    let e = (x >> 23) & 0xFF;
    let f = x & 0x7F_FFFF;
    if e == 0 {
        (f, 1)
    } else {
        (f | 0x80_0000, e)
    }
}

/// `x >> amount` with the OR of every bit shifted out folded into bit 0 (the sticky bit).
fn shift_right_sticky(x: u64, amount: u32) -> u64 {
    if amount == 0 {
        return x;
    }
    if amount >= 64 {
        return (x != 0) as u64;
    }
    let lost = x & ((1u64 << amount) - 1);
    (x >> amount) | (lost != 0) as u64
}

/// The PE's multiply-accumulate: `acc + a × b` with the exact FP16 product and one FP32 rounding.
///
/// Because the product is exact, this equals a fused multiply-add of the widened inputs.
pub fn mac(acc: u32, a: u16, b: u16) -> u32 {
    fp32_add(acc, fp16_mul(a, b))
}

/// [`mac`] on the host's FPU, for speed where the model runs long: `acc + a × b` with `a` and
/// `b` already widened to FP32 (`fp16_to_fp32`, exact). The product of two FP16 values is
/// exact in FP32 (22 significant bits at most, exponents within range), and the host's FP32
/// addition (IEEE-754, round to nearest even, subnormals kept: Rust never sets flush-to-zero)
/// is this module's, but for NaN bits: a NaN stays NaN through every later addition, so a
/// chain of these equals a chain of [`mac`] once its result passes [`canonical_nan`].
/// `mac_native_matches_mac` holds it to [`mac`] on corner cases and random bit patterns.
#[inline]
pub fn mac_native(acc: f32, a: f32, b: f32) -> f32 {
    acc + a * b
}

/// `x`'s bits, any NaN as the canonical [`F32_QNAN`].
#[inline]
pub fn canonical_nan(x: f32) -> u32 {
    if x.is_nan() {
        F32_QNAN
    } else {
        x.to_bits()
    }
}

// The host FPU's forms of this module's binary32 operations, for speed where the model runs
// long. Each is bit-identical to its model (IEEE-754 round to nearest even, subnormals kept,
// any NaN as the canonical one): the model's proptests below use them as their oracles.

/// [`fp32_add`] on the host's FPU.
#[inline]
pub fn fp32_add_native(a: u32, b: u32) -> u32 {
    canonical_nan(f32::from_bits(a) + f32::from_bits(b))
}

/// [`fp32_mul`] on the host's FPU.
#[inline]
pub fn fp32_mul_native(a: u32, b: u32) -> u32 {
    canonical_nan(f32::from_bits(a) * f32::from_bits(b))
}

/// [`fp32_scale2`] on the host's FPU: the product x · 2^-n is exact in binary64 (its range
/// reaches 2^-1074) and rounds once to binary32.
#[inline]
pub fn fp32_scale2_native(x: u32, n: u8) -> u32 {
    let pow = f64::from_bits((1023 - n as u64) << 52); // 2^-n, normal for n <= 255
    canonical_nan((f32::from_bits(x) as f64 * pow) as f32)
}

/// [`fp32_to_fp16`] by `half`'s conversion (round to nearest even; any NaN as [`F16_QNAN`]).
#[inline]
pub fn fp32_to_fp16_native(x: u32) -> u16 {
    let h = half::f16::from_f32(f32::from_bits(x));
    if h.is_nan() {
        F16_QNAN
    } else {
        h.to_bits()
    }
}

/// The value the PE's accumulator starts from when a MAC clears it: −0, the identity of
/// addition for every value including −0 itself.
pub const ACC_CLEAR: u32 = F32_SIGN;

/// −Inf in binary32.
pub const F32_NEG_INF: u32 = 0xFF80_0000;
/// 1.0 in binary32.
pub const F32_ONE: u32 = 0x3F80_0000;

/// Rounds the positive value `(sig + ε) · 2^exp` to binary32 with round to nearest even, where
/// ε is an infinitesimal present when `sticky` (bits already lost below `sig`), and applies
/// `sign`. Handles subnormal results and overflow to Inf. Shared by the multiply, reciprocal,
/// power-of-two scaling and exp2 models.
pub fn round_to_f32(sign: u32, sig: u64, exp: i32, sticky: bool) -> u32 {
    round_to(Format::FP32, sign as u64, sig, exp, sticky) as u32
}

/// Rounds the positive value `(sig + ε) · 2^exp` to the format `to` with round to nearest even,
/// where ε is an infinitesimal present when `sticky` (bits already lost below `sig`), and applies
/// `sign` (0 or `to.sign_mask()`). Handles subnormal results (nothing is flushed) and overflow
/// (to Inf, or to the largest finite value in a saturating format); a zero `sig` gives a signed
/// zero.
pub fn round_to(to: Format, sign: u64, sig: u64, exp: i32, sticky: bool) -> u64 {
    if sig == 0 {
        // Only a sticky remainder: below half the smallest subnormal.
        return sign;
    }
    let lead = 63 - sig.leading_zeros() as i32;
    let biased = lead + exp + to.bias() as i32;
    if biased > (to.emax() + to.bias() as i64) as i32 {
        return sign | to.overflow();
    }
    // Keep man + 1 significant bits, fewer for a subnormal result.
    let shift = lead - to.man as i32 + if biased < 1 { 1 - biased } else { 0 };
    let (kept, round_up) = if shift <= 0 {
        (sig << -shift, false)
    } else {
        // Every shift past 65 rounds like 65 does: nothing kept, the remainder below half.
        let shift = shift.min(65) as u32;
        let wide = sig as u128;
        let kept = (wide >> shift) as u64;
        let rest = wide & ((1u128 << shift) - 1);
        let half = 1u128 << (shift - 1);
        let above = rest > half || (rest == half && sticky);
        let tie = rest == half && !sticky;
        (kept, above || (tie && kept & 1 == 1))
    };
    let packed = if biased >= 1 {
        ((biased as u64) << to.man) | (kept & to.frac_mask())
    } else {
        kept
    };
    // Adding the rounding increment to the packed {exponent, fraction} carries into the exponent
    // when the fraction overflows, turns the largest subnormal into the smallest normal, and the
    // largest finite value into Inf: all three are the IEEE results. Past the largest finite
    // value (a carry into Inf, or into E4M3's NaN) is overflow.
    let rounded = packed + round_up as u64;
    sign | if rounded > to.max_finite_bits() {
        to.overflow()
    } else {
        rounded
    }
}

/// Significand normalized to [2^23, 2^24) and the matching (possibly < 1) biased exponent of a
/// finite nonzero binary32 value.
fn f32_normalized(x: u32) -> (u64, i32) {
    let (m, e) = f32_unpack(x);
    let lz = m.leading_zeros() as i32 - 8;
    ((m as u64) << lz, e as i32 - lz)
}

/// binary32 multiplication, round to nearest even (subnormals, ±0, ±Inf; NaN and Inf × 0 give
/// the canonical NaN).
pub fn fp32_mul(a: u32, b: u32) -> u32 {
    let sign = (a ^ b) & F32_SIGN;
    let class = |x: u32| (f32_is_nan(x), f32_is_inf(x), x & 0x7FFF_FFFF == 0);
    if let Some(special) = mul_special(class(a), class(b), sign) {
        return special;
    }
    let (ma, ea) = f32_normalized(a);
    let (mb, eb) = f32_normalized(b);
    // value = ma·2^(ea-150) · mb·2^(eb-150)
    round_to_f32(sign, ma * mb, ea + eb - 300, false)
}

/// IEEE maximum: NaN if either input is NaN (canonical), −0 < +0, −Inf is the identity.
pub fn fp32_max(a: u32, b: u32) -> u32 {
    if f32_is_nan(a) || f32_is_nan(b) {
        return F32_QNAN;
    }
    if f32_order_key(a) >= f32_order_key(b) {
        a
    } else {
        b
    }
}

/// A key whose unsigned order is binary32's total order on non-NaN values (−0 below +0).
pub fn f32_order_key(x: u32) -> u32 {
    if x & F32_SIGN != 0 {
        !x
    } else {
        x | F32_SIGN
    }
}

/// Smallest integer not below `x`, as binary32 (ceil(−0.5) = −0; NaN gives the canonical NaN).
pub fn fp32_ceil(x: u32) -> u32 {
    if f32_is_nan(x) {
        return F32_QNAN;
    }
    let e = ((x >> 23) & 0xFF) as i32 - 127;
    let negative = x & F32_SIGN != 0;
    if x & 0x7FFF_FFFF == 0 || e >= 23 {
        return x; // zero, Inf, or already an integer
    }
    if e < 0 {
        // 0 < |x| < 1
        return if negative { F32_SIGN } else { F32_ONE };
    }
    let mask = (1u32 << (23 - e)) - 1;
    if x & mask == 0 {
        x
    } else if negative {
        x & !mask
    } else {
        (x & !mask) + (mask + 1)
    }
}

/// `x · 2^−n`: exact unless the result is subnormal, then rounded to nearest even.
pub fn fp32_scale2(x: u32, n: u8) -> u32 {
    if f32_is_nan(x) {
        return F32_QNAN;
    }
    if f32_is_inf(x) || x & 0x7FFF_FFFF == 0 {
        return x;
    }
    let (m, e) = f32_normalized(x);
    round_to_f32(x & F32_SIGN, m, e - 150 - n as i32, false)
}

/// Correctly rounded (round to nearest even) binary32 reciprocal: 1/±0 = ±Inf, 1/±Inf = ±0,
/// NaN gives the canonical NaN; subnormal inputs and results are supported.
pub fn fp32_recip(x: u32) -> u32 {
    let sign = x & F32_SIGN;
    if f32_is_nan(x) {
        return F32_QNAN;
    }
    if f32_is_inf(x) {
        return sign;
    }
    if x & 0x7FFF_FFFF == 0 {
        return sign | F32_INF;
    }
    let (m, e) = f32_normalized(x);
    // 1 / (m·2^(e-150)) = (2^50 / m) · 2^(100 - e); the quotient has 27 bits, the remainder
    // is the sticky bit.
    let num = 1u64 << 50;
    round_to_f32(sign, num / m, 100 - e, !num.is_multiple_of(m))
}

/// exp2's table: 2^(k/64) for k = 0..=64 in 1.23 fixed point, rounded to nearest.
pub fn exp2_table() -> [u32; 65] {
    std::array::from_fn(|k| ((k as f64 / 64.0).exp2() * (1u64 << 23) as f64).round() as u32)
}

/// [`exp2_table`], computed once (the model calls exp2 once per score).
static EXP2_TABLE: std::sync::LazyLock<[u32; 65]> = std::sync::LazyLock::new(exp2_table);

/// 2^x for binary32 x (one result per cycle in hardware; see `hdl::softmax::exp2`).
///
/// x = n + f with n = floor(x) and f in [0, 1) taken in fixed point with 24 fraction bits
/// (floor of the exact product); 2^f = T[k] + (T[k+1] − T[k]) · r / 2^18, with k the top 6 bits of
/// f and r the low 18 bits (table of 65 entries, linear interpolation, product truncated);
/// the result is 2^n times that, rounded to nearest even only where it is subnormal.
/// NaN → canonical NaN; x ≥ 128 → +Inf; x ≤ −152 (and −Inf) → +0. Relative error below 2^-14
/// wherever the result is normal.
pub fn exp2(x: u32) -> u32 {
    if f32_is_nan(x) {
        return F32_QNAN;
    }
    let negative = x & F32_SIGN != 0;
    let mag = x & 0x7FFF_FFFF;
    if !negative && mag >= 0x4300_0000 {
        return F32_INF; // x >= 128
    }
    if negative && mag >= 0x4318_0000 {
        return 0; // x <= -152
    }
    // X = floor(x · 2^24) as a signed integer: |x| < 152 fits in 8 + 24 bits.
    let (m, e) = f32_unpack(mag);
    let fixed: i64 = if mag == 0 {
        0
    } else {
        let sh = e as i32 - 126; // value · 2^24 = m · 2^(e - 126)
        let (q, inexact) = if sh >= 0 {
            ((m as i64) << sh, false)
        } else if -sh >= 63 {
            (0, true)
        } else {
            ((m as i64) >> -sh, (m as i64) & ((1i64 << -sh) - 1) != 0)
        };
        if negative {
            -(q + inexact as i64)
        } else {
            q
        }
    };
    let (n, y) = exp2_split(fixed);
    round_to_f32(0, y, n - 23, false)
}

/// exp2's fixed point X = floor(x · 2^24) as (n, y): n = floor(x), and y the table's value of
/// 2^f (f = X's 24 fraction bits) by linear interpolation, in 1.23 fixed point (the result is
/// y · 2^(n − 23) before its rounding).
#[inline]
fn exp2_split(fixed: i64) -> (i32, u64) {
    let n = (fixed >> 24) as i32;
    let f = (fixed & 0xFF_FFFF) as u32;
    let (k, r) = ((f >> 18) as usize, (f & 0x3_FFFF) as u64);
    let t = &*EXP2_TABLE;
    (n, t[k] as u64 + (((t[k + 1] - t[k]) as u64 * r) >> 18))
}

/// [`exp2`] with its two conversions on the host's FPU: the fixed-point split (x · 2^24 is
/// exact in binary64, and its floor is the model's; for a negative x the model's
/// −(q + inexact) is that floor too) and the final rounding (y · 2^(n−23) is exact in
/// binary64, y < 2^25, and one conversion to binary32 rounds it to nearest even, subnormals
/// included, as `round_to_f32` does). The table and its interpolation are the model's.
/// `exp2_native_matches_exp2` holds it to [`exp2`] (and `--full`, every binary32 input).
#[inline]
pub fn exp2_native(x: u32) -> u32 {
    let v = f32::from_bits(x);
    if v.is_nan() {
        return F32_QNAN;
    }
    if v >= 128.0 {
        return F32_INF;
    }
    if v <= -152.0 {
        return 0;
    }
    // The floor by truncation (|x · 2^24| < 2^32): `f64::floor` is a library call without
    // SSE4.1.
    let scaled = v as f64 * (1u64 << 24) as f64;
    let cut = scaled as i64;
    let (n, y) = exp2_split(cut - ((cut as f64) > scaled) as i64);
    // 2^(n − 23), normal in binary64: n − 23 ≥ −175.
    let pow = f64::from_bits(((1023 + n - 23) as u64) << 52);
    ((y as f64 * pow) as f32).to_bits()
}

/// log2's table: log2(1 + k/64) for k = 0..=64 in 0.30 fixed point, rounded to nearest.
pub fn log2_table() -> [u32; 65] {
    std::array::from_fn(|k| ((1.0 + k as f64 / 64.0).log2() * (1u64 << 30) as f64).round() as u32)
}

/// [`log2_table`], computed once.
static LOG2_TABLE: std::sync::LazyLock<[u32; 65]> = std::sync::LazyLock::new(log2_table);

/// log2(x) for binary32 x (the row engine's one log per query row, for the log-sum-exp the
/// backward pass reads).
///
/// x = 2^E · (1 + f) with f's 23 bits (subnormals normalized first); log2(1 + f) =
/// T[k] + (T[k+1] − T[k]) · r / 2^17, with k the top 6 bits of f and r the low 17 bits (table
/// of 65 entries in 0.30 fixed point, linear interpolation, product truncated); the result
/// E + that, a fixed-point number with 30 fraction bits, rounded once to nearest even.
/// NaN and negative x → canonical NaN; ±0 → −Inf; +Inf → +Inf. Absolute error below 2^-14
/// (the interpolation's; `log2_is_within_its_bound`).
pub fn fp32_log2(x: u32) -> u32 {
    if f32_is_nan(x) || (x & F32_SIGN != 0 && x != F32_SIGN) {
        return F32_QNAN;
    }
    if x & 0x7FFF_FFFF == 0 {
        return F32_NEG_INF;
    }
    if x == F32_INF {
        return F32_INF;
    }
    let (m, e) = f32_normalized(x);
    let f = (m as u32) & 0x7F_FFFF;
    let (k, r) = ((f >> 17) as usize, (f & 0x1_FFFF) as u64);
    let t = &*LOG2_TABLE;
    let y = t[k] as i64 + (((t[k + 1] - t[k]) as u64 * r) >> 17) as i64;
    let fixed = ((e - 127) as i64) * (1i64 << 30) + y;
    let sign = if fixed < 0 { F32_SIGN } else { 0 };
    round_to_f32(sign, fixed.unsigned_abs(), -30, false)
}

#[cfg(test)]
mod tests {
    use super::*;
    use half::f16;
    use proptest::prelude::*;

    fn same(model: u32, oracle: f32) -> bool {
        if oracle.is_nan() {
            model == F32_QNAN
        } else {
            model == oracle.to_bits()
        }
    }

    fn same16(model: u16, oracle: f16) -> bool {
        if oracle.is_nan() {
            model == F16_QNAN
        } else {
            model == oracle.to_bits()
        }
    }

    #[test]
    fn fp16_to_fp32_matches_half_exhaustively() {
        for x in 0..=u16::MAX {
            let oracle = f16::from_bits(x).to_f32();
            assert!(same(fp16_to_fp32(x), oracle), "x={x:#06x}");
        }
    }

    #[test]
    fn fp16_mul_matches_f32_product_for_every_a_against_sampled_b() {
        // Every a against 600 b values (all special classes plus a stride through the space).
        let mut bs: Vec<u16> = (0..=u16::MAX).step_by(113).collect();
        bs.extend([
            0x0000, 0x8000, 0x0001, 0x03FF, 0x0400, 0x7BFF, 0x7C00, 0xFC00, 0x7E00,
        ]);
        for a in 0..=u16::MAX {
            for &b in &bs {
                let oracle = f16::from_bits(a).to_f32() * f16::from_bits(b).to_f32();
                assert!(same(fp16_mul(a, b), oracle), "a={a:#06x} b={b:#06x}");
            }
        }
    }

    #[test]
    fn fp32_to_fp16_matches_half_at_every_rounding_boundary() {
        // For every binary16 value h, test the f32 values around the midpoints to its neighbours.
        for h in 0..=0x7C00u16 {
            let lo = f16::from_bits(h).to_f32() as f64;
            let hi = if h == 0x7BFF {
                65520.0 // the overflow threshold: half way to 2^16 in binary16 terms
            } else {
                f16::from_bits(h + 1).to_f32() as f64
            };
            let mid = ((lo + hi) / 2.0) as f32;
            for x in [
                mid.to_bits() - 1,
                mid.to_bits(),
                mid.to_bits() + 1,
                lo.to_bits_f32(),
            ] {
                for s in [0, F32_SIGN] {
                    let v = x | s;
                    let oracle = f16::from_f32(f32::from_bits(v));
                    assert!(same16(fp32_to_fp16(v), oracle), "x={v:#010x}");
                }
            }
        }
    }

    trait ToBitsF32 {
        fn to_bits_f32(self) -> u32;
    }
    impl ToBitsF32 for f64 {
        fn to_bits_f32(self) -> u32 {
            (self as f32).to_bits()
        }
    }

    /// binary32 specials: ±0, the smallest and largest subnormals, the smallest normal, ±1,
    /// the largest finite values, ±Inf, NaNs, half an ulp of 1.0 and an ulp.
    const F32_SPECIALS: [u32; 16] = [
        0x0000_0000,
        0x8000_0000,
        0x0000_0001,
        0x8000_0001,
        0x007F_FFFF,
        0x0080_0000,
        0x3F80_0000,
        0xBF80_0000,
        0x7F7F_FFFF,
        0xFF7F_FFFF,
        0x7F80_0000,
        0xFF80_0000,
        0x7FC0_0000,
        0x7F80_0001,
        0x3380_0000, // 2^-24: half an ulp of 1.0
        0x3400_0000,
    ];

    #[test]
    fn fp32_add_special_values() {
        let specials = F32_SPECIALS;
        for &a in &specials {
            for &b in &specials {
                let oracle = f32::from_bits(a) + f32::from_bits(b);
                assert!(same(fp32_add(a, b), oracle), "a={a:#010x} b={b:#010x}");
            }
        }
    }

    /// The host-FPU MAC against the integer one on the specials of both operands: ±0, the
    /// smallest and largest subnormals and normals, ±Inf, NaNs (the FP16 product of two
    /// smallest subnormals is 2^-48, far inside FP32's range; 65504² far below its max).
    /// The host's forms against the models on every pair of special values.
    #[test]
    fn natives_match_the_models_on_special_values() {
        for &a in &F32_SPECIALS {
            assert_eq!(fp32_to_fp16(a), fp32_to_fp16_native(a), "{a:#010x}");
            for n in [0u8, 1, 24, 127, 149, 150, 255] {
                assert_eq!(fp32_scale2(a, n), fp32_scale2_native(a, n), "{a:#010x} {n}");
            }
            for &b in &F32_SPECIALS {
                assert_eq!(fp32_add(a, b), fp32_add_native(a, b), "{a:#010x} {b:#010x}");
                assert_eq!(fp32_mul(a, b), fp32_mul_native(a, b), "{a:#010x} {b:#010x}");
            }
        }
    }

    #[test]
    fn mac_native_matches_mac_on_special_values() {
        let acc = F32_SPECIALS;
        let h = [
            0x0000u16, 0x8000, 0x0001, 0x8001, 0x03FF, 0x0400, 0x3C00, 0xBC00, 0x7BFF, 0xFBFF,
            0x7C00, 0xFC00, 0x7E00, 0xFC01,
        ];
        let w = |x: u16| f32::from_bits(fp16_to_fp32(x));
        for &c in &acc {
            for &a in &h {
                for &b in &h {
                    let native = canonical_nan(mac_native(f32::from_bits(c), w(a), w(b)));
                    assert_eq!(native, mac(c, a, b), "acc={c:#010x} a={a:#06x} b={b:#06x}");
                }
            }
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 200_000, failure_persistence: None, ..ProptestConfig::default() })]

        #[test]
        fn fp32_add_matches_f32(a in any::<u32>(), b in any::<u32>(), near in 0u32..64, delta in 0u32..30) {
            // The oracle is the host's addition (`fp32_add_native`, the fast model's).
            prop_assert_eq!(fp32_add(a, b), fp32_add_native(a, b));
            // Nearby magnitudes: cancellation and ties.
            let c = (a ^ F32_SIGN).wrapping_add(near).wrapping_sub(32);
            prop_assert_eq!(fp32_add(a, c), fp32_add_native(a, c), "a={:#010x} c={:#010x}", a, c);
            // Exponent distance delta: exercise alignment and the sticky bit.
            let d = (b & 0x807F_FFFF) | (((a >> 23) & 0xFF).saturating_sub(delta) << 23);
            prop_assert_eq!(fp32_add(a, d), fp32_add_native(a, d), "a={:#010x} d={:#010x}", a, d);
        }

        #[test]
        fn fp32_to_fp16_matches_half(x in any::<u32>()) {
            prop_assert!(same16(fp32_to_fp16(x), f16::from_f32(f32::from_bits(x))));
            prop_assert_eq!(fp32_to_fp16(x), fp32_to_fp16_native(x));
        }

        #[test]
        fn mac_native_matches_mac(acc in any::<u32>(), a in any::<u16>(), b in any::<u16>()) {
            let w = |x: u16| f32::from_bits(fp16_to_fp32(x));
            let native = canonical_nan(mac_native(f32::from_bits(acc), w(a), w(b)));
            prop_assert_eq!(native, mac(acc, a, b), "acc={:#010x} a={:#06x} b={:#06x}", acc, a, b);
        }

        #[test]
        fn mac_is_fused_multiply_add_of_widened_inputs(acc in any::<u32>(), a in any::<u16>(), b in any::<u16>()) {
            let wa = f16::from_bits(a).to_f32();
            let wb = f16::from_bits(b).to_f32();
            prop_assert!(same(mac(acc, a, b), wa.mul_add(wb, f32::from_bits(acc))));
        }
    }

    /// `mac_fused`'s oracle: the host's fused multiply-add of the widened operands (BF16 and
    /// FP16 widen to binary32 exactly), any NaN as the canonical one.
    fn fma_oracle(acc: u32, a: u64, b: u64, fmt: Format) -> u32 {
        let w = |x: u64| f32::from_bits(convert(x, fmt, Format::FP32) as u32);
        canonical_nan(w(a).mul_add(w(b), f32::from_bits(acc)))
    }

    /// The BF16 MAC at the extremes: products past binary32's range both ways (2^254 and
    /// 2^-266 exact, then one rounding), products that cancel the accumulator exactly,
    /// overflow to Inf, Inf × 0 and Inf − Inf, signed zeros, and every pair of BF16 specials.
    #[test]
    fn mac_fused_bf16_extremes() {
        let bf = |x: f32| (x.to_bits() >> 16) as u64;
        let max = 0x7F7Fu64; // BF16's largest finite, 3.39e38
        let min_sub = 0x0001u64; // 2^-133
        let cases = [
            (0u32, max, max),                         // 1.15e77: Inf
            (F32_NEG_INF, max, max),                  // −Inf + Inf: NaN
            (f32::MAX.to_bits(), bf(1.0), bf(1.0)),   // max + 1: max
            (0, min_sub, min_sub),                    // 2^-266: +0
            (0x8000_0000, min_sub | 0x8000, min_sub), // −0 + (−2^-266): −0
            (1, min_sub, min_sub),                    // 2^-149 + 2^-266: 2^-149
            (1 | F32_SIGN, bf(1.0), bf(1.0)),         // 1 − 2^-149: 1
            (0x3F80_0000, bf(-1.0), bf(1.0)),         // 1 − 1: +0
            (0x8000_0000, bf(-0.0), bf(1.0)),         // −0 + −0: −0
            (0, bf(f32::INFINITY), 0),                // Inf × 0: NaN
        ];
        for (acc, a, b) in cases {
            assert_eq!(
                mac_fused(acc, a, b, Format::BF16),
                fma_oracle(acc, a, b, Format::BF16),
                "acc={acc:#010x} a={a:#06x} b={b:#06x}"
            );
        }
        let specials = [
            0u64, 0x8000, 0x0001, 0x8001, 0x007F, 0x0080, 0x3F80, 0xBF80, 0x7F7F, 0xFF7F, 0x7F80,
            0xFF80, 0x7FC0, 0xFF81,
        ];
        for &c in &F32_SPECIALS {
            for &a in &specials {
                for &b in &specials {
                    assert_eq!(
                        mac_fused(c, a, b, Format::BF16),
                        fma_oracle(c, a, b, Format::BF16)
                    );
                }
            }
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 200_000, failure_persistence: None, ..ProptestConfig::default() })]

        #[test]
        fn mac_fused_matches_the_hosts_fma(acc in any::<u32>(), a in any::<u16>(), b in any::<u16>(), ea in 0u32..=30, near in 0u32..64) {
            let (a, b) = (a as u64, b as u64);
            prop_assert_eq!(mac_fused(acc, a, b, Format::BF16), fma_oracle(acc, a, b, Format::BF16));
            // FP16 operands: the PE's `mac`.
            prop_assert_eq!(mac_fused(acc, a, b, Format::FP16), mac(acc, a as u16, b as u16));
            // An accumulator near the product (cancellation, ties): the product's bits, nudged.
            let p = fma_oracle(0, a, b, Format::BF16);
            let c = (p ^ F32_SIGN).wrapping_add(near).wrapping_sub(32);
            prop_assert_eq!(mac_fused(c, a, b, Format::BF16), fma_oracle(c, a, b, Format::BF16), "c={:#010x}", c);
            // Exponents spread across both ranges.
            let a2 = (a & 0x807F) | ((ea * 8 + (a as u32 & 7)) as u64) << 7;
            prop_assert_eq!(mac_fused(acc, a2, b, Format::BF16), fma_oracle(acc, a2, b, Format::BF16), "a={:#06x}", a2);
        }

        /// The MAC's two steps on their own: the product exact (its value, read back, is the
        /// f64 product of the operands, which f64 holds exactly), FP16's product is
        /// `fp16_mul`'s, and the wide addition of a binary32 addend is `fp32_add`.
        #[test]
        fn mul_exact_and_add_wide_are_the_units(a in any::<u16>(), b in any::<u16>(), x in any::<u32>(), y in any::<u32>(), ea in 0u32..=30) {
            let a2 = (a as u64 & 0x807F) | ((ea * 8 + (a as u32 & 7)) as u64) << 7;
            let (p, bf) = (Format::BF16.exact_product(), Format::BF16);
            for a in [a as u64, a2] {
                let prod = mul_exact(a, b as u64, bf);
                let v = |x: u64, f: Format| f64::from_bits(convert(x, f, Format::FP64));
                let want = v(a, bf) * v(b as u64, bf);
                if want.is_nan() {
                    prop_assert_eq!(prod, p.qnan());
                } else {
                    prop_assert_eq!(v(prod, p).to_bits(), want.to_bits(), "a={:#06x} b={:#06x}", a, b);
                }
            }
            prop_assert_eq!(mul_exact(a as u64, b as u64, Format::FP16), fp16_mul(a, b) as u64);
            prop_assert_eq!(add_wide(x, y as u64, Format::FP32), fp32_add(x, y), "x={:#010x} y={:#010x}", x, y);
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 200_000, failure_persistence: None, ..ProptestConfig::default() })]

        #[test]
        fn fp32_mul_matches_f32(a in any::<u32>(), b in any::<u32>(), ea in 0u32..=254, eb in 0u32..=254) {
            prop_assert_eq!(fp32_mul(a, b), fp32_mul_native(a, b));
            // Exponents chosen to hit overflow, underflow and the subnormal boundary.
            let a2 = (a & 0x807F_FFFF) | (ea << 23);
            let b2 = (b & 0x807F_FFFF) | (eb << 23);
            prop_assert_eq!(fp32_mul(a2, b2), fp32_mul_native(a2, b2), "{:#x} {:#x}", a2, b2);
        }

        #[test]
        fn fp32_recip_matches_f64_division(x in any::<u32>()) {
            // Rounding the f64 quotient to f32 is innocuous (53 >= 2*24 + 2).
            let oracle = (1.0f64 / f32::from_bits(x) as f64) as f32;
            prop_assert!(same(fp32_recip(x), oracle), "x={:#x}", x);
        }

        #[test]
        fn fp32_scale2_matches_f64(x in any::<u32>(), n in any::<u8>()) {
            let oracle = (f32::from_bits(x) as f64 * (-(n as f64)).exp2()) as f32;
            prop_assert!(same(fp32_scale2(x, n), oracle), "x={:#x} n={}", x, n);
            prop_assert_eq!(fp32_scale2(x, n), fp32_scale2_native(x, n), "x={:#x} n={}", x, n);
        }

        /// The host's form of exp2 is the model's: any bit pattern, and inputs spread over
        /// the range where the result goes from Inf through the normals and subnormals to 0.
        #[test]
        fn exp2_native_matches_exp2(x in any::<u32>(), e in 110u32..=134, m in any::<u32>(), neg in any::<bool>()) {
            prop_assert_eq!(exp2_native(x), exp2(x), "x={:#010x}", x);
            let y = (neg as u32) << 31 | e << 23 | (m & 0x7F_FFFF);
            prop_assert_eq!(exp2_native(y), exp2(y), "x={:#010x}", y);
        }

        #[test]
        fn fp32_ceil_and_max_match_std(a in any::<u32>(), b in any::<u32>(), e in 100u32..=160) {
            let a2 = (a & 0x807F_FFFF) | (e << 23);
            for x in [a, a2] {
                prop_assert!(same(fp32_ceil(x), f32::from_bits(x).ceil()), "ceil {:#x}", x);
            }
            let (fa, fb) = (f32::from_bits(a), f32::from_bits(b));
            // IEEE 754-2019 maximum: NaN wins, and +0 is above -0.
            let want = if fa.is_nan() || fb.is_nan() {
                f32::NAN
            } else if fa == fb {
                if fa.is_sign_negative() { fb } else { fa }
            } else {
                fa.max(fb)
            };
            prop_assert!(same(fp32_max(a, b), want), "max {:#x} {:#x}", a, b);
        }
    }

    #[test]
    fn recip_exhaustive_over_significands() {
        // Every significand at three exponents (normal, result subnormal, input subnormal).
        for e in [127u32, 253, 0] {
            for m in 0..(1u32 << 23) {
                let x = (e << 23) | m;
                let oracle = (1.0f64 / f32::from_bits(x) as f64) as f32;
                assert!(same(fp32_recip(x), oracle), "x={x:#x}");
            }
        }
    }

    #[test]
    fn exp2_special_values_and_accuracy() {
        assert_eq!(exp2(0), F32_ONE);
        assert_eq!(exp2(F32_SIGN), F32_ONE);
        assert_eq!(exp2(0xBF80_0000), 0x3F00_0000); // 2^-1
        assert_eq!(exp2(0xC2FC_0000), 0x0080_0000); // 2^-126: smallest normal
        assert_eq!(exp2(0xC315_0000), 0x0000_0001); // 2^-149: smallest subnormal
        assert_eq!(exp2(0x4300_0000), F32_INF);
        assert_eq!(exp2(F32_NEG_INF), 0);
        assert_eq!(exp2(F32_INF), F32_INF);
        assert_eq!(exp2(F32_QNAN), F32_QNAN);
        // The documented accuracy: relative error below 2^-16 wherever the result is normal
        // (x in [-126, 128)), over every 97th binary32 input (about 23 million points).
        for (lo, hi) in [(-126.0f32, 0.0f32), (0.0, 128.0)] {
            let r = crate::accuracy::exp2_accuracy(lo, hi, 97);
            assert!(r.points > 10_000_000, "{} points", r.points);
            assert!(
                r.max_rel < (2.0f64).powi(-16),
                "exp2 on [{lo}, {hi}): worst relative error {:e} is not below 2^-16",
                r.max_rel
            );
        }
    }

    /// Every binary32 input: the host's exp2 against the model's (about a minute on two cores).
    #[test]
    #[ignore = "full: all 2^32 inputs of exp2_native; the proptest samples them"]
    fn exp2_native_matches_exp2_everywhere() {
        let threads = std::thread::available_parallelism().map_or(1, |n| n.get()) as u64;
        let span = (1u64 << 32).div_ceil(threads);
        std::thread::scope(|s| {
            for t in 0..threads {
                s.spawn(move || {
                    for x in t * span..((t + 1) * span).min(1 << 32) {
                        let x = x as u32;
                        assert_eq!(exp2_native(x), exp2(x), "x={x:#010x}");
                    }
                });
            }
        });
    }

    #[test]
    fn exp2_table_entries_are_far_from_rounding_ties() {
        // So that any correctly rounded exp2 in f64 gives the same table.
        for k in 0..=64 {
            let v = (k as f64 / 64.0).exp2() * (1u64 << 23) as f64;
            let frac = v - v.floor();
            assert!(
                (frac - 0.5).abs() > 1e-6,
                "entry {k} is within 1e-6 of a tie"
            );
        }
    }

    #[test]
    fn log2_table_entries_are_far_from_rounding_ties() {
        // So that any correctly rounded log2 in f64 gives the same table.
        for k in 0..=64 {
            let v = (1.0 + k as f64 / 64.0).log2() * (1u64 << 30) as f64;
            let frac = v - v.floor();
            assert!((frac - 0.5).abs() > 1e-4, "entry {k} is near a tie");
        }
    }

    /// log2 against f64: within 2^-14 absolute over every binade of binary32 (subnormals
    /// included) at 4,099 significands each, exact at powers of two, and the special values.
    #[test]
    fn log2_is_within_its_bound() {
        let mut worst = 0f64;
        for e in -149i32..128 {
            for i in 0..=4098u64 {
                let x = 2f64.powi(e) * (1.0 + i as f64 / 4099.0);
                let xb = (x as f32).to_bits();
                let got = f32::from_bits(fp32_log2(xb)) as f64;
                let want = (f32::from_bits(xb) as f64).log2();
                worst = worst.max((got - want).abs());
            }
            let p = (2f64.powi(e) as f32).to_bits();
            assert_eq!(f32::from_bits(fp32_log2(p)), e as f32, "2^{e}");
        }
        assert!(worst < 2f64.powi(-14), "worst error {worst:e}");
        assert_eq!(fp32_log2(0), F32_NEG_INF);
        assert_eq!(fp32_log2(F32_SIGN), F32_NEG_INF);
        assert_eq!(fp32_log2(F32_INF), F32_INF);
        assert_eq!(fp32_log2(F32_QNAN | 5), F32_QNAN);
        assert_eq!(fp32_log2(0xBF80_0000), F32_QNAN, "log2(−1)");
        assert_eq!(fp32_log2(F32_NEG_INF), F32_QNAN);
    }

    #[test]
    fn clear_value_is_additive_identity() {
        for x in [0u32, F32_SIGN, 1, 0x3F80_0000, 0xBF80_0000, F32_INF] {
            assert_eq!(fp32_add(ACC_CLEAR, x), x);
        }
    }

    // ---- Conversions between formats ----

    const FP64: Format = Format::FP64;
    /// Small formats for the generic checks (IEEE layouts; E5M2's is OCP FP8 E5M2's, and
    /// `E4M3FN` is OCP FP8 E4M3, finite-only and saturating).
    const E4M3: Format = Format::ieee(4, 3);
    const E5M2: Format = Format::ieee(5, 2);
    const E2M1: Format = Format::ieee(2, 1);
    const E3M4: Format = Format::ieee(3, 4);
    const E6M9: Format = Format::ieee(6, 9);
    const E4M3FN: Format = Format::FP8_E4M3;

    /// A binary16 → binary32 conversion written for those two formats alone, independently of
    /// `convert`: a second oracle beside `half`.
    fn fp16_to_fp32_specialised(x: u16) -> u32 {
        let sign = ((x & F16_SIGN) as u32) << 16;
        if f16_is_nan(x) {
            return F32_QNAN;
        }
        if f16_is_inf(x) {
            return sign | F32_INF;
        }
        if x & 0x7FFF == 0 {
            return sign;
        }
        let (m, e) = f16_unpack(x);
        // value = m * 2^(e - 25) with the leading one of m at position p.
        let p = 31 - m.leading_zeros();
        let exp = p + e + 102;
        let frac = (m << (23 - p)) & 0x7F_FFFF;
        sign | (exp << 23) | frac
    }

    /// A binary32 → binary16 conversion written for those two formats alone, independently of
    /// `convert`: a second oracle beside `half`.
    fn fp32_to_fp16_specialised(x: u32) -> u16 {
        let sign = ((x >> 16) as u16) & F16_SIGN;
        if f32_is_nan(x) {
            return F16_QNAN;
        }
        let e = ((x >> 23) & 0xFF) as i32;
        if e == 0xFF {
            return sign | F16_INF;
        }
        if e == 0 {
            // Zero or binary32 subnormal: far under half the smallest binary16 subnormal.
            return sign;
        }
        if e - 127 > 15 {
            return sign | F16_INF;
        }
        let sig = (x & 0x7F_FFFF) | 0x80_0000;
        // Normal results keep 11 significant bits (shift 13); each step below 2^-14 shifts one
        // more. The rounding increment's carry gives the next exponent, or Inf.
        let (exp_field, shift) = if e >= 127 - 14 {
            ((e - 127 + 15) as u32, 13)
        } else {
            (0, (13 + (127 - 14 - e)).min(25) as u32)
        };
        let kept = sig >> shift;
        let rest = sig & ((1 << shift) - 1);
        let half = 1 << (shift - 1);
        let round_up = rest > half || (rest == half && kept & 1 == 1);
        let packed = (exp_field << 10) | (kept & 0x3FF);
        sign | (packed + round_up as u32) as u16
    }

    /// `half`'s binary32 → bfloat16 (round to nearest even) with its NaNs made canonical.
    fn bf16_oracle(x: u32) -> u16 {
        let y = half::bf16::from_f32(f32::from_bits(x));
        if y.is_nan() {
            Format::BF16.qnan() as u16
        } else {
            y.to_bits()
        }
    }

    use crate::reference::{decode as value, is_nan, round as round_f64};

    /// `convert(x, from, to)` agrees with [`round_f64`] of `x`'s value (bit for bit as f64, so
    /// the sign of a zero counts), and NaN gives `to`'s canonical NaN.
    fn check_against_f64(x: u64, from: Format, to: Format) {
        let y = convert(x, from, to);
        if is_nan(x, from) {
            assert_eq!(y, to.qnan(), "{x:#x} {from:?} -> {to:?}");
        } else {
            let want = round_f64(value(x, from), to);
            assert_eq!(
                value(y, to).to_bits(),
                want.to_bits(),
                "{x:#x} {from:?} -> {to:?}: got {y:#x} = {}, want {want}",
                value(y, to)
            );
        }
    }

    #[test]
    fn convert_fp16_to_fp32_exhaustive() {
        for x in 0..=u16::MAX {
            let y = convert(x as u64, Format::FP16, Format::FP32);
            assert_eq!(y, fp16_to_fp32_specialised(x) as u64, "x={x:#06x}");
            assert_eq!(y, fp16_to_fp32(x) as u64, "x={x:#06x}");
            assert!(same(y as u32, f16::from_bits(x).to_f32()), "x={x:#06x}");
        }
    }

    /// Checks `convert(x, FP32, FP16)` against the specialised model, the public wrapper and
    /// `half` (NaN canonical).
    fn check_fp32_to_fp16(x: u32) {
        let y = convert(x as u64, Format::FP32, Format::FP16);
        assert_eq!(y, fp32_to_fp16_specialised(x) as u64, "x={x:#010x}");
        assert_eq!(y, fp32_to_fp16(x) as u64, "x={x:#010x}");
        assert!(
            same16(y as u16, f16::from_f32(f32::from_bits(x))),
            "x={x:#010x}"
        );
    }

    #[test]
    fn convert_fp32_to_fp16_dense_sweep() {
        // Every binary32 exponent from 2^-27 to 2^18 (the binary16 range with its underflow and
        // overflow margins) and the specials, with every value of the fraction's top 12 bits
        // (the kept bits and the rounding bit of every binary16 result) and four patterns
        // below them (exact, a sticky 1 at the bottom or top, all ones), both signs.
        let exps = (100u32..=145).chain([0, 1, 254, 255]);
        for e in exps {
            for top in 0..(1u32 << 12) {
                for low in [0, 1, 0x400, 0x7FF] {
                    for s in [0, F32_SIGN] {
                        check_fp32_to_fp16(s | (e << 23) | (top << 11) | low);
                    }
                }
            }
        }
    }

    /// binary32 NaNs: quiet and signalling, both signs, the extreme payloads.
    const F32_NANS: [u32; 5] = [
        0x7FC0_0000,
        0x7F80_0001,
        0xFFC0_0000,
        0xFFFF_FFFF,
        0x7FBF_FFFF,
    ];

    #[test]
    fn convert_fp32_to_fp16_corners() {
        let h = |v: f32| convert(v.to_bits() as u64, Format::FP32, Format::FP16) as u16;
        let below = |v: f32| f32::from_bits(v.to_bits() - 1);
        let above = |v: f32| f32::from_bits(v.to_bits() + 1);
        let tiny = 2f32.powi(-24); // the smallest binary16 subnormal
        let cases: [(f32, u16); 22] = [
            (65504.0, 0x7BFF),        // largest finite
            (65520.0, 0x7C00),        // the tie between 65504 and 2^16 goes to even: Inf
            (below(65520.0), 0x7BFF), // 65519.996
            (-65520.0, 0xFC00),
            (f32::MAX, 0x7C00),
            (tiny, 0x0001),              // smallest subnormal
            (tiny / 2.0, 0x0000),        // half of it: tie to even, 0
            (above(tiny / 2.0), 0x0001), // just above the tie
            (-tiny / 2.0, 0x8000),       // keeps the sign of the zero
            (tiny * 1.5, 0x0002),        // tie between 1 and 2 ulps: even, 2
            (tiny * 2.5, 0x0002),        // tie between 2 and 3 ulps: even, 2
            (1023.0 * tiny, 0x03FF),     // largest subnormal
            (1023.5 * tiny, 0x0400),     // its tie with the smallest normal: even, normal
            (2f32.powi(-14), 0x0400),    // smallest normal
            (below(2f32.powi(-14)), 0x0400),
            (1.0, 0x3C00),
            (1.0 + 2f32.powi(-11), 0x3C00), // tie: even, 1.0
            (above(1.0 + 2f32.powi(-11)), 0x3C01),
            (f32::from_bits(1), 0x0000), // binary32 subnormals are far below
            (0.0, 0x0000),
            (-0.0, 0x8000),
            (f32::NEG_INFINITY, 0xFC00),
        ];
        for (v, want) in cases {
            assert_eq!(h(v), want, "{v:e} ({:#010x})", v.to_bits());
            check_fp32_to_fp16(v.to_bits());
        }
        assert_eq!(h(f32::INFINITY), 0x7C00);
        for nan in F32_NANS {
            assert_eq!(convert(nan as u64, Format::FP32, Format::FP16), 0x7E00);
        }
    }

    #[test]
    fn convert_bf16_to_fp32_exhaustive_is_exact() {
        for x in 0..=u16::MAX {
            let y = convert(x as u64, Format::BF16, Format::FP32) as u32;
            if is_nan(x as u64, Format::BF16) {
                assert_eq!(y, F32_QNAN, "x={x:#06x}");
            } else {
                // bfloat16 is binary32's top half.
                assert_eq!(y, (x as u32) << 16, "x={x:#06x}");
                assert_eq!(y, half::bf16::from_bits(x).to_f32().to_bits(), "x={x:#06x}");
            }
        }
    }

    #[test]
    fn convert_fp32_to_bf16_at_every_rounding_boundary() {
        // Every bfloat16 prefix with the discarded half exact, one ulp around the tie, at the tie,
        // and at its extremes.
        for hi in 0..=u16::MAX as u32 {
            for lo in [0, 1, 0x7FFF, 0x8000, 0x8001, 0xFFFF] {
                let x = (hi << 16) | lo;
                let y = convert(x as u64, Format::FP32, Format::BF16) as u16;
                assert_eq!(y, bf16_oracle(x), "x={x:#010x}");
            }
        }
    }

    #[test]
    fn convert_fp32_to_bf16_corners() {
        let b = |x: u32| convert(x as u64, Format::FP32, Format::BF16) as u16;
        let cases: [(u32, u16); 19] = [
            (0x7F7F_0000, 0x7F7F), // largest finite
            (0x7F7F_7FFF, 0x7F7F), // just below the tie with Inf
            (0x7F7F_8000, 0x7F80), // the tie between the largest finite and 2^128: even, Inf
            (0x7F7F_FFFF, 0x7F80), // binary32's largest finite
            (0xFF7F_8000, 0xFF80),
            (0x0001_0000, 0x0001), // smallest subnormal, 2^-133
            (0x0000_8000, 0x0000), // half of it: tie to even, 0
            (0x0000_8001, 0x0001),
            (0x8000_8000, 0x8000),
            (0x0001_8000, 0x0002), // tie between 1 and 2 ulps: even, 2
            (0x0000_0001, 0x0000), // smallest binary32 subnormal
            (0x007F_0000, 0x007F), // largest subnormal
            (0x007F_8000, 0x0080), // its tie with the smallest normal: even, normal
            (0x0080_0000, 0x0080), // smallest normal
            (0x3F80_8000, 0x3F80), // 1 + 2^-8: tie, even, 1.0
            (0x3F81_8000, 0x3F82), // tie above an odd value: up
            (0x0000_0000, 0x0000),
            (0x8000_0000, 0x8000),
            (0xFF80_0000, 0xFF80),
        ];
        for (x, want) in cases {
            assert_eq!(b(x), want, "x={x:#010x}");
            assert_eq!(b(x), bf16_oracle(x), "x={x:#010x}");
        }
        assert_eq!(b(F32_INF), 0x7F80);
        for nan in F32_NANS {
            assert_eq!(b(nan), 0x7FC0, "x={nan:#010x}");
        }
    }

    /// The OCP 8-bit floating-point specification's (v1.0) tables of E4M3 and E5M2: the
    /// largest and smallest values, the specials, and saturation in E4M3.
    #[test]
    fn ocp_fp8_encodings() {
        let v = crate::reference::value_of;
        let e4 = Format::FP8_E4M3;
        assert_eq!(
            (e4.name(), e4.bits(), e4.bias()),
            ("e4m3fn".to_string(), 8, 7)
        );
        assert_eq!(
            (v(0x7E, e4), v(0x08, e4), v(0x01, e4)),
            (448.0, 2f64.powi(-6), 2f64.powi(-9))
        );
        assert_eq!((v(0x78, e4), v(0x77, e4)), (256.0, 240.0));
        assert!(v(0x7F, e4).is_nan() && v(0xFF, e4).is_nan());
        assert_eq!(
            (e4.qnan(), e4.max_finite_bits(), e4.max_finite()),
            (0x7F, 0x7E, 448.0)
        );
        assert!(!e4.has_inf() && !e4.is_inf(0x78) && !e4.is_nan(0x7E));
        let from32 = |x: f32| convert(x.to_bits() as u64, Format::FP32, e4);
        // 464 is the tie between 448 (even) and 480, which does not exist: it rounds to 448,
        // and everything above saturates, infinities included.
        assert_eq!(
            [
                from32(464.0),
                from32(465.0),
                from32(1e30),
                from32(f32::INFINITY)
            ],
            [0x7E; 4]
        );
        assert_eq!(from32(f32::NEG_INFINITY), 0xFE);
        assert_eq!(from32(f32::NAN), 0x7F);
        assert_eq!(from32(2f32.powi(-10)), 0); // the tie below the smallest subnormal: even
        assert_eq!(from32(1.5 * 2f32.powi(-10)), 1);

        let e5 = Format::FP8_E5M2;
        assert_eq!(
            (e5.name(), e5.max_finite(), e5.max_finite_bits()),
            ("e5m2".to_string(), 57344.0, 0x7B)
        );
        assert_eq!(
            (v(0x7C, e5), v(0x04, e5), v(0x01, e5)),
            (f64::INFINITY, 2f64.powi(-14), 2f64.powi(-16))
        );
        assert_eq!(e5.qnan(), 0x7E);
        let from32 = |x: f32| convert(x.to_bits() as u64, Format::FP32, e5);
        assert_eq!([from32(61440.0), from32(f32::INFINITY)], [0x7C; 2]);
        assert_eq!(from32(61439.0), 0x7B);
        // Both FP8 formats' products are exact in binary32.
        assert_eq!(
            (e4.exact_product(), e5.exact_product()),
            (Format::FP32, Format::FP32)
        );
    }

    /// Every product of two FP8 values (both formats, all 65,536 pairs) is the exact f64
    /// product of the operands' values, in binary32, with IEEE's specials.
    #[test]
    fn fp8_products_are_exact_in_binary32() {
        for f in [Format::FP8_E4M3, Format::FP8_E5M2] {
            for a in 0..=0xFF {
                for b in 0..=0xFF {
                    let y = f32::from_bits(mul_exact(a, b, f) as u32) as f64;
                    let want = value(a, f) * value(b, f);
                    if want.is_nan() {
                        assert_eq!(mul_exact(a, b, f), F32_QNAN as u64, "{a:#x} {b:#x} {f:?}");
                    } else {
                        assert_eq!(y.to_bits(), want.to_bits(), "{a:#x} {b:#x} {f:?}");
                    }
                }
            }
        }
    }

    /// The host's widening is `convert`'s, on every value of every operand format.
    #[test]
    fn widen_is_convert_for_every_operand() {
        for f in [
            Format::FP16,
            Format::BF16,
            Format::FP8_E4M3,
            Format::FP8_E5M2,
        ] {
            for x in 0..=f.mask() {
                assert_eq!(
                    widen(x as u16, f) as u64,
                    convert(x, f, Format::FP32),
                    "{x:#x} {f:?}"
                );
            }
        }
    }

    #[test]
    fn widening_then_narrowing_round_trips() {
        for (narrow, wide) in [
            (Format::FP16, Format::FP32),
            (Format::FP16, FP64),
            (Format::BF16, Format::FP32),
            (Format::BF16, FP64),
            (E5M2, Format::FP16),
            (E4M3, Format::BF16),
            (E4M3FN, Format::FP16),
            (E4M3FN, Format::FP32),
        ] {
            for x in 0..=narrow.mask() {
                let w = convert(x, narrow, wide);
                if is_nan(x, narrow) {
                    assert_eq!(w, wide.qnan());
                } else {
                    assert_eq!(
                        convert(w, wide, narrow),
                        x,
                        "{x:#x} {narrow:?} via {wide:?}"
                    );
                }
            }
        }
    }

    #[test]
    fn convert_matches_f64_rounding_between_small_formats() {
        // Every value of each source, into formats narrower, wider and mixed (fewer fraction
        // bits but more exponent bits, and the reverse), itself included.
        let formats = [
            E2M1,
            E3M4,
            E4M3,
            E5M2,
            E6M9,
            Format::FP16,
            Format::BF16,
            Format::FP32,
            FP64,
        ];
        for from in [E2M1, E3M4, E4M3, E4M3FN, E5M2, Format::FP16, Format::BF16] {
            for to in formats.into_iter().chain([E4M3FN]) {
                for x in 0..=from.mask() {
                    check_against_f64(x, from, to);
                }
            }
        }
    }

    #[test]
    fn round_to_keeps_sixty_four_bit_significands() {
        // 2^63 · 2^-88 = 2^-25, half the smallest binary16 subnormal: the remainder is all of sig.
        let h = Format::FP16;
        assert_eq!(round_to(h, 0, 1 << 63, -88, false), 0);
        assert_eq!(round_to(h, 0, 1 << 63, -88, true), 1);
        assert_eq!(round_to(h, 0, (1 << 63) | 1, -88, false), 1);
        assert_eq!(round_to(h, 0, u64::MAX, -88, false), 1);
        assert_eq!(round_to(h, 0, u64::MAX, -89, true), 0);
        assert_eq!(round_to(h, 0, u64::MAX, -1000, true), 0);
        // Just under 2^16: rounds up to 2^16, which overflows to Inf through the carry.
        assert_eq!(round_to(h, 0, u64::MAX, -48, false), h.inf());
        assert_eq!(round_to(h, 0, 1 << 63, -48, false), 0x7800); // 2^15
        assert_eq!(
            round_to(h, h.sign_mask(), u64::MAX, -47, false),
            h.neg_inf()
        );
    }

    #[test]
    #[should_panic(expected = "unsupported format")]
    fn convert_rejects_a_format_outside_its_range() {
        convert(0, Format::ieee(12, 10), Format::FP32);
    }

    #[test]
    #[should_panic(expected = "wider than e5m10")]
    fn convert_rejects_bits_above_the_source_width() {
        convert(0x1_0000, Format::FP16, Format::FP32);
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 100_000, failure_persistence: None, ..ProptestConfig::default() })]

        #[test]
        fn convert_fp32_to_fp16_matches_half_and_the_specialised_model(x in any::<u32>()) {
            check_fp32_to_fp16(x);
        }

        #[test]
        fn convert_fp32_to_bf16_matches_half(x in any::<u32>()) {
            let y = convert(x as u64, Format::FP32, Format::BF16) as u16;
            prop_assert_eq!(y, bf16_oracle(x), "x={:#010x}", x);
        }

        #[test]
        fn convert_from_fp32_matches_f64_rounding(x in any::<u32>()) {
            for to in [E2M1, E3M4, E4M3, E4M3FN, E5M2, E6M9, Format::FP16, Format::BF16, FP64] {
                check_against_f64(x as u64, Format::FP32, to);
            }
        }

        #[test]
        fn convert_between_fp64_and_fp32_matches_std(x in any::<u64>(), y in any::<u32>()) {
            // `as` rounds to nearest even; only NaNs need making canonical.
            let narrow = (f64::from_bits(x) as f32).to_bits() as u64;
            let want = if is_nan(narrow, Format::FP32) { Format::FP32.qnan() } else { narrow };
            prop_assert_eq!(convert(x, FP64, Format::FP32), want, "x={:#018x}", x);
            let wide = (f32::from_bits(y) as f64).to_bits();
            let want = if is_nan(wide, FP64) { FP64.qnan() } else { wide };
            prop_assert_eq!(convert(y as u64, Format::FP32, FP64), want, "y={:#010x}", y);
        }
    }
}
