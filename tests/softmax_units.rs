//! The online-softmax blocks under Verilator against their bit-exact models: directed special
//! values and 100,000 random vectors (or stream cycles) per block and configuration.

mod common;

use common::small;
use hdl::config::CoreConfig;
use regflash::verify::run::verify_block;

const VECTORS: u32 = 100_000;

fn check(cfg: &CoreConfig, unit: &str, seed: u64) {
    let r = verify_block(cfg, unit, VECTORS, seed).unwrap_or_else(|e| panic!("{e:#}"));
    assert!(r.directed_vectors > 0, "{unit} has directed vectors");
    assert!(
        r.random_vectors >= VECTORS as u64 * 9 / 10,
        "{unit}: only {} random vectors",
        r.random_vectors
    );
    eprintln!(
        "{} ({}, latency {}): {} directed + {} random match the model",
        unit, r.module, r.latency, r.directed_vectors, r.random_vectors
    );
}

/// `small` changed by `f`, with the widest memory port whose beats tile a row (these tests do
/// not involve the DMA, but a configuration describes the whole design).
fn with(f: impl FnOnce(&mut CoreConfig)) -> CoreConfig {
    let mut c = small(1, 1);
    f(&mut c);
    let row_bits = c.head_dim * 16;
    c.mem_width = (5..=8)
        .rev()
        .map(|k| 1u32 << k)
        .find(|w| row_bits.is_multiple_of(*w))
        .expect("a row of at least 2 FP16 values");
    c.validate().unwrap();
    c
}

#[test]
fn fp32_mul_at_every_depth() {
    check(&with(|c| c.fmul_latency = 0), "fp_mul_e8m23", 41);
    check(&with(|c| c.fmul_latency = 2), "fp_mul_e8m23", 42);
    // Cut after the operands' normalization; between the partial products' carry-save pair and
    // its sum; between the rounding's decision and its increment; and at the operands.
    check(&with(|c| c.fmul_latency = 3), "fp_mul_e8m23", 66);
    check(&with(|c| c.fmul_latency = 4), "fp_mul_e8m23", 67);
    check(&with(|c| c.fmul_latency = 6), "fp_mul_e8m23", 68);
}

#[test]
fn fp32_max_ceil_scale2() {
    let cfg = small(1, 1);
    check(&cfg, "fp_max_e8m23", 43);
    check(&cfg, "fp_ceil_e8m23", 44);
    check(&cfg, "fp_scale2_e8m23", 45);
}

#[test]
fn exp2_at_every_latency() {
    for latency in 0..=6 {
        check(
            &with(|c| c.exp_latency = latency),
            "fp_exp2_e8m23",
            [46, 47, 48, 68, 69, 74, 75][latency as usize],
        );
    }
}

/// The log unit combinational, at the presets' latency (2) and with every cut (6): a signal
/// that skipped a cut would arrive a cycle off at 6, whatever the cuts below it.
#[test]
fn log2_combinational_preset_and_deepest() {
    for (latency, seed) in [(0, 80), (2, 81), (6, 82)] {
        check(&with(|c| c.exp_latency = latency), "fp_log2_e8m23", seed);
    }
}

#[test]
fn reciprocal() {
    check(&small(1, 1), "fp_recip_e8m23", 49);
}

#[test]
fn row_reduce_any_width() {
    for cols in [1u32, 3, 4, 5] {
        let cfg = with(|c| {
            c.cols = cols;
            c.bc = 2 * cols;
            c.head_dim = 4 * cols;
        });
        check(&cfg, "row_reduce", 50 + cols as u64);
    }
    // Levels of three cycles (the adder at latency 3), an odd level passing a value through.
    let cfg = with(|c| {
        c.cols = 5;
        c.bc = 20;
        c.head_dim = 20;
        c.add_latency = 3;
    });
    check(&cfg, "row_reduce", 56);
}

#[test]
fn row_reduce_seed_width() {
    let cfg = CoreConfig::preset("seed").unwrap();
    check(&cfg, "row_reduce", 60);
}

#[test]
fn softmax_row_state() {
    check(&small(1, 1), "softmax_row", 61);
    // Lazy rescaling: a growth of 1..=τ keeps the stale max (the directed ladder crosses
    // every threshold), and the `stale` output says so.
    for threshold in [1, 15] {
        let lazy = with(|c| c.rescale = hdl::softmax::Rescale::Lazy { threshold });
        check(&lazy, "softmax_row", 61 + threshold as u64);
    }
    // The pipeline at the shortest and the longest FP32 units: latency 2 and 6.
    for (lat, seed) in [(0, 64), (2, 65)] {
        let cfg = with(|c| {
            c.fmul_latency = lat;
            c.add_latency = lat;
        });
        check(&cfg, "softmax_row", seed);
    }
}

#[test]
fn softmax_exp_stage() {
    check(&small(1, 1), "softmax_exp", 62);
    // Combinational; and the deepest (exp2 at 6 stages, P registered after its rounding, the
    // multiplier at 6).
    for ((fmul, add, exp), seed) in [((0, 0, 0), 63), ((6, 5, 6), 70)] {
        let cfg = with(|c| (c.fmul_latency, c.add_latency, c.exp_latency) = (fmul, add, exp));
        check(&cfg, "softmax_exp", seed);
    }
}

#[test]
fn mask_generator_tiles() {
    check(&small(1, 1), "mask_gen", 64);
    let odd = with(|c| {
        c.rows = 1;
        c.cols = 1;
        c.br = 3;
        c.bc = 5;
        c.head_dim = 2;
        c.index_bits = 6;
    });
    check(&odd, "mask_gen", 65);
}
