//! The row's softmax: one `softmax_row` unit per query row, the max and exp sweeps, and where
//! the sweeps read S (the PE registers, buf2d's S array, or reg3d's softmax tier).

use super::banks::{banked, element, gather, PBank, Word};
use super::{EngineRegs, Parts, PeRowConfig, RowIn, RowStore, ScratchRead};
use crate::fault::Fault;
use crate::mem::sram::SramIn;
use crate::operands::{Binary, X};
use crate::softmax::{ExpIn, RowOp, RowOpIn};
use crate::{and_all, bits_for, cat, mux, mux_index, ModuleBuilder, Sig};

/// The row's softmax units (one per query row), driven by the engine through nets.
pub(super) struct SoftmaxRows {
    /// Init of every row; a max and a sum (one-hot over the rows), in the same cycle for
    /// different rows.
    pub(super) init: Sig,
    pub(super) max_sel: Sig,
    pub(super) sum_sel: Sig,
    pub(super) blk_max: Sig,
    pub(super) blk_sum: Sig,
    /// Each row's running max (the exp sweep selects its row's).
    pub(super) row_m: Vec<Sig>,
    pub(super) cur_l: Sig,
    pub(super) cur_l_zero: Sig,
    /// The rescale shift of the step's query row for the step's block.
    pub(super) step_shift: Sig,
    /// The row whose sum issues: its block's shift, and whether its max was kept stale.
    pub(super) sum_shift: Sig,
    pub(super) sum_stale: Sig,
}

/// One `softmax_row` unit per query row, and the selection of the current row's state.
pub(super) fn softmax_rows(
    m: &mut ModuleBuilder,
    cfg: &PeRowConfig,
    parts: &Parts,
    i: &RowIn,
    e: &EngineRegs,
    c_rows: Option<&[Sig]>,
) -> SoftmaxRows {
    let a_n = cfg.a;
    let init = m.net("row_init", 1);
    let max_sel = m.net("row_max_sel", a_n);
    let sum_sel = m.net("row_sum_sel", a_n);
    let acc = cfg.elem_bits().1;
    let blk_max = m.net("blk_max", acc);
    let blk_sum = m.net("blk_sum", acc);
    let mut row_outs = vec![];
    let mut shift_slots = vec![];
    let [op_init, op_max, op_sum, op_hold] =
        [RowOp::Init, RowOp::Max, RowOp::Sum, RowOp::Hold].map(|o| m.lit(2, o as u64));
    for r in 0..a_n {
        let op = mux(sum_sel.bit(r), op_sum, op_hold);
        let op = mux(max_sel.bit(r), op_max, op);
        let op = mux(init, op_init, op);
        let ins = RowOpIn {
            op,
            blk_max,
            blk_sum,
            c: c_rows.map_or(i.c_const, |c| c[r as usize]),
        };
        let o = m.instantiate(&parts.srow, &format!("u_row{r}"), &ins);
        row_outs.push([o.m, o.l, o.shift, o.l_zero, o.stale]);
        // The row's rescale shift for its block, kept per block parity: the softmax of block
        // j may run while the PV steps of block j-1 still use theirs. Captured at the row's
        // sum operation, when the block's max has set it.
        let is_sum = op.eq(RowOp::Sum as u64);
        let slots: Vec<Sig> = (0..2u64)
            .map(|k| {
                let en = is_sum & e.slot.eq(k);
                m.hold(&format!("shift_r{r}_s{k}"), o.shift, en)
            })
            .collect();
        shift_slots.push(slots);
    }
    // The PV steps' bus: the one bus in 2-D, the PV tier's in reg3d (the QK tier's slot then
    // goes unread: its PEs' addresses come with the bus).
    let pv_step = if cfg.concurrent_phases() {
        m.discard(i.step.slot);
        i.step_pv
    } else {
        i.step
    };
    // Field f (m, l, shift, l_zero, stale) of the row `idx` selects.
    let pick = |idx: Sig, f: usize| -> Sig {
        let xs: Vec<Sig> = row_outs.iter().map(|r| r[f]).collect();
        mux_index(idx, &xs)
    };
    let per_row: Vec<Sig> = shift_slots
        .iter()
        .map(|sl| mux(pv_step.slot, sl[1], sl[0]))
        .collect();
    let shift = mux_index(pv_step.ii, &per_row);
    let step_shift = m.with_fault(cfg.faults, Fault::WrongRescale, |_| shift + 1, shift);
    let step_shift = m.name("step_shift", step_shift);
    SoftmaxRows {
        init,
        max_sel,
        sum_sel,
        blk_max,
        blk_sum,
        row_m: row_outs.iter().map(|r| r[0]).collect(),
        cur_l: pick(e.ii.q, 1),
        cur_l_zero: pick(e.ii.q, 3),
        step_shift,
        sum_shift: pick(e.sum_row.q, 2),
        sum_stale: pick(e.sum_row.q, 4),
    }
}

/// mask_sp[ii][b·cc + jj] for the engine's sweep position.
pub(super) fn sweep_mask(cfg: &PeRowConfig, mask_sp: Sig, e: &EngineRegs) -> Sig {
    let (c_n, a_n, b_n, bc) = (cfg.cols, cfg.a, cfg.b, cfg.bc());
    let rows: Vec<Sig> = (0..a_n)
        .map(|r| {
            let cols: Vec<Sig> = (0..c_n)
                .map(|c| {
                    let bits: Vec<Sig> = (0..b_n)
                        .map(|k| mask_sp.bit(r * bc + b_n * c + k))
                        .collect();
                    mux_index(e.jj.q, &bits)
                })
                .collect();
            mux_index(e.cc.q, &cols)
        })
        .collect();
    mux_index(e.ii.q, &rows)
}

/// Key j = c·b + jj of the block (PE c's key jj), in `j_bits`.
pub(super) fn key_index(m: &mut ModuleBuilder, cfg: &PeRowConfig, c: Sig, jj: Sig) -> Sig {
    let jb = cfg.j_bits();
    // Low jb bits of c·b (b itself may not fit jb bits when C = 1).
    let b_l = m.lit(bits_for(cfg.b as u64), cfg.b as u64);
    c.mul_lo(b_l, jb) + jj.zext(jb)
}

/// The visit the sweeps act on: its score masked, a max or an exp sweep's, its query row, PE
/// and key.
#[derive(Clone, Copy)]
pub(super) struct Visit {
    pub(super) masked: Sig,
    pub(super) in_max: Sig,
    pub(super) in_exp: Sig,
    pub(super) ii: Sig,
    pub(super) cc: Sig,
    pub(super) jj: Sig,
}

impl Visit {
    /// The engine's visit this cycle.
    fn now(e: &EngineRegs, masked: Sig) -> Self {
        Visit {
            masked,
            in_max: e.in_max,
            in_exp: e.in_exp,
            ii: e.ii.q,
            cc: e.cc.q,
            jj: e.jj.q,
        }
    }

    /// The visit a cycle late, to meet a registered read of its score.
    fn registered(self, m: &mut ModuleBuilder) -> Self {
        Visit {
            masked: m.delay("masked_rd", self.masked),
            in_max: m.delay("max_rd", self.in_max),
            in_exp: m.delay("exp_rd", self.in_exp),
            ii: m.delay("ii_rd", self.ii),
            cc: m.delay("cc_rd", self.cc),
            jj: m.delay("jj_rd", self.jj),
        }
    }
}

/// What the max and exp sweeps see of the score they visit: in reg2d the PE register, read in
/// the same cycle (registered with a deep exp stage); in buf2d the S array's registered read,
/// a cycle after the visit (the copy sweep first fills the array from the PE registers, which
/// are then free for the next block's QK).
pub(super) struct SweepRead {
    pub(super) value: Sig,
    /// The visit the value is of.
    pub(super) visit: Visit,
    /// The copy sweep's last cycle (buf2d).
    pub(super) copied: Sig,
    pub(super) s_read: Sig,
    pub(super) s_write: Sig,
    /// unfused: the staging write of the S the max sweep packs, and where the exp sweep reads
    /// the landing buffer.
    pub(super) s_store: Option<RowStore>,
    pub(super) x_rd: Option<ScratchRead>,
    /// The exp unit's operand where the read is registered here: a register of its own behind
    /// a clock gate that only an exp sweep's visit opens (operand isolation with no logic
    /// between the register and the unit).
    pub(super) exp_value: Option<Sig>,
}

pub(super) fn sweep_read(
    m: &mut ModuleBuilder,
    cfg: &PeRowConfig,
    parts: &Parts,
    i: &RowIn,
    e: &EngineRegs,
    pe_value: Sig,
    masked: Sig,
) -> SweepRead {
    if cfg.s_in_memory() {
        return sweep_scratch(m, cfg, i, e, pe_value, masked);
    }
    let now = Visit::now(e, masked);
    let Some(bank) = &parts.s_bank else {
        // A deep exp stage registers the PE registers' read, so the read multiplexers are not
        // in series with the exp stage's multiplier.
        let (value, visit, exp_value) = match cfg.s_read_registered() {
            true => (
                m.delay("s_value_rd", pe_value),
                now.registered(m),
                Some(crate::clock_gate::delay(
                    m,
                    &parts.gate,
                    "exp_s_rd",
                    pe_value,
                    now.in_exp,
                )),
            ),
            false => (pe_value, now, None),
        };
        let zero = m.zero(1);
        return SweepRead {
            value,
            visit,
            copied: zero,
            s_read: zero,
            s_write: zero,
            s_store: None,
            x_rd: None,
            exp_value,
        };
    };
    let per = cfg.plan().sram.per_word.0;
    let j = key_index(m, cfg, e.cc.q, e.jj.q);
    let word = Word::of(cfg, j, per);
    // rowfused: the block's place in the query row's S.
    let above: Vec<Sig> = std::iter::once(e.ii.q).chain(e.blk).collect();
    let addr = word.address(&above);
    // A word's first score is read with it; the word is written with its last score. A
    // spilled block's sweeps never read the array.
    let re = word.at_first(e.in_max | e.in_exp);
    let re = match e.spill {
        Some(sp) => re & !sp,
        None => re,
    };
    let we = word.at_last(e.in_copy);
    let ins = SramIn {
        we,
        waddr: addr,
        wdata: gather(m, "s_gather", pe_value, e.in_copy, per),
        re,
        raddr: addr,
    };
    let word_rd = banked(m, bank, "s_bank", ins, cfg.banks());
    let field_rd = word.field.map(|(f, _, _)| m.delay("s_field_rd", f));
    let value = element(word_rd, cfg.elem_bits().1, field_rd);
    let at_end = and_all(&[
        e.jj.q.eq((cfg.b - 1) as u64),
        e.cc.q.eq((cfg.cols - 1) as u64),
        e.ii.q.eq((cfg.a - 1) as u64),
    ]);
    let visit = now.registered(m);
    // rowfused with `spill`: a block past the array is read from the PE registers (max
    // sweep, which packs it for the staging buffer and frees the registers at its end) or
    // from the scratch landing buffer (exp sweep).
    let (value, copying, s_store, x_rd) = match e.spill {
        Some(sp) => {
            let (landed, x_rd) = scratch_read(m, cfg, i, e, pe_value, j);
            let value = mux(sp, landed, value);
            let store = pack_scores(m, cfg, "s_pack", value, visit.in_max & sp, visit);
            (value, e.in_copy | (e.in_max & sp), Some(store), Some(x_rd))
        }
        None => (value, e.in_copy, None, None),
    };
    SweepRead {
        value,
        visit,
        copied: m.name("s_copied", copying & at_end),
        s_read: re,
        s_write: we,
        s_store,
        x_rd,
        exp_value: None,
    }
}

/// The scratch path's read, a cycle after the visit: in an exp sweep the row's lane of the
/// scratch landing buffer (the core drives the buffer's address from the returned read),
/// else the PE register.
fn scratch_read(
    m: &mut ModuleBuilder,
    cfg: &PeRowConfig,
    i: &RowIn,
    e: &EngineRegs,
    pe_value: Sig,
    j: Sig,
) -> (Sig, ScratchRead) {
    let data = i.x.expect("a scratch landing buffer").data;
    let acc = cfg.elem_bits().1;
    let per = cfg.scratch_per_beat().0;
    if per * acc < data.width {
        m.discard(data.slice(data.width - 1, per * acc));
    }
    let lb = per.trailing_zeros();
    let lane = (lb > 0).then(|| j.slice(lb - 1, 0));
    let landed = element(data.slice(per * acc - 1, 0), acc, lane);
    let read = mux(e.in_exp, landed, pe_value);
    let value = m.delay("s_value_rd", read);
    (value, ScratchRead { ii: e.ii.q, j })
}

/// The staging write of the scores a max sweep packs (`pack`, at the registered `visit`):
/// S leaves in beats of `per` scores, key j is lane j % per of beat j / per, written with its
/// beat's last score.
fn pack_scores(
    m: &mut ModuleBuilder,
    cfg: &PeRowConfig,
    name: &str,
    value: Sig,
    pack: Sig,
    visit: Visit,
) -> RowStore {
    let Visit { ii, cc, jj, .. } = visit;
    let per = cfg.scratch_per_beat().0;
    let j_rd = key_index(m, cfg, cc, jj);
    let word = Word::of(cfg, j_rd, per);
    let packed = gather(m, name, value, pack, per);
    let store = staging_store(m, cfg, &word, word.at_last(pack), ii, packed);
    if let Some((f, _, _)) = word.field {
        m.discard(f);
    }
    store
}

/// unfused's sweeps, a cycle after the visit: the max sweep reads the PE register (and packs
/// the block's S into beats for the staging buffer, written with a beat's last score), the
/// exp sweep the row's bank of the scratch landing buffer (its lane; the core drives the
/// buffer's address from `x_rd`).
fn sweep_scratch(
    m: &mut ModuleBuilder,
    cfg: &PeRowConfig,
    i: &RowIn,
    e: &EngineRegs,
    pe_value: Sig,
    masked: Sig,
) -> SweepRead {
    let j = key_index(m, cfg, e.cc.q, e.jj.q);
    let (value, x_rd) = scratch_read(m, cfg, i, e, pe_value, j);
    let visit = Visit::now(e, masked).registered(m);
    let s_store = pack_scores(m, cfg, "s_gather", value, visit.in_max, visit);
    let zero = m.zero(1);
    SweepRead {
        value,
        visit,
        copied: zero,
        // The scratch buffers' accesses, a score each: read from the landing buffer by the
        // exp sweep, packed for the staging buffer by the max sweep.
        s_read: e.in_exp,
        s_write: visit.in_max,
        s_store: Some(s_store),
        x_rd: Some(x_rd),
        exp_value: None,
    }
}

/// unfused: a staging write of a packed word (a beat of scores or weights, the upper lanes 0
/// when a block row fills less than a beat) of query row `row`, at the word's beat.
fn staging_store(
    m: &mut ModuleBuilder,
    cfg: &PeRowConfig,
    word: &Word,
    we: Sig,
    row: Sig,
    packed: Sig,
) -> RowStore {
    let bb = cfg.beat_bits();
    RowStore {
        we,
        row,
        beat: match word.index {
            Some(x) => x.resize(bb),
            None => m.zero(bb),
        },
        data: packed.resize(cfg.mem_width),
    }
}

/// Max sweep: the running max of the row's scores (masked ones are −Inf), the block max.
pub(super) fn max_sweep(
    m: &mut ModuleBuilder,
    cfg: &PeRowConfig,
    sw: &SweepRead,
    sm: &SoftmaxRows,
    start_sweep: Sig,
) {
    let acc = cfg.pe.mac.formats().acc;
    let neg_inf = m.lit(acc.bits(), acc.neg_inf());
    let candidate = mux(sw.visit.masked, neg_inf, sw.value);
    let run_max = m.reg("run_max", acc.bits(), Some(acc.neg_inf()));
    let maxed = crate::fp::misc::max_logic(m, run_max.q, candidate);
    m.set_next(run_max, mux(start_sweep, neg_inf, maxed));
    m.set_enable(run_max, sw.visit.in_max | start_sweep);
    m.drive(sm.blk_max, run_max.q);
}

/// What the exp sweep gives the rest of the row.
pub(super) struct ExpSweep {
    /// The P bank write a weight leaving the exp pipeline makes (each weight, or a word's last
    /// in buf2d with wide words).
    pub(super) p_write: Sig,
    /// The weight's write reaches the P bank (after the vertical link in reg3d).
    pub(super) link_we: Sig,
    /// unfused: the staging write of the weights, packed into beats.
    pub(super) p_store: Option<RowStore>,
    /// noc2d: the weights' writes, leaving for the NoC.
    pub(super) p_out: Option<super::PWrite>,
}

/// Exp sweep: p = FP16(exp2(s·C − m)) through the exp pipeline into the P buffer; each PE's b
/// weights summed as a tree as they stream past ([`local_tree`]), then the C local sums
/// through the reduction tree.
#[allow(clippy::too_many_arguments)]
pub(super) fn exp_sweep(
    m: &mut ModuleBuilder,
    cfg: &PeRowConfig,
    parts: &Parts,
    i: &RowIn,
    (e, sm, sw): (&EngineRegs, &SoftmaxRows, &SweepRead),
    (p_bank, p_up): (&PBank, &mut crate::link::Crossing),
    c_rows: Option<&[Sig]>,
) -> ExpSweep {
    let c_n = cfg.cols;
    let exp_lat = cfg.exp.latency();
    // The row of the score the sweep read (a cycle after the visit with a registered read:
    // the engine may have moved to the next row's max sweep).
    // Operand isolation: the exp unit sees the score only in an exp sweep's visit (a gated
    // register's, or +0 otherwise), so its multiplier, subtract and exp2 do not follow the max
    // sweep's scores and the PE registers' writes; its weight is taken only then.
    let s = match sw.exp_value {
        Some(held) => held,
        None => {
            let zero = m.zero(sw.value.width());
            m.name("exp_s", mux(sw.visit.in_exp, sw.value, zero))
        }
    };
    let ins = ExpIn {
        s,
        m: mux_index(sw.visit.ii, &sm.row_m),
        c: c_rows.map_or(i.c_const, |c| mux_index(sw.visit.ii, c)),
        masked: sw.visit.masked,
    };
    let p = m.instantiate(&parts.sexp, "u_exp", &ins).p;
    let out_valid = m.delay_n("exp_valid", sw.visit.in_exp, exp_lat);
    let out_ii = m.delay_n("exp_ii", sw.visit.ii, exp_lat);
    let out_c = m.delay_n("exp_c", sw.visit.cc, exp_lat);
    let out_jj = m.delay_n("exp_jj", sw.visit.jj, exp_lat);
    let p_j = key_index(m, cfg, out_c, out_jj);
    // P words of several weights (buf2d; unfused's staging beats) are gathered and written
    // with their last weight.
    let per = if cfg.s_in_memory() {
        cfg.scratch_per_beat().1
    } else {
        cfg.p_per_word()
    };
    let p_word = Word::of(cfg, p_j, per);
    let p_we = p_word.at_last(out_valid);
    let p_data = gather(m, "p_gather", p, out_valid, per);
    // reg3d: P goes up to the PV tier's bank through the vertical link's register stages.
    // noc2d: P leaves for the NoC, and the bank takes what lands from it.
    let (we, p_write, p_store, p_out) = match (p_bank.write, i.p_in) {
        (Some((bank_we, bank_waddr, bank_wdata)), Some(land)) => {
            m.drive(bank_we, land.we);
            m.drive(bank_waddr, land.addr);
            m.drive(bank_wdata, land.data);
            let out = super::PWrite {
                we: p_we,
                addr: p_word.address(&[e.slot, out_ii]),
                data: p_data,
            };
            (p_we, p_we, None, Some(out))
        }
        (Some((bank_we, bank_waddr, bank_wdata)), None) => {
            let (we, waddr, wdata) = (
                p_up.send(m, "link_p_we", p_we),
                p_up.send(m, "link_p_waddr", p_word.address(&[e.slot, out_ii])),
                p_up.send(m, "link_p_wdata", p_data),
            );
            m.drive(bank_we, we);
            m.drive(bank_waddr, waddr);
            m.drive(bank_wdata, wdata);
            (we, p_we, None, None)
        }
        (None, land) => {
            assert!(land.is_none(), "P lands from the NoC in a P bank");
            // unfused: P leaves in beats of `per` weights through the staging buffer.
            let store = staging_store(m, cfg, &p_word, p_we, out_ii, p_data);
            // Counted a weight each, as the P bank's accesses are.
            (p_we, out_valid, Some(store), None)
        }
    };
    let wide = crate::fp::cvt_widen::logic_from(m, p, cfg.pe.mac.formats().operand);
    // For a fast clock the widened weight is registered before the first adder (the widening
    // normalizes a subnormal P: a leading-zero count and a shift).
    let cut = cfg.widen_registered();
    let [wide, out_valid, out_c, out_jj] = crate::fp::arith::stage_all(
        m,
        "wide",
        cut,
        [
            ("p", wide),
            ("valid", out_valid),
            ("c", out_c),
            ("jj", out_jj),
        ],
    );
    let local = local_tree(m, cfg, parts, wide, out_valid, out_c, out_jj);
    let mut locals: Vec<Sig> = (0..c_n)
        .map(|c| {
            let en = local.valid & local.c.eq(c as u64);
            m.hold(&format!("local_sum{c}"), local.value, en)
        })
        .collect();
    locals.reverse();
    let t = m.instantiate(&parts.tree, "u_tree", &X { x: cat(&locals) });
    m.discard(t.max);
    m.drive(sm.blk_sum, t.sum);
    ExpSweep {
        p_write,
        link_we: we,
        p_store,
        p_out,
    }
}

/// A PE's weights reduced as they leave the exp pipeline: the value, when it is final, and
/// its PE.
struct Local {
    value: Sig,
    valid: Sig,
    c: Sig,
}

/// Each PE's b weights (arriving in key order, the PEs one after another) summed in
/// `kernels::reduce`'s tree order as they stream past: per level, a value of even index is
/// held and the next (odd) one is added to it, an odd last one passes through; the level's
/// adder at the tree's stage latency ([`PeRowConfig::local_latency`] in all), and what passes
/// through waits as long, so a level's values arrive in index order. No add waits on the one
/// before it (a chain of the b weights in order would, every cycle).
fn local_tree(
    m: &mut ModuleBuilder,
    cfg: &PeRowConfig,
    parts: &Parts,
    x: Sig,
    valid: Sig,
    c: Sig,
    jj: Sig,
) -> Local {
    let stage = cfg.tree().stage();
    let (mut x, mut valid, mut c, mut idx) = (x, valid, c, jj);
    let mut n = cfg.b;
    let mut level = 0;
    while n > 1 {
        level += 1;
        let odd = idx.bit(0);
        let held = m.hold(&format!("pair_l{level}"), x, valid & !odd);
        let add = Binary { a: held, b: x };
        let sum = m
            .instantiate(&parts.local_add, &format!("u_local_l{level}"), &add)
            .y;
        let (value, ends) = if n % 2 == 1 {
            let last = idx.eq((n - 1) as u64);
            let passed = m.delay_n(&format!("pass_l{level}"), x, stage);
            let last_out = m.delay_n(&format!("last_l{level}"), valid & last, stage);
            (mux(last_out, passed, sum), odd | last)
        } else {
            (sum, odd)
        };
        x = value;
        valid = m.delay_n(&format!("local_valid_l{level}"), valid & ends, stage);
        c = m.delay_n(&format!("local_c_l{level}"), c, stage);
        n = n.div_ceil(2);
        // The value's index at the next level (its pair's); none is needed past a pair.
        if n > 1 {
            let above = idx.slice(idx.width() - 1, 1);
            idx = m.delay_n(&format!("local_j_l{level}"), above, stage);
        }
    }
    Local { value: x, valid, c }
}
