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

use super::regmap::{self, Access, Kind, ProblemReg, Register};
use crate::core::{CoreParams, COUNTERS, COUNTER_BITS};
use crate::{cat, mux, or_all, Design, ModRef, ModuleBuilder, Sig};

/// The AXI4-Lite slave's ports: (name, width, is an input).
pub fn axil_ports() -> Vec<(&'static str, u32, bool)> {
    let a = regmap::ADDR_BITS;
    vec![
        ("s_axil_awvalid", 1, true),
        ("s_axil_awready", 1, false),
        ("s_axil_awaddr", a, true),
        ("s_axil_awprot", 3, true),
        ("s_axil_wvalid", 1, true),
        ("s_axil_wready", 1, false),
        ("s_axil_wdata", 32, true),
        ("s_axil_wstrb", 4, true),
        ("s_axil_bvalid", 1, false),
        ("s_axil_bready", 1, true),
        ("s_axil_bresp", 2, false),
        ("s_axil_arvalid", 1, true),
        ("s_axil_arready", 1, false),
        ("s_axil_araddr", a, true),
        ("s_axil_arprot", 3, true),
        ("s_axil_rvalid", 1, false),
        ("s_axil_rready", 1, true),
        ("s_axil_rdata", 32, false),
        ("s_axil_rresp", 2, false),
    ]
}

/// The problem ports the CSR drives: the core's problem (`core::ports::Problem`), by name and
/// width.
pub fn problem_ports(p: &CoreParams) -> Vec<(String, u32)> {
    use crate::iface::Ports;
    crate::core::ports::Problem::widths(p).named()
}

/// Every value the CSR drives besides start and abort: the core's problem and the varlen
/// batch's registers (`batch.rs`).
pub fn launch_ports(p: &CoreParams) -> Vec<(String, u32)> {
    let mut v = problem_ports(p);
    v.extend(super::batch::batch_ports(p));
    v
}

/// Response codes.
pub const OKAY: u64 = 0;
pub const SLVERR: u64 = 2;

/// Defines the CSR block of core `p`, named `<top>_csr`.
pub fn build(d: &mut Design, p: &CoreParams, top: &str) -> ModRef {
    let p = *p;
    let name = format!("{top}_csr");
    d.define(&name, |_, m| {
        m.doc(
            "AXI4-Lite slave and control/status registers of the regflash core.\n\
             See hdl/src/soc/csr.rs and the generated registers.md.",
        );
        m.set_latency(1);
        csr(m, &p);
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

fn csr(m: &mut ModuleBuilder, p: &CoreParams) {
    let regs = regmap::registers(p);
    let mut inp = std::collections::HashMap::new();
    for (n, w, is_in) in axil_ports() {
        if is_in {
            inp.insert(n, m.input(n, w));
        }
    }
    let busy = m.input("busy", 1);
    let done = m.input("done", 1);
    let error = m.input("error", crate::dma::error::BITS);
    let counters: Vec<Sig> = COUNTERS.iter().map(|n| m.input(n, COUNTER_BITS)).collect();
    m.discard(inp["s_axil_awprot"]);
    m.discard(inp["s_axil_arprot"]);
    // Bits 1..0 of an address select a byte within the register: ignored.
    for a in ["s_axil_awaddr", "s_axil_araddr"] {
        m.discard(inp[a].slice(1, 0));
    }
    let word = |a: Sig| a.slice(regmap::ADDR_BITS - 1, 2);

    // Write channel: hold AW and W, write when both are held and B is free.
    let aw_full = m.reg("aw_full", 1, Some(0));
    let w_full = m.reg("w_full", 1, Some(0));
    let bvalid = m.reg("bvalid", 1, Some(0));
    let aw_take = inp["s_axil_awvalid"] & !aw_full.q;
    let w_take = inp["s_axil_wvalid"] & !w_full.q;
    let waddr = m.hold("aw_addr", word(inp["s_axil_awaddr"]), aw_take);
    let wdata = m.hold("w_data", inp["s_axil_wdata"], w_take);
    let wstrb = m.hold("w_strb", inp["s_axil_wstrb"], w_take);
    let do_write = m.name("do_write", aw_full.q & w_full.q & !bvalid.q);
    m.set_next(aw_full, aw_take | (aw_full.q & !do_write));
    m.set_next(w_full, w_take | (w_full.q & !do_write));
    m.set_next(bvalid, do_write | (bvalid.q & !inp["s_axil_bready"]));
    // The strobes as a bit mask, and the written bits it selects.
    let bytes: Vec<Sig> = (0..4).rev().map(|b| wstrb.bit(b).repeat(8)).collect();
    let smask = cat(&bytes);
    let set_bits = wdata & smask;
    let w_hit = |r: &Register| do_write & waddr.eq((r.offset / 4) as u64);

    // Registers software writes.
    let ctrl = regs.iter().find(|r| r.kind == Kind::Ctrl).expect("CTRL");
    let ctrl_w = w_hit(ctrl);
    let start = m.delay("start_q", ctrl_w & set_bits.bit(0));
    let abort = m.delay("abort_q", ctrl_w & set_bits.bit(1));
    let irq_en_r = regs
        .iter()
        .find(|r| r.kind == Kind::IrqEnable)
        .expect("IRQ_ENABLE");
    let irq_en_w = w_hit(irq_en_r);
    let irq_en = m.reg("irq_enable", 1, Some(0));
    m.set_next(irq_en, mux(wstrb.bit(0), wdata.bit(0), irq_en.q));
    m.set_enable(irq_en, irq_en_w);
    let irq_st_r = regs
        .iter()
        .find(|r| r.kind == Kind::IrqStatus)
        .expect("IRQ_STATUS");
    let irq_clear = w_hit(irq_st_r) & set_bits.bit(0);
    // One event per accepted START, whatever its path (the batch controller's `finish`).
    let finish = m.input("finish", 1);
    let pending = m.reg("irq_pending", 1, Some(0));
    m.set_next(pending, finish | (pending.q & !irq_clear));
    m.output("irq", pending.q & irq_en.q);

    // Problem registers: one register per value, written a 32-bit half at a time.
    let mut problem = std::collections::HashMap::new();
    for reg in ProblemReg::ALL {
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
            let wh = hi - lo + 1;
            let hit = w_hit(r);
            let old = val.q.slice(hi, lo);
            let mask = smask.slice(wh - 1, 0);
            let merged = (old & !mask) | (wdata.slice(wh - 1, 0) & mask);
            parts.push(mux(hit, merged, old));
            any.push(hit);
        }
        parts.reverse();
        m.set_next(val, cat(&parts));
        m.set_enable(val, or_all(&any));
        problem.insert(reg, val.q);
    }
    // Values wider than their port (addresses, strides, list addresses): the bits the core
    // cannot represent refuse START (`addr_over`, ERR_ADDRESS in the batch controller); the
    // lists count only for a varlen batch.
    let (mut over, mut list_over) = (vec![], vec![]);
    for (port, w) in launch_ports(p) {
        let v = match port.as_str() {
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
        };
        m.output(&port, v);
    }
    let varlen = problem[&ProblemReg::Batch].any();
    let addr_over = or_all(&over) | (varlen & or_all(&list_over));
    m.output("addr_over", addr_over);
    m.output("start", start);
    m.output("abort_req", abort);

    // Read channel: a registered response, held until rready.
    let rvalid = m.reg("rvalid", 1, Some(0));
    let ar_take = inp["s_axil_arvalid"] & !rvalid.q;
    let raddr = word(inp["s_axil_araddr"]);
    let shadow = m.reg("cnt_shadow", COUNTER_BITS - 32, Some(0));
    let zero32 = m.zero(32);
    let (mut values, mut r_hits, mut lo_hits) = (vec![], vec![], vec![]);
    let high = 24 - crate::dma::error::BITS;
    let status = cat(&[
        m.zero(high),
        error,
        m.zero(5),
        done & error.any(),
        done,
        busy,
    ]);
    for r in &regs {
        let hit = raddr.eq((r.offset / 4) as u64);
        let v = match r.kind {
            Kind::Const(c) => m.lit(32, c as u64),
            Kind::Ctrl => zero32,
            Kind::Status => status,
            Kind::IrqEnable => irq_en.q.zext(32),
            Kind::IrqStatus => pending.q.zext(32),
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
            Kind::Counter { hi: true, .. } => shadow.q.zext(32),
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
    m.set_next(rvalid, ar_take | (rvalid.q & !inp["s_axil_rready"]));
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

    // The write response: SLVERR for an unmapped or read-only offset.
    let writable: Vec<Sig> = regs
        .iter()
        .filter(|r| r.access != Access::Ro)
        .map(|r| waddr.eq((r.offset / 4) as u64))
        .collect();
    let bresp = m.hold("bresp", mux(or_tree(&writable), okay, slverr), do_write);
    m.output("s_axil_awready", !aw_full.q);
    m.output("s_axil_wready", !w_full.q);
    m.output("s_axil_bvalid", bvalid.q);
    m.output("s_axil_bresp", bresp);
    m.output("s_axil_arready", !rvalid.q);
    m.output("s_axil_rvalid", rvalid.q);
    m.output("s_axil_rdata", rdata);
    m.output("s_axil_rresp", rresp);
}
