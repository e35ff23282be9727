//! The whole core on the memory model: Q, K and V go into memory, the core runs to `done`, O
//! comes back out and is compared bit for bit with the hardware model (`kernels::flash`), and
//! the core's counters with what the model says the schedule must do. This file: the problem
//! and its shape checks; `driver.rs` runs it, `expect.rs` checks a run, `scenarios.rs` holds
//! the directed and random scenarios.

mod batch;
mod driver;
mod expect;
pub mod launches;
mod scenarios;
mod top;

pub use batch::*;
pub use driver::*;
pub use expect::*;
pub use scenarios::*;
pub use top::*;

use std::collections::BTreeMap;

use anyhow::{bail, ensure, Context, Result};
use hdl::config::MAX_MEM_LATENCY;
use hdl::core::{CoreParams, COUNTERS};
use hdl::format::Format;
use hdl::mem::dma::{DmaConfig, MemIf};
use kernels::accuracy::Accuracy;
use kernels::flash::{
    decode, flash_attention, flash_attention_quant, FlashConfig, FlashStats, OutFormat, Problem,
};
use kernels::operands::TensorScales;
use kernels::patterns::{tensors, Pattern};
use kernels::quant::{QuantQk, QuantSpec};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError};
pub use verilator_tb::axi::AxiFault;
use verilator_tb::axi::{AxiLink, AxiStats, AxiTiming};
pub use verilator_tb::memory::Memory;
use verilator_tb::memory::{MemLink, MemoryConfig, MemoryStats};
use verilator_tb::{Dut, Model};

/// How a tensor's heads and rows lie in memory (one batch): `Bhsd` (heads, len, d) row-major,
/// each head's rows together; `Bshd` (len, heads, d), each position's heads together (the
/// layout of a linear projection's output, read in place through the row and head strides).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum TensorLayout {
    #[default]
    Bhsd,
    Bshd,
}

impl std::str::FromStr for TensorLayout {
    type Err = anyhow::Error;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "bhsd" => Ok(TensorLayout::Bhsd),
            "bshd" => Ok(TensorLayout::Bshd),
            _ => bail!("unknown layout `{s}`: choose bhsd (heads, seq, d) or bshd (seq, heads, d)"),
        }
    }
}

impl TensorLayout {
    pub fn name(self) -> &'static str {
        match self {
            TensorLayout::Bhsd => "bhsd",
            TensorLayout::Bshd => "bshd",
        }
    }

    /// (row stride, head stride) in bytes of a tensor of `heads` heads of `len` rows of
    /// `row_bytes` bytes.
    pub fn strides(self, heads: u64, len: u64, row_bytes: u64) -> Option<(u64, u64)> {
        match self {
            TensorLayout::Bhsd => Some((row_bytes, len.checked_mul(row_bytes)?)),
            TensorLayout::Bshd => Some((heads.checked_mul(row_bytes)?, row_bytes)),
        }
    }
}

/// The hardware model's tiling and arithmetic for `p` (the forward's, as the core runs it) on
/// heads of `head_dim` with `causal` masking, O in `out`, operands in `format`.
pub fn flash_config(
    p: &CoreParams,
    (head_dim, causal): (usize, bool),
    out: OutFormat,
    format: Format,
) -> FlashConfig {
    FlashConfig {
        br: p.br() as usize,
        bc: p.bc() as usize,
        head_dim,
        cols: p.row.cols as usize,
        causal,
        out,
        // The fused designs' online softmax, or rowfused's two passes over whole rows.
        softmax: match (p.row.two_pass(), p.row.rescale) {
            (true, _) => kernels::flash::SoftmaxPass::TwoPass,
            (false, hdl::softmax::Rescale::Pow2) => kernels::flash::SoftmaxPass::Online,
            (false, hdl::softmax::Rescale::Lazy { threshold }) => {
                kernels::flash::SoftmaxPass::Lazy { threshold }
            }
        },
        operand: format,
    }
}

/// One attention problem: `heads` heads of FP16 Q (q_len × d) and `kv_heads` heads of K and V
/// (k_len × d; Q head h uses K/V head h / (heads / kv_heads), grouped-query attention when
/// fewer), logically (heads, len, d) row-major here, stored in memory by `layout`.
#[derive(Clone, Debug, PartialEq)]
pub struct Attention {
    pub heads: usize,
    pub kv_heads: usize,
    pub layout: TensorLayout,
    pub q_len: usize,
    pub k_len: usize,
    pub head_dim: usize,
    pub q: Vec<u16>,
    pub k: Vec<u16>,
    pub v: Vec<u16>,
    pub causal: bool,
    pub out: OutFormat,
    /// Q, K and V's format: binary16 or bfloat16 bits (the design's `in_format`).
    pub format: Format,
    /// The design's integer QKᵀ (`qk_format`), if any: Q and K are then quantized on the host
    /// (`kernels::quant`: Q per token, K per block of Bc keys after smoothing) as they are
    /// written to memory, and the results are held to exact attention on the quantized values.
    pub qk: Option<QuantSpec>,
    /// Q, K and V as stored: each tensor its values × 2^exp (`TensorScales`), when the
    /// operand format's range is narrower than the values' (FP8 operands of binary16 problems,
    /// [`Attention::converted`]); zero otherwise. The softmax constant takes Q's and K's back
    /// ([`Attention::softmax_constant`]); O is V's scale times the problem's.
    pub scales: TensorScales,
}

impl Attention {
    /// Random values of `pattern`, a different seed per head.
    #[allow(clippy::too_many_arguments)]
    pub fn generate(
        pattern: Pattern,
        heads: usize,
        q_len: usize,
        k_len: usize,
        head_dim: usize,
        causal: bool,
        out: OutFormat,
        seed: u64,
    ) -> Self {
        let (mut q, mut k, mut v) = (vec![], vec![], vec![]);
        for h in 0..heads {
            let s = seed
                .wrapping_mul(0x9E37_79B9_7F4A_7C15)
                .wrapping_add(h as u64 + 1);
            let (hq, hk, hv) = tensors(pattern, q_len, k_len, head_dim, s);
            q.extend(hq);
            k.extend(hk);
            v.extend(hv);
        }
        Attention {
            heads,
            kv_heads: heads,
            layout: TensorLayout::Bhsd,
            q_len,
            k_len,
            head_dim,
            q,
            k,
            v,
            causal,
            out,
            format: Format::FP16,
            qk: None,
            scales: TensorScales::default(),
        }
    }

    /// The softmax constant the core is given (the SCALE register): C for d, divided by the
    /// stored scores' scale.
    pub fn softmax_constant(&self) -> u32 {
        kernels::softmax::scaled_constant(self.head_dim, self.scales.score_exp())
    }

    /// The same problem as the design `p` takes it: its operand format
    /// ([`Attention::converted`]) and its QKᵀ ([`Attention::for_qk_of`]).
    pub fn for_design(self, p: &CoreParams) -> Self {
        self.converted(p.row.pe.mac.formats().operand).for_qk_of(p)
    }

    /// The same problem for the design `p`'s QKᵀ: integer (quantized on the host) or not.
    pub fn for_qk_of(mut self, p: &CoreParams) -> Self {
        self.qk = p.row.quant();
        self
    }

    /// Head `h`'s Q and its K/V head's K quantized for blocks of `bc` keys (integer QKᵀ); a
    /// non-finite Q or K is refused by name.
    fn quantized_head(&self, h: usize, qk: QuantSpec) -> Result<QuantQk> {
        let p = self.head(h);
        QuantQk::quantize(
            p.q,
            p.k,
            p.q_len,
            p.k_len,
            self.head_dim,
            qk.bc,
            qk.format,
            self.format,
        )
        .map_err(|e| anyhow::anyhow!("head {h}: {e}"))
    }

    /// Q and K as memory holds them: the values, or with integer QKᵀ each head's quantized
    /// rows (`QuantQk::memory_rows`; K from its group's first query head's quantization,
    /// which K alone decides).
    pub fn stored_qk(&self) -> Result<(Vec<u16>, Vec<u16>)> {
        let Some(qk) = self.qk else {
            return Ok((self.q.clone(), self.k.clone()));
        };
        let (mut q, mut k) = (
            Vec::with_capacity(self.q.len()),
            Vec::with_capacity(self.k.len()),
        );
        for h in 0..self.heads {
            let (hq, hk) = self.quantized_head(h, qk)?.memory_rows(self.head_dim);
            q.extend(hq);
            if h % self.group() == 0 {
                k.extend(hk);
            }
        }
        Ok((q, k))
    }

    /// The same values in `format`: binary16 kept, bfloat16 rounded from them (nearest even),
    /// so both formats see the same problems; a format of a narrower range (FP8) at per-tensor
    /// power-of-two scales that fit each tensor into it (`kernels::operands::round_scaled`).
    pub fn converted(self, format: Format) -> Self {
        let scales = match format != self.format {
            true => Attention::fitted_scales_of(std::slice::from_ref(&self), format),
            false => None,
        };
        self.converted_at(format, scales)
    }

    /// The per-tensor scales that fit Q, K and V of all of `problems` into `format`, if it is
    /// stored at scales (`kernels::operands::fit_exp`): one set a varlen batch's sequences
    /// share, as they share the SCALE register.
    pub fn fitted_scales_of(problems: &[Attention], format: Format) -> Option<TensorScales> {
        use kernels::operands::fit_exp;
        if !kernels::operands::scaled_per_tensor(format) {
            return None;
        }
        let exp = |t: fn(&Attention) -> &[u16]| {
            let values = problems.iter().flat_map(|a| {
                t(a).iter()
                    .map(|&x| kernels::reference::value_of(x as u64, a.format))
            });
            fit_exp(values, format)
        };
        Some(TensorScales {
            q: exp(|a| &a.q),
            k: exp(|a| &a.k),
            v: exp(|a| &a.v),
        })
    }

    /// [`Attention::converted`] at the given per-tensor `scales` (None: stored as they are).
    pub fn converted_at(mut self, format: Format, scales: Option<TensorScales>) -> Self {
        if let (true, Some(scales)) = (format != self.format, scales) {
            assert_eq!(self.scales, TensorScales::default(), "scaled twice");
            let from = self.format;
            for (t, e) in [&mut self.q, &mut self.k, &mut self.v]
                .into_iter()
                .zip([scales.q, scales.k, scales.v])
            {
                let wide: Vec<u64> = t.iter().map(|&x| x as u64).collect();
                *t = kernels::operands::round_at(&wide, from, format, e);
            }
            self.scales = scales;
            self.format = format;
        }
        if format != self.format {
            for t in [&mut self.q, &mut self.k, &mut self.v] {
                for x in t.iter_mut() {
                    *x = kernels::fp::convert(*x as u64, self.format, format) as u16;
                }
            }
            self.format = format;
        }
        self
    }

    /// The same problem with `kv_heads` K/V heads (the first ones), for grouped-query
    /// attention.
    pub fn grouped(mut self, kv_heads: usize) -> Self {
        let n = kv_heads.min(self.heads) * self.k_len * self.head_dim;
        self.k.truncate(n);
        self.v.truncate(n);
        self.kv_heads = kv_heads;
        self
    }

    /// The same problem stored in `layout`.
    pub fn laid_out(mut self, layout: TensorLayout) -> Self {
        self.layout = layout;
        self
    }

    /// Q heads per K/V head.
    pub fn group(&self) -> usize {
        self.heads / self.kv_heads.max(1)
    }

    /// Checks that the problem fits the core: shapes, the head dimension, the index widths,
    /// the memory the core addresses and the simulator holds.
    pub fn validate(&self, p: &CoreParams) -> Result<()> {
        self.validate_core(p)?;
        check_sim_memory(self.heads, self.q_len, self.k_len, self.head_dim, self.out)
    }

    /// [`Attention::validate`] without the simulator's memory: what the hardware model alone
    /// needs (the core could run it).
    pub fn validate_core(&self, p: &CoreParams) -> Result<()> {
        let want = p.row.pe.mac.formats().operand;
        ensure!(
            self.format == want,
            "the inputs are {} values but the design takes {} (in_format = \"{}\"): convert \
             them, or set in_format to match",
            hdl::format::in_format_key(self.format),
            hdl::format::in_format_key(want),
            hdl::format::in_format_key(want)
        );
        let qk_name = |q: Option<QuantSpec>| {
            q.map_or("QK in the operand format".to_string(), |s| {
                format!("qk_format = \"{}\" with bc = {}", s.format.name(), s.bc)
            })
        };
        ensure!(
            self.qk == p.row.quant(),
            "the inputs are prepared for {} but the design has {}: prepare them for the design",
            qk_name(self.qk),
            qk_name(p.row.quant())
        );
        check_core_shape(
            p,
            self.heads,
            self.q_len,
            self.k_len,
            self.head_dim,
            self.out,
        )?;
        self.check_values()?;
        if let Some(qk) = self.qk {
            for h in 0..self.heads {
                self.quantized_head(h, qk)?;
            }
        }
        Ok(())
    }

    /// Checks that the K/V heads divide the query heads and that each tensor holds heads ×
    /// len × d values (what indexing a head needs, whatever the core).
    pub fn check_values(&self) -> Result<()> {
        ensure!(
            self.kv_heads >= 1 && self.heads.is_multiple_of(self.kv_heads),
            "{} query heads cannot share {} K/V heads: the K/V heads must divide the query \
             heads (grouped-query attention)",
            self.heads,
            self.kv_heads
        );
        let d = self.head_dim;
        for (name, t, heads, len) in [
            ("Q", &self.q, self.heads, self.q_len),
            ("K", &self.k, self.kv_heads, self.k_len),
            ("V", &self.v, self.kv_heads, self.k_len),
        ] {
            ensure!(
                heads.checked_mul(len).and_then(|n| n.checked_mul(d)) == Some(t.len()),
                "{name} holds {} values, not heads x len x d = {heads} x {len} x {d}",
                t.len()
            );
        }
        Ok(())
    }

    fn head<'a>(&'a self, h: usize) -> Problem<'a> {
        let d = self.head_dim;
        let (qs, ks) = (self.q_len * d, self.k_len * d);
        let g = h / self.group();
        Problem {
            q: &self.q[h * qs..(h + 1) * qs],
            k: &self.k[g * ks..(g + 1) * ks],
            v: &self.v[g * ks..(g + 1) * ks],
            q_len: self.q_len,
            k_len: self.k_len,
            score_exp: self.scales.score_exp(),
        }
    }

    pub fn flash_config(&self, p: &CoreParams) -> FlashConfig {
        flash_config(p, (self.head_dim, self.causal), self.out, self.format)
    }

    /// `f` of every head, in head order, on up to `threads` threads (heads split in runs),
    /// each head counted done on the watch (`crate::watch`). Once a stop is asked, the heads
    /// not yet begun are left out: the caller checks the watch before it uses the result.
    fn per_head<T: Send>(&self, threads: usize, f: impl Fn(usize) -> T + Sync) -> Vec<T> {
        let f = |h: usize| {
            let r = f(h);
            crate::watch::advance(1);
            r
        };
        let go = |_: &usize| !crate::watch::stopping();
        let threads = threads.clamp(1, self.heads.max(1));
        if threads == 1 {
            return (0..self.heads).take_while(go).map(f).collect();
        }
        let per = self.heads.div_ceil(threads);
        std::thread::scope(|s| {
            let runs: Vec<_> = (0..threads)
                .map(|t| {
                    let f = &f;
                    s.spawn(move || {
                        let end = ((t + 1) * per).min(self.heads);
                        (t * per..end).take_while(go).map(f).collect::<Vec<T>>()
                    })
                })
                .collect();
            runs.into_iter()
                .flat_map(|r| r.join().expect("a head's thread"))
                .collect()
        })
    }

    /// The hardware model's output bits (heads × q_len × d) and its counts.
    pub fn expected(&self, p: &CoreParams) -> (Vec<u32>, FlashStats) {
        self.expected_on(p, 1)
    }

    /// [`Attention::expected`], the heads on up to `threads` threads (the same bits).
    pub fn expected_on(&self, p: &CoreParams, threads: usize) -> (Vec<u32>, FlashStats) {
        let cfg = self.flash_config(p);
        let heads = self.per_head(threads, |h| match self.qk {
            None => flash_attention(&self.head(h), &cfg),
            Some(qk) => {
                let quant = self
                    .quantized_head(h, qk)
                    .expect("validated: Q and K are finite");
                flash_attention_quant(&self.head(h), &quant, &cfg)
            }
        });
        let mut out = Vec::with_capacity(self.heads * self.q_len * self.head_dim);
        let mut stats = FlashStats::default();
        for (o, s) in heads {
            out.extend(o);
            stats += s;
        }
        (out, stats)
    }

    /// `out` (heads × q_len × d bits) against the f64 and plain FP16 references, head by head.
    pub fn accuracy(&self, out: &[u32]) -> Accuracy {
        self.accuracy_on(out, 1)
    }

    /// [`Attention::accuracy`], the heads on up to `threads` threads.
    pub fn accuracy_on(&self, out: &[u32], threads: usize) -> Accuracy {
        let got = decode(out, self.out, self.format);
        let n = self.q_len * self.head_dim;
        self.per_head(threads, |h| {
            let got = &got[h * n..(h + 1) * n];
            match self.qk {
                None => Accuracy::of_attention(
                    &self.head(h),
                    self.head_dim,
                    self.causal,
                    self.format,
                    got,
                ),
                Some(qk) => {
                    let quant = self
                        .quantized_head(h, qk)
                        .expect("validated: Q and K are finite");
                    Accuracy::of_quantized(
                        &self.head(h),
                        &quant,
                        self.head_dim,
                        self.causal,
                        self.format,
                        got,
                    )
                }
            }
        })
        .into_iter()
        .reduce(Accuracy::merge)
        .unwrap_or_default()
        .descaled(self.scales.v)
    }

    /// Integer QKᵀ: `out`'s max |O − O_f64| / max |V| against f64 attention on the original
    /// Q and K, over the heads (None without integer QKᵀ, or for an `out` of another shape).
    pub fn quantization_error(&self, out: &[u32]) -> Option<f64> {
        self.qk?;
        let n = self.q_len * self.head_dim;
        if out.len() != self.heads * n {
            return None;
        }
        let got = decode(out, self.out, self.format);
        let worst = (0..self.heads)
            .map(|h| {
                Accuracy::of_attention(
                    &self.head(h),
                    self.head_dim,
                    self.causal,
                    self.format,
                    &got[h * n..(h + 1) * n],
                )
                .rel_err()
            })
            .fold(0.0, f64::max);
        Some(worst)
    }

    /// Bytes of one value of O as the core writes it.
    pub fn out_bytes(&self) -> usize {
        out_bytes(self.out, self.format)
    }

    /// Bytes of one value of Q, K and V in memory.
    pub fn in_bytes(&self) -> usize {
        self.format.bytes() as usize
    }

    /// The problem's shape, which fixes the schedule's counts (`crate::schedule`).
    pub fn shape(&self) -> crate::schedule::Shape {
        crate::schedule::Shape {
            heads: self.heads,
            q_len: self.q_len,
            k_len: self.k_len,
            head_dim: self.head_dim,
            causal: self.causal,
            out_bytes: self.out_bytes(),
            kv_group: self.group(),
        }
    }
}

/// Bytes of one output value, its short form in the operands' `format`.
pub(super) fn out_bytes(out: OutFormat, format: Format) -> usize {
    match out {
        OutFormat::Short => format.bytes() as usize,
        OutFormat::F32 => 4,
    }
}

/// The byte the O region holds before a run (see [`run`]).
pub const O_POISON: u8 = 0xFF;

/// The largest memory image the simulator holds (Q, K, V and O of all heads): 4 GiB.
pub const MAX_SIM_MEMORY: u64 = 4 << 30;

/// Checks a problem's shape against the core and the simulator before anything is allocated:
/// [`check_core_shape`], and the simulator's memory.
pub fn check_shape(
    p: &CoreParams,
    heads: usize,
    q_len: usize,
    k_len: usize,
    head_dim: usize,
    out: OutFormat,
) -> Result<()> {
    check_core_shape(p, heads, q_len, k_len, head_dim, out)?;
    check_sim_memory(heads, q_len, k_len, head_dim, out)
}

/// The simulator's memory holds the problem (or a varlen batch's packed tensors).
pub fn check_sim_memory(
    heads: usize,
    q_len: usize,
    k_len: usize,
    head_dim: usize,
    out: OutFormat,
) -> Result<()> {
    let bytes =
        Layout::upper_bound(heads, q_len, k_len, head_dim, out).map_or(u64::MAX, |l| l.size);
    ensure!(
        bytes <= MAX_SIM_MEMORY,
        "the problem needs {bytes} bytes of simulated memory (heads {heads}, q_len {q_len}, \
         k_len {k_len}, d {head_dim}); the simulator holds at most {MAX_SIM_MEMORY} bytes: use \
         fewer heads or shorter sequences"
    );
    Ok(())
}

/// Checks a problem's shape against the core (what it could run, simulated or not): the head
/// dimension, the index registers (heads, lengths, a length plus one tile) and the core's
/// address reach, all in checked arithmetic.
pub fn check_core_shape(
    p: &CoreParams,
    heads: usize,
    q_len: usize,
    k_len: usize,
    head_dim: usize,
    out: OutFormat,
) -> Result<()> {
    check_packed_shape(p, heads, q_len, k_len, head_dim, out)?;
    check_row_keys(p, k_len)
}

/// rowfused holds a query tile's whole rows of S: a problem (or a varlen sequence) whose tiles
/// see more keys than its S arrays hold is refused (the last tile sees every key). unfused
/// reads a tile's S back in one descriptor of a block of the tile's rows per block of keys:
/// their count must fit the index registers.
pub fn check_row_keys(p: &CoreParams, k_len: usize) -> Result<()> {
    if p.row.scratch() {
        let blocks = (k_len.div_ceil(p.bc() as usize) as u64)
            .saturating_sub(hdl::soc::regmap::scratch_held_blocks(p));
        let rows = blocks * p.br() as u64;
        let most = (1u64 << p.index_bits) - 1;
        ensure!(
            rows <= most,
            "k_len = {k_len} is too long for {} with index_bits = {}: a tile reads its S              back as {rows} rows (br = {} for each of the {blocks} blocks of bc keys that go              through the scratch region) and the index registers count up to {most}; raise              index_bits or shorten the sequence",
            p.row.variant.name(),
            p.index_bits,
            p.br(),
        );
    }
    if let Some(keys) = p.row.plan().row_keys().filter(|_| !p.row.spills()) {
        ensure!(
            k_len <= keys as usize,
            "k_len = {k_len} is longer than the rows of S rowfused holds: its S arrays keep \
             [rowfused] keys = {keys} keys a query row, and a query tile sees up to k_len keys: \
             raise keys to {} or more (a power-of-two multiple of bc = {}), or shorten the \
             sequence",
            k_len.div_ceil(p.bc() as usize).next_power_of_two() * p.bc() as usize,
            p.bc()
        );
    }
    Ok(())
}

/// [`check_core_shape`] but for the rows of S rowfused holds: what a varlen batch's packed
/// tensors must fit (each sequence's keys are checked on their own).
pub fn check_packed_shape(
    p: &CoreParams,
    heads: usize,
    q_len: usize,
    k_len: usize,
    head_dim: usize,
    out: OutFormat,
) -> Result<()> {
    ensure!(
        head_dim == p.d() as usize,
        "the inputs have head dimension {head_dim} but the core is built for head_dim = {}: \
         use a preset or config with head_dim = {head_dim}",
        p.d()
    );
    ensure!(heads >= 1, "there must be at least one head");
    ensure!(
        q_len >= 1 && k_len >= 1,
        "sequence lengths must be at least 1 (q_len = {q_len}, k_len = {k_len})"
    );
    // Validated configurations have index_bits ≤ 30 and addr_bits ≤ 48: the shifts fit.
    let max = (1u64 << p.index_bits) - 1;
    for (what, n) in [("heads", heads), ("q_len", q_len), ("k_len", k_len)] {
        ensure!(
            n as u64 <= max,
            "{what} = {n} does not fit the core's {}-bit index registers (at most {max}): \
             raise index_bits",
            p.index_bits
        );
    }
    // Sequence positions plus one tile or block must also fit.
    let reach = (q_len.max(k_len) as u64).checked_add(p.br().max(p.bc()) as u64);
    ensure!(
        reach.is_some_and(|r| r <= max),
        "sequence length {} plus one tile exceeds the core's {}-bit index registers: raise \
         index_bits",
        q_len.max(k_len),
        p.index_bits
    );
    let bytes = Layout::upper_bound(heads, q_len, k_len, head_dim, out).map(|l| l.size);
    let reach = 1u64 << p.addr_bits;
    ensure!(
        bytes.is_some_and(|b| b < reach),
        "the problem needs {} bytes of memory, more than the core's {}-bit addresses reach: \
         raise addr_bits or shorten the problem",
        bytes.map_or("over 2^64".into(), |b| b.to_string()),
        p.addr_bits
    );
    Ok(())
}
