//! `regflash sim`: attention on the whole core under Verilator.

use super::*;
use crate::sim;
use crate::verify::attention::{Attention, Batch, MemoryTiming};
use hdl::core::CoreParams;
use kernels::flash::OutFormat;

#[derive(Args, Debug)]
pub struct SimArgs {
    #[command(flatten)]
    pub config: ConfigArgs,
    /// Sequence length of random Q, K, V (default 256). Refused with --q/--k/--v (the arrays'
    /// rows give it) and with --seqlens (a batch lists its lengths).
    #[arg(long)]
    pub seq: Option<usize>,
    /// Attention heads of random inputs (default 1; with --q/--k/--v Q's shape gives them).
    #[arg(long)]
    pub heads: Option<usize>,
    /// K/V heads of random inputs (grouped-query attention: the Q heads share them; must
    /// divide --heads; default: one per Q head; with --q/--k/--v K's shape gives them).
    #[arg(long)]
    pub kv_heads: Option<usize>,
    /// How the tensors lie in the core's memory: bhsd (heads, seq, d) or bshd (seq, heads, d),
    /// read in place through the row and head strides. Also the axes of 3-D --q/--k/--v files
    /// and of the O that --out writes; a 2-D (seq, d) file is one head in either layout.
    #[arg(long, default_value = "bhsd")]
    pub layout: crate::verify::attention::TensorLayout,
    /// A varlen batch with these query lengths (FlashAttention's varlen: sequences packed
    /// along the rows, described by cumulative offsets in memory), run through the top's
    /// registers in one launch: random sequences, or with --q/--k/--v the arrays' rows, one
    /// sequence after the other (Q's rows add up to these lengths).
    #[arg(long, value_delimiter = ',')]
    pub seqlens: Option<Vec<usize>>,
    /// The batch's key lengths, one per sequence (default: the query lengths; with --k/--v
    /// they add up to K's rows).
    #[arg(long, value_delimiter = ',', requires = "seqlens")]
    pub kv_seqlens: Option<Vec<usize>>,
    /// Causal masking (bottom-right aligned when Q and K lengths differ).
    #[arg(long)]
    pub causal: bool,
    /// Seed of the random inputs and of the run's random timing: the memory's stalls
    /// (--mem-stall), the AXI4 slave's, the register bus's on the top (default 1). Refused
    /// when nothing is random: --q/--k/--v on the simple port without --mem-stall or --seqlens.
    #[arg(long)]
    pub seed: Option<u64>,
    /// Q as .npy, FP16 or FP32 (rounded to FP16), shaped (seq, d) (one head) or, by --layout,
    /// (heads, seq, d) (bhsd) or (seq, heads, d) (bshd); with --seqlens the sequences' rows
    /// one after the other along seq.
    #[arg(long, requires_all = ["k", "v"])]
    pub q: Option<PathBuf>,
    /// K as .npy, shaped (seq_k, d) or, by --layout, (kv_heads, seq_k, d) or (seq_k, kv_heads,
    /// d): its length may differ from Q's, and it may have fewer heads if they divide Q's
    /// (grouped-query attention: Q head h reads K/V head h / (heads / kv_heads)).
    #[arg(long, requires_all = ["q", "v"])]
    pub k: Option<PathBuf>,
    /// V as .npy, shaped like K.
    #[arg(long, requires_all = ["q", "k"])]
    pub v: Option<PathBuf>,
    /// Output FP32 instead of the inputs' format (FP16, or the --in-format's).
    #[arg(long)]
    pub f32: bool,
    /// Clamp values of --q/--k/--v outside the inputs' format's range to its largest finite
    /// value (±65504 for FP16, ±448 for FP8 E4M3; counted in the report) instead of refusing them.
    #[arg(long)]
    pub saturate: bool,
    /// Test only: simulate the core built for fault injection with this deliberate defect
    /// selected (hdl::fault), to see the checks fail: stall_qk, stall_pv, write_outside_o,
    /// release_{q,k,v}_unheld, skip_k, skip_v, causal_off_by_one, wrong_rescale,
    /// shared_port_clash, shared_s_tier_slot, early_wlast, glb_no_hit, glb_stale_tag,
    /// stale_scale.
    #[arg(long, hide = true)]
    pub fault: Option<String>,
    /// Test only: simulate the core built for fault injection with a TSV fault on one lane of
    /// a vertical link (with --spares): ROW:BUNDLE:LANE:KIND, ROW a PE row (BUNDLE p_up,
    /// o_down or s_up) or glb (BUNDLE glb_up or glb_down: the stacked GLB's bond), LANE a
    /// physical lane of the bundle, KIND sa0, sa1 or open. Repeatable (up to 8).
    #[arg(long, hide = true)]
    pub tsv_fault: Vec<String>,
    /// Write O as .npy, shaped like Q's file: (seq, d) for a 2-D Q; for a 3-D Q (one head
    /// too), (heads, seq, d), or (seq, heads, d) with --layout bshd. Random inputs: (seq, d)
    /// for one head, else the 3-D shape of --layout. A varlen batch's O is packed like Q.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Write the report as JSON.
    #[arg(long)]
    pub report: Option<PathBuf>,
    #[command(flatten)]
    pub energy: super::EnergyArgs,
    /// Memory read latency in cycles.
    #[arg(long, default_value_t = 20)]
    pub mem_latency: u32,
    /// Probability that the memory refuses a request in a cycle (random back-pressure); with
    /// --mem-if axi4, that the AXI4 slave withholds each ready and each response in a cycle
    /// (it also answers read bursts of different IDs in random order).
    #[arg(long, default_value_t = 0.0)]
    pub mem_stall: f64,
    /// Write a waveform of the run: `.fst` (compact, GTKWave) or `.vcd`. The model is built
    /// (and cached) with tracing.
    #[arg(long)]
    pub waves: Option<PathBuf>,
    /// First cycle the waveform holds (counted from the model's creation).
    #[arg(long, default_value_t = 0, requires = "waves")]
    pub wave_from: u64,
    /// Last cycle the waveform holds.
    #[arg(long, requires = "waves")]
    pub wave_to: Option<u64>,
    /// Only this scope and below, as a path of instance names from the core's top module
    /// (e.g. `u_engine.u_seq` for the sequencer, `u_engine.u_dma` for the DMA), or from
    /// `TOP.`; a path that names no instance is refused before the build.
    #[arg(long, requires = "waves")]
    pub wave_scope: Option<String>,
}

pub(super) fn sim_cmd(args: SimArgs) -> Result<ExitCode> {
    let cfg = args.config.resolve()?;
    let params = CoreParams::from_config(&cfg)?;
    refuse_unused(&args, &params)?;
    let table = args.energy.table(&cfg)?;
    let out = if args.f32 {
        OutFormat::F32
    } else {
        OutFormat::Short
    };
    anyhow::ensure!(
        (0.0..0.95).contains(&args.mem_stall),
        "--mem-stall must be in [0, 0.95)"
    );
    let timing = MemoryTiming {
        latency: args.mem_latency,
        stall_probability: args.mem_stall,
        seed: args.seed.unwrap_or(1),
        ..Default::default()
    };
    timing.validate().context("--mem-latency")?;
    // Before minutes of simulation: the outputs can be written.
    for path in args.out.iter().chain(&args.report) {
        check_writable(path)?;
    }
    let files = match (&args.q, &args.k, &args.v) {
        (Some(q), Some(k), Some(v)) => Some((q, k, v)),
        _ => None,
    };
    let load = |(q, k, v): (&PathBuf, &PathBuf, &PathBuf)| {
        let (a, rank, n) = sim::load_problem(
            (q.as_path(), k.as_path(), v.as_path()),
            args.causal,
            out,
            args.saturate,
            cfg.in_format,
            args.layout,
        )?;
        anyhow::Ok((a.for_qk_of(&params), rank, n))
    };
    // Random inputs' O keeps its first shape: (seq, d) for one head, else three axes.
    let random_rank = sim::FileRank::of_heads(args.heads.unwrap_or(1));
    if let Some(q_lens) = &args.seqlens {
        let (q_lens, k_lens) = batch_lengths(q_lens, args.kv_seqlens.as_deref())?;
        let (batch, rank, saturated) = match files {
            Some(files) => {
                let (packed, rank, n) = load(files)?;
                let batch = Batch::from_packed(&packed, q_lens, k_lens)
                    .context("--seqlens and --kv-seqlens against the rows of --q/--k/--v")?;
                (batch, rank, n)
            }
            None => (
                random_batch(&args, &params, out, q_lens, k_lens, timing.seed)?,
                random_rank,
                0,
            ),
        };
        return sim_batch(&args, &cfg, &batch, rank, saturated, &timing, &table);
    }
    let (problem, rank, saturated) = match files {
        Some(files) => load(files)?,
        None => (
            random_one(&args, &params, out, timing.seed)?,
            random_rank,
            0,
        ),
    };
    sim_one(&args, &cfg, &problem, rank, saturated, &timing, &table)
}

/// Refuses a flag the others leave without effect: every flag given is used or refused.
fn refuse_unused(args: &SimArgs, p: &CoreParams) -> Result<()> {
    let files = args.q.is_some();
    if files {
        for (given, flag, instead) in [
            (
                args.seq.is_some(),
                "--seq",
                "the arrays' rows give the lengths",
            ),
            (args.heads.is_some(), "--heads", "Q's shape gives the heads"),
            (
                args.kv_heads.is_some(),
                "--kv-heads",
                "the shape of K and V gives the K/V heads (fewer than Q's: grouped-query \
                 attention)",
            ),
        ] {
            anyhow::ensure!(
                !given,
                "{flag} applies to random inputs; with --q/--k/--v {instead}: leave {flag} out"
            );
        }
    } else {
        anyhow::ensure!(
            !args.saturate,
            "--saturate clamps FP32 values of .npy inputs (--q/--k/--v); random inputs are \
             within FP16's range: leave --saturate out"
        );
    }
    if args.seqlens.is_some() {
        anyhow::ensure!(
            args.seq.is_none(),
            "--seq is the length of one problem; --seqlens lists the batch's lengths: leave \
             --seq out"
        );
        anyhow::ensure!(
            args.fault.is_none() && args.waves.is_none(),
            "--seqlens runs the top; --fault and --waves apply to one problem on the core"
        );
    }
    // Given inputs on the simple port without stalls, one problem on the core: nothing is
    // random (a batch runs on the top, whose register bus has random delays; the AXI4 slave
    // reorders at random).
    let random =
        !files || args.mem_stall > 0.0 || args.seqlens.is_some() || p.dma.mem_if == MemIf::Axi4;
    anyhow::ensure!(
        args.seed.is_none() || random,
        "--seed seeds random inputs and random timing; with --q/--k/--v on the simple memory \
         port without --mem-stall nothing is random: leave --seed out"
    );
    Ok(())
}

/// Random heads and K/V heads: --heads and --kv-heads, checked.
fn random_heads(args: &SimArgs) -> Result<(usize, usize)> {
    let heads = args.heads.unwrap_or(1);
    anyhow::ensure!(heads >= 1, "--heads must be at least 1");
    let kv = args.kv_heads.unwrap_or(heads);
    anyhow::ensure!(
        kv >= 1 && heads.is_multiple_of(kv),
        "--kv-heads {kv} must divide --heads {heads} (each K/V head serves the same number of \
         query heads)"
    );
    Ok((heads, kv))
}

/// One random problem of --heads, --kv-heads and --seq, its shape checked before anything is
/// allocated.
fn random_one(args: &SimArgs, p: &CoreParams, out: OutFormat, seed: u64) -> Result<Attention> {
    let seq = args.seq.unwrap_or(256);
    anyhow::ensure!(seq >= 1, "--seq must be at least 1");
    let (heads, kv) = random_heads(args)?;
    let d = p.d() as usize;
    crate::verify::attention::check_shape(p, heads, seq, seq, d, out)?;
    Ok(sim::random_problem(heads, seq, d, args.causal, out, seed)
        .grouped(kv)
        .laid_out(args.layout)
        .for_design(p))
}

/// The batch's query and key lengths: --seqlens, and --kv-seqlens (default the same), one
/// of each per sequence, none empty.
fn batch_lengths<'a>(
    q_lens: &'a [usize],
    k_lens: Option<&'a [usize]>,
) -> Result<(&'a [usize], &'a [usize])> {
    let k_lens = k_lens.unwrap_or(q_lens);
    anyhow::ensure!(
        k_lens.len() == q_lens.len(),
        "--kv-seqlens gives {} lengths for {} sequences: give one per sequence",
        k_lens.len(),
        q_lens.len()
    );
    anyhow::ensure!(
        q_lens.iter().chain(k_lens).all(|&n| n >= 1),
        "every --seqlens and --kv-seqlens length must be at least 1"
    );
    Ok((q_lens, k_lens))
}

/// A batch of random sequences of these lengths, its packed shape checked before anything is
/// allocated.
fn random_batch(
    args: &SimArgs,
    p: &CoreParams,
    out: OutFormat,
    q_lens: &[usize],
    k_lens: &[usize],
    seed: u64,
) -> Result<Batch> {
    let (heads, kv) = random_heads(args)?;
    let d = p.d() as usize;
    let total = |l: &[usize]| l.iter().try_fold(0usize, |s, &n| s.checked_add(n));
    crate::verify::attention::check_shape(
        p,
        heads,
        total(q_lens).unwrap_or(usize::MAX),
        total(k_lens).unwrap_or(usize::MAX),
        d,
        out,
    )
    .context("the batch's packed tensors")?;
    let batch = Batch::generate(
        kernels::patterns::Pattern::Unit,
        heads,
        kv,
        q_lens,
        k_lens,
        d,
        args.causal,
        out,
        args.layout,
        seed,
    );
    Ok(batch.for_design(p))
}

/// Runs a varlen batch on the top and writes its O packed like the inputs, of Q's `rank`:
/// (total queries, d), or (heads, total queries, d) in bhsd, (total queries, heads, d) in bshd.
fn sim_batch(
    args: &SimArgs,
    cfg: &hdl::config::CoreConfig,
    batch: &Batch,
    rank: sim::FileRank,
    saturated: u64,
    timing: &MemoryTiming,
    table: &kernels::energy::EnergyTable,
) -> Result<ExitCode> {
    let (mut report, o) = sim::run_batch(cfg, batch, timing)?;
    report.saturated_inputs = saturated;
    report.with_energy(table, cfg, false);
    println!("{}", report.summary());
    if let Some(path) = &args.out {
        let whole = Attention {
            q_len: batch.totals().0,
            ..batch.seqs[0].clone()
        };
        sim::write_output(path, &whole, &batch.packed_out(&o), rank)?;
    }
    if let Some(path) = &args.report {
        write_json(path, &report)?;
    }
    Ok(exit(report.passed))
}

/// The `--tsv-fault` values as lane faults of core `p`'s bundles.
fn tsv_faults(p: &CoreParams, given: &[String]) -> Result<Vec<hdl::link::TsvFault>> {
    use hdl::link::{TsvFault, FAULT_SLOTS, GLB_ROW};
    use kernels::link::LaneFault;
    let bundles = p.bundles();
    anyhow::ensure!(
        !bundles.is_empty(),
        "--tsv-fault needs vertical links with spare lanes: --variant reg3d --spares 1 (or \
         more), or a stacked GLB with --spares"
    );
    anyhow::ensure!(
        given.len() <= FAULT_SLOTS as usize,
        "--tsv-fault is given {} times: a run injects at most {FAULT_SLOTS}",
        given.len()
    );
    // Each bundle's name and lanes, once (every PE row has the same).
    let mut kinds: Vec<(bool, hdl::link::Bundle, u32)> = vec![];
    for b in &bundles {
        if !kinds.iter().any(|&(_, x, _)| x == b.bundle) {
            kinds.push((b.row == GLB_ROW, b.bundle, b.lanes()));
        }
    }
    given
        .iter()
        .map(|s| {
            let usage =
                || {
                    format!(
                    "--tsv-fault {s:?}: expected ROW:BUNDLE:LANE:KIND, e.g. {} (BUNDLE {}; KIND \
                     sa0, sa1 or open)",
                    if kinds[0].0 { "glb:glb_up:3:sa1" } else { "0:p_up:3:sa1" },
                    kinds
                        .iter()
                        .map(|(glb, b, n)| {
                            let row = if *glb { "ROW glb" } else { "a PE row" };
                            format!("{} ({n} lanes, {row})", b.name())
                        })
                        .collect::<Vec<_>>()
                        .join(", ")
                )
                };
            let f: Vec<&str> = s.split(':').collect();
            let [row, bundle, lane, kind] = f[..] else {
                anyhow::bail!(usage());
            };
            let row: u32 = match row {
                "glb" => GLB_ROW,
                r => r.parse().map_err(|_| anyhow::anyhow!(usage()))?,
            };
            let lane: u32 = lane.parse().map_err(|_| anyhow::anyhow!(usage()))?;
            let &(glb, bundle, lanes) = kinds
                .iter()
                .find(|(_, b, _)| b.name() == bundle)
                .ok_or_else(|| anyhow::anyhow!(usage()))?;
            let kind = match kind {
                "sa0" => LaneFault::StuckAt0,
                "sa1" => LaneFault::StuckAt1,
                "open" => LaneFault::Open,
                _ => anyhow::bail!(usage()),
            };
            anyhow::ensure!(
                glb == (row == GLB_ROW),
                "--tsv-fault {s:?}: bundle {} is {}",
                bundle.name(),
                if glb {
                    "the GLB's bond: give ROW glb"
                } else {
                    "a PE row's: give ROW as a row number"
                }
            );
            anyhow::ensure!(
                glb || row < p.rows,
                "--tsv-fault {s:?}: row {row} is past the array's {} rows",
                p.rows
            );
            anyhow::ensure!(
                lane < lanes,
                "--tsv-fault {s:?}: bundle {} has {lanes} physical lanes (0 to {})",
                bundle.name(),
                lanes - 1
            );
            Ok(TsvFault {
                row,
                bundle,
                lane,
                kind,
            })
        })
        .collect()
}

/// Runs one problem on the core (on the top with the AXI4 port), with a fault or a waveform
/// when asked, and writes its O of Q's `rank` ([`sim::write_output`]).
fn sim_one(
    args: &SimArgs,
    cfg: &hdl::config::CoreConfig,
    problem: &Attention,
    rank: sim::FileRank,
    saturated: u64,
    timing: &MemoryTiming,
    table: &kernels::energy::EnergyTable,
) -> Result<ExitCode> {
    let fault = match &args.fault {
        Some(name) => Some(hdl::fault::Fault::from_name(name).with_context(|| {
            format!(
                "unknown fault `{name}`: choose one of {}",
                hdl::fault::Fault::ALL.map(|f| f.name()).join(", ")
            )
        })?),
        None => None,
    };
    if let Some(f) = fault {
        let p = CoreParams::from_config(cfg)?;
        if let Some(need) = p.fault_needs(f) {
            anyhow::bail!("fault `{}` acts only in a core with {need}", f.name());
        }
    }
    let mut timing = *timing;
    if !args.tsv_fault.is_empty() {
        let p = CoreParams::from_config(cfg)?;
        let faults = tsv_faults(&p, &args.tsv_fault)?;
        for (slot, f) in timing.tsv_faults.iter_mut().zip(faults) {
            *slot = Some(f);
        }
    }
    let timing = &timing;
    let waves = match &args.waves {
        Some(path) => {
            check_writable(path)?;
            Some(sim::Waves {
                path: path.clone(),
                opts: verilator_tb::WaveOptions {
                    from: args.wave_from,
                    to: args.wave_to.unwrap_or(u64::MAX),
                    scope: args.wave_scope.clone(),
                },
            })
        }
        None => None,
    };
    let (mut report, o) = sim::run_full(
        cfg,
        fault,
        problem,
        timing,
        waves.as_ref(),
        true,
        progress_bar(),
    )?;
    if let Some(w) = &waves {
        eprintln!("waveform: {}", w.path.display());
    }
    report.saturated_inputs = saturated;
    report.with_energy(table, cfg, false);
    eprintln!();
    println!("{}", report.summary());
    if let Some(path) = &args.out {
        sim::write_output(path, problem, &o, rank)?;
    }
    if let Some(path) = &args.report {
        write_json(path, &report)?;
    }
    Ok(exit(report.passed))
}
