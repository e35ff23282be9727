//! `core`: the FlashAttention core: R `pe_row`s (C PEs each, with their row engines), the DMA,
//! two causal-mask generators and the sequencer. Bit-exact model: `kernels::flash`.
//!
//! **Ports.** The memory port (see `dma.rs`); `start` with the problem: `q_addr`, `k_addr`,
//! `v_addr`, `o_addr` (byte addresses of (heads, len, d) row-major FP16 tensors, O in FP16 or,
//! with `out_f32`, FP32), `heads`, `q_len`, `k_len`, `causal`, `c_const` (the softmax constant
//! f32(log2(e)/√d)); `busy`, `done`, `error` (a DMA channel's error code); counters.
//!
//! **Schedule.** Per head, the Q channel streams Q tiles (Br rows); per Q tile, the K and V
//! channels stream the blocks (Bc keys) the tile needs: all of K for non-causal attention, the
//! prefix up to the last row's diagonal for causal (later blocks are entirely masked and are
//! neither fetched nor computed). The MAC phases run back to back:
//! QK(0), QK(1), PV(0), QK(2), PV(1), ..., PV(n−1). QK(j) is d·a·b steps (k, ii, jj), PV(j) is
//! Bc·a·e steps (j, ii, q); one step per cycle, every PE one MAC per step; the next phase is
//! chosen in the current one's last step, so phases run back to back. The softmax of block j
//! runs in the row engines while QK(j+1) and PV(j−1) compute (S in the PE registers, P and the
//! rescale shifts in the row engines are double-buffered by block parity). The Q, K and V
//! channels take their next descriptor (next head, next tile) as soon as they are idle, so
//! first blocks are fetched while the previous tile computes. After a tile's last PV the row
//! engines normalize O into the O staging buffer and the DMA writes it out, while the next
//! tile's QK(0) already runs.
//!
//! **Counters** (48 bits): `cycles` (busy), `mac_cycles` (cycles issuing a MAC step), `macs`
//! (MACs performed), `masked_macs` (MAC slots of issued steps that were masked),
//! `stall_kv`, `stall_q`, `stall_softmax`, `stall_other` (busy cycles without a MAC step, by the
//! reason the next phase could not start), `blocks`, `skipped_blocks`, `rf_reads`,
//! `rf_writes` (32-bit register-file accesses at the PE ports), `p_buf_reads`, `p_buf_writes`
//! (16-bit accesses of the row engines' P buffers), `read_beats`, `write_beats`.
//!
//! **Assertions** (simulation only): a K or V block that has landed is consumed within
//! `kv_bound` cycles; every memory write falls inside the O tile being written (S and P are
//! never written to memory).

use anyhow::{ensure, Result};

use crate::arith::div_ceil_const;
use crate::config::CoreConfig;
use crate::dma::{self, DmaConfig};
use crate::fault::Fault;
use crate::fsm::Fsm;
use crate::mask::{self, MaskConfig};
use crate::pe::{PeOp, OP_BITS};
use crate::pe_row::{self, PeRowConfig};
use crate::{
    addr_bits, and_all, bits_for, cat, mux, mux_index, or_all, Design, ModRef, ModuleBuilder,
    RegHandle, Sig,
};

/// Counter width.
pub const COUNTER_BITS: u32 = 48;

/// Names of the counters, in port order.
pub const COUNTERS: &[&str] = &[
    "cycles",
    "mac_cycles",
    "macs",
    "masked_macs",
    "stall_kv",
    "stall_q",
    "stall_softmax",
    "stall_other",
    "blocks",
    "skipped_blocks",
    "rf_reads",
    "rf_writes",
    "p_buf_reads",
    "p_buf_writes",
    "read_beats",
    "write_beats",
];

/// Everything the core is built from, derived from a `CoreConfig`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CoreParams {
    pub rows: u32,
    pub row: PeRowConfig,
    pub dma: DmaConfig,
    pub mask: MaskConfig,
    pub index_bits: u32,
    pub addr_bits: u32,
    /// Cycles a landed K/V block may wait before the assertion fires.
    pub kv_bound: u32,
    /// A deliberate defect, for fault-injection tests only (see `fault.rs`); None in every
    /// design built from a configuration.
    pub fault: Option<Fault>,
}

impl CoreParams {
    pub fn from_config(c: &CoreConfig) -> Result<Self> {
        c.validate()?;
        let (a, b, e) = (c.br / c.rows, c.bc / c.cols, c.head_dim / c.cols);
        let row = PeRowConfig {
            cols: c.cols,
            a,
            b,
            e,
            pe: c.pe(),
            exp: c.softmax_exp(),
            mem_width: c.mem_width,
            fault: None,
        };
        let p = CoreParams {
            rows: c.rows,
            row,
            dma: c.dma(),
            mask: c.mask(),
            index_bits: c.index_bits,
            addr_bits: c.addr_bits,
            kv_bound: c.kv_bound(),
            fault: None,
        };
        p.validate()?;
        Ok(p)
    }

    pub fn validate(&self) -> Result<()> {
        self.row.validate()?;
        let lat = self.row.pe.latency();
        let r = &self.row;
        ensure!(
            r.regs_needed() <= r.pe.regs,
            "each PE needs {} registers (2 x {} S values double-buffered + {} O values) but has \
             regs_per_pe = {}: raise regs_per_pe or shrink the tile",
            r.regs_needed(),
            r.a * r.b,
            r.a * r.e,
            r.pe.regs
        );
        ensure!(
            r.a * r.b >= lat && r.a * r.e >= lat,
            "a PE updates each of its {} S and {} O accumulators once every {} and {} cycles, \
             fewer than the MAC's {lat}-cycle latency: raise br, bc or head_dim, or lower \
             mul_latency / add_latency",
            r.a * r.b,
            r.a * r.e,
            r.a * r.b,
            r.a * r.e
        );
        ensure!(
            self.dma.width >= 16 && (r.d() * 16).is_multiple_of(self.dma.width),
            "rows of head_dim values must fill whole memory beats"
        );
        Ok(())
    }

    pub fn br(&self) -> u32 {
        self.rows * self.row.a
    }

    pub fn bc(&self) -> u32 {
        self.row.bc()
    }

    pub fn d(&self) -> u32 {
        self.row.d()
    }

    /// FP16 values per memory beat.
    pub fn lanes(&self) -> u32 {
        self.dma.width / 16
    }

    /// MAC steps of one block: QK then PV.
    pub fn block_steps(&self) -> (u32, u32) {
        let r = &self.row;
        (self.d() * r.a * r.b, self.bc() * r.a * r.e)
    }

    pub fn module_name(&self) -> String {
        format!(
            "core_{}x{}_{}{}",
            self.rows,
            self.row.cols,
            self.row.module_name().trim_start_matches("pe_row_"),
            self.fault
                .map_or(String::new(), |f| format!("_fault_{}", f.name()))
        )
    }

    /// The same core with a deliberate defect (fault-injection tests).
    pub fn with_fault(mut self, fault: Fault) -> Self {
        self.fault = Some(fault);
        self.row.fault = Some(fault);
        self
    }

    fn has(&self, fault: Fault) -> bool {
        self.fault == Some(fault)
    }
}

crate::states! {
    /// The main sequencer: per head, per query tile, run the tile's blocks, then hand the tile
    /// to the readout.
    enum Seq = "S" { Idle, Head, Tile, TileGo, Run, End, Finish }
}

crate::states! {
    /// The phase the PE array runs this step.
    enum Phase = "PH" { None, Qk, Pv }
}

crate::states! {
    /// The readout: normalize a finished tile and write it to O.
    enum Readout = "RO" { Idle, Pend, Run, Write }
}

fn counter(m: &mut ModuleBuilder, name: &str, inc: Sig, clear: Sig) -> Sig {
    let r = m.reg(name, COUNTER_BITS, Some(0));
    let inc = inc.zext(COUNTER_BITS);
    let sum = r.q + inc;
    let zero = m.zero(COUNTER_BITS);
    let d = mux(clear, zero, sum);
    m.set_next(r, d);
    r.q
}

fn reg_set(m: &mut ModuleBuilder, r: RegHandle, d: Sig, en: Sig) {
    m.set_next(r, d);
    m.set_enable(r, en);
}

/// Defines the core.
pub fn build(d: &mut Design, p: &CoreParams) -> ModRef {
    let engine = build_engine(d, p);
    d.define(&p.module_name(), |_, m| abort_wrapper(m, &engine))
}

/// The core's top: the engine, and what happens when a DMA descriptor is refused. The engine
/// alone would wait forever for the channel that stopped; here the first nonzero `error` is
/// latched, the memory port stops taking requests (responses to reads already accepted still
/// reach the engine), and once no read is in flight the engine is reset for one cycle. The
/// core then reports `done` with `error` holding the code until the next `start`, which it
/// accepts like any other. Counters restart at zero with the reset. Every other port passes
/// through. Latency 1.
fn abort_wrapper(m: &mut ModuleBuilder, engine: &ModRef) {
    m.doc(
        "core top: the engine (see <name>_engine) and its abort on a DMA descriptor error: the\n\
         error code is latched, the memory port stops taking requests, and when no read is in\n\
         flight the engine is reset; then done = 1 and error holds the code until the next start.",
    );
    const OWN: [&str; 5] = ["start", "mem_req_ready", "busy", "done", "error"];
    let mut inputs = vec![];
    for port in engine
        .ports
        .iter()
        .filter(|p| p.dir == crate::ir::Dir::Input)
    {
        if !OWN.contains(&port.name.as_str()) {
            inputs.push((port.name.clone(), m.input(&port.name, port.width)));
        }
    }
    let start = m.input("start", 1);
    let mem_ready = m.input("mem_req_ready", 1);
    let draining = m.reg("draining", 1, Some(0));
    let soft_rst = m.net("engine_reset", 1);
    let engine_rst = m.rst_or(soft_rst);
    let engine_start = start & !draining.q;
    let engine_ready = mem_ready & !draining.q;
    let mut conns: Vec<(&str, Sig)> = inputs.iter().map(|(n, s)| (n.as_str(), *s)).collect();
    conns.push(("start", engine_start));
    conns.push(("mem_req_ready", engine_ready));
    let e = m.instance_with_reset(engine, "u_engine", &conns, engine_rst);
    // Reads in flight: accepted read requests minus responses.
    let req_valid = e.get("mem_req_valid");
    let req_valid = req_valid & !draining.q;
    let read_taken = req_valid & mem_ready;
    let read_taken = read_taken & !e.get("mem_req_write");
    let rsp = inputs
        .iter()
        .find(|(n, _)| n == "mem_rsp_valid")
        .map(|(_, s)| *s)
        .expect("the engine has a memory response port");
    let bits = 16;
    let inflight = m.reg("reads_in_flight", bits, Some(0));
    let up = inflight.q + 1;
    let down = inflight.q - 1;
    let same = read_taken.eq(rsp);
    let n_d = mux(read_taken, up, down);
    let n_d = mux(same, inflight.q, n_d);
    m.set_next(inflight, n_d);
    let none_in_flight = inflight.q.is_zero();
    // Abort: latch the first error, drain, reset the engine for one cycle, report done.
    let error = e.get("error");
    let go = {
        let idle = !e.get("busy");
        let idle = idle & !draining.q;
        start & idle
    };
    let failed = error.any();
    let begin = failed & !draining.q;
    let code = m.reg("error_code", error.width(), Some(0));
    let zero_code = m.zero(error.width());
    let code_d = mux(go, zero_code, error);
    let code_en = go | begin;
    m.set_next(code, code_d);
    m.set_enable(code, code_en);
    let reset_now = draining.q & none_in_flight;
    m.drive(soft_rst, reset_now);
    let drain_d = begin | draining.q;
    let drain_d = drain_d & !reset_now;
    m.set_next(draining, drain_d);
    let aborted = m.reg("aborted", 1, Some(0));
    let ab_d = reset_now | aborted.q;
    let ab_d = ab_d & !go;
    m.set_next(aborted, ab_d);
    for port in engine
        .ports
        .iter()
        .filter(|p| p.dir == crate::ir::Dir::Output)
    {
        let v = e.get(&port.name);
        let v = match port.name.as_str() {
            "mem_req_valid" => req_valid,
            "busy" => v | draining.q,
            "done" => v | aborted.q,
            "error" => {
                m.discard(v);
                code.q
            }
            _ => v,
        };
        m.output(&port.name, v);
    }
    m.set_latency(1);
}

/// The engine: sequencer, fetch, PE rows, readout, counters and assertions.
fn build_engine(d: &mut Design, p: &CoreParams) -> ModRef {
    let row_mod = pe_row::build(d, &p.row);
    let dma_mod = dma::build(d, &p.dma);
    let mask_mod = mask::build(d, &p.mask);
    let p = *p;
    d.define(&format!("{}_engine", p.module_name()), |_, m| {
        m.doc(&format!(
            "core: FlashAttention on {} x {} PEs, Br = {}, Bc = {}, d = {}. See hdl/src/core.rs\n\
             for the ports, the schedule, the counters and the assertions.",
            p.rows,
            p.row.cols,
            p.br(),
            p.bc(),
            p.d()
        ));
        let (rr, cn, a_n, b_n, e_n) = (p.rows, p.row.cols, p.row.a, p.row.b, p.row.e);
        let (br, bc, dd) = (p.br(), p.bc(), p.d());
        let iw = p.index_bits;
        let aw_addr = p.addr_bits;
        let lanes = p.lanes();
        let w = p.dma.width;
        let row_bytes = (dd * 2) as u64;

        // ---------------- problem inputs ----------------------------------------------
        let start = m.input("start", 1);
        let q_addr = m.input("q_addr", aw_addr);
        let k_addr = m.input("k_addr", aw_addr);
        let v_addr = m.input("v_addr", aw_addr);
        let o_addr = m.input("o_addr", aw_addr);
        let heads = m.input("heads", iw);
        let q_len = m.input("q_len", iw);
        let k_len = m.input("k_len", iw);
        let causal = m.input("causal", 1);
        let out_f32 = m.input("out_f32", 1);
        let c_const = m.input("c_const", 32);
        // Latched at start: the problem does not change while the core runs.
        let state = Fsm::new(m, "state", Seq::Idle);
        let idle = state.is(Seq::Idle);
        let go = start & idle;
        let go = m.name("go", go);
        let hq = |m: &mut ModuleBuilder, n: &str, x: Sig| m.hold(n, x, go);
        let q_addr = hq(m, "q_base_addr", q_addr);
        let k_addr = hq(m, "k_base_addr", k_addr);
        let v_addr = hq(m, "v_base_addr", v_addr);
        let o_addr = hq(m, "o_base_addr", o_addr);
        let heads = hq(m, "n_heads", heads);
        let q_len = hq(m, "q_length", q_len);
        let k_len = hq(m, "k_length", k_len);
        let causal = hq(m, "is_causal", causal);
        let out_f32 = hq(m, "is_f32", out_f32);
        let c_const = hq(m, "softmax_c", c_const);
        let o_row_bytes = {
            let rb16 = m.lit(16, row_bytes);
            let rb32 = m.lit(16, 2 * row_bytes);
            mux(out_f32, rb32, rb16)
        };

        // ---------------- DMA ----------------------------------------------------------
        let dma_in =
            |m: &mut ModuleBuilder, name: &str, width: u32| m.net(&format!("dma_{name}"), width);
        let mut dma_conns: Vec<(String, Sig)> = vec![];
        let mut dma_nets = std::collections::HashMap::new();
        for port in dma_mod
            .ports
            .iter()
            .filter(|x| x.dir == crate::ir::Dir::Input)
        {
            let s = if port.name.starts_with("mem_") {
                m.input(&port.name, port.width)
            } else {
                let s = dma_in(m, &port.name, port.width);
                dma_nets.insert(port.name.clone(), s);
                s
            };
            dma_conns.push((port.name.clone(), s));
        }
        let refs: Vec<(&str, Sig)> = dma_conns.iter().map(|(n, s)| (n.as_str(), *s)).collect();
        let dm = m.instance(&dma_mod, "u_dma", &refs);
        let dn = |n: &str| dma_nets[n];
        for port in dma_mod
            .ports
            .iter()
            .filter(|x| x.dir == crate::ir::Dir::Output)
        {
            if port.name.starts_with("mem_") {
                m.output(&port.name, dm.get(&port.name));
            }
        }
        let q_ready = dm.get("q_ready");
        let k_ready = dm.get("k_ready");
        let v_ready = dm.get("v_ready");
        let q_busy = dm.get("q_busy");
        let k_busy = dm.get("k_busy");
        let v_busy = dm.get("v_busy");
        let o_busy = dm.get("o_busy");

        // ---------------- sequencer registers -------------------------------------------
        let head = m.reg("head", iw, Some(0));
        let q_base = m.reg("q_base", iw, Some(0));
        let o_head_off = m.reg("o_head_off", aw_addr, Some(0));
        let nblk = m.reg("nblk", iw, Some(0));
        let ph_kind = Fsm::new(m, "ph_kind", Phase::None);
        let ph_blk = m.reg("ph_blk", iw, Some(0));
        let kk = m.reg("k", addr_bits(dd), Some(0));
        let ii = m.reg("ii", addr_bits(a_n), Some(0));
        let jj = m.reg("jj", addr_bits(b_n), Some(0));
        let jk = m.reg("jk", addr_bits(bc), Some(0));
        let qq = m.reg("q", addr_bits(e_n), Some(0));
        let qk_issued = m.reg("qk_issued", iw, Some(0));
        let pv_issued = m.reg("pv_issued", iw, Some(0));
        let qk_done = m.reg("qk_done", iw, Some(0));
        let pv_done = m.reg("pv_done", iw, Some(0));
        let sm_done = m.reg("sm_done", iw, Some(0));
        let sm_running = m.reg("sm_running", 1, Some(0));
        let sm_kbase = m.reg("sm_kbase", iw, Some(0));
        let ro_state = Fsm::new(m, "ro_state", Readout::Idle);
        let ro_rows = m.reg("ro_rows", iw, Some(0));
        let ro_qbase = m.reg("ro_qbase", iw, Some(0));
        let ro_zero = m.reg("ro_zero", 1, Some(0));
        let ro_ohead = m.reg("ro_ohead", aw_addr, Some(0));

        let s_tile = state.is(Seq::Tile);
        let s_tile_go = state.is(Seq::TileGo);
        let s_run = state.is(Seq::Run);
        let s_end = state.is(Seq::End);
        let s_finish = state.is(Seq::Finish);
        let in_qk = ph_kind.is(Phase::Qk);
        let in_pv = ph_kind.is(Phase::Pv);
        let no_phase = ph_kind.is(Phase::None);
        let ro_idle = ro_state.is(Readout::Idle);

        // Per-tile derived values: the tile's last row, the keys it needs, its blocks.
        let brl = m.lit(iw, br as u64);
        // The keys the tile starting at query row `qb` needs: all of K, or for causal attention
        // keys up to its last row's diagonal, tile_end + k_len - q_len (bottom-right aligned).
        let keys_needed = |m: &mut ModuleBuilder, qb: Sig| -> (Sig, Sig) {
            let tile_end = qb + brl;
            let past_end = tile_end.gt(q_len);
            let tile_end = mux(past_end, q_len, tile_end);
            let wide = iw + 2;
            let te = tile_end.zext(wide);
            let kl = k_len.zext(wide);
            let ql = q_len.zext(wide);
            let reach = te + kl;
            let reach = reach - ql;
            let zero_w = m.zero(wide);
            let negative = reach.lt_signed(zero_w);
            let reach = mux(negative, zero_w, reach);
            let over = reach.gt(kl);
            let reach = mux(over, kl, reach);
            let reach = reach.trunc(iw);
            (mux(causal, reach, k_len), tile_end)
        };
        let (need_d, tile_end) = keys_needed(m, q_base.q);
        let rows_valid = tile_end - q_base.q;
        let rows_valid = m.name("rows_valid", rows_valid);
        let need_d = m.name("keys_needed", need_d);
        let nblk_d = div_ceil_const(m, need_d, bc as u64);
        let all_blocks = div_ceil_const(m, k_len, bc as u64);

        // ---------------- phase selection and steps -------------------------------------
        // QK may run at most two blocks ahead of PV: QK(0), QK(1), PV(0), QK(2), PV(1), ...
        // The next phase is chosen in the last step of the current one, so phases run back to
        // back, from the issue counts as they will be after this cycle. A phase never follows
        // one of its own kind directly: the block just released has not yet been replaced in
        // the channel's ready flag.
        let qk_last_step = m.net("qk_last_step", 1);
        let pv_last_step = m.net("pv_last_step", 1);
        let qk_issued_n = {
            let inc = qk_last_step.zext(iw);
            qk_issued.q + inc
        };
        let pv_issued_n = {
            let inc = pv_last_step.zext(iw);
            pv_issued.q + inc
        };
        let qk_more = qk_issued_n.lt(nblk.q);
        let pv_plus2 = pv_issued_n + 2;
        let qk_allowed = qk_issued_n.lt(pv_plus2);
        let want_qk = qk_more & qk_allowed;
        let pv_more = pv_issued_n.lt(qk_issued_n);
        let sm_ahead = sm_done.q.gt(pv_issued_n);
        let phase_over = qk_last_step | pv_last_step;
        let free = no_phase | phase_over;
        let choose = s_run & free;
        let qk_can = and_all(&[want_qk, k_ready, q_ready]);
        let qk_can = qk_can & !qk_last_step;
        let pv_can = and_all(&[pv_more, sm_ahead, v_ready]);
        let pv_can = pv_can & !pv_last_step;
        let want_pv = !want_qk;
        let pv_can = pv_can & want_pv;
        // Faults: a phase kind that never starts.
        let qk_can = if p.has(Fault::StallQk) {
            m.discard(qk_can);
            m.zero(1)
        } else {
            qk_can
        };
        let pv_can = if p.has(Fault::StallPv) {
            m.discard(pv_can);
            m.zero(1)
        } else {
            pv_can
        };
        let start_qk = choose & qk_can;
        let start_qk = m.name("start_qk", start_qk);
        let start_pv = choose & pv_can;
        let start_pv = m.name("start_pv", start_pv);

        // Step counters: QK (k, ii, jj), PV (jk, ii, q), innermost last.
        let step = |m: &mut ModuleBuilder, r: RegHandle, n: u32| pe_row::step_counter(m, r.q, n);
        let (jj_n, jj_last) = step(m, jj, b_n);
        let (ii_n, ii_last) = step(m, ii, a_n);
        let (k_n, k_last) = step(m, kk, dd);
        let (q_n, q_last) = step(m, qq, e_n);
        let (jk_n, jk_last) = step(m, jk, bc);
        let qk_inner = jj_last;
        let qk_mid = jj_last & ii_last;
        let qk_end = qk_mid & k_last;
        let pv_mid = q_last & ii_last;
        let pv_end = pv_mid & jk_last;
        let qk_end = in_qk & qk_end;
        m.drive(qk_last_step, qk_end);
        let pv_end = in_pv & pv_end;
        m.drive(pv_last_step, pv_end);
        let begin = start_qk | start_pv;
        // jj / ii / k advance in QK, q / ii / jk in PV; all reset when a phase begins.
        let advance = |m: &mut ModuleBuilder, r: RegHandle, next: Sig, step: Sig| {
            let zero = m.zero(r.q.width());
            let d = mux(begin, zero, next);
            let en = step | begin;
            reg_set(m, r, d, en);
        };
        advance(m, jj, jj_n, in_qk);
        let ii_step_qk = in_qk & qk_inner;
        let ii_step_pv = in_pv & q_last;
        let ii_step = ii_step_qk | ii_step_pv;
        advance(m, ii, ii_n, ii_step);
        let k_step = in_qk & qk_mid;
        advance(m, kk, k_n, k_step);
        advance(m, qq, q_n, in_pv);
        let jk_step = in_pv & pv_mid;
        advance(m, jk, jk_n, jk_step);
        // Phase kind and block.
        let kind_d = mux(start_pv, ph_kind.code(Phase::Pv), ph_kind.code(Phase::None));
        let kind_d = mux(start_qk, ph_kind.code(Phase::Qk), kind_d);
        let kind_en = begin | phase_over;
        ph_kind.set_next(m, kind_d);
        ph_kind.set_enable(m, kind_en);
        let blk_d = mux(start_qk, qk_issued_n, pv_issued_n);
        reg_set(m, ph_blk, blk_d, begin);

        // Phase bookkeeping: issued counts at the last step, drained counts L cycles later.
        let tile_reset = s_tile_go;
        let zero_iw = m.zero(iw);
        let count_by = |m: &mut ModuleBuilder, r: RegHandle, inc: Sig, by: u64| {
            let plus = r.q + by;
            let d = mux(tile_reset, zero_iw, plus);
            let en = inc | tile_reset;
            reg_set(m, r, d, en);
        };
        let count = |m: &mut ModuleBuilder, r: RegHandle, inc: Sig| count_by(m, r, inc, 1);
        // Faults: the sequencer counts a phase kind's blocks two at a time (loses count).
        let by = |f: Fault| if p.has(f) { 2 } else { 1 };
        count_by(m, qk_issued, qk_last_step, by(Fault::SkipK));
        count_by(m, pv_issued, pv_last_step, by(Fault::SkipV));
        let lat = p.row.pe.latency();
        let qk_drained = m.delay_n("qk_drain", qk_last_step, lat);
        let pv_drained = m.delay_n("pv_drain", pv_last_step, lat);
        count(m, qk_done, qk_drained);
        count(m, pv_done, pv_drained);

        // ---------------- softmax trigger ---------------------------------------------
        let rows_busy = m.net("rows_busy", 1);
        let sm_more = sm_done.q.lt(nblk.q);
        let qk_ready = qk_done.q.gt(sm_done.q);
        // P and the shifts are double-buffered: softmax j may run once PV(j-2) has issued.
        let pv_issued_1 = pv_issued.q + 1;
        let p_free = pv_issued_1.ge(sm_done.q);
        let first_block = sm_done.q.is_zero();
        let later_block = !first_block;
        let ro_ok = ro_idle | later_block;
        let not_running = !sm_running.q;
        let not_busy = !rows_busy;
        let sm_go = and_all(&[
            s_run,
            sm_more,
            qk_ready,
            p_free,
            ro_ok,
            not_running,
            not_busy,
        ]);
        let sm_go = m.name("sm_go", sm_go);
        // Running until the engines, busy from the next cycle, are idle again.
        let sm_seen = m.reg("sm_seen", 1, Some(0));
        let zero_bit = m.zero(1);
        let seen_d = mux(sm_go, zero_bit, rows_busy);
        let seen_d = seen_d | sm_seen.q;
        let seen_d = seen_d & !sm_go;
        let finished = and_all(&[sm_running.q, sm_seen.q, not_busy]);
        let seen_d = mux(finished, zero_bit, seen_d);
        m.set_next(sm_seen, seen_d);
        let one1 = m.lit(1, 1);
        let zero1 = m.zero(1);
        let run_d = mux(sm_go, one1, zero1);
        let run_en = sm_go | finished;
        reg_set(m, sm_running, run_d, run_en);
        count(m, sm_done, finished);
        let bcl = m.lit(iw, bc as u64);
        let next_kbase = sm_done.q.mul_lo(bcl, iw);
        reg_set(m, sm_kbase, next_kbase, sm_go);

        // ---------------- main sequencer --------------------------------------------------
        let head_last = head.q.ge(heads);
        let tiles_done = q_base.q.ge(q_len);
        let empty_tile = nblk.q.is_zero();
        let all_pv = pv_issued.q.ge(nblk.q);
        let drained = pv_done.q.ge(nblk.q);
        let end_ok = drained & ro_idle;
        let st = |s: Seq| state.code(s);
        let from_idle = mux(go, st(Seq::Head), st(Seq::Idle));
        let from_head = mux(head_last, st(Seq::Finish), st(Seq::Tile));
        let from_tile = mux(tiles_done, st(Seq::Head), st(Seq::TileGo));
        // An empty tile (no block to compute) still waits for its Q block, to release it.
        let q_not_ready = !q_ready;
        let go_wait = and_all(&[s_tile_go, empty_tile, q_not_ready]);
        let go_wait = m.name("empty_tile_wait", go_wait);
        let go_once = s_tile_go & !go_wait;
        let from_go = mux(go_wait, st(Seq::TileGo), st(Seq::Run));
        let from_run = mux(all_pv, st(Seq::End), st(Seq::Run));
        let from_end = mux(end_ok, st(Seq::Tile), st(Seq::End));
        let o_idle = !o_busy;
        let fin_ok = ro_idle & o_idle;
        let from_fin = mux(fin_ok, st(Seq::Idle), st(Seq::Finish));
        state.set_transitions(m, |s| match s {
            Seq::Idle => from_idle,
            Seq::Head => from_head,
            Seq::Tile => from_tile,
            Seq::TileGo => from_go,
            Seq::Run => from_run,
            Seq::End => from_end,
            Seq::Finish => from_fin,
        });
        // Heads: O's offset steps per head; q_base restarts.
        let head_next = s_tile & tiles_done;
        let zero_a = m.zero(aw_addr);
        let rb_lit = m.lit(16, row_bytes);
        let o_span = q_len.mul_lo(o_row_bytes, aw_addr);
        let o_next = o_head_off.q + o_span;
        let o_off_d = mux(go, zero_a, o_next);
        let o_off_en = go | head_next;
        reg_set(m, o_head_off, o_off_d, o_off_en);
        let head_inc = head.q + 1;
        let head_d = mux(go, zero_iw, head_inc);
        let head_en = go | head_next;
        reg_set(m, head, head_d, head_en);
        // Tiles: q_base steps by Br at the end of each tile, restarts per head.
        let tile_next = s_end & end_ok;
        let q_step = q_base.q + brl;
        let head_reset = go | head_next;
        let q_d = mux(head_reset, zero_iw, q_step);
        let q_en = head_reset | tile_next;
        reg_set(m, q_base, q_d, q_en);
        reg_set(m, nblk, nblk_d, s_tile);

        // ---------------- DMA descriptors and handshakes ----------------------------------
        let set = |m: &mut ModuleBuilder, n: &str, v: Sig| {
            let t = dn(n);
            let v = if v.width() == t.width() {
                v
            } else if v.width() < t.width() {
                v.zext(t.width())
            } else {
                v.trunc(t.width())
            };
            m.drive(t, v);
        };
        let row_bytes16 = m.lit(16, row_bytes);
        let stride_l = m.lit(aw_addr, row_bytes);
        // Fetch cursors run ahead of the sequencer: a channel takes its next descriptor as soon
        // as it is idle (its last block released), so the next tile's (or head's) first block is
        // fetched while the current tile still computes. A channel with an error stops.
        let running = !idle;
        let heads_w = heads.zext(iw);
        // Q: one descriptor per head, a block per tile.
        let qf_head = m.reg("qf_head", iw, Some(0));
        let qf_off = m.reg("qf_off", aw_addr, Some(0));
        let q_ok = dm.get("q_error").is_zero();
        let qf_more = qf_head.q.lt(heads_w);
        let q_free = !q_busy;
        let q_start = and_all(&[running, qf_more, q_free, q_ok]);
        let q_start = m.name("q_fetch_start", q_start);
        let qf_inc = qf_head.q + 1;
        let qf_head_d = mux(go, zero_iw, qf_inc);
        let qf_en = go | q_start;
        reg_set(m, qf_head, qf_head_d, qf_en);
        let q_span = q_len.mul_lo(rb_lit, aw_addr);
        let qf_next = qf_off.q + q_span;
        let qf_off_d = mux(go, zero_a, qf_next);
        reg_set(m, qf_off, qf_off_d, qf_en);
        set(m, "q_start", q_start);
        let qa = q_addr + qf_off.q;
        set(m, "q_base", qa);
        set(m, "q_stride", stride_l);
        set(m, "q_row_bytes", row_bytes16);
        set(m, "q_rows", q_len);
        set(m, "q_block_rows", brl);
        set(m, "q_want", zero_bit);
        // The Q tile is released after its last QK step, or at once for a tile with no block.
        let q_last_qk = {
            let last_blk = ph_blk.q + 1;
            let is_last = last_blk.eq(nblk.q);
            qk_last_step & is_last
        };
        let empty_release = go_once & empty_tile;
        let q_rel = q_last_qk | empty_release;
        let q_rel = if p.has(Fault::ReleaseQUnheld) {
            q_rel | go
        } else {
            q_rel
        };
        set(m, "q_release", q_rel);
        // K and V: one descriptor per tile with keys to see, blocks of Bc rows; each channel
        // walks (head, tile) on its own and skips tiles that need no key.
        let kv_span = k_len.mul_lo(rb_lit, aw_addr);
        for (ch, addr, busy) in [("k", k_addr, k_busy), ("v", v_addr, v_busy)] {
            let f_head = m.reg(&format!("{ch}f_head"), iw, Some(0));
            let f_qbase = m.reg(&format!("{ch}f_qbase"), iw, Some(0));
            let f_off = m.reg(&format!("{ch}f_off"), aw_addr, Some(0));
            let ok = dm.get(&format!("{ch}_error")).is_zero();
            let more = f_head.q.lt(heads_w);
            let active = and_all(&[running, more, ok]);
            let head_over = f_qbase.q.ge(q_len);
            let (need, _) = keys_needed(m, f_qbase.q);
            let no_keys = need.is_zero();
            let has_keys = !no_keys;
            let free = !busy;
            let in_head = active & !head_over;
            let take = in_head & free;
            let start = take & has_keys;
            let start = m.name(&format!("{ch}_fetch_start"), start);
            let next_head = active & head_over;
            // (head, q_base, offset): the next tile at a take, the next head at a head end.
            let h_inc = f_head.q + 1;
            let h_d = mux(go, zero_iw, h_inc);
            let h_en = go | next_head;
            reg_set(m, f_head, h_d, h_en);
            let qb_step = f_qbase.q + brl;
            let qb_reset = go | next_head;
            let qb_d = mux(qb_reset, zero_iw, qb_step);
            let qb_en = qb_reset | take;
            reg_set(m, f_qbase, qb_d, qb_en);
            let off_next = f_off.q + kv_span;
            let off_d = mux(go, zero_a, off_next);
            reg_set(m, f_off, off_d, h_en);
            let base = addr + f_off.q;
            set(m, &format!("{ch}_start"), start);
            set(m, &format!("{ch}_base"), base);
            set(m, &format!("{ch}_stride"), stride_l);
            set(m, &format!("{ch}_row_bytes"), row_bytes16);
            set(m, &format!("{ch}_rows"), need);
            set(m, &format!("{ch}_block_rows"), bcl);
        }
        set(m, "k_want", zero_bit);
        set(m, "v_want", zero_bit);
        // Faults: release at start, when nothing is held yet.
        let release = |m: &mut ModuleBuilder, ch: &str, last: Sig, early| {
            let r = if p.has(early) { last | go } else { last };
            m.name(&format!("{ch}_rel"), r)
        };
        let k_rel = release(m, "k", qk_last_step, Fault::ReleaseKUnheld);
        let v_rel = release(m, "v", pv_last_step, Fault::ReleaseVUnheld);
        set(m, "k_release", k_rel);
        set(m, "v_release", v_rel);

        // ---------------- mask generators -----------------------------------------------
        let qk_kbase = ph_blk.q.mul_lo(bcl, iw);
        // Fault: the diagonal one key late (also unmasks key k_len, never fetched when k_len
        // is a multiple of Bc).
        let mask_k_len = if p.has(Fault::CausalOffByOne) {
            k_len + 1
        } else {
            k_len
        };
        let ma = m.instance(
            &mask_mod,
            "u_mask_qk",
            &[
                ("q_base", q_base.q),
                ("k_base", qk_kbase),
                ("q_len", q_len),
                ("k_len", mask_k_len),
                ("causal", causal),
            ],
        );
        let mask_a = ma.get("mask");
        m.discard(ma.get("skip"));
        let mb = m.instance(
            &mask_mod,
            "u_mask_sp",
            &[
                ("q_base", q_base.q),
                ("k_base", sm_kbase.q),
                ("q_len", q_len),
                ("k_len", mask_k_len),
                ("causal", causal),
            ],
        );
        let mask_b = mb.get("mask");
        m.discard(mb.get("skip"));

        // ---------------- operands ------------------------------------------------------
        let lane_bits = addr_bits(lanes);
        let q_land = &p.dma.q;
        let k_land = &p.dma.k;
        let k_lane = kk.q.trunc(lane_bits.min(kk.q.width()));
        let k_lane = k_lane.zext(lane_bits);
        let k_beat = if kk.q.width() > lane_bits {
            kk.q.slice(kk.q.width() - 1, lane_bits)
        } else {
            m.zero(1)
        };
        let field = |x: Sig, bits: u32| -> Option<Sig> {
            (bits > 0).then(|| {
                if x.width() >= bits {
                    x.trunc(bits)
                } else {
                    x.zext(bits)
                }
            })
        };
        let q_slot = dm.get("q_slot");
        let k_slot = dm.get("k_slot");
        let v_slot = dm.get("v_slot");
        let q_rd = {
            let mut parts = vec![q_slot];
            parts.extend(field(ii.q, q_land.local_row_bits()));
            parts.extend(field(k_beat, q_land.beat_bits()));
            cat(&parts)
        };
        set(m, "q_rd_addr", q_rd);
        let k_rd = {
            let mut parts = vec![k_slot];
            parts.extend(field(jj.q, k_land.local_row_bits()));
            parts.extend(field(k_beat, k_land.beat_bits()));
            cat(&parts)
        };
        set(m, "k_rd_addr", k_rd);
        let v_rd = {
            let jkf = field(jk.q, p.dma.v.row_bits()).expect("rows");
            cat(&[v_slot, jkf])
        };
        set(m, "v_rd_addr", v_rd);
        let lane_of = |beat: Sig, lane: Sig| -> Sig {
            let vals: Vec<Sig> = (0..beat.width() / 16)
                .map(|i| beat.slice(16 * i + 15, 16 * i))
                .collect();
            mux_index(lane, &vals)
        };
        let q_data = dm.get("q_rd_data");
        let k_data = dm.get("k_rd_data");
        let v_data = dm.get("v_rd_data");
        let mut k_cols = vec![];
        let mut v_cols = vec![];
        for c in 0..cn {
            let kb = k_data.slice(w * c + w - 1, w * c);
            k_cols.push(lane_of(kb, k_lane));
            let lanes_c: Vec<Sig> = (0..e_n)
                .map(|q| {
                    let lane = c * e_n + q;
                    v_data.slice(16 * lane + 15, 16 * lane)
                })
                .collect();
            let qsel = if e_n == 1 { m.zero(1) } else { qq.q };
            v_cols.push(mux_index(qsel, &lanes_c));
        }
        k_cols.reverse();
        v_cols.reverse();
        let k_bus = cat(&k_cols);
        let v_bus = cat(&v_cols);
        let b_col = mux(in_pv, v_bus, k_bus);
        let b_col = m.name("b_col", b_col);

        // ---------------- PE rows -----------------------------------------------------------
        let step_valid = in_qk | in_pv;
        let blk_parity = ph_blk.q.bit(0);
        let first_k = kk.q.is_zero();
        let op_clear = m.lit(OP_BITS, PeOp::MacClear as u64);
        let op_mac = m.lit(OP_BITS, PeOp::Mac as u64);
        let qk_op = mux(first_k, op_clear, op_mac);
        let aw_pe = p.row.pe.addr_width();
        let s_addr = {
            let slot = ph_blk.q.bit(0);
            p.row.s_addr_rtl(m, slot, ii.q, jj.q, aw_pe)
        };
        let o_addr_pe = p.row.o_addr_rtl(m, ii.q, qq.q, aw_pe);
        let step_addr = mux(in_pv, o_addr_pe, s_addr);
        let step_jj = if b_n == 1 { m.zero(1) } else { jj.q };
        let pv_arm = start_pv; // the cycle before a PV phase's first step
        let ro_go = ro_state.is(Readout::Pend);
        let ro_go = ro_go & !rows_busy;
        let ro_go = ro_go & !o_busy;
        let ro_go = m.name("ro_go", ro_go);
        let sm_slot = sm_done.q.bit(0);
        let mut busy_any = m.zero(1);
        let mut row_outs = vec![];
        let mut st_en = vec![];
        let mut st_row = vec![];
        let mut st_beat = vec![];
        let mut st_data = vec![];
        for r in 0..rr {
            let qb = q_data.slice(w * r + w - 1, w * r);
            let a_q = lane_of(qb, k_lane);
            let lo = a_n * r * bc;
            let mq = mask_a.slice(lo + a_n * bc - 1, lo);
            let ms = mask_b.slice(lo + a_n * bc - 1, lo);
            let out = m.instance(
                &row_mod,
                &format!("row{r}"),
                &[
                    ("a_q", a_q),
                    ("b_col", b_col),
                    ("step_valid", step_valid),
                    ("step_pv", in_pv),
                    ("step_op", qk_op),
                    ("step_addr", step_addr),
                    ("step_ii", ii.q),
                    ("step_jj", step_jj),
                    ("step_j", jk.q),
                    ("step_last", q_last),
                    ("step_slot", blk_parity),
                    ("mask_qk", mq),
                    ("mask_sp", ms),
                    ("pv_block_start", pv_arm),
                    ("sm_start", sm_go),
                    ("sm_first", first_block),
                    ("sm_slot", sm_slot),
                    ("c_const", c_const),
                    ("ro_start", ro_go),
                    ("ro_zero", ro_zero.q),
                    ("out_f32", out_f32),
                ],
            );
            busy_any = busy_any | out.get("busy");
            st_en.push(out.get("st_we"));
            st_row.push(out.get("st_row"));
            st_beat.push(out.get("st_beat"));
            st_data.push(out.get("st_data"));
            row_outs.push(out);
        }
        m.drive(rows_busy, busy_any);
        // Per-cycle activity summed over the rows: MACs; register-file accesses at the ports
        // (up to C + 1 reads, each PE's accumulator port and the engine's read, and C writes per
        // row); P-buffer accesses (one read and one write per row at most).
        let sum_rows = |m: &mut ModuleBuilder, port: &str, width: u32| {
            let xs: Vec<Sig> = row_outs.iter().map(|o| o.get(port)).collect();
            m.sum(&xs, width)
        };
        let macs_sum = sum_rows(m, "macs", bits_for((rr * cn) as u64));
        let acc_w = bits_for((rr * (cn + 1)) as u64);
        let rf_reads_sum = sum_rows(m, "rf_reads", acc_w);
        let rf_writes_sum = sum_rows(m, "rf_writes", acc_w);
        let p_w = bits_for(rr as u64);
        let p_reads_sum = sum_rows(m, "p_read", p_w);
        let p_writes_sum = sum_rows(m, "p_write", p_w);
        for v in [&mut st_en, &mut st_row, &mut st_beat, &mut st_data] {
            v.reverse();
        }
        let st_en = cat(&st_en);
        set(m, "o_wr_en", st_en);
        if p.dma.o_local_row_bits() > 0 {
            let rows: Vec<Sig> = st_row
                .iter()
                .map(|&r| field(r, p.dma.o_local_row_bits()).unwrap())
                .collect();
            let rows = cat(&rows);
            set(m, "o_wr_row", rows);
        } else {
            for r in st_row {
                m.discard(r);
            }
        }
        let beats: Vec<Sig> = st_beat
            .iter()
            .map(|&b| field(b, p.dma.o_beat_bits()).unwrap())
            .collect();
        let beats = cat(&beats);
        set(m, "o_wr_beat", beats);
        let data = cat(&st_data);
        set(m, "o_wr_data", data);

        // ---------------- readout hand-off and O write -------------------------------------
        let handoff = s_end & end_ok;
        let handoff = m.name("handoff", handoff);
        reg_set(m, ro_rows, rows_valid, handoff);
        reg_set(m, ro_qbase, q_base.q, handoff);
        reg_set(m, ro_zero, empty_tile, handoff);
        reg_set(m, ro_ohead, o_head_off.q, handoff);
        let ro_seen = m.reg("ro_seen", 1, Some(0));
        let in_ro_run = ro_state.is(Readout::Run);
        let seen_d = ro_seen.q | rows_busy;
        let seen_d = seen_d & in_ro_run;
        m.set_next(ro_seen, seen_d);
        let ro_finished = and_all(&[in_ro_run, ro_seen.q, not_busy]);
        let in_write = ro_state.is(Readout::Write);
        let o_start = in_write & o_idle;
        let o_start = m.name("o_start", o_start);
        let r = |s: Readout| ro_state.code(s);
        ro_state.set_transitions(m, |s| match s {
            Readout::Idle => mux(handoff, r(Readout::Pend), r(Readout::Idle)),
            Readout::Pend => mux(ro_go, r(Readout::Run), r(Readout::Pend)),
            Readout::Run => mux(ro_finished, r(Readout::Write), r(Readout::Run)),
            Readout::Write => mux(o_start, r(Readout::Idle), r(Readout::Write)),
        });
        set(m, "o_start", o_start);
        let o_tile_off = { ro_qbase.q.mul_lo(o_row_bytes, aw_addr) };
        let o_base = o_addr + ro_ohead.q;
        let o_base = o_base + o_tile_off;
        let o_base = m.name("o_tile_base", o_base);
        // Fault: the descriptor's base one row late (the checker keeps the tile's own region).
        let o_desc_base = if p.has(Fault::WriteOutsideO) {
            let one_row = o_row_bytes.zext(aw_addr);
            o_base + one_row
        } else {
            o_base
        };
        set(m, "o_base", o_desc_base);
        let o_stride = o_row_bytes.zext(aw_addr);
        set(m, "o_stride", o_stride);
        set(m, "o_row_bytes", o_row_bytes);
        set(m, "o_rows", ro_rows.q);
        // The O region being written, for the write assertion.
        let o_span = { ro_rows.q.mul_lo(o_stride, aw_addr) };
        let o_limit = o_base + o_span;
        // Latched when the write starts: the next tile's hand-off may change o_base meanwhile.
        let wr_base = m.hold("o_write_base", o_base, o_start);
        let wr_limit = m.hold("o_write_end", o_limit, o_start);
        m.output("o_write_base", wr_base);
        m.output("o_write_limit", wr_limit);

        // ---------------- status -------------------------------------------------------------
        let busy = !idle;
        m.output("busy", busy);
        let done_r = m.reg("done", 1, Some(0));
        let fin = s_finish & fin_ok;
        let done_d = mux(go, zero1, one1);
        let done_en = go | fin;
        reg_set(m, done_r, done_d, done_en);
        m.output("done", done_r.q);
        let errs: Vec<Sig> = ["q", "k", "v", "o"]
            .iter()
            .map(|c| dm.get(&format!("{c}_error")))
            .collect();
        let mut err = m.zero(3);
        for e in errs.into_iter().rev() {
            let any = e.any();
            err = mux(any, e, err);
        }
        m.output("error", err);

        // ---------------- counters -----------------------------------------------------------
        let clear = go;
        let run_busy = busy & !go;
        let c_cycles = counter(m, "cnt_cycles", run_busy, clear);
        let c_mac_cycles = counter(m, "cnt_mac_cycles", step_valid, clear);
        let c_macs = counter(m, "cnt_macs", macs_sum, clear);
        let slots = m.lit(macs_sum.width(), (rr * cn) as u64);
        let zero_s = m.zero(macs_sum.width());
        let slots = mux(step_valid, slots, zero_s);
        let masked = slots - macs_sum;
        let c_masked = counter(m, "cnt_masked", masked, clear);
        // Why no MAC step issued, while busy: the phase the sequencer wanted was waiting for
        // K/V data, for the Q tile, for the softmax, or something else (tile changes, drains).
        let idle_cycle = run_busy & !step_valid;
        let waiting_phase = s_run & no_phase;
        let qk_wait = waiting_phase & want_qk;
        let need_k = qk_wait & !k_ready;
        let no_q = !q_ready;
        let need_q = and_all(&[qk_wait, k_ready, no_q]);
        let pv_wait = and_all(&[waiting_phase, want_pv, pv_more]);
        let need_sm = pv_wait & !sm_ahead;
        let no_v = !v_ready;
        let need_v = and_all(&[pv_wait, sm_ahead, no_v]);
        let st_kv = need_k | need_v;
        let st_kv = idle_cycle & st_kv;
        let st_q = idle_cycle & need_q;
        let st_sm = idle_cycle & need_sm;
        let known = or_all(&[st_kv, st_q, st_sm]);
        let st_other = idle_cycle & !known;
        let c_st_kv = counter(m, "cnt_stall_kv", st_kv, clear);
        let c_st_q = counter(m, "cnt_stall_q", st_q, clear);
        let c_st_sm = counter(m, "cnt_stall_softmax", st_sm, clear);
        let c_st_o = counter(m, "cnt_stall_other", st_other, clear);
        let c_blocks = counter(m, "cnt_blocks", qk_last_step, clear);
        let skipped = {
            let s = all_blocks - nblk_d;
            mux(go_once, s, zero_iw)
        };
        let c_skipped = counter(m, "cnt_skipped", skipped, clear);
        let c_reads = counter(m, "cnt_rf_reads", rf_reads_sum, clear);
        let c_writes = counter(m, "cnt_rf_writes", rf_writes_sum, clear);
        let c_p_reads = counter(m, "cnt_p_buf_reads", p_reads_sum, clear);
        let c_p_writes = counter(m, "cnt_p_buf_writes", p_writes_sum, clear);
        let rb = dm.get("read_beats").zext(COUNTER_BITS);
        let wb = dm.get("write_beats").zext(COUNTER_BITS);
        for (name, v) in COUNTERS.iter().zip([
            c_cycles,
            c_mac_cycles,
            c_macs,
            c_masked,
            c_st_kv,
            c_st_q,
            c_st_sm,
            c_st_o,
            c_blocks,
            c_skipped,
            c_reads,
            c_writes,
            c_p_reads,
            c_p_writes,
            rb,
            wb,
        ]) {
            m.output(name, v);
        }
        for n in [
            "q_wait",
            "k_wait",
            "v_wait",
            "q_first_wait",
            "k_first_wait",
            "v_first_wait",
            "q_block",
        ] {
            m.discard(dm.get(n));
        }

        // ---------------- assertions ---------------------------------------------------------
        // A landed K or V block is consumed within kv_bound cycles.
        let age_bits = 24;
        for (ch, ready, release) in [("k", k_ready, k_rel), ("v", v_ready, v_rel)] {
            let age = m.reg(&format!("{ch}_ready_age"), age_bits, Some(0));
            let inc = age.q + 1;
            let sat = age.q.all();
            let inc = mux(sat, age.q, inc);
            let zero = m.zero(age_bits);
            let held = ready & !release;
            let d = mux(held, inc, zero);
            m.set_next(age, d);
            m.output(&format!("{ch}_ready_age"), age.q);
            let bound = m.lit(age_bits, p.kv_bound as u64);
            let ok = age.q.lt(bound);
            m.assert_always(
                &format!("{ch}_block_consumed"),
                ok,
                &format!(
                    "a landed {} block was not consumed within {} cycles",
                    ch.to_uppercase(),
                    p.kv_bound
                ),
            );
        }
        // Memory writes land only inside the O tile being written: S and P never reach memory.
        let wr = dm.get("mem_req_valid") & dm.get("mem_req_write");
        let addr = dm.get("mem_req_addr");
        let below = addr.lt(wr_base);
        let above = addr.ge(wr_limit);
        let outside = below | above;
        let bad = wr & outside;
        let ok = !bad;
        m.assert_always(
            "writes_only_o",
            ok,
            "a memory write fell outside the O tile being written",
        );
        // A phase starts on the block it expects: the channel's current block (counted from
        // the tile's descriptor) is the phase's block; a stale block would be reused otherwise.
        for (ch, start, issued) in [("k", start_qk, qk_issued), ("v", start_pv, pv_issued)] {
            let current = dm.get(&format!("{ch}_block"));
            m.output(&format!("{ch}_block"), current);
            let wrong = current.ne(issued.q);
            let bad = start & wrong;
            let ok = !bad;
            m.assert_always(
                &format!("{ch}_block_in_order"),
                ok,
                &format!(
                    "a {} phase started on a {} block other than the one it needs",
                    if ch == "k" { "QK" } else { "PV" },
                    ch.to_uppercase()
                ),
            );
        }
        // Blocks are released only while one is held.
        for (ch, ready, release) in [
            ("q", q_ready, q_rel),
            ("k", k_ready, k_rel),
            ("v", v_ready, v_rel),
        ] {
            let bad = release & !ready;
            let ok = !bad;
            m.assert_always(
                &format!("{ch}_release_held"),
                ok,
                &format!(
                    "the sequencer released a {} block that had not landed",
                    ch.to_uppercase()
                ),
            );
        }
        m.set_latency(1);
    })
}
