//! Every block that can be generated on its own (`regflash gen --unit <name>`), built from a
//! whole-design configuration so that a unit is exactly the one the design instantiates.

use anyhow::{bail, Result};

use crate::config::CoreConfig;
use crate::core::{self, CoreParams};
use crate::fault::Fault;
use crate::{
    array, dma, exp2, fp16_mul, fp16_to_fp32, fp32_add, fp32_misc, fp32_mul, fp32_recip,
    fp32_to_fp16, mac, mask, pe, pe_row, row_reduce, softmax, Design, ModRef,
};

/// Names accepted by [`build_unit`].
pub const UNITS: &[&str] = &[
    "fp16_mul",
    "fp32_add",
    "fp16_to_fp32",
    "fp32_to_fp16",
    "mac",
    "pe",
    "pe_grid",
    "fp32_mul",
    "fp32_max",
    "fp32_ceil",
    "fp32_scale2",
    "exp2",
    "fp32_recip",
    "row_reduce",
    "softmax_row",
    "softmax_exp",
    "mask_gen",
    "dma",
    "pe_row",
    "core",
];

/// Builds unit `name` as configured in `cfg` into `d`, returning its interface (the top).
pub fn build_unit(d: &mut Design, name: &str, cfg: &CoreConfig) -> Result<ModRef> {
    cfg.validate()?;
    let pe = cfg.pe();
    Ok(match name {
        "fp16_mul" => fp16_mul::build(d, &pe.mac.mul).module,
        "fp32_add" => fp32_add::build(d, &pe.mac.add).module,
        "fp16_to_fp32" => fp16_to_fp32::build(d).module,
        "fp32_to_fp16" => fp32_to_fp16::build(d).module,
        "mac" => mac::build(d, &pe.mac).module,
        "pe" => pe::build(d, &pe),
        "pe_grid" => array::build(d, &cfg.grid()),
        "fp32_mul" => fp32_mul::build(d, &cfg.fmul()).module,
        "fp32_max" => fp32_misc::build_max(d).module,
        "fp32_ceil" => fp32_misc::build_ceil(d).module,
        "fp32_scale2" => fp32_misc::build_scale2(d).module,
        "exp2" => exp2::build(d, &cfg.softmax_exp().exp).module,
        "fp32_recip" => fp32_recip::build(d).module,
        "row_reduce" => row_reduce::build(d, &cfg.row_reduce()).module,
        "softmax_row" => softmax::build_row(d).module,
        "softmax_exp" => softmax::build_exp(d, &cfg.softmax_exp()).module,
        "mask_gen" => mask::build(d, &cfg.mask()).module,
        "dma" => dma::build(d, &cfg.dma()).module,
        "pe_row" => pe_row::build(d, &CoreParams::from_config(cfg)?.row).module,
        "core" => core::build(d, &CoreParams::from_config(cfg)?),
        other => bail!("unknown unit `{other}`: choose one of {}", UNITS.join(", ")),
    })
}

/// Builds the core of `cfg` with a deliberate defect (fault-injection tests). Returns its top.
pub fn build_faulty_core(d: &mut Design, cfg: &CoreConfig, fault: Fault) -> Result<ModRef> {
    Ok(core::build(
        d,
        &CoreParams::from_config(cfg)?.with_fault(fault),
    ))
}

/// Builds a whole design into `d`: the FlashAttention core. Returns its top.
pub fn build_core(d: &mut Design, cfg: &CoreConfig) -> Result<ModRef> {
    build_unit(d, "core", cfg)
}
