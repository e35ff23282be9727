"""The cell instances of a flat Yosys netlist, and its cells' pins in the liberty file, for the
power cross-check's scripts."""
import re


def instances(text):
    """(cell, instance, {pin: net}) of every cell instance in the netlist `text`; names
    without Verilog's escaping backslash and spaces (`u_rf_cg3.gclk`)."""
    for m in re.finditer(r"\n\s+(\w+)\s+(\S+)\s*\((.*?)\);", text, re.S):
        cell, inst, body = m.groups()
        pins = {p.group(1): p.group(2).replace(" ", "").lstrip("\\")
                for p in re.finditer(r"\.(\w+)\(([^()]*)\)", body)}
        yield cell, inst.lstrip("\\"), pins


def liberty_pins(liberty, direction):
    """Each cell's pins of `direction` (input or output), from the liberty file."""
    pins, cell, pin = {}, None, None
    for line in open(liberty):
        m = re.match(r"\s*cell\s*\(\s*\"?(\w+)\"?\s*\)", line)
        if m:
            cell = m.group(1)
        m = re.match(r"\s*pin\s*\(\s*\"?(\w+)\"?\s*\)", line)
        if m:
            pin = m.group(1)
        if cell and pin and re.match(rf"\s*direction\s*:\s*{direction}", line):
            pins.setdefault(cell, set()).add(pin)
    return pins
