//! The workspace's import graph against docs/architecture.md's layering: no crate's files import
//! each other in a circle, and no file of `hdl` imports from a layer above its own.
//!
//! The graph is read from the sources, not from the compiler: every `use` tree and every inline
//! path that starts at `crate`, `super`, `self`, a child module or a name a `use` binds. A path
//! reaches the file that defines its item or, where a module's `pub use` re-exports the item,
//! that module's file (the crate's root excepted: a path through it reaches the definition). An
//! arrow runs from the file that names a path to the file it reaches. A folder's face (its `mod.rs`, a crate's `lib.rs`) naming
//! its own parts is the folder's structure, not an import, and draws no arrow; a part naming
//! its face does. Comments, strings and inline modules (the unit tests' `mod tests { … }`) are
//! not read.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

/// hdl's layers, lowest first: a file may import from its own layer and the ones below. Each
/// entry is a layer's top-level modules of `hdl/src`. docs/architecture.md writes it down.
const HDL_LAYERS: &[&[&str]] = &[
    &["ir", "format", "fault"],
    &["clock_gate", "operands", "wrap"],
    &["fp"],
    &["softmax", "variants", "link"],
    &["array", "mem"],
    &["config"],
    &["core"],
    &["soc"],
];

/// The workspace's crate roots: (crate, root file relative to the workspace).
const CRATES: &[(&str, &str)] = &[
    ("regflash", "src/lib.rs"),
    ("regflash (binary)", "src/main.rs"),
    ("hdl", "hdl/src/lib.rs"),
    ("kernels", "kernels/src/lib.rs"),
    ("gen", "gen/src/lib.rs"),
    ("verilator_tb", "verilator_tb/src/lib.rs"),
    ("analysis", "analysis/src/lib.rs"),
    ("python", "python/src/lib.rs"),
];

/// A module's path from its crate's root (`["core", "sequencer"]`); the root is `[]`.
type ModPath = Vec<String>;

/// One leaf of a `use` tree: the name it binds (`*` for a glob) and the path it names.
#[derive(Clone, Debug)]
struct UseLeaf {
    bound: String,
    path: Vec<String>,
    public: bool,
}

#[derive(Debug)]
struct ModFile {
    file: PathBuf,
    children: BTreeSet<String>,
    defs: BTreeSet<String>,
    /// The `macro_rules!` macros it defines (also in `defs`).
    macros: BTreeSet<String>,
    uses: Vec<UseLeaf>,
    /// Inline paths of two segments or more outside `use` items.
    paths: Vec<Vec<String>>,
}

/// A crate's modules, each read from its file.
struct Crate {
    mods: BTreeMap<ModPath, ModFile>,
}

fn main_crate_files(root: &Path) -> Crate {
    let mut mods = BTreeMap::new();
    load(root, vec![], true, &mut mods);
    Crate { mods }
}

/// Reads `file` as module `path` and, below it, every child module declared with `mod x;`.
fn load(file: &Path, path: ModPath, face: bool, mods: &mut BTreeMap<ModPath, ModFile>) {
    let text = std::fs::read_to_string(file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
    let code = drop_inline_modules(&strip(&text));
    let dir = if face {
        file.parent().unwrap().to_path_buf()
    } else {
        file.with_extension("")
    };
    let mut children = BTreeSet::new();
    let toks = tokens(&code);
    for w in toks.windows(3) {
        if w[0] == "mod" && w[2] == ";" && is_ident(&w[1]) {
            children.insert(w[1].clone());
        }
    }
    let (defs, macros) = definitions(&toks);
    let (uses, paths) = uses_and_paths(&toks);
    for c in &children {
        let (f, face) = if dir.join(format!("{c}.rs")).exists() {
            (dir.join(format!("{c}.rs")), false)
        } else {
            (dir.join(c).join("mod.rs"), true)
        };
        let mut p = path.clone();
        p.push(c.clone());
        load(&f, p, face, mods);
    }
    mods.insert(
        path,
        ModFile {
            file: file.to_path_buf(),
            children,
            defs,
            macros,
            uses,
            paths,
        },
    );
}

/// The text with comments, string and character literals blanked (newlines kept).
fn strip(s: &str) -> String {
    let c: Vec<char> = s.chars().collect();
    let mut out = String::with_capacity(s.len());
    let mut i = 0;
    let blank = |out: &mut String, ch: char| out.push(if ch == '\n' { '\n' } else { ' ' });
    while i < c.len() {
        let next = c.get(i + 1).copied();
        if c[i] == '/' && next == Some('/') {
            while i < c.len() && c[i] != '\n' {
                i += 1;
            }
        } else if c[i] == '/' && next == Some('*') {
            let mut depth = 0;
            while i < c.len() {
                if c[i] == '/' && c.get(i + 1) == Some(&'*') {
                    depth += 1;
                    i += 2;
                } else if c[i] == '*' && c.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    blank(&mut out, c[i]);
                    i += 1;
                }
            }
        } else if c[i] == 'r' && (next == Some('"') || next == Some('#')) && !ident_char(&c, i) {
            // A raw string: r"…" or r#"…"#.
            let mut j = i + 1;
            let mut hashes = 0;
            while c.get(j) == Some(&'#') {
                hashes += 1;
                j += 1;
            }
            if c.get(j) != Some(&'"') {
                out.push(c[i]);
                i += 1;
                continue;
            }
            j += 1;
            loop {
                if j >= c.len() {
                    break;
                }
                if c[j] == '"' && (0..hashes).all(|h| c.get(j + 1 + h) == Some(&'#')) {
                    j += 1 + hashes;
                    break;
                }
                blank(&mut out, c[j]);
                j += 1;
            }
            i = j;
        } else if c[i] == '"' {
            i += 1;
            while i < c.len() && c[i] != '"' {
                if c[i] == '\\' {
                    i += 1;
                }
                if i < c.len() {
                    blank(&mut out, c[i]);
                }
                i += 1;
            }
            i += 1;
        } else if c[i] == '\'' && next == Some('\\') {
            i += 2;
            while i < c.len() && c[i] != '\'' {
                i += 1;
            }
            i += 1;
        } else if c[i] == '\'' && c.get(i + 2) == Some(&'\'') {
            i += 3;
        } else {
            out.push(c[i]);
            i += 1;
        }
    }
    out
}

/// Whether the character before `i` continues an identifier (so `c[i]` is inside a word).
fn ident_char(c: &[char], i: usize) -> bool {
    i > 0 && (c[i - 1].is_alphanumeric() || c[i - 1] == '_')
}

/// The code without inline modules (`mod name { … }`): their paths are relative to
/// themselves, and the crate's inline modules are its unit tests.
fn drop_inline_modules(code: &str) -> String {
    let bytes = code.as_bytes();
    let mut out = String::with_capacity(code.len());
    let mut i = 0;
    while i < code.len() {
        if code[i..].starts_with("mod ") && (i == 0 || !is_word_byte(bytes[i - 1])) {
            let rest = &code[i + 4..];
            let name_len = rest
                .trim_start()
                .find(|c: char| !(c.is_alphanumeric() || c == '_'))
                .unwrap_or(0);
            let after = rest.trim_start()[name_len..].trim_start();
            if name_len > 0 && after.starts_with('{') {
                let open = code.len() - after.len();
                let mut depth = 0;
                let mut j = open;
                for (k, ch) in code[open..].char_indices() {
                    if ch == '{' {
                        depth += 1;
                    } else if ch == '}' {
                        depth -= 1;
                        if depth == 0 {
                            j = open + k + 1;
                            break;
                        }
                    }
                }
                out.push_str(&" ".repeat(j - i));
                i = j;
                continue;
            }
        }
        let ch = code[i..].chars().next().unwrap();
        out.push(ch);
        i += ch.len_utf8();
    }
    out
}

fn is_word_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

fn is_ident(s: &str) -> bool {
    s.chars()
        .next()
        .is_some_and(|c| c.is_alphabetic() || c == '_')
        && s.chars().all(|c| c.is_alphanumeric() || c == '_')
}

/// Identifiers, `::` and single punctuation characters.
fn tokens(code: &str) -> Vec<String> {
    let c: Vec<char> = code.chars().collect();
    let mut out = vec![];
    let mut i = 0;
    while i < c.len() {
        if c[i].is_whitespace() {
            i += 1;
        } else if c[i].is_alphanumeric() || c[i] == '_' {
            let s = i;
            while i < c.len() && (c[i].is_alphanumeric() || c[i] == '_') {
                i += 1;
            }
            out.push(c[s..i].iter().collect());
        } else if c[i] == ':' && c.get(i + 1) == Some(&':') {
            out.push("::".into());
            i += 2;
        } else {
            out.push(c[i].to_string());
            i += 1;
        }
    }
    out
}

/// The names a module's file defines at any depth (items, and `macro_rules!` macros), and
/// its macros apart.
fn definitions(toks: &[String]) -> (BTreeSet<String>, BTreeSet<String>) {
    let (mut defs, mut macros) = (BTreeSet::new(), BTreeSet::new());
    for w in toks.windows(3) {
        let kw = [
            "fn", "struct", "enum", "trait", "type", "const", "static", "union", "mod",
        ];
        if kw.contains(&w[0].as_str()) && is_ident(&w[1]) {
            defs.insert(w[1].clone());
        }
        if w[0] == "macro_rules" && w[1] == "!" && is_ident(&w[2]) {
            defs.insert(w[2].clone());
            macros.insert(w[2].clone());
        }
    }
    (defs, macros)
}

/// The `use` items' leaves, and the inline paths outside them.
fn uses_and_paths(toks: &[String]) -> (Vec<UseLeaf>, Vec<Vec<String>>) {
    let mut uses = vec![];
    let mut paths = vec![];
    let mut i = 0;
    while i < toks.len() {
        if toks[i] == "use" {
            // `pub use` or `pub(crate) use`, `pub(super) use`, …
            let before = |k: usize| if i >= k { toks[i - k].as_str() } else { "" };
            let public = before(1) == "pub" || (before(1) == ")" && before(4) == "pub");
            let end = (i..toks.len())
                .find(|&j| toks[j] == ";")
                .unwrap_or(toks.len());
            let mut pos = i + 1;
            tree(&toks[..end], &mut pos, &mut vec![], public, &mut uses);
            i = end + 1;
            continue;
        }
        if is_ident(&toks[i])
            && toks.get(i + 1).is_some_and(|t| t == "::")
            && !(i > 0 && toks[i - 1] == "::")
        {
            let mut p = vec![toks[i].clone()];
            let mut j = i + 1;
            while toks.get(j).is_some_and(|t| t == "::")
                && toks.get(j + 1).is_some_and(|t| is_ident(t))
            {
                p.push(toks[j + 1].clone());
                j += 2;
            }
            if p.len() > 1 {
                paths.push(p);
            }
            i = j;
            continue;
        }
        i += 1;
    }
    (uses, paths)
}

/// Parses one `use` tree at `toks[*pos]` under `prefix`, adding its leaves.
fn tree(
    toks: &[String],
    pos: &mut usize,
    prefix: &mut Vec<String>,
    public: bool,
    out: &mut Vec<UseLeaf>,
) {
    let depth = prefix.len();
    if toks.get(*pos).is_some_and(|t| t == "::") {
        *pos += 1;
    }
    loop {
        match toks.get(*pos).map(String::as_str) {
            Some("{") => {
                *pos += 1;
                while toks.get(*pos).is_some_and(|t| t != "}") {
                    tree(toks, pos, prefix, public, out);
                    if toks.get(*pos).is_some_and(|t| t == ",") {
                        *pos += 1;
                    }
                }
                *pos += 1;
                break;
            }
            Some("*") => {
                *pos += 1;
                out.push(UseLeaf {
                    bound: "*".into(),
                    path: prefix.clone(),
                    public,
                });
                break;
            }
            Some(t) if is_ident(t) => {
                prefix.push(t.to_string());
                *pos += 1;
                if toks.get(*pos).is_some_and(|t| t == "::") {
                    *pos += 1;
                    continue;
                }
                let mut bound = t.to_string();
                if toks.get(*pos).is_some_and(|t| t == "as") {
                    bound = toks[*pos + 1].clone();
                    *pos += 2;
                }
                let mut path = prefix.clone();
                if bound == "self" || t == "self" {
                    path.pop();
                    bound = path.last().cloned().unwrap_or_default();
                }
                out.push(UseLeaf {
                    bound,
                    path,
                    public,
                });
                break;
            }
            _ => break,
        }
    }
    prefix.truncate(depth);
}

/// What a path resolves to: a module, or an item of a module's file.
#[derive(Clone, Debug, PartialEq)]
enum Target {
    Module(ModPath),
    Item(ModPath),
}

impl Target {
    fn module(&self) -> &ModPath {
        match self {
            Target::Module(m) | Target::Item(m) => m,
        }
    }
}

impl Crate {
    /// Resolves `path` as written in module `from`; `None` for another crate's or std's.
    fn resolve(&self, from: &ModPath, path: &[String], depth: usize) -> Option<Target> {
        if depth > 24 || path.is_empty() {
            return None;
        }
        let (mut cur, rest) = match path[0].as_str() {
            "crate" => (vec![], &path[1..]),
            "self" => (from.clone(), &path[1..]),
            "super" => {
                let mut m = from.clone();
                let mut k = 0;
                while path.get(k).is_some_and(|s| s == "super") {
                    m.pop();
                    k += 1;
                }
                (m, &path[k..])
            }
            first => {
                let here = &self.mods[from];
                if here.children.contains(first) {
                    (from.clone(), path)
                } else if let Some(u) = here.uses.iter().find(|u| u.bound == first) {
                    let t = self.resolve(from, &u.path, depth + 1)?;
                    match t {
                        Target::Module(m) => (m, &path[1..]),
                        item => return Some(item),
                    }
                } else {
                    return None;
                }
            }
        };
        for (k, seg) in rest.iter().enumerate() {
            let m = &self.mods[&cur];
            if m.children.contains(seg) {
                cur.push(seg.clone());
                continue;
            }
            if m.defs.contains(seg) {
                return Some(Target::Item(cur));
            }
            if let Some(u) = m.uses.iter().find(|u| u.public && &u.bound == seg) {
                match self.resolve(&cur, &u.path, depth + 1) {
                    Some(Target::Module(next)) => {
                        let mut tail = vec!["self".to_string()];
                        tail.extend(rest[k + 1..].iter().cloned());
                        return self.resolve(&next, &tail, depth + 1);
                    }
                    Some(item) => return Some(Self::through(&cur, item)),
                    None => return None,
                }
            }
            for g in m.uses.iter().filter(|u| u.public && u.bound == "*") {
                let mut p = g.path.clone();
                p.extend(rest[k..].iter().cloned());
                if let Some(t) = self.resolve(&cur, &p, depth + 1) {
                    return Some(Self::through(&cur, t));
                }
            }
            // A `#[macro_export]` macro lives at the root whichever file defines it.
            return Some(self.definer(seg).map_or(Target::Item(cur), Target::Item));
        }
        Some(Target::Module(cur))
    }

    /// An item that module `face` re-exports, as a path through `face` reaches it: the
    /// importer depends on `face`'s file (its `pub use`), as on a file that defined the item;
    /// the crate's root is no file of its own (it declares every module), so a path through
    /// it reaches the file that defines the item.
    fn through(face: &ModPath, item: Target) -> Target {
        if face.is_empty() {
            item
        } else {
            Target::Item(face.clone())
        }
    }

    /// The one module whose file defines `name` as a macro, if one does.
    fn definer(&self, name: &str) -> Option<ModPath> {
        let mut found = self.mods.iter().filter(|(_, m)| m.macros.contains(name));
        let first = found.next().map(|(p, _)| p.clone());
        first.filter(|_| found.next().is_none())
    }

    /// Every arrow between two files: (importer, imported) → the names it takes.
    fn arrows(&self) -> BTreeMap<(ModPath, ModPath), BTreeSet<String>> {
        let mut arrows: BTreeMap<(ModPath, ModPath), BTreeSet<String>> = BTreeMap::new();
        for (from, m) in &self.mods {
            let named = m
                .uses
                .iter()
                .map(|u| u.path.clone())
                .chain(m.paths.iter().cloned());
            for p in named {
                let Some(t) = self.resolve(from, &p, 0) else {
                    continue;
                };
                let to = t.module().clone();
                // A face naming its own parts, or a file itself, is no arrow.
                if to.starts_with(from) {
                    continue;
                }
                let name = p.last().cloned().unwrap_or_default();
                arrows.entry((from.clone(), to)).or_default().insert(name);
            }
        }
        arrows
    }

    fn file(&self, m: &ModPath) -> String {
        let f = &self.mods[m].file;
        f.strip_prefix(ROOT).unwrap_or(f).display().to_string()
    }
}

/// The circles of a graph (its strongly connected components of two files or more).
fn circles(
    nodes: &[ModPath],
    arrows: &BTreeMap<(ModPath, ModPath), BTreeSet<String>>,
) -> Vec<Vec<ModPath>> {
    let idx: BTreeMap<&ModPath, usize> = nodes.iter().enumerate().map(|(i, n)| (n, i)).collect();
    let mut next = vec![vec![]; nodes.len()];
    for (a, b) in arrows.keys() {
        next[idx[a]].push(idx[b]);
    }
    // Tarjan's algorithm, iterative.
    let n = nodes.len();
    let (mut index, mut low, mut on) = (vec![usize::MAX; n], vec![0; n], vec![false; n]);
    let (mut stack, mut out, mut counter) = (vec![], vec![], 0);
    for s in 0..n {
        if index[s] != usize::MAX {
            continue;
        }
        let mut call = vec![(s, 0usize)];
        index[s] = counter;
        low[s] = counter;
        counter += 1;
        stack.push(s);
        on[s] = true;
        while let Some(&mut (v, ref mut k)) = call.last_mut() {
            if *k < next[v].len() {
                let w = next[v][*k];
                *k += 1;
                if index[w] == usize::MAX {
                    index[w] = counter;
                    low[w] = counter;
                    counter += 1;
                    stack.push(w);
                    on[w] = true;
                    call.push((w, 0));
                } else if on[w] {
                    low[v] = low[v].min(index[w]);
                }
            } else {
                call.pop();
                if let Some(&(u, _)) = call.last() {
                    low[u] = low[u].min(low[v]);
                }
                if low[v] == index[v] {
                    let mut comp = vec![];
                    loop {
                        let w = stack.pop().unwrap();
                        on[w] = false;
                        comp.push(nodes[w].clone());
                        if w == v {
                            break;
                        }
                    }
                    if comp.len() > 1 {
                        comp.sort();
                        out.push(comp);
                    }
                }
            }
        }
    }
    out
}

fn read(root: &str) -> Crate {
    main_crate_files(&Path::new(ROOT).join(root))
}

/// No crate of the workspace has files that import each other in a circle.
#[test]
fn no_import_circles() {
    let mut found = vec![];
    for (name, root) in CRATES {
        let c = read(root);
        let nodes: Vec<ModPath> = c.mods.keys().cloned().collect();
        let arrows = c.arrows();
        for comp in circles(&nodes, &arrows) {
            let inside = |m: &ModPath| comp.contains(m);
            let ties: Vec<String> = arrows
                .iter()
                .filter(|((a, b), _)| inside(a) && inside(b))
                .map(|((a, b), names)| {
                    let names: Vec<&str> = names.iter().map(String::as_str).collect();
                    format!("    {} -> {}: {}", c.file(a), c.file(b), names.join(", "))
                })
                .collect();
            found.push(format!(
                "{name}: a circle of {} files:\n{}",
                comp.len(),
                ties.join("\n")
            ));
        }
    }
    assert!(found.is_empty(), "import circles:\n{}", found.join("\n"));
}

/// The layer of an hdl module: the index in `HDL_LAYERS` of its top-level module.
fn hdl_layer(m: &ModPath) -> Option<usize> {
    let top = m.first()?;
    HDL_LAYERS.iter().position(|l| l.contains(&top.as_str()))
}

/// No file of hdl imports from a layer above its own, and every top-level module has a layer.
#[test]
fn hdl_imports_run_down_its_layers() {
    let c = read("hdl/src/lib.rs");
    let unplaced: Vec<&String> = c.mods[&vec![]]
        .children
        .iter()
        .filter(|t| hdl_layer(&vec![(*t).clone()]).is_none())
        .collect();
    assert!(
        unplaced.is_empty(),
        "hdl modules in no layer of HDL_LAYERS (and docs/architecture.md): {unplaced:?}"
    );
    let mut up = vec![];
    for ((a, b), names) in c.arrows() {
        let (Some(la), Some(lb)) = (hdl_layer(&a), hdl_layer(&b)) else {
            continue;
        };
        if lb > la {
            let names: Vec<&str> = names.iter().map(String::as_str).collect();
            up.push(format!(
                "    {} -> {}: {}",
                c.file(&a),
                c.file(&b),
                names.join(", ")
            ));
        }
    }
    assert!(
        up.is_empty(),
        "imports that run up hdl's layers (docs/architecture.md):\n{}",
        up.join("\n")
    );
}

/// The reader finds what it must: a circle planted in a small crate, through the root's `pub
/// use` to the file that defines the item, and an import through a folder's face to the face.
#[test]
fn the_reader_sees_a_planted_circle() {
    let dir = std::env::temp_dir().join(format!("regflash-layering-{}", std::process::id()));
    let src = dir.join("src");
    std::fs::create_dir_all(src.join("b")).unwrap();
    std::fs::write(
        src.join("lib.rs"),
        "mod a;\nmod b;\npub use b::deep::Thing;\n",
    )
    .unwrap();
    std::fs::write(
        src.join("a.rs"),
        "// crate::b::nothing in a comment\nuse crate::Thing;\nuse crate::b::Other;\n\
         pub fn f() -> Thing { todo!() }\n",
    )
    .unwrap();
    std::fs::write(
        src.join("b/mod.rs"),
        "pub mod deep;\npub use deep::Other;\n",
    )
    .unwrap();
    std::fs::write(
        src.join("b/deep.rs"),
        "pub struct Thing;\npub struct Other;\nfn g() { let s = \"crate::a::f\"; crate::a::f(); }\n",
    )
    .unwrap();
    let c = main_crate_files(&src.join("lib.rs"));
    let nodes: Vec<ModPath> = c.mods.keys().cloned().collect();
    let arrows = c.arrows();
    let key = |s: &[&str]| s.iter().map(|x| x.to_string()).collect::<ModPath>();
    assert!(
        arrows.contains_key(&(key(&["a"]), key(&["b", "deep"]))),
        "{arrows:?}"
    );
    assert!(
        arrows.contains_key(&(key(&["b", "deep"]), key(&["a"]))),
        "{arrows:?}"
    );
    // Through b's face (its `pub use`), a depends on b/mod.rs; b's face on its own part is
    // the folder's structure.
    assert!(
        arrows.contains_key(&(key(&["a"]), key(&["b"]))),
        "{arrows:?}"
    );
    assert_eq!(
        arrows.len(),
        3,
        "a comment or a string drew an arrow: {arrows:?}"
    );
    assert_eq!(
        circles(&nodes, &arrows),
        vec![vec![key(&["a"]), key(&["b", "deep"])]]
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
