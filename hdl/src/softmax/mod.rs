//! The online-softmax datapath of one query row (bit-exact model: `kernels::softmax`).
//!
//! * `softmax_row`: the row's running state. Ports: `op` (2 bits: 0 hold, 1 init, 2 max, 3 sum),
//!   `blk_max` (the block's row max of raw scores, −Inf if all masked), `blk_sum` (the block's
//!   row sum of FP16 weights widened to FP32), `c` (the softmax constant C = log2(e)/√d) →
//!   `m`, `l` (FP32), `shift` (8 bits), `l_zero`, `stale` (lazy rescaling: the last max op
//!   kept a stale max; 0 in pow2):
//!   init: m = −Inf, l = +0, shift = 0;
//!   max: m' = max(m, ceil(blk_max · C)), shift = min(m' − m, 255) (NaN → 255; 0 while m' is
//!   −Inf), m = m';
//!   sum: l = l · 2^-shift + blk_sum (the shift of the last max).
//!   Pipelined: max and sum write their state [`RowUpdateConfig::latency`] cycles after they
//!   issue (the FP32 multiplier's and adder's latencies plus two), init in one; the row engine
//!   issues nothing while one is in flight.
//!   After the last block, 1/l comes from `fp_recip_e8m23` unless `l_zero` (then 1: O is zero).
//! * `softmax_exp`: one weight per cycle: `s` (raw score), `m`, `c`, `masked` → `p` (FP16) =
//!   masked ? +0 : FP16(exp2(s · C − m)), with +0 in place of m while m is −Inf.
//!   Latency = fp_mul_e8m23 + fp_add_e8m23 + fp_exp2_e8m23 latencies.
//!
//! m is an integer-valued FP32 in the log2 domain, so the rescale of O and l by
//! 2^(m_old − m_new) is an exact exponent shift (`fp32_scale2`). While m is −Inf (all scores so
//! far −Inf or masked) FlashAttention's rule holds: the max subtracted is +0 and the rescale
//! is 1, so blocks of −Inf scores (padding keys) contribute +0, never NaN.

pub mod exp2;
pub mod log2;
pub mod row_reduce;

use anyhow::Result;

use crate::format::Format;
use crate::fp::add::{self, Fp32AddConfig};
use crate::fp::misc;
use crate::fp::misc::Scale2;
use crate::fp::mul::{self, Fp32MulConfig};
use crate::interface;
use crate::ir::iface::Block;
use crate::operands::{Binary, Unary, X};
use crate::softmax::exp2::Exp2Config;
use crate::{cat, mux, Design, ModuleBuilder, Sig};

interface! {
    /// `softmax_row`'s inputs: the operation, the block's max and sum, the softmax constant.
    pub struct RowOpIn { op, blk_max, blk_sum, c }
}

interface! {
    /// A query row's running state: max m, sum l, the block's rescale shift, l = 0, and
    /// whether the last max op kept a stale max that grew (lazy rescaling; 0 in pow2).
    pub struct RowState { m, l, shift, l_zero, stale }
}

interface! {
    /// `softmax_exp`'s inputs: a score, the row's max, the softmax constant, masked.
    pub struct ExpIn { s, m, c, masked }
}

interface! {
    /// The FP16 weight.
    pub struct ExpOut { p }
}

/// How the online softmax rescales O and l when a row's running max grows (config key
/// `rescale`, with `lazy_threshold`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Rescale {
    /// An integer (base-2) running max: every growth rescales O and l by an exact exponent
    /// shift (Softermax). The default.
    #[default]
    Pow2,
    /// pow2's running max, kept stale while a block's max exceeds it by at most `threshold`
    /// (1..=[`Rescale::MAX_THRESHOLD`]): no rescale then, and weights reach up to 2^threshold.
    Lazy { threshold: u8 },
}

impl Rescale {
    /// The largest lazy threshold: a weight 2^15 is FP16's largest power of two.
    pub const MAX_THRESHOLD: u8 = 15;

    /// The threshold τ the row engine compares a growth with (0 for pow2: every growth
    /// rescales).
    pub fn threshold(self) -> u8 {
        match self {
            Rescale::Pow2 => 0,
            Rescale::Lazy { threshold } => threshold,
        }
    }

    /// The config value: "pow2" or "lazy".
    pub fn name(self) -> &'static str {
        match self {
            Rescale::Pow2 => "pow2",
            Rescale::Lazy { .. } => "lazy",
        }
    }

    /// The `rescale` key's value and `lazy_threshold`, checked: a threshold only with "lazy"
    /// (default 4), within 1..=15; "always" (a floating-point max) named and refused.
    pub fn from_keys(rescale: Option<&str>, threshold: Option<u32>) -> Result<Rescale> {
        let r = match (rescale.unwrap_or("pow2"), threshold) {
            ("pow2", None) => Rescale::Pow2,
            ("lazy", t) => {
                let t = t.unwrap_or(Self::DEFAULT_THRESHOLD as u32);
                anyhow::ensure!(
                    (1..=Self::MAX_THRESHOLD as u32).contains(&t),
                    "lazy_threshold = {t} is out of range: give 1 to {} (a stale max may lag \
                     the true one by that many powers of two; FP16 weights hold up to 2^15)",
                    Self::MAX_THRESHOLD
                );
                Rescale::Lazy { threshold: t as u8 }
            }
            ("pow2", Some(t)) => anyhow::bail!(
                "lazy_threshold = {t} applies to rescale = \"lazy\" only: set rescale = \"lazy\", \
                 or drop lazy_threshold"
            ),
            ("always", _) => anyhow::bail!(
                "rescale = \"always\" (a floating-point running max, O rescaled by \
                 exp2(m_old - m_new) through an FP32 multiplier in every PE) is not built: \
                 regflash's running max is an integer, so every rescale is an exponent shift; \
                 use rescale = \"pow2\" (the default: rescale whenever the max grows) or \"lazy\""
            ),
            (other, _) => anyhow::bail!(
                "rescale = \"{other}\" is not a rescaling strategy: give \"pow2\" (the \
                 default) or \"lazy\" (with lazy_threshold = 1..=15)"
            ),
        };
        Ok(r)
    }

    /// The default lazy threshold: a stale max at most 2^4 below the true one.
    pub const DEFAULT_THRESHOLD: u8 = 4;
}

impl std::fmt::Display for Rescale {
    /// "pow2", or "lazy, threshold τ".
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        match self {
            Rescale::Pow2 => write!(f, "pow2"),
            Rescale::Lazy { threshold } => write!(f, "lazy, threshold {threshold}"),
        }
    }
}

/// `softmax_row` operations.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum RowOp {
    Hold = 0,
    Init = 1,
    Max = 2,
    Sum = 3,
}

/// `min(d, 255)` of a non-negative integer-valued FP32 `d`; NaN gives 255.
fn saturate_shift(m: &mut ModuleBuilder, d: Sig) -> Sig {
    let sign = d.msb();
    let exp = d.slice(30, 23);
    let frac = d.slice(22, 0);
    let one = m.lit(1, 1);
    let sig = cat(&[one, frac]);
    let c127 = m.lit(8, 127);
    let c135 = m.lit(8, 135);
    let below_one = exp.lt(c127);
    let too_big = exp.ge(c135); // includes Inf and NaN
                                // 127 <= exp < 135: value = sig >> (150 - exp), below 256.
    let c150 = m.lit(5, 150 % 32);
    let exp5 = exp.trunc(5);
    let rsh = c150 - exp5;
    let int = sig >> rsh;
    let int = m.hint("shift_int", int);
    let high = int.slice(23, 8);
    m.discard(high); // zero in range
    let int8 = int.trunc(8);
    let zero8 = m.zero(8);
    let max8 = m.lit(8, 255);
    let small = below_one | sign;
    let v = mux(small, zero8, int8);
    mux(too_big, max8, v)
}

/// Configuration of `softmax_row`: the softmax datapath's FP32 units (their latencies set the
/// pipeline's) and the lazy threshold (0: pow2).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RowUpdateConfig {
    pub mul: Fp32MulConfig,
    pub add: Fp32AddConfig,
    pub threshold: u8,
}

impl RowUpdateConfig {
    /// Cycles from a max or sum operation to the state it writes: the multiplier (C · block
    /// max), the ceil-and-max stage (two stages in a design for a fast clock,
    /// [`RowUpdateConfig::split`]), the adder (the growth m' − m, or l · 2^-shift + block sum),
    /// and the write of m, shift (or l). Init takes one cycle.
    pub fn latency(&self) -> u32 {
        self.mul.latency + self.add.latency + 2 + self.split() as u32
    }

    /// With the multiplier at 5 stages or more (a design for a fast clock), the ceil and the
    /// max take a cycle each, and the sum's l · 2^-shift two (its exponent arithmetic, then the
    /// shift and rounding): each was a stage longer than the multiplier's.
    pub fn split(&self) -> bool {
        self.mul.latency >= 5
    }

    /// `softmax_row_m1_a1`; with a lazy threshold τ `softmax_row_lazy<τ>_m1_a1`.
    pub fn module_name(&self) -> String {
        let lazy = match self.threshold {
            0 => String::new(),
            t => format!("_lazy{t}"),
        };
        format!(
            "softmax_row{lazy}_m{}_a{}",
            self.mul.latency, self.add.latency
        )
    }
}

/// Defines `softmax_row` (`softmax_row_lazy<τ>` with a lazy threshold τ > 0: a max op whose
/// shift would be 1..=τ keeps m and sets shift 0), pipelined over [`RowUpdateConfig::latency`]
/// cycles. A max or sum operation's operands are taken in its cycle; its state is written
/// `latency` cycles later and no other operation may issue before then (the row engine
/// waits), so every stage reads m, l and shift as they stand and the inner results are held
/// rather than piped.
pub fn build_row(d: &mut Design, cfg: &RowUpdateConfig) -> Block<RowOpIn, RowState<u32>> {
    let mul = mul::build(d, &cfg.mul);
    let add = add::build(d, &cfg.add);
    let max = misc::build_max(d);
    let ceil = misc::build_ceil(d);
    // Split, the rescale is inline, in two stages; else the combinational unit.
    let scale2 = (!cfg.split()).then(|| misc::build_scale2(d));
    let gate = crate::clock_gate::build(d);
    let threshold = cfg.threshold;
    let latency = cfg.latency();
    let (mf, af) = (cfg.mul.latency, cfg.add.latency);
    Block::of(d.define(&cfg.module_name(), |_, m| {
        let lazy = if threshold > 0 {
            format!(
                "\nLazy rescaling: a max op whose shift would be 1..={threshold} keeps m (stale) \
                 and sets shift 0."
            )
        } else {
            String::new()
        };
        m.doc(&format!(
            "softmax_row: running max m (integer-valued FP32, log2 domain) and sum l of one\n\
             query row. op 1 init, 2 max (m' = max(m, ceil(blk_max * c)), shift = min(m' - m, 255)),\n\
             3 sum (l = l * 2^-shift + blk_sum). Init takes 1 cycle; max and sum write their\n\
             state {latency} cycles after they issue (multiplier {mf}, ceil and max 1, adder {af},\n\
             write 1), and no operation may issue before then. Model: kernels::softmax::RowState.{lazy}",
        ));
        let op = m.input("op", 2);
        let blk_max = m.input("blk_max", 32);
        let blk_sum = m.input("blk_sum", 32);
        let c = m.input("c", 32);
        let m_reg = m.reg("m", 32, Some(Format::FP32.neg_inf()));
        let l_reg = m.reg("l", 32, Some(0));
        let shift_reg = m.reg("shift", 8, Some(0));
        let is_init = op.eq(RowOp::Init as u64);
        let is_max = op.eq(RowOp::Max as u64);
        let is_sum = op.eq(RowOp::Sum as u64);

        // Max: C · block max through the multiplier, then ceil and the max with m, held
        // for the adder's growth m' − m; its last stage saturates the shift and writes.
        let scaled = m.instantiate(&mul, "u_scale", &Binary { a: blk_max, b: c }).y;
        let ceiled = m.instantiate(&ceil, "u_ceil", &Unary { a: scaled }).y;
        let split = cfg.split();
        let ceiled = m.stage("ceiled", ceiled, split);
        let m_max = m.instantiate(&max, "u_max", &Binary { a: m_reg.q, b: ceiled }).y;
        let max_scaled = m.delay_n("max_v", is_max, mf + split as u32);
        // The operands held for the adders take the clock only when an operation loads them
        // (their clock gates): between operations nothing they feed is written.
        let m_new = crate::clock_gate::delay(m, &gate, "m_new", m_max, max_scaled);
        let max_done = m.delay_n("max_w", max_scaled, af + 1);
        let max_done = m.name("max_done", max_done);
        let sign = m.lit(32, 0x8000_0000);
        let neg_m = m_reg.q ^ sign;
        let delta = m.instantiate(&add, "u_delta", &Binary { a: m_new, b: neg_m }).y;
        // While the max is still −Inf the rescale is 1 (FlashAttention's rule), not
        // 2^(−Inf + Inf).
        let shift_sat = saturate_shift(m, delta);
        let m_new_neg_inf = m_new.eq(Format::FP32.neg_inf());
        let m_new_neg_inf = m.name("m_new_neg_inf", m_new_neg_inf);
        let zero_shift = m.zero(8);
        let shift_new = mux(m_new_neg_inf, zero_shift, shift_sat);
        let shift_new = m.name("shift_new", shift_new);
        // Lazy: a growth of 1..=τ keeps the stale max and does not rescale.
        let (m_new, shift_new, keep) = if threshold > 0 {
            let zero8 = m.zero(8);
            let above = m.lit(8, threshold as u64 + 1);
            let keep = !shift_new.is_zero() & shift_new.lt(above);
            let keep = m.name("keep_stale", keep);
            let m_kept = mux(keep, m_reg.q, m_new);
            (m_kept, mux(keep, zero8, shift_new), Some(keep))
        } else {
            (m_new, shift_new, None)
        };

        // Sum: l · 2^-shift and the block sum held for the adder, written when a max would be.
        let rescale = Scale2 {
            a: l_reg.q,
            n: shift_reg.q,
        };
        let l_scaled = match &scale2 {
            Some(unit) => {
                let l_scaled = m.instantiate(unit, "u_rescale", &rescale).y;
                crate::clock_gate::delay(m, &gate, "l_scaled", l_scaled, is_sum)
            }
            None => {
                // m, l and shift stand still from the operation's issue to its write.
                let parts = misc::scale2_prepare(m, rescale.a, rescale.n)
                    .stage_gated(m, &gate, "rs", is_sum);
                let scaled = misc::scale2_finish(m, &parts);
                let sum_d = m.delay("sum_rs", is_sum);
                crate::clock_gate::delay(m, &gate, "l_scaled", scaled, sum_d)
            }
        };
        let sum_in = crate::clock_gate::delay(m, &gate, "blk_sum_in", blk_sum, is_sum);
        let l_new = m
            .instantiate(&add, "u_sum", &Binary { a: l_scaled, b: sum_in })
            .y;
        let sum_done = m.delay_n("sum_v", is_sum, latency - 1);
        let sum_done = m.name("sum_done", sum_done);

        let neg_inf = m.lit(32, Format::FP32.neg_inf());
        let zero32 = m.zero(32);
        let zero8 = m.zero(8);
        let m_d = mux(is_init, neg_inf, m_new);
        let l_d = mux(is_init, zero32, l_new);
        let shift_d = mux(is_init, zero8, shift_new);
        m.set_next(m_reg, m_d);
        m.set_next(l_reg, l_d);
        m.set_next(shift_reg, shift_d);
        let m_en = is_init | max_done;
        let l_en = is_init | sum_done;
        m.set_enable(m_reg, m_en);
        m.set_enable(l_reg, l_en);
        m.set_enable(shift_reg, m_en);

        let l_mag = l_reg.q.slice(30, 0);
        let l_zero = l_mag.is_zero();
        m.output("m", m_reg.q);
        m.output("l", l_reg.q);
        m.output("shift", shift_reg.q);
        m.output("l_zero", l_zero);
        // The last max op's choice (lazy): a stale max kept, for the counters.
        let stale = match keep {
            Some(keep) => {
                let r = m.reg("stale", 1, Some(0));
                let zero1 = m.zero(1);
                m.set_next(r, mux(is_init, zero1, keep));
                m.set_enable(r, m_en);
                r.q
            }
            None => m.zero(1),
        };
        m.output("stale", stale);
        m.set_latency(latency);
    }))
}

/// Configuration of `softmax_exp`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SoftmaxExpConfig {
    pub mul: Fp32MulConfig,
    pub add: Fp32AddConfig,
    pub exp: Exp2Config,
    /// P's format: the operands'.
    pub p: Format,
}

impl SoftmaxExpConfig {
    pub fn validate(&self) -> Result<()> {
        self.mul.validate()?;
        self.add.validate()?;
        self.exp.validate()
    }

    pub fn latency(&self) -> u32 {
        self.mul.latency + self.add.latency + self.exp.latency + self.p_registered() as u32
    }

    /// With exp2 at 3 stages or more, P is registered after its rounding to the operands'
    /// format (one more cycle), so the rounding is not in series with what takes P.
    pub fn p_registered(&self) -> bool {
        self.exp.latency >= 3
    }

    /// `softmax_exp_m1_a1_e2` for binary16 P; other formats name theirs:
    /// `softmax_exp_e8m7_m1_a1_e2`.
    pub fn module_name(&self) -> String {
        format!(
            "softmax_exp{}_m{}_a{}_e{}",
            crate::format::suffix(self.p),
            self.mul.latency,
            self.add.latency,
            self.exp.latency
        )
    }
}

/// Defines `softmax_exp`.
pub fn build_exp(d: &mut Design, cfg: &SoftmaxExpConfig) -> Block<ExpIn, ExpOut<u32>> {
    let mul = mul::build(d, &cfg.mul);
    let add = add::build(d, &cfg.add);
    let exp = exp2::build(d, &cfg.exp);
    Block::of(d.define(&cfg.module_name(), |_, m| {
        m.doc(&format!(
            "softmax_exp: p = masked ? +0 : {}(exp2(s * c - m)), one per cycle.\n\
             Latency {} cycle(s). Model: kernels::softmax::{}.",
            cfg.p.short_name(),
            cfg.latency(),
            crate::format::model_name(cfg.p, "weight", "weight_in")
        ));
        let s = m.input("s", 32);
        let row_max = m.input("m", 32);
        let c = m.input("c", 32);
        let masked = m.input("masked", 1);
        let t = m.instantiate(&mul, "u_scale", &Binary { a: s, b: c }).y;
        // While the running max is −Inf, +0 is subtracted: a −Inf score then gives +0, not
        // exp2(−Inf + Inf) = NaN.
        let m_neg_inf = row_max.eq(Format::FP32.neg_inf());
        let m_neg_inf = m.name("m_neg_inf", m_neg_inf);
        let zero32 = m.zero(32);
        let row_max = mux(m_neg_inf, zero32, row_max);
        let row_max = m.delay_n("m", row_max, cfg.mul.latency);
        let sign = m.lit(32, 0x8000_0000);
        let neg_m = row_max ^ sign;
        let x = m.instantiate(&add, "u_sub", &Binary { a: t, b: neg_m }).y;
        let e = m.instantiate(&exp, "u_exp2", &X { x }).y;
        let p = crate::fp::cvt_narrow::logic_to(m, e, cfg.p);
        let late = cfg.p_registered();
        let masked = m.delay_n("masked", masked, cfg.latency() - late as u32);
        let zero = m.zero(cfg.p.bits());
        let p = mux(masked, zero, p);
        let p = m.stage("p_rounded", p, late);
        m.output("p", p);
        m.set_latency(cfg.latency());
    }))
}
