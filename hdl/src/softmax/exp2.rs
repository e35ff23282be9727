//! `fp_exp2_e8m23`: y = 2^x for binary32 x, pipelined, one result per cycle (the unit's name
//! is its format's, [`Exp2Config::unit_name`]).
//!
//! Ports: `x` (32 bits) → `y` (32 bits). Latency 0 to 6 (module name
//! `fp_exp2_e8m23_l<latency>`): latency 1 registers the output, latency 2 also the table
//! lookup, latency 3 also the interpolation's multiply-add, latency 4 also x's shifted magnitude
//! (before the negation and the lookup), latency 5 also the multiply-add's carry-save pair,
//! latency 6 also the rounding's decision before its increment.
//!
//! Algorithm (bit-exact model: `kernels::fp::exp2`): X = floor(x · 2^24) in fixed point, so
//! x = n + f with n = X >> 24 and f the low 24 bits; 2^f is read from a 64-segment table by
//! linear interpolation, T[k] + D[k] · r / 2^18 with k = f[23:18], r = f[17:0], T[k] =
//! round(2^(k/64) · 2^23) and D[k] = T[k+1] − T[k] (the product's low 18 bits are dropped);
//! the result is 2^n times that, rounded to nearest even where it is subnormal. NaN gives the
//! canonical NaN, x ≥ 128 gives +Inf, x ≤ −152 (and −Inf) gives +0. Relative error below 2^-14
//! wherever the result is normal (2^-11, half an FP16 ulp, is what softmax needs).

use anyhow::Result;

use crate::format::Format;
use crate::fp::arith::{
    carry_save_sum, partial_products, round_apply_f32, round_finish_f32, round_plan_f32, stage_all,
    unpack,
};
use crate::ir::iface::Block;
use crate::operands::{X, Y};
use crate::{cat, mux, mux_index, Design, ModuleBuilder, Sig};

/// Segments of the 2^f table (a power of two).
pub const SEGMENTS: u32 = 64;

/// The table T[0..=64]: 2^(k/64) in 1.23 fixed point, rounded to nearest: the model's
/// (`kernels::fp::exp2_table`), so the two cannot part.
pub fn table() -> Vec<u64> {
    let t = kernels::fp::exp2_table();
    assert_eq!(t.len(), SEGMENTS as usize + 1);
    t.iter().map(|&x| x as u64).collect()
}

/// Configuration of `fp_exp2_e8m23`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Exp2Config {
    pub latency: u32,
}

impl Exp2Config {
    pub const MAX_LATENCY: u32 = 6;
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

/// The table's segment of x · 2^24 and the fraction within it: (n, r, T[k], D[k]).
///
/// floor(x · 2^24) = n.k.r (9, 6 and 18 bits): the magnitude w truncated for x >= 0, and
/// −(w + inexact) = !w + (1 − inexact) for x < 0: one increment, not an increment and a
/// negation. `cut`: after latency 4's cut, where the increment's carry would come before the lookup.
fn segment(
    m: &mut ModuleBuilder,
    cut: bool,
    negative: Sig,
    whole: Sig,
    inexact: Sig,
) -> (Sig, Sig, Sig, Sig) {
    let t = table();
    let segs = SEGMENTS as usize;
    let tk = |i: usize| t[i];
    let dk = |i: usize| t[i + 1] - t[i];
    if cut {
        // After the cut the increment's carry would come before the lookup: it reaches k only
        // when w's r bits are all zero (and x exact), and n only when its k bits are too, so
        // the table is read at k's bits as they are (w's or their complement) and at the next
        // index, and the carry picks one (two tables' area for a lookup without a carry chain
        // before it).
        let inv = negative.repeat(33);
        let bits = whole.zext(33) ^ inv;
        let (n_bits, k_bits, r_bits) = (bits.slice(32, 24), bits.slice(23, 18), bits.slice(17, 0));
        let carry_r = negative & !inexact;
        let carry_k = carry_r & whole.slice(17, 0).is_zero();
        let carry_n = carry_k & whole.slice(23, 18).is_zero();
        let lookup = |m: &mut ModuleBuilder, width: u32, f: &dyn Fn(usize) -> u64, next: bool| {
            let consts: Vec<Sig> = (0..segs)
                .map(|i| m.lit(width, f(if next { (i + 1) % segs } else { i })))
                .collect();
            mux_index(k_bits, &consts)
        };
        let (base_at, base_next) = (lookup(m, 24, &tk, false), lookup(m, 24, &tk, true));
        let (slope_at, slope_next) = (lookup(m, 18, &dk, false), lookup(m, 18, &dk, true));
        (
            n_bits + carry_n.zext(9),
            r_bits + carry_r.zext(18),
            mux(carry_k, base_next, base_at),
            mux(carry_k, slope_next, slope_at),
        )
    } else {
        let mag33 = whole.zext(33);
        let neg33 = !mag33 + (!inexact).zext(33);
        let fixed = mux(negative, neg33, mag33);
        let fixed = m.name("fixed", fixed);
        let k = fixed.slice(23, 18);
        let lookup = |m: &mut ModuleBuilder, width: u32, f: &dyn Fn(usize) -> u64| {
            let consts: Vec<Sig> = (0..segs).map(|i| m.lit(width, f(i))).collect();
            mux_index(k, &consts)
        };
        (
            fixed.slice(32, 24),
            fixed.slice(17, 0),
            lookup(m, 24, &tk),
            lookup(m, 18, &dk),
        )
    }
}

/// The exp2 logic with `latency` pipeline registers.
pub fn logic(m: &mut ModuleBuilder, x: Sig, latency: u32) -> Sig {
    let u = unpack(m, x, Format::FP32, "x");
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
    let rsh = crate::fp::arith::clamp(m, rsh, 32, 6);
    let rsh = m.hint("rsh", rsh);
    let whole = sig_up >> rsh;
    let whole = m.hint("whole", whole);
    let ones = m.ones(32);
    let kept_mask = ones << rsh;
    let lost_mask = !kept_mask;
    let lost = sig_up & lost_mask;
    let inexact = lost.any();
    // Latency 4: a cut after the shift (the negation's increment and the table lookup follow).
    let [is_nan, big, tiny, negative, whole, inexact] = stage_all(
        m,
        "x",
        latency >= 4,
        [
            ("is_nan", is_nan),
            ("overflow", big),
            ("underflow", tiny),
            ("negative", negative),
            ("whole", whole),
            ("inexact", inexact),
        ],
    );
    let (n, r, base, slope) = segment(m, latency >= 4, negative, whole, inexact);
    let base = m.name("base", base);
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
    // The rounding's exponent half comes from n alone (2^n's biased exponent n + 127), beside
    // the multiply-add.
    let exp = n.sext(10) + 127;
    let plan = round_plan_f32(m, exp);

    // T[k] + floor(D[k] · r / 2^18) as one multiply-add: (D[k] · r + T[k] · 2^18) / 2^18,
    // whose low 18 bits are the product's alone, so the floor is the same, and the base joins
    // the product's adder tree instead of a carry chain after it. Latency 5 cuts between the
    // tree's carry-save pair (built here as a Wallace tree) and its add.
    let base18 = base.zext(42) << 18;
    let (is_nan, big, tiny, plan, sum) = if latency >= 5 {
        let mut rows = partial_products(slope, r, 42);
        rows.push(base18);
        let (sum, carry) = carry_save_sum(rows);
        let [is_nan, big, tiny, sum, carry] = stage_all(
            m,
            "c",
            true,
            [
                ("is_nan", is_nan),
                ("overflow", big),
                ("underflow", tiny),
                ("sum", sum),
                ("carry", carry),
            ],
        );
        (is_nan, big, tiny, plan.stage(m, "c", true), sum + carry)
    } else {
        (is_nan, big, tiny, plan, slope.mul_wide(r).zext(42) + base18)
    };
    let dropped = sum.slice(17, 0);
    m.discard(dropped);
    // (T[k] + D[k] · r / 2^18 < T[k + 1] <= 2^24: 42 bits hold the sum.)
    let frac = sum.slice(41, 18);
    let frac = m.name("pow_frac", frac);
    // Latency 3: a cut after the interpolation's multiply-add.
    let [is_nan, big, tiny, frac] = stage_all(
        m,
        "p",
        latency >= 3,
        [
            ("is_nan", is_nan),
            ("overflow", big),
            ("underflow", tiny),
            ("frac", frac),
        ],
    );
    let plan = plan.stage(m, "p", latency >= 3);
    let zero1 = m.zero(1);
    let rounding = round_apply_f32(m, frac, plan, zero1);
    // Latency 6: a cut between the rounding's decision and its increment.
    let [is_nan, big, tiny] = stage_all(
        m,
        "r",
        latency >= 6,
        [("is_nan", is_nan), ("to_inf", big), ("to_zero", tiny)],
    );
    let rounding = rounding.stage(m, "r", latency >= 6);
    let y = round_finish_f32(m, zero1, rounding);

    let nan = m.lit(32, Format::FP32.qnan());
    let inf = m.lit(32, Format::FP32.inf());
    let zero = m.zero(32);
    let y = mux(tiny, zero, y);
    let y = mux(big, inf, y);
    let y = mux(is_nan, nan, y);
    m.stage("y", y, latency >= 1)
}
