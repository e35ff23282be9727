//! The configuration space: every value that validation accepts generates a
//! core whose Verilog lints clean, and every other value is refused with a message. A panic is
//! never an outcome. Each key is tried at, inside and beyond its bounds on top of `small`,
//! coherent configurations sit at the extremes (256-row and 256-column arrays, the narrowest
//! and widest widths), random combinations cover the rest, and the two extreme configurations
//! simulate bit-exactly.

use std::panic::{catch_unwind, AssertUnwindSafe};

use gen::flow::Linted;
use gen::tools::ScratchDir;
use hdl::config::{BufParams, CoreConfig, StackParams, Variant};
use hdl::core::CoreParams;
use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError};
use regflash::design::{generate, simulate, Target};
use regflash::verify::attention::{directed, run_and_check};

/// What happened to one configuration.
#[derive(Debug, PartialEq)]
enum Outcome {
    Refused(String),
    /// Generated (and linted clean, if asked).
    Built,
}

/// Validates `c`; if accepted, generates the core and (with `lint`) lints it, each module not
/// already in `lint` (`verilator_lint_each`: the configurations of one test share most of
/// their modules; cross-module loops are the small cores' whole-hierarchy lint's to find, in
/// tests/emit.rs). A panic, an empty refusal or a lint warning is an error.
fn try_config(c: &CoreConfig, lint: Option<&mut Linted>) -> Result<Outcome, String> {
    let result = catch_unwind(AssertUnwindSafe(|| -> Result<Outcome, String> {
        if let Err(e) = CoreParams::from_config(c) {
            return Ok(Outcome::Refused(format!("{e:#}")));
        }
        let dir = ScratchDir::new("config-space").map_err(|e| e.to_string())?;
        let manifest = generate(c, &Target::Core, dir.path())
            .map_err(|e| format!("accepted but does not generate: {e:#}"))?;
        if let Some(linted) = lint {
            let w = gen::flow::verilator_lint_each(dir.path(), &manifest, linted)
                .map_err(|e| format!("lint did not run: {e:#}"))?;
            if !w.is_empty() {
                return Err(format!("accepted but not lint-clean: {}", w.join("\n")));
            }
        }
        Ok(Outcome::Built)
    }));
    match result {
        Ok(Ok(Outcome::Refused(m))) if m.trim().is_empty() => {
            Err("refused without a message".into())
        }
        Ok(r) => r,
        Err(p) => Err(format!(
            "panicked: {}",
            p.downcast_ref::<String>()
                .cloned()
                .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default()
        )),
    }
}

fn small() -> CoreConfig {
    CoreConfig::preset("small").unwrap()
}

type Edit = fn(&mut CoreConfig, u64);

/// (key, how to set it, values at and beyond its bounds: a value inside them would lint much
/// the same modules again, at seconds each).
fn keys() -> Vec<(&'static str, Edit, Vec<u64>)> {
    let wide = vec![0, 1, 3, 4, 256, 257, 65536, u32::MAX as u64];
    vec![
        ("rows", |c, v| c.rows = v as u32, wide.clone()),
        ("cols", |c, v| c.cols = v as u32, wide.clone()),
        ("br", |c, v| c.br = v as u32, wide.clone()),
        ("bc", |c, v| c.bc = v as u32, wide.clone()),
        ("head_dim", |c, v| c.head_dim = v as u32, wide.clone()),
        (
            "regs_per_pe",
            |c, v| c.regs_per_pe = v as u32,
            vec![0, 1, 2, 3, 32, 64, 1024, 2048, u32::MAX as u64],
        ),
        (
            "mul_latency",
            |c, v| c.mul_latency = v as u32,
            vec![0, 2, 3, 99],
        ),
        (
            "add_latency",
            |c, v| c.add_latency = v as u32,
            vec![0, 2, 3, 99],
        ),
        (
            "fmul_latency",
            |c, v| c.fmul_latency = v as u32,
            vec![0, 2, 3, 99],
        ),
        (
            "exp_latency",
            |c, v| c.exp_latency = v as u32,
            vec![0, 2, 3, 99],
        ),
        (
            "index_bits",
            |c, v| c.index_bits = v as u32,
            vec![0, 3, 4, 30, 31, 32, 63, 64, 65, u32::MAX as u64],
        ),
        (
            "mem_width",
            |c, v| c.mem_width = v as u32,
            vec![0, 7, 16, 24, 32, 128, 512, 1024, 2048, u32::MAX as u64],
        ),
        (
            "addr_bits",
            |c, v| c.addr_bits = v as u32,
            vec![0, 8, 12, 15, 16, 32, 48, 49, 64, u32::MAX as u64],
        ),
        (
            "max_outstanding",
            |c, v| c.max_outstanding = v as u32,
            vec![0, 1, 2, 3, 4096, 8192, u32::MAX as u64],
        ),
        (
            "glb_bytes",
            |c, v| c.glb.bytes = v,
            vec![0, 1, 256, 511, 512, 1024, 3072, 1 << 20, 1 << 33, u64::MAX],
        ),
        (
            "glb_banks",
            |c, v| (c.glb.bytes, c.glb.banks) = (2048, v as u32),
            vec![0, 1, 3, 4, 64, 4096, 8192, u32::MAX as u64],
        ),
        (
            "glb_word_bits",
            |c, v| (c.glb.bytes, c.glb.banks, c.glb.word_bits) = (2048, 8, v as u32),
            vec![0, 7, 8, 256, 512, u32::MAX as u64],
        ),
        (
            "glb_ports",
            |c, v| (c.glb.bytes, c.glb.ports) = (2048, v as u32),
            vec![0, 1, 2, 3],
        ),
        (
            "glb_spares",
            |c, v| {
                (c.glb.bytes, c.glb.banks) = (2048, 2);
                (c.glb.spares, c.glb.spare_group) = (v as u32, 8);
            },
            vec![1, 5, u32::MAX as u64],
        ),
        (
            "glb_spare_group",
            |c, v| {
                (c.glb.bytes, c.glb.banks) = (2048, 2);
                (c.glb.spares, c.glb.spare_group) = (4, v as u32);
            },
            vec![0, 1, 65, u32::MAX as u64],
        ),
        (
            "vlink_bits",
            |c, v| {
                c.variant = Variant::Reg3d(StackParams {
                    tiers: 3,
                    vlink_bits: v as u32,
                    ..StackParams::default()
                });
            },
            vec![0, 1, 3, 16, 33, 64, u32::MAX as u64],
        ),
        (
            "spares",
            |c, v| {
                c.variant = Variant::Reg3d(StackParams {
                    spares: v as u32,
                    spare_group: 8,
                    ..StackParams::default()
                });
            },
            vec![1, 5, u32::MAX as u64],
        ),
        (
            "spare_group",
            |c, v| {
                c.variant = Variant::Reg3d(StackParams {
                    spares: 4,
                    spare_group: v as u32,
                    ..StackParams::default()
                });
            },
            vec![0, 1, 2, 65, u32::MAX as u64],
        ),
    ]
}

/// Every key at its bounds on top of `small`: each value is refused with a message naming
/// the key, or builds and lints clean.
#[test]
fn every_key_at_its_bounds_builds_or_is_refused() {
    let mut built = 0;
    let mut linted = Linted::default();
    for (key, set, values) in keys() {
        for v in values {
            let mut c = small();
            set(&mut c, v);
            match try_config(&c, Some(&mut linted)) {
                Ok(Outcome::Built) => built += 1,
                Ok(Outcome::Refused(_)) => {}
                Err(e) => panic!("{key} = {v}: {e}"),
            }
        }
    }
    for mhz in [0.0, -1.0, f64::NAN, f64::INFINITY, 1e-9, 1e9] {
        let mut c = small();
        c.clock_mhz = mhz;
        try_config(&c, None).unwrap_or_else(|e| panic!("clock_mhz = {mhz}: {e}"));
    }
    // The in-range values above (latencies, widths, port, outstanding reads) build.
    assert!(built >= 20, "only {built} configurations built");
}

/// Coherent configurations at the extremes of the space, each module linted once (the
/// 256-row array's 256 row engines are one module: its whole-hierarchy lint took ~80 s).
#[test]
fn extreme_configurations_build_and_lint() {
    let mut tall = small();
    // 256 x 1 PEs: two query rows, two keys, four O columns per PE; 1-cycle MAC.
    (tall.rows, tall.cols, tall.br, tall.bc, tall.head_dim) = (256, 1, 512, 2, 4);
    (tall.mul_latency, tall.add_latency, tall.mem_width) = (0, 0, 64);
    let mut wide = small();
    // 1 x 256 PEs: a 256-input row-reduction tree, 512-byte rows (a key and an O column per
    // PE: wider blocks made K's and V's landing buffers 512 KiB each, a minute of lint).
    (wide.rows, wide.cols, wide.br, wide.bc, wide.head_dim) = (1, 256, 2, 256, 256);
    (wide.mul_latency, wide.add_latency) = (0, 0);
    let mut linted = Linted::default();
    for c in [tall, wide, narrowest(), widest()] {
        assert_eq!(
            try_config(&c, Some(&mut linted)),
            Ok(Outcome::Built),
            "{c:?}"
        );
    }
}

/// The narrowest widths: 4-bit indices, 16-bit addresses, a 32-bit port, two reads in flight.
fn narrowest() -> CoreConfig {
    let mut c = small();
    (c.index_bits, c.addr_bits, c.mem_width, c.max_outstanding) = (4, 16, 32, 2);
    c.name = "narrowest".into();
    c
}

/// The deepest pipelines and widest widths.
fn widest() -> CoreConfig {
    let mut c = small();
    (c.mul_latency, c.add_latency, c.fmul_latency, c.exp_latency) = (2, 2, 2, 2);
    (c.index_bits, c.addr_bits, c.max_outstanding) = (30, 48, 4096);
    (c.br, c.bc, c.head_dim, c.regs_per_pe) = (16, 16, 32, 128);
    c.name = "widest".into();
    c
}

/// Random combinations: refused with a message, or built (the first few also linted). Shapes
/// are drawn as per-PE shares (so most tilings divide onto the array), every other key over
/// its range and a little beyond, in every variant.
#[test]
fn random_configurations_build_or_are_refused() {
    // Mostly inside the ranges (the bounds test covers what lies beyond): registers from half
    // to four times what the tile needs, a port no wider than a row (or, one time in four,
    // any width), the MAC latency anywhere in its range.
    let strategy = (
        (1u32..=4, 1u32..=4, 1u32..=4, 1u32..=4, 1u32..=8),
        (-1i32..=2, 0u32..=2, 0u32..=2, 0u32..=2, 0u32..=2),
        (
            4u32..=30,
            (5u32..=10, prop::bool::weighted(0.25)),
            16u32..=48,
            1u32..=12,
        ),
        (0usize..5, 0u32..=4),
    );
    let config = Config {
        cases: 64,
        failure_persistence: None,
        ..Config::default()
    };
    let (linted, built) = (std::cell::Cell::new(0u32), std::cell::Cell::new(0u32));
    let modules = std::cell::RefCell::new(Linted::default());
    regflash::verify::seeds::run(
        config,
        81,
        &strategy,
        |((r, c, a, b, e), (rk, ml, al, fl, el), (ib, (mk, any_w), ab, mo), (variant, vl))| {
            let mut cfg = small();
            // reg2d, buf2d, reg3d with two tiers, with three, with three and narrow S links.
            cfg.variant = match variant {
                0 => Variant::Reg2d,
                // buf2d: words of one element to 256 bits, one or two banks per array.
                1 => Variant::Buf2d(BufParams {
                    word_bits: [0, 32, 64, 128, 256][vl as usize],
                    banks: 1 + (vl >= 2) as u32,
                    ..BufParams::default()
                }),
                _ => Variant::Reg3d(StackParams {
                    tiers: if variant >= 3 { 3 } else { 2 },
                    vlink_bits: if variant == 4 { 1 << vl } else { 32 },
                    ..StackParams::default()
                }),
            };
            (cfg.rows, cfg.cols, cfg.br, cfg.bc, cfg.head_dim) = (r, c, r * a, c * b, c * e);
            let need = (2 * a * b + a * e).next_power_of_two();
            cfg.regs_per_pe = if rk < 0 { need / 2 } else { need << rk }.max(2);
            (cfg.mul_latency, cfg.add_latency) = (ml, al);
            (cfg.fmul_latency, cfg.exp_latency) = (fl, el);
            let row_bits = 16 * cfg.head_dim;
            let fits = (5..=mk)
                .rev()
                .map(|k| 1 << k)
                .find(|w| row_bits.is_multiple_of(*w));
            cfg.mem_width = if any_w { 1 << mk } else { fits.unwrap_or(32) };
            (cfg.index_bits, cfg.addr_bits, cfg.max_outstanding) = (ib, ab, 1 << mo);
            // Half the configurations with a GLB: from a K/V block pair (and two beats per
            // bank) up, 1 to 8 banks, behavioural (the few linted are small). Derived from the
            // draws above, so that the other keys' random stream stays as it was.
            let (gk, gb) = ((ib + mo + vl) % 7, (ab + ml) % 4);
            if gk > 2 {
                let pair = 2 * cfg.bc as u64 * 2 * cfg.head_dim as u64;
                let banks = 1u64 << gb;
                let least = pair.max(banks * 2 * (cfg.mem_width / 8) as u64);
                cfg.glb.bytes = least.next_power_of_two() << (gk - 3);
                (cfg.glb.banks, cfg.glb.blackbox) = (banks as u32, false);
            }
            let lint = linted.get() < 6;
            let mut modules = modules.borrow_mut();
            match try_config(&cfg, lint.then_some(&mut *modules)) {
                Ok(Outcome::Built) => {
                    built.set(built.get() + 1);
                    linted.set(linted.get() + lint as u32);
                    Ok(())
                }
                Ok(Outcome::Refused(_)) => Ok(()),
                Err(e) => Err(TestCaseError::fail(format!("{cfg:?}: {e}"))),
            }
        },
    )
    .unwrap();
    let (built, linted) = (built.get(), linted.get());
    eprintln!("{built} of 64 random configurations built, {linted} linted");
    assert!(
        built >= 24 && linted >= 1,
        "{built} built, {linted} linted: widen the strategy"
    );
}

/// The narrowest and widest configurations simulate bit-exactly (a few directed problems).
#[test]
fn extreme_configurations_simulate() {
    for c in [narrowest(), widest()] {
        let p = CoreParams::from_config(&c).unwrap();
        let (model, _) = simulate(&c, &Target::Core).unwrap();
        let max_len = ((1u64 << p.index_bits) - 1) as usize - p.br().max(p.bc()) as usize;
        for s in directed(p.br() as usize, p.bc() as usize)
            .into_iter()
            .filter(|s| s.q_len.max(s.k_len) <= max_len)
            .step_by(3)
        {
            run_and_check(&model, &p, &s.attention(&p), &s.timing)
                .unwrap_or_else(|e| panic!("{}: {e:#}", c.name));
        }
    }
}
