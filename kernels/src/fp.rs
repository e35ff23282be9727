//! Bit-exact models of the floating-point operators the hardware implements.
//!
//! Every function here works on raw IEEE-754 bit patterns with integer arithmetic only, so the
//! model does not depend on the host FPU. The RTL in `hdl/` must equal these functions bit for bit
//! on every input. The contract, shared by all operators:
//!
//! * round to nearest, ties to even (the only rounding mode);
//! * subnormal inputs and results are supported, nothing is flushed to zero;
//! * overflow rounds to ±Inf;
//! * every NaN result is the canonical quiet NaN ([`F32_QNAN`], [`F16_QNAN`]); NaN payloads
//!   and signs are not propagated (the hardware does not spend logic on them);
//! * an exact zero sum is +0, except (−0) + (−0) = −0.

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
    if f16_is_nan(a) || f16_is_nan(b) {
        return F32_QNAN;
    }
    let a_zero = a & 0x7FFF == 0;
    let b_zero = b & 0x7FFF == 0;
    if f16_is_inf(a) || f16_is_inf(b) {
        return if a_zero || b_zero {
            F32_QNAN
        } else {
            sign | F32_INF
        };
    }
    if a_zero || b_zero {
        return sign;
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

/// Exact binary16 → binary32 conversion (every binary16 value is representable).
pub fn fp16_to_fp32(x: u16) -> u32 {
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

/// binary32 → binary16 with round to nearest even; overflow gives ±Inf, tiny values round to
/// binary16 subnormals or ±0.
pub fn fp32_to_fp16(x: u32) -> u16 {
    let sign = ((x >> 16) as u16) & F16_SIGN;
    if f32_is_nan(x) {
        return F16_QNAN;
    }
    let e = ((x >> 23) & 0xFF) as i32;
    if e == 0xFF {
        return sign | F16_INF;
    }
    if e == 0 {
        // Zero or binary32 subnormal: below 2^-126, far under half the smallest binary16
        // subnormal (2^-25), so it rounds to a signed zero.
        return sign;
    }
    if e - 127 > 15 {
        return sign | F16_INF;
    }
    let sig = (x & 0x7F_FFFF) | 0x80_0000;
    // Normal results keep 11 significant bits (shift 13); each step below 2^-14 shifts one more.
    let (exp_field, shift) = if e >= 127 - 14 {
        ((e - 127 + 15) as u32, 13)
    } else {
        (0, (13 + (127 - 14 - e)).min(25) as u32)
    };
    let kept = sig >> shift;
    let rest = sig & ((1 << shift) - 1);
    let half = 1 << (shift - 1);
    let round_up = rest > half || (rest == half && kept & 1 == 1);
    // Adding the rounding increment to the packed {exponent, fraction} carries into the exponent
    // when the fraction overflows, turns the largest subnormal into the smallest normal, and the
    // largest finite value into Inf: all three are the IEEE results.
    let packed = (exp_field << 10) | (kept & 0x3FF);
    sign | (packed + round_up as u32) as u16
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
    // Same packed-increment trick as fp32_to_fp16: carries into the exponent are the IEEE result.
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

/// The value the PE's accumulator starts from when a MAC clears it: −0, the identity of
/// addition for every value including −0 itself.
pub const ACC_CLEAR: u32 = F32_SIGN;

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

    #[test]
    fn fp32_add_special_values() {
        let specials = [
            0x0000_0000u32,
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
        for &a in &specials {
            for &b in &specials {
                let oracle = f32::from_bits(a) + f32::from_bits(b);
                assert!(same(fp32_add(a, b), oracle), "a={a:#010x} b={b:#010x}");
            }
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 200_000, failure_persistence: None, ..ProptestConfig::default() })]

        #[test]
        fn fp32_add_matches_f32(a in any::<u32>(), b in any::<u32>(), near in 0u32..64, delta in 0u32..30) {
            let oracle = f32::from_bits(a) + f32::from_bits(b);
            prop_assert!(same(fp32_add(a, b), oracle));
            // Nearby magnitudes: cancellation and ties.
            let c = (a ^ F32_SIGN).wrapping_add(near).wrapping_sub(32);
            let oracle = f32::from_bits(a) + f32::from_bits(c);
            prop_assert!(same(fp32_add(a, c), oracle), "a={:#010x} c={:#010x}", a, c);
            // Exponent distance delta: exercise alignment and the sticky bit.
            let d = (b & 0x807F_FFFF) | (((a >> 23) & 0xFF).saturating_sub(delta) << 23);
            let oracle = f32::from_bits(a) + f32::from_bits(d);
            prop_assert!(same(fp32_add(a, d), oracle), "a={:#010x} d={:#010x}", a, d);
        }

        #[test]
        fn fp32_to_fp16_matches_half(x in any::<u32>()) {
            prop_assert!(same16(fp32_to_fp16(x), f16::from_f32(f32::from_bits(x))));
        }

        #[test]
        fn mac_is_fused_multiply_add_of_widened_inputs(acc in any::<u32>(), a in any::<u16>(), b in any::<u16>()) {
            let wa = f16::from_bits(a).to_f32();
            let wb = f16::from_bits(b).to_f32();
            prop_assert!(same(mac(acc, a, b), wa.mul_add(wb, f32::from_bits(acc))));
        }
    }

    #[test]
    fn clear_value_is_additive_identity() {
        for x in [0u32, F32_SIGN, 1, 0x3F80_0000, 0xBF80_0000, F32_INF] {
            assert_eq!(fp32_add(ACC_CLEAR, x), x);
        }
    }
}
