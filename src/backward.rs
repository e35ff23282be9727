//! The backward pass on a design's bit-exact model (issue 57, docs/backward.md): each K/V
//! head's group of query heads through the forward model (O in the operand format and each
//! query row's log-sum-exp, at the design's tiling) and `kernels::backward` (at the design's
//! Br and Bc, dQ in the transpose's order), and the gradients against the f64 and plain
//! low-precision backward by FlashAttention's criterion. No variant's RTL runs the backward
//! yet: this is the arithmetic the RTL is to match, and what Python's `flash_attn_backward`
//! returns.

use anyhow::{ensure, Result};
use hdl::config::CoreConfig;
use hdl::core::CoreParams;
use kernels::backward::{
    flash_attention_backward, saved_forward, BackwardConfig, BackwardProblem, BackwardStats, Grads,
};
use kernels::backward_reference::{BackwardInputs, GradAccuracy, TensorError};
use kernels::flash::OutFormat;
use kernels::format::Format;
use serde::Serialize;

use crate::verify::attention::flash_config;

/// One backward problem: Q and dO of `heads` query heads ((heads, q_len, d) bits of the
/// design's operand format), K and V of `kv_heads` heads ((kv_heads, k_len, d)).
#[derive(Clone, Debug)]
pub struct BackwardRun<'a> {
    pub q: &'a [u16],
    pub k: &'a [u16],
    pub v: &'a [u16],
    pub d_o: &'a [u16],
    pub heads: usize,
    pub kv_heads: usize,
    pub q_len: usize,
    pub k_len: usize,
    pub causal: bool,
    /// The gradients' format: binary32, or the operand format.
    pub out: OutFormat,
}

/// One gradient's accuracy, the worst over the K/V heads (by its ratio to the bound).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct GradError {
    /// Max |gradient − f64|.
    pub max_abs_err: f64,
    /// The plain low-precision backward's.
    pub plain_err: f64,
    /// The contract's bound: 2 × plain_err + one ulp at the gradient's terms' scale.
    pub bound: f64,
}

impl GradError {
    fn of(t: &TensorError, format: Format) -> GradError {
        GradError {
            max_abs_err: t.max_abs_err,
            plain_err: t.plain_err,
            bound: t.limit(format),
        }
    }

    fn worse(self, o: GradError) -> GradError {
        let ratio = |g: &GradError| g.max_abs_err / g.bound;
        if ratio(&o) > ratio(&self) || ratio(&o).is_nan() {
            o
        } else {
            self
        }
    }
}

/// What a backward run reports (JSON in Python's `flash_attn_backward(..., report=True)`).
#[derive(Clone, Debug, Serialize)]
pub struct BackwardReport {
    pub design: String,
    pub variant: String,
    pub in_format: String,
    pub heads: usize,
    pub kv_heads: usize,
    pub q_len: usize,
    pub k_len: usize,
    pub head_dim: usize,
    pub causal: bool,
    pub out_f32: bool,
    /// How dQ sums a block's keys (docs/backward.md).
    pub dq_order: String,
    /// MACs performed: five per visible (query, key, dimension), D's d per query row.
    pub macs: u64,
    pub masked_macs: u64,
    pub blocks: u64,
    pub skipped_blocks: u64,
    /// The gradients were held to the references.
    pub checked: bool,
    /// Checked, and every gradient within the contract.
    pub passed: bool,
    pub failures: Vec<String>,
    pub dq: Option<GradError>,
    pub dk: Option<GradError>,
    pub dv: Option<GradError>,
}

/// The backward of `run` on `cfg`'s model: the gradients' bits (dQ as Q, dK and dV as K and
/// V; binary32 or the operand format in the low 16 bits) and the report. With `check`, each
/// K/V head's gradients are held to the references ([`GradAccuracy`]); `threads` K/V heads
/// run at once.
pub fn model_backward(
    cfg: &CoreConfig,
    run: &BackwardRun,
    threads: usize,
    check: bool,
) -> Result<(BackwardReport, Grads)> {
    let p = CoreParams::from_config(cfg)?;
    let d = cfg.head_dim as usize;
    let format = cfg.in_format;
    ensure!(
        format == Format::FP16 || format == Format::BF16,
        "the backward pass runs on binary16 or bfloat16 operands (FlashAttention's contract \
         is stated for them); this design's in_format is {}: set in_format = \"fp16\" or \
         \"bf16\"",
        hdl::format::in_format_key(format)
    );
    ensure!(
        cfg.qk_format.is_none(),
        "the backward pass needs QKᵀ in the operand format (its dK and dQ are products with \
         dS, not integer dot products); this design has qk_format = \"{}\": drop it",
        cfg.qk_format.map_or("", |f| f.name())
    );
    let (heads, kv_heads, q_len, k_len) = (run.heads, run.kv_heads, run.q_len, run.k_len);
    ensure!(
        kv_heads >= 1 && heads >= 1 && heads.is_multiple_of(kv_heads),
        "{heads} query heads cannot share {kv_heads} K/V heads: the K/V heads must divide \
         the query heads (grouped-query attention)"
    );
    ensure!(
        q_len >= 1 && k_len >= 1,
        "q_len and k_len must be at least 1"
    );
    for (name, t, n) in [
        ("Q", run.q, heads * q_len),
        ("dO", run.d_o, heads * q_len),
        ("K", run.k, kv_heads * k_len),
        ("V", run.v, kv_heads * k_len),
    ] {
        ensure!(
            n.checked_mul(d) == Some(t.len()),
            "{name} holds {} values, not {n} rows x d = {n} x {d}",
            t.len()
        );
    }
    // The forward's tiling and softmax, as the design runs it.
    let fwd = flash_config(&p, (d, run.causal), OutFormat::Short, format);
    let bwd = BackwardConfig {
        br: p.br() as usize,
        bc: p.bc() as usize,
        head_dim: d,
        rows: 1,
        causal: run.causal,
        out: run.out,
        operand: format,
    };
    let group = heads / kv_heads;
    let (qs, ks) = (group * q_len * d, k_len * d);
    let one = |g: usize| -> (Grads, BackwardStats, Option<GradAccuracy>) {
        let (q, d_o) = (&run.q[g * qs..(g + 1) * qs], &run.d_o[g * qs..(g + 1) * qs]);
        let (k, v) = (&run.k[g * ks..(g + 1) * ks], &run.v[g * ks..(g + 1) * ks]);
        let (o, lse) = saved_forward((q, k, v), (group, q_len, k_len), &fwd);
        let prob = BackwardProblem {
            q,
            k,
            v,
            o: &o,
            d_o,
            lse: &lse,
            group,
            q_len,
            k_len,
        };
        let (grads, stats) = flash_attention_backward(&prob, &bwd);
        let accuracy = check.then(|| {
            let inputs = BackwardInputs {
                q,
                k,
                v,
                d_o,
                group,
                q_len,
                k_len,
                d,
                causal: run.causal,
                format,
            };
            GradAccuracy::of_bits(&grads, run.out, &inputs)
        });
        (grads, stats, accuracy)
    };
    let threads = threads.clamp(1, kv_heads);
    let per = kv_heads.div_ceil(threads);
    let results: Vec<_> = std::thread::scope(|s| {
        let runs: Vec<_> = (0..threads)
            .map(|t| {
                let one = &one;
                s.spawn(move || {
                    (t * per..((t + 1) * per).min(kv_heads))
                        .map(one)
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        runs.into_iter()
            .flat_map(|r| r.join().expect("a K/V head's thread"))
            .collect()
    });
    let mut grads = Grads::default();
    let mut stats = BackwardStats::default();
    let mut failures = vec![];
    let mut errs: [Option<GradError>; 3] = [None; 3];
    for (g, (gr, st, acc)) in results.into_iter().enumerate() {
        grads.dq.extend(gr.dq);
        grads.dk.extend(gr.dk);
        grads.dv.extend(gr.dv);
        stats.macs += st.macs;
        stats.masked_macs += st.masked_macs;
        stats.blocks += st.blocks;
        stats.skipped_blocks += st.skipped_blocks;
        if let Some(acc) = acc {
            if let Err(e) = acc.check() {
                failures.push(format!("K/V head {g}: {e}"));
            }
            for (e, t) in errs.iter_mut().zip([&acc.dq, &acc.dk, &acc.dv]) {
                let x = GradError::of(t, format);
                *e = Some(e.map_or(x, |o| o.worse(x)));
            }
        }
    }
    let report = BackwardReport {
        design: cfg.name.clone(),
        variant: cfg.variant.label(),
        in_format: hdl::format::in_format_key(format).to_string(),
        heads,
        kv_heads,
        q_len,
        k_len,
        head_dim: d,
        causal: run.causal,
        out_f32: run.out == OutFormat::F32,
        dq_order: "transpose through a buffer: one chain over a K/V block's keys, added to \
                   dQ's binary32 accumulator"
            .into(),
        macs: stats.macs,
        masked_macs: stats.masked_macs,
        blocks: stats.blocks,
        skipped_blocks: stats.skipped_blocks,
        checked: check,
        passed: check && failures.is_empty(),
        failures,
        dq: errs[0],
        dk: errs[1],
        dv: errs[2],
    };
    Ok((report, grads))
}

#[cfg(test)]
mod tests {
    use super::*;
    use kernels::patterns::{backward_tensors, Pattern};

    /// GQA (4 query heads on 2 K/V heads) on `small`, causal: the gradients pass the contract,
    /// each K/V head's are the kernel model's on its own group, and the counters add up.
    #[test]
    fn heads_group_and_pass() {
        let cfg = CoreConfig::preset("small").unwrap();
        let (heads, kv_heads, q_len, k_len, d) = (4, 2, 13, 21, 16);
        let ((q, k, v), d_o) = backward_tensors(
            Pattern::Unit,
            (heads, q_len, kv_heads * k_len, d),
            5,
            Format::FP16,
        );
        let run = BackwardRun {
            q: &q,
            k: &k,
            v: &v,
            d_o: &d_o,
            heads,
            kv_heads,
            q_len,
            k_len,
            causal: true,
            out: OutFormat::F32,
        };
        let (r, g) = model_backward(&cfg, &run, 2, true).unwrap();
        assert!(r.passed, "{:?}", r.failures);
        assert_eq!(g.dq.len(), heads * q_len * d);
        assert_eq!(g.dk.len(), kv_heads * k_len * d);
        // The second K/V head alone (its two query heads) gives the second half.
        let half = BackwardRun {
            q: &q[2 * q_len * d..],
            k: &k[k_len * d..],
            v: &v[k_len * d..],
            d_o: &d_o[2 * q_len * d..],
            heads: 2,
            kv_heads: 1,
            ..run.clone()
        };
        let (r2, g2) = model_backward(&cfg, &half, 1, false).unwrap();
        assert!(!r2.passed && !r2.checked);
        assert_eq!(&g.dk[k_len * d..], &g2.dk[..]);
        assert_eq!(&g.dq[2 * q_len * d..], &g2.dq[..]);
        assert!(r.macs == 2 * r2.macs && r.blocks == 2 * r2.blocks);
    }

    #[test]
    fn formats_and_shapes_it_cannot_run_are_refused() {
        let mut cfg = CoreConfig::preset("small").unwrap();
        let x = vec![0u16; 16];
        let run = BackwardRun {
            q: &x,
            k: &x,
            v: &x,
            d_o: &x,
            heads: 1,
            kv_heads: 1,
            q_len: 1,
            k_len: 1,
            causal: false,
            out: OutFormat::F32,
        };
        assert!(model_backward(&cfg, &run, 1, true).is_ok());
        let e = model_backward(
            &cfg,
            &BackwardRun {
                heads: 3,
                kv_heads: 2,
                ..run.clone()
            },
            1,
            true,
        )
        .unwrap_err();
        assert!(format!("{e}").contains("must divide"), "{e}");
        let e = model_backward(
            &cfg,
            &BackwardRun {
                q_len: 2,
                ..run.clone()
            },
            1,
            true,
        )
        .unwrap_err();
        assert!(format!("{e}").contains("Q holds 16 values"), "{e}");
        cfg.set_in_format(Format::FP8_E4M3);
        let e = model_backward(&cfg, &run, 1, true).unwrap_err();
        assert!(format!("{e}").contains("in_format"), "{e}");
    }
}
