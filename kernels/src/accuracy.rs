//! Accuracy of the hardware model against the references (DESIGN.md §3), and of exp2 against
//! f64, as figures a report can print and a test can assert on.

use half::f16;

use crate::flash::{decode, flash_attention, FlashConfig, OutFormat, Problem};
use crate::fp::exp2;
use crate::mask::MaskSpec;
use crate::patterns::{tensors, Pattern};
use crate::reference::{attention_f64, attention_plain_lowprec, max_errors};

/// How one attention problem came out.
#[derive(Clone, Copy, Debug)]
pub struct AttentionAccuracy {
    /// Max |O − O_ref| of the hardware model (worst of FP16 and FP32 output).
    pub hw_err: f64,
    /// Max |O − O_ref| of plain attention at FP16 storage / FP32 accumulation.
    pub plain_err: f64,
    /// max |O_ref|.
    pub out_scale: f64,
    /// max |V|: the scale every output lives on (a convex combination of V's rows).
    pub v_scale: f64,
    /// A query with no visible key produced a nonzero output (must never happen).
    pub masked_row_nonzero: bool,
}

impl AttentionAccuracy {
    /// The contract: hw ≤ 2 × plain + one FP16 ulp at the output's magnitude, hw ≤ 1e-3 · max|V|,
    /// fully masked rows exactly zero. Returns what failed.
    pub fn check(&self) -> Result<(), String> {
        let floor = fp16_ulp(self.out_scale);
        // NaN errors fail too: the comparison is written to be false for them.
        let within = self.hw_err <= 2.0 * self.plain_err + floor;
        if !within {
            return Err(format!(
                "error {:e} > 2 x plain {:e} + floor {floor:e}",
                self.hw_err, self.plain_err
            ));
        }
        if self.v_scale > 0.0 && self.hw_err / self.v_scale > 1e-3 {
            return Err(format!(
                "error {:e} is more than 1e-3 of max |V| = {:e}",
                self.hw_err, self.v_scale
            ));
        }
        if self.masked_row_nonzero {
            return Err("a fully masked row is not zero".into());
        }
        Ok(())
    }
}

/// One FP16 ulp at the magnitude `x` (the absolute floor of the contract).
pub fn fp16_ulp(x: f64) -> f64 {
    if x < 6.1e-5 {
        return 2f64.powi(-24);
    }
    2f64.powi(x.log2().floor() as i32 - 10)
}

/// Runs `pattern` through the hardware model (both output formats) and both references.
#[allow(clippy::too_many_arguments)]
pub fn attention_accuracy(
    pattern: Pattern,
    q_len: usize,
    k_len: usize,
    d: usize,
    br: usize,
    bc: usize,
    cols: usize,
    causal: bool,
    seed: u64,
) -> AttentionAccuracy {
    let (q, k, v) = tensors(pattern, q_len, k_len, d, seed);
    let want = attention_f64(&q, &k, &v, q_len, k_len, d, causal);
    let plain = attention_plain_lowprec(&q, &k, &v, q_len, k_len, d, causal);
    let (plain_err, out_scale) = max_errors(&plain, &want);
    let v_scale = v
        .iter()
        .map(|&x| f16::from_bits(x).to_f64().abs())
        .filter(|x| x.is_finite())
        .fold(0.0, f64::max);
    let problem = Problem {
        q: &q,
        k: &k,
        v: &v,
        q_len,
        k_len,
    };
    let mask = MaskSpec {
        q_len,
        k_len,
        causal,
    };
    let mut hw_err: f64 = 0.0;
    let mut masked_row_nonzero = false;
    for out in [OutFormat::F16, OutFormat::F32] {
        let cfg = FlashConfig {
            br,
            bc,
            head_dim: d,
            cols,
            causal,
            out,
        };
        let (bits, _) = flash_attention(&problem, &cfg);
        let got = decode(&bits, out);
        hw_err = hw_err.max(max_errors(&got, &want).0);
        for i in 0..q_len {
            let visible = (0..k_len).any(|j| !mask.masked(i, j));
            masked_row_nonzero |= !visible && got[i * d..(i + 1) * d].iter().any(|&x| x != 0.0);
        }
    }
    AttentionAccuracy {
        hw_err,
        plain_err,
        out_scale,
        v_scale,
        masked_row_nonzero,
    }
}

/// exp2's worst errors over inputs in [lo, hi).
#[derive(Clone, Copy, Debug)]
pub struct Exp2Range {
    pub lo: f32,
    pub hi: f32,
    pub points: u64,
    /// Worst |y − 2^x| / 2^x.
    pub max_rel: f64,
    /// Worst error in units of the result's last place (binary32, subnormal ulps included).
    pub max_ulps: f64,
}

/// exp2 against f64 over every `stride`-th binary32 input in [lo, hi).
pub fn exp2_accuracy(lo: f32, hi: f32, stride: u32) -> Exp2Range {
    let mut r = Exp2Range {
        lo,
        hi,
        points: 0,
        max_rel: 0.0,
        max_ulps: 0.0,
    };
    // Walk the binary32 values between lo and hi in order of their bit patterns.
    let order = |x: f32| crate::fp::f32_order_key(x.to_bits());
    let from_order = |k: u32| {
        if k & 0x8000_0000 != 0 {
            k & 0x7FFF_FFFF
        } else {
            !k
        }
    };
    let (mut k, end) = (order(lo), order(hi));
    while k < end {
        let x = f32::from_bits(from_order(k));
        let got = f32::from_bits(exp2(x.to_bits())) as f64;
        let want = (x as f64).exp2();
        let ulp = {
            let w = want.max(f32::from_bits(1) as f64);
            let e = (w.log2().floor() as i32).max(-126);
            2f64.powi(e - 23)
        };
        r.max_rel = r.max_rel.max(((got - want) / want).abs());
        r.max_ulps = r.max_ulps.max((got - want).abs() / ulp);
        r.points += 1;
        k = k.saturating_add(stride);
    }
    r
}
