//! `regflash._native`: the extension module under the Python package `regflash`
//! (`python/pysrc/regflash`), built with maturin. It holds a design ([`Design`]: a preset or a
//! config file, its variant) and runs attention on it: on the bit-exact hardware model, or on
//! the design's RTL through Verilator. Tensors cross as little-endian FP16 bytes in (heads,
//! seq, d) order; the Python side reshapes them from and to the caller's layout and type.
//! Every error is a `regflash.RegflashError` carrying the message the CLI would print.

use std::str::FromStr;

use anyhow::{bail, ensure, Context, Result};
use hdl::config::{CoreConfig, VariantKind, PRESETS};
use hdl::core::CoreParams;
use kernels::flash::OutFormat;
use pyo3::create_exception;
use pyo3::exceptions::PyException;
use pyo3::prelude::*;
use pyo3::types::PyBytes;
use regflash::verify::attention::{Attention, MemoryTiming, TensorLayout};

create_exception!(
    _native,
    RegflashError,
    PyException,
    "An input regflash cannot handle, or a run that is not correct; the message says what is \
     wrong and how to fix it."
);

fn fail(e: anyhow::Error) -> PyErr {
    RegflashError::new_err(format!("{e:#}"))
}

/// Runs `work` on a thread of its own while this one, the interpreter's, watches it
/// (`regflash::watch`): every 100 ms it checks for signals and calls `progress(done, total)`.
/// An interrupt (Ctrl-C), or an exception from `progress`, stops the run (within a head on
/// the model, 8,192 cycles on the RTL, a point of `estimate`) and is raised when it has
/// stopped; the run's threads never outlive the call.
fn watched<T: Send>(
    py: Python<'_>,
    progress: Option<&Bound<'_, PyAny>>,
    work: impl FnOnce() -> Result<T> + Send,
) -> PyResult<T> {
    use std::sync::mpsc::{channel, RecvTimeoutError};
    regflash::watch::start();
    let tell = |progress: &Bound<'_, PyAny>| {
        let (done, total) = regflash::watch::progress();
        progress.call1((done, total)).map(|_| ())
    };
    std::thread::scope(|s| {
        let (tx, mut rx) = channel();
        s.spawn(move || {
            let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(work));
            let _ = tx.send(r);
        });
        let mut raised: Option<PyErr> = None;
        loop {
            let (got, back) = py.detach(move || {
                let got = rx.recv_timeout(std::time::Duration::from_millis(100));
                (got, rx)
            });
            rx = back;
            match got {
                Ok(result) => {
                    if let Some(e) = raised {
                        return Err(e);
                    }
                    let result =
                        match result {
                            Ok(r) => r.map_err(fail)?,
                            Err(_) => return Err(RegflashError::new_err(
                                "regflash failed inside (a panic, printed above): please report \
                                 it with the call that made it",
                            )),
                        };
                    if let Some(p) = progress {
                        tell(p)?;
                    }
                    return Ok(result);
                }
                Err(RecvTimeoutError::Disconnected) => {
                    return Err(RegflashError::new_err(
                        "regflash's run ended without a result",
                    ))
                }
                Err(RecvTimeoutError::Timeout) if raised.is_none() => {
                    let asked = py
                        .check_signals()
                        .and_then(|_| progress.map_or(Ok(()), tell));
                    if let Err(e) = asked {
                        regflash::watch::stop();
                        raised = Some(e);
                    }
                }
                Err(RecvTimeoutError::Timeout) => {}
            }
        }
    })
}

/// A regflash design: a configuration (a built-in preset or a TOML file) and its variant.
/// `b`, little-endian 16-bit values' bytes (the tensor `what`), as the values.
fn words(b: &[u8], what: &str) -> Result<Vec<u16>> {
    ensure!(
        b.len().is_multiple_of(2),
        "{what} must be 16-bit values' bytes (an even count), got {}",
        b.len()
    );
    Ok(b.chunks_exact(2)
        .map(|x| u16::from_le_bytes([x[0], x[1]]))
        .collect())
}

/// The output format a caller's `out_f32` asks for.
fn out_format(out_f32: bool) -> OutFormat {
    if out_f32 {
        OutFormat::F32
    } else {
        OutFormat::Short
    }
}

/// Output bits (binary32, or the operand format in the low 16 bits) as the little-endian
/// bytes of their format.
fn out_bytes(x: &[u32], out: OutFormat) -> Vec<u8> {
    match out {
        OutFormat::F32 => x.iter().flat_map(|y| y.to_le_bytes()).collect(),
        OutFormat::Short => x.iter().flat_map(|&y| (y as u16).to_le_bytes()).collect(),
    }
}

/// dQ's, dK's and dV's bytes and the report's JSON.
type GradBytes<'py> = (
    Bound<'py, PyBytes>,
    Bound<'py, PyBytes>,
    Bound<'py, PyBytes>,
    String,
);

#[pyclass(frozen, module = "regflash._native")]
struct Design {
    cfg: CoreConfig,
}

/// The preset built for `head_dim` (its PE columns hold d output columns), the smallest first.
fn preset_for(head_dim: u32) -> Result<CoreConfig> {
    let mut all: Vec<CoreConfig> = PRESETS
        .iter()
        .map(|n| CoreConfig::preset(n))
        .collect::<Result<_>>()?;
    all.sort_by_key(|c| c.rows * c.cols);
    if let Some(c) = all.iter().find(|c| c.head_dim == head_dim) {
        return Ok(c.clone());
    }
    let have: Vec<String> = all
        .iter()
        .map(|c| format!("{} (head_dim {})", c.name, c.head_dim))
        .collect();
    bail!(
        "no built-in preset is built for head_dim = {head_dim}: the presets are {}; give \
         config= a TOML file with head_dim = {head_dim} (regflash gen --help, presets/*.toml)",
        have.join(", ")
    )
}

impl Design {
    fn resolve(
        head_dim: u32,
        preset: Option<&str>,
        config: Option<&str>,
        variant: Option<&str>,
        (rescale, lazy_threshold): (Option<&str>, Option<u32>),
        (in_format, qk_format): (Option<&str>, Option<&str>),
    ) -> Result<CoreConfig> {
        let mut cfg = match (preset, config) {
            (Some(_), Some(_)) => bail!("give preset= or config=, not both"),
            (Some(name), None) => CoreConfig::preset(name)?,
            (None, Some(path)) => {
                let text = std::fs::read_to_string(path)
                    .with_context(|| format!("cannot read config file {path}"))?;
                CoreConfig::from_toml_with_notes(&text)
                    .with_context(|| format!("config file {path}"))?
                    .0
            }
            (None, None) => preset_for(head_dim)?,
        };
        if let Some(v) = variant {
            cfg = cfg.with_variant(VariantKind::from_str(v)?);
        }
        if rescale.is_some() || lazy_threshold.is_some() {
            let name = rescale.or(Some(cfg.rescale.name()));
            cfg.rescale = hdl::softmax::Rescale::from_keys(name, lazy_threshold)?;
        }
        if let Some(key) = in_format {
            cfg.set_in_format(hdl::format::in_format_from_key(key)?);
        }
        if let Some(key) = qk_format {
            cfg.qk_format = match key {
                "none" => None,
                k => Some(hdl::format::qk_format_from_key(k)?),
            };
        }
        ensure!(
            cfg.head_dim == head_dim,
            "head_dim = {head_dim}, but {} is built for head_dim = {} (its PE columns hold d \
             output columns): leave preset= out to take the preset built for {head_dim}, or \
             give a config with head_dim = {head_dim}",
            cfg.name,
            cfg.head_dim
        );
        cfg.validate()?;
        Ok(cfg)
    }

    #[allow(clippy::too_many_arguments)]
    fn run_inner(
        &self,
        (backend, check): (&str, bool),
        (q, k, v): (&[u8], &[u8], &[u8]),
        (heads, kv_heads, q_len, k_len): (usize, usize, usize, usize),
        causal: bool,
        (out_f32, scales): (bool, [i32; 3]),
        threads: usize,
    ) -> Result<(Vec<u8>, String)> {
        let a = Attention {
            heads,
            kv_heads,
            layout: TensorLayout::Bhsd,
            q_len,
            k_len,
            head_dim: self.cfg.head_dim as usize,
            q: words(q, "q")?,
            k: words(k, "k")?,
            v: words(v, "v")?,
            causal,
            out: out_format(out_f32),
            format: self.cfg.in_format,
            qk: None,
            scales: kernels::operands::TensorScales {
                q: scales[0],
                k: scales[1],
                v: scales[2],
            },
        };
        let a = a.for_qk_of(&CoreParams::from_config(&self.cfg)?);
        // Both runs check the problem against the core first (`Attention::validate`).
        let (mut report, out) = match (backend, check) {
            ("model", _) => regflash::sim::model_run(&self.cfg, &a, threads, check)?,
            ("rtl", true) => {
                regflash::sim::run(&self.cfg, &a, &MemoryTiming::default(), |_, _| {})?
            }
            ("rtl", false) => bail!(
                "check=False skips the accuracy references of the model backend; an RTL run \
                 is always checked (its output against the model and the references): drop \
                 check=False, or use backend=\"model\""
            ),
            (b, _) => bail!("unknown backend `{b}`: choose \"model\" or \"rtl\""),
        };
        report.with_energy(&kernels::energy::EnergyTable::default(), &self.cfg, false);
        // Unchecked, what is left to hold is the model's own: its counters.
        ensure!(
            report.passed || (!report.checked && report.bit_exact && report.counters_ok),
            "the {backend} run is not correct: {}",
            report.failures.join("; ")
        );
        Ok((
            out_bytes(&out, out_format(out_f32)),
            serde_json::to_string(&report)?,
        ))
    }
}

#[pymethods]
impl Design {
    #[new]
    #[pyo3(signature = (head_dim, preset=None, config=None, variant=None, rescale=None, lazy_threshold=None, in_format=None, qk_format=None))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        head_dim: u32,
        preset: Option<&str>,
        config: Option<&str>,
        variant: Option<&str>,
        rescale: Option<&str>,
        lazy_threshold: Option<u32>,
        in_format: Option<&str>,
        qk_format: Option<&str>,
    ) -> PyResult<Self> {
        let rescaling = (rescale, lazy_threshold);
        let formats = (in_format, qk_format);
        let cfg =
            Self::resolve(head_dim, preset, config, variant, rescaling, formats).map_err(fail)?;
        Ok(Design { cfg })
    }

    /// The configuration's name (a preset's, or the file's `name`).
    #[getter]
    fn name(&self) -> String {
        self.cfg.name.clone()
    }

    /// The variant and its knobs in short (`reg2d`, `reg3d ×3`, `rowfused (spill)`, ...).
    #[getter]
    fn variant(&self) -> String {
        self.cfg.variant.label()
    }

    #[getter]
    fn head_dim(&self) -> u32 {
        self.cfg.head_dim
    }

    /// The operand format's key: "fp16", "bf16", "fp8e4m3", "fp8e5m2" (the bits `run` takes
    /// and its short output).
    #[getter]
    fn in_format(&self) -> &'static str {
        hdl::format::in_format_key(self.cfg.in_format)
    }

    /// The dtype torch names the operand format by: "float16", "bfloat16", "float8_e4m3fn",
    /// "float8_e5m2".
    #[getter]
    fn short_dtype(&self) -> &'static str {
        self.cfg
            .in_format
            .dtype_name()
            .expect("every operand format has a torch dtype")
    }

    /// numpy has a dtype for the operand format (float16; not bfloat16 or FP8).
    #[getter]
    fn numpy_short(&self) -> bool {
        self.cfg.in_format.numpy_has()
    }

    /// Every value of the operand format as float32 (little-endian bytes, indexed by the
    /// value's bits): how numpy reads a short output it has no dtype for.
    fn short_values<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        let f = self.cfg.in_format;
        let bytes: Vec<u8> = (0..=f.mask())
            .flat_map(|x| kernels::fp::widen(x as u16, f).to_le_bytes())
            .collect();
        PyBytes::new(py, &bytes)
    }

    /// Integer QKᵀ: "int8", "int4", or None (QK in the operand format).
    #[getter]
    fn qk_format(&self) -> Option<&'static str> {
        self.cfg.qk_format.map(|f| f.name())
    }

    /// `data` (little-endian values of `itemsize` bytes: 2 float16, 4 float32, 8 float64,
    /// C order, of `shape`) rounded to the operand format, nearest even, in one rounding
    /// (`kernels::operands`): the operands' little-endian bytes and the tensor's scale
    /// exponent. A format of a narrower range than binary16's (FP8) stores the tensor at the
    /// power-of-two scale that fits it (`round_scaled`); the others at 0, a finite value the
    /// format cannot hold refused, naming `name` and the element.
    fn operands<'py>(
        &self,
        py: Python<'py>,
        data: &[u8],
        itemsize: usize,
        shape: Vec<usize>,
        name: &str,
    ) -> PyResult<(Bound<'py, PyBytes>, i32)> {
        use kernels::format::Format;
        use kernels::operands::{largest_finite, multi_index, round_tensor, show};
        let format = self.cfg.in_format;
        let (rounded, exp) = py
            .detach(|| -> Result<(Vec<u16>, i32)> {
                let from = match itemsize {
                    2 => Format::FP16,
                    4 => Format::FP32,
                    8 => Format::FP64,
                    n => bail!("{name} holds {n}-byte values: give float16, float32 or float64"),
                };
                ensure!(
                    data.len().is_multiple_of(itemsize),
                    "{name}: {} bytes are not whole {itemsize}-byte values",
                    data.len()
                );
                let values: Vec<u64> = data
                    .chunks_exact(itemsize)
                    .map(|c| {
                        let mut b = [0u8; 8];
                        b[..itemsize].copy_from_slice(c);
                        u64::from_le_bytes(b)
                    })
                    .collect();
                round_tensor(&values, from, format, false)
                    .map(|(bits, _, exp)| (bits, exp))
                    .map_err(|e| {
                        anyhow::anyhow!(
                            "{name}{:?} {}, which the core reads: scale the input, or clamp it to \
                             ±{}",
                            multi_index(&shape, e.index),
                            e.describe(),
                            show(largest_finite(format))
                        )
                    })
            })
            .map_err(fail)?;
        let bytes: Vec<u8> = rounded.iter().flat_map(|x| x.to_le_bytes()).collect();
        Ok((PyBytes::new(py, &bytes), exp))
    }

    /// The whole configuration as TOML (what `regflash gen --config` reads).
    fn toml(&self) -> String {
        self.cfg.to_toml()
    }

    /// Attention of `heads` query heads over `kv_heads` K/V heads (bytes of the operand
    /// format, FP16 or BF16, (heads, q_len, d) and (kv_heads, k_len, d)): the output bytes (the
    /// operand format, or FP32 with `out_f32`) in (heads, q_len, d) order and the run's report
    /// as JSON.
    #[allow(clippy::too_many_arguments)]
    #[pyo3(signature = (backend, q, k, v, heads, kv_heads, q_len, k_len, causal, out_f32, threads, scales=[0, 0, 0], progress=None, check=true))]
    fn run<'py>(
        &self,
        py: Python<'py>,
        backend: &str,
        q: &[u8],
        k: &[u8],
        v: &[u8],
        heads: usize,
        kv_heads: usize,
        q_len: usize,
        k_len: usize,
        causal: bool,
        out_f32: bool,
        threads: usize,
        scales: [i32; 3],
        progress: Option<&Bound<'py, PyAny>>,
        check: bool,
    ) -> PyResult<(Bound<'py, PyBytes>, String)> {
        let (bytes, report) = watched(py, progress, || {
            self.run_inner(
                (backend, check),
                (q, k, v),
                (heads, kv_heads, q_len, k_len),
                causal,
                (out_f32, scales),
                threads,
            )
        })?;
        Ok((PyBytes::new(py, &bytes), report))
    }

    /// The backward pass on the bit-exact model (`regflash::backward::model_backward`): Q and
    /// dO of `heads` heads ((heads, q_len, d) bytes of the operand format), K and V of
    /// `kv_heads` ((kv_heads, k_len, d)); the forward's O and log-sum-exp are the model's,
    /// recomputed (the same bits its forward returns). Returns dQ, dK and dV (bytes of the
    /// operand format, or FP32 with `out_f32`, laid out as Q, K and V) and the report's JSON.
    /// With `check`, the gradients are held to the f64 and plain backward by FlashAttention's
    /// criterion, and a gradient outside it is an error.
    #[allow(clippy::too_many_arguments)]
    #[pyo3(signature = (q, k, v, d_o, heads, kv_heads, q_len, k_len, causal, out_f32, threads, check=true))]
    fn backward<'py>(
        &self,
        py: Python<'py>,
        q: &[u8],
        k: &[u8],
        v: &[u8],
        d_o: &[u8],
        heads: usize,
        kv_heads: usize,
        q_len: usize,
        k_len: usize,
        causal: bool,
        out_f32: bool,
        threads: usize,
        check: bool,
    ) -> PyResult<GradBytes<'py>> {
        let (grads, report) = py
            .detach(|| -> Result<_> {
                let (q, k, v, d_o) = (
                    words(q, "q")?,
                    words(k, "k")?,
                    words(v, "v")?,
                    words(d_o, "dout")?,
                );
                let run = regflash::backward::BackwardRun {
                    q: &q,
                    k: &k,
                    v: &v,
                    d_o: &d_o,
                    heads,
                    kv_heads,
                    q_len,
                    k_len,
                    causal,
                    out: out_format(out_f32),
                };
                let (report, grads) =
                    regflash::backward::model_backward(&self.cfg, &run, threads, check)?;
                ensure!(
                    !check || report.passed,
                    "the backward is not correct: {}",
                    report.failures.join("; ")
                );
                Ok((grads, serde_json::to_string(&report)?))
            })
            .map_err(fail)?;
        let bytes = |x: &[u32]| out_bytes(x, out_format(out_f32));
        Ok((
            PyBytes::new(py, &bytes(&grads.dq)),
            PyBytes::new(py, &bytes(&grads.dk)),
            PyBytes::new(py, &bytes(&grads.dv)),
            report,
        ))
    }

    /// `regflash compare` on this design's array: every variant at each length of `seq`
    /// (simulated up to `max_sim_seq`, the schedule and the cycle model beyond), with the
    /// design's GLB, without it, or both (`glb`: "config", "none", "both"); JSON `{"rows":
    /// [...], "claims": [...]}` (the claims table's rows with `claims`).
    #[allow(clippy::too_many_arguments)]
    #[pyo3(signature = (seq, causal=false, heads=1, max_sim_seq=4096, glb="config", claims=false, spill_keys=None, progress=None, kv_heads=None, batch=1))]
    fn compare(
        &self,
        py: Python<'_>,
        seq: Vec<usize>,
        causal: bool,
        heads: usize,
        max_sim_seq: usize,
        glb: &str,
        claims: bool,
        spill_keys: Option<u32>,
        progress: Option<&Bound<'_, PyAny>>,
        kv_heads: Option<usize>,
        batch: usize,
    ) -> PyResult<String> {
        watched(py, progress, || -> Result<String> {
            use regflash::compare::{self, GlbRuns};
            let runs = match glb {
                "config" => GlbRuns::Config,
                "none" => GlbRuns::None,
                "both" => GlbRuns::Both,
                g => bail!("glb = \"{g}\": choose \"config\", \"none\" or \"both\""),
            };
            ensure!(heads >= 1, "heads must be at least 1");
            let (heads, kv_heads) = compare::batched(heads, kv_heads.unwrap_or(heads), batch)?;
            let plan = compare::ComparePlan {
                config: self.cfg.clone(),
                seq_lens: seq,
                causal,
                heads,
                kv_heads,
                seed: 1,
                timing: MemoryTiming::default(),
                table: kernels::energy::EnergyTable::default(),
                max_sim_seq,
                spill_keys: spill_keys.unwrap_or(
                    self.cfg
                        .variant
                        .rowfused()
                        .copied()
                        .unwrap_or_default()
                        .keys,
                ),
            };
            let rows = compare::run_glb(&plan, runs, |_| {})?;
            let claims = match claims {
                true => regflash::claims::claims(&rows, &compare::hierarchy(&self.cfg, runs)),
                false => vec![],
            };
            Ok(serde_json::to_string(
                &serde_json::json!({ "rows": rows, "claims": claims }),
            )?)
        })
    }

    /// The cycle model's and the energy table's figures for `heads` heads of `seq` tokens (each
    /// length), as `regflash estimate --report` gives them: JSON.
    #[pyo3(signature = (seq, heads=1, causal=false, progress=None))]
    fn estimate(
        &self,
        py: Python<'_>,
        seq: Vec<usize>,
        heads: usize,
        causal: bool,
        progress: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<String> {
        watched(py, progress, || {
            let points = regflash::estimate::points(&self.cfg, &seq, heads, causal)?;
            Ok(serde_json::to_string(&points)?)
        })
    }

    /// One report of a varlen batch from its sequences' reports (JSON, in order), as
    /// `SimReport::of_sequences` merges them, priced with the default energy table.
    fn merge_reports(&self, reports: Vec<String>) -> PyResult<String> {
        let parts = reports
            .iter()
            .map(|r| serde_json::from_str(r))
            .collect::<Result<Vec<regflash::sim::SimReport>, _>>()
            .map_err(|e| fail(e.into()))?;
        let table = kernels::energy::EnergyTable::default();
        let merged =
            regflash::sim::SimReport::of_sequences(&parts, &table, &self.cfg).map_err(fail)?;
        serde_json::to_string(&merged).map_err(|e| fail(e.into()))
    }
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<Design>()?;
    m.add("RegflashError", m.py().get_type::<RegflashError>())?;
    Ok(())
}
