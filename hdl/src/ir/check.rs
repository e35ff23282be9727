//! Elaboration checks of a finished module (the builder's width rules are checked as nodes are
//! created; these need the whole module).

use anyhow::{bail, Result};

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
