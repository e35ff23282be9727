//! The tile's readout: 1/l, the normalizing multiplies and the O staging beats.

use super::{Engine, EngineRegs, Parts, PeRowConfig, RowIn, RowStore, SoftmaxRows};
use crate::fp32_recip::RecipIn;
use crate::operands::Binary;
use crate::{addr_bits, cat, mux, ModuleBuilder, Sig};

/// Readout: r = 1/l (1 if l = 0), O · r in FP32 or rounded to FP16, packed into beats for the
/// row's O staging bank. Returns the staging write and the reciprocal's done.
pub(super) fn readout(
    m: &mut ModuleBuilder,
    cfg: &PeRowConfig,
    parts: &Parts,
    i: &RowIn,
    e: &EngineRegs,
    sm: &SoftmaxRows,
    value: Sig,
) -> (RowStore, Sig) {
    let w = cfg.mem_width;
    // O leaves in the short output format or the accumulator's (`out_f32`).
    let f = cfg.pe.mac.formats();
    let (short, long) = (f.out.bits(), f.acc.bits());
    let recip_start = e.state.is(Engine::RoRecip);
    let recip_in = RecipIn {
        start: recip_start,
        x: sm.cur_l,
    };
    let rc = m.instantiate(&parts.recip, "u_recip", &recip_in);
    let recip_done = rc.done;
    m.discard(rc.busy);
    let zeros = m.name("row_is_zero", sm.cur_l_zero | i.ro.zero);
    let one = m.lit(long, f.acc.one());
    let r = m.reg("r", long, Some(0));
    m.set_next(r, mux(zeros, one, rc.y));
    m.set_enable(r, recip_done);
    let zero = m.zero(long);
    let o_val = mux(zeros, zero, value);
    let y = m
        .instantiate(&parts.mul0, "u_norm", &Binary { a: o_val, b: r.q })
        .y;
    let y_short = crate::fp32_to_fp16::logic_to(m, y, f.out);
    let beat = m.reg("beat", w, Some(0));
    // The oldest lane shifts out as the beat fills (a beat may hold one long value).
    m.discard(beat.q.slice(short - 1, 0));
    let shifted_long = if w > long {
        cat(&[y, beat.q.slice(w - 1, long)])
    } else {
        y
    };
    let shifted_short = cat(&[y_short, beat.q.slice(w - 1, short)]);
    let beat_d = mux(i.out_f32, shifted_long, shifted_short);
    m.set_next(beat, beat_d);
    m.set_enable(beat, e.in_ro);
    let lanes = w / short;
    let lane = m.reg("lane", addr_bits(lanes), Some(0));
    let last_short = lane.q.eq((lanes - 1) as u64);
    let last_long = lane.q.eq((w / long - 1) as u64);
    let lane_last = mux(i.out_f32, last_long, last_short);
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
