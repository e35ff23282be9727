//! Checking units whose outputs are a pure function of their inputs after a fixed latency
//! (the FP operators, the MAC, exp2, the row reduction, the exp stage, the mask generator):
//! vectors stream through the Verilator model one per cycle, back to back, and every output
//! lane is compared bit for bit with the Rust model.
//!
//! A port carries one or more lanes of equal width (a row-reduction input holds one FP32 lane
//! per PE; a mask holds one 1-bit lane per position); a vector lists every input lane of every
//! input port in order, and the model returns every output lane of every output port in order.

use std::cell::RefCell;
use std::fmt;

use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError};
use verilator_tb::{Dut, PortId};

/// How a lane is printed in a failure report, and its width.
#[derive(Clone, Copy, Debug)]
pub enum Fmt {
    F16,
    F32,
    /// An unsigned integer of this many bits.
    Bits(u32),
    /// A value of another binary format (bfloat16, a MAC's exact product format).
    Fp(kernels::format::Format),
}

impl Fmt {
    pub fn width(self) -> u32 {
        match self {
            Fmt::F16 => 16,
            Fmt::F32 => 32,
            Fmt::Bits(w) => w,
            Fmt::Fp(f) => f.bits(),
        }
    }

    /// `0x3c00 (1)`: the bits in hex and, for floats, the value.
    pub fn show(self, v: u64) -> String {
        match self {
            Fmt::F16 => format!("{v:#06x} ({})", half::f16::from_bits(v as u16)),
            Fmt::F32 => format!("{v:#010x} ({:e})", f32::from_bits(v as u32)),
            Fmt::Bits(_) => format!("{v} ({v:#x})"),
            Fmt::Fp(f) => {
                let f64_format = kernels::format::Format::FP64;
                let x = f64::from_bits(kernels::fp::convert(v & f.mask(), f, f64_format));
                format!("{v:#x} ({x:e}, {})", f.name())
            }
        }
    }
}

/// A port of a pure unit.
#[derive(Clone, Debug)]
pub struct PortSpec {
    pub name: &'static str,
    pub lanes: u32,
    pub fmt: Fmt,
}

impl PortSpec {
    /// A one-lane port.
    pub fn one(name: &'static str, fmt: Fmt) -> Self {
        PortSpec {
            name,
            lanes: 1,
            fmt,
        }
    }

    fn words(&self) -> usize {
        (self.lanes * self.fmt.width()).div_ceil(32) as usize
    }
}

/// The bit-exact model of a pure unit: input lanes → output lanes.
pub type Model = Box<dyn Fn(&[u64]) -> Vec<u64>>;

/// A pure unit: its ports and its bit-exact model.
pub struct PureUnit {
    /// The unit's name (as `regflash gen --unit` takes it).
    pub name: &'static str,
    pub inputs: Vec<PortSpec>,
    pub outputs: Vec<PortSpec>,
    pub model: Model,
}

impl PureUnit {
    /// Lanes of all input ports.
    pub fn input_lanes(&self) -> usize {
        self.inputs.iter().map(|p| p.lanes as usize).sum()
    }
}

/// The first vector on which the RTL and the model disagree.
#[derive(Debug, Clone)]
pub struct Mismatch {
    pub unit: &'static str,
    pub index: usize,
    pub inputs: Vec<(String, String)>,
    /// Output lane that differs, e.g. `sum` or `mask[13]`.
    pub output: String,
    pub expected: String,
    pub actual: String,
    /// Output lanes that differ in this vector.
    pub wrong_lanes: usize,
}

impl fmt::Display for Mismatch {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        writeln!(
            f,
            "{}: RTL and model differ on vector {}",
            self.unit, self.index
        )?;
        for (n, v) in &self.inputs {
            writeln!(f, "  {n:>10} = {v}")?;
        }
        writeln!(f, "  expected {} = {}", self.output, self.expected)?;
        write!(f, "  actual   {} = {}", self.output, self.actual)?;
        if self.wrong_lanes > 1 {
            write!(f, "\n  ({} output lanes differ)", self.wrong_lanes)?;
        }
        Ok(())
    }
}

impl std::error::Error for Mismatch {}

/// Packs lanes of `width` bits into 32-bit words, lane 0 in the low bits.
pub fn pack(lanes: &[u64], width: u32, words: &mut Vec<u32>) {
    let total = lanes.len() as u32 * width;
    let start = words.len();
    words.resize(start + total.div_ceil(32) as usize, 0);
    for (i, &v) in lanes.iter().enumerate() {
        for b in 0..width {
            if v >> b & 1 == 1 {
                let bit = i as u32 * width + b;
                words[start + (bit / 32) as usize] |= 1 << (bit % 32);
            }
        }
    }
}

/// Unpacks `n` lanes of `width` bits from 32-bit words.
pub fn unpack(words: &[u32], n: u32, width: u32) -> Vec<u64> {
    (0..n)
        .map(|i| {
            (0..width).fold(0u64, |acc, b| {
                let bit = i * width + b;
                acc | (((words[(bit / 32) as usize] >> (bit % 32)) & 1) as u64) << b
            })
        })
        .collect()
}

fn port_ids(dut: &Dut, ports: &[PortSpec]) -> anyhow::Result<Vec<PortId>> {
    ports
        .iter()
        .map(|p| {
            let id = dut.port(p.name)?;
            anyhow::ensure!(
                dut.width(id) == p.lanes * p.fmt.width(),
                "port `{}` is {} bits, the checker expects {} lanes of {}",
                p.name,
                dut.width(id),
                p.lanes,
                p.fmt.width()
            );
            Ok(id)
        })
        .collect()
}

fn show_inputs(unit: &PureUnit, v: &[u64]) -> Vec<(String, String)> {
    let mut out = vec![];
    let mut at = 0;
    for p in &unit.inputs {
        let lanes = &v[at..at + p.lanes as usize];
        at += p.lanes as usize;
        if p.lanes == 1 {
            out.push((p.name.to_string(), p.fmt.show(lanes[0])));
        } else {
            for (i, &x) in lanes.iter().enumerate() {
                out.push((format!("{}[{i}]", p.name), p.fmt.show(x)));
            }
        }
    }
    out
}

/// Streams `vectors` through `dut`, one per cycle, and compares every output lane with the
/// model. `latency` is the unit's latency from the manifest.
pub fn check_stream(
    dut: &mut Dut,
    unit: &PureUnit,
    latency: u32,
    vectors: &[Vec<u64>],
) -> anyhow::Result<Result<(), Mismatch>> {
    let in_ids = port_ids(dut, &unit.inputs)?;
    let out_ids = port_ids(dut, &unit.outputs)?;
    let in_words: usize = unit.inputs.iter().map(PortSpec::words).sum();
    let out_words: usize = unit.outputs.iter().map(PortSpec::words).sum();
    const CHUNK: usize = 1 << 14;
    let lat = latency as usize;
    for (chunk_no, chunk) in vectors.chunks(CHUNK).enumerate() {
        // Each chunk is followed by `latency` idle cycles so its last results drain out.
        let cycles = chunk.len() + lat;
        let mut words = Vec::with_capacity(cycles * in_words);
        for v in chunk {
            assert_eq!(
                v.len(),
                unit.input_lanes(),
                "vector has the wrong number of input lanes"
            );
            let mut at = 0;
            for p in &unit.inputs {
                pack(&v[at..at + p.lanes as usize], p.fmt.width(), &mut words);
                at += p.lanes as usize;
            }
        }
        words.resize(cycles * in_words, 0);
        let out = dut.run(&in_ids, &words, &out_ids, cycles as u64);
        for (k, v) in chunk.iter().enumerate() {
            let expected = (unit.model)(v);
            let sample = &out[(k + lat) * out_words..(k + lat + 1) * out_words];
            let mut at_word = 0;
            let mut at_lane = 0;
            let mut first: Option<(String, String, String)> = None;
            let mut wrong = 0;
            for p in &unit.outputs {
                let got = unpack(
                    &sample[at_word..at_word + p.words()],
                    p.lanes,
                    p.fmt.width(),
                );
                for (i, &g) in got.iter().enumerate() {
                    let e = expected[at_lane + i];
                    if e != g {
                        wrong += 1;
                        if first.is_none() {
                            let lane = if p.lanes == 1 {
                                p.name.to_string()
                            } else {
                                format!("{}[{i}]", p.name)
                            };
                            first = Some((lane, p.fmt.show(e), p.fmt.show(g)));
                        }
                    }
                }
                at_word += p.words();
                at_lane += p.lanes as usize;
            }
            if let Some((output, expected, actual)) = first {
                return Ok(Err(Mismatch {
                    unit: unit.name,
                    index: chunk_no * CHUNK + k,
                    inputs: show_inputs(unit, v),
                    output,
                    expected,
                    actual,
                    wrong_lanes: wrong,
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
    let config = Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    };
    let dut = RefCell::new(dut);
    let checked = RefCell::new(0u64);
    let result = super::seeds::run(config, seed, &strategy, |vector| {
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
    super::outcome(result, |minimal| {
        format!("(minimal failing vector after shrinking: {minimal:#x?})")
    })?;
    Ok(checked.into_inner())
}
