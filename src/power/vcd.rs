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

type Reader = BufReader<std::fs::File>;

fn open(path: &Path) -> Result<Reader> {
    let f = std::fs::File::open(path)
        .with_context(|| format!("cannot read the waveform {}", path.display()))?;
    Ok(BufReader::with_capacity(1 << 20, f))
}

/// The next line into `line` (its end trimmed), or false at the end.
fn next_line(r: &mut Reader, line: &mut String) -> Result<bool> {
    line.clear();
    if r.read_line(line)? == 0 {
        return Ok(false);
    }
    let n = line.trim_end().len();
    line.truncate(n);
    Ok(true)
}

/// Reads the header (up to `$enddefinitions`) and returns the variables declared directly in
/// the first scope named `scope`, by identifier code.
fn scope_vars(r: &mut Reader, path: &Path, scope: &str) -> Result<BTreeMap<String, Vec<Var>>> {
    let mut ids: BTreeMap<String, Vec<Var>> = BTreeMap::new();
    let (mut level, mut at): (i32, Option<i32>) = (0, None);
    let mut line = String::new();
    while next_line(r, &mut line)? {
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
    let mut reader = open(path)?;
    let vars = scope_vars(&mut reader, path, scope)?;
    // Several ports may share one identifier (a signal the simulator aliases).
    let mut ids: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (id, vs) in &vars {
        for v in vs.iter().filter(|v| names.contains(&v.base())) {
            ids.entry(id.clone())
                .or_default()
                .push(v.base().to_string());
        }
    }
    let missing: Vec<&&str> = names
        .iter()
        .filter(|n| !ids.values().flatten().any(|v| v == *n))
        .collect();
    if !missing.is_empty() {
        bail!("{}: scope {scope} has no port {missing:?}", path.display());
    }
    let mut out = vec![];
    let mut time = 0u64;
    let mut line = String::new();
    while next_line(&mut reader, &mut line)? {
        if let Some(t) = line.strip_prefix('#') {
            time = t.trim().parse().context("a VCD time")?;
        } else if let Some((id, v)) = change(&line) {
            if let Some(aliases) = ids.get(id) {
                let v: String = v
                    .chars()
                    .map(|c| if c == '1' { '1' } else { '0' })
                    .collect();
                for name in aliases {
                    out.push((time, name.clone(), v.clone()));
                }
            }
        }
    }
    Ok(out)
}

/// Every one-bit variable of `scope` with its transitions (x and z excluded), and the rising
/// edges of its `clk`: a gate-level run's activity. A wider variable is refused (a netlist's
/// nets are split one bit a net).
#[derive(Debug)]
pub struct Toggles {
    pub cycles: u64,
    /// Name (escaping removed) → transitions.
    pub counts: BTreeMap<String, u64>,
}

pub fn toggles(path: &Path, scope: &str) -> Result<Toggles> {
    let mut reader = open(path)?;
    let vars = scope_vars(&mut reader, path, scope)?;
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
    // A gate-level run's dump is a gigabyte of one-bit changes: each identifier an index,
    // counted in place.
    let index: std::collections::HashMap<&str, usize> = vars
        .keys()
        .enumerate()
        .map(|(k, id)| (id.as_str(), k))
        .collect();
    let clk = vars
        .iter()
        .position(|(_, vs)| vs.iter().any(|v| v.name == "clk"))
        .with_context(|| format!("{}: scope {scope} has no clk", path.display()))?;
    let mut count = vec![0u64; vars.len()];
    let mut last = vec![b'x'; vars.len()];
    let mut cycles = 0;
    let mut line = String::new();
    while next_line(&mut reader, &mut line)? {
        let Some((id, v)) = change(&line) else {
            continue;
        };
        let Some(&k) = index.get(id) else {
            continue;
        };
        let v = v
            .as_bytes()
            .first()
            .copied()
            .unwrap_or(b'x')
            .to_ascii_lowercase();
        if k == clk && v == b'1' {
            cycles += 1;
        }
        let p = last[k];
        if p != v && matches!(p, b'0' | b'1') && matches!(v, b'0' | b'1') {
            count[k] += 1;
        }
        last[k] = v;
    }
    let mut counts = BTreeMap::new();
    for (k, vs) in vars.values().enumerate() {
        for v in vs {
            counts.insert(v.name.trim_start_matches('\\').to_string(), count[k]);
        }
    }
    Ok(Toggles { cycles, counts })
}

#[cfg(test)]
mod tests {
    use super::*;

    const VCD: &str = "$timescale 1ns $end\n$scope module top $end\n$var wire 1 ! clk $end\n\
        $scope module pe0 $end\n$var wire 1 ! clk $end\n$var wire 4 \" a [3:0] $end\n\
        $var wire 1 # \\y $end\n$var wire 1 ! clk_copy $end\n$upscope $end\n$upscope $end\n$enddefinitions $end\n\
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
        // clk_copy shares clk's identifier: both change together.
        let both = changes(&p, "pe0", &["clk", "clk_copy"]).unwrap();
        assert_eq!(both.len(), 8, "{both:?}");
        assert_eq!(both[0].1, "clk");
        assert_eq!(both[1].1, "clk_copy");
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
