//! Hostile but legal inputs: each case here once gave a silent wrong answer, a
//! crash or a hang. A PASS must mean the output is right by the numerical contract, not merely
//! equal to our own model.

use hdl::config::CoreConfig;
use hdl::core::CoreParams;
use kernels::flash::{decode, OutFormat};
use kernels::format::Format;
use kernels::patterns::{pad_keys, Pattern};
use kernels::reference::{attention_f64, Inputs};
use regflash::design::{simulate, Target};
use regflash::verify::attention::{check, memory_image, run, Attention, MemoryTiming, O_POISON};
use verilator_tb::Model;

mod common;
use common::{regflash, text};

fn small_core() -> (Model, CoreParams) {
    let cfg = CoreConfig::preset("small").unwrap();
    let p = CoreParams::from_config(&cfg).unwrap();
    (simulate(&cfg, &Target::Core).unwrap().0, p)
}

/// Positive Q (so q·k is −Inf for a −Inf key row, never NaN), random K and V, and the key rows
/// `pad` set to −Inf: K padding as models encode it.
fn padded(q_len: usize, k_len: usize, d: usize, causal: bool, pad: &[usize]) -> Attention {
    let mut a = Attention::generate(
        Pattern::Unit,
        1,
        q_len,
        k_len,
        d,
        causal,
        OutFormat::Short,
        7,
    );
    for x in a.q.iter_mut() {
        *x &= 0x7FFF; // |q|
        if *x == 0 {
            *x = 0x3C00;
        }
    }
    pad_keys(&mut a.k, d, pad.iter().copied());
    a
}

/// Item 1: a K/V block whose scores are all −Inf (first, middle, last and causal diagonal
/// block, and a row that sees only −Inf keys) gives finite output equal to the f64 reference
/// within the contract; it gave NaN everywhere (exp2(−Inf − (−Inf))) and still passed.
#[test]
fn neg_inf_blocks_give_finite_correct_output() {
    let (model, p) = small_core();
    let (bc, d) = (p.bc() as usize, p.d() as usize);
    let block = |j: usize| (j * bc..(j + 1) * bc).collect::<Vec<_>>();
    let cases: Vec<(&str, Attention)> = vec![
        ("first block", padded(20, 3 * bc, d, false, &block(0))),
        ("middle block", padded(20, 3 * bc, d, false, &block(1))),
        ("last block", padded(20, 3 * bc, d, false, &block(2))),
        (
            "first two blocks, causal: tile 1 sees only −Inf keys",
            padded(3 * bc, 3 * bc, d, true, &[block(0), block(1)].concat()),
        ),
        (
            "causal diagonal block",
            padded(3 * bc, 3 * bc, d, true, &block(2)),
        ),
        (
            "every key",
            padded(9, 2 * bc, d, false, &(0..2 * bc).collect::<Vec<_>>()),
        ),
    ];
    for (what, a) in cases {
        let r = run(&model, &p, &a, &MemoryTiming::default(), |_, _| {}).unwrap();
        let chk = check(&p, &a, &r);
        assert!(chk.ok(), "{what}: {}", chk.describe());
        let got = decode(&r.out, a.out, a.format);
        let want = attention_f64(&Inputs {
            q: &a.q,
            k: &a.k,
            v: &a.v,
            q_len: a.q_len,
            k_len: a.k_len,
            d,
            causal: a.causal,
            format: a.format,
            score_exp: 0,
        });
        assert!(want.iter().all(|x| x.is_finite()), "{what}: reference");
        assert!(
            got.iter().all(|x| x.is_finite()),
            "{what}: {} outputs not finite",
            got.iter().filter(|x| !x.is_finite()).count()
        );
        let accuracy = chk.accuracy.expect("an RTL run is checked");
        assert_eq!(accuracy.nonfinite_outputs, 0, "{what}");
        assert_eq!(accuracy.nonfinite_where_finite, 0, "{what}");
    }
}

/// Item 4: O starts as poison, so an output the core never writes cannot pass as the zero of
/// a fully masked row; and a run whose O is all written leaves no poison behind.
#[test]
fn output_region_starts_as_poison() {
    let (model, p) = small_core();
    // 20 queries, 4 keys, causal: queries 0..15 see no key (tiles 0 and 1 have no block).
    let a = Attention::generate(Pattern::Unit, 2, 20, 4, 16, true, OutFormat::F32, 3);
    let (mem, lay) = memory_image(&p, &a, &MemoryTiming::default()).unwrap();
    let o = mem.read_bytes(lay.o as usize, 2 * 20 * 16 * 4);
    assert!(o.iter().all(|&b| b == O_POISON));
    let r = run(&model, &p, &a, &MemoryTiming::default(), |_, _| {}).unwrap();
    let chk = check(&p, &a, &r);
    assert!(chk.ok(), "{}", chk.describe());
    assert!(
        r.out[..16 * 16].iter().all(|&x| x == 0),
        "masked rows are +0"
    );
}

/// Item 3: the contract fails what bit-exactness alone would pass: NaN where the reference is
/// finite, a nonzero fully masked row, an error above the bound.
#[test]
fn the_contract_fails_wrong_outputs() {
    use kernels::accuracy::Accuracy;
    let one = 0x3C00u16;
    // 2 queries, 1 key, causal: query 0 sees nothing (0), query 1 sees key 0 (V = 1).
    let (q, k, v) = ([one; 2], [one], [one]);
    let p = kernels::flash::Problem {
        q: &q,
        k: &k,
        v: &v,
        q_len: 2,
        k_len: 1,
        score_exp: 0,
    };
    let acc = |got: &[f64]| Accuracy::of_attention(&p, 1, true, Format::FP16, got);
    assert_eq!(acc(&[0.0, 1.0]).check(), Ok(()));
    let nan = acc(&[0.0, f64::NAN]);
    assert!(nan.check().unwrap_err().contains("NaN or infinite"));
    let masked = acc(&[1e-9, 1.0]);
    assert!(masked.check().unwrap_err().contains("see no key"));
    let off = acc(&[0.0, 1.01]);
    assert!(off.check().unwrap_err().contains("exceeds"));
}

/// Item 6: a truncated or corrupted cached model is detected before it is loaded and rebuilt
/// with a notice (it killed the process with SIGBUS / SIGSEGV), build folders of interrupted
/// builds are removed, and a damaged shared run-time object or precompiled header is compiled
/// again.
#[test]
fn damaged_model_cache_heals() {
    use std::process::Command;
    let cache = gen::tools::ScratchDir::new("cache-heal").unwrap();
    let verify = || {
        Command::new(env!("CARGO_BIN_EXE_regflash"))
            .args(["verify", "--unit", "fp_max_e8m23", "--vectors", "200"])
            .env("REGFLASH_CACHE_DIR", cache.path())
            // The Verilator on PATH (Debian's 5.006), whose makefiles leave the precompiled
            // header to the flow's shared one, checked below (5.048 precompiles its own).
            .env("REGFLASH_VERILATOR", "verilator")
            .output()
            .unwrap()
    };
    let o = verify();
    assert!(o.status.success(), "{}", text(&o));
    let root = cache.path().join("verilator");
    let lib = std::fs::read_dir(&root)
        .unwrap()
        .flatten()
        .map(|e| e.path().join("libdut.so"))
        .find(|p| p.is_file())
        .expect("a cached library");
    // A cached run does not say it builds.
    let o = verify();
    assert!(
        o.status.success() && !text(&o).contains("building"),
        "{}",
        text(&o)
    );

    // A build folder of a process that is gone.
    let mut child = Command::new("true").spawn().unwrap();
    let dead = child.id();
    child.wait().unwrap();
    let stale = root.join(format!("x-0.tmp-{dead}"));
    std::fs::create_dir_all(stale.join("obj")).unwrap();

    let len = std::fs::metadata(&lib).unwrap().len();
    let truncate = |lib: &std::path::Path| truncate_to(lib, len as usize / 2);
    let corrupt = |lib: &std::path::Path| {
        let mut b = std::fs::read(lib).unwrap();
        let n = b.len();
        b[n / 3..n / 3 + 4096].fill(0xA5);
        std::fs::write(lib, b).unwrap();
    };
    for (what, damage) in [
        ("truncated", &truncate as &dyn Fn(&std::path::Path)),
        ("corrupted", &corrupt),
    ] {
        damage(&lib);
        let o = verify();
        let t = text(&o);
        assert!(o.status.success(), "{what}: {t}");
        assert!(
            t.contains("is damaged") && t.contains("rebuilding"),
            "{what}: {t}"
        );
        assert_eq!(std::fs::metadata(&lib).unwrap().len(), len, "{what}");
    }
    assert!(!stale.exists(), "the stale build folder is removed");

    // A damaged shared run-time object (verilator_tb/src/runtime.rs) is not linked: make
    // compiles it again for the next model, and the good copy replaces it.
    let runtime = std::fs::read_dir(&root)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| {
            p.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("runtime-")
        })
        .expect("the shared run-time objects");
    let object = runtime.join("verilated.o");
    let good_len = std::fs::metadata(&object).unwrap().len() as usize;
    corrupt(&object);
    std::fs::remove_dir_all(lib.parent().unwrap()).unwrap();
    let o = verify();
    assert!(o.status.success(), "damaged run-time object: {}", text(&o));
    let now = std::fs::read(&object).unwrap();
    assert_eq!(now.len(), good_len);
    assert!(
        now[good_len / 3..good_len / 3 + 4096]
            .iter()
            .any(|&b| b != 0xA5),
        "the damaged run-time object is replaced"
    );

    // A damaged precompiled header (verilator_tb/src/pch.rs) is built again before use.
    let pch = std::fs::read_dir(&root)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| p.file_name().unwrap().to_string_lossy().starts_with("pch-"))
        .expect("the precompiled header");
    // Every variant damaged (the run-time objects above used one of their own): the model's
    // build succeeds and rebuilds the ones its compile commands use.
    let variants: Vec<(std::path::PathBuf, usize)> =
        std::fs::read_dir(pch.join("regflash_pch.h.gch"))
            .unwrap()
            .flatten()
            .map(|e| (e.path(), e.metadata().unwrap().len() as usize))
            .collect();
    assert!(!variants.is_empty(), "a precompiled variant");
    for (v, len) in &variants {
        truncate_to(v, len / 2);
    }
    std::fs::remove_dir_all(lib.parent().unwrap()).unwrap();
    let o = verify();
    assert!(
        o.status.success(),
        "damaged precompiled header: {}",
        text(&o)
    );
    // (A rebuilt header is not byte-identical: g++ records the file it wrote.)
    let rebuilt = variants
        .iter()
        .filter(|(v, len)| std::fs::metadata(v).unwrap().len().abs_diff(*len as u64) < 4096)
        .count();
    assert!(rebuilt >= 1, "no damaged precompiled header was rebuilt");
}

fn truncate_to(path: &std::path::Path, len: usize) {
    std::fs::OpenOptions::new()
        .write(true)
        .open(path)
        .unwrap()
        .set_len(len as u64)
        .unwrap()
}

/// Item 9: slow memory. Up to MAX_MEM_LATENCY cycles the assertion bound and the watchdog
/// hold (the K/V bound fired falsely from ~6,500 cycles and the watchdog called ~110,000 a
/// hang); beyond it a run is refused with the reason.
#[test]
fn slow_memory_within_the_documented_maximum_passes() {
    use hdl::config::MAX_MEM_LATENCY;
    let (model, p) = small_core();
    let a = Attention::generate(Pattern::Unit, 2, 17, 40, 16, true, OutFormat::Short, 4);
    let slow = MemoryTiming {
        latency: MAX_MEM_LATENCY,
        bytes_per_cycle: 8,
        stall_probability: 0.3,
        seed: 9,
        ..MemoryTiming::default()
    };
    let r = run(&model, &p, &a, &slow, |_, _| {}).unwrap();
    let chk = check(&p, &a, &r);
    assert!(chk.ok(), "{}", chk.describe());
    let slower = MemoryTiming {
        latency: MAX_MEM_LATENCY + 1,
        ..slow
    };
    let e = format!("{:#}", run(&model, &p, &a, &slower, |_, _| {}).unwrap_err());
    assert!(e.contains("allowed 1 to 4096"), "{e}");
}

/// Item 13: fault injection. Each RTL assertion has its own deliberate defect, and that exact
/// assertion fires first; two defects no assertion can see (the causal diagonal off by one, a
/// wrong rescale shift) are caught by the comparison with the model and the f64 reference.
/// Run through `regflash sim --fault` on a one-PE core (the cheapest to build), as a user
/// would see it; the assertion messages name Verilog files that exist. Each variant's faults
/// run on one model (the core built for fault injection, the fault selected at run time),
/// which with no fault selected is bit-exact.
#[test]
fn every_assertion_has_a_fault_that_fires_it() {
    use hdl::fault::Fault;
    let dir = gen::tools::ScratchDir::new("faults").unwrap();
    let one_pe = "preset = \"small\"\nrows = 1\ncols = 1\nbr = 2\nhead_dim = 4\nmem_width = 64\n";
    // Every variant: buf2d with the single-port P bank its own fault needs, and Bc = 4 keys
    // (at least e = 4: each row's burst of P writes then meets a PV read for certain). The
    // comparison-only faults run a causal shape whose k_len is a multiple of Bc. reg2d takes
    // every fault; the others the faults that act in logic the variant changes: the phase
    // selection and counts (the sequencer's S-copy gate and port turns in buf2d, its two
    // phase streams in reg3d), the rescale shift (buf2d's sweeps, reg3d's PV tier), the PV
    // mask (reg3d's own generator), the shared port and the softmax tier's S slots. The fetch unit's releases and the
    // readout's writes are the same logic in every variant.
    use Fault::*;
    let schedule = [StallQk, StallPv, SkipK, SkipV];
    let buf2d: Vec<Fault> = schedule
        .into_iter()
        .chain([WrongRescale, SharedPortClash])
        .collect();
    let reg3d: Vec<Fault> = schedule
        .into_iter()
        .chain([WrongRescale, CausalOffByOne])
        .collect();
    let variants = [
        ("reg2d", "bc = 2\n".to_string(), "6", Fault::ALL.to_vec()),
        (
            "buf2d",
            "variant = \"buf2d\"\nbc = 4\n[buf2d]\nports = 1\n".to_string(),
            "8",
            buf2d,
        ),
        // reg3d with lazy rescaling (τ = 1): the PV tier's shift is 0 wherever a stale max was
        // kept, and the wrong shift must still show.
        (
            "reg3d",
            "variant = \"reg3d\"\nbc = 2\nrescale = \"lazy\"\nlazy_threshold = 1\n".to_string(),
            "6",
            reg3d,
        ),
        // The AXI4 master: its protocol checker.
        (
            "axi4",
            "mem_if = \"axi4\"\nbc = 2\n".to_string(),
            "6",
            vec![EarlyWlast],
        ),
        // A GLB of two block pairs (4 keys of K and V): its checker's two assertions.
        (
            "glb",
            "bc = 2\nglb_bytes = 64\nglb_banks = 2\n".to_string(),
            "6",
            vec![GlbNoHit, GlbStaleTag],
        ),
        // rowfused: its own phase order (every QK and max pass first) and its exp passes'
        // rescale shift (0 against the row's final max), with S arrays of two blocks and the
        // spill (10 keys: three of a row's five blocks go through the scratch region).
        (
            "rowfused",
            "variant = \"rowfused\"\nbc = 2\n[rowfused]\nkeys = 4\nspill = true\n".to_string(),
            "6",
            schedule.into_iter().chain([WrongRescale]).collect(),
        ),
        // unfused: rowfused's order with S and P through memory (the scratch channel's and the
        // O channel's descriptors come from the sequencer), the exp passes' rescale shift.
        (
            "unfused",
            "variant = \"unfused\"\nbc = 2\n".to_string(),
            "6",
            schedule.into_iter().chain([WrongRescale]).collect(),
        ),
        // Three tiers: the same phase streams; the softmax tier's S registers are its own.
        (
            "reg3d_t3",
            "variant = \"reg3d\"\nbc = 2\n[reg3d]\ntiers = 3\n".to_string(),
            "6",
            vec![SharedSTierSlot],
        ),
        // INT8 QKᵀ (d = 4: two packed elements a row after the scales): C' of the other S
        // slot, and the schedule's checks over its scale steps.
        (
            "int8",
            "bc = 2\nqk_format = \"int8\"\n".to_string(),
            "6",
            vec![StaleScale, SkipK],
        ),
    ];
    let mut runs = vec![];
    let mut cores = vec![];
    for (variant, extra, causal_seq, faults) in variants {
        let cfg = dir.path().join(format!("one_pe_{variant}.toml"));
        std::fs::write(&cfg, format!("{one_pe}{extra}")).unwrap();
        let c = CoreConfig::from_toml(&std::fs::read_to_string(&cfg).unwrap()).unwrap();
        let p = CoreParams::from_config(&c).unwrap();
        cores.push(c);
        for fault in faults {
            if p.fault_needs(fault).is_none() {
                runs.push((cfg.clone(), fault, causal_seq));
            }
        }
    }
    // Two at a time: each run is mostly its (single-file) model build.
    let next = std::sync::atomic::AtomicUsize::new(0);
    std::thread::scope(|s| {
        for _ in 0..2 {
            s.spawn(|| loop {
                let k = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let Some((cfg, fault, causal_seq)) = runs.get(k) else {
                    break;
                };
                fires(cfg, *fault, causal_seq);
            });
        }
    });
    // With no fault selected, each core built for fault injection (the one model its faults
    // ran on) is the real core: bit-exact, every counter right, no assertion fired.
    for c in &cores {
        let p = CoreParams::from_config(c).unwrap().for_fault_injection();
        let (model, manifest) = simulate(c, &Target::FaultyCore).unwrap();
        assert!(manifest.top.ends_with("_faults"), "{}", manifest.top);
        for causal in [false, true] {
            let a = Attention::generate(Pattern::Unit, 1, 10, 10, 4, causal, OutFormat::Short, 3)
                .for_design(&p);
            regflash::verify::attention::run_and_check(&model, &p, &a, &MemoryTiming::default())
                .unwrap_or_else(|e| panic!("{} with no fault selected: {e:#}", manifest.top));
        }
    }
}

/// Simulates the core of the configuration file `cfg` with `fault`: the run fails, and the
/// fault's assertion fires first (or, for a fault no assertion sees, the comparison fails).
fn fires(cfg: &std::path::Path, fault: hdl::fault::Fault, causal_seq: &str) {
    // Schedule faults: 10 queries and keys; the comparison-only faults: `causal_seq`, causal
    // (k_len a multiple of Bc, so the late diagonal unmasks only fetched keys).
    let shape: &[&str] = match fault.assertion() {
        Some(_) => &["--seq", "10"],
        None => &["--seq", causal_seq, "--causal"],
    };
    let mut args = vec!["sim", "--config", cfg.to_str().unwrap()];
    args.extend(shape);
    // A stale tag shows only when the K/V head changes.
    if fault == hdl::fault::Fault::GlbStaleTag {
        args.extend(["--heads", "2"]);
    }
    args.extend(["--fault", fault.name()]);
    let o = regflash(&args);
    let out = text(&o);
    assert!(
        !o.status.success(),
        "{fault:?} passed in {}: {out}",
        cfg.display()
    );
    let fired: Vec<&str> = out
        .split("regflash assertion `")
        .skip(1)
        .filter_map(|t| t.split('`').next())
        .collect();
    match fault.assertion() {
        Some(name) => {
            assert_eq!(fired.first(), Some(&name), "{fault:?}: {out}");
            // The simulator names the Verilog source: it must still exist.
            let file = out
                .split_whitespace()
                .find(|w| w.starts_with('/') && w.contains(".v:"))
                .and_then(|w| w.split(".v:").next())
                .map(|f| format!("{f}.v"))
                .unwrap_or_else(|| panic!("{fault:?}: no source path in {out}"));
            assert!(std::path::Path::new(&file).is_file(), "{file}");
        }
        None => {
            assert!(fired.is_empty(), "{fault:?}: {out}");
            assert!(out.contains("not bit-exact"), "{fault:?}: {out}");
            assert!(
                out.contains("not correct against the f64 reference"),
                "{fault:?}: {out}"
            );
        }
    }
}

/// Item 10: a refused DMA descriptor ends the run with `done` and the error code (the core
/// stayed busy forever: the channel stopped and the sequencer waited for it), with every read
/// in flight drained, and the same core, not reset, runs the next problem bit-exactly. The
/// core can provoke codes 2 and 4 (a misaligned or out-of-range base, on each channel); its
/// descriptors never have zero size, always fit the buffers and start only idle channels, so
/// codes 1, 3 and 5 are raised on the DMA alone (tests/dma.rs).
#[test]
fn dma_errors_end_the_run_and_the_core_restarts() {
    use hdl::mem::dma::error::{MISALIGNED, OUT_OF_RANGE};
    use regflash::verify::attention::{run_on, Layout};
    let (model, p) = small_core();
    let a = Attention::generate(Pattern::Unit, 2, 20, 28, 16, false, OutFormat::Short, 6);
    let t = MemoryTiming::default();
    let (_, good) = memory_image(&p, &a, &t).unwrap();
    // Aligned, but the transfer runs past the top of the address range.
    let top = (1u64 << p.addr_bits) - 32;
    type Set = fn(&mut Layout, u64);
    let channels: [(&str, Set, u64); 4] = [
        ("Q", |l, x| l.q = x, good.q),
        ("K", |l, x| l.k = x, good.k),
        ("V", |l, x| l.v = x, good.v),
        ("O", |l, x| l.o = x, good.o),
    ];
    let mut cases = vec![];
    for (ch, set, base) in channels {
        for (what, addr, code) in [
            ("misaligned", base + 2, MISALIGNED),
            ("out of range", top, OUT_OF_RANGE),
        ] {
            let mut l = good;
            set(&mut l, addr);
            cases.push((format!("{ch} {what}"), l, code));
        }
    }
    let mut dut = model.dut().unwrap();
    dut.set("start", 0);
    dut.reset(2);
    for (what, addrs, code) in cases {
        let (mut mem, lay) = memory_image(&p, &a, &t).unwrap();
        let r = run_on(&mut dut, &p, &a, &t, &mut mem, &lay, &addrs, |_, _| {})
            .unwrap_or_else(|e| panic!("{what}: {e:#}"));
        assert_eq!(r.dma_error, code, "{what}");
        assert_eq!(dut.get("busy"), 0, "{what}: idle after the abort");
        let chk = check(&p, &a, &r);
        assert!(!chk.ok() && chk.describe().contains("DMA error"), "{what}");
        let (mut mem, lay) = memory_image(&p, &a, &t).unwrap();
        let r = run_on(&mut dut, &p, &a, &t, &mut mem, &lay, &lay, |_, _| {}).unwrap();
        let chk = check(&p, &a, &r);
        assert!(chk.ok(), "{what}, then a good run: {}", chk.describe());
    }
}

/// Item 14: register-file accesses are counted at the PE ports, not copied from the MAC
/// count. One 8 x 8 tile and block on the small core (d = 16, 4 x 4 PEs, Br = Bc = 8), worked
/// by hand: 2 x 8 x 8 x 16 = 2,048 MACs, each one write; reads: the 2,048 MACs less the first
/// product of each of the 64 S values (MacClear) and of each of the 8 x 16 O values (MacZero),
/// 2,048 - 64 - 128 = 1,856, plus the row engines' reads: two sweeps over the 64 scores and a
/// readout of the 128 outputs, 256: 2,112 in all. The check of every run (`expected_rf_reads`)
/// computes the same from the mask's definition for any problem.
#[test]
fn register_file_counters_count_port_accesses() {
    let (model, p) = small_core();
    let a = Attention::generate(Pattern::Unit, 1, 8, 8, 16, false, OutFormat::Short, 2);
    let r = run(&model, &p, &a, &MemoryTiming::default(), |_, _| {}).unwrap();
    assert!(check(&p, &a, &r).ok());
    assert_eq!(r.counters["macs"], 2048);
    // The MAC accumulates in its pipeline: a write per score (64) and per O value (8 rows x
    // 16 columns, one block), no accumulator reads (one block: O starts at +0, nothing to
    // rescale); the row engines read each score twice (max and exp sweeps) and each O value
    // once (the readout): 128 + 128.
    assert_eq!(r.counters["rf_writes"], 64 + 128);
    assert_eq!(r.counters["rf_reads"], 128 + 128);
    // P: the exp stage writes the 64 weights; PV reads each once per output column of its PE
    // (4), every step taking the next key's weight.
    assert_eq!(r.counters["p_buf_writes"], 64);
    assert_eq!(r.counters["p_buf_reads"], 64 * 4);
}

/// Item 12: messages that say what is wrong and how to fix it: impossible port widths and a
/// zero head dimension get advice that works, the retired test-only key is an unknown key, and
/// `regflash lint` passes on Verilator's own syntax error instead of a Yosys failure.
#[test]
fn messages_say_what_is_wrong() {
    let dir = gen::tools::ScratchDir::new("messages").unwrap();
    let run = |args: &[&str]| {
        let o = regflash(args);
        let t = text(&o);
        assert!(
            !o.status.success() && !t.contains("panicked"),
            "{args:?}: {t}"
        );
        t
    };
    for (key, want) in [
        (
            "mem_width = 7",
            "allowed are powers of two from 32 to 1024 bits",
        ),
        (
            "mem_width = 24",
            "allowed are powers of two from 32 to 1024 bits",
        ),
        (
            "head_dim = 0",
            "head_dim = 0 must be a positive multiple of cols = 4",
        ),
        (
            "head_dim = 12",
            "use a head_dim that is a multiple of 16, or mem_width = 64",
        ),
        (
            "addr_bits = 12",
            "addr_bits = 12 is out of range: allowed 16 to 48",
        ),
        (
            "index_bits = 64",
            "index_bits = 64 is out of range: allowed 4 to 30",
        ),
        ("debug_hold_v = true", "unknown field `debug_hold_v`"),
    ] {
        let f = dir.path().join("c.toml");
        std::fs::write(&f, format!("preset = \"small\"\n{key}\n")).unwrap();
        let out = dir.path().join("g");
        let t = run(&[
            "gen",
            "--config",
            f.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
        ]);
        assert!(t.contains(want), "{key}: expected `{want}` in: {t}");
    }
    let g = dir.path().join("unit");
    let o = regflash(&[
        "gen",
        "--unit",
        "fp_max_e8m23",
        "--out",
        g.to_str().unwrap(),
    ]);
    assert!(o.status.success());
    let v = g.join("fp_max_e8m23.v");
    let text = std::fs::read_to_string(&v)
        .unwrap()
        .replace("endmodule", "endmodle");
    std::fs::write(&v, text).unwrap();
    let t = run(&["lint", g.to_str().unwrap()]);
    assert!(
        t.contains("%Error: fp_max_e8m23.v") && t.contains("Yosys synthesis was not run"),
        "{t}"
    );
}
