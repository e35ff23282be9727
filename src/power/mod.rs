//! `regflash power`: a block's energy at gate level, from its own netlist at a standard-cell
//! library, with every net's activity measured by replaying the block's ports from an RTL run
//! of a real attention problem (the per-block characterization; it grew out of
//! `scripts/power-crosscheck`).
//!
//! For a block (the PE, and PE row 0 with its engine):
//! 1. `regflash sim` runs the design on `seq` tokens with a waveform of one instance of the block
//!    (its run must pass: bit-exact, counters, the error contract);
//! 2. Yosys maps the block module by module at the library, at the design's clock, and
//!    flattens it after mapping, so every cell keeps its instance path (`u_mac.u_add.…`); the
//!    design's clock gates are the library's integrated clock-gating cell; its state machines
//!    keep the RTL's encoding (`synth -nofsm`: Yosys 0.23's re-encoded row engine does not
//!    reproduce the RTL at gate level);
//! 3. Icarus replays the instance's input ports, as the waveform has them, into the block's RTL
//!    and into the netlist with the library's cells as Verilog models (every storage cell
//!    starting at 0, as the RTL run's simulator starts it): the netlist's outputs must equal the
//!    RTL's at every clock edge out of reset wherever the RTL's are known, and its event counts
//!    the RTL's, or the flow stops; the netlist's waveform is read through a pipe as it runs;
//! 4. each net's transitions per cycle in the netlist's run become its driver's activity, and
//!    OpenSTA reports every cell's power (`sta`), with the activity as measured, and again with
//!    no data moving and every clock gate closed: the clock and leakage alone.
//!
//! A cell's dynamic energy is the first less the second; each part's dynamic energy over its
//! events, and the clock and leakage per cycle, are the block's characterization, which
//! [`table_toml`] writes as the `[gates]` section of an energy table (`--energy`).

pub mod netlist;
pub mod replay;
pub mod sta;
pub mod vcd;

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, ensure, Context, Result};
use hdl::array::pe::PeOp;
use hdl::config::CoreConfig;
use serde::{Deserialize, Serialize};

use crate::design::{generate, Target};

/// The flow's version: part of the cache key, so a change of the flow re-measures.
const FLOW_VERSION: &str = "power-7";

/// A block the flow characterizes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Block {
    /// PE (0, 0) of row 0: per MAC, per register-file read and write, per cycle.
    Pe,
    /// PE row 0 (a register design's): its row engine (exp unit, row updates, reciprocal,
    /// normalization, P bank, control) per event and per cycle, and its PEs.
    Row,
}

impl Block {
    pub fn name(self) -> &'static str {
        match self {
            Block::Pe => "pe",
            Block::Row => "row",
        }
    }

    /// The instance the waveform records, from the core's top (`sim --wave-scope`).
    fn scope(self) -> &'static str {
        match self {
            Block::Pe => "u_engine.row0.u_tier.pe0",
            Block::Row => "u_engine.row0",
        }
    }

    /// The block's module in the design.
    fn module(self, cfg: &CoreConfig) -> String {
        match self {
            Block::Pe => cfg.pe().module_name(),
            Block::Row => cfg.row().module_name(),
        }
    }

    /// Its events: (name, Verilog expression over its ports that holds at a rising edge when
    /// one happens).
    fn events(self, cfg: &CoreConfig) -> Vec<(&'static str, String)> {
        match self {
            Block::Pe => {
                let mut ops = vec![PeOp::Mac, PeOp::MacClear, PeOp::MacZero, PeOp::MacScale];
                if cfg.qk_format.is_some() {
                    ops.extend([PeOp::IntClear, PeOp::IntMac, PeOp::IntLast]);
                }
                let feed = cfg.pe().mac.feedback;
                if feed {
                    ops.push(PeOp::MacFeed);
                }
                let ops: Vec<String> = ops.iter().map(|o| format!("op == {}", *o as u8)).collect();
                let mut events = vec![
                    ("mac", format!("en && ({})", ops.join(" || "))),
                    ("rf_read", "rf_acc_read".into()),
                    ("rf_write", "rf_write".into()),
                ];
                if feed {
                    // The MACs that continue a run in the MAC's loop.
                    events.push(("mac_feed", format!("en && op == {}", PeOp::MacFeed as u8)));
                }
                events
            }
            // The row's own event outputs (each a count this cycle).
            Block::Row => [
                "macs",
                "exp_op",
                "row_update",
                "recip_op",
                "norm_op",
                "max_op",
                "p_read",
                "p_write",
            ]
            .iter()
            .map(|e| (*e, e.to_string()))
            .collect(),
        }
    }

    /// The part a cell of the flat netlist belongs to, by its instance path and kind.
    fn part(self, cell: &str, kind: CellKind) -> &'static str {
        let under = |prefixes: &[&str]| prefixes.iter().any(|p| cell.starts_with(p));
        match (self, kind) {
            (Block::Row, _) if under(&["u_tier."]) => "PE tier",
            (Block::Row, _) if under(&["u_exp.", "u_local_l1."]) => "exp unit and sum",
            (Block::Row, _) if under(&["u_row", "u_tree."]) => "row update",
            (Block::Row, _) if under(&["u_recip."]) => "reciprocal",
            (Block::Row, _) if under(&["u_norm."]) => "normalization",
            (Block::Row, CellKind::Gate | CellKind::GatedFlop) if under(&["p_bank."]) => {
                "P bank writes"
            }
            (Block::Row, _) if under(&["p_bank."]) => "P bank reads",
            (Block::Row, _) => "row control",
            (_, CellKind::Gate) => "clock gates",
            (_, CellKind::GatedFlop) => "gated flip-flops",
            (Block::Pe, _) if cell.starts_with("u_mac.u_mul.") => "multiplier",
            (Block::Pe, _) if cell.starts_with("u_mac.u_add.") => "adder",
            (Block::Pe, _) if cell.starts_with("u_mac.") => "MAC registers and logic",
            (_, CellKind::Flop) => "own flip-flops",
            (_, CellKind::Logic) => "own logic",
        }
    }
}

/// What a cell of the netlist is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum CellKind {
    Gate,
    GatedFlop,
    Flop,
    Logic,
}

/// One part of a block: its cells, and its energy over the run, as measured and with no data
/// moving (pJ).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Part {
    pub name: String,
    pub cells: u64,
    pub measured_pj: f64,
    pub idle_pj: f64,
}

/// A block's characterization: where and how it was measured, its run and its parts.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BlockPower {
    pub block: Block,
    pub module: String,
    pub scope: String,
    pub library: String,
    /// The library's node (nm), to which the figures belong.
    pub node_nm: f64,
    pub clock_mhz: f64,
    /// The design whose run gave the activity.
    pub variant: String,
    pub seq: usize,
    pub cycles: u64,
    pub events: BTreeMap<String, u64>,
    pub area_um2: f64,
    /// The netlist run's checksum of its outputs (which equal the RTL's wherever the RTL's
    /// are known).
    pub checksum: String,
    pub gates: usize,
    pub gates_opened: usize,
    pub parts: Vec<Part>,
}

impl BlockPower {
    /// The whole run's energy (pJ), as measured.
    pub fn total_pj(&self) -> f64 {
        self.parts.iter().map(|p| p.measured_pj).sum()
    }

    /// A PE that accumulates in its MAC's loop (its run counted `mac_feed` events).
    pub fn runs(&self) -> bool {
        self.block == Block::Pe && self.events.contains_key("mac_feed")
    }

    /// The clock and leakage of one cycle with no data moving (pJ).
    pub fn idle_pj_per_cycle(&self) -> f64 {
        self.parts.iter().map(|p| p.idle_pj).sum::<f64>() / self.cycles.max(1) as f64
    }

    /// The dynamic energy (measured less idle) of the parts named, over the event's count
    /// (pJ per event).
    pub fn per_event(&self, parts: &[&str], event: &str) -> Result<f64> {
        let n = self.events.get(event).copied().unwrap_or(0);
        ensure!(
            n > 0,
            "the {} had no `{event}` in the run: nothing to price per event (a longer --seq?)",
            self.block.name()
        );
        let dynamic: f64 = self
            .parts
            .iter()
            .filter(|p| parts.contains(&p.name.as_str()))
            .map(|p| p.measured_pj - p.idle_pj)
            .sum();
        Ok(dynamic / n as f64)
    }

    /// The report's lines.
    pub fn summary(&self) -> String {
        let mut s = format!(
            "{} ({} at {}): {} ({} nm), {:.0} MHz, a {} run of seq {}: {} cycles, {}; area {:.0} um2, \
             {} clock gates ({} opened); the netlist's outputs equal the RTL's at every edge out of reset where the RTL's are known (checksum {})\n",
            self.block.name(),
            self.module,
            self.scope,
            self.library,
            self.node_nm,
            self.clock_mhz,
            self.variant,
            self.seq,
            self.cycles,
            self.events
                .iter()
                .map(|(k, v)| format!("{v} {k}"))
                .collect::<Vec<_>>()
                .join(", "),
            self.area_um2,
            self.gates,
            self.gates_opened,
            self.checksum
        );
        let per_cycle = |pj: f64| pj / self.cycles.max(1) as f64;
        writeln!(
            s,
            "  {:.2} pJ per cycle as measured; the clock and leakage alone {:.2} pJ per cycle",
            per_cycle(self.total_pj()),
            self.idle_pj_per_cycle()
        )
        .ok();
        let mut parts = self.parts.clone();
        parts.sort_by(|a, b| b.measured_pj.total_cmp(&a.measured_pj));
        for p in parts {
            writeln!(
                s,
                "  {:28} {:6} cells {:8.3} pJ per cycle ({:.3} of it clock and leakage)",
                p.name,
                p.cells,
                per_cycle(p.measured_pj),
                per_cycle(p.idle_pj)
            )
            .ok();
        }
        s
    }
}

/// Where and how to measure.
pub struct Options {
    /// `--lib` name or `--liberty` path (`gen::asic::resolve`).
    pub lib: Option<String>,
    pub liberty: Option<PathBuf>,
    pub seq: usize,
    /// Keep the work folder here (else a scratch folder, removed).
    pub keep: Option<PathBuf>,
}

/// The node (nm) in a library's label (`45 nm`), if it says.
fn node_of(label: &str) -> Option<f64> {
    label.split_whitespace().next()?.parse().ok()
}

/// Runs `cmd` (`gen::tools::run`), and returns what it printed.
fn run(cmd: &mut Command, what: &str) -> Result<String> {
    let out = gen::tools::run(cmd, what)?;
    Ok(String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr))
}

/// The block's ports from the manifest (which lists `clk` and `rst` among them).
fn ports(manifest: &gen::Manifest, module: &str) -> Result<replay::Ports> {
    let entry = manifest
        .module(module)
        .with_context(|| format!("the design has no module {module}"))?;
    let (mut inputs, mut outputs) = (vec![], vec![]);
    for p in &entry.ports {
        let list = if p.is_input() {
            &mut inputs
        } else {
            &mut outputs
        };
        list.push((p.name.clone(), p.width));
    }
    ensure!(inputs.iter().any(|p| p.0 == "clk"), "{module} has no clk");
    Ok(replay::Ports { inputs, outputs })
}

/// Characterizes `block` of the design `cfg`, cached by the design's Verilog, the library,
/// the run and the flow.
pub fn characterize(cfg: &CoreConfig, block: Block, opt: &Options) -> Result<BlockPower> {
    let (source, lib_name, label) = gen::asic::resolve(opt.lib.as_deref(), opt.liberty.as_deref())?;
    let node_nm = node_of(&label).with_context(|| {
        format!("{lib_name}'s node is unknown ({label}): the figures need one to scale from")
    })?;
    let scratch;
    let work = match &opt.keep {
        Some(d) => {
            let d = d.join(block.name());
            std::fs::create_dir_all(&d)
                .with_context(|| format!("cannot create {}", d.display()))?;
            d
        }
        None => {
            scratch = gen::tools::ScratchDir::new("power")?;
            scratch.path().to_path_buf()
        }
    };
    let rtl = work.join("rtl");
    let manifest = generate(cfg, &Target::Top, &rtl)?;
    let mut key = gen::cache::Fnv::new();
    for part in [
        FLOW_VERSION,
        &lib_name,
        block.name(),
        &format!("{} {}", opt.seq, cfg.clock_mhz),
    ] {
        key.feed(part.as_bytes());
    }
    key.feed(&gen::asic::liberty_key(&source)?.to_le_bytes());
    // The block's own Verilog and its submodules': the rest of the design does not change it
    // (its activity comes from a run of this configuration, whose problem is fixed).
    for name in manifest.subtree(&block.module(cfg)) {
        let entry = manifest
            .module(&name)
            .with_context(|| format!("the design has no module {name}"))?;
        let text = std::fs::read(manifest.absolute(&rtl, &entry.file)?)?;
        key.feed(gen::cache::without_provenance(&text));
    }
    key.feed(cfg.to_toml().as_bytes());
    let cached = gen::cache::cache_root()
        .join("power")
        .join(format!("{:016x}.json", key.0));
    if opt.keep.is_none() {
        if let Ok(text) = std::fs::read_to_string(&cached) {
            if let Ok(p) = serde_json::from_str::<BlockPower>(&text) {
                return Ok(p);
            }
        }
    }
    let p = measure(
        cfg,
        block,
        opt,
        (&source, &lib_name, node_nm),
        (&work, &manifest),
    )?;
    std::fs::create_dir_all(cached.parent().context("the cache folder")?)?;
    let tmp = cached.with_extension(format!("tmp{}", std::process::id()));
    std::fs::write(&tmp, serde_json::to_string_pretty(&p)?)?;
    std::fs::rename(&tmp, &cached)?;
    Ok(p)
}

fn measure(
    cfg: &CoreConfig,
    block: Block,
    opt: &Options,
    (source, lib_name, node_nm): (&Path, &str, f64),
    (work, manifest): (&Path, &gen::Manifest),
) -> Result<BlockPower> {
    let lib = gen::asic::load(source, lib_name, work)?;
    let module = block.module(cfg);
    let ports = ports(manifest, &module)?;
    // 1. The RTL run, with the block's waveform.
    let vcd = rtl_run(cfg, block, opt, work)?;
    // 2. The netlist: module by module at the clock, flattened after mapping.
    let mapped = map(cfg, &lib, &module, (work, manifest))?;
    // 3. The replay, into the RTL and the netlist.
    let (rtl_run, gl_run, toggles) = replay(cfg, block, &ports, &vcd, &mapped, work)?;
    // 4. Activities and OpenSTA's power.
    let (parts, gated) = price(cfg, block, &lib, &mapped, &toggles, rtl_run.cycles, work)?;
    Ok(BlockPower {
        block,
        module,
        scope: block.scope().to_string(),
        library: lib.name.clone(),
        node_nm,
        clock_mhz: cfg.clock_mhz,
        variant: cfg.variant.name().to_string(),
        seq: opt.seq,
        cycles: rtl_run.cycles,
        events: rtl_run.events,
        area_um2: mapped.area,
        checksum: gl_run.checksum,
        gates: gated.gates,
        gates_opened: gated.opened,
        parts,
    })
}

/// Runs `block`'s design through `regflash sim` with the block's waveform: the waveform's path.
fn rtl_run(cfg: &CoreConfig, block: Block, opt: &Options, work: &Path) -> Result<PathBuf> {
    let cfg_path = work.join("design.toml");
    std::fs::write(&cfg_path, cfg.to_toml())?;
    let vcd = work.join("rtl.vcd");
    let exe = std::env::current_exe().context("regflash's own path")?;
    run(
        Command::new(&exe)
            .arg("sim")
            .arg("--config")
            .arg(&cfg_path)
            .args(["--seq", &opt.seq.to_string(), "--wave-scope", block.scope()])
            .arg("--waves")
            .arg(&vcd)
            .current_dir(work),
        "the RTL run (regflash sim)",
    )?;
    Ok(vcd)
}

/// The block's netlist at the library, and what the replays need of the mapping.
struct Mapped {
    /// The block's module.
    module: String,
    /// The netlist's text (`net.v`) and its instances.
    net_text: String,
    cells: Vec<netlist::Instance>,
    /// The RTL's files (the RTL replay's sources).
    files: Vec<String>,
    /// Cell area, µm².
    area: f64,
    period_ps: f64,
}

/// Maps `module` at `lib` for the configuration's clock (module by module, flattened after
/// mapping; the clock gates as the library's cell) and writes the cells' models for the
/// gate-level replay (`models.v`).
fn map(
    cfg: &CoreConfig,
    lib: &gen::asic::Liberty,
    module: &str,
    (work, manifest): (&Path, &gen::Manifest),
) -> Result<Mapped> {
    let rtl = work.join("rtl");
    let period_ps = 1e6 / cfg.clock_mhz;
    // The RTL's files for the replay; for the mapping, the clock gate is the library's cell
    // instead of its simulation model.
    let files = manifest.absolute_files(&rtl)?;
    let gate_model = manifest
        .module(hdl::clock_gate::NAME)
        .map(|m| manifest.absolute(&rtl, &m.file))
        .transpose()?;
    let map_files: Vec<&String> = files
        .iter()
        .filter(|f| Some(*f) != gate_model.as_ref())
        .collect();
    let icg = work.join("icg.v");
    std::fs::write(&icg, lib.clock_gate_netlist()?)?;
    let (buf, cap) = lib.buffer.clone().with_context(|| {
        format!(
            "{} has no buffer to drive and load the block with",
            lib.name
        )
    })?;
    std::fs::write(
        work.join("abc.constr"),
        format!("set_driving_cell {buf}\nset_load {:.4}\n", 4.0 * cap),
    )?;
    let libpath = lib.path.display().to_string();
    let script = format!(
        "read_liberty -lib {libpath}\nread_verilog {} {}\nhierarchy -check -top {module}\n\
         synth -nofsm -top {module}\ndfflibmap -liberty {libpath}\n\
         abc -D {period_ps:.0} -constr abc.constr -liberty {libpath}\nrename -enumerate -pattern c_% */c:*\nflatten\nopt_clean -purge\n\
         setundef -zero\nsplitnets -ports\nopt_clean -purge\ntee -q -o area.txt stat -liberty \
         {libpath}\nwrite_verilog -noattr -noexpr -nohex -nodec net.v\n",
        map_files.iter().map(|f| f.as_str()).collect::<Vec<_>>().join(" "),
        icg.display()
    );
    std::fs::write(work.join("map.ys"), script)?;
    let yosys = gen::tools::require(gen::tools::Tool::Yosys)?;
    run(
        Command::new(&yosys)
            .args(["-q", "-s", "map.ys"])
            .current_dir(work),
        &format!("mapping {module} at {}", lib.name),
    )?;
    let net_text = std::fs::read_to_string(work.join("net.v"))?;
    let cells = netlist::instances(&net_text);
    let area = area(&std::fs::read_to_string(work.join("area.txt"))?)?;
    // The cells' functions as Verilog, the clock gate's latch by hand (Yosys reads no
    // statetable).
    run(
        Command::new(&yosys)
            .args(["-q", "-p"])
            .arg(format!(
                "read_liberty -ignore_miss_func {libpath}; write_verilog -noattr models.v"
            ))
            .current_dir(work),
        "the library's cells as Verilog",
    )?;
    let gate = lib.clock_gate.clone().context("no clock gate")?;
    // Every storage cell starts at 0, as the RTL run's simulator starts every register (a
    // register without a reset would otherwise stay unknown at gate level, where an unknown
    // select is not resolved as RTL's `if` resolves it).
    let models =
        std::fs::read_to_string(work.join("models.v"))?.replace("  reg IQ;", "  reg IQ = 1'b0;");
    ensure!(
        !models.contains(&format!("module {}(", gate.cell))
            && !models.contains(&format!("module {} (", gate.cell)),
        "Yosys wrote a model of {}: the flow's own would clash",
        gate.cell
    );
    let test = gate
        .test
        .as_ref()
        .map_or(String::new(), |t| format!(" | {t}"));
    let test_port = gate
        .test
        .as_ref()
        .map_or(String::new(), |t| format!(", input {t}"));
    std::fs::write(
        work.join("models.v"),
        models
            + &format!(
                "module {c} (input {ck}, input {e}{test_port}, output {g});\n  reg iq = 1'b0;\n  \
                 always @({ck} or {e}) if (!{ck}) iq = {e}{test};\n  assign {g} = {ck} & iq;\nendmodule\n",
                c = gate.cell,
                ck = gate.clock,
                e = gate.enable,
                g = gate.out
            ),
    )?;
    for c in &cells {
        ensure!(
            !(lib.flip_flops.contains(&c.cell) && c.pins.contains_key("SE")),
            "the netlist uses the scan flip-flop {}, which has no model",
            c.cell
        );
    }
    Ok(Mapped {
        module: module.to_string(),
        net_text,
        cells,
        files,
        area,
        period_ps,
    })
}

/// Replays the block's ports from the waveform `vcd` into its RTL and its netlist: both runs'
/// counts (they must agree, and the outputs bit for bit) and the netlist's toggles.
fn replay(
    cfg: &CoreConfig,
    block: Block,
    ports: &replay::Ports,
    vcd: &Path,
    mapped: &Mapped,
    work: &Path,
) -> Result<(replay::Counts, replay::Counts, vcd::Toggles)> {
    let (files, module) = (&mapped.files, mapped.module.as_str());
    let names: Vec<&str> = ports.inputs.iter().map(|p| p.0.as_str()).collect();
    let inst = block.scope().rsplit('.').next().unwrap_or_default();
    let changes = vcd::changes(vcd, inst, &names)?;
    let events = block.events(cfg);
    let iverilog = gen::tools::require(gen::tools::Tool::Iverilog)?;
    let vvp = iverilog.with_file_name("vvp");
    let mut results = vec![];
    let mut toggles = None;
    for (tag, gate_level) in [("rtl", false), ("gl", true)] {
        let tb = work.join(format!("tb_{tag}.v"));
        std::fs::write(
            &tb,
            replay::testbench(
                module,
                ports,
                &changes,
                &events,
                (gate_level, &format!("{tag}_outs.txt")),
            )?,
        )?;
        let mut cmd = Command::new(&iverilog);
        cmd.args(["-s", "tb", "-o", &format!("{tag}.vvp")]).arg(&tb);
        if gate_level {
            cmd.arg("-DDUMP").arg("net.v").arg("models.v");
        } else {
            cmd.args(files);
        }
        run(
            cmd.current_dir(work),
            &format!("compiling the {tag} replay"),
        )?;
        let mut cmd = Command::new(&vvp);
        cmd.args(["-n", &format!("{tag}.vvp")]).current_dir(work);
        let out = if gate_level {
            let (out, t) = streamed(cmd, &work.join("gl.vcd"))?;
            toggles = Some(t);
            out
        } else {
            run(&mut cmd, &format!("the {tag} replay"))?
        };
        results.push(replay::counts(&out)?);
    }
    let toggles = toggles.context("the gate-level replay's activity")?;
    let [rtl_run, gl_run]: [replay::Counts; 2] =
        results.try_into().expect("an RTL and a gate-level run");
    ensure!(
        rtl_run.cycles == gl_run.cycles && rtl_run.events == gl_run.events,
        "the netlist of {module} does not reproduce its RTL's events: RTL {rtl_run:?}, netlist \
         {gl_run:?}"
    );
    let read = |f: &str| std::fs::read_to_string(work.join(f));
    if let Some((edge, port, bit)) = replay::first_difference(
        &read("rtl_outs.txt")?,
        &read("gl_outs.txt")?,
        &ports.outputs,
    ) {
        bail!(
            "the netlist of {module} does not reproduce its RTL: {port}[{bit}] differs at rising \
             edge {edge} out of reset ({})",
            work.display()
        );
    }
    Ok((rtl_run, gl_run, toggles))
}

/// Prices every cell with OpenSTA from the measured activities (the gated branches by their
/// own clocks, `sta::gated`), and sums the cells by part: (the parts, the clock gates).
fn price(
    cfg: &CoreConfig,
    block: Block,
    lib: &gen::asic::Liberty,
    mapped: &Mapped,
    toggles: &vcd::Toggles,
    cycles: u64,
    work: &Path,
) -> Result<(Vec<Part>, sta::Gated)> {
    let (net_text, cells, period_ps) = (&mapped.net_text, &mapped.cells, mapped.period_ps);
    let module = mapped.module.as_str();
    let gate = lib.clock_gate.clone().context("no clock gate")?;
    let (acts, _unannotated) = sta::activities(toggles, cells, &netlist::ports(net_text), lib);
    let period_ns = period_ps / 1e3;
    let gated = sta::gated(&acts, cells, lib, period_ns)?;
    // OpenSTA reads the block behind a wrapper that cuts its inputs (`sta::wrap`: its own
    // propagation would otherwise replace the measured activities).
    let (net, cut) = (work.join("sta_net.v"), work.join("cut.lib"));
    std::fs::write(&net, sta::wrap(net_text, module, "clk"))?;
    std::fs::write(&cut, sta::CUT_LIBRARY)?;
    let inputs = netlist::inputs(net_text);
    let design = sta::Design {
        libs: [lib.path.as_path(), cut.as_path()],
        net: &net,
        inputs: &inputs,
    };
    let plain = sta::report(work, "plain", &design, period_ns, &acts)?;
    let measured = sta::report(work, "gated", &design, period_ns, &gated.measured)?;
    let mut idle_cmds = vec!["set_power_activity -global -activity 0.0 -duty 0.5".to_string()];
    idle_cmds.extend(gated.idle.iter().cloned());
    let idle = sta::report(work, "idle", &design, period_ns, &idle_cmds)?;
    // Per part: each cell from the run that prices it right.
    let pj = |w: f64| w / (cfg.clock_mhz * 1e6) * 1e12 * cycles as f64;
    let mut parts: BTreeMap<&str, Part> = BTreeMap::new();
    let kind = |c: &netlist::Instance| {
        if c.cell == gate.cell {
            CellKind::Gate
        } else if gated.cells.contains(&c.name) {
            CellKind::GatedFlop
        } else if lib.flip_flops.contains(&c.cell) {
            CellKind::Flop
        } else {
            CellKind::Logic
        }
    };
    for c in cells {
        let k = kind(c);
        let run = if matches!(k, CellKind::Gate | CellKind::GatedFlop) {
            &measured
        } else {
            &plain
        };
        let (Some(m), Some(i)) = (run.get(&c.name), idle.get(&c.name)) else {
            bail!("OpenSTA's report has no cell {}", c.name);
        };
        let name = block.part(&c.name, k);
        let p = parts.entry(name).or_insert_with(|| Part {
            name: name.to_string(),
            cells: 0,
            measured_pj: 0.0,
            idle_pj: 0.0,
        });
        p.cells += 1;
        p.measured_pj += pj(m[3]);
        p.idle_pj += pj(i[3]);
    }
    Ok((parts.into_values().collect(), gated))
}

/// Runs the gate-level replay `cmd`, its waveform (`$dumpfile` at `fifo`) read through a pipe
/// as it is written: a row's dump is over a gigabyte, and reading it while the simulation runs
/// takes neither the disk nor the time of a second pass. Returns the run's output and the
/// nets' transitions. A failed or short run ends the read; a failed read drains the pipe so
/// the run can finish; nothing waits forever.
fn streamed(mut cmd: Command, fifo: &Path) -> Result<(String, vcd::Toggles)> {
    use std::process::Stdio;
    let _ = std::fs::remove_file(fifo);
    run(
        Command::new("mkfifo").arg(fifo),
        "making a pipe for the gate-level waveform",
    )?;
    let child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .context("the gate-level replay: cannot start vvp")?;
    let pipe = fifo.to_path_buf();
    let read = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let done = read.clone();
    let waiter = std::thread::spawn(move || {
        let out = child.wait_with_output();
        // A reader still waiting for the pipe to open (the run ended before it opened its
        // waveform) is released by a writer that opens and closes it. The non-blocking open
        // fails while no reader has the pipe open, so it is tried until the read is over.
        while !done.load(std::sync::atomic::Ordering::Acquire) {
            if release(&pipe) {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        out
    });
    let toggles = vcd::toggles(fifo, "dut");
    read.store(true, std::sync::atomic::Ordering::Release);
    if toggles.is_err() {
        // A run still writing its waveform writes the rest into nothing, until it ends.
        drain(fifo, &waiter);
    }
    let out = waiter
        .join()
        .map_err(|_| anyhow::anyhow!("the gate-level replay's waiter panicked"))?
        .context("the gate-level replay")?;
    let _ = std::fs::remove_file(fifo);
    if !out.status.success() {
        bail!(
            "the gate-level replay failed ({}):\n{}",
            out.status,
            gen::tools::tail(&out, 60)
        );
    }
    let text =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    Ok((text, toggles?))
}

/// Linux's `O_NONBLOCK` (the same on x86-64 and arm64).
const O_NONBLOCK: i32 = 0o4000;

/// Reads `fifo` into nothing, without blocking, until the run `waiter` waits for has ended.
fn drain<T>(fifo: &Path, waiter: &std::thread::JoinHandle<T>) {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let Ok(mut f) = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(O_NONBLOCK)
        .open(fifo)
    else {
        return;
    };
    let mut buf = vec![0u8; 1 << 16];
    loop {
        match f.read(&mut buf) {
            Ok(n) if n > 0 => {}
            Err(e) if e.kind() != std::io::ErrorKind::WouldBlock => return,
            _ if waiter.is_finished() => return,
            _ => std::thread::sleep(std::time::Duration::from_millis(5)),
        }
    }
}

/// Opens `fifo` for writing without blocking, and closes it: whether a reader had it open.
fn release(fifo: &Path) -> bool {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .write(true)
        .custom_flags(O_NONBLOCK)
        .open(fifo)
        .is_ok()
}

/// `Chip area for module …: N` of Yosys's `stat -liberty`.
fn area(stat: &str) -> Result<f64> {
    stat.lines()
        .find_map(|l| {
            let (_, v) = l.split_once("Chip area")?;
            v.rsplit(':').next()?.trim().parse().ok()
        })
        .context("Yosys's stat has no chip area")
}

/// The parts of a PE whose dynamic energy is its MACs', its register-file writes', its reads'.
const PE_MAC_PARTS: [&str; 3] = ["multiplier", "adder", "MAC registers and logic"];
const PE_WRITE_PARTS: [&str; 2] = ["gated flip-flops", "clock gates"];
const PE_READ_PARTS: [&str; 2] = ["own logic", "own flip-flops"];

/// The PE's figures for an energy table: (pJ per MAC, per register-file read, per write, per
/// cycle), each part's dynamic energy over its events and the clock and leakage per cycle, so
/// that the figures times the run's own counts give the measured energy back.
pub fn pe_figures(pe: &BlockPower) -> Result<[f64; 4]> {
    ensure!(pe.block == Block::Pe, "{} is not the PE", pe.block.name());
    for p in &pe.parts {
        ensure!(
            PE_MAC_PARTS
                .iter()
                .chain(&PE_WRITE_PARTS)
                .chain(&PE_READ_PARTS)
                .any(|n| *n == p.name),
            "the PE's part `{}` is in no figure",
            p.name
        );
    }
    // With runs in the MAC's loop the accumulator port reads a few times a run, and the PE's
    // own logic (its operation and address pipeline, its read multiplexers, the run's control)
    // follows its steps: priced per MAC, a register-file read at nothing of its own.
    let (mac_parts, read): (Vec<&str>, f64) = if pe.runs() {
        (
            PE_MAC_PARTS.iter().chain(&PE_READ_PARTS).copied().collect(),
            0.0,
        )
    } else {
        (
            PE_MAC_PARTS.to_vec(),
            pe.per_event(&PE_READ_PARTS, "rf_read")?,
        )
    };
    Ok([
        pe.per_event(&mac_parts, "mac")?,
        read,
        pe.per_event(&PE_WRITE_PARTS, "rf_write")?,
        pe.idle_pj_per_cycle(),
    ])
}

/// The row engine's arithmetic units, priced per row and cycle.
const ROW_UNITS: [&str; 4] = [
    "row update",
    "exp unit and sum",
    "reciprocal",
    "normalization",
];

/// A row's figures for an energy table: its arithmetic units per cycle (the measurement's own
/// energy per cycle: their stage registers take the clock every cycle, and the operands that
/// are not isolated toggle whether an operation is due or not), the P bank's
/// reads and writes per access (dynamic), and its control per cycle with the P bank's clock
/// and leakage, so that the figures times the run's counts give the row's measured energy
/// less its PE tier's.
pub fn row_figures(row: &BlockPower) -> Result<kernels::energy::RowGates> {
    ensure!(
        row.block == Block::Row,
        "{} is not a PE row",
        row.block.name()
    );
    let cycles = row.cycles.max(1) as f64;
    let sum = |names: &[&str], f: fn(&Part) -> f64| -> f64 {
        row.parts
            .iter()
            .filter(|p| names.contains(&p.name.as_str()))
            .map(f)
            .sum()
    };
    Ok(kernels::energy::RowGates {
        softmax_cycle: sum(&ROW_UNITS, |p| p.measured_pj) / cycles,
        p_read: row.per_event(&["P bank reads"], "p_read")?,
        p_write: row.per_event(&["P bank writes"], "p_write")?,
        control_cycle: (sum(&["row control"], |p| p.measured_pj)
            + sum(&["P bank reads", "P bank writes"], |p| p.idle_pj))
            / cycles,
    })
}

/// The `[gates]` section of an energy table (`--energy`) from the PE's characterization and,
/// if given, its row's.
pub fn table_toml(pe: &BlockPower, row: Option<&BlockPower>) -> Result<String> {
    let [mac, read, write, cycle] = pe_figures(pe)?;
    let runs = pe.runs();
    let mut s = format!(
        "# regflash power: {module} ({scope}) at {lib}, {mhz:.0} MHz, a {variant} run of seq {seq}: {cycles} cycles, \
         {events}; its netlist's outputs equal its RTL's (checksum {sum}).\n\
         # The figures replace the table's MAC, PE register-file and PE clock-and-leakage prices\n\
         # (and with the row's, the softmax, a register design's P bank and the row's control);\n\
         # everything else keeps the default table's sourced figures.\n\
         [gates]\nnode_nm = {node}\nmodule = \"{module}\"\n\
         pe_mac = {mac:.6}        # pJ per MAC: multiplier, adder, MAC registers{own} (dynamic)\n\
         pe_rf_read = {read:.6}    # pJ per accumulator read: {read_what} (dynamic)\n\
         pe_rf_write = {write:.6}   # pJ per register-file write: the word's flip-flops and clock gates (dynamic)\n\
         pe_cycle = {cycle:.6}      # pJ per PE-cycle: clock and leakage, no data moving\n",
        own = if runs { ", the PE's own logic" } else { "" },
        read_what = if runs {
            "in pe_mac (runs in the MAC's loop)"
        } else {
            "the PE's own logic and flip-flops"
        },
        module = pe.module,
        scope = pe.scope,
        lib = pe.library,
        mhz = pe.clock_mhz,
        seq = pe.seq,
        cycles = pe.cycles,
        events = pe
            .events
            .iter()
            .map(|(k, v)| format!("{v} {k}"))
            .collect::<Vec<_>>()
            .join(", "),
        sum = pe.checksum,
        variant = pe.variant,
        node = pe.node_nm,
    );
    if let Some(row) = row {
        ensure!(
            row.library == pe.library && row.node_nm == pe.node_nm,
            "the row was measured at {}, the PE at {}",
            row.library,
            pe.library
        );
        let r = row_figures(row)?;
        s += &format!(
            "# The row ({}, {}): {} cycles, its outputs equal its RTL's (checksum {}).\n\
             row_softmax_cycle = {:.6}  # pJ per row-cycle: row update, exp, reciprocal, normalization units\n\
             row_p_read = {:.6}         # pJ per P-bank read (a register design's)\n\
             row_p_write = {:.6}\n\
             row_control_cycle = {:.6}  # pJ per row-cycle: its control, the P bank's clock and leakage\n",
            row.module,
            row.scope,
            row.cycles,
            row.checksum,
            r.softmax_cycle,
            r.p_read,
            r.p_write,
            r.control_cycle
        );
    }
    s += &format!(
        "source = \"gate level: regflash power at {}, {:.0} MHz, OpenSTA with activity replayed \
         from a {} RTL run (seq {})\"\n",
        pe.library, pe.clock_mhz, pe.variant, pe.seq
    );
    Ok(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A replay that ends before it opens its waveform, or fails, ends the read: an error, not
    /// a wait.
    #[test]
    fn a_run_that_writes_no_waveform_ends_the_read() {
        let dir = gen::tools::ScratchDir::new("streamed").unwrap();
        let fifo = dir.path().join("gl.vcd");
        let e = streamed(Command::new("true"), &fifo)
            .unwrap_err()
            .to_string();
        assert!(e.contains("no $enddefinitions"), "{e}");
        let e = streamed(Command::new("false"), &fifo)
            .unwrap_err()
            .to_string();
        assert!(e.contains("the gate-level replay failed"), "{e}");
        // A run that writes a waveform is read as it writes.
        let mut sh = Command::new("sh");
        sh.arg("-c").arg(format!(
            "printf '$scope module dut $end\\n$var wire 1 ! clk $end\\n$upscope $end\\n\
             $enddefinitions $end\\n#0\\n0!\\n#1\\n1!\\n' > {}; echo done",
            fifo.display()
        ));
        let (out, t) = streamed(sh, &fifo).unwrap();
        assert_eq!((out.trim(), t.cycles), ("done", 1));
    }
}
