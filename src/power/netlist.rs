//! The cell instances of a flat Yosys netlist (`write_verilog -noattr`), for the power flow.

use std::collections::BTreeMap;

/// One cell instance: its cell, its name and its pins' nets, names without Verilog's escaping
/// backslash and spaces (`u_mac.u_add._123_`, `a[3]`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Instance {
    pub cell: String,
    pub name: String,
    pub pins: BTreeMap<String, String>,
}

/// A name as the netlist writes it, unescaped: the backslash and the spaces gone.
pub fn clean(name: &str) -> String {
    name.split_whitespace()
        .collect::<String>()
        .trim_start_matches('\\')
        .to_string()
}

/// Every cell instance of the netlist `text`: each statement `CELL NAME ( .PIN(net), … );`.
pub fn instances(text: &str) -> Vec<Instance> {
    let mut out = vec![];
    for stmt in text.split(';') {
        let s = stmt.trim();
        let Some(open) = s.find('(') else {
            continue;
        };
        let head: Vec<&str> = s[..open].split_whitespace().collect();
        let [cell, name] = head[..] else {
            continue;
        };
        if matches!(
            cell,
            "module" | "wire" | "input" | "output" | "inout" | "assign" | "reg"
        ) {
            continue;
        }
        let mut pins = BTreeMap::new();
        let mut rest = &s[open + 1..];
        while let Some(dot) = rest.find('.') {
            let after = &rest[dot + 1..];
            let Some(lp) = after.find('(') else {
                break;
            };
            let pin = after[..lp].trim();
            let Some(rp) = after[lp + 1..].find(')') else {
                break;
            };
            let net = &after[lp + 1..lp + 1 + rp];
            if !pin.is_empty() && pin.chars().all(|c| c.is_alphanumeric() || c == '_') {
                pins.insert(pin.to_string(), clean(net));
            }
            rest = &after[lp + 1 + rp + 1..];
        }
        if !pins.is_empty() {
            out.push(Instance {
                cell: cell.to_string(),
                name: clean(name),
                pins,
            });
        }
    }
    out
}

/// The input ports of the netlist's (first) module, unescaped.
pub fn inputs(text: &str) -> Vec<String> {
    let body = text.split("endmodule").next().unwrap_or("");
    body.split(';')
        .filter_map(|s| s.trim().strip_prefix("input "))
        .flat_map(|names| names.split(',').map(clean))
        .collect()
}

/// The port names of the netlist's (first) module, unescaped.
pub fn ports(text: &str) -> Vec<String> {
    let Some(m) = text.find("module ") else {
        return vec![];
    };
    let body = &text[m..];
    let (Some(open), Some(close)) = (body.find('('), body.find(");")) else {
        return vec![];
    };
    body[open + 1..close].split(',').map(clean).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_cells_pins_and_escaped_names() {
        let net = "module pe(clk, \\a[0] , y);\n  input clk;\n  wire _1_;\n  \
                   NAND2_X1 _5_ (\n    .A1(\\a[0] ),\n    .A2(_1_),\n    .ZN(y)\n  );\n  \
                   DFF_X1 \\u_mac.q_reg[3]  (\n    .CK(clk),\n    .D(_1_),\n    .Q(),\n    \
                   .QN(\\u_mac.n [2] )\n  );\n  assign _1_ = clk;\nendmodule\n";
        let cells = instances(net);
        assert_eq!(cells.len(), 2, "{cells:?}");
        assert_eq!(cells[0].cell, "NAND2_X1");
        assert_eq!(cells[0].pins["A1"], "a[0]");
        assert_eq!(cells[1].name, "u_mac.q_reg[3]");
        assert_eq!(cells[1].pins["QN"], "u_mac.n[2]");
        assert_eq!(cells[1].pins["Q"], "");
        assert_eq!(ports(net), ["clk", "a[0]", "y"]);
    }
}
