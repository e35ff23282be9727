//! proptest seeds. Every runner has a fixed regression seed, so a failure reproduces; on top
//! of it, when `REGFLASH_SEED` holds a number (`scripts/test`, and so CI, draws a fresh one
//! every run and prints it), each runner also runs a quarter of its cases from a seed derived
//! from that number and its own fixed seed. A failure names both; setting `REGFLASH_SEED` to
//! the printed value reproduces it.

use proptest::strategy::Strategy;
use proptest::test_runner::{Config, RngSeed, TestCaseError, TestError, TestRunner};

/// The environment variable that adds a fresh-seed run to every proptest runner.
pub const SEED_ENV: &str = "REGFLASH_SEED";

/// The fresh seed of this run: `REGFLASH_SEED`, if set to a number.
pub fn fresh_seed() -> Option<u64> {
    let v = std::env::var(SEED_ENV).ok()?;
    match v.trim().parse() {
        Ok(s) => Some(s),
        Err(_) => panic!("{SEED_ENV} = `{v}` is not a number: unset it or give a u64"),
    }
}

/// (seed, cases) of each run: the fixed seed with every case, then the fresh one (if any)
/// with a quarter of them.
pub fn runs(fixed: u64, cases: u32) -> Vec<(u64, u32)> {
    let mut v = vec![(fixed, cases)];
    if let Some(f) = fresh_seed() {
        let mixed = (f ^ fixed.rotate_left(29)).wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        v.push((mixed, cases.div_ceil(4)));
    }
    v
}

/// The cases of every run of [`runs`] together.
pub fn total_cases(cases: u32) -> u64 {
    runs(0, cases).iter().map(|&(_, n)| n as u64).sum()
}

/// `TestRunner::run` over every run of [`runs`] (`config.cases` cases, `config`'s seed
/// ignored); a failure says which seed found it.
pub fn run<S: Strategy>(
    config: Config,
    fixed: u64,
    strategy: &S,
    test: impl Fn(S::Value) -> Result<(), TestCaseError>,
) -> Result<(), TestError<S::Value>> {
    for (seed, cases) in runs(fixed, config.cases) {
        let mut runner = TestRunner::new(Config {
            cases,
            rng_seed: RngSeed::Fixed(seed),
            ..config.clone()
        });
        runner.run(strategy, &test).map_err(|e| match e {
            TestError::Fail(reason, v) => {
                let how = if seed == fixed {
                    format!("fixed proptest seed {seed}")
                } else {
                    format!(
                        "proptest seed {seed}, from {SEED_ENV}={}: rerun with it to reproduce",
                        fresh_seed().unwrap_or_default()
                    )
                };
                TestError::Fail(format!("{reason} [{how}]").into(), v)
            }
            abort => abort,
        })?;
    }
    Ok(())
}
