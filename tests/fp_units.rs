//! Every FP unit's Verilog under Verilator against its bit-exact Rust model: directed special
//! values (all pairs / triples, exhaustive sweeps where the space allows) and 200,000
//! proptest-generated biased vectors per unit (one proptest case each, so a failure
//! shrinks to a minimal vector), at the shortest and longest pipeline.

mod common;

use common::*;
use regflash::verify::pure::{check_stream, proptest_vectors};
use regflash::verify::units::{directed, pure_unit, strategy};

fn check_unit(name: &str, mul_latency: u32, add_latency: u32, seed: u64) {
    let cfg = small(mul_latency, add_latency);
    let (model, latency) = unit_model(&cfg, name);
    let unit = pure_unit(name).unwrap();
    let mut dut = model.dut().unwrap();

    let vectors = directed(name);
    assert!(!vectors.is_empty());
    if let Err(m) = check_stream(&mut dut, unit, latency, &vectors).unwrap() {
        panic!("directed vectors:\n{m}");
    }

    let checked = proptest_vectors(&mut dut, unit, latency, strategy(name), CASES, seed)
        .unwrap_or_else(|e| panic!("{e:#}"));
    assert_eq!(checked, CASES as u64, "every generated vector was checked");
    eprintln!(
        "{name} (latency {latency}): {} directed + {checked} random vectors match the model",
        vectors.len()
    );
}

#[test]
fn fp16_mul_combinational() {
    check_unit("fp16_mul", 0, 0, 1);
}

#[test]
fn fp16_mul_two_stage() {
    check_unit("fp16_mul", 2, 0, 2);
}

#[test]
fn fp32_add_combinational() {
    check_unit("fp32_add", 0, 0, 3);
}

#[test]
fn fp32_add_two_stage() {
    check_unit("fp32_add", 0, 2, 4);
}

#[test]
fn fp16_to_fp32_exhaustive_and_random() {
    check_unit("fp16_to_fp32", 0, 0, 5);
}

#[test]
fn fp32_to_fp16_boundaries_and_random() {
    check_unit("fp32_to_fp16", 0, 0, 6);
}

#[test]
fn mac_as_the_pe_uses_it() {
    check_unit("mac", 1, 1, 7);
}

#[test]
fn mac_combinational() {
    check_unit("mac", 0, 0, 8);
}
