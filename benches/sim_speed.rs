//! Simulator speed: cold Verilator build time and simulated cycles per second of the PE, three
//! ways of driving it (batched clocking, batched streaming with new inputs every cycle, and
//! per-cycle FFI calls), and of whole cores. Wall-clock figures of this machine: a benchmark,
//! not a test.
//!
//!     cargo bench --bench sim_speed            # the PE
//!     cargo bench --bench sim_speed -- core small medium npu16 seed
//!                                              # whole cores: cold build, attention cycles/s
//!
//! `REGFLASH_VERILATOR_ARGS` adds Verilator options to every build (part of the cache key).

use std::time::Instant;

use gen::tools::ScratchDir;
use hdl::config::CoreConfig;
use regflash::design::{generate, Target};
use verilator_tb::Model;

struct Row {
    block: String,
    build_s: f64,
    verilog_lines: usize,
    step_rate: f64,
    stream_rate: f64,
    ffi_rate: f64,
}

fn measure(cfg: &CoreConfig, unit: &str, cycles: u64) -> Row {
    let dir = ScratchDir::new("bench").unwrap();
    let manifest = generate(cfg, &Target::Unit(unit.into()), dir.path()).unwrap();
    let verilog_lines = manifest
        .files
        .iter()
        .map(|f| {
            std::fs::read_to_string(dir.path().join(f))
                .unwrap()
                .lines()
                .count()
        })
        .sum();
    // A private cache folder makes the build cold.
    let cache = ScratchDir::new("bench-cache").unwrap();
    std::env::set_var("REGFLASH_CACHE_DIR", cache.path());
    let t = Instant::now();
    let model = Model::build(dir.path()).unwrap();
    let build_s = t.elapsed().as_secs_f64();
    assert!(model.compiled);
    let mut dut = model.dut().unwrap();
    let (a, b, op, addr) = (
        dut.port("a").unwrap(),
        dut.port("b").unwrap(),
        dut.port("op").unwrap(),
        dut.port("addr").unwrap(),
    );
    let (aw, bw) = (
        dut.width(a).div_ceil(32) as usize,
        dut.width(b).div_ceil(32) as usize,
    );
    // 16-bit lanes packed into 32-bit words (a port of one lane uses the low half).
    let lanes = |width: u32, lane: &mut dyn FnMut() -> u32| -> Vec<u32> {
        (0..width.div_ceil(32))
            .map(|i| {
                let lo = lane();
                let hi = if 32 * i + 16 < width { lane() } else { 0 };
                lo | hi << 16
            })
            .collect()
    };
    let (a_bits, b_bits) = (dut.width(a), dut.width(b));
    dut.set_words_id(a, &lanes(a_bits, &mut || 0x3C00));
    dut.set_words_id(b, &lanes(b_bits, &mut || 0x3C00));
    dut.set_id(op, 1);

    let t = Instant::now();
    dut.step(cycles);
    let step_rate = cycles as f64 / t.elapsed().as_secs_f64();

    // Streaming: new operands, op and address every cycle, read port sampled every cycle.
    let rd = dut.port("rd_data").unwrap();
    let per = aw + bw + 2;
    let mut words = Vec::with_capacity(per * cycles as usize);
    let mut x = 0x1234_5678u32;
    let mut random = || {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        x & 0xFFFF
    };
    for i in 0..cycles {
        words.extend(lanes(a_bits, &mut random));
        words.extend(lanes(b_bits, &mut random));
        words.push(1);
        words.push((i % 6) as u32);
    }
    let t = Instant::now();
    let out = dut.run(&[a, b, op, addr], &words, &[rd], cycles);
    let stream_rate = cycles as f64 / t.elapsed().as_secs_f64();
    assert_eq!(
        out.len(),
        cycles as usize * dut.width(rd).div_ceil(32) as usize
    );

    // Per-cycle calls from Rust.
    let n = cycles / 4;
    let t = Instant::now();
    for i in 0..n {
        dut.set_id(addr, i % 6);
        dut.tick();
        std::hint::black_box(dut.get_words_id(rd));
    }
    let ffi_rate = n as f64 / t.elapsed().as_secs_f64();
    Row {
        block: manifest.top,
        build_s,
        verilog_lines,
        step_rate,
        stream_rate,
        ffi_rate,
    }
}

/// A whole core of `preset`: cold build time, then an attention problem of `seq` tokens run
/// through the memory model (the RTL run alone, without the golden model's checks).
fn measure_core(preset: &str, seq: usize) {
    use regflash::verify::attention::{self, MemoryTiming};
    let cfg = CoreConfig::preset(preset).unwrap();
    let p = hdl::core::CoreParams::from_config(&cfg).unwrap();
    let cache = ScratchDir::new("bench-cache").unwrap();
    std::env::set_var("REGFLASH_CACHE_DIR", cache.path());
    let t = Instant::now();
    let (model, _) = regflash::design::simulate(&cfg, &Target::Core).unwrap();
    let build_s = t.elapsed().as_secs_f64();
    let a = regflash::sim::random_problem(
        1,
        seq,
        cfg.head_dim as usize,
        false,
        kernels::flash::OutFormat::Short,
        1,
    );
    let t = Instant::now();
    let run = attention::run(&model, &p, &a, &MemoryTiming::default(), |_, _| {}).unwrap();
    let run_s = t.elapsed().as_secs_f64();
    let cycles = run.counters["cycles"];
    println!(
        "| {preset} core | {seq} | {build_s:.1} | {cycles} | {run_s:.1} | {:.3e} | {:?} |",
        cycles as f64 / run_s,
        std::env::var("REGFLASH_VERILATOR_ARGS").unwrap_or_default()
    );
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if let Some(i) = args.iter().position(|a| a == "core") {
        println!("| design | seq | cold build (s) | cycles | run (s) | cycles/s | extra Verilator args |");
        println!("|---|---:|---:|---:|---:|---:|---|");
        for preset in args[i + 1..].iter().filter(|a| !a.starts_with('-')) {
            let seq = match preset.as_str() {
                "small" => 512,
                "medium" => 512,
                _ => 256,
            };
            measure_core(preset, seq);
        }
        return;
    }
    let small = CoreConfig::preset("small").unwrap();
    let rows = vec![measure(&small, "pe", 2_000_000)];
    println!("| block | Verilog lines | cold Verilator build (s) | cycles/s, batched step | cycles/s, streamed inputs | cycles/s, per-cycle FFI |");
    println!("|---|---:|---:|---:|---:|---:|");
    for r in rows {
        println!(
            "| {} | {} | {:.1} | {:.3e} | {:.3e} | {:.3e} |",
            r.block, r.verilog_lines, r.build_s, r.step_rate, r.stream_rate, r.ffi_rate
        );
    }
}
