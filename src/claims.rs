//! `regflash compare --claims`: the published claims, each against the comparisons that
//! reproduce its kind (which baseline, which hierarchy, which lengths, iso-PE or not), with the
//! figure regflash measures and a verdict in so many words (docs/baselines.md).
//!
//! The baselines regflash builds: `unfused` (standard attention: S and P written to memory
//! and read back between the passes of a tile), `rowfused` (row-materializing fused
//! attention, FLAT: whole rows of S in an on-chip buffer, a two-pass softmax) and `buf2d`
//! (fused FlashAttention with S and P in SRAM banks beside the rows). With a GLB, unfused's
//! S and P live in its upper half as far as a tile's fit, and go to DRAM past that (K and V
//! keep a quarter each).

use std::collections::BTreeMap;

use serde::Serialize;

use crate::compare::{CompareRow, FUSEMAX_SUFFIX};

/// One published claim and what regflash measures of it.
#[derive(Clone, Debug, Serialize)]
pub struct ClaimRow {
    /// The claim, in the source's words.
    pub claim: String,
    /// The source document.
    pub source: String,
    /// The baseline, workload and scale the source measured the claim on.
    pub setting: String,
    /// The array, head size and heads regflash measures it on.
    pub ours: String,
    /// The comparison that reproduces its kind: our design against which baselines, how the
    /// PEs are counted, at which lengths.
    pub comparison: String,
    /// The memory hierarchy the figures come from.
    pub hierarchy: String,
    /// What regflash measures, per baseline.
    pub measured: String,
    /// "reproduced", "reproduced only against X", or "not reproduced against Y; ...".
    pub verdict: String,
    /// Some figure of the row comes from the cycle model rather than a simulated run.
    pub from_model: bool,
}

/// A figure of one design against one baseline at one length.
pub(crate) struct Point {
    pub seq: usize,
    pub value: f64,
    pub model: bool,
}

/// The rows of one hierarchy (the GLB the configuration gives, or none), by design name
/// without the hierarchy's suffix, then by length.
pub(crate) type Runs<'a> = BTreeMap<String, BTreeMap<usize, &'a CompareRow>>;

pub(crate) fn runs_of<'a>(rows: &'a [CompareRow], suffix: &str) -> Runs<'a> {
    let mut m: Runs = BTreeMap::new();
    for r in rows {
        let name = match suffix {
            "" if r.design.ends_with(" (no GLB)") || r.design.ends_with(FUSEMAX_SUFFIX) => continue,
            "" => r.design.clone(),
            s => match r.design.strip_suffix(s) {
                Some(n) => n.to_string(),
                None => continue,
            },
        };
        m.entry(name).or_default().insert(r.seq_len, r);
    }
    m
}

/// The hierarchies `rows` hold, as the claims table names them: (design-name suffix, words):
/// the configuration's (`hierarchy`), and with `--glb both` none.
pub(crate) fn hierarchies(rows: &[CompareRow], hierarchy: &str) -> Vec<(&'static str, String)> {
    let mut v = vec![("", hierarchy.to_string())];
    if rows.iter().any(|r| r.design.ends_with(" (no GLB)")) {
        v.push((
            " (no GLB)",
            "no GLB: DRAM behind the landing buffers".into(),
        ));
    }
    v
}

impl Spec {
    /// The design whose figure is set against `base`: ours, or (a claim about the baselines
    /// themselves) the baseline.
    pub(crate) fn ours_against<'a>(&'a self, base: &'a str) -> &'a str {
        match self.ours {
            "" => base,
            o => o,
        }
    }
}

/// The runs a claim is measured on in the hierarchy of `suffix`: at FuseMax's scale for its
/// claims when `rows` hold those runs (the configuration's hierarchy), else the
/// configuration's.
pub(crate) fn runs_for<'a>(rows: &'a [CompareRow], suffix: &str, s: &Spec) -> Runs<'a> {
    let scaled = format!("{suffix}{FUSEMAX_SUFFIX}");
    match s.fusemax_scale && rows.iter().any(|r| r.design.ends_with(&scaled)) {
        true => runs_of(rows, &scaled),
        false => runs_of(rows, suffix),
    }
}

/// The array, head size and heads of `ours`'s runs in `runs`, in words.
fn scale_of(runs: &Runs, ours: &str) -> String {
    let Some(r) = runs.get(ours).and_then(|m| m.values().next()) else {
        return "-".into();
    };
    let c = &r.config;
    let heads = r.tokens / r.seq_len.max(1) as u64;
    let kv = match r.kv_heads as u64 {
        k if k == heads || k == 0 => String::new(),
        k => format!(" on {k} K/V head{}", if k == 1 { "" } else { "s" }),
    };
    let tiers = match c.variant.tiers() {
        1 => String::new(),
        t => format!(", {t} tiers"),
    };
    format!(
        "{}×{} PEs per tier{tiers}, d = {}, {heads} head{}{kv}{}",
        c.rows,
        c.cols,
        c.head_dim,
        if heads == 1 { "" } else { "s" },
        if r.causal { ", causal" } else { "" }
    )
}

/// `f(ours, base)` at every length both ran at (and that `keep` keeps).
pub(crate) fn points(
    runs: &Runs,
    ours: &str,
    base: &str,
    keep: impl Fn(usize) -> bool,
    f: impl Fn(&CompareRow, &CompareRow) -> f64,
) -> Vec<Point> {
    let (Some(o), Some(b)) = (runs.get(ours), runs.get(base)) else {
        return vec![];
    };
    o.iter()
        .filter(|(n, _)| keep(**n))
        .filter_map(|(n, r)| {
            let base = b.get(n)?;
            Some(Point {
                seq: *n,
                value: f(r, base),
                model: r.report.is_none() || base.report.is_none(),
            })
        })
        .collect()
}

/// "lo–hi unit (N a–b)" of `pts`, each value through `show`.
fn span(pts: &[Point], show: impl Fn(f64) -> String) -> String {
    let lo = pts.iter().map(|p| p.value).fold(f64::INFINITY, f64::min);
    let hi = pts
        .iter()
        .map(|p| p.value)
        .fold(f64::NEG_INFINITY, f64::max);
    let (n0, n1) = (pts[0].seq, pts[pts.len() - 1].seq);
    let values = if show(lo) == show(hi) {
        show(lo)
    } else {
        format!("{}–{}", show(lo), show(hi))
    };
    let lens = if n0 == n1 {
        format!("N = {n0}")
    } else {
        format!("N = {n0}–{n1}")
    };
    format!("{values} ({lens})")
}

fn pct(x: f64) -> String {
    format!("{:.1} %", 100.0 * x)
}

fn times(x: f64) -> String {
    format!("{x:.2}×")
}

/// What one claim needs: our design, the baselines to try, the lengths it speaks of, the
/// figure, the threshold a figure must reach to reproduce it.
pub(crate) struct Spec {
    pub claim: &'static str,
    pub source: &'static str,
    pub ours: &'static str,
    /// What the comparison is, in words.
    pub kind: &'static str,
    pub baselines: &'static [&'static str],
    pub keep: fn(usize) -> bool,
    /// The lengths `keep` keeps, in words.
    pub lengths: &'static str,
    pub figure: fn(&CompareRow, &CompareRow) -> f64,
    pub show: fn(f64) -> String,
    /// The figure reproduces the claim at some length in range when it reaches this.
    pub reaches: f64,
    /// The top of the claim's range (its band on a sweep's plot; `reaches` for one figure).
    pub top: f64,
    /// The claim's own baseline is not among those built (why).
    pub missing: Option<&'static str>,
    /// The baseline, workload and scale the source measured the claim on.
    pub setting: &'static str,
    /// The source's own baselines among `baselines` (empty when none is built).
    pub named: &'static [&'static str],
    /// Measured at FuseMax's scale ([`crate::compare::fusemax_config`]) rather than the
    /// configuration's.
    pub fusemax_scale: bool,
}

fn energy_cut(o: &CompareRow, b: &CompareRow) -> f64 {
    1.0 - o.energy.total_pj / b.energy.total_pj.max(f64::MIN_POSITIVE)
}

fn on_chip_cut(o: &CompareRow, b: &CompareRow) -> f64 {
    1.0 - o.energy.on_chip_pj / b.energy.on_chip_pj.max(f64::MIN_POSITIVE)
}

fn speedup(o: &CompareRow, b: &CompareRow) -> f64 {
    b.cycles as f64 / o.cycles.max(1) as f64
}

fn efficiency(o: &CompareRow, b: &CompareRow) -> f64 {
    b.energy.total_pj / o.energy.total_pj.max(f64::MIN_POSITIVE)
}

/// The baseline's own SRAM share of its energy: its buffer's and the GLB's accesses, as
/// `compare`'s table gives it (the "ours" slot is the baseline itself).
fn sram_share(_: &CompareRow, b: &CompareRow) -> f64 {
    b.energy.sram_share
}

/// 1 − our peak DRAM footprint / the baseline's: the problem's memory image (Q, K, V and O)
/// and, for a design with the scratch region, the region (a tile's S, then P over it).
fn footprint_cut(o: &CompareRow, b: &CompareRow) -> f64 {
    1.0 - footprint(o) / footprint(b).max(f64::MIN_POSITIVE)
}

/// Bytes of memory a run needs at its peak ([`footprint_cut`]).
pub(crate) fn footprint(r: &CompareRow) -> f64 {
    use crate::verify::attention::{scratch_bytes, Layout, TensorLayout};
    let heads = (r.tokens / r.seq_len.max(1) as u64).max(1) as usize;
    let kv_heads = r.kv_heads.clamp(1, heads);
    let d = r.config.head_dim as usize;
    // Q, K, V and (its short form) O in the operand format, K and V per K/V head.
    let bytes = r.config.formats().operand.bytes() as usize;
    let image = Layout::checked(
        (heads, kv_heads),
        r.seq_len,
        r.seq_len,
        d,
        (bytes, bytes),
        TensorLayout::Bhsd,
    )
    .map_or(f64::NAN, |l| l.size as f64);
    let scratch = match hdl::core::CoreParams::from_config(&r.config) {
        Ok(p) if p.row.scratch() => scratch_bytes(&p, r.seq_len).next_multiple_of(4096) as f64,
        Ok(_) => 0.0,
        Err(_) => f64::NAN,
    };
    image + scratch
}

/// 3D-Flow's setting and its baselines here.
const THREE_D_FLOW: &str = "OPT-like (d = 64, MHA) and Qwen-like (d = 128, GQA) models; \
    against 2-D multi-array designs limited by NoC router-to-router transfers, and 3-D stacked \
    designs with buffers";
const THREE_D_FLOW_BASES: &[&str] = &[
    "noc2d",
    "3-D buffered",
    "unfused",
    "rowfused",
    "rowfused (spill)",
    "buf2d",
];
/// The same at iso-PE: noc2d has reg3d's two arrays, so reg3d's own rows are its iso-PE
/// comparison, not reg3d with half the PEs.
const THREE_D_FLOW_ISO_BASES: &[&str] = &[
    "3-D buffered",
    "unfused",
    "rowfused",
    "rowfused (spill)",
    "buf2d",
];

pub(crate) const SPECS: [Spec; 11] = [
    Spec {
        claim: "46–93 % less energy",
        source: "3D-Flow",
        ours: "reg3d",
        kind: "reg3d (QK, softmax and PV on stacked tiers, twice the PEs) against",
        baselines: THREE_D_FLOW_BASES,
        keep: |_| true,
        lengths: "any N",
        figure: energy_cut,
        show: pct,
        reaches: 0.46,
        top: 0.93,
        missing: None,
        setting: THREE_D_FLOW,
        named: &["noc2d", "3-D buffered"],
        fusemax_scale: false,
    },
    Spec {
        claim: "46–93 % less energy (on chip: DRAM left out)",
        source: "3D-Flow",
        ours: "reg3d",
        kind: "reg3d (twice the PEs), its on-chip energy, against",
        baselines: THREE_D_FLOW_BASES,
        keep: |_| true,
        lengths: "any N",
        figure: on_chip_cut,
        show: pct,
        reaches: 0.46,
        top: 0.93,
        missing: None,
        setting: THREE_D_FLOW,
        named: &["noc2d", "3-D buffered"],
        fusemax_scale: false,
    },
    Spec {
        claim: "46–93 % less energy (iso-PE)",
        source: "3D-Flow",
        ours: "reg3d iso-PE",
        kind: "reg3d with the 2-D array's PEs split over its tiers against",
        baselines: THREE_D_FLOW_ISO_BASES,
        keep: |_| true,
        lengths: "any N",
        figure: energy_cut,
        show: pct,
        reaches: 0.46,
        top: 0.93,
        missing: None,
        setting: THREE_D_FLOW,
        named: &["3-D buffered"],
        fusemax_scale: false,
    },
    Spec {
        claim: "1.4–7.6× faster",
        source: "3D-Flow",
        ours: "reg3d",
        kind: "reg3d (twice the PEs) against",
        baselines: THREE_D_FLOW_BASES,
        keep: |_| true,
        lengths: "any N",
        figure: speedup,
        show: times,
        reaches: 1.4,
        top: 7.6,
        missing: None,
        setting: THREE_D_FLOW,
        named: &["noc2d", "3-D buffered"],
        fusemax_scale: false,
    },
    Spec {
        claim: "1.4–7.6× faster (iso-PE)",
        source: "3D-Flow",
        ours: "reg3d iso-PE",
        kind: "reg3d with the 2-D array's PEs split over its tiers against",
        baselines: THREE_D_FLOW_ISO_BASES,
        keep: |_| true,
        lengths: "any N",
        figure: speedup,
        show: times,
        reaches: 1.4,
        top: 7.6,
        missing: None,
        setting: THREE_D_FLOW,
        named: &["3-D buffered"],
        fusemax_scale: false,
    },
    Spec {
        claim: "SRAM over 60 % of energy for N > 2k",
        source: "3D-Flow",
        ours: "",
        kind: "the SRAM share (accesses to the buffer and the GLB) of the energy of",
        baselines: THREE_D_FLOW_BASES,
        keep: |n| n > 2048,
        lengths: "N > 2048",
        figure: sram_share,
        show: pct,
        reaches: 0.6,
        top: 1.0,
        missing: None,
        setting: THREE_D_FLOW,
        named: &["noc2d", "3-D buffered"],
        fusemax_scale: false,
    },
    Spec {
        claim: "2–3× energy efficiency at seq > 8192",
        source: "register-level NPU",
        ours: "reg2d",
        kind: "reg2d (S and P in the PE registers, the same array) against",
        baselines: &["unfused", "rowfused", "rowfused (spill)", "buf2d"],
        keep: |n| n > 8192,
        lengths: "N > 8192",
        figure: efficiency,
        show: times,
        reaches: 2.0,
        top: 3.0,
        missing: None,
        setting: "sequences past 8,192 tokens; against an ordinary NPU that keeps the \
                  intermediate results (S, P) in external DRAM",
        named: &["unfused"],
        fusemax_scale: false,
    },
    Spec {
        claim: "utilization: fused 0.99 against FLAT's 0.125 (7.9×)",
        source: "FuseMax",
        ours: "buf2d",
        kind: "fused FlashAttention (buf2d) against the row-materializing design on the same \
               array and MACs (utilization ratio = cycle ratio):",
        baselines: &["rowfused (spill)", "rowfused"],
        keep: |n| n == 16384,
        lengths: "N = 16384",
        figure: speedup,
        show: times,
        reaches: 7.9,
        top: 7.9,
        missing: None,
        setting: "BERT at 16K tokens on a 256×256 array; FLAT with its fixed on-chip buffer",
        named: &["rowfused (spill)"],
        fusemax_scale: true,
    },
    Spec {
        claim: "utilization: fused 0.99 against unfused 0.08 (12.4×)",
        source: "FuseMax",
        ours: "buf2d",
        kind: "fused FlashAttention (buf2d) against standard attention on the same array and \
               MACs (utilization ratio = cycle ratio):",
        baselines: &["unfused"],
        keep: |n| n == 16384,
        lengths: "N = 16384",
        figure: speedup,
        show: times,
        reaches: 12.4,
        top: 12.4,
        missing: None,
        setting: "BERT at 16K tokens on a 256×256 array; unfused attention on the same array",
        named: &["unfused"],
        fusemax_scale: true,
    },
    Spec {
        claim: "FlashAttention 64 % faster than standard attention at 2k",
        source: "ops-transformer",
        ours: "buf2d",
        kind: "FlashAttention on the buffered NPU (buf2d) against",
        baselines: &["unfused"],
        keep: |n| n == 2048,
        lengths: "N = 2048",
        figure: speedup,
        show: times,
        reaches: 1.64,
        top: 1.64,
        missing: None,
        setting: "2,048 tokens; FlashAttention's kernel against standard attention's on one \
                  accelerator",
        named: &["unfused"],
        fusemax_scale: false,
    },
    Spec {
        claim: "FlashAttention 81 % less memory than standard attention at 2k",
        source: "ops-transformer",
        ours: "buf2d",
        kind: "FlashAttention's peak DRAM footprint (Q, K, V and O; buf2d) against standard \
               attention's, which adds its scratch region (a tile's Br × N of S, then P over \
               it):",
        baselines: &["unfused"],
        keep: |n| n == 2048,
        lengths: "N = 2048",
        figure: footprint_cut,
        show: pct,
        reaches: 0.81,
        top: 0.81,
        missing: None,
        setting: "2,048 tokens; memory is the peak footprint, where standard attention holds \
                  the whole N × N S (it runs out of memory at 4,096 tokens)",
        named: &["unfused"],
        fusemax_scale: false,
    },
];

/// The claims table's rows from `rows` (`compare`'s, with rowfused among the designs), for
/// each hierarchy they hold: the configuration's, and with `--glb both` none.
pub fn claims(rows: &[CompareRow], hierarchy: &str) -> Vec<ClaimRow> {
    let mut out = vec![];
    for (suffix, hier) in &hierarchies(rows, hierarchy) {
        for s in &SPECS {
            let runs = runs_for(rows, suffix, s);
            let mut measured = vec![];
            let (mut hits, mut misses, mut model) = (vec![], vec![], false);
            for base in s.baselines {
                let pts = points(&runs, s.ours_against(base), base, s.keep, s.figure);
                if pts.is_empty() {
                    continue;
                }
                model |= pts.iter().any(|p| p.model);
                let best = pts
                    .iter()
                    .map(|p| p.value)
                    .fold(f64::NEG_INFINITY, f64::max);
                measured.push(format!("{base}: {}", span(&pts, s.show)));
                if best >= s.reaches {
                    hits.push(*base);
                } else {
                    misses.push(*base);
                }
            }
            let verdict = if measured.is_empty() {
                measured.push(format!("no length with {} among --seq", s.lengths));
                let why = s
                    .missing
                    .map(|w| format!("; the published baseline is not modelled because {w}"))
                    .unwrap_or_default();
                format!("not measured: give --seq a length with {}{why}", s.lengths)
            } else {
                named_verdict(s.named, &hits, &misses, s.missing)
            };
            let ours = match s.ours {
                "" => s.baselines[0],
                o => o,
            };
            out.push(ClaimRow {
                claim: s.claim.into(),
                source: s.source.into(),
                setting: s.setting.into(),
                ours: scale_of(&runs, ours),
                comparison: format!("{} {}", s.kind, s.baselines.join(", ")),
                hierarchy: hier.clone(),
                measured: measured.join("; "),
                verdict,
                from_model: model,
            });
        }
    }
    out
}

/// The verdict against the source's own baselines (`named`) first, those that ran, then
/// over every baseline ([`verdict`]).
fn named_verdict(named: &[&str], hits: &[&str], misses: &[&str], missing: Option<&str>) -> String {
    let all = verdict(hits, misses, missing);
    let ran: Vec<&str> = named
        .iter()
        .copied()
        .filter(|n| hits.contains(n) || misses.contains(n))
        .collect();
    let (h, m): (Vec<&str>, Vec<&str>) = ran.iter().partition(|n| hits.contains(n));
    match ran.as_slice() {
        [] => all,
        [one] if h.is_empty() => {
            format!("against {one}, the source's baseline: not reproduced. In all: {all}")
        }
        [one] => format!("against {one}, the source's baseline: reproduced. In all: {all}"),
        _ => format!(
            "against {}, the source's baselines: {}. In all: {all}",
            list(&ran),
            verdict(&h, &m, None)
        ),
    }
}

/// `a`, `a and b`, `a, b and c`.
fn list(xs: &[&str]) -> String {
    match xs {
        [init @ .., last] if !init.is_empty() => format!("{} and {last}", init.join(", ")),
        _ => xs.join(""),
    }
}

/// The verdict's exact words from the baselines that reproduce the claim and those that do
/// not, and why the claim's own baseline is missing (if it is).
fn verdict(hits: &[&str], misses: &[&str], missing: Option<&str>) -> String {
    match (hits.is_empty(), misses.is_empty(), missing) {
        (false, true, None) => "reproduced".into(),
        (false, true, Some(why)) => format!(
            "reproduced against every baseline built ({}); the published baseline is not \
             modelled because {why}",
            list(hits)
        ),
        (false, _, Some(why)) => format!(
            "reproduced only against {}; the published baseline is not modelled because {why}",
            list(hits)
        ),
        (false, false, None) => format!(
            "reproduced only against {}; not against {}",
            list(hits),
            list(misses)
        ),
        (true, _, Some(why)) => format!(
            "not reproduced against {}; the published baseline is not modelled because {why}",
            list(misses)
        ),
        (true, _, None) => format!("not reproduced against {}", list(misses)),
    }
}

/// The claims table in markdown, with what its columns mean.
pub fn table(claims: &[ClaimRow]) -> String {
    table_beside(claims, None)
}

/// The claims table with, when `gates` is given (the same claims priced with the PE at gate
/// level, `--energy gates`), its measurement and verdict beside the sourced table's.
pub fn table_beside(claims: &[ClaimRow], gates: Option<&[ClaimRow]>) -> String {
    let mut s = String::from("Published claims against regflash's RTL:\n\n");
    match gates {
        None => {
            s += "| claim | source | the source's setting | ours | comparison | hierarchy | \
                  measured | verdict |\n|---|---|---|---|---|---|---|---|\n"
        }
        Some(_) => {
            s += "| claim | source | the source's setting | ours | comparison | hierarchy | \
                  measured (sourced table) | verdict (sourced table) | measured (gate level) | \
                  verdict (gate level) |\n|---|---|---|---|---|---|---|---|---|---|\n"
        }
    }
    let model = |c: &ClaimRow| if c.from_model { " (cycle model)" } else { "" };
    for (k, c) in claims.iter().enumerate() {
        s += &format!(
            "| {} | {} | {} | {} | {} | {} | {}{} | {} |",
            c.claim,
            c.source,
            c.setting,
            c.ours,
            c.comparison,
            c.hierarchy,
            c.measured,
            model(c),
            c.verdict
        );
        if let Some(g) = gates.and_then(|g| g.get(k)) {
            s += &format!(" {}{} | {} |", g.measured, model(g), g.verdict);
        }
        s += "\n";
    }
    s += "\nA claim is reproduced against a baseline when the figure reaches the claim's low end \
          at some length the claim speaks of. rowfused is sized for each length (its S arrays \
          hold a tile's rows of S, N keys rounded up to a power-of-two number of blocks, as the \
          RTL addresses them) and never spills; rowfused (spill) is FLAT with a fixed buffer \
          (--spill-keys keys a row): the blocks of a row past it go out after their max pass \
          and come back for their exp pass, through the GLB's upper half as far as it reaches, \
          then DRAM. unfused writes each block of S and of P out and reads it back: with a GLB, a tile's \
          first half-GLB of them stays in the GLB's upper half (K and V keep a quarter each) \
          and the rest goes to DRAM; without one, all of it. \"(cycle model)\": some length \
          was not simulated, and its counters come from the schedule and the validated cycle \
          model. \"The source's setting\" is the baseline, workload and scale the claim was made \
          on; \"ours\" the array it is measured on here. The verdict names the source's own \
          baseline first where regflash builds it. FuseMax's rows run at its scale (256 rows and \
          d columns: columns must divide d) when compare runs with --claims. The memory claim \
          is a footprint: the problem's memory image, plus the scratch region where a design \
          has one.\n";
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verdicts_use_the_exact_words() {
        assert_eq!(
            verdict(&[], &["unfused", "rowfused", "buf2d"], None),
            "not reproduced against unfused, rowfused and buf2d"
        );
        assert_eq!(verdict(&["rowfused", "buf2d"], &[], None), "reproduced");
        assert_eq!(
            verdict(&["rowfused"], &["buf2d"], None),
            "reproduced only against rowfused; not against buf2d"
        );
        assert_eq!(
            verdict(&[], &["rowfused", "buf2d"], None),
            "not reproduced against rowfused and buf2d"
        );
        let v = verdict(&[], &["rowfused"], Some("why"));
        assert_eq!(
            v,
            "not reproduced against rowfused; the published baseline is not modelled because why"
        );
        let v = verdict(&["rowfused"], &[], Some("why"));
        assert!(v.starts_with("reproduced against every baseline built (rowfused); the published"));
        let v = verdict(&["rowfused"], &["buf2d"], Some("why"));
        assert!(v.starts_with("reproduced only against rowfused; the published baseline"));
        // The source's own baseline first.
        assert_eq!(
            named_verdict(&["unfused"], &["unfused"], &["buf2d"], None),
            "against unfused, the source's baseline: reproduced. In all: reproduced only \
             against unfused; not against buf2d"
        );
        assert!(named_verdict(&["unfused"], &[], &["unfused"], None)
            .starts_with("against unfused, the source's baseline: not reproduced."));
        assert_eq!(
            named_verdict(&["noc2d"], &[], &["buf2d"], None),
            "not reproduced against buf2d"
        );
        assert_eq!(
            named_verdict(
                &["noc2d", "3-D buffered"],
                &["noc2d"],
                &["3-D buffered", "buf2d"],
                None
            ),
            "against noc2d and 3-D buffered, the source's baselines: reproduced only against \
             noc2d; not against 3-D buffered. In all: reproduced only against noc2d; not \
             against 3-D buffered and buf2d"
        );
    }

    #[test]
    fn spans_name_values_and_lengths() {
        let p = |seq, value| Point {
            seq,
            value,
            model: false,
        };
        assert_eq!(
            span(&[p(256, 0.1), p(1024, 0.25)], pct),
            "10.0 %–25.0 % (N = 256–1024)"
        );
        assert_eq!(span(&[p(2048, 1.5)], times), "1.50× (N = 2048)");
    }
}
