//! The core's fetch unit: the Q, K and V channels' descriptors and block hand-over, and the
//! operands the PE rows read from the landing buffers.
//!
//! Fetch cursors run ahead of the sequencer: a channel takes its next descriptor as soon as it
//! is idle (its last block released), so the next tile's (or head's) first block is fetched
//! while the current tile still computes. Q has one descriptor per head and a block per tile;
//! K and V one descriptor per tile with keys to see (blocks of Bc rows), each walking
//! (head, tile) on its own and skipping tiles that need no key. A channel with an error stops.
//! The operands are combinational from the step counters: row r's Q value `a_q` (lane k of
//! its landing bank) and the column operands `b_col` (K lanes in QK, V lanes in PV).

use super::ports::{Problem, ReadCmd, ReadStatus, Step};
use super::sequencer::{keys_needed, reach_bits};
use super::{reg_set, CoreParams};
use crate::fault::Fault;
use crate::ir::iface::Block;
use crate::mem::dma::{ReadDesc, ROW_BYTES_BITS};
use crate::variants::Arrays;
use crate::{
    addr_bits, and_all, cat, group, interface, mux, mux_index, Design, ModuleBuilder, Sig,
};

interface! {
    /// Row r's operand: the Q value of its current query row and dimension.
    pub struct RowOperand { a_q }
}

group! {
    /// The fetch unit's inputs: the run, the sequencer's phase events and tile, the problem
    /// (with its latched causal reach offset, `reach_off`), the loop counters and the
    /// channels' status.
    pub struct FetchIn<T> {
        go, busy, qk_last_step, pv_last_step, go_once, empty_tile, blk, nblk, reach_off;
        problem: Problem<T>,
        step: Step<T>,
        q: ReadStatus<T>,
        k: ReadStatus<T>,
        v: ReadStatus<T>,
    }
}

group! {
    /// The fetch unit's outputs: the channels' commands and the PE operands.
    pub struct FetchOut<T> {
        b_col, v_col;
        q: ReadCmd<T>,
        k: ReadCmd<T>,
        v: ReadCmd<T>,
        rows: Vec<RowOperand<T>>,
    }
}

/// The fetch unit's block.
pub type FetchBlock = Block<FetchIn, FetchOut<u32>>;

fn rd_data_width(p: &CoreParams, l: &crate::mem::landing::LandingConfig) -> u32 {
    l.banks() * p.dma.width
}

/// Defines the fetch unit of the core `p`.
pub fn build(d: &mut Design, p: &CoreParams) -> FetchBlock {
    let dma = &p.dma;
    let inputs = FetchIn {
        go: 1,
        busy: 1,
        qk_last_step: 1,
        pv_last_step: 1,
        go_once: 1,
        empty_tile: 1,
        blk: p.index_bits,
        nblk: p.index_bits,
        reach_off: reach_bits(p),
        problem: Problem::widths(p),
        step: Step::widths(p),
        q: ReadStatus::widths(rd_data_width(p, &dma.q)),
        k: ReadStatus::widths(rd_data_width(p, &dma.k)),
        v: ReadStatus::widths(rd_data_width(p, &dma.v)),
    };
    let ew = p.row.elem_bits().0;
    let outputs = FetchOut {
        b_col: ew * p.row.cols,
        v_col: ew * p.row.cols,
        q: dma.read_cmd(&dma.q),
        k: dma.read_cmd(&dma.k),
        v: dma.read_cmd(&dma.v),
        rows: vec![RowOperand { a_q: ew }; p.rows as usize],
    };
    let name = format!("{}_fetch", p.module_name());
    d.define_block(&name, &inputs, outputs, |_, m, i| {
        m.doc(
            "core fetch unit: Q/K/V descriptors (cursors run ahead of the sequencer), block \
             release, landing-buffer read addresses and the PE operands (a_q per row, b_col).\n\
             Combinational from the step counters to the operands. See hdl/src/core/fetch.rs.",
        );
        fetch(m, p, &i)
    })
}

/// What the sequencer and the readout use of the problem and the channels, not the fetch
/// unit; the landing addresses read only the fields of the loop counters their layout has
/// (none, for a single-row bank).
fn discard_unused(m: &mut ModuleBuilder, i: &FetchIn) {
    let prob = &i.problem;
    for unused in [
        prob.o_addr,
        prob.out_f32,
        prob.c_const,
        prob.o_row_stride,
        prob.o_head_stride,
    ] {
        m.discard(unused);
    }
    m.discard_all(&i.step);
    for unused in [i.q.ready, i.k.ready, i.v.ready] {
        m.discard(unused);
    }
}

fn fetch(m: &mut ModuleBuilder, p: &CoreParams, i: &FetchIn) -> FetchOut {
    let prob = &i.problem;
    discard_unused(m, i);
    let (iw, aw) = (p.index_bits, p.addr_bits);
    let row_bytes = p.operand_row_bytes() as u64;
    let rb16 = m.lit(ROW_BYTES_BITS, row_bytes);
    let brl = m.lit(iw, p.br() as u64);
    let bcl = m.lit(iw, p.bc() as u64);
    let zero_bit = m.zero(1);
    let (zero_i, zero_a) = (m.zero(iw), m.zero(aw));
    let heads = prob.heads.zext(iw);
    let running = i.busy;
    let go = i.go;
    // Q: one descriptor per head, a block per tile.
    let qf_head = m.reg("qf_head", iw, Some(0));
    let qf_off = m.reg("qf_off", aw, Some(0));
    let q_ok = i.q.error.is_zero();
    // A problem without queries has nothing to fetch (it completes like one without heads).
    let has_queries = prob.q_len.any();
    // The descriptor's base is registered (its sum is not in series with the DMA's check): a
    // cursor takes once it has been still a cycle.
    let q_settled = m.reg("qf_settled", 1, Some(0));
    let q_start = and_all(&[
        running,
        qf_head.q.lt(heads),
        !i.q.busy,
        q_ok,
        has_queries,
        q_settled.q,
    ]);
    let q_start = m.name("q_fetch_start", q_start);
    let qf_en = go | q_start;
    m.set_next(q_settled, !qf_en);
    reg_set(m, qf_head, mux(go, zero_i, qf_head.q + 1), qf_en);
    reg_set(
        m,
        qf_off,
        mux(go, zero_a, qf_off.q + prob.q_head_stride),
        qf_en,
    );
    // The Q tile is released after its last QK step, or at once for a tile with no block.
    let q_last_qk = i.qk_last_step & (i.blk + 1).eq(i.nblk);
    let q_rel = q_last_qk | (i.go_once & i.empty_tile);
    let q_rel = m.with_fault(p.faults, Fault::ReleaseQUnheld, |_| q_rel | go, q_rel);
    let (rd_q, rd_k, rd_v) = read_addresses(m, p, i);
    let q = ReadCmd {
        rd_addr: rd_q,
        desc: ReadDesc {
            start: q_start,
            base: m.delay("q_desc_base", prob.q_addr + qf_off.q),
            stride: prob.q_row_stride,
            row_bytes: rb16,
            rows: prob.q_len,
            block_rows: brl,
            want: zero_bit,
            release: q_rel,
        },
    };
    // K and V: one descriptor per tile with keys to see, blocks of Bc rows; the K/V head
    // moves on after every `kv_group` Q heads.
    let group_last = |g: Sig| (g + 1).ge(prob.kv_group);
    let mut kv = |ch: &str,
                  addr: Sig,
                  (row_stride, head_stride): (Sig, Sig),
                  status: &ReadStatus,
                  last: Sig,
                  early: Fault,
                  rd| {
        let f_head = m.reg(&format!("{ch}f_head"), iw, Some(0));
        let f_group = m.reg(&format!("{ch}f_group"), iw, Some(0));
        let f_qbase = m.reg(&format!("{ch}f_qbase"), iw, Some(0));
        let f_off = m.reg(&format!("{ch}f_off"), aw, Some(0));
        let active = and_all(&[running, f_head.q.lt(heads), status.error.is_zero()]);
        let head_over = f_qbase.q.ge(prob.q_len);
        // The keys the cursor's tile needs and its base, registered (the causal arithmetic and
        // the sum are not in series with the take and the DMA): a cursor takes once it has
        // been still a cycle.
        let (need, _) = keys_needed(m, p, prob, i.reach_off, f_qbase.q);
        let need = m.delay(&format!("{ch}_need"), need);
        let settled = m.reg(&format!("{ch}f_settled"), 1, Some(0));
        let take = and_all(&[active & !head_over, !status.busy, settled.q]);
        let start = take & !need.is_zero();
        let start = m.name(&format!("{ch}_fetch_start"), start);
        let next_head = active & head_over;
        // (head, q_base, offset): the next tile at a take, the next head at a head end.
        let h_en = go | next_head;
        reg_set(m, f_head, mux(go, zero_i, f_head.q + 1), h_en);
        let qb_reset = go | next_head;
        let qb_d = mux(qb_reset, zero_i, f_qbase.q + brl);
        reg_set(m, f_qbase, qb_d, qb_reset | take);
        m.set_next(settled, !(qb_reset | take));
        let wrap = group_last(f_group.q);
        let g_d = mux(go | wrap, zero_i, f_group.q + 1);
        reg_set(m, f_group, g_d, h_en);
        let off_d = mux(go, zero_a, f_off.q + head_stride);
        reg_set(m, f_off, off_d, go | (next_head & wrap));
        // Fault: release at start, when nothing is held yet.
        let release = m.with_fault(p.faults, early, |_| last | go, last);
        ReadCmd {
            rd_addr: rd,
            desc: ReadDesc {
                start,
                base: m.delay(&format!("{ch}_desc_base"), addr + f_off.q),
                stride: row_stride,
                row_bytes: rb16,
                rows: need,
                block_rows: bcl,
                want: zero_bit,
                release: m.name(&format!("{ch}_rel"), release),
            },
        }
    };
    let k = kv(
        "k",
        prob.k_addr,
        (prob.k_row_stride, prob.k_head_stride),
        &i.k,
        i.qk_last_step,
        Fault::ReleaseKUnheld,
        rd_k,
    );
    let v = kv(
        "v",
        prob.v_addr,
        (prob.v_row_stride, prob.v_head_stride),
        &i.v,
        i.pv_last_step,
        Fault::ReleaseVUnheld,
        rd_v,
    );
    let (rows, b_col, v_col) = operands(m, p, i);
    FetchOut {
        b_col,
        v_col,
        q,
        k,
        v,
        rows,
    }
}

/// `x` fitted to `bits` (truncated or zero-extended); None for a field of no bits.
fn field(x: Sig, bits: u32) -> Option<Sig> {
    (bits > 0).then(|| x.resize(bits))
}

/// The landing buffers' read addresses: {slot, row field, beat field}. Dimension k selects
/// beat k / lanes and lane k % lanes of Q and K rows; V rows are read whole, by key.
fn read_addresses(m: &mut ModuleBuilder, p: &CoreParams, i: &FetchIn) -> (Sig, Sig, Sig) {
    let lane_bits = addr_bits(p.lanes());
    let kk = i.step.k;
    let k_beat = if kk.width() > lane_bits {
        kk.slice(kk.width() - 1, lane_bits)
    } else {
        m.zero(1)
    };
    let (ql, kl) = (&p.dma.q, &p.dma.k);
    let addr = |slot: Sig, row: Sig, row_bits: u32, beat_bits: u32| {
        let mut parts = vec![slot];
        parts.extend(field(row, row_bits));
        parts.extend(field(k_beat, beat_bits));
        cat(&parts)
    };
    let q = addr(i.q.slot, i.step.ii, ql.local_row_bits(), ql.beat_bits());
    let k = addr(i.k.slot, i.step.jj, kl.local_row_bits(), kl.beat_bits());
    let jk = field(i.step.jk, p.dma.v.row_bits()).expect("rows");
    (q, k, cat(&[i.v.slot, jk]))
}

/// Lane `lane` of a beat of `w`-bit lanes.
fn lane_of(beat: Sig, lane: Sig, w: u32) -> Sig {
    let vals: Vec<Sig> = (0..beat.width() / w)
        .map(|i| beat.slice(w * i + w - 1, w * i))
        .collect();
    mux_index(lane, &vals)
}

/// The PE operands: each row's Q value (lane k of its bank of the Q landing buffer) and the
/// column buses: PE c's K value (lane k of bank c) in QK, its V value (lane c·e + q) in PV
/// (in 2-D designs `b_col` carries either; `v_col` always V).
fn operands(m: &mut ModuleBuilder, p: &CoreParams, i: &FetchIn) -> (Vec<RowOperand>, Sig, Sig) {
    let w = p.dma.width;
    let ew = p.row.elem_bits().0;
    let lane_bits = addr_bits(p.lanes());
    let kk = i.step.k;
    let k_lane = kk.trunc(lane_bits.min(kk.width())).zext(lane_bits);
    let e_n = p.row.e;
    let mut k_cols = vec![];
    let mut v_cols = vec![];
    for c in 0..p.row.cols {
        let kb = i.k.rd_data.slice(w * c + w - 1, w * c);
        k_cols.push(lane_of(kb, k_lane, ew));
        let lanes_c: Vec<Sig> = (0..e_n)
            .map(|q| {
                let lane = c * e_n + q;
                i.v.rd_data.slice(ew * lane + ew - 1, ew * lane)
            })
            .collect();
        let qsel = if e_n == 1 { m.zero(1) } else { i.step.q };
        v_cols.push(mux_index(qsel, &lanes_c));
    }
    k_cols.reverse();
    v_cols.reverse();
    // One phase at a time in 2-D: the column bus carries K or V. reg3d: K to the QK tier, V to
    // the PV tier, at once.
    let (k_bus, v_bus) = (cat(&k_cols), cat(&v_cols));
    let b_col = match p.row.plan().arrays {
        Arrays::PerPhase => k_bus,
        Arrays::Shared { .. } => mux(i.step.pv, v_bus, k_bus),
    };
    let b_col = m.name("b_col", b_col);
    let v_col = m.name("v_col", v_bus);
    let rows = (0..p.rows)
        .map(|r| {
            let qb = i.q.rd_data.slice(w * r + w - 1, w * r);
            RowOperand {
                a_q: lane_of(qb, k_lane, ew),
            }
        })
        .collect();
    (rows, b_col, v_col)
}
