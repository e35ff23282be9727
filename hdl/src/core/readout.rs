//! The core's readout: takes a finished tile from the sequencer, starts the row engines'
//! normalization (1/l times O, into the O staging buffer) and then the O channel's write.
//! One tile at a time: the next tile's hand-off waits until this one's write has started.

use super::ports::WriteDesc;
use super::{reg_set, CoreParams};
use crate::fault::Fault;
use crate::ir::fsm::Fsm;
use crate::ir::iface::Block;
use crate::mem::dma::ROW_BYTES_BITS;
use crate::{and_all, bits_for, group, mux, Design, ModuleBuilder, Sig};

crate::states! {
    /// The readout: a tile handed over (pending), the rows normalizing (run), the O write.
    pub enum Readout = "RO" { Idle, Pend, Run, Write }
}

group! {
    /// The readout's inputs: the hand-off and the tile handed over (rows, first query row,
    /// no block to compute, O's offset for the head), the row engines' and O channel's busy,
    /// the O base address, row length and row stride.
    pub struct ReadoutIn<T> {
        handoff, rows_valid, q_base, empty_tile, o_head_off, rows_busy, o_busy, o_addr,
        out_row_bytes, o_row_stride;
    }
}

group! {
    /// The readout's outputs: idle (a tile may be handed over), the rows' normalization start
    /// and its zero flag, the O descriptor, and the O region of the tile being written (for
    /// the checker).
    pub struct ReadoutOut<T> {
        idle, go, zero, tile_base, tile_limit;
        o: WriteDesc<T>,
    }
}

/// The readout's block.
pub type ReadoutBlock = Block<ReadoutIn, ReadoutOut<u32>>;

/// Defines the readout of the core `p`.
pub fn build(d: &mut Design, p: &CoreParams) -> ReadoutBlock {
    let (iw, aw) = (p.index_bits, p.addr_bits);
    let inputs = ReadoutIn {
        handoff: 1,
        rows_valid: iw,
        q_base: iw,
        empty_tile: 1,
        o_head_off: aw,
        rows_busy: 1,
        o_busy: 1,
        o_addr: aw,
        out_row_bytes: ROW_BYTES_BITS,
        o_row_stride: aw,
    };
    let outputs = ReadoutOut {
        idle: 1,
        go: 1,
        zero: 1,
        tile_base: aw,
        tile_limit: aw,
        o: WriteDesc {
            start: 1,
            base: aw,
            stride: aw,
            row_bytes: ROW_BYTES_BITS,
            rows: iw,
        },
    };
    let name = format!("{}_readout", p.module_name());
    d.define_block(&name, &inputs, outputs, |_, m, i| {
        m.doc(
            "core readout: tile hand-off, row normalization start, O descriptor (states RO_*).\n\
             Latency 1. See hdl/src/core/readout.rs.",
        );
        m.set_latency(1);
        readout(m, p, &i)
    })
}

fn readout(m: &mut ModuleBuilder, p: &CoreParams, i: &ReadoutIn) -> ReadoutOut {
    let iw = p.index_bits;
    let state = Fsm::new(m, "ro_state", Readout::Idle);
    let rows = m.reg("ro_rows", iw, Some(0));
    let zero = m.reg("ro_zero", 1, Some(0));
    reg_set(m, rows, i.rows_valid, i.handoff);
    reg_set(m, zero, i.empty_tile, i.handoff);
    let region = tile_region(m, p, i);
    // The rows run once they are free and O has room; finished when they were seen busy and
    // are idle again.
    let go = state.is(Readout::Pend) & !i.rows_busy;
    let go = m.name("ro_go", go & !i.o_busy);
    let seen = m.reg("ro_seen", 1, Some(0));
    let in_run = state.is(Readout::Run);
    m.set_next(seen, (seen.q | i.rows_busy) & in_run);
    let finished = and_all(&[in_run, seen.q, !i.rows_busy]);
    // The O write also waits for its region (ready long before: the rows' normalization takes
    // more cycles than the multiplies).
    let o_start = and_all(&[state.is(Readout::Write), !i.o_busy, region.ready]);
    let o_start = m.name("o_start", o_start);
    let r = |s: Readout| state.code(s);
    let pick = |c, t, f| mux(c, r(t), r(f));
    state.set_transitions(m, |s| match s {
        Readout::Idle => pick(i.handoff, Readout::Pend, Readout::Idle),
        Readout::Pend => pick(go, Readout::Run, Readout::Pend),
        Readout::Run => pick(finished, Readout::Write, Readout::Run),
        Readout::Write => pick(o_start, Readout::Idle, Readout::Write),
    });
    let stride = i.o_row_stride;
    // Fault: the descriptor's base one row late (the checker keeps the tile's own region).
    let desc_base = m.with_fault(
        p.faults,
        Fault::WriteOutsideO,
        |_| region.base + stride,
        region.base,
    );
    ReadoutOut {
        idle: state.is(Readout::Idle),
        go,
        zero: zero.q,
        tile_base: region.base,
        tile_limit: region.limit,
        o: WriteDesc {
            start: o_start,
            base: desc_base,
            stride,
            row_bytes: i.out_row_bytes,
            rows: rows.q,
        },
    }
}

/// A tile's O region, registered.
struct Region {
    base: Sig,
    limit: Sig,
    ready: Sig,
}

/// The O region of the tile handed over: base = O's address + the head's offset + the first
/// query row × the row stride, limit = base + its rows × the stride (modulo 2^addr_bits).
/// Multiplied a bit a cycle after the hand-off (the stride doubling, each multiplier's next
/// bit adding it), so no multiplier sits between registers: index_bits + 1 cycles.
fn tile_region(m: &mut ModuleBuilder, p: &CoreParams, i: &ReadoutIn) -> Region {
    let (iw, aw) = (p.index_bits, p.addr_bits);
    let steps = iw + 1;
    let left = m.reg("ro_mul_left", bits_for(steps as u64), Some(0));
    let busy = left.q.ne(0);
    let step = busy & !i.handoff;
    let stride = m.reg("ro_mul_stride", aw, Some(0));
    let first = m.reg("ro_mul_first", steps, Some(0));
    let end = m.reg("ro_mul_end", steps, Some(0));
    let base = m.reg("ro_tile_base", aw, Some(0));
    let limit = m.reg("ro_tile_limit", aw, Some(0));
    let origin = i.o_addr + i.o_head_off;
    let zero_a = m.zero(aw);
    let add = |acc: Sig, bits: Sig| acc + mux(bits.bit(0), stride.q, zero_a);
    let next = [
        (left, m.lit(left.q.width(), steps as u64), left.q - 1),
        (stride, i.o_row_stride, stride.q << 1),
        (first, i.q_base.zext(steps), first.q >> 1),
        (
            end,
            i.q_base.zext(steps) + i.rows_valid.zext(steps),
            end.q >> 1,
        ),
        (base, origin, add(base.q, first.q)),
        (limit, origin, add(limit.q, end.q)),
    ];
    for (r, load, run) in next {
        m.set_next(r, mux(i.handoff, load, run));
        m.set_enable(r, i.handoff | step);
    }
    Region {
        base: m.name("o_tile_base", base.q),
        limit: limit.q,
        ready: !busy,
    }
}
