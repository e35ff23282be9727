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

pub(super) fn synth_cmd(args: SynthArgs) -> Result<ExitCode> {
    let cfg = args.config.resolve()?;
    if let Some(path) = &args.report {
        check_writable(path)?;
    }
    let dir = ScratchDir::new("synth")?;
    let manifest = generate(&cfg, &target(&args.unit), dir.path())?;
    let report = gen::flow::synth(dir.path(), args.target, !args.no_pnr)?;
    println!("{}", synth_table(&report));
    println!("{}", memory_table(&manifest.memories));
    let parts = crate::tiers::parts(&cfg, &report, &manifest.memories);
    if parts.len() > 1 {
        println!(
            "\nBy tier (each part a module: Yosys's cells and flip-flops, the design's memory \
             bits; see src/tiers.rs):{}",
            crate::tiers::table(&parts)
        );
    }
    if let Some(path) = &args.report {
        write_json(path, &report)?;
    }
    Ok(exit(report.passed()))
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
