//! `regflash_clock_gate`: a latch-based integrated clock gate (ICG), and what goes behind it:
//! a memory gated word by word ([`gated_memory`]: the PE's register file, the landing and
//! staging buffers, behavioural SRAM banks, reg3d's S tier) and a register gated by a valid
//! bit ([`delay`]: the PE's load data).
//!
//! Port `en` in, `gclk` out, clocked by `clk`. The enable passes a latch while `clk` is low and
//! is held while it is high, and `gclk = clk & en_l`: the gated clock has no glitch, and it
//! rises with `clk` exactly at the edges before which `en` was high. A register on `gclk`
//! therefore loads at the same edges as a register on `clk` enabled by `en`, and takes no
//! clock at the others: that is the saving (a flip-flop's clock pin toggles every cycle
//! whether it loads or not).
//!
//! **Simulation.** The module's body is written by hand (`ModuleBuilder::verbatim`): the latch
//! `always @(clk or en) if (!clk) en_l = en;` and the `assign`. It has no race with the
//! registers it gates: at a rising edge of `clk` the latch is already closed (`clk` is high
//! before any register's non-blocking update lands), so `en_l` is the enable from before the
//! edge, and `gclk` rises in the same time step as `clk`, in the active region, before any
//! non-blocking assignment of that step: a gated register reads the values every other
//! register held before the edge, as an enabled one does. Verilator (5.006 and 5.048) and
//! Icarus simulate it so; `tests/ir_ops.rs` (`clock_gated_registers_load_as_enabled_ones`)
//! holds a gated memory and gated registers to ordinary ones under random enables on both.
//!
//! **Synthesis.** The ASIC flow does not synthesize the body: it maps the module to the
//! library's integrated clock-gating cell (nangate45 `CLKGATE_X1`, asap7 `ICGx1_ASAP7_75t_R`,
//! sky130hd `sky130_fd_sc_hd__dlclkp_1`, sg13g2 `sg13g2_lgcp_1`; a library without one gets
//! the latch, an inverter and an AND of its own cells), checking that the cell exists first
//! (`gen::asic`). Its latch is the one latch a design may hold.
//!
//! The IR body built beside the text is the gate's timing view for the design's checks: `gclk`
//! is a register of `en` (no combinational path from `en` to `gclk`: the latch is closed
//! while `clk` is high).

use crate::ir::iface::Block;
use crate::{interface, Design, MemHandle, ModuleBuilder, Sig};

/// The module's name (one per design; the ASIC flow maps it by this name).
pub const NAME: &str = "regflash_clock_gate";

/// Words of a gated memory that share one copy of the write data (`gen::verilog` prints each
/// group's copy ANDed with its write select, so a write toggles one group's flip-flop inputs).
pub const DATA_GROUP: u32 = 8;

interface! {
    /// The clock gate's input: the enable, for the next rising edge of `clk`.
    pub struct GateIn { en }
}

interface! {
    /// The clock gate's output: the gated clock.
    pub struct GateOut { gclk }
}

/// The clock gate as a typed block.
pub type ClockGate = Block<GateIn, GateOut<u32>>;

/// The model's Verilog body (see the module doc).
const BODY: &str =
    "    // Latch-based integrated clock gate: en passes while clk is low and holds while it is
    // high, so gclk = clk & en_l has no glitch and rises with clk exactly when en was high
    // before that edge. Synthesis maps this module to the library's clock-gating cell.
    reg en_l;
    /* verilator lint_off LATCH */
    always @(clk or en)
        if (!clk) en_l = en;
    /* verilator lint_on LATCH */
    assign gclk = clk & en_l;
";

/// Defines the clock gate in `d` (once).
pub fn build(d: &mut Design) -> ClockGate {
    let inputs = GateIn { en: 1 };
    let outputs = GateOut { gclk: 1 };
    d.define_block(NAME, &inputs, outputs, |_, m, i| {
        m.doc(
            "clock_gate: latch-based integrated clock gate: gclk = clk & (en latched while clk \
             is low).\nA register on gclk loads at the edges where en was high, as a register \
             on clk enabled by en does,\nand its clock is still at the others. Synthesis maps \
             it to the library's ICG cell.",
        );
        m.verbatim(BODY);
        // The timing view: no combinational path from en to gclk.
        let en_l = m.reg("en_l", 1, None);
        m.set_next(en_l, i.en);
        GateOut { gclk: en_l.q }
    })
}

/// A memory of `depth` words of `width` bits (read it with `ModuleBuilder::mem_read`) whose
/// words each sit behind a clock gate of their own, enabled when the one write port (`we`,
/// `addr`, `data`) writes that word: only the written word's flip-flops take the clock edge,
/// and no word needs a hold multiplexer.
///
/// The write data reaches the words [`DATA_GROUP`] at a time, each group's copy held at 0 but
/// while the port writes that group (`gen::verilog`): a gated flip-flop's master latch is open
/// while its clock is held low, so every toggle of its D costs energy, written or not; the PE's
/// register file paid 2.7 pJ a cycle for it, 0.8 with the groups (nangate45, `regflash power`).
///
/// The gates are instances in the IR (`u_{name}_cg{i}`, enabled by `we & addr == i`), so the
/// hierarchy, the manifest and the ASIC flow count them. The emitter prints the memory two ways
/// (`gen::verilog`): with the gates, a generate loop of one gate and one register a word
/// (block `g_{name}`), the memory a wire array of them; without (`REGFLASH_NO_CLOCK_GATES`: the
/// FPGA flows, and the whole-core simulations), an ordinary memory written on `clk`, which an
/// FPGA flow may map to RAM and a simulator indexes rather than decodes.
pub fn gated_memory(
    m: &mut ModuleBuilder,
    gate: &ClockGate,
    name: &str,
    (depth, width): (u32, u32),
    (we, addr, data): (Sig, Sig, Sig),
) -> MemHandle {
    let mem = m.memory(name, depth, width);
    // Every gate reads the port's enable and address: named when the emitter gives them wires.
    let (we, addr) = (
        m.hint(&format!("{name}_we"), we),
        m.hint(&format!("{name}_wa"), addr),
    );
    m.mem_write(mem, we, addr, data);
    let clocks: Vec<Sig> = (0..depth)
        .map(|w| {
            let en = we & addr.eq(w as u64);
            m.instantiate(gate, &format!("u_{name}_cg{w}"), &GateIn { en })
                .gclk
        })
        .collect();
    m.gate_memory(mem, &clocks);
    mem
}

/// A register of `d` behind a clock gate of its own (`u_{name}_cg`), loading only at the edges
/// where `en` is high: a pipeline register whose value is used only when a valid bit says so
/// takes no clock edge otherwise. It has no reset (a gated clock carries none): its value
/// before the first load is undefined, so whatever reads it must hold to the same `en`.
pub fn delay(m: &mut ModuleBuilder, gate: &ClockGate, name: &str, d: Sig, en: Sig) -> Sig {
    let g = m.instantiate(gate, &format!("u_{name}_cg"), &GateIn { en });
    let r = m.reg_gated(name, d.width(), (g.gclk, en));
    m.set_next(r, d);
    r.q
}
