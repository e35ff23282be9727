//! The row engine's state machine, its sweep counters and the softmax units' operations.

use super::{PeRowConfig, RowIn, SoftmaxRows};
use crate::ir::fsm::Fsm;
use crate::{addr_bits, bits_for, mux, or_all, ModuleBuilder, RegHandle, Sig};

crate::states! {
    /// The row engine: softmax of a block (in buf2d first the copy of S from the PE registers
    /// to the S array; then per query row max sweep, max update, exp sweep), or the readout of
    /// a tile (reciprocal, wait, sweep, per row). `MaxWait` (buf2d) waits for the S array's
    /// last read of a max sweep; `MaxPipe` for the row state unit to write a max update (the
    /// exp sweep needs the new max) and for the previous row's sum update to issue (the exp
    /// sweep refills the local sums). A row's sum update issues when its exp sweep has
    /// drained (the pipeline, the last local sum, the tree), while the next row's max sweep
    /// runs; after the last row `ExpDrain` waits for it and `SumPipe` for its write. After the
    /// readout's last row `RoDrain` waits for its pipeline's last O write.
    /// rowfused's max pass stops each row after its max update; its exp pass starts each row
    /// there (fed −Inf), skipping the copy and the max sweep.
    pub(super) enum Engine = "RE" {
        Idle, SCopy, Init, MaxSweep, MaxWait, MaxUpdate, MaxPipe, ExpSweep, ExpDrain, SumPipe,
        RoRecip, RoWait, RoSweep, RoDrain
    }
}

/// The row engine's registers and the sweeps they define.
pub(super) struct EngineRegs {
    pub(super) state: Fsm<Engine>,
    pub(super) ii: RegHandle,
    pub(super) cc: RegHandle,
    pub(super) jj: RegHandle,
    pub(super) qq: RegHandle,
    /// The S slot of the block the softmax works on.
    pub(super) slot: Sig,
    /// rowfused: the softmax is the exp pass (S already in the array), and the block's place
    /// in the S array (None elsewhere, and with one block).
    pub(super) second: Option<Sig>,
    pub(super) blk: Option<Sig>,
    /// rowfused with `spill`: the block is past the S array (its max sweep reads the PE
    /// registers and packs S for the staging buffer; its exp sweep reads the landing buffer).
    pub(super) spill: Option<Sig>,
    pub(super) in_copy: Sig,
    pub(super) in_max: Sig,
    pub(super) in_exp: Sig,
    pub(super) in_ro: Sig,
    /// The drain of an exp sweep: cycles until its row's sum update, whether one is pending,
    /// and its row.
    pub(super) drain: RegHandle,
    pub(super) sum_pending: RegHandle,
    pub(super) sum_row: RegHandle,
    /// A row's sum update issues this cycle (row `sum_row`).
    pub(super) sum_issue: Sig,
}

impl EngineRegs {
    /// The engine's state machine, sweep counters and the slot of the block it works on.
    pub(super) fn new(m: &mut ModuleBuilder, cfg: &PeRowConfig, i: &RowIn) -> EngineRegs {
        let state = Fsm::new(m, "state", Engine::Idle);
        let two = cfg.two_pass();
        let second = two.then(|| m.hold("second", i.sm.second, i.sm.start));
        if !two {
            m.discard(i.sm.second);
        }
        let drain = m.reg("drain", bits_for(cfg.drain_latency() as u64 + 2), Some(0));
        let sum_pending = m.reg("sum_pending", 1, Some(0));
        let sum_issue = sum_pending.q & drain.q.is_zero();
        let sum_issue = m.name("sum_issue", sum_issue);
        let bb = cfg.blk_bits();
        let spill = cfg
            .spills()
            .then(|| m.hold("spill", i.sm.blk.bit(bb), i.sm.start));
        let blk = match bb {
            0 => {
                if spill.is_none() {
                    m.discard(i.sm.blk);
                }
                None
            }
            n => Some(m.hold("blk", i.sm.blk.slice(n - 1, 0), i.sm.start)),
        };
        EngineRegs {
            second,
            blk,
            spill,
            ii: m.reg("ii", cfg.ii_bits(), Some(0)),
            cc: m.reg("cc", addr_bits(cfg.cols), Some(0)),
            jj: m.reg("jj", cfg.jj_bits(), Some(0)),
            qq: m.reg("qq", addr_bits(cfg.e), Some(0)),
            slot: m.hold("slot", i.sm.slot, i.sm.start),
            sum_row: m.reg("sum_row", cfg.ii_bits(), Some(0)),
            drain,
            sum_pending,
            sum_issue,
            in_copy: state.is(Engine::SCopy),
            in_max: state.is(Engine::MaxSweep),
            in_exp: state.is(Engine::ExpSweep),
            in_ro: state.is(Engine::RoSweep),
            state,
        }
    }
}

/// The engine's sequencing: the sweep counters, the drain wait, the state machine, the query
/// row and the softmax units' operations. Returns idle.
#[allow(clippy::too_many_arguments)]
pub(super) fn sequencing(
    m: &mut ModuleBuilder,
    cfg: &PeRowConfig,
    i: &RowIn,
    e: &EngineRegs,
    sm: &SoftmaxRows,
    recip_done: Sig,
    start_sweep: Sig,
) -> Sig {
    let (jj_next, jj_last) = m.wrapping_step(e.jj.q, cfg.b);
    let (cc_next, cc_last) = m.wrapping_step(e.cc.q, cfg.cols);
    let (qq_next, qq_last) = m.wrapping_step(e.qq.q, cfg.e);
    let (ii_next, ii_last) = m.wrapping_step(e.ii.q, cfg.a);
    let sweep_end = cc_last & jj_last;
    let ro_end = cc_last & qq_last;
    let sweeping = or_all(&[e.in_copy, e.in_max, e.in_exp]);
    // jj / cc advance through the sweeps; qq / cc through the readout.
    m.set_next(e.jj, jj_next);
    m.set_enable(e.jj, sweeping);
    m.set_next(e.cc, cc_next);
    m.set_enable(e.cc, (sweeping & jj_last) | (e.in_ro & qq_last));
    m.set_next(e.qq, qq_next);
    m.set_enable(e.qq, e.in_ro);
    // After an exp sweep's last score its row's sum update waits for the pipeline, the last
    // local sum and the tree (the drain), whatever the engine does meanwhile.
    let (drain, pending) = (e.drain, e.sum_pending);
    let drain_init = m.lit(drain.q.width(), cfg.drain_latency() as u64 + 1);
    let enter_drain = e.in_exp & sweep_end;
    m.set_next(drain, mux(enter_drain, drain_init, drain.q - 1));
    m.set_enable(drain, enter_drain | (pending.q & !e.sum_issue));
    let one = m.lit(1, 1);
    m.set_next(pending, mux(enter_drain, one, !one));
    m.set_enable(pending, enter_drain | e.sum_issue);
    m.set_next(e.sum_row, e.ii.q);
    m.set_enable(e.sum_row, enter_drain);
    // One wait timer for the pipelines the engine waits out (never two at once): after a max
    // update, and after the last row's sum update, until the row state unit has written it;
    // after the readout's last visit, until its last O write (`readout_latency` cycles).
    let update = cfg.row_update().latency();
    let ro_lat = cfg.readout_latency();
    let (ro_last, in_ro_drain) = (e.in_ro & ro_end & ii_last, e.state.is(Engine::RoDrain));
    let in_maxu = e.state.is(Engine::MaxUpdate);
    let in_drain = e.state.is(Engine::ExpDrain);
    let (in_maxp, in_sump) = (e.state.is(Engine::MaxPipe), e.state.is(Engine::SumPipe));
    let wait = m.reg("wait", bits_for(update.max(ro_lat) as u64), Some(0));
    let issue = in_maxu | (in_drain & e.sum_issue);
    let w = wait.q.width();
    let wait_init = mux(
        ro_last,
        m.lit(w, (ro_lat - 1) as u64),
        m.lit(w, (update - 2) as u64),
    );
    let written = wait.q.is_zero();
    m.set_next(wait, mux(issue | ro_last, wait_init, wait.q - 1));
    let waiting = or_all(&[in_maxp, in_sump, in_ro_drain]);
    m.set_enable(wait, issue | ro_last | (waiting & !written));
    let max_written = in_maxp & written;
    // The exp sweep starts once the max is written and the previous row's sum has issued.
    let exp_go = written & (!pending.q | e.sum_issue);

    let c = |s: Engine| e.state.code(s);
    let pick = |cond: Sig, t: Engine, f: Engine| mux(cond, c(t), c(f));
    let idle = e.state.is(Engine::Idle);
    // IDLE: a softmax start, or a readout.
    let buffered = cfg.s_in_sram();
    let (after_copy, after_start) = after_start(cfg, i, e);
    let (after_max_update, next_row) = match e.second {
        Some(second) => (
            mux(
                second,
                c(Engine::ExpSweep),
                pick(ii_last, Engine::Idle, Engine::MaxSweep),
            ),
            pick(second, Engine::MaxUpdate, Engine::MaxSweep),
        ),
        None => (c(Engine::ExpSweep), c(Engine::MaxSweep)),
    };
    let from_idle = mux(
        i.sm.start,
        after_start,
        pick(i.ro.start, Engine::RoRecip, Engine::Idle),
    );
    let copy_end = sweep_end & ii_last;
    // The sweeps' registered read (an S array, or unfused's): wait for a max sweep's last score.
    let registered = cfg.s_read_registered();
    let after_max = if registered {
        Engine::MaxWait
    } else {
        Engine::MaxUpdate
    };
    let last_or_next = mux(ii_last, c(Engine::ExpDrain), next_row);
    let row_done = pick(ii_last, Engine::RoDrain, Engine::RoRecip);
    let from_ros = mux(ro_end, row_done, c(Engine::RoSweep));
    e.state.set_transitions(m, |s| match s {
        Engine::Idle => from_idle,
        Engine::SCopy if buffered => mux(copy_end, after_copy, c(Engine::SCopy)),
        Engine::Init => c(Engine::MaxSweep),
        Engine::MaxSweep => pick(sweep_end, after_max, Engine::MaxSweep),
        Engine::MaxWait if registered => c(Engine::MaxUpdate),
        Engine::SCopy | Engine::MaxWait => c(Engine::Idle),
        Engine::MaxUpdate => c(Engine::MaxPipe),
        Engine::MaxPipe => mux(exp_go, after_max_update, c(Engine::MaxPipe)),
        // The next row's sweeps run while this row's exp sweep drains; the last row's sum is
        // waited for, so an idle engine has written every row's state.
        Engine::ExpSweep => mux(sweep_end, last_or_next, c(Engine::ExpSweep)),
        Engine::ExpDrain => pick(e.sum_issue, Engine::SumPipe, Engine::ExpDrain),
        Engine::SumPipe => pick(written, Engine::Idle, Engine::SumPipe),
        Engine::RoRecip => c(Engine::RoWait),
        Engine::RoWait => pick(recip_done, Engine::RoSweep, Engine::RoWait),
        Engine::RoSweep => from_ros,
        Engine::RoDrain => pick(written, Engine::Idle, Engine::RoDrain),
    });
    // ii: reset on a start, advance after a row's sum update or readout.
    // rowfused's max pass moves to the next query row after its max update.
    let mut adv = vec![enter_drain, e.in_ro & ro_end, e.in_copy & sweep_end];
    if let Some(second) = e.second {
        adv.push(max_written & !second);
    }
    let ii_adv = or_all(&adv);
    let reset_ii = (idle & i.sm.start) | (idle & i.ro.start);
    let zero_ii = m.zero(cfg.ii_bits());
    m.set_next(e.ii, mux(reset_ii, zero_ii, ii_next));
    m.set_enable(e.ii, ii_adv | reset_ii);
    // Row state operations: init (all rows) on a tile's first block, the current row's max
    // after its max sweep, a drained row's sum.
    let in_init = e.state.is(Engine::Init);
    m.drive(sm.init, in_init);
    let max_sel = bit_of(m, e.ii.q, cfg.a);
    let zeros = m.zero(cfg.a);
    m.drive(sm.max_sel, mux(start_sweep, max_sel, zeros));
    let sum_sel = bit_of(m, e.sum_row.q, cfg.a);
    m.drive(sm.sum_sel, mux(e.sum_issue, sum_sel, zeros));
    idle
}

/// Where a softmax start leads from Idle, and where buf2d's copy of S leads: (after the copy,
/// after the start). In buf2d the copy of S comes first; init comes first on the tile's first
/// block.
fn after_start(cfg: &PeRowConfig, i: &RowIn, e: &EngineRegs) -> (Sig, Sig) {
    let c = |s: Engine| e.state.code(s);
    let pick = |cond: Sig, t: Engine, f: Engine| mux(cond, c(t), c(f));
    let buffered = cfg.s_in_sram();
    let after_copy = pick(i.sm.first, Engine::Init, Engine::MaxSweep);
    let after_start = if buffered {
        c(Engine::SCopy)
    } else {
        after_copy
    };
    // rowfused with `spill`: a block past the S array skips the copy (its max sweep reads the
    // PE registers).
    let after_start = if cfg.spills() {
        mux(i.sm.blk.bit(cfg.blk_bits()), after_copy, after_start)
    } else {
        after_start
    };
    // rowfused: the max pass (copy, then per query row the max sweep and update) or the exp
    // pass (per query row a max update against −Inf, which leaves the row's final max and a
    // shift of 0, then the exp sweep, drain and sum update).
    let after_start = if cfg.two_pass() {
        mux(i.sm.second, c(Engine::MaxUpdate), after_start)
    } else {
        after_start
    };
    (after_copy, after_start)
}

/// One-hot of `idx` over `n` bits.
pub(super) fn bit_of(m: &mut ModuleBuilder, idx: Sig, n: u32) -> Sig {
    let one = m.lit(n, 1);
    one << idx
}
