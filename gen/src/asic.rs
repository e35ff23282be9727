//! ASIC synthesis and static timing at a standard-cell library (docs/asic.md): Yosys maps every
//! unique module once to the library's cells (hierarchically: a module's area is its own cells
//! plus its children's, counted per instance), and OpenSTA times each module that is small
//! enough with its children inside, under the constraints of the project's SDC template.
//!
//! These are synthesis-level figures: an ideal clock, no placement, no wire load, ABC's
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
use crate::tools::{require, run, tail, ScratchDir, Tool};

/// A library regflash knows by name: (name, node, path under the PDK folder or absolute).
pub const KNOWN: [(&str, &str, &str); 5] = [
    (
        "nangate45",
        "45 nm",
        "nangate45/NangateOpenCellLibrary_typical.lib.gz",
    ),
    ("asap7", "7 nm", "asap7/asap7sc7p5t_rvt_tt_subset.lib.gz"),
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
/// their submodules are (OpenSTA on a flat 100k-cell netlist takes about 10 s here).
pub const TIMING_CELL_LIMIT: u64 = 150_000;

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

/// What regflash reads of a liberty file: its name, time unit, and each cell's area and
/// whether it is sequential.
#[derive(Clone, Debug)]
pub struct Liberty {
    /// The file Yosys and OpenSTA read (decompressed).
    pub path: PathBuf,
    pub name: String,
    /// Nanoseconds per library time unit.
    pub ns_per_unit: f64,
    pub area: BTreeMap<String, f64>,
    pub sequential: BTreeSet<String>,
    /// The smallest buffer (one input, an output that is that input) and its input pin's
    /// capacitance: ABC's driving cell and, four times over, its load, so that it buffers and
    /// sizes the mapped netlist (`abc -constr`).
    pub buffer: Option<(String, f64)>,
}

/// Reads `source` (`.gz` is decompressed into `scratch`, as Yosys 0.23 and OpenSTA 2019 read
/// plain text only).
pub fn load(source: &Path, scratch: &Path) -> Result<Liberty> {
    let path = if source.extension().is_some_and(|e| e == "gz") {
        let out = run(
            Command::new("gzip").arg("-dc").arg(source),
            &format!("decompressing {}", source.display()),
        )?;
        let path = scratch.join("cells.lib");
        std::fs::write(&path, &out.stdout)?;
        path
    } else {
        source.to_path_buf()
    };
    let text = std::fs::read_to_string(&path)
        .with_context(|| format!("cannot read the liberty file {}", source.display()))?;
    parse(&text, path).with_context(|| {
        format!(
            "{} is not a liberty file regflash can use",
            source.display()
        )
    })
}

/// The group name of `line` if it opens `kind (name)`.
fn group<'a>(line: &'a str, kind: &str) -> Option<&'a str> {
    let rest = line.strip_prefix(kind)?.trim_start().strip_prefix('(')?;
    Some(rest.split(')').next()?.trim().trim_matches('"'))
}

/// A cell's pins as the parser sees them: (name, is an input, capacitance, function).
type Pin = (String, bool, f64, String);

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
    let (mut name, mut unit) = (None, None);
    let mut area = BTreeMap::new();
    let mut sequential = BTreeSet::new();
    let mut cell: Option<String> = None;
    let mut pins: Vec<Pin> = vec![];
    let mut buffers: Vec<(f64, String, f64)> = vec![];
    let mut end_cell =
        |cell: &Option<String>, pins: &mut Vec<Pin>, area: &BTreeMap<String, f64>| {
            if let Some(c) = cell {
                if let (Some(cap), Some(&a)) = (buffer_input(pins), area.get(c)) {
                    buffers.push((a, c.clone(), cap));
                }
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
            pins.push((n.to_string(), false, 0.0, String::new()));
        } else if let (Some(p), Some(v)) = (pins.last_mut(), attribute(l, "direction")) {
            p.1 = v == "input";
        } else if let (Some(p), Some(v)) = (pins.last_mut(), attribute(l, "capacitance")) {
            p.2 = v.parse().unwrap_or(0.0);
        } else if let (Some(p), Some(v)) = (pins.last_mut(), attribute(l, "function")) {
            p.3 = v.trim_matches(['(', ')', ' ']).to_string();
        } else if let Some(v) = l.strip_prefix("time_unit") {
            let v = v
                .trim_start_matches([' ', '\t', ':'])
                .trim_matches([' ', '\t', ';', '"']);
            unit = Some(match v {
                "1ns" => 1.0,
                "1ps" => 1e-3,
                "10ps" => 1e-2,
                "100ps" => 1e-1,
                _ => bail!("time_unit {v:?} is not 1ns, 100ps, 10ps or 1ps"),
            });
        } else if let (Some(c), Some(v)) = (&cell, l.strip_prefix("area")) {
            let v = v
                .trim_start_matches([' ', '\t', ':'])
                .trim_end_matches([' ', '\t', ';']);
            if let Ok(a) = v.parse::<f64>() {
                area.entry(c.clone()).or_insert(a);
            }
        } else if let Some(c) = &cell {
            if group(l, "ff").is_some() || group(l, "latch").is_some() {
                sequential.insert(c.clone());
            }
        }
    }
    end_cell(&cell, &mut pins, &area);
    let name = name.context("no `library (...)` group")?;
    ensure!(!area.is_empty(), "no cell has an area");
    ensure!(!sequential.is_empty(), "no flip-flop cell (`ff` group)");
    buffers.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
    Ok(Liberty {
        path,
        name,
        ns_per_unit: unit.unwrap_or(1.0),
        area,
        sequential,
        buffer: buffers.into_iter().next().map(|(_, c, cap)| (c, cap)),
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
    /// Cells on the path.
    pub cells: u64,
    /// Target period minus slack.
    pub min_period_ns: f64,
    pub fmax_mhz: f64,
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

    /// The timed module under `name` (itself included) with the longest minimum period.
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
    ensure!(
        clock_mhz.is_finite() && clock_mhz > 0.0,
        "the clock must be a positive frequency in MHz, not {clock_mhz}"
    );
    let manifest = Manifest::load(dir)?;
    crate::flow::refuse_big_memories(&manifest)?;
    let yosys = require(Tool::Yosys)?;
    let sta = require(Tool::OpenSta)?;
    let scratch = ScratchDir::new("asic")?;
    let at = |n: &str| scratch.path().join(n);
    let files = manifest.absolute_files(dir)?;
    let period_ns = 1000.0 / clock_mhz;
    let liberty = lib.path.display().to_string();
    // Buffering and gate sizing after mapping (ABC's `buffer; upsize; dnsize`), driven by the
    // library's smallest buffer into four of its inputs.
    let constr = match &lib.buffer {
        Some((cell, cap)) => {
            let path = at("abc.constr");
            std::fs::write(
                &path,
                format!("set_driving_cell {cell}\nset_load {}\n", 4.0 * cap),
            )?;
            format!(" -constr {}", path.display())
        }
        None => String::new(),
    };
    // The recipe of ../shared/pdk/README.md, hierarchical: each unique module mapped once.
    let script = format!(
        "read_liberty -lib {liberty}\nread_verilog {files}\nhierarchy -check -top {top}\n\
         synth -top {top}\n\
         dfflibmap -liberty {liberty}\nabc -D {period_ps:.0}{constr} -liberty {liberty}\n\
         opt_clean -purge\ntee -q -o {check} check\nsetundef -zero\nsplitnets -ports\n\
         opt_clean -purge\ntee -q -o {stat} stat -json\n\
         write_verilog -noattr -noexpr -nohex -nodec {net}\n",
        files = files.join(" "),
        top = manifest.top,
        period_ps = period_ns * 1000.0,
        check = at("check.log").display(),
        stat = at("stat.json").display(),
        net = at("netlist.v").display(),
    );
    std::fs::write(at("asic.ys"), script)?;
    run(
        Command::new(yosys)
            .arg("-q")
            .arg("-s")
            .arg(at("asic.ys"))
            .current_dir(scratch.path()),
        &format!("yosys mapping to {}", lib.name),
    )?;
    let check = std::fs::read_to_string(at("check.log"))?;
    let yosys_problems = check
        .lines()
        .filter(|l| l.trim_start().starts_with("Warning:"))
        .map(|l| l.trim().to_string())
        .collect();
    let stat = crate::flow::parse_stat_json(&std::fs::read_to_string(at("stat.json"))?)?;
    let mut own: BTreeMap<String, BTreeMap<String, u64>> = BTreeMap::new();
    for (name, v) in stat["modules"]
        .as_object()
        .context("no modules in yosys stat")?
    {
        let types = v["num_cells_by_type"]
            .as_object()
            .map(|t| {
                t.iter()
                    .map(|(k, n)| (k.clone(), n.as_u64().unwrap_or(0)))
                    .collect()
            })
            .unwrap_or_default();
        own.insert(name.trim_start_matches('\\').to_string(), types);
    }
    let mut modules = vec![];
    let mut latches = 0;
    let copies = manifest.copies()?;
    let mut totals: BTreeMap<String, (u64, f64)> = BTreeMap::new();
    for name in own.keys() {
        hier(name, &own, lib, &mut totals)?;
    }
    for (name, types) in &own {
        let (mut cells, mut area, mut flops) = (0u64, 0.0, 0.0);
        for (t, &n) in types {
            if own.contains_key(t) {
                continue;
            }
            let a = lib.area.get(t).with_context(|| {
                format!(
                    "yosys mapped `{name}` to `{t}`, which {} has no area for",
                    lib.name
                )
            })?;
            cells += n;
            area += a * n as f64;
            if lib.sequential.contains(t) {
                flops += a * n as f64;
                if t.to_ascii_uppercase().contains("LATCH") || t.starts_with("DL") {
                    latches += n;
                }
            }
        }
        let (total_cells, total_area_um2) = totals[name];
        modules.push(AsicModule {
            name: name.clone(),
            copies: copies.get(name.as_str()).copied().unwrap_or(0),
            cells,
            area_um2: area,
            flop_area_um2: flops,
            total_cells,
            total_area_um2,
            children: manifest
                .module(name)
                .map(|e| e.children.clone())
                .unwrap_or_default(),
            timing: None,
            untimed: None,
        });
    }
    modules.sort_by(|a, b| a.total_cells.cmp(&b.total_cells).then(a.name.cmp(&b.name)));
    time_modules(
        &sta,
        &manifest,
        lib,
        &mut modules,
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
        label: "synthesis-level: Yosys + ABC mapping, OpenSTA with an ideal clock, no placement, \
                no wire load (optimistic); memory macros are not in the area"
            .into(),
    })
}

/// Cells and area of `name` with its submodules expanded.
fn hier(
    name: &str,
    own: &BTreeMap<String, BTreeMap<String, u64>>,
    lib: &Liberty,
    memo: &mut BTreeMap<String, (u64, f64)>,
) -> Result<(u64, f64)> {
    if let Some(&v) = memo.get(name) {
        return Ok(v);
    }
    let mut v = (0u64, 0.0);
    // A blackbox (a memory macro) has no cells of its own.
    for (t, &n) in own.get(name).into_iter().flatten() {
        if own.contains_key(t) {
            let (c, a) = hier(t, own, lib, memo)?;
            v = (v.0 + n * c, v.1 + n as f64 * a);
        } else {
            v = (
                v.0 + n,
                v.1 + n as f64 * lib.area.get(t).copied().unwrap_or(0.0),
            );
        }
    }
    memo.insert(name.to_string(), v);
    Ok(v)
}

/// Times every module of at most [`TIMING_CELL_LIMIT`] cells (its hierarchy inside) in one
/// OpenSTA session: per module, the netlist is read and linked with it as the top, the SDC of
/// the project's template applied, and the worst setup path reported.
fn time_modules(
    sta: &Path,
    manifest: &Manifest,
    lib: &Liberty,
    modules: &mut [AsicModule],
    clock_mhz: f64,
    netlist: &Path,
    scratch: &Path,
) -> Result<()> {
    let mut tcl = format!("read_liberty {}\n", lib.path.display());
    let mut timed = vec![];
    for m in modules.iter_mut() {
        let Some(entry) = manifest.modules.iter().find(|e| e.name == m.name) else {
            m.untimed = Some("not in the manifest".into());
            continue;
        };
        if m.total_cells == 0 {
            m.untimed = Some("no cells (a memory macro, timed by its compiler)".into());
            continue;
        }
        if m.total_cells > TIMING_CELL_LIMIT {
            m.untimed = Some(format!(
                "{} cells, over the {TIMING_CELL_LIMIT} timed as one netlist: its submodules \
                 are timed",
                m.total_cells
            ));
            continue;
        }
        let sdc = scratch.join(format!("{}.sdc", m.name));
        std::fs::write(
            &sdc,
            crate::constraints::sdc_split_ports(entry, clock_mhz, &generator_id())?,
        )?;
        tcl += &format!(
            "puts \"@@ {name}\"\nread_verilog {net}\nlink_design {name}\n\
             set_cmd_units -time ns\nread_sdc {sdc}\n\
             report_checks -path_delay max -digits 4\n",
            name = m.name,
            net = netlist.display(),
            sdc = sdc.display()
        );
        timed.push(m.name.clone());
    }
    if timed.is_empty() {
        return Ok(());
    }
    let script = scratch.join("timing.tcl");
    std::fs::write(&script, tcl)?;
    let out = run(
        Command::new(sta).arg("-exit").arg(&script),
        "OpenSTA timing",
    )?;
    let text = String::from_utf8_lossy(&out.stdout);
    let period = 1000.0 / clock_mhz;
    for section in text.split("@@ ").skip(1) {
        let name = section.lines().next().unwrap_or("").trim();
        let m = modules
            .iter_mut()
            .find(|m| m.name == name)
            .with_context(|| format!("OpenSTA reported an unknown module `{name}`"))?;
        // `set_cmd_units -time ns`: the SDC's figures and the report are in ns, whatever the
        // library's time unit.
        match parse_path(section, period) {
            Some(t) => m.timing = Some(t),
            None => {
                m.untimed = Some(if section.contains("No paths found") {
                    "no constrained path".into()
                } else {
                    format!(
                        "OpenSTA reported no path: {}",
                        section.lines().take(6).collect::<Vec<_>>().join(" / ")
                    )
                })
            }
        }
    }
    if let Some(m) = modules
        .iter()
        .find(|m| timed.contains(&m.name) && m.timing.is_none() && m.untimed.is_none())
    {
        bail!("OpenSTA did not time `{}`:\n{}", m.name, tail(&out, 30));
    }
    Ok(())
}

/// The worst path of a `report_checks` section (in ns): start, end, arrival, slack, cells.
fn parse_path(text: &str, period_ns: f64) -> Option<PathTiming> {
    let field = |key: &str| -> Option<String> {
        text.lines()
            .find_map(|l| l.trim().strip_prefix(key))
            .map(|v| v.trim().to_string())
    };
    let start = field("Startpoint:")?;
    let end = field("Endpoint:")?;
    let number = |l: &str| l.split_whitespace().next()?.parse::<f64>().ok();
    let arrival = text
        .lines()
        .find(|l| l.trim_end().ends_with("data arrival time"))
        .and_then(number)?;
    let slack = text
        .lines()
        .find(|l| l.contains("slack ("))
        .and_then(number)?;
    // Path lines: "delay time edge pin (cell)"; the cells are the distinct instances.
    let body = text.split("data arrival time").next()?;
    let cells = body
        .lines()
        .filter(|l| l.trim_end().ends_with(')') && l.contains('/'))
        .count() as u64;
    let slack_ns = slack;
    let min_period_ns = period_ns - slack_ns;
    Some(PathTiming {
        startpoint: start,
        endpoint: end,
        arrival_ns: arrival,
        slack_ns,
        cells,
        min_period_ns,
        fmax_mhz: 1000.0 / min_period_ns,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn liberty_cells_units_and_refusals() {
        let text = r#"library (demo) {
  time_unit : "1ps" ;
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
  cell ("DFF_X1") {
    area : 4.25;
    ff (IQ, IQN) { next_state : "D" ; }
  }
}"#;
        let l = parse(text, PathBuf::from("x")).unwrap();
        assert_eq!(l.name, "demo");
        assert_eq!(
            l.buffer,
            Some(("BUF_X1".into(), 1.5)),
            "the smallest buffer"
        );
        assert_eq!(l.ns_per_unit, 1e-3);
        assert_eq!(l.area["INV_X1"], 0.5);
        assert_eq!(l.area["DFF_X1"], 4.25);
        assert!(l.sequential.contains("DFF_X1") && !l.sequential.contains("INV_X1"));
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
            label: String::new(),
        };
        let b: Vec<(String, u64, f64)> = r
            .blocks()
            .into_iter()
            .map(|b| (b.name, b.copies, b.area_um2))
            .collect();
        assert_eq!(b, [("row".into(), 4, 900.0), ("csr".into(), 1, 100.0)]);
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
            \n            -0.5000   slack (VIOLATED)\n";
        let t = parse_path(text, 0.6667).unwrap();
        assert_eq!(t.startpoint, "a[14] (input port clocked by clk)");
        assert_eq!(t.arrival_ns, 0.3168);
        assert_eq!(t.slack_ns, -0.5);
        assert_eq!(t.cells, 3);
        assert!((t.min_period_ns - 1.1667).abs() < 1e-9);
    }
}
