//! `fp_exp2_e8m23`: y = 2^x for binary32 x, pipelined, one result per cycle (the unit's name
//! is its format's, [`Exp2Config::unit_name`]).
//!
//! Ports: `x` (32 bits) → `y` (32 bits). Latency 0 to 4 (module name
//! `fp_exp2_e8m23_l<latency>`): latency 1 registers the output, latency 2 also the table
//! lookup, latency 3 also the interpolation's product, latency 4 also the fixed-point x
//! before the lookup.
//!
//! Algorithm (bit-exact model: `kernels::fp::exp2`): X = floor(x · 2^24) in fixed point, so
//! x = n + f with n = X >> 24 and f the low 24 bits; 2^f is read from a 64-segment table by
//! linear interpolation, T[k] + D[k] · r / 2^18 with k = f[23:18], r = f[17:0], T[k] =
//! round(2^(k/64) · 2^23) and D[k] = T[k+1] − T[k] (the product's low 18 bits are dropped);
//! the result is 2^n times that, rounded to nearest even where it is subnormal. NaN gives the
//! canonical NaN, x ≥ 128 gives +Inf, x ≤ −152 (and −Inf) gives +0. Relative error below 2^-14
//! wherever the result is normal (2^-11, half an FP16 ulp, is what softmax needs).

use anyhow::Result;

use crate::arith::{round_pack_f32, stage_all, unpack};
use crate::format::Format;
use crate::iface::Block;
use crate::operands::{X, Y};
use crate::{cat, mux, mux_index, Design, ModuleBuilder, Sig};

/// Segments of the 2^f table (a power of two).
pub const SEGMENTS: u32 = 64;

/// The table T[0..=64]: 2^(k/64) in 1.23 fixed point, rounded to nearest.
pub fn table() -> Vec<u64> {
    (0..=SEGMENTS)
        .map(|k| ((k as f64 / SEGMENTS as f64).exp2() * (1u64 << 23) as f64).round() as u64)
        .collect()
}

/// Configuration of `fp_exp2_e8m23`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Exp2Config {
    pub latency: u32,
}

impl Exp2Config {
    pub const MAX_LATENCY: u32 = 4;
    /// The format of the operand and the result.
    pub const FORMAT: Format = Format::FP32;

    pub fn validate(&self) -> Result<()> {
        crate::check_latency(&Self::unit_name(), self.latency, Self::MAX_LATENCY)
    }

    /// The unit's name, from its format: `fp_exp2_e8m23`.
    pub fn unit_name() -> String {
        crate::fp::unit_name("exp2", &[Self::FORMAT])
    }

    /// The Verilog module's name: the unit's with the latency, `fp_exp2_e8m23_l2`.
    pub fn module_name(&self) -> String {
        format!("{}_l{}", Self::unit_name(), self.latency)
    }
}

/// Defines `fp_exp2_e8m23_l<latency>`.
pub fn build(d: &mut Design, cfg: &Exp2Config) -> Block<X, Y<u32>> {
    Block::of(d.define(&cfg.module_name(), |_, m| {
        m.doc(&format!(
            "{}: y = 2^x (binary32), 64-segment table with linear interpolation.\n\
             Latency {} cycle(s), one result per cycle. NaN -> 0x7FC00000, x >= 128 -> +Inf,\n\
             x <= -152 -> +0. Bit-exact model: kernels::fp::exp2.",
            Exp2Config::unit_name(),
            cfg.latency
        ));
        let x = m.input("x", 32);
        let y = logic(m, x, cfg.latency);
        m.output("y", y);
        m.set_latency(cfg.latency);
    }))
}

/// The exp2 logic with `latency` pipeline registers.
pub fn logic(m: &mut ModuleBuilder, x: Sig, latency: u32) -> Sig {
    let u = unpack(m, x, 8, 23, "x");
    let negative = u.sign;
    let positive = !negative;
    let mag = x.slice(30, 0);
    let c128 = m.lit(31, 0x4300_0000);
    let c152 = m.lit(31, 0x4318_0000);
    let big = mag.ge(c128);
    let big = positive & big;
    let big = m.name("overflow", big);
    let tiny = mag.ge(c152);
    let tiny = negative & tiny;
    let tiny = m.name("underflow", tiny);
    let is_nan = m.name("is_nan", u.is_nan);

    // |x| · 2^24 = sig · 2^(exp - 126); for exp <= 134 it fits 32 bits: (sig << 8) >> (134 - exp).
    let zero8 = m.zero(8);
    let sig_up = cat(&[u.sig, zero8]);
    let c134 = m.lit(8, 134);
    let rsh = c134 - u.exp_eff;
    let rsh = crate::arith::clamp(m, rsh, 32, 6);
    let rsh = m.hint("rsh", rsh);
    let whole = sig_up >> rsh;
    let whole = m.hint("whole", whole);
    let ones = m.ones(32);
    let kept_mask = ones << rsh;
    let lost_mask = !kept_mask;
    let lost = sig_up & lost_mask;
    let inexact = lost.any();
    // floor(x · 2^24): truncation for x >= 0, -(|x| rounded up) for x < 0, that is
    // −(w + inexact) = !w + (1 − inexact): one increment, not an increment and a negation.
    let mag33 = whole.zext(33);
    let neg33 = !mag33 + (!inexact).zext(33);
    let fixed = mux(negative, neg33, mag33);
    let fixed = m.name("fixed", fixed);
    // Latency 4: a cut before the table lookup.
    let [is_nan, big, tiny, fixed] = stage_all(
        m,
        "x",
        latency >= 4,
        [
            ("is_nan", is_nan),
            ("overflow", big),
            ("underflow", tiny),
            ("fixed", fixed),
        ],
    );
    let n = fixed.slice(32, 24);
    let k = fixed.slice(23, 18);
    let r = fixed.slice(17, 0);

    let t = table();
    let t_consts: Vec<Sig> = (0..SEGMENTS as usize).map(|i| m.lit(24, t[i])).collect();
    let d_consts: Vec<Sig> = (0..SEGMENTS as usize)
        .map(|i| m.lit(18, t[i + 1] - t[i]))
        .collect();
    let base = mux_index(k, &t_consts);
    let base = m.name("base", base);
    let slope = mux_index(k, &d_consts);
    let slope = m.name("slope", slope);

    let [is_nan, big, tiny, n, r, base, slope] = stage_all(
        m,
        "",
        latency >= 2,
        [
            ("is_nan", is_nan),
            ("overflow", big),
            ("underflow", tiny),
            ("n", n),
            ("r", r),
            ("base", base),
            ("slope", slope),
        ],
    );

    let step = slope.mul_wide(r);
    let step = m.name("step", step);
    let dropped = step.slice(17, 0);
    m.discard(dropped);
    let step = step.slice(35, 18);
    // Latency 3: a cut after the interpolation's product.
    let [is_nan, big, tiny, n, base, step] = stage_all(
        m,
        "p",
        latency >= 3,
        [
            ("is_nan", is_nan),
            ("overflow", big),
            ("underflow", tiny),
            ("n", n),
            ("base", base),
            ("step", step),
        ],
    );
    let step24 = step.zext(24);
    let frac = base + step24;
    let frac = m.name("pow_frac", frac);
    let n10 = n.sext(10);
    let exp = n10 + 127;
    let zero1 = m.zero(1);
    let y = round_pack_f32(m, zero1, frac, exp, zero1);

    let nan = m.lit(32, Format::FP32.qnan());
    let inf = m.lit(32, Format::FP32.inf());
    let zero = m.zero(32);
    let y = mux(tiny, zero, y);
    let y = mux(big, inf, y);
    let y = mux(is_nan, nan, y);
    m.stage("y", y, latency >= 1)
}
