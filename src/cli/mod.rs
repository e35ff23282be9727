//! Command-line parsing and the subcommands, one file each beside this one.

mod accuracy;
mod bench;
mod compare;
mod estimate;
mod power;
mod presets;
mod sim;
mod synth;
mod thermal;
mod verify;

use accuracy::accuracy_cmd;
pub use accuracy::AccuracyArgs;
use bench::bench_cmd;
use bench::merge_cmd;
pub use bench::{BenchArgs, MergeArgs};
use compare::compare_cmd;
pub use compare::CompareArgs;
use estimate::estimate_cmd;
pub use estimate::EstimateArgs;
use power::power_cmd;
use presets::presets_cmd;
use sim::sim_cmd;
pub use sim::SimArgs;
use synth::synth_cmd;
pub use synth::{synth_table, SynthArgs};
use thermal::thermal_cmd;
pub use thermal::ThermalArgs;
use verify::verify_cmd;
pub use verify::VerifyArgs;

use std::path::PathBuf;
use std::process::ExitCode;

use crate::units::{self, Check, UNITS};
use anyhow::{Context, Result};
use clap::{Args, Parser, Subcommand};
use gen::constraints::SynthTarget;
use gen::flow::SynthReport;
use gen::tools::ScratchDir;
use hdl::config::{CoreConfig, StackParams, Variant, VariantKind, PRESETS};
use hdl::mem::dma::MemIf;
use serde::{Deserialize, Serialize};

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
    /// Join the JSON reports of `regflash bench --shard i/n` (or `verify --shard i/n`) runs
    /// into the unsharded run's report and table.
    Merge(MergeArgs),
    /// buf2d, 3-D buffered, reg2d, reg3d and rowfused on the same problems: cycles, speedup
    /// and energy by component from the RTL's counters and the energy table, every run
    /// bit-checked; with --claims, each published claim against them, with a verdict.
    Compare(CompareArgs),
    /// Cycles, utilization, time, throughput, memory traffic and energy of long sequences
    /// (128K to 1M tokens) from the cycle model and the schedule, in seconds, without the RTL.
    Estimate(EstimateArgs),
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
    /// Synthesize a preset design or one unit with Yosys (generic cells, FPGA, or an ASIC
    /// standard-cell library with OpenSTA timing) and report cells, area and paths.
    Synth(SynthArgs),
    /// The PE's and its PE row's energy at gate level: mapped at a library, their activity
    /// replayed from an RTL run, priced by OpenSTA; per MAC, register-file and P-bank access
    /// and cycle, written as an energy table (`--energy`).
    Power(power::PowerArgs),
    /// The die stack's steady-state temperatures at a clock: each tier's peak and mean and its
    /// hotspot's block, heat maps, and the highest clock that keeps every tier within 85 °C
    /// (a compact RC grid over the tiers' floorplans and the run's power; docs/thermal.md).
    Thermal(ThermalArgs),
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

/// The standard-cell library and the SRAM density a design's silicon is priced at (`compare
/// --iso area`, `thermal`).
#[derive(Args, Debug, Clone)]
pub struct SiliconArgs {
    /// The standard-cell library (compare: with --iso area): a known one (nangate45, the
    /// default; asap7; sky130hd; sg13g2; osu018).
    #[arg(long)]
    pub lib: Option<String>,
    /// A liberty file (.lib or .lib.gz) instead of --lib.
    #[arg(long)]
    pub liberty: Option<PathBuf>,
    /// The SRAM macros' density in mm² per MiB (required at a library without a sourced one:
    /// every one but nangate45 and asap7).
    #[arg(long)]
    pub sram_mm2_per_mib: Option<f64>,
    /// The placement utilization the standard cells are priced at (the share of a tier's area
    /// its cells fill; default 0.7).
    #[arg(long)]
    pub utilization: Option<f64>,
}

impl SiliconArgs {
    /// Whether any of them was given.
    pub fn given(&self) -> bool {
        self.lib.is_some()
            || self.liberty.is_some()
            || self.sram_mm2_per_mib.is_some()
            || self.utilization.is_some()
    }

    /// The utilization, checked.
    pub fn utilization(&self) -> Result<f64> {
        crate::area::check_utilization(self.utilization.unwrap_or(crate::area::DEFAULT_UTILIZATION))
    }

    /// The known library these name (nangate45 when neither --lib nor --liberty is given), as
    /// `gen::asic::KNOWN` lists it, without looking for its file: (name, node, path).
    pub fn known(&self) -> Option<&'static (&'static str, &'static str, &'static str)> {
        let lib = match (&self.lib, &self.liberty) {
            (Some(l), _) => l.as_str(),
            (None, None) => "nangate45",
            (None, Some(_)) => return None,
        };
        gen::asic::KNOWN.iter().find(|k| k.0 == lib)
    }

    /// The library loaded into `scratch`, its (name, node) and the SRAM density
    /// (`crate::area::resolve_library`).
    pub fn resolve(
        &self,
        scratch: &std::path::Path,
    ) -> Result<(
        gen::asic::Liberty,
        (String, String),
        crate::area::SramDensity,
    )> {
        crate::area::resolve_library(
            self.lib.as_deref(),
            self.liberty.as_deref(),
            self.sram_mm2_per_mib,
            scratch,
        )
    }
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
    /// Override: fp_mul_e5m10 (the MAC's multiplier) pipeline registers (0..=4).
    #[arg(long)]
    pub mul_latency: Option<u32>,
    /// Override: fp_add_e8m23 (the MAC's adder and the softmax datapath's) pipeline registers
    /// (0..=6; the MAC's accumulator interleave must hide its latency).
    #[arg(long)]
    pub add_latency: Option<u32>,
    /// Override: 32-bit registers per PE.
    #[arg(long)]
    pub regs: Option<u32>,
    /// Override: where S and P live: reg2d (PE registers), buf2d (an on-chip SRAM buffer),
    /// reg3d (stacked tiers), rowfused (whole rows of S in the buffer, a two-pass softmax:
    /// the row-materializing baseline), unfused (S and P through memory between the
    /// passes: standard attention), or noc2d (reg3d's two arrays side by side, P over a NoC:
    /// the 2-D multi-array baseline).
    #[arg(long)]
    pub variant: Option<VariantKind>,
    /// Override: reg3d's tiers (2: QK with the softmax engines, PV; 3: QK, softmax, PV).
    #[arg(long)]
    pub tiers: Option<u32>,
    /// Override: reg3d's vertical-link register stages (0..=4 cycles).
    #[arg(long)]
    pub vlink_latency: Option<u32>,
    /// Override: wires of each QK PE's S link (reg3d with three tiers: 1, 2, 4, 8, 16 or 32).
    #[arg(long)]
    pub vlink_bits: Option<u32>,
    /// Override: noc2d's flit width in bits (its destination, a slot bit and as many 16-bit
    /// weights as fit, one per PE row; up to 1024).
    #[arg(long)]
    pub flit_bits: Option<u32>,
    /// Override: noc2d's router hops between the QK and the PV array (1 to 15).
    #[arg(long)]
    pub hops: Option<u32>,
    /// Override: flits each of noc2d's router input FIFOs holds (1 to 16; 4 pass a flit a
    /// cycle).
    #[arg(long)]
    pub buffer_depth: Option<u32>,
    /// Override: spare lanes in each group of every vertical bundle (reg3d's links and a
    /// stacked GLB's bond: 0 to 4), with the link self-test and shifted-lane repair.
    #[arg(long)]
    pub spares: Option<u32>,
    /// Override: lanes that share a group's spares (2 to 64).
    #[arg(long)]
    pub spare_group: Option<u32>,
    /// Override: the memory interface: simple (one request per beat) or axi4 (an AXI4 master
    /// with bursts, m_axi_*).
    #[arg(long)]
    pub mem_if: Option<MemIf>,
    /// Override: the keys of a query row rowfused's S arrays hold, the longest K it runs (a
    /// power-of-two multiple of bc).
    #[arg(long)]
    pub row_keys: Option<u32>,
    /// Override: rowfused spills the part of a row past `--row-keys` to the next level (the
    /// GLB, else memory) instead of refusing a longer K.
    #[arg(long)]
    pub spill: bool,
    /// Override: how the online softmax rescales when a row's running max grows: pow2 (an
    /// exponent shift at every growth, the default) or lazy (keep a stale max while the growth
    /// is at most --lazy-threshold).
    #[arg(long)]
    pub rescale: Option<String>,
    /// Override: lazy rescaling's threshold τ (1..=15; with --rescale lazy, default 4).
    #[arg(long)]
    pub lazy_threshold: Option<u32>,
    /// Override: Q, K, V and P's format: fp16 (binary16, the default), bf16 (bfloat16),
    /// fp8e4m3 or fp8e5m2 (OCP FP8); the MAC accumulates in FP32 in every one. The memory
    /// beat keeps its operands: mem_width scales with the format's width (small's 256 bits
    /// of FP16 are 128 bits of FP8).
    #[arg(long)]
    pub in_format: Option<String>,
    /// Override: QKᵀ in integers: int8 (two products a PE cycle) or int4 (four), Q and K
    /// quantized on the host (Q per token, K per block); "none" for QK in the operand format.
    #[arg(long)]
    pub qk_format: Option<String>,
    /// Override: where a PE's MAC runs accumulate: auto (the MAC's pipeline where the design
    /// can: add_latency 1, floating-point QK, the default), pipeline, or register-file (every
    /// MAC reads and writes its register).
    #[arg(long)]
    pub accumulate: Option<String>,
}

/// A configuration from a TOML file, with the file named in any error.
fn load_config(path: &std::path::Path) -> Result<CoreConfig> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read config file {}", path.display()))?;
    let (cfg, notes) = CoreConfig::from_toml_with_notes(&text)
        .with_context(|| format!("config file {}", path.display()))?;
    for n in notes {
        eprintln!("note: config file {}: {n}", path.display());
    }
    Ok(cfg)
}

/// The energy table a command prices with (`sim`, `compare`, `estimate`).
#[derive(Args, Debug)]
pub struct EnergyArgs {
    /// Energy table (TOML) over the default (kernels/src/energy.rs, docs/energy.md): any
    /// subset of figures, storage points and knobs; unknown keys are refused. `gates`: the
    /// design's PE and PE row measured at gate level at nangate45 (`regflash power`, cached
    /// after the first run) price its MACs, register files, softmax, P banks, and the PEs' and
    /// rows' clock, leakage and control.
    #[arg(long)]
    pub energy: Option<PathBuf>,
    /// The off-chip memory energy prices: hbm2 (the default), lpddr4, gddr5 or ddr3, each
    /// with its source (docs/energy.md).
    #[arg(long)]
    pub dram: Option<String>,
}

impl EnergyArgs {
    /// The table these arguments name for the design `cfg`.
    pub fn table(&self, cfg: &CoreConfig) -> Result<kernels::energy::EnergyTable> {
        let path = self.energy.as_deref();
        let gates = path.is_some_and(|p| p == std::path::Path::new("gates") && !p.exists());
        let t = if gates {
            let opt = crate::power::Options {
                lib: Some("nangate45".into()),
                liberty: None,
                seq: 64,
                keep: None,
            };
            eprintln!(
                "--energy gates: the PE and its row at gate level (nangate45, a reg2d run of 64 \
                 tokens; measured once, about 8 minutes on two cores, then cached)"
            );
            // The PE of this configuration, measured in its register design's run (every
            // variant has the same PE; their activities differ by a few per cent).
            let reg2d = cfg.with_variant(VariantKind::Reg2d);
            let pe = crate::power::characterize(&reg2d, crate::power::Block::Pe, &opt)
                .context("--energy gates: the PE's gate-level characterization")?;
            let row = crate::power::characterize(&reg2d, crate::power::Block::Row, &opt)
                .context("--energy gates: the PE row's gate-level characterization")?;
            let text = crate::power::table_toml(&pe, Some(&row))?;
            let t = crate::pricing::table_from_toml(&text, "gates")?;
            crate::pricing::with_dram(t, self.dram.as_deref())?
        } else {
            crate::pricing::load_table(path, self.dram.as_deref())?
        };
        if let Some(g) = &t.gates {
            let module = cfg.pe().module_name();
            anyhow::ensure!(
                g.module == module,
                "the energy table's gate-level PE is {}, this design's is {module}: measure it \
                 with `regflash power` on this configuration, or use --energy gates",
                g.module
            );
        }
        Ok(t)
    }
}

/// The random problems and memory of a run plan (`bench`, `compare`).
#[derive(Args, Debug)]
pub struct RunArgs {
    /// Attention heads per run.
    #[arg(long, default_value_t = 1)]
    pub heads: usize,
    /// Seed of the random inputs.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Memory read latency in cycles.
    #[arg(long, default_value_t = 20)]
    pub mem_latency: u32,
}

impl RunArgs {
    pub fn check(&self) -> Result<()> {
        anyhow::ensure!(self.heads >= 1, "--heads must be at least 1");
        Ok(())
    }

    /// The memory model's timing: the latency, random back-pressure off, the inputs' seed.
    pub fn timing(&self) -> crate::verify::attention::MemoryTiming {
        crate::verify::attention::MemoryTiming {
            latency: self.mem_latency,
            seed: self.seed,
            ..Default::default()
        }
    }
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
        if let Some(v) = self.variant {
            cfg = cfg.with_variant(v);
        }
        if let Some(v) = self.tiers {
            cfg.stack_mut("--tiers")?.tiers = v;
        }
        if let Some(v) = self.vlink_latency {
            cfg.stack_mut("--vlink-latency")?.vlink_latency = v;
        }
        if let Some(v) = self.vlink_bits {
            cfg.stack_mut("--vlink-bits")?.vlink_bits = v;
        }
        if let Some(v) = self.flit_bits {
            cfg.noc_mut("--flit-bits")?.flit_bits = v;
        }
        if let Some(v) = self.hops {
            cfg.noc_mut("--hops")?.hops = v;
        }
        if let Some(v) = self.buffer_depth {
            cfg.noc_mut("--buffer-depth")?.buffer_depth = v;
        }
        if let Some(v) = self.spares {
            cfg.vertical_mut("--spares", |s, _| *s = v)?;
        }
        if let Some(v) = self.spare_group {
            cfg.vertical_mut("--spare-group", |_, g| *g = v)?;
        }
        if let Some(v) = self.mem_if {
            cfg.mem_if = v;
        }
        if let Some(v) = self.row_keys {
            cfg.rowfused_mut("--row-keys")?.keys = v;
        }
        if self.spill {
            cfg.rowfused_mut("--spill")?.spill = true;
        }
        if self.rescale.is_some() || self.lazy_threshold.is_some() {
            let name = self.rescale.as_deref().or(Some(cfg.rescale.name()));
            // Errors name the config keys, as every override's do.
            cfg.rescale = hdl::softmax::Rescale::from_keys(name, self.lazy_threshold)?;
        }
        if let Some(key) = &self.in_format {
            cfg.set_in_format(hdl::format::in_format_from_key(key)?);
        }
        if let Some(key) = &self.qk_format {
            cfg.qk_format = match key.as_str() {
                "none" => None,
                k => Some(hdl::format::qk_format_from_key(k)?),
            };
        }
        if let Some(key) = &self.accumulate {
            cfg.accumulate = hdl::array::pe::Accumulate::from_key(key)?;
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
    /// (fp_mul_e5m10, fp_add_e8m23, mac, pe, fp_exp2_e8m23, row_reduce, mask_gen, dma,
    /// pe_row, ...; an unknown name lists them all). The floating-point units' former names
    /// (fp16_mul, fp32_add, fp16_to_fp32, exp2, ...) are accepted as aliases.
    #[arg(long)]
    pub unit: Option<String>,
    /// Output folder (created if missing; a folder from an earlier run is cleaned first).
    #[arg(long)]
    pub out: PathBuf,
}

/// Runs a parsed command line.
pub fn run(cli: Cli) -> Result<ExitCode> {
    match cli.command {
        Command::Gen(args) => gen_cmd(args),
        Command::Sim(args) => sim_cmd(args),
        Command::Bench(args) => bench_cmd(args),
        Command::Merge(args) => merge_cmd(args),
        Command::Compare(args) => compare_cmd(args),
        Command::Estimate(args) => estimate_cmd(args),
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
        Command::Power(args) => power_cmd(args),
        Command::Thermal(args) => thermal_cmd(args),
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
        None => Target::Top,
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

fn write_json<T: Serialize + ?Sized>(path: &std::path::Path, value: &T) -> Result<()> {
    std::fs::write(path, serde_json::to_string_pretty(value)? + "\n")
        .with_context(|| format!("cannot write report {}", path.display()))
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
