//! End-to-end scenarios: directed ones (edge shapes, masks, patterns, memory behaviour) and
//! random ones, each run and checked.

use super::*;

/// One end-to-end scenario: a problem's shape and values, and how the memory behaves.
#[derive(Clone, Debug)]
pub struct Scenario {
    pub heads: usize,
    /// K/V heads (divides `heads`; fewer: grouped-query attention).
    pub kv_heads: usize,
    pub layout: TensorLayout,
    pub q_len: usize,
    pub k_len: usize,
    pub causal: bool,
    pub out: OutFormat,
    pub pattern: Pattern,
    pub seed: u64,
    pub timing: MemoryTiming,
}

impl Scenario {
    /// The scenario's problem for the design `p`: its head dimension, its operand format.
    pub fn attention(&self, p: &CoreParams) -> Attention {
        let head_dim = p.d() as usize;
        Attention::generate(
            self.pattern,
            self.heads,
            self.q_len,
            self.k_len,
            head_dim,
            self.causal,
            self.out,
            self.seed,
        )
        .grouped(self.kv_heads)
        .laid_out(self.layout)
        .for_design(p)
    }
}

/// Directed scenarios: a single query and key, primes, lengths that are not multiples of the
/// blocks either way round (causal ones with fully masked rows and tiles with no block),
/// several heads, FP32 output, every value pattern, memory back-pressure and slow memory.
pub fn directed(br: usize, bc: usize) -> Vec<Scenario> {
    let base = Scenario {
        heads: 1,
        kv_heads: 1,
        layout: TensorLayout::Bhsd,
        q_len: 1,
        k_len: 1,
        causal: false,
        out: OutFormat::Short,
        pattern: Pattern::Unit,
        seed: 1,
        timing: MemoryTiming::default(),
    };
    let mut v = vec![];
    for (q, k) in [
        (1, 1),
        (1, 2 * bc + 1),
        (2 * br + 1, 1),
        (7, 7),
        (13, 31),
        (31, 13),
        (br, bc),
        (3 * br + 5, 2 * bc + 3),
        (2 * br + 3, 5 * bc + 1),
    ] {
        for causal in [false, true] {
            v.push(Scenario {
                q_len: q,
                k_len: k,
                causal,
                ..base.clone()
            });
        }
    }
    for (i, pattern) in Pattern::ALL.into_iter().enumerate() {
        v.push(Scenario {
            q_len: 2 * br + 1,
            k_len: 3 * bc - 1,
            causal: i % 2 == 1,
            pattern,
            seed: 10 + i as u64,
            ..base.clone()
        });
    }
    v.push(Scenario {
        heads: 3,
        kv_heads: 3,
        q_len: br + 3,
        k_len: 2 * bc + 5,
        causal: true,
        out: OutFormat::F32,
        ..base.clone()
    });
    // Grouped-query attention in the (seq, heads, d) layout: two Q heads per K/V head, and
    // one K/V head for three Q heads, causal, FP32 out.
    v.push(Scenario {
        heads: 4,
        kv_heads: 2,
        layout: TensorLayout::Bshd,
        q_len: 2 * br + 3,
        k_len: 2 * bc + 1,
        ..base.clone()
    });
    v.push(Scenario {
        heads: 3,
        kv_heads: 1,
        layout: TensorLayout::Bshd,
        q_len: br + 1,
        k_len: 3 * bc,
        causal: true,
        out: OutFormat::F32,
        ..base.clone()
    });
    v.push(Scenario {
        heads: 2,
        kv_heads: 2,
        q_len: 3 * br,
        k_len: 3 * bc,
        timing: MemoryTiming {
            latency: 3,
            bytes_per_cycle: 8,
            stall_probability: 0.3,
            seed: 5,
            ..MemoryTiming::default()
        },
        ..base.clone()
    });
    v.push(Scenario {
        q_len: 2 * br + 1,
        k_len: 4 * bc,
        causal: true,
        timing: MemoryTiming {
            latency: 200,
            ..MemoryTiming::default()
        },
        ..base
    });
    v
}

/// Random scenarios: 1 to 3 heads (a quarter of them sharing one K/V head), either tensor
/// layout, lengths 1 to `max_len` (equal half the time), causal or not, either output format,
/// any value pattern, memory latency 1 to 60 cycles, bandwidth of a full or a partial beat per
/// cycle, refusal probability up to 0.3.
pub fn scenarios(max_len: usize) -> impl Strategy<Value = Scenario> {
    let len = prop_oneof![1..=max_len.min(24), 1..=max_len];
    (
        (1usize..=3, prop::bool::weighted(0.25), any::<bool>()),
        len.clone(),
        prop_oneof![Just(None), len.prop_map(Some)],
        any::<bool>(),
        any::<bool>(),
        0..Pattern::ALL.len(),
        any::<u64>(),
        (
            1u32..=60,
            prop_oneof![Just(0usize), Just(8), Just(16)],
            0.0..0.3f64,
        ),
    )
        .prop_map(
            |((heads, gqa, bshd), q_len, k_len, causal, f32, pat, seed, (latency, bpc, stall))| {
                Scenario {
                    heads,
                    kv_heads: if gqa { 1 } else { heads },
                    layout: if bshd {
                        TensorLayout::Bshd
                    } else {
                        TensorLayout::Bhsd
                    },
                    q_len,
                    k_len: k_len.unwrap_or(q_len),
                    causal,
                    out: if f32 {
                        OutFormat::F32
                    } else {
                        OutFormat::Short
                    },
                    pattern: Pattern::ALL[pat],
                    seed,
                    timing: MemoryTiming {
                        latency,
                        bytes_per_cycle: bpc,
                        stall_probability: stall,
                        seed,
                        ..MemoryTiming::default()
                    },
                }
            },
        )
}

/// Runs one scenario and checks it; returns its cycles. A design with integer QKᵀ cannot take
/// −Inf keys (no integer stands for them): that scenario must be refused by name, before
/// anything runs (0 cycles).
fn run_scenario(model: &Model, p: &CoreParams, s: &Scenario) -> Result<u64> {
    let a = s.attention(p);
    if a.qk.is_some() && s.pattern == Pattern::NegInfKeys {
        let err = match run_and_check(model, p, &a, &s.timing.on(p)) {
            Ok(_) => bail!("−Inf keys ran on a design with integer QK instead of being refused"),
            Err(e) => format!("{e:#}"),
        };
        ensure!(
            err.contains("needs finite Q and K"),
            "−Inf keys refused for another reason: {err}"
        );
        return Ok(0);
    }
    let (run, _) = run_and_check(model, p, &a, &s.timing.on(p))?;
    Ok(run.counters["cycles"])
}

/// Runs `scenarios` and then `cases` random ones (fixed proptest seed), each checked bit for
/// bit; returns (scenarios run, simulated cycles).
pub fn check_scenarios(
    model: &Model,
    p: &CoreParams,
    directed: &[Scenario],
    cases: u32,
    max_len: usize,
    seed: u64,
) -> Result<(u64, u64)> {
    let mut totals = (0u64, 0u64);
    for s in directed {
        let cycles =
            run_scenario(model, p, s).with_context(|| format!("directed scenario {s:?}"))?;
        totals.0 += 1;
        totals.1 += cycles;
    }
    let config = Config {
        cases,
        failure_persistence: None,
        max_shrink_iters: 50,
        ..Config::default()
    };
    let acc = std::cell::Cell::new(totals);
    let result = crate::verify::seeds::run(config, seed, &scenarios(max_len), |s| {
        let cycles =
            run_scenario(model, p, &s).map_err(|e| TestCaseError::fail(format!("{e:#}")))?;
        let (n, c) = acc.get();
        acc.set((n + 1, c + cycles));
        Ok(())
    });
    crate::verify::outcome(result, |minimal| {
        format!("(minimal failing scenario: {minimal:#?})")
    })?;
    Ok(acc.get())
}
