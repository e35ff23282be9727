//! Energy from the RTL's counters: `regflash compare`'s JSON reproduces from its counters and
//! the table alone, a user table that changes one figure changes exactly the components that
//! use it, and bad tables are refused with the reason.

use std::collections::BTreeSet;

use gen::tools::ScratchDir;
use kernels::energy::{scale, Activity, EnergyTable, Geometry, Placement, KEYS};
use regflash::pricing::table_from_toml;
use serde_json::Value;

mod common;
use common::{regflash, text};

fn compare(dir: &ScratchDir, name: &str, extra: &[&str]) -> Value {
    let path = dir.path().join(name);
    let mut args = vec![
        "compare",
        "--preset",
        "small",
        "--seq",
        "40,64",
        "--causal",
        "--spill-keys",
        "32",
        "--report",
        path.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    let o = regflash(&args);
    assert!(o.status.success(), "{}", text(&o));
    serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap()
}

fn component(row: &Value, name: &str) -> f64 {
    row["energy"]["components_pj"][name].as_f64().unwrap()
}

/// Whether `x` equals `y` up to rounding (relative 1e-9, absolute below 1).
fn near(x: f64, y: f64) -> bool {
    (x - y).abs() <= 1e-9 * y.abs().max(1.0)
}

/// Counter `n` of compare row `r`.
fn counter_of(r: &Value, n: &str) -> f64 {
    r["counters"][n].as_u64().unwrap() as f64
}

/// The price of event `n` in compare row `r`, in pJ.
fn price_of(r: &Value, n: &str) -> f64 {
    r["energy"]["prices_pj"][n].as_f64().unwrap()
}

/// Asserts that the plot at `svg` has every design's line and the published claims' bands.
fn assert_plot(svg: &std::path::Path) {
    let plot = std::fs::read_to_string(svg).unwrap();
    assert!(plot.starts_with("<svg"), "{}", &plot[..plot.len().min(80)]);
    for label in [
        "buf2d",
        "3-D buffered",
        "reg2d",
        "reg3d iso-PE",
        "3D-Flow: 46-93 %",
    ] {
        assert!(plot.contains(label), "{label}");
    }
}

/// Asserts that row `r` passed and its total is Σ counter × price over the report's own
/// counters and prices.
fn assert_total_from_counters(r: &Value) {
    let c = |n: &str| counter_of(r, n);
    let price = |n: &str| price_of(r, n);
    assert_eq!(r["report"]["passed"], true, "{}", r["design"]);
    let beat = 256.0 / 8.0;
    let total = c("macs") * price("mac")
        + c("rf_reads") * price("rf_read_32b")
        + c("rf_writes") * price("rf_write_32b")
        + c("p_buf_reads") * price("p_read")
        + c("p_buf_writes") * price("p_write")
        + c("s_buf_reads") * price("s_read")
        + c("s_buf_writes") * price("s_write")
        + c("max_ops") * price("max_op")
        + c("exp_ops") * price("exp_op")
        + c("row_updates") * price("row_update")
        + c("land_read_bits") * price("land_read_bit")
        + c("read_beats") * 256.0 * price("land_write_bit")
        + c("write_beats") * 256.0 * price("staging_bit")
        + c("recip_ops") * price("recip_op")
        + c("norm_ops") * price("norm_op")
        + c("bcast_bit_hops") * price("bcast_bit_hop")
        + c("vlink_bits") * price("vlink_bit")
        + (c("read_beats") + c("write_beats")) * beat * price("dram_byte")
        + c("cycles") * price("static_cycle")
        + c("glb_read_bits") * price("glb_read_bit")
        + c("glb_write_bits") * price("glb_write_bit")
        + c("noc_fifo_writes") * price("noc_fifo_write")
        + c("noc_fifo_reads") * price("noc_fifo_read")
        + c("noc_hop_bits") * price("noc_hop_bit")
        + c("noc_src_reads") * price("noc_src_word");
    let reported = r["energy"]["total_pj"].as_f64().unwrap();
    assert!(
        near(total, reported),
        "{}: {total} vs {reported}",
        r["design"]
    );
}

/// Asserts row `r`'s sourced figures (45 nm, the default table): a MAC is Horowitz's FP16
/// multiply + FP32 add, DRAM is HBM2's 3.97 pJ/bit, a hybrid-bond bit 0.05 pJ, the row
/// engines' operations, the register file's read.
fn assert_sourced_figures(r: &Value) {
    let c = |n: &str| counter_of(r, n);
    let beat = 256.0 / 8.0;
    assert!(near(component(r, "mac"), c("macs") * (1.1 + 0.9)));
    let dram_bits = 8.0 * beat * (c("read_beats") + c("write_beats"));
    assert!(near(component(r, "dram"), dram_bits * 3.97));
    assert!(near(component(r, "vertical_links"), c("vlink_bits") * 0.05));
    // The row engines: a max compare is a 32-bit compare; an exp element scales by C,
    // subtracts, takes exp2 and sums; a row update a multiply, 3 + (columns - 1) adds (the
    // reduction tree's) and 2 integer operations; then reciprocals and normalizing
    // multiplies.
    let cols = r["report"]["cols"].as_f64().unwrap();
    let softmax = c("max_ops") * 0.1
        + c("exp_ops") * (3.7 + 4.6 + 2.0 * 0.9)
        + c("row_updates") * (3.7 + (2.0 + cols) * 0.9 + 0.2)
        + c("recip_ops") * 2.8
        + c("norm_ops") * 3.7;
    assert!(near(component(r, "softmax"), softmax));
    // Storage at its capacity, interpolated log-log: the PE register file (256 B) between
    // the 32-bit register (0.576 pJ per 64 bits at 40 nm, x 1/0.869 to 45 nm) and the 8 KB
    // macro (6.14 pJ): 1.116 pJ per 32-bit read.
    assert!(
        (price_of(r, "rf_read_32b") - 1.116).abs() < 0.001,
        "{}",
        price_of(r, "rf_read_32b")
    );
}

/// Asserts that every event row `r` exercises has a price, that its components sum to the
/// total, its per-MAC and TOPS/W figures, and which designs touch SRAM and vertical links.
fn assert_components_consistent(r: &Value) {
    let c = |n: &str| counter_of(r, n);
    for (counter, event) in [
        ("macs", "mac"),
        ("rf_reads", "rf_read_32b"),
        ("rf_writes", "rf_write_32b"),
        ("p_buf_reads", "p_read"),
        ("exp_ops", "exp_op"),
        ("row_updates", "row_update"),
        ("land_read_bits", "land_read_bit"),
        ("read_beats", "land_write_bit"),
        ("write_beats", "staging_bit"),
        ("bcast_bit_hops", "bcast_bit_hop"),
        ("read_beats", "dram_byte"),
    ] {
        assert!(
            c(counter) > 0.0 && price_of(r, event) > 0.0,
            "{counter} / {event}"
        );
    }
    let reported = r["energy"]["total_pj"].as_f64().unwrap();
    let sum: f64 = r["energy"]["components_pj"]
        .as_object()
        .unwrap()
        .values()
        .map(|v| v.as_f64().unwrap())
        .sum();
    assert!(near(sum, reported));
    let macs = c("macs");
    assert!(near(
        r["energy"]["pj_per_mac"].as_f64().unwrap(),
        reported / macs
    ));
    assert!(near(
        r["energy"]["tops_per_watt"].as_f64().unwrap(),
        2.0 * macs / reported
    ));
    // Only the buffered designs (buf2d's, rowfused) touch SRAM; only reg3d has vertical links.
    let design = r["design"].as_str().unwrap();
    assert_eq!(
        component(r, "sram") > 0.0,
        design.contains("buf") || design.starts_with("rowfused"),
        "{design}"
    );
    assert_eq!(
        component(r, "vertical_links") > 0.0,
        design.starts_with("reg3d")
    );
}

/// Asserts that 3-D buffered is buf2d's run: the same counters, plus a bond crossing per
/// buffer bit; and every row's speedup over buf2d.
fn assert_buffered_3d_is_buf2d(rows: &[Value]) {
    for pair in rows.chunks(DESIGNS) {
        let (b, s) = (&pair[0], &pair[1]);
        assert_eq!(
            (b["design"].as_str(), s["design"].as_str()),
            (Some("buf2d"), Some("3-D buffered"))
        );
        assert_eq!(b["counters"], s["counters"]);
        let c = |n: &str| counter_of(b, n);
        let bits = 16.0 * (c("p_buf_reads") + c("p_buf_writes"))
            + 32.0 * (c("s_buf_reads") + c("s_buf_writes"));
        assert!(bits > 0.0);
        assert!(near(component(s, "buffer_transport"), bits * 0.05));
        for (name, _) in b["energy"]["components_pj"].as_object().unwrap() {
            if name != "buffer_transport" {
                assert_eq!(component(b, name), component(s, name), "{name}");
            }
        }
        for r in pair {
            let speedup = b["cycles"].as_f64().unwrap() / r["cycles"].as_f64().unwrap();
            assert!(near(r["speedup_vs_buf2d"].as_f64().unwrap(), speedup));
        }
    }
}

/// Asserts that rowfused moves buf2d's events in its own order: the same counts but for the
/// cycles and stalls, no rescale (the row's max comes first), and (its S arrays holding whole
/// rows) dearer SRAM accesses.
fn assert_rowfused_is_buf2d_reordered(rows: &[Value]) {
    for at in rows.chunks(DESIGNS) {
        let (b, r) = (&at[0], &at[5]);
        assert_eq!(r["design"], "rowfused");
        for (n, v) in b["counters"].as_object().unwrap() {
            if !n.starts_with("stall_") && n != "cycles" && !n.starts_with("rescales") {
                assert_eq!(&r["counters"][n], v, "{n}");
            }
        }
        assert_eq!(r["counters"]["rescales"], 0);
        assert!(r["cycles"].as_u64() > b["cycles"].as_u64());
        assert!(price_of(r, "s_read") > price_of(b, "s_read"));
    }
}

/// Designs `compare` runs: buf2d, 3-D buffered, reg2d, reg3d, reg3d iso-PE, rowfused, rowfused
/// (spill), unfused, noc2d.
const DESIGNS: usize = 9;

/// Asserts that rowfused (spill) is rowfused with the blocks of a row past its S arrays (32
/// keys: four blocks, so 40 and 64 keys spill one and four) through memory: the same MACs,
/// MAC cycles and engine operations; fewer S-array accesses, the rest read from the landing
/// buffer; the spilled S out and back (as many beats read as written, on top of rowfused's).
fn assert_spill_round_trips(rows: &[Value]) {
    for at in rows.chunks(DESIGNS) {
        let (r, sp) = (&at[5], &at[6]);
        assert_eq!(sp["design"], "rowfused (spill)");
        for n in [
            "macs",
            "mac_cycles",
            "max_ops",
            "exp_ops",
            "p_buf_reads",
            "rf_reads",
        ] {
            assert_eq!(sp["counters"][n], r["counters"][n], "{n}");
        }
        let less = |n: &str| counter_of(r, n) - counter_of(sp, n);
        let extra = |n: &str| counter_of(sp, n) - counter_of(r, n);
        // Each spilled score: not copied in (one write), not read twice, read once from the
        // landing buffer (32 bits).
        assert!(less("s_buf_writes") > 0.0);
        assert_eq!(less("s_buf_reads"), 2.0 * less("s_buf_writes"));
        assert_eq!(extra("land_read_bits"), 32.0 * less("s_buf_writes"));
        assert!(extra("read_beats") > 0.0);
        assert_eq!(extra("read_beats"), extra("write_beats"));
        assert!(component(sp, "dram") > component(r, "dram"));
    }
}

/// Asserts that unfused is rowfused's order with S and P through memory: the same MACs and
/// MAC cycles, more cycles; every S and P beat both ways (as many read as written, on top of
/// rowfused's traffic), priced as DRAM and the landing and staging buffers: no SRAM and no P
/// storage in its energy, more DRAM.
fn assert_unfused_round_trips(rows: &[Value]) {
    for at in rows.chunks(DESIGNS) {
        let (r, u) = (&at[5], &at[7]);
        assert_eq!(u["design"], "unfused");
        for n in ["macs", "mac_cycles", "max_ops", "exp_ops"] {
            assert_eq!(u["counters"][n], r["counters"][n], "{n}");
        }
        assert!(u["cycles"].as_u64() > r["cycles"].as_u64());
        let extra = |n: &str| counter_of(u, n) - counter_of(r, n);
        assert!(extra("read_beats") > 0.0);
        assert_eq!(extra("read_beats"), extra("write_beats"));
        assert_eq!(component(u, "sram"), 0.0);
        assert_eq!(component(u, "p_registers"), 0.0);
        assert!(component(u, "dram") > component(r, "dram"));
    }
}

/// Asserts the claims table: every claim of the sources, each verdict in the exact words, and
/// the claims on standard attention measured against unfused.
fn assert_claims(md: &str) {
    let table = md
        .split("Published claims against regflash's RTL:")
        .nth(1)
        .expect("a claims table");
    for claim in [
        "46–93 % less energy",
        "1.4–7.6× faster",
        "SRAM over 60 % of energy for N > 2k",
        "2–3× energy efficiency at seq > 8192",
        "FlashAttention 64 % faster than standard attention at 2k",
        "FlashAttention 81 % less memory than standard attention at 2k",
        "utilization: fused 0.99 against FLAT's",
        "utilization: fused 0.99 against unfused",
    ] {
        assert!(table.contains(claim), "{claim}");
    }
    let rows: Vec<&str> = table
        .lines()
        .filter(|l| l.starts_with("| "))
        .skip(1)
        .collect();
    assert!(rows.len() >= 11, "{table}");
    for row in rows {
        let verdict = row.trim_end_matches(" |").rsplit(" | ").next().unwrap();
        // The source's own baseline (or baselines) first, where it ran; then every baseline.
        let all = match verdict.split_once(", the source's baseline: ") {
            Some((named, rest)) => {
                assert!(named.starts_with("against "), "{row}");
                let (own, all) = rest.split_once(". In all: ").expect("both verdicts");
                assert!(own == "reproduced" || own == "not reproduced", "{row}");
                all
            }
            None => match verdict.split_once(", the source's baselines: ") {
                Some((named, rest)) => {
                    assert!(
                        named.starts_with("against ") && named.contains(" and "),
                        "{row}"
                    );
                    let (own, all) = rest.split_once(". In all: ").expect("both verdicts");
                    assert!(
                        own == "reproduced"
                            || own.starts_with("reproduced only against ")
                            || own.starts_with("not reproduced against "),
                        "{row}"
                    );
                    all
                }
                None => verdict,
            },
        };
        assert!(
            all == "reproduced"
                || all.starts_with("reproduced only against ")
                || all.starts_with("reproduced against every baseline built ")
                || all.starts_with("not reproduced against ")
                || all.starts_with("not measured: "),
            "{row}"
        );
        // Columns: claim, source, the source's setting, ours, comparison, ...
        let cols: Vec<&str> = row.split(" | ").collect();
        assert!(
            (cols[3].contains(" PEs per tier") && cols[3].contains(", d = ")) || cols[3] == "-",
            "{row}"
        );
        // FuseMax's claims run at its scale: 256 rows, d columns.
        if row.contains("| FuseMax |") {
            assert!(cols[3].starts_with("256×16 PEs per tier"), "{row}");
        }
        // The register-level NPU's claim is against its source's baseline, unfused, first.
        if row.contains("| register-level NPU |") {
            assert!(cols[4].contains(" against unfused, rowfused"), "{row}");
        }
        if row.contains("than standard attention") {
            assert!(cols[4].ends_with(" unfused"), "{row}");
            assert!(!verdict.contains("not modelled"), "{row}");
            assert!(
                verdict.starts_with("against unfused, the source's baseline: ")
                    || verdict.starts_with("not measured"),
                "{row}"
            );
        }
    }
}

/// Asserts that reg3d iso-PE has as many PEs over its two tiers as the 2-D array, on the
/// same problem.
fn assert_iso_pe(rows: &[Value]) {
    for at in rows.chunks(DESIGNS) {
        assert_eq!(at[4]["design"], "reg3d iso-PE");
        assert_eq!(at[4]["pes"], at[2]["pes"]);
        assert_eq!(at[3]["pes"].as_u64(), at[2]["pes"].as_u64().map(|n| 2 * n));
        assert_eq!(at[4]["counters"]["macs"], at[2]["counters"]["macs"]);
    }
}

/// Asserts that the rows `sched` from the schedule's counts and the cycle model's timing
/// equal the RTL run's `rows`, every counter and every energy.
fn assert_model_rows_match(rows: &[Value], sched: &Value) {
    for (r, s) in rows.iter().zip(sched.as_array().unwrap()) {
        assert_eq!(
            (r["source"].as_str(), s["source"].as_str()),
            (Some("rtl"), Some("model"))
        );
        assert!(s["report"].is_null());
        // Every counter but the rescales, which depend on the data the model rows do not have.
        let mut rtl = r["counters"].as_object().unwrap().clone();
        assert!(rtl.remove("rescales").is_some() && rtl.remove("rescales_avoided").is_some());
        assert_eq!(&rtl, s["counters"].as_object().unwrap(), "{}", r["design"]);
        assert_eq!(r["cycles"], s["cycles"], "{}", r["design"]);
        assert_eq!(
            r["speedup_vs_buf2d"], s["speedup_vs_buf2d"],
            "{}",
            r["design"]
        );
        let steps = s["mac_steps"].as_u64().unwrap();
        assert!(steps > 0 && steps <= r["cycles"].as_u64().unwrap());
        assert_eq!(r["mac_steps"].as_u64(), Some(steps));
        assert_eq!(
            r["energy"]["components_pj"], s["energy"]["components_pj"],
            "{}",
            r["design"]
        );
    }
}

/// Asserts that the rows `user` of a table doubling the FP16 multiply differ from the
/// default `rows` in the MAC component only.
fn assert_only_mac_changed(rows: &[Value], user: &Value) {
    for (d, u) in rows.iter().zip(user.as_array().unwrap()) {
        for (name, _) in d["energy"]["components_pj"].as_object().unwrap() {
            let (x, y) = (component(d, name), component(u, name));
            if name == "mac" {
                let macs = d["counters"]["macs"].as_f64().unwrap();
                assert!(near(y - x, macs * 1.1), "{name}: {x} -> {y}");
            } else {
                assert_eq!(x, y, "{name}");
            }
        }
    }
}

#[test]
fn compare_energies_follow_from_counters_and_the_table() {
    let dir = ScratchDir::new("energy-compare").unwrap();
    let svg = dir.path().join("c.svg");
    let md = dir.path().join("c.md");
    let rows = compare(
        &dir,
        "c.json",
        &[
            "--plot",
            svg.to_str().unwrap(),
            "--claims",
            "--out",
            md.to_str().unwrap(),
        ],
    );
    assert_plot(&svg);
    let rows = rows.as_array().unwrap();
    assert_eq!(
        rows.len(),
        2 * DESIGNS,
        "nine designs at two sequence lengths"
    );
    assert_rowfused_is_buf2d_reordered(rows);
    assert_spill_round_trips(rows);
    assert_unfused_round_trips(rows);
    assert_claims(&std::fs::read_to_string(&md).unwrap());
    for r in rows {
        assert_total_from_counters(r);
        assert_sourced_figures(r);
        assert_components_consistent(r);
    }
    assert_buffered_3d_is_buf2d(rows);
    assert_iso_pe(rows);
    // Beyond --max-sim-seq the rows come from the schedule's counts and the cycle model's
    // timing: at simulated lengths both equal the RTL run's, every counter and every energy.
    let sched = compare(&dir, "s.json", &["--max-sim-seq", "0"]);
    assert_model_rows_match(rows, &sched);
    // A user table that doubles the FP16 multiply changes the MAC component and nothing else.
    let toml = dir.path().join("t.toml");
    std::fs::write(&toml, "[figures.fp16_mul]\npj = 2.2\n").unwrap();
    let user = compare(&dir, "u.json", &["--energy", toml.to_str().unwrap()]);
    assert_only_mac_changed(rows, &user);
}

/// An activity in which every counter is non-zero.
fn busy() -> Activity {
    Activity {
        cycles: 1000,
        macs: 4000,
        rf_reads: 4100,
        rf_writes: 4000,
        p_reads: 300,
        p_writes: 300,
        s_reads: 600,
        s_writes: 300,
        vlink_bits: 9000,
        bcast_bit_hops: 50_000,
        max_ops: 300,
        exp_ops: 300,
        row_updates: 30,
        recip_ops: 8,
        norm_ops: 128,
        land_read_bits: 100_000,
        land_write_bits: 16_384,
        staging_bits: 4096,
        dram_bytes: 2048,
        glb_read_bits: 0,
        glb_write_bits: 0,
        noc_fifo_writes: 64,
        noc_fifo_reads: 64,
        noc_hop_bits: 4096,
        noc_src_reads: 16,
    }
}

/// A 4-column design of 16 PEs with 256 B register files, and a 512 B P register bank or, with
/// a buffer, 64 KB SRAM banks.
fn geometry(buffer: Option<Placement>) -> Geometry {
    Geometry {
        rows: 4,
        qk_int_bits: 0,
        operand_bits: 16,
        pes: 16,
        cols: 4,
        landing_bank_bytes: 2048,
        staging_bank_bytes: 512,
        pe_rf_bytes: 256,
        p_bytes: if buffer.is_some() { 64 << 10 } else { 512 },
        buffer,
        scratch: false,
        s_access_bits: 32,
        p_access_bits: 16,
        // Four rows of one 64 KB bank each.
        sram_bytes: if buffer.is_some() { 4 * (64 << 10) } else { 0 },
        clock_mhz: 1000.0,
        glb: None,
        noc: None,
    }
}

/// The components of `t` that differ from the default table's, over a register design, a
/// planar and a stacked buffer, and a register design with INT8 and with INT4 QKᵀ, with FP8
/// operands, and with noc2d's NoC (128-bit flits, four-flit FIFOs, 4-PE links, a 1 KiB
/// source bank of 65-bit words).
fn changed(t: &EnergyTable) -> BTreeSet<&'static str> {
    let d = EnergyTable::default();
    let mut out = BTreeSet::new();
    let geometries = [None, Some(Placement::Planar), Some(Placement::Stacked)]
        .map(geometry)
        .into_iter()
        .chain([8, 4].map(|bits| Geometry {
            qk_int_bits: bits,
            ..geometry(None)
        }))
        .chain([
            Geometry {
                operand_bits: 8,
                ..geometry(None)
            },
            Geometry {
                noc: Some(kernels::energy::NocGeometry {
                    flit_bits: 128,
                    fifo_bytes: 64,
                    link_pitches: 4,
                    src_bytes: 1040,
                    src_word_bits: 65,
                }),
                ..geometry(None)
            },
        ]);
    for g in geometries {
        let (a, b) = (d.breakdown(&busy(), &g), t.breakdown(&busy(), &g));
        for (x, y) in a.components().iter().zip(b.components()) {
            if x.1 != y.1 {
                out.insert(x.0);
            }
        }
    }
    out
}

#[test]
fn one_changed_figure_changes_exactly_the_components_that_use_it() {
    let expect: &[(&str, &[&str])] = &[
        ("fp16_mul", &["mac"]),
        ("fp8_mul", &["mac"]),
        ("fp32_add", &["mac", "softmax"]),
        ("fp32_mul", &["softmax"]),
        ("int32_add", &["softmax", "mac"]),
        ("int8_mul", &["mac"]),
        ("int4_mul", &["mac"]),
        ("exp2", &["softmax"]),
        ("recip", &["softmax"]),
        ("dram_bit", &["dram"]),
        ("bond_bit", &["vertical_links", "buffer_transport"]),
        ("wire_bit_mm", &["broadcast", "noc", "noc_links"]),
        ("sram_leak", &["leakage"]),
        ("static_pe_cycle", &["static"]),
    ];
    assert_eq!(expect.len(), KEYS.len(), "every figure is tested");
    for (key, want) in expect {
        let t = table_from_toml(&format!("[figures.{key}]\npj = 123.0\n"), "t.toml").unwrap();
        let want: BTreeSet<&str> = want.iter().copied().collect();
        assert_eq!(changed(&t), want, "{key}");
        assert!(t.figures[key].source.contains("t.toml"));
    }
    // A storage point prices the storage interpolated from it: the 4-byte register point moves
    // the PE register files (256 B), register P banks, the landing and staging banks and the
    // NoC's FIFOs and source bank, not the 64 KB SRAM banks; the 128 KB macro point moves the
    // SRAM only.
    let regs = "[[storage]]\nbytes = 4\nread_pj = 1.0\nwrite_pj = 1.0\nnode_nm = 40\n";
    let set = |v: &[&'static str]| v.iter().copied().collect::<BTreeSet<_>>();
    assert_eq!(
        changed(&table_from_toml(regs, "t").unwrap()),
        set(&["pe_registers", "p_registers", "landing", "staging", "noc"])
    );
    let sram = "[[storage]]\nbytes = 131072\nread_pj = 50.0\nwrite_pj = 50.0\nnode_nm = 45\n";
    assert_eq!(
        changed(&table_from_toml(sram, "t").unwrap()),
        set(&["sram"])
    );
    // Named choices: the off-chip memory prices DRAM only, at its figure; the wire's swing
    // every wire.
    let lp = table_from_toml("dram = \"lpddr4\"", "t").unwrap();
    assert_eq!(changed(&lp), set(&["dram"]));
    let g = geometry(None);
    let (hbm, lpddr) = (
        EnergyTable::default().breakdown(&busy(), &g).dram,
        lp.breakdown(&busy(), &g).dram,
    );
    assert!((lpddr / hbm - 8.0 / 3.97).abs() < 1e-12, "{lpddr} / {hbm}");
    assert!(
        lp.basis().contains("DRAM lpddr4 (8 pJ/bit)"),
        "{}",
        lp.basis()
    );
    let full = table_from_toml("wire = \"full-swing\"", "t").unwrap();
    assert_eq!(changed(&full), set(&["broadcast", "noc", "noc_links"]));
    assert!(
        full.basis().contains("full-swing wires"),
        "{}",
        full.basis()
    );
    // The default states its own: HBM2, low-swing wires, the PEs' measured clock and leakage.
    let basis = EnergyTable::default().basis();
    for part in [
        "45 nm",
        "DRAM hbm2 (3.97 pJ/bit)",
        "low-swing wires",
        "1.500 pJ per PE-cycle",
    ] {
        assert!(basis.contains(part), "{basis}");
    }
    // A PE measured at gate level (`regflash power`'s [gates]) prices the MACs, the register
    // files and the PEs' clock and leakage, at its figures, and nothing else.
    let gates = "[gates]\nnode_nm = 45\nmodule = \"pe_r64_m1_a1_f\"\npe_mac = 5.0\n\
                 pe_rf_read = 4.0\npe_rf_write = 1.0\npe_cycle = 1.25\n";
    let tg = table_from_toml(gates, "g.toml").unwrap();
    assert_eq!(changed(&tg), set(&["mac", "pe_registers", "static"]));
    let (a, g) = (busy(), geometry(None));
    let b = tg.breakdown(&a, &g);
    assert!((b.mac - a.macs as f64 * 5.0).abs() < 1e-9);
    assert!((b.pe_registers - (a.rf_reads as f64 * 4.0 + a.rf_writes as f64)).abs() < 1e-9);
    assert!((b.static_energy - (a.cycles * g.pes) as f64 * 1.25).abs() < 1e-9);
    assert!(tg
        .basis()
        .contains("the PE (pe_r64_m1_a1_f) at gate level: 5.000 pJ per MAC"));
    // With the row engine's: the softmax and the row's control per row-cycle (its units
    // toggle every cycle), a register design's P bank per access; SRAM macros keep theirs.
    let with_row = format!(
        "{gates}row_softmax_cycle = 40.0\nrow_p_read = 0.5\nrow_p_write = 0.25\n\
         row_control_cycle = 9.0\n"
    );
    let tr = table_from_toml(&with_row, "g.toml").unwrap();
    assert_eq!(
        changed(&tr),
        set(&["mac", "pe_registers", "static", "softmax", "p_registers"])
    );
    let br = tr.breakdown(&a, &g);
    assert!((br.softmax - (a.cycles * g.rows) as f64 * 40.0).abs() < 1e-9);
    // (A register design's S accesses, none in a real run, keep the storage curve's price.)
    let no_s = Activity {
        s_reads: 0,
        s_writes: 0,
        ..busy()
    };
    let p_regs = tr.breakdown(&no_s, &g).p_registers;
    assert!((p_regs - (a.p_reads as f64 * 0.5 + a.p_writes as f64 * 0.25)).abs() < 1e-9);
    let statics = (a.cycles * g.pes) as f64 * 1.25 + (a.cycles * g.rows) as f64 * 9.0;
    assert!((br.static_energy - statics).abs() < 1e-9);
    let planar = geometry(Some(Placement::Planar));
    assert_eq!(
        tr.breakdown(&a, &planar).sram,
        tg.breakdown(&a, &planar).sram,
        "buf2d's SRAM banks keep their sourced price"
    );
    let partial = format!("{gates}row_softmax_cycle = 40.0\n");
    let e = format!("{:#}", table_from_toml(&partial, "g.toml").unwrap_err());
    assert!(e.contains("give all four or none"), "{e}");
    // At another node they scale as logic.
    let tg7 = table_from_toml(&format!("node_nm = 7\n{gates}"), "g.toml").unwrap();
    let k = scale(45.0, 7.0).unwrap();
    assert!((tg7.breakdown(&a, &g).mac - b.mac * k).abs() < 1e-6);
    // Knobs: the PE pitch prices the broadcasts and the NoC's links (an array's side), the
    // static term every cycle, the buffer's wire the planar buffer's bits.
    assert_eq!(
        changed(&table_from_toml("pe_pitch_um = 80.0", "t").unwrap()),
        set(&["broadcast", "noc_links"])
    );
    assert_eq!(
        changed(&table_from_toml("static_pj_per_pe_cycle = 0.1", "t").unwrap()),
        set(&["static"])
    );
    assert_eq!(
        changed(&table_from_toml("buffer_wire_mm = 0.5", "t").unwrap()),
        set(&["buffer_transport"])
    );
    // CACTI's fixed part of an access prices the SRAM macros' accesses only: register arrays
    // cost per bit.
    let share = "[sram_fixed_share]\nread = 0.2\nwrite = 0.2\n";
    assert_eq!(
        changed(&table_from_toml(share, "t").unwrap()),
        set(&["sram"])
    );
    // The node scales every on-chip figure and leaves DRAM and the bonds as they are.
    let t7 = table_from_toml("node_nm = 7", "t").unwrap();
    let g = geometry(None);
    let (a, b) = (
        EnergyTable::default().breakdown(&busy(), &g),
        t7.breakdown(&busy(), &g),
    );
    let k = scale(45.0, 7.0).unwrap();
    assert!((b.mac / a.mac - k).abs() < 1e-12 && (k - 0.0943).abs() < 1e-3);
    assert_eq!((a.dram, a.vertical_links), (b.dram, b.vertical_links));
    // Wires scale with the supply voltage only; SRAM macros more slowly than logic.
    assert!((b.broadcast / a.broadcast - 0.46).abs() < 1e-12);
    let planar = geometry(Some(Placement::Planar));
    let (a_s, b_s) = (
        EnergyTable::default().breakdown(&busy(), &planar),
        t7.breakdown(&busy(), &planar),
    );
    let k_sram = kernels::energy::scale_sram(45.0, 7.0).unwrap();
    assert!((b_s.sram / a_s.sram - k_sram).abs() < 1e-12 && k_sram > 1.5 * k);
    assert!((b_s.leakage / a_s.leakage - k_sram).abs() < 1e-12 && a_s.leakage > 0.0);
    // A restated point keeps the class of the point it replaces: the 4-byte register stays
    // logic, so restating it changes nothing at 7 nm.
    let restated =
        "node_nm = 7\n[[storage]]\nbytes = 4\nread_pj = 0.576\nwrite_pj = 0.576\nnode_nm = 40\n";
    let t7r = table_from_toml(restated, "t").unwrap();
    assert_eq!(t7r.storage[0].scaling, kernels::energy::Scaling::Logic);
    assert_eq!(t7r.breakdown(&busy(), &g), t7.breakdown(&busy(), &g));
    // A figure's scaling class can be set; a class that does not exist is refused.
    let wire_as_logic = "[figures.wire_bit_mm]\npj = 0.0404\nscaling = \"logic\"\nnode_nm = 7\n";
    let t = table_from_toml(wire_as_logic, "t").unwrap();
    assert_eq!(
        t.figures["wire_bit_mm"].scaling,
        kernels::energy::Scaling::Logic
    );
    // The PE register files: the 40 nm register point and the 45 nm SRAM points, each scaled.
    assert!(b.pe_registers < a.pe_registers * 0.2);
}

#[test]
fn bad_energy_tables_are_refused_with_the_reason() {
    for (toml, says) in [
        ("[figures.fp4_mul]\npj = 1.0\n", "unknown figure `fp4_mul`"),
        ("nodes_nm = 7\n", "unknown field `nodes_nm`"),
        ("[figures.fp16_mul]\npj = -1.0\n", "fp16_mul: pj = -1"),
        (
            "[figures.fp16_mul]\npj = 1.0\nwatts = 2\n",
            "unknown field `watts`",
        ),
        ("node_nm = 0.5\n", "outside the scaling range"),
        ("node_nm = 250\n", "outside the scaling range"),
        ("pe_pitch_um = -3.0\n", "pe_pitch_um = -3"),
        (
            "[[storage]]\nbytes = 0\nread_pj = 1.0\nwrite_pj = 1.0\nnode_nm = 45\n",
            "bytes > 0",
        ),
        (
            "[[storage]]\nbytes = 64\nread_pj = 0.0\nwrite_pj = 1.0\nnode_nm = 45\n",
            "must be finite and > 0",
        ),
        (
            "[[storage]]\nbytes = 64\nread_pj = 1.0\nwrite_pj = 1.0\nnode_nm = 45\n\
             [[storage]]\nbytes = 64\nread_pj = 2.0\nwrite_pj = 2.0\nnode_nm = 45\n",
            "two [[storage]] points of 64 bytes",
        ),
        ("[[storage]]\nbytes = 64\nread_pj = 1.0\n", "missing field"),
        ("node_nm = \"seven\"", "invalid type"),
        (
            "[figures.dram_bit]\npj = 1.0\nscaling = \"quantum\"\n",
            "scaling = \"quantum\" is not a class",
        ),
        (
            "[sram_fixed_share]\nread = 1.2\nwrite = 0.3\n",
            "sram_fixed_share.read = 1.2",
        ),
        ("dram = \"ddr9\"\n", "dram = \"ddr9\" is not one"),
        (
            "[gates]\nnode_nm = 45\nmodule = \"pe\"\npe_mac = -1.0\npe_rf_read = 1.0\n\
             pe_rf_write = 1.0\npe_cycle = 1.0\n",
            "gates.pe_mac = -1",
        ),
        ("[gates]\nnode_nm = 45\n", "missing field"),
        ("wire = \"no-swing\"\n", "choose low-swing, full-swing"),
        (
            "dram = \"hbm2\"\n[figures.dram_bit]\npj = 1.0\n",
            "both `dram` and [figures.dram_bit]",
        ),
        (
            "static_pj_per_pe_cycle = 0.1\n[figures.static_pe_cycle]\npj = 1.0\n",
            "give one",
        ),
    ] {
        let e = format!("{:#}", table_from_toml(toml, "bad.toml").unwrap_err());
        assert!(e.contains(says) && e.contains("bad.toml"), "{toml}: {e}");
    }
    // From the command line: a missing file and a bad table stop before any simulation.
    let dir = ScratchDir::new("energy-bad").unwrap();
    let bad = dir.path().join("bad.toml");
    std::fs::write(&bad, "[figures.fp4_mul]\npj = 1.0\n").unwrap();
    for (flag, path, says) in [
        (
            "--energy",
            bad.to_str().unwrap(),
            "unknown figure `fp4_mul`",
        ),
        (
            "--energy",
            "/nonexistent/t.toml",
            "cannot read the energy table",
        ),
        ("--dram", "ddr9", "choose hbm2, lpddr4"),
    ] {
        for cmd in ["sim", "compare"] {
            let o = regflash(&[cmd, "--seq", "8", flag, path]);
            assert!(
                !o.status.success() && text(&o).contains(says),
                "{cmd}: {}",
                text(&o)
            );
            assert!(!text(&o).contains("panicked"), "{}", text(&o));
        }
    }
    // A chosen DRAM prices the run's DRAM bits at its figure and says so.
    let report = dir.path().join("lp.json");
    let o = regflash(&[
        "sim",
        "--seq",
        "8",
        "--dram",
        "lpddr4",
        "--report",
        report.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(
        text(&o).contains("energy table: 45 nm; DRAM lpddr4 (8 pJ/bit)"),
        "{}",
        text(&o)
    );
    let r: Value = serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    let c = |n: &str| r["counters"][n].as_f64().unwrap();
    let bits = 256.0 * (c("read_beats") + c("write_beats"));
    let dram = r["energy"]["components_pj"]["dram"].as_f64().unwrap();
    assert!(near(dram, bits * 8.0), "{dram} vs {bits} bits");
    assert!(r["energy"]["basis"].as_str().unwrap().contains("lpddr4"));
}

/// `compare --iso area`'s refusals come before any run: the library flags without it, a
/// library without a sourced SRAM density, a bad density, an unknown library, a utilization
/// outside (0, 1].
#[test]
fn iso_area_refuses_what_it_cannot_price_before_running() {
    for (args, says) in [
        (
            vec!["--lib", "nangate45"],
            "price the designs' silicon: add --iso area",
        ),
        (
            vec!["--iso", "area", "--lib", "osu018"],
            "no sourced SRAM density at osu018",
        ),
        (
            vec!["--iso", "area", "--lib", "osu018", "--sram-mm2-per-mib=-1"],
            "--sram-mm2-per-mib must be a positive density",
        ),
        (
            vec!["--iso", "area", "--lib", "tsmc3"],
            "--lib tsmc3 is not a library regflash knows",
        ),
        (vec!["--iso", "volume"], "invalid value 'volume'"),
        (vec!["--utilization", "0.7"], "add --iso area"),
        (vec!["--clock", "synth"], "add --iso area"),
        (
            vec!["--iso", "area", "--utilization", "1.5"],
            "--utilization is the share of the placed area",
        ),
    ] {
        let mut all = vec!["compare", "--seq", "8"];
        all.extend(&args);
        let o = regflash(&all);
        let t = text(&o);
        assert!(!o.status.success() && t.contains(says), "{args:?}: {t}");
        assert!(!t.contains("seq 8:") && !t.contains("panicked"), "{t}");
    }
}

/// `regflash thermal`'s refusals come before the ASIC flow maps anything: a grid too coarse,
/// stacked banks on a design without SRAM banks, an unknown memory placement, a clock that is
/// not one, air at or above the limit, floorplans at a node the energy table does not price.
#[test]
fn thermal_refuses_what_it_cannot_model_before_mapping() {
    for (args, says) in [
        (vec!["--grid", "2"], "--grid is the cells a side"),
        (vec!["--stacked-banks"], "has none: use --variant buf2d"),
        (
            vec!["--memory-tier", "sideways"],
            "--memory-tier is near-lid",
        ),
        (vec!["--clock-mhz", "0"], "--clock-mhz takes clocks above 0"),
        (
            vec!["--clock-mhz", "1500,nan"],
            "--clock-mhz takes clocks above 0",
        ),
        (
            vec!["--ambient-c", "90"],
            "--ambient-c is the air's temperature",
        ),
        (vec!["--lib", "asap7"], "the energy table prices at 45 nm"),
    ] {
        let mut all = vec!["thermal", "--seq", "64"];
        all.extend(&args);
        let o = regflash(&all);
        let t = text(&o);
        assert!(!o.status.success() && t.contains(says), "{args:?}: {t}");
        assert!(
            !t.contains("mapping the design") && !t.contains("panicked"),
            "{t}"
        );
    }
}

/// `compare --kv-heads`: grouped-query attention on a GLB design reads each shared K/V head
/// from memory once, so every design's read beats fall (four query heads on one K/V head read
/// half the beats of four K/V heads at 512 tokens, Q being the other half), from the model's
/// rows, which RTL runs equal; a K/V head count that does not divide the heads is refused.
/// `--batch 2` of that grouped attention: each sequence reads its own K/V head, so twice the
/// tokens, MACs and read beats.
#[test]
fn compare_with_shared_kv_heads_reads_each_kv_head_once() {
    let dir = ScratchDir::new("energy-gqa").unwrap();
    let run = |kv: &str, batch: &str| -> Value {
        let path = dir.path().join(format!("kv{kv}b{batch}.json"));
        let o = regflash(&[
            "compare",
            "--preset",
            "npu16",
            "--seq",
            "512",
            "--heads",
            "4",
            "--kv-heads",
            kv,
            "--batch",
            batch,
            "--max-sim-seq",
            "0",
            "--report",
            path.to_str().unwrap(),
        ]);
        assert!(o.status.success(), "{}", text(&o));
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap()
    };
    let (mha, gqa, two) = (run("4", "1"), run("1", "1"), run("1", "2"));
    fn rows(v: &Value) -> std::slice::Iter<'_, Value> {
        v.as_array().unwrap().iter()
    }
    for ((a, b), c) in rows(&mha).zip(rows(&gqa)).zip(rows(&two)) {
        // A row's figure, or its counter's.
        let n = |r: &Value, k: &str| {
            r[k].as_u64()
                .unwrap_or_else(|| r["counters"][k].as_u64().unwrap())
        };
        assert!(n(b, "read_beats") < n(a, "read_beats"), "{}", a["design"]);
        assert_eq!(a["counters"]["macs"], b["counters"]["macs"]);
        for k in ["tokens", "macs", "read_beats"] {
            assert_eq!(n(c, k), 2 * n(b, k), "{} {k}", a["design"]);
        }
        assert_eq!(c["kv_heads"], 2);
    }
    let o = regflash(&["compare", "--preset", "npu16", "--batch", "0"]);
    assert!(
        !o.status.success() && text(&o).contains("--batch 0"),
        "{}",
        text(&o)
    );
    let o = regflash(&[
        "compare",
        "--preset",
        "npu16",
        "--heads",
        "4",
        "--kv-heads",
        "3",
    ]);
    assert!(!o.status.success());
    assert!(
        text(&o).contains("--kv-heads 3 must divide --heads 4"),
        "{}",
        text(&o)
    );
}

/// `compare --workload qwen`: Qwen-like attention (d = 128, 28 query heads on 4 K/V heads)
/// on the configuration's array, model rows; the heads come from the workload, so --heads
/// beside it is refused.
#[test]
fn compare_runs_a_workload_at_its_heads() {
    let dir = ScratchDir::new("energy-workload").unwrap();
    let path = dir.path().join("q.json");
    let o = regflash(&[
        "compare",
        "--preset",
        "npu16",
        "--workload",
        "qwen",
        "--seq",
        "512",
        "--report",
        path.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(text(&o).contains("d 128"), "{}", text(&o));
    let rows: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    for r in rows.as_array().unwrap() {
        assert_eq!(r["tokens"].as_u64(), Some(28 * 512), "{}", r["design"]);
        assert_eq!(r["kv_heads"].as_u64(), Some(4));
        assert_eq!(r["source"], "model");
    }
    let o = regflash(&[
        "compare",
        "--preset",
        "npu16",
        "--workload",
        "opt",
        "--heads",
        "2",
    ]);
    assert!(!o.status.success());
    assert!(
        text(&o).contains("--workload sets the heads"),
        "{}",
        text(&o)
    );
}
