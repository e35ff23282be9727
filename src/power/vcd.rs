//! What the power flow reads of a VCD file: the variables of one scope, the changes of some
//! of them, and every variable's transitions.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::Path;

use anyhow::{bail, Context, Result};

/// A variable of a scope: its name (with its bit range when it has one, `a[15:0]`, `\a[0]`,
/// spaces removed) and width.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Var {
    pub name: String,
    pub width: u32,
}

impl Var {
    /// The name without its bit range and Verilog's escaping backslash.
    pub fn base(&self) -> &str {
        self.name
            .split('[')
            .next()
            .unwrap_or("")
            .trim_start_matches('\\')
    }
}

type Lines = std::io::Lines<BufReader<std::fs::File>>;

fn open(path: &Path) -> Result<Lines> {
    let f = std::fs::File::open(path)
        .with_context(|| format!("cannot read the waveform {}", path.display()))?;
    Ok(BufReader::new(f).lines())
}

/// Reads the header (up to `$enddefinitions`) and returns the variables declared directly in
/// the first scope named `scope`, by identifier code.
fn scope_vars(lines: &mut Lines, path: &Path, scope: &str) -> Result<BTreeMap<String, Vec<Var>>> {
    let mut ids: BTreeMap<String, Vec<Var>> = BTreeMap::new();
    let (mut level, mut at): (i32, Option<i32>) = (0, None);
    for line in lines.by_ref() {
        let line = line?;
        let t: Vec<&str> = line.split_whitespace().collect();
        match t.first() {
            Some(&"$scope") => {
                level += 1;
                if t.get(2) == Some(&scope) && at.is_none() {
                    at = Some(level);
                }
            }
            Some(&"$upscope") => {
                if at == Some(level) {
                    at = Some(-1); // closed: a later scope of the same name is another one
                }
                level -= 1;
            }
            Some(&"$var") if at == Some(level) && t.len() >= 6 => {
                ids.entry(t[3].to_string()).or_default().push(Var {
                    name: t[4..t.len() - 1].concat(),
                    width: t[2]
                        .parse()
                        .with_context(|| format!("{}: {line}", path.display()))?,
                });
            }
            Some(&"$enddefinitions") => {
                if at.is_none() {
                    bail!("{} has no scope `{scope}`", path.display());
                }
                return Ok(ids);
            }
            _ => {}
        }
    }
    bail!("{} has no $enddefinitions", path.display())
}

/// One value change: (identifier code, value as binary digits, most significant first).
fn change(line: &str) -> Option<(&str, &str)> {
    match line.as_bytes().first()? {
        b'b' | b'B' => {
            let (v, id) = line[1..].split_once(' ')?;
            Some((id.trim(), v))
        }
        b'0' | b'1' | b'x' | b'X' | b'z' | b'Z' => Some((line[1..].trim(), &line[..1])),
        _ => None,
    }
}

/// The changes of the variables of `scope` whose base names are in `names`, in time order:
/// (time, base name, value as binary digits with x and z read as 0). Every name must be there.
pub fn changes(path: &Path, scope: &str, names: &[&str]) -> Result<Vec<(u64, String, String)>> {
    let mut lines = open(path)?;
    let vars = scope_vars(&mut lines, path, scope)?;
    let ids: BTreeMap<String, String> = vars
        .iter()
        .flat_map(|(id, vs)| vs.iter().map(move |v| (id, v)))
        .filter(|(_, v)| names.contains(&v.base()))
        .map(|(id, v)| (id.clone(), v.base().to_string()))
        .collect();
    let missing: Vec<&&str> = names
        .iter()
        .filter(|n| !ids.values().any(|v| v == *n))
        .collect();
    if !missing.is_empty() {
        bail!("{}: scope {scope} has no port {missing:?}", path.display());
    }
    let mut out = vec![];
    let mut time = 0u64;
    for line in lines {
        let line = line?;
        if let Some(t) = line.strip_prefix('#') {
            time = t.trim().parse().context("a VCD time")?;
        } else if let Some((id, v)) = change(&line) {
            if let Some(name) = ids.get(id) {
                let v: String = v
                    .chars()
                    .map(|c| if c == '1' { '1' } else { '0' })
                    .collect();
                out.push((time, name.clone(), v));
            }
        }
    }
    Ok(out)
}

/// Every one-bit variable of `scope` with its transitions (x and z excluded), and the rising
/// edges of its `clk`: a gate-level run's activity. A wider variable is refused (a netlist's
/// nets are split one bit a net).
pub struct Toggles {
    pub cycles: u64,
    /// Name (escaping removed) → transitions.
    pub counts: BTreeMap<String, u64>,
}

pub fn toggles(path: &Path, scope: &str) -> Result<Toggles> {
    let mut lines = open(path)?;
    let vars = scope_vars(&mut lines, path, scope)?;
    for v in vars.values().flatten() {
        if v.width != 1 {
            bail!(
                "{}: net {} has {} bits: the netlist must be split one bit a net",
                path.display(),
                v.name,
                v.width
            );
        }
    }
    let clk = vars
        .iter()
        .find(|(_, vs)| vs.iter().any(|v| v.name == "clk"))
        .map(|(id, _)| id.clone())
        .with_context(|| format!("{}: scope {scope} has no clk", path.display()))?;
    let mut count: BTreeMap<&str, u64> = BTreeMap::new();
    let mut last: BTreeMap<&str, char> = BTreeMap::new();
    let mut cycles = 0;
    for line in lines {
        let line = line?;
        let Some((id, v)) = change(&line) else {
            continue;
        };
        let Some((id, _)) = vars.get_key_value(id) else {
            continue;
        };
        let v = v.chars().next().unwrap_or('x').to_ascii_lowercase();
        if *id == clk && v == '1' {
            cycles += 1;
        }
        if let Some(&p) = last.get(id.as_str()) {
            if p != v && matches!(p, '0' | '1') && matches!(v, '0' | '1') {
                *count.entry(id).or_default() += 1;
            }
        }
        last.insert(id, v);
    }
    let mut counts = BTreeMap::new();
    for (id, vs) in &vars {
        for v in vs {
            let name = v.name.trim_start_matches('\\').to_string();
            counts.insert(name, count.get(id.as_str()).copied().unwrap_or(0));
        }
    }
    Ok(Toggles { cycles, counts })
}

#[cfg(test)]
mod tests {
    use super::*;

    const VCD: &str = "$timescale 1ns $end\n$scope module top $end\n$var wire 1 ! clk $end\n\
        $scope module pe0 $end\n$var wire 1 ! clk $end\n$var wire 4 \" a [3:0] $end\n\
        $var wire 1 # \\y $end\n$upscope $end\n$upscope $end\n$enddefinitions $end\n\
        #0\n$dumpvars\n0!\nbx0x1 \"\nx#\n$end\n#1\n1!\nb0101 \"\n0#\n#2\n0!\n1#\n#3\n1!\n0#\n";

    fn file(dir: &gen::tools::ScratchDir) -> std::path::PathBuf {
        let p = dir.path().join("w.vcd");
        std::fs::write(&p, VCD).unwrap();
        p
    }

    #[test]
    fn changes_of_a_scope_and_toggles_of_its_nets() {
        let dir = gen::tools::ScratchDir::new("vcd-test").unwrap();
        let p = file(&dir);
        let c = changes(&p, "pe0", &["clk", "a"]).unwrap();
        assert_eq!(
            c,
            [
                (0, "clk".to_string(), "0".to_string()),
                (0, "a".to_string(), "0001".to_string()),
                (1, "clk".to_string(), "1".to_string()),
                (1, "a".to_string(), "0101".to_string()),
                (2, "clk".to_string(), "0".to_string()),
                (3, "clk".to_string(), "1".to_string()),
            ]
        );
        let e = changes(&p, "pe0", &["b"]).unwrap_err().to_string();
        assert!(e.contains("no port [\"b\"]"), "{e}");
        assert!(changes(&p, "pe9", &["a"]).is_err());
        // One-bit nets only; y goes x, 0, 1, 0: two transitions (x excluded), two rising clock
        // edges.
        assert!(toggles(&p, "pe0").is_err(), "a is 4 bits");
        let one_bit = VCD.replace("$var wire 4 \" a [3:0] $end\n", "");
        std::fs::write(&p, one_bit).unwrap();
        let t = toggles(&p, "pe0").unwrap();
        assert_eq!((t.cycles, t.counts["y"], t.counts["clk"]), (2, 2, 3));
    }
}
