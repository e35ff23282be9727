//! `regflash power`: the PE's and its PE row's energy at gate level, measured from their own
//! netlists with the activity of an RTL run, written as an energy table (`--energy`).

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
    /// Write the characterizations (every block's parts and energies, the run's counts) as
    /// JSON, a list.
    #[arg(long)]
    pub report: Option<PathBuf>,
    /// The PE only, not its row (whose netlist takes a few minutes to replay).
    #[arg(long)]
    pub pe_only: bool,
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
    let row = if args.pe_only {
        None
    } else {
        let row = power::characterize(&cfg, Block::Row, &opt)?;
        print!("{}", row.summary());
        Some(row)
    };
    let table = power::table_toml(&pe, row.as_ref())?;
    let t = crate::pricing::table_from_toml(&table, "regflash power")?;
    // The default table's prices of the same events, for this design, at the library's node.
    let default = kernels::energy::EnergyTable {
        node_nm: pe.node_nm,
        ..Default::default()
    };
    let sourced = crate::pricing::prices(&default, &crate::pricing::geometry(&cfg, false));
    let [mac, read, write, cycle] = power::pe_figures(&pe)?;
    println!(
        "  as an energy table at {} nm (the default table's sourced figures beside them):\n    \
         per MAC {mac:.3} pJ ({:.3})\n    per register-file read {read:.3} pJ, write {write:.3} \
         pJ ({:.3} / {:.3})\n    per PE-cycle {cycle:.3} pJ ({:.3})",
        pe.node_nm,
        sourced["mac"],
        sourced["rf_read_32b"],
        sourced["rf_write_32b"],
        default.at_node("static_pe_cycle")
    );
    if let Some(row) = &row {
        let r = power::row_figures(row)?;
        println!(
            "    per row-cycle: its arithmetic units {:.3} pJ (priced per cycle, as measured), its \
             control {:.3} pJ; per P-bank read {:.3} pJ, write {:.3} pJ ({:.3} / {:.3})",
            r.softmax_cycle,
            r.control_cycle,
            r.p_read,
            r.p_write,
            sourced["p_read"],
            sourced["p_write"]
        );
    }
    println!("  {}", t.basis());
    if let Some(path) = &args.out {
        std::fs::write(path, &table).with_context(|| format!("cannot write {}", path.display()))?;
        println!("wrote {} (use it with --energy)", path.display());
    }
    if let Some(path) = &args.report {
        let all: Vec<&power::BlockPower> = std::iter::once(&pe).chain(row.as_ref()).collect();
        write_json(path, &all)?;
    }
    Ok(ExitCode::SUCCESS)
}
