//! Building a Verilator model of an output folder's top module into a shared library, cached by
//! content hash.
//!
//! The C++ shim is rendered with tera from the manifest's port list; `verilator --cc --exe`
//! writes the model's C++ and makefile, and make compiles model and shim with `-fPIC` and links
//! them with `-shared`, so the "exe" is a library that libloading opens. Verilator's run-time
//! objects come from a cache of their own (`runtime.rs`) instead of being compiled for every
//! model, and every file starts from a precompiled `verilated.h` (`pch.rs`: a small model's
//! C++ in a third to a half of the CPU time); a hierarchical build runs `verilator --build`,
//! which drives its per-block makefile. The cache key covers the Verilog text, the shim, the
//! options and Verilator's version, so an unchanged design is never rebuilt, and a changed one
//! always is. Concurrent builds of the same design (parallel tests) serialize on a lock file.
//!
//! A cached library is verified before it is loaded: its length and content hash, recorded in
//! `libdut.so.sum` when it was built, must match, or the entry is rebuilt with a one-line
//! notice (a truncated or corrupted library would otherwise kill the process with SIGBUS or
//! SIGSEGV when opened). Build folders left by interrupted builds (`<key>.tmp-<pid>` whose
//! process is gone) are removed. The Verilog sources stay in the cache entry (`src/`), so the
//! file names in assertion messages point at files that exist.

use std::fs::File;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use gen::cache::{cache_root, checksum, without_provenance, Fnv};
use gen::manifest::{Manifest, ModuleEntry};
use gen::tools::verilator_version;
use serde::Serialize;

const SHIM_TEMPLATE: &str = include_str!("../templates/shim.cpp.tera");

/// Waveform file formats: VCD (text, any viewer) or FST (GTKWave's compressed format, often
/// 10-50x smaller).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum WaveFormat {
    Vcd,
    Fst,
}

impl WaveFormat {
    /// The format a waveform path asks for by its extension (`.fst`, else VCD).
    pub fn of_path(path: &Path) -> WaveFormat {
        match path.extension().and_then(|e| e.to_str()) {
            Some("fst") => WaveFormat::Fst,
            _ => WaveFormat::Vcd,
        }
    }

    pub fn extension(&self) -> &'static str {
        match self {
            WaveFormat::Vcd => "vcd",
            WaveFormat::Fst => "fst",
        }
    }
}

/// How a model's C++ is compiled: the one build choice, made where a run starts (the CLI's
/// command, a test), from the run's expected length.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Profile {
    /// For long runs: the per-cycle code at `-O2` rather than Verilator's `-Os` (12-25 % more
    /// cycles/s on the small and medium cores for the same build time; benches/sim_speed.rs).
    #[default]
    Speed,
    /// For runs of up to a few million cycles: functions of at most ~100 statements
    /// (`--output-split-cfuncs 100`) at `-O1`. g++ compiles the same logic in a quarter of the
    /// CPU time (its optimizer is superlinear in a function's size), and the model simulates
    /// about a quarter slower (docs/simulation-speed.md).
    ShortRun,
    /// For a few hundred cycles, such as the fault-injection cores: the short-run split at
    /// `-O0`, about a third less build time again, several times slower to simulate.
    Debug,
}

impl Profile {
    /// What `REGFLASH_FAST_BUILD` asks for: `1` every model for short runs, `0` every model
    /// for speed; unset (None) leaves the choice to the run. The one place it is read.
    pub fn from_env() -> Result<Option<Profile>> {
        match std::env::var("REGFLASH_FAST_BUILD").as_deref() {
            Err(_) | Ok("") => Ok(None),
            Ok("0") => Ok(Some(Profile::Speed)),
            Ok("1") => Ok(Some(Profile::ShortRun)),
            Ok(v) => bail!(
                "REGFLASH_FAST_BUILD = `{v}` is not understood: set it to 1 to build every \
                 model for short runs, 0 to build every model for speed, or unset it to let \
                 regflash choose from the run's predicted length"
            ),
        }
    }

    /// Verilator's flags and the make arguments (each after `-MAKEFLAGS`) of the profile.
    fn flags(self) -> Vec<String> {
        let mut f: Vec<String> = vec![];
        if self != Profile::Speed {
            f.extend(["--output-split-cfuncs".into(), "100".into()]);
        }
        let opt: &[&str] = match self {
            Profile::Speed => &["OPT_FAST=-O2"],
            Profile::ShortRun => &["OPT_FAST=-O1"],
            Profile::Debug => &["OPT_FAST=-O0", "OPT_SLOW=-O0", "OPT_GLOBAL=-O0"],
        };
        for flag in opt {
            f.extend(["-MAKEFLAGS".into(), flag.to_string()]);
        }
        f
    }
}

/// Options that change the built model.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct BuildOptions {
    /// Build with tracing in this format (waveforms), or without.
    pub trace: Option<WaveFormat>,
    /// How the C++ is compiled.
    pub profile: Profile,
    /// Simulation threads of the model (`verilator --threads`): 0 or 1 for one. Worth it for
    /// big designs (the npu16 core: +20 % cycles/s with two), not for cores that share the
    /// machine with other runs.
    pub threads: u32,
    /// Modules to verilate once each as hierarchical blocks (`verilator --hierarchical`):
    /// every instance shares one compiled copy of the block's code instead of a copy of its
    /// own, which cuts the C++ to compile by the number of instances. Each instance is then a
    /// model of its own behind a DPI wrapper, which costs time every cycle
    /// (docs/simulation-speed.md).
    pub hier_blocks: Vec<String>,
    /// Simulate the clock gates as enables (`REGFLASH_NO_CLOCK_GATES`: each gated register on
    /// `clk`, loading when its gate's enable is high) instead of as gates: the two readings
    /// load the same registers at the same edges (`tests/ir_ops.rs` holds them equal under
    /// Verilator and Icarus), and a core with its PEs' 64 gated clocks each simulates about
    /// 2.1× slower as gates (`small`, 1,024 tokens). Off: the Verilog as synthesis reads it.
    pub gates_as_enables: bool,
}

/// Extra arguments for `verilator` from `REGFLASH_VERILATOR_ARGS` (white-space separated),
/// for trying build and simulation options (`--threads 2`, `-MAKEFLAGS OPT_FAST=-O2`, ...);
/// they are part of the cache key.
pub fn extra_args() -> Vec<String> {
    std::env::var("REGFLASH_VERILATOR_ARGS")
        .map(|v| v.split_whitespace().map(String::from).collect())
        .unwrap_or_default()
}

impl BuildOptions {
    /// Options from the environment, for a run that has no better knowledge: tracing from
    /// `REGFLASH_WAVES` (`1` or `vcd`: VCD, `fst`: FST), the profile from
    /// `REGFLASH_FAST_BUILD` ([`Profile::from_env`]; unset: for speed).
    pub fn from_env() -> Result<Self> {
        Ok(BuildOptions {
            trace: WaveFormat::from_env(),
            profile: Profile::from_env()?.unwrap_or_default(),
            ..BuildOptions::default()
        })
    }
}

impl WaveFormat {
    /// What `REGFLASH_WAVES` asks for: `1` or `vcd` VCD, `fst` FST, anything else none.
    pub fn from_env() -> Option<WaveFormat> {
        match std::env::var("REGFLASH_WAVES").as_deref() {
            Ok("1") | Ok("vcd") => Some(WaveFormat::Vcd),
            Ok("fst") => Some(WaveFormat::Fst),
            _ => None,
        }
    }
}

/// A built model: the shared library and the port list of its top.
#[derive(Clone, Debug)]
pub struct Built {
    pub library: PathBuf,
    pub top: ModuleEntry,
    pub options: BuildOptions,
    /// False when the library came from the cache.
    pub compiled: bool,
}

#[derive(Serialize)]
struct ShimPort {
    name: String,
    width: u32,
    words: u32,
    last_mask: String,
    input: bool,
}

/// Renders the C++ shim for `top`.
pub fn render_shim(top: &ModuleEntry, options: &BuildOptions) -> Result<String> {
    let ports: Vec<ShimPort> = top
        .ports
        .iter()
        .map(|p| {
            let rem = p.width % 32;
            ShimPort {
                name: p.name.clone(),
                width: p.width,
                words: p.width.div_ceil(32),
                last_mask: if rem == 0 {
                    "0xffffffff".into()
                } else {
                    format!("{:#x}", (1u64 << rem) - 1)
                },
                input: p.is_input(),
            }
        })
        .collect();
    let mut ctx = tera::Context::new();
    ctx.insert("top", &top.name);
    ctx.insert("ports", &ports);
    ctx.insert("trace", &options.trace.is_some());
    ctx.insert("fst", &(options.trace == Some(WaveFormat::Fst)));
    ctx.insert("has_clk", &top.port("clk").is_some());
    tera::Tera::one_off(SHIM_TEMPLATE, &ctx, false).context("cannot render the C++ shim")
}

fn checksum_path(library: &Path) -> PathBuf {
    library.with_extension("so.sum")
}

/// True if `library` exists and matches the checksum recorded when it was built.
fn cached_library_ok(library: &Path) -> Result<bool> {
    if !library.is_file() {
        return Ok(false);
    }
    let Ok(recorded) = std::fs::read_to_string(checksum_path(library)) else {
        return Ok(false);
    };
    Ok(checksum(library)? == recorded)
}

/// Removes `<key>.tmp-<pid>` build folders whose process no longer runs (interrupted builds).
fn remove_stale_builds(root: &Path) {
    let Ok(entries) = std::fs::read_dir(root) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let Some(pid) = name
            .rsplit_once(".tmp-")
            .and_then(|(_, p)| p.parse::<u32>().ok())
        else {
            continue;
        };
        if pid != std::process::id() && !process_alive(pid) {
            let _ = std::fs::remove_dir_all(e.path());
        }
    }
}

/// Whether process `pid` runs (Linux: /proc; elsewhere assumed alive, so nothing is removed).
fn process_alive(pid: u32) -> bool {
    let proc = Path::new("/proc");
    !proc.is_dir() || proc.join(pid.to_string()).exists()
}

/// The first Verilator whose DFG optimizer the suite has found right (see [`model_flags`]).
const DFG_FIXED: (u32, u32) = (5, 48);

/// The Verilator flags that shape a model (beyond its sources and top): the RTL's assertions,
/// tracing, the C++ optimization, simulation threads and `REGFLASH_VERILATOR_ARGS`, for
/// Verilator `version`.
fn model_flags(options: &BuildOptions, version: (u32, u32)) -> Vec<String> {
    // Simulation runs with the RTL's assertions on. Verilator 5.006's DFG optimizer is off: it
    // mis-evaluates a row's 32-term register-write count on 16-column reg3d cores (three times
    // the sum of its bits; the Verilog is right, Icarus agrees, and `-fno-dfg` fixes it;
    // tests/core.rs `sixteen_columns_count_right`). 5.048 evaluates it right (that test passes
    // with DFG on, and fails on 5.006), and seed runs 6 % faster with it: on from 5.048.
    let mut f: Vec<String> = vec!["--assert".into(), "+define+REGFLASH_ASSERTIONS".into()];
    if options.gates_as_enables {
        f.push(format!("+define+{}", gen::verilog::NO_CLOCK_GATES));
    }
    if version < DFG_FIXED {
        f.push("-fno-dfg".into());
    }
    match options.trace {
        Some(WaveFormat::Vcd) => f.push("--trace".into()),
        Some(WaveFormat::Fst) => f.push("--trace-fst".into()),
        None => {}
    }
    f.extend(options.profile.flags());
    if options.threads > 1 {
        f.extend(["--threads".into(), options.threads.to_string()]);
    }
    if !options.hier_blocks.is_empty() {
        f.push("--hierarchical".into());
        if options.threads > 1 {
            // Each block instance is a model of its own, called through a DPI wrapper;
            // letting those calls run on any thread spreads the rows over the threads
            // (seed: +22 % cycles/s with two).
            f.extend(["--threads-dpi".into(), "all".into()]);
        }
    }
    f.extend(extra_args());
    f
}

/// The Verilator flags and the make arguments (the values of `-MAKEFLAGS`) in `flags`.
fn split_make_flags(flags: &[String]) -> (Vec<String>, Vec<String>) {
    let (mut verilator, mut make) = (vec![], vec![]);
    let mut it = flags.iter();
    while let Some(f) = it.next() {
        match (f.as_str(), it.clone().next()) {
            ("-MAKEFLAGS", Some(v)) => {
                make.push(v.clone());
                it.next();
            }
            _ => verilator.push(f.clone()),
        }
    }
    (verilator, make)
}

/// Source files: (name in the manifest, content).
type Sources = Vec<(String, Vec<u8>)>;

/// The cache key of the model (the top's name and a hash of the Verilator `version`, the
/// shim, the options, the flags and every source without its provenance header) and the
/// sources, read from the folder `dir`.
fn cache_key(
    dir: &Path,
    manifest: &Manifest,
    options: &BuildOptions,
    version: (u32, u32),
    shim: &str,
    flags: &[String],
) -> Result<(String, Sources)> {
    let (major, minor) = version;
    let mut hash = Fnv::new();
    hash.feed(format!("verilator {major}.{minor}").as_bytes());
    hash.feed(shim.as_bytes());
    hash.feed(format!("{options:?} {flags:?}").as_bytes());
    let mut sources = vec![];
    for f in &manifest.files {
        let path = dir.join(f);
        let text = std::fs::read(&path).with_context(|| {
            format!(
                "{} is listed in manifest.json but cannot be read",
                path.display()
            )
        })?;
        hash.feed(f.as_bytes());
        hash.feed(without_provenance(&text));
        sources.push((f.clone(), text));
    }
    let key = format!("{}-{:016x}", manifest.top_module().name, hash.0);
    Ok((key, sources))
}

/// Removes the cache entry `final_dir` left by an earlier build, saying why if it holds a
/// `library` (damaged, or without its checksum).
fn remove_damaged_entry(final_dir: &Path, library: &Path) -> Result<()> {
    if !final_dir.exists() {
        return Ok(());
    }
    if library.exists() {
        let why = if checksum_path(library).exists() {
            "is damaged (its content hash does not match the one recorded when it was built)"
        } else {
            "has no recorded checksum (an interrupted build, or an older regflash)"
        };
        eprintln!(
            "regflash: the cached model {} {why}; rebuilding it",
            library.display()
        );
    }
    std::fs::remove_dir_all(final_dir).with_context(|| {
        format!(
            "cannot remove the damaged cache entry {}",
            final_dir.display()
        )
    })
}

/// Writes the `sources`, the `shim` and (for a hierarchical build) the Verilator
/// configuration naming the blocks into `src`. Returns the files to verilate and the shim's
/// path.
fn write_sources(
    src: &Path,
    sources: &[(String, Vec<u8>)],
    shim: &str,
    options: &BuildOptions,
) -> Result<(Vec<PathBuf>, PathBuf)> {
    std::fs::create_dir_all(src).with_context(|| format!("cannot create {}", src.display()))?;
    let mut files = vec![];
    for (name, text) in sources {
        let p = src.join(name);
        std::fs::write(&p, text)?;
        files.push(p);
    }
    let shim_path = src.join("regflash_shim.cpp");
    std::fs::write(&shim_path, shim)?;
    if !options.hier_blocks.is_empty() {
        // The blocks are named in a Verilator configuration file, so the Verilog itself
        // carries no simulator-specific comment.
        let vlt = src.join("hier_blocks.vlt");
        let mut text = String::from("`verilator_config\n");
        for m in &options.hier_blocks {
            text.push_str(&format!("hier_block -module \"{m}\"\n"));
        }
        std::fs::write(&vlt, text)?;
        files.insert(0, vlt);
    }
    Ok((files, shim_path))
}

/// One compilation of a model: its top, the cache root, the work folder, the files and the
/// flags.
struct Job<'a> {
    top: &'a str,
    root: &'a Path,
    work: &'a Path,
    files: Vec<PathBuf>,
    shim_path: PathBuf,
    verilator_flags: Vec<String>,
    make_flags: Vec<String>,
    /// Verilator builds the blocks and the top itself (`--build`).
    hierarchical: bool,
    /// Parallel compile jobs.
    jobs: usize,
}

impl Job<'_> {
    /// The error of a failed step `what` (with the compiler's output `out`); removes the work
    /// folder.
    fn failed(&self, what: &str, out: &std::process::Output) -> anyhow::Error {
        let log = gen::tools::tail(out, 80);
        let _ = std::fs::remove_dir_all(self.work);
        anyhow::anyhow!(
            "building the Verilator model of `{}` failed ({what}: {}). Compiler output:\n{log}",
            self.top,
            out.status
        )
    }

    /// Runs Verilator on the files (a hierarchical build also compiles, through `--build`).
    fn verilate(&self, verilator: &gen::tools::Verilator) -> Result<()> {
        let run = || {
            let mut cmd = verilator.command();
            cmd.current_dir(self.work)
                .args(["--cc", "--exe", "-Wno-fatal"])
                .args(["--top-module", self.top])
                .args(["-Mdir", "obj", "-o", "libdut.so"])
                .args(["-CFLAGS", "-fPIC", "-LDFLAGS", "-shared"])
                .args(&self.verilator_flags);
            // A hierarchical build runs Verilator once per block and then the top, through a
            // makefile of its own: `--build` drives it. Otherwise we verilate and run make
            // ourselves, so that the run-time objects come from the cache (runtime.rs) instead
            // of being compiled again for every model.
            if self.hierarchical {
                cmd.args(["--build", "-j", &self.jobs.to_string()]).args(
                    self.make_flags
                        .iter()
                        .flat_map(|f| ["-MAKEFLAGS".to_string(), f.clone()]),
                );
            }
            cmd.args(&self.files).arg(&self.shim_path);
            cmd.output()
                .context("cannot run verilator to build the simulation model")
        };
        let mut out = run()?;
        // Verilator 5.006's hierarchical makefile can reach a block's library before the
        // block's own makefile is written (seen once in a cold suite on two loaded cores:
        // "make[1]: *** No targets. Stop."): start that build over once, from a clean folder.
        let raced = |o: &std::process::Output| {
            String::from_utf8_lossy(&o.stdout).contains("No targets")
                || String::from_utf8_lossy(&o.stderr).contains("No targets")
        };
        if self.hierarchical && !out.status.success() && raced(&out) {
            let _ = std::fs::remove_dir_all(self.work.join("obj"));
            out = run()?;
        }
        if !out.status.success() {
            let step = if self.hierarchical {
                "verilator --build"
            } else {
                "verilating"
            };
            return Err(self.failed(step, &out));
        }
        Ok(())
    }

    /// Compiles the verilated model with make, the run-time objects from the cache (and
    /// stored there when they were not).
    fn make(&self) -> Result<()> {
        let obj = self.work.join("obj");
        let makefile = format!("V{}.mk", self.top);
        let runtime = crate::runtime::Runtime::of(&obj, &makefile, &self.make_flags, self.root)?;
        let reused = runtime.install(&obj);
        let pch = crate::pch::Pch::prepare(&obj, &makefile, &self.make_flags, self.root);
        let out = gen::tools::verilator()?
            .make()
            .current_dir(&obj)
            .args(["-f", &makefile, "-j", &self.jobs.to_string()])
            .args(&self.make_flags)
            .args(&pch)
            .output()
            .context("cannot run make to compile the simulation model")?;
        if !out.status.success() {
            return Err(self.failed("compiling", &out));
        }
        if !reused {
            runtime.store(&obj);
        }
        Ok(())
    }
}

/// Moves the built library from the work folder into the cache entry as `library`, with its
/// checksum, and removes the work folder.
fn install_library(work: &Path, final_dir: &Path, library: &Path) -> Result<()> {
    let output = work.join("obj").join("libdut.so");
    if !output.is_file() {
        bail!(
            "verilator reported success but {} is missing",
            output.display()
        );
    }
    // Keep only the library and its checksum: the object folder is large and not needed again.
    // The checksum is written first and the library renamed into place last, so a library
    // that exists always has its checksum.
    let partial = final_dir.join("libdut.so.partial");
    std::fs::rename(&output, &partial)?;
    std::fs::write(checksum_path(library), checksum(&partial)?)?;
    std::fs::rename(&partial, library)?;
    let _ = std::fs::remove_dir_all(work);
    Ok(())
}

/// Builds (or finds in the cache) the Verilator model of the folder `dir`'s top module.
pub fn build(dir: &Path, options: &BuildOptions) -> Result<Built> {
    let manifest = Manifest::load(dir)?;
    let top = manifest.top_module().clone();
    let version = verilator_version()?;
    let shim = render_shim(&top, options)?;
    // Every flag that shapes the model is in the key (a changed recipe rebuilds).
    let flags = model_flags(options, version);
    let (key, sources) = cache_key(dir, &manifest, options, version, &shim, &flags)?;
    let root = cache_root().join("verilator");
    std::fs::create_dir_all(&root)
        .with_context(|| format!("cannot create the model cache {}", root.display()))?;
    let final_dir = root.join(&key);
    let library = final_dir.join("libdut.so");
    let built = |compiled| Built {
        library: library.clone(),
        top: top.clone(),
        options: options.clone(),
        compiled,
    };
    if cached_library_ok(&library)? {
        log_build(&top.name, &key, None);
        return Ok(built(false));
    }

    // One builder at a time per design; whoever waited finds the library afterwards.
    let lock_path = root.join(format!("{key}.lock"));
    let lock = File::create(&lock_path)
        .with_context(|| format!("cannot create lock file {}", lock_path.display()))?;
    lock.lock().context("cannot lock the model cache")?;
    if cached_library_ok(&library)? {
        log_build(&top.name, &key, None);
        return Ok(built(false));
    }
    remove_stale_builds(&root);
    remove_damaged_entry(&final_dir, &library)?;
    let work = root.join(format!("{key}.tmp-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&work);
    std::fs::create_dir_all(&work)?;
    // The sources live in the cache entry itself, so that assertion messages, which name the
    // Verilog file and line, point at files that outlive the build.
    let (files, shim_path) = write_sources(&final_dir.join("src"), &sources, &shim, options)?;
    eprintln!(
        "regflash: building the Verilator model of `{}` (cached for later runs) ...",
        top.name
    );

    let verilator = gen::tools::verilator()?;
    let (verilator_flags, make_flags) = split_make_flags(&flags);
    // The install's own make variables first: a flag of the user's may override them.
    let mut make_flags: Vec<String> = verilator
        .make_vars()
        .into_iter()
        .chain(make_flags)
        .collect();
    let hierarchical = !options.hier_blocks.is_empty();
    if !hierarchical {
        make_flags = crate::pch::tag_opt_levels(&make_flags);
    }
    let job = Job {
        top: &top.name,
        root: &root,
        work: &work,
        files,
        shim_path,
        verilator_flags,
        make_flags,
        hierarchical,
        jobs: std::thread::available_parallelism().map_or(1, |n| n.get()),
    };
    let started = std::time::Instant::now();
    job.verilate(verilator)?;
    let verilated = started.elapsed().as_secs_f64();
    if !job.hierarchical {
        job.make()?;
    }
    install_library(&work, &final_dir, &library)?;
    // The lock file stays: removing it could let a waiting builder and a new one race.
    drop(lock);
    let total = started.elapsed().as_secs_f64();
    log_build(&top.name, &key, Some((verilated, total - verilated)));
    Ok(built(true))
}

/// With `$REGFLASH_BUILD_LOG` set (`scripts/test` sets it), appends one line per model
/// request to that file: top, cache key, and `hit`, or `built` with the seconds verilating
/// and compiling took (a hierarchical build's `verilator --build` counts as verilating). The
/// suite's closing table reads it. A log that cannot be written is ignored: it measures,
/// nothing depends on it.
fn log_build(top: &str, key: &str, seconds: Option<(f64, f64)>) {
    let Some(path) = std::env::var_os("REGFLASH_BUILD_LOG") else {
        return;
    };
    let line = match seconds {
        None => format!("{top}\t{key}\thit\t0\t0\n"),
        Some((v, c)) => format!("{top}\t{key}\tbuilt\t{v:.1}\t{c:.1}\n"),
    };
    // One short write per line in append mode: lines from parallel tests do not interleave.
    let _ = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .and_then(|mut f| std::io::Write::write_all(&mut f, line.as_bytes()));
}
