//! `regflash thermal`: a design's die stack at a clock, each tier's peak and mean temperature
//! and its hotspot's block, heat maps, and the highest clock that keeps every tier within the
//! limit (docs/thermal.md).

use super::*;
use crate::die_stack::{self, MemoryTier, PartPower};
use crate::thermal::{self, Solution, Stack};

#[derive(Args, Debug)]
pub struct ThermalArgs {
    #[command(flatten)]
    pub config: ConfigArgs,
    /// Clocks to solve at, MHz, comma separated (default: the configuration's clock_mhz).
    #[arg(long, value_delimiter = ',')]
    pub clock_mhz: Vec<f64>,
    /// The workload whose average power heats the stack: sequence length (queries = keys).
    #[arg(long, default_value_t = 4096)]
    pub seq: usize,
    /// Attention heads.
    #[arg(long, default_value_t = 1)]
    pub heads: usize,
    /// Causal masking.
    #[arg(long)]
    pub causal: bool,
    /// Where the stacked memory die (the GLB's, or 3-D buffered's banks) goes: near-lid
    /// (above the logic, under the heat sink: the seed's choice) or near-logic (below the
    /// logic, on the package side, the logic under the lid).
    #[arg(long, default_value = "near-lid")]
    pub memory_tier: MemoryTier,
    /// buf2d's SRAM banks on a die of their own above the array (the "3-D buffered" design).
    #[arg(long)]
    pub stacked_banks: bool,
    /// The hotspot limit, °C.
    #[arg(long, default_value_t = thermal::LIMIT_C)]
    pub limit_c: f64,
    /// The air around the heat sink, °C (HotSpot's default 45).
    #[arg(long)]
    pub ambient_c: Option<f64>,
    /// Cells a side of each layer's grid.
    #[arg(long, default_value_t = 32)]
    pub grid: usize,
    /// The floorplans' library and SRAM, as `compare --iso area` prices them.
    #[command(flatten)]
    pub silicon: super::SiliconArgs,
    #[command(flatten)]
    pub energy: super::EnergyArgs,
    /// Write a heat map of every die at every clock (SVG) into this folder.
    #[arg(long)]
    pub heatmap: Option<PathBuf>,
    /// Write the stack, the parts' power and every solution as JSON.
    #[arg(long)]
    pub report: Option<PathBuf>,
}

#[derive(Serialize)]
struct ThermalReport<'a> {
    preset: &'a str,
    variant: String,
    seq_len: usize,
    heads: usize,
    causal: bool,
    memory_tier: MemoryTier,
    library: &'a str,
    energy_basis: String,
    parts: &'a [PartPower],
    runs: Vec<(f64, &'a Stack, &'a Solution)>,
    max_clock_mhz: Option<f64>,
    limit_c: f64,
}

/// The highest clock the sweep tries, MHz.
const MAX_MHZ: f64 = 20_000.0;

/// The node of a library's label (`45 nm`), if it has one.
fn node_nm(label: &str) -> Option<f64> {
    label.strip_suffix(" nm")?.trim().parse().ok()
}

pub(super) fn thermal_cmd(args: ThermalArgs) -> Result<ExitCode> {
    for path in args.report.iter() {
        check_writable(path)?;
    }
    anyhow::ensure!(args.heads >= 1, "--heads must be at least 1");
    anyhow::ensure!(args.seq >= 1, "--seq takes a sequence length of at least 1");
    anyhow::ensure!(
        (4..=256).contains(&args.grid),
        "--grid is the cells a side of each layer's grid: 4 to 256, not {}",
        args.grid
    );
    anyhow::ensure!(
        args.limit_c.is_finite(),
        "--limit-c is a temperature in °C, not {}",
        args.limit_c
    );
    let ambient = args
        .ambient_c
        .unwrap_or(thermal::Package::hotspot().ambient_c);
    anyhow::ensure!(
        ambient.is_finite() && ambient > -273.15 && ambient < args.limit_c,
        "--ambient-c is the air's temperature in °C, below --limit-c ({}), not {ambient}",
        args.limit_c
    );
    let mut cfg = args.config.resolve()?;
    let clocks = if args.clock_mhz.is_empty() {
        vec![cfg.clock_mhz]
    } else {
        args.clock_mhz.clone()
    };
    for &c in &clocks {
        anyhow::ensure!(
            c.is_finite() && c > 0.0 && c <= MAX_MHZ,
            "--clock-mhz takes clocks above 0 and at most 20,000 MHz, not {c}"
        );
    }
    anyhow::ensure!(
        !args.stacked_banks || cfg.variant.plan().s_in_sram(),
        "--stacked-banks puts buf2d's SRAM banks on a die of their own (3-D buffered), but {} \
         has none: use --variant buf2d",
        cfg.variant.label()
    );
    if let Some(note) = crate::bench::widen(&mut cfg, args.heads, args.seq) {
        eprintln!("note: {note}");
    }
    let p = hdl::core::CoreParams::from_config(&cfg)?;
    let table = args.energy.table(&cfg)?;
    let utilization = args.silicon.utilization()?;
    // A known library's node against the table's, before the library is looked for.
    if let Some(&(name, node, _)) = args.silicon.known() {
        let lib_nm = node_nm(node).unwrap_or(table.node_nm);
        anyhow::ensure!(
            (lib_nm - table.node_nm).abs() < 0.5,
            "the energy table prices at {} nm but the floorplans are {name}'s ({node}): give \
             --energy a table with node_nm = {lib_nm}, or use --lib nangate45 with the default \
             table",
            table.node_nm
        );
    }
    let scratch = ScratchDir::new("thermal")?;
    let (library, (name, node), density) = args.silicon.resolve(scratch.path())?;
    // The run: the cycle model's counters, priced at the configuration's clock.
    let mem = crate::verify::attention::MemoryTiming::default().model_timing();
    let point = crate::estimate::point(&cfg, &p, &table, mem, (args.seq, args.heads, args.causal))?;
    let tokens = (args.heads * args.seq) as u64;
    let energy = crate::pricing::report(&table, &cfg, &point.counters, tokens, args.stacked_banks);
    eprintln!(
        "thermal: mapping the design at {name} for its floorplans (each module once, cached)"
    );
    let mapped = crate::area::map_design(&cfg, &library, (&name, &node), cfg.clock_mhz, false)?;
    let placed = crate::area::placed(
        &mapped.config,
        &mapped.parts,
        (&density, utilization),
        args.stacked_banks,
    );
    let g = crate::pricing::geometry(&cfg, args.stacked_banks);
    let pe_share = die_stack::pe_static_share(&table, g.pes, g.rows);
    let parts = die_stack::part_power(&placed, &energy, point.cycles, (cfg.clock_mhz, pe_share))?;
    let label = if args.stacked_banks {
        "3-D buffered".to_string()
    } else {
        cfg.variant.label()
    };
    println!(
        "regflash thermal: {} {label}, {} head(s) of {} tokens{}, {:.1} % utilization; floorplans \
         at {name} ({node}, synthesis-level cell area at {:.0} % utilization, macros at {}); \
         memory die {}\n",
        cfg.name,
        args.heads,
        args.seq,
        if args.causal { ", causal" } else { "" },
        100.0 * point.utilization,
        100.0 * utilization,
        density.source,
        match args.memory_tier {
            MemoryTier::NearLid => "near the lid",
            MemoryTier::NearLogic => "below the logic",
        }
    );
    let mut runs = vec![];
    for &mhz in &clocks {
        let stack = die_stack::stack(&parts, mhz, args.memory_tier, ambient)?;
        let sol = match stack.solve(args.grid) {
            Ok(sol) => sol,
            Err(e @ thermal::ThermalError::Runaway { .. }) => {
                println!(
                    "at {mhz:.0} MHz: {e}: ABOVE the {:.0} °C limit\n",
                    args.limit_c
                );
                continue;
            }
            Err(e) => return Err(e.into()),
        };
        println!(
            "at {mhz:.0} MHz: {:.2} W on the stack ({:.2} W of it leakage at temperature), \
             package {:.1} °C ({:.3} K/W to {:.0} °C air), {} leakage iterations",
            sol.power_w,
            sol.leakage_w,
            sol.package_c,
            sol.package_k_per_w,
            stack.package.ambient_c,
            sol.iterations
        );
        println!("\n| die | peak °C | mean °C | hotspot | power W | of it leakage W |");
        println!("|---|---:|---:|---|---:|---:|");
        for (_, l) in sol.dies(&stack) {
            println!(
                "| {} | {:.1} | {:.1} | {} | {:.3} | {:.3} |",
                l.name,
                l.peak_c,
                l.mean_c,
                l.hotspot.as_deref().unwrap_or("-"),
                l.power_w,
                l.leakage_w
            );
        }
        let verdict = if sol.peak_c() <= args.limit_c {
            "within"
        } else {
            "ABOVE"
        };
        println!(
            "\npeak {:.1} °C: {verdict} the {:.0} °C limit\n",
            sol.peak_c(),
            args.limit_c
        );
        runs.push((mhz, stack, sol));
    }
    let top = die_stack::max_clock(
        &parts,
        (args.memory_tier, args.grid, ambient),
        args.limit_c,
        MAX_MHZ,
    )?;
    match top {
        None => println!("no clock keeps every die within {:.0} °C", args.limit_c),
        Some(c) if c >= MAX_MHZ => println!(
            "every die stays within {:.0} °C up to 20,000 MHz",
            args.limit_c
        ),
        Some(c) => println!(
            "the highest clock that keeps every die within {:.0} °C: {c:.0} MHz",
            args.limit_c
        ),
    }
    println!(
        "(timing is another bound: `regflash estimate --clock synth` gives the design's \
         synthesis-level fmax at the library)"
    );
    let assumed: f64 = parts
        .iter()
        .map(|p| p.assumed_pj_per_cycle * clocks[0] * 1e-6 + p.assumed_leakage_w)
        .sum();
    let all: f64 = parts.iter().map(|p| p.watts(clocks[0])).sum();
    println!(
        "\npower: the run's energy by component at {} (DRAM's left off the stack); the logic \
         outside the PEs, whose clock and leakage the table does not price, at the PEs' own \
         clock-and-leakage per mm² ({:.1} % of the power at {:.0} MHz). Leakage from 25 °C, \
         {}. Stack: {}; bonds and BEOL {}; package: {}.",
        energy.basis,
        100.0 * assumed / all.max(f64::MIN_POSITIVE),
        clocks[0],
        runs[0].1.leakage.source,
        runs[0].1.layers[0].source,
        runs[0]
            .1
            .layers
            .iter()
            .find(|l| l.blocks.is_empty())
            .map_or("(one die: none)".to_string(), |l| l.source.clone()),
        runs[0].1.package.source
    );
    if let Some(dir) = &args.heatmap {
        std::fs::create_dir_all(dir)
            .with_context(|| format!("cannot create --heatmap folder {}", dir.display()))?;
        for (mhz, stack, sol) in &runs {
            let lo = stack.package.ambient_c;
            let hi = sol.peak_c();
            for (s, l) in sol.dies(stack) {
                let file = dir.join(format!(
                    "{}_{}_{mhz:.0}MHz_{}.svg",
                    cfg.name,
                    label.replace(' ', "_"),
                    l.name
                        .chars()
                        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
                        .collect::<String>()
                ));
                std::fs::write(
                    &file,
                    thermal::heat_map_svg(l, &s.blocks, sol.grid, (lo, hi)),
                )
                .with_context(|| format!("cannot write {}", file.display()))?;
            }
        }
        println!("heat maps in {}", dir.display());
    }
    if let Some(path) = &args.report {
        let report = ThermalReport {
            preset: &cfg.name,
            variant: label.clone(),
            seq_len: args.seq,
            heads: args.heads,
            causal: args.causal,
            memory_tier: args.memory_tier,
            library: &name,
            energy_basis: energy.basis.clone(),
            parts: &parts,
            runs: runs.iter().map(|(m, s, x)| (*m, s, x)).collect(),
            max_clock_mhz: top,
            limit_c: args.limit_c,
        };
        write_json(path, &report)?;
    }
    Ok(ExitCode::SUCCESS)
}
