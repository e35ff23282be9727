//! `mac`: the PE's multiply-accumulate, `y = acc + a × b`.
//!
//! Ports: `a`, `b` (the operand format: binary16 or bfloat16), `acc` (binary32) → `y`
//! (binary32): `acc` arrives `acc_stage` cycles after its `a` and `b` (0: the same cycle; the
//! PE reads and prepares its accumulator meanwhile). Latency = multiplier latency + adder
//! latency from `a` and `b` (module name `mac_m<mul>_a<add>` for binary16,
//! `mac_e8m7_m<mul>_a<add>` for bfloat16, `_c<k>` appended when `acc_stage` = k > 0), one
//! result per cycle: an instance of the exact multiplier (`mul_exact`) feeding an instance of
//! the binary32 adder (`fp_add_e8m23`, its wide form for bfloat16's `e10m15` products), with `acc`
//! delayed to meet the product.
//!
//! Numerics (bit-exact model: `kernels::fp::mac_fused`, for binary16 also `kernels::fp::mac`):
//! the product is exact, so the result has one RNE rounding and equals a fused multiply-add of
//! the widened inputs.
//!
//! With feedback (`feedback`, suffix `_f`; a one-stage adder after a registered product), two
//! more ports run an accumulation in the adder's own loop: `feed` (with `acc`) adds
//! the product to `y`, the previous cycle's result, instead of `acc`; `hold` (with the product,
//! the multiplier's latency after `a` and `b`) adds −0 in place of the product, the exact
//! identity of RNE addition (x + −0 = x for every x, ±0 included), so a masked step of a run
//! passes its value on unchanged. The loop is the adder and one multiplexer.

use anyhow::Result;

use crate::format::{Format, Formats};
use crate::fp::add::{self, Fp32AddConfig};
use crate::fp::mul_exact::{self, MulExactConfig};
use crate::ir::iface::Block;
use crate::operands::Binary;
use crate::operands::Y;
use crate::{group, interface};
use crate::{mux, Design};

group! {
    /// The MAC's operands: a · b + acc, and with feedback the run's controls.
    pub struct MacIn<T> {
        a, b, acc;
        run => Option<MacRun<T>>,
    }
}

interface! {
    /// An accumulation in the adder's loop: `feed` takes `y` for `acc`, `hold` −0 for the
    /// product.
    pub struct MacRun { feed, hold }
}

/// Configuration of `mac`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MacConfig {
    pub mul: MulExactConfig,
    /// The adder; its addend format is the product's ([`MacConfig::validate`] holds it).
    pub add: Fp32AddConfig,
    /// Cycles after `a` and `b` that `acc` arrives, at most the multiplier's latency.
    pub acc_stage: u32,
    /// The `feed` and `hold` ports: an accumulation in the adder's loop (a one-stage adder
    /// behind a registered product).
    pub feedback: bool,
}

impl MacConfig {
    /// A MAC of `operand` values (binary16 or bfloat16) at the given latencies.
    pub fn new(operand: Format, mul_latency: u32, add_latency: u32) -> Self {
        MacConfig {
            mul: MulExactConfig {
                operand,
                latency: mul_latency,
            },
            add: Fp32AddConfig {
                latency: add_latency,
                addend: operand.exact_product(),
            },
            acc_stage: 0,
            feedback: false,
        }
    }

    /// Why the MAC cannot accumulate in its adder's loop, if it cannot: that needs one adder
    /// stage (its result register comes round in one cycle) behind at least one multiplier
    /// stage (a masked step's `hold` is known from a register, not from the array's late mask).
    pub fn feedback_blocker(&self) -> Option<String> {
        (self.add.latency != 1 || self.mul.latency == 0).then(|| {
            format!(
                "the MAC's adder loop is one cycle only with add_latency = 1 behind \
                 mul_latency >= 1 (here add_latency = {}, mul_latency = {})",
                self.add.latency, self.mul.latency
            )
        })
    }

    pub fn validate(&self) -> Result<()> {
        anyhow::ensure!(
            self.add.addend == self.mul.product(),
            "the MAC's adder takes {} but its multiplier makes {}",
            self.add.addend.name(),
            self.mul.product().name()
        );
        anyhow::ensure!(
            self.acc_stage <= self.mul.latency,
            "the MAC's accumulator arrives {} cycles after its operands, past the multiplier's \
             {}-cycle latency",
            self.acc_stage,
            self.mul.latency
        );
        if let Some(why) = self.feedback.then(|| self.feedback_blocker()).flatten() {
            anyhow::bail!("{why}");
        }
        self.mul.validate()?;
        self.add.validate()
    }

    pub fn latency(&self) -> u32 {
        self.mul.latency + self.add.latency
    }

    /// The operand and accumulator formats (the operands' × the operands' into FP32; O's
    /// short form is the operands' format).
    pub fn formats(&self) -> Formats {
        Formats {
            operand: self.mul.operand,
            acc: Fp32AddConfig::FORMAT,
            out: self.mul.operand,
        }
    }

    /// `mac_m1_a1` for binary16 operands; other formats name theirs: `mac_e8m7_m1_a1`; a late
    /// accumulator `mac_m2_a5_c2`; feedback `mac_m1_a1_f`.
    pub fn module_name(&self) -> String {
        let late = match self.acc_stage {
            0 => String::new(),
            k => format!("_c{k}"),
        };
        format!(
            "mac{}_m{}_a{}{late}{}",
            crate::format::suffix(self.mul.operand),
            self.mul.latency,
            self.add.latency,
            if self.feedback { "_f" } else { "" }
        )
    }
}

impl Default for MacConfig {
    /// One register after the multiplier and one after the adder.
    fn default() -> Self {
        MacConfig::new(Format::FP16, 1, 1)
    }
}

/// Defines the MAC (and its multiplier and adder) in `d`.
pub fn build(d: &mut Design, cfg: &MacConfig) -> Block<MacIn, Y<u32>> {
    let mul = mul_exact::build(d, &cfg.mul);
    let add = add::build(d, &cfg.add);
    let module = d.define(&cfg.module_name(), |_, m| {
        m.doc(&format!(
            "mac: y = acc + a * b ({} product, exact; binary32 sum, RNE).\n\
             Latency {} cycle(s): multiplier {}, adder {}; one result per cycle.{}\n\
             Bit-exact model: kernels::fp::{}.",
            cfg.mul.operand.long_name(),
            cfg.latency(),
            cfg.mul.latency,
            cfg.add.latency,
            match cfg.acc_stage {
                0 => String::new(),
                k => format!(" acc arrives {k} cycle(s) after a and b."),
            } + if cfg.feedback {
                "\nfeed (with acc): acc := y, the previous result; hold (with the product): \
                 the product := -0."
            } else {
                ""
            },
            crate::format::model_name(cfg.mul.operand, "mac", "mac_fused")
        ));
        let w = cfg.formats().operand.bits();
        let a = m.input("a", w);
        let b = m.input("b", w);
        let acc = m.input("acc", cfg.formats().acc.bits());
        let run = cfg
            .feedback
            .then(|| (m.input("feed", 1), m.input("hold", 1)));

        let product = m.instantiate(&mul, "u_mul", &Binary { a, b }).y;
        let late = cfg.mul.latency - cfg.acc_stage;
        let acc = m.delay_n("acc", acc, late);
        let y = match run {
            None => {
                m.instantiate(&add, "u_add", &Binary { a: acc, b: product })
                    .y
            }
            Some((feed, hold)) => {
                // The adder's result register comes back round to its addend.
                let y = m.net("y_run", cfg.formats().acc.bits());
                let feed = m.delay_n("feed", feed, late);
                let neg_zero = m.lit(product.width(), cfg.mul.product().neg_zero());
                let ins = Binary {
                    a: m.name("acc_run", mux(feed, y, acc)),
                    b: m.name("product_run", mux(hold, neg_zero, product)),
                };
                let sum = m.instantiate(&add, "u_add", &ins).y;
                m.drive(y, sum);
                y
            }
        };
        m.output("y", y);
        m.set_latency(cfg.latency());
    });
    let (w, acc) = (cfg.formats().operand.bits(), cfg.formats().acc.bits());
    let widths = MacIn {
        a: w,
        b: w,
        acc,
        run: cfg.feedback.then_some(MacRun { feed: 1, hold: 1 }),
    };
    Block::view(module, &widths, Y { y: acc })
}
