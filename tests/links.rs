//! The vertical links' spare lanes, self-test and repair (issue 58): the `vlink` bundle with
//! the core's test controller under Verilator against `kernels::link`, lint-clean and
//! latch-free; then the small reg3d core with TSV faults injected on chosen lanes.

mod common;

use gen::tools::ScratchDir;
use hdl::link::{self, LinkConfig, FAULT_SLOTS, KIND_BITS, LANE_BITS};
use hdl::Design;
use kernels::link::{Geometry, LaneFault, Lanes, Repair};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use verilator_tb::{Dut, Model};

/// The bundle `cfg` with the controller, as the core's engine wires them: `test` asks for a
/// test (a test also runs at reset), `tsv_lane_fault` injects faults, `vlink_probe` names a
/// lane whose failed flag `probed` shows.
fn bench(cfg: &LinkConfig) -> (Model, ScratchDir) {
    let mut d = Design::new();
    let blk = link::build(&mut d, cfg);
    let g = cfg.geometry;
    let top = d.define("link_bench", |_, m| {
        let test = m.input("test", 1);
        let data = m.input("d", g.lanes);
        let ctl = link::controller(m, &g, cfg.latency, test);
        m.set_threaded(link::BIST, ctl.bus);
        let out = m.instantiate(&blk, "u_link", &link::LinkIn { d: data });
        m.output("q", out.q);
        m.output("failed", out.failed);
        m.output("bad", out.bad);
        m.output("probed", out.probed);
        m.output("testing", ctl.testing);
        m.output("cycles", ctl.cycles);
    });
    common::block_bench(&d, &top.name, "links")
}

fn words(bits: &[bool]) -> Vec<u32> {
    let mut w = vec![0u32; bits.len().div_ceil(32)];
    for (i, &b) in bits.iter().enumerate() {
        w[i / 32] |= (b as u32) << (i % 32);
    }
    w
}

fn bits(w: &[u32], n: u32) -> Vec<bool> {
    (0..n as usize)
        .map(|i| w[i / 32] >> (i % 32) & 1 == 1)
        .collect()
}

/// The fault port's words for `faults` (lane, kind).
fn fault_words(faults: &[(u32, LaneFault)]) -> Vec<u32> {
    assert!(faults.len() <= FAULT_SLOTS as usize);
    let entry = KIND_BITS + LANE_BITS;
    let mut v = vec![false; (FAULT_SLOTS * entry) as usize];
    for (e, &(lane, kind)) in faults.iter().enumerate() {
        let x = (kind.code() << LANE_BITS) | lane as u64;
        for b in 0..entry {
            v[(e as u32 * entry + b) as usize] = x >> b & 1 == 1;
        }
    }
    words(&v)
}

/// Waits out a test; its cycles.
fn finish_test(dut: &mut Dut) -> u64 {
    for _ in 0..1000 {
        if dut.get("testing") == 0 {
            return dut.get("cycles");
        }
        dut.tick();
    }
    panic!("the link test did not finish");
}

/// One case: inject `faults`, run a test on request, check the failed lanes and `bad` against
/// the model, and (repaired) stream `data` through: every word arrives `latency` cycles later.
fn case(
    dut: &mut Dut,
    cfg: &LinkConfig,
    faults: &[(u32, LaneFault)],
    data: &[Vec<bool>],
) -> Result<(), TestCaseError> {
    let g = cfg.geometry;
    dut.set_words("tsv_lane_fault", &fault_words(faults));
    dut.set_words("d", &words(&vec![false; g.lanes as usize]));
    dut.set("test", 1);
    dut.tick();
    dut.set("test", 0);
    let cycles = finish_test(dut);
    prop_assert_eq!(cycles, g.test_cycles(cfg.latency) as u64);
    let mut lanes = Lanes::new(&g, faults);
    let failed = kernels::link::self_test(&g, &mut lanes, &vec![false; g.physical() as usize]);
    let repair = Repair::of(&g, &failed);
    let n_failed = failed.iter().filter(|&&f| f).count() as u64;
    prop_assert_eq!(dut.get("failed"), n_failed, "failed lanes of {:?}", faults);
    prop_assert_eq!(dut.get("bad") == 1, repair.bad, "bad with {:?}", faults);
    // The probe shows each lane's flag (the bundle's lanes are numbered from its base).
    for lane in 0..g.physical() {
        dut.set(link::PROBE, (cfg.base + lane) as u64);
        prop_assert_eq!(
            dut.get("probed") == 1,
            failed[lane as usize],
            "lane {}",
            lane
        );
    }
    dut.set(link::PROBE, link::NO_LANE);
    if repair.bad {
        return Ok(());
    }
    let lat = cfg.latency as usize;
    for t in 0..data.len() + lat {
        let now = data
            .get(t)
            .cloned()
            .unwrap_or(vec![false; g.lanes as usize]);
        dut.set_words("d", &words(&now));
        if t >= lat {
            let q = bits(&dut.get_words("q"), g.lanes);
            prop_assert_eq!(&q, &data[t - lat], "cycle {} with {:?}", t, faults);
        }
        dut.tick();
    }
    Ok(())
}

/// Faults at random lanes: up to `spares` a group, or one group one past them.
fn faults(g: Geometry, over: bool) -> impl Strategy<Value = Vec<(u32, LaneFault)>> {
    let kinds = prop::sample::select(LaneFault::ALL.to_vec());
    let per_group = (0..g.groups())
        .map(move |grp| {
            let n = g.group_lanes(grp) + g.spares;
            prop::collection::btree_set(0..n, 0..=g.spares as usize).prop_map(move |s| {
                s.into_iter()
                    .map(|j| g.group_base(grp) + j)
                    .collect::<Vec<u32>>()
            })
        })
        .collect::<Vec<_>>();
    let extra = (0..g.groups(), any::<prop::sample::Index>());
    (per_group, extra, prop::collection::vec(kinds, 16)).prop_map(
        move |(groups, (grp, pick), kinds)| {
            let mut lanes: Vec<u32> = groups.into_iter().flatten().collect();
            if over {
                // Fill group `grp` to spares + 1.
                let n = g.group_lanes(grp) + g.spares;
                let mut free: Vec<u32> = (0..n)
                    .map(|j| g.group_base(grp) + j)
                    .filter(|p| !lanes.contains(p))
                    .collect();
                while lanes.iter().filter(|&&p| (p / g.width()) == grp).count() <= g.spares as usize
                {
                    let p = free.remove(pick.index(free.len()));
                    lanes.push(p);
                }
            }
            lanes.truncate(FAULT_SLOTS as usize);
            lanes.into_iter().zip(kinds.into_iter().cycle()).collect()
        },
    )
}

#[test]
fn a_bundle_finds_and_steers_around_its_failed_lanes() {
    let geometries = [
        // Three groups, the last short, two spares each, one register stage (the core tests
        // below run combinational bundles, O down, and other group shapes).
        LinkConfig {
            geometry: Geometry {
                lanes: 21,
                group: 8,
                spares: 2,
            },
            latency: 1,
            base: 0,
            faults: true,
        },
    ];
    for (n, cfg) in geometries.iter().enumerate() {
        let (model, _dir) = bench(cfg);
        let mut dut = model.dut().unwrap();
        dut.set_words("tsv_lane_fault", &fault_words(&[]));
        dut.reset(2);
        // The test at reset: nothing failed, the identity map.
        assert_eq!(
            finish_test(&mut dut),
            cfg.geometry.test_cycles(cfg.latency) as u64
        );
        assert_eq!((dut.get("failed"), dut.get("bad")), (0, 0));
        let g = cfg.geometry;
        let dut = std::cell::RefCell::new(dut);
        let data = prop::collection::vec(
            prop::collection::vec(any::<bool>(), g.lanes as usize),
            1..12,
        );
        for over in [false, true] {
            let mut runner = TestRunner::new_with_rng(
                Config {
                    cases: 48,
                    failure_persistence: None,
                    ..Config::default()
                },
                proptest::test_runner::TestRng::deterministic_rng(
                    proptest::test_runner::RngAlgorithm::ChaCha,
                ),
            );
            runner
                .run(&(faults(g, over), data.clone()), |(f, d)| {
                    case(&mut dut.borrow_mut(), cfg, &f, &d)
                })
                .unwrap_or_else(|e| panic!("geometry {n}, over = {over}: {e}"));
        }
        // Directed: every lane of the first group failed in turn, of each kind.
        for kind in LaneFault::ALL {
            for p in 0..g.width() {
                case(
                    &mut dut.borrow_mut(),
                    cfg,
                    &[(p, kind)],
                    &[vec![true; g.lanes as usize]],
                )
                .unwrap_or_else(|e| panic!("{kind:?} on lane {p}: {e}"));
            }
        }
    }
}

/// `small` reg3d with `tiers` tiers, S links of `vlink_bits` wires, 2 spare lanes per 16.
fn reg3d(tiers: u32, vlink_bits: u32) -> hdl::config::CoreConfig {
    let mut c = hdl::config::CoreConfig::preset("small").unwrap();
    c.variant = hdl::variants::Variant::Reg3d(hdl::variants::StackParams {
        tiers,
        vlink_bits,
        spares: 2,
        spare_group: 16,
        ..Default::default()
    });
    c
}

/// [`reg3d`] over a stacked GLB of two bank groups whose bond has the same spares, on a
/// 64-bit memory port (the bond's bundles 82 lanes up and 64 down per group: a fault model's
/// every lane has its own fault muxes, and 256-bit beats cost a minute more to compile).
fn reg3d_glb(tiers: u32, vlink_bits: u32) -> hdl::config::CoreConfig {
    let mut c = reg3d(tiers, vlink_bits);
    c.mem_width = 64;
    c.glb = hdl::mem::glb::GlbParams {
        bytes: 4096,
        banks: 2,
        spares: 2,
        spare_group: 16,
        ..Default::default()
    };
    c
}

/// Faults at random lanes of random bundles (every row's and the GLB bond's): in each group
/// of spares up to the spares (or, `over`, one group one past them). The first fault is on
/// the GLB's bond for odd seeds where the core has one, else on a PE row's bundle.
fn core_faults(p: &hdl::core::CoreParams, over: bool, seed: u64) -> Vec<hdl::link::TsvFault> {
    use hdl::link::TsvFault;
    let mut rng = kernels::patterns::Rng(seed * 0x9E37_79B9 + 0x1234_5678);
    let mut below = |n: u64| rng.next_u64() % n;
    let bundles = p.bundles();
    // (A design with only one kind puts its first fault there.)
    let glb = bundles.iter().filter(|b| b.bundle.glb()).count();
    let first_glb = glb == bundles.len() || (seed % 2 == 1 && glb > 0);
    let mut out: Vec<TsvFault> = vec![];
    let slots = FAULT_SLOTS as usize - over as usize;
    let at = |f: &TsvFault| {
        *bundles
            .iter()
            .find(|b| (b.row, b.bundle) == (f.row, f.bundle))
            .unwrap()
    };
    while out.len() < slots {
        let b = bundles[below(bundles.len() as u64) as usize];
        if out.is_empty() && b.bundle.glb() != first_glb {
            continue;
        }
        let lane = below(b.lanes() as u64) as u32;
        let in_group = |o: &[TsvFault]| {
            o.iter()
                .filter(|f| {
                    (f.row, f.bundle) == (b.row, b.bundle) && b.group_of(f.lane) == b.group_of(lane)
                })
                .count() as u32
        };
        if in_group(&out) < b.geometry.spares
            && !out
                .iter()
                .any(|f| (f.row, f.bundle, f.lane) == (b.row, b.bundle, lane))
        {
            let kind = LaneFault::ALL[below(3) as usize];
            out.push(TsvFault {
                row: b.row,
                bundle: b.bundle,
                lane,
                kind,
            });
        }
    }
    if over {
        // Fill the first fault's group to spares + 1.
        let f0 = out[0];
        let b = at(&f0);
        let (g, (part, grp)) = (b.geometry, b.group_of(f0.lane));
        let mine = |f: &TsvFault| {
            (f.row, f.bundle) == (f0.row, f0.bundle) && b.group_of(f.lane) == (part, grp)
        };
        out.retain(|f| !mine(f));
        out.truncate((FAULT_SLOTS - g.spares - 1) as usize);
        let base = part * g.physical() + g.group_base(grp);
        let n = g.group_lanes(grp) + g.spares;
        for k in 0..=g.spares {
            let lane = base + (below(n as u64) as u32 + k * 5) % n;
            let lane = (0..n)
                .map(|j| base + (lane - base + j) % n)
                .find(|l| {
                    !out.iter()
                        .any(|f| (f.row, f.bundle, f.lane) == (f0.row, f0.bundle, *l))
                })
                .unwrap();
            out.push(TsvFault {
                row: f0.row,
                bundle: f0.bundle,
                lane,
                kind: LaneFault::ALL[k as usize % 3],
            });
        }
    }
    out
}

/// Issue 58's done-when, on `small` reg3d with three tiers (narrow S links) over a stacked
/// GLB whose bond has the same spares: every kind of bundle in one model (P up, O down, the S
/// links, the bond up and down). Up to `spares` stuck or open TSVs in any group of any bundle
/// at random lanes are found by the link test at reset and repaired, and the runs are
/// bit-exact (O, every counter, the cycle count of the same run without faults); one more in
/// a group (of a PE row's bundle, or of the GLB's bond) is found and START is refused with
/// ERR_CODE LINK, nothing written. Without repair (a core whose test is never run cannot
/// exist: it runs at reset) the same faults would corrupt O; the model test above shows a
/// stuck lane does.
#[test]
fn small_reg3d_repairs_its_tsv_faults_or_refuses_to_start() {
    repairs_or_refuses(&[reg3d_glb(3, 8)]);
}

/// The same with two tiers (P up from the QK tier), with three and full-width S links (each
/// score up as it lands), and the GLB's bond alone (reg2d over a stacked GLB with spares).
#[test]
#[ignore = "full: three more fault-injection models of small"]
fn small_reg3d_with_full_s_links_repairs_its_tsv_faults() {
    let mut reg2d = reg3d_glb(2, 32);
    reg2d.variant = hdl::variants::Variant::Reg2d;
    repairs_or_refuses(&[reg3d(2, 32), reg3d(3, 32), reg2d]);
}

/// The failed lanes a run's link test reports, sorted.
fn found(r: &regflash::verify::attention::CoreRun) -> Vec<(u32, String, u32)> {
    let mut v = r.link.as_ref().expect("a link test").lanes.clone();
    v.sort();
    v
}

/// `faults`' lanes as a link test reports them, sorted.
fn injected(faults: &[hdl::link::TsvFault]) -> Vec<(u32, String, u32)> {
    let mut v: Vec<_> = faults
        .iter()
        .map(|f| (f.row, f.bundle.name().to_string(), f.lane))
        .collect();
    v.sort();
    v
}

/// [`small_reg3d_repairs_its_tsv_faults_or_refuses_to_start`] on each design.
fn repairs_or_refuses(designs: &[hdl::config::CoreConfig]) {
    use regflash::design::{simulate, Target};
    use regflash::verify::attention::{run, run_and_check, Attention, MemoryTiming};
    for cfg in designs {
        let tiers = cfg.variant.tiers();
        let p = hdl::core::CoreParams::from_config(cfg)
            .unwrap()
            .for_fault_injection();
        let (model, manifest) = simulate(cfg, &Target::FaultyCore).unwrap();
        assert!(manifest.top.ends_with("_faults"), "{}", manifest.top);
        let a = Attention::generate(
            kernels::patterns::Pattern::Unit,
            1,
            10,
            20,
            16,
            true,
            kernels::flash::OutFormat::Short,
            5,
        )
        .for_design(&p);
        let clean = run_and_check(&model, &p, &a, &MemoryTiming::default())
            .unwrap_or_else(|e| panic!("{tiers} tiers, no fault: {e:#}"))
            .0;
        for seed in 0..3 {
            let faults = core_faults(&p, false, seed);
            let mut timing = MemoryTiming::default();
            for (slot, f) in timing.tsv_faults.iter_mut().zip(&faults) {
                *slot = Some(*f);
            }
            let (r, _) = run_and_check(&model, &p, &a, &timing)
                .unwrap_or_else(|e| panic!("{tiers} tiers, {faults:?}: {e:#}"));
            assert_eq!(r.out, clean.out, "{tiers} tiers, {faults:?}");
            assert_eq!(r.counters, clean.counters, "{tiers} tiers, {faults:?}");
            // The probe finds exactly the lanes injected.
            assert_eq!(found(&r), injected(&faults), "{tiers} tiers");
            // One past the spares: refused, nothing written.
            let faults = core_faults(&p, true, seed);
            let mut timing = MemoryTiming::default();
            for (slot, f) in timing.tsv_faults.iter_mut().zip(&faults) {
                *slot = Some(*f);
            }
            let r = run(&model, &p, &a, &timing, |_, _| {})
                .unwrap_or_else(|e| panic!("{tiers} tiers, {faults:?}: {e:#}"));
            assert_eq!(
                r.dma_error,
                hdl::mem::dma::error::LINK,
                "{tiers} tiers, {faults:?}"
            );
            assert_eq!(r.memory.writes, 0, "{tiers} tiers, {faults:?}");
            assert!(r.link.as_ref().unwrap().beyond_repair);
            assert_eq!(found(&r), injected(&faults), "{tiers} tiers");
        }
    }
}

/// Through the SoC top (AXI4 memory, registers over AXI4-Lite): the test at reset is waited
/// out on LINK_STATUS.TESTING; CTRL.LINK_TEST runs another, and a START during it is refused
/// (the batch controller ends the launch: DONE, ERR_CODE 5, one interrupt), LINK_STATUS and
/// LINK_FAILED read as the core reports, LINK_PROBE reads back; then the same problem runs
/// bit-exact.
#[test]
fn the_top_tests_its_links_on_request_and_refuses_a_start_meanwhile() {
    use regflash::design::{simulate, Target};
    use regflash::verify::attention::{
        check, memory_image, Attention, MemoryTiming, TopDriver, Wait,
    };
    // The longest test (4 spares per 64: 139 cycles), so that a START written right after
    // CTRL.LINK_TEST reaches the core (through the batch controller's launch) while it runs;
    // the GLB's bond with its own controller beside the rows' (138 cycles, no register
    // stage).
    let mut cfg = reg3d_glb(2, 32);
    cfg.vertical_mut("test", |s, g| (*s, *g) = (4, 64)).unwrap();
    cfg.mem_if = hdl::mem::dma::MemIf::Axi4;
    let p = hdl::core::CoreParams::from_config(&cfg).unwrap();
    let (model, _) = simulate(&cfg, &Target::Top).unwrap();
    let a = Attention::generate(
        kernels::patterns::Pattern::Unit,
        1,
        12,
        12,
        16,
        false,
        kernels::flash::OutFormat::Short,
        9,
    )
    .for_design(&p);
    let timing = MemoryTiming::default().on(&p);
    let (mut mem, lay) = memory_image(&p, &a, &timing).unwrap();
    let mut d = TopDriver::new(&model, &p, 3, &timing, &mut mem).unwrap();
    let cycles = p.link_test_cycles().unwrap();
    assert_eq!(
        cycles,
        p.row.link_test_cycles().unwrap(),
        "the rows' test is the longer"
    );
    assert_eq!(d.read("LINK_STATUS", &mut mem).unwrap(), cycles << 16);
    assert_eq!(d.read("LINK_FAILED", &mut mem).unwrap(), 0);
    assert_eq!(d.read("ID_GLB_LINK", &mut mem).unwrap(), 4 | 64 << 8);
    let probe = hdl::link::probe_value(1, hdl::link::Bundle::ODown, 7);
    d.write("LINK_PROBE", probe, &mut mem).unwrap();
    assert_eq!(d.read("LINK_PROBE", &mut mem).unwrap() as u64, probe);
    assert_eq!(
        d.read("LINK_STATUS", &mut mem).unwrap() >> 2 & 1,
        0,
        "no lane failed"
    );
    d.program(&a, &lay, Wait::Poll, &mut mem).unwrap();
    d.write("CTRL", 4, &mut mem).unwrap();
    assert_eq!(d.read("LINK_STATUS", &mut mem).unwrap() & 1, 1, "testing");
    d.write("CTRL", 1, &mut mem).unwrap();
    let st = d.wait(Wait::Poll, 1000, &mut mem).unwrap();
    assert_eq!(st.code, hdl::mem::dma::error::BUSY, "{st:?}");
    d.one_done_event(&mut mem).unwrap();
    assert_eq!(mem.stats.writes, 0);
    while d.read("LINK_STATUS", &mut mem).unwrap() & 1 == 1 {}
    let r = d
        .run(&p, &a, &timing, Wait::Interrupt, &mut mem, &lay)
        .unwrap();
    assert_eq!(r.dma_error, 0);
    assert!(check(&p, &a, &r).ok(), "{}", check(&p, &a, &r).describe());
    assert_eq!(r.link.map(|l| l.failed_lanes), Some(0));
}
