//! The SoC top's launch contract, as a property: on one instance, a random sequence of START
//! launches, each ending on a random path (a bit-exact run, a refused descriptor, a bad varlen
//! list, an abort, an AXI4 slave or decode error, an empty problem, an address beyond the
//! range), each waited for by interrupt or by polling. Every launch must end with its expected
//! `STATUS.ERR_CODE` and exactly one DONE event in `IRQ_STATUS`, whatever the launch before it
//! did; the paths that must not touch memory (an address beyond the range, a tensor reaching
//! past it, a problem with nothing to compute) read and write nothing, and rows that see no key
//! are 0.

use super::*;
use crate::verify::attention::top::{TopDriver, Wait};
use hdl::mem::dma::{error, AXI_DECERR, AXI_SLVERR};

/// How a launch ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Path {
    /// A small problem, bit-exact with exact counters.
    Run,
    /// Q's base off the memory beat: MISALIGNED.
    Misaligned,
    /// A varlen batch whose offset list is not 4-byte aligned: BATCH, at START.
    BadList,
    /// ABORT during a run.
    Abort,
    /// An AXI4 error response on a K read (SLVERR) or an O write (DECERR); AXI4 tops only.
    BusError { decode: bool },
    /// `Q_LEN` = 0 or `HEADS` = 0: nothing to compute, DONE without an error, memory untouched.
    Empty { no_heads: bool },
    /// `K_LEN` = 0: every row sees no key; O is 0, no error.
    NoKeys,
    /// A varlen batch whose second sequence has queries and no keys: the first bit-exact, the
    /// second's O rows 0, no error.
    BatchNoKeys,
    /// A bit at or above `addr_bits` in a base or stride's HI register: ADDRESS at START,
    /// memory untouched.
    Beyond { stride: bool },
    /// A head stride that takes the last head past 2^addr_bits (it would alias the bottom of
    /// memory): ADDRESS at START, memory untouched.
    Wraps,
    /// rowfused: `K_LEN` one past the keys its S arrays hold: TOO_LARGE (a tile's K and V
    /// descriptors of more keys are refused before any of their keys is read).
    LongRows,
    /// unfused: a scratch region that reaches past 2^addr_bits (refused at START).
    ScratchWraps,
}

/// One launch: its path and how the driver waits.
#[derive(Clone, Copy, Debug)]
pub struct Launch {
    pub path: Path,
    pub wait: Wait,
}

/// Random launch sequences for core `p` (bus errors only with the AXI4 master).
pub fn launches(p: &CoreParams) -> impl Strategy<Value = Vec<Launch>> {
    let axi = p.dma.mem_if == MemIf::Axi4;
    // (weight, path): the paths this core has (weight 0: it has not).
    let options: Vec<(u32, BoxedStrategy<Path>)> = vec![
        (3, Just(Path::Run).boxed()),
        (1, Just(Path::Misaligned).boxed()),
        (2, Just(Path::BadList).boxed()),
        (1, Just(Path::Abort).boxed()),
        (
            axi as u32,
            any::<bool>()
                .prop_map(|decode| Path::BusError { decode })
                .boxed(),
        ),
        (
            2,
            any::<bool>()
                .prop_map(|no_heads| Path::Empty { no_heads })
                .boxed(),
        ),
        (1, Just(Path::NoKeys).boxed()),
        (1, Just(Path::BatchNoKeys).boxed()),
        (
            2,
            any::<bool>()
                .prop_map(|stride| Path::Beyond { stride })
                .boxed(),
        ),
        (1, Just(Path::Wraps).boxed()),
        (
            2 * (p.row.plan().row_keys().is_some() && !p.row.spills()) as u32,
            Just(Path::LongRows).boxed(),
        ),
        (2 * p.row.scratch() as u32, Just(Path::ScratchWraps).boxed()),
    ];
    let path =
        prop::strategy::Union::new_weighted(options.into_iter().filter(|(w, _)| *w > 0).collect());
    let wait = prop_oneof![Just(Wait::Interrupt), Just(Wait::Poll)];
    prop::collection::vec(
        (path, wait).prop_map(|(path, wait)| Launch { path, wait }),
        1..7,
    )
}

/// Directed sequences: each path after each kind of ending that could hide its event (the
/// lost interrupt was a refused varlen START after a finished launch).
pub fn directed(p: &CoreParams) -> Vec<Vec<Launch>> {
    let axi = p.dma.mem_if == MemIf::Axi4;
    let mut paths = vec![
        Path::Run,
        Path::Misaligned,
        Path::BadList,
        Path::Abort,
        Path::Empty { no_heads: false },
        Path::Empty { no_heads: true },
        Path::NoKeys,
        Path::BatchNoKeys,
        Path::Beyond { stride: false },
        Path::Beyond { stride: true },
        Path::Wraps,
    ];
    if axi {
        paths.push(Path::BusError { decode: false });
        paths.push(Path::BusError { decode: true });
    }
    if p.row.plan().row_keys().is_some() && !p.row.spills() {
        paths.push(Path::LongRows);
    }
    if p.row.scratch() {
        paths.push(Path::ScratchWraps);
    }
    let l = |path, wait| Launch { path, wait };
    let mut seqs = vec![];
    // Every path twice in a row (the second START finds DONE already set), by interrupt.
    for &path in &paths {
        seqs.push(vec![
            l(Path::Misaligned, Wait::Interrupt),
            l(path, Wait::Interrupt),
            l(path, Wait::Interrupt),
            l(Path::Run, Wait::Poll),
        ]);
    }
    seqs
}

/// Runs `seq` on a fresh instance of `model`; returns the cycles taken.
pub fn run_sequence(model: &Model, p: &CoreParams, seq: &[Launch], seed: u64) -> Result<u64> {
    let timing = MemoryTiming {
        latency: 4,
        stall_probability: 0.2,
        seed,
        ..MemoryTiming::default()
    };
    let (br, bc, d) = (p.br() as usize, p.bc() as usize, p.d() as usize);
    let problem = |q, k, seed| {
        Attention::generate(Pattern::Unit, 2, q, k, d, false, OutFormat::Short, seed).for_design(p)
    };
    let a0 = problem(br + 1, bc + 3, seed);
    let (mut mem, _) = memory_image(p, &a0, &timing)?;
    let mut drv = TopDriver::new(model, p, seed, &timing, &mut mem)?;
    for (n, l) in seq.iter().enumerate() {
        let what = format!("launch {n} ({l:?})");
        let a = problem(br + 1 + n % 3, bc + 3, seed + n as u64);
        launch(&mut drv, p, &a, l, &timing).map_err(|e| e.context(what))?;
    }
    Ok(drv.cycles)
}

/// A varlen batch whose second sequence has no keys (cu_k 0, 4, 4): the first sequence's O is
/// the model's, the second's rows are 0, and no error is raised.
fn batch_without_keys(
    drv: &mut TopDriver,
    p: &CoreParams,
    a: &Attention,
    l: &Launch,
    timing: &MemoryTiming,
) -> Result<()> {
    let b = Batch::generate(
        Pattern::Unit,
        a.heads,
        a.heads,
        &[2, 3],
        &[4, 4],
        a.head_dim,
        false,
        OutFormat::Short,
        TensorLayout::Bhsd,
        7,
    )
    .for_design(p);
    let (mut mem, img) = b.image(p, timing)?;
    // cu_k = 0, 4, 8 becomes 0, 4, 4: the second sequence has no keys.
    mem.load_bytes(img.cu_k as usize + 8, &4u32.to_le_bytes())?;
    let (r, outs) = drv.run_batch(p, &b, timing, l.wait, &mut mem, &img)?;
    ensure!(r.dma_error == 0, "ERR_CODE {}", r.dma_error);
    ensure!(
        outs[0] == b.seqs[0].expected(p).0,
        "the first sequence's O differs from the hardware model"
    );
    ensure!(
        outs[1].iter().all(|&v| v == 0),
        "the rows of a sequence without keys must be 0"
    );
    Ok(())
}

/// Bends a programmed launch to `path` (a register written wrong, a fault set): the error code
/// the launch must end with, and whether it must leave memory untouched.
fn bend(
    drv: &mut TopDriver,
    p: &CoreParams,
    lay: &Layout,
    path: Path,
    mem: &mut Memory,
) -> Result<(u64, bool)> {
    let beat = p.dma.beat_bytes() as u64;
    Ok(match path {
        Path::Run | Path::BatchNoKeys => unreachable!(),
        Path::Misaligned => {
            drv.write("Q_ADDR_LO", lay.q + beat / 2, mem)?;
            (error::MISALIGNED, false)
        }
        Path::BadList => {
            drv.write("BATCH", 2, mem)?;
            drv.write("CU_Q_ADDR_LO", 2, mem)?;
            (error::BATCH, true)
        }
        Path::Abort => (error::ABORTED, false),
        Path::BusError { decode } => {
            let (at, resp, code) = if decode {
                (lay.o, AXI_DECERR, error::DECERR)
            } else {
                (lay.k, AXI_SLVERR, error::SLVERR)
            };
            drv.set_fault(Some(AxiFault {
                lo: at,
                hi: at + beat,
                resp,
            }))?;
            (code, false)
        }
        Path::Empty { no_heads } => {
            drv.write(if no_heads { "HEADS" } else { "Q_LEN" }, 0, mem)?;
            (0, true)
        }
        Path::NoKeys => {
            drv.write("K_LEN", 0, mem)?;
            (0, false)
        }
        Path::Beyond { stride } => {
            // The lowest bit the core cannot represent (in the HI register of a 64-bit value).
            let bit = p.addr_bits - 32;
            let reg = if stride {
                "K_ROW_STRIDE_HI"
            } else {
                "Q_ADDR_HI"
            };
            drv.write(reg, 1 << bit, mem)?;
            ensure!(
                drv.read(reg, mem)? == 1 << bit,
                "{reg} does not hold the bit written"
            );
            (error::ADDRESS, true)
        }
        Path::Wraps => {
            // Head 1 of Q at its base + 2^addr_bits − beat: one beat below it, modulo the range.
            let stride = (1u64 << p.addr_bits) - beat;
            drv.write("Q_HEAD_STRIDE_LO", stride & 0xFFFF_FFFF, mem)?;
            drv.write("Q_HEAD_STRIDE_HI", stride >> 32, mem)?;
            (error::ADDRESS, true)
        }
        Path::LongRows => {
            let keys = p.row.plan().row_keys().expect("rowfused");
            drv.write("K_LEN", keys as u64 + 1, mem)?;
            (error::TOO_LARGE, false)
        }
        Path::ScratchWraps => {
            // The scratch one beat below the top of the range: a tile's S takes more
            // (rowfused's spill: with a block past its S arrays).
            let at = (1u64 << p.addr_bits) - beat;
            drv.write("S_ADDR_LO", at & 0xFFFF_FFFF, mem)?;
            drv.write("S_ADDR_HI", at >> 32, mem)?;
            if p.row.spills() {
                let keys = p.row.plan().row_keys().expect("rowfused");
                drv.write("K_LEN", keys as u64 + 1, mem)?;
            }
            (error::ADDRESS, true)
        }
    })
}

/// One launch on `drv`: program `a`, bend it to the path, START, wait, and check.
fn launch(
    drv: &mut TopDriver,
    p: &CoreParams,
    a: &Attention,
    l: &Launch,
    timing: &MemoryTiming,
) -> Result<()> {
    let (mut mem, lay) = memory_image(p, a, timing)?;
    let (_, limit) = cycle_limit(p, a, timing, &mem);
    if l.path == Path::Run {
        let r = drv.run(p, a, timing, l.wait, &mut mem, &lay)?;
        let chk = check(p, a, &r);
        ensure!(chk.ok(), "{}", chk.describe());
        return Ok(());
    }
    if l.path == Path::BatchNoKeys {
        return batch_without_keys(drv, p, a, l, timing);
    }
    drv.program(a, &lay, l.wait, &mut mem)?;
    let (code, untouched) = bend(drv, p, &lay, l.path, &mut mem)?;
    let before = mem.stats;
    drv.write("CTRL", 1, &mut mem)?;
    if l.path == Path::Abort {
        for _ in 0..40 {
            drv.tick(&mut mem)?;
        }
        drv.write("CTRL", 2, &mut mem)?;
    }
    let st = drv.wait(l.wait, limit, &mut mem)?;
    if matches!(l.path, Path::BusError { .. }) {
        drv.set_fault(None)?;
    }
    ensure!(
        st.code == code,
        "ERR_CODE {} ({}), expected {code} ({})",
        st.code,
        error::describe(st.code),
        error::describe(code)
    );
    drv.one_done_event(&mut mem)?;
    if untouched {
        ensure!(
            (mem.stats.reads, mem.stats.writes) == (before.reads, before.writes),
            "{} reads and {} writes of memory; this path must touch none",
            mem.stats.reads - before.reads,
            mem.stats.writes - before.writes
        );
    }
    if l.path == Path::NoKeys {
        let o = read_out(&mem, &lay, a);
        ensure!(
            o.iter().all(|&v| v == 0),
            "rows that see no key must be 0; O has {:?}",
            o.iter().find(|&&v| v != 0)
        );
    }
    Ok(())
}

/// The directed sequences, then `cases` random ones (proptest, fixed seed); returns (launches,
/// cycles).
pub fn check_launches(model: &Model, p: &CoreParams, cases: u32, seed: u64) -> Result<(u64, u64)> {
    let (mut n, mut cycles) = (0, 0);
    for (i, s) in directed(p).iter().enumerate() {
        cycles += run_sequence(model, p, s, seed + i as u64)
            .map_err(|e| e.context(format!("directed sequence {i}")))?;
        n += s.len() as u64;
    }
    let config = Config {
        cases,
        failure_persistence: None,
        max_shrink_iters: 50,
        ..Config::default()
    };
    let totals = std::cell::Cell::new((n, cycles));
    let result = crate::verify::seeds::run(config, seed, &launches(p), |s| {
        let c =
            run_sequence(model, p, &s, seed).map_err(|e| TestCaseError::fail(format!("{e:#}")))?;
        let (n, t) = totals.get();
        totals.set((n + s.len() as u64, t + c));
        Ok(())
    });
    crate::verify::outcome(result, |minimal| {
        format!("(minimal failing launch sequence: {minimal:?})")
    })?;
    Ok(totals.get())
}
