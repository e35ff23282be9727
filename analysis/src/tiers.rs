//! Where the synthesized core sits, tier by tier (`regflash synth`): the Yosys hierarchy split
//! into the parts of the design (the PE tiers, the softmax tier's S registers, the P banks,
//! the S buffer, the row engines, the control), each part placed on its tier by the variant.
//!
//! The parts are whole modules (docs/variants.md: a stacked design's tiers are separate modules),
//! so each figure is a sum of Yosys's own per-module counts times instance counts, not an
//! estimate: `pe_tier_qk_*` / `pe_tier_pv_*` / `pe_tier_qkpv_*` (a row's PEs on one tier),
//! `s_tier_*` (the softmax tier's S registers and links), the SRAM banks in a row (`sram_*`:
//! 16-bit P banks, 32-bit S arrays), the rest of each `pe_row_*` (its row engine: softmax,
//! readout normalization), and the rest of the top (DMA, sequencer, fetch, readout, counters,
//! masks). Memory bits come from the design's memory arrays, by the same instance counts.

use gen::asic::AsicReport;
use gen::flow::{CellStats, SynthReport};
use gen::manifest::MemoryEntry;
use hdl::config::CoreConfig;

/// A synthesized hierarchy the parts are cut from: a generic Yosys report (cells and
/// flip-flops) or an ASIC one (µm² at a library).
pub trait Synthesized {
    fn top(&self) -> &str;
    fn module_names(&self) -> Vec<&str>;
    /// The modules `m` instantiates, with their instance counts.
    fn children(&self, m: &str) -> Vec<(&str, u64)>;
    /// `m`'s whole subtree: cells, flip-flops (0 where not counted) and area (µm²; None on a
    /// generic report).
    fn subtree(&self, m: &str) -> (u64, u64, Option<f64>);
}

impl Synthesized for SynthReport {
    fn top(&self) -> &str {
        &self.top
    }
    fn module_names(&self) -> Vec<&str> {
        self.modules.keys().map(|m| m.as_str()).collect()
    }
    fn children(&self, m: &str) -> Vec<(&str, u64)> {
        // Every cell type: a library cell has no children, so only modules and black
        // boxes (memory macros) count.
        self.modules.get(m).map_or(vec![], |s| {
            s.by_type.iter().map(|(t, &n)| (t.as_str(), n)).collect()
        })
    }
    fn subtree(&self, m: &str) -> (u64, u64, Option<f64>) {
        let t: CellStats =
            gen::flow::hierarchy_total(&self.modules, m, self.target).unwrap_or_default();
        (t.cells, t.flip_flops, None)
    }
}

impl Synthesized for AsicReport {
    fn top(&self) -> &str {
        &self.top
    }
    fn module_names(&self) -> Vec<&str> {
        // The mapped modules, and the memory macros they instantiate (black boxes: no cells).
        let mut names: Vec<&str> = self.modules.iter().map(|m| m.name.as_str()).collect();
        for m in &self.modules {
            for c in m.children.keys() {
                if self.module(c).is_none() && !names.contains(&c.as_str()) {
                    names.push(c);
                }
            }
        }
        names
    }
    fn children(&self, m: &str) -> Vec<(&str, u64)> {
        self.module(m).map_or(vec![], |x| {
            x.children.iter().map(|(c, &n)| (c.as_str(), n)).collect()
        })
    }
    fn subtree(&self, m: &str) -> (u64, u64, Option<f64>) {
        self.module(m).map_or((0, 0, Some(0.0)), |x| {
            (x.total_cells, 0, Some(x.total_area_um2))
        })
    }
}

/// What a part is, for what it spends and where it may go (its `part` names it for people).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PartKind {
    /// A 2-D design's array, running both the QK and the PV steps.
    PeArray,
    QkPes,
    PvPes,
    /// The softmax tier's S registers and their links (reg3d with three tiers).
    SRegisters,
    /// The rows' P banks (16-bit words).
    PBanks,
    /// buf2d's S arrays.
    SBuffer,
    /// The rest of each PE row: its softmax and normalization.
    RowEngines,
    /// The rest of the top: DMA, sequencer, fetch, readout, counters, masks.
    Control,
    /// The GLB's banks: the control's macros, as the area flow splits them off.
    GlbBanks,
    /// Spare lanes: the vertical bundles' repair muxes, repair maps and test checkers
    /// (`vlink_*`), reg3d's counted on the row engines' tier, the stacked GLB's bond's on the
    /// bottom tier with the control.
    Links,
    /// noc2d's P path (`noc_path_*`): the source bank, the routers and the receiver.
    Noc,
}

impl PartKind {
    /// The PEs that run the MACs.
    pub fn pes(self) -> bool {
        matches!(self, PartKind::PeArray | PartKind::QkPes | PartKind::PvPes)
    }
    /// A row's SRAM banks.
    pub fn banks(self) -> bool {
        matches!(self, PartKind::PBanks | PartKind::SBuffer)
    }
}

/// One part of the design on its tier.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct TierPart {
    /// The tier it sits on (`tier 0 (QK)`, ...; `base` for the control, which a stack keeps
    /// on its bottom tier with the memory interface).
    pub tier: String,
    pub part: String,
    #[serde(skip)]
    pub kind: PartKind,
    /// Instances of the part's module in the design (rows × tiers' worth).
    pub instances: u64,
    pub cells: u64,
    pub flip_flops: u64,
    pub memory_bits: u64,
    /// Of those, the bits in memory macros (black boxes: in no cell count or area).
    pub macro_bits: u64,
    /// How many memory macros hold them.
    pub macros: u64,
    /// Standard-cell area, µm² (an ASIC report only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub area_um2: Option<f64>,
}

/// The stacked GLB's bond's part (its bundles' spare lanes, repair and self-test).
pub const GLB_BOND: &str = "GLB bond: spare lanes, repair, self-test";

/// The design's parts by tier, from the synthesis report `r` of the core (or of one PE row)
/// and the design's memories. The parts' cells, flip-flops and memory bits add up to the
/// whole hierarchy's.
pub fn parts(cfg: &CoreConfig, r: &impl Synthesized, mems: &[MemoryEntry]) -> Vec<TierPart> {
    let h = Hierarchy { r, mems };
    let tiers = cfg.variant.tiers();
    let name = |k: u32, what: &str| {
        if tiers == 1 {
            "tier 0".to_string()
        } else {
            format!("tier {k} ({what})")
        }
    };
    let qk = name(0, "QK");
    let sm = if tiers == 3 {
        name(1, "softmax")
    } else {
        qk.clone()
    };
    let pv = name(tiers - 1, "PV");
    let modules: Vec<&str> = r.module_names();
    let rows: Vec<&str> = modules
        .iter()
        .copied()
        .filter(|m| m.starts_with("pe_row_"))
        .collect();
    // Instances of `m` inside the rows.
    let in_rows = |m: &str| -> u64 {
        rows.iter()
            .map(|row| h.count(r.top(), row) * h.count(row, m))
            .sum()
    };
    let mut out = vec![];
    for m in &modules {
        let (tier, part, kind) = if m.starts_with("pe_tier_qkpv_") {
            (&qk, "PE array (QK and PV steps)", PartKind::PeArray)
        } else if m.starts_with("pe_tier_qk_") {
            (&qk, "QK tier PEs", PartKind::QkPes)
        } else if m.starts_with("pe_tier_pv_") {
            (&pv, "PV tier PEs", PartKind::PvPes)
        } else if m.starts_with("s_tier_") {
            (&sm, "S registers and S links", PartKind::SRegisters)
        } else if m.starts_with("noc_path_") {
            // noc2d's NoC, between the arrays on their one die.
            let part = (
                qk.as_str(),
                "NoC: source bank, routers, receiver",
                PartKind::Noc,
            );
            out.push(h.part(part, m, h.count(r.top(), m)));
            continue;
        } else if m.starts_with("vlink_") {
            // The stacked GLB's bond's bundles (in the DMA, not in a row): with the control
            // on the bottom tier.
            let glb = h.count(r.top(), m) - in_rows(m);
            if glb > 0 {
                let part = ("", GLB_BOND, PartKind::Links);
                out.push(TierPart {
                    tier: qk.clone(),
                    ..h.part(part, m, glb)
                });
            }
            if in_rows(m) == 0 {
                continue;
            }
            (
                &sm,
                "vertical links: spare lanes, repair, self-test",
                PartKind::Links,
            )
        } else if m.starts_with("sram_") && in_rows(m) > 0 {
            // The rows' SRAM banks: P (16-bit words; on the PV tier in reg3d), buf2d's S.
            if m.trim_end_matches("_macro").ends_with("_w16") {
                (&pv, "P banks", PartKind::PBanks)
            } else {
                (&qk, "S buffer arrays", PartKind::SBuffer)
            }
        } else {
            continue;
        };
        out.push(h.part((tier, part, kind), m, in_rows(m)));
    }
    // The S tier's bundles are in the links' part, not the S registers'.
    let links: Vec<&str> = modules
        .iter()
        .copied()
        .filter(|m| m.starts_with("vlink_"))
        .collect();
    for p in out.iter_mut().filter(|p| p.kind == PartKind::SRegisters) {
        let s_tiers: Vec<&str> = modules
            .iter()
            .copied()
            .filter(|m| m.starts_with("s_tier_"))
            .collect();
        let inner: Vec<TierPart> = s_tiers
            .iter()
            .flat_map(|t| {
                links.iter().map(|l| {
                    let n = in_rows(t) * h.count(t, l);
                    h.part((&sm, "", PartKind::Links), l, n)
                })
            })
            .collect();
        *p = p.clone().less(&inner);
    }
    // What remains of the rows is their engines; of the top, the control.
    for row in &rows {
        let whole = h.part(
            (
                &sm,
                "row engines (softmax, normalization)",
                PartKind::RowEngines,
            ),
            row,
            h.count(r.top(), row),
        );
        let engines = whole.less(&out);
        out.push(engines);
    }
    let top = h.part(
        (
            "base",
            "control: DMA, sequencer, fetch, readout, counters, masks",
            PartKind::Control,
        ),
        r.top(),
        1,
    );
    let control = top.less(&out);
    if control.cells > 0 || control.memory_bits > 0 {
        out.push(control);
    }
    out.sort_by(|a, b| a.tier.cmp(&b.tier));
    // The links' bundles (a module each) as one part.
    let mut merged: Vec<TierPart> = vec![];
    for p in out {
        match merged.iter_mut().find(|m| {
            m.kind == PartKind::Links && (&m.tier, m.kind, &m.part) == (&p.tier, p.kind, &p.part)
        }) {
            Some(m) => m.add(&p),
            None => merged.push(p),
        }
    }
    merged
}

impl TierPart {
    /// Adds `p` (another module of this part) to this part.
    fn add(&mut self, p: &TierPart) {
        self.instances += p.instances;
        self.cells += p.cells;
        self.flip_flops += p.flip_flops;
        self.memory_bits += p.memory_bits;
        self.macro_bits += p.macro_bits;
        self.macros += p.macros;
        self.area_um2 = self.area_um2.zip(p.area_um2).map(|(a, b)| a + b);
    }

    /// This part less the parts inside it.
    fn less(mut self, inner: &[TierPart]) -> TierPart {
        for p in inner {
            self.cells -= p.cells.min(self.cells);
            self.flip_flops -= p.flip_flops.min(self.flip_flops);
            self.memory_bits -= p.memory_bits.min(self.memory_bits);
            self.macro_bits -= p.macro_bits.min(self.macro_bits);
            self.macros -= p.macros.min(self.macros);
            if let (Some(a), Some(b)) = (self.area_um2.as_mut(), p.area_um2) {
                *a = (*a - b).max(0.0);
            }
        }
        self
    }
}

/// The synthesized hierarchy: instance counts and subtree totals.
struct Hierarchy<'a, S: Synthesized> {
    r: &'a S,
    mems: &'a [MemoryEntry],
}

impl<S: Synthesized> Hierarchy<'_, S> {
    /// Instances of module `x` under `root` (1 for `root` itself).
    fn count(&self, root: &str, x: &str) -> u64 {
        if root == x {
            return 1;
        }
        self.r
            .children(root)
            .iter()
            .map(|&(t, n)| if t == x { n } else { n * self.count(t, x) })
            .sum()
    }

    /// `n` instances of `module`, its submodules expanded.
    fn part(&self, (tier, part, kind): (&str, &str, PartKind), module: &str, n: u64) -> TierPart {
        let (cells, flip_flops, area) = self.r.subtree(module);
        // Over the memories (macros only, or all): each instance's `per`.
        let sum = |macros: bool, per: fn(&MemoryEntry) -> u64| -> u64 {
            self.mems
                .iter()
                .filter(|e| !macros || e.blackbox)
                .map(|e| per(e) * self.count(module, &e.module))
                .sum()
        };
        let bits = |macros: bool| sum(macros, |e| e.depth as u64 * e.width as u64);
        TierPart {
            tier: tier.to_string(),
            part: part.to_string(),
            kind,
            instances: n,
            cells: n * cells,
            flip_flops: n * flip_flops,
            memory_bits: n * bits(false),
            macro_bits: n * bits(true),
            macros: n * sum(true, |_| 1),
            area_um2: area.map(|a| n as f64 * a),
        }
    }
}

/// The markdown table of `parts`, with each tier's subtotal (and its standard-cell area when
/// the parts come from an ASIC report).
pub fn table(parts: &[TierPart]) -> String {
    let areas = parts.iter().any(|p| p.area_um2.is_some());
    let mut s = String::from(
        "\n| tier | part | instances | cells | flip-flops | memory bits | of which in macros |",
    );
    s += if areas {
        " cell area µm² |\n|---|---|---:|---:|---:|---:|---:|---:|\n"
    } else {
        "\n|---|---|---:|---:|---:|---:|---:|\n"
    };
    let area = |a: Option<f64>| match (areas, a) {
        (true, Some(a)) => format!(" {a:.1} |"),
        (true, None) => " - |".into(),
        (false, _) => String::new(),
    };
    let mut tiers: Vec<&str> = parts.iter().map(|p| p.tier.as_str()).collect();
    tiers.dedup();
    for t in tiers {
        let of: Vec<&TierPart> = parts.iter().filter(|p| p.tier == t).collect();
        // An ASIC report counts area, not flip-flops.
        let flops = |n: u64| {
            if areas {
                "-".to_string()
            } else {
                n.to_string()
            }
        };
        for p in &of {
            s += &format!(
                "| {} | {} | {} | {} | {} | {} | {} |{}\n",
                p.tier,
                p.part,
                p.instances,
                p.cells,
                flops(p.flip_flops),
                p.memory_bits,
                p.macro_bits,
                area(p.area_um2)
            );
        }
        if of.len() > 1 {
            let sum = |f: fn(&TierPart) -> u64| of.iter().map(|p| f(p)).sum::<u64>();
            let a: Option<f64> = of.iter().map(|p| p.area_um2).sum();
            s += &format!(
                "| **{t}** | | | **{}** | **{}** | **{}** | **{}** |{}\n",
                sum(|p| p.cells),
                flops(sum(|p| p.flip_flops)),
                sum(|p| p.memory_bits),
                sum(|p| p.macro_bits),
                area(a)
            );
        }
    }
    s
}
