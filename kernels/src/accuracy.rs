//! Accuracy of the hardware model against the references (docs/numerics.md), and of exp2 against
//! f64, as figures a report can print and a test can assert on.

use crate::flash::{decode, flash_attention, FlashConfig, OutFormat, Problem, SoftmaxPass};
use crate::format::Format;
use crate::fp::exp2;
use crate::patterns::{tensors_in, Pattern};
use crate::reference::{
    abs_error, attention_f64, attention_plain_lowprec, has_visible_key, value, Inputs,
};

/// How an attention output compares with the references, and the contract of docs/numerics.md
/// that decides whether it is correct ([`Accuracy::check`]). One definition serves the model's
/// accuracy tests, `regflash accuracy`, and every RTL run (`sim`, `bench`, `verify`, tests).
///
/// Relative error is max |O − O_f64| / max |V|: every output is a convex combination of V's
/// rows, so max |V| is the scale its rounding errors live on (relative to max |O_f64| instead,
/// plain FP16 attention itself exceeds 1e-3 when V's values cancel).
///
/// The limits follow the inputs' format ([`Accuracy::format`]): the relative limit is 1e-3
/// for binary16 and scales with the unit roundoff, 8e-3 for bfloat16's 8 significant bits
/// ([`max_rel_err`]); the absolute floor is one ulp of that format.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Accuracy {
    /// The inputs' (and P's, and the short output's) format: binary16 or bfloat16.
    pub format: Format,
    /// Max |O − O_f64| over the outputs whose reference is finite (+Inf if one of them is NaN
    /// or infinite).
    pub max_abs_err: f64,
    /// The same error of plain attention at FP16 storage and FP32 accumulation.
    pub plain_err: f64,
    /// Max finite |O_f64|.
    pub out_scale: f64,
    /// Max finite |V|.
    pub v_scale: f64,
    /// Outputs that are NaN or ±Inf, wherever they are (NaN inputs make NaN outputs that the
    /// contract expects: this counts them too).
    pub nonfinite_outputs: u64,
    /// Outputs that are NaN or ±Inf where the f64 reference is finite: the contract's count.
    pub nonfinite_where_finite: u64,
    /// Outputs that differ from a NaN or ±Inf reference (NaN agrees with NaN).
    pub special_mismatches: u64,
    /// Nonzero outputs of queries that see no key (they must be exactly 0).
    pub masked_row_nonzero: u64,
}

/// The relative-error limit of the contract for binary16 inputs.
pub const MAX_REL_ERR: f64 = 1e-3;

/// The relative-error limit for inputs in `format`: [`MAX_REL_ERR`] scaled by the format's
/// unit roundoff against binary16's (2^(10 − man)): 1e-3 for binary16, 8e-3 for bfloat16.
pub fn max_rel_err(format: Format) -> f64 {
    MAX_REL_ERR * 2f64.powi(10 - format.man as i32)
}

impl Accuracy {
    /// The figures of a run on operands stored at per-tensor scales, in the problem's units:
    /// the errors and magnitudes (O's and V's, 2^`v_exp` times the problem's) scaled back,
    /// exactly. The contract's ratios are the same.
    pub fn descaled(self, v_exp: i32) -> Accuracy {
        let back = 2f64.powi(-v_exp);
        Accuracy {
            max_abs_err: self.max_abs_err * back,
            plain_err: self.plain_err * back,
            out_scale: self.out_scale * back,
            v_scale: self.v_scale * back,
            ..self
        }
    }

    /// Compares `got` (q_len × d) with the f64 reference `want` and the plain reference `plain`
    /// of the same problem `p` (its V gives the scale).
    pub fn of_output(got: &[f64], want: &[f64], plain: &[f64], p: &Inputs) -> Accuracy {
        let Inputs {
            v,
            q_len,
            k_len,
            d,
            causal,
            format,
            ..
        } = *p;
        assert!(got.len() == q_len * d && want.len() == got.len() && plain.len() == got.len());
        let mut a = Accuracy {
            format,
            v_scale: v
                .iter()
                .map(|&x| value(x, format).abs())
                .filter(|x| x.is_finite())
                .fold(0.0, f64::max),
            ..Accuracy::default()
        };
        for (i, ((&g, &w), &pl)) in got.iter().zip(want).zip(plain).enumerate() {
            if w.is_finite() {
                a.out_scale = a.out_scale.max(w.abs());
                a.max_abs_err = a.max_abs_err.max(abs_error(g, w));
                a.plain_err = a.plain_err.max(abs_error(pl, w));
                a.nonfinite_where_finite += !g.is_finite() as u64;
            } else {
                a.special_mismatches += (abs_error(g, w) != 0.0) as u64;
            }
            a.nonfinite_outputs += !g.is_finite() as u64;
            let row = i / d;
            a.masked_row_nonzero +=
                (!has_visible_key(row, q_len, k_len, causal) && g != 0.0) as u64;
        }
        a
    }

    /// Computes both references of one head (`p`, head dimension `d`, inputs in `format`) and
    /// compares `got` with them.
    pub fn of_attention(
        p: &Problem,
        d: usize,
        causal: bool,
        format: Format,
        got: &[f64],
    ) -> Accuracy {
        let inputs = Inputs {
            q: p.q,
            k: p.k,
            v: p.v,
            q_len: p.q_len,
            k_len: p.k_len,
            d,
            causal,
            format,
            score_exp: p.score_exp,
        };
        let want = attention_f64(&inputs);
        let plain = attention_plain_lowprec(&inputs);
        Accuracy::of_output(got, &want, &plain, &inputs)
    }

    /// Integer QKᵀ: `got` (one head) against exact attention on the quantized Q and K (the
    /// values the integers and scales stand for, `QuantQk::dequantized`), with plain attention
    /// on those values rounded to `format` as the plain reference: the contract of the
    /// arithmetic once the quantization is taken as given. (What the quantization itself costs
    /// against the original Q and K is measured apart: [`quant_accuracy`].)
    pub fn of_quantized(
        p: &Problem,
        quant: &crate::quant::QuantQk,
        d: usize,
        causal: bool,
        format: Format,
        got: &[f64],
    ) -> Accuracy {
        let (dq, dk) = quant.dequantized(d);
        let vf: Vec<f64> = p.v.iter().map(|&x| value(x, format)).collect();
        let want =
            crate::reference::attention_f64_values(&dq, &dk, &vf, p.q_len, p.k_len, d, causal);
        let round = |x: &[f64]| -> Vec<u16> {
            x.iter()
                .map(|&v| {
                    crate::fp::convert((v as f32).to_bits() as u64, Format::FP32, format) as u16
                })
                .collect()
        };
        let (rq, rk) = (round(&dq), round(&dk));
        let inputs = Inputs {
            q: &rq,
            k: &rk,
            v: p.v,
            q_len: p.q_len,
            k_len: p.k_len,
            d,
            causal,
            format,
            score_exp: 0,
        };
        let plain = attention_plain_lowprec(&inputs);
        Accuracy::of_output(got, &want, &plain, &inputs)
    }

    /// Both comparisons at once (several heads, or both output formats): the worst of each.
    pub fn merge(self, o: Accuracy) -> Accuracy {
        debug_assert_eq!(self.format, o.format, "accuracies of two input formats");
        Accuracy {
            format: self.format,
            max_abs_err: self.max_abs_err.max(o.max_abs_err),
            plain_err: self.plain_err.max(o.plain_err),
            out_scale: self.out_scale.max(o.out_scale),
            v_scale: self.v_scale.max(o.v_scale),
            nonfinite_outputs: self.nonfinite_outputs + o.nonfinite_outputs,
            nonfinite_where_finite: self.nonfinite_where_finite + o.nonfinite_where_finite,
            special_mismatches: self.special_mismatches + o.special_mismatches,
            masked_row_nonzero: self.masked_row_nonzero + o.masked_row_nonzero,
        }
    }

    /// max |O − O_f64| / max |V| (0 when both are 0).
    pub fn rel_err(&self) -> f64 {
        if self.max_abs_err == 0.0 {
            0.0
        } else {
            self.max_abs_err / self.v_scale
        }
    }

    /// Plain FP16 attention's own relative error: plain error / max |V|.
    pub fn plain_rel_err(&self) -> f64 {
        if self.plain_err == 0.0 {
            0.0
        } else {
            self.plain_err / self.v_scale
        }
    }

    /// Inputs beyond the contract's reach: the output is within the absolute bound (as close
    /// to f64 as plain FP16 attention, twice over), but plain FP16 attention itself misses the
    /// relative limit, so no design with FP16 storage and FP32 accumulation meets it. Scores
    /// of extreme magnitude do this: FP32 sums of products near 65504² cannot tell which key
    /// dominates. Such a run is not correct by the contract and never passes; this says why.
    pub fn beyond_reach(&self) -> bool {
        let within = |x: f64, limit: f64| x.partial_cmp(&limit).is_some_and(|o| o.is_le());
        within(self.max_abs_err, self.abs_bound()) && self.plain_rel_err() > self.rel_limit()
    }

    /// The absolute bound: 2 × the plain error + one ulp of the inputs' format at max |O_f64|.
    pub fn abs_bound(&self) -> f64 {
        2.0 * self.plain_err + ulp(self.out_scale, self.format)
    }

    /// The relative limit for the inputs' format ([`max_rel_err`]).
    pub fn rel_limit(&self) -> f64 {
        max_rel_err(self.format)
    }

    /// The contract: no NaN or Inf where the reference is finite, special values where the
    /// reference has them, fully masked rows exactly zero, max |O − O_f64| within
    /// [`Accuracy::abs_bound`], and relative error within [`MAX_REL_ERR`]. Returns what failed.
    pub fn check(&self) -> Result<(), String> {
        if self.nonfinite_where_finite > 0 {
            return Err(format!(
                "{} outputs are NaN or infinite where the f64 reference is finite",
                self.nonfinite_where_finite
            ));
        }
        if self.special_mismatches > 0 {
            return Err(format!(
                "{} outputs differ from a NaN or infinite f64 reference",
                self.special_mismatches
            ));
        }
        if self.masked_row_nonzero > 0 {
            return Err(format!(
                "{} outputs of queries that see no key are not zero",
                self.masked_row_nonzero
            ));
        }
        // NaN compares as None, and fails.
        let within = |x: f64, limit: f64| x.partial_cmp(&limit).is_some_and(|o| o.is_le());
        if !within(self.max_abs_err, self.abs_bound()) {
            return Err(format!(
                "max |O - O_f64| = {:.3e} exceeds 2 x plain {} attention's {:.3e} + one {} ulp of \
                 max |O_f64| ({:.3e})",
                self.max_abs_err,
                self.format.short_name(),
                self.plain_err,
                self.format.short_name(),
                ulp(self.out_scale, self.format)
            ));
        }
        if !within(self.rel_err(), self.rel_limit()) {
            let why = if self.beyond_reach() {
                format!(
                    "; plain {f} attention's own is {:.3e}: these inputs are beyond what {f} \
                     storage with FP32 accumulation resolves, so the contract cannot be met \
                     (scale Q and K down)",
                    self.plain_rel_err(),
                    f = self.format.short_name()
                )
            } else {
                String::new()
            };
            return Err(format!(
                "relative error {:.3e} (max |O - O_f64| / max |V| = {:.3e} / {:.3e}) exceeds \
                 {:e}{why}",
                self.rel_err(),
                self.max_abs_err,
                self.v_scale,
                self.rel_limit()
            ));
        }
        Ok(())
    }
}

/// One FP16 ulp at the magnitude `x` (the absolute floor of the contract).
pub fn fp16_ulp(x: f64) -> f64 {
    ulp(x, Format::FP16)
}

/// One ulp of `format` at the magnitude `x` (subnormal spacing below the smallest normal).
pub fn ulp(x: f64, format: Format) -> f64 {
    let min_exp = 1 - format.bias() as i32;
    let e = if x > 0.0 {
        x.log2().floor() as i32
    } else {
        min_exp
    };
    2f64.powi(e.max(min_exp) - format.man as i32)
}

/// Runs `pattern` through the fused hardware model (online softmax; both output formats) and
/// both references.
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
) -> Accuracy {
    let cfg = FlashConfig {
        br,
        bc,
        head_dim: d,
        cols,
        causal,
        out: OutFormat::Short,
        softmax: SoftmaxPass::Online,
        operand: Format::FP16,
    };
    attention_accuracy_of(pattern, q_len, k_len, &cfg, seed)
}

/// Runs `pattern` through the hardware model `cfg` describes (both output formats, whatever
/// `cfg.out` says) and both references.
pub fn attention_accuracy_of(
    pattern: Pattern,
    q_len: usize,
    k_len: usize,
    cfg: &FlashConfig,
    seed: u64,
) -> Accuracy {
    let (d, causal, format) = (cfg.head_dim, cfg.causal, cfg.operand);
    let ((q, k, v), scales) = tensors_in(pattern, q_len, k_len, d, seed, format);
    let inputs = Inputs {
        q: &q,
        k: &k,
        v: &v,
        q_len,
        k_len,
        d,
        causal,
        format,
        score_exp: scales.score_exp(),
    };
    let want = attention_f64(&inputs);
    let plain = attention_plain_lowprec(&inputs);
    let problem = Problem {
        q: &q,
        k: &k,
        v: &v,
        q_len,
        k_len,
        score_exp: scales.score_exp(),
    };
    [OutFormat::Short, OutFormat::F32]
        .map(|out| {
            let (bits, _) = flash_attention(&problem, &FlashConfig { out, ..*cfg });
            let got = decode(&bits, out, format);
            Accuracy::of_output(&got, &want, &plain, &inputs).descaled(scales.v)
        })
        .into_iter()
        .reduce(Accuracy::merge)
        .expect("two formats")
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

/// How quantized QKᵀ's output compares with f64 attention: on the original Q and K (the
/// quantization's error and the arithmetic's together), and on the dequantized Q and K (the
/// arithmetic's alone, which FP16's contract bounds), both as max |O − O_ref| / max |V|.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct QuantAccuracy {
    pub rel_err: f64,
    pub rel_err_dequantized: f64,
}

/// Runs `pattern` with Q and K quantized to `format` through the hardware model `cfg` (FP32
/// output) and both references.
pub fn quant_accuracy(
    pattern: crate::patterns::Pattern,
    q_len: usize,
    k_len: usize,
    cfg: &crate::flash::FlashConfig,
    format: crate::quant::QkFormat,
    seed: u64,
) -> Result<QuantAccuracy, String> {
    use crate::flash::flash_attention_quant;
    use crate::quant::QuantQk;
    use crate::reference::{attention_f64_values, max_errors, value};
    let (d, causal, operand) = (cfg.head_dim, cfg.causal, cfg.operand);
    let ((q, k, v), scales) = crate::patterns::tensors_in(pattern, q_len, k_len, d, seed, operand);
    if scales != Default::default() {
        return Err(format!(
            "integer QKᵀ takes operands stored as they are, not {} at per-tensor scales",
            operand.short_name()
        ));
    }
    let qk = QuantQk::quantize(&q, &k, q_len, k_len, d, cfg.bc, format, operand)?;
    let p = Problem {
        q: &q,
        k: &k,
        v: &v,
        q_len,
        k_len,
        score_exp: 0,
    };
    let cfg = crate::flash::FlashConfig {
        out: OutFormat::F32,
        ..*cfg
    };
    let (bits, _) = flash_attention_quant(&p, &qk, &cfg);
    let got: Vec<f64> = bits.iter().map(|&b| f32::from_bits(b) as f64).collect();
    let f = |t: &[u16]| -> Vec<f64> { t.iter().map(|&x| value(x, operand)).collect() };
    let (qf, kf, vf) = (f(&q), f(&k), f(&v));
    let v_scale = vf.iter().fold(0.0f64, |a, &x| a.max(x.abs()));
    let rel = |want: &[f64]| max_errors(&got, want).0 / v_scale.max(f64::MIN_POSITIVE);
    let (dq, dk) = qk.dequantized(d);
    Ok(QuantAccuracy {
        rel_err: rel(&attention_f64_values(
            &qf, &kf, &vf, q_len, k_len, d, causal,
        )),
        rel_err_dequantized: rel(&attention_f64_values(
            &dq, &dk, &vf, q_len, k_len, d, causal,
        )),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An output as close to f64 as plain FP16 attention allows, where plain attention itself
    /// misses the relative limit, fails and says why; an output beyond the absolute bound is
    /// not excused that way.
    #[test]
    fn inputs_beyond_reach_fail_with_the_reason() {
        let a = Accuracy {
            max_abs_err: 4.0e4,
            plain_err: 3.0e4,
            out_scale: 6.0e4,
            v_scale: 6.5e4,
            ..Accuracy::default()
        };
        assert!(a.beyond_reach());
        let e = a.check().unwrap_err();
        assert!(
            e.contains("beyond what FP16 storage with FP32 accumulation resolves"),
            "{e}"
        );
        let b = Accuracy {
            max_abs_err: 7.0e4,
            ..a
        };
        assert!(!b.beyond_reach());
        assert!(b.check().unwrap_err().contains("exceeds 2 x plain"));
        // Plain attention within the limit: a relative error over it is the design's own.
        let c = Accuracy {
            max_abs_err: 100.0,
            plain_err: 60.0,
            ..a
        };
        assert!(!c.beyond_reach());
        let e = c.check().unwrap_err();
        assert!(e.contains("relative error") && !e.contains("beyond"), "{e}");
    }
}
