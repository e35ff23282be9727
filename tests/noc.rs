//! The `noc2d` baseline's NoC (issue 56): `noc_router` under Verilator against `kernels::noc`
//! cycle by cycle, with senders that spend credits and sinks that return them at random
//! rates, and every flit sent arriving once, unchanged, at the output its destination names
//! (a check that does not rest on the model); and `noc_path`, the P path between the arrays,
//! against `kernels::noc::Path`. Both lint-clean and latch-free.

mod common;

use std::cell::RefCell;

use gen::tools::ScratchDir;
use hdl::array::{noc, noc_path};
use hdl::Design;
use kernels::noc::{route, Flit, Router, RouterConfig, PORTS};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError};
use verilator_tb::{Dut, Model};

/// The router `cfg` as its own top, linted and synthesized.
fn bench(cfg: &RouterConfig) -> (Model, ScratchDir) {
    let mut d = Design::new();
    let blk = noc::build(&mut d, cfg);
    common::block_bench(&d, &blk.module.name, "noc")
}

/// One case's traffic: the router's place; per input, the flits its sender offers (each a
/// destination and a payload seed); the senders' and the sinks' rates (of 8: a sender sends
/// when it has a flit, a credit and its draw is below its rate; a sink frees a place likewise).
#[derive(Clone, Debug)]
struct Traffic {
    at: (u32, u32),
    offers: [Vec<(u32, u32, u64)>; 5],
    send: [u32; 5],
    drain: [u32; 5],
    seed: u64,
}

fn traffic(cfg: RouterConfig) -> impl Strategy<Value = Traffic> {
    let side = 1u32 << cfg.coord_bits;
    let offers = prop::collection::vec((0..side, 0..side, any::<u64>()), 0..24);
    (
        (0..side, 0..side),
        [
            offers.clone(),
            offers.clone(),
            offers.clone(),
            offers.clone(),
            offers,
        ],
        [1u32..=8, 1u32..=8, 1u32..=8, 1u32..=8, 1u32..=8],
        [0u32..=8, 0u32..=8, 0u32..=8, 0u32..=8, 0u32..=8],
        any::<u64>(),
    )
        .prop_map(|(at, offers, send, drain, seed)| Traffic {
            at,
            offers,
            send,
            drain,
            seed,
        })
}

fn payload(cfg: &RouterConfig, seed: u64) -> Vec<u32> {
    let pb = cfg.payload_bits();
    let mut rng = kernels::patterns::Rng(seed | 1);
    (0..pb.div_ceil(32))
        .map(|k| {
            let w = rng.next_u64() as u32;
            let bits = (pb - 32 * k).min(32);
            if bits == 32 {
                w
            } else {
                w & ((1 << bits) - 1)
            }
        })
        .collect()
}

/// Runs `t` on the router and its model until every flit is delivered (a sink whose rate is
/// 0 starts draining after 40 cycles: a full output's stall, then its release); compares the
/// link registers, the credits returned and the FIFO events every cycle, and the flits
/// delivered against the flits offered.
fn case(dut: &mut Dut, cfg: &RouterConfig, t: &Traffic) -> Result<(), TestCaseError> {
    dut.reset(2);
    dut.set("x", t.at.0 as u64);
    dut.set("y", t.at.1 as u64);
    let mut model = Router::new(*cfg, t.at.0, t.at.1);
    let mut rng = kernels::patterns::Rng(t.seed | 1);
    let mut queues: Vec<std::collections::VecDeque<Flit>> = t
        .offers
        .iter()
        .map(|o| {
            o.iter()
                .map(|&(x, y, s)| Flit {
                    x,
                    y,
                    payload: payload(cfg, s),
                })
                .collect()
        })
        .collect();
    let total: usize = queues.iter().map(|q| q.len()).sum();
    let mut sender_credits = [cfg.depth; 5];
    let mut sink_held = [0u32; 5];
    let mut delivered: Vec<Vec<Flit>> = vec![vec![]; 5];
    let mut sent: Vec<Vec<Flit>> = vec![vec![]; 5];
    for cycle in 0..4000u32 {
        if delivered.iter().map(|d| d.len()).sum::<usize>() == total && cycle > 0 {
            break;
        }
        // The registered outputs against the model's.
        for (o, p) in PORTS.iter().enumerate() {
            let v = dut.get(&format!("{p}_out_valid")) == 1;
            prop_assert_eq!(v, model.out[o].is_some(), "cycle {} {}_out_valid", cycle, p);
            if let Some(f) = &model.out[o] {
                let got = Flit::from_words(&dut.get_words(&format!("{p}_out_flit")), cfg);
                prop_assert_eq!(&got, f, "cycle {} {}_out_flit", cycle, p);
                // The independent check: it left by the port XY routing names.
                prop_assert_eq!(route(t.at.0, t.at.1, f.x, f.y), o);
                delivered[o].push(f.clone());
                sink_held[o] += 1;
            }
            let c = dut.get(&format!("{p}_credit_out")) == 1;
            prop_assert_eq!(c, model.credit_out[o], "cycle {} {}_credit_out", cycle, p);
            if c {
                sender_credits[o] += 1;
            }
        }
        // This cycle's inputs: the senders' flits, the sinks' credits.
        let mut input: [Option<Flit>; 5] = Default::default();
        let mut credit_in = [false; 5];
        for k in 0..5 {
            let draw = (rng.next_u64() % 8) as u32;
            if sender_credits[k] > 0 && draw < t.send[k] {
                if let Some(f) = queues[k].pop_front() {
                    sender_credits[k] -= 1;
                    sent[k].push(f.clone());
                    input[k] = Some(f);
                }
            }
            let draw = (rng.next_u64() % 8) as u32;
            let rate = if cycle >= 40 {
                t.drain[k].max(1)
            } else {
                t.drain[k]
            };
            if sink_held[k] > 0 && draw < rate {
                sink_held[k] -= 1;
                credit_in[k] = true;
            }
        }
        for (k, p) in PORTS.iter().enumerate() {
            let f = &input[k];
            dut.set(&format!("{p}_in_valid"), f.is_some() as u64);
            let words = f
                .as_ref()
                .map_or(vec![0; cfg.flit_bits.div_ceil(32) as usize], |f| {
                    f.words(cfg)
                });
            dut.set_words(&format!("{p}_in_flit"), &words);
            dut.set(&format!("{p}_credit_in"), credit_in[k] as u64);
        }
        let ev = model
            .step(&input, &credit_in)
            .map_err(|e| TestCaseError::fail(format!("cycle {cycle}: {e}")))?;
        prop_assert_eq!(
            dut.get("writes"),
            ev.writes as u64,
            "cycle {} writes",
            cycle
        );
        prop_assert_eq!(dut.get("reads"), ev.reads as u64, "cycle {} reads", cycle);
        dut.tick();
    }
    // Every flit offered arrived once, unchanged, each input's in its order.
    let mut want: Vec<Flit> = sent.concat();
    let mut got: Vec<Flit> = delivered.concat();
    prop_assert_eq!(want.len(), total, "every flit was sent");
    want.sort_by_key(|f| format!("{f:?}"));
    got.sort_by_key(|f| format!("{f:?}"));
    prop_assert_eq!(got, want);
    Ok(())
}

/// The router against its model under random traffic (random places, destinations, payloads,
/// send and drain rates, sinks that stall then drain), at the shallowest FIFO (one flit:
/// every flit waits for its credit's return) on flits past 64 bits (the line's test below
/// runs three-place FIFOs, whose pointers wrap short of a power of two); then directed: four
/// inputs to one output (round robin, each served in turn) and a full output.
#[test]
fn the_router_matches_its_model_and_delivers_every_flit() {
    let cfg = RouterConfig {
        flit_bits: 70,
        coord_bits: 3,
        depth: 1,
    };
    let (model, _dir) = bench(&cfg);
    let dut = RefCell::new(model.dut().unwrap());
    regflash::verify::seeds::run(
        Config {
            cases: 40,
            failure_persistence: None,
            ..Config::default()
        },
        56,
        &traffic(cfg),
        |t| case(&mut dut.borrow_mut(), &cfg, &t),
    )
    .unwrap_or_else(|e| panic!("{cfg:?}: {e}"));
    // Directed: every input but the local one to the local output, at full rate, the sink
    // slow; then one output with no credits back for 40 cycles.
    let here = (1, 1);
    let to_local: Vec<(u32, u32, u64)> = (0..6).map(|s| (1, 1, s)).collect();
    let t = Traffic {
        at: here,
        offers: [
            vec![],
            to_local.clone(),
            to_local.clone(),
            to_local.clone(),
            to_local,
        ],
        send: [8; 5],
        drain: [1, 8, 8, 8, 8],
        seed: 7,
    };
    case(&mut dut.borrow_mut(), &cfg, &t).unwrap_or_else(|e| panic!("{cfg:?}: {e}"));
    let east: Vec<(u32, u32, u64)> = (0..8).map(|s| (3, 1, s)).collect();
    let t = Traffic {
        at: here,
        offers: [east.clone(), vec![], east, vec![], vec![]],
        send: [8; 5],
        drain: [8, 0, 8, 8, 8],
        seed: 9,
    };
    case(&mut dut.borrow_mut(), &cfg, &t).unwrap_or_else(|e| panic!("{cfg:?}: {e}"));
}

/// noc2d's P path (`noc_path`: source bank, sender, line, receiver) against
/// `kernels::noc::Path` cycle by cycle under random bursts of the rows' writes (never more
/// than two blocks ahead of the blocks landed, as the sequencer keeps them): the receiver's
/// writes, the block ends, the sender's flits, stalls and reads, the routers' events; and,
/// independently, every row's weights land once, in the order written, at the addresses
/// written, no sooner than two cycles a router after the word was written. Five rows of two a
/// flit (three flits a word, the last half empty), three-flit FIFOs (three flits every four
/// cycles, the sender waiting for credits; their pointers wrap short of a power of two),
/// a·Bc = 2·6 (a key field that does not fill its bits), the slot restarting every three
/// blocks (a tile's first block is slot 0). The line inside (`noc_line`) is held to
/// `kernels::noc::Line` through `LineTiming` (kernels' `line_timing_is_the_line`).
#[test]
fn the_p_path_matches_its_model() {
    use kernels::noc::{Path, PathConfig, PathIn};
    let cfg = PathConfig {
        router: noc_path::router(41, 3, 2),
        hops: 2,
        rows: 5,
        elem_bits: 16,
        a: 2,
        bc: 6,
        ii_bits: 1,
        j_bits: 3,
    };
    assert_eq!((cfg.per_flit(), cfg.flits_per_word()), (2, 3));
    let mut d = Design::new();
    let blk = noc_path::build(&mut d, &cfg, false);
    let (model, _dir) = common::block_bench(&d, &blk.module.name, "noc_path");
    let dut = RefCell::new(model.dut().unwrap());
    let bw = cfg.block_words();
    let cases = (1u64..=8, 1u32..=4, any::<u64>());
    regflash::verify::seeds::run(
        Config {
            cases: 12,
            failure_persistence: None,
            ..Config::default()
        },
        58,
        &cases,
        |(rate, blocks, seed)| {
            let dut = &mut dut.borrow_mut();
            dut.reset(2);
            let mut path = Path::new(cfg);
            let mut rng = kernels::patterns::Rng(seed | 1);
            let (mut next, mut arrived) = (0u32, 0u32);
            let mut written: Vec<Vec<(u32, u32)>> = vec![vec![]; 5];
            let mut wrote_at: Vec<u32> = vec![];
            let mut landed: Vec<Vec<(u32, u32)>> = vec![vec![]; 5];
            for cycle in 0..4000u32 {
                if arrived == blocks {
                    break;
                }
                let we = next / bw < (arrived + 2).min(blocks) && rng.next_u64() % 8 < rate;
                let data: Vec<u32> = (0..5).map(|_| rng.next_u64() as u32 & 0xffff).collect();
                let waddr = (next / bw % 3 % 2) << 4 | cfg.in_block(cfg.address(next % bw));
                let words: Vec<u32> = (0..3)
                    .map(|k| {
                        (0..2).fold(0, |v, h| {
                            v | data.get(2 * k + h).copied().unwrap_or(0) << (16 * h)
                        })
                    })
                    .collect();
                dut.set("we", we as u64);
                dut.set("waddr", waddr as u64);
                dut.set_words("wdata", &words);
                if we {
                    for (r, w) in written.iter_mut().enumerate() {
                        w.push((waddr, data[r]));
                    }
                    wrote_at.push(cycle);
                    next += 1;
                }
                let o = path
                    .step(PathIn {
                        we,
                        waddr,
                        wdata: &data,
                    })
                    .map_err(|e| TestCaseError::fail(format!("cycle {cycle}: {e}")))?;
                let mask = o.we.clone().fold(0u64, |m, r| m | 1 << r);
                prop_assert_eq!(dut.get("p_we"), mask, "cycle {} p_we", cycle);
                if !o.we.is_empty() {
                    prop_assert_eq!(dut.get("p_waddr"), o.waddr as u64, "cycle {}", cycle);
                    let got = dut.get("p_wdata");
                    for (i, v) in o.wdata.iter().enumerate() {
                        prop_assert_eq!(got >> (16 * i) & 0xffff, *v as u64, "cycle {}", cycle);
                    }
                    for (r, l) in landed.iter_mut().enumerate() {
                        if o.we.contains(&(r as u32)) {
                            let v = (got >> (16 * (r % 2)) & 0xffff) as u32;
                            // Read a cycle after its write, then two cycles a router.
                            let at = wrote_at[l.len()];
                            prop_assert!(cycle >= at + 2 + 2 * 3, "{} after {}", cycle, at);
                            l.push((o.waddr, v));
                        }
                    }
                }
                for (port, want) in [
                    ("arrived", o.arrived as u64),
                    ("sent", o.sent as u64),
                    ("stalled", o.stalled as u64),
                    ("read", o.read as u64),
                    ("writes", o.line.writes as u64),
                    ("reads", o.line.reads as u64),
                    ("hops", o.line.links as u64),
                ] {
                    prop_assert_eq!(dut.get(port), want, "cycle {} {}", cycle, port);
                }
                arrived += o.arrived as u32;
                dut.tick();
            }
            prop_assert_eq!(arrived, blocks);
            prop_assert_eq!(landed, written);
            Ok(())
        },
    )
    .unwrap_or_else(|e| panic!("{cfg:?}: {e}"));
}
