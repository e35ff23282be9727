//! ASIC synthesis and static timing at a standard-cell library (docs/asic.md): Yosys maps every
//! unique module once to the library's cells (hierarchically: a module's area is its own cells
//! plus its children's, counted per instance; each module in its own run, in parallel, cached
//! by content), and OpenSTA times each module that is small enough with its children inside,
//! under the constraints of the project's SDC template.
//!
//! These are synthesis-level figures: an ideal clock with a stated uncertainty, no placement
//! (the library's default wire-load model where it has one, else no wire load), ABC's
//! mapping without sizing after placement. They are optimistic and labelled so.
//!
//! Libraries are data, never part of the repository: `--liberty FILE` names one, or `--lib
//! NAME` resolves a known one in the PDK folder (`REGFLASH_PDK_DIR`, else `../shared/pdk`
//! beside the checkout) or, for `osu018`, where Debian's `qflow-tech-osu018` installs it.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, ensure, Context, Result};
use serde::Serialize;

use crate::manifest::Manifest;
use crate::output::generator_id;
use crate::tools::{require, run, ScratchDir, Tool};

/// A library regflash knows by name: (name, node, path under the PDK folder or absolute).
pub const KNOWN: [(&str, &str, &str); 5] = [
    (
        "nangate45",
        "45 nm",
        "nangate45/NangateOpenCellLibrary_typical.lib.gz",
    ),
    ("asap7", "7 nm", "asap7/asap7sc7p5t_rvt_tt.lib.gz"),
    (
        "sky130hd",
        "130 nm",
        "sky130hd/sky130_fd_sc_hd__tt_025C_1v80.lib.gz",
    ),
    (
        "sg13g2",
        "130 nm",
        "sg13g2/sg13g2_stdcell_typ_1p20V_25C.lib.gz",
    ),
    (
        "osu018",
        "180 nm",
        "/usr/share/qflow/tech/osu018/osu018_stdcells.lib",
    ),
];

/// Modules with more cells than this (their whole hierarchy) are not timed as one netlist:
/// their submodules are (the deep tile of docs/asic.md, its 151k-cell PE row timed whole,
/// takes 43 s at asap7 with every module mapped already).
pub const TIMING_CELL_LIMIT: u64 = 1_000_000;

/// The PDK folder: `REGFLASH_PDK_DIR`, else `../shared/pdk` from the current folder or from
/// the source tree.
pub fn pdk_dir() -> Option<PathBuf> {
    if let Some(d) = std::env::var_os("REGFLASH_PDK_DIR") {
        return Some(PathBuf::from(d));
    }
    let here = PathBuf::from("../shared/pdk");
    let tree = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/pdk");
    [here, tree].into_iter().find(|d| d.is_dir())
}

/// The liberty file `--lib name` or `--liberty path` names, and its label (name, node).
pub fn resolve(lib: Option<&str>, liberty: Option<&Path>) -> Result<(PathBuf, String, String)> {
    match (lib, liberty) {
        (Some(_), Some(_)) => bail!("give --lib or --liberty, not both"),
        (None, None) => bail!(
            "the ASIC target needs a standard-cell library: --lib {} or --liberty FILE",
            KNOWN.map(|k| k.0).join("|")
        ),
        (None, Some(path)) => {
            ensure!(
                path.is_file(),
                "--liberty {}: no such file (give the path of a liberty file, .lib or .lib.gz)",
                path.display()
            );
            let name = path
                .file_name()
                .map_or("liberty".into(), |n| n.to_string_lossy().into_owned());
            Ok((path.to_path_buf(), name, "node unknown".into()))
        }
        (Some(name), None) => {
            let (_, node, rel) = KNOWN.iter().find(|k| k.0 == name).with_context(|| {
                format!(
                    "--lib {name} is not a library regflash knows: choose {} or give --liberty \
                     FILE",
                    KNOWN.map(|k| k.0).join(", ")
                )
            })?;
            let path = if rel.starts_with('/') {
                PathBuf::from(rel)
            } else {
                let dir = pdk_dir().with_context(|| {
                    format!(
                        "--lib {name}: no PDK folder: set REGFLASH_PDK_DIR to the folder that \
                         holds {rel}, or run from a checkout with ../shared/pdk beside it \
                         (osu018 installs anywhere: apt-get install qflow-tech-osu018)"
                    )
                })?;
                dir.join(rel)
            };
            ensure!(
                path.is_file(),
                "--lib {name}: {} is missing{}",
                path.display(),
                if name == "osu018" {
                    " (install it: sudo apt-get install -y qflow-tech-osu018, or run \
                     scripts/ensure-tools)"
                } else {
                    " (set REGFLASH_PDK_DIR to the PDK folder, or give --liberty FILE)"
                }
            );
            Ok((path, name.to_string(), node.to_string()))
        }
    }
}

/// What regflash reads of a liberty file: its name, each cell's area, which cells are
/// flip-flops and which latches, and its smallest buffer.
#[derive(Clone, Debug)]
pub struct Liberty {
    /// The file Yosys and OpenSTA read (decompressed).
    pub path: PathBuf,
    pub name: String,
    pub area: BTreeMap<String, f64>,
    /// Cells with an `ff` group.
    pub flip_flops: BTreeSet<String>,
    /// Cells with a `latch` group.
    pub latches: BTreeSet<String>,
    /// The smallest buffer (one input, an output that is that input) and its input pin's
    /// capacitance in fF: ABC's driving cell and, four times over, its load, so that it
    /// buffers and sizes the mapped netlist (`abc -constr`, whose loads are in fF).
    pub buffer: Option<(String, f64)>,
    /// The library's `default_wire_load` model, which OpenSTA applies to every net.
    pub wire_load: Option<String>,
    /// Each cell's input pins.
    pub inputs: BTreeMap<String, BTreeSet<String>>,
    /// Each cell's output pins (the power flow annotates a net's activity on its driver).
    pub outputs: BTreeMap<String, BTreeSet<String>>,
    /// Cells marked `dont_use` (the file's own, or [`dont_use`]'s): never a driving cell.
    pub excluded: BTreeSet<String>,
    /// The name patterns of [`dont_use`] applied (empty: the file as it is).
    pub dont_use: Vec<String>,
    /// The smallest integrated clock-gating cell that gates on a rising edge
    /// (`clock_gating_integrated_cell : latch_posedge…`, its pins named by the
    /// `clock_gate_*_pin` attributes), if the library has one: the design's clock gates
    /// (`hdl::clock_gate`) map to it.
    pub clock_gate: Option<GateCell>,
}

/// An integrated clock-gating cell and its pins.
#[derive(Clone, Debug, PartialEq)]
pub struct GateCell {
    pub cell: String,
    pub clock: String,
    pub enable: String,
    pub out: String,
    /// The scan-test enable (tied low), if it has one.
    pub test: Option<String>,
}

impl Liberty {
    /// The netlist of the design's clock gate (`hdl::clock_gate::NAME`, ports `clk`, `en`,
    /// `gclk`) in this library's cells: its integrated clock-gating cell, or at `osu018`,
    /// which has none, a latch open while the clock is low, an inverter and an AND (the same
    /// circuit, of three cells). Any other library without one is refused.
    pub fn clock_gate_netlist(&self) -> Result<String> {
        let name = hdl::clock_gate::NAME;
        let body = match &self.clock_gate {
            Some(g) => {
                let test = g
                    .test
                    .as_ref()
                    .map_or(String::new(), |t| format!(", .{t}(1'b0)"));
                format!(
                    "    {} u_icg (.{}(clk), .{}(en){test}, .{}(gclk));",
                    g.cell, g.clock, g.enable, g.out
                )
            }
            None if self.name.starts_with("osu018") => {
                for c in ["INVX1", "LATCH", "AND2X1"] {
                    ensure!(
                        self.area.contains_key(c),
                        "osu018's liberty has no {c} cell"
                    );
                }
                "    wire clk_n, en_l;\n    INVX1 u_inv (.A(clk), .Y(clk_n));\n    \
                 LATCH u_latch (.CLK(clk_n), .D(en), .Q(en_l));\n    \
                 AND2X1 u_and (.A(clk), .B(en_l), .Y(gclk));"
                    .to_string()
            }
            None => bail!(
                "{} has no integrated clock-gating cell (`clock_gating_integrated_cell : \
                 latch_posedge`), which the design's clock gates map to: give a library that \
                 has one",
                self.name
            ),
        };
        Ok(format!(
            "// {name} in {}'s cells (regflash's ASIC flow).\nmodule {name} (\n    input  wire \
             clk,\n    input  wire en,\n    output wire gclk\n);\n{body}\nendmodule\n",
            self.name
        ))
    }
}

/// The cells the flow does not map to at a known library (`--lib name`), as substrings of
/// their names: at asap7 the weak drives (`xp33`, `xp5`, `xp67`, `x1p5`, … and the `HB*xp67`
/// hold buffers), as OpenROAD-flow-scripts' asap7 platform excludes them
/// (flow/platforms/asap7/config.mk, `DONT_USE_CELLS = *x1p*_ASAP7* *xp*_ASAP7*`). ABC mapped
/// with them puts 0.05 to 0.1 ns cells on nets they cannot drive. None elsewhere, and none for
/// a `--liberty` file, which is read as it is.
pub fn dont_use(name: &str) -> &'static [&'static str] {
    match name {
        "asap7" => &["xp", "x1p"],
        _ => &[],
    }
}

/// Reads `source` (`.gz` is decompressed into `scratch`, as Yosys 0.23 and OpenSTA 2019 read
/// plain text only), the library `name` (`resolve`'s) as the flow maps to it: its
/// [`dont_use`] cells marked `dont_use : true` (a copy in `scratch`), which ABC does not map
/// to and the flow takes for no driving cell.
pub fn load(source: &Path, name: &str, scratch: &Path) -> Result<Liberty> {
    let gz = source.extension().is_some_and(|e| e == "gz");
    let excluded = dont_use(name);
    let text = if gz {
        let out = run(
            Command::new("gzip").arg("-dc").arg(source),
            &format!("decompressing {}", source.display()),
        )?;
        String::from_utf8(out.stdout)
            .with_context(|| format!("{} is not text", source.display()))?
    } else {
        std::fs::read_to_string(source)
            .with_context(|| format!("cannot read the liberty file {}", source.display()))?
    };
    let (text, path) = if gz || !excluded.is_empty() {
        let text = if excluded.is_empty() {
            text
        } else {
            mark_dont_use(&text, excluded)
        };
        let path = scratch.join("cells.lib");
        std::fs::write(&path, &text)?;
        (text, path)
    } else {
        (text, source.to_path_buf())
    };
    let mut lib = parse(&text, path).with_context(|| {
        format!(
            "{} is not a liberty file regflash can use",
            source.display()
        )
    })?;
    lib.dont_use = excluded.iter().map(|p| p.to_string()).collect();
    Ok(lib)
}

/// `text` with `dont_use : true ;` in every cell whose name contains one of `patterns`.
fn mark_dont_use(text: &str, patterns: &[&str]) -> String {
    let mut out = String::with_capacity(text.len() + 4096);
    for line in text.lines() {
        out += line;
        out.push('\n');
        if let Some(cell) = group(line.trim(), "cell") {
            if line.trim_end().ends_with('{') && patterns.iter().any(|p| cell.contains(p)) {
                out += "    dont_use : true ;\n";
            }
        }
    }
    out
}

/// The group name of `line` if it opens `kind (name)`.
fn group<'a>(line: &'a str, kind: &str) -> Option<&'a str> {
    let rest = line.strip_prefix(kind)?.trim_start().strip_prefix('(')?;
    Some(rest.split(')').next()?.trim().trim_matches('"'))
}

/// A cell's pins as the parser sees them: (name, is an input, capacitance, function, is a
/// clock).
type Pin = (String, bool, f64, String, bool);

/// The cell's (input pin capacitance) if it is a buffer: one input, one output whose function
/// is that input.
fn buffer_input(pins: &[Pin]) -> Option<f64> {
    let inputs: Vec<&Pin> = pins.iter().filter(|p| p.1).collect();
    let outputs: Vec<&Pin> = pins.iter().filter(|p| !p.1).collect();
    match (inputs.as_slice(), outputs.as_slice()) {
        ([i], [o]) if o.3 == i.0 => Some(i.2),
        _ => None,
    }
}

/// The value of a `key : value ;` attribute line.
fn attribute<'a>(l: &'a str, key: &str) -> Option<&'a str> {
    let v = l.strip_prefix(key)?;
    let v = v.trim_start_matches([' ', '\t']).strip_prefix(':')?;
    Some(v.trim_matches([' ', '\t', ';', '"']))
}

fn parse(text: &str, path: PathBuf) -> Result<Liberty> {
    let mut name = None;
    // fF per capacitance unit (`capacitive_load_unit (1, pf)`: 1000).
    let mut ff_per_unit = 1.0;
    let mut area = BTreeMap::new();
    let (mut flip_flops, mut latches) = (BTreeSet::new(), BTreeSet::new());
    let mut cell: Option<String> = None;
    let mut pins: Vec<Pin> = vec![];
    let mut buffers: Vec<(f64, String, f64)> = vec![];
    let mut wire_load = None;
    let mut inputs: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut outputs: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut excluded = BTreeSet::new();
    // Integrated clock gates: (cell, kind) and each one's pins by role.
    let mut gate_kind: BTreeMap<String, String> = BTreeMap::new();
    let mut gate_pins: BTreeMap<String, BTreeMap<&'static str, String>> = BTreeMap::new();
    let mut end_cell =
        |cell: &Option<String>, pins: &mut Vec<Pin>, area: &BTreeMap<String, f64>| {
            if let Some(c) = cell {
                if let (Some(cap), Some(&a)) = (buffer_input(pins), area.get(c)) {
                    buffers.push((a, c.clone(), cap));
                }
                // Clock pins are the clock tree's (ideal here), not a load to size for.
                let ins = pins
                    .iter()
                    .filter(|p| p.1 && !p.4)
                    .map(|p| p.0.clone())
                    .collect();
                inputs.insert(c.clone(), ins);
            }
            pins.clear();
        };
    for line in text.lines() {
        let l = line.trim();
        if let Some(n) = group(l, "library") {
            name.get_or_insert_with(|| n.to_string());
        } else if let Some(n) = group(l, "cell") {
            end_cell(&cell, &mut pins, &area);
            cell = Some(n.to_string());
        } else if let Some(n) = group(l, "pin") {
            pins.push((n.to_string(), false, 0.0, String::new(), false));
        } else if let (Some(c), true, Some(v)) = (&cell, pins.is_empty(), attribute(l, "dont_use"))
        {
            if v == "true" {
                excluded.insert(c.clone());
            }
        } else if let (Some(c), Some(v)) = (&cell, attribute(l, "clock_gating_integrated_cell")) {
            gate_kind.insert(c.clone(), v.to_string());
        } else if let (Some(c), Some(p), Some(role)) = (
            &cell,
            pins.last(),
            ["clock", "enable", "out", "test"]
                .into_iter()
                .find(|r| attribute(l, &format!("clock_gate_{r}_pin")) == Some("true")),
        ) {
            gate_pins
                .entry(c.clone())
                .or_default()
                .insert(role, p.0.clone());
        } else if let (Some(p), Some(v)) = (pins.last_mut(), attribute(l, "direction")) {
            p.1 = v == "input";
            if let (Some(c), "output") = (&cell, v) {
                outputs.entry(c.clone()).or_default().insert(p.0.clone());
            }
        } else if let (Some(p), Some(v)) = (pins.last_mut(), attribute(l, "clock")) {
            p.4 = v == "true";
        } else if let (Some(p), Some(v)) = (pins.last_mut(), attribute(l, "capacitance")) {
            p.2 = v.parse().unwrap_or(0.0);
        } else if let (Some(p), Some(v)) = (pins.last_mut(), attribute(l, "function")) {
            p.3 = v.trim_matches(['(', ')', ' ']).to_string();
        } else if let (None, Some(v)) = (&cell, attribute(l, "default_wire_load")) {
            wire_load = Some(v.trim_matches('"').to_string());
        } else if let Some(v) = group(l, "capacitive_load_unit") {
            let (n, u) = v
                .split_once(',')
                .context("capacitive_load_unit (n, unit)")?;
            let n: f64 = n.trim().parse().context("capacitive_load_unit's number")?;
            ff_per_unit = n * match u.trim().to_ascii_lowercase().as_str() {
                "ff" => 1.0,
                "pf" => 1e3,
                other => bail!("capacitive_load_unit in {other:?}: regflash reads ff or pf"),
            };
        } else if let (Some(c), Some(v)) = (&cell, l.strip_prefix("area")) {
            let v = v
                .trim_start_matches([' ', '\t', ':'])
                .trim_end_matches([' ', '\t', ';']);
            if let Ok(a) = v.parse::<f64>() {
                area.entry(c.clone()).or_insert(a);
            }
        } else if let Some(c) = &cell {
            if group(l, "ff").is_some() {
                flip_flops.insert(c.clone());
            } else if group(l, "latch").is_some() {
                latches.insert(c.clone());
            }
        }
    }
    end_cell(&cell, &mut pins, &area);
    let name = name.context("no `library (...)` group")?;
    ensure!(!area.is_empty(), "no cell has an area");
    ensure!(!flip_flops.is_empty(), "no flip-flop cell (`ff` group)");
    // The smallest rising-edge gate the flow may use (not one that gates after the edge).
    let clock_gate = gate_kind
        .iter()
        .filter(|(c, k)| {
            k.starts_with("latch_posedge") && !k.contains("postcontrol") && !excluded.contains(*c)
        })
        .filter_map(|(c, _)| {
            // Its pins as the `clock_gate_*_pin` attributes name them (a cell without them is
            // not taken).
            let p = gate_pins.get(c)?;
            Some((
                area.get(c).copied().unwrap_or(f64::MAX),
                GateCell {
                    cell: c.clone(),
                    clock: p.get("clock")?.clone(),
                    enable: p.get("enable")?.clone(),
                    out: p.get("out")?.clone(),
                    test: p.get("test").cloned(),
                },
            ))
        })
        .min_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cell.cmp(&b.1.cell)))
        .map(|g| g.1);
    for c in gate_kind.keys() {
        // A clock gate is the design's one deliberate latch, never a latch to report.
        latches.remove(c);
    }
    buffers.retain(|b| !excluded.contains(&b.1));
    buffers.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
    Ok(Liberty {
        path,
        name,
        area,
        flip_flops,
        latches,
        buffer: buffers
            .into_iter()
            .next()
            .map(|(_, c, cap)| (c, cap * ff_per_unit)),
        wire_load,
        inputs,
        outputs,
        excluded,
        dont_use: vec![],
        clock_gate,
    })
}

/// The worst setup path of a module under the constraints.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct PathTiming {
    pub startpoint: String,
    pub endpoint: String,
    /// Data arrival at the endpoint, ns (input paths include the input delay budget).
    pub arrival_ns: f64,
    /// Worst slack at the target clock, ns (negative: violated).
    pub slack_ns: f64,
    /// Cell instances on the path.
    pub cells: u64,
    /// The shortest period this path meets with the SDC's budgets scaled along: for a path
    /// with k of its two ends at a port (each end a budget of `IO_DELAY_FRACTION` of the
    /// period), target − slack / (1 − k·fraction); register to register, target − slack.
    pub min_period_ns: f64,
    pub fmax_mhz: f64,
    /// The path as OpenSTA reports it: the launch (a register's clock-to-Q, or the input's
    /// budget), each cell output it passes with its delay, the capture (the library's setup
    /// time, or the output's budget) and the clock's uncertainty.
    pub steps: Vec<PathStep>,
}

/// One line of a timing path: a pin (`instance/pin (cell)`) or a budget (`input external
/// delay`, `clock uncertainty`, `library setup time`, `output external delay`), its delay
/// and, on the data path, the arrival after it (ns).
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct PathStep {
    pub point: String,
    pub delay_ns: f64,
    pub arrival_ns: Option<f64>,
}

/// The worst hold path of a module under the constraints (the clock's uncertainty included).
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct HoldTiming {
    pub startpoint: String,
    pub endpoint: String,
    /// Worst hold slack, ns (negative: violated).
    pub slack_ns: f64,
}

/// One unique module.
#[derive(Clone, Debug, Serialize)]
pub struct AsicModule {
    pub name: String,
    /// Instances under the top.
    pub copies: u64,
    /// Its own library cells (submodule instances not counted) and their area.
    pub cells: u64,
    pub area_um2: f64,
    /// Of its own area, the flip-flops'.
    pub flop_area_um2: f64,
    /// With every submodule instance expanded.
    pub total_cells: u64,
    pub total_area_um2: f64,
    /// The modules it instantiates, and how many times each.
    pub children: BTreeMap<String, u64>,
    /// None when not timed (see `untimed`).
    pub timing: Option<PathTiming>,
    /// The worst hold path (None when not timed, or no path has a hold check).
    pub hold: Option<HoldTiming>,
    /// Why it was not timed.
    pub untimed: Option<String>,
}

/// An ASIC synthesis and timing report.
#[derive(Clone, Debug, Serialize)]
pub struct AsicReport {
    pub top: String,
    pub library: String,
    pub node: String,
    pub liberty: String,
    pub clock_mhz: f64,
    /// Smallest first.
    pub modules: Vec<AsicModule>,
    pub latches: u64,
    pub yosys_problems: Vec<String>,
    /// The driving cell ABC buffered and sized the netlist for (none: the library has no
    /// buffer regflash recognizes, and the netlist is mapped without sizing).
    pub abc_buffer: Option<String>,
    /// The modules mapped a second time, for the load their outputs (or the nets they pass to
    /// their submodules) drive in the design where it is over [`HEAVY_LOAD_PINS`]
    /// (`crate::loads`): the load each took, in input pins (the one it drives, capped at
    /// [`MAX_LOAD_PINS`], or halved from there where ABC aborted).
    pub remapped: BTreeMap<String, u64>,
    /// Modules ABC could not map at any heavier load than the nominal one (they keep it).
    pub remap_failed: Vec<String>,
    /// What the figures are.
    pub label: String,
}

impl AsicReport {
    pub fn module(&self, name: &str) -> Option<&AsicModule> {
        self.modules.iter().find(|m| m.name == name)
    }

    /// The top's whole area, µm².
    pub fn total_area_um2(&self) -> f64 {
        self.module(&self.top).map_or(0.0, |m| m.total_area_um2)
    }

    pub fn passed(&self) -> bool {
        self.latches == 0 && self.yosys_problems.is_empty()
    }

    /// The design by block: from the top down, a module that is only a wrapper (its own cells
    /// under 1 % of its area with submodules: the top, the core, the engine) is replaced by its
    /// children. Each block with its instances, their area, and the slowest module timed in
    /// its subtree; largest first.
    pub fn blocks(&self) -> Vec<AsicBlock> {
        let mut found: BTreeMap<String, u64> = BTreeMap::new();
        let mut todo = vec![(self.top.clone(), 1u64)];
        while let Some((name, k)) = todo.pop() {
            let Some(m) = self.module(&name) else {
                continue;
            };
            if !m.children.is_empty() && m.area_um2 < 0.01 * m.total_area_um2 {
                todo.extend(m.children.iter().map(|(c, n)| (c.clone(), k * n)));
            } else {
                *found.entry(name).or_default() += k;
            }
        }
        let mut blocks: Vec<AsicBlock> = found
            .into_iter()
            .map(|(name, copies)| {
                let m = self.module(&name).expect("found above");
                AsicBlock {
                    area_um2: copies as f64 * m.total_area_um2,
                    slowest: self.slowest_in(&name),
                    name,
                    copies,
                }
            })
            .collect();
        blocks.sort_by(|a, b| b.area_um2.total_cmp(&a.area_um2));
        blocks
    }

    /// The design's fmax, as (block, its slowest module, that module's worst path); None when
    /// nothing is timed. From the top down, a module timed as one netlist speaks for its whole
    /// subtree (so cross-module paths count wherever the hierarchy fits the timing limit), and
    /// an untimed one is opened into its submodules: the slowest such module, named with the
    /// block of [`AsicReport::blocks`] it belongs to (the top itself when it was timed whole).
    pub fn design_fmax(&self) -> Option<(String, String, PathTiming)> {
        let (module, t) = self.slowest_in(&self.top)?;
        let block = self
            .blocks()
            .into_iter()
            .find(|b| b.slowest.as_ref().is_some_and(|(m, _)| *m == module))
            .map_or_else(|| module.clone(), |b| b.name);
        Some((block, module, t))
    }

    /// The timed module under `name` (itself included) with the longest minimum period. A
    /// module timed as one netlist speaks for everything under it (its submodules' own
    /// figures carry port budgets on what are internal nets there): only an untimed module
    /// is opened into its submodules, so a block's fmax is one figure, its module row's.
    fn slowest_in(&self, name: &str) -> Option<(String, PathTiming)> {
        let mut best: Option<(String, PathTiming)> = None;
        let mut todo = vec![name.to_string()];
        let mut seen = BTreeSet::new();
        while let Some(n) = todo.pop() {
            let Some(m) = self.module(&n) else { continue };
            if !seen.insert(n.clone()) {
                continue;
            }
            if let Some(t) = &m.timing {
                if best
                    .as_ref()
                    .is_none_or(|b| t.min_period_ns > b.1.min_period_ns)
                {
                    best = Some((n.clone(), t.clone()));
                }
                continue;
            }
            todo.extend(m.children.keys().cloned());
        }
        best
    }
}

/// A block of the design (see [`AsicReport::blocks`]).
#[derive(Clone, Debug, Serialize)]
pub struct AsicBlock {
    pub name: String,
    pub copies: u64,
    /// All instances, submodules included.
    pub area_um2: f64,
    /// The slowest module timed in it, and its worst path.
    pub slowest: Option<(String, PathTiming)>,
}

/// Synthesizes the folder `dir` at the library `lib` for a `clock_mhz` clock and times its
/// modules. `label` is (library name, node).
pub fn asic(dir: &Path, lib: &Liberty, label: (&str, &str), clock_mhz: f64) -> Result<AsicReport> {
    asic_timing_up_to(dir, lib, label, clock_mhz, TIMING_CELL_LIMIT)
}

/// What every mapping run starts from: the clock checked, the folder's manifest (its memories
/// within what the flow maps), and Yosys.
fn prepare(dir: &Path, clock_mhz: f64) -> Result<(Manifest, PathBuf)> {
    ensure!(
        clock_mhz.is_finite() && clock_mhz > 0.0,
        "the clock must be a positive frequency in MHz, not {clock_mhz}"
    );
    let manifest = Manifest::load(dir)?;
    crate::flow::refuse_big_memories(&manifest)?;
    Ok((manifest, require(Tool::Yosys)?))
}

/// Shard `index` of `count` of [`asic`]'s first mapping (every module at its nominal load),
/// for a job array: the unique modules, largest first, dealt round the shards, each shard
/// mapping its own into the cache (`crate::cache::cache_root`, which the shards share, say
/// through `REGFLASH_CACHE_DIR` on a shared file system). An [`asic`] run on that cache then
/// maps only the modules it maps again for their loads, and times the design. Returns the
/// modules this shard mapped (or found mapped).
pub fn map_shard(
    dir: &Path,
    lib: &Liberty,
    clock_mhz: f64,
    (index, count): (usize, usize),
) -> Result<Vec<String>> {
    ensure!(
        index < count,
        "a shard is i of n with 0 <= i < n, not {index} of {count}"
    );
    let (manifest, yosys) = prepare(dir, clock_mhz)?;
    let scratch = ScratchDir::new("asic-shard")?;
    let map = MapRecipe::new(&yosys, lib, clock_mhz)?;
    let mapped = map_modules(
        &map,
        &manifest,
        (dir, scratch.path()),
        &BTreeMap::new(),
        Some((index, count)),
    )?;
    Ok(mapped.modules.into_iter().map(|(name, _)| name).collect())
}

/// [`asic`], timing only the modules of at most `cell_limit` cells (their hierarchy inside):
/// the larger ones say so in their `untimed`. A gate on the blocks' timing (the suite's) needs
/// no minutes-long timing of the whole top.
pub fn asic_timing_up_to(
    dir: &Path,
    lib: &Liberty,
    label: (&str, &str),
    clock_mhz: f64,
    cell_limit: u64,
) -> Result<AsicReport> {
    let (manifest, yosys) = prepare(dir, clock_mhz)?;
    let sta = require(Tool::OpenSta)?;
    let scratch = ScratchDir::new("asic")?;
    let at = |n: &str| scratch.path().join(n);
    let map = MapRecipe::new(&yosys, lib, clock_mhz)?;
    let mapped = map_modules(
        &map,
        &manifest,
        (dir, scratch.path()),
        &BTreeMap::new(),
        None,
    )?;
    // The modules whose outputs drive far more than the nominal load across the hierarchy are
    // mapped again for the load they see (ABC then sizes and buffers those drivers).
    // The mapped netlists read for the loads are kept for the design's netlist below (a
    // module not mapped again keeps its entry).
    let mut texts: BTreeMap<PathBuf, String> = BTreeMap::new();
    let mut remapped: BTreeMap<String, u64> = match lib.buffer {
        Some(_) => {
            let mut nets = BTreeMap::new();
            for (name, entry) in &mapped.modules {
                let text = std::fs::read_to_string(entry.join("mapped.v"))?;
                nets.insert(name.clone(), crate::loads::parse(&text));
                texts.insert(entry.clone(), text);
            }
            crate::loads::heavy_outputs(&nets, &lib.inputs, NOMINAL_LOAD_PINS, HEAVY_LOAD_PINS)
                .into_iter()
                .map(|(m, pins)| (m, pins.min(MAX_LOAD_PINS)))
                .collect()
        }
        None => BTreeMap::new(),
    };
    let mut remap_failed = vec![];
    let mapped = if remapped.is_empty() {
        mapped
    } else {
        let again = map_modules(&map, &manifest, (dir, scratch.path()), &remapped, None)?;
        for (name, entry) in &again.modules {
            // A module ABC could not map at its load took a lighter one, or the nominal.
            if let Ok(text) = std::fs::read_to_string(entry.join(LOAD_MARKER)) {
                match text.lines().next().and_then(|l| l.parse::<u64>().ok()) {
                    Some(pins) if pins > NOMINAL_LOAD_PINS => {
                        remapped.insert(name.clone(), pins);
                    }
                    _ => {
                        remapped.remove(name);
                        remap_failed.push(name.clone());
                    }
                }
            }
        }
        again
    };
    // The design's netlist: the modules' mapped netlists, one after another.
    let mut netlist = String::new();
    let mut own: BTreeMap<String, BTreeMap<String, u64>> = BTreeMap::new();
    for (name, entry) in &mapped.modules {
        match texts.remove(entry) {
            Some(text) => netlist += &text,
            None => netlist += &std::fs::read_to_string(entry.join("mapped.v"))?,
        }
        let stat =
            crate::flow::parse_stat_json(&std::fs::read_to_string(entry.join("stat.json"))?)?;
        let key = [name.clone(), format!("\\{name}")];
        let v = key
            .iter()
            .find_map(|k| stat["modules"].get(k))
            .with_context(|| format!("yosys's stat of `{name}` does not list it"))?;
        let types = v["num_cells_by_type"]
            .as_object()
            .map(|t| {
                t.iter()
                    .map(|(k, n)| (k.clone(), n.as_u64().unwrap_or(0)))
                    .collect()
            })
            .unwrap_or_default();
        own.insert(name.clone(), types);
    }
    std::fs::write(at("netlist.v"), netlist)?;
    let yosys_problems = mapped
        .check
        .lines()
        .filter(|l| l.trim_start().starts_with("Warning:"))
        .map(|l| l.trim().to_string())
        .collect();
    // Modules of the design that Yosys does not list: blackboxes (memory macros).
    let macros: BTreeSet<String> = manifest
        .modules
        .iter()
        .map(|m| m.name.clone())
        .filter(|n| !own.contains_key(n))
        .collect();
    let areas = module_areas(&own, lib, &macros)?;
    let latches = areas.get(&manifest.top).map_or(0, |a| a.latches);
    let copies = manifest.copies()?;
    let mut modules: Vec<AsicModule> = areas
        .into_iter()
        .map(|(name, a)| AsicModule {
            copies: copies.get(name.as_str()).copied().unwrap_or(0),
            cells: a.cells,
            area_um2: a.area,
            flop_area_um2: a.flops,
            total_cells: a.total_cells,
            total_area_um2: a.total_area,
            children: manifest
                .module(&name)
                .map(|e| e.children.clone())
                .unwrap_or_default(),
            timing: None,
            hold: None,
            untimed: None,
            name,
        })
        .collect();
    modules.sort_by(|a, b| a.total_cells.cmp(&b.total_cells).then(a.name.cmp(&b.name)));
    time_modules(
        &sta,
        &manifest,
        lib,
        (&mut modules, cell_limit),
        clock_mhz,
        &at("netlist.v"),
        scratch.path(),
    )?;
    Ok(AsicReport {
        top: manifest.top.clone(),
        library: label.0.to_string(),
        node: label.1.to_string(),
        liberty: lib.name.clone(),
        clock_mhz,
        modules,
        latches,
        yosys_problems,
        abc_buffer: lib.buffer.as_ref().map(|b| b.0.clone()),
        remapped,
        remap_failed,
        label: timing_label(lib),
    })
}

/// What a report's figures are: the flow, the clock's uncertainty, what drives the inputs and
/// loads the outputs, and the wire-load model OpenSTA applies.
fn timing_label(lib: &Liberty) -> String {
    let unc = crate::constraints::CLOCK_UNCERTAINTY_FRACTION * 100.0;
    let hold = crate::constraints::HOLD_UNCERTAINTY_FRACTION * 100.0;
    let io = crate::constraints::IO_DELAY_FRACTION * 100.0;
    let ports = match &lib.buffer {
        Some((cell, cap)) => format!(
            "inputs driven by {cell}, outputs loaded with four of its inputs ({:.2} fF), each \
             module's outputs sized by ABC for four such inputs or, where they drive more than \
             {HEAVY_LOAD_PINS} input pins across the hierarchy, for that load",
            4.0 * cap
        ),
        None => "ideal input transitions and no output load (the library has no buffer \
                 regflash recognizes)"
            .into(),
    };
    let wires = match &lib.wire_load {
        Some(w) => format!("the library's default wire-load model `{w}` on every net"),
        None => "no wire load (the library has no default wire-load model)".into(),
    };
    let cells = if lib.dont_use.is_empty() {
        String::new()
    } else {
        format!(
            " (not mapped to: the {} cells named *{}*, OpenROAD-flow-scripts' weak drives)",
            lib.excluded.len(),
            lib.dont_use.join("*, *")
        )
    };
    format!(
        "synthesis-level: Yosys + ABC mapping{cells}; OpenSTA with an ideal clock of {unc:.0} % \
         uncertainty for setup and {hold:.0} % for hold, input and output delays of {io:.0} % \
         of the period, {ports}, {wires}; no placement (optimistic); memory macros are not in \
         the area"
    )
}

/// What every module's mapping shares: Yosys, the library (and a hash of its text), the
/// target period and ABC's arguments (its buffering constraints and its script).
struct MapRecipe<'a> {
    yosys: &'a Path,
    /// `yosys -V` (and with it ABC's): a new tool maps anew.
    yosys_version: String,
    liberty: &'a Path,
    liberty_key: u64,
    period_ps: f64,
    /// The library's smallest buffer and its input capacitance (fF): ABC's driving cell, and
    /// the unit of its loads. None: no buffering and sizing.
    buffer: Option<(String, f64)>,
    /// ABC's script.
    script: String,
    /// The design's clock gate in the library's cells ([`Liberty::clock_gate_netlist`]), or
    /// why it has none (an error only for a design that has clock gates).
    clock_gate: std::result::Result<String, String>,
}

/// The load ABC sizes a module's outputs for, in the smallest buffer's inputs.
pub const NOMINAL_LOAD_PINS: u64 = 4;

/// A module whose outputs drive more input pins than this across the hierarchy is mapped
/// again for that load.
pub const HEAVY_LOAD_PINS: u64 = 8;

/// The heaviest load a module is mapped again for (ABC builds the buffer tree from there).
/// Where ABC aborts (at 128 pins on `seed`'s PE tier) the load is halved until it maps.
pub const MAX_LOAD_PINS: u64 = 256;

/// In a cache entry mapped for a heavy load: ABC failed at it, and the module was mapped at
/// a lighter one (the file's first line: the pins it took, the nominal load at worst; then
/// the error).
const LOAD_MARKER: &str = "load_taken.txt";

impl<'a> MapRecipe<'a> {
    /// The recipe of ../shared/pdk/README.md, hierarchical (each unique module mapped once, in
    /// its own Yosys run, in parallel and cached by content; then the mapped netlists joined),
    /// at `lib` for a `clock_mhz` clock, with buffering and gate sizing after mapping (ABC's
    /// `buffer; upsize; dnsize`), driven by the library's smallest buffer into four of its
    /// inputs.
    fn new(yosys: &'a Path, lib: &'a Liberty, clock_mhz: f64) -> Result<Self> {
        let version = run(Command::new(yosys).arg("-V"), "yosys -V")?;
        Ok(MapRecipe {
            yosys,
            yosys_version: String::from_utf8_lossy(&version.stdout).trim().to_string(),
            liberty: &lib.path,
            liberty_key: liberty_key(&lib.path)?,
            period_ps: 1e6 / clock_mhz * abc_delay_fraction(),
            buffer: lib.buffer.clone(),
            script: abc_script(lib.buffer.is_some()),
            clock_gate: lib.clock_gate_netlist().map_err(|e| format!("{e:#}")),
        })
    }

    /// ABC's constraints for outputs that drive `pins` input pins: the file's text, and the
    /// arguments of `abc` (with the script) given its path.
    fn constraints(&self, pins: u64) -> Option<(String, String)> {
        let (cell, cap) = self.buffer.as_ref()?;
        let text = format!("set_driving_cell {cell}\nset_load {}\n", pins as f64 * cap);
        Some((text, self.script.clone()))
    }
}

/// The joined parts of a design mapped module by module.
struct Mapped {
    /// Each module's cache entry: `mapped.v` (its own cells, its submodules as instances, ports
    /// split into bits) and `stat.json`.
    modules: Vec<(String, PathBuf)>,
    /// Yosys's `check` output of every module.
    check: String,
}

/// Bumped when the per-module script changes, so that cached netlists are not reused.
const MAP_RECIPE_VERSION: &str = "asic-map-4";

/// ABC's delay target as a fraction of the period: the budget of a path from an input to an
/// output, after both ports' external delays and the setup uncertainty (0.55). With the whole
/// period as its target, ABC took a path as met that the constraints then failed, and neither
/// restructured nor upsized it.
pub fn abc_delay_fraction() -> f64 {
    1.0 - 2.0 * crate::constraints::IO_DELAY_FRACTION
        - crate::constraints::CLOCK_UNCERTAINTY_FRACTION
}

/// The ABC script (Yosys's `-script +…` form, `{D}` the delay target): delay-oriented
/// restructuring (`&synch2`) between SOP balancing passes (`&if -g`, which undo the chains
/// `&synch2` alone makes of an incrementer's carry), structural choices (`&dch -f`), the
/// mapper (`&nf`), then, when the library has a buffer, buffering and sizing. Yosys 0.23's
/// default script runs area rewriting (`dc2`, `&fraig`, `scorr`) first, which turns the
/// parallel-prefix adders of Yosys's techmap into ripple chains: a registered 48-bit add takes
/// 880 ps at asap7 with it and 369 ps with this; a 36-bit increment 640 and 323 (clock to D).
pub fn abc_script(buffered: bool) -> String {
    let map = "+strash;&get,-n;&st;&if,-g;&st;&synch2;&if,-g;&st;&dch,-f;&nf,{D};&put";
    let size = if buffered {
        ";buffer;upsize,{D};dnsize,{D}"
    } else {
        ""
    };
    format!("{map}{size};stime,-p")
}

/// What a cache entry holds: the mapped netlist, Yosys's `check` and `stat -json`.
const ENTRY_FILES: [&str; 3] = ["mapped.v", "check.log", "stat.json"];

/// A hash of the liberty file's text, for the cache keys.
pub fn liberty_key(path: &Path) -> Result<u64> {
    let bytes = std::fs::read(path)
        .with_context(|| format!("cannot read the liberty file {}", path.display()))?;
    let mut h = crate::cache::Fnv::new();
    h.feed(&bytes);
    Ok(h.0)
}

/// A Verilog file's text without its `//` comment lines (the generator's header, which holds
/// the whole configuration, differs between designs whose module is the same).
fn verilog_body(path: &Path) -> Result<Vec<u8>> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read {} (listed in the manifest)", path.display()))?;
    Ok(text
        .lines()
        .filter(|l| !l.trim_start().starts_with("//"))
        .flat_map(|l| l.bytes().chain(std::iter::once(b'\n')))
        .collect())
}

/// Maps every module under the top once, each in its own Yosys run with its submodules as
/// black boxes: `synth`, `dfflibmap`, `abc` at the period (buffered and sized when the library
/// has a buffer), `check`. The runs go in parallel, one per core, largest first (memory bits,
/// then text), and each
/// mapped netlist is cached under the cache root (`asic/`), keyed by the module's text, its
/// submodules' text, the library's text, the period and the recipe: a module shared by two
/// designs, or a second run, is not mapped again.
/// With `shard` (i, n), only the jobs k (largest first) with k mod n = i are mapped.
fn map_modules(
    recipe: &MapRecipe,
    manifest: &Manifest,
    (dir, scratch): (&Path, &Path),
    loads: &BTreeMap<String, u64>,
    shard: Option<(usize, usize)>,
) -> Result<Mapped> {
    let copies = manifest.copies()?;
    let mut jobs = vec![];
    for name in copies.keys() {
        let entry = manifest
            .module(name)
            .with_context(|| format!("module `{name}` is instantiated but not in the manifest"))?;
        let mut file = PathBuf::from(manifest.absolute(dir, &entry.file)?);
        if *name == hdl::clock_gate::NAME {
            // The clock gate is the library's cell, not its simulation model.
            file = scratch.join(format!("{name}.v"));
            std::fs::write(
                &file,
                recipe
                    .clock_gate
                    .as_ref()
                    .map_err(|e| anyhow::anyhow!("{e}"))?,
            )?;
        }
        let body = verilog_body(&file)?;
        if String::from_utf8_lossy(&body).contains("(* blackbox *)") {
            continue; // a memory macro: not mapped
        }
        let pins = loads.get(*name).copied().unwrap_or(NOMINAL_LOAD_PINS);
        let constr = recipe.constraints(pins);
        let constr_key = constr
            .as_ref()
            .map_or(recipe.script.clone(), |(t, s)| format!("{t}{s}"));
        let mut key = crate::cache::Fnv::new();
        key.feed(MAP_RECIPE_VERSION.as_bytes());
        key.feed(recipe.yosys_version.as_bytes());
        key.feed(&recipe.liberty_key.to_le_bytes());
        key.feed(format!("{:.0} {constr_key}", recipe.period_ps).as_bytes());
        key.feed(&body);
        let mut children = vec![];
        for child in entry.children.keys() {
            let c = manifest.module(child).with_context(|| {
                format!("module `{child}` is instantiated but not in the manifest")
            })?;
            let path = PathBuf::from(manifest.absolute(dir, &c.file)?);
            let text = verilog_body(&path)?;
            key.feed(&text);
            let is_macro = String::from_utf8_lossy(&text).contains("(* blackbox *)");
            children.push((child.clone(), path, is_macro));
        }
        // Largest first: memory bits dominate the work (a memory becomes flip-flops and
        // multiplexers), then the text.
        let bits: u64 = manifest
            .memories
            .iter()
            .filter(|m| m.module == *name && !m.blackbox)
            .map(|m| m.depth as u64 * m.width as u64)
            .sum();
        let size = (bits, body.len());
        jobs.push((size, name.to_string(), file, children, key.0, constr));
    }
    jobs.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
    if let Some((i, n)) = shard {
        jobs = jobs
            .into_iter()
            .enumerate()
            .filter(|(k, _)| k % n == i)
            .map(|(_, j)| j)
            .collect();
    }
    let cache = crate::cache::cache_root().join("asic");
    std::fs::create_dir_all(&cache)
        .with_context(|| format!("cannot create the cache folder {}", cache.display()))?;
    let next = std::sync::atomic::AtomicUsize::new(0);
    let workers = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(jobs.len().max(1));
    // The first error stops every worker before its next module.
    let failed = std::sync::atomic::AtomicBool::new(false);
    let results: Vec<Result<Vec<(usize, PathBuf, String)>>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..workers)
            .map(|_| {
                s.spawn(|| {
                    let mut done = vec![];
                    loop {
                        if failed.load(std::sync::atomic::Ordering::Relaxed) {
                            return Ok(done);
                        }
                        let n = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        let Some((_, name, file, children, key, constr)) = jobs.get(n) else {
                            return Ok(done);
                        };
                        let entry = cache.join(format!("{name}-{key:016x}"));
                        let job = MapJob {
                            name,
                            file,
                            children,
                            constr: constr.as_ref(),
                        };
                        let one = || map_cached(recipe, &job, &entry, scratch, loads);
                        match one() {
                            Ok(check) => done.push((n, entry, check)),
                            Err(e) => {
                                failed.store(true, std::sync::atomic::Ordering::Relaxed);
                                return Err(e);
                            }
                        }
                    }
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("a mapping thread panicked"))
            .collect()
    });
    let mut all = vec![];
    for r in results {
        all.extend(r?);
    }
    all.sort_by_key(|d| d.0);
    Ok(Mapped {
        modules: all
            .iter()
            .map(|d| (jobs[d.0].1.clone(), d.1.clone()))
            .collect(),
        check: all
            .iter()
            .map(|d| d.2.as_str())
            .collect::<Vec<_>>()
            .join("\n"),
    })
}

/// Maps `job` into its cache entry `entry` unless the entry is whole, and returns its `check`
/// log. ABC may abort at a heavy load: the load is then halved until it maps, down to the
/// nominal one, and the entry says which load it took.
fn map_cached(
    recipe: &MapRecipe,
    job: &MapJob,
    entry: &Path,
    scratch: &Path,
    loads: &BTreeMap<String, u64>,
) -> Result<String> {
    let name = job.name;
    if !ENTRY_FILES.iter().all(|f| entry.join(f).is_file()) {
        if let Err(e) = map_one(recipe, job, entry, scratch) {
            let Some(&want) = loads.get(name) else {
                return Err(e);
            };
            let mut pins = want;
            loop {
                pins = (pins / 2).max(NOMINAL_LOAD_PINS);
                let c = recipe.constraints(pins);
                let lighter = MapJob {
                    constr: c.as_ref(),
                    ..*job
                };
                match map_one(recipe, &lighter, entry, scratch) {
                    Ok(()) => break,
                    Err(e) if pins <= NOMINAL_LOAD_PINS => return Err(e),
                    Err(_) => {}
                }
            }
            std::fs::write(
                entry.join(LOAD_MARKER),
                format!("{pins}\nat {want} pins: {e:#}"),
            )?;
        }
    }
    std::fs::read_to_string(entry.join("check.log"))
        .with_context(|| format!("the cached mapping of `{name}` is incomplete"))
}

/// Maps one module (see [`map_modules`]) into the cache entry `entry`, written whole or not at
/// all.
fn map_one(recipe: &MapRecipe, job: &MapJob, entry: &Path, scratch: &Path) -> Result<()> {
    let MapJob {
        name,
        file,
        children,
        constr,
    } = *job;
    let work = scratch.join(format!("map-{name}-{:x}", entry_hash(entry)));
    std::fs::create_dir_all(&work)?;
    let constr = match constr {
        Some((text, script)) => {
            let path = work.join("abc.constr");
            std::fs::write(&path, text)?;
            format!(" -constr {} -script {script}", path.display())
        }
        None => format!(" -script {}", recipe.script),
    };
    let liberty = recipe.liberty.display();
    let kids = if children.is_empty() {
        String::new()
    } else {
        let files: Vec<String> = children.iter().map(|c| c.1.display().to_string()).collect();
        format!("read_verilog -lib {}\n", files.join(" "))
    };
    // Before the ports are split, the submodules (not the memory macros) stop being black
    // boxes, so that `splitnets -ports` splits theirs too and rewrites this module's
    // connections to them bit by bit, as a whole-design run does: the joined netlist then
    // links.
    let open: Vec<String> = children
        .iter()
        .filter(|c| !c.2)
        .map(|c| format!("={}", c.0))
        .collect();
    let open = if open.is_empty() {
        String::new()
    } else {
        format!("setattr -mod -unset blackbox {}\n", open.join(" "))
    };
    let script = format!(
        "read_liberty -lib {liberty}\n{kids}read_verilog {file}\nhierarchy -check -top {name}\n\
         synth -top {name}\n\
         dfflibmap -liberty {liberty}\nabc -D {period_ps:.0}{constr} -liberty {liberty}\n\
         opt_clean -purge\ntee -q -o {check} check\nsetundef -zero\n{open}splitnets -ports\n\
         opt_clean -purge\ntee -q -o {stat} stat -json\n\
         write_verilog -noattr -noexpr -nohex -nodec {net}\n",
        file = file.display(),
        stat = work.join("stat.json").display(),
        period_ps = recipe.period_ps,
        check = work.join("check.log").display(),
        net = work.join("mapped.v").display(),
    );
    std::fs::write(work.join("map.ys"), script)?;
    run(
        Command::new(recipe.yosys)
            .arg("-q")
            .arg("-s")
            .arg(work.join("map.ys"))
            .current_dir(&work),
        &format!("yosys mapping `{name}`"),
    )?;
    // Only the module itself: the opened submodules are empty shells.
    let net = work.join("mapped.v");
    let parts = netlist_modules(&std::fs::read_to_string(&net)?);
    let own = parts
        .get(name)
        .with_context(|| format!("yosys's netlist of `{name}` does not define it"))?;
    std::fs::write(&net, own)?;
    // Into the cache by a rename, so a half-written entry is never taken for a whole one.
    let tmp = entry.with_extension(format!("tmp{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&tmp);
    std::fs::create_dir_all(&tmp)?;
    for f in ENTRY_FILES.iter().chain(&["map.ys"]) {
        std::fs::copy(work.join(f), tmp.join(f))?;
    }
    if entry.is_dir() && !ENTRY_FILES.iter().all(|f| entry.join(f).is_file()) {
        // A broken entry (a file deleted by hand): replaced, not trusted.
        std::fs::remove_dir_all(entry)
            .with_context(|| format!("cannot remove the broken cache entry {}", entry.display()))?;
    }
    if std::fs::rename(&tmp, entry).is_err() {
        // Another run filled the entry first: keep its copy.
        let _ = std::fs::remove_dir_all(&tmp);
    }
    Ok(())
}

/// One module to map: its name and file, its submodules (name, file, a memory macro), and
/// ABC's constraints (the file's text and the script; none: unbuffered).
struct MapJob<'a> {
    name: &'a str,
    file: &'a Path,
    children: &'a [(String, PathBuf, bool)],
    constr: Option<&'a (String, String)>,
}

/// A short tag of a cache entry's path, so that two mappings of one module (for two loads)
/// work in folders of their own.
fn entry_hash(entry: &Path) -> u64 {
    let mut h = crate::cache::Fnv::new();
    h.feed(entry.as_os_str().as_encoded_bytes());
    h.0
}

/// A module's cells and area: its own, and with its submodules expanded.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
struct Areas {
    cells: u64,
    area: f64,
    flops: f64,
    latches: u64,
    total_cells: u64,
    total_area: f64,
}

/// Every module's [`Areas`] from Yosys's cells by type (`own`): a type that is a module in
/// `own` is a submodule, one in `macros` a memory macro (no cells, no area: priced apart), a
/// library cell has its liberty area, and an unmapped latch (`$_DLATCH*`, `$_SR*`, which
/// Yosys 0.23's `dfflibmap` leaves) counts as a latch; anything else is an error.
fn module_areas(
    own: &BTreeMap<String, BTreeMap<String, u64>>,
    lib: &Liberty,
    macros: &BTreeSet<String>,
) -> Result<BTreeMap<String, Areas>> {
    let mut out: BTreeMap<String, Areas> = BTreeMap::new();
    // Children before parents: repeat until every module is done (the hierarchy is acyclic).
    while out.len() < own.len() {
        let before = out.len();
        for (name, types) in own {
            if out.contains_key(name) {
                continue;
            }
            let ready = types
                .keys()
                .all(|t| !own.contains_key(t) || out.contains_key(t));
            if !ready {
                continue;
            }
            let mut a = Areas::default();
            for (t, &n) in types {
                if let Some(child) = out.get(t) {
                    a.total_cells += n * child.total_cells;
                    a.total_area += n as f64 * child.total_area;
                    a.latches += n * child.latches;
                } else if macros.contains(t) {
                    // A macro: priced apart (the memories table).
                    continue;
                } else if t.starts_with("$_DLATCH") || t.starts_with("$_SR") {
                    a.latches += n;
                } else if let Some(&cell) = lib.area.get(t) {
                    a.cells += n;
                    a.area += n as f64 * cell;
                    if lib.flip_flops.contains(t) {
                        a.flops += n as f64 * cell;
                    }
                    if lib.latches.contains(t) {
                        a.latches += n;
                    }
                } else {
                    bail!(
                        "yosys left `{t}` in `{name}`, which {} has no cell for (a library \
                         without it cannot map this design)",
                        lib.name
                    );
                }
            }
            if name == hdl::clock_gate::NAME {
                // Its latch (a library without a clock-gating cell) is the deliberate one.
                a.latches = 0;
            }
            a.total_cells += a.cells;
            a.total_area += a.area;
            out.insert(name.clone(), a);
        }
        ensure!(out.len() > before, "the module hierarchy has a cycle");
    }
    Ok(out)
}

/// The four kinds of setup path OpenSTA is asked for separately (their budgets scale
/// differently with the period): (name, -from, -to, ends at a port).
const PATH_CLASSES: [(&str, &str, &str, u32); 4] = [
    (
        "reg-reg",
        "[all_registers -clock_pins]",
        "[all_registers -data_pins]",
        0,
    ),
    ("in-reg", "[all_inputs]", "[all_registers -data_pins]", 1),
    ("reg-out", "[all_registers -clock_pins]", "[all_outputs]", 1),
    ("in-out", "[all_inputs]", "[all_outputs]", 2),
];

/// Times every module of at most `cell_limit` cells (its hierarchy inside) in one
/// OpenSTA session: per module, the netlist is read and linked with it as the top (memory
/// macros become black boxes), the SDC of the project's template applied, and the worst
/// setup path of each [`PATH_CLASSES`] kind reported; the module's path is the one that needs
/// the longest period.
fn time_modules(
    sta: &Path,
    manifest: &Manifest,
    lib: &Liberty,
    (modules, cell_limit): (&mut [AsicModule], u64),
    clock_mhz: f64,
    netlist: &Path,
    scratch: &Path,
) -> Result<()> {
    let mut tcl = format!("read_liberty {}\n", lib.path.display());
    let parts = netlist_modules(&std::fs::read_to_string(netlist)?);
    let mut timed = vec![];
    for m in modules.iter_mut() {
        let Some(entry) = manifest.module(&m.name) else {
            m.untimed = Some("not in the manifest".into());
            continue;
        };
        if m.total_cells == 0 {
            m.untimed = Some("no cells".into());
            continue;
        }
        if m.total_cells > cell_limit {
            m.untimed = Some(format!(
                "{} cells, over the {cell_limit} timed as one netlist: its submodules are timed",
                m.total_cells
            ));
            continue;
        }
        // Its own netlist: the module and everything under it, so that OpenSTA reads only
        // what it times.
        let net = scratch.join(format!("{}.net.v", m.name));
        std::fs::write(&net, subtree_netlist(&parts, manifest, &m.name)?)?;
        let sdc = scratch.join(format!("{}.sdc", m.name));
        let mut text = crate::constraints::sdc_split_ports(entry, clock_mhz, &generator_id())?;
        // The library's smallest buffer drives the inputs, and four of its inputs load the
        // outputs (as ABC sized the netlist for).
        if let Some((cell, cap)) = &lib.buffer {
            let ins = crate::constraints::split_port_patterns(entry, true);
            if !ins.is_empty() {
                text += &format!(
                    "set_driving_cell -lib_cell {cell} [get_ports {{ {} }}]\n",
                    ins.join(" ")
                );
            }
            text += &format!("set_load {:.4} [all_outputs]\n", 4.0 * cap);
        }
        std::fs::write(&sdc, text)?;
        tcl += &format!(
            "puts \"@@ {name} link\"\nread_verilog {net}\nlink_design {name}\n\
             set_cmd_units -time ns -capacitance fF\nread_sdc {sdc}\n",
            name = m.name,
            net = net.display(),
            sdc = sdc.display()
        );
        for (class, from, to, _) in PATH_CLASSES {
            tcl += &format!(
                "puts \"@@ {name} {class}\"\n\
                 catch {{ report_checks -path_delay max -digits 4 -from {from} -to {to} }}\n",
                name = m.name
            );
        }
        tcl += &format!(
            "puts \"@@ {name} hold\"\ncatch {{ report_checks -path_delay min -digits 4 }}\n",
            name = m.name
        );
        timed.push(m.name.clone());
    }
    if timed.is_empty() {
        return Ok(());
    }
    let script = scratch.join("timing.tcl");
    std::fs::write(&script, tcl)?;
    let out = run(
        Command::new(sta)
            .arg("-exit")
            .arg(&script)
            .current_dir(scratch),
        "OpenSTA timing",
    )?;
    let text = String::from_utf8_lossy(&out.stdout);
    let period = 1000.0 / clock_mhz;
    for section in text.split("@@ ").skip(1) {
        let head = section.lines().next().unwrap_or("");
        let (name, class) = head.trim().rsplit_once(' ').unwrap_or((head, ""));
        let m = modules
            .iter_mut()
            .find(|m| m.name == name)
            .with_context(|| format!("OpenSTA reported an unknown module `{name}`"))?;
        if class == "hold" {
            m.hold = parse_hold(section);
            continue;
        }
        if class == "link" {
            // An error reading, linking or constraining the module: it is not timed, and says
            // why.
            if let Some(e) = section.lines().find(|l| l.starts_with("Error")) {
                m.untimed = Some(format!("OpenSTA: {}", e.trim()));
            }
            continue;
        }
        let ports = PATH_CLASSES
            .iter()
            .find(|c| c.0 == class)
            .with_context(|| format!("OpenSTA's output has an unknown section `{head}`"))?
            .3;
        // OpenSTA reports in ns (`set_cmd_units -time ns`), whatever the library's unit.
        if let Some(t) = parse_path(section, period, ports) {
            if m.timing
                .as_ref()
                .is_none_or(|w| t.min_period_ns > w.min_period_ns)
            {
                m.timing = Some(t);
            }
        }
    }
    for m in modules.iter_mut() {
        if m.untimed.is_some() {
            m.timing = None;
            m.hold = None;
        } else if timed.contains(&m.name) && m.timing.is_none() {
            m.untimed = Some("no constrained path".into());
        }
    }
    Ok(())
}

/// A Yosys netlist's modules by name: each one's text from `module` to `endmodule`.
fn netlist_modules(text: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let mut current: Option<(String, String)> = None;
    for line in text.lines() {
        if current.is_none() {
            if let Some(rest) = line.strip_prefix("module ") {
                let name = rest
                    .split(|c: char| c == '(' || c == ';' || c.is_whitespace())
                    .next()
                    .unwrap_or("")
                    .trim_start_matches('\\')
                    .to_string();
                current = Some((name, String::new()));
            }
        }
        if let Some((_, body)) = current.as_mut() {
            body.push_str(line);
            body.push('\n');
        }
        if line.starts_with("endmodule") {
            if let Some((name, body)) = current.take() {
                out.insert(name, body);
            }
        }
    }
    out
}

/// The netlist of `top` and every module under it (memory macros, which the netlist does not
/// define, stay black boxes).
fn subtree_netlist(
    parts: &BTreeMap<String, String>,
    manifest: &Manifest,
    top: &str,
) -> Result<String> {
    let text: String = manifest
        .subtree(top)
        .iter()
        .filter_map(|name| parts.get(name).map(String::as_str))
        .collect();
    ensure!(
        parts.contains_key(top),
        "module `{top}` is not in the mapped netlist"
    );
    Ok(text)
}

/// A `report_checks` section's field (`Startpoint:`, …), trimmed.
fn report_field(text: &str, key: &str) -> Option<String> {
    text.lines()
        .find_map(|l| l.trim().strip_prefix(key))
        .map(|v| v.trim().to_string())
}

/// The number that starts the first line of a `report_checks` section ending in `tail`.
fn report_number(text: &str, tail: impl Fn(&str) -> bool) -> Option<f64> {
    text.lines()
        .find(|l| tail(l))
        .and_then(|l| l.split_whitespace().next()?.parse::<f64>().ok())
}

/// A `report_checks` section's slack (ns).
fn report_slack(text: &str) -> Option<f64> {
    report_number(text, |l| l.contains("slack ("))
}

/// The worst hold path of a `report_checks -path_delay min` section (in ns).
fn parse_hold(text: &str) -> Option<HoldTiming> {
    Some(HoldTiming {
        startpoint: report_field(text, "Startpoint:")?,
        endpoint: report_field(text, "Endpoint:")?,
        slack_ns: report_slack(text)?,
    })
}

/// The worst path of a `report_checks` section (in ns) whose path has `ports` of its ends at
/// a port: start, end, arrival, slack, cells, the shortest period it meets.
fn parse_path(text: &str, period_ns: f64, ports: u32) -> Option<PathTiming> {
    let start = report_field(text, "Startpoint:")?;
    let end = report_field(text, "Endpoint:")?;
    let arrival = report_number(text, |l| l.trim_end().ends_with("data arrival time"))?;
    let slack = report_slack(text)?;
    // Path lines: "delay time edge instance/pin (cell)"; a cell's input and output pins are
    // one instance.
    let body = text.split("data arrival time").next()?;
    let cells = body
        .lines()
        .filter(|l| l.trim_end().ends_with(')'))
        .filter_map(|l| {
            let pin = l.split_whitespace().rev().nth(1)?;
            Some(pin.rsplit_once('/')?.0.to_string())
        })
        .collect::<BTreeSet<_>>()
        .len() as u64;
    let budget = crate::constraints::IO_DELAY_FRACTION * ports as f64
        + crate::constraints::CLOCK_UNCERTAINTY_FRACTION;
    let min_period_ns = period_ns - slack / (1.0 - budget);
    Some(PathTiming {
        steps: path_steps(text),
        startpoint: start,
        endpoint: end,
        arrival_ns: arrival,
        slack_ns: slack,
        cells,
        min_period_ns,
        fmax_mhz: 1000.0 / min_period_ns,
    })
}

/// The lines of a `report_checks` section's path ([`PathStep`]): the data path up to its
/// arrival (its first line is the launch edge at 0, dropped; the ideal clock network too),
/// then the budgets on the required side.
fn path_steps(text: &str) -> Vec<PathStep> {
    let Some((data, required)) = text.split_once("data arrival time") else {
        return vec![];
    };
    let number = |w: Option<&str>| w.and_then(|w| w.parse::<f64>().ok());
    let mut steps = vec![];
    for l in data.lines() {
        let mut w = l.split_whitespace();
        let (Some(delay), Some(arrival)) = (number(w.next()), number(w.next())) else {
            continue;
        };
        let point = w.collect::<Vec<_>>().join(" ");
        let point = point
            .strip_prefix("^ ")
            .or_else(|| point.strip_prefix("v "))
            .unwrap_or(&point)
            .to_string();
        if point.starts_with("clock ") {
            continue;
        }
        steps.push(PathStep {
            point,
            delay_ns: delay,
            arrival_ns: Some(arrival),
        });
    }
    for l in required.lines() {
        for what in [
            "clock uncertainty",
            "library setup time",
            "output external delay",
        ] {
            if l.trim_end().ends_with(what) {
                if let Some(delay) = number(l.split_whitespace().next()) {
                    steps.push(PathStep {
                        point: what.to_string(),
                        delay_ns: delay,
                        arrival_ns: None,
                    });
                }
            }
        }
    }
    steps
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn liberty_clock_gates_and_the_gate_netlist() {
        // Two rising-edge gates (the smaller taken, its test pin tied low), one that gates
        // after the edge (never taken), as the libraries write them.
        let text = r#"library (gates) {
  cell ("ICG_BIG") {
    area : 9 ;
    clock_gating_integrated_cell : "latch_posedge" ;
    pin (CK) {
      direction : input ;
      clock : true ;
      clock_gate_clock_pin : true ;
    }
    pin (E) {
      direction : input ;
      clock_gate_enable_pin : true ;
    }
    pin (GCK) {
      direction : output ;
      clock_gate_out_pin : true ;
    }
  }
  cell (ICG_SMALL) {
    area : 4 ;
    clock_gating_integrated_cell : latch_posedge_precontrol ;
    latch (IQ, IQN) {
      enable : "!CLK" ;
    }
    pin (CLK) {
      direction : input ;
      clock_gate_clock_pin : true ;
    }
    pin (ENA) {
      direction : input ;
      clock_gate_enable_pin : true ;
    }
    pin (SE) {
      direction : input ;
      clock_gate_test_pin : true ;
    }
    pin (GCLK) {
      direction : output ;
      clock_gate_out_pin : true ;
    }
  }
  cell (ICG_AFTER) {
    area : 1 ;
    clock_gating_integrated_cell : latch_negedge_postcontrol ;
    pin (C) {
      direction : input ;
      clock_gate_clock_pin : true ;
    }
    pin (EN) {
      direction : input ;
      clock_gate_enable_pin : true ;
    }
    pin (G) {
      direction : output ;
      clock_gate_out_pin : true ;
    }
  }
  cell (DFF) {
    area : 5 ;
    ff (IQ, IQN) {
      next_state : "D" ;
    }
  }
}"#;
        let l = parse(text, PathBuf::from("x")).unwrap();
        let g = l.clock_gate.clone().expect("a clock gate");
        assert_eq!(
            (
                g.cell.as_str(),
                g.clock.as_str(),
                g.enable.as_str(),
                g.out.as_str()
            ),
            ("ICG_SMALL", "CLK", "ENA", "GCLK")
        );
        assert_eq!(g.test.as_deref(), Some("SE"));
        // A clock gate is never a latch the report counts.
        assert!(l.latches.is_empty(), "{:?}", l.latches);
        let net = l.clock_gate_netlist().unwrap();
        assert!(
            net.contains("module regflash_clock_gate (")
                && net.contains("ICG_SMALL u_icg (.CLK(clk), .ENA(en), .SE(1'b0), .GCLK(gclk));"),
            "{net}"
        );
        // No gate, and not osu018: refused, saying what is missing.
        let none = parse(
            "library (plain) {\n  cell (DFF) {\n    area : 5 ;\n    ff (IQ, IQN) {\n    }\n  }\n}",
            PathBuf::new(),
        )
        .unwrap();
        let e = none.clock_gate_netlist().unwrap_err().to_string();
        assert!(
            e.contains("plain has no integrated clock-gating cell"),
            "{e}"
        );
    }

    #[test]
    fn liberty_cells_buffers_and_refusals() {
        let text = r#"library (demo) {
  time_unit : "1ps" ;
  capacitive_load_unit (1,pf) ;
  default_wire_load : "5K_hvratio_1_1" ;
  cell (INV_X1) {
    area : 0.5 ;
    pin (A) {
      direction : input ;
      capacitance : 1 ;
    }
    pin (ZN) {
      direction : output ;
      function : "!A" ;
    }
  }
  cell (BUF_X1) {
    area : 0.75 ;
    pin (A) {
      direction : input ;
      capacitance : 1.5 ;
    }
    pin (Z) {
      direction : output ;
      function : "A" ;
    }
  }
  cell (BUF_X4) {
    area : 2.0 ;
    pin (A) {
      direction : input ;
      capacitance : 3 ;
    }
    pin (Z) {
      direction : output ;
      function : "(A)" ;
    }
  }
  cell (DLH_X1) {
    area : 3 ;
    latch (Q, QN) {
      enable : "G" ;
    }
  }
  cell ("DFF_X1") {
    area : 4.25;
    ff (IQ, IQN) { next_state : "D" ; }
  }
}"#;
        let l = parse(text, PathBuf::from("x")).unwrap();
        assert_eq!(l.name, "demo");
        // The smallest buffer, its input capacitance in fF (the file counts in pF).
        assert_eq!(l.buffer, Some(("BUF_X1".into(), 1500.0)));
        // The wire-load model OpenSTA will apply, named in the report's label.
        assert_eq!(l.wire_load.as_deref(), Some("5K_hvratio_1_1"));
        assert!(timing_label(&l).contains("wire-load model `5K_hvratio_1_1`"));
        assert!(timing_label(&l).contains("driven by BUF_X1"));
        assert_eq!(l.area["INV_X1"], 0.5);
        assert_eq!(l.area["DFF_X1"], 4.25);
        assert!(l.flip_flops.contains("DFF_X1") && !l.flip_flops.contains("INV_X1"));
        assert!(l.latches.contains("DLH_X1") && !l.flip_flops.contains("DLH_X1"));
        // Each cell's output pins (the power flow's drivers), its inputs apart.
        assert!(l.outputs["INV_X1"].contains("ZN") && !l.outputs["INV_X1"].contains("A"));
        assert!(l.outputs["BUF_X4"].contains("Z") && !l.outputs.contains_key("DLH_X1"));
        // Cells marked dont_use (here BUF_X1 by a name pattern) are never the driving cell.
        let marked = mark_dont_use(text, &["_X1"]);
        let m = parse(&marked, PathBuf::from("x")).unwrap();
        assert_eq!(m.buffer, Some(("BUF_X4".into(), 3000.0)));
        let ex: Vec<&str> = m.excluded.iter().map(|c| c.as_str()).collect();
        assert_eq!(ex, ["BUF_X1", "DFF_X1", "DLH_X1", "INV_X1"]);
        assert!(l.excluded.is_empty() && dont_use("nangate45").is_empty());
        assert!(dont_use("asap7").contains(&"xp"));
        let e = parse("library (x) {\n}", PathBuf::new()).unwrap_err();
        assert!(e.to_string().contains("no cell has an area"), "{e}");
        let e = parse("hello", PathBuf::new()).unwrap_err();
        assert!(e.to_string().contains("no `library"), "{e}");
    }

    #[test]
    fn unknown_and_missing_libraries_are_refused() {
        let e = resolve(Some("tsmc3"), None).unwrap_err().to_string();
        assert!(
            e.contains("--lib tsmc3 is not a library") && e.contains("nangate45"),
            "{e}"
        );
        let e = resolve(None, Some(Path::new("/nonexistent/x.lib")))
            .unwrap_err()
            .to_string();
        assert!(e.contains("/nonexistent/x.lib: no such file"), "{e}");
        let e = resolve(None, None).unwrap_err().to_string();
        assert!(e.contains("needs a standard-cell library"), "{e}");
    }

    /// Areas add up per instance; a memory macro has none; a generic latch Yosys left counts
    /// as a latch; a cell the library lacks is an error.
    #[test]
    fn module_areas_count_instances_macros_and_latches() {
        let lib = Liberty {
            path: PathBuf::new(),
            name: "demo".into(),
            area: [("INV".to_string(), 1.0), ("DFF".to_string(), 4.0)].into(),
            flip_flops: ["DFF".to_string()].into(),
            latches: BTreeSet::new(),
            buffer: None,
            wire_load: None,
            inputs: BTreeMap::new(),
            outputs: BTreeMap::new(),
            excluded: BTreeSet::new(),
            dont_use: vec![],
            clock_gate: None,
        };
        let types = |xs: &[(&str, u64)]| -> BTreeMap<String, u64> {
            xs.iter().map(|(t, n)| (t.to_string(), *n)).collect()
        };
        let mut own = BTreeMap::new();
        own.insert("leaf".to_string(), types(&[("INV", 3), ("DFF", 2)]));
        // The clock gate's latch is the deliberate one: not counted.
        let gate = hdl::clock_gate::NAME.to_string();
        own.insert(gate.clone(), types(&[("$_DLATCH_N_", 1), ("INV", 1)]));
        own.insert(
            "top".to_string(),
            types(&[
                ("leaf", 4),
                ("INV", 1),
                ("sram_macro", 2),
                ("$_DLATCH_P_", 1),
                (gate.as_str(), 2),
            ]),
        );
        let macros: BTreeSet<String> = ["sram_macro".to_string()].into();
        let a = module_areas(&own, &lib, &macros).unwrap();
        assert_eq!(
            (a["leaf"].cells, a["leaf"].area, a["leaf"].flops),
            (5, 11.0, 8.0)
        );
        assert_eq!((a["top"].cells, a["top"].area), (1, 1.0));
        assert_eq!((a["top"].total_cells, a["top"].total_area), (23, 47.0));
        assert_eq!((a["top"].latches, a[&gate].latches), (1, 0));
        own.insert("top".to_string(), types(&[("NAND9", 1)]));
        let e = module_areas(&own, &lib, &macros).unwrap_err().to_string();
        assert!(e.contains("yosys left `NAND9` in `top`"), "{e}");
    }

    /// A module's timing netlist holds it and every module under it, each once, and no
    /// other; macros (not in the netlist) stay black boxes; Verilog's escaped names and
    /// one-line headers are read.
    #[test]
    fn subtree_netlists_hold_a_module_and_what_is_under_it() {
        let text = "/* Generated by Yosys */\nmodule top(\\a[0] , y);\n  mid u0 (.x(a));\n\
                    endmodule\nmodule mid(x);\n  leaf l0 (); leaf l1 ();\n  ram m0 ();\n\
                    endmodule\nmodule \\leaf ;\n  INV_X1 _1_ (.A(x), .ZN(y));\nendmodule\n\
                    module other(q);\nendmodule\n";
        let parts = netlist_modules(text);
        assert_eq!(
            parts.keys().collect::<Vec<_>>(),
            ["leaf", "mid", "other", "top"]
        );
        assert!(parts["leaf"].contains("INV_X1 _1_") && parts["leaf"].ends_with("endmodule\n"));
        let entry = |name: &str, children: &[(&str, u64)]| {
            serde_json::json!({"name": name, "file": format!("{name}.v"), "ports": [],
                "latency": 0, "children": children.iter().cloned().collect::<BTreeMap<_, _>>()})
        };
        let manifest: Manifest = serde_json::from_value(serde_json::json!({
            "generator": "test", "top": "top", "files": [], "config": {},
            "modules": [entry("top", &[("mid", 1)]), entry("mid", &[("leaf", 2), ("ram", 1)]),
                        entry("leaf", &[]), entry("ram", &[]), entry("other", &[])],
        }))
        .unwrap();
        let net = subtree_netlist(&parts, &manifest, "mid").unwrap();
        assert_eq!(net.matches("module ").count(), 2, "{net}");
        assert!(net.contains("module mid(") && net.contains("module \\leaf"));
        assert!(!net.contains("module top") && !net.contains("module other"));
        assert_eq!(
            subtree_netlist(&parts, &manifest, "top")
                .unwrap()
                .matches("endmodule")
                .count(),
            3
        );
        let e = subtree_netlist(&parts, &manifest, "ram").unwrap_err();
        assert!(
            e.to_string().contains("`ram` is not in the mapped netlist"),
            "{e}"
        );
    }

    /// Wrappers (under 1 % of their area their own) open into their children; a block's
    /// copies multiply down the hierarchy.
    #[test]
    fn blocks_open_wrappers() {
        let module = |name: &str, own: f64, total: f64, children: &[(&str, u64)]| AsicModule {
            name: name.into(),
            copies: 0,
            cells: 0,
            area_um2: own,
            flop_area_um2: 0.0,
            total_cells: 0,
            total_area_um2: total,
            children: children.iter().map(|(c, n)| (c.to_string(), *n)).collect(),
            timing: None,
            hold: None,
            untimed: None,
        };
        let r = AsicReport {
            top: "top".into(),
            library: String::new(),
            node: String::new(),
            liberty: String::new(),
            clock_mhz: 1.0,
            modules: vec![
                module("top", 0.0, 1000.0, &[("core", 1), ("csr", 1)]),
                module("core", 1.0, 900.0, &[("row", 4)]),
                module("row", 25.0, 225.0, &[("pe", 2)]),
                module("pe", 100.0, 100.0, &[]),
                module("csr", 100.0, 100.0, &[]),
            ],
            latches: 0,
            yosys_problems: vec![],
            abc_buffer: None,
            remapped: BTreeMap::new(),
            remap_failed: vec![],
            label: String::new(),
        };
        let b: Vec<(String, u64, f64)> = r
            .blocks()
            .into_iter()
            .map(|b| (b.name, b.copies, b.area_um2))
            .collect();
        assert_eq!(b, [("row".into(), 4, 900.0), ("csr".into(), 1, 100.0)]);
        // A block timed whole is its own figure, whatever its submodules' standalone ones
        // (their port budgets fall on internal nets); an untimed one is its slowest part's.
        let timed = |ns: f64| PathTiming {
            startpoint: String::new(),
            endpoint: String::new(),
            arrival_ns: ns,
            slack_ns: 0.0,
            cells: 1,
            min_period_ns: ns,
            steps: vec![],
            fmax_mhz: 1000.0 / ns,
        };
        let mut r = r;
        for (name, ns) in [("row", 3.0), ("pe", 5.0)] {
            r.modules
                .iter_mut()
                .find(|m| m.name == name)
                .unwrap()
                .timing = Some(timed(ns));
        }
        assert_eq!(r.slowest_in("row").unwrap().0, "row");
        r.modules[2].timing = None;
        assert_eq!(r.slowest_in("row").unwrap().0, "pe");
    }

    #[test]
    fn report_checks_is_parsed() {
        let text = "pe\nStartpoint: a[14] (input port clocked by clk)\n\
            Endpoint: _1843_ (rising edge-triggered flip-flop clocked by clk)\n\
            Path Group: clk\n\
               0.1333    0.1333 v input external delay\n\
               0.0000    0.1333 v a[14] (in)\n\
               0.0813    0.2146 v _0930_/ZN (OR3_X1)\n\
               0.1022    0.3168 v _0931_/ZN (OR2_X1)\n\
               0.0000    0.3168 v _1843_/D (DFF_X1)\n\
                         0.3168   data arrival time\n\
            \n   0.6667    0.6667   clock clk (rise edge)\n\
               0.0000    0.6667   clock network delay (ideal)\n\
              -0.0333    0.6334   clock uncertainty\n\
              -0.0400    0.5934   library setup time\n\
                         0.5934   data required time\n\
            \n            -0.5000   slack (VIOLATED)\n";
        // From an input port to a register: the input budget scales with the period.
        let t = parse_path(text, 0.6667, 1).unwrap();
        assert_eq!(t.startpoint, "a[14] (input port clocked by clk)");
        assert_eq!(t.arrival_ns, 0.3168);
        assert_eq!(t.slack_ns, -0.5);
        assert_eq!(t.cells, 3, "_0930_, _0931_, _1843_");
        // The path's lines: the input's budget, each pin with its delay and arrival, then the
        // capture's uncertainty and setup.
        let points: Vec<(&str, f64, Option<f64>)> = t
            .steps
            .iter()
            .map(|p| (p.point.as_str(), p.delay_ns, p.arrival_ns))
            .collect();
        assert_eq!(
            points,
            [
                ("input external delay", 0.1333, Some(0.1333)),
                ("a[14] (in)", 0.0, Some(0.1333)),
                ("_0930_/ZN (OR3_X1)", 0.0813, Some(0.2146)),
                ("_0931_/ZN (OR2_X1)", 0.1022, Some(0.3168)),
                ("_1843_/D (DFF_X1)", 0.0, Some(0.3168)),
                ("clock uncertainty", -0.0333, None),
                ("library setup time", -0.04, None),
            ]
        );
        // The input budget (20 %) and the setup uncertainty (5 %) scale with the period.
        assert!((t.min_period_ns - (0.6667 + 0.5 / 0.75)).abs() < 1e-9);
        let t = parse_path(text, 0.6667, 0).unwrap();
        assert!((t.min_period_ns - (0.6667 + 0.5 / 0.95)).abs() < 1e-9);
        // A hold report: its worst path and slack.
        let hold = "Startpoint: _12_ (rising edge-triggered flip-flop clocked by clk)\n\
            Endpoint: _13_ (rising edge-triggered flip-flop clocked by clk)\n\
            Path Type: min\n\
                       0.0412   data arrival time\n\
            \n             0.0213   slack (MET)\n";
        let h = parse_hold(hold).unwrap();
        assert_eq!(
            h.endpoint,
            "_13_ (rising edge-triggered flip-flop clocked by clk)"
        );
        assert_eq!(h.slack_ns, 0.0213);
        assert!(parse_hold("No paths found.").is_none());
    }
}
