//! The whole core on the memory model: Q, K and V go into memory, the core runs to `done`, O
//! comes back out and is compared bit for bit with the hardware model (`kernels::flash`), and
//! the core's counters with what the model says the schedule must do.

use std::collections::BTreeMap;

use anyhow::{bail, ensure, Context, Result};
use hdl::config::MAX_MEM_LATENCY;
use hdl::core::{CoreParams, COUNTERS};
use kernels::accuracy::Accuracy;
use kernels::flash::{decode, flash_attention, FlashConfig, FlashStats, OutFormat, Problem};
use kernels::patterns::{tensors, Pattern};
use kernels::softmax::scale_constant;
use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestError};
use verilator_tb::memory::{MemLink, Memory, MemoryConfig, MemoryStats};
use verilator_tb::{Dut, Model};

/// One attention problem: `heads` heads of FP16 Q (q_len × d), K and V (k_len × d), each
/// stored (heads, len, d) row-major.
#[derive(Clone, Debug, PartialEq)]
pub struct Attention {
    pub heads: usize,
    pub q_len: usize,
    pub k_len: usize,
    pub head_dim: usize,
    pub q: Vec<u16>,
    pub k: Vec<u16>,
    pub v: Vec<u16>,
    pub causal: bool,
    pub out: OutFormat,
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
            q_len,
            k_len,
            head_dim,
            q,
            k,
            v,
            causal,
            out,
        }
    }

    /// Checks that the problem fits the core: shapes, the head dimension, the index widths,
    /// the memory the core addresses and the simulator holds.
    pub fn validate(&self, p: &CoreParams) -> Result<()> {
        check_shape(
            p,
            self.heads,
            self.q_len,
            self.k_len,
            self.head_dim,
            self.out,
        )?;
        let d = self.head_dim;
        for (name, t, len) in [
            ("Q", &self.q, self.q_len),
            ("K", &self.k, self.k_len),
            ("V", &self.v, self.k_len),
        ] {
            ensure!(
                t.len() == self.heads * len * d,
                "{name} holds {} values, not heads x len x d = {} x {len} x {d}",
                t.len(),
                self.heads
            );
        }
        Ok(())
    }

    fn head<'a>(&'a self, h: usize) -> Problem<'a> {
        let d = self.head_dim;
        let (qs, ks) = (self.q_len * d, self.k_len * d);
        Problem {
            q: &self.q[h * qs..(h + 1) * qs],
            k: &self.k[h * ks..(h + 1) * ks],
            v: &self.v[h * ks..(h + 1) * ks],
            q_len: self.q_len,
            k_len: self.k_len,
        }
    }

    pub fn flash_config(&self, p: &CoreParams) -> FlashConfig {
        FlashConfig {
            br: p.br() as usize,
            bc: p.bc() as usize,
            head_dim: self.head_dim,
            cols: p.row.cols as usize,
            causal: self.causal,
            out: self.out,
        }
    }

    /// The hardware model's output bits (heads × q_len × d) and its counts.
    pub fn expected(&self, p: &CoreParams) -> (Vec<u32>, FlashStats) {
        let cfg = self.flash_config(p);
        let mut out = vec![];
        let mut stats = FlashStats::default();
        for h in 0..self.heads {
            let (o, s) = flash_attention(&self.head(h), &cfg);
            out.extend(o);
            stats.macs += s.macs;
            stats.masked_macs += s.masked_macs;
            stats.blocks += s.blocks;
            stats.skipped_blocks += s.skipped_blocks;
        }
        (out, stats)
    }

    /// `out` (heads × q_len × d bits) against the f64 and plain FP16 references, head by head.
    pub fn accuracy(&self, out: &[u32]) -> Accuracy {
        let got = decode(out, self.out);
        let n = self.q_len * self.head_dim;
        (0..self.heads)
            .map(|h| {
                Accuracy::of_attention(
                    &self.head(h),
                    self.head_dim,
                    self.causal,
                    &got[h * n..(h + 1) * n],
                )
            })
            .reduce(Accuracy::merge)
            .unwrap_or_default()
    }

    fn out_bytes(&self) -> usize {
        out_bytes(self.out)
    }
}

/// Bytes of one output value.
fn out_bytes(out: OutFormat) -> usize {
    match out {
        OutFormat::F16 => 2,
        OutFormat::F32 => 4,
    }
}

/// The byte the O region holds before a run (see [`run`]).
pub const O_POISON: u8 = 0xFF;

/// The largest memory image the simulator holds (Q, K, V and O of all heads): 4 GiB.
pub const MAX_SIM_MEMORY: u64 = 4 << 30;

/// Checks a problem's shape against the core before anything is allocated: the head dimension,
/// the index registers (heads, lengths, a length plus one tile), the core's address reach and
/// the simulator's memory, all in checked arithmetic.
pub fn check_shape(
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
    let bytes = Layout::checked(heads, q_len, k_len, head_dim, out).map(|l| l.size);
    let reach = 1u64 << p.addr_bits;
    ensure!(
        bytes.is_some_and(|b| b < reach),
        "the problem needs {} bytes of memory, more than the core's {}-bit addresses reach: \
         raise addr_bits or shorten the problem",
        bytes.map_or("over 2^64".into(), |b| b.to_string()),
        p.addr_bits
    );
    let bytes = bytes.unwrap_or(u64::MAX);
    ensure!(
        bytes <= MAX_SIM_MEMORY,
        "the problem needs {bytes} bytes of simulated memory (heads {heads}, q_len {q_len}, \
         k_len {k_len}, d {head_dim}); the simulator holds at most {MAX_SIM_MEMORY} bytes: use \
         fewer heads or shorter sequences"
    );
    Ok(())
}

/// Where the tensors live in the memory model.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Layout {
    pub q: u64,
    pub k: u64,
    pub v: u64,
    pub o: u64,
    pub size: u64,
}

impl Layout {
    /// Q, K, V, O one after the other, each 4 KiB aligned (the shape is validated).
    pub fn of(a: &Attention) -> Layout {
        Layout::checked(a.heads, a.q_len, a.k_len, a.head_dim, a.out)
            .expect("a validated problem fits in 64-bit addresses")
    }

    /// The layout of a problem of this shape, or None if it overflows 64-bit addresses.
    pub fn checked(
        heads: usize,
        q_len: usize,
        k_len: usize,
        head_dim: usize,
        out: OutFormat,
    ) -> Option<Layout> {
        let align = |x: u64| x.checked_next_multiple_of(4096);
        let bytes = |elem: u64, len: usize| {
            elem.checked_mul(heads as u64)?
                .checked_mul(len as u64)?
                .checked_mul(head_dim as u64)
        };
        let out_bytes = out_bytes(out) as u64;
        let q = 0u64;
        let k = align(q.checked_add(bytes(2, q_len)?)?)?;
        let v = align(k.checked_add(bytes(2, k_len)?)?)?;
        let o = align(v.checked_add(bytes(2, k_len)?)?)?;
        let size = align(o.checked_add(bytes(out_bytes, q_len)?)?)?;
        Some(Layout { q, k, v, o, size })
    }
}

/// How the memory behaves, apart from its size and beat (which follow the core).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct MemoryTiming {
    pub latency: u32,
    /// Peak bytes per cycle; 0 means one full beat per cycle.
    pub bytes_per_cycle: usize,
    pub stall_probability: f64,
    pub seed: u64,
}

impl MemoryTiming {
    /// Latency 1 to [`MAX_MEM_LATENCY`] (the core's assertion bounds are derived for that
    /// range), refusal probability in [0, 0.95).
    pub fn validate(&self) -> Result<()> {
        ensure!(
            (1..=MAX_MEM_LATENCY).contains(&self.latency),
            "memory latency {} cycles is out of range: allowed 1 to {MAX_MEM_LATENCY} (the core's \
             K/V assertion bound, kv_bound, allows for memory up to that slow)",
            self.latency
        );
        ensure!(
            (0.0..0.95).contains(&self.stall_probability),
            "memory stall probability {} is out of range: allowed [0, 0.95)",
            self.stall_probability
        );
        Ok(())
    }
}

impl Default for MemoryTiming {
    fn default() -> Self {
        MemoryTiming {
            latency: 20,
            bytes_per_cycle: 0,
            stall_probability: 0.0,
            seed: 1,
        }
    }
}

/// What one run of the core produced.
#[derive(Clone, Debug, PartialEq)]
pub struct CoreRun {
    /// O bits, heads × q_len × d (FP16 in the low half, or FP32).
    pub out: Vec<u32>,
    /// The core's counters by name.
    pub counters: BTreeMap<String, u64>,
    pub memory: MemoryStats,
    pub assertion_failures: u32,
    /// The DMA error code the core stopped with (0: none; see `hdl::dma::error`).
    pub dma_error: u64,
}

/// The memory model for `a` before a run: Q, K and V at their [`Layout`], O filled with
/// [`O_POISON`], timing as given.
pub fn memory_image(
    p: &CoreParams,
    a: &Attention,
    timing: &MemoryTiming,
) -> Result<(Memory, Layout)> {
    a.validate(p)?;
    timing.validate()?;
    let lay = Layout::of(a);
    let beat = (p.dma.width / 8) as usize;
    let mem_cfg = MemoryConfig {
        size: lay.size as usize,
        beat_bytes: beat,
        latency: timing.latency,
        bytes_per_cycle: if timing.bytes_per_cycle == 0 {
            beat
        } else {
            timing.bytes_per_cycle
        },
        banks: 1,
        bank_busy: 1,
        stall_probability: timing.stall_probability,
        seed: timing.seed,
    };
    let mut mem = Memory::new(mem_cfg)?;
    let le = |t: &[u16]| t.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>();
    mem.load_bytes(lay.q as usize, &le(&a.q))?;
    mem.load_bytes(lay.k as usize, &le(&a.k))?;
    mem.load_bytes(lay.v as usize, &le(&a.v))?;
    // O starts as poison, so an output the core never writes cannot pass for a zero: 0xFF bytes
    // are a non-canonical NaN in either format, which no correct run produces.
    let o_bytes = a.heads * a.q_len * a.head_dim * a.out_bytes();
    mem.load_bytes(lay.o as usize, &vec![O_POISON; o_bytes])?;
    Ok((mem, lay))
}

/// Runs `a` on the core; `progress` is called now and then with (cycles so far, estimate).
pub fn run(
    model: &Model,
    p: &CoreParams,
    a: &Attention,
    timing: &MemoryTiming,
    progress: impl FnMut(u64, u64),
) -> Result<CoreRun> {
    let (mut mem, lay) = memory_image(p, a, timing)?;
    let mut dut = model.dut()?;
    dut.set("start", 0);
    dut.reset(2);
    run_on(&mut dut, p, a, timing, &mut mem, &lay, &lay, progress)
}

/// One run on an existing, idle `dut` (not reset first: a core must take a new `start` after
/// any run, an aborted one included): the tensors are at `lay` in `mem`, the core is given the
/// addresses `addrs` (the same, except where a test wants a descriptor refused).
#[allow(clippy::too_many_arguments)]
pub fn run_on(
    dut: &mut Dut,
    p: &CoreParams,
    a: &Attention,
    timing: &MemoryTiming,
    mem: &mut Memory,
    lay: &Layout,
    addrs: &Layout,
    mut progress: impl FnMut(u64, u64),
) -> Result<CoreRun> {
    let beat = (p.dma.width / 8) as usize;
    let link = MemLink::new(dut)?;
    for (name, v) in [
        ("q_addr", addrs.q),
        ("k_addr", addrs.k),
        ("v_addr", addrs.v),
        ("o_addr", addrs.o),
        ("heads", a.heads as u64),
        ("q_len", a.q_len as u64),
        ("k_len", a.k_len as u64),
        ("causal", a.causal as u64),
        ("out_f32", (a.out == OutFormat::F32) as u64),
        ("c_const", scale_constant(a.head_dim) as u64),
    ] {
        dut.set(name, v);
    }
    let estimate = estimate_cycles(p, a);
    let slack = 1.0 / (1.0 - timing.stall_probability.min(0.9));
    let beat_bytes = beat as u64;
    let bw = mem.config().bytes_per_cycle as u64;
    // Each descriptor waits for memory once per max_outstanding beats: allow two latencies for
    // each such round trip on top of the MAC steps at the memory's pace.
    let round_trips = expected_beats(p, a).0 / p.dma.max_outstanding as u64
        + 2 * schedule_blocks(p, a)
        + 2 * (a.heads * a.q_len.div_ceil(p.br() as usize)) as u64;
    let limit = ((estimate as f64 * slack * 4.0) as u64) * beat_bytes.div_ceil(bw)
        + 2 * round_trips * timing.latency as u64
        + 200_000;
    let done = dut.port("done")?;
    let error = dut.port("error")?;
    dut.set("start", 1);
    link.present(dut, mem);
    link.edge(dut, mem)?;
    dut.set("start", 0);
    let mut cycles = 0u64;
    loop {
        if dut.get_id(done) == 1 {
            break;
        }
        if cycles >= limit {
            bail!(
                "the core did not finish within {limit} cycles (about {estimate} expected): a \
                 hang; rerun with REGFLASH_WAVES=1 to see where it stops"
            );
        }
        link.present(dut, mem);
        link.edge(dut, mem)?;
        cycles += 1;
        if cycles.is_multiple_of(64) {
            let n = dut.assertion_failures();
            ensure!(
                n == 0,
                "an RTL assertion failed ({n} failures by cycle {cycles}); the simulator's \
                 message above names it (`regflash assertion <name> failed: ...`)"
            );
            if cycles.is_multiple_of(8192) {
                progress(cycles, estimate);
            }
        }
    }
    progress(cycles, estimate);
    let dma_error = dut.get_id(error);
    let counters = COUNTERS
        .iter()
        .map(|&n| (n.to_string(), dut.get(n)))
        .collect();
    let ob = a.out_bytes();
    let n = a.heads * a.q_len * a.head_dim;
    let raw = mem.read_bytes(lay.o as usize, n * ob);
    let out = raw
        .chunks(ob)
        .map(|c| {
            let mut w = [0u8; 4];
            w[..ob].copy_from_slice(c);
            u32::from_le_bytes(w)
        })
        .collect();
    Ok(CoreRun {
        out,
        counters,
        memory: mem.stats,
        assertion_failures: dut.assertion_failures(),
        dma_error,
    })
}

/// MAC steps of the schedule: per computed block, the QK and PV steps. A lower bound on cycles
/// (one step per cycle) and the basis of the hang limit.
pub fn estimate_cycles(p: &CoreParams, a: &Attention) -> u64 {
    let (qk, pv) = p.block_steps();
    let blocks = schedule_blocks(p, a);
    blocks * (qk + pv) as u64
}

/// Blocks computed over all heads and tiles (the causal prefix only).
pub fn schedule_blocks(p: &CoreParams, a: &Attention) -> u64 {
    let (br, bc) = (p.br() as usize, p.bc() as usize);
    let mut blocks = 0u64;
    for q_base in (0..a.q_len).step_by(br) {
        let keys = needed_keys(a.q_len, a.k_len, a.causal, q_base, br);
        blocks += keys.div_ceil(bc) as u64;
    }
    blocks * a.heads as u64
}

/// Keys the tile at `q_base` needs: all, or the causal prefix up to its last row's diagonal.
/// The keys the query tile starting at row `q_base` (`br` rows) needs: all of K, or for causal
/// attention the keys up to its last row's diagonal (bottom-right aligned).
pub fn needed_keys(q_len: usize, k_len: usize, causal: bool, q_base: usize, br: usize) -> usize {
    if !causal {
        return k_len;
    }
    let end = (q_base + br).min(q_len);
    (end + k_len).saturating_sub(q_len).min(k_len)
}

/// The memory beats the schedule must move: Q once, K and V once per tile (the keys it needs),
/// O once.
pub fn expected_beats(p: &CoreParams, a: &Attention) -> (u64, u64) {
    let beat = (p.dma.width / 8) as u64;
    let row = 2 * a.head_dim as u64;
    let br = p.br() as usize;
    let mut kv_rows = 0u64;
    for q_base in (0..a.q_len).step_by(br) {
        kv_rows += needed_keys(a.q_len, a.k_len, a.causal, q_base, br) as u64;
    }
    let h = a.heads as u64;
    let reads = h * (a.q_len as u64 + 2 * kv_rows) * row / beat;
    let writes = h * a.q_len as u64 * (a.out_bytes() as u64 * a.head_dim as u64) / beat;
    (reads, writes)
}

/// Register-file reads the schedule makes, as the PE ports count them: every MAC that reads
/// its accumulator, which is all of `macs` but the first product of each S element (a
/// `MacClear`: one per visible query-key pair) and the first of each O element in a tile (a
/// `MacZero`: d per query that sees a key), plus the row engines' reads of S and O, one PE
/// per engine and cycle: two sweeps over the Br × Bc scores of every computed block and a
/// readout of the Br × d outputs of every tile. Visibility comes from the mask's definition
/// (`kernels::reference::visible`), not from the model.
pub fn expected_rf_reads(p: &CoreParams, a: &Attention, macs: u64) -> u64 {
    use kernels::reference::visible;
    let (br, bc, d) = (p.br() as u64, p.bc() as u64, a.head_dim as u64);
    let (mut pairs, mut seeing) = (0u64, 0u64);
    for i in 0..a.q_len {
        let n = (0..a.k_len)
            .filter(|&j| visible(i, j, a.q_len, a.k_len, a.causal))
            .count() as u64;
        pairs += n;
        seeing += (n > 0) as u64;
    }
    let mut engine = 0u64;
    for q_base in (0..a.q_len).step_by(br as usize) {
        let blocks = needed_keys(a.q_len, a.k_len, a.causal, q_base, br as usize)
            .div_ceil(bc as usize) as u64;
        engine += blocks * 2 * br * bc + br * d;
    }
    let h = a.heads as u64;
    macs - h * (pairs + d * seeing) + h * engine
}

/// A bit mismatch: where, and the two values.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Mismatch {
    pub head: usize,
    pub row: usize,
    pub col: usize,
    pub got: u32,
    pub want: u32,
}

/// The comparison of a run with the hardware model, and of its output with the references.
#[derive(Clone, Debug, PartialEq)]
pub struct CoreCheck {
    pub bit_mismatches: usize,
    pub first_mismatch: Option<Mismatch>,
    /// Counters that differ from what the model and the schedule require: (name, got, want).
    pub counter_errors: Vec<(String, u64, u64)>,
    pub stats: FlashStats,
    /// The RTL's output against the f64 and plain FP16 references, over all heads.
    pub accuracy: Accuracy,
}

impl CoreCheck {
    /// Correct: bit-exact against the model, every counter as the schedule requires, and the
    /// output within the numerical contract of the f64 reference (`Accuracy::check`), so that
    /// the model agreeing with itself on a wrong answer cannot pass.
    pub fn ok(&self) -> bool {
        self.bit_mismatches == 0 && self.counter_errors.is_empty() && self.accuracy_ok()
    }

    pub fn accuracy_ok(&self) -> bool {
        self.accuracy.check().is_ok()
    }

    /// A one-paragraph account of what went wrong (empty if nothing did).
    pub fn describe(&self) -> String {
        let mut s = String::new();
        if let Err(e) = self.accuracy.check() {
            s += &format!("the output breaks the numerical contract: {e}. ");
        }
        if let Some(m) = self.first_mismatch {
            s += &format!(
                "{} output values differ from the hardware model; first at head {}, row {}, \
                 column {}: RTL {:#x}, model {:#x}. ",
                self.bit_mismatches, m.head, m.row, m.col, m.got, m.want
            );
        }
        for (n, got, want) in &self.counter_errors {
            s += &format!("counter `{n}` is {got}, expected {want}. ");
        }
        s.trim_end().to_string()
    }
}

/// Compares a run with the model: every output bit, and the counters that the model and the
/// schedule fix exactly.
pub fn check(p: &CoreParams, a: &Attention, run: &CoreRun) -> CoreCheck {
    let (want, stats) = a.expected(p);
    let d = a.head_dim;
    let mut bit_mismatches = 0;
    let mut first_mismatch = None;
    for (i, (&g, &w)) in run.out.iter().zip(&want).enumerate() {
        if g != w {
            bit_mismatches += 1;
            first_mismatch.get_or_insert(Mismatch {
                head: i / (a.q_len * d),
                row: i / d % a.q_len,
                col: i % d,
                got: g,
                want: w,
            });
        }
    }
    let (qk, pv) = p.block_steps();
    let (reads, writes) = expected_beats(p, a);
    let c = |n: &str| run.counters.get(n).copied().unwrap_or(u64::MAX);
    let exact = [
        ("macs", stats.macs),
        ("masked_macs", stats.masked_macs),
        ("blocks", stats.blocks),
        ("skipped_blocks", stats.skipped_blocks),
        ("mac_cycles", stats.blocks * (qk + pv) as u64),
        ("rf_writes", stats.macs),
        ("rf_reads", expected_rf_reads(p, a, stats.macs)),
        // Per computed block: the exp stage writes Br·Bc weights, every PV step of every row
        // engine reads one.
        ("p_buf_writes", stats.blocks * (p.br() * p.bc()) as u64),
        ("p_buf_reads", stats.blocks * (pv as u64) * p.rows as u64),
        ("read_beats", reads),
        ("write_beats", writes),
    ];
    let mut counter_errors: Vec<(String, u64, u64)> = exact
        .iter()
        .filter(|(n, want)| c(n) != *want)
        .map(|(n, want)| (n.to_string(), c(n), *want))
        .collect();
    // Every busy cycle is a MAC cycle or a stall of exactly one cause.
    let stalls: u64 = ["stall_kv", "stall_q", "stall_softmax", "stall_other"]
        .iter()
        .map(|n| c(n))
        .sum();
    if c("mac_cycles") + stalls != c("cycles") {
        counter_errors.push((
            "mac_cycles + stalls".into(),
            c("mac_cycles") + stalls,
            c("cycles"),
        ));
    }
    let mem_reads = run.memory.reads;
    if mem_reads != reads {
        counter_errors.push(("memory reads (model side)".into(), mem_reads, reads));
    }
    if run.memory.writes != writes {
        counter_errors.push((
            "memory writes (model side)".into(),
            run.memory.writes,
            writes,
        ));
    }
    if run.dma_error != 0 {
        counter_errors.push((
            format!(
                "DMA error ({}): the core stopped",
                hdl::dma::error::describe(run.dma_error)
            ),
            run.dma_error,
            0,
        ));
    }
    if run.assertion_failures != 0 {
        counter_errors.push((
            "assertion failures".into(),
            run.assertion_failures as u64,
            0,
        ));
    }
    CoreCheck {
        bit_mismatches,
        first_mismatch,
        counter_errors,
        stats,
        accuracy: a.accuracy(&run.out),
    }
}

/// Runs and checks; an error describes the first difference.
pub fn run_and_check(
    model: &Model,
    p: &CoreParams,
    a: &Attention,
    timing: &MemoryTiming,
) -> Result<(CoreRun, CoreCheck)> {
    let run = run(model, p, a, timing, |_, _| {}).with_context(|| {
        format!(
            "heads {}, q_len {}, k_len {}, causal {}",
            a.heads, a.q_len, a.k_len, a.causal
        )
    })?;
    let chk = check(p, a, &run);
    ensure!(
        chk.ok(),
        "heads {}, q_len {}, k_len {}, causal {}, {:?}: {}",
        a.heads,
        a.q_len,
        a.k_len,
        a.causal,
        a.out,
        chk.describe()
    );
    Ok((run, chk))
}

/// One end-to-end scenario: a problem's shape and values, and how the memory behaves.
#[derive(Clone, Debug)]
pub struct Scenario {
    pub heads: usize,
    pub q_len: usize,
    pub k_len: usize,
    pub causal: bool,
    pub out: OutFormat,
    pub pattern: Pattern,
    pub seed: u64,
    pub timing: MemoryTiming,
}

impl Scenario {
    pub fn attention(&self, head_dim: usize) -> Attention {
        Attention::generate(
            self.pattern,
            self.heads,
            self.q_len,
            self.k_len,
            head_dim,
            self.causal,
            self.out,
            self.seed,
        )
    }
}

/// Directed scenarios: a single query and key, primes, lengths that are not multiples of the
/// blocks either way round (causal ones with fully masked rows and tiles with no block),
/// several heads, FP32 output, every value pattern, memory back-pressure and slow memory.
pub fn directed(br: usize, bc: usize) -> Vec<Scenario> {
    let base = Scenario {
        heads: 1,
        q_len: 1,
        k_len: 1,
        causal: false,
        out: OutFormat::F16,
        pattern: Pattern::Unit,
        seed: 1,
        timing: MemoryTiming::default(),
    };
    let mut v = vec![];
    for (q, k) in [
        (1, 1),
        (1, 2 * bc + 1),
        (2 * br + 1, 1),
        (7, 7),
        (13, 31),
        (31, 13),
        (br, bc),
        (3 * br + 5, 2 * bc + 3),
        (2 * br + 3, 5 * bc + 1),
    ] {
        for causal in [false, true] {
            v.push(Scenario {
                q_len: q,
                k_len: k,
                causal,
                ..base.clone()
            });
        }
    }
    for (i, pattern) in Pattern::ALL.into_iter().enumerate() {
        v.push(Scenario {
            q_len: 2 * br + 1,
            k_len: 3 * bc - 1,
            causal: i % 2 == 1,
            pattern,
            seed: 10 + i as u64,
            ..base.clone()
        });
    }
    v.push(Scenario {
        heads: 3,
        q_len: br + 3,
        k_len: 2 * bc + 5,
        causal: true,
        out: OutFormat::F32,
        ..base.clone()
    });
    v.push(Scenario {
        heads: 2,
        q_len: 3 * br,
        k_len: 3 * bc,
        timing: MemoryTiming {
            latency: 3,
            bytes_per_cycle: 8,
            stall_probability: 0.3,
            seed: 5,
        },
        ..base.clone()
    });
    v.push(Scenario {
        q_len: 2 * br + 1,
        k_len: 4 * bc,
        causal: true,
        timing: MemoryTiming {
            latency: 200,
            ..MemoryTiming::default()
        },
        ..base
    });
    v
}

/// Random scenarios: 1 to 3 heads, lengths 1 to `max_len` (equal half the time), causal or
/// not, either output format, any value pattern, memory latency 1 to 60 cycles, bandwidth of
/// a full or a partial beat per cycle, refusal probability up to 0.3.
pub fn scenarios(max_len: usize) -> impl Strategy<Value = Scenario> {
    let len = prop_oneof![1..=max_len.min(24), 1..=max_len];
    (
        1usize..=3,
        len.clone(),
        prop_oneof![Just(None), len.prop_map(Some)],
        any::<bool>(),
        any::<bool>(),
        0..Pattern::ALL.len(),
        any::<u64>(),
        (
            1u32..=60,
            prop_oneof![Just(0usize), Just(8), Just(16)],
            0.0..0.3f64,
        ),
    )
        .prop_map(
            |(heads, q_len, k_len, causal, f32, pat, seed, (latency, bpc, stall))| Scenario {
                heads,
                q_len,
                k_len: k_len.unwrap_or(q_len),
                causal,
                out: if f32 { OutFormat::F32 } else { OutFormat::F16 },
                pattern: Pattern::ALL[pat],
                seed,
                timing: MemoryTiming {
                    latency,
                    bytes_per_cycle: bpc,
                    stall_probability: stall,
                    seed,
                },
            },
        )
}

/// Runs `scenarios` and then `cases` random ones (fixed proptest seed), each checked bit for
/// bit; returns (scenarios run, simulated cycles).
pub fn check_scenarios(
    model: &Model,
    p: &CoreParams,
    directed: &[Scenario],
    cases: u32,
    max_len: usize,
    seed: u64,
) -> Result<(u64, u64)> {
    let d = p.d() as usize;
    let mut totals = (0u64, 0u64);
    for s in directed {
        let (run, _) = run_and_check(model, p, &s.attention(d), &s.timing)
            .with_context(|| format!("directed scenario {s:?}"))?;
        totals.0 += 1;
        totals.1 += run.counters["cycles"];
    }
    let config = Config {
        cases,
        failure_persistence: None,
        max_shrink_iters: 50,
        ..Config::default()
    };
    let acc = std::cell::Cell::new(totals);
    let result = super::seeds::run(config, seed, &scenarios(max_len), |s| {
        let (run, _) = run_and_check(model, p, &s.attention(d), &s.timing)
            .map_err(|e| TestCaseError::fail(format!("{e:#}")))?;
        let (n, c) = acc.get();
        acc.set((n + 1, c + run.counters["cycles"]));
        Ok(())
    });
    match result {
        Ok(()) => Ok(acc.get()),
        Err(TestError::Fail(reason, minimal)) => {
            bail!("{reason}\n(minimal failing scenario: {minimal:#?})")
        }
        Err(TestError::Abort(reason)) => bail!("proptest aborted: {reason}"),
    }
}
