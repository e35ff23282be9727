//! References for the accuracy contract (DESIGN.md §3):
//! * [`attention_f64`]: attention in f64 on the FP16 inputs' exact values;
//! * [`attention_plain_lowprec`]: plain (untiled) attention the way FP16 frameworks compute it:
//!   FP32 accumulation of Q·Kᵀ, softmax in FP32, P stored as FP16, P·V accumulated in FP32,
//!   output stored as FP16.
//!
//! Both use the causal mask of `mask.rs`; a query with no visible key outputs 0 (the
//! FlashAttention convention).

use half::f16;

use crate::mask::MaskSpec;

fn f(x: u16) -> f64 {
    f16::from_bits(x).to_f64()
}

/// Attention in f64: softmax(Q·Kᵀ/√d)·V.
pub fn attention_f64(
    q: &[u16],
    k: &[u16],
    v: &[u16],
    q_len: usize,
    k_len: usize,
    d: usize,
    causal: bool,
) -> Vec<f64> {
    let mask = MaskSpec {
        q_len,
        k_len,
        causal,
    };
    let scale = 1.0 / (d as f64).sqrt();
    let mut out = vec![0.0; q_len * d];
    for i in 0..q_len {
        let scores: Vec<Option<f64>> = (0..k_len)
            .map(|j| {
                (!mask.masked(i, j)).then(|| {
                    (0..d)
                        .map(|c| f(q[i * d + c]) * f(k[j * d + c]))
                        .sum::<f64>()
                        * scale
                })
            })
            .collect();
        let m = scores
            .iter()
            .flatten()
            .fold(f64::NEG_INFINITY, |a, &b| a.max(b));
        if m == f64::NEG_INFINITY {
            continue; // no visible key
        }
        let p: Vec<f64> = scores
            .iter()
            .map(|s| s.map_or(0.0, |s| (s - m).exp()))
            .collect();
        let l: f64 = p.iter().sum();
        for c in 0..d {
            let acc: f64 = (0..k_len)
                .filter(|&j| !mask.masked(i, j))
                .map(|j| p[j] * f(v[j * d + c]))
                .sum();
            out[i * d + c] = acc / l;
        }
    }
    out
}

/// Plain attention at framework precision (see the module docs); outputs are FP16 values.
pub fn attention_plain_lowprec(
    q: &[u16],
    k: &[u16],
    v: &[u16],
    q_len: usize,
    k_len: usize,
    d: usize,
    causal: bool,
) -> Vec<f64> {
    let mask = MaskSpec {
        q_len,
        k_len,
        causal,
    };
    let scale = (1.0 / (d as f64).sqrt()) as f32;
    let w = |x: u16| f16::from_bits(x).to_f32();
    let mut out = vec![0.0; q_len * d];
    for i in 0..q_len {
        let scores: Vec<Option<f32>> = (0..k_len)
            .map(|j| {
                (!mask.masked(i, j)).then(|| {
                    (0..d).fold(0.0f32, |acc, c| {
                        w(q[i * d + c]).mul_add(w(k[j * d + c]), acc)
                    }) * scale
                })
            })
            .collect();
        let m = scores
            .iter()
            .flatten()
            .fold(f32::NEG_INFINITY, |a, &b| a.max(b));
        if m == f32::NEG_INFINITY {
            continue;
        }
        let e: Vec<f32> = scores
            .iter()
            .map(|s| s.map_or(0.0, |s| (s - m).exp()))
            .collect();
        let l: f32 = e.iter().sum();
        let p: Vec<f32> = e.iter().map(|&x| f16::from_f32(x / l).to_f32()).collect();
        for c in 0..d {
            let acc = (0..k_len)
                .filter(|&j| !mask.masked(i, j))
                .fold(0.0f32, |acc, j| p[j].mul_add(w(v[j * d + c]), acc));
            out[i * d + c] = f16::from_f32(acc).to_f64();
        }
    }
    out
}

/// Largest |got − want| and largest |want| over all elements. NaN in `got` where `want` is
/// finite counts as an infinite error; NaN in both counts as agreement.
pub fn max_errors(got: &[f64], want: &[f64]) -> (f64, f64) {
    assert_eq!(got.len(), want.len());
    let mut err: f64 = 0.0;
    let mut scale: f64 = 0.0;
    for (&g, &w) in got.iter().zip(want) {
        if w.is_nan() && g.is_nan() {
            continue;
        }
        let e = (g - w).abs();
        err = err.max(if e.is_nan() { f64::INFINITY } else { e });
        if w.is_finite() {
            scale = scale.max(w.abs());
        }
    }
    (err, scale)
}
