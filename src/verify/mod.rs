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
