//! The core's port groups: the problem descriptor, the PE step bus, the DMA channel commands
//! and statuses, and the interfaces between the core's modules (sequencer, fetch, readout,
//! counter file, checker).

use super::{CoreParams, COUNTER_BITS};
use crate::array::pe_row::RowOut;
use crate::mem::glb::{GlbBankCounts, GlbBankSel};
use crate::{addr_bits, group, interface};

interface! {
    /// The problem `start` presents (latched for the run): byte addresses of Q, K, V and O,
    /// heads, sequence lengths, causal masking, FP32 output, the softmax constant; each
    /// tensor's row and head strides in bytes (so (B, S, H, D) and (B, H, S, D) tensors are
    /// read in place), and the Q heads per K/V head (`kv_group`, grouped-query attention; 0
    /// or 1: one K/V head per Q head).
    pub struct Problem {
        q_addr, k_addr, v_addr, o_addr, heads, q_len, k_len, causal, out_f32, c_const,
        q_row_stride, q_head_stride, k_row_stride, k_head_stride, v_row_stride, v_head_stride,
        o_row_stride, o_head_stride, kv_group
    }
}

impl Problem<u32> {
    pub fn widths(p: &CoreParams) -> Self {
        let (a, i) = (p.addr_bits, p.index_bits);
        Problem {
            q_addr: a,
            k_addr: a,
            v_addr: a,
            o_addr: a,
            heads: i,
            q_len: i,
            k_len: i,
            causal: 1,
            out_f32: 1,
            c_const: p.row.elem_bits().1,
            q_row_stride: a,
            q_head_stride: a,
            k_row_stride: a,
            k_head_stride: a,
            v_row_stride: a,
            v_head_stride: a,
            o_row_stride: a,
            o_head_stride: a,
            kv_group: i,
        }
    }
}

pub use crate::array::pe_row::{PRead, PeStep};

interface! {
    /// The sequencer's loop counters: phase (QK, PV) and the indices k (dimension), ii (query
    /// row), jj (key within a PE), jk (key within the block), q (output column within a PE).
    pub struct Step { qk, pv, k, ii, jj, jk, q }
}

impl Step<u32> {
    pub fn widths(p: &CoreParams) -> Self {
        let r = &p.row;
        Step {
            qk: 1,
            pv: 1,
            k: addr_bits(p.d()),
            ii: addr_bits(r.a),
            jj: addr_bits(r.b),
            jk: addr_bits(p.bc()),
            q: addr_bits(r.e),
        }
    }
}

interface! {
    /// Why the array is not stepping (for the stall counters): waiting for a phase, which one
    /// the sequencer wants, whether a PV has a block to do and its softmax is done, whether
    /// the PE registers are free for a QK (buf2d: S copied out) and the P bank for a PV (a
    /// single-port P bank: no softmax running).
    pub struct Stall { waiting, want_qk, want_pv, pv_more, sm_ahead, s_free, p_free }
}

impl Stall<u32> {
    pub fn widths() -> Self {
        Stall {
            waiting: 1,
            want_qk: 1,
            want_pv: 1,
            pv_more: 1,
            sm_ahead: 1,
            s_free: 1,
            p_free: 1,
        }
    }
}

pub use crate::mem::dma::{AxiIn, AxiOut, MemIn, MemReq, ReadCmd, ReadDesc, WriteDesc};

interface! {
    /// What the fetch unit needs of a read channel: descriptor busy, error code, a block
    /// landed (ready) in landing slot `slot`, its read data.
    pub struct ReadStatus { busy, error, ready, slot, rd_data }
}

impl ReadStatus<u32> {
    pub fn widths(rd_data: u32) -> Self {
        ReadStatus {
            busy: 1,
            error: crate::mem::dma::error::BITS,
            ready: 1,
            slot: 1,
            rd_data,
        }
    }
}

interface! {
    /// What the PE row's engine reports each cycle for the counters: MACs performed,
    /// register-file reads and writes, P-bank read and write, S-array read and write (buf2d),
    /// link bits, and the row engine's operations (max compare, exp element, reciprocal,
    /// normalizing multiply, a rescale performed or spared).
    pub struct RowActivity {
        macs, rf_reads, rf_writes, p_read, p_write, s_read, s_write, vlink, vlink_s, max_op,
        exp_op, row_update, recip_op, norm_op, rescale, rescale_avoided
    }
}

impl RowActivity<u32> {
    pub fn widths(p: &CoreParams) -> Self {
        RowActivity::from(&p.row.output_widths())
    }
}

impl<T: Copy> From<&RowOut<T>> for RowActivity<T> {
    /// The activity part of a PE row's outputs.
    fn from(o: &RowOut<T>) -> Self {
        RowActivity {
            macs: o.macs,
            rf_reads: o.rf_reads,
            rf_writes: o.rf_writes,
            p_read: o.p_read,
            p_write: o.p_write,
            s_read: o.s_read,
            s_write: o.s_write,
            vlink: o.vlink,
            vlink_s: o.vlink_s,
            max_op: o.max_op,
            exp_op: o.exp_op,
            row_update: o.row_update,
            recip_op: o.recip_op,
            norm_op: o.norm_op,
            rescale: o.rescale,
            rescale_avoided: o.rescale_avoided,
        }
    }
}

interface! {
    /// The core's performance counters (see the module docs for their meaning).
    pub struct Counters {
        cycles, mac_cycles, macs, masked_macs, stall_kv, stall_q, stall_softmax, stall_other,
        qk_cycles, pv_cycles, blocks, skipped_blocks, rf_reads, rf_writes, p_buf_reads,
        p_buf_writes, s_buf_reads, s_buf_writes, vlink_bits, vlink_s_bits, bcast_bit_hops,
        max_ops, exp_ops, row_updates, recip_ops, norm_ops, land_read_bits, read_beats,
        write_beats, glb_read_bits, glb_write_bits, glb_conflict_stalls, kv_spill_bits,
        rescales, rescales_avoided, noc_flits, noc_hop_bits, noc_fifo_writes, noc_fifo_reads,
        noc_stalls, noc_src_reads
    }
}

impl Counters<u32> {
    pub fn widths() -> Self {
        let w = COUNTER_BITS;
        Counters {
            cycles: w,
            mac_cycles: w,
            macs: w,
            masked_macs: w,
            stall_kv: w,
            stall_q: w,
            stall_softmax: w,
            stall_other: w,
            qk_cycles: w,
            pv_cycles: w,
            blocks: w,
            skipped_blocks: w,
            rf_reads: w,
            rf_writes: w,
            p_buf_reads: w,
            p_buf_writes: w,
            s_buf_reads: w,
            s_buf_writes: w,
            vlink_bits: w,
            vlink_s_bits: w,
            bcast_bit_hops: w,
            max_ops: w,
            exp_ops: w,
            row_updates: w,
            recip_ops: w,
            norm_ops: w,
            land_read_bits: w,
            read_beats: w,
            write_beats: w,
            glb_read_bits: w,
            glb_write_bits: w,
            glb_conflict_stalls: w,
            kv_spill_bits: w,
            rescales: w,
            rescales_avoided: w,
            noc_flits: w,
            noc_hop_bits: w,
            noc_fifo_writes: w,
            noc_fifo_reads: w,
            noc_stalls: w,
            noc_src_reads: w,
        }
    }
}

interface! {
    /// unfused: the scratch region's base address (`s_addr`), where S and P go between the
    /// passes of a tile (Br × k_len rounded up to Bc, FP32).
    pub struct Scratch { addr }
}

interface! {
    /// unfused: what the sequencer needs of the scratch channel: a block landed, busy.
    pub struct ScratchStatus { ready, busy }
}

interface! {
    /// noc2d: a block's P has landed in the PV array's P banks (its last word, this cycle).
    pub struct NocStatus { arrived }
}

group! {
    /// The sequencer's inputs (unfused: the scratch base and channel; noc2d: P's arrivals).
    pub struct SeqIn<T> {
        start, rows_busy, s_free, ro_idle, q_ready, k_ready, v_ready, k_next, v_next, o_busy;
        problem: Problem<T>,
        s: Option<Scratch<T>>,
        x: Option<ScratchStatus<T>>,
        noc: Option<NocStatus<T>>,
    }
}

interface! {
    /// A block's first key as a causal-mask generator takes it: where it stands (`now`), and
    /// where it may move this cycle (`alt0` when `take0`, `alt1` when `take1`, never both), the
    /// keys computed from registers alone, not from this cycle's choice, so the mask's
    /// differences run beside the phase choice (`take*`).
    pub struct KeyMove { now, alt0, take0, alt1, take1 }
}

group! {
    /// What the causal-mask generators take: the tile's first query row, the sequence lengths
    /// and causal as they are (registers, which move cycles before a tile's first phase), and
    /// the first keys of the QK phase's block, the PV phase's block and the block whose
    /// softmax runs as they will be after this cycle (the generators register their
    /// differences, so their masks follow the blocks in the cycle the blocks move).
    pub struct MaskNext<T> {
        q_base, q_len, k_len, causal;
        qk: KeyMove<T>,
        pv: KeyMove<T>,
        sm: KeyMove<T>,
    }
}

group! {
    /// The sequencer's outputs: the run (go, busy, done), the latched problem, the step bus and
    /// loop counters, the phase events, the softmax trigger, the tile being computed, and what
    /// the fetch unit, the readout and the counters need of it.
    pub struct SeqOut<T> {
        go, busy, done, start_qk, start_pv, qk_last_step, pv_last_step, sm_go, sm_first,
        sm_slot, sm_second, sm_blk, blk, q_base, nblk, go_once, empty_tile, handoff, rows_valid,
        o_head_off, o_row_bytes, skipped, qk_issued, pv_issued, reach_off;
        latched: Problem<T>,
        mask: MaskNext<T>,
        pe: PeStep<T>,
        pe_pv: PeStep<T>,
        p_rd: PRead<T>,
        step: Step<T>,
        stall: Stall<T>,
        x: Option<ReadDesc<T>>,
        wr: Option<WriteDesc<T>>,
        pass: Option<ScratchPass<T>>,
    }
}

interface! {
    /// unfused: the tile is in its PV pass (the scratch channel reads P): V blocks are due.
    pub struct ScratchPass { pv }
}

group! {
    /// The core's (and its engine's) inputs: `start`, `abort_req` (stop the running problem; the
    /// engine's is unused), `keep_counters` (a start adds to the counters instead of clearing
    /// them: the next sequence of a varlen batch), the memory port's inputs (`mem_*` or
    /// `m_axi_*`, by `mem_if`), the problem (ports `q_addr`, … `c_const`), and with a GLB the
    /// per-bank counter window's select (`glb_bank_sel`).
    pub struct CoreIn<T> {
        start, abort_req, keep_counters;
        mem: Option<MemIn<T>>,
        m_axi: Option<AxiIn<T>>,
        problem => Problem<T>,
        s: Option<Scratch<T>>,
        glb_bank: Option<GlbBankSel<T>>,
        link: Option<LinkReq<T>>,
    }
}

pub use crate::link::{LinkReq, LinkState};

impl CoreIn<u32> {
    pub fn widths(p: &CoreParams) -> Self {
        let (mem, m_axi) = p.dma.mem_inputs();
        CoreIn {
            start: 1,
            abort_req: 1,
            keep_counters: 1,
            mem,
            m_axi,
            problem: Problem::widths(p),
            s: p.row.scratch().then_some(Scratch { addr: p.addr_bits }),
            glb_bank: p.dma.glb.map(|g| GlbBankSel::widths(&g)),
            link: p.links().then(LinkReq::widths),
        }
    }
}

group! {
    /// The core's outputs: `busy`, `done`, `error` (a DMA channel's error code), the memory
    /// port's outputs (`mem_req_*` or `m_axi_*`), the counters (ports `cycles`, …
    /// `kv_spill_bits`), and with a GLB the per-bank counter window (`glb_bank_reads`,
    /// `glb_bank_writes`).
    pub struct CoreOut<T> {
        busy, done, error;
        mem_req: Option<MemReq<T>>,
        m_axi: Option<AxiOut<T>>,
        counters => Counters<T>,
        glb_bank: Option<GlbBankCounts<T>>,
        link: Option<LinkState<T>>,
    }
}

group! {
    /// The engine's inputs (inside the core's abort wrapper): `hold` (start no new memory
    /// request or burst) and the core's.
    pub struct EngineIn<T> {
        hold;
        core => CoreIn<T>,
    }
}

group! {
    /// The engine's outputs: `quiet` (nothing in flight on the memory port) and the core's.
    pub struct EngineOut<T> {
        quiet;
        core => CoreOut<T>,
    }
}

impl CoreOut<u32> {
    pub fn widths(p: &CoreParams) -> Self {
        let (mem_req, m_axi) = p.dma.mem_outputs();
        CoreOut {
            busy: 1,
            done: 1,
            error: crate::mem::dma::error::BITS,
            mem_req,
            m_axi,
            counters: Counters::widths(),
            glb_bank: p.dma.glb.map(|_| GlbBankCounts::widths(COUNTER_BITS)),
            link: p.links().then(|| LinkState::widths(p.link_count_bits())),
        }
    }
}
