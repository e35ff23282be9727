//! Checking the varlen batch controller (`<top>_batch`) at its own ports against its model
//! (`kernels::batch`): the block reads the offset lists from a memory model over its memory
//! port (simple or AXI4, by the configuration, with random latency and stalls) and starts a
//! stand-in core, which stays busy a random number of cycles per launch and may end a run with
//! an error; an abort may be asked for during a run. Every launch's problem (addresses, lengths,
//! the counters kept, every other register passed through unchanged), the number of offset words
//! read and the final error code must equal the model's; each batch then runs a second time from
//! its `done` state, on the same instance, with the same outcome.

use anyhow::{bail, ensure, Result};
use hdl::core::ports::Problem;
use hdl::core::CoreParams;
use hdl::ir::iface::Ports;
use hdl::soc::batch::VarlenRegs;
use kernels::batch::{BatchRegs, Launch, Outcome};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError};
use verilator_tb::memory::{Memory, MemoryConfig};
use verilator_tb::{Dut, Model};

use super::attention::{MemPort, MemoryTiming};

/// Bytes of the memory the lists live in.
const MEM: usize = 4096;

/// One batch: the registers, the lists, and how the core and the memory behave.
#[derive(Clone, Debug)]
pub struct Scenario {
    /// Every problem register (`Problem` order), within its width.
    pub problem: Vec<u64>,
    pub batch: u64,
    /// The lists' words (`batch` + 1 each) and their byte addresses.
    pub cu_q: Vec<u32>,
    pub cu_k: Vec<u32>,
    pub cu_q_addr: u64,
    pub cu_k_addr: u64,
    /// The register block's `addr_over` (an address bit the core cannot represent).
    pub addr_over: bool,
    /// Per launch: cycles the core stays busy and the error it ends with.
    pub run_cycles: Vec<u32>,
    pub core_errors: Vec<u64>,
    /// The launch during whose run ABORT is asked for.
    pub abort_in: Option<usize>,
    pub latency: u32,
    pub stall: f64,
    pub seed: u64,
}

impl Scenario {
    /// The model's registers.
    fn regs(&self, p: &CoreParams) -> BatchRegs {
        let v = |n: &str| self.problem[field(p, n)];
        BatchRegs {
            addr: ["q_addr", "k_addr", "v_addr", "o_addr"].map(v),
            row_stride: [
                "q_row_stride",
                "k_row_stride",
                "v_row_stride",
                "o_row_stride",
            ]
            .map(v),
            head_stride: [
                "q_head_stride",
                "k_head_stride",
                "v_head_stride",
                "o_head_stride",
            ]
            .map(v),
            row_bytes: {
                let row = 2 * p.d() as u64;
                [row, row, row, row << v("out_f32")]
            },
            heads: v("heads"),
            kv_group: v("kv_group"),
            q_len: v("q_len"),
            k_len: v("k_len"),
            batch: self.batch,
            cu_q_addr: self.cu_q_addr,
            cu_k_addr: self.cu_k_addr,
            addr_over: self.addr_over,
        }
    }

    /// What the model says the batch does.
    pub fn expected(&self, p: &CoreParams) -> Outcome {
        let word = |l: &[u32], i: u64| l.get(i as usize).copied().unwrap_or(0);
        kernels::batch::run(
            &self.regs(p),
            p.addr_bits,
            p.index_bits,
            |i| word(&self.cu_q, i),
            |i| word(&self.cu_k, i),
            |i| self.core_errors.get(i).copied().unwrap_or(0),
            self.abort_in,
        )
    }
}

/// The problem registers' names and widths.
fn fields(p: &CoreParams) -> Vec<(String, u32)> {
    Problem::widths(p).named()
}

fn field(p: &CoreParams, name: &str) -> usize {
    fields(p)
        .iter()
        .position(|(n, _)| n == name)
        .unwrap_or_else(|| panic!("no problem register {name}"))
}

/// The stand-in core: busy for a while after each start, then done with its error.
#[derive(Default)]
struct Core {
    busy: bool,
    done: bool,
    error: u64,
    left: u32,
    launches: usize,
}

/// Runs the batch of `s` twice on one instance of the block and checks both runs against the
/// model; returns the cycles taken.
pub fn run(model: &Model, p: &CoreParams, s: &Scenario) -> Result<u64> {
    let mut dut = model.dut()?;
    let beat = p.dma.beat_bytes() as usize;
    let mut mem = Memory::new(MemoryConfig {
        stall_probability: s.stall,
        seed: s.seed,
        ..MemoryConfig::simple(MEM, beat, s.latency.max(1))
    })?;
    for (list, at) in [(&s.cu_q, s.cu_q_addr), (&s.cu_k, s.cu_k_addr)] {
        let bytes: Vec<u8> = list.iter().flat_map(|w| w.to_le_bytes()).collect();
        mem.load_bytes(at as usize & !3, &bytes)?;
    }
    let timing = MemoryTiming {
        latency: s.latency.max(1),
        bytes_per_cycle: 0,
        stall_probability: s.stall,
        seed: s.seed,
        reorder: false,
        fault: None,
        core_fault: None,
        ..MemoryTiming::default()
    };
    let mut link = MemPort::new(&dut, &p.dma, &timing)?;
    let mut regs = s.problem.iter();
    let problem = Problem::widths(p).map("", &mut |_, _| *regs.next().expect("every field"));
    dut.set_all("csr", &problem);
    let varlen = VarlenRegs {
        batch: s.batch,
        cu_q_addr: s.cu_q_addr,
        cu_k_addr: s.cu_k_addr,
    };
    dut.set_all("", &varlen);
    dut.set("addr_over", s.addr_over as u64);
    let want = s.expected(p);
    let mut core = Core::default();
    for round in 0..2 {
        let reads = mem.stats.reads;
        let got = batch_once(&mut dut, &mut link, &mut mem, &mut core, p, s)?;
        let what = format!("run {} of the batch", round + 1);
        check_launches(p, s, &got.launches, &want.launches, &what)?;
        ensure!(
            got.error == want.error,
            "{what}: ended with error {}, the model says {} ({} launches)",
            got.error,
            want.error,
            want.launches.len()
        );
        let words = mem.stats.reads - reads;
        ensure!(
            words == want.words_read,
            "{what}: read {words} offset words, the model reads {}",
            want.words_read
        );
    }
    Ok(dut.cycles())
}

/// One START to `done`: the launches seen and the error.
fn batch_once(
    dut: &mut Dut,
    link: &mut MemPort,
    mem: &mut Memory,
    core: &mut Core,
    p: &CoreParams,
    s: &Scenario,
) -> Result<Outcome> {
    let names = fields(p);
    let mut out = Outcome {
        launches: vec![],
        error: 0,
        words_read: 0,
    };
    let first = core.launches;
    let start = dut.cycles();
    let mut starting = true;
    let mut abort = false;
    // `finish` pulses: exactly one per START, in the first cycle `done` shows (the cycle START
    // is presented in may still show the previous batch's).
    let mut finishes = 0;
    loop {
        if !starting {
            finishes += dut.get("finish");
        }
        if !starting && dut.get("done") == 1 {
            ensure!(dut.get("busy") == 0, "`done` and `busy` are both high");
            ensure!(
                finishes == 1 && dut.get("finish") == 1,
                "{finishes} `finish` pulses by the first cycle of `done` (one per START, \
                 in that cycle)"
            );
            out.error = dut.get("error");
            return Ok(out);
        }
        if dut.cycles() - start > 20_000 {
            bail!("the batch is not done after 20,000 cycles (a hang)");
        }
        dut.set("start", starting as u64);
        dut.set("abort_req", abort as u64);
        starting = false;
        abort = false;
        dut.set("core_busy", core.busy as u64);
        dut.set("core_done", core.done as u64);
        dut.set("core_error", core.error);
        link.present(dut, mem);
        if dut.get("core_start") == 1 {
            ensure!(!core.busy, "the core was started while busy");
            let got = dut.get_all("core", &Problem::widths(p));
            let launch = Launch {
                addr: [got.q_addr, got.k_addr, got.v_addr, got.o_addr],
                q_len: got.q_len,
                k_len: got.k_len,
                keep_counters: dut.get("core_keep_counters") == 1,
            };
            // Everything else reaches the core as the registers hold it.
            for (k, ((n, _), (_, got))) in names.iter().zip(got.named()).enumerate() {
                let passed = !matches!(
                    n.as_str(),
                    "q_addr" | "k_addr" | "v_addr" | "o_addr" | "q_len" | "k_len"
                );
                ensure!(
                    !passed || got == s.problem[k],
                    "launch {}: core_{n} = {got:#x}, the register holds {:#x}",
                    out.launches.len(),
                    s.problem[k]
                );
            }
            let i = core.launches - first;
            out.launches.push(launch);
            core.busy = true;
            core.done = false;
            core.error = 0;
            core.left = s.run_cycles[i % s.run_cycles.len()].max(1);
            core.launches += 1;
            abort = s.abort_in == Some(i);
        } else if core.busy {
            core.left -= 1;
            if core.left == 0 {
                let i = core.launches - 1 - first;
                core.busy = false;
                core.done = true;
                core.error = s.core_errors.get(i).copied().unwrap_or(0);
            }
        }
        link.edge(dut, mem)?;
    }
}

/// The launches seen against the model's.
fn check_launches(
    p: &CoreParams,
    s: &Scenario,
    got: &[Launch],
    want: &[Launch],
    what: &str,
) -> Result<()> {
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        ensure!(
            g == w,
            "{what}, launch {i}: the core got {g:x?}, the model says {w:x?} (registers {:x?}, \
             lists {:x?} / {:x?})",
            s.regs(p),
            s.cu_q,
            s.cu_k
        );
    }
    ensure!(
        got.len() == want.len(),
        "{what}: {} launches, the model makes {}",
        got.len(),
        want.len()
    );
    Ok(())
}

/// A list of `n` + 1 cumulative offsets from `lens` (each step's length, or a decrease).
fn cumulative(start: u32, steps: &[(u32, bool)]) -> Vec<u32> {
    let mut v = vec![start];
    for &(len, down) in steps {
        let last = *v.last().expect("one word");
        v.push(if down {
            last.wrapping_sub(1)
        } else {
            last.wrapping_add(len)
        });
    }
    v
}

/// Random batches for core `p`: 0 to 5 sequences of mostly short lengths, now and then an
/// empty one, one too long (2^16 − 1 is the limit) or a decreasing offset, offsets that wrap
/// the 32-bit range, misaligned list addresses, core errors and aborts, any register values,
/// now and then address bits beyond the range.
pub fn scenario(p: &CoreParams) -> impl Strategy<Value = Scenario> {
    // Any value within its width; addresses, strides and head counts mostly small, so that
    // most launches fit the address range (the rest are refused at their extent check).
    let problem = fields(p)
        .into_iter()
        .map(|(n, w)| {
            let any = any::<u64>().prop_map(move |v| if w >= 64 { v } else { v & ((1 << w) - 1) });
            let small = if n.ends_with("_addr") || n.contains("stride") {
                1u64 << 16
            } else if n == "heads" || n == "kv_group" {
                5
            } else {
                return any.boxed();
            };
            prop_oneof![4 => 0..small, 1 => any].boxed()
        })
        .collect::<Vec<_>>();
    let len = prop_oneof![10 => 0u32..7, 1 => Just(0u32), 1 => 65534u32..65538];
    let step = (len, prop::bool::weighted(0.04));
    let start = prop_oneof![3 => 0u32..100, 1 => any::<u32>()];
    (
        (problem, prop::bool::weighted(0.05)),
        0u64..=5,
        (start.clone(), prop::collection::vec(step.clone(), 5)),
        (start, prop::collection::vec(step, 5)),
        (
            0u64..8,
            0u64..8,
            prop::sample::select(vec![0u64, 0, 0, 0, 0, 0, 1, 2]),
        ),
        prop::collection::vec(1u32..12, 1..4),
        prop::collection::vec(prop_oneof![8 => Just(0u64), 1 => 1u64..16], 5),
        prop::option::weighted(0.15, 0usize..5),
        (
            1u32..30,
            prop::sample::select(vec![0.0, 0.2, 0.5]),
            any::<u64>(),
        ),
    )
        .prop_map(
            |(
                (problem, addr_over),
                batch,
                q,
                k,
                (qa, ka, skew),
                run_cycles,
                core_errors,
                abort_in,
                m,
            )| {
                let n = batch as usize;
                Scenario {
                    problem,
                    addr_over,
                    batch,
                    cu_q: cumulative(q.0, &q.1[..n]),
                    cu_k: cumulative(k.0, &k.1[..n]),
                    cu_q_addr: 0x100 + 4 * qa + if qa % 2 == 0 { skew } else { 0 },
                    cu_k_addr: 0x800 + 4 * ka + if qa % 2 == 1 { skew } else { 0 },
                    run_cycles,
                    core_errors,
                    abort_in,
                    latency: m.0,
                    stall: m.1,
                    seed: m.2,
                }
            },
        )
}

/// Directed batches: the single problem; sequences with empty ones between and at the end;
/// each kind of bad list; a core error; an abort; sequence bases beyond the address range;
/// address bits beyond it (refused at START, single problem and batch).
pub fn directed(p: &CoreParams) -> Vec<Scenario> {
    // Distinct values within each register's width.
    let mut problem: Vec<u64> = (fields(p).iter().enumerate())
        .map(|(i, (_, w))| (3 * i as u64 + 1) & ((1u64 << w) - 1))
        .collect();
    let mut set = |name: &str, v: u64| problem[field(p, name)] = v;
    set("q_addr", 0x1000);
    set("k_addr", 0x2000);
    set("v_addr", 0x3000);
    set("o_addr", 0x4000);
    set("q_row_stride", 32);
    set("k_row_stride", 64);
    set("v_row_stride", 96);
    set("o_row_stride", 16);
    set("q_len", 9);
    set("k_len", 10);
    let base = Scenario {
        problem,
        batch: 3,
        cu_q: vec![0, 4, 4, 9],
        cu_k: vec![2, 5, 8, 8],
        cu_q_addr: 0x100,
        cu_k_addr: 0x804,
        addr_over: false,
        run_cycles: vec![3, 1, 7],
        core_errors: vec![],
        abort_in: None,
        latency: 5,
        stall: 0.0,
        seed: 1,
    };
    let with = |f: &dyn Fn(&mut Scenario)| {
        let mut s = base.clone();
        f(&mut s);
        s
    };
    let at = |f: &dyn Fn(&mut Scenario), name: &str, v: u64| {
        let mut s = with(f);
        s.problem[field(p, name)] = v;
        s
    };
    let mut wrap = with(&|s| {
        s.batch = 1;
        s.cu_q = vec![17, 20];
        s.cu_k = vec![0xffff_0000, 0xffff_0003];
    });
    wrap.problem[field(p, "q_addr")] = (1 << p.addr_bits) - 16;
    wrap.problem[field(p, "q_row_stride")] = 1 << (p.addr_bits - 4);
    wrap.problem[field(p, "k_row_stride")] = (1 << p.addr_bits) - 64;
    vec![
        with(&|s| s.batch = 0),
        base.clone(),
        with(&|s| s.cu_q = vec![0, 4, 6, 6]),
        with(&|s| s.cu_q_addr = 0x102),
        with(&|s| s.cu_k = vec![2, 5, 4, 8]),
        with(&|s| s.cu_q = vec![0, 4, 65_540, 65_541]),
        with(&|s| s.cu_k = vec![2, 5, 5, 8]),
        with(&|s| s.core_errors = vec![0, 7]),
        with(&|s| s.abort_in = Some(0)),
        with(&|s| {
            s.abort_in = Some(0);
            s.core_errors = vec![8];
        }),
        with(&|s| {
            s.batch = 0;
            s.abort_in = Some(0);
        }),
        wrap,
        // O's last byte past the range: the single problem is refused at its extent check.
        at(&|s| s.batch = 0, "o_addr", (1 << p.addr_bits) - 64),
        // The last query head past the range; the K head stride is harmless (13 Q heads in
        // groups of 55 read K/V head 0 only).
        at(&|_| {}, "q_head_stride", (1 << p.addr_bits) - 32),
        at(&|_| {}, "k_head_stride", (1 << p.addr_bits) - 32),
        with(&|s| s.addr_over = true),
        with(&|s| {
            s.batch = 0;
            s.addr_over = true;
        }),
    ]
}

/// The directed batches, then `cases` random ones (proptest, fixed seed); returns (batches,
/// cycles).
pub fn check(model: &Model, p: &CoreParams, cases: u32, seed: u64) -> Result<(u64, u64)> {
    let mut cycles = 0;
    let dir = directed(p);
    for (i, s) in dir.iter().enumerate() {
        cycles += run(model, p, s).map_err(|e| e.context(format!("directed batch {i}")))?;
    }
    let config = Config {
        cases,
        failure_persistence: None,
        max_shrink_iters: 100,
        ..Config::default()
    };
    let totals = std::cell::Cell::new((dir.len() as u64, cycles));
    let result = super::seeds::run(config, seed, &scenario(p), |s| {
        let c = run(model, p, &s).map_err(|e| TestCaseError::fail(format!("{e:#}")))?;
        let (n, t) = totals.get();
        totals.set((n + 1, t + c));
        Ok(())
    });
    super::outcome(result, |minimal| {
        format!("(minimal failing batch: {minimal:#?})")
    })?;
    Ok(totals.get())
}
