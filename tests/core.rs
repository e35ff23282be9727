//! The whole core end to end (see `regflash::verify::attention`): Q, K and V streamed from
//! the memory model through the DMA, O compared bit for bit with the hardware model, and the
//! counters with what the model and the schedule fix exactly, over directed and random
//! shapes, heads, masks, value patterns and memory behaviour.

use hdl::config::CoreConfig;
use hdl::core::CoreParams;
use kernels::flash::OutFormat;
use regflash::design::{simulate, Target};
use regflash::verify::attention::{
    check_scenarios, directed, run, run_and_check, Attention, MemoryTiming,
};
use verilator_tb::Model;

fn core(cfg: &CoreConfig) -> (Model, CoreParams) {
    let p = CoreParams::from_config(cfg).unwrap();
    (simulate(cfg, &Target::Core).unwrap().0, p)
}

fn small() -> CoreConfig {
    CoreConfig::preset("small").unwrap()
}

fn scenarios(cfg: &CoreConfig, cases: u32, max_len: usize, seed: u64) {
    let (model, p) = core(cfg);
    let dir = directed(p.br() as usize, p.bc() as usize);
    let (n, cycles) =
        check_scenarios(&model, &p, &dir, cases, max_len, seed).unwrap_or_else(|e| panic!("{e:#}"));
    assert_eq!(
        n,
        dir.len() as u64 + regflash::verify::seeds::total_cases(cases)
    );
    eprintln!("{}: {n} scenarios, {cycles} cycles, bit exact", cfg.name);
}

#[test]
fn small_core_is_bit_exact() {
    scenarios(&small(), 150, 300, 91);
}

/// A different array shape and mapping: 2 x 4 PEs, four query rows and two keys per PE,
/// two-beat rows (d = 32 on a 256-bit port), deeper FP pipelines.
#[test]
fn narrow_core_with_deep_pipelines_is_bit_exact() {
    let mut c = small();
    c.name = "narrow".into();
    c.rows = 2;
    c.br = 8;
    c.bc = 8;
    c.head_dim = 32;
    c.mul_latency = 2;
    c.add_latency = 2;
    c.validate().unwrap();
    scenarios(&c, 60, 160, 92);
}

/// The smallest array: one PE (so one key block column and a 64-bit port with one beat per
/// row), where widths collapse to one bit and the row-reduction tree has a single input.
#[test]
fn one_pe_core_is_bit_exact() {
    let mut c = small();
    c.name = "one_pe".into();
    (c.rows, c.cols, c.br, c.bc, c.head_dim, c.mem_width) = (1, 1, 2, 2, 4, 64);
    c.validate().unwrap();
    scenarios(&c, 30, 40, 93);
}

/// The counters account for every cycle, and a long enough run keeps the array busy.
#[test]
fn counters_account_for_the_run() {
    let (model, p) = core(&small());
    let a = Attention::generate(
        kernels::patterns::Pattern::Unit,
        1,
        128,
        128,
        p.d() as usize,
        false,
        OutFormat::F16,
        3,
    );
    let (r, _) = run_and_check(&model, &p, &a, &MemoryTiming::default()).unwrap();
    let c = |n: &str| r.counters[n];
    assert_eq!(c("blocks"), 16 * 16);
    assert_eq!(c("masked_macs"), 0);
    assert_eq!(c("macs"), 2 * 128 * 128 * 16);
    // One write per MAC; reads: all but the first product of each S and O value, plus the
    // row engines' reads of S and O (run_and_check holds both to their exact expected values).
    assert_eq!(c("rf_writes"), c("macs"));
    assert!(c("rf_reads") > c("rf_writes"));
    assert!(
        c("mac_cycles") as f64 > 0.9 * c("cycles") as f64,
        "the MAC steps fill more than 90 % of the cycles: {:?}",
        r.counters
    );
    assert_eq!(r.memory.bytes_written, 128 * 16 * 2);
}

/// Performance floors a schedule change must not break (a change that halved utilization
/// passed every other test): `small` at seq 1024 keeps the array ≥ 99 % busy non-causal
/// (measured 99.8 %, 2,100,863 cycles) and ≥ 98.5 % causal (99.0 %), and the causal run takes
/// at most 0.51 of the non-causal cycles (0.505; the block-granular limit is (n + 1) / 2n =
/// 0.504 for n = 128 blocks per row). Utilization = useful MACs / (PEs × cycles), from the
/// core's counters.
#[test]
fn small_core_utilization_floors() {
    let (model, p) = core(&small());
    let pes = (p.rows * p.row.cols) as f64;
    let mut cycles = vec![];
    for (causal, floor) in [(false, 0.99), (true, 0.985)] {
        let a = Attention::generate(
            kernels::patterns::Pattern::Unit,
            1,
            1024,
            1024,
            p.d() as usize,
            causal,
            OutFormat::F16,
            8,
        );
        let (r, _) = run_and_check(&model, &p, &a, &MemoryTiming::default()).unwrap();
        let util = r.counters["macs"] as f64 / pes / r.counters["cycles"] as f64;
        assert!(
            util >= floor,
            "causal {causal}: utilization {:.2} % below the {:.1} % floor",
            100.0 * util,
            100.0 * floor
        );
        cycles.push(r.counters["cycles"] as f64);
    }
    let ratio = cycles[1] / cycles[0];
    assert!(
        ratio <= 0.51,
        "causal / non-causal cycles {ratio:.4} above 0.51"
    );
}

/// Problems the core cannot run are refused with a message that says why.
#[test]
fn bad_problems_are_refused() {
    let (model, p) = core(&small());
    let mut a = Attention::generate(
        kernels::patterns::Pattern::Unit,
        1,
        8,
        8,
        32,
        false,
        OutFormat::F16,
        4,
    );
    let e = format!(
        "{:#}",
        run(&model, &p, &a, &MemoryTiming::default(), |_, _| {}).unwrap_err()
    );
    assert!(e.contains("head_dim = 16"), "{e}");
    a.head_dim = 16;
    a.q.truncate(8 * 16);
    a.k.truncate(8 * 16);
    a.v.truncate(7 * 16);
    let e = format!(
        "{:#}",
        run(&model, &p, &a, &MemoryTiming::default(), |_, _| {}).unwrap_err()
    );
    assert!(e.contains("V holds"), "{e}");
    a.v = a.k.clone();
    a.q_len = 70_000;
    a.q = vec![0; 70_000 * 16];
    let e = format!(
        "{:#}",
        run(&model, &p, &a, &MemoryTiming::default(), |_, _| {}).unwrap_err()
    );
    assert!(e.contains("index_bits"), "{e}");
}

/// The sequencer alone, in a random environment (ready flags, busy rows and readout), follows
/// the schedule model: tiles, phases QK(0) QK(1) PV(0) ..., every loop step, softmax starts,
/// skipped blocks, done (see `regflash::verify::sequencer`).
#[test]
fn sequencer_alone_follows_the_schedule_model() {
    let cfg = hdl::config::CoreConfig::preset("small").unwrap();
    let r = regflash::verify::run::verify_block(&cfg, "sequencer", 24 * 2000, 0x5E0)
        .unwrap_or_else(|e| panic!("{e:#}"));
    assert_eq!(r.random_vectors, regflash::verify::seeds::total_cases(24));
    assert!(r.sim_cycles > 24 * 256, "{} cycles", r.sim_cycles);
}
