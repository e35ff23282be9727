//! `regflash compare`: buf2d, 3-D buffered, reg2d, reg3d, rowfused and unfused on the same
//! problems, cycles and energy from the RTL's counters.

use super::*;

#[derive(Args, Debug)]
// compare runs every variant: the shared `--variant` override is refused, so not offered.
#[command(mut_arg("variant", |a| a.hide(true)))]
pub struct CompareArgs {
    #[command(flatten)]
    pub config: ConfigArgs,
    /// Sequence lengths, comma separated.
    /// (Default 512,1024,2048; with --workload 2048,4096,8192,16384.)
    #[arg(long, value_delimiter = ',')]
    pub seq: Vec<usize>,
    /// Causal masking.
    #[arg(long)]
    pub causal: bool,
    /// A model family's attention, as 3D-Flow evaluates it: opt (d = 64, 32 heads, multi-head)
    /// or qwen (d = 128, 28 query heads on 4 K/V heads). Sets head_dim, --heads and
    /// --kv-heads, and unless --seq is given the lengths 2048,4096,8192,16384; model rows
    /// unless --max-sim-seq says otherwise.
    #[arg(long, value_parser = ["opt", "qwen"])]
    pub workload: Option<String>,
    /// K/V heads, for grouped-query attention (a divisor of --heads; default: --heads, one
    /// K/V head per query head). Only the GLB's K/V reuse depends on it.
    #[arg(long)]
    pub kv_heads: Option<usize>,
    /// Sequences in a batch, each with --heads query heads on --kv-heads K/V heads (or the
    /// workload's): the core runs the batch's heads one after another, each sequence's query
    /// heads on its own K/V, and the rows count the batch's tokens.
    #[arg(long, default_value_t = 1)]
    pub batch: usize,
    /// Longer sequences are not simulated: their rows take the counts the schedule fixes and
    /// the cycle model's timing (both of which every simulated run matches exactly).
    /// (Default 4096; with --solve 0: the solver works on the model's counts, which every RTL
    /// run equals.)
    #[arg(long)]
    pub max_sim_seq: Option<usize>,
    #[command(flatten)]
    pub run: RunArgs,
    #[command(flatten)]
    pub energy: super::EnergyArgs,
    /// buf2d's on-chip buffer capacity in bytes, which prices its banks (default: the
    /// config's buf2d.bytes, or the banks sized to fit when that is 0).
    #[arg(long)]
    pub buf_bytes: Option<u64>,
    /// Run with the configuration's global buffer (config), without any (none), or both, to
    /// see the capacity knee; with both the rows without it are named "... (no GLB)".
    #[arg(long, value_enum, default_value = "config")]
    pub glb: crate::compare::GlbRuns,
    /// Override: the global buffer's capacity in bytes (glb_bytes; 0: none).
    #[arg(long)]
    pub glb_bytes: Option<u64>,
    /// rowfused (spill)'s S arrays: rows of this many keys (a power-of-two number of Bc
    /// blocks); the blocks of a row past them spill to the next level. Default: the
    /// configuration's `[rowfused] keys` (1024 unless set).
    #[arg(long)]
    pub spill_keys: Option<u32>,
    /// Write every row as JSON (energies, prices, counters).
    #[arg(long)]
    pub report: Option<PathBuf>,
    /// Write the markdown table here as well as to standard output.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Write an SVG plot of energy reduction and speedup against sequence length, with the
    /// published claims as bands (against buf2d; with --claims against unfused, standard
    /// attention, the baseline the claims name).
    #[arg(long)]
    pub plot: Option<PathBuf>,
    /// Also give the published claims table: each claim against the comparison that
    /// reproduces its kind (which baseline, which hierarchy, which lengths), the figure
    /// measured and a verdict (docs/baselines.md).
    #[arg(long)]
    pub claims: bool,
    /// With --claims: for each claim and baseline, the value of this parameter at which the
    /// verdict flips (dram_pj_per_bit, noc_energy_scale (noc2d's router and link energy as a
    /// factor): repriced; seq_len, head_dim, port_bits, array_side, flit_bits (noc2d's):
    /// through the schedule and the cycle model), with the bound where no value flips it.
    #[arg(long)]
    pub solve: Option<crate::solve::Param>,
    /// With --claims: each claim's figure against the parameter over a range, as an SVG at
    /// --sweep-plot, with the claim's band (PARAM=A..B: dram_pj_per_bit=1..100,
    /// head_dim=32..256, seq_len=512..65536).
    #[arg(long)]
    pub sweep: Option<crate::solve::Sweep>,
    /// Where --sweep writes its SVG.
    #[arg(long)]
    pub sweep_plot: Option<PathBuf>,
    /// How the designs are set side by side: pe (the same PEs per tier: the tables above) or
    /// area (also each design's silicon at a standard-cell library, from the ASIC flow, and
    /// its tokens/s per mm² of footprint and of silicon, and energy per token; docs/asic.md).
    #[arg(long, default_value = "pe", value_parser = ["pe", "area"])]
    pub iso: String,
    #[command(flatten)]
    pub silicon: super::SiliconArgs,
    /// --iso area: the clock behind each design's tokens/s: config (the configuration's
    /// `clock_mhz`, every design alike) or synth (each design's own synthesized fmax at the
    /// library, synthesis-level: designs with different critical paths at their own clocks).
    #[arg(long, default_value = "config", value_parser = ["config", "synth"])]
    pub clock: String,
}

pub(super) fn compare_cmd(args: CompareArgs) -> Result<ExitCode> {
    use crate::compare;
    args.run.check()?;
    for path in args
        .out
        .iter()
        .chain(&args.report)
        .chain(&args.plot)
        .chain(&args.sweep_plot)
    {
        check_writable(path)?;
    }
    anyhow::ensure!(
        (args.solve.is_none() && args.sweep.is_none()) || args.claims,
        "--solve and --sweep follow the claims' verdicts: add --claims"
    );
    anyhow::ensure!(
        args.sweep.is_some() == args.sweep_plot.is_some(),
        "--sweep draws an SVG: give both --sweep PARAM=A..B and --sweep-plot PATH"
    );
    anyhow::ensure!(
        args.config.variant.is_none(),
        "compare runs every variant (buf2d, reg2d, reg3d, rowfused, unfused): drop --variant"
    );
    let mut config = args.config.resolve()?;
    // A workload: its head size and heads, and its lengths unless --seq gives them.
    let workload = args
        .workload
        .as_deref()
        .and_then(|w| compare::WORKLOADS.iter().find(|x| x.0 == w).copied());
    anyhow::ensure!(
        workload.is_none() || (args.kv_heads.is_none() && args.run.heads == 1),
        "--workload sets the heads and K/V heads: drop --heads and --kv-heads"
    );
    let (heads, kv_heads) = match workload {
        Some((name, d, h, kv)) => {
            config.head_dim = d;
            config.validate().with_context(|| {
                format!("--workload {name}: the configuration at head_dim = {d}")
            })?;
            (h, kv)
        }
        None => (args.run.heads, args.kv_heads.unwrap_or(args.run.heads)),
    };
    let (heads, kv_heads) = compare::batched(heads, kv_heads, args.batch)?;
    let seq_lens = match (args.seq.is_empty(), workload) {
        (false, _) => args.seq.clone(),
        (true, Some(_)) => compare::WORKLOAD_SEQS.to_vec(),
        (true, None) => vec![512, 1024, 2048],
    };
    if let Some(b) = args.buf_bytes {
        // The buf2d runs' capacity: the base becomes buf2d (its other runs are derived from
        // it by variant, so they are unchanged).
        config = config.with_variant(VariantKind::Buf2d);
        config.buf_mut("--buf-bytes")?.bytes = b;
    }
    if let Some(b) = args.glb_bytes {
        config.glb.bytes = b;
        config.validate()?;
    }
    let area = args.iso == "area";
    anyhow::ensure!(
        area || (!args.silicon.given() && args.clock == "config"),
        "--lib, --liberty, --sram-mm2-per-mib, --utilization and --clock synth price the \
         designs' silicon: add --iso area"
    );
    let clock = match args.clock.as_str() {
        "synth" => compare::RowClock::Synth,
        _ => compare::RowClock::Config,
    };
    let utilization = args.silicon.utilization()?;
    // The library is checked before any run.
    // (The scratch folder holds the decompressed library until the end.)
    let scratch = area
        .then(|| gen::tools::ScratchDir::new("iso-area"))
        .transpose()?;
    let library = match &scratch {
        Some(dir) => Some(args.silicon.resolve(dir.path())?),
        None => None,
    };
    let table = args.energy.table(&config)?;
    let plan = compare::ComparePlan {
        config: config.clone(),
        seq_lens,
        causal: args.causal,
        heads,
        kv_heads,
        seed: args.run.seed,
        timing: args.run.timing(),
        table: table.clone(),
        max_sim_seq: args.max_sim_seq.unwrap_or(
            match args.solve.is_some() || args.sweep.is_some() || workload.is_some() {
                true => 0,
                false => 4096,
            },
        ),
        spill_keys: args
            .spill_keys
            .unwrap_or(config.variant.rowfused().copied().unwrap_or_default().keys),
    };
    let mut rows = compare::run_glb(&plan, args.glb, |r| {
        eprintln!(
            "{} {} ({}x{} PEs per tier) seq {}: {} cycles{}",
            r.preset,
            r.variant,
            r.rows,
            r.cols,
            r.seq_len,
            r.cycles,
            if r.passed { "" } else { ", FAILED" }
        )
    })?;
    let mut md = compare::table(&rows, &config, &table);
    if let Some((lib, (name, node), density)) = &library {
        compare::iso_area(
            &mut rows,
            lib,
            (name, node),
            (density, utilization, clock),
            |what| eprintln!("iso-area: mapping {what} at {name} (each module once, cached)"),
        )?;
        md += &compare::iso_area_table(&rows);
    }
    // With the PE at gate level, the same runs under the sourced table too, side by side.
    let sourced_table = table.gates.is_some().then(|| kernels::energy::EnergyTable {
        gates: None,
        ..table.clone()
    });
    let sourced = sourced_table.as_ref().map(|t| compare::repriced(&rows, t));
    if let Some(a) = &sourced {
        md += &compare::both_tables(a, &rows);
    }
    // The claims FuseMax made at its scale are measured there (the model's rows).
    let fusemax = match args.claims {
        // A configuration whose FuseMax scale does not fit keeps its own array for them, and
        // the claims' "ours" column says so.
        true => compare::run_fusemax(&plan, args.glb).unwrap_or_else(|e| {
            eprintln!("note: FuseMax's claims measured on the configuration's array: {e:#}");
            vec![]
        }),
        false => vec![],
    };
    // The rows the claims read: the runs, and FuseMax's (priced with the same table).
    let claim_rows = [rows.as_slice(), &fusemax].concat();
    let hierarchy = compare::hierarchy(&config, args.glb);
    if args.claims {
        md += "\n";
        let ours = crate::claims::claims(&claim_rows, &hierarchy);
        md += &match (&sourced, &sourced_table) {
            (Some(a), Some(t)) => {
                let a = [a.as_slice(), &compare::repriced(&fusemax, t)].concat();
                crate::claims::table_beside(&crate::claims::claims(&a, &hierarchy), Some(&ours))
            }
            _ => crate::claims::table(&ours),
        };
    }
    if let Some(p) = args.solve {
        let solved = crate::solve::solve(&claim_rows, &plan, args.glb, &hierarchy, p)?;
        md += &crate::solve::table(p, &solved);
    }
    if let (Some(sw), Some(path)) = (args.sweep, &args.sweep_plot) {
        let series = crate::solve::sweep(&claim_rows, &plan, args.glb, &hierarchy, sw)?;
        crate::solve::plot_sweep(&series, sw, path)?;
        md += &format!(
            "\n{} claim figures against {} from {} to {}: {}\n",
            series.len(),
            sw.param.name(),
            sw.lo,
            sw.hi,
            path.display()
        );
    }
    println!("{md}");
    if let Some(path) = &args.out {
        std::fs::write(path, &md).with_context(|| format!("cannot write {}", path.display()))?;
    }
    if let Some(path) = &args.report {
        write_json(path, &rows)?;
    }
    if let Some(path) = &args.plot {
        let base = if args.claims { "unfused" } else { "buf2d" };
        compare::plot(&rows, path, base)?;
    }
    Ok(exit(rows.iter().all(|r| r.passed() != Some(false))))
}
