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
    let vars: Vec<&str> = text.lines().filter(|l| l.contains("$var")).collect();
    assert!(text.contains("$scope module u_mul"), "{text}");
    assert!(
        !text.contains("$scope module u_add") && !vars.iter().any(|v| v.contains(" acc_d1_q ")),
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
