//! Energy of a run from the core's own counters and the energy table (`kernels::energy`): the
//! design's geometry (what each counter is priced at), a user table in TOML overriding the
//! default, and the report `sim` and `compare` print and write.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{bail, Context, Result};
use hdl::config::CoreConfig;
use hdl::mem::glb::GlbPlacement;
use kernels::energy::{
    Activity, Breakdown, EnergyTable, Geometry, GlbGeometry, Placement, Scaling, StoragePoint, KEYS,
};
use serde::{Deserialize, Serialize};

use crate::report::real;

/// A user's energy table: any subset of the default's figures, storage points and knobs.
#[derive(Deserialize, Debug, Default)]
#[serde(deny_unknown_fields)]
struct TableFile {
    node_nm: Option<f64>,
    /// The off-chip memory by name (`kernels::energy::DRAMS`).
    dram: Option<String>,
    /// The on-chip wire by name (`kernels::energy::WIRES`).
    wire: Option<String>,
    pe_pitch_um: Option<f64>,
    static_pj_per_pe_cycle: Option<f64>,
    buffer_wire_mm: Option<f64>,
    sram_mm2_per_mib: Option<f64>,
    /// noc2d's router and link energy, times this.
    noc_scale: Option<f64>,
    sram_fixed_share: Option<ShareFile>,
    #[serde(default)]
    figures: BTreeMap<String, FigureFile>,
    #[serde(default)]
    storage: Vec<StorageFile>,
    /// A PE measured at gate level (`regflash power`).
    gates: Option<GatesFile>,
}

/// The `[gates]` section `regflash power` writes.
#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields)]
struct GatesFile {
    node_nm: f64,
    module: String,
    pe_mac: f64,
    pe_rf_read: f64,
    pe_rf_write: f64,
    pe_cycle: f64,
    /// The row engine (`regflash power`'s row block), all or none of these.
    row_softmax_cycle: Option<f64>,
    row_p_read: Option<f64>,
    row_p_write: Option<f64>,
    row_control_cycle: Option<f64>,
    source: Option<String>,
}

#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields)]
struct FigureFile {
    pj: f64,
    /// The node the figure is at; the default figure's node when absent.
    node_nm: Option<f64>,
    /// How it scales (`logic`, `sram`, `wire`, `none`); the default figure's when absent, and
    /// `logic` for an interface figure given a node.
    scaling: Option<String>,
    source: Option<String>,
}

#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields)]
struct ShareFile {
    read: f64,
    write: f64,
    source: Option<String>,
}

/// The scaling class called `name`, or an error naming the classes.
fn scaling_of(name: &str, origin: &str, what: &str) -> Result<Scaling> {
    Scaling::parse(name).with_context(|| {
        format!(
            "energy table {origin}: {what}: scaling = {name:?} is not a class; use logic, sram, \
             wire or none"
        )
    })
}

#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields)]
struct StorageFile {
    bytes: u64,
    read_pj: f64,
    write_pj: f64,
    node_nm: f64,
    /// `sram` (the default: a macro) or `logic` (a register array).
    scaling: Option<String>,
    source: Option<String>,
}

/// The default table with the TOML `text` (from `origin`, for messages and sources) laid
/// over it: figures and knobs replace the default's, storage points replace the point of the
/// same capacity or join the curve. Unknown keys and figures are refused.
pub fn table_from_toml(text: &str, origin: &str) -> Result<EnergyTable> {
    let file: TableFile =
        toml::from_str(text).map_err(|e| anyhow::anyhow!("energy table {origin}: {e}"))?;
    let mut t = EnergyTable::default();
    if let Some(x) = file.node_nm {
        t.node_nm = x;
    }
    if let Some(x) = file.pe_pitch_um {
        t.pe_pitch_um = x;
    }
    if let Some(x) = file.buffer_wire_mm {
        t.buffer_wire_mm = x;
    }
    if let Some(x) = file.sram_mm2_per_mib {
        t.sram_mm2_per_mib = x;
    }
    if let Some(x) = file.noc_scale {
        t.noc_scale = x;
    }
    if let Some(x) = file.sram_fixed_share {
        t.sram_fixed_share = kernels::energy::FixedShare {
            read: x.read,
            write: x.write,
            source: x.source.unwrap_or_else(|| format!("user table {origin}")),
        };
    }
    let named = |e: kernels::energy::TableError| anyhow::anyhow!("energy table {origin}: {e}");
    for (key, by_name, figure) in [
        ("dram", &file.dram, "dram_bit"),
        ("wire", &file.wire, "wire_bit_mm"),
    ] {
        if by_name.is_some() && file.figures.contains_key(figure) {
            bail!(
                "energy table {origin}: both `{key}` and [figures.{figure}] price the same \
                 thing; give one"
            );
        }
    }
    if let Some(name) = &file.dram {
        t.choose_dram(name).map_err(named)?;
    }
    if let Some(name) = &file.wire {
        t.choose_wire(name).map_err(named)?;
    }
    // The knob is the static figure at the table's node (so not scaled).
    if let Some(x) = file.static_pj_per_pe_cycle {
        if file.figures.contains_key("static_pe_cycle") {
            bail!(
                "energy table {origin}: both static_pj_per_pe_cycle and \
                 [figures.static_pe_cycle] price the PEs' clock and leakage; give one"
            );
        }
        let f = t
            .figures
            .get_mut("static_pe_cycle")
            .expect("a default figure");
        (f.pj, f.node_nm, f.scaling) = (x, t.node_nm, Scaling::Logic);
        f.source = format!("user table {origin}, at its node");
    }
    for (k, f) in file.figures {
        match k.as_str() {
            "dram_bit" => t.dram = format!("from {origin}"),
            "wire_bit_mm" => t.wire = format!("from {origin}"),
            _ => {}
        }
        let Some(fig) = t.figures.get_mut(k.as_str()) else {
            let known: Vec<&str> = KEYS.iter().map(|(n, _)| *n).collect();
            bail!(
                "energy table {origin}: unknown figure `{k}`; the figures are {}",
                known.join(", ")
            );
        };
        fig.pj = f.pj;
        if let Some(n) = f.node_nm {
            fig.node_nm = n;
            if fig.scaling == Scaling::Interface {
                fig.scaling = Scaling::Logic;
            }
        }
        if let Some(name) = &f.scaling {
            fig.scaling = scaling_of(name, origin, &format!("figure `{k}`"))?;
        }
        fig.source = f.source.unwrap_or_else(|| format!("user table {origin}"));
    }
    let mut seen = std::collections::BTreeSet::new();
    for s in file.storage {
        if !seen.insert(s.bytes) {
            bail!(
                "energy table {origin}: two [[storage]] points of {} bytes; give each capacity once",
                s.bytes
            );
        }
        // Absent, the class is that of the point it replaces (the 4-byte register is logic),
        // or SRAM for a new point.
        let scaling = match &s.scaling {
            Some(name) => scaling_of(name, origin, &format!("[[storage]] {} B", s.bytes))?,
            None => t
                .storage
                .iter()
                .find(|p| p.bytes == s.bytes)
                .map_or(Scaling::Sram, |p| p.scaling),
        };
        let point = StoragePoint {
            bytes: s.bytes,
            read_pj: s.read_pj,
            write_pj: s.write_pj,
            node_nm: s.node_nm,
            scaling,
            source: s.source.unwrap_or_else(|| format!("user table {origin}")),
        };
        match t.storage.iter_mut().find(|p| p.bytes == s.bytes) {
            Some(p) => *p = point,
            None => t.storage.push(point),
        }
    }
    t.storage.sort_by_key(|p| p.bytes);
    if let Some(g) = file.gates {
        let row = match (
            g.row_softmax_cycle,
            g.row_p_read,
            g.row_p_write,
            g.row_control_cycle,
        ) {
            (Some(softmax_cycle), Some(p_read), Some(p_write), Some(control_cycle)) => {
                Some(kernels::energy::RowGates {
                    softmax_cycle,
                    p_read,
                    p_write,
                    control_cycle,
                })
            }
            (None, None, None, None) => None,
            _ => bail!(
                "energy table {origin}: [gates] gives some of the row engine's figures \
                 (row_softmax_cycle, row_p_read, row_p_write, row_control_cycle) but not all: \
                 give all four or none"
            ),
        };
        t.gates = Some(kernels::energy::GateFigures {
            row,
            node_nm: g.node_nm,
            pe_mac: g.pe_mac,
            pe_rf_read: g.pe_rf_read,
            pe_rf_write: g.pe_rf_write,
            pe_cycle: g.pe_cycle,
            module: g.module,
            source: g.source.unwrap_or_else(|| format!("user table {origin}")),
        });
    }
    t.validate()
        .map_err(|e| anyhow::anyhow!("energy table {origin}: {e}"))?;
    Ok(t)
}

/// The table `--energy` names, or the default; `dram` (`--dram`) names the off-chip memory
/// over the table's.
pub fn load_table(path: Option<&Path>, dram: Option<&str>) -> Result<EnergyTable> {
    let t = match path {
        None => EnergyTable::default(),
        Some(p) => {
            let text = std::fs::read_to_string(p)
                .with_context(|| format!("cannot read the energy table {}", p.display()))?;
            table_from_toml(&text, &p.display().to_string())?
        }
    };
    with_dram(t, dram)
}

/// `t` with its off-chip memory the DRAM `dram` names (`--dram`), if any.
pub fn with_dram(mut t: EnergyTable, dram: Option<&str>) -> Result<EnergyTable> {
    if let Some(name) = dram {
        if t.dram.starts_with("from ") {
            bail!(
                "--dram {name} and the energy table's own [figures.dram_bit] ({}) price the same \
                 thing; drop one",
                t.dram
            );
        }
        t.choose_dram(name)
            .map_err(|e| anyhow::anyhow!("--dram: {e}"))?;
    }
    Ok(t)
}

/// Bytes of the storage a P access touches: the P bank of a register design (2·a·Bc FP16
/// weights, addressed by query row and key, so rounded up to powers of two), or one of the
/// `banks` SRAM banks of buf2d's row (S and P arrays; `bytes` per row when the config names a
/// capacity).
pub fn row_storage_bytes(cfg: &CoreConfig) -> u64 {
    match cfg.variant.flow().sram_bank_bytes(&cfg.tile()) {
        Some(bytes) => bytes,
        None => {
            let a = (cfg.br / cfg.rows).max(1);
            let words = 1u64 << (hdl::addr_bits(a) + hdl::addr_bits(cfg.bc));
            2 * words * 2
        }
    }
}

/// What the counters of a run on `cfg` are priced at; `stacked`: buf2d's banks on a tier of
/// their own ("3-D buffered").
pub fn geometry(cfg: &CoreConfig, stacked: bool) -> Geometry {
    let mac_tiers = cfg.row().mac_tiers() as u64;
    let (s_access_bits, p_access_bits) = cfg.row().access_bits();
    let dma = cfg.dma();
    let beat_bytes = (dma.width / 8) as u64;
    // The largest of the Q, K and V landing banks (two slots each), and an O staging bank
    // (its rows' beats, the address fields rounded up to powers of two).
    let landing_bank_bytes = [dma.q, dma.k, dma.v]
        .iter()
        .map(|l| l.bank_depth() as u64 * beat_bytes)
        .max()
        .unwrap_or(beat_bytes);
    let staging_bank_bytes = (1u64 << (dma.o_local_row_bits() + dma.o_beat_bits())) * beat_bytes;
    Geometry {
        rows: cfg.rows as u64,
        pes: cfg.pes() as u64 * mac_tiers,
        qk_int_bits: cfg.qk_format.map_or(0, |f| f.bits()),
        operand_bits: cfg.row().elem_bits().0,
        cols: cfg.cols as u64,
        landing_bank_bytes,
        staging_bank_bytes,
        pe_rf_bytes: cfg.regs_per_pe as u64 * 4,
        p_bytes: row_storage_bytes(cfg),
        buffer: cfg.variant.plan().s_in_sram().then_some(if stacked {
            Placement::Stacked
        } else {
            Placement::Planar
        }),
        scratch: cfg.variant.plan().s_in_memory(),
        s_access_bits: s_access_bits as u64,
        p_access_bits: p_access_bits as u64,
        sram_bytes: sram_bytes(cfg),
        clock_mhz: cfg.clock_mhz,
        glb: cfg.glb.present().then(|| {
            let g = &cfg.glb;
            GlbGeometry {
                bytes: g.bytes,
                bank_bytes: g.bytes / g.banks as u64,
                word_bits: g.word_bits_for(cfg.mem_width) as u64,
                placement: match g.placement {
                    GlbPlacement::Stacked => Placement::Stacked,
                    GlbPlacement::Planar => Placement::Planar,
                },
                wire_mm: (g.wire_mm > 0.0).then_some(g.wire_mm),
            }
        }),
        noc: cfg.variant.noc().map(|n| {
            let word_bits = cfg.rows as u64 * cfg.row().elem_bits().0 as u64 + 1;
            kernels::energy::NocGeometry {
                flit_bits: n.flit_bits as u64,
                fifo_bytes: (n.buffer_depth as u64 * n.flit_bits as u64).div_ceil(8),
                link_pitches: cfg.cols as u64,
                // The P bank's words (two blocks), each a weight of every row and the slot.
                src_bytes: row_storage_bytes(cfg) / 2 * word_bits / 8,
                src_word_bits: word_bits,
            }
        }),
    }
}

/// Bytes of SRAM macros in `cfg`: buf2d's S and P arrays, every bank of every row (register
/// designs have none: their storage is flip-flops), and the global buffer.
pub fn sram_bytes(cfg: &CoreConfig) -> u64 {
    cfg.variant
        .flow()
        .sram_bank_bytes(&cfg.tile())
        .map_or(0, |b| b * (cfg.rows * cfg.variant.plan().sram.banks) as u64)
        + cfg.glb.bytes
}

/// The counters' activity; DMA bytes from the beats and the port width.
pub fn activity(counters: &BTreeMap<String, u64>, mem_width: u32) -> Activity {
    let c = |n: &str| counters.get(n).copied().unwrap_or(0);
    Activity {
        cycles: c("cycles"),
        macs: c("macs"),
        rf_reads: c("rf_reads"),
        rf_writes: c("rf_writes"),
        p_reads: c("p_buf_reads"),
        p_writes: c("p_buf_writes"),
        s_reads: c("s_buf_reads"),
        s_writes: c("s_buf_writes"),
        vlink_bits: c("vlink_bits"),
        bcast_bit_hops: c("bcast_bit_hops"),
        max_ops: c("max_ops"),
        exp_ops: c("exp_ops"),
        row_updates: c("row_updates"),
        recip_ops: c("recip_ops"),
        norm_ops: c("norm_ops"),
        land_read_bits: c("land_read_bits"),
        // Every beat from memory lands, and so does every GLB hit.
        land_write_bits: c("read_beats") * mem_width as u64 + c("glb_read_bits"),
        glb_read_bits: c("glb_read_bits"),
        glb_write_bits: c("glb_write_bits"),
        staging_bits: c("write_beats") * mem_width as u64,
        dram_bytes: (c("read_beats") + c("write_beats")) * (mem_width / 8) as u64,
        noc_fifo_writes: c("noc_fifo_writes"),
        noc_fifo_reads: c("noc_fifo_reads"),
        noc_hop_bits: c("noc_hop_bits"),
        noc_src_reads: c("noc_src_reads"),
    }
}

/// A run's energy: by component, the totals, the figures of merit, and the per-event prices
/// at the table's node that the components are made of (each component is Σ counter × price,
/// so the report alone reproduces it).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct EnergyReport {
    #[serde(serialize_with = "real", deserialize_with = "crate::report::de_real")]
    pub node_nm: f64,
    /// What the energies rest on: the node, the off-chip memory, the wire's swing, the
    /// PEs' clock and leakage (`EnergyTable::basis`).
    #[serde(default)]
    pub basis: String,
    /// pJ by component.
    pub components_pj: BTreeMap<String, f64>,
    #[serde(serialize_with = "real", deserialize_with = "crate::report::de_real")]
    pub total_pj: f64,
    /// total − dram: what the chip itself spends.
    #[serde(serialize_with = "real", deserialize_with = "crate::report::de_real")]
    pub on_chip_pj: f64,
    /// total / MACs performed (masked slots are not useful).
    #[serde(serialize_with = "real", deserialize_with = "crate::report::de_real")]
    pub pj_per_mac: f64,
    /// total / (heads × query rows).
    #[serde(serialize_with = "real", deserialize_with = "crate::report::de_real")]
    pub pj_per_token: f64,
    /// Useful operations (2 per MAC) per pJ: TOPS/W.
    #[serde(serialize_with = "real", deserialize_with = "crate::report::de_real")]
    pub tops_per_watt: f64,
    /// total / run time at the config's clock.
    #[serde(serialize_with = "real", deserialize_with = "crate::report::de_real")]
    pub average_power_w: f64,
    /// SRAM accesses (buf2d's arrays and the GLB's banks) / total.
    #[serde(serialize_with = "real", deserialize_with = "crate::report::de_real")]
    pub sram_share: f64,
    /// The same / on-chip energy.
    #[serde(serialize_with = "real", deserialize_with = "crate::report::de_real")]
    pub sram_share_on_chip: f64,
    /// pJ per event at the node: `mac`, `rf_read_32b`, `rf_write_32b`, `p_read`, `p_write`,
    /// `s_read`, `s_write` (an access of the bank's word: 16-bit P and 32-bit S, or buf2d's
    /// `buf2d.word_bits`; with a buffer's wire or bond crossing),
    /// `max_op`, `exp_op`, `row_update`, `recip_op`, `norm_op`, `land_read_bit`,
    /// `land_write_bit`, `staging_bit` (written and read), `bcast_bit_hop`, `vlink_bit`,
    /// `dram_byte`, `static_cycle` (the static term and the SRAM macros' leakage of one cycle),
    /// and noc2d's `noc_fifo_write`, `noc_fifo_read` (with its switch traversal),
    /// `noc_hop_bit` and `noc_src_word` (a source-bank word read and written; 0 elsewhere).
    /// A DMA byte moves 8 landing or staging bits as well.
    pub prices_pj: BTreeMap<String, f64>,
    /// The storage each price came from: PE register file, P bank or SRAM bank, landing and
    /// staging banks (bytes).
    pub pe_rf_bytes: u64,
    pub row_storage_bytes: u64,
    pub landing_bank_bytes: u64,
    pub staging_bank_bytes: u64,
    /// "registers", "sram" or "stacked sram".
    pub row_storage: String,
}

/// The per-event prices of `g` under `t`, found as the breakdown of one event of each kind
/// (so they are the breakdown's own arithmetic, not a second copy of it).
pub fn prices(t: &EnergyTable, g: &Geometry) -> BTreeMap<String, f64> {
    let one = |f: fn(&mut Activity)| {
        let mut a = Activity::default();
        f(&mut a);
        t.breakdown(&a, g).total()
    };
    type Event = (&'static str, fn(&mut Activity));
    let list: [Event; 25] = [
        ("mac", |a| a.macs = 1),
        ("rf_read_32b", |a| a.rf_reads = 1),
        ("rf_write_32b", |a| a.rf_writes = 1),
        ("p_read", |a| a.p_reads = 1),
        ("p_write", |a| a.p_writes = 1),
        ("s_read", |a| a.s_reads = 1),
        ("s_write", |a| a.s_writes = 1),
        ("max_op", |a| a.max_ops = 1),
        ("exp_op", |a| a.exp_ops = 1),
        ("row_update", |a| a.row_updates = 1),
        ("land_read_bit", |a| a.land_read_bits = 1),
        ("land_write_bit", |a| a.land_write_bits = 1),
        ("staging_bit", |a| a.staging_bits = 1),
        ("recip_op", |a| a.recip_ops = 1),
        ("norm_op", |a| a.norm_ops = 1),
        ("bcast_bit_hop", |a| a.bcast_bit_hops = 1),
        ("vlink_bit", |a| a.vlink_bits = 1),
        ("dram_byte", |a| a.dram_bytes = 1),
        // A hit's bit is read from the GLB and written into the landing buffer.
        ("glb_read_bit", |a| {
            a.glb_read_bits = 1;
            a.land_write_bits = 1;
        }),
        ("glb_write_bit", |a| a.glb_write_bits = 1),
        ("static_cycle", |a| a.cycles = 1),
        // noc2d: a flit into and out of a router's FIFO (the read with its switch
        // traversal), a flit bit over a link, a source-bank word read and written.
        ("noc_fifo_write", |a| a.noc_fifo_writes = 1),
        ("noc_fifo_read", |a| a.noc_fifo_reads = 1),
        ("noc_hop_bit", |a| a.noc_hop_bits = 1),
        ("noc_src_word", |a| a.noc_src_reads = 1),
    ];
    list.iter().map(|(n, f)| (n.to_string(), one(*f))).collect()
}

/// The energy report of a run on `cfg` with `counters`, `tokens` query rows over all heads.
pub fn report(
    t: &EnergyTable,
    cfg: &CoreConfig,
    counters: &BTreeMap<String, u64>,
    tokens: u64,
    stacked: bool,
) -> EnergyReport {
    let g = geometry(cfg, stacked);
    let a = activity(counters, cfg.mem_width);
    let b: Breakdown = t.breakdown(&a, &g);
    let total = b.total();
    let seconds = a.cycles as f64 / (cfg.clock_mhz * 1e6);
    EnergyReport {
        node_nm: t.node_nm,
        basis: t.basis(),
        components_pj: b
            .components()
            .iter()
            .map(|(n, e)| (n.to_string(), *e))
            .collect(),
        total_pj: total,
        on_chip_pj: total - b.dram,
        pj_per_mac: total / a.macs.max(1) as f64,
        pj_per_token: total / tokens.max(1) as f64,
        tops_per_watt: 2.0 * a.macs as f64 / total.max(f64::MIN_POSITIVE),
        average_power_w: total * 1e-12 / seconds.max(f64::MIN_POSITIVE),
        sram_share: (b.sram + b.glb) / total.max(f64::MIN_POSITIVE),
        sram_share_on_chip: (b.sram + b.glb) / (total - b.dram).max(f64::MIN_POSITIVE),
        prices_pj: prices(t, &g),
        pe_rf_bytes: g.pe_rf_bytes,
        row_storage_bytes: g.p_bytes,
        landing_bank_bytes: g.landing_bank_bytes,
        staging_bank_bytes: g.staging_bank_bytes,
        row_storage: match g.buffer {
            None => "registers",
            Some(Placement::Planar) => "sram",
            Some(Placement::Stacked) => "stacked sram",
        }
        .into(),
    }
}

impl EnergyReport {
    /// Two summary lines: the total and figures of merit, and the components that spend.
    pub fn summary(&self) -> String {
        let total = self.total_pj.max(f64::MIN_POSITIVE);
        let mut parts: Vec<(&String, f64)> = self
            .components_pj
            .iter()
            .filter(|(_, e)| **e > 0.0)
            .map(|(n, e)| (n, *e))
            .collect();
        parts.sort_by(|a, b| b.1.total_cmp(&a.1));
        let parts: Vec<String> = parts
            .iter()
            .map(|(n, e)| format!("{n} {:.1} %", 100.0 * e / total))
            .collect();
        format!(
            "  energy ({} nm): {:.3} uJ ({:.1} % on chip), {:.3} pJ per MAC, {:.1} nJ per token, \
             {:.2} TOPS/W, {:.3} W average\n  energy by component: {}\n  energy table: {}\n",
            self.node_nm,
            self.total_pj * 1e-6,
            100.0 * self.on_chip_pj / total,
            self.pj_per_mac,
            self.pj_per_token * 1e-3,
            self.tops_per_watt,
            self.average_power_w,
            parts.join(", "),
            self.basis
        )
    }
}
