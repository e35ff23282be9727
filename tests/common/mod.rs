//! Helpers shared by the integration tests.
#![allow(dead_code)]

use hdl::config::CoreConfig;

/// The `small` preset with the given FP latencies.
pub fn small(mul_latency: u32, add_latency: u32) -> CoreConfig {
    let mut c = CoreConfig::preset("small").unwrap();
    c.mul_latency = mul_latency;
    c.add_latency = add_latency;
    c
}

/// Proptest cases per pure block and run: one vector each.
pub const CASES: u32 = 200_000;

/// Runs the `regflash` binary with `args`.
pub fn regflash(args: &[&str]) -> std::process::Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_regflash"))
        .args(args)
        .output()
        .expect("the regflash binary runs")
}

/// What a run printed, standard output then standard error.
pub fn text(o: &std::process::Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// A block's bench: `d` (its top `top`) written out, linted clean under `-Wall`, synthesized
/// (generic cells) without a latch or a Yosys problem, and built under Verilator.
pub fn block_bench(
    d: &hdl::Design,
    top: &str,
    test: &str,
) -> (verilator_tb::Model, gen::tools::ScratchDir) {
    let dir = gen::tools::ScratchDir::new(test).unwrap();
    let spec = gen::OutputSpec::new(d, top, serde_json::json!({ "test": test }));
    gen::write_design(&spec, dir.path()).unwrap();
    let report = gen::flow::lint(dir.path()).unwrap();
    assert!(report.passed(), "{}", report.summary());
    let synth =
        gen::flow::synth(dir.path(), gen::constraints::SynthTarget::Generic, false).unwrap();
    assert_eq!(synth.latches, 0);
    assert!(
        synth.yosys_problems.is_empty(),
        "{:?}",
        synth.yosys_problems
    );
    (verilator_tb::Model::build(dir.path()).unwrap(), dir)
}
