//! Stimulus for the floating-point units: directed special values and proptest strategies
//! biased towards the cases where FP hardware goes wrong (ties, cancellation, overflow,
//! subnormals, alignment shifts at the edge of the sticky bit).

use kernels::fp::{fp16_mul, F32_SIGN};
use proptest::prelude::*;
use proptest::sample::select;

/// binary16 values every test should see.
pub const F16_SPECIALS: &[u16] = &[
    0x0000, 0x8000, // ±0
    0x0001, 0x8001, // smallest subnormals
    0x0200, 0x03FF, 0x83FF, // subnormals, largest subnormal
    0x0400, 0x8400, // smallest normals
    0x3800, 0x3BFF, 0x3C00, 0xBC00, 0x3C01, 0x4000, // around 1
    0x7BFF, 0xFBFF, // ±65504
    0x7C00, 0xFC00, // ±Inf
    0x7E00, 0x7C01, 0xFE00, 0x7FFF, // NaNs (quiet, signalling, negative)
];

/// binary32 values every test should see.
pub const F32_SPECIALS: &[u32] = &[
    0x0000_0000,
    0x8000_0000, // ±0
    0x0000_0001,
    0x8000_0001,
    0x0000_0002, // smallest subnormals
    0x0040_0000,
    0x007F_FFFF,
    0x807F_FFFF, // subnormals, largest subnormal
    0x0080_0000,
    0x8080_0000,
    0x0080_0001, // smallest normals
    0x3380_0000,
    0x3380_0001,
    0x3400_0000, // 2^-24: half an ulp of 1.0 and neighbours
    0x3F7F_FFFF,
    0x3F80_0000,
    0xBF80_0000,
    0x3F80_0001, // around 1
    0x4B00_0000,
    0x4B80_0000, // 2^23, 2^24
    0x7F00_0000,
    0x7F7F_FFFF,
    0xFF7F_FFFF, // large, ±max finite
    0x7F80_0000,
    0xFF80_0000, // ±Inf
    0x7FC0_0000,
    0x7F80_0001,
    0xFFC0_0000,
    0x7FFF_FFFF, // NaNs
];

fn sign_bit16(neg: bool) -> u16 {
    if neg {
        0x8000
    } else {
        0
    }
}

fn sign_bit32(neg: bool) -> u32 {
    if neg {
        F32_SIGN
    } else {
        0
    }
}

/// A fraction with `tz` trailing zeros: aligned operands then hit exact ties often.
fn sparse(frac: u32, tz: u32, bits: u32) -> u32 {
    let mask = (1u32 << bits) - 1;
    ((frac & mask) >> tz) << tz
}

/// binary16 values biased towards subnormals, extremes and specials.
pub fn f16_value() -> impl Strategy<Value = u16> {
    prop_oneof![
        4 => any::<u16>(),
        2 => (any::<bool>(), 0u16..0x400).prop_map(|(s, f)| sign_bit16(s) | f),
        1 => (any::<bool>(), 1u16..=2, 0u16..0x400).prop_map(|(s, e, f)| sign_bit16(s) | (e << 10) | f),
        1 => (any::<bool>(), 28u16..=30, 0u16..0x400).prop_map(|(s, e, f)| sign_bit16(s) | (e << 10) | f),
        1 => select(F16_SPECIALS),
    ]
}

/// binary32 values biased towards subnormals, extremes, sparse fractions and specials.
pub fn f32_value() -> impl Strategy<Value = u32> {
    let with = |e: std::ops::RangeInclusive<u32>| {
        (any::<bool>(), e, any::<u32>(), 0u32..23)
            .prop_map(|(s, e, f, tz)| sign_bit32(s) | (e << 23) | sparse(f, tz, 23))
    };
    prop_oneof![
        4 => any::<u32>(),
        2 => with(0..=2),
        2 => with(100..=160),
        1 => with(250..=254),
        1 => select(F32_SPECIALS),
    ]
}

/// `x` with its exponent lowered by `d` (floored at 0) and a sparse fraction: an addend that
/// aligns `d` places below `x`.
fn aligned_below(x: u32, d: u32, sign: bool, frac: u32, tz: u32) -> u32 {
    let e = ((x >> 23) & 0xFF).saturating_sub(d);
    sign_bit32(sign) | (e << 23) | sparse(frac, tz, 23)
}

/// Operand pairs for binary32 addition.
pub fn f32_add_pair() -> impl Strategy<Value = (u32, u32)> {
    prop_oneof![
        3 => (f32_value(), f32_value()),
        // Exact cancellation (and ±0 sign rules when x is zero).
        2 => f32_value().prop_map(|x| (x, x ^ F32_SIGN)),
        // Near cancellation: massive normalization shifts.
        2 => (f32_value(), -64i32..64).prop_map(|(x, k)| (x, (x ^ F32_SIGN).wrapping_add(k as u32))),
        // Alignment by 0..=30 places with sparse fractions: ties, guard and sticky edges.
        4 => (f32_value(), 0u32..=30, any::<bool>(), any::<u32>(), 0u32..23)
            .prop_map(|(x, d, s, f, tz)| (x, aligned_below(x, d, s, f, tz))),
        // Overflow: two large values of one sign.
        1 => (any::<bool>(), 253u32..=254, any::<u32>(), any::<u32>()).prop_map(|(s, e, f, g)| {
            let s = sign_bit32(s);
            (s | (e << 23) | (f & 0x7F_FFFF), s | (254 << 23) | (g & 0x7F_FFFF))
        }),
        // Subnormal operands and results.
        2 => (any::<bool>(), any::<bool>(), 0u32..=1, 0u32..=1, any::<u32>(), any::<u32>())
            .prop_map(|(s, t, e, g, f, h)| {
                (sign_bit32(s) | (e << 23) | (f & 0x7F_FFFF), sign_bit32(t) | (g << 23) | (h & 0x7F_FFFF))
            }),
    ]
}

/// binary32 inputs for the conversion to binary16: the binary16 range, its rounding midpoints,
/// the subnormal range and the overflow threshold.
pub fn f32_for_fp16() -> impl Strategy<Value = u32> {
    prop_oneof![
        2 => any::<u32>(),
        // Exponents from below the binary16 subnormals to above its range, sparse fractions.
        4 => (any::<bool>(), 95u32..=145, any::<u32>(), 0u32..23)
            .prop_map(|(s, e, f, tz)| sign_bit32(s) | (e << 23) | sparse(f, tz, 23)),
        // Normal-range ties (round bit set, nothing below) and their neighbours.
        3 => (any::<bool>(), 113u32..=142, 0u32..0x400, -1i32..=1).prop_map(|(s, e, m, k)| {
            let frac = ((m << 13) | 0x1000).wrapping_add(k as u32) & 0x7F_FFFF;
            sign_bit32(s) | (e << 23) | frac
        }),
        1 => select(F32_SPECIALS),
    ]
}

/// Operand pairs for the FP16 multiplier.
pub fn f16_mul_pair() -> impl Strategy<Value = (u16, u16)> {
    prop_oneof![
        3 => (f16_value(), f16_value()),
        // Subnormal × subnormal and subnormal × large: the widest normalization shifts.
        1 => (any::<u16>(), any::<u16>()).prop_map(|(a, b)| (a & 0x83FF, b & 0x83FF)),
        1 => (any::<u16>(), any::<u16>()).prop_map(|(a, b)| (a & 0x83FF, (b & 0x83FF) | 0x7800)),
    ]
}

/// (acc, a, b) triples for the MAC: accumulators that cancel the product exactly, nearly,
/// or sit a few exponents away from it (ties against the product's bits).
pub fn mac_triple() -> impl Strategy<Value = (u32, u16, u16)> {
    let ab = f16_mul_pair;
    prop_oneof![
        2 => (f32_value(), f16_value(), f16_value()),
        2 => ab().prop_map(|(a, b)| (fp16_mul(a, b) ^ F32_SIGN, a, b)),
        2 => (ab(), -16i32..16)
            .prop_map(|((a, b), k)| ((fp16_mul(a, b) ^ F32_SIGN).wrapping_add(k as u32), a, b)),
        3 => (ab(), 0u32..=30, any::<bool>(), any::<u32>(), 0u32..23, any::<bool>()).prop_map(
            |((a, b), d, s, f, tz, above)| {
                let p = fp16_mul(a, b);
                let acc = aligned_below(p, d, s, f, tz);
                // Either the accumulator is the smaller addend, or the product is.
                let acc = if above { (acc & 0x807F_FFFF) | ((((p >> 23) & 0xFF) + d).min(254) << 23) } else { acc };
                (acc, a, b)
            }
        ),
    ]
}

/// Every binary32 value around each binary16 rounding boundary: each binary16 value, the
/// midpoints to its neighbours and one binary32 ulp either side, both signs.
pub fn fp16_rounding_boundaries() -> Vec<u32> {
    let mut v = vec![];
    for h in 0..0x7C00u16 {
        let lo = half::f16::from_bits(h).to_f32() as f64;
        let hi = if h == 0x7BFF {
            65520.0 // the overflow threshold
        } else {
            half::f16::from_bits(h + 1).to_f32() as f64
        };
        let mid = ((lo + hi) / 2.0) as f32;
        for x in [
            (lo as f32).to_bits(),
            mid.to_bits() - 1,
            mid.to_bits(),
            mid.to_bits() + 1,
        ] {
            v.push(x);
            v.push(x | F32_SIGN);
        }
    }
    v
}
