//! The block registry: every block that `regflash gen --unit`, `lint`, `synth` and `verify`
//! handle on its own, with its RTL builder (from a whole-design configuration, so a unit is
//! exactly the one the design instantiates) and how it is checked against its bit-exact model.
//! Adding a block is one entry here, beside the block's own files (RTL in `hdl/`, model in
//! `kernels/`, stimulus and checker in `src/verify/`).

use anyhow::{bail, Result};
use hdl::config::CoreConfig;
use hdl::core::CoreParams;
use hdl::{Design, ModRef};
use proptest::strategy::BoxedStrategy;

use crate::verify::pure::PureUnit;
use crate::verify::run::{self, BlockReport};
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
    /// A checker of its own: (configuration, about how many vectors, seed) → report.
    Own(fn(&CoreConfig, u32, u64) -> Result<BlockReport>),
    /// No port-level model: checked inside the named block.
    Within(&'static str),
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

/// Every block, in the order `regflash verify` checks them.
pub static UNITS: &[Unit] = &[
    Unit {
        name: "fp16_mul",
        build: |d, c| Ok(hdl::fp16_mul::build(d, &c.pe().mac.mul).module),
        check: pure!(fp16_mul),
    },
    Unit {
        name: "fp32_add",
        build: |d, c| Ok(hdl::fp32_add::build(d, &c.pe().mac.add).module),
        check: pure!(fp32_add),
    },
    Unit {
        name: "fp16_to_fp32",
        build: |d, _| Ok(hdl::fp16_to_fp32::build(d).module),
        check: pure!(fp16_to_fp32),
    },
    Unit {
        name: "fp32_to_fp16",
        build: |d, _| Ok(hdl::fp32_to_fp16::build(d).module),
        check: pure!(fp32_to_fp16),
    },
    Unit {
        name: "mac",
        build: |d, c| Ok(hdl::mac::build(d, &c.pe().mac).module),
        check: pure!(mac),
    },
    Unit {
        name: "pe",
        build: |d, c| Ok(hdl::pe::build(d, &c.pe())),
        check: Check::Own(|c, v, s| run::verify_pe_block(c, "pe", run::stream_cases(v), 1000, s)),
    },
    Unit {
        name: "fp32_mul",
        build: |d, c| Ok(hdl::fp32_mul::build(d, &c.fmul()).module),
        check: pure!(fp32_mul),
    },
    Unit {
        name: "fp32_max",
        build: |d, _| Ok(hdl::fp32_misc::build_max(d).module),
        check: pure!(fp32_max),
    },
    Unit {
        name: "fp32_ceil",
        build: |d, _| Ok(hdl::fp32_misc::build_ceil(d).module),
        check: pure!(fp32_ceil),
    },
    Unit {
        name: "fp32_scale2",
        build: |d, _| Ok(hdl::fp32_misc::build_scale2(d).module),
        check: pure!(fp32_scale2),
    },
    Unit {
        name: "exp2",
        build: |d, c| Ok(hdl::exp2::build(d, &c.softmax_exp().exp).module),
        check: pure!(exp2),
    },
    Unit {
        name: "fp32_recip",
        build: |d, _| Ok(hdl::fp32_recip::build(d).module),
        check: Check::Own(run::verify_recip),
    },
    Unit {
        name: "row_reduce",
        build: |d, c| Ok(hdl::row_reduce::build(d, &c.row_reduce()).module),
        check: pure!(row_reduce),
    },
    Unit {
        name: "softmax_row",
        build: |d, _| Ok(hdl::softmax::build_row(d).module),
        check: Check::Own(run::verify_softmax_row),
    },
    Unit {
        name: "softmax_exp",
        build: |d, c| Ok(hdl::softmax::build_exp(d, &c.softmax_exp()).module),
        check: pure!(softmax_exp),
    },
    Unit {
        name: "mask_gen",
        build: |d, c| Ok(hdl::mask::build(d, &c.mask()).module),
        check: pure!(mask_gen),
    },
    Unit {
        name: "dma",
        build: |d, c| Ok(hdl::dma::build(d, &c.dma()).module),
        check: Check::Own(run::verify_dma),
    },
    Unit {
        name: "sram",
        build: |d, c| {
            c.validate()?;
            Ok(hdl::sram::build(d, &c.row().p_array()).module)
        },
        check: Check::Own(run::verify_sram),
    },
    Unit {
        name: "sequencer",
        build: |d, c| Ok(hdl::core::sequencer::build(d, &CoreParams::from_config(c)?).module),
        check: Check::Own(run::verify_sequencer),
    },
    Unit {
        name: "pe_row",
        build: |d, c| Ok(hdl::pe_row::build(d, &CoreParams::from_config(c)?.row).module),
        check: Check::Within("core"),
    },
    Unit {
        name: "core",
        build: |d, c| Ok(hdl::core::build(d, &CoreParams::from_config(c)?)),
        check: Check::Own(run::verify_core),
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
        check: Check::Own(run::verify_csr),
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
        check: Check::Own(run::verify_batch),
    },
    Unit {
        name: "top",
        build: |d, c| hdl::soc::top::build(d, &CoreParams::from_config(c)?, &c.top_name),
        check: Check::Own(run::verify_top),
    },
];

/// Every block's name, in registry order.
pub fn names() -> Vec<&'static str> {
    UNITS.iter().map(|u| u.name).collect()
}

/// The block called `name`.
pub fn unit(name: &str) -> Result<&'static Unit> {
    match UNITS.iter().find(|u| u.name == name) {
        Some(u) => Ok(u),
        None => bail!(
            "unknown unit `{name}`: choose one of {}",
            names().join(", ")
        ),
    }
}

/// Builds block `name` as configured in `cfg` into `d`, returning its top.
pub fn build_unit(d: &mut Design, name: &str, cfg: &CoreConfig) -> Result<ModRef> {
    cfg.validate()?;
    (unit(name)?.build)(d, cfg)
}
