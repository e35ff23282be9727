//! The core's sequencer: latches the problem at `start`, walks heads and query tiles (the main
//! state machine), chooses the next MAC phase in the last step of the current one, counts the
//! steps (the PE step bus), triggers the row engines' softmax of each block, and hands a
//! finished tile to the readout.
//!
//! Phase selection: QK may run at most two blocks ahead of PV (QK(0), QK(1), PV(0), QK(2),
//! PV(1), …); a PV needs its block's softmax done and the V block landed, a QK the K block and
//! the Q tile. On one array a phase never follows one of its own kind directly (the block just
//! released has not yet been replaced in the channel's ready flag). In buf2d a QK also waits
//! until the rows have copied the previous block's S out of the PE registers (`s_free`; a full
//! flag), and with single-port P banks a PV does not start while the softmax runs nor the
//! softmax while PV runs. reg3d runs two phase streams at once, one per tier
//! (`phases_streams`); a tier's next block starts in the last step of its current one when the
//! DMA has already landed it (`k_next`, `v_next`), so a busy tier never idles between blocks.
//! With a MAC deeper than its a·b S accumulators hide, reg2d runs the same two streams on its
//! one array, interleaved step by step (QK never two cycles running).
//! Step order: with the MAC accumulating in its pipeline (`PeConfig`'s feedback) a score's
//! products run back to back (QK: ii, jj, k, innermost last; [`nest_steps`]), and an O value's
//! over a block's keys where P comes from the row's P bank (PV: ii, q, jk;
//! `pe_row::PeRowConfig::pv_runs`); else the dimension is outermost and the accumulators
//! rotate (QK: k, ii, jj; PV: jk, ii, q).
//! The P read bus `p_rd` gives the next cycle's PV step (the P banks' registered read): its
//! address from registers alone, its enable from this cycle's phase choice. Combinational from
//! the DMA's ready flags to the step bus and `p_rd`'s enable (a path from `v_ready` to the P
//! banks' read); latency 1 from `start` to `busy`.

use super::ports::{
    KeyMove, MaskNext, NocStatus, PRead, PeStep, Problem, ReadDesc, Scratch, ScratchPass,
    ScratchStatus, SeqIn, SeqOut, Stall, Step, WriteDesc,
};
use super::{reg_set, CoreParams};
use crate::array::pe::PeOp;
use crate::array::pe_row::SCALE_STEPS;
use crate::fault::Fault;
use crate::fp::arith::div_ceil_const;
use crate::ir::fsm::Fsm;
use crate::ir::iface::{select, Block};
use crate::mem::dma::ROW_BYTES_BITS;
use crate::variants::{Arrays, SHome, SoftmaxPass, WholeRows};
use crate::{addr_bits, and_all, cat, mux, Design, ModuleBuilder, RegHandle, Sig};

crate::states! {
    /// The main sequencer: per head, per query tile (Tile: is there one; Plan: its block
    /// count), run the tile's blocks, then hand the tile to the readout.
    pub enum Seq = "S" { Idle, Head, Tile, TileGo, Run, End, Finish, Plan }
}

crate::states! {
    /// The phase the PE array runs this step.
    pub enum Phase = "PH" { None, Qk, Pv }
}

/// The sequencer's block: inputs [`SeqIn`], outputs [`SeqOut`].
pub type SeqBlock = Block<SeqIn, SeqOut<u32>>;

/// Input widths.
pub fn input_widths(p: &CoreParams) -> SeqIn<u32> {
    SeqIn {
        start: 1,
        rows_busy: 1,
        s_free: 1,
        ro_idle: 1,
        q_ready: 1,
        k_ready: 1,
        v_ready: 1,
        k_next: 1,
        v_next: 1,
        o_busy: 1,
        problem: Problem::widths(p),
        s: p.row.scratch().then_some(Scratch { addr: p.addr_bits }),
        x: p.row
            .scratch()
            .then_some(ScratchStatus { ready: 1, busy: 1 }),
        noc: p.row.noc().map(|_| NocStatus { arrived: 1 }),
    }
}

/// Output widths.
pub fn output_widths(p: &CoreParams) -> SeqOut<u32> {
    let (i, a) = (p.index_bits, p.addr_bits);
    let keys = KeyMove {
        now: i,
        alt0: i,
        take0: 1,
        alt1: i,
        take1: 1,
    };
    SeqOut {
        go: 1,
        busy: 1,
        done: 1,
        start_qk: 1,
        start_pv: 1,
        qk_last_step: 1,
        pv_last_step: 1,
        sm_go: 1,
        sm_first: 1,
        sm_slot: 1,
        sm_second: 1,
        sm_blk: p.row.sm_blk_width(),
        blk: i,
        q_base: i,
        nblk: i,
        go_once: 1,
        empty_tile: 1,
        handoff: 1,
        rows_valid: i,
        o_head_off: a,
        o_row_bytes: ROW_BYTES_BITS,
        skipped: i,
        qk_issued: i,
        pv_issued: i,
        reach_off: reach_bits(p),
        latched: Problem::widths(p),
        mask: MaskNext {
            q_base: i,
            q_len: i,
            k_len: i,
            causal: 1,
            qk: keys,
            pv: keys,
            sm: keys,
        },
        pe: p.row.step_widths(),
        pe_pv: p.row.step_widths(),
        p_rd: p.row.p_read_widths(),
        step: Step::widths(p),
        stall: Stall::widths(),
        x: p.row.scratch().then(|| p.dma.read_desc()),
        wr: p.row.scratch().then(|| p.dma.write_desc()),
        pass: p.row.s_in_memory().then_some(ScratchPass { pv: 1 }),
    }
}

/// Defines the sequencer of the core `p`.
pub fn build(d: &mut Design, p: &CoreParams) -> SeqBlock {
    let name = format!("{}_seq", p.module_name());
    d.define_block(&name, &input_widths(p), output_widths(p), |_, m, i| {
        m.doc(
            "core sequencer: problem latch, heads and tiles (state S_*), phase selection \
                 (PH_*), MAC step counters, softmax trigger, tile hand-off to the readout.\n\
                 Latency 1 (start -> busy); the step bus is combinational from the DMA's ready \
                 flags. See hdl/src/core/sequencer.rs.",
        );
        m.set_latency(1);
        sequencer(m, p, &i)
    })
}

/// Bits of [`reach_offset`]: signed, wide enough for any query row plus it.
pub(crate) fn reach_bits(p: &CoreParams) -> u32 {
    p.index_bits + 3
}

/// Br + k_len − q_len, signed ([`reach_bits`]): a query tile starting at row `qb` reaches
/// keys up to `qb` plus it. Latched with the problem, so [`keys_needed`] adds it to a tile's
/// first row without the lengths' difference in series.
fn reach_offset(p: &CoreParams, raw: &Problem) -> Sig {
    let wide = reach_bits(p);
    let diff = raw.k_len.zext(wide) - raw.q_len.zext(wide);
    diff + p.br() as u64
}

/// The keys the query tile starting at row `qb` needs, and the tile's end row: all of K, or for
/// causal attention the keys up to its last row's diagonal, tile_end + k_len − q_len
/// (bottom-right aligned), clamped to 0..=k_len. `reach_off` is the problem's
/// [`reach_offset`].
pub(crate) fn keys_needed(
    m: &mut ModuleBuilder,
    p: &CoreParams,
    prob: &Problem,
    reach_off: Sig,
    qb: Sig,
) -> (Sig, Sig) {
    let iw = p.index_bits;
    let end_i = qb + p.br() as u64;
    let past_end = end_i.gt(prob.q_len);
    let tile_end = mux(past_end, prob.q_len, end_i);
    // Causal: the tile's last row sees keys up to its end + k_len − q_len, between 0 and k_len.
    // The end before its clamp to q_len gives the same (past q_len the reach is over k_len
    // either way), so the reach is one add of the latched offset, its sign the clamp at 0,
    // and the clamp at k_len compares the end with q_len beside it.
    let wide = reach_bits(p);
    let reach = qb.zext(wide) + reach_off;
    let negative = reach.msb();
    // (Between the sign and the low bits: where neither clamp applies, the reach fits the low
    // bits.)
    m.discard(reach.slice(wide - 2, iw));
    let end = qb.zext(iw + 1) + p.br() as u64;
    let over = end.gt(prob.q_len.zext(iw + 1));
    let zero_i = m.zero(iw);
    let reach = mux(negative, zero_i, mux(over, prob.k_len, reach.trunc(iw)));
    (mux(prob.causal, reach, prob.k_len), tile_end)
}

/// The sequencer's registers.
struct Regs {
    state: Fsm<Seq>,
    head: RegHandle,
    q_base: RegHandle,
    o_head_off: RegHandle,
    nblk: RegHandle,
    ph_kind: Fsm<Phase>,
    ph_blk: RegHandle,
    /// A QK step's position in the dimension loop, 0 to `qk_dims` − 1 (d; with integer QKᵀ
    /// the scale steps, then the packed products): the innermost counter of QK's ii, jj, k.
    kk: RegHandle,
    /// A step's query row among a PE's `a` (Br / rows).
    ii: RegHandle,
    /// A QK step's key among a PE's `b` (Bc / cols).
    jj: RegHandle,
    /// A PV step's key in the block, 0 to Bc − 1: the weight P[i][jk] and the row of V it
    /// scales.
    jk: RegHandle,
    /// A PV step's output column among a PE's `e` (d / cols).
    qq: RegHandle,
    qk_issued: RegHandle,
    pv_issued: RegHandle,
    qk_done: RegHandle,
    pv_done: RegHandle,
    sm_done: RegHandle,
    /// noc2d: the blocks whose P has landed in the PV array's P banks.
    p_arrived: Option<RegHandle>,
    /// buf2d: the PE registers' one S block holds a QK's result the rows have not yet copied
    /// out.
    s_full: Option<RegHandle>,
    /// Two phase streams (reg3d, or interleaved): the PV stream (the QK stream's is `ph_kind`,
    /// `ph_blk`, k, ii, jj).
    pv: Option<PvStream>,
    /// unfused: the scratch channel's descriptor of the tile (0 none yet, 1 S, 2 P) and the
    /// offset of the next S or P block in the scratch region.
    x_phase: Option<RegHandle>,
    wr_off: Option<RegHandle>,
}

/// The PV phase stream (reg3d's PV tier, or interleaved on one array): running, its query-row
/// counter and its block; interleaved, whether the QK stream stepped last cycle.
struct PvStream {
    run: RegHandle,
    ii: RegHandle,
    blk: RegHandle,
    qk_went: Option<RegHandle>,
}

impl Regs {
    fn new(m: &mut ModuleBuilder, p: &CoreParams) -> Self {
        let (iw, aw) = (p.index_bits, p.addr_bits);
        let r = &p.row;
        let mut reg = |name: &str, w: u32| m.reg(name, w, Some(0));
        let (head, q_base, o_head_off, nblk) = (
            reg("head", iw),
            reg("q_base", iw),
            reg("o_head_off", aw),
            reg("nblk", iw),
        );
        let ph_blk = reg("ph_blk", iw);
        let (kk, ii, jj, jk, qq) = (
            reg("k", addr_bits(p.d())),
            reg("ii", addr_bits(r.a)),
            reg("jj", addr_bits(r.b)),
            reg("jk", addr_bits(p.bc())),
            reg("q", addr_bits(r.e)),
        );
        let (qk_issued, pv_issued, qk_done, pv_done, sm_done) = (
            reg("qk_issued", iw),
            reg("pv_issued", iw),
            reg("qk_done", iw),
            reg("pv_done", iw),
            reg("sm_done", iw),
        );
        let p_arrived = p.row.noc().map(|_| reg("p_arrived", iw));
        let s_full = p.row.s_in_sram().then(|| reg("s_full", 1));
        let scratch = p.row.scratch();
        let x_phase = scratch.then(|| reg("x_phase", 2));
        let wr_off = scratch.then(|| reg("wr_off", aw));
        let pv = p.row.two_streams().then(|| PvStream {
            run: reg("pv_run", 1),
            ii: reg("pv_ii", addr_bits(r.a)),
            blk: reg("pv_blk", iw),
            qk_went: p.row.interleaved().then(|| reg("qk_went", 1)),
        });
        Regs {
            state: Fsm::new(m, "state", Seq::Idle),
            ph_kind: Fsm::new(m, "ph_kind", Phase::None),
            head,
            q_base,
            o_head_off,
            nblk,
            ph_blk,
            kk,
            ii,
            jj,
            jk,
            qq,
            qk_issued,
            pv_issued,
            qk_done,
            pv_done,
            sm_done,
            p_arrived,
            s_full,
            pv,
            x_phase,
            wr_off,
        }
    }
}

/// What phase selection decides this cycle.
struct Phases {
    start_qk: Sig,
    start_pv: Sig,
    qk_last_step: Sig,
    pv_last_step: Sig,
    stall: Stall,
    step: Step,
    /// The P read for the next cycle's step.
    p_rd: PRead,
    /// The QK phase's and the PV phase's step buses (reg3d: one per tier; 2-D designs merge
    /// them into the one bus).
    qk_bus: PeStep,
    pv_bus: PeStep,
    /// The QK phase's and the PV phase's blocks as the masks take them.
    qk_keys: KeyMove,
    pv_keys: KeyMove,
    /// Comparisons of the issue counts kept in registers, set once every count's input is.
    flags: Vec<CountFlag>,
}

fn sequencer(m: &mut ModuleBuilder, p: &CoreParams, i: &SeqIn) -> SeqOut {
    let r = Regs::new(m, p);
    let idle = r.state.is(Seq::Idle);
    let go = i.start & idle;
    let go = m.name("go", go);
    // Latched at start: the problem does not change while the core runs.
    let raw = &i.problem;
    let mut hold = |n: &str, x: Sig| m.hold(n, x, go);
    let prob = Problem {
        q_addr: hold("q_base_addr", raw.q_addr),
        k_addr: hold("k_base_addr", raw.k_addr),
        v_addr: hold("v_base_addr", raw.v_addr),
        o_addr: hold("o_base_addr", raw.o_addr),
        heads: hold("n_heads", raw.heads),
        q_len: hold("q_length", raw.q_len),
        k_len: hold("k_length", raw.k_len),
        causal: hold("is_causal", raw.causal),
        out_f32: hold("is_f32", raw.out_f32),
        c_const: hold("softmax_c", raw.c_const),
        q_row_stride: hold("q_row_stride", raw.q_row_stride),
        q_head_stride: hold("q_head_stride", raw.q_head_stride),
        k_row_stride: hold("k_row_stride", raw.k_row_stride),
        k_head_stride: hold("k_head_stride", raw.k_head_stride),
        v_row_stride: hold("v_row_stride", raw.v_row_stride),
        v_head_stride: hold("v_head_stride", raw.v_head_stride),
        o_row_stride: hold("o_row_stride", raw.o_row_stride),
        o_head_stride: hold("o_head_stride", raw.o_head_stride),
        kv_group: hold("kv_group", raw.kv_group),
    };
    let reach_off = m.hold("reach_off", reach_offset(p, raw), go);
    // O rows in the short output format, or in the accumulator's (`out_f32`).
    let f = p.row.pe.mac.formats();
    let o_row_bytes = {
        let short = m.lit(ROW_BYTES_BITS, (p.d() * f.out.bytes()) as u64);
        let long = m.lit(ROW_BYTES_BITS, (p.d() * f.acc.bytes()) as u64);
        mux(prob.out_f32, long, short)
    };
    let (need_d, tile_end) = keys_needed(m, p, &prob, reach_off, r.q_base.q);
    // A tile's valid query rows, registered: q_base holds through a tile, and the first use is
    // in its Plan state, a cycle after the Tile state in which q_base moved on.
    let rows_valid = m.delay("rows_valid", tile_end - r.q_base.q);
    let need_d = m.name("keys_needed", need_d);
    // The tile's blocks from its keys registered in the Tile state, set in Plan: the causal
    // arithmetic and the division are not in one cycle.
    let need_r = m.delay("keys_needed_r", need_d);
    let nblk_d = div_ceil_const(m, need_r, p.bc() as u64);
    let all_blocks = div_ceil_const(m, prob.k_len, p.bc() as u64);

    let sm = softmax_trigger(m, p, &r, i);
    let mut ph = match r.pv {
        Some(_) => phases_streams(m, p, &r, i),
        None => phases(m, p, &r, i, &sm),
    };
    let s_addr = i.s.map(|s| m.hold("s_base_addr", s.addr, go));
    let (x, wr) = match (s_addr, i.x) {
        (Some(base), Some(x)) => {
            let (xd, wd) = scratch(m, p, &r, i, &sm, (base, x), rows_valid, ph.pv_last_step);
            (Some(xd), Some(wd))
        }
        _ => (None, None),
    };
    let tile = main_fsm(m, p, &r, i, &prob, go, nblk_d);
    // One step at a time in 2-D: the one bus carries the running phase's steps (interleaved:
    // the stream whose turn it is).
    let (pe, pe_pv) = match p.row.plan().arrays {
        Arrays::PerPhase => (ph.qk_bus, ph.pv_bus),
        Arrays::Shared { .. } => {
            let mut one = select(ph.step.pv, &ph.pv_bus, &ph.qk_bus);
            one.valid = ph.qk_bus.valid | ph.pv_bus.valid;
            (one, one)
        }
    };
    for flag in std::mem::take(&mut ph.flags) {
        flag.finish(m);
    }
    // The masks' inputs: the problem and the tile's first row as they are (registers: they
    // move only at `go`, at a head's end and at a tile's hand-off, and the Tile, Plan and
    // TileGo states come between that and a tile's first phase, so the masks' registered
    // differences have caught up by then), the blocks as they will be after this cycle. No
    // reset or phase logic is then in series with the masks' subtractions.
    let mask = MaskNext {
        q_base: r.q_base.q,
        q_len: prob.q_len,
        k_len: prob.k_len,
        causal: prob.causal,
        qk: ph.qk_keys,
        pv: ph.pv_keys,
        sm: sm.keys,
    };
    // The blocks a causal tile skips, for the counter file: registered (counted a cycle after
    // the tile's first go), so the key arithmetic is not in series with the counters' adders.
    let skipped = {
        // (At the tile's go its block count is in `nblk`, set in the Plan state.)
        let s = all_blocks - r.nblk.q;
        let zero = m.zero(p.index_bits);
        m.delay("skipped_r", mux(tile.go_once, s, zero))
    };
    SeqOut {
        go,
        busy: !idle,
        done: tile.done,
        start_qk: ph.start_qk,
        start_pv: ph.start_pv,
        qk_last_step: ph.qk_last_step,
        pv_last_step: ph.pv_last_step,
        sm_go: sm.go,
        sm_first: sm.first,
        sm_slot: sm.blk.bit(0),
        sm_second: sm.second,
        sm_blk: sm_blk(p, &sm),
        blk: r.ph_blk.q,
        q_base: r.q_base.q,
        nblk: r.nblk.q,
        go_once: tile.go_once,
        empty_tile: tile.empty,
        handoff: tile.handoff,
        rows_valid,
        o_head_off: r.o_head_off.q,
        o_row_bytes,
        skipped,
        qk_issued: r.qk_issued.q,
        pv_issued: r.pv_issued.q,
        reach_off,
        latched: prob,
        mask,
        pe,
        pe_pv,
        p_rd: ph.p_rd,
        step: ph.step,
        stall: ph.stall,
        x,
        wr,
        pass: r
            .x_phase
            .filter(|_| p.row.s_in_memory())
            .map(|x| ScratchPass { pv: x.q.eq(2) }),
    }
}

/// The softmax's block field for the rows: its place in the S array, and with `spill` above
/// it whether it is past the array (the array holds blocks 0 .. C − 1 of a row).
fn sm_blk(p: &CoreParams, sm: &Softmax) -> Sig {
    let bb = p.row.blk_bits();
    match sm.past {
        Some(past) if bb == 0 => past,
        Some(past) => cat(&[past, sm.blk.trunc(bb)]),
        None => sm.blk.trunc(bb.max(1)),
    }
}

/// The scratch region's descriptors.
///
/// unfused: each pass writes its block through the O channel as it finishes (S after a max
/// pass, P after an exp pass; the next pass waits until the write is done), S at `s_addr` +
/// j·rows·(bc·4) and P over it at `s_addr` + j·rows·(bc·2) (each row rounded up to a beat).
/// The scratch channel reads the tile's S back once every S write is done (one descriptor, a
/// block of the tile's rows per block, released as each exp pass finishes), then its P once
/// every P write is done (released at each PV's last step).
///
/// rowfused with `spill`: only the blocks past the S array (j ≥ C) go out, S alone, after
/// their max passes, at `s_addr` + (j − C)·rows·(bc·4); the scratch channel reads them back
/// once every max pass is done (one descriptor of the nblk − C blocks, released as each of
/// their exp passes finishes).
#[allow(clippy::too_many_arguments)]
fn scratch(
    m: &mut ModuleBuilder,
    p: &CoreParams,
    r: &Regs,
    i: &SeqIn,
    sm: &Softmax,
    (s_addr, x): (Sig, ScratchStatus),
    rows_valid: Sig,
    pv_last_step: Sig,
) -> (ReadDesc, WriteDesc) {
    let (iw, aw) = (p.index_bits, p.addr_bits);
    let x_phase = r.x_phase.expect("a scratch region");
    let wr_off = r.wr_off.expect("a scratch region");
    let (sb, pb) = p.row.scratch_row_bytes();
    let bytes = |m: &mut ModuleBuilder, p_pass: Sig| {
        let s16 = m.lit(ROW_BYTES_BITS, sb as u64);
        let p16 = m.lit(ROW_BYTES_BITS, pb as u64);
        mux(p_pass, p16, s16)
    };
    let stride = |b: Sig| b.resize(aw);
    if let Some(past) = sm.past {
        // rowfused with `spill`.
        let tile_go = r.state.is(Seq::TileGo);
        let zero_a = m.zero(aw);
        let quiet = r.state.is(Seq::Run) & !i.o_busy & !x.busy;
        let nblk = r.nblk.q;
        let s_bytes = m.lit(ROW_BYTES_BITS, sb as u64);
        let block_bytes = rows_valid.zext(aw).mul_lo(stride(s_bytes), aw);
        let start = sm.finished & !sm.second & past;
        let off_d = mux(tile_go, zero_a, wr_off.q + block_bytes);
        reg_set(m, wr_off, off_d, start | tile_go);
        let wr = WriteDesc {
            start,
            base: s_addr + wr_off.q,
            stride: stride(s_bytes),
            row_bytes: s_bytes,
            rows: rows_valid,
        };
        let held = m.lit(iw, p.row.s_blocks() as u64);
        let spilled = nblk - held;
        let go = and_all(&[quiet, x_phase.q.eq(0), nblk.gt(held), r.sm_done.q.ge(nblk)]);
        let one2 = m.lit(2, 1);
        let zero2 = m.zero(2);
        reg_set(m, x_phase, mux(tile_go, zero2, one2), go | tile_go);
        m.discard(pv_last_step);
        let xd = ReadDesc {
            start: go,
            base: s_addr,
            stride: stride(s_bytes),
            row_bytes: s_bytes,
            rows: spilled.mul_lo(rows_valid, iw),
            block_rows: rows_valid,
            want: m.zero(1),
            release: sm.finished & sm.second & past,
        };
        return (xd, wr);
    }
    // The O channel: the block of the pass that just finished.
    let wr_bytes = bytes(m, sm.second);
    let block_bytes = rows_valid.zext(aw).mul_lo(stride(wr_bytes), aw);
    let last_max = !sm.second & (sm.blk + 1).eq(r.nblk.q);
    let tile_go = r.state.is(Seq::TileGo);
    let zero_a = m.zero(aw);
    let off_d = mux(last_max | tile_go, zero_a, wr_off.q + block_bytes);
    reg_set(m, wr_off, off_d, sm.finished | tile_go);
    let wr = WriteDesc {
        start: sm.finished,
        base: s_addr + wr_off.q,
        stride: stride(wr_bytes),
        row_bytes: wr_bytes,
        rows: rows_valid,
    };
    // The scratch channel: S once the max passes' writes are done, then P once the exp
    // passes' are.
    let run = r.state.is(Seq::Run);
    let quiet = run & !i.o_busy & !x.busy;
    let nblk = r.nblk.q;
    let s_go = and_all(&[quiet, x_phase.q.eq(0), nblk.any(), r.sm_done.q.eq(nblk)]);
    let all = nblk + nblk;
    let p_go = and_all(&[quiet, x_phase.q.eq(1), r.sm_done.q.eq(all)]);
    let one2 = m.lit(2, 1);
    let two2 = m.lit(2, 2);
    let zero2 = m.zero(2);
    let ph_d = mux(tile_go, zero2, mux(s_go, one2, two2));
    reg_set(m, x_phase, ph_d, s_go | p_go | tile_go);
    let x_bytes = bytes(m, p_go);
    let rows = nblk.mul_lo(rows_valid, iw);
    let release = mux(x_phase.q.eq(2), pv_last_step, sm.finished & sm.second);
    let xd = ReadDesc {
        start: s_go | p_go,
        base: s_addr,
        stride: stride(x_bytes),
        row_bytes: x_bytes,
        rows,
        block_rows: rows_valid,
        want: m.zero(1),
        release,
    };
    (xd, wr)
}

/// Phase selection, the step counters and the phase bookkeeping (issued and drained counts).
/// In buf2d a QK also waits until the previous block's S is copied out of the PE registers,
/// and with a single-port P bank a PV waits while the softmax runs (it writes P).
fn phases(m: &mut ModuleBuilder, p: &CoreParams, r: &Regs, i: &SeqIn, sm: &Softmax) -> Phases {
    let in_qk = r.ph_kind.is(Phase::Qk);
    let in_pv = r.ph_kind.is(Phase::Pv);
    let no_phase = r.ph_kind.is(Phase::None);
    let s_run = r.state.is(Seq::Run);
    // The next phase is chosen in the last step of the current one, from the issue counts as
    // they will be after this cycle (rowfused's softmax count against a sum of two is
    // compared as it stands).
    let mut n = IssueCounts::new(m, p, r);
    let (qk_last_step, pv_last_step) = (n.qk_last_step, n.pv_last_step);
    let (qk_issued_n, pv_issued_n) = (n.qk_issued_n, n.pv_issued_n);
    let (qk_b, pv_b) = (n.qk, n.pv);
    let qk_more = n.qk_more;
    let mut flag = |m: &mut ModuleBuilder, name: &str, xy, cmp| n.flag(m, name, xy, cmp);
    // One array alternates QK and PV: a phase never follows its own kind directly, so the
    // channels' look-ahead is not needed.
    m.discard(i.k_next);
    m.discard(i.v_next);
    // rowfused runs every QK of the tile first (its S goes to the rows' S arrays), and a
    // block's PV after its exp pass, the softmaxes after the tile's nblk max passes.
    let plan = p.row.plan();
    let want_qk = match plan.softmax() {
        SoftmaxPass::TwoPass => qk_more,
        SoftmaxPass::Online => {
            qk_more & flag(m, "qk_ahead", (qk_b, (r.pv_issued, 2, pv_b.2)), Cmp::Lt)
        }
    };
    let pv_more = flag(m, "pv_more", (pv_b, qk_b), Cmp::Lt);
    let sm_ahead = match (plan.s, plan.softmax()) {
        // unfused: PV(j) reads P(j) from the scratch channel, once every exp pass is done.
        (SHome::Memory, _) => {
            let (x_phase, x) = scratch_channel(&r.x_phase, &i.x);
            x_phase.q.eq(2) & x.ready
        }
        (SHome::Registers | SHome::SoftmaxTier { .. } | SHome::Array { .. }, two) => match two {
            SoftmaxPass::TwoPass => bumped(
                (r.sm_done.q, None),
                (r.pv_issued.q + r.nblk.q, pv_b.2),
                Sig::gt,
            ),
            SoftmaxPass::Online => flag(m, "sm_ahead", ((r.sm_done, 0, None), pv_b), Cmp::Gt),
        },
    };
    let phase_over = qk_last_step | pv_last_step;
    let choose = s_run & (no_phase | phase_over);
    let one = m.lit(1, 1);
    let s_free = match plan.s {
        // unfused: the PE registers hold two S blocks; QK(j + 2) waits for the max pass of j.
        SHome::Memory => {
            m.discard(i.s_free);
            flag(m, "s_slot_free", (qk_b, (r.sm_done, 2, None)), Cmp::Lt)
        }
        SHome::Array { .. } => {
            let full = r.s_full.expect("an S array's QK waits on its copy");
            // Set when a QK phase ends, cleared when the rows have copied S out (never in the
            // same cycle: the next QK waits for the copy, the copy for the QK).
            m.set_next(full, qk_last_step | (full.q & !i.s_free));
            !full.q | i.s_free
        }
        SHome::Registers | SHome::SoftmaxTier { .. } => {
            m.discard(i.s_free);
            one
        }
    };
    let p_free = if plan.shared_p_port() {
        let turn = !(sm.running | sm.go);
        m.with_fault(p.faults, Fault::SharedPortClash, |_| one, turn)
    } else {
        one
    };
    let qk_can = and_all(&[want_qk, i.k_ready, i.q_ready, s_free]) & !qk_last_step;
    let want_pv = !want_qk;
    let pv_can = and_all(&[pv_more, sm_ahead, i.v_ready, p_free]) & !pv_last_step;
    let pv_can = pv_can & want_pv;
    let qk_can = unless(m, p, Fault::StallQk, qk_can);
    let pv_can = unless(m, p, Fault::StallPv, pv_can);
    let start_qk = m.name("start_qk", choose & qk_can);
    let start_pv = m.name("start_pv", choose & pv_can);

    // Step counters: QK (k, ii, jj), PV (jk, ii, q), innermost last (with runs ii, jj, k and
    // ii, q, jk: `nest_steps`); ii is shared, and every counter resets when a phase begins.
    let (c, begin) = step_counters(
        m,
        p,
        r,
        None,
        (in_qk, start_qk, qk_last_step),
        (in_pv, start_pv, pv_last_step),
    );
    // Phase kind and block.
    let code = |s: Phase| r.ph_kind.code(s);
    let kind_d = mux(start_pv, code(Phase::Pv), code(Phase::None));
    let kind_d = mux(start_qk, code(Phase::Qk), kind_d);
    r.ph_kind.set_next(m, kind_d);
    r.ph_kind.set_enable(m, begin | phase_over);
    let blk_d = mux(start_qk, qk_issued_n, pv_issued_n);
    reg_set(m, r.ph_blk, blk_d, begin);
    // A phase starts only once the last one's last step is over, so its block is an issue
    // count as it stands.
    let keys = key_move(
        m,
        p,
        r.ph_blk.q,
        (r.qk_issued.q, start_qk),
        (r.pv_issued.q, start_pv),
    );
    // The P read for the next cycle: a PV step at output column 0 reads P[ii][j] of its block.
    let pv_step = PvStep {
        run: in_pv,
        go: in_pv,
        ii: r.ii,
        blk: r.ph_blk.q,
        last: pv_last_step,
    };
    let go_next = start_pv | (in_pv & !pv_last_step);
    let p_rd = p_read(m, r, &c, &pv_step, pv_issued_n, go_next);

    bookkeeping(m, p, r, qk_last_step, pv_last_step, None);
    let (qk_bus, pv_bus) = step_buses(m, p, r, &c, in_qk, (in_pv, r.ii.q, r.ph_blk.q));
    Phases {
        start_qk,
        start_pv,
        qk_last_step,
        pv_last_step,
        stall: Stall {
            waiting: s_run & no_phase,
            want_qk,
            want_pv,
            pv_more,
            sm_ahead,
            s_free,
            p_free,
        },
        step: Step {
            qk: in_qk,
            pv: in_pv,
            k: r.kk.q,
            ii: r.ii.q,
            jj: r.jj.q,
            jk: r.jk.q,
            q: r.qq.q,
        },
        p_rd,
        qk_bus,
        pv_bus,
        qk_keys: keys,
        pv_keys: keys,
        flags: n.flags,
    }
}

/// The step counters of both kinds of phase ([`LoopCounters`]), from (steps this cycle, the
/// phase begins, the phase's last-step net, which this drives) of QK and of PV: each counter
/// advances when its kind steps. With `pv_ii` None (one array, the phases alternating) ii is
/// shared and every counter resets when either phase begins; with PV's own query-row counter
/// (two streams) each stream's counters reset when its phase begins. Returns the counters and
/// QK's reset (with one array, "a phase begins").
fn step_counters(
    m: &mut ModuleBuilder,
    p: &CoreParams,
    r: &Regs,
    pv_ii: Option<RegHandle>,
    (qk_go, start_qk, qk_last_step): (Sig, Sig, Sig),
    (pv_go, start_pv, pv_last_step): (Sig, Sig, Sig),
) -> (LoopCounters, Sig) {
    let mut last_flags = vec![];
    let c = LoopCounters::new(m, p, r, pv_ii, &mut last_flags);
    m.drive(qk_last_step, qk_go & c.qk_last);
    m.drive(pv_last_step, pv_go & c.pv_last);
    let (qk_reset, pv_reset) = match pv_ii {
        None => {
            let begin = start_qk | start_pv;
            (begin, begin)
        }
        Some(_) => (start_qk, start_pv),
    };
    let (qk_jj, qk_ii, qk_k) = c.qk_steps(qk_go);
    let (pv_q, pv_i, pv_jk) = c.pv_steps(pv_go);
    advance(m, r.jj, c.jj_n, qk_jj, qk_reset);
    let ii_step = if pv_ii.is_some() { qk_ii } else { qk_ii | pv_i };
    advance(m, r.ii, c.ii_n, ii_step, qk_reset);
    advance(m, r.kk, c.k_n, qk_k, qk_reset);
    advance(m, r.qq, c.q_n, pv_q, pv_reset);
    if let Some(ii) = pv_ii {
        advance(m, ii, c.iv_n, pv_i, pv_reset);
    }
    advance(m, r.jk, c.jk_n, pv_jk, pv_reset);
    for flag in last_flags {
        flag.finish(m);
    }
    (c, qk_reset)
}

/// The scratch channel's pass register and status, which a design whose plan puts S in memory
/// (or spills it there) has.
fn scratch_channel(
    x_phase: &Option<RegHandle>,
    x: &Option<ScratchStatus<Sig>>,
) -> (RegHandle, ScratchStatus<Sig>) {
    let none = "a plan with S in memory has the scratch channel";
    (x_phase.expect(none), x.expect(none))
}

/// `f(x + bx, y + by)`, each sum at its operand's width as `+` wraps it, where a bump (`bx`,
/// `by`: none, or a 1-bit net) is a phase's last step: the comparisons of the registered counts
/// run beside the step counters that decide the bumps, which then only select among them.
fn bumped(x: (Sig, Option<Sig>), y: (Sig, Option<Sig>), f: impl Fn(Sig, Sig) -> Sig + Copy) -> Sig {
    match (x, y) {
        ((xv, Some(b)), _) => mux(b, bumped((xv + 1, None), y, f), bumped((xv, None), y, f)),
        ((xv, None), (yv, Some(b))) => mux(b, f(xv, yv + 1), f(xv, yv)),
        ((xv, None), (yv, None)) => f(xv, yv),
    }
}

/// A comparison of two counts (`<` or `>`).
#[derive(Clone, Copy)]
enum Cmp {
    Lt,
    Gt,
}

/// A comparison of two counts plus constants, `x + kx` against `y + ky` (each sum at its
/// count's width, as `+` wraps it), kept in a register: computed from the counts' next values
/// ([`ModuleBuilder::set_next_from_next`]), it is the comparison of their registered values
/// cycle for cycle, and reading it costs no adder or comparator.
struct CountFlag {
    reg: RegHandle,
    x: (RegHandle, u64),
    y: (RegHandle, u64),
    cmp: Cmp,
}

impl CountFlag {
    /// Sets the register's input: call once the counts' inputs are set.
    fn finish(self, m: &mut ModuleBuilder) {
        let ((_, kx), (_, ky), cmp) = (self.x, self.y, self.cmp);
        let plus = |v: Sig, k: u64| if k == 0 { v } else { v + k };
        m.set_next_from_next(self.reg, &[self.x.0, self.y.0], |v| {
            let (x, y) = (plus(v[0], kx), plus(v[1], ky));
            match cmp {
                Cmp::Lt => x.lt(y),
                Cmp::Gt => x.gt(y),
            }
        });
    }
}

/// What both phase choosers start from: the phases' last steps (nets, driven by the step
/// counters), the issue counts as they will be after this cycle, the counts with their bumps,
/// whether more QK blocks are due, and the registered comparisons made so far
/// ([`IssueCounts::flag`]; the issue counts' comparisons come from registers, as they are in
/// series with the step bus and the P read otherwise).
struct IssueCounts {
    qk_last_step: Sig,
    pv_last_step: Sig,
    qk_issued_n: Sig,
    pv_issued_n: Sig,
    qk: Bumped,
    pv: Bumped,
    qk_more: Sig,
    flags: Vec<CountFlag>,
}

impl IssueCounts {
    fn new(m: &mut ModuleBuilder, p: &CoreParams, r: &Regs) -> Self {
        let iw = p.index_bits;
        let qk_last_step = m.net("qk_last_step", 1);
        let pv_last_step = m.net("pv_last_step", 1);
        let qk_issued_n = r.qk_issued.q + qk_last_step.zext(iw);
        let pv_issued_n = r.pv_issued.q + pv_last_step.zext(iw);
        let qk = (r.qk_issued, 0, Some(qk_last_step));
        let mut flags = vec![];
        let qk_more = bumped_flags(m, &mut flags, "qk_more", (qk, (r.nblk, 0, None)), Cmp::Lt);
        IssueCounts {
            qk_last_step,
            pv_last_step,
            qk_issued_n,
            pv_issued_n,
            qk,
            pv: (r.pv_issued, 0, Some(pv_last_step)),
            qk_more,
            flags,
        }
    }

    /// [`bumped_flags`], its registers kept here.
    fn flag(&mut self, m: &mut ModuleBuilder, name: &str, xy: (Bumped, Bumped), cmp: Cmp) -> Sig {
        bumped_flags(m, &mut self.flags, name, xy, cmp)
    }
}

/// A count for [`bumped_flags`]: its register, a constant added, and a bump (a 1-bit net).
type Bumped = (RegHandle, u64, Option<Sig>);

/// [`bumped`] from registered comparisons: `x + kx + bx` against `y + ky + by`, a bump (`bx`,
/// `by`: none, or a 1-bit net, a phase's last step) selecting among [`CountFlag`]s (pushed on
/// `flags`) of each combination.
fn bumped_flags(
    m: &mut ModuleBuilder,
    flags: &mut Vec<CountFlag>,
    name: &str,
    (x, y): (Bumped, Bumped),
    cmp: Cmp,
) -> Sig {
    let mut flag = |m: &mut ModuleBuilder, bx: u64, by: u64| {
        let reg = m.reg(&format!("{name}_{bx}{by}"), 1, None);
        flags.push(CountFlag {
            reg,
            x: (x.0, x.1 + bx),
            y: (y.0, y.1 + by),
            cmp,
        });
        reg.q
    };
    let mut by_y = |m: &mut ModuleBuilder, bx: u64| match y.2 {
        Some(b) => {
            let (one, zero) = (flag(m, bx, 1), flag(m, bx, 0));
            mux(b, one, zero)
        }
        None => flag(m, bx, 0),
    };
    match x.2 {
        Some(b) => {
            let (one, zero) = (by_y(m, 1), by_y(m, 0));
            mux(b, one, zero)
        }
        None => by_y(m, 0),
    }
}

/// Two phase streams: reg3d's, one per tier, running at once, or interleaved on one array.
/// The QK stream takes block j as soon as the K block and the Q tile are there and its S slot is
/// free (the softmax of block j − 2 has read it); the PV stream takes block j once its softmax
/// is done and the V block is there. A stream's next block may start in its current block's
/// last step when the DMA has already landed it in the other slot (`k_next`, `v_next`), so a
/// busy stream never idles between blocks. In steady state the QK stream works on block j + 2,
/// the row engines on the softmax of j + 1 and the PV stream on j.
///
/// Interleaved (a MAC deeper than the a·b S accumulators hide): the streams share the array's
/// step bus, and QK never steps two cycles running (`qk_went`), so each S accumulator comes round
/// every 2·a·b cycles or more; PV steps in every cycle QK does not. A QK alone (a tile's first
/// block) steps every other cycle.
fn phases_streams(m: &mut ModuleBuilder, p: &CoreParams, r: &Regs, i: &SeqIn) -> Phases {
    let pv = r.pv.as_ref().expect("two phase streams");
    let in_qk = r.ph_kind.is(Phase::Qk);
    let in_pv = pv.run.q;
    // Which stream steps this cycle.
    let (qk_go, pv_go) = match pv.qk_went {
        Some(went) => {
            let qk_go = m.name("qk_go", in_qk & !went.q);
            m.set_next(went, qk_go);
            (qk_go, m.name("pv_go", in_pv & !qk_go))
        }
        None => (in_qk, in_pv),
    };
    let s_run = r.state.is(Seq::Run);
    let mut n = IssueCounts::new(m, p, r);
    let (qk_last_step, pv_last_step) = (n.qk_last_step, n.pv_last_step);
    let (qk_issued_n, pv_issued_n) = (n.qk_issued_n, n.pv_issued_n);
    let (qk_b, pv_b) = (n.qk, n.pv);
    let qk_more = n.qk_more;
    let mut flag = |m: &mut ModuleBuilder, name: &str, xy, cmp| n.flag(m, name, xy, cmp);
    let s_slot_free = flag(m, "s_slot_free", (qk_b, (r.sm_done, 2, None)), Cmp::Lt);
    let qk_free = !in_qk | qk_last_step;
    let k_ok = mux(qk_last_step, i.k_next, i.k_ready);
    let qk_can = and_all(&[s_run, qk_free, qk_more, s_slot_free, k_ok, i.q_ready]);
    let pv_more = flag(m, "pv_more", (pv_b, qk_b), Cmp::Lt);
    let sm_ahead = flag(m, "sm_ahead", ((r.sm_done, 0, None), pv_b), Cmp::Gt);
    // noc2d: a PV also waits for its block's P to land across the NoC.
    let sm_ahead = match (r.p_arrived, &i.noc) {
        (Some(arrived), Some(noc)) => {
            count_by(m, r, arrived, noc.arrived, None);
            sm_ahead & flag(m, "p_landed", ((arrived, 0, None), pv_b), Cmp::Gt)
        }
        _ => sm_ahead,
    };
    let pv_free = !in_pv | pv_last_step;
    let v_ok = mux(pv_last_step, i.v_next, i.v_ready);
    let pv_can = and_all(&[s_run, pv_free, pv_more, sm_ahead, v_ok]);
    let qk_can = unless(m, p, Fault::StallQk, qk_can);
    let pv_can = unless(m, p, Fault::StallPv, pv_can);
    let start_qk = m.name("start_qk", qk_can);
    let start_pv = m.name("start_pv", pv_can);

    // Step counters: QK (k, ii, jj), PV (jk, pv_ii, q) (with runs ii, jj, k and pv_ii, q, jk);
    // each steps when its stream does and resets when its stream's phase begins.
    let (c, _) = step_counters(
        m,
        p,
        r,
        Some(pv.ii),
        (qk_go, start_qk, qk_last_step),
        (pv_go, start_pv, pv_last_step),
    );
    // The streams' phases and blocks.
    let code = |s: Phase| r.ph_kind.code(s);
    r.ph_kind
        .set_next(m, mux(start_qk, code(Phase::Qk), code(Phase::None)));
    r.ph_kind.set_enable(m, start_qk | qk_last_step);
    reg_set(m, r.ph_blk, qk_issued_n, start_qk);
    let pv_next = start_pv | (in_pv & !pv_last_step);
    m.set_next(pv.run, pv_next);
    reg_set(m, pv.blk, pv_issued_n, start_pv);
    // A stream's next block starts in its last step (the count then bumps) or after it.
    let keys = |m: &mut ModuleBuilder, blk: RegHandle, issued: RegHandle, start: Sig, last: Sig| {
        let on = (issued.q, start & !last);
        let bumped = (issued.q + 1, start & last);
        key_move(m, p, blk.q, on, bumped)
    };
    let qk_keys = keys(m, r.ph_blk, r.qk_issued, start_qk, qk_last_step);
    let pv_keys = keys(m, pv.blk, r.pv_issued, start_pv, pv_last_step);
    // The P read serves the next cycle's PV step: interleaved, PV steps next cycle unless QK
    // does (it may unless it steps now).
    let pv_go_next = match pv.qk_went {
        Some(_) => {
            let qk_next = start_qk | (in_qk & !qk_last_step);
            pv_next & !(qk_next & !qk_go)
        }
        None => pv_next,
    };
    let pv_step = PvStep {
        run: in_pv,
        go: pv_go,
        ii: pv.ii,
        blk: pv.blk.q,
        last: pv_last_step,
    };
    let p_rd = p_read(m, r, &c, &pv_step, pv_issued_n, pv_go_next);
    // With narrow S links a QK phase drains when the rows have walked its S up (`s_free`).
    let walked = if p.row.s_walk() {
        Some(i.s_free)
    } else {
        m.discard(i.s_free);
        None
    };
    bookkeeping(m, p, r, qk_last_step, pv_last_step, walked);
    let (qk_bus, pv_bus) = step_buses(m, p, r, &c, qk_go, (pv_go, pv.ii.q, pv.blk.q));
    Phases {
        flags: n.flags,
        start_qk,
        start_pv,
        qk_last_step,
        pv_last_step,
        stall: Stall {
            waiting: s_run & !(qk_go | pv_go),
            want_qk: qk_more,
            want_pv: !qk_more,
            pv_more,
            sm_ahead,
            s_free: s_slot_free,
            p_free: m.lit(1, 1),
        },
        step: Step {
            qk: qk_go,
            pv: pv_go,
            k: r.kk.q,
            ii: r.ii.q,
            jj: r.jj.q,
            jk: r.jk.q,
            q: r.qq.q,
        },
        p_rd,
        qk_bus,
        pv_bus,
        qk_keys,
        pv_keys,
    }
}

/// A block register as a mask takes it ([`KeyMove`], first keys = blocks · Bc): `now`, or the
/// block `alt0` when `take0`, or `alt1` when `take1`.
fn key_move(
    m: &mut ModuleBuilder,
    p: &CoreParams,
    now: Sig,
    (alt0, take0): (Sig, Sig),
    (alt1, take1): (Sig, Sig),
) -> KeyMove {
    let iw = p.index_bits;
    let bcl = m.lit(iw, p.bc() as u64);
    KeyMove {
        now: now.mul_lo(bcl, iw),
        alt0: alt0.mul_lo(bcl, iw),
        take0,
        alt1: alt1.mul_lo(bcl, iw),
        take1,
    }
}

/// A phase that may start, unless `fault` (a phase kind that never starts) is selected.
fn unless(m: &mut ModuleBuilder, p: &CoreParams, fault: Fault, can: Sig) -> Sig {
    m.with_fault(p.faults, fault, |m| m.zero(1), can)
}

/// A loop counter steps to `next` on `step`, or resets when its phase begins.
fn advance(m: &mut ModuleBuilder, reg: RegHandle, next: Sig, step: Sig, begin: Sig) {
    let zero = m.zero(reg.q.width());
    let d = mux(begin, zero, next);
    reg_set(m, reg, d, step | begin);
}

/// The PV phase as the P read sees it: running, stepping this cycle, its query-row counter,
/// its block, and its last step.
struct PvStep {
    run: Sig,
    go: Sig,
    ii: RegHandle,
    blk: Sig,
    last: Sig,
}

/// The P read for the next cycle's PV step (`go_next`: PV steps then), its address from
/// registers alone, not from this cycle's phase choice: the PV phase's next step while it
/// continues, else a new PV phase's first (query row 0, key 0, the next block's slot). A PV
/// step at output column 0 reads P[ii][j] of its block.
fn p_read(
    m: &mut ModuleBuilder,
    r: &Regs,
    c: &LoopCounters,
    pv: &PvStep,
    pv_issued_n: Sig,
    go_next: Sig,
) -> PRead {
    let continuing = pv.run & !pv.last;
    let after = |reg: RegHandle, next: Sig, step: Sig| mux(step, next, reg.q);
    let first = |m: &mut ModuleBuilder, x: Sig| {
        let zero = m.zero(x.width());
        mux(continuing, x, zero)
    };
    let (q_step, ii_step, jk_step) = c.pv_steps(pv.go);
    let ii = after(pv.ii, c.iv_n, ii_step);
    let jk = after(r.jk, c.jk_n, jk_step);
    // In the register file's order a weight serves its query row's output columns in turn
    // (read at column 0); with runs every step takes the next key's.
    let re = if c.pv_runs {
        go_next
    } else {
        let q0 = after(r.qq, c.q_n, q_step).is_zero();
        go_next & (q0 | !continuing)
    };
    PRead {
        re,
        slot: mux(continuing, pv.blk, pv_issued_n).bit(0),
        ii: first(m, ii),
        j: first(m, jk),
    }
}

/// The step loops' next values and last flags: QK (k, ii, jj), PV (jk, PV's ii, q), innermost
/// last. PV's query row is `ii` in 2-D, the PV stream's own in reg3d.
struct LoopCounters {
    jj_n: Sig,
    jj_last: Sig,
    ii_n: Sig,
    k_n: Sig,
    k_last: Sig,
    q_n: Sig,
    q_last: Sig,
    iv_n: Sig,
    jk_n: Sig,
    jk_last: Sig,
    /// The MAC accumulates in its pipeline: each score's products run back to back (QK: ii,
    /// jj, k, innermost last), not the register file's order ([`PeRowConfig::qk_runs`]).
    qk_runs: bool,
    /// Each O value's products over a block's keys run back to back (PV: ii, q, jk;
    /// [`PeRowConfig::pv_runs`]).
    pv_runs: bool,
    /// The QK steps' (ii, jj) and the PV steps' (ii, q) loops wrap.
    qk_mid: Sig,
    pv_mid: Sig,
    /// A phase's last step.
    qk_last: Sig,
    pv_last: Sig,
}

impl LoopCounters {
    /// `pv_ii`: the PV stream's own query-row counter (reg3d), or None (PV steps use ii). The
    /// counters' wrap flags are registers (`flags`: finish them once the counters' inputs are
    /// set), so the phase choice, which reads them, starts from registers.
    fn new(
        m: &mut ModuleBuilder,
        p: &CoreParams,
        r: &Regs,
        pv_ii: Option<RegHandle>,
        flags: &mut Vec<LastFlag>,
    ) -> Self {
        let mut count = |m: &mut ModuleBuilder, name: &str, c: RegHandle, n: u32| {
            loop_counter(m, flags, name, c, n)
        };
        let (jj_n, jj_last) = count(m, "jj", r.jj, p.row.b);
        let (ii_n, ii_last) = count(m, "ii", r.ii, p.row.a);
        let (k_n, k_last) = count(m, "k", r.kk, p.row.qk_dims());
        let (q_n, q_last) = count(m, "q", r.qq, p.row.e);
        let (iv_n, iv_last) = match pv_ii {
            None => (ii_n, ii_last),
            Some(reg) => count(m, "pv_ii", reg, p.row.a),
        };
        let (jk_n, jk_last) = count(m, "jk", r.jk, p.bc());
        let qk_mid = jj_last & ii_last;
        let pv_mid = q_last & iv_last;
        LoopCounters {
            jj_n,
            jj_last,
            ii_n,
            k_n,
            k_last,
            q_n,
            q_last,
            iv_n,
            jk_n,
            jk_last,
            qk_runs: p.row.qk_runs(),
            pv_runs: p.row.pv_runs(),
            qk_mid,
            pv_mid,
            qk_last: qk_mid & k_last,
            pv_last: pv_mid & jk_last,
        }
    }

    /// When a stream stepping on `go` advances its QK counters: (jj, ii, k).
    fn qk_steps(&self, go: Sig) -> (Sig, Sig, Sig) {
        nest_steps(go, self.qk_runs, self.k_last, self.jj_last, self.qk_mid)
    }

    /// When a stream stepping on `go` advances its PV counters: (q, query row, jk).
    fn pv_steps(&self, go: Sig) -> (Sig, Sig, Sig) {
        nest_steps(go, self.pv_runs, self.jk_last, self.q_last, self.pv_mid)
    }

    /// A PV step is a query row's last of its block's (PV's `last`): its last output column
    /// at a key, or with runs its last output column's last key.
    fn pv_row_last(&self) -> Sig {
        if self.pv_runs {
            self.q_last & self.jk_last
        } else {
            self.q_last
        }
    }
}

/// When a phase's three loops (a query row, its inner index, the dimension) advance for a
/// stream stepping on `go`: (inner, row, dimension). In the register file's order the inner
/// index is innermost and the dimension outermost (it steps when `mid`, the row and inner
/// loops, wraps); with `runs` the dimension is innermost, then the inner index, then the row.
fn nest_steps(go: Sig, runs: bool, dim_last: Sig, inner_last: Sig, mid: Sig) -> (Sig, Sig, Sig) {
    if runs {
        let inner = go & dim_last;
        (inner, inner & inner_last, go)
    } else {
        (go, go & inner_last, go & mid)
    }
}

/// A loop counter's wrap flag in a register: `counter == n − 1` cycle for cycle
/// ([`ModuleBuilder::set_next_from_next`]), without the comparison in series with what reads
/// it.
struct LastFlag {
    reg: RegHandle,
    counter: RegHandle,
    last: u64,
}

impl LastFlag {
    /// Sets the flag's input: call once the counter's input is set.
    fn finish(self, m: &mut ModuleBuilder) {
        let last = self.last;
        m.set_next_from_next(self.reg, &[self.counter], |v| v[0].eq(last));
    }
}

/// A counter over 0..n (`counter`): its value after a step (wrapping to 0 after n − 1) and
/// whether it is at n − 1, the latter a register ([`LastFlag`], pushed on `flags`).
fn loop_counter(
    m: &mut ModuleBuilder,
    flags: &mut Vec<LastFlag>,
    name: &str,
    counter: RegHandle,
    n: u32,
) -> (Sig, Sig) {
    let reg = m.reg(&format!("{name}_at_last"), 1, None);
    flags.push(LastFlag {
        reg,
        counter,
        last: (n - 1) as u64,
    });
    let zero = m.zero(counter.q.width());
    (mux(reg.q, zero, counter.q + 1), reg.q)
}

/// The QK and PV step buses: QK steps clear S on the first dimension (MAC_CLEAR; with runs the
/// later ones are MAC_FEED), address S
/// (slot, ii, jj) and mark the last dimension (`last`: each score's last product, which a
/// softmax tier's S links send up); PV steps address O (ii, q), mark a query row's last step
/// of the block ([`LoopCounters::pv_row_last`]) and let each row choose its operation. `pv` is
/// the PV phase's (valid, ii, block).
fn step_buses(
    m: &mut ModuleBuilder,
    p: &CoreParams,
    r: &Regs,
    c: &LoopCounters,
    qk_valid: Sig,
    pv: (Sig, Sig, Sig),
) -> (PeStep, PeStep) {
    let (pv_valid, pv_ii, pv_blk) = pv;
    let aw_pe = p.row.pe.addr_width();
    let qk_slot = r.ph_blk.q.bit(0);
    let ob = p.row.pe.op_bits();
    let op = |m: &mut ModuleBuilder, o: PeOp| m.lit(ob, o as u64);
    let op_mac = op(m, PeOp::Mac);
    let qk_op = if p.row.pe.qk.is_some() {
        // Integer QKᵀ: the two scale steps, then the products (cleared at the first, converted
        // at the last).
        let k = r.kk.q;
        let int_op = mux(c.k_last, op(m, PeOp::IntLast), op(m, PeOp::IntMac));
        let int_op = mux(k.eq(SCALE_STEPS as u64), op(m, PeOp::IntClear), int_op);
        let int_op = mux(k.eq(1), op(m, PeOp::ScaleHi), int_op);
        mux(k.is_zero(), op(m, PeOp::ScaleLo), int_op)
    } else {
        // With runs a score's later products continue its first in the MAC's loop.
        let next = if c.qk_runs {
            op(m, PeOp::MacFeed)
        } else {
            op_mac
        };
        mux(r.kk.q.is_zero(), op(m, PeOp::MacClear), next)
    };
    let jj = if p.row.b == 1 { m.zero(1) } else { r.jj.q };
    let (zero1, zero_jj, zero_j) = (m.zero(1), m.zero(jj.width()), m.zero(r.jk.q.width()));
    let qk = PeStep {
        valid: qk_valid,
        pv: zero1,
        op: qk_op,
        addr: p.row.s_addr_rtl(m, qk_slot, r.ii.q, r.jj.q, aw_pe),
        ii: r.ii.q,
        jj,
        j: zero_j,
        last: c.k_last,
        slot: qk_slot,
    };
    let pv = PeStep {
        valid: pv_valid,
        pv: pv_valid,
        op: op_mac,
        addr: p.row.o_addr_rtl(m, pv_ii, r.qq.q, aw_pe),
        ii: pv_ii,
        jj: zero_jj,
        j: r.jk.q,
        last: c.pv_row_last(),
        slot: pv_blk.bit(0),
    };
    (qk, pv)
}

/// Phase bookkeeping: issued counts at the last step, drained counts L cycles later (a QK
/// phase's: once its S is where the sweeps read it, after the S links with a softmax tier), or
/// with narrow S links when the rows say the walk is done (`walked`).
/// Faults: the sequencer counts a phase kind's blocks two at a time (loses count).
fn bookkeeping(
    m: &mut ModuleBuilder,
    p: &CoreParams,
    r: &Regs,
    qk_last: Sig,
    pv_last: Sig,
    walked: Option<Sig>,
) {
    let skip_k = m.fault(p.faults, Fault::SkipK);
    let skip_v = m.fault(p.faults, Fault::SkipV);
    count_by(m, r, r.qk_issued, qk_last, skip_k);
    count_by(m, r, r.pv_issued, pv_last, skip_v);
    let qk_drained = match walked {
        Some(w) => w,
        None => m.delay_n("qk_drain", qk_last, p.row.s_ready_latency()),
    };
    let pv_drained = m.delay_n("pv_drain", pv_last, p.row.pe.latency());
    count_by(m, r, r.qk_done, qk_drained, None);
    count_by(m, r, r.pv_done, pv_drained, None);
}

/// A per-tile count: `reg += by` when `inc`, cleared when a tile starts.
/// `reg` counts `inc`: by one, or by two while `skip` (a selected fault) is high.
fn count_by(m: &mut ModuleBuilder, r: &Regs, reg: RegHandle, inc: Sig, skip: Option<Sig>) {
    let tile_reset = r.state.is(Seq::TileGo);
    let zero = m.zero(reg.q.width());
    let next = match skip {
        Some(on) => mux(on, reg.q + 2, reg.q + 1),
        None => reg.q + 1,
    };
    let d = mux(tile_reset, zero, next);
    reg_set(m, reg, d, inc | tile_reset);
}

/// The softmax trigger's outputs.
struct Softmax {
    go: Sig,
    /// rowfused: the next softmax is an exp pass, and its block (the block it works on: the
    /// softmax count, less the tile's blocks in an exp pass).
    second: Sig,
    blk: Sig,
    /// rowfused with `spill`: that block is past the S array (j ≥ C).
    past: Option<Sig>,
    /// The row engines run a block's softmax (from the cycle after `go` until they are idle).
    running: Sig,
    /// The softmax ends this cycle.
    finished: Sig,
    first: Sig,
    /// The first key of the block whose softmax runs, as the mask takes it.
    keys: KeyMove,
}

/// Starts the row engines' softmax of the next block once its QK has drained, P is free (P
/// and the shifts are double-buffered: softmax j may run once PV(j−2) has issued) and, for a
/// tile's first block, the readout has taken the previous tile.
fn softmax_trigger(m: &mut ModuleBuilder, p: &CoreParams, r: &Regs, i: &SeqIn) -> Softmax {
    let sm_running = m.reg("sm_running", 1, Some(0));
    let sm_kbase = m.reg("sm_kbase", p.index_bits, Some(0));
    // rowfused: softmaxes 0 .. nblk − 1 are the max passes (each after its block's QK),
    // nblk .. 2·nblk − 1 the exp passes of blocks 0 .. nblk − 1 (each once P is free).
    let plan = p.row.plan();
    let (sm_more, second, blk) = match plan.softmax() {
        SoftmaxPass::TwoPass => {
            let second = r.sm_done.q.ge(r.nblk.q);
            let zero = m.zero(p.index_bits);
            let back = mux(second, r.nblk.q, zero);
            let all = r.nblk.q + r.nblk.q;
            (r.sm_done.q.lt(all), second, r.sm_done.q - back)
        }
        SoftmaxPass::Online => (r.sm_done.q.lt(r.nblk.q), m.zero(1), r.sm_done.q),
    };
    let qk_ready = r.qk_done.q.gt(r.sm_done.q) | second;
    let p_free = (r.pv_issued.q + 1).ge(blk);
    let (p_free, past) = match plan.s {
        // rowfused with `spill`: a spilled block's max pass writes its S through the O
        // channel's staging buffer (free once the last write is done); its exp pass reads S
        // from the scratch channel (landed).
        SHome::Array {
            rows: Some(WholeRows { spill: true, .. }),
        } => {
            let held = m.lit(p.index_bits, p.row.s_blocks() as u64);
            let past = blk.ge(held);
            let (x_phase, x) = scratch_channel(&r.x_phase, &i.x);
            let landed = x_phase.q.eq(1) & x.ready;
            let ok = mux(second, p_free & landed, !i.o_busy);
            (mux(past, ok, p_free | !second), Some(past))
        }
        // unfused: no P bank. A pass writes its block through the O channel's staging buffer
        // (free once the last write is done), and an exp pass reads its S from the scratch
        // channel (landed).
        SHome::Memory => {
            let (x_phase, x) = scratch_channel(&r.x_phase, &i.x);
            let landed = x_phase.q.eq(1) & x.ready;
            (!i.o_busy & (landed | !second), None)
        }
        // The second pass's P waits for the bank.
        SHome::Array {
            rows: Some(WholeRows { spill: false, .. }),
        } => (p_free | !second, None),
        SHome::Registers | SHome::SoftmaxTier { .. } | SHome::Array { rows: None } => {
            (p_free, None)
        }
    };
    let first_block = r.sm_done.q.is_zero();
    let ro_ok = i.ro_idle | !first_block;
    let not_busy = !i.rows_busy;
    // A single-port P bank: the softmax (it writes P) does not start while PV steps read it.
    let p_turn = if plan.shared_p_port() {
        let turn = !r.ph_kind.is(Phase::Pv);
        m.with_fault(p.faults, Fault::SharedPortClash, |m| m.lit(1, 1), turn)
    } else {
        m.lit(1, 1)
    };
    let sm_go = and_all(&[
        r.state.is(Seq::Run),
        sm_more,
        qk_ready,
        p_free,
        ro_ok,
        !sm_running.q,
        not_busy,
        p_turn,
    ]);
    let sm_go = m.name("sm_go", sm_go);
    // Running until the engines, busy from the next cycle, are idle again.
    let sm_seen = m.reg("sm_seen", 1, Some(0));
    let zero_bit = m.zero(1);
    let seen_d = mux(sm_go, zero_bit, i.rows_busy) | sm_seen.q;
    let seen_d = seen_d & !sm_go;
    let finished = and_all(&[sm_running.q, sm_seen.q, not_busy]);
    let seen_d = mux(finished, zero_bit, seen_d);
    m.set_next(sm_seen, seen_d);
    let one1 = m.lit(1, 1);
    let run_d = mux(sm_go, one1, zero_bit);
    reg_set(m, sm_running, run_d, sm_go | finished);
    count_by(m, r, r.sm_done, finished, None);
    let bcl = m.lit(p.index_bits, p.bc() as u64);
    let next_kbase = blk.mul_lo(bcl, p.index_bits);
    reg_set(m, sm_kbase, next_kbase, sm_go);
    Softmax {
        go: sm_go,
        second,
        blk,
        past,
        running: sm_running.q,
        finished,
        first: first_block,
        keys: KeyMove {
            now: sm_kbase.q,
            alt0: next_kbase,
            take0: sm_go,
            alt1: next_kbase,
            take1: m.zero(1),
        },
    }
}

/// The tile the main state machine is on.
struct Tile {
    done: Sig,
    go_once: Sig,
    empty: Sig,
    handoff: Sig,
}

/// The main state machine: heads, query tiles, the hand-off of a finished tile, done.
#[allow(clippy::too_many_arguments)]
fn main_fsm(
    m: &mut ModuleBuilder,
    p: &CoreParams,
    r: &Regs,
    i: &SeqIn,
    prob: &Problem,
    go: Sig,
    nblk_d: Sig,
) -> Tile {
    let (iw, aw) = (p.index_bits, p.addr_bits);
    let head_last = r.head.q.ge(prob.heads);
    let tiles_done = r.q_base.q.ge(prob.q_len);
    let empty_tile = r.nblk.q.is_zero();
    let all_pv = r.pv_issued.q.ge(r.nblk.q);
    let drained = r.pv_done.q.ge(r.nblk.q);
    let end_ok = drained & i.ro_idle;
    let s_tile_go = r.state.is(Seq::TileGo);
    // An empty tile (no block to compute) still waits for its Q block, to release it.
    let go_wait = and_all(&[s_tile_go, empty_tile, !i.q_ready]);
    let go_wait = m.name("empty_tile_wait", go_wait);
    let go_once = s_tile_go & !go_wait;
    let fin_ok = i.ro_idle & !i.o_busy;
    let st = |s: Seq| r.state.code(s);
    let pick = |c: Sig, t: Seq, f: Seq| mux(c, st(t), st(f));
    let from_idle = pick(go, Seq::Head, Seq::Idle);
    let from_head = pick(head_last, Seq::Finish, Seq::Tile);
    let from_tile = pick(tiles_done, Seq::Head, Seq::Plan);
    let from_go = pick(go_wait, Seq::TileGo, Seq::Run);
    let from_run = pick(all_pv, Seq::End, Seq::Run);
    let from_end = pick(end_ok, Seq::Tile, Seq::End);
    let from_fin = pick(fin_ok, Seq::Idle, Seq::Finish);
    r.state.set_transitions(m, |s| match s {
        Seq::Idle => from_idle,
        Seq::Head => from_head,
        Seq::Tile => from_tile,
        Seq::Plan => st(Seq::TileGo),
        Seq::TileGo => from_go,
        Seq::Run => from_run,
        Seq::End => from_end,
        Seq::Finish => from_fin,
    });
    // Heads: O's offset steps per head; q_base restarts.
    let head_next = r.state.is(Seq::Tile) & tiles_done;
    let zero_a = m.zero(aw);
    let zero_i = m.zero(iw);
    let o_off_d = mux(go, zero_a, r.o_head_off.q + prob.o_head_stride);
    reg_set(m, r.o_head_off, o_off_d, go | head_next);
    let head_d = mux(go, zero_i, r.head.q + 1);
    reg_set(m, r.head, head_d, go | head_next);
    // Tiles: q_base steps by Br at the end of each tile, restarts per head.
    let handoff = r.state.is(Seq::End) & end_ok;
    let handoff = m.name("handoff", handoff);
    let head_reset = go | head_next;
    let q_d = mux(head_reset, zero_i, r.q_base.q + p.br() as u64);
    reg_set(m, r.q_base, q_d, head_reset | handoff);
    reg_set(m, r.nblk, nblk_d, r.state.is(Seq::Plan));
    // Done: set when the last tile is out, cleared by the next start.
    let done = m.reg("done", 1, Some(0));
    let fin = r.state.is(Seq::Finish) & fin_ok;
    let (one, zero) = (m.lit(1, 1), m.zero(1));
    reg_set(m, done, mux(go, zero, one), go | fin);
    Tile {
        done: done.q,
        go_once,
        empty: empty_tile,
        handoff,
    }
}
