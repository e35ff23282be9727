//! `<unit>_serial`: a pin-limited wrapper for FPGA smoke builds.
//!
//! Ports: `sin`, `shift`, `capture` → `sout` (plus `clk`, `rst`). While `shift` is high, `sin`
//! shifts into a register holding every data input of the unit (the unit's first input port in
//! the most significant bits); `capture` loads every output of the unit into an output register,
//! which `shift` then moves out through `sout`, most significant bit first. Six pins whatever
//! the unit's width, and every path through the unit starts and ends at a register, so a
//! place-and-route tool's fmax is the unit's own.

use crate::ir::{Dir, ModRef};
use crate::{cat, mux, Design, Sig};

/// Defines the serial wrapper of `unit` in `d` (the unit must already be defined there).
pub fn serial_wrapper(d: &mut Design, unit: &ModRef) -> ModRef {
    let name = format!("{}_serial", unit.name);
    let unit = unit.clone();
    d.define(&name, |_, m| {
        m.doc(&format!(
            "{name}: pin-limited wrapper of {} for FPGA smoke builds.\n\
             shift: sin shifts into the input register; capture: the outputs load into the\n\
             output register, which shift moves out through sout (MSB first).",
            unit.name
        ));
        let sin = m.input("sin", 1);
        let shift = m.input("shift", 1);
        let capture = m.input("capture", 1);
        let inputs: Vec<_> = unit.ports.iter().filter(|p| p.dir == Dir::Input).collect();
        let outputs: Vec<_> = unit.ports.iter().filter(|p| p.dir == Dir::Output).collect();
        let in_width: u32 = inputs.iter().map(|p| p.width).sum();
        let out_width: u32 = outputs.iter().map(|p| p.width).sum();

        let in_reg = m.reg("in_chain", in_width, Some(0));
        let shifted_in = if in_width == 1 {
            sin
        } else {
            let low = in_reg.q.slice(in_width - 2, 0);
            cat(&[low, sin])
        };
        m.set_next(in_reg, shifted_in);
        m.set_enable(in_reg, shift);

        let mut conns: Vec<(&str, Sig)> = vec![];
        let mut top = in_width;
        for p in &inputs {
            let s = in_reg.q.slice(top - 1, top - p.width);
            conns.push((p.name.as_str(), s));
            top -= p.width;
        }
        let outs = m.instance(&unit, "u_unit", &conns);
        let results: Vec<Sig> = outputs.iter().map(|p| outs.get(&p.name)).collect();
        let results = cat(&results);

        let out_reg = m.reg("out_chain", out_width, Some(0));
        let shifted_out = if out_width == 1 {
            m.zero(1)
        } else {
            let low = out_reg.q.slice(out_width - 2, 0);
            let zero = m.zero(1);
            cat(&[low, zero])
        };
        let next = mux(capture, results, shifted_out);
        m.set_next(out_reg, next);
        let load = capture | shift;
        m.set_enable(out_reg, load);
        let msb = out_reg.q.msb();
        m.output("sout", msb);
        m.set_latency(0);
    })
}
