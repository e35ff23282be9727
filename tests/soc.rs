//! The SoC top (`regflash_top`): its AXI4-Lite register block against the register model; the
//! whole top driven only through its registers (bit-exact O, every counter exact, read as
//! LO/HI pairs), including a software abort and a run after it; the generated C header and
//! register map against the register description, with the C driver example compiled
//! against the header.

use std::process::Command;

use gen::tools::ScratchDir;
use hdl::config::CoreConfig;
use hdl::core::CoreParams;
use hdl::soc::regmap;
use kernels::flash::OutFormat;
use kernels::patterns::Pattern;
use regflash::design::{generate, simulate, Target};
use regflash::verify::attention::{
    check, memory_image, Attention, MemoryTiming, TensorLayout, TopDriver, Wait,
};

fn small() -> CoreConfig {
    CoreConfig::preset("small").unwrap()
}

/// The register block equals its model over directed and random streams with random
/// channel delays (`verify --unit csr`).
#[test]
fn register_block_equals_its_model() {
    let r = regflash::verify::run::verify_block(&small(), "csr", 8000, 17).unwrap();
    assert!(r.directed_vectors > 500 && r.random_vectors > 200, "{r:?}");
}

/// Two problems through the registers on one top instance (interrupt, then polling, the
/// second grouped-query in the (seq, heads, d) layout), an abort in the middle of a third, and
/// a fourth after it: every finished run bit-exact with
/// exact counters; the aborted one reports ERR_CODE 6 with the counters restarted.
#[test]
fn top_runs_through_its_registers_and_recovers_from_an_abort() {
    let cfg = small();
    let p = CoreParams::from_config(&cfg).unwrap();
    let (model, manifest) = simulate(&cfg, &Target::Top).unwrap();
    assert_eq!(manifest.top, "regflash_top");
    let timing = MemoryTiming::default();
    let problem = |heads, q, k, causal, out, seed| {
        Attention::generate(Pattern::Unit, heads, q, k, 16, causal, out, seed)
    };
    let a0 = problem(1, 11, 17, false, OutFormat::F16, 1);
    let (mut mem, lay) = memory_image(&p, &a0, &timing).unwrap();
    let mut d = TopDriver::new(&model, &p, 5, &mut mem).unwrap();
    let run = |d: &mut TopDriver, a: &Attention, wait| {
        let (mut mem, lay) = memory_image(&p, a, &timing).unwrap();
        let r = d.run(&p, a, &timing, wait, &mut mem, &lay).unwrap();
        let chk = check(&p, a, &r);
        assert!(chk.ok(), "{wait:?}: {}", chk.describe());
        r
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
    // Abort a long run: DONE with ERR_CODE 6 once the reads in flight are back.
    let long = problem(2, 64, 64, false, OutFormat::F16, 3);
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
    run(
        &mut d,
        &problem(1, 9, 33, true, OutFormat::F16, 4),
        Wait::Interrupt,
    );
}

/// A custom `top_name` names the top, which lints clean under `-Wall`; `regflash.h` defines
/// every register at the register map's offset, compiles as C99 with every warning an error,
/// and the C driver example compiles against it; `registers.md` lists every register.
#[test]
fn header_and_register_map_follow_the_description() {
    let mut cfg = small();
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
    let example = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/c/regflash_run.c");
    let out = Command::new("gcc")
        .args([
            "-std=c99",
            "-Wall",
            "-Wextra",
            "-Werror",
            "-pedantic",
            "-c",
            example,
            "-I",
        ])
        .arg(dir.path())
        .arg("-o")
        .arg(dir.path().join("regflash_run.o"))
        .output()
        .expect("gcc runs (scripts/ensure-tools installs it)");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // A name an inner module has is refused.
    cfg.top_name = "fp32_recip".into();
    let err = generate(&cfg, &Target::Top, dir.path()).unwrap_err();
    assert!(format!("{err:#}").contains("is the name of a module inside the design"));
}
