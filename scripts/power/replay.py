"""Replays one PE's ports from an RTL waveform into a testbench for that PE.

usage: replay.py RTL.vcd SCOPE OUT.v MODULE [gate]

SCOPE is the PE instance's scope name in the waveform (e.g. pe0). The testbench drives the
PE's inputs as the waveform has them, each change 10 ps after the clock edge that caused it,
keeps a checksum of its outputs (rd_data, rf_acc_read, rf_write) at every rising edge, and
prints the cycles, the checksum and the operations the PE was given (MACs: `en` high with op
Mac, MacClear, MacZero or MacScale). With `gate`, the PE's bus ports are connected bit by bit
(a netlist after `splitnets -ports`), and the run dumps the PE's nets to gl.vcd when compiled
with -DDUMP.
"""
import sys

import vcd as vcd_header

INPUTS = {"a": 16, "b": 16, "op": 3, "en": 1, "addr": 6, "ld_data": 32, "shift": 8,
          "rd_addr": 6, "rst": 1, "clk": 1}
OUTPUTS = {"rd_data": 32, "rf_acc_read": 1, "rf_write": 1}
MAC_OPS = (1, 2, 4, 5)


def read(vcd, scope):
    """The scope's input-port changes: [(time, name, value)]."""
    f = open(vcd)
    ids = {k: n.split("[")[0] for k, v in vcd_header.scope_vars(f, scope).items()
           for n, _ in v if n.split("[")[0] in INPUTS}
    missing = set(INPUTS) - set(ids.values())
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
    vcd, scope, out, module = sys.argv[1:5]
    gate = len(sys.argv) > 5 and sys.argv[5] == "gate"
    events = read(vcd, scope)
    by_t = {}
    for t, n, v in events:
        by_t.setdefault(t, []).append((n, v))
    conns = []
    for p, w in list(INPUTS.items()) + list(OUTPUTS.items()):
        if gate and w > 1:
            conns += [f".\\{p}[{k}] ({p}[{k}])" for k in range(w)]
        else:
            conns.append(f".{p}({p})")
    with open(out, "w") as f:
        f.write("`timescale 1ps/1ps\nmodule tb;\n")
        for p, w in INPUTS.items():
            f.write(f"  reg [{w - 1}:0] {p} = 0;\n")
        f.write("  wire [31:0] rd_data; wire rf_acc_read, rf_write;\n")
        f.write(f"  {module} dut(" + ", ".join(conns) + ");\n")
        f.write("  integer cycles = 0, macs = 0; reg [63:0] sum = 0;\n")
        f.write("  always @(posedge clk) begin\n    cycles = cycles + 1;\n")
        f.write("    if (en && !rst && (" + " || ".join(f"op == {o}" for o in MAC_OPS)
                + ")) macs = macs + 1;\n")
        f.write("    if (^{rd_data, rf_acc_read, rf_write} !== 1'bx)\n"
                "      sum = sum * 31 + {rd_data, rf_acc_read, rf_write};\n  end\n")
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
        f.write("    #100 $display(\"cycles %0d macs %0d checksum %h\", cycles, macs, sum);\n"
                "    $finish;\n  end\nendmodule\n")


main()
