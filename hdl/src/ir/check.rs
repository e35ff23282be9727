//! Elaboration checks of a finished module (the builder's width rules are checked as nodes are
//! created; these need the whole module).

use anyhow::{bail, Context, Result};

use super::{Module, NodeId, NodeKind};

/// Which inputs each output of a module follows within the same cycle: for the module's j-th
/// output, the ordinals (among its inputs) of the inputs it depends on combinationally,
/// through its own logic and through its children's (their `CombPaths`).
pub(crate) type CombPaths = Vec<Vec<usize>>;

/// The combinational paths of `m` from inputs to outputs, given its children's
/// (`children(name)`), or the combinational loop it closes, named net by net: through its own
/// nets, or through one of its instances (a child output that feeds, through this module's
/// logic, a child input it follows in the same cycle). With every module checked as it is
/// defined, no design has a combinational loop, within a module or across the hierarchy,
/// whatever its size (Verilator's whole-hierarchy UNOPTFLAT, without the whole hierarchy).
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

    /// The message of the panic `f` must raise (a generator bug).
    fn generator_bug(f: impl FnOnce()) -> String {
        let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f));
        let message = caught.expect_err("the loop is caught");
        message
            .downcast_ref::<String>()
            .cloned()
            .unwrap_or_default()
    }

    #[test]
    fn a_loop_through_an_instance_is_a_generator_bug() {
        let mut d = Design::new();
        let (comb, reg) = children(&mut d);
        // Through a registered child: no loop.
        feedback(&mut d, "through_reg", &reg);
        let text = generator_bug(|| feedback(&mut d, "through_comb", &comb));
        assert!(
            text.contains("through_comb") && text.contains("u.y") && text.contains("back"),
            "{text}"
        );
    }

    #[test]
    fn a_loop_within_a_module_is_named_net_by_net() {
        let mut d = Design::new();
        let text = generator_bug(|| {
            d.define("ring", |_, m| {
                let x = m.input("x", 1);
                let a = m.net("a", 1);
                let b = m.net("b", 1);
                m.drive(a, !b & x);
                m.drive(b, a);
                m.output("y", b);
            });
        });
        assert!(
            text.contains("ring") && text.contains("through a") && text.contains("through b"),
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
