//! Lint and synthesis of an output folder: `verilator --lint-only -Wall`, Yosys on each target,
//! and nextpnr-ice40 for an fmax.
//!
//! The Yosys scripts come from the same templates as the ones written into the folder (see
//! `constraints.rs`), with report files added, so every figure can be reproduced by hand.

use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context, Result};
use serde::Serialize;

use crate::constraints::{yosys_script, ReportPaths, SynthTarget};
use crate::manifest::{Manifest, ModuleEntry};
use crate::output::generator_id;
use crate::tools::{require, run, tail, ScratchDir, Tool};

/// What the lint and synthesis checks found.
#[derive(Debug, Serialize)]
pub struct LintReport {
    pub top: String,
    /// Verilator `-Wall` warnings and errors, one per entry (empty when clean).
    pub verilator: Vec<String>,
    /// Generic Yosys synthesis: cell counts, latches and `check` problems.
    pub synth: SynthReport,
}

impl LintReport {
    pub fn passed(&self) -> bool {
        self.verilator.is_empty() && self.synth.passed()
    }

    /// A human-readable account of what failed, or "clean".
    pub fn summary(&self) -> String {
        if self.passed() {
            return format!(
                "{}: verilator -Wall clean; yosys synth: 0 latches, 0 problems",
                self.top
            );
        }
        let mut s = format!("{}: lint failed\n", self.top);
        for w in &self.verilator {
            s.push_str(&format!("  verilator: {w}\n"));
        }
        for p in &self.synth.yosys_problems {
            s.push_str(&format!("  yosys check: {p}\n"));
        }
        if self.synth.latches > 0 {
            s.push_str(&format!(
                "  yosys: {} latch cells inferred\n",
                self.synth.latches
            ));
        }
        s
    }
}

/// Cell statistics of one module.
#[derive(Debug, Serialize, Clone, Default, PartialEq)]
pub struct CellStats {
    /// Cells, each instance of a submodule counting as one.
    pub cells: u64,
    pub flip_flops: u64,
    pub by_type: BTreeMap<String, u64>,
}

/// FPGA resources of a design, by class.
#[derive(Debug, Serialize, Clone, Default, PartialEq)]
pub struct Resources {
    pub luts: u64,
    pub flip_flops: u64,
    pub carry_cells: u64,
    pub dsps: u64,
    pub block_rams: u64,
    /// Distributed (LUT) RAM cells (Xilinx).
    pub lut_rams: u64,
}

/// Yosys statistics of a design on one target.
#[derive(Debug, Serialize)]
pub struct SynthReport {
    pub top: String,
    pub target: SynthTarget,
    /// Each module's own cells (submodule instances count as one cell each).
    pub modules: BTreeMap<String, CellStats>,
    /// The whole hierarchy under the top, submodules expanded. For iCE40, the serial wrapper
    /// (used only to place and route with six pins) is not included.
    pub total: CellStats,
    /// FPGA targets: the total by resource class.
    pub resources: Option<Resources>,
    /// Generic target: longest topological path (cells) inside each module, from `ltp -noff`.
    pub longest_path: BTreeMap<String, u64>,
    pub latches: u64,
    pub yosys_problems: Vec<String>,
    /// iCE40 with place and route: nextpnr-ice40's fmax of the design in its serial wrapper.
    pub fmax_mhz: Option<f64>,
    /// The device placed and routed on.
    pub device: Option<String>,
}

impl SynthReport {
    /// No latches and no `check` problems (combinational loops, multiple drivers, ...).
    pub fn passed(&self) -> bool {
        self.latches == 0 && self.yosys_problems.is_empty()
    }
}

/// Runs Verilator's lint and generic Yosys synthesis checks on the folder `dir`.
pub fn lint(dir: &Path) -> Result<LintReport> {
    let manifest = Manifest::load(dir)?;
    // The synthesis below would refuse them: say so before the lint's minutes on them.
    refuse_big_memories(&manifest)?;
    let warnings = verilator_lint(dir, &manifest)?;
    // Verilog that Verilator cannot parse would only fail again in Yosys, with less to say:
    // report Verilator's own messages instead.
    let errors: Vec<&String> = warnings.iter().filter(|w| w.contains("%Error")).collect();
    if !errors.is_empty() {
        bail!(
            "verilator --lint-only found errors in {} (Yosys synthesis was not run):\n  {}",
            dir.display(),
            errors
                .iter()
                .map(|e| e.as_str())
                .collect::<Vec<_>>()
                .join("\n  ")
        );
    }
    let synth = synth_with(dir, &manifest, SynthTarget::Generic, false)?;
    Ok(LintReport {
        top: manifest.top,
        verilator: warnings,
        synth,
    })
}

/// `verilator --lint-only -Wall` of the folder `dir`, with and without the simulation-only
/// assertions (and the second run without the clock gates, as the FPGA flows read it): every
/// warning and error line (none means clean).
pub fn verilator_lint(dir: &Path, manifest: &Manifest) -> Result<Vec<String>> {
    let files: Vec<PathBuf> = manifest.files.iter().map(PathBuf::from).collect();
    lint_both(dir, &manifest.top, &files)
}

/// Modules already linted clean, by name and text (see [`verilator_lint_each`]).
#[derive(Default)]
pub struct Linted(HashSet<(String, u64)>);

impl Linted {
    /// How many distinct modules were linted clean.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// `verilator --lint-only -Wall` of the folder `dir` (both passes, as [`verilator_lint`]) with
/// each module's body linted once: once in this call however many copies the hierarchy holds,
/// and not again if `linted` already has it (the same name and text, from another folder).
///
/// The hierarchy is cut at every module with more than one copy: such a module is linted as a
/// top of its own, and everywhere else stands as a stub with its ports and no body, so a
/// 32 × 32 array lints one PE and one row instead of 1,024 and 32 (the `seed` core: 2 s
/// instead of 50). A module's own warnings (widths, unused and undriven signals, its port
/// connections to its children, case coverage) are the same either way. What only a
/// whole-hierarchy pass sees is a combinational loop through several modules (Verilator's
/// UNOPTFLAT across ports): `hdl::ir` rejects one in every design as it is defined
/// (`check::comb_paths`), and [`verilator_lint`] of the small configurations checks it again.
pub fn verilator_lint_each(
    dir: &Path,
    manifest: &Manifest,
    linted: &mut Linted,
) -> Result<Vec<String>> {
    let entries: BTreeMap<&str, &ModuleEntry> = manifest
        .modules
        .iter()
        .map(|m| (m.name.as_str(), m))
        .collect();
    let mut key = BTreeMap::new();
    for m in &manifest.modules {
        let path = dir.join(&m.file);
        let text = std::fs::read(&path)
            .with_context(|| format!("cannot read {} (listed in the manifest)", path.display()))?;
        let mut h = std::hash::DefaultHasher::new();
        std::hash::Hash::hash(&text, &mut h);
        key.insert(
            m.name.as_str(),
            (m.name.clone(), std::hash::Hasher::finish(&h)),
        );
    }
    let child = |name: &str| -> Result<&ModuleEntry> {
        entries
            .get(name)
            .copied()
            .with_context(|| format!("module `{name}` is instantiated but not in the manifest"))
    };
    let copies = manifest.copies()?;
    let new = |name: &str| !linted.0.contains(&key[name]);
    let mut roots: Vec<&str> = vec![];
    for (&name, &n) in &copies {
        let under_old = manifest
            .modules
            .iter()
            .any(|p| p.children.contains_key(name) && !new(&p.name));
        if new(name) && (name == manifest.top || n > 1 || under_old) {
            roots.push(name);
        }
    }
    let stubs = ScratchDir::new("lint-stubs")?;
    let mut warnings = vec![];
    let mut clean = vec![];
    for root in roots {
        // The root and the new single-copy modules below it, real; the others, stubs.
        let (mut group, mut files, mut todo) = (vec![], vec![], vec![root]);
        let mut seen = HashSet::new();
        while let Some(name) = todo.pop() {
            if !seen.insert(name) {
                continue;
            }
            let m = child(name)?;
            if name == root || (new(name) && copies[name] == 1) {
                group.push(name);
                files.push(PathBuf::from(&m.file));
                todo.extend(m.children.keys().map(String::as_str));
            } else {
                let path = stubs.path().join(format!("{name}.v"));
                std::fs::write(&path, stub(m))?;
                files.push(path);
            }
        }
        let found = lint_both(dir, root, &files)?;
        if found.is_empty() {
            clean.extend(group.iter().map(|n| key[n].clone()));
        } else {
            warnings.extend(found.into_iter().map(|w| format!("(linting {root}) {w}")));
        }
    }
    linted.0.extend(clean);
    if warnings.is_empty() {
        if let Some(missed) = copies.keys().find(|n| !linted.0.contains(&key[*n])) {
            bail!(
                "lint bug: module `{missed}` of {} was not linted",
                manifest.top
            );
        }
    }
    Ok(warnings)
}

/// A module's ports and no body, standing in for it while its parent is linted (its own lint
/// is elsewhere): Verilator checks every connection to it against the real widths.
fn stub(m: &ModuleEntry) -> String {
    let ports: Vec<String> = m
        .ports
        .iter()
        .map(|p| {
            let range = if p.width > 1 {
                format!("[{}:0] ", p.width - 1)
            } else {
                String::new()
            };
            format!("    {} wire {range}{}", p.dir, p.name)
        })
        .collect();
    format!(
        "/* verilator lint_off UNUSEDSIGNAL */\n/* verilator lint_off UNDRIVEN */\n\
         module {} (\n{}\n);\nendmodule\n\
         /* verilator lint_on UNDRIVEN */\n/* verilator lint_on UNUSEDSIGNAL */\n",
        m.name,
        ports.join(",\n")
    )
}

/// `verilator --lint-only -Wall` of `files` (relative to `dir`, where it runs, so messages
/// name the files as the folder does) under `top`, once as synthesis sees it and once with the
/// simulation-only assertions, two processes at once: every warning and error line.
fn lint_both(dir: &Path, top: &str, files: &[PathBuf]) -> Result<Vec<String>> {
    let verilator = crate::tools::verilator()?;
    // The second run also leaves the clock gates out (the FPGA flows' reading), so both texts
    // of a gated register are linted without a third run.
    let other = [
        "+define+REGFLASH_ASSERTIONS".to_string(),
        format!("+define+{}", crate::verilog::NO_CLOCK_GATES),
    ];
    let lint = |define: Option<&[String]>| -> Result<Vec<String>> {
        let out = verilator
            .command()
            .current_dir(dir)
            .args(["--lint-only", "-Wall", "--top-module", top])
            .args(define.unwrap_or_default())
            .args(files)
            .output()
            .context("cannot run verilator")?;
        let text = String::from_utf8_lossy(&out.stderr);
        let mut found: Vec<String> = text
            .lines()
            .filter(|l| l.starts_with("%Warning") || l.starts_with("%Error"))
            .map(|l| match define {
                Some(_) => format!("(with REGFLASH_ASSERTIONS, without clock gates) {l}"),
                None => l.to_string(),
            })
            .collect();
        if !out.status.success() && found.is_empty() {
            found.push(format!(
                "verilator exited with {}: {}",
                out.status,
                tail(&out, 20)
            ));
        }
        Ok(found)
    };
    let (plain, asserted) = std::thread::scope(|s| {
        let asserted = s.spawn(|| lint(Some(&other)));
        let plain = lint(None);
        let asserted = asserted.join().expect("the lint thread does not panic");
        (plain, asserted)
    });
    let mut warnings = plain?;
    warnings.extend(asserted?);
    Ok(warnings)
}

/// Synthesizes the folder `dir` for `target`. With `place_and_route` on iCE40, also runs
/// nextpnr-ice40 on the serial wrapper and reports its fmax.
pub fn synth(dir: &Path, target: SynthTarget, place_and_route: bool) -> Result<SynthReport> {
    let manifest = Manifest::load(dir)?;
    synth_with(dir, &manifest, target, place_and_route)
}

/// The most bits a behavioural SRAM bank may hold for synthesis: Yosys maps a memory it has
/// no macro for to flip-flops, which for 4 MiB took over 10 minutes and 5 GB before it was
/// stopped.
pub const MAX_BEHAVIOURAL_SRAM_BITS: u64 = 256 * 1024;

/// Refuses a folder whose behavioural `sram_*_d<depth>_w<width>` banks (not `_macro`) are
/// larger than [`MAX_BEHAVIOURAL_SRAM_BITS`], naming the knob that emits them as macros.
pub(crate) fn refuse_big_memories(manifest: &Manifest) -> Result<()> {
    for m in &manifest.modules {
        let Some(rest) = m.name.strip_prefix("sram_") else {
            continue;
        };
        if rest.ends_with("_macro") {
            continue;
        }
        let field = |tag: char| -> Option<u64> {
            rest.split('_')
                .find_map(|f| f.strip_prefix(tag).and_then(|v| v.parse().ok()))
        };
        if let (Some(depth), Some(width)) = (field('d'), field('w')) {
            if depth * width > MAX_BEHAVIOURAL_SRAM_BITS {
                bail!(
                    "{} is a behavioural SRAM bank of {} KiB: synthesis would map it to \
                     flip-flops (hours, gigabytes). Emit the banks as memory macros to be \
                     replaced by an SRAM compiler's (glb_macro = true, the default, for the \
                     global buffer; macro = true in [buf2d] for buf2d's), or make them smaller",
                    m.name,
                    depth * width / 8192
                );
            }
        }
    }
    Ok(())
}

/// nextpnr device options of the iCE40 smoke build (the HX8K breakout board's part).
const ICE40_DEVICE: [&str; 3] = ["--hx8k", "--package", "ct256"];

fn synth_with(
    dir: &Path,
    manifest: &Manifest,
    target: SynthTarget,
    place_and_route: bool,
) -> Result<SynthReport> {
    refuse_big_memories(manifest)?;
    let yosys = require(Tool::Yosys)?;
    let scratch = ScratchDir::new("yosys")?;
    let abs = |f: &str| manifest.absolute(dir, f);
    let mut files = manifest.absolute_files(dir)?;
    let wrapper = match (target, &manifest.wrapper) {
        (SynthTarget::Ice40, Some(w)) => {
            files.push(abs(&w.file)?);
            w.name.clone()
        }
        (SynthTarget::Ice40, None) => {
            bail!(
                "{} has no serial wrapper for iCE40: regenerate it with `regflash gen`",
                dir.display()
            )
        }
        _ => String::new(),
    };
    let at = |name: &str| scratch.path().join(name).display().to_string();
    let reports = ReportPaths {
        check: at("check.log"),
        stat: at("stat.json"),
        ltp: at("ltp.log"),
    };
    let json = at("netlist.json");
    let script = yosys_script(
        target,
        &manifest.top,
        &wrapper,
        &files,
        &json,
        Some(&reports),
        &generator_id(),
    )?;
    let script_path = scratch.path().join("synth.ys");
    std::fs::write(&script_path, script)?;
    run(
        Command::new(yosys)
            .arg("-q")
            .arg("-s")
            .arg(&script_path)
            .current_dir(scratch.path()),
        &format!("yosys {} synthesis", target.name()),
    )?;
    let check = std::fs::read_to_string(&reports.check)?;
    let problems = check
        .lines()
        .filter(|l| l.trim_start().starts_with("Warning:"))
        .map(|l| l.trim().to_string())
        .collect();
    let stat = parse_stat_json(&std::fs::read_to_string(&reports.stat)?)?;
    let mut modules = BTreeMap::new();
    if let Some(ms) = stat["modules"].as_object() {
        for (name, v) in ms {
            modules.insert(
                name.trim_start_matches('\\').to_string(),
                cell_stats(v, target),
            );
        }
    }
    let total = hierarchy_total(&modules, &manifest.top, target)?;
    if !wrapper.is_empty() {
        modules.remove(&wrapper);
    }
    let latches = total
        .by_type
        .iter()
        .filter(|(t, _)| t.contains("LATCH") || t.contains("DLATCH") || t.starts_with("LD"))
        .map(|(_, n)| n)
        .sum();
    let longest_path = if target == SynthTarget::Generic {
        parse_ltp(&std::fs::read_to_string(&reports.ltp)?)
    } else {
        BTreeMap::new()
    };
    let resources = (target != SynthTarget::Generic).then(|| resources(&total, target));
    let (fmax_mhz, device) = if target == SynthTarget::Ice40 && place_and_route {
        let pcf = dir.join(format!("fpga/{wrapper}.pcf"));
        (
            Some(nextpnr_fmax(&json, &pcf)?),
            Some("iCE40-HX8K CT256".to_string()),
        )
    } else {
        (None, None)
    };
    Ok(SynthReport {
        top: manifest.top.clone(),
        target,
        modules,
        total,
        resources,
        longest_path,
        latches,
        yosys_problems: problems,
        fmax_mhz,
        device,
    })
}

fn nextpnr_fmax(json: &str, pcf: &Path) -> Result<f64> {
    let nextpnr = require(Tool::NextpnrIce40)?;
    let out = run(
        Command::new(nextpnr)
            .args(ICE40_DEVICE)
            .args(["--json", json, "--pcf"])
            .arg(pcf)
            .args(["--freq", "100", "--seed", "1", "--timing-allow-fail"]),
        "nextpnr-ice40 place and route",
    )?;
    // nextpnr reports fmax after placement and again after routing; the last one counts.
    let log = String::from_utf8_lossy(&out.stderr);
    log.lines()
        .rev()
        .filter(|l| l.contains("Max frequency for clock"))
        .find_map(|l| {
            l.split("': ")
                .nth(1)?
                .split(" MHz")
                .next()?
                .trim()
                .parse::<f64>()
                .ok()
        })
        .with_context(|| format!("nextpnr-ice40 reported no fmax:\n{}", tail(&out, 30)))
}

/// Cells of `top` with every submodule instance expanded.
pub fn hierarchy_total(
    modules: &BTreeMap<String, CellStats>,
    top: &str,
    target: SynthTarget,
) -> Result<CellStats> {
    let m = modules
        .get(top)
        .with_context(|| format!("yosys reported no statistics for `{top}`"))?;
    let mut by_type: BTreeMap<String, u64> = BTreeMap::new();
    for (t, &n) in &m.by_type {
        if modules.contains_key(t) {
            let sub = hierarchy_total(modules, t, target)?;
            for (st, &sn) in &sub.by_type {
                *by_type.entry(st.clone()).or_default() += n * sn;
            }
        } else {
            *by_type.entry(t.clone()).or_default() += n;
        }
    }
    let cells = by_type.values().sum();
    let flip_flops = by_type
        .iter()
        .filter(|(t, _)| is_flip_flop(t, target))
        .map(|(_, n)| n)
        .sum();
    Ok(CellStats {
        cells,
        flip_flops,
        by_type,
    })
}

fn is_flip_flop(cell: &str, target: SynthTarget) -> bool {
    match target {
        SynthTarget::Generic => cell.contains("DFF"),
        SynthTarget::Ice40 => cell.starts_with("SB_DFF"),
        SynthTarget::Xilinx => cell.starts_with("FD"),
    }
}

fn resources(total: &CellStats, target: SynthTarget) -> Resources {
    let count = |f: &dyn Fn(&str) -> bool| -> u64 {
        total
            .by_type
            .iter()
            .filter(|(t, _)| f(t))
            .map(|(_, n)| n)
            .sum()
    };
    match target {
        SynthTarget::Ice40 => Resources {
            luts: count(&|t| t == "SB_LUT4"),
            flip_flops: total.flip_flops,
            carry_cells: count(&|t| t == "SB_CARRY"),
            dsps: count(&|t| t == "SB_MAC16"),
            block_rams: count(&|t| t.starts_with("SB_RAM")),
            lut_rams: 0,
        },
        _ => Resources {
            luts: count(&|t| t.starts_with("LUT")),
            flip_flops: total.flip_flops,
            carry_cells: count(&|t| t.starts_with("CARRY")),
            dsps: count(&|t| t.starts_with("DSP")),
            block_rams: count(&|t| t.starts_with("RAMB")),
            lut_rams: count(&|t| t.starts_with("RAM") && !t.starts_with("RAMB")),
        },
    }
}

/// `ltp` lines "Longest topological path in <module> (length=N):".
fn parse_ltp(text: &str) -> BTreeMap<String, u64> {
    text.lines()
        .filter_map(|l| {
            let rest = l.trim().strip_prefix("Longest topological path in ")?;
            let (name, len) = rest.split_once(" (length=")?;
            let len = len.split(')').next()?.parse().ok()?;
            Some((name.trim_start_matches('\\').to_string(), len))
        })
        .collect()
}

/// Parses `stat -json` output. Yosys 0.23 prints the hierarchy listing (lines such as
/// `       fp_mul_e5m10_l1         1`) into the middle of the JSON when a top module is set;
/// those lines are dropped: every line of real JSON here starts with a quote or a brace.
pub(crate) fn parse_stat_json(text: &str) -> Result<serde_json::Value> {
    let json: String = text
        .lines()
        .filter(|l| {
            let t = l.trim_start();
            t.is_empty() || t.starts_with(['"', '{', '}', '[', ']'])
        })
        .collect::<Vec<_>>()
        .join("\n");
    serde_json::from_str(&json).context("cannot parse Yosys `stat -json` output")
}

fn cell_stats(v: &serde_json::Value, target: SynthTarget) -> CellStats {
    let mut s = CellStats {
        cells: v["num_cells"].as_u64().unwrap_or(0),
        ..Default::default()
    };
    if let Some(types) = v["num_cells_by_type"].as_object() {
        for (t, n) in types {
            let n = n.as_u64().unwrap_or(0);
            if is_flip_flop(t, target) {
                s.flip_flops += n;
            }
            s.by_type.insert(t.clone(), n);
        }
    }
    s
}
