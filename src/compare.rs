//! `regflash compare`: the same attention problems on `buf2d`, `reg2d`, `reg3d`, the
//! row-materializing baseline `rowfused` and standard attention `unfused` (and "3-D
//! buffered", buf2d's counters with its banks priced as stacked SRAM), every run checked bit
//! for bit, cycles and energy from the RTL's
//! counters priced by the energy table (`crate::claims` reads the published claims off them).

use std::collections::BTreeMap;

use anyhow::{ensure, Context, Result};
use hdl::config::{CoreConfig, VariantKind};
use kernels::energy::EnergyTable;
use kernels::flash::OutFormat;
use serde::Serialize;

use crate::pricing::EnergyReport;
use crate::report::real;
use crate::sim::{self, SimReport};
use crate::verify::attention::MemoryTiming;

/// The RTL runs behind the designs: the variants at the config's array, and reg3d with half
/// the PEs per tier (the same total PEs as a 2-D design: iso total PEs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RunKind {
    Buf2d,
    Reg2d,
    Reg3d,
    /// reg3d's two arrays side by side, P over the NoC (the 2-D multi-array baseline).
    Noc2d,
    Reg3dIso,
    Rowfused,
    /// rowfused with a fixed S array (`ComparePlan::spill_keys`) and its spill.
    RowfusedSpill,
    Unfused,
}

/// One of [`DESIGNS`]: (name, run, priced as stacked).
pub type DesignRow = (&'static str, RunKind, bool);

/// The designs compared, in table order: (name, run, priced as stacked).
pub const DESIGNS: [DesignRow; 9] = [
    ("buf2d", RunKind::Buf2d, false),
    ("3-D buffered", RunKind::Buf2d, true),
    ("reg2d", RunKind::Reg2d, false),
    ("reg3d", RunKind::Reg3d, false),
    ("reg3d iso-PE", RunKind::Reg3dIso, false),
    ("rowfused", RunKind::Rowfused, false),
    ("rowfused (spill)", RunKind::RowfusedSpill, false),
    ("unfused", RunKind::Unfused, false),
    ("noc2d", RunKind::Noc2d, false),
];

/// rowfused on the configuration's array with its S arrays holding rows of `seq` keys (the
/// fewest whole blocks, a power of two of them): the row-materializing design sized for the
/// problem. A configuration that is rowfused already keeps its own `keys`.
pub fn rowfused_config(cfg: &CoreConfig, seq: usize) -> CoreConfig {
    let mut c = cfg.with_variant(VariantKind::Rowfused);
    let sized = cfg.variant.rowfused().is_some();
    if let (false, hdl::config::Variant::Rowfused(r)) = (sized, &mut c.variant) {
        let bc = cfg.bc.max(1) as usize;
        r.keys = (seq.div_ceil(bc).next_power_of_two() * bc).min(u32::MAX as usize) as u32;
    }
    c
}

/// rowfused on the configuration's array with S arrays of a fixed `keys` keys a row and its
/// spill: the row-materializing design whose rows past its buffer go to the next level (the
/// GLB's scratch region, then DRAM).
pub fn spill_config(cfg: &CoreConfig, keys: u32) -> CoreConfig {
    let mut c = cfg.with_variant(VariantKind::Rowfused);
    if let hdl::config::Variant::Rowfused(r) = &mut c.variant {
        r.keys = keys;
        r.spill = true;
    }
    c
}

/// A model family's attention, as 3D-Flow evaluates it (OPT and Qwen): its name, head size,
/// query heads and K/V heads. OPT-like: OPT-1.3B's 32 heads of 64 (multi-head); Qwen-like:
/// Qwen2-7B's 28 query heads of 128 on 4 K/V heads (grouped-query).
pub const WORKLOADS: [(&str, u32, usize, usize); 2] = [("opt", 64, 32, 32), ("qwen", 128, 28, 4)];

/// A batch of `batch` sequences of `heads` query heads on `kv_heads` K/V heads each, as the
/// core runs it: `batch × heads` independent heads one after another on `batch × kv_heads`
/// K/V heads (a sequence's K/V serve its own query heads alone, so each group of query heads
/// stays within its sequence: query head h of the whole reads K/V head h / (heads /
/// kv_heads)). The rows' tokens are then the batch's (query heads × length, as for heads).
pub fn batched(heads: usize, kv_heads: usize, batch: usize) -> Result<(usize, usize)> {
    ensure!(
        batch >= 1,
        "--batch {batch}: a batch holds at least one sequence (1 by default)"
    );
    check_groups(heads, kv_heads)?;
    match (heads.checked_mul(batch), kv_heads.checked_mul(batch)) {
        (Some(h), Some(kv)) => Ok((h, kv)),
        _ => anyhow::bail!(
            "--batch {batch} of {heads} heads is more heads than this machine counts: take a \
             smaller batch (a batch's sequences share nothing, so a smaller one gives the same \
             figures per token)"
        ),
    }
}

/// Grouped-query attention's heads: the K/V heads divide the query heads.
fn check_groups(heads: usize, kv_heads: usize) -> Result<()> {
    ensure!(
        kv_heads >= 1 && heads.is_multiple_of(kv_heads),
        "--kv-heads {kv_heads} must divide --heads {heads} (each K/V head serves a group of \
         query heads)"
    );
    Ok(())
}

/// The sequence lengths a workload runs at by default: the long-sequence regime 3D-Flow
/// speaks of (N > 2k, where it finds SRAM over 60 % of the energy).
pub const WORKLOAD_SEQS: [usize; 4] = [2048, 4096, 8192, 16384];

/// FuseMax's scale: its array is 256 × 256 PEs (BERT at 16K tokens). Columns must divide
/// d here, so the widest array on the configuration's head size has 256 rows and d columns
/// (256 × 128 at d = 128, half FuseMax's PEs; up to 256 columns at d ≥ 256). The tile grows to
/// keep the MAC's reuse gap hidden: one key and one output column per PE, and the fewest query
/// rows per PE row (a power of two) that cover the gap.
pub const FUSEMAX_ROWS: u32 = 256;

/// The design names of the rows run at FuseMax's scale ([`fusemax_config`]).
pub const FUSEMAX_SUFFIX: &str = " (FuseMax scale)";

/// The lengths FuseMax's utilization figures are at (BERT, 16K tokens).
pub const FUSEMAX_SEQ: usize = 16384;

/// The configuration at FuseMax's scale (see [`FUSEMAX_ROWS`]), or why none fits.
pub fn fusemax_config(cfg: &CoreConfig) -> Result<CoreConfig> {
    let cols = cfg.head_dim.min(FUSEMAX_ROWS);
    // One key per PE (b = 1).
    array_config(cfg, (FUSEMAX_ROWS, cols), (1, 1), "at FuseMax's scale")
}

/// `cfg` on a `rows` × `cols` array, each PE taking `b` keys of a block and at least `a0`
/// query rows: the fewest query rows per PE (doubling from `a0`) whose accumulators hide the
/// MAC's reuse gap, and the registers they need. `what` names the result.
pub fn array_config(
    cfg: &CoreConfig,
    (rows, cols): (u32, u32),
    (a0, b): (u32, u32),
    what: &str,
) -> Result<CoreConfig> {
    let mut c = CoreConfig {
        rows,
        cols,
        bc: cols * b,
        ..cfg.clone()
    };
    let gap = c.row().pe.reuse_gap();
    let e = cfg.head_dim / cols.max(1);
    let mut a = a0.max(1);
    while a * b < gap || a * e < gap {
        a *= 2;
    }
    c.br = rows * a;
    // Two S slots, the most any variant keeps: every variant compare derives from it fits.
    c.regs_per_pe = (2 * a * b + a * e).next_power_of_two();
    c.name = format!("{} {what}", cfg.name);
    c.validate().with_context(|| {
        format!(
            "{} {what} ({}×{} PEs, br = {}, bc = {})",
            cfg.name, c.rows, c.cols, c.br, c.bc
        )
    })?;
    Ok(c)
}

/// The designs at FuseMax's scale and length (BERT's: no causal mask), from the schedule and
/// the cycle model, named with [`FUSEMAX_SUFFIX`] (the configuration's hierarchy).
pub fn run_fusemax(plan: &ComparePlan, glb: GlbRuns) -> Result<Vec<CompareRow>> {
    let q = ComparePlan {
        config: fusemax_config(&plan.config)?,
        seq_lens: vec![FUSEMAX_SEQ],
        max_sim_seq: 0,
        // BERT, an encoder: no mask.
        causal: false,
        ..plan.clone()
    };
    // The hierarchies the run compares, each named as `run_glb` names them, then marked.
    let mut rows = run_glb(&q, glb, |_| {})?;
    for r in &mut rows {
        r.design += FUSEMAX_SUFFIX;
    }
    Ok(rows)
}

/// reg3d with half the PEs per tier, so that its two tiers hold as many PEs as the 2-D
/// array: half the columns, or else half the rows, whichever is a valid tiling (None if
/// neither is).
pub fn iso_pe_config(cfg: &CoreConfig) -> Option<CoreConfig> {
    let base = cfg.with_variant(VariantKind::Reg3d);
    let halves = [
        CoreConfig {
            cols: cfg.cols / 2,
            ..base.clone()
        },
        CoreConfig {
            rows: cfg.rows / 2,
            ..base
        },
    ];
    halves
        .into_iter()
        .find(|c| c.rows >= 1 && c.cols >= 1 && c.pes() * 2 == cfg.pes() && c.validate().is_ok())
}

/// One design at one sequence length.
#[derive(Clone, Debug, Serialize)]
pub struct CompareRow {
    pub design: String,
    pub seq_len: usize,
    pub causal: bool,
    /// K/V heads (the query heads are `tokens / seq_len`).
    pub kv_heads: usize,
    /// PEs over all tiers (reg3d: two PE tiers).
    pub pes: u64,
    /// Query tokens of the problem (heads × length).
    pub tokens: u64,
    /// Where the figures come from: "rtl" (simulated and bit-checked), or "model" (beyond
    /// `max_sim_seq`: the counts the schedule fixes, `crate::schedule`, and the cycle model's
    /// timing, `crate::cycles`, both of which every RTL run is held to exactly; "model
    /// (extrapolated)" where the cycle model fits its timing to shorter exact runs).
    pub source: String,
    /// The RTL's cycles, or the cycle model's.
    pub cycles: u64,
    /// A lower bound on cycles: the busier tier's MAC steps.
    pub mac_steps: u64,
    /// buf2d's cycles / these.
    #[serde(serialize_with = "real")]
    pub speedup_vs_buf2d: f64,
    /// This design's energy / buf2d's (2.0: twice buf2d's energy), so that it reads with
    /// `energy_reduction_vs_buf2d`, which is 1 − it.
    #[serde(serialize_with = "real")]
    pub energy_vs_buf2d: f64,
    /// 1 − this design's energy / buf2d's.
    #[serde(serialize_with = "real")]
    pub energy_reduction_vs_buf2d: f64,
    /// The same, on-chip energy only (DRAM traffic left out: it is equal in every design).
    #[serde(serialize_with = "real")]
    pub on_chip_reduction_vs_buf2d: f64,
    /// Priced from `counters`.
    pub energy: EnergyReport,
    /// The energy's inputs: the run's counters, or the schedule's and the cycle model's.
    pub counters: BTreeMap<String, u64>,
    /// Whether the run passed (bit-exact, every counter right, within the contract): rtl
    /// rows only, null for rows from the schedule and the cycle model, which run no data.
    pub passed: Option<bool>,
    /// The run's report and checks (rtl rows only).
    pub report: Option<SimReport>,
    /// The design as run or modelled at this length (rowfused sized for it, registers widened
    /// where the length needs it).
    #[serde(skip)]
    pub config: CoreConfig,
    /// Priced with its banks stacked (3-D buffered).
    #[serde(skip)]
    pub stacked_banks: bool,
    /// Its silicon at a library, with `--iso area` ([`iso_area`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub area: Option<IsoArea>,
}

/// A row's silicon and what it buys (`compare --iso area`).
#[derive(Clone, Debug, Serialize)]
pub struct IsoArea {
    pub silicon: crate::area::DesignArea,
    /// Tokens per second at `clock_mhz`.
    #[serde(serialize_with = "real")]
    pub tokens_per_s: f64,
    /// The clock behind `tokens_per_s`: the configuration's, or with `--clock synth` the
    /// design's own synthesized fmax.
    #[serde(serialize_with = "real")]
    pub clock_mhz: f64,
    /// Per mm² of footprint (the largest tier).
    #[serde(serialize_with = "real")]
    pub tokens_per_s_per_mm2: f64,
    /// This row's tokens/s per mm² of footprint over buf2d's at the same length (and
    /// hierarchy): the speedup at equal footprint (iso-footprint).
    #[serde(serialize_with = "real")]
    pub iso_area_vs_buf2d: f64,
    /// Per mm² of silicon (every tier).
    #[serde(serialize_with = "real")]
    pub tokens_per_s_per_silicon_mm2: f64,
    /// The same over buf2d's: the speedup at equal silicon (iso-silicon).
    #[serde(serialize_with = "real")]
    pub iso_silicon_vs_buf2d: f64,
    /// Energy per token, nJ.
    #[serde(serialize_with = "real")]
    pub nj_per_token: f64,
}

/// The clock a row's tokens/s take in [`iso_area`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RowClock {
    /// The configuration's `clock_mhz`, every design alike.
    Config,
    /// Each design's synthesized fmax at the library (`--clock synth`).
    Synth,
}

/// Prices every row's design at a library (each distinct design mapped once, its modules
/// cached) and fills [`CompareRow::area`]. The speedup at equal silicon is against the
/// buf2d row of the same length and hierarchy (the first row of each such set).
pub fn iso_area(
    rows: &mut [CompareRow],
    lib: &gen::asic::Liberty,
    label: (&str, &str),
    (density, utilization, clock): (&crate::area::SramDensity, f64, RowClock),
    progress: impl Fn(&str),
) -> Result<()> {
    let mut done: Vec<(String, crate::area::Mapped)> = vec![];
    for r in rows.iter_mut() {
        let key = format!("{:?}", r.config);
        let at = match done.iter().position(|d| d.0 == key) {
            Some(i) => i,
            None => {
                progress(&format!("{} at seq {}", r.design, r.seq_len));
                let m = crate::area::map_design(&r.config, lib, label, r.config.clock_mhz, true)?;
                done.push((key, m));
                done.len() - 1
            }
        };
        let silicon = done[at].1.price(density, utilization, r.stacked_banks);
        let tokens = r.tokens as f64;
        let clock_mhz = match (clock, silicon.fmax_mhz) {
            (RowClock::Config, _) => r.config.clock_mhz,
            (RowClock::Synth, Some(f)) => f,
            (RowClock::Synth, None) => anyhow::bail!(
                "--clock synth: nothing of {} was timed at {}, so it has no fmax",
                r.design,
                label.0
            ),
        };
        let seconds = r.cycles.max(1) as f64 / (clock_mhz * 1e6);
        let tokens_per_s = tokens / seconds;
        r.area = Some(IsoArea {
            tokens_per_s_per_mm2: tokens_per_s / silicon.footprint_mm2.max(f64::MIN_POSITIVE),
            tokens_per_s_per_silicon_mm2: tokens_per_s / silicon.silicon_mm2.max(f64::MIN_POSITIVE),
            tokens_per_s,
            clock_mhz,
            iso_area_vs_buf2d: 0.0,
            iso_silicon_vs_buf2d: 0.0,
            nj_per_token: r.energy.pj_per_token * 1e-3,
            silicon,
        });
    }
    // Against the buf2d row that heads each (length, hierarchy) set.
    let (mut base, mut base_si) = (0.0, 0.0);
    for r in rows.iter_mut() {
        let a = r.area.as_mut().expect("priced above");
        if r.design.starts_with("buf2d") {
            (base, base_si) = (a.tokens_per_s_per_mm2, a.tokens_per_s_per_silicon_mm2);
        }
        a.iso_area_vs_buf2d = a.tokens_per_s_per_mm2 / f64::max(base, f64::MIN_POSITIVE);
        a.iso_silicon_vs_buf2d =
            a.tokens_per_s_per_silicon_mm2 / f64::max(base_si, f64::MIN_POSITIVE);
    }
    Ok(())
}

/// The iso-area table of rows priced by [`iso_area`], with iso-PE's speedup beside it.
pub fn iso_area_table(rows: &[CompareRow]) -> String {
    let Some(first) = rows.iter().find_map(|r| r.area.as_ref()) else {
        return String::new();
    };
    let s0 = &first.silicon;
    let mut s = format!(
        "\nIso-area at {} ({}): synthesis-level standard cells (Yosys + ABC, no placement; \
         `cells mm²` as mapped), placed at {:.0} % utilization in the tiers (--utilization), plus \
         SRAM macros at {:.3} mm² per MiB and {:.0} µm² a macro ({})\n\n\
         | design | seq | cells mm² | SRAM macros mm² | tiers (mm²) | silicon mm² | footprint mm² \
         | tokens/s per mm² of footprint | iso-footprint vs buf2d | tokens/s per mm² of silicon \
         | iso-silicon vs buf2d | iso-PE speedup vs buf2d | energy per token (nJ) \
         | fmax (synthesis) MHz | clock MHz |\n\
         |---|---|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n",
        s0.library,
        s0.node,
        100.0 * s0.utilization,
        s0.density.mm2_per_mib,
        s0.density.macro_um2,
        s0.density.source
    );
    for r in rows {
        let Some(a) = &r.area else { continue };
        let si = &a.silicon;
        let tiers: Vec<String> = si
            .tiers
            .iter()
            .map(|(t, mm2)| format!("{t}: {mm2:.3}"))
            .collect();
        s += &format!(
            "| {} | {} | {:.3} | {:.3} | {} | {:.3} | {:.3} | {:.3e} | {:.3} | {:.3e} | {:.3} | {:.3} | {:.3} | {} | {:.0} |\n",
            r.design,
            seq_label(r),
            si.cells_mm2,
            si.macros_mm2,
            tiers.join("; "),
            si.silicon_mm2,
            si.footprint_mm2,
            a.tokens_per_s_per_mm2,
            a.iso_area_vs_buf2d,
            a.tokens_per_s_per_silicon_mm2,
            a.iso_silicon_vs_buf2d,
            r.speedup_vs_buf2d,
            a.nj_per_token,
            si.fmax_mhz.map_or("-".into(), |f| format!("{f:.0}")),
            a.clock_mhz,
        );
    }
    s += "\nTokens/s at the clock column's: the configuration's, every design alike (the \
          synthesis-level design fmax, the slowest block's, beside it), or with --clock synth \
          each design's own fmax; per mm² of footprint: a stack's largest tier; per mm² of \
          silicon: every tier added. iso-footprint and iso-silicon vs buf2d: tokens/s per mm² \
          of each over buf2d's at the same length and hierarchy, the speedup at equal \
          footprint and at equal silicon (a stack's tiers each cost silicon); iso-PE speedup: \
          cycles against buf2d's on the same PEs per tier (docs/asic.md).\n";
    s
}

impl CompareRow {
    /// Simulated and correct (true), simulated and wrong (false), or not simulated.
    pub fn passed(&self) -> Option<bool> {
        self.report.as_ref().map(|r| r.passed)
    }
}

/// What to compare.
#[derive(Clone, Debug)]
pub struct ComparePlan {
    pub config: CoreConfig,
    pub seq_lens: Vec<usize>,
    pub causal: bool,
    pub heads: usize,
    /// K/V heads (grouped-query attention when fewer than `heads`, a divisor of it).
    pub kv_heads: usize,
    pub seed: u64,
    pub timing: MemoryTiming,
    pub table: EnergyTable,
    /// Longer sequences are not simulated: their rows come from the schedule and the cycle
    /// model.
    pub max_sim_seq: usize,
    /// rowfused (spill)'s S arrays: rows of this many keys.
    pub spill_keys: u32,
}

/// Runs every (sequence length, RTL run) once, two at a time on a machine with two cores
/// or more, and prices each design; `each` sees a run's report as it finishes.
pub fn run(plan: &ComparePlan, each: impl Fn(&SimReport) + Sync) -> Result<Vec<CompareRow>> {
    ensure!(!plan.seq_lens.is_empty(), "no sequence length to compare");
    check_groups(plan.heads, plan.kv_heads)?;
    let configs = designs(plan);
    // Every point is checked before the first runs.
    let modelled = check_plan(plan, &configs)?;
    let params: Vec<hdl::core::CoreParams> = configs
        .iter()
        .map(|(_, c)| hdl::core::CoreParams::from_config(c))
        .collect::<Result<_>>()?;
    let simulated = |s: usize| plan.seq_lens[s] <= plan.max_sim_seq;
    let jobs: Vec<(usize, usize)> = (0..plan.seq_lens.len())
        .filter(|&s| simulated(s))
        .flat_map(|s| (0..configs.len()).map(move |c| (s, c)))
        .collect();
    let problem = |seq: usize| {
        sim::random_problem(
            plan.heads,
            seq,
            plan.config.head_dim as usize,
            plan.causal,
            OutFormat::Short,
            plan.seed,
        )
        .grouped(plan.kv_heads)
        .converted(plan.config.in_format)
    };
    let problems: Vec<_> = (0..plan.seq_lens.len())
        .map(|s| simulated(s).then(|| problem(plan.seq_lens[s])))
        .collect();
    let results = parallel(&jobs, |&(s, c)| {
        let a = problems[s].as_ref().expect("a simulated length");
        let cfg = &configs[c].1;
        let (report, _) = sim::run(cfg, a, &plan.timing, |_, _| {}).map_err(|e| {
            e.context(format!(
                "{} as {} at seq {}",
                cfg.name, cfg.variant, plan.seq_lens[s]
            ))
        })?;
        each(&report);
        Ok(report)
    })?;
    let runs = Runs {
        plan,
        configs: &configs,
        params: &params,
        modelled: &modelled,
        jobs: &jobs,
        results: &results,
    };
    let mut rows = Vec::new();
    for (s, &seq) in plan.seq_lens.iter().enumerate() {
        let mut at_seq: Vec<CompareRow> = DESIGNS
            .iter()
            .filter_map(|&design| runs.row(s, seq, design))
            .collect();
        relative_to_first(&mut at_seq);
        rows.extend(at_seq);
    }
    // A stop leaves the cycle model's rows partial (`crate::watch`).
    crate::watch::check()?;
    Ok(rows)
}

/// The designs a plan compares, each with its configuration: buf2d, reg2d, reg3d, noc2d,
/// reg3d at iso PEs where it exists, unfused, rowfused (spill), and last rowfused sized for the
/// longest simulated length (its counters do not depend on the S arrays' depth; each length
/// is priced as the design sized for it).
fn designs(plan: &ComparePlan) -> Vec<(RunKind, CoreConfig)> {
    let variant = |v: VariantKind| plan.config.with_variant(v);
    let mut configs: Vec<(RunKind, CoreConfig)> = vec![
        (RunKind::Buf2d, variant(VariantKind::Buf2d)),
        (RunKind::Reg2d, variant(VariantKind::Reg2d)),
        (RunKind::Reg3d, variant(VariantKind::Reg3d)),
        (RunKind::Noc2d, variant(VariantKind::Noc2d)),
    ];
    if let Some(c) = iso_pe_config(&plan.config) {
        configs.push((RunKind::Reg3dIso, c));
    }
    configs.push((RunKind::Unfused, variant(VariantKind::Unfused)));
    configs.push((
        RunKind::RowfusedSpill,
        spill_config(&plan.config, plan.spill_keys),
    ));
    // rowfused simulated with rows of the longest simulated length (its counters do not
    // depend on the S arrays' depth), each length priced as the design sized for it.
    let longest_sim = plan
        .seq_lens
        .iter()
        .copied()
        .filter(|&n| n <= plan.max_sim_seq)
        .max()
        .unwrap_or(1);
    configs.push((
        RunKind::Rowfused,
        rowfused_config(&plan.config, longest_sim),
    ));
    configs
}

/// A design's configuration at a length beyond simulation, as checked for it: (the
/// configuration, its parameters, whether its registers were widened for the length).
type Modelled = BTreeMap<(usize, usize), (CoreConfig, hdl::core::CoreParams, bool)>;

/// Checks every point of the plan before the first run: the simulated lengths as `bench`
/// checks them, and each length beyond simulation with each design on index and address
/// registers wide enough for it (no cycle depends on them), as `estimate` checks them.
fn check_plan(plan: &ComparePlan, configs: &[(RunKind, CoreConfig)]) -> Result<Modelled> {
    let cfgs: Vec<CoreConfig> = configs.iter().map(|(_, c)| c.clone()).collect();
    let fused = &cfgs[..cfgs.len() - 1];
    let (sim_lens, model_lens): (Vec<usize>, Vec<usize>) =
        plan.seq_lens.iter().partition(|&&n| n <= plan.max_sim_seq);
    crate::bench::check_points(fused, &sim_lens, plan.heads, &plan.timing)?;
    for &seq in &sim_lens {
        let sized = rowfused_config(&plan.config, seq);
        crate::bench::check_points(&[sized], &[seq], plan.heads, &plan.timing)?;
    }
    // Lengths beyond simulation: each design on index and address registers wide enough for
    // the length (no cycle depends on them), checked as `estimate` checks them.
    let mut modelled = BTreeMap::new();
    for &seq in &model_lens {
        for (c, (kind, cfg)) in configs.iter().enumerate() {
            let mut w = match kind {
                RunKind::Rowfused => rowfused_config(&plan.config, seq),
                RunKind::Buf2d
                | RunKind::Reg2d
                | RunKind::Reg3d
                | RunKind::Noc2d
                | RunKind::Reg3dIso
                | RunKind::RowfusedSpill
                | RunKind::Unfused => cfg.clone(),
            };
            let widened = crate::bench::widen(&mut w, plan.heads, seq).is_some();
            w.validate()
                .with_context(|| format!("{} as {}", w.name, w.variant.label()))?;
            let p = hdl::core::CoreParams::from_config(&w)?;
            crate::verify::attention::check_core_shape(
                &p,
                plan.heads,
                seq,
                seq,
                w.head_dim as usize,
                OutFormat::Short,
            )
            .with_context(|| format!("{} at seq {seq} ({})", w.name, w.variant))?;
            modelled.insert((seq, c), (w, p, widened));
        }
    }
    Ok(modelled)
}

/// A plan's RTL runs and the configurations behind them, from which each row is priced.
struct Runs<'a> {
    plan: &'a ComparePlan,
    configs: &'a [(RunKind, CoreConfig)],
    params: &'a [hdl::core::CoreParams],
    modelled: &'a Modelled,
    /// (length index, design index) of each RTL run, and its report.
    jobs: &'a [(usize, usize)],
    results: &'a [SimReport],
}

impl Runs<'_> {
    /// The row of `design` at the plan's `s`-th length `seq`: from its RTL run where it was
    /// simulated, else from the schedule's counts and the cycle model's timing (no random
    /// memory stalls in a compare plan). None for a design the plan does not run.
    fn row(&self, s: usize, seq: usize, (name, kind, stacked): DesignRow) -> Option<CompareRow> {
        let (plan, configs, params) = (self.plan, self.configs, self.params);
        let sh = crate::schedule::Shape {
            heads: plan.heads,
            q_len: seq,
            k_len: seq,
            head_dim: plan.config.head_dim as usize,
            causal: plan.causal,
            out_bytes: 2,
            kv_group: plan.heads / plan.kv_heads.max(1),
        };
        let mem = plan.timing.model_timing();
        let c = configs.iter().position(|(k, _)| *k == kind)?;
        let (cfg, p) = (&configs[c].1, &params[c]);
        let sized = (kind == RunKind::Rowfused).then(|| rowfused_config(&plan.config, seq));
        let cfg = sized.as_ref().unwrap_or(cfg);
        // A modelled length: the design as checked for it (wider registers if needed).
        let (cfg, p, widened) = match self.modelled.get(&(seq, c)) {
            Some((w, wp, widened)) => (w, wp, *widened),
            None => (cfg, p, false),
        };
        let (qk, pv) = p.block_steps();
        let steps = if p.row.concurrent_phases() {
            sh.blocks(p).0 * qk.max(pv) as u64
        } else {
            sh.mac_steps(p)
        };
        let report = self
            .jobs
            .iter()
            .position(|&job| job == (s, c))
            .map(|j| self.results[j].clone());
        let (counters, source) = match &report {
            Some(r) => (r.counters.clone(), "rtl".to_string()),
            None => {
                let (c, method) = crate::cycles::counters(p, &sh, mem);
                let how = match method {
                    crate::cycles::Method::Exact => "model",
                    crate::cycles::Method::Extrapolated { .. } => "model (extrapolated)",
                };
                let wide = if widened { ", widened" } else { "" };
                (c, format!("{how}{wide}"))
            }
        };
        let tokens = (plan.heads * seq) as u64;
        let energy = crate::pricing::report(&plan.table, cfg, &counters, tokens, stacked);
        let report = report.map(|mut r| {
            r.energy = Some(energy.clone());
            r
        });
        Some(CompareRow {
            config: cfg.clone(),
            stacked_banks: stacked,
            area: None,
            tokens,
            design: name.into(),
            seq_len: seq,
            causal: plan.causal,
            kv_heads: plan.kv_heads,
            pes: crate::pricing::geometry(cfg, stacked).pes,
            cycles: counters["cycles"],
            source,
            mac_steps: steps,
            speedup_vs_buf2d: 0.0,
            energy_vs_buf2d: 0.0,
            energy_reduction_vs_buf2d: 0.0,
            on_chip_reduction_vs_buf2d: 0.0,
            energy,
            counters,
            passed: report.as_ref().map(|r| r.passed),
            report,
        })
    }
}

/// Each row's speed and energy against the first's (buf2d at the same length).
fn relative_to_first(at_seq: &mut [CompareRow]) {
    let Some(base) = at_seq.first() else {
        return;
    };
    let (base_cycles, base_pj, base_chip) =
        (base.cycles, base.energy.total_pj, base.energy.on_chip_pj);
    for r in at_seq {
        r.speedup_vs_buf2d = base_cycles as f64 / r.cycles.max(1) as f64;
        r.energy_vs_buf2d = r.energy.total_pj / base_pj.max(f64::MIN_POSITIVE);
        r.energy_reduction_vs_buf2d = 1.0 - r.energy.total_pj / base_pj.max(f64::MIN_POSITIVE);
        r.on_chip_reduction_vs_buf2d = 1.0 - r.energy.on_chip_pj / base_chip.max(f64::MIN_POSITIVE);
    }
}

/// `rows` priced again under `table`, from their own counters: the same runs under another
/// energy table (`--energy gates` puts its verdicts beside the sourced table's). Each length's
/// rows (and with `--glb both` each hierarchy's) are again relative to their buf2d.
pub fn repriced(rows: &[CompareRow], table: &EnergyTable) -> Vec<CompareRow> {
    let mut out: Vec<CompareRow> = rows
        .iter()
        .map(|r| CompareRow {
            energy: crate::pricing::report(
                table,
                &r.config,
                &r.counters,
                r.tokens,
                r.stacked_banks,
            ),
            ..r.clone()
        })
        .collect();
    let mut start = 0;
    while start < out.len() {
        let key = |r: &CompareRow| (r.seq_len, r.design.ends_with(" (no GLB)"));
        let k = key(&out[start]);
        let end = start + out[start..].iter().take_while(|r| key(r) == k).count();
        relative_to_first(&mut out[start..end]);
        start = end;
    }
    out
}

/// Each design's energy per token under two tables (`a`, the sourced table; `b`, the
/// gate-level one's), and the ratio b / a, in all and for the components the gate level
/// prices.
pub fn both_tables(a: &[CompareRow], b: &[CompareRow]) -> String {
    let mut s = String::from(
        "\nEnergy per token under the sourced table and at gate level (`--energy gates`: the PE \
         and its row engine measured), and their ratio, in all and per component the gate level \
         prices:\n\n\
         | design | seq | sourced (nJ/token) | gate level (nJ/token) | ratio | MAC | PE regs | \
         softmax | P regs | static |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n",
    );
    for (x, y) in a.iter().zip(b) {
        let ratio = |k: &str| {
            let (p, q) = (x.energy.components_pj[k], y.energy.components_pj[k]);
            if p > 0.0 {
                format!("{:.2}", q / p)
            } else {
                "—".into()
            }
        };
        s += &format!(
            "| {} | {} | {:.2} | {:.2} | {:.2} | {} | {} | {} | {} | {} |\n",
            x.design,
            seq_label(x),
            x.energy.pj_per_token * 1e-3,
            y.energy.pj_per_token * 1e-3,
            y.energy.total_pj / x.energy.total_pj.max(f64::MIN_POSITIVE),
            ratio("mac"),
            ratio("pe_registers"),
            ratio("softmax"),
            ratio("p_registers"),
            ratio("static")
        );
    }
    s
}

/// `f` over `jobs` on up to two threads (the runs are single-threaded simulations), results
/// in job order; the first error stops the rest.
fn parallel<J: Sync, R: Send>(jobs: &[J], f: impl Fn(&J) -> Result<R> + Sync) -> Result<Vec<R>> {
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    use std::sync::Mutex;
    let workers = std::thread::available_parallelism().map_or(1, |n| n.get().min(2));
    let next = AtomicUsize::new(0);
    let failed = AtomicBool::new(false);
    let out: Mutex<Vec<Option<Result<R>>>> = Mutex::new((0..jobs.len()).map(|_| None).collect());
    std::thread::scope(|sc| {
        for _ in 0..workers {
            sc.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::SeqCst);
                if i >= jobs.len() || failed.load(Ordering::SeqCst) {
                    break;
                }
                let r = f(&jobs[i]);
                if r.is_err() {
                    failed.store(true, Ordering::SeqCst);
                }
                out.lock().expect("no worker panics holding it")[i] = Some(r);
            });
        }
    });
    let out = out.into_inner().expect("no worker panicked");
    // The first error in job order, before any job left unstarted because of it.
    if let Some(i) = out.iter().position(|r| matches!(r, Some(Err(_)))) {
        let mut out = out;
        return Err(out[i].take().expect("an error").err().expect("an error"));
    }
    out.into_iter()
        .map(|r| r.ok_or_else(|| anyhow::anyhow!("a run was not started")))
        .map(|r| r.and_then(|x| x))
        .collect()
}

/// The components in the table's column order, with their headings.
const COLUMNS: [(&str, &str); 17] = [
    ("mac", "MAC"),
    ("pe_registers", "PE regs"),
    ("p_registers", "P regs"),
    ("sram", "SRAM"),
    ("buffer_transport", "buffer wire/bond"),
    ("glb", "GLB"),
    ("glb_transport", "GLB wire/bond"),
    ("softmax", "softmax"),
    ("landing", "landing"),
    ("staging", "staging"),
    ("broadcast", "broadcast"),
    ("vertical_links", "vertical links"),
    ("noc", "NoC routers"),
    ("noc_links", "NoC links"),
    ("dram", "DRAM"),
    ("static", "static"),
    ("leakage", "SRAM leakage"),
];

/// The components by kind: DRAM, the SRAM levels (accesses and leakage), registers and
/// register arrays, wires and bonds, logic.
pub const KINDS: [(&str, &[&str]); 5] = [
    ("DRAM", &["dram"]),
    ("SRAM levels", &["sram", "glb", "leakage"]),
    (
        "registers",
        &["pe_registers", "p_registers", "landing", "staging", "noc"],
    ),
    (
        "wires",
        &[
            "broadcast",
            "buffer_transport",
            "glb_transport",
            "vertical_links",
            "noc_links",
        ],
    ),
    ("logic", &["mac", "softmax", "static"]),
];

/// With the GLB the configuration gives, without one, or both (`compare --glb`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "cli", derive(clap::ValueEnum))]
pub enum GlbRuns {
    #[default]
    Config,
    None,
    Both,
}

/// The memory hierarchy of `cfg`'s rows in words ("a 4 MiB stacked GLB, DRAM behind it"),
/// the claims table's hierarchy column (with `glb` none: no GLB).
pub fn hierarchy(cfg: &CoreConfig, glb: GlbRuns) -> String {
    let g = &cfg.glb;
    match g.present() && glb != GlbRuns::None {
        true => format!(
            "a {} {} GLB, DRAM behind it",
            match g.bytes % (1 << 20) {
                0 => format!("{} MiB", g.bytes >> 20),
                _ => format!("{} KiB", g.bytes / 1024),
            },
            format!("{:?}", g.placement).to_lowercase()
        ),
        false => "no GLB: DRAM behind the landing buffers".into(),
    }
}

/// [`run`] with the plan's GLB, without it, or both: with both, the rows without the GLB
/// follow each length's rows with it, their designs named "... (no GLB)", each set compared
/// with its own buf2d.
pub fn run_glb(
    plan: &ComparePlan,
    glb: GlbRuns,
    each: impl Fn(&SimReport) + Sync,
) -> Result<Vec<CompareRow>> {
    let without = || {
        let mut p = plan.clone();
        p.config.glb.bytes = 0;
        p
    };
    match glb {
        GlbRuns::Config => run(plan, each),
        GlbRuns::None => run(&without(), each),
        GlbRuns::Both => {
            ensure!(
                plan.config.glb.present(),
                "--glb both compares the configuration's GLB with none, but it has none: set \
                 glb_bytes (or --glb-bytes), or use a preset with one (seed, npu16)"
            );
            let with = run(plan, &each)?;
            let mut no = run(&without(), &each)?;
            for r in &mut no {
                r.design += " (no GLB)";
            }
            let mut rows = vec![];
            for &seq in &plan.seq_lens {
                rows.extend(with.iter().filter(|r| r.seq_len == seq).cloned());
                rows.extend(no.iter().filter(|r| r.seq_len == seq).cloned());
            }
            Ok(rows)
        }
    }
}

/// The markdown tables of `rows` (the comparison, then the energy by component), with a
/// legend.
pub fn table(rows: &[CompareRow], cfg: &CoreConfig, t: &EnergyTable) -> String {
    let mut s = format!(
        "`regflash compare`: preset {} ({}×{} PEs, Br {} Bc {} d {}), {} MHz; energy at {}\n\n\
         | design | seq | PEs | cycles | speedup vs buf2d | energy (µJ) | on chip (µJ) | \
         reduction vs buf2d (total / on chip) | SRAM share (total / on chip) | pJ per MAC | \
         bit-exact | from |\n\
         |---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---|\n",
        cfg.name,
        cfg.rows,
        cfg.cols,
        cfg.br,
        cfg.bc,
        cfg.head_dim,
        cfg.clock_mhz,
        t.basis()
    );
    let seq = seq_label;
    for r in rows {
        let e = &r.energy;
        s += &format!(
            "| {} | {} | {} | {} | {:.3} | {:.1} | {:.1} | {:.1} % / {:.1} % | {:.1} % / {:.1} % \
             | {:.2} | {} | {} |\n",
            r.design,
            seq(r),
            r.pes,
            r.cycles,
            r.speedup_vs_buf2d,
            e.total_pj * 1e-6,
            e.on_chip_pj * 1e-6,
            100.0 * r.energy_reduction_vs_buf2d,
            100.0 * r.on_chip_reduction_vs_buf2d,
            100.0 * e.sram_share,
            100.0 * e.sram_share_on_chip,
            e.pj_per_mac,
            match r.passed() {
                Some(true) => "yes",
                Some(false) => "**NO**",
                None => "—",
            },
            r.source
        );
    }
    let headings: Vec<&str> = COLUMNS.iter().map(|c| c.1).collect();
    s += &per_row("Energy by component (µJ)", &headings, rows, |r| {
        COLUMNS
            .iter()
            .map(|(k, _)| format!("{:.2}", r.energy.components_pj[*k] * 1e-6))
            .collect()
    });
    let kinds: Vec<&str> = KINDS.iter().map(|k| k.0).collect();
    s += &per_row("Energy by kind (share of the total)", &kinds, rows, |r| {
        let total = r.energy.total_pj.max(f64::MIN_POSITIVE);
        KINDS
            .iter()
            .map(|(_, parts)| {
                let pj: f64 = parts.iter().map(|p| r.energy.components_pj[*p]).sum();
                format!("{:.1} %", 100.0 * pj / total)
            })
            .collect()
    });
    s += "\nrtl rows' counters come from a Verilator run of the generated RTL, bit-checked \
          against the hardware model and the f64 reference; model rows (longer than \
          --max-sim-seq) take the counts the schedule fixes from the shape alone (analysis/src/schedule.rs) \
          and the cycles and stalls of the cycle model (analysis/src/cycles.rs), which every RTL run must \
          match exactly (\"extrapolated\": fitted to shorter exact runs of the model; \"widened\": \
          on index or address registers wider than the configuration's, which the length needs \
          and no cycle depends on); energy = Σ counter × \
          per-event energy of the table (kernels/src/energy.rs, or --energy). 3-D buffered is \
          buf2d's run with its banks priced as stacked SRAM (the macro's access plus a \
          hybrid-bond crossing per bit). GLB: the global buffer's bank accesses (hits and \
          fills) and their bond or wire (docs/glb.md). On chip: all but DRAM, which every \
          design of one hierarchy moves alike. PEs counts every PE tier: reg3d has twice the MACs of the 2-D designs (iso \
          PEs per tier); reg3d iso-PE is reg3d with half the PEs per tier (half the columns, \
          or the rows), as many in total as the 2-D array. rowfused is the row-materializing \
          baseline (docs/baselines.md): its S arrays hold a tile's whole rows of S, sized for \
          each length (its counters do not depend on the size; its energy does); rowfused \
          (spill) has S arrays of a fixed --spill-keys keys a row and sends the blocks of a \
          row past them through the scratch region (the GLB's upper half as far as it \
          reaches, then DRAM) and back. speedup and energy reduction are against buf2d at the \
          same sequence length.\n";
    s
}

/// A row's length, and "causal" when it is.
fn seq_label(r: &CompareRow) -> String {
    format!("{}{}", r.seq_len, if r.causal { " causal" } else { "" })
}

/// A markdown table titled `title`: a row per design and length, with a cell per heading.
fn per_row(
    title: &str,
    headings: &[&str],
    rows: &[CompareRow],
    cells: impl Fn(&CompareRow) -> Vec<String>,
) -> String {
    let mut s = format!("\n{title}:\n\n| design | seq |");
    for h in headings {
        s += &format!(" {h} |");
    }
    s += "\n|---|---:|";
    s += &"---:|".repeat(headings.len());
    s += "\n";
    for r in rows {
        s += &format!("| {} | {} |", r.design, seq_label(r));
        for c in cells(r) {
            s += &format!(" {c} |");
        }
        s += "\n";
    }
    s
}

/// A figure of a row against its base design's row at the same length.
#[cfg(feature = "cli")]
type Pick = fn(&CompareRow, &CompareRow) -> f64;

/// The published claims drawn as bands on the energy plot: (label, low, high) energy
/// reduction against a buffered design.
pub const CLAIMS: [(&str, f64, f64); 2] = [
    ("3D-Flow: 46-93 % energy cut", 0.46, 0.93),
    ("2-3x energy efficiency (seq > 8192)", 0.5, 2.0 / 3.0),
];

/// An SVG with three panels against sequence length: energy reduction against `base` (buf2d,
/// or with `--claims` rowfused), total and on-chip (with the published claims as bands), and
/// speedup against it, one line per design.
#[cfg(feature = "cli")]
pub fn plot(rows: &[CompareRow], path: &std::path::Path, base: &str) -> Result<()> {
    use plotters::prelude::*;
    let seqs: Vec<usize> = {
        let mut s: Vec<usize> = rows.iter().map(|r| r.seq_len).collect();
        s.sort_unstable();
        s.dedup();
        s
    };
    ensure!(!seqs.is_empty(), "nothing to plot");
    let x_of = |n: usize| (n as f64).log2();
    let (x0, x1) = (x_of(seqs[0]) - 0.25, x_of(*seqs.last().unwrap()) + 0.25);
    let root = SVGBackend::new(path, (1500, 460)).into_drawing_area();
    let draw_err = |e: &dyn std::fmt::Display| anyhow::anyhow!("plot {}: {e}", path.display());
    root.fill(&WHITE).map_err(|e| draw_err(&e))?;
    let panels = root.split_evenly((1, 3));
    // One per design (the array's length is the table's: a new design needs its colour).
    let colors: [RGBColor; DESIGNS.len()] = [
        RED,
        MAGENTA,
        BLUE,
        GREEN,
        BLACK,
        RGBColor(150, 90, 0),
        RGBColor(230, 150, 30),
        RGBColor(0, 120, 120),
        RGBColor(120, 60, 200),
    ];
    // The base design's row at a row's length.
    let base_of = |r: &CompareRow| {
        rows.iter()
            .find(|b| b.design == base && b.seq_len == r.seq_len)
    };
    let max_speed = rows
        .iter()
        .filter_map(|r| Some(base_of(r)?.cycles as f64 / r.cycles.max(1) as f64))
        .fold(1.0, f64::max);
    // (x, y, simulated) per point of a design.
    let series = |f: Pick, name: &str| -> Vec<(f64, f64, bool)> {
        rows.iter()
            .filter(|r| r.design == name)
            .filter_map(|r| Some((r.seq_len, (f(r, base_of(r)?), r.report.is_some()))))
            .filter(|p| p.1 .0.is_finite())
            // In length order, whatever the order of --seq.
            .collect::<BTreeMap<_, _>>()
            .into_iter()
            .map(|(n, (y, sim))| (x_of(n), y, sim))
            .collect()
    };
    let titles = [
        format!("energy reduction vs {base} (%)"),
        format!("on-chip energy reduction vs {base} (%)"),
        format!("speedup vs {base}"),
    ];
    let specs: [(&str, Pick, (f64, f64)); 3] = [
        (
            &titles[0],
            |r, b| 100.0 * (1.0 - r.energy.total_pj / b.energy.total_pj.max(f64::MIN_POSITIVE)),
            (-10.0, 100.0),
        ),
        (
            &titles[1],
            |r, b| 100.0 * (1.0 - r.energy.on_chip_pj / b.energy.on_chip_pj.max(f64::MIN_POSITIVE)),
            (-10.0, 100.0),
        ),
        (
            &titles[2],
            |r, b| b.cycles as f64 / r.cycles.max(1) as f64,
            (0.0, (max_speed * 1.2).ceil()),
        ),
    ];
    for (k, (title, pick, (y0, y1))) in specs.iter().enumerate() {
        // Room for a design far below the base (rowfused against buf2d).
        let lowest = DESIGNS
            .iter()
            .flat_map(|d| series(*pick, d.0))
            .map(|p| p.1)
            .fold(*y0, f64::min);
        let y0 = if lowest < *y0 {
            (lowest / 10.0).floor() * 10.0
        } else {
            *y0
        };
        let mut chart = ChartBuilder::on(&panels[k])
            .caption(*title, ("sans-serif", 18))
            .margin(12)
            .x_label_area_size(36)
            .y_label_area_size(48)
            .build_cartesian_2d(x0..x1, y0..*y1)
            .map_err(|e| draw_err(&e))?;
        chart
            .configure_mesh()
            .x_desc("sequence length (filled: simulated RTL; hollow: schedule and cycle model)")
            // Labels at the powers of two only.
            .x_label_formatter(&|x| {
                if (x - x.round()).abs() < 1e-6 {
                    format!("{:.0}", x.round().exp2())
                } else {
                    String::new()
                }
            })
            .x_labels((4.0 * (x1 - x0)) as usize + 1)
            .draw()
            .map_err(|e| draw_err(&e))?;
        if k < 2 {
            for (i, (label, lo, hi)) in CLAIMS.iter().enumerate() {
                let c = if i == 0 { &CYAN } else { &YELLOW };
                chart
                    .draw_series(std::iter::once(Rectangle::new(
                        [(x0, 100.0 * lo), (x1, 100.0 * hi)],
                        c.mix(0.18).filled(),
                    )))
                    .map_err(|e| draw_err(&e))?
                    .label(*label)
                    .legend(move |(x, y)| {
                        Rectangle::new([(x, y - 5), (x + 14, y + 5)], c.mix(0.4).filled())
                    });
            }
        }
        for (i, (name, _, _)) in DESIGNS.iter().enumerate() {
            let c = colors[i];
            let pts = series(*pick, name);
            let line: Vec<(f64, f64)> = pts.iter().map(|p| (p.0, p.1)).collect();
            chart
                .draw_series(LineSeries::new(line, c.stroke_width(2)))
                .map_err(|e| draw_err(&e))?
                .label(*name)
                .legend(move |(x, y)| PathElement::new([(x, y), (x + 14, y)], c.stroke_width(2)));
            chart
                // Filled: simulated (rtl); hollow: the schedule and the cycle model.
                .draw_series(pts.iter().map(|&(x, y, sim)| {
                    let style = if sim { c.filled() } else { c.stroke_width(2) };
                    Circle::new((x, y), if sim { 3 } else { 5 }, style)
                }))
                .map_err(|e| draw_err(&e))?;
        }
        draw_legend(&mut chart).map_err(|e| draw_err(&e))?;
    }
    root.present().map_err(|e| draw_err(&e))?;
    Ok(())
}

/// A panel's legend, as every plot here draws it: upper left, on white.
#[cfg(feature = "cli")]
pub(crate) fn draw_legend<'a, DB: plotters::prelude::DrawingBackend + 'a>(
    chart: &mut plotters::prelude::ChartContext<
        'a,
        DB,
        plotters::prelude::Cartesian2d<
            plotters::coord::types::RangedCoordf64,
            plotters::coord::types::RangedCoordf64,
        >,
    >,
) -> Result<(), plotters::drawing::DrawingAreaErrorKind<DB::ErrorType>> {
    use plotters::prelude::*;
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .position(SeriesLabelPosition::UpperLeft)
        .draw()
}
