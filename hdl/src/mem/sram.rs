//! `sram`: a synchronous RAM bank, as an SRAM compiler's macro would offer it (bit-exact model:
//! `kernels::sram::Sram`).
//!
//! **Ports.** `we`, `waddr`, `wdata` (write `wdata` at `waddr` at the clock edge); `re`,
//! `raddr` → `rd_data` (the word at `raddr`, registered: valid from the cycle after `re` and
//! held until the next read). A read and a write of the same word in one cycle read the old
//! word (read-first). With `ports = 2` the bank has one read and one write port; with
//! `ports = 1` one port serves both (the address is `waddr` when `we`, else `raddr`): its user
//! must never read and write in the same cycle (the PE row asserts it of its P bank). No
//! reset, as a macro has none: the read register starts undefined.
//!
//! Emitted as behavioural Verilog that Yosys infers as a memory (one `$mem` per bank), or, with
//! `blackbox`, as a module with the same ports and no body, for a memory macro to replace.

use crate::ir::iface::Block;
use crate::{addr_bits, interface, Design};

interface! {
    /// The bank's write and read requests.
    pub struct SramIn { we, waddr, wdata, re, raddr }
}

interface! {
    /// The read data (registered).
    pub struct SramOut { rd_data }
}

/// Configuration of one bank.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SramConfig {
    /// Words.
    pub depth: u32,
    /// Bits per word.
    pub width: u32,
    /// 1 (one shared port) or 2 (one read, one write port).
    pub ports: u32,
    /// Emit a blackbox for a memory macro instead of the behaviour.
    pub blackbox: bool,
}

impl SramConfig {
    pub fn module_name(&self) -> String {
        format!(
            "sram_{}_d{}_w{}{}",
            if self.ports == 1 { "1rw" } else { "1r1w" },
            self.depth,
            self.width,
            if self.blackbox { "_macro" } else { "" }
        )
    }

    pub fn addr_width(&self) -> u32 {
        addr_bits(self.depth)
    }

    pub fn input_widths(&self) -> SramIn<u32> {
        let aw = self.addr_width();
        SramIn {
            we: 1,
            waddr: aw,
            wdata: self.width,
            re: 1,
            raddr: aw,
        }
    }

    pub fn output_widths(&self) -> SramOut<u32> {
        SramOut {
            rd_data: self.width,
        }
    }

    /// Bits the bank stores.
    pub fn bits(&self) -> u64 {
        self.depth as u64 * self.width as u64
    }
}

/// The SRAM bank's block.
pub type SramBlock = Block<SramIn, SramOut<u32>>;

/// Defines the bank.
pub fn build(d: &mut Design, cfg: &SramConfig) -> SramBlock {
    let cfg = *cfg;
    // A behavioural bank's words are flip-flops, each word behind a clock gate opened by its
    // write; a macro (blackbox) has no body.
    let gate = (!cfg.blackbox).then(|| crate::clock_gate::build(d));
    d.define_block(
        &cfg.module_name(),
        &cfg.input_widths(),
        cfg.output_widths(),
        |_, m, i| {
            m.doc(&format!(
                "sram: {} words x {} bits, {}; read data registered (valid the cycle after re,\n\
                 held until the next read), read-first. See hdl/src/mem/sram.rs.",
                cfg.depth,
                cfg.width,
                if cfg.ports == 1 {
                    "one shared read/write port"
                } else {
                    "one read and one write port"
                }
            ));
            m.set_latency(1);
            if cfg.blackbox {
                m.blackbox();
            }
            let raddr = if cfg.ports == 1 {
                crate::mux(i.we, i.waddr, i.raddr)
            } else {
                i.raddr
            };
            let waddr = if cfg.ports == 1 { raddr } else { i.waddr };
            let port = (i.we, waddr, i.wdata);
            let mem = match &gate {
                Some(g) => {
                    crate::clock_gate::gated_memory(m, g, "mem", (cfg.depth, cfg.width), port)
                }
                None => {
                    let mem = m.memory("mem", cfg.depth, cfg.width);
                    m.mem_write(mem, port.0, port.1, port.2);
                    mem
                }
            };
            // The read register, like a macro's, has no reset.
            let rd = m.reg("rd_data", cfg.width, None);
            let word = m.mem_read(mem, raddr);
            m.set_next(rd, word);
            m.set_enable(rd, i.re);
            SramOut { rd_data: rd.q }
        },
    )
}
