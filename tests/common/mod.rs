//! Helpers shared by the integration tests.
#![allow(dead_code)]

use hdl::config::CoreConfig;
use regflash::design::{simulate, Target};
use verilator_tb::Model;

/// The `small` preset with the given FP latencies.
pub fn small(mul_latency: u32, add_latency: u32) -> CoreConfig {
    let mut c = CoreConfig::preset("small").unwrap();
    c.mul_latency = mul_latency;
    c.add_latency = add_latency;
    c
}

/// Builds unit `name` of `cfg`; returns the model and the top's latency.
pub fn unit_model(cfg: &CoreConfig, name: &str) -> (Model, u32) {
    let (model, manifest) = simulate(cfg, &Target::Unit(name.into()))
        .unwrap_or_else(|e| panic!("cannot build `{name}`: {e:#}"));
    let latency = manifest.top_module().latency;
    (model, latency)
}

/// Proptest cases per pure block and run: one vector each.
pub const CASES: u32 = 200_000;
