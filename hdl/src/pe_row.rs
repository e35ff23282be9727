//! `pe_row`: one row of the PE array (C PEs) with its row engine: the online softmax and the
//! output normalization of the row's a query rows (bit-exact model: `kernels::flash`).
//!
//! **Mapping.** PE c of the row owns, for each of the a query rows, the b keys
//! b·c .. b·c + b − 1 of the current block (S registers, double-buffered: slot, ii, jj at
//! `slot·a·b + ii·b + jj`) and the e output columns e·c .. e·c + e − 1 (O registers at
//! `2·a·b + ii·e + q`).
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
//! reads them), so the softmax of block j may overlap the PV steps of block j − 1.
//!
//! **Readout** (`ro_start`): per query row, r = 1/l (`fp32_recip`, or 1 if l = 0: no visible
//! key, O is +0), then each O value times r, in FP32 or rounded to FP16 (`out_f32`), packed into
//! beats for the row's O staging bank (`st_*`). `ro_zero` outputs zeros (a tile with no block).

use anyhow::Result;

use crate::fault::Fault;
use crate::fp32_add::{self, Fp32AddConfig};
use crate::fp32_mul::{self, Fp32MulConfig};
use crate::fp32_recip;
use crate::fsm::Fsm;
use crate::ieee;
use crate::pe::{self, PeConfig, PeOp, OP_BITS};
use crate::row_reduce::{self, RowReduceConfig};
use crate::softmax::{self, RowOp, SoftmaxExpConfig};
use crate::{
    addr_bits, and_all, bits_for, cat, mux, mux_index, or_all, Design, ModRef, ModuleBuilder, Sig,
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
    /// A deliberate defect, for fault-injection tests only (`Fault::WrongRescale` acts here).
    pub fault: Option<Fault>,
}

impl PeRowConfig {
    pub fn validate(&self) -> Result<()> {
        self.pe.validate()?;
        self.exp.validate()
    }

    pub fn bc(&self) -> u32 {
        self.cols * self.b
    }

    pub fn d(&self) -> u32 {
        self.cols * self.e
    }

    /// Register of S (slot, ii, jj).
    pub fn s_addr(&self, slot: u32, ii: u32, jj: u32) -> u32 {
        slot * self.a * self.b + ii * self.b + jj
    }

    /// Register of O (ii, q).
    pub fn o_addr(&self, ii: u32, q: u32) -> u32 {
        2 * self.a * self.b + ii * self.e + q
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
        let ab = m.lit(width, (self.a * self.b) as u64);
        let slot_off = slot.mul_lo(ab, width);
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
        let base = m.lit(width, (2 * self.a * self.b) as u64);
        let x = base + off;
        x + q
    }

    /// Registers the mapping needs per PE.
    pub fn regs_needed(&self) -> u32 {
        2 * self.a * self.b + self.a * self.e
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
        ) + if self.fault == Some(Fault::WrongRescale) {
            "_fault_wrong_rescale"
        } else {
            ""
        }
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
    /// The row engine: softmax of a block (max sweep, max update, exp sweep and drain, sum
    /// update, per query row), or the readout of a tile (reciprocal, wait, sweep, per row).
    enum Engine = "S" {
        Idle, Init, MaxSweep, MaxUpdate, ExpSweep, ExpDrain, SumUpdate, RoRecip, RoWait, RoSweep
    }
}

/// Defines the PE row.
pub fn build(d: &mut Design, cfg: &PeRowConfig) -> ModRef {
    let pe_mod = pe::build(d, &cfg.pe);
    let srow = softmax::build_row(d);
    let sexp = softmax::build_exp(d, &cfg.exp);
    let add0 = fp32_add::build(d, &Fp32AddConfig { latency: 0 });
    let mul0 = fp32_mul::build(d, &Fp32MulConfig { latency: 0 });
    let recip = fp32_recip::build(d);
    let tree = row_reduce::build(d, &RowReduceConfig { cols: cfg.cols });
    let tree_latency = RowReduceConfig { cols: cfg.cols }.levels();
    let cfg = *cfg;
    d.define(&cfg.module_name(), |_, m| {
        m.doc(&format!(
            "pe_row: {} PEs and the row engine of {} query rows ({} keys and {} output columns\n\
             per PE). See hdl/src/pe_row.rs for the mapping, the MAC steps, the softmax and\n\
             the readout.",
            cfg.cols, cfg.a, cfg.b, cfg.e
        ));
        let (c_n, a_n, b_n, e_n, bc) = (cfg.cols, cfg.a, cfg.b, cfg.e, cfg.bc());
        let aw = cfg.pe.addr_width();
        let w = cfg.mem_width;
        let a_q = m.input("a_q", 16);
        let b_col = m.input("b_col", 16 * c_n);
        let step_valid = m.input("step_valid", 1);
        let step_pv = m.input("step_pv", 1);
        let step_op = m.input("step_op", OP_BITS);
        let step_addr = m.input("step_addr", aw);
        let step_ii = m.input("step_ii", cfg.ii_bits());
        let step_jj = m.input("step_jj", cfg.jj_bits());
        let step_j = m.input("step_j", cfg.j_bits());
        let step_last = m.input("step_last", 1);
        let step_slot = m.input("step_slot", 1);
        let mask_qk = m.input("mask_qk", a_n * bc);
        let mask_sp = m.input("mask_sp", a_n * bc);
        let pv_block_start = m.input("pv_block_start", 1);
        let sm_start = m.input("sm_start", 1);
        let sm_first = m.input("sm_first", 1);
        let sm_slot = m.input("sm_slot", 1);
        let c_const = m.input("c_const", 32);
        let ro_start = m.input("ro_start", 1);
        let ro_zero = m.input("ro_zero", 1);
        let out_f32 = m.input("out_f32", 1);

        // ---------------- engine state ------------------------------------------------
        let state = Fsm::new(m, "state", Engine::Idle);
        let ii = m.reg("ii", cfg.ii_bits(), Some(0));
        let cc = m.reg("cc", addr_bits(c_n), Some(0));
        let jj = m.reg("jj", cfg.jj_bits(), Some(0));
        let qq = m.reg("qq", addr_bits(e_n), Some(0));
        let slot = m.hold("slot", sm_slot, sm_start);
        let is = |s: Engine| state.is(s);
        let in_max = is(Engine::MaxSweep);
        let in_exp = is(Engine::ExpSweep);
        let in_ro = is(Engine::RoSweep);

        // The engine reads PE registers at one shared address; `cc` picks the PE.
        let s_base = cfg.s_addr_rtl(m, slot, ii.q, jj.q, aw);
        let o_base = cfg.o_addr_rtl(m, ii.q, qq.q, aw);
        let rd_addr = mux(in_ro, o_base, s_base);
        let rd_addr = m.name("rd_addr", rd_addr);

        // ---------------- softmax row state, one unit per query row -------------------
        let mut row_outs = vec![];
        let mut shift_slots = vec![];
        let row_op = m.net("row_op", 2);
        let row_sel = m.net("row_sel", a_n);
        let blk_max = m.net("blk_max", 32);
        let blk_sum = m.net("blk_sum", 32);
        for r in 0..a_n {
            let sel = row_sel.bit(r);
            let zero2 = m.zero(2);
            let op = mux(sel, row_op, zero2);
            let o = m.instance(
                &srow,
                &format!("u_row{r}"),
                &[
                    ("op", op),
                    ("blk_max", blk_max),
                    ("blk_sum", blk_sum),
                    ("c", c_const),
                ],
            );
            row_outs.push([o.get("m"), o.get("l"), o.get("shift"), o.get("l_zero")]);
            // The row's rescale shift for its block, kept per block parity: the softmax of
            // block j may run while the PV steps of block j-1 still use theirs. Captured at
            // the row's sum operation, when the block's max has set it.
            let is_sum = op.eq(RowOp::Sum as u64);
            let slots: Vec<Sig> = (0..2u64)
                .map(|k| {
                    let here = slot.eq(k);
                    let en = is_sum & here;
                    m.hold(&format!("shift_r{r}_s{k}"), o.get("shift"), en)
                })
                .collect();
            shift_slots.push(slots);
        }
        // Field f (m, l, shift, l_zero) of the row `idx` selects.
        let pick = |idx: Sig, f: usize| -> Sig {
            let xs: Vec<Sig> = row_outs.iter().map(|r| r[f]).collect();
            mux_index(idx, &xs)
        };
        let cur_m = pick(ii.q, 0);
        let cur_l = pick(ii.q, 1);
        let cur_l_zero = pick(ii.q, 3);
        let step_shift = {
            let per_row: Vec<Sig> = shift_slots
                .iter()
                .map(|sl| mux(step_slot, sl[1], sl[0]))
                .collect();
            let shift = mux_index(step_ii, &per_row);
            if cfg.fault == Some(Fault::WrongRescale) {
                shift + 1
            } else {
                shift
            }
        };

        // ---------------- PEs -------------------------------------------------------------
        // Row-level PV operation and flags.
        let started = m.reg("o_started", a_n, Some(0));
        let scaled = m.reg("scaled", a_n, Some(0));
        // mask_qk follows the running phase's block: [ii][j], the step's query row, then its key.
        let pv_masked = select_bit2(mask_qk, a_n, bc, step_ii, step_j);
        let started_bits: Vec<Sig> = (0..a_n).map(|r| started.q.bit(r)).collect();
        let started_ii = mux_index(step_ii, &started_bits);
        let scaled_bits: Vec<Sig> = (0..a_n).map(|r| scaled.q.bit(r)).collect();
        let scaled_ii = mux_index(step_ii, &scaled_bits);
        let op_mac = m.lit(OP_BITS, PeOp::Mac as u64);
        let op_zero = m.lit(OP_BITS, PeOp::MacZero as u64);
        let op_scale = m.lit(OP_BITS, PeOp::MacScale as u64);
        let op_nop = m.lit(OP_BITS, PeOp::Nop as u64);
        let pv_op = mux(scaled_ii, op_mac, op_scale);
        let pv_op = mux(started_ii, pv_op, op_zero);
        let pv_op = mux(pv_masked, op_nop, pv_op);
        let row_op_pe = mux(step_pv, pv_op, step_op);
        let row_op_pe = mux(step_valid, row_op_pe, op_nop);
        let row_op_pe = m.name("pe_op", row_op_pe);
        // Flags: a row's first product of the tile, and of the block.
        let pv_step = step_valid & step_pv;
        let pv_live = !pv_masked;
        let mark = and_all(&[pv_step, pv_live, step_last]);
        let one_a = m.lit(a_n, 1);
        let bit_ii = one_a << step_ii;
        let zero_a = m.zero(a_n);
        let set = mux(mark, bit_ii, zero_a);
        let started_d = started.q | set;
        let tile_reset = sm_start & sm_first;
        let started_d = mux(tile_reset, zero_a, started_d);
        m.set_next(started, started_d);
        let scaled_d = scaled.q | set;
        let scaled_d = mux(pv_block_start, zero_a, scaled_d);
        m.set_next(scaled, scaled_d);

        // Row operand: Q in QK steps, P from the row's P buffer in PV steps. P is
        // double-buffered by block parity, like S.
        let p_buf = m.memory("p_buf", 2 << (cfg.ii_bits() + cfg.j_bits()), 16);
        let p_rd = cat(&[step_slot, step_ii, step_j]);
        let p_val = m.mem_read(p_buf, p_rd);
        let a_row = mux(step_pv, p_val, a_q);
        let a_row = m.name("a_row", a_row);
        let zero32 = m.zero(32);
        let mut rd_datas = vec![];
        let mut enables = vec![];
        let mut acc_reads = vec![];
        let mut rf_writes = vec![];
        for c in 0..c_n {
            // QK: PE c masked by mask_qk[ii][b*c + jj]; PV: the row's operation decides.
            let cands: Vec<Sig> = (0..a_n)
                .map(|r| {
                    let bits: Vec<Sig> = (0..b_n)
                        .map(|k| mask_qk.bit(r * bc + b_n * c + k))
                        .collect();
                    mux_index(step_jj, &bits)
                })
                .collect();
            let qk_mask = mux_index(step_ii, &cands);
            let qk_en = !qk_mask;
            let one = m.lit(1, 1);
            let en = mux(step_pv, one, qk_en);
            enables.push(en);
            let b_c = b_col.slice(16 * c + 15, 16 * c);
            let out = m.instance(
                &pe_mod,
                &format!("pe{c}"),
                &[
                    ("a", a_row),
                    ("b", b_c),
                    ("op", row_op_pe),
                    ("en", en),
                    ("addr", step_addr),
                    ("ld_data", zero32),
                    ("shift", step_shift),
                    ("rd_addr", rd_addr),
                ],
            );
            rd_datas.push(out.get("rd_data"));
            acc_reads.push(out.get("rf_acc_read"));
            rf_writes.push(out.get("rf_write"));
        }
        // MACs performed this cycle (for the core's counters).
        let live = row_op_pe.ne(op_nop);
        let performed: Vec<Sig> = enables.iter().map(|&en| en & live).collect();
        let macs = m.sum(&performed, bits_for(c_n as u64));
        m.output("macs", macs);

        // ---------------- engine datapath ---------------------------------------------
        let value = mux_index(cc.q, &rd_datas);
        let value = m.name("rd_value", value);
        // mask_sp[ii][b*cc + jj] for the engine's sweep position.
        let masked_e = {
            let rows: Vec<Sig> = (0..a_n)
                .map(|r| {
                    let cols: Vec<Sig> = (0..c_n)
                        .map(|c| {
                            let bits: Vec<Sig> = (0..b_n)
                                .map(|k| mask_sp.bit(r * bc + b_n * c + k))
                                .collect();
                            mux_index(jj.q, &bits)
                        })
                        .collect();
                    mux_index(cc.q, &cols)
                })
                .collect();
            mux_index(ii.q, &rows)
        };
        let masked_e = m.name("masked", masked_e);

        // Max sweep: running max, masked values are -Inf.
        let neg_inf = m.lit(32, ieee::F32_NEG_INF);
        let candidate = mux(masked_e, neg_inf, value);
        let run_max = m.reg("run_max", 32, Some(ieee::F32_NEG_INF));
        let maxed = crate::fp32_misc::max_logic(m, run_max.q, candidate);
        let start_sweep = is(Engine::MaxUpdate); // run_max is read there, then reset
        let run_max_d = mux(start_sweep, neg_inf, maxed);
        m.set_next(run_max, run_max_d);
        let run_max_en = in_max | start_sweep;
        m.set_enable(run_max, run_max_en);
        m.drive(blk_max, run_max.q);

        // Exp sweep: the exp pipeline, then the P buffer and the per-PE sum chains.
        let exp_lat = cfg.exp.latency();
        let p = m
            .instance(
                &sexp,
                "u_exp",
                &[
                    ("s", value),
                    ("m", cur_m),
                    ("c", c_const),
                    ("masked", masked_e),
                ],
            )
            .get("p");
        let out_valid = m.delay_n("exp_valid", in_exp, exp_lat);
        let out_ii = m.delay_n("exp_ii", ii.q, exp_lat);
        let out_c = m.delay_n("exp_c", cc.q, exp_lat);
        let out_jj = m.delay_n("exp_jj", jj.q, exp_lat);
        let p_j = {
            let jb = cfg.j_bits();
            // Low jb bits of c·b (b itself may not fit jb bits when C = 1).
            let b_l = m.lit(bits_for(b_n as u64), b_n as u64);
            let col = out_c.mul_lo(b_l, jb);
            let jj_w = out_jj.zext(jb);
            col + jj_w
        };
        let p_wr = cat(&[slot, out_ii, p_j]);
        m.mem_write(p_buf, out_valid, p_wr, p);
        let wide = crate::fp16_to_fp32::logic(m, p);
        let chain = m.reg("chain", 32, Some(0));
        let summed = m
            .instance(&add0, "u_chain", &[("a", chain.q), ("b", wide)])
            .get("y");
        let chain_first = out_jj.eq(0);
        let chain_d = mux(chain_first, wide, summed);
        m.set_next(chain, chain_d);
        m.set_enable(chain, out_valid);
        let chain_last = out_jj.eq((b_n - 1) as u64);
        let store = out_valid & chain_last;
        let mut locals = vec![];
        for c in 0..c_n {
            let mine = out_c.eq(c as u64);
            let en = store & mine;
            locals.push(m.hold(&format!("local_sum{c}"), chain_d, en));
        }
        locals.reverse();
        let tree_in = cat(&locals);
        let t = m.instance(&tree, "u_tree", &[("x", tree_in)]);
        m.discard(t.get("max"));
        m.drive(blk_sum, t.get("sum"));

        // Readout: r = 1/l (1 if l = 0), O * r, FP32 or FP16, packed into beats.
        let recip_start = is(Engine::RoRecip);
        let rc = m.instance(&recip, "u_recip", &[("start", recip_start), ("x", cur_l)]);
        let recip_done = rc.get("done");
        m.discard(rc.get("busy"));
        let zeros = cur_l_zero | ro_zero;
        let zeros = m.name("row_is_zero", zeros);
        let one = m.lit(32, ieee::F32_ONE);
        let r_val = mux(zeros, one, rc.get("y"));
        let r = m.reg("r", 32, Some(0));
        m.set_next(r, r_val);
        m.set_enable(r, recip_done);
        let o_val = mux(zeros, zero32, value);
        let y = m
            .instance(&mul0, "u_norm", &[("a", o_val), ("b", r.q)])
            .get("y");
        let y16 = crate::fp32_to_fp16::logic(m, y);
        let beat = m.reg("beat", w, Some(0));
        let top16 = beat.q.slice(w - 1, 16);
        // The oldest lane shifts out as the beat fills (a 32-bit beat holds one FP32 value).
        let oldest = beat.q.slice(15, 0);
        m.discard(oldest);
        let shifted32 = if w > 32 {
            let top32 = beat.q.slice(w - 1, 32);
            cat(&[y, top32])
        } else {
            y
        };
        let shifted16 = cat(&[y16, top16]);
        let beat_d = mux(out_f32, shifted32, shifted16);
        m.set_next(beat, beat_d);
        m.set_enable(beat, in_ro);
        let lanes16 = w / 16;
        let lane = m.reg("lane", addr_bits(lanes16), Some(0));
        let last16 = lane.q.eq((lanes16 - 1) as u64);
        let last32 = lane.q.eq((w / 32 - 1) as u64);
        let lane_last = mux(out_f32, last32, last16);
        let lane_inc = lane.q + 1;
        let zero_l = m.zero(lane.q.width());
        let lane_d = mux(lane_last, zero_l, lane_inc);
        let ro_begin = is(Engine::RoWait);
        let lane_d = mux(ro_begin, zero_l, lane_d);
        m.set_next(lane, lane_d);
        let lane_en = in_ro | ro_begin;
        m.set_enable(lane, lane_en);
        let st_beat = m.reg("st_beat", cfg.beat_bits(), Some(0));
        let beat_inc = st_beat.q + 1;
        let zero_b = m.zero(cfg.beat_bits());
        let write = in_ro & lane_last;
        let beat_next = mux(ro_begin, zero_b, beat_inc);
        m.set_next(st_beat, beat_next);
        let beat_en = write | ro_begin;
        m.set_enable(st_beat, beat_en);
        m.output("st_we", write);
        m.output("st_row", ii.q);
        m.output("st_beat", st_beat.q);
        m.output("st_data", beat_d);

        // ---------------- engine sequencing ---------------------------------------------
        let (jj_next, jj_last) = step_counter(m, jj.q, b_n);
        let (cc_next, cc_last) = step_counter(m, cc.q, c_n);
        let (qq_next, qq_last) = step_counter(m, qq.q, e_n);
        let (ii_next, ii_last) = step_counter(m, ii.q, a_n);
        let sweep_end = cc_last & jj_last;
        let ro_end = cc_last & qq_last;
        let sweeping = in_max | in_exp;
        // jj / cc advance through the sweeps; qq / cc through the readout.
        m.set_next(jj, jj_next);
        m.set_enable(jj, sweeping);
        let cc_step_sweep = sweeping & jj_last;
        let cc_step_ro = in_ro & qq_last;
        let cc_en = cc_step_sweep | cc_step_ro;
        m.set_next(cc, cc_next);
        m.set_enable(cc, cc_en);
        m.set_next(qq, qq_next);
        m.set_enable(qq, in_ro);
        // Wait after the exp sweep: the pipeline, one cycle for the last local sum, the tree.
        let drain = m.reg(
            "drain",
            bits_for((exp_lat + tree_latency + 2) as u64),
            Some(0),
        );
        let drain_done = drain.q.is_zero();
        let drain_dec = drain.q - 1;
        let drain_init = m.lit(drain.q.width(), (exp_lat + tree_latency + 1) as u64);
        let enter_drain = in_exp & sweep_end;
        let drain_d = mux(enter_drain, drain_init, drain_dec);
        m.set_next(drain, drain_d);
        let in_drain = is(Engine::ExpDrain);
        let drain_en = enter_drain | in_drain;
        m.set_enable(drain, drain_en);

        let c = |s: Engine| state.code(s);
        let s_idle = c(Engine::Idle);
        let s_init = c(Engine::Init);
        let s_maxs = c(Engine::MaxSweep);
        let s_maxu = c(Engine::MaxUpdate);
        let s_exps = c(Engine::ExpSweep);
        let s_expd = c(Engine::ExpDrain);
        let s_sumu = c(Engine::SumUpdate);
        let s_ror = c(Engine::RoRecip);
        let s_row = c(Engine::RoWait);
        let s_ros = c(Engine::RoSweep);
        let idle = is(Engine::Idle);
        // IDLE: a softmax start (init first on the tile's first block), or a readout.
        let after_start = mux(sm_first, s_init, s_maxs);
        let from_idle = mux(ro_start, s_ror, s_idle);
        let from_idle = mux(sm_start, after_start, from_idle);
        let from_maxs = mux(sweep_end, s_maxu, s_maxs);
        let from_exps = mux(sweep_end, s_expd, s_exps);
        let from_expd = mux(drain_done, s_sumu, s_expd);
        let from_sumu = mux(ii_last, s_idle, s_maxs);
        let from_ror = s_row;
        let from_row = mux(recip_done, s_ros, s_row);
        let from_ros = {
            let row_done = mux(ii_last, s_idle, s_ror);
            mux(ro_end, row_done, s_ros)
        };
        state.set_transitions(m, |s| match s {
            Engine::Idle => from_idle,
            Engine::Init => s_maxs,
            Engine::MaxSweep => from_maxs,
            Engine::MaxUpdate => s_exps,
            Engine::ExpSweep => from_exps,
            Engine::ExpDrain => from_expd,
            Engine::SumUpdate => from_sumu,
            Engine::RoRecip => from_ror,
            Engine::RoWait => from_row,
            Engine::RoSweep => from_ros,
        });
        // ii: reset on a start, advance after a row's sum update or readout.
        let in_sumu = is(Engine::SumUpdate);
        let row_done_sm = in_sumu;
        let row_done_ro = in_ro & ro_end;
        let ii_adv = row_done_sm | row_done_ro;
        let starting = idle & sm_start;
        let starting_ro = idle & ro_start;
        let reset_ii = starting | starting_ro;
        let zero_ii = m.zero(cfg.ii_bits());
        let ii_d = mux(reset_ii, zero_ii, ii_next);
        m.set_next(ii, ii_d);
        let ii_en = ii_adv | reset_ii;
        m.set_enable(ii, ii_en);

        // Row state operations.
        let in_init = is(Engine::Init);
        let op_init = m.lit(2, RowOp::Init as u64);
        let op_max = m.lit(2, RowOp::Max as u64);
        let op_sum = m.lit(2, RowOp::Sum as u64);
        let op_hold = m.lit(2, RowOp::Hold as u64);
        let in_maxu = start_sweep;
        let rop = mux(in_sumu, op_sum, op_hold);
        let rop = mux(in_maxu, op_max, rop);
        let rop = mux(in_init, op_init, rop);
        m.drive(row_op, rop);
        let ones_a = m.ones(a_n);
        let one_hot = bit_of(m, ii.q, a_n);
        let sel = mux(in_init, ones_a, one_hot);
        m.drive(row_sel, sel);

        let busy = !idle;
        m.output("busy", busy);
        // Register-file accesses this cycle, at the ports: each PE's accumulator reads and
        // write-backs, and the engine's reads (one PE's `rd_addr` port per cycle of the max
        // sweep, the exp sweep and the readout).
        let reading = or_all(&[in_max, in_exp, in_ro]);
        let count_w = bits_for(c_n as u64 + 1);
        let mut reads: Vec<Sig> = acc_reads;
        reads.push(reading);
        let reads = m.sum(&reads, count_w);
        let writes = m.sum(&rf_writes, count_w);
        m.output("rf_reads", reads);
        m.output("rf_writes", writes);
        // P buffer accesses (16 bits): a PV step reads the row operand, the exp stage writes
        // each weight.
        m.output("p_read", pv_step);
        m.output("p_write", out_valid);
        let _ = ii_last;
        m.set_latency(1);
    })
}

/// One-hot of `idx` over `n` bits.
fn bit_of(m: &mut ModuleBuilder, idx: Sig, n: u32) -> Sig {
    let one = m.lit(n, 1);
    one << idx
}

/// Bit `row * width + col` of `bits` (rows of `width` bits), selected by `row` then `col`.
fn select_bit2(bits: Sig, rows: u32, width: u32, row: Sig, col: Sig) -> Sig {
    let per_row: Vec<Sig> = (0..rows)
        .map(|r| {
            let bs: Vec<Sig> = (0..width).map(|k| bits.bit(r * width + k)).collect();
            mux_index(col, &bs)
        })
        .collect();
    mux_index(row, &per_row)
}
