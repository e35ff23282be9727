//! Every FP unit's Verilog under Verilator against its bit-exact Rust model: directed special
//! values (all pairs / triples, exhaustive sweeps where the space allows) streamed back to back,
//! and 200,000 proptest-generated biased vectors per unit (one proptest case each, so a failure
//! shrinks to a minimal vector), at the shortest and longest pipeline. binary16, bfloat16 and
//! the two OCP FP8 formats' operands.

mod common;

use common::*;
use regflash::verify::run::verify_pure;

fn check_unit(name: &str, mul_latency: u32, add_latency: u32, seed: u64) {
    let r = verify_pure(&small(mul_latency, add_latency), name, CASES, seed)
        .unwrap_or_else(|e| panic!("{e:#}"));
    assert!(r.directed_vectors > 0);
    assert_eq!(
        r.random_vectors,
        regflash::verify::seeds::total_cases(CASES),
        "every generated vector was checked"
    );
    assert!(r.sim_cycles >= r.directed_vectors + r.random_vectors);
    eprintln!(
        "{} ({}, latency {}): {} directed + {} random vectors match the model",
        name, r.module, r.latency, r.directed_vectors, r.random_vectors
    );
}

#[test]
fn fp16_mul_combinational() {
    check_unit("fp_mul_e5m10", 0, 0, 1);
}

/// Every cut: the operands, the partial products' carry-save pair, their sum, the output.
#[test]
fn fp16_mul_deepest() {
    check_unit("fp_mul_e5m10", 4, 0, 2);
}

#[test]
fn fp32_add_combinational() {
    check_unit("fp_add_e8m23", 0, 0, 3);
}

#[test]
fn fp32_add_two_stage() {
    check_unit("fp_add_e8m23", 0, 2, 4);
}

/// The adder's deeper pipelines (cuts after normalization, after the sum, before the
/// alignment shift and after the leading-zero count), binary32 and the wide form, on a tile
/// whose accumulators hide them.
#[test]
fn fp32_add_deep_pipelines() {
    for (latency, seed) in [(3, 11), (4, 12), (5, 13), (6, 14)] {
        let mut c = small(1, latency);
        c.bc = 16;
        let r =
            verify_pure(&c, "fp_add_e8m23", CASES / 4, seed).unwrap_or_else(|e| panic!("{e:#}"));
        assert_eq!(r.latency, latency);
        let r = verify_pure(&c, "fp_add_e10m15_e8m23", CASES / 4, seed + 10)
            .unwrap_or_else(|e| panic!("{e:#}"));
        assert_eq!(r.latency, latency);
    }
}

#[test]
fn fp16_to_fp32_exhaustive_and_random() {
    check_unit("fp_cvt_e5m10_e8m23", 0, 0, 5);
}

#[test]
fn fp32_to_fp16_boundaries_and_random() {
    check_unit("fp_cvt_e8m23_e5m10", 0, 0, 6);
}

#[test]
fn mac_as_the_pe_uses_it() {
    check_unit("mac", 1, 1, 7);
}

#[test]
fn mac_combinational() {
    check_unit("mac", 0, 0, 8);
}

// bfloat16 operands: the exact product in e10m15, its addition to a binary32
// accumulator with one rounding, and the MAC of the two, each against `kernels::fp`'s models.

#[test]
fn bf16_mul_combinational() {
    check_unit("fp_mul_e8m7", 0, 0, 9);
}

#[test]
fn wide_add_combinational() {
    check_unit("fp_add_e10m15_e8m23", 0, 0, 10);
}

#[test]
fn wide_add_two_stage() {
    check_unit("fp_add_e10m15_e8m23", 0, 2, 11);
}

#[test]
fn bf16_mac_as_the_pe_would_use_it() {
    check_unit("mac_e8m7", 1, 1, 12);
}

#[test]
fn bf16_conversions_exhaustive_boundaries_and_random() {
    check_unit("fp_cvt_e8m7_e8m23", 0, 0, 13);
    check_unit("fp_cvt_e8m23_e8m7", 0, 0, 14);
}

/// Integer QKᵀ's step: two INT8 or four INT4 products onto an int32 accumulator,
/// and the conversion of a score to binary32 (round to nearest even past 2^24).
#[test]
fn integer_dot_steps_and_conversion() {
    check_unit("int_dot_i8", 0, 0, 15);
    check_unit("int_dot_i4", 0, 0, 16);
}

/// The OCP FP8 formats' units (E4M3, finite-only and saturating; E5M2, IEEE): the
/// multiplier, both conversions and the MAC, every value and every operand pair directed
/// (saturation and the subnormal boundaries included), then random vectors.
#[test]
fn fp8_units_exhaustive_and_random() {
    let units = [
        "fp_mul_e4m3fn",
        "fp_cvt_e4m3fn_e8m23",
        "fp_cvt_e8m23_e4m3fn",
        "mac_e4m3fn",
        "fp_mul_e5m2",
        "fp_cvt_e5m2_e8m23",
        "fp_cvt_e8m23_e5m2",
        "mac_e5m2",
    ];
    for (seed, name) in (40..).zip(units) {
        check_unit(name, 1, 1, seed);
    }
}
