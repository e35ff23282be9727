//! [`ModuleBuilder`]: a module's structure: ports, names, nets, registers, memories, instances
//! and assertions. Expressions are written with operators on [`Sig`] (see `signal.rs`), which
//! reach this module's expression arena on their own.
//!
//! Width rules are checked as nodes are created; a violation is a generator bug and panics with
//! the operator and the widths involved. Small constant folds (slices of constants, slices of
//! slices, muxes with a constant select) keep the emitted Verilog short.

use std::collections::{HashMap, HashSet};

use anyhow::{bail, Result};

use super::signal::{self, addr_bits, mux, Arena};
use crate::ir::*;
use std::cell::RefCell;
use std::rc::Rc;

/// A register being built: its output value `q` and its index.
#[derive(Clone, Copy, Debug)]
pub struct RegHandle {
    pub q: Sig,
    index: usize,
}

/// A memory being built.
#[derive(Clone, Copy, Debug)]
pub struct MemHandle {
    index: usize,
    pub depth: u32,
    pub width: u32,
    pub addr_width: u32,
}

/// The outputs of an instance, by port name.
#[derive(Clone, Debug)]
pub struct InstOutputs {
    instance: String,
    outputs: HashMap<String, Sig>,
}

impl InstOutputs {
    /// The output called `port`. Panics (a generator bug) if the child has no such output.
    pub fn get(&self, port: &str) -> Sig {
        *self
            .outputs
            .get(port)
            .unwrap_or_else(|| panic!("instance `{}` has no output `{port}`", self.instance))
    }
}

/// Builds one module. Obtained from [`Design::define`].
pub struct ModuleBuilder {
    name: String,
    doc: String,
    ports: Vec<Port>,
    /// The expression nodes, shared with the signals' operators (see `signal.rs`).
    arena: Rc<RefCell<Arena>>,
    module: u32,
    nets: Vec<Net>,
    regs: Vec<Reg>,
    mems: Vec<Memory>,
    insts: Vec<Instance>,
    assertions: Vec<(String, NodeId, String)>,
    hints: HashMap<NodeId, String>,
    names: HashSet<String>,
    latency: u32,
    child_clk: bool,
    child_rst: bool,
    fsms: Vec<FsmInfo>,
    sim_only: bool,
    blackbox: bool,
    verbatim: Option<String>,
    /// Output names reserved before their ports are declared.
    declared_outputs: HashSet<String>,
    /// Threaded inputs ([`THREADED`]) by name, once declared or set.
    threaded: HashMap<String, Sig>,
}

/// The vertical links' self-test bus (`crate::link::BIST`).
pub const LINK_BIST: &str = "vlink_bist";
/// A PE row's TSV lane faults (`crate::link::LANE_FAULTS`).
pub const LANE_FAULTS: &str = "tsv_lane_fault";
/// The core's TSV lane faults (`crate::link::CORE_FAULTS`).
pub const CORE_FAULTS: &str = "tsv_fault";
/// The lane whose test result a PE row's bundles show (`crate::link::PROBE`).
pub const LINK_PROBE: &str = "vlink_probe";

/// Inputs a parent passes to every child that has one, declaring its own on first use: the
/// fault-injection select (`crate::fault::SELECT`), and the vertical links' self-test bus and
/// lane faults (`crate::link`). A child's port of such a name left unconnected takes the
/// parent's.
pub const THREADED: [&str; 5] = [
    crate::fault::SELECT,
    LINK_BIST,
    LANE_FAULTS,
    CORE_FAULTS,
    LINK_PROBE,
];

/// Checks a pipelined block's latency against the most it supports.
pub fn check_latency(block: &str, latency: u32, max: u32) -> Result<()> {
    if latency > max {
        bail!(
            "{block} latency {latency} is not supported: choose {}",
            (0..=max)
                .map(|l| l.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    Ok(())
}

impl ModuleBuilder {
    pub(crate) fn new(name: &str) -> Self {
        assert!(
            is_valid_identifier(name),
            "module name `{name}` is not a legal Verilog identifier"
        );
        let mut names = HashSet::new();
        names.insert("clk".to_string());
        names.insert("rst".to_string());
        names.insert("unused".to_string());
        let arena = signal::open(name);
        let module = arena.borrow().module;
        ModuleBuilder {
            arena,
            module,
            name: name.to_string(),
            doc: String::new(),
            ports: vec![],
            nets: vec![],
            regs: vec![],
            mems: vec![],
            insts: vec![],
            assertions: vec![],
            hints: HashMap::new(),
            names,
            latency: 0,
            child_clk: false,
            child_rst: false,
            fsms: vec![],
            sim_only: false,
            blackbox: false,
            verbatim: None,
            declared_outputs: HashSet::new(),
            threaded: HashMap::new(),
        }
    }

    /// The module's name.
    pub fn module_name(&self) -> &str {
        &self.name
    }

    /// Sets the doc comment emitted above the module: its contract.
    pub fn doc(&mut self, text: &str) {
        self.doc = text.trim().to_string();
    }

    /// Declares the module's latency in cycles (0 = combinational), reported in the manifest.
    pub fn set_latency(&mut self, cycles: u32) {
        self.latency = cycles;
    }

    fn node(&mut self, kind: NodeKind, width: u32) -> Sig {
        self.arena.borrow_mut().node(kind, width)
    }

    fn kind(&self, s: Sig) -> NodeKind {
        assert_eq!(
            s.module, self.module,
            "generator bug: a signal of another module used in `{}`",
            self.name
        );
        self.arena.borrow().kind(s).clone()
    }

    /// Reserves a unique identifier based on `base` (suffixing `_1`, `_2`, ... on clashes).
    fn unique(&mut self, base: &str) -> String {
        let base = if is_valid_identifier(base) {
            base.to_string()
        } else {
            format!("{base}_n")
        };
        assert!(
            is_valid_identifier(&base),
            "`{base}` cannot be made a Verilog identifier"
        );
        let mut name = base.clone();
        let mut i = 1;
        while !self.names.insert(name.clone()) {
            name = format!("{base}_{i}");
            i += 1;
        }
        name
    }

    fn reserve_exact(&mut self, name: &str, what: &str) {
        assert!(
            is_valid_identifier(name),
            "{what} name `{name}` is not a legal Verilog identifier or is reserved"
        );
        assert!(
            self.names.insert(name.to_string()),
            "{what} name `{name}` is used twice in module `{}`",
            self.name
        );
    }

    // ----- ports ---------------------------------------------------------------------------

    /// Reserves the names of output ports declared later with [`ModuleBuilder::output`], so
    /// that nets named inside the module do not take them.
    pub fn reserve_outputs(&mut self, names: &[String]) {
        for n in names {
            self.reserve_exact(n, "port");
            self.declared_outputs.insert(n.clone());
        }
    }

    /// Declares an input port.
    pub fn input(&mut self, name: &str, width: u32) -> Sig {
        self.reserve_exact(name, "port");
        let idx = self.ports.len();
        self.ports.push(Port {
            name: name.to_string(),
            dir: Dir::Input,
            width,
            driver: None,
        });
        self.node(NodeKind::Input(idx), width)
    }

    /// Declares an output port driven by `value`.
    pub fn output(&mut self, name: &str, value: Sig) {
        if !self.declared_outputs.remove(name) {
            self.reserve_exact(name, "port");
        }
        self.ports.push(Port {
            name: name.to_string(),
            dir: Dir::Output,
            width: value.width,
            driver: Some(value.id),
        });
    }

    // ----- constants -----------------------------------------------------------------------

    /// A `width`-bit constant. Panics if `value` does not fit.
    pub fn lit(&mut self, width: u32, value: u64) -> Sig {
        self.arena.borrow_mut().lit(width, value)
    }

    /// All zeros.
    pub fn zero(&mut self, width: u32) -> Sig {
        self.lit(width, 0)
    }

    /// A counter's step: `v + 1` wrapping at `n` (the next value, and whether `v` was the
    /// last).
    pub fn wrapping_step(&mut self, v: Sig, n: u32) -> (Sig, Sig) {
        let last = v.eq((n - 1) as u64);
        let inc = v + 1;
        let zero = self.zero(v.width());
        (mux(last, zero, inc), last)
    }

    /// All ones, any width.
    pub fn ones(&mut self, width: u32) -> Sig {
        self.arena.borrow_mut().ones(width)
    }

    /// The constant value of `s`, if it is a constant.
    pub fn const_value(&self, s: Sig) -> Option<u64> {
        match self.kind(s) {
            NodeKind::Const(v) => Some(v),
            _ => None,
        }
    }

    // ----- naming --------------------------------------------------------------------------

    /// Gives `value` a name: a net that appears in the Verilog and in waveforms. Returns the net.
    pub fn name(&mut self, name: &str, value: Sig) -> Sig {
        let name = self.unique(name);
        let idx = self.nets.len();
        self.nets.push(Net {
            name,
            width: value.width,
            driver: Some(value.id),
        });
        self.node(NodeKind::Net(idx), value.width)
    }

    /// Suggests a name for `value` without creating a net: if the emitter gives the value a
    /// wire of its own (it is shared, or sliced), the wire gets this name; if the value is used
    /// once and printed inline, or never used, nothing is emitted. Helpers use hints to name
    /// everything they compute without leaving unread nets behind. The first hint wins.
    pub fn hint(&mut self, name: &str, value: Sig) -> Sig {
        if is_valid_identifier(name) && self.const_value(value).is_none() {
            self.hints
                .entry(value.id)
                .or_insert_with(|| name.to_string());
        }
        value
    }

    /// Declares a net to be driven later with [`ModuleBuilder::drive`] (for values needed before
    /// they can be computed).
    pub fn net(&mut self, name: &str, width: u32) -> Sig {
        let name = self.unique(name);
        let idx = self.nets.len();
        self.nets.push(Net {
            name,
            width,
            driver: None,
        });
        self.node(NodeKind::Net(idx), width)
    }

    /// Drives a net declared with [`ModuleBuilder::net`].
    pub fn drive(&mut self, net: Sig, value: Sig) {
        let NodeKind::Net(idx) = self.kind(net) else {
            panic!("drive: target is not a net");
        };
        let n = &mut self.nets[idx];
        assert!(n.driver.is_none(), "net `{}` is driven twice", n.name);
        assert_eq!(
            n.width, value.width,
            "net `{}` has width {} but its driver has width {}",
            n.name, n.width, value.width
        );
        n.driver = Some(value.id);
    }

    /// The sum of `values`, each zero-extended to `width` bits, modulo 2^width (a population
    /// count when they are single bits).
    pub fn sum(&mut self, values: &[Sig], width: u32) -> Sig {
        // Pairwise, a tree of adds (its depth the log of the count, not the count).
        let mut level: Vec<Sig> = values.iter().map(|v| v.zext(width)).collect();
        if level.is_empty() {
            return self.zero(width);
        }
        while level.len() > 1 {
            level = level
                .chunks(2)
                .map(|p| if let [a, b] = p { *a + *b } else { p[0] })
                .collect();
        }
        level[0]
    }

    /// Declares that the bits of `value` are intentionally not used (for instance the top of a
    /// right shift known to be zero). Every other unread bit is an error at emission time.
    pub fn discard(&mut self, value: Sig) {
        self.arena.borrow_mut().discard(value);
    }

    /// A simulation-only check: `holds` must be 1 at every clock edge outside reset, else the
    /// simulator reports `regflash assertion `name` failed: message`. Emitted under
    /// `ifdef REGFLASH_ASSERTIONS` (regflash's Verilator builds define it; synthesis does not).
    /// Signals read only by assertions are rejected at emission: they would be unused in
    /// synthesis.
    pub fn assert_always(&mut self, name: &str, holds: Sig, message: &str) {
        assert_eq!(holds.width, 1, "an assertion's condition is one bit");
        assert!(
            is_valid_identifier(name) && !message.contains('"') && !message.contains('\\'),
            "assertion names are identifiers and messages plain text"
        );
        self.assertions
            .push((name.to_string(), holds.id, message.to_string()));
    }

    // ----- state ---------------------------------------------------------------------------

    /// A register named `name` (the Verilog name gets a `_q` suffix). `reset` is the value a
    /// synchronous reset loads (`None`: no reset). Set its input with [`ModuleBuilder::set_next`].
    pub fn reg(&mut self, name: &str, width: u32, reset: Option<u64>) -> RegHandle {
        let name = self.unique(&format!("{name}_q"));
        let index = self.regs.len();
        self.regs.push(Reg {
            name,
            width,
            reset,
            next: None,
            enable: None,
            clock: None,
        });
        let q = self.node(NodeKind::Reg(index), width);
        RegHandle { q, index }
    }

    /// A register without reset clocked by `clock`, a gated clock (a clock gate's output,
    /// `crate::clock_gate`), not `clk`: it loads its input at every edge of `clock`, so it
    /// takes no enable of its own. `en` is the gate's enable: where clock gates are left out
    /// (`REGFLASH_NO_CLOCK_GATES`), the register is on `clk` and loads when `en` is high.
    pub fn reg_gated(&mut self, name: &str, width: u32, (clock, en): (Sig, Sig)) -> RegHandle {
        assert_eq!(clock.width, 1, "a clock is one bit");
        assert_eq!(en.width, 1, "a clock gate's enable is one bit");
        let r = self.reg(name, width, None);
        self.regs[r.index].clock = Some((clock.id, en.id));
        r
    }

    /// The Verilog name of a register (`name_q`).
    pub fn reg_name(&self, r: RegHandle) -> &str {
        &self.regs[r.index].name
    }

    /// Makes this module simulation-only: a checker made of assertions (and the state they
    /// need), instantiated under `ifdef REGFLASH_ASSERTIONS`, invisible to synthesis. Its
    /// parent keeps every signal it feeds in the `unused` sink, so synthesis lint stays clean.
    pub fn simulation_only(&mut self) {
        self.sim_only = true;
    }

    /// Makes this module a blackbox: the emitter prints its ports and no body (a memory macro
    /// replaces it in the user's flow). Its body is still built, for simulation of the same
    /// design without the flag.
    pub fn blackbox(&mut self) {
        self.blackbox = true;
    }

    /// Emits `body` (Verilog statements) as this module's body instead of the IR's. For a
    /// primitive the IR cannot state (the clock gate's latch): the IR body built beside it is
    /// the module's timing view, which the design's checks (combinational paths, clocking)
    /// read, so it must have the same paths as `body`. The module is clocked.
    pub fn verbatim(&mut self, body: &str) {
        self.verbatim = Some(body.to_string());
        self.child_clk = true;
    }

    /// Records a state machine (see `fsm.rs`).
    pub(crate) fn add_fsm(&mut self, info: FsmInfo) {
        self.fsms.push(info);
    }

    /// Sets what a register loads at the next clock edge.
    pub fn set_next(&mut self, r: RegHandle, d: Sig) {
        let reg = &mut self.regs[r.index];
        assert!(reg.next.is_none(), "register `{}` has two inputs", reg.name);
        assert_eq!(
            reg.width, d.width,
            "register `{}` has width {}, its input {}",
            reg.name, reg.width, d.width
        );
        reg.next = Some(d.id);
    }

    /// Makes a register load only when `en` is high.
    pub fn set_enable(&mut self, r: RegHandle, en: Sig) {
        assert_eq!(en.width, 1, "register enable must be one bit");
        let reg = &mut self.regs[r.index];
        assert!(
            reg.clock.is_none(),
            "register `{}` has a gated clock: its gate is its enable",
            reg.name
        );
        assert!(
            reg.enable.is_none(),
            "register `{}` has two enables",
            reg.name
        );
        reg.enable = Some(en.id);
    }

    /// Sets register `reg`'s input to `f` of the values `srcs` hold after this cycle's clock
    /// edge, so that `reg` holds `f` of their registered values cycle for cycle: a comparison
    /// or a flag of registers, kept in a register of its own so that reading it costs no logic.
    /// When every source resets, `reg` resets to `f` of their reset values (`f` of constants
    /// folds to one) and their resets stay out of `f`'s logic (a reset reaches every register:
    /// in series with logic it is a long path); otherwise `f` takes their next values with their
    /// resets, and `reg` has no reset of its own. `reg` is made without a reset; the sources'
    /// inputs and enables must be set first.
    pub fn set_next_from_next(
        &mut self,
        reg: RegHandle,
        srcs: &[RegHandle],
        f: impl Fn(&[Sig]) -> Sig,
    ) {
        assert!(
            self.regs[reg.index].reset.is_none(),
            "register `{}` has a reset of its own",
            self.regs[reg.index].name
        );
        let resets: Option<Vec<u64>> = srcs.iter().map(|r| self.regs[r.index].reset).collect();
        let next = match resets {
            Some(resets) => {
                let at: Vec<Sig> = srcs
                    .iter()
                    .zip(&resets)
                    .map(|(r, &v)| self.lit(r.q.width(), v))
                    .collect();
                let value = f(&at);
                let value = self.const_value(value).unwrap_or_else(|| {
                    panic!(
                        "set_next_from_next: `{}` of constants is not a constant",
                        self.regs[reg.index].name
                    )
                });
                self.regs[reg.index].reset = Some(value);
                let next: Vec<Sig> = srcs.iter().map(|&r| self.next_unreset(r)).collect();
                f(&next)
            }
            None => {
                let next: Vec<Sig> = srcs.iter().map(|&r| self.next_with_reset(r)).collect();
                f(&next)
            }
        };
        self.set_next(reg, next);
    }

    /// What register `r` holds after this cycle's clock edge: its reset value under reset, else
    /// [`ModuleBuilder::next_unreset`].
    fn next_with_reset(&mut self, r: RegHandle) -> Sig {
        let v = self.next_unreset(r);
        match self.regs[r.index].reset {
            Some(value) => {
                let rst = self.node(NodeKind::Reset, 1);
                let value = self.lit(v.width, value);
                mux(rst, value, v)
            }
            None => v,
        }
    }

    /// What register `r` holds after a clock edge without reset: its input where its enable is
    /// high (always, without one), else its value. Its input must be set.
    fn next_unreset(&mut self, r: RegHandle) -> Sig {
        let reg = &self.regs[r.index];
        let (width, enable) = (reg.width, reg.enable);
        let Some(next) = reg.next else {
            panic!(
                "set_next_from_next: register `{}` has no input yet",
                reg.name
            );
        };
        let sig = |id, width| Sig {
            id,
            width,
            module: self.module,
        };
        let d = sig(next, width);
        match enable {
            Some(en) => mux(sig(en, 1), d, r.q),
            None => d,
        }
    }

    /// `bits` (each a single bit) registered together as `name`, one register of them all,
    /// given back bit by bit in the same order.
    pub fn delay_bits(&mut self, name: &str, bits: &[Sig]) -> Vec<Sig> {
        let r = self.delay(name, signal::cat(bits));
        (0..bits.len() as u32).rev().map(|k| r.bit(k)).collect()
    }

    /// `d` delayed by one cycle through a register that resets to 0.
    pub fn delay(&mut self, name: &str, d: Sig) -> Sig {
        let r = self.reg(name, d.width, Some(0));
        self.set_next(r, d);
        r.q
    }

    /// A register (reset to 0) that loads `d` in cycles where `enable` is high and holds
    /// otherwise. Returns its output.
    pub fn hold(&mut self, name: &str, d: Sig, enable: Sig) -> Sig {
        let r = self.reg(name, d.width, Some(0));
        self.set_next(r, d);
        self.set_enable(r, enable);
        r.q
    }

    /// `d` delayed by `n` cycles (registers reset to 0); `n = 0` returns `d`.
    pub fn delay_n(&mut self, name: &str, d: Sig, n: u32) -> Sig {
        (0..n).fold(d, |v, i| self.delay(&format!("{name}_d{}", i + 1), v))
    }

    /// `d` and its delays by 1 to `n` cycles (the registers [`ModuleBuilder::delay_n`] makes):
    /// element i is `d` i cycles late.
    pub fn delays(&mut self, name: &str, d: Sig, n: u32) -> Vec<Sig> {
        let mut taps = vec![d];
        for i in 0..n {
            let v = self.delay(&format!("{name}_d{}", i + 1), taps[i as usize]);
            taps.push(v);
        }
        taps
    }

    /// A pipeline cut: `d` registered when `enabled`, passed through otherwise. Used at the stage
    /// boundaries of pipelined blocks, so one build function serves every latency.
    pub fn stage(&mut self, name: &str, d: Sig, enabled: bool) -> Sig {
        if enabled {
            self.delay(name, d)
        } else {
            d
        }
    }

    /// A memory of `depth` words of `width` bits (no reset).
    pub fn memory(&mut self, name: &str, depth: u32, width: u32) -> MemHandle {
        let name = self.unique(name);
        let index = self.mems.len();
        self.mems.push(Memory {
            name,
            depth,
            width,
            writes: vec![],
            clocks: vec![],
        });
        MemHandle {
            index,
            depth,
            width,
            addr_width: addr_bits(depth),
        }
    }

    /// Asynchronous read of `mem` at `addr`.
    pub fn mem_read(&mut self, mem: MemHandle, addr: Sig) -> Sig {
        assert_eq!(
            addr.width, mem.addr_width,
            "memory read address must have {} bits",
            mem.addr_width
        );
        self.node(
            NodeKind::MemRead {
                mem: mem.index,
                addr: addr.id,
            },
            mem.width,
        )
    }

    /// A synchronous write port: when `enable`, `mem[addr] <= data` at the clock edge.
    pub fn mem_write(&mut self, mem: MemHandle, enable: Sig, addr: Sig, data: Sig) {
        assert_eq!(enable.width, 1, "memory write enable must be one bit");
        assert_eq!(
            addr.width, mem.addr_width,
            "memory write address must have {} bits",
            mem.addr_width
        );
        assert_eq!(data.width, mem.width, "memory write data width");
        self.mems[mem.index].writes.push(MemWrite {
            enable: enable.id,
            addr: addr.id,
            data: data.id,
        });
    }

    /// Puts the words of `mem` on gated clocks: word i on `clocks[i]`, a clock gate's output
    /// opened exactly when the memory's one write port writes word i (see
    /// `crate::clock_gate::gated_memory`, which builds the gates).
    pub fn gate_memory(&mut self, mem: MemHandle, clocks: &[Sig]) {
        let m = &mut self.mems[mem.index];
        assert_eq!(
            clocks.len(),
            m.depth as usize,
            "{}: one gate a word",
            m.name
        );
        assert_eq!(
            m.writes.len(),
            1,
            "{}: a gated memory has one write port",
            m.name
        );
        assert!(
            clocks.iter().all(|c| c.width == 1),
            "{}: clocks are one bit",
            m.name
        );
        m.clocks = clocks.iter().map(|c| c.id).collect();
    }

    // ----- fault injection -----------------------------------------------------------------

    /// In a core built for fault injection (`injection`, see `crate::fault`): one bit, high
    /// when `fault` is the one selected at run time, decoded from the module's
    /// [`crate::fault::SELECT`] input (declared on first use; a parent passes its own to every
    /// child that has one). None otherwise: the real core's logic, unchanged.
    pub fn fault(&mut self, injection: bool, fault: crate::fault::Fault) -> Option<Sig> {
        injection.then(|| {
            let sel = self.fault_select();
            sel.eq(self.lit(crate::fault::SELECT_BITS, fault.code()))
        })
    }

    /// `good`, or `faulty(self)` while `fault` is selected in a core built for fault
    /// injection. Without injection the faulty logic is never built: the real core's Verilog
    /// is the same as if the fault did not exist.
    pub fn with_fault(
        &mut self,
        injection: bool,
        fault: crate::fault::Fault,
        faulty: impl FnOnce(&mut Self) -> Sig,
        good: Sig,
    ) -> Sig {
        match self.fault(injection, fault) {
            Some(on) => {
                let bad = faulty(self);
                mux(on, bad, good)
            }
            None => good,
        }
    }

    fn fault_select(&mut self) -> Sig {
        self.threaded_input(crate::fault::SELECT, crate::fault::SELECT_BITS)
    }

    /// The threaded input `name` ([`THREADED`]): the one this module was given
    /// ([`ModuleBuilder::set_threaded`]) or declared, else declared now.
    pub fn threaded_input(&mut self, name: &str, width: u32) -> Sig {
        assert!(THREADED.contains(&name), "`{name}` is not a threaded input");
        if let Some(&s) = self.threaded.get(name) {
            assert_eq!(s.width, width, "{}: threaded `{name}`'s width", self.name);
            return s;
        }
        let s = self.input(name, width);
        self.threaded.insert(name.to_string(), s);
        s
    }

    /// Makes `value` this module's threaded `name`: the children that take it get `value`.
    pub fn set_threaded(&mut self, name: &str, value: Sig) {
        assert!(THREADED.contains(&name), "`{name}` is not a threaded input");
        let old = self.threaded.insert(name.to_string(), value);
        assert!(old.is_none(), "{}: `{name}` threaded twice", self.name);
    }

    // ----- hierarchy -----------------------------------------------------------------------

    /// Instantiates `module` as `name`, connecting every data input by name. Clock and reset are
    /// connected automatically. Returns the instance's outputs.
    pub fn instance(&mut self, module: &ModRef, name: &str, inputs: &[(&str, Sig)]) -> InstOutputs {
        self.instance_inner(module, name, inputs, None)
    }

    /// `rst | x`: this module's reset, or `x` (one bit): a reset for a child that also clears
    /// on `x`.
    pub fn rst_or(&mut self, x: Sig) -> Sig {
        self.node(NodeKind::Reset, 1) | x
    }

    /// [`ModuleBuilder::instance`], with the instance's `rst` driven by `reset` (one bit, a
    /// synchronous reset) instead of this module's `rst`.
    pub fn instance_with_reset(
        &mut self,
        module: &ModRef,
        name: &str,
        inputs: &[(&str, Sig)],
        reset: Sig,
    ) -> InstOutputs {
        assert_eq!(reset.width, 1, "a reset is one bit");
        assert!(module.has_rst, "`{}` has no reset to drive", module.name);
        self.instance_inner(module, name, inputs, Some(reset))
    }

    fn instance_inner(
        &mut self,
        module: &ModRef,
        name: &str,
        inputs: &[(&str, Sig)],
        reset: Option<Sig>,
    ) -> InstOutputs {
        let inst_name = self.unique(name);
        let index = self.insts.len();
        let mut in_nodes = vec![];
        for p in module.ports.iter().filter(|p| p.dir == Dir::Input) {
            if THREADED.contains(&p.name.as_str()) && !inputs.iter().any(|(n, _)| *n == p.name) {
                // A child built for fault injection (or with spare lanes) takes this module's.
                let sel = self.threaded_input(&p.name, p.width);
                in_nodes.push(sel.id);
                continue;
            }
            let (_, s) = inputs
                .iter()
                .find(|(n, _)| *n == p.name)
                .unwrap_or_else(|| {
                    panic!(
                        "instance `{inst_name}` of `{}`: input `{}` is not connected",
                        module.name, p.name
                    )
                });
            assert_eq!(
                s.width, p.width,
                "instance `{inst_name}` of `{}`: input `{}` has width {} but is driven with {}",
                module.name, p.name, p.width, s.width
            );
            in_nodes.push(s.id);
        }
        for (n, _) in inputs {
            assert!(
                module
                    .ports
                    .iter()
                    .any(|p| p.name == *n && p.dir == Dir::Input),
                "instance `{inst_name}` of `{}` has no input `{n}`",
                module.name
            );
        }
        let mut outputs = HashMap::new();
        let mut out_nodes = vec![];
        for (pi, p) in module
            .ports
            .iter()
            .filter(|p| p.dir == Dir::Output)
            .enumerate()
        {
            let s = self.node(
                NodeKind::InstOut {
                    inst: index,
                    port: pi,
                },
                p.width,
            );
            // Reserve the wire name the emitter gives this output.
            self.unique(&format!("{inst_name}_{}", p.name));
            outputs.insert(p.name.clone(), s);
            out_nodes.push(s.id);
        }
        if module.sim_only {
            // Read only under REGFLASH_ASSERTIONS: kept used for synthesis and its lint.
            let mut arena = self.arena.borrow_mut();
            for s in inputs {
                arena.discard(s.1);
            }
        }
        self.child_clk |= module.has_clk;
        self.child_rst |= module.has_rst;
        self.insts.push(Instance {
            name: inst_name.clone(),
            module: module.clone(),
            inputs: in_nodes,
            outputs: out_nodes,
            reset: reset.map(|r| r.id),
        });
        InstOutputs {
            instance: inst_name,
            outputs,
        }
    }

    // ----- finishing -----------------------------------------------------------------------

    pub(crate) fn finish(mut self) -> Result<Module> {
        for n in &self.nets {
            if n.driver.is_none() {
                bail!("net `{}` is never driven", n.name);
            }
        }
        for r in &self.regs {
            if r.next.is_none() {
                bail!("register `{}` has no input", r.name);
            }
        }
        if let Some(n) = self.declared_outputs.iter().next() {
            bail!("output `{n}` was reserved but never declared");
        }
        if !self.sim_only && !self.ports.iter().any(|p| p.dir == Dir::Output) {
            bail!("module has no outputs");
        }
        if self.sim_only && self.assertions.is_empty() {
            bail!("a simulation-only module checks something: it needs assertions");
        }
        if !self.assertions.is_empty()
            && self.regs.iter().all(|r| r.reset.is_none())
            && !self.child_rst
        {
            bail!("a module with assertions needs a reset (they are checked outside reset)");
        }
        let has_state =
            !self.regs.is_empty() || !self.mems.is_empty() || !self.assertions.is_empty();
        let (nodes, discards, symbols) = {
            let mut arena = self.arena.borrow_mut();
            (
                std::mem::take(&mut arena.nodes),
                std::mem::take(&mut arena.discards),
                std::mem::take(&mut arena.symbols),
            )
        };
        for s in &symbols {
            self.reserve_exact(&s.name, "localparam");
        }
        let reads_rst = nodes.iter().any(|n| n.kind == NodeKind::Reset);
        let has_rst = self.child_rst || reads_rst || self.regs.iter().any(|r| r.reset.is_some());
        let module = Module {
            name: std::mem::take(&mut self.name),
            doc: std::mem::take(&mut self.doc),
            ports: std::mem::take(&mut self.ports),
            nodes,
            nets: std::mem::take(&mut self.nets),
            regs: std::mem::take(&mut self.regs),
            mems: std::mem::take(&mut self.mems),
            insts: std::mem::take(&mut self.insts),
            discards,
            assertions: std::mem::take(&mut self.assertions),
            hints: std::mem::take(&mut self.hints),
            has_clk: has_state || self.child_clk,
            has_rst,
            latency: self.latency,
            sim_only: self.sim_only,
            blackbox: self.blackbox,
            verbatim: self.verbatim.take(),
            names: std::mem::take(&mut self.names),
            symbols,
            fsms: std::mem::take(&mut self.fsms),
        };
        // Combinational loops, within the module and through its instances, are checked when
        // the design defines it (`Design::define`, `check::comb_paths`): that needs the
        // children's paths.
        Ok(module)
    }
}

impl Drop for ModuleBuilder {
    /// The module's signals stop working: their arena leaves the registry.
    fn drop(&mut self) {
        signal::close(self.module);
    }
}
