//! reg3d: QK, (softmax,) PV on stacked tiers with register-to-register vertical links. Two
//! tiers: QK with the row engines below, PV above, each on its own step bus, P going up and O
//! coming down over each row's links. Three tiers: the row engines and their S registers on a
//! tier of their own between them, fed over per-PE S links.

use anyhow::{ensure, Result};
use serde::{Deserialize, Serialize};

use super::{Arrays, Dataflow, Plan, SHome, Tile};

/// reg3d's knobs (the `[reg3d]` section).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct StackParams {
    /// Tiers of the stack (2: QK with the softmax engines, and PV above; 3: QK, a softmax tier
    /// with the row engines and the S registers, and PV).
    pub tiers: u32,
    /// Cycles a transfer over a vertical link takes (register stages, 0..=4).
    pub vlink_latency: u32,
    /// Three tiers: wires of each QK PE's S link to the softmax tier (a power of two, 1..=32).
    /// At 32 a score goes up in the cycle its last product lands; narrower, each score takes
    /// 32/vlink_bits beats, so the QK PEs keep two S blocks and a serializer sends a finished
    /// block while the next one's QK runs (hidden while 32/vlink_bits <= d).
    pub vlink_bits: u32,
    /// Spare lanes in each group of `spare_group` lanes of every vertical bundle (P up, O down
    /// and the S links), with the link self-test and shifted-lane repair
    /// (`crate::link`). 0: no spares, no test.
    #[serde(skip_serializing_if = "is_zero")]
    pub spares: u32,
    /// Lanes that share a group's spares.
    #[serde(skip_serializing_if = "is_default_group")]
    pub spare_group: u32,
}

/// The default `spare_group`: one spare lane per 32 is the TSV-repair literature's common ratio
/// (Kang et al. JSSC 2010 shift a 32-bit word onto its spare).
pub const SPARE_GROUP: u32 = 32;

fn is_zero(x: &u32) -> bool {
    *x == 0
}

fn is_default_group(x: &u32) -> bool {
    *x == SPARE_GROUP
}

impl Default for StackParams {
    fn default() -> Self {
        StackParams {
            tiers: 2,
            vlink_latency: 1,
            vlink_bits: 32,
            spares: 0,
            spare_group: SPARE_GROUP,
        }
    }
}

impl Dataflow for StackParams {
    /// QK and PV on tiers of their own; with three, S goes up per-PE links to a softmax tier.
    /// Full-width S links send each score up as it lands, so the QK PEs hold one block; narrow
    /// links walk a finished block up while the next one's QK runs, so they hold two.
    fn plan(&self) -> Plan {
        Plan {
            arrays: Arrays::PerPhase,
            s: match self.tiers {
                3 => SHome::SoftmaxTier {
                    link_bits: self.vlink_bits,
                },
                _ => SHome::Registers,
            },
            s_slots: if self.tiers == 3 && !self.s_walk() {
                1
            } else {
                2
            },
            vlink_latency: self.vlink_latency,
            spares: (self.spares > 0).then_some(super::Spares {
                spares: self.spares,
                group: self.spare_group,
            }),
            ..Plan::default()
        }
    }

    fn row_name(&self) -> String {
        format!("_t{}l{}", self.tiers, self.vlink_latency)
            + &if self.s_walk() {
                format!("v{}", self.vlink_bits)
            } else {
                String::new()
            }
            + &if self.spares > 0 {
                format!("s{}g{}", self.spares, self.spare_group)
            } else {
                String::new()
            }
    }

    fn validate(&self, _: &Tile) -> Result<()> {
        ensure!(
            matches!(self.tiers, 2 | 3),
            "reg3d.tiers = {} is not supported: reg3d has 2 tiers (QK with the softmax engines \
             below, PV above) or 3 (QK, a softmax tier, PV)",
            self.tiers
        );
        ensure!(
            self.vlink_latency <= 4,
            "reg3d.vlink_latency = {} is out of range: allowed 0 to 4 cycles",
            self.vlink_latency
        );
        ensure!(
            self.vlink_bits.is_power_of_two() && self.vlink_bits <= 32,
            "reg3d.vlink_bits = {} is not supported: a QK PE's S link is 1, 2, 4, 8, 16 or 32 \
             wires wide (a 32-bit score takes 32/vlink_bits cycles)",
            self.vlink_bits
        );
        ensure!(
            self.vlink_bits == 32 || self.tiers == 3,
            "reg3d.vlink_bits = {} needs reg3d.tiers = 3: only the softmax tier is fed over \
             per-PE S links (with two tiers the links are per row: P up, O down); set tiers = 3 \
             or leave vlink_bits at 32",
            self.vlink_bits
        );
        ensure!(
            self.spares <= 4,
            "reg3d.spares = {} is out of range: allowed 0 (no spare lanes) to 4 spares per group",
            self.spares
        );
        ensure!(
            (2..=64).contains(&self.spare_group),
            "reg3d.spare_group = {} is out of range: a group of 2 to 64 lanes shares its spares",
            self.spare_group
        );
        Ok(())
    }
}

impl StackParams {
    /// Three tiers with narrow S links: the QK PEs keep two S blocks, and a serializer walks
    /// each finished block up the links (`s_beats` cycles per score).
    pub fn s_walk(&self) -> bool {
        self.tiers == 3 && self.vlink_bits < 32
    }
}
