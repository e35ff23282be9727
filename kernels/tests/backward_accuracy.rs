//! The backward model against the references (`kernels::backward_reference`): over random
//! shapes (partial tiles and blocks, GQA groups, causal or not), value patterns and both
//! 16-bit formats, each of dQ, dK and dV stays within twice the plain low-precision backward's
//! max absolute error against f64, plus one ulp of the format at the gradient's magnitude
//! (FlashAttention's own test criterion).

use kernels::backward::BackwardConfig;
use kernels::backward_reference::backward_accuracy_of;
use kernels::flash::OutFormat;
use kernels::format::Format;
use kernels::patterns::Pattern;
use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError};

#[path = "../../src/verify/seeds.rs"]
#[allow(dead_code)]
mod seeds;

#[test]
fn random_shapes_and_patterns_meet_the_contract() {
    // K padded with −Inf rows (`NegInfKeys`) has no gradient: dQ = Σ dS · K meets 0 · −Inf,
    // NaN in exact arithmetic too. Every other pattern.
    let patterns = prop_oneof![
        3 => Just(Pattern::Unit),
        1 => Just(Pattern::Extreme),
        1 => Just(Pattern::EqualScores),
        1 => Just(Pattern::Dominant),
        1 => Just(Pattern::LargeValues),
    ];
    // (rows, cols) of the PE array, the per-PE share of the tile, the GQA group.
    let shape = (1usize..=4, 1usize..=4, 1usize..=3, 1usize..=3, 1usize..=3);
    let strategy = (
        patterns,
        shape,
        1usize..=40,
        1usize..=40,
        (any::<bool>(), any::<bool>(), 1usize..=24),
        any::<u64>(),
    );
    let config = Config {
        cases: 200,
        failure_persistence: None,
        ..Config::default()
    };
    seeds::run(
        config,
        57,
        &strategy,
        |(pattern, (rows, cols, a, b, group), q_len, k_len, (causal, bf16, d), seed)| {
            let operand = if bf16 { Format::BF16 } else { Format::FP16 };
            let cfg = BackwardConfig {
                br: cols * a,
                bc: rows * b,
                head_dim: d,
                rows,
                causal,
                out: OutFormat::Short,
                operand,
            };
            backward_accuracy_of(pattern, (group, q_len, k_len), &cfg, seed)
                .check()
                .map_err(|e| {
                    TestCaseError::fail(format!(
                        "{pattern:?} group={group} q_len={q_len} k_len={k_len} {cfg:?}: {e}"
                    ))
                })
        },
    )
    .unwrap();
}

/// seed's tiling (Br = Bc = 64, d = 128, 32 rows), causal, with GQA, every pattern but −Inf
/// keys, in both formats and both output formats.
#[test]
fn seed_tiling_every_pattern() {
    for pattern in &Pattern::ALL[..5] {
        for operand in [Format::FP16, Format::BF16] {
            for out in [OutFormat::Short, OutFormat::F32] {
                let cfg = BackwardConfig {
                    br: 64,
                    bc: 64,
                    head_dim: 128,
                    rows: 32,
                    causal: true,
                    out,
                    operand,
                };
                let a = backward_accuracy_of(*pattern, (2, 131, 197), &cfg, 7);
                a.check()
                    .unwrap_or_else(|e| panic!("{pattern:?} {} {out:?}: {e}", operand.name()));
            }
        }
    }
}

/// The contract has teeth: on ordinary values the model's errors sit inside the plain
/// backward's (each printed), and a backward that drops D (O read as zeros), or reads a
/// log-sum-exp half a unit off, fails it.
#[test]
fn the_contract_separates_right_from_slightly_wrong() {
    use kernels::backward::{flash_attention_backward, saved_forward, BackwardProblem};
    use kernels::backward_reference::{BackwardInputs, GradAccuracy};
    use kernels::flash::{FlashConfig, SoftmaxPass};
    use kernels::patterns::backward_tensors;
    for operand in [Format::FP16, Format::BF16] {
        let cfg = BackwardConfig {
            br: 16,
            bc: 16,
            head_dim: 32,
            rows: 4,
            causal: false,
            out: OutFormat::F32,
            operand,
        };
        let (group, q_len, k_len, d) = (1, 64, 64, 32);
        let ((q, k, v), d_o) =
            backward_tensors(Pattern::Unit, (group, q_len, k_len, d), 11, operand);
        let fwd = FlashConfig {
            br: 16,
            bc: 16,
            head_dim: d,
            cols: 4,
            causal: false,
            out: OutFormat::Short,
            softmax: SoftmaxPass::Online,
            operand,
        };
        let (o, lse) = saved_forward((&q, &k, &v), (group, q_len, k_len), &fwd);
        let inputs = BackwardInputs {
            q: &q,
            k: &k,
            v: &v,
            d_o: &d_o,
            group,
            q_len,
            k_len,
            d,
            causal: false,
            format: operand,
        };
        let accuracy = |o: &[u16], lse: &[u32]| {
            let p = BackwardProblem {
                q: &q,
                k: &k,
                v: &v,
                o,
                d_o: &d_o,
                lse,
                group,
                q_len,
                k_len,
            };
            let (g, _) = flash_attention_backward(&p, &cfg);
            GradAccuracy::of_bits(&g, cfg.out, &inputs)
        };
        let a = accuracy(&o, &lse);
        for (name, t) in [("dQ", a.dq), ("dK", a.dk), ("dV", a.dv)] {
            eprintln!(
                "{} {name}: error {:.3e}, plain {:.3e}, bound {:.3e}",
                operand.name(),
                t.max_abs_err,
                t.plain_err,
                t.limit(operand)
            );
            assert!(t.max_abs_err <= t.plain_err, "{name}: {t:?}");
        }
        // D dropped: dQ and dK are off.
        let zeros = vec![0u16; o.len()];
        let e = accuracy(&zeros, &lse).check().unwrap_err();
        assert!(
            e.contains("dQ") && e.contains("dK") && !e.contains("dV"),
            "{e}"
        );
        // The log-sum-exp half a unit off (every weight 2^0.5 too large): all three.
        let off: Vec<u32> = lse
            .iter()
            .map(|&l| (f32::from_bits(l) - 0.5).to_bits())
            .collect();
        let e = accuracy(&o, &off).check().unwrap_err();
        assert!(
            e.contains("dQ") && e.contains("dK") && e.contains("dV"),
            "{e}"
        );
    }
}
