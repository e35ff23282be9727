//! `pe_tier`: one PE row's C PEs on one tier, and the logic that drives them from a step bus
//! (bit-exact model: `kernels::flash`, through the row). Its own module so that a stacked
//! design's tiers are separate modules: synthesis reports each tier's cells, and a 3-D flow
//! can place each on its die.
//!
//! Three kinds ([`TierKind`]): `Both` (2-D designs: QK and PV steps on the same PEs), `Qk`
//! (reg3d's QK tier: S) and `Pv` (reg3d's PV tier: O). QK steps mask PE c by
//! `mask[ii][b·c + jj]` and carry the bus's operation; a PV step's operation is the row's own:
//! NOP if masked (`mask[ii][j]`), MAC_ZERO on the row's first product of the tile (O starts at
//! +0), MAC_SCALE on its first product of a block (the block's rescale by `shift`), MAC
//! otherwise. Row operand: Q (`a_q`) in QK steps, P (`p_val`, from the row's P bank) in PV
//! steps; column operand: PE c's 16 bits of `b_col`. All C PEs read at `rd_addr`.
//!
//! `s_tier` (reg3d with three tiers): the softmax tier's S registers above a row's C QK PEs
//! and the S links that fill them: each QK PE's score goes up as its last product lands (the
//! QK step with the last dimension, `last` on the QK bus, read at the PE's read port
//! `pe.latency()` cycles after issue; a masked PE sends nothing), through `vlink_latency`
//! register stages, into the PE's registers above at (slot, ii, jj): two blocks of a × b FP32,
//! which the row engine's sweeps read at (slot, ii, jj) of PE `cc`. So the QK PEs hold one
//! block: the next block's first product of a score is issued a·b steps after this block's
//! last, after the link has read it. Narrower links (`vlink_bits` < 32) cannot keep up with a
//! score a cycle: the QK PEs then keep two blocks, and a serializer (`s_tier_walk`) sends
//! each finished block up in 32/`vlink_bits` beats per score while the next block's QK runs,
//! and says when the block's last score is above (`linked`).

use crate::array::pe::{PeIn, PeOp, PeOut};
use crate::array::pe_row::bus::PeStep;
use crate::array::pe_row::config::PeRowConfig;
use crate::fault::Fault;
use crate::ir::iface::Block;
use crate::link::{Bundle, Crossing, LinkStatus};
use crate::{and_all, bits_for, cat, group, interface, mux, mux_index, Design, ModuleBuilder};
use crate::{RegHandle, Sig};

/// What a tier of PEs runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TierKind {
    /// QK and PV steps (2-D designs).
    Both,
    /// QK steps only (reg3d's QK tier).
    Qk,
    /// PV steps only (reg3d's PV tier).
    Pv,
}

impl TierKind {
    fn name(self) -> &'static str {
        match self {
            TierKind::Both => "qkpv",
            TierKind::Qk => "qk",
            TierKind::Pv => "pv",
        }
    }
}

group! {
    /// A tier's inputs: the QK row operand (Q), the PV row operand (P), the column bus, the
    /// mask of the running phase's block, the PEs' read address, the rescale shift of the PV
    /// step's query row, the start of a PV block and of a tile (both clear the row's
    /// first-product flags); the step bus.
    pub struct TierIn<T> {
        a_q, p_val, b_col, mask, rd_addr, shift, pv_block_start, tile_reset;
        step: PeStep<T>,
    }
}

interface! {
    /// A tier's outputs: the C PEs' read data (32 bits each, PE 0 lowest), each PE's
    /// accumulator read and write-back this cycle, each PE's enable (QK: not masked), and the
    /// MACs performed this cycle.
    pub struct TierOut { rd_data, acc_read, rf_write, en, macs }
}

/// The tier's block.
pub type TierBlock = Block<TierIn, TierOut<u32>>;

/// Defines the `kind` tier of the row `cfg` (and its PE).
pub fn build(d: &mut Design, cfg: &PeRowConfig, kind: TierKind) -> TierBlock {
    let pe = crate::array::pe::block(d, &cfg.pe);
    let c = cfg.cols;
    let (ew, _) = cfg.elem_bits();
    let inputs = TierIn {
        a_q: ew,
        p_val: ew,
        b_col: ew * c,
        mask: cfg.a * cfg.bc(),
        rd_addr: cfg.pe.addr_width(),
        shift: 8,
        pv_block_start: 1,
        tile_reset: 1,
        step: cfg.step_widths(),
    };
    let outputs = TierOut {
        rd_data: cfg.elem_bits().1 * c,
        acc_read: c,
        rf_write: c,
        en: c,
        macs: bits_for((c * cfg.macs_per_pe()) as u64),
    };
    let name = format!(
        "pe_tier_{}_c{}_a{}_b{}_e{}_{}",
        kind.name(),
        c,
        cfg.a,
        cfg.b,
        cfg.e,
        cfg.pe.params_name()
    );
    let cfg = *cfg;
    d.define_block(&name, &inputs, outputs, |_, m, i| {
        m.doc(&format!(
            "pe_tier ({}): {} PEs of a PE row on one tier, driven by the step bus.\n\
             See hdl/src/array/pe_tier.rs.",
            kind.name(),
            cfg.cols
        ));
        m.set_latency(cfg.pe.latency());
        tier(m, &cfg, &pe, kind, &i)
    })
}

fn tier(
    m: &mut ModuleBuilder,
    cfg: &PeRowConfig,
    pe: &Block<PeIn, PeOut<u32>>,
    kind: TierKind,
    i: &TierIn,
) -> TierOut {
    let (c_n, a_n, b_n, bc) = (cfg.cols, cfg.a, cfg.b, cfg.bc());
    let st = &i.step;
    let op = |m: &mut ModuleBuilder, o: PeOp| m.lit(cfg.pe.op_bits(), o as u64);
    let op_nop = op(m, PeOp::Nop);
    let has_qk = kind != TierKind::Pv;
    let has_pv = kind != TierKind::Qk;
    // PV: the row's operation for the step's query row and key (and whether the key is
    // masked: with runs a masked key's MacFeed passes the run's value on).
    let (pv_op, pv_masked) = if has_pv {
        let (op, masked) = pv_operation(m, cfg, i);
        (op, Some(masked))
    } else {
        for x in [
            i.p_val,
            i.pv_block_start,
            i.tile_reset,
            i.shift,
            st.j,
            st.last,
        ] {
            m.discard(x);
        }
        (op_nop, None)
    };
    let pv_en = match pv_masked {
        Some(masked) if cfg.pv_runs() => !masked,
        _ => m.lit(1, 1),
    };
    if !has_qk {
        m.discard(i.a_q);
        m.discard(st.jj);
        m.discard(st.op);
    }
    m.discard(st.slot);
    let pe_op = match kind {
        TierKind::Both => mux(st.pv, pv_op, st.op),
        TierKind::Qk => {
            m.discard(st.pv);
            st.op
        }
        TierKind::Pv => pv_op,
    };
    let pe_op = m.name("pe_op", mux(st.valid, pe_op, op_nop));
    let a_row = match kind {
        TierKind::Both => mux(st.pv, i.p_val, i.a_q),
        TierKind::Qk => i.a_q,
        TierKind::Pv => i.p_val,
    };
    let a_row = m.name("a_row", a_row);
    let zero_acc = m.zero(cfg.elem_bits().1);
    let zero8 = m.zero(8);
    let shift = if has_pv { i.shift } else { zero8 };
    let (mut rd, mut acc, mut wr, mut ens) = (vec![], vec![], vec![], vec![]);
    for c in 0..c_n {
        // QK: PE c masked by mask[ii][b·c + jj]; PV: the row's operation decides.
        let en = if has_qk {
            let cands: Vec<Sig> = (0..a_n)
                .map(|r| {
                    let bits: Vec<Sig> =
                        (0..b_n).map(|k| i.mask.bit(r * bc + b_n * c + k)).collect();
                    mux_index(st.jj, &bits)
                })
                .collect();
            let qk_en = !mux_index(st.ii, &cands);
            match kind {
                TierKind::Both => mux(st.pv, pv_en, qk_en),
                _ => qk_en,
            }
        } else {
            pv_en
        };
        ens.push(en);
        let ins = PeIn {
            a: a_row,
            b: i.b_col
                .slice(cfg.elem_bits().0 * (c + 1) - 1, cfg.elem_bits().0 * c),
            op: pe_op,
            en,
            addr: st.addr,
            ld_data: zero_acc,
            shift,
            rd_addr: i.rd_addr,
        };
        let out = m.instantiate(pe, &format!("pe{c}"), &ins);
        rd.push(out.rd_data);
        acc.push(out.rf_acc_read);
        wr.push(out.rf_write);
    }
    // MACs performed this cycle (for the core's counters; integer QKᵀ's scale steps are none).
    let live = pe_op.ne(op_nop);
    let live = if cfg.pe.qk.is_some() {
        let scale_lo = op(m, PeOp::ScaleLo);
        live & pe_op.lt(scale_lo)
    } else {
        live
    };
    // Registered before the sum (the counter file counts them a cycle later; nothing else
    // reads them), so the step's decode and the sum over the tier's PEs are not in series.
    let performed: Vec<Sig> = ens.iter().map(|&en| en & live).collect();
    let performed = m.delay_bits("count_macs", &performed);
    let macs = m.sum(&performed, bits_for(c_n as u64));
    // An integer QKᵀ step is `lanes` MACs in each PE that performs it (operations 8 to 10).
    let macs = match cfg.pe.qk {
        Some(f) => {
            let w = bits_for((c_n * f.lanes()) as u64);
            let wide = macs.zext(w);
            let scaled = m.delay("count_macs_int", pe_op.msb());
            mux(scaled, wide << f.lanes().trailing_zeros(), wide)
        }
        None => macs,
    };
    let msb_first = |mut v: Vec<Sig>| {
        v.reverse();
        cat(&v)
    };
    TierOut {
        rd_data: msb_first(rd),
        acc_read: msb_first(acc),
        rf_write: msb_first(wr),
        en: msb_first(ens),
        macs,
    }
}

/// A PV step's operation: NOP if masked, MAC_ZERO on the row's first product of the tile,
/// MAC_SCALE on its first of a block, MAC otherwise; and the flags that say which came. With
/// runs (the MAC accumulates in its pipeline), each O value's products in a block run back to
/// back: its first live one reads the register (MAC_ZERO or MAC_SCALE), the later ones are
/// MAC_FEED, masked ones too once the run has a live product (they pass its value on). Also
/// returns whether the step's key is masked.
fn pv_operation(m: &mut ModuleBuilder, cfg: &PeRowConfig, i: &TierIn) -> (Sig, Sig) {
    let (a_n, bc) = (cfg.a, cfg.bc());
    let st = &i.step;
    let started = m.reg("o_started", a_n, Some(0));
    let scaled = m.reg("scaled", a_n, Some(0));
    // The mask follows the running phase's block: [ii][j], the step's query row, then its key.
    let pv_masked = select_bit2(i.mask, a_n, bc, st.ii, st.j);
    let bit_of_ii = |r: RegHandle| {
        let bits: Vec<Sig> = (0..a_n).map(|k| r.q.bit(k)).collect();
        mux_index(st.ii, &bits)
    };
    let (started_ii, scaled_ii) = (bit_of_ii(started), bit_of_ii(scaled));
    let op = |m: &mut ModuleBuilder, o: PeOp| m.lit(cfg.pe.op_bits(), o as u64);
    let (op_mac, op_zero, op_scale, op_nop) = (
        op(m, PeOp::Mac),
        op(m, PeOp::MacZero),
        op(m, PeOp::MacScale),
        op(m, PeOp::Nop),
    );
    let pv_op = mux(scaled_ii, op_mac, op_scale);
    let pv_op = mux(started_ii, pv_op, op_zero);
    let pv_step = st.valid & st.pv;
    let (pv_op, live) = if cfg.pv_runs() {
        // The run so far (this O value's earlier keys in the block) has a live product.
        let run = m.reg("o_run_live", 1, Some(0));
        let before = run.q & !st.j.is_zero();
        let pv_op = mux(pv_masked, op_nop, pv_op);
        let pv_op = mux(before, op(m, PeOp::MacFeed), pv_op);
        let live = before | !pv_masked;
        m.set_next(run, mux(pv_step, live, run.q));
        (pv_op, live)
    } else {
        (mux(pv_masked, op_nop, pv_op), !pv_masked)
    };
    // Flags: a row's first product of the tile, and of the block.
    let mark = and_all(&[pv_step, live, st.last]);
    let one_a = m.lit(a_n, 1);
    let zero_a = m.zero(a_n);
    let set = mux(mark, one_a << st.ii, zero_a);
    m.set_next(started, mux(i.tile_reset, zero_a, started.q | set));
    m.set_next(scaled, mux(i.pv_block_start, zero_a, scaled.q | set));
    (pv_op, pv_masked)
}

/// Bit `row * width + col` of `bits` (rows of `width` bits), selected by `row` then `col`.
pub(crate) fn select_bit2(bits: Sig, rows: u32, width: u32, row: Sig, col: Sig) -> Sig {
    let per_row: Vec<Sig> = (0..rows)
        .map(|r| {
            let bs: Vec<Sig> = (0..width).map(|k| bits.bit(r * width + k)).collect();
            mux_index(col, &bs)
        })
        .collect();
    mux_index(row, &per_row)
}

group! {
    /// The S tier's inputs: the QK PEs' read data (32 bits each, PE 0 lowest) and enables
    /// (from the QK tier), the engine's read position (block slot, query row, key within a
    /// PE, PE); the QK step bus.
    pub struct STierIn<T> {
        rd_data, en, slot, ii, jj, cc;
        step: PeStep<T>,
    }
}

group! {
    /// The S tier's outputs: the QK PEs' read address (the link's), the score at the engine's
    /// position, per PE (bit c) the link's read of the QK PE and its write above this cycle,
    /// and (narrow links) the last write of a block's walk; with spare lanes the S links'
    /// status.
    pub struct STierOut<T> {
        rd_addr, value, reads, writes, linked;
        link: Option<crate::link::LinkStatus<T>>,
    }
}

/// The S tier's block.
pub type STierBlock = Block<STierIn, STierOut<u32>>;

/// Defines the softmax tier's S registers and links of the row `cfg` (three tiers).
pub fn build_s_tier(d: &mut Design, cfg: &PeRowConfig) -> STierBlock {
    let link = cfg.vlink_latency();
    let c = cfg.cols;
    let inputs = STierIn {
        rd_data: cfg.elem_bits().1 * c,
        en: c,
        slot: 1,
        ii: cfg.ii_bits(),
        jj: cfg.jj_bits(),
        cc: crate::addr_bits(c),
        step: cfg.step_widths(),
    };
    let outputs = STierOut {
        rd_addr: cfg.pe.addr_width(),
        value: cfg.elem_bits().1,
        reads: c,
        writes: c,
        linked: 1,
        link: cfg.bundle(Bundle::SUp).map(|g| LinkStatus {
            bad: 1,
            failed: crate::link::count_bits(g.physical()),
            probed: 1,
        }),
    };
    let one_slot = cfg.faults;
    let name = format!(
        "s_tier_c{}_a{}_b{}_l{}{}_{}{}",
        c,
        cfg.a,
        cfg.b,
        link,
        if cfg.s_walk() {
            format!("v{}", cfg.plan().s_link_bits())
        } else {
            String::new()
        },
        cfg.pe.params_name(),
        if one_slot { "_faults" } else { "" }
    ) + &cfg
        .spares()
        .map_or(String::new(), |sp| format!("_s{}g{}", sp.spares, sp.group));
    let cfg = *cfg;
    let gate = crate::clock_gate::build(d);
    d.define_block(&name, &inputs, outputs, |d, m, i| {
        m.doc(&format!(
            "s_tier: the softmax tier's S registers above {} QK PEs (2 blocks of {} x {} FP32 \n\
             each) and their S links ({} register stages). See hdl/src/array/pe_tier.rs.",
            cfg.cols, cfg.a, cfg.b, link
        ));
        m.set_latency(cfg.pe.latency() + link + 1);
        let above = Above::new(gate);
        let mut up = Crossing::new(cfg.spares(), link);
        let mut out = if cfg.s_walk() {
            s_tier_walk(m, &cfg, one_slot, &i, (above, &mut up))
        } else {
            s_tier(m, &cfg, (link, one_slot), &i, (above, &mut up))
        };
        let lanes = cfg.bundle(Bundle::SUp).map_or(0, |g| g.lanes);
        out.link = up.finish(d, m, (Bundle::SUp, lanes), cfg.faults);
        out
    })
}

/// The S slot above: `s`, or while the fault `SharedSTierSlot` is selected (`injection`: a
/// row built for fault injection) always slot 0 (one S block above instead of two, so a
/// block's scores overwrite those the softmax of the previous block still reads).
fn above_slot(m: &mut ModuleBuilder, injection: bool, s: Sig) -> Sig {
    m.with_fault(injection, Fault::SharedSTierSlot, |m| m.zero(1), s)
}

fn s_tier(
    m: &mut ModuleBuilder,
    cfg: &PeRowConfig,
    (link, one_slot): (u32, bool),
    i: &STierIn,
    (mut above, up): (Above, &mut Crossing),
) -> STierOut {
    let lat = cfg.pe.latency();
    let acc_bits = cfg.elem_bits().1;
    let st = &i.step;
    for x in [st.op, st.j] {
        m.discard(x);
    }
    let rd_addr = m.delay_n("link_rd_addr", st.addr, lat);
    let lands = m.name("s_lands", st.valid & !st.pv & st.last);
    let slot_of = |m: &mut ModuleBuilder, s: Sig| above_slot(m, one_slot, s);
    let w_slot = slot_of(m, st.slot);
    let pos = cat(&[w_slot, st.ii, st.jj]);
    let at = match cfg.spares() {
        None => m.delay_n("link_s_at", pos, lat + link),
        Some(_) => {
            let landed_at = m.delay_n("link_s_pos", pos, lat);
            up.send(m, "link_s_at", landed_at)
        }
    };
    let r_slot = slot_of(m, i.slot);
    let raddr = cat(&[r_slot, i.ii, i.jj]);
    for c in 0..cfg.cols {
        let read = m.delay_n(&format!("link_s_rd{c}"), lands & i.en.bit(c), lat);
        let we = up.send(m, &format!("link_s_we{c}"), read);
        let data = up.send(
            m,
            &format!("link_s_d{c}"),
            i.rd_data.slice(acc_bits * c + acc_bits - 1, acc_bits * c),
        );
        above.push(m, cfg, c, (we, at, data), raddr, read);
    }
    let linked = m.zero(1);
    above.out(rd_addr, i.cc, linked)
}

/// The S registers above a row's QK PEs, as they are filled: each PE's values at the
/// engine's read address, and per PE the link's read below and write above this cycle. Each
/// register sits behind a clock gate opened by its write.
struct Above {
    gate: crate::clock_gate::ClockGate,
    values: Vec<Sig>,
    reads: Vec<Sig>,
    writes: Vec<Sig>,
}

impl Above {
    fn new(gate: crate::clock_gate::ClockGate) -> Self {
        Above {
            gate,
            values: vec![],
            reads: vec![],
            writes: vec![],
        }
    }

    /// PE `c`'s S registers, written with (enable, address, data), read at `raddr`.
    fn push(
        &mut self,
        m: &mut ModuleBuilder,
        cfg: &PeRowConfig,
        c: u32,
        (we, at, data): (Sig, Sig, Sig),
        raddr: Sig,
        read: Sig,
    ) {
        let regs = crate::clock_gate::gated_memory(
            m,
            &self.gate,
            &format!("s_regs{c}"),
            (cfg.s_tier_depth(), cfg.elem_bits().1),
            (we, at, data),
        );
        self.values.push(m.mem_read(regs, raddr));
        self.reads.push(read);
        self.writes.push(we);
    }

    /// The tier's outputs (PE 0 in the lowest bits), the value of PE `cc`.
    fn out(mut self, rd_addr: Sig, cc: Sig, linked: Sig) -> STierOut {
        self.reads.reverse();
        self.writes.reverse();
        STierOut {
            rd_addr,
            value: mux_index(cc, &self.values),
            reads: cat(&self.reads),
            writes: cat(&self.writes),
            linked,
            link: None,
        }
    }
}

/// Narrow S links (`vlink_bits` < 32): the QK PEs keep two blocks, and once a block's last
/// score has landed a serializer walks it, score by score (query row, then key within the PE),
/// reading every PE at the same register and sending 32/`vlink_bits` beats (low bits first)
/// up each PE's link; above, a shift register assembles the score and writes it at (slot, ii,
/// jj). A block that lands while the previous one is still walked waits its turn (one at
/// most: the next block's QK needs the softmax of the block before, which needs its walk).
/// `linked` marks the block's last write.
fn s_tier_walk(
    m: &mut ModuleBuilder,
    cfg: &PeRowConfig,
    one_slot: bool,
    i: &STierIn,
    (mut above, up): (Above, &mut Crossing),
) -> STierOut {
    let (lat, w) = (cfg.pe.latency(), cfg.plan().s_link_bits());
    let beats = cfg.s_beats();
    let st = &i.step;
    m.discard(st.op);
    m.discard(st.j);
    m.discard(st.addr);
    // Which PEs' scores are live (not masked), kept per (slot, ii, jj) as they land.
    let lands = st.valid & !st.pv & st.last;
    let pos = cat(&[st.slot, st.ii, st.jj]);
    let sent = m.memory("s_live", cfg.s_tier_depth(), cfg.cols);
    let land = m.delay_n("s_lands", lands, lat);
    let land_at = m.delay_n("s_land_at", pos, lat);
    let land_en = m.delay_n("s_land_en", i.en, lat);
    m.mem_write(sent, land, land_at, land_en);
    // A block has landed: its last position's score has.
    let blk_last = and_all(&[
        lands,
        st.ii.eq((cfg.a - 1) as u64),
        st.jj.eq((cfg.b - 1) as u64),
    ]);
    let landed = m.delay_n("s_blk_landed", blk_last, lat);
    let landed_slot = m.delay_n("s_blk_slot", st.slot, lat);
    // The walk: busy, the block's slot, the position, the beat; one block waiting.
    let busy = m.reg("walk_busy", 1, Some(0));
    let wslot = m.reg("walk_slot", 1, Some(0));
    let wii = m.reg("walk_ii", cfg.ii_bits(), Some(0));
    let wjj = m.reg("walk_jj", cfg.jj_bits(), Some(0));
    let beat = m.reg("walk_beat", crate::addr_bits(beats), Some(0));
    let pend = m.reg("walk_pend", 1, Some(0));
    let pend_slot = m.reg("walk_pend_slot", 1, Some(0));
    let (beat_n, beat_last) = m.wrapping_step(beat.q, beats);
    let (jj_n, jj_last) = m.wrapping_step(wjj.q, cfg.b);
    let (ii_n, ii_last) = m.wrapping_step(wii.q, cfg.a);
    let fin = and_all(&[busy.q, beat_last, jj_last, ii_last]);
    let idle = !busy.q | fin;
    let take = idle & (landed | pend.q);
    let slot_next = mux(pend.q, pend_slot.q, landed_slot);
    m.set_next(busy, take | (busy.q & !fin));
    m.set_next(wslot, slot_next);
    m.set_enable(wslot, take);
    let zero = |m: &mut ModuleBuilder, r: RegHandle| m.zero(r.q.width());
    let (z_ii, z_jj, z_beat) = (zero(m, wii), zero(m, wjj), zero(m, beat));
    let step_pos = busy.q & beat_last;
    m.set_next(beat, mux(take, z_beat, beat_n));
    m.set_enable(beat, take | busy.q);
    m.set_next(wjj, mux(take, z_jj, jj_n));
    m.set_enable(wjj, take | step_pos);
    m.set_next(wii, mux(take, z_ii, ii_n));
    m.set_enable(wii, take | (step_pos & jj_last));
    // A landing while busy waits (taking the waiting block lets a simultaneous landing wait).
    m.set_next(pend, (pend.q | landed) & !(take & !(pend.q & landed)));
    m.set_next(pend_slot, landed_slot);
    m.set_enable(pend_slot, landed);
    m.assert_always(
        "s_walk_overrun",
        !(landed & pend.q & !take),
        "an S block landed while two were waiting for the narrow S links",
    );
    // Below: read every QK PE at the walk's register on a score's first beat, then shift.
    let acc_bits = cfg.elem_bits().1;
    let aw = cfg.pe.addr_width();
    let rd_addr = cfg.s_addr_rtl(m, wslot.q, wii.q, wjj.q, aw);
    let first = busy.q & beat.q.is_zero();
    let live = m.mem_read(sent, cat(&[wslot.q, wii.q, wjj.q]));
    // Up the links: the beat's bits, the beat flags, the position and the live PEs.
    let slot_of = |m: &mut ModuleBuilder, s: Sig| above_slot(m, one_slot, s);
    let w_slot = slot_of(m, wslot.q);
    let at = up.send(m, "link_s_at", cat(&[w_slot, wii.q, wjj.q]));
    let up_beat = up.send(m, "link_s_beat", busy.q);
    let up_last = up.send(m, "link_s_last", busy.q & beat_last);
    let up_live = up.send(m, "link_s_live", live);
    let r_slot = slot_of(m, i.slot);
    let raddr = cat(&[r_slot, i.ii, i.jj]);
    for c in 0..cfg.cols {
        let word = i.rd_data.slice(acc_bits * c + acc_bits - 1, acc_bits * c);
        let sh = m.reg(&format!("link_s_sh{c}"), acc_bits - w, Some(0));
        m.set_next(sh, mux(first, word.slice(acc_bits - 1, w), sh.q >> w));
        m.set_enable(sh, busy.q);
        let lane = mux(first, word.slice(w - 1, 0), sh.q.slice(w - 1, 0));
        let lane_up = up.send(m, &format!("link_s_lane{c}"), lane);
        // Above: beats shift in from the top; the last beat completes the score.
        let acc = m.reg(&format!("link_s_acc{c}"), acc_bits - w, Some(0));
        let score = cat(&[lane_up, acc.q]);
        m.set_next(acc, score.slice(acc_bits - 1, w));
        m.set_enable(acc, up_beat);
        let we = up_last & up_live.bit(c);
        above.push(m, cfg, c, (we, at, score), raddr, first & live.bit(c));
    }
    let linked = up.send(m, "link_s_linked", fin);
    above.out(rd_addr, i.cc, linked)
}
