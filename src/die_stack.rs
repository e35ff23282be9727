//! A design's die stack and its temperatures (`regflash thermal`, docs/thermal.md): the tiers'
//! floorplans from the ASIC flow's parts (`--iso area`'s, [`crate::area::placed`]), each
//! part's power from a run's energy by component at a clock, and the stack solved by the
//! compact model ([`crate::thermal`] in the analysis crate).
//!
//! **Power by part.** Each energy component goes to the parts that spend it: the MACs, the PE
//! register files, the operand broadcasts and the PEs' clock and leakage to the PE parts (reg3d's
//! QK and PV tiers run the same MACs, d per query-key pair each, so they share them equally);
//! the vertical links to both their ends; the P banks and buf2d's SRAM to the banks; the row
//! engines' softmax to the row engines; the landing and staging buffers to the control; the
//! GLB's accesses and transport to the GLB's banks, and the SRAM macros' leakage to the parts
//! holding macros, by bits. DRAM's energy is spent off the stack and is left out.
//!
//! **What the energy table does not price** is the clock and leakage of the logic outside the
//! PEs (the row engines, the control, reg3d's S registers): each such part is given the PEs'
//! own clock-and-leakage power per mm² of cells, an assumption the report states with its share.
//!
//! **Clock.** Dynamic energy per event does not depend on the clock, so a part's dynamic power
//! is its energy per cycle times the clock. The PEs' clock-and-leakage figure was measured at
//! 1,500 MHz, where leakage is [`PE_LEAKAGE_SHARE`] of it (docs/asic.md, stop 70): that share
//! is a power, the rest scales with the clock. The SRAM macros' leakage is a power.

use anyhow::{ensure, Result};
use serde::Serialize;

use crate::area::{Placed, BANKS_DIE, GLB_DIE};
use crate::pricing::EnergyReport;
use crate::thermal::{
    Block, Layer, Leakage, Package, Stack, BEOL_UM, BOND_UM, K_BEOL, K_BOND, K_SILICON,
    THINNED_DIE_UM, TOP_DIE_UM,
};
use crate::tiers::PartKind;

/// The share of the PE's clock-and-leakage figure that is leakage, at the clock it was
/// measured at: 0.25 of 1.50 pJ per PE-cycle at 1,500 MHz (NangateOpenCellLibrary typical,
/// 25 °C; docs/asic.md, the stop-70 column of the gate-level table).
pub const PE_LEAKAGE_SHARE: f64 = 0.25 / 1.50;
pub const PE_STATIC_MEASURED_MHZ: f64 = 1500.0;

/// Where the stacked memory dies go.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum MemoryTier {
    /// Above the logic, under the lid (the seed's choice: its K/V data nearest the heat sink).
    NearLid,
    /// Below the logic, on the package side: the logic nearest the lid.
    NearLogic,
}

impl std::str::FromStr for MemoryTier {
    type Err = anyhow::Error;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "near-lid" => Ok(MemoryTier::NearLid),
            "near-logic" => Ok(MemoryTier::NearLogic),
            _ => anyhow::bail!(
                "--memory-tier is near-lid (the stacked memory die under the lid, above the \
                 logic) or near-logic (below the logic, the logic under the lid), not {s:?}"
            ),
        }
    }
}

/// A part's power.
#[derive(Clone, Debug, Serialize)]
pub struct PartPower {
    pub die: String,
    pub part: String,
    #[serde(skip)]
    pub kind: PartKind,
    pub mm2: f64,
    /// Dynamic energy per cycle (pJ), the PEs' clock among it: times the clock, a power.
    pub dynamic_pj_per_cycle: f64,
    /// Leakage at 25 °C, W.
    pub leakage_w: f64,
    /// Of the dynamic energy and leakage, what the table does not price and the PEs' density
    /// stands in for (pJ per cycle, W).
    pub assumed_pj_per_cycle: f64,
    pub assumed_leakage_w: f64,
}

impl PartPower {
    /// W at `clock_mhz` (leakage at 25 °C).
    pub fn watts(&self, clock_mhz: f64) -> f64 {
        self.dynamic_pj_per_cycle * clock_mhz * 1e-6 + self.leakage_w
    }
}

/// The energy components [`part_power`] places (every one the pricing reports).
const COMPONENTS: [&str; 17] = [
    "mac",
    "pe_registers",
    "p_registers",
    "sram",
    "buffer_transport",
    "softmax",
    "landing",
    "staging",
    "broadcast",
    "vertical_links",
    "dram",
    "static",
    "leakage",
    "glb",
    "glb_transport",
    "noc",
    "noc_links",
];

/// The share of the `static` component that is the PEs' own under `t`: all of it, unless the
/// table's gate-level figures also price the rows' control, clock and leakage
/// (`RowGates::control_cycle`), whose share goes to the row engines and the P banks.
pub fn pe_static_share(t: &kernels::energy::EnergyTable, pes: u64, rows: u64) -> f64 {
    match &t.gates {
        Some(g) => {
            let pe = pes as f64 * g.pe_cycle;
            let row = rows as f64 * g.row.as_ref().map_or(0.0, |r| r.control_cycle);
            pe / (pe + row).max(f64::MIN_POSITIVE)
        }
        None => 1.0,
    }
}

/// Each part's power from a run's energy (`e`, over `cycles` at `clock_mhz`, the clock `e`
/// was priced at), `pe_share` of its `static` component the PEs' ([`pe_static_share`]).
pub fn part_power(
    placed: &[Placed],
    e: &EnergyReport,
    cycles: u64,
    (clock_mhz, pe_share): (f64, f64),
) -> Result<Vec<PartPower>> {
    ensure!(cycles > 0, "the run took no cycles");
    for name in e.components_pj.keys() {
        ensure!(
            COMPONENTS.contains(&name.as_str()),
            "the energy report has a component ({name}) the thermal model does not place"
        );
    }
    let mut out: Vec<PartPower> = placed
        .iter()
        .map(|p| PartPower {
            die: p.die.clone(),
            part: p.part.clone(),
            kind: p.kind,
            mm2: p.mm2(),
            dynamic_pj_per_cycle: 0.0,
            leakage_w: 0.0,
            assumed_pj_per_cycle: 0.0,
            assumed_leakage_w: 0.0,
        })
        .collect();
    let pes: Vec<usize> = (0..out.len()).filter(|&i| out[i].kind.pes()).collect();
    ensure!(
        !pes.is_empty(),
        "the design's parts hold no PEs, so its power has nowhere to go: {:?}",
        out.iter().map(|p| &p.part).collect::<Vec<_>>()
    );
    let c = |name: &str| e.components_pj.get(name).copied().unwrap_or(0.0) / cycles as f64;
    // Spreads `pj` per cycle over `to` (equally, or by macro bits), falling back to the PEs.
    let spread = |out: &mut Vec<PartPower>, pj: f64, to: Vec<usize>, by_bits: bool| {
        let to = if to.is_empty() { pes.clone() } else { to };
        let weight = |i: usize| {
            if by_bits {
                placed[i].macro_bits.max(1) as f64
            } else {
                1.0
            }
        };
        let sum: f64 = to.iter().map(|&i| weight(i)).sum();
        for &i in &to {
            out[i].dynamic_pj_per_cycle += pj * weight(i) / sum;
        }
    };
    let find = |f: &dyn Fn(PartKind) -> bool| -> Vec<usize> {
        (0..placed.len()).filter(|&i| f(placed[i].kind)).collect()
    };
    let banks = find(&|k| k.banks());
    let engines = find(&|k| k == PartKind::RowEngines);
    let control = find(&|k| k == PartKind::Control);
    let glb = find(&|k| k == PartKind::GlbBanks);
    let noc = find(&|k| k == PartKind::Noc);
    let links = find(&|k| k.pes() || k == PartKind::SRegisters || k == PartKind::Links);
    // The PEs' clock and leakage: the clock part scales with the clock, the leakage does not.
    // The rows' (gate-level tables only) goes to their engines and P banks, as dynamic.
    let pe_static = c("static") * pe_share;
    let row_static = c("static") - pe_static;
    let pe_leak_w = pe_static * PE_LEAKAGE_SHARE * PE_STATIC_MEASURED_MHZ * 1e-6;
    spread(
        &mut out,
        c("mac") + c("pe_registers") + c("broadcast") + pe_static * (1.0 - PE_LEAKAGE_SHARE),
        pes.clone(),
        false,
    );
    spread(&mut out, c("vertical_links"), links, false);
    spread(
        &mut out,
        c("p_registers") + c("sram") + c("buffer_transport"),
        banks.clone(),
        true,
    );
    spread(&mut out, c("softmax"), engines.clone(), false);
    let rows: Vec<usize> = engines.iter().chain(&banks).copied().collect();
    spread(&mut out, row_static, rows.clone(), false);
    spread(&mut out, c("landing") + c("staging"), control, false);
    spread(&mut out, c("glb") + c("glb_transport"), glb, true);
    spread(&mut out, c("noc") + c("noc_links"), noc, false);
    // Leakage: the PEs' by their count (equal parts), the macros' by bits.
    for &i in &pes {
        out[i].leakage_w += pe_leak_w / pes.len() as f64;
    }
    let macro_parts: Vec<usize> = (0..placed.len())
        .filter(|&i| placed[i].macro_bits > 0)
        .collect();
    let bits: u64 = macro_parts.iter().map(|&i| placed[i].macro_bits).sum();
    let sram_leak_w = c("leakage") * clock_mhz * 1e-6;
    for &i in &macro_parts {
        out[i].leakage_w += sram_leak_w * placed[i].macro_bits as f64 / bits as f64;
    }
    // The logic the table does not price: the PEs' clock and leakage per mm² of cells.
    let pe_cells: f64 = pes.iter().map(|&i| placed[i].cells_mm2).sum();
    for (i, p) in placed.iter().enumerate() {
        let priced = p.kind.pes() || (row_static > 0.0 && rows.contains(&i));
        if priced || p.cells_mm2 <= 0.0 || pe_cells <= 0.0 {
            continue;
        }
        let share = p.cells_mm2 / pe_cells;
        let o = &mut out[i];
        o.assumed_pj_per_cycle = pe_static * (1.0 - PE_LEAKAGE_SHARE) * share;
        o.assumed_leakage_w = pe_leak_w * share;
        o.dynamic_pj_per_cycle += o.assumed_pj_per_cycle;
        o.leakage_w += o.assumed_leakage_w;
    }
    Ok(out)
}

/// The stack of `parts` at `clock_mhz`: its dies in order (the logic tiers from the package
/// side up; the memory dies above or below them), each die's parts as strips across it in the
/// order they come, the PEs first (so reg3d's QK and PV arrays sit over each other), thinned
/// dies but the one under the lid, a BEOL and a bond between dies; HotSpot's package in air
/// at `ambient_c`.
pub fn stack(
    parts: &[PartPower],
    clock_mhz: f64,
    memory: MemoryTier,
    ambient_c: f64,
) -> Result<Stack> {
    let mut dies: Vec<&str> = vec![];
    for p in parts {
        if !dies.contains(&p.die.as_str()) {
            dies.push(&p.die);
        }
    }
    let memory_die = |d: &str| d == GLB_DIE || d == BANKS_DIE;
    let rank = |d: &str| match (memory_die(d), memory) {
        (false, _) => 1,
        (true, MemoryTier::NearLid) => 2,
        (true, MemoryTier::NearLogic) => 0,
    };
    dies.sort_by(|a, b| (rank(a), *a).cmp(&(rank(b), *b)));
    let area = |d: &str| -> f64 { parts.iter().filter(|p| p.die == d).map(|p| p.mm2).sum() };
    let footprint = dies.iter().map(|d| area(d)).fold(0.0, f64::max);
    ensure!(footprint > 0.0, "the design has no silicon to stack");
    let mut layers = vec![];
    for (k, d) in dies.iter().enumerate() {
        let top = k + 1 == dies.len();
        if k > 0 {
            layers.push(Layer {
                name: format!("bond under {d}"),
                thickness_um: BOND_UM,
                k: K_BOND,
                source: "micro-bumps with underfill, 8.0 K mm²/W over 16.1 µm (Colgan et al., \
                         SEMI-THERM 2012)"
                    .into(),
                blocks: vec![],
            });
            layers.push(Layer {
                name: format!("BEOL of {d}"),
                thickness_um: BEOL_UM,
                k: K_BEOL,
                source: "3D-ICE's BEOL (esl-epfl/3d-ice bin/stack.stk)".into(),
                blocks: vec![],
            });
        }
        let mut of: Vec<&PartPower> = parts.iter().filter(|p| p.die == *d).collect();
        of.sort_by_key(|p| !p.kind.pes());
        let mut x = 0.0;
        let mut blocks = vec![];
        for p in of {
            let w = p.mm2 / footprint;
            blocks.push(Block {
                name: p.part.clone(),
                x0: x,
                y0: 0.0,
                x1: (x + w).min(1.0),
                y1: 1.0,
                dynamic_w: p.dynamic_pj_per_cycle * clock_mhz * 1e-6,
                leakage_w: p.leakage_w,
            });
            x += w;
        }
        layers.push(Layer {
            name: d.to_string(),
            thickness_um: if top { TOP_DIE_UM } else { THINNED_DIE_UM },
            k: K_SILICON,
            source: if top {
                "unthinned, HotSpot's t_chip (150 µm) at its 3-D examples' 100 W/(m K)".into()
            } else {
                "thinned to 3D-ICE's 50 µm, at HotSpot's 3-D examples' 100 W/(m K)".into()
            },
            blocks,
        });
    }
    Ok(Stack {
        footprint_mm2: footprint,
        layers,
        package: Package {
            ambient_c,
            ..Package::hotspot()
        },
        leakage: Leakage::hotspot(),
    })
}

/// The highest clock (MHz, to 1 MHz) at which every layer's peak stays at or below `limit_c`
/// on an `n`-cell grid in air at `ambient_c`, searched up to `max_mhz`: None when even 1 MHz
/// is too hot; `max_mhz` when it stays cool throughout.
pub fn max_clock(
    parts: &[PartPower],
    (memory, n, ambient_c): (MemoryTier, usize, f64),
    limit_c: f64,
    max_mhz: f64,
) -> Result<Option<f64>> {
    let cool = |mhz: f64| -> Result<bool> {
        match stack(parts, mhz, memory, ambient_c)?.solve(n) {
            Ok(s) => Ok(s.peak_c() <= limit_c),
            Err(crate::thermal::ThermalError::Runaway { .. }) => Ok(false),
            Err(e) => Err(e.into()),
        }
    };
    if !cool(1.0)? {
        return Ok(None);
    }
    if cool(max_mhz)? {
        return Ok(Some(max_mhz));
    }
    let (mut lo, mut hi) = (1.0, max_mhz);
    while hi - lo > 1.0 {
        let mid = 0.5 * (lo + hi);
        if cool(mid)? {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    Ok(Some(lo.floor()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn placed(
        die: &str,
        (part, kind): (&str, PartKind),
        cells: f64,
        macros: f64,
        bits: u64,
    ) -> Placed {
        Placed {
            die: die.into(),
            part: part.into(),
            kind,
            cells_mm2: cells,
            macros_mm2: macros,
            macro_bits: bits,
        }
    }

    /// Every priced component but DRAM lands on a part, once: the parts' powers add up to the
    /// on-chip energy's power at the clock, plus the assumed clock and leakage of the logic the
    /// table does not price; reg3d's tiers share the PEs' energy equally; the memory die goes
    /// above or below the logic.
    #[test]
    fn power_is_conserved_and_placed() {
        let parts = vec![
            placed("tier 0 (QK)", ("QK tier PEs", PartKind::QkPes), 2.0, 0.0, 0),
            placed(
                "tier 0 (QK)",
                ("row engines", PartKind::RowEngines),
                0.5,
                0.0,
                0,
            ),
            placed("tier 0 (QK)", ("control", PartKind::Control), 0.5, 0.0, 0),
            placed("tier 1 (PV)", ("PV tier PEs", PartKind::PvPes), 2.0, 0.0, 0),
            placed("tier 1 (PV)", ("P banks", PartKind::PBanks), 0.2, 0.0, 0),
            placed(
                GLB_DIE,
                ("GLB banks", PartKind::GlbBanks),
                0.0,
                1.0,
                1 << 20,
            ),
        ];
        let comps: BTreeMap<String, f64> = [
            ("mac", 1000.0),
            ("pe_registers", 200.0),
            ("broadcast", 100.0),
            ("static", 600.0),
            ("vertical_links", 50.0),
            ("p_registers", 40.0),
            ("sram", 7.0),
            ("buffer_transport", 3.0),
            ("softmax", 30.0),
            ("landing", 20.0),
            ("staging", 10.0),
            ("glb", 80.0),
            ("glb_transport", 9.0),
            ("leakage", 5.0),
            ("dram", 9999.0),
        ]
        .iter()
        .map(|(k, v)| (k.to_string(), *v))
        .collect();
        let e = EnergyReport {
            node_nm: 45.0,
            basis: String::new(),
            total_pj: 0.0,
            on_chip_pj: comps.values().sum::<f64>() - 9999.0,
            components_pj: comps,
            pj_per_mac: 0.0,
            pj_per_token: 0.0,
            tops_per_watt: 0.0,
            average_power_w: 0.0,
            sram_share: 0.0,
            sram_share_on_chip: 0.0,
            prices_pj: BTreeMap::new(),
            pe_rf_bytes: 0,
            row_storage_bytes: 0,
            landing_bank_bytes: 0,
            staging_bank_bytes: 0,
            row_storage: String::new(),
        };
        // Priced at 1,000 MHz, not the PEs' measured 1,500: their leakage is a power.
        let (cycles, mhz) = (10u64, 1000.0);
        let p = part_power(&parts, &e, cycles, (mhz, 1.0)).unwrap();
        let watts: f64 = p.iter().map(|x| x.watts(mhz)).sum();
        let assumed = |p: &[PartPower]| -> f64 {
            p.iter()
                .map(|x| x.assumed_pj_per_cycle * mhz * 1e-6 + x.assumed_leakage_w)
                .sum()
        };
        // pJ per cycle times MHz is µW. The on-chip energy's power at the clock, with the
        // PEs' static (600 pJ over the run) as the model takes it: its leakage share a power at
        // the measured 1,500 MHz, the rest at the clock.
        let w = |pj: f64| pj / cycles as f64 * mhz * 1e-6;
        let pe_leak = w(600.0) * PE_LEAKAGE_SHARE * PE_STATIC_MEASURED_MHZ / mhz;
        let pe_static = w(600.0) * (1.0 - PE_LEAKAGE_SHARE) + pe_leak;
        let rest = w(e.on_chip_pj) - w(600.0);
        assert!(
            (watts - assumed(&p) - rest - pe_static).abs() < 1e-12,
            "{watts} {} {rest} {pe_static}",
            assumed(&p)
        );
        // The logic outside the PEs (1.2 mm² of cells against the PEs' 4) gets their density.
        assert!((assumed(&p) - pe_static * 1.2 / 4.0).abs() < 1e-12);
        assert!(
            (p[0].watts(mhz) - p[3].watts(mhz)).abs() < 1e-12,
            "QK and PV alike"
        );
        // The PEs leak their measured share whatever the clock; the macros leak what the
        // pricing said, a power.
        assert!((p[0].leakage_w + p[3].leakage_w - pe_leak).abs() < 1e-12);
        assert!((p[5].leakage_w - w(5.0)).abs() < 1e-15);
        // A gate-level table's rows' half of the static goes to the engines and the banks as
        // dynamic power, and they take no assumed clock and leakage; the control still does.
        let g = part_power(&parts, &e, cycles, (mhz, 0.5)).unwrap();
        let g_watts: f64 = g.iter().map(|x| x.watts(mhz)).sum();
        assert!(g[1].assumed_pj_per_cycle == 0.0 && g[4].assumed_pj_per_cycle == 0.0);
        assert!(g[2].assumed_pj_per_cycle > 0.0);
        let g_pe = pe_static / 2.0;
        assert!((g_watts - assumed(&g) - rest - g_pe - w(300.0)).abs() < 1e-12);
        assert!(
            (assumed(&g) - g_pe * 0.5 / 4.0).abs() < 1e-12,
            "the control's 0.5 mm²"
        );
        let mut bad = e.clone();
        bad.components_pj.insert("teleport".into(), 1.0);
        assert!(part_power(&parts, &bad, cycles, (mhz, 1.0)).is_err());
        let near_lid = stack(&p, mhz, MemoryTier::NearLid, 45.0).unwrap();
        let names: Vec<&str> = near_lid.layers.iter().map(|l| l.name.as_str()).collect();
        assert_eq!(names[0], "tier 0 (QK)");
        assert_eq!(*names.last().unwrap(), GLB_DIE);
        let near_logic = stack(&p, mhz, MemoryTier::NearLogic, 45.0).unwrap();
        assert_eq!(near_logic.layers[0].name, GLB_DIE);
        // The footprint is the largest die; the power in the stack is the parts'.
        assert!((near_lid.footprint_mm2 - 3.0).abs() < 1e-12);
        let in_stack: f64 = near_lid
            .layers
            .iter()
            .flat_map(|l| &l.blocks)
            .map(|b| b.dynamic_w + b.leakage_w)
            .sum();
        assert!((in_stack - watts).abs() < 1e-12);
        // The hotter the clock the hotter the stack; the limit falls between.
        let t = |mhz: f64| {
            stack(&p, mhz, MemoryTier::NearLid, 45.0)
                .unwrap()
                .solve(8)
                .unwrap()
        };
        assert!(t(3000.0).peak_c() > t(1500.0).peak_c());
        let top = max_clock(&p, (MemoryTier::NearLid, 8, 45.0), 46.0, 1e6)
            .unwrap()
            .unwrap();
        assert!(
            t(top).peak_c() <= 46.0 && t(top + 2.0).peak_c() > 46.0,
            "{top}"
        );
        assert!("sideways".parse::<MemoryTier>().is_err());
    }
}
