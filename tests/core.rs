//! The whole core end to end (see `regflash::verify::attention`): Q, K and V streamed from
//! the memory model through the DMA, O compared bit for bit with the hardware model, and the
//! counters with what the model and the schedule fix exactly, over directed and random
//! shapes, heads, masks, value patterns and memory behaviour.

use hdl::config::{BufParams, CoreConfig, RowParams, StackParams, Variant};
use hdl::core::CoreParams;
use kernels::flash::OutFormat;
use regflash::design::{simulate, simulate_with, ModelFor, Target};
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

/// `cfg` as reg3d: QK and PV on two tiers.
fn tiered(cfg: &CoreConfig) -> CoreConfig {
    stacked(cfg, 2)
}

/// `cfg` as reg3d with `tiers` tiers (3: QK, a softmax tier, PV).
fn stacked(cfg: &CoreConfig, tiers: u32) -> CoreConfig {
    let c = CoreConfig {
        name: format!("{}_reg3d_t{tiers}", cfg.name),
        variant: Variant::reg3d(tiers),
        ..cfg.clone()
    };
    c.validate().unwrap();
    c
}

/// `cfg` as reg3d with three tiers and S links `bits` wires wide (a score in 32/bits beats).
fn linked(cfg: &CoreConfig, bits: u32) -> CoreConfig {
    let c = CoreConfig {
        name: format!("{}_reg3d_t3_v{bits}", cfg.name),
        variant: Variant::Reg3d(StackParams {
            tiers: 3,
            vlink_bits: bits,
            ..StackParams::default()
        }),
        ..cfg.clone()
    };
    c.validate().unwrap();
    c
}

/// `cfg` as buf2d with a P bank of `ports` ports.
fn buffered(cfg: &CoreConfig, ports: u32) -> CoreConfig {
    let c = CoreConfig {
        name: format!("{}_buf2d_p{ports}", cfg.name),
        variant: Variant::Buf2d(BufParams {
            ports,
            ..BufParams::default()
        }),
        ..cfg.clone()
    };
    c.validate().unwrap();
    c
}

/// `cfg` as rowfused, its S arrays holding rows of `keys` keys.
fn rowfused(cfg: &CoreConfig, keys: u32) -> CoreConfig {
    let c = CoreConfig {
        name: format!("{}_rowfused{keys}", cfg.name),
        variant: Variant::Rowfused(RowParams {
            keys,
            ..RowParams::default()
        }),
        ..cfg.clone()
    };
    c.validate().unwrap();
    c
}

/// `cfg` as unfused (standard attention: S and P through memory).
fn unfused(cfg: &CoreConfig) -> CoreConfig {
    let c = CoreConfig {
        name: format!("{}_unfused", cfg.name),
        variant: Variant::Unfused,
        ..cfg.clone()
    };
    c.validate().unwrap();
    c
}

/// `cfg` (buf2d) with S and P words of `bits` bits (several scores or weights to an access),
/// each array in `banks` SRAM banks.
fn wide(cfg: &CoreConfig, bits: u32, banks: u32) -> CoreConfig {
    let mut c = CoreConfig {
        name: format!("{}_w{bits}_b{banks}", cfg.name),
        ..cfg.clone()
    };
    let b = c.buf_mut("buf2d.word_bits").unwrap();
    (b.word_bits, b.banks) = (bits, banks);
    c.validate().unwrap();
    c
}

fn scenarios(cfg: &CoreConfig, cases: u32, max_len: usize, seed: u64) {
    let (model, p) = core(cfg);
    model_scenarios(&model, &p, cases, max_len, seed);
}

/// The directed scenarios and `cases` random ones on a built model, every one bit-exact with
/// every counter right.
fn model_scenarios(model: &Model, p: &CoreParams, cases: u32, max_len: usize, seed: u64) {
    let dir = directed(p.br() as usize, p.bc() as usize);
    let (n, cycles) =
        check_scenarios(model, p, &dir, cases, max_len, seed).unwrap_or_else(|e| panic!("{e:#}"));
    assert_eq!(
        n,
        dir.len() as u64 + regflash::verify::seeds::total_cases(cases)
    );
    eprintln!(
        "{}: {n} scenarios, {cycles} cycles, bit exact",
        p.module_name()
    );
}

#[test]
fn small_core_is_bit_exact() {
    scenarios(&small(), 90, 300, 91);
}

/// The build `seed` gets (each PE row verilated once, as a hierarchical block, and every row
/// a model of its own behind a DPI wrapper), on small: the same bits and the same counts.
#[test]
fn hierarchical_build_is_bit_exact() {
    let cfg = small();
    let p = CoreParams::from_config(&cfg).unwrap();
    let rows = ModelFor {
        hier_rows: true,
        ..ModelFor::default()
    };
    let (model, _) = simulate_with(&cfg, &Target::Core, &rows).unwrap();
    let blocks = &model.options().hier_blocks;
    assert!(
        blocks.len() == 1 && blocks[0].starts_with("pe_row"),
        "{blocks:?}"
    );
    model_scenarios(&model, &p, 6, 200, 88);
}

/// The core's clock gates simulated as gates (the Verilog as synthesis reads it; every other
/// core run simulates them as the enables they gate by, 2.1x faster): the same bits and the
/// same counts.
#[test]
fn clock_gated_core_is_bit_exact() {
    let cfg = small();
    let p = CoreParams::from_config(&cfg).unwrap();
    let gates = ModelFor {
        clock_gates: true,
        ..ModelFor::default()
    };
    let (model, _) = simulate_with(&cfg, &Target::Core, &gates).unwrap();
    assert!(!model.options().gates_as_enables);
    model_scenarios(&model, &p, 6, 200, 89);
}

/// 16 columns on two tiers: each row sums 32 register-write bits. Verilator 5.006's DFG pass
/// evaluated that sum as three times its value (npu16 reg3d failed its `rf_writes` check); the
/// models are built with `-fno-dfg`, and this shape holds it. The register file's order makes
/// every MAC a write, so all 32 bits are set on every step.
#[test]
fn sixteen_columns_count_right() {
    let cfg = CoreConfig {
        name: "c16_reg3d".into(),
        accumulate: hdl::array::pe::Accumulate::RegisterFile,
        rows: 4,
        cols: 16,
        br: 16,
        bc: 32,
        head_dim: 32,
        variant: Variant::reg3d(2),
        ..CoreConfig::preset("medium").unwrap()
    };
    cfg.validate().unwrap();
    let (model, p) = core(&cfg);
    let a = Attention::generate(
        kernels::patterns::Pattern::Unit,
        1,
        64,
        64,
        p.d() as usize,
        false,
        OutFormat::Short,
        5,
    );
    let (r, _) = run_and_check(&model, &p, &a, &MemoryTiming::default()).unwrap();
    assert_eq!(r.counters["rf_writes"], r.counters["macs"]);
}

/// Two tiers (QK and PV at once, each on its own block) and three (the row engines and S
/// between them) on the same shapes.
#[test]
fn small_tiered_core_is_bit_exact() {
    scenarios(&tiered(&small()), 50, 300, 97);
    scenarios(&stacked(&small(), 3), 40, 300, 90);
}

/// `cfg` as noc2d: the two arrays side by side, P over `hops` router hops of `flit_bits`-bit
/// flits and `depth`-flit FIFOs.
fn noc2d(cfg: &CoreConfig, flit_bits: u32, depth: u32, hops: u32) -> CoreConfig {
    let c = CoreConfig {
        name: format!("{}_noc2d_f{flit_bits}d{depth}h{hops}", cfg.name),
        variant: Variant::Noc2d(hdl::config::NocParams {
            flit_bits,
            hops,
            buffer_depth: depth,
        }),
        ..cfg.clone()
    };
    c.validate().unwrap();
    c
}

/// noc2d with the NoC setting the pace: flits of one weight (four a word of the four PE
/// rows' weights), two-flit FIFOs (a flit every other cycle), three hops; the directed and
/// random scenarios bit-exact, every counter right (the NoC's flits, hop-bits, FIFO accesses
/// and source-bank reads from the schedule, its sender's credit waits and the cycles from the
/// cycle model), and the NoC's counts against what a block's P must take over it.
#[test]
fn small_noc2d_core_is_bit_exact() {
    let cfg = noc2d(&small(), 36, 2, 3);
    let (model, p) = core(&cfg);
    model_scenarios(&model, &p, 40, 300, 98);
    let a = Attention::generate(
        kernels::patterns::Pattern::Unit,
        1,
        40,
        40,
        16,
        true,
        OutFormat::Short,
        5,
    );
    let (r, chk) = run_and_check(&model, &p, &a, &MemoryTiming::default()).unwrap();
    assert!(chk.ok(), "{}", chk.describe());
    // Each computed block's a·Bc words of P, a weight of each of the 4 rows a flit, over 3
    // links of 36 bits and through 4 routers' FIFOs; the NoC is the bottleneck, so the
    // sender waits for credits.
    let words = r.counters["blocks"] * (p.row.a * p.bc()) as u64;
    assert_eq!(r.counters["noc_src_reads"], words);
    assert_eq!(r.counters["noc_flits"], 4 * words);
    assert_eq!(r.counters["noc_hop_bits"], 3 * 36 * 4 * words);
    assert_eq!(r.counters["noc_fifo_writes"], 4 * 4 * words);
    assert!(r.counters["noc_stalls"] > 0);
}

/// The buffered baseline (S and P in the SRAM buffer, two-port P banks, 64-bit words: two
/// scores or four weights to an access, each array in four interleaved banks) on the same
/// shapes.
#[test]
fn small_buffered_core_is_bit_exact() {
    scenarios(&wide(&buffered(&small(), 2), 64, 4), 60, 300, 94);
}

/// The row-materializing baseline (whole rows of S in the S arrays, a two-pass softmax) on the
/// same shapes, against its own model (standard attention's order).
#[test]
fn small_rowfused_core_is_bit_exact() {
    scenarios(&rowfused(&small(), 512), 30, 300, 95);
}

/// `c` on the 64-bit port (a block row of S in four beats, a Q, K or V row in four) with a
/// 2 KiB GLB of four one-port banks (its scratch region 128 beats, K and V 16 keys each),
/// checked over the directed scenarios and `cases` random ones; then one tile of 8 queries
/// over `keys` keys, checked, whose run is returned.
fn on_a_small_glb(
    mut c: CoreConfig,
    cases: u32,
    seed: u64,
    keys: usize,
) -> regflash::verify::attention::CoreRun {
    c.mem_width = 64;
    c.name += "_w64_glb";
    c.glb = hdl::mem::glb::GlbParams {
        bytes: 2048,
        banks: 4,
        ..Default::default()
    };
    c.validate().unwrap();
    let (model, p) = core(&c);
    assert_eq!(p.dma.glb.map(|g| g.scratch_beats), Some(128));
    model_scenarios(&model, &p, cases, 300, seed);
    let a = Attention::generate(
        kernels::patterns::Pattern::Unit,
        1,
        8,
        keys,
        16,
        false,
        OutFormat::Short,
        5,
    );
    let (r, check) = run_and_check(&model, &p, &a, &MemoryTiming::default()).unwrap();
    assert!(check.ok(), "{check:?}");
    r
}

/// rowfused with its spill: S arrays of 32 keys (four blocks), so the rows of most random
/// problems (40, up to 300 keys) go past them, on the small GLB: a tile's spilled S stays in
/// the GLB's upper half for its first 128 beats (four blocks), the rest goes to memory. The
/// testbench's memory counts what reaches it, against closed forms.
#[test]
fn small_rowfused_spill_core_is_bit_exact() {
    let mut c = rowfused(&small(), 32);
    c.rowfused_mut("spill").unwrap().spill = true;
    c.name += "_spill";
    // One tile of 8 queries over 96 keys: blocks 4 .. 11 of its rows spill, 8 blocks x 8 rows
    // x 4 beats of S, half of it in the GLB. Memory writes O (32 beats) and S's other half;
    // it reads Q (32), K and V (384 each) and that half back; the GLB also fills 16 keys of K
    // and of V (64 words each).
    let r = on_a_small_glb(c, 40, 97, 96);
    assert_eq!(
        (r.memory.reads, r.memory.writes),
        (32 + 768 + 128, 32 + 128)
    );
    let words = |n: &str| r.counters[n] / 64;
    assert_eq!(
        (words("glb_read_bits"), words("glb_write_bits")),
        (128, 128 + 128)
    );
    // The S arrays hold the first four blocks: copied once and read twice; the spilled
    // scores are read from the landing buffer instead (32 bits each).
    let scores = 8 * 8;
    assert_eq!(r.counters["s_buf_writes"], 4 * scores);
    assert_eq!(r.counters["s_buf_reads"], 2 * 4 * scores);
}

/// Standard attention (S and P written to memory and read back between the passes, no S
/// array and no P bank) on the same shapes (16 random problems), against its own model (the
/// two-pass order), on the small GLB's 64-bit port: a block row of S takes four beats and one
/// of P two (`variants_agree…` runs it on the 256-bit port: one beat each, P padded); S and
/// P's first 128 beats of each tile stay in the GLB's upper half (a tile's S past four blocks
/// goes to memory). The testbench's memory counts what reaches it, against closed forms.
#[test]
fn small_unfused_core_is_bit_exact() {
    // One tile of 8 queries over 64 keys: S is 8 blocks x 8 rows x 4 beats (32 bytes a block
    // row), half of it in the GLB; P (2 beats a block row) all of it. Memory writes O (32
    // beats) and S's other half; it reads Q (32), K and V (256 each) and that half back.
    let r = on_a_small_glb(unfused(&small()), 16, 96, 64);
    assert_eq!(
        (r.memory.reads, r.memory.writes),
        (32 + 512 + 128, 32 + 128)
    );
    let words = |n: &str| r.counters[n] / 64;
    assert_eq!(
        (words("glb_read_bits"), words("glb_write_bits")),
        (256, 256 + 128)
    );
}

/// A different array shape and mapping: 2 x 4 PEs, four query rows and two keys per PE,
/// two-beat rows (d = 32 on a 256-bit port), the deepest FP pipelines; as reg2d, as buf2d with
/// single-port P banks (PV and the softmax take turns), 128-bit words (an S word spans two
/// PEs, a P word a query row's whole block, and the PV steps visit four query rows' words in
/// turn) and two banks per array, and as reg3d with two and three tiers.
/// (One test per variant, so that the four builds and runs share the cores with the rest of
/// the suite.)
fn narrow() -> CoreConfig {
    let mut c = small();
    c.name = "narrow".into();
    c.rows = 2;
    c.br = 8;
    c.bc = 8;
    c.head_dim = 32;
    // The deepest pipelines this tile hides: the MAC's 4 + 5 + 1 cycles, whose accumulator read
    // waits for the product (5 + 3 cycles between two updates of one register, in its 8
    // accumulators), the softmax datapath's multiplier at 6 (softmax_row's update, the exp
    // stage, the reduction tree's levels and the readout's multiply all follow) and exp2 at 6.
    c.mul_latency = 4;
    c.add_latency = 5;
    c.fmul_latency = 6;
    c.exp_latency = 6;
    c.validate().unwrap();
    c
}

/// reg2d at the narrow tile's deep pipelines on `seed`'s mapping (two query rows and two keys
/// per PE: four S accumulators, fewer than the MAC's 2 + 5 + 1 cycles): the one array
/// interleaves the QK of block j + 2 with the PV of block j step by step (QK never two cycles
/// running), as reg3d's tiers run them at once. The directed and random scenarios bit-exact,
/// every counter the cycle model's; then one tile of 32 blocks keeps the array busy (a tile's
/// first QK, alone, steps every other cycle).
#[test]
fn narrow_core_with_deep_pipelines_is_bit_exact() {
    let mut c = narrow();
    c.name = "narrow_il".into();
    c.br = 4;
    c.validate().unwrap();
    let (model, p) = core(&c);
    assert!(
        p.row.interleaved(),
        "a*b = {} hides the MAC",
        p.row.a * p.row.b
    );
    model_scenarios(&model, &p, 30, 160, 92);
    let a = Attention::generate(
        kernels::patterns::Pattern::Unit,
        1,
        4,
        256,
        32,
        false,
        OutFormat::Short,
        5,
    );
    let (r, check) = run_and_check(&model, &p, &a, &MemoryTiming::default()).unwrap();
    assert!(check.ok(), "{}", check.describe());
    let (busy, cycles) = (r.counters["mac_cycles"], r.counters["cycles"]);
    assert_eq!(
        busy,
        2 * 32 * 128,
        "MAC steps: 32 blocks of 128 QK and 128 PV steps"
    );
    assert!(
        busy * 100 >= cycles * 94,
        "{busy} MAC steps in {cycles} cycles"
    );
}

#[test]
fn narrow_buffered_core_with_wide_words_is_bit_exact() {
    scenarios(&wide(&buffered(&narrow(), 1), 128, 2), 30, 160, 95);
}

/// Six keys per PE (bc = 24 on 4 columns) at the narrow tile's deep pipelines: each PE sums
/// its weights as a tree of three levels, one with an odd value passing through, on the
/// softmax datapath's adder at latency 5. Random scenarios, then a row whose weights the
/// association order decides: per PE 1 and five of 2^-24 (FP16's least), which a tree sums
/// to 1 + 2^-22 and a chain in key order to 1 (each 2^-24 a tie to even), seen in O at FP32.
#[test]
fn six_keys_per_pe_sum_as_a_tree() {
    let mut c = narrow();
    c.name = "narrow_b6".into();
    c.bc = 24;
    c.regs_per_pe = 128;
    c.validate().unwrap();
    let (model, p) = core(&c);
    model_scenarios(&model, &p, 12, 120, 93);
    let d = p.d() as usize;
    let k_len = 2 * c.bc as usize;
    // Scores 0 (weight 1) and v: m = 0 and v·C within (−25, −23.6), so FP16(exp2(v·C)) is
    // 2^-24 (C = log2(e)/√d).
    let v = -24.2 * (d as f64).sqrt() / std::f64::consts::LOG2_E;
    let f = |x: f64| half::f16::from_f64(x).to_bits();
    let mut q = vec![f(0.0); 4 * d];
    for r in 0..4 {
        q[r * d] = f(1.0);
    }
    let mut k = vec![f(0.0); k_len * d];
    for j in 0..k_len {
        k[j * d] = f(if j % 6 == 0 { 0.0 } else { v });
    }
    let a = Attention {
        q_len: 4,
        k_len,
        q,
        k,
        v: vec![f(1.0); k_len * d],
        ..Attention::generate(
            kernels::patterns::Pattern::Unit,
            1,
            4,
            k_len,
            d,
            false,
            OutFormat::F32,
            1,
        )
    };
    let (r, check) = run_and_check(&model, &p, &a, &MemoryTiming::default()).unwrap();
    assert!(check.ok(), "{check:?}");
    // O = 8 / l, l the sum of eight PEs' 1 + 2^-22 (8 + 2^-19, exact): 1 − 2^-22, where
    // a chain's l = 8 would give 1.
    let o = f32::from_bits(r.out[0]);
    assert_eq!(o, 1.0 - 2f32.powi(-22), "O[0]");
}

/// reg3d with lazy rescaling (τ = 2): the directed and random scenarios bit-exact, and the
/// rescales the RTL counts as the model counts them (`run_and_check` holds them equal), with
/// both sides of the threshold taken: small growths spared on uniform data, large ones
/// rescaled on wide-ranged data.
#[test]
fn narrow_tiered_core_with_lazy_rescaling_is_bit_exact() {
    let mut cfg = tiered(&narrow());
    cfg.rescale = hdl::softmax::Rescale::Lazy { threshold: 2 };
    cfg.validate().unwrap();
    let (model, p) = core(&cfg);
    model_scenarios(&model, &p, 30, 160, 98);
    let count = |pattern| {
        let a = Attention::generate(pattern, 1, 24, 96, 32, false, OutFormat::Short, 7);
        let (r, chk) = run_and_check(&model, &p, &a, &MemoryTiming::default()).unwrap();
        assert!(chk.ok(), "{pattern:?}: {}", chk.describe());
        (r.counters["rescales"], r.counters["rescales_avoided"])
    };
    let (done, spared) = count(kernels::patterns::Pattern::Unit);
    assert!(spared > 0, "uniform data: {done} rescales, {spared} spared");
    let (done, spared) = count(kernels::patterns::Pattern::LargeValues);
    assert!(
        done > 24,
        "wide data: {done} rescales past each row's first, {spared} spared"
    );
}

/// BF16 operands (`in_format = "bf16"`: the e10m15 product MAC, P and O's short form in
/// BF16): the directed scenarios (every value pattern, FP32 and short output, masked rows,
/// slow memory) and random ones bit-exact with the model and within BF16's contract, every
/// counter right.
#[test]
fn small_core_with_bf16_operands_is_bit_exact() {
    let mut cfg = small();
    cfg.in_format = hdl::format::Format::BF16;
    cfg.validate().unwrap();
    let (model, p) = core(&cfg);
    assert!(p.module_name().contains("pe_e8m7"), "{}", p.module_name());
    model_scenarios(&model, &p, 40, 200, 93);
    // An FP16 problem is refused by name, not run as bits of the wrong format.
    let a = Attention::generate(
        kernels::patterns::Pattern::Unit,
        1,
        8,
        8,
        16,
        false,
        OutFormat::Short,
        3,
    );
    let err = run_and_check(&model, &p, &a, &MemoryTiming::default()).unwrap_err();
    assert!(
        format!("{err:#}").contains("the inputs are fp16 values but the design takes bf16"),
        "{err:#}"
    );
}

/// Integer QKᵀ: INT8 on reg2d, and INT4 with BF16 operands on three-tier reg3d
/// (the scales captured from the QK tier's bus, S sent up the links): every directed and
/// random scenario bit-exact with the quantized model, within the contract against exact
/// attention on the quantized Q and K, every counter right (MACs count the lanes; QK takes
/// d / lanes + 2 steps a score); −Inf keys refused by name. And the MAC steps: a block's QK
/// phase is (d / 2 + 2) / d of FP16's.
#[test]
fn small_cores_with_integer_qk_are_bit_exact() {
    use kernels::quant::QkFormat;
    let mut int8 = small();
    int8.qk_format = Some(QkFormat::Int8);
    let (model, p) = core(&int8);
    assert!(p.module_name().contains("_qi8"), "{}", p.module_name());
    model_scenarios(&model, &p, 30, 200, 95);
    let fp = CoreParams::from_config(&small()).unwrap();
    let d = p.d();
    assert_eq!(p.block_steps().0 * d, fp.block_steps().0 * (d / 2 + 2));
    assert_eq!(p.block_steps().1, fp.block_steps().1);
    let mut int4 = stacked(&small(), 3);
    int4.qk_format = Some(QkFormat::Int4);
    int4.in_format = hdl::format::Format::BF16;
    let (model, p) = core(&int4);
    assert!(p.module_name().contains("_qi4"), "{}", p.module_name());
    model_scenarios(&model, &p, 10, 120, 96);
}

#[test]
fn narrow_three_tier_core_is_bit_exact() {
    scenarios(&stacked(&narrow(), 3), 20, 160, 88);
}

/// The variants compute the same O bit for bit from the same input, and differ only where the
/// counters say: buf2d copies each score of each block to the S array once and reads it twice
/// (so the row engines read the PE registers once per score instead of twice), keeps one S
/// block in the PE registers and so spends cycles the counters attribute (at least 90 % of
/// them) to the softmax; with single-port P banks more of them.
#[test]
fn variants_agree_bit_for_bit_and_differ_where_the_counters_say() {
    let a = Attention::generate(
        kernels::patterns::Pattern::Unit,
        2,
        72,
        72,
        16,
        false,
        OutFormat::Short,
        12,
    );
    let mut runs = vec![];
    let cfgs = [
        small(),
        buffered(&small(), 2),
        buffered(&small(), 1),
        tiered(&small()),
        stacked(&small(), 3),
        linked(&small(), 8),
        rowfused(&small(), 512),
        unfused(&small()),
    ];
    for cfg in cfgs {
        let (model, p) = core(&cfg);
        let (r, chk) = run_and_check(&model, &p, &a, &MemoryTiming::default()).unwrap();
        assert!(chk.ok(), "{}: {}", cfg.name, chk.describe());
        runs.push(r);
    }
    let (reg, buf2, buf1, reg3) = (&runs[0], &runs[1], &runs[2], &runs[3]);
    let t3 = &runs[4];
    for r in &runs[1..] {
        assert_eq!(reg.out, r.out);
    }
    // reg3d: the same MACs and register-file traffic on two tiers at once, so fewer cycles;
    // the weights (16 bits each) and the O values (32) cross between the tiers.
    for n in [
        "macs",
        "rf_reads",
        "rf_writes",
        "p_buf_reads",
        "qk_cycles",
        "pv_cycles",
    ] {
        assert_eq!(reg3.counters[n], reg.counters[n], "{n}");
    }
    assert_eq!(
        reg3.counters["vlink_bits"],
        16 * 2 * 9 * 9 * 64 + 32 * 2 * 72 * 16
    );
    assert!(reg3.counters["cycles"] * 10 < reg.counters["cycles"] * 8);
    // Three tiers: the same steps on the same two PE tiers; each score (every query sees
    // every key: 2 heads × 72 × 72) also goes up its S link once, read at the QK PE's port
    // and written into the softmax tier's registers; the rest of the link traffic and the
    // cycles (up to the S links' stage per block) are reg3d's.
    let pairs = 2 * 72 * 72;
    for n in ["macs", "p_buf_reads", "qk_cycles", "pv_cycles"] {
        assert_eq!(t3.counters[n], reg3.counters[n], "{n}");
    }
    assert_eq!(t3.counters["rf_reads"], reg3.counters["rf_reads"] + pairs);
    assert_eq!(t3.counters["rf_writes"], reg3.counters["rf_writes"] + pairs);
    assert_eq!(t3.counters["vlink_s_bits"], 32 * pairs);
    assert_eq!(
        t3.counters["vlink_bits"] - t3.counters["vlink_s_bits"],
        reg3.counters["vlink_bits"]
    );
    assert_eq!(reg3.counters["vlink_s_bits"], 0);
    let (c2, c3) = (reg3.counters["cycles"], t3.counters["cycles"]);
    assert!(c2 <= c3 && c3 <= c2 + 2 * 9 * 9, "{c2} vs {c3} cycles");
    // 8-wire S links: the same events, each score in 4 beats from a second QK slot, so the
    // same counts but the cycles (a block's walk, 4 scores x 4 beats per PE, comes between its
    // QK and its softmax).
    let v8 = &runs[5];
    for (n, v) in &t3.counters {
        if !["cycles", "mac_cycles"].contains(&n.as_str()) && !n.starts_with("stall_") {
            assert_eq!(v8.counters[n], *v, "{n}");
        }
    }
    assert!(
        v8.counters["cycles"] > c3,
        "{} vs {c3}",
        v8.counters["cycles"]
    );
    let scores = 2 * 9 * 9 * 64; // heads x tiles x blocks x Br·Bc
    assert_eq!(reg.counters["blocks"], 2 * 9 * 9);
    // buf2d copies S once where reg2d's sweeps read it twice, and runs PV in the register
    // file's order (P comes from its buffer), where reg2d's O values run in the MAC's loop:
    // an accumulator read per PV operation but each O value's first (2 heads x 72 queries x
    // (72 keys - 1) x 16 columns), against reg2d's rescales (one per O value and block but the
    // first: 2 x 72 x (9 - 1) x 16); and it reads each weight once for a PE's 4 columns.
    let pv_reads_registers = 2 * 72 * (72 - 1) * 16;
    let pv_reads_runs = 2 * 72 * (9 - 1) * 16;
    for r in [buf2, buf1] {
        assert_eq!(r.counters["s_buf_writes"], scores);
        assert_eq!(r.counters["s_buf_reads"], 2 * scores);
        assert_eq!(
            reg.counters["rf_reads"] + pv_reads_registers,
            r.counters["rf_reads"] + scores + pv_reads_runs
        );
        assert_eq!(r.counters["macs"], reg.counters["macs"]);
        assert_eq!(4 * r.counters["p_buf_reads"], reg.counters["p_buf_reads"]);
    }
    // rowfused: buf2d's events (each score copied once, read by the max sweep and by the exp
    // sweep), in another order: every QK and max sweep of a tile first, then per block the exp
    // sweep and PV, so more cycles wait for the row engines.
    let row = &runs[6];
    for (n, v) in &buf2.counters {
        if !["cycles", "mac_cycles"].contains(&n.as_str())
            && !n.starts_with("stall_")
            && !n.starts_with("rescales")
        {
            assert_eq!(row.counters[n], *v, "rowfused {n}");
        }
    }
    // The two-pass order knows each row's max before any weight: no rescale, where the online
    // order rescales at least once a row (its first finite max) and then as the max grows.
    assert_eq!(row.counters["rescales"], 0);
    assert!(buf2.counters["rescales"] >= 2 * 72);
    assert_eq!(row.counters["mac_cycles"], buf2.counters["mac_cycles"]);
    assert!(row.counters["stall_softmax"] > buf2.counters["stall_softmax"]);
    // unfused: rowfused's order without its S array: the max sweep reads the PE registers and
    // packs S for the staging buffer, the exp sweep reads it back from the landing buffer, and
    // every computed block's S and P make a round trip through memory: per block row a beat of
    // S (8 FP32) and a beat of P (8 FP16, half a beat, padded) each way, 2 heads x 9 tiles x 9
    // blocks x 8 rows.
    let un = &runs[7];
    for n in [
        "macs",
        "rf_writes",
        "max_ops",
        "exp_ops",
        "mac_cycles",
        "p_buf_reads",
    ] {
        assert_eq!(un.counters[n], row.counters[n], "unfused {n}");
    }
    // unfused's sweeps read S once from the PE registers, reg2d's twice; its PV keeps the
    // register file's order, as buf2d's.
    assert_eq!(
        un.counters["rf_reads"] + scores + pv_reads_runs,
        reg.counters["rf_reads"] + pv_reads_registers
    );
    assert_eq!(un.counters["s_buf_writes"], scores);
    assert_eq!(un.counters["s_buf_reads"], scores);
    let round_trip = 2 * 9 * 9 * 8 * 2;
    for n in ["read_beats", "write_beats"] {
        assert_eq!(un.counters[n], reg.counters[n] + round_trip, "unfused {n}");
    }
    assert!(un.counters["cycles"] > row.counters["cycles"]);
    let cycles = |r: &regflash::verify::attention::CoreRun| r.counters["cycles"];
    let stall = |r: &regflash::verify::attention::CoreRun| r.counters["stall_softmax"];
    assert!(cycles(reg) < cycles(buf2) && cycles(buf2) < cycles(buf1));
    assert!(stall(reg) < stall(buf2) && stall(buf2) < stall(buf1));
    // The MAC steps are the same; the extra cycles are stalls, nearly all of them waits for
    // the row engines (the copy of S, the shared port); the rest falls between tiles.
    for r in [buf2, buf1] {
        assert_eq!(r.counters["mac_cycles"], reg.counters["mac_cycles"]);
        let (extra, softmax) = (cycles(r) - cycles(reg), stall(r) - stall(reg));
        assert!(
            softmax as f64 >= 0.9 * extra as f64,
            "{extra} extra cycles, {softmax} of them softmax stalls:\nreg2d {:?}\nbuf2d {:?}",
            reg.counters,
            r.counters
        );
    }
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
    scenarios(&tiered(&c), 20, 40, 99);
    scenarios(&stacked(&c, 3), 20, 40, 89);
    // One-wire S links: 32 beats a score, longer than a block's QK (d = 4 steps a score).
    scenarios(&linked(&c, 1), 20, 40, 87);
    // buf2d on one PE with one query row per PE row (a = 1) and a single-port P bank.
    (c.name, c.br, c.bc) = ("one_pe_a1".into(), 1, 4);
    scenarios(&buffered(&c, 1), 20, 40, 96);
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
        OutFormat::Short,
        3,
    );
    let (r, _) = run_and_check(&model, &p, &a, &MemoryTiming::default()).unwrap();
    let c = |n: &str| r.counters[n];
    assert_eq!(c("blocks"), 16 * 16);
    assert_eq!(c("masked_macs"), 0);
    assert_eq!(c("macs"), 2 * 128 * 128 * 16);
    // The MAC accumulates in its pipeline: one write per score and one per O value and block
    // (128 x 128 scores; 16 O values of 128 rows in 16 blocks), not one per MAC; reads: each
    // O value's rescale but in its first block, plus the row engines' reads of S and O
    // (run_and_check holds both to their exact expected values).
    assert_eq!(c("rf_writes"), 128 * 128 + 16 * 128 * 16);
    assert!(c("rf_writes") * 10 < c("macs"));
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
/// core's counters. reg3d's tiers hold their own floor.
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
            OutFormat::Short,
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
    // reg3d, non-causal: each tier busy ≥ 97.5 % of the cycles (measured 98.1 %: a tier starts
    // its next block in the last step of the current one, so what is left is the fill and
    // drain of each tile's pipeline), so the two tiers take at most 0.515 of the one tier's
    // cycles (1,068,793 / 2,100,863 = 0.509).
    let (model, p) = core(&tiered(&small()));
    let a = Attention::generate(
        kernels::patterns::Pattern::Unit,
        1,
        1024,
        1024,
        p.d() as usize,
        false,
        OutFormat::Short,
        8,
    );
    let (r, _) = run_and_check(&model, &p, &a, &MemoryTiming::default()).unwrap();
    let c = |n: &str| r.counters[n] as f64;
    for tier in ["qk_cycles", "pv_cycles"] {
        let busy = c(tier) / c("cycles");
        assert!(busy >= 0.975, "reg3d {tier}: {:.2} % busy", 100.0 * busy);
    }
    let speedup = c("cycles") / cycles[0];
    assert!(speedup <= 0.515, "reg3d / reg2d cycles {speedup:.4}");
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
        OutFormat::Short,
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
    // rowfused runs rows of S up to its S arrays' capacity, and refuses longer ones.
    let rf = CoreParams::from_config(&rowfused(&small(), 64)).unwrap();
    let shape = |k| {
        regflash::verify::attention::check_core_shape(&rf, 1, 8, k, 16, OutFormat::Short)
            .map_err(|e| e.to_string())
    };
    assert!(shape(64).is_ok());
    let e = shape(65).unwrap_err();
    assert!(
        e.contains("keys = 64") && e.contains("raise keys to 128"),
        "{e}"
    );
    // A varlen batch: each sequence's keys against the rows, not the packed total's.
    let batch = |k: &[usize]| {
        regflash::verify::attention::Batch::generate(
            kernels::patterns::Pattern::Unit,
            1,
            1,
            &[8, 8],
            k,
            16,
            false,
            OutFormat::Short,
            regflash::verify::attention::TensorLayout::Bhsd,
            3,
        )
        .validate(&rf)
        .map_err(|e| format!("{e:#}"))
    };
    batch(&[40, 60]).unwrap();
    let e = batch(&[40, 70]).unwrap_err();
    assert!(e.contains("sequence 1") && e.contains("keys = 64"), "{e}");
}

/// The sequencer alone, in a random environment (ready flags, busy rows and readout), follows
/// the schedule model: tiles, phases QK(0) QK(1) PV(0) ..., every loop step, softmax starts,
/// skipped blocks, done (see `regflash::verify::sequencer`).
#[test]
fn sequencer_alone_follows_the_schedule_model() {
    // reg2d, and buf2d with single-port P banks (the S copy gate and the turn-taking).
    for cfg in [small(), buffered(&small(), 1)] {
        let r = regflash::verify::run::verify_block(&cfg, "sequencer", 24 * 2000, 0x5E0)
            .unwrap_or_else(|e| panic!("{}: {e:#}", cfg.name));
        assert_eq!(r.random_vectors, regflash::verify::seeds::total_cases(24));
        assert!(r.sim_cycles > 24 * 256, "{} cycles", r.sim_cycles);
    }
}
