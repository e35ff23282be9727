"""Gated clocks as OpenSTA 2.0.17 can price them.

usage: gated.py ACT.tcl NETLIST.v PERIOD_NS OUT_MEASURED.tcl OUT_IDLE.tcl OUT_CELLS.txt

OpenSTA 2.0.17 (Debian's) gives every pin of a clock network the clock's full activity (two
transitions a period) and ignores an activity set on it, so the branch behind a clock gate
would be priced as if it took every edge. This script defines each gate's output (`GCK`) as a
clock of its own whose period gives the toggle rate the gate-level run measured there
(2 · period / activity: a branch that toggled 0.12 times a cycle is a clock of 16.7 periods),
and a branch that never toggled as a clock of 10^9 ns. The flip-flops on that branch launch on
it, and OpenSTA divides the activity of a pin by the period of the clock that launches it: their
outputs' measured activities (per cycle of `clk`) are scaled by the same factor.

That run prices the gates and the flip-flops behind them right, but not a gate further on whose
inputs all come from gated flip-flops (OpenSTA divides its activity by a gated period): those
cells, and every cell outside the gated branches, are priced by the run with ACT.tcl as it is,
in which every pin's activity is per period of `clk` and only the gated branches are wrong.
OUT_CELLS.txt lists the cells to take from the gated run (the gates and the flip-flops behind
them); the caller adds up the two runs' per-cell reports so.

OUT_IDLE.tcl holds the idle branches of the clock-only run (no data moves, so no gate opens).
"""
import re
import sys

from netlist import instances

GATES = re.compile(r"CLKGATE(TST)?_X\d+$")


def main():
    act, netlist, period, out_measured, out_idle, out_cells = sys.argv[1:7]
    period = float(period)
    cells = list(instances(open(netlist).read()))
    gate_of_net = {pins["GCK"]: inst for cell, inst, pins in cells if GATES.match(cell)}
    # The flip-flops behind each gate.
    behind = {inst: gate_of_net[pins["CK"]] for _, inst, pins in cells if pins.get("CK") in gate_of_net}
    line_re = re.compile(r"sta::set_power_pin_activity \[get_pins \{(\S+)/(\w+)\}\] ([\d.e+-]+) ([\d.e+-]+)")
    lines = open(act).read().splitlines()
    rate = {}
    for l in lines:
        m = line_re.match(l)
        if m and m.group(1) in gate_of_net.values() and m.group(2) == "GCK":
            rate[m.group(1)] = float(m.group(3))
    missing = sorted(set(gate_of_net.values()) - set(rate))
    if missing:
        sys.exit(f"no measured activity for the clock gates {missing[:4]}")

    def clock(gate, activity, k):
        p = 2 * period / activity if activity > 0 else 1e9
        return f"create_clock -name gated{k} -period {p:.6g} [get_pins {{{gate}/GCK}}]"

    out = []
    for l in lines:
        m = line_re.match(l)
        if m and m.group(2) == "GCK" and m.group(1) in rate:
            continue
        if m and m.group(1) in behind:
            a = rate[behind[m.group(1)]]
            scale = 2 / a if a > 0 else 1.0
            l = f"sta::set_power_pin_activity [get_pins {{{m.group(1)}/{m.group(2)}}}] {float(m.group(3)) * scale:.6f} {m.group(4)}"
        out.append(l)
    gates = sorted(rate)
    out += [clock(g, rate[g], k) for k, g in enumerate(gates)]
    open(out_measured, "w").write("\n".join(out) + "\n")
    open(out_idle, "w").write("\n".join(clock(g, 0, k) for k, g in enumerate(gates)) + "\n")
    open(out_cells, "w").write("\n".join(sorted(set(behind) | set(gates))) + "\n")
    opened = sum(1 for g in gates if rate[g] > 0)
    print(f"clock gates {len(gates)} ({opened} opened in the run), flip-flops behind them {len(behind)}")


main()
