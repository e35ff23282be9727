//! The core's counter file: 48-bit performance counters, cleared by `start`, counting while
//! the core is busy (see the core's module docs for each counter). MACs, register-file and
//! P-buffer accesses are summed over the rows each cycle; a cycle without a MAC step is a stall
//! of the first reason that holds: K/V data, the Q tile, the softmax, or other (tile changes,
//! drains).

use super::ports::{Counters, RowActivity, Stall};
use super::{CoreParams, COUNTER_BITS};
use crate::array::pe_row::SpillRead;
use crate::fp::arith::split_counter;
use crate::ir::iface::{Block, Ports};
use crate::mem::glb::{GlbBankCounts, GlbBankSel, GlbEvents};
use crate::variants::Arrays;
use crate::{and_all, bits_for, group, mux, mux_index, or_all, Design, ModuleBuilder, Sig};

group! {
    /// What the counters count: the run (`clear` at start, `busy`), MAC steps, blocks, skipped
    /// blocks, the stall reasons and the channels' ready flags, the DMA's beat counts, and each
    /// row's activity.
    pub struct CountIn<T> {
        clear, busy, step_valid, qk_step, pv_step, block_done, skipped, q_ready, k_ready, v_ready,
        dma_read_beats,
        dma_write_beats;
        glb: Option<GlbEvents<T>>,
        glb_bank: Option<GlbBankSel<T>>,
        stall: Stall<T>,
        rows: Vec<RowActivity<T>>,
        spill: Option<SpillRead<T>>,
        noc: Option<NocEvents<T>>,
        scale: Option<ScaleStep<T>>,
    }
}

crate::interface! {
    /// noc2d's P path this cycle (`array::noc_path`): a flit sent, flits on the links between
    /// routers, the routers' FIFO writes and reads, a flit held for want of a credit, a word
    /// read from the source bank.
    pub struct NocEvents { sent, hops, writes, reads, stalled, read }
}

crate::interface! {
    /// Integer QKᵀ: the QK step this cycle is a scale step (no MAC slots).
    pub struct ScaleStep { scale }
}

group! {
    /// The counters, and with a GLB the per-bank counter window (`glb_bank_reads`,
    /// `glb_bank_writes`) for the group `glb_bank_sel` selects.
    pub struct CountOut<T> {
        ;
        counters => Counters<T>,
        glb_bank: Option<GlbBankCounts<T>>,
    }
}

/// The counter file's block.
pub type CountBlock = Block<CountIn, CountOut<u32>>;

/// Defines the counter file of the core `p`.
pub fn build(d: &mut Design, p: &CoreParams) -> CountBlock {
    let inputs = CountIn {
        clear: 1,
        busy: 1,
        step_valid: 1,
        qk_step: 1,
        pv_step: 1,
        block_done: 1,
        skipped: p.index_bits,
        q_ready: 1,
        k_ready: 1,
        v_ready: 1,
        dma_read_beats: crate::mem::dma::BEAT_COUNTER_BITS,
        dma_write_beats: crate::mem::dma::BEAT_COUNTER_BITS,
        glb: p.dma.glb.map(|g| GlbEvents::widths(&g)),
        glb_bank: p.dma.glb.map(|g| GlbBankSel::widths(&g)),
        stall: Stall::widths(),
        rows: vec![RowActivity::widths(p); p.rows as usize],
        spill: p.row.spills().then_some(SpillRead { read: 1 }),
        noc: p.noc_path().map(|c| {
            let line = crate::array::noc::line_widths(&crate::array::noc_path::line(&c));
            NocEvents {
                sent: 1,
                hops: line.hops,
                writes: line.writes,
                reads: line.reads,
                stalled: 1,
                read: 1,
            }
        }),
        scale: p.row.pe.qk.map(|_| ScaleStep { scale: 1 }),
    };
    let name = format!("{}_counters", p.module_name());
    let outputs = CountOut {
        counters: Counters::widths(),
        glb_bank: p.dma.glb.map(|_| GlbBankCounts::widths(COUNTER_BITS)),
    };
    d.define_block(&name, &inputs, outputs, |_, m, i| {
        m.doc(
            "core counter file: 48-bit performance counters, cleared at start (see \
             hdl/src/core/mod.rs for each).\nLatency 1. See hdl/src/core/counters.rs.",
        );
        m.set_latency(1);
        counters(m, p, &i)
    })
}

/// A 48-bit counter: `+= inc` every cycle, cleared by `clear` (no carry ripples through its
/// width in a cycle: [`split_counter`]).
fn counter(m: &mut ModuleBuilder, name: &str, inc: Sig, clear: Sig) -> Sig {
    split_counter(m, name, COUNTER_BITS, inc, Some(clear))
}

/// The DMA's beats since the run's start, from its running totals: each cycle's beats are the
/// low byte of the total less its value a cycle before (a few beats a cycle at most), summed
/// from `clear` as the other counters are (a cycle late: the total is the DMA's register).
fn since_go(m: &mut ModuleBuilder, name: &str, total: Sig, clear: Sig) -> Sig {
    let w = total.width().min(8);
    if total.width() > w {
        m.discard(total.slice(total.width() - 1, w));
    }
    let low = total.trunc(w);
    let prev = m.delay(&format!("{name}_prev"), low);
    counter(m, name, low - prev, clear)
}

/// Per GLB bank group a read and a write counter (words per bank), and the window onto the
/// group `sel` selects (`sel` is a group index; with one group it is one bit, and 1 shows 0).
fn bank_window(
    m: &mut ModuleBuilder,
    e: &GlbEvents,
    sel: &GlbBankSel,
    clear: Sig,
) -> GlbBankCounts {
    let groups = e.group_reads.width();
    let zero = m.zero(COUNTER_BITS);
    let mut count = |what: &str, events: Sig| {
        let mut c: Vec<Sig> = (0..groups)
            .map(|n| counter(m, &format!("cnt_glb_bank{n}_{what}"), events.bit(n), clear))
            .collect();
        if groups == 1 {
            // A 1-bit select: 1 is past the only group.
            c.push(zero);
        }
        mux_index(sel.sel, &c)
    };
    GlbBankCounts {
        reads: count("reads", e.group_reads),
        writes: count("writes", e.group_writes),
    }
}

/// The MAC slots the issued steps left masked, a cycle late as the tiers' MACs come: R·C
/// per tier that steps (with integer QKᵀ, R·C·lanes in a QK step, none in a scale step)
/// less the MACs counted.
fn masked_slots(m: &mut ModuleBuilder, p: &CoreParams, i: &CountIn, macs: Sig) -> Sig {
    let (rr, mpp) = (p.rows, p.row.macs_per_pe());
    // MAC slots of the steps issued: R·C per tier that steps this cycle (with integer QKᵀ,
    // R·C·lanes in a QK step, none in a scale step).
    let tier_pes = m.lit(macs.width(), (rr * p.row.cols) as u64);
    let zero_s = m.zero(macs.width());
    let (qk_pes, qk_step) = match i.scale {
        Some(s) => (
            m.lit(macs.width(), (rr * p.row.cols * mpp) as u64),
            i.qk_step & !s.scale,
        ),
        None => (tier_pes, i.qk_step),
    };
    // The slots are counted a cycle late, as the tiers' MACs come (registered before their
    // sums), so each cycle's difference is that step's masked slots.
    match p.row.plan().arrays {
        Arrays::PerPhase => {
            let qk_slots = mux(qk_step, qk_pes, zero_s);
            let pv_slots = mux(i.pv_step, tier_pes, zero_s);
            m.delay("cnt_slots", qk_slots + pv_slots) - macs
        }
        Arrays::Shared { .. } => {
            // One step bus: a QK or a PV step, or (integer QKᵀ) a scale step with no slot.
            let (mac_step, slots) = match i.scale {
                Some(s) => (i.step_valid & !s.scale, mux(qk_step, qk_pes, tier_pes)),
                None => (i.step_valid, tier_pes),
            };
            m.delay("cnt_slots", mux(mac_step, slots, zero_s)) - macs
        }
    }
}

/// Why no MAC step issued, while busy: waiting for K or V, for Q, for the softmax (or the row
/// engines holding S or a single-port P bank), or else.
fn stalls(i: &CountIn, run_busy: Sig) -> [Sig; 4] {
    let idle_cycle = run_busy & !i.step_valid;
    let s = &i.stall;
    let qk_wait = s.waiting & s.want_qk;
    let need_k = qk_wait & !i.k_ready;
    let need_q = and_all(&[qk_wait, i.k_ready, !i.q_ready]);
    let pv_wait = and_all(&[s.waiting, s.want_pv, s.pv_more]);
    let need_sm = pv_wait & !s.sm_ahead;
    let need_v = and_all(&[pv_wait, s.sm_ahead, !i.v_ready]);
    // The row engines hold the phase back: S not yet copied out of the PE registers (buf2d), or
    // a single-port P bank busy with the softmax.
    let need_s = and_all(&[qk_wait, i.k_ready, i.q_ready, !s.s_free]);
    let need_p = and_all(&[pv_wait, s.sm_ahead, i.v_ready, !s.p_free]);
    let st_kv = idle_cycle & (need_k | need_v);
    let st_q = idle_cycle & need_q;
    let st_sm = idle_cycle & or_all(&[need_sm, need_s, need_p]);
    let st_other = idle_cycle & !or_all(&[st_kv, st_q, st_sm]);
    [st_kv, st_q, st_sm, st_other]
}

/// The broadcast buses' bit·hops and the operand bits read from the landing buffers this
/// cycle.
fn wire_bits(m: &mut ModuleBuilder, p: &CoreParams, i: &CountIn) -> (Sig, Sig) {
    let rr = p.rows;
    // Broadcast wire activity, bits × hops: each tier's step drives its R row buses (an
    // operand, Q or P, across C PE pitches) and its C column buses (an operand, K or V, down R
    // rows): 2·16·R·C bit·hops per tier and step with FP16 operands, whatever the data.
    let ew = p.row.elem_bits().0 as u64;
    let span = 2 * ew * (rr * p.row.cols) as u64;
    let bc_w = bits_for(span * p.row.mac_tiers() as u64);
    let (span_l, zero_b) = (m.lit(bc_w, span), m.zero(bc_w));
    let bcast = match p.row.plan().arrays {
        Arrays::PerPhase => mux(i.qk_step, span_l, zero_b) + mux(i.pv_step, span_l, zero_b),
        Arrays::Shared { .. } => mux(i.step_valid, span_l, zero_b),
    };
    // Operand bits from the landing buffers: a QK step reads a Q lane per row and a K lane per
    // column, a PV step a V lane per column.
    // rowfused's spill: a spilled block's exp sweep reads a score per row from the scratch
    // landing buffer.
    let (qk_bits, pv_bits) = (ew * (rr + p.row.cols) as u64, ew * p.row.cols as u64);
    let x_bits = i.spill.map(|_| p.row.elem_bits().1 as u64 * rr as u64);
    let land_w = bits_for(qk_bits + pv_bits + x_bits.unwrap_or(0));
    let (qk_l, pv_l, zero_l) = (
        m.lit(land_w, qk_bits),
        m.lit(land_w, pv_bits),
        m.zero(land_w),
    );
    let land = mux(i.qk_step, qk_l, zero_l) + mux(i.pv_step, pv_l, zero_l);
    let land = match (i.spill, x_bits) {
        (Some(x), Some(bits)) => land + mux(x.read, m.lit(land_w, bits), zero_l),
        _ => land,
    };
    (bcast, land)
}

fn counters(m: &mut ModuleBuilder, p: &CoreParams, i: &CountIn) -> CountOut {
    let (rr, cn) = (p.rows, p.row.cols * p.row.mac_tiers());
    // Per-cycle activity summed over the rows: MACs; register-file accesses at the ports (up to
    // C + 1 reads, each PE's accumulator port and the engine's read, and C writes per row);
    // P-buffer accesses (one read and one write per row at most).
    let sum = |m: &mut ModuleBuilder, f: fn(&RowActivity) -> Sig, width: u32| {
        let xs: Vec<Sig> = i.rows.iter().map(f).collect();
        m.sum(&xs, width)
    };
    let mpp = p.row.macs_per_pe();
    let macs = sum(m, |r| r.macs, bits_for((rr * cn * mpp) as u64));
    // Up to C + 1 reads and C writes per tier, and one engine read (three tiers: the S links
    // read the QK PEs and write the softmax tier's registers).
    let acc_w = bits_for((rr * (p.row.cols * p.row.rf_tiers() + 1)) as u64);
    let rf_reads = sum(m, |r| r.rf_reads, acc_w);
    let rf_writes = sum(m, |r| r.rf_writes, acc_w);
    let p_w = bits_for(rr as u64);
    // The P banks' read and write enables come from the sequencer's phase choice in the same
    // cycle: they are counted a cycle late, from registers, so that the choice does not run
    // on through the sum and the counter's add (a P access is never among a run's last cycles:
    // the PV drain and the readout follow it).
    let late = |m: &mut ModuleBuilder, f: fn(&RowActivity) -> Sig, what: &str| -> Sig {
        let now: Vec<Sig> = i.rows.iter().map(f).collect();
        let xs = m.delay_bits(&format!("cnt_{what}_q"), &now);
        m.sum(&xs, p_w)
    };
    let p_reads = late(m, |r| r.p_read, "p_read");
    let p_writes = late(m, |r| r.p_write, "p_write");
    let s_reads = sum(m, |r| r.s_read, p_w);
    let s_writes = sum(m, |r| r.s_write, p_w);
    let vlink_w = p.row.vlink_width() + bits_for(rr as u64);
    let vlink = sum(m, |r| r.vlink, vlink_w);
    let vlink_s = sum(m, |r| r.vlink_s, vlink_w);
    // The row engines' operations (one of each kind per row and cycle at most).
    let max_ops = sum(m, |r| r.max_op, p_w);
    let exp_ops = sum(m, |r| r.exp_op, p_w);
    let row_updates = sum(m, |r| r.row_update, p_w);
    let recip_ops = sum(m, |r| r.recip_op, p_w);
    let norm_ops = sum(m, |r| r.norm_op, p_w);
    let rescales = sum(m, |r| r.rescale, p_w);
    let rescales_avoided = sum(m, |r| r.rescale_avoided, p_w);
    let clear = i.clear;
    let run_busy = i.busy & !clear;
    let masked = masked_slots(m, p, i, macs);
    let [st_kv, st_q, st_sm, st_other] = stalls(i, run_busy);
    let (bcast, land) = wire_bits(m, p, i);
    // The GLB's traffic in bits (each access a memory beat), its conflict stalls and the K/V
    // beats that streamed past it; 0 without a GLB.
    let beat = p.dma.width as u64;
    let glb = i.glb.as_ref().map(|g| {
        let bw = bits_for(2 * beat);
        let reads = g.reads.zext(bw).mul_lo(m.lit(bw, beat), bw);
        // With unfused's scratch region `fill` counts the writes (a fill and O's).
        let fill = if g.fill.width() == 1 {
            mux(g.fill, m.lit(bw, beat), m.zero(bw))
        } else {
            g.fill.zext(bw).mul_lo(m.lit(bw, beat), bw)
        };
        let spill = mux(g.spill, m.lit(bw, beat), m.zero(bw));
        [reads, fill, g.refused, spill]
    });
    let mut glb_c = |k: usize, name: &str| match &glb {
        Some(g) => counter(m, name, g[k], clear),
        None => m.zero(COUNTER_BITS),
    };
    let glb_read_bits = glb_c(0, "cnt_glb_read_bits");
    let glb_write_bits = glb_c(1, "cnt_glb_write_bits");
    let glb_conflict_stalls = glb_c(2, "cnt_glb_conflict_stalls");
    let kv_spill_bits = glb_c(3, "cnt_kv_spill_bits");
    // noc2d's P path: flits, their bits times the links they crossed, the routers' FIFO
    // accesses, the sender's waits for a credit, the source bank's word reads.
    let noc = i.noc.as_ref().map(|n| {
        let flit = p.noc_path().expect("noc2d").router.flit_bits as u64;
        let hw = n.hops.width() + bits_for(flit);
        let hop_bits = n.hops.zext(hw).mul_lo(m.lit(hw, flit), hw);
        [n.sent, hop_bits, n.writes, n.reads, n.stalled, n.read]
    });
    let mut noc_c = |k: usize, name: &str| match &noc {
        Some(n) => counter(m, name, n[k], clear),
        None => m.zero(COUNTER_BITS),
    };
    let noc_flits = noc_c(0, "cnt_noc_flits");
    let noc_hop_bits = noc_c(1, "cnt_noc_hop_bits");
    let noc_fifo_writes = noc_c(2, "cnt_noc_fifo_writes");
    let noc_fifo_reads = noc_c(3, "cnt_noc_fifo_reads");
    let noc_stalls = noc_c(4, "cnt_noc_stalls");
    let noc_src_reads = noc_c(5, "cnt_noc_src_reads");
    let rescales = counter(m, "cnt_rescales", rescales, clear);
    let rescales_avoided = counter(m, "cnt_rescales_avoided", rescales_avoided, clear);
    let mut c = |name: &str, inc: Sig| counter(m, name, inc, clear);
    let out = Counters {
        cycles: c("cnt_cycles", run_busy),
        mac_cycles: c("cnt_mac_cycles", i.step_valid),
        qk_cycles: c("cnt_qk_cycles", i.qk_step),
        pv_cycles: c("cnt_pv_cycles", i.pv_step),
        macs: c("cnt_macs", macs),
        masked_macs: c("cnt_masked", masked),
        stall_kv: c("cnt_stall_kv", st_kv),
        stall_q: c("cnt_stall_q", st_q),
        stall_softmax: c("cnt_stall_softmax", st_sm),
        stall_other: c("cnt_stall_other", st_other),
        blocks: c("cnt_blocks", i.block_done),
        skipped_blocks: c("cnt_skipped", i.skipped),
        rf_reads: c("cnt_rf_reads", rf_reads),
        rf_writes: c("cnt_rf_writes", rf_writes),
        p_buf_reads: c("cnt_p_buf_reads", p_reads),
        p_buf_writes: c("cnt_p_buf_writes", p_writes),
        s_buf_reads: c("cnt_s_buf_reads", s_reads),
        s_buf_writes: c("cnt_s_buf_writes", s_writes),
        vlink_bits: c("cnt_vlink_bits", vlink),
        vlink_s_bits: c("cnt_vlink_s_bits", vlink_s),
        bcast_bit_hops: c("cnt_bcast_bit_hops", bcast),
        max_ops: c("cnt_max_ops", max_ops),
        exp_ops: c("cnt_exp_ops", exp_ops),
        row_updates: c("cnt_row_updates", row_updates),
        recip_ops: c("cnt_recip_ops", recip_ops),
        norm_ops: c("cnt_norm_ops", norm_ops),
        land_read_bits: c("cnt_land_read_bits", land),
        read_beats: since_go(m, "read_beats_base", i.dma_read_beats, i.clear),
        write_beats: since_go(m, "write_beats_base", i.dma_write_beats, i.clear),
        glb_read_bits,
        glb_write_bits,
        glb_conflict_stalls,
        kv_spill_bits,
        rescales,
        rescales_avoided,
        noc_flits,
        noc_hop_bits,
        noc_fifo_writes,
        noc_fifo_reads,
        noc_stalls,
        noc_src_reads,
    };
    assert_eq!(
        out.named()
            .iter()
            .map(|(n, _)| n.as_str())
            .collect::<Vec<_>>(),
        super::COUNTERS
    );
    let glb_bank = match (&i.glb, &i.glb_bank) {
        (Some(e), Some(sel)) => Some(bank_window(m, e, sel, clear)),
        _ => None,
    };
    CountOut {
        counters: out,
        glb_bank,
    }
}
