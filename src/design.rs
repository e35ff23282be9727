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

/// Builds `target` from `cfg` in `d`: its top module.
fn build(d: &mut Design, cfg: &CoreConfig, target: &Target) -> Result<hdl::ModRef> {
    Ok(match target {
        Target::Top => units::build_unit(d, "top", cfg)?,
        Target::Core => units::build_unit(d, "core", cfg)?,
        Target::Unit(name) => units::build_unit(d, name, cfg)?,
        Target::FaultyCore => {
            let p = hdl::core::CoreParams::from_config(cfg)?.for_fault_injection();
            hdl::core::build(d, &p)
        }
    })
}

/// Checks that `scope` (a waveform's scope: instance names from `target`'s top module, dot
/// separated, or the same after `TOP.<top>.`) names an instance of the design, before a run
/// whose waveform would otherwise hold no signal. The error lists the instances where the
/// path leaves the design.
pub fn check_scope(cfg: &CoreConfig, target: &Target, scope: &str) -> Result<()> {
    let mut d = Design::new();
    let top = build(&mut d, cfg, target)?;
    let rel = scope
        .strip_prefix("TOP.")
        .map(|s| s.strip_prefix(&format!("{}.", top.name)).unwrap_or(s))
        .unwrap_or(scope);
    let mut at = d.module(&top.name).expect("the top is defined");
    let mut path = vec![];
    // Clock gates are left out: a whole-core model simulates their enables, not the gates.
    fn insts(m: &hdl::ir::Module) -> Vec<&hdl::ir::Instance> {
        m.insts
            .iter()
            .filter(|i| i.module.name != hdl::clock_gate::NAME)
            .collect()
    }
    for name in rel.split('.') {
        let Some(inst) = insts(at).into_iter().find(|i| i.name == name) else {
            let mut names: Vec<&str> = insts(at).iter().map(|i| i.name.as_str()).collect();
            names.sort_unstable();
            names.dedup();
            let here = if path.is_empty() {
                format!("the top module (`{}`)", top.name)
            } else {
                format!("`{}` (`{}`)", path.join("."), at.name)
            };
            anyhow::bail!(
                "--wave-scope {scope}: {here} has no instance `{name}`; its instances are {}. \
                 A scope is a path of instance names from the top module (the sequencer is \
                 `u_engine.u_seq`, the DMA `u_engine.u_dma`)",
                if names.is_empty() {
                    "none".to_string()
                } else {
                    names.join(", ")
                }
            );
        };
        path.push(name);
        at = d
            .module(&inst.module.name)
            .expect("instantiated modules are defined");
    }
    Ok(())
}

/// Builds `target` from `cfg` and writes it to `dir`.
pub fn generate(cfg: &CoreConfig, target: &Target, dir: &Path) -> Result<Manifest> {
    let mut d = Design::new();
    let top = build(&mut d, cfg, target)?;
    let wrapper = hdl::wrap::serial_wrapper(&mut d, &top);
    let config = serde_json::json!({
        "target": match target {
            Target::Top => "top".to_string(),
            Target::Core => "core".to_string(),
            // By the block's name: a former name (an alias) writes the same folder.
            Target::Unit(u) => units::unit(u)?.name.to_string(),
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

/// How a run wants its model built: what the caller knows about the run. [`simulate_with`]
/// turns it into the build options once (the profile, threads, hierarchical blocks).
#[derive(Clone, Debug, Default)]
pub struct ModelFor {
    /// Waveforms in this format, or none.
    pub trace: Option<verilator_tb::WaveFormat>,
    /// The run's length from the cycle model, when known: a short run on a flat model gets
    /// the build for short runs ([`SHORT_RUN_CYCLES`]).
    pub cycles: Option<u64>,
    /// Verilate the PE rows as hierarchical blocks whatever the core's size (the build
    /// `seed` gets).
    pub hier_rows: bool,
    /// Simulate a whole core's clock gates as gates, not as enables (see
    /// `verilator_tb::BuildOptions::gates_as_enables`; a unit always simulates its gates).
    pub clock_gates: bool,
}

impl ModelFor {
    /// A run that knows nothing beyond the environment: waveforms from `REGFLASH_WAVES`.
    pub fn from_env() -> Self {
        ModelFor {
            trace: verilator_tb::WaveFormat::from_env(),
            ..ModelFor::default()
        }
    }
}

/// Generates `target` into a scratch folder and builds (or fetches from the cache) its
/// Verilator model, for a run that knows nothing beyond the environment
/// ([`ModelFor::from_env`]). Returns the model and the manifest.
pub fn simulate(cfg: &CoreConfig, target: &Target) -> Result<(verilator_tb::Model, Manifest)> {
    simulate_with(cfg, target, &ModelFor::from_env())
}

/// Runs of at most this many cycles get a model built for short runs (unless
/// `REGFLASH_FAST_BUILD` says otherwise): on a flat model it saves about two thirds of the
/// build and costs about a quarter of the simulation speed, a win below about 4 M cycles on
/// `small` and `medium` (docs/simulation-speed.md); this is half that.
pub const SHORT_RUN_CYCLES: u64 = 2_000_000;

/// Generates `target` into a scratch folder and builds (or fetches from the cache) the
/// Verilator model `run` asks for. Memory macros (`buf2d.macro`) are simulated as the
/// behavioural RAM with the same ports. The build options are chosen here and nowhere else:
/// - the profile ([`profile`]);
/// - the PE rows as hierarchical blocks for cores of 1,024 PEs and more, or on request;
/// - cores of 256 PEs and more simulate on two threads where the machine has them; smaller
///   ones, which the tests run side by side, on one.
pub fn simulate_with(
    cfg: &CoreConfig,
    target: &Target,
    run: &ModelFor,
) -> Result<(verilator_tb::Model, Manifest)> {
    let scratch = gen::tools::ScratchDir::new("model")?;
    // Simulation uses the buffer's behaviour, never a macro's blackbox.
    let cfg = CoreConfig {
        variant: cfg.variant.behavioural(),
        glb: hdl::mem::glb::GlbParams {
            blackbox: false,
            ..cfg.glb
        },
        ..cfg.clone()
    };
    let manifest = generate(&cfg, target, scratch.path())?;
    let whole = matches!(target, Target::Core | Target::Top);
    let rows = run.hier_rows || hier_rows(&cfg, run.trace);
    let big = whole && cfg.rows * cfg.cols >= 256;
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get() as u32);
    let options = verilator_tb::BuildOptions {
        trace: run.trace,
        profile: profile(target, rows, run.cycles, forced_profile(target)?),
        threads: if big { cores.min(2) } else { 0 },
        hier_blocks: hier_blocks(&manifest, whole && rows),
        gates_as_enables: whole && !run.clock_gates,
    };
    let model = verilator_tb::Model::build_with(scratch.path(), &options)?;
    Ok((model, manifest))
}

/// What `REGFLASH_FAST_BUILD` asks of `target`'s build: nothing for a core built for fault
/// injection, whose build is always [`verilator_tb::Profile::Debug`].
fn forced_profile(target: &Target) -> Result<Option<verilator_tb::Profile>> {
    match target {
        Target::FaultyCore => Ok(None),
        _ => verilator_tb::Profile::from_env(),
    }
}

/// Whether a core's PE rows are verilated as hierarchical blocks: for cores of 1,024 PEs and
/// more (seed) the build takes under a minute instead of eight and a half, and simulates about
/// as fast (docs/simulation-speed.md). Smaller cores build flat, which simulates up to 2x
/// faster there. A traced model is flat: a hierarchical block's waveform shows one row.
fn hier_rows(cfg: &CoreConfig, trace: Option<verilator_tb::WaveFormat>) -> bool {
    cfg.rows * cfg.cols >= 1024 && trace.is_none()
}

/// The build profile of a run of `cycles` (None: unknown) on `target`, `hier` when its rows
/// are hierarchical blocks, `forced` what `REGFLASH_FAST_BUILD` asks for:
/// - a core built for fault injection runs a few hundred cycles in a test: [`Profile::Debug`];
/// - otherwise `forced` when set;
/// - otherwise a known length of at most [`SHORT_RUN_CYCLES`] on a flat model gets
///   [`Profile::ShortRun`]. A block's code is compiled once whatever the core's size, so a
///   hierarchical build is short already and a slower model is not worth it.
///
/// [`Profile::Debug`]: verilator_tb::Profile::Debug
/// [`Profile::ShortRun`]: verilator_tb::Profile::ShortRun
fn profile(
    target: &Target,
    hier: bool,
    cycles: Option<u64>,
    forced: Option<verilator_tb::Profile>,
) -> verilator_tb::Profile {
    use verilator_tb::Profile;
    if matches!(target, Target::FaultyCore) {
        return Profile::Debug;
    }
    if let Some(p) = forced {
        return p;
    }
    let short = !hier && cycles.is_some_and(|c| c <= SHORT_RUN_CYCLES);
    if short {
        Profile::ShortRun
    } else {
        Profile::Speed
    }
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
        use verilator_tb::Profile;
        let small = CoreConfig::preset("small").unwrap();
        let seed = CoreConfig::preset("seed").unwrap();
        let vcd = Some(verilator_tb::WaveFormat::Vcd);
        let core = Target::Core;
        let flat = hier_rows(&small, None);
        let at = |hier, cycles| profile(&core, hier, cycles, None);
        assert_eq!(at(flat, Some(SHORT_RUN_CYCLES)), Profile::ShortRun);
        assert_eq!(at(flat, Some(SHORT_RUN_CYCLES + 1)), Profile::Speed);
        assert_eq!(at(flat, None), Profile::Speed, "an unknown length");
        let seed_rows = hier_rows(&seed, None);
        assert_eq!(
            at(seed_rows, Some(1000)),
            Profile::Speed,
            "seed's rows are blocks"
        );
        assert_eq!(
            at(hier_rows(&seed, vcd), Some(1000)),
            Profile::ShortRun,
            "a traced seed is flat"
        );
        let forced = Some(Profile::Speed);
        assert_eq!(profile(&core, flat, Some(10), forced), Profile::Speed);
        let faulty = profile(&Target::FaultyCore, flat, None, forced);
        assert_eq!(faulty, Profile::Debug);
    }
}
