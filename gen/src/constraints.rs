//! Rendering the templates in `constraints/`: SDC and XDC timing constraints, the iCE40 pin file
//! of the serial wrapper, and the Yosys scripts of each synthesis target.
//!
//! The same Yosys templates serve the scripts written into an output folder (for users, run
//! from that folder) and the scripts `regflash synth` runs (with report files added), so the
//! figures regflash reports come from exactly the commands a user can rerun.

use anyhow::{Context, Result};
use serde::Serialize;

use crate::manifest::ModuleEntry;

const SDC: &str = include_str!("../../constraints/sdc.tera");
const XDC: &str = include_str!("../../constraints/xdc.tera");
const PCF: &str = include_str!("../../constraints/pcf.tera");
const GENERIC_YS: &str = include_str!("../../constraints/generic.ys.tera");
const ICE40_YS: &str = include_str!("../../constraints/ice40.ys.tera");
const XILINX_YS: &str = include_str!("../../constraints/xilinx.ys.tera");

/// Input and output delays as a share of the clock period (placeholder budgets).
pub const IO_DELAY_FRACTION: f64 = 0.2;

/// Clock uncertainty for setup (jitter and skew) as a share of the period (a placeholder for a
/// clock tree's figure).
pub const CLOCK_UNCERTAINTY_FRACTION: f64 = 0.05;

/// Clock uncertainty for hold (skew) as a share of the period.
pub const HOLD_UNCERTAINTY_FRACTION: f64 = 0.02;

/// A synthesis target.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum SynthTarget {
    /// Yosys's technology-independent cells.
    Generic,
    /// Lattice iCE40 (LUT4, carry, BRAM), through the serial wrapper.
    Ice40,
    /// Xilinx 7-series (LUT6, CARRY4, DSP48E1, RAMB/LUTRAM).
    Xilinx,
}

impl SynthTarget {
    pub const ALL: [SynthTarget; 3] = [
        SynthTarget::Generic,
        SynthTarget::Ice40,
        SynthTarget::Xilinx,
    ];

    pub fn name(self) -> &'static str {
        match self {
            SynthTarget::Generic => "generic",
            SynthTarget::Ice40 => "ice40",
            SynthTarget::Xilinx => "xilinx",
        }
    }
}

impl std::str::FromStr for SynthTarget {
    type Err = anyhow::Error;
    fn from_str(s: &str) -> Result<Self> {
        SynthTarget::ALL
            .into_iter()
            .find(|t| t.name() == s)
            .ok_or_else(|| {
                anyhow::anyhow!("unknown synthesis target `{s}`: choose generic, ice40 or xilinx")
            })
    }
}

/// Where a Yosys run writes its reports (absent in user scripts, which print instead).
#[derive(Clone, Debug, Serialize)]
pub struct ReportPaths {
    pub check: String,
    pub stat: String,
    pub ltp: String,
}

fn render(template: &str, ctx: &tera::Context, what: &str) -> Result<String> {
    tera::Tera::one_off(template, ctx, false)
        .with_context(|| format!("cannot render the {what} template"))
}

fn timing_context(top: &ModuleEntry, clock_mhz: f64, generator: &str) -> tera::Context {
    let period = 1000.0 / clock_mhz;
    let data = |input: bool| -> Vec<&str> {
        top.ports
            .iter()
            .filter(|p| p.is_input() == input && p.name != "clk" && p.name != "rst")
            .map(|p| p.name.as_str())
            .collect()
    };
    let mut ctx = tera::Context::new();
    ctx.insert("top", &top.name);
    ctx.insert("generator", generator);
    ctx.insert("clock_mhz", &clock_mhz);
    ctx.insert("period_ns", &format!("{period:.4}"));
    ctx.insert("io_ns", &format!("{:.4}", period * IO_DELAY_FRACTION));
    ctx.insert("io_pct", &format!("{:.0}", IO_DELAY_FRACTION * 100.0));
    for (key, fraction) in [
        ("unc", CLOCK_UNCERTAINTY_FRACTION),
        ("hold_unc", HOLD_UNCERTAINTY_FRACTION),
    ] {
        ctx.insert(format!("{key}_ns"), &format!("{:.4}", period * fraction));
        ctx.insert(format!("{key}_pct"), &format!("{:.0}", fraction * 100.0));
    }
    ctx.insert("has_clk", &top.port("clk").is_some());
    ctx.insert("has_rst", &top.port("rst").is_some());
    ctx.insert("inputs", &data(true));
    ctx.insert("outputs", &data(false));
    ctx.insert("xdc_inputs", &split_port_patterns(top, true));
    ctx.insert("xdc_outputs", &split_port_patterns(top, false));
    ctx
}

/// The data ports of `top` (inputs or outputs; not `clk` or `rst`) as patterns that match a
/// netlist whose buses are split into bit ports: a bus `a` as `{a[*]}`.
pub fn split_port_patterns(top: &ModuleEntry, input: bool) -> Vec<String> {
    top.ports
        .iter()
        .filter(|p| p.is_input() == input && p.name != "clk" && p.name != "rst")
        .map(|p| {
            if p.width > 1 {
                format!("{{{}[*]}}", p.name)
            } else {
                p.name.clone()
            }
        })
        .collect()
}

/// SDC constraints of `top` for a `clock_mhz` clock.
pub fn sdc(top: &ModuleEntry, clock_mhz: f64, generator: &str) -> Result<String> {
    let mut ctx = timing_context(top, clock_mhz, generator);
    ctx.insert("split_ports", &false);
    render(SDC, &ctx, "SDC")
}

/// The same constraints for a netlist whose buses are split into bit ports (`a[3]`, as Yosys
/// writes one for OpenSTA): a bus is matched as `a[*]`.
pub fn sdc_split_ports(top: &ModuleEntry, clock_mhz: f64, generator: &str) -> Result<String> {
    let mut ctx = timing_context(top, clock_mhz, generator);
    ctx.insert("split_ports", &true);
    render(SDC, &ctx, "SDC")
}

/// XDC constraints of `top` for a `clock_mhz` clock.
pub fn xdc(top: &ModuleEntry, clock_mhz: f64, generator: &str) -> Result<String> {
    render(XDC, &timing_context(top, clock_mhz, generator), "XDC")
}

/// iCE40 pin constraints of the serial wrapper `wrapper` of `top`.
pub fn pcf(top: &str, wrapper: &ModuleEntry, generator: &str) -> Result<String> {
    let mut ctx = tera::Context::new();
    ctx.insert("top", top);
    ctx.insert("wrapper", &wrapper.name);
    ctx.insert("generator", generator);
    ctx.insert("has_rst", &wrapper.port("rst").is_some());
    render(PCF, &ctx, "PCF")
}

/// The Yosys script of `target` for `top` (and, for iCE40, its serial `wrapper`), reading
/// `files`; with `reports`, results go to those files instead of the log. `json` is the
/// netlist the iCE40 script writes for nextpnr.
pub fn yosys_script(
    target: SynthTarget,
    top: &str,
    wrapper: &str,
    files: &[String],
    json: &str,
    reports: Option<&ReportPaths>,
    generator: &str,
) -> Result<String> {
    let mut ctx = tera::Context::new();
    ctx.insert("top", top);
    ctx.insert("wrapper", wrapper);
    ctx.insert("files", files);
    ctx.insert("json", json);
    ctx.insert("reports", &reports);
    ctx.insert("generator", generator);
    let template = match target {
        SynthTarget::Generic => GENERIC_YS,
        SynthTarget::Ice40 => ICE40_YS,
        SynthTarget::Xilinx => XILINX_YS,
    };
    render(template, &ctx, "Yosys script")
}
