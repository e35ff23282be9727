//! Q/K/V value patterns for accuracy studies: ordinary values and the hard cases of the accuracy
//! contract (docs/numerics.md: values up to ±65504, all-equal scores, one dominant score, large outputs). Deterministic
//! for a given seed.

use half::f16;

/// A value pattern for Q, K and V.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pattern {
    /// Uniform in [-1, 1].
    Unit,
    /// Uniform in [-65504, 65504]: scores up to ~1e11, one-hot softmax.
    Extreme,
    /// Every key identical: all scores of a row equal.
    EqualScores,
    /// One key aligned with each query, far above the rest.
    Dominant,
    /// Q, K in [-4, 4], V up to ±65504: large outputs.
    LargeValues,
    /// Padding keys: Q in [0.25, 1] (positive), K in [-1, 1] with runs of rows set to −Inf
    /// (the run length 1 to 16 drawn from the seed, every third run), V in [-1, 1]. Scores of
    /// padded keys are −Inf; whole blocks of them, and rows that see only them, occur.
    NegInfKeys,
}

impl Pattern {
    pub const ALL: [Pattern; 6] = [
        Pattern::Unit,
        Pattern::Extreme,
        Pattern::EqualScores,
        Pattern::Dominant,
        Pattern::LargeValues,
        Pattern::NegInfKeys,
    ];
}

/// FP16 −Inf.
pub const F16_NEG_INF: u16 = 0xFC00;

/// Sets key rows `rows` of K (rows × d) to −Inf.
pub fn pad_keys(k: &mut [u16], d: usize, rows: impl IntoIterator<Item = usize>) {
    for j in rows {
        k[j * d..(j + 1) * d].fill(F16_NEG_INF);
    }
}

/// xorshift64: a small deterministic generator.
pub struct Rng(pub u64);

impl Rng {
    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    /// An FP16 value uniform in [lo, hi].
    pub fn uniform(&mut self, lo: f32, hi: f32) -> u16 {
        let u = (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
        f16::from_f64(lo as f64 + u * (hi - lo) as f64).to_bits()
    }
}

/// FP16 Q (q_len × d), K and V (k_len × d) of `pattern`.
pub fn tensors(
    pattern: Pattern,
    q_len: usize,
    k_len: usize,
    d: usize,
    seed: u64,
) -> (Vec<u16>, Vec<u16>, Vec<u16>) {
    let mut rng = Rng(seed | 1);
    let mut gen =
        |n: usize, lo: f32, hi: f32| (0..n).map(|_| rng.uniform(lo, hi)).collect::<Vec<u16>>();
    match pattern {
        Pattern::Unit => (
            gen(q_len * d, -1.0, 1.0),
            gen(k_len * d, -1.0, 1.0),
            gen(k_len * d, -1.0, 1.0),
        ),
        Pattern::Extreme => (
            gen(q_len * d, -65504.0, 65504.0),
            gen(k_len * d, -65504.0, 65504.0),
            gen(k_len * d, -65504.0, 65504.0),
        ),
        Pattern::EqualScores => {
            let q = gen(q_len * d, -2.0, 2.0);
            let key = gen(d, -2.0, 2.0);
            let k = (0..k_len).flat_map(|_| key.clone()).collect();
            (q, k, gen(k_len * d, -1.0, 1.0))
        }
        Pattern::Dominant => {
            let k = gen(k_len * d, -0.5, 0.5);
            let q = (0..q_len)
                .flat_map(|i| {
                    let j = (i * 7) % k_len.max(1);
                    k[j * d..(j + 1) * d]
                        .iter()
                        .map(|&x| f16::from_f32(f16::from_bits(x).to_f32() * 24.0).to_bits())
                        .collect::<Vec<_>>()
                })
                .collect();
            (q, k, gen(k_len * d, -1.0, 1.0))
        }
        Pattern::LargeValues => (
            gen(q_len * d, -4.0, 4.0),
            gen(k_len * d, -4.0, 4.0),
            gen(k_len * d, -65504.0, 65504.0),
        ),
        Pattern::NegInfKeys => {
            let run = 1 << ((seed >> 3) % 5);
            let q = gen(q_len * d, 0.25, 1.0);
            let mut k = gen(k_len * d, -1.0, 1.0);
            let v = gen(k_len * d, -1.0, 1.0);
            pad_keys(
                &mut k,
                d,
                (0..k_len).filter(|j| (j / run).is_multiple_of(3)),
            );
            (q, k, v)
        }
    }
}

/// Q, K and V: bits of the operand format, row-major.
pub type Tensors = (Vec<u16>, Vec<u16>, Vec<u16>);

/// [`tensors`] in `format`: binary16 as they are, bfloat16 as the binary16 values rounded
/// (nearest even) to bfloat16's 8 significant bits, so both formats see the same problems
/// (the same ranges, the same −Inf padding); a format of a narrower range (FP8) at per-tensor
/// scales that fit each tensor into it (`operands::round_scaled`), which the second result
/// names.
pub fn tensors_in(
    pattern: Pattern,
    q_len: usize,
    k_len: usize,
    d: usize,
    seed: u64,
    format: crate::format::Format,
) -> (Tensors, crate::operands::TensorScales) {
    use crate::format::Format;
    let (q, k, v) = tensors(pattern, q_len, k_len, d, seed);
    if crate::operands::scaled_per_tensor(format) {
        let to = |x: Vec<u16>| {
            let wide: Vec<u64> = x.into_iter().map(u64::from).collect();
            crate::operands::round_scaled(&wide, Format::FP16, format)
        };
        let ((q, eq), (k, ek), (v, ev)) = (to(q), to(k), to(v));
        let scales = crate::operands::TensorScales {
            q: eq,
            k: ek,
            v: ev,
        };
        return ((q, k, v), scales);
    }
    let to = |x: Vec<u16>| -> Vec<u16> {
        x.into_iter()
            .map(|h| crate::fp::convert(h as u64, Format::FP16, format) as u16)
            .collect()
    };
    ((to(q), to(k), to(v)), Default::default())
}

/// A backward problem's inputs in `format`: Q and dO of `group` query heads (group × q_len ×
/// d, head after head), K and V (k_len × d). Q, K and V are [`tensors_in`]'s of `pattern`
/// (each head's Q from its own seed), dO uniform in [−1, 1].
pub fn backward_tensors(
    pattern: Pattern,
    (group, q_len, k_len, d): (usize, usize, usize, usize),
    seed: u64,
    format: crate::format::Format,
) -> (Tensors, Vec<u16>) {
    use crate::format::Format;
    let ((_, k, v), _) = tensors_in(pattern, 1, k_len, d, seed, format);
    let mut q = Vec::with_capacity(group * q_len * d);
    for h in 0..group as u64 {
        let head_seed = seed ^ (h + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        q.extend(tensors_in(pattern, q_len, 1, d, head_seed, format).0 .0);
    }
    let mut rng = Rng(seed | 1);
    let d_o = (0..group * q_len * d)
        .map(|_| crate::fp::convert(rng.uniform(-1.0, 1.0) as u64, Format::FP16, format) as u16)
        .collect();
    ((q, k, v), d_o)
}
