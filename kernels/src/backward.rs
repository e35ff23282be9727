//! FlashAttention-2's backward pass, as the register-level array is to run it: the exact
//! arithmetic, in the exact order, from the bit-exact operator models. Nothing of the forward
//! is kept but O and each query row's log-sum-exp (`RowState::lse`); S and P are recomputed.
//!
//! The mapping it fixes (docs/backward.md): a K/V block's keys on the PE rows, dK and dV in
//! the PE registers across the inner loop over the query tiles, as O is in the forward; the
//! query rows of a tile stream past them. Per K/V block j (Bc keys), per query head of the
//! group sharing it (GQA: dK and dV sum over the group's heads), per query tile i (Br rows)
//! that the causal mask does not skip, per query row in order, per key of the block in order
//! (masked pairs are not computed):
//! 1. s = −0 + Σ_x q·k (one MAC per x in order), as the forward's;
//! 2. p = FP(exp2(s · C − LSE)) (`softmax::lse_weight`; the saved log-sum-exp is in the exp
//!    unit's base 2, `RowState::lse`): the forward's weight with LSE in the running max's
//!    place, held in the operand format as the forward's P is;
//! 3. dp = −0 + Σ_x dO·v (one MAC per x);
//! 4. ds = FP(p · (dp − D)) in binary32, rounded to the operand format, with D = −0 + Σ_x dO·O
//!    once per query row (O the forward's output in the operand format);
//! 5. dV[key] += p · dO (d MACs), dK[key] += ds · q (d MACs), each accumulator a chain from
//!    +0 over the group's query rows in order;
//! 6. dQ: the block's sum over its keys: `rows` PE rows split the keys, each a chain of
//!    ds · k from −0 over its Bc/rows keys in order, the rows' partials summed as a tree
//!    (`reduce::tree`), and the tree's sum added to dQ's binary32 accumulator (+0 at the
//!    start; a read-modify-write in memory between K/V blocks, FlashAttention-2's dQ_accum).
//!
//! At the end, dK and dQ times scale = FP32(1/√d) (the scores' scale, applied once), dV as it
//! is; each in binary32 or rounded to the operand format ([`OutFormat`]).

use crate::flash::{flash_attention_lse, FlashConfig, OutFormat, Problem};
use crate::format::Format;
use crate::fp::*;
use crate::mask::MaskSpec;
use crate::reduce::tree;
use crate::softmax::{scale_constant, unrounded_weight};

/// The tiling and mapping that change the backward's arithmetic.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BackwardConfig {
    /// Query rows per tile.
    pub br: usize,
    /// Keys per K/V block.
    pub bc: usize,
    pub head_dim: usize,
    /// PE rows that split a block's keys: dQ's partial sums (step 6).
    pub rows: usize,
    pub causal: bool,
    /// The format of dQ, dK and dV.
    pub out: OutFormat,
    /// Q, K, V, O, dO, P and dS: binary16 or bfloat16 (products exact, sums in binary32).
    pub operand: Format,
}

/// One K/V head's backward problem with the `group` query heads that share it (1 without
/// GQA). Per query head, one after another: Q, O and dO (q_len × d each, row-major, in the
/// operand format) and the forward's log-sum-exp per query row (binary32). K and V: k_len × d.
#[derive(Clone, Copy, Debug)]
pub struct BackwardProblem<'a> {
    pub q: &'a [u16],
    pub k: &'a [u16],
    pub v: &'a [u16],
    pub o: &'a [u16],
    pub d_o: &'a [u16],
    pub lse: &'a [u32],
    pub group: usize,
    pub q_len: usize,
    pub k_len: usize,
}

/// The gradients' bits (binary32, or the operand format in the low half): dQ as Q is laid
/// out (group × q_len × d), dK and dV as K and V (k_len × d).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Grads {
    pub dq: Vec<u32>,
    pub dk: Vec<u32>,
    pub dv: Vec<u32>,
}

/// What the backward computed, for the counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BackwardStats {
    /// MACs performed: five per visible (query, key) pair and dimension (S, dP, dV, dK, dQ),
    /// and D's d per query row.
    pub macs: u64,
    /// MAC slots of computed block pairs not performed: masked pairs and the padding of partial
    /// tiles and blocks (a computed pair has 5 · Br · Bc · d slots).
    pub masked_macs: u64,
    /// (Query tile, K/V block) pairs computed, and skipped as entirely masked, over the group.
    pub blocks: u64,
    pub skipped_blocks: u64,
}

/// The scores' scale 1/√d, rounded once to binary32: dK and dQ are multiplied by it at the end.
pub fn score_scale(head_dim: usize) -> u32 {
    ((1.0 / (head_dim as f64).sqrt()) as f32).to_bits()
}

/// The gradients dQ, dK and dV of `p` (see the module docs for the order) and the counters.
pub fn flash_attention_backward(
    p: &BackwardProblem,
    cfg: &BackwardConfig,
) -> (Grads, BackwardStats) {
    // The same arithmetic either way: the vector units' lanes round as the scalar unit does.
    // `mul_add` is one rounding in hardware or in software.
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma") {
        // SAFETY: the CPU has AVX2 and FMA, checked just above.
        return unsafe { backward_avx2(p, cfg) };
    }
    backward_on_host(p, cfg)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn backward_avx2(p: &BackwardProblem, cfg: &BackwardConfig) -> (Grads, BackwardStats) {
    backward_on_host(p, cfg)
}

/// The backward on the host's FPU: the PE's fused MAC is the plain multiply-add where every
/// product of two operands is exact in binary32 (`mac_native`), the host's fused multiply-add
/// otherwise (bfloat16's products can leave binary32's range), and binary32's add and multiply
/// are the models' (`fp32_add_native`, `fp32_mul_native`); chains are taken to the canonical
/// NaN where they end (a NaN stays NaN through every later MAC).
#[inline(always)]
fn backward_on_host(p: &BackwardProblem, cfg: &BackwardConfig) -> (Grads, BackwardStats) {
    let (d, fmt) = (cfg.head_dim, cfg.operand);
    let (q_len, k_len, group) = (p.q_len, p.k_len, p.group);
    assert!(
        fmt.bits() <= 16 && fmt.exact_product().exp <= Format::FP32.exp + 2,
        "operands in {} are not supported",
        fmt.name()
    );
    let exact = fmt.exact_product() == Format::FP32;
    let mac = |acc: f32, a: f32, b: f32| {
        if exact {
            mac_native(acc, a, b)
        } else {
            a.mul_add(b, acc)
        }
    };
    assert!(cfg.br > 0 && cfg.bc > 0 && cfg.rows > 0 && group > 0);
    assert!(
        cfg.bc.is_multiple_of(cfg.rows),
        "Bc must split evenly over the PE rows"
    );
    let rows_len = group * q_len * d;
    assert!(p.q.len() == rows_len && p.o.len() == rows_len && p.d_o.len() == rows_len);
    assert_eq!(p.lse.len(), group * q_len, "one log-sum-exp per query row");
    assert!(
        p.k.len() == k_len * d && p.v.len() == k_len * d,
        "K, V: k_len x d"
    );
    let mask = MaskSpec {
        q_len,
        k_len,
        causal: cfg.causal,
    };
    let c = scale_constant(d);
    let wide =
        |x: &[u16]| -> Vec<f32> { x.iter().map(|&h| f32::from_bits(widen(h, fmt))).collect() };
    let (qf, kf, vf, dof) = (wide(p.q), wide(p.k), wide(p.v), wide(p.d_o));
    let of = wide(p.o);
    let dot = |a: &[f32], b: &[f32]| -> u32 {
        canonical_nan(
            a.iter()
                .zip(b)
                .fold(f32::from_bits(ACC_CLEAR), |acc, (&x, &y)| mac(acc, x, y)),
        )
    };
    // Per query row (of every head): −LSE and −D.
    let neg_l: Vec<u32> = p.lse.iter().map(|&l| l ^ F32_SIGN).collect();
    let neg_d: Vec<u32> = (0..group * q_len)
        .map(|r| dot(&dof[r * d..(r + 1) * d], &of[r * d..(r + 1) * d]) ^ F32_SIGN)
        .collect();
    let mut stats = BackwardStats {
        macs: (group * q_len * d) as u64,
        ..BackwardStats::default()
    };
    let mut dq_acc = vec![0f32; rows_len];
    let mut dk = vec![0u32; k_len * d];
    let mut dv = vec![0u32; k_len * d];
    let part = cfg.bc / cfg.rows;
    let (mut ps, mut dss) = (vec![0f32; cfg.bc], vec![0f32; cfg.bc]);
    let mut vis = vec![false; cfg.bc];
    let mut partials = vec![0u32; cfg.rows];
    let scale = score_scale(d);
    let store = |y: u32| cfg.out.store(y, fmt);
    for k_base in (0..k_len).step_by(cfg.bc) {
        let keys = cfg.bc.min(k_len - k_base);
        let mut dk_acc = vec![0f32; keys * d];
        let mut dv_acc = vec![0f32; keys * d];
        for h in 0..group {
            for q_base in (0..q_len).step_by(cfg.br) {
                if mask.block_skipped(q_base, cfg.br, k_base) {
                    stats.skipped_blocks += 1;
                    continue;
                }
                stats.blocks += 1;
                let before = stats.macs;
                for i in q_base..q_len.min(q_base + cfg.br) {
                    let r = h * q_len + i;
                    let (qi, doi) = (&qf[r * d..(r + 1) * d], &dof[r * d..(r + 1) * d]);
                    for jj in 0..cfg.bc {
                        let j = k_base + jj;
                        vis[jj] = j < k_len && !mask.masked(i, j);
                        if !vis[jj] {
                            (ps[jj], dss[jj]) = (0.0, 0.0);
                            continue;
                        }
                        let (kj, vj) = (&kf[j * d..(j + 1) * d], &vf[j * d..(j + 1) * d]);
                        let s = dot(qi, kj);
                        let pw = widen(narrow(unrounded_weight(s, neg_l[r], c), fmt), fmt);
                        let dp = dot(doi, vj);
                        let ds = narrow(fp32_mul_native(pw, fp32_add_native(dp, neg_d[r])), fmt);
                        (ps[jj], dss[jj]) = (f32::from_bits(pw), f32::from_bits(widen(ds, fmt)));
                        stats.macs += 5 * d as u64;
                    }
                    for jj in (0..keys).filter(|&jj| vis[jj]) {
                        let (dva, dka) = (
                            &mut dv_acc[jj * d..(jj + 1) * d],
                            &mut dk_acc[jj * d..(jj + 1) * d],
                        );
                        for x in 0..d {
                            dva[x] = mac(dva[x], ps[jj], doi[x]);
                            dka[x] = mac(dka[x], dss[jj], qi[x]);
                        }
                    }
                    let dqi = &mut dq_acc[r * d..(r + 1) * d];
                    for (x, acc) in dqi.iter_mut().enumerate() {
                        for (t, partial) in partials.iter_mut().enumerate() {
                            let chain = (t * part..(t + 1) * part)
                                .filter(|&jj| vis[jj])
                                .fold(f32::from_bits(ACC_CLEAR), |a, jj| {
                                    mac(a, dss[jj], kf[(k_base + jj) * d + x])
                                });
                            *partial = canonical_nan(chain);
                        }
                        let sum = tree(&partials, fp32_add_native);
                        *acc = f32::from_bits(fp32_add_native(canonical_nan(*acc), sum));
                    }
                }
                stats.masked_macs += (5 * cfg.br * cfg.bc * d) as u64 - (stats.macs - before);
            }
        }
        for (at, (&a, &b)) in dk_acc.iter().zip(&dv_acc).enumerate() {
            dk[k_base * d + at] = store(fp32_mul_native(canonical_nan(a), scale));
            dv[k_base * d + at] = store(canonical_nan(b));
        }
    }
    let dq = dq_acc
        .iter()
        .map(|&a| store(fp32_mul_native(canonical_nan(a), scale)))
        .collect();
    (Grads { dq, dk, dv }, stats)
}

/// What the forward saves for the backward of `group` query heads (Q: group × q_len × d) on
/// one K/V head: O in the operand format and each query row's log-sum-exp, head after head,
/// from the forward model at `fwd`'s tiling (its output format is taken as the short one).
pub fn saved_forward(
    (q, k, v): (&[u16], &[u16], &[u16]),
    (group, q_len, k_len): (usize, usize, usize),
    fwd: &FlashConfig,
) -> (Vec<u16>, Vec<u32>) {
    let d = fwd.head_dim;
    let fwd = FlashConfig {
        out: OutFormat::Short,
        ..*fwd
    };
    let (mut o, mut lse) = (vec![], vec![]);
    for qh in q.chunks(q_len * d).take(group) {
        let p = Problem {
            q: qh,
            k,
            v,
            q_len,
            k_len,
            score_exp: 0,
        };
        let (oh, lh, _) = flash_attention_lse(&p, &fwd);
        o.extend(oh.iter().map(|&x| x as u16));
        lse.extend(lh);
    }
    (o, lse)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::flash::SoftmaxPass;
    use crate::patterns::{backward_tensors, Pattern};
    use crate::softmax::lse_weight;

    /// The backward written plainly from the scalar operator models (`mac_fused`, `fp32_add`,
    /// `fp32_mul`, `exp2`, `narrow`, `reduce::tree`), one score and one MAC at a time, in the
    /// order of the module docs: what the host forms must equal bit for bit.
    fn plain(p: &BackwardProblem, cfg: &BackwardConfig) -> Grads {
        let (d, fmt) = (cfg.head_dim, cfg.operand);
        let (q_len, k_len) = (p.q_len, p.k_len);
        let mask = MaskSpec {
            q_len,
            k_len,
            causal: cfg.causal,
        };
        let c = scale_constant(d);
        let mac = |acc: u32, a: u16, b: u16| mac_fused(acc, a as u64, b as u64, fmt);
        let dot =
            |a: &[u16], b: &[u16]| a.iter().zip(b).fold(ACC_CLEAR, |s, (&x, &y)| mac(s, x, y));
        let row = |t: &[u16], r: usize| t[r * d..(r + 1) * d].to_vec();
        let scale = score_scale(d);
        let mut dq = vec![0u32; p.group * q_len * d];
        let (mut dk, mut dv) = (vec![0u32; k_len * d], vec![0u32; k_len * d]);
        for k_base in (0..k_len).step_by(cfg.bc) {
            let keys = cfg.bc.min(k_len - k_base);
            let (mut dka, mut dva) = (vec![0u32; keys * d], vec![0u32; keys * d]);
            for h in 0..p.group {
                for q_base in (0..q_len).step_by(cfg.br) {
                    if mask.block_skipped(q_base, cfg.br, k_base) {
                        continue;
                    }
                    for i in q_base..q_len.min(q_base + cfg.br) {
                        let r = h * q_len + i;
                        let (qi, doi) = (row(p.q, r), row(p.d_o, r));
                        let dd = dot(&doi, &row(p.o, r));
                        let vis: Vec<bool> = (0..cfg.bc)
                            .map(|jj| k_base + jj < k_len && !mask.masked(i, k_base + jj))
                            .collect();
                        let mut w = vec![0u16; cfg.bc];
                        let mut ds = vec![0u16; cfg.bc];
                        for jj in (0..cfg.bc).filter(|&jj| vis[jj]) {
                            let j = k_base + jj;
                            w[jj] = lse_weight(dot(&qi, &row(p.k, j)), p.lse[r], c, fmt);
                            let dp = dot(&doi, &row(p.v, j));
                            let diff = fp32_add(dp, dd ^ F32_SIGN);
                            ds[jj] = narrow(fp32_mul(widen(w[jj], fmt), diff), fmt);
                        }
                        for jj in (0..keys).filter(|&jj| vis[jj]) {
                            for x in 0..d {
                                dva[jj * d + x] = mac(dva[jj * d + x], w[jj], doi[x]);
                                dka[jj * d + x] = mac(dka[jj * d + x], ds[jj], qi[x]);
                            }
                        }
                        let part = cfg.bc / cfg.rows;
                        for x in 0..d {
                            let partials: Vec<u32> = (0..cfg.rows)
                                .map(|t| {
                                    (t * part..(t + 1) * part)
                                        .filter(|&jj| vis[jj])
                                        .fold(ACC_CLEAR, |a, jj| {
                                            mac(a, ds[jj], p.k[(k_base + jj) * d + x])
                                        })
                                })
                                .collect();
                            let at = r * d + x;
                            dq[at] = fp32_add(dq[at], tree(&partials, fp32_add));
                        }
                    }
                }
            }
            for at in 0..keys * d {
                dk[k_base * d + at] = cfg.out.store(fp32_mul(dka[at], scale), fmt);
                dv[k_base * d + at] = cfg.out.store(dva[at], fmt);
            }
        }
        for x in dq.iter_mut() {
            *x = cfg.out.store(fp32_mul(*x, scale), fmt);
        }
        Grads { dq, dk, dv }
    }

    /// Q, K, V of `pattern`, the forward's O (in the operand format) and LSE per head, and a
    /// random dO in [−1, 1]: a group of `group` query heads on one K/V head.
    #[allow(clippy::type_complexity)]
    fn problem(
        pattern: Pattern,
        (group, q_len, k_len, d): (usize, usize, usize, usize),
        (causal, fmt): (bool, Format),
        seed: u64,
    ) -> (Vec<u16>, Vec<u16>, Vec<u16>, Vec<u16>, Vec<u16>, Vec<u32>) {
        let ((q, k, v), d_o) = backward_tensors(pattern, (group, q_len, k_len, d), seed, fmt);
        let fwd = FlashConfig {
            br: 4,
            bc: 4,
            head_dim: d,
            cols: 1,
            causal,
            out: OutFormat::Short,
            softmax: SoftmaxPass::Online,
            operand: fmt,
        };
        let (o, lse) = saved_forward((&q, &k, &v), (group, q_len, k_len), &fwd);
        (q, k, v, o, d_o, lse)
    }

    proptest::proptest! {
        #![proptest_config(proptest::test_runner::Config::with_cases(48))]
        /// The model equals [`plain`] on random shapes (partial tiles and blocks, GQA groups,
        /// key splits over 1 to 3 rows), causal or not, FP16 or BF16, either output format,
        /// and inputs from every pattern (−Inf keys, values up to ±65504 included).
        #[test]
        fn the_host_forms_are_the_plain_model(
            q_len in 1usize..24, k_len in 1usize..30, d in 1usize..20, group in 1usize..3,
            br in 1usize..6, rows in 1usize..4, b in 1usize..4,
            causal in proptest::prelude::any::<bool>(), bf16 in proptest::prelude::any::<bool>(),
            f32_out in proptest::prelude::any::<bool>(),
            pattern in 0usize..Pattern::ALL.len(), seed in proptest::prelude::any::<u64>(),
        ) {
            let operand = if bf16 { Format::BF16 } else { Format::FP16 };
            let (q, k, v, o, d_o, lse) =
                problem(Pattern::ALL[pattern], (group, q_len, k_len, d), (causal, operand), seed);
            let p = BackwardProblem { q: &q, k: &k, v: &v, o: &o, d_o: &d_o, lse: &lse, group, q_len, k_len };
            let cfg = BackwardConfig {
                br, bc: b * rows, head_dim: d, rows, causal,
                out: if f32_out { OutFormat::F32 } else { OutFormat::Short },
                operand,
            };
            proptest::prop_assert_eq!(flash_attention_backward(&p, &cfg).0, plain(&p, &cfg));
        }
    }

    /// The counters: every visible pair's five MACs per dimension and D's per row; a computed
    /// pair of blocks is 5 · Br · Bc · d slots, performed or masked; causal skips whole pairs.
    #[test]
    fn counters_cover_every_slot() {
        let (q_len, k_len, d, group) = (10, 13, 4, 2);
        let (q, k, v, o, d_o, lse) = problem(
            Pattern::Unit,
            (group, q_len, k_len, d),
            (true, Format::FP16),
            3,
        );
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
        let cfg = BackwardConfig {
            br: 4,
            bc: 4,
            head_dim: d,
            rows: 2,
            causal: true,
            out: OutFormat::F32,
            operand: Format::FP16,
        };
        let (_, s) = flash_attention_backward(&p, &cfg);
        let visible: usize = (0..q_len)
            .map(|i| (0..k_len).filter(|&j| j <= i + k_len - q_len).count())
            .sum();
        assert_eq!(s.macs, (group * (5 * visible * d + q_len * d)) as u64);
        assert_eq!(s.blocks + s.skipped_blocks, (group * 3 * 4) as u64);
        assert_eq!(
            s.macs - (group * q_len * d) as u64 + s.masked_macs,
            s.blocks * (5 * 4 * 4 * d) as u64
        );
        assert!(s.skipped_blocks > 0);
    }

    /// A row that sees no key saved LSE = +Inf: its weights are +0 and its gradients zero.
    #[test]
    fn rows_without_keys_have_zero_gradients() {
        assert_eq!(
            lse_weight(0x3F80_0000, F32_INF, 0x3F80_0000, Format::FP16),
            0
        );
        // Causal with more queries than keys: the first rows see none.
        let (q_len, k_len, d) = (6, 3, 4);
        let (q, k, v, o, d_o, lse) =
            problem(Pattern::Unit, (1, q_len, k_len, d), (true, Format::FP16), 9);
        assert_eq!(&lse[..3], &[F32_INF; 3]);
        let p = BackwardProblem {
            q: &q,
            k: &k,
            v: &v,
            o: &o,
            d_o: &d_o,
            lse: &lse,
            group: 1,
            q_len,
            k_len,
        };
        let cfg = BackwardConfig {
            br: 2,
            bc: 2,
            head_dim: d,
            rows: 1,
            causal: true,
            out: OutFormat::F32,
            operand: Format::FP16,
        };
        let (g, _) = flash_attention_backward(&p, &cfg);
        assert!(
            g.dq[..3 * d].iter().all(|&x| x & 0x7FFF_FFFF == 0),
            "{:?}",
            &g.dq[..3 * d]
        );
        assert!(g.dq[3 * d..].iter().any(|&x| x & 0x7FFF_FFFF != 0));
    }
}
