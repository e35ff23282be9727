//! `manifest.json`: what an output folder holds, for tools and for `verilator_tb`.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{Context, Result};
use hdl::ir::{Dir, Module};
use serde::{Deserialize, Serialize};

/// The manifest written beside the Verilog.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Manifest {
    /// Generator name and version.
    pub generator: String,
    /// The top module.
    pub top: String,
    /// Verilog files in dependency order (children first), relative to the folder.
    pub files: Vec<String>,
    /// Every module under the top.
    pub modules: Vec<ModuleEntry>,
    /// The top's pin-limited serial wrapper for FPGA smoke builds (file under `fpga/`).
    #[serde(default)]
    pub wrapper: Option<ModuleEntry>,
    /// Target clock of the constraints, MHz.
    #[serde(default = "default_clock")]
    pub clock_mhz: f64,
    /// Other files this folder holds (filelists, constraints), relative to the folder.
    #[serde(default)]
    pub extra_files: Vec<String>,
    /// The configuration that produced the design.
    pub config: serde_json::Value,
    /// Every memory array under the top (the SRAM banks a macro may replace).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub memories: Vec<MemoryEntry>,
}

/// A memory array of one module, and how many copies of the module the design holds.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct MemoryEntry {
    pub module: String,
    pub memory: String,
    pub depth: u32,
    pub width: u32,
    pub copies: u64,
    /// The module is emitted as a blackbox (a macro replaces it).
    pub blackbox: bool,
}

impl MemoryEntry {
    /// Bits of all copies.
    pub fn bits(&self) -> u64 {
        self.depth as u64 * self.width as u64 * self.copies
    }
}

fn default_clock() -> f64 {
    1500.0
}

/// One module of the design.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct ModuleEntry {
    pub name: String,
    pub file: String,
    /// All ports, clock and reset included.
    pub ports: Vec<PortEntry>,
    /// Inputs applied before clock edge 1 appear at the outputs after edge `latency`;
    /// 0 means combinational.
    pub latency: u32,
    /// The module's state machines, with a GTKWave translate file each.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub fsms: Vec<FsmEntry>,
    /// The modules this one instantiates, and how many times each.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub children: BTreeMap<String, u64>,
}

/// A state register, its named states and its waveform translate file.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct FsmEntry {
    /// The register's Verilog name (`state_q`).
    pub register: String,
    /// The Rust enum that declares the states.
    pub states_type: String,
    /// `localparam` name and code of every state, in code order.
    pub states: Vec<(String, u64)>,
    /// GTKWave translate filter file (hex codes to names), relative to the output folder.
    pub translate_file: String,
}

impl FsmEntry {
    /// The translate filter file's text: one `hex-code name` line per state (GTKWave shows the
    /// names on a trace displayed in hex with this filter).
    pub fn translate_text(&self) -> String {
        let mut out = format!("# {} states of {}\n", self.states_type, self.register);
        for (name, code) in &self.states {
            out += &format!("{code:x} {name}\n");
        }
        out
    }
}

/// One port.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct PortEntry {
    pub name: String,
    /// "input" or "output".
    pub dir: String,
    pub width: u32,
}

impl PortEntry {
    pub fn is_input(&self) -> bool {
        self.dir == "input"
    }
}

impl ModuleEntry {
    pub fn from_module(m: &Module) -> Self {
        ModuleEntry {
            name: m.name.clone(),
            file: format!("{}.v", m.name),
            ports: m
                .all_ports()
                .into_iter()
                .map(|p| PortEntry {
                    name: p.name,
                    dir: match p.dir {
                        Dir::Input => "input".into(),
                        Dir::Output => "output".into(),
                    },
                    width: p.width,
                })
                .collect(),
            latency: m.latency,
            fsms: m
                .fsms
                .iter()
                .map(|f| FsmEntry {
                    register: f.reg.clone(),
                    states_type: f.states_type.clone(),
                    states: f.states.clone(),
                    translate_file: format!("waves/{}.{}.gtkw.txt", m.name, f.reg),
                })
                .collect(),
            children: m.insts.iter().fold(BTreeMap::new(), |mut c, i| {
                *c.entry(i.module.name.clone()).or_default() += 1;
                c
            }),
        }
    }

    /// The port called `name`.
    pub fn port(&self, name: &str) -> Option<&PortEntry> {
        self.ports.iter().find(|p| p.name == name)
    }
}

impl Manifest {
    /// Reads `dir/manifest.json`.
    pub fn load(dir: &Path) -> Result<Manifest> {
        let path = dir.join("manifest.json");
        let text = std::fs::read_to_string(&path).with_context(|| {
            format!(
                "cannot read {}: is {} a folder written by `regflash gen`?",
                path.display(),
                dir.display()
            )
        })?;
        serde_json::from_str(&text)
            .with_context(|| format!("{} is not a valid regflash manifest", path.display()))
    }

    /// The entry of the top module.
    pub fn top_module(&self) -> &ModuleEntry {
        self.module(&self.top)
            .expect("manifest lists its top module")
    }

    /// The entry of module `name`.
    pub fn module(&self, name: &str) -> Option<&ModuleEntry> {
        self.modules.iter().find(|m| m.name == name)
    }

    /// The Verilog files' absolute paths, the folder being `dir`; a missing one is an error.
    pub fn absolute(&self, dir: &Path, file: &str) -> Result<String> {
        Ok(dir
            .join(file)
            .canonicalize()
            .with_context(|| format!("{file}, listed in manifest.json, is missing"))?
            .display()
            .to_string())
    }

    /// Every Verilog file of the design by absolute path (see [`Manifest::absolute`]).
    pub fn absolute_files(&self, dir: &Path) -> Result<Vec<String>> {
        self.files.iter().map(|f| self.absolute(dir, f)).collect()
    }

    /// Instances of each module under the top (the top: 1).
    pub fn copies(&self) -> Result<BTreeMap<&str, u64>> {
        let mut copies: BTreeMap<&str, u64> = BTreeMap::new();
        let mut order = vec![(self.top.as_str(), 1u64)];
        while let Some((name, k)) = order.pop() {
            *copies.entry(name).or_default() += k;
            let m = self.module(name).with_context(|| {
                format!("module `{name}` is instantiated but not in the manifest")
            })?;
            for (c, n) in &m.children {
                order.push((c.as_str(), k * n));
            }
        }
        Ok(copies)
    }

    /// `top` and every module under it, each once (names the manifest does not list, such as
    /// a netlist's macros, are kept but not descended into).
    pub fn subtree(&self, top: &str) -> Vec<String> {
        let mut seen = std::collections::BTreeSet::new();
        let mut order = vec![top.to_string()];
        let mut out = vec![];
        while let Some(name) = order.pop() {
            if !seen.insert(name.clone()) {
                continue;
            }
            if let Some(entry) = self.module(&name) {
                order.extend(entry.children.keys().cloned());
            }
            out.push(name);
        }
        out
    }
}
