//! `regflash sim` and `regflash bench` as a user runs them: the JSON report carries the fields
//! the issue names with consistent values, `.npy` inputs and outputs round-trip and match the
//! hardware model, and bad inputs get a clear error and a non-zero exit, never a panic.

use std::path::Path;

use gen::tools::ScratchDir;
use hdl::config::CoreConfig;
use hdl::core::CoreParams;
use kernels::flash::OutFormat;
use regflash::verify::attention::Attention;
use verilator_tb::npy::{self, DType, Tensor};

mod common;
use common::{regflash, text};

fn write_tensor(path: &Path, dtype: DType, shape: &[usize], bits: &[u16]) {
    let data = bits
        .iter()
        .map(|&b| match dtype {
            DType::F16 => b as u32,
            DType::F32 => half::f16::from_bits(b).to_f32().to_bits(),
        })
        .collect();
    npy::write(
        path,
        &Tensor {
            dtype,
            shape: shape.to_vec(),
            data,
        },
    )
    .unwrap();
}

#[test]
fn sim_report_and_output_match_the_hardware_model() {
    let dir = ScratchDir::new("cli-sim").unwrap();
    let (report, out) = (dir.path().join("r.json"), dir.path().join("o.npy"));
    let o = regflash(&[
        "sim",
        "--seq",
        "37",
        "--heads",
        "2",
        "--causal",
        "--seed",
        "5",
        "--mem-stall",
        "0.2",
        "--report",
        report.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(text(&o).contains("PASS"), "{}", text(&o));

    let r: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    assert_eq!(r["preset"], "small");
    assert_eq!(r["seq_len"], 37);
    assert_eq!(r["heads"], 2);
    assert_eq!(r["head_dim"], 16);
    assert_eq!(r["causal"], true);
    assert_eq!(r["bit_mismatches"], 0);
    let cycles = r["cycles"].as_u64().unwrap();
    let ideal = r["ideal_cycles"].as_f64().unwrap();
    let util = r["utilization"].as_f64().unwrap();
    assert!(
        ideal > 0.0 && (cycles as f64) > ideal,
        "{cycles} vs {ideal}"
    );
    assert!((util - ideal / cycles as f64).abs() < 1e-12);
    assert_eq!(r["counters"]["cycles"].as_u64(), Some(cycles));
    assert!(r["counters"]["skipped_blocks"].as_u64().unwrap() > 0);
    assert_eq!(r["bit_exact"], true);
    assert_eq!(r["accuracy_ok"], true);
    assert_eq!(r["nonfinite_outputs"], 0);

    // The written O is the hardware model's output for the same inputs.
    let t = npy::read(&out).unwrap();
    assert_eq!((t.dtype, t.shape.clone()), (DType::F16, vec![2, 37, 16]));
    let cfg = CoreConfig::preset("small").unwrap();
    let a = regflash::sim::random_problem(2, 37, 16, true, OutFormat::Short, 5);
    let (want, _) = a.expected(&CoreParams::from_config(&cfg).unwrap());
    assert_eq!(t.data, want);

    // The reported errors, recomputed here from O and the references: the contract's bound
    // is 2 x plain + one FP16 ulp of max |O_f64| (no looser floor), the relative error is over
    // max |V|.
    let (mut abs, mut plain, mut scale, mut vmax) = (0f64, 0f64, 0f64, 0f64);
    for h in 0..2 {
        let n = 37 * 16;
        let (q, k, v) = (
            &a.q[h * n..(h + 1) * n],
            &a.k[h * n..(h + 1) * n],
            &a.v[h * n..(h + 1) * n],
        );
        let inputs = kernels::reference::Inputs {
            q,
            k,
            v,
            q_len: 37,
            k_len: 37,
            d: 16,
            causal: true,
            format: kernels::format::Format::FP16,
            score_exp: 0,
        };
        let f64_ref = kernels::reference::attention_f64(&inputs);
        let pl = kernels::reference::attention_plain_lowprec(&inputs);
        for (i, &w) in f64_ref.iter().enumerate() {
            let got = half::f16::from_bits(t.data[h * n + i] as u16).to_f64();
            abs = abs.max((got - w).abs());
            plain = plain.max((pl[i] - w).abs());
            scale = scale.max(w.abs());
        }
        for &x in v {
            vmax = vmax.max(half::f16::from_bits(x).to_f64().abs());
        }
    }
    let near = |x: f64, y: f64| (x - y).abs() <= 1e-12 * y.abs();
    assert!(near(r["max_abs_err"].as_f64().unwrap(), abs), "{r}");
    assert!(near(
        r["plain_lowprec_max_abs_err"].as_f64().unwrap(),
        plain
    ));
    assert!(near(r["max_rel_err"].as_f64().unwrap(), abs / vmax));
    let ulp = 2f64.powi(scale.log2().floor() as i32 - 10);
    assert!(near(
        r["max_abs_err_bound"].as_f64().unwrap(),
        2.0 * plain + ulp
    ));
    assert!(abs > 0.0 && abs <= 2.0 * plain + ulp, "{abs} vs {plain}");
}

#[test]
fn sim_reads_npy_inputs_of_either_precision() {
    let dir = ScratchDir::new("cli-sim").unwrap();
    let a = Attention::generate(
        kernels::patterns::Pattern::LargeValues,
        1,
        13,
        21,
        16,
        false,
        OutFormat::F32,
        9,
    );
    let p = |n: &str| dir.path().join(n);
    // Q as FP32 (exactly representable in FP16, so nothing is rounded), K and V as FP16.
    write_tensor(&p("q.npy"), DType::F32, &[13, 16], &a.q);
    write_tensor(&p("k.npy"), DType::F16, &[21, 16], &a.k);
    write_tensor(&p("v.npy"), DType::F16, &[21, 16], &a.v);
    let o = regflash(&[
        "sim",
        "--q",
        p("q.npy").to_str().unwrap(),
        "--k",
        p("k.npy").to_str().unwrap(),
        "--v",
        p("v.npy").to_str().unwrap(),
        "--f32",
        "--out",
        p("o.npy").to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(text(&o).contains("seq 13 (keys 21)"), "{}", text(&o));
    let t = npy::read(&p("o.npy")).unwrap();
    assert_eq!((t.dtype, t.shape.clone()), (DType::F32, vec![13, 16]));
    let cfg = CoreConfig::preset("small").unwrap();
    let (want, _) = a.expected(&CoreParams::from_config(&cfg).unwrap());
    assert_eq!(t.data, want);
}

/// A BF16 design reads `.npy` inputs rounded to BF16 (FP32 and FP16 files alike) and writes
/// its short O as float32 (BF16 values: the low 16 bits zero), equal to the model's; a finite
/// value past BF16's range is refused by name, and `--saturate` clamps it instead.
#[test]
fn sim_reads_npy_inputs_into_a_bf16_design() {
    use hdl::format::Format;
    let dir = ScratchDir::new("cli-sim-bf16").unwrap();
    let a = Attention::generate(
        kernels::patterns::Pattern::Unit,
        1,
        13,
        21,
        16,
        false,
        OutFormat::Short,
        4,
    );
    let p = |n: &str| dir.path().join(n).to_str().unwrap().to_string();
    write_tensor(Path::new(&p("q.npy")), DType::F32, &[13, 16], &a.q);
    write_tensor(Path::new(&p("k.npy")), DType::F16, &[21, 16], &a.k);
    write_tensor(Path::new(&p("v.npy")), DType::F32, &[21, 16], &a.v);
    let (k, v) = (p("k.npy"), p("v.npy"));
    let run = |q: &str, extra: &[&str]| {
        let mut args = vec!["sim", "--in-format", "bf16", "--q", q, "--k", &k, "--v", &v];
        args.extend_from_slice(extra);
        regflash(&args)
    };
    let o = run(&p("q.npy"), &["--out", &p("o.npy")]);
    assert!(
        o.status.success() && text(&o).contains("(inputs bf16)"),
        "{}",
        text(&o)
    );
    let t = npy::read(Path::new(&p("o.npy"))).unwrap();
    assert_eq!((t.dtype, t.shape.clone()), (DType::F32, vec![13, 16]));
    let mut cfg = CoreConfig::preset("small").unwrap();
    cfg.in_format = Format::BF16;
    let (want, _) = a
        .clone()
        .converted(Format::BF16)
        .expected(&CoreParams::from_config(&cfg).unwrap());
    assert_eq!(t.data, want.iter().map(|&b| b << 16).collect::<Vec<_>>());
    // 3.4e38 rounds to BF16's infinity.
    let mut big: Vec<u32> =
        a.q.iter()
            .map(|&b| half::f16::from_bits(b).to_f32().to_bits())
            .collect();
    big[5] = 3.4e38f32.to_bits();
    npy::write(
        Path::new(&p("q_big.npy")),
        &Tensor {
            dtype: DType::F32,
            shape: vec![13, 16],
            data: big,
        },
    )
    .unwrap();
    let o = run(&p("q_big.npy"), &[]);
    assert!(
        !o.status.success()
            && text(&o).contains("element [0, 5] = 3.4e38 is outside the BF16 range")
            && text(&o).contains("outside the BF16 range"),
        "{}",
        text(&o)
    );
    let o = run(&p("q_big.npy"), &["--saturate"]);
    assert!(
        o.status.success()
            && text(&o).contains(
                "1 values outside the BF16 range clamped to its largest finite, ±3.39e38"
            ),
        "{}",
        text(&o)
    );
}

/// FP8 operands end to end as the CLI runs them: the small preset causal at 256 tokens in
/// E4M3 (its beat keeps 16 operands: 128 bits), and each other variant in one of the OCP
/// formats (P in its buffers, links, spill and memory at 8 bits; E5M2 in two): bit-exact
/// against the model, within the contract against f64, the counters the schedule's. The binary16 problems are
/// stored at per-tensor power-of-two scales that fit FP8's range; O written to `.npy` is
/// float32, V's scale taken back: values of the format times 2^−v.
#[test]
fn sim_runs_fp8_operands_on_every_variant() {
    use hdl::format::Format;
    let dir = ScratchDir::new("cli-sim-fp8").unwrap();
    let (out, report) = (dir.path().join("o.npy"), dir.path().join("r.json"));
    let runs: [(&str, Format, &[&str]); 5] = [
        ("fp8e4m3", Format::FP8_E4M3, &["--seq", "256", "--causal"]),
        (
            "fp8e5m2",
            Format::FP8_E5M2,
            &["--seq", "40", "--variant", "buf2d"],
        ),
        (
            "fp8e4m3",
            Format::FP8_E4M3,
            &["--seq", "40", "--variant", "reg3d", "--tiers", "3"],
        ),
        (
            "fp8e5m2",
            Format::FP8_E5M2,
            &[
                "--seq",
                "40",
                "--variant",
                "rowfused",
                "--spill",
                "--row-keys",
                "16",
            ],
        ),
        (
            "fp8e4m3",
            Format::FP8_E4M3,
            &["--seq", "40", "--causal", "--variant", "unfused"],
        ),
    ];
    for (key, f, extra) in runs {
        let mut args = vec!["sim", "--in-format", key, "--preset", "small"];
        args.extend_from_slice(extra);
        args.extend_from_slice(&["--out", out.to_str().unwrap()]);
        args.extend_from_slice(&["--report", report.to_str().unwrap()]);
        let o = regflash(&args);
        let t = text(&o);
        assert!(
            o.status.success() && t.contains("PASS") && t.contains(&format!("(inputs {key}, ")),
            "{args:?}: {t}"
        );
        let r: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
        let v = r["operand_scales"][2].as_i64().unwrap() as i32;
        // The largest |V| of the problems (about 1) lands in the format's top binade.
        let top = 2f64.powi(v);
        assert!(
            top * 0.5 <= f.max_finite() && top * 2.0 > f.max_finite() / 4.0,
            "{v}"
        );
        let o = npy::read(&out).unwrap();
        assert_eq!(o.dtype, DType::F32, "{args:?}");
        for &x in &o.data {
            let x = (f32::from_bits(x) * 2f32.powi(v)).to_bits();
            let y = kernels::fp::convert(x as u64, Format::FP32, f);
            assert_eq!(
                kernels::fp::widen(y as u16, f),
                x,
                "{x:#x} is not a {f:?} value"
            );
        }
    }
}

/// `.npy` inputs past FP8's range (V about 1,000 times larger than E4M3's largest value) are
/// stored at their per-tensor scales, not refused: O, with V's scale taken back, is within FP8's
/// error of f64 attention on the files' own values, computed here.
#[test]
fn sim_scales_npy_inputs_into_fp8() {
    let dir = ScratchDir::new("cli-sim-fp8-npy").unwrap();
    let p = |n: &str| dir.path().join(n).to_str().unwrap().to_string();
    let (len, d) = (30, 16);
    let mut rng = kernels::patterns::Rng(0x5EED);
    let mut tensor = |scale: f32| -> Vec<f32> {
        (0..len * d)
            .map(|_| ((rng.next_u64() >> 40) as f32 / (1u64 << 24) as f32 - 0.5) * scale)
            .collect()
    };
    let (q, k, v) = (tensor(2.0), tensor(2.0), tensor(8e5));
    for (name, t) in [("q.npy", &q), ("k.npy", &k), ("v.npy", &v)] {
        let data = t.iter().map(|x| x.to_bits()).collect();
        let shape = vec![len, d];
        npy::write(
            Path::new(&p(name)),
            &Tensor {
                dtype: DType::F32,
                shape,
                data,
            },
        )
        .unwrap();
    }
    let (qp, kp, vp, op) = (p("q.npy"), p("k.npy"), p("v.npy"), p("o.npy"));
    let args = [
        "sim",
        "--in-format",
        "fp8e4m3",
        "--q",
        &qp,
        "--k",
        &kp,
        "--v",
        &vp,
        "--out",
        &op,
    ];
    let o = regflash(&args);
    assert!(
        o.status.success() && text(&o).contains("PASS"),
        "{}",
        text(&o)
    );
    let wide = |t: &[f32]| t.iter().map(|&x| x as f64).collect::<Vec<_>>();
    let want = kernels::reference::attention_f64_values(
        &wide(&q),
        &wide(&k),
        &wide(&v),
        len,
        len,
        d,
        false,
    );
    let got = npy::read(Path::new(&op)).unwrap();
    let max_v = v.iter().fold(0f32, |m, x| m.max(x.abs())) as f64;
    let err = got
        .data
        .iter()
        .zip(&want)
        .map(|(&g, &w)| (f32::from_bits(g) as f64 - w).abs())
        .fold(0.0, f64::max);
    // E4M3 holds 4 significant bits: a few of its unit roundoffs (2^-4) of max |V|.
    assert!(
        err / max_v < 0.1,
        "max |O - O_f64| / max |V| = {}",
        err / max_v
    );
}

/// The hardware model's O of one head, computed here from the head's own rows: what the
/// tests below hold the CLI's grouping and packing against.
fn model_head(q: &[u16], k: &[u16], v: &[u16], causal: bool) -> Vec<u32> {
    let p = CoreParams::from_config(&CoreConfig::preset("small").unwrap()).unwrap();
    let d = 16;
    let cfg = kernels::flash::FlashConfig {
        br: p.br() as usize,
        bc: p.bc() as usize,
        head_dim: d,
        cols: p.row.cols as usize,
        causal,
        out: OutFormat::Short,
        softmax: kernels::flash::SoftmaxPass::Online,
        operand: kernels::format::Format::FP16,
    };
    let problem = kernels::flash::Problem {
        q,
        k,
        v,
        q_len: q.len() / d,
        k_len: k.len() / d,
        score_exp: 0,
    };
    kernels::flash::flash_attention(&problem, &cfg).0
}

/// Writes `q`, `k`, `v` (FP16 bits, shaped as given) into `dir`, runs `sim` on them with
/// `args`, expects PASS, and returns its text, its JSON report (bit-exact) and its O.
fn sim_files(
    dir: &ScratchDir,
    tensors: [(&[usize], &[u16]); 3],
    args: &[&str],
) -> (String, serde_json::Value, npy::Tensor) {
    let p = |n: &str| dir.path().join(n).to_str().unwrap().to_string();
    let mut all: Vec<String> = vec!["sim".into()];
    for (name, (shape, data)) in ["q", "k", "v"].into_iter().zip(tensors) {
        let file = p(&format!("{name}.npy"));
        write_tensor(Path::new(&file), DType::F16, shape, data);
        all.extend([format!("--{name}"), file]);
    }
    all.extend(["--out".into(), p("o.npy"), "--report".into(), p("r.json")]);
    all.extend(args.iter().map(|a| a.to_string()));
    let o = regflash(&all.iter().map(String::as_str).collect::<Vec<_>>());
    let t = text(&o);
    assert!(o.status.success() && t.contains("PASS"), "{t}");
    let r: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(p("r.json")).unwrap()).unwrap();
    assert_eq!(r["bit_exact"], true);
    (t, r, npy::read(Path::new(&p("o.npy"))).unwrap())
}

/// Runs `sim` with `args`, expects it to fail with `want` in its output, and returns the
/// output (prefixed with the arguments, for the caller's own checks).
fn sim_refuses(args: Vec<String>, want: &str) -> String {
    let mut all = vec!["sim".to_string()];
    all.extend(args);
    let all: Vec<&str> = all.iter().map(String::as_str).collect();
    let o = regflash(&all);
    let t = text(&o);
    assert!(!o.status.success(), "{all:?} succeeded: {t}");
    assert!(t.contains(want), "{all:?}: expected `{want}` in: {t}");
    format!("{all:?}: {t}")
}

/// (heads, K/V heads, q_len, k_len, d) of [`grouped_problem`].
const GQA: (usize, usize, usize, usize, usize) = (4, 2, 9, 12, 16);

/// A causal grouped-query problem of [`GQA`]'s shape, unit pattern, from `seed`.
fn grouped_problem(seed: u64) -> Attention {
    let (heads, kv, q_len, k_len, d) = GQA;
    Attention::generate(
        kernels::patterns::Pattern::Unit,
        heads,
        q_len,
        k_len,
        d,
        true,
        OutFormat::Short,
        seed,
    )
    .grouped(kv)
}

/// K and V from files with fewer heads than Q: grouped-query attention, Q head h on K/V head
/// h / 2, bit-exact. Random memory stalls make the seed count.
#[test]
fn sim_reads_grouped_query_npy_inputs() {
    let dir = ScratchDir::new("cli-sim-gqa").unwrap();
    let (heads, kv, q_len, k_len, d) = GQA;
    let a = grouped_problem(3);
    let (t, r, out) = sim_files(
        &dir,
        [
            (&[heads, q_len, d], &a.q),
            (&[kv, k_len, d], &a.k),
            (&[kv, k_len, d], &a.v),
        ],
        &["--causal", "--mem-stall", "0.2", "--seed", "7"],
    );
    assert!(t.contains("4 head(s) sharing 2 K/V head(s)"), "{t}");
    assert_eq!(
        (r["heads"].as_u64(), r["kv_heads"].as_u64()),
        (Some(4), Some(2))
    );
    assert_eq!(out.shape, vec![heads, q_len, d]);
    let (qs, ks) = (q_len * d, k_len * d);
    for h in 0..heads {
        let g = h / (heads / kv);
        let want = model_head(
            &a.q[h * qs..(h + 1) * qs],
            &a.k[g * ks..(g + 1) * ks],
            &a.v[g * ks..(g + 1) * ks],
            true,
        );
        assert_eq!(out.data[h * qs..(h + 1) * qs], want, "head {h}");
    }
}

/// A varlen batch from files: Q (2 heads) and K, V (one head, given as (rows, d)) hold the
/// sequences' rows one after the other; each sequence is its own causal problem, and O comes
/// back packed like Q.
#[test]
fn sim_reads_a_varlen_batch_from_npy_inputs() {
    let dir = ScratchDir::new("cli-sim-varlen").unwrap();
    let (heads, d) = (2, 16);
    let (q_lens, k_lens) = ([3, 4], [5, 4]);
    let a = Attention::generate(
        kernels::patterns::Pattern::Unit,
        heads,
        7,
        9,
        d,
        true,
        OutFormat::Short,
        11,
    )
    .grouped(1);
    let (t, r, out) = sim_files(
        &dir,
        [(&[heads, 7, d], &a.q), (&[9, d], &a.k), (&[9, d], &a.v)],
        &["--seqlens", "3,4", "--kv-seqlens", "5,4", "--causal"],
    );
    assert!(t.contains("varlen batch of 2 (3/5, 4)"), "{t}");
    assert_eq!(r["seqlens"], serde_json::json!([[3, 5], [4, 4]]));
    assert_eq!(
        (r["heads"].as_u64(), r["kv_heads"].as_u64()),
        (Some(2), Some(1))
    );
    assert_eq!(out.shape, vec![heads, 7, d]);
    let (mut q0, mut k0) = (0, 0);
    for (&ql, &kl) in q_lens.iter().zip(&k_lens) {
        let keys = k0 * d..(k0 + kl) * d;
        for h in 0..heads {
            let rows = (h * 7 + q0) * d..(h * 7 + q0 + ql) * d;
            let want = model_head(
                &a.q[rows.clone()],
                &a.k[keys.clone()],
                &a.v[keys.clone()],
                true,
            );
            assert_eq!(out.data[rows], want, "sequence at row {q0}, head {h}");
        }
        (q0, k0) = (q0 + ql, k0 + kl);
    }
}

/// O mirrors Q's file: a (1, seq, d) Q gives a (1, seq, d) O, not (seq, d), whatever K and V
/// are shaped (a (seq, d) Q gives (seq, d): `sim_reads_npy_inputs_of_either_precision`).
#[test]
fn sim_writes_o_shaped_like_q() {
    let dir = ScratchDir::new("cli-sim-rank").unwrap();
    let (q_len, k_len, d) = (11, 6, 16);
    let a = Attention::generate(
        kernels::patterns::Pattern::Unit,
        1,
        q_len,
        k_len,
        d,
        false,
        OutFormat::Short,
        2,
    );
    let (_, _, out) = sim_files(
        &dir,
        [
            (&[1, q_len, d], &a.q),
            (&[k_len, d], &a.k),
            (&[k_len, d], &a.v),
        ],
        &[],
    );
    assert_eq!(out.shape, vec![1, q_len, d]);
    assert_eq!(out.data, model_head(&a.q, &a.k, &a.v, false));
}

/// `t`, (a, b, d) row-major, as (b, a, d).
fn swap_axes<T: Copy>(t: &[T], a: usize, b: usize, d: usize) -> Vec<T> {
    (0..b)
        .flat_map(|j| (0..a).map(move |i| (i * b + j) * d))
        .flat_map(|at| t[at..at + d].iter().copied())
        .collect()
}

/// `--layout bshd` reads 3-D files as (seq, heads, d) and writes O so: the same values given
/// as bhsd (heads, seq, d) files give, transposed, the same O bit for bit (K and V with
/// fewer heads than Q, so their axes count too). A varlen batch of bshd files holds its
/// sequences one after the other along seq, and so does its O.
#[test]
fn sim_reads_and_writes_bshd_files_as_seq_heads_d() {
    let dir = ScratchDir::new("cli-sim-bshd").unwrap();
    let (heads, kv, q_len, k_len, d) = GQA;
    let a = grouped_problem(8);
    let (_, _, bhsd) = sim_files(
        &dir,
        [
            (&[heads, q_len, d], &a.q),
            (&[kv, k_len, d], &a.k),
            (&[kv, k_len, d], &a.v),
        ],
        &["--causal"],
    );
    let (q, k, v) = (
        swap_axes(&a.q, heads, q_len, d),
        swap_axes(&a.k, kv, k_len, d),
        swap_axes(&a.v, kv, k_len, d),
    );
    let files: [(&[usize], &[u16]); 3] = [
        (&[q_len, heads, d], &q),
        (&[k_len, kv, d], &k),
        (&[k_len, kv, d], &v),
    ];
    let (t, _, bshd) = sim_files(&dir, files, &["--causal", "--layout", "bshd"]);
    assert!(t.contains("layout bshd"), "{t}");
    assert_eq!(bshd.shape, vec![q_len, heads, d]);
    assert_eq!(swap_axes(&bshd.data, q_len, heads, d), bhsd.data);

    let (q_lens, k_lens) = ([4, 5], [7, 5]);
    let (_, _, varlen) = sim_files(
        &dir,
        files,
        &[
            "--causal",
            "--layout",
            "bshd",
            "--seqlens",
            "4,5",
            "--kv-seqlens",
            "7,5",
        ],
    );
    assert_eq!(varlen.shape, vec![q_len, heads, d]);
    let o = swap_axes(&varlen.data, q_len, heads, d);
    let (mut q0, mut k0) = (0, 0);
    for (&ql, &kl) in q_lens.iter().zip(&k_lens) {
        for h in 0..heads {
            let g = h / (heads / kv);
            let rows = (h * q_len + q0) * d..(h * q_len + q0 + ql) * d;
            let keys = (g * k_len + k0) * d..(g * k_len + k0 + kl) * d;
            let want = model_head(&a.q[rows.clone()], &a.k[keys.clone()], &a.v[keys], true);
            assert_eq!(o[rows], want, "sequence at row {q0}, head {h}");
        }
        (q0, k0) = (q0 + ql, k0 + kl);
    }
}

/// A flag the run would not use is refused with the reason, before any model is built; so
/// are GQA shapes that do not divide and varlen lengths that do not add up to the files' rows.
#[test]
fn sim_refuses_flags_it_would_ignore() {
    let dir = ScratchDir::new("cli-sim-flags").unwrap();
    let p = |n: &str| dir.path().join(n).to_str().unwrap().to_string();
    let ones = vec![0x3c00u16; 3 * 7 * 16];
    write_tensor(
        Path::new(&p("q.npy")),
        DType::F16,
        &[2, 7, 16],
        &ones[..2 * 7 * 16],
    );
    write_tensor(Path::new(&p("q3.npy")), DType::F16, &[3, 7, 16], &ones);
    write_tensor(
        Path::new(&p("k.npy")),
        DType::F16,
        &[2, 7, 16],
        &ones[..2 * 7 * 16],
    );
    let (q, q3, k) = (p("q.npy"), p("q3.npy"), p("k.npy"));
    let files = |q: &str| {
        vec![
            "--q".to_string(),
            q.into(),
            "--k".into(),
            k.clone(),
            "--v".into(),
            k.clone(),
        ]
    };
    let with = |extra: &[&str], q: &str| {
        let mut v: Vec<String> = extra.iter().map(|s| s.to_string()).collect();
        v.extend(files(q));
        v
    };
    let cases: Vec<(Vec<String>, &str)> = vec![
        (with(&["--seq", "5"], &q), "--seq applies to random inputs"),
        (
            with(&["--heads", "2"], &q),
            "--heads applies to random inputs",
        ),
        (with(&["--kv-heads", "1"], &q), "leave --kv-heads out"),
        (
            with(&["--seqlens", "3,4", "--kv-heads", "1"], &q),
            "leave --kv-heads out",
        ),
        (with(&["--seed", "3"], &q), "nothing is random"),
        (
            with(&["--kv-seqlens", "3,4"], &q),
            "required arguments were not provided",
        ),
        (
            vec!["--seqlens".into(), "3,4".into(), "--seq".into(), "9".into()],
            "--seq is the length of one problem",
        ),
        (
            vec!["--saturate".into()],
            "--saturate clamps FP32 values of .npy inputs",
        ),
        (
            with(&["--seqlens", "3,3"], &q),
            "the query lengths add up to 6 rows but Q holds 7",
        ),
        (
            with(&["--seqlens", "3,4", "--kv-seqlens", "4,4"], &q),
            "the key lengths add up to 8 rows but K and V hold 7",
        ),
        (
            with(&[], &q3),
            "Q has 3 head(s) and K and V 2: the K/V heads must divide the query heads",
        ),
    ];
    for (args, want) in cases {
        let t = sim_refuses(args, want);
        assert!(!t.contains("building the Verilator model"), "{t}");
    }
}

#[test]
fn sim_and_bench_refuse_bad_input_clearly() {
    let dir = ScratchDir::new("cli-sim").unwrap();
    let p = |n: &str| dir.path().join(n).to_str().unwrap().to_string();
    let ok = vec![0x3c00u16; 10 * 16];
    write_tensor(Path::new(&p("q.npy")), DType::F16, &[10, 16], &ok);
    write_tensor(Path::new(&p("k.npy")), DType::F16, &[10, 16], &ok);
    write_tensor(Path::new(&p("v9.npy")), DType::F16, &[9, 16], &ok[..9 * 16]);
    write_tensor(Path::new(&p("q32.npy")), DType::F16, &[5, 32], &ok);
    write_tensor(Path::new(&p("q1d.npy")), DType::F16, &[160], &ok);
    std::fs::write(p("junk.npy"), b"not a numpy file").unwrap();
    // FP32 beyond FP16's range (1e6 at Q[0, 3, 5]): refused, not turned into Inf.
    let mut big = vec![0x3c00u16; 10 * 16];
    big[3 * 16 + 5] = 0x7bff;
    let mut data: Vec<u32> = big
        .iter()
        .map(|&b| half::f16::from_bits(b).to_f32().to_bits())
        .collect();
    data[3 * 16 + 5] = 1e6f32.to_bits();
    npy::write(
        Path::new(&p("q_big.npy")),
        &Tensor {
            dtype: DType::F32,
            shape: vec![1, 10, 16],
            data,
        },
    )
    .unwrap();
    let cases: Vec<(Vec<String>, &str)> = vec![
        (
            vec!["--q", &p("q.npy"), "--k", &p("k.npy"), "--v", &p("v9.npy")],
            "K has shape [10, 16] but V has shape [9, 16]",
        ),
        (
            vec!["--q", &p("q32.npy"), "--k", &p("k.npy"), "--v", &p("k.npy")],
            "the head dimension (the last axis) must match",
        ),
        (
            vec![
                "--q",
                &p("q32.npy"),
                "--k",
                &p("q32.npy"),
                "--v",
                &p("q32.npy"),
            ],
            "head_dim = 16",
        ),
        (
            vec!["--q", &p("q1d.npy"), "--k", &p("k.npy"), "--v", &p("k.npy")],
            "has shape [160]; with --layout bhsd expected (seq, d) or (heads, seq, d)",
        ),
        (
            vec![
                "--layout",
                "bshd",
                "--q",
                &p("q1d.npy"),
                "--k",
                &p("k.npy"),
                "--v",
                &p("k.npy"),
            ],
            "has shape [160]; with --layout bshd expected (seq, d) or (seq, heads, d)",
        ),
        (
            vec![
                "--q",
                &p("junk.npy"),
                "--k",
                &p("k.npy"),
                "--v",
                &p("k.npy"),
            ],
            "Q input",
        ),
        (
            vec![
                "--q",
                &p("missing.npy"),
                "--k",
                &p("k.npy"),
                "--v",
                &p("k.npy"),
            ],
            "missing.npy",
        ),
        (
            vec![
                "--q",
                &p("q_big.npy"),
                "--k",
                &p("k.npy"),
                "--v",
                &p("k.npy"),
            ],
            "element [0, 3, 5] = 1e6 is outside the FP16 range",
        ),
        (vec!["--seq", "0"], "--seq must be at least 1"),
        (
            vec!["--seq", "99999999999"],
            "does not fit the core's 16-bit index registers",
        ),
        (
            vec!["--heads", "99999999999"],
            "heads = 99999999999 does not fit",
        ),
        (
            vec!["--seq", "60000", "--heads", "5000"],
            "more than the core's 32-bit addresses reach",
        ),
        (
            vec!["--report", "/nonexistent-folder/r.json"],
            "folder /nonexistent-folder does not exist",
        ),
        (vec!["--out", &p("")], "it is a folder"),
        (
            vec!["--mem-stall", "1.5"],
            "--mem-stall must be in [0, 0.95)",
        ),
        (vec!["--preset", "tiny"], "unknown preset `tiny`"),
        // A waveform scope that is no instance path: refused before the build, with the
        // instances where the path leaves the design (the DMA is under the engine).
        (
            vec!["--waves", &p("w.vcd"), "--wave-scope", "u_dma"],
            "has no instance `u_dma`; its instances are u_engine",
        ),
        // rowfused's rows: its knob on another variant, and a row longer than they hold.
        (
            vec!["--row-keys", "64"],
            "--row-keys applies to rowfused only",
        ),
        (
            vec!["--variant", "rowfused", "--row-keys", "64", "--seq", "65"],
            "raise keys to 128 or more",
        ),
        // Its spill on another variant.
        (vec!["--spill"], "--spill applies to rowfused only"),
    ]
    .into_iter()
    .map(|(args, want)| (args.into_iter().map(String::from).collect(), want))
    .collect();
    for (args, want) in cases {
        let t = sim_refuses(args, want);
        assert!(!t.contains("panicked"), "{t}");
    }
    // --saturate clamps instead, and the report counts what it clamped.
    let r = p("sat.json");
    let o = regflash(&[
        "sim",
        "--q",
        &p("q_big.npy"),
        "--k",
        &p("k.npy"),
        "--v",
        &p("k.npy"),
        "--saturate",
        "--report",
        &r,
    ]);
    assert!(
        o.status.success() && text(&o).contains("FP16 range clamped to its largest finite, ±65504"),
        "{}",
        text(&o)
    );
    let j: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&r).unwrap()).unwrap();
    assert_eq!(j["saturated_inputs"], 1);
    let o = regflash(&["bench", "--presets", "small", "--seq", "99999999"]);
    assert!(!o.status.success() && text(&o).contains("small at seq 99999999"));
    let o = regflash(&["bench", "--presets", "small,huge"]);
    assert!(!o.status.success() && text(&o).contains("unknown preset `huge`"));
    let o = regflash(&["bench", "--config", &p("missing.toml")]);
    assert!(!o.status.success() && text(&o).contains("cannot read config file"));
}

#[test]
fn bench_tables_causal_against_non_causal() {
    let dir = ScratchDir::new("cli-bench").unwrap();
    let md = dir.path().join("b.md");
    let path = |n: &str| dir.path().join(n).to_str().unwrap().to_string();
    // A config file (here the small preset's own) runs like a preset.
    let small_toml = concat!(env!("CARGO_MANIFEST_DIR"), "/presets/small.toml");
    let bench = |extra: &[&str]| {
        let mut args = vec!["bench", "--config", small_toml, "--seq", "20,64"];
        args.extend_from_slice(extra);
        regflash(&args)
    };
    let o = bench(&["--out", md.to_str().unwrap(), "--report", &path("all.json")]);
    assert!(o.status.success(), "{}", text(&o));
    // Shards run one after another and merged equal the unsharded run, byte for byte.
    for (i, name) in [(0, "s0.json"), (1, "s1.json")] {
        let o = bench(&["--shard", &format!("{i}/2"), "--report", &path(name)]);
        assert!(o.status.success(), "{}", text(&o));
    }
    let o = regflash(&[
        "merge",
        &path("s1.json"),
        &path("s0.json"),
        "--report",
        &path("merged.json"),
        "--out",
        &path("merged.md"),
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let read = |n: &str| std::fs::read_to_string(dir.path().join(n)).unwrap();
    assert_eq!(read("merged.json"), read("all.json"));
    assert_eq!(read("merged.md"), read("b.md"));
    // A missing or repeated shard, and a malformed one, are refused with the reason.
    for (args, why) in [
        (
            vec!["merge", &path("s0.json") as &str],
            "a shard is missing",
        ),
        (
            vec![
                "merge",
                &path("s0.json"),
                &path("s0.json"),
                &path("s1.json"),
            ],
            "given twice",
        ),
        (vec!["bench", "--shard", "2/2"], "0 <= i < n"),
        (
            vec!["merge", small_toml],
            "is not a `regflash bench --report` or `regflash verify --report` file",
        ),
    ] {
        let o = regflash(&args);
        assert!(
            !o.status.success() && text(&o).contains(why),
            "{args:?}: {}",
            text(&o)
        );
    }
    let table = std::fs::read_to_string(&md).unwrap();
    let rows: Vec<&str> = table.lines().filter(|l| l.starts_with("| small")).collect();
    assert_eq!(rows.len(), 4, "{table}");
    for (row, (seq, causal)) in rows
        .iter()
        .zip([(20, "no"), (20, "yes"), (64, "no"), (64, "yes")])
    {
        let cells: Vec<&str> = row.split('|').map(str::trim).collect();
        assert_eq!(
            (cells[2], cells[5], cells[6]),
            ("reg2d", seq.to_string().as_str(), causal),
            "{row}"
        );
        assert_eq!(cells[17], "yes", "not bit-exact: {row}");
        // reg2d moves no S through a buffer.
        assert_eq!(cells[15], "0", "{row}");
        // Causal rows carry the ratio of their cycles to the non-causal run's, below 1.
        if causal == "yes" {
            let ratio: f64 = cells[10].parse().unwrap();
            assert!(ratio > 0.3 && ratio < 1.0, "{row}");
        } else {
            assert_eq!(cells[10], "", "{row}");
        }
    }
}

/// `verify --shard i/n` checks its share of the blocks; merged, the shards equal the
/// unsharded run (but for wall-clock seconds), and a missing shard is refused.
#[test]
fn verify_shards_merge_into_the_whole_run() {
    let dir = ScratchDir::new("cli-verify-shards").unwrap();
    let path = |n: &str| dir.path().join(n).to_str().unwrap().to_string();
    let verify = |extra: &[&str]| {
        let mut args = vec![
            "verify",
            "--unit",
            "fp_cvt_e5m10_e8m23",
            "--unit",
            "fp_max_e8m23",
            "--unit",
            "mask_gen",
            "--vectors",
            "300",
        ];
        args.extend_from_slice(extra);
        regflash(&args)
    };
    let o = verify(&["--report", &path("all.json")]);
    assert!(o.status.success(), "{}", text(&o));
    for i in 0..2 {
        let o = verify(&[
            "--shard",
            &format!("{i}/2"),
            "--report",
            &path(&format!("s{i}.json")),
        ]);
        assert!(o.status.success(), "{}", text(&o));
    }
    let o = regflash(&[
        "merge",
        &path("s0.json"),
        &path("s1.json"),
        "--report",
        &path("m.json"),
    ]);
    assert!(
        o.status.success() && text(&o).contains("PASS"),
        "{}",
        text(&o)
    );
    // Wall-clock seconds differ from run to run; everything else is the same.
    let load = |n: &str| {
        let mut v: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(dir.path().join(n)).unwrap()).unwrap();
        for b in v["blocks"].as_array_mut().unwrap() {
            if let Some(c) = b["check"].as_object_mut() {
                c.remove("sim_seconds");
                c.remove("build_seconds");
            }
        }
        v
    };
    let (all, merged) = (load("all.json"), load("m.json"));
    assert_eq!(all["blocks"].as_array().unwrap().len(), 3);
    assert_eq!(all, merged);
    let o = regflash(&["merge", &path("s1.json")]);
    assert!(
        !o.status.success() && text(&o).contains("a shard is missing"),
        "{}",
        text(&o)
    );
    let o = regflash(&["merge", &path("s1.json"), &path("all.json")]);
    assert!(
        !o.status.success() && text(&o).contains("given twice"),
        "{}",
        text(&o)
    );
}

/// `regflash estimate`: exact where it steps (the RTL's figure on README's front page), extrapolated beyond with
/// the probes named, registers widened with a note for lengths the preset's cannot index, and
/// bad input refused.
#[test]
fn estimate_reports_long_sequences() {
    let dir = ScratchDir::new("cli-estimate").unwrap();
    let report = dir.path().join("e.json");
    let o = regflash(&[
        "estimate",
        "--seq",
        "256,131072",
        "--report",
        report.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(text(&o).contains("index_bits"), "{}", text(&o));
    let r: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    let points = r.as_array().unwrap();
    assert_eq!(points.len(), 2);
    // The RTL's figure on README's front page: small at seq 256, non-causal.
    assert_eq!(points[0]["cycles"], 132_293);
    assert!(points[0]["method"].as_str().unwrap().starts_with("exact"));
    let long = &points[1];
    assert!(long["method"]
        .as_str()
        .unwrap()
        .starts_with("extrapolated from exact runs"));
    let u = long["utilization"].as_f64().unwrap();
    assert!(u > 0.99 && u <= 1.0, "{u}");
    let e = &long["energy"];
    let sum: f64 = e["components_pj"]
        .as_object()
        .unwrap()
        .values()
        .map(|v| v.as_f64().unwrap())
        .sum();
    assert!((sum - e["total_pj"].as_f64().unwrap()).abs() <= 1e-9 * sum);
    for (args, why) in [
        (vec!["estimate", "--seq", "0"], "at least 1"),
        (vec!["estimate", "--heads", "0"], "--heads"),
        (vec!["estimate", "--lib", "asap7"], "add --clock synth"),
        (vec!["estimate", "--clock", "fast"], "invalid value 'fast'"),
        (vec!["estimate", "--seq", "4000000000"], "index registers"),
    ] {
        let o = regflash(&args);
        assert!(
            !o.status.success() && text(&o).contains(why),
            "{args:?}: {}",
            text(&o)
        );
    }
}
