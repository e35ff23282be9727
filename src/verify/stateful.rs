//! Checking the stateful softmax blocks cycle by cycle against their models:
//!
//! * `fp_recip_e8m23`: each vector is a start pulse and [`LATENCY`] cycles; `done` must rise on
//!   the last of them and not before, and `y` must equal `kernels::fp::fp32_recip`.
//! * `softmax_row`: a stream of operations (init, max, sum, hold) with biased block maxima and
//!   sums; after every cycle m, l, shift and l_zero must equal `kernels::softmax::RowState`.

use std::cell::RefCell;

use hdl::fp::recip::LATENCY;
use hdl::softmax::RowOp;
use kernels::fp::{self, F32_NEG_INF};
use kernels::softmax::{scale_constant, RowState};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestError};
use verilator_tb::Dut;

use super::stimulus::{f32_value, F32_SPECIALS};

fn config(cases: u32) -> Config {
    Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    }
}

fn outcome<T: std::fmt::Debug>(result: Result<(), TestError<T>>) -> anyhow::Result<()> {
    super::outcome(result, |minimal| {
        format!("(minimal failing input after shrinking: {minimal:x?})")
    })
}

/// Random streams of 1 to `max_len` items of `item`, each checked by `check` (`Ok(Err(..))`: a
/// difference, `Err`: the harness failed); returns the items checked.
pub(crate) fn check_streams<T: Clone + std::fmt::Debug>(
    cases: u32,
    seed: u64,
    max_len: usize,
    item: impl Strategy<Value = T>,
    check: impl FnMut(&[T]) -> anyhow::Result<Result<(), String>>,
) -> anyhow::Result<u64> {
    let checked = std::cell::Cell::new(0u64);
    let check = RefCell::new(check);
    let strategy = prop::collection::vec(item, 1..=max_len);
    let result = super::seeds::run(config(cases), seed, &strategy, |xs| {
        match (check.borrow_mut())(&xs) {
            Ok(Ok(())) => {
                checked.set(checked.get() + xs.len() as u64);
                Ok(())
            }
            Ok(Err(m)) => Err(TestCaseError::fail(m)),
            Err(e) => Err(TestCaseError::fail(format!("harness error: {e:#}"))),
        }
    });
    outcome(result)?;
    Ok(checked.get())
}

/// Runs reciprocals of `xs` back to back; the first wrong result, if any, as a message.
pub fn check_recip(dut: &mut Dut, xs: &[u32]) -> anyhow::Result<Result<(), String>> {
    let (start, x) = (dut.port("start")?, dut.port("x")?);
    let (y, done, busy) = (dut.port("y")?, dut.port("done")?, dut.port("busy")?);
    let per = LATENCY as usize + 1;
    let mut words = Vec::with_capacity(xs.len() * per * 2);
    for &v in xs {
        words.extend([1, v]);
        for _ in 0..LATENCY {
            words.extend([0, v]);
        }
    }
    let out = dut.run(
        &[start, x],
        &words,
        &[y, done, busy],
        (xs.len() * per) as u64,
    );
    for (n, &v) in xs.iter().enumerate() {
        let at = |k: usize| &out[(n * per + k) * 3..(n * per + k + 1) * 3];
        for k in 1..LATENCY as usize {
            if at(k)[1] != 0 {
                return Ok(Err(format!(
                    "x = {v:#010x}: done rose {k} cycles after start, expected {LATENCY}"
                )));
            }
            if at(k)[2] != 1 {
                return Ok(Err(format!(
                    "x = {v:#010x}: busy low {k} cycles after start"
                )));
            }
        }
        let last = at(LATENCY as usize);
        if last[1] != 1 {
            return Ok(Err(format!(
                "x = {v:#010x}: done not high {LATENCY} cycles after start"
            )));
        }
        let want = fp::fp32_recip(v);
        if last[0] != want {
            return Ok(Err(format!(
                "fp_recip_e8m23: 1 / {v:#010x} ({:e}): expected {want:#010x} ({:e}), RTL {:#010x} ({:e})",
                f32::from_bits(v),
                f32::from_bits(want),
                last[0],
                f32::from_bits(last[0])
            )));
        }
    }
    Ok(Ok(()))
}

/// Directed reciprocals: specials, and every significand with 16 fraction bits set at a normal
/// exponent, at the exponents where the result turns subnormal, and for subnormal inputs.
pub fn recip_directed() -> Vec<u32> {
    let mut v: Vec<u32> = F32_SPECIALS.to_vec();
    for e in [127u32, 252, 253, 254, 0] {
        for m in 0..(1u32 << 16) {
            v.push((e << 23) | (m << 7) | (m >> 9));
        }
    }
    v
}

/// proptest over reciprocals; returns the number checked.
pub fn proptest_recip(dut: &mut Dut, cases: u32, seed: u64) -> anyhow::Result<u64> {
    let dut = RefCell::new(dut);
    let strategy = prop_oneof![3 => f32_value(), 1 => (250u32..=254, any::<u32>()).prop_map(|(e, f)| (e << 23) | (f & 0x807F_FFFF))];
    let result = super::seeds::run(config(cases), seed, &strategy, |x| {
        match check_recip(&mut dut.borrow_mut(), &[x]) {
            Ok(Ok(())) => Ok(()),
            Ok(Err(m)) => Err(TestCaseError::fail(m)),
            Err(e) => Err(TestCaseError::fail(format!("harness error: {e:#}"))),
        }
    });
    outcome(result)?;
    Ok(cases as u64)
}

/// One cycle of `softmax_row` stimulus.
#[derive(Clone, Copy, Debug)]
pub struct RowCycle {
    pub op: u8,
    pub blk_max: u32,
    pub blk_sum: u32,
    pub c: u32,
}

/// Streams `cycles` through a fresh `softmax_row` (lazy threshold `threshold`, 0 for pow2;
/// max and sum write their state `latency` cycles after they issue) and compares its outputs
/// every cycle. Each max or sum is followed by `latency − 1` hold cycles whose operands are
/// the complements of its own (the unit must take them in the issue cycle), and the outputs
/// must show the state before the operation until it is written.
pub fn check_softmax_row(
    dut: &mut Dut,
    cycles: &[RowCycle],
    threshold: u8,
    latency: u32,
) -> anyhow::Result<Result<(), String>> {
    let ins = [
        dut.port("op")?,
        dut.port("blk_max")?,
        dut.port("blk_sum")?,
        dut.port("c")?,
    ];
    let outs = [
        dut.port("m")?,
        dut.port("l")?,
        dut.port("shift")?,
        dut.port("l_zero")?,
        dut.port("stale")?,
    ];
    dut.reset(1);
    // (the cycle driven, the operation it issues, if any)
    let mut driven: Vec<(RowCycle, Option<usize>)> = vec![];
    for (t, c) in cycles.iter().enumerate() {
        driven.push((*c, Some(t)));
        if c.op == RowOp::Max as u8 || c.op == RowOp::Sum as u8 {
            let hold = RowCycle {
                op: RowOp::Hold as u8,
                blk_max: !c.blk_max,
                blk_sum: !c.blk_sum,
                c: !c.c,
            };
            driven.extend((1..latency).map(|_| (hold, None)));
        }
    }
    let words: Vec<u32> = driven
        .iter()
        .flat_map(|(c, _)| [c.op as u32, c.blk_max, c.blk_sum, c.c])
        .collect();
    let out = dut.run(&ins, &words, &outs, driven.len() as u64);
    let mut state = RowState::default();
    let (mut shift, mut stale) = (0u8, false);
    // The operation in flight: the cycle its state shows, and the operation.
    let mut pending: Option<(usize, usize)> = None;
    let mut done = 0;
    for (k, (c, issued)) in driven.iter().enumerate() {
        if let Some((_, t)) = pending.filter(|&(at, _)| at == k) {
            let c = &cycles[t];
            match c.op {
                1 => {
                    state = RowState::default();
                    (shift, stale) = (0, false);
                }
                2 => {
                    let up = state.update_max_lazy(c.blk_max, c.c, threshold);
                    (shift, stale) = (up.shift, up.avoided);
                }
                3 => state.update_sum(c.blk_sum, shift),
                _ => {}
            }
            done = t + 1;
            pending = None;
        }
        let got = &out[k * 5..k * 5 + 5];
        let want = [
            state.m,
            state.l,
            shift as u32,
            (state.l & 0x7FFF_FFFF == 0) as u32,
            stale as u32,
        ];
        if got != want {
            return Ok(Err(format!(
                "softmax_row (latency {latency}) at cycle {k}, after {done} operations: m, l, \
                 shift, l_zero, stale = {:#010x?}, expected {:#010x?} (m = {:e}, l = {:e} \
                 expected); last operation {:?}",
                got,
                want,
                f32::from_bits(want[0]),
                f32::from_bits(want[1]),
                cycles[..done].last()
            )));
        }
        if let Some(t) = *issued {
            let wait = match c.op {
                2 | 3 => latency as usize,
                _ => 1,
            };
            pending = Some((k + wait, t));
        }
    }
    Ok(Ok(()))
}

fn row_cycle() -> impl Strategy<Value = RowCycle> {
    let op = prop_oneof![1 => Just(RowOp::Init as u8), 4 => Just(RowOp::Max as u8), 4 => Just(RowOp::Sum as u8), 1 => Just(RowOp::Hold as u8)];
    let blk_max = prop_oneof![
        6 => (-2000.0f32..2000.0).prop_map(f32::to_bits),
        1 => Just(F32_NEG_INF),
        1 => f32_value(),
    ];
    let blk_sum = prop_oneof![
        6 => (0.5f32..200.0).prop_map(f32::to_bits),
        1 => Just(0u32),
        1 => f32_value(),
    ];
    let c = prop_oneof![
        4 => prop::sample::select(vec![scale_constant(16), scale_constant(128), fp::F32_ONE]),
        1 => (1e-3f32..4.0).prop_map(f32::to_bits),
    ];
    (op, blk_max, blk_sum, c).prop_map(|(op, blk_max, blk_sum, c)| RowCycle {
        op,
        blk_max,
        blk_sum,
        c,
    })
}

/// Directed `softmax_row` stream: init, then every special block max followed by a sum of
/// every special, with hold cycles between.
pub fn softmax_row_directed() -> Vec<RowCycle> {
    let c = scale_constant(128);
    let cycle = |op: RowOp, blk_max: u32, blk_sum: u32| RowCycle {
        op: op as u8,
        blk_max,
        blk_sum,
        c,
    };
    // Blocks whose scores are all −Inf while m is still −Inf (padding keys first): shift 0.
    let mut v = vec![
        cycle(RowOp::Init, 0, 0),
        cycle(RowOp::Max, F32_NEG_INF, 0),
        cycle(RowOp::Sum, 0, 0),
        cycle(RowOp::Max, F32_NEG_INF, 0),
        cycle(RowOp::Sum, 0, 0),
        cycle(RowOp::Max, 2.0f32.to_bits(), 0),
        cycle(RowOp::Sum, 0, 1.5f32.to_bits()),
        cycle(RowOp::Max, F32_NEG_INF, 0),
        cycle(RowOp::Sum, 0, 0),
    ];
    // A ladder of growths 1, 2, ..., 16 (C = 1): each side of every lazy threshold.
    v.push(RowCycle {
        c: fp::F32_ONE,
        ..cycle(RowOp::Init, 0, 0)
    });
    let mut top = 0.0f32;
    for g in 0..=16 {
        top += g as f32;
        v.push(RowCycle {
            c: fp::F32_ONE,
            ..cycle(RowOp::Max, top.to_bits(), 0)
        });
        v.push(cycle(RowOp::Sum, 0, 2.5f32.to_bits()));
    }
    for &mx in F32_SPECIALS.iter().chain(&[F32_NEG_INF]) {
        for &sm in F32_SPECIALS {
            v.push(RowCycle {
                op: RowOp::Init as u8,
                blk_max: 0,
                blk_sum: 0,
                c,
            });
            v.push(RowCycle {
                op: RowOp::Max as u8,
                blk_max: 3.5f32.to_bits(),
                blk_sum: 0,
                c,
            });
            v.push(RowCycle {
                op: RowOp::Sum as u8,
                blk_max: 0,
                blk_sum: 1.25f32.to_bits(),
                c,
            });
            v.push(RowCycle {
                op: RowOp::Max as u8,
                blk_max: mx,
                blk_sum: 0,
                c,
            });
            v.push(RowCycle {
                op: RowOp::Hold as u8,
                blk_max: mx,
                blk_sum: sm,
                c,
            });
            v.push(RowCycle {
                op: RowOp::Sum as u8,
                blk_max: 0,
                blk_sum: sm,
                c,
            });
        }
    }
    v
}

/// proptest over `softmax_row` streams of up to `max_len` cycles; returns cycles checked.
pub fn proptest_softmax_row(
    dut: &mut Dut,
    cases: u32,
    max_len: usize,
    seed: u64,
    threshold: u8,
    latency: u32,
) -> anyhow::Result<u64> {
    check_streams(cases, seed, max_len, row_cycle(), |cycles| {
        check_softmax_row(dut, cycles, threshold, latency)
    })
}

/// One cycle of SRAM bank stimulus.
#[derive(Clone, Copy, Debug)]
pub struct SramCycle {
    pub we: bool,
    pub waddr: u32,
    pub wdata: u32,
    pub re: bool,
    pub raddr: u32,
}

/// Streams `cycles` through a fresh bank of `depth` words of `width` bits and compares the
/// read data with `kernels::sram::Sram` after every cycle. The model's words start at zero;
/// the stream first writes every word (the RTL's start undefined).
pub fn check_sram(
    dut: &mut Dut,
    depth: u32,
    width: u32,
    cycles: &[SramCycle],
) -> anyhow::Result<Result<(), String>> {
    let ins = [
        dut.port("we")?,
        dut.port("waddr")?,
        dut.port("wdata")?,
        dut.port("re")?,
        dut.port("raddr")?,
    ];
    let outs = [dut.port("rd_data")?];
    // No reset (the bank has none): the stream starts by writing every word.
    let init = (0..depth).map(|a| SramCycle {
        we: true,
        waddr: a,
        wdata: 0,
        re: false,
        raddr: 0,
    });
    // One read of word 0 (zero) makes the read register defined as well; an idle cycle at the
    // end shows the last cycle's read.
    let idle = SramCycle {
        we: false,
        waddr: 0,
        wdata: 0,
        re: false,
        raddr: 0,
    };
    let all: Vec<SramCycle> = init
        .chain([SramCycle { re: true, ..idle }])
        .chain(cycles.iter().copied())
        .chain([idle])
        .collect();
    let words: Vec<u32> = all
        .iter()
        .flat_map(|c| [c.we as u32, c.waddr, c.wdata, c.re as u32, c.raddr])
        .collect();
    let out = dut.run(&ins, &words, &outs, all.len() as u64);
    let mut bank = kernels::sram::Sram::new(depth as usize, width);
    let skip = depth as usize + 1;
    for (t, c) in all.iter().enumerate() {
        if t >= skip && out[t] as u64 != bank.rd_data() {
            return Ok(Err(format!(
                "sram after {} stimulus cycles: rd_data = {:#x}, expected {:#x}; last cycle {:?}",
                t - skip,
                out[t],
                bank.rd_data(),
                all[t - 1]
            )));
        }
        bank.clock(
            c.we,
            c.waddr as usize,
            c.wdata as u64,
            c.re,
            c.raddr as usize,
        );
    }
    Ok(Ok(()))
}

/// A legal cycle for a bank of `ports` ports (a single port never reads and writes at once).
fn sram_cycle(depth: u32, width: u32, ports: u32) -> impl Strategy<Value = SramCycle> {
    let mask = if width >= 32 {
        u32::MAX
    } else {
        (1 << width) - 1
    };
    (
        any::<bool>(),
        0..depth,
        any::<u32>(),
        any::<bool>(),
        0..depth,
    )
        .prop_map(move |(we, waddr, wdata, re, raddr)| SramCycle {
            we,
            waddr,
            wdata: wdata & mask,
            re: re && !(ports == 1 && we),
            raddr,
        })
}

/// Directed stream: write then read every word with alternating patterns, a read and a write
/// of the same word in one cycle (dual-port: the old word), reads held across idle cycles.
pub fn sram_directed(depth: u32, width: u32, ports: u32) -> Vec<SramCycle> {
    let mask = if width >= 32 {
        u32::MAX
    } else {
        (1 << width) - 1
    };
    let c = |we, waddr, wdata: u32, re, raddr| SramCycle {
        we,
        waddr,
        wdata: wdata & mask,
        re,
        raddr,
    };
    let mut v = vec![];
    for a in 0..depth {
        v.push(c(
            true,
            a,
            if a % 2 == 0 { 0xAAAA_AAAA } else { 0x5555_5555 } ^ a,
            false,
            0,
        ));
    }
    for a in 0..depth {
        v.push(c(false, 0, 0, true, a));
        v.push(c(false, 0, 0, false, 0));
    }
    for a in 0..depth {
        if ports == 2 {
            v.push(c(true, a, !a, true, a));
        } else {
            v.push(c(true, a, !a, false, 0));
            v.push(c(false, 0, 0, true, a));
        }
        v.push(c(false, 0, 0, true, a));
    }
    v.push(c(true, depth - 1, mask, false, 0));
    v.push(c(false, 0, 0, true, depth - 1));
    v
}

/// proptest over SRAM streams of up to `max_len` cycles; returns cycles checked.
pub fn proptest_sram(
    dut: &mut Dut,
    cfg: hdl::mem::sram::SramConfig,
    cases: u32,
    max_len: usize,
    seed: u64,
) -> anyhow::Result<u64> {
    let item = sram_cycle(cfg.depth, cfg.width, cfg.ports);
    check_streams(cases, seed, max_len, item, |cycles| {
        check_sram(dut, cfg.depth, cfg.width, cycles)
    })
}
