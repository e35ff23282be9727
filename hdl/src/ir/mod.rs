//! The RTL IR: modules made of ports, an arena of expression nodes, named nets, registers,
//! memories and instances.
//!
//! Every node has an exact width and every operator has width rules simple enough that an
//! emitter can print it without any implicit Verilog width extension: operands of bitwise and
//! arithmetic operators have the result's width, comparisons compare equal widths, shifts keep
//! the width of the shifted value. Values are unsigned bit vectors; signed compares and the
//! arithmetic right shift are distinct operators.
//!
//! Modules are built with [`ModuleBuilder`] (see `builder.rs`) inside [`Design::define`], which
//! keeps one definition per module name: a module's name carries its parameters, so building the
//! same block twice with the same parameters yields one definition and two instances.

pub(crate) mod builder;
mod check;
pub mod fsm;
pub mod iface;
pub(crate) mod signal;

use std::collections::{BTreeMap, HashMap, HashSet};

/// Index of a node in its module's arena.
pub type NodeId = u32;

/// A handle to a value inside one module: a node id and its width. Cheap to copy.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Sig {
    pub(crate) id: NodeId,
    pub(crate) width: u32,
    /// The serial number of the module under construction that owns the node.
    pub(crate) module: u32,
}

impl Sig {
    /// Width in bits.
    pub fn width(self) -> u32 {
        self.width
    }
    /// Node id in the owning module.
    pub fn id(self) -> NodeId {
        self.id
    }
}

/// Port direction.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Dir {
    Input,
    Output,
}

impl Dir {
    pub fn as_str(self) -> &'static str {
        match self {
            Dir::Input => "input",
            Dir::Output => "output",
        }
    }
}

/// A module port. Output ports are driven by `driver`.
#[derive(Clone, Debug)]
pub struct Port {
    pub name: String,
    pub dir: Dir,
    pub width: u32,
    /// For outputs: the node that drives the port.
    pub driver: Option<NodeId>,
}

/// One-operand operators. Reductions give one bit.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum UnOp {
    Not,
    RedAnd,
    RedOr,
    RedXor,
}

/// Two-operand operators.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BinOp {
    And,
    Or,
    Xor,
    /// Modulo 2^width.
    Add,
    /// Modulo 2^width.
    Sub,
    /// Low `width` bits of the product; the builder widens operands to get a full product.
    Mul,
    Eq,
    Ne,
    /// Unsigned less-than.
    Ltu,
    /// Unsigned less-or-equal.
    Leu,
    /// Signed (two's complement) less-than.
    Lts,
    /// Signed (two's complement) less-or-equal.
    Les,
    /// Logical left shift by a variable amount (second operand, any width).
    Shl,
    /// Logical right shift by a variable amount.
    Shr,
    /// Arithmetic right shift by a variable amount.
    Sra,
}

impl BinOp {
    /// True for operators whose result is one bit.
    pub fn is_compare(self) -> bool {
        matches!(
            self,
            BinOp::Eq | BinOp::Ne | BinOp::Ltu | BinOp::Leu | BinOp::Lts | BinOp::Les
        )
    }
    /// True for shifts, whose second operand may have any width.
    pub fn is_shift(self) -> bool {
        matches!(self, BinOp::Shl | BinOp::Shr | BinOp::Sra)
    }
}

/// What a node computes.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum NodeKind {
    /// The value of input port `ports[i]`.
    Input(usize),
    /// The module's synchronous reset input `rst`.
    Reset,
    /// A constant (width ≤ 64 bits of value; wider nodes are zero-extended).
    Const(u64),
    /// The named constant `symbols[i]` (an FSM state code), printed as its `localparam` name.
    /// Never folded: a state keeps its name wherever it is used.
    Symbol(usize),
    /// A named net `nets[i]`.
    Net(usize),
    /// The output of register `regs[i]`.
    Reg(usize),
    /// Asynchronous read of memory `mems[mem]` at `addr`.
    MemRead {
        mem: usize,
        addr: NodeId,
    },
    /// Output port `port` of instance `insts[inst]`.
    InstOut {
        inst: usize,
        port: usize,
    },
    Unary(UnOp, NodeId),
    Binary(BinOp, NodeId, NodeId),
    /// `sel ? t : f` with a one-bit `sel`.
    Mux {
        sel: NodeId,
        t: NodeId,
        f: NodeId,
    },
    /// Concatenation, most significant part first.
    Concat(Vec<NodeId>),
    /// Bits `[lo + width - 1 : lo]` of the operand.
    Slice {
        a: NodeId,
        lo: u32,
    },
    /// The operand repeated `n` times.
    Repeat {
        a: NodeId,
        n: u32,
    },
}

/// A node: what it computes and its width.
#[derive(Clone, Debug)]
pub struct Node {
    pub kind: NodeKind,
    pub width: u32,
}

/// A named net, driven by one node (set when the net is declared, or later for forward nets).
#[derive(Clone, Debug)]
pub struct Net {
    pub name: String,
    pub width: u32,
    pub driver: Option<NodeId>,
}

/// A register clocked by `clk`, or by `clock`: (gated clock, its enable), the output of a clock
/// gate (`crate::clock_gate`) and the gate's input; where clock gates are left out
/// (`REGFLASH_NO_CLOCK_GATES`, the FPGA flows) the register is on `clk`, enabled by that
/// enable. With `reset`, a synchronous active-high `rst` loads that value. With `enable`, the
/// register only loads `next` when the enable is high.
#[derive(Clone, Debug)]
pub struct Reg {
    pub name: String,
    pub width: u32,
    pub reset: Option<u64>,
    pub next: Option<NodeId>,
    pub enable: Option<NodeId>,
    pub clock: Option<(NodeId, NodeId)>,
}

/// A synchronous write port of a memory.
#[derive(Clone, Debug)]
pub struct MemWrite {
    pub enable: NodeId,
    pub addr: NodeId,
    pub data: NodeId,
}

/// A register file / memory: `depth` words of `width` bits, asynchronous reads (any number),
/// synchronous writes (any number; a later port wins on the same address in the same cycle).
#[derive(Clone, Debug)]
pub struct Memory {
    pub name: String,
    pub depth: u32,
    pub width: u32,
    pub writes: Vec<MemWrite>,
    /// Clock-gated word by word (`hdl::clock_gate::gated_memory`): word i is on `clocks[i]`,
    /// the output of a clock gate opened when the (one) write port writes word i. Empty: every
    /// word on `clk`.
    pub clocks: Vec<NodeId>,
}

/// An instance of another module. `inputs[i]` drives the child's i-th input port (in the child's
/// port order, clock and reset excluded); `outputs[j]` is the node of its j-th output.
#[derive(Clone, Debug)]
pub struct Instance {
    pub name: String,
    pub module: ModRef,
    pub inputs: Vec<NodeId>,
    pub outputs: Vec<NodeId>,
    /// The one-bit signal driving the instance's `rst`, when not the parent's own `rst` (a
    /// parent that resets a child on its own terms, such as an abort).
    pub reset: Option<NodeId>,
}

/// The interface of a defined module, as seen by a parent that instantiates it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ModRef {
    pub name: String,
    /// Data ports in declaration order (clock and reset are not listed).
    pub ports: Vec<PortInfo>,
    pub has_clk: bool,
    pub has_rst: bool,
    pub latency: u32,
    /// A simulation-only module (a checker): its instances are emitted under
    /// `ifdef REGFLASH_ASSERTIONS` and synthesis never sees it.
    pub sim_only: bool,
}

impl ModRef {
    /// The data port called `name`.
    pub fn port(&self, name: &str) -> Option<&PortInfo> {
        self.ports.iter().find(|p| p.name == name)
    }
}

/// A port's name, direction and width.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct PortInfo {
    pub name: String,
    pub dir: Dir,
    pub width: u32,
}

/// A finished module.
#[derive(Clone, Debug)]
pub struct Module {
    pub name: String,
    /// Doc comment: the block's contract (latency, throughput, numerics).
    pub doc: String,
    pub ports: Vec<Port>,
    pub nodes: Vec<Node>,
    pub nets: Vec<Net>,
    pub regs: Vec<Reg>,
    pub mems: Vec<Memory>,
    pub insts: Vec<Instance>,
    /// Preferred wire names for expression nodes, used if the emitter gives the node a wire.
    pub hints: HashMap<NodeId, String>,
    /// Simulation-only checks: (name, condition that must hold, message). Emitted under
    /// `ifdef REGFLASH_ASSERTIONS`; synthesis leaves them out.
    pub assertions: Vec<(String, NodeId, String)>,
    /// Values whose bits are dropped on purpose (e.g. the known-zero top of a shifted value);
    /// the emitter routes them into one `unused` sink so Verilator's lint knows it is intended.
    pub discards: Vec<NodeId>,
    pub has_clk: bool,
    pub has_rst: bool,
    /// Cycles from inputs to outputs (see the manifest's definition); 0 = combinational.
    pub latency: u32,
    /// Simulation only (see [`ModRef::sim_only`]): may have no outputs, and what only its
    /// assertions read is not an unused signal.
    pub sim_only: bool,
    /// Emitted as a blackbox (ports only, `(* blackbox *)`): a memory macro's stand-in.
    pub blackbox: bool,
    /// Emitted with this Verilog as its body instead of the IR's (a library-cell primitive the
    /// IR cannot state, such as the clock gate's latch); the IR body is then the module's
    /// timing view for the design's checks.
    pub verbatim: Option<String>,
    /// Every identifier used in the module (ports, nets, regs, memories, instances).
    pub names: HashSet<String>,
    /// Named constants (`localparam`s), referenced by [`NodeKind::Symbol`].
    pub symbols: Vec<Symbol>,
    /// The module's state machines: which register holds which named states.
    pub fsms: Vec<FsmInfo>,
}

/// A named constant: `localparam [width-1:0] name = value;`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Symbol {
    pub name: String,
    pub width: u32,
    pub value: u64,
}

/// A state register and its states, for waveform viewers (translate files) and the manifest.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FsmInfo {
    /// The register's Verilog name (`state_q`).
    pub reg: String,
    /// The Rust enum the states come from.
    pub states_type: String,
    /// Every state's localparam name and code, in code order.
    pub states: Vec<(String, u64)>,
}

impl Module {
    /// The node behind `id`.
    pub fn node(&self, id: NodeId) -> &Node {
        &self.nodes[id as usize]
    }

    /// The interface a parent sees.
    pub fn interface(&self) -> ModRef {
        ModRef {
            name: self.name.clone(),
            ports: self
                .ports
                .iter()
                .map(|p| PortInfo {
                    name: p.name.clone(),
                    dir: p.dir,
                    width: p.width,
                })
                .collect(),
            has_clk: self.has_clk,
            has_rst: self.has_rst,
            latency: self.latency,
            sim_only: self.sim_only,
        }
    }

    /// Ports a simulator sees, clock and reset first when present.
    pub fn all_ports(&self) -> Vec<PortInfo> {
        let mut v = Vec::new();
        if self.has_clk {
            v.push(PortInfo {
                name: "clk".into(),
                dir: Dir::Input,
                width: 1,
            });
        }
        if self.has_rst {
            v.push(PortInfo {
                name: "rst".into(),
                dir: Dir::Input,
                width: 1,
            });
        }
        v.extend(self.interface().ports);
        v
    }

    /// Operands of a node, in order.
    pub fn operands(&self, id: NodeId) -> Vec<NodeId> {
        match &self.node(id).kind {
            NodeKind::Input(_)
            | NodeKind::Reset
            | NodeKind::Const(_)
            | NodeKind::Symbol(_)
            | NodeKind::Net(_)
            | NodeKind::Reg(_)
            | NodeKind::InstOut { .. } => vec![],
            NodeKind::MemRead { addr, .. } => vec![*addr],
            NodeKind::Unary(_, a) => vec![*a],
            NodeKind::Binary(_, a, b) => vec![*a, *b],
            NodeKind::Mux { sel, t, f } => vec![*sel, *t, *f],
            NodeKind::Concat(parts) => parts.clone(),
            NodeKind::Slice { a, .. } | NodeKind::Repeat { a, .. } => vec![*a],
        }
    }

    /// Every node read by something other than a node: net drivers, output drivers, register
    /// next/enable, memory write ports, instance inputs.
    pub fn roots(&self) -> Vec<NodeId> {
        let mut v: Vec<NodeId> = Vec::new();
        v.extend(self.nets.iter().filter_map(|n| n.driver));
        v.extend(self.ports.iter().filter_map(|p| p.driver));
        for r in &self.regs {
            v.extend(r.next);
            v.extend(r.enable);
            v.extend(r.clock.iter().flat_map(|&(c, e)| [c, e]));
        }
        for m in &self.mems {
            for w in &m.writes {
                v.extend([w.enable, w.addr, w.data]);
            }
            // The gated clocks (their enables are the gates' inputs).
            v.extend(m.clocks.iter().copied());
        }
        for i in &self.insts {
            v.extend(i.inputs.iter().copied());
            v.extend(i.reset);
        }
        v.extend(self.discards.iter().copied());
        v
    }

    /// `roots` plus the assertion conditions: everything the emitted text reads.
    pub fn roots_with_assertions(&self) -> Vec<NodeId> {
        let mut v = self.roots();
        v.extend(self.assertions.iter().map(|a| a.1));
        v
    }

    /// Number of readers of every node (operand uses plus root uses).
    pub fn use_counts(&self) -> Vec<u32> {
        let mut uses = vec![0u32; self.nodes.len()];
        for id in 0..self.nodes.len() as NodeId {
            for op in self.operands(id) {
                uses[op as usize] += 1;
            }
        }
        for r in self.roots() {
            uses[r as usize] += 1;
        }
        uses
    }
}

/// A collection of module definitions, children before parents.
#[derive(Default, Debug)]
pub struct Design {
    modules: Vec<Module>,
    index: HashMap<String, usize>,
    /// Each module's combinational paths from inputs to outputs (`check::comb_paths`).
    comb: HashMap<String, check::CombPaths>,
}

impl Design {
    pub fn new() -> Self {
        Self::default()
    }

    /// Defines module `name` by running `build`, unless a module of that name already exists, in
    /// which case its interface is returned and `build` does not run. Names must therefore carry
    /// every parameter that changes the hardware.
    ///
    /// Panics if `build` leaves the module inconsistent (an undriven net, a register without a
    /// next value, ...): that is a bug in the generator, not in the user's configuration.
    pub fn define(
        &mut self,
        name: &str,
        build: impl FnOnce(&mut Design, &mut builder::ModuleBuilder),
    ) -> ModRef {
        if let Some(&i) = self.index.get(name) {
            return self.modules[i].interface();
        }
        let mut b = builder::ModuleBuilder::new(name);
        build(self, &mut b);
        let module = b
            .finish()
            .unwrap_or_else(|e| panic!("generator bug in module `{name}`: {e}"));
        let injected = module.ports.iter().any(|p| p.name == crate::fault::SELECT);
        assert!(
            !injected || name.contains("_faults"),
            "generator bug: module `{name}` takes the fault-injection select but its name does \
             not say `_faults`"
        );
        let paths = check::comb_paths(&module, |child| self.comb.get(child))
            .unwrap_or_else(|e| panic!("generator bug in module `{name}`: {e:#}"));
        self.comb.insert(name.to_string(), paths);
        let iface = module.interface();
        self.index.insert(name.to_string(), self.modules.len());
        self.modules.push(module);
        iface
    }

    /// All modules, each after the modules it instantiates.
    pub fn modules(&self) -> &[Module] {
        &self.modules
    }

    /// The module called `name`.
    pub fn module(&self, name: &str) -> Option<&Module> {
        self.index.get(name).map(|&i| &self.modules[i])
    }

    /// The modules `top` depends on (itself included), each after its children.
    pub fn hierarchy(&self, top: &str) -> Vec<&Module> {
        let mut seen = HashSet::new();
        let mut out = Vec::new();
        self.collect(top, &mut seen, &mut out);
        out
    }

    /// How many copies of each module the hierarchy under `top` holds (`top` itself: 1).
    pub fn copies(&self, top: &str) -> BTreeMap<String, u64> {
        fn walk(d: &Design, name: &str, k: u64, out: &mut BTreeMap<String, u64>) {
            *out.entry(name.to_string()).or_default() += k;
            let m = d
                .module(name)
                .unwrap_or_else(|| panic!("module `{name}` is not defined in this design"));
            let mut per_child: BTreeMap<&str, u64> = BTreeMap::new();
            for inst in &m.insts {
                *per_child.entry(&inst.module.name).or_default() += 1;
            }
            for (child, n) in per_child {
                walk(d, child, k * n, out);
            }
        }
        let mut out = BTreeMap::new();
        walk(self, top, 1, &mut out);
        out
    }

    fn collect<'a>(&'a self, name: &str, seen: &mut HashSet<String>, out: &mut Vec<&'a Module>) {
        if !seen.insert(name.to_string()) {
            return;
        }
        let m = self
            .module(name)
            .unwrap_or_else(|| panic!("module `{name}` is not defined in this design"));
        for inst in &m.insts {
            self.collect(&inst.module.name, seen, out);
        }
        out.push(m);
    }
}

/// Verilog-2005 and SystemVerilog-2017 reserved words (Verilator parses `.v` files with the
/// SystemVerilog keyword set by default). No identifier we emit may be one of these.
pub const RESERVED: &[&str] = &[
    "accept_on",
    "alias",
    "always",
    "always_comb",
    "always_ff",
    "always_latch",
    "and",
    "assert",
    "assign",
    "assume",
    "automatic",
    "before",
    "begin",
    "bind",
    "bins",
    "binsof",
    "bit",
    "break",
    "buf",
    "bufif0",
    "bufif1",
    "byte",
    "case",
    "casex",
    "casez",
    "cell",
    "chandle",
    "checker",
    "class",
    "clocking",
    "cmos",
    "config",
    "const",
    "constraint",
    "context",
    "continue",
    "cover",
    "covergroup",
    "coverpoint",
    "cross",
    "deassign",
    "default",
    "defparam",
    "design",
    "disable",
    "dist",
    "do",
    "edge",
    "else",
    "end",
    "endcase",
    "endchecker",
    "endclass",
    "endclocking",
    "endconfig",
    "endfunction",
    "endgenerate",
    "endgroup",
    "endinterface",
    "endmodule",
    "endpackage",
    "endprimitive",
    "endprogram",
    "endproperty",
    "endsequence",
    "endspecify",
    "endtable",
    "endtask",
    "enum",
    "event",
    "eventually",
    "expect",
    "export",
    "extends",
    "extern",
    "final",
    "first_match",
    "for",
    "force",
    "foreach",
    "forever",
    "fork",
    "forkjoin",
    "function",
    "generate",
    "genvar",
    "global",
    "highz0",
    "highz1",
    "if",
    "iff",
    "ifnone",
    "ignore_bins",
    "illegal_bins",
    "implements",
    "implies",
    "import",
    "incdir",
    "include",
    "initial",
    "inout",
    "input",
    "inside",
    "instance",
    "int",
    "integer",
    "interconnect",
    "interface",
    "intersect",
    "join",
    "join_any",
    "join_none",
    "large",
    "let",
    "liblist",
    "library",
    "local",
    "localparam",
    "logic",
    "longint",
    "macromodule",
    "matches",
    "medium",
    "modport",
    "module",
    "nand",
    "negedge",
    "nettype",
    "new",
    "nexttime",
    "nmos",
    "nor",
    "noshowcancelled",
    "not",
    "notif0",
    "notif1",
    "null",
    "or",
    "output",
    "package",
    "packed",
    "parameter",
    "pmos",
    "posedge",
    "primitive",
    "priority",
    "program",
    "property",
    "protected",
    "pull0",
    "pull1",
    "pulldown",
    "pullup",
    "pulsestyle_ondetect",
    "pulsestyle_onevent",
    "pure",
    "rand",
    "randc",
    "randcase",
    "randsequence",
    "rcmos",
    "real",
    "realtime",
    "ref",
    "reg",
    "reject_on",
    "release",
    "repeat",
    "restrict",
    "return",
    "rnmos",
    "rpmos",
    "rtran",
    "rtranif0",
    "rtranif1",
    "s_always",
    "s_eventually",
    "s_nexttime",
    "s_until",
    "s_until_with",
    "scalared",
    "sequence",
    "shortint",
    "shortreal",
    "showcancelled",
    "signed",
    "small",
    "soft",
    "solve",
    "specify",
    "specparam",
    "static",
    "string",
    "strong",
    "strong0",
    "strong1",
    "struct",
    "super",
    "supply0",
    "supply1",
    "sync_accept_on",
    "sync_reject_on",
    "table",
    "tagged",
    "task",
    "this",
    "throughout",
    "time",
    "timeprecision",
    "timeunit",
    "tran",
    "tranif0",
    "tranif1",
    "tri",
    "tri0",
    "tri1",
    "triand",
    "trior",
    "trireg",
    "type",
    "typedef",
    "union",
    "unique",
    "unique0",
    "unsigned",
    "until",
    "until_with",
    "untyped",
    "use",
    "uwire",
    "var",
    "vectored",
    "virtual",
    "void",
    "wait",
    "wait_order",
    "wand",
    "weak",
    "weak0",
    "weak1",
    "while",
    "wildcard",
    "wire",
    "with",
    "within",
    "wor",
    "xnor",
    "xor",
];

/// True if `name` is a legal, non-reserved Verilog identifier.
pub fn is_valid_identifier(name: &str) -> bool {
    let mut chars = name.chars();
    let first_ok = matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_');
    first_ok
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        && !RESERVED.contains(&name)
}
