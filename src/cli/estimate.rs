//! `regflash estimate`: cycles, utilization, time, throughput, memory traffic and energy of
//! long sequences from the cycle model (exact where it steps, extrapolated beyond) and the
//! schedule's counts, without simulating the RTL.

use std::io::IsTerminal;

use super::*;

#[derive(Args, Debug)]
pub struct EstimateArgs {
    #[command(flatten)]
    pub config: ConfigArgs,
    /// Sequence lengths (queries = keys), comma separated.
    #[arg(long, value_delimiter = ',', default_value = "4096,131072,1048576")]
    pub seq: Vec<usize>,
    /// Causal masking.
    #[arg(long)]
    pub causal: bool,
    /// Attention heads.
    #[arg(long, default_value_t = 1)]
    pub heads: usize,
    /// Memory read latency in cycles.
    #[arg(long, default_value_t = 20)]
    pub mem_latency: u32,
    #[command(flatten)]
    pub energy: super::EnergyArgs,
    /// Write every point as JSON (counters, timing, energy, how it was estimated).
    #[arg(long)]
    pub report: Option<PathBuf>,
    /// The clock behind time and tokens/s: config (the configuration's `clock_mhz`) or synth
    /// (the design's synthesized fmax at --lib, synthesis-level: its whole top mapped by the
    /// ASIC flow, each module cached, and its slowest block's fmax taken).
    #[arg(long, default_value = "config", value_parser = ["config", "synth"])]
    pub clock: String,
    /// --clock synth: a known library (nangate45, the default; asap7; sky130hd; sg13g2;
    /// osu018).
    #[arg(long)]
    pub lib: Option<String>,
    /// --clock synth: a liberty file (.lib or .lib.gz) instead of --lib.
    #[arg(long)]
    pub liberty: Option<PathBuf>,
}

/// `cfg`'s design fmax at a library (`--clock synth`): its whole top mapped by the ASIC flow
/// (its banks as macros, as `compare --iso area` maps it), the slowest block's fmax, and a
/// note that says what it is.
fn synthesized_clock(
    cfg: &CoreConfig,
    lib: Option<&str>,
    liberty: Option<&std::path::Path>,
) -> Result<(f64, String)> {
    let scratch = ScratchDir::new("clock")?;
    let (library, (name, node)) = crate::area::load_library(lib, liberty, scratch.path())?;
    eprintln!("--clock synth: mapping the design at {name} (each module once, cached)");
    let mapped = crate::area::map_design(cfg, &library, (&name, &node), cfg.clock_mhz, true)?;
    let Some((block, _, t)) = mapped.report.design_fmax() else {
        anyhow::bail!(
            "--clock synth: nothing of the design was timed at {name}, so it has no fmax"
        );
    };
    let note = format!(
        "--clock synth: the design's fmax at {name}, synthesis-level, its slowest block {block}"
    );
    Ok((t.fmax_mhz, note))
}

pub(super) fn estimate_cmd(args: EstimateArgs) -> Result<ExitCode> {
    if let Some(path) = &args.report {
        check_writable(path)?;
    }
    anyhow::ensure!(args.heads >= 1, "--heads must be at least 1");
    anyhow::ensure!(
        !args.seq.is_empty() && args.seq.iter().all(|&s| s >= 1),
        "--seq takes sequence lengths of at least 1"
    );
    let mut cfg = args.config.resolve()?;
    let longest = args.seq.iter().copied().max().unwrap_or(1);
    if let Some(note) = crate::bench::widen(&mut cfg, args.heads, longest) {
        eprintln!("note: {note}");
    }
    let p = hdl::core::CoreParams::from_config(&cfg)?;
    let table = args.energy.table(&cfg)?;
    anyhow::ensure!(
        args.clock == "synth" || (args.lib.is_none() && args.liberty.is_none()),
        "--lib and --liberty choose the library of --clock synth: add --clock synth"
    );
    let clock_note = if args.clock == "synth" {
        let (fmax, note) = synthesized_clock(&cfg, args.lib.as_deref(), args.liberty.as_deref())?;
        cfg.clock_mhz = fmax;
        note
    } else {
        "the configuration's clock_mhz".to_string()
    };
    let timing = crate::verify::attention::MemoryTiming {
        latency: args.mem_latency,
        ..Default::default()
    };
    timing.validate()?;
    let mem = timing.model_timing();
    let mut points = vec![];
    println!(
        "regflash estimate: {} {} ({}x{} PEs{}), {} head(s), {}, clock {:.0} MHz ({clock_note})\n",
        cfg.name,
        cfg.variant.label(),
        cfg.rows,
        cfg.cols,
        if p.row.mac_tiers() > 1 {
            format!(" x {} tiers", p.row.mac_tiers())
        } else {
            String::new()
        },
        args.heads,
        if args.causal { "causal" } else { "non-causal" },
        cfg.clock_mhz
    );
    println!(
        "| seq | cycles | utilization | time | tokens/s | read | written | energy | on chip | pJ/token | how |"
    );
    println!("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|");
    // On a terminal, a progress line on stderr while a point runs (a million tokens take
    // seconds), erased before its row is printed.
    let tty = std::io::stderr().is_terminal();
    for (i, &seq) in args.seq.iter().enumerate() {
        if tty {
            eprint!(
                "\rregflash estimate: seq {seq} ({} of {}) ...",
                i + 1,
                args.seq.len()
            );
        }
        let point = crate::estimate::point(&cfg, &p, &table, mem, (seq, args.heads, args.causal))?;
        if tty {
            eprint!("\r\x1b[2K");
        }
        println!(
            "| {} | {} | {:.1} % | {} | {:.3e} | {} | {} | {} | {} | {:.1} | {} |",
            seq,
            point.cycles,
            100.0 * point.utilization,
            human_seconds(point.seconds),
            point.tokens_per_second,
            human_bytes(point.bytes_read),
            human_bytes(point.bytes_written),
            human_joules(point.energy.total_pj),
            human_joules(point.energy.on_chip_pj),
            point.energy.pj_per_token,
            point.method
        );
        points.push(point);
    }
    println!(
        "\nexact: the cycle model stepped every cycle, as every deterministic RTL run in the \
         test suite is held to; extrapolated: fitted to exact runs (validated against stepped \
         runs in the tests). Energy from the schedule's counts: {}.",
        table.basis()
    );
    if let Some(path) = &args.report {
        write_json(path, &points)?;
    }
    Ok(ExitCode::SUCCESS)
}

fn human_seconds(s: f64) -> String {
    if s >= 1.0 {
        format!("{s:.2} s")
    } else if s >= 1e-3 {
        format!("{:.2} ms", s * 1e3)
    } else {
        format!("{:.2} us", s * 1e6)
    }
}

fn human_bytes(b: u64) -> String {
    let b = b as f64;
    if b >= 1e9 {
        format!("{:.2} GB", b / 1e9)
    } else if b >= 1e6 {
        format!("{:.2} MB", b / 1e6)
    } else {
        format!("{:.1} kB", b / 1e3)
    }
}

fn human_joules(pj: f64) -> String {
    if pj >= 1e12 {
        format!("{:.3} J", pj / 1e12)
    } else if pj >= 1e9 {
        format!("{:.3} mJ", pj / 1e9)
    } else {
        format!("{:.3} uJ", pj / 1e6)
    }
}
