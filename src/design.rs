//! Turning a configuration into an output folder: the one place the CLI and the tests build
//! designs, so both see the same Verilog.

use std::path::Path;

use crate::units;
use anyhow::Result;
use gen::Manifest;
use hdl::config::CoreConfig;
use hdl::fault::Fault;
use hdl::Design;

/// What to generate: a whole preset design, or one unit of it.
#[derive(Clone, Debug)]
pub enum Target {
    /// The stable top (`top_name`): the core behind its AXI4-Lite registers, with
    /// `regflash.h` and `registers.md` beside the Verilog.
    Top,
    Core,
    Unit(String),
    /// The core with a deliberate defect (fault-injection tests; see `hdl::fault`).
    FaultyCore(Fault),
}

/// Builds `target` from `cfg` and writes it to `dir`.
pub fn generate(cfg: &CoreConfig, target: &Target, dir: &Path) -> Result<Manifest> {
    let mut d = Design::new();
    let top = match target {
        Target::Top => units::build_unit(&mut d, "top", cfg)?,
        Target::Core => units::build_unit(&mut d, "core", cfg)?,
        Target::Unit(name) => units::build_unit(&mut d, name, cfg)?,
        Target::FaultyCore(f) => {
            let p = hdl::core::CoreParams::from_config(cfg)?.with_fault(*f);
            hdl::core::build(&mut d, &p)
        }
    };
    let wrapper = hdl::wrap::serial_wrapper(&mut d, &top);
    let config = serde_json::json!({
        "target": match target {
            Target::Top => "top".to_string(),
            Target::Core => "core".to_string(),
            Target::Unit(u) => u.clone(),
            Target::FaultyCore(f) => format!("core with fault {}", f.name()),
        },
        "core": cfg,
    });
    let extra = match target {
        Target::Top => {
            let p = hdl::core::CoreParams::from_config(cfg)?;
            let scale = kernels::softmax::scale_constant(cfg.head_dim as usize);
            vec![
                (
                    "regflash.h".to_string(),
                    hdl::soc::header::c_header(&p, &top.name, scale),
                ),
                (
                    "registers.md".to_string(),
                    hdl::soc::header::markdown(&p, &top.name),
                ),
            ]
        }
        _ => vec![],
    };
    let spec = gen::OutputSpec {
        wrapper: Some(&wrapper.name),
        clock_mhz: cfg.clock_mhz,
        extra,
        ..gen::OutputSpec::new(&d, &top.name, config)
    };
    gen::write_design(&spec, dir)
}

/// Generates `target` into a scratch folder and builds (or fetches from the cache) its
/// Verilator model. Returns the model and the manifest. Memory macros (`buf_macro`) are
/// simulated as the behavioural RAM with the same ports. Fault-injection cores are built
/// without C++ optimization (`BuildOptions::quick`).
pub fn simulate(cfg: &CoreConfig, target: &Target) -> Result<(verilator_tb::Model, Manifest)> {
    simulate_traced(cfg, target, verilator_tb::BuildOptions::from_env().trace)
}

/// [`simulate`], with tracing in `trace`'s format (None: no waveforms), whatever the
/// environment says.
pub fn simulate_traced(
    cfg: &CoreConfig,
    target: &Target,
    trace: Option<verilator_tb::WaveFormat>,
) -> Result<(verilator_tb::Model, Manifest)> {
    let scratch = gen::tools::ScratchDir::new("model")?;
    let cfg = CoreConfig {
        buf_macro: false,
        ..cfg.clone()
    };
    let manifest = generate(&cfg, target, scratch.path())?;
    // A faulty core runs a few hundred cycles in a test: build it quickly.
    // Cores of 256 PEs and more (npu16, seed) simulate on two threads where the machine has
    // them; smaller ones, which the tests run side by side, on one.
    let big = matches!(target, Target::Core) && cfg.rows * cfg.cols >= 256;
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get() as u32);
    let options = verilator_tb::BuildOptions {
        quick: matches!(target, Target::FaultyCore(_)),
        trace,
        threads: if big { cores.min(2) } else { 0 },
    };
    let model = verilator_tb::Model::build_with(scratch.path(), &options)?;
    Ok((model, manifest))
}
