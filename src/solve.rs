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
//! any one figure.) Shape parameters (`seq_len`, `head_dim`) change the counts: each candidate value is
//! run through the schedule and the cycle model (no RTL), and the verdict flips at the first
//! candidate, in order from today's value, where it does.

use anyhow::{bail, ensure, Result};
use kernels::energy::{EnergyTable, Scaling};
use serde::Serialize;

use crate::claims::{self, Spec};
use crate::compare::{self, ComparePlan, CompareRow, GlbRuns};

/// A parameter the solver moves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Param {
    /// Off-chip memory, pJ per bit moved (the table's `dram_bit`).
    DramPjPerBit,
    /// The sequence length (powers of two, the lengths the claim speaks of).
    SeqLen,
    /// The head size d (powers of two the array's columns divide).
    HeadDim,
}

/// Every parameter, by its name on the command line.
pub const PARAMS: [(&str, Param); 3] = [
    ("dram_pj_per_bit", Param::DramPjPerBit),
    ("seq_len", Param::SeqLen),
    ("head_dim", Param::HeadDim),
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
            Param::SeqLen => " tokens",
            Param::HeadDim => "",
        }
    }

    fn show(self, x: f64) -> String {
        match self {
            Param::DramPjPerBit => format!("{}{}", sig3(x), self.unit()),
            Param::SeqLen | Param::HeadDim => format!("{x:.0}{}", self.unit()),
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
        Param::SeqLen | Param::HeadDim => None,
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
        Param::SeqLen | Param::HeadDim => {}
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
    let ours = if s.ours.is_empty() { base } else { s.ours };
    let pts = claims::points(&runs, ours, base, s.keep, s.figure);
    pts.iter().map(|p| p.value).reduce(f64::max)
}

/// The hierarchies `rows` hold, as the claims table names them: (design-name suffix, words).
fn hierarchies(rows: &[CompareRow], hierarchy: &str) -> Vec<(&'static str, String)> {
    let mut v = vec![("", hierarchy.to_string())];
    if rows.iter().any(|r| r.design.ends_with(" (no GLB)")) {
        v.push((
            " (no GLB)",
            "no GLB: DRAM behind the landing buffers".into(),
        ));
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
        Param::DramPjPerBit => Ok(solve_price(rows, &plan.table, hierarchy, p)),
        Param::SeqLen | Param::HeadDim => solve_shape(rows, plan, glb, hierarchy, p),
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
    let mut out = vec![];
    for (suffix, hier) in hierarchies(rows, hierarchy) {
        for s in claims::SPECS.iter() {
            for base in s.baselines {
                let Some(fig_now) = best(rows, suffix, s, base) else {
                    continue;
                };
                let f = |r: &[CompareRow]| best(r, suffix, s, base).unwrap_or(f64::NAN);
                let reproduced = fig_now >= s.reaches;
                let mut row = BreakEven {
                    claim: s.claim.into(),
                    source: s.source.into(),
                    hierarchy: hier.clone(),
                    baseline: (*base).into(),
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
                // The scan's crossings of the threshold, nearest today's value first.
                let vals: Vec<f64> = priced.iter().map(|r| f(r)).collect();
                let crossing = (0..scan.len() - 1)
                    .filter(|&i| (vals[i] >= s.reaches) != (vals[i + 1] >= s.reaches))
                    .min_by(|&a, &b| {
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
                        let rising = hi > lo;
                        row.value = Some(x);
                        row.break_even = Some(p.show(x));
                        row.plausible = Some(where_it_lies(p, x));
                        row.note = format!(
                            "reproduced {} {}; the figure runs from {} at 0 to {} as {} grows \
                             without bound",
                            if rising { "above" } else { "below" },
                            p.show(x),
                            (s.show)(lo),
                            (s.show)(hi),
                            p.name()
                        );
                    }
                    None => {
                        let bound = lo.max(hi);
                        row.note = match bound >= s.reaches {
                            true => format!(
                                "reproduced at every value: the figure runs from {} at 0 to {} \
                                 as {} grows without bound",
                                (s.show)(lo),
                                (s.show)(hi),
                                p.name()
                            ),
                            false => format!(
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
        }
    }
    out
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
        Param::DramPjPerBit => vec![],
    }
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
    // The model's rows at each candidate (none where the configuration refuses it).
    let mut runs: Vec<(usize, Vec<CompareRow>)> = vec![];
    let mut refused = vec![];
    let scaled = rows
        .iter()
        .any(|r| r.design.ends_with(compare::FUSEMAX_SUFFIX));
    for &v in &values {
        let mut q = plan.clone();
        q.max_sim_seq = 0;
        match p {
            Param::SeqLen => q.seq_lens = vec![v],
            Param::HeadDim => {
                q.config.head_dim = v as u32;
                if q.config.validate().is_err() {
                    refused.push(v.to_string());
                    continue;
                }
            }
            Param::DramPjPerBit => bail!("not a shape parameter"),
        }
        match compare::run_glb(&q, glb, |_| {}) {
            Ok(mut r) => {
                // FuseMax's claims at its scale, as the rows measured them.
                if scaled {
                    r.extend(compare::run_fusemax(&q).unwrap_or_default());
                }
                runs.push((v, r))
            }
            Err(_) => refused.push(v.to_string()),
        }
    }
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
        _ => 0,
    };
    let mut out = vec![];
    for (suffix, hier) in hierarchies(rows, hierarchy) {
        for s in claims::SPECS.iter() {
            for base in s.baselines {
                let Some(fig_now) = best(rows, suffix, s, base) else {
                    continue;
                };
                let reproduced = fig_now >= s.reaches;
                let at: Vec<(usize, f64)> = runs
                    .iter()
                    .filter_map(|(v, r)| best(r, suffix, s, base).map(|f| (*v, f)))
                    .collect();
                // The flip nearest today's value: for seq_len, the shortest length the claim
                // speaks of at which the verdict differs from today's.
                // Adjacent candidates where the verdict changes, nearest today's value first
                // (for seq_len, the shortest).
                let dist = |v: usize| match p {
                    Param::HeadDim => (v as f64 / now.max(1) as f64).ln().abs(),
                    _ => v as f64,
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
                    baseline: (*base).into(),
                    figure: (s.show)(fig_now),
                    reproduced,
                    now: match p {
                        Param::HeadDim => p.show(now as f64),
                        _ => "the lengths run".into(),
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
        }
    }
    Ok(out)
}

/// Where a price lies among the published figures: DRAM among the memories the table names
/// (`kernels::energy::DRAMS`).
fn where_it_lies(p: Param, x: f64) -> String {
    match p {
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
        Param::SeqLen | Param::HeadDim => String::new(),
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

    /// A shape parameter's break-even is a value at which the model's verdict differs from
    /// the one next to it; head_dim's candidates are the powers of two the columns divide.
    #[test]
    fn head_dim_candidates_fit_the_array() {
        let (plan, _) = small_rows();
        let c = candidates(&plan, Param::HeadDim);
        assert!(!c.is_empty());
        for d in c {
            assert!(d.is_power_of_two() && d % plan.config.cols as usize == 0);
        }
        let e = "dram_pj_per_bit_x"
            .parse::<Param>()
            .unwrap_err()
            .to_string();
        assert!(e.contains("choose one of dram_pj_per_bit"), "{e}");
    }
}
