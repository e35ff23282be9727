//! A testbench that replays one block's input ports, as an RTL run's waveform has them, into
//! that block alone: its RTL or its netlist.

use std::collections::BTreeMap;
use std::fmt::Write;

use anyhow::{bail, Result};

/// The block's ports: (name, width), `clk` (and `rst`) among the inputs.
pub struct Ports {
    pub inputs: Vec<(String, u32)>,
    pub outputs: Vec<(String, u32)>,
}

/// A run's counts, as the testbench prints them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Counts {
    pub cycles: u64,
    /// Each event's rising edges at which its expression held.
    pub events: BTreeMap<String, u64>,
    /// The outputs' checksum over every rising edge out of reset where none is unknown.
    pub checksum: String,
}

/// The testbench (module `tb`) of `module` with `ports`, driving the inputs with `changes`
/// ((time in the waveform's unit, one clock edge a nanosecond; name; binary digits)), each
/// change 10 ps after the edge that caused it. At every rising edge it adds each event's
/// Verilog expression over the ports (a condition, or a count such as a row's `macs`; not in
/// reset), writes every output out of reset to `outs` (one line of bits an edge, the outputs
/// concatenated in order, the first leftmost), and folds them into a checksum; at the end it
/// prints `cycles C checksum H` and `event NAME N` lines. `gate`: the
/// ports are connected bit by bit (a netlist after `splitnets -ports`), and with `-DDUMP` the
/// run dumps the block's nets to `gl.vcd`.
pub fn testbench(
    module: &str,
    ports: &Ports,
    changes: &[(u64, String, String)],
    events: &[(&str, String)],
    (gate, outs_file): (bool, &str),
) -> Result<String> {
    let mut s = String::from("`timescale 1ps/1ps\nmodule tb;\n");
    let has_rst = ports.inputs.iter().any(|(p, _)| p == "rst");
    for (p, w) in &ports.inputs {
        writeln!(s, "  reg [{}:0] {p} = 0;", w - 1)?;
    }
    for (p, w) in &ports.outputs {
        writeln!(s, "  wire [{}:0] {p};", w - 1)?;
    }
    let mut conns = vec![];
    for (p, w) in ports.inputs.iter().chain(&ports.outputs) {
        if gate && *w > 1 {
            conns.extend((0..*w).map(|k| format!(".\\{p}[{k}] ({p}[{k}])")));
        } else {
            conns.push(format!(".{p}({p})"));
        }
    }
    writeln!(s, "  {module} dut({});", conns.join(", "))?;
    let width: u32 = ports.outputs.iter().map(|p| p.1).sum();
    if width == 0 {
        bail!("{module} has no output to check");
    }
    let outs: Vec<&str> = ports.outputs.iter().map(|p| p.0.as_str()).collect();
    writeln!(
        s,
        "  wire [{}:0] outs = {{{}}};\n  reg [63:0] fold; reg [63:0] sum = 0; integer i;\n  \
         integer cycles = 0; integer fd;",
        width - 1,
        outs.join(", ")
    )?;
    for (k, _) in events.iter().enumerate() {
        writeln!(s, "  integer ev{k} = 0;")?;
    }
    s += "  always @(posedge clk) begin\n    cycles = cycles + 1;\n";
    // An event's expression is a count this edge (a condition counts 1); none in reset or
    // while it is unknown.
    let live = if has_rst { "!rst && " } else { "" };
    for (k, (_, expr)) in events.iter().enumerate() {
        writeln!(
            s,
            "    if ({live}^({expr}) !== 1'bx) ev{k} = ev{k} + ({expr});"
        )?;
    }
    // The outputs folded to 64 bits, so the checksum takes any width.
    writeln!(
        s,
        "    fold = 0;\n    for (i = 0; i < {width}; i = i + 1) fold[i % 64] = fold[i % 64] ^ \
         outs[i];\n    if ({live}^outs !== 1'bx) sum = sum * 31 + fold;\n    \
         if ({live}1'b1) $fdisplay(fd, \"%b\", outs);\n  end"
    )?;
    writeln!(
        s,
        "  initial begin\n    fd = $fopen(\"{outs_file}\", \"w\");"
    )?;
    s += "`ifdef DUMP\n    $dumpfile(\"gl.vcd\"); $dumpvars(0, dut);\n`endif\n";
    let mut by_time: BTreeMap<u64, Vec<(&str, &str)>> = BTreeMap::new();
    for (t, n, v) in changes {
        by_time.entry(*t).or_default().push((n, v));
    }
    let mut last = 0u64;
    for (t, list) in by_time {
        let ps = t * 1000;
        let clk = list.iter().rev().find(|(n, _)| *n == "clk");
        if let Some((_, v)) = clk {
            writeln!(s, "    #{} clk = {v};", ps - last)?;
            last = ps;
        }
        let rest: Vec<String> = list
            .iter()
            .filter(|(n, _)| *n != "clk")
            .map(|(n, v)| format!("{n} = {}'b{v};", v.len()))
            .collect();
        if !rest.is_empty() {
            let at = ps + if clk.is_some() { 10 } else { 0 };
            writeln!(s, "    #{} {}", at - last, rest.join(" "))?;
            last = at;
        }
    }
    s += "    #100 $display(\"cycles %0d checksum %h\", cycles, sum);\n";
    for (k, (name, _)) in events.iter().enumerate() {
        writeln!(s, "    $display(\"event {name} %0d\", ev{k});")?;
    }
    s += "    $fclose(fd);\n    $finish;\n  end\nendmodule\n";
    Ok(s)
}

/// The counts a testbench run printed.
pub fn counts(output: &str) -> Result<Counts> {
    let mut c = Counts {
        cycles: 0,
        events: BTreeMap::new(),
        checksum: String::new(),
    };
    for line in output.lines() {
        let t: Vec<&str> = line.split_whitespace().collect();
        match t[..] {
            ["cycles", n, "checksum", h] => {
                c.cycles = n.parse()?;
                c.checksum = h.to_string();
            }
            ["event", name, n] => {
                c.events.insert(name.to_string(), n.parse()?);
            }
            _ => {}
        }
    }
    if c.checksum.is_empty() {
        bail!("the replay printed no checksum:\n{output}");
    }
    Ok(c)
}

/// The first edge and output at which the netlist's run (`gl`, the testbench's output lines)
/// differs from the RTL's (`rtl`) where the RTL's is known: (edge, port, bit), or None.
pub fn first_difference(
    rtl: &str,
    gl: &str,
    outputs: &[(String, u32)],
) -> Option<(usize, String, u32)> {
    let (r, g): (Vec<&str>, Vec<&str>) = (rtl.lines().collect(), gl.lines().collect());
    if r.len() != g.len() {
        return Some((r.len().min(g.len()), "the number of edges".into(), 0));
    }
    for (edge, (a, b)) in r.iter().zip(&g).enumerate() {
        let bad = a
            .bytes()
            .zip(b.bytes())
            .position(|(x, y)| matches!(x, b'0' | b'1') && x != y)
            .or_else(|| (a.len() != b.len()).then_some(0));
        if let Some(mut pos) = bad {
            for (name, w) in outputs {
                if pos < *w as usize {
                    return Some((edge, name.clone(), w - 1 - pos as u32));
                }
                pos -= *w as usize;
            }
            return Some((edge, "?".into(), 0));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn drives_inputs_after_each_edge_and_counts_events() {
        let ports = Ports {
            inputs: vec![("clk".into(), 1), ("a".into(), 4)],
            outputs: vec![("y".into(), 4)],
        };
        let changes = vec![
            (0, "clk".to_string(), "0".to_string()),
            (1, "clk".to_string(), "1".to_string()),
            (1, "a".to_string(), "0101".to_string()),
            (2, "clk".to_string(), "0".to_string()),
        ];
        let events = [("hot", "a[0]".to_string())];
        let tb = testbench("m", &ports, &changes, &events, (true, "o.txt")).unwrap();
        assert!(tb.contains("$fdisplay(fd, \"%b\", outs);"), "{tb}");
        assert!(tb.contains("m dut(.clk(clk), .\\a[0] (a[0])"), "{tb}");
        assert!(
            tb.contains("#1000 clk = 1;\n    #10 a = 4'b0101;\n    #990 clk = 0;"),
            "{tb}"
        );
        assert!(
            tb.contains("if (^(a[0]) !== 1'bx) ev0 = ev0 + (a[0]);"),
            "{tb}"
        );
        let c = counts("cycles 7 checksum 00ab\nevent hot 3\n").unwrap();
        assert_eq!(
            (c.cycles, c.events["hot"], c.checksum.as_str()),
            (7, 3, "00ab")
        );
        assert!(counts("nothing").is_err());
        // Outputs compared where the RTL's are known: x in the RTL matches anything.
        let outs = [("y".to_string(), 2), ("z".to_string(), 1)];
        assert_eq!(first_difference("0x1\n110\n", "001\n110\n", &outs), None);
        assert_eq!(
            first_difference("0x1\n110\n", "001\n100\n", &outs),
            Some((1, "y".to_string(), 0))
        );
        assert_eq!(
            first_difference("001\n", "000\n", &outs),
            Some((0, "z".to_string(), 0))
        );
        assert!(first_difference("001\n", "", &outs).is_some());
    }
}
