//! The core's checker (simulation only: instantiated under `ifdef REGFLASH_ASSERTIONS`, never
//! synthesized). It watches the sequencer, the fetch unit and the memory port:
//!
//! * `k_block_consumed`, `v_block_consumed`: a landed K or V block is consumed (released)
//!   within `kv_bound` cycles (in rowfused, which runs every QK of a tile before its first
//!   PV, a K block's wait counts while the tile has QKs to issue, a V block's after its last);
//! * `writes_only_o`: every memory write falls inside the O tile being written (S and P never
//!   reach memory);
//! * `k_block_in_order`, `v_block_in_order`: a phase runs on the block it needs (in its first
//!   step the channel's current block is the phase's block; a stale block would be reused
//!   otherwise);
//! * `q_release_held`, `k_release_held`, `v_release_held`: blocks are released only while one
//!   is held.

use super::CoreParams;
use crate::ir::iface::Block;
use crate::{group, interface, mux, Design, ModuleBuilder, Sig};

interface! {
    /// A read channel as the checker sees it: a block landed, the sequencer releases it, the
    /// channel's current block number.
    pub struct ChannelWatch { ready, release }
}

group! {
    /// What the checker watches.
    pub struct CheckIn<T> {
        mem_valid, mem_write, mem_addr, o_start, tile_base, tile_limit, start_qk, start_pv,
        k_block, v_block, qk_issued, pv_issued, k_due, v_due;
        q: ChannelWatch<T>,
        k: ChannelWatch<T>,
        v: ChannelWatch<T>,
    }
}

/// The checker's block (no outputs).
pub type CheckBlock = Block<CheckIn, ()>;

/// Defines the checker of the core `p`.
pub fn build(d: &mut Design, p: &CoreParams) -> CheckBlock {
    let (iw, aw) = (p.index_bits, p.addr_bits);
    let watch = ChannelWatch {
        ready: 1,
        release: 1,
    };
    let inputs = CheckIn {
        mem_valid: 1,
        mem_write: 1,
        mem_addr: aw,
        o_start: 1,
        tile_base: aw,
        tile_limit: aw,
        start_qk: 1,
        start_pv: 1,
        k_block: iw,
        v_block: iw,
        qk_issued: iw,
        pv_issued: iw,
        k_due: 1,
        v_due: 1,
        q: watch,
        k: watch,
        v: watch,
    };
    let name = format!("{}_check", p.module_name());
    d.define_block(&name, &inputs, (), |_, m, i| {
        m.doc(
            "core checker (simulation only): K/V blocks consumed in time, writes only to O, \
             blocks in order, releases only of held blocks. See hdl/src/core/check.rs.",
        );
        m.simulation_only();
        check(m, p, &i);
    })
}

fn check(m: &mut ModuleBuilder, p: &CoreParams, i: &CheckIn) {
    // A landed K or V block is consumed within kv_bound cycles.
    let age_bits = 24;
    for (ch, w, due) in [("k", &i.k, i.k_due), ("v", &i.v, i.v_due)] {
        let age = m.reg(&format!("{ch}_ready_age"), age_bits, Some(0));
        let inc = mux(age.q.all(), age.q, age.q + 1);
        let zero = m.zero(age_bits);
        m.set_next(age, mux(w.ready & !w.release & due, inc, zero));
        let ok = age.q.lt(p.kv_bound as u64);
        let what = format!(
            "a landed {} block was not consumed within {} cycles",
            ch.to_uppercase(),
            p.kv_bound
        );
        m.assert_always(&format!("{ch}_block_consumed"), ok, &what);
    }
    // Memory writes land only inside the O tile being written, latched when its write starts
    // (the next tile's hand-off may change the readout's region meanwhile).
    let base = m.hold("o_write_base", i.tile_base, i.o_start);
    let limit = m.hold("o_write_end", i.tile_limit, i.o_start);
    let outside = i.mem_addr.lt(base) | i.mem_addr.ge(limit);
    let bad = (i.mem_valid & i.mem_write) & outside;
    let what = "a memory write fell outside the O tile being written";
    m.assert_always("writes_only_o", !bad, what);
    // A phase starts on the block it expects, checked in its first step: the channel's current
    // block then is the one the phase reads, and the issue count the phase's block (a reg3d
    // tier may start its next phase in the last step of the current one, before the release
    // and the count of that step have taken effect).
    for (ch, start, current, issued) in [
        ("k", i.start_qk, i.k_block, i.qk_issued),
        ("v", i.start_pv, i.v_block, i.pv_issued),
    ] {
        let started = m.delay(&format!("{ch}_phase_started"), start);
        let bad = started & current.ne(issued);
        let what = format!(
            "a {} phase started on a {} block other than the one it needs",
            if ch == "k" { "QK" } else { "PV" },
            ch.to_uppercase()
        );
        m.assert_always(&format!("{ch}_block_in_order"), !bad, &what);
    }
    // Blocks are released only while one is held.
    for (ch, w) in [("q", &i.q), ("k", &i.k), ("v", &i.v)] {
        let what = format!(
            "the sequencer released a {} block that had not landed",
            ch.to_uppercase()
        );
        let ok: Sig = !(w.release & !w.ready);
        m.assert_always(&format!("{ch}_release_held"), ok, &what);
    }
}
