//! [`Model`] (a loaded Verilator library) and [`Dut`] (one simulation instance of it).
//!
//! Timing convention: inputs set with [`Dut::set`] are seen by the next rising edge, which
//! [`Dut::tick`] produces; [`Dut::get`] returns the settled value of a port at the current time
//! (combinational outputs follow the inputs immediately). A block of latency L whose inputs
//! were set before the k-th tick shows the result after the (k + L − 1)-th tick, i.e. after L
//! ticks from the one that sampled the inputs; a latency-0 block shows it before any tick.

use std::collections::HashMap;
use std::ffi::{c_char, c_void, CString};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use anyhow::{bail, Context, Result};
use gen::manifest::{ModuleEntry, PortEntry};

use crate::compile::{build, BuildOptions, Built, WaveFormat};

type NewFn = unsafe extern "C" fn() -> *mut c_void;
type FreeFn = unsafe extern "C" fn(*mut c_void);
type TraceFn = unsafe extern "C" fn(*mut c_void, *const c_char, u64, u64, *const c_char) -> i32;
type SetFn = unsafe extern "C" fn(*mut c_void, u32, *const u32);
type GetFn = unsafe extern "C" fn(*mut c_void, u32, *mut u32);
type EvalFn = unsafe extern "C" fn(*mut c_void);
type TickFn = unsafe extern "C" fn(*mut c_void, u64);
type RunFn =
    unsafe extern "C" fn(*mut c_void, u64, u32, *const u32, *const u32, u32, *const u32, *mut u32);
type AbiFn = unsafe extern "C" fn() -> u32;
type ErrorsFn = unsafe extern "C" fn(*mut c_void) -> u32;

#[derive(Clone, Copy)]
struct Fns {
    new: NewFn,
    free: FreeFn,
    trace: TraceFn,
    set: SetFn,
    get: GetFn,
    eval: EvalFn,
    tick: TickFn,
    run: RunFn,
    errors: ErrorsFn,
}

/// A Verilator model loaded into this process; instantiate it with [`Model::dut`].
pub struct Model {
    lib: Arc<libloading::Library>,
    fns: Fns,
    top: ModuleEntry,
    options: BuildOptions,
    /// True if this load compiled the model (false: it came from the cache).
    pub compiled: bool,
}

impl Model {
    /// The options the model was built with.
    pub fn options(&self) -> &BuildOptions {
        &self.options
    }

    /// Builds (or takes from the cache) and loads the model of the folder `dir`'s top, with
    /// options from the environment ([`BuildOptions::from_env`]).
    pub fn build(dir: &Path) -> Result<Model> {
        Self::build_with(dir, &BuildOptions::from_env()?)
    }

    /// Like [`Model::build`] with explicit options.
    pub fn build_with(dir: &Path, options: &BuildOptions) -> Result<Model> {
        let built = build(dir, options)?;
        Self::load(built)
    }

    fn load(built: Built) -> Result<Model> {
        // SAFETY: the library is one we just built from our own shim; its constructors only
        // set up Verilator's static state.
        let lib = unsafe { libloading::Library::new(&built.library) }.with_context(|| {
            format!(
                "cannot load the simulation model {}",
                built.library.display()
            )
        })?;
        // SAFETY: the symbol types match the shim's extern "C" declarations (see
        // templates/shim.cpp.tera); the ABI version guards against a stale cached library.
        let fns = unsafe {
            let abi: AbiFn = *lib.get::<AbiFn>(b"rfdut_abi_version\0")?;
            if abi() != 3 {
                bail!(
                    "{} has shim ABI {} but this regflash expects 3: clear the model cache",
                    built.library.display(),
                    abi()
                );
            }
            Fns {
                new: *lib.get(b"rfdut_new\0")?,
                free: *lib.get(b"rfdut_free\0")?,
                trace: *lib.get(b"rfdut_trace\0")?,
                set: *lib.get(b"rfdut_set\0")?,
                get: *lib.get(b"rfdut_get\0")?,
                eval: *lib.get(b"rfdut_eval\0")?,
                tick: *lib.get(b"rfdut_tick\0")?,
                run: *lib.get(b"rfdut_run\0")?,
                errors: *lib.get(b"rfdut_errors\0")?,
            }
        };
        Ok(Model {
            lib: Arc::new(lib),
            fns,
            top: built.top,
            options: built.options,
            compiled: built.compiled,
        })
    }

    /// The top module's manifest entry.
    pub fn top(&self) -> &ModuleEntry {
        &self.top
    }

    /// A fresh simulation instance, reset if the design has a reset (see [`Dut::reset`]).
    /// With waveforms enabled (`REGFLASH_WAVES=1`, `vcd` or `fst`), it writes
    /// `<top>-<pid>-<n>.vcd` (or `.fst`) into `$REGFLASH_WAVES_DIR` (default `waves/`), the
    /// cycles `$REGFLASH_WAVES_FROM..=$REGFLASH_WAVES_TO` of the scope `$REGFLASH_WAVES_SCOPE`
    /// (see [`WaveOptions`]; default: all of them).
    pub fn dut(&self) -> Result<Dut> {
        let Some(format) = self.options.trace else {
            return self.instantiate(None);
        };
        static N: AtomicU64 = AtomicU64::new(0);
        let dir = std::env::var_os("REGFLASH_WAVES_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from("waves"));
        std::fs::create_dir_all(&dir)
            .with_context(|| format!("cannot create waveform folder {}", dir.display()))?;
        let path = dir.join(format!(
            "{}-{}-{}.{}",
            self.top.name,
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed),
            format.extension()
        ));
        self.instantiate(Some((&path, &WaveOptions::from_env()?)))
    }

    /// A fresh instance writing its waveform to `path` (the model must be built with tracing
    /// in the format the path's extension names: `.fst`, else VCD).
    pub fn dut_with_waves(&self, path: &Path, opts: &WaveOptions) -> Result<Dut> {
        let Some(format) = self.options.trace else {
            bail!(
                "the model was built without tracing: build it with BuildOptions {{ trace: \
                 Some(..) }} or REGFLASH_WAVES=1 (vcd) / fst"
            );
        };
        opts.validate()?;
        if WaveFormat::of_path(path) != format {
            bail!(
                "{} asks for {:?} but the model traces {:?}: name the file .{}",
                path.display(),
                WaveFormat::of_path(path),
                format,
                format.extension()
            );
        }
        self.instantiate(Some((path, opts)))
    }

    fn instantiate(&self, waves: Option<(&Path, &WaveOptions)>) -> Result<Dut> {
        // SAFETY: rfdut_new returns a fresh heap handle owned by the Dut until Drop.
        let handle = unsafe { (self.fns.new)() };
        let mut dut = Dut {
            _lib: self.lib.clone(),
            fns: self.fns,
            handle,
            index: self
                .top
                .ports
                .iter()
                .enumerate()
                .map(|(i, p)| (p.name.clone(), i))
                .collect(),
            ports: self.top.ports.clone(),
            dirty: false,
            cycles: 0,
            waves: None,
        };
        if let Some((path, opts)) = waves {
            dut.open_waves(path, opts, &self.top.name)?;
        }
        if dut.index.contains_key("rst") {
            dut.reset(2);
        }
        Ok(dut)
    }
}

/// A handle to one port, for the fast paths.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PortId(pub u32);

/// One simulation instance.
pub struct Dut {
    _lib: Arc<libloading::Library>,
    fns: Fns,
    handle: *mut c_void,
    index: HashMap<String, usize>,
    ports: Vec<PortEntry>,
    dirty: bool,
    cycles: u64,
    waves: Option<PathBuf>,
}

// SAFETY: a Dut owns its Verilator context and model exclusively; Verilator models without
// --threads may be driven from any one thread at a time.
unsafe impl Send for Dut {}

impl Drop for Dut {
    fn drop(&mut self) {
        // SAFETY: handle came from rfdut_new and is freed exactly once.
        unsafe { (self.fns.free)(self.handle) }
    }
}

impl Dut {
    /// The port called `name`, or an error listing the ports there are.
    pub fn port(&self, name: &str) -> Result<PortId> {
        match self.index.get(name) {
            Some(&i) => Ok(PortId(i as u32)),
            None => bail!(
                "the model has no port `{name}`; its ports are {}",
                self.ports
                    .iter()
                    .map(|p| p.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        }
    }

    fn id(&self, name: &str) -> PortId {
        self.port(name).unwrap_or_else(|e| panic!("{e}"))
    }

    /// Width of a port in bits.
    pub fn width(&self, port: PortId) -> u32 {
        self.ports[port.0 as usize].width
    }

    /// The waveform file this instance writes, if tracing is on.
    pub fn waves(&self) -> Option<&Path> {
        self.waves.as_deref()
    }

    /// How many times an RTL assertion has failed (each failure also prints a `%Error` line
    /// naming the assertion on standard output).
    pub fn assertion_failures(&self) -> u32 {
        // SAFETY: valid handle.
        unsafe { (self.fns.errors)(self.handle) }
    }

    /// Rising edges since the model was created.
    pub fn cycles(&self) -> u64 {
        self.cycles
    }

    /// Sets an input of up to 64 bits. Panics if the port is unknown or the value does not fit.
    pub fn set(&mut self, name: &str, value: u64) {
        let id = self.id(name);
        self.set_id(id, value);
    }

    /// Sets an input of up to 64 bits by id.
    pub fn set_id(&mut self, port: PortId, value: u64) {
        let w = self.width(port);
        assert!(
            w >= 64 || value >> w == 0,
            "value {value:#x} does not fit port `{}` ({w} bits)",
            self.ports[port.0 as usize].name
        );
        let words = [value as u32, (value >> 32) as u32];
        let mut buf = vec![0u32; w.div_ceil(32) as usize];
        let n = buf.len().min(2);
        buf[..n].copy_from_slice(&words[..n]);
        self.set_words_id(port, &buf);
    }

    /// Sets an input of any width from 32-bit words, least significant first.
    pub fn set_words(&mut self, name: &str, words: &[u32]) {
        let id = self.id(name);
        self.set_words_id(id, words);
    }

    /// Sets an input of any width by id.
    pub fn set_words_id(&mut self, port: PortId, words: &[u32]) {
        let p = &self.ports[port.0 as usize];
        assert!(p.is_input(), "`{}` is an output", p.name);
        let n = p.width.div_ceil(32) as usize;
        assert_eq!(
            words.len(),
            n,
            "port `{}` ({} bits) takes {n} words",
            p.name,
            p.width
        );
        let rem = p.width % 32;
        assert!(
            rem == 0 || words[n - 1] >> rem == 0,
            "value does not fit port `{}` ({} bits)",
            p.name,
            p.width
        );
        // SAFETY: `words` holds exactly the port's word count.
        unsafe { (self.fns.set)(self.handle, port.0, words.as_ptr()) };
        self.dirty = true;
    }

    /// Sets every input of a typed port group (an `hdl` interface struct of values), each at
    /// the port its field names under `prefix` (`""` for the group's own names): the same
    /// structs the RTL is wired with, so a renamed port is a compile error here too.
    pub fn set_all<P: hdl::ir::iface::Ports<u64>>(&mut self, prefix: &str, values: &P) {
        let mut leaves = vec![];
        values.leaves(prefix, &mut leaves);
        for (name, v) in leaves {
            self.set(&name, v);
        }
    }

    /// Reads every port of a typed port group (given by its widths) under `prefix`: the same
    /// struct, holding the ports' values.
    pub fn get_all<P: hdl::ir::iface::Ports<u32>>(
        &mut self,
        prefix: &str,
        widths: &P,
    ) -> P::With<u64> {
        widths.map(prefix, &mut |name, _| self.get(name))
    }

    /// Reads a port of up to 64 bits.
    pub fn get(&mut self, name: &str) -> u64 {
        let id = self.id(name);
        self.get_id(id)
    }

    /// Reads a port of up to 64 bits by id.
    pub fn get_id(&mut self, port: PortId) -> u64 {
        let w = self.get_words_id(port);
        assert!(
            w.len() <= 2,
            "port `{}` is wider than 64 bits: use get_words",
            self.ports[port.0 as usize].name
        );
        w.iter().rev().fold(0u64, |acc, &x| (acc << 32) | x as u64)
    }

    /// Reads a port of any width as 32-bit words, least significant first.
    pub fn get_words(&mut self, name: &str) -> Vec<u32> {
        let id = self.id(name);
        self.get_words_id(id)
    }

    /// Reads a port of any width by id.
    pub fn get_words_id(&mut self, port: PortId) -> Vec<u32> {
        self.settle();
        let mut w = vec![0u32; self.width(port).div_ceil(32) as usize];
        // SAFETY: `w` holds exactly the port's word count.
        unsafe { (self.fns.get)(self.handle, port.0, w.as_mut_ptr()) };
        w
    }

    fn settle(&mut self) {
        if self.dirty {
            // SAFETY: valid handle.
            unsafe { (self.fns.eval)(self.handle) };
            self.dirty = false;
        }
    }

    /// One rising and one falling clock edge.
    pub fn tick(&mut self) {
        self.step(1);
    }

    /// `n` clock cycles in one call.
    pub fn step(&mut self, n: u64) {
        // SAFETY: valid handle.
        unsafe { (self.fns.tick)(self.handle, n) };
        self.dirty = false;
        self.cycles += n;
    }

    /// Holds `rst` high for `cycles` rising edges, then low. Other inputs keep their values.
    pub fn reset(&mut self, cycles: u64) {
        let rst = self.id("rst");
        self.set_id(rst, 1);
        self.step(cycles);
        self.set_id(rst, 0);
    }

    /// Streams `cycles` cycles in one call: each cycle applies the next words of every port in
    /// `inputs` (packed per cycle in that order), samples every port in `outputs` before the
    /// clock edge, then clocks once. Returns the sampled words, packed the same way.
    pub fn run(
        &mut self,
        inputs: &[PortId],
        in_words: &[u32],
        outputs: &[PortId],
        cycles: u64,
    ) -> Vec<u32> {
        let words = |ids: &[PortId]| -> usize {
            ids.iter()
                .map(|&p| self.width(p).div_ceil(32) as usize)
                .sum()
        };
        let (per_in, per_out) = (words(inputs), words(outputs));
        assert_eq!(
            in_words.len(),
            per_in * cycles as usize,
            "run: {cycles} cycles of inputs need {} words",
            per_in * cycles as usize
        );
        for &p in inputs {
            assert!(
                self.ports[p.0 as usize].is_input(),
                "run: `{}` is an output",
                self.ports[p.0 as usize].name
            );
        }
        let mut out = vec![0u32; per_out * cycles as usize];
        let in_ids: Vec<u32> = inputs.iter().map(|p| p.0).collect();
        let out_ids: Vec<u32> = outputs.iter().map(|p| p.0).collect();
        // SAFETY: buffer sizes were checked against the per-cycle word counts above; the shim
        // masks each input word to its port's width.
        unsafe {
            (self.fns.run)(
                self.handle,
                cycles,
                in_ids.len() as u32,
                in_ids.as_ptr(),
                in_words.as_ptr(),
                out_ids.len() as u32,
                out_ids.as_ptr(),
                out.as_mut_ptr(),
            )
        };
        self.dirty = false;
        self.cycles += cycles;
        out
    }

    fn open_waves(&mut self, path: &Path, opts: &WaveOptions, top: &str) -> Result<()> {
        let c = CString::new(path.display().to_string())?;
        // The scope as Verilator names it: under TOP and the top module.
        let scope = match &opts.scope {
            Some(s) if s.starts_with("TOP.") => s.clone(),
            Some(s) => format!("TOP.{top}.{s}"),
            None => String::new(),
        };
        let scope = CString::new(scope)?;
        // SAFETY: valid handle and NUL-terminated strings.
        let ok = unsafe {
            (self.fns.trace)(self.handle, c.as_ptr(), opts.from, opts.to, scope.as_ptr())
        };
        if ok != 1 {
            bail!("the model was built without tracing");
        }
        self.waves = Some(path.to_path_buf());
        Ok(())
    }
}

/// What a waveform holds: the cycles `from..=to` (counted from the model's creation; the
/// reset's cycles included), and the signals of one scope and below (a path from the top
/// module, such as `u_engine.u_seq`, or from `TOP.`), or everything.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WaveOptions {
    pub from: u64,
    pub to: u64,
    pub scope: Option<String>,
}

impl Default for WaveOptions {
    fn default() -> Self {
        WaveOptions {
            from: 0,
            to: u64::MAX,
            scope: None,
        }
    }
}

impl WaveOptions {
    /// From `REGFLASH_WAVES_FROM`, `REGFLASH_WAVES_TO` and `REGFLASH_WAVES_SCOPE`.
    pub fn from_env() -> Result<Self> {
        let cycle = |name: &str, default: u64| -> Result<u64> {
            match std::env::var(name) {
                Ok(v) => v.trim().parse().with_context(|| {
                    format!("{name}={v} is not a cycle number (a whole number >= 0)")
                }),
                Err(_) => Ok(default),
            }
        };
        let opts = WaveOptions {
            from: cycle("REGFLASH_WAVES_FROM", 0)?,
            to: cycle("REGFLASH_WAVES_TO", u64::MAX)?,
            scope: std::env::var("REGFLASH_WAVES_SCOPE")
                .ok()
                .filter(|s| !s.is_empty()),
        };
        opts.validate()?;
        Ok(opts)
    }

    pub fn validate(&self) -> Result<()> {
        if self.from > self.to {
            bail!(
                "the waveform window starts after it ends (from cycle {} to {}): give from <= to",
                self.from,
                self.to
            );
        }
        Ok(())
    }
}
