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

mod check;
mod counters;
mod fetch;
pub mod ports;
mod readout;
pub mod sequencer;

use anyhow::{ensure, Result};

use crate::config::CoreConfig;
use crate::dma::{self, DmaConfig};
use crate::fault::Fault;
use crate::iface::Ports;
use crate::ir::Dir;
use crate::mask::{self, MaskConfig};
use crate::pe_row::{self, PeRowConfig};
use crate::{cat, mux, Design, ModRef, ModuleBuilder, RegHandle, Sig};
use ports::{Problem, ReadStatus, RowActivity, SeqIn, SeqOut};

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

/// The engine: the DMA, the sequencer, the fetch unit, the mask generators, the PE rows, the
/// readout, the counter file and the checker; this module only wires them.
fn build_engine(d: &mut Design, p: &CoreParams) -> ModRef {
    let row_blk = pe_row::build(d, &p.row);
    let dma_mod = dma::build(d, &p.dma);
    let mask_mod = mask::build(d, &p.mask);
    let seq_blk = sequencer::build(d, p);
    let fetch_blk = fetch::build(d, p);
    let ro_blk = readout::build(d, p);
    let cnt_blk = counters::build(d, p);
    let chk_blk = check::build(d, p);
    let p = *p;
    d.define(&format!("{}_engine", p.module_name()), |_, m| {
        m.doc(&format!(
            "core: FlashAttention on {} x {} PEs, Br = {}, Bc = {}, d = {}: the DMA, sequencer,\n\
             fetch unit, mask generators, PE rows, readout, counter file and checker.\n\
             See hdl/src/core/ for the ports, the schedule, the counters and the assertions.",
            p.rows,
            p.row.cols,
            p.br(),
            p.bc(),
            p.d()
        ));
        let start = m.input("start", 1);
        let problem = m.inputs("", &Problem::widths(&p));
        let dma = Dma::new(m, &dma_mod);
        let rows_busy = m.net("rows_busy", 1);
        let ro_idle = m.net("ro_idle", 1);
        let seq = m.instantiate(
            &seq_blk,
            "u_seq",
            &SeqIn {
                start,
                rows_busy,
                ro_idle,
                q_ready: dma.get("q_ready"),
                k_ready: dma.get("k_ready"),
                v_ready: dma.get("v_ready"),
                o_busy: dma.get("o_busy"),
                problem,
            },
        );
        let status = |ch: &str| ReadStatus {
            busy: dma.get(&format!("{ch}_busy")),
            error: dma.get(&format!("{ch}_error")),
            ready: dma.get(&format!("{ch}_ready")),
            slot: dma.get(&format!("{ch}_slot")),
            rd_data: dma.get(&format!("{ch}_rd_data")),
        };
        let fetch = m.instantiate(
            &fetch_blk,
            "u_fetch",
            &fetch::FetchIn {
                go: seq.go,
                busy: seq.busy,
                qk_last_step: seq.qk_last_step,
                pv_last_step: seq.pv_last_step,
                go_once: seq.go_once,
                empty_tile: seq.empty_tile,
                blk: seq.blk,
                nblk: seq.nblk,
                problem: seq.latched,
                step: seq.step,
                q: status("q"),
                k: status("k"),
                v: status("v"),
            },
        );
        let (mask_qk, mask_sp) = masks(m, &p, &mask_mod, &seq);
        let ro = m.instantiate(
            &ro_blk,
            "u_readout",
            &readout::ReadoutIn {
                handoff: seq.handoff,
                rows_valid: seq.rows_valid,
                q_base: seq.q_base,
                empty_tile: seq.empty_tile,
                o_head_off: seq.o_head_off,
                rows_busy,
                o_busy: dma.get("o_busy"),
                o_addr: seq.latched.o_addr,
                out_row_bytes: seq.o_row_bytes,
            },
        );
        m.drive(ro_idle, ro.idle);
        let rows = pe_rows(m, &p, &row_blk, &seq, &fetch, &ro, mask_qk, mask_sp);
        m.drive(rows_busy, rows.busy);
        // The DMA's commands: the fetch unit's Q/K/V, the readout's O, the rows' O staging.
        for (prefix, cmd) in [("q", &fetch.q), ("k", &fetch.k), ("v", &fetch.v)] {
            dma.set_all(m, prefix, cmd);
        }
        dma.set_all(m, "o", &ro.o);
        dma.set("o_wr_en", rows.st_en, m);
        if let Some(r) = rows.st_row {
            dma.set("o_wr_row", r, m);
        }
        dma.set("o_wr_beat", rows.st_beat, m);
        dma.set("o_wr_data", rows.st_data, m);

        // Status: busy, done, and the first channel's error code (Q, K, V, O in that order).
        m.output("busy", seq.busy);
        m.output("done", seq.done);
        let mut err = m.zero(dma::error::BITS);
        for ch in ["o", "v", "k", "q"] {
            let e = dma.get(&format!("{ch}_error"));
            err = mux(e.any(), e, err);
        }
        m.output("error", err);
        let counters = m.instantiate(
            &cnt_blk,
            "u_counters",
            &counters::CountIn {
                clear: seq.go,
                busy: seq.busy,
                step_valid: seq.pe.valid,
                block_done: seq.qk_last_step,
                skipped: seq.skipped,
                q_ready: dma.get("q_ready"),
                k_ready: dma.get("k_ready"),
                v_ready: dma.get("v_ready"),
                dma_read_beats: dma.get("read_beats"),
                dma_write_beats: dma.get("write_beats"),
                stall: seq.stall,
                rows: rows.activity,
            },
        );
        m.outputs("", &counters);
        for n in [
            "q_wait",
            "k_wait",
            "v_wait",
            "q_first_wait",
            "k_first_wait",
            "v_first_wait",
        ] {
            m.discard(dma.get(n));
        }
        m.discard(dma.get("q_block"));
        let watch = |ch: &str, release: Sig| check::ChannelWatch {
            ready: dma.get(&format!("{ch}_ready")),
            release,
        };
        m.instantiate(
            &chk_blk,
            "u_check",
            &check::CheckIn {
                mem_valid: dma.get("mem_req_valid"),
                mem_write: dma.get("mem_req_write"),
                mem_addr: dma.get("mem_req_addr"),
                o_start: ro.o.start,
                tile_base: ro.tile_base,
                tile_limit: ro.tile_limit,
                start_qk: seq.start_qk,
                start_pv: seq.start_pv,
                k_block: dma.get("k_block"),
                v_block: dma.get("v_block"),
                qk_issued: seq.qk_issued,
                pv_issued: seq.pv_issued,
                q: watch("q", fetch.q.release),
                k: watch("k", fetch.k.release),
                v: watch("v", fetch.v.release),
            },
        );
        m.set_latency(1);
    })
}

/// The DMA instance. Its memory port is the engine's; every other input is a net the engine
/// drives (with [`Dma::set`]) once the module that computes it is instantiated.
struct Dma {
    outs: crate::InstOutputs,
    nets: std::collections::HashMap<String, Sig>,
}

impl Dma {
    fn new(m: &mut ModuleBuilder, module: &ModRef) -> Self {
        let mut conns: Vec<(String, Sig)> = vec![];
        let mut nets = std::collections::HashMap::new();
        for port in module.ports.iter().filter(|x| x.dir == Dir::Input) {
            let s = if port.name.starts_with("mem_") {
                m.input(&port.name, port.width)
            } else {
                let s = m.net(&format!("dma_{}", port.name), port.width);
                nets.insert(port.name.clone(), s);
                s
            };
            conns.push((port.name.clone(), s));
        }
        let refs: Vec<(&str, Sig)> = conns.iter().map(|(n, s)| (n.as_str(), *s)).collect();
        let outs = m.instance(module, "u_dma", &refs);
        for port in module.ports.iter().filter(|x| x.dir == Dir::Output) {
            if port.name.starts_with("mem_") {
                m.output(&port.name, outs.get(&port.name));
            }
        }
        Dma { outs, nets }
    }

    fn get(&self, port: &str) -> Sig {
        self.outs.get(port)
    }

    /// Drives DMA input `port` with `v`.
    fn set(&self, port: &str, v: Sig, m: &mut ModuleBuilder) {
        let net = *self
            .nets
            .get(port)
            .unwrap_or_else(|| panic!("the DMA has no input `{port}`"));
        m.drive(net, v);
    }

    /// Drives every input of `cmd`'s ports under `prefix`.
    fn set_all<P: Ports<Sig>>(&self, m: &mut ModuleBuilder, prefix: &str, cmd: &P) {
        let mut leaves = vec![];
        cmd.leaves(prefix, &mut leaves);
        for (port, v) in leaves {
            self.set(&port, v, m);
        }
    }
}

/// The two causal-mask generators: for the running QK phase's block, and for the block whose
/// softmax runs.
fn masks(m: &mut ModuleBuilder, p: &CoreParams, module: &ModRef, seq: &SeqOut) -> (Sig, Sig) {
    let iw = p.index_bits;
    let bcl = m.lit(iw, p.bc() as u64);
    let qk_kbase = seq.blk.mul_lo(bcl, iw);
    let prob = &seq.latched;
    // Fault: the diagonal one key late (also unmasks key k_len, never fetched when k_len is a
    // multiple of Bc).
    let k_len = if p.has(Fault::CausalOffByOne) {
        prob.k_len + 1
    } else {
        prob.k_len
    };
    let mut mask = |name: &str, k_base: Sig| {
        let out = m.instance(
            module,
            name,
            &[
                ("q_base", seq.q_base),
                ("k_base", k_base),
                ("q_len", prob.q_len),
                ("k_len", k_len),
                ("causal", prob.causal),
            ],
        );
        m.discard(out.get("skip"));
        out.get("mask")
    };
    (mask("u_mask_qk", qk_kbase), mask("u_mask_sp", seq.sm_kbase))
}

/// What the PE rows give back: busy, their O staging writes (concatenated, row 0 in the low
/// bits, as the DMA's banked write ports take them) and their activity.
struct Rows {
    busy: Sig,
    st_en: Sig,
    st_row: Option<Sig>,
    st_beat: Sig,
    st_data: Sig,
    activity: Vec<RowActivity>,
}

/// The R PE rows, each on its own Q operand and mask rows, sharing the column bus and the step.
#[allow(clippy::too_many_arguments)]
fn pe_rows(
    m: &mut ModuleBuilder,
    p: &CoreParams,
    row_blk: &pe_row::RowBlock,
    seq: &SeqOut,
    fetch: &fetch::FetchOut,
    ro: &readout::ReadoutOut,
    mask_qk: Sig,
    mask_sp: Sig,
) -> Rows {
    let span = p.row.a * p.bc();
    let mut busy = m.zero(1);
    let (mut en, mut row, mut beat, mut data, mut activity) =
        (vec![], vec![], vec![], vec![], vec![]);
    for r in 0..p.rows {
        let lo = span * r;
        let out = m.instantiate(
            row_blk,
            &format!("row{r}"),
            &pe_row::RowIn {
                a_q: fetch.rows[r as usize].a_q,
                b_col: fetch.b_col,
                mask_qk: mask_qk.slice(lo + span - 1, lo),
                mask_sp: mask_sp.slice(lo + span - 1, lo),
                pv_block_start: seq.start_pv,
                c_const: seq.latched.c_const,
                out_f32: seq.latched.out_f32,
                step: seq.pe,
                sm: pe_row::SmCtl {
                    start: seq.sm_go,
                    first: seq.sm_first,
                    slot: seq.sm_slot,
                },
                ro: pe_row::RoCtl {
                    start: ro.go,
                    zero: ro.zero,
                },
            },
        );
        busy = busy | out.busy;
        en.push(out.st.we);
        row.push(out.st.row);
        beat.push(out.st.beat);
        data.push(out.st.data);
        activity.push(RowActivity {
            macs: out.macs,
            rf_reads: out.rf_reads,
            rf_writes: out.rf_writes,
            p_read: out.p_read,
            p_write: out.p_write,
        });
    }
    for v in [&mut en, &mut row, &mut beat, &mut data] {
        v.reverse();
    }
    let fit = |x: Sig, bits: u32| {
        if x.width() >= bits {
            x.trunc(bits)
        } else {
            x.zext(bits)
        }
    };
    let lrb = p.dma.o_local_row_bits();
    let st_row = if lrb > 0 {
        Some(cat(&row.iter().map(|&r| fit(r, lrb)).collect::<Vec<_>>()))
    } else {
        for r in row {
            m.discard(r);
        }
        None
    };
    let bb = p.dma.o_beat_bits();
    let st_beat = cat(&beat.iter().map(|&b| fit(b, bb)).collect::<Vec<_>>());
    Rows {
        busy,
        st_en: cat(&en),
        st_row,
        st_beat,
        st_data: cat(&data),
        activity,
    }
}
