//! `regflash sim`: one attention problem through the generated core under Verilator, checked
//! bit for bit against the hardware model and measured against the f64 and plain FP16
//! references, with the core's own counters as the performance figures.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{bail, ensure, Context, Result};
use hdl::config::CoreConfig;
use hdl::core::CoreParams;
use kernels::flash::{decode, OutFormat};
use kernels::fp::fp32_to_fp16;
use kernels::patterns::Pattern;
use kernels::reference::{attention_f64, attention_plain_lowprec, max_errors};
use serde::Serialize;
use verilator_tb::npy::{self, DType, Tensor};

use crate::design::{simulate, Target};
use crate::verify::attention::{self, Attention, MemoryTiming, Mismatch};

/// Everything `regflash sim` reports.
#[derive(Clone, Debug, Serialize)]
pub struct SimReport {
    pub preset: String,
    pub rows: u32,
    pub cols: u32,
    pub br: u32,
    pub bc: u32,
    pub seq_len: usize,
    pub k_len: usize,
    pub heads: usize,
    pub head_dim: usize,
    pub causal: bool,
    pub out_format: String,
    pub memory_latency: u32,
    pub memory_stall_probability: f64,
    /// Busy cycles from `start` to `done`, from the core's counter.
    pub cycles: u64,
    /// Useful MACs / (R·C): the cycles a perfect array would need.
    pub ideal_cycles: f64,
    /// ideal_cycles / cycles.
    pub utilization: f64,
    /// Cycles issuing a MAC step / cycles (masked slots inside those steps included).
    pub array_busy: f64,
    /// Output values whose bits differ from the hardware model.
    pub bit_mismatches: usize,
    pub first_mismatch: Option<String>,
    /// Counters that differ from what the model and the schedule fix exactly.
    pub counter_errors: Vec<String>,
    pub assertion_failures: u32,
    /// max |O − O_f64|.
    pub max_abs_err: f64,
    /// max |O − O_f64| / max |O_f64|.
    pub max_rel_err: f64,
    /// The same error of plain attention at FP16 storage and FP32 accumulation.
    pub plain_lowprec_max_abs_err: f64,
    pub memory_bytes_read: u64,
    pub memory_bytes_written: u64,
    /// The core's counters.
    pub counters: BTreeMap<String, u64>,
    /// No bit mismatch, no counter error, no assertion failure.
    pub passed: bool,
}

impl SimReport {
    /// The human-readable summary.
    pub fn summary(&self) -> String {
        let c = |n: &str| self.counters.get(n).copied().unwrap_or(0);
        let pct = |n: &str| 100.0 * c(n) as f64 / self.cycles.max(1) as f64;
        let mut s = format!(
            "regflash sim: preset {} ({}x{} PEs, Br {} Bc {} d {}), {} head(s), seq {}{}, {}, \
             out {}\n",
            self.preset,
            self.rows,
            self.cols,
            self.br,
            self.bc,
            self.head_dim,
            self.heads,
            self.seq_len,
            if self.k_len != self.seq_len {
                format!(" (keys {})", self.k_len)
            } else {
                String::new()
            },
            if self.causal { "causal" } else { "non-causal" },
            self.out_format
        );
        s += &format!(
            "  cycles {} (ideal {:.0}), utilization {:.1} %, MAC steps {:.1} % of cycles\n",
            self.cycles,
            self.ideal_cycles,
            100.0 * self.utilization,
            100.0 * self.array_busy
        );
        s += &format!(
            "  stalls: K/V {:.1} %, Q {:.1} %, softmax {:.1} %, other {:.1} % of cycles\n",
            pct("stall_kv"),
            pct("stall_q"),
            pct("stall_softmax"),
            pct("stall_other")
        );
        s += &format!(
            "  MACs {} (masked slots {}), blocks {} (skipped {}), register file reads {} / \
             writes {}\n",
            c("macs"),
            c("masked_macs"),
            c("blocks"),
            c("skipped_blocks"),
            c("rf_reads"),
            c("rf_writes")
        );
        s += &format!(
            "  memory: {} bytes read, {} bytes written\n",
            self.memory_bytes_read, self.memory_bytes_written
        );
        s += &format!(
            "  accuracy vs f64: max abs {:.3e}, max rel {:.3e} (plain FP16 attention: {:.3e})\n",
            self.max_abs_err, self.max_rel_err, self.plain_lowprec_max_abs_err
        );
        if self.passed {
            s +=
                "  PASS: O equals the hardware model bit for bit; counters agree with the schedule";
        } else {
            s += &format!(
                "  FAIL: {} output values differ from the model",
                self.bit_mismatches
            );
            if let Some(m) = &self.first_mismatch {
                s += &format!(" (first: {m})");
            }
            for e in &self.counter_errors {
                s += &format!("\n    {e}");
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
    let p = CoreParams::from_config(cfg)?;
    a.validate(&p)?;
    let (model, _) = simulate(cfg, &Target::Core)?;
    let run = attention::run(&model, &p, a, timing, progress)?;
    let chk = attention::check(&p, a, &run);
    // Accuracy against the references, head by head.
    let d = a.head_dim;
    let got = decode(&run.out, a.out);
    let (mut abs, mut scale, mut plain) = (0.0f64, 0.0f64, 0.0f64);
    for h in 0..a.heads {
        let (qs, ks) = (a.q_len * d, a.k_len * d);
        let q = &a.q[h * qs..(h + 1) * qs];
        let k = &a.k[h * ks..(h + 1) * ks];
        let v = &a.v[h * ks..(h + 1) * ks];
        let want = attention_f64(q, k, v, a.q_len, a.k_len, d, a.causal);
        let (e, s) = max_errors(&got[h * qs..(h + 1) * qs], &want);
        abs = abs.max(e);
        scale = scale.max(s);
        let pl = attention_plain_lowprec(q, k, v, a.q_len, a.k_len, d, a.causal);
        plain = plain.max(max_errors(&pl, &want).0);
    }
    let c = |n: &str| run.counters.get(n).copied().unwrap_or(0);
    let pes = (cfg.rows * cfg.cols) as f64;
    let ideal = c("macs") as f64 / pes;
    let cycles = c("cycles");
    let fmt_mismatch = |m: Mismatch| {
        format!(
            "head {}, row {}, column {}: RTL {:#x}, model {:#x}",
            m.head, m.row, m.col, m.got, m.want
        )
    };
    let report = SimReport {
        preset: cfg.name.clone(),
        rows: cfg.rows,
        cols: cfg.cols,
        br: cfg.br,
        bc: cfg.bc,
        seq_len: a.q_len,
        k_len: a.k_len,
        heads: a.heads,
        head_dim: d,
        causal: a.causal,
        out_format: format!("{:?}", a.out).to_lowercase(),
        memory_latency: timing.latency,
        memory_stall_probability: timing.stall_probability,
        cycles,
        ideal_cycles: ideal,
        utilization: ideal / cycles.max(1) as f64,
        array_busy: c("mac_cycles") as f64 / cycles.max(1) as f64,
        bit_mismatches: chk.bit_mismatches,
        first_mismatch: chk.first_mismatch.map(fmt_mismatch),
        counter_errors: chk
            .counter_errors
            .iter()
            .map(|(n, g, w)| format!("{n}: {g}, expected {w}"))
            .collect(),
        assertion_failures: run.assertion_failures,
        max_abs_err: abs,
        max_rel_err: abs / scale.max(f64::MIN_POSITIVE),
        plain_lowprec_max_abs_err: plain,
        memory_bytes_read: run.memory.bytes_read,
        memory_bytes_written: run.memory.bytes_written,
        counters: run.counters.clone(),
        passed: chk.ok(),
    };
    Ok((report, run.out))
}

/// A tensor from a `.npy` file as FP16 bits shaped (heads, len, d): FP16 as is, FP32 rounded
/// to nearest even.
pub fn load_input(path: &Path, what: &str) -> Result<(Vec<u16>, [usize; 3])> {
    let t = npy::read(path).with_context(|| format!("{what} input {}", path.display()))?;
    let shape = match t.shape.as_slice() {
        &[len, d] => [1, len, d],
        &[h, len, d] => [h, len, d],
        s => bail!(
            "{what} in {} has shape {s:?}; expected (seq, d) or (heads, seq, d)",
            path.display()
        ),
    };
    let bits = t
        .data
        .iter()
        .map(|&x| match t.dtype {
            DType::F16 => x as u16,
            DType::F32 => fp32_to_fp16(x),
        })
        .collect();
    Ok((bits, shape))
}

/// Q, K and V from `.npy` files, checked against each other.
pub fn load_problem(
    q: &Path,
    k: &Path,
    v: &Path,
    causal: bool,
    out: OutFormat,
) -> Result<Attention> {
    let (qb, qs) = load_input(q, "Q")?;
    let (kb, ks) = load_input(k, "K")?;
    let (vb, vs) = load_input(v, "V")?;
    ensure!(
        ks == vs,
        "K has shape {ks:?} but V has shape {vs:?}: they must match"
    );
    ensure!(
        qs[0] == ks[0] && qs[2] == ks[2],
        "Q has shape {qs:?} and K {ks:?}: heads and head dimension must match"
    );
    Ok(Attention {
        heads: qs[0],
        q_len: qs[1],
        k_len: ks[1],
        head_dim: qs[2],
        q: qb,
        k: kb,
        v: vb,
        causal,
        out,
    })
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

/// Writes O as a `.npy` array shaped like Q: (seq, d) for one head, else (heads, seq, d).
pub fn write_output(path: &Path, a: &Attention, out: &[u32]) -> Result<()> {
    let shape = if a.heads == 1 {
        vec![a.q_len, a.head_dim]
    } else {
        vec![a.heads, a.q_len, a.head_dim]
    };
    let t = Tensor {
        dtype: match a.out {
            OutFormat::F16 => DType::F16,
            OutFormat::F32 => DType::F32,
        },
        shape,
        data: out.to_vec(),
    };
    npy::write(path, &t).with_context(|| format!("writing O to {}", path.display()))
}
