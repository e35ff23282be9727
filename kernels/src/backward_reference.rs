//! The backward pass's references and its accuracy contract:
//! * [`backward_f64`]: the exact gradients of f64 attention on the inputs' values;
//! * [`backward_plain_lowprec`]: plain (untiled) attention's backward the way FP16 (or BF16)
//!   frameworks run it, autograd over the forward of `reference::attention_plain_lowprec`:
//!   P stored in the input format; dP = dO·Vᵀ and each gradient accumulated in FP32 and stored
//!   in the input format; softmax's backward dS = P ∘ (dP − Σ dP ∘ P) in FP32, stored; the
//!   score scale's backward dS · (1/√d), stored;
//! * [`GradAccuracy`]: FlashAttention's own test criterion, per gradient: the max absolute
//!   error against f64 within twice the plain backward's, plus one ulp of the input format at
//!   the gradient's magnitude, taken as its terms' ([`backward_f64_with_terms`]: FlashAttention
//!   takes D = rowsum(dO ∘ O) from the stored O, plain autograd Σ dP ∘ P, so where every key
//!   is alike and the gradient cancels to zero, the two differ by D's rounding).
//!
//! Both write the causal mask from its definition (`reference::visible`), not from `mask.rs`.
//! A query that sees no key, or only −Inf scores, has P = 0 and contributes nothing (the
//! forward's convention). With GQA each query head's gradients of K and V add up over the
//! group.

use crate::accuracy::ulp;
use crate::format::Format;
use crate::reference::{abs_error, nan_max, round, value, visible};

/// One K/V head's backward problem with its `group` query heads (see
/// `backward::BackwardProblem`; O and the log-sum-exp are the model's business, the references
/// recompute them).
#[derive(Clone, Copy, Debug)]
pub struct BackwardInputs<'a> {
    pub q: &'a [u16],
    pub k: &'a [u16],
    pub v: &'a [u16],
    pub d_o: &'a [u16],
    pub group: usize,
    pub q_len: usize,
    pub k_len: usize,
    pub d: usize,
    pub causal: bool,
    pub format: Format,
}

/// Gradients as values: dQ as Q is laid out (group × q_len × d), dK and dV as K and V.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct GradValues {
    pub dq: Vec<f64>,
    pub dk: Vec<f64>,
    pub dv: Vec<f64>,
}

/// One query row's unnormalized softmax weights exp(s − m) in the arithmetic `T`, m the row's
/// max as the forward references take it (`reference::nan_max`: a NaN score makes every
/// visible weight NaN); None scores are masked keys (0), and every weight is 0 when the row
/// sees no key or its max is −Inf.
fn weights<T: Copy + Into<f64>>(
    scores: &[Option<T>],
    exp_sub: impl Fn(T, f64) -> T,
    zero: T,
) -> Vec<T> {
    let m = nan_max(scores.iter().flatten().map(|&s| s.into()));
    if m == f64::NEG_INFINITY {
        return vec![zero; scores.len()];
    }
    scores
        .iter()
        .map(|s| s.map_or(zero, |s| exp_sub(s, m)))
        .collect()
}

/// The exact gradients (in f64) of attention softmax(Q·Kᵀ/√d)·V with upstream gradient dO.
pub fn backward_f64(a: &BackwardInputs) -> GradValues {
    backward_f64_with_terms(a).0
}

/// [`backward_f64`], and beside each gradient element the sum of its terms' magnitudes in the
/// expanded form FlashAttention computes it in: Σ_j P·(|dP| + |D|)·|K|/√d for dQ (D = Σ P ∘
/// dP), Σ_i P·(|dP| + |D|)·|Q|/√d for dK, Σ_i P·|dO| for dV. A gradient can cancel to zero
/// where its terms do not (every key alike: Σ_j dS = 0); the terms' scale is what its rounding
/// errors live on.
pub fn backward_f64_with_terms(a: &BackwardInputs) -> (GradValues, GradValues) {
    let BackwardInputs {
        group,
        q_len,
        k_len,
        d,
        causal,
        format,
        ..
    } = *a;
    let f = |x: &[u16]| -> Vec<f64> { x.iter().map(|&h| value(h, format)).collect() };
    let (q, k, v, d_o) = (f(a.q), f(a.k), f(a.v), f(a.d_o));
    let scale = 1.0 / (d as f64).sqrt();
    let zeros = || GradValues {
        dq: vec![0.0; group * q_len * d],
        dk: vec![0.0; k_len * d],
        dv: vec![0.0; k_len * d],
    };
    let (mut g, mut t) = (zeros(), zeros());
    for r in 0..group * q_len {
        let i = r % q_len;
        let qi = &q[r * d..(r + 1) * d];
        let doi = &d_o[r * d..(r + 1) * d];
        let scores: Vec<Option<f64>> = (0..k_len)
            .map(|j| {
                visible(i, j, q_len, k_len, causal)
                    .then(|| (0..d).map(|x| qi[x] * k[j * d + x]).sum::<f64>() * scale)
            })
            .collect();
        let e = weights(&scores, |s, m| (s - m).exp(), 0.0);
        let l: f64 = e.iter().sum();
        let p: Vec<f64> = e
            .iter()
            .map(|&x| if l == 0.0 { 0.0 } else { x / l })
            .collect();
        let dp: Vec<f64> = (0..k_len)
            .map(|j| (0..d).map(|x| doi[x] * v[j * d + x]).sum())
            .collect();
        let dd: f64 = (0..k_len).map(|j| p[j] * dp[j]).sum();
        for j in (0..k_len).filter(|&j| scores[j].is_some()) {
            let ds = p[j] * (dp[j] - dd);
            let ds_terms = p[j] * (dp[j].abs() + dd.abs());
            for x in 0..d {
                g.dv[j * d + x] += p[j] * doi[x];
                g.dq[r * d + x] += ds * k[j * d + x] * scale;
                g.dk[j * d + x] += ds * qi[x] * scale;
                t.dv[j * d + x] += (p[j] * doi[x]).abs();
                t.dq[r * d + x] += ds_terms * (k[j * d + x] * scale).abs();
                t.dk[j * d + x] += ds_terms * (qi[x] * scale).abs();
            }
        }
    }
    (g, t)
}

/// Plain attention's backward at framework precision (see the module docs); gradients are
/// values of the input format.
pub fn backward_plain_lowprec(a: &BackwardInputs) -> GradValues {
    let BackwardInputs {
        group,
        q_len,
        k_len,
        d,
        causal,
        format,
        ..
    } = *a;
    let f = |x: &[u16]| -> Vec<f32> { x.iter().map(|&h| value(h, format) as f32).collect() };
    let (q, k, v, d_o) = (f(a.q), f(a.k), f(a.v), f(a.d_o));
    let rd = |x: f32| round(x as f64, format) as f32;
    let scale = (1.0 / (d as f64).sqrt()) as f32;
    let dot = |a: &[f32], b: &[f32]| a.iter().zip(b).fold(0f32, |s, (&x, &y)| x.mul_add(y, s));
    let mut dq = vec![0f32; group * q_len * d];
    // Each head's dK and dV, stored, then summed over the group in FP32 and stored.
    let (mut dk_sum, mut dv_sum) = (vec![0f32; k_len * d], vec![0f32; k_len * d]);
    for h in 0..group {
        let (mut dk, mut dv) = (vec![0f32; k_len * d], vec![0f32; k_len * d]);
        for i in 0..q_len {
            let r = h * q_len + i;
            let qi = &q[r * d..(r + 1) * d];
            let doi = &d_o[r * d..(r + 1) * d];
            let scores: Vec<Option<f32>> = (0..k_len)
                .map(|j| {
                    visible(i, j, q_len, k_len, causal)
                        .then(|| dot(qi, &k[j * d..(j + 1) * d]) * scale)
                })
                .collect();
            let e = weights(&scores, |s, m| (s - m as f32).exp(), 0f32);
            let l: f32 = e.iter().sum();
            let p: Vec<f32> = e
                .iter()
                .map(|&x| if l == 0.0 { 0.0 } else { rd(x / l) })
                .collect();
            let dp: Vec<f32> = (0..k_len)
                .map(|j| rd(dot(doi, &v[j * d..(j + 1) * d])))
                .collect();
            let sum = (0..k_len).fold(0f32, |s, j| dp[j].mul_add(p[j], s));
            let dss: Vec<f32> = (0..k_len)
                .map(|j| rd(rd(p[j] * (dp[j] - sum)) * scale))
                .collect();
            for j in (0..k_len).filter(|&j| scores[j].is_some()) {
                for x in 0..d {
                    dv[j * d + x] = p[j].mul_add(doi[x], dv[j * d + x]);
                    dk[j * d + x] = dss[j].mul_add(qi[x], dk[j * d + x]);
                    dq[r * d + x] = dss[j].mul_add(k[j * d + x], dq[r * d + x]);
                }
            }
        }
        for (s, x) in dk_sum.iter_mut().zip(&dk) {
            *s += rd(*x);
        }
        for (s, x) in dv_sum.iter_mut().zip(&dv) {
            *s += rd(*x);
        }
    }
    let stored = |x: Vec<f32>| -> Vec<f64> { x.into_iter().map(|y| rd(y) as f64).collect() };
    GradValues {
        dq: stored(dq),
        dk: stored(dk_sum),
        dv: stored(dv_sum),
    }
}

/// One gradient against the references.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct TensorError {
    /// Max |got − f64| over the elements whose reference is finite (+Inf if one of them is
    /// NaN or infinite).
    pub max_abs_err: f64,
    /// The same error of the plain low-precision backward.
    pub plain_err: f64,
    /// Max finite |f64 reference|.
    pub scale: f64,
    /// Max finite sum of an element's terms' magnitudes ([`backward_f64_with_terms`]): the
    /// scale of the ulp in the bound.
    pub term_scale: f64,
    /// Elements that differ from a NaN or infinite reference (NaN agrees with NaN).
    pub special_mismatches: u64,
}

impl TensorError {
    fn of(got: &[f64], (want, terms): (&[f64], &[f64]), plain: &[f64]) -> TensorError {
        assert!(got.len() == want.len() && plain.len() == want.len());
        let mut t = TensorError::default();
        for (((&g, &w), &p), &m) in got.iter().zip(want).zip(plain).zip(terms) {
            if w.is_finite() {
                t.scale = t.scale.max(w.abs());
                if m.is_finite() {
                    t.term_scale = t.term_scale.max(m);
                }
                t.max_abs_err = t.max_abs_err.max(abs_error(g, w));
                t.plain_err = t.plain_err.max(abs_error(p, w));
            } else {
                t.special_mismatches += (abs_error(g, w) != 0.0) as u64;
            }
        }
        t
    }

    /// The contract's bound: twice the plain backward's error plus one ulp at the terms'
    /// scale (at least the gradient's own).
    pub fn limit(&self, format: Format) -> f64 {
        2.0 * self.plain_err + ulp(self.term_scale.max(self.scale), format)
    }
}

/// The gradients of a backward run against both references, and the contract that decides
/// whether they are correct ([`GradAccuracy::check`]).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct GradAccuracy {
    /// The inputs' format.
    pub format: Format,
    pub dq: TensorError,
    pub dk: TensorError,
    pub dv: TensorError,
}

impl GradAccuracy {
    /// Computes both references of `a` and compares `got` with them.
    pub fn of(got: &GradValues, a: &BackwardInputs) -> GradAccuracy {
        let ((want, terms), plain) = (backward_f64_with_terms(a), backward_plain_lowprec(a));
        GradAccuracy {
            format: a.format,
            dq: TensorError::of(&got.dq, (&want.dq, &terms.dq), &plain.dq),
            dk: TensorError::of(&got.dk, (&want.dk, &terms.dk), &plain.dk),
            dv: TensorError::of(&got.dv, (&want.dv, &terms.dv), &plain.dv),
        }
    }

    /// [`GradAccuracy::of`] on the backward model's bits (`out` their format).
    pub fn of_bits(
        g: &crate::backward::Grads,
        out: crate::flash::OutFormat,
        a: &BackwardInputs,
    ) -> GradAccuracy {
        let values = |x: &[u32]| crate::flash::decode(x, out, a.format);
        let got = GradValues {
            dq: values(&g.dq),
            dk: values(&g.dk),
            dv: values(&g.dv),
        };
        GradAccuracy::of(&got, a)
    }

    /// Ok when each of dQ, dK and dV is within its bound ([`TensorError::limit`]) and agrees
    /// with every special value of the f64 reference; otherwise what failed.
    pub fn check(&self) -> Result<(), String> {
        let mut bad = vec![];
        for (name, t) in [("dQ", &self.dq), ("dK", &self.dk), ("dV", &self.dv)] {
            let limit = t.limit(self.format);
            // A NaN error fails too.
            if t.max_abs_err.is_nan() || t.max_abs_err > limit {
                bad.push(format!(
                    "{name}: max |error| {:.3e} against f64 exceeds 2 × the plain {} backward's \
                     {:.3e} + one ulp at {:.3e} ({limit:.3e})",
                    t.max_abs_err,
                    self.format.name(),
                    t.plain_err,
                    t.term_scale.max(t.scale)
                ));
            }
            if t.special_mismatches > 0 {
                bad.push(format!(
                    "{name}: {} elements differ from a NaN or infinite reference",
                    t.special_mismatches
                ));
            }
        }
        if bad.is_empty() {
            Ok(())
        } else {
            Err(bad.join("; "))
        }
    }
}

/// Runs `pattern`'s backward problem through the forward model (O and LSE at the backward's
/// tiling, the forward's PE columns taken as its rows) and the backward model at `cfg`, and
/// compares the gradients with both references.
pub fn backward_accuracy_of(
    pattern: crate::patterns::Pattern,
    (group, q_len, k_len): (usize, usize, usize),
    cfg: &crate::backward::BackwardConfig,
    seed: u64,
) -> GradAccuracy {
    use crate::backward::{flash_attention_backward, saved_forward, BackwardProblem};
    use crate::flash::{FlashConfig, SoftmaxPass};
    let (d, format) = (cfg.head_dim, cfg.operand);
    let ((q, k, v), d_o) =
        crate::patterns::backward_tensors(pattern, (group, q_len, k_len, d), seed, format);
    let fwd = FlashConfig {
        br: cfg.br,
        bc: cfg.bc,
        head_dim: d,
        cols: cfg.rows,
        causal: cfg.causal,
        out: cfg.out,
        softmax: SoftmaxPass::Online,
        operand: format,
    };
    let (o, lse) = saved_forward((&q, &k, &v), (group, q_len, k_len), &fwd);
    let p = BackwardProblem {
        q: &q,
        k: &k,
        v: &v,
        o: &o,
        d_o: &d_o,
        lse: &lse,
        group,
        q_len,
        k_len,
    };
    let (g, _) = flash_attention_backward(&p, cfg);
    let inputs = BackwardInputs {
        q: &q,
        k: &k,
        v: &v,
        d_o: &d_o,
        group,
        q_len,
        k_len,
        d,
        causal: cfg.causal,
        format,
    };
    GradAccuracy::of_bits(&g, cfg.out, &inputs)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::patterns::Rng;
    use crate::reference::{attention_f64, Inputs};

    /// The f64 gradients are the derivatives of f64 attention: central differences of
    /// L = Σ dO ∘ O in each input element agree with them to 1e-6 relative (the inputs are
    /// perturbed in f64 through `attention_f64_values`, causal and not, GQA).
    #[test]
    fn f64_gradients_are_the_derivatives() {
        use crate::reference::attention_f64_values;
        let (group, q_len, k_len, d) = (2, 5, 7, 3);
        let mut rng = Rng(12345);
        let mut t = |n: usize| -> Vec<u16> { (0..n).map(|_| rng.uniform(-1.5, 1.5)).collect() };
        let (q, k, v, d_o) = (
            t(group * q_len * d),
            t(k_len * d),
            t(k_len * d),
            t(group * q_len * d),
        );
        for causal in [false, true] {
            let a = BackwardInputs {
                q: &q,
                k: &k,
                v: &v,
                d_o: &d_o,
                group,
                q_len,
                k_len,
                d,
                causal,
                format: Format::FP16,
            };
            let g = backward_f64(&a);
            let f = |x: &[u16]| -> Vec<f64> { x.iter().map(|&h| value(h, Format::FP16)).collect() };
            let (qf, kf, vf, dof) = (f(&q), f(&k), f(&v), f(&d_o));
            let loss = |qf: &[f64], kf: &[f64], vf: &[f64]| -> f64 {
                (0..group)
                    .map(|h| {
                        let qh = &qf[h * q_len * d..(h + 1) * q_len * d];
                        let o = attention_f64_values(qh, kf, vf, q_len, k_len, d, causal);
                        o.iter()
                            .zip(&dof[h * q_len * d..])
                            .map(|(a, b)| a * b)
                            .sum::<f64>()
                    })
                    .sum()
            };
            let eps = 1e-6;
            let check = |grad: &[f64], which: usize| {
                for at in 0..grad.len() {
                    let mut xs = [qf.clone(), kf.clone(), vf.clone()];
                    xs[which][at] += eps;
                    let up = loss(&xs[0], &xs[1], &xs[2]);
                    xs[which][at] -= 2.0 * eps;
                    let down = loss(&xs[0], &xs[1], &xs[2]);
                    let fd = (up - down) / (2.0 * eps);
                    assert!(
                        (fd - grad[at]).abs() <= 1e-6 * (1.0 + fd.abs()),
                        "input {which} element {at}: {fd} by differences, {} analytic",
                        grad[at]
                    );
                }
            };
            check(&g.dq, 0);
            check(&g.dk, 1);
            check(&g.dv, 2);
        }
        // The forward the loss used is the forward reference's.
        let a = Inputs {
            q: &q[..q_len * d],
            k: &k,
            v: &v,
            q_len,
            k_len,
            d,
            causal: false,
            format: Format::FP16,
            score_exp: 0,
        };
        assert_eq!(attention_f64(&a).len(), q_len * d);
    }

    /// The plain backward is within a few of its format's ulps of f64 on ordinary values:
    /// it is a reference worth bounding by, not a broken one.
    #[test]
    fn the_plain_backward_is_close_to_f64() {
        let (group, q_len, k_len, d) = (1, 16, 16, 8);
        let mut rng = Rng(7);
        let mut t = |n: usize| -> Vec<u16> { (0..n).map(|_| rng.uniform(-1.0, 1.0)).collect() };
        let (q, k, v, d_o) = (t(q_len * d), t(k_len * d), t(k_len * d), t(q_len * d));
        let a = BackwardInputs {
            q: &q,
            k: &k,
            v: &v,
            d_o: &d_o,
            group,
            q_len,
            k_len,
            d,
            causal: false,
            format: Format::FP16,
        };
        let (want, plain) = (backward_f64(&a), backward_plain_lowprec(&a));
        for (w, p) in [
            (&want.dq, &plain.dq),
            (&want.dk, &plain.dk),
            (&want.dv, &plain.dv),
        ] {
            let scale = w.iter().fold(0f64, |m, x| m.max(x.abs()));
            let err = w.iter().zip(p).fold(0f64, |m, (a, b)| m.max((a - b).abs()));
            assert!(
                err > 0.0 && err < 8.0 * ulp(scale, Format::FP16),
                "{err} at {scale}"
            );
        }
    }
}
