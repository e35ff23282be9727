//! Checking a PE, or a grid of them, cycle by cycle: random operation streams (MAC, clear-MAC,
//! load, idle) with biased FP operands run through the RTL while a functional model applies
//! each operation at the cycle the RTL writes it back; the read port is compared every cycle,
//! and at the end every register of every PE is read back and compared.
//!
//! The stream obeys the PE's documented hazard rule: an operation on a register issues at least
//! `reuse` cycles after the previous operation on it (`PeConfig::reuse_gap`: the latency, less
//! the accumulator read's delay behind a deep multiplier; an operation that would break the rule
//! becomes idle), so a mismatch is a bug, not a misuse.

use std::collections::VecDeque;
use std::fmt;

use kernels::pe::{PeModel, PeOp};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError};
use verilator_tb::Model;

use super::stimulus::{f32_value, operand_specials, operand_value, F32_SPECIALS};
use kernels::format::Format;
use kernels::quant::QkFormat;

/// Shape of the PE block under test (a single PE is a 1×1 grid: the ports are the same).
#[derive(Clone, Copy, Debug)]
pub struct GridShape {
    pub rows: u32,
    pub cols: u32,
    pub regs: u32,
    /// Issue-to-visible latency (the module's manifest latency).
    pub latency: u32,
    /// The fewest cycles between two operations on one register (`PeConfig::reuse_gap`).
    pub reuse: u32,
    /// The operands' format (binary16 or bfloat16).
    pub format: Format,
    /// Integer QKᵀ's format: the PE also takes the integer operations (8 to 10).
    pub qk: Option<QkFormat>,
    /// The PE accumulates in its MAC's pipeline: it also takes `MacFeed` (6).
    pub feedback: bool,
}

/// One cycle of raw stimulus; the harness maps it onto a legal operation.
#[derive(Clone, Debug)]
pub struct PeCycle {
    pub op: u8,
    /// Per PE (row-major): whether it takes part (a masked PE does nothing).
    pub en: Vec<bool>,
    pub shift: u8,
    pub hot: bool,
    pub addr: u32,
    pub a: Vec<u16>,
    pub b: Vec<u16>,
    pub ld_data: u32,
    pub rd_addr: u32,
    pub rd_row: u32,
}

/// Random cycles for a grid of `rows` × `cols`: mostly MACs into a few hot registers, so long
/// accumulation chains form (with `feedback`, half of them `MacFeed`: runs in the MAC's loop).
/// With integer QKᵀ (`qk`) the integer operations join in, on the same registers, and the
/// operands are as often any 16 bits (packed integers) as values.
pub fn pe_cycle(
    rows: u32,
    cols: u32,
    format: Format,
    qk: Option<QkFormat>,
    feedback: bool,
) -> impl Strategy<Value = PeCycle> {
    let value = move || -> BoxedStrategy<u16> {
        let v = operand_value(format);
        if qk.is_some() {
            prop_oneof![v, any::<u16>()].boxed()
        } else {
            v
        }
    };
    let fp_op = prop_oneof![
        4 => Just(PeOp::Mac as u8),
        1 => Just(PeOp::MacClear as u8),
        1 => Just(PeOp::Load as u8),
        1 => Just(PeOp::MacZero as u8),
        2 => Just(PeOp::MacScale as u8),
        1 => Just(PeOp::Nop as u8),
        1 => 6u8..=7,
    ]
    .boxed();
    // With feedback, runs: half the cycles continue the previous cycle's.
    let fp_op = if feedback {
        prop_oneof![fp_op, Just(PeOp::MacFeed as u8)].boxed()
    } else {
        fp_op
    };
    let op = if qk.is_some() {
        prop_oneof![
            5 => fp_op,
            4 => Just(PeOp::IntMac as u8),
            1 => Just(PeOp::IntClear as u8),
            2 => Just(PeOp::IntLast as u8),
            1 => 11u8..=15,
        ]
        .boxed()
    } else {
        fp_op.boxed()
    };
    let shift = prop_oneof![3 => 0u8..=4, 1 => any::<u8>()];
    (
        (
            op,
            prop::collection::vec(prop::bool::weighted(0.85), (rows * cols) as usize),
            shift,
        ),
        prop::bool::weighted(0.8),
        any::<u32>(),
        prop::collection::vec(value(), rows as usize),
        prop::collection::vec(value(), cols as usize),
        f32_value(),
        any::<u32>(),
        any::<u32>(),
    )
        .prop_map(
            |((op, en, shift), hot, addr, a, b, ld_data, rd_addr, rd_row)| PeCycle {
                op,
                en,
                shift,
                hot,
                addr,
                a,
                b,
                ld_data,
                rd_addr,
                rd_row,
            },
        )
}

/// Directed stream: every binary32 special loaded into a register, then two MACs of every pair
/// of the operand format's specials on top of it (special + special × special), for each PE a
/// different pairing. Six registers rotate, so no operation waits on the hazard rule
/// (latency ≤ 6).
pub fn directed_pe_stream(rows: u32, cols: u32, format: Format) -> Vec<PeCycle> {
    let specials = &operand_specials(format)[..];
    let n16 = specials.len();
    let mut triples = vec![];
    for &ld in F32_SPECIALS {
        for i in 0..n16 {
            for j in 0..n16 {
                triples.push((ld, i, j));
            }
        }
    }
    let mut cycles = vec![];
    for (g, group) in triples.chunks(HOT as usize).enumerate() {
        // Load a special, then a MAC of special operands, then a rescaling MAC (shifts 0, 1,
        // 23, 126, 149, 255 in turn) or a MAC from +0.
        let shift = [0u8, 1, 23, 126, 149, 255][g % 6];
        let third = if g % 7 == 3 {
            PeOp::MacZero
        } else {
            PeOp::MacScale
        } as u8;
        for (phase, op) in [(0, PeOp::Load as u8), (1, PeOp::Mac as u8), (2, third)] {
            for (reg, &(ld, i, j)) in group.iter().enumerate() {
                // Row r multiplies special (i + r), column c special (j + c); the second MAC
                // swaps the operands.
                let (fa, fb) = if phase == 2 { (j, i) } else { (i, j) };
                cycles.push(PeCycle {
                    op,
                    en: vec![true; (rows * cols) as usize],
                    shift,
                    hot: true,
                    addr: reg as u32,
                    a: (0..rows)
                        .map(|r| specials[(fa + r as usize) % n16])
                        .collect(),
                    b: (0..cols)
                        .map(|c| specials[(fb + c as usize) % n16])
                        .collect(),
                    ld_data: ld,
                    rd_addr: 2 * reg as u32,
                    rd_row: (reg as u32) % rows,
                });
            }
        }
    }
    cycles
}

/// Directed runs in the MAC's loop (a PE with feedback): a binary32 special loaded into each
/// of six registers, then on each a run started every way (MAC, clear-MAC, MAC from +0,
/// rescaling MAC) and continued by four MacFeeds of the operand format's specials, some of them
/// masked on some PEs (the run's value, ±0 and NaN included, must pass on unchanged), and runs
/// whose start is masked.
pub fn directed_feed_stream(rows: u32, cols: u32, format: Format) -> Vec<PeCycle> {
    let specials = &operand_specials(format)[..];
    let n16 = specials.len();
    let n = (rows * cols) as usize;
    let cycle = |op: PeOp, reg: u32, i: usize, en: Vec<bool>, ld: u32| PeCycle {
        op: op as u8,
        en,
        shift: [0u8, 1, 23, 149][i % 4],
        hot: true,
        addr: reg,
        a: (0..rows)
            .map(|r| specials[(i + r as usize) % n16])
            .collect(),
        b: (0..cols)
            .map(|c| specials[(3 * i + 1 + c as usize) % n16])
            .collect(),
        ld_data: ld,
        rd_addr: 2 * reg,
        rd_row: reg % rows,
    };
    let starts = [PeOp::Mac, PeOp::MacClear, PeOp::MacZero, PeOp::MacScale];
    let mut v = vec![];
    for (g, lds) in F32_SPECIALS.chunks(HOT as usize).enumerate() {
        for (reg, &ld) in lds.iter().enumerate() {
            v.push(cycle(PeOp::Load, reg as u32, g, vec![true; n], ld));
        }
        for reg in 0..lds.len() {
            let k = g * HOT as usize + reg;
            // Every third run starts masked on PE 0; MacFeeds masked on every other PE in turn.
            let mut en = vec![true; n];
            en[0] = k % 3 != 2;
            v.push(cycle(starts[k % 4], reg as u32, k, en, 0));
            for f in 0..4 {
                let en = (0..n)
                    .map(|pe| (pe + f + k).is_multiple_of(2) || f == 3)
                    .collect();
                v.push(cycle(PeOp::MacFeed, reg as u32, k + 5 * f + 1, en, 0));
            }
        }
        for _ in 0..HOT {
            v.push(cycle(PeOp::Nop, 0, 0, vec![false; n], 0));
        }
    }
    v
}

/// A read-port mismatch.
#[derive(Debug, Clone)]
pub struct PeMismatch {
    pub cycle: usize,
    pub row: u32,
    pub col: u32,
    pub reg: u32,
    pub expected: u32,
    pub actual: u32,
    /// The operations the model applied to that register, oldest first.
    pub history: Vec<String>,
}

impl fmt::Display for PeMismatch {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        writeln!(
            f,
            "PE ({}, {}) register {} read on cycle {}: expected {:#010x} ({:e}), RTL {:#010x} ({:e})",
            self.row,
            self.col,
            self.reg,
            self.cycle,
            self.expected,
            f32::from_bits(self.expected),
            self.actual,
            f32::from_bits(self.actual)
        )?;
        write!(
            f,
            "  operations on that register: {}",
            self.history.join("; ")
        )
    }
}

const HOT: u32 = 6;

/// The operation a code asks of a PE (integer ones only of a PE with integer QKᵀ).
fn decode(op: u8, qk: bool, feedback: bool) -> PeOp {
    match op {
        1 => PeOp::Mac,
        2 => PeOp::MacClear,
        3 => PeOp::Load,
        4 => PeOp::MacZero,
        5 => PeOp::MacScale,
        6 if feedback => PeOp::MacFeed,
        8 if qk => PeOp::IntClear,
        9 if qk => PeOp::IntMac,
        10 if qk => PeOp::IntLast,
        _ => PeOp::Nop,
    }
}

/// Directed integer stream (a PE with integer QKᵀ): every pair of extreme packed operands
/// (lanes 0, ±1, the format's most negative and most positive) accumulated, a chain long
/// enough to pass 2^24, and conversions of loaded int32 values around 2^24 (ties both ways),
/// 2^31 and the most negative; an accumulation that wraps past 2^31.
pub fn directed_int_stream(rows: u32, cols: u32, qk: QkFormat) -> Vec<PeCycle> {
    let b = qk.bits();
    let lanes = qk.lanes();
    let fill = |v: u16| (0..lanes).fold(0u16, |acc, i| acc | ((v & ((1 << b) - 1)) << (i * b)));
    let extremes: Vec<u16> = [0u16, 1, (1 << b) - 1, 1 << (b - 1), (1 << (b - 1)) - 1]
        .iter()
        .map(|&v| fill(v))
        .chain([0x1234, 0x8001, 0x7ffe])
        .collect();
    let n = rows * cols;
    let cycle = |op: PeOp, addr: u32, a: u16, bb: u16, ld: u32| PeCycle {
        op: op as u8,
        en: vec![true; n as usize],
        shift: 0,
        hot: true,
        addr,
        a: (0..rows).map(|r| a.rotate_left(r)).collect(),
        b: (0..cols).map(|c| bb.rotate_left(3 * c)).collect(),
        ld_data: ld,
        rd_addr: 2 * addr,
        rd_row: addr % rows,
    };
    let mut v = vec![];
    // Every pair, each on its own register: clear, two accumulations, the conversion.
    for (k, pair) in extremes
        .iter()
        .flat_map(|&x| extremes.iter().map(move |&y| (x, y)))
        .collect::<Vec<_>>()
        .chunks(HOT as usize)
        .enumerate()
    {
        let op3 = if k % 2 == 0 {
            PeOp::IntLast
        } else {
            PeOp::IntMac
        };
        for op in [PeOp::IntClear, PeOp::IntMac, op3] {
            for (reg, &(x, y)) in pair.iter().enumerate() {
                v.push(cycle(op, reg as u32, x, y, 0));
            }
        }
    }
    // Operations on one register, each followed by idle cycles (the hazard rule).
    let mut spaced = |c: PeCycle| {
        v.push(c);
        for _ in 0..HOT - 1 {
            v.push(cycle(PeOp::Nop, 5, 0, 0, 0));
        }
    };
    // The largest products accumulated from just below 2^24 past it, then converted.
    let big = fill(1 << (b - 1));
    let step = lanes << (2 * (b - 1));
    spaced(cycle(PeOp::Load, 0, 0, 0, (1 << 24) - 2 * step - 1));
    for _ in 0..4 {
        spaced(cycle(PeOp::IntMac, 0, big, big, 0));
    }
    spaced(cycle(PeOp::IntLast, 0, big, big, 0));
    // Loaded int32 values converted (a product of ones added), and a wrap past 2^31.
    let loads = [
        (1u32 << 24) + 1,
        (1 << 24) + 3,
        ((1u32 << 24) + 1).wrapping_neg(),
        0x7fff_ffff,
        0x8000_0000,
        0xffff_ffff,
        0x00ff_ffff,
        0x0100_0002,
    ];
    for (k, &ld) in loads.iter().enumerate() {
        let reg = k as u32 % HOT;
        spaced(cycle(PeOp::Load, reg, 0, 0, ld));
        let op = if ld == 0x7fff_ffff {
            PeOp::IntMac
        } else {
            PeOp::IntLast
        };
        spaced(cycle(op, reg, fill(1), fill(1), 0));
    }
    v
}

/// What one stream exercised.
#[derive(Clone, Copy, Debug, Default)]
pub struct StreamStats {
    /// Operations issued (after the hazard rule).
    pub ops: u64,
    /// Clock cycles simulated (stimulus, drain and read-back).
    pub sim_cycles: u64,
}

/// One cycle of legal stimulus: the operation the RTL gets (after the hazard rule) and the
/// read port's address.
struct Issue {
    op: PeOp,
    raw_op: u8,
    en: Vec<bool>,
    shift: u8,
    addr: u32,
    a: Vec<u16>,
    b: Vec<u16>,
    ld_data: u32,
    rd_addr: u32,
    rd_row: u32,
}

/// The stream `cycles` made legal (an operation that breaks the hazard rule becomes idle),
/// followed by the drain and the read-back sweep of every register. Returns the issues and
/// the number of operations issued.
fn legalize(shape: GridShape, cycles: &[PeCycle]) -> (Vec<Issue>, u64) {
    let GridShape {
        rows,
        cols,
        regs,
        latency,
        reuse,
        ..
    } = shape;
    let hot = HOT.min(regs);
    let mut last = vec![i64::MIN / 2; regs as usize];
    let mut issues: Vec<Issue> = vec![];
    let mut ops = 0u64;
    // Per PE: the run of the previous cycle's operation had a live operation.
    let mut run_live = vec![false; (rows * cols) as usize];
    for (t, c) in cycles.iter().enumerate() {
        let mut addr = if c.hot { c.addr % hot } else { c.addr % regs };
        let mut op = decode(c.op, shape.qk.is_some(), shape.feedback);
        // Codes 6 and 7 reach the RTL as they are: they must behave as NOPs (6 is MacFeed
        // with feedback).
        let mut raw_op = c.op;
        let mut en = c.en.clone();
        if op == PeOp::MacFeed {
            // A MacFeed continues the previous cycle's run, on its register; a PE whose run has
            // had no live operation takes it masked.
            match issues.last() {
                Some(prev) if continues_run(prev.op) => {
                    addr = prev.addr;
                    last[addr as usize] = t as i64;
                    ops += 1;
                    for (e, live) in en.iter_mut().zip(&run_live) {
                        *e &= live;
                    }
                }
                _ => {
                    op = PeOp::Nop;
                    raw_op = PeOp::Nop as u8;
                }
            }
        } else if op != PeOp::Nop {
            if (t as i64) - last[addr as usize] < reuse as i64 {
                op = PeOp::Nop;
                raw_op = PeOp::Nop as u8;
            } else {
                last[addr as usize] = t as i64;
                ops += 1;
            }
        }
        for (live, &e) in run_live.iter_mut().zip(&en) {
            *live = run_live_after(op, e, *live);
        }
        let rd_addr = if c.rd_addr & 1 == 0 {
            (c.rd_addr >> 1) % hot
        } else {
            (c.rd_addr >> 1) % regs
        };
        issues.push(Issue {
            op,
            raw_op,
            en,
            shift: c.shift,
            addr,
            a: c.a.clone(),
            b: c.b.clone(),
            ld_data: c.ld_data,
            rd_addr,
            rd_row: c.rd_row % rows,
        });
    }
    let idle = |rd_row: u32, rd_addr: u32| Issue {
        op: PeOp::Nop,
        raw_op: 0,
        en: vec![false; (rows * cols) as usize],
        shift: 0,
        addr: 0,
        a: vec![0; rows as usize],
        b: vec![0; cols as usize],
        ld_data: 0,
        rd_addr,
        rd_row,
    };
    for _ in 0..latency {
        issues.push(idle(0, 0));
    }
    for r in 0..rows {
        for k in 0..regs {
            issues.push(idle(r, k));
        }
    }
    (issues, ops)
}

/// Whether a MacFeed may continue an operation `op` (a MAC of any kind).
fn continues_run(op: PeOp) -> bool {
    matches!(
        op,
        PeOp::Mac | PeOp::MacClear | PeOp::MacZero | PeOp::MacScale | PeOp::MacFeed
    )
}

/// Whether a PE's run has had a live operation after `op` (`en`: the PE takes part), given
/// whether it had before: a live operation, or a MacFeed continuing a run that had one.
fn run_live_after(op: PeOp, en: bool, before: bool) -> bool {
    (en && op != PeOp::Nop) || (op == PeOp::MacFeed && before)
}

/// For each issue, whether PE `pe` writes its result back: a live operation, or a MacFeed of a
/// run with one, unless the next cycle's MacFeed continues it (its run writes once, at its end).
fn writes(issues: &[Issue], pe: usize) -> Vec<bool> {
    let mut run_live = false;
    let mut out = Vec::with_capacity(issues.len());
    for (t, i) in issues.iter().enumerate() {
        run_live = run_live_after(i.op, i.en[pe], run_live);
        let continued = issues.get(t + 1).is_some_and(|n| n.op == PeOp::MacFeed);
        out.push(run_live && !continued);
    }
    out
}

/// The input words of `issues`, packed per cycle in the order of the input ports.
fn pack_inputs(rows: u32, issues: &[Issue]) -> Vec<u32> {
    let pack16 = |xs: &[u16], words: &mut Vec<u32>| {
        for pair in xs.chunks(2) {
            words.push(pair[0] as u32 | pair.get(1).map_or(0, |&x| (x as u32) << 16));
        }
    };
    let mut words = vec![];
    for i in issues {
        pack16(&i.a, &mut words);
        pack16(&i.b, &mut words);
        words.push(i.raw_op as u32);
        let en: Vec<u64> = i.en.iter().map(|&e| e as u64).collect();
        super::pure::pack(&en, 1, &mut words);
        words.push(i.addr);
        words.push(i.ld_data);
        words.push(i.shift as u32);
        words.push(i.rd_addr);
        if rows > 1 {
            words.push(i.rd_row);
        }
    }
    words
}

/// The outputs sampled each cycle: `per` words a cycle, the read port's `cols` words first,
/// then (a single PE) its register-file port activity.
struct Sampled {
    out: Vec<u32>,
    per: usize,
}

/// Checks a single PE's register-file port activity: the accumulator port reads for a live
/// Mac or MacScale as it issues; the write port writes the live operation issued
/// `latency - 1` cycles before (its MAC latency). Returns the first mismatch.
fn check_port_activity(shape: GridShape, issues: &[Issue], s: &Sampled) -> Option<PeMismatch> {
    let cols = shape.cols as usize;
    let live = |i: &Issue| i.op != PeOp::Nop && i.en[0];
    let mac_latency = shape.latency as usize - 1;
    // The accumulator read is reported a cycle after issue (at issue with a combinational MAC).
    let late = mac_latency.min(1);
    let writes = writes(issues, 0);
    for (t, i) in issues.iter().enumerate() {
        let acc_want = t >= late
            && live(&issues[t - late])
            && matches!(
                issues[t - late].op,
                PeOp::Mac | PeOp::MacScale | PeOp::IntMac | PeOp::IntLast
            );
        let wr_want = t >= mac_latency && writes[t - mac_latency];
        let (acc, wr) = (s.out[t * s.per + cols], s.out[t * s.per + cols + 1]);
        if (acc != 0) != acc_want || (wr != 0) != wr_want {
            return Some(PeMismatch {
                cycle: t,
                row: 0,
                col: 0,
                reg: i.addr,
                expected: (acc_want as u32) | (wr_want as u32) << 1,
                actual: acc | wr << 1,
                history: vec![format!(
                    "register-file port activity (bit 0: accumulator read, bit 1: write) \
                     a cycle after {:?} (en {}) and {:?} (en {}) issued at cycles {} and {}",
                    issues[t.saturating_sub(late)].op,
                    issues[t.saturating_sub(late)].en[0],
                    issues[t.saturating_sub(mac_latency)].op,
                    issues[t.saturating_sub(mac_latency)].en[0],
                    t.saturating_sub(late),
                    t.saturating_sub(mac_latency),
                )],
            });
        }
    }
    None
}

/// Replays `issues` on the functional model, applying each operation at the cycle the RTL
/// writes it back, and compares the read port every cycle. Returns the first mismatch.
fn replay(shape: GridShape, issues: &[Issue], s: &Sampled) -> Option<PeMismatch> {
    let GridShape {
        rows,
        cols,
        regs,
        latency,
        format,
        qk,
        ..
    } = shape;
    let mut pes: Vec<PeModel> = (0..rows * cols)
        .map(|_| PeModel {
            qk,
            ..PeModel::with_format(regs as usize, format)
        })
        .collect();
    let mut history: Vec<Vec<String>> = vec![vec![]; (rows * cols * regs) as usize];
    let n = (rows * cols) as usize;
    let writes: Vec<Vec<bool>> = (0..n).map(|pe| writes(issues, pe)).collect();
    // Per PE: the value of the last operation applied (a MacFeed's addend, its run so far).
    let mut run_value = vec![0u32; n];
    let mut pending: VecDeque<usize> = VecDeque::new();
    for (t, i) in issues.iter().enumerate() {
        while let Some(&j) = pending.front() {
            if j + latency as usize > t {
                break;
            }
            pending.pop_front();
            let op = &issues[j];
            for r in 0..rows {
                for c in 0..cols {
                    let k = (r * cols + c) as usize;
                    let (a, b) = (op.a[r as usize], op.b[c as usize]);
                    let pe = &mut pes[k];
                    let addr = op.addr as usize;
                    let en = op.en[k];
                    // A MacFeed adds to its run's value (a masked one passes it on); the others
                    // to the register.
                    let old = if op.op == PeOp::MacFeed {
                        run_value[k]
                    } else {
                        pe.regs[addr]
                    };
                    let value = match (op.op, en) {
                        (PeOp::MacFeed, false) => Some(old),
                        _ => pe.result(op.op, old, a, b, op.ld_data, op.shift),
                    };
                    if let Some(v) = value {
                        run_value[k] = v;
                        if writes[k][j] {
                            pe.regs[addr] = v;
                        }
                    }
                    if en || op.op == PeOp::MacFeed {
                        let h = &mut history[((r * cols + c) * regs + op.addr) as usize];
                        h.push(format!(
                            "cycle {j}: {:?}{} a={a:#06x} b={b:#06x} ld={:#010x} shift={}{}",
                            op.op,
                            if en { "" } else { " (masked)" },
                            op.ld_data,
                            op.shift,
                            if writes[k][j] { "" } else { " (not written)" }
                        ));
                    }
                }
            }
        }
        for c in 0..cols {
            let expected = pes[(i.rd_row * cols + c) as usize].regs[i.rd_addr as usize];
            let actual = s.out[t * s.per + c as usize];
            if expected != actual {
                let h = &history[((i.rd_row * cols + c) * regs + i.rd_addr) as usize];
                return Some(PeMismatch {
                    cycle: t,
                    row: i.rd_row,
                    col: c,
                    reg: i.rd_addr,
                    expected,
                    actual,
                    history: h[h.len().saturating_sub(4)..].to_vec(),
                });
            }
        }
        if i.op != PeOp::Nop {
            pending.push_back(t);
        }
    }
    None
}

/// Runs `cycles` (plus a drain and a full read-back) on a fresh instance of `model` and compares
/// every read with the functional model.
pub fn check_pe_stream(
    model: &Model,
    shape: GridShape,
    cycles: &[PeCycle],
) -> anyhow::Result<Result<StreamStats, PeMismatch>> {
    let (rows, cols) = (shape.rows, shape.cols);
    let mut dut = model.dut()?;
    let mut in_ports = vec![
        dut.port("a")?,
        dut.port("b")?,
        dut.port("op")?,
        dut.port("en")?,
        dut.port("addr")?,
        dut.port("ld_data")?,
        dut.port("shift")?,
        dut.port("rd_addr")?,
    ];
    if rows > 1 {
        in_ports.push(dut.port("rd_row")?);
    }
    let rd_data = dut.port("rd_data")?;
    // A single PE also reports its register-file port activity (the grid does not).
    let port_activity = match (dut.port("rf_acc_read"), dut.port("rf_write")) {
        (Ok(acc), Ok(wr)) => Some((acc, wr)),
        _ => None,
    };

    // Legalize the stream, then append the drain and the read-back sweep.
    let (issues, ops) = legalize(shape, cycles);
    let words = pack_inputs(rows, &issues);
    let mut out_ports = vec![rd_data];
    if let Some((acc, wr)) = port_activity {
        out_ports.extend([acc, wr]);
    }
    let per = cols as usize + 2 * port_activity.is_some() as usize;
    let out = dut.run(&in_ports, &words, &out_ports, issues.len() as u64);
    let sampled = Sampled { out, per };
    if port_activity.is_some() {
        if let Some(e) = check_port_activity(shape, &issues, &sampled) {
            return Ok(Err(e));
        }
    }
    if let Some(e) = replay(shape, &issues, &sampled) {
        return Ok(Err(e));
    }
    Ok(Ok(StreamStats {
        ops,
        sim_cycles: issues.len() as u64,
    }))
}

/// What a PE proptest run checked.
#[derive(Clone, Copy, Debug, Default)]
pub struct PeChecked {
    /// Random stimulus cycles streamed (each a vector of all the block's inputs).
    pub cycles: u64,
    /// Operations (MAC, clear-MAC, load) among them that passed the hazard rule.
    pub ops: u64,
    /// Clock cycles simulated, drains and read-backs included.
    pub sim_cycles: u64,
}

/// Runs `cases` proptest cases, each a stream of 1 to `max_len` random cycles; returns what was
/// checked. On a mismatch proptest shrinks the stream (dropping cycles, simplifying operands).
pub fn proptest_pe(
    model: &Model,
    shape: GridShape,
    cases: u32,
    max_len: usize,
    seed: u64,
) -> anyhow::Result<PeChecked> {
    let config = Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    };
    let checked = std::cell::Cell::new(PeChecked::default());
    let strategy = prop::collection::vec(
        pe_cycle(
            shape.rows,
            shape.cols,
            shape.format,
            shape.qk,
            shape.feedback,
        ),
        1..=max_len,
    );
    let result = super::seeds::run(config, seed, &strategy, |cycles| {
        match check_pe_stream(model, shape, &cycles) {
            Ok(Ok(n)) => {
                let c = checked.get();
                checked.set(PeChecked {
                    cycles: c.cycles + cycles.len() as u64,
                    ops: c.ops + n.ops,
                    sim_cycles: c.sim_cycles + n.sim_cycles,
                });
                Ok(())
            }
            Ok(Err(m)) => Err(TestCaseError::fail(m.to_string())),
            Err(e) => Err(TestCaseError::fail(format!("harness error: {e:#}"))),
        }
    });
    super::outcome(result, |minimal| {
        format!(
            "(minimal failing stream after shrinking: {} cycle(s): {minimal:x?})",
            minimal.len()
        )
    })?;
    Ok(checked.get())
}
