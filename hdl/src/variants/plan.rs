//! A variant's phase plan: where S and P live, which phases a block runs, and what each phase
//! moves. A variant answers with one [`Plan`]; the PE row, the sequencer, fetch, the counters
//! and the models ask the plan, never a variant's name, and every question is an exhaustive
//! match on the plan's homes, so a new home is a compile error wherever it must be answered.

use anyhow::{ensure, Result};

/// Where a design runs QK and PV.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Arrays {
    /// One tier of PEs takes QK and PV in turn. `interleaves`: with a MAC deeper than its S
    /// accumulators hide (a·b per PE), the array may interleave the QK of a later block with
    /// the PV of an earlier one step by step, the S accumulators then coming round every
    /// 2·a·b cycles. It can when S has two PE-register slots and P a two-port bank, and its QK
    /// does not wait on S leaving the registers or every QK of a tile running first.
    Shared { interleaves: bool },
    /// QK and PV on PE arrays of their own, each with its own step bus, column bus and causal
    /// mask, running at once: stacked tiers (P goes up and O comes down the vertical links), or
    /// with [`Plan::noc`] two arrays side by side (P crosses over the NoC).
    PerPhase,
}

/// Where S lives from its QK to the softmax sweeps that read it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SHome {
    /// The PE registers: the sweeps read S where QK accumulated it.
    Registers,
    /// The registers of a softmax tier above the QK tier, fed over per-PE S links of
    /// `link_bits` wires (a 32-bit score takes 32 / `link_bits` beats).
    SoftmaxTier { link_bits: u32 },
    /// An SRAM S array beside each PE row: after QK the row engine copies S out of the PE
    /// registers, and the sweeps read it there a cycle after the visit. `rows`: the array holds
    /// whole rows of S (a two-pass softmax); else one block (the online softmax).
    Array { rows: Option<WholeRows> },
    /// Memory (the scratch region): the max sweep packs each block's S into the DMA's staging
    /// buffer, the write channel writes it out, and the exp sweep reads it back from the
    /// scratch channel's landing buffer (a two-pass softmax).
    Memory,
}

/// An S array that holds whole rows of S (rowfused).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct WholeRows {
    /// Keys of a query row the array holds.
    pub keys: u32,
    /// Rows longer than `keys` spill: the blocks past the array go out through the O channel
    /// to the scratch region and come back through the scratch channel (else such a problem
    /// is refused).
    pub spill: bool,
}

/// Where P lives from the exp sweep that writes it to the PV steps that read it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PHome {
    /// A P bank per PE row, of two blocks: `ports` 2 (one read, one write: the softmax of a
    /// block may write P while PV reads the previous block's) or 1 (shared: they take turns).
    Bank { ports: u32 },
    /// Memory: the exp sweep packs P into the staging buffer and writes it over the block's S;
    /// the PV steps read it from the scratch channel's landing buffer.
    Memory,
}

/// How the softmax runs over a query row.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SoftmaxPass {
    /// One block at a time, with the online rescale (FlashAttention).
    Online,
    /// The row's max over every block first, then the weights with no rescale (standard
    /// attention's arithmetic).
    TwoPass,
}

/// The form of a design's SRAM arrays (its S arrays and P banks).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Sram {
    /// Scores per S-array word and weights per P word.
    pub per_word: (u32, u32),
    /// Banks each array is split into.
    pub banks: u32,
    /// Emitted as memory-macro blackboxes.
    pub blackbox: bool,
}

impl Default for Sram {
    fn default() -> Self {
        Sram {
            per_word: (1, 1),
            banks: 1,
            blackbox: false,
        }
    }
}

/// What a variant does: its homes for S and P, its arrays, and the figures that size them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Plan {
    pub arrays: Arrays,
    pub s: SHome,
    pub p: PHome,
    /// S blocks the PE registers hold: two (the softmax of one block reads its S while the
    /// next block's QK writes the other), or one when S moves on after its QK.
    pub s_slots: u32,
    /// Register stages of each vertical link (0 without any).
    pub vlink_latency: u32,
    /// Spare lanes on the vertical links, with their self-test and repair (None: none).
    pub spares: Option<Spares>,
    pub sram: Sram,
    /// The two arrays side by side, P crossing from the QK array's row engines to the PV
    /// array's P banks over a line of mesh routers (None: stacked, or one array).
    pub noc: Option<NocPlan>,
}

/// The NoC P crosses between two arrays side by side (`noc2d`): a line of `hops` router hops
/// of `flit_bits`-bit flits and `depth`-flit input FIFOs (`array::noc_path`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct NocPlan {
    pub flit_bits: u32,
    pub hops: u32,
    pub depth: u32,
}

/// Spare lanes on every vertical bundle: `spares` in each group of `group` lanes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Spares {
    pub spares: u32,
    pub group: u32,
}

impl Default for Plan {
    /// reg2d's: one array taking turns, S in the PE registers (two blocks), P in a two-port
    /// bank of one weight per word.
    fn default() -> Self {
        Plan {
            arrays: Arrays::Shared { interleaves: true },
            s: SHome::Registers,
            p: PHome::Bank { ports: 2 },
            s_slots: 2,
            vlink_latency: 0,
            spares: None,
            sram: Sram::default(),
            noc: None,
        }
    }
}

/// S (scores) or P (weights).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Tensor {
    S,
    P,
}

/// A place S or P is held between phases.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Place {
    PeRegisters,
    SoftmaxTier,
    SArray,
    PBank,
    /// The scratch region, written from the staging buffer and read back into the scratch
    /// channel's landing buffer.
    Memory,
}

/// What a phase does to a block.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Op {
    /// The block's scores, Q·Kᵀ, on the PEs.
    Qk,
    /// The row engine copies S out of the PE registers.
    Copy,
    /// The online softmax: the max sweep, the state update and the exp sweep.
    Softmax,
    /// The first pass's sweep: the row's running max (and with S going to memory, its packing).
    MaxSweep,
    /// The second pass's sweep: the weights against the row's final max.
    ExpSweep,
    /// The block's weights times V into O, on the PEs.
    Pv,
}

/// One phase of a pass: what it does, the S or P it reads (`takes`), and the S or P it leaves
/// for a later phase (`gives`; the same place when it reads S and keeps it there).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Phase {
    pub op: Op,
    pub takes: Option<(Tensor, Place)>,
    pub gives: Option<(Tensor, Place)>,
}

/// The phases a pass runs on each block of a tile, in order. A tile runs its passes one after
/// another.
pub type Pass = Vec<Phase>;

impl Plan {
    /// The combinations the shared RTL builds; else what a new variant asks for that is not.
    pub fn validate(&self) -> Result<()> {
        let stacked = self.arrays == Arrays::PerPhase;
        match self.s {
            SHome::Registers => {}
            SHome::SoftmaxTier { link_bits } => ensure!(
                stacked && link_bits.is_power_of_two() && link_bits <= 32,
                "a softmax tier sits in a stack, fed over S links of 1 to 32 wires (a power of \
                 two)"
            ),
            SHome::Array { .. } | SHome::Memory => ensure!(
                !stacked,
                "S in an SRAM array or in memory is built on one shared array, not a stack"
            ),
        }
        ensure!(
            (self.p == PHome::Memory) == (self.s == SHome::Memory),
            "P goes through memory exactly when S does (the scratch region holds S, then P \
             over it)"
        );
        ensure!(
            matches!(self.s_slots, 1 | 2),
            "the PE registers hold one or two blocks of S"
        );
        if let PHome::Bank { ports } = self.p {
            ensure!(matches!(ports, 1 | 2), "a P bank has one port or two");
        }
        if self.noc.is_some() {
            ensure!(
                stacked
                    && self.s == SHome::Registers
                    && self.p == (PHome::Bank { ports: 2 })
                    && self.vlink_latency == 0
                    && self.spares.is_none(),
                "P over a NoC is built between two arrays side by side, S in the QK array's \
                 registers and P landing in two-port banks, with no vertical links"
            );
        }
        Ok(())
    }

    /// Tiers of the stack: 1, 2 (QK and PV), or 3 (a softmax tier between them); 1 for two
    /// arrays side by side.
    pub fn tiers(&self) -> u32 {
        match (self.arrays, self.s) {
            (Arrays::Shared { .. }, _) => 1,
            (Arrays::PerPhase, _) if self.noc.is_some() => 1,
            (Arrays::PerPhase, SHome::SoftmaxTier { .. }) => 3,
            (Arrays::PerPhase, SHome::Registers | SHome::Array { .. } | SHome::Memory) => 2,
        }
    }

    /// The arrays in words: [`Arrays`]' own, or two side by side with P over the NoC.
    pub fn arrays_label(&self) -> String {
        match (self.arrays, self.noc) {
            (Arrays::PerPhase, Some(n)) => format!(
                "QK and PV arrays side by side, at once; P over {} router hop{} ({}-bit flits)",
                n.hops,
                plural(n.hops),
                n.flit_bits
            ),
            (a, _) => a.to_string(),
        }
    }

    /// PE arrays, the MAC resources (a tier of each in a stack; a softmax tier has none).
    pub fn mac_tiers(&self) -> u32 {
        match self.arrays {
            Arrays::Shared { .. } => 1,
            Arrays::PerPhase => 2,
        }
    }

    /// QK and PV run at once on PE tiers of their own.
    pub fn concurrent_phases(&self) -> bool {
        match self.arrays {
            Arrays::Shared { .. } => false,
            Arrays::PerPhase => true,
        }
    }

    /// One array that may interleave a later block's QK with an earlier block's PV.
    pub fn interleaves(&self) -> bool {
        match self.arrays {
            Arrays::Shared { interleaves } => interleaves,
            Arrays::PerPhase => false,
        }
    }

    /// The sweeps read S from an SRAM array.
    pub fn s_in_sram(&self) -> bool {
        match self.s {
            SHome::Array { .. } => true,
            SHome::Registers | SHome::SoftmaxTier { .. } | SHome::Memory => false,
        }
    }

    /// The row engines and their S registers sit on a tier of their own.
    pub fn softmax_tier(&self) -> bool {
        match self.s {
            SHome::SoftmaxTier { .. } => true,
            SHome::Registers | SHome::Array { .. } | SHome::Memory => false,
        }
    }

    /// Wires of each S link to a softmax tier (32, a score a cycle, without one).
    pub fn s_link_bits(&self) -> u32 {
        match self.s {
            SHome::SoftmaxTier { link_bits } => link_bits,
            SHome::Registers | SHome::Array { .. } | SHome::Memory => 32,
        }
    }

    /// Cycles an S link takes per score.
    pub fn s_beats(&self) -> u32 {
        32 / self.s_link_bits()
    }

    /// The whole rows of S the S array holds, if it does.
    pub fn whole_rows(&self) -> Option<WholeRows> {
        match self.s {
            SHome::Array { rows } => rows,
            SHome::Registers | SHome::SoftmaxTier { .. } | SHome::Memory => None,
        }
    }

    /// Keys of a query row the S array holds when it keeps whole rows.
    pub fn row_keys(&self) -> Option<u32> {
        self.whole_rows().map(|r| r.keys)
    }

    /// Rows of S longer than the S array's spill through the scratch region.
    pub fn spills(&self) -> bool {
        self.whole_rows().is_some_and(|r| r.spill)
    }

    /// S and P go through memory between a tile's passes.
    pub fn s_in_memory(&self) -> bool {
        match self.s {
            SHome::Memory => true,
            SHome::Registers | SHome::SoftmaxTier { .. } | SHome::Array { .. } => false,
        }
    }

    /// The design has the scratch region: S_ADDR, the scratch channel and its landing buffer,
    /// and O writes flagged as the scratch region's.
    pub fn scratch(&self) -> bool {
        self.s_in_memory() || self.spills()
    }

    /// How the softmax runs over a row.
    pub fn softmax(&self) -> SoftmaxPass {
        match self.s {
            SHome::Registers | SHome::SoftmaxTier { .. } | SHome::Array { rows: None } => {
                SoftmaxPass::Online
            }
            SHome::Array { rows: Some(_) } | SHome::Memory => SoftmaxPass::TwoPass,
        }
    }

    /// The softmax and PV take turns on each P bank's one port.
    pub fn shared_p_port(&self) -> bool {
        match self.p {
            PHome::Bank { ports } => ports == 1,
            PHome::Memory => false,
        }
    }

    /// The passes of a tile, each a list of the phases it runs per block. `spilled`: for a
    /// block past the S array of a design that spills (as any other block elsewhere).
    pub fn passes(&self, spilled: bool) -> Vec<Pass> {
        use Op::*;
        use Place::*;
        use Tensor::*;
        let phase = |op, takes, gives| Phase { op, takes, gives };
        let s_home = match self.s {
            SHome::Registers | SHome::Array { .. } | SHome::Memory => PeRegisters,
            SHome::SoftmaxTier { .. } => SoftmaxTier,
        };
        let qk = phase(Qk, None, Some((S, s_home)));
        let p_home = match self.p {
            PHome::Bank { .. } => PBank,
            PHome::Memory => Memory,
        };
        let pv = phase(Pv, Some((P, p_home)), None);
        let spilled = spilled && self.spills();
        match (self.s, spilled) {
            (SHome::Registers | SHome::SoftmaxTier { .. }, _) => vec![vec![
                qk,
                phase(Softmax, Some((S, s_home)), Some((P, p_home))),
                pv,
            ]],
            (SHome::Array { rows: None }, _) => vec![vec![
                qk,
                phase(Copy, Some((S, PeRegisters)), Some((S, SArray))),
                phase(Softmax, Some((S, SArray)), Some((P, p_home))),
                pv,
            ]],
            (SHome::Array { rows: Some(_) }, false) => vec![
                vec![
                    qk,
                    phase(Copy, Some((S, PeRegisters)), Some((S, SArray))),
                    phase(MaxSweep, Some((S, SArray)), Some((S, SArray))),
                ],
                vec![phase(ExpSweep, Some((S, SArray)), Some((P, p_home))), pv],
            ],
            (SHome::Array { rows: Some(_) }, true) => vec![
                vec![
                    qk,
                    phase(MaxSweep, Some((S, PeRegisters)), Some((S, Memory))),
                ],
                vec![phase(ExpSweep, Some((S, Memory)), Some((P, p_home))), pv],
            ],
            (SHome::Memory, _) => vec![
                vec![
                    qk,
                    phase(MaxSweep, Some((S, PeRegisters)), Some((S, Memory))),
                ],
                vec![phase(ExpSweep, Some((S, Memory)), Some((P, Memory)))],
                vec![pv],
            ],
        }
    }
}

impl std::fmt::Display for Phase {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let op = match self.op {
            Op::Qk => "QK",
            Op::Copy => "copy",
            Op::Softmax => "softmax",
            Op::MaxSweep => "max sweep",
            Op::ExpSweep => "exp sweep",
            Op::Pv => "PV",
        };
        let at = |(t, p): (Tensor, Place)| {
            let place = match p {
                Place::PeRegisters => "PE registers",
                Place::SoftmaxTier => "softmax tier",
                Place::SArray => "S array",
                Place::PBank => "P bank",
                Place::Memory => "memory",
            };
            format!("{t:?} in {place}")
        };
        f.write_str(op)?;
        match (self.takes, self.gives) {
            (None, None) => Ok(()),
            (Some(t), None) => write!(f, " ({})", at(t)),
            (None, Some(g)) => write!(f, " (→ {})", at(g)),
            (Some(t), Some(g)) if t == g => write!(f, " ({}, kept)", at(t)),
            (Some(t), Some(g)) => write!(f, " ({} → {})", at(t), at(g)),
        }
    }
}

/// A tile's passes as text: `QK (→ S in PE registers), softmax (…), PV (…)`, passes apart by
/// ` ‖ `.
pub fn passes_text(passes: &[Pass]) -> String {
    passes
        .iter()
        .map(|pass| {
            pass.iter()
                .map(Phase::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        })
        .collect::<Vec<_>>()
        .join(" ‖ ")
}

impl std::fmt::Display for Arrays {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Arrays::Shared { interleaves: true } => "one array, QK and PV in turn (may interleave)",
            Arrays::Shared { interleaves: false } => "one array, QK and PV in turn",
            Arrays::PerPhase => "QK and PV tiers, at once",
        })
    }
}

impl std::fmt::Display for SHome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SHome::Registers => f.write_str("PE registers"),
            SHome::SoftmaxTier { link_bits } => {
                write!(f, "softmax tier ({link_bits}-bit S links)")
            }
            SHome::Array { rows: None } => f.write_str("S array, a block"),
            SHome::Array {
                rows: Some(WholeRows { keys, spill }),
            } => write!(
                f,
                "S array, rows of {keys} keys{}",
                if *spill { ", longer rows spill" } else { "" }
            ),
            SHome::Memory => f.write_str("memory"),
        }
    }
}

impl std::fmt::Display for PHome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PHome::Bank { ports } => write!(f, "P bank, {ports} port{}", plural(*ports)),
            PHome::Memory => f.write_str("memory"),
        }
    }
}

fn plural(n: u32) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::variants::{BufParams, RowParams, StackParams, Variant};

    /// Every variant's plan, with the knobs that change it.
    fn variants() -> Vec<Variant> {
        let mut v = vec![Variant::Reg2d, Variant::buf2d(), Variant::Unfused];
        v.push(Variant::Buf2d(BufParams {
            ports: 1,
            word_bits: 64,
            banks: 2,
            ..BufParams::default()
        }));
        for spill in [false, true] {
            v.push(Variant::Rowfused(RowParams {
                spill,
                ..RowParams::default()
            }));
        }
        for (tiers, vlink_bits) in [(2, 32), (3, 32), (3, 8)] {
            v.push(Variant::Reg3d(StackParams {
                tiers,
                vlink_bits,
                ..StackParams::default()
            }));
        }
        v
    }

    /// Each plan's passes move S and P from where they are to where they are read: every
    /// phase takes what an earlier phase gave, the last phase is PV, and every S or P given
    /// is taken. The passes agree with the plan's answers: two passes or more exactly for a
    /// two-pass softmax, a copy exactly where S lives in an S array, memory exactly where the
    /// design has the scratch region, the softmax tier exactly where it sits.
    #[test]
    fn every_plan_moves_s_and_p_to_where_they_are_read() {
        for variant in variants() {
            let plan = variant.plan();
            plan.validate().unwrap();
            for spilled in [false, true] {
                let passes = plan.passes(spilled);
                let what = format!("{} ({spilled}): {}", variant.label(), passes_text(&passes));
                let mut held: Vec<(Tensor, Place)> = vec![];
                for phase in passes.iter().flatten() {
                    if let Some(t) = phase.takes {
                        let at = held.iter().position(|&h| h == t);
                        assert!(at.is_some(), "{what}: {phase} takes what no phase gave");
                        held.remove(at.unwrap());
                    }
                    held.extend(phase.gives);
                }
                assert!(held.is_empty(), "{what}: {held:?} given and never taken");
                let phases: Vec<&Phase> = passes.iter().flatten().collect();
                assert_eq!(phases.last().unwrap().op, Op::Pv, "{what}");
                assert_eq!(phases[0].op, Op::Qk, "{what}");
                let two = plan.softmax() == SoftmaxPass::TwoPass;
                assert_eq!(passes.len() > 1, two, "{what}");
                let has = |place| {
                    phases.iter().any(|p| {
                        p.takes.map(|t| t.1) == Some(place) || p.gives.map(|t| t.1) == Some(place)
                    })
                };
                let copies = phases.iter().any(|p| p.op == Op::Copy);
                assert_eq!(
                    copies,
                    plan.s_in_sram() && !(spilled && plan.spills()),
                    "{what}"
                );
                assert_eq!(
                    has(Place::Memory),
                    plan.s_in_memory() || (spilled && plan.spills()),
                    "{what}"
                );
                assert_eq!(has(Place::SoftmaxTier), plan.softmax_tier(), "{what}");
                assert_eq!(has(Place::PBank), plan.p != PHome::Memory, "{what}");
            }
        }
    }

    /// The homes the shared RTL does not build are refused, saying what is built.
    #[test]
    fn plans_the_rtl_does_not_build_are_refused() {
        let bad = [
            Plan {
                arrays: Arrays::PerPhase,
                s: SHome::Memory,
                p: PHome::Memory,
                ..Plan::default()
            },
            Plan {
                s: SHome::SoftmaxTier { link_bits: 8 },
                ..Plan::default()
            },
            Plan {
                p: PHome::Memory,
                ..Plan::default()
            },
            Plan {
                p: PHome::Bank { ports: 3 },
                ..Plan::default()
            },
        ];
        for plan in bad {
            let e = plan.validate().unwrap_err().to_string();
            assert!(
                e.contains("built")
                    || e.contains("exactly")
                    || e.contains("sits")
                    || e.contains("port"),
                "{plan:?}: {e}"
            );
        }
    }
}
