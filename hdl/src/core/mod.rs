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
//! **Interleave.** A PE's S accumulators come round every a·b cycles in a QK phase, its O
//! accumulators every a·e in a PV phase, and the MAC (no forwarding) needs its latency, mul +
//! add + 1, between two updates of one. When a·b is too few (`seed`'s four at a MAC deeper than
//! 1 + 2 + 1), reg2d runs QK and PV as two streams, as reg3d's tiers do (QK(j + 2) while the
//! row engines run the softmax of j + 1 and PV(j)), interleaved on the one step bus: QK never
//! steps two cycles running, PV steps whenever QK does not. Each S accumulator then comes
//! round every 2·a·b cycles or more; a tile's first QK, alone, steps every other cycle
//! (`PeRowConfig::interleaved`). A MAC deeper than 2·a·b and a·e hide is refused.
//!
//! **Variants** (`CoreConfig::variant`, docs/variants.md). `reg2d` is the schedule above: S stays
//! in the PE registers (two blocks), P in each row's P bank. `buf2d` is the same array and
//! arithmetic with S and P in an on-chip SRAM buffer, one bank per PE row (`sram.rs`): the
//! row engine's softmax of block j first copies the row's S out of the PE registers into the
//! bank's S array (a·Bc cycles, one PE register read and one S write per cycle); its max and
//! exp sweeps then read S from the array (registered reads, one cycle later) and write P to
//! the bank's P array, which PV steps read. The PE registers hold one S block, so QK(j+1)
//! waits until S(j) is copied out; with `buf2d.ports = 1` the P array has one port, and PV
//! steps and the softmax take turns. `reg3d` (tiers = 2) stacks two tiers of R × C PEs: the
//! QK tier (S, the row engines' sweeps) on the K column bus, the PV tier (O, the P banks, the
//! readout) on the V column bus, each with its own step bus from the sequencer's two phase
//! streams, so in steady state the QK tier computes block j + 2 while the row engines run the
//! softmax of j + 1 and the PV tier computes PV(j). P goes up to the PV tier's P bank over a
//! vertical link of `vlink_latency` register stages; the readout takes O down. With
//! `tiers = 3` the row engines sit on a softmax tier of their own between the two, with two
//! blocks of S registers above each QK PE: each score goes up its PE's S link (32 bits,
//! `vlink_latency` stages) as its last product lands, so the QK PEs hold one block. With
//! narrower S links (`vlink_bits` < 32) the QK PEs hold two blocks and a serializer walks each
//! finished block up at 32/`vlink_bits` cycles per score; the block's softmax waits for the
//! walk (`s_free` from the rows). `unfused` (standard attention) runs a tile in three passes:
//! every QK with its max sweep, which packs S into the O staging buffer for the O channel to
//! write to the scratch region (`s_addr`); then per block the scratch channel `x` lands S back
//! for the exp sweep, whose P goes out the same way over S; then the scratch channel lands P,
//! which the PV steps read from its landing buffer (the sequencer's `scratch` descriptors). O is bit-identical in every variant (same operators, same order); only where S and P live, the
//! cycles and the counted traffic differ.
//!
//! **Counters** (48 bits): `cycles` (busy), `mac_cycles` (cycles issuing a MAC step), `macs`
//! (MACs performed; with integer QKᵀ a PE's QK step is `lanes` of them), `masked_macs` (MAC
//! slots of issued steps that were masked; integer QKᵀ's scale steps have none),
//! `stall_kv`, `stall_q`, `stall_softmax`, `stall_other` (busy cycles without a MAC step, by the
//! reason the next phase could not start), `blocks`, `skipped_blocks`, `rf_reads`,
//! `rf_writes` (32-bit register-file accesses at the PE ports), `p_buf_reads`, `p_buf_writes`
//! (16-bit accesses of the rows' P banks: one read per query row and key of a PV block, once
//! per O column of the PE when the PV steps accumulate in the MAC pipeline (`accumulate`), one
//! write per weight), `s_buf_reads`, `s_buf_writes` (32-bit accesses of the buf2d S arrays;
//! zero otherwise), `vlink_bits` (reg3d: bits over the vertical links, 16 per weight up, 32
//! per O value down, and with three tiers 32 per score up), `vlink_s_bits` (of those, the S
//! links': the boundary between the QK and the softmax tier), `bcast_bit_hops` (the operand
//! broadcasts' wire activity: per step of a tier, 16 bits across C PE pitches on each of R row
//! buses and 16 bits down R rows on each of C column buses; data-independent, toggles are not
//! counted), `max_ops`, `exp_ops`, `recip_ops`, `norm_ops` (the row engines' operations:
//! max-sweep compares and exp-sweep elements, each subtract, exp2 and sum, one per score of a
//! computed block, masked ones included; `row_updates`, a row's state update after each
//! computed block with its reduction tree; reciprocals, one per query row and tile; normalizing
//! multiplies, one per O value of a tile), `land_read_bits` (operand bits read from the Q/K/V
//! landing buffers: per QK step of a tier 16 per row and column, per PV step 16 per column),
//! `qk_cycles`, `pv_cycles` (cycles with a QK / PV step: each tier's busy
//! cycles in reg3d; `mac_cycles` counts cycles with either), `read_beats`, `write_beats`,
//! `rescales` (a row's state update after a block whose max op set a nonzero shift: O and l
//! rescaled, a row's first finite max included; 0 in the two-pass designs), and
//! `rescales_avoided` (lazy rescaling: a row's block whose max exceeded the stale running max
//! by 1..=τ, run against it with no rescale). Both depend on the data: the hardware model
//! counts them too, and a run checks the two against each other.
//!
//! **Assertions** (simulation only): a K or V block that has landed is consumed within
//! `kv_bound` cycles; every memory write falls inside the O tile being written (S and P are
//! never written to memory), or in unfused inside the block of S or P its pass writes.

mod check;
mod counters;
mod fetch;
pub mod ports;
pub mod readout;
pub mod sequencer;

use anyhow::{ensure, Result};

use crate::array::mask::{self, MaskConfig};
use crate::array::noc_path;
use crate::array::pe_row::{self, PeRowConfig};
use crate::config::CoreConfig;
use crate::fault::Fault;
use crate::ir::iface::Block;
use crate::link::LinkState;
use crate::mem::dma::{self, DmaConfig};
use crate::mem::dma::{DmaIn, ReadCmd, StageWrite};
use crate::{cat, mux, Design, ModRef, ModuleBuilder, RegHandle, Sig};
use ports::{
    CoreIn, CoreOut, EngineIn, EngineOut, KeyMove, NocStatus, ReadStatus, RowActivity,
    ScratchStatus, SeqIn, SeqOut, WriteDesc,
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
    "qk_cycles",
    "pv_cycles",
    "blocks",
    "skipped_blocks",
    "rf_reads",
    "rf_writes",
    "p_buf_reads",
    "p_buf_writes",
    "s_buf_reads",
    "s_buf_writes",
    "vlink_bits",
    "vlink_s_bits",
    "bcast_bit_hops",
    "max_ops",
    "exp_ops",
    "row_updates",
    "recip_ops",
    "norm_ops",
    "land_read_bits",
    "read_beats",
    "write_beats",
    "glb_read_bits",
    "glb_write_bits",
    "glb_conflict_stalls",
    "kv_spill_bits",
    "rescales",
    "rescales_avoided",
    "noc_flits",
    "noc_hop_bits",
    "noc_fifo_writes",
    "noc_fifo_reads",
    "noc_stalls",
    "noc_src_reads",
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
    /// Built for fault injection (see `fault.rs`): every fault that can act in this core is in
    /// the hardware, selected at run time. False in every design built from a configuration.
    pub faults: bool,
}

impl CoreParams {
    /// Whether `fault` can act in this core (None), or what it needs (Some).
    pub fn fault_needs(&self, fault: Fault) -> Option<&'static str> {
        match fault {
            Fault::SharedPortClash if !self.row.plan().shared_p_port() => {
                Some("variant = \"buf2d\" with [buf2d] ports = 1")
            }
            Fault::SharedSTierSlot if !self.row.softmax_tier() => {
                Some("variant = \"reg3d\" with [reg3d] tiers = 3")
            }
            Fault::EarlyWlast if self.dma.mem_if != crate::mem::dma::MemIf::Axi4 => {
                Some("mem_if = \"axi4\"")
            }
            Fault::GlbNoHit | Fault::GlbStaleTag if self.dma.glb.is_none() => {
                Some("a global buffer (glb_bytes > 0)")
            }
            Fault::StaleScale if self.row.pe.qk.is_none() => {
                Some("qk_format = \"int8\" or \"int4\"")
            }
            _ => None,
        }
    }

    pub fn from_config(c: &CoreConfig) -> Result<Self> {
        c.validate()?;
        let p = CoreParams {
            rows: c.rows,
            row: c.row(),
            dma: c.dma(),
            mask: c.mask(),
            index_bits: c.index_bits,
            addr_bits: c.addr_bits,
            kv_bound: c.kv_bound(),
            faults: false,
        };
        p.validate()?;
        Ok(p)
    }

    pub fn validate(&self) -> Result<()> {
        self.row.validate()?;
        let r = &self.row;
        ensure!(
            r.regs_needed() <= r.pe.regs,
            "each PE needs {} registers ({} S values: {} block(s) of {}; and {} O values) but \
             has regs_per_pe = {}: raise regs_per_pe or shrink the tile",
            r.regs_needed(),
            r.s_slots() * r.a * r.b,
            r.s_slots(),
            r.a * r.b,
            r.a * r.e,
            r.pe.regs
        );
        r.validate_mac_hidden()?;
        ensure!(
            self.dma.width >= r.elem_bits().0
                && (r.d() * r.elem_bits().0).is_multiple_of(self.dma.width),
            "rows of head_dim values must fill whole memory beats"
        );
        Ok(())
    }

    /// noc2d: the P path between the arrays (None in the other designs).
    pub fn noc_path(&self) -> Option<kernels::noc::PathConfig> {
        let r = &self.row;
        r.noc().map(|n| kernels::noc::PathConfig {
            router: crate::array::noc_path::router(n.flit_bits, n.depth, n.hops),
            hops: n.hops,
            rows: self.rows,
            elem_bits: r.elem_bits().0,
            a: r.a,
            bc: self.bc(),
            ii_bits: r.ii_bits(),
            j_bits: r.word_bits(1),
        })
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

    /// Operands per memory beat.
    pub fn lanes(&self) -> u32 {
        self.dma.width / self.row.elem_bits().0
    }

    /// Bytes of a Q, K or V row in memory (d operands).
    pub fn operand_row_bytes(&self) -> u32 {
        self.d() * self.row.pe.mac.formats().operand.bytes()
    }

    /// MAC steps of one block: QK then PV.
    pub fn block_steps(&self) -> (u32, u32) {
        let r = &self.row;
        (r.qk_dims() * r.a * r.b, self.bc() * r.a * r.e)
    }

    /// Whether the core has vertical links with spare lanes (reg3d's, a stacked GLB's bond),
    /// and so the link self-test, `link_*` ports and registers.
    pub fn links(&self) -> bool {
        self.row.spares().is_some() || self.glb_bond().is_some()
    }

    /// The stacked GLB's bond spares (None without).
    pub fn glb_bond(&self) -> Option<crate::variants::Spares> {
        self.dma.glb.and_then(|g| g.bond)
    }

    /// Every vertical bundle with spare lanes: each PE row's, then the GLB's bond (row
    /// `link::GLB_ROW`, a part per bank group).
    pub fn bundles(&self) -> Vec<crate::link::BundleAt> {
        use crate::link::BundleAt;
        let mut v = vec![];
        for row in 0..self.rows {
            for (bundle, geometry, latency) in self.row.bundles() {
                v.push(BundleAt {
                    row,
                    bundle,
                    geometry,
                    parts: 1,
                    latency,
                });
            }
        }
        if let Some(g) = self.dma.glb {
            for (bundle, geometry) in g.bond_bundles() {
                v.push(BundleAt {
                    row: crate::link::GLB_ROW,
                    bundle,
                    geometry,
                    parts: g.groups,
                    latency: 0,
                });
            }
        }
        v
    }

    /// Cycles of a link test: the longest of the rows' and the GLB's bond's, which run at once
    /// (None without spares).
    pub fn link_test_cycles(&self) -> Option<u32> {
        let glb = self
            .dma
            .glb
            .and_then(|g| g.bond_bundles().first().map(|(_, geo)| geo.test_cycles(0)));
        self.row.link_test_cycles().max(glb)
    }

    /// Bits of the core's failed-lane count (every vertical bundle's physical lanes).
    pub fn link_count_bits(&self) -> u32 {
        let n: u32 = self.bundles().iter().map(|b| b.lanes()).sum();
        crate::link::count_bits(n)
    }

    pub fn module_name(&self) -> String {
        format!(
            "core_{}x{}_{}",
            self.rows,
            self.row.cols,
            // (A core built for fault injection: its row's name says `_faults`.)
            self.row.module_name().trim_start_matches("pe_row_"),
        )
    }

    /// The same core built for fault injection (see `fault.rs`): every defect that can act
    /// in it is built in, and the testbench selects one at run time (`fault_sel`).
    pub fn for_fault_injection(mut self) -> Self {
        self.faults = true;
        self.row.faults = true;
        self.dma.faults = true;
        self
    }
}

fn reg_set(m: &mut ModuleBuilder, r: RegHandle, d: Sig, en: Sig) {
    m.set_next(r, d);
    m.set_enable(r, en);
}

/// The core's block: its typed ports.
pub type CoreBlock = Block<CoreIn, CoreOut<u32>>;

/// Defines the core.
pub fn build(d: &mut Design, p: &CoreParams) -> ModRef {
    block(d, p).module
}

/// Defines the core; returns its typed block.
pub fn block(d: &mut Design, p: &CoreParams) -> CoreBlock {
    let engine = build_engine(d, p);
    let (inputs, outputs) = (CoreIn::widths(p), CoreOut::widths(p));
    d.define_block(&p.module_name(), &inputs, outputs, |_, m, i| {
        abort_wrapper(m, &engine, &i)
    })
}

/// The core's top: the engine, and what happens when a DMA descriptor is refused or software
/// aborts. The engine alone would wait forever for the channel that stopped; here the first
/// nonzero `error` (or `abort_req` while busy: code `ERR_ABORTED`, 6) is latched, the memory port
/// stops taking requests (responses to reads already accepted still reach the engine), and
/// once no read is in flight the engine is reset for one cycle. The core then reports `done`
/// with `error` holding the code until the next `start`, which it accepts like any other.
/// Counters restart at zero with the reset. Every other port passes through. Latency 1.
fn abort_wrapper(m: &mut ModuleBuilder, engine: &EngineBlock, i: &CoreIn) -> CoreOut {
    m.doc(
        "core top: the engine (see <name>_engine) and its abort on a DMA error: the error code\n\
         is latched, the memory port starts no new request or burst, and when nothing is in\n\
         flight the engine is reset (from a register, a cycle later); then done = 1 and error\n\
         holds the code until the next start.",
    );
    m.set_latency(1);
    let draining = m.reg("draining", 1, Some(0));
    let soft_rst = m.net("engine_reset", 1);
    let engine_rst = m.rst_or(soft_rst);
    let mut to_engine = i.clone();
    to_engine.abort_req = m.zero(1);
    to_engine.start = i.start & !draining.q;
    let to_engine = EngineIn {
        hold: draining.q,
        core: to_engine,
    };
    let e = m.instantiate_with_reset(engine, "u_engine", &to_engine, engine_rst);
    // Abort: latch the first error, drain, reset the engine for one cycle, report done.
    let go = i.start & (!e.core.busy & !draining.q);
    // With spare lanes the engine holds START while its links are tested or one is beyond
    // repair; the start is refused here: busy for a cycle, then done with ERR_CODE BUSY (a
    // test was running) or LINK, nothing read or written.
    let refusal = e.core.link.as_ref().map(|l| {
        let refused = i.start & !draining.q & (l.testing | (!e.core.busy & l.bad));
        let busy_code = m.lit(crate::mem::dma::error::BITS, crate::mem::dma::error::BUSY);
        let link_code = m.lit(crate::mem::dma::error::BITS, crate::mem::dma::error::LINK);
        (refused, mux(l.testing, busy_code, link_code))
    });
    let aborted_by_sw = i.abort_req & e.core.busy;
    let begin = (e.core.error.any() | aborted_by_sw) & !draining.q;
    let eb = e.core.error.width();
    let code = m.reg("error_code", eb, Some(0));
    let zero_code = m.zero(eb);
    let abort_code = m.lit(eb, crate::mem::dma::error::ABORTED);
    let cause = mux(e.core.error.any(), e.core.error, abort_code);
    let next_code = mux(go, zero_code, cause);
    match refusal {
        Some((refused, why)) => {
            m.set_next(code, mux(refused, why, next_code));
            m.set_enable(code, go | begin | refused);
        }
        None => {
            m.set_next(code, next_code);
            m.set_enable(code, go | begin);
        }
    }
    // The engine's reset comes from a register (the cycle after the drain ends), never from
    // logic: it fans out to every register of the engine, and a combinational one put the
    // DMA's idle flags in series with the sequencer's look-ahead outputs (635 MHz at asap7).
    let reset_now = m.reg("engine_reset_q", 1, Some(0));
    m.set_next(reset_now, draining.q & e.quiet & !reset_now.q);
    let reset_now = reset_now.q;
    m.drive(soft_rst, reset_now);
    m.set_next(draining, (begin | draining.q) & !reset_now);
    let aborted = m.reg("aborted", 1, Some(0));
    let ended = (reset_now | aborted.q) & !go;
    let refusing = refusal.map(|(refused, _)| m.delay("refusing", refused));
    m.set_next(aborted, refusing.map_or(ended, |r| r | ended));
    let mut out = e.core.clone();
    out.busy = refusing.map_or(e.core.busy | draining.q, |r| e.core.busy | draining.q | r);
    out.done = e.core.done | aborted.q;
    out.error = code.q;
    out
}

/// The engine's block (the core's ports, without the abort, with `hold` and `quiet`).
type EngineBlock = Block<EngineIn, EngineOut<u32>>;

/// The engine: the DMA, the sequencer, the fetch unit, the mask generators, the PE rows, the
/// readout, the counter file and the checker; this module only wires them.
fn build_engine(d: &mut Design, p: &CoreParams) -> EngineBlock {
    let parts = Parts {
        row: pe_row::build(d, &p.row),
        dma: dma::build(d, &p.dma),
        mask: mask::build(d, &p.mask),
        seq: sequencer::build(d, p),
        fetch: fetch::build(d, p),
        readout: readout::build(d, p),
        counters: counters::build(d, p),
        check: check::build(d, p),
        noc: p
            .noc_path()
            .map(|c| noc_path::build(d, &c, p.row.plan().sram.blackbox)),
    };
    let p = *p;
    let name = format!("{}_engine", p.module_name());
    let inputs = EngineIn {
        hold: 1,
        core: CoreIn::widths(&p),
    };
    let outputs = EngineOut {
        quiet: 1,
        core: CoreOut::widths(&p),
    };
    d.define_block(&name, &inputs, outputs, |_, m, i| {
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
        m.set_latency(1);
        engine(m, &p, &parts, &i)
    })
}

/// The blocks the engine wires.
struct Parts {
    row: pe_row::RowBlock,
    dma: dma::DmaBlock,
    mask: Block<mask::MaskIn, mask::MaskOut<u32>>,
    seq: sequencer::SeqBlock,
    fetch: fetch::FetchBlock,
    readout: readout::ReadoutBlock,
    counters: counters::CountBlock,
    check: check::CheckBlock,
    /// noc2d: the P path between the arrays.
    noc: Option<noc_path::PathBlock>,
}

fn engine(m: &mut ModuleBuilder, p: &CoreParams, parts: &Parts, ei: &EngineIn) -> EngineOut {
    let i = &ei.core;
    // Software aborts act in the core's top (`abort_wrapper`).
    m.discard(i.abort_req);
    // The DMA's commands come from modules that need its status first: nets, driven below.
    let w = p.dma.input_widths();
    let glb_flush = p.dma.glb.map(|_| m.net("glb_flush", 1));
    let dma_in = DmaIn {
        hold: ei.hold,
        glb: glb_flush.map(|flush| crate::mem::glb::GlbCtl { flush }),
        glb_scratch: w.glb_scratch.map(|s| m.nets("dma_glb_scratch", &s)),
        glb_link: w.glb_link.map(|l| m.nets("dma_glb_link", &l)),
        mem: i.mem,
        m_axi: i.m_axi,
        q: m.nets("dma_q", &w.q),
        k: m.nets("dma_k", &w.k),
        v: m.nets("dma_v", &w.v),
        x: w.x.map(|x| m.nets("dma_x", &x)),
        o: m.nets("dma_o", &w.o),
        o_wr: m.nets("dma_o_wr", &w.o_wr),
    };
    let dma = m.instantiate(&parts.dma, "u_dma", &dma_in);
    let rows_busy = m.net("rows_busy", 1);
    let s_free = m.net("s_free", 1);
    let ro_idle = m.net("ro_idle", 1);
    // No run starts while the links are tested or with a bundle beyond repair (the core's top
    // refuses it with ERR_CODE LINK).
    let link_hold = i.link.map(|_| m.net("link_hold", 1));
    let p_arrived = parts.noc.as_ref().map(|_| m.net("p_arrived", 1));
    let seq_in = SeqIn {
        start: match link_hold {
            Some(h) => i.start & !h,
            None => i.start,
        },
        rows_busy,
        s_free,
        ro_idle,
        q_ready: dma.q.status.ready,
        k_ready: dma.k.status.ready,
        v_ready: dma.v.status.ready,
        k_next: dma.k.status.next,
        v_next: dma.v.status.next,
        o_busy: dma.o.busy,
        problem: i.problem,
        s: i.s,
        x: dma.x.as_ref().map(|c| ScratchStatus {
            ready: c.status.ready,
            busy: c.status.busy,
        }),
        noc: p_arrived.map(|arrived| NocStatus { arrived }),
    };
    let seq = m.instantiate(&parts.seq, "u_seq", &seq_in);
    // The GLB forgets K and V at every launch (memory may have changed between them).
    if let Some(flush) = glb_flush {
        m.drive(flush, seq.go);
    }
    let status = |c: &dma::ReadChannel| ReadStatus {
        busy: c.status.busy,
        error: c.status.error,
        ready: c.status.ready,
        slot: c.status.slot,
        rd_data: c.rd_data,
    };
    let fetch_in = fetch::FetchIn {
        go: seq.go,
        busy: seq.busy,
        qk_last_step: seq.qk_last_step,
        pv_last_step: seq.pv_last_step,
        go_once: seq.go_once,
        empty_tile: seq.empty_tile,
        blk: seq.blk,
        nblk: seq.nblk,
        reach_off: seq.reach_off,
        problem: seq.latched,
        step: seq.step,
        q: status(&dma.q),
        k: status(&dma.k),
        v: status(&dma.v),
    };
    let fetch = m.instantiate(&parts.fetch, "u_fetch", &fetch_in);
    let (mask_qk, mask_pv, mask_sp) = masks(m, p, &parts.mask, &seq);
    let ro_in = readout::ReadoutIn {
        handoff: seq.handoff,
        rows_valid: seq.rows_valid,
        q_base: seq.q_base,
        empty_tile: seq.empty_tile,
        o_head_off: seq.o_head_off,
        rows_busy,
        o_busy: dma.o.busy,
        o_addr: seq.latched.o_addr,
        out_row_bytes: seq.o_row_bytes,
        o_row_stride: seq.latched.o_row_stride,
    };
    let ro = m.instantiate(&parts.readout, "u_readout", &ro_in);
    m.drive(ro_idle, ro.idle);
    let masks = RowMasks {
        qk: mask_qk,
        pv: mask_pv,
        sp: mask_sp,
    };
    let x_data = dma.x.as_ref().map(|c| c.rd_data);
    // With spare lanes: the link test, at reset and on request, over every row's bundles (and
    // the GLB's bond, whose own controller in the DMA takes the same request). A request is
    // taken while no problem runs (the core's top refuses a START while a test runs).
    let request = i.link.map(|req| req.test & !seq.busy);
    if let (Some(req), Some(to_dma), Some(request)) = (i.link, &dma_in.glb_link, request) {
        m.drive(to_dma.test, request);
        m.drive(to_dma.probe, req.probe);
    }
    let test = request
        .zip(p.row.bundles().first())
        .map(|(request, &(_, g, _))| {
            let ctl = crate::link::controller(m, &g, p.row.vlink_latency(), request);
            m.set_threaded(crate::link::BIST, ctl.bus);
            ctl
        });
    let probe = i.link.filter(|_| p.row.spares().is_some()).map(|l| l.probe);
    let rows = pe_rows(m, p, parts, &seq, &fetch, &ro, &masks, (x_data, probe));
    m.drive(rows_busy, rows.busy);
    if let (Some(net), Some(noc)) = (p_arrived, &rows.noc) {
        m.drive(net, noc.arrived);
    }
    m.drive(s_free, rows.s_free);
    // The DMA's commands: the fetch unit's Q/K/V, the readout's O, the rows' O staging.
    m.drive_all(&dma_in.q, &fetch.q);
    m.drive_all(&dma_in.k, &fetch.k);
    m.drive_all(&dma_in.v, &fetch.v);
    o_and_scratch(m, p, &dma_in, &seq, &dma, &ro, rows.x_rd);
    m.drive_all(&dma_in.o_wr, &rows.store);
    // What nothing in the engine reads: the consumers' wait counters, Q's block number.
    for c in [&dma.q, &dma.k, &dma.v] {
        m.discard(c.status.wait);
        m.discard(c.status.first_wait);
    }
    m.discard(dma.q.status.block);
    m.discard(dma.q.status.next);
    let noc_events = rows.noc.as_ref().map(|n| counters::NocEvents {
        sent: n.sent,
        hops: n.hops,
        writes: n.writes,
        reads: n.reads,
        stalled: n.stalled,
        read: n.read,
    });
    let activity = (rows.activity, rows.spill, noc_events);
    let counts = counter_file(m, p, parts, &seq, &dma, activity, i);
    checker(m, p, parts, &seq, &fetch, &ro, &dma);
    let error = first_error(m, &dma);
    // The links' state: the rows' and the GLB bond's, whichever the core has.
    let rows_link = test
        .zip(rows.link)
        .map(|(t, status)| LinkState::of(&t, status));
    let link = match (rows_link, dma.glb_link) {
        (Some(a), Some(b)) => Some(LinkState {
            testing: a.testing | b.testing,
            bad: a.bad | b.bad,
            failed: m.sum(&[a.failed, b.failed], p.link_count_bits()),
            cycles: mux(a.cycles.lt(b.cycles), b.cycles, a.cycles),
            probed: a.probed | b.probed,
        }),
        (a, b) => a.or(b),
    };
    if let (Some(l), Some(hold)) = (&link, link_hold) {
        m.drive(hold, l.testing | l.bad);
    }
    EngineOut {
        quiet: dma.quiet,
        core: CoreOut {
            busy: match &link {
                Some(l) => seq.busy | l.testing,
                None => seq.busy,
            },
            done: seq.done,
            error,
            mem_req: dma.mem_req,
            m_axi: dma.m_axi,
            counters: counts.counters,
            glb_bank: counts.glb_bank,
            link,
        },
    }
}

/// The O channel's commands: the readout's O or, in unfused, also the passes' S and P blocks
/// (the sequencer's writes), with the scratch channel's descriptors and its landing buffer's
/// read.
fn o_and_scratch(
    m: &mut ModuleBuilder,
    p: &CoreParams,
    dma_in: &DmaIn,
    seq: &SeqOut,
    dma: &dma::DmaOut,
    ro: &readout::ReadoutOut,
    x_rd: Option<pe_row::ScratchRead>,
) {
    match (&dma_in.x, &seq.x, &seq.wr, &dma.x, x_rd) {
        (Some(cmd), Some(desc), Some(wr), Some(x), Some(sweep)) => {
            // unfused: the scratch channel's descriptors from the sequencer, its landing
            // buffer read by the PV steps (P, a cycle ahead) or the exp sweeps (S); the O
            // channel writes the passes' S and P blocks, and the tile's O.
            let rd_addr = scratch_address(m, p, &seq.p_rd, sweep, x.status.slot);
            m.drive(cmd.rd_addr, rd_addr);
            m.drive_all(&cmd.desc, desc);
            let o = crate::ir::iface::select(wr.start, wr, &ro.o);
            let o = WriteDesc {
                start: wr.start | ro.o.start,
                ..o
            };
            m.drive_all(&dma_in.o, &o);
            // With a GLB: its scratch prefix is addressed from S_ADDR; only the passes'
            // writes go there, never the O tile's.
            if let Some(g) = &dma_in.glb_scratch {
                m.drive(g.base, desc.base);
                m.drive(g.o_write, wr.start);
            }
            for s in [
                x.status.wait,
                x.status.first_wait,
                x.status.block,
                x.status.next,
            ] {
                m.discard(s);
            }
        }
        _ => m.drive_all(&dma_in.o, &ro.o),
    }
}

/// The first channel's error code (Q, K, V, X, O in that order).
fn first_error(m: &mut ModuleBuilder, dma: &dma::DmaOut) -> Sig {
    let mut error = m.zero(dma::error::BITS);
    let x_error = dma.x.as_ref().map(|x| x.status.error);
    for e in [dma.o.error].into_iter().chain(x_error).chain([
        dma.v.status.error,
        dma.k.status.error,
        dma.q.status.error,
    ]) {
        error = mux(e.any(), e, error);
    }
    error
}

fn counter_file(
    m: &mut ModuleBuilder,
    p: &CoreParams,
    parts: &Parts,
    seq: &SeqOut,
    dma: &dma::DmaOut,
    (rows, spill, noc): (
        Vec<RowActivity>,
        Option<pe_row::SpillRead>,
        Option<counters::NocEvents>,
    ),
    i: &CoreIn,
) -> counters::CountOut {
    let count_in = counters::CountIn {
        clear: seq.go & !i.keep_counters,
        busy: seq.busy,
        step_valid: seq.pe.valid | seq.pe_pv.valid,
        qk_step: seq.step.qk,
        pv_step: seq.step.pv,
        block_done: seq.qk_last_step,
        skipped: seq.skipped,
        q_ready: dma.q.status.ready,
        k_ready: dma.k.status.ready,
        v_ready: dma.v.status.ready,
        dma_read_beats: dma.read_beats,
        dma_write_beats: dma.write_beats,
        glb: dma.glb,
        glb_bank: i.glb_bank,
        stall: seq.stall,
        rows,
        spill,
        noc,
        // Integer QKᵀ: the QK bus's scale steps (`ScaleLo`, `ScaleHi`).
        scale: p.row.pe.qk.map(|_| {
            let lo = m.lit(seq.pe.op.width(), crate::array::pe::PeOp::ScaleLo as u64);
            counters::ScaleStep {
                scale: seq.pe.valid & seq.pe.op.ge(lo),
            }
        }),
    };
    m.instantiate(&parts.counters, "u_counters", &count_in)
}

fn checker(
    m: &mut ModuleBuilder,
    p: &CoreParams,
    parts: &Parts,
    seq: &SeqOut,
    fetch: &fetch::FetchOut,
    ro: &readout::ReadoutOut,
    dma: &dma::DmaOut,
) {
    let watch = |c: &dma::ReadChannel, cmd: &ReadCmd| check::ChannelWatch {
        ready: c.status.ready,
        release: cmd.desc.release,
    };
    // Writes: the simple port's requests, or the AXI4 write bursts' first addresses.
    let (mem_valid, mem_write, mem_addr) = match (&dma.mem_req, &dma.m_axi) {
        (Some(r), _) => (r.valid, r.write, r.addr),
        (None, Some(x)) => (x.awvalid, x.awvalid, x.awaddr),
        (None, None) => unreachable!("the DMA has a memory port"),
    };
    // unfused: a write goes to O's tile or to the scratch block its pass writes.
    let (o_start, tile_base, tile_limit) = match &seq.wr {
        Some(wr) => {
            let aw = p.addr_bits;
            let span = wr.rows.zext(aw).mul_lo(wr.stride, aw);
            (
                wr.start | ro.o.start,
                mux(wr.start, wr.base, ro.tile_base),
                mux(wr.start, wr.base + span, ro.tile_limit),
            )
        }
        None => (ro.o.start, ro.tile_base, ro.tile_limit),
    };
    let check_in = check::CheckIn {
        mem_valid,
        mem_write,
        mem_addr,
        o_start,
        tile_base,
        tile_limit,
        start_qk: seq.start_qk,
        start_pv: seq.start_pv,
        k_block: dma.k.status.block,
        v_block: dma.v.status.block,
        qk_issued: seq.qk_issued,
        pv_issued: seq.pv_issued,
        // rowfused runs every QK of the tile first: K blocks are due until the last QK has
        // issued (the next tile's wait through this one's exp passes and PVs), V blocks after.
        k_due: if p.row.two_pass() {
            seq.qk_issued.lt(seq.nblk)
        } else {
            m.lit(1, 1)
        },
        // unfused: V blocks wait through the exp passes too; they are due in the PV pass.
        v_due: match &seq.pass {
            Some(x) => x.pv,
            None if p.row.two_pass() => seq.qk_issued.ge(seq.nblk),
            None => m.lit(1, 1),
        },
        q: watch(&dma.q, &fetch.q),
        k: watch(&dma.k, &fetch.k),
        v: watch(&dma.v, &fetch.v),
    };
    m.instantiate(&parts.check, "u_check", &check_in);
}

/// The causal-mask generators: for the running phase's block (in reg3d one for the QK tier's
/// and one for the PV tier's), and for the block whose softmax runs. Each takes its block as
/// it will be after this cycle (`seq.mask`) and registers its differences, so its mask is the
/// block's in the cycle the block moves.
fn masks(
    m: &mut ModuleBuilder,
    p: &CoreParams,
    block: &Block<mask::MaskIn, mask::MaskOut<u32>>,
    seq: &SeqOut,
) -> (Sig, Sig, Sig) {
    let next = &seq.mask;
    // Fault: the diagonal one key late (also unmasks key k_len, never fetched when k_len is a
    // multiple of Bc).
    let k_len = m.with_fault(
        p.faults,
        Fault::CausalOffByOne,
        |_| next.k_len + 1,
        next.k_len,
    );
    let mut mask = |name: &str, keys: &KeyMove| {
        let ins = mask::MaskIn {
            q_base: next.q_base,
            k_base: keys.now,
            k_alt0: keys.alt0,
            k_take0: keys.take0,
            k_alt1: keys.alt1,
            k_take1: keys.take1,
            q_len: next.q_len,
            k_len,
            causal: next.causal,
        };
        m.instantiate(block, name, &ins).mask
    };
    let qk = mask("u_mask_qk", &next.qk);
    let pv = p.row.two_streams().then(|| mask("u_mask_pv", &next.pv));
    let sp = mask("u_mask_sp", &next.sm);
    let pv = pv.unwrap_or_else(|| {
        m.discard_all(&next.pv);
        qk
    });
    (qk, pv, sp)
}

/// What the PE rows give back: busy, their O staging writes (concatenated, row 0 in the low
/// bits, as the DMA's banked write ports take them) and their activity.
struct Rows {
    busy: Sig,
    /// Row 0's S copied out (the rows run the softmax in lockstep).
    s_free: Sig,
    store: StageWrite,
    activity: Vec<RowActivity>,
    /// unfused: row 0's exp-sweep read of the scratch landing buffer (the rows sweep in
    /// lockstep).
    x_rd: Option<pe_row::ScratchRead>,
    /// rowfused's spill: row 0's landing-buffer read of a spilled score (every row reads
    /// one in the same cycle).
    spill: Option<pe_row::SpillRead>,
    /// With spare lanes: every row's links.
    link: Option<crate::link::LinkStatus>,
    /// noc2d: the P path's block ends and events.
    noc: Option<noc_path::PathOut>,
}

/// unfused: the scratch landing buffer's read address {slot, query row, beat}: the PV step's P
/// (`p_rd`, a cycle ahead) while it reads, else the exp sweep's S.
fn scratch_address(
    m: &mut ModuleBuilder,
    p: &CoreParams,
    p_rd: &pe_row::PRead,
    sweep: pe_row::ScratchRead,
    slot: Sig,
) -> Sig {
    let l = p.dma.x.expect("unfused has a scratch channel");
    let (s_per, p_per) = p.row.scratch_per_beat();
    // The lane within the beat is the rows' to pick.
    let mut addr = |ii: Sig, j: Sig, per: u32| {
        let mut parts = vec![slot];
        if l.local_row_bits() > 0 {
            parts.push(ii.resize(l.local_row_bits()));
        } else {
            m.discard(ii);
        }
        let lb = per.trailing_zeros();
        let bb = l.beat_bits();
        if bb > 0 && j.width > lb {
            parts.push(j.slice(j.width - 1, lb).resize(bb));
            if lb > 0 {
                m.discard(j.slice(lb - 1, 0));
            }
        } else {
            // One beat a row: its index is 0.
            m.discard(j);
            if bb > 0 {
                parts.push(m.zero(bb));
            }
        }
        cat(&parts)
    };
    if !p.row.s_in_memory() {
        // rowfused's spill: S alone (P stays in the P banks).
        return addr(sweep.ii, sweep.j, s_per);
    }
    let pv = addr(p_rd.ii, p_rd.j, p_per);
    let sm = addr(sweep.ii, sweep.j, s_per);
    mux(p_rd.re, pv, sm)
}

/// The masks the rows read: the QK phase's block, the PV phase's (the same in 2-D), the
/// softmax's.
struct RowMasks {
    qk: Sig,
    pv: Sig,
    sp: Sig,
}

/// The R PE rows, each on its own Q operand and mask rows, sharing the column buses and the
/// step buses.
#[allow(clippy::too_many_arguments)]
fn pe_rows(
    m: &mut ModuleBuilder,
    p: &CoreParams,
    parts: &Parts,
    seq: &SeqOut,
    fetch: &fetch::FetchOut,
    ro: &readout::ReadoutOut,
    masks: &RowMasks,
    (x_data, probe): (Option<Sig>, Option<Sig>),
) -> Rows {
    let row_blk = &parts.row;
    let span = p.row.a * p.bc();
    let mut busy = m.zero(1);
    // noc2d: what lands in each row's P bank comes from the P path, which takes the rows' P:
    // nets, driven below.
    let pw = p.row.p_write_widths();
    let p_in: Vec<Option<pe_row::PWrite>> = (0..p.rows)
        .map(|r| p.row.noc().map(|_| m.nets(&format!("row{r}_p_in"), &pw)))
        .collect();
    let mut p_out = vec![];
    let mut s_free = vec![];
    let mut x_rd = None;
    let mut spill = None;
    let (mut en, mut row, mut beat, mut data, mut activity) =
        (vec![], vec![], vec![], vec![], vec![]);
    let mut links = vec![];
    // A core built for fault injection with spare lanes: the TSV faults, each to its row.
    let tsv_faults = (p.faults && p.row.spares().is_some()).then(|| {
        assert!(
            p.rows <= crate::link::GLB_ROW,
            "lane faults address 255 PE rows (row 255 is the GLB's bond)"
        );
        let bits = crate::link::core_fault_bits();
        m.threaded_input(crate::link::CORE_FAULTS, bits)
    });
    for r in 0..p.rows {
        let lo = span * r;
        let tsv = tsv_faults.map(|f| pe_row::RowTsv {
            lane_fault: crate::link::row_faults(m, f, r),
        });
        let link = probe.map(|l| pe_row::RowProbe {
            probe: crate::link::row_probe(m, l, r),
        });
        let out = m.instantiate(
            row_blk,
            &format!("row{r}"),
            &pe_row::RowIn {
                a_q: fetch.rows[r as usize].a_q,
                b_col: fetch.b_col,
                v_col: fetch.v_col,
                mask_qk: masks.qk.slice(lo + span - 1, lo),
                mask_pv: masks.pv.slice(lo + span - 1, lo),
                mask_sp: masks.sp.slice(lo + span - 1, lo),
                pv_block_start: seq.start_pv,
                c_const: seq.latched.c_const,
                out_f32: seq.latched.out_f32,
                step: seq.pe,
                step_pv: seq.pe_pv,
                p_rd: seq.p_rd,
                sm: pe_row::SmCtl {
                    start: seq.sm_go,
                    first: seq.sm_first,
                    slot: seq.sm_slot,
                    second: seq.sm_second,
                    blk: seq.sm_blk,
                },
                ro: pe_row::RoCtl {
                    start: ro.go,
                    zero: ro.zero,
                },
                x: x_data.map(|d| pe_row::RowScratch {
                    data: d.slice(p.dma.width * (r + 1) - 1, p.dma.width * r),
                }),
                tsv,
                link,
                p_in: p_in[r as usize],
            },
        );
        links.extend(out.link);
        p_out.extend(out.p_out);
        match (r, out.x_rd) {
            (0, Some(rd)) => x_rd = Some(rd),
            (_, Some(rd)) => m.discard_all(&rd),
            _ => {}
        }
        match (r, out.spill) {
            (0, Some(sp)) => spill = Some(sp),
            (_, Some(sp)) => m.discard_all(&sp),
            _ => {}
        }
        busy = busy | out.busy;
        s_free.push(out.s_free);
        en.push(out.st.we);
        row.push(out.st.row);
        beat.push(out.st.beat);
        data.push(out.st.data);
        activity.push(RowActivity::from(&out));
    }
    for v in [&mut en, &mut row, &mut beat, &mut data] {
        v.reverse();
    }
    let lrb = p.dma.o_local_row_bits();
    // One row per bank: the DMA's row field is a placeholder bit.
    let st_row = if lrb > 0 {
        cat(&row.iter().map(|&r| r.resize(lrb)).collect::<Vec<_>>())
    } else {
        for r in row {
            m.discard(r);
        }
        m.zero(1)
    };
    let bb = p.dma.o_beat_bits();
    let st_beat = cat(&beat.iter().map(|&b| b.resize(bb)).collect::<Vec<_>>());
    for &f in &s_free[1..] {
        m.discard(f);
    }
    let noc = parts
        .noc
        .as_ref()
        .map(|blk| p_path(m, p, blk, &p_out, &p_in));
    Rows {
        busy,
        s_free: s_free[0],
        store: StageWrite {
            en: cat(&en),
            row: st_row,
            beat: st_beat,
            data: cat(&data),
        },
        activity,
        x_rd,
        spill,
        link: p
            .row
            .spares()
            .map(|_| crate::link::combine(m, &links, p.link_count_bits())),
        noc,
    }
}

/// noc2d: the rows' P into the P path (row 0's write enable and address: the rows sweep in
/// lockstep, which an assertion checks), and what lands into each row's P bank.
fn p_path(
    m: &mut ModuleBuilder,
    p: &CoreParams,
    blk: &noc_path::PathBlock,
    p_out: &[pe_row::PWrite],
    p_in: &[Option<pe_row::PWrite>],
) -> noc_path::PathOut {
    let cfg = p.noc_path().expect("noc2d");
    let w = cfg.elem_bits;
    let lockstep: Vec<Sig> = p_out[1..]
        .iter()
        .map(|o| o.we.eq(p_out[0].we) & o.addr.eq(p_out[0].addr))
        .collect();
    if !lockstep.is_empty() {
        m.assert_always(
            "p_rows_lockstep",
            crate::and_all(&lockstep),
            "the PE rows' exp sweeps wrote P out of lockstep (the NoC takes row 0's address)",
        );
    }
    for o in &p_out[1..] {
        m.discard(o.we);
        m.discard(o.addr);
    }
    let data: Vec<Sig> = p_out.iter().rev().map(|o| o.data).collect();
    let out = m.instantiate(
        blk,
        "u_noc",
        &noc_path::PathIn {
            we: p_out[0].we,
            waddr: p_out[0].addr,
            wdata: cat(&data),
        },
    );
    let g = cfg.per_flit();
    for (r, land) in p_in.iter().enumerate() {
        let land = land.expect("noc2d");
        let lane = r as u32 % g;
        m.drive(land.we, out.p_we.bit(r as u32));
        m.drive(land.addr, out.p_waddr);
        m.drive(land.data, out.p_wdata.slice(lane * w + w - 1, lane * w));
    }
    out
}
