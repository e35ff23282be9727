//! The stable top (`top_name`, `regflash_top` by default): the core behind the AXI4-Lite
//! control and status registers (`csr`), with the core's memory port. Ports: `s_axil_*` (the
//! register slave), `irq`, and the core's memory port: `mem_req_*` / `mem_rsp_*` (`mem_if =
//! "simple"`: one request per beat) or the AXI4 master `m_axi_*` (`mem_if = "axi4"`; see
//! `hdl::mem::dma`). The problem, start, abort, status and counters reach
//! the core only through the registers; no debug output leaves the top. Inner modules keep
//! their parameterized names.

use super::batch::{self, BatchIn};
use super::csr::{self, AxilIn, AxilOut, CsrIn, CsrOut};
use crate::core::ports::CoreIn;
use crate::core::CoreParams;
use crate::mem::dma::{AxiIn, AxiOut, MemIn, MemReq};
use crate::{group, Design, ModRef};

group! {
    /// The top's inputs: the register slave's (`s_axil_*`) and the memory port's (`mem_*` or
    /// `m_axi_*`, by `mem_if`).
    pub struct TopIn<T> {
        ;
        s_axil: AxilIn<T>,
        mem: Option<MemIn<T>>,
        m_axi: Option<AxiIn<T>>,
    }
}

group! {
    /// The top's outputs: `irq`, the register slave's (`s_axil_*`) and the memory port's
    /// (`mem_req_*` or `m_axi_*`).
    pub struct TopOut<T> {
        irq;
        s_axil: AxilOut<T>,
        mem_req: Option<MemReq<T>>,
        m_axi: Option<AxiOut<T>>,
    }
}

impl TopIn<u32> {
    pub fn widths(p: &CoreParams) -> Self {
        let (mem, m_axi) = p.dma.mem_inputs();
        TopIn {
            s_axil: AxilIn::widths(),
            mem,
            m_axi,
        }
    }
}

impl TopOut<u32> {
    pub fn widths(p: &CoreParams) -> Self {
        let (mem_req, m_axi) = p.dma.mem_outputs();
        TopOut {
            irq: 1,
            s_axil: AxilOut::widths(),
            mem_req,
            m_axi,
        }
    }
}

/// Defines the top `name` of core `p` (and the core, the register block and the batch
/// controller it instantiates); refuses a name an inner module has.
pub fn build(d: &mut Design, p: &CoreParams, name: &str) -> anyhow::Result<ModRef> {
    let core = crate::core::block(d, p);
    let csr = csr::block(d, p, name);
    let batch = batch::block(d, p, name);
    anyhow::ensure!(
        d.module(name).is_none(),
        "top_name = {name:?} is the name of a module inside the design: choose another (the \
         default is regflash_top)"
    );
    let p = *p;
    let (inputs, outputs) = (TopIn::widths(&p), TopOut::widths(&p));
    let top = d.define_block(name, &inputs, outputs, |_, m, i| {
        m.doc(&format!(
            "{name}: the regflash FlashAttention core ({}) behind its AXI4-Lite control and\n\
             status registers (see registers.md and regflash.h) and its varlen batch\n\
             controller, with the core's memory port.",
            core.module.name
        ));
        m.set_latency(1);
        // Nets: what the register block drives (into the batch controller and the core), and
        // what the batch controller drives into the core.
        let from_csr = m.nets("csr", &CsrOut::widths(&p));
        let to_core = m.nets("batch_core", &batch.outputs.core);
        let c = m.instantiate(
            &core,
            "u_core",
            &CoreIn {
                start: to_core.start,
                abort_req: from_csr.abort_req,
                keep_counters: to_core.keep_counters,
                mem: to_core.mem,
                m_axi: to_core.m_axi,
                problem: to_core.problem,
                // unfused: one scratch region for every sequence of a batch (they run one
                // after the other).
                s: from_csr.s,
                glb_bank: from_csr.glb_bank,
                link: from_csr.link,
            },
        );
        // The batch controller: the registers' values, the core's status and memory outputs,
        // the memory's inputs.
        let b = m.instantiate(
            &batch,
            "u_batch",
            &BatchIn {
                start: from_csr.start,
                abort_req: from_csr.abort_req,
                addr_over: from_csr.addr_over,
                core_busy: c.busy,
                core_done: c.done,
                core_error: c.error,
                csr: from_csr.problem,
                varlen: from_csr.varlen,
                s: from_csr.s,
                mem: i.mem,
                core_mem_req: c.mem_req,
                m_axi: i.m_axi,
                core_m_axi: c.m_axi,
            },
        );
        m.drive_all(&to_core, &b.core);
        // The register block: the AXI4-Lite slave, the batch's status, the core's counters.
        let r = m.instantiate(
            &csr,
            "u_csr",
            &CsrIn {
                busy: b.busy,
                done: b.done,
                error: b.error,
                finish: b.finish,
                s_axil: i.s_axil,
                counters: c.counters,
                glb_bank: c.glb_bank,
                link: c.link,
            },
        );
        m.drive_all(&from_csr, &r);
        TopOut {
            irq: from_csr.irq,
            s_axil: from_csr.s_axil,
            mem_req: b.mem_req,
            m_axi: b.m_axi,
        }
    });
    Ok(top.module)
}
