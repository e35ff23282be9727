//! `regflash bench`: utilization over presets, sequence lengths and causal masking.

use super::*;

#[derive(Args, Debug)]
pub struct BenchArgs {
    /// Presets to run, comma separated (default small,medium,npu16 when no --config is given).
    #[arg(long, value_delimiter = ',')]
    pub presets: Vec<String>,
    /// TOML configuration files to run as well (repeatable), e.g. a preset with a wider port.
    #[arg(long = "config")]
    pub configs: Vec<PathBuf>,
    /// Variants to run each configuration as, comma separated (reg2d, buf2d, reg3d, rowfused,
    /// unfused, noc2d; default: each configuration's own).
    #[arg(long, value_delimiter = ',')]
    pub variants: Vec<VariantKind>,
    /// reg3d's tier counts to run it with, comma separated (2, 3; default: each
    /// configuration's own). Other variants run once.
    #[arg(long, value_delimiter = ',')]
    pub tiers: Vec<u32>,
    /// S link widths to run reg3d with three tiers at, comma separated (1, 2, 4, 8, 16, 32;
    /// default: each configuration's own).
    #[arg(long, value_delimiter = ',')]
    pub vlink_bits: Vec<u32>,
    /// Sequence lengths, comma separated; each runs non-causal and causal.
    #[arg(long, value_delimiter = ',', default_value = "256,1024,4096")]
    pub seq: Vec<usize>,
    #[command(flatten)]
    pub run: RunArgs,
    /// Write the markdown table here as well as to standard output.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Write every run's report as JSON.
    #[arg(long)]
    pub report: Option<PathBuf>,
    /// Run only shard i of n (0 <= i < n) of the (configuration, sequence length) points, for a
    /// job array; `regflash merge` joins the shards' --report files.
    #[arg(long)]
    pub shard: Option<String>,
}

#[derive(Args, Debug)]
pub struct MergeArgs {
    /// The shards' JSON reports (`regflash bench --shard i/n --report ...`, or `regflash
    /// verify --shard i/n --report ...`).
    #[arg(required = true)]
    pub reports: Vec<PathBuf>,
    /// Write the merged markdown table here as well as to standard output.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Write the merged JSON report (equal to the unsharded run's).
    #[arg(long)]
    pub report: Option<PathBuf>,
}

pub(super) fn merge_cmd(args: MergeArgs) -> Result<ExitCode> {
    for path in args.out.iter().chain(&args.report) {
        check_writable(path)?;
    }
    let mut bench_rows = vec![];
    let mut verify_parts = vec![];
    for path in &args.reports {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read {}", path.display()))?;
        let what = || {
            format!(
                "{} is not a `regflash bench --report` or `regflash verify --report` file",
                path.display()
            )
        };
        let value: serde_json::Value = serde_json::from_str(&text).with_context(what)?;
        if value.is_array() {
            let part: Vec<crate::bench::BenchRow> =
                serde_json::from_str(&text).with_context(what)?;
            bench_rows.extend(part);
        } else {
            let part: super::verify::VerifyReport =
                serde_json::from_str(&text).with_context(what)?;
            verify_parts.push(part);
        }
    }
    anyhow::ensure!(
        bench_rows.is_empty() || verify_parts.is_empty(),
        "the reports mix bench and verify runs: merge each command's shards on their own"
    );
    if !verify_parts.is_empty() {
        anyhow::ensure!(
            args.out.is_none(),
            "--out is for bench tables: a verify merge prints its table and writes --report"
        );
        let report = super::verify::VerifyReport::merge(verify_parts)?;
        super::verify::print_verify(&report);
        if let Some(path) = &args.report {
            write_json(path, &report)?;
        }
        return Ok(exit(report.passed));
    }
    let rows = crate::bench::merge(bench_rows)?;
    emit_bench(&rows, args.out.as_deref(), args.report.as_deref())
}

/// Prints the table and writes the outputs of a finished bench; exit status 1 if any run failed.
fn emit_bench(
    rows: &[crate::bench::BenchRow],
    out: Option<&std::path::Path>,
    report: Option<&std::path::Path>,
) -> Result<ExitCode> {
    let table = crate::bench::table(rows);
    println!("{table}");
    if let Some(path) = out {
        std::fs::write(path, &table).with_context(|| format!("cannot write {}", path.display()))?;
    }
    if let Some(path) = report {
        write_json(path, rows)?;
    }
    Ok(exit(rows.iter().all(|r| r.report.passed)))
}

pub(super) fn bench_cmd(args: BenchArgs) -> Result<ExitCode> {
    use crate::bench;
    args.run.check()?;
    for path in args.out.iter().chain(&args.report) {
        check_writable(path)?;
    }
    let shard = args
        .shard
        .as_deref()
        .map(crate::bench::Shard::parse)
        .transpose()?;
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
    if !args.variants.is_empty() {
        configs = configs
            .iter()
            .flat_map(|c| args.variants.iter().map(|&v| c.with_variant(v)))
            .collect();
    }
    if !args.tiers.is_empty() {
        configs = configs
            .iter()
            .flat_map(|c| match c.variant.stack() {
                Some(&s) => args
                    .tiers
                    .iter()
                    .map(|&tiers| CoreConfig {
                        variant: Variant::Reg3d(StackParams { tiers, ..s }),
                        ..c.clone()
                    })
                    .collect(),
                None => vec![c.clone()],
            })
            .collect();
    }
    if !args.vlink_bits.is_empty() {
        configs = configs
            .iter()
            .flat_map(|c| match c.variant.stack().filter(|s| s.tiers == 3) {
                Some(&s) => args
                    .vlink_bits
                    .iter()
                    .map(|&vlink_bits| CoreConfig {
                        variant: Variant::Reg3d(StackParams { vlink_bits, ..s }),
                        ..c.clone()
                    })
                    .collect(),
                None => vec![c.clone()],
            })
            .collect();
    }
    let plan = bench::BenchPlan {
        configs,
        seq_lens: args.seq.clone(),
        heads: args.run.heads,
        timing: args.run.timing(),
        seed: args.run.seed,
        shard,
    };
    let mut bar = progress_bar();
    let rows = bench::run(
        &plan,
        |row| {
            let r = &row.report;
            eprintln!(
                "\r{} {} seq {} {}: {} cycles, utilization {:.1} %{}",
                r.preset,
                r.variant,
                r.seq_len,
                if r.causal { "causal" } else { "non-causal" },
                r.cycles,
                100.0 * r.utilization,
                if r.passed { "" } else { ", MISMATCH" }
            );
        },
        |_, done, estimate| bar(done, estimate),
    )?;
    emit_bench(&rows, args.out.as_deref(), args.report.as_deref())
}
