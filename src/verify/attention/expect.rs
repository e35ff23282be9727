//! What a run must show: the hardware model's output bit for bit, the counters the schedule
//! fixes exactly (cycles bounded, MACs, blocks, beats, register-file and P-buffer accesses), and
//! the error contract against the f64 reference.

use super::*;

pub use crate::schedule::needed_keys;

/// MAC steps of the schedule: per computed block, the QK and PV steps. A lower bound on cycles
/// (one step per cycle) and the basis of the hang limit.
pub fn estimate_cycles(p: &CoreParams, a: &Attention) -> u64 {
    a.shape().mac_steps(p)
}

/// Blocks computed over all heads and tiles (the causal prefix only).
pub fn schedule_blocks(p: &CoreParams, a: &Attention) -> u64 {
    a.shape().blocks(p).0
}

/// The memory beats the schedule must move (`Shape::beats`).
pub fn expected_beats(p: &CoreParams, a: &Attention) -> (u64, u64) {
    a.shape().beats(p)
}

/// A bit mismatch: where, and the two values.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Mismatch {
    pub head: usize,
    pub row: usize,
    pub col: usize,
    pub got: u32,
    pub want: u32,
}

/// The comparison of a run with the hardware model, and of its output with the references.
#[derive(Clone, Debug, PartialEq)]
pub struct CoreCheck {
    pub bit_mismatches: usize,
    pub first_mismatch: Option<Mismatch>,
    /// Counters that differ from what the model and the schedule require: (name, got, want).
    pub counter_errors: Vec<(String, u64, u64)>,
    pub stats: FlashStats,
    /// The RTL's output against the f64 and plain FP16 references, over all heads; None when
    /// they were not computed (a model run asked not to: `sim::model_run`'s `check`), and then
    /// the run is not [`CoreCheck::ok`].
    pub accuracy: Option<Accuracy>,
}

impl CoreCheck {
    /// Correct: bit-exact against the model, every counter as the schedule requires, and the
    /// output within the numerical contract of the f64 reference (`Accuracy::check`), so that
    /// the model agreeing with itself on a wrong answer cannot pass.
    pub fn ok(&self) -> bool {
        self.bit_mismatches == 0 && self.counter_errors.is_empty() && self.accuracy_ok()
    }

    /// Bit-exact with every counter right, on inputs beyond the contract's reach
    /// ([`Accuracy::beyond_reach`]): the run does not pass (its report says why), but the
    /// hardware did what the model does.
    pub fn correct_beyond_reach(&self) -> bool {
        self.bit_mismatches == 0
            && self.counter_errors.is_empty()
            && self.accuracy.is_some_and(|a| a.beyond_reach())
    }

    pub fn accuracy_ok(&self) -> bool {
        self.accuracy.is_some_and(|a| a.check().is_ok())
    }

    /// Why the output is not within the contract: its error, or that it was not checked.
    pub fn accuracy_failure(&self) -> Option<String> {
        match self.accuracy.map(|a| a.check()) {
            None => Some(
                "not checked: the run skipped the f64 and plain references (check=False); the \
                 output is the bit-exact model's"
                    .into(),
            ),
            Some(Err(e)) => Some(format!("not correct against the f64 reference: {e}")),
            Some(Ok(())) => None,
        }
    }

    /// A one-paragraph account of what went wrong (empty if nothing did).
    pub fn describe(&self) -> String {
        let mut s = String::new();
        match self.accuracy.map(|a| a.check()) {
            Some(Err(e)) => s += &format!("the output breaks the numerical contract: {e}. "),
            None => s += "the output was not checked against the references. ",
            Some(Ok(())) => {}
        }
        if let Some(m) = self.first_mismatch {
            s += &format!(
                "{} output values differ from the hardware model; first at head {}, row {}, \
                 column {}: RTL {:#x}, model {:#x}. ",
                self.bit_mismatches, m.head, m.row, m.col, m.got, m.want
            );
        }
        for (n, got, want) in &self.counter_errors {
            s += &format!("counter `{n}` is {got}, expected {want}. ");
        }
        s.trim_end().to_string()
    }
}

/// Compares a run with the model: every output bit, and the counters that the model and the
/// schedule fix exactly.
pub fn check(p: &CoreParams, a: &Attention, run: &CoreRun) -> CoreCheck {
    check_batch(
        p,
        std::slice::from_ref(a),
        std::slice::from_ref(&run.out),
        0,
        run,
    )
}

/// The outputs of a batch against the hardware model and the references.
struct OutputCheck {
    bit_mismatches: usize,
    first_mismatch: Option<Mismatch>,
    /// The hardware model's counts, summed over the sequences.
    stats: FlashStats,
    /// The first sequence's accuracy that breaks the contract, else all of them merged (None:
    /// no sequence has queries).
    accuracy: Option<Accuracy>,
}

/// Compares each sequence's output `outs` with the hardware model, bit for bit, and with the
/// references (sequences without queries have no accuracy).
fn compare_outputs(p: &CoreParams, seqs: &[Attention], outs: &[Vec<u32>]) -> OutputCheck {
    let mut bit_mismatches = 0;
    let mut first_mismatch = None;
    let mut stats = FlashStats::default();
    let mut accuracy: Option<Accuracy> = None;
    let mut failing: Option<Accuracy> = None;
    for (a, out) in seqs.iter().zip(outs) {
        let (want, s) = a.expected(p);
        stats += s;
        let d = a.head_dim;
        for (i, (&g, &w)) in out.iter().zip(&want).enumerate() {
            if g != w {
                bit_mismatches += 1;
                first_mismatch.get_or_insert(Mismatch {
                    head: i / (a.q_len * d),
                    row: i / d % a.q_len,
                    col: i % d,
                    got: g,
                    want: w,
                });
            }
        }
        if a.q_len == 0 {
            continue;
        }
        let acc = a.accuracy(out);
        if acc.check().is_err() && failing.is_none() {
            failing = Some(acc);
        }
        accuracy = Some(match accuracy {
            Some(x) => x.merge(acc),
            None => acc,
        });
    }
    OutputCheck {
        bit_mismatches,
        first_mismatch,
        stats,
        accuracy: failing.or(accuracy),
    }
}

/// The counts a batch must show, summed over its sequences with queries.
struct ExpectedCounts {
    /// The counts the schedule fixes (`schedule::Shape::counters`: from the shape alone, in
    /// closed form), which the hardware model's own counts must match as well.
    exact: Vec<(&'static str, u64)>,
    /// Cycles and stalls: the cycle model's, exactly, when the memory is deterministic (the
    /// simple port; the model does not describe the AXI4 master's bursts); else empty.
    timed: Vec<(&'static str, u64)>,
    /// Memory beats read (the offset lists' `list_reads` included) and written.
    reads: u64,
    writes: u64,
    /// Per GLB bank group, words read and written (`schedule::Shape::glb_banks`).
    banks: Vec<(u64, u64)>,
}

/// The counts the schedule, the cycle model and the memory beats fix for the batch `seqs`.
fn expected_counts(
    p: &CoreParams,
    seqs: &[Attention],
    list_reads: u64,
    run: &CoreRun,
) -> ExpectedCounts {
    let mut exact: Vec<(&str, u64)> = vec![];
    let (mut reads, mut writes) = (list_reads, 0);
    let simple = p.dma.mem_if == MemIf::Simple;
    let timing = run.timing.deterministic().filter(|_| simple);
    let mut timed: Vec<(&str, u64)> = vec![];
    let mut banks = vec![(0u64, 0u64); p.dma.glb.map_or(0, |g| g.groups as usize)];
    let add = |into: &mut Vec<(&'static str, u64)>, from: Vec<(&'static str, u64)>| {
        for (n, v) in from {
            match into.iter_mut().find(|e| e.0 == n) {
                Some(e) => e.1 += v,
                None => into.push((n, v)),
            }
        }
    };
    for a in seqs.iter().filter(|a| a.q_len > 0) {
        add(&mut exact, a.shape().counters(p));
        for (b, s) in banks.iter_mut().zip(a.shape().glb_banks(p)) {
            b.0 += s.0;
            b.1 += s.1;
        }
        let (r, w) = expected_beats(p, a);
        reads += r;
        writes += w;
        if let Some(mem) = timing {
            add(
                &mut timed,
                crate::cycles::exact(p, &a.shape(), mem).counters().to_vec(),
            );
        }
    }
    ExpectedCounts {
        exact,
        timed,
        reads,
        writes,
        banks,
    }
}

/// The run's counters that differ from `want` and the hardware model's `stats` that differ
/// from the schedule, the MAC-cycle and stall identities, and the cycle model's counts:
/// (name, got, want) each.
fn counter_mismatches(
    p: &CoreParams,
    run: &CoreRun,
    stats: &FlashStats,
    want: &ExpectedCounts,
) -> Vec<(String, u64, u64)> {
    let mut counter_errors = vec![];
    let c = |n: &str| run.counters.get(n).copied().unwrap_or(u64::MAX);
    let exact = &want.exact;
    let want_of = |n: &str| exact.iter().find(|e| e.0 == n).map_or(0, |e| e.1);
    let model = [
        ("macs", stats.macs),
        ("masked_macs", stats.masked_macs),
        ("blocks", stats.blocks),
        ("skipped_blocks", stats.skipped_blocks),
    ];
    counter_errors.extend(
        exact
            .iter()
            .filter(|(n, want)| c(n) != *want)
            .map(|(n, want)| (n.to_string(), c(n), *want)),
    );
    // The rescales depend on the data: the hardware model counts them.
    for (n, want) in [
        ("rescales", stats.rescales),
        ("rescales_avoided", stats.rescales_avoided),
    ] {
        if c(n) != want {
            counter_errors.push((format!("{n} (the hardware model's)"), c(n), want));
        }
    }
    for (n, m) in model {
        if m != want_of(n) {
            counter_errors.push((
                format!("the hardware model's {n} (schedule)"),
                m,
                want_of(n),
            ));
        }
    }
    // The GLB's bank window: each group's words as the bank map places the walk's hits and
    // fills, and together (a beat is one word of each of a group's banks) the GLB's bits.
    if run.glb_banks.len() != want.banks.len() {
        counter_errors.push((
            "GLB bank groups read".into(),
            run.glb_banks.len() as u64,
            want.banks.len() as u64,
        ));
    }
    for (n, (got, w)) in run.glb_banks.iter().zip(&want.banks).enumerate() {
        for (what, g, w) in [("reads", got.0, w.0), ("writes", got.1, w.1)] {
            if g != w {
                counter_errors.push((format!("glb bank group {n} {what}"), g, w));
            }
        }
    }
    if p.dma.glb.is_some() {
        let width = p.dma.width as u64;
        let (r, w) = run
            .glb_banks
            .iter()
            .fold((0, 0), |a, b| (a.0 + b.0, a.1 + b.1));
        for (name, words) in [("glb_read_bits", r), ("glb_write_bits", w)] {
            if words * width != c(name) {
                counter_errors.push((
                    format!("{name} against the bank groups' words x {width}"),
                    c(name),
                    words * width,
                ));
            }
        }
    }
    // A MAC cycle steps at least one tier: one phase at a time in 2-D, both at once in reg3d.
    let (qk_c, pv_c) = (c("qk_cycles"), c("pv_cycles"));
    let mac_ok = if p.row.concurrent_phases() {
        (qk_c.max(pv_c)..=qk_c + pv_c).contains(&c("mac_cycles"))
    } else {
        c("mac_cycles") == qk_c + pv_c
    };
    if !mac_ok {
        counter_errors.push(("mac_cycles".into(), c("mac_cycles"), qk_c + pv_c));
    }
    // Every busy cycle is a MAC cycle or a stall of exactly one cause.
    let stalls: u64 = ["stall_kv", "stall_q", "stall_softmax", "stall_other"]
        .iter()
        .map(|n| c(n))
        .sum();
    if c("mac_cycles") + stalls != c("cycles") {
        counter_errors.push((
            "mac_cycles + stalls".into(),
            c("mac_cycles") + stalls,
            c("cycles"),
        ));
    }
    for &(n, timed) in &want.timed {
        if c(n) != timed {
            counter_errors.push((format!("{n} (cycle model)"), c(n), timed));
        }
    }
    counter_errors
}

/// The run's memory beats against `want`, its DMA error and its assertion failures, as
/// (name, got, want) each.
fn run_mismatches(run: &CoreRun, want: &ExpectedCounts) -> Vec<(String, u64, u64)> {
    let mut errors = vec![];
    let mem_reads = run.memory.reads;
    if mem_reads != want.reads {
        errors.push(("memory reads (model side)".into(), mem_reads, want.reads));
    }
    if run.memory.writes != want.writes {
        errors.push((
            "memory writes (model side)".into(),
            run.memory.writes,
            want.writes,
        ));
    }
    if run.dma_error != 0 {
        errors.push((
            format!(
                "DMA error ({}): the core stopped",
                hdl::mem::dma::error::describe(run.dma_error)
            ),
            run.dma_error,
            0,
        ));
    }
    if run.assertion_failures != 0 {
        errors.push((
            "assertion failures".into(),
            run.assertion_failures as u64,
            0,
        ));
    }
    errors
}

/// Compares a run of a varlen batch (`seqs`, each sequence's O in `outs`; `list_reads` beats
/// the batch controller read for the offsets) with the model: each sequence's output bit for
/// bit and within the contract on its own, and the counters summed over the sequences (each
/// one an independent run of the core).
pub fn check_batch(
    p: &CoreParams,
    seqs: &[Attention],
    outs: &[Vec<u32>],
    list_reads: u64,
    run: &CoreRun,
) -> CoreCheck {
    let outputs = compare_outputs(p, seqs, outs);
    let want = expected_counts(p, seqs, list_reads, run);
    let mut counter_errors = counter_mismatches(p, run, &outputs.stats, &want);
    counter_errors.extend(run_mismatches(run, &want));
    let accuracy = Some(
        outputs
            .accuracy
            .unwrap_or_else(|| seqs[0].accuracy(&outs[0])),
    );
    CoreCheck {
        bit_mismatches: outputs.bit_mismatches,
        first_mismatch: outputs.first_mismatch,
        counter_errors,
        stats: outputs.stats,
        accuracy,
    }
}

/// Runs and checks; an error describes the first difference. A run on inputs beyond the
/// contract's reach that is bit-exact with every counter right is returned, not an error (its
/// check says why it does not pass).
pub fn run_and_check(
    model: &Model,
    p: &CoreParams,
    a: &Attention,
    timing: &MemoryTiming,
) -> Result<(CoreRun, CoreCheck)> {
    let run = run(model, p, a, timing, |_, _| {}).with_context(|| {
        format!(
            "heads {}, q_len {}, k_len {}, causal {}",
            a.heads, a.q_len, a.k_len, a.causal
        )
    })?;
    let chk = check(p, a, &run);
    ensure!(
        chk.ok() || chk.correct_beyond_reach(),
        "heads {}, q_len {}, k_len {}, causal {}, {:?}: {}",
        a.heads,
        a.q_len,
        a.k_len,
        a.causal,
        a.out,
        chk.describe()
    );
    Ok((run, chk))
}
