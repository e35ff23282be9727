//! OpenSTA's power report of a netlist, with each net's activity measured in a gate-level run.
//!
//! Each net's transitions per clock cycle become the activity of the pin that drives it (or of
//! the input port). OpenSTA 2019's `set_power_activity -pins` calls a procedure it does not
//! define, so the commands call `sta::set_power_pin_activity`, which it would have called.
//!
//! Gated clocks: OpenSTA 2.0.17 (Debian's) gives every pin of a clock network the clock's full
//! activity and ignores an activity set on it, so the branch behind a clock gate would be priced
//! as if it took every edge. Each gate's output is therefore made a clock of its own whose period
//! gives the rate the run measured there (2 · period / activity; a branch that never toggled, a
//! clock of 10⁹ ns), and the activities of the flip-flops behind it, which OpenSTA divides by the
//! period of the clock that launches them, are scaled by the same factor. That run prices the
//! gates and the flip-flops behind them; every other cell is priced by a run with the activities
//! as measured (where only the gated branches are wrong), and the two are added cell by cell.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write;
use std::path::Path;
use std::process::Command;

use anyhow::{bail, Context, Result};
use gen::asic::Liberty;

use super::netlist::{self, Instance};
use super::vcd::Toggles;

/// Per cell: (internal, switching, leakage, total) power in W.
pub type CellPower = BTreeMap<String, [f64; 4]>;

/// The activity commands of a gate-level run's `toggles` on the netlist, and the number of
/// nets OpenSTA is left to guess (no driver, not a port).
pub fn activities(
    toggles: &Toggles,
    cells: &[Instance],
    ports: &[String],
    lib: &Liberty,
) -> (Vec<String>, usize) {
    let mut driver = BTreeMap::new();
    for c in cells {
        let outs = lib.outputs.get(&c.cell);
        for (pin, net) in &c.pins {
            if outs.is_some_and(|o| o.contains(pin)) && !net.is_empty() {
                driver.insert(net.as_str(), format!("{}/{pin}", c.name));
            }
        }
    }
    let ports: BTreeSet<&str> = ports.iter().map(|p| p.as_str()).collect();
    let mut cmds = vec![];
    let mut unannotated = 0;
    let cycles = toggles.cycles.max(1) as f64;
    for (net, &n) in &toggles.counts {
        if net == "clk" {
            continue;
        }
        let act = n as f64 / cycles;
        if let Some(pin) = driver.get(net.as_str()) {
            cmds.push(format!(
                "sta::set_power_pin_activity [get_pins {{{pin}}}] {act:.6} 0.5"
            ));
        } else if ports.contains(net.as_str()) {
            cmds.push(format!(
                "set_power_activity -input_ports [get_ports {{{net}}}] -activity {act:.6} -duty 0.5"
            ));
        } else {
            unannotated += 1;
        }
    }
    (cmds, unannotated)
}

/// The gated branches: (commands for the measured run, commands for the clock-only run, the
/// cells the measured gated run prices: each gate and the flip-flops behind it).
pub struct Gated {
    pub measured: Vec<String>,
    pub idle: Vec<String>,
    pub cells: BTreeSet<String>,
    pub gates: usize,
    pub opened: usize,
}

pub fn gated(acts: &[String], cells: &[Instance], lib: &Liberty, period_ns: f64) -> Result<Gated> {
    let Some(g) = &lib.clock_gate else {
        bail!(
            "{} has no integrated clock-gating cell: the power flow prices gated clocks at a \
             library that has one (nangate45, asap7, sky130hd, sg13g2)",
            lib.name
        );
    };
    // Each gate's output net, and the flip-flops it clocks.
    let gate_of_net: BTreeMap<&str, &str> = cells
        .iter()
        .filter(|c| c.cell == g.cell)
        .filter_map(|c| Some((c.pins.get(&g.out)?.as_str(), c.name.as_str())))
        .collect();
    let behind: BTreeMap<&str, &str> = cells
        .iter()
        .filter(|c| lib.flip_flops.contains(&c.cell))
        .filter_map(|c| {
            let gate = c.pins.values().find_map(|n| gate_of_net.get(n.as_str()))?;
            Some((c.name.as_str(), *gate))
        })
        .collect();
    // A pin-activity command: (instance, pin, activity, duty).
    let parse = |l: &str| -> Option<(String, String, f64, String)> {
        let rest = l.strip_prefix("sta::set_power_pin_activity [get_pins {")?;
        let (pin, rest) = rest.split_once("}] ")?;
        let (inst, pin) = pin.rsplit_once('/')?;
        let (act, duty) = rest.split_once(' ')?;
        Some((inst.into(), pin.into(), act.parse().ok()?, duty.into()))
    };
    let mut rate = BTreeMap::new();
    for l in acts {
        if let Some((inst, pin, a, _)) = parse(l) {
            if pin == g.out && gate_of_net.values().any(|x| *x == inst) {
                rate.insert(inst, a);
            }
        }
    }
    // A gate whose output never toggled has no activity line (its net may be undriven in the
    // dump only if the run never reached it): take it as closed.
    for inst in gate_of_net.values() {
        rate.entry(inst.to_string()).or_insert(0.0);
    }
    let clock = |gate: &str, a: f64, k: usize| {
        let p = if a > 0.0 { 2.0 * period_ns / a } else { 1e9 };
        format!(
            "create_clock -name gated{k} -period {p:.6} [get_pins {{{gate}/{}}}]",
            g.out
        )
    };
    let mut measured = vec![];
    for l in acts {
        match parse(l) {
            Some((inst, pin, _, _)) if pin == g.out && rate.contains_key(&inst) => {}
            Some((inst, pin, a, duty)) if behind.contains_key(inst.as_str()) => {
                let r = rate[behind[inst.as_str()]];
                let scale = if r > 0.0 { 2.0 / r } else { 1.0 };
                measured.push(format!(
                    "sta::set_power_pin_activity [get_pins {{{inst}/{pin}}}] {:.6} {duty}",
                    a * scale
                ));
            }
            _ => measured.push(l.clone()),
        }
    }
    let gates: Vec<(&String, &f64)> = rate.iter().collect();
    measured.extend(gates.iter().enumerate().map(|(k, (g, a))| clock(g, **a, k)));
    let idle = gates
        .iter()
        .enumerate()
        .map(|(k, (g, _))| clock(g, 0.0, k))
        .collect();
    let mut priced: BTreeSet<String> = behind.keys().map(|s| s.to_string()).collect();
    priced.extend(rate.keys().cloned());
    Ok(Gated {
        measured,
        idle,
        cells: priced,
        gates: rate.len(),
        opened: rate.values().filter(|a| **a > 0.0).count(),
    })
}

/// OpenSTA's per-cell power of the netlist `net` (top `top`) at a clock of `period_ns`, with
/// the commands `extra` (activities, gated clocks) after the clock.
pub fn report(
    dir: &Path,
    tag: &str,
    (lib, net, top): (&Path, &Path, &str),
    period_ns: f64,
    extra: &[String],
) -> Result<CellPower> {
    let mut tcl = String::new();
    writeln!(
        tcl,
        "read_liberty {}\nread_verilog {}\nlink_design {top}\ncreate_clock -name clk -period \
         {period_ns} [get_ports clk]",
        lib.display(),
        net.display()
    )?;
    for l in extra {
        tcl += l;
        tcl.push('\n');
    }
    tcl += "report_power -instances [get_cells *] -digits 6\n";
    let path = dir.join(format!("{tag}.tcl"));
    std::fs::write(&path, tcl)?;
    let sta = gen::tools::require(gen::tools::Tool::OpenSta)?;
    let out = Command::new(sta)
        .arg("-exit")
        .arg(&path)
        .current_dir(dir)
        .output()
        .context("running OpenSTA")?;
    let text =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    std::fs::write(dir.join(format!("{tag}.txt")), &text)?;
    let mut cells = CellPower::new();
    for l in text.lines() {
        let t: Vec<&str> = l.split_whitespace().collect();
        if t.len() == 5 {
            let v: Vec<f64> = t[..4].iter().filter_map(|x| x.parse().ok()).collect();
            if let [a, b, c, d] = v[..] {
                cells.insert(netlist::clean(t[4]), [a, b, c, d]);
            }
        }
    }
    if !out.status.success() || cells.is_empty() {
        bail!(
            "OpenSTA's power report ({}) has no cell: {}",
            path.display(),
            text.lines().rev().take(8).collect::<Vec<_>>().join(" | ")
        );
    }
    Ok(cells)
}

#[cfg(test)]
mod tests {
    use super::*;
    use gen::asic::GateCell;

    fn lib() -> Liberty {
        let set = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<BTreeSet<_>>();
        Liberty {
            path: "cells.lib".into(),
            name: "test".into(),
            area: BTreeMap::new(),
            flip_flops: set(&["DFF"]),
            latches: BTreeSet::new(),
            buffer: None,
            wire_load: None,
            inputs: BTreeMap::new(),
            outputs: [("DFF", "Q"), ("ICG", "GCK"), ("INV", "ZN")]
                .iter()
                .map(|(c, p)| (c.to_string(), set(&[p])))
                .collect(),
            excluded: BTreeSet::new(),
            dont_use: vec![],
            clock_gate: Some(GateCell {
                cell: "ICG".into(),
                clock: "CK".into(),
                enable: "E".into(),
                out: "GCK".into(),
                test: None,
            }),
        }
    }

    fn cell(cell: &str, name: &str, pins: &[(&str, &str)]) -> Instance {
        Instance {
            cell: cell.into(),
            name: name.into(),
            pins: pins
                .iter()
                .map(|(p, n)| (p.to_string(), n.to_string()))
                .collect(),
        }
    }

    #[test]
    fn activities_on_drivers_and_gated_branches_as_clocks() {
        let cells = vec![
            cell("ICG", "g0", &[("CK", "clk"), ("E", "en"), ("GCK", "gck")]),
            cell("DFF", "f0", &[("CK", "gck"), ("D", "d"), ("Q", "q0")]),
            cell("DFF", "f1", &[("CK", "clk"), ("D", "q0"), ("Q", "q1")]),
            cell("INV", "i0", &[("A", "q1"), ("ZN", "d")]),
        ];
        let counts = [
            ("clk", 20),
            ("en", 2),
            ("gck", 2),
            ("q0", 1),
            ("q1", 5),
            ("d", 5),
            ("x", 3),
        ];
        let toggles = Toggles {
            cycles: 10,
            counts: counts.iter().map(|(n, c)| (n.to_string(), *c)).collect(),
        };
        let (acts, unannotated) =
            activities(&toggles, &cells, &["clk".into(), "en".into()], &lib());
        assert_eq!(unannotated, 1, "x has no driver and is no port");
        assert!(acts.contains(&"sta::set_power_pin_activity [get_pins {f0/Q}] 0.100000 0.5".into()));
        assert!(acts.contains(
            &"set_power_activity -input_ports [get_ports {en}] -activity 0.200000 -duty 0.5".into()
        ));
        let g = gated(&acts, &cells, &lib(), 2.0).unwrap();
        assert_eq!((g.gates, g.opened), (1, 1));
        assert_eq!(
            g.cells,
            ["f0", "g0"].iter().map(|s| s.to_string()).collect()
        );
        // The gate's branch toggled 0.2 a cycle: a clock of 2 · 2 ns / 0.2; f0's output,
        // launched on it, scaled by 2 / 0.2; f1 (on clk) as measured.
        assert!(g
            .measured
            .contains(&"create_clock -name gated0 -period 20.000000 [get_pins {g0/GCK}]".into()));
        assert!(g
            .measured
            .contains(&"sta::set_power_pin_activity [get_pins {f0/Q}] 1.000000 0.5".into()));
        assert!(g
            .measured
            .contains(&"sta::set_power_pin_activity [get_pins {f1/Q}] 0.500000 0.5".into()));
        assert!(!g.measured.iter().any(|l| l.contains("{g0/GCK}] 0.2")));
        assert_eq!(
            g.idle,
            ["create_clock -name gated0 -period 1000000000.000000 [get_pins {g0/GCK}]"]
        );
    }
}
