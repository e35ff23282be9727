//! The global buffer (GLB) end to end on the whole core: every design with a GLB bit-exact
//! over the directed and random scenarios (with their counters held to the schedule and, on
//! deterministic memory, every cycle to the cycle model), K and V read from memory as often
//! as the GLB's policy says (counted by the testbench's memory, in closed form here), and
//! bank conflicts that stall and are counted.

use hdl::config::{CoreConfig, Variant};
use hdl::core::CoreParams;
use hdl::mem::dma::MemIf;
use hdl::mem::glb::GlbParams;
use kernels::flash::OutFormat;
use kernels::patterns::Pattern;
use regflash::design::{simulate, Target};
use regflash::verify::attention::{
    check_scenarios, directed, run_and_check, Attention, MemoryTiming,
};
use verilator_tb::Model;

/// small (d = 16: a K/V row is one 256-bit beat; Br = Bc = 8) with a GLB of `bytes` in
/// `banks` banks: 2 KiB keep 32 keys of K and of V.
fn with_glb(variant: Variant, bytes: u64, banks: u32, word_bits: u32, ports: u32) -> CoreConfig {
    let mut c = CoreConfig::preset("small").unwrap();
    c.name = format!(
        "small_{}_glb{bytes}_{banks}x{word_bits}p{ports}",
        variant.name()
    );
    c.variant = variant;
    c.glb = GlbParams {
        bytes,
        banks,
        word_bits,
        ports,
        ..GlbParams::default()
    };
    c.validate().unwrap();
    c
}

fn core(cfg: &CoreConfig) -> (Model, CoreParams) {
    let p = CoreParams::from_config(cfg).unwrap();
    (simulate(cfg, &Target::Core).unwrap().0, p)
}

fn scenarios(model: &Model, p: &CoreParams, cases: u32, seed: u64) {
    let dir = directed(p.br() as usize, p.bc() as usize);
    check_scenarios(model, p, &dir, cases, 300, seed).unwrap_or_else(|e| panic!("{e:#}"));
}

fn problem(heads: usize, kv_heads: usize, q_len: usize, k_len: usize, causal: bool) -> Attention {
    Attention::generate(
        Pattern::Unit,
        heads,
        q_len,
        k_len,
        16,
        causal,
        OutFormat::Short,
        7,
    )
    .grouped(kv_heads)
}

/// Beats the testbench's memory served for `a`, with the run checked in full.
fn memory_reads(model: &Model, p: &CoreParams, a: &Attention, timing: &MemoryTiming) -> u64 {
    let (run, check) = run_and_check(model, p, a, timing).unwrap();
    assert!(check.ok(), "{check:?}");
    run.memory.reads
}

/// The reg2d core with a 2 KiB GLB in four one-port banks: bit-exact, counters and cycles
/// exact across the knee (the scenarios reach 300 keys, the GLB holds 32), and the memory
/// reads K and V as often as the policy says, which the testbench counts on its side.
#[test]
fn glb_keeps_kv_on_chip_bit_exact() {
    let cfg = with_glb(Variant::Reg2d, 2048, 4, 0, 1);
    let (model, p) = core(&cfg);
    scenarios(&model, &p, 40, 61);
    let t = MemoryTiming::default();
    // Fits exactly (32 keys): each K/V head once, Q once, whatever the Q heads sharing it.
    let a = problem(4, 2, 32, 32, false);
    assert_eq!(memory_reads(&model, &p, &a, &t), 4 * 32 + 2 * 2 * 32);
    // Four times the capacity: 32 resident keys read once, the other 96 by each of 16 tiles.
    let a = problem(1, 1, 128, 128, false);
    assert_eq!(memory_reads(&model, &p, &a, &t), 128 + 2 * (32 + 16 * 96));
    // Causal, queries shorter than keys (the tiles need 48, 56 and 64 keys): the first 32
    // keys once, the rest by each tile.
    let a = problem(1, 1, 24, 64, true);
    assert_eq!(
        memory_reads(&model, &p, &a, &t),
        24 + 2 * (32 + 16 + 24 + 32)
    );
    // On a memory that moves a sixteenth of a beat a cycle, the GLB's hits make the run faster than
    // the same core without it (cycles are deterministic: the cycle model holds both).
    let slow = MemoryTiming {
        bytes_per_cycle: 2,
        ..MemoryTiming::default()
    };
    let a = problem(2, 1, 32, 32, false);
    let (with, _) = run_and_check(&model, &p, &a, &slow).unwrap();
    let plain = CoreConfig {
        glb: GlbParams::default(),
        ..cfg
    };
    let (model0, p0) = core(&plain);
    let (without, check) = run_and_check(&model0, &p0, &a, &slow).unwrap();
    assert!(check.ok(), "{check:?}");
    assert_eq!(with.out, without.out);
    assert!(
        with.counters["cycles"] * 10 < without.counters["cycles"] * 7,
        "{} cycles with the GLB, {} without",
        with.counters["cycles"],
        without.counters["cycles"]
    );
}

/// One two-port bank group of 128-bit words (K and V in the same group every cycle) under
/// reg3d, whose two tiers stream K and V at once: hit reads collide, stall and are counted,
/// exactly as the cycle model counts them; unfused on the AXI4 master with a GLB of four
/// two-port banks whose upper half holds each tile's first 32 beats of S and P (write bursts
/// that start past the GLB's part of a block, fills and O's writes competing for a bank's
/// write port): bit-exact with exact counters. (buf2d's DMA is reg2d's: its GLB is covered by
/// the reg2d test above.)
#[test]
fn glb_bank_conflicts_stall_and_count() {
    let cfg = with_glb(Variant::reg3d(2), 4096, 2, 128, 2);
    let (model, p) = core(&cfg);
    scenarios(&model, &p, 25, 62);
    let a = problem(3, 1, 64, 64, true);
    let (run, check) = run_and_check(&model, &p, &a, &MemoryTiming::default()).unwrap();
    assert!(check.ok(), "{check:?}");
    assert!(
        run.counters["glb_conflict_stalls"] > 0,
        "{:?}",
        run.counters
    );

    let mut cfg = with_glb(Variant::Unfused, 2048, 4, 0, 2);
    cfg.mem_if = MemIf::Axi4;
    let (model, p) = core(&cfg);
    scenarios(&model, &p, 25, 63);
}
