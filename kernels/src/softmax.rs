//! The online-softmax arithmetic of one query row, as the hardware does it.
//!
//! * Scores are scaled once, in FP32: t = s · C with C = f32(log2(e) / √d) ([`scale_constant`]).
//!   The row max is taken over the raw scores and scaled once per row: rounding is monotone, so
//!   that equals the max of the scaled scores, and it saves a multiplier in the max path.
//! * The running max m is kept in the log2 domain as an integer-valued FP32 (Softermax): a new
//!   block moves it to max(m, ceil(C · rowmax s)). The rescale factor 2^(m_old − m_new) is then an
//!   exact power of two, applied to l and O_acc as an exponent shift ([`fp32_scale2`]) of
//!   `shift` = min(m_new − m_old, 255) places. m starts at −Inf: a first block flushes the
//!   (zero) state; NaN and +Inf scores turn the row into NaN exactly as the f64 reference does.
//! * While the running max is still −Inf (every score so far −Inf or masked, e.g. K rows of
//!   −Inf used as padding), FlashAttention's rule applies: the max subtracted is +0, so a −Inf
//!   score gives p = +0 rather than exp2(−Inf − (−Inf)) = NaN, and the rescale is 1 (shift 0).
//! * p = exp2(t − m), rounded to FP16 (the S/P registers hold FP16); masked positions give +0.
//! * l = l · 2^-shift + rowsum(p) with the rowsum over the FP16 values widened to FP32, so the
//!   final normalization divides exactly the weights the PV products used.
//! * After the last block, r = 1 / l (correctly rounded), or 1 when l is 0 (a row whose keys
//!   are all masked), and out = O · r.

use crate::format::Format;
use crate::fp::*;

/// The softmax constant C = log2(e) / √d, rounded once to FP32 (f64 arithmetic here is
/// correctly rounded, so C is the same on every platform).
pub fn scale_constant(head_dim: usize) -> u32 {
    ((std::f64::consts::LOG2_E / (head_dim as f64).sqrt()) as f32).to_bits()
}

/// C for operands stored at per-tensor scales whose scores are 2^`score_exp` times the
/// problem's (Q scaled by 2^a and K by 2^b: `score_exp` = a + b): C · 2^−score_exp, exact,
/// so that s · C is the same number. `score_exp` 0 is [`scale_constant`].
pub fn scaled_constant(head_dim: usize, score_exp: i32) -> u32 {
    let c = f32::from_bits(scale_constant(head_dim)) as f64 * 2f64.powi(-score_exp);
    assert!(
        (2f64.powi(-126)..2f64.powi(127)).contains(&c),
        "a score scale of 2^{score_exp} takes C out of binary32's normal range"
    );
    (c as f32).to_bits()
}

/// t = s · C.
pub fn scale_score(s: u32, c: u32) -> u32 {
    fp32_mul_native(s, c) // = fp32_mul, on the host's FPU
}

/// The max a weight subtracts: m, or +0 while m is −Inf (no finite score seen yet).
pub fn subtracted_max(m: u32) -> u32 {
    if m == F32_NEG_INF {
        0
    } else {
        m
    }
}

/// The P value of a position: +0 if masked, else FP16(exp2(s · C − m)), with m replaced by +0
/// while it is −Inf ([`subtracted_max`]).
pub fn weight(s: u32, m: u32, c: u32, masked: bool) -> u16 {
    weight_in(s, m, c, masked, Format::FP16)
}

/// [`weight`] with P in `fmt` (the operand format): the same exp2, rounded to `fmt`.
pub fn weight_in(s: u32, m: u32, c: u32, masked: bool, fmt: Format) -> u16 {
    if masked {
        return 0;
    }
    narrow(unrounded_weight(s, negated_max(m), c), fmt)
}

/// −(the max a weight subtracts) ([`subtracted_max`]), once per row and block.
fn negated_max(m: u32) -> u32 {
    subtracted_max(m) ^ F32_SIGN
}

/// A weight before its rounding to the operand format: exp2(s · C − m) in binary32, `neg_m`
/// being [`negated_max`] (or, for the backward's recomputed weights, −LSE). fp32_add and
/// exp2's conversions on the host's FPU (bit-identical: see `fp`).
#[inline(always)]
pub fn unrounded_weight(s: u32, neg_m: u32, c: u32) -> u32 {
    exp2_native(fp32_add_native(scale_score(s, c), neg_m))
}

/// [`weight_in`] over one row of a block, the model's sweep: `w[j]` the weight of score
/// `s[j]` (+0 where `visible[j]` is false) and `wide[j]` that weight widened to binary32
/// ([`widen`]). FP16's weights go through the host's conversions a slice at a time (`half`'s
/// vector forms, F16C where the CPU has it); every format gives `weight_in`'s bits
/// (`weights_are_weight_in`).
#[inline(always)]
pub fn weights_in(
    s: &[u32],
    visible: &[bool],
    (m, c): (u32, u32),
    fmt: Format,
    w: &mut [u16],
    wide: &mut [u32],
) {
    let n = s.len();
    assert!(visible.len() == n && w.len() == n && wide.len() == n);
    if fmt != Format::FP16 {
        for j in 0..n {
            w[j] = weight_in(s[j], m, c, !visible[j], fmt);
            wide[j] = widen(w[j], fmt);
        }
        return;
    }
    use half::slice::{HalfBitsSliceExt, HalfFloatSliceExt};
    let neg_m = negated_max(m);
    let mut e = [0f32; 64];
    for at in (0..n).step_by(e.len()) {
        let k = e.len().min(n - at);
        let (e, w) = (&mut e[..k], &mut w[at..at + k]);
        for (x, (&sj, &vis)) in e.iter_mut().zip(s[at..].iter().zip(&visible[at..])) {
            *x = f32::from_bits(if vis {
                unrounded_weight(sj, neg_m, c)
            } else {
                0
            });
        }
        w.reinterpret_cast_mut::<half::f16>()
            .convert_from_f32_slice(e);
        for h in w.iter_mut().filter(|h| f16_is_nan(**h)) {
            *h = F16_QNAN;
        }
        w.reinterpret_cast::<half::f16>().convert_to_f32_slice(e);
        for (y, x) in wide[at..at + k].iter_mut().zip(e.iter()) {
            *y = canonical_nan(*x);
        }
    }
}

/// `min(d, 255)` for the integer-valued, non-negative FP32 difference `d`; NaN gives 255.
pub fn saturate_shift(d: u32) -> u8 {
    if f32_is_nan(d) {
        return 255;
    }
    let e = ((d >> 23) & 0xFF) as i32 - 127;
    if d & F32_SIGN != 0 || e < 0 {
        0
    } else if e >= 8 {
        255
    } else {
        (((d & 0x7F_FFFF) | 0x80_0000) >> (23 - e)) as u8
    }
}

/// What a block's max update did: the rescale shift it set (0: no rescale), and whether a
/// lazy threshold kept a stale max that would otherwise have rescaled.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MaxUpdate {
    pub shift: u8,
    pub avoided: bool,
}

/// The weight P that the backward pass recomputes from a score `s` and its row's saved
/// log-sum-exp `lse` ([`RowState::lse`], base 2): FP(exp2(s · C − lse)), rounded to `fmt` as
/// the forward's weights are ([`weight_in`], with the log-sum-exp in m's place). A row that
/// saw no key has lse = +Inf, so every weight is +0.
pub fn lse_weight(s: u32, lse: u32, c: u32, fmt: Format) -> u16 {
    narrow(unrounded_weight(s, lse ^ F32_SIGN, c), fmt)
}

/// Running state of one query row.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RowState {
    /// Running max of t, an integer-valued FP32 (or −Inf before any key, NaN after a NaN).
    pub m: u32,
    /// Running sum of the FP16 weights, in FP32.
    pub l: u32,
}

impl Default for RowState {
    fn default() -> Self {
        RowState {
            m: F32_NEG_INF,
            l: 0,
        }
    }
}

impl RowState {
    /// Takes a block's row max of the raw scores s (−Inf if every key is masked) and the
    /// constant C; returns the shift to apply to l and O_acc: 0 while the new max is still −Inf
    /// (the rescale is 1, not 2^(−Inf + Inf)).
    pub fn update_max(&mut self, block_max: u32, c: u32) -> u8 {
        self.update_max_lazy(block_max, c, 0).shift
    }

    /// [`RowState::update_max`] with lazy rescaling: a new max that exceeds m by at most
    /// `threshold` (τ) is not taken: m stays (stale), the shift is 0, and the block's weights
    /// exp2(t − m) reach up to 2^τ (FP16 holds them for τ ≤ 15). Exact in real arithmetic: the
    /// final O / l does not depend on which max was subtracted. A larger growth, and the first
    /// finite max (m = −Inf before it: shift 255), rescale as usual. τ = 0 is `update_max`.
    pub fn update_max_lazy(&mut self, block_max: u32, c: u32, threshold: u8) -> MaxUpdate {
        let m_new = fp32_max(self.m, fp32_ceil(scale_score(block_max, c)));
        let shift = if m_new == F32_NEG_INF {
            0
        } else {
            saturate_shift(fp32_add(m_new, self.m ^ F32_SIGN))
        };
        if shift != 0 && shift <= threshold {
            return MaxUpdate {
                shift: 0,
                avoided: true,
            };
        }
        self.m = m_new;
        MaxUpdate {
            shift,
            avoided: false,
        }
    }

    /// Takes a block's row sum of weights: l = l · 2^-shift + sum.
    pub fn update_sum(&mut self, block_sum: u32, shift: u8) {
        // fp32_add and fp32_scale2 on the host's FPU (bit-identical: see `fp`).
        self.l = fp32_add_native(fp32_scale2_native(self.l, shift), block_sum);
    }

    /// l is ±0: every key the row saw was masked or −Inf.
    fn l_zero(&self) -> bool {
        self.l & 0x7FFF_FFFF == 0
    }

    /// The row's log-sum-exp, what FlashAttention saves for its backward pass, in the exp
    /// unit's base: log2 Σ exp2(t) over the row's keys (t = s · C), which is log2(e) times the
    /// natural ln Σ exp(s/√d). In binary32, m + log2(l) ([`fp32_log2`]), one rounding: m is
    /// integer-valued, so this holds whether or not a lazy threshold left m stale, and the
    /// backward's s · C − lse meets the forward's t in its own units (a natural log-sum-exp,
    /// multiplied by ln 2 and back, lost up to two ulps of it: with scores near 2^30, whole
    /// powers of two of every weight). A row that saw no key (l = 0) gets +Inf,
    /// FlashAttention's convention, so that the backward's weights are +0; a NaN row stays
    /// NaN.
    pub fn lse(&self) -> u32 {
        if self.l_zero() {
            return F32_INF;
        }
        fp32_add(self.m, fp32_log2(self.l))
    }

    /// 1 / l, or 1 when l is zero (every key masked: O is zero and stays zero).
    pub fn reciprocal(&self) -> u32 {
        if self.l_zero() {
            F32_ONE
        } else {
            fp32_recip(self.l)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shift_saturates() {
        for (d, want) in [
            (0.0f32, 0u8),
            (1.0, 1),
            (7.0, 7),
            (255.0, 255),
            (256.0, 255),
            (1e30, 255),
        ] {
            assert_eq!(saturate_shift(d.to_bits()), want, "{d}");
        }
        assert_eq!(saturate_shift(F32_INF), 255);
        assert_eq!(saturate_shift(F32_QNAN), 255);
    }

    #[test]
    fn first_block_and_fully_masked_rows() {
        let mut r = RowState::default();
        let one = F32_ONE;
        // A block with every key masked: max is −Inf, nothing changes, the rescale is 1.
        assert_eq!(r.update_max(F32_NEG_INF, one), 0);
        r.update_sum(0, 0);
        assert_eq!(r, RowState::default());
        assert_eq!(r.reciprocal(), F32_ONE);
        // A real block: m = ceil(2.5) = 3.
        let shift = r.update_max(2.5f32.to_bits(), one);
        assert_eq!(f32::from_bits(r.m), 3.0);
        assert_eq!(shift, 255);
        r.update_sum(1.5f32.to_bits(), shift);
        assert_eq!(f32::from_bits(r.l), 1.5);
        // A larger max two steps up halves l twice.
        let shift = r.update_max(4.2f32.to_bits(), one);
        assert_eq!(shift, 2);
        r.update_sum(1.0f32.to_bits(), shift);
        assert_eq!(f32::from_bits(r.l), 1.5 / 4.0 + 1.0);
    }

    proptest::proptest! {
        /// The row sweep gives `weight_in`'s bits and their widening, element by element, in
        /// every operand format: scores of any bits (NaN, Inf, subnormal), masked or not, a
        /// running max from −Inf up, rows longer than the sweep's slice.
        #[test]
        fn weights_are_weight_in(
            s in proptest::collection::vec(proptest::prelude::any::<u32>(), 1..150),
            vis in proptest::collection::vec(proptest::prelude::any::<bool>(), 150),
            m in proptest::prelude::prop_oneof![
                proptest::prelude::Just(F32_NEG_INF),
                proptest::prelude::Strategy::prop_map(-200i32..200, |x| (x as f32).to_bits()),
            ],
            c_raw in 0.01f32..2.0,
            f in 0usize..4,
        ) {
            let fmt = [Format::FP16, Format::BF16, Format::FP8_E4M3, Format::FP8_E5M2][f];
            let (n, c) = (s.len(), c_raw.to_bits());
            let (mut w, mut wide) = (vec![0u16; n], vec![0u32; n]);
            weights_in(&s, &vis[..n], (m, c), fmt, &mut w, &mut wide);
            for j in 0..n {
                let want = weight_in(s[j], m, c, !vis[j], fmt);
                proptest::prop_assert_eq!(w[j], want, "s={:#010x} m={:#010x}", s[j], m);
                proptest::prop_assert_eq!(wide[j], widen(want, fmt));
            }
        }
    }

    #[test]
    fn scale_constant_for_d_128() {
        let c = f32::from_bits(scale_constant(128)) as f64;
        assert!((c - std::f64::consts::LOG2_E / 128f64.sqrt()).abs() < 1e-8);
    }
}
