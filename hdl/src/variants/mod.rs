//! The variants: where a design keeps S and P (docs/variants.md).
//!
//! Each variant is a module of its own: its knobs (a config file's section named after it)
//! and its [`Dataflow`], the answers the rest of the generator, the models and the reports ask
//! of a design: how many tiers, whether QK and PV run at once, where the sweeps read S, the P
//! bank's ports, the vertical links. [`Variant`] lists them, and [`Variant::flow`] is the one
//! place that maps a variant to its dataflow; docs/howto-variant.md says what adding one takes.
//!
//! - `reg2d`: S in the PE registers, P in each row's P bank (register-level FlashAttention);
//! - `buf2d`: the same array with S and P in an SRAM buffer per PE row (the buffered 2-D
//!   baseline);
//! - `reg3d`: QK, (softmax,) PV on stacked tiers with register-to-register vertical links;
//! - `rowfused`: buf2d with each query row's whole row of S in the buffer and a two-pass
//!   softmax (the row-materializing baseline, FLAT);
//! - `unfused`: standard attention, S and P written to memory and read back between its
//!   passes (the unfused baseline);
//! - `noc2d`: reg3d's two arrays side by side on one die, P crossing over a NoC of mesh
//!   routers (the 2-D multi-array baseline).

mod buf2d;
mod noc2d;
mod plan;
mod reg2d;
mod reg3d;
mod rowfused;
mod unfused;

use anyhow::Result;
use serde::{Deserialize, Serialize};

pub use buf2d::BufParams;
pub use noc2d::NocParams;
pub use plan::{
    passes_text, Arrays, NocPlan, Op, PHome, Pass, Phase, Place, Plan, SHome, SoftmaxPass, Spares,
    Sram, Tensor, WholeRows,
};
pub use reg2d::Reg2d;
pub use reg3d::{StackParams, SPARE_GROUP};
pub use rowfused::RowParams;
pub use unfused::Unfused;

/// The parts of a design's configuration a variant sizes and checks its knobs against (a
/// `CoreConfig`'s, from `CoreConfig::tile`): the variants sit below the configuration that
/// holds them, and see only this.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Tile {
    /// PE rows.
    pub rows: u32,
    /// Query rows of a tile (Br).
    pub br: u32,
    /// Keys of a block (Bc).
    pub bc: u32,
    /// Head size (d).
    pub head_dim: u32,
    /// Width of the core's row and key indices.
    pub index_bits: u32,
}

/// What a variant does, as the rest of the design asks it: its [`Plan`] (where S and P live,
/// the arrays QK and PV run on, and so the phases a block runs), the bank capacity the energy
/// model prices, its module-name suffix, and its knobs' checks. The defaults are reg2d's.
pub trait Dataflow {
    /// The variant's phase plan.
    fn plan(&self) -> Plan {
        Plan::default()
    }

    /// Bytes of each SRAM bank that holds S or P (the energy model prices an access by its
    /// bank's capacity); None when S and P are in registers.
    fn sram_bank_bytes(&self, tile: &Tile) -> Option<u64> {
        let _ = tile;
        None
    }

    /// What the variant adds to a PE row's module name (its knobs that change the RTL).
    fn row_name(&self) -> String {
        String::new()
    }

    /// The variant's knobs against the rest of the configuration.
    fn validate(&self, tile: &Tile) -> Result<()> {
        let _ = tile;
        Ok(())
    }
}

/// The variant's name: which design (`--variant`, `variant = "..."`).
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum VariantKind {
    /// S and P in PE registers on one tier (register-level FlashAttention).
    #[default]
    Reg2d,
    /// The same array with S and P in an on-chip SRAM buffer (the buffered 2-D baseline).
    Buf2d,
    /// QK, softmax and PV on stacked tiers with register-to-register vertical links.
    Reg3d,
    /// buf2d with whole rows of S in the buffer and a two-pass softmax (row-materializing
    /// fused attention, the FLAT baseline).
    Rowfused,
    /// Standard attention: S and P through memory between the passes (the unfused
    /// baseline).
    Unfused,
    /// reg3d's two arrays side by side, P over a NoC (the 2-D multi-array baseline).
    Noc2d,
}

impl VariantKind {
    /// Every variant, by name.
    pub const ALL: [VariantKind; 6] = [
        VariantKind::Reg2d,
        VariantKind::Buf2d,
        VariantKind::Reg3d,
        VariantKind::Rowfused,
        VariantKind::Unfused,
        VariantKind::Noc2d,
    ];

    pub fn name(self) -> &'static str {
        match self {
            VariantKind::Reg2d => "reg2d",
            VariantKind::Buf2d => "buf2d",
            VariantKind::Reg3d => "reg3d",
            VariantKind::Rowfused => "rowfused",
            VariantKind::Unfused => "unfused",
            VariantKind::Noc2d => "noc2d",
        }
    }

    /// The variant's code in `ID_ARRAY.VARIANT`: its place in [`VariantKind::ALL`].
    pub fn code(self) -> u32 {
        VariantKind::ALL
            .iter()
            .position(|&k| k == self)
            .expect("listed") as u32
    }

    /// The variant's name in the register map and the C header (`REG2D`, ...).
    pub fn register_name(self) -> &'static str {
        match self {
            VariantKind::Reg2d => "REG2D",
            VariantKind::Buf2d => "BUF2D",
            VariantKind::Reg3d => "REG3D",
            VariantKind::Rowfused => "ROWFUSED",
            VariantKind::Unfused => "UNFUSED",
            VariantKind::Noc2d => "NOC2D",
        }
    }

    /// This variant with its default knobs.
    pub fn with_defaults(self) -> Variant {
        match self {
            VariantKind::Reg2d => Variant::Reg2d,
            VariantKind::Buf2d => Variant::Buf2d(BufParams::default()),
            VariantKind::Reg3d => Variant::Reg3d(StackParams::default()),
            VariantKind::Rowfused => Variant::Rowfused(RowParams::default()),
            VariantKind::Unfused => Variant::Unfused,
            VariantKind::Noc2d => Variant::Noc2d(NocParams::default()),
        }
    }
}

impl std::fmt::Display for VariantKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for VariantKind {
    type Err = anyhow::Error;
    fn from_str(s: &str) -> Result<Self> {
        VariantKind::ALL
            .into_iter()
            .find(|v| v.name() == s)
            .ok_or_else(|| {
                anyhow::anyhow!(
                    "unknown variant `{s}`: choose one of reg2d, buf2d, reg3d, rowfused, unfused, noc2d"
                )
            })
    }
}

/// Where a design keeps S and P, with the knobs of that design.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Variant {
    /// S in the PE registers, P in each row's P bank.
    #[default]
    Reg2d,
    /// S and P in an SRAM buffer beside each PE row.
    Buf2d(BufParams),
    /// QK, (softmax,) PV on stacked tiers.
    Reg3d(StackParams),
    /// Whole rows of S in an SRAM buffer beside each PE row, a two-pass softmax.
    Rowfused(RowParams),
    /// Standard attention: S and P through memory.
    Unfused,
    /// reg3d's two arrays side by side, P over a NoC.
    Noc2d(NocParams),
}

impl std::fmt::Display for Variant {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.kind().name())
    }
}

impl Variant {
    /// The variant's dataflow: the one place a variant is mapped to its behaviour.
    pub fn flow(&self) -> &dyn Dataflow {
        match self {
            Variant::Reg2d => &Reg2d,
            Variant::Buf2d(b) => b,
            Variant::Reg3d(s) => s,
            Variant::Rowfused(r) => r,
            Variant::Unfused => &Unfused,
            Variant::Noc2d(n) => n,
        }
    }

    /// The variant as simulation builds it: SRAM macros as their behaviour, not blackboxes.
    pub fn behavioural(self) -> Variant {
        self.with_macros(false)
    }

    /// The variant with its SRAM banks built as macros (`true`: black boxes for the area flow)
    /// or as behavioural memories (`false`). Every variant is named, so a new one must say
    /// whether it has banks.
    pub fn with_macros(self, macros: bool) -> Variant {
        match self {
            Variant::Buf2d(b) => Variant::Buf2d(BufParams {
                macro_blackbox: macros,
                ..b
            }),
            Variant::Rowfused(r) => Variant::Rowfused(RowParams {
                macro_blackbox: macros,
                ..r
            }),
            Variant::Reg2d | Variant::Reg3d(_) | Variant::Unfused | Variant::Noc2d(_) => self,
        }
    }

    /// The keys of a query row the S array holds, where it holds whole rows (the plan's
    /// `WholeRows::keys`); a design without such an array has none to set.
    pub fn set_row_keys(&mut self, keys: u32) {
        match self {
            Variant::Rowfused(r) => r.keys = keys,
            Variant::Reg2d
            | Variant::Buf2d(_)
            | Variant::Reg3d(_)
            | Variant::Unfused
            | Variant::Noc2d(_) => {}
        }
    }

    /// reg3d with `tiers` tiers and the other knobs at their defaults.
    pub fn reg3d(tiers: u32) -> Variant {
        Variant::Reg3d(StackParams {
            tiers,
            ..StackParams::default()
        })
    }

    /// buf2d with its knobs at their defaults.
    pub fn buf2d() -> Variant {
        Variant::Buf2d(BufParams::default())
    }

    pub fn kind(&self) -> VariantKind {
        match self {
            Variant::Reg2d => VariantKind::Reg2d,
            Variant::Buf2d(_) => VariantKind::Buf2d,
            Variant::Reg3d(_) => VariantKind::Reg3d,
            Variant::Rowfused(_) => VariantKind::Rowfused,
            Variant::Unfused => VariantKind::Unfused,
            Variant::Noc2d(_) => VariantKind::Noc2d,
        }
    }

    pub fn name(&self) -> &'static str {
        self.kind().name()
    }

    /// buf2d's knobs.
    pub fn buf(&self) -> Option<&BufParams> {
        match self {
            Variant::Buf2d(b) => Some(b),
            Variant::Reg2d
            | Variant::Reg3d(_)
            | Variant::Rowfused(_)
            | Variant::Unfused
            | Variant::Noc2d(_) => None,
        }
    }

    /// rowfused's knobs.
    pub fn rowfused(&self) -> Option<&RowParams> {
        match self {
            Variant::Rowfused(r) => Some(r),
            Variant::Reg2d
            | Variant::Buf2d(_)
            | Variant::Reg3d(_)
            | Variant::Unfused
            | Variant::Noc2d(_) => None,
        }
    }

    /// reg3d's knobs.
    pub fn stack(&self) -> Option<&StackParams> {
        match self {
            Variant::Reg3d(s) => Some(s),
            Variant::Reg2d
            | Variant::Buf2d(_)
            | Variant::Rowfused(_)
            | Variant::Unfused
            | Variant::Noc2d(_) => None,
        }
    }

    /// noc2d's knobs.
    pub fn noc(&self) -> Option<&NocParams> {
        match self {
            Variant::Noc2d(n) => Some(n),
            Variant::Reg2d
            | Variant::Buf2d(_)
            | Variant::Reg3d(_)
            | Variant::Rowfused(_)
            | Variant::Unfused => None,
        }
    }

    /// Tiers of the stack: 1 for the 2-D designs, 2 or 3 for reg3d.
    pub fn tiers(&self) -> u32 {
        self.plan().tiers()
    }

    /// The variant's phase plan ([`Dataflow::plan`]).
    pub fn plan(&self) -> Plan {
        self.flow().plan()
    }

    /// A short label: the name, reg3d's tiers and narrow S links (`reg3d ×3, 8-bit links`),
    /// rowfused's spill.
    pub fn label(&self) -> String {
        match self {
            Variant::Reg3d(s) if s.tiers == 3 && s.vlink_bits < 32 => {
                format!("reg3d ×3, {}-bit links", s.vlink_bits)
            }
            Variant::Reg3d(s) if s.tiers == 3 => "reg3d ×3".into(),
            Variant::Rowfused(r) if r.spill => "rowfused (spill)".into(),
            Variant::Noc2d(n) => format!(
                "noc2d, {}-bit flits, {} hop{}",
                n.flit_bits,
                n.hops,
                if n.hops == 1 { "" } else { "s" }
            ),
            Variant::Reg2d
            | Variant::Buf2d(_)
            | Variant::Reg3d(_)
            | Variant::Rowfused(_)
            | Variant::Unfused => self.name().into(),
        }
    }
}
