//! The parts of docs/ generated from the code: the CLI reference from the argument parser,
//! and block diagrams and module trees from the design. `tests/docs.rs` fails when a file's
//! generated part is stale (`REGFLASH_BLESS=1` rewrites it).
//!
//! A generated part sits between `<!-- BEGIN generated: KEY -->` and `<!-- END generated: KEY
//! -->` lines; the text around it is written by hand.

use anyhow::{bail, Context, Result};
use clap::CommandFactory;
use hdl::config::{CoreConfig, StackParams, Variant, VariantKind};
use hdl::Design;

use crate::cli::Cli;
use crate::units::{self, UNITS};

/// One generated part: the file under the repository root, its key, and its text.
pub struct Generated {
    pub file: &'static str,
    pub key: &'static str,
    pub text: String,
}

/// Every generated part of docs/.
pub fn generated() -> Result<Vec<Generated>> {
    let small = CoreConfig::preset("small")?;
    let mut v = vec![
        Generated {
            file: "docs/cli.md",
            key: "cli",
            text: cli_reference(),
        },
        Generated {
            file: "docs/cli.md",
            key: "units",
            text: units_list(&small)?,
        },
    ];
    let (d, top) = design(&small, "top")?;
    let core = child_named(&d, &top, "core_")?;
    // The core is its engine behind an abort wrapper: draw the engine.
    let engine = child_named(&d, &core, "core_")?;
    let (top_chart, core_chart) = (mermaid(&d, &top)?, mermaid(&d, &engine)?);
    for (file, key, text) in [
        ("docs/architecture.md", "top-diagram", top_chart),
        ("README.md", "core-diagram", core_chart.clone()),
        ("docs/architecture.md", "core-diagram", core_chart),
        ("docs/architecture.md", "module-tree", tree(&d, &top)?),
    ] {
        v.push(Generated { file, key, text });
    }
    let three_tiers = Variant::Reg3d(StackParams {
        tiers: 3,
        ..StackParams::default()
    });
    for (variant, key) in [
        (Variant::Reg2d, "row-reg2d"),
        (VariantKind::Buf2d.with_defaults(), "row-buf2d"),
        (three_tiers, "row-reg3d"),
    ] {
        let mut c = small.clone();
        c.variant = variant;
        let (d, row) = design(&c, "pe_row")?;
        v.push(Generated {
            file: "docs/variants.md",
            key,
            text: mermaid(&d, &row)?,
        });
    }
    v.push(Generated {
        file: "docs/variants.md",
        key: "plans",
        text: plans_table(),
    });
    Ok(v)
}

/// Each variant's phase plan (`Dataflow::plan`): its arrays, where S and P live, and the
/// passes a tile runs, each phase with what it reads and leaves.
fn plans_table() -> String {
    use hdl::config::RowParams;
    use hdl::variants::passes_text;
    let mut t = String::from(
        "| design | arrays | S | P | a tile's passes, each over every block (‖ between passes) |\n\
         |---|---|---|---|---|\n",
    );
    let spill = Variant::Rowfused(RowParams {
        spill: true,
        ..RowParams::default()
    });
    let three = Variant::reg3d(3);
    let designs = VariantKind::ALL
        .iter()
        .map(|k| k.with_defaults())
        .chain([three, spill]);
    for v in designs {
        let plan = v.plan();
        let passes = passes_text(&plan.passes(false));
        t += &format!(
            "| {} | {} | {} | {} | {passes} |\n",
            v.label(),
            plan.arrays_label(),
            plan.s,
            plan.p
        );
        if plan.spills() {
            t += &format!(
                "| … past the S array | | | | {} |\n",
                passes_text(&plan.passes(true))
            );
        }
    }
    t
}

/// `unit` of `cfg` built into a fresh design, and its module name.
fn design(cfg: &CoreConfig, unit: &str) -> Result<(Design, String)> {
    let mut d = Design::new();
    let top = units::build_unit(&mut d, unit, cfg)?;
    Ok((d, top.name))
}

/// The first module under `parent` whose name starts with `prefix`.
fn child_named(d: &Design, parent: &str, prefix: &str) -> Result<String> {
    let m = d.module(parent).context("no such module")?;
    m.insts
        .iter()
        .find(|i| i.module.name.starts_with(prefix))
        .map(|i| i.module.name.clone())
        .with_context(|| format!("{parent} has no child named {prefix}…"))
}

fn mermaid(d: &Design, module: &str) -> Result<String> {
    let chart = gen::diagram::block_diagram(d, module).context("no such module")?;
    Ok(format!("```mermaid\n{chart}```\n"))
}

fn tree(d: &Design, top: &str) -> Result<String> {
    let t = gen::diagram::module_tree(d, top).context("no such module")?;
    Ok(format!("```text\n{t}```\n"))
}

/// Every subcommand's `--help`, as the binary prints it.
pub fn cli_reference() -> String {
    let mut cmd = Cli::command();
    cmd.build();
    // Trailing blanks trimmed: clap indents its blank lines.
    let trim = |s: String| s.lines().map(str::trim_end).collect::<Vec<_>>().join("\n");
    let mut out = format!(
        "### regflash\n\n```text\n{}\n```\n",
        trim(cmd.render_help().to_string())
    );
    for sub in cmd.get_subcommands_mut() {
        let name = sub.get_name().to_string();
        let help = trim(sub.render_long_help().to_string());
        out += &format!("\n### regflash {name}\n\n```text\n{help}\n```\n");
    }
    out
}

/// The blocks `--unit` accepts, with the first line of each one's doc (built from `small`).
pub fn units_list(cfg: &CoreConfig) -> Result<String> {
    let mut out = String::from("| unit | module (small) | what it is |\n|---|---|---|\n");
    for u in UNITS {
        let (d, top) = design(cfg, u.name)?;
        let doc = d
            .module(&top)
            .map_or(String::new(), |m| gen::diagram::summary(&m.doc));
        out += &format!(
            "| `{}` | `{top}` | {} |\n",
            u.name,
            doc.replace('|', "\\|").replace('<', "&lt;")
        );
    }
    Ok(out)
}

/// `doc` with the generated part `key` replaced by `text`.
pub fn splice(doc: &str, key: &str, text: &str) -> Result<String> {
    let begin = format!("<!-- BEGIN generated: {key} -->\n");
    let end = format!("<!-- END generated: {key} -->");
    let Some(a) = doc.find(&begin) else {
        bail!("no `{}` line", begin.trim_end());
    };
    let from = a + begin.len();
    let Some(b) = doc[from..].find(&end) else {
        bail!("no `{end}` line after `{}`", begin.trim_end());
    };
    Ok(format!("{}{text}{}", &doc[..from], &doc[from + b..]))
}
