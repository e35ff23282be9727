//! Verilator's run-time library, compiled once and shared by every model built the same way.
//!
//! Each Verilator model links a few objects of the run-time library (`verilated.o`,
//! `verilated_threads.o`, and `verilated_dpi.o`, `verilated_vcd_c.o`, ... where the model
//! needs them: the `VM_GLOBAL_FAST` and `VM_GLOBAL_SLOW` lists of its classes makefile), and
//! make compiles them again for every model: about 8 s of CPU each time (`verilated.cpp`
//! alone is 6.4 s at `-Os`), the same work a hundred times over in the test suite.
//!
//! Here they are compiled once per exact compile command: the key is the command lines make
//! would run for them (`make -n`: compiler, flags, defines, sources), the Verilator version and
//! the compiler's own version. The objects are kept under `runtime-<key>/` in the model cache,
//! each with a recorded content hash; a model's build copies them into its object folder
//! before make runs (make then finds them newer than the makefile and their sources, and
//! links them as they are). An object whose hash does not match is not used: make compiles it
//! as before, and the good copy replaces it.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result};

use gen::cache::{checksum, Fnv};

/// The run-time objects of one model's build, and where the cache keeps them.
pub struct Runtime {
    /// Object file names (`verilated.o`, ...).
    objects: Vec<String>,
    /// The cache folder for these objects as this build compiles them.
    dir: PathBuf,
}

/// The names listed after `<var> += \` in a classes makefile (one per line, each ending in
/// a backslash, up to the first line that does not).
fn listed(classes: &str, var: &str) -> Vec<String> {
    let mut names = vec![];
    let mut lines = classes.lines();
    while let Some(l) = lines.next() {
        if l.trim() != format!("{var} += \\") {
            continue;
        }
        for item in lines.by_ref() {
            let Some(name) = item.trim().strip_suffix('\\') else {
                break;
            };
            let name = name.trim();
            if !name.is_empty() {
                names.push(name.to_string());
            }
        }
    }
    names
}

impl Runtime {
    /// The run-time objects the makefile `makefile` in `obj` (just written by Verilator)
    /// links, keyed by how `make_flags` would compile them; cached ones live under `root`.
    pub fn of(obj: &Path, makefile: &str, make_flags: &[String], root: &Path) -> Result<Self> {
        let classes_path = obj.join(makefile.replace(".mk", "_classes.mk"));
        let classes = std::fs::read_to_string(&classes_path)
            .with_context(|| format!("Verilator did not write {}", classes_path.display()))?;
        let mut objects: Vec<String> = ["VM_GLOBAL_FAST", "VM_GLOBAL_SLOW"]
            .iter()
            .flat_map(|v| listed(&classes, v))
            .map(|n| format!("{n}.o"))
            .collect();
        objects.sort();
        objects.dedup();
        // What make would run for them, without running it.
        let out = gen::tools::verilator()?
            .make()
            .current_dir(obj)
            .args(["-n", "-f", makefile])
            .args(make_flags)
            .args(&objects)
            .output()
            .context("cannot run make to list the run-time library's compile commands")?;
        let commands = String::from_utf8_lossy(&out.stdout).into_owned();
        let mut h = Fnv::new();
        h.feed(b"verilator run-time objects");
        h.feed(&out.status.code().unwrap_or(-1).to_le_bytes());
        h.feed(commands.as_bytes());
        for o in &objects {
            h.feed(o.as_bytes());
        }
        // The compiler named by the first command, by its own version.
        if let Some(cc) = commands.split_whitespace().find(|w| !w.contains('=')) {
            if let Ok(v) = Command::new(cc).arg("--version").output() {
                h.feed(&v.stdout);
            }
        }
        let verilator = gen::tools::verilator()?;
        h.feed(verilator.describe().as_bytes());
        if let Ok(v) = verilator.command().arg("--version").output() {
            h.feed(&v.stdout);
        }
        Ok(Runtime {
            objects,
            dir: root.join(format!("runtime-{:016x}", h.0)),
        })
    }

    fn sum_path(&self, object: &str) -> PathBuf {
        self.dir.join(format!("{object}.sum"))
    }

    /// Copies the cached objects into `obj`, if every one is there and intact: true if so.
    pub fn install(&self, obj: &Path) -> bool {
        let intact = |o: &String| {
            let cached = self.dir.join(o);
            let recorded = std::fs::read_to_string(self.sum_path(o)).ok();
            recorded.is_some() && checksum(&cached).ok() == recorded
        };
        if self.objects.is_empty() || !self.objects.iter().all(intact) {
            return false;
        }
        // A fresh copy is newer than the makefile Verilator just wrote, so make keeps it.
        self.objects
            .iter()
            .all(|o| std::fs::copy(self.dir.join(o), obj.join(o)).is_ok())
    }

    /// Keeps the objects make just compiled in `obj` for later builds (best effort: a model
    /// builds the same without the cache).
    pub fn store(&self, obj: &Path) {
        if std::fs::create_dir_all(&self.dir).is_err() {
            return;
        }
        let pid = std::process::id();
        for o in &self.objects {
            let (built, dest) = (obj.join(o), self.dir.join(o));
            let Ok(sum) = checksum(&built) else {
                continue;
            };
            let tmp = self.dir.join(format!("{o}.tmp-{pid}"));
            let sum_tmp = self.dir.join(format!("{o}.sum.tmp-{pid}"));
            // Object first, then its hash: a reader that sees a new hash finds the new object.
            let ok = std::fs::copy(&built, &tmp).is_ok()
                && std::fs::rename(&tmp, &dest).is_ok()
                && std::fs::write(&sum_tmp, sum).is_ok()
                && std::fs::rename(&sum_tmp, self.sum_path(o)).is_ok();
            if !ok {
                let _ = std::fs::remove_file(&tmp);
                let _ = std::fs::remove_file(&sum_tmp);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::listed;

    #[test]
    fn lists_the_global_classes() {
        let classes = "VM_GLOBAL_FAST += \\\n\tverilated \\\n\tverilated_threads \\\n\n\
                       # Global classes, slow\nVM_GLOBAL_SLOW += \\\n\n";
        assert_eq!(
            listed(classes, "VM_GLOBAL_FAST"),
            ["verilated", "verilated_threads"]
        );
        assert!(listed(classes, "VM_GLOBAL_SLOW").is_empty());
        assert!(listed(classes, "VM_FAST").is_empty());
    }
}
