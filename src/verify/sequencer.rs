//! Checking the core's sequencer alone, without the datapath, against a schedule model.
//!
//! The sequencer module (`<core>_seq`) is driven by a random environment: the DMA's ready
//! flags and the O channel's busy flip at random, the row engines are busy for a random 1 to 5
//! cycles after each softmax start, the readout leaves idle for a random 1 to 8 cycles after
//! each hand-off. Whatever the environment does, the sequencer must:
//!
//! * hand over the tiles in order (head by head, query tiles of Br rows), each with its row
//!   count, its first row, and "empty" exactly when it needs no key;
//! * per tile, run the blocks of the keys it needs (all of K, or up to the last row's diagonal
//!   for causal attention) in the order QK(0), QK(1), PV(0), QK(2), PV(1), …, PV(n−1), each on
//!   its block number;
//! * step every phase through its loops in order, one step per cycle of the phase: QK over
//!   (k, ii, jj), PV over (jk, ii, q), innermost last (with the MAC accumulating in its
//!   pipeline QK over (ii, jj, k), PV over (ii, q, jk)), `step_valid` exactly on those cycles;
//! * start one softmax per block, and report every skipped block at the tile's start (the
//!   cycle after its go: the count is registered);
//! * finish with `done`.

use anyhow::Result;
use hdl::core::CoreParams;
use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError};
use verilator_tb::Dut;

use crate::verify::attention::needed_keys;
use crate::verify::seeds;

/// One problem for the sequencer, and the environment's seed.
#[derive(Clone, Debug)]
pub struct SeqCase {
    pub heads: u64,
    pub q_len: u64,
    pub k_len: u64,
    pub causal: bool,
    pub env_seed: u64,
}

/// Problems up to three heads and three tiles and blocks each way.
pub fn cases(p: &CoreParams) -> impl Strategy<Value = SeqCase> {
    let (br, bc) = (p.br() as u64, p.bc() as u64);
    (
        1..=3u64,
        1..=3 * br,
        1..=3 * bc,
        any::<bool>(),
        any::<u64>(),
    )
        .prop_map(|(heads, q_len, k_len, causal, env_seed)| SeqCase {
            heads,
            q_len,
            k_len,
            causal,
            env_seed,
        })
}

/// What the schedule model expects of a tile: (first row, rows, blocks, skipped blocks).
fn tiles(p: &CoreParams, c: &SeqCase) -> Vec<(u64, u64, u64, u64)> {
    let (br, bc) = (p.br() as u64, p.bc() as u64);
    let all = c.k_len.div_ceil(bc);
    let mut v = vec![];
    for _ in 0..c.heads {
        for q_base in (0..c.q_len).step_by(br as usize) {
            let need = needed_keys(
                c.q_len as usize,
                c.k_len as usize,
                c.causal,
                q_base as usize,
                br as usize,
            ) as u64;
            let blocks = need.div_ceil(bc);
            v.push((q_base, br.min(c.q_len - q_base), blocks, all - blocks));
        }
    }
    v
}

/// The phases of a tile of `n` blocks: (PV?, block), QK at most two blocks ahead of PV.
fn phases(n: u64) -> Vec<(bool, u64)> {
    let mut v = vec![];
    let (mut qk, mut pv) = (0, 0);
    while pv < n {
        if qk < n && qk < pv + 2 {
            v.push((false, qk));
            qk += 1;
        } else {
            v.push((true, pv));
            pv += 1;
        }
    }
    v
}

/// The loop indices of one phase, in step order, as [dimension, ii, inner]: QK (k, ii, jj; k
/// over `qk_dims`, integer QKᵀ's scale steps included), PV (jk, ii, q); with the MAC
/// accumulating in its pipeline each value's products back to back (QK: ii, jj, k; PV, where P
/// is in the row's P bank: ii, q, jk; innermost last).
fn steps(p: &CoreParams, pv: bool) -> Vec<[u64; 3]> {
    let r = &p.row;
    let (dims, inner) = if pv {
        (p.bc(), r.e)
    } else {
        (r.qk_dims(), r.b)
    };
    let (dims, a, inner) = (dims as u64, r.a as u64, inner as u64);
    let runs = if pv { r.pv_runs() } else { r.qk_runs() };
    let mut v = vec![];
    if runs {
        for ii in 0..a {
            for i in 0..inner {
                v.extend((0..dims).map(|o| [o, ii, i]));
            }
        }
    } else {
        for o in 0..dims {
            for ii in 0..a {
                v.extend((0..inner).map(|i| [o, ii, i]));
            }
        }
    }
    v
}

/// A small deterministic generator for the environment.
struct Env(kernels::patterns::Rng);

impl Env {
    fn next(&mut self) -> u64 {
        self.0.next_u64()
    }
    /// True with probability `percent` %.
    fn chance(&mut self, percent: u64) -> bool {
        self.next() % 100 < percent
    }
    fn between(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.next() % (hi - lo + 1)
    }
}

/// A phase (PV?, block) and the loop indices of its steps.
type PhaseSteps = ((bool, u64), Vec<[u64; 3]>);

/// What one run showed: hand-offs (first row, rows, empty), phases (PV?, block) with their
/// steps, softmax starts, skipped blocks reported, done.
#[derive(Default)]
struct Seen {
    handoffs: Vec<(u64, u64, bool)>,
    phases: Vec<PhaseSteps>,
    softmax_starts: u64,
    skipped: Vec<u64>,
    done: bool,
}

/// Runs one case on the sequencer; the first mismatch with the model, if any.
pub fn run_case(dut: &mut Dut, p: &CoreParams, c: &SeqCase) -> Result<(), String> {
    let seen = drive(dut, p, c)?;
    let model = tiles(p, c);
    let want_handoffs: Vec<(u64, u64, bool)> = model
        .iter()
        .map(|&(q, rows, n, _)| (q, rows, n == 0))
        .collect();
    if seen.handoffs != want_handoffs {
        return Err(format!(
            "hand-offs (first row, rows, empty) {:?}, the model {want_handoffs:?}",
            seen.handoffs
        ));
    }
    let want_phases: Vec<(bool, u64)> = model.iter().flat_map(|t| phases(t.2)).collect();
    let got: Vec<(bool, u64)> = seen.phases.iter().map(|x| x.0).collect();
    if got != want_phases {
        return Err(format!(
            "phases (PV?, block) {got:?}, the model {want_phases:?}"
        ));
    }
    for ((pv, blk), st) in &seen.phases {
        if *st != steps(p, *pv) {
            let kind = if *pv { "PV" } else { "QK" };
            return Err(format!(
                "{kind}({blk}) stepped {} times, not through its loops in order: {st:?}",
                st.len()
            ));
        }
    }
    let blocks: u64 = model.iter().map(|t| t.2).sum();
    if seen.softmax_starts != blocks {
        return Err(format!(
            "{} softmax starts for {blocks} blocks",
            seen.softmax_starts
        ));
    }
    let want_skipped: Vec<u64> = model.iter().map(|t| t.3).collect();
    if seen.skipped != want_skipped {
        return Err(format!(
            "skipped blocks per tile {:?}, the model {want_skipped:?}",
            seen.skipped
        ));
    }
    if !seen.done {
        return Err("no done".into());
    }
    Ok(())
}

/// Drives the sequencer through one case in the random environment and records what it does.
fn drive(dut: &mut Dut, p: &CoreParams, c: &SeqCase) -> Result<Seen, String> {
    let port = |dut: &Dut, n: &str| dut.port(n).map_err(|e| format!("{e:#}"));
    let inputs = [
        "q_ready",
        "k_ready",
        "v_ready",
        "o_busy",
        "rows_busy",
        "ro_idle",
        "start",
        "s_free",
    ];
    let outputs = [
        "busy",
        "done",
        "pe_valid",
        "step_qk",
        "step_pv",
        "step_k",
        "step_ii",
        "step_jj",
        "step_jk",
        "step_q",
        "blk",
        "sm_go",
        "handoff",
        "q_base",
        "rows_valid",
        "empty_tile",
        "go_once",
        "skipped",
    ];
    let ins: Vec<_> = inputs
        .iter()
        .map(|n| port(dut, n))
        .collect::<Result<_, _>>()?;
    let outs: Vec<_> = outputs
        .iter()
        .map(|n| port(dut, n))
        .collect::<Result<_, _>>()?;
    for (name, v) in [
        ("problem_heads", c.heads),
        ("problem_q_len", c.q_len),
        ("problem_k_len", c.k_len),
        ("problem_causal", c.causal as u64),
    ] {
        dut.set(name, v);
    }
    dut.reset(2);
    let mut env = Env(kernels::patterns::Rng(c.env_seed | 1));
    let (mut rows_busy_left, mut ro_busy_left) = (0u64, 0u64);
    // The tile's go was seen last cycle (its skipped-block count shows now).
    let mut went = false;
    // buf2d: the rows report S copied out of the PE registers (`s_free`) once per softmax,
    // while they are busy; a QK may start only when every earlier QK's S has been copied.
    let (mut copy_left, mut copies, mut qk_starts) = (0u64, 0u64, 0u64);
    let buffered = p.row.s_in_sram();
    let mut seen = Seen::default();
    let tiles = tiles(p, c).len() as u64;
    let limit = 64 + tiles * 16 * (4 + 2 * 3 * (p.block_steps().0 + p.block_steps().1) as u64);
    for cycle in 0..limit {
        let values = [
            env.chance(80) as u64,
            env.chance(80) as u64,
            env.chance(80) as u64,
            env.chance(20) as u64,
            (rows_busy_left > 0) as u64,
            (ro_busy_left == 0) as u64,
            (cycle == 0) as u64,
            (copy_left == 1) as u64,
        ];
        for (&id, &v) in ins.iter().zip(&values) {
            dut.set_id(id, v);
        }
        let o: Vec<u64> = outs.iter().map(|&id| dut.get_id(id)).collect();
        let (busy, done, valid, qk, pv) = (o[0], o[1], o[2], o[3], o[4]);
        if valid == 1 {
            if qk == pv {
                return Err(format!("cycle {cycle}: a step that is neither QK nor PV"));
            }
            let (pv, idx) = if pv == 1 {
                (true, [o[8], o[6], o[9]])
            } else {
                (false, [o[5], o[6], o[7]])
            };
            match seen.phases.last_mut() {
                Some((k, st)) if *k == (pv, o[10]) && st.len() < steps(p, pv).len() => st.push(idx),
                _ => {
                    if !pv {
                        if buffered && copies < qk_starts {
                            return Err(format!(
                                "cycle {cycle}: QK({}) started before the S of the QK before it \
                                 was copied out ({copies} copies for {qk_starts} QK phases)",
                                o[10]
                            ));
                        }
                        qk_starts += 1;
                    }
                    seen.phases.push(((pv, o[10]), vec![idx]))
                }
            }
        }
        // The row engines are busy from the cycle after a softmax start; the readout leaves
        // idle the cycle after a hand-off.
        rows_busy_left = rows_busy_left.saturating_sub(1);
        ro_busy_left = ro_busy_left.saturating_sub(1);
        if copy_left == 1 {
            copies += 1;
        }
        copy_left = copy_left.saturating_sub(1);
        if o[11] == 1 {
            seen.softmax_starts += 1;
            let busy = env.between(1, 5);
            rows_busy_left = busy + 1;
            copy_left = env.between(1, busy) + 1;
        }
        if o[12] == 1 {
            seen.handoffs.push((o[13], o[14], o[15] == 1));
            ro_busy_left = env.between(1, 8) + 1;
        }
        // The skipped-block count is registered: it shows the cycle after the tile's go.
        if went {
            seen.skipped.push(o[17]);
        }
        went = o[16] == 1;
        dut.tick();
        if cycle > 0 && done == 1 && busy == 0 {
            seen.done = true;
            return Ok(seen);
        }
    }
    Err(format!("no done within {limit} cycles"))
}

/// Checks the sequencer of `p` on `cases` random problems (plus the fresh-seed run).
pub fn check(dut: &mut Dut, p: &CoreParams, cases: u32, seed: u64) -> Result<u64> {
    let dut = std::cell::RefCell::new(dut);
    let config = Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    };
    let result = seeds::run(config, seed, &self::cases(p), |c| {
        run_case(&mut dut.borrow_mut(), p, &c)
            .map_err(|m| TestCaseError::fail(format!("{c:?}: {m}")))
    });
    super::outcome(result, |minimal| {
        format!("(minimal failing case: {minimal:?})")
    })?;
    Ok(seeds::total_cases(cases))
}
