//! What a run must show: the hardware model's output bit for bit, the counters the schedule
//! fixes exactly (cycles bounded, MACs, blocks, beats, register-file and P-buffer accesses), and
//! the error contract against the f64 reference.

use super::*;

/// MAC steps of the schedule: per computed block, the QK and PV steps. A lower bound on cycles
/// (one step per cycle) and the basis of the hang limit.
pub fn estimate_cycles(p: &CoreParams, a: &Attention) -> u64 {
    let (qk, pv) = p.block_steps();
    let blocks = schedule_blocks(p, a);
    blocks * (qk + pv) as u64
}

/// Blocks computed over all heads and tiles (the causal prefix only).
pub fn schedule_blocks(p: &CoreParams, a: &Attention) -> u64 {
    let (br, bc) = (p.br() as usize, p.bc() as usize);
    let mut blocks = 0u64;
    for q_base in (0..a.q_len).step_by(br) {
        let keys = needed_keys(a.q_len, a.k_len, a.causal, q_base, br);
        blocks += keys.div_ceil(bc) as u64;
    }
    blocks * a.heads as u64
}

/// The keys the query tile starting at row `q_base` (`br` rows) needs: all of K, or for causal
/// attention the keys up to its last row's diagonal (bottom-right aligned).
pub fn needed_keys(q_len: usize, k_len: usize, causal: bool, q_base: usize, br: usize) -> usize {
    if !causal {
        return k_len;
    }
    let end = (q_base + br).min(q_len);
    (end + k_len).saturating_sub(q_len).min(k_len)
}

/// The memory beats the schedule must move: Q once, K and V once per tile (the keys it needs),
/// O once.
pub fn expected_beats(p: &CoreParams, a: &Attention) -> (u64, u64) {
    let beat = (p.dma.width / 8) as u64;
    let row = 2 * a.head_dim as u64;
    let br = p.br() as usize;
    let mut kv_rows = 0u64;
    for q_base in (0..a.q_len).step_by(br) {
        kv_rows += needed_keys(a.q_len, a.k_len, a.causal, q_base, br) as u64;
    }
    let h = a.heads as u64;
    let reads = h * (a.q_len as u64 + 2 * kv_rows) * row / beat;
    let writes = h * a.q_len as u64 * (a.out_bytes() as u64 * a.head_dim as u64) / beat;
    (reads, writes)
}

/// Register-file reads the schedule makes, as the PE ports count them: every MAC that reads
/// its accumulator, which is all of `macs` but the first product of each S element (a
/// `MacClear`: one per visible query-key pair) and the first of each O element in a tile (a
/// `MacZero`: d per query that sees a key), plus the row engines' reads of S and O, one PE
/// per engine and cycle: two sweeps over the Br × Bc scores of every computed block (in buf2d
/// one, the copy of S to the buffer, whose S array the sweeps then read) and a readout of the
/// Br × d outputs of every tile. Visibility comes from the mask's definition
/// (`kernels::reference::visible`), not from the model.
/// With a softmax tier (three tiers), the S links also read each visible score once at its QK
/// PE's read port.
pub fn expected_rf_reads(p: &CoreParams, a: &Attention, macs: u64) -> u64 {
    let (br, bc, d) = (p.br() as u64, p.bc() as u64, a.head_dim as u64);
    let (pairs, seeing) = visible_pairs(a);
    let mut engine = 0u64;
    for q_base in (0..a.q_len).step_by(br as usize) {
        let blocks = needed_keys(a.q_len, a.k_len, a.causal, q_base, br as usize)
            .div_ceil(bc as usize) as u64;
        engine += blocks * s_sweeps_of_registers(p) * br * bc + br * d;
    }
    let h = a.heads as u64;
    let links = p.row.softmax_tier() as u64 * pairs;
    macs - h * (pairs + d * seeing) + h * (engine + links)
}

/// Per head: the visible query-key pairs, and the queries that see a key (from the mask's
/// definition, `kernels::reference::visible`, not from the model).
pub fn visible_pairs(a: &Attention) -> (u64, u64) {
    use kernels::reference::visible;
    let (mut pairs, mut seeing) = (0u64, 0u64);
    for i in 0..a.q_len {
        let n = (0..a.k_len)
            .filter(|&j| visible(i, j, a.q_len, a.k_len, a.causal))
            .count() as u64;
        pairs += n;
        seeing += (n > 0) as u64;
    }
    (pairs, seeing)
}

/// Sweeps of the row engines over a block's scores in the PE registers: the max and exp sweeps,
/// or in buf2d the copy to the buffer.
fn s_sweeps_of_registers(p: &CoreParams) -> u64 {
    if p.row.buffer.is_some() {
        1
    } else {
        2
    }
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
    /// The RTL's output against the f64 and plain FP16 references, over all heads.
    pub accuracy: Accuracy,
}

impl CoreCheck {
    /// Correct: bit-exact against the model, every counter as the schedule requires, and the
    /// output within the numerical contract of the f64 reference (`Accuracy::check`), so that
    /// the model agreeing with itself on a wrong answer cannot pass.
    pub fn ok(&self) -> bool {
        self.bit_mismatches == 0 && self.counter_errors.is_empty() && self.accuracy_ok()
    }

    pub fn accuracy_ok(&self) -> bool {
        self.accuracy.check().is_ok()
    }

    /// A one-paragraph account of what went wrong (empty if nothing did).
    pub fn describe(&self) -> String {
        let mut s = String::new();
        if let Err(e) = self.accuracy.check() {
            s += &format!("the output breaks the numerical contract: {e}. ");
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
    let (want, stats) = a.expected(p);
    let d = a.head_dim;
    let mut bit_mismatches = 0;
    let mut first_mismatch = None;
    for (i, (&g, &w)) in run.out.iter().zip(&want).enumerate() {
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
    let (qk, pv) = p.block_steps();
    let (reads, writes) = expected_beats(p, a);
    let scores = (p.br() * p.bc()) as u64;
    let s_buffered = p.row.buffer.is_some() as u64;
    let tiered = p.row.tiered.is_some() as u64;
    let tile_rows = (a.heads * a.q_len.div_ceil(p.br() as usize)) as u64 * p.br() as u64;
    let o_values = tile_rows * p.d() as u64;
    // Three tiers: each visible score goes up its S link once (32 bits), written into the
    // softmax tier's registers.
    let s_links = p.row.softmax_tier() as u64 * a.heads as u64 * visible_pairs(a).0;
    let c = |n: &str| run.counters.get(n).copied().unwrap_or(u64::MAX);
    let exact = [
        ("macs", stats.macs),
        ("masked_macs", stats.masked_macs),
        ("blocks", stats.blocks),
        ("skipped_blocks", stats.skipped_blocks),
        // Each tier (the one tier of a 2-D design) steps through every block's QK and PV.
        ("qk_cycles", stats.blocks * qk as u64),
        ("pv_cycles", stats.blocks * pv as u64),
        ("rf_writes", stats.macs + s_links),
        ("rf_reads", expected_rf_reads(p, a, stats.macs)),
        // Per computed block: the exp stage writes Br·Bc weights, and PV reads each once (for
        // the e output columns a PE's query row and key share).
        ("p_buf_writes", stats.blocks * scores),
        ("p_buf_reads", stats.blocks * scores),
        // buf2d: the copy writes each score to the S array, the max and exp sweeps read it.
        ("s_buf_writes", stats.blocks * scores * s_buffered),
        ("s_buf_reads", stats.blocks * 2 * scores * s_buffered),
        // reg3d: each weight goes up to the PV tier's P bank (16 bits), each O value of every
        // tile down to the readout (32 bits), and with three tiers each visible score up.
        (
            "vlink_bits",
            tiered * (16 * stats.blocks * scores + 32 * o_values) + 32 * s_links,
        ),
        ("vlink_s_bits", 32 * s_links),
        // Every step of a tier broadcasts a 16-bit row operand across C PEs on each of the R
        // rows and a 16-bit column operand down R rows on each of the C columns.
        (
            "bcast_bit_hops",
            32 * (p.rows * p.row.cols) as u64 * stats.blocks * (qk + pv) as u64,
        ),
        // The row engines: a max-sweep compare and an exp-sweep element per score of every
        // computed block (masked ones too), a reciprocal per query row of every tile and a
        // normalizing multiply per O value.
        ("max_ops", stats.blocks * scores),
        ("exp_ops", stats.blocks * scores),
        ("recip_ops", tile_rows),
        ("norm_ops", o_values),
        ("read_beats", reads),
        ("write_beats", writes),
    ];
    let mut counter_errors: Vec<(String, u64, u64)> = exact
        .iter()
        .filter(|(n, want)| c(n) != *want)
        .map(|(n, want)| (n.to_string(), c(n), *want))
        .collect();
    // A MAC cycle steps at least one tier: one phase at a time in 2-D, both at once in reg3d.
    let (qk_c, pv_c) = (c("qk_cycles"), c("pv_cycles"));
    let mac_ok = if p.row.tiered.is_some() {
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
    let mem_reads = run.memory.reads;
    if mem_reads != reads {
        counter_errors.push(("memory reads (model side)".into(), mem_reads, reads));
    }
    if run.memory.writes != writes {
        counter_errors.push((
            "memory writes (model side)".into(),
            run.memory.writes,
            writes,
        ));
    }
    if run.dma_error != 0 {
        counter_errors.push((
            format!(
                "DMA error ({}): the core stopped",
                hdl::dma::error::describe(run.dma_error)
            ),
            run.dma_error,
            0,
        ));
    }
    if run.assertion_failures != 0 {
        counter_errors.push((
            "assertion failures".into(),
            run.assertion_failures as u64,
            0,
        ));
    }
    CoreCheck {
        bit_mismatches,
        first_mismatch,
        counter_errors,
        stats,
        accuracy: a.accuracy(&run.out),
    }
}

/// Runs and checks; an error describes the first difference.
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
        chk.ok(),
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
