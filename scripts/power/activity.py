"""Per-net toggle rates of a gate-level run, as OpenSTA pin activities.

usage: activity.py GL.vcd NETLIST.v LIBERTY OUT.tcl

Counts each net's transitions (x excluded) in the testbench's `dut` scope of GL.vcd, divides
by the rising clock edges, and writes one OpenSTA command per net: the activity of its
driving cell's output pin, or of the input port. OpenSTA 2019's `set_power_activity -pins`
calls a procedure it does not define (get_pins_error), so the commands call
sta::set_power_pin_activity, which the procedure would have called, directly.
"""
import collections
import re
import sys

from netlist import instances, liberty_pins
from vcd import scope_vars


def main():
    vcd, netlist, liberty, out = sys.argv[1:5]
    f = open(vcd)
    ids = scope_vars(f, "dut")
    clk = next(k for k, v in ids.items() if any(n == "clk" for n, _ in v))
    count, last, cycles = collections.Counter(), {}, 0
    for line in f:
        if not line.strip() or line[0] in "#$":
            continue
        if line[0] == "b":
            val, k = line[1:].split()
        else:
            val, k = line[0], line[1:].strip()
        if k not in ids:
            continue
        if k == clk and val == "1":
            cycles += 1
        p = last.get(k)
        if p is not None and p != val and "x" not in p and "x" not in val:
            count[k] += 1
        last[k] = val
    outs = liberty_pins(liberty, "output")
    text = open(netlist).read()
    driver = {}
    for cell, inst, pins in instances(text):
        for pin, net in pins.items():
            if pin in outs.get(cell, ()):
                driver[net] = f"{inst}/{pin}"
    ports = set(re.search(r"module\s+\S+\s*\((.*?)\);", text, re.S).group(1)
                .replace("\\", "").replace(" ", "").replace("\n", "").split(","))
    cmds, pins, toggles, unannotated = [], 0, 0, []
    for k, names in ids.items():
        for n, w in names:
            key = n.replace(" ", "").lstrip("\\")
            if key == "clk":
                continue
            if w != 1:
                # A vector's change would count as one transition of many bits.
                sys.exit(f"{vcd}: net {n} has {w} bits: map with splitnets, one bit a net")
            act = count[k] / max(cycles, 1)
            toggles += count[k]
            if key in driver:
                pins += 1
                cmds.append(f"sta::set_power_pin_activity [get_pins {{{driver[key]}}}] {act:.6f} 0.5")
            elif key in ports:
                cmds.append(f"set_power_activity -input_ports [get_ports {{{key}}}] "
                            f"-activity {act:.6f} -duty 0.5")
            else:
                unannotated.append(key)
    open(out, "w").write("\n".join(cmds) + "\n")
    print(f"cycles {cycles} driven nets {pins} toggles {toggles} "
          f"({toggles / max(cycles, 1):.0f} a cycle); nets without a driver or port "
          f"(left to OpenSTA): {len(unannotated)} {unannotated[:5]}")


main()
