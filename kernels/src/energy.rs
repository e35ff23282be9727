//! Energy per event, each figure with its source and technology node, and the energy of a run
//! as Σ count × energy over counts that come from the RTL's own counters (docs/energy.md).
//!
//! The table (`EnergyTable::default()`) holds per-event energies at the node their source
//! measured them at. A run's figures are scaled to the table's target node `node_nm` by the
//! ratio of per-node energy factors of their class ([`Scaling`]): logic by Stillmaker & Baas
//! 2017 as coded in Accelergy's hwcomponents (`scale`), SRAM by the same fits down to 22 nm and
//! √(node / 22) below (Accelergy's CACTI plug-in rule), wire per mm by the supply voltage
//! squared (Villa et al., SC14), and interfaces (off-chip DRAM, hybrid bonds) not at all.
//!
//! Storage is priced by capacity: a curve of (bytes, read, write pJ per 64-bit access) points
//! from register files to multi-megabyte SRAM macros, interpolated log-log between points and
//! held flat beyond the ends. A w-bit access of a register array costs w/64 of the 64-bit
//! figure (flip-flops cost per bit). A w-bit access of an SRAM macro has CACTI's fixed part
//! (decoders, wordline, sense-amplifier periphery): `E64 · (f + (1 − f) · w/64)`, with the
//! fixed shares f of `sram_fixed_share` fitted to CACTI 7 outputs (docs/energy.md). SRAM
//! macros also leak (`sram_leak`, per MiB, priced per cycle at the design's clock). The PE
//! register files, the P banks and buf2d's SRAM banks are each priced at their own capacity.
//!
//! `breakdown` is pure arithmetic on an `Activity` (the counters) and a `Geometry` (what the
//! counters are multiplied by): the same inputs give the same energies, bit for bit.

use std::collections::BTreeMap;
use std::fmt;

/// How a figure scales with the technology node.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scaling {
    /// Logic: Stillmaker & Baas 2017 ([`scale`]).
    Logic,
    /// SRAM: the logic fits down to 22 nm, then √(node / 22) ([`scale_sram`]).
    Sram,
    /// On-chip wire per mm: capacitance per mm is constant, energy follows Vdd² ([`scale_wire`]).
    Wire,
    /// Set by an interface, not the node (off-chip DRAM, hybrid bonds).
    Interface,
}

impl Scaling {
    /// The factor that takes an energy of this class from `from` nm to `to` nm.
    pub fn factor(self, from: f64, to: f64) -> Result<f64, String> {
        match self {
            Scaling::Logic => scale(from, to),
            Scaling::Sram => scale_sram(from, to),
            Scaling::Wire => scale_wire(from, to),
            Scaling::Interface => Ok(1.0),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Scaling::Logic => "logic",
            Scaling::Sram => "sram",
            Scaling::Wire => "wire",
            Scaling::Interface => "none",
        }
    }

    /// The class called `name` (`logic`, `sram`, `wire`, `none`).
    pub fn parse(name: &str) -> Option<Scaling> {
        [
            Scaling::Logic,
            Scaling::Sram,
            Scaling::Wire,
            Scaling::Interface,
        ]
        .into_iter()
        .find(|s| s.name() == name)
    }
}

/// One per-event energy: its value at `node_nm`, how it scales with the node, and where it
/// comes from.
#[derive(Clone, Debug, PartialEq)]
pub struct Figure {
    /// The value, in `unit` (pJ per event for every figure but `sram_leak`).
    pub pj: f64,
    /// The node the figure was measured or modeled at (nm; 0 for interface figures).
    pub node_nm: f64,
    pub scaling: Scaling,
    pub unit: &'static str,
    pub source: String,
}

/// One point of the storage curve: a macro or register file of `bytes`, the energy of one
/// 64-bit read and write.
#[derive(Clone, Debug, PartialEq)]
pub struct StoragePoint {
    pub bytes: u64,
    pub read_pj: f64,
    pub write_pj: f64,
    pub node_nm: f64,
    /// Logic for a register (flip-flops), SRAM for a macro.
    pub scaling: Scaling,
    pub source: String,
}

/// The share of a 64-bit SRAM access that is fixed per access, read and write: a w-bit access
/// costs `E64 · (f + (1 − f) · w/64)`.
#[derive(Clone, Debug, PartialEq)]
pub struct FixedShare {
    pub read: f64,
    pub write: f64,
    pub source: String,
}

/// The per-event energy keys (`EnergyTable::figures`), with what each prices.
pub const KEYS: &[(&str, &str)] = &[
    ("fp16_mul", "FP16 multiply (the MAC's product)"),
    (
        "fp8_mul",
        "FP8 multiply (the MAC's product with E4M3 or E5M2 operands)",
    ),
    (
        "fp32_add",
        "FP32 add (the MAC's accumulation, the exp sweep's subtract and sum)",
    ),
    ("fp32_mul", "FP32 multiply (the readout's normalization)"),
    (
        "int32_add",
        "32-bit integer add (the max sweep's compare of FP32 bit patterns)",
    ),
    ("exp2", "exp2 unit operation"),
    (
        "int8_mul",
        "8-bit integer multiply (a product of integer QKᵀ, qk_format = \"int8\")",
    ),
    (
        "int4_mul",
        "4-bit integer multiply (a product of integer QKᵀ, qk_format = \"int4\")",
    ),
    (
        "recip",
        "reciprocal unit operation (one per query row and tile)",
    ),
    ("dram_bit", "off-chip memory, per bit moved"),
    ("bond_bit", "3-D hybrid-bond vertical link, per bit"),
    ("wire_bit_mm", "on-chip wire, per bit and mm"),
    (
        "sram_leak",
        "SRAM macro leakage, µW per MiB (priced per cycle at the clock)",
    ),
    (
        "static_pe_cycle",
        "a PE's clock and leakage per cycle, whether it computes or not",
    ),
];

/// A named value of a figure a user chooses by name: the off-chip memory (`dram`, the
/// `dram_bit` figure) and the on-chip wire (`wire`, the `wire_bit_mm` figure).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Choice {
    pub name: &'static str,
    pub pj: f64,
    /// The node the figure is at (nm); [`UNSCALED`] for an interface figure.
    pub node_nm: f64,
    pub source: &'static str,
}

/// The off-chip memories `dram` names, pJ per bit moved (an interface figure: not scaled).
/// The default is [`DEFAULT_DRAM`].
pub const DRAMS: &[Choice] = &[
    Choice {
        name: "hbm2",
        pj: 3.97,
        node_nm: UNSCALED,
        source: "HBM2: O'Connor, Chatterjee et al., \"Fine-Grained DRAM\", MICRO 2017 \
                 (activation 1.21 + on-die movement 2.24 + I/O 0.30 pJ/bit, with ECC), as in \
                 accelergy-cacti-plug-in's DRAM table (3.9); an interface figure, not scaled",
    },
    Choice {
        name: "lpddr4",
        pj: 8.0,
        node_nm: UNSCALED,
        source: "LPDDR4: accelergy-cacti-plug-in's DRAM table (02cd6de, \"public data\"); \
                 DramDSE simulations of LPDDR4 packages give 13-14 pJ/bit (H. Ha, Stanford \
                 thesis); not scaled",
    },
    Choice {
        name: "gddr5",
        pj: 14.0,
        node_nm: UNSCALED,
        source: "GDDR5: Chatterjee et al., MICRO 2017, as in accelergy-cacti-plug-in's DRAM \
                 table (02cd6de); not scaled",
    },
    Choice {
        name: "ddr3",
        pj: 70.0,
        node_nm: UNSCALED,
        source: "DDR3 DIMMs: Malladi et al., ISCA 2012, as in accelergy-cacti-plug-in's DRAM \
                 table (02cd6de); Horowitz ISSCC 2014 gives 1.3-2.6 nJ per 64-bit access \
                 (20-40 pJ/bit); not scaled",
    },
];

/// The off-chip memory of the default table: an accelerator with the seed's 512-bit port at
/// 1.5 GHz (96 GB/s) is an HBM-class part.
pub const DEFAULT_DRAM: &str = "hbm2";

/// The on-chip wires `wire` names, pJ per bit and mm (wire scaling). The default is
/// [`DEFAULT_WIRE`].
pub const WIRES: &[Choice] = &[
    Choice {
        name: "low-swing",
        pj: 0.0404,
        node_nm: 45.0,
        source: "on-chip low-swing wire, Park et al., DATE 2013 (45 nm); full-swing repeated \
                 wires cost about 3x more (wire = \"full-swing\")",
    },
    Choice {
        name: "full-swing",
        pj: 0.12,
        node_nm: 40.0,
        source: "on-chip full-swing repeated wire, 0.12 pJ/(bit mm) at 40 nm and 0.9 V: \
                 Keckler et al., IEEE Micro 31(5) 2011, Table 1",
    },
];

/// The wire of the default table: the broadcasts and buffer wires are long, regular buses,
/// where low-swing signalling is the designer's choice.
pub const DEFAULT_WIRE: &str = "low-swing";

/// The choice called `name` among `list`, or an error naming the choices.
pub fn choice(list: &[Choice], what: &str, name: &str) -> Result<Choice, TableError> {
    list.iter()
        .copied()
        .find(|c| c.name == name)
        .ok_or_else(|| {
            let names: Vec<&str> = list.iter().map(|c| c.name).collect();
            TableError(format!(
                "{what} = {name:?} is not one this table knows: choose {} (or give the figure \
             itself in an --energy table)",
                names.join(", ")
            ))
        })
}

/// A PE's energy measured at gate level (`regflash power`, the `[gates]` section of a table):
/// it replaces the table's MAC, PE register-file and PE clock-and-leakage prices. Each figure
/// is at `node_nm` and scales as logic.
#[derive(Clone, Debug, PartialEq)]
pub struct GateFigures {
    pub node_nm: f64,
    /// pJ per MAC: the multiplier, the adder and the MAC's registers (dynamic).
    pub pe_mac: f64,
    /// pJ per register-file read: the PE's own logic and flip-flops, the read multiplexers
    /// among them (dynamic).
    pub pe_rf_read: f64,
    /// pJ per register-file write: the written word's flip-flops and clock gates (dynamic).
    pub pe_rf_write: f64,
    /// pJ per PE and cycle: its clock and leakage with no data moving.
    pub pe_cycle: f64,
    /// The PE module the figures were measured on (`pe_r64_m1_a1`).
    pub module: String,
    /// A PE row's engine measured at gate level, if the table has it.
    pub row: Option<RowGates>,
    pub source: String,
}

/// A PE row's engine measured at gate level (`regflash power`): it replaces the table's
/// softmax prices and a register design's P-bank accesses, and adds the row's control, clock
/// and leakage. Its arithmetic units (row update, exp, reciprocal, normalization) toggle every
/// cycle whether or not an operation is due (their inputs are not isolated),
/// so they are priced per row and cycle, as measured, not per operation. At
/// [`GateFigures::node_nm`], logic scaling.
#[derive(Clone, Debug, PartialEq)]
pub struct RowGates {
    /// pJ per row and cycle: the row update, exp, reciprocal and normalization units.
    pub softmax_cycle: f64,
    /// pJ per P-bank read and write (dynamic).
    pub p_read: f64,
    pub p_write: f64,
    /// pJ per row and cycle: the row's control (its max compares among it), and the P bank's
    /// clock and leakage.
    pub control_cycle: f64,
}

/// The energy table: per-event figures, the storage curve, and the knobs.
#[derive(Clone, Debug, PartialEq)]
pub struct EnergyTable {
    pub figures: BTreeMap<&'static str, Figure>,
    /// By capacity, ascending.
    pub storage: Vec<StoragePoint>,
    /// CACTI's fixed part of an SRAM access (register arrays have none).
    pub sram_fixed_share: FixedShare,
    /// The node to report at (nm): every scaling figure is scaled from its own node to this.
    pub node_nm: f64,
    /// Distance between neighbouring PEs (µm): a broadcast bit-hop crosses one pitch.
    pub pe_pitch_um: f64,
    /// The off-chip memory `dram_bit` prices ([`DRAMS`]), or where a user's figure came from.
    pub dram: String,
    /// The on-chip wire `wire_bit_mm` prices ([`WIRES`]), or where a user's figure came from.
    pub wire: String,
    /// A 2-D buffer's distance from the array (mm of wire each buffer bit crosses beyond the
    /// macro's own, whose wires its access energy includes): 0 for banks beside their PE rows,
    /// as buf2d places them; raise it to model a shared buffer at a distance.
    pub buffer_wire_mm: f64,
    /// SRAM macro area per MiB (mm², not scaled with `node_nm`): a planar GLB's distance to
    /// the array is derived from it when the design does not give one.
    pub sram_mm2_per_mib: f64,
    /// The PE measured at gate level, if the table has it (`--energy gates`).
    pub gates: Option<GateFigures>,
    /// noc2d's routers and links: their derived energy (the FIFOs' register arrays, the
    /// crossbar's wire tracks, the links' wire) times this; 1 by default. What `compare
    /// --claims --solve noc_energy_scale` varies, and a user table's `noc_scale`.
    pub noc_scale: f64,
}

/// A figure's node for figures that do not scale (recorded as 0).
const UNSCALED: f64 = 0.0;

/// A logic figure at `node_nm`, or an interface figure at [`UNSCALED`].
fn fig(pj: f64, node_nm: f64, unit: &'static str, source: &str) -> Figure {
    let scaling = if node_nm == UNSCALED {
        Scaling::Interface
    } else {
        Scaling::Logic
    };
    Figure {
        pj,
        node_nm,
        scaling,
        unit,
        source: source.to_string(),
    }
}

/// A wire figure at `node_nm` (per mm: it scales with the supply voltage, [`scale_wire`]).
fn wire_fig(pj: f64, node_nm: f64, unit: &'static str, source: &str) -> Figure {
    Figure {
        scaling: Scaling::Wire,
        ..fig(pj, node_nm, unit, source)
    }
}

/// The CACTI 7 runs the SRAM figures come from.
const CACTI: &str = "CACTI 7 (HewlettPackard/cacti 1ffd8df) with accelergy-cacti-plug-in's \
                     default_cfg.cfg (itrs-lstp cells and periphery, 300 K), 1 RW port, 1 bank, \
                     45 nm";

const HOROWITZ: &str =
    "Horowitz, \"Computing's energy problem\", ISSCC 2014, Fig. 1.1.9 (45 nm, 0.9 V)";

impl Default for EnergyTable {
    fn default() -> Self {
        let mut figures = BTreeMap::new();
        let mut add = |k: &'static str, f: Figure| {
            assert!(KEYS.iter().any(|(n, _)| *n == k), "unlisted key {k}");
            figures.insert(k, f);
        };
        add("fp16_mul", fig(1.1, 45.0, "pJ/op", HOROWITZ));
        add(
            "fp8_mul",
            fig(
                0.22,
                45.0,
                "pJ/op",
                "estimate, no published FP8 figure: Horowitz ISSCC 2014's FP16 multiply (1.1 \
                 pJ, 45 nm) scaled by regflash's own multipliers at gate level, E4M3 0.80 \
                 against FP16 4.07 pJ per cycle (regflash power, nangate45, 1.5 GHz, replayed \
                 activity); E5M2's smaller multiplier is priced the same, an upper bound",
            ),
        );
        add("fp32_add", fig(0.9, 45.0, "pJ/op", HOROWITZ));
        add("fp32_mul", fig(3.7, 45.0, "pJ/op", HOROWITZ));
        add("int32_add", fig(0.1, 45.0, "pJ/op", HOROWITZ));
        add("int8_mul", fig(0.2, 45.0, "pJ/op", HOROWITZ));
        add(
            "int4_mul",
            fig(
                0.05,
                45.0,
                "pJ/op",
                "estimate, no published 4-bit figure: Horowitz ISSCC 2014's 8-bit multiply \
                 (0.2 pJ, 45 nm) scaled by the partial products of an array multiplier, (4/8)²",
            ),
        );
        add(
            "exp2",
            fig(
                4.6,
                45.0,
                "pJ/op",
                "estimate, no published per-operation figure: the unit (hdl/src/softmax/exp2.rs) \
                 is a 65-entry table and a 24x18-bit interpolating multiply-add, priced as one \
                 FP32 multiply + one FP32 add of Horowitz ISSCC 2014 (45 nm)",
            ),
        );
        add(
            "recip",
            fig(
                2.8,
                45.0,
                "pJ/op",
                "estimate, no published per-operation figure: the unit (hdl/src/fp/recip.rs) \
                 is a restoring divider, 28 steps of a 28-bit subtract, priced as 28 32-bit \
                 integer adds of Horowitz ISSCC 2014 (45 nm)",
            ),
        );
        let (dram, wire) = (
            choice(DRAMS, "dram", DEFAULT_DRAM).expect("the default DRAM is listed"),
            choice(WIRES, "wire", DEFAULT_WIRE).expect("the default wire is listed"),
        );
        add(
            "dram_bit",
            fig(dram.pj, dram.node_nm, "pJ/bit", dram.source),
        );
        add(
            "bond_bit",
            fig(
                0.05,
                UNSCALED,
                "pJ/bit",
                "3-D hybrid bonding, top of the 0.01-0.05 pJ/bit range of UCIe-3D (Das Sharma, \
                 Hot Interconnects 2025); 2.5-D is 0.25-0.3, 2-D 0.5-0.6. Not scaled",
            ),
        );
        add(
            "wire_bit_mm",
            wire_fig(wire.pj, wire.node_nm, "pJ/(bit mm)", wire.source),
        );
        add(
            "static_pe_cycle",
            fig(
                1.50,
                45.0,
                "pJ/(PE cycle)",
                "gate level: regflash's PE (64 registers, M = A = 1, its register file \
                 clock-gated a word at a time) mapped at NangateOpenCellLibrary typical (45 nm), \
                 1,500 MHz, no data moving and every gate closed: its clock pins, clock gates \
                 and leakage, OpenSTA (scripts/power-crosscheck, stop 70, docs/asic.md). The \
                 PEs' only: the rest of the core's clock and leakage is not priced",
            ),
        );
        add(
            "sram_leak",
            Figure {
                pj: 25.0,
                node_nm: 45.0,
                scaling: Scaling::Sram,
                unit: "uW/MiB",
                source: format!(
                    "{CACTI}: 2 KiB to 256 KiB macros (timeloop-accelergy-exercises 2d55108 \
                     reference logs) and FuseMax's 32 MiB buffer (micro24-fusemax-artifact \
                     f543beb, 793 uW) leak 25-38 uW per MiB, linear in capacity; itrs-hp cells \
                     at 360 K leak about 10^4 times more"
                ),
            },
        );
        EnergyTable {
            figures,
            storage: default_storage(),
            sram_fixed_share: FixedShare {
                read: 0.49,
                write: 0.31,
                source: format!(
                    "least-squares fit of E64(C) (f + (1 - f) w/64) to 13 {CACTI} outputs, \
                     2 KiB to 32 MiB, 32 to 256 bits (timeloop-accelergy-exercises 2d55108 \
                     reference logs, micro24-fusemax-artifact f543beb, this table's curve): rms \
                     error x1.13 read, x1.06 write; Accelergy's plug-in assumes 0.3"
                ),
            },
            node_nm: 45.0,
            pe_pitch_um: 50.0,
            dram: DEFAULT_DRAM.to_string(),
            wire: DEFAULT_WIRE.to_string(),
            buffer_wire_mm: 0.0,
            // CACTI 7 itrs-lstp at 45 nm: 3.2-3.6 mm² per MiB for 16 KiB to 256 KiB macros
            // (128 KiB x 64 bits: 0.4296 mm²; 256 KiB x 256 bits: 0.8598 mm²; the
            // timeloop-accelergy-exercises 2d55108 reference logs).
            sram_mm2_per_mib: 3.4,
            gates: None,
            noc_scale: 1.0,
        }
    }
}

fn default_storage() -> Vec<StoragePoint> {
    let p = |bytes: u64, read_pj: f64, write_pj: f64, node_nm: f64, source: &str| StoragePoint {
        bytes,
        read_pj,
        write_pj,
        node_nm,
        scaling: Scaling::Sram,
        source: source.to_string(),
    };
    let cacti = format!(
        "{CACTI}, 64-bit block; Horowitz ISSCC 2014 quotes ~10 / 20 / 100 pJ for 8 KB / \
         32 KB / 1 MB"
    );
    let cacti = cacti.as_str();
    let register = StoragePoint {
        scaling: Scaling::Logic,
        ..p(
            4,
            0.576,
            0.576,
            40.0,
            "one 32-bit register: Aladdin's register, 0.009 pJ per bit read or written (40 nm; \
             hwcomponents-library aladdin.py), 64 bits",
        )
    };
    vec![
        register,
        p(8 << 10, 6.14, 7.88, 45.0, cacti),
        p(32 << 10, 17.04, 15.40, 45.0, cacti),
        p(128 << 10, 32.29, 26.07, 45.0, cacti),
        p(512 << 10, 68.35, 51.35, 45.0, cacti),
        p(1 << 20, 93.52, 76.18, 45.0, cacti),
        p(4 << 20, 188.7, 155.1, 45.0, cacti),
    ]
}

/// Stillmaker & Baas 2017 energy fits as coded in Accelergy's hwcomponents
/// (`hwcomponents/scaling/techscaling.py`): node (nm) and the coefficients (a, b, c) of
/// a·Vdd² + b·Vdd + c. The 45 and 32 nm rows are the paper's LP fits, 20 to 7 nm its HP fits
/// (a mix the source code makes; HP at 45 nm would give 7/45 nm 0.117 instead of 0.094).
pub const ENERGY_FITS: &[(f64, [f64; 3])] = &[
    (130.0, [7.171, -6.709, 2.904]),
    (90.0, [4.762, -4.781, 2.092]),
    (65.0, [3.755, -4.398, 1.975]),
    (45.0, [1.103, -0.362, 0.2767]),
    (32.0, [0.9559, -0.7823, 0.471]),
    (20.0, [0.373, -0.1582, 0.04104]),
    (16.0, [0.2958, -0.1241, 0.03024]),
    (14.0, [0.2363, -0.09675, 0.02239]),
    (10.0, [0.2068, -0.09311, 0.02375]),
    (7.0, [0.1776, -0.09097, 0.02447]),
];

/// The supply voltage the fits are evaluated at for every node (hwcomponents' default).
pub const SCALING_VDD: f64 = 0.8;

/// The nodes a figure may be scaled between (nm).
pub const NODE_RANGE: (f64, f64) = (1.0, 130.0);

/// The factor that takes an energy at `from` nm to `to` nm: the ratio of hwcomponents' fits at
/// 0.8 V; between listed nodes the fit interpolated linearly in node size (hwcomponents' own
/// interpolation weights the far endpoint, giving 0.790 at 40 nm where this gives 0.869: we
/// deliberately differ; listed nodes agree); below 7 nm the 7 nm fit times √(node / 7) (IRDS,
/// as in hwcomponents), down to 1 nm.
pub fn scale(from: f64, to: f64) -> Result<f64, String> {
    Ok(node_energy(to)? / node_energy(from)?)
}

/// The node below which SRAM stops following the logic fits (nm): CACTI's technology files
/// end there, and Accelergy's CACTI plug-in scales below it by √(node / 22).
pub const SRAM_FIT_FLOOR_NM: f64 = 22.0;

/// [`scale`] for SRAM: the logic fits down to 22 nm, √(node / 22) below (Accelergy's CACTI
/// plug-in, cacti_wrapper.py). From 45 to 7 nm that is 0.166, against logic's 0.094: silicon
/// anchors say SRAM scales more slowly than logic (an 8 KB SRAM: 156 fJ/bit at 45 nm, Horowitz
/// ISSCC 2014; 50 fJ/bit at 14 nm, Dally et al., CACM 2020).
pub fn scale_sram(from: f64, to: f64) -> Result<f64, String> {
    Ok(node_energy_sram(to)? / node_energy_sram(from)?)
}

fn node_energy_sram(nm: f64) -> Result<f64, String> {
    if nm >= SRAM_FIT_FLOOR_NM {
        return node_energy(nm);
    }
    node_energy(nm)?;
    Ok(node_energy(SRAM_FIT_FLOOR_NM)? * (nm / SRAM_FIT_FLOOR_NM).sqrt())
}

/// Wire energy per mm by node, relative to 45 nm: capacitance per mm stays about 200 fF/mm, so
/// the energy follows Vdd². Villa et al., "Scaling the power wall", SC14, Table II, from 28 to
/// 7 nm (Vdd 0.90 to 0.70 V); 45 and 28 nm at the same 0.9 V (Keckler et al., IEEE Micro 2011,
/// Table 1, gives 40 nm at 0.9 V). Held flat beyond the ends.
pub const WIRE_FACTORS: &[(f64, f64)] = &[
    (45.0, 1.0),
    (28.0, 1.0),
    (20.0, 0.89),
    (14.0, 0.75),
    (10.0, 0.62),
    (7.0, 0.46),
];

/// [`scale`] for on-chip wire per mm ([`WIRE_FACTORS`], interpolated linearly in node size).
pub fn scale_wire(from: f64, to: f64) -> Result<f64, String> {
    Ok(wire_energy(to)? / wire_energy(from)?)
}

fn wire_energy(nm: f64) -> Result<f64, String> {
    node_energy(nm)?;
    let (first, last) = (WIRE_FACTORS[0], WIRE_FACTORS[WIRE_FACTORS.len() - 1]);
    if nm >= first.0 {
        return Ok(first.1);
    }
    if nm <= last.0 {
        return Ok(last.1);
    }
    let k = WIRE_FACTORS
        .iter()
        .position(|(n, _)| *n <= nm)
        .expect("inside the table");
    let ((n0, f0), (n1, f1)) = (WIRE_FACTORS[k - 1], WIRE_FACTORS[k]);
    Ok(f1 + (nm - n1) / (n0 - n1) * (f0 - f1))
}

/// The relative energy of a node (the fit at `SCALING_VDD`).
pub fn node_energy(nm: f64) -> Result<f64, String> {
    let (lo, hi) = NODE_RANGE;
    if !(nm.is_finite() && (lo..=hi).contains(&nm)) {
        return Err(format!(
            "node {nm} nm is outside the scaling range ({lo} to {hi} nm)"
        ));
    }
    let fit = |c: &[f64; 3]| c[0] * SCALING_VDD * SCALING_VDD + c[1] * SCALING_VDD + c[2];
    let last = ENERGY_FITS[ENERGY_FITS.len() - 1];
    if nm <= last.0 {
        return Ok(fit(&last.1) * (nm / last.0).sqrt());
    }
    let k = ENERGY_FITS
        .iter()
        .position(|(n, _)| *n <= nm)
        .expect("inside the range");
    if ENERGY_FITS[k].0 == nm {
        return Ok(fit(&ENERGY_FITS[k].1));
    }
    let ((n0, c0), (n1, c1)) = (ENERGY_FITS[k - 1], ENERGY_FITS[k]);
    let t = (nm - n1) / (n0 - n1);
    Ok(fit(&c1) + t * (fit(&c0) - fit(&c1)))
}

/// Log-log interpolation in a table of (x, y) points sorted by x (either direction), flat
/// beyond the ends.
fn loglog(points: &[(f64, f64)], x: f64) -> f64 {
    let mut pts: Vec<(f64, f64)> = points.to_vec();
    pts.sort_by(|a, b| a.0.total_cmp(&b.0));
    if x <= pts[0].0 {
        return pts[0].1;
    }
    let last = pts[pts.len() - 1];
    if x >= last.0 {
        return last.1;
    }
    let k = pts.iter().position(|p| p.0 >= x).expect("inside the range");
    if pts[k].0 == x {
        return pts[k].1;
    }
    let ((x0, y0), (x1, y1)) = (pts[k - 1], pts[k]);
    let t = (x.ln() - x0.ln()) / (x1.ln() - x0.ln());
    (y0.ln() + t * (y1.ln() - y0.ln())).exp()
}

/// What the counters of one run say happened (all from the RTL).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Activity {
    pub cycles: u64,
    pub macs: u64,
    pub rf_reads: u64,
    pub rf_writes: u64,
    /// 16-bit P accesses (P banks, or buf2d's P arrays).
    pub p_reads: u64,
    pub p_writes: u64,
    /// 32-bit S accesses of buf2d's S arrays.
    pub s_reads: u64,
    pub s_writes: u64,
    pub vlink_bits: u64,
    pub bcast_bit_hops: u64,
    pub max_ops: u64,
    pub exp_ops: u64,
    pub row_updates: u64,
    pub recip_ops: u64,
    pub norm_ops: u64,
    /// Operand bits read from the Q/K/V landing buffers.
    pub land_read_bits: u64,
    /// Bits the DMA writes into the landing buffers (every read beat).
    pub land_write_bits: u64,
    /// Bits read from and written to the global buffer (hits; fills).
    pub glb_read_bits: u64,
    pub glb_write_bits: u64,
    /// Bits of O through the staging buffer (written by the readout, read by the DMA: each
    /// write beat once each way).
    pub staging_bits: u64,
    pub dram_bytes: u64,
    /// noc2d's P path: flits into and out of the routers' input FIFOs (each read is a switch
    /// traversal), flit bits times the links they crossed, the source bank's word reads (its
    /// writes are as many).
    pub noc_fifo_writes: u64,
    pub noc_fifo_reads: u64,
    pub noc_hop_bits: u64,
    pub noc_src_reads: u64,
}

/// Where a design's buffer sits: beside the array (2-D, its bits cross `buffer_wire_mm` of
/// wire) or on a stacked tier (its bits cross a hybrid bond).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Placement {
    Planar,
    Stacked,
}

/// What the counts are multiplied by: the capacities of the storage they access and the
/// distances and PE count of the design.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Geometry {
    /// PE rows, each with its row engine.
    pub rows: u64,
    /// PEs over all tiers (for the static term).
    pub pes: u64,
    /// Integer QKᵀ's bits (8 or 4; 0 without): half the MACs (QK's) are integer products
    /// accumulated in int32, priced `int8_mul` / `int4_mul` + `int32_add`.
    pub qk_int_bits: u32,
    /// Bits of an operand (Q, K, V, P): 16, or 8 with FP8 operands (priced `fp8_mul`).
    pub operand_bits: u32,
    /// PE columns (a row's reduction tree has cols − 1 adders).
    pub cols: u64,
    /// Bytes of one landing-buffer bank and of one O staging bank.
    pub landing_bank_bytes: u64,
    pub staging_bank_bytes: u64,
    /// Bytes of one PE's register file.
    pub pe_rf_bytes: u64,
    /// Bytes of one row's P storage (register bank, or buf2d's SRAM bank for S and P).
    pub p_bytes: u64,
    /// buf2d: the S and P arrays are SRAM macros of `p_bytes` each bank; `None` for register
    /// designs (P banks priced as register arrays of `p_bytes`).
    pub buffer: Option<Placement>,
    /// unfused: no S or P storage in the rows; their S and P accesses are reads of the landing
    /// buffer (priced as landing reads of their bits) and writes into the staging buffer
    /// (priced with the DMA's reads of it, `staging_bits`: nothing of their own).
    pub scratch: bool,
    /// Bits of one S-array access and one P-bank access (32 and 16; buf2d's wide words more).
    pub s_access_bits: u64,
    pub p_access_bits: u64,
    /// Bytes of SRAM macros in the design (buf2d's S and P arrays over all rows), which leak.
    pub sram_bytes: u64,
    /// The clock (MHz): leakage is a power, priced per cycle.
    pub clock_mhz: f64,
    /// The global buffer, if the design has one.
    pub glb: Option<GlbGeometry>,
    /// noc2d's NoC, if the design has one.
    pub noc: Option<NocGeometry>,
}

/// noc2d's P path as the pricing sees it: its flit width, a router input FIFO's bytes (a
/// register array), a link's length in PE pitches (the array's side: neighbouring arrays'
/// routers are an array apart), and the source bank's bytes and word (a register array of two
/// blocks of P, a weight of every PE row a word).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct NocGeometry {
    pub flit_bits: u64,
    pub fifo_bytes: u64,
    pub link_pitches: u64,
    pub src_bytes: u64,
    pub src_word_bits: u64,
}

/// A global buffer's banks and place: its accesses are `word_bits` wide on banks of
/// `bank_bytes`; stacked ones cross a bond, planar ones `wire_mm` of wire (None: derived from
/// the capacity's area, `EnergyTable::glb_wire_mm`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct GlbGeometry {
    pub bytes: u64,
    pub bank_bytes: u64,
    pub word_bits: u64,
    pub placement: Placement,
    pub wire_mm: Option<f64>,
}

/// Energy by component (pJ), at the table's node.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Breakdown {
    /// MACs: FP16 multiply + FP32 add.
    pub mac: f64,
    /// PE register files at their ports (S, O; three tiers: the S registers above).
    pub pe_registers: f64,
    /// P register banks (register designs).
    pub p_registers: f64,
    /// buf2d's SRAM banks (S and P arrays).
    pub sram: f64,
    /// Moving buffer bits between the array and the banks: wire (2-D) or bonds (stacked).
    pub buffer_transport: f64,
    /// Row engines: max compares, exp elements (scale, subtract, exp2, sum), row updates,
    /// reciprocals, normalizing multiplies.
    pub softmax: f64,
    /// The Q/K/V landing buffers: the DMA's writes and the operand reads.
    pub landing: f64,
    /// The O staging buffer: the readout's writes and the DMA's reads.
    pub staging: f64,
    /// Operand broadcasts over the row and column buses.
    pub broadcast: f64,
    /// Vertical register-to-register links (reg3d).
    pub vertical_links: f64,
    /// Off-chip memory traffic (DMA bytes).
    pub dram: f64,
    /// Static and clock-tree energy (a knob; 0 by default).
    pub static_energy: f64,
    /// SRAM macros' leakage.
    pub leakage: f64,
    /// The global buffer's banks (hits and fills).
    pub glb: f64,
    /// Moving GLB bits to and from the DMA: bonds (stacked) or wire (planar).
    pub glb_transport: f64,
    /// noc2d's routers (input FIFO writes and reads, switch traversals) and its source bank.
    pub noc: f64,
    /// noc2d's links between routers.
    pub noc_links: f64,
}

impl Breakdown {
    /// (name, pJ) for each component, in report order.
    pub fn components(&self) -> [(&'static str, f64); 17] {
        [
            ("mac", self.mac),
            ("pe_registers", self.pe_registers),
            ("p_registers", self.p_registers),
            ("sram", self.sram),
            ("buffer_transport", self.buffer_transport),
            ("softmax", self.softmax),
            ("landing", self.landing),
            ("staging", self.staging),
            ("broadcast", self.broadcast),
            ("vertical_links", self.vertical_links),
            ("dram", self.dram),
            ("static", self.static_energy),
            ("leakage", self.leakage),
            ("glb", self.glb),
            ("glb_transport", self.glb_transport),
            ("noc", self.noc),
            ("noc_links", self.noc_links),
        ]
    }

    pub fn total(&self) -> f64 {
        self.components().iter().map(|c| c.1).sum()
    }
}

/// A table entry that is wrong (a negative or non-finite energy, an empty storage curve).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TableError(pub String);

impl fmt::Display for TableError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for TableError {}

impl EnergyTable {
    /// Checks every figure: finite and non-negative energies, nodes inside the scaling table,
    /// a storage curve with distinct capacities.
    pub fn validate(&self) -> Result<(), TableError> {
        let bad = |s: String| Err(TableError(s));
        let ok_pj = |x: f64| x.is_finite() && x >= 0.0;
        node_energy(self.node_nm).map_err(|e| TableError(format!("node_nm: {e}")))?;
        for (k, f) in &self.figures {
            if !ok_pj(f.pj) {
                return bad(format!("{k}: pj = {} must be a finite energy >= 0", f.pj));
            }
            if f.scaling != Scaling::Interface {
                node_energy(f.node_nm).map_err(|e| TableError(format!("{k}.node_nm: {e}")))?;
            }
        }
        if self.storage.is_empty() {
            return bad("the storage curve has no points".into());
        }
        for (i, s) in self.storage.iter().enumerate() {
            let positive = |x: f64| x.is_finite() && x > 0.0;
            if !(positive(s.read_pj) && positive(s.write_pj)) || s.bytes == 0 {
                return bad(format!(
                    "storage point {} B: read {} / write {} pJ must be finite and > 0 (the curve \
                     is interpolated in log-log), bytes > 0",
                    s.bytes, s.read_pj, s.write_pj
                ));
            }
            node_energy(s.node_nm)
                .map_err(|e| TableError(format!("storage {} B node_nm: {e}", s.bytes)))?;
            if i > 0 && self.storage[i - 1].bytes >= s.bytes {
                return bad("storage points must have distinct capacities, ascending".into());
            }
        }
        let share = &self.sram_fixed_share;
        for (k, x) in [("read", share.read), ("write", share.write)] {
            if !(x.is_finite() && (0.0..=1.0).contains(&x)) {
                return bad(format!(
                    "sram_fixed_share.{k} = {x} must be a share from 0 (an access costs in \
                     proportion to its width) to 1 (the same whatever its width)"
                ));
            }
        }
        if let Some(g) = &self.gates {
            node_energy(g.node_nm).map_err(|e| TableError(format!("gates.node_nm: {e}")))?;
            let row = g.row.as_ref().map_or(vec![], |r| {
                vec![
                    ("row_softmax_cycle", r.softmax_cycle),
                    ("row_p_read", r.p_read),
                    ("row_p_write", r.p_write),
                    ("row_control_cycle", r.control_cycle),
                ]
            });
            for (k, x) in [
                ("pe_mac", g.pe_mac),
                ("pe_rf_read", g.pe_rf_read),
                ("pe_rf_write", g.pe_rf_write),
                ("pe_cycle", g.pe_cycle),
            ]
            .into_iter()
            .chain(row)
            {
                if !ok_pj(x) {
                    return bad(format!("gates.{k} = {x} must be a finite energy >= 0"));
                }
            }
        }
        for (k, x) in [
            ("pe_pitch_um", self.pe_pitch_um),
            ("buffer_wire_mm", self.buffer_wire_mm),
            ("sram_mm2_per_mib", self.sram_mm2_per_mib),
            ("noc_scale", self.noc_scale),
        ] {
            if !ok_pj(x) {
                return bad(format!("{k} = {x} must be finite and >= 0"));
            }
        }
        Ok(())
    }

    /// Prices off-chip memory as the DRAM called `name` ([`DRAMS`]).
    pub fn choose_dram(&mut self, name: &str) -> Result<(), TableError> {
        let c = choice(DRAMS, "dram", name)?;
        self.figures
            .insert("dram_bit", fig(c.pj, c.node_nm, "pJ/bit", c.source));
        self.dram = c.name.to_string();
        Ok(())
    }

    /// Prices on-chip wires as the wire called `name` ([`WIRES`]).
    pub fn choose_wire(&mut self, name: &str) -> Result<(), TableError> {
        let c = choice(WIRES, "wire", name)?;
        let f = wire_fig(c.pj, c.node_nm, "pJ/(bit mm)", c.source);
        self.figures.insert("wire_bit_mm", f);
        self.wire = c.name.to_string();
        Ok(())
    }

    /// What every report states the energies rest on: the node, the off-chip memory, the
    /// wire's swing, the time-dependent term, each at the node.
    pub fn basis(&self) -> String {
        let k = self.gate_factor();
        let gates = self.gates.as_ref().map_or(String::new(), |g| {
            format!(
                "; the PE ({}) at gate level: {:.3} pJ per MAC, {:.3} / {:.3} per register \
                 read / write, {:.3} per PE-cycle ({})",
                g.module,
                g.pe_mac * k,
                g.pe_rf_read * k,
                g.pe_rf_write * k,
                g.pe_cycle * k,
                g.source
            ) + &g.row.as_ref().map_or(String::new(), |r| {
                format!(
                    "; the row engine at gate level: its arithmetic {:.3} pJ and its control \
                     {:.3} pJ per row-cycle, {:.3} / {:.3} per P-bank read / write",
                    r.softmax_cycle * k,
                    r.control_cycle * k,
                    r.p_read * k,
                    r.p_write * k
                )
            })
        });
        let static_pj = match &self.gates {
            Some(g) => g.pe_cycle * k,
            None => self.at_node("static_pe_cycle"),
        };
        format!(
            "{} nm; DRAM {} ({} pJ/bit); {} wires ({:.4} pJ/(bit mm)); clock and leakage {:.3} pJ \
             per PE-cycle",
            self.node_nm,
            self.dram,
            self.at_node("dram_bit"),
            self.wire,
            self.at_node("wire_bit_mm"),
            static_pj
        ) + &gates
    }

    /// The factor that takes the gate-level figures to the table's node (1 without them).
    fn gate_factor(&self) -> f64 {
        self.gates.as_ref().map_or(1.0, |g| {
            Scaling::Logic
                .factor(g.node_nm, self.node_nm)
                .expect("validated table")
        })
    }

    /// A figure at the target node (pJ per its unit).
    pub fn at_node(&self, key: &str) -> f64 {
        let f = &self.figures[key];
        f.pj * f
            .scaling
            .factor(f.node_nm, self.node_nm)
            .expect("validated table")
    }

    /// (read, write) pJ per 64-bit access of storage of `bytes`, at the target node: each
    /// point scaled from its node, then interpolated log-log in capacity.
    pub fn storage_pj(&self, bytes: u64) -> (f64, f64) {
        let pts = |f: fn(&StoragePoint) -> f64| -> Vec<(f64, f64)> {
            self.storage
                .iter()
                .map(|s| {
                    let k = s
                        .scaling
                        .factor(s.node_nm, self.node_nm)
                        .expect("validated table");
                    (s.bytes as f64, f(s) * k)
                })
                .collect()
        };
        let x = bytes.max(1) as f64;
        (
            loglog(&pts(|s| s.read_pj), x),
            loglog(&pts(|s| s.write_pj), x),
        )
    }

    /// (read, write) pJ of one `bits`-wide access of an SRAM macro of `bytes`, at the target
    /// node: the 64-bit figure with CACTI's fixed part, `E64 · (f + (1 − f) · bits/64)`.
    pub fn sram_access_pj(&self, bytes: u64, bits: u64) -> (f64, f64) {
        let (r64, w64) = self.storage_pj(bytes);
        let share = &self.sram_fixed_share;
        let w = bits as f64 / 64.0;
        (
            r64 * (share.read + (1.0 - share.read) * w),
            w64 * (share.write + (1.0 - share.write) * w),
        )
    }

    /// Leakage of `bytes` of SRAM macros per cycle at `clock_mhz` (pJ), at the target node.
    pub fn sram_leak_pj_per_cycle(&self, bytes: u64, clock_mhz: f64) -> f64 {
        if bytes == 0 {
            return 0.0;
        }
        // Geometries come from validated configurations, whose clock is positive and finite.
        debug_assert!(
            clock_mhz.is_finite() && clock_mhz > 0.0,
            "clock {clock_mhz} MHz"
        );
        let mib = bytes as f64 / (1u64 << 20) as f64;
        // µW · MiB / MHz = 1e-6 W / 1e6 Hz = 1e-12 J = 1 pJ.
        self.at_node("sram_leak") * mib / clock_mhz
    }

    /// A planar GLB's mean distance to the array when the design gives none (mm): its banks
    /// tile a square of `sram_mm2_per_mib` per MiB, read at the middle of one edge, so the
    /// mean Manhattan distance to a bank is 3/4 of the side.
    pub fn glb_wire_mm(&self, bytes: u64) -> f64 {
        let mib = bytes as f64 / (1u64 << 20) as f64;
        0.75 * (mib * self.sram_mm2_per_mib).sqrt()
    }

    /// Energy by component of a run with activity `a` on a design of geometry `g`.
    pub fn breakdown(&self, a: &Activity, g: &Geometry) -> Breakdown {
        let e = |k: &str| self.at_node(k);
        let n = |x: u64| x as f64;
        let (rf_r, rf_w) = self.storage_pj(g.pe_rf_bytes);
        let (land_r, land_w) = self.storage_pj(g.landing_bank_bytes);
        let (st_r, st_w) = self.storage_pj(g.staging_bank_bytes);
        // A row's update after a block: the block max times C, the new max (a ceil and a
        // compare), the rescale exponent (a subtract), l's rescale (an exponent add) and new
        // sum (an add), and the reduction tree's cols − 1 adds of the local sums.
        let row_update = e("fp32_mul")
            + (3.0 + (g.cols.max(1) - 1) as f64) * e("fp32_add")
            + 2.0 * e("int32_add");
        // The row's S and P storage: an SRAM access has CACTI's fixed part; one of a register
        // array costs w/64 of the 64-bit figure.
        let (s_bits, p_bits) = (g.s_access_bits, g.p_access_bits);
        let access = |bits: u64| match g.buffer {
            _ if g.scratch => (land_r * n(bits) / 64.0, 0.0),
            Some(_) => self.sram_access_pj(g.p_bytes, bits),
            None => {
                let (r, w) = self.storage_pj(g.p_bytes);
                (r * n(bits) / 64.0, w * n(bits) / 64.0)
            }
        };
        let ((p_r, p_w), (s_r, s_w)) = (access(p_bits), access(s_bits));
        let p_pj = n(a.p_reads) * p_r + n(a.p_writes) * p_w;
        let s_pj = n(a.s_reads) * s_r + n(a.s_writes) * s_w;
        let buffer_bits = p_bits * (a.p_reads + a.p_writes) + s_bits * (a.s_reads + a.s_writes);
        let scratch_pj = if g.scratch { p_pj + s_pj } else { 0.0 };
        let row_gates = self.gates.as_ref().and_then(|gf| gf.row.as_ref());
        let k_gates = self.gate_factor();
        let (p_registers, sram, buffer_transport) = match g.buffer {
            _ if g.scratch => (0.0, 0.0, 0.0),
            None => match row_gates {
                // A register design's P bank, as the gate-level row measured it.
                Some(r) => (
                    (n(a.p_reads) * r.p_read + n(a.p_writes) * r.p_write) * k_gates + s_pj,
                    0.0,
                    0.0,
                ),
                None => (p_pj + s_pj, 0.0, 0.0),
            },
            Some(Placement::Planar) => (
                0.0,
                p_pj + s_pj,
                n(buffer_bits) * self.buffer_wire_mm * e("wire_bit_mm"),
            ),
            Some(Placement::Stacked) => (0.0, p_pj + s_pj, n(buffer_bits) * e("bond_bit")),
        };
        // The GLB: each beat is `beat / word_bits` bank accesses of `word_bits`.
        let (glb, glb_transport) = match &g.glb {
            None => (0.0, 0.0),
            Some(b) => {
                let (r, w) = self.sram_access_pj(b.bank_bytes, b.word_bits);
                let words = |bits: u64| n(bits) / b.word_bits.max(1) as f64;
                let bits = n(a.glb_read_bits + a.glb_write_bits);
                let per_bit = match b.placement {
                    Placement::Stacked => e("bond_bit"),
                    Placement::Planar => {
                        b.wire_mm.unwrap_or_else(|| self.glb_wire_mm(b.bytes)) * e("wire_bit_mm")
                    }
                };
                (
                    words(a.glb_read_bits) * r + words(a.glb_write_bits) * w,
                    bits * per_bit,
                )
            }
        };
        let (noc, noc_links) = match &g.noc {
            None => (0.0, 0.0),
            Some(c) => {
                // A FIFO access of a flit: the register array's 64-bit figure, scaled to the
                // flit. A switch traversal: the flit across a 5-port crossbar, whose side is
                // 5 · flit_bits wire tracks (Dally and Towles 2004, §17.2) at the node's
                // metal pitch (0.14 um at 45 nm, scaled with the node); a bit crosses half
                // of it in and half out.
                let (fr, fw) = self.storage_pj(c.fifo_bytes);
                let flit = n(c.flit_bits) / 64.0;
                let xbar_mm = 5.0 * n(c.flit_bits) * 0.14e-3 * self.node_nm / 45.0;
                let switch = n(c.flit_bits) * xbar_mm * e("wire_bit_mm");
                let (sr, sw) = self.storage_pj(c.src_bytes);
                let src = n(a.noc_src_reads) * (sr + sw) * n(c.src_word_bits) / 64.0;
                (
                    ((n(a.noc_fifo_writes) * fw + n(a.noc_fifo_reads) * fr) * flit
                        + n(a.noc_fifo_reads) * switch
                        + src)
                        * self.noc_scale,
                    n(a.noc_hop_bits) * n(c.link_pitches) * self.pe_pitch_um / 1000.0
                        * e("wire_bit_mm")
                        * self.noc_scale,
                )
            }
        };
        Breakdown {
            noc,
            noc_links,
            glb,
            glb_transport,
            // QK and PV have equal MACs: with integer QKᵀ, QK's half are integer.
            mac: match &self.gates {
                Some(gf) => n(a.macs) * gf.pe_mac * k_gates,
                None => {
                    let int = match g.qk_int_bits {
                        8 => Some(e("int8_mul")),
                        4 => Some(e("int4_mul")),
                        _ => None,
                    };
                    let product = match g.operand_bits {
                        8 => e("fp8_mul"),
                        _ => e("fp16_mul"),
                    };
                    let fp = product + e("fp32_add");
                    match int {
                        Some(mul) => n(a.macs) / 2.0 * (fp + mul + e("int32_add")),
                        None => n(a.macs) * fp,
                    }
                }
            },
            pe_registers: match &self.gates {
                Some(gf) => {
                    (n(a.rf_reads) * gf.pe_rf_read + n(a.rf_writes) * gf.pe_rf_write) * k_gates
                }
                None => (n(a.rf_reads) * rf_r + n(a.rf_writes) * rf_w) * 32.0 / 64.0,
            },
            p_registers,
            sram,
            buffer_transport,
            softmax: match row_gates {
                // Per row and cycle, as measured (`RowGates`).
                Some(r) => n(a.cycles) * n(g.rows) * r.softmax_cycle * k_gates,
                None => {
                    n(a.max_ops) * e("int32_add")
                        + n(a.exp_ops) * (e("fp32_mul") + e("exp2") + 2.0 * e("fp32_add"))
                        + n(a.row_updates) * row_update
                        + n(a.recip_ops) * e("recip")
                        + n(a.norm_ops) * e("fp32_mul")
                }
            },
            landing: (n(a.land_read_bits) * land_r + n(a.land_write_bits) * land_w) / 64.0
                + scratch_pj,
            staging: n(a.staging_bits) * (st_r + st_w) / 64.0,
            broadcast: n(a.bcast_bit_hops) * self.pe_pitch_um / 1000.0 * e("wire_bit_mm"),
            vertical_links: n(a.vlink_bits) * e("bond_bit"),
            dram: n(8 * a.dram_bytes) * e("dram_bit"),
            static_energy: n(a.cycles)
                * match &self.gates {
                    Some(gf) => {
                        (n(g.pes) * gf.pe_cycle
                            + n(g.rows) * gf.row.as_ref().map_or(0.0, |r| r.control_cycle))
                            * k_gates
                    }
                    None => n(g.pes) * e("static_pe_cycle"),
                },
            leakage: n(a.cycles) * self.sram_leak_pj_per_cycle(g.sram_bytes, g.clock_mhz),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scaling_follows_the_fits() {
        // The fits' ratios at 0.8 V: at listed nodes hwcomponents' tech_node_energy(to, 45e-9)
        // gives the same; between nodes (40 nm) ours interpolates the fit linearly.
        for (nm, want) in [
            (45.0, 1.0),
            (40.0, 0.869),
            (32.0, 0.659),
            (16.0, 0.1735),
            (7.0, 0.0943),
            (5.0, 0.0797),
            (130.0, 3.068),
        ] {
            let got = scale(45.0, nm).unwrap();
            assert!(
                (got - want).abs() < 0.001 * want.max(1.0),
                "{nm} nm: {got} vs {want}"
            );
        }
        assert!(scale(45.0, 0.5).is_err() && scale(200.0, 45.0).is_err());
        assert!(scale(f64::NAN, 45.0).is_err());
    }

    #[test]
    fn sram_and_wire_scale_more_slowly_than_logic() {
        // SRAM: the logic fits down to 22 nm, then the square root of the node (Accelergy's
        // CACTI plug-in): 45 -> 7 nm is 0.294 x sqrt(7 / 22) = 0.166, against logic's 0.094.
        for nm in [45.0, 32.0, 22.0] {
            assert_eq!(scale_sram(45.0, nm), scale(45.0, nm));
        }
        let sram7 = scale_sram(45.0, 7.0).unwrap();
        let want = scale(45.0, 22.0).unwrap() * (7.0f64 / 22.0).sqrt();
        assert!((sram7 - want).abs() < 1e-12 && (sram7 - 0.166).abs() < 0.001);
        assert!(sram7 > scale(45.0, 7.0).unwrap());
        // Wire per mm: Vdd^2, 0.46 at 7 nm (Villa et al. SC14), 1 down to 28 nm, flat beyond.
        assert_eq!(scale_wire(45.0, 7.0), Ok(0.46));
        assert_eq!(scale_wire(45.0, 28.0), Ok(1.0));
        assert!((scale_wire(45.0, 12.0).unwrap() - (0.62 + 0.5 * (0.75 - 0.62))).abs() < 1e-12);
        assert_eq!(scale_wire(45.0, 130.0), Ok(1.0));
        assert_eq!(scale_wire(45.0, 3.0), Ok(0.46));
        assert!(scale_wire(45.0, 0.5).is_err() && scale_sram(45.0, 200.0).is_err());
        // Interfaces do not scale; each class answers through Scaling::factor.
        assert_eq!(Scaling::Interface.factor(45.0, 7.0), Ok(1.0));
        assert_eq!(Scaling::Sram.factor(45.0, 7.0), Ok(sram7));
        for s in [
            Scaling::Logic,
            Scaling::Sram,
            Scaling::Wire,
            Scaling::Interface,
        ] {
            assert_eq!(Scaling::parse(s.name()), Some(s));
        }
    }

    #[test]
    fn sram_accesses_have_a_fixed_part_and_registers_do_not() {
        let t = EnergyTable::default();
        let (r64, w64) = t.storage_pj(64 << 10);
        assert_eq!(t.sram_access_pj(64 << 10, 64), (r64, w64));
        let (r16, w16) = t.sram_access_pj(64 << 10, 16);
        assert!(
            (r16 / (r64 * 16.0 / 64.0) - 2.47).abs() < 0.01,
            "a 16-bit read: 2.47x w/64"
        );
        assert!((w16 / (w64 * 16.0 / 64.0) - 1.93).abs() < 0.01);
        let (r512, _) = t.sram_access_pj(64 << 10, 512);
        assert!(
            (r512 / (r64 * 8.0) - 0.57125).abs() < 1e-9,
            "a 512-bit read: 0.57x"
        );
        // A share outside 0..=1 is refused.
        let bad = EnergyTable {
            sram_fixed_share: FixedShare {
                read: 1.5,
                ..t.sram_fixed_share.clone()
            },
            ..t.clone()
        };
        assert!(bad
            .validate()
            .unwrap_err()
            .0
            .contains("sram_fixed_share.read"));
    }

    #[test]
    fn storage_curve_interpolates_between_its_points() {
        let t = EnergyTable::default();
        t.validate().unwrap();
        // On a point: its figure (45 nm points at 45 nm).
        assert_eq!(t.storage_pj(8 << 10), (6.14, 7.88));
        // Between points: log-log, so 16 KB is the geometric mean of 8 and 32 KB.
        let (r, _) = t.storage_pj(16 << 10);
        assert!((r - (6.14f64 * 17.04).sqrt()).abs() < 1e-9);
        // Beyond the ends: flat; and monotone in capacity over the default curve.
        assert_eq!(t.storage_pj(1 << 30), t.storage_pj(4 << 20));
        let mut last = 0.0;
        for b in [1u64, 4, 64, 256, 4096, 8192, 1 << 16, 1 << 20, 8 << 20] {
            let (r, w) = t.storage_pj(b);
            assert!(r >= last && w > 0.0, "{b} B");
            last = r;
        }
    }

    #[test]
    fn breakdown_is_the_sum_of_counts_times_figures() {
        let t = EnergyTable {
            node_nm: 16.0,
            ..EnergyTable::default()
        };
        let a = Activity {
            cycles: 10,
            macs: 1000,
            rf_reads: 7,
            exp_ops: 3,
            dram_bytes: 64,
            vlink_bits: 100,
            bcast_bit_hops: 2000,
            ..Activity::default()
        };
        let g = Geometry {
            rows: 4,
            pes: 16,
            qk_int_bits: 0,
            operand_bits: 16,
            cols: 4,
            landing_bank_bytes: 512,
            staging_bank_bytes: 256,
            pe_rf_bytes: 256,
            p_bytes: 128,
            buffer: None,
            scratch: false,
            s_access_bits: 32,
            p_access_bits: 16,
            sram_bytes: 0,
            clock_mhz: 1000.0,
            glb: None,
            noc: None,
        };
        let b = t.breakdown(&a, &g);
        let k = scale(45.0, 16.0).unwrap();
        assert!((b.mac - 1000.0 * (1.1 + 0.9) * k).abs() < 1e-9);
        // Integer QKᵀ: QK's half of the MACs are an integer multiply and a 32-bit add.
        for (bits, mul) in [(8, 0.2), (4, 0.05)] {
            let bi = t.breakdown(
                &a,
                &Geometry {
                    qk_int_bits: bits,
                    ..g
                },
            );
            assert!((bi.mac - 500.0 * (1.1 + 0.9 + mul + 0.1) * k).abs() < 1e-9);
        }
        // FP8 operands: the product is priced at fp8_mul, the accumulation as before.
        let b8 = t.breakdown(
            &a,
            &Geometry {
                operand_bits: 8,
                ..g
            },
        );
        assert!((b8.mac - 1000.0 * (0.22 + 0.9) * k).abs() < 1e-9);
        assert!(b8.mac < b.mac);
        assert!((b.softmax - 3.0 * (3.7 + 4.6 + 1.8) * k).abs() < 1e-9);
        // Interfaces do not scale.
        assert!((b.dram - 512.0 * 3.97).abs() < 1e-9);
        assert!((b.vertical_links - 100.0 * 0.05).abs() < 1e-12);
        let k_wire = scale_wire(45.0, 16.0).unwrap();
        assert!((b.broadcast - 2000.0 * 0.05 * 0.0404 * k_wire).abs() < 1e-9);
        assert_eq!(b.leakage, 0.0, "no SRAM macros");
        // The PEs' clock and leakage, every cycle, a logic figure.
        assert!((b.static_energy - 10.0 * 16.0 * 1.50 * k).abs() < 1e-9);
        assert_eq!((b.sram, b.p_registers, b.buffer_transport), (0.0, 0.0, 0.0));
        let sum: f64 = b.components().iter().map(|c| c.1).sum();
        assert_eq!(b.total(), sum);
        // The same activity through a stacked buffer: the S/P accesses become SRAM and bonds.
        let a2 = Activity {
            p_reads: 10,
            s_writes: 4,
            ..a
        };
        let sram_g = Geometry {
            buffer: Some(Placement::Stacked),
            scratch: false,
            sram_bytes: 4 << 20,
            ..g
        };
        let stacked = t.breakdown(&a2, &sram_g);
        assert!(stacked.sram > 0.0 && stacked.p_registers == 0.0);
        assert!((stacked.buffer_transport - (160.0 + 128.0) * 0.05).abs() < 1e-12);
        // An SRAM access has CACTI's fixed part: a 16-bit P read costs 0.49 + 0.51 / 4 of the
        // 64-bit read, a 32-bit S write 0.31 + 0.69 / 2 of the 64-bit write.
        let (r64, w64) = t.storage_pj(128);
        let want = 10.0 * r64 * (0.49 + 0.51 / 4.0) + 4.0 * w64 * (0.31 + 0.69 / 2.0);
        assert!((stacked.sram - want).abs() < 1e-9 * want);
        // 4 MiB of SRAM leaks 25 uW per MiB at 45 nm, x the SRAM scaling to 16 nm, for 10
        // cycles of 1 ns.
        let leak = 10.0 * 25.0 * 4.0 / 1000.0 * scale_sram(45.0, 16.0).unwrap();
        assert!(
            (stacked.leakage - leak).abs() < 1e-12,
            "{}",
            stacked.leakage
        );
    }

    /// The GLB: each beat is beat / word_bits accesses of a bank of its size with CACTI's
    /// fixed part, plus a bond (stacked) or wire (planar, by default 3/4 of the side of the
    /// square its banks tile) per bit.
    #[test]
    fn glb_accesses_and_transport() {
        let t = EnergyTable::default();
        let a = Activity {
            glb_read_bits: 5120,
            glb_write_bits: 512,
            ..Activity::default()
        };
        let glb = GlbGeometry {
            bytes: 4 << 20,
            bank_bytes: 128 << 10,
            word_bits: 128,
            placement: Placement::Stacked,
            wire_mm: None,
        };
        let g = Geometry {
            rows: 4,
            pes: 1,
            qk_int_bits: 0,
            operand_bits: 16,
            cols: 1,
            landing_bank_bytes: 64,
            staging_bank_bytes: 64,
            pe_rf_bytes: 64,
            p_bytes: 64,
            buffer: None,
            scratch: false,
            s_access_bits: 32,
            p_access_bits: 16,
            sram_bytes: 0,
            clock_mhz: 1000.0,
            glb: Some(glb),
            noc: None,
        };
        let b = t.breakdown(&a, &g);
        let (r, w) = t.sram_access_pj(128 << 10, 128);
        assert!((b.glb - (40.0 * r + 4.0 * w)).abs() < 1e-9);
        assert!((b.glb_transport - 5632.0 * 0.05).abs() < 1e-9);
        // Planar: 4 MiB of 3.4 mm² per MiB is a 3.69 mm square: 2.77 mm on average.
        assert!((t.glb_wire_mm(4 << 20) - 0.75 * 13.6f64.sqrt()).abs() < 1e-12);
        let planar = |wire_mm| Geometry {
            glb: Some(GlbGeometry {
                placement: Placement::Planar,
                wire_mm,
                ..glb
            }),
            ..g
        };
        let derived = t.breakdown(&a, &planar(None));
        let per_bit = t.glb_wire_mm(4 << 20) * t.at_node("wire_bit_mm");
        assert!((derived.glb_transport - 5632.0 * per_bit).abs() < 1e-9);
        let given = t.breakdown(&a, &planar(Some(1.0)));
        assert!((given.glb_transport - 5632.0 * t.at_node("wire_bit_mm")).abs() < 1e-9);
        assert_eq!(given.glb, b.glb);
    }
}
