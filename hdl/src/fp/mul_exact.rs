//! `fp_mul_<format>`: the exact product of two values of an operand format, in the format
//! [`Format::exact_product`] gives it (binary32 for binary16; `e10m15` for bfloat16, whose
//! products reach 2^256 and 2^-266). The unit's name is its operands' format
//! ([`MulExactConfig::unit_name`]: `fp_mul_e5m10`, `fp_mul_e8m7`).
//!
//! Ports: `a`, `b` (the operand format) → `y` (the product format). Latency 0 to 4 cycles
//! (module name `fp_mul_e5m10_l<latency>`), one result per cycle. Latency 1 registers the
//! output; latency 2 also registers the raw significand product; latency 3 also the
//! carry-save pair of the partial products' adder tree before their sum; latency 4 also the
//! operands as they arrive (in a PE they are chosen between the QK and the PV stream's in the
//! same cycle).
//!
//! Numerics (bit-exact model: `kernels::fp::mul_exact`, for binary16 also
//! `kernels::fp::fp16_mul`): the product is exact, no rounding; subnormal inputs are
//! supported; NaN × y and Inf × 0 give the product format's canonical NaN (0x7FC00000 for
//! binary32); Inf × nonzero gives a signed Inf; a zero factor gives a zero with the XOR of the
//! signs.

use anyhow::Result;

use crate::format::Format;
use crate::fp::arith::{
    leading_zeros, mul_specials, select_special, split_product, stage_all, stage_product, unpack,
};
use crate::ir::iface::Block;
use crate::operands::BinaryBlock;
use crate::{cat, Design, ModuleBuilder, Sig};

/// Configuration of `fp_mul_<format>`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct MulExactConfig {
    /// The operands' format: binary16 or bfloat16.
    pub operand: Format,
    /// Pipeline registers between input and output: 0 to 3.
    pub latency: u32,
}

impl MulExactConfig {
    pub const MAX_LATENCY: u32 = 4;

    /// Binary16 operands (the design's default) at `latency`.
    pub fn fp16(latency: u32) -> Self {
        MulExactConfig {
            operand: Format::FP16,
            latency,
        }
    }

    pub fn validate(&self) -> Result<()> {
        crate::check_latency(&self.unit_name(), self.latency, Self::MAX_LATENCY)
    }

    /// The product's format, wide enough that every product of two operands is exact.
    pub fn product(&self) -> Format {
        self.operand.exact_product()
    }

    /// The unit's name, from its operands' format: `fp_mul_e5m10`.
    pub fn unit_name(&self) -> String {
        crate::fp::unit_name("mul", &[self.operand])
    }

    /// The Verilog module's name: the unit's with the latency, `fp_mul_e5m10_l1`.
    pub fn module_name(&self) -> String {
        format!("{}_l{}", self.unit_name(), self.latency)
    }
}

/// Defines `fp_mul_<format>_l<latency>` in `d`.
pub fn build(d: &mut Design, cfg: &MulExactConfig) -> BinaryBlock {
    let (f, p) = (cfg.operand, cfg.product());
    Block::of(d.define(&cfg.module_name(), |_, m| {
        m.doc(&format!(
            "{}: exact {} x {} -> {} product.\n\
             Latency {} cycle(s), one result per cycle. NaN results are {:#X}.\n\
             Bit-exact model: kernels::fp::{}.",
            cfg.unit_name(),
            f.long_name(),
            f.long_name(),
            p.long_name(),
            cfg.latency,
            p.qnan(),
            if f == Format::FP16 {
                "fp16_mul"
            } else {
                "mul_exact"
            }
        ));
        let a = m.input("a", f.bits());
        let b = m.input("b", f.bits());
        let y = logic(m, a, b, cfg);
        m.output("y", y);
        m.set_latency(cfg.latency);
    }))
}

/// The multiplier's logic; returns the exact product in `cfg.product()`.
pub fn logic(m: &mut ModuleBuilder, a: Sig, b: Sig, cfg: &MulExactConfig) -> Sig {
    let (f, p) = (cfg.operand, cfg.product());
    let [a, b] = stage_all(m, "in", cfg.latency >= 4, [("a", a), ("b", b)]);
    let ua = unpack(m, a, f, "a");
    let ub = unpack(m, b, f, "b");
    let (sign, is_nan, is_inf, is_zero) = mul_specials(m, &ua, &ub);
    // Exponent of the product before normalization: ea + eb + bias' - lz, with
    // bias' = p.bias − 2·f.bias + 1 (98 for binary16 into binary32; see the model).
    let ea = ua.exp_eff.zext(p.exp);
    let eb = ub.exp_eff.zext(p.exp);
    let exp_sum = ea + eb;
    let exp_sum = m.name("exp_sum", exp_sum);
    // Optional cuts between the partial products and their sum, and after the sum.
    let fields = [sign, is_nan, is_inf, is_zero, exp_sum];
    let (fields, product) = split_product(m, fields, ua.sig, ub.sig, cfg.latency >= 3);
    let product = m.name("product", product);
    let ([sign, is_nan, is_inf, is_zero, exp_sum], product) =
        stage_product(m, fields, product, cfg.latency >= 2);

    // Normalize: the leading one of the 2·(man+1)-bit product moves to its top bit and is
    // dropped; the rest is the fraction, padded below to the product format's.
    let w = product.width();
    let lz = leading_zeros(m, product);
    let lz = m.name("lz", lz);
    let below_top = product.slice(w - 2, 0);
    let norm = below_top << lz;
    let norm = m.name("norm", norm);
    let frac = if p.man > w - 1 {
        let pad = m.zero(p.man - (w - 1));
        cat(&[norm, pad])
    } else {
        norm
    };
    let bias = m.lit(p.exp, p.bias() + 1 - 2 * f.bias());
    let exp = exp_sum + bias;
    let lz_wide = lz.zext(p.exp);
    let exp = exp - lz_wide;
    let exp = m.name("exp", exp);
    let finite = cat(&[sign, exp, frac]);
    let y = select_special(m, p, finite, is_nan, is_inf, sign, is_zero, sign);
    m.stage("y", y, cfg.latency >= 1)
}
