//! The IR's operators, emitted to Verilog and run under Verilator, against Rust arithmetic:
//! every operator at an odd width, a width just under 64 (full products up to 120 bits) and a
//! width over 64 (wide ports), plus registers with reset and enable and a memory with two write
//! ports. This checks the builder's constant folds and slice push-through, the emitter's width
//! and signedness handling, and the simulator bridge's wide ports.

use std::collections::BTreeMap;

use gen::tools::ScratchDir;
use hdl::fp::arith::{clamp, leading_zeros, shift_right_sticky};
use hdl::{cat, mux, mux_index, Design, ModuleBuilder, Sig};
use kernels::patterns::Rng;
use proptest::prelude::*;
use proptest::test_runner::Config;
use verilator_tb::{Dut, Model};

fn mask(w: u32) -> u128 {
    if w >= 128 {
        u128::MAX
    } else {
        (1u128 << w) - 1
    }
}

fn sext(x: u128, w: u32) -> i128 {
    ((x << (128 - w)) as i128) >> (128 - w)
}

/// The operator zoo: (port name, width, IR construction) for inputs x, y (w bits), s (7 bits).
fn zoo(
    m: &mut ModuleBuilder,
    x: Sig,
    y: Sig,
    s: Sig,
    w: u32,
    with_mul: bool,
) -> Vec<(String, Sig)> {
    let mut outs: Vec<(String, Sig)> = vec![];
    let mut out = |name: &str, v: Sig| outs.push((name.to_string(), v));
    out("o_and", x & y);
    out("o_or", x | y);
    out("o_xor", x ^ y);
    out("o_not", !x);
    out("o_add", x + y);
    out("o_sub", x - y);
    out("o_add_wide", x.add_wide(y));
    out("o_add_lit", x + 5);
    if with_mul {
        out("o_mul", x.mul_wide(y));
        out("o_mul_signed", x.mul_wide_signed(y));
    }
    out("o_eq", x.eq(y));
    out("o_ne", x.ne(y));
    out("o_lt", x.lt(y));
    out("o_le", x.le(y));
    out("o_gt", x.gt(y));
    out("o_ge", x.ge(y));
    out("o_lt_s", x.lt_signed(y));
    out("o_le_s", x.le_signed(y));
    out("o_gt_s", x.gt_signed(y));
    out("o_ge_s", x.ge_signed(y));
    out("o_min", x.min(y));
    out("o_shl", x << s);
    out("o_shr", x >> s);
    out("o_sra", x.sra(s));
    out("o_shl3", x << 3);
    out("o_shr3", x >> 3);
    let sra3 = {
        let three = m.lit(2, 3);
        x.sra(three)
    };
    out("o_sra3", sra3);
    out("o_sticky", shift_right_sticky(m, x, s));
    out("o_lzc", leading_zeros(m, x));
    out("o_clamp", clamp(m, s, 5, 3));
    let hi = x.slice(w - 1, w / 2);
    let lo = y.slice(w / 2 - 1, 0);
    out("o_cat", cat(&[hi, lo]));
    let xb = x.bit(1);
    out("o_rep", xb.repeat(5));
    out("o_zext", x.zext(w + 9));
    out("o_sext", x.sext(w + 9));
    let sel = s.bit(0);
    out("o_mux", mux(sel, x, y));
    out("o_red_and", x.all());
    out("o_red_or", x.any());
    out("o_red_xor", x.parity());
    // Slices pushed through a mux, a bitwise op and a concatenation.
    let muxed = mux(sel, x, y);
    let anded = x & y;
    let catted = cat(&[x, y]);
    out("o_slice_mux", muxed.slice(w - 2, 1));
    out("o_slice_and", anded.slice(w - 1, 2));
    out("o_slice_cat", catted.slice(w + 3, w - 4));
    // Constant folds: identities and all-constant expressions.
    let zero = m.zero(w);
    let ones = m.ones(w);
    let and0 = x & zero;
    let or_ones = x | ones;
    let plus0 = x + zero;
    out("o_fold_and0", and0);
    out("o_fold_or1", or_ones);
    let k3 = m.lit(8, 3);
    let k4 = m.lit(8, 4);
    let k7 = k3 + k4;
    let k2 = m.lit(8, 2);
    let k14 = k7.mul_wide(k2);
    let folded = plus0 ^ x;
    let fz = folded.any();
    let k14_1 = k14.trunc(8);
    let k14_b = k14_1.zext(9);
    let fz9 = fz.zext(9);
    out("o_fold_const", k14_b | fz9);
    // Reductions over concatenations with constant parts fold away.
    let z3 = m.zero(3);
    let o3 = m.ones(3);
    let one = m.lit(1, 1);
    let x_z = cat(&[x, z3]);
    let x_o = cat(&[o3, x]);
    let x_1 = cat(&[x, one]);
    out("o_any_xz", x_z.any());
    out("o_all_xo", x_o.all());
    out("o_all_xz", x_z.all());
    out("o_any_x1", x_1.any());
    // Unsigned comparisons with a constant at the end of the range fold to constants.
    let zero_w = m.zero(w);
    let ones_w = m.ones(w);
    out("o_ge_zero", x.ge(zero_w));
    out("o_lt_zero", x.lt(zero_w));
    out("o_le_max", x.le(ones_w));
    out("o_gt_max", x.gt(ones_w));
    let idx = s.slice(2, 0);
    let c2 = x ^ y;
    let c3 = !y;
    let c4 = x + y;
    out("o_mux_index", mux_index(idx, &[x, y, c2, c3, c4]));
    outs
}

/// Rust reference of the zoo. `None` where the IR leaves the value unspecified.
fn reference(x: u128, y: u128, s: u32, w: u32, with_mul: bool) -> BTreeMap<String, Option<u128>> {
    let m = mask(w);
    let (sx, sy) = (sext(x, w), sext(y, w));
    let shl = |v: u128, n: u32| if n >= w { 0 } else { (v << n) & m };
    let shr = |v: u128, n: u32| if n >= w { 0 } else { v >> n };
    let sra = |v: u128, n: u32| (sext(v, w) >> n.min(127)) as u128 & m;
    let mut r = BTreeMap::new();
    let mut put = |n: &str, v: u128| {
        r.insert(n.to_string(), Some(v));
    };
    put("o_and", x & y);
    put("o_or", x | y);
    put("o_xor", x ^ y);
    put("o_not", !x & m);
    put("o_add", x.wrapping_add(y) & m);
    put("o_sub", x.wrapping_sub(y) & m);
    put("o_add_wide", x + y);
    put("o_add_lit", x.wrapping_add(5) & m);
    if with_mul {
        put("o_mul", x * y);
        put("o_mul_signed", (sx * sy) as u128 & mask(2 * w));
    }
    put("o_eq", (x == y) as u128);
    put("o_ne", (x != y) as u128);
    put("o_lt", (x < y) as u128);
    put("o_le", (x <= y) as u128);
    put("o_gt", (x > y) as u128);
    put("o_ge", (x >= y) as u128);
    put("o_lt_s", (sx < sy) as u128);
    put("o_le_s", (sx <= sy) as u128);
    put("o_gt_s", (sx > sy) as u128);
    put("o_ge_s", (sx >= sy) as u128);
    put("o_min", x.min(y));
    put("o_shl", shl(x, s));
    put("o_shr", shr(x, s));
    put("o_sra", sra(x, s));
    put("o_shl3", shl(x, 3));
    put("o_shr3", shr(x, 3));
    put("o_sra3", sra(x, 3));
    let lost = if s >= w { x } else { x & ((1u128 << s) - 1) };
    put("o_sticky", shr(x, s) | (lost != 0) as u128);
    put(
        "o_lzc",
        if x == 0 {
            w as u128
        } else {
            (x.leading_zeros() - (128 - w)) as u128
        },
    );
    put("o_clamp", s.min(5) as u128);
    let half = w / 2;
    put("o_cat", ((x >> half) << half) | (y & mask(half)));
    put("o_rep", if x >> 1 & 1 == 1 { 0b11111 } else { 0 });
    put("o_zext", x);
    put("o_sext", sext(x, w) as u128 & mask(w + 9));
    let muxed = if s & 1 == 1 { x } else { y };
    put("o_mux", muxed);
    put("o_red_and", (x == m) as u128);
    put("o_red_or", (x != 0) as u128);
    put("o_red_xor", (x.count_ones() & 1) as u128);
    put("o_slice_mux", (muxed >> 1) & mask(w - 2));
    put("o_slice_and", ((x & y) >> 2) & mask(w - 2));
    put("o_slice_cat", (((x << w) | y) >> (w - 4)) & mask(8));
    put("o_fold_and0", 0);
    put("o_fold_or1", m);
    put("o_fold_const", 14);
    put("o_any_xz", (x != 0) as u128);
    put("o_all_xo", (x == m) as u128);
    put("o_all_xz", 0);
    put("o_any_x1", 1);
    put("o_ge_zero", 1);
    put("o_lt_zero", 0);
    put("o_le_max", 1);
    put("o_gt_max", 0);
    let idx = s & 7;
    let choices = [x, y, x ^ y, !y & m, x.wrapping_add(y) & m];
    r.insert("o_mux_index".into(), choices.get(idx as usize).copied());
    r
}

fn build_zoo(w: u32, with_mul: bool) -> (Model, ScratchDir) {
    let mut d = Design::new();
    let top = d.define(&format!("ops_w{w}"), |_, m| {
        let x = m.input("x", w);
        let y = m.input("y", w);
        let s = m.input("s", 7);
        for (name, v) in zoo(m, x, y, s, w, with_mul) {
            m.output(&name, v);
        }
    });
    let dir = ScratchDir::new("ops").unwrap();
    let spec = gen::OutputSpec::new(&d, &top.name, serde_json::json!({ "test": "ir_ops" }));
    gen::write_design(&spec, dir.path()).unwrap();
    let report = gen::flow::lint(dir.path()).unwrap();
    assert!(report.passed(), "{}", report.summary());
    (Model::build(dir.path()).unwrap(), dir)
}

fn words(v: u128, w: u32) -> Vec<u32> {
    (0..w.div_ceil(32))
        .map(|i| (v >> (32 * i)) as u32)
        .collect()
}

fn value(ws: &[u32]) -> u128 {
    ws.iter()
        .rev()
        .fold(0u128, |acc, &x| (acc << 32) | x as u128)
}

fn check(dut: &mut Dut, x: u128, y: u128, s: u32, w: u32, with_mul: bool) -> Result<(), String> {
    dut.set_words("x", &words(x, w));
    dut.set_words("y", &words(y, w));
    dut.set("s", s as u64);
    for (name, expected) in reference(x, y, s, w, with_mul) {
        let actual = value(&dut.get_words(&name));
        if let Some(e) = expected {
            if e != actual {
                return Err(format!(
                    "width {w}: {name}(x={x:#x}, y={y:#x}, s={s}) = {actual:#x}, expected {e:#x}"
                ));
            }
        }
    }
    Ok(())
}

fn run_width(w: u32, with_mul: bool, seed: u64) {
    let (model, _dir) = build_zoo(w, with_mul);
    let mut dut = model.dut().unwrap();
    let m = mask(w);
    let sign = 1u128 << (w - 1);
    let corners = [
        0,
        1,
        m,
        sign,
        sign - 1,
        sign + 1,
        m - 1,
        0x5555_5555_5555_5555_5555_5555_5555_5555 & m,
    ];
    for &x in &corners {
        for &y in &corners {
            for s in [0, 1, 3, w - 1, w, w + 1, 127] {
                check(&mut dut, x, y, s, w, with_mul).unwrap_or_else(|e| panic!("{e}"));
            }
        }
    }
    let config = Config {
        cases: 20_000,
        failure_persistence: None,
        ..Config::default()
    };
    let dut = std::cell::RefCell::new(dut);
    let strategy = (any::<u128>(), any::<u128>(), 0u32..128);
    regflash::verify::seeds::run(config, seed, &strategy, |(x, y, s)| {
        check(&mut dut.borrow_mut(), x & m, y & m, s, w, with_mul).map_err(TestCaseError::fail)
    })
    .unwrap_or_else(|e| panic!("{e}"));
}

#[test]
fn operators_at_an_odd_width() {
    run_width(13, true, 21);
}

#[test]
fn operators_just_under_64_bits_with_full_products() {
    run_width(60, true, 22);
}

#[test]
fn operators_on_wide_ports() {
    run_width(100, false, 23);
}

/// Registers (reset value, enable, no reset) and a memory with two write ports and two read
/// ports, against a Rust model, cycle by cycle.
#[test]
fn registers_and_memories() {
    let mut d = Design::new();
    let top = d.define("state_zoo", |_, m| {
        let en = m.input("en", 1);
        let d_in = m.input("d", 70);
        let we0 = m.input("we0", 1);
        let we1 = m.input("we1", 1);
        let wa0 = m.input("wa0", 3);
        let wa1 = m.input("wa1", 3);
        let ra = m.input("ra", 3);
        let r = m.reg("held", 70, Some(0x1234));
        m.set_next(r, d_in);
        m.set_enable(r, en);
        m.output("q_held", r.q);
        let plain = m.reg("plain", 70, None);
        m.set_next(plain, d_in);
        m.output("q_plain", plain.q);
        let mem = m.memory("mem", 8, 70);
        let inc = d_in + 1;
        m.mem_write(mem, we0, wa0, d_in);
        m.mem_write(mem, we1, wa1, inc);
        let rd0 = m.mem_read(mem, ra);
        let rd1 = m.mem_read(mem, wa0);
        m.output("rd0", rd0);
        m.output("rd1", rd1);
    });
    let dir = ScratchDir::new("state").unwrap();
    gen::write_design(
        &gen::OutputSpec::new(&d, &top.name, serde_json::json!({})),
        dir.path(),
    )
    .unwrap();
    let report = gen::flow::lint(dir.path()).unwrap();
    assert!(report.passed(), "{}", report.summary());
    let model = Model::build(dir.path()).unwrap();
    let mut dut = model.dut().unwrap(); // reset applied
    assert_eq!(value(&dut.get_words("q_held")), 0x1234, "reset value");

    let mut held = 0x1234u128;
    let mut mem = [0u128; 8];
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15u64);
    let mut next = || rng.next_u64();
    for cycle in 0..5000 {
        let en = next() & 1;
        let dv = ((next() as u128) << 64 | next() as u128) & mask(70);
        let (we0, we1) = (next() & 1, next() & 1);
        let (wa0, wa1, ra) = (next() % 8, next() % 8, next() % 8);
        dut.set("en", en);
        dut.set_words("d", &words(dv, 70));
        dut.set("we0", we0);
        dut.set("we1", we1);
        dut.set("wa0", wa0);
        dut.set("wa1", wa1);
        dut.set("ra", ra);
        // Asynchronous reads see the state before this cycle's edge.
        assert_eq!(
            value(&dut.get_words("rd0")),
            mem[ra as usize],
            "cycle {cycle}: rd0"
        );
        assert_eq!(
            value(&dut.get_words("rd1")),
            mem[wa0 as usize],
            "cycle {cycle}: rd1"
        );
        dut.tick();
        if en == 1 {
            held = dv;
        }
        if we0 == 1 {
            mem[wa0 as usize] = dv;
        }
        if we1 == 1 {
            // The later write port wins on the same address.
            mem[wa1 as usize] = (dv + 1) & mask(70);
        }
        assert_eq!(
            value(&dut.get_words("q_held")),
            held,
            "cycle {cycle}: q_held"
        );
        assert_eq!(
            value(&dut.get_words("q_plain")),
            dv,
            "cycle {cycle}: q_plain"
        );
    }
    // Reset again: only the reset register returns to its reset value.
    dut.reset(1);
    assert_eq!(value(&dut.get_words("q_held")), 0x1234);
}

/// Assertions: lint-clean with and without REGFLASH_ASSERTIONS, counted by the simulator when
/// they fail, and a signal that only an assertion reads is rejected at emission.
#[test]
fn assertions_fire_in_simulation() {
    let mut d = Design::new();
    let top = d.define("asserted", |_, m| {
        let x = m.input("x", 4);
        let q = m.delay("held", x);
        m.output("y", q);
        let seven = m.lit(4, 7);
        let ok = q.ne(seven);
        m.assert_always("never_seven", ok, "the held value must not be 7");
    });
    let dir = ScratchDir::new("assert").unwrap();
    gen::write_design(
        &gen::OutputSpec::new(&d, &top.name, serde_json::json!({})),
        dir.path(),
    )
    .unwrap();
    let text = std::fs::read_to_string(dir.path().join("asserted.v")).unwrap();
    assert!(
        text.contains("`ifdef REGFLASH_ASSERTIONS") && text.contains("$error"),
        "{text}"
    );
    let report = gen::flow::lint(dir.path()).unwrap();
    assert!(report.passed(), "{}", report.summary());
    let model = Model::build(dir.path()).unwrap();
    let mut dut = model.dut().unwrap();
    dut.set("x", 3);
    dut.step(3);
    assert_eq!(dut.assertion_failures(), 0);
    dut.set("x", 7);
    dut.step(3);
    assert!(dut.assertion_failures() >= 1, "the assertion fired");

    let mut d = Design::new();
    let top = d.define("assert_only", |_, m| {
        let x = m.input("x", 4);
        let q = m.delay("held", x);
        let y = m.input("y", 1);
        m.output("z", y);
        let ok = q.any();
        m.assert_always("nonzero", ok, "held must be nonzero");
    });
    let err = gen::render(&d, &top.name, &serde_json::json!({}))
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("held_q") && err.contains("never read"),
        "{err}"
    );
}

/// Clock gates (`hdl::clock_gate`): registers behind a gate load at exactly the edges an
/// enabled register does, under Verilator (the flow's simulator) and under Icarus, with the
/// gate's enable from an input and from a register; the design lints clean with and without
/// the gates, and the generic flow (which reads it without them) finds no latch.
#[test]
fn clock_gated_registers_load_as_enabled_ones() {
    let mut d = Design::new();
    let gate = hdl::clock_gate::build(&mut d);
    let top = d.define("gate_zoo", |_, m| {
        let en = m.input("en", 1);
        let we = m.input("we", 1);
        let wa = m.input("wa", 2);
        let x = m.input("x", 8);
        // Four words behind their gates, written by one port, against a memory.
        let gated = hdl::clock_gate::gated_memory(m, &gate, "w", (4, 8), (we, wa, x));
        let mem = m.memory("mem", 4, 8);
        m.mem_write(mem, we, wa, x);
        let mut words = |mem| -> Vec<Sig> {
            (0..4u64)
                .rev()
                .map(|i| {
                    let a = m.lit(2, i);
                    m.mem_read(mem, a)
                })
                .collect()
        };
        let (g, e) = (words(gated), words(mem));
        m.output("g", cat(&g));
        m.output("e", cat(&e));
        let g_rd = m.mem_read(gated, wa);
        m.output("g_rd", g_rd);
        // A gate opened by a registered enable.
        let en_r = m.delay("en_r", en);
        let gated = m.instantiate(&gate, "u_cg", &hdl::clock_gate::GateIn { en: en_r });
        let gr = m.reg_gated("gr", 8, (gated.gclk, en_r));
        m.set_next(gr, x);
        let er = m.reg("er", 8, None);
        m.set_next(er, x);
        m.set_enable(er, en_r);
        m.output("gr", gr.q);
        m.output("er", er.q);
    });
    let dir = ScratchDir::new("gate").unwrap();
    gen::write_design(
        &gen::OutputSpec::new(&d, &top.name, serde_json::json!({})),
        dir.path(),
    )
    .unwrap();
    let text = std::fs::read_to_string(dir.path().join("gate_zoo.v")).unwrap();
    assert!(
        text.contains("begin : g_w")
            && text.contains("always @(posedge gclk) q <= x;")
            && text.contains("`ifdef REGFLASH_NO_CLOCK_GATES"),
        "{text}"
    );
    let report = gen::flow::lint(dir.path()).unwrap();
    assert!(report.passed(), "{}", report.summary());

    // Verilator, against a model.
    let model = Model::build(dir.path()).unwrap();
    let mut dut = model.dut().unwrap();
    let mut rng = Rng(0x2545_F491_4F6C_DD1Du64);
    let mut next = || rng.next_u64();
    let mut words = [None::<u64>; 4];
    let (mut en_r, mut er) = (0u64, None::<u64>);
    for cycle in 0..4000 {
        let (en, we, wa, x) = (next() & 1, next() % 3 / 2, next() % 4, next() % 256);
        for (port, v) in [("en", en), ("we", we), ("wa", wa), ("x", x)] {
            dut.set(port, v);
        }
        dut.tick();
        if we == 1 {
            words[wa as usize] = Some(x);
        }
        if en_r == 1 {
            er = Some(x);
        }
        en_r = en;
        let (g, e) = (dut.get("g"), dut.get("e"));
        assert_eq!(g, e, "cycle {cycle}: gated words against the memory");
        for (i, w) in words.iter().enumerate() {
            if let Some(w) = w {
                assert_eq!((g >> (8 * i)) & 0xFF, *w, "cycle {cycle}: word {i}");
            }
        }
        if let Some(v) = er {
            assert_eq!(dut.get("gr"), v, "cycle {cycle}: registered-enable gate");
            assert_eq!(dut.get("er"), v, "cycle {cycle}: enabled register");
        }
    }

    // Icarus: the testbench compares the gated and the enabled state after every edge, the
    // inputs changing half a cycle after it.
    let tb = "`timescale 1ns / 1ps\nmodule tb;\n  reg clk = 0, en = 0, we = 0; reg [1:0] wa = 0; \
              reg [7:0] x = 0;\n  wire [31:0] g, e; wire [7:0] g_rd, gr, er;\n  integer i, bad = 0, \
              seen = 0;\n  gate_zoo dut (.clk(clk), .en(en), .we(we), .wa(wa), .x(x), .g(g), .e(e), \
              .g_rd(g_rd), .gr(gr), .er(er));\n  always #5 clk = ~clk;\n  initial begin\n    \
              for (i = 0; i < 4000; i = i + 1) begin\n      @(negedge clk);\n      en = $random; \
              we = $random; wa = $random; x = $random;\n      @(posedge clk); #1;\n      \
              if (i > 8) begin seen = seen + 1; if (g !== e || gr !== er) bad = bad + 1; end\n    \
              end\n    $display(\"compared %0d mismatches %0d\", seen, bad);\n    $finish;\n  \
              end\nendmodule\n";
    std::fs::write(dir.path().join("tb.v"), tb).unwrap();
    let out = std::process::Command::new("iverilog")
        .current_dir(dir.path())
        .args([
            "-g2005", "-o", "sim.vvp", "-s", "tb", "-c", "files.f", "tb.v",
        ])
        .output()
        .expect("iverilog runs (scripts/ensure-tools installs it)");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let run = std::process::Command::new("vvp")
        .current_dir(dir.path())
        .args(["-n", "sim.vvp"])
        .output()
        .unwrap();
    let log = String::from_utf8_lossy(&run.stdout);
    assert!(log.contains("compared 3991 mismatches 0"), "{log}");
}
