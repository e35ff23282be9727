//! A precompiled `verilated.h`, shared by every model's C++ files.
//!
//! Verilator writes a model as several C++ files (nine for a one-PE core, more with
//! `--output-split-cfuncs`), and each starts by parsing `verilated.h` and the standard headers
//! behind it: about 0.6 s of g++ per file at any optimization level, most of a small model's
//! compile time. Here that header is precompiled once per exact compile command and kept in
//! the model cache (`pch-<key>/regflash_pch.h.gch/`, one variant per command: g++ picks, from
//! a `.gch` folder, the first variant built with the flags of the file it compiles, and parses
//! the header as text when none fits, so a missing or stale variant costs time, never
//! correctness). make then compiles every file with `-include regflash_pch.h` (make's
//! `USER_CPPFLAGS`, which Verilator never sets).
//!
//! g++ checks a variant's macros and some code-generation flags, but not the optimization
//! level: a `.gch` built at `-O1` is taken by an `-O2` compile, whose inter-procedural passes
//! can then crash the compiler (g++ 12, a traced model). So every optimization variable of
//! the makefile (`OPT_FAST`, `OPT_SLOW`, `OPT_GLOBAL`) carries a macro naming its value
//! ([`tag_opt_levels`]), and the header tests that macro: g++ then refuses a variant built at
//! another level ("not used because `REGFLASH_PCH_OPT` defined as ...").
//!
//! The commands are make's own (`make -n`), as for the run-time objects (`runtime.rs`): a
//! variant is keyed by a command's flags without its input, output and dependency-file
//! options, plus the compiler's and Verilator's versions. Each variant's length and content
//! hash are recorded when it is built and checked before every build: a damaged one is built
//! again.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result};

use gen::cache::{checksum, Fnv};

/// The header's name in its cache folder.
const HEADER: &str = "regflash_pch.h";

/// The header's text: the optimization tag is tested, so that g++ records it and refuses a
/// variant built with another; then Verilator's `verilated.h`.
const HEADER_TEXT: &str = "#if REGFLASH_PCH_OPT\n#endif\n#include \"verilated.h\"\n";

/// What keeps a Verilator's own per-model precompiled header out of the compile commands.
const OWN_PCH_OFF: [&str; 2] = ["VK_PCH_I_FAST=", "VK_PCH_I_SLOW="];

/// The make optimization variables and verilated.mk's defaults for them.
const OPT_DEFAULTS: [(&str, &str); 3] =
    [("OPT_FAST", "-Os"), ("OPT_SLOW", ""), ("OPT_GLOBAL", "-Os")];

/// `make_flags` with every optimization variable set explicitly (the last assignment in
/// `make_flags`, else verilated.mk's default) and tagged with `-DREGFLASH_PCH_OPT=<hash of
/// its value>`, after the other flags.
pub fn tag_opt_levels(make_flags: &[String]) -> Vec<String> {
    let is_opt = |f: &str| {
        OPT_DEFAULTS
            .iter()
            .any(|(v, _)| f.starts_with(&format!("{v}=")))
    };
    let mut out: Vec<String> = make_flags.iter().filter(|f| !is_opt(f)).cloned().collect();
    for (var, default) in OPT_DEFAULTS {
        let prefix = format!("{var}=");
        let value = make_flags
            .iter()
            .rev()
            .find_map(|f| f.strip_prefix(&prefix))
            .unwrap_or(default);
        let mut h = Fnv::new();
        h.feed(value.as_bytes());
        // A positive decimal of at most 9 digits: any `#if` can evaluate it.
        let tag = h.0 % 999_999_999 + 1;
        out.push(
            format!("{var}={value} -DREGFLASH_PCH_OPT={tag}")
                .trim()
                .to_string(),
        );
    }
    out
}

/// The flags of one compile command, without what names its input, output and dependency
/// file (`-c`, `-o X`, `*.cpp`, `-MMD`, `-MP`, `-MF X`): the part the precompiled header must
/// be built with. None if `line` is not a C++ compile of a `.cpp` file.
fn header_flags(line: &str) -> Option<Vec<String>> {
    let words: Vec<&str> = line.split_whitespace().collect();
    if !words.contains(&"-c") || !words.iter().any(|w| w.ends_with(".cpp")) {
        return None;
    }
    let mut flags = vec![];
    let mut it = words.iter();
    while let Some(w) = it.next() {
        match *w {
            "-c" | "-MMD" | "-MP" => {}
            "-o" | "-MF" | "-include" => {
                it.next();
            }
            w if w.ends_with(".cpp") => {}
            w => flags.push(w.to_string()),
        }
    }
    Some(flags)
}

/// The precompiled header for the models built under the cache `root`.
pub struct Pch {
    dir: PathBuf,
}

impl Pch {
    /// The folder for this Verilator and this compiler (`compiler --version`).
    fn folder(root: &Path, compiler: &str) -> Result<PathBuf> {
        let mut h = Fnv::new();
        h.feed(b"regflash precompiled verilated.h, tagged by optimization level");
        let verilator = gen::tools::verilator()?;
        h.feed(verilator.describe().as_bytes());
        for v in [
            Command::new(compiler).arg("--version").output(),
            verilator.command().arg("--version").output(),
        ] {
            h.feed(&v.map(|o| o.stdout).unwrap_or_default());
        }
        Ok(root.join(format!("pch-{:016x}", h.0)))
    }

    /// Makes sure a variant exists for every command make would run to compile the model in
    /// `obj` (`makefile`, `make_flags`), building the missing ones. Returns the make arguments
    /// that have every file include the header (`USER_CPPFLAGS=-include …`), or none when
    /// nothing could be prepared: the model then compiles as it always did.
    ///
    /// A Verilator whose makefiles precompile a header of their own for each model (5.048:
    /// `VK_PCH_H`, two compiles per model, fast and slow) is told not to ([`OWN_PCH_OFF`]):
    /// g++ takes one precompiled header, and the shared one costs a model nothing.
    pub fn prepare(obj: &Path, makefile: &str, make_flags: &[String], root: &Path) -> Vec<String> {
        let own = gen::tools::verilator().is_ok_and(|v| v.own_pch);
        let mut flags = make_flags.to_vec();
        if own {
            flags.extend(OWN_PCH_OFF.map(String::from));
        }
        let prepared = Self::try_prepare(obj, makefile, &flags, root).and_then(|p| {
            let mut args = vec![format!(
                "USER_CPPFLAGS=-include {}",
                p.dir.join(HEADER).display()
            )];
            if own {
                args.extend(OWN_PCH_OFF.map(String::from));
                args.push(p.stand_in()?);
            }
            Ok(args)
        });
        prepared.unwrap_or_else(|e| {
            eprintln!("regflash: no shared precompiled header for this model ({e:#})");
            vec![]
        })
    }

    /// `VK_PCH_H=<stand-in>`: the makefile's own header replaced by an empty file whose `.fast.gch`
    /// and `.slow.gch` targets exist and are newer, so make never builds them (its object
    /// rules still name them as prerequisites).
    fn stand_in(&self) -> Result<String> {
        let header = self.dir.join("regflash_no_pch.h");
        if !header.is_file() {
            std::fs::write(&header, "")?;
        }
        for kind in ["fast", "slow"] {
            let stamp = self.dir.join(format!("regflash_no_pch.h.{kind}.gch"));
            if !stamp.is_file() {
                std::fs::write(&stamp, "")?;
            }
        }
        Ok(format!("VK_PCH_H={}", header.display()))
    }

    fn try_prepare(obj: &Path, makefile: &str, make_flags: &[String], root: &Path) -> Result<Pch> {
        let out = gen::tools::verilator()?
            .make()
            .current_dir(obj)
            .args(["-n", "-f", makefile])
            .args(make_flags)
            .output()
            .context("cannot run make to list the model's compile commands")?;
        let commands = String::from_utf8_lossy(&out.stdout).into_owned();
        let mut variants: Vec<Vec<String>> = commands.lines().filter_map(header_flags).collect();
        variants.sort();
        variants.dedup();
        let compiler = variants
            .first()
            .and_then(|f| f.first())
            .cloned()
            .context("make lists no C++ compile command")?;
        let dir = Self::folder(root, &compiler)?;
        let gch = dir.join(format!("{HEADER}.gch"));
        std::fs::create_dir_all(&gch)
            .with_context(|| format!("cannot create {}", gch.display()))?;
        let header = dir.join(HEADER);
        if !header.is_file() {
            let tmp = dir.join(format!("{HEADER}.tmp-{}", std::process::id()));
            std::fs::write(&tmp, HEADER_TEXT)?;
            std::fs::rename(&tmp, &header)?;
        }
        for flags in &variants {
            let mut h = Fnv::new();
            for f in flags {
                h.feed(f.as_bytes());
            }
            let variant = gch.join(format!("{:016x}.gch", h.0));
            // Each variant's length and content hash, recorded when it was built (outside the
            // `.gch` folder, where g++ would try every file): a damaged one is built again.
            let sum = dir.join(format!("{:016x}.sum", h.0));
            let recorded = std::fs::read_to_string(&sum).ok();
            if variant.is_file() && recorded.is_some() && checksum(&variant).ok() == recorded {
                continue;
            }
            // Built outside the `.gch` folder and renamed into it: a compiler never sees half
            // a variant, and two builders of the same one both end with a whole file.
            let tmp = dir.join(format!("{:016x}.tmp-{}", h.0, std::process::id()));
            let built = Command::new(&flags[0])
                .current_dir(obj)
                .args(&flags[1..])
                .args(["-x", "c++-header"])
                .arg(&header)
                .arg("-o")
                .arg(&tmp)
                .output()
                .context("cannot run the C++ compiler to precompile verilated.h")?;
            if !built.status.success() {
                let _ = std::fs::remove_file(&tmp);
                anyhow::bail!(
                    "precompiling verilated.h failed: {}",
                    String::from_utf8_lossy(&built.stderr)
                );
            }
            let sum_tmp = dir.join(format!("{:016x}.sum.tmp-{}", h.0, std::process::id()));
            std::fs::write(&sum_tmp, checksum(&tmp)?)?;
            std::fs::rename(&tmp, &variant)?;
            std::fs::rename(&sum_tmp, &sum)?;
        }
        Ok(Pch { dir })
    }
}

#[cfg(test)]
mod tests {
    use super::{header_flags, tag_opt_levels};

    #[test]
    fn every_optimization_level_is_explicit_and_tagged_by_its_value() {
        let flags = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let fast = tag_opt_levels(&flags(&["OPT_FAST=-O2", "VM_PARALLEL_BUILDS=1"]));
        assert_eq!(fast.len(), 4);
        assert_eq!(fast[0], "VM_PARALLEL_BUILDS=1");
        assert!(fast[1].starts_with("OPT_FAST=-O2 -DREGFLASH_PCH_OPT="));
        assert!(fast[2].starts_with("OPT_SLOW= -DREGFLASH_PCH_OPT="));
        assert!(fast[3].starts_with("OPT_GLOBAL=-Os -DREGFLASH_PCH_OPT="));
        // The last assignment wins, as in make; another value gets another tag.
        let short = tag_opt_levels(&flags(&["OPT_FAST=-O2", "OPT_FAST=-O1"]));
        assert!(short[0].starts_with("OPT_FAST=-O1 "));
        assert_ne!(fast[1].split('=').nth(2), short[0].split('=').nth(2));
        // The default level and the same level set explicitly are one variant.
        let os = tag_opt_levels(&flags(&["OPT_FAST=-Os"]));
        assert_eq!(os, tag_opt_levels(&[]));
    }

    /// With variants at two optimization levels side by side, each compile takes its own:
    /// g++ alone would take either (and an `-O2` compile on an `-O1` header can crash it).
    #[test]
    fn each_optimization_level_takes_its_own_variant() {
        use std::process::Command;
        let root = gen::tools::verilator()
            .unwrap()
            .command()
            .args(["--getenv", "VERILATOR_ROOT"])
            .output()
            .unwrap();
        let include = format!("-I{}/include", String::from_utf8_lossy(&root.stdout).trim());
        let dir = gen::tools::ScratchDir::new("pch-levels").unwrap();
        let d = dir.path();
        std::fs::write(d.join(super::HEADER), super::HEADER_TEXT).unwrap();
        std::fs::create_dir(d.join("regflash_pch.h.gch")).unwrap();
        std::fs::write(d.join("m.cpp"), "int main() { return 0; }\n").unwrap();
        let levels = ["-O1", "-O2"];
        let flags = |level: &str| -> Vec<String> {
            let tagged = tag_opt_levels(&[format!("OPT_FAST={level}")]);
            let value = tagged[0].strip_prefix("OPT_FAST=").unwrap().to_string();
            let mut f: Vec<String> = value.split_whitespace().map(String::from).collect();
            f.extend(["-fPIC".to_string(), include.clone()]);
            f
        };
        for level in levels {
            let out = Command::new("g++")
                .current_dir(d)
                .args(flags(level))
                .args(["-x", "c++-header", super::HEADER, "-o"])
                .arg(format!("regflash_pch.h.gch/{}.gch", &level[1..]))
                .output()
                .unwrap();
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        for level in levels {
            let out = Command::new("g++")
                .current_dir(d)
                .args(flags(level))
                .args(["-include", super::HEADER, "-H", "-c", "m.cpp", "-o", "m.o"])
                .output()
                .unwrap();
            let used = String::from_utf8_lossy(&out.stderr)
                .lines()
                .find(|l| l.starts_with("! "))
                .map(String::from);
            assert_eq!(
                used.as_deref(),
                Some(format!("! ./regflash_pch.h.gch/{}.gch", &level[1..]).as_str()),
                "the {level} compile took the wrong header (or none)"
            );
        }
    }

    #[test]
    fn a_compile_command_gives_its_flags_without_input_output_and_dependencies() {
        let line = "g++  -I.  -MMD -I/usr/share/verilator/include -DVM_TRACE=0 -fPIC \
                    -include /c/pch/regflash_pch.h -O1 -c -o Vtop__Syms.o Vtop__Syms.cpp";
        assert_eq!(
            header_flags(line).unwrap(),
            [
                "g++",
                "-I.",
                "-I/usr/share/verilator/include",
                "-DVM_TRACE=0",
                "-fPIC",
                "-O1"
            ]
        );
        assert_eq!(header_flags("ar -rcs Vtop__ALL.a Vtop.o"), None);
        assert_eq!(header_flags("g++ -shared -o libdut.so a.o b.o"), None);
    }
}
