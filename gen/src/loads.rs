//! Loads across the hierarchy. ABC maps each module alone and sizes what drives its outputs,
//! and the nets it passes to its submodules, for a nominal load (four of the smallest buffer's
//! inputs). A net that crosses modules may drive far more: the engine's reset reaches every
//! submodule, a PE row's register-file read address 32 PEs through their tiers. From the
//! modules' mapped netlists this counts, in input pins, what each such net really drives
//! (through submodules that only pass it on), so the modules whose outputs drive well over the
//! nominal load can be mapped again for the load they see ([`heavy_outputs`]).

use std::collections::{BTreeMap, BTreeSet};

/// A module's mapped netlist as far as loads go: its ports, its instances (library cells and
/// submodules, each pin with the net it connects) and the nets that `assign` joins.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Netlist {
    pub inputs: BTreeSet<String>,
    pub outputs: BTreeSet<String>,
    pub instances: Vec<Instance>,
    pub aliases: Vec<(String, String)>,
}

/// One instance: its cell or module, and (pin, net) for each connected pin.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Instance {
    pub kind: String,
    pub pins: Vec<(String, String)>,
}

/// A name as Yosys writes it, without the escape and the spaces (`\a[3] ` is `a[3]`).
fn name(s: &str) -> String {
    s.chars()
        .filter(|c| !c.is_whitespace())
        .collect::<String>()
        .trim_start_matches('\\')
        .to_string()
}

/// Reads one module's netlist as Yosys's `write_verilog -noattr -noexpr` writes it after
/// `splitnets -ports` (one port a line, one pin a line, every pin one bit).
pub fn parse(text: &str) -> Netlist {
    let mut n = Netlist::default();
    let mut current: Option<Instance> = None;
    for line in text.lines() {
        let t = line.trim();
        if let Some(inst) = current.as_mut() {
            if t.starts_with(");") {
                n.instances.extend(current.take());
            } else if let Some(pin) = t.strip_prefix('.') {
                // `.pin(net),` with either side possibly an escaped name.
                if let Some(open) = pin.find('(') {
                    let net = pin[open + 1..].trim_end_matches([',', ' ']);
                    let net = net.strip_suffix(')').unwrap_or(net);
                    let net = name(net);
                    if !net.is_empty() {
                        inst.pins.push((name(&pin[..open]), net));
                    }
                }
            }
            continue;
        }
        let decl = |kw: &str| t.strip_prefix(kw).map(|r| name(r.trim_end_matches(';')));
        if let Some(p) = decl("input ") {
            n.inputs.insert(p);
        } else if let Some(p) = decl("output ") {
            n.outputs.insert(p);
        } else if let Some(a) = t.strip_prefix("assign ") {
            if let Some((l, r)) = a.trim_end_matches(';').split_once('=') {
                n.aliases.push((name(l), name(r)));
            }
        } else if line.starts_with("  ") && !line.starts_with("   ") && t.ends_with('(') {
            let mut words = t.split_whitespace();
            if let (Some(kind), Some(_)) = (words.next(), words.next()) {
                current = Some(Instance {
                    kind: kind.trim_start_matches('\\').to_string(),
                    pins: vec![],
                });
            }
        }
    }
    n
}

/// What each net of a module drives: input pins of library cells (or of anything not mapped
/// here, a memory macro), and submodules' input ports.
#[derive(Default)]
struct Sinks {
    pins: u64,
    ports: Vec<(String, String)>,
}

/// Each module's nets, joined by `assign`s: net name → its sinks, and which nets each
/// submodule instance's outputs drive (submodule, net).
struct Module {
    sinks: BTreeMap<String, Sinks>,
    driven: Vec<(String, String)>,
    inputs: BTreeSet<String>,
    outputs: BTreeSet<String>,
}

fn root(parent: &BTreeMap<String, String>, x: &str) -> String {
    let mut r = x.to_string();
    while let Some(p) = parent.get(&r) {
        if *p == r {
            break;
        }
        r = p.clone();
    }
    r
}

fn module(
    n: &Netlist,
    inputs: &BTreeMap<String, BTreeSet<String>>,
    nets: &BTreeMap<String, Netlist>,
) -> Module {
    let mut parent: BTreeMap<String, String> = BTreeMap::new();
    for (a, b) in &n.aliases {
        let (ra, rb) = (root(&parent, a), root(&parent, b));
        if ra != rb {
            parent.insert(ra, rb);
        }
    }
    let mut sinks: BTreeMap<String, Sinks> = BTreeMap::new();
    let mut driven = vec![];
    for inst in &n.instances {
        for (pin, net) in &inst.pins {
            let net = root(&parent, net);
            match (nets.get(&inst.kind), inputs.get(&inst.kind)) {
                (Some(child), _) => {
                    if child.inputs.contains(pin) {
                        let s = sinks.entry(net).or_default();
                        s.ports.push((inst.kind.clone(), pin.clone()));
                    } else if child.outputs.contains(pin) {
                        driven.push((inst.kind.clone(), net));
                    }
                }
                (None, Some(ins)) => {
                    if ins.contains(pin) {
                        sinks.entry(net).or_default().pins += 1;
                    }
                }
                // Not a library cell nor a mapped module (a memory macro): a sink per pin.
                (None, None) => sinks.entry(net).or_default().pins += 1,
            }
        }
    }
    let roots = |ports: &BTreeSet<String>| ports.iter().map(|o| root(&parent, o)).collect();
    Module {
        sinks,
        driven,
        inputs: roots(&n.inputs),
        outputs: roots(&n.outputs),
    }
}

/// The input pins a net reaches: its own sinks, and through each submodule port on it what
/// that port reaches.
fn net_load(
    modules: &BTreeMap<String, Module>,
    memo: &mut BTreeMap<(String, String), u64>,
    s: &Sinks,
) -> u64 {
    s.pins
        + s.ports
            .iter()
            .map(|(c, p)| port_load(modules, memo, c, p))
            .sum::<u64>()
}

/// The input pins a module's input port reaches (through submodules that pass it on).
fn port_load(
    modules: &BTreeMap<String, Module>,
    memo: &mut BTreeMap<(String, String), u64>,
    m: &str,
    port: &str,
) -> u64 {
    let key = (m.to_string(), port.to_string());
    if let Some(&v) = memo.get(&key) {
        return v;
    }
    let v = match modules.get(m).and_then(|md| md.sinks.get(port)) {
        Some(s) => net_load(modules, memo, s),
        None => 0,
    };
    memo.insert(key, v);
    v
}

/// For each mapped module (`nets`: name → netlist), the heaviest load in input pins that its
/// outputs, or the nets it passes to its submodules, drive in the design, where that is over
/// `limit` pins. `inputs`: each library cell's input pins. `nominal`: the load a module's
/// output is given where the netlist does not say (the top's outputs).
pub fn heavy_outputs(
    nets: &BTreeMap<String, Netlist>,
    inputs: &BTreeMap<String, BTreeSet<String>>,
    nominal: u64,
    limit: u64,
) -> BTreeMap<String, u64> {
    let modules: BTreeMap<String, Module> = nets
        .iter()
        .map(|(k, n)| (k.clone(), module(n, inputs, nets)))
        .collect();
    let mut memo = BTreeMap::new();
    let mut heaviest: BTreeMap<String, u64> = BTreeMap::new();
    for (name, md) in &modules {
        // The nets this module drives into its submodules, as ABC sees them (an input port
        // passed on is its driver's load, in the module above).
        for (net, s) in &md.sinks {
            if md.inputs.contains(net) {
                continue;
            }
            let load: u64 = s
                .ports
                .iter()
                .map(|(c, p)| port_load(&modules, &mut memo, c, p))
                .sum();
            if load > 0 {
                let e = heaviest.entry(name.clone()).or_default();
                *e = (*e).max(load);
            }
        }
        // Each submodule's outputs: what they drive here (this module's pins and submodules,
        // and the nominal load where the net leaves it).
        for (child, net) in &md.driven {
            let here = md
                .sinks
                .get(net)
                .map_or(0, |s| net_load(&modules, &mut memo, s));
            let load = here + if md.outputs.contains(net) { nominal } else { 0 };
            let e = heaviest.entry(child.clone()).or_default();
            *e = (*e).max(load);
        }
    }
    heaviest.retain(|_, v| *v > limit);
    heaviest
}

#[cfg(test)]
mod tests {
    use super::*;

    const TOP: &str = "module top(clk, rst, \\y[0] );
  input clk;
  input rst;
  output \\y[0] ;
  wire _1_;
  NAND2 _2_ (
    .A(rst),
    .B(clk),
    .Y(_1_)
  );
  mid u_mid (
    .r(_1_),
    .\\o[0] (\\y[0] )
  );
endmodule
";
    const MID: &str = "module mid(r, \\o[0] );
  input r;
  output \\o[0] ;
  leaf u_a (
    .r(r),
    .o(\\o[0] )
  );
  leaf u_b (
    .r(r)
  );
  INV _3_ (
    .A(r),
    .Y(_4_)
  );
endmodule
";
    const LEAF: &str = "module leaf(r, o);
  input r;
  output o;
  wire w;
  assign w = r;
  INV _1_ (
    .A(w),
    .Y(o)
  );
  INV _2_ (
    .A(r),
    .Y(o)
  );
  INV _3_ (
    .A(r)
  );
endmodule
";

    #[test]
    fn netlists_parse_with_escaped_names() {
        let n = parse(MID);
        assert_eq!(n.inputs, BTreeSet::from(["r".to_string()]));
        assert_eq!(n.outputs, BTreeSet::from(["o[0]".to_string()]));
        assert_eq!(n.instances.len(), 3);
        assert_eq!(n.instances[0].kind, "leaf");
        assert_eq!(
            n.instances[0].pins,
            vec![("r".into(), "r".into()), ("o".into(), "o[0]".into())]
        );
        assert_eq!(parse(LEAF).aliases, vec![("w".into(), "r".into())]);
    }

    #[test]
    fn loads_pass_through_submodules() {
        let nets: BTreeMap<String, Netlist> = [("top", TOP), ("mid", MID), ("leaf", LEAF)]
            .iter()
            .map(|(k, t)| (k.to_string(), parse(t)))
            .collect();
        let lib: BTreeMap<String, BTreeSet<String>> = [
            ("INV", BTreeSet::from(["A".to_string()])),
            ("NAND2", BTreeSet::from(["A".to_string(), "B".to_string()])),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
        // leaf's r: three INV inputs (one through the assign); mid's r: two leaves and an INV
        // (7), which top's NAND drives: 7 pins. mid only passes r on (its driver is top's). A
        // leaf's output drives mid's output, and mid's the top's (nominal: 4).
        let all = heavy_outputs(&nets, &lib, 4, 0);
        assert_eq!(all.get("top"), Some(&7));
        assert_eq!(all.get("mid"), Some(&4));
        assert_eq!(all.get("leaf"), Some(&4));
        let heavy = heavy_outputs(&nets, &lib, 4, 6);
        assert_eq!(heavy, BTreeMap::from([("top".to_string(), 7)]));
    }
}
