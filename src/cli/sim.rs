//! `regflash sim`: attention on the whole core under Verilator.

use super::*;

#[derive(Args, Debug)]
pub struct SimArgs {
    #[command(flatten)]
    pub config: ConfigArgs,
    /// Sequence length of random Q, K, V (ignored with --q/--k/--v).
    #[arg(long, default_value_t = 256)]
    pub seq: usize,
    /// Attention heads of random inputs.
    #[arg(long, default_value_t = 1)]
    pub heads: usize,
    /// K/V heads of random inputs (grouped-query attention: the Q heads share them; must
    /// divide --heads; default: one per Q head).
    #[arg(long)]
    pub kv_heads: Option<usize>,
    /// How the tensors lie in the core's memory: bhsd (heads, seq, d) or bshd (seq, heads, d),
    /// read in place through the row and head strides.
    #[arg(long, default_value = "bhsd")]
    pub layout: crate::verify::attention::TensorLayout,
    /// A varlen batch of random sequences with these query lengths (FlashAttention's varlen:
    /// packed along the rows, described by cumulative offsets in memory), run through the
    /// top's registers in one launch; --seq is then ignored.
    #[arg(long, value_delimiter = ',', conflicts_with_all = ["q", "k", "v"])]
    pub seqlens: Option<Vec<usize>>,
    /// The batch's key lengths, one per sequence (default: the query lengths).
    #[arg(long, value_delimiter = ',', requires = "seqlens")]
    pub kv_seqlens: Option<Vec<usize>>,
    /// Causal masking (bottom-right aligned when Q and K lengths differ).
    #[arg(long)]
    pub causal: bool,
    /// Seed of the random inputs.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Q as .npy, FP16 or FP32 (rounded to FP16), shaped (seq, d) or (heads, seq, d).
    #[arg(long, requires_all = ["k", "v"])]
    pub q: Option<PathBuf>,
    /// K as .npy, shaped like Q (its sequence length may differ).
    #[arg(long, requires_all = ["q", "v"])]
    pub k: Option<PathBuf>,
    /// V as .npy, shaped like K.
    #[arg(long, requires_all = ["q", "k"])]
    pub v: Option<PathBuf>,
    /// Output FP32 instead of FP16.
    #[arg(long)]
    pub f32: bool,
    /// Clamp FP32 input values outside the FP16 range to ±65504 (counted in the report)
    /// instead of refusing them.
    #[arg(long)]
    pub saturate: bool,
    /// Test only: simulate the core with a deliberate defect (hdl::fault), to see the checks
    /// fail: stall_qk, stall_pv, write_outside_o, release_{q,k,v}_unheld, skip_k, skip_v,
    /// causal_off_by_one, wrong_rescale.
    #[arg(long, hide = true)]
    pub fault: Option<String>,
    /// Write O as .npy.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Write the report as JSON.
    #[arg(long)]
    pub report: Option<PathBuf>,
    /// Energy table (TOML) over the default (kernels/src/energy.rs): any subset of figures,
    /// storage points and knobs; unknown keys are refused.
    #[arg(long)]
    pub energy: Option<PathBuf>,
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
    /// Only this scope and below, as a path from the core's top module (e.g. `u_engine.u_seq`
    /// for the sequencer), or from `TOP.`.
    #[arg(long, requires = "waves")]
    pub wave_scope: Option<String>,
}

pub(super) fn sim_cmd(args: SimArgs) -> Result<ExitCode> {
    use crate::sim;
    use kernels::flash::OutFormat;
    let cfg = args.config.resolve()?;
    let params = hdl::core::CoreParams::from_config(&cfg)?;
    let table = crate::energy::load_table(args.energy.as_deref())?;
    let out = if args.f32 {
        OutFormat::F32
    } else {
        OutFormat::F16
    };
    anyhow::ensure!(
        (0.0..0.95).contains(&args.mem_stall),
        "--mem-stall must be in [0, 0.95)"
    );
    let timing = crate::verify::attention::MemoryTiming {
        latency: args.mem_latency,
        stall_probability: args.mem_stall,
        seed: args.seed,
        ..Default::default()
    };
    timing.validate().context("--mem-latency")?;
    // Before minutes of simulation: the outputs can be written.
    for path in args.out.iter().chain(&args.report) {
        check_writable(path)?;
    }
    let (problem, saturated) = match (&args.q, &args.k, &args.v) {
        (Some(q), Some(k), Some(v)) => {
            anyhow::ensure!(
                args.kv_heads.is_none(),
                "--kv-heads applies to random inputs; with --q/--k/--v the arrays' shapes say it"
            );
            let (a, n) = sim::load_problem(q, k, v, args.causal, out, args.saturate)?;
            (a.laid_out(args.layout), n)
        }
        _ => {
            anyhow::ensure!(args.seq >= 1, "--seq must be at least 1");
            anyhow::ensure!(args.heads >= 1, "--heads must be at least 1");
            // Before allocating anything.
            crate::verify::attention::check_shape(
                &params,
                args.heads,
                args.seq,
                args.seq,
                cfg.head_dim as usize,
                out,
            )?;
            let kv = args.kv_heads.unwrap_or(args.heads);
            anyhow::ensure!(
                kv >= 1 && args.heads.is_multiple_of(kv),
                "--kv-heads {kv} must divide --heads {} (each K/V head serves the same number \
                 of query heads)",
                args.heads
            );
            let a = sim::random_problem(
                args.heads,
                args.seq,
                cfg.head_dim as usize,
                args.causal,
                out,
                args.seed,
            )
            .grouped(kv)
            .laid_out(args.layout);
            (a, 0)
        }
    };
    if let Some(q_lens) = &args.seqlens {
        anyhow::ensure!(
            args.fault.is_none() && args.waves.is_none(),
            "--seqlens runs the top; --fault and --waves apply to one problem on the core"
        );
        let k_lens = args.kv_seqlens.clone().unwrap_or_else(|| q_lens.clone());
        anyhow::ensure!(
            k_lens.len() == q_lens.len(),
            "--kv-seqlens gives {} lengths for {} sequences: give one per sequence",
            k_lens.len(),
            q_lens.len()
        );
        anyhow::ensure!(
            q_lens.iter().chain(&k_lens).all(|&n| n >= 1),
            "every --seqlens and --kv-seqlens length must be at least 1"
        );
        let kv = args.kv_heads.unwrap_or(args.heads);
        anyhow::ensure!(
            args.heads >= 1 && kv >= 1 && args.heads.is_multiple_of(kv),
            "--kv-heads {kv} must divide --heads {}",
            args.heads
        );
        let batch = crate::verify::attention::Batch::generate(
            kernels::patterns::Pattern::Unit,
            args.heads,
            kv,
            q_lens,
            &k_lens,
            cfg.head_dim as usize,
            args.causal,
            out,
            args.layout,
            args.seed,
        );
        let (mut report, o) = sim::run_batch(&cfg, &batch, &timing)?;
        report.with_energy(&table, &cfg, false);
        println!("{}", report.summary());
        if let Some(path) = &args.out {
            // O of every head over the packed rows: (heads, total queries, d).
            let (tq, _) = batch.totals();
            let d = cfg.head_dim as usize;
            let mut packed = Vec::with_capacity(o.len());
            let mut at = vec![0usize; batch.seqs.len()];
            let mut start = 0;
            for (b, a) in batch.seqs.iter().enumerate() {
                at[b] = start;
                start += a.heads * a.q_len * d;
            }
            for h in 0..args.heads {
                for (b, a) in batch.seqs.iter().enumerate() {
                    let from = at[b] + h * a.q_len * d;
                    packed.extend_from_slice(&o[from..from + a.q_len * d]);
                }
            }
            let whole = crate::verify::attention::Attention {
                q_len: tq,
                ..batch.seqs[0].clone()
            };
            sim::write_output(path, &whole, &packed)?;
        }
        if let Some(path) = &args.report {
            write_json(path, &report)?;
        }
        return Ok(exit(report.passed));
    }
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
        let p = hdl::core::CoreParams::from_config(&cfg)?;
        if let Some(need) = f.needs(&p) {
            anyhow::bail!("fault `{}` acts only in a core with {need}", f.name());
        }
    }
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
        &cfg,
        fault,
        &problem,
        &timing,
        waves.as_ref(),
        true,
        progress_bar(),
    )?;
    if let Some(w) = &waves {
        eprintln!("waveform: {}", w.path.display());
    }
    report.saturated_inputs = saturated;
    report.with_energy(&table, &cfg, false);
    eprintln!();
    println!("{}", report.summary());
    if let Some(path) = &args.out {
        sim::write_output(path, &problem, &o)?;
    }
    if let Some(path) = &args.report {
        write_json(path, &report)?;
    }
    Ok(exit(report.passed))
}
