//! The PE under Verilator against the functional model: random operation streams
//! (MAC, clear-MAC, load, idle) with biased FP16 operands, the read port compared every cycle,
//! and every register of every PE read back at the end.

mod common;

use common::*;
use hdl::config::CoreConfig;
use kernels::quant::QkFormat;
use regflash::verify::run::verify_pe_block;

/// Streams of up to this many cycles; 500 cases average ~250,000 cycles per block.
const MAX_LEN: usize = 1000;
const PE_CASES: u32 = 500;

fn check(cfg: &CoreConfig, unit: &str, cases: u32, seed: u64) -> u64 {
    let r = verify_pe_block(cfg, unit, cases, MAX_LEN, seed).unwrap_or_else(|e| panic!("{e:#}"));
    assert_eq!(
        r.latency,
        cfg.mul_latency + cfg.add_latency + 1,
        "PE latency = MAC + write-back"
    );
    eprintln!(
        "{} (latency {}): {} cycles, {} operations match the model",
        r.module, r.latency, r.random_vectors, r.operations
    );
    assert!(
        r.operations > r.random_vectors / 3,
        "the hazard rule left too few operations"
    );
    r.random_vectors
}

#[test]
fn pe_pipelined_mac() {
    let cycles = check(&small(1, 1), "pe", PE_CASES, 11);
    assert!(cycles >= 200_000, "only {cycles} cycles checked");
}

#[test]
fn pe_combinational_mac_accumulates_every_cycle() {
    let cycles = check(&small(0, 0), "pe", PE_CASES, 12);
    assert!(cycles >= 200_000, "only {cycles} cycles checked");
}

/// A PE with integer QKᵀ (INT8; INT4 with BF16 operands): the integer operations (clear,
/// accumulate, the last step's conversion) mixed with the floating-point ones on the same
/// registers, and a directed stream of extreme packed operands, conversions around 2^24 and
/// 2^31, and a wrap.
#[test]
fn pe_with_integer_qk() {
    let mut cfg = small(1, 1);
    cfg.qk_format = Some(QkFormat::Int8);
    check(&cfg, "pe", 150, 14);
    cfg.qk_format = Some(QkFormat::Int4);
    cfg.in_format = hdl::format::Format::BF16;
    check(&cfg, "pe", 100, 15);
}

/// The deepest pipeline (the multiplier at 3, the adder at 6: the accumulator read a cycle
/// after issue, then it and its scaling each registered, so the MAC takes it with the product;
/// operations on one register 9 cycles apart, one less than the latency), with INT8 QKᵀ so the
/// integer path's staging is exercised beside the floating-point one.
#[test]
fn pe_deepest_pipeline() {
    let mut cfg = small(3, 6);
    cfg.qk_format = Some(QkFormat::Int8);
    check(&cfg, "pe", 100, 13);
}

/// Runs in the MAC's loop: `MacFeed` continues the previous cycle's result and the
/// run writes its register once, at its end; masked steps pass the run's value on. A
/// multiplier of one stage (the accumulator read at issue) with FP16, and of two (read and
/// scaled in stages of their own) with BF16; a directed stream of special values with masked
/// steps besides the random runs.
#[test]
fn pe_accumulating_in_the_pipeline() {
    let mut cfg = small(1, 1);
    cfg.accumulate = hdl::array::pe::Accumulate::Pipeline;
    check(&cfg, "pe", 300, 16);
    let mut cfg = small(2, 1);
    cfg.accumulate = hdl::array::pe::Accumulate::Pipeline;
    cfg.in_format = hdl::format::Format::BF16;
    check(&cfg, "pe", 100, 17);
}

/// FP8 operands (E4M3 with its run in the MAC's loop, E5M2 accumulating in the register
/// file): the operand format's own specials directed (E4M3's one NaN, its 448; E5M2's
/// infinities), then random cycles.
#[test]
fn pe_with_fp8_operands() {
    let mut cfg = small(1, 1);
    cfg.set_in_format(hdl::format::Format::FP8_E4M3);
    cfg.accumulate = hdl::array::pe::Accumulate::Pipeline;
    check(&cfg, "pe", 100, 18);
    let mut cfg = small(1, 2);
    cfg.set_in_format(hdl::format::Format::FP8_E5M2);
    cfg.accumulate = hdl::array::pe::Accumulate::RegisterFile;
    check(&cfg, "pe", 100, 19);
}
