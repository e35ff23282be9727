//! Estimates without the RTL: a sequence length's cycles, utilization, time, throughput,
//! memory traffic and energy from the cycle model (exact where it steps, extrapolated beyond)
//! and the schedule's counts (`regflash estimate`, and `regflash.Design.estimate` in Python).

use anyhow::{ensure, Context, Result};
use hdl::config::CoreConfig;
use hdl::core::CoreParams;
use kernels::energy::EnergyTable;
use serde::Serialize;

use crate::cycles::MemTiming;

/// One estimated point.
#[derive(Debug, Serialize)]
pub struct EstimatePoint {
    pub preset: String,
    pub variant: String,
    pub seq_len: usize,
    pub heads: usize,
    pub causal: bool,
    pub cycles: u64,
    /// MACs / (cycles × MAC PEs of every tier).
    pub utilization: f64,
    pub seconds: f64,
    pub tokens_per_second: f64,
    pub bytes_read: u64,
    pub bytes_written: u64,
    /// "exact (stepped cycle by cycle)" or the exact runs it was extrapolated from.
    pub method: String,
    pub counters: std::collections::BTreeMap<String, u64>,
    pub energy: crate::pricing::EnergyReport,
}

/// `heads` heads of `seq` queries over as many keys on `cfg` (`p` its parameters), priced
/// with `table`, with the memory's timing `mem`.
pub fn point(
    cfg: &CoreConfig,
    p: &CoreParams,
    table: &EnergyTable,
    mem: MemTiming,
    (seq, heads, causal): (usize, usize, bool),
) -> Result<EstimatePoint> {
    let shape = crate::schedule::Shape {
        heads,
        q_len: seq,
        k_len: seq,
        head_dim: cfg.head_dim as usize,
        causal,
        out_bytes: 2,
        kv_group: 1,
    };
    crate::verify::attention::check_core_shape(
        p,
        heads,
        seq,
        seq,
        cfg.head_dim as usize,
        kernels::flash::OutFormat::Short,
    )
    .with_context(|| format!("seq {seq} on {}", cfg.name))?;
    let (counters, method) = crate::cycles::counters(p, &shape, mem);
    let cycles = counters["cycles"];
    let tokens = (heads * seq) as u64;
    let energy = crate::pricing::report(table, cfg, &counters, tokens, false);
    let seconds = cycles as f64 / (cfg.clock_mhz * 1e6);
    let beat = (p.dma.width / 8) as u64;
    Ok(EstimatePoint {
        preset: cfg.name.clone(),
        variant: cfg.variant.label(),
        seq_len: seq,
        heads,
        causal,
        cycles,
        utilization: crate::schedule::ideal_cycles(p, counters["macs"]) / cycles.max(1) as f64,
        seconds,
        tokens_per_second: tokens as f64 / seconds,
        bytes_read: counters["read_beats"] * beat,
        bytes_written: counters["write_beats"] * beat,
        method: method.describe(),
        counters,
        energy,
    })
}

/// Every length of `seqs` on `cfg` (its registers widened where a length needs it, which
/// changes no cycle), with the default energy table and memory timing.
pub fn points(
    cfg: &CoreConfig,
    seqs: &[usize],
    heads: usize,
    causal: bool,
) -> Result<Vec<EstimatePoint>> {
    ensure!(heads >= 1, "heads must be at least 1");
    ensure!(
        !seqs.is_empty() && seqs.iter().all(|&s| s >= 1),
        "seq takes sequence lengths of at least 1"
    );
    let mut cfg = cfg.clone();
    let longest = seqs.iter().copied().max().unwrap_or(1);
    crate::bench::widen(&mut cfg, heads, longest);
    let p = CoreParams::from_config(&cfg)?;
    let mem = crate::verify::attention::MemoryTiming::default().model_timing();
    let table = EnergyTable::default();
    crate::watch::expect(seqs.len() as u64);
    seqs.iter()
        .map(|&seq| {
            let at = point(&cfg, &p, &table, mem, (seq, heads, causal));
            // A stop asked before or during the point leaves it partial (the cycle model
            // stops stepping).
            crate::watch::check()?;
            crate::watch::advance(1);
            at
        })
        .collect()
}
