//! Checking the AXI4-Lite register block (`hdl::soc::csr`) against its model
//! (`kernels::csr`): streams of writes and reads at random offsets (mapped or not), data and
//! strobes, with random delays on every channel, interleaved with changes of the core's
//! status and counters. After each transaction its response (and read data) must equal the
//! model's, the problem outputs and `irq` must equal the model's registers, and `start` and
//! `abort` must have pulsed exactly as often as the model says.

use std::cell::RefCell;

use anyhow::Result;
use hdl::core::ports::{Counters, Problem};
use hdl::core::{CoreParams, COUNTERS};
use hdl::ir::iface::Ports;
use hdl::soc::batch::VarlenRegs;
use hdl::soc::regmap::{self, Kind, ProblemReg};
use kernels::csr::{AddressCheck, CoreStatus, Csr, LinkView, Reg};
use proptest::prelude::*;
use verilator_tb::Dut;

use super::axil::{self, Delays};
use super::stateful::check_streams;

/// The model of core `p`'s register block (its problem values in `ProblemReg::ALL` order).
pub fn model(p: &CoreParams) -> Csr {
    let regs = regmap::registers(p)
        .into_iter()
        .map(|r| {
            let m = match r.kind {
                Kind::Const(c) => Reg::Const(c),
                Kind::Ctrl => Reg::Ctrl,
                Kind::Status => Reg::Status,
                Kind::IrqEnable => Reg::IrqEnable,
                Kind::IrqStatus => Reg::IrqStatus,
                Kind::Problem { reg, half, width } => Reg::Value {
                    value: ProblemReg::ALL
                        .iter()
                        .position(|&v| v == reg)
                        .expect("a value"),
                    lsb: 32 * half,
                    width: width.saturating_sub(32 * half).min(32),
                },
                Kind::Counter { index, hi: false } => Reg::CounterLo(index),
                Kind::Counter { hi: true, .. } | Kind::GlbBank { hi: true, .. } => Reg::CounterHi,
                Kind::GlbBankSel { width } => Reg::BankSel { width },
                Kind::GlbBank { writes, hi: false } => Reg::BankLo { writes },
                Kind::LinkStatus => Reg::LinkStatus,
                Kind::LinkFailed => Reg::LinkFailed,
                Kind::LinkProbe => Reg::LinkProbe,
            };
            (r.offset, m)
        })
        .collect();
    let index = |r: ProblemReg| {
        ProblemReg::ALL
            .iter()
            .position(|&v| v == r)
            .expect("a value")
    };
    let (lists, always): (Vec<ProblemReg>, Vec<ProblemReg>) = ProblemReg::all(p)
        .into_iter()
        .filter(|r| r.is_address())
        .partition(|r| r.is_list());
    let check = AddressCheck {
        addr_bits: p.addr_bits,
        always: always.into_iter().map(index).collect(),
        lists: lists.into_iter().map(index).collect(),
        batch: index(ProblemReg::Batch),
    };
    Csr::new(regs, ProblemReg::ALL.len(), check)
}

/// One step of a stream.
#[derive(Clone, Debug)]
pub enum Op {
    Write {
        addr: u32,
        data: u32,
        strb: u8,
        d: Delays,
    },
    Read {
        addr: u32,
        d: Delays,
    },
    /// The core's status and counters change (and stay).
    Core(CoreStatus),
    /// A launch ends: `finish` pulses for one cycle.
    Finish,
}

/// Runs `ops` on a reset block; the first difference from the model, if any.
pub fn check(dut: &mut Dut, p: &CoreParams, ops: &[Op]) -> Result<Result<(), String>> {
    let mut m = model(p);
    let mut st = CoreStatus {
        counters: vec![0; COUNTERS.len()],
        banks: vec![(0, 0); bank_groups(p)],
        ..Default::default()
    };
    axil::idle(dut);
    apply(dut, p, &st);
    dut.reset(2);
    let pulses = RefCell::new((0u32, 0u32, 0u32));
    let links = p.links();
    // The core's bank window, as the CSR's select picks it; the probed lane's flag, as its
    // probe names it.
    let banks = RefCell::new(st.banks.clone());
    let link = RefCell::new(st.link);
    for (n, op) in ops.iter().enumerate() {
        let mut tick = |dut: &mut Dut| -> Result<()> {
            let mut c = pulses.borrow_mut();
            c.0 += dut.get("start") as u32;
            c.1 += dut.get("abort_req") as u32;
            if links {
                c.2 += dut.get("link_test") as u32;
                let probe = dut.get("link_probe") as u32;
                dut.set("link_probed", link.borrow().probed(probe) as u64);
            }
            if p.dma.glb.is_some() {
                let sel = dut.get("glb_bank_sel") as usize;
                let (r, w) = banks.borrow().get(sel).copied().unwrap_or((0, 0));
                dut.set("glb_bank_reads", r);
                dut.set("glb_bank_writes", w);
            }
            dut.tick();
            Ok(())
        };
        let what = match op {
            Op::Write {
                addr,
                data,
                strb,
                d,
            } => {
                let resp = axil::write(dut, *addr, *data, *strb, *d, &mut tick)?;
                let e = m.write(*addr, *data, *strb);
                if resp != e.resp {
                    return Ok(Err(format!(
                        "op {n} {op:x?}: BRESP {resp}, model {}",
                        e.resp
                    )));
                }
                let (starts, aborts, tests) = pulses.replace((0, 0, 0));
                if (starts, aborts) != (e.start as u32, e.abort as u32) {
                    return Ok(Err(format!(
                        "op {n} {op:x?}: {starts} start and {aborts} abort pulses, model {} and {}",
                        e.start as u32, e.abort as u32
                    )));
                }
                if links && tests != e.link_test as u32 {
                    return Ok(Err(format!(
                        "op {n} {op:x?}: {tests} link_test pulses, model {}",
                        e.link_test as u32
                    )));
                }
                format!("{op:x?}")
            }
            Op::Read { addr, d } => {
                let got = axil::read(dut, *addr, *d, &mut tick)?;
                let want = m.read(*addr, &st);
                if got != want {
                    return Ok(Err(format!(
                        "op {n} {op:x?}: read {:#x} resp {}, model {:#x} resp {}",
                        got.0, got.1, want.0, want.1
                    )));
                }
                format!("{op:x?}")
            }
            Op::Core(s) => {
                st = s.clone();
                banks.replace(st.banks.clone());
                link.replace(st.link);
                apply(dut, p, &st);
                tick(dut)?;
                String::new()
            }
            Op::Finish => {
                dut.set("finish", 1);
                tick(dut)?;
                dut.set("finish", 0);
                m.finish();
                String::new()
            }
        };
        if let Some(e) = outputs_differ(dut, p, &m) {
            return Ok(Err(format!("after op {n} {what}: {e}")));
        }
    }
    Ok(Ok(()))
}

/// The GLB's bank groups (0 without a GLB).
fn bank_groups(p: &CoreParams) -> usize {
    p.dma.glb.map_or(0, |g| g.groups as usize)
}

fn apply(dut: &mut Dut, p: &CoreParams, st: &CoreStatus) {
    if p.links() {
        dut.set("link_testing", st.link.testing as u64);
        dut.set("link_bad", st.link.bad as u64);
        let failed = dut.port("link_failed").expect("link_failed");
        let w = dut.width(failed);
        dut.set("link_failed", st.link.failed as u64 & ((1 << w) - 1));
        dut.set("link_cycles", st.link.cycles as u64);
    }
    dut.set("busy", st.busy as u64);
    dut.set("done", st.done as u64);
    dut.set("error", st.error as u64);
    let mut values = st.counters.iter();
    let counters = Counters::widths().map("", &mut |_, _| *values.next().expect("every counter"));
    dut.set_all("", &counters);
}

/// The problem outputs and `irq` against the model's registers.
fn outputs_differ(dut: &mut Dut, p: &CoreParams, m: &Csr) -> Option<String> {
    let flags = m.value(
        ProblemReg::ALL
            .iter()
            .position(|&v| v == ProblemReg::Flags)?,
    );
    let got = dut.get_all("", &Problem::widths(p));
    let got_varlen = dut.get_all("", &VarlenRegs::widths(p));
    let got_s = p
        .row
        .scratch()
        .then(|| ("s_addr".to_string(), dut.get("s_addr")));
    let mut values = got
        .named()
        .into_iter()
        .chain(got_varlen.named())
        .chain(got_s);
    for (port, w) in hdl::soc::csr::launch_ports(p) {
        let (_, got) = values.next().expect("every launch port");
        let want = match port.as_str() {
            "causal" => flags & 1,
            "out_f32" => flags >> 1 & 1,
            _ => {
                let i = ProblemReg::ALL.iter().position(|v| v.port() == port)?;
                m.value(i) & (u64::MAX >> (64 - w))
            }
        };
        if got != want {
            return Some(format!("{port} = {got:#x}, model {want:#x}"));
        }
    }
    let over = dut.get("addr_over") == 1;
    if over != m.addr_over() {
        return Some(format!("addr_over = {over}, model {}", m.addr_over()));
    }
    let irq = dut.get("irq") == 1;
    (irq != m.irq()).then(|| format!("irq = {irq}, model {}", m.irq()))
}

/// Directed streams: every register read after reset, written with all ones and read back,
/// with strobes one byte at a time; the counter shadow; the interrupt's set, enable and clear;
/// start and abort; unmapped and unaligned offsets.
pub fn directed(p: &CoreParams) -> Vec<Op> {
    let regs = regmap::registers(p);
    let d = Delays::default();
    let mut ops = vec![];
    for r in &regs {
        ops.push(Op::Read { addr: r.offset, d });
    }
    for r in regs.iter().filter(|r| r.kind != Kind::Ctrl) {
        ops.push(Op::Write {
            addr: r.offset,
            data: u32::MAX,
            strb: 0xF,
            d,
        });
        ops.push(Op::Read { addr: r.offset, d });
        for b in 0..4 {
            ops.push(Op::Write {
                addr: r.offset,
                data: 0x5A5A_5A5A ^ (r.offset << 3),
                strb: 1 << b,
                d,
            });
            ops.push(Op::Read { addr: r.offset, d });
        }
    }
    let counters: Vec<u64> = (0..COUNTERS.len() as u64)
        .map(|i| 0xABCD_0000_0000 | i << 32 | (i * 0x0101_0101))
        .collect();
    let banks: Vec<(u64, u64)> = (0..bank_groups(p) as u64)
        .map(|g| {
            (
                0x1234_0000_0000 | g << 33 | (g * 0x0303),
                0x4321_0000_0000 | g << 34 | g,
            )
        })
        .collect();
    let w = |addr, data| Op::Write {
        addr,
        data,
        strb: 0xF,
        d,
    };
    ops.push(Op::Core(CoreStatus {
        busy: true,
        done: false,
        error: 0,
        counters: counters.clone(),
        banks: banks.clone(),
        link: LinkView {
            testing: true,
            bad: true,
            failed: 0x2B,
            cycles: 0x1234,
            failed_mask: 0x0000_0104,
        },
    }));
    for i in 0..COUNTERS.len() as u32 {
        let lo = regmap::COUNTER_BASE + 8 * i;
        ops.push(Op::Read { addr: lo, d });
        ops.push(Op::Read { addr: lo + 4, d });
    }
    // The links' status (unmapped without spare lanes), with the probe on a failed lane (2,
    // 8) and on others.
    ops.push(Op::Read { addr: 0x030, d });
    ops.push(Op::Read { addr: 0x034, d });
    for probe in [2, 3, 0x0102_0008, 0xFF00_0008] {
        ops.push(w(0x038, probe));
        ops.push(Op::Read { addr: 0x038, d });
        ops.push(Op::Read { addr: 0x030, d });
    }
    // Every bank group through the window, LO then HI of each, then a select of the group
    // count: past the only group of a one-bit select, else its low bits (group 0).
    if !banks.is_empty() {
        for g in 0..=banks.len() as u32 {
            ops.push(w(regmap::GLB_BANK_BASE, g));
            for at in [8, 12, 16, 20] {
                ops.push(Op::Read {
                    addr: regmap::GLB_BANK_BASE + at,
                    d,
                });
            }
        }
    }
    ops.extend([
        w(0x028, 1),
        Op::Core(CoreStatus {
            busy: false,
            done: true,
            error: 0,
            counters: counters.clone(),
            banks: banks.clone(),
            link: LinkView::default(),
        }),
        Op::Finish,
        Op::Read { addr: 0x02C, d },
        // A clear whose byte is not strobed clears nothing.
        Op::Write {
            addr: 0x02C,
            data: 1,
            strb: 0b1110,
            d,
        },
        Op::Read { addr: 0x02C, d },
        Op::Write {
            addr: 0x028,
            data: 0,
            strb: 0b1110,
            d,
        },
        w(0x02C, 1),
        Op::Read { addr: 0x024, d },
        w(0x020, 1),
        w(0x020, 2),
        w(0x020, 3),
        w(0x020, 4),
        w(0x020, 7),
        Op::Core(CoreStatus {
            busy: false,
            done: false,
            error: 0,
            counters: counters.clone(),
            banks: banks.clone(),
            link: LinkView::default(),
        }),
        Op::Core(CoreStatus {
            busy: false,
            done: true,
            error: regmap::ERR_ABORTED as u8,
            counters,
            banks,
            link: LinkView::default(),
        }),
        Op::Finish,
        Op::Read { addr: 0x02C, d },
        // A second launch ending while `done` stays high (a refused START) is an event too.
        w(0x02C, 1),
        Op::Finish,
        Op::Read { addr: 0x024, d },
        Op::Read { addr: 0x02C, d },
        Op::Read { addr: 0xFFC, d },
        w(0xFFC, 1),
        Op::Read { addr: 0x043, d },
        w(0x041, 0x1234_5678),
        Op::Read { addr: 0x040, d },
    ]);
    ops
}

/// Random streams: offsets mostly mapped (a third of them the control, status and interrupt
/// registers), any data and strobes, delays up to 4 cycles.
fn op(offsets: Vec<u32>, groups: usize) -> impl Strategy<Value = Op> {
    let delays =
        (0u32..5, 0u32..5, 0u32..5).prop_map(|(addr, data, resp)| Delays { addr, data, resp });
    let addr = prop_oneof![
        3 => prop::sample::select(vec![0x020u32, 0x024, 0x028, 0x02C]),
        6 => prop::sample::select(offsets),
        1 => 0u32..4096,
    ];
    let status = (
        any::<bool>(),
        any::<bool>(),
        0u8..8,
        prop::collection::vec(0u64..1 << 48, COUNTERS.len()),
        prop::collection::vec((0u64..1 << 48, 0u64..1 << 48), groups),
        (
            any::<bool>(),
            any::<bool>(),
            0u32..64,
            any::<u16>(),
            any::<u32>(),
        ),
    )
        .prop_map(
            |(busy, done, error, counters, banks, (testing, bad, failed, cycles, failed_mask))| {
                Op::Core(CoreStatus {
                    busy,
                    done,
                    error,
                    counters,
                    banks,
                    link: LinkView {
                        testing,
                        bad,
                        failed,
                        cycles,
                        failed_mask,
                    },
                })
            },
        );
    prop_oneof![
        4 => (addr.clone(), any::<u32>(), 0u8..16, delays.clone())
            .prop_map(|(addr, data, strb, d)| Op::Write { addr, data, strb, d }),
        4 => (addr, delays).prop_map(|(addr, d)| Op::Read { addr, d }),
        1 => status,
        1 => Just(Op::Finish),
    ]
}

/// `cases` random streams of up to `max_len` operations; returns the operations checked.
pub fn proptest_csr(
    dut: &mut Dut,
    p: &CoreParams,
    cases: u32,
    max_len: usize,
    seed: u64,
) -> Result<u64> {
    let offsets: Vec<u32> = regmap::registers(p).iter().map(|r| r.offset).collect();
    check_streams(cases, seed, max_len, op(offsets, bank_groups(p)), |ops| {
        check(dut, p, ops)
    })
}
