//! `fp_recip_e8m23`: correctly rounded binary32 reciprocal, one quotient bit per cycle (the
//! unit's name is its format's, [`module_name`]).
//!
//! Ports: `start`, `x` (32 bits) → `busy`, `done`, `y` (32 bits). A cycle with `start` high
//! takes `x` (restarting any division under way); `done` is high for one cycle exactly
//! [`LATENCY`] cycles later (the manifest's latency), and from then on `y` holds 1/x until the
//! next start. `busy` is high while a division runs. One reciprocal per normalization of a
//! query row is all the datapath needs, so a small sequential divider serves.
//!
//! Numerics (bit-exact model: `kernels::fp::fp32_recip`): round to nearest even, subnormal
//! inputs and results; 1/±0 = ±Inf, 1/±Inf = ±0, NaN gives the canonical NaN.
//!
//! Algorithm: the significand m (normalized to [2^23, 2^24)) divides 2^50 by restoring
//! division, 28 quotient bits from a partial remainder that starts at 2^22; the quotient's 27 or
//! 28 bits and a sticky bit from the final remainder go to the shared round-and-pack logic.
//! A start registers `x` as it comes; the first quotient step unpacks and normalizes it into
//! the divisor's register (that step's own bit needs only whether m is 2^23), so nothing but
//! the operand's register is in series with the input; the rounded result is registered, so
//! `y` is a register (a cycle more than the division's).

use crate::format::Format;
use crate::fp::arith::{normalize_f32, round_pack_f32, unpack};
use crate::interface;
use crate::ir::iface::Block;
use crate::{cat, mux, Design, ModuleBuilder, Sig};

interface! {
    /// Start a reciprocal of `x`.
    pub struct RecipIn { start, x }
}

interface! {
    /// The reciprocal `y`, valid with `done`; `busy` while it runs.
    pub struct RecipOut { y, done, busy }
}

/// Quotient bits computed, one per cycle.
const STEPS: u64 = 28;
/// Cycles from a start to `done`: one to load, one per quotient bit, one to register the
/// rounded result (so `y` is a register: the unit's user takes it through its own logic).
pub const LATENCY: u32 = STEPS as u32 + 2;

/// The format of the operand and the result.
pub const FORMAT: Format = Format::FP32;

/// The unit's and its module's name, from its format (the block has no parameters):
/// `fp_recip_e8m23`.
pub fn module_name() -> String {
    crate::fp::unit_name("recip", &[FORMAT])
}

/// Defines `fp_recip_e8m23`.
pub fn build(d: &mut Design) -> Block<RecipIn, RecipOut<u32>> {
    let name = module_name();
    Block::of(d.define(&name, |_, m| {
        m.doc(&format!(
            "{name}: correctly rounded binary32 1/x (round to nearest even), sequential.\n\
             start takes x; done pulses {LATENCY} cycles later, then y holds 1/x until the next\n\
             start. Bit-exact model: kernels::fp::fp32_recip."
        ));
        let start = m.input("start", 1);
        let x = m.input("x", FORMAT.bits());
        logic(m, start, x);
        m.set_latency(LATENCY);
    }))
}

fn logic(m: &mut ModuleBuilder, start: Sig, x: Sig) {
    // The operand registered as it comes: its unpacking and normalization (a leading-zero
    // count and a shift) run in the first quotient step, not in series with what drives `x`.
    let x_q = m.hold("x", x, start);
    // Steps left; a start loads the count and the first partial remainder.
    let count = m.reg("count", 5, Some(0));
    let running = count.q.any();
    let running = m.name("running", running);
    let first = m.name("first_step", count.q.eq(STEPS));
    let u = unpack(m, x_q, Format::FP32, "x");
    let (sig, exp) = normalize_f32(m, &u);

    // Operand and special-case registers, loaded in the first step.
    let divisor = m.hold("divisor", sig, first);
    let exp_q = m.hold("x_exp", exp, first);
    let sign_q = m.hold("sign", u.sign, first);
    let nan_q = m.hold("is_nan", u.is_nan, first);
    let inf_q = m.hold("is_inf", u.is_inf, first);
    let zero_q = m.hold("is_zero", u.is_zero, first);
    let remainder = m.reg("remainder", 24, Some(0));
    let quotient = m.reg("quotient", 28, Some(0));

    let zero1 = m.zero(1);
    let doubled = cat(&[remainder.q, zero1]);
    let divisor25 = divisor.zext(25);
    // The first step's doubled remainder is 2^23, and the divisor in [2^23, 2^24) (its
    // register not loaded yet) fits it only when it is 2^23 (the remainder is then 0).
    let fits_first = sig.eq(1 << 23);
    let fits = mux(first, fits_first, doubled.ge(divisor25));
    let fits = m.name("fits", fits);
    let less = doubled - divisor25;
    let next_rem = mux(fits, less, doubled);
    // The partial remainder stays below the divisor, so its top bit is always clear.
    let next_rem_top = next_rem.bit(24);
    m.discard(next_rem_top);
    let next_rem = next_rem.trunc(24);
    let first_rem = mux(fits_first, m.zero(24), m.lit(24, 1 << 23));
    let next_rem = mux(first, first_rem, next_rem);
    let q_low = quotient.q.slice(26, 0);
    let next_q = cat(&[q_low, fits]);

    let start_rem = m.lit(24, 1 << 22);
    let zero28 = m.zero(28);
    let rem_d = mux(start, start_rem, next_rem);
    let q_d = mux(start, zero28, next_q);
    m.set_next(remainder, rem_d);
    m.set_next(quotient, q_d);
    let load = start | running;
    m.set_enable(remainder, load);
    m.set_enable(quotient, load);
    let steps = m.lit(5, STEPS);
    let count_down = count.q - 1;
    let zero5 = m.zero(5);
    let count_next = mux(running, count_down, zero5);
    let count_d = mux(start, steps, count_next);
    m.set_next(count, count_d);

    // done: the last step happened two cycles ago (the rounded result registered between:
    // `rounding`, still busy).
    let last = count.q.eq(1);
    let not_start = !start;
    let finishing = last & not_start;
    let rounding = m.delay("rounding", finishing);
    let done = m.delay("done", rounding);

    // Round: the quotient's leading one is bit 27 (divisor 2^23) or bit 26.
    let top = quotient.q.bit(27);
    let q_shift = cat(&[q_low, zero1]);
    let sig28 = mux(top, quotient.q, q_shift);
    let c254 = m.lit(10, 254);
    let c253 = m.lit(10, 253);
    let base = mux(top, c254, c253);
    let y_exp = base - exp_q;
    let y_exp = m.name("y_exp", y_exp);
    let sticky = remainder.q.any();
    let rounded = round_pack_f32(m, sign_q, sig28, y_exp, sticky);

    let nan = m.lit(32, Format::FP32.qnan());
    let inf_bits = m.lit(31, Format::FP32.inf());
    let inf = cat(&[sign_q, inf_bits]);
    let zero_bits = m.zero(31);
    let zero = cat(&[sign_q, zero_bits]);
    let y = mux(zero_q, inf, rounded);
    let y = mux(inf_q, zero, y);
    let y = mux(nan_q, nan, y);
    let y = m.delay("result", y);
    m.output("y", y);
    m.output("done", done);
    m.output("busy", running | rounding);
}
