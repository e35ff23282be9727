//! References for the accuracy contract (docs/numerics.md):
//! * [`attention_f64`]: attention in f64 on the inputs' exact values;
//! * [`attention_plain_lowprec`]: plain (untiled) attention the way FP16 (or BF16) frameworks
//!   compute it: FP32 accumulation of Q·Kᵀ, softmax in FP32, P stored in the input format,
//!   P·V accumulated in FP32, output stored in the input format.
//!
//! Both write the causal mask from its definition (bottom-right aligned: query i of q_len sees
//! key j of k_len when j ≤ i + k_len − q_len) rather than using `mask.rs`, so that a mask bug
//! cannot hide in the model and the reference alike. A query with no visible key outputs 0
//! (the FlashAttention convention), and so does a query whose visible scores are all −Inf (its
//! max is −Inf, and FlashAttention subtracts 0 then). Special values follow IEEE arithmetic: a
//! NaN score makes its row NaN (the max propagates it), as does a +Inf score (Inf − Inf).

use crate::format::{Format, Specials};

/// The value of `x`, an operand's bits in `format`.
pub fn value(x: u16, format: Format) -> f64 {
    decode(x as u64, format)
}

/// The value of `x`, a value of any binary format up to binary64 in its low bits.
pub fn value_of(x: u64, format: Format) -> f64 {
    f64::from_bits(crate::fp::convert(x, format, Format::FP64))
}

/// `x` rounded to `format` (nearest even).
fn round_f32(x: f32, format: Format) -> f32 {
    round(x as f64, format) as f32
}

// The formats' values from their definitions, in f64 arithmetic: independent of the models'
// integer conversions (`fp::convert`), which the tests hold to these and to `half`.

/// `x` is a NaN of `f`, from the encodings' definitions: IEEE's all-ones exponent with a
/// nonzero fraction, or a finite-only format's one all-ones pattern.
pub fn is_nan(x: u64, f: Format) -> bool {
    let magnitude = x & !f.sign_mask();
    match f.specials {
        Specials::Ieee => magnitude > f.max_exp() << f.man,
        Specials::FiniteSaturating => magnitude == (1 << (f.bits() - 1)) - 1,
    }
}

/// 2^k as f64, for k in binary64's normal range (exact).
fn pow2(k: i32) -> f64 {
    assert!((-1022..=1023).contains(&k));
    f64::from_bits(((k + 1023) as u64) << 52)
}

/// The value of `x` in format `f` as f64 (exact: `f` is binary64 or has at most 8 exponent
/// bits and 52 fraction bits).
pub fn decode(x: u64, f: Format) -> f64 {
    if f == Format::FP64 {
        return f64::from_bits(x);
    }
    assert!(f.exp <= 8);
    let sign = if x & f.sign_mask() != 0 { -1.0 } else { 1.0 };
    let e = (x >> f.man) & f.max_exp();
    let m = x & f.frac_mask();
    if is_nan(x, f) {
        return f64::NAN;
    }
    if e == f.max_exp() && f.specials == Specials::Ieee {
        return sign * f64::INFINITY;
    }
    let (sig, e) = if e == 0 {
        (m, 1)
    } else {
        (m | (1 << f.man), e)
    };
    sign * sig as f64 * pow2(e as i32 - f.bias() as i32 - f.man as i32)
}

/// Round to nearest even of the f64 `v` into format `f`, computed with f64 arithmetic (the
/// significand scaled to an integer, then `round_ties_even`), returned as an f64 value.
/// `v` must be zero, infinite or normal in binary64. Beyond the range: ±Inf, or in a
/// saturating format (E4M3) its largest finite value, infinities included.
pub fn round(v: f64, f: Format) -> f64 {
    let saturating = f.specials == Specials::FiniteSaturating;
    if v == 0.0 || v.is_nan() || f == Format::FP64 || (v.is_infinite() && !saturating) {
        return v;
    }
    let (emax, largest) = if saturating {
        // The all-ones exponent holds normal numbers, but for the all-ones fraction (NaN).
        let emax = f.max_exp() as i32 - f.bias() as i32;
        (emax, (2.0 - pow2(1 - f.man as i32)) * pow2(emax))
    } else {
        let emax = f.max_exp() as i32 - 1 - f.bias() as i32;
        (emax, (2.0 - pow2(-(f.man as i32))) * pow2(emax))
    };
    let a = v.abs();
    let emin = 1 - f.bias() as i32;
    let e = (((a.to_bits() >> 52) & 0x7FF) as i32 - 1023).max(emin);
    let ulp = pow2(e.min(emax) - f.man as i32);
    let y = (a / ulp).round_ties_even() * ulp;
    let y = if y <= largest {
        y
    } else if saturating {
        largest
    } else {
        f64::INFINITY
    };
    y.copysign(v)
}

/// One head's attention problem for the references: Q (q_len × d), K and V (k_len × d),
/// row-major bits of `format` (binary16 or bfloat16).
#[derive(Clone, Copy, Debug)]
pub struct Inputs<'a> {
    pub q: &'a [u16],
    pub k: &'a [u16],
    pub v: &'a [u16],
    pub q_len: usize,
    pub k_len: usize,
    pub d: usize,
    pub causal: bool,
    pub format: Format,
    /// The stored Q·Kᵀ is 2^score_exp times the problem's (per-tensor power-of-two scales of
    /// Q and K): the scores are scaled back by 2^−score_exp, exactly. 0 for operands stored as
    /// they are.
    pub score_exp: i32,
}

/// Query `i` sees key `j`: always, or when causal, j ≤ i + k_len − q_len.
pub fn visible(i: usize, j: usize, q_len: usize, k_len: usize, causal: bool) -> bool {
    !causal || (j as i128) <= i as i128 + k_len as i128 - q_len as i128
}

/// Query `i` sees at least one key.
pub fn has_visible_key(i: usize, q_len: usize, k_len: usize, causal: bool) -> bool {
    k_len > 0 && visible(i, 0, q_len, k_len, causal)
}

/// The row max with NaN propagated (f64::max would drop it); −Inf for no value.
pub(crate) fn nan_max(xs: impl Iterator<Item = f64>) -> f64 {
    xs.fold(f64::NEG_INFINITY, |a, b| {
        if a.is_nan() || b.is_nan() {
            f64::NAN
        } else {
            a.max(b)
        }
    })
}

/// Attention in f64: softmax(Q·Kᵀ/√d)·V.
pub fn attention_f64(a: &Inputs) -> Vec<f64> {
    let Inputs {
        q,
        k,
        v,
        q_len,
        k_len,
        d,
        causal,
        format,
        score_exp,
    } = *a;
    let f = |x: &u16| value(*x, format);
    let back = 2f64.powi(-score_exp);
    let (qf, kf, vf): (Vec<f64>, Vec<f64>, Vec<f64>) = (
        q.iter().map(|x| f(x) * back).collect(),
        k.iter().map(f).collect(),
        v.iter().map(f).collect(),
    );
    attention_f64_values(&qf, &kf, &vf, q_len, k_len, d, causal)
}

/// [`attention_f64`] on values given in f64 (a quantization's dequantized Q and K, say).
pub fn attention_f64_values(
    qf: &[f64],
    kf: &[f64],
    vf: &[f64],
    q_len: usize,
    k_len: usize,
    d: usize,
    causal: bool,
) -> Vec<f64> {
    // The same arithmetic either way: the vector unit's lanes round as the scalar unit does
    // (Rust never fuses a multiply and an add it was not asked to).
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU has AVX2, checked just above.
        return unsafe { f64_values_avx2(qf, kf, vf, (q_len, k_len, d), causal) };
    }
    f64_values(qf, kf, vf, (q_len, k_len, d), causal)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn f64_values_avx2(
    qf: &[f64],
    kf: &[f64],
    vf: &[f64],
    shape: (usize, usize, usize),
    causal: bool,
) -> Vec<f64> {
    f64_values(qf, kf, vf, shape, causal)
}

#[inline(always)]
fn f64_values(
    qf: &[f64],
    kf: &[f64],
    vf: &[f64],
    (q_len, k_len, d): (usize, usize, usize),
    causal: bool,
) -> Vec<f64> {
    let scale = 1.0 / (d as f64).sqrt();
    // The identity `sum` starts from, so that the per-column sums below (keys in order, as
    // `(0..k_len).map(..).sum()` adds them) are the same numbers.
    let zero: f64 = std::iter::empty::<f64>().sum();
    let kt = transposed(kf, d);
    let mut out = vec![0.0; q_len * d];
    let mut acc = vec![zero; d];
    let mut dots = vec![zero; k_len];
    for i in 0..q_len {
        let qi = &qf[i * d..(i + 1) * d];
        // Every key's dot product side by side, each the sum of its d products in order.
        dots.fill(zero);
        for (&a, kx) in qi.iter().zip(kt.chunks_exact(k_len.max(1))) {
            for (dot, &b) in dots.iter_mut().zip(kx) {
                *dot += a * b;
            }
        }
        let scores: Vec<Option<f64>> = dots
            .iter()
            .enumerate()
            .map(|(j, &dot)| visible(i, j, q_len, k_len, causal).then_some(dot * scale))
            .collect();
        let m = nan_max(scores.iter().flatten().copied());
        if m == f64::NEG_INFINITY {
            continue; // no visible key, or every visible score −Inf: the row is 0
        }
        let p: Vec<f64> = scores
            .iter()
            .map(|s| s.map_or(0.0, |s| (s - m).exp()))
            .collect();
        let l: f64 = p.iter().sum();
        acc.fill(zero);
        for j in (0..k_len).filter(|&j| visible(i, j, q_len, k_len, causal)) {
            for (a, &x) in acc.iter_mut().zip(&vf[j * d..(j + 1) * d]) {
                *a += p[j] * x;
            }
        }
        for (o, a) in out[i * d..(i + 1) * d].iter_mut().zip(&acc) {
            *o = a / l;
        }
    }
    out
}

/// Plain attention at framework precision (see the module docs); outputs are values of the
/// input format.
pub fn attention_plain_lowprec(a: &Inputs) -> Vec<f64> {
    // The same arithmetic either way: `mul_add` is one rounding in hardware or in software.
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma") {
        // SAFETY: the CPU has AVX2 and FMA, checked just above.
        return unsafe { plain_fma(a) };
    }
    plain(a)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn plain_fma(a: &Inputs) -> Vec<f64> {
    plain(a)
}

#[inline(always)]
fn plain(a: &Inputs) -> Vec<f64> {
    let Inputs {
        q,
        k,
        v,
        q_len,
        k_len,
        d,
        causal,
        format,
        score_exp,
    } = *a;
    let scale = (1.0 / (d as f64).sqrt()) as f32 * 2f32.powi(-score_exp);
    let w = |x: &[u16]| -> Vec<f32> { x.iter().map(|&x| value(x, format) as f32).collect() };
    let (qf, kf, vf) = (w(q), w(k), w(v));
    let kt = transposed(&kf, d);
    let mut out = vec![0.0; q_len * d];
    let mut acc = vec![0.0f32; d];
    let mut dots = vec![0.0f32; k_len];
    for i in 0..q_len {
        let qi = &qf[i * d..(i + 1) * d];
        // Loops, not closures: a closure would not inherit `plain_fma`'s FMA feature, and each
        // `mul_add` would become a call. Every key's dot product side by side, each its d
        // products in order.
        dots.fill(0.0);
        for (&a, kx) in qi.iter().zip(kt.chunks_exact(k_len.max(1))) {
            for (dot, &b) in dots.iter_mut().zip(kx) {
                *dot = a.mul_add(b, *dot);
            }
        }
        let mut scores: Vec<Option<f32>> = Vec::with_capacity(k_len);
        for (j, &dot) in dots.iter().enumerate() {
            scores.push(visible(i, j, q_len, k_len, causal).then_some(dot * scale));
        }
        // Exact: every f32 is an f64.
        let m = nan_max(scores.iter().flatten().map(|&x| x as f64)) as f32;
        if m == f32::NEG_INFINITY {
            continue;
        }
        let e: Vec<f32> = scores
            .iter()
            .map(|s| s.map_or(0.0, |s| (s - m).exp()))
            .collect();
        let l: f32 = e.iter().sum();
        let p: Vec<f32> = e.iter().map(|&x| round_f32(x / l, format)).collect();
        // Each column's sum over the visible keys in order (keys outer, columns inner).
        acc.fill(0.0);
        for j in (0..k_len).filter(|&j| visible(i, j, q_len, k_len, causal)) {
            for (a, &x) in acc.iter_mut().zip(&vf[j * d..(j + 1) * d]) {
                *a = p[j].mul_add(x, *a);
            }
        }
        for (o, &a) in out[i * d..(i + 1) * d].iter_mut().zip(&acc) {
            *o = round_f32(a, format) as f64;
        }
    }
    out
}

/// `m` (rows of `d` values, row-major) transposed: `d` rows of one value per row of `m`.
fn transposed<T: Copy + Default>(m: &[T], d: usize) -> Vec<T> {
    let rows = m.len() / d.max(1);
    let mut t = vec![T::default(); m.len()];
    for (j, row) in m.chunks(d).enumerate() {
        for (x, &v) in row.iter().enumerate() {
            t[x * rows + j] = v;
        }
    }
    t
}

/// Largest |got − want| and largest finite |want| over all elements. Equal values count as
/// agreement (NaN and NaN, +Inf and +Inf); any other disagreement involving a NaN or an
/// infinity is an infinite error.
pub fn max_errors(got: &[f64], want: &[f64]) -> (f64, f64) {
    assert_eq!(got.len(), want.len());
    let mut err: f64 = 0.0;
    let mut scale: f64 = 0.0;
    for (&g, &w) in got.iter().zip(want) {
        err = err.max(abs_error(g, w));
        if w.is_finite() {
            scale = scale.max(w.abs());
        }
    }
    (err, scale)
}

/// |got − want|, 0 for equal special values (NaN and NaN count as equal), +Inf for any other
/// disagreement that involves a special value.
pub fn abs_error(got: f64, want: f64) -> f64 {
    if got == want || (got.is_nan() && want.is_nan()) {
        return 0.0;
    }
    let e = (got - want).abs();
    if e.is_finite() {
        e
    } else {
        f64::INFINITY
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ONE: u16 = 0x3C00;

    /// The references' own decoding and rounding agree with `half` on every binary16 and
    /// bfloat16 value, and on rounding binary32 values to both.
    #[test]
    fn definitions_agree_with_half() {
        use half::{bf16, f16};
        for x in 0..=u16::MAX {
            let (h, b) = (f16::from_bits(x).to_f64(), bf16::from_bits(x).to_f64());
            let got = (value(x, Format::FP16), value(x, Format::BF16));
            assert!(got.0.to_bits() == h.to_bits() || (got.0.is_nan() && h.is_nan()));
            assert!(got.1.to_bits() == b.to_bits() || (got.1.is_nan() && b.is_nan()));
        }
        let mut rng = crate::patterns::Rng(0x9E37_79B9_7F4A_7C15);
        for _ in 0..200_000 {
            let x = f32::from_bits(rng.next_u64() as u32);
            if x.is_nan() {
                continue;
            }
            assert_eq!(
                round_f32(x, Format::FP16).to_bits(),
                f16::from_f32(x).to_f32().to_bits()
            );
            assert_eq!(
                round_f32(x, Format::BF16).to_bits(),
                bf16::from_f32(x).to_f32().to_bits()
            );
        }
    }

    /// A reference on FP16 inputs: (Q, K, V, q_len, k_len, d, causal) → O.
    type Reference = fn(&[u16], &[u16], &[u16], usize, usize, usize, bool) -> Vec<f64>;

    /// Both references on FP16 inputs.
    fn refs() -> [Reference; 2] {
        fn inputs<'a>(
            q: &'a [u16],
            k: &'a [u16],
            v: &'a [u16],
            q_len: usize,
            k_len: usize,
            d: usize,
            causal: bool,
        ) -> Inputs<'a> {
            Inputs {
                q,
                k,
                v,
                q_len,
                k_len,
                d,
                causal,
                format: Format::FP16,
                score_exp: 0,
            }
        }
        [
            |q, k, v, ql, kl, d, c| attention_f64(&inputs(q, k, v, ql, kl, d, c)),
            |q, k, v, ql, kl, d, c| attention_plain_lowprec(&inputs(q, k, v, ql, kl, d, c)),
        ]
    }
    const NAN: u16 = 0x7E00;
    const NEG_INF: u16 = 0xFC00;

    #[test]
    fn equal_special_values_agree() {
        let (e, s) = max_errors(
            &[f64::INFINITY, f64::NEG_INFINITY, f64::NAN, 1.0],
            &[f64::INFINITY, f64::NEG_INFINITY, f64::NAN, 1.5],
        );
        assert_eq!((e, s), (0.5, 1.5));
        assert_eq!(abs_error(f64::INFINITY, f64::NEG_INFINITY), f64::INFINITY);
        assert_eq!(abs_error(1.0, f64::NAN), f64::INFINITY);
        assert_eq!(abs_error(f64::NAN, 1.0), f64::INFINITY);
    }

    #[test]
    fn a_nan_score_makes_its_row_nan() {
        // d = 1, two keys; the second key is NaN: row 0's score against it is NaN.
        let q = [ONE];
        let k = [ONE, NAN];
        let v = [ONE, ONE];
        for f in refs() {
            assert!(f(&q, &k, &v, 1, 2, 1, false)[0].is_nan());
        }
    }

    #[test]
    fn neg_inf_scores_contribute_nothing_and_an_all_neg_inf_row_is_zero() {
        // Keys 0 and 2 are −Inf: the output is V of key 1. A row with only −Inf keys is 0.
        let q = [ONE];
        let k = [NEG_INF, ONE, NEG_INF];
        let v = [0x4000, 0x4200, 0x4400]; // 2, 3, 4
        for f in refs() {
            assert_eq!(f(&q, &k, &v, 1, 3, 1, false), vec![3.0]);
            assert_eq!(
                f(&q, &[NEG_INF, NEG_INF], &v[..2], 1, 2, 1, false),
                vec![0.0]
            );
        }
    }

    #[test]
    fn the_causal_mask_is_bottom_right_aligned() {
        // 2 queries, 3 keys: query 0 sees keys 0 and 1, query 1 all three.
        assert!(visible(0, 1, 2, 3, true) && !visible(0, 2, 2, 3, true));
        assert!(visible(1, 2, 2, 3, true));
        // 3 queries, 1 key: only the last query sees it.
        assert!(!has_visible_key(1, 3, 1, true) && has_visible_key(2, 3, 1, true));
        assert!(has_visible_key(0, 3, 1, false));
    }
}
