//! Every block that can be generated on its own (`regflash gen --unit <name>`), built from a
//! whole-design configuration so that a unit is exactly the one the design instantiates.

use anyhow::{bail, Result};

use crate::config::CoreConfig;
use crate::{array, fp16_mul, fp16_to_fp32, fp32_add, fp32_to_fp16, mac, pe, Design, ModRef};

/// Names accepted by [`build_unit`].
pub const UNITS: &[&str] = &[
    "fp16_mul",
    "fp32_add",
    "fp16_to_fp32",
    "fp32_to_fp16",
    "mac",
    "pe",
    "pe_grid",
];

/// Builds unit `name` as configured in `cfg` into `d`, returning its interface (the top).
pub fn build_unit(d: &mut Design, name: &str, cfg: &CoreConfig) -> Result<ModRef> {
    cfg.validate()?;
    let pe = cfg.pe();
    Ok(match name {
        "fp16_mul" => fp16_mul::build(d, &pe.mac.mul),
        "fp32_add" => fp32_add::build(d, &pe.mac.add),
        "fp16_to_fp32" => fp16_to_fp32::build(d),
        "fp32_to_fp16" => fp32_to_fp16::build(d),
        "mac" => mac::build(d, &pe.mac),
        "pe" => pe::build(d, &pe),
        "pe_grid" => array::build(d, &cfg.grid()),
        other => bail!("unknown unit `{other}`: choose one of {}", UNITS.join(", ")),
    })
}

/// Builds a whole preset design into `d`, returning its top. Until the FlashAttention core
/// exists, the top is the PE grid.
pub fn build_core(d: &mut Design, cfg: &CoreConfig) -> Result<ModRef> {
    build_unit(d, "pe_grid", cfg)
}
