//! `mac`: the PE's multiply-accumulate, `y = acc + a × b`.
//!
//! Ports: `a`, `b` (binary16), `acc` (binary32) → `y` (binary32), all inputs in the same cycle.
//! Latency = multiplier latency + adder latency (module name `mac_m<mul>_a<add>`), one result
//! per cycle: an instance of `fp16_mul` feeding an instance of `fp32_add`, with `acc` delayed to
//! meet the product.
//!
//! Numerics (bit-exact model: `kernels::fp::mac`): the FP16 product is exact, so the result has
//! one RNE rounding and equals a fused multiply-add of the widened inputs.

use anyhow::Result;

use crate::format::Formats;
use crate::fp16_mul::{self, Fp16MulConfig};
use crate::fp32_add::{self, Fp32AddConfig};
use crate::iface::Block;
use crate::interface;
use crate::operands::Binary;
use crate::operands::Y;
use crate::Design;

interface! {
    /// The MAC's operands: a · b + acc.
    pub struct MacIn { a, b, acc }
}

/// Configuration of `mac`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MacConfig {
    pub mul: Fp16MulConfig,
    pub add: Fp32AddConfig,
}

impl MacConfig {
    pub fn validate(&self) -> Result<()> {
        self.mul.validate()?;
        self.add.validate()
    }

    pub fn latency(&self) -> u32 {
        self.mul.latency + self.add.latency
    }

    /// The operand and accumulator formats (FP16 × FP16 into FP32).
    pub fn formats(&self) -> Formats {
        Formats::FP16_FP32
    }

    pub fn module_name(&self) -> String {
        format!("mac_m{}_a{}", self.mul.latency, self.add.latency)
    }
}

impl Default for MacConfig {
    /// One register after the multiplier and one after the adder.
    fn default() -> Self {
        MacConfig {
            mul: Fp16MulConfig { latency: 1 },
            add: Fp32AddConfig { latency: 1 },
        }
    }
}

/// Defines the MAC (and its multiplier and adder) in `d`.
pub fn build(d: &mut Design, cfg: &MacConfig) -> Block<MacIn, Y<u32>> {
    let mul = fp16_mul::build(d, &cfg.mul);
    let add = fp32_add::build(d, &cfg.add);
    Block::of(d.define(&cfg.module_name(), |_, m| {
        m.doc(&format!(
            "mac: y = acc + a * b (binary16 product, exact; binary32 sum, RNE).\n\
             Latency {} cycle(s): multiplier {}, adder {}; one result per cycle.\n\
             Bit-exact model: kernels::fp::mac.",
            cfg.latency(),
            cfg.mul.latency,
            cfg.add.latency
        ));
        let w = cfg.formats().operand.bits();
        let a = m.input("a", w);
        let b = m.input("b", w);
        let acc = m.input("acc", cfg.formats().acc.bits());
        let product = m.instantiate(&mul, "u_mul", &Binary { a, b }).y;
        let acc = m.delay_n("acc", acc, cfg.mul.latency);
        let y = m
            .instantiate(&add, "u_add", &Binary { a: acc, b: product })
            .y;
        m.output("y", y);
        m.set_latency(cfg.latency());
    }))
}
