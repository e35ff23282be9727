//! An AXI4-Lite master for the testbench: one write or read at a time on a design's `s_axil_*`
//! ports, with the delays the caller chooses (address and data valid, response ready), each
//! cycle clocked by the caller's `tick` (which may serve the memory port too). It holds
//! `valid` and the payload until `ready`, as the protocol requires, and gives up after a
//! bounded wait.

use anyhow::{bail, Result};
use hdl::soc::csr::{AxilIn, AxilOut};
use verilator_tb::Dut;

/// The slave's port prefix.
const PREFIX: &str = "s_axil";

/// Presents the master's outputs `ins` and returns the slave's outputs.
fn exchange(dut: &mut Dut, ins: &AxilIn<u64>) -> AxilOut<u64> {
    dut.set_all(PREFIX, ins);
    dut.get_all(PREFIX, &AxilOut::widths())
}

/// A transaction's delays in cycles: before AW (or AR) valid, before W valid, before B (or R)
/// ready once the response could be taken.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Delays {
    pub addr: u32,
    pub data: u32,
    pub resp: u32,
}

/// Cycles a transaction may take before the slave is declared stuck.
const PATIENCE: u32 = 1000;

/// Writes `data` under strobes `strb` to `addr`; returns BRESP.
pub fn write(
    dut: &mut Dut,
    addr: u32,
    data: u32,
    strb: u8,
    d: Delays,
    tick: &mut dyn FnMut(&mut Dut) -> Result<()>,
) -> Result<u8> {
    let mut ins = AxilIn {
        awaddr: addr as u64,
        wdata: data as u64,
        wstrb: strb as u64,
        ..AxilIn::default()
    };
    let (mut aw_done, mut w_done) = (false, false);
    let mut t = 0u32;
    let mut b_wait = 0u32;
    loop {
        let aw_v = !aw_done && t >= d.addr;
        let w_v = !w_done && t >= d.data;
        let b_r = aw_done && w_done && b_wait >= d.resp;
        ins.awvalid = aw_v as u64;
        ins.wvalid = w_v as u64;
        ins.bready = b_r as u64;
        let o = exchange(dut, &ins);
        let aw_hs = aw_v && o.awready == 1;
        let w_hs = w_v && o.wready == 1;
        let b = (b_r && o.bvalid == 1).then_some(o.bresp as u8);
        tick(dut)?;
        aw_done |= aw_hs;
        w_done |= w_hs;
        if aw_done && w_done {
            b_wait += 1;
        }
        if let Some(resp) = b {
            idle(dut);
            return Ok(resp);
        }
        t += 1;
        if t > PATIENCE + d.addr + d.data + d.resp {
            bail!("AXI4-Lite write to {addr:#x}: no response after {t} cycles");
        }
    }
}

/// Reads `addr`; returns (RDATA, RRESP).
pub fn read(
    dut: &mut Dut,
    addr: u32,
    d: Delays,
    tick: &mut dyn FnMut(&mut Dut) -> Result<()>,
) -> Result<(u32, u8)> {
    let mut ins = AxilIn {
        araddr: addr as u64,
        ..AxilIn::default()
    };
    let mut ar_done = false;
    let mut t = 0u32;
    let mut r_wait = 0u32;
    loop {
        let ar_v = !ar_done && t >= d.addr;
        let r_r = ar_done && r_wait >= d.resp;
        ins.arvalid = ar_v as u64;
        ins.rready = r_r as u64;
        let o = exchange(dut, &ins);
        let ar_hs = ar_v && o.arready == 1;
        let r = (r_r && o.rvalid == 1).then_some((o.rdata as u32, o.rresp as u8));
        tick(dut)?;
        ar_done |= ar_hs;
        if ar_done {
            r_wait += 1;
        }
        if let Some(x) = r {
            idle(dut);
            return Ok(x);
        }
        t += 1;
        if t > PATIENCE + d.addr + d.resp {
            bail!("AXI4-Lite read of {addr:#x}: no response after {t} cycles");
        }
    }
}

/// Every master output low.
pub fn idle(dut: &mut Dut) {
    dut.set_all(PREFIX, &AxilIn::default());
}
