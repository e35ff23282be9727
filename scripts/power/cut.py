"""Measured activities as OpenSTA 2019 keeps them (the reasons: src/power/sta.rs).

usage: cut.py NETLIST.v TOP LIBERTY ACT.tcl LINES.tcl OUT.tcl OUT_NET.v

OpenSTA 2019 propagates activities through the logic the first time it computes power, and
that pass replaces every pin's activity but the input ports'. So, as `regflash power` does:
OUT_NET.v is the netlist with a wrapper (`regflash_power_top`) that reaches each of TOP's
inputs through a flip-flop of no power (`RF_CUT`, in cut.lib); OUT.tcl sets LINES.tcl's
activities on the block's pins (instance `u_blk`), the cut flip-flops' outputs and every load
pin (its net's activity as ACT.tcl measured it; clock pins keep the clock's), has OpenSTA
compute power once, and sets them all again, so the report that follows prices what the run
measured.
"""
import re
import sys

from netlist import instances, liberty_pins

PIN = re.compile(r"sta::set_power_pin_activity \[get_pins \{(\S+)/(\w+)\}\] (\S+) (\S+)")
PORT = re.compile(r"set_power_activity -input_ports \[get_ports \{(\S+)\}\] -activity (\S+) -duty (\S+)")


def esc(name):
    return f"\\{name} "


def main():
    netlist, top, liberty, act, lines_in, out, out_net = sys.argv[1:8]
    text = open(netlist).read()
    cells = list(instances(text))
    # Each net's measured activity, by its driver pin or port.
    pin_net = {(inst, p): n for _, inst, pins in cells for p, n in pins.items()}
    net_act = {}
    for l in open(act):
        m = PIN.match(l)
        if m and (m.group(1), m.group(2)) in pin_net:
            net_act[pin_net[(m.group(1), m.group(2))]] = m.group(3)
        m = PORT.match(l)
        if m:
            net_act[m.group(1)] = m.group(2)
    clocks = {"clk"} | {pins["GCK"] for cell, _, pins in cells if cell.startswith("CLKGATE")}
    header = re.search(r"module\s+\S+\s*\((.*?)\);", text, re.S).group(1)
    ports = [p.replace(" ", "").replace("\n", "").lstrip("\\") for p in header.split(",")]
    body = text.split("endmodule")[0]
    inputs = {n.strip().replace(" ", "").lstrip("\\")
              for decl in re.findall(r"\binput\s+([^;]*);", body) for n in decl.split(",")}
    cmds = []
    for l in open(lines_in).read().splitlines():
        cmds.append(l.replace("[get_pins {", "[get_pins {u_blk/"))
        m = PORT.match(l)
        if m and m.group(1) in inputs and m.group(1) != "clk":
            cmds.append(f"sta::set_power_pin_activity [get_pins {{regflash_cut.{m.group(1)}/Q}}] "
                        f"{m.group(2)} {m.group(3)}")
    ins = liberty_pins(liberty, "input")
    for cell, inst, pins in cells:
        for p, n in pins.items():
            if p in ins.get(cell, ()) and n not in clocks and n in net_act:
                cmds.append(f"sta::set_power_pin_activity [get_pins {{u_blk/{inst}/{p}}}] {net_act[n]} 0.5")
    pins_only = [c for c in cmds if c.startswith("sta::set_power_pin_activity")]
    open(out, "w").write("\n".join(cmds + ["report_power > /dev/null"] + pins_only) + "\n")
    w = [f"\nmodule regflash_power_top({', '.join(esc(p) for p in ports)});"]
    conns = []
    for p in ports:
        w.append(f"  {'input' if p in inputs else 'output'} {esc(p)};")
        if p in inputs and p != "clk":
            q = esc(f"regflash_cut_q.{p}")
            w.append(f"  wire {q};")
            w.append(f"  RF_CUT {esc('regflash_cut.' + p)} (.CK(clk), .D({esc(p)}), .Q({q}));")
            conns.append(f".{esc(p)}({q})")
        else:
            conns.append(f".{esc(p)}({esc(p)})")
    w.append(f"  {top} u_blk ({', '.join(conns)});\nendmodule\n")
    open(out_net, "w").write(text + "\n".join(w))


main()
