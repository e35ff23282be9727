//! The tiled FlashAttention hardware model: the exact arithmetic, in the exact order, that the
//! RTL core performs, assembled from the bit-exact operator models. The RTL's output must equal
//! this model bit for bit; this model must stay within the tolerance of docs/numerics.md of the f64
//! reference.
//!
//! Per Q tile (Br rows) and per K/V block (Bc keys) that is not entirely masked:
//! 1. s = −0 + Σ_k q·k, one MAC per k in order (masked positions are not computed);
//! 2. the row max of s (masked: −Inf), scaled by C, updates m and gives `shift`;
//! 3. p = FP16(exp2(s · C − m)) (masked: +0) ([`weight`]);
//! 4. l = l · 2^-shift + rowsum(p) with the array's association order ([`row_sum`]: each of the
//!    `cols` PEs sums its Bc/cols keys in order, then the tree);
//! 5. O = O · 2^-shift, then O += p · v for each unmasked key in order (one MAC each).
//!
//! After the last block, out = O · r with r = 1/l (1 if l = 0), in FP32 or rounded to FP16.
//! O starts at +0 for every tile.
//!
//! [`SoftmaxPass::TwoPass`] is standard attention's order (the unfused and row-materializing
//! baselines, docs/baselines.md): the whole row of S exists before any weight, so m is the row's
//! final max from the start (step 2 over every block first) and every later `shift` is 0: no
//! online rescale. The same operators in the same order otherwise, so the two differ only
//! where the running max grew.

use crate::format::Format;
use crate::fp::*;
use crate::mask::MaskSpec;
use crate::quant::QuantQk;
use crate::reduce::{row_max, row_sum};
use crate::softmax::{scaled_constant, weights_in, RowState};

/// The output format of O / l.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OutFormat {
    /// The short form: rounded (nearest even) to the operands' 16-bit format, binary16 or
    /// bfloat16 ([`FlashConfig::operand`]).
    Short,
    /// binary32.
    F32,
}

impl OutFormat {
    /// A binary32 result `y` as stored in this format (the short form in the low bits, in
    /// `operand`'s format).
    pub fn store(self, y: u32, operand: Format) -> u32 {
        match self {
            OutFormat::F32 => y,
            OutFormat::Short => narrow(y, operand) as u32,
        }
    }
}

/// When the row max is known.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum SoftmaxPass {
    /// FlashAttention's online softmax: a running max over the blocks so far, O and l
    /// rescaled when it grows (the fused designs).
    #[default]
    Online,
    /// Standard attention: the max over the complete row of S first, then the weights, the
    /// row sum and P·V with no rescale (the unfused and row-materializing baselines).
    TwoPass,
    /// The online softmax with lazy rescaling: a running max that grows by at most
    /// `threshold` (1..=15) is kept stale ([`RowState::update_max_lazy`]).
    Lazy { threshold: u8 },
}

impl SoftmaxPass {
    /// The lazy threshold τ: 0 (rescale whenever the max grows) but for `Lazy`.
    pub fn lazy_threshold(self) -> u8 {
        match self {
            SoftmaxPass::Lazy { threshold } => threshold,
            _ => 0,
        }
    }
}

/// Tiling and mapping parameters that change the arithmetic.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FlashConfig {
    /// Query rows per tile.
    pub br: usize,
    /// Keys per block.
    pub bc: usize,
    pub head_dim: usize,
    /// PE columns: the row sums split a block's keys over this many PEs (see `reduce`).
    pub cols: usize,
    pub causal: bool,
    pub out: OutFormat,
    pub softmax: SoftmaxPass,
    /// Q, K, V and the weights P: binary16 or bfloat16 (products exact, sums in binary32).
    pub operand: Format,
}

/// One attention problem: Q (q_len × d), K and V (k_len × d), row-major, in the operand
/// format ([`FlashConfig::operand`]).
#[derive(Clone, Debug)]
pub struct Problem<'a> {
    pub q: &'a [u16],
    pub k: &'a [u16],
    pub v: &'a [u16],
    pub q_len: usize,
    pub k_len: usize,
    /// The stored Q·Kᵀ is 2^score_exp times the problem's (Q and K at per-tensor power-of-two
    /// scales, as FP8 operands are): C is divided by as much ([`scaled_constant`]). 0 for
    /// operands stored as they are.
    pub score_exp: i32,
}

/// What the model computed, for performance counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FlashStats {
    /// MACs of Q·Kᵀ and of P·V that were performed.
    pub macs: u64,
    /// MAC slots of computed blocks that were not performed: masked positions and the padding
    /// of partial tiles and blocks (a computed block has 2 · Br · Bc · d slots, QK and PV).
    pub masked_macs: u64,
    /// K/V blocks computed, and skipped as entirely masked, summed over Q tiles.
    pub blocks: u64,
    pub skipped_blocks: u64,
    /// Rows' block max updates that rescaled O and l (a nonzero shift, the first finite max
    /// included), and those a lazy threshold let pass without one (the online orders only).
    pub rescales: u64,
    pub rescales_avoided: u64,
}

impl std::ops::AddAssign for FlashStats {
    /// The counts of two problems (heads, sequences) together.
    fn add_assign(&mut self, o: FlashStats) {
        self.macs += o.macs;
        self.masked_macs += o.masked_macs;
        self.blocks += o.blocks;
        self.skipped_blocks += o.skipped_blocks;
        self.rescales += o.rescales;
        self.rescales_avoided += o.rescales_avoided;
    }
}

/// The output bits (FP16 in the low half, or FP32), q_len × d, and the counters.
pub fn flash_attention(p: &Problem, cfg: &FlashConfig) -> (Vec<u32>, FlashStats) {
    let (out, _, stats) = flash(p, cfg, None);
    (out, stats)
}

/// [`flash_attention`] that also saves what the backward pass reads: each query row's
/// log-sum-exp (binary32, in the exp unit's base 2, [`RowState::lse`]; +Inf for a row that
/// sees no key), q_len of them after the output.
pub fn flash_attention_lse(p: &Problem, cfg: &FlashConfig) -> (Vec<u32>, Vec<u32>, FlashStats) {
    flash(p, cfg, None)
}

/// [`flash_attention`] with quantized QKᵀ (`crate::quant`): each score is the exact integer
/// dot product of `qk`'s rows, and the multiply by C becomes the row and block's
/// [`QuantQk::scale`]; `p.q` and `p.k` are not read (V is). Everything after S is unchanged.
pub fn flash_attention_quant(
    p: &Problem,
    qk: &QuantQk,
    cfg: &FlashConfig,
) -> (Vec<u32>, FlashStats) {
    assert_eq!(qk.bc, cfg.bc, "K's scales must be per block of Bc keys");
    assert!(qk.q.len() == p.q_len * cfg.head_dim && qk.k.len() == p.k_len * cfg.head_dim);
    let (out, _, stats) = flash(p, cfg, Some(qk));
    (out, stats)
}

/// The output, each row's log-sum-exp, and the counters.
type Flash = (Vec<u32>, Vec<u32>, FlashStats);

fn flash(p: &Problem, cfg: &FlashConfig, quant: Option<&QuantQk>) -> Flash {
    // The same arithmetic either way: the vector units' lanes round as the scalar unit does,
    // and `mul_add` is one rounding in hardware or in software.
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma") {
        // SAFETY: the CPU has AVX2 and FMA, checked just above.
        return unsafe { flash_avx2(p, cfg, quant) };
    }
    flash_on_host(p, cfg, quant)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn flash_avx2(p: &Problem, cfg: &FlashConfig, quant: Option<&QuantQk>) -> Flash {
    flash_on_host(p, cfg, quant)
}

#[inline(always)]
fn flash_on_host(p: &Problem, cfg: &FlashConfig, quant: Option<&QuantQk>) -> Flash {
    let d = cfg.head_dim;
    assert_eq!(p.q.len(), p.q_len * d, "Q must be q_len x d");
    assert_eq!(p.k.len(), p.k_len * d, "K must be k_len x d");
    assert_eq!(p.v.len(), p.k_len * d, "V must be k_len x d");
    assert!(
        cfg.bc.is_multiple_of(cfg.cols),
        "Bc must split evenly over the PE columns"
    );
    let mask = MaskSpec {
        q_len: p.q_len,
        k_len: p.k_len,
        causal: cfg.causal,
    };
    let c = scaled_constant(d, p.score_exp);
    // The multiply of row i's scores in the block from key j: C, or with quantized QKᵀ the
    // row's and the block's scales folded in.
    let c_of = |i: usize, j: usize| quant.map_or(c, |qk| qk.scale(c, i, j));
    let mut out = vec![0u32; p.q_len * d];
    let mut lse = Vec::with_capacity(p.q_len);
    let mut stats = FlashStats::default();
    let fmt = cfg.operand;
    assert!(
        fmt.bits() <= 16 && fmt.exact_product().exp <= Format::FP32.exp + 2,
        "operands in {} are not supported",
        fmt.name()
    );
    let host = Host::new(fmt);
    let wide =
        |x: &[u16]| -> Vec<f32> { x.iter().map(|&h| f32::from_bits(host.widen(h))).collect() };
    // Quantized QKᵀ reads its own integers: Q and K are not widened then.
    let (qf, kf) = match quant {
        None => (wide(p.q), wide(p.k)),
        Some(_) => (vec![], vec![]),
    };
    let vf = wide(p.v);
    // K transposed block by block (d × Bc each, zeros past the last key) where every product
    // is exact in binary32: a row's scores of a block are then Bc chains side by side, each
    // adding its d products in order (the MAC's), which the loop over them vectorizes.
    let bc = cfg.bc;
    let kt: Vec<f32> = if quant.is_none() && host.exact {
        let mut kt = vec![0.0f32; p.k_len.div_ceil(bc) * d * bc];
        for (j, row) in kf.chunks(d).enumerate() {
            let (b, jj) = (j / bc, j % bc);
            for (x, &v) in row.iter().enumerate() {
                kt[(b * d + x) * bc + jj] = v;
            }
        }
        kt
    } else {
        vec![]
    };
    let scores = Scores {
        kt: &kt,
        qf: &qf,
        kf: &kf,
        d,
        bc,
        mask,
        quant,
        host,
    };
    let blocks = p.k_len.div_ceil(cfg.bc);
    let (mut s, mut visible) = (vec![0u32; cfg.bc], vec![false; cfg.bc]);
    let (mut weights, mut wide_w) = (vec![0u16; cfg.bc], vec![0u32; cfg.bc]);
    // Two passes: a tile's rows of S, computed once in the max pass and read again by the exp
    // pass (the same scores the hardware keeps in its S arrays or memory).
    let two = cfg.softmax == SoftmaxPass::TwoPass;
    let lazy = cfg.softmax.lazy_threshold();
    let mut rows_s = vec![];
    let mut rows_vis = vec![];
    for q_base in (0..p.q_len).step_by(cfg.br) {
        let rows = cfg.br.min(p.q_len - q_base);
        let mut state = vec![RowState::default(); rows];
        let mut o = vec![0u32; rows * d];
        let computed = |k_base: &usize| !mask.block_skipped(q_base, cfg.br, *k_base);
        if two {
            // The complete rows of S first: m is each row's final max before any weight.
            rows_s.clear();
            rows_s.resize(rows * blocks * cfg.bc, F32_NEG_INF);
            rows_vis.clear();
            rows_vis.resize(rows * blocks * cfg.bc, false);
            for k_base in (0..p.k_len).step_by(cfg.bc).filter(computed) {
                for (r, st) in state.iter_mut().enumerate() {
                    let at = (r * blocks + k_base / cfg.bc) * cfg.bc;
                    let (sr, vr) = (&mut rows_s[at..at + cfg.bc], &mut rows_vis[at..at + cfg.bc]);
                    scores.row(q_base + r, k_base, sr, vr);
                    st.update_max(row_max(sr, cfg.cols), c_of(q_base + r, k_base));
                }
            }
        }
        for k_base in (0..p.k_len).step_by(cfg.bc) {
            if !computed(&k_base) {
                stats.skipped_blocks += 1;
                continue;
            }
            stats.blocks += 1;
            let macs_before = stats.macs;
            for r in 0..rows {
                if two {
                    let at = (r * blocks + k_base / cfg.bc) * cfg.bc;
                    s.copy_from_slice(&rows_s[at..at + cfg.bc]);
                    visible.copy_from_slice(&rows_vis[at..at + cfg.bc]);
                    stats.macs += (d * visible.iter().filter(|&&v| v).count()) as u64;
                } else {
                    stats.macs += scores.row(q_base + r, k_base, &mut s, &mut visible);
                }
                let st = &mut state[r];
                let c = c_of(q_base + r, k_base);
                let up = st.update_max_lazy(row_max(&s, cfg.cols), c, lazy);
                let shift = up.shift;
                if !two {
                    stats.rescales += (shift != 0) as u64;
                    stats.rescales_avoided += up.avoided as u64;
                }
                weights_in(&s, &visible, (st.m, c), fmt, &mut weights, &mut wide_w);
                st.update_sum(row_sum(&wide_w, cfg.cols), shift);
                let orow = &mut o[r * d..(r + 1) * d];
                // A shift of 0 multiplies by 1: every value but a NaN's payload stays, and
                // the normalizing multiply makes any NaN the canonical one.
                if shift != 0 {
                    for x in orow.iter_mut() {
                        *x = fp32_scale2_native(*x, shift);
                    }
                }
                host.pv_row(orow, &wide_w, &visible, &vf[k_base * d..]);
                stats.macs += (d * visible.iter().filter(|&&v| v).count()) as u64;
            }
            stats.masked_macs += (2 * cfg.br * cfg.bc * d) as u64 - (stats.macs - macs_before);
        }
        let tile = &mut out[q_base * d..(q_base + rows) * d];
        normalize(tile, &o, &state, cfg);
        lse.extend(state.iter().map(RowState::lse));
    }
    (out, lse, stats)
}

/// What a query row's scores of one block are computed from: the operands widened (and K
/// transposed block by block where every product is exact in binary32), or quantized QKᵀ.
struct Scores<'a> {
    kt: &'a [f32],
    qf: &'a [f32],
    kf: &'a [f32],
    d: usize,
    bc: usize,
    mask: MaskSpec,
    quant: Option<&'a QuantQk>,
    host: Host,
}

impl Scores<'_> {
    /// Row i's scores in the block from key `k_base` into `s` (masked: −Inf for the max) and
    /// which keys are visible into `visible`; returns the MACs they took. Inlined, so that it
    /// takes the caller's vector unit.
    #[inline(always)]
    fn row(&self, i: usize, k_base: usize, s: &mut [u32], visible: &mut [bool]) -> u64 {
        let (d, bc) = (self.d, self.bc);
        let mut macs = 0u64;
        if !self.kt.is_empty() {
            let block = &self.kt[k_base / bc * d * bc..][..d * bc];
            qk_row(&self.qf[i * d..(i + 1) * d], block, s);
            for (jj, (sj, vis)) in s.iter_mut().zip(visible.iter_mut()).enumerate() {
                *vis = !self.mask.masked(i, k_base + jj);
                *sj = match *vis {
                    true => canonical_nan(f32::from_bits(*sj)),
                    false => F32_NEG_INF,
                };
                macs += (*vis as u64) * d as u64;
            }
            return macs;
        }
        for (jj, (sj, vis)) in s.iter_mut().zip(visible.iter_mut()).enumerate() {
            let j = k_base + jj;
            *vis = !self.mask.masked(i, j);
            if !*vis {
                *sj = F32_NEG_INF;
                continue;
            }
            if let Some(qk) = self.quant {
                // Exact in binary32: |Σ| ≤ d · 127² < 2^24.
                *sj = (qk.score(i, j, d) as f32).to_bits();
                macs += d as u64;
                continue;
            }
            let (qi, kj) = (&self.qf[i * d..(i + 1) * d], &self.kf[j * d..(j + 1) * d]);
            let acc = qi
                .iter()
                .zip(kj)
                .fold(f32::from_bits(ACC_CLEAR), |acc, (&a, &b)| {
                    self.host.mac(acc, a, b)
                });
            *sj = canonical_nan(acc);
            macs += d as u64;
        }
        macs
    }
}

/// A query row's scores of one block where every product is exact in binary32: `s[j]` is
/// −0 plus `q[x] · block[x][j]` for x in order (the MAC's chain), `block` being the block's K
/// transposed (d × Bc). The keys go `L` at a time, each chain in a vector lane, the lanes
/// held in registers across the dimension.
#[inline(always)]
fn qk_row(q: &[f32], block: &[f32], s: &mut [u32]) {
    let bc = s.len();
    let mut at = 0;
    at = qk_lanes::<16>(q, block, s, at, bc);
    at = qk_lanes::<8>(q, block, s, at, bc);
    qk_lanes::<1>(q, block, s, at, bc);
}

/// [`qk_row`]'s keys from `at` on, `L` at a time while `L` of them remain; returns where it
/// stopped.
#[inline(always)]
fn qk_lanes<const L: usize>(
    q: &[f32],
    block: &[f32],
    s: &mut [u32],
    at: usize,
    bc: usize,
) -> usize {
    let mut at = at;
    while at + L <= bc {
        let mut acc = [f32::from_bits(ACC_CLEAR); L];
        for (x, &a) in q.iter().enumerate() {
            let kx = &block[x * bc + at..][..L];
            for l in 0..L {
                acc[l] = mac_native(acc[l], a, kx[l]);
            }
        }
        for l in 0..L {
            s[at + l] = acc[l].to_bits();
        }
        at += L;
    }
    at
}

/// The operands' arithmetic on the host: each operand widened once (exact) to binary32, and
/// the host-FPU MAC, bit-exact with `mac_fused` once a chain's result passes `canonical_nan`:
/// `mac_native` where every product is exact in binary32, the host's fused multiply-add
/// otherwise, the choice made once.
#[derive(Clone, Copy)]
struct Host {
    fmt: Format,
    /// Every product of two operands is exact in binary32 (`Format::exact_product`), asked
    /// once: the plain multiply-add is then the fused one.
    exact: bool,
}

impl Host {
    fn new(fmt: Format) -> Host {
        Host {
            fmt,
            exact: fmt.exact_product() == Format::FP32,
        }
    }

    fn widen(self, h: u16) -> u32 {
        widen(h, self.fmt)
    }

    /// A row of O accumulators (binary32 bits, d of them) after one block: for each visible
    /// key j in order, `o[x] += w[j] · v[j][x]`, each the MAC's one rounding (`v` the block's V
    /// rows from its first key). `L` columns at a time stay in registers across the keys.
    /// NaNs are left as the host makes them: a NaN stays NaN through every later MAC and
    /// rescale, and the normalizing multiply makes it the canonical one, so the row's results
    /// are the model's; the loops, free of that branch, vectorize.
    #[inline(always)]
    fn pv_row(self, o: &mut [u32], w: &[u32], visible: &[bool], v: &[f32]) {
        let mut at = 0;
        at = self.pv_lanes::<32>(o, w, visible, v, at);
        at = self.pv_lanes::<8>(o, w, visible, v, at);
        self.pv_lanes::<1>(o, w, visible, v, at);
    }

    /// [`Host::pv_row`]'s columns from `at` on, `L` at a time while `L` of them remain;
    /// returns where it stopped.
    #[inline(always)]
    fn pv_lanes<const L: usize>(
        self,
        o: &mut [u32],
        w: &[u32],
        visible: &[bool],
        v: &[f32],
        at: usize,
    ) -> usize {
        let d = o.len();
        let mut at = at;
        while at + L <= d {
            // A loop, not `array::from_fn`: its closure was not inlined into the AVX2 body.
            let mut acc = [0f32; L];
            for l in 0..L {
                acc[l] = f32::from_bits(o[at + l]);
            }
            for (j, (&wj, _)) in w
                .iter()
                .zip(visible)
                .enumerate()
                .filter(|(_, (_, &vis))| vis)
            {
                let (wj, vj) = (f32::from_bits(wj), &v[j * d + at..][..L]);
                for l in 0..L {
                    acc[l] = self.mac(acc[l], wj, vj[l]);
                }
            }
            for l in 0..L {
                o[at + l] = acc[l].to_bits();
            }
            at += L;
        }
        at
    }

    #[inline(always)]
    fn mac(self, acc: f32, a: f32, b: f32) -> f32 {
        if self.exact {
            mac_native(acc, a, b)
        } else {
            a.mul_add(b, acc)
        }
    }
}

/// A tile's output rows `tile` (rows × d): each row of its accumulators `o` times the
/// reciprocal of its sum, in the output format.
fn normalize(tile: &mut [u32], o: &[u32], state: &[RowState], cfg: &FlashConfig) {
    let (d, fmt) = (cfg.head_dim, cfg.operand);
    for (r, st) in state.iter().enumerate() {
        let recip = st.reciprocal();
        for c in 0..d {
            let y = fp32_mul_native(o[r * d + c], recip);
            tile[r * d + c] = cfg.out.store(y, fmt);
        }
    }
}

/// Output bits as numbers; `operand` is the short form's format.
pub fn decode(out: &[u32], format: OutFormat, operand: Format) -> Vec<f64> {
    out.iter()
        .map(|&b| match format {
            OutFormat::F32 => f32::from_bits(b) as f64,
            OutFormat::Short => crate::reference::value(b as u16, operand),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::patterns::{tensors, tensors_in, Pattern};
    use crate::softmax::{scale_constant, scale_score, weight, weight_in};

    fn cfg(bc: usize, softmax: SoftmaxPass) -> FlashConfig {
        FlashConfig {
            br: 4,
            bc,
            head_dim: 8,
            cols: 2,
            causal: false,
            out: OutFormat::F32,
            softmax,
            operand: Format::FP16,
        }
    }

    fn run(q_len: usize, k_len: usize, bc: usize, softmax: SoftmaxPass, seed: u64) -> Vec<u32> {
        let (q, k, v) = tensors(Pattern::Unit, q_len, k_len, 8, seed);
        let p = Problem {
            q: &q,
            k: &k,
            v: &v,
            q_len,
            k_len,
            score_exp: 0,
        };
        flash_attention(&p, &cfg(bc, softmax)).0
    }

    /// The tiled model written plainly, one score and one MAC at a time, from the scalar
    /// operator models (`mac_fused`, the tree reductions over `fp32_max` and `fp32_add`,
    /// `weight_in`, `fp32_scale2`, `fp32_mul`; `weight_in` and `RowState` use host forms that
    /// their own tests hold to the integer models): what the model's vector lanes, slice
    /// sweep and one-pass max must equal bit for bit.
    fn plain(p: &Problem, cfg: &FlashConfig) -> Vec<u32> {
        use crate::reduce::tree;
        let (d, fmt) = (cfg.head_dim, cfg.operand);
        let mask = MaskSpec {
            q_len: p.q_len,
            k_len: p.k_len,
            causal: cfg.causal,
        };
        let c = scaled_constant(d, p.score_exp);
        let lazy = cfg.softmax.lazy_threshold();
        let mut out = vec![0u32; p.q_len * d];
        for q_base in (0..p.q_len).step_by(cfg.br) {
            for i in q_base..p.q_len.min(q_base + cfg.br) {
                let (mut st, mut o) = (RowState::default(), vec![0u32; d]);
                for k_base in (0..p.k_len).step_by(cfg.bc) {
                    if mask.block_skipped(q_base, cfg.br, k_base) {
                        continue;
                    }
                    let vis: Vec<bool> = (k_base..k_base + cfg.bc)
                        .map(|j| !mask.masked(i, j))
                        .collect();
                    let s: Vec<u32> = (0..cfg.bc)
                        .map(|jj| match vis[jj] {
                            false => F32_NEG_INF,
                            true => (0..d).fold(ACC_CLEAR, |a, x| {
                                let (qx, kx) = (p.q[i * d + x], p.k[(k_base + jj) * d + x]);
                                mac_fused(a, qx as u64, kx as u64, fmt)
                            }),
                        })
                        .collect();
                    let b = cfg.bc / cfg.cols;
                    let locals: Vec<u32> = s.chunks(b).map(|x| tree(x, fp32_max)).collect();
                    let up = st.update_max_lazy(tree(&locals, fp32_max), c, lazy);
                    let w: Vec<u16> = (0..cfg.bc)
                        .map(|jj| weight_in(s[jj], st.m, c, !vis[jj], fmt))
                        .collect();
                    let wide: Vec<u32> = w.iter().map(|&x| widen(x, fmt)).collect();
                    let sums: Vec<u32> = wide.chunks(b).map(|x| tree(x, fp32_add)).collect();
                    st.update_sum(tree(&sums, fp32_add), up.shift);
                    for (x, ox) in o.iter_mut().enumerate() {
                        *ox = fp32_scale2(*ox, up.shift);
                        for jj in (0..cfg.bc).filter(|&jj| vis[jj]) {
                            *ox = mac_fused(
                                *ox,
                                w[jj] as u64,
                                p.v[(k_base + jj) * d + x] as u64,
                                fmt,
                            );
                        }
                    }
                }
                let r = st.reciprocal();
                for x in 0..d {
                    out[i * d + x] = cfg.out.store(fp32_mul(o[x], r), fmt);
                }
            }
        }
        out
    }

    proptest::proptest! {
        #![proptest_config(proptest::test_runner::Config::with_cases(64))]
        /// The model equals [`plain`] on random shapes (partial tiles and blocks, Bc past the
        /// vector widths and short of them, d = 1 to 40), causal or not, online or lazy, FP16
        /// or BF16, FP32 or short output, and inputs from every pattern (Inf and NaN
        /// included).
        #[test]
        fn the_host_forms_are_the_plain_model(
            q_len in 1usize..40, k_len in 1usize..70, d in 1usize..41,
            br in 1usize..9, cols in 1usize..5, b in 1usize..7,
            causal in proptest::prelude::any::<bool>(), lazy in 0u8..3,
            bf16 in proptest::prelude::any::<bool>(), f32_out in proptest::prelude::any::<bool>(),
            pattern in 0usize..Pattern::ALL.len(), seed in proptest::prelude::any::<u64>(),
        ) {
            let operand = if bf16 { Format::BF16 } else { Format::FP16 };
            let ((q, k, v), _) = tensors_in(Pattern::ALL[pattern], q_len, k_len, d, seed, operand);
            let p = Problem { q: &q, k: &k, v: &v, q_len, k_len, score_exp: 0 };
            let cfg = FlashConfig {
                br, bc: b * cols, head_dim: d, cols, causal,
                out: if f32_out { OutFormat::F32 } else { OutFormat::Short },
                softmax: match lazy { 0 => SoftmaxPass::Online, t => SoftmaxPass::Lazy { threshold: t * 4 } },
                operand,
            };
            proptest::prop_assert_eq!(flash_attention(&p, &cfg).0, plain(&p, &cfg));
        }
    }

    /// With one block per row the running max is the row's max: both orders agree bit for bit.
    #[test]
    fn one_block_two_pass_equals_online() {
        for seed in 0..20 {
            assert_eq!(
                run(7, 8, 8, SoftmaxPass::Online, seed),
                run(7, 8, 8, SoftmaxPass::TwoPass, seed)
            );
        }
    }

    /// Keys whose scores grow block by block. The running max moves in whole powers of two, so
    /// the online order's rescales are exact: the orders differ only where a weight falls
    /// below FP16's normal range against the final max (here the first keys' weights, 2^-40
    /// and less of the last's, flush to 0 in the two-pass order; the online order kept them at
    /// full precision before rescaling O in FP32). The two-pass output is standard attention
    /// written out here,
    /// row by row with no tiling: the max over the whole row first, then the FP16 weights,
    /// their sum block by block (the array's association) and P·V key by key.
    #[test]
    fn growing_scores_separate_the_orders() {
        let (q_len, k_len, d, bc) = (3, 24, 8, 4);
        let one = 0x3C00u16;
        let q = vec![one; q_len * d];
        // Key j: every element (j + 1) / 2 (exact in FP16), so t grows by about 2 a key; V:
        // distinct values.
        let k: Vec<u16> = (0..k_len * d)
            .map(|x| half::f16::from_f64(((x / d) + 1) as f64 / 2.0).to_bits())
            .collect();
        let v: Vec<u16> = (0..k_len * d)
            .map(|x| half::f16::from_f64(((x * 7) % 13) as f64 / 13.0 - 0.4).to_bits())
            .collect();
        let p = Problem {
            q: &q,
            k: &k,
            v: &v,
            q_len,
            k_len,
            score_exp: 0,
        };
        let online = flash_attention(&p, &cfg(bc, SoftmaxPass::Online)).0;
        let (two, stats) = flash_attention(&p, &cfg(bc, SoftmaxPass::TwoPass));
        assert_ne!(online, two, "the running max grew: a rescale happened");
        assert_eq!(
            stats.macs,
            (2 * q_len * k_len * d) as u64,
            "S computed once"
        );
        let c = scale_constant(d);
        for i in 0..q_len {
            let s: Vec<u32> = (0..k_len)
                .map(|j| (0..d).fold(ACC_CLEAR, |a, x| mac(a, q[i * d + x], k[j * d + x])))
                .collect();
            let max = s.iter().fold(F32_NEG_INF, |m, &x| fp32_max(m, x));
            let m = fp32_ceil(scale_score(max, c));
            let w: Vec<u16> = s.iter().map(|&x| weight(x, m, c, false)).collect();
            let wide: Vec<u32> = w.iter().map(|&x| fp16_to_fp32(x)).collect();
            let l = wide
                .chunks(bc)
                .fold(0, |l, blk| fp32_add(l, row_sum(blk, 2)));
            let r = fp32_recip(l);
            for x in 0..d {
                let o = (0..k_len).fold(0, |a, j| mac(a, w[j], v[j * d + x]));
                assert_eq!(two[i * d + x], fp32_mul(o, r), "row {i} column {x}");
            }
        }
    }
}
