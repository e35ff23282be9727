//! `regflash verify`: every block of the registry generated, linted, synthesized and checked
//! against its bit-exact model under Verilator.

use super::*;

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
    /// Check only these blocks (repeatable; the floating-point units' former names, such as
    /// fp16_mul, are accepted as aliases); default: every block.
    #[arg(long = "unit")]
    pub units: Vec<String>,
    /// Also write the report as JSON.
    #[arg(long)]
    pub report: Option<PathBuf>,
    /// Check only shard i of n (0 <= i < n) of the selected blocks, for a job array;
    /// `regflash merge` joins the shards' --report files.
    #[arg(long)]
    pub shard: Option<String>,
}

#[derive(Serialize, Deserialize)]
pub(super) struct VerifyBlock {
    unit: String,
    passed: bool,
    error: Option<String>,
    check: Option<BlockReport>,
    lint_clean: bool,
    lint: Vec<String>,
    cells: u64,
    flip_flops: u64,
}

#[derive(Serialize, Deserialize)]
pub(super) struct VerifyReport {
    preset: String,
    config: CoreConfig,
    seed: u64,
    /// Random vectors per pure unit.
    vectors: u32,
    pub(super) passed: bool,
    /// Every block the run selected (all shards'), in order; `blocks` holds this shard's.
    units: Vec<String>,
    blocks: Vec<VerifyBlock>,
    /// Blocks without a port-level model, checked as part of the whole core.
    checked_within_core: Vec<String>,
}

impl VerifyReport {
    /// Joins the reports of a verify run's shards into the unsharded run's: one run (config,
    /// seed, vectors, block list), every selected block exactly once, in the run's order.
    pub(super) fn merge(parts: Vec<VerifyReport>) -> Result<VerifyReport> {
        let mut parts = parts.into_iter();
        let mut all = parts.next().context("nothing to merge")?;
        for p in parts {
            anyhow::ensure!(
                p.config == all.config
                    && p.seed == all.seed
                    && p.vectors == all.vectors
                    && p.units == all.units,
                "the reports come from different `regflash verify` runs (configuration, seed, \
                 vectors or blocks differ): merge the shards of one command line"
            );
            all.blocks.extend(p.blocks);
        }
        let mut taken: Vec<Option<VerifyBlock>> = all.blocks.drain(..).map(Some).collect();
        for u in &all.units {
            let found: Vec<usize> = (0..taken.len())
                .filter(|&i| taken[i].as_ref().is_some_and(|b| &b.unit == u))
                .collect();
            anyhow::ensure!(
                found.len() == 1,
                "block `{u}` appears {} times (expected once): {}",
                found.len(),
                if found.is_empty() {
                    "a shard is missing"
                } else {
                    "a shard was given twice"
                }
            );
            all.blocks.push(taken[found[0]].take().expect("found"));
        }
        anyhow::ensure!(
            taken.iter().all(Option::is_none),
            "a report holds blocks its run did not select"
        );
        all.passed = all.blocks.iter().all(|b| b.passed);
        Ok(all)
    }
}

pub(super) fn verify_cmd(args: VerifyArgs) -> Result<ExitCode> {
    let cfg = args.config.resolve()?;
    if let Some(path) = &args.report {
        check_writable(path)?;
    }
    // The blocks asked for, by their registry names (an alias names its unit).
    let wanted = args
        .units
        .iter()
        .map(|u| Ok(units::unit(u)?.name))
        .collect::<Result<Vec<&str>>>()?;
    // A block without a port-level model is checked within another (pe_row within the core):
    // a whole run lists it, and checks it only when asked for by name (which explains).
    let within = |u: &units::Unit| matches!(u.check, Check::Within(_));
    let selected: Vec<&str> = UNITS
        .iter()
        .filter(|u| wanted.is_empty() || wanted.contains(&u.name))
        .filter(|u| !within(u) || !args.units.is_empty())
        .map(|u| u.name)
        .collect();
    let shard = args
        .shard
        .as_deref()
        .map(crate::bench::Shard::parse)
        .transpose()?;
    let mine: Vec<&str> = selected
        .iter()
        .enumerate()
        .filter(|(k, _)| shard.is_none_or(|sh| sh.has(*k)))
        .map(|(_, u)| *u)
        .collect();
    let mut blocks = vec![];
    for unit in &mine {
        eprintln!(
            "[{}/{}] {unit}: generate, lint, synthesize, simulate ...",
            blocks.len() + 1,
            mine.len()
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
    let within_core: Vec<String> = if args.units.is_empty() {
        UNITS
            .iter()
            .filter(|u| matches!(u.check, Check::Within(_)))
            .map(|u| u.name.to_string())
            .collect()
    } else {
        vec![]
    };
    let report = VerifyReport {
        preset: cfg.name.clone(),
        config: cfg.clone(),
        seed: args.seed,
        vectors: args.vectors,
        passed: blocks.iter().all(|b| b.passed),
        units: selected.iter().map(|u| u.to_string()).collect(),
        blocks,
        checked_within_core: within_core,
    };
    print_verify(&report);
    if let Some(path) = &args.report {
        write_json(path, &report)?;
    }
    Ok(exit(report.passed))
}

/// The markdown table of a verify report and its verdict.
pub(super) fn print_verify(report: &VerifyReport) {
    let (cfg, blocks, passed) = (&report.config, &report.blocks, report.passed);
    println!(
        "regflash verify --preset {} ({}x{} PEs, {} registers/PE)\n",
        cfg.name, cfg.rows, cfg.cols, cfg.regs_per_pe
    );
    println!("| block | module | latency | directed | random | RTL = model | lint + synth | cells | flip-flops | checked cycles/s |");
    println!("|---|---|---:|---:|---:|---|---|---:|---:|---:|");
    for b in blocks {
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
        // A block checked only within another was not compared here: say so, not MISMATCH.
        let within = units::unit(&b.unit).ok().and_then(|u| match u.check {
            Check::Within(block) => Some(block),
            _ => None,
        });
        let verdict = match (&b.error, within) {
            (None, _) => "yes, bit exact".to_string(),
            (Some(_), Some(block)) => {
                format!("**not checked alone** (no port-level model: use `--unit {block}`)")
            }
            (Some(_), None) => "**MISMATCH**".to_string(),
        };
        println!(
            "| {} | {module} | {latency} | {directed} | {random} | {verdict} | {} | {} | {} | {rate} |",
            b.unit,
            if b.lint_clean { "clean" } else { "**FAILED**" },
            b.cells,
            b.flip_flops,
        );
    }
    for name in &report.checked_within_core {
        if let Ok(&units::Unit {
            check: Check::Within(block),
            ..
        }) = units::unit(name)
        {
            println!(
                "| {name} | - | - | - | - | checked within `{block}` (no port-level model of its \
                 own) | - | - | - | - |"
            );
        }
    }
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
}
