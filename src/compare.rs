//! `regflash compare`: the same attention problems on `buf2d`, `reg2d` and `reg3d` (and
//! "3-D buffered", buf2d's counters with its banks priced as stacked SRAM), every run checked
//! bit for bit, cycles and energy from the RTL's counters priced by the energy table.

use anyhow::{ensure, Result};
use hdl::config::{CoreConfig, Variant};
use kernels::energy::EnergyTable;
use kernels::flash::OutFormat;
use serde::Serialize;

use crate::energy::EnergyReport;
use crate::report::real;
use crate::sim::{self, SimReport};
use crate::verify::attention::MemoryTiming;

/// The designs compared, in table order: (name, variant, priced as stacked).
pub const DESIGNS: [(&str, Variant, bool); 4] = [
    ("buf2d", Variant::Buf2d, false),
    ("3-D buffered", Variant::Buf2d, true),
    ("reg2d", Variant::Reg2d, false),
    ("reg3d", Variant::Reg3d, false),
];

/// One design at one sequence length.
#[derive(Clone, Debug, Serialize)]
pub struct CompareRow {
    pub design: String,
    pub seq_len: usize,
    pub causal: bool,
    /// PEs over all tiers (reg3d: two PE tiers).
    pub pes: u64,
    /// Where the figures come from: "rtl" (simulated and bit-checked).
    pub source: String,
    pub cycles: u64,
    /// buf2d's cycles / these.
    #[serde(serialize_with = "real")]
    pub speedup_vs_buf2d: f64,
    /// buf2d's energy / this design's.
    #[serde(serialize_with = "real")]
    pub energy_ratio_vs_buf2d: f64,
    /// 1 − this design's energy / buf2d's.
    #[serde(serialize_with = "real")]
    pub energy_reduction_vs_buf2d: f64,
    /// The same, on-chip energy only (DRAM traffic left out: it is equal in every design).
    #[serde(serialize_with = "real")]
    pub on_chip_reduction_vs_buf2d: f64,
    pub energy: EnergyReport,
    /// The run's counters (the energy's inputs) and its checks.
    pub report: SimReport,
}

/// What to compare.
#[derive(Clone, Debug)]
pub struct ComparePlan {
    pub config: CoreConfig,
    pub seq_lens: Vec<usize>,
    pub causal: bool,
    pub heads: usize,
    pub seed: u64,
    pub timing: MemoryTiming,
    pub table: EnergyTable,
}

/// Runs every (sequence length, variant) once and prices each design; `each` sees a run's
/// report as it finishes, `progress` the run in flight.
pub fn run(
    plan: &ComparePlan,
    mut each: impl FnMut(&SimReport),
    mut progress: impl FnMut(&str, u64, u64),
) -> Result<Vec<CompareRow>> {
    ensure!(!plan.seq_lens.is_empty(), "no sequence length to compare");
    let configs: Vec<(Variant, CoreConfig)> = [Variant::Buf2d, Variant::Reg2d, Variant::Reg3d]
        .iter()
        .map(|&v| {
            let cfg = CoreConfig {
                variant: v,
                ..plan.config.clone()
            };
            cfg.validate()
                .map_err(|e| e.context(format!("{} as {v}", cfg.name)))?;
            Ok((v, cfg))
        })
        .collect::<Result<_>>()?;
    // Every point is checked before the first runs.
    for (v, cfg) in &configs {
        let p = hdl::core::CoreParams::from_config(cfg)?;
        for &seq in &plan.seq_lens {
            ensure!(seq >= 1, "sequence lengths must be at least 1");
            crate::verify::attention::check_shape(
                &p,
                plan.heads,
                seq,
                seq,
                cfg.head_dim as usize,
                OutFormat::F16,
            )
            .map_err(|e| e.context(format!("{} as {v} at seq {seq}", cfg.name)))?;
        }
    }
    let mut rows = Vec::new();
    for &seq in &plan.seq_lens {
        let a = sim::random_problem(
            plan.heads,
            seq,
            plan.config.head_dim as usize,
            plan.causal,
            OutFormat::F16,
            plan.seed,
        );
        let mut runs = Vec::new();
        for (v, cfg) in &configs {
            let label = format!("{} {v} seq {seq}", cfg.name);
            let (report, _) = sim::run(cfg, &a, &plan.timing, |d, e| progress(&label, d, e))?;
            each(&report);
            runs.push((*v, cfg, report));
        }
        let mut at_seq: Vec<CompareRow> = DESIGNS
            .iter()
            .map(|&(name, v, stacked)| {
                let (_, cfg, report) = runs.iter().find(|r| r.0 == v).expect("every variant ran");
                let mut report = report.clone();
                report.with_energy(&plan.table, cfg, stacked);
                let energy = report.energy.clone().expect("just priced");
                CompareRow {
                    design: name.into(),
                    seq_len: seq,
                    causal: plan.causal,
                    pes: crate::energy::geometry(cfg, stacked).pes,
                    source: "rtl".into(),
                    cycles: report.cycles,
                    speedup_vs_buf2d: 0.0,
                    energy_ratio_vs_buf2d: 0.0,
                    energy_reduction_vs_buf2d: 0.0,
                    on_chip_reduction_vs_buf2d: 0.0,
                    energy,
                    report,
                }
            })
            .collect();
        let base = &at_seq[0];
        let (base_cycles, base_pj, base_chip) = (
            base.cycles as f64,
            base.energy.total_pj,
            base.energy.on_chip_pj,
        );
        for r in &mut at_seq {
            r.speedup_vs_buf2d = base_cycles / r.cycles.max(1) as f64;
            r.energy_ratio_vs_buf2d = base_pj / r.energy.total_pj.max(f64::MIN_POSITIVE);
            r.energy_reduction_vs_buf2d = 1.0 - r.energy.total_pj / base_pj.max(f64::MIN_POSITIVE);
            r.on_chip_reduction_vs_buf2d =
                1.0 - r.energy.on_chip_pj / base_chip.max(f64::MIN_POSITIVE);
        }
        rows.extend(at_seq);
    }
    Ok(rows)
}

/// The components in the table's column order, with their headings.
const COLUMNS: [(&str, &str); 10] = [
    ("mac", "MAC"),
    ("pe_registers", "PE regs"),
    ("p_registers", "P regs"),
    ("sram", "SRAM"),
    ("buffer_transport", "buffer wire/bond"),
    ("softmax", "softmax"),
    ("broadcast", "broadcast"),
    ("vertical_links", "vertical links"),
    ("dram", "DRAM"),
    ("static", "static"),
];

/// The markdown table of `rows`, with a legend.
pub fn table(rows: &[CompareRow], cfg: &CoreConfig, t: &EnergyTable) -> String {
    let mut s = format!(
        "`regflash compare`: preset {} ({}×{} PEs, Br {} Bc {} d {}), {} MHz, energy at {} nm\n\n\
         | design | seq | causal | PEs | cycles | speedup vs buf2d | energy (µJ) | pJ/MAC | \
         energy reduction vs buf2d | on-chip (µJ) | on-chip reduction | SRAM share | SRAM share \
         on-chip |",
        cfg.name, cfg.rows, cfg.cols, cfg.br, cfg.bc, cfg.head_dim, cfg.clock_mhz, t.node_nm
    );
    for (_, h) in COLUMNS {
        s += &format!(" {h} (µJ) |");
    }
    s += " bit-exact | from |\n|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|";
    s += &"---:|".repeat(COLUMNS.len());
    s += "---|---|\n";
    for r in rows {
        let e = &r.energy;
        s += &format!(
            "| {} | {} | {} | {} | {} | {:.3} | {:.3} | {:.3} | {:.1} % | {:.3} | {:.1} % | {:.1} % \
             | {:.1} % |",
            r.design,
            r.seq_len,
            if r.causal { "yes" } else { "no" },
            r.pes,
            r.cycles,
            r.speedup_vs_buf2d,
            e.total_pj * 1e-6,
            e.pj_per_mac,
            100.0 * r.energy_reduction_vs_buf2d,
            e.on_chip_pj * 1e-6,
            100.0 * r.on_chip_reduction_vs_buf2d,
            100.0 * e.sram_share,
            100.0 * e.sram_share_on_chip
        );
        for (k, _) in COLUMNS {
            s += &format!(" {:.3} |", e.components_pj[k] * 1e-6);
        }
        s += &format!(
            " {} | {} |\n",
            if r.report.passed { "yes" } else { "**NO**" },
            r.source
        );
    }
    s += "\nEvery row's counters come from a Verilator run of the generated RTL (`from`: rtl), \
          bit-checked against the hardware model and the f64 reference; energy = Σ counter × \
          per-event energy of the table (kernels/src/energy.rs, or --energy). 3-D buffered is \
          buf2d's run with its banks priced as stacked SRAM (the macro's access plus a \
          hybrid-bond crossing per bit). PEs counts every PE tier: reg3d has twice the MACs \
          of the 2-D designs (iso PEs per tier); for iso total PEs compare its cycles with half \
          a 2-D design's. speedup and energy reduction are against buf2d at the same sequence \
          length.\n";
    s
}
