"""Replays one block's ports from an RTL waveform into a testbench for that block.

usage: replay.py RTL.vcd SCOPE OUT.v MANIFEST.json MODULE EVENT [gate]

SCOPE is the block instance's scope name in the waveform (e.g. pe0); MODULE its module, whose
ports MANIFEST.json (the generated folder's) lists. The testbench drives the block's inputs as
the waveform has them, each change 10 ps after the clock edge that caused it, keeps a checksum
of all its outputs at every rising edge, and prints the cycles, the checksum and the events:
the rising edges at which the Verilog expression EVENT over the inputs held (for the PE, a
MAC, a run's continuation `MacFeed` = 6 included:
`en && (op == 1 || op == 2 || op == 4 || op == 5 || op == 6)`; for a buffer, a write: `we`). With
`gate`, bus ports are connected bit by bit (a netlist after `splitnets -ports`), and the run
dumps the block's nets to gl.vcd when compiled with -DDUMP.
"""
import json
import os
import re
import sys

import vcd as vcd_header


def ports(manifest, module):
    """The module's (inputs, outputs) as {name: width}, clk (and rst) among the inputs."""
    entry = next((m for m in json.load(open(manifest))["modules"] if m["name"] == module), None)
    if entry is None:
        sys.exit(f"{manifest}: no module {module}")
    # clk and rst are not among the listed ports: the module's text says whether it has them.
    text = open(os.path.join(os.path.dirname(manifest), entry["file"])).read()
    ins = {p: 1 for p in ("clk", "rst") if re.search(rf"input\s+wire\s+{p}\b", text)}
    ins.update({p["name"]: p["width"] for p in entry["ports"] if p["dir"] == "input"})
    outs = {p["name"]: p["width"] for p in entry["ports"] if p["dir"] == "output"}
    return ins, outs


def read(vcd, scope, inputs):
    """The scope's input-port changes: [(time, name, value)]."""
    f = open(vcd)
    ids = {k: n.split("[")[0] for k, v in vcd_header.scope_vars(f, scope).items()
           for n, _ in v if n.split("[")[0] in inputs}
    missing = set(inputs) - set(ids.values())
    if missing:
        sys.exit(f"{vcd}: scope {scope} has no port {sorted(missing)}")
    events, time = [], 0
    for line in f:
        if not line.strip():
            continue
        if line[0] == "#":
            time = int(line[1:])
        elif line[0] == "b":
            v, k = line[1:].split()
            if k in ids:
                events.append((time, ids[k], int(v.replace("x", "0").replace("z", "0"), 2)))
        elif line[0] in "01xz" and line[1:].strip() in ids:
            events.append((time, ids[line[1:].strip()], 1 if line[0] == "1" else 0))
    return events


def main():
    vcd, scope, out, manifest, module, event = sys.argv[1:7]
    gate = len(sys.argv) > 7 and sys.argv[7] == "gate"
    inputs, outputs = ports(manifest, module)
    events = read(vcd, scope, inputs)
    by_t = {}
    for t, n, v in events:
        by_t.setdefault(t, []).append((n, v))
    conns = []
    for p, w in list(inputs.items()) + list(outputs.items()):
        if gate and w > 1:
            conns += [f".\\{p}[{k}] ({p}[{k}])" for k in range(w)]
        else:
            conns.append(f".{p}({p})")
    outs = ", ".join(outputs)
    width = sum(outputs.values())
    with open(out, "w") as f:
        f.write("`timescale 1ps/1ps\nmodule tb;\n")
        for p, w in inputs.items():
            f.write(f"  reg [{w - 1}:0] {p} = 0;\n")
        for p, w in outputs.items():
            f.write(f"  wire [{w - 1}:0] {p};\n")
        f.write(f"  {module} dut(" + ", ".join(conns) + ");\n")
        # The outputs folded to 64 bits, so the checksum takes any width.
        f.write(f"  wire [{width - 1}:0] outs = {{{outs}}};\n  reg [63:0] fold; integer i;\n")
        f.write("  integer cycles = 0, events = 0; reg [63:0] sum = 0;\n")
        f.write("  always @(posedge clk) begin\n    cycles = cycles + 1;\n")
        live = "!rst && " if "rst" in inputs else ""
        f.write(f"    if ({live}({event})) events = events + 1;\n")
        f.write(f"    fold = 0;\n    for (i = 0; i < {width}; i = i + 1) fold[i % 64] = "
                "fold[i % 64] ^ outs[i];\n")
        f.write("    if (^outs !== 1'bx) sum = sum * 31 + fold;\n  end\n")
        f.write("  initial begin\n`ifdef DUMP\n    $dumpfile(\"gl.vcd\"); $dumpvars(0, dut);\n"
                "`endif\n")
        last = 0
        # The waveform's time unit is one clock edge: 1 ns here, inputs 10 ps after the edge.
        for t in sorted(by_t):
            ps = t * 1000
            clk = [v for n, v in by_t[t] if n == "clk"]
            rest = [(n, v) for n, v in by_t[t] if n != "clk"]
            if clk:
                f.write(f"    #{ps - last} clk = {clk[-1]};\n")
                last = ps
            if rest:
                d = ps + (10 if clk else 0)
                f.write(f"    #{d - last} " + " ".join(f"{n} = {v};" for n, v in rest) + "\n")
                last = d
        f.write("    #100 $display(\"cycles %0d events %0d checksum %h\", cycles, events, sum);\n"
                "    $finish;\n  end\nendmodule\n")


main()
