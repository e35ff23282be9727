//! `pe_row`: one row of the PE array (C PEs) with its row engine: the online softmax and the
//! output normalization of the row's a query rows (bit-exact model: `kernels::flash`).
//!
//! **Mapping.** PE c of the row owns, for each of the a query rows, the b keys
//! b·c .. b·c + b − 1 of the current block (S registers, double-buffered: slot, ii, jj at
//! `slot·a·b + ii·b + jj`; one block in buf2d) and the e output columns e·c .. e·c + e − 1 (O
//! registers after S: `s_slots·a·b + ii·e + q`).
//!
//! **MAC steps** (from the core's sequencer, one per cycle, `step_*` inputs): a QK step
//! (query row ii, key jj of every PE, dimension k) multiplies the row operand `a_q` (Q) by the
//! column operands `b_col` (K) into S, each PE masked by `mask_qk`; a PV step (query row ii,
//! key j, output column q) multiplies P[ii][j] from the row's P buffer by `b_col` (V) into O,
//! masked by `mask_qk` (which follows the running phase's block).
//! A PV step's operation is the row's own: NOP if masked, MAC_ZERO on the row's first product
//! of the tile (O starts at +0), MAC_SCALE on its first product of a block (the block's
//! rescale), MAC otherwise. Skipping the rescale of a row with no product in a block is exact
//! (scaling +0, or by 2^0, changes nothing).
//!
//! **Softmax** (`sm_start`, block in S slot `sm_slot`, mask `mask_sp`): per query row, a max
//! sweep over the row's Bc scores (masked: −Inf) updates m and the shift (`softmax_row`); an
//! exp sweep computes p = FP16(exp2(s·C − m)) into the P buffer, sums each PE's b weights in
//! order and the C PE sums through `row_reduce`; l is updated. `sm_first` (the tile's first
//! block) resets the row state first. About a · (2·Bc + pipeline depths) cycles. P and each
//! row's shift are kept per block parity (`sm_slot` when written, `step_slot` when a PV step
//! reads them), so the softmax of block j may overlap the PV steps of block j − 1 (not with a
//! single-port P bank: the sequencer then lets them take turns).
//!
//! **buf2d** (`buffer`): the softmax first copies the row's S from the PE registers into the
//! bank's S array (`S_COPY`, a·Bc cycles, then `s_free`), and the sweeps read S from there, a
//! cycle later (registered read; `S_MAX_WAIT` waits for a max sweep's last score): about
//! a · (3·Bc + pipeline depths + 1) cycles. P goes to the bank's P array. The P bank is read
//! the same way in both variants: `p_rd` from the sequencer a cycle ahead of the PV step.
//!
//! **reg3d** (`tiered`): two tiers of C PEs. The QK tier (`qk_pe*`) steps on `step` with K on
//! `b_col` and holds S, which the engine's sweeps read; the PV tier (`pv_pe*`) steps on
//! `step_pv` with V on `v_col` and P from the P bank, masked by `mask_pv`, and holds O, which
//! the readout reads. The exp sweep's P writes reach the P bank through `vlink_latency`
//! register stages (the vertical link), which the drain wait covers. Each tier's PE has the
//! register file of the 2-D PE (iso-PE per tier; the QK tier uses its S part, the PV tier its O
//! part). With three tiers (`softmax_tier`) the engine sits on a tier of its own between them,
//! with two blocks of S registers above each QK PE (`s_tier*`): each score goes up its PE's S
//! link (the PE's read port, `vlink_latency` stages) in the cycle its last product lands, and
//! the sweeps read it there; the QK PEs hold one block (`s_tier`). With narrow S links
//! (`vlink_bits` < 32, `s_walk`) the QK PEs hold two blocks, and the S tier's serializer
//! walks each finished block up (32/`vlink_bits` cycles per score), then raises `s_free`: the
//! sequencer counts the block's QK drained then, not a fixed latency after its last step.
//!
//! **Readout** (`ro_start`): per query row, r = 1/l (`fp32_recip`, or 1 if l = 0: no visible
//! key, O is +0), then each O value times r, in FP32 or rounded to FP16 (`out_f32`), packed into
//! beats for the row's O staging bank (`st_*`). `ro_zero` outputs zeros (a tile with no block).

use anyhow::Result;

use crate::fault::Fault;
use crate::fp32_add::{self, Fp32AddConfig};
use crate::fp32_mul::{self, Fp32MulConfig};
use crate::fp32_recip;
use crate::fp32_recip::{RecipIn, RecipOut};
use crate::fsm::Fsm;
use crate::ieee;
use crate::iface::Block;
use crate::pe::{PeConfig, OP_BITS};
use crate::pe_tier::{self, STierBlock, STierIn, TierBlock, TierIn, TierKind, TierOut};
use crate::ports::{Binary, BinaryBlock, X};
use crate::row_reduce::Reduce;
use crate::row_reduce::{self, RowReduceConfig};
use crate::softmax::{self, RowOp, SoftmaxExpConfig};
use crate::softmax::{ExpIn, ExpOut, RowOpIn, RowState};
use crate::sram::{self, SramBlock, SramIn};
use crate::{
    addr_bits, and_all, bits_for, cat, group, interface, mux, mux_index, or_all, Design,
    ModuleBuilder, RegHandle, Sig,
};

/// Configuration of a PE row.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PeRowConfig {
    /// PEs in the row (C).
    pub cols: u32,
    /// Query rows per PE row (Br / R).
    pub a: u32,
    /// Keys per PE and block (Bc / C).
    pub b: u32,
    /// Output columns per PE (d / C).
    pub e: u32,
    pub pe: PeConfig,
    pub exp: SoftmaxExpConfig,
    /// Width of an O staging beat.
    pub mem_width: u32,
    /// Built for fault injection (`Fault::WrongRescale` and `Fault::SharedSTierSlot` act
    /// here, selected at run time; see `fault.rs`).
    pub faults: bool,
    /// buf2d: S and P in the row's SRAM bank (None: reg2d, S in the PE registers).
    pub buffer: Option<RowBuffer>,
    /// reg3d: the row's PEs on two tiers (QK below with the row engine, PV above), each on
    /// its own step bus; P reaches the PV tier's P bank over a vertical link.
    pub tiered: Option<RowTiers>,
}

/// The row's tiers in reg3d.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RowTiers {
    /// Register stages of each vertical link (P up, and in three tiers S up) (cycles).
    pub vlink_latency: u32,
    /// Three tiers: the row engine on a tier of its own between QK and PV, with the S
    /// registers the sweeps read; each QK PE sends its scores up over its own link.
    pub softmax_tier: bool,
    /// Wires of each S link (three tiers; 32: a score a cycle as it lands, fewer: a
    /// serializer sends each finished block at 32/vlink_bits cycles per score).
    pub vlink_bits: u32,
}

/// The row's SRAM bank in the buffered (buf2d) design: an S array (one block of the row's a × Bc
/// FP32 scores, single-port: only the engine uses it, one sweep at a time) and a P array (two
/// blocks of FP16 weights: the exp sweep writes, PV steps read).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RowBuffer {
    /// Ports of the P array: 2 (one read, one write) or 1 (shared).
    pub ports: u32,
    /// Emit the arrays as memory-macro blackboxes.
    pub blackbox: bool,
    /// Scores per S word and weights per P word (powers of two dividing Bc; 1: one element
    /// per word). The copy and the exp sweep gather a word and write it once; the sweeps and
    /// the PV steps read a word once and take its elements in turn.
    pub s_per_word: u32,
    pub p_per_word: u32,
    /// SRAM banks of each array (a power of two), interleaved on the word address's low bits.
    pub banks: u32,
}

impl PeRowConfig {
    pub fn validate(&self) -> Result<()> {
        if let Some(b) = self.buffer {
            for (what, per) in [
                ("scores per S word", b.s_per_word),
                ("weights per P word", b.p_per_word),
            ] {
                anyhow::ensure!(
                    per.is_power_of_two() && self.bc().is_multiple_of(per),
                    "{per} {what} must be a power of two dividing Bc = {}",
                    self.bc()
                );
            }
        }
        self.pe.validate()?;
        self.exp.validate()
    }

    /// S blocks the PE registers hold: two (the softmax of one block reads its S while the
    /// next block's QK writes the other), or one when S moves on after its QK: to the buffer
    /// (buf2d), or up to the softmax tier (reg3d, three tiers).
    pub fn s_slots(&self) -> u32 {
        if self.buffer.is_some() || (self.softmax_tier() && !self.s_walk()) {
            1
        } else {
            2
        }
    }

    /// Three tiers: the row engine and its S registers on a tier of their own.
    pub fn softmax_tier(&self) -> bool {
        self.tiered.is_some_and(|t| t.softmax_tier)
    }

    /// Three tiers with narrow S links: the QK PEs keep two S blocks, and a serializer walks
    /// each finished block up the links (`s_beats` cycles per score), then says so (`s_free`).
    pub fn s_walk(&self) -> bool {
        self.tiered
            .is_some_and(|t| t.softmax_tier && t.vlink_bits < 32)
    }

    /// Cycles an S link takes per score (32 / `vlink_bits`; 1 without a softmax tier).
    pub fn s_beats(&self) -> u32 {
        match self.tiered {
            Some(t) if t.softmax_tier => 32 / t.vlink_bits,
            _ => 1,
        }
    }

    /// The softmax tier's S registers above each QK PE (three tiers): two blocks of the PE's
    /// a × b FP32 scores, at (slot, ii, jj).
    pub fn s_tier_depth(&self) -> u32 {
        2 << (self.ii_bits() + self.jj_bits())
    }

    /// Cycles from a QK phase's last step until the sweeps may read its S: the PE latency,
    /// plus the S link's stages in three tiers.
    pub fn s_ready_latency(&self) -> u32 {
        self.pe.latency()
            + match self.tiered {
                Some(t) if t.softmax_tier => t.vlink_latency,
                _ => 0,
            }
    }

    /// Cycles the engine waits after an exp sweep's last element (`S_EXP_DRAIN` holds one more):
    /// the S array's registered read (buf2d), the exp pipeline, the last local sum, the
    /// reduction tree, and the P link's stages (reg3d).
    pub fn drain_latency(&self) -> u32 {
        self.buffer.is_some() as u32
            + self.exp.latency()
            + RowReduceConfig { cols: self.cols }.levels()
            + 1
            + self.tiered.map_or(0, |t| t.vlink_latency)
    }

    /// Cycles the engine is busy with one block's softmax (from the cycle after its start):
    /// in buf2d the copy of S (a·Bc), on a tile's first block `S_INIT`, then per query row the
    /// max sweep (Bc), `S_MAX_WAIT` (buf2d), the max update, the exp sweep (Bc), the drain
    /// and the sum update. The cycle model (`regflash::cycles`) runs the engine on this.
    pub fn softmax_cycles(&self, first: bool) -> u32 {
        let buffered = self.buffer.is_some() as u32;
        let bc = self.bc();
        buffered * self.a * bc
            + first as u32
            + self.a * (2 * bc + buffered + 3 + self.drain_latency())
    }

    /// Cycles the engine is busy with a tile's readout: per query row the reciprocal's start,
    /// its wait (`fp32_recip::LATENCY`) and the sweep over the row's d outputs.
    pub fn readout_cycles(&self) -> u32 {
        self.a * (1 + crate::fp32_recip::LATENCY + self.cols * self.e)
    }

    /// One bank of the row's S array: a × Bc FP32 scores at (ii, j), `s_per_word` to a word,
    /// in `banks` banks, single-port.
    pub fn s_array(&self) -> Option<crate::sram::SramConfig> {
        self.buffer.map(|b| crate::sram::SramConfig {
            depth: (1 << (self.ii_bits() + self.word_bits(b.s_per_word))) / b.banks,
            width: 32 * b.s_per_word,
            ports: 1,
            blackbox: b.blackbox,
        })
    }

    /// The row's P bank: two blocks of a × Bc FP16 weights at (slot, ii, j); one read and one
    /// write port, or in buf2d one bank of the buffer's P array, with its configured ports,
    /// words of `p_per_word` weights and `banks` banks.
    pub fn p_array(&self) -> crate::sram::SramConfig {
        let per = self.p_per_word();
        crate::sram::SramConfig {
            depth: (2 << (self.ii_bits() + self.word_bits(per))) / self.banks(),
            width: 16 * per,
            ports: self.buffer.map_or(2, |b| b.ports),
            blackbox: self.buffer.is_some_and(|b| b.blackbox),
        }
    }

    /// Bits of an S-array access and of a P-bank access (32 and 16, or buf2d's wide words).
    pub fn access_bits(&self) -> (u32, u32) {
        let s_per = self.buffer.map_or(1, |b| b.s_per_word);
        (32 * s_per, 16 * self.p_per_word())
    }

    /// SRAM banks of each array (1 but in buf2d with `buf_banks`).
    pub fn banks(&self) -> u32 {
        self.buffer.map_or(1, |b| b.banks)
    }

    /// Weights per P word (1 but in buf2d with wide words).
    pub fn p_per_word(&self) -> u32 {
        self.buffer.map_or(1, |b| b.p_per_word)
    }

    /// Bits of a word's index within a query row's Bc keys, `per` keys to a word (none when
    /// a word holds the row's whole block; one key a word keeps the key's `j_bits`).
    pub fn word_bits(&self, per: u32) -> u32 {
        if per > 1 && self.bc() == per {
            0
        } else {
            addr_bits(self.bc() / per)
        }
    }

    pub fn bc(&self) -> u32 {
        self.cols * self.b
    }

    pub fn d(&self) -> u32 {
        self.cols * self.e
    }

    /// Register of S (slot, ii, jj); the slot is ignored when the registers hold one block.
    pub fn s_addr(&self, slot: u32, ii: u32, jj: u32) -> u32 {
        (slot % self.s_slots()) * self.a * self.b + ii * self.b + jj
    }

    /// Register of O (ii, q).
    pub fn o_addr(&self, ii: u32, q: u32) -> u32 {
        self.s_slots() * self.a * self.b + ii * self.e + q
    }

    /// `s_addr` in hardware: the register of S (slot, ii, jj), `width` bits.
    pub fn s_addr_rtl(
        &self,
        m: &mut ModuleBuilder,
        slot: Sig,
        ii: Sig,
        jj: Sig,
        width: u32,
    ) -> Sig {
        let slot_off = if self.s_slots() == 2 {
            let ab = m.lit(width, (self.a * self.b) as u64);
            slot.mul_lo(ab, width)
        } else {
            m.zero(width)
        };
        let b = m.lit(width, self.b as u64);
        let ii_off = ii.mul_lo(b, width);
        let jj = jj.zext(width);
        let x = slot_off + ii_off;
        x + jj
    }

    /// `o_addr` in hardware: the register of O (ii, q), `width` bits.
    pub fn o_addr_rtl(&self, m: &mut ModuleBuilder, ii: Sig, q: Sig, width: u32) -> Sig {
        let e = m.lit(width, self.e as u64);
        let off = ii.mul_lo(e, width);
        let q = q.zext(width);
        let base = m.lit(width, (self.s_slots() * self.a * self.b) as u64);
        let x = base + off;
        x + q
    }

    /// Tiers of the stack (1; 2 or 3 in reg3d).
    pub fn tiers(&self) -> u32 {
        match self.tiered {
            None => 1,
            Some(t) => 2 + t.softmax_tier as u32,
        }
    }

    /// Tiers of PEs (MAC resources): 1, or 2 in reg3d (the softmax tier has none).
    pub fn mac_tiers(&self) -> u32 {
        1 + self.tiered.is_some() as u32
    }

    /// Width of a row's per-cycle vertical-link bit count: a weight up (16) and an O value
    /// down (32), and in three tiers a score up from every PE (32 · C).
    pub fn vlink_width(&self) -> u32 {
        bits_for(48 + 32 * self.cols as u64 * self.softmax_tier() as u64)
    }

    /// Registers the mapping needs per PE.
    pub fn regs_needed(&self) -> u32 {
        self.s_slots() * self.a * self.b + self.a * self.e
    }

    pub fn ii_bits(&self) -> u32 {
        addr_bits(self.a)
    }

    pub fn jj_bits(&self) -> u32 {
        addr_bits(self.b)
    }

    pub fn j_bits(&self) -> u32 {
        addr_bits(self.bc())
    }

    /// Beats per O row in FP16 (the staging buffer holds FP32 rows: twice as many).
    pub fn beat_bits(&self) -> u32 {
        addr_bits((self.d() * 32).div_ceil(self.mem_width))
    }

    pub fn module_name(&self) -> String {
        format!(
            "pe_row_c{}_a{}_b{}_e{}_w{}_{}_{}",
            self.cols,
            self.a,
            self.b,
            self.e,
            self.mem_width,
            self.pe.params_name(),
            self.exp.module_name()
        ) + &match self.buffer {
            Some(b) => format!("_buf{}{}", b.ports, if b.blackbox { "m" } else { "" }),
            None => String::new(),
        } + &match self.tiered {
            Some(t) => {
                format!("_t{}l{}", self.tiers(), t.vlink_latency)
                    + &if self.s_walk() {
                        format!("v{}", t.vlink_bits)
                    } else {
                        String::new()
                    }
            }
            None => String::new(),
        } + if self.faults { "_faults" } else { "" }
    }
}

/// Counter `v + 1` wrapping at `n` (returns the next value and whether `v` was the last).
pub(crate) fn step_counter(m: &mut ModuleBuilder, v: Sig, n: u32) -> (Sig, Sig) {
    let last = v.eq((n - 1) as u64);
    let inc = v + 1;
    let zero = m.zero(v.width());
    (mux(last, zero, inc), last)
}

crate::states! {
    /// The row engine: softmax of a block (in buf2d first the copy of S from the PE registers
    /// to the S array; then per query row max sweep, max update, exp sweep and drain, sum
    /// update), or the readout of a tile (reciprocal, wait, sweep, per row). `MaxWait` (buf2d)
    /// waits for the S array's last read of a max sweep.
    enum Engine = "S" {
        Idle, SCopy, Init, MaxSweep, MaxWait, MaxUpdate, ExpSweep, ExpDrain, SumUpdate, RoRecip,
        RoWait, RoSweep
    }
}

interface! {
    /// The MAC step every PE row executes this cycle (`step_*`): valid, PV (else QK), the PE
    /// operation, the register address, the loop indices (query row ii, key jj within a PE, key
    /// j within the block), the last step of a query row, the block slot.
    pub struct PeStep { valid, pv, op, addr, ii, jj, j, last, slot }
}

interface! {
    /// The softmax of a block (`sm_*`): start, the tile's first block, the S slot it reads.
    pub struct SmCtl { start, first, slot }
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

group! {
    /// The row's inputs: its Q operand, the column bus (K or V), the V column bus, the causal
    /// masks of the QK phase's block, of the PV phase's block and of the softmax's block, the
    /// start of a PV block, the softmax constant, FP32 output; the step bus, the PV step bus,
    /// the P read, the softmax and the readout controls. In 2-D designs one phase runs at a
    /// time: `b_col`, `mask_qk` and `step` serve both, and `v_col`, `mask_pv` and `step_pv` are
    /// the same signals (not read); in reg3d the QK tier takes the first, the PV tier the second.
    pub struct RowIn<T> {
        a_q, b_col, v_col, mask_qk, mask_pv, mask_sp, pv_block_start, c_const, out_f32;
        step: PeStep<T>,
        step_pv: PeStep<T>,
        p_rd: PRead<T>,
        sm: SmCtl<T>,
        ro: RoCtl<T>,
    }
}

group! {
    /// The row's outputs: busy (the engine runs), S copied out of the PE registers (buf2d: the
    /// registers are free for the next block's QK), this cycle's MACs, register-file reads and
    /// writes, P-bank and S-array reads and writes, bits over the vertical links (reg3d: P up,
    /// O down to the readout, and in three tiers S up) and over the S links alone (for the
    /// counters), the engine's operations this cycle (a max-sweep compare, an exp-sweep
    /// element: scale, subtract, exp2, sum; a row's state update after a block, with its
    /// reduction tree; a reciprocal started; a normalizing multiply), and the O staging write.
    pub struct RowOut<T> {
        busy, s_free, macs, rf_reads, rf_writes, p_read, p_write, s_read, s_write, vlink,
        vlink_s, max_op, exp_op, row_update, recip_op, norm_op;
        st: RowStore<T>,
    }
}

impl PeRowConfig {
    /// The step bus's widths.
    pub fn step_widths(&self) -> PeStep<u32> {
        PeStep {
            valid: 1,
            pv: 1,
            op: OP_BITS,
            addr: self.pe.addr_width(),
            ii: self.ii_bits(),
            jj: self.jj_bits(),
            j: self.j_bits(),
            last: 1,
            slot: 1,
        }
    }

    fn input_widths(&self) -> RowIn<u32> {
        RowIn {
            a_q: 16,
            b_col: 16 * self.cols,
            v_col: 16 * self.cols,
            mask_qk: self.a * self.bc(),
            mask_pv: self.a * self.bc(),
            mask_sp: self.a * self.bc(),
            pv_block_start: 1,
            c_const: 32,
            out_f32: 1,
            step: self.step_widths(),
            step_pv: self.step_widths(),
            p_rd: self.p_read_widths(),
            sm: SmCtl {
                start: 1,
                first: 1,
                slot: 1,
            },
            ro: RoCtl { start: 1, zero: 1 },
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
        let c = (self.cols * self.tiers()) as u64;
        RowOut {
            busy: 1,
            s_free: 1,
            macs: bits_for((self.cols * self.mac_tiers()) as u64),
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
            st: RowStore {
                we: 1,
                row: self.ii_bits(),
                beat: self.beat_bits(),
                data: self.mem_width,
            },
        }
    }
}

/// The PE row's block.
pub type RowBlock = Block<RowIn, RowOut<u32>>;

/// The blocks a row instantiates.
struct Parts {
    /// The PE tiers: the one tier (2-D), or the QK and the PV tier (reg3d).
    tiers: Vec<TierBlock>,
    srow: Block<RowOpIn, RowState<u32>>,
    sexp: Block<ExpIn, ExpOut<u32>>,
    add0: BinaryBlock,
    mul0: BinaryBlock,
    recip: Block<RecipIn, RecipOut<u32>>,
    tree: Block<X, Reduce<u32>>,
    p_bank: SramBlock,
    s_bank: Option<SramBlock>,
    /// Three tiers: the softmax tier's S registers and links.
    s_tier: Option<STierBlock>,
}

/// Defines the PE row.
pub fn build(d: &mut Design, cfg: &PeRowConfig) -> RowBlock {
    let kinds: &[TierKind] = if cfg.tiered.is_some() {
        &[TierKind::Qk, TierKind::Pv]
    } else {
        &[TierKind::Both]
    };
    let parts = Parts {
        tiers: kinds.iter().map(|&k| pe_tier::build(d, cfg, k)).collect(),
        srow: softmax::build_row(d),
        sexp: softmax::build_exp(d, &cfg.exp),
        add0: fp32_add::build(d, &Fp32AddConfig { latency: 0 }),
        mul0: fp32_mul::build(d, &Fp32MulConfig { latency: 0 }),
        recip: fp32_recip::build(d),
        tree: row_reduce::build(d, &RowReduceConfig { cols: cfg.cols }),
        p_bank: sram::build(d, &cfg.p_array()),
        s_bank: cfg.s_array().map(|s| sram::build(d, &s)),
        s_tier: cfg.softmax_tier().then(|| pe_tier::build_s_tier(d, cfg)),
    };
    let cfg = *cfg;
    let inputs = cfg.input_widths();
    d.define_block(
        &cfg.module_name(),
        &inputs,
        cfg.output_widths(),
        |_, m, i| {
            m.doc(&format!(
            "pe_row: {} PEs and the row engine of {} query rows ({} keys and {} output columns\n\
             per PE). See hdl/src/array/pe_row.rs for the mapping, the MAC steps, the softmax and\n\
             the readout.",
            cfg.cols, cfg.a, cfg.b, cfg.e
        ));
            m.set_latency(1);
            row(m, &cfg, &parts, &i)
        },
    )
}

/// The row engine's registers and the sweeps they define.
struct EngineRegs {
    state: Fsm<Engine>,
    ii: RegHandle,
    cc: RegHandle,
    jj: RegHandle,
    qq: RegHandle,
    /// The S slot of the block the softmax works on.
    slot: Sig,
    in_copy: Sig,
    in_max: Sig,
    in_exp: Sig,
    in_ro: Sig,
}

/// The row's softmax units (one per query row), driven by the engine through nets.
struct SoftmaxRows {
    row_op: Sig,
    row_sel: Sig,
    blk_max: Sig,
    blk_sum: Sig,
    cur_m: Sig,
    cur_l: Sig,
    cur_l_zero: Sig,
    /// The rescale shift of the step's query row for the step's block.
    step_shift: Sig,
}

/// The row's PEs and what they report.
struct Pes {
    rd_datas: Vec<Sig>,
    acc_reads: Vec<Sig>,
    rf_writes: Vec<Sig>,
    macs: Sig,
    /// The tier's read data and its PEs' enables (QK steps: not masked) as buses (PE 0
    /// lowest).
    rd_bus: Sig,
    en_bus: Sig,
}

impl Pes {
    /// A tier's outputs, per PE.
    fn of(cfg: &PeRowConfig, t: &TierOut) -> Pes {
        let c_n = cfg.cols;
        let bits = |x: Sig| (0..c_n).map(|c| x.bit(c)).collect::<Vec<Sig>>();
        Pes {
            rd_datas: (0..c_n)
                .map(|c| t.rd_data.slice(32 * c + 31, 32 * c))
                .collect(),
            acc_reads: bits(t.acc_read),
            rf_writes: bits(t.rf_write),
            macs: t.macs,
            rd_bus: t.rd_data,
            en_bus: t.en,
        }
    }

    /// Both tiers' accesses and MACs (the read data stay per tier).
    fn and(mut self, other: Pes) -> Pes {
        self.acc_reads.extend(other.acc_reads);
        self.rf_writes.extend(other.rf_writes);
        let w = bits_for(2 * self.rd_datas.len() as u64);
        self.macs = self.macs.zext(w) + other.macs.zext(w);
        self
    }
}

fn row(m: &mut ModuleBuilder, cfg: &PeRowConfig, parts: &Parts, i: &RowIn) -> RowOut {
    let aw = cfg.pe.addr_width();
    let state = Fsm::new(m, "state", Engine::Idle);
    let e = EngineRegs {
        ii: m.reg("ii", cfg.ii_bits(), Some(0)),
        cc: m.reg("cc", addr_bits(cfg.cols), Some(0)),
        jj: m.reg("jj", cfg.jj_bits(), Some(0)),
        qq: m.reg("qq", addr_bits(cfg.e), Some(0)),
        slot: m.hold("slot", i.sm.slot, i.sm.start),
        in_copy: state.is(Engine::SCopy),
        in_max: state.is(Engine::MaxSweep),
        in_exp: state.is(Engine::ExpSweep),
        in_ro: state.is(Engine::RoSweep),
        state,
    };
    // The engine reads PE registers at one shared address; `cc` picks the PE.
    let s_base = cfg.s_addr_rtl(m, e.slot, e.ii.q, e.jj.q, aw);
    let o_base = cfg.o_addr_rtl(m, e.ii.q, e.qq.q, aw);
    let sm = softmax_rows(m, cfg, parts, i, &e);
    let p_bank = p_bank(m, cfg, parts, i);
    let tile_reset = i.sm.start & i.sm.first;
    let array = |m: &mut ModuleBuilder, k: usize, tier: Tier| {
        let ins = TierIn {
            a_q: i.a_q,
            p_val: p_bank.value,
            b_col: tier.b_col,
            mask: tier.mask,
            rd_addr: tier.rd_addr,
            shift: sm.step_shift,
            pv_block_start: i.pv_block_start,
            tile_reset,
            step: tier.step,
        };
        let out = m.instantiate(&parts.tiers[k], &format!("u_{}tier", tier.prefix), &ins);
        // The enables feed only a softmax tier's S links.
        if !(cfg.softmax_tier() && k == 0) {
            m.discard(out.en);
        }
        Pes::of(cfg, &out)
    };
    let (pes, value, o_value, s_link) = match cfg.tiered {
        // One tier: QK and PV steps on the same PEs, whose one read port serves the sweeps
        // (S) and the readout (O).
        None => {
            let rd_addr = m.name("rd_addr", mux(e.in_ro, o_base, s_base));
            let pes = array(m, 0, Tier::qk(i, rd_addr, ""));
            m.discard_all(&i.step_pv);
            m.discard(i.v_col);
            m.discard(i.mask_pv);
            let value = m.name("rd_value", mux_index(e.cc.q, &pes.rd_datas));
            (pes, value, value, None)
        }
        // reg3d: the QK tier's PEs hold S, the PV tier's hold O (the readout reads them). The
        // sweeps read S in the QK PEs, or with a softmax tier in its S registers, which the QK
        // PEs' read ports feed over the S links.
        Some(t) => {
            let aw = cfg.pe.addr_width();
            let qk_rd = if t.softmax_tier {
                m.net("link_rd_addr", aw)
            } else {
                s_base
            };
            let mut qk = array(m, 0, Tier::qk(i, qk_rd, "qk_"));
            let pv_tier = Tier {
                step: i.step_pv,
                b_col: i.v_col,
                mask: i.mask_pv,
                rd_addr: o_base,
                prefix: "pv_",
            };
            let pv = array(m, 1, pv_tier);
            let o_value = m.name("o_value", mux_index(e.cc.q, &pv.rd_datas));
            let (s_value, link) = if t.softmax_tier {
                let block = parts.s_tier.as_ref().expect("three tiers");
                let ins = STierIn {
                    rd_data: qk.rd_bus,
                    en: qk.en_bus,
                    slot: e.slot,
                    ii: e.ii.q,
                    jj: e.jj.q,
                    cc: e.cc.q,
                    step: i.step,
                };
                let out = m.instantiate(block, "u_s_tier", &ins);
                m.drive(qk_rd, out.rd_addr);
                let bits = |x: Sig| (0..cfg.cols).map(|c| x.bit(c)).collect::<Vec<Sig>>();
                let link = STier {
                    value: out.value,
                    reads: bits(out.reads),
                    writes: bits(out.writes),
                    linked: out.linked,
                };
                qk.acc_reads.extend(link.reads.iter().copied());
                qk.rf_writes.extend(link.writes.iter().copied());
                (link.value, Some(link))
            } else {
                (mux_index(e.cc.q, &qk.rd_datas), None)
            };
            let s_value = m.name("s_value", s_value);
            (qk.and(pv), s_value, o_value, link)
        }
    };
    let masked = m.name("masked", sweep_mask(cfg, i.mask_sp, &e));
    let sw = sweep_read(m, cfg, parts, &e, value, masked);
    let start_sweep = e.state.is(Engine::MaxUpdate); // run_max is read there, then reset
    max_sweep(m, &sw, &sm, start_sweep);
    let exp = exp_sweep(m, cfg, parts, i, &e, &sm, &sw, &p_bank);
    let (st, recip_done) = readout(m, cfg, parts, i, &e, &sm, o_value);
    let idle = sequencing(
        m,
        cfg,
        i,
        &e,
        &sm,
        exp.drain_latency,
        recip_done,
        start_sweep,
    );
    // Register-file accesses this cycle, at the ports: each PE's accumulator reads and
    // write-backs, and the engine's reads (one PE's `rd_addr` port per cycle of the max
    // sweep, the exp sweep and the readout; in buf2d of the copy of S and the readout).
    let reading = if cfg.buffer.is_some() {
        e.in_copy | e.in_ro
    } else {
        or_all(&[e.in_max, e.in_exp, e.in_ro])
    };
    let count_w = bits_for((cfg.cols * cfg.tiers()) as u64 + 1);
    let s_bits = s_link_bits(m, cfg, s_link.as_ref());
    let mut reads = pes.acc_reads;
    reads.push(reading);
    RowOut {
        busy: !idle,
        s_free: match &s_link {
            Some(l) if cfg.s_walk() => l.linked,
            Some(l) => {
                m.discard(l.linked);
                sw.copied
            }
            None => sw.copied,
        },
        macs: pes.macs,
        rf_reads: m.sum(&reads, count_w),
        rf_writes: m.sum(&pes.rf_writes, count_w),
        // P bank accesses (of a word: 16 bits, or `p_per_word` weights in buf2d): a read per
        // query row and word of a PV block, a write per word the exp stage fills.
        p_read: p_bank.re,
        p_write: exp.p_write,
        s_read: sw.s_read,
        s_write: sw.s_write,
        vlink: vlink_bits(m, cfg, exp.link_we, e.in_ro, s_bits),
        vlink_s: s_bits,
        // The engine's datapath operations, counted where they issue (masked scores too:
        // the datapath runs for them).
        max_op: sw.in_max,
        exp_op: sw.in_exp,
        row_update: e.state.is(Engine::SumUpdate),
        recip_op: e.state.is(Engine::RoRecip),
        norm_op: e.in_ro,
        st,
    }
}

/// One `softmax_row` unit per query row, and the selection of the current row's state.
fn softmax_rows(
    m: &mut ModuleBuilder,
    cfg: &PeRowConfig,
    parts: &Parts,
    i: &RowIn,
    e: &EngineRegs,
) -> SoftmaxRows {
    let a_n = cfg.a;
    let row_op = m.net("row_op", 2);
    let row_sel = m.net("row_sel", a_n);
    let blk_max = m.net("blk_max", 32);
    let blk_sum = m.net("blk_sum", 32);
    let mut row_outs = vec![];
    let mut shift_slots = vec![];
    for r in 0..a_n {
        let zero2 = m.zero(2);
        let op = mux(row_sel.bit(r), row_op, zero2);
        let ins = RowOpIn {
            op,
            blk_max,
            blk_sum,
            c: i.c_const,
        };
        let o = m.instantiate(&parts.srow, &format!("u_row{r}"), &ins);
        row_outs.push([o.m, o.l, o.shift, o.l_zero]);
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
    let pv_step = if cfg.tiered.is_some() {
        m.discard(i.step.slot);
        i.step_pv
    } else {
        i.step
    };
    // Field f (m, l, shift, l_zero) of the row `idx` selects.
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
        row_op,
        row_sel,
        blk_max,
        blk_sum,
        cur_m: pick(e.ii.q, 0),
        cur_l: pick(e.ii.q, 1),
        cur_l_zero: pick(e.ii.q, 3),
        step_shift,
    }
}

/// What one tier of PEs steps on: its step bus, its column bus, the mask of its phase's block,
/// the address of its read port, and the prefix of its instance name.
struct Tier<'a> {
    step: PeStep,
    b_col: Sig,
    mask: Sig,
    rd_addr: Sig,
    prefix: &'a str,
}

impl<'a> Tier<'a> {
    /// The tier on the step bus and the column bus (the one tier in 2-D, the QK tier in reg3d).
    fn qk(i: &RowIn, rd_addr: Sig, prefix: &'a str) -> Self {
        Tier {
            step: i.step,
            b_col: i.b_col,
            mask: i.mask_qk,
            rd_addr,
            prefix,
        }
    }
}

/// The softmax tier's S registers (three tiers), as the row sees them.
struct STier {
    /// The score the sweep visits (PE `cc`'s register at the engine's slot, ii, jj).
    value: Sig,
    /// Per PE: the link reads the QK PE's read port this cycle.
    reads: Vec<Sig>,
    /// Per PE: the link writes the S register above it this cycle.
    writes: Vec<Sig>,
    /// Narrow links: a block's walk wrote its last score above.
    linked: Sig,
}

/// mask_sp[ii][b·cc + jj] for the engine's sweep position.
fn sweep_mask(cfg: &PeRowConfig, mask_sp: Sig, e: &EngineRegs) -> Sig {
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
fn key_index(m: &mut ModuleBuilder, cfg: &PeRowConfig, c: Sig, jj: Sig) -> Sig {
    let jb = cfg.j_bits();
    // Low jb bits of c·b (b itself may not fit jb bits when C = 1).
    let b_l = m.lit(bits_for(cfg.b as u64), cfg.b as u64);
    c.mul_lo(b_l, jb) + jj.zext(jb)
}

/// The row's P bank: the exp sweep writes each weight (through the write nets, driven by
/// `exp_sweep`); the sequencer issues the read a cycle ahead of a PV step (`p_rd`), once per
/// query row and key, and the registered read data holds the row operand for the key's e
/// output columns.
struct PBank {
    value: Sig,
    /// The bank's read (a word's first key).
    re: Sig,
    we: Sig,
    waddr: Sig,
    wdata: Sig,
}

fn p_bank(m: &mut ModuleBuilder, cfg: &PeRowConfig, parts: &Parts, i: &RowIn) -> PBank {
    let bank = cfg.p_array();
    // The array's word address: a bank's, and the bank.
    let aw = bank.addr_width() + cfg.banks().trailing_zeros();
    let (we, waddr, wdata) = (
        m.net("p_we", 1),
        m.net("p_waddr", aw),
        m.net("p_wdata", bank.width),
    );
    let per = cfg.p_per_word();
    let word = Word::of(cfg, i.p_rd.j, per);
    // A query row's word is read with its first key; its other keys come from the row's copy
    // of it (below), as the PV steps visit every query row at a key before the next key.
    let re = word.at_first(i.p_rd.re);
    let ins = SramIn {
        we,
        waddr,
        wdata,
        re,
        raddr: word.address(&[i.p_rd.slot, i.p_rd.ii]),
    };
    let word_rd = banked(m, &parts.p_bank, "p_bank", ins, cfg.banks());
    let value = match word.field {
        None => word_rd,
        Some((f, first, _)) => {
            // Captured with each read, held for its PV steps: the element, the query row,
            // and whether the bank's read register or the row's copy holds the word.
            let f_rd = m.hold("p_field_rd", f, i.p_rd.re);
            let ii_rd = m.hold("p_ii_rd", i.p_rd.ii, i.p_rd.re);
            let fetched = m.hold("p_fetched", first, i.p_rd.re);
            let copies: Vec<Sig> = (0..cfg.a)
                .map(|r| {
                    let en = fetched & ii_rd.eq(r as u64);
                    m.hold(&format!("p_word_r{r}"), word_rd, en)
                })
                .collect();
            let held = mux_index(ii_rd, &copies);
            element(mux(fetched, word_rd, held), 16, Some(f_rd))
        }
    };
    if bank.ports == 1 {
        m.assert_always(
            "p_one_access",
            !(we & re),
            "the single-port P bank got a read (PV) and a write (softmax) in the same cycle",
        );
    }
    PBank {
        value,
        re,
        we,
        waddr,
        wdata,
    }
}

/// What the max and exp sweeps see of the score they visit: in reg2d the PE register, read in
/// the same cycle; in buf2d the S array's registered read, a cycle after the visit (the copy
/// sweep first fills the array from the PE registers, which are then free for the next
/// block's QK).
struct SweepRead {
    value: Sig,
    masked: Sig,
    in_max: Sig,
    in_exp: Sig,
    ii: Sig,
    cc: Sig,
    jj: Sig,
    /// The copy sweep's last cycle (buf2d).
    copied: Sig,
    s_read: Sig,
    s_write: Sig,
}

fn sweep_read(
    m: &mut ModuleBuilder,
    cfg: &PeRowConfig,
    parts: &Parts,
    e: &EngineRegs,
    pe_value: Sig,
    masked: Sig,
) -> SweepRead {
    let Some(bank) = &parts.s_bank else {
        let zero = m.zero(1);
        return SweepRead {
            value: pe_value,
            masked,
            in_max: e.in_max,
            in_exp: e.in_exp,
            ii: e.ii.q,
            cc: e.cc.q,
            jj: e.jj.q,
            copied: zero,
            s_read: zero,
            s_write: zero,
        };
    };
    let per = cfg.buffer.map_or(1, |b| b.s_per_word);
    let j = key_index(m, cfg, e.cc.q, e.jj.q);
    let word = Word::of(cfg, j, per);
    let addr = word.address(&[e.ii.q]);
    // A word's first score is read with it; the word is written with its last score.
    let re = word.at_first(e.in_max | e.in_exp);
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
    let value = element(word_rd, 32, field_rd);
    let at_end = and_all(&[
        e.jj.q.eq((cfg.b - 1) as u64),
        e.cc.q.eq((cfg.cols - 1) as u64),
        e.ii.q.eq((cfg.a - 1) as u64),
    ]);
    SweepRead {
        value,
        masked: m.delay("masked_rd", masked),
        in_max: m.delay("max_rd", e.in_max),
        in_exp: m.delay("exp_rd", e.in_exp),
        ii: m.delay("ii_rd", e.ii.q),
        cc: m.delay("cc_rd", e.cc.q),
        jj: m.delay("jj_rd", e.jj.q),
        copied: m.name("s_copied", e.in_copy & at_end),
        s_read: re,
        s_write: we,
    }
}

/// An array of `banks` banks of `bank`, interleaved on the word address's low bits: each
/// access goes to one bank, and the read data comes from the bank last read (each bank's read
/// register holds its word, as the one bank's does). Returns the read data.
fn banked(m: &mut ModuleBuilder, bank: &SramBlock, name: &str, ins: SramIn, banks: u32) -> Sig {
    let lg = banks.trailing_zeros();
    if lg == 0 {
        return m.instantiate(bank, name, &ins).rd_data;
    }
    let split = |a: Sig| (a.slice(lg - 1, 0), a.slice(a.width - 1, lg));
    let (wbank, waddr) = split(ins.waddr);
    let (rbank, raddr) = split(ins.raddr);
    let reads: Vec<Sig> = (0..banks as u64)
        .map(|k| {
            let one = SramIn {
                we: ins.we & wbank.eq(k),
                waddr,
                wdata: ins.wdata,
                re: ins.re & rbank.eq(k),
                raddr,
            };
            m.instantiate(bank, &format!("{name}{k}"), &one).rd_data
        })
        .collect();
    let last = m.hold(&format!("{name}_rd_bank"), rbank, ins.re);
    mux_index(last, &reads)
}

/// Key `j` of a query row in words of `per` keys.
struct Word {
    /// The word's index in the row (None: one word holds the row's block).
    index: Option<Sig>,
    /// The key's element in the word, and whether it is the word's first and its last (None
    /// with one key a word).
    field: Option<(Sig, Sig, Sig)>,
}

impl Word {
    fn of(cfg: &PeRowConfig, j: Sig, per: u32) -> Word {
        let lg = per.trailing_zeros();
        if lg == 0 {
            return Word {
                index: Some(j),
                field: None,
            };
        }
        let index = (cfg.word_bits(per) > 0).then(|| j.slice(j.width - 1, lg));
        let f = j.slice(lg - 1, 0);
        Word {
            index,
            field: Some((f, f.is_zero(), f.eq((per - 1) as u64))),
        }
    }

    /// The word's address in a bank of words at (`above`, word).
    fn address(&self, above: &[Sig]) -> Sig {
        let parts: Vec<Sig> = above.iter().copied().chain(self.index).collect();
        cat(&parts)
    }

    /// `x` in the word's first key only.
    fn at_first(&self, x: Sig) -> Sig {
        self.field.map_or(x, |(_, first, _)| x & first)
    }

    /// `x` in the word's last key only.
    fn at_last(&self, x: Sig) -> Sig {
        self.field.map_or(x, |(_, _, last)| x & last)
    }
}

/// A word of `per` elements: `x` (the word's last) above the `per` − 1 before it, which a shift
/// register gathers on `en` (the oldest in the lowest bits: element f at bits f·w ..).
fn gather(m: &mut ModuleBuilder, name: &str, x: Sig, en: Sig, per: u32) -> Sig {
    if per == 1 {
        return x;
    }
    let w = x.width;
    let held = m.reg(name, w * (per - 1), None);
    let shifted = if per > 2 {
        cat(&[x, held.q.slice(w * (per - 1) - 1, w)])
    } else {
        x
    };
    m.set_next(held, shifted);
    m.set_enable(held, en);
    cat(&[x, held.q])
}

/// Element `field` (`w` bits each) of `word` (the word itself when it holds one).
fn element(word: Sig, w: u32, field: Option<Sig>) -> Sig {
    let Some(f) = field else {
        return word;
    };
    let xs: Vec<Sig> = (0..word.width / w)
        .map(|k| word.slice(k * w + w - 1, k * w))
        .collect();
    mux_index(f, &xs)
}

/// Max sweep: the running max of the row's scores (masked ones are −Inf), the block max.
fn max_sweep(m: &mut ModuleBuilder, sw: &SweepRead, sm: &SoftmaxRows, start_sweep: Sig) {
    let neg_inf = m.lit(32, ieee::F32_NEG_INF);
    let candidate = mux(sw.masked, neg_inf, sw.value);
    let run_max = m.reg("run_max", 32, Some(ieee::F32_NEG_INF));
    let maxed = crate::fp32_misc::max_logic(m, run_max.q, candidate);
    m.set_next(run_max, mux(start_sweep, neg_inf, maxed));
    m.set_enable(run_max, sw.in_max | start_sweep);
    m.drive(sm.blk_max, run_max.q);
}

/// Bits over the vertical links this cycle (reg3d): a P weight up to the PV tier's bank (16),
/// an O value down to the readout (32), and in three tiers the scores up the S links. Zero in
/// 2-D designs.
fn vlink_bits(m: &mut ModuleBuilder, cfg: &PeRowConfig, p_up: Sig, o_down: Sig, s: Sig) -> Sig {
    let w = cfg.vlink_width();
    let zero = m.zero(w);
    if cfg.tiered.is_none() {
        m.discard(s);
        return zero;
    }
    let (p16, o32) = (m.lit(w, 16), m.lit(w, 32));
    let po = mux(p_up, p16, zero) + mux(o_down, o32, zero);
    if cfg.softmax_tier() {
        po + s
    } else {
        m.discard(s);
        po
    }
}

/// Bits over the S links this cycle (three tiers): 32 per score written above. Zero otherwise.
fn s_link_bits(m: &mut ModuleBuilder, cfg: &PeRowConfig, s_link: Option<&STier>) -> Sig {
    let w = cfg.vlink_width();
    match s_link {
        Some(t) => {
            let n = m.sum(&t.writes, w - 5);
            let zero5 = m.zero(5);
            cat(&[n, zero5])
        }
        None => m.zero(w),
    }
}

/// What the exp sweep gives the rest of the row.
struct ExpSweep {
    /// The P bank write a weight leaving the exp pipeline makes (each weight, or a word's last
    /// in buf2d with wide words).
    p_write: Sig,
    /// The weight's write reaches the P bank (after the vertical link in reg3d).
    link_we: Sig,
    /// Cycles from the sweep's last score to the block sum: the pipeline, one cycle for the
    /// last local sum, the tree.
    drain_latency: u32,
}

/// Exp sweep: p = FP16(exp2(s·C − m)) through the exp pipeline into the P buffer; each PE's b
/// weights summed in order (the chain), then the C local sums through the reduction tree.
#[allow(clippy::too_many_arguments)]
fn exp_sweep(
    m: &mut ModuleBuilder,
    cfg: &PeRowConfig,
    parts: &Parts,
    i: &RowIn,
    e: &EngineRegs,
    sm: &SoftmaxRows,
    sw: &SweepRead,
    p_bank: &PBank,
) -> ExpSweep {
    let (c_n, b_n) = (cfg.cols, cfg.b);
    let exp_lat = cfg.exp.latency();
    let ins = ExpIn {
        s: sw.value,
        m: sm.cur_m,
        c: i.c_const,
        masked: sw.masked,
    };
    let p = m.instantiate(&parts.sexp, "u_exp", &ins).p;
    let out_valid = m.delay_n("exp_valid", sw.in_exp, exp_lat);
    let out_ii = m.delay_n("exp_ii", sw.ii, exp_lat);
    let out_c = m.delay_n("exp_c", sw.cc, exp_lat);
    let out_jj = m.delay_n("exp_jj", sw.jj, exp_lat);
    let p_j = key_index(m, cfg, out_c, out_jj);
    // P words of several weights (buf2d) are gathered and written with their last weight.
    let per = cfg.p_per_word();
    let p_word = Word::of(cfg, p_j, per);
    let p_we = p_word.at_last(out_valid);
    let p_data = gather(m, "p_gather", p, out_valid, per);
    // reg3d: P goes up to the PV tier's bank through the vertical link's register stages.
    let link = cfg.tiered.map_or(0, |t| t.vlink_latency);
    let up = |m: &mut ModuleBuilder, name: &str, x: Sig| m.delay_n(name, x, link);
    let (we, waddr, wdata) = (
        up(m, "link_p_we", p_we),
        up(m, "link_p_waddr", p_word.address(&[e.slot, out_ii])),
        up(m, "link_p_wdata", p_data),
    );
    m.drive(p_bank.we, we);
    m.drive(p_bank.waddr, waddr);
    m.drive(p_bank.wdata, wdata);
    let wide = crate::fp16_to_fp32::logic(m, p);
    let chain = m.reg("chain", 32, Some(0));
    let chain_in = Binary {
        a: chain.q,
        b: wide,
    };
    let summed = m.instantiate(&parts.add0, "u_chain", &chain_in).y;
    let chain_d = mux(out_jj.eq(0), wide, summed);
    m.set_next(chain, chain_d);
    m.set_enable(chain, out_valid);
    let store = out_valid & out_jj.eq((b_n - 1) as u64);
    let mut locals: Vec<Sig> = (0..c_n)
        .map(|c| {
            let en = store & out_c.eq(c as u64);
            m.hold(&format!("local_sum{c}"), chain_d, en)
        })
        .collect();
    locals.reverse();
    let t = m.instantiate(&parts.tree, "u_tree", &X { x: cat(&locals) });
    m.discard(t.max);
    m.drive(sm.blk_sum, t.sum);
    ExpSweep {
        p_write: p_we,
        link_we: we,
        drain_latency: cfg.drain_latency(),
    }
}

/// Readout: r = 1/l (1 if l = 0), O · r in FP32 or rounded to FP16, packed into beats for the
/// row's O staging bank. Returns the staging write and the reciprocal's done.
fn readout(
    m: &mut ModuleBuilder,
    cfg: &PeRowConfig,
    parts: &Parts,
    i: &RowIn,
    e: &EngineRegs,
    sm: &SoftmaxRows,
    value: Sig,
) -> (RowStore, Sig) {
    let w = cfg.mem_width;
    let recip_start = e.state.is(Engine::RoRecip);
    let recip_in = RecipIn {
        start: recip_start,
        x: sm.cur_l,
    };
    let rc = m.instantiate(&parts.recip, "u_recip", &recip_in);
    let recip_done = rc.done;
    m.discard(rc.busy);
    let zeros = m.name("row_is_zero", sm.cur_l_zero | i.ro.zero);
    let one = m.lit(32, ieee::F32_ONE);
    let r = m.reg("r", 32, Some(0));
    m.set_next(r, mux(zeros, one, rc.y));
    m.set_enable(r, recip_done);
    let zero32 = m.zero(32);
    let o_val = mux(zeros, zero32, value);
    let y = m
        .instantiate(&parts.mul0, "u_norm", &Binary { a: o_val, b: r.q })
        .y;
    let y16 = crate::fp32_to_fp16::logic(m, y);
    let beat = m.reg("beat", w, Some(0));
    // The oldest lane shifts out as the beat fills (a 32-bit beat holds one FP32 value).
    m.discard(beat.q.slice(15, 0));
    let shifted32 = if w > 32 {
        cat(&[y, beat.q.slice(w - 1, 32)])
    } else {
        y
    };
    let shifted16 = cat(&[y16, beat.q.slice(w - 1, 16)]);
    let beat_d = mux(i.out_f32, shifted32, shifted16);
    m.set_next(beat, beat_d);
    m.set_enable(beat, e.in_ro);
    let lanes16 = w / 16;
    let lane = m.reg("lane", addr_bits(lanes16), Some(0));
    let last16 = lane.q.eq((lanes16 - 1) as u64);
    let last32 = lane.q.eq((w / 32 - 1) as u64);
    let lane_last = mux(i.out_f32, last32, last16);
    let zero_l = m.zero(lane.q.width());
    let ro_begin = e.state.is(Engine::RoWait);
    let lane_d = mux(lane_last, zero_l, lane.q + 1);
    m.set_next(lane, mux(ro_begin, zero_l, lane_d));
    m.set_enable(lane, e.in_ro | ro_begin);
    let st_beat = m.reg("st_beat", cfg.beat_bits(), Some(0));
    let zero_b = m.zero(cfg.beat_bits());
    let write = e.in_ro & lane_last;
    m.set_next(st_beat, mux(ro_begin, zero_b, st_beat.q + 1));
    m.set_enable(st_beat, write | ro_begin);
    let store = RowStore {
        we: write,
        row: e.ii.q,
        beat: st_beat.q,
        data: beat_d,
    };
    (store, recip_done)
}

/// The engine's sequencing: the sweep counters, the drain wait, the state machine, the query
/// row and the softmax units' operations. Returns idle.
#[allow(clippy::too_many_arguments)]
fn sequencing(
    m: &mut ModuleBuilder,
    cfg: &PeRowConfig,
    i: &RowIn,
    e: &EngineRegs,
    sm: &SoftmaxRows,
    drain_latency: u32,
    recip_done: Sig,
    start_sweep: Sig,
) -> Sig {
    let (jj_next, jj_last) = step_counter(m, e.jj.q, cfg.b);
    let (cc_next, cc_last) = step_counter(m, e.cc.q, cfg.cols);
    let (qq_next, qq_last) = step_counter(m, e.qq.q, cfg.e);
    let (ii_next, ii_last) = step_counter(m, e.ii.q, cfg.a);
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
    // Wait after the exp sweep for the pipeline, the last local sum and the tree.
    let drain = m.reg("drain", bits_for((drain_latency + 1) as u64), Some(0));
    let drain_done = drain.q.is_zero();
    let drain_init = m.lit(drain.q.width(), drain_latency as u64);
    let enter_drain = e.in_exp & sweep_end;
    m.set_next(drain, mux(enter_drain, drain_init, drain.q - 1));
    m.set_enable(drain, enter_drain | e.state.is(Engine::ExpDrain));

    let c = |s: Engine| e.state.code(s);
    let pick = |cond: Sig, t: Engine, f: Engine| mux(cond, c(t), c(f));
    let idle = e.state.is(Engine::Idle);
    // IDLE: a softmax start (in buf2d the copy of S first; init first on the tile's first
    // block), or a readout.
    let buffered = cfg.buffer.is_some();
    let after_copy = pick(i.sm.first, Engine::Init, Engine::MaxSweep);
    let after_start = if buffered {
        c(Engine::SCopy)
    } else {
        after_copy
    };
    let from_idle = mux(
        i.sm.start,
        after_start,
        pick(i.ro.start, Engine::RoRecip, Engine::Idle),
    );
    let copy_end = sweep_end & ii_last;
    let after_max = if buffered {
        Engine::MaxWait
    } else {
        Engine::MaxUpdate
    };
    let row_done = pick(ii_last, Engine::Idle, Engine::RoRecip);
    let from_ros = mux(ro_end, row_done, c(Engine::RoSweep));
    e.state.set_transitions(m, |s| match s {
        Engine::Idle => from_idle,
        Engine::SCopy if buffered => mux(copy_end, after_copy, c(Engine::SCopy)),
        Engine::Init => c(Engine::MaxSweep),
        Engine::MaxSweep => pick(sweep_end, after_max, Engine::MaxSweep),
        Engine::MaxWait if buffered => c(Engine::MaxUpdate),
        Engine::SCopy | Engine::MaxWait => c(Engine::Idle),
        Engine::MaxUpdate => c(Engine::ExpSweep),
        Engine::ExpSweep => pick(sweep_end, Engine::ExpDrain, Engine::ExpSweep),
        Engine::ExpDrain => pick(drain_done, Engine::SumUpdate, Engine::ExpDrain),
        Engine::SumUpdate => pick(ii_last, Engine::Idle, Engine::MaxSweep),
        Engine::RoRecip => c(Engine::RoWait),
        Engine::RoWait => pick(recip_done, Engine::RoSweep, Engine::RoWait),
        Engine::RoSweep => from_ros,
    });
    // ii: reset on a start, advance after a row's sum update or readout.
    let in_sumu = e.state.is(Engine::SumUpdate);
    let ii_adv = or_all(&[in_sumu, e.in_ro & ro_end, e.in_copy & sweep_end]);
    let reset_ii = (idle & i.sm.start) | (idle & i.ro.start);
    let zero_ii = m.zero(cfg.ii_bits());
    m.set_next(e.ii, mux(reset_ii, zero_ii, ii_next));
    m.set_enable(e.ii, ii_adv | reset_ii);
    // Row state operations: init (all rows) on a tile's first block, max after the max sweep,
    // sum after the drain (the current row).
    let in_init = e.state.is(Engine::Init);
    let op = |m: &mut ModuleBuilder, o: RowOp| m.lit(2, o as u64);
    let (op_init, op_max, op_sum, op_hold) = (
        op(m, RowOp::Init),
        op(m, RowOp::Max),
        op(m, RowOp::Sum),
        op(m, RowOp::Hold),
    );
    let rop = mux(in_sumu, op_sum, op_hold);
    let rop = mux(start_sweep, op_max, rop);
    m.drive(sm.row_op, mux(in_init, op_init, rop));
    let ones_a = m.ones(cfg.a);
    let one_hot = bit_of(m, e.ii.q, cfg.a);
    m.drive(sm.row_sel, mux(in_init, ones_a, one_hot));
    idle
}

/// One-hot of `idx` over `n` bits.
fn bit_of(m: &mut ModuleBuilder, idx: Sig, n: u32) -> Sig {
    let one = m.lit(n, 1);
    one << idx
}
