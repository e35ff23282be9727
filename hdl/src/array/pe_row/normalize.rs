//! The tile's readout: 1/l, the normalizing multiplies and the O staging beats.

use super::{Engine, EngineRegs, Parts, PeRowConfig, RowIn, RowStore, SoftmaxRows};
use crate::fp::recip::RecipIn;
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
    // The pipeline: the visited value, its row's zero flag and r registered (stage 0), the
    // FP32 multiplier's stages, the rounding into the beat register; the beat's write leaves
    // from the register a cycle later. The lane and beat control runs on the visit's signals
    // delayed alike (`cfg.readout_latency()` in all).
    // The visited O is taken into a register behind a clock gate opened only by the readout's
    // visits (operand isolation): the normalizing multiplier does not follow the PE registers
    // in the other cycles, whose results nothing takes.
    let o_rd = crate::clock_gate::delay(m, &parts.gate, "o_rd", value, e.in_ro);
    let zeros_rd = m.delay("zero_rd", zeros);
    let r_rd = m.delay("r_rd", r.q);
    let zero = m.zero(long);
    let o_val = mux(zeros_rd, zero, o_rd);
    let y = m
        .instantiate(&parts.norm_mul, "u_norm", &Binary { a: o_val, b: r_rd })
        .y;
    let y_short = crate::fp::cvt_narrow::logic_to(m, y, f.out);
    let to_beat = cfg.readout_latency() - 1;
    let in_ro = m.delay_n("ro_valid", e.in_ro, to_beat);
    let ro_begin = m.delay_n("ro_begin", e.state.is(Engine::RoWait), to_beat);
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
    m.set_enable(beat, in_ro);
    let lanes = w / short;
    let lane = m.reg("lane", addr_bits(lanes), Some(0));
    let last_short = lane.q.eq((lanes - 1) as u64);
    let last_long = lane.q.eq((w / long - 1) as u64);
    let lane_last = mux(i.out_f32, last_long, last_short);
    let zero_l = m.zero(lane.q.width());
    let lane_d = mux(lane_last, zero_l, lane.q + 1);
    m.set_next(lane, mux(ro_begin, zero_l, lane_d));
    m.set_enable(lane, in_ro | ro_begin);
    let st_beat = m.reg("st_beat", cfg.beat_bits(), Some(0));
    let zero_b = m.zero(cfg.beat_bits());
    let write = in_ro & lane_last;
    m.set_next(st_beat, mux(ro_begin, zero_b, st_beat.q + 1));
    m.set_enable(st_beat, write | ro_begin);
    let store = RowStore {
        we: m.delay("st_we", write),
        row: m.delay_n("ro_row", e.ii.q, cfg.readout_latency()),
        beat: m.delay("st_beat_rd", st_beat.q),
        data: beat.q,
    };
    (store, recip_done)
}
