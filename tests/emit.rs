//! The emitted Verilog: lint-clean under `verilator -Wall`, synthesizable by Yosys with no
//! latches or loops, accepted by Icarus, deterministic, one definition per module, snapshotted
//! for small blocks; output folders that never keep stale files; and clear errors for bad
//! configurations and missing tools.

use std::path::{Path, PathBuf};
use std::process::Command;

use gen::tools::ScratchDir;
use hdl::config::{BufParams, CoreConfig, RowParams, StackParams, Variant};
use hdl::format::Format;
use hdl::softmax::Rescale;
use hdl::Design;
use regflash::design::{generate, Target};
use regflash::units::UNITS;

fn small() -> CoreConfig {
    CoreConfig::preset("small").unwrap()
}

fn gen_into(cfg: &CoreConfig, target: Target) -> (ScratchDir, gen::Manifest) {
    let dir = ScratchDir::new("emit").unwrap();
    let m = generate(cfg, &target, dir.path()).unwrap();
    (dir, m)
}

fn assert_lint_clean(dir: &Path) {
    let report = gen::flow::lint(dir).unwrap();
    assert!(report.passed(), "{}", report.summary());
}

#[test]
fn every_unit_lints_clean_and_synthesizes_without_latches() {
    // Each distinct module once: the small core's modules (the preset's latencies, (1, 1)) are
    // linted and synthesized with the whole core by `small_preset_lints_clean_with_named_
    // states`, and a unit whose module does not depend on the MAC latencies (its name says
    // so) is the same Verilog at (0, 0) and (2, 2).
    let mut d = Design::new();
    let core = regflash::units::build_unit(&mut d, "core", &small()).unwrap();
    let mut seen: std::collections::HashSet<String> = d
        .hierarchy(&core.name)
        .iter()
        .map(|m| m.name.clone())
        .collect();
    let mut linted = 0;
    for latencies in [(0, 0), (2, 2)] {
        let mut cfg = small();
        (cfg.mul_latency, cfg.add_latency) = latencies;
        for unit in UNITS.iter().map(|u| u.name) {
            // The core (and the top around it), its pe_row and sequencer: the small tiling
            // refuses the deepest MAC.
            if matches!(unit, "core" | "top" | "pe_row" | "sequencer") {
                continue;
            }
            // The register block and the batch controller do not depend on the MAC, but are
            // built for a valid core.
            if matches!(unit, "csr" | "batch") && latencies == (2, 2) {
                continue;
            }
            let (dir, manifest) = gen_into(&cfg, Target::Unit(unit.to_string()));
            if seen.insert(manifest.top.clone()) {
                assert_lint_clean(dir.path());
                linted += 1;
            }
        }
    }
    // The latency-dependent units at both settings, the grid and the others not in the core.
    assert!(linted >= 10, "only {linted} modules linted");
}

/// A MAC whose updates of one register are 9 cycles apart (an adder of 6 stages) needs more
/// than the 8 steps between updates of one S accumulator in the small tiling, even with QK
/// interleaved with PV: the config check says so, for the core and for a PE row alone.
#[test]
fn mac_latency_longer_than_the_accumulator_period_is_refused() {
    let mut cfg = small();
    (cfg.mul_latency, cfg.add_latency) = (3, 6);
    for unit in ["core", "pe_row"] {
        let dir = ScratchDir::new("emit").unwrap();
        let e = generate(&cfg, &Target::Unit(unit.into()), dir.path()).unwrap_err();
        let e = format!("{e:#}");
        assert!(
            e.contains("latency") && e.contains("raise br"),
            "{unit}: {e}"
        );
    }
}

/// The small core lints clean under -Wall, and its state machines read as named states:
/// `localparam`s in the Verilog, comparisons against the names, a GTKWave translate file per
/// state register. (Its Yosys synthesis, no latches and no `check` problem, is
/// `tests/synth.rs`'s cell-snapshot test: synthesizing it here too would double the suite's
/// longest synthesis.)
#[test]
fn small_preset_lints_clean_with_named_states() {
    let (dir, manifest) = gen_into(&small(), Target::Core);
    assert_eq!(
        manifest.top,
        "core_4x4_c4_a2_b2_e4_w256_pe_r64_m1_a1_f_softmax_exp_m1_a1_e2"
    );
    let warnings = gen::flow::verilator_lint(dir.path(), &manifest).unwrap();
    assert!(warnings.is_empty(), "{warnings:#?}");
    let module = |suffix: &str| {
        manifest
            .module(&format!("{}_{suffix}", manifest.top))
            .unwrap()
    };
    let registers = |suffix: &str| -> Vec<String> {
        module(suffix)
            .fsms
            .iter()
            .map(|f| f.register.clone())
            .collect()
    };
    assert_eq!(registers("seq"), ["state_q", "ph_kind_q"]);
    assert_eq!(registers("readout"), ["ro_state_q"]);
    let verilog = std::fs::read_to_string(dir.path().join(&module("seq").file)).unwrap();
    assert!(verilog.contains("localparam [2:0] S_TILE_GO = 3'd3;"));
    assert!(verilog.contains("state_q == S_RUN"));
    assert!(
        !verilog.contains("state_q == 3'd"),
        "a state compared as a number"
    );
    let row = manifest
        .modules
        .iter()
        .find(|m| m.name.starts_with("pe_row"))
        .unwrap();
    let fsm = &row.fsms[0];
    assert_eq!(fsm.states.len(), 14);
    let translate = std::fs::read_to_string(dir.path().join(&fsm.translate_file)).unwrap();
    assert!(
        translate.lines().any(|l| l == "7 RE_EXP_SWEEP"),
        "{translate}"
    );
    assert!(
        translate.lines().any(|l| l == "c RE_RO_SWEEP"),
        "{translate}"
    );
}

/// buf2d passes the same gates: the whole core lints clean under -Wall with single-port P banks,
/// with two-port banks emitted as memory-macro blackboxes, and with 64-bit words in two banks
/// per array; the modules buf2d changes (the PE row, also with 128-bit words in two banks, and
/// the sequencer) synthesize without latches or loops; the manifest lists the banks: per PE
/// row an S array of a × Bc = 16 FP32 scores and a P array of 2 × 16 FP16 weights, in words of
/// one element (16 × 32 and 32 × 16) or of 64 bits (8 × 64 each, as two banks of 4 × 64).
#[test]
fn buffered_core_passes_the_gates_and_lists_its_banks() {
    for (ports, blackbox, word) in [(1, false, 0), (2, true, 0), (2, false, 64)] {
        let buf = BufParams {
            ports,
            macro_blackbox: blackbox,
            word_bits: word,
            banks: if word == 0 { 1 } else { 2 },
            bytes: 0,
        };
        let cfg = CoreConfig {
            variant: Variant::Buf2d(buf),
            ..small()
        };
        let CoreSrams {
            manifest,
            srams,
            banks,
            bits,
        } = linted_core_srams(&cfg);
        let want = if word == 0 {
            [(16, 32, 4, blackbox), (32, 16, 4, blackbox)]
        } else {
            [(4, 64, 8, false), (4, 64, 8, false)]
        };
        assert_eq!(banks, want, "words of {word} bits");
        assert_eq!(bits, 8 * buf.bytes_needed(&cfg.tile()));
        assert!(manifest
            .memories
            .iter()
            .all(|m| m.blackbox == (blackbox && srams.contains(m))));
    }
    buffered_unit_gates("sequencer", 0, 1);
}

/// The SRAM arrays a core's manifest lists (of every memory: register files and landing
/// buffers too).
struct CoreSrams {
    manifest: gen::manifest::Manifest,
    srams: Vec<gen::manifest::MemoryEntry>,
    /// (depth, width, copies, blackbox) of each, sorted.
    banks: Vec<(u32, u32, u64, bool)>,
    /// Their bits in all.
    bits: u64,
}

/// The core of `cfg`, lint clean under -Wall, and its SRAM arrays.
fn linted_core_srams(cfg: &CoreConfig) -> CoreSrams {
    let (dir, manifest) = gen_into(cfg, Target::Core);
    let warnings = gen::flow::verilator_lint(dir.path(), &manifest).unwrap();
    assert!(warnings.is_empty(), "{}: {warnings:#?}", cfg.variant);
    let srams: Vec<_> = manifest
        .memories
        .iter()
        .filter(|m| m.module.starts_with("sram_"))
        .cloned()
        .collect();
    let mut banks: Vec<_> = srams
        .iter()
        .map(|m| (m.depth, m.width, m.copies, m.blackbox))
        .collect();
    banks.sort();
    let bits = srams.iter().map(|m| m.bits()).sum();
    CoreSrams {
        manifest,
        srams,
        banks,
        bits,
    }
}

/// buf2d's PE row with single-port banks, in words of one element and of 128 bits in two
/// banks, synthesizes without latches or loops (the gates of the test above).
#[test]
fn buffered_rows_pass_the_gates() {
    buffered_unit_gates("pe_row", 0, 1);
    buffered_unit_gates("pe_row", 128, 2);
}

/// `unit` of buf2d with single-port banks in words of `word` bits (0: one element), `banks`
/// banks per array: lint clean and synthesized without latches or loops.
fn buffered_unit_gates(unit: &str, word: u32, banks: u32) {
    let cfg = CoreConfig {
        variant: Variant::Buf2d(BufParams {
            ports: 1,
            word_bits: word,
            banks,
            ..BufParams::default()
        }),
        ..small()
    };
    let (dir, _) = gen_into(&cfg, Target::Unit(unit.into()));
    assert_lint_clean(dir.path());
}

/// rowfused passes the same gates: the whole core lints clean (with its arrays as behavioural
/// RAM, and with them as macro blackboxes and its spill: the scratch channel and S_ADDR), its
/// PE row and sequencer with the spill synthesize without latches or loops, and the manifest
/// lists per PE row an S array of whole rows (a × keys = 2 × 64 FP32 scores) and buf2d's P
/// array (2 × 16 FP16 weights): the spill adds no SRAM.
#[test]
fn rowfused_core_passes_the_gates_and_lists_its_banks() {
    for blackbox in [false, true] {
        let rf = RowParams {
            keys: 64,
            macro_blackbox: blackbox,
            spill: blackbox,
        };
        let cfg = CoreConfig {
            variant: Variant::Rowfused(rf),
            ..small()
        };
        let CoreSrams { banks, bits, .. } = linted_core_srams(&cfg);
        assert_eq!(banks, [(32, 16, 4, blackbox), (128, 32, 4, blackbox)]);
        assert_eq!(bits, 8 * rf.bytes_needed(&cfg.tile()));
    }
    for unit in ["pe_row", "sequencer"] {
        let cfg = CoreConfig {
            variant: Variant::Rowfused(RowParams {
                keys: 64,
                macro_blackbox: false,
                spill: true,
            }),
            ..small()
        };
        let (dir, _) = gen_into(&cfg, Target::Unit(unit.into()));
        assert_lint_clean(dir.path());
    }
}

/// unfused passes the same gates: the whole core lints clean with no SRAM at all (S and P
/// live only in the DMA's landing and staging buffers between their trips to memory, whose
/// scratch channel the core lint covers), and its PE row and sequencer synthesize without
/// latches or loops (its DMA's synthesis is in the --full tier: `tests/dma.rs`).
#[test]
fn unfused_core_passes_the_gates_without_srams() {
    let cfg = CoreConfig {
        variant: Variant::Unfused,
        ..small()
    };
    let CoreSrams { banks, .. } = linted_core_srams(&cfg);
    assert!(banks.is_empty(), "{banks:?}");
    for unit in ["pe_row", "sequencer"] {
        let (dir, _) = gen_into(&cfg, Target::Unit(unit.into()));
        assert_lint_clean(dir.path());
    }
}

/// reg3d passes the same gates with two tiers and with three: the whole core lints clean
/// under -Wall, and its PE row (the tiers of PEs, each its own module; with three tiers the
/// softmax tier's S registers) and sequencer (two phase streams) synthesize without latches or
/// loops. The row's synthesis splits by tier into parts that add up to the whole: the PE
/// tiers with equal register files (iso-PE per tier), the P banks on the PV tier, and with
/// three tiers the S registers (two blocks of a × b FP32 per PE) and the engine between them.
#[test]
fn tiered_core_passes_the_gates() {
    // With lazy rescaling: its softmax_row (the threshold compare, the `stale` flag) and the
    // row's rescale counts lint and synthesize with the rest.
    tiered_gates(2, 32, Rescale::Lazy { threshold: 2 }, Format::FP16, None);
    let cfg = CoreConfig {
        variant: Variant::reg3d(2),
        ..small()
    };
    let (dir, _) = gen_into(&cfg, Target::Unit("sequencer".into()));
    assert_lint_clean(dir.path());
}

#[test]
fn three_tier_core_passes_the_gates() {
    tiered_gates(3, 32, Rescale::Pow2, Format::FP16, None);
}

/// With BF16 operands, INT4 QKᵀ and spare lanes as well: the whole core lints clean, and its
/// PE row (the e10m15 MACs and the INT4 dot products, P in BF16, O's short form in BF16, the
/// scale capture and C' per row, the vertical bundles with their repair and test) synthesizes
/// without latches or loops; the bundles are their own part (the S tier's taken out of the S
/// registers'), and the parts still add up to the whole.
#[test]
fn three_tier_core_with_narrow_links_passes_the_gates() {
    let int4 = Some(kernels::quant::QkFormat::Int4);
    tiered_gates(3, 8, Rescale::Pow2, Format::BF16, int4);
}

/// The gates of `tiered_core_passes_the_gates` for reg3d with `tiers` tiers, S links of
/// `vlink_bits` wires, `rescale`, operands in `in_format` and QKᵀ in `qk_format`.
fn tiered_gates(
    tiers: u32,
    vlink_bits: u32,
    rescale: Rescale,
    in_format: Format,
    qk_format: Option<kernels::quant::QkFormat>,
) {
    // Spare lanes with the narrow links (two per 16).
    let spares = if vlink_bits < 32 { 2 } else { 0 };
    let cfg = CoreConfig {
        variant: Variant::Reg3d(StackParams {
            tiers,
            vlink_bits,
            spares,
            spare_group: 16,
            ..StackParams::default()
        }),
        rescale,
        in_format,
        qk_format,
        ..small()
    };
    let (dir, manifest) = gen_into(&cfg, Target::Core);
    let warnings = gen::flow::verilator_lint(dir.path(), &manifest).unwrap();
    assert!(warnings.is_empty(), "{warnings:#?}");
    let row = manifest
        .modules
        .iter()
        .find(|m| m.name.starts_with("pe_row"))
        .unwrap();
    let narrow = if vlink_bits < 32 { "v8s2g16" } else { "" };
    let lazy = match rescale.threshold() {
        0 => String::new(),
        t => format!("_lazy{t}"),
    };
    assert!(
        row.name.ends_with(&format!("_t{tiers}l1{narrow}{lazy}")),
        "{}",
        row.name
    );
    assert_eq!(
        row.name.contains("_pe_e8m7_"),
        in_format == Format::BF16,
        "{}",
        row.name
    );
    assert_eq!(
        row.name.contains("_qi4"),
        qk_format.is_some(),
        "{}",
        row.name
    );
    let (dir, manifest) = gen_into(&cfg, Target::Unit("pe_row".into()));
    let report = gen::flow::lint(dir.path()).unwrap();
    assert!(report.passed(), "{}", report.summary());
    let parts = regflash::tiers::parts(&cfg, &report.synth, &manifest.memories);
    let part = |name: &str| parts.iter().find(|p| p.part.starts_with(name)).unwrap();
    let sum = |f: fn(&regflash::tiers::TierPart) -> u64| parts.iter().map(f).sum::<u64>();
    assert_eq!(sum(|p| p.cells), report.synth.total.cells, "{parts:#?}");
    assert_eq!(sum(|p| p.flip_flops), report.synth.total.flip_flops);
    let all_bits: u64 = manifest.memories.iter().map(|m| m.bits()).sum();
    assert_eq!(sum(|p| p.memory_bits), all_bits, "{parts:#?}");
    let (qk, pv) = (part("QK tier PEs"), part("PV tier PEs"));
    // The register files are memories (clock-gated word by word in the ASIC text; this
    // synthesis reads the design without the gates): 4 PEs of 64 registers on each tier.
    assert_eq!(qk.memory_bits, pv.memory_bits);
    assert_eq!(qk.memory_bits, 4 * 64 * 32, "4 PEs of 64 registers");
    assert!(qk.tier.starts_with("tier 0") && pv.tier.starts_with(&format!("tier {}", tiers - 1)));
    assert_eq!(part("P banks").tier, pv.tier);
    let engines = part("row engines");
    assert!(engines.cells > 0);
    let links = parts.iter().find(|p| p.part.starts_with("vertical links"));
    assert_eq!(links.is_some(), spares > 0, "{parts:#?}");
    if let Some(l) = links {
        // P up and O down in each row, the S links in its S tier.
        assert_eq!(l.instances, 3, "{l:?}");
        assert!(l.cells > 0 && l.flip_flops > 0, "{l:?}");
    }
    if tiers == 3 {
        let s = part("S registers");
        // Narrow links also keep which PEs' scores are live: 2 blocks x a x b x 4 bits.
        let live = if vlink_bits < 32 { 2 * 2 * 2 * 4 } else { 0 };
        assert_eq!(
            s.memory_bits,
            4 * 2 * 2 * 2 * 32 + live,
            "4 PEs x 2 blocks x a x b"
        );
        assert!(s.tier.starts_with("tier 1") && engines.tier == s.tier);
    } else {
        assert_eq!(engines.tier, qk.tier);
    }
}

/// The DMA on the AXI4 master (and its protocol checker), with unfused's GLB (the scratch
/// channel, S and P in the GLB's upper half; two-port banks of 128-bit words, two to a beat,
/// emitted as macro blackboxes, the default, whose module names say so), lints clean under
/// `-Wall` and synthesizes without latches or loops; the top's memory port is `m_axi_*` alone.
#[test]
fn axi4_dma_passes_the_gates() {
    let mut cfg = CoreConfig {
        mem_if: hdl::mem::dma::MemIf::Axi4,
        variant: hdl::config::Variant::Unfused,
        ..small()
    };
    cfg.glb = hdl::mem::glb::GlbParams {
        bytes: 4096,
        banks: 4,
        word_bits: 128,
        ports: 2,
        blackbox: true,
        ..hdl::mem::glb::GlbParams::default()
    };
    cfg.validate().unwrap();
    let (dir, manifest) = gen_into(&cfg, Target::Unit("dma".into()));
    for part in ["_axi4x8", "_glb", "_x8x1"] {
        assert!(manifest.top.contains(part), "{part}: {}", manifest.top);
    }
    let has = |name: &dyn Fn(&str) -> bool| manifest.modules.iter().any(|m| name(&m.name));
    assert!(has(&|m| m.ends_with("_axi_check")), "the AXI4 checker");
    assert!(has(&|m| m == "sram_1r1w_d64_w128_macro"), "the macro banks");
    assert_lint_clean(dir.path());
    let (_, manifest) = gen_into(&cfg, Target::Top);
    let top = manifest
        .modules
        .iter()
        .find(|m| m.name == manifest.top)
        .unwrap();
    let ports: Vec<&str> = top.ports.iter().map(|p| p.name.as_str()).collect();
    assert!(ports.contains(&"m_axi_arvalid") && ports.contains(&"m_axi_bready"));
    assert!(!ports.iter().any(|p| p.starts_with("mem_")), "{ports:?}");
}

/// The DMA with a GLB of four one-port behavioural banks on the simple port passes the gates
/// (the AXI4 master's GLB with macro banks: above). Behavioural banks too big to synthesize
/// are refused, before the lint, with the knob that makes them macros.
#[test]
fn glb_dma_passes_the_gates() {
    let mut cfg = small();
    (cfg.glb.bytes, cfg.glb.banks, cfg.glb.blackbox) = (512, 4, false);
    cfg.validate().unwrap();
    let (dir, manifest) = gen_into(&cfg, Target::Unit("dma".into()));
    assert!(manifest.top.contains("_glb"), "{}", manifest.top);
    assert!(!manifest.top.contains("_x8x1"), "{}", manifest.top);
    assert!(
        manifest
            .modules
            .iter()
            .any(|m| m.name == "sram_1rw_d4_w256"),
        "{:?}",
        manifest.modules.iter().map(|m| &m.name).collect::<Vec<_>>()
    );
    assert_lint_clean(dir.path());
    // A megabyte of behavioural banks is refused before Verilator and Yosys see it.
    let mut big = small();
    (big.glb.bytes, big.glb.blackbox) = (1 << 20, false);
    let (dir, _) = gen_into(&big, Target::Unit("dma".into()));
    let e = format!("{:#}", gen::flow::lint(dir.path()).unwrap_err());
    assert!(e.contains("is a behavioural SRAM bank of 64 KiB"), "{e}");
    assert!(e.contains("glb_macro = true"), "{e}");
}

/// The big presets' cores (too big to synthesize in the suite) are Verilator-lint clean, each
/// module once (`verilator_lint_each`: a 32 × 32 array lints one PE and one row; the
/// cross-module loops only a whole-hierarchy pass sees are checked on the small cores of
/// every variant, `small_preset_lints_clean_with_named_states` and the gates below), and no
/// emitted line is longer than 120 characters: a 64×64 causal mask is one 4,096-bit
/// concatenation and its selection a 256-way mux tree, broken over lines.
#[test]
fn big_preset_cores_lint_clean_with_bounded_lines() {
    let mut linted = gen::flow::Linted::default();
    for preset in ["medium", "npu16", "seed"] {
        let cfg = CoreConfig::preset(preset).unwrap();
        let (dir, manifest) = gen_into(&cfg, Target::Core);
        for f in &manifest.files {
            let text = std::fs::read_to_string(dir.path().join(f)).unwrap();
            let longest = text.lines().map(str::len).max().unwrap_or(0);
            assert!(
                longest <= gen::verilog::MAX_LINE,
                "{preset}: {f} has a {longest}-character line"
            );
        }
        let before = linted.len();
        let warnings = gen::flow::verilator_lint_each(dir.path(), &manifest, &mut linted).unwrap();
        assert!(warnings.is_empty(), "{preset}: {warnings:#?}");
        // Each of the core's modules is linted here or was by an earlier preset.
        let new = linted.len() - before;
        assert!(new >= 1, "{preset}: no module of the core was linted");
    }
    assert!(linted.len() >= 40, "only {} modules linted", linted.len());
}

/// The big presets' whole hierarchies under one Verilator pass each (the seed core: about
/// 50 s a pass): what `big_preset_cores_lint_clean_with_bounded_lines` checks module by
/// module, and the combinational loops across modules that `hdl::ir` rejects as each module
/// is defined.
#[test]
#[ignore = "full: whole-hierarchy lint of the big presets; the default run lints each module once"]
fn big_preset_cores_lint_clean_as_whole_hierarchies() {
    for preset in ["medium", "npu16", "seed"] {
        let cfg = CoreConfig::preset(preset).unwrap();
        let (dir, manifest) = gen_into(&cfg, Target::Core);
        let warnings = gen::flow::verilator_lint(dir.path(), &manifest).unwrap();
        assert!(warnings.is_empty(), "{preset}: {warnings:#?}");
    }
}

/// `verilator_lint_each` lints every module: one with many copies (the PE: 16 in small,
/// linted as a top of its own) and one with a single copy (the sequencer, linted inside the
/// engine) each report a planted undriven, unused wire; the clean modules are recorded, and
/// only the two defective ones are linted again.
#[test]
fn module_wise_lint_finds_a_defect_in_any_module() {
    let (dir, manifest) = gen_into(&small(), Target::Core);
    let pe = manifest
        .modules
        .iter()
        .find(|m| m.name.starts_with("pe_r"))
        .unwrap();
    let seq = manifest
        .modules
        .iter()
        .find(|m| m.name.ends_with("_seq"))
        .unwrap();
    for m in [pe, seq] {
        let path = dir.path().join(&m.file);
        let text = std::fs::read_to_string(&path).unwrap();
        let at = text.rfind("endmodule").unwrap();
        let planted = format!("{}    wire planted_defect;\n{}", &text[..at], &text[at..]);
        std::fs::write(&path, planted).unwrap();
    }
    let mut linted = gen::flow::Linted::default();
    let warnings = gen::flow::verilator_lint_each(dir.path(), &manifest, &mut linted).unwrap();
    for m in [pe, seq] {
        assert!(
            warnings
                .iter()
                .any(|w| w.contains("planted_defect") && w.contains(&m.file)),
            "{}: {warnings:#?}",
            m.name
        );
    }
    let clean = linted.len();
    // The modules linted with a defective one are not recorded clean; the rest are.
    assert!(
        (10..manifest.modules.len()).contains(&clean),
        "{clean} of {} modules recorded clean",
        manifest.modules.len()
    );
    let again = gen::flow::verilator_lint_each(dir.path(), &manifest, &mut linted).unwrap();
    assert_eq!(linted.len(), clean);
    assert!(again
        .iter()
        .all(|w| w.contains("planted_defect") || w.contains("linting")));
}

/// Icarus compiles every file list without a warning, and every emitted module runs at
/// `timescale 1ns / 1ps` (Icarus' default is 1 s, which rounds a testbench's ns clock away):
/// a testbench beside the top prints the top's time scale.
#[test]
fn icarus_compiles_the_filelist() {
    gen::tools::require(gen::tools::Tool::Iverilog).unwrap();
    for target in [Target::Top, Target::Core, Target::Unit("pe".into())] {
        let (dir, manifest) = gen_into(&small(), target);
        for f in &manifest.files {
            let text = std::fs::read_to_string(dir.path().join(f)).unwrap();
            assert!(
                text.contains("`timescale 1ns / 1ps"),
                "{f} has no `timescale"
            );
        }
        std::fs::write(
            dir.path().join("tb.v"),
            format!(
                "`timescale 1ns / 1ps\nmodule tb;\n  initial begin\n    \
                 $printtimescale({});\n    $finish;\n  end\nendmodule\n",
                manifest.top
            ),
        )
        .unwrap();
        let out = Command::new("iverilog")
            .current_dir(dir.path())
            .args([
                "-g2005",
                "-Wall",
                "-o",
                "sim.vvp",
                "-s",
                &manifest.top,
                "-s",
                "tb",
                "-c",
                "files.f",
                "tb.v",
            ])
            .output()
            .unwrap();
        let msgs = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "iverilog failed:\n{msgs}");
        assert!(msgs.trim().is_empty(), "iverilog warnings:\n{msgs}");
        let run = Command::new("vvp")
            .current_dir(dir.path())
            .args(["-n", "sim.vvp"])
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&run.stdout);
        assert!(text.contains("is 1ns / 1ps"), "{}: {text}", manifest.top);
    }
}

/// One module per distinct parameter set: the seed core's 1,024 PEs share one definition.
#[test]
fn seed_core_has_one_pe_definition_and_1024_instances() {
    let cfg = CoreConfig::preset("seed").unwrap();
    let mut d = Design::new();
    let top = regflash::units::build_unit(&mut d, "core", &cfg).unwrap();
    let files = gen::render(&d, &top.name, &serde_json::json!({})).unwrap();
    let pe_name = cfg.pe().module_name();
    let pe_defs: Vec<_> = files
        .iter()
        .filter(|(_, text)| text.contains(&format!("module {pe_name} (")))
        .collect();
    assert_eq!(pe_defs.len(), 1, "exactly one file defines the PE");
    let all: String = files.iter().map(|(_, t)| t.as_str()).collect();
    assert_eq!(
        all.matches("\nmodule ").count(),
        files.len(),
        "one module per file"
    );
    assert_eq!(d.copies(&top.name)[&pe_name], 1024);
    let lines = all.lines().count();
    eprintln!(
        "seed core: {} modules, {lines} lines of Verilog",
        files.len()
    );
    // (16,296 at stop 69, when the PE's register file became 64 words behind clock gates;
    // 17,282 at stop 70, when every memory written a word at a time (landing and staging
    // banks, P banks, S tiers) did too, each a generate loop of about 15 lines; 18,009 at stop
    // 73, when the MAC's runs moved into its pipeline.)
    assert!(
        lines < 18_500,
        "the seed core should stay compact, got {lines} lines"
    );
}

#[test]
fn generation_is_deterministic() {
    let (a, _) = gen_into(&small(), Target::Core);
    let (b, _) = gen_into(&small(), Target::Core);
    let read = |d: &Path| -> Vec<(String, Vec<u8>)> {
        all_files(d)
            .into_iter()
            .map(|f| (f.clone(), std::fs::read(d.join(&f)).unwrap()))
            .collect()
    };
    assert_eq!(read(a.path()), read(b.path()));
}

#[test]
fn manifest_describes_ports_latency_and_dependency_order() {
    let (dir, m) = gen_into(&small(), Target::Unit("pe".into()));
    let loaded = gen::Manifest::load(dir.path()).unwrap();
    assert_eq!(loaded, m);
    assert_eq!(
        m.files.last().unwrap(),
        &format!("{}.v", m.top),
        "top comes last"
    );
    // Children before parents.
    let pos = |name: &str| {
        m.files
            .iter()
            .position(|f| f == &format!("{name}.v"))
            .unwrap()
    };
    assert!(pos("fp_mul_e5m10_l1") < pos("mac_m1_a1_f"));
    assert!(pos("fp_add_e8m23_l1") < pos("mac_m1_a1_f"));
    assert!(pos("mac_m1_a1_f") < pos("pe_r64_m1_a1_f"));
    let top = m.top_module();
    assert_eq!(top.latency, 3);
    let names: Vec<_> = top
        .ports
        .iter()
        .map(|p| (p.name.as_str(), p.dir.as_str(), p.width))
        .collect();
    assert_eq!(
        names,
        vec![
            ("clk", "input", 1),
            ("rst", "input", 1),
            ("a", "input", 16),
            ("b", "input", 16),
            ("op", "input", 3),
            ("en", "input", 1),
            ("addr", "input", 6),
            ("ld_data", "input", 32),
            ("shift", "input", 8),
            ("rd_addr", "input", 6),
            ("rd_data", "output", 32),
            ("rf_acc_read", "output", 1),
            ("rf_write", "output", 1),
        ]
    );
    assert_eq!(m.module("fp_mul_e5m10_l1").unwrap().latency, 1);
    assert_eq!(m.module("mac_m1_a1_f").unwrap().latency, 2);
    let filelist = std::fs::read_to_string(dir.path().join("files.f")).unwrap();
    assert_eq!(filelist.lines().collect::<Vec<_>>(), m.files);
}

fn snapshot_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests")
        .join("snapshots")
}

/// Small blocks' Verilog is compared with checked-in snapshots. After an intended change,
/// rerun with `REGFLASH_BLESS=1` to rewrite them, and review the diff.
#[test]
fn verilog_snapshots_of_small_blocks() {
    let bless = std::env::var("REGFLASH_BLESS").is_ok_and(|v| v == "1");
    let cfg = small();
    let mut stale = vec![];
    for unit in [
        "fp_cvt_e5m10_e8m23",
        "fp_cvt_e8m23_e5m10",
        "fp_mul_e5m10",
        "fp_add_e8m23",
        "mac",
    ] {
        let mut d = Design::new();
        let top = regflash::units::build_unit(&mut d, unit, &cfg).unwrap();
        let config = serde_json::json!({ "snapshot": unit });
        for (file, text) in gen::render(&d, &top.name, &config).unwrap() {
            if file != format!("{}.v", top.name) {
                continue;
            }
            let path = snapshot_dir().join(&file);
            if bless {
                std::fs::create_dir_all(snapshot_dir()).unwrap();
                std::fs::write(&path, &text).unwrap();
            } else {
                let want = std::fs::read_to_string(&path).unwrap_or_else(|_| {
                    panic!(
                        "missing snapshot {}: run with REGFLASH_BLESS=1",
                        path.display()
                    )
                });
                if want != text {
                    stale.push(file);
                }
            }
        }
    }
    assert!(
        stale.is_empty(),
        "emitted Verilog differs from the snapshots for {stale:?}; if intended, rerun with \
         REGFLASH_BLESS=1 and review the diff"
    );
}

/// Every file below `dir`, relative, sorted.
fn all_files(dir: &Path) -> Vec<String> {
    let mut out = vec![];
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else {
                out.push(p.strip_prefix(dir).unwrap().display().to_string());
            }
        }
    }
    out.sort();
    out
}

/// The floating-point units' former names (`fp16_mul`, `exp2`, ...) are aliases: each writes
/// the very folder its unit's name does.
#[test]
fn former_unit_names_generate_the_same_folder() {
    for &(old, new) in regflash::units::ALIASES {
        let (a, ma) = gen_into(&small(), Target::Unit(old.into()));
        let (b, mb) = gen_into(&small(), Target::Unit(new.into()));
        assert_eq!(ma, mb, "{old} = {new}");
        assert_eq!(ma.config["target"], new);
        assert!(ma.top.starts_with(new), "{old}: top {}", ma.top);
        let files = all_files(a.path());
        assert_eq!(files, all_files(b.path()), "{old} = {new}");
        for f in &files {
            let read = |d: &Path| std::fs::read(d.join(f)).unwrap();
            assert!(
                read(a.path()) == read(b.path()),
                "{old} = {new}: {f} differs"
            );
        }
    }
}

#[test]
fn rerunning_into_a_folder_leaves_no_stale_files() {
    let dir = ScratchDir::new("hygiene").unwrap();
    let out = dir.path().join("out");
    generate(&small(), &Target::Unit("pe".into()), &out).unwrap();
    std::fs::write(out.join("notes.txt"), "mine").unwrap();
    std::fs::write(out.join("fpga").join("board.txt"), "mine too").unwrap();
    let m = generate(&small(), &Target::Unit("fp_add_e8m23".into()), &out).unwrap();
    let mut want: Vec<String> = m.files.iter().chain(&m.extra_files).cloned().collect();
    want.extend([
        "manifest.json".to_string(),
        "notes.txt".into(),
        "fpga/board.txt".into(),
    ]);
    want.sort();
    assert_eq!(
        all_files(&out),
        want,
        "old modules and constraints are removed; the user's files stay"
    );
    for f in [
        "constraints/fp_add_e8m23_l1.sdc",
        "constraints/fp_add_e8m23_l1.xdc",
        "fpga/fp_add_e8m23_l1_serial.v",
        "fpga/fp_add_e8m23_l1_serial.pcf",
        "fpga/files.f",
        "synth/generic.ys",
        "synth/ice40.ys",
        "synth/xilinx.ys",
    ] {
        assert!(m.extra_files.contains(&f.to_string()), "manifest lists {f}");
    }
}

#[test]
fn refuses_a_non_empty_folder_it_did_not_write() {
    let dir = ScratchDir::new("foreign").unwrap();
    std::fs::write(dir.path().join("design.v"), "module x; endmodule\n").unwrap();
    let err = generate(&small(), &Target::Core, dir.path())
        .unwrap_err()
        .to_string();
    assert!(err.contains("not written by regflash"), "{err}");
    assert!(dir.path().join("design.v").exists());
}

#[test]
fn configuration_errors_say_what_and_how_to_fix() {
    type Change = Box<dyn Fn(&mut CoreConfig)>;
    let cases: Vec<(Change, &str)> = vec![
        (
            Box::new(|c| c.regs_per_pe = 48),
            "regs_per_pe = 48 is not supported: allowed are powers of two from 2 to 1024",
        ),
        (
            Box::new(|c| c.mul_latency = 5),
            "mul_latency = 5 is out of range: allowed 0 to 4",
        ),
        (
            Box::new(|c| {
                c.add_latency = 3;
                c.accumulate = hdl::array::pe::Accumulate::Pipeline;
            }),
            "accumulate = \"pipeline\" cannot be built: the MAC's adder loop is one cycle only \
             with add_latency = 1 behind mul_latency >= 1 (here add_latency = 3, mul_latency = \
             1); use accumulate = \"auto\"",
        ),
        (
            Box::new(|c| c.add_latency = 9),
            "add_latency = 9 is out of range: allowed 0 to 6",
        ),
        (
            Box::new(|c| c.br = 6),
            "br = 6 must be a positive multiple of rows = 4",
        ),
        (
            Box::new(|c| c.head_dim = 0),
            "head_dim = 0 must be a positive multiple of cols = 4",
        ),
        (
            Box::new(|c| c.rows = 0),
            "rows = 0 is out of range: allowed 1 to 256",
        ),
        (
            Box::new(|c| c.cols = 300),
            "cols = 300 is out of range: allowed 1 to 256",
        ),
        (Box::new(|c| c.head_dim = 4096), "raise regs_per_pe"),
        (
            Box::new(|c| c.clock_mhz = -1.0),
            "clock_mhz = -1 is out of range",
        ),
        (
            Box::new(|c| c.stack_mut("").unwrap().tiers = 4),
            "reg3d.tiers = 4 is not supported: reg3d has 2 tiers",
        ),
        (
            Box::new(|c| c.stack_mut("").unwrap().vlink_latency = 9),
            "reg3d.vlink_latency = 9 is out of range: allowed 0 to 4 cycles",
        ),
        (
            Box::new(|c| c.stack_mut("").unwrap().vlink_bits = 8),
            "reg3d.vlink_bits = 8 needs reg3d.tiers = 3",
        ),
        (
            Box::new(|c| {
                let s = c.stack_mut("").unwrap();
                (s.tiers, s.vlink_bits) = (3, 12);
            }),
            "reg3d.vlink_bits = 12 is not supported: a QK PE's S link is 1, 2, 4, 8, 16 or 32",
        ),
        (
            Box::new(|c| c.buf_mut("").unwrap().ports = 3),
            "buf2d.ports = 3 is not supported: allowed 1",
        ),
        (
            Box::new(|c| c.buf_mut("").unwrap().bytes = 100),
            "buf2d.bytes = 100 is too small: the tiling needs 512 B",
        ),
        (
            Box::new(|c| c.buf_mut("").unwrap().word_bits = 48),
            "buf2d.word_bits = 48 is not supported",
        ),
        (
            Box::new(|c| c.buf_mut("").unwrap().word_bits = 256),
            "buf2d.word_bits = 256 does not fit bc = 8: a P word holds 16 weights",
        ),
        (
            Box::new(|c| c.buf_mut("").unwrap().banks = 16),
            "buf2d.banks = 16 is not supported here: a power of two from 1 to 8",
        ),
    ];
    // small's four S accumulators per PE, interleaved with PV, come round every 8 cycles, its
    // eight O accumulators too: a core whose PE needs 6 + 3 cycles between two updates of a
    // register (an adder of 6 stages) is refused, naming the deepest it hides (a PE alone may
    // be that deep).
    // What the core's parameters refuse.
    let core_refusal = |c: &CoreConfig| {
        hdl::core::CoreParams::from_config(c)
            .unwrap_err()
            .to_string()
    };
    let mut cfg = small();
    (cfg.mul_latency, cfg.add_latency) = (3, 6);
    cfg.validate().unwrap();
    let err = core_refusal(&cfg);
    assert!(
        err.contains(
            "this tile hides add_latency up to 5 with a mul_latency of 2 or more, or \
             mul_latency + add_latency up to 7"
        ),
        "{err}"
    );
    for (change, expect) in cases {
        // Each case starts from small as the variant whose knob it sets.
        let mut cfg = small();
        let variant = if expect.starts_with("reg3d.") {
            Variant::reg3d(2)
        } else if expect.starts_with("buf2d.") {
            Variant::buf2d()
        } else {
            Variant::Reg2d
        };
        cfg.variant = variant;
        change(&mut cfg);
        let err = cfg.validate().unwrap_err().to_string();
        assert!(err.contains(expect), "expected `{expect}` in: {err}");
    }
    // buf2d keeps one S block in the PE registers: a tiling whose two S blocks and O do not fit
    // 16 registers (2 x 8 + 8) fits as buf2d (8 + 8).
    let mut c = small();
    (c.bc, c.regs_per_pe) = (16, 16);
    let err = core_refusal(&c);
    assert!(
        err.contains("needs 24 registers (16 S values: 2 block(s) of 8; and 8 O values)"),
        "{err}"
    );
    c.variant = Variant::buf2d();
    hdl::core::CoreParams::from_config(&c).unwrap();
    let err = CoreConfig::preset("huge").unwrap_err().to_string();
    assert!(
        err.contains("unknown preset `huge`") && err.contains("seed, small, medium, npu16"),
        "{err}"
    );
    let mut d = Design::new();
    let err = regflash::units::build_unit(&mut d, "fp64_div", &small())
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("unknown unit `fp64_div`") && err.contains("fp_add_e8m23"),
        "{err}"
    );
}

fn regflash() -> Command {
    Command::new(env!("CARGO_BIN_EXE_regflash"))
}

#[test]
fn cli_reports_bad_input_without_panicking() {
    let dir = ScratchDir::new("cli").unwrap();
    let out_dir = dir.path().join("o");
    let out_s = out_dir.to_str().unwrap();
    let runs: Vec<(Vec<&str>, &str)> = vec![
        (
            vec!["gen", "--unit", "nope", "--out", out_s],
            "unknown unit `nope`",
        ),
        (
            vec!["gen", "--preset", "nope", "--out", out_s],
            "unknown preset `nope`",
        ),
        (
            vec!["gen", "--preset", "small", "--regs", "3", "--out", out_s],
            "regs_per_pe = 3 is not supported",
        ),
        (
            vec!["lint", "/nonexistent/folder"],
            "is /nonexistent/folder a folder written by `regflash gen`",
        ),
    ];
    let conflict = vec![
        "gen",
        "--preset",
        "seed",
        "--config",
        "presets/small.toml",
        "--out",
        out_s,
    ];
    let runs = runs
        .into_iter()
        .chain([
            (conflict, "cannot be used with"),
            (
                vec!["synth", "--target", "asic"],
                "the ASIC target needs a standard-cell library: --lib",
            ),
            (
                vec!["synth", "--target", "asic", "--lib", "tsmc3"],
                "--lib tsmc3 is not a library regflash knows",
            ),
            (
                vec!["synth", "--lib", "osu018"],
                "--lib, --liberty, --clock-mhz, --utilization and --shard are for --target asic",
            ),
            (
                vec!["synth", "--shard", "0/2"],
                "--utilization and --shard are for --target asic",
            ),
            (
                vec![
                    "synth", "--target", "asic", "--lib", "osu018", "--unit", "mac", "--shard",
                    "2/2",
                ],
                "--shard takes i/n with 0 <= i < n",
            ),
        ])
        .collect::<Vec<_>>();
    for (args, expect) in runs {
        let out = regflash().args(&args).output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(
            stderr.contains(expect),
            "{args:?}: expected `{expect}` in {stderr}"
        );
        assert!(!stderr.contains("panicked"), "{stderr}");
    }
}

#[test]
fn cli_generates_from_a_config_file() {
    let dir = ScratchDir::new("cli-config").unwrap();
    let cfg_path = dir.path().join("mine.toml");
    std::fs::write(&cfg_path, "preset = \"small\"\nrows = 2\nbr = 4\n").unwrap();
    let out = dir.path().join("o");
    let run = regflash()
        .args([
            "gen",
            "--config",
            cfg_path.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let m = gen::Manifest::load(&out).unwrap();
    assert_eq!(m.top, "regflash_top");
    assert!(m
        .module("core_2x4_c4_a2_b2_e4_w256_pe_r64_m1_a1_f_softmax_exp_m1_a1_e2")
        .is_some());
    assert!(out.join("regflash.h").is_file() && out.join("registers.md").is_file());
    assert_eq!(m.config["core"]["rows"], 2);
}

#[test]
fn missing_tools_are_named_with_the_install_command() {
    let (dir, _) = gen_into(&small(), Target::Unit("fp_add_e8m23".into()));
    let out = regflash()
        .args(["lint", dir.path().to_str().unwrap()])
        .env("PATH", "/nonexistent")
        // Nor the PyPI wheel scripts/ensure-tools installs beside Debian's.
        .env("XDG_DATA_HOME", "/nonexistent")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("`verilator` was not found")
            && stderr.contains("apt-get install -y verilator"),
        "{stderr}"
    );
}

#[test]
fn verilator_version_gate() {
    use gen::tools::{check_verilator_version, parse_verilator_version};
    assert_eq!(
        parse_verilator_version("Verilator 5.006 2023-01-22 rev (Debian 5.006-3)"),
        Some((5, 6))
    );
    assert_eq!(
        parse_verilator_version("Verilator 4.038 2020-07-11"),
        Some((4, 38))
    );
    assert_eq!(parse_verilator_version("garbage"), None);
    let err = check_verilator_version((4, 38)).unwrap_err().to_string();
    assert!(
        err.contains("4.038 is too old") && err.contains("5.0 or newer"),
        "{err}"
    );
    check_verilator_version((5, 6)).unwrap();
}

/// A core on OCP FP8 operands (E4M3, its beat of 16 values 128 bits) lints clean under
/// -Wall; its names say the format. (Its units, the E4M3 and E5M2 multipliers, conversions
/// and MACs, are linted and synthesized by `every_unit_lints_clean_and_synthesizes_without_
/// latches`.)
#[test]
fn fp8_core_lints_clean() {
    let mut cfg = small();
    cfg.set_in_format(Format::FP8_E4M3);
    assert_eq!(cfg.mem_width, 128);
    let (dir, manifest) = gen_into(&cfg, Target::Core);
    assert!(
        manifest.top.contains("_w128_pe_e4m3fn_"),
        "{}",
        manifest.top
    );
    let warnings = gen::flow::verilator_lint(dir.path(), &manifest).unwrap();
    assert!(warnings.is_empty(), "{warnings:#?}");
}
