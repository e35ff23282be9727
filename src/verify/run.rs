//! One check per block, end to end: generate the block from a configuration, build its
//! Verilator model, stream directed and random stimulus, compare with the model. The test suite
//! and `regflash verify` both call these, so they check the same thing.

use std::time::Instant;

use anyhow::{bail, Result};
use hdl::config::CoreConfig;
use serde::{Deserialize, Serialize};

use crate::design::{simulate, Target};
use crate::units::{self, Check, Driver};
use crate::verify::pe::{
    check_pe_stream, directed_feed_stream, directed_int_stream, directed_pe_stream, proptest_pe,
    GridShape,
};
use crate::verify::pure::{check_stream, proptest_vectors};
use crate::verify::stateful::{
    check_recip, check_softmax_row, proptest_recip, proptest_softmax_row, recip_directed,
    softmax_row_directed,
};
use verilator_tb::Dut;

/// What checking one block found (it is only returned when everything matched).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct BlockReport {
    pub unit: String,
    pub module: String,
    pub latency: u32,
    /// Directed vectors (special values, exhaustive or boundary sweeps).
    pub directed_vectors: u64,
    /// proptest-generated vectors (for PE blocks: stimulus cycles).
    pub random_vectors: u64,
    /// PE blocks: operations issued.
    pub operations: u64,
    /// Clock cycles simulated.
    pub sim_cycles: u64,
    /// Seconds spent generating stimulus, simulating and comparing (wall clock, this machine).
    pub sim_seconds: f64,
    /// Seconds to build the model; 0 when it came from the cache.
    pub build_seconds: f64,
}

/// Generates unit `name` of `cfg` and builds its model: (model, latency, module name, seconds
/// spent building, 0 when the model came from the cache).
fn build(cfg: &CoreConfig, name: &str) -> Result<(verilator_tb::Model, u32, String, f64)> {
    let start = Instant::now();
    let (model, manifest) = simulate(cfg, &Target::Unit(name.into()))?;
    let seconds = if model.compiled {
        start.elapsed().as_secs_f64()
    } else {
        0.0
    };
    Ok((model, manifest.top_module().latency, manifest.top, seconds))
}

/// Checks pure unit `name` (a [`Check::Pure`] block of the registry): all its directed vectors
/// streamed back to back, then `cases` proptest vectors.
pub fn verify_pure(cfg: &CoreConfig, name: &str, cases: u32, seed: u64) -> Result<BlockReport> {
    let block = units::unit(name)?;
    // Reported by the block's name, also when asked for by a former one.
    let name = block.name;
    let Check::Pure {
        unit,
        directed,
        random,
    } = block.check
    else {
        bail!("`{name}` is not a pure unit");
    };
    let unit = unit(cfg);
    let (model, latency, module, build_seconds) = build(cfg, name)?;
    let mut dut = model.dut()?;
    let start = Instant::now();
    let vectors = directed(cfg);
    if let Err(m) = check_stream(&mut dut, &unit, latency, &vectors)? {
        bail!("directed vectors:\n{m}");
    }
    let random = proptest_vectors(&mut dut, &unit, latency, random(cfg), cases, seed)?;
    Ok(BlockReport {
        unit: name.into(),
        module,
        latency,
        directed_vectors: vectors.len() as u64,
        random_vectors: random,
        operations: 0,
        sim_cycles: dut.cycles(),
        sim_seconds: start.elapsed().as_secs_f64(),
        build_seconds,
    })
}

/// Checks the PE (`pe`) of `cfg`: the directed special-value stream,
/// then `cases` random operation streams of up to `max_len` cycles each.
pub fn verify_pe_block(
    cfg: &CoreConfig,
    unit: &str,
    cases: u32,
    max_len: usize,
    seed: u64,
) -> Result<BlockReport> {
    let (rows, cols) = match unit {
        "pe" => (1, 1),
        other => bail!("`{other}` is not a PE block (pe)"),
    };
    let (model, latency, module, build_seconds) = build(cfg, unit)?;
    let shape = GridShape {
        rows,
        cols,
        regs: cfg.regs_per_pe,
        latency,
        reuse: cfg.pe().reuse_gap(),
        format: cfg.in_format,
        qk: cfg.qk_format,
        feedback: cfg.pe().mac.feedback,
    };
    let start = Instant::now();
    let mut stream = directed_pe_stream(rows, cols, cfg.in_format);
    if let Some(qk) = cfg.qk_format {
        stream.extend(directed_int_stream(rows, cols, qk));
    }
    if shape.feedback {
        stream.extend(directed_feed_stream(rows, cols, cfg.in_format));
    }
    let directed = match check_pe_stream(&model, shape, &stream)? {
        Ok(stats) => stats,
        Err(m) => bail!("directed special-value stream:\n{m}"),
    };
    let checked = proptest_pe(&model, shape, cases, max_len, seed)?;
    Ok(BlockReport {
        unit: unit.into(),
        module,
        latency,
        directed_vectors: stream.len() as u64,
        random_vectors: checked.cycles,
        operations: checked.ops + directed.ops,
        sim_cycles: checked.sim_cycles + directed.sim_cycles,
        sim_seconds: start.elapsed().as_secs_f64(),
        build_seconds,
    })
}

/// Checks a stateful unit: its directed input with `check`, then proptest with `random` (which
/// returns how many random vectors or cycles it checked).
fn verify_stateful<T>(
    cfg: &CoreConfig,
    unit: &str,
    directed: &[T],
    check: impl FnOnce(&mut Dut, &[T]) -> Result<Result<(), String>>,
    random: impl FnOnce(&mut Dut) -> Result<u64>,
) -> Result<BlockReport> {
    let (model, latency, module, build_seconds) = build(cfg, unit)?;
    let mut dut = model.dut()?;
    let start = Instant::now();
    if let Err(m) = check(&mut dut, directed)? {
        bail!("directed stimulus:\n{m}");
    }
    let random = random(&mut dut)?;
    Ok(BlockReport {
        unit: unit.into(),
        module,
        latency,
        directed_vectors: directed.len() as u64,
        random_vectors: random,
        operations: directed.len() as u64 + random,
        sim_cycles: dut.cycles(),
        sim_seconds: start.elapsed().as_secs_f64(),
        build_seconds,
    })
}

/// Checks any block of the registry ([`units::UNITS`]) with about `vectors` random vectors (or
/// cycles).
pub fn verify_block(cfg: &CoreConfig, unit: &str, vectors: u32, seed: u64) -> Result<BlockReport> {
    match units::unit(unit)?.check {
        Check::Pure { .. } => verify_pure(cfg, unit, vectors, seed),
        Check::Own(driver) => own(driver, cfg, vectors, seed),
        Check::Within(block) => bail!(
            "{unit} has no port-level model of its own; the {block}'s checks cover it: use \
             --unit {block}"
        ),
    }
}

/// Runs the driver of its own that checks a block.
fn own(driver: Driver, cfg: &CoreConfig, vectors: u32, seed: u64) -> Result<BlockReport> {
    match driver {
        Driver::PeBlock => verify_pe_block(cfg, "pe", stream_cases(vectors), 1000, seed),
        Driver::Recip => verify_recip(cfg, vectors, seed),
        Driver::SoftmaxRow => verify_softmax_row(cfg, vectors, seed),
        Driver::Dma => verify_dma(cfg, vectors, seed),
        Driver::Sram => verify_sram(cfg, vectors, seed),
        Driver::Sequencer => verify_sequencer(cfg, vectors, seed),
        Driver::Core => verify_core(cfg, vectors, seed),
        Driver::Csr => verify_csr(cfg, vectors, seed),
        Driver::Batch => verify_batch(cfg, vectors, seed),
        Driver::Top => verify_top(cfg, vectors, seed),
    }
}

/// Streams of 1 to 1,000 cycles average about 500: 10 % more cases keep the total above
/// `vectors`.
pub fn stream_cases(vectors: u32) -> u32 {
    (vectors / 450).max(1)
}

/// Checks `fp_recip_e8m23`: directed operands, then about `vectors` random ones.
pub fn verify_recip(cfg: &CoreConfig, vectors: u32, seed: u64) -> Result<BlockReport> {
    verify_stateful(
        cfg,
        "fp_recip_e8m23",
        &recip_directed(),
        check_recip,
        |dut| proptest_recip(dut, vectors, seed),
    )
}

/// Checks `softmax_row`: a directed operation sequence, then random streams.
pub fn verify_softmax_row(cfg: &CoreConfig, vectors: u32, seed: u64) -> Result<BlockReport> {
    let u = cfg.row().row_update();
    verify_stateful(
        cfg,
        "softmax_row",
        &softmax_row_directed(),
        |dut, cycles| check_softmax_row(dut, cycles, u.threshold, u.latency()),
        |dut| {
            let (t, lat) = (u.threshold, u.latency());
            proptest_softmax_row(dut, stream_cases(vectors), 1000, seed, t, lat)
        },
    )
}

/// Checks an SRAM bank (the configuration's P bank: its ports in buf2d, one read and one write
/// port in reg2d): a directed stream, then random streams of legal cycles.
pub fn verify_sram(cfg: &CoreConfig, vectors: u32, seed: u64) -> Result<BlockReport> {
    use crate::verify::stateful::{check_sram, proptest_sram, sram_directed};
    cfg.validate()?;
    let bank = cfg.row().p_array();
    verify_stateful(
        cfg,
        "sram",
        &sram_directed(bank.depth, bank.width, bank.ports),
        |dut, cycles| check_sram(dut, bank.depth, bank.width, cycles),
        |dut| proptest_sram(dut, bank, stream_cases(vectors), 1000, seed),
    )
}

/// Checks the core's sequencer alone against the schedule model (see `verify::sequencer`): one
/// random problem and environment per 2,000 `vectors`, at least 8.
pub fn verify_sequencer(cfg: &CoreConfig, vectors: u32, seed: u64) -> Result<BlockReport> {
    anyhow::ensure!(
        !cfg.row().concurrent_phases(),
        "the sequencer's standalone model is the one-tier schedule (one phase at a time); \
         reg3d's two concurrent phase streams are checked within the core: use --unit core"
    );
    let (model, latency, module, build_seconds) = build(cfg, "sequencer")?;
    let p = hdl::core::CoreParams::from_config(cfg)?;
    let mut dut = model.dut()?;
    let start = Instant::now();
    let cases = crate::verify::sequencer::check(&mut dut, &p, (vectors / 2000).max(8), seed)?;
    Ok(BlockReport {
        unit: "sequencer".into(),
        module,
        latency,
        directed_vectors: 0,
        random_vectors: cases,
        operations: cases,
        sim_cycles: dut.cycles(),
        sim_seconds: start.elapsed().as_secs_f64(),
        build_seconds,
    })
}

/// Checks the DMA: every descriptor error on every channel, then random concurrent transfers
/// (one scenario per 1,000 `vectors`) against the memory model.
pub fn verify_dma(cfg: &CoreConfig, vectors: u32, seed: u64) -> Result<BlockReport> {
    anyhow::ensure!(
        cfg.addr_bits >= 20,
        "the DMA checks use a 1 MB memory: addr_bits must be at least 20"
    );
    let (model, latency, module, build_seconds) = build(cfg, "dma")?;
    let d = cfg.dma();
    let start = Instant::now();
    let errors = crate::verify::dma::check_errors(&model, &d)?;
    let t = crate::verify::dma::random_transfers(&model, &d, (vectors / 1000).max(1), seed)?;
    Ok(BlockReport {
        unit: "dma".into(),
        module,
        latency,
        directed_vectors: errors,
        random_vectors: t.scenarios,
        operations: t.beats,
        sim_cycles: t.cycles,
        sim_seconds: start.elapsed().as_secs_f64(),
        build_seconds,
    })
}

/// Checks the whole core end to end: the directed scenarios, then one random scenario per
/// 2,000 `vectors` (shapes up to 200 rows, heads, masks, value patterns, memory behaviour),
/// each bit for bit against the hardware model with exact counters.
pub fn verify_core(cfg: &CoreConfig, vectors: u32, seed: u64) -> Result<BlockReport> {
    use crate::verify::attention::{check_scenarios, directed};
    let (model, latency, module, build_seconds) = build(cfg, "core")?;
    let p = hdl::core::CoreParams::from_config(cfg)?;
    let start = Instant::now();
    let dir = directed(p.br() as usize, p.bc() as usize);
    let cases = (vectors / 2000).max(1);
    let (n, cycles) = check_scenarios(&model, &p, &dir, cases, 200, seed)?;
    Ok(BlockReport {
        unit: "core".into(),
        module,
        latency,
        directed_vectors: dir.len() as u64,
        random_vectors: n - dir.len() as u64,
        operations: n,
        sim_cycles: cycles,
        sim_seconds: start.elapsed().as_secs_f64(),
        build_seconds,
    })
}

/// Checks the AXI4-Lite register block against its model: the directed streams, then random
/// ones (one stream of up to 60 operations per 500 `vectors`, at least 8).
pub fn verify_csr(cfg: &CoreConfig, vectors: u32, seed: u64) -> Result<BlockReport> {
    use crate::verify::csr::{check, directed, proptest_csr};
    let p = hdl::core::CoreParams::from_config(cfg)?;
    verify_stateful(
        cfg,
        "csr",
        &directed(&p),
        |dut, ops| check(dut, &p, ops),
        |dut| proptest_csr(dut, &p, (vectors / 500).max(8), 60, seed),
    )
}

/// Checks the varlen batch controller at its ports against its model: the directed batches,
/// then one random batch per 1,000 `vectors` (at least 20), each run twice on one instance,
/// over the configuration's memory port.
pub fn verify_batch(cfg: &CoreConfig, vectors: u32, seed: u64) -> Result<BlockReport> {
    let (model, latency, module, build_seconds) = build(cfg, "batch")?;
    let p = hdl::core::CoreParams::from_config(cfg)?;
    let start = Instant::now();
    let cases = (vectors / 1000).max(20);
    let (batches, cycles) = crate::verify::batch::check(&model, &p, cases, seed)?;
    let directed = crate::verify::batch::directed(&p).len() as u64;
    Ok(BlockReport {
        unit: "batch".into(),
        module,
        latency,
        directed_vectors: directed,
        random_vectors: batches - directed,
        operations: batches,
        sim_cycles: cycles,
        sim_seconds: start.elapsed().as_secs_f64(),
        build_seconds,
    })
}

/// Checks the top end to end through its registers: two problems (one waiting for the
/// interrupt, one polling STATUS; causal and not, FP16 and FP32 out, one and two heads), each
/// O bit for bit and every counter exact; with the AXI4 master, on a slave with random stalls.
/// Then the launch contract (`attention::launches`): directed and random sequences of launches
/// on one instance, each ending on a random path with its code and exactly one DONE event.
pub fn verify_top(cfg: &CoreConfig, vectors: u32, seed: u64) -> Result<BlockReport> {
    use crate::verify::attention::{check, run_top, Attention, MemoryTiming, Wait};
    let (model, latency, module, build_seconds) = build(cfg, "top")?;
    let p = hdl::core::CoreParams::from_config(cfg)?;
    let start = Instant::now();
    let (br, bc) = (p.br() as usize, p.bc() as usize);
    let d = p.d() as usize;
    let problems = [
        (
            1,
            br + 3,
            2 * bc + 1,
            false,
            kernels::flash::OutFormat::Short,
            Wait::Interrupt,
        ),
        (
            2,
            2 * br - 1,
            bc + 2,
            true,
            kernels::flash::OutFormat::F32,
            Wait::Poll,
        ),
    ];
    let mut cycles = 0;
    for (k, &(heads, q, kl, causal, out, wait)) in problems.iter().enumerate() {
        let a = Attention::generate(
            kernels::patterns::Pattern::Unit,
            heads,
            q,
            kl,
            d,
            causal,
            out,
            seed ^ k as u64,
        )
        .for_design(&p);
        // The AXI4 slave stalls every channel at random and reorders reads across IDs.
        let axi = p.dma.mem_if == hdl::mem::dma::MemIf::Axi4;
        let timing = MemoryTiming {
            seed: seed ^ 0x55,
            stall_probability: if axi { 0.2 } else { 0.0 },
            ..MemoryTiming::default()
        };
        let run = run_top(&model, &p, &a, &timing, wait, seed.wrapping_add(k as u64))?;
        let chk = check(&p, &a, &run);
        anyhow::ensure!(
            chk.ok(),
            "through the registers, {wait:?}: {}",
            chk.describe()
        );
        cycles += run.counters["cycles"];
    }
    // The launch contract: sequences of launches on every ending path, one DONE event each.
    let directed_seqs = crate::verify::attention::launches::directed(&p).len() as u64;
    let cases = (vectors / 1000).max(20);
    let (launches, launch_cycles) =
        crate::verify::attention::launches::check_launches(&model, &p, cases, seed)?;
    cycles += launch_cycles;
    Ok(BlockReport {
        unit: "top".into(),
        module,
        latency,
        directed_vectors: problems.len() as u64 + directed_seqs,
        random_vectors: cases as u64,
        operations: problems.len() as u64 + launches,
        sim_cycles: cycles,
        sim_seconds: start.elapsed().as_secs_f64(),
        build_seconds,
    })
}
