//! The PE row's parameters and the figures derived from them.

use anyhow::{ensure, Result};

use crate::array::pe::PeConfig;
use crate::softmax::row_reduce::RowReduceConfig;
use crate::softmax::{RowUpdateConfig, SoftmaxExpConfig};
use crate::variants::{PHome, Plan, Variant};
use crate::{addr_bits, bits_for, ModuleBuilder, Sig};

/// Integer QKᵀ: the steps at the start of a block's QK phase that carry Q's and K's scales
/// (elements 0 and 1 of their rows) to the row engines.
pub const SCALE_STEPS: u32 = 2;

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
    /// Built for fault injection (`Fault::WrongRescale`, `Fault::SharedSTierSlot` and
    /// `Fault::StaleScale` act here, selected at run time; see `fault.rs`).
    pub faults: bool,
    /// Where S and P live (see `crate::variants`): the row asks its variant's [`Plan`].
    pub variant: Variant,
    /// How the row engines rescale when a running max grows.
    pub rescale: crate::softmax::Rescale,
}

impl PeRowConfig {
    pub fn validate(&self) -> Result<()> {
        let (s_per, p_per) = self.plan().sram.per_word;
        if self.s_in_sram() {
            for (what, per) in [("scores per S word", s_per), ("weights per P word", p_per)] {
                anyhow::ensure!(
                    per.is_power_of_two() && self.bc().is_multiple_of(per),
                    "{per} {what} must be a power of two dividing Bc = {}",
                    self.bc()
                );
            }
        }
        if self.scratch() {
            let (s, p) = self.scratch_per_beat();
            for (what, per) in [("scores", s), ("weights", p)] {
                anyhow::ensure!(
                    per.is_power_of_two() && self.bc().is_multiple_of(per),
                    "unfused moves S and P in beats of {} bits: bc = {} must be a power of two \
                     or a multiple of the {per} {what} a beat holds; change bc or mem_width",
                    self.mem_width,
                    self.bc()
                );
            }
        }
        self.validate_qk()?;
        self.pe.validate()?;
        self.exp.validate()
    }

    /// The integer QKᵀ's format and the keys that share a K scale (a block), if any.
    pub fn quant(&self) -> Option<kernels::quant::QuantSpec> {
        self.pe.qk.map(|format| kernels::quant::QuantSpec {
            format,
            bc: self.bc() as usize,
        })
    }

    /// MACs a PE performs in a step at most: 1, or with integer QKᵀ the lanes of a packed
    /// element (its QK steps).
    pub fn macs_per_pe(&self) -> u32 {
        self.pe.qk.map_or(1, |f| f.lanes())
    }

    /// QK steps per score (the dimension loop): d, or with integer QKᵀ the
    /// [`SCALE_STEPS`] that carry the scales, then d / lanes packed products.
    pub fn qk_dims(&self) -> u32 {
        match self.pe.qk {
            None => self.d(),
            Some(f) => SCALE_STEPS + self.d() / f.lanes(),
        }
    }

    /// Integer QKᵀ fits: whole packed elements, at least two of them a row, a fused design.
    pub fn validate_qk(&self) -> Result<()> {
        if let Some(f) = self.pe.qk {
            let (d, lanes) = (self.d(), f.lanes());
            anyhow::ensure!(
                d.is_multiple_of(lanes) && d / lanes >= 2,
                "qk_format = \"{}\" packs {lanes} values per 16-bit element: head_dim = {d} must \
                 be a multiple of {lanes} with at least two elements of them (head_dim >= {})",
                f.name(),
                2 * lanes
            );
            anyhow::ensure!(
                !self.two_pass(),
                "qk_format = \"{}\" is built for the fused designs (reg2d, buf2d, reg3d): {}'s \
                 second pass would need each block's scale kept for the whole row; leave \
                 qk_format out or choose another variant",
                f.name(),
                self.variant.name()
            );
        }
        Ok(())
    }

    /// S blocks the PE registers hold: two (the softmax of one block reads its S while the
    /// next block's QK writes the other), or one when S moves on after its QK: to the buffer
    /// (buf2d), or up to the softmax tier (reg3d, three tiers).
    pub fn s_slots(&self) -> u32 {
        self.plan().s_slots
    }

    /// The variant's phase plan: the row's questions of its variant are the plan's.
    pub fn plan(&self) -> Plan {
        self.variant.plan()
    }

    /// QK and PV on PE tiers of their own, each on its own step bus (reg3d).
    pub fn concurrent_phases(&self) -> bool {
        self.plan().concurrent_phases()
    }

    /// One array interleaves the QK of a later block with the PV of an earlier one step by step
    /// (QK never takes two cycles running): its a·b S accumulators alone would come round
    /// sooner than the PE may update one register again ([`PeConfig::reuse_gap`]), and the
    /// variant can ([`Plan::interleaves`]).
    pub fn interleaved(&self) -> bool {
        self.can_interleave() && self.a * self.b < self.pe.reuse_gap()
    }

    /// One array that may interleave QK and PV (not reg3d's tiers, and the variant can).
    fn can_interleave(&self) -> bool {
        self.plan().interleaves()
    }

    /// QK and PV run as two phase streams (reg3d's tiers, or interleaved on one array): a QK
    /// block may start while an earlier block's PV runs.
    pub fn two_streams(&self) -> bool {
        self.concurrent_phases() || self.interleaved()
    }

    /// The schedule hides the MAC's latency: each accumulator comes round no sooner than the
    /// PE may update it again ([`PeConfig::reuse_gap`]: there is no forwarding); else an error
    /// naming the deepest MAC the tile hides.
    pub fn validate_mac_hidden(&self) -> Result<()> {
        let gap = self.pe.reuse_gap();
        let (s_gap, o_gap) = (self.s_update_gap(), self.a * self.e);
        let most = s_gap.min(o_gap);
        ensure!(
            s_gap >= gap && o_gap >= gap,
            "a PE updates each of its {} S accumulators once every {s_gap} cycles{} and each of \
             its {} O accumulators once every {o_gap}, fewer than the {gap} cycles the MAC needs \
             between two updates of one register (add_latency + 3 with a mul_latency of 2 or \
             more, which reads the register when the product arrives; mul_latency + \
             add_latency + 1 below): this tile hides add_latency up to {} with a mul_latency of 2 \
             or more, or mul_latency + add_latency up to {}; raise br, bc or head_dim, or lower \
             mul_latency / add_latency",
            self.a * self.b,
            if s_gap > self.a * self.b {
                " (QK interleaved with PV)"
            } else {
                ""
            },
            self.a * self.e,
            most.saturating_sub(3),
            most - 1
        );
        Ok(())
    }

    /// A score's products run back to back in the MAC's pipeline (QK steps ii, jj, k): a PE
    /// that accumulates in its pipeline.
    pub fn qk_runs(&self) -> bool {
        self.pe.mac.feedback
    }

    /// An O value's products over a block's keys run back to back (PV steps ii, q, jk): a PE
    /// that accumulates in its pipeline, where P comes from the row's own P bank (reg2d,
    /// reg3d). Then every PV step takes the next key's weight; buf2d's buffer, rowfused's S
    /// arrays and unfused's landing buffer keep the register file's order, one read of a weight
    /// serving the e steps of its query row.
    pub fn pv_runs(&self) -> bool {
        self.pe.mac.feedback && !self.s_in_sram() && !self.s_in_memory()
    }

    /// Cycles between a PE's updates of one S accumulator at full rate: a·b, or 2·a·b when the
    /// array interleaves (or could: reg2d's schedule takes the wider gap when it needs it).
    pub fn s_update_gap(&self) -> u32 {
        self.a * self.b * (1 + self.can_interleave() as u32)
    }

    /// S copied out of the PE registers into the row's S array, which the sweeps read (buf2d).
    pub fn s_in_sram(&self) -> bool {
        self.plan().s_in_sram()
    }

    /// The softmax runs in two passes, the row's max over every block first: the S array
    /// holds whole rows of S (rowfused), or S goes through memory (unfused).
    pub fn two_pass(&self) -> bool {
        self.plan().softmax() == crate::variants::SoftmaxPass::TwoPass
    }

    /// S and P go through memory between the passes (unfused): the sweeps read S a cycle
    /// after the visit (the max sweep from the PE registers, the exp sweep from the scratch
    /// channel's landing buffer), S and P leave through the O staging buffer, and the PV steps
    /// read P from the landing buffer. No S array, no P bank.
    pub fn s_in_memory(&self) -> bool {
        self.plan().s_in_memory()
    }

    /// rowfused with `spill`: the blocks of a row past the S array go through the scratch
    /// region (packed into the O staging buffer by their max sweep, which reads the PE
    /// registers; read back from the scratch landing buffer by their exp sweep).
    pub fn spills(&self) -> bool {
        self.plan().spills()
    }

    /// The row has the scratch channel's landing buffer and packs S into the staging buffer
    /// (unfused; rowfused with `spill`).
    pub fn scratch(&self) -> bool {
        self.plan().scratch()
    }

    /// Width of the softmax's block field (`sm_blk`): the block's place in the S array, and
    /// with `spill` above it a bit that says the block is past the array.
    pub fn sm_blk_width(&self) -> u32 {
        if self.spills() {
            self.blk_bits() + 1
        } else {
            self.blk_bits().max(1)
        }
    }

    /// The sweeps read S a cycle after the visit (from an S array, unfused's registered read,
    /// or, with a deep exp stage (exp2 at 3 stages or more), the PE registers' read
    /// registered), so a max sweep waits a cycle (`RE_MAX_WAIT`) and the drain one more.
    pub fn s_read_registered(&self) -> bool {
        self.s_in_sram() || self.s_in_memory() || self.exp.p_registered()
    }

    /// unfused: scores and weights per beat of the staging and landing buffers (a block row
    /// of fewer keys than a beat holds takes one beat, its upper lanes unused).
    pub fn scratch_per_beat(&self) -> (u32, u32) {
        let (op, acc) = self.elem_bits();
        (
            (self.mem_width / acc).min(self.bc()),
            (self.mem_width / op).min(self.bc()),
        )
    }

    /// unfused: bytes of a block row of S and of P in memory (whole beats).
    pub fn scratch_row_bytes(&self) -> (u32, u32) {
        let (s, p) = self.scratch_per_beat();
        let beat = self.mem_width / 8;
        (self.bc() / s * beat, self.bc() / p * beat)
    }

    /// Blocks of a query row the S array holds (1 but in rowfused).
    pub fn s_blocks(&self) -> u32 {
        self.plan().row_keys().map_or(1, |k| k / self.bc())
    }

    /// Bits of a block's place in a query row of the S array (0 with one block).
    pub fn blk_bits(&self) -> u32 {
        self.s_blocks().trailing_zeros()
    }

    /// Three tiers: the row engine and its S registers on a tier of their own.
    pub fn softmax_tier(&self) -> bool {
        self.plan().softmax_tier()
    }

    /// Three tiers with narrow S links: the QK PEs keep two S blocks, and a serializer walks
    /// each finished block up the links (`s_beats` cycles per score), then says so (`s_free`).
    pub fn s_walk(&self) -> bool {
        self.softmax_tier() && self.s_beats() > 1
    }

    /// Cycles an S link takes per score (32 / `vlink_bits`; 1 without a softmax tier).
    pub fn s_beats(&self) -> u32 {
        self.plan().s_beats()
    }

    /// Register stages of each vertical link (0 in the 2-D designs).
    pub fn vlink_latency(&self) -> u32 {
        self.plan().vlink_latency
    }

    /// The softmax tier's S registers above each QK PE (three tiers): two blocks of the PE's
    /// a × b FP32 scores, at (slot, ii, jj).
    pub fn s_tier_depth(&self) -> u32 {
        2 << (self.ii_bits() + self.jj_bits())
    }

    /// Cycles from a QK phase's last step until the sweeps may read its S: the PE latency,
    /// plus the S link's stages in three tiers.
    pub fn s_ready_latency(&self) -> u32 {
        self.pe.latency() + self.softmax_tier() as u32 * self.vlink_latency()
    }

    /// Cycles the engine waits after an exp sweep's last element (`RE_EXP_DRAIN` holds one more):
    /// the S array's registered read (buf2d), the exp pipeline, the last PE's tree of weights
    /// and its local sum's write, the reduction tree, and the P link's stages (reg3d).
    pub fn drain_latency(&self) -> u32 {
        self.s_read_registered() as u32
            + self.exp.latency()
            + self.local_latency()
            + 1
            + self.tree().latency()
            + self.vlink_latency()
    }

    /// Cycles from a PE's last weight to its sum of weights: the widened weight's register
    /// ([`PeRowConfig::widen_registered`]), then its tree's levels (ceil(log2 b)), each at the
    /// reduction tree's stage latency.
    pub fn local_latency(&self) -> u32 {
        self.widen_registered() as u32
            + RowReduceConfig {
                cols: self.b,
                ..self.tree()
            }
            .latency()
    }

    /// For a fast clock (exp2 at 3 stages or more, as P's own register after its rounding),
    /// each weight widened to binary32 is registered before the PE's tree of weights adds it.
    pub fn widen_registered(&self) -> bool {
        self.exp.p_registered()
    }

    /// Cycles the engine is busy with one block's softmax (from the cycle after its start):
    /// in buf2d the copy of S (a·Bc), on a tile's first block `RE_INIT`, then per query row the
    /// max sweep (Bc), `RE_MAX_WAIT` (buf2d), the max update and its write (`RE_MAX_PIPE`; the
    /// update takes [`RowUpdateConfig::latency`] cycles), the exp sweep (Bc); the next row's
    /// max sweep overlaps this row's drain, and its exp sweep waits for this row's sum update
    /// to issue; after the last row the drain, its sum update and the write (`RE_EXP_DRAIN`,
    /// `RE_SUM_PIPE`). The cycle model (`regflash::cycles`) runs the engine on this.
    /// rowfused's passes (`second`: the exp pass): the copy, `RE_INIT` on the tile's first
    /// block, and per query row the max sweep, `RE_MAX_WAIT` and the max update; or per query
    /// row the max update, the exp sweep, the drain and the sum update. A block past
    /// rowfused's S array (`spilled`, with `spill`) has no copy: its max sweep reads the PE
    /// registers, as unfused's does.
    pub fn softmax_cycles(&self, first: bool, second: bool, spilled: bool) -> u32 {
        let buffered = self.s_in_sram() as u32;
        let bc = self.bc();
        let (a, update) = (self.a, self.row_update().latency());
        // From an exp sweep's last score: its row's sum update issues D + 2 cycles later, and
        // the next row's exp sweep starts no earlier than the cycle after it.
        let drain = self.drain_latency() + 3;
        // After the last row's exp sweep: the drain, the sum update and its write.
        let tail = self.drain_latency() + 1 + update;
        if self.two_pass() {
            // rowfused copies the block into its S array first; unfused's max sweep reads the
            // PE registers (registered) and packs S into the staging buffer as it goes.
            let copy = (self.s_in_sram() && !spilled) as u32 * a * bc;
            return match second {
                false => copy + first as u32 + a * (bc + 1 + update),
                // Per row the max update and its write, the exp sweep.
                true => update + bc + (a - 1) * (bc - 1 + (1 + update).max(drain)) + tail,
            };
        }
        // Per row the max sweep, the registered read's wait (buf2d, a deep exp stage), the
        // max update and its write, the exp sweep; the next row's max sweep starts after it.
        let to_exp = bc + self.s_read_registered() as u32 + update;
        buffered * a * bc
            + first as u32
            + to_exp
            + bc
            + (a - 1) * (bc - 1 + (1 + to_exp).max(drain))
            + tail
    }

    /// noc2d: the cycles after a softmax's start (the cycle its `sm.start` is high) in which
    /// the exp sweep's P writes leave the row, one per query row and key in the order (ii, j):
    /// [`PeRowConfig::softmax_cycles`]' timeline, row ii's exp sweep starting `period` cycles
    /// after row ii − 1's, each weight the registered read and the exp pipeline after its
    /// visit. The online softmax over S in the PE registers, with no vertical link.
    pub fn p_write_times(&self, first: bool) -> Vec<u32> {
        assert!(!self.two_pass() && !self.s_in_sram() && self.vlink_latency() == 0);
        let bc = self.bc();
        let registered = self.s_read_registered() as u32;
        let to_exp = bc + registered + self.row_update().latency();
        let period = bc - 1 + (1 + to_exp).max(self.drain_latency() + 3);
        let lead = first as u32 + to_exp + 1 + registered + self.exp.latency();
        (0..self.a)
            .flat_map(|ii| (0..bc).map(move |k| lead + ii * period + k))
            .collect()
    }

    /// The reduction tree of the row's C local sums (its adder the softmax datapath's).
    pub fn tree(&self) -> RowReduceConfig {
        RowReduceConfig {
            cols: self.cols,
            add_latency: self.exp.add.latency,
        }
    }

    /// The row state unit (`softmax_row`): the softmax datapath's FP32 multiplier and adder,
    /// and the lazy threshold.
    pub fn row_update(&self) -> RowUpdateConfig {
        RowUpdateConfig {
            mul: self.exp.mul,
            add: self.exp.add,
            threshold: self.rescale.threshold(),
        }
    }

    /// Busy cycles of a max pass until the PE registers are free for the next QK (`s_free`):
    /// the copy's (a·Bc), or with a spilled block's max sweep reading them, up to the last
    /// row's last score.
    pub fn s_free_cycles(&self, first: bool, spilled: bool) -> u32 {
        let bc = self.bc();
        if spilled {
            first as u32 + (self.a - 1) * (bc + 1 + self.row_update().latency()) + bc
        } else {
            self.a * bc
        }
    }

    /// Cycles the engine is busy with a tile's readout: per query row the reciprocal's start,
    /// its wait (`recip::LATENCY`) and the sweep over the row's d outputs; then the
    /// pipeline's last write (`RE_RO_DRAIN`).
    pub fn readout_cycles(&self) -> u32 {
        self.a * (1 + crate::fp::recip::LATENCY + self.cols * self.e) + self.readout_latency()
    }

    /// Cycles from the readout's visit of an O value to its beat's write into the staging
    /// bank: the value's register, the FP32 multiplier (`fmul_latency`), the rounding into
    /// the beat register, the write from it.
    pub fn readout_latency(&self) -> u32 {
        self.exp.mul.latency + 2
    }

    /// One bank of the row's S array: a × Bc FP32 scores at (ii, j), `s_per_word` to a word,
    /// in `banks` banks, single-port; in rowfused a × `row_keys` scores at (ii, block, j).
    pub fn s_array(&self) -> Option<crate::mem::sram::SramConfig> {
        let plan = self.plan();
        let per = plan.sram.per_word.0;
        plan.s_in_sram().then(|| crate::mem::sram::SramConfig {
            depth: (1 << (self.ii_bits() + self.blk_bits() + self.word_bits(per)))
                / plan.sram.banks,
            width: self.elem_bits().1 * per,
            ports: 1,
            blackbox: plan.sram.blackbox,
        })
    }

    /// The row's P bank: two blocks of a × Bc FP16 weights at (slot, ii, j); one read and one
    /// write port, or in buf2d one bank of the buffer's P array, with its configured ports,
    /// words of `p_per_word` weights and `banks` banks.
    pub fn p_array(&self) -> crate::mem::sram::SramConfig {
        let per = self.p_per_word();
        crate::mem::sram::SramConfig {
            depth: (2 << (self.ii_bits() + self.word_bits(per))) / self.banks(),
            width: self.elem_bits().0 * per,
            // A design whose P goes through memory builds no bank; its `sram` unit is the
            // two-port form.
            ports: match self.plan().p {
                PHome::Bank { ports } => ports,
                PHome::Memory => 2,
            },
            blackbox: self.plan().sram.blackbox,
        }
    }

    /// Bits of an S-array access and of a P-bank access (32 and 16, or buf2d's wide words).
    pub fn access_bits(&self) -> (u32, u32) {
        let (s_per, p_per) = self.plan().sram.per_word;
        let (op, acc) = self.elem_bits();
        (acc * s_per, op * p_per)
    }

    /// SRAM banks of each array (1 but in buf2d with `buf2d.banks`).
    pub fn banks(&self) -> u32 {
        self.plan().sram.banks
    }

    /// Weights per P word (1 but in buf2d with wide words).
    pub fn p_per_word(&self) -> u32 {
        self.plan().sram.per_word.1
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

    /// Bits of an operand (Q, K, V, a weight P) and of an accumulator value (S, O, sums).
    pub fn elem_bits(&self) -> (u32, u32) {
        let f = self.pe.mac.formats();
        (f.operand.bits(), f.acc.bits())
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
        self.plan().tiers()
    }

    /// Tiers of PEs (MAC resources): 1, or 2 in reg3d and noc2d (the softmax tier has none).
    pub fn mac_tiers(&self) -> u32 {
        self.plan().mac_tiers()
    }

    /// Register files a PE column has, one a tier or array (reg3d's softmax tier's S registers
    /// too): the most register-file accesses a column makes in a cycle.
    pub fn rf_tiers(&self) -> u32 {
        self.tiers().max(self.mac_tiers())
    }

    /// noc2d: the NoC P crosses from the QK array to the PV array.
    pub fn noc(&self) -> Option<crate::variants::NocPlan> {
        self.plan().noc
    }

    /// Width of a row's per-cycle vertical-link bit count: a weight up (an operand) and an O
    /// value down (an accumulator value), and in three tiers a score up from every PE.
    pub fn vlink_width(&self) -> u32 {
        let (op, acc) = self.elem_bits();
        let scores = acc as u64 * self.cols as u64 * self.softmax_tier() as u64;
        bits_for(op as u64 + acc as u64 + scores)
    }

    /// Registers the mapping needs per PE.
    pub fn regs_needed(&self) -> u32 {
        self.s_slots() * self.a * self.b + self.a * self.e
    }

    /// Spare lanes on the row's vertical links (reg3d with `spares`; None otherwise).
    pub fn spares(&self) -> Option<crate::variants::Spares> {
        self.plan().spares.filter(|_| self.concurrent_phases())
    }

    /// The row's vertical bundles with spare lanes: each with its shape and register stages
    /// (`crate::link`). Empty without spares.
    pub fn bundles(&self) -> Vec<(crate::link::Bundle, kernels::link::Geometry, u32)> {
        use crate::link::Bundle;
        let Some(sp) = self.spares() else {
            return vec![];
        };
        let p = self.p_array();
        let p_up = 1 + p.addr_width() + self.banks().trailing_zeros() + p.width;
        let acc = self.elem_bits().1;
        let at = 1 + self.ii_bits() + self.jj_bits();
        let c = self.cols;
        let s_up = if self.s_walk() {
            at + 3 + c + c * self.plan().s_link_bits()
        } else {
            at + c + c * acc
        };
        let link = self.vlink_latency();
        let mut v = vec![(Bundle::PUp, p_up, link), (Bundle::ODown, acc, 0)];
        if self.softmax_tier() {
            v.push((Bundle::SUp, s_up, link));
        }
        v.into_iter()
            .map(|(b, lanes, lat)| {
                let g = kernels::link::Geometry {
                    lanes,
                    group: sp.group,
                    spares: sp.spares,
                };
                (b, g, lat)
            })
            .collect()
    }

    /// The shape of the row's bundle `b` (None without spares, or without that bundle).
    pub fn bundle(&self, b: crate::link::Bundle) -> Option<kernels::link::Geometry> {
        self.bundles()
            .into_iter()
            .find(|(x, _, _)| *x == b)
            .map(|(_, g, _)| g)
    }

    /// Cycles of a link test (every bundle's groups are as wide; None without spares).
    pub fn link_test_cycles(&self) -> Option<u32> {
        let (_, g, _) = *self.bundles().first()?;
        Some(g.test_cycles(self.vlink_latency()))
    }

    /// Bits of the row's failed-lane count (its bundles' physical lanes).
    pub fn link_count_bits(&self) -> u32 {
        let n: u32 = self.bundles().iter().map(|(_, g, _)| g.physical()).sum();
        crate::link::count_bits(n)
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

    /// Beats per O row in the short output format (the staging buffer holds rows of
    /// accumulator values: twice as many).
    pub fn beat_bits(&self) -> u32 {
        addr_bits((self.d() * self.elem_bits().1).div_ceil(self.mem_width))
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
        ) + &self.variant.flow().row_name()
            + &match self.rescale.threshold() {
                0 => String::new(),
                t => format!("_lazy{t}"),
            }
            + if self.faults { "_faults" } else { "" }
    }
}
