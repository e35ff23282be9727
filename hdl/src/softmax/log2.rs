//! `fp_log2_e8m23`: y = log2(x) for binary32 x, pipelined, one result per cycle: the row
//! engine's one log per query row, for the log-sum-exp m + log2(l) that the backward pass reads
//! (the unit's name is its format's, [`Log2Config::unit_name`]).
//!
//! Ports: `x` (32 bits) → `y` (32 bits). Latency 0 to 6 (module name `fp_log2_e8m23_l<latency>`):
//! latency 1 registers the output, 2 also the table lookup, 3 also the interpolation's
//! multiply-add, 4 also x's normalized significand and exponent (before the lookup), 5 also
//! the fixed-point result's leading-zero count (before its shift), 6 also the rounding's
//! decision before its increment. The row engine builds it at the exp unit's latency: the two
//! share their critical structure (a 64-segment lookup and a multiply-add).
//!
//! Algorithm (bit-exact model: `kernels::fp::fp32_log2`): x = 2^E · (1 + f), subnormals
//! normalized first; log2(1 + f) = T[k] + D[k] · r / 2^17 with k = f[22:17], r = f[16:0],
//! T[k] = round(log2(1 + k/64) · 2^30) and D[k] = T[k+1] − T[k] (the product's low 17 bits are
//! dropped); E · 2^30 plus that is a signed fixed-point number with 30 fraction bits, rounded
//! once to binary32 (nearest even; never subnormal, never overflowing). NaN and negative x
//! give the canonical NaN, ±0 gives −Inf, +Inf gives +Inf. Absolute error below 2^-14.

use anyhow::Result;

use crate::format::Format;
use crate::fp::arith::{
    leading_zeros, normalize_f32, round_apply_f32, round_finish_f32, round_plan_f32, stage_all,
    unpack,
};
use crate::ir::iface::Block;
use crate::operands::{X, Y};
use crate::{mux, mux_index, Design, ModuleBuilder, Sig};

/// Segments of the log2(1 + f) table (a power of two).
pub const SEGMENTS: u32 = 64;

/// Fraction bits of the table and of the fixed-point result.
const FRAC: u32 = 30;

/// The table T[0..=64]: log2(1 + k/64) in 0.30 fixed point, rounded to nearest: the model's
/// (`kernels::fp::log2_table`), so the two cannot part.
pub fn table() -> Vec<u64> {
    let t = kernels::fp::log2_table();
    assert_eq!(t.len(), SEGMENTS as usize + 1);
    t.iter().map(|&x| x as u64).collect()
}

/// Configuration of `fp_log2_e8m23`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Log2Config {
    pub latency: u32,
}

impl Log2Config {
    pub const MAX_LATENCY: u32 = 6;
    /// The format of the operand and the result.
    pub const FORMAT: Format = Format::FP32;

    pub fn validate(&self) -> Result<()> {
        crate::check_latency(&Self::unit_name(), self.latency, Self::MAX_LATENCY)
    }

    /// The unit's name, from its format: `fp_log2_e8m23`.
    pub fn unit_name() -> String {
        crate::fp::unit_name("log2", &[Self::FORMAT])
    }

    /// The Verilog module's name: the unit's with the latency, `fp_log2_e8m23_l2`.
    pub fn module_name(&self) -> String {
        format!("{}_l{}", Self::unit_name(), self.latency)
    }
}

/// Defines `fp_log2_e8m23_l<latency>`.
pub fn build(d: &mut Design, cfg: &Log2Config) -> Block<X, Y<u32>> {
    Block::of(d.define(&cfg.module_name(), |_, m| {
        m.doc(&format!(
            "{}: y = log2(x) (binary32), 64-segment table with linear interpolation.\n\
             Latency {} cycle(s), one result per cycle. NaN and x < 0 -> 0x7FC00000,\n\
             +-0 -> -Inf, +Inf -> +Inf. Bit-exact model: kernels::fp::fp32_log2.",
            Log2Config::unit_name(),
            cfg.latency
        ));
        let x = m.input("x", 32);
        let y = logic(m, x, cfg.latency);
        m.output("y", y);
        m.set_latency(cfg.latency);
    }))
}

/// The log2 logic with `latency` pipeline registers.
pub fn logic(m: &mut ModuleBuilder, x: Sig, latency: u32) -> Sig {
    let u = unpack(m, x, Format::FP32, "x");
    let negative = u.sign & !u.is_zero;
    let to_nan = u.is_nan | negative;
    let to_nan = m.name("to_nan", to_nan);
    let to_neg_inf = m.name("to_neg_inf", u.is_zero);
    let to_inf = u.is_inf & !u.sign;
    let to_inf = m.name("to_inf", to_inf);
    // 1 + f with f's 23 bits, and E + 127 (10-bit two's complement: below 1 for subnormals).
    let (sig, exp) = normalize_f32(m, &u);
    // The leading one (bit 23) is 1 for every x that is not a special value.
    let hidden = sig.bit(23);
    m.discard(hidden);
    let frac = sig.slice(22, 0);
    let [to_nan, to_neg_inf, to_inf, frac, exp] = stage_all(
        m,
        "n",
        latency >= 4,
        [
            ("to_nan", to_nan),
            ("to_neg_inf", to_neg_inf),
            ("to_inf", to_inf),
            ("frac", frac),
            ("exp", exp),
        ],
    );
    let k = frac.slice(22, 17);
    let r = frac.slice(16, 0);
    let t = table();
    let base: Vec<Sig> = (0..SEGMENTS as usize).map(|i| m.lit(FRAC, t[i])).collect();
    let slope: Vec<Sig> = (0..SEGMENTS as usize)
        .map(|i| m.lit(25, t[i + 1] - t[i]))
        .collect();
    let base = mux_index(k, &base);
    let base = m.name("base", base);
    let slope = mux_index(k, &slope);
    let slope = m.name("slope", slope);
    let [to_nan, to_neg_inf, to_inf, r, base, slope, exp] = stage_all(
        m,
        "t",
        latency >= 2,
        [
            ("to_nan", to_nan),
            ("to_neg_inf", to_neg_inf),
            ("to_inf", to_inf),
            ("r", r),
            ("base", base),
            ("slope", slope),
            ("exp", exp),
        ],
    );
    // T[k] + floor(D[k] · r / 2^17) as one multiply-add, (D[k] · r + T[k] · 2^17) / 2^17: the
    // low 17 bits are the product's alone, so the floor is the same.
    let sum = slope.mul_wide(r).zext(48) + (base.zext(48) << 17);
    let dropped = sum.slice(16, 0);
    m.discard(dropped);
    let above = sum.slice(47, 47);
    m.discard(above);
    // T[k] + D[k] · r / 2^17 < T[k + 1] <= 2^30.
    let y = sum.slice(46, 17);
    // E · 2^30 + y, signed (|E| <= 149): 40 bits.
    let bias = m.lit(10, 127);
    let e = exp - bias;
    let zero30 = m.zero(FRAC);
    let whole = crate::cat(&[e.sext(10), zero30]);
    let fixed = whole + y.zext(40);
    let fixed = m.name("fixed", fixed);
    let [to_nan, to_neg_inf, to_inf, fixed] = stage_all(
        m,
        "f",
        latency >= 3,
        [
            ("to_nan", to_nan),
            ("to_neg_inf", to_neg_inf),
            ("to_inf", to_inf),
            ("fixed", fixed),
        ],
    );
    let sign = fixed.msb();
    let neg = !fixed + 1;
    let mag = mux(sign, neg, fixed);
    // |fixed| < 150 · 2^30 < 2^38: bit 39 is clear.
    let top = mag.bit(39);
    m.discard(top);
    let mag = mag.slice(38, 0);
    let lz = leading_zeros(m, mag);
    let lz = m.name("lz", lz);
    let [to_nan, to_neg_inf, to_inf, sign, mag, lz] = stage_all(
        m,
        "z",
        latency >= 5,
        [
            ("to_nan", to_nan),
            ("to_neg_inf", to_neg_inf),
            ("to_inf", to_inf),
            ("sign", sign),
            ("mag", mag),
            ("lz", lz),
        ],
    );
    // mag · 2^-30 with its leading one at bit 38 − lz: biased exponent 135 − lz. A zero
    // magnitude (x = 1) is +0: the normalized significand is zero, and the exponent field with
    // it (its exponent below 1 makes the rounding's subnormal shift clear it).
    let sig = mag << lz;
    let is_zero = mag.is_zero();
    let c135 = m.lit(10, 135);
    let exp = c135 - lz.zext(10);
    let c0 = m.lit(10, 0);
    let exp = mux(is_zero, c0, exp);
    let plan = round_plan_f32(m, exp);
    let zero1 = m.zero(1);
    let rounding = round_apply_f32(m, sig, plan, zero1);
    let [to_nan, to_neg_inf, to_inf, sign] = stage_all(
        m,
        "r",
        latency >= 6,
        [
            ("to_nan", to_nan),
            ("to_neg_inf", to_neg_inf),
            ("to_inf", to_inf),
            ("sign", sign),
        ],
    );
    let rounding = rounding.stage(m, "r", latency >= 6);
    let y = round_finish_f32(m, sign, rounding);
    let nan = m.lit(32, Format::FP32.qnan());
    let inf = m.lit(32, Format::FP32.inf());
    let neg_inf = m.lit(32, Format::FP32.inf() | (1 << 31));
    let y = mux(to_inf, inf, y);
    let y = mux(to_neg_inf, neg_inf, y);
    let y = mux(to_nan, nan, y);
    m.stage("y", y, latency >= 1)
}
