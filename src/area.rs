//! A design's silicon at a standard-cell library (`regflash compare --iso area`,
//! docs/asic.md): the ASIC flow's standard-cell area of the whole top (`gen::asic`, each module
//! mapped once and cached), plus its memory macros at a sourced SRAM density, cut into the
//! tiers the variant stacks (`crate::tiers`). A stack's footprint is its largest tier; its
//! silicon is every tier's.
//!
//! The SRAM banks that are SRAM in any real chip (buf2d's buffer, rowfused's S arrays, the
//! GLB) are emitted as macros here, whatever the configuration's `macro` knob says: the knob
//! changes what Verilog is written, never a cycle, and flip-flops would price them 10× too
//! dear (and take hours to map).

use std::path::Path;

use anyhow::{Context, Result};
use serde::Serialize;

use gen::asic::{AsicReport, Liberty};
use hdl::config::CoreConfig;
use hdl::mem::glb::GlbPlacement;

use crate::design::{generate, Target};
use crate::tiers::{PartKind, TierPart};

/// An SRAM macro's area at a node: mm² per MiB of bits, a fixed area per macro for its
/// periphery (decoders, sense amplifiers, I/O and pins, which a small bank cannot spread over
/// many bits), and where the figures come from.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SramDensity {
    pub mm2_per_mib: f64,
    /// µm² each macro takes on top of its bits.
    pub macro_um2: f64,
    pub source: String,
}

impl SramDensity {
    /// The area, µm², of `macros` macros holding `bits` bits in all.
    pub fn area_um2(&self, bits: u64, macros: u64) -> f64 {
        bits as f64 * self.mm2_per_mib / (1u64 << 23) as f64 * 1e6 + macros as f64 * self.macro_um2
    }
}

/// The periphery of one SRAM macro at 45 nm, µm²: the fixed term of a least-squares fit
/// `area = fixed + per_bit · bits` (R² 0.995) over the 17 CACTI-sized `fakeram45_*` macros of
/// OpenROAD-flow-scripts (flow/platforms/nangate45/lef, commit aaa961f; bsg_fakeram runs CACTI
/// at 45 nm for each: 32×32 to 2048×39 words × bits; the seven whose heights were set by hand
/// to fit their pins are left out). Its per-bit term, 0.551 µm², is CACTI tuned for cycle
/// time with ECC; the bits are priced at the density above, the periphery at this term.
pub const NANGATE45_SRAM_MACRO_UM2: f64 = 451.0;

/// The sourced SRAM density of a known library (None where regflash has none: give one with
/// `--sram-mm2-per-mib`).
/// - nangate45: CACTI 7 at 45 nm, the energy table's `sram_mm2_per_mib` (3.4), and
///   [`NANGATE45_SRAM_MACRO_UM2`] a macro.
/// - asap7: TSMC N7's 0.027 µm² high-density bit cell (Chang et al., ISSCC 2017) at the
///   array efficiency CACTI 7 has at 45 nm (its 146 F² cell, 0.296 µm², is 73 % of 3.4 mm²
///   per MiB): 0.027 × 2^23 bits / 0.73 = 0.31 mm² per MiB. The test chip's whole die
///   (256 Mib on 42.6 mm², 1.33 mm² per MiB with pads and test logic) bounds it from above.
///   A macro's periphery is 45 nm's scaled as the bits are (0.31 / 3.4: 41 µm²); asap7's
///   FakeRAM 2.0 macros in OpenROAD-flow-scripts model none (their area is bits only).
pub fn sram_density(library: &str) -> Option<SramDensity> {
    let at45 = kernels::energy::EnergyTable::default().sram_mm2_per_mib;
    match library {
        "nangate45" => Some(SramDensity {
            mm2_per_mib: at45,
            macro_um2: NANGATE45_SRAM_MACRO_UM2,
            source: format!(
                "CACTI 7 at 45 nm (the energy table's sram_mm2_per_mib), and \
                 {NANGATE45_SRAM_MACRO_UM2:.0} µm² a macro's periphery (CACTI-sized fakeram45 \
                 macros of OpenROAD-flow-scripts)"
            ),
        }),
        "asap7" => Some(SramDensity {
            mm2_per_mib: ASAP7_SRAM_MM2_PER_MIB,
            macro_um2: NANGATE45_SRAM_MACRO_UM2 * ASAP7_SRAM_MM2_PER_MIB / at45,
            source: "TSMC N7's 0.027 µm² bit cell (ISSCC 2017) at CACTI 7's 45-nm array \
                     efficiency (73 %), and 45 nm's macro periphery scaled as the bits are"
                .into(),
        }),
        _ => None,
    }
}

/// The placement utilization standard cells are priced at by default: the share of a placed
/// block's core area its cells fill (the rest is whitespace for routing, buffering and
/// sizing). OpenROAD-flow-scripts' nangate45 `gcd` sets `CORE_UTILIZATION` 55 %; a regular
/// datapath places denser. Configurable (`--utilization`), and stated wherever it is used.
pub const DEFAULT_UTILIZATION: f64 = 0.7;

/// `u` as a placement utilization (above 0, at most 1), or an error that says so.
pub fn check_utilization(u: f64) -> Result<f64> {
    anyhow::ensure!(
        u.is_finite() && u > 0.0 && u <= 1.0,
        "--utilization is the share of the placed area the standard cells fill: a number above 0 \
         and at most 1 (0.7 by default), not {u}"
    );
    Ok(u)
}

/// See [`sram_density`].
pub const ASAP7_SRAM_MM2_PER_MIB: f64 = 0.027 * (1u64 << 23) as f64 / 0.73 * 1e-6;

/// One design's silicon at a library.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct DesignArea {
    pub library: String,
    pub node: String,
    /// Standard cells of the whole top (the core, its DMA and buffers, the SoC registers), as
    /// mapped (no placement).
    pub cells_mm2: f64,
    /// The placement utilization the tiers price the cells at: a tier's cells take their area
    /// over it.
    pub utilization: f64,
    /// Memory macros at `density` (their bits and each one's periphery).
    pub macros_mm2: f64,
    pub macro_bits: u64,
    /// How many macros.
    pub macros: u64,
    pub density: SramDensity,
    /// Each tier's silicon (cells and macros): the logic tiers in order, then the stacked
    /// SRAM dies (banks, GLB): (tier, mm²).
    pub tiers: Vec<(String, f64)>,
    /// All tiers.
    pub silicon_mm2: f64,
    /// The largest tier.
    pub footprint_mm2: f64,
    /// The design's fmax at synthesis level, its slowest block's as `synth --target asic`
    /// reports it (`AsicReport::design_fmax`; None: nothing timed).
    pub fmax_mhz: Option<f64>,
}

/// `cfg` as the area flow builds it: its SRAM banks as macros (see the module doc).
pub fn with_macros(cfg: &CoreConfig) -> CoreConfig {
    let mut c = cfg.clone();
    c.variant = c.variant.with_macros(true);
    if c.glb.bytes > 0 {
        c.glb.blackbox = true;
    }
    c
}

/// A design mapped at a library: its configuration as mapped (banks as macros), the flow's
/// report and the report cut into the variant's parts.
pub struct Mapped {
    pub config: CoreConfig,
    pub report: AsicReport,
    pub parts: Vec<TierPart>,
}

/// Maps `cfg`'s whole top (its banks as macros) at `lib` for `clock_mhz`; `timed`: and times
/// it (minutes on `seed`; untimed, the report has areas and no fmax).
pub fn map_design(
    cfg: &CoreConfig,
    lib: &Liberty,
    label: (&str, &str),
    clock_mhz: f64,
    timed: bool,
) -> Result<Mapped> {
    let cfg = with_macros(cfg);
    let dir = gen::tools::ScratchDir::new("area")?;
    let manifest = generate(&cfg, &Target::Top, dir.path())?;
    let report = if timed {
        gen::asic::asic(dir.path(), lib, label, clock_mhz)
    } else {
        gen::asic::asic_timing_up_to(dir.path(), lib, label, clock_mhz, 0)
    }
    .with_context(|| format!("the ASIC flow of {} at {}", cfg.variant.label(), label.0))?;
    anyhow::ensure!(
        report.passed(),
        "the ASIC flow of {} found latches or problems: {:?}",
        cfg.variant.label(),
        report.yosys_problems
    );
    let parts = crate::tiers::parts(&cfg, &report, &manifest.memories);
    Ok(Mapped {
        config: cfg,
        report,
        parts,
    })
}

impl Mapped {
    /// Its silicon at `density`, the standard cells placed at `utilization`; `stacked_banks`:
    /// the rows' SRAM banks (buf2d's buffer, the P banks) on a tier of their own (the "3-D
    /// buffered" design).
    pub fn price(
        &self,
        density: &SramDensity,
        utilization: f64,
        stacked_banks: bool,
    ) -> DesignArea {
        price(
            &self.config,
            &self.report,
            &self.parts,
            (density, utilization),
            stacked_banks,
        )
    }
}

/// One part of a design on the die it sits on, at a library's density and utilization.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Placed {
    /// The die: a logic tier (`tier 0 (QK)`, ...) or a stacked SRAM die.
    pub die: String,
    pub part: String,
    #[serde(skip)]
    pub kind: PartKind,
    /// Its standard cells over the placement utilization (mm²).
    pub cells_mm2: f64,
    /// Its memory macros at the density, bits and periphery (mm²).
    pub macros_mm2: f64,
    pub macro_bits: u64,
}

impl Placed {
    pub fn mm2(&self) -> f64 {
        self.cells_mm2 + self.macros_mm2
    }
}

/// The GLB's banks, as a part of their own (the control's macros).
pub const GLB_BANKS: &str = "GLB banks";
/// The die of the stacked GLB, and of 3-D buffered's banks.
pub const GLB_DIE: &str = "GLB tier (stacked)";
pub const BANKS_DIE: &str = "SRAM tier (stacked banks)";

/// The parts on their dies: the control joins the bottom logic tier, its macros (the GLB's
/// banks) are a part of their own on the GLB's die when the GLB is stacked, and
/// `stacked_banks` moves the rows' SRAM banks (buf2d's buffer, the P banks) to a die of their
/// own (the "3-D buffered" design). Parts with no silicon are left out.
pub fn placed(
    cfg: &CoreConfig,
    parts: &[TierPart],
    (density, utilization): (&SramDensity, f64),
    stacked_banks: bool,
) -> Vec<Placed> {
    let bottom = parts
        .iter()
        .map(|p| p.tier.as_str())
        .filter(|t| *t != "base")
        .min()
        .unwrap_or("tier 0")
        .to_string();
    let glb_stacked = cfg.glb.bytes > 0 && cfg.glb.placement == GlbPlacement::Stacked;
    let mut out = vec![];
    for p in parts {
        let cells_mm2 = p.area_um2.unwrap_or(0.0) * 1e-6 / utilization;
        let macros_mm2 = density.area_um2(p.macro_bits, p.macros) * 1e-6;
        let at = |die: &str, (part, kind): (&str, PartKind), mm2: (f64, f64), macro_bits| Placed {
            die: die.to_string(),
            part: part.to_string(),
            kind,
            cells_mm2: mm2.0,
            macros_mm2: mm2.1,
            macro_bits,
        };
        let this = (p.part.as_str(), p.kind);
        if stacked_banks && p.kind.banks() {
            out.push(at(BANKS_DIE, this, (cells_mm2, macros_mm2), p.macro_bits));
        } else if p.kind == PartKind::Control {
            // The control's macros are the GLB's banks: on their own stacked die, or beside
            // the control.
            let glb_die = if glb_stacked { GLB_DIE } else { &bottom };
            out.push(at(&bottom, this, (cells_mm2, 0.0), 0));
            let glb = (GLB_BANKS, PartKind::GlbBanks);
            out.push(at(glb_die, glb, (0.0, macros_mm2), p.macro_bits));
        } else {
            out.push(at(&p.tier, this, (cells_mm2, macros_mm2), p.macro_bits));
        }
    }
    out.retain(|p| p.mm2() > 0.0);
    out
}

/// The tiers' silicon from the parts (see [`Mapped::price`]).
fn price(
    cfg: &CoreConfig,
    report: &AsicReport,
    parts: &[TierPart],
    (density, utilization): (&SramDensity, f64),
    stacked_banks: bool,
) -> DesignArea {
    let mut tiers: Vec<(String, f64)> = vec![];
    for p in placed(cfg, parts, (density, utilization), stacked_banks) {
        match tiers.iter_mut().find(|t| t.0 == p.die) {
            Some(t) => t.1 += p.mm2(),
            None => tiers.push((p.die.clone(), p.mm2())),
        }
    }
    // The logic tiers in order, then the stacked SRAM dies.
    tiers.sort_by(|a, b| (!a.0.starts_with("tier"), &a.0).cmp(&(!b.0.starts_with("tier"), &b.0)));
    let macro_bits: u64 = parts.iter().map(|p| p.macro_bits).sum();
    let macros: u64 = parts.iter().map(|p| p.macros).sum();
    let silicon: f64 = tiers.iter().map(|t| t.1).sum();
    let footprint = tiers.iter().map(|t| t.1).fold(0.0, f64::max);
    let fmax = report.design_fmax().map(|(_, _, t)| t.fmax_mhz);
    DesignArea {
        library: report.library.clone(),
        node: report.node.clone(),
        cells_mm2: report.total_area_um2() * 1e-6,
        utilization,
        macros_mm2: density.area_um2(macro_bits, macros) * 1e-6,
        macro_bits,
        macros,
        density: density.clone(),
        tiers,
        silicon_mm2: silicon,
        footprint_mm2: footprint,
        fmax_mhz: fmax,
    }
}

/// Resolves `--lib` / `--liberty` (nangate45 when neither is given) and loads the liberty
/// into `scratch`: the library and its (name, node).
pub fn load_library(
    lib: Option<&str>,
    liberty: Option<&Path>,
    scratch: &Path,
) -> Result<(Liberty, (String, String))> {
    let lib = if liberty.is_some() {
        lib
    } else {
        lib.or(Some("nangate45"))
    };
    let (path, name, node) = gen::asic::resolve(lib, liberty)?;
    Ok((gen::asic::load(&path, &name, scratch)?, (name, node)))
}

/// Resolves `--lib` / `--liberty` ([`load_library`]) and the SRAM density for an area run: the
/// library's sourced density, or `override_mm2_per_mib` (required where there is none).
pub fn resolve_library(
    lib: Option<&str>,
    liberty: Option<&Path>,
    override_mm2_per_mib: Option<f64>,
    scratch: &Path,
) -> Result<(Liberty, (String, String), SramDensity)> {
    let (library, (name, node)) = load_library(lib, liberty, scratch)?;
    let density = match override_mm2_per_mib {
        Some(d) => {
            anyhow::ensure!(
                d.is_finite() && d > 0.0,
                "--sram-mm2-per-mib must be a positive density in mm² per MiB, not {d}"
            );
            // The library's macro periphery where regflash has one; none elsewhere.
            let known = sram_density(&name);
            SramDensity {
                mm2_per_mib: d,
                macro_um2: known.as_ref().map_or(0.0, |k| k.macro_um2),
                source: match known {
                    Some(k) => format!("--sram-mm2-per-mib, and {:.0} µm² a macro", k.macro_um2),
                    None => "--sram-mm2-per-mib (no macro periphery at this library)".into(),
                },
            }
        }
        None => sram_density(&name).with_context(|| {
            format!(
                "regflash has no sourced SRAM density at {name} ({node}), so the memory macros \
                 cannot be priced: give one with --sram-mm2-per-mib, or use --lib nangate45 or \
                 asap7"
            )
        })?,
    };
    Ok((library, (name, node), density))
}

#[cfg(test)]
mod tests {
    use super::*;
    use gen::asic::{AsicModule, PathTiming};

    fn part(
        (tier, name, kind): (&str, &str, PartKind),
        area_um2: f64,
        (macro_bits, macros): (u64, u64),
    ) -> TierPart {
        TierPart {
            macros,
            tier: tier.into(),
            part: name.into(),
            kind,
            instances: 1,
            cells: 1,
            flip_flops: 0,
            memory_bits: macro_bits,
            macro_bits,
            area_um2: Some(area_um2),
        }
    }

    /// A top that is only a wrapper (no cells of its own) of modules timed at `periods` ns,
    /// the first of them with a submodule (`sub`) timed at 8 ns on its own.
    fn report(periods: &[f64]) -> AsicReport {
        let timing = |p: f64| {
            Some(PathTiming {
                startpoint: "a".into(),
                endpoint: "b".into(),
                arrival_ns: p,
                slack_ns: 0.0,
                cells: 3,
                min_period_ns: p,
                fmax_mhz: 1000.0 / p,
                steps: vec![],
            })
        };
        let module = |name: String, p: Option<f64>, children: &[&str]| AsicModule {
            name,
            copies: 1,
            cells: 1,
            area_um2: if p.is_some() { 1.0 } else { 0.0 },
            flop_area_um2: 0.0,
            total_cells: 1,
            total_area_um2: if p.is_some() { 1.0 } else { 3.0e6 },
            children: children.iter().map(|c| (c.to_string(), 1)).collect(),
            timing: p.and_then(timing),
            hold: None,
            untimed: None,
        };
        let names: Vec<String> = (0..periods.len()).map(|i| format!("m{i}")).collect();
        let kids: Vec<&str> = names.iter().map(String::as_str).collect();
        let mut modules = vec![
            module("top".into(), None, &kids),
            module("sub".into(), Some(8.0), &[]),
        ];
        for (i, (name, &p)) in names.iter().zip(periods).enumerate() {
            let sub: &[&str] = if i == 0 { &["sub"] } else { &[] };
            modules.push(module(name.clone(), Some(p), sub));
        }
        AsicReport {
            top: "top".into(),
            library: "nangate45".into(),
            node: "45 nm".into(),
            liberty: "x".into(),
            clock_mhz: 1500.0,
            modules,
            latches: 0,
            yosys_problems: vec![],
            abc_buffer: None,
            remapped: Default::default(),
            remap_failed: vec![],
            label: String::new(),
        }
    }

    /// The tiers' silicon: the control joins the bottom tier, a stacked GLB and stacked banks
    /// get tiers of their own, macros are priced by the density, the footprint is the largest
    /// tier and the silicon their sum; fmax is the slowest block's (a module timed whole
    /// speaks for its submodules' own figures).
    #[test]
    fn tiers_footprint_and_macros_are_priced() {
        let density = sram_density("nangate45").unwrap();
        let mib = 1u64 << 23;
        let parts = vec![
            part(
                ("tier 0 (QK)", "QK tier PEs", PartKind::QkPes),
                2.0e6,
                (0, 0),
            ),
            part(
                ("tier 1 (PV)", "PV tier PEs", PartKind::PvPes),
                1.5e6,
                (0, 0),
            ),
            part(("tier 1 (PV)", "P banks", PartKind::PBanks), 0.25e6, (0, 0)),
            part(
                ("base", "control: DMA", PartKind::Control),
                0.5e6,
                (mib, 16),
            ),
        ];
        let mut cfg = CoreConfig::preset("small").unwrap();
        cfg.glb.bytes = 1 << 20;
        cfg.glb.placement = GlbPlacement::Stacked;
        let a = price(&cfg, &report(&[2.0, 4.0]), &parts, (&density, 1.0), false);
        let close = |x: f64, y: f64| (x - y).abs() < 1e-9;
        let tier =
            |a: &DesignArea, n: &str| a.tiers.iter().find(|t| t.0 == n).map_or(-1.0, |t| t.1);
        // A MiB in 16 macros: its bits at the density, each macro's periphery on top.
        let d = density.mm2_per_mib + 16.0 * NANGATE45_SRAM_MACRO_UM2 * 1e-6;
        assert!(
            close(tier(&a, "tier 0 (QK)"), 2.5),
            "the control on the bottom tier: {a:?}"
        );
        assert!(close(tier(&a, "tier 1 (PV)"), 1.75));
        assert!(close(tier(&a, "GLB tier (stacked)"), d));
        assert!(close(a.footprint_mm2, d.max(2.5)));
        assert!(close(a.silicon_mm2, 2.5 + 1.75 + d));
        assert_eq!((a.macro_bits, a.macros), (mib, 16));
        assert!(close(a.macros_mm2, d));
        assert_eq!(a.fmax_mhz, Some(250.0));
        // A planar GLB stays on the bottom tier; stacked banks leave their tier.
        cfg.glb.placement = GlbPlacement::Planar;
        let b = price(&cfg, &report(&[2.0]), &parts, (&density, 1.0), true);
        assert_eq!(b.tiers.len(), 3, "{:?}", b.tiers);
        assert!(close(tier(&b, "tier 0 (QK)"), 2.5 + d));
        assert!(close(tier(&b, "tier 1 (PV)"), 1.5));
        assert!(close(tier(&b, "SRAM tier (stacked banks)"), 0.25));
        // Placed at half utilization, the cells take twice their area; the macros (the planar
        // GLB's, on the bottom tier) do not.
        let c = price(&cfg, &report(&[2.0]), &parts, (&density, 0.5), false);
        assert!(close(tier(&c, "tier 0 (QK)"), 5.0 + d), "{c:?}");
        assert!(close(tier(&c, "tier 1 (PV)"), 3.5));
        assert!(close(c.cells_mm2, a.cells_mm2) && c.utilization == 0.5);
        for bad in [0.0, -0.1, 1.01, f64::NAN] {
            assert!(check_utilization(bad).is_err(), "{bad}");
        }
        assert_eq!(check_utilization(1.0).unwrap(), 1.0);
        // Densities are sourced at two libraries only, and asap7's is 0.31 mm² per MiB.
        // asap7's periphery is 45 nm's scaled as the bits are: 41 µm².
        assert!((ASAP7_SRAM_MM2_PER_MIB - 0.31).abs() < 0.005);
        let a7 = sram_density("asap7").unwrap();
        assert!((a7.macro_um2 - 41.0).abs() < 0.5, "{a7:?}");
        assert!(sram_density("osu018").is_none());
    }
}
