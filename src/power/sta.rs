//! OpenSTA's power report of a netlist, with each net's activity measured in a gate-level run.
//!
//! Each net's transitions per clock cycle become the activity of the pin that drives it, of
//! every pin it drives (or of the input port). OpenSTA 2019's `set_power_activity -pins` calls
//! a procedure it does not define, so the commands call `sta::set_power_pin_activity`, which it
//! would have called.
//!
//! **Measured, not propagated.** OpenSTA 2019 (Debian's 0~20191111) propagates activities
//! through the logic (probabilistically, glitches ignored) whenever it computes power after an
//! activity changed: from the input ports through every cell they reach, and, the first time,
//! across the registers (a flip-flop's Q takes its D's activity) to everything else. That pass
//! overwrites every pin's activity but the input ports', those set by hand included, so a
//! report asked for straight after the commands priced the logic by OpenSTA's estimate, not
//! by what the replay measured (the flow did so until stop 72). [`report`] therefore:
//! 1. runs OpenSTA on a wrapper (`regflash_power_top`, [`wrap`]) that reaches the block's every
//!    input through a flip-flop of no power of its own (`RF_CUT`, in a library of one cell,
//!    [`CUT_LIBRARY`]), so no logic of the block is reachable from an input port;
//! 2. sets the measured activities, has OpenSTA compute power once (its propagation then
//!    overwrites them), sets them again and reports: the later pass starts from the input ports,
//!    ends at the cut flip-flops, and leaves every activity in the block as measured.
//!
//! (Setting the activities only after the first pass is not an option: that pass, from the
//! default input activity, crashes OpenSTA on a netlist as large as a PE row.) A load pin's
//! activity is its net's (a cell's input-pin internal power and the flip-flops' D pins use
//! it); clock pins keep the clock's.

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
    // Clock nets keep the clock's activity: the clock and the gated branches.
    let mut clocks: BTreeSet<&str> = BTreeSet::from(["clk"]);
    if let Some(g) = &lib.clock_gate {
        clocks.extend(
            cells
                .iter()
                .filter(|c| c.cell == g.cell)
                .filter_map(|c| c.pins.get(&g.out).map(|n| n.as_str())),
        );
    }
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
    // Every load pin takes its net's activity (the clock nets' keep the clock's).
    for c in cells {
        let Some(ins) = lib.inputs.get(&c.cell) else {
            continue;
        };
        for (pin, net) in &c.pins {
            if !ins.contains(pin) || clocks.contains(net.as_str()) {
                continue;
            }
            if let Some(&n) = toggles.counts.get(net) {
                let act = n as f64 / cycles;
                cmds.push(format!(
                    "sta::set_power_pin_activity [get_pins {{{}/{pin}}}] {act:.6} 0.5",
                    c.name
                ));
            }
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
    let cell_of: BTreeMap<&str, &str> = cells
        .iter()
        .map(|c| (c.name.as_str(), c.cell.as_str()))
        .collect();
    let outputs_of = |inst: &str| cell_of.get(inst).and_then(|c| lib.outputs.get(*c));
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
            // A flip-flop's outputs behind a gate are launched by its branch (the D pin's data
            // by the clock of whatever drives it: as measured).
            Some((inst, pin, a, duty))
                if behind.contains_key(inst.as_str())
                    && outputs_of(inst.as_str()).is_some_and(|o| o.contains(&pin)) =>
            {
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

/// The library of the cut flip-flop [`wrap`] puts before each of the block's inputs: no area,
/// no power, no delay (a 10 ps edge), so the block's cells are priced as before and no
/// activity propagates from an input port into them.
pub const CUT_LIBRARY: &str = include_str!("../../scripts/power/cut.lib");

/// The wrapper's name, and the block's instance in it.
pub const WRAPPER: &str = "regflash_power_top";
pub const BLOCK: &str = "u_blk";

/// The cut flip-flop of input `port` in the wrapper.
fn cut_cell(port: &str) -> String {
    format!("regflash_cut.{port}")
}

/// Verilog's escaped form of a name.
fn escaped(name: &str) -> String {
    format!("\\{name} ")
}

/// The netlist `text` (its module `module`, clocked by `clk`) with [`WRAPPER`] after it: the
/// block as [`BLOCK`], each input but the clock through an `RF_CUT` flip-flop ([`cut_cell`]),
/// the ports named as the block's.
pub fn wrap(text: &str, module: &str, clk: &str) -> String {
    let ports = netlist::ports(text);
    let ins: BTreeSet<String> = netlist::inputs(text).into_iter().collect();
    let mut v = text.to_string();
    let list: Vec<String> = ports.iter().map(|p| escaped(p)).collect();
    let _ = writeln!(v, "\nmodule {WRAPPER}({});", list.join(", "));
    let mut conns = vec![];
    for p in &ports {
        let dir = if ins.contains(p) { "input" } else { "output" };
        let _ = writeln!(v, "  {dir} {};", escaped(p));
        if ins.contains(p) && p != clk {
            let w = escaped(&format!("regflash_cut_q.{p}"));
            let _ = writeln!(v, "  wire {w};");
            let _ = writeln!(
                v,
                "  RF_CUT {} (.CK({}), .D({}), .Q({w}));",
                escaped(&cut_cell(p)),
                escaped(clk),
                escaped(p)
            );
            conns.push(format!(".{}({w})", escaped(p)));
        } else {
            conns.push(format!(".{}({})", escaped(p), escaped(p)));
        }
    }
    let _ = writeln!(v, "  {module} {BLOCK} ({});\nendmodule", conns.join(", "));
    v
}

/// What OpenSTA reads: the libraries (the cells', then [`CUT_LIBRARY`]'s) and the netlist
/// with its [`wrap`]per, whose inputs are `inputs`.
pub struct Design<'a> {
    pub libs: [&'a Path; 2],
    pub net: &'a Path,
    pub inputs: &'a [String],
}

/// OpenSTA's per-cell power of the block in `design` at a clock of `period_ns`, with the
/// commands `extra` (activities, gated clocks; pins named in the block) after the clock.
pub fn report(
    dir: &Path,
    tag: &str,
    design: &Design,
    period_ns: f64,
    extra: &[String],
) -> Result<CellPower> {
    let mut tcl = String::new();
    for lib in design.libs {
        writeln!(tcl, "read_liberty {}", lib.display())?;
    }
    writeln!(
        tcl,
        "read_verilog {}\nlink_design {WRAPPER}\ncreate_clock -name clk -period {period_ns} \
         [get_ports clk]",
        design.net.display()
    )?;
    // The block's pins are in its instance; an input's activity is its cut flip-flop's too.
    let inputs: BTreeSet<&str> = design.inputs.iter().map(|s| s.as_str()).collect();
    let mut lines = vec![];
    for l in extra {
        lines.push(l.replace("[get_pins {", &format!("[get_pins {{{BLOCK}/")));
        let port = l
            .strip_prefix("set_power_activity -input_ports [get_ports {")
            .and_then(|r| r.split_once("}] -activity "));
        if let Some((port, rest)) = port {
            if let (true, Some((act, duty))) = (inputs.contains(port), rest.split_once(" -duty ")) {
                lines.push(format!(
                    "sta::set_power_pin_activity [get_pins {{{}/Q}}] {act} {duty}",
                    cut_cell(port)
                ));
            }
        }
    }
    for l in &lines {
        tcl += l;
        tcl.push('\n');
    }
    // OpenSTA's own propagation overwrites the pins' activities the first time it computes
    // power (see the module's doc): run it, then set the measured activities again.
    let pins: Vec<&String> = lines
        .iter()
        .filter(|l| l.starts_with("sta::set_power_pin_activity"))
        .collect();
    if !pins.is_empty() {
        tcl += "report_power > /dev/null\n";
        for l in pins {
            tcl += l;
            tcl.push('\n');
        }
    }
    tcl += "report_power -instances [get_cells -hierarchical *] -digits 6\n";
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
    let prefix = format!("{BLOCK}/");
    for l in text.lines() {
        let t: Vec<&str> = l.split_whitespace().collect();
        if t.len() == 5 {
            let v: Vec<f64> = t[..4].iter().filter_map(|x| x.parse().ok()).collect();
            if let (&[a, b, c, d], Some(name)) = (&v[..], t[4].strip_prefix(&prefix)) {
                cells.insert(netlist::clean(name), [a, b, c, d]);
            }
        }
    }
    if !out.status.success() || cells.is_empty() {
        bail!(
            "OpenSTA ({}) ended with {} and its power report ({}) has no cell: {}",
            path.display(),
            out.status,
            dir.join(format!("{tag}.txt")).display(),
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
            inputs: [
                ("DFF", &["CK", "D"][..]),
                ("ICG", &["CK", "E"]),
                ("INV", &["A"]),
            ]
            .iter()
            .map(|(c, p)| (c.to_string(), set(p)))
            .collect(),
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

    /// OpenSTA prices the activity measured, not its own propagated estimate: an XOR whose
    /// two inputs toggle together never toggles (as a run would measure it), and costs no
    /// switching power; its propagated activity would be the inputs' sum.
    #[test]
    fn opensta_prices_measured_not_propagated_activity() {
        let (source, name, _) = gen::asic::resolve(Some("nangate45"), None).unwrap();
        let dir = gen::tools::ScratchDir::new("sta-test").unwrap();
        let lib = gen::asic::load(&source, &name, dir.path()).unwrap();
        let net = "module top(clk, a, b, q);\n  input clk, a, b;\n  output q;\n  wire y;\n  \
                   XOR2_X1 x0 (.A(a), .B(b), .Z(y));\n  \
                   DFF_X1 f0 (.CK(clk), .D(y), .Q(q));\nendmodule\n";
        let path = dir.path().join("net.v");
        let cells = netlist::instances(net);
        let counts = [("clk", 20), ("a", 5), ("b", 5), ("y", 0), ("q", 0)];
        let toggles = Toggles {
            cycles: 10,
            counts: counts.iter().map(|(n, c)| (n.to_string(), *c)).collect(),
        };
        let ports: Vec<String> = ["clk", "a", "b", "q"].map(String::from).to_vec();
        let (acts, _) = activities(&toggles, &cells, &ports, &lib);
        // The XOR's input pins take their nets' activity; the flip-flop's clock pin none.
        assert!(acts.contains(&"sta::set_power_pin_activity [get_pins {x0/A}] 0.500000 0.5".into()));
        assert!(!acts.iter().any(|l| l.contains("f0/CK")));
        std::fs::write(&path, wrap(net, "top", "clk")).unwrap();
        let cut = dir.path().join("cut.lib");
        std::fs::write(&cut, CUT_LIBRARY).unwrap();
        let ins = netlist::inputs(net);
        assert_eq!(ins, ["clk", "a", "b"]);
        let design = Design {
            libs: [lib.path.as_path(), cut.as_path()],
            net: &path,
            inputs: &ins,
        };
        let idle = report(dir.path(), "t", &design, 1.0, &acts).unwrap()["x0"];
        // With its output measured toggling half the cycles, it switches.
        let busy: Vec<String> = acts
            .iter()
            .map(|l| l.replace("{x0/Z}] 0.000000", "{x0/Z}] 0.500000"))
            .collect();
        let busy = report(dir.path(), "t", &design, 1.0, &busy).unwrap()["x0"];
        assert!(
            busy[1] > 1e-7 && idle[1] < busy[1] * 1e-6,
            "the XOR's switching power: {idle:?} never toggling, {busy:?} toggling"
        );
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
        // Load pins take their nets' activity, the clock pins none; a gated flip-flop's D
        // is launched by clk, as measured, not scaled like its Q.
        assert!(acts.contains(&"sta::set_power_pin_activity [get_pins {i0/A}] 0.500000 0.5".into()));
        assert!(acts.contains(&"sta::set_power_pin_activity [get_pins {g0/E}] 0.200000 0.5".into()));
        assert!(!acts.iter().any(|l| l.contains("/CK}")));
        assert!(g
            .measured
            .contains(&"sta::set_power_pin_activity [get_pins {f0/D}] 0.500000 0.5".into()));
        assert_eq!(
            g.idle,
            ["create_clock -name gated0 -period 1000000000.000000 [get_pins {g0/GCK}]"]
        );
    }
}
