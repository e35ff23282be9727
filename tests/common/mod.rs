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
