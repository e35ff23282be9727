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
