//! The PE row's ports: the step bus, the softmax and readout controls, the P read, the O
//! staging write, and their widths.

use super::config::PeRowConfig;
use crate::{bits_for, group, interface};

interface! {
    /// The MAC step every PE row executes this cycle (`step_*`): valid, PV (else QK), the PE
    /// operation, the register address, the loop indices (query row ii, key jj within a PE, key
    /// j within the block), the last step of a query row, the block slot.
    pub struct PeStep { valid, pv, op, addr, ii, jj, j, last, slot }
}

interface! {
    /// The softmax of a block (`sm_*`): start, the tile's first block, the block's parity (its
    /// S slot, P slot and shift), and in rowfused the pass (`second`: the exp pass over S
    /// already in the array; else the copy and the max sweep) and the block's place in the S
    /// array (`blk`; both unused, and 0, in the other designs; with `spill` its top bit says
    /// the block is past the array).
    pub struct SmCtl { start, first, slot, second, blk }
}

interface! {
    /// The readout of a tile (`ro_*`): start, and a tile with no block (outputs zeros).
    pub struct RoCtl { start, zero }
}

interface! {
    /// A write into the row's O staging bank (`st_*`): enable, query row, beat, data.
    pub struct RowStore { we, row, beat, data }
}

interface! {
    /// The P read for the next cycle's PV step (`p_rd_*`, from the sequencer one cycle ahead,
    /// as the P bank's registered read needs): read (the next step is a PV step with output
    /// column 0), block slot, query row, key.
    pub struct PRead { re, slot, ii, j }
}

interface! {
    /// unfused: the row's bank of the scratch channel's landing buffer (`x_data`: the beat at
    /// the buffer's shared read address).
    pub struct RowScratch { data }
}

interface! {
    /// unfused: where the row's exp sweep reads S (`x_rd_*`: query row, key of the block); the
    /// core drives the landing buffer's shared read address from row 0's (the rows sweep in
    /// lockstep).
    pub struct ScratchRead { ii, j }
}

interface! {
    /// noc2d: a write of a weight into a P bank (`we`, `addr`, `data`): leaving the row's exp
    /// sweep for the NoC (`p_out`), or landing from it in the row's bank (`p_in`).
    pub struct PWrite { we, addr, data }
}

interface! {
    /// rowfused with `spill`: the exp sweep reads a score of a spilled block from the scratch
    /// landing buffer this cycle (counted as landing-buffer reads).
    pub struct SpillRead { read }
}

group! {
    /// The row's inputs: its Q operand, the column bus (K or V), the V column bus, the causal
    /// masks of the QK phase's block, of the PV phase's block and of the softmax's block, the
    /// start of a PV block, the softmax constant, FP32 output; the step bus, the PV step bus,
    /// the P read, the softmax and the readout controls. In 2-D designs one phase runs at a
    /// time: `b_col`, `mask_qk` and `step` serve both, and `v_col`, `mask_pv` and `step_pv` are
    /// not read (interleaved, `mask_pv` is the PV steps' mask); in reg3d the QK tier takes the
    /// first, the PV tier the second.
    pub struct RowIn<T> {
        a_q, b_col, v_col, mask_qk, mask_pv, mask_sp, pv_block_start, c_const, out_f32;
        step: PeStep<T>,
        step_pv: PeStep<T>,
        p_rd: PRead<T>,
        sm: SmCtl<T>,
        ro: RoCtl<T>,
        x: Option<RowScratch<T>>,
        tsv: Option<RowTsv<T>>,
        link: Option<RowProbe<T>>,
        p_in: Option<PWrite<T>>,
    }
}

interface! {
    /// A row with spare lanes: the lane whose test result its bundles show (`link_probe`; see
    /// `crate::link::PROBE`).
    pub struct RowProbe { probe }
}

interface! {
    /// A row built for fault injection with spare lanes: the TSV faults on its vertical links
    /// (`tsv_lane_fault`, see `crate::link`).
    pub struct RowTsv { lane_fault }
}

group! {
    /// The row's outputs: busy (the engine runs), S copied out of the PE registers (buf2d: the
    /// registers are free for the next block's QK), this cycle's MACs, register-file reads and
    /// writes, P-bank and S-array reads and writes, bits over the vertical links (reg3d: P up,
    /// O down to the readout, and in three tiers S up) and over the S links alone (for the
    /// counters), the engine's operations this cycle (a max-sweep compare, an exp-sweep
    /// element: scale, subtract, exp2, sum; a row's state update after a block, with its
    /// reduction tree; a reciprocal started; a normalizing multiply), a row's state update
    /// that rescales O and l and one a lazy threshold spared, and the O staging write.
    pub struct RowOut<T> {
        busy, s_free, macs, rf_reads, rf_writes, p_read, p_write, s_read, s_write, vlink,
        vlink_s, max_op, exp_op, row_update, recip_op, norm_op, rescale, rescale_avoided;
        st: RowStore<T>,
        x_rd: Option<ScratchRead<T>>,
        spill: Option<SpillRead<T>>,
        link: Option<crate::link::LinkStatus<T>>,
        p_out: Option<PWrite<T>>,
    }
}

impl PeRowConfig {
    /// The step bus's widths.
    pub fn step_widths(&self) -> PeStep<u32> {
        PeStep {
            valid: 1,
            pv: 1,
            op: self.pe.op_bits(),
            addr: self.pe.addr_width(),
            ii: self.ii_bits(),
            jj: self.jj_bits(),
            j: self.j_bits(),
            last: 1,
            slot: 1,
        }
    }

    pub(super) fn input_widths(&self) -> RowIn<u32> {
        RowIn {
            a_q: self.elem_bits().0,
            b_col: self.elem_bits().0 * self.cols,
            v_col: self.elem_bits().0 * self.cols,
            mask_qk: self.a * self.bc(),
            mask_pv: self.a * self.bc(),
            mask_sp: self.a * self.bc(),
            pv_block_start: 1,
            c_const: self.elem_bits().1,
            out_f32: 1,
            step: self.step_widths(),
            step_pv: self.step_widths(),
            p_rd: self.p_read_widths(),
            sm: SmCtl {
                start: 1,
                first: 1,
                slot: 1,
                second: 1,
                blk: self.sm_blk_width(),
            },
            ro: RoCtl { start: 1, zero: 1 },
            x: self.scratch().then_some(RowScratch {
                data: self.mem_width,
            }),
            tsv: (self.faults && self.spares().is_some()).then(|| RowTsv {
                lane_fault: crate::link::lane_fault_bits(),
            }),
            link: self.spares().map(|_| RowProbe {
                probe: crate::link::LANE_BITS,
            }),
            p_in: self.noc().map(|_| self.p_write_widths()),
        }
    }

    /// The widths of a write into the row's P bank (its address over the banks, and its word):
    /// the bank's own write port, and noc2d's P writes.
    pub fn p_write_widths(&self) -> PWrite<u32> {
        let bank = self.p_array();
        PWrite {
            we: 1,
            addr: bank.addr_width() + self.banks().trailing_zeros(),
            data: bank.width,
        }
    }

    /// The P read bus's widths.
    pub fn p_read_widths(&self) -> PRead<u32> {
        PRead {
            re: 1,
            slot: 1,
            ii: self.ii_bits(),
            j: self.j_bits(),
        }
    }

    /// The outputs' widths.
    pub fn output_widths(&self) -> RowOut<u32> {
        let c = (self.cols * self.rf_tiers()) as u64;
        RowOut {
            busy: 1,
            s_free: 1,
            macs: bits_for((self.cols * self.mac_tiers() * self.macs_per_pe()) as u64),
            rf_reads: bits_for(c + 1),
            rf_writes: bits_for(c + 1),
            p_read: 1,
            p_write: 1,
            s_read: 1,
            s_write: 1,
            vlink: self.vlink_width(),
            vlink_s: self.vlink_width(),
            max_op: 1,
            exp_op: 1,
            row_update: 1,
            recip_op: 1,
            norm_op: 1,
            rescale: 1,
            rescale_avoided: 1,
            st: RowStore {
                we: 1,
                row: self.ii_bits(),
                beat: self.beat_bits(),
                data: self.mem_width,
            },
            x_rd: self.scratch().then(|| ScratchRead {
                ii: self.ii_bits(),
                j: self.j_bits(),
            }),
            spill: self.spills().then_some(SpillRead { read: 1 }),
            link: self.spares().map(|_| crate::link::LinkStatus {
                bad: 1,
                failed: self.link_count_bits(),
                probed: 1,
            }),
            p_out: self.noc().map(|_| self.p_write_widths()),
        }
    }
}
