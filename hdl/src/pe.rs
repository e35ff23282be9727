//! `pe`: a processing element: the MAC plus a local register file.
//!
//! Ports:
//! * `a`, `b` (binary16): the operands (in the array, `a` is broadcast along the PE's row and
//!   `b` down its column);
//! * `op` (2 bits, [`PeOp`]): what to do this cycle;
//! * `addr`: the register the operation accumulates into or loads;
//! * `ld_data` (32 bits): the value a `Load` writes;
//! * `rd_addr` → `rd_data` (32 bits): an asynchronous read port.
//!
//! Every operation reads `rf[addr]` when it is issued and writes its result back `L + 1` clock
//! edges later, where L is the MAC latency; the module's latency (issue to visible on
//! `rd_data`) is therefore L + 1, and one operation is accepted every cycle. An operation that
//! accumulates into a register must be issued at least L + 1 cycles after the previous
//! operation that writes the same register (there is no forwarding): the array's schedule
//! rotates through several accumulators to meet this.
//!
//! Numerics: `Mac` is `kernels::fp::mac(rf[addr], a, b)`; `MacClear` starts from −0 (so the
//! result is exactly the product); `Load` writes `ld_data` unchanged.

use anyhow::{ensure, Result};

use crate::ieee;
use crate::mac::{self, MacConfig};
use crate::{addr_bits, Design, ModRef};

/// The PE's operations (the `op` port).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum PeOp {
    /// Nothing is written.
    Nop = 0,
    /// `rf[addr] = rf[addr] + a × b`.
    Mac = 1,
    /// `rf[addr] = −0 + a × b`: starts a new accumulation.
    MacClear = 2,
    /// `rf[addr] = ld_data`.
    Load = 3,
}

/// Configuration of a PE.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PeConfig {
    /// Registers in the local register file (32 bits each); a power of two from 2 to 1024.
    pub regs: u32,
    pub mac: MacConfig,
}

impl Default for PeConfig {
    fn default() -> Self {
        PeConfig {
            regs: 64,
            mac: MacConfig::default(),
        }
    }
}

impl PeConfig {
    pub fn validate(&self) -> Result<()> {
        ensure!(
            self.regs.is_power_of_two() && (2..=1024).contains(&self.regs),
            "registers per PE = {} is not supported: use a power of two from 2 to 1024 \
             (the seed design has 64)",
            self.regs
        );
        self.mac.validate()
    }

    /// Width of `addr` and `rd_addr`.
    pub fn addr_width(&self) -> u32 {
        addr_bits(self.regs)
    }

    /// Issue-to-visible latency: MAC latency + 1 (the write-back edge).
    pub fn latency(&self) -> u32 {
        self.mac.latency() + 1
    }

    pub fn module_name(&self) -> String {
        format!(
            "pe_r{}_m{}_a{}",
            self.regs, self.mac.mul.latency, self.mac.add.latency
        )
    }
}

/// Defines the PE (and the blocks it uses) in `d`.
pub fn build(d: &mut Design, cfg: &PeConfig) -> ModRef {
    let mac = mac::build(d, &cfg.mac);
    d.define(&cfg.module_name(), |_, m| {
        m.doc(&format!(
            "pe: MAC + {} x 32-bit register file. op: 0 nop, 1 mac (rf[addr] += a*b),\n\
             2 mac_clear (rf[addr] = a*b), 3 load (rf[addr] = ld_data).\n\
             Latency {} cycle(s) from issue to rd_data; one op per cycle; no forwarding: an op\n\
             reading a register must issue >= {} cycles after the previous write to it.",
            cfg.regs,
            cfg.latency(),
            cfg.latency()
        ));
        let aw = cfg.addr_width();
        let a = m.input("a", 16);
        let b = m.input("b", 16);
        let op = m.input("op", 2);
        let addr = m.input("addr", aw);
        let ld_data = m.input("ld_data", 32);
        let rd_addr = m.input("rd_addr", aw);

        let rf = m.memory("rf", cfg.regs, 32);
        let acc_old = m.mem_read(rf, addr);
        let is_clear = m.eq_lit(op, PeOp::MacClear as u64);
        let neg_zero = m.lit(32, ieee::F32_NEG_ZERO);
        let acc_in = m.mux(is_clear, neg_zero, acc_old);
        let acc_in = m.name("acc_in", acc_in);
        let result = m
            .instance(&mac, "u_mac", &[("a", a), ("b", b), ("acc", acc_in)])
            .get("y");

        // Control and load data travel beside the MAC pipeline to the write-back stage.
        let latency = cfg.mac.latency();
        let wb_op = m.delay_n("op", op, latency);
        let wb_addr = m.delay_n("addr", addr, latency);
        let wb_ld_data = m.delay_n("ld_data", ld_data, latency);
        let nop = m.lit(2, PeOp::Nop as u64);
        let wb_en = m.ne(wb_op, nop);
        let wb_load = m.eq_lit(wb_op, PeOp::Load as u64);
        let wb_data = m.mux(wb_load, wb_ld_data, result);
        let wb_data = m.name("wb_data", wb_data);
        m.mem_write(rf, wb_en, wb_addr, wb_data);

        let rd_data = m.mem_read(rf, rd_addr);
        m.output("rd_data", rd_data);
        m.set_latency(cfg.latency());
    })
}
