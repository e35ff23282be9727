//! Running a problem on the core: the memory image (Q, K, V at their layout, O poisoned), the
//! descriptors, the run to `done` with a hang limit, the counters and O read back.

use super::*;
use hdl::core::ports::Counters;

/// Where the tensors live in the memory model: bases, and each tensor's row and head strides
/// (bytes).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Layout {
    pub q: u64,
    pub k: u64,
    pub v: u64,
    pub o: u64,
    /// unfused: the scratch region, where S and P go between a tile's passes (0 elsewhere).
    pub s: u64,
    pub size: u64,
    /// (row stride, head stride) of Q, K, V and O.
    pub q_strides: (u64, u64),
    pub k_strides: (u64, u64),
    pub v_strides: (u64, u64),
    pub o_strides: (u64, u64),
}

impl Layout {
    /// Q, K, V, O one after the other, each 4 KiB aligned, in the problem's tensor layout (the
    /// shape is validated).
    pub fn of(a: &Attention) -> Layout {
        Layout::checked(
            (a.heads, a.kv_heads),
            a.q_len,
            a.k_len,
            a.head_dim,
            (a.in_bytes(), a.out_bytes()),
            a.layout,
        )
        .expect("a validated problem fits in 64-bit addresses")
    }

    /// The largest layout of a problem of this shape (every Q head with its own K/V head, and
    /// operands of the widest format, 16 bits), or None if it overflows 64-bit addresses.
    pub fn upper_bound(
        heads: usize,
        q_len: usize,
        k_len: usize,
        head_dim: usize,
        out: OutFormat,
    ) -> Option<Layout> {
        Layout::checked(
            (heads, heads),
            q_len,
            k_len,
            head_dim,
            (2, out_bytes(out, kernels::format::Format::FP16)),
            TensorLayout::Bhsd,
        )
    }

    /// The layout of a problem of this shape ((Q heads, K/V heads)), with (Q/K/V, O) values of
    /// `bytes` each, or None if it overflows 64-bit addresses.
    pub fn checked(
        (heads, kv_heads): (usize, usize),
        q_len: usize,
        k_len: usize,
        head_dim: usize,
        (in_bytes, out_bytes): (usize, usize),
        layout: TensorLayout,
    ) -> Option<Layout> {
        let align = |x: u64| x.checked_next_multiple_of(4096);
        let row = |elem: u64| elem.checked_mul(head_dim as u64);
        let tensor = |elem: u64, heads: usize, len: usize| -> Option<((u64, u64), u64)> {
            let r = row(elem)?;
            let strides = layout.strides(heads as u64, len as u64, r)?;
            Some((
                strides,
                r.checked_mul(heads as u64)?.checked_mul(len as u64)?,
            ))
        };
        let (qs, q_bytes) = tensor(in_bytes as u64, heads, q_len)?;
        let (ks, kv_bytes) = tensor(in_bytes as u64, kv_heads, k_len)?;
        let (os, o_bytes) = tensor(out_bytes as u64, heads, q_len)?;
        let q = 0u64;
        let k = align(q.checked_add(q_bytes)?)?;
        let v = align(k.checked_add(kv_bytes)?)?;
        let o = align(v.checked_add(kv_bytes)?)?;
        let size = align(o.checked_add(o_bytes)?)?;
        Some(Layout {
            q,
            k,
            v,
            o,
            s: 0,
            size,
            q_strides: qs,
            k_strides: ks,
            v_strides: ks,
            o_strides: os,
        })
    }

    /// Byte address of row `s` of head `h` of a tensor at `base` with `strides`.
    fn at(base: u64, (row, head): (u64, u64), h: usize, s: usize) -> usize {
        (base + s as u64 * row + h as u64 * head) as usize
    }
}

/// Writes `t` (heads × len rows of `row_elems` values of `elem_bytes` bytes each, in the low
/// bytes of each element, logically row-major) into `mem` at `base` with `strides`.
#[allow(clippy::too_many_arguments)]
pub(crate) fn store(
    mem: &mut Memory,
    t: &[u16],
    elem_bytes: usize,
    base: u64,
    strides: (u64, u64),
    len: usize,
    row_elems: usize,
) -> Result<()> {
    for (n, r) in t.chunks(row_elems).enumerate() {
        let bytes: Vec<u8> = r
            .iter()
            .flat_map(|x| x.to_le_bytes().into_iter().take(elem_bytes))
            .collect();
        mem.load_bytes(Layout::at(base, strides, n / len, n % len), &bytes)?;
    }
    Ok(())
}

/// How the memory behaves, apart from its size and beat (which follow the core).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct MemoryTiming {
    pub latency: u32,
    /// Peak bytes per cycle; 0 means one full beat per cycle (simple port only).
    pub bytes_per_cycle: usize,
    /// The probability each cycle that the memory refuses a request (simple port), or withholds
    /// each ready and each response it could give (AXI4).
    pub stall_probability: f64,
    pub seed: u64,
    /// AXI4: read bursts of different IDs answered in random order, interleaved beat by beat.
    pub reorder: bool,
    /// AXI4: an error response for every burst touching a byte range.
    pub fault: Option<AxiFault>,
    /// Fault injection: the deliberate defect the testbench selects in a core built for it
    /// (`CoreParams::for_fault_injection`; `fault_sel`). Never set for a real design.
    pub core_fault: Option<hdl::fault::Fault>,
    /// Fault injection in a core with spare lanes: TSV faults on chosen lanes of the vertical
    /// links (`tsv_fault`). Never set for a real design.
    pub tsv_faults: [Option<hdl::link::TsvFault>; hdl::link::FAULT_SLOTS as usize],
}

impl MemoryTiming {
    /// The memory's deterministic knobs, as the cycle model takes them (random stalls
    /// aside).
    pub fn model_timing(&self) -> crate::cycles::MemTiming {
        crate::cycles::MemTiming {
            latency: self.latency,
            bytes_per_cycle: self.bytes_per_cycle,
        }
    }

    /// The timing the cycle model follows, when the memory's is deterministic (no random
    /// stalls).
    pub fn deterministic(&self) -> Option<crate::cycles::MemTiming> {
        (self.stall_probability == 0.0).then(|| self.model_timing())
    }

    /// This timing for core `p`'s memory interface: the AXI4 slave has no bandwidth knob (it
    /// moves a beat a cycle per channel; its randomness is in its stalls and reordering), so
    /// a scenario's bandwidth limit is dropped there.
    pub fn on(&self, p: &CoreParams) -> MemoryTiming {
        match p.dma.mem_if {
            MemIf::Simple => *self,
            MemIf::Axi4 => MemoryTiming {
                bytes_per_cycle: 0,
                ..*self
            },
        }
    }

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
            reorder: true,
            fault: None,
            core_fault: None,
            tsv_faults: [None; hdl::link::FAULT_SLOTS as usize],
        }
    }
}

/// The testbench's side of a design's memory port: the simple port's memory, or the AXI4
/// slave (random timing, protocol checks), by the design's `mem_if`.
pub enum MemPort {
    Simple(MemLink),
    Axi(Box<AxiLink>),
}

impl MemPort {
    pub fn new(dut: &Dut, dma: &DmaConfig, timing: &MemoryTiming) -> Result<Self> {
        Ok(match dma.mem_if {
            MemIf::Simple => {
                ensure!(
                    timing.fault.is_none(),
                    "response faults need the AXI4 memory interface (--mem-if axi4)"
                );
                MemPort::Simple(MemLink::new(dut)?)
            }
            MemIf::Axi4 => {
                ensure!(
                    timing.bytes_per_cycle == 0,
                    "a bandwidth limit applies to the simple memory port only; the AXI4 slave \
                     moves a beat a cycle on each channel"
                );
                let t = AxiTiming {
                    latency: timing.latency,
                    stall_probability: timing.stall_probability,
                    reorder: timing.reorder,
                    seed: timing.seed,
                    fault: timing.fault,
                };
                MemPort::Axi(Box::new(AxiLink::new(dut, t, dma.beat_bytes() as usize)?))
            }
        })
    }

    /// Before the clock edge: this cycle's responses (and AXI4 readies).
    pub fn present(&mut self, dut: &mut Dut, mem: &mut Memory) {
        match self {
            MemPort::Simple(l) => l.present(dut, mem),
            MemPort::Axi(l) => l.present(dut, mem),
        }
    }

    /// The handshakes, the clock edge, the memory's side of it.
    pub fn edge(&mut self, dut: &mut Dut, mem: &mut Memory) -> Result<()> {
        match self {
            MemPort::Simple(l) => l.edge(dut, mem),
            MemPort::Axi(l) => l.edge(dut, mem),
        }
    }

    /// Whether nothing is in flight on the AXI4 slave (every burst answered); the simple
    /// port's requests are the memory's to count (`Memory::outstanding`).
    pub fn idle(&self) -> bool {
        match self {
            MemPort::Axi(l) => l.idle(),
            MemPort::Simple(_) => true,
        }
    }

    /// Fails if a burst is still unanswered (AXI4: the core must not finish, even with an
    /// error, before every write response is back and every read burst has landed).
    pub fn check_idle(&self) -> Result<()> {
        ensure!(
            self.idle(),
            "the core reported done with AXI4 bursts still in flight"
        );
        Ok(())
    }

    /// Sets the AXI4 slave's error responses (from the next burst on); fails on the simple
    /// port, which has none.
    pub fn set_fault(&mut self, fault: Option<AxiFault>) -> Result<()> {
        match self {
            MemPort::Axi(l) => {
                l.set_fault(fault);
                Ok(())
            }
            MemPort::Simple(_) => bail!("response faults need the AXI4 memory interface"),
        }
    }

    /// Starts the AXI4 slave's statistics afresh.
    pub fn reset_stats(&mut self) {
        if let MemPort::Axi(l) = self {
            l.reset_stats();
        }
    }

    /// The AXI4 slave's statistics.
    pub fn axi_stats(&self) -> Option<AxiStats> {
        match self {
            MemPort::Axi(l) => Some(l.stats),
            MemPort::Simple(_) => None,
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
    /// With a GLB, per bank group: the words each of its banks read and wrote.
    pub glb_banks: Vec<(u64, u64)>,
    pub memory: MemoryStats,
    pub assertion_failures: u32,
    /// The DMA error code the core stopped with (0: none; see `hdl::mem::dma::error`).
    pub dma_error: u64,
    /// The memory's timing in this run.
    pub timing: MemoryTiming,
    /// The AXI4 slave's statistics (AXI4 memory interface only).
    pub axi: Option<AxiStats>,
    /// With spare lanes on the vertical links: what the last link test found.
    pub link: Option<LinkTest>,
}

/// A link test as the core reports it (`link_*` ports, `LINK_STATUS`, `LINK_FAILED`, the
/// failed lanes by `LINK_PROBE`).
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct LinkTest {
    /// Cycles the test took.
    pub cycles: u64,
    /// Physical lanes it found failed.
    pub failed_lanes: u64,
    /// A group had more failed lanes than spares (START refused with ERR_CODE LINK).
    pub beyond_repair: bool,
    /// Which: (row, bundle, physical lane of the bundle), found by probing each lane (the
    /// GLB's bond is row `hdl::link::GLB_ROW`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub lanes: Vec<(u32, String, u32)>,
}

impl LinkTest {
    /// The failed lanes, each as `row r bundle lane`.
    pub fn lanes_text(&self) -> String {
        self.lanes
            .iter()
            .map(|(r, b, l)| format!("{} {b} {l}", hdl::link::row_name(*r)))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// Walks the probe over every lane of core `p`'s bundles, row by row, until `failed` lanes
/// have answered failed (`probed`: whether the lane with that probe value failed).
pub fn probe_lanes(
    p: &CoreParams,
    failed: u64,
    mut probed: impl FnMut(u64) -> Result<bool>,
) -> Result<Vec<(u32, String, u32)>> {
    let mut out = vec![];
    for b in p.bundles() {
        for lane in 0..b.lanes() {
            if out.len() as u64 >= failed {
                return Ok(out);
            }
            if probed(hdl::link::probe_value(b.row, b.bundle, lane))? {
                out.push((b.row, b.bundle.name().to_string(), lane));
            }
        }
    }
    ensure!(
        out.len() as u64 == failed,
        "the link test counted {failed} failed lanes, the probe found {}",
        out.len()
    );
    Ok(out)
}

/// The core's last link test (None without spare lanes).
pub fn link_test(dut: &mut Dut, p: &CoreParams) -> Result<Option<LinkTest>> {
    if !p.links() {
        return Ok(None);
    }
    let failed = dut.get("link_failed");
    let lanes = probe_lanes(p, failed, |v| {
        dut.set("link_probe", v);
        Ok(dut.get("link_probed") == 1)
    })?;
    dut.set("link_probe", 0);
    Ok(Some(LinkTest {
        cycles: dut.get("link_cycles"),
        failed_lanes: failed,
        beyond_repair: dut.get("link_bad") == 1,
        lanes,
    }))
}

/// The memory model for `a` before a run: Q, K and V at their [`Layout`], O filled with
/// [`O_POISON`], timing as given.
pub fn memory_image(
    p: &CoreParams,
    a: &Attention,
    timing: &MemoryTiming,
) -> Result<(Memory, Layout)> {
    a.validate(p)?;
    let mut lay = Layout::of(a);
    if p.row.scratch() {
        // unfused: a tile's S (and P over it), after O; rowfused's spill: the S past its
        // arrays.
        lay.s = lay.size;
        lay.size += scratch_bytes(p, a.k_len).next_multiple_of(4096);
    }
    let mut mem = new_memory(p, lay.size, timing)?;
    let d = a.head_dim;
    let (q, k) = a.stored_qk()?;
    let eb = a.in_bytes();
    store(&mut mem, &q, eb, lay.q, lay.q_strides, a.q_len, d)?;
    store(&mut mem, &k, eb, lay.k, lay.k_strides, a.k_len, d)?;
    store(&mut mem, &a.v, eb, lay.v, lay.v_strides, a.k_len, d)?;
    poison_o(
        &mut mem,
        &lay,
        a.heads * a.q_len * a.head_dim * a.out_bytes(),
    )?;
    Ok((mem, lay))
}

/// Bytes of the scratch region a problem with `k_len` keys needs: a tile's S, every block
/// (rowfused with `spill`: every block past its S arrays) of Br rows of bc FP32 scores (rows
/// rounded up to a beat).
pub fn scratch_bytes(p: &CoreParams, k_len: usize) -> u64 {
    hdl::soc::regmap::scratch_region_bytes(p, k_len.div_ceil(p.bc() as usize) as u64)
}

/// O starts as poison, so an output the core never writes cannot pass for a zero: 0xFF bytes
/// are a non-canonical NaN in either format, which no correct run produces.
pub(crate) fn poison_o(mem: &mut Memory, lay: &Layout, o_bytes: usize) -> Result<()> {
    mem.load_bytes(lay.o as usize, &vec![O_POISON; o_bytes])
}

/// A memory of `size` bytes for core `p` with `timing` (validated).
pub(crate) fn new_memory(p: &CoreParams, size: u64, timing: &MemoryTiming) -> Result<Memory> {
    timing.validate()?;
    let beat = (p.dma.width / 8) as usize;
    let mem_cfg = MemoryConfig {
        size: size as usize,
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
    Memory::new(mem_cfg)
}

/// Runs `a` on the core; `progress` is called now and then with (cycles so far, estimate).
pub fn run(
    model: &Model,
    p: &CoreParams,
    a: &Attention,
    timing: &MemoryTiming,
    progress: impl FnMut(u64, u64),
) -> Result<CoreRun> {
    run_traced(model, p, a, timing, None, progress)
}

/// [`run`], writing a waveform of the run to a path with its options (the model must be built
/// with tracing in the path's format).
pub fn run_traced(
    model: &Model,
    p: &CoreParams,
    a: &Attention,
    timing: &MemoryTiming,
    waves: Option<(&std::path::Path, &verilator_tb::WaveOptions)>,
    progress: impl FnMut(u64, u64),
) -> Result<CoreRun> {
    let (mut mem, lay) = memory_image(p, a, timing)?;
    let mut dut = match waves {
        Some((path, opts)) => model.dut_with_waves(path, opts)?,
        None => model.dut()?,
    };
    dut.set("start", 0);
    // A core built for fault injection runs with the fault its test selects.
    if let Some(f) = timing.core_fault {
        anyhow::ensure!(
            p.faults,
            "fault {f:?} selected on a core not built for fault injection"
        );
        dut.set(hdl::fault::SELECT, f.code());
    }
    let tsv: Vec<_> = timing.tsv_faults.iter().flatten().copied().collect();
    if p.faults && p.links() {
        dut.set_words(hdl::link::CORE_FAULTS, &hdl::link::core_fault_words(&tsv));
    } else {
        anyhow::ensure!(
            tsv.is_empty(),
            "TSV faults given for a core not built for fault injection with spare lanes"
        );
    }
    dut.reset(2);
    link_test_done(&mut dut, p)?;
    run_on(&mut dut, p, a, timing, &mut mem, &lay, &lay, progress)
}

/// With spare lanes: waits out the link test the reset started (the core is busy until it
/// ends, and takes no START).
pub fn link_test_done(dut: &mut Dut, p: &CoreParams) -> Result<()> {
    let Some(cycles) = p.link_test_cycles() else {
        return Ok(());
    };
    let bound = cycles + 2;
    for _ in 0..bound {
        if dut.get("link_testing") == 0 {
            return Ok(());
        }
        dut.tick();
    }
    bail!("the link test did not finish within {bound} cycles of reset")
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
    let mut link = MemPort::new(dut, &p.dma, timing)?;
    let problem = hdl::core::ports::Problem {
        q_addr: addrs.q,
        k_addr: addrs.k,
        v_addr: addrs.v,
        o_addr: addrs.o,
        heads: a.heads as u64,
        q_len: a.q_len as u64,
        k_len: a.k_len as u64,
        causal: a.causal as u64,
        out_f32: (a.out == OutFormat::F32) as u64,
        c_const: a.softmax_constant() as u64,
        q_row_stride: addrs.q_strides.0,
        q_head_stride: addrs.q_strides.1,
        k_row_stride: addrs.k_strides.0,
        k_head_stride: addrs.k_strides.1,
        v_row_stride: addrs.v_strides.0,
        v_head_stride: addrs.v_strides.1,
        o_row_stride: addrs.o_strides.0,
        o_head_stride: addrs.o_strides.1,
        kv_group: a.group() as u64,
    };
    dut.set_all("", &problem);
    if p.row.scratch() {
        dut.set("s_addr", addrs.s);
    }
    let (estimate, limit) = cycle_limit(p, a, timing, mem);
    let done = dut.port("done")?;
    let error = dut.port("error")?;
    dut.set("start", 1);
    link.present(dut, mem);
    link.edge(dut, mem)?;
    dut.set("start", 0);
    let mut cycles = 0u64;
    crate::watch::expect(estimate);
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
                crate::watch::advance(8192);
                crate::watch::check()?;
            }
        }
    }
    progress(cycles, estimate);
    let dma_error = dut.get_id(error);
    link.check_idle()?;
    let link_result = link_test(dut, p)?;
    let counters = hdl::ir::iface::Ports::named(&dut.get_all("", &Counters::widths()))
        .into_iter()
        .collect();
    let glb_banks = glb_banks(p, dut);
    Ok(CoreRun {
        out: read_out(mem, lay, a),
        counters,
        glb_banks,
        memory: mem.stats,
        assertion_failures: dut.assertion_failures(),
        dma_error,
        timing: *timing,
        axi: link.axi_stats(),
        link: link_result,
    })
}

/// The GLB's per-bank counters through the core's window: (reads, writes) per bank group.
fn glb_banks(p: &CoreParams, dut: &mut Dut) -> Vec<(u64, u64)> {
    let groups = p.dma.glb.map_or(0, |g| g.groups);
    (0..groups)
        .map(|g| {
            dut.set("glb_bank_sel", g as u64);
            (dut.get("glb_bank_reads"), dut.get("glb_bank_writes"))
        })
        .collect()
}

/// (about how many cycles `a` takes, how many a run may take before it counts as a hang).
pub(crate) fn cycle_limit(
    p: &CoreParams,
    a: &Attention,
    timing: &MemoryTiming,
    mem: &Memory,
) -> (u64, u64) {
    let estimate = estimate_cycles(p, a);
    let slack = 1.0 / (1.0 - timing.stall_probability.min(0.9));
    let beat_bytes = (p.dma.width / 8) as u64;
    let bw = mem.config().bytes_per_cycle as u64;
    // Each descriptor waits for memory once per max_outstanding beats: allow two latencies for
    // each such round trip on top of the MAC steps at the memory's pace.
    let round_trips = expected_beats(p, a).0 / p.dma.max_outstanding as u64
        + 2 * schedule_blocks(p, a)
        + 2 * (a.heads * a.q_len.div_ceil(p.br() as usize)) as u64;
    let limit = ((estimate as f64 * slack * 4.0) as u64) * beat_bytes.div_ceil(bw)
        + 2 * round_trips * timing.latency as u64
        + 200_000;
    (estimate, limit)
}

/// O as the core left it in memory, logically heads × q_len × d values (FP16 in the low half,
/// or FP32).
pub fn read_out(mem: &Memory, lay: &Layout, a: &Attention) -> Vec<u32> {
    let ob = a.out_bytes();
    let row = a.head_dim * ob;
    let mut out = Vec::with_capacity(a.heads * a.q_len * a.head_dim);
    for h in 0..a.heads {
        for s in 0..a.q_len {
            let at = Layout::at(lay.o, lay.o_strides, h, s);
            out.extend(mem.read_bytes(at, row).chunks(ob).map(|c| {
                let mut w = [0u8; 4];
                w[..ob].copy_from_slice(c);
                u32::from_le_bytes(w)
            }));
        }
    }
    out
}
