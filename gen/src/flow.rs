//! Lint and synthesis checks on an output folder: `verilator --lint-only -Wall` and Yosys.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

use anyhow::{Context, Result};
use serde::Serialize;

use crate::manifest::Manifest;
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

/// Cell statistics of one module after generic synthesis.
#[derive(Debug, Serialize, Clone, Default)]
pub struct CellStats {
    pub cells: u64,
    pub flip_flops: u64,
    pub by_type: BTreeMap<String, u64>,
}

/// Yosys statistics: per module (its own cells, submodules counted as one cell each) and for the
/// whole hierarchy under the top (`total`).
#[derive(Debug, Serialize)]
pub struct SynthReport {
    pub top: String,
    pub modules: BTreeMap<String, CellStats>,
    pub total: CellStats,
    pub latches: u64,
    pub yosys_problems: Vec<String>,
}

impl SynthReport {
    /// No latches and no `check` problems (combinational loops, multiple drivers, ...).
    pub fn passed(&self) -> bool {
        self.latches == 0 && self.yosys_problems.is_empty()
    }
}

/// Runs Verilator's lint and Yosys synthesis checks on the folder `dir` (written by `gen`).
pub fn lint(dir: &Path) -> Result<LintReport> {
    let manifest = Manifest::load(dir)?;
    let verilator = require(Tool::Verilator)?;
    let out = Command::new(verilator)
        .current_dir(dir)
        .args(["--lint-only", "-Wall", "--top-module", &manifest.top])
        .args(&manifest.files)
        .output()
        .context("cannot run verilator")?;
    let text = String::from_utf8_lossy(&out.stderr);
    let mut warnings: Vec<String> = text
        .lines()
        .filter(|l| l.starts_with("%Warning") || l.starts_with("%Error"))
        .map(str::to_string)
        .collect();
    if !out.status.success() && warnings.is_empty() {
        warnings.push(format!(
            "verilator exited with {}: {}",
            out.status,
            tail(&out, 20)
        ));
    }
    let synth = synth_generic(dir, &manifest)?;
    Ok(LintReport {
        top: manifest.top,
        verilator: warnings,
        synth,
    })
}

/// Generic Yosys synthesis of the folder `dir`: cell counts, latches and `check` problems.
pub fn synth(dir: &Path) -> Result<SynthReport> {
    let manifest = Manifest::load(dir)?;
    synth_generic(dir, &manifest)
}

fn synth_generic(dir: &Path, manifest: &Manifest) -> Result<SynthReport> {
    let yosys = require(Tool::Yosys)?;
    let scratch = ScratchDir::new("yosys")?;
    let files: Vec<String> = manifest
        .files
        .iter()
        .map(|f| dir.join(f).canonicalize().map(|p| p.display().to_string()))
        .collect::<std::io::Result<_>>()
        .context("a file listed in manifest.json is missing")?;
    let check_log = scratch.path().join("check.log");
    let stat_json = scratch.path().join("stat.json");
    let script = format!(
        "read_verilog {files}\nhierarchy -check -top {top}\nsynth -top {top}\n\
         tee -q -o {check} check\ntee -q -o {stat} stat -json\n",
        files = files.join(" "),
        top = manifest.top,
        check = check_log.display(),
        stat = stat_json.display()
    );
    let script_path = scratch.path().join("synth.ys");
    std::fs::write(&script_path, script)?;
    run(
        Command::new(yosys)
            .arg("-q")
            .arg("-s")
            .arg(&script_path)
            .current_dir(scratch.path()),
        "yosys synthesis",
    )?;
    let check = std::fs::read_to_string(&check_log)?;
    let problems = check
        .lines()
        .filter(|l| l.trim_start().starts_with("Warning:"))
        .map(|l| l.trim().to_string())
        .collect();
    let stat = parse_stat_json(&std::fs::read_to_string(&stat_json)?)?;
    let mut modules = BTreeMap::new();
    if let Some(ms) = stat["modules"].as_object() {
        for (name, v) in ms {
            modules.insert(name.trim_start_matches('\\').to_string(), cell_stats(v));
        }
    }
    let total = cell_stats(&stat["design"]);
    let latches = total
        .by_type
        .iter()
        .filter(|(t, _)| t.contains("LATCH"))
        .map(|(_, n)| n)
        .sum();
    Ok(SynthReport {
        top: manifest.top.clone(),
        modules,
        total,
        latches,
        yosys_problems: problems,
    })
}

/// Parses `stat -json` output. Yosys 0.23 prints the hierarchy listing (lines such as
/// `       fp16_mul_l1                   1`) into the middle of the JSON when a top module is set;
/// those lines are dropped: every line of real JSON here starts with a quote or a brace.
fn parse_stat_json(text: &str) -> Result<serde_json::Value> {
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

fn cell_stats(v: &serde_json::Value) -> CellStats {
    let mut s = CellStats {
        cells: v["num_cells"].as_u64().unwrap_or(0),
        ..Default::default()
    };
    if let Some(types) = v["num_cells_by_type"].as_object() {
        for (t, n) in types {
            let n = n.as_u64().unwrap_or(0);
            if t.contains("DFF") {
                s.flip_flops += n;
            }
            s.by_type.insert(t.clone(), n);
        }
    }
    s
}
