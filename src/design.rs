//! Turning a configuration into an output folder: the one place the CLI and the tests build
//! designs, so both see the same Verilog.

use std::path::Path;

use crate::units;
use anyhow::Result;
use gen::Manifest;
use hdl::config::CoreConfig;
use hdl::Design;

/// What to generate: a whole preset design, or one unit of it.
#[derive(Clone, Debug)]
pub enum Target {
    /// The stable top (`top_name`): the core behind its AXI4-Lite registers, with
    /// `regflash.h` and `registers.md` beside the Verilog.
    Top,
    Core,
    Unit(String),
    /// The core built for fault injection (see `hdl::fault`): every fault that can act in it
    /// is in the hardware, and the testbench selects one at run time, so one model serves
    /// them all.
    FaultyCore,
}

/// Builds `target` from `cfg` and writes it to `dir`.
pub fn generate(cfg: &CoreConfig, target: &Target, dir: &Path) -> Result<Manifest> {
    let mut d = Design::new();
    let top = match target {
        Target::Top => units::build_unit(&mut d, "top", cfg)?,
        Target::Core => units::build_unit(&mut d, "core", cfg)?,
        Target::Unit(name) => units::build_unit(&mut d, name, cfg)?,
        Target::FaultyCore => {
            let p = hdl::core::CoreParams::from_config(cfg)?.for_fault_injection();
            hdl::core::build(&mut d, &p)
        }
    };
    let wrapper = hdl::wrap::serial_wrapper(&mut d, &top);
    let config = serde_json::json!({
        "target": match target {
            Target::Top => "top".to_string(),
            Target::Core => "core".to_string(),
            Target::Unit(u) => u.clone(),
            Target::FaultyCore => "core built for fault injection".to_string(),
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
/// Verilator model. Returns the model and the manifest. Memory macros (`buf2d.macro`) are
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
    simulate_for(cfg, target, trace, None)
}

/// Runs of at most this many cycles get a model built for short runs (unless
/// `REGFLASH_FAST_BUILD` says otherwise): on a flat model it saves about two thirds of the
/// build and costs about a quarter of the simulation speed, a win below about 4 M cycles on
/// `small` and `medium` (docs/simulation-speed.md); this is half that.
pub const SHORT_RUN_CYCLES: u64 = 2_000_000;

/// [`simulate_traced`] for a run expected to take `cycles` (from the cycle model; None: not
/// known, or longer than [`SHORT_RUN_CYCLES`]): a short run on a flat model gets the build
/// for short runs.
pub fn simulate_for(
    cfg: &CoreConfig,
    target: &Target,
    trace: Option<verilator_tb::WaveFormat>,
    cycles: Option<u64>,
) -> Result<(verilator_tb::Model, Manifest)> {
    let rows = hier_rows(cfg, trace);
    build_model(cfg, target, trace, rows, short_run(rows, cycles))
}

/// Whether a core's PE rows are verilated as hierarchical blocks: for cores of 1,024 PEs and
/// more (seed) the build takes under a minute instead of eight and a half, and simulates about
/// as fast (docs/simulation-speed.md). Smaller cores build flat, which simulates up to 2x
/// faster there. A traced model is flat: a hierarchical block's waveform shows one row.
fn hier_rows(cfg: &CoreConfig, trace: Option<verilator_tb::WaveFormat>) -> bool {
    cfg.rows * cfg.cols >= 1024 && trace.is_none()
}

/// Whether a run of `cycles` gets the build for short runs: a known length of at most
/// [`SHORT_RUN_CYCLES`] on a flat model (not `hier`). A block's code is compiled once whatever
/// the core's size, so a hierarchical build is short already and a slower model is not worth
/// it.
fn short_run(hier: bool, cycles: Option<u64>) -> bool {
    !hier && cycles.is_some_and(|c| c <= SHORT_RUN_CYCLES)
}

/// [`simulate`] with the PE rows verilated as hierarchical blocks whatever the core's size
/// (the build `seed` gets), without tracing.
pub fn simulate_hierarchical(
    cfg: &CoreConfig,
    target: &Target,
) -> Result<(verilator_tb::Model, Manifest)> {
    build_model(cfg, target, None, true, false)
}

fn build_model(
    cfg: &CoreConfig,
    target: &Target,
    trace: Option<verilator_tb::WaveFormat>,
    hier_rows: bool,
    short_run: bool,
) -> Result<(verilator_tb::Model, Manifest)> {
    let scratch = gen::tools::ScratchDir::new("model")?;
    // Simulation uses the buffer's behaviour, never a macro's blackbox.
    let cfg = CoreConfig {
        variant: cfg.variant.behavioural(),
        ..cfg.clone()
    };
    let manifest = generate(&cfg, target, scratch.path())?;
    // A faulty core runs a few hundred cycles in a test: build it quickly.
    // Cores of 256 PEs and more (npu16, seed) simulate on two threads where the machine has
    // them; smaller ones, which the tests run side by side, on one.
    let whole = matches!(target, Target::Core | Target::Top);
    let big = whole && cfg.rows * cfg.cols >= 256;
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get() as u32);
    let options = verilator_tb::BuildOptions {
        quick: matches!(target, Target::FaultyCore),
        trace,
        threads: if big { cores.min(2) } else { 0 },
        hier_blocks: hier_blocks(&manifest, whole && hier_rows),
        short_run,
    };
    let model = verilator_tb::Model::build_with(scratch.path(), &options)?;
    Ok((model, manifest))
}

/// The modules a model verilates as hierarchical blocks: with `rows`, the PE rows (every row
/// shares one compiled copy). `REGFLASH_HIER_BLOCKS` (comma-separated module name prefixes,
/// or `none`) overrides the choice, for experiments.
fn hier_blocks(manifest: &Manifest, rows: bool) -> Vec<String> {
    let prefixes: Vec<String> = match std::env::var("REGFLASH_HIER_BLOCKS") {
        Ok(v) if v == "none" => vec![],
        Ok(v) => v.split(',').map(|p| p.trim().to_string()).collect(),
        Err(_) if rows => vec!["pe_row".into()],
        Err(_) => vec![],
    };
    manifest
        .modules
        .iter()
        .filter(|m| prefixes.iter().any(|p| m.name.starts_with(p.as_str())))
        .map(|m| m.name.clone())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_runs_of_flat_models_get_the_short_build() {
        let small = CoreConfig::preset("small").unwrap();
        let seed = CoreConfig::preset("seed").unwrap();
        let vcd = Some(verilator_tb::WaveFormat::Vcd);
        let flat = hier_rows(&small, None);
        assert!(short_run(flat, Some(SHORT_RUN_CYCLES)));
        assert!(!short_run(flat, Some(SHORT_RUN_CYCLES + 1)));
        assert!(!short_run(flat, None), "an unknown length");
        let seed_rows = hier_rows(&seed, None);
        assert!(!short_run(seed_rows, Some(1000)), "seed's rows are blocks");
        assert!(
            short_run(hier_rows(&seed, vcd), Some(1000)),
            "a traced seed is flat"
        );
    }
}
