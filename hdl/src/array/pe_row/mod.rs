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
//! masked by `mask_qk` (which follows the running phase's block; interleaved, QK and PV steps
//! of different blocks take turns, and a PV step is masked by `mask_pv`).
//! With integer QKᵀ (`pe.qk`) a QK step multiplies packed integers (two INT8 or four INT4 per
//! 16-bit operand) into int32 S registers, the score's last step converting to binary32, and
//! a block's QK phase starts with two scale steps whose buses carry Q's and K's scales to the
//! row's C' (`quant`: C · s_q · s_k per query row and S slot, the softmax's constant then).
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
//! bank's S array (`RE_S_COPY`, a·Bc cycles, then `s_free`), and the sweeps read S from there, a
//! cycle later (registered read; `RE_MAX_WAIT` waits for a max sweep's last score): about
//! a · (3·Bc + pipeline depths + 1) cycles. P goes to the bank's P array. The P bank is read
//! the same way in both variants: `p_rd` from the sequencer a cycle ahead of the PV step.
//!
//! **rowfused** (`two_pass`): buf2d's copy and sweeps with the S array holding the query rows'
//! whole rows (`sm_blk` places a block in it). A max pass (`sm_second` low) copies the block
//! and runs the max sweep and max update of each row, no exp sweep; an exp pass (high) starts
//! each row at the max update, fed −Inf (m stays the row's final max, the shift is 0), then the
//! exp sweep reads the block back from the array, and the sum update follows.
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
//! **Readout** (`ro_start`): per query row, r = 1/l (`fp_recip_e8m23`, or 1 if l = 0: no visible
//! key, O is +0), then each O value times r, in FP32 or rounded to FP16 (`out_f32`), packed into
//! beats for the row's O staging bank (`st_*`). `ro_zero` outputs zeros (a tile with no block).
//! The multiply is pipelined: the visited value registered, the FP32 multiplier's stages, the
//! beat register, the write from it (`readout_latency` cycles); the engine waits for the last
//! write (`RE_RO_DRAIN`) before it is idle.
//!
//! Files: `config` (the row's parameters and derived figures), `bus` (its ports), `engine` (the
//! row engine's state machine and counters), `softmax` (the softmax units, the max and exp
//! sweeps and where they read S), `banks` (the P bank and buf2d's S array), `tiers` (reg3d's
//! tiers and vertical links), `normalize` (the readout: 1/l, normalization and O staging),
//! `quant` (integer QKᵀ's scales and C'); this file instantiates the parts and wires the row.

mod banks;
pub mod bus;
pub mod config;
mod engine;
mod normalize;
mod quant;
mod softmax;
mod tiers;

pub use bus::*;
pub use config::*;

use banks::{p_bank, p_landing};
use engine::{sequencing, Engine, EngineRegs};
use normalize::readout;
use softmax::{exp_sweep, max_sweep, softmax_rows, sweep_mask, sweep_read, SoftmaxRows};
use tiers::{array, s_link_bits, vlink_bits, Array, ArrayIn};

use crate::array::pe_tier::{self, STierBlock, TierBlock, TierKind};
use crate::fp::add::{self, Fp32AddConfig};
use crate::fp::mul::{self, Fp32MulConfig};
use crate::fp::recip::{self, RecipIn, RecipOut};
use crate::ir::iface::Block;
use crate::link::{self, Bundle, Crossing, LinkStatus};
use crate::mem::sram::{self, SramBlock};
use crate::operands::{BinaryBlock, X};
use crate::softmax::row_reduce::{self, Reduce};
use crate::softmax::{self as sm_units, ExpIn, ExpOut, RowOpIn, RowState};
use crate::{bits_for, mux, or_all, Design, ModuleBuilder, Sig};

/// The PE row's block.
pub type RowBlock = Block<RowIn, RowOut<u32>>;

/// The blocks a row instantiates.
struct Parts {
    /// The PE tiers: the one tier (2-D), or the QK and the PV tier (reg3d).
    tiers: Vec<TierBlock>,
    srow: Block<RowOpIn, RowState<u32>>,
    sexp: Block<ExpIn, ExpOut<u32>>,
    /// The adder of each PE's tree of weights (the reduction tree's, at its stage latency).
    local_add: BinaryBlock,
    mul0: BinaryBlock,
    /// The readout's normalizing multiplier (the softmax datapath's FP32 multiplier).
    norm_mul: BinaryBlock,
    recip: Block<RecipIn, RecipOut<u32>>,
    tree: Block<X, Reduce<u32>>,
    /// The P bank (None in unfused: P comes from the scratch landing buffer).
    p_bank: Option<SramBlock>,
    s_bank: Option<SramBlock>,
    /// Three tiers: the softmax tier's S registers and links.
    s_tier: Option<STierBlock>,
    /// The clock gate of the row's gated registers.
    gate: crate::clock_gate::ClockGate,
}

/// Defines the PE row.
pub fn build(d: &mut Design, cfg: &PeRowConfig) -> RowBlock {
    let kinds: &[TierKind] = if cfg.concurrent_phases() {
        &[TierKind::Qk, TierKind::Pv]
    } else {
        &[TierKind::Both]
    };
    let parts = Parts {
        tiers: kinds.iter().map(|&k| pe_tier::build(d, cfg, k)).collect(),
        srow: sm_units::build_row(d, &cfg.row_update()),
        sexp: sm_units::build_exp(d, &cfg.exp),
        local_add: add::build(d, &Fp32AddConfig::new(cfg.tree().stage())),
        mul0: mul::build(d, &Fp32MulConfig { latency: 0 }),
        norm_mul: mul::build(d, &cfg.exp.mul),
        recip: recip::build(d),
        tree: row_reduce::build(d, &cfg.tree()),
        p_bank: (!cfg.s_in_memory()).then(|| sram::build(d, &cfg.p_array())),
        s_bank: cfg.s_array().map(|s| sram::build(d, &s)),
        s_tier: cfg.softmax_tier().then(|| pe_tier::build_s_tier(d, cfg)),
        gate: crate::clock_gate::build(d),
    };
    let cfg = *cfg;
    let inputs = cfg.input_widths();
    d.define_block(
        &cfg.module_name(),
        &inputs,
        cfg.output_widths(),
        |d, m, i| {
            m.doc(&format!(
            "pe_row: {} PEs and the row engine of {} query rows ({} keys and {} output columns\n\
             per PE). See hdl/src/array/pe_row/ for the mapping, the MAC steps, the softmax and\n\
             the readout.",
            cfg.cols, cfg.a, cfg.b, cfg.e
        ));
            m.set_latency(1);
            row(d, m, &cfg, &parts, &i)
        },
    )
}

fn row(
    d: &mut Design,
    m: &mut ModuleBuilder,
    cfg: &PeRowConfig,
    parts: &Parts,
    i: &RowIn,
) -> RowOut {
    // The TSV faults a core built for fault injection puts on the row's vertical links.
    if let Some(t) = &i.tsv {
        m.set_threaded(link::LANE_FAULTS, t.lane_fault);
    }
    // The lane whose failed flag the bundles show.
    if let Some(l) = &i.link {
        m.set_threaded(link::PROBE, l.probe);
    }
    let aw = cfg.pe.addr_width();
    let e = EngineRegs::new(m, cfg, i);
    // The engine reads PE registers at one shared address; `cc` picks the PE.
    let s_base = cfg.s_addr_rtl(m, e.slot, e.ii.q, e.jj.q, aw);
    let o_base = cfg.o_addr_rtl(m, e.ii.q, e.qq.q, aw);
    let c_rows = quant::scaled_constants(m, cfg, parts, i, e.slot);
    let sm = softmax_rows(m, cfg, parts, i, &e, c_rows.as_deref());
    let p_bank = if cfg.s_in_memory() {
        p_landing(m, cfg, i)
    } else {
        p_bank(m, cfg, parts, i)
    };
    let ins = ArrayIn {
        s_base,
        o_base,
        p_value: p_bank.value,
        shift: sm.step_shift,
    };
    let Array {
        pes,
        value,
        o_value,
        s_link,
    } = array(m, cfg, parts, i, &e, ins);
    let masked = m.name("masked", sweep_mask(cfg, i.mask_sp, &e));
    let sw = sweep_read(m, cfg, parts, i, &e, value, masked);
    let start_sweep = e.state.is(Engine::MaxUpdate); // run_max is read there, then reset
    max_sweep(m, cfg, &sw, &sm, start_sweep);
    let mut p_up = Crossing::new(cfg.spares(), cfg.vlink_latency());
    let exp = exp_sweep(
        m,
        cfg,
        parts,
        i,
        (&e, &sm, &sw),
        (&p_bank, &mut p_up),
        c_rows.as_deref(),
    );
    // reg3d: O comes down from the PV tier to the readout.
    let mut o_down = Crossing::new(cfg.spares(), 0);
    let o_value = o_down.send(m, "link_o", o_value);
    let (st, recip_done) = readout(m, cfg, parts, i, &e, &sm, o_value);
    let lanes = |b: Bundle| cfg.bundle(b).map_or(0, |g| g.lanes);
    let mut links: Vec<LinkStatus> = vec![];
    links.extend(p_up.finish(d, m, (Bundle::PUp, lanes(Bundle::PUp)), cfg.faults));
    links.extend(o_down.finish(d, m, (Bundle::ODown, lanes(Bundle::ODown)), cfg.faults));
    links.extend(s_link.as_ref().and_then(|l| l.link));
    // unfused: the staging buffer also takes the max sweep's S and the exp sweep's P (never in
    // the same cycle as each other or the readout's O).
    // rowfused with `spill`: the max sweep's S of a spilled block.
    let st = match (sw.s_store, exp.p_store) {
        (Some(s), Some(p)) => merge_stores(st, s, Some(p)),
        (Some(s), None) => merge_stores(st, s, None),
        _ => st,
    };
    let idle = sequencing(m, cfg, i, &e, &sm, recip_done, start_sweep);
    // Register-file accesses this cycle, at the ports: each PE's accumulator reads and
    // write-backs, and the engine's reads (one PE's `rd_addr` port per cycle of the max
    // sweep, the exp sweep and the readout; in buf2d of the copy of S and the readout).
    let reading = if let Some(sp) = e.spill {
        // A spilled block's max sweep reads the PE registers instead of a copy.
        or_all(&[e.in_copy, e.in_ro, e.in_max & sp])
    } else if cfg.s_in_sram() {
        e.in_copy | e.in_ro
    } else if cfg.s_in_memory() {
        e.in_max | e.in_ro
    } else {
        or_all(&[e.in_max, e.in_exp, e.in_ro])
    };
    let count_w = bits_for((cfg.cols * cfg.rf_tiers()) as u64 + 1);
    let s_bits = s_link_bits(m, cfg, s_link.as_ref());
    let mut reads = pes.acc_reads;
    reads.push(reading);
    // The register-file accesses are registered, then summed (the counter file counts them a
    // cycle later; nothing else reads them), so neither the step bus's decode nor the sum over
    // the row's PEs is in series with the other.
    let reads = m.delay_bits("count_rf_reads", &reads);
    let rf_reads = m.sum(&reads, count_w);
    let writes = m.delay_bits("count_rf_writes", &pes.rf_writes);
    let rf_writes = m.sum(&writes, count_w);
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
        rf_reads,
        rf_writes,
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
        max_op: sw.visit.in_max,
        exp_op: sw.visit.in_exp,
        row_update: e.sum_issue,
        // At the row's sum update the block's max has set its shift: a nonzero one rescales O
        // (the PV steps' MAC_SCALE) and l; a stale max a lazy threshold kept spares one.
        rescale: e.sum_issue & !sm.sum_shift.is_zero(),
        rescale_avoided: e.sum_issue & sm.sum_stale,
        recip_op: e.state.is(Engine::RoRecip),
        norm_op: e.in_ro,
        st,
        x_rd: sw.x_rd,
        spill: e.spill.map(|sp| SpillRead {
            read: e.in_exp & sp,
        }),
        link: cfg
            .spares()
            .map(|_| link::combine(m, &links, cfg.link_count_bits())),
        p_out: exp.p_out,
    }
}

/// The staging writes of the readout (O), the max sweep (S) and the exp sweep (P, unfused),
/// which never write in the same cycle.
fn merge_stores(o: RowStore, s: RowStore, p: Option<RowStore>) -> RowStore {
    let rest = |f: fn(&RowStore) -> Sig| match &p {
        Some(p) => mux(s.we, f(&s), f(p)),
        None => f(&s),
    };
    let pick = |f: fn(&RowStore) -> Sig| mux(o.we, f(&o), rest(f));
    RowStore {
        we: match &p {
            Some(p) => o.we | s.we | p.we,
            None => o.we | s.we,
        },
        row: pick(|x| x.row),
        beat: pick(|x| x.beat),
        data: pick(|x| x.data),
    }
}
