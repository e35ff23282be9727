//! RTL-versus-model checking, shared by the test suite and `regflash verify`.

pub mod attention;
pub mod axil;
pub mod batch;
pub mod csr;
pub mod dma;
pub mod pe;
pub mod pure;
pub mod run;
pub mod seeds;
pub mod sequencer;
pub mod stateful;
pub mod stimulus;
pub mod units;

/// A proptest runner's result (`seeds::run`) as an error to report: a failure's reason, the
/// seed that found it and `describe(minimal)` (the shrunk failing value), or an abort.
pub fn outcome<T>(
    result: Result<(), proptest::test_runner::TestError<T>>,
    describe: impl Fn(&T) -> String,
) -> anyhow::Result<()> {
    match result {
        Ok(()) => Ok(()),
        Err(proptest::test_runner::TestError::Fail(reason, minimal)) => {
            anyhow::bail!("{reason}\n{}", describe(&minimal))
        }
        Err(proptest::test_runner::TestError::Abort(reason)) => {
            anyhow::bail!("proptest aborted: {reason}")
        }
    }
}
