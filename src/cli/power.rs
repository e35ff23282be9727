//! `regflash power`: the PE's energy at gate level, measured from its own netlist with the
//! activity of an RTL run, written as an energy table (`--energy`).

use super::*;
use crate::power::{self, Block};

#[derive(Args, Debug)]
pub struct PowerArgs {
    #[command(flatten)]
    pub config: ConfigArgs,
    /// A known library (nangate45, the default and the energy table's node; asap7; sky130hd;
    /// sg13g2).
    #[arg(long)]
    pub lib: Option<String>,
    /// A liberty file (.lib or .lib.gz) instead of --lib.
    #[arg(long, conflicts_with = "lib")]
    pub liberty: Option<PathBuf>,
    /// Tokens of the RTL run whose activity is replayed (queries = keys, one head).
    #[arg(long, default_value_t = 64)]
    pub seq: usize,
    /// Write the energy table (TOML, its `[gates]` section) here: `--energy FILE` on sim,
    /// compare and estimate prices with it.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Write the characterization (every part's energy, the run's counts) as JSON.
    #[arg(long)]
    pub report: Option<PathBuf>,
    /// Keep the work folder (the RTL, the netlist, the waveforms, OpenSTA's scripts and
    /// reports) here, and measure even when a cached result exists.
    #[arg(long)]
    pub keep: Option<PathBuf>,
}

pub(super) fn power_cmd(args: PowerArgs) -> Result<ExitCode> {
    let cfg = args.config.resolve()?;
    anyhow::ensure!(
        args.seq >= 8,
        "--seq {} is too short to measure an energy per event: give 8 or more",
        args.seq
    );
    for path in [&args.out, &args.report].into_iter().flatten() {
        check_writable(path)?;
    }
    let lib = match (&args.lib, &args.liberty) {
        (None, None) => Some("nangate45".to_string()),
        (l, _) => l.clone(),
    };
    let opt = power::Options {
        lib,
        liberty: args.liberty.clone(),
        seq: args.seq,
        keep: args.keep.clone(),
    };
    let pe = power::characterize(&cfg, Block::Pe, &opt)?;
    print!("{}", pe.summary());
    let table = power::table_toml(&pe)?;
    let t = crate::pricing::table_from_toml(&table, "regflash power")?;
    let default = kernels::energy::EnergyTable {
        node_nm: pe.node_nm,
        ..Default::default()
    };
    let [mac, read, write, cycle] = power::pe_figures(&pe)?;
    let rf = default.storage_pj(cfg.regs_per_pe as u64 * 4);
    println!(
        "  as an energy table at {} nm (the default table's sourced figures beside them):\n    \
         per MAC {mac:.3} pJ (Horowitz's FP16 multiply + FP32 add: {:.3})\n    \
         per register-file read {read:.3} pJ, write {write:.3} pJ (the storage curve at {} B, \
         32 bits: {:.3} / {:.3})\n    per PE-cycle {cycle:.3} pJ (the default: {:.3})",
        pe.node_nm,
        default.at_node("fp16_mul") + default.at_node("fp32_add"),
        cfg.regs_per_pe * 4,
        rf.0 / 2.0,
        rf.1 / 2.0,
        default.at_node("static_pe_cycle")
    );
    println!("  {}", t.basis());
    if let Some(path) = &args.out {
        std::fs::write(path, &table).with_context(|| format!("cannot write {}", path.display()))?;
        println!("wrote {} (use it with --energy)", path.display());
    }
    if let Some(path) = &args.report {
        write_json(path, &pe)?;
    }
    Ok(ExitCode::SUCCESS)
}
