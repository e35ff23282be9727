//! docs/ against the code: the generated parts (CLI reference, units, block diagrams, module
//! trees) are current, and every relative link in README.md and docs/ names a file that exists.

use std::path::Path;

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

/// Each generated part of docs/ is what the code generates now. `REGFLASH_BLESS=1` rewrites
/// the stale ones.
#[test]
fn generated_docs_are_current() {
    let bless = std::env::var("REGFLASH_BLESS").is_ok_and(|v| v == "1");
    let mut stale = vec![];
    for g in regflash::docs::generated().unwrap() {
        let path = Path::new(ROOT).join(g.file);
        let doc = std::fs::read_to_string(&path).unwrap();
        let want = regflash::docs::splice(&doc, g.key, &g.text)
            .unwrap_or_else(|e| panic!("{}: {e}", g.file));
        if want != doc {
            if bless {
                std::fs::write(&path, want).unwrap();
            } else {
                stale.push(format!("{} ({})", g.file, g.key));
            }
        }
    }
    assert!(
        stale.is_empty(),
        "stale generated docs: {}; rewrite them with REGFLASH_BLESS=1 cargo nextest run --test docs",
        stale.join(", ")
    );
}

/// Every relative link in README.md and docs/ names a file that exists, and every docs/ page
/// is reachable from README.md.
#[test]
fn doc_links_resolve() {
    let root = Path::new(ROOT);
    let mut pages = vec![root.join("README.md")];
    for e in std::fs::read_dir(root.join("docs")).unwrap() {
        let p = e.unwrap().path();
        if p.extension().is_some_and(|x| x == "md") {
            pages.push(p);
        }
    }
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    let mut broken = vec![];
    for page in &pages {
        let text = std::fs::read_to_string(page).unwrap();
        for link in text.split("](").skip(1) {
            let Some(end) = link.find(')') else { continue };
            let target = link[..end].split('#').next().unwrap();
            if target.is_empty() || target.contains("://") {
                continue;
            }
            if !page.parent().unwrap().join(target).exists() {
                broken.push(format!("{}: {target}", page.display()));
            }
        }
        let name = page.file_name().unwrap().to_str().unwrap();
        if name != "README.md" && !readme.contains(&format!("(docs/{name})")) {
            broken.push(format!("README.md does not link docs/{name}"));
        }
    }
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

/// Every test that .config/nextest.toml starts first is a test of the workspace: a renamed
/// test would silently drop its priority and might start last, leaving a core idle.
#[test]
fn prioritized_tests_exist() {
    let root = Path::new(ROOT);
    let config = std::fs::read_to_string(root.join(".config/nextest.toml")).unwrap();
    let mut sources = String::new();
    for dir in [
        "tests",
        "src",
        "kernels/src",
        "hdl/src",
        "gen/src",
        "verilator_tb/src",
    ] {
        let mut todo = vec![root.join(dir)];
        while let Some(d) = todo.pop() {
            for e in std::fs::read_dir(&d).unwrap() {
                let p = e.unwrap().path();
                if p.is_dir() {
                    todo.push(p);
                } else if p.extension().is_some_and(|x| x == "rs") {
                    sources += &std::fs::read_to_string(&p).unwrap();
                }
            }
        }
    }
    let names: Vec<&str> = config
        .split("test(=")
        .skip(1)
        .map(|s| s.split(')').next().unwrap())
        .collect();
    assert!(names.len() >= 5, "{names:?}");
    let missing: Vec<&&str> = names
        .iter()
        .filter(|n| !sources.contains(&format!("fn {n}()")))
        .collect();
    assert!(
        missing.is_empty(),
        ".config/nextest.toml names tests that do not exist: {missing:?}"
    );
}
