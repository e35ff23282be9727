//! Stimulus for the floating-point units: directed special values and proptest strategies
//! biased towards the cases where FP hardware goes wrong (ties, cancellation, overflow,
//! subnormals, alignment shifts at the edge of the sticky bit).

use kernels::format::Format;
use kernels::fp::{convert, fp16_mul, mul_exact, F32_SIGN};
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

/// The values of an operand format every test should see, from its encoding: ±0, the
/// smallest subnormals, a subnormal, the largest subnormal, the smallest normals, around 1,
/// ±the largest finite value, ±Inf where the format has them, and NaNs (quiet, signalling and
/// negative; a finite-only format's one NaN both signs). binary16's are [`F16_SPECIALS`].
pub fn operand_specials(f: Format) -> Vec<u16> {
    let (sign, man, one) = (f.sign_mask(), f.man, f.one());
    let min_normal = 1 << man;
    let mut v = vec![
        0,
        sign,
        1,
        sign | 1,
        1 << (man - 1),
        f.frac_mask(),
        sign | f.frac_mask(),
        min_normal,
        sign | min_normal,
        one - min_normal,
        one - 1,
        one,
        sign | one,
        one + 1,
        one + min_normal,
        f.max_finite_bits(),
        sign | f.max_finite_bits(),
    ];
    if f.has_inf() {
        v.extend([f.inf(), f.neg_inf(), f.qnan(), f.inf() | 1, sign | f.qnan()]);
        v.push(f.mask() >> 1);
    } else {
        v.extend([f.qnan(), sign | f.qnan()]);
    }
    v.into_iter().map(|x| x as u16).collect()
}

/// Values of an operand format biased towards subnormals, the top binades and specials.
pub fn operand_value(f: Format) -> BoxedStrategy<u16> {
    let (man, top, frac) = (f.man, f.max_exp() as u16, f.frac_mask() as u16);
    let with = move |e: std::ops::RangeInclusive<u16>| {
        (any::<bool>(), e, 0..=frac)
            .prop_map(move |(s, e, x)| (if s { f.sign_mask() as u16 } else { 0 }) | (e << man) | x)
    };
    prop_oneof![
        3 => 0..=f.mask() as u16,
        2 => with(0..=2),
        2 => with(top - 2..=top),
        1 => select(operand_specials(f)),
    ]
    .boxed()
}

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

/// Operand pairs for binary32 multiplication: exponent sums near overflow and underflow (the
/// subnormal boundary), sparse fractions (exact products and ties), subnormal operands.
pub fn f32_mul_pair() -> impl Strategy<Value = (u32, u32)> {
    let with = |lo: u32, hi: u32| {
        (any::<bool>(), lo..=hi, any::<u32>(), 0u32..23)
            .prop_map(|(s, e, f, tz)| sign_bit32(s) | (e << 23) | sparse(f, tz, 23))
    };
    prop_oneof![
        3 => (f32_value(), f32_value()),
        // Products near the subnormal range: exponent sums around 127 - 24 .. 127.
        3 => (with(1, 126), 0u32..=30).prop_flat_map(move |(a, k)| {
            let e = ((a >> 23) & 0xFF) as i64;
            let eb = (127 - k as i64 - e + 1).clamp(0, 254) as u32;
            (Just(a), with(eb.saturating_sub(1), eb + 1))
        }),
        // Products near overflow.
        2 => (with(180, 254), with(120, 200)),
        // Subnormal operands.
        2 => ((any::<bool>(), any::<u32>()).prop_map(|(s, f)| sign_bit32(s) | (f & 0x7F_FFFF)), f32_value()),
    ]
}

/// Pairs for the IEEE maximum: equal magnitudes with different signs, NaNs, ±0, and randoms.
pub fn f32_max_pair() -> impl Strategy<Value = (u32, u32)> {
    prop_oneof![
        3 => (f32_value(), f32_value()),
        2 => f32_value().prop_map(|x| (x, x ^ F32_SIGN)),
        1 => (f32_value(), -2i32..=2).prop_map(|(x, k)| (x, x.wrapping_add(k as u32))),
    ]
}

/// Values around integers, where ceil acts: exponents 110 to 160 with sparse fractions.
pub fn f32_for_ceil() -> impl Strategy<Value = u32> {
    prop_oneof![
        1 => f32_value(),
        3 => (any::<bool>(), 110u32..=160, any::<u32>(), 0u32..23)
            .prop_map(|(s, e, f, tz)| sign_bit32(s) | (e << 23) | sparse(f, tz, 23)),
    ]
}

/// Shift amounts for `fp_scale2_e8m23`, biased towards the subnormal boundary of typical values.
pub fn f32_scale2_shift() -> impl Strategy<Value = u8> {
    prop_oneof![
        2 => any::<u8>(),
        3 => 100u8..=160,
        1 => 0u8..=4,
    ]
}

/// exp2 inputs: mostly the softmax range [-24, 0], then the whole useful range, then anything.
pub fn f32_for_exp2() -> impl Strategy<Value = u32> {
    prop_oneof![
        4 => (-24.0f32..=0.0).prop_map(f32::to_bits),
        3 => (-155.0f32..=130.0).prop_map(f32::to_bits),
        1 => (-1e-3f32..=1e-3).prop_map(f32::to_bits),
        1 => f32_value(),
    ]
}

/// log2 inputs: mostly a row's sum of weights, [0.5, 2^16], then every positive binade (its
/// significand around the table's segment edges too), then anything.
pub fn f32_for_log2() -> impl Strategy<Value = u32> {
    prop_oneof![
        4 => (0.5f32..=65536.0).prop_map(f32::to_bits),
        2 => (0u32..=254, 0u32..64, 0u32..4).prop_map(|(e, k, x)| {
            // A segment edge k/64 and its neighbours: x steps below or above.
            let f = (k << 17).wrapping_add(x).wrapping_sub(2) & 0x7F_FFFF;
            (e << 23) | f
        }),
        1 => 1u32..0x7F80_0000,
        1 => f32_value(),
    ]
}

/// One FP32 value per PE of a row: mixes of ordinary values, cancelling pairs and specials.
pub fn row_lanes(n: usize) -> impl Strategy<Value = Vec<u32>> {
    prop_oneof![
        3 => prop::collection::vec(f32_value(), n),
        2 => prop::collection::vec((-100.0f32..100.0).prop_map(f32::to_bits), n),
        1 => (prop::collection::vec(f32_value(), n), any::<bool>()).prop_map(|(mut v, neg)| {
            // Pairs that cancel exactly.
            for i in (1..v.len()).step_by(2) {
                v[i] = v[i - 1] ^ if neg { F32_SIGN } else { 0 };
            }
            v
        }),
    ]
}

/// (s, m, c, masked) for the exp stage: m an integer near s·c (as the running max is), or any
/// value; c one of the head dimensions' constants or any positive value.
pub fn softmax_exp_inputs(constants: Vec<u32>) -> impl Strategy<Value = (u32, u32, u32, bool)> {
    let c = prop_oneof![3 => select(constants), 1 => (1e-3f32..10.0).prop_map(f32::to_bits)];
    let s = prop_oneof![
        4 => (-500.0f32..500.0).prop_map(f32::to_bits),
        1 => f32_value(),
    ];
    (
        s,
        c,
        -40i32..=2,
        prop::bool::weighted(0.1),
        any::<bool>(),
        f32_value(),
    )
        .prop_map(|(s, c, k, masked, near, other)| {
            let t = f32::from_bits(s) * f32::from_bits(c);
            let m = if near && t.is_finite() {
                (t.ceil() + k as f32).to_bits()
            } else {
                other
            };
            (s, m, c, masked)
        })
}

/// mask_gen inputs: bases and lengths around the tile size, or anywhere in the index range.
pub fn mask_inputs(br: u32, bc: u32, index_bits: u32) -> impl Strategy<Value = Vec<u64>> {
    let limit = 1u64 << index_bits;
    let span = 4 * (br.max(bc) as u64) + 4;
    let small = move || 0u64..span.min(limit);
    let any_index = move || 0u64..limit;
    prop_oneof![
        3 => (small(), small(), small(), small(), any::<bool>())
            .prop_map(|(a, b, c, d, e)| vec![a, b, c, d, e as u64]),
        1 => (any_index(), any_index(), any_index(), any_index(), any::<bool>())
            .prop_map(|(a, b, c, d, e)| vec![a, b, c, d, e as u64]),
        // Near the diagonal of long sequences.
        2 => (any_index(), -(span as i64)..span as i64, -(span as i64)..span as i64, any::<bool>()).prop_map(
            move |(base, dk, dl, causal)| {
                let clamp = |x: i64| x.clamp(0, limit as i64 - 1) as u64;
                let q_base = base;
                let k_base = clamp(base as i64 + dk);
                let q_len = clamp(base as i64 + span as i64);
                let k_len = clamp(q_len as i64 + dl);
                vec![q_base, k_base, q_len, k_len, causal as u64]
            }
        ),
    ]
}

/// bfloat16 values every test should see.
pub const BF16_SPECIALS: &[u16] = &[
    0x0000, 0x8000, // ±0
    0x0001, 0x8001, // smallest subnormals (2^-133)
    0x0040, 0x007F, 0x807F, // subnormals, largest subnormal
    0x0080, 0x8080, // smallest normals
    0x3F00, 0x3F7F, 0x3F80, 0xBF80, 0x3F81, 0x4000, // around 1
    0x7F00, 0x7F7F, 0xFF7F, // large, ±max finite
    0x7F80, 0xFF80, // ±Inf
    0x7FC0, 0x7F81, 0xFFC0, 0x7FFF, // NaNs (quiet, signalling, negative)
];

/// bfloat16 values biased towards subnormals, the exponents whose products leave binary32's
/// range at either end or land on its subnormal boundary, and specials.
pub fn bf16_value() -> impl Strategy<Value = u16> {
    let with = |e: std::ops::RangeInclusive<u16>| {
        (any::<bool>(), e, 0u16..0x80).prop_map(|(s, e, f)| sign_bit16(s) | (e << 7) | f)
    };
    prop_oneof![
        3 => any::<u16>(),
        2 => with(0..=2),
        2 => with(40..=90),
        2 => with(110..=145),
        2 => with(190..=254),
        1 => select(BF16_SPECIALS),
    ]
}

/// Operand pairs for the bfloat16 multiplier.
pub fn bf16_mul_pair() -> impl Strategy<Value = (u16, u16)> {
    prop_oneof![
        3 => (bf16_value(), bf16_value()),
        // Subnormal × subnormal (down to 2^-266) and subnormal × large.
        1 => (any::<u16>(), any::<u16>()).prop_map(|(a, b)| (a & 0x807F, b & 0x807F)),
        1 => (any::<u16>(), any::<u16>()).prop_map(|(a, b)| (a & 0x807F, (b & 0x807F) | 0x7E00)),
    ]
}

/// An accumulator for the addend `p` (a value of `pf`, a MAC's exact product format):
/// `kind` 0 cancels p's binary32 rounding (nudged by `k` ulps), 1 sits `d` exponents below
/// p, 2 `d` exponents above (exponents clamped to binary32's finite range), with a sparse
/// fraction: exact cancellation, massive normalization, ties against p's bits.
#[allow(clippy::too_many_arguments)]
fn acc_for(p: u64, pf: Format, kind: u32, k: i32, d: u32, s: bool, f: u32, tz: u32) -> u32 {
    let rounded = convert(p, pf, Format::FP32) as u32;
    let e = ((p >> pf.man) & pf.max_exp()) as i64 - (pf.bias() as i64 - 127);
    let e = match kind {
        0 => return (rounded ^ F32_SIGN).wrapping_add(k as u32),
        1 => e - d as i64,
        _ => e + d as i64,
    };
    sign_bit32(s) | ((e.clamp(0, 254) as u32) << 23) | sparse(f, tz, 23)
}

/// (acc, a, b) for a MAC of bfloat16 operands: accumulators anywhere, cancelling the
/// product, or aligned a few exponents either side of it.
pub fn mac_triple_bf16() -> impl Strategy<Value = (u32, u16, u16)> {
    let pf = Format::BF16.exact_product();
    prop_oneof![
        2 => (f32_value(), bf16_value(), bf16_value()),
        6 => (bf16_mul_pair(), 0u32..3, -16i32..16, 0u32..=30, any::<bool>(), any::<u32>(), 0u32..23)
            .prop_map(move |((a, b), kind, k, d, s, f, tz)| {
                let p = mul_exact(a as u64, b as u64, Format::BF16);
                (acc_for(p, pf, kind, k, d, s, f, tz), a, b)
            }),
    ]
}

/// (acc, addend) pairs for the wide adder, the addend in `pf` (`e10m15`): bfloat16 products
/// against accumulators as [`mac_triple_bf16`] draws them, and any `pf` value (subnormals of
/// `pf` included, which no product is) against any accumulator.
pub fn wide_add_pair(pf: Format) -> impl Strategy<Value = (u32, u64)> {
    let any_p = move |x: u64| x & pf.mask();
    prop_oneof![
        5 => mac_triple_bf16().prop_map(|(acc, a, b)| (acc, mul_exact(a as u64, b as u64, Format::BF16))),
        2 => (f32_value(), any::<u64>()).prop_map(move |(acc, p)| (acc, any_p(p))),
        2 => (any::<u64>(), 0u32..3, -16i32..16, 0u32..=30, any::<bool>(), any::<u32>(), 0u32..23)
            .prop_map(move |(p, kind, k, d, s, f, tz)| {
                let p = any_p(p);
                (acc_for(p, pf, kind, k, d, s, f, tz), p)
            }),
        // Addends on binary32's subnormal boundary and below it.
        1 => (f32_value(), any::<bool>(), 230u64..=400, any::<u64>()).prop_map(move |(acc, s, e, f)| {
            let sign = if s { pf.sign_mask() } else { 0 };
            (acc, sign | (e << pf.man) | (f & pf.frac_mask()))
        }),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The generated specials are binary16's written-out list, and in FP8 what they claim:
    /// E4M3's largest is 448 and its NaN the all-ones pattern; E5M2 has its infinities.
    #[test]
    fn operand_specials_follow_the_encodings() {
        assert_eq!(operand_specials(Format::FP16), F16_SPECIALS);
        let value = |x: u16, f: Format| kernels::reference::decode(x as u64, f);
        let e4 = operand_specials(Format::FP8_E4M3);
        assert_eq!(
            (
                value(e4[15], Format::FP8_E4M3),
                value(e4[2], Format::FP8_E4M3)
            ),
            (448.0, 2f64.powi(-9))
        );
        assert!(e4[17..]
            .iter()
            .all(|&x| value(x, Format::FP8_E4M3).is_nan()));
        let e5 = operand_specials(Format::FP8_E5M2);
        assert_eq!(value(e5[17], Format::FP8_E5M2), f64::INFINITY);
        assert!(e5[19..]
            .iter()
            .all(|&x| value(x, Format::FP8_E5M2).is_nan()));
    }
}
