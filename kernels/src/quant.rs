//! INT8/INT4 QKᵀ: the quantization of Q and K, and the scale each score is
//! dequantized by. The model only, so far; the RTL (integer MACs, two INT8 MACs per PE
//! cycle) is next.
//!
//! The granularity is the design study's choice (docs/numerics.md): Q per token (a scale per
//! query row), K per block of `bc` keys after smoothing (K's mean over all keys subtracted
//! per channel, SageAttention's step: q·(k − μ) = q·k − q·μ changes each row's scores by one
//! constant, which the softmax cancels). Quantization is symmetric, round to nearest even,
//! clamped to ±127 (INT8) or ±7 (INT4), the scale max|x| / 127 (or / 7); it happens on the
//! host, once per tensor, in f64.
//!
//! A score is the exact integer dot product of the quantized rows (|Σ| ≤ d · 127², exact in
//! binary32 for d ≤ 1024), and both scales fold into the multiply by C the row engine already
//! does: C' = (C · s_q[row]) · s_k[block], two binary32 roundings, once per row and block
//! ([`QuantQk::scale`]). Everything after S is the FP16 (or BF16) design's: the row max, the
//! weights, P·V.

use crate::format::Format;
use crate::fp::fp32_mul;
use crate::reference::value;

/// The integer format of Q and K.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum QkFormat {
    Int8,
    Int4,
}

impl QkFormat {
    /// The largest magnitude a value takes: 127 or 7.
    pub fn max(self) -> i32 {
        match self {
            QkFormat::Int8 => 127,
            QkFormat::Int4 => 7,
        }
    }

    /// `int8`, `int4`.
    pub fn name(self) -> &'static str {
        match self {
            QkFormat::Int8 => "int8",
            QkFormat::Int4 => "int4",
        }
    }

    /// Bits of a value: 8 or 4.
    pub fn bits(self) -> u32 {
        match self {
            QkFormat::Int8 => 8,
            QkFormat::Int4 => 4,
        }
    }

    /// Values a 16-bit element packs (the PE's products per cycle): 2 or 4.
    pub fn lanes(self) -> u32 {
        16 / self.bits()
    }
}

/// A design's integer QKᵀ: the format, and the keys that share a K scale (its Bc).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QuantSpec {
    pub format: QkFormat,
    pub bc: usize,
}

/// A multiply C' as the row engine uses it: a positive normal binary32 or +Inf is kept; +0 or
/// a subnormal (scales so small their product underflows) becomes the smallest normal, 2^−126,
/// and so does anything else (NaN, negative: a query row past the sequence, whose scale the
/// hardware reads from a stale landing-buffer row), so that a masked score's −Inf stays −Inf
/// (−Inf · 0 would be NaN).
pub fn positive_normal(c: u32) -> u32 {
    const MIN_NORMAL: u32 = 0x0080_0000;
    let (sign, exp, frac) = (c >> 31, (c >> 23) & 0xff, c & 0x7f_ffff);
    if sign == 1 || exp == 0 || (exp == 0xff && frac != 0) {
        MIN_NORMAL
    } else {
        c
    }
}

/// Lane `i` of a packed element (lane 0 in the low bits), sign-extended.
pub fn lane(x: u16, i: u32, format: QkFormat) -> i32 {
    let b = format.bits();
    let v = ((x >> (i * b)) as u32) & ((1 << b) - 1);
    ((v << (32 - b)) as i32) >> (32 - b)
}

/// The values `v` (each within the format's range) packed into 16-bit elements, lane 0 in the
/// low bits; a last element short of values is padded with zeros.
pub fn pack(v: &[i8], format: QkFormat) -> Vec<u16> {
    let (b, n) = (format.bits(), format.lanes() as usize);
    v.chunks(n)
        .map(|c| {
            c.iter().enumerate().fold(0u16, |acc, (i, &x)| {
                acc | (((x as u16) & ((1 << b) - 1)) << (i as u32 * b))
            })
        })
        .collect()
}

/// The PE's integer step: `acc + Σ a_i · b_i` over the lanes of two packed elements, in
/// two's complement int32 (wrapping, as the RTL's adder does; no sum of a head dimension's
/// products reaches 2^31).
pub fn dot_packed(acc: u32, a: u16, b: u16, format: QkFormat) -> u32 {
    (0..format.lanes())
        .map(|i| lane(a, i, format).wrapping_mul(lane(b, i, format)))
        .fold(acc as i32, |s, p| s.wrapping_add(p)) as u32
}

/// An int32 as binary32, rounded to nearest even (exact below 2^24 in magnitude).
pub fn int_to_f32(x: u32) -> u32 {
    (x as i32 as f32).to_bits()
}

/// Q and K quantized: `q` (q_len × d) and `k` (k_len × d) integers, a binary32 scale per query
/// row and per block of `bc` keys.
#[derive(Clone, Debug, PartialEq)]
pub struct QuantQk {
    pub format: QkFormat,
    pub q: Vec<i8>,
    pub k: Vec<i8>,
    pub q_scale: Vec<f32>,
    pub k_scale: Vec<f32>,
    pub bc: usize,
}

/// Symmetric quantization of `x` with the scale of its largest magnitude: (values, scale). A
/// group of zeros has scale 1.
fn quantize_group(x: &[f64], max: i32) -> (Vec<i8>, f32) {
    let amax = x.iter().fold(0.0f64, |a, &v| a.max(v.abs()));
    let scale = if amax == 0.0 {
        1.0
    } else {
        (amax / max as f64) as f32
    };
    let q = x
        .iter()
        .map(|&v| {
            (v / scale as f64)
                .round_ties_even()
                .clamp(-max as f64, max as f64) as i8
        })
        .collect();
    (q, scale)
}

impl QuantQk {
    /// Quantizes `q` (q_len × d) and `k` (k_len × d), values of `operand` (binary16 or
    /// bfloat16), for blocks of `bc` keys. NaN and infinite inputs cannot be quantized and are
    /// refused, naming the tensor and the place.
    #[allow(clippy::too_many_arguments)]
    pub fn quantize(
        q: &[u16],
        k: &[u16],
        q_len: usize,
        k_len: usize,
        d: usize,
        bc: usize,
        format: QkFormat,
        operand: Format,
    ) -> Result<QuantQk, String> {
        assert!(q.len() == q_len * d && k.len() == k_len * d && bc > 0);
        let decode = |t: &[u16], name: &str| -> Result<Vec<f64>, String> {
            t.iter()
                .enumerate()
                .map(|(i, &x)| {
                    let v = value(x, operand);
                    if v.is_finite() {
                        Ok(v)
                    } else {
                        Err(format!(
                            "{name}[{}][{}] = {v}: {} QK needs finite Q and K",
                            i / d,
                            i % d,
                            format.name()
                        ))
                    }
                })
                .collect()
        };
        let (qf, mut kf) = (decode(q, "Q")?, decode(k, "K")?);
        // Smoothing: each channel of K less its mean over the keys.
        for c in 0..d {
            let mean = (0..k_len).map(|j| kf[j * d + c]).sum::<f64>() / k_len.max(1) as f64;
            for j in 0..k_len {
                kf[j * d + c] -= mean;
            }
        }
        let max = format.max();
        let (mut qi, mut q_scale) = (Vec::with_capacity(q.len()), Vec::with_capacity(q_len));
        for row in qf.chunks(d.max(1)).take(q_len) {
            let (v, s) = quantize_group(row, max);
            qi.extend(v);
            q_scale.push(s);
        }
        let (mut ki, mut k_scale) = (Vec::with_capacity(k.len()), vec![]);
        for block in kf.chunks((bc * d).max(1)).take(k_len.div_ceil(bc)) {
            let (v, s) = quantize_group(block, max);
            ki.extend(v);
            k_scale.push(s);
        }
        Ok(QuantQk {
            format,
            q: qi,
            k: ki,
            q_scale,
            k_scale,
            bc,
        })
    }

    /// The score of query `i` and key `j`: the exact integer dot product.
    pub fn score(&self, i: usize, j: usize, d: usize) -> i32 {
        let (qi, kj) = (&self.q[i * d..(i + 1) * d], &self.k[j * d..(j + 1) * d]);
        qi.iter().zip(kj).map(|(&a, &b)| a as i32 * b as i32).sum()
    }

    /// The multiply of query `i`'s scores in the block of key `j` (binary32 bits), C given:
    /// (C · s_q[i]) · s_k[j / bc], [`positive_normal`].
    pub fn scale(&self, c: u32, i: usize, j: usize) -> u32 {
        let cq = fp32_mul(c, self.q_scale[i].to_bits());
        positive_normal(fp32_mul(cq, self.k_scale[j / self.bc].to_bits()))
    }

    /// Q's and K's rows as the hardware reads them from memory (q_len × d and k_len × d
    /// 16-bit elements, the shapes of the floating-point tensors): elements 0 and 1 hold the
    /// row's binary32 scale (low half first; a key's is its block's), the packed integers
    /// follow (`lanes` per element, [`pack`]), the rest of the row is zero.
    pub fn memory_rows(&self, d: usize) -> (Vec<u16>, Vec<u16>) {
        let rows = |x: &[i8], scale: &dyn Fn(usize) -> f32| -> Vec<u16> {
            let mut out = vec![0u16; x.len()];
            for (r, (src, dst)) in x.chunks(d).zip(out.chunks_mut(d)).enumerate() {
                let s = scale(r).to_bits();
                dst[0] = s as u16;
                dst[1] = (s >> 16) as u16;
                let packed = pack(src, self.format);
                dst[2..2 + packed.len()].copy_from_slice(&packed);
            }
            out
        };
        (
            rows(&self.q, &|r| self.q_scale[r]),
            rows(&self.k, &|r| self.k_scale[r / self.bc]),
        )
    }

    /// Q and K as the quantization left them (the values the integers and scales stand for,
    /// K smoothed), for the references: what the hardware's arithmetic is held to once the
    /// quantization is taken as given.
    pub fn dequantized(&self, d: usize) -> (Vec<f64>, Vec<f64>) {
        let q = self
            .q
            .iter()
            .enumerate()
            .map(|(n, &x)| x as f64 * self.q_scale[n / d] as f64)
            .collect();
        let k = self
            .k
            .iter()
            .enumerate()
            .map(|(n, &x)| x as f64 * self.k_scale[n / d / self.bc] as f64)
            .collect();
        (q, k)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::accuracy::quant_accuracy;
    use crate::flash::{FlashConfig, OutFormat, SoftmaxPass};
    use crate::patterns::Pattern;

    fn cfg(causal: bool) -> FlashConfig {
        FlashConfig {
            br: 16,
            bc: 16,
            head_dim: 32,
            cols: 8,
            causal,
            out: OutFormat::F32,
            softmax: SoftmaxPass::Online,
            operand: Format::FP16,
        }
    }

    /// Packing and the PE's integer step: lanes in the low bits first, sign-extended; the dot
    /// product of packed elements is the plain integer one; the conversion rounds to nearest
    /// even past 2^24.
    #[test]
    fn packed_dot_products_and_the_conversion() {
        for f in [QkFormat::Int8, QkFormat::Int4] {
            let m = f.max() as i8;
            let v: Vec<i8> = vec![m, -m, 1, -1, 0, m - 1, -m - 1, 3];
            let w: Vec<i8> = vec![-m, -m, 2, 5.min(m), 7.min(m), -1, -m - 1, 0];
            let (pv, pw) = (pack(&v, f), pack(&w, f));
            assert_eq!(pv.len(), v.len() / f.lanes() as usize);
            let unpacked: Vec<i32> = pv
                .iter()
                .flat_map(|&x| (0..f.lanes()).map(move |i| lane(x, i, f)))
                .collect();
            assert_eq!(unpacked, v.iter().map(|&x| x as i32).collect::<Vec<_>>());
            let want: i32 = v.iter().zip(&w).map(|(&a, &b)| a as i32 * b as i32).sum();
            let got = pv
                .iter()
                .zip(&pw)
                .fold(7u32, |acc, (&a, &b)| dot_packed(acc, a, b, f));
            assert_eq!(got as i32, want + 7, "{f:?}");
        }
        assert_eq!(pack(&[-1, 2], QkFormat::Int8), [0x02ff]);
        assert_eq!(pack(&[-1, 2, 3], QkFormat::Int4), [0x032f]);
        // The most negative lanes: (−128)² twice.
        assert_eq!(dot_packed(0, 0x8080, 0x8080, QkFormat::Int8), 32768);
        assert_eq!(dot_packed(u32::MAX, 0x0001, 0x0001, QkFormat::Int8), 0);
        for (x, want) in [
            (0i32, 0.0f32),
            (-1, -1.0),
            ((1 << 24) + 1, 16777216.0),
            ((1 << 24) + 3, 16777220.0),
            (i32::MIN, -2147483648.0),
            (i32::MAX, 2147483648.0),
        ] {
            assert_eq!(int_to_f32(x as u32), want.to_bits(), "{x}");
        }
    }

    /// Quantization's arithmetic: symmetric, nearest even, the scale of the largest
    /// magnitude, K smoothed; a zero group has scale 1; non-finite inputs are refused.
    #[test]
    fn quantization_rounds_clamps_and_smooths() {
        let h = |x: f32| half::f16::from_f32(x).to_bits();
        // d = 2: Q rows [1, -0.5] and [0, 0]; K rows [3, 1], [1, 1] (means 2 and 1).
        let q = [h(1.0), h(-0.5), h(0.0), h(0.0)];
        let k = [h(3.0), h(1.0), h(1.0), h(1.0)];
        let qk = QuantQk::quantize(&q, &k, 2, 2, 2, 2, QkFormat::Int8, Format::FP16).unwrap();
        // 1/127 rounds down in binary32: -0.5 is just past -63.5, -64.
        assert_eq!(qk.q, [127, -64, 0, 0]);
        assert_eq!(qk.q_scale, [1.0 / 127.0, 1.0]);
        assert_eq!(qk.k, [127, 0, -127, 0]); // smoothed: [1, 0], [-1, 0]
        assert_eq!(qk.score(0, 0, 2), 127 * 127);
        let q4 = QuantQk::quantize(&q, &k, 2, 2, 2, 2, QkFormat::Int4, Format::FP16).unwrap();
        // The scale 1/7 rounds up in binary32, so -0.5 is just inside -3.5: -3.
        assert_eq!(q4.q, [7, -3, 0, 0]);
        let bad = [h(1.0), h(f32::INFINITY), 0, 0];
        let e = QuantQk::quantize(&bad, &k, 2, 2, 2, 2, QkFormat::Int8, Format::FP16);
        assert!(e.unwrap_err().contains("Q[0][1] = inf"));
    }

    /// The hardware model on quantized Q and K: within FP16's contract (1e-3 of max |V|) of
    /// f64 attention on the dequantized values, so only the quantization departs from FP16
    /// attention; and that departure on uniform data, INT8 and INT4.
    #[test]
    fn quantized_scores_keep_the_arithmetic_within_fp16s_contract() {
        for causal in [false, true] {
            for pattern in [Pattern::Unit, Pattern::Dominant, Pattern::NegInfKeys] {
                if pattern == Pattern::NegInfKeys {
                    // −Inf keys cannot be quantized: refused, not run.
                    let r = quant_accuracy(pattern, 40, 70, &cfg(causal), QkFormat::Int8, 3);
                    assert!(r.unwrap_err().contains("needs finite Q and K"));
                    continue;
                }
                let a8 = quant_accuracy(pattern, 40, 70, &cfg(causal), QkFormat::Int8, 3).unwrap();
                let a4 = quant_accuracy(pattern, 40, 70, &cfg(causal), QkFormat::Int4, 3).unwrap();
                for a in [a8, a4] {
                    assert!(a.rel_err_dequantized <= 1e-3, "{pattern:?} {a:?}");
                }
                eprintln!("{pattern:?} causal={causal}: int8 {a8:?}, int4 {a4:?}");
                assert!(a8.rel_err < 3e-2, "{pattern:?} int8 {a8:?}");
                assert!(
                    a4.rel_err > a8.rel_err,
                    "{pattern:?} int4 {a4:?} int8 {a8:?}"
                );
            }
        }
    }
}
