//! `regflash synth`: Yosys synthesis of a preset design or one unit, and its cell table.

use super::*;

#[derive(Args, Debug)]
pub struct SynthArgs {
    #[command(flatten)]
    pub config: ConfigArgs,
    /// Synthesize one block instead of the whole design (a name `gen --unit` takes; the
    /// floating-point units' former names, such as fp16_mul, are accepted as aliases).
    #[arg(long)]
    pub unit: Option<String>,
    /// generic (Yosys cells, longest paths), ice40 (LUT4s; place and route for fmax), xilinx
    /// (7-series LUTs, DSPs, RAMs) or asic (a standard-cell library: µm² per module, OpenSTA's
    /// critical paths; needs --lib or --liberty).
    #[arg(long, default_value = "generic", value_parser = ["generic", "ice40", "xilinx", "asic"])]
    pub target: String,
    /// iCE40: skip nextpnr place and route (no fmax).
    #[arg(long)]
    pub no_pnr: bool,
    /// ASIC: a known library: nangate45, asap7, sky130hd, sg13g2 (from the PDK folder:
    /// REGFLASH_PDK_DIR, else ../shared/pdk) or osu018 (Debian's qflow-tech-osu018).
    #[arg(long)]
    pub lib: Option<String>,
    /// ASIC: a liberty file (.lib or .lib.gz) instead of --lib.
    #[arg(long)]
    pub liberty: Option<PathBuf>,
    /// ASIC: the target clock in MHz for the constraints (default: the design's, 1500).
    #[arg(long)]
    pub clock_mhz: Option<f64>,
    /// ASIC: the placement utilization the report's placed area takes (the share of the
    /// placed area the standard cells fill; default 0.7).
    #[arg(long)]
    pub utilization: Option<f64>,
    /// ASIC: map only shard i of n (0 <= i < n) of the design's modules into the cache, for a
    /// job array whose shards share the cache folder (REGFLASH_CACHE_DIR); a run without
    /// --shard on that cache then maps what is left (the modules mapped again for their
    /// loads) and times the design.
    #[arg(long)]
    pub shard: Option<String>,
    /// Also write the report as JSON.
    #[arg(long)]
    pub report: Option<PathBuf>,
}

pub(super) fn synth_cmd(args: SynthArgs) -> Result<ExitCode> {
    let cfg = args.config.resolve()?;
    if let Some(path) = &args.report {
        check_writable(path)?;
    }
    if args.target == "asic" {
        return asic_cmd(&cfg, &args);
    }
    anyhow::ensure!(
        args.lib.is_none()
            && args.liberty.is_none()
            && args.clock_mhz.is_none()
            && args.utilization.is_none()
            && args.shard.is_none(),
        "--lib, --liberty, --clock-mhz, --utilization and --shard are for --target asic"
    );
    let synth_target: SynthTarget = args.target.parse()?;
    let dir = ScratchDir::new("synth")?;
    let manifest = generate(&cfg, &target(&args.unit), dir.path())?;
    let report = gen::flow::synth(dir.path(), synth_target, !args.no_pnr)?;
    println!("{}", synth_table(&report));
    println!("{}", memory_table(&manifest.memories));
    let parts = crate::tiers::parts(&cfg, &report, &manifest.memories);
    if parts.len() > 1 {
        println!(
            "\nBy tier (each part a module: Yosys's cells and flip-flops, the design's memory \
             bits; see analysis/src/tiers.rs):{}",
            crate::tiers::table(&parts)
        );
    }
    if let Some(path) = &args.report {
        write_json(path, &report)?;
    }
    Ok(exit(report.passed()))
}

/// `synth --target asic`: the design at a standard-cell library, area per module and each
/// module's worst path.
fn asic_cmd(cfg: &CoreConfig, args: &SynthArgs) -> Result<ExitCode> {
    let utilization = crate::area::check_utilization(
        args.utilization.unwrap_or(crate::area::DEFAULT_UTILIZATION),
    )?;
    let shard = args
        .shard
        .as_deref()
        .map(crate::bench::Shard::parse)
        .transpose()?;
    let (source, name, node) = gen::asic::resolve(args.lib.as_deref(), args.liberty.as_deref())?;
    let dir = ScratchDir::new("synth")?;
    let manifest = generate(cfg, &target(&args.unit), dir.path())?;
    let lib = gen::asic::load(&source, &name, dir.path())?;
    let clock = args.clock_mhz.unwrap_or(manifest.clock_mhz);
    if let Some(sh) = shard {
        return asic_shard(&manifest, (dir.path(), &lib), (&name, clock), sh, args);
    }
    let report = gen::asic::asic(dir.path(), &lib, (&name, &node), clock)?;
    println!("{}", asic_table(&report));
    let cells = report.total_area_um2() * 1e-6;
    println!(
        "Placed at {:.0} % utilization (--utilization; the cells' share of the placed area, \
         no floorplan run): {:.4} mm² of standard cells",
        100.0 * utilization,
        cells / utilization
    );
    println!("{}", asic_memories(&report, &manifest.memories));
    let parts = crate::tiers::parts(cfg, &report, &manifest.memories);
    if parts.len() > 1 {
        println!(
            "\nBy tier (each part's modules, their area with every instance; see analysis/src/tiers.rs):{}",
            crate::tiers::table(&parts)
        );
    }
    if let Some(path) = &args.report {
        write_json(path, &report)?;
    }
    Ok(exit(report.passed()))
}

/// `synth --target asic --shard i/n`: shard i's modules mapped into the cache, and what to run
/// next.
fn asic_shard(
    manifest: &gen::manifest::Manifest,
    (dir, lib): (&std::path::Path, &gen::asic::Liberty),
    (name, clock): (&str, f64),
    sh: crate::bench::Shard,
    args: &SynthArgs,
) -> Result<ExitCode> {
    let modules = gen::asic::map_shard(dir, lib, clock, (sh.index, sh.count))?;
    let cache = gen::cache::cache_root().join("asic");
    println!(
        "Shard {}/{} of `{}` at {name}, {clock} MHz: {} of its {} modules mapped into {} \
         (nominal loads):\n{}\n\nOnce every shard is done, the same command without --shard, \
         on the same cache folder (REGFLASH_CACHE_DIR), maps the modules that drive heavy \
         loads again and times the design.",
        sh.index,
        sh.count,
        manifest.top,
        modules.len(),
        manifest.modules.len(),
        cache.display(),
        modules.join("\n")
    );
    if let Some(path) = &args.report {
        write_json(
            path,
            &serde_json::json!({
                "shard": format!("{}/{}", sh.index, sh.count),
                "top": manifest.top,
                "library": name,
                "clock_mhz": clock,
                "modules": modules,
            }),
        )?;
    }
    Ok(ExitCode::SUCCESS)
}

/// Markdown of an ASIC report: per module, smallest first, its area and worst path.
pub fn asic_table(r: &gen::asic::AsicReport) -> String {
    let mut s = format!(
        "ASIC synthesis of {} at {} ({}, liberty `{}`), clock {} MHz ({:.4} ns)\n\
         Figures are {}.\n\n\
         | module | copies | own cells | own area µm² | flip-flops | with submodules µm² | \
         worst path | arrival ns | min period ns | fmax MHz | hold slack ns |\n\
         |---|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|\n",
        r.top,
        r.library,
        r.node,
        r.liberty,
        r.clock_mhz,
        1000.0 / r.clock_mhz,
        r.label
    );
    for m in &r.modules {
        let flops = if m.area_um2 > 0.0 {
            format!("{:.0} %", 100.0 * m.flop_area_um2 / m.area_um2)
        } else {
            "-".into()
        };
        let (path, arrival, period, fmax) = match (&m.timing, &m.untimed) {
            (Some(t), _) => (
                format!("{} → {}", t.startpoint, t.endpoint),
                format!("{:.3}", t.arrival_ns),
                format!("{:.3}", t.min_period_ns),
                format!("{:.0}", t.fmax_mhz),
            ),
            (None, why) => (
                format!("not timed: {}", why.as_deref().unwrap_or("-")),
                "-".into(),
                "-".into(),
                "-".into(),
            ),
        };
        let hold = m
            .hold
            .as_ref()
            .map_or("-".into(), |h| format!("{:.3}", h.slack_ns));
        s += &format!(
            "| {} | {} | {} | {:.1} | {flops} | {:.1} | {path} | {arrival} | {period} | {fmax} \
             | {hold} |\n",
            m.name, m.copies, m.cells, m.area_um2, m.total_area_um2
        );
    }
    // Hold: the worst slack over the timed modules, and every violation by name.
    let holds: Vec<_> = r
        .modules
        .iter()
        .filter_map(|m| m.hold.as_ref().map(|h| (m, h)))
        .collect();
    if let Some((m, h)) = holds
        .iter()
        .min_by(|a, b| a.1.slack_ns.total_cmp(&b.1.slack_ns))
    {
        let bad: Vec<&str> = holds
            .iter()
            .filter(|(_, h)| h.slack_ns < 0.0)
            .map(|(m, _)| m.name.as_str())
            .collect();
        s += &format!(
            "\nHold: worst slack {:.3} ns in {} ({} → {}); {}\n",
            h.slack_ns,
            m.name,
            h.startpoint,
            h.endpoint,
            if bad.is_empty() {
                "no hold violation".to_string()
            } else {
                format!("hold VIOLATED in {}", bad.join(", "))
            }
        );
    }
    let total = r.total_area_um2();
    s += "\nBy block (a module whose own cells are under 1 % of its area, a wrapper, is \
          opened into its submodules):\n\n\
          | block | copies | area µm² | share | slowest module timed in it | its min period ns | fmax MHz |\n\
          |---|---:|---:|---:|---|---:|---:|\n";
    for b in r.blocks() {
        let (slow, period, fmax) = match &b.slowest {
            Some((m, t)) => (
                format!("{m}: {} → {}", t.startpoint, t.endpoint),
                format!("{:.3}", t.min_period_ns),
                format!("{:.0}", t.fmax_mhz),
            ),
            None => ("none timed".into(), "-".into(), "-".into()),
        };
        s += &format!(
            "| {} | {} | {:.1} | {:.1} % | {slow} | {period} | {fmax} |\n",
            b.name,
            b.copies,
            b.area_um2,
            100.0 * b.area_um2 / total.max(f64::MIN_POSITIVE)
        );
    }
    s += &design_fmax(r);
    if !r.remapped.is_empty() {
        let list: Vec<String> = r
            .remapped
            .iter()
            .map(|(m, pins)| format!("`{m}` ({pins})"))
            .collect();
        s += &format!(
            "\nMapped again for the load their outputs drive across the hierarchy (input pins \
             over {}, at most {}): {}\n",
            gen::asic::HEAVY_LOAD_PINS,
            gen::asic::MAX_LOAD_PINS,
            list.join(", ")
        );
    }
    if !r.remap_failed.is_empty() {
        s += &format!(
            "ABC could not map these at their loads across the hierarchy; they keep the nominal \
             load: {}\n",
            r.remap_failed.join(", ")
        );
    }
    s += &format!(
        "\n{}: {:.1} µm² ({:.4} mm²) of standard cells; latches: {}; yosys check problems: {}",
        r.top,
        total,
        total / 1e6,
        r.latches,
        r.yosys_problems.len()
    );
    s
}

/// The design's fmax: its slowest block's, with that block's worst path line by line (the
/// launch, each cell output with its delay, the capture's budget).
fn design_fmax(r: &gen::asic::AsicReport) -> String {
    let Some((block, module, t)) = r.design_fmax() else {
        return "\nDesign fmax: no block timed\n".into();
    };
    let mut s = format!(
        "\nDesign fmax (the slowest block, {} with the constraints of {:.0} MHz; the report's \
         label above says what the figures are): **{:.0} MHz** in `{block}` (`{module}`: {} → \
         {}, {} cells, slack {:.3} ns at {:.3} ns). Its path:\n\n\
         | point | delay ns | arrival ns |\n|---|---:|---:|\n",
        r.library,
        r.clock_mhz,
        t.fmax_mhz,
        t.startpoint,
        t.endpoint,
        t.cells,
        t.slack_ns,
        1000.0 / r.clock_mhz,
    );
    for p in &t.steps {
        let arrival = p.arrival_ns.map_or("-".to_string(), |a| format!("{a:.3}"));
        s += &format!("| {} | {:.3} | {arrival} |\n", p.point, p.delay_ns);
    }
    s
}

/// The memory arrays at the library: a behavioural bank is flip-flops and muxes in the
/// standard-cell area (a bank module's own area is shown), a register file inside a larger
/// module is in that module's cells, and a macro (blackbox) is priced by the library's sourced
/// SRAM density (`crate::area::sram_density`: nangate45 and asap7; none at the others).
pub fn asic_memories(r: &gen::asic::AsicReport, mems: &[gen::manifest::MemoryEntry]) -> String {
    if mems.is_empty() {
        return "\nmemories: none".into();
    }
    let density = crate::area::sram_density(&r.library);
    let mut s = String::from(
        "\n| memory | words × bits | copies | bits | at this library | area µm² (all copies) |\n\
         |---|---:|---:|---:|---|---:|\n",
    );
    let (mut cells, mut macros) = (0.0, 0.0);
    for m in mems {
        let (what, area) = if m.blackbox {
            if let Some(d) = &density {
                let a = d.area_um2(m.bits(), m.copies);
                macros += a;
                (
                    format!(
                        "SRAM macro, {} ({:.3} mm² per MiB, {:.0} µm² a macro)",
                        d.source, d.mm2_per_mib, d.macro_um2
                    ),
                    format!("{a:.1}"),
                )
            } else {
                (
                    "SRAM macro, not in the area (no sourced density at this node)".into(),
                    "-".into(),
                )
            }
        } else if m.module.starts_with("sram_") {
            let a = r
                .module(&m.module)
                .map_or(0.0, |x| x.total_area_um2 * m.copies as f64);
            cells += a;
            (
                "flip-flops and muxes (behavioural bank, in the cell area)".into(),
                format!("{a:.1}"),
            )
        } else {
            (
                format!("flip-flops inside `{}` (in its cell area)", m.module),
                "-".into(),
            )
        };
        s += &format!(
            "| {}.{} | {} × {} | {} | {} | {what} | {area} |\n",
            m.module,
            m.memory,
            m.depth,
            m.width,
            m.copies,
            m.bits()
        );
    }
    s += &format!(
        "\nbehavioural banks: {cells:.1} µm² of the cell area; macros beside it: {macros:.1} µm²"
    );
    s
}

/// The design's memory arrays (from the generated design, not from Yosys, which maps them to
/// flip-flops on the generic target and leaves a blackbox empty).
pub fn memory_table(mems: &[gen::manifest::MemoryEntry]) -> String {
    if mems.is_empty() {
        return "\nmemories: none".into();
    }
    let mut s = String::from(
        "\n| memory | words × bits | copies | bits | emitted as |\n|---|---:|---:|---:|---|\n",
    );
    for m in mems {
        s += &format!(
            "| {}.{} | {} × {} | {} | {} | {} |\n",
            m.module,
            m.memory,
            m.depth,
            m.width,
            m.copies,
            m.bits(),
            if m.blackbox {
                "blackbox (macro)"
            } else {
                "behavioural RAM"
            }
        );
    }
    s += &format!(
        "| **all** | | | {} | |",
        mems.iter().map(|m| m.bits()).sum::<u64>()
    );
    s
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
