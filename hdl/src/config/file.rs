//! Configuration files: TOML (and the JSON of reports) as a [`CoreConfig`].
//!
//! A file names an optional base preset and any keys; the variant's knobs sit in a section
//! named after it (`[buf2d]`, `[reg3d]`). Files written before the sections existed spell those
//! knobs as flat keys (`buf_bytes`, `tiers`, ...): they are read into the section, with a note
//! that says where the key lives now.

use anyhow::{bail, ensure, Result};
use serde::{Deserialize, Serialize};

use super::{CoreConfig, DEFAULT_TOP_NAME};
use crate::array::pe::Accumulate;
use crate::mem::dma::{MemIf, DEFAULT_AXI_ID_BITS, DEFAULT_AXI_OUTSTANDING};
use crate::mem::glb::{GlbParams, GlbPlacement};
use crate::softmax::Rescale;
use crate::variants::{BufParams, NocParams, RowParams, StackParams, Variant, VariantKind};

/// A configuration file: an optional base preset and any keys of [`CoreConfig`]. Also the
/// serialized form of a whole `CoreConfig` (every key, no preset, no flat variant keys).
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct ConfigFile {
    #[serde(skip_serializing_if = "Option::is_none")]
    preset: Option<String>,
    name: Option<String>,
    rows: Option<u32>,
    cols: Option<u32>,
    br: Option<u32>,
    bc: Option<u32>,
    head_dim: Option<u32>,
    regs_per_pe: Option<u32>,
    mul_latency: Option<u32>,
    add_latency: Option<u32>,
    fmul_latency: Option<u32>,
    exp_latency: Option<u32>,
    index_bits: Option<u32>,
    mem_width: Option<u32>,
    addr_bits: Option<u32>,
    max_outstanding: Option<u32>,
    clock_mhz: Option<f64>,
    top_name: Option<String>,
    mem_if: Option<MemIf>,
    axi_id_bits: Option<u32>,
    axi_outstanding: Option<u32>,
    variant: Option<VariantKind>,
    // The global buffer (written only when there is one).
    #[serde(skip_serializing_if = "Option::is_none")]
    glb_bytes: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    glb_banks: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    glb_word_bits: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    glb_ports: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    glb_macro: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    glb_placement: Option<GlbPlacement>,
    #[serde(skip_serializing_if = "Option::is_none")]
    glb_wire_mm: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    glb_spares: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    glb_spare_group: Option<u32>,
    // The online softmax's rescaling (written only when it is not the default, pow2).
    #[serde(skip_serializing_if = "Option::is_none")]
    rescale: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    lazy_threshold: Option<u32>,
    // The operand format (written only when it is not the default, fp16).
    #[serde(skip_serializing_if = "Option::is_none")]
    in_format: Option<String>,
    // Integer QKᵀ (written only when set).
    #[serde(skip_serializing_if = "Option::is_none")]
    qk_format: Option<String>,
    // Where MAC runs accumulate (written only when it is not the default, auto).
    #[serde(skip_serializing_if = "Option::is_none")]
    accumulate: Option<Accumulate>,
    // The older format's flat keys of the variants (read, never written).
    #[serde(skip_serializing)]
    buf_ports: Option<u32>,
    #[serde(skip_serializing)]
    buf_bytes: Option<u64>,
    #[serde(skip_serializing)]
    buf_macro: Option<bool>,
    #[serde(skip_serializing)]
    buf_word_bits: Option<u32>,
    #[serde(skip_serializing)]
    buf_banks: Option<u32>,
    #[serde(skip_serializing)]
    tiers: Option<u32>,
    #[serde(skip_serializing)]
    vlink_latency: Option<u32>,
    #[serde(skip_serializing)]
    vlink_bits: Option<u32>,
    // Tables last: TOML writes them after every plain key.
    #[serde(skip_serializing_if = "Option::is_none")]
    buf2d: Option<BufParams>,
    #[serde(skip_serializing_if = "Option::is_none")]
    reg3d: Option<StackParams>,
    #[serde(skip_serializing_if = "Option::is_none")]
    rowfused: Option<RowParams>,
    #[serde(skip_serializing_if = "Option::is_none")]
    noc2d: Option<NocParams>,
}

/// The variants' sections a file gives.
struct Sections {
    buf2d: Option<BufParams>,
    reg3d: Option<StackParams>,
    rowfused: Option<RowParams>,
    noc2d: Option<NocParams>,
}

/// The variants' knobs as flat keys, as files spelled them before the `[buf2d]` and `[reg3d]`
/// sections.
struct LegacyKeys {
    buf_ports: Option<u32>,
    buf_bytes: Option<u64>,
    buf_macro: Option<bool>,
    buf_word_bits: Option<u32>,
    buf_banks: Option<u32>,
    tiers: Option<u32>,
    vlink_latency: Option<u32>,
    vlink_bits: Option<u32>,
}

impl From<&CoreConfig> for ConfigFile {
    fn from(c: &CoreConfig) -> ConfigFile {
        let g = c.glb.present().then_some(c.glb);
        ConfigFile {
            preset: None,
            name: Some(c.name.clone()),
            rows: Some(c.rows),
            cols: Some(c.cols),
            br: Some(c.br),
            bc: Some(c.bc),
            head_dim: Some(c.head_dim),
            regs_per_pe: Some(c.regs_per_pe),
            mul_latency: Some(c.mul_latency),
            add_latency: Some(c.add_latency),
            fmul_latency: Some(c.fmul_latency),
            exp_latency: Some(c.exp_latency),
            index_bits: Some(c.index_bits),
            mem_width: Some(c.mem_width),
            addr_bits: Some(c.addr_bits),
            max_outstanding: Some(c.max_outstanding),
            clock_mhz: Some(c.clock_mhz),
            top_name: Some(c.top_name.clone()),
            mem_if: Some(c.mem_if),
            axi_id_bits: Some(c.axi_id_bits),
            axi_outstanding: Some(c.axi_outstanding),
            variant: Some(c.variant.kind()),
            glb_bytes: g.map(|g| g.bytes),
            glb_banks: g.map(|g| g.banks),
            glb_word_bits: g.map(|g| g.word_bits),
            glb_ports: g.map(|g| g.ports),
            glb_macro: g.map(|g| g.blackbox),
            glb_placement: g.map(|g| g.placement),
            glb_wire_mm: g.map(|g| g.wire_mm),
            glb_spares: g.filter(|g| g.spares > 0).map(|g| g.spares),
            glb_spare_group: g
                .filter(|g| g.spare_group != crate::variants::SPARE_GROUP)
                .map(|g| g.spare_group),
            rescale: (c.rescale != Rescale::Pow2).then(|| c.rescale.name().to_string()),
            lazy_threshold: match c.rescale {
                Rescale::Lazy { threshold } => Some(threshold as u32),
                Rescale::Pow2 => None,
            },
            in_format: (c.in_format != crate::format::Format::default())
                .then(|| crate::format::in_format_key(c.in_format).to_string()),
            qk_format: c.qk_format.map(|f| f.name().to_string()),
            accumulate: (c.accumulate != Accumulate::Auto).then_some(c.accumulate),
            buf_ports: None,
            buf_bytes: None,
            buf_macro: None,
            buf_word_bits: None,
            buf_banks: None,
            tiers: None,
            vlink_latency: None,
            vlink_bits: None,
            buf2d: c.variant.buf().copied(),
            reg3d: c.variant.stack().copied(),
            rowfused: c.variant.rowfused().copied(),
            noc2d: c.variant.noc().copied(),
        }
    }
}

impl From<CoreConfig> for ConfigFile {
    fn from(c: CoreConfig) -> ConfigFile {
        ConfigFile::from(&c)
    }
}

impl TryFrom<ConfigFile> for CoreConfig {
    type Error = anyhow::Error;
    fn try_from(f: ConfigFile) -> Result<CoreConfig> {
        Ok(f.resolve()?.0)
    }
}

impl ConfigFile {
    pub(super) fn parse(text: &str) -> Result<ConfigFile> {
        toml::from_str(text).map_err(|e| anyhow::anyhow!("{e}"))
    }

    /// The configuration, and notes on keys read from an older format.
    pub(super) fn resolve(self) -> Result<(CoreConfig, Vec<String>)> {
        let base = match &self.preset {
            Some(p) => Some(CoreConfig::preset(p)?),
            None => None,
        };
        let mut missing = vec![];
        macro_rules! take {
            ($key:ident) => {
                match (self.$key, &base) {
                    (Some(v), _) => v,
                    (None, Some(b)) => b.$key.clone(),
                    (None, None) => {
                        missing.push(stringify!($key));
                        Default::default()
                    }
                }
            };
        }
        // Keys added after the first presets: optional even without a base preset.
        macro_rules! take_or {
            ($key:ident, $default:expr) => {
                self.$key
                    .or(base.as_ref().map(|b| b.$key.clone()))
                    .unwrap_or_else(|| $default)
            };
        }
        let base_variant = base.as_ref().map(|b| b.variant);
        let (variant, notes) = resolve_variant(
            self.variant,
            base_variant,
            Sections {
                buf2d: self.buf2d,
                reg3d: self.reg3d,
                rowfused: self.rowfused,
                noc2d: self.noc2d,
            },
            &LegacyKeys {
                buf_ports: self.buf_ports,
                buf_bytes: self.buf_bytes,
                buf_macro: self.buf_macro,
                buf_word_bits: self.buf_word_bits,
                buf_banks: self.buf_banks,
                tiers: self.tiers,
                vlink_latency: self.vlink_latency,
                vlink_bits: self.vlink_bits,
            },
        )?;
        // The file's rescale keys over the base preset's strategy.
        let rescale = match (self.rescale.as_deref(), self.lazy_threshold) {
            (None, None) => base.as_ref().map_or(Rescale::Pow2, |b| b.rescale),
            (name, threshold) => {
                Rescale::from_keys(name.or(base.as_ref().map(|b| b.rescale.name())), threshold)?
            }
        };
        let in_format = match self.in_format.as_deref() {
            None => base
                .as_ref()
                .map_or(crate::format::Format::default(), |b| b.in_format),
            Some(key) => crate::format::in_format_from_key(key)?,
        };
        let qk_format = match self.qk_format.as_deref() {
            None => base.as_ref().and_then(|b| b.qk_format),
            Some(key) => Some(crate::format::qk_format_from_key(key)?),
        };
        let mut cfg = CoreConfig {
            accumulate: take_or!(accumulate, Accumulate::Auto),
            rescale,
            in_format,
            qk_format,
            name: take!(name),
            rows: take!(rows),
            cols: take!(cols),
            br: take!(br),
            bc: take!(bc),
            head_dim: take!(head_dim),
            regs_per_pe: take!(regs_per_pe),
            mul_latency: take!(mul_latency),
            add_latency: take!(add_latency),
            fmul_latency: take!(fmul_latency),
            exp_latency: take!(exp_latency),
            index_bits: take!(index_bits),
            mem_width: take!(mem_width),
            addr_bits: take!(addr_bits),
            max_outstanding: take!(max_outstanding),
            clock_mhz: take!(clock_mhz),
            variant,
            top_name: take_or!(top_name, DEFAULT_TOP_NAME.into()),
            mem_if: take_or!(mem_if, MemIf::default()),
            axi_id_bits: take_or!(axi_id_bits, DEFAULT_AXI_ID_BITS),
            axi_outstanding: take_or!(axi_outstanding, DEFAULT_AXI_OUTSTANDING),
            glb: {
                let b = base.as_ref().map_or(GlbParams::default(), |b| b.glb);
                GlbParams {
                    bytes: self.glb_bytes.unwrap_or(b.bytes),
                    banks: self.glb_banks.unwrap_or(b.banks),
                    word_bits: self.glb_word_bits.unwrap_or(b.word_bits),
                    ports: self.glb_ports.unwrap_or(b.ports),
                    blackbox: self.glb_macro.unwrap_or(b.blackbox),
                    placement: self.glb_placement.unwrap_or(b.placement),
                    wire_mm: self.glb_wire_mm.unwrap_or(b.wire_mm),
                    spares: self.glb_spares.unwrap_or(b.spares),
                    spare_group: self.glb_spare_group.unwrap_or(b.spare_group),
                }
            },
        };
        // A base preset's memory beat keeps its operands when the file changes their format
        // and not the width (`CoreConfig::set_in_format`).
        if let (None, Some(b)) = (self.mem_width, &base) {
            if cfg.in_format != b.in_format {
                let f = cfg.in_format;
                cfg.in_format = b.in_format;
                cfg.set_in_format(f);
            }
        }
        if !missing.is_empty() {
            bail!(
                "the configuration lacks {}: give every key, or start from a preset with \
                 `preset = \"small\"` (or \"seed\") and set only what differs",
                missing.join(", ")
            );
        }
        Ok((cfg, notes))
    }
}

/// The variant a file describes: its name (or the base preset's), its section, and any flat
/// keys of the older format, which are read into the section with a note each. A section or
/// a flat key of another variant is refused, unless the flat key holds its default (files
/// written by `presets --toml` before the sections listed every key).
fn resolve_variant(
    kind: Option<VariantKind>,
    base: Option<Variant>,
    sections: Sections,
    legacy: &LegacyKeys,
) -> Result<(Variant, Vec<String>)> {
    let Sections {
        buf2d,
        reg3d,
        rowfused,
        noc2d,
    } = sections;
    let kind = kind.or(base.map(|b| b.kind())).unwrap_or_default();
    for (section, given) in [
        (VariantKind::Buf2d, buf2d.is_some()),
        (VariantKind::Reg3d, reg3d.is_some()),
        (VariantKind::Rowfused, rowfused.is_some()),
        (VariantKind::Noc2d, noc2d.is_some()),
    ] {
        ensure!(
            !given || kind == section,
            "a [{section}] section applies to variant = \"{section}\", but the variant is \
             {kind}: set variant = \"{section}\", or drop the section"
        );
    }
    // The section's knobs: the file's section, else the base preset's, else the defaults.
    let from_base = base.filter(|b| b.kind() == kind);
    let mut variant = match kind {
        VariantKind::Reg2d => Variant::Reg2d,
        VariantKind::Unfused => Variant::Unfused,
        VariantKind::Buf2d => Variant::Buf2d(
            buf2d
                .or(from_base.and_then(|b| b.buf().copied()))
                .unwrap_or_default(),
        ),
        VariantKind::Reg3d => Variant::Reg3d(
            reg3d
                .or(from_base.and_then(|b| b.stack().copied()))
                .unwrap_or_default(),
        ),
        VariantKind::Rowfused => Variant::Rowfused(
            rowfused
                .or(from_base.and_then(|b| b.rowfused().copied()))
                .unwrap_or_default(),
        ),
        VariantKind::Noc2d => Variant::Noc2d(
            noc2d
                .or(from_base.and_then(|b| b.noc().copied()))
                .unwrap_or_default(),
        ),
    };
    let mut notes = vec![];
    // Each flat key: its variant and that variant's knobs type, the knob, and the knob's name
    // in the section.
    macro_rules! legacy {
        ($v:ident, $params:ident, $flat:ident => $key:ident as $name:literal) => {
            if let Some(v) = legacy.$flat {
                let (section, key, flat) = (VariantKind::$v, $name, stringify!($flat));
                if kind == section {
                    let given = match section {
                        VariantKind::Buf2d => buf2d.is_some(),
                        VariantKind::Reg3d => reg3d.is_some(),
                        VariantKind::Rowfused => rowfused.is_some(),
                        VariantKind::Reg2d | VariantKind::Unfused | VariantKind::Noc2d => false,
                    };
                    ensure!(
                        !given,
                        "{key} is given twice: as the flat key {flat} and in the [{section}] \
                         section; keep the section's"
                    );
                    if let Variant::$v(p) = &mut variant {
                        p.$key = v;
                    }
                    notes.push(format!(
                        "`{flat} = {v}` is read as `{key} = {v}` in a [{section}] section, \
                         where it lives now"
                    ));
                } else {
                    ensure!(
                        v == $params::default().$key,
                        "{flat} = {v} applies to {section} only, but the variant is {kind}: set \
                         variant = \"{section}\" and give it as `{key}` in a [{section}] \
                         section, or leave it out"
                    );
                    notes.push(format!(
                        "`{flat} = {v}` (an older format's key, at its default) is ignored: the \
                         variant is {kind}"
                    ));
                }
            }
        };
    }
    legacy!(Buf2d, BufParams, buf_ports => ports as "ports");
    legacy!(Buf2d, BufParams, buf_bytes => bytes as "bytes");
    legacy!(Buf2d, BufParams, buf_macro => macro_blackbox as "macro");
    legacy!(Buf2d, BufParams, buf_word_bits => word_bits as "word_bits");
    legacy!(Buf2d, BufParams, buf_banks => banks as "banks");
    legacy!(Reg3d, StackParams, tiers => tiers as "tiers");
    legacy!(Reg3d, StackParams, vlink_latency => vlink_latency as "vlink_latency");
    legacy!(Reg3d, StackParams, vlink_bits => vlink_bits as "vlink_bits");
    Ok((variant, notes))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<(CoreConfig, Vec<String>)> {
        let (cfg, notes) = ConfigFile::parse(text)?.resolve()?;
        cfg.validate()?;
        Ok((cfg, notes))
    }

    fn err(text: &str) -> String {
        format!("{:#}", parse(text).unwrap_err())
    }

    /// Every preset as every variant, with knobs away from their defaults, survives TOML and
    /// JSON unchanged; the TOML holds the variant's section and no flat key of the older format.
    #[test]
    fn configurations_round_trip() {
        let variants = [
            Variant::Reg2d,
            Variant::Buf2d(BufParams {
                ports: 1,
                bytes: 1 << 20,
                macro_blackbox: true,
                word_bits: 64,
                banks: 2,
            }),
            Variant::Reg3d(StackParams {
                tiers: 3,
                vlink_latency: 2,
                vlink_bits: 8,
                spares: 2,
                spare_group: 16,
            }),
            Variant::Rowfused(RowParams {
                keys: 2048,
                macro_blackbox: true,
                spill: true,
            }),
            Variant::Noc2d(NocParams {
                flit_bits: 64,
                hops: 3,
                buffer_depth: 2,
            }),
        ];
        for preset in crate::config::PRESETS {
            for v in variants {
                let cfg = CoreConfig {
                    variant: v,
                    ..CoreConfig::preset(preset).unwrap()
                };
                let text = cfg.to_toml();
                assert!(text.contains(&format!("[{}]", v.name())) || v == Variant::Reg2d);
                let plain = text.split('[').next().unwrap();
                for flat in ["buf_", "tiers", "vlink"] {
                    assert!(!plain.contains(flat), "{text}");
                }
                let (back, notes) = parse(&text).unwrap();
                assert_eq!(back, cfg, "{text}");
                assert!(notes.is_empty(), "{notes:?}");
                let json = serde_json::to_string(&cfg).unwrap();
                let back: CoreConfig = serde_json::from_str(&json).unwrap();
                assert_eq!(back, cfg, "{json}");
            }
        }
    }

    /// A section sets the variant's knobs; the others keep their defaults.
    #[test]
    fn sections_set_the_variants_knobs() {
        let (c, _) =
            parse("preset = \"small\"\nvariant = \"buf2d\"\n[buf2d]\nbanks = 2\n").unwrap();
        assert_eq!(
            c.variant,
            Variant::Buf2d(BufParams {
                banks: 2,
                ..BufParams::default()
            })
        );
        let (c, _) =
            parse("preset = \"small\"\nvariant = \"reg3d\"\n[reg3d]\ntiers = 3\n").unwrap();
        assert_eq!(c.variant, Variant::reg3d(3));
        let (c, _) = parse("preset = \"small\"\nvariant = \"reg3d\"\n").unwrap();
        assert_eq!(c.variant, Variant::reg3d(2));
        let e = err("preset = \"small\"\nvariant = \"buf2d\"\n[reg3d]\ntiers = 3\n");
        assert!(
            e.contains("a [reg3d] section applies to variant = \"reg3d\""),
            "{e}"
        );
        let e = err("preset = \"small\"\n[buf2d]\nbanks = 2\n");
        assert!(e.contains("but the variant is reg2d"), "{e}");
        let e = err("preset = \"small\"\nvariant = \"buf2d\"\n[buf2d]\nbank = 2\n");
        assert!(e.contains("unknown field `bank`"), "{e}");
    }

    /// noc2d's keys out of their ranges are refused with the key, the range and why.
    #[test]
    fn noc2d_keys_out_of_range_are_refused() {
        let noc = |k: &str| {
            let text = format!("preset = \"small\"\nvariant = \"noc2d\"\n[noc2d]\n{k}\n");
            parse(&text).and_then(|(c, _)| c.validate()).map(|_| ())
        };
        assert!(noc("flit_bits = 19").is_ok() && noc("hops = 15").is_ok());
        for (key, says) in [
            ("hops = 0", "noc2d.hops = 0 is out of range"),
            ("hops = 16", "noc2d.hops = 16 is out of range"),
            ("buffer_depth = 0", "noc2d.buffer_depth = 0 is out of range"),
            (
                "buffer_depth = 17",
                "noc2d.buffer_depth = 17 is out of range",
            ),
            ("flit_bits = 18", "at least one 16-bit weight"),
            ("flit_bits = 1025", "up to 1024 bits"),
        ] {
            let e = format!("{:#}", noc(key).unwrap_err());
            assert!(e.contains(says), "{key}: {e}");
        }
        let e = err("preset = \"small\"\n[noc2d]\nhops = 2\n");
        assert!(
            e.contains("a [noc2d] section applies to variant = \"noc2d\""),
            "{e}"
        );
        let mut c = CoreConfig::preset("small").unwrap();
        let e = format!("{:#}", c.noc_mut("--hops").unwrap_err());
        assert!(e.contains("--hops applies to noc2d only"), "{e}");
    }

    /// The older format's flat keys are read into the section, each with a note; at their
    /// defaults under another variant they are ignored with a note; otherwise refused.
    #[test]
    fn flat_keys_of_the_older_format_migrate() {
        let (c, notes) =
            parse("preset = \"small\"\nvariant = \"buf2d\"\nbuf_bytes = 4096\n").unwrap();
        assert_eq!(c.variant.buf().unwrap().bytes, 4096);
        assert_eq!(notes.len(), 1);
        assert!(
            notes[0].contains("`bytes = 4096` in a [buf2d] section"),
            "{notes:?}"
        );
        let (c, notes) =
            parse("preset = \"small\"\nvariant = \"reg3d\"\ntiers = 3\nvlink_bits = 8\n").unwrap();
        assert_eq!(c.variant.stack().unwrap().vlink_bits, 8);
        assert_eq!(notes.len(), 2, "{notes:?}");
        // A file `presets --toml` wrote before the sections: every flat key at its default.
        let old = "preset = \"small\"\nvariant = \"reg2d\"\nbuf_ports = 2\nbuf_bytes = 0\n\
                   buf_macro = false\ntiers = 2\nvlink_latency = 1\n";
        let (c, notes) = parse(old).unwrap();
        assert_eq!(c, CoreConfig::preset("small").unwrap());
        assert_eq!(notes.len(), 5, "{notes:?}");
        let e = err("preset = \"small\"\nvlink_bits = 8\n");
        assert!(e.contains("vlink_bits = 8 applies to reg3d only"), "{e}");
        let e = err("preset = \"small\"\nbuf_banks = 2\n");
        assert!(e.contains("buf_banks = 2 applies to buf2d only"), "{e}");
        let e = err("preset = \"small\"\nvariant = \"buf2d\"\nbuf_banks = 2\n[buf2d]\nbanks = 2\n");
        assert!(e.contains("given twice"), "{e}");
    }

    /// The GLB's keys: written only when there is one, read back unchanged, and the knobs
    /// checked with the rest of the configuration.
    #[test]
    fn glb_keys_round_trip() {
        let small = CoreConfig::preset("small").unwrap();
        assert!(!small.to_toml().contains("glb_"));
        let (c, _) = parse(
            "preset = \"small\"\nglb_bytes = 4096\nglb_banks = 2\nglb_word_bits = 128\n\
             glb_ports = 2\nglb_placement = \"planar\"\nglb_wire_mm = 1.5\n",
        )
        .unwrap();
        assert_eq!(c.glb.bytes, 4096);
        assert_eq!(c.glb.placement, GlbPlacement::Planar);
        let g = c.dma().glb.unwrap();
        assert_eq!((g.groups, g.slices, g.ports, g.region_beats), (1, 2, 2, 64));
        let (back, _) = parse(&c.to_toml()).unwrap();
        assert_eq!(back, c);
        let json = serde_json::to_string(&c).unwrap();
        assert_eq!(serde_json::from_str::<CoreConfig>(&json).unwrap(), c);
        let e = err("preset = \"small\"\nglb_bytes = 256\n");
        assert!(
            e.contains("glb_bytes = 256 cannot hold one K/V block pair"),
            "{e}"
        );
        let e = err("preset = \"small\"\nglb_placement = \"above\"\n");
        assert!(e.contains("unknown variant `above`"), "{e}");
        // The bond's spares: round trip, and refused without a stacked GLB, or past the
        // probe's lane numbers.
        let (c, _) = parse(
            "preset = \"small\"\nglb_bytes = 4096\nglb_banks = 4\nglb_spares = 2\n\
             glb_spare_group = 16\n",
        )
        .unwrap();
        let g = c.dma().glb.unwrap();
        assert_eq!(g.bond.map(|b| (b.spares, b.group)), Some((2, 16)));
        // Four groups of 256-bit words, 32 per bank: 2 + 2 x 5 + 256 lanes up, 256 down.
        assert_eq!(g.bond_group_lanes(), (268, 256));
        let (back, _) = parse(&c.to_toml()).unwrap();
        assert_eq!(back, c);
        let e = err("preset = \"small\"\nglb_spares = 1\n");
        assert!(e.contains("glb_spares = 1 needs a GLB"), "{e}");
        let e = err(
            "preset = \"small\"\nglb_bytes = 4096\nglb_placement = \"planar\"\nglb_spares = 1\n",
        );
        assert!(e.contains("needs a stacked GLB"), "{e}");
        let e = err("preset = \"seed\"\nmem_width = 1024\nglb_banks = 64\nglb_spares = 1\n");
        assert!(e.contains("past the 32768 the link probe numbers"), "{e}");
    }

    /// The value regflash.h gives `REGFLASH_CFG_<name>` for the design `c`.
    fn header_limit(c: &CoreConfig, name: &str) -> Option<u64> {
        let p = crate::core::CoreParams::from_config(c).unwrap();
        crate::soc::regmap::limits(&p)
            .into_iter()
            .find(|(n, _, _)| *n == name)
            .map(|(_, v, _)| v)
    }

    /// `qk_format`: written only when set, read back unchanged, the PE and the header say it,
    /// a wrong spelling and a head dimension too small to pack are refused.
    #[test]
    fn qk_format_key_round_trips_and_refuses_what_cannot_work() {
        assert!(!CoreConfig::preset("small")
            .unwrap()
            .to_toml()
            .contains("qk_format"));
        let (c, _) = parse("preset = \"small\"\nqk_format = \"int4\"\n").unwrap();
        assert_eq!(c.qk_format, Some(kernels::quant::QkFormat::Int4));
        assert_eq!(c.pe().params_name(), "pe_r64_m1_a1_qi4");
        assert_eq!(header_limit(&c, "QK_FORMAT"), Some(4));
        // d = 16 in four-lane elements: 2 scale steps + 4 products a score.
        assert_eq!(c.row().qk_dims(), 6);
        let (back, _) = parse(&c.to_toml()).unwrap();
        assert_eq!(back, c);
        let e = err("preset = \"small\"\nqk_format = \"int2\"\n");
        assert!(
            e.contains("qk_format = \"int2\" is not a supported QK format"),
            "{e}"
        );
        let e = err(
            "preset = \"small\"\nqk_format = \"int4\"\nhead_dim = 4\ncols = 4\nmem_width = 64\n",
        );
        assert!(
            e.contains("head_dim = 4 must be a multiple of 4 with at least two"),
            "{e}"
        );
    }

    /// `in_format`: written only for bf16, read back unchanged, the units built for it, and a
    /// wrong spelling refused with the choices.
    #[test]
    fn in_format_key_round_trips_and_refuses_other_formats() {
        assert!(!CoreConfig::preset("small")
            .unwrap()
            .to_toml()
            .contains("in_format"));
        let (c, _) = parse("preset = \"small\"\nin_format = \"bf16\"\n").unwrap();
        assert_eq!(c.in_format, crate::format::Format::BF16);
        assert_eq!(c.formats().operand, crate::format::Format::BF16);
        assert_eq!(c.pe().mac.module_name(), "mac_e8m7_m1_a1_f");
        // A driver learns it from regflash.h: REGFLASH_CFG_IN_FORMAT is 1 for BF16, 0 for FP16.
        let in_format = |c: &CoreConfig| header_limit(c, "IN_FORMAT");
        assert_eq!(in_format(&c), Some(1));
        assert_eq!(in_format(&CoreConfig::preset("small").unwrap()), Some(0));
        let text = c.to_toml();
        assert!(text.contains("in_format = \"bf16\""), "{text}");
        let (back, _) = parse(&text).unwrap();
        assert_eq!(back, c);
        let json = serde_json::to_string(&c).unwrap();
        assert_eq!(serde_json::from_str::<CoreConfig>(&json).unwrap(), c);
        let e = err("preset = \"small\"\nin_format = \"fp8\"\n");
        assert!(
            e.contains("in_format = \"fp8\" is not a supported operand format")
                && e.contains("\"bf16\""),
            "{e}"
        );
    }

    /// The rescale keys: written only for lazy, read back unchanged (a preset's strategy kept
    /// when a file changes only the threshold), and every wrong spelling refused with what to
    /// give instead.
    #[test]
    fn rescale_keys_round_trip_and_refuse_what_cannot_work() {
        assert!(!CoreConfig::preset("small")
            .unwrap()
            .to_toml()
            .contains("rescale"));
        let (c, _) = parse("preset = \"small\"\nrescale = \"lazy\"\n").unwrap();
        assert_eq!(c.rescale, Rescale::Lazy { threshold: 4 });
        let (c, _) = parse("preset = \"small\"\nrescale = \"lazy\"\nlazy_threshold = 9\n").unwrap();
        assert_eq!(c.rescale, Rescale::Lazy { threshold: 9 });
        let text = c.to_toml();
        assert!(text.contains("rescale = \"lazy\"") && text.contains("lazy_threshold = 9"));
        let (back, _) = parse(&text).unwrap();
        assert_eq!(back, c);
        let json = serde_json::to_string(&c).unwrap();
        assert_eq!(serde_json::from_str::<CoreConfig>(&json).unwrap(), c);
        for (text, want) in [
            (
                "rescale = \"always\"",
                "rescale = \"always\" (a floating-point running max",
            ),
            (
                "rescale = \"lazy\"\nlazy_threshold = 0",
                "lazy_threshold = 0 is out of range",
            ),
            (
                "rescale = \"lazy\"\nlazy_threshold = 16",
                "lazy_threshold = 16 is out of range",
            ),
            ("lazy_threshold = 3", "applies to rescale = \"lazy\" only"),
            (
                "rescale = \"fast\"",
                "rescale = \"fast\" is not a rescaling strategy",
            ),
            (
                "rescale = \"lazy\"\nvariant = \"rowfused\"",
                "the variant is rowfused: it finds a row's max before any weight",
            ),
        ] {
            let e = err(&format!("preset = \"small\"\n{text}\n"));
            assert!(e.contains(want), "{text}: {e}");
        }
    }
}
