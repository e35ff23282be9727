"""The cell instances of a flat Yosys netlist, for the power cross-check's scripts."""
import re


def instances(text):
    """(cell, instance, {pin: net}) of every cell instance in the netlist `text`; names
    without Verilog's escaping backslash and spaces (`u_rf_cg3.gclk`)."""
    for m in re.finditer(r"\n\s+(\w+)\s+(\S+)\s*\((.*?)\);", text, re.S):
        cell, inst, body = m.groups()
        pins = {p.group(1): p.group(2).replace(" ", "").lstrip("\\")
                for p in re.finditer(r"\.(\w+)\(([^()]*)\)", body)}
        yield cell, inst.lstrip("\\"), pins
