//! Finding and running the external EDA tools, with errors that say how to get them.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::atomic::{AtomicU64, Ordering};

use anyhow::{bail, Context, Result};

/// An external tool regflash drives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tool {
    Verilator,
    Yosys,
    Iverilog,
    NextpnrIce40,
    /// OpenSTA (Debian's `opensta`: the command `sta`).
    OpenSta,
}

impl Tool {
    pub fn command(self) -> &'static str {
        match self {
            Tool::Verilator => "verilator",
            Tool::Yosys => "yosys",
            Tool::Iverilog => "iverilog",
            Tool::NextpnrIce40 => "nextpnr-ice40",
            Tool::OpenSta => "sta",
        }
    }
    fn package(self) -> &'static str {
        match self {
            Tool::NextpnrIce40 => "nextpnr-ice40 fpga-icestorm",
            Tool::OpenSta => "opensta",
            t => t.command(),
        }
    }
}

/// The path of `tool`, or an error that says how to install it.
pub fn require(tool: Tool) -> Result<PathBuf> {
    find_on_path(tool.command()).ok_or_else(|| {
        anyhow::anyhow!(
            "`{}` was not found on PATH. Install it with `sudo apt-get install -y {}` \
             (Debian/Ubuntu), or run `scripts/ensure-tools`, which installs every tool regflash uses.",
            tool.command(),
            tool.package()
        )
    })
}

fn find_on_path(cmd: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(cmd))
        .find(|p| p.is_file())
}

/// Verilator's version as (major, minor), e.g. (5, 6) for 5.006. Fails with an explanation if
/// Verilator is missing or older than 5.0 (the C++ shim uses the Verilator 5 API).
pub fn verilator_version() -> Result<(u32, u32)> {
    let exe = require(Tool::Verilator)?;
    let out = Command::new(&exe)
        .arg("--version")
        .output()
        .with_context(|| format!("cannot run {}", exe.display()))?;
    let text = String::from_utf8_lossy(&out.stdout);
    let version = parse_verilator_version(&text)
        .with_context(|| format!("cannot parse Verilator's version from `{}`", text.trim()))?;
    check_verilator_version(version)?;
    Ok(version)
}

/// Accepts Verilator 5.0 and newer (the shim uses the Verilator 5 API).
pub fn check_verilator_version((major, minor): (u32, u32)) -> Result<()> {
    if major < 5 {
        bail!(
            "Verilator {major}.{minor:03} is too old: regflash needs Verilator 5.0 or newer \
             (Debian 12 ships 5.006: `sudo apt-get install -y verilator`)"
        );
    }
    Ok(())
}

/// Parses "Verilator 5.006 2023-01-22 rev ..." into (5, 6).
pub fn parse_verilator_version(text: &str) -> Option<(u32, u32)> {
    let v = text.split_whitespace().nth(1)?;
    let (major, minor) = v.split_once('.')?;
    Some((major.parse().ok()?, minor.parse().ok()?))
}

/// Runs `cmd`, returning its output; fails with the command line and its stderr/stdout tail if
/// it cannot start or exits non-zero.
pub fn run(cmd: &mut Command, what: &str) -> Result<Output> {
    let out = cmd
        .output()
        .with_context(|| format!("{what}: cannot start {:?}", cmd.get_program()))?;
    if !out.status.success() {
        bail!("{what} failed ({}):\n{}", out.status, tail(&out, 60));
    }
    Ok(out)
}

/// The last `lines` lines of a command's stderr, then stdout.
pub fn tail(out: &Output, lines: usize) -> String {
    let mut text = String::from_utf8_lossy(&out.stderr).to_string();
    text.push_str(&String::from_utf8_lossy(&out.stdout));
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

/// A scratch folder removed when dropped.
pub struct ScratchDir(PathBuf);

impl ScratchDir {
    pub fn new(tag: &str) -> Result<Self> {
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let dir = std::env::temp_dir().join(format!(
            "regflash-{tag}-{}-{}",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&dir)
            .with_context(|| format!("cannot create scratch folder {}", dir.display()))?;
        Ok(ScratchDir(dir))
    }
    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for ScratchDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
