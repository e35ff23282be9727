//! Elaboration checks of a finished module (the builder's width rules are checked as nodes are
//! created; these need the whole module).

use anyhow::{bail, Context, Result};

use super::{Module, NodeId, NodeKind};

/// Rejects combinational cycles through named nets (the only way the builder can form one).
pub(crate) fn combinational_loops(m: &Module) -> Result<()> {
    // Node ids are created in order, so every operand edge points to an older node except
    // through forward-declared nets. Follow net drivers with a DFS.
    #[derive(Clone, Copy, PartialEq)]
    enum Mark {
        New,
        Active,
        Done,
    }
    let mut mark = vec![Mark::New; m.nodes.len()];
    fn visit(m: &Module, id: NodeId, mark: &mut [Mark], path: &mut Vec<String>) -> Result<()> {
        match mark[id as usize] {
            Mark::Done => return Ok(()),
            Mark::Active => bail!("combinational loop through {}", path.join(" -> ")),
            Mark::New => {}
        }
        mark[id as usize] = Mark::Active;
        let mut next = m.operands(id);
        if let NodeKind::Net(i) = m.node(id).kind {
            path.push(m.nets[i].name.clone());
            next.extend(m.nets[i].driver);
        }
        for op in next {
            visit(m, op, mark, path)?;
        }
        if let NodeKind::Net(_) = m.node(id).kind {
            path.pop();
        }
        mark[id as usize] = Mark::Done;
        Ok(())
    }
    for id in 0..m.nodes.len() as NodeId {
        visit(m, id, &mut mark, &mut vec![])?;
    }
    Ok(())
}

/// Which inputs each output of a module follows within the same cycle: for the module's j-th
/// output, the ordinals (among its inputs) of the inputs it depends on combinationally,
/// through its own logic and through its children's (their `CombPaths`).
pub(crate) type CombPaths = Vec<Vec<usize>>;

/// The combinational paths of `m` from inputs to outputs, given its children's
/// (`children(name)`), or the loop that runs through one of its instances: a child output
/// that feeds, through this module's logic, a child input it follows in the same cycle. With
/// every module checked as it is defined, no design has a combinational loop across the
/// hierarchy, whatever its size (Verilator's whole-hierarchy UNOPTFLAT, without the whole
/// hierarchy).
pub(crate) fn comb_paths<'a>(
    m: &Module,
    children: impl Fn(&str) -> Option<&'a CombPaths>,
) -> Result<CombPaths> {
    let mut ordinal = vec![usize::MAX; m.ports.len()];
    let mut next = 0;
    for (i, p) in m.ports.iter().enumerate() {
        if p.dir == super::Dir::Input {
            ordinal[i] = next;
            next += 1;
        }
    }
    #[derive(Clone)]
    enum Memo {
        New,
        Active,
        Done(Vec<usize>),
    }
    struct Walk<'m, F> {
        m: &'m Module,
        ordinal: Vec<usize>,
        memo: Vec<Memo>,
        children: F,
    }
    impl<'m, 'a, F: Fn(&str) -> Option<&'a CombPaths>> Walk<'m, F> {
        /// The inputs node `id` follows in the same cycle.
        fn deps(&mut self, id: NodeId) -> Result<Vec<usize>> {
            match &self.memo[id as usize] {
                Memo::Done(d) => return Ok(d.clone()),
                Memo::Active => bail!("a combinational loop"),
                Memo::New => {}
            }
            self.memo[id as usize] = Memo::Active;
            let m = self.m;
            let mut out = vec![];
            let mut follow = m.operands(id);
            match &m.node(id).kind {
                NodeKind::Input(i) => out.push(self.ordinal[*i]),
                NodeKind::Net(i) => follow.extend(m.nets[*i].driver),
                NodeKind::InstOut { inst, port } => {
                    let inst = &m.insts[*inst];
                    let paths = (self.children)(&inst.module.name).with_context(|| {
                        format!(
                            "`{}` is instantiated before it is defined",
                            inst.module.name
                        )
                    })?;
                    for &k in &paths[*port] {
                        follow.push(inst.inputs[k]);
                    }
                }
                _ => {}
            }
            for op in follow {
                let d = self.deps(op).map_err(|e| match &m.node(id).kind {
                    NodeKind::InstOut { inst, port } => {
                        let inst = &m.insts[*inst];
                        let name = &inst
                            .module
                            .ports
                            .iter()
                            .filter(|p| p.dir == super::Dir::Output)
                            .nth(*port)
                            .map_or("?", |p| p.name.as_str());
                        e.context(format!("through {}.{name}", inst.name))
                    }
                    NodeKind::Net(i) => e.context(format!("through {}", m.nets[*i].name)),
                    _ => e,
                })?;
                out.extend(d);
            }
            out.sort_unstable();
            out.dedup();
            self.memo[id as usize] = Memo::Done(out.clone());
            Ok(out)
        }
    }
    let mut walk = Walk {
        m,
        ordinal,
        memo: vec![Memo::New; m.nodes.len()],
        children,
    };
    let mut paths = vec![];
    for p in m.ports.iter().filter(|p| p.dir == super::Dir::Output) {
        let d = match p.driver {
            Some(id) => walk.deps(id)?,
            None => vec![],
        };
        paths.push(d);
    }
    // Logic that reaches no output can still close a loop through an instance.
    for id in m.roots() {
        walk.deps(id)?;
    }
    Ok(paths)
}

#[cfg(test)]
mod tests {
    use crate::ir::Design;

    /// A child whose output follows its input in the same cycle (`y = ~a`), and one whose
    /// output is registered.
    fn children(d: &mut Design) -> (crate::ir::ModRef, crate::ir::ModRef) {
        let comb = d.define("comb_child", |_, m| {
            let a = m.input("a", 1);
            m.output("y", !a);
        });
        let reg = d.define("reg_child", |_, m| {
            let a = m.input("a", 1);
            let q = m.reg("q", 1, Some(0));
            m.set_next(q, a);
            m.output("y", q.q);
        });
        (comb, reg)
    }

    /// The child's output fed back to its input through the parent's logic.
    fn feedback(d: &mut Design, name: &str, child: &crate::ir::ModRef) {
        let child = child.clone();
        d.define(name, move |_, m| {
            let x = m.input("x", 1);
            let back = m.net("back", 1);
            let u = m.instance(&child, "u", &[("a", back & x)]);
            let y = u.get("y");
            m.drive(back, y);
            m.output("z", y);
        });
    }

    #[test]
    fn a_loop_through_an_instance_is_a_generator_bug() {
        let mut d = Design::new();
        let (comb, reg) = children(&mut d);
        // Through a registered child: no loop.
        feedback(&mut d, "through_reg", &reg);
        let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            feedback(&mut d, "through_comb", &comb)
        }));
        let message = caught.expect_err("the loop through `comb_child` is caught");
        let text = message
            .downcast_ref::<String>()
            .cloned()
            .unwrap_or_default();
        assert!(
            text.contains("through_comb") && text.contains("u.y") && text.contains("back"),
            "{text}"
        );
    }

    #[test]
    fn paths_through_a_child_reach_the_parents_outputs() {
        let mut d = Design::new();
        let (comb, _) = children(&mut d);
        d.define("chain", |_, m| {
            let x = m.input("x", 1);
            let w = m.input("w", 1);
            let u = m.instance(&comb, "u", &[("a", x)]);
            let q = m.reg("q", 1, Some(0));
            m.set_next(q, w);
            m.output("y", u.get("y"));
            m.output("z", q.q);
        });
        // y follows x (input 0) through the child; z follows nothing in the same cycle.
        assert_eq!(d.comb["chain"], vec![vec![0], vec![]]);
    }
}
