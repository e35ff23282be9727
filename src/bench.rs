//! `regflash bench`: utilization of the generated core over presets, sequence lengths and
//! causal masking, every run checked bit for bit like `regflash sim`, written as a markdown
//! table. All figures come from the core's own counters.

use anyhow::{ensure, Context, Result};
use hdl::config::CoreConfig;
use kernels::flash::OutFormat;
use serde::{Deserialize, Serialize};

use crate::sim::{self, SimReport};
use crate::verify::attention::MemoryTiming;

/// One benchmark run: the report plus, for causal runs, the ratio to the matching
/// non-causal run's cycles.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct BenchRow {
    /// The (configuration, sequence length) point of the plan this row ran, and how many
    /// points the whole plan has: a shard's rows keep their place, so merged shards equal
    /// the unsharded run (`merge`).
    pub point: usize,
    pub points: usize,
    pub report: SimReport,
    /// Cycles of this causal run over the non-causal run of the same shape.
    #[serde(
        serialize_with = "crate::report::opt_real",
        deserialize_with = "crate::report::de_opt_real"
    )]
    pub causal_cycle_ratio: Option<f64>,
}

/// What to run.
#[derive(Clone, Debug)]
pub struct BenchPlan {
    pub configs: Vec<CoreConfig>,
    pub seq_lens: Vec<usize>,
    pub heads: usize,
    pub timing: MemoryTiming,
    pub seed: u64,
    /// Run only shard i of n: the points k with k mod n = i (a job array runs one each).
    pub shard: Option<Shard>,
}

/// One of n equal parts of a plan's points (`--shard i/n`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shard {
    pub index: usize,
    pub count: usize,
}

impl Shard {
    /// Parses `i/n` (0 ≤ i < n).
    pub fn parse(text: &str) -> Result<Shard> {
        let bad = || {
            anyhow::anyhow!(
                "--shard takes i/n with 0 <= i < n (shard i of n, counted from 0), got `{text}`"
            )
        };
        let (i, n) = text.split_once('/').ok_or_else(bad)?;
        let (index, count) = (
            i.trim().parse().map_err(|_| bad())?,
            n.trim().parse().map_err(|_| bad())?,
        );
        ensure!(index < count, bad());
        Ok(Shard { index, count })
    }

    pub fn has(&self, point: usize) -> bool {
        point % self.count == self.index
    }
}

/// Checks every (config, sequence length) point of a run plan before the first runs, so that a
/// bad one fails at once, not hours in: the memory timing, each config, and each shape against
/// the core and the simulator.
pub fn check_points(
    configs: &[CoreConfig],
    seq_lens: &[usize],
    heads: usize,
    timing: &MemoryTiming,
) -> Result<()> {
    ensure!(
        seq_lens.iter().all(|&n| n >= 1),
        "sequence lengths must be at least 1"
    );
    timing.validate().context("--mem-latency")?;
    for cfg in configs {
        cfg.validate()
            .with_context(|| format!("{} as {}", cfg.name, cfg.variant.label()))?;
        let p = hdl::core::CoreParams::from_config(cfg)?;
        for &seq in seq_lens {
            crate::verify::attention::check_shape(
                &p,
                heads,
                seq,
                seq,
                cfg.head_dim as usize,
                OutFormat::Short,
            )
            .with_context(|| format!("{} at seq {seq} ({})", cfg.name, cfg.variant))?;
        }
    }
    Ok(())
}

/// Widens the index and address registers of `cfg` when `seq` tokens need more than it has
/// (the presets' 16-bit indexes stop at 65,535 tokens), so that a long sequence is estimated
/// on the same array; returns what changed. The schedule's cycles do not depend on these
/// widths. Widths beyond the validated ranges are left for `check_core_shape` to refuse.
pub fn widen(cfg: &mut CoreConfig, heads: usize, seq: usize) -> Option<String> {
    let bits = |x: u64| 64 - x.leading_zeros();
    let index = bits((seq.max(heads) + cfg.br.max(cfg.bc) as usize) as u64);
    // unfused reads a tile's S back as a block of br rows per block of keys (rowfused's
    // spill: per block past its S arrays).
    let plan = cfg.variant.plan();
    let scratch_rows = match plan.scratch() {
        true => {
            let held = match plan.spills() {
                true => plan.row_keys().unwrap_or(0) / cfg.bc.max(1),
                false => 0,
            };
            (seq.div_ceil(cfg.bc.max(1) as usize) as u64).saturating_sub(held as u64)
                * cfg.br as u64
        }
        false => 0,
    };
    let index = index.max(bits(scratch_rows));
    let size = crate::verify::attention::Layout::upper_bound(
        heads,
        seq,
        seq,
        cfg.head_dim as usize,
        kernels::flash::OutFormat::Short,
    )
    .map_or(u64::MAX, |l| l.size);
    let addr = bits(size);
    let (old_i, old_a) = (cfg.index_bits, cfg.addr_bits);
    cfg.index_bits = old_i.max(index.min(30));
    cfg.addr_bits = old_a.max(addr.min(48));
    ((cfg.index_bits, cfg.addr_bits) != (old_i, old_a)).then(|| {
        format!(
            "seq {seq} needs wider registers than {}'s (index_bits {old_i}, addr_bits {old_a}): \
             estimated with index_bits {} and addr_bits {}, which change no cycle",
            cfg.name, cfg.index_bits, cfg.addr_bits
        )
    })
}

/// Runs every (config, sequence length, causal) point; `each` sees a row as soon as it is done
/// and `progress` the cycles of the run in flight.
pub fn run(
    plan: &BenchPlan,
    mut each: impl FnMut(&BenchRow),
    mut progress: impl FnMut(&str, u64, u64),
) -> Result<Vec<BenchRow>> {
    ensure!(!plan.configs.is_empty(), "no configuration to benchmark");
    ensure!(!plan.seq_lens.is_empty(), "no sequence length to benchmark");
    check_points(&plan.configs, &plan.seq_lens, plan.heads, &plan.timing)?;
    let mut rows = Vec::new();
    let points = plan.configs.len() * plan.seq_lens.len();
    for (c, cfg) in plan.configs.iter().enumerate() {
        let params = hdl::core::CoreParams::from_config(cfg)?;
        for (s, &seq) in plan.seq_lens.iter().enumerate() {
            let point = c * plan.seq_lens.len() + s;
            if plan.shard.is_some_and(|sh| !sh.has(point)) {
                continue;
            }
            let mut plain_cycles = None;
            for causal in [false, true] {
                let a = sim::random_problem(
                    plan.heads,
                    seq,
                    cfg.head_dim as usize,
                    causal,
                    OutFormat::Short,
                    plan.seed,
                )
                .for_design(&params);
                let label = format!(
                    "{} {} seq {seq} {}",
                    cfg.name,
                    cfg.variant,
                    if causal { "causal" } else { "non-causal" }
                );
                let (report, _) = sim::run(cfg, &a, &plan.timing, |d, e| progress(&label, d, e))?;
                let causal_cycle_ratio = match (causal, plain_cycles) {
                    (true, Some(p)) => Some(report.cycles as f64 / p as f64),
                    _ => None,
                };
                if !causal {
                    plain_cycles = Some(report.cycles);
                }
                let row = BenchRow {
                    point,
                    points,
                    report,
                    causal_cycle_ratio,
                };
                each(&row);
                rows.push(row);
            }
        }
    }
    Ok(rows)
}

/// The rows of shard reports in the order of the unsharded plan, after checking that they
/// cover every point of one plan exactly once (each point: a non-causal and a causal row).
pub fn merge(mut rows: Vec<BenchRow>) -> Result<Vec<BenchRow>> {
    ensure!(
        !rows.is_empty(),
        "nothing to merge: the reports have no rows"
    );
    let points = rows[0].points;
    ensure!(
        rows.iter().all(|r| r.points == points),
        "the reports come from different plans ({} and {} points): merge the shards of one \
         `regflash bench` command line",
        points,
        rows.iter()
            .map(|r| r.points)
            .find(|&p| p != points)
            .unwrap_or(points)
    );
    rows.sort_by_key(|r| (r.point, r.report.causal));
    for point in 0..points {
        let n = rows.iter().filter(|r| r.point == point).count();
        ensure!(
            n == 2,
            "point {point} of {points} appears {n} times (expected once: a non-causal and a \
             causal run): {}",
            if n == 0 {
                "a shard is missing"
            } else {
                "a shard was given twice"
            }
        );
    }
    Ok(rows)
}

/// The markdown table of `rows`, with a legend.
pub fn table(rows: &[BenchRow]) -> String {
    let mut s = String::from(
        "| preset | variant | PEs | Br×Bc×d | seq | causal | cycles | ideal cycles | utilization \
         | causal / non-causal cycles | K/V stall | Q stall | softmax stall | other | S buffer \
         bits | P bank bits | bit-exact | QK busy | PV busy | link bits |\n\
         |---|---|---|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|\n",
    );
    for row in rows {
        let r = &row.report;
        let pct = |n: &str| {
            100.0 * r.counters.get(n).copied().unwrap_or(0) as f64 / r.cycles.max(1) as f64
        };
        let count = |n: &str| r.counters.get(n).copied().unwrap_or(0);
        s += &format!(
            "| {} | {} | {}{}×{} | {}×{}×{} | {} | {} | {} | {:.0} | {:.1} % | {} | {:.1} % | \
             {:.1} % | {:.1} % | {:.1} % | {} | {} | {} | {:.1} % | {:.1} % | {} |\n",
            r.preset,
            if r.tiers > 2 {
                format!("{})", r.design(" ("))
            } else {
                r.variant.clone()
            },
            if r.mac_tiers > 1 {
                format!("{}×", r.mac_tiers)
            } else {
                String::new()
            },
            r.rows,
            r.cols,
            r.br,
            r.bc,
            r.head_dim,
            r.seq_len,
            if r.causal { "yes" } else { "no" },
            r.cycles,
            r.ideal_cycles,
            100.0 * r.utilization,
            row.causal_cycle_ratio
                .map_or("".to_string(), |x| format!("{x:.3}")),
            pct("stall_kv"),
            pct("stall_q"),
            pct("stall_softmax"),
            pct("stall_other"),
            r.s_access_bits as u64 * (count("s_buf_reads") + count("s_buf_writes")),
            r.p_access_bits as u64 * (count("p_buf_reads") + count("p_buf_writes")),
            if r.passed { "yes" } else { "**NO**" },
            100.0 * r.qk_tier_busy,
            100.0 * r.pv_tier_busy,
            count("vlink_bits")
        );
    }
    s += "\nutilization = useful MACs / (PEs × cycles); ideal cycles = useful MACs / PEs. \
          Stalls are cycles in which the array did no MAC step, by cause, as a share of all \
          cycles (the core's counters). S buffer bits: reads and writes of the S arrays (buf2d, rowfused) \
          (32-bit words); P bank bits: reads and writes of the rows' P banks (16-bit words; in \
          buf2d the buffer's P arrays). QK / PV busy: cycles with a QK / PV step as a share of \
          all (in reg3d each tier's busy share; in 2-D designs the one array's split). Link bits: \
          reg3d's vertical-link traffic between the tiers (P up, O down, and with three tiers S \
          up from the QK tier to the softmax tier). PEs: PE tiers × R × C; \
          utilization counts the MACs of every tier. bit-exact: O equals the hardware model bit for bit, \
          every counter agrees with the schedule, and O meets the error contract against the \
          f64 reference (the run passed).\n";
    s
}
