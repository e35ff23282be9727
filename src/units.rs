//! The block registry: every block that `regflash gen --unit`, `lint`, `synth` and `verify`
//! handle on its own, with its RTL builder (from a whole-design configuration, so a unit is
//! exactly the one the design instantiates) and how it is checked against its bit-exact model.
//! Adding a block is one entry here, beside the block's own files (RTL in `hdl/`, model in
//! `kernels/`, stimulus and checker in `src/verify/`).

use anyhow::{bail, Result};
use hdl::config::CoreConfig;
use hdl::core::CoreParams;
use hdl::format::Format;
use hdl::{Design, ModRef};
use kernels::quant::QkFormat;
use proptest::strategy::BoxedStrategy;

use crate::verify::pure::PureUnit;
use crate::verify::units as pure;

/// How a block is checked against its model.
pub enum Check {
    /// A unit of fixed latency: its ports and model, its directed vectors, its random stimulus
    /// (see `verify::pure`).
    Pure {
        unit: fn(&CoreConfig) -> PureUnit,
        directed: fn(&CoreConfig) -> Vec<Vec<u64>>,
        random: fn(&CoreConfig) -> BoxedStrategy<Vec<u64>>,
    },
    /// A driver of its own in `verify::run` ([`Driver`]), given (configuration, about how many
    /// vectors, seed).
    Own(Driver),
    /// No port-level model: checked inside the named block.
    Within(&'static str),
}

/// The blocks whose checker is a driver of its own, each `verify::run`'s `verify_<name>`. The
/// registry names them rather than holding the functions: the drivers build their blocks
/// from it, so it sits below them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Driver {
    PeBlock,
    Recip,
    SoftmaxRow,
    Dma,
    Sram,
    Sequencer,
    Core,
    Csr,
    Batch,
    Top,
}

/// One block.
pub struct Unit {
    pub name: &'static str,
    /// Defines the block (and what it instantiates) in the design; returns its top.
    pub build: fn(&mut Design, &CoreConfig) -> Result<ModRef>,
    pub check: Check,
}

macro_rules! pure {
    ($m:ident) => {
        Check::Pure {
            unit: pure::$m::unit,
            directed: pure::$m::directed,
            random: pure::$m::random,
        }
    };
}

/// An FP8 unit's check (`verify::units::fp8`), for E4M3 (`true`) or E5M2.
macro_rules! fp8 {
    ($m:ident, $e4m3:literal) => {
        Check::Pure {
            unit: pure::fp8::$m::unit::<$e4m3>,
            directed: pure::fp8::$m::directed::<$e4m3>,
            random: pure::fp8::$m::random::<$e4m3>,
        }
    };
}

/// Every block, in the order `regflash verify` checks them.
pub static UNITS: &[Unit] = &[
    Unit {
        name: "fp_mul_e5m10",
        build: |d, c| Ok(hdl::fp::mul_exact::build(d, &mac_in(c, Format::FP16).mul).module),
        check: pure!(fp16_mul),
    },
    Unit {
        name: "fp_mul_e8m7",
        build: |d, c| Ok(hdl::fp::mul_exact::build(d, &mac_in(c, Format::BF16).mul).module),
        check: pure!(bf16_mul),
    },
    Unit {
        name: "fp_add_e8m23",
        build: |d, c| Ok(hdl::fp::add::build(d, &mac_in(c, Format::FP16).add).module),
        check: pure!(fp32_add),
    },
    Unit {
        name: "fp_add_e10m15_e8m23",
        build: |d, c| Ok(hdl::fp::add::build(d, &mac_in(c, Format::BF16).add).module),
        check: pure!(wide_add),
    },
    Unit {
        name: "fp_cvt_e5m10_e8m23",
        build: |d, _| Ok(hdl::fp::cvt_widen::build(d).module),
        check: pure!(fp16_to_fp32),
    },
    Unit {
        name: "fp_cvt_e8m23_e5m10",
        build: |d, _| Ok(hdl::fp::cvt_narrow::build(d).module),
        check: pure!(fp32_to_fp16),
    },
    Unit {
        name: "fp_cvt_e8m7_e8m23",
        build: |d, _| Ok(hdl::fp::cvt_widen::build_from(d, hdl::format::Format::BF16).module),
        check: pure!(bf16_to_fp32),
    },
    Unit {
        name: "fp_cvt_e8m23_e8m7",
        build: |d, _| Ok(hdl::fp::cvt_narrow::build_to(d, hdl::format::Format::BF16).module),
        check: pure!(fp32_to_bf16),
    },
    Unit {
        name: "mac",
        build: |d, c| Ok(hdl::array::mac::build(d, &mac_in(c, Format::FP16)).module),
        check: pure!(mac),
    },
    Unit {
        name: "mac_e8m7",
        build: |d, c| Ok(hdl::array::mac::build(d, &mac_in(c, Format::BF16)).module),
        check: pure!(mac_bf16),
    },
    Unit {
        name: "fp_mul_e4m3fn",
        build: |d, c| Ok(hdl::fp::mul_exact::build(d, &mac_in(c, Format::FP8_E4M3).mul).module),
        check: fp8!(mul, true),
    },
    Unit {
        name: "fp_cvt_e4m3fn_e8m23",
        build: |d, _| Ok(hdl::fp::cvt_widen::build_from(d, Format::FP8_E4M3).module),
        check: fp8!(widen, true),
    },
    Unit {
        name: "fp_cvt_e8m23_e4m3fn",
        build: |d, _| Ok(hdl::fp::cvt_narrow::build_to(d, Format::FP8_E4M3).module),
        check: fp8!(narrow, true),
    },
    Unit {
        name: "mac_e4m3fn",
        build: |d, c| Ok(hdl::array::mac::build(d, &mac_in(c, Format::FP8_E4M3)).module),
        check: fp8!(mac, true),
    },
    Unit {
        name: "fp_mul_e5m2",
        build: |d, c| Ok(hdl::fp::mul_exact::build(d, &mac_in(c, Format::FP8_E5M2).mul).module),
        check: fp8!(mul, false),
    },
    Unit {
        name: "fp_cvt_e5m2_e8m23",
        build: |d, _| Ok(hdl::fp::cvt_widen::build_from(d, Format::FP8_E5M2).module),
        check: fp8!(widen, false),
    },
    Unit {
        name: "fp_cvt_e8m23_e5m2",
        build: |d, _| Ok(hdl::fp::cvt_narrow::build_to(d, Format::FP8_E5M2).module),
        check: fp8!(narrow, false),
    },
    Unit {
        name: "mac_e5m2",
        build: |d, c| Ok(hdl::array::mac::build(d, &mac_in(c, Format::FP8_E5M2)).module),
        check: fp8!(mac, false),
    },
    Unit {
        name: "int_dot_i8",
        build: |d, _| Ok(hdl::array::int_dot::build(d, QkFormat::Int8).module),
        check: pure!(int_dot_i8),
    },
    Unit {
        name: "int_dot_i4",
        build: |d, _| Ok(hdl::array::int_dot::build(d, QkFormat::Int4).module),
        check: pure!(int_dot_i4),
    },
    Unit {
        name: "pe",
        build: |d, c| Ok(hdl::array::pe::build(d, &c.pe())),
        check: Check::Own(Driver::PeBlock),
    },
    Unit {
        name: "fp_mul_e8m23",
        build: |d, c| Ok(hdl::fp::mul::build(d, &c.fmul()).module),
        check: pure!(fp32_mul),
    },
    Unit {
        name: "fp_max_e8m23",
        build: |d, _| Ok(hdl::fp::misc::build_max(d).module),
        check: pure!(fp32_max),
    },
    Unit {
        name: "fp_ceil_e8m23",
        build: |d, _| Ok(hdl::fp::misc::build_ceil(d).module),
        check: pure!(fp32_ceil),
    },
    Unit {
        name: "fp_scale2_e8m23",
        build: |d, _| Ok(hdl::fp::misc::build_scale2(d).module),
        check: pure!(fp32_scale2),
    },
    Unit {
        name: "fp_exp2_e8m23",
        build: |d, c| Ok(hdl::softmax::exp2::build(d, &c.softmax_exp().exp).module),
        check: pure!(exp2),
    },
    Unit {
        name: "fp_log2_e8m23",
        build: |d, c| {
            let cfg = hdl::softmax::log2::Log2Config {
                latency: c.exp_latency,
            };
            Ok(hdl::softmax::log2::build(d, &cfg).module)
        },
        check: pure!(log2),
    },
    Unit {
        name: "fp_recip_e8m23",
        build: |d, _| Ok(hdl::fp::recip::build(d).module),
        check: Check::Own(Driver::Recip),
    },
    Unit {
        name: "row_reduce",
        build: |d, c| Ok(hdl::softmax::row_reduce::build(d, &c.row_reduce()).module),
        check: pure!(row_reduce),
    },
    Unit {
        name: "softmax_row",
        build: |d, c| Ok(hdl::softmax::build_row(d, &c.row().row_update()).module),
        check: Check::Own(Driver::SoftmaxRow),
    },
    Unit {
        name: "softmax_exp",
        build: |d, c| Ok(hdl::softmax::build_exp(d, &c.softmax_exp()).module),
        check: pure!(softmax_exp),
    },
    Unit {
        name: "mask_gen",
        build: |d, c| Ok(hdl::array::mask::build(d, &c.mask()).module),
        check: pure!(mask_gen),
    },
    Unit {
        name: "dma",
        build: |d, c| Ok(hdl::mem::dma::build(d, &c.dma()).module),
        check: Check::Own(Driver::Dma),
    },
    Unit {
        name: "sram",
        build: |d, c| {
            c.validate()?;
            Ok(hdl::mem::sram::build(d, &c.row().p_array()).module)
        },
        check: Check::Own(Driver::Sram),
    },
    Unit {
        name: "sequencer",
        build: |d, c| Ok(hdl::core::sequencer::build(d, &CoreParams::from_config(c)?).module),
        check: Check::Own(Driver::Sequencer),
    },
    Unit {
        name: "pe_row",
        build: |d, c| Ok(hdl::array::pe_row::build(d, &CoreParams::from_config(c)?.row).module),
        check: Check::Within("core"),
    },
    Unit {
        name: "core",
        build: |d, c| Ok(hdl::core::build(d, &CoreParams::from_config(c)?)),
        check: Check::Own(Driver::Core),
    },
    Unit {
        name: "csr",
        build: |d, c| {
            Ok(hdl::soc::csr::build(
                d,
                &CoreParams::from_config(c)?,
                &c.top_name,
            ))
        },
        check: Check::Own(Driver::Csr),
    },
    Unit {
        name: "batch",
        build: |d, c| {
            Ok(hdl::soc::batch::build(
                d,
                &CoreParams::from_config(c)?,
                &c.top_name,
            ))
        },
        check: Check::Own(Driver::Batch),
    },
    Unit {
        name: "top",
        build: |d, c| hdl::soc::top::build(d, &CoreParams::from_config(c)?, &c.top_name),
        check: Check::Own(Driver::Top),
    },
];

/// The MAC of `format` operands at the configuration's latencies: each format's units are
/// checked whatever the configuration's `in_format` (the PE and the core use that one).
fn mac_in(c: &CoreConfig, format: Format) -> hdl::array::mac::MacConfig {
    hdl::array::mac::MacConfig::new(format, c.mul_latency, c.add_latency)
}

/// Former names of blocks, still accepted wherever a unit name is (`--unit`, `regflash verify
/// <unit>`, `Target::Unit`): (former name, the block's name). The floating-point units were
/// named after their C types; they are named by their number formats now, as HardFloat names
/// its modules (see `hdl::fp`).
pub static ALIASES: &[(&str, &str)] = &[
    ("fp16_mul", "fp_mul_e5m10"),
    ("fp32_add", "fp_add_e8m23"),
    ("fp16_to_fp32", "fp_cvt_e5m10_e8m23"),
    ("fp32_to_fp16", "fp_cvt_e8m23_e5m10"),
    ("fp32_mul", "fp_mul_e8m23"),
    ("fp32_max", "fp_max_e8m23"),
    ("fp32_ceil", "fp_ceil_e8m23"),
    ("fp32_scale2", "fp_scale2_e8m23"),
    ("exp2", "fp_exp2_e8m23"),
    ("fp32_recip", "fp_recip_e8m23"),
];

/// Every block's name, in registry order (aliases not included).
pub fn names() -> Vec<&'static str> {
    UNITS.iter().map(|u| u.name).collect()
}

/// The block called `name`, or that a former name ([`ALIASES`]) stands for.
pub fn unit(name: &str) -> Result<&'static Unit> {
    let current = ALIASES
        .iter()
        .find(|(old, _)| *old == name)
        .map_or(name, |&(_, new)| new);
    match UNITS.iter().find(|u| u.name == current) {
        Some(u) => Ok(u),
        None => bail!(
            "unknown unit `{name}`: choose one of {} (former names accepted as aliases: {})",
            names().join(", "),
            ALIASES
                .iter()
                .map(|(old, new)| format!("{old} = {new}"))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

/// Builds block `name` as configured in `cfg` into `d`, returning its top.
pub fn build_unit(d: &mut Design, name: &str, cfg: &CoreConfig) -> Result<ModRef> {
    cfg.validate()?;
    (unit(name)?.build)(d, cfg)
}

#[cfg(test)]
mod tests {
    use super::*;
    use hdl::array::mac::MacConfig;
    use hdl::format::Format;
    use hdl::fp::add::Fp32AddConfig;
    use hdl::fp::mul::Fp32MulConfig;
    use hdl::softmax::exp2::Exp2Config;

    /// Every floating-point unit's registry name is the one its formats give it (`hdl::fp`'s
    /// naming), and its Verilog module is that name (with `_l<latency>` where the unit has a
    /// latency parameter): the literals above cannot drift from the formats.
    #[test]
    fn fp_unit_names_are_derived_from_their_formats() {
        let derived = [
            MacConfig::default().mul.unit_name(),
            MacConfig::new(Format::BF16, 1, 1).mul.unit_name(),
            Fp32AddConfig::new(1).unit_name(),
            MacConfig::new(Format::BF16, 1, 1).add.unit_name(),
            hdl::fp::cvt_widen::module_name(),
            hdl::fp::cvt_narrow::module_name(),
            hdl::fp::cvt_widen::module_name_from(Format::BF16),
            hdl::fp::cvt_narrow::module_name_to(Format::BF16),
            MacConfig::new(Format::FP8_E4M3, 1, 1).mul.unit_name(),
            hdl::fp::cvt_widen::module_name_from(Format::FP8_E4M3),
            hdl::fp::cvt_narrow::module_name_to(Format::FP8_E4M3),
            MacConfig::new(Format::FP8_E5M2, 1, 1).mul.unit_name(),
            hdl::fp::cvt_widen::module_name_from(Format::FP8_E5M2),
            hdl::fp::cvt_narrow::module_name_to(Format::FP8_E5M2),
            Fp32MulConfig::unit_name(),
            hdl::fp::misc::max_module_name(),
            hdl::fp::misc::ceil_module_name(),
            hdl::fp::misc::scale2_module_name(),
            Exp2Config::unit_name(),
            hdl::softmax::log2::Log2Config::unit_name(),
            hdl::fp::recip::module_name(),
        ];
        let cfg = CoreConfig::preset("small").unwrap();
        for name in &derived {
            let u = unit(name).unwrap();
            assert_eq!(
                u.name,
                name.as_str(),
                "registry name of the unit named {name} by its formats"
            );
            let mut d = Design::new();
            let top = (u.build)(&mut d, &cfg).unwrap();
            let latency = top
                .name
                .rsplit_once("_l")
                .filter(|(_, l)| l.parse::<u32>().is_ok());
            let base = latency.map_or(top.name.as_str(), |(base, _)| base);
            assert_eq!(base, name.as_str(), "module {} of unit {name}", top.name);
        }
        // Every floating-point unit of the registry is one of them.
        let fp: Vec<&str> = names()
            .into_iter()
            .filter(|n| n.starts_with("fp_"))
            .collect();
        assert_eq!(fp, derived.iter().map(String::as_str).collect::<Vec<_>>());
        assert_eq!(
            (
                derived[0].as_str(),
                derived[1].as_str(),
                derived[2].as_str(),
                derived[3].as_str(),
                derived[4].as_str()
            ),
            (
                "fp_mul_e5m10",
                "fp_mul_e8m7",
                "fp_add_e8m23",
                "fp_add_e10m15_e8m23",
                "fp_cvt_e5m10_e8m23"
            )
        );
    }

    /// A former name resolves to the block it names now, never shadows a block's own name, and
    /// is listed in the unknown-unit error beside the names.
    #[test]
    fn former_names_are_aliases() {
        for &(old, new) in ALIASES {
            assert!(!names().contains(&old), "{old} is both a name and an alias");
            assert_eq!(unit(old).unwrap().name, new);
            assert!(std::ptr::eq(unit(old).unwrap(), unit(new).unwrap()));
        }
        let Err(err) = unit("fp64_div") else {
            panic!("fp64_div is no unit");
        };
        let err = err.to_string();
        assert!(err.contains("unknown unit `fp64_div`"), "{err}");
        assert!(
            err.contains("fp_mul_e5m10") && err.contains("fp16_mul = fp_mul_e5m10"),
            "{err}"
        );
        assert!(!names().contains(&"fp16_mul"));
    }
}
