//! `regflash power` end to end: the PE of `small` mapped at nangate45, its ports replayed from an
//! RTL run into its netlist (which must reproduce the RTL's outputs), priced by OpenSTA, and the
//! figures it writes pricing a run through `--energy` as they were measured.

use gen::tools::ScratchDir;
use serde_json::Value;

mod common;
use common::{regflash, text};

fn near(x: f64, y: f64) -> bool {
    (x - y).abs() <= 1e-6 * y.abs().max(1.0)
}

#[test]
#[ignore = "full: a gate-level characterization (Yosys, Icarus, OpenSTA; ../shared/pdk), about 2 minutes"]
fn the_pe_at_gate_level_prices_runs_as_measured() {
    let dir = ScratchDir::new("power").unwrap();
    let (report, table) = (dir.path().join("pe.json"), dir.path().join("gates.toml"));
    let work = dir.path().join("work");
    let o = regflash(&[
        "power",
        "--preset",
        "small",
        "--seq",
        "16",
        "--keep",
        work.to_str().unwrap(),
        "--report",
        report.to_str().unwrap(),
        "--out",
        table.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(
        text(&o).contains("the netlist's outputs equal the RTL's"),
        "{}",
        text(&o)
    );
    let all: Value = serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    let (r, row) = (&all[0], &all[1]);
    assert_eq!(
        (r["block"].as_str(), row["block"].as_str()),
        (Some("pe"), Some("row"))
    );
    let ev = |k: &str| r["events"][k].as_u64().unwrap() as f64;
    // The MAC accumulates in its pipeline: each run (a first operation, then MacFeeds)
    // writes its register once; a run reads it at most once (a rescale; MacClear and MacZero
    // read nothing). The 64 words' gates and the load data's two, of which only small's 16
    // accumulators (2 S slots of 2 x 2, 2 x 4 O) ever open.
    assert!(ev("mac_feed") > 0.0 && ev("mac") == ev("rf_write") + ev("mac_feed"));
    assert!(
        ev("rf_read") > 0.0 && ev("rf_read") < ev("rf_write"),
        "only rescales read"
    );
    assert_eq!(
        (r["gates"].as_u64(), r["gates_opened"].as_u64()),
        (Some(66), Some(16))
    );
    // The figures give the measured energy back: each part's dynamic energy over its events,
    // and the clock and leakage per cycle.
    let parts = r["parts"].as_array().unwrap();
    let sum = |f: &str| parts.iter().map(|p| p[f].as_f64().unwrap()).sum::<f64>();
    let (total, idle) = (sum("measured_pj"), sum("idle_pj"));
    let cycles = r["cycles"].as_f64().unwrap();
    let t: toml::Value = toml::from_str(&std::fs::read_to_string(&table).unwrap()).unwrap();
    let g = |k: &str| t["gates"][k].as_float().unwrap();
    let rebuilt = g("pe_mac") * ev("mac")
        + g("pe_rf_read") * ev("rf_read")
        + g("pe_rf_write") * ev("rf_write")
        + g("pe_cycle") * cycles;
    assert!(near(rebuilt, total), "{rebuilt} vs {total}");
    assert!(near(g("pe_cycle") * cycles, idle));
    for k in ["pe_mac", "pe_rf_write", "pe_cycle"] {
        assert!(g(k) > 0.0, "{k}");
    }
    // With runs the PE's own logic follows its steps: priced in pe_mac.
    assert_eq!(g("pe_rf_read"), 0.0);
    // The row: its figures times its counts, and its PE tier, give its measured energy back.
    let rev = |k: &str| row["events"][k].as_u64().unwrap() as f64;
    let rparts = row["parts"].as_array().unwrap();
    let tier_pj: f64 = rparts
        .iter()
        .filter(|p| p["name"] == "PE tier")
        .map(|p| p["measured_pj"].as_f64().unwrap())
        .sum();
    let row_total: f64 = rparts
        .iter()
        .map(|p| p["measured_pj"].as_f64().unwrap())
        .sum();
    let rcycles = row["cycles"].as_f64().unwrap();
    let rebuilt_row = (g("row_softmax_cycle") + g("row_control_cycle")) * rcycles
        + g("row_p_read") * rev("p_read")
        + g("row_p_write") * rev("p_write")
        + tier_pj;
    assert!(near(rebuilt_row, row_total), "{rebuilt_row} vs {row_total}");
    assert_eq!(
        rev("macs"),
        4.0 * ev("mac"),
        "the row's four PEs, each as busy as PE 0"
    );
    // Through --energy: the MACs, the register file and the PEs' clock at those figures.
    let sim = dir.path().join("sim.json");
    let o = regflash(&[
        "sim",
        "--seq",
        "16",
        "--energy",
        table.to_str().unwrap(),
        "--report",
        sim.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(
        text(&o).contains("the PE (pe_r64_m1_a1_f) at gate level"),
        "{}",
        text(&o)
    );
    let s: Value = serde_json::from_str(&std::fs::read_to_string(&sim).unwrap()).unwrap();
    let c = |k: &str| s["counters"][k].as_f64().unwrap();
    let comp = |k: &str| s["energy"]["components_pj"][k].as_f64().unwrap();
    assert!(near(comp("mac"), c("macs") * g("pe_mac")));
    assert!(near(
        comp("pe_registers"),
        c("rf_reads") * g("pe_rf_read") + c("rf_writes") * g("pe_rf_write")
    ));
    assert!(near(
        comp("static"),
        c("cycles") * (16.0 * g("pe_cycle") + 4.0 * g("row_control_cycle"))
    ));
    assert!(near(
        comp("softmax"),
        c("cycles") * 4.0 * g("row_softmax_cycle")
    ));
    assert!(near(
        comp("p_registers"),
        c("p_buf_reads") * g("row_p_read") + c("p_buf_writes") * g("row_p_write")
    ));
    // Another PE is refused: the table is of the 64-register PE.
    let o = regflash(&[
        "sim",
        "--seq",
        "16",
        "--regs",
        "32",
        "--energy",
        table.to_str().unwrap(),
    ]);
    assert!(
        !o.status.success() && text(&o).contains("gate-level PE is pe_r64_m1_a1_f"),
        "{}",
        text(&o)
    );
    // --energy gates measures the design's own PE (cached after the first run).
    let o = regflash(&["sim", "--seq", "16", "--energy", "gates"]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(text(&o).contains("at gate level"), "{}", text(&o));
}
