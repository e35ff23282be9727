//! `row_reduce`: max and sum of one binary32 value per PE across a row of C PEs.
//!
//! Ports: `x` (C × 32 bits; PE c at bits [32c+31:32c]) → `max`, `sum` (32 bits each).
//! A pipelined tree of ceil(log2 C) levels, each level the FP32 adder at its configured
//! latency (at least 1: a register after each level), so the latency is levels × that
//! (0 for C = 1) and a new row is accepted every cycle. At each level
//! neighbours (0, 1), (2, 3), ... combine and an odd last value passes through: the association
//! order of `kernels::reduce::tree`, which the sum reproduces bit for bit. The max is IEEE
//! (`fp_max_e8m23`: NaN propagates, −Inf is the identity); the sum uses `fp_add_e8m23_l0`. Reductions
//! run along array rows only.

use anyhow::{ensure, Result};

use crate::fp::add::{self, Fp32AddConfig};
use crate::fp::misc;
use crate::interface;
use crate::ir::iface::Block;
use crate::operands::Binary;
use crate::operands::X;
use crate::{Design, Sig};

interface! {
    /// The maximum and the sum of the inputs.
    pub struct Reduce { max, sum }
}

/// Configuration of `row_reduce`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RowReduceConfig {
    /// PEs in the row (C), any C >= 1.
    pub cols: u32,
    /// The FP32 adder's latency (`add_latency`); a level takes at least one cycle.
    pub add_latency: u32,
}

impl RowReduceConfig {
    pub fn validate(&self) -> Result<()> {
        ensure!(
            (1..=256).contains(&self.cols),
            "row_reduce over {} PEs: use 1 to 256",
            self.cols
        );
        Ok(())
    }

    /// Tree levels.
    pub fn levels(&self) -> u32 {
        32 - (self.cols.max(1) - 1).leading_zeros()
    }

    /// Cycles per level: the adder's latency, at least 1.
    pub fn stage(&self) -> u32 {
        self.add_latency.max(1)
    }

    /// Cycles from the inputs to the max and sum.
    pub fn latency(&self) -> u32 {
        self.levels() * self.stage()
    }

    /// `row_reduce_c4`; with levels of s > 1 cycles `row_reduce_c4_s3`.
    pub fn module_name(&self) -> String {
        match self.stage() {
            1 => format!("row_reduce_c{}", self.cols),
            s => format!("row_reduce_c{}_s{s}", self.cols),
        }
    }
}

/// Defines `row_reduce_c<C>`.
pub fn build(d: &mut Design, cfg: &RowReduceConfig) -> Block<X, Reduce<u32>> {
    let max = misc::build_max(d);
    let stage = cfg.stage();
    let add = add::build(d, &Fp32AddConfig::new(stage));
    Block::of(d.define(&cfg.module_name(), |_, m| {
        m.doc(&format!(
            "row_reduce: IEEE max and sum of {} binary32 values (one per PE of a row).\n\
             Pipelined tree, {} cycle(s) per level: latency {} cycle(s), one row per cycle.\n\
             Association order: kernels::reduce::tree.",
            cfg.cols,
            stage,
            cfg.latency()
        ));
        let x = m.input("x", 32 * cfg.cols);
        let inputs: Vec<Sig> = (0..cfg.cols)
            .map(|c| x.slice(32 * c + 31, 32 * c))
            .collect();
        let mut maxes = inputs.clone();
        let mut sums = inputs;
        let mut level = 0;
        while maxes.len() > 1 {
            level += 1;
            let mut next_max = vec![];
            let mut next_sum = vec![];
            for (pair, (mx, sm)) in maxes.chunks(2).zip(sums.chunks(2)).enumerate() {
                let (vm, vs) = if mx.len() == 2 {
                    let (a, b) = (mx[0], mx[1]);
                    let vm = m
                        .instantiate(&max, &format!("max_l{level}_{pair}"), &Binary { a, b })
                        .y;
                    let (a, b) = (sm[0], sm[1]);
                    let vs = m
                        .instantiate(&add, &format!("add_l{level}_{pair}"), &Binary { a, b })
                        .y;
                    (vm, vs)
                } else {
                    (mx[0], sm[0])
                };
                // The adder's output register ends the level; the max and a passed value
                // wait alongside.
                next_max.push(m.delay_n(&format!("max_l{level}_{pair}"), vm, stage));
                let vs = if sm.len() == 2 {
                    vs
                } else {
                    m.delay_n(&format!("sum_l{level}_{pair}"), vs, stage)
                };
                next_sum.push(vs);
            }
            maxes = next_max;
            sums = next_sum;
        }
        m.output("max", maxes[0]);
        m.output("sum", sums[0]);
        m.set_latency(cfg.latency());
    }))
}
