//! `<top>_csr`: the AXI4-Lite slave and the register file of [`super::regmap`] (bit-exact model:
//! `kernels::csr`).
//!
//! Write channel: AW and W are taken independently (each `ready` while its holding register is
//! empty); once both are held the write is performed, the holding registers empty and B is
//! raised (OKAY, or SLVERR for an unmapped offset or a read-only register, which a write then
//! leaves unchanged) until `bready`. Byte strobes apply to every register bit (a W1S or W1C bit
//! acts only if its byte is strobed). Read channel: `arready` while no response is pending; the
//! response (OKAY with the data, or SLVERR with 0 for an unmapped offset) is registered and
//! held until `rready`. Offsets are the address's bits 11..2 (a 4 KiB window; bits 1..0 and
//! `*prot` are ignored). Reading a counter's LO register copies its upper half into the shadow
//! HI returns.
//!
//! To the core: the problem registers (`q_addr` .. `c_const`, `causal`, `out_f32`), and
//! `start` / `abort`, one-cycle pulses the cycle after a CTRL write; `addr_over`, high while a
//! base, stride or (with `BATCH` > 0) list address has bits at or above `addr_bits` (the values
//! hold all 64 bits written; the core's ports take the low `addr_bits`). From the core: `busy`,
//! `done`, `error` and the counters, and `finish`, a one-cycle pulse that ends every accepted
//! START. `irq` = |(IRQ_STATUS & IRQ_ENABLE); IRQ_STATUS.DONE is set by `finish` (a set wins
//! over a clear in the same cycle). Latency 1.

use super::batch::VarlenRegs;
use super::regmap::{self, Access, Kind, ProblemReg, Register};
use crate::core::ports::{Counters, Problem, Scratch};
use crate::core::{CoreParams, COUNTER_BITS};
use crate::ir::iface::{Block, Ports};
use crate::mem::glb::{GlbBankCounts, GlbBankSel};
use crate::{cat, group, interface, mux, or_all, Design, ModuleBuilder, RegHandle, Sig};
use std::collections::HashMap;

interface! {
    /// The AXI4-Lite slave's inputs (ports `s_axil_*`).
    pub struct AxilIn {
        awvalid, awaddr, awprot, wvalid, wdata, wstrb, bready, arvalid, araddr, arprot, rready
    }
}

impl AxilIn<u32> {
    pub fn widths() -> Self {
        let a = regmap::ADDR_BITS;
        AxilIn {
            awvalid: 1,
            awaddr: a,
            awprot: 3,
            wvalid: 1,
            wdata: 32,
            wstrb: 4,
            bready: 1,
            arvalid: 1,
            araddr: a,
            arprot: 3,
            rready: 1,
        }
    }
}

interface! {
    /// The AXI4-Lite slave's outputs (ports `s_axil_*`).
    pub struct AxilOut { awready, wready, bvalid, bresp, arready, rvalid, rdata, rresp }
}

impl AxilOut<u32> {
    pub fn widths() -> Self {
        AxilOut {
            awready: 1,
            wready: 1,
            bvalid: 1,
            bresp: 2,
            arready: 1,
            rvalid: 1,
            rdata: 32,
            rresp: 2,
        }
    }
}

group! {
    /// The register block's inputs: the batch controller's status (`busy`, `done`, `error`,
    /// and `finish`, which ends every accepted START), the AXI4-Lite slave's, and the core's
    /// counters (ports `cycles`, … `kv_spill_bits`) and, with a GLB, its per-bank counter
    /// window (`glb_bank_reads`, `glb_bank_writes`: the group `glb_bank_sel` selects).
    pub struct CsrIn<T> {
        busy, done, error, finish;
        s_axil: AxilIn<T>,
        counters => Counters<T>,
        glb_bank: Option<GlbBankCounts<T>>,
        link: Option<crate::core::ports::LinkState<T>>,
    }
}

impl CsrIn<u32> {
    pub fn widths(p: &CoreParams) -> Self {
        CsrIn {
            busy: 1,
            done: 1,
            error: crate::mem::dma::error::BITS,
            finish: 1,
            s_axil: AxilIn::widths(),
            counters: Counters::widths(),
            glb_bank: p.dma.glb.map(|_| GlbBankCounts::widths(COUNTER_BITS)),
            link: p
                .links()
                .then(|| crate::core::ports::LinkState::widths(p.link_count_bits())),
        }
    }
}

group! {
    /// The register block's outputs: `irq`; the one-cycle `start` and `abort_req` pulses;
    /// `addr_over`; the AXI4-Lite slave's; the problem (ports `q_addr`, … `kv_group`) and the
    /// varlen registers (`batch`, `cu_q_addr`, `cu_k_addr`), each truncated to its port; with
    /// a GLB, `GLB_BANK_SEL` (`glb_bank_sel`).
    pub struct CsrOut<T> {
        irq, start, abort_req, addr_over;
        s_axil: AxilOut<T>,
        problem => Problem<T>,
        varlen => VarlenRegs<T>,
        s: Option<Scratch<T>>,
        glb_bank: Option<GlbBankSel<T>>,
        link: Option<crate::core::ports::LinkReq<T>>,
    }
}

impl CsrOut<u32> {
    pub fn widths(p: &CoreParams) -> Self {
        CsrOut {
            irq: 1,
            start: 1,
            abort_req: 1,
            addr_over: 1,
            s_axil: AxilOut::widths(),
            problem: Problem::widths(p),
            varlen: VarlenRegs::widths(p),
            s: p.row.scratch().then_some(Scratch { addr: p.addr_bits }),
            glb_bank: p.dma.glb.map(|g| GlbBankSel::widths(&g)),
            link: p.links().then(crate::core::ports::LinkReq::widths),
        }
    }
}

/// Every value the CSR drives to the batch controller besides start and abort: the core's
/// problem and the varlen batch's registers, by port name and width.
pub fn launch_ports(p: &CoreParams) -> Vec<(String, u32)> {
    let mut v = Problem::widths(p).named();
    v.extend(VarlenRegs::widths(p).named());
    if p.row.scratch() {
        v.push(("s_addr".into(), p.addr_bits));
    }
    v
}

/// Response codes.
pub const OKAY: u64 = 0;
pub const SLVERR: u64 = 2;

/// The register block.
pub type CsrBlock = Block<CsrIn, CsrOut<u32>>;

/// Defines the CSR block of core `p`, named `<top>_csr`.
pub fn build(d: &mut Design, p: &CoreParams, top: &str) -> crate::ModRef {
    block(d, p, top).module
}

/// Defines the CSR block of core `p`, named `<top>_csr`; returns its typed block.
pub fn block(d: &mut Design, p: &CoreParams, top: &str) -> CsrBlock {
    let p = *p;
    let name = format!("{top}_csr");
    d.define_block(&name, &CsrIn::widths(&p), CsrOut::widths(&p), |_, m, i| {
        m.doc(
            "AXI4-Lite slave and control/status registers of the regflash core.\n\
             See hdl/src/soc/csr.rs and the generated registers.md.",
        );
        m.set_latency(1);
        csr(m, &p, &i)
    })
}

/// OR of many values as a balanced tree (log depth: the read mux over ~100 registers stays
/// shorter than the datapath's FP32 multiplier).
fn or_tree(xs: &[Sig]) -> Sig {
    match xs.len() {
        0 => panic!("or_tree of no values"),
        1 => xs[0],
        n => or_tree(&xs[..n / 2]) | or_tree(&xs[n / 2..]),
    }
}

/// The register offset (a word index) of AXI4-Lite address `a`.
fn word(a: Sig) -> Sig {
    a.slice(regmap::ADDR_BITS - 1, 2)
}

/// The write channel: the held AW and W, and the write they make.
struct WriteChannel {
    aw_full: RegHandle,
    w_full: RegHandle,
    bvalid: RegHandle,
    /// The held write's register offset, data and strobes.
    waddr: Sig,
    wdata: Sig,
    wstrb: Sig,
    /// The write happens this cycle.
    do_write: Sig,
    /// The strobes as a bit mask, and the written bits it selects.
    smask: Sig,
    set_bits: Sig,
}

impl WriteChannel {
    /// Holds AW and W and writes when both are held and B is free.
    fn new(m: &mut ModuleBuilder, io: &CsrIn) -> Self {
        let inp = &io.s_axil;
        let aw_full = m.reg("aw_full", 1, Some(0));
        let w_full = m.reg("w_full", 1, Some(0));
        let bvalid = m.reg("bvalid", 1, Some(0));
        let aw_take = inp.awvalid & !aw_full.q;
        let w_take = inp.wvalid & !w_full.q;
        let waddr = m.hold("aw_addr", word(inp.awaddr), aw_take);
        let wdata = m.hold("w_data", inp.wdata, w_take);
        let wstrb = m.hold("w_strb", inp.wstrb, w_take);
        let do_write = m.name("do_write", aw_full.q & w_full.q & !bvalid.q);
        m.set_next(aw_full, aw_take | (aw_full.q & !do_write));
        m.set_next(w_full, w_take | (w_full.q & !do_write));
        m.set_next(bvalid, do_write | (bvalid.q & !inp.bready));
        // The strobes as a bit mask, and the written bits it selects.
        let bytes: Vec<Sig> = (0..4).rev().map(|b| wstrb.bit(b).repeat(8)).collect();
        let smask = cat(&bytes);
        let set_bits = wdata & smask;
        WriteChannel {
            aw_full,
            w_full,
            bvalid,
            waddr,
            wdata,
            wstrb,
            do_write,
            smask,
            set_bits,
        }
    }

    /// `old` (at most 32 bits, from bit 0 of the bus) with the strobed bytes of the held
    /// write.
    fn merged(&self, old: Sig) -> Sig {
        let w = old.width();
        let mask = self.smask.slice(w - 1, 0);
        (old & !mask) | (self.wdata.slice(w - 1, 0) & mask)
    }

    /// One bit: the write this cycle is to register `r`.
    fn hit(&self, r: &Register) -> Sig {
        self.do_write & self.waddr.eq((r.offset / 4) as u64)
    }
}

/// The control registers software writes: START and ABORT pulses, the interrupt's enable and
/// pending bit.
struct Control {
    start: Sig,
    abort: Sig,
    /// With spare lanes: CTRL.LINK_TEST's pulse.
    link_test: Option<Sig>,
    irq_en: Sig,
    pending: Sig,
}

/// The control registers (CTRL, IRQ_ENABLE, IRQ_STATUS).
fn control(m: &mut ModuleBuilder, regs: &[Register], wr: &WriteChannel, finish: Sig) -> Control {
    let ctrl = regs.iter().find(|r| r.kind == Kind::Ctrl).expect("CTRL");
    let ctrl_w = wr.hit(ctrl);
    let start = m.delay("start_q", ctrl_w & wr.set_bits.bit(0));
    let abort = m.delay("abort_q", ctrl_w & wr.set_bits.bit(1));
    let link_test = ctrl
        .fields
        .iter()
        .any(|f| f.name == "LINK_TEST")
        .then(|| m.delay("link_test_q", ctrl_w & wr.set_bits.bit(2)));
    let irq_en_r = regs
        .iter()
        .find(|r| r.kind == Kind::IrqEnable)
        .expect("IRQ_ENABLE");
    let irq_en_w = wr.hit(irq_en_r);
    let irq_en = m.reg("irq_enable", 1, Some(0));
    m.set_next(irq_en, mux(wr.wstrb.bit(0), wr.wdata.bit(0), irq_en.q));
    m.set_enable(irq_en, irq_en_w);
    let irq_st_r = regs
        .iter()
        .find(|r| r.kind == Kind::IrqStatus)
        .expect("IRQ_STATUS");
    let irq_clear = wr.hit(irq_st_r) & wr.set_bits.bit(0);
    // One event per accepted START, whatever its path (the batch controller's `finish`).
    let pending = m.reg("irq_pending", 1, Some(0));
    m.set_next(pending, finish | (pending.q & !irq_clear));
    Control {
        start,
        abort,
        link_test,
        irq_en: irq_en.q,
        pending: pending.q,
    }
}

/// The problem registers: one register per value, written a 32-bit half at a time. Returns
/// their values.
fn problem_regs(
    m: &mut ModuleBuilder,
    p: &CoreParams,
    regs: &[Register],
    wr: &WriteChannel,
) -> HashMap<ProblemReg, Sig> {
    let mut problem = HashMap::new();
    for reg in ProblemReg::all(p) {
        let halves: Vec<&Register> = regs
            .iter()
            .filter(|r| matches!(r.kind, Kind::Problem { reg: x, .. } if x == reg))
            .collect();
        let Kind::Problem { width, .. } = halves[0].kind else {
            unreachable!()
        };
        let val = m.reg(&format!("prob_{}", reg.port()), width, Some(0));
        let mut parts = vec![];
        let mut any = vec![];
        for r in &halves {
            let Kind::Problem { half, .. } = r.kind else {
                unreachable!()
            };
            let lo = 32 * half;
            if lo >= width {
                continue;
            }
            let hi = (lo + 32).min(width) - 1;
            let hit = wr.hit(r);
            let old = val.q.slice(hi, lo);
            parts.push(mux(hit, wr.merged(old), old));
            any.push(hit);
        }
        parts.reverse();
        m.set_next(val, cat(&parts));
        m.set_enable(val, or_all(&any));
        problem.insert(reg, val.q);
    }
    problem
}

/// `LINK_PROBE` (with spare lanes): read-write, strobed like every register.
fn link_probe(m: &mut ModuleBuilder, regs: &[Register], wr: &WriteChannel) -> Option<Sig> {
    let r = regs.iter().find(|r| r.kind == Kind::LinkProbe)?;
    let width = crate::link::ROW_BITS + crate::link::LANE_BITS;
    let probe = m.reg("link_probe", width, Some(0));
    m.set_next(probe, wr.merged(probe.q));
    m.set_enable(probe, wr.hit(r));
    Some(probe.q)
}

/// `GLB_BANK_SEL` (with a GLB): read-write, strobed like every register.
fn bank_sel(m: &mut ModuleBuilder, regs: &[Register], wr: &WriteChannel) -> Option<Sig> {
    let r = regs
        .iter()
        .find(|r| matches!(r.kind, Kind::GlbBankSel { .. }))?;
    let Kind::GlbBankSel { width } = r.kind else {
        unreachable!()
    };
    let sel = m.reg("glb_bank_sel", width, Some(0));
    m.set_next(sel, wr.merged(sel.q));
    m.set_enable(sel, wr.hit(r));
    Some(sel.q)
}

/// The values to the batch controller: the launch's problem and varlen registers, each
/// truncated to its port, and `addr_over`.
fn launch_outputs(
    p: &CoreParams,
    problem: &HashMap<ProblemReg, Sig>,
) -> (Problem, VarlenRegs, Option<Scratch>, Sig) {
    // Values wider than their port (addresses, strides, list addresses): the bits the core
    // cannot represent refuse START (`addr_over`, ERR_ADDRESS in the batch controller); the
    // lists count only for a varlen batch.
    let (mut over, mut list_over) = (vec![], vec![]);
    let mut port_value = |port: &str, w: u32| -> Sig {
        match port {
            "causal" => problem[&ProblemReg::Flags].bit(0),
            "out_f32" => problem[&ProblemReg::Flags].bit(1),
            _ => {
                let reg = ProblemReg::ALL
                    .into_iter()
                    .find(|r| r.port() == port)
                    .expect("a problem port");
                let v = problem[&reg];
                if reg.is_address() {
                    let high = v.slice(v.width() - 1, w).any();
                    if reg.is_list() {
                        list_over.push(high);
                    } else {
                        over.push(high);
                    }
                    v.trunc(w)
                } else {
                    v
                }
            }
        }
    };
    let values = Problem::widths(p).map("", &mut |n, w| port_value(n, w));
    let varlen_regs = VarlenRegs::widths(p).map("", &mut |n, w| port_value(n, w));
    let scratch = p.row.scratch().then(|| Scratch {
        addr: port_value("s_addr", p.addr_bits),
    });
    let varlen = problem[&ProblemReg::Batch].any();
    let addr_over = or_all(&over) | (varlen & or_all(&list_over));
    (values, varlen_regs, scratch, addr_over)
}

/// The read channel's registered response.
struct ReadChannel {
    rvalid: Sig,
    rdata: Sig,
    rresp: Sig,
}

/// The read channel: a registered response, held until rready; reading a counter's LO
/// register copies its upper half into the shadow HI returns.
fn read_channel(
    m: &mut ModuleBuilder,
    regs: &[Register],
    io: &CsrIn,
    ctl: &Control,
    problem: &HashMap<ProblemReg, Sig>,
    (sel, probe): (Option<Sig>, Option<Sig>),
) -> ReadChannel {
    let inp = &io.s_axil;
    let counters: Vec<Sig> = io.counters.named().into_iter().map(|(_, c)| c).collect();
    let rvalid = m.reg("rvalid", 1, Some(0));
    let ar_take = inp.arvalid & !rvalid.q;
    let raddr = word(inp.araddr);
    let shadow = m.reg("cnt_shadow", COUNTER_BITS - 32, Some(0));
    let zero32 = m.zero(32);
    let (mut values, mut r_hits, mut lo_hits) = (vec![], vec![], vec![]);
    let high = 24 - crate::mem::dma::error::BITS;
    let status = cat(&[
        m.zero(high),
        io.error,
        m.zero(5),
        io.done & io.error.any(),
        io.done,
        io.busy,
    ]);
    for r in regs {
        let hit = raddr.eq((r.offset / 4) as u64);
        let v = match r.kind {
            Kind::Const(c) => m.lit(32, c as u64),
            Kind::Ctrl => zero32,
            Kind::Status => status,
            Kind::IrqEnable => ctl.irq_en.zext(32),
            Kind::IrqStatus => ctl.pending.zext(32),
            Kind::Problem { reg, half, width } => {
                let lo = 32 * half;
                if lo >= width {
                    zero32
                } else {
                    problem[&reg].slice((lo + 32).min(width) - 1, lo).zext(32)
                }
            }
            Kind::Counter { index, hi: false } => {
                lo_hits.push((hit, counters[index].slice(COUNTER_BITS - 1, 32)));
                counters[index].slice(31, 0)
            }
            Kind::Counter { hi: true, .. } | Kind::GlbBank { hi: true, .. } => shadow.q.zext(32),
            Kind::GlbBankSel { .. } => sel.expect("GLB_BANK_SEL").zext(32),
            Kind::GlbBank { writes, hi: false } => {
                let b = io.glb_bank.as_ref().expect("the GLB's bank window");
                let c = if writes { b.writes } else { b.reads };
                lo_hits.push((hit, c.slice(COUNTER_BITS - 1, 32)));
                c.slice(31, 0)
            }
            Kind::LinkStatus => {
                let l = io.link.as_ref().expect("the links' status");
                let gap = m.zero(13);
                cat(&[l.cycles, gap, l.probed, l.bad, l.testing])
            }
            Kind::LinkProbe => probe.expect("LINK_PROBE").zext(32),
            Kind::LinkFailed => {
                let l = io.link.as_ref().expect("the links' status");
                l.failed.zext(32)
            }
        };
        values.push(mux(hit, v, zero32));
        r_hits.push(hit);
    }
    for &c in &counters {
        m.discard(c);
    }
    let rdata_d = or_tree(&values);
    let mapped = or_tree(&r_hits);
    let rdata = m.hold("rdata", rdata_d, ar_take);
    let slverr = m.lit(2, SLVERR);
    let okay = m.lit(2, OKAY);
    let rresp = m.hold("rresp", mux(mapped, okay, slverr), ar_take);
    m.set_next(rvalid, ar_take | (rvalid.q & !inp.rready));
    let lo_hit = or_tree(&lo_hits.iter().map(|x| x.0).collect::<Vec<_>>());
    let upper = or_tree(
        &lo_hits
            .iter()
            .map(|&(h, u)| {
                let z = m.zero(u.width());
                mux(h, u, z)
            })
            .collect::<Vec<_>>(),
    );
    m.set_next(shadow, upper);
    m.set_enable(shadow, ar_take & lo_hit);
    ReadChannel {
        rvalid: rvalid.q,
        rdata,
        rresp,
    }
}

/// The write response (SLVERR for an unmapped or read-only offset) and the slave's outputs.
fn axil_outputs(
    m: &mut ModuleBuilder,
    regs: &[Register],
    wr: &WriteChannel,
    rd: &ReadChannel,
) -> AxilOut {
    let slverr = m.lit(2, SLVERR);
    let okay = m.lit(2, OKAY);
    let writable: Vec<Sig> = regs
        .iter()
        .filter(|r| r.access != Access::Ro)
        .map(|r| wr.waddr.eq((r.offset / 4) as u64))
        .collect();
    let bresp = m.hold("bresp", mux(or_tree(&writable), okay, slverr), wr.do_write);
    AxilOut {
        awready: !wr.aw_full.q,
        wready: !wr.w_full.q,
        bvalid: wr.bvalid.q,
        bresp,
        arready: !rd.rvalid,
        rvalid: rd.rvalid,
        rdata: rd.rdata,
        rresp: rd.rresp,
    }
}

/// The block's body: the write channel, the control and problem registers and their outputs,
/// the read channel, the write response.
fn csr(m: &mut ModuleBuilder, p: &CoreParams, io: &CsrIn) -> CsrOut {
    let regs = regmap::registers(p);
    // The protection bits, and an address's bits 1..0 (a byte within the register), are
    // ignored.
    m.discard(io.s_axil.awprot);
    m.discard(io.s_axil.arprot);
    m.discard(io.s_axil.awaddr.slice(1, 0));
    m.discard(io.s_axil.araddr.slice(1, 0));
    let wr = WriteChannel::new(m, io);
    let ctl = control(m, &regs, &wr, io.finish);
    let problem = problem_regs(m, p, &regs, &wr);
    let (values, varlen, scratch, addr_over) = launch_outputs(p, &problem);
    let sel = bank_sel(m, &regs, &wr);
    let probe = link_probe(m, &regs, &wr);
    let rd = read_channel(m, &regs, io, &ctl, &problem, (sel, probe));
    CsrOut {
        irq: ctl.pending & ctl.irq_en,
        start: ctl.start,
        abort_req: ctl.abort,
        addr_over,
        s_axil: axil_outputs(m, &regs, &wr, &rd),
        problem: values,
        varlen,
        s: scratch,
        glb_bank: sel.map(|sel| GlbBankSel { sel }),
        link: ctl.link_test.map(|test| crate::core::ports::LinkReq {
            test,
            probe: probe.expect("LINK_PROBE with LINK_TEST"),
        }),
    }
}
