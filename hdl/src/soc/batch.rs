//! `<top>_batch`: variable-length batches (FlashAttention's varlen interface) in front of the
//! core. With `BATCH` = 0 a `START` runs the one problem in the registers. With `BATCH` = n > 0
//! the problem is n independent sequences packed along the rows of Q, K, V and O, described by
//! two lists of n + 1 cumulative offsets in memory (`CU_Q_ADDR`, `CU_K_ADDR`: little-endian
//! 32-bit words, in rows): sequence b has the queries (and O rows) cu_q[b] .. cu_q[b + 1] and
//! the keys and values cu_k[b] .. cu_k[b + 1], every head at once. For each sequence the block
//! reads its offsets through the memory port (which it owns only while the core is idle: one
//! single-beat read per word, ID 0 on AXI4), then starts the core on the sequence: Q and O at
//! their base plus cu_q[b] rows, K and V plus cu_k[b] rows (a shift-add multiply by the row
//! stride, one bit a cycle), q_len and k_len the differences. Counters add up over the batch
//! (the core keeps them from the second sequence on); `cycles` counts the core's busy cycles,
//! not the reads of the offsets between sequences. A sequence without queries is skipped; one
//! with queries and no keys runs (its O rows are 0).
//!
//! Errors: at START, `addr_over` from the register block (a base, stride or, for a batch, list
//! address with bits the core cannot represent) refuses the launch with `STATUS.ERR_CODE` 10
//! before anything is read, then a list address not 4-byte aligned with 9. Before a sequence:
//! offsets that decrease or a sequence longer than 2^index_bits − 1 stop the batch with 9.
//! Before every launch (the single problem too) the Extent state checks that no tensor reaches
//! past 2^addr_bits (`extent`: 2 index_bits + 2 cycles, before the core starts); a launch that
//! would, or a sequence whose row offset or base would, ends the batch with 10 instead. A core
//! error stops the batch with the core's code; `ABORT` stops it after the read in flight, or
//! before the next launch (code 6).
//!
//! `finish` pulses once per accepted START, in the first cycle of Done, also when a START in
//! Done is refused at once and the state never leaves Done (the register block's interrupt
//! follows it, not a rise of `done`).

use super::regmap::{ERR_ABORTED, ERR_ADDRESS, ERR_BATCH};
use crate::core::ports::{Problem, Scratch};
use crate::core::CoreParams;
use crate::ir::fsm::Fsm;
use crate::ir::iface::Block;
use crate::mem::dma::{AxiIn, AxiOut, MemIf, MemIn, MemReq};
use crate::{
    and_all, group, interface, mux, mux_index, or_all, Design, ModuleBuilder, RegHandle, Sig,
};

crate::states! {
    /// The batch: idle; reading an offset word (presenting the read, waiting for its beat,
    /// after a cycle that registers its address: Addr); checking a sequence; computing its
    /// addresses; checking the launch's extent; running it on the core; done.
    enum Batch = "B" {
        Idle, Read, Wait, Check, Scale, Extent, Launch, Run, Done, Addr
    }
}

interface! {
    /// The varlen registers (from the register block): the sequences (`batch`; 0: the one
    /// problem in the registers), and the addresses of the two offset lists.
    pub struct VarlenRegs { batch, cu_q_addr, cu_k_addr }
}

impl VarlenRegs<u32> {
    pub fn widths(p: &CoreParams) -> Self {
        VarlenRegs {
            batch: p.index_bits,
            cu_q_addr: p.addr_bits,
            cu_k_addr: p.addr_bits,
        }
    }
}

group! {
    /// The block's inputs: from the register block `start`, `abort_req`, `addr_over`, the
    /// problem (ports `csr_q_addr`, …) and the varlen registers; the core's status
    /// (`core_busy`, `core_done`, `core_error`); the memory port's inputs from the memory
    /// (`mem_*` or `m_axi_*`) and its outputs from the core (`core_mem_req_*` or
    /// `core_m_axi_*`), by `mem_if`.
    pub struct BatchIn<T> {
        start, abort_req, addr_over, core_busy, core_done, core_error;
        csr: Problem<T>,
        varlen => VarlenRegs<T>,
        s: Option<Scratch<T>>,
        mem: Option<MemIn<T>>,
        core_mem_req: Option<MemReq<T>>,
        m_axi: Option<AxiIn<T>>,
        core_m_axi: Option<AxiOut<T>>,
    }
}

impl BatchIn<u32> {
    pub fn widths(p: &CoreParams) -> Self {
        let (mem, m_axi) = p.dma.mem_inputs();
        let (core_mem_req, core_m_axi) = p.dma.mem_outputs();
        BatchIn {
            start: 1,
            abort_req: 1,
            addr_over: 1,
            core_busy: 1,
            core_done: 1,
            core_error: crate::mem::dma::error::BITS,
            csr: Problem::widths(p),
            varlen: VarlenRegs::widths(p),
            s: p.row.scratch().then_some(Scratch { addr: p.addr_bits }),
            mem,
            core_mem_req,
            m_axi,
            core_m_axi,
        }
    }
}

group! {
    /// What the block drives into the core: `start`, `keep_counters` (a start adds to the
    /// counters: the second and later sequences of a batch), the memory port's inputs, and the
    /// launch's problem. Under the prefix `core`: `core_start`, `core_q_addr`, ….
    pub struct CoreLaunch<T> {
        start, keep_counters;
        mem: Option<MemIn<T>>,
        m_axi: Option<AxiIn<T>>,
        problem => Problem<T>,
    }
}

group! {
    /// The block's outputs: its status to the register block (`busy`, `done`, `finish`: one
    /// pulse per accepted START, `error`), the core's inputs, and the memory port's outputs to
    /// the memory (`mem_req_*` or `m_axi_*`).
    pub struct BatchOut<T> {
        busy, done, finish, error;
        core: CoreLaunch<T>,
        mem_req: Option<MemReq<T>>,
        m_axi: Option<AxiOut<T>>,
    }
}

impl BatchOut<u32> {
    pub fn widths(p: &CoreParams) -> Self {
        let (mem, m_axi) = p.dma.mem_inputs();
        let (mem_req, m_axi_out) = p.dma.mem_outputs();
        BatchOut {
            busy: 1,
            done: 1,
            finish: 1,
            error: crate::mem::dma::error::BITS,
            core: CoreLaunch {
                start: 1,
                keep_counters: 1,
                mem,
                m_axi,
                problem: Problem::widths(p),
            },
            mem_req,
            m_axi: m_axi_out,
        }
    }
}

/// The varlen batch controller.
pub type BatchBlock = Block<BatchIn, BatchOut<u32>>;

/// Defines `<top>_batch` for core `p`.
pub fn build(d: &mut Design, p: &CoreParams, top: &str) -> crate::ModRef {
    block(d, p, top).module
}

/// Defines `<top>_batch` for core `p`; returns its typed block.
pub fn block(d: &mut Design, p: &CoreParams, top: &str) -> BatchBlock {
    let p = *p;
    let (inputs, outputs) = (BatchIn::widths(&p), BatchOut::widths(&p));
    d.define_block(&format!("{top}_batch"), &inputs, outputs, |_, m, io| {
        m.doc(
            "variable-length batches: reads each sequence's cumulative offsets from memory and \
             runs the core on it. See hdl/src/soc/batch.rs.",
        );
        m.set_latency(1);
        batch(m, &p, &io)
    })
}

/// The state machine, the accepted START and the registers of the sequence being read.
struct BatchRegs {
    st: Fsm<Batch>,
    /// A START accepted (in Idle or Done).
    go: Sig,
    /// A batch (`BATCH` > 0) rather than the single problem: from the register block (at
    /// START), and held from it.
    varlen_now: Sig,
    varlen: Sig,
    seq: RegHandle,
    /// Which word: 0 cu_q[b], 1 cu_k[b] (first sequence only), 2 cu_q[b + 1], 3 cu_k[b + 1].
    which: RegHandle,
    q_lo: RegHandle,
    k_lo: RegHandle,
    q_hi: RegHandle,
    k_hi: RegHandle,
    aborting: RegHandle,
    launched: RegHandle,
    error: RegHandle,
}

impl BatchRegs {
    /// Declares the state machine and the registers.
    fn new(m: &mut ModuleBuilder, p: &CoreParams, io: &BatchIn) -> Self {
        let iw = p.index_bits;
        let st = Fsm::new(m, "state", Batch::Idle);
        let go = io.start & (st.is(Batch::Idle) | st.is(Batch::Done));
        let varlen_now = io.varlen.batch.any();
        // Held from START: a register drives the launch's many selects, not the register
        // block's `BATCH` through its OR.
        let varlen = m.hold("varlen", varlen_now, go);
        BatchRegs {
            st,
            go,
            varlen_now,
            varlen,
            seq: m.reg("seq", iw, Some(0)),
            which: m.reg("which", 2, Some(0)),
            q_lo: m.reg("q_lo", 32, Some(0)),
            k_lo: m.reg("k_lo", 32, Some(0)),
            q_hi: m.reg("q_hi", 32, Some(0)),
            k_hi: m.reg("k_hi", 32, Some(0)),
            aborting: m.reg("aborting", 1, Some(0)),
            launched: m.reg("launched", 1, Some(0)),
            error: m.reg("error", crate::mem::dma::error::BITS, Some(0)),
        }
    }
}

/// The read of an offset word through the memory port.
struct OffsetRead {
    /// The port takes the read.
    accepted: Sig,
    /// A beat for the block arrives.
    beat: Sig,
    /// The word within the beat.
    word: Sig,
    /// The word arrives (in Wait).
    got: Sig,
    /// The shared memory port's outputs.
    port: PortOut,
}

/// The memory port's outputs: to the memory, and back to the core (one of each pair, by
/// `mem_if`).
struct PortOut {
    mem_req: Option<MemReq>,
    core_mem: Option<MemIn>,
    m_axi: Option<AxiOut>,
    core_m_axi: Option<AxiIn>,
}

/// The read of the offset word `which` of sequence `seq`: its address, the memory port shared
/// with the core, and the word picked out of the beat.
fn offset_read(m: &mut ModuleBuilder, p: &CoreParams, io: &BatchIn, r: &BatchRegs) -> OffsetRead {
    let (a, iw) = (p.addr_bits, p.index_bits);
    let st = &r.st;
    // The read of an offset word: its beat, and the word within it.
    let beat_shift = p.dma.beat_shift();
    let idx = r.seq.q.zext(iw + 1) + r.which.q.bit(1).zext(iw + 1);
    let byte_off = crate::cat(&[idx, m.zero(2)]);
    let byte_off = if iw + 3 <= a {
        byte_off.zext(a)
    } else {
        m.discard(byte_off.slice(iw + 2, a));
        byte_off.trunc(a)
    };
    let list = mux(r.which.q.bit(0), io.varlen.cu_k_addr, io.varlen.cu_q_addr);
    // Registered in the Addr cycle before the read: the sum is not in series with the port.
    let word_addr = m.hold("offset_addr", list + byte_off, st.is(Batch::Addr));
    let low = m.zero(beat_shift);
    let beat_addr = crate::cat(&[word_addr.slice(a - 1, beat_shift), low]);
    let reading = st.is(Batch::Read);
    let own = reading | st.is(Batch::Wait);
    let own = m.name("owns_port", own);

    // The memory port: the core's, except while the block reads an offset (the core is idle).
    let w = p.dma.width;
    let ((accepted, beat, data), port) = match p.dma.mem_if {
        MemIf::Simple => simple_port(io, own, reading, beat_addr),
        MemIf::Axi4 => axi_port(m, p, io, own, reading, beat_addr),
    };
    let words: Vec<Sig> = (0..w / 32)
        .map(|k| data.slice(32 * k + 31, 32 * k))
        .collect();
    // The list's words are 4-byte aligned (checked at START): bits 1..0 select nothing.
    m.discard(word_addr.slice(1, 0));
    let word = if words.len() == 1 {
        words[0]
    } else {
        mux_index(word_addr.slice(beat_shift - 1, 2), &words)
    };
    let got = st.is(Batch::Wait) & beat;
    OffsetRead {
        accepted,
        beat,
        word,
        got,
        port,
    }
}

/// The simple memory port shared with the core: the block's read at `beat_addr` while it
/// `own`s the port. Returns (accepted, beat, data) of the block's read, and the port's
/// outputs.
fn simple_port(io: &BatchIn, own: Sig, reading: Sig, beat_addr: Sig) -> ((Sig, Sig, Sig), PortOut) {
    let mem = io.mem.expect("simple port");
    let core_req = io.core_mem_req.expect("simple port");
    let to_mem = MemReq {
        valid: mux(own, reading, core_req.valid),
        addr: mux(own, beat_addr, core_req.addr),
        write: core_req.write & !own,
        wdata: core_req.wdata,
    };
    let to_core = MemIn {
        req_ready: mem.req_ready & !own,
        rsp_valid: mem.rsp_valid & !own,
        rsp_data: mem.rsp_data,
    };
    let port = PortOut {
        mem_req: Some(to_mem),
        core_mem: Some(to_core),
        m_axi: None,
        core_m_axi: None,
    };
    let read = (reading & mem.req_ready, own & mem.rsp_valid, mem.rsp_data);
    (read, port)
}

/// The AXI4 port shared with the core: the block's read at `beat_addr` while it `own`s the
/// port. Returns (accepted, beat, data) of the block's read, and the port's outputs.
fn axi_port(
    m: &mut ModuleBuilder,
    p: &CoreParams,
    io: &BatchIn,
    own: Sig,
    reading: Sig,
    beat_addr: Sig,
) -> ((Sig, Sig, Sig), PortOut) {
    let beat_shift = p.dma.beat_shift();
    let ins = io.m_axi.expect("AXI4 port");
    let core_out = io.core_m_axi.expect("AXI4 port");
    // While it owns the port the block drives the whole AR channel and RREADY itself
    // (a single-beat INCR read of the full beat, ID 0), whatever the core shows there.
    let mut to_mem = core_out;
    to_mem.arvalid = mux(own, reading, core_out.arvalid);
    to_mem.araddr = mux(own, beat_addr, core_out.araddr);
    to_mem.arid = mux(own, m.zero(p.dma.axi_id_bits), core_out.arid);
    to_mem.arlen = mux(own, m.zero(8), core_out.arlen);
    to_mem.arsize = mux(own, m.lit(3, beat_shift as u64), core_out.arsize);
    to_mem.arburst = mux(own, m.lit(2, crate::mem::dma::AXI_INCR), core_out.arburst);
    to_mem.arcache = mux(own, m.lit(4, crate::mem::dma::AXI_CACHE), core_out.arcache);
    to_mem.arlock = mux(own, m.zero(1), core_out.arlock);
    to_mem.arprot = mux(own, m.zero(3), core_out.arprot);
    to_mem.arqos = mux(own, m.zero(4), core_out.arqos);
    to_mem.rready = core_out.rready | own;
    let mut to_core: AxiIn = ins;
    to_core.arready = ins.arready & !own;
    to_core.rvalid = ins.rvalid & !own;
    let port = PortOut {
        mem_req: None,
        core_mem: None,
        m_axi: Some(to_mem),
        core_m_axi: Some(to_core),
    };
    let read = (reading & ins.arready, own & ins.rvalid, ins.rdata);
    (read, port)
}

/// A sequence's lengths and the checks of its offsets.
struct SeqCheck {
    q_len: Sig,
    k_len: Sig,
    /// Offsets that decrease, or a sequence longer than 2^index_bits − 1.
    bad: Sig,
    /// A list address not 4-byte aligned (a batch only).
    misaligned: Sig,
    /// No queries: the sequence is skipped.
    empty: Sig,
}

/// The lengths of the sequence read into `r` and its checks.
fn seq_check(m: &mut ModuleBuilder, p: &CoreParams, io: &BatchIn, r: &BatchRegs) -> SeqCheck {
    let q_len = r.q_hi.q - r.q_lo.q;
    let k_len = r.k_hi.q - r.k_lo.q;
    let limit = m.lit(32, (1u64 << p.index_bits) - 1);
    let bad = or_all(&[
        r.q_hi.q.lt(r.q_lo.q),
        r.k_hi.q.lt(r.k_lo.q),
        q_len.gt(limit),
        k_len.gt(limit),
    ]);
    let misaligned =
        (io.varlen.cu_q_addr.slice(1, 0) | io.varlen.cu_k_addr.slice(1, 0)).any() & r.varlen_now;
    let empty = q_len.is_zero();
    SeqCheck {
        q_len,
        k_len,
        bad,
        misaligned,
        empty,
    }
}

/// The problem's base addresses, in the order of the row offsets: Q, K, V, O.
fn bases(problem: &Problem) -> [Sig; 4] {
    [
        problem.q_addr,
        problem.k_addr,
        problem.v_addr,
        problem.o_addr,
    ]
}

/// A sequence's bases: the registers' plus the row offsets times the row strides.
struct SeqBases {
    /// The last cycle of the shift-add (Scale).
    scale_done: Sig,
    /// The bases, in the order of [`bases`].
    based: Vec<Sig>,
    /// The carries out of the address range: the row offsets' (sticky) and each base's.
    base_carry: Vec<Sig>,
}

/// The sequence's bases: row offsets times the row strides by shift-add, one multiplier bit a
/// cycle (32 cycles, in Scale), added to the registers' bases.
fn seq_bases(m: &mut ModuleBuilder, p: &CoreParams, io: &BatchIn, r: &BatchRegs) -> SeqBases {
    let a = p.addr_bits;
    let st = &r.st;
    let problem = &io.csr;
    let step = m.reg("scale_step", 6, Some(0));
    let scaling = st.is(Batch::Scale);
    let scale_done = scaling & step.q.eq(31);
    let zero6 = m.zero(6);
    m.set_next(step, mux(scaling, step.q + 1, zero6));
    let mut offsets = vec![];
    // A row offset or a sequence's base beyond the address range (ERR_ADDRESS): sticky over
    // the shift-add (a doubling that loses the top bit, an add that carries out).
    let mut carries = vec![];
    for (name, rows, stride) in [
        ("q_off", r.q_lo.q, problem.q_row_stride),
        ("k_off", r.k_lo.q, problem.k_row_stride),
        ("v_off", r.k_lo.q, problem.v_row_stride),
        ("o_off", r.q_lo.q, problem.o_row_stride),
    ] {
        let acc = m.reg(name, a, Some(0));
        // Bit 31 - step of the row offset, most significant first: acc = 2 acc + bit * stride.
        let msb_first = m.lit(5, 31) - step.q.trunc(5);
        let bit = mux_index(msb_first, &bits_of(rows));
        let twice = acc.q << 1u32;
        let zero = m.zero(a);
        let add = mux(bit, stride, zero);
        let sum = twice.zext(a + 1) + add.zext(a + 1);
        carries.push(acc.q.bit(a - 1) | sum.bit(a));
        m.set_next(acc, mux(scaling, sum.trunc(a), zero));
        m.set_enable(acc, scaling | st.is(Batch::Check));
        offsets.push(acc.q);
    }
    let seq_over = m.reg("seq_over", 1, Some(0));
    let zero1 = m.zero(1);
    m.set_next(seq_over, mux(scaling, seq_over.q | or_all(&carries), zero1));
    m.set_enable(seq_over, scaling | st.is(Batch::Check));
    // The sequence's bases: the registers' plus the row offsets, none past the range;
    // registered (the offsets hold from the end of the shift-add, and the extent check takes
    // the bases index_bits cycles into its state).
    let mut based = vec![];
    let mut base_carry = vec![seq_over.q];
    for (k, base) in bases(problem).into_iter().enumerate() {
        let sum = base.zext(a + 1) + offsets[k].zext(a + 1);
        let sum = m.delay(&format!("seq_base{k}"), sum);
        base_carry.push(sum.bit(a));
        based.push(sum.trunc(a));
    }
    SeqBases {
        scale_done,
        based,
        base_carry,
    }
}

/// A launch of the core: its problem and checks.
struct Launch {
    /// The problem as the core gets it.
    vals: Problem,
    /// The extent check's last cycle.
    extent_done: Sig,
    /// Some address of the launch beyond the range (ERR_ADDRESS).
    over: Sig,
    /// The launch does not happen: out of range, or aborted.
    stop: Sig,
}

impl Launch {
    /// The launch's problem as the core gets it (the sequence's bases and lengths, or the
    /// registers' problem) and its checks, the extent's among them.
    fn new(
        m: &mut ModuleBuilder,
        p: &CoreParams,
        io: &BatchIn,
        r: &BatchRegs,
        chk: &SeqCheck,
        bases: &SeqBases,
    ) -> Self {
        let iw = p.index_bits;
        let varlen = r.varlen;
        let csr = &io.csr;
        let seq = |x: Sig, reg: Sig| mux(varlen, x, reg);
        let vals = Problem {
            q_addr: seq(bases.based[0], csr.q_addr),
            k_addr: seq(bases.based[1], csr.k_addr),
            v_addr: seq(bases.based[2], csr.v_addr),
            o_addr: seq(bases.based[3], csr.o_addr),
            q_len: seq(chk.q_len.trunc(iw), csr.q_len),
            k_len: seq(chk.k_len.trunc(iw), csr.k_len),
            ..*csr
        };
        let ext = extent(m, p, &vals, r.st.is(Batch::Extent));
        let (extent_done, extent_over) = (ext.done, ext.over);
        // unfused: the scratch region the launch's tiles use.
        let extent_over = match io.s {
            Some(s) => extent_over | scratch_over(m, p, &vals, s.addr),
            None => extent_over,
        };
        let over = (varlen & or_all(&bases.base_carry)) | extent_over;
        // Registered in the extent check's last cycle: the launch's start is not in series with
        // the sums behind it.
        let over = m.hold("launch_over", over, extent_done);
        // What the core gets of the sequence (bases and lengths) is registered as the extent
        // check loads its multipliers (the cycle it takes the bases it checks), so the launch's
        // problem comes from registers and is the one checked (the register block's other
        // fields come straight from it).
        let vals = {
            let mut hold = |name: &str, x: Sig| m.hold(&format!("launch_{name}"), x, ext.loading);
            Problem {
                q_addr: hold("q_addr", vals.q_addr),
                k_addr: hold("k_addr", vals.k_addr),
                v_addr: hold("v_addr", vals.v_addr),
                o_addr: hold("o_addr", vals.o_addr),
                q_len: hold("q_len", vals.q_len),
                k_len: hold("k_len", vals.k_len),
                ..vals
            }
        };
        // An ABORT asked for before the core starts stops the batch there (code 6), not after a
        // run nobody wants.
        let stop = over | r.aborting.q;
        Launch {
            vals,
            extent_done,
            over,
            stop,
        }
    }
}

/// The state machine's transitions. A run ends when the core, busy since the launch, is done
/// again. Returns that end of a run.
fn transitions(
    m: &mut ModuleBuilder,
    io: &BatchIn,
    r: &BatchRegs,
    rd: &OffsetRead,
    chk: &SeqCheck,
    scale_done: Sig,
    l: &Launch,
) -> Sig {
    let st = &r.st;
    let c = |s: Batch| st.code(s);
    let seen = m.reg("core_busy_seen", 1, Some(0));
    let in_run = st.is(Batch::Run);
    m.set_next(seen, in_run & (seen.q | io.core_busy));
    let run_end = and_all(&[in_run, seen.q, !io.core_busy, io.core_done]);
    let run_end = m.name("run_end", run_end);
    // A read starts with a cycle that registers its address.
    let read = c(Batch::Addr);
    let done = c(Batch::Done);
    let last_seq = (r.seq.q + 1).eq(io.varlen.batch);
    let single_or_first = mux(r.varlen_now, read, c(Batch::Extent));
    let begin = mux(chk.misaligned | io.addr_over, done, single_or_first);
    let from_idle = mux(r.go, begin, c(Batch::Idle));
    let from_done = mux(r.go, begin, done);
    let next_seq = mux(last_seq, done, read);
    let after_check = mux(chk.empty, next_seq, c(Batch::Scale));
    let check_next = mux(r.aborting.q | chk.bad, done, after_check);
    let stop_after_run = or_all(&[io.core_error.any(), r.aborting.q, !r.varlen, last_seq]);
    let after_run = mux(stop_after_run, done, read);
    st.set_transitions(m, |s| match s {
        Batch::Idle => from_idle,
        Batch::Addr => c(Batch::Read),
        Batch::Read => mux(rd.accepted, c(Batch::Wait), c(Batch::Read)),
        Batch::Wait => mux(
            rd.beat,
            mux(r.which.q.eq(3), c(Batch::Check), read),
            c(Batch::Wait),
        ),
        Batch::Check => check_next,
        Batch::Scale => mux(scale_done, c(Batch::Extent), c(Batch::Scale)),
        Batch::Extent => mux(l.extent_done, c(Batch::Launch), c(Batch::Extent)),
        Batch::Launch => mux(l.stop, done, c(Batch::Run)),
        Batch::Run => mux(run_end, after_run, c(Batch::Run)),
        Batch::Done => from_done,
    });
    run_end
}

/// The words read, the word and sequence counters, and the launched and aborting flags (the
/// next sequence starts where this one ended). Returns the core's start pulse.
fn sequence_updates(
    m: &mut ModuleBuilder,
    io: &BatchIn,
    r: &BatchRegs,
    rd: &OffsetRead,
    chk: &SeqCheck,
    l: &Launch,
    run_end: Sig,
) -> Sig {
    let (st, go) = (&r.st, r.go);
    let advance = (st.is(Batch::Check) & chk.empty) | (run_end & r.varlen);
    let advance = m.name("advance", advance);
    for (k, (reg, from)) in [
        (r.q_lo, Some(r.q_hi)),
        (r.k_lo, Some(r.k_hi)),
        (r.q_hi, None),
        (r.k_hi, None),
    ]
    .into_iter()
    .enumerate()
    {
        let mine = rd.got & r.which.q.eq(k as u64);
        match from {
            Some(hi) => {
                m.set_next(reg, mux(mine, rd.word, hi.q));
                m.set_enable(reg, mine | advance);
            }
            None => {
                m.set_next(reg, rd.word);
                m.set_enable(reg, mine);
            }
        }
    }
    let next_which = mux(r.which.q.eq(3), m.lit(2, 2), r.which.q + 1);
    let zero2 = m.zero(2);
    m.set_next(r.which, mux(go, zero2, next_which));
    m.set_enable(r.which, go | rd.got);
    let zero_seq = m.zero(r.seq.q.width());
    m.set_next(r.seq, mux(go, zero_seq, r.seq.q + 1));
    m.set_enable(r.seq, go | advance);
    let launch = st.is(Batch::Launch) & !l.stop;
    let zero1 = m.zero(1);
    m.set_next(r.launched, mux(go, zero1, launch | r.launched.q));
    let abort_now = io.abort_req & !st.is(Batch::Idle) & !st.is(Batch::Done);
    m.set_next(r.aborting, mux(go, zero1, r.aborting.q | abort_now));
    launch
}

/// The error register: the list's, the core's, or an abort's.
fn error_update(
    m: &mut ModuleBuilder,
    io: &BatchIn,
    r: &BatchRegs,
    chk: &SeqCheck,
    l: &Launch,
    run_end: Sig,
) {
    let (st, go, aborting) = (&r.st, r.go, r.aborting.q);
    let eb = crate::mem::dma::error::BITS;
    let aborted = m.lit(eb, ERR_ABORTED);
    let invalid = m.lit(eb, ERR_BATCH);
    let beyond = m.lit(eb, ERR_ADDRESS);
    let none = m.zero(eb);
    let at_start = mux(io.addr_over, beyond, mux(chk.misaligned, invalid, none));
    let at_check = mux(aborting, aborted, invalid);
    let after_core = mux(
        io.core_error.any(),
        io.core_error,
        mux(aborting, aborted, none),
    );
    let in_launch = st.is(Batch::Launch);
    let err_d = mux(
        go,
        at_start,
        mux(
            st.is(Batch::Check),
            at_check,
            mux(in_launch, mux(l.over, beyond, aborted), after_core),
        ),
    );
    let check_stop = st.is(Batch::Check) & (aborting | chk.bad);
    m.set_next(r.error, err_d);
    m.set_enable(r.error, go | check_stop | run_end | (in_launch & l.stop));
}

/// The outputs to the core (start pulse `launch` and the launch's problem; counters kept after
/// the first launch; the memory port's inputs), to the register block (busy, done, finish,
/// error) and to the memory.
fn outputs(
    m: &mut ModuleBuilder,
    r: &BatchRegs,
    l: &Launch,
    launch: Sig,
    port: PortOut,
) -> BatchOut {
    let st = &r.st;
    let busy = !(st.is(Batch::Idle) | st.is(Batch::Done));
    let in_done = st.is(Batch::Done);
    // `finish`: one pulse per accepted START, the cycle after it reaches Done, also when a
    // START in Done is refused at once and the state never leaves Done.
    let was_done = m.delay("was_done", in_done);
    let went = m.delay("go_q", r.go);
    BatchOut {
        busy,
        done: in_done,
        finish: in_done & (!was_done | went),
        error: r.error.q,
        core: CoreLaunch {
            start: launch,
            keep_counters: r.launched.q,
            mem: port.core_mem,
            m_axi: port.core_m_axi,
            problem: l.vals,
        },
        mem_req: port.mem_req,
        m_axi: port.m_axi,
    }
}

/// The block's body: inputs, the offsets' reads, the sequence's checks and bases, the launch,
/// the state machine and the outputs.
fn batch(m: &mut ModuleBuilder, p: &CoreParams, io: &BatchIn) -> BatchOut {
    let r = BatchRegs::new(m, p, io);
    let rd = offset_read(m, p, io, &r);
    let chk = seq_check(m, p, io, &r);
    let bases = seq_bases(m, p, io, &r);
    let l = Launch::new(m, p, io, &r, &chk, &bases);
    let run_end = transitions(m, io, &r, &rd, &chk, bases.scale_done, &l);
    let start = sequence_updates(m, io, &r, &rd, &chk, &l, run_end);
    error_update(m, io, &r, &chk, &l, run_end);
    outputs(m, &r, &l, start, rd.port)
}

/// The extent check's cycles: the one that loads its multipliers (and takes the bases), its last
/// (the products in), and whether the launch reaches past the address range then.
struct Extent {
    loading: Sig,
    done: Sig,
    over: Sig,
}

/// The extent check of a launch (its problem `vals`, as the core gets it), stepped while
/// `active` (the Extent state), 2 index_bits + 2 cycles ([`Extent`]). `over`: some
/// tensor the launch reads or writes reaches past 2^addr_bits, its last byte
/// base + (heads − 1) · head_stride + (len − 1) · row_stride + row_bytes − 1 (K and V: their
/// last head, (heads − 1) / max(kv_group, 1)); a tensor of no rows, or a problem of no heads,
/// reaches nothing. First a restoring division for the last K/V head (index_bits cycles), then
/// both products of each tensor at once, most significant bit first:
/// acc = 2 acc + a_bit · head_stride + b_bit · row_stride, with a sticky carry (index_bits + 1
/// cycles), and a last cycle in which the launch registers what it decides.
fn extent(m: &mut ModuleBuilder, p: &CoreParams, vals: &Problem, active: Sig) -> Extent {
    let (a, iw) = (p.addr_bits, p.index_bits);
    let sb = 32 - (2 * iw).leading_zeros();
    let step = m.reg("extent_step", sb, Some(0));
    let zero_s = m.zero(sb);
    m.set_next(step, mux(active, step.q + 1, zero_s));
    let dividing = active & step.q.lt(iw as u64);
    let loading = active & step.q.eq(iw as u64);
    let multiplying = active & step.q.gt(iw as u64) & step.q.le(2 * iw as u64);
    // A last cycle with the products in: the launch's checks are registered in it.
    let done = active & step.q.eq(2 * iw as u64 + 1);
    // The last K/V head: (heads − 1) / max(kv_group, 1), a quotient bit a cycle.
    let heads_m1 = vals.heads - 1;
    let group = vals.kv_group;
    let one = m.lit(iw, 1);
    let group = mux(group.is_zero(), one, group);
    let num = m.reg("extent_num", iw, Some(0));
    // The remainder stays below the divisor, so it fits index_bits; shifted, one bit more.
    let rem = m.reg("extent_rem", iw, Some(0));
    let quo = m.reg("extent_quo", iw, Some(0));
    let r2 = crate::cat(&[rem.q, num.q.bit(iw - 1)]);
    let fits = r2.ge(group.zext(iw + 1));
    let r2_less = r2 - group.zext(iw + 1);
    let zero_q = m.zero(iw);
    m.set_next(num, mux(dividing, num.q << 1u32, heads_m1));
    m.set_enable(num, !active | dividing);
    let rem_next = mux(fits, r2_less, r2);
    m.discard(rem_next.bit(iw));
    m.set_next(rem, mux(dividing, rem_next.trunc(iw), zero_q));
    m.set_enable(rem, !active | dividing);
    let quo_next = crate::cat(&[quo.q.trunc(iw - 1), fits]);
    m.set_next(quo, mux(dividing, quo_next, zero_q));
    m.set_enable(quo, !active | dividing);
    // The multipliers, shifted out most significant bit first: heads − 1 (Q, O), the last K/V
    // head (K, V); q_len − 1 (Q, O), k_len − 1 (K, V).
    let shifter = |m: &mut ModuleBuilder, name: &str, load: Sig| {
        let r = m.reg(name, iw, Some(0));
        m.set_next(r, mux(loading, load, r.q << 1u32));
        m.set_enable(r, loading | multiplying);
        r.q.bit(iw - 1)
    };
    let a_qo = shifter(m, "extent_a_qo", heads_m1);
    let a_kv = shifter(m, "extent_a_kv", quo.q);
    let b_qo = shifter(m, "extent_b_qo", vals.q_len - 1);
    let b_kv = shifter(m, "extent_b_kv", vals.k_len - 1);
    // Row bytes: Q, K, V rows of operands; O rows short (out) or long (accumulator).
    let f = p.row.pe.mac.formats();
    let d2 = p.operand_row_bytes() as u64;
    let (o_short, o_long) = (
        (p.d() * f.out.bytes()) as u64,
        (p.d() * f.acc.bytes()) as u64,
    );
    let out_rb = mux(vals.out_f32, m.lit(a + 2, o_long), m.lit(a + 2, o_short));
    let mut over = vec![];
    let v = vals;
    for (t, (ab, bb, len), (base, head_stride, row_stride)) in [
        (
            "q",
            (a_qo, b_qo, v.q_len),
            (v.q_addr, v.q_head_stride, v.q_row_stride),
        ),
        (
            "k",
            (a_kv, b_kv, v.k_len),
            (v.k_addr, v.k_head_stride, v.k_row_stride),
        ),
        (
            "v",
            (a_kv, b_kv, v.k_len),
            (v.v_addr, v.v_head_stride, v.v_row_stride),
        ),
        (
            "o",
            (a_qo, b_qo, v.q_len),
            (v.o_addr, v.o_head_stride, v.o_row_stride),
        ),
    ] {
        let acc = m.reg(&format!("extent_{t}"), a, Some(0));
        let sticky = m.reg(&format!("extent_{t}_carry"), 1, Some(0));
        let w = a + 2;
        let zero = m.zero(w);
        let hs = mux(ab, head_stride.zext(w), zero);
        let rs = mux(bb, row_stride.zext(w), zero);
        let sum = (acc.q.zext(w) << 1u32) + hs + rs;
        let carry = sum.slice(w - 1, a).any();
        let zero_a = m.zero(a);
        m.set_next(acc, mux(multiplying, sum.trunc(a), zero_a));
        m.set_enable(acc, loading | multiplying);
        let zero1 = m.zero(1);
        m.set_next(sticky, mux(multiplying, sticky.q | carry, zero1));
        m.set_enable(sticky, loading | multiplying);
        // The last byte, once the products are in: the base + row bytes − 1 part is taken
        // into a register as the multipliers load (the launch's problem holds through the
        // check), so the check's last add is of two registers.
        let rb = if t == "o" { out_rb } else { m.lit(w, d2) };
        let end = (base.zext(w) + rb) - 1;
        let end = m.hold(&format!("extent_{t}_end"), end, loading);
        let last = end + acc.q.zext(w);
        let past = sticky.q | last.slice(w - 1, a).any();
        m.discard(last.trunc(a));
        let reaches = len.any() & vals.heads.any();
        over.push(past & reaches);
    }
    Extent {
        loading,
        done,
        over: or_all(&over),
    }
}

/// unfused: the launch's scratch region reaches past 2^addr_bits: S_ADDR + ceil(k_len / Bc) ·
/// Br · (a block row of S) − 1 (a tile of fewer rows, or a causal tile of fewer blocks, uses
/// less); a launch without a key, a query or a head uses none.
fn scratch_over(m: &mut ModuleBuilder, p: &CoreParams, vals: &Problem, s_addr: Sig) -> Sig {
    let (a, iw) = (p.addr_bits, p.index_bits);
    let w = a + iw + 20;
    let blocks = crate::fp::arith::div_ceil_const(m, vals.k_len, p.bc() as u64);
    // rowfused's spill: the blocks its S arrays hold take no scratch space.
    let blocks = match super::regmap::scratch_held_blocks(p) {
        0 => blocks,
        held => {
            let held = m.lit(blocks.width(), held);
            let zero = m.zero(blocks.width());
            mux(blocks.gt(held), blocks - held, zero)
        }
    };
    let per_block = m.lit(w, super::regmap::scratch_block_bytes(p));
    let span = blocks.zext(w).mul_lo(per_block, w);
    let last = (s_addr.zext(w) + span) - 1;
    let past = last.slice(w - 1, a).any();
    m.discard(last.trunc(a));
    let used = and_all(&[vals.k_len.any(), vals.q_len.any(), vals.heads.any()]);
    past & used
}

/// The bits of `x`, least significant first.
fn bits_of(x: Sig) -> Vec<Sig> {
    (0..x.width()).map(|i| x.bit(i)).collect()
}
