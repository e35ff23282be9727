//! Checking units whose output is a pure function of their inputs after a fixed latency
//! (fp16_mul, fp32_add, the converters, mac): vectors stream through the Verilator model one
//! per cycle, back to back, and every output is compared bit for bit with the Rust model.

use std::cell::RefCell;
use std::fmt;

use proptest::prelude::*;
use proptest::test_runner::{Config, RngSeed, TestCaseError, TestError, TestRunner};
use verilator_tb::{Dut, PortId};

/// How to print a port's value in a failure report.
#[derive(Clone, Copy, Debug)]
pub enum Fmt {
    F16,
    F32,
}

impl Fmt {
    /// `0x3c00 (1)`: the bits in hex and the value as a number.
    pub fn show(self, v: u64) -> String {
        match self {
            Fmt::F16 => format!("{v:#06x} ({})", half::f16::from_bits(v as u16)),
            Fmt::F32 => format!("{v:#010x} ({:e})", f32::from_bits(v as u32)),
        }
    }
}

/// A pure unit: named input ports, one output port, and its bit-exact model.
pub struct PureUnit {
    /// The unit's name (as `regflash gen --unit` takes it).
    pub name: &'static str,
    pub inputs: &'static [(&'static str, Fmt)],
    pub output: (&'static str, Fmt),
    /// The model: input values in `inputs` order → output value.
    pub model: fn(&[u64]) -> u64,
}

/// The first vector on which the RTL and the model disagree.
#[derive(Debug, Clone)]
pub struct Mismatch {
    pub unit: &'static str,
    pub index: usize,
    pub inputs: Vec<(String, String)>,
    pub output: String,
    pub expected: String,
    pub actual: String,
}

impl fmt::Display for Mismatch {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        writeln!(
            f,
            "{}: RTL and model differ on vector {}",
            self.unit, self.index
        )?;
        for (n, v) in &self.inputs {
            writeln!(f, "  {n:>8} = {v}")?;
        }
        writeln!(f, "  expected {} = {}", self.output, self.expected)?;
        write!(f, "  actual   {} = {}", self.output, self.actual)
    }
}

impl std::error::Error for Mismatch {}

/// Port ids of a unit, looked up once.
struct Ports {
    inputs: Vec<PortId>,
    output: PortId,
}

fn ports(dut: &Dut, unit: &PureUnit) -> anyhow::Result<Ports> {
    Ok(Ports {
        inputs: unit
            .inputs
            .iter()
            .map(|(n, _)| dut.port(n))
            .collect::<anyhow::Result<_>>()?,
        output: dut.port(unit.output.0)?,
    })
}

/// Streams `vectors` (each one value per input) through `dut`, one per cycle, and compares
/// every output with the model. `latency` is the unit's latency from the manifest.
pub fn check_stream(
    dut: &mut Dut,
    unit: &PureUnit,
    latency: u32,
    vectors: &[Vec<u64>],
) -> anyhow::Result<Result<(), Mismatch>> {
    let p = ports(dut, unit)?;
    for &i in &p.inputs {
        anyhow::ensure!(
            dut.width(i) <= 32,
            "check_stream handles inputs of up to 32 bits"
        );
    }
    anyhow::ensure!(
        dut.width(p.output) <= 32,
        "check_stream handles outputs of up to 32 bits"
    );
    const CHUNK: usize = 1 << 16;
    let lat = latency as usize;
    for (chunk_no, chunk) in vectors.chunks(CHUNK).enumerate() {
        // Each chunk is followed by `latency` idle cycles so its last results drain out.
        let cycles = chunk.len() + lat;
        let mut words = Vec::with_capacity(cycles * p.inputs.len());
        for v in chunk {
            assert_eq!(
                v.len(),
                p.inputs.len(),
                "vector has the wrong number of inputs"
            );
            words.extend(v.iter().map(|&x| x as u32));
        }
        words.resize(cycles * p.inputs.len(), 0);
        let out = dut.run(&p.inputs, &words, &[p.output], cycles as u64);
        for (k, v) in chunk.iter().enumerate() {
            let expected = (unit.model)(v);
            let actual = out[k + lat] as u64;
            if expected != actual {
                return Ok(Err(Mismatch {
                    unit: unit.name,
                    index: chunk_no * CHUNK + k,
                    inputs: unit
                        .inputs
                        .iter()
                        .zip(v)
                        .map(|((n, f), &x)| (n.to_string(), f.show(x)))
                        .collect(),
                    output: unit.output.0.to_string(),
                    expected: unit.output.1.show(expected),
                    actual: unit.output.1.show(actual),
                }));
            }
        }
    }
    Ok(Ok(()))
}

/// Runs `cases` proptest cases, one vector each, from `strategy` through the model; returns
/// the number of vectors checked. On a mismatch proptest shrinks the vector and the error shows
/// the minimal one (inputs, expected and actual, in hex and as numbers). The seed is fixed so a
/// run is reproducible.
pub fn proptest_vectors<S>(
    dut: &mut Dut,
    unit: &PureUnit,
    latency: u32,
    strategy: S,
    cases: u32,
    seed: u64,
) -> anyhow::Result<u64>
where
    S: Strategy<Value = Vec<u64>>,
{
    let mut runner = TestRunner::new(Config {
        cases,
        rng_seed: RngSeed::Fixed(seed),
        failure_persistence: None,
        ..Config::default()
    });
    let dut = RefCell::new(dut);
    let checked = RefCell::new(0u64);
    let result = runner.run(&strategy, |vector| {
        let mut d = dut.borrow_mut();
        match check_stream(&mut d, unit, latency, std::slice::from_ref(&vector)) {
            Ok(Ok(())) => {
                *checked.borrow_mut() += 1;
                Ok(())
            }
            Ok(Err(m)) => Err(TestCaseError::fail(m.to_string())),
            Err(e) => Err(TestCaseError::fail(format!("harness error: {e:#}"))),
        }
    });
    match result {
        Ok(()) => Ok(checked.into_inner()),
        Err(TestError::Fail(reason, minimal)) => {
            anyhow::bail!("{reason}\n(minimal failing vector after shrinking: {minimal:#x?})")
        }
        Err(TestError::Abort(reason)) => anyhow::bail!("proptest aborted: {reason}"),
    }
}
