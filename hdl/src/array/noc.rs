//! `noc_router`: a mesh NoC router with five ports (local, east, west, north, south), an
//! input FIFO per port, dimension-ordered (XY) routing, a round-robin arbiter and a link
//! register per output, and credit-based flow control (bit-exact model and the
//! microarchitecture's description: `kernels::noc`). The router of the `noc2d` baseline
//! (issue 56), where S and P cross between two arrays side by side over router hops.
//!
//! Ports, per port `p` of `l`, `e`, `w`, `n`, `s`: in `p_in_valid`, `p_in_flit` (a flit
//! arriving; its sender held a credit) and `p_credit_in` (a credit returned to output `p` by
//! the FIFO it feeds); out `p_out_valid`, `p_out_flit` (the link register) and `p_credit_out`
//! (input `p` took a flit out of its FIFO: a credit for its sender). `x`, `y`: the router's place. Events:
//! `writes`, `reads` (flits into and out of the FIFOs this cycle, 0 to 5).

use kernels::noc::{RouterConfig, PORTS};

use crate::ir::iface::Block;
use crate::{addr_bits, bits_for, cat, group, interface, mux, mux_index, or_all, Design};
use crate::{ModuleBuilder, Sig};

interface! {
    /// One port's inputs: a flit arriving (`in_valid`, `in_flit`) and a credit coming back to
    /// the port's output (`credit_in`).
    pub struct PortIn { in_valid, in_flit, credit_in }
}

interface! {
    /// One port's outputs: the link register (`out_valid`, `out_flit`) and a credit going back
    /// to the port's sender (`credit_out`).
    pub struct PortOut { out_valid, out_flit, credit_out }
}

group! {
    /// The router's inputs: its place and its five ports.
    pub struct RouterIn<T> {
        x, y;
        l: PortIn<T>,
        e: PortIn<T>,
        w: PortIn<T>,
        n: PortIn<T>,
        s: PortIn<T>,
    }
}

group! {
    /// The router's outputs: its five ports and the cycle's FIFO writes and reads.
    pub struct RouterOut<T> {
        writes, reads;
        l: PortOut<T>,
        e: PortOut<T>,
        w: PortOut<T>,
        n: PortOut<T>,
        s: PortOut<T>,
    }
}

impl<T: Copy> RouterIn<T> {
    /// The ports in `kernels::noc::PORTS` order.
    pub fn ports(&self) -> [PortIn<T>; 5] {
        [self.l, self.e, self.w, self.n, self.s]
    }
}

impl<T: Copy> RouterOut<T> {
    /// The ports in `kernels::noc::PORTS` order.
    pub fn ports(&self) -> [PortOut<T>; 5] {
        [self.l, self.e, self.w, self.n, self.s]
    }
}

/// The router's block.
pub type RouterBlock = Block<RouterIn, RouterOut<u32>>;

/// The module's name for `cfg`.
pub fn module_name(cfg: &RouterConfig) -> String {
    format!(
        "noc_router_f{}c{}_d{}",
        cfg.flit_bits, cfg.coord_bits, cfg.depth
    )
}

/// Defines the router `cfg`.
pub fn build(d: &mut Design, cfg: &RouterConfig) -> RouterBlock {
    assert!(cfg.depth >= 1 && cfg.flit_bits > 2 * cfg.coord_bits);
    let port_in = PortIn {
        in_valid: 1,
        in_flit: cfg.flit_bits,
        credit_in: 1,
    };
    let port_out = PortOut {
        out_valid: 1,
        out_flit: cfg.flit_bits,
        credit_out: 1,
    };
    let inputs = RouterIn {
        x: cfg.coord_bits,
        y: cfg.coord_bits,
        l: port_in,
        e: port_in,
        w: port_in,
        n: port_in,
        s: port_in,
    };
    let outputs = RouterOut {
        writes: 3,
        reads: 3,
        l: port_out,
        e: port_out,
        w: port_out,
        n: port_out,
        s: port_out,
    };
    let cfg = *cfg;
    d.define_block(&module_name(&cfg), &inputs, outputs, |_, m, i| {
        m.doc(&format!(
            "noc_router: a 5-port mesh router, {}-bit single-flit packets (x, y in the low\n\
             {} bits each), a {}-flit FIFO per input, XY routing, round-robin arbitration,\n\
             a link register per output, credit flow control. See hdl/src/array/noc.rs.\n\
             Model: kernels::noc.",
            cfg.flit_bits, cfg.coord_bits, cfg.depth
        ));
        router(m, &cfg, &i)
    })
}

/// An input's FIFO: its head flit and whether it holds one, given this cycle's push and pop.
fn fifo(
    m: &mut ModuleBuilder,
    cfg: &RouterConfig,
    name: &str,
    push: (Sig, Sig),
    pop: Sig,
) -> (Sig, Sig) {
    let (valid, flit) = push;
    let depth = cfg.depth;
    let pb = addr_bits(depth);
    let entries: Vec<_> = (0..depth)
        .map(|k| m.reg(&format!("{name}_q{k}"), cfg.flit_bits, None))
        .collect();
    let wr = m.reg(&format!("{name}_wr"), pb, Some(0));
    let rd = m.reg(&format!("{name}_rd"), pb, Some(0));
    let count = m.reg(&format!("{name}_count"), bits_for(depth as u64), Some(0));
    for (k, e) in entries.iter().enumerate() {
        m.set_next(*e, flit);
        m.set_enable(*e, valid & wr.q.eq(k as u64));
    }
    let (wr_n, _) = m.wrapping_step(wr.q, depth);
    m.set_next(wr, wr_n);
    m.set_enable(wr, valid);
    let (rd_n, _) = m.wrapping_step(rd.q, depth);
    m.set_next(rd, rd_n);
    m.set_enable(rd, pop);
    let cw = count.q.width();
    let up = count.q + valid.zext(cw);
    m.set_next(count, up - pop.zext(cw));
    let qs: Vec<Sig> = entries.iter().map(|e| e.q).collect();
    let head = if depth == 1 {
        m.discard(rd.q);
        qs[0]
    } else {
        mux_index(rd.q, &qs)
    };
    (count.q.ne(0u64), head)
}

fn router(m: &mut ModuleBuilder, cfg: &RouterConfig, i: &RouterIn) -> RouterOut {
    let cb = cfg.coord_bits;
    let ins = i.ports();
    // The pops are known only after the arbiters: nets, driven below.
    let pops: Vec<Sig> = PORTS
        .iter()
        .map(|p| m.net(&format!("{p}_pop"), 1))
        .collect();
    let mut heads = vec![];
    for (k, p) in PORTS.iter().enumerate() {
        let (has, head) = fifo(
            m,
            cfg,
            &format!("in_{p}"),
            (ins[k].in_valid, ins[k].in_flit),
            pops[k],
        );
        // XY routing of the head flit (one-hot over the outputs).
        let (dx, dy) = (head.slice(cb - 1, 0), head.slice(2 * cb - 1, cb));
        let (x_eq, y_eq) = (dx.eq(i.x), dy.eq(i.y));
        let want = [
            x_eq & y_eq,
            dx.gt(i.x),
            dx.lt(i.x),
            x_eq & dy.gt(i.y),
            x_eq & dy.lt(i.y),
        ];
        heads.push((has, head, want));
    }
    let mut outs = vec![];
    let mut granted_by: Vec<Vec<Sig>> = vec![vec![]; 5];
    for (o, p) in PORTS.iter().enumerate() {
        let depth_bits = bits_for(cfg.depth as u64);
        let credits = m.reg(&format!("{p}_credits"), depth_bits, Some(cfg.depth as u64));
        let next = m.reg(&format!("{p}_next"), 3, Some(0));
        let req: Vec<Sig> = heads.iter().map(|(has, _, want)| *has & want[o]).collect();
        let can = credits.q.ne(0u64);
        // Round robin: input k wins if it requests and none from `next` up to it does.
        let grant: Vec<Sig> = (0..5)
            .map(|k| {
                let firsts: Vec<Sig> = (0..5)
                    .map(|start: usize| {
                        let before: Vec<Sig> = (0..5)
                            .map(|j| (start + j) % 5)
                            .take_while(|&j| j != k)
                            .map(|j| req[j])
                            .collect();
                        let clear = if before.is_empty() {
                            m.lit(1, 1)
                        } else {
                            !or_all(&before)
                        };
                        next.q.eq(start as u64) & clear
                    })
                    .collect();
                req[k] & or_all(&firsts) & can
            })
            .collect();
        let grant: Vec<Sig> = grant
            .iter()
            .enumerate()
            .map(|(k, g)| m.name(&format!("{p}_grant_{}", PORTS[k]), *g))
            .collect();
        let any = or_all(&grant);
        let zero = m.zero(cfg.flit_bits);
        let flits: Vec<Sig> = (0..5).map(|k| mux(grant[k], heads[k].1, zero)).collect();
        let flit = or_all(&flits);
        let valid_q = m.delay(&format!("{p}_link_valid"), any);
        let flit_q = m.reg(&format!("{p}_link_flit"), cfg.flit_bits, None);
        m.set_next(flit_q, flit);
        m.set_enable(flit_q, any);
        // Credits: one spent per grant, one back per returned credit.
        let back = ins[o].credit_in.zext(depth_bits);
        m.set_next(credits, credits.q + back - any.zext(depth_bits));
        // The next round starts after the input granted.
        let after: Vec<Sig> = (0..5)
            .map(|k| mux(grant[k], m.lit(3, ((k + 1) % 5) as u64), m.zero(3)))
            .collect();
        m.set_next(next, or_all(&after));
        m.set_enable(next, any);
        for k in 0..5 {
            granted_by[k].push(grant[k]);
        }
        outs.push((valid_q, flit_q.q));
    }
    let mut credit_out = vec![];
    for (k, p) in PORTS.iter().enumerate() {
        let pop = or_all(&granted_by[k]);
        m.drive(pops[k], pop);
        credit_out.push(m.delay(&format!("{p}_credit_q"), pop));
    }
    let valids: Vec<Sig> = ins.iter().map(|x| x.in_valid).collect();
    let port = |k: usize| PortOut {
        out_valid: outs[k].0,
        out_flit: outs[k].1,
        credit_out: credit_out[k],
    };
    RouterOut {
        writes: m.sum(&valids, 3),
        reads: m.sum(&pops, 3),
        l: port(0),
        e: port(1),
        w: port(2),
        n: port(3),
        s: port(4),
    }
}

/// A flit from its destination and payload (x in the low bits, as `kernels::noc::Flit`).
pub fn pack(x: Sig, y: Sig, payload: Sig) -> Sig {
    cat(&[payload, y, x])
}

/// A line of routers: `hops` links between a source and a sink (the path `noc2d` sends an
/// array's traffic on to the other). Model: `kernels::noc::Line`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct LineConfig {
    pub router: RouterConfig,
    pub hops: u32,
}

impl LineConfig {
    pub fn module_name(&self) -> String {
        format!("noc_line_h{}_{}", self.hops, module_name(&self.router))
    }
}

interface! {
    /// The line's source side: a flit sent (`in_valid`, `in_flit`: addressed to the last
    /// router), only while `ready`.
    pub struct LineIn { in_valid, in_flit }
}

interface! {
    /// The line's outputs: the source may send (`ready`: it holds a credit), the flit the sink
    /// takes this cycle (`out_valid`, `out_flit`), and the cycle's events over every router:
    /// flits written into and read out of FIFOs, flits on the links between routers.
    pub struct LineOut { ready, out_valid, out_flit, writes, reads, hops }
}

/// The line's block.
pub type LineBlock = Block<LineIn, LineOut<u32>>;

/// Bits of the line's event counts for `hops` links (up to 5 a router a cycle).
fn line_event_bits(hops: u32) -> u32 {
    bits_for(5 * (hops as u64 + 1))
}

/// The line's output widths.
pub fn line_widths(cfg: &LineConfig) -> LineOut<u32> {
    let eb = line_event_bits(cfg.hops);
    LineOut {
        ready: 1,
        out_valid: 1,
        out_flit: cfg.router.flit_bits,
        writes: eb,
        reads: eb,
        hops: bits_for(cfg.hops as u64),
    }
}

/// Defines the line `cfg`: `hops + 1` routers at x = 0 to `hops`, y = 0, router i's east
/// output feeding router i + 1's west input; the source's credit counter for router 0's
/// local input; the sink returns a credit for every flit it takes.
pub fn build_line(d: &mut Design, cfg: &LineConfig) -> LineBlock {
    let r = cfg.router;
    assert!(cfg.hops >= 1 && cfg.hops < 1 << r.coord_bits);
    let router = build(d, &r);
    let inputs = LineIn {
        in_valid: 1,
        in_flit: r.flit_bits,
    };
    let outputs = line_widths(cfg);
    let cfg = *cfg;
    d.define_block(&cfg.module_name(), &inputs, outputs, |_, m, i| {
        m.doc(&format!(
            "noc_line: {} routers in a row, {} hops from a source to a sink (see\n\
             hdl/src/array/noc.rs; model kernels::noc::Line).",
            cfg.hops + 1,
            cfg.hops
        ));
        line(m, &cfg, &router, &i)
    })
}

fn line(m: &mut ModuleBuilder, cfg: &LineConfig, router: &RouterBlock, i: &LineIn) -> LineOut {
    let r = cfg.router;
    let n = cfg.hops + 1;
    let none = |m: &mut ModuleBuilder| PortIn {
        in_valid: m.zero(1),
        in_flit: m.zero(r.flit_bits),
        credit_in: m.zero(1),
    };
    // Each router's west input and east credit come from its neighbours: nets, driven below.
    let west: Vec<PortIn> = (0..n)
        .map(|k| PortIn {
            in_valid: m.net(&format!("r{k}_w_valid"), 1),
            in_flit: m.net(&format!("r{k}_w_flit"), r.flit_bits),
            credit_in: m.zero(1),
        })
        .collect();
    let east_credit: Vec<Sig> = (0..n)
        .map(|k| m.net(&format!("r{k}_e_credit"), 1))
        .collect();
    let sink_credit = m.net("sink_credit", 1);
    let credits = m.reg(
        "src_credits",
        bits_for(r.depth as u64),
        Some(r.depth as u64),
    );
    let mut outs = vec![];
    for k in 0..n {
        let local = if k == 0 {
            PortIn {
                in_valid: i.in_valid,
                in_flit: i.in_flit,
                credit_in: m.zero(1),
            }
        } else {
            PortIn {
                credit_in: if k == n - 1 { sink_credit } else { m.zero(1) },
                ..none(m)
            }
        };
        let ins = RouterIn {
            x: m.lit(r.coord_bits, k as u64),
            y: m.zero(r.coord_bits),
            l: local,
            e: PortIn {
                credit_in: east_credit[k as usize],
                ..none(m)
            },
            w: west[k as usize],
            n: none(m),
            s: none(m),
        };
        outs.push(m.instantiate(router, &format!("u_r{k}"), &ins));
    }
    // The line's ends: nothing comes into router 0 from the west, no credit into the last
    // router from the east.
    let (nil, nil_flit) = (m.zero(1), m.zero(r.flit_bits));
    m.drive(west[0].in_valid, nil);
    m.drive(west[0].in_flit, nil_flit);
    let nil = m.zero(1);
    m.drive(east_credit[n as usize - 1], nil);
    for (k, o) in outs.iter().enumerate() {
        // East to the next router's west, its credits back; the last router's east output
        // and router 0's west credits go nowhere.
        match outs.get(k + 1) {
            Some(next) => {
                m.drive(west[k + 1].in_valid, o.e.out_valid);
                m.drive(west[k + 1].in_flit, o.e.out_flit);
                m.drive(east_credit[k], next.w.credit_out);
            }
            None => {
                m.discard(o.e.out_valid);
                m.discard(o.e.out_flit);
            }
        }
        if k == 0 {
            m.discard(o.w.credit_out);
        } else {
            // Only router 0's local input takes flits (its credits are the source's).
            m.discard(o.l.credit_out);
        }
        // Only the last router's local output delivers (to the sink, below).
        if k + 1 < outs.len() {
            m.discard(o.l.out_valid);
            m.discard(o.l.out_flit);
        }
        // Every flit goes east: nothing leaves west, north or south, and no credit east.
        for p in [&o.w, &o.n, &o.s] {
            m.discard(p.out_valid);
            m.discard(p.out_flit);
        }
        for p in [&o.n, &o.s, &o.e] {
            m.discard(p.credit_out);
        }
    }
    let last = &outs[n as usize - 1];
    // The sink takes every flit: a credit back the cycle it arrives.
    m.drive(sink_credit, last.l.out_valid);
    // The source's credits: one spent per flit sent, one back per flit router 0 switched.
    let cw = credits.q.width();
    let back = outs[0].l.credit_out.zext(cw);
    m.set_next(credits, credits.q + back - i.in_valid.zext(cw));
    let eb = line_event_bits(cfg.hops);
    let writes: Vec<Sig> = outs.iter().map(|o| o.writes).collect();
    let reads: Vec<Sig> = outs.iter().map(|o| o.reads).collect();
    let links: Vec<Sig> = outs[..cfg.hops as usize]
        .iter()
        .map(|o| o.e.out_valid)
        .collect();
    LineOut {
        ready: credits.q.ne(0u64),
        out_valid: last.l.out_valid,
        out_flit: last.l.out_flit,
        writes: m.sum(&writes, eb),
        reads: m.sum(&reads, eb),
        hops: m.sum(&links, bits_for(cfg.hops as u64)),
    }
}
