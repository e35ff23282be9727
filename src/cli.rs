//! Command-line parsing and the subcommands.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;
use clap::{Args, Parser, Subcommand};
use hdl::config::CoreConfig;

use crate::design::{generate, Target};

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
    /// Write Verilog, files.f and manifest.json for a preset design or one unit.
    Gen(GenArgs),
    /// Run `verilator --lint-only -Wall` and Yosys synthesis checks on a generated folder.
    Lint {
        /// Folder written by `regflash gen`.
        dir: PathBuf,
    },
}

/// Which configuration to start from and how to change it.
#[derive(Args, Debug, Clone)]
pub struct ConfigArgs {
    /// Built-in preset (seed, small).
    #[arg(long, default_value = "seed")]
    pub preset: String,
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

impl ConfigArgs {
    pub fn resolve(&self) -> Result<CoreConfig> {
        let mut cfg = CoreConfig::preset(&self.preset)?;
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
    /// (fp16_mul, fp32_add, fp16_to_fp32, fp32_to_fp16, mac, pe, pe_grid).
    #[arg(long)]
    pub unit: Option<String>,
    /// Output folder (created if missing; a folder from an earlier run is cleaned first).
    #[arg(long)]
    pub out: PathBuf,
}

/// Runs a parsed command line.
pub fn run(cli: Cli) -> Result<ExitCode> {
    match cli.command {
        Command::Gen(args) => {
            let cfg = args.config.resolve()?;
            let target = match &args.unit {
                Some(u) => Target::Unit(u.clone()),
                None => Target::Core,
            };
            let manifest = generate(&cfg, &target, &args.out)?;
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
        Command::Lint { dir } => {
            let report = gen::flow::lint(&dir)?;
            println!("{}", report.summary());
            Ok(if report.passed() {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            })
        }
    }
}
