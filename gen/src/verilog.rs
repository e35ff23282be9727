//! IR -> Verilog-2005.
//!
//! The output is meant to be read: named nets keep their Rust names, expressions are printed
//! inline where they are used once, and only values that are shared, sliced or need a signed
//! context get a wire of their own. It is also meant to be lint-clean under
//! `verilator --lint-only -Wall`: every operator is printed with operands of the result's width
//! (the IR guarantees that), and before printing, a bit-usage check rejects any signal with bits
//! nobody reads, naming the signal and the bits, since Verilator would warn about them.

use std::collections::HashSet;
use std::fmt::Write;

use anyhow::{bail, Result};
use hdl::ir::*;

/// The Verilog define that leaves the clock gates out (the FPGA flows read the design with it):
/// each gated register is then on `clk`, enabled by its gate's enable, and no gate is
/// instantiated.
pub const NO_CLOCK_GATES: &str = "REGFLASH_NO_CLOCK_GATES";

/// An instance of the clock gate (`hdl::clock_gate`): printed, with its gated clock, only
/// without [`NO_CLOCK_GATES`].
fn is_clock_gate(inst: &Instance) -> bool {
    inst.module.name == hdl::clock_gate::NAME
}

/// Everything the printer needs to know about one module's nodes.
struct Plan<'a> {
    m: &'a Module,
    /// Name of every node that is referenced by name (ports, nets, regs, instance outputs, and
    /// the expression nodes promoted to wires).
    names: Vec<Option<String>>,
    /// Expression nodes promoted to wires, in creation (hence dependency) order.
    temps: Vec<NodeId>,
    /// The clock gates of gated memories (instance indices): printed in the memory's generate
    /// loop, not one by one.
    word_gates: HashSet<usize>,
}

/// Prints `m` as one Verilog file: `header` (comment lines), `timescale 1ns / 1ps, the module's
/// doc comment, the module.
pub fn emit_module(m: &Module, header: &str) -> Result<String> {
    let plan = plan(m)?;
    check_bit_usage(&plan)?;
    let mut out = String::new();
    // Every file sets the time unit: a simulator whose default precision is coarser than the
    // testbench's clock (Icarus: 1 s) would otherwise round the clock away.
    for line in header
        .lines()
        .chain(["`timescale 1ns / 1ps", "`default_nettype none"])
    {
        if line.starts_with('`') {
            writeln!(out, "{line}\n").unwrap();
        } else {
            out += &comment(line);
        }
    }
    for line in m.doc.lines() {
        out += &comment(line);
    }
    out += &comment(&if m.sim_only {
        "Simulation only: instantiated under REGFLASH_ASSERTIONS, never synthesized.".to_string()
    } else {
        match m.latency {
            0 => "Latency: 0 cycles (combinational).".to_string(),
            n => format!("Latency: {n} cycle(s) from inputs to outputs."),
        }
    });
    plan.print(&mut out);
    out.push_str("\n`default_nettype wire\n");
    Ok(out)
}

fn plan(m: &Module) -> Result<Plan<'_>> {
    let mut uses = m.use_counts();
    for a in &m.assertions {
        uses[a.1 as usize] += 1;
    }
    let mut sliced = vec![false; m.nodes.len()];
    for n in &m.nodes {
        if let NodeKind::Slice { a, .. } = n.kind {
            sliced[a as usize] = true;
        }
    }
    let reachable = reachable(m, true);
    let mut taken: HashSet<String> = m.names.clone();
    let mut names: Vec<Option<String>> = vec![None; m.nodes.len()];
    let mut temps = vec![];
    for (i, n) in m.nodes.iter().enumerate() {
        names[i] = match &n.kind {
            NodeKind::Input(p) => Some(m.ports[*p].name.clone()),
            NodeKind::Reset => Some("rst".to_string()),
            NodeKind::Net(k) => Some(m.nets[*k].name.clone()),
            NodeKind::Reg(k) => Some(m.regs[*k].name.clone()),
            NodeKind::InstOut { inst, port } => {
                let inst = &m.insts[*inst];
                let port = inst
                    .module
                    .ports
                    .iter()
                    .filter(|p| p.dir == Dir::Output)
                    .nth(*port)
                    .expect("instance output index");
                Some(format!("{}_{}", inst.name, port.name))
            }
            // Constants and part-selects are primaries: printed in place, never given a wire.
            NodeKind::Const(_) | NodeKind::Symbol(_) | NodeKind::Slice { .. } => None,
            kind => {
                let shared = uses[i] > 1;
                let signed_context = matches!(kind, NodeKind::Binary(BinOp::Sra, ..));
                if reachable[i] && (shared || sliced[i] || signed_context) {
                    let base = match m.hints.get(&(i as NodeId)) {
                        Some(h) => h.clone(),
                        None => compare_name(m, &names, kind)
                            .unwrap_or_else(|| format!("{}_{i}", op_name(kind))),
                    };
                    let mut name = base.clone();
                    let mut k = 1;
                    while !taken.insert(name.clone()) {
                        name = format!("{base}_{k}");
                        k += 1;
                    }
                    temps.push(i as NodeId);
                    Some(name)
                } else {
                    None
                }
            }
        };
    }
    Ok(Plan {
        m,
        names,
        temps,
        word_gates: word_gates(m),
    })
}

/// The clock gates of gated memories (instance indices, `hdl::clock_gate::gated_memory`).
fn word_gates(m: &Module) -> HashSet<usize> {
    let gclks: HashSet<NodeId> = m
        .mems
        .iter()
        .flat_map(|mem| mem.clocks.iter().copied())
        .collect();
    (0..m.insts.len())
        .filter(|&i| m.insts[i].outputs.iter().any(|o| gclks.contains(o)))
        .collect()
}

/// Nodes that something in the module reads (transitively from the roots, assertions included
/// when `with_assertions`).
///
/// The inputs of gated memories' clock gates are not roots: the memory's generate loop prints
/// its own enables (`Plan::gated_words`), so what only they read is never printed.
fn reachable(m: &Module, with_assertions: bool) -> Vec<bool> {
    let mut seen = vec![false; m.nodes.len()];
    let mut stack = if with_assertions {
        m.roots_with_assertions()
    } else {
        m.roots()
    };
    let mut hidden: std::collections::HashMap<NodeId, usize> = Default::default();
    for k in word_gates(m) {
        for &i in &m.insts[k].inputs {
            *hidden.entry(i).or_default() += 1;
        }
    }
    stack.retain(|id| match hidden.get_mut(id) {
        Some(n) if *n > 0 => {
            *n -= 1;
            false
        }
        _ => true,
    });
    while let Some(id) = stack.pop() {
        if std::mem::replace(&mut seen[id as usize], true) {
            continue;
        }
        stack.extend(m.operands(id));
    }
    seen
}

/// A name for a comparison of a named signal with a named signal, a state or a constant:
/// `state_q_is_S_RUN`, `k_q_eq_15`, `head_q_lt_n_heads_q`.
fn compare_name(m: &Module, names: &[Option<String>], kind: &NodeKind) -> Option<String> {
    let NodeKind::Binary(op, a, b) = kind else {
        return None;
    };
    let term = |id: NodeId| match &m.node(id).kind {
        NodeKind::Const(v) => Some((v.to_string(), true)),
        NodeKind::Symbol(k) => Some((m.symbols[*k].name.clone(), true)),
        _ => names[id as usize].clone().map(|n| (n, false)),
    };
    let ((a, a_const), (b, b_const)) = (term(*a)?, term(*b)?);
    let (verb, flipped) = match op {
        BinOp::Eq if b.starts_with(|c: char| c.is_ascii_uppercase()) => ("is", "is"),
        BinOp::Eq => ("eq", "eq"),
        BinOp::Ne => ("ne", "ne"),
        BinOp::Ltu | BinOp::Lts => ("lt", "gt"),
        BinOp::Leu | BinOp::Les => ("le", "ge"),
        _ => return None,
    };
    // The named signal first: `k_q_ge_2` rather than `2_le_k_q`.
    let name = match (a_const, b_const) {
        (false, _) => format!("{a}_{verb}_{b}"),
        (true, false) => format!("{b}_{flipped}_{a}"),
        (true, true) => return None,
    };
    (name.len() <= 48 && is_valid_identifier(&name)).then_some(name)
}

fn op_name(kind: &NodeKind) -> &'static str {
    match kind {
        NodeKind::MemRead { .. } => "rd",
        NodeKind::Unary(UnOp::Not, _) => "not",
        NodeKind::Unary(_, _) => "red",
        NodeKind::Binary(op, _, _) => match op {
            BinOp::And => "and",
            BinOp::Or => "or",
            BinOp::Xor => "xor",
            BinOp::Add => "sum",
            BinOp::Sub => "diff",
            BinOp::Mul => "prod",
            BinOp::Shl | BinOp::Shr | BinOp::Sra => "shift",
            _ => "cmp",
        },
        NodeKind::Mux { .. } => "mux",
        NodeKind::Concat(_) => "cat",
        NodeKind::Slice { .. } => "bits",
        NodeKind::Repeat { .. } => "rep",
        _ => "n",
    }
}

/// Every bit of every declared signal must be read somewhere; Verilator `-Wall` warns otherwise.
fn check_bit_usage(plan: &Plan) -> Result<()> {
    let m = plan.m;
    // Assertions vanish in synthesis: what only they read would be unused there (except in a
    // simulation-only module, which synthesis never sees).
    let reachable = reachable(m, m.sim_only);
    // used[i] = bit mask of node i's bits that are read (as ranges, via a Vec<bool> per node).
    let mut used: Vec<Vec<bool>> = m
        .nodes
        .iter()
        .map(|n| vec![false; n.width as usize])
        .collect();
    let mark_all = |used: &mut Vec<Vec<bool>>, id: NodeId| {
        used[id as usize].iter_mut().for_each(|b| *b = true);
    };
    for id in 0..m.nodes.len() as NodeId {
        if !reachable[id as usize] {
            continue;
        }
        match m.node(id).kind {
            NodeKind::Slice { a, lo } => {
                let w = m.node(id).width;
                for b in lo..lo + w {
                    used[a as usize][b as usize] = true;
                }
            }
            _ => {
                for op in m.operands(id) {
                    mark_all(&mut used, op);
                }
            }
        }
    }
    let roots = if m.sim_only {
        m.roots_with_assertions()
    } else {
        m.roots()
    };
    for r in roots {
        mark_all(&mut used, r);
    }
    let mut problems = vec![];
    for (id, name) in plan.names.iter().enumerate() {
        let Some(name) = name else { continue };
        let bits = &used[id];
        if bits.iter().all(|&b| b) {
            continue;
        }
        if bits.iter().all(|&b| !b) {
            problems.push(format!("`{name}` is never read"));
        } else {
            problems.push(format!("`{name}` has bits nobody reads: {}", ranges(bits)));
        }
    }
    if !problems.is_empty() {
        bail!(
            "module `{}`: {} (Verilator -Wall would warn; use the bits or do not create them)",
            m.name,
            problems.join("; ")
        );
    }
    Ok(())
}

/// "[7:4], [1]" for the false entries of `bits`.
fn ranges(bits: &[bool]) -> String {
    let mut out = vec![];
    let mut i = 0;
    while i < bits.len() {
        if bits[i] {
            i += 1;
            continue;
        }
        let lo = i;
        while i < bits.len() && !bits[i] {
            i += 1;
        }
        let hi = i - 1;
        out.push(if hi == lo {
            format!("[{lo}]")
        } else {
            format!("[{hi}:{lo}]")
        });
    }
    out.reverse();
    out.join(", ")
}

fn range_decl(width: u32) -> String {
    if width == 1 {
        String::new()
    } else {
        format!("[{}:0] ", width - 1)
    }
}

/// `stmt` (one statement of expressions: no string literals) broken at spaces into lines of
/// about 100 characters, continuation lines indented: wide concatenations and deep mux trees
/// stay readable, and tools that limit tokens per line (Verilator's preprocessor) accept them.
fn wrap_statement(stmt: &str) -> String {
    const WIDTH: usize = 100;
    if stmt.len() <= WIDTH {
        return stmt.to_string();
    }
    let indent = (stmt.len() - stmt.trim_start().len() + 4).max(8);
    let newline = format!("\n{}", " ".repeat(indent));
    let mut out = String::with_capacity(stmt.len() + stmt.len() / 8);
    let mut line = 0;
    for (i, word) in stmt.split(' ').enumerate() {
        if i > 0 {
            // The leading indentation splits into empty words: keep them.
            if line > 0 && line + 1 + word.len() > WIDTH && !word.is_empty() {
                out += &newline;
                line = indent;
            } else {
                out.push(' ');
                line += 1;
            }
        }
        out += word;
        line += word.len();
    }
    out
}

/// The longest line the emitter writes on purpose (a single identifier or literal may exceed it).
pub const MAX_LINE: usize = 120;

/// `text` as `//` comment lines of at most [`MAX_LINE`] characters, broken at spaces (or
/// after commas, for long JSON).
fn comment(text: &str) -> String {
    let width = MAX_LINE - 3;
    let mut out = String::new();
    let mut cur = String::new();
    let flush = |cur: &mut String, out: &mut String| {
        out.push_str(&format!("// {}\n", cur.trim_end()));
        cur.clear();
    };
    for word in text.split_inclusive(' ') {
        let mut word = word;
        while cur.len() + word.trim_end().len() > width {
            if !cur.is_empty() {
                flush(&mut cur, &mut out);
                continue;
            }
            // A word longer than a line: break it after a comma, or anywhere.
            let cut = word[..width].rfind(',').map_or(width, |i| i + 1);
            cur.push_str(&word[..cut]);
            flush(&mut cur, &mut out);
            word = &word[cut..];
        }
        cur.push_str(word);
    }
    if !cur.is_empty() || out.is_empty() {
        flush(&mut cur, &mut out);
    }
    out
}

/// A one-line instance broken after its commas into lines of at most [`MAX_LINE`] characters.
fn pack_list(line: &str) -> String {
    let mut out = String::new();
    let mut cur = String::new();
    for piece in line.split_inclusive(", ") {
        if !cur.is_empty() && cur.len() + piece.trim_end().len() > MAX_LINE {
            out += cur.trim_end();
            out += "\n";
            cur = " ".repeat(8);
        }
        cur += piece;
    }
    out + &cur
}

/// A sized Verilog literal.
pub fn literal(width: u32, value: u64) -> String {
    if width == 1 {
        format!("1'b{value}")
    } else if value < 10 {
        format!("{width}'d{value}")
    } else {
        format!("{width}'h{value:x}")
    }
}

impl Plan<'_> {
    /// `id` as an operand: its name, or its expression in parentheses.
    fn operand(&self, id: NodeId) -> String {
        if let Some(n) = &self.names[id as usize] {
            return n.clone();
        }
        let e = self.expr(id);
        match self.m.node(id).kind {
            NodeKind::Const(_)
            | NodeKind::Symbol(_)
            | NodeKind::Concat(_)
            | NodeKind::Repeat { .. }
            | NodeKind::MemRead { .. }
            | NodeKind::Slice { .. } => e,
            _ => format!("({e})"),
        }
    }

    /// The expression computing `id`, without outer parentheses.
    fn expr(&self, id: NodeId) -> String {
        let node = self.m.node(id);
        match &node.kind {
            NodeKind::Const(v) => literal(node.width, *v),
            NodeKind::Symbol(k) => self.m.symbols[*k].name.clone(),
            NodeKind::Input(_)
            | NodeKind::Reset
            | NodeKind::Net(_)
            | NodeKind::Reg(_)
            | NodeKind::InstOut { .. } => self.names[id as usize].clone().expect("leaf has a name"),
            NodeKind::MemRead { mem, addr } => {
                format!("{}[{}]", self.m.mems[*mem].name, self.bare(*addr))
            }
            NodeKind::Unary(op, a) => {
                let sym = match op {
                    UnOp::Not => "~",
                    UnOp::RedAnd => "&",
                    UnOp::RedOr => "|",
                    UnOp::RedXor => "^",
                };
                format!("{sym}{}", self.operand(*a))
            }
            NodeKind::Binary(op, a, b) => {
                let (a, b) = (self.operand(*a), self.operand(*b));
                match op {
                    BinOp::Lts => format!("$signed({a}) < $signed({b})"),
                    BinOp::Les => format!("$signed({a}) <= $signed({b})"),
                    BinOp::Sra => format!("$signed({a}) >>> {b}"),
                    _ => {
                        let sym = match op {
                            BinOp::And => "&",
                            BinOp::Or => "|",
                            BinOp::Xor => "^",
                            BinOp::Add => "+",
                            BinOp::Sub => "-",
                            BinOp::Mul => "*",
                            BinOp::Eq => "==",
                            BinOp::Ne => "!=",
                            BinOp::Ltu => "<",
                            BinOp::Leu => "<=",
                            BinOp::Shl => "<<",
                            BinOp::Shr => ">>",
                            BinOp::Lts | BinOp::Les | BinOp::Sra => unreachable!(),
                        };
                        format!("{a} {sym} {b}")
                    }
                }
            }
            NodeKind::Mux { sel, t, f } => {
                // Chains of muxes read best unparenthesized in the else position.
                let f_str = if self.names[*f as usize].is_none()
                    && matches!(self.m.node(*f).kind, NodeKind::Mux { .. })
                {
                    self.expr(*f)
                } else {
                    self.operand(*f)
                };
                format!("{} ? {} : {f_str}", self.operand(*sel), self.operand(*t))
            }
            NodeKind::Concat(parts) => {
                let p: Vec<String> = parts.iter().map(|&p| self.bare(p)).collect();
                format!("{{{}}}", p.join(", "))
            }
            NodeKind::Slice { a, lo } => {
                let name = self.names[*a as usize]
                    .as_ref()
                    .expect("sliced nodes are named");
                let hi = lo + node.width - 1;
                if hi == *lo {
                    format!("{name}[{lo}]")
                } else {
                    format!("{name}[{hi}:{lo}]")
                }
            }
            NodeKind::Repeat { a, n } => format!("{{{n}{{{}}}}}", self.bare(*a)),
        }
    }

    /// `localparam` declarations of the named constants the module reads, each state machine's
    /// states together in code order.
    fn localparams(&self) -> String {
        let m = self.m;
        let reachable = reachable(m, true);
        let mut used = vec![false; m.symbols.len()];
        for (id, n) in m.nodes.iter().enumerate() {
            if let (NodeKind::Symbol(k), true) = (&n.kind, reachable[id]) {
                used[*k] = true;
            }
        }
        let mut out = String::new();
        let mut printed = vec![false; m.symbols.len()];
        let mut declare = |k: usize, out: &mut String| {
            if used[k] && !std::mem::replace(&mut printed[k], true) {
                let s = &m.symbols[k];
                let value = literal(s.width, s.value);
                writeln!(
                    out,
                    "    localparam {}{} = {value};",
                    range_decl(s.width),
                    s.name
                )
                .unwrap();
            }
        };
        for f in &m.fsms {
            for (name, _) in &f.states {
                if let Some(k) = m.symbols.iter().position(|s| &s.name == name) {
                    declare(k, &mut out);
                }
            }
        }
        for k in 0..m.symbols.len() {
            declare(k, &mut out);
        }
        out
    }

    /// An operand in a position where no parentheses are needed (inside `{}` or `[]`).
    fn bare(&self, id: NodeId) -> String {
        match &self.names[id as usize] {
            Some(n) => n.clone(),
            None => self.expr(id),
        }
    }

    /// Prints the module: its ports, declarations, named values, registers and memory writes,
    /// assertions, discarded bits, instances and output assignments (a blackbox: its ports).
    fn print(&self, out: &mut String) {
        let m = self.m;
        let ports = self.port_list();
        if m.blackbox {
            // A macro's ports, no body: the memory compiler's model or netlist replaces it.
            writeln!(
                out,
                "/* verilator lint_off UNUSEDSIGNAL */\n/* verilator lint_off UNDRIVEN */\n\
                 (* blackbox *)\nmodule {} (\n{}\n);\nendmodule\n\
                 /* verilator lint_on UNDRIVEN */\n/* verilator lint_on UNUSEDSIGNAL */",
                m.name,
                ports.join(",\n")
            )
            .unwrap();
            return;
        }
        writeln!(out, "module {} (\n{}\n);", m.name, ports.join(",\n")).unwrap();
        if let Some(body) = &m.verbatim {
            // A primitive written by hand (the clock gate): its text, not its timing view.
            out.push('\n');
            out.push_str(body.trim_end());
            out.push_str("\nendmodule\n");
            return;
        }
        let (decls, late) = self.declarations();
        let body = self.named_values(&late);
        let seq = self.sequential();
        for section in [decls, body, seq] {
            if !section.is_empty() {
                out.push('\n');
                out.push_str(&section);
            }
        }
        self.print_assertions(out);
        self.print_discards(out);
        self.print_instances(out);
        self.print_output_assigns(out);
        out.push_str("endmodule\n");
    }

    /// The port list's lines: clock, reset, then the ports in order.
    fn port_list(&self) -> Vec<String> {
        let m = self.m;
        let mut ports = vec![];
        if m.has_clk {
            ports.push("    input  wire clk".to_string());
        }
        if m.has_rst {
            ports.push("    input  wire rst".to_string());
        }
        for p in &m.ports {
            let dir = match p.dir {
                Dir::Input => "input  wire",
                Dir::Output => "output wire",
            };
            ports.push(format!("    {dir} {}{}", range_decl(p.width), p.name));
        }
        ports
    }

    /// The declarations (localparams, registers, memories, instance outputs, nets driven by a
    /// newer node), and those late nets, which are assigned at the end of the body.
    fn declarations(&self) -> (String, Vec<usize>) {
        let m = self.m;
        let mut decls = self.localparams();
        for r in &m.regs {
            writeln!(decls, "    reg  {}{};", range_decl(r.width), r.name).unwrap();
        }
        for mem in &m.mems {
            let array = |kind: &str| {
                format!(
                    "    {kind} {}{} [0:{}];",
                    range_decl(mem.width),
                    mem.name,
                    mem.depth - 1
                )
            };
            if mem.clocks.is_empty() {
                writeln!(decls, "{}", array("reg ")).unwrap();
                continue;
            }
            // Clock-gated words: without the gates an ordinary memory; with them a wire array
            // of the same name, driven by the words' registers (so every read is the same text
            // either way).
            writeln!(
                decls,
                "`ifdef {NO_CLOCK_GATES}\n{}\n`else\n{}\n`endif",
                array("reg "),
                array("wire")
            )
            .unwrap();
        }
        let mut gated = vec![];
        for (k, inst) in m.insts.iter().enumerate() {
            if self.word_gates.contains(&k) {
                continue;
            }
            for &o in &inst.outputs {
                let w = m.node(o).width;
                let name = self.names[o as usize].as_ref().unwrap();
                let decl = format!("    wire {}{};", range_decl(w), name);
                if is_clock_gate(inst) {
                    gated.push(decl);
                } else {
                    writeln!(decls, "{decl}").unwrap();
                }
            }
        }
        if !gated.is_empty() {
            // The gated clocks, with their gates.
            writeln!(
                decls,
                "`ifndef {NO_CLOCK_GATES}\n{}\n`endif",
                gated.join("\n")
            )
            .unwrap();
        }
        // Nets driven by a newer node are declared first and assigned at the end.
        let mut late = vec![];
        for (id, node) in m.nodes.iter().enumerate() {
            if let NodeKind::Net(k) = node.kind {
                let net = &m.nets[k];
                if net.driver.unwrap() as usize > id {
                    writeln!(decls, "    wire {}{};", range_decl(net.width), net.name).unwrap();
                    late.push(k);
                }
            }
        }
        (decls, late)
    }

    /// The named values (nets and promoted expressions) in dependency order, then the
    /// assignments of the `late` nets.
    fn named_values(&self, late: &[usize]) -> String {
        let m = self.m;
        let mut body = String::new();
        let temps: HashSet<NodeId> = self.temps.iter().copied().collect();
        for (id, node) in m.nodes.iter().enumerate() {
            let id = id as NodeId;
            let (name, driver) = match node.kind {
                NodeKind::Net(k) if !late.contains(&k) => {
                    (&m.nets[k].name, m.nets[k].driver.unwrap())
                }
                _ if temps.contains(&id) => {
                    let name = self.names[id as usize].as_ref().unwrap();
                    let stmt = format!(
                        "    wire {}{} = {};",
                        range_decl(node.width),
                        name,
                        self.expr(id)
                    );
                    writeln!(body, "{}", wrap_statement(&stmt)).unwrap();
                    continue;
                }
                _ => continue,
            };
            let stmt = format!(
                "    wire {}{} = {};",
                range_decl(node.width),
                name,
                self.bare(driver)
            );
            writeln!(body, "{}", wrap_statement(&stmt)).unwrap();
        }
        for &k in late {
            let net = &m.nets[k];
            let stmt = format!(
                "    assign {} = {};",
                net.name,
                self.bare(net.driver.unwrap())
            );
            writeln!(body, "{}", wrap_statement(&stmt)).unwrap();
        }
        body
    }

    /// The `always` blocks: each register's load (with its reset and enable), then each
    /// memory's writes.
    fn sequential(&self) -> String {
        let m = self.m;
        let mut seq = String::new();
        let mut gated: Vec<(String, String)> = vec![];
        for r in &m.regs {
            let next = self.bare(r.next.unwrap());
            let load = match r.enable {
                Some(en) => format!("if ({}) {} <= {};", self.bare(en), r.name, next),
                None => format!("{} <= {};", r.name, next),
            };
            if let Some((clock, en)) = r.clock {
                // A gated clock (a clock gate's output): no reset, no enable; without clock
                // gates (the FPGA flows), on clk with the gate's enable. Printed together
                // below, one line each where it fits.
                let on_gate = format!("    always @(posedge {}) {load}", self.bare(clock));
                let on_clk = format!(
                    "    always @(posedge clk) if ({}) {} <= {};",
                    self.bare(en),
                    r.name,
                    next
                );
                gated.push((on_clk, on_gate));
                continue;
            }
            match r.reset {
                Some(v) => writeln!(
                    seq,
                    "    always @(posedge clk)\n        if (rst) {} <= {};\n{}",
                    r.name,
                    literal(r.width, v),
                    wrap_statement(&format!("        else {load}"))
                ),
                None => writeln!(
                    seq,
                    "    always @(posedge clk)\n{}",
                    wrap_statement(&format!("        {load}"))
                ),
            }
            .unwrap();
        }
        if !gated.is_empty() {
            let (on_clk, on_gate): (Vec<String>, Vec<String>) = gated.into_iter().unzip();
            let lines = |v: Vec<String>| {
                v.iter()
                    .map(|l| wrap_statement(l))
                    .collect::<Vec<_>>()
                    .join("\n")
            };
            writeln!(
                seq,
                "`ifdef {NO_CLOCK_GATES}\n{}\n`else\n{}\n`endif",
                lines(on_clk),
                lines(on_gate)
            )
            .unwrap();
        }
        for mem in &m.mems {
            if mem.writes.is_empty() {
                continue;
            }
            let mut on_clk = String::from("    always @(posedge clk) begin\n");
            for w in &mem.writes {
                let stmt = format!(
                    "        if ({}) {}[{}] <= {};",
                    self.bare(w.enable),
                    mem.name,
                    self.bare(w.addr),
                    self.bare(w.data)
                );
                writeln!(on_clk, "{}", wrap_statement(&stmt)).unwrap();
            }
            on_clk.push_str("    end");
            if mem.clocks.is_empty() {
                writeln!(seq, "{on_clk}").unwrap();
                continue;
            }
            writeln!(
                seq,
                "`ifdef {NO_CLOCK_GATES}\n{on_clk}\n`else\n{}`endif",
                self.gated_words(mem)
            )
            .unwrap();
        }
        seq
    }

    /// A clock-gated memory's words (`hdl::clock_gate::gated_memory`), in a generate loop:
    /// each word a register on its own clock gate, opened when the one write port writes that
    /// word, and the element of the memory's wire array. (The gates are in the IR one by one,
    /// so the hierarchy counts them; they are printed here, not among the instances.)
    ///
    /// The write data reaches the words a group of [`hdl::clock_gate::DATA_GROUP`] at a time:
    /// each group's copy is the data ANDed with "the port writes this group" (`{name}_gd`), so
    /// a write toggles the inputs of its own group's flip-flops only. (A gated flip-flop's
    /// master latch is open while its clock is held low: every toggle of its D is paid for,
    /// written or not.) A memory of one group takes the data as it is.
    fn gated_words(&self, mem: &Memory) -> String {
        let w = &mem.writes[0];
        let aw = self.m.node(w.addr).width;
        let (name, depth) = (&mem.name, mem.depth);
        let (i, block) = (format!("g_{name}_i"), format!("g_{name}"));
        let group = hdl::clock_gate::DATA_GROUP;
        // More words than a group means more address bits than a group's index needs.
        let (data, groups) = if depth > group {
            let gb = group.trailing_zeros();
            let n = depth.div_ceil(group);
            let (gi, gblock) = (format!("g_{name}_g"), format!("g_{name}_d"));
            let assign = wrap_statement(&format!(
                "            assign {name}_gd[{gi}] = {} & {{{}{{{} && ({} >> {gb}) == GROUP}}}};",
                self.bare(w.data),
                mem.width,
                self.bare(w.enable),
                self.operand(w.addr),
            ));
            let groups = format!(
                "    // {name}: the write data a group of {group} words at a time.\n\
                 \x20   wire {}{name}_gd [0:{}];\n\
                 \x20   genvar {gi};\n\
                 \x20   generate\n\
                 \x20       for ({gi} = 0; {gi} < {n}; {gi} = {gi} + 1) begin : {gblock}\n\
                 \x20           localparam [{}:0] GROUP = {gi};\n\
                 {assign}\n\
                 \x20       end\n\
                 \x20   endgenerate\n",
                range_decl(mem.width),
                n - 1,
                aw - 1,
            );
            (format!("{name}_gd[{i} / {group}]"), groups)
        } else {
            (self.bare(w.data), String::new())
        };
        format!(
            "{groups}    // {name}: one clock gate a word, opened only when the write port writes it.\n\
             \x20   genvar {i};\n\
             \x20   generate\n\
             \x20       for ({i} = 0; {i} < {depth}; {i} = {i} + 1) begin : {block}\n\
             \x20           localparam [{}:0] WORD = {i};\n\
             \x20           wire gclk;\n\
             \x20           reg  {}q;\n\
             \x20           {} u_cg (.clk(clk), .en({} && {} == WORD), .gclk(gclk));\n\
             \x20           always @(posedge gclk) q <= {data};\n\
             \x20           assign {name}[{i}] = q;\n\
             \x20       end\n\
             \x20   endgenerate\n",
            aw - 1,
            range_decl(mem.width),
            hdl::clock_gate::NAME,
            self.bare(w.enable),
            self.bare(w.addr),
        )
    }

    /// Prints the simulation-only assertions, under `ifdef REGFLASH_ASSERTIONS`.
    fn print_assertions(&self, out: &mut String) {
        let m = self.m;
        if m.assertions.is_empty() {
            return;
        }
        out.push_str("\n`ifdef REGFLASH_ASSERTIONS\n    // Simulation-only checks; synthesis leaves REGFLASH_ASSERTIONS undefined.\n");
        for (name, cond, message) in &m.assertions {
            let check = format!("        if (!rst && !({}))", self.bare(*cond));
            writeln!(
                out,
                "    always @(posedge clk)\n{}\n            $error(\"regflash assertion `%s` failed: %s\",\n                \"{name}\", \"{message}\");",
                wrap_statement(&check)
            )
            .unwrap();
        }
        out.push_str("`endif\n");
    }

    /// Prints the `unused` sink of the bits dropped on purpose.
    fn print_discards(&self, out: &mut String) {
        let m = self.m;
        if m.discards.is_empty() {
            return;
        }
        let parts: Vec<String> = m.discards.iter().map(|&d| self.bare(d)).collect();
        let stmt = format!("    wire unused = ^{{{}}};", parts.join(", "));
        writeln!(
            out,
            "\n    // Bits dropped on purpose; Verilator's lint ignores signals named *unused*.\n{}",
            wrap_statement(&stmt)
        )
        .unwrap();
    }

    /// Prints the instances, each on one line, packed into lines, or one port a line.
    fn print_instances(&self, out: &mut String) {
        if !self.m.insts.is_empty() {
            out.push('\n');
        }
        let (gates, others): (Vec<&Instance>, Vec<&Instance>) = self
            .m
            .insts
            .iter()
            .enumerate()
            .filter(|(k, _)| !self.word_gates.contains(k))
            .map(|(_, i)| i)
            .partition(|i| is_clock_gate(i));
        for inst in others {
            self.print_instance(inst, out);
        }
        // The clock gates together, left out without them (the FPGA flows).
        if !gates.is_empty() {
            writeln!(out, "`ifndef {NO_CLOCK_GATES}").unwrap();
            for inst in gates {
                self.print_instance(inst, out);
            }
            out.push_str("`endif\n");
        }
    }

    /// Prints instance `inst` (a simulation-only checker under `ifdef REGFLASH_ASSERTIONS`).
    fn print_instance(&self, inst: &Instance, out: &mut String) {
        let mut conns = vec![];
        if inst.module.has_clk {
            conns.push("        .clk(clk)".to_string());
        }
        if inst.module.has_rst {
            let rst = inst.reset.map_or("rst".to_string(), |r| self.bare(r));
            conns.push(format!("        .rst({rst})"));
        }
        let mut ins = inst.inputs.iter();
        let mut outs = inst.outputs.iter();
        for p in &inst.module.ports {
            let id = match p.dir {
                Dir::Input => *ins.next().unwrap(),
                Dir::Output => *outs.next().unwrap(),
            };
            conns.push(format!("        .{}({})", p.name, self.bare(id)));
        }
        // Short connection lists stay on one line: a 32x32 grid reads as 1,024 lines.
        let one_line = format!(
            "    {} {} ({});",
            inst.module.name,
            inst.name,
            conns
                .iter()
                .map(|c| c.trim())
                .collect::<Vec<_>>()
                .join(", ")
        );
        if inst.module.sim_only {
            out.push_str("`ifdef REGFLASH_ASSERTIONS\n    // A simulation-only checker.\n");
        }
        if one_line.len() <= MAX_LINE {
            writeln!(out, "{one_line}").unwrap();
        } else if conns.len() <= 16 {
            // Few ports: packed into lines, so a 32x32 grid stays short.
            writeln!(out, "{}", pack_list(&one_line)).unwrap();
        } else {
            writeln!(
                out,
                "    {} {} (\n{}\n    );",
                inst.module.name,
                inst.name,
                conns.join(",\n")
            )
            .unwrap();
        }
        if inst.module.sim_only {
            out.push_str("`endif\n");
        }
    }

    /// Prints the assignments of the output ports.
    fn print_output_assigns(&self, out: &mut String) {
        let outs: Vec<&Port> = self
            .m
            .ports
            .iter()
            .filter(|p| p.dir == Dir::Output)
            .collect();
        if !outs.is_empty() {
            out.push('\n');
        }
        for p in outs {
            let stmt = format!("    assign {} = {};", p.name, self.bare(p.driver.unwrap()));
            writeln!(out, "{}", wrap_statement(&stmt)).unwrap();
        }
    }
}
