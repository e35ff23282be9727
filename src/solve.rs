//! `regflash compare --claims --solve PARAM`: what would have to be true. For each claim and
//! each baseline it is measured against, the value of one parameter at which the verdict flips
//! (docs/baselines.md).
//!
//! The energy parameter (`dram_pj_per_bit`) leaves every count alone: the rows are priced
//! again at each value, and the break-even is found on a log-spaced scan and then bisected. An
//! energy is linear in the price, so a claim's figure (a ratio of two such energies) is
//! monotone in it between its limits at 0 and at ∞, and a claim neither limit reaches is
//! reported with the bound. (An SRAM price is not offered: the storage curve is interpolated
//! log-log through register and SRAM points alike, so scaling its SRAM points is not linear in
//! any one figure.) Shape parameters (`seq_len`, `head_dim`, `port_bits`, `array_side`,
//! `flit_bits`: noc2d's rows alone) change
//! the counts: each candidate value is run through the schedule and the cycle model (no RTL),
//! and the verdict flips between the two neighbouring candidates nearest today's value (for
//! `seq_len`, the shortest) where it does.

use anyhow::{bail, ensure, Result};
use kernels::energy::{EnergyTable, Scaling};
use serde::Serialize;

use crate::claims::{self, hierarchies, Spec};
use crate::compare::{self, ComparePlan, CompareRow, GlbRuns};
use hdl::config::CoreConfig;

/// A parameter the solver moves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Param {
    /// Off-chip memory, pJ per bit moved (the table's `dram_bit`).
    DramPjPerBit,
    /// The sequence length (powers of two, the lengths the claim speaks of).
    SeqLen,
    /// The head size d (powers of two the array's columns divide).
    HeadDim,
    /// The memory port's width in bits (`mem_width`, powers of two 64 to 1024).
    PortBits,
    /// The array's side: a square array of this many rows and columns (powers of two the head
    /// size allows), each PE keeping the configuration's keys per block and the query rows
    /// that hide the MAC.
    ArraySide,
    /// noc2d's flit width in bits (powers of two 32 to 1024): how fast P crosses between its
    /// arrays; it moves the noc2d rows alone.
    FlitBits,
    /// noc2d's router and link energy, as a factor on the table's derived figures (1 now):
    /// the table's `noc_scale`; it moves the noc2d rows alone.
    NocEnergyScale,
}

/// Every parameter, by its name on the command line.
pub const PARAMS: [(&str, Param); 7] = [
    ("dram_pj_per_bit", Param::DramPjPerBit),
    ("noc_energy_scale", Param::NocEnergyScale),
    ("port_bits", Param::PortBits),
    ("array_side", Param::ArraySide),
    ("seq_len", Param::SeqLen),
    ("head_dim", Param::HeadDim),
    ("flit_bits", Param::FlitBits),
];

impl std::str::FromStr for Param {
    type Err = anyhow::Error;
    fn from_str(s: &str) -> Result<Self> {
        PARAMS
            .iter()
            .find(|(n, _)| *n == s)
            .map(|(_, p)| *p)
            .ok_or_else(|| {
                let names: Vec<&str> = PARAMS.iter().map(|(n, _)| *n).collect();
                anyhow::anyhow!(
                    "unknown parameter `{s}`: choose one of {}",
                    names.join(", ")
                )
            })
    }
}

impl Param {
    pub fn name(self) -> &'static str {
        PARAMS.iter().find(|(_, p)| *p == self).expect("listed").0
    }

    fn unit(self) -> &'static str {
        match self {
            Param::DramPjPerBit => " pJ/bit",
            Param::NocEnergyScale => "×",
            Param::SeqLen => " tokens",
            Param::PortBits | Param::FlitBits => " bits",
            Param::HeadDim | Param::ArraySide => "",
        }
    }

    fn show(self, x: f64) -> String {
        match self {
            Param::DramPjPerBit | Param::NocEnergyScale => format!("{}{}", sig3(x), self.unit()),
            Param::SeqLen
            | Param::HeadDim
            | Param::PortBits
            | Param::ArraySide
            | Param::FlitBits => {
                format!("{x:.0}{}", self.unit())
            }
        }
    }
}

/// Three significant digits.
fn sig3(x: f64) -> String {
    if x == 0.0 || !x.is_finite() {
        return format!("{x}");
    }
    let digits = (2 - x.abs().log10().floor() as i32).max(0) as usize;
    format!("{x:.digits$}")
}

/// The table's value of an energy parameter.
pub fn table_value(t: &EnergyTable, p: Param) -> Option<f64> {
    match p {
        Param::DramPjPerBit => Some(t.at_node("dram_bit")),
        Param::NocEnergyScale => Some(t.noc_scale),
        Param::SeqLen | Param::HeadDim | Param::PortBits | Param::ArraySide | Param::FlitBits => {
            None
        }
    }
}

/// `t` with an energy parameter at `x`.
fn with_value(t: &EnergyTable, p: Param, x: f64) -> EnergyTable {
    let mut t = t.clone();
    match p {
        Param::DramPjPerBit => {
            let f = t
                .figures
                .get_mut("dram_bit")
                .expect("the table prices DRAM");
            f.pj = x;
            f.scaling = Scaling::Interface;
        }
        Param::NocEnergyScale => t.noc_scale = x,
        Param::SeqLen | Param::HeadDim | Param::PortBits | Param::ArraySide | Param::FlitBits => {}
    }
    t
}

/// One claim against one baseline, and where its verdict flips.
#[derive(Clone, Debug, Serialize)]
pub struct BreakEven {
    pub claim: String,
    pub source: String,
    pub hierarchy: String,
    pub baseline: String,
    /// The claim's figure now (its best over the lengths it speaks of), as the claims table
    /// shows it.
    pub figure: String,
    pub reproduced: bool,
    /// The parameter's value now.
    pub now: String,
    /// The value at which the verdict flips, if one does (in the parameter's unit), and as
    /// text.
    pub value: Option<f64>,
    pub break_even: Option<String>,
    /// Where the break-even lies among published figures (price parameters).
    pub plausible: Option<String>,
    /// What the value means, or why none flips it (with the bound).
    pub note: String,
}

/// A claim's best figure against `base` over the lengths it speaks of, in `rows` (None: no
/// length of it ran).
fn best(rows: &[CompareRow], suffix: &str, s: &Spec, base: &str) -> Option<f64> {
    let runs = claims::runs_for(rows, suffix, s);
    let pts = claims::points(&runs, s.ours_against(base), base, s.keep, s.figure);
    pts.iter().map(|p| p.value).reduce(f64::max)
}

/// Every (hierarchy's suffix, its words, claim, baseline) the claims table measures, in its
/// order.
fn claim_bases(
    rows: &[CompareRow],
    hierarchy: &str,
) -> Vec<(&'static str, String, &'static Spec, &'static str)> {
    let mut v = vec![];
    for (suffix, hier) in hierarchies(rows, hierarchy) {
        for s in claims::SPECS.iter() {
            v.extend(
                s.baselines
                    .iter()
                    .map(|base| (suffix, hier.clone(), s, *base)),
            );
        }
    }
    v
}

/// Every (claim, baseline) of `rows` with its break-even in `p`. `plan` and `glb` rerun the
/// model for the shape parameters.
pub fn solve(
    rows: &[CompareRow],
    plan: &ComparePlan,
    glb: GlbRuns,
    hierarchy: &str,
    p: Param,
) -> Result<Vec<BreakEven>> {
    match p {
        Param::DramPjPerBit | Param::NocEnergyScale => {
            Ok(solve_price(rows, &plan.table, hierarchy, p))
        }
        Param::SeqLen | Param::HeadDim | Param::PortBits | Param::ArraySide | Param::FlitBits => {
            solve_shape(rows, plan, glb, hierarchy, p)
        }
    }
}

fn solve_price(rows: &[CompareRow], t: &EnergyTable, hierarchy: &str, p: Param) -> Vec<BreakEven> {
    let now = table_value(t, p).expect("an energy parameter");
    let at = |x: f64| compare::repriced(rows, &with_value(t, p, x));
    // A log scan over six decades each side of today's value, and the limits.
    let scan: Vec<f64> = (-60..=60)
        .map(|i| now.max(1e-6) * 10f64.powf(i as f64 / 10.0))
        .collect();
    let priced: Vec<Vec<CompareRow>> = scan.iter().map(|&x| at(x)).collect();
    let (zero, huge) = (at(0.0), at(now.max(1e-6) * 1e6));
    // What a NoC factor's hop costs, once (the DRAM price has its own table).
    let noc_hop = match p {
        Param::NocEnergyScale => noc_bit_hop(rows, t),
        _ => None,
    };
    let mut out = vec![];
    for (suffix, hier, s, base) in claim_bases(rows, hierarchy) {
        let Some(fig_now) = best(rows, suffix, s, base) else {
            continue;
        };
        let f = |r: &[CompareRow]| best(r, suffix, s, base).unwrap_or(f64::NAN);
        let reproduced = fig_now >= s.reaches;
        let mut row = BreakEven {
            claim: s.claim.into(),
            source: s.source.into(),
            hierarchy: hier.clone(),
            baseline: base.into(),
            figure: (s.show)(fig_now),
            reproduced,
            now: p.show(now),
            value: None,
            break_even: None,
            plausible: None,
            note: String::new(),
        };
        let (lo, hi) = (f(&zero), f(&huge));
        if (lo - hi).abs() <= 1e-6 * lo.abs().max(1.0) {
            row.note = format!("does not depend on {}", p.name());
            out.push(row);
            continue;
        }
        // The scan's crossings of the threshold, and the one nearest today's value.
        let vals: Vec<f64> = priced.iter().map(|r| f(r)).collect();
        let crossings: Vec<usize> = (0..scan.len() - 1)
            .filter(|&i| (vals[i] >= s.reaches) != (vals[i + 1] >= s.reaches))
            .collect();
        let crossing = crossings.iter().copied().min_by(|&a, &b| {
            let d = |i: usize| (scan[i].ln() - now.max(1e-6).ln()).abs();
            d(a).total_cmp(&d(b))
        });
        match crossing {
            Some(i) => {
                let (mut a, mut b) = (scan[i], scan[i + 1]);
                let above_a = vals[i] >= s.reaches;
                for _ in 0..50 {
                    let m = (a * b).sqrt();
                    match (f(&at(m)) >= s.reaches) == above_a {
                        true => a = m,
                        false => b = m,
                    }
                }
                let x = (a * b).sqrt();
                // Reproduced on the side of the crossing whose scanned value reaches.
                let rising = vals[i + 1] >= s.reaches;
                row.value = Some(x);
                row.break_even = Some(p.show(x));
                row.plausible = Some(where_it_lies(p, x, noc_hop));
                row.note = format!(
                    "reproduced {} {}{}; the figure runs from {} at 0 to {} as {} \
                             grows without bound",
                    if rising { "above" } else { "below" },
                    p.show(x),
                    match crossings.len() {
                        1 => String::new(),
                        n => format!(" (the nearest of {n} crossings)"),
                    },
                    (s.show)(lo),
                    (s.show)(hi),
                    p.name()
                );
            }
            None => {
                let ends = vals.iter().chain([&lo, &hi]);
                let (all, none) = (
                    ends.clone().all(|v| *v >= s.reaches),
                    ends.clone().all(|v| *v < s.reaches),
                );
                row.note = match (all, none) {
                    (false, false) => format!(
                        "the verdict flips beyond 10^-6 to 10^6 × today's value: the \
                                 figure runs from {} at 0 to {} as {} grows without bound",
                        (s.show)(lo),
                        (s.show)(hi),
                        p.name()
                    ),
                    (true, _) => format!(
                        "reproduced at every value: the figure runs from {} at 0 to {} \
                                 as {} grows without bound",
                        (s.show)(lo),
                        (s.show)(hi),
                        p.name()
                    ),
                    (false, true) => format!(
                        "no value reaches {}: the figure runs from {} at 0 to {} as {} \
                                 grows without bound",
                        (s.show)(s.reaches),
                        (s.show)(lo),
                        (s.show)(hi),
                        p.name()
                    ),
                };
            }
        }
        out.push(row);
    }
    out
}

/// noc2d's knobs in `c` (its defaults when `c` is another design, as `compare` runs noc2d).
fn noc_now(c: &CoreConfig) -> hdl::config::NocParams {
    c.variant.noc().copied().unwrap_or_default()
}

/// The candidate values of a shape parameter, today's first, then outward.
fn candidates(plan: &ComparePlan, p: Param) -> Vec<usize> {
    let pow2 = |lo: usize, hi: usize| -> Vec<usize> {
        (0..32)
            .map(|k| 1usize << k)
            .filter(|&x| x >= lo && x <= hi)
            .collect()
    };
    match p {
        Param::SeqLen => pow2(256, 65536),
        Param::HeadDim => pow2(16, 256)
            .into_iter()
            .filter(|&d| d % plan.config.cols as usize == 0)
            .collect(),
        Param::PortBits => pow2(64, 1024),
        Param::FlitBits => pow2(32, 1024),
        Param::ArraySide => pow2(4, 256)
            .into_iter()
            .filter(|&x| (plan.config.head_dim as usize).is_multiple_of(x))
            .collect(),
        Param::DramPjPerBit | Param::NocEnergyScale => vec![],
    }
}

/// The model's rows at each value of a shape parameter (with FuseMax's scale where `rows`
/// have it), and the values the configuration refuses.
type ShapeRuns = (Vec<(usize, Vec<CompareRow>)>, Vec<String>);

fn shape_runs(
    rows: &[CompareRow],
    plan: &ComparePlan,
    glb: GlbRuns,
    p: Param,
    values: &[usize],
) -> Result<ShapeRuns> {
    let mut runs: Vec<(usize, Vec<CompareRow>)> = vec![];
    let mut refused = vec![];
    let scaled = rows
        .iter()
        .any(|r| r.design.ends_with(compare::FUSEMAX_SUFFIX));
    for &v in values {
        let mut q = plan.clone();
        q.max_sim_seq = 0;
        let c = &plan.config;
        let sized = match p {
            Param::SeqLen => {
                q.seq_lens = vec![v];
                Ok(c.clone())
            }
            Param::HeadDim => Ok(CoreConfig {
                head_dim: v as u32,
                ..c.clone()
            }),
            Param::PortBits => Ok(CoreConfig {
                mem_width: v as u32,
                ..c.clone()
            }),
            // noc2d's knobs (the others' rows come from their defaults as before).
            Param::FlitBits => Ok(CoreConfig {
                variant: hdl::config::Variant::Noc2d(hdl::config::NocParams {
                    flit_bits: v as u32,
                    ..noc_now(c)
                }),
                ..c.clone()
            }),
            // At least the configuration's registers per PE (reg3d iso-PE's halved array needs
            // more than the tile alone).
            Param::ArraySide => {
                let tile = (c.br / c.rows.max(1), c.bc / c.cols.max(1));
                compare::array_config(c, (v as u32, v as u32), tile, "").map(|cfg| CoreConfig {
                    regs_per_pe: cfg.regs_per_pe.max(c.regs_per_pe),
                    ..cfg
                })
            }
            Param::DramPjPerBit | Param::NocEnergyScale => bail!("not a shape parameter"),
        };
        match sized.and_then(|cfg| cfg.validate().map(|_| cfg)) {
            Ok(cfg) => q.config = cfg,
            Err(_) => {
                refused.push(v.to_string());
                continue;
            }
        }
        match compare::run_glb(&q, glb, |_| {}) {
            Ok(mut r) => {
                // FuseMax's claims at its scale, as the rows measured them (a value whose
                // FuseMax scale does not fit is refused, not measured on another array).
                if scaled {
                    match compare::run_fusemax(&q, glb) {
                        Ok(f) => r.extend(f),
                        Err(_) => {
                            refused.push(v.to_string());
                            continue;
                        }
                    }
                }
                runs.push((v, r))
            }
            Err(_) => refused.push(v.to_string()),
        }
    }
    Ok((runs, refused))
}

fn solve_shape(
    rows: &[CompareRow],
    plan: &ComparePlan,
    glb: GlbRuns,
    hierarchy: &str,
    p: Param,
) -> Result<Vec<BreakEven>> {
    let values = candidates(plan, p);
    ensure!(
        !values.is_empty(),
        "no candidate {} fits the array",
        p.name()
    );
    let (runs, refused) = shape_runs(rows, plan, glb, p, &values)?;
    let refused = match refused.is_empty() {
        true => String::new(),
        false => format!(
            " (not run: {} = {}, which the configuration refuses)",
            p.name(),
            refused.join(", ")
        ),
    };
    let now = match p {
        Param::HeadDim => plan.config.head_dim as usize,
        Param::PortBits => plan.config.mem_width as usize,
        Param::ArraySide => plan.config.cols as usize,
        Param::FlitBits => noc_now(&plan.config).flit_bits as usize,
        Param::SeqLen | Param::DramPjPerBit | Param::NocEnergyScale => 0,
    };
    let mut out = vec![];
    for (suffix, hier, s, base) in claim_bases(rows, hierarchy) {
        let Some(fig_now) = best(rows, suffix, s, base) else {
            continue;
        };
        let reproduced = fig_now >= s.reaches;
        let at: Vec<(usize, f64)> = runs
            .iter()
            .filter_map(|(v, r)| best(r, suffix, s, base).map(|f| (*v, f)))
            .collect();
        // Adjacent candidates where the verdict changes, nearest today's value first
        // (for seq_len, the shortest).
        let dist = |v: usize| match p {
            Param::HeadDim | Param::PortBits | Param::ArraySide | Param::FlitBits => {
                (v as f64 / now.max(1) as f64).ln().abs()
            }
            Param::SeqLen | Param::DramPjPerBit | Param::NocEnergyScale => v as f64,
        };
        let flip = at
            .windows(2)
            .filter(|w| (w[0].1 >= s.reaches) != (w[1].1 >= s.reaches))
            .map(|w| match w[1].1 >= s.reaches {
                true => (w[1].0, format!("reproduced from {}", p.show(w[1].0 as f64))),
                false => (
                    w[0].0,
                    format!("reproduced up to {}", p.show(w[0].0 as f64)),
                ),
            })
            .min_by(|a, b| dist(a.0).total_cmp(&dist(b.0)));
        let listed: Vec<String> = at
            .iter()
            .map(|(v, f)| format!("{v}: {}", (s.show)(*f)))
            .collect();
        out.push(BreakEven {
            claim: s.claim.into(),
            source: s.source.into(),
            hierarchy: hier.clone(),
            baseline: base.into(),
            figure: (s.show)(fig_now),
            reproduced,
            now: match p {
                Param::HeadDim | Param::PortBits | Param::ArraySide | Param::FlitBits => {
                    p.show(now as f64)
                }
                Param::SeqLen | Param::DramPjPerBit | Param::NocEnergyScale => {
                    "the lengths run".into()
                }
            },
            value: flip.as_ref().map(|f| f.0 as f64),
            plausible: None,
            break_even: flip.as_ref().map(|f| p.show(f.0 as f64)),
            note: match (&flip, at.is_empty()) {
                (Some((_, how)), _) => {
                    format!("{how}; by {}: {}", p.name(), listed.join(", "))
                }
                (None, true) => format!("no {} it speaks of runs", p.name()),
                (None, false) => format!(
                    "the same verdict at every {} tried: {}",
                    p.name(),
                    listed.join(", ")
                ),
            } + &refused,
        });
    }
    Ok(out)
}

/// The noc2d rows' NoC energy (routers, links and source bank) per flit bit and hop, and the
/// table's DRAM bit: what `noc_energy_scale` multiplies, against going off chip. None without
/// a noc2d row that moved flits.
fn noc_bit_hop(rows: &[CompareRow], t: &EnergyTable) -> Option<(f64, f64)> {
    let r = rows
        .iter()
        .filter(|r| r.design == "noc2d")
        .find(|r| r.counters.get("noc_hop_bits").is_some_and(|&b| b > 0))?;
    let c = |k: &str| r.energy.components_pj.get(k).copied().unwrap_or(0.0);
    let noc = (c("noc") + c("noc_links")) / t.noc_scale.max(1e-300);
    Some((
        noc / r.counters["noc_hop_bits"] as f64,
        t.at_node("dram_bit"),
    ))
}

/// Where a price lies among the published figures: DRAM among the memories the table names
/// (`kernels::energy::DRAMS`); a NoC factor by what a hop then costs a bit against a DRAM
/// bit (`noc_bit_hop`: the noc2d rows' NoC energy per flit bit and hop now, and the DRAM bit's
/// price).
fn where_it_lies(p: Param, x: f64, noc_bit_hop: Option<(f64, f64)>) -> String {
    match p {
        Param::NocEnergyScale => match noc_bit_hop {
            Some((hop, dram)) => format!(
                "a flit bit's hop (its routers' FIFOs and crossbars, its links, its share of \
                 the source bank) at {} pJ, {} the DRAM bit's {} pJ{}",
                sig3(hop * x),
                match hop * x / dram {
                    r if r >= 1.0 => format!("{}×", sig3(r)),
                    r => format!("{} of", sig3(r)),
                },
                sig3(dram),
                if hop * x > dram {
                    ": a hop dearer than going off chip, not a router anyone builds"
                } else {
                    ""
                }
            ),
            None => String::new(),
        },
        Param::DramPjPerBit => {
            let mut named: Vec<_> = kernels::energy::DRAMS.iter().collect();
            named.sort_by(|a, b| a.pj.total_cmp(&b.pj));
            let (lo, hi) = (named[0], named[named.len() - 1]);
            match named.windows(2).find(|w| x >= w[0].pj && x <= w[1].pj) {
                Some(w) => format!(
                    "between {} ({} pJ/bit) and {} ({}): a published memory",
                    w[0].name, w[0].pj, w[1].name, w[1].pj
                ),
                None if x < lo.pj => {
                    format!("below every named memory ({} is {} pJ/bit)", lo.name, lo.pj)
                }
                None => format!("above every named memory ({} is {} pJ/bit)", hi.name, hi.pj),
            }
        }
        Param::SeqLen | Param::HeadDim | Param::PortBits | Param::ArraySide | Param::FlitBits => {
            String::new()
        }
    }
}

/// The break-evens as a markdown table.
pub fn table(p: Param, rows: &[BreakEven]) -> String {
    let mut s = format!(
        "\nWhat would have to be true: each claim against each baseline, and the {} at which \
         its verdict flips (`--solve {}`):\n\n| claim | source | hierarchy | against | figure \
         now | verdict now | {} now | break-even | where it lies | how the figure moves |\n\
         |---|---|---|---|---|---|---|---|---|---|\n",
        p.name(),
        p.name(),
        p.name()
    );
    for r in rows {
        s += &format!(
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |\n",
            r.claim,
            r.source,
            r.hierarchy,
            r.baseline,
            r.figure,
            if r.reproduced {
                "reproduced"
            } else {
                "not reproduced"
            },
            r.now,
            r.break_even.as_deref().unwrap_or("none"),
            r.plausible.as_deref().unwrap_or("-"),
            r.note
        );
    }
    s
}

/// `--sweep PARAM=A..B`: a parameter and the range to sweep it over.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Sweep {
    pub param: Param,
    pub lo: f64,
    pub hi: f64,
}

impl std::str::FromStr for Sweep {
    type Err = anyhow::Error;
    fn from_str(s: &str) -> Result<Self> {
        let bad = || {
            anyhow::anyhow!(
                "--sweep {s}: write PARAM=A..B, for example dram_pj_per_bit=1..100 or \
                 head_dim=32..256"
            )
        };
        let (name, range) = s.split_once('=').ok_or_else(bad)?;
        let (a, b) = range.split_once("..").ok_or_else(bad)?;
        let (lo, hi): (f64, f64) = (
            a.trim().parse().map_err(|_| bad())?,
            b.trim().parse().map_err(|_| bad())?,
        );
        let param: Param = name.trim().parse()?;
        ensure!(
            lo.is_finite() && hi.is_finite() && lo > 0.0 && hi > lo,
            "--sweep {s}: the range must run from a positive A to a larger B"
        );
        Ok(Sweep { param, lo, hi })
    }
}

/// One claim's figure against one baseline, along a sweep.
#[derive(Clone, Debug, Serialize)]
pub struct Series {
    pub claim: String,
    pub hierarchy: String,
    pub baseline: String,
    /// The claim's range, as its figure reads (a fraction, or a ratio).
    pub band: (f64, f64),
    pub percent: bool,
    /// (the parameter, the figure), in the parameter's order.
    pub points: Vec<(f64, f64)>,
}

/// Every claim's figure against each baseline along the sweep: the rows repriced at 33
/// log-spaced prices, or run through the model at each shape value in the range. Series that
/// do not move with the parameter are left out.
pub fn sweep(
    rows: &[CompareRow],
    plan: &ComparePlan,
    glb: GlbRuns,
    hierarchy: &str,
    sw: Sweep,
) -> Result<Vec<Series>> {
    let at: Vec<(f64, Vec<CompareRow>)> = match sw.param {
        Param::DramPjPerBit | Param::NocEnergyScale => (0..=32)
            .map(|i| sw.lo * (sw.hi / sw.lo).powf(i as f64 / 32.0))
            .map(|x| {
                let t = with_value(&plan.table, sw.param, x);
                (x, compare::repriced(rows, &t))
            })
            .collect(),
        Param::SeqLen | Param::HeadDim | Param::PortBits | Param::ArraySide | Param::FlitBits => {
            let values: Vec<usize> = candidates(plan, sw.param)
                .into_iter()
                .filter(|&v| v as f64 >= sw.lo && v as f64 <= sw.hi)
                .collect();
            ensure!(
                !values.is_empty(),
                "--sweep {}: no candidate in {}..{} (powers of two{})",
                sw.param.name(),
                sw.lo,
                sw.hi,
                match sw.param {
                    Param::HeadDim => " the array's columns divide",
                    Param::ArraySide => " that divide the head size",
                    Param::SeqLen
                    | Param::PortBits
                    | Param::FlitBits
                    | Param::DramPjPerBit
                    | Param::NocEnergyScale => "",
                }
            );
            shape_runs(rows, plan, glb, sw.param, &values)?
                .0
                .into_iter()
                .map(|(v, r)| (v as f64, r))
                .collect()
        }
    };
    let mut out = vec![];
    for (suffix, hier, s, base) in claim_bases(rows, hierarchy) {
        let points: Vec<(f64, f64)> = at
            .iter()
            .filter_map(|(x, r)| best(r, suffix, s, base).map(|f| (*x, f)))
            .filter(|p| p.1.is_finite())
            .collect();
        let (lo, hi) = points
            .iter()
            .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), p| {
                (a.min(p.1), b.max(p.1))
            });
        if points.len() < 2 || hi - lo <= 1e-6 * hi.abs().max(1.0) {
            continue;
        }
        out.push(Series {
            claim: s.claim.into(),
            hierarchy: hier.clone(),
            baseline: base.into(),
            band: (s.reaches, s.top),
            percent: s.reaches < 1.0,
            points,
        });
    }
    ensure!(
        !out.is_empty(),
        "no claim's figure moves with {} over {}..{}",
        sw.param.name(),
        sw.lo,
        sw.hi
    );
    Ok(out)
}

/// The sweep as an SVG: a panel per claim and hierarchy, its band shaded, a line per baseline.
#[cfg(feature = "cli")]
pub fn plot_sweep(series: &[Series], sw: Sweep, path: &std::path::Path) -> Result<()> {
    use plotters::prelude::*;
    let mut panels: Vec<(&str, &str)> = vec![];
    for s in series {
        if !panels.contains(&(s.claim.as_str(), s.hierarchy.as_str())) {
            panels.push((&s.claim, &s.hierarchy));
        }
    }
    let cols = panels.len().min(3);
    let rows = panels.len().div_ceil(cols);
    let draw_err = |e: &dyn std::fmt::Display| anyhow::anyhow!("plot {}: {e}", path.display());
    let root = SVGBackend::new(path, (520 * cols as u32, 400 * rows as u32)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| draw_err(&e))?;
    let areas = root.split_evenly((rows, cols));
    let colors = [RED, BLUE, GREEN, MAGENTA, BLACK, RGBColor(230, 150, 30)];
    let log = |x: f64| x.log10();
    let (x0, x1) = (log(sw.lo), log(sw.hi));
    for (k, (claim, hier)) in panels.iter().enumerate() {
        let mine: Vec<&Series> = series
            .iter()
            .filter(|s| s.claim == *claim && s.hierarchy == *hier)
            .collect();
        let scale = if mine[0].percent { 100.0 } else { 1.0 };
        let band = mine[0].band;
        let ys = mine
            .iter()
            .flat_map(|s| s.points.iter().map(|p| p.1))
            .chain([band.0, band.1]);
        let (y0, y1) = ys.fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), y| {
            (a.min(y), b.max(y))
        });
        let pad = 0.08 * (y1 - y0).max(1e-3);
        let (y0, y1) = (scale * (y0 - pad).min(0.0), scale * (y1 + pad));
        let short = if hier.starts_with("no GLB") {
            "no GLB"
        } else {
            "with the GLB"
        };
        let mut chart = ChartBuilder::on(&areas[k])
            .caption(format!("{claim} ({short})"), ("sans-serif", 15))
            .margin(10)
            .x_label_area_size(34)
            .y_label_area_size(46)
            .build_cartesian_2d(x0..x1, y0..y1)
            .map_err(|e| draw_err(&e))?;
        chart
            .configure_mesh()
            .x_desc(format!(
                "{}{} (log scale)",
                sw.param.name(),
                sw.param.unit()
            ))
            .x_label_formatter(&|x| sig3(10f64.powf(*x)))
            .draw()
            .map_err(|e| draw_err(&e))?;
        let (b0, b1) = (scale * band.0, scale * band.1.max(band.0 + 1e-3 / scale));
        chart
            .draw_series(std::iter::once(Rectangle::new(
                [(x0, b0), (x1, b1)],
                CYAN.mix(0.25).filled(),
            )))
            .map_err(|e| draw_err(&e))?
            .label("the claim")
            .legend(|(x, y)| Rectangle::new([(x, y - 5), (x + 14, y + 5)], CYAN.mix(0.5).filled()));
        for (i, s) in mine.iter().enumerate() {
            let c = colors[i % colors.len()];
            let line: Vec<(f64, f64)> = s.points.iter().map(|p| (log(p.0), scale * p.1)).collect();
            chart
                .draw_series(LineSeries::new(line, c.stroke_width(2)))
                .map_err(|e| draw_err(&e))?
                .label(format!("against {}", s.baseline))
                .legend(move |(x, y)| PathElement::new([(x, y), (x + 14, y)], c.stroke_width(2)));
        }
        compare::draw_legend(&mut chart).map_err(|e| draw_err(&e))?;
    }
    root.present().map_err(|e| draw_err(&e))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::verify::attention::MemoryTiming;
    use hdl::config::CoreConfig;

    fn small_rows() -> (ComparePlan, Vec<CompareRow>) {
        let plan = ComparePlan {
            config: CoreConfig::preset("small").unwrap(),
            seq_lens: vec![256, 512],
            causal: false,
            heads: 1,
            kv_heads: 1,
            seed: 1,
            timing: MemoryTiming::default(),
            table: EnergyTable::default(),
            max_sim_seq: 0,
            spill_keys: 1024,
        };
        let rows = compare::run_glb(&plan, GlbRuns::Config, |_| {}).unwrap();
        (plan, rows)
    }

    /// The DRAM price at which 3D-Flow's 46 % flips against unfused is where reg3d's energy
    /// cut, priced straight from the rows' counters, crosses 46 %: 1 % either side of the
    /// break-even lands either side of the claim. The speed claims do not depend on the
    /// price, and a claim no price reaches has both limits below its threshold.
    #[test]
    fn dram_break_even_is_where_the_energy_cut_crosses_the_claim() {
        let (plan, rows) = small_rows();
        let solved = solve(&rows, &plan, GlbRuns::Config, "h", Param::DramPjPerBit).unwrap();
        let cut = |x: f64, base: &str| {
            let t = with_value(&plan.table, Param::DramPjPerBit, x);
            let priced = compare::repriced(&rows, &t);
            let e = |d: &str, n: usize| {
                let r = priced.iter().find(|r| r.design == d && r.seq_len == n);
                r.unwrap().energy.total_pj
            };
            [256, 512]
                .map(|n| 1.0 - e("reg3d", n) / e(base, n))
                .into_iter()
                .fold(f64::MIN, f64::max)
        };
        let find = |base: &str| {
            let r = solved
                .iter()
                .find(|r| r.claim == "46–93 % less energy" && r.baseline == base);
            r.unwrap()
        };
        let x = find("unfused").value.expect("a break-even against unfused");
        assert!(x > 0.0);
        assert!(
            cut(x * 0.99, "unfused") < 0.46 && cut(x * 1.01, "unfused") > 0.46,
            "{x}: {} {}",
            cut(x * 0.99, "unfused"),
            cut(x * 1.01, "unfused")
        );
        let none = find("buf2d");
        assert!(none.value.is_none() && none.note.starts_with("no value reaches"));
        assert!(cut(0.0, "buf2d") < 0.46 && cut(1e6, "buf2d") < 0.46);
        for r in solved.iter().filter(|r| r.claim.contains("faster")) {
            assert!(r.note.contains("does not depend"), "{r:?}");
        }
    }

    /// noc2d's NoC energy factor moves the rows against noc2d alone: at its break-even
    /// reg3d's cut against noc2d crosses 46 % (1 % either side lands either side), every other
    /// baseline's row does not depend on it, and the hop it asks for is priced against the
    /// DRAM bit.
    #[test]
    fn noc_energy_break_even_moves_only_the_noc2d_rows() {
        let (plan, rows) = small_rows();
        let solved = solve(&rows, &plan, GlbRuns::Config, "h", Param::NocEnergyScale).unwrap();
        let cut = |x: f64| {
            let priced =
                compare::repriced(&rows, &with_value(&plan.table, Param::NocEnergyScale, x));
            let e = |d: &str, n: usize| {
                let r = priced.iter().find(|r| r.design == d && r.seq_len == n);
                r.unwrap().energy.total_pj
            };
            [256, 512]
                .map(|n| 1.0 - e("reg3d", n) / e("noc2d", n))
                .into_iter()
                .fold(f64::MIN, f64::max)
        };
        let energy = |r: &&BreakEven| r.claim == "46–93 % less energy";
        let noc = solved
            .iter()
            .filter(energy)
            .find(|r| r.baseline == "noc2d")
            .unwrap();
        let x = noc.value.expect("a NoC dear enough flips it");
        assert!(
            x > 1.0 && cut(x * 0.99) < 0.46 && cut(x * 1.01) > 0.46,
            "{x}"
        );
        assert!(
            noc.plausible.as_deref().unwrap_or("").contains("DRAM bit"),
            "{noc:?}"
        );
        for r in solved
            .iter()
            .filter(energy)
            .filter(|r| r.baseline != "noc2d")
        {
            assert!(r.note.contains("does not depend"), "{r:?}");
        }
    }

    /// The shape parameters' candidates: head_dim's the powers of two the columns divide,
    /// array_side's those that divide d (each array hiding the MAC), port_bits' 64 to 1024.
    #[test]
    fn shape_candidates_fit_the_array() {
        let (plan, _) = small_rows();
        let c = candidates(&plan, Param::HeadDim);
        assert!(!c.is_empty());
        for d in c {
            assert!(d.is_power_of_two() && d % plan.config.cols as usize == 0);
        }
        for x in candidates(&plan, Param::ArraySide) {
            assert!(x.is_power_of_two() && (plan.config.head_dim as usize).is_multiple_of(x));
        }
        assert_eq!(
            candidates(&plan, Param::PortBits),
            [64, 128, 256, 512, 1024]
        );
        // The array's side through the same tile derivation as FuseMax's scale: every array
        // it gives hides the MAC and validates.
        let c = &plan.config;
        for x in candidates(&plan, Param::ArraySide) {
            let tile = (c.br / c.rows, c.bc / c.cols);
            if let Ok(cfg) = compare::array_config(c, (x as u32, x as u32), tile, "") {
                assert_eq!((cfg.rows, cfg.cols), (x as u32, x as u32));
                cfg.row().validate_mac_hidden().unwrap();
            }
        }
        let e = "dram_pj_per_bit_x"
            .parse::<Param>()
            .unwrap_err()
            .to_string();
        assert!(e.contains("choose one of dram_pj_per_bit"), "{e}");
    }

    /// A DRAM sweep's series: priced at 33 points from A to B, each a figure of one claim
    /// against one baseline that moves monotonically with the price (an energy is linear in
    /// it), with the claim's band; the plot names every panel. A bad range is refused.
    #[cfg(feature = "cli")]
    #[test]
    fn dram_sweep_moves_monotonically_between_its_ends() {
        let (plan, rows) = small_rows();
        let sw: Sweep = "dram_pj_per_bit=1..100".parse().unwrap();
        let series = sweep(&rows, &plan, GlbRuns::Config, "h", sw).unwrap();
        assert!(!series.is_empty());
        for s in &series {
            assert_eq!(s.points.len(), 33, "{s:?}");
            assert!((s.points[0].0 - 1.0).abs() < 1e-9 && (s.points[32].0 - 100.0).abs() < 1e-6);
            let up = s.points.windows(2).all(|w| w[1].1 >= w[0].1 - 1e-12);
            let down = s.points.windows(2).all(|w| w[1].1 <= w[0].1 + 1e-12);
            assert!(up || down, "{s:?}");
            assert!(s.band.0 <= s.band.1);
        }
        let dir = gen::tools::ScratchDir::new("sweep").unwrap();
        let svg = dir.path().join("s.svg");
        plot_sweep(&series, sw, &svg).unwrap();
        let text = std::fs::read_to_string(&svg).unwrap();
        assert!(text.contains("46–93 % less energy") && text.contains("against unfused"));
        for bad in [
            "dram_pj_per_bit=100..1",
            "dram_pj_per_bit=0..5",
            "dram=1..5",
            "seq_len",
        ] {
            assert!(bad.parse::<Sweep>().is_err(), "{bad}");
        }
    }
}
