//! Block diagrams and module trees drawn from the design itself, so the documentation cannot
//! drift from the RTL.
//!
//! [`block_diagram`] draws one module as a Mermaid flowchart: a box per child module (its
//! instances grouped, `u_row0 … u_row3 ×4`), and an arrow from box A to box B when an input of
//! an instance in B is computed, through the module's own logic and registers, from an output
//! of an instance in A. The module's ports are the `in` and `out` boxes. [`module_tree`] lists
//! the hierarchy under a top with the number of copies of each module.

use std::collections::{BTreeMap, BTreeSet};

use hdl::ir::{Dir, Module, NodeId, NodeKind};
use hdl::Design;

/// Where a value comes from: a module input or an output of instance group `g`.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug)]
enum Source {
    Input,
    Group(usize),
}

/// The instance groups of a module: instances of one child module, in order of first use.
struct Groups {
    /// (child module, instance names).
    groups: Vec<(String, Vec<String>)>,
    /// Instance index → group.
    of_inst: Vec<usize>,
}

impl Groups {
    fn of(m: &Module) -> Groups {
        let mut groups: Vec<(String, Vec<String>)> = vec![];
        let mut of_inst = vec![];
        for inst in &m.insts {
            let k = match groups.iter().position(|g| g.0 == inst.module.name) {
                Some(k) => k,
                None => {
                    groups.push((inst.module.name.clone(), vec![]));
                    groups.len() - 1
                }
            };
            groups[k].1.push(inst.name.clone());
            of_inst.push(k);
        }
        Groups { groups, of_inst }
    }

    /// The box's label: the instance name (or the first and last with the count) over the
    /// module name.
    fn label(&self, g: usize) -> String {
        let (module, names) = &self.groups[g];
        let insts = match names.as_slice() {
            [one] => one.clone(),
            [first, .., last] => format!("{first} … {last} ×{}", names.len()),
            [] => unreachable!("a group has an instance"),
        };
        format!("{insts}<br/><small>{module}</small>")
    }
}

/// The sources every node of `m` is computed from (memoized), following nets, registers'
/// next values and enables, and memories' writes, and stopping at inputs and instance
/// outputs.
struct Sources<'a> {
    m: &'a Module,
    groups: &'a Groups,
    memo: BTreeMap<NodeId, BTreeSet<Source>>,
    /// Nodes on the current path (a register feeding itself is a cycle of the walk).
    visiting: BTreeSet<NodeId>,
}

impl Sources<'_> {
    fn of(&mut self, id: NodeId) -> BTreeSet<Source> {
        if let Some(s) = self.memo.get(&id) {
            return s.clone();
        }
        if !self.visiting.insert(id) {
            return BTreeSet::new();
        }
        let m = self.m;
        let mut ids: Vec<NodeId> = m.operands(id);
        let mut out = BTreeSet::new();
        match &m.node(id).kind {
            NodeKind::Input(_) => {
                out.insert(Source::Input);
            }
            NodeKind::InstOut { inst, .. } => {
                out.insert(Source::Group(self.groups.of_inst[*inst]));
            }
            NodeKind::Net(n) => ids.extend(m.nets[*n].driver),
            NodeKind::Reg(r) => {
                ids.extend(m.regs[*r].next);
                ids.extend(m.regs[*r].enable);
            }
            NodeKind::MemRead { mem, .. } => {
                for w in &m.mems[*mem].writes {
                    ids.extend([w.enable, w.addr, w.data]);
                }
            }
            _ => {}
        }
        for x in ids {
            out.extend(self.of(x));
        }
        self.visiting.remove(&id);
        self.memo.insert(id, out.clone());
        out
    }
}

/// A Mermaid flowchart of module `name` of `design`: its children (grouped by module) and the
/// data flow between them and the module's ports. Returns `None` for an unknown module.
pub fn block_diagram(design: &Design, name: &str) -> Option<String> {
    let m = design.module(name)?;
    let groups = Groups::of(m);
    let mut src = Sources {
        m,
        groups: &groups,
        memo: BTreeMap::new(),
        visiting: BTreeSet::new(),
    };
    // Edges (from, to) with the receiving ports' names.
    let mut edges: BTreeMap<(Source, Option<usize>), BTreeSet<String>> = BTreeMap::new();
    for (i, inst) in m.insts.iter().enumerate() {
        let g = groups.of_inst[i];
        let inputs = inst.module.ports.iter().filter(|p| p.dir == Dir::Input);
        for (port, &id) in inputs.zip(&inst.inputs) {
            for s in src.of(id) {
                if s != Source::Group(g) {
                    edges
                        .entry((s, Some(g)))
                        .or_default()
                        .insert(port.name.clone());
                }
            }
        }
    }
    for p in m.ports.iter().filter(|p| p.driver.is_some()) {
        for s in src.of(p.driver.expect("an output")) {
            edges.entry((s, None)).or_default().insert(p.name.clone());
        }
    }
    let mut out = String::from("flowchart LR\n");
    out += "  in([inputs])\n  out([outputs])\n";
    for g in 0..groups.groups.len() {
        out += &format!("  g{g}[\"{}\"]\n", groups.label(g));
    }
    let node = |s: Source| match s {
        Source::Input => "in".to_string(),
        Source::Group(g) => format!("g{g}"),
    };
    for ((from, to), ports) in &edges {
        let to = to.map_or("out".to_string(), |g| format!("g{g}"));
        out += &format!("  {} -->|{}| {to}\n", node(*from), port_label(ports));
    }
    Some(out)
}

/// An edge's label: the receiving ports, shortened to their common prefixes when many.
fn port_label(ports: &BTreeSet<String>) -> String {
    let mut prefixes: BTreeSet<String> = BTreeSet::new();
    for p in ports {
        let short = match p.find('_') {
            Some(k) if ports.len() > 3 => format!("{}_*", &p[..k]),
            _ => p.clone(),
        };
        prefixes.insert(short);
    }
    let v: Vec<String> = prefixes.into_iter().collect();
    if v.len() > 4 {
        format!("{}, … {} ports", v[..3].join(", "), ports.len())
    } else {
        v.join(", ")
    }
}

/// The hierarchy under `top`: one line per module (indented under its parent, the first time
/// it appears), with how many copies its parent holds and the first line of its doc.
pub fn module_tree(design: &Design, top: &str) -> Option<String> {
    let mut out = String::new();
    let mut seen = BTreeSet::new();
    walk(design, top, 1, 0, &mut seen, &mut out)?;
    Some(out)
}

fn walk(
    design: &Design,
    name: &str,
    copies: usize,
    depth: usize,
    seen: &mut BTreeSet<String>,
    out: &mut String,
) -> Option<()> {
    let m = design.module(name)?;
    let times = if copies > 1 {
        format!(" ×{copies}")
    } else {
        String::new()
    };
    let first = summary(&m.doc);
    let again = !seen.insert(name.to_string());
    out.push_str(&format!(
        "{}{name}{times}{}\n",
        "  ".repeat(depth),
        if again {
            " (as above)".to_string()
        } else if first.is_empty() {
            String::new()
        } else {
            format!(" — {first}")
        }
    ));
    if again {
        return Some(());
    }
    for (child, names) in Groups::of(m).groups {
        walk(design, &child, names.len(), depth + 1, seen, out)?;
    }
    Some(())
}

/// The first sentence of a module's doc (its lines joined), at most about 150 characters.
pub fn summary(doc: &str) -> String {
    let text = doc.split_whitespace().collect::<Vec<_>>().join(" ");
    let end = text.find(". ").map_or(text.len(), |k| k + 1);
    let first = &text[..end];
    if first.chars().count() > 150 {
        let cut: String = first.chars().take(149).collect();
        format!("{}…", cut.trim_end())
    } else {
        first.to_string()
    }
}
