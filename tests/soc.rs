//! The SoC top (`regflash_top`): its AXI4-Lite register block against the register model; the
//! whole top with its AXI4 memory master driven only through its registers on a randomly
//! timed AXI4 slave (bit-exact O, every counter exact, read as LO/HI pairs), including 4 KiB
//! burst splits, a software abort, bus errors and runs after them; the generated C header and
//! register map against the register description, with the C driver example compiled
//! against the header.

use std::process::Command;

use gen::tools::ScratchDir;
use hdl::config::CoreConfig;
use hdl::core::CoreParams;
use hdl::mem::dma::{self, MemIf, AXI_DECERR, AXI_SLVERR};
use hdl::soc::regmap;
use kernels::flash::OutFormat;
use kernels::patterns::Pattern;
use regflash::design::{generate, simulate, Target};
use regflash::verify::attention::{
    check, check_batch, memory_image, Attention, AxiFault, Batch, Layout, MemoryTiming,
    TensorLayout, TopDriver, Wait,
};

/// Runs gcc as C99 with every warning an error, with `cmd`'s arguments; fails with its output.
fn gcc(cmd: &mut Command) {
    let out = cmd
        .args(["-std=c99", "-Wall", "-Wextra", "-Werror", "-pedantic"])
        .output()
        .expect("gcc runs (scripts/ensure-tools installs it)");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn small() -> CoreConfig {
    CoreConfig::preset("small").unwrap()
}

/// `small` with a 2 KiB GLB in 4 banks (32 keys of K and of V), so the register map has the
/// GLB's bank window.
fn small_glb() -> CoreConfig {
    let mut c = small();
    c.name = "small_glb".into();
    c.glb.bytes = 2048;
    c.glb.banks = 4;
    c.validate().unwrap();
    c
}

/// `small` with the AXI4 memory master.
fn axi4_small() -> CoreConfig {
    CoreConfig {
        mem_if: MemIf::Axi4,
        ..small()
    }
}

/// The varlen batch controller at its own ports equals its model (`kernels::batch`; `verify
/// --unit batch`) over the simple port and the AXI4 master: the directed batches (the single
/// problem, empty sequences, each kind of bad list, a core error, aborts, sequence bases
/// beyond the address range, address bits beyond it) and 100 random ones, each run twice on
/// one instance, each START ending with one `finish` pulse.
#[test]
fn batch_controller_equals_its_model() {
    for cfg in [small(), axi4_small()] {
        let r = regflash::verify::run::verify_batch(&cfg, 100_000, 81)
            .unwrap_or_else(|e| panic!("{e:#}"));
        eprintln!("{r:?}");
        assert!(r.directed_vectors >= 10 && r.random_vectors >= 100, "{r:?}");
    }
}

/// The register block equals its model over directed and random streams with random
/// channel delays (`verify --unit csr`), with the GLB's bank window (its select and every
/// group's counters, and a select of the group count), and (reg3d with spare lanes) the
/// link registers: CTRL.LINK_TEST's pulse, LINK_STATUS and LINK_FAILED.
#[test]
fn register_block_equals_its_model() {
    let mut cfg = small_glb();
    cfg.variant = hdl::variants::Variant::Reg3d(hdl::variants::StackParams {
        spares: 1,
        ..Default::default()
    });
    let r = regflash::verify::run::verify_block(&cfg, "csr", 8000, 17).unwrap();
    assert!(r.directed_vectors > 500 && r.random_vectors > 200, "{r:?}");
}

/// The top with the simple memory port and a GLB through its registers (`verify --unit
/// top`): two problems, by interrupt and by polling, bit-exact with exact counters, the GLB's
/// per-bank counters read through the window as the bank map places the hits and fills. Then
/// varlen batches
/// on one instance: a list whose query offsets decrease stops with ERR_CODE 9 before the bad
/// sequence; a grouped-query batch of four sequences (one of a single query) is bit-exact
/// per sequence, its counters the sums of the sequences' and its cycles the cycle model's,
/// sequence by sequence.
#[test]
fn top_with_the_simple_port_runs_through_its_registers_and_varlen_batches() {
    let cfg = small_glb();
    let r =
        regflash::verify::run::verify_block(&cfg, "top", 0, 3).unwrap_or_else(|e| panic!("{e:#}"));
    assert!(r.directed_vectors >= 11 && r.random_vectors >= 20, "{r:?}");
    let p = CoreParams::from_config(&cfg).unwrap();
    let (model, _) = simulate(&cfg, &Target::Top).unwrap();
    let timing = MemoryTiming::default();
    let batch = |q: &[usize], k: &[usize], seed| {
        Batch::generate(
            Pattern::Unit,
            2,
            1,
            q,
            k,
            16,
            true,
            OutFormat::Short,
            TensorLayout::Bhsd,
            seed,
        )
    };
    let bad = batch(&[5, 6, 7], &[5, 6, 7], 1);
    let (mut mem, img) = bad.image(&p, &timing).unwrap();
    // cu_q = 0, 5, 11, 18 becomes 0, 5, 3, 18: the second sequence would end before it starts.
    mem.load_bytes(img.cu_q as usize + 8, &3u32.to_le_bytes())
        .unwrap();
    let mut d = TopDriver::new(&model, &p, 2, &timing, &mut mem).unwrap();
    let (run, _) = d
        .run_batch(&p, &bad, &timing, Wait::Interrupt, &mut mem, &img)
        .unwrap();
    assert_eq!(run.dma_error, regmap::ERR_BATCH);
    assert!(run.counters["macs"] > 0, "the first sequence ran");
    let good = batch(&[9, 1, 20, 3], &[12, 5, 20, 8], 4);
    let r = run_batch_checked(&mut d, &p, &good, &timing, Wait::Poll);
    assert!(
        r.glb_banks.len() == 4 && r.glb_banks.iter().all(|b| b.0 > 0 && b.1 > 0),
        "every bank group read and written: {:?}",
        r.glb_banks
    );
}

/// Random varlen batches (proptest, fixed seed plus `REGFLASH_SEED`'s) on one AXI4 top behind a
/// slave with random stalls and reordering: 1 to 4 sequences of 1 to 40 queries and keys,
/// 1 to 3 heads (sometimes sharing one K/V head), either layout, causal or not, FP16 or FP32
/// out; each sequence bit-exact and within the contract, the counters summed.
#[test]
fn random_varlen_batches_over_axi4() {
    use proptest::prelude::*;
    let cfg = axi4_small();
    let p = CoreParams::from_config(&cfg).unwrap();
    let (model, _) = simulate(&cfg, &Target::Top).unwrap();
    let timing = MemoryTiming {
        latency: 5,
        stall_probability: 0.2,
        seed: 3,
        ..MemoryTiming::default()
    };
    let a0 = Attention::generate(Pattern::Unit, 1, 1, 1, 16, false, OutFormat::Short, 1);
    let (mut mem, _) = memory_image(&p, &a0, &timing).unwrap();
    let d = std::cell::RefCell::new(TopDriver::new(&model, &p, 8, &timing, &mut mem).unwrap());
    let lens = prop::collection::vec((1usize..=40, 1usize..=40), 1..=4);
    let shape = (
        1usize..=3,
        any::<bool>(),
        any::<bool>(),
        any::<bool>(),
        any::<bool>(),
    );
    let strategy = (lens, shape, any::<u64>());
    let config = proptest::test_runner::Config {
        cases: 10,
        failure_persistence: None,
        ..Default::default()
    };
    let result = regflash::verify::seeds::run(
        config,
        41,
        &strategy,
        |(lens, (heads, gqa, bshd, causal, f32), seed)| {
            let (q, k): (Vec<usize>, Vec<usize>) = lens.into_iter().unzip();
            let layout = if bshd {
                TensorLayout::Bshd
            } else {
                TensorLayout::Bhsd
            };
            let out = if f32 {
                OutFormat::F32
            } else {
                OutFormat::Short
            };
            let kv = if gqa { 1 } else { heads };
            let b = Batch::generate(
                Pattern::Unit,
                heads,
                kv,
                &q,
                &k,
                16,
                causal,
                out,
                layout,
                seed,
            );
            run_batch_checked(&mut d.borrow_mut(), &p, &b, &timing, Wait::Interrupt);
            Ok(())
        },
    );
    if let Err(e) = result {
        panic!("{e}");
    }
}

/// Runs a varlen batch on `d` and checks it: each sequence bit-exact, counters summed.
fn run_batch_checked(
    d: &mut TopDriver,
    p: &CoreParams,
    b: &Batch,
    timing: &MemoryTiming,
    wait: Wait,
) -> regflash::verify::attention::CoreRun {
    let (mut mem, img) = b.image(p, timing).unwrap();
    let (r, outs) = d.run_batch(p, b, timing, wait, &mut mem, &img).unwrap();
    let chk = check_batch(p, &b.seqs, &outs, b.list_reads(), &r);
    assert!(chk.ok(), "{wait:?}: {}", chk.describe());
    assert_eq!(r.dma_error, 0);
    r
}

/// AXI4 read and write bursts the DMA issues for `a` (bhsd, non-causal, tensors at `lay`): a
/// transfer's rows are contiguous, so each Q tile, each K and V block and each O tile is one
/// run of bytes, split at 256 beats and at every 4 KiB boundary. Computed from the addresses
/// alone, independently of the RTL's burst arithmetic.
fn expected_bursts(p: &CoreParams, a: &Attention, lay: &Layout) -> (u64, u64) {
    let beat = (p.dma.width / 8) as u64;
    let split = |at: u64, bytes: u64| verilator_tb::axi::bursts_of(at, bytes, beat);
    let (br, bc, d) = (p.br() as usize, p.bc() as usize, a.head_dim);
    let row = (2 * d) as u64;
    let o_row = (a.out_bytes() * d) as u64;
    let (mut reads, mut writes) = (0, 0);
    for h in 0..a.heads {
        let kv = h / a.group().max(1);
        for t in (0..a.q_len).step_by(br) {
            let rows = br.min(a.q_len - t) as u64;
            let q_at = lay.q + lay.q_strides.1 * h as u64 + row * t as u64;
            reads += split(q_at, rows * row);
            for j in (0..a.k_len).step_by(bc) {
                let keys = bc.min(a.k_len - j) as u64;
                for base in [lay.k, lay.v] {
                    reads += split(
                        base + lay.k_strides.1 * kv as u64 + row * j as u64,
                        keys * row,
                    );
                }
            }
            let o_at = lay.o + lay.o_strides.1 * h as u64 + o_row * t as u64;
            writes += split(o_at, rows * o_row);
        }
    }
    (reads, writes)
}

/// The top with the AXI4 memory master, driven only through its registers, on an AXI4 slave
/// with random stalls on every channel and read bursts reordered across IDs, all on one
/// instance: a problem waited for by interrupt; a grouped-query one in (seq, heads, d) layout
/// by polling; sixteen heads whose transfers straddle 4 KiB boundaries, with the bursts
/// counted against the addresses; an abort in mid-run; a slave error on K's reads (ERR_CODE 7)
/// and a decode error on O's writes (8); and a run after them. Every finished run bit-exact
/// with exact counters; the slave checks the protocol and the RTL's AXI4 assertions watch.
/// Then the launch contract (`verify::attention::launches`) on the AXI4 top.
#[test]
fn top_runs_over_axi4_through_its_registers_and_recovers() {
    let cfg = axi4_small();
    let p = CoreParams::from_config(&cfg).unwrap();
    let (model, manifest) = simulate(&cfg, &Target::Top).unwrap();
    assert_eq!(manifest.top, "regflash_top");
    let timing = MemoryTiming {
        latency: 9,
        stall_probability: 0.25,
        seed: 7,
        ..MemoryTiming::default()
    };
    let problem = |heads, q, k, causal, out, seed| {
        Attention::generate(Pattern::Unit, heads, q, k, 16, causal, out, seed)
    };
    let a0 = problem(1, 11, 17, false, OutFormat::Short, 1);
    let (mut mem, lay) = memory_image(&p, &a0, &timing).unwrap();
    let mut d = TopDriver::new(&model, &p, 5, &timing, &mut mem).unwrap();
    let run = |d: &mut TopDriver, a: &Attention, wait| {
        let (mut mem, lay) = memory_image(&p, a, &timing).unwrap();
        let r = d.run(&p, a, &timing, wait, &mut mem, &lay).unwrap();
        let chk = check(&p, a, &r);
        assert!(chk.ok(), "{wait:?}: {}", chk.describe());
        (r, lay)
    };
    let r0 = d
        .run(&p, &a0, &timing, Wait::Interrupt, &mut mem, &lay)
        .unwrap();
    assert!(
        check(&p, &a0, &r0).ok(),
        "{}",
        check(&p, &a0, &r0).describe()
    );
    // Two query heads on one K/V head, tensors as (seq, heads, d): strides and KV_GROUP.
    let gqa = problem(2, 15, 10, true, OutFormat::F32, 2)
        .grouped(1)
        .laid_out(TensorLayout::Bshd);
    run(&mut d, &gqa, Wait::Poll);
    // Heads of 9 rows (288 bytes): head 14's first tile and blocks straddle 4 KiB.
    let many = problem(16, 9, 9, false, OutFormat::Short, 6);
    let (r, lay) = run(&mut d, &many, Wait::Interrupt);
    let axi = r.axi.expect("AXI4 statistics");
    assert_eq!(
        (axi.read_bursts, axi.write_bursts),
        expected_bursts(&p, &many, &lay),
        "{axi:?}"
    );
    assert!(axi.overtaking_beats > 0 && axi.stalled > 0, "{axi:?}");
    // Abort a long run: DONE with ERR_CODE 6 once the bursts in flight are answered.
    let long = problem(2, 64, 64, false, OutFormat::Short, 3);
    let (mut mem, lay) = memory_image(&p, &long, &timing).unwrap();
    d.program(&long, &lay, Wait::Interrupt, &mut mem).unwrap();
    d.write("CTRL", 1, &mut mem).unwrap();
    for _ in 0..500 {
        d.tick(&mut mem).unwrap();
    }
    assert_eq!(d.read("STATUS", &mut mem).unwrap() & 3, 1, "busy, not done");
    d.write("CTRL", 2, &mut mem).unwrap();
    let st = d.wait(Wait::Interrupt, 2000, &mut mem).unwrap();
    assert_eq!(st.code, regmap::ERR_ABORTED, "{st:?}");
    assert_eq!(d.counters(&mut mem).unwrap()["macs"], 0, "counters restart");
    d.clear_irq(&mut mem).unwrap();
    // Error responses: SLVERR on a K read, DECERR on an O write.
    let a = problem(1, 20, 20, false, OutFormat::Short, 8);
    for (tensor, resp, code) in [
        ("K", AXI_SLVERR, dma::error::SLVERR),
        ("O", AXI_DECERR, dma::error::DECERR),
    ] {
        let (mut mem, lay) = memory_image(&p, &a, &timing).unwrap();
        let at = if tensor == "K" { lay.k } else { lay.o };
        d.set_fault(Some(AxiFault {
            lo: at + 32,
            hi: at + 64,
            resp,
        }))
        .unwrap();
        let r = d
            .run(&p, &a, &timing, Wait::Interrupt, &mut mem, &lay)
            .unwrap();
        assert_eq!(
            r.dma_error,
            code,
            "{tensor}: {}",
            dma::error::describe(r.dma_error)
        );
        d.set_fault(None).unwrap();
    }
    run(
        &mut d,
        &problem(1, 9, 33, true, OutFormat::Short, 4),
        Wait::Interrupt,
    );
    // A varlen batch over AXI4: four query heads on two K/V heads, (seq, heads, d), causal.
    let b = Batch::generate(
        Pattern::Unit,
        4,
        2,
        &[17, 3, 30, 1],
        &[20, 3, 25, 9],
        16,
        true,
        OutFormat::Short,
        TensorLayout::Bshd,
        9,
    );
    run_batch_checked(&mut d, &p, &b, &timing, Wait::Interrupt);
    // The launch contract over AXI4 (bus errors included): every path, one DONE event each,
    // on instances of its own (one instance of a model lives at a time).
    drop(d);
    let (launches, _) = regflash::verify::attention::launches::check_launches(&model, &p, 20, 41)
        .unwrap_or_else(|e| panic!("{e:#}"));
    assert!(launches >= 60, "{launches} launches");
}

/// rowfused's S arrays bound the keys it runs (`REGFLASH_CFG_ROW_KEYS`): its DMA refuses a K
/// or V descriptor of more keys with TOO_LARGE before reading any (`verify --unit dma`'s
/// directed case), and on the top a `K_LEN` past them ends that way with one DONE event, among
/// the launch contract's other paths.
#[test]
fn rowfused_refuses_rows_longer_than_its_s_arrays() {
    let cfg = CoreConfig {
        name: "small_rowfused32".into(),
        variant: hdl::config::Variant::Rowfused(hdl::config::RowParams {
            keys: 32,
            macro_blackbox: false,
            spill: false,
        }),
        ..small()
    };
    cfg.validate().unwrap();
    let r =
        regflash::verify::run::verify_block(&cfg, "dma", 0, 5).unwrap_or_else(|e| panic!("{e:#}"));
    assert!(r.directed_vectors > 0, "{r:?}");
    top_keeps_the_launch_contract(&cfg, 43);
}

/// The top of `cfg` through six random launch sequences from `seed` and the directed ones: at
/// least 40 launches, each ending as the launch contract says.
fn top_keeps_the_launch_contract(cfg: &CoreConfig, seed: u64) {
    cfg.validate().unwrap();
    let p = CoreParams::from_config(cfg).unwrap();
    let (model, _) = simulate(cfg, &Target::Top).unwrap();
    let (launches, _) = regflash::verify::attention::launches::check_launches(&model, &p, 6, seed)
        .unwrap_or_else(|e| panic!("{e:#}"));
    assert!(launches >= 40, "{launches} launches");
}

/// rowfused with its spill on the top: S arrays of one block (8 keys), so every run's rows (11
/// keys) send their second block through the scratch region at `S_ADDR`, which reaches the
/// core; the launch contract holds, with a scratch region that reaches past 2^ADDR_BITS for a
/// K_LEN past the S arrays refused at START among the paths.
#[test]
fn rowfused_spill_top_keeps_the_launch_contract() {
    let cfg = CoreConfig {
        name: "small_rowfused8_spill".into(),
        variant: hdl::config::Variant::Rowfused(hdl::config::RowParams {
            keys: 8,
            macro_blackbox: false,
            spill: true,
        }),
        ..small()
    };
    top_keeps_the_launch_contract(&cfg, 53);
}

/// unfused's top: `S_ADDR` (its map only) reaches the core, and the launch contract holds
/// (runs, errors, aborts, empty problems, batches), with a scratch region that reaches past
/// 2^ADDR_BITS refused at START (ADDRESS, nothing read or written) among the paths.
#[test]
fn unfused_top_keeps_the_launch_contract() {
    let cfg = CoreConfig {
        name: "small_unfused".into(),
        variant: hdl::config::Variant::Unfused,
        ..small()
    };
    top_keeps_the_launch_contract(&cfg, 47);
}

/// The C driver example, compiled against the generated header with `REGFLASH_IO_HOOKS` into a
/// shared library whose register accesses are AXI4-Lite transactions on the simulated top:
/// `regflash_probe` finds the core, `regflash_run` programs a grouped-query problem (strides,
/// KV_GROUP, BATCH included), starts it, polls STATUS and reads every counter; O is bit-exact
/// and the counters the C code read back are exact.
#[test]
fn the_c_driver_runs_the_top() {
    use std::cell::RefCell;
    let cfg = small();
    let p = CoreParams::from_config(&cfg).unwrap();
    let dir = ScratchDir::new("soc-c-driver").unwrap();
    generate(&cfg, &Target::Top, dir.path()).unwrap();
    let shim = dir.path().join("io_shim.c");
    std::fs::write(
        &shim,
        "#include <stdint.h>\n\
         static uint32_t (*rd)(uint32_t);\n\
         static void (*wr)(uint32_t, uint32_t);\n\
         void regflash_set_io(uint32_t (*r)(uint32_t), void (*w)(uint32_t, uint32_t));\n\
         uint32_t regflash_io_read(uint32_t off);\n\
         void regflash_io_write(uint32_t off, uint32_t v);\n\
         void regflash_set_io(uint32_t (*r)(uint32_t), void (*w)(uint32_t, uint32_t)) \
         { rd = r; wr = w; }\n\
         uint32_t regflash_io_read(uint32_t off) { return rd(off); }\n\
         void regflash_io_write(uint32_t off, uint32_t v) { wr(off, v); }\n",
    )
    .unwrap();
    let lib = dir.path().join("libregflash_run.so");
    let example = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/c/regflash_run.c");
    gcc(Command::new("gcc")
        .args(["-DREGFLASH_IO_HOOKS", "-shared", "-fPIC", "-O1", "-I"])
        .arg(dir.path())
        .arg(example)
        .arg(&shim)
        .arg("-o")
        .arg(&lib));

    #[repr(C)]
    struct Problem {
        q: u64,
        k: u64,
        v: u64,
        o: u64,
        heads: u32,
        kv_heads: u32,
        q_len: u32,
        k_len: u32,
        causal: i32,
        out_f32: i32,
    }
    // The simulated top and its memory, reached from the C code's register accesses.
    struct Ctx {
        driver: TopDriver,
        mem: regflash::verify::attention::Memory,
        error: Option<String>,
    }
    thread_local! {
        static CTX: RefCell<Option<Ctx>> = const { RefCell::new(None) };
    }
    extern "C" fn read(off: u32) -> u32 {
        CTX.with(|c| {
            let mut c = c.borrow_mut();
            let c = c.as_mut().expect("a simulated top");
            match c.driver.read_at(off, &mut c.mem) {
                Ok(v) => v,
                Err(e) => {
                    c.error.get_or_insert(format!("{e:#}"));
                    // DONE, so a polling loop ends; the test then fails on the error.
                    regmap::STATUS_DONE
                }
            }
        })
    }
    extern "C" fn write(off: u32, v: u32) {
        CTX.with(|c| {
            let mut c = c.borrow_mut();
            let c = c.as_mut().expect("a simulated top");
            if let Err(e) = c.driver.write_at(off, v as u64, &mut c.mem) {
                c.error.get_or_insert(format!("{e:#}"));
            }
        })
    }

    let a = Attention::generate(Pattern::Unit, 2, 19, 27, 16, true, OutFormat::F32, 11).grouped(1);
    let timing = MemoryTiming::default();
    let (model, _) = simulate(&cfg, &Target::Top).unwrap();
    let (mut mem, lay) = memory_image(&p, &a, &timing).unwrap();
    let driver = TopDriver::new(&model, &p, 3, &timing, &mut mem).unwrap();
    CTX.with(|c| {
        *c.borrow_mut() = Some(Ctx {
            driver,
            mem,
            error: None,
        })
    });
    let problem = Problem {
        q: lay.q,
        k: lay.k,
        v: lay.v,
        o: lay.o,
        heads: 2,
        kv_heads: 1,
        q_len: 19,
        k_len: 27,
        causal: 1,
        out_f32: 1,
    };
    let mut counters = [0u64; hdl::core::COUNTERS.len()];
    // SAFETY: the library is the example just compiled; the signatures are its own.
    let code = unsafe {
        let l = libloading::Library::new(&lib).unwrap();
        type SetIo = unsafe extern "C" fn(extern "C" fn(u32) -> u32, extern "C" fn(u32, u32));
        let set_io: libloading::Symbol<SetIo> = l.get(b"regflash_set_io").unwrap();
        set_io(read, write);
        type Probe = unsafe extern "C" fn(*mut u8) -> i32;
        let probe: libloading::Symbol<Probe> = l.get(b"regflash_probe").unwrap();
        assert_eq!(probe(std::ptr::null_mut()), 0, "regflash_probe");
        type Run = unsafe extern "C" fn(*mut u8, *const Problem, *mut u64) -> u32;
        let run: libloading::Symbol<Run> = l.get(b"regflash_run").unwrap();
        run(std::ptr::null_mut(), &problem, counters.as_mut_ptr())
    };
    let ctx = CTX.with(|c| c.borrow_mut().take()).unwrap();
    assert_eq!(ctx.error, None);
    assert_eq!(code, 0, "STATUS.ERR_CODE");
    let r = regflash::verify::attention::CoreRun {
        out: regflash::verify::attention::read_out(&ctx.mem, &lay, &a),
        counters: hdl::core::COUNTERS
            .iter()
            .zip(counters)
            .map(|(n, v)| (n.to_string(), v))
            .collect(),
        glb_banks: vec![],
        memory: ctx.mem.stats,
        assertion_failures: 0,
        dma_error: code as u64,
        timing,
        axi: None,
        link: None,
    };
    let chk = check(&p, &a, &r);
    assert!(chk.ok(), "{}", chk.describe());
}

/// A custom `top_name` names the top, which lints clean under `-Wall`; `regflash.h` defines
/// every register at the register map's offset, compiles as C99 with every warning an error,
/// and the C driver example compiles against it; `registers.md` lists every register.
#[test]
fn header_and_register_map_follow_the_description() {
    let mut cfg = small_glb();
    cfg.top_name = "npu_attn".into();
    let p = CoreParams::from_config(&cfg).unwrap();
    let dir = ScratchDir::new("soc-header").unwrap();
    let manifest = generate(&cfg, &Target::Top, dir.path()).unwrap();
    assert_eq!(manifest.top, "npu_attn");
    assert!(manifest.files.contains(&"npu_attn_csr.v".to_string()));
    let warnings = gen::flow::verilator_lint(dir.path(), &manifest).unwrap();
    assert!(warnings.is_empty(), "{warnings:#?}");
    let h = std::fs::read_to_string(dir.path().join("regflash.h")).unwrap();
    let md = std::fs::read_to_string(dir.path().join("registers.md")).unwrap();
    let regs = regmap::registers(&p);
    assert!(regs.len() > 70);
    for r in &regs {
        let line = format!("#define REGFLASH_{} 0x{:03X}u", r.name, r.offset);
        assert!(h.contains(&line), "regflash.h lacks `{line}`");
        assert!(
            md.contains(&format!(
                "| 0x{:03X} | {} | {} |",
                r.offset,
                r.name,
                r.access.name()
            )),
            "registers.md lacks {}",
            r.name
        );
    }
    assert!(h.contains(&format!(
        "#define REGFLASH_CFG_SCALE 0x{:08X}u",
        kernels::softmax::scale_constant(16)
    )));
    // Every macro is defined once.
    let mut names: Vec<&str> = h
        .lines()
        .filter_map(|l| l.strip_prefix("#define "))
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    let n = names.len();
    names.sort_unstable();
    names.dedup();
    assert_eq!(names.len(), n, "a macro defined twice");
    // Field by field, by the C compiler: every field's SHIFT and MASK, every error code, every
    // limit, as the description has them (a negative array size fails the compile).
    let mut checks = String::from("#include \"regflash.h\"\n");
    let mut assert_c = |cond: String| {
        let k = checks.matches("typedef").count();
        checks += &format!("typedef char check_{k}[({cond}) ? 1 : -1];\n");
    };
    let mut fields = 0;
    for r in &regs {
        assert!(
            !r.fields.is_empty() || r.name.ends_with("_HI"),
            "{} has no field",
            r.name
        );
        for f in &r.fields {
            let m = hdl::soc::header::field_macro(r, f);
            assert_c(format!(
                "{m}_SHIFT == {}u && {m}_MASK == 0x{:08X}u",
                f.lsb,
                hdl::soc::header::field_mask(f)
            ));
            fields += 1;
        }
    }
    for name in [
        "HEADS",
        "Q_LEN",
        "K_LEN",
        "KV_GROUP",
        "BATCH",
        "CNT_MACS_HI",
    ] {
        assert!(
            h.contains(&format!("#define REGFLASH_{name}_MASK ")),
            "{name}"
        );
    }
    for (code, name, _) in dma::error::CODES {
        assert_c(format!("REGFLASH_ERR_{name} == {code}u"));
        assert!(
            md.contains(&format!("| {code} | {name} |")),
            "registers.md: {name}"
        );
    }
    for (name, v, _) in regmap::limits(&p) {
        assert_c(format!("REGFLASH_CFG_{name} == {v}u"));
        assert!(
            md.contains(&format!("| {name} | {v} |")),
            "registers.md: {name}"
        );
    }
    assert_c(format!("REGFLASH_CFG_ALIGN == {}u", p.dma.beat_bytes()));
    assert!(fields > 70, "{fields} fields");
    let checks_c = dir.path().join("checks.c");
    std::fs::write(&checks_c, checks).unwrap();
    gcc(Command::new("gcc")
        .arg("-c")
        .arg(&checks_c)
        .arg("-I")
        .arg(dir.path())
        .arg("-o")
        .arg(dir.path().join("checks.o")));
    let example = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/c/regflash_run.c");
    gcc(Command::new("gcc")
        .args(["-c", example, "-I"])
        .arg(dir.path())
        .arg("-o")
        .arg(dir.path().join("regflash_run.o")));
    // A name an inner module has is refused.
    cfg.top_name = "fp_recip_e8m23".into();
    let err = generate(&cfg, &Target::Top, dir.path()).unwrap_err();
    assert!(format!("{err:#}").contains("is the name of a module inside the design"));
}
