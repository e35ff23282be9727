//! Command-line parsing and the subcommands.

use std::path::PathBuf;
use std::process::ExitCode;

use crate::units::{self, Check, UNITS};
use anyhow::{Context, Result};
use clap::{Args, Parser, Subcommand};
use gen::constraints::SynthTarget;
use gen::flow::SynthReport;
use gen::tools::ScratchDir;
use hdl::config::{CoreConfig, PRESETS};
use serde::Serialize;

use crate::design::{generate, Target};
use crate::verify::run::{verify_block, BlockReport};

#[derive(Parser, Debug)]
#[command(
    name = "regflash",
    version,
    about = "Register-level FlashAttention NPU generator"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Run attention on the whole core under Verilator: Q/K/V streamed through the DMA from a
    /// memory model, O compared bit for bit with the hardware model and against the f64
    /// reference, performance from the core's counters.
    Sim(SimArgs),
    /// Utilization of the core over presets, sequence lengths and causal masking (every run
    /// checked bit for bit), written as a markdown table.
    Bench(BenchArgs),
    /// Generate every block of a preset, lint and synthesize it, simulate it under Verilator
    /// against the bit-exact Rust models, and report.
    Verify(VerifyArgs),
    /// Write Verilog, files.f and manifest.json for a preset design or one unit.
    Gen(GenArgs),
    /// Run `verilator --lint-only -Wall` and Yosys synthesis checks on a generated folder.
    Lint {
        /// Folder written by `regflash gen`.
        dir: PathBuf,
        /// Verilator lint only (Yosys on a big core such as npu16 or seed takes long).
        #[arg(long)]
        no_synth: bool,
    },
    /// Synthesize a preset design or one unit with Yosys (generic cells) and report cell counts.
    Synth(SynthArgs),
    /// Accuracy of the numerics: exp2 against f64 by input range, and the tiled hardware model
    /// against the f64 and plain FP16 references for the configuration's tiling.
    Accuracy(AccuracyArgs),
    /// List the presets with their derived figures, or print one as a TOML config file.
    Presets {
        /// Print this preset as TOML (a starting point for --config).
        #[arg(long)]
        toml: Option<String>,
    },
}

/// Which configuration to start from and how to change it.
#[derive(Args, Debug, Clone)]
pub struct ConfigArgs {
    /// Built-in preset (seed: 32x32 PEs; npu16: 16x16; medium: 8x8; small: 4x4).
    #[arg(long, default_value = "small", conflicts_with = "config")]
    pub preset: String,
    /// TOML configuration file (see presets/*.toml); the options below override it.
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Override: fp16_mul pipeline registers (0..=2).
    #[arg(long)]
    pub mul_latency: Option<u32>,
    /// Override: fp32_add pipeline registers (0..=2).
    #[arg(long)]
    pub add_latency: Option<u32>,
    /// Override: 32-bit registers per PE.
    #[arg(long)]
    pub regs: Option<u32>,
}

/// A configuration from a TOML file, with the file named in any error.
fn load_config(path: &std::path::Path) -> Result<CoreConfig> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read config file {}", path.display()))?;
    CoreConfig::from_toml(&text).with_context(|| format!("config file {}", path.display()))
}

impl ConfigArgs {
    pub fn resolve(&self) -> Result<CoreConfig> {
        let mut cfg = match &self.config {
            Some(path) => load_config(path)?,
            None => CoreConfig::preset(&self.preset)?,
        };
        if let Some(v) = self.mul_latency {
            cfg.mul_latency = v;
        }
        if let Some(v) = self.add_latency {
            cfg.add_latency = v;
        }
        if let Some(v) = self.regs {
            cfg.regs_per_pe = v;
        }
        cfg.validate()?;
        Ok(cfg)
    }
}

#[derive(Args, Debug)]
pub struct GenArgs {
    #[command(flatten)]
    pub config: ConfigArgs,
    /// Generate one block as the top instead of the whole design
    /// (fp16_mul, fp32_add, mac, pe, pe_grid, exp2, row_reduce, mask_gen, dma, pe_row, ...;
    /// an unknown name lists them all).
    #[arg(long)]
    pub unit: Option<String>,
    /// Output folder (created if missing; a folder from an earlier run is cleaned first).
    #[arg(long)]
    pub out: PathBuf,
}

#[derive(Args, Debug)]
pub struct SynthArgs {
    #[command(flatten)]
    pub config: ConfigArgs,
    /// Synthesize one block instead of the whole design.
    #[arg(long)]
    pub unit: Option<String>,
    /// generic (Yosys cells, longest paths), ice40 (LUT4s; place and route for fmax) or
    /// xilinx (7-series LUTs, DSPs, RAMs).
    #[arg(long, default_value = "generic")]
    pub target: SynthTarget,
    /// iCE40: skip nextpnr place and route (no fmax).
    #[arg(long)]
    pub no_pnr: bool,
    /// Also write the report as JSON.
    #[arg(long)]
    pub report: Option<PathBuf>,
}

#[derive(Args, Debug)]
pub struct VerifyArgs {
    #[command(flatten)]
    pub config: ConfigArgs,
    /// Random vectors per pure unit (FP units, MAC); PE blocks get about as many cycles.
    #[arg(long, default_value_t = 200_000)]
    pub vectors: u32,
    /// proptest seed (fixed, so a run is reproducible).
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Check only these blocks (repeatable); default: every block.
    #[arg(long = "unit")]
    pub units: Vec<String>,
    /// Also write the report as JSON.
    #[arg(long)]
    pub report: Option<PathBuf>,
}

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
    /// Memory read latency in cycles.
    #[arg(long, default_value_t = 20)]
    pub mem_latency: u32,
    /// Probability that the memory refuses a request in a cycle (random back-pressure).
    #[arg(long, default_value_t = 0.0)]
    pub mem_stall: f64,
}

#[derive(Args, Debug)]
pub struct BenchArgs {
    /// Presets to run, comma separated (default small,medium,npu16 when no --config is given).
    #[arg(long, value_delimiter = ',')]
    pub presets: Vec<String>,
    /// TOML configuration files to run as well (repeatable), e.g. a preset with a wider port.
    #[arg(long = "config")]
    pub configs: Vec<PathBuf>,
    /// Sequence lengths, comma separated; each runs non-causal and causal.
    #[arg(long, value_delimiter = ',', default_value = "256,1024,4096")]
    pub seq: Vec<usize>,
    /// Attention heads per run.
    #[arg(long, default_value_t = 1)]
    pub heads: usize,
    /// Seed of the random inputs.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Memory read latency in cycles.
    #[arg(long, default_value_t = 20)]
    pub mem_latency: u32,
    /// Write the markdown table here as well as to standard output.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Write every run's report as JSON.
    #[arg(long)]
    pub report: Option<PathBuf>,
}

#[derive(Args, Debug)]
pub struct AccuracyArgs {
    #[command(flatten)]
    pub config: ConfigArgs,
    /// Query and key sequence length of the attention problems.
    #[arg(long, default_value_t = 512)]
    pub seq: usize,
    /// Input seed of the value patterns.
    #[arg(long, default_value_t = 7)]
    pub seed: u64,
}

/// Runs a parsed command line.
pub fn run(cli: Cli) -> Result<ExitCode> {
    match cli.command {
        Command::Gen(args) => gen_cmd(args),
        Command::Sim(args) => sim_cmd(args),
        Command::Bench(args) => bench_cmd(args),
        Command::Lint {
            dir,
            no_synth: true,
        } => {
            let manifest = gen::Manifest::load(&dir)?;
            let warnings = gen::flow::verilator_lint(&dir, &manifest)?;
            for w in &warnings {
                println!("{w}");
            }
            println!(
                "{}: verilator --lint-only -Wall: {}",
                manifest.top,
                if warnings.is_empty() {
                    "clean".to_string()
                } else {
                    format!("{} problem(s)", warnings.len())
                }
            );
            Ok(exit(warnings.is_empty()))
        }
        Command::Lint { dir, .. } => {
            let report = gen::flow::lint(&dir)?;
            println!("{}", report.summary());
            Ok(exit(report.passed()))
        }
        Command::Synth(args) => synth_cmd(args),
        Command::Verify(args) => verify_cmd(args),
        Command::Accuracy(args) => accuracy_cmd(args),
        Command::Presets { toml: None } => {
            presets_cmd()?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Presets { toml: Some(name) } => {
            print!("{}", CoreConfig::preset(&name)?.to_toml());
            Ok(ExitCode::SUCCESS)
        }
    }
}

fn exit(ok: bool) -> ExitCode {
    if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

fn target(unit: &Option<String>) -> Target {
    match unit {
        Some(u) => Target::Unit(u.clone()),
        None => Target::Core,
    }
}

fn gen_cmd(args: GenArgs) -> Result<ExitCode> {
    let cfg = args.config.resolve()?;
    let manifest = generate(&cfg, &target(&args.unit), &args.out)?;
    let lines: usize = manifest
        .files
        .iter()
        .map(|f| std::fs::read_to_string(args.out.join(f)).map(|t| t.lines().count()))
        .sum::<std::io::Result<usize>>()?;
    println!(
        "wrote {} module(s), {lines} lines of Verilog, top `{}`, to {}",
        manifest.files.len(),
        manifest.top,
        args.out.display()
    );
    Ok(ExitCode::SUCCESS)
}

/// Checks, before any long work, that `path` can be written: its folder exists and the file can
/// be opened for writing (an existing file is left as it is, a new one is not left behind).
pub fn check_writable(path: &std::path::Path) -> Result<()> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => std::path::Path::new("."),
    };
    anyhow::ensure!(
        dir.is_dir(),
        "cannot write {}: folder {} does not exist (create it first)",
        path.display(),
        dir.display()
    );
    anyhow::ensure!(
        !path.is_dir(),
        "cannot write {}: it is a folder; name a file",
        path.display()
    );
    let existed = path.exists();
    std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)
        .with_context(|| format!("cannot write {}", path.display()))?;
    if !existed {
        std::fs::remove_file(path).ok();
    }
    Ok(())
}

fn write_json<T: Serialize>(path: &PathBuf, value: &T) -> Result<()> {
    std::fs::write(path, serde_json::to_string_pretty(value)? + "\n")
        .with_context(|| format!("cannot write report {}", path.display()))
}

fn synth_cmd(args: SynthArgs) -> Result<ExitCode> {
    let cfg = args.config.resolve()?;
    if let Some(path) = &args.report {
        check_writable(path)?;
    }
    let dir = ScratchDir::new("synth")?;
    generate(&cfg, &target(&args.unit), dir.path())?;
    let report = gen::flow::synth(dir.path(), args.target, !args.no_pnr)?;
    println!("{}", synth_table(&report));
    if let Some(path) = &args.report {
        write_json(path, &report)?;
    }
    Ok(exit(report.passed()))
}

/// Markdown table of a synthesis report: each module's own cells, then the whole hierarchy.
pub fn synth_table(r: &SynthReport) -> String {
    let mut s = format!(
        "Yosys synthesis of {}, target {}\n\n",
        r.top,
        r.target.name()
    );
    s.push_str(
        "| module | own cells | own flip-flops | longest path (cells) |\n|---|---:|---:|---:|\n",
    );
    for (name, c) in &r.modules {
        let ltp = r
            .longest_path
            .get(name)
            .map_or("-".to_string(), |n| n.to_string());
        s.push_str(&format!(
            "| {name} | {} | {} | {ltp} |\n",
            c.cells, c.flip_flops
        ));
    }
    s.push_str(&format!(
        "| **{} (whole hierarchy)** | {} | {} | |\n",
        r.top, r.total.cells, r.total.flip_flops
    ));
    if let Some(res) = &r.resources {
        s.push_str(&format!(
            "\nresources: {} LUTs, {} flip-flops, {} carry cells, {} DSPs, {} block RAMs, {} LUT RAMs\n",
            res.luts, res.flip_flops, res.carry_cells, res.dsps, res.block_rams, res.lut_rams
        ));
    }
    if let (Some(f), Some(dev)) = (r.fmax_mhz, &r.device) {
        s.push_str(&format!(
            "\nfmax: {f:.2} MHz on {dev} (nextpnr-ice40, inside the 6-pin serial wrapper)\n"
        ));
    }
    s.push_str(&format!(
        "\nlatches: {}; yosys check problems: {}",
        r.latches,
        r.yosys_problems.len()
    ));
    s
}

#[derive(Serialize)]
struct VerifyBlock {
    unit: String,
    passed: bool,
    error: Option<String>,
    check: Option<BlockReport>,
    lint_clean: bool,
    lint: Vec<String>,
    cells: u64,
    flip_flops: u64,
}

#[derive(Serialize)]
struct VerifyReport {
    preset: String,
    config: CoreConfig,
    seed: u64,
    passed: bool,
    blocks: Vec<VerifyBlock>,
    /// Blocks without a port-level model, checked as part of the whole core.
    checked_within_core: Vec<String>,
}

fn verify_cmd(args: VerifyArgs) -> Result<ExitCode> {
    let cfg = args.config.resolve()?;
    if let Some(path) = &args.report {
        check_writable(path)?;
    }
    for u in &args.units {
        units::unit(u)?;
    }
    // A block without a port-level model is checked within another (pe_row within the core):
    // a whole run lists it, and checks it only when asked for by name (which explains).
    let within = |u: &units::Unit| matches!(u.check, Check::Within(_));
    let selected: Vec<&str> = UNITS
        .iter()
        .filter(|u| args.units.is_empty() || args.units.iter().any(|a| a == u.name))
        .filter(|u| !within(u) || !args.units.is_empty())
        .map(|u| u.name)
        .collect();
    let mut blocks = vec![];
    for unit in &selected {
        eprintln!(
            "[{}/{}] {unit}: generate, lint, synthesize, simulate ...",
            blocks.len() + 1,
            selected.len()
        );
        let lint_dir = ScratchDir::new("verify")?;
        generate(&cfg, &Target::Unit(unit.to_string()), lint_dir.path())?;
        let lint = gen::flow::lint(lint_dir.path())?;
        let check = verify_block(&cfg, unit, args.vectors, args.seed);
        let (check, error) = match check {
            Ok(r) => (Some(r), None),
            Err(e) => {
                eprintln!("{unit}: {e:#}");
                (None, Some(format!("{e:#}")))
            }
        };
        let mut lint_msgs = lint.verilator.clone();
        lint_msgs.extend(lint.synth.yosys_problems.iter().cloned());
        if lint.synth.latches > 0 {
            lint_msgs.push(format!("{} latches", lint.synth.latches));
        }
        blocks.push(VerifyBlock {
            unit: unit.to_string(),
            passed: error.is_none() && lint.passed(),
            error,
            check,
            lint_clean: lint.passed(),
            lint: lint_msgs,
            cells: lint.synth.total.cells,
            flip_flops: lint.synth.total.flip_flops,
        });
    }
    let passed = blocks.iter().all(|b| b.passed);
    println!(
        "regflash verify --preset {} ({}x{} PEs, {} registers/PE)\n",
        cfg.name, cfg.rows, cfg.cols, cfg.regs_per_pe
    );
    println!("| block | module | latency | directed | random | RTL = model | lint + synth | cells | flip-flops | checked cycles/s |");
    println!("|---|---|---:|---:|---:|---|---|---:|---:|---:|");
    for b in &blocks {
        let (module, latency, directed, random, rate) = match &b.check {
            Some(c) => (
                c.module.clone(),
                c.latency.to_string(),
                c.directed_vectors.to_string(),
                c.random_vectors.to_string(),
                format!("{:.2e}", c.sim_cycles as f64 / c.sim_seconds.max(1e-9)),
            ),
            None => ("-".into(), "-".into(), "-".into(), "-".into(), "-".into()),
        };
        println!(
            "| {} | {module} | {latency} | {directed} | {random} | {} | {} | {} | {} | {rate} |",
            b.unit,
            if b.error.is_none() {
                "yes, bit exact"
            } else {
                "**MISMATCH**"
            },
            if b.lint_clean { "clean" } else { "**FAILED**" },
            b.cells,
            b.flip_flops,
        );
    }
    let within_core: Vec<String> = if args.units.is_empty() {
        let mut names = vec![];
        for u in UNITS.iter() {
            if let Check::Within(block) = u.check {
                println!(
                    "| {} | - | - | - | - | checked within `{block}` (no port-level model of its \
                     own) | - | - | - | - |",
                    u.name
                );
                names.push(u.name.to_string());
            }
        }
        names
    } else {
        vec![]
    };
    for b in blocks.iter().filter(|b| !b.lint.is_empty()) {
        println!(
            "\n{} lint/synthesis problems:\n  {}",
            b.unit,
            b.lint.join("\n  ")
        );
    }
    println!(
        "\n{}",
        if passed {
            "PASS: every block's Verilog equals its bit-exact model on every vector, lint-clean, no latches."
        } else {
            "FAIL: see the blocks marked above."
        }
    );
    if let Some(path) = &args.report {
        write_json(
            path,
            &VerifyReport {
                preset: cfg.name.clone(),
                config: cfg.clone(),
                seed: args.seed,
                passed,
                blocks,
                checked_within_core: within_core,
            },
        )?;
    }
    Ok(exit(passed))
}

fn presets_cmd() -> Result<()> {
    println!(
        "| preset | PEs | Br x Bc x d | rows x keys x O columns per PE | registers/PE used | \
         register file | S + O_acc | MAC steps per block (QK + PV) | K/V block | MACs per K/V byte \
         | MAC latency |"
    );
    println!("|---|---|---|---|---:|---:|---:|---:|---:|---:|---:|");
    for name in PRESETS {
        let c = CoreConfig::preset(name)?;
        let p = hdl::core::CoreParams::from_config(&c)?;
        let (qk, pv) = p.block_steps();
        let kv_bytes = 2 * 2 * c.bc as u64 * c.head_dim as u64;
        let block_macs = 2 * c.br as u64 * c.bc as u64 * c.head_dim as u64;
        println!(
            "| {name} | {}x{} = {} | {}x{}x{} | {} x {} x {} | {} of {} | {} KiB | {:.1} KiB ({:.0} %) \
             | {} + {} | {} | {:.0} | {} |",
            c.rows,
            c.cols,
            c.pes(),
            c.br,
            c.bc,
            c.head_dim,
            p.row.a,
            p.row.b,
            p.row.e,
            p.row.regs_needed(),
            c.regs_per_pe,
            c.register_bytes() / 1024,
            c.register_bytes_needed() as f64 / 1024.0,
            100.0 * c.register_bytes_needed() as f64 / c.register_bytes() as f64,
            qk,
            pv,
            if kv_bytes >= 1024 {
                format!("{} KiB", kv_bytes / 1024)
            } else {
                format!("{kv_bytes} B")
            },
            block_macs as f64 / kv_bytes as f64,
            c.mul_latency + c.add_latency + 1,
        );
    }
    Ok(())
}

fn accuracy_cmd(args: AccuracyArgs) -> Result<ExitCode> {
    use kernels::accuracy::{attention_accuracy, exp2_accuracy};
    use kernels::patterns::Pattern;
    let cfg = args.config.resolve()?;
    anyhow::ensure!(args.seq >= 1, "--seq must be at least 1");
    println!("exp2 against f64 (every 64th binary32 input in each range)\n");
    println!("| x in | inputs | max relative error | max error (ulps) |");
    println!("|---|---:|---:|---:|");
    for (lo, hi) in [
        (-150.0, -149.0),
        (-149.0, -126.0),
        (-126.0, -24.0),
        (-24.0, 0.0),
        (0.0, 128.0),
    ] {
        let r = exp2_accuracy(lo, hi, 64);
        println!(
            "| [{lo}, {hi}) | {} | {:.3e} (2^{:.1}) | {:.2} |",
            r.points,
            r.max_rel,
            r.max_rel.log2(),
            r.max_ulps
        );
    }
    println!(
        "\nhardware model vs f64 reference, next to plain attention at FP16 storage / FP32 \
         accumulation; seq {}, d {}, Br {}, Bc {}, {} PE columns; errors are max |O - O_ref| over \
         both output formats\n",
        args.seq, cfg.head_dim, cfg.br, cfg.bc, cfg.cols
    );
    println!("| pattern | causal | hw error | plain FP16 error | hw / plain | hw / max|V| | hw / max|O_ref| | contract |");
    println!("|---|---|---:|---:|---:|---:|---:|---|");
    let mut ok = true;
    for pattern in Pattern::ALL {
        for causal in [false, true] {
            let a = attention_accuracy(
                pattern,
                args.seq,
                args.seq,
                cfg.head_dim as usize,
                cfg.br as usize,
                cfg.bc as usize,
                cfg.cols as usize,
                causal,
                args.seed,
            );
            let verdict = a.check();
            ok &= verdict.is_ok();
            let ratio = if a.plain_err > 0.0 {
                format!("{:.2}", a.max_abs_err / a.plain_err)
            } else {
                "-".into()
            };
            println!(
                "| {pattern:?} | {causal} | {:.3e} | {:.3e} | {ratio} | {:.2e} | {:.2e} | {} |",
                a.max_abs_err,
                a.plain_err,
                a.rel_err(),
                a.max_abs_err / a.out_scale.max(f64::MIN_POSITIVE),
                verdict.map_or_else(|e| format!("**FAIL**: {e}"), |_| "met".into())
            );
        }
    }
    Ok(exit(ok))
}

/// A one-line progress bar on stderr, when stderr is a terminal.
fn progress_bar() -> impl FnMut(u64, u64) {
    use std::io::{IsTerminal, Write};
    let tty = std::io::stderr().is_terminal();
    move |done: u64, estimate: u64| {
        if !tty {
            return;
        }
        let frac = (done as f64 / estimate.max(1) as f64).min(1.0);
        let filled = (frac * 40.0) as usize;
        eprint!(
            "\r[{}{}] {:3.0} % {done} cycles",
            "#".repeat(filled),
            ".".repeat(40 - filled),
            100.0 * frac
        );
        let _ = std::io::stderr().flush();
    }
}

fn sim_cmd(args: SimArgs) -> Result<ExitCode> {
    use crate::sim;
    use kernels::flash::OutFormat;
    let cfg = args.config.resolve()?;
    let params = hdl::core::CoreParams::from_config(&cfg)?;
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
        (Some(q), Some(k), Some(v)) => sim::load_problem(q, k, v, args.causal, out, args.saturate)?,
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
            let a = sim::random_problem(
                args.heads,
                args.seq,
                cfg.head_dim as usize,
                args.causal,
                out,
                args.seed,
            );
            (a, 0)
        }
    };
    let fault = match &args.fault {
        Some(name) => Some(hdl::fault::Fault::from_name(name).with_context(|| {
            format!(
                "unknown fault `{name}`: choose one of {}",
                hdl::fault::Fault::ALL.map(|f| f.name()).join(", ")
            )
        })?),
        None => None,
    };
    let (mut report, o) = sim::run_with_fault(&cfg, fault, &problem, &timing, progress_bar())?;
    report.saturated_inputs = saturated;
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

fn bench_cmd(args: BenchArgs) -> Result<ExitCode> {
    use crate::bench;
    anyhow::ensure!(args.heads >= 1, "--heads must be at least 1");
    for path in args.out.iter().chain(&args.report) {
        check_writable(path)?;
    }
    let presets = if args.presets.is_empty() && args.configs.is_empty() {
        vec!["small".into(), "medium".into(), "npu16".into()]
    } else {
        args.presets.clone()
    };
    let mut configs = presets
        .iter()
        .map(|p| CoreConfig::preset(p))
        .collect::<Result<Vec<_>>>()?;
    for path in &args.configs {
        let cfg = load_config(path)?;
        cfg.validate()
            .with_context(|| format!("config file {}", path.display()))?;
        configs.push(cfg);
    }
    let plan = bench::BenchPlan {
        configs,
        seq_lens: args.seq.clone(),
        heads: args.heads,
        timing: crate::verify::attention::MemoryTiming {
            latency: args.mem_latency,
            seed: args.seed,
            ..Default::default()
        },
        seed: args.seed,
    };
    let mut bar = progress_bar();
    let rows = bench::run(
        &plan,
        |row| {
            let r = &row.report;
            eprintln!(
                "\r{} seq {} {}: {} cycles, utilization {:.1} %{}",
                r.preset,
                r.seq_len,
                if r.causal { "causal" } else { "non-causal" },
                r.cycles,
                100.0 * r.utilization,
                if r.passed { "" } else { ", MISMATCH" }
            );
        },
        |_, done, estimate| bar(done, estimate),
    )?;
    let table = bench::table(&rows);
    println!("{table}");
    if let Some(path) = &args.out {
        std::fs::write(path, &table).with_context(|| format!("cannot write {}", path.display()))?;
    }
    if let Some(path) = &args.report {
        write_json(path, &rows)?;
    }
    Ok(exit(rows.iter().all(|r| r.report.passed)))
}
