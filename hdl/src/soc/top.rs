//! The stable top (`top_name`, `regflash_top` by default): the core behind the AXI4-Lite
//! control and status registers (`csr`), with the core's memory port. Ports: `s_axil_*` (the
//! register slave), `irq`, and the core's memory port: `mem_req_*` / `mem_rsp_*` (`mem_if =
//! "simple"`: one request per beat) or the AXI4 master `m_axi_*` (`mem_if = "axi4"`; see
//! `hdl::dma`). The problem, start, abort, status and counters reach
//! the core only through the registers; no debug output leaves the top. Inner modules keep
//! their parameterized names.

use super::{batch, csr};
use crate::core::{CoreParams, COUNTERS};
use crate::ir::Dir;
use crate::{Design, ModRef, ModuleBuilder};

/// Defines the top `name` of core `p` (and the core and CSR it instantiates); refuses a name
/// an inner module has.
pub fn build(d: &mut Design, p: &CoreParams, name: &str) -> anyhow::Result<ModRef> {
    let core = crate::core::build(d, p);
    let csr = csr::build(d, p, name);
    let batch = batch::build(d, p, name);
    anyhow::ensure!(
        d.module(name).is_none(),
        "top_name = {name:?} is the name of a module inside the design: choose another (the \
         default is regflash_top)"
    );
    let p = *p;
    let name = name.to_string();
    Ok(d.define(&name, |_, m| {
        m.doc(&format!(
            "{name}: the regflash FlashAttention core ({}) behind its AXI4-Lite control and\n\
             status registers (see registers.md and regflash.h) and its varlen batch\n\
             controller, with the core's memory port.",
            core.name
        ));
        m.set_latency(1);
        // The register slave's and the memory port's inputs.
        let mut axil_in = vec![];
        for (n, w, is_in) in csr::axil_ports() {
            if is_in {
                axil_in.push((n, m.input(n, w)));
            }
        }
        let mem_ports: Vec<(String, u32)> = core
            .ports
            .iter()
            .filter(|q| q.dir == Dir::Input && is_mem_port(&q.name))
            .map(|q| (q.name.clone(), q.width))
            .collect();
        let mem_in: Vec<(String, crate::Sig)> = mem_ports
            .iter()
            .map(|(n, w)| (n.clone(), m.input(n, *w)))
            .collect();
        // Nets: what the CSR drives (into the batch controller), what the batch controller
        // drives (into the core).
        let nets = |m: &mut ModuleBuilder, prefix: &str, ports: Vec<(String, u32)>| {
            ports
                .into_iter()
                .map(|(n, w)| {
                    let net = m.net(&format!("{prefix}{n}"), w);
                    (n, net)
                })
                .collect::<Vec<(String, crate::Sig)>>()
        };
        let mut launch = csr::launch_ports(&p);
        launch.extend([
            ("start".to_string(), 1),
            ("abort_req".to_string(), 1),
            ("addr_over".to_string(), 1),
        ]);
        let from_csr = nets(m, "csr_", launch);
        let problem = csr::problem_ports(&p);
        let mut core_ports = problem.clone();
        core_ports.extend([("start".to_string(), 1), ("keep_counters".to_string(), 1)]);
        core_ports.extend(mem_ports);
        let to_core = nets(m, "batch_core_", core_ports);
        let mut core_in: Vec<(&str, crate::Sig)> =
            to_core.iter().map(|(n, s)| (n.as_str(), *s)).collect();
        let abort = from_csr
            .iter()
            .find(|(n, _)| n == "abort_req")
            .expect("abort")
            .1;
        core_in.push(("abort_req", abort));
        let c = m.instance(&core, "u_core", &core_in);
        // The batch controller: the CSR's values, the core's status and memory outputs, the
        // memory's inputs.
        let mut batch_in: Vec<(String, crate::Sig)> = vec![];
        for (n, s) in &from_csr {
            let port = if problem.iter().any(|(q, _)| q == n) {
                format!("csr_{n}")
            } else {
                n.clone()
            };
            batch_in.push((port, *s));
        }
        for n in ["busy", "done", "error"] {
            batch_in.push((format!("core_{n}"), c.get(n)));
        }
        for q in core.ports.iter().filter(|q| q.dir == Dir::Output) {
            if is_mem_port(&q.name) {
                batch_in.push((format!("core_{}", q.name), c.get(&q.name)));
            }
        }
        batch_in.extend(mem_in.iter().cloned());
        let batch_in: Vec<(&str, crate::Sig)> =
            batch_in.iter().map(|(n, s)| (n.as_str(), *s)).collect();
        let b = m.instance(&batch, "u_batch", &batch_in);
        for (n, net) in &to_core {
            m.drive(*net, b.get(&format!("core_{n}")));
        }
        // The register block: the AXI4-Lite slave, the batch's status, the core's counters.
        let mut csr_in = axil_in.clone();
        for n in ["busy", "done", "error", "finish"] {
            csr_in.push((n, b.get(n)));
        }
        for n in COUNTERS {
            csr_in.push((n, c.get(n)));
        }
        let r = m.instance(&csr, "u_csr", &csr_in);
        for (n, net) in &from_csr {
            m.drive(*net, r.get(n));
        }
        for (n, _, is_in) in csr::axil_ports() {
            if !is_in {
                m.output(n, r.get(n));
            }
        }
        m.output("irq", r.get("irq"));
        for q in core.ports.iter().filter(|q| q.dir == Dir::Output) {
            if is_mem_port(&q.name) {
                m.output(&q.name, b.get(&q.name));
            }
        }
    }))
}

/// A port of the memory interface (`mem_*` of the simple port, `m_axi_*` of the AXI4 master),
/// which the top passes through from the core.
fn is_mem_port(name: &str) -> bool {
    name.starts_with("mem_") || name.starts_with("m_axi_")
}
