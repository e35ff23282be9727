//! Checking the DMA against the memory model: transfers on every channel at once under random
//! latency, bandwidth, bank conflicts and back-pressure.
//!
//! The DMA's memory port is the configuration's (`mem_if`): the simple port on the memory
//! model, or the AXI4 master on the testbench's AXI4 slave (`verilator_tb::axi`: the same
//! memory, random stalls on every channel, read bursts of different IDs reordered beat by beat,
//! every protocol rule checked). Over AXI4 the bursts are counted too: each transfer must take
//! exactly the bursts its addresses need (the longest AXI4 allows, a row at a time, or a block
//! at a time when its rows are contiguous), and an error response must end up as the channel's
//! error code.
//!
//! For each read channel the bench plays the consumer: it asks for blocks (`x_want`), and when
//! one has landed it reads every row back through the landing buffer's port and compares each
//! beat with the memory at the descriptor's address, holds the block for a set number of
//! cycles (the compute it would feed), then releases it. For the write channel it fills the
//! staging buffer, runs the descriptor, and afterwards compares the whole memory with what it
//! should be: written beats where the descriptor says, everything else untouched. Counters
//! (the DMA's and the memory's) must show every beat moved exactly once.
//!
//! With unfused's scratch region in a GLB, a scenario may also play the core's round trip: the
//! write is a scratch write (contiguous rows) at a random offset into the region, and once it
//! is done the scratch channel reads the same bytes back. The beats below the region's end must
//! stay in the GLB (no memory traffic, memory untouched there) and land from it; the rest go
//! to memory and come back from it.

use anyhow::{bail, ensure, Result};
use hdl::mem::dma::{error, DmaConfig, MemIf};
use hdl::mem::landing::{LandingConfig, Layout};
use kernels::patterns::Rng;
use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError};
use verilator_tb::axi::{bursts_of, AxiFault, AxiStats};
use verilator_tb::memory::{Memory, MemoryConfig, MemoryStats};
use verilator_tb::{Dut, Model, PortId};

use super::attention::{MemPort, MemoryTiming};
use super::pure::pack;

/// A transfer descriptor.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Desc {
    pub base: u64,
    pub stride: u64,
    pub row_bytes: u64,
    pub rows: u64,
    /// Read channels: rows per block.
    pub block_rows: u64,
}

/// One read channel's job: the descriptor and how long the consumer holds each block.
#[derive(Clone, Copy, Debug)]
pub struct ReadJob {
    pub desc: Desc,
    pub hold: u32,
}

/// What a run did.
#[derive(Clone, Copy, Debug, Default)]
pub struct DmaRun {
    pub cycles: u64,
    pub memory: MemoryStats,
    pub read_beats: u64,
    pub write_beats: u64,
    /// Per read channel (q, k, v, and unfused's scratch channel x): cycles the consumer
    /// waited for a block after the first, and for the first.
    pub wait: [u64; 4],
    pub first_wait: [u64; 4],
    /// Blocks checked per read channel.
    pub blocks: [u64; 4],
    /// The AXI4 slave's statistics (AXI4 port only).
    pub axi: Option<AxiStats>,
}

/// The read channels, in the DMA's order (`x` only where the design has one: unfused).
const READ: [&str; 4] = ["q", "k", "v", "x"];

struct Consumer {
    name: &'static str,
    land: LandingConfig,
    job: Option<ReadJob>,
    /// Cycles left holding the current block; None while waiting for one.
    holding: Option<u32>,
    blocks: u64,
    /// The block after the one released last cycle was reported landed (`x_next`).
    promised: bool,
    want: PortId,
    release: PortId,
    ready: PortId,
    next: PortId,
    slot: PortId,
    block: PortId,
    busy: PortId,
    rd_addr: PortId,
    rd_data: PortId,
}

/// The DMA on a memory model.
pub struct DmaBench {
    pub dut: Dut,
    pub mem: Memory,
    cfg: DmaConfig,
    link: MemPort,
    consumers: Vec<Consumer>,
    /// With a GLB: its event ports (reads, fill, refused, spill) and their sums so far.
    glb: Option<([PortId; 4], [u64; 4])>,
    /// unfused with a GLB: the scratch region's base and the bytes the GLB holds of it (from
    /// the base, what the last scratch write left there), which a landed beat there must be.
    scratch: Option<(u64, Vec<u8>)>,
}

impl DmaBench {
    /// The DMA of `model` on a memory of `mem`. With the AXI4 port the memory holds the bytes
    /// and the AXI4 slave takes its latency, stall probability and seed (bursts of different
    /// IDs reordered); bandwidth and banks are the simple port's.
    pub fn new(model: &Model, cfg: &DmaConfig, mem: MemoryConfig) -> Result<Self> {
        ensure!(
            mem.beat_bytes == cfg.beat_bytes() as usize,
            "memory beat and DMA width differ"
        );
        let dut = model.dut()?;
        let timing = MemoryTiming {
            latency: mem.latency.max(1),
            bytes_per_cycle: 0,
            stall_probability: mem.stall_probability,
            seed: mem.seed,
            reorder: true,
            fault: None,
            core_fault: None,
            ..MemoryTiming::default()
        };
        let link = MemPort::new(&dut, cfg, &timing)?;
        let lands = cfg.landings();
        let mut consumers = vec![];
        for (i, &name) in READ[..lands.len()].iter().enumerate() {
            let q = |s: &str| dut.port(&format!("{name}_{s}"));
            consumers.push(Consumer {
                name,
                land: lands[i],
                job: None,
                holding: None,
                blocks: 0,
                promised: false,
                want: q("want")?,
                release: q("release")?,
                ready: q("ready")?,
                next: q("next")?,
                slot: q("slot")?,
                block: q("block")?,
                busy: q("busy")?,
                rd_addr: q("rd_addr")?,
                rd_data: q("rd_data")?,
            });
        }
        let glb = match cfg.glb {
            Some(_) => {
                let id = |n: &str| dut.port(&format!("glb_{n}"));
                Some((
                    [id("reads")?, id("fill")?, id("refused")?, id("spill")?],
                    [0; 4],
                ))
            }
            None => None,
        };
        let mut dut = dut;
        // The scratch region (unfused with a GLB) where no read reaches it until a scenario
        // moves it: at the write half, above every read job (their offsets from it wrap past
        // the region); a write uses it only when flagged.
        let scratch = cfg.glb.filter(|g| g.scratch_beats > 0).map(|_| {
            let base = mem.size as u64 / 2;
            dut.set("glb_scratch_base", base);
            (base, vec![])
        });
        Ok(DmaBench {
            dut,
            mem: Memory::new(mem)?,
            cfg: *cfg,
            link,
            consumers,
            glb,
            scratch,
        })
    }

    /// unfused with a GLB: moves the scratch region to `base` and marks the next write as a
    /// scratch write (`glb_scratch_o_write` with its start), which leaves `held` (the region's
    /// bytes from its base) in the GLB.
    pub fn set_scratch(&mut self, base: u64, held: Vec<u8>) {
        self.dut.set("glb_scratch_base", base);
        self.dut.set("glb_scratch_o_write", 1);
        self.scratch = Some((base, held));
    }

    /// AXI4: the error response of every burst that touches bytes [lo, hi) from now on.
    pub fn set_fault(&mut self, fault: Option<AxiFault>) -> Result<()> {
        self.link.set_fault(fault)
    }

    fn set_desc(&mut self, ch: &str, d: &Desc, blocks: bool) {
        let dut = &mut self.dut;
        dut.set(&format!("{ch}_base"), d.base);
        dut.set(&format!("{ch}_stride"), d.stride);
        dut.set(&format!("{ch}_row_bytes"), d.row_bytes);
        dut.set(&format!("{ch}_rows"), d.rows);
        if blocks {
            dut.set(&format!("{ch}_block_rows"), d.block_rows);
        }
    }

    /// Starts a descriptor on channel `ch` (one start pulse) and returns the error code it got:
    /// at once for a start while busy, else when its check decides (`CHECK_CYCLES` later, the
    /// channel busy meanwhile).
    pub fn start(&mut self, ch: &str, d: &Desc) -> Result<u64> {
        let read = ch != "o";
        self.set_desc(ch, d, read);
        self.dut.set(&format!("{ch}_start"), 1);
        let was_busy = self.dut.get(&format!("{ch}_busy")) != 0;
        self.cycle()?;
        self.dut.set(&format!("{ch}_start"), 0);
        if !was_busy {
            for _ in 0..hdl::mem::dma::CHECK_CYCLES {
                ensure!(
                    self.dut.get(&format!("{ch}_busy")) != 0,
                    "channel {ch} is not busy while it checks {d:?}"
                );
                self.cycle()?;
            }
        }
        Ok(self.dut.get(&format!("{ch}_error")))
    }

    /// Sets the read job of channel `index` (0 q, 1 k, 2 v, 3 x) and starts it; fails if the DMA
    /// reports an error.
    pub fn start_read(&mut self, index: usize, job: ReadJob) -> Result<()> {
        let code = self.start(READ[index], &job.desc)?;
        ensure!(
            code == 0,
            "channel {} refused {:?} with error {code}",
            READ[index],
            job.desc
        );
        self.consumers[index].job = Some(job);
        self.consumers[index].holding = None;
        Ok(())
    }

    /// Fills the staging buffer with `data` (row-major, the descriptor's beats per row) through
    /// the banks' write ports, and starts the write descriptor.
    pub fn start_write(&mut self, d: &Desc, data: &[Vec<u32>]) -> Result<()> {
        let row_beats = (d.row_bytes / self.cfg.beat_bytes() as u64).max(1);
        let (banks, rpb) = (self.cfg.o_banks(), self.cfg.o_rows_per_bank as u64);
        let (lrb, bb) = (self.cfg.o_local_row_bits(), self.cfg.o_beat_bits());
        let words = (self.cfg.width / 32) as usize;
        // One lane per bank in each field: only the addressed bank's lane is set.
        let field = |bank: u64, value: u64, width: u32| {
            let mut lanes = vec![0u64; banks as usize];
            lanes[bank as usize] = value;
            let mut w = vec![];
            pack(&lanes, width, &mut w);
            w
        };
        for (i, beat) in data.iter().enumerate() {
            let (row, t) = (i as u64 / row_beats, i as u64 % row_beats);
            let (bank, local) = (row / rpb, row % rpb);
            self.dut.set_words("o_wr_en", &field(bank, 1, 1));
            if lrb > 0 {
                self.dut.set_words("o_wr_row", &field(bank, local, lrb));
            }
            self.dut.set_words("o_wr_beat", &field(bank, t, bb));
            let mut all = vec![0u32; words * banks as usize];
            all[bank as usize * words..(bank as usize + 1) * words].copy_from_slice(beat);
            self.dut.set_words("o_wr_data", &all);
            self.cycle()?;
        }
        self.dut.set_words("o_wr_en", &field(0, 0, 1));
        let code = self.start("o", d)?;
        ensure!(code == 0, "channel o refused {d:?} with error {code}");
        // The scratch flag goes with one start only.
        if self.scratch.is_some() {
            self.dut.set("glb_scratch_o_write", 0);
        }
        Ok(())
    }

    /// One clock cycle: memory response and request handshake, consumers, edge.
    pub fn cycle(&mut self) -> Result<()> {
        self.link.present(&mut self.dut, &mut self.mem);
        for i in 0..self.consumers.len() {
            self.consume(i)?;
        }
        if let Some((ids, sums)) = &mut self.glb {
            for (id, sum) in ids.iter().zip(sums.iter_mut()) {
                *sum += self.dut.get_id(*id);
            }
        }
        self.link.edge(&mut self.dut, &mut self.mem)
    }

    /// The GLB's events so far (beats read by hits, beats filled, hit reads refused, K/V beats
    /// streamed past it); None without a GLB.
    pub fn glb_events(&self) -> Option<[u64; 4]> {
        self.glb.map(|g| g.1)
    }

    /// Pulses the GLB's flush for a cycle.
    pub fn flush_glb(&mut self) -> Result<()> {
        self.dut.set("glb_flush", 1);
        self.cycle()?;
        self.dut.set("glb_flush", 0);
        Ok(())
    }

    /// The consumer of read channel `i`, before the clock edge.
    fn consume(&mut self, i: usize) -> Result<()> {
        let c = &self.consumers[i];
        let Some(job) = c.job else {
            self.dut.set_id(c.want, 0);
            self.dut.set_id(c.release, 0);
            return Ok(());
        };
        let (want, release, ready, next) = (c.want, c.release, c.ready, c.next);
        // `next` is a promise: blocks land in order, so the next one cannot have landed
        // before the current one, and after a release it is the current one.
        let (name, blocks, promised, held) = (c.name, c.blocks, c.promised, c.holding);
        let (is_ready, is_next) = (self.dut.get_id(ready), self.dut.get_id(next));
        ensure!(
            is_next == 0 || is_ready == 1,
            "DMA channel {name}: `next` says block {} landed while block {blocks} has not",
            blocks + 1
        );
        ensure!(
            !promised || is_ready == 1,
            "DMA channel {name}: `next` promised block {blocks} at the release of the one \
             before, but `ready` is low"
        );
        self.consumers[i].promised = false;
        let mut do_release = false;
        match held {
            Some(0) => do_release = true,
            Some(n) => self.consumers[i].holding = Some(n - 1),
            None => {
                if self.dut.get_id(ready) == 1 {
                    self.check_block(i, &job)?;
                    self.consumers[i].blocks += 1;
                    if job.hold == 0 {
                        do_release = true;
                    } else {
                        self.consumers[i].holding = Some(job.hold - 1);
                    }
                }
            }
        }
        let holding = self.consumers[i].holding.is_some();
        // A consumer knows how many blocks the transfer has: it does not ask past the last.
        let expected = job.desc.rows.div_ceil(job.desc.block_rows.max(1));
        let more = self.consumers[i].blocks < expected;
        self.dut
            .set_id(want, (more && !holding && !do_release) as u64);
        self.dut.set_id(release, do_release as u64);
        if do_release {
            self.consumers[i].holding = None;
            self.consumers[i].promised = is_next == 1;
        }
        Ok(())
    }

    /// Reads every row of the landed block back and compares it with memory.
    fn check_block(&mut self, i: usize, job: &ReadJob) -> Result<()> {
        let c = &self.consumers[i];
        let (land, name) = (c.land, c.name);
        let (slot, block) = (self.dut.get_id(c.slot), self.dut.get_id(c.block));
        let (rd_addr, rd_data) = (c.rd_addr, c.rd_data);
        let d = job.desc;
        let beat = self.cfg.beat_bytes() as u64;
        let first_row = block * d.block_rows;
        let rows = d.block_rows.min(d.rows - first_row);
        let beats = d.row_bytes / beat;
        let bw = land.beat_bits();
        let lrb = land.local_row_bits();
        for r in 0..rows {
            for t in 0..beats {
                let (addr, bank) = match land.layout {
                    Layout::RowBanked { rows_per_bank } => {
                        let local = r % rows_per_bank as u64;
                        (
                            (slot << (lrb + bw)) | (local << bw) | t,
                            r / rows_per_bank as u64,
                        )
                    }
                    Layout::BeatSliced => ((slot << land.row_bits()) | r, t),
                };
                self.dut.set_id(rd_addr, addr);
                let all = self.dut.get_words_id(rd_data);
                let per = (self.cfg.width / 32) as usize;
                let got = &all[bank as usize * per..(bank as usize + 1) * per];
                let at = (d.base + (first_row + r) * d.stride + t * beat) as usize;
                // The scratch channel's beats below the GLB's part of the region come from it.
                let held = match &self.scratch {
                    Some((base, held)) if name == "x" => (at as u64)
                        .checked_sub(*base)
                        .filter(|&off| off < held.len() as u64)
                        .map(|off| held[off as usize..(off + beat) as usize].to_vec()),
                    _ => None,
                };
                let bytes = held.unwrap_or_else(|| self.mem.read_bytes(at, beat as usize).to_vec());
                let want: Vec<u32> = bytes
                    .chunks(4)
                    .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                    .collect();
                if got != want.as_slice() {
                    bail!(
                        "channel {name}, block {block} (slot {slot}), row {r}, beat {t}: landed {got:08x?}, \
                         memory at {at:#x} holds {want:08x?}"
                    );
                }
            }
        }
        Ok(())
    }

    /// Runs until no channel is busy; fails after `limit` cycles (a hang).
    pub fn run_to_idle(&mut self, limit: u64) -> Result<()> {
        let start = self.dut.cycles();
        loop {
            let busy = self.consumers.iter().any(|c| self.dut.get_id(c.busy) == 1)
                || self.dut.get("o_busy") == 1;
            if !busy && self.mem.outstanding() == 0 && self.link.idle() {
                for c in &mut self.consumers {
                    c.job = None;
                }
                self.cycle()?;
                // The DMA's own checkers (the AXI4 protocol's, the GLB's) must stay silent.
                let failed = self.dut.assertion_failures();
                ensure!(
                    failed == 0,
                    "{failed} RTL assertion failure(s): the simulator's messages name them"
                );
                return Ok(());
            }
            if self.dut.cycles() - start > limit {
                bail!("the DMA is still busy after {limit} cycles");
            }
            self.cycle()?;
        }
    }

    /// Counters so far.
    pub fn counters(&mut self) -> DmaRun {
        let mut r = DmaRun {
            cycles: self.dut.cycles(),
            memory: self.mem.stats,
            read_beats: self.dut.get("read_beats"),
            write_beats: self.dut.get("write_beats"),
            axi: self.link.axi_stats(),
            ..DmaRun::default()
        };
        for (i, c) in self.consumers.iter().enumerate() {
            r.wait[i] = self.dut.get(&format!("{}_wait", c.name));
            r.first_wait[i] = self.dut.get(&format!("{}_first_wait", c.name));
            r.blocks[i] = c.blocks;
        }
        r
    }
}

/// Bytes of the memory model in the random scenarios and error checks.
pub const MEM: usize = 1 << 20;

/// Deterministic pseudo-random memory contents.
pub fn pattern(seed: u64) -> Vec<u8> {
    let mut rng = Rng(seed | 1);
    (0..MEM).map(|_| rng.next_u64() as u8).collect()
}

/// A random descriptor that fits channel limits, with its rows inside [lo, hi).
fn desc(
    beat: u64,
    max_beats: u64,
    max_block: u64,
    lo: u64,
    hi: u64,
) -> impl Strategy<Value = Desc> {
    (1..=max_beats, 0u64..4, 1u64..=40, 1..=max_block, 0u64..1024).prop_map(
        move |(beats, gap, rows, block, at)| {
            let row_bytes = beats * beat;
            let stride = row_bytes + gap * beat;
            let base = lo + (at * beat) % (hi - lo - rows * stride).max(beat);
            Desc {
                base: base / beat * beat,
                stride,
                row_bytes,
                rows,
                block_rows: block,
            }
        },
    )
}

#[derive(Clone, Debug)]
/// A random test scenario: jobs on every channel and the memory's behaviour.
pub struct Scenario {
    reads: [Option<ReadJob>; 4],
    write: Option<(Desc, u64)>,
    /// unfused with a GLB: the write is a scratch write this many beats into the region
    /// (its rows made contiguous), read back by the scratch channel afterwards.
    scratch: Option<u64>,
    latency: u32,
    bandwidth_div: usize,
    banks: usize,
    bank_busy: u32,
    stall: f64,
    seed: u64,
}

/// Random scenarios for the DMA `d`.
pub fn scenario(d: &DmaConfig) -> impl Strategy<Value = Scenario> {
    let d = *d;
    let beat = d.beat_bytes() as u64;
    // Read regions in the lower half, the write region in the upper half: no read/write races.
    // K and V within the keys rowfused's S arrays hold.
    let read = |rows: u32, beats: u32, most: Option<u32>| {
        prop::option::weighted(
            0.8,
            (
                desc(beat, beats as u64, rows as u64, 0, MEM as u64 / 2),
                0u32..40,
            ),
        )
        .prop_map(move |j| {
            j.map(|(mut desc, hold)| {
                desc.rows = desc.rows.min(most.map_or(u64::MAX, u64::from));
                ReadJob { desc, hold }
            })
        })
    };
    let write = prop::option::weighted(
        0.6,
        (
            desc(
                beat,
                d.o_row_beats as u64,
                d.o_rows as u64,
                MEM as u64 / 2,
                MEM as u64,
            ),
            any::<u64>(),
        )
            .prop_map(move |(mut w, s)| {
                w.rows = w.rows.min(d.o_rows as u64);
                (w, s)
            }),
    );
    // The scratch channel where there is one (its jobs as Q's: it lands in the same layout).
    let x = d.x.unwrap_or(d.q);
    let has_x = d.x.is_some();
    // unfused with a GLB: half the scenarios' writes are scratch round trips, at an offset
    // that may put the region's end inside the write.
    let region = d.glb.map_or(0, |g| g.scratch_beats as u64);
    let scratch = if region > 0 {
        prop::option::weighted(0.5, 0..region).boxed()
    } else {
        Just(None).boxed()
    };
    (
        (
            read(d.q.rows, d.q.row_beats, None),
            read(d.k.rows, d.k.row_beats, d.kv_max_rows),
            read(d.v.rows, d.v.row_beats, d.kv_max_rows),
            read(x.rows, x.row_beats, None).prop_map(move |j| j.filter(|_| has_x)),
        ),
        (write, scratch),
        prop_oneof![Just(1u32), 2u32..=30, 90u32..=130],
        prop::sample::select(vec![1usize, 2, 4]),
        prop::sample::select(vec![1usize, 2, 4]),
        1u32..=3,
        prop::sample::select(vec![0.0, 0.1, 0.3, 0.6]),
        any::<u64>(),
    )
        .prop_map(
            |(
                (q, k, v, x),
                (write, scratch),
                latency,
                bandwidth_div,
                banks,
                bank_busy,
                stall,
                seed,
            )| {
                let scratch = scratch.filter(|_| write.is_some());
                // A round trip's region may start below the write half: no other scratch
                // read then (it could reach into the region).
                let x = x.filter(|_| scratch.is_none());
                let write = write.map(|(mut w, s)| {
                    if scratch.is_some() {
                        w.stride = w.row_bytes;
                    }
                    (w, s)
                });
                Scenario {
                    reads: [q, k, v, x],
                    write,
                    scratch,
                    latency,
                    bandwidth_div,
                    banks,
                    bank_busy,
                    stall,
                    seed,
                }
            },
        )
}

/// The AXI4 bursts transfer `d` takes, from its addresses alone: a row at a time, or with
/// contiguous rows (stride = row bytes) a block at a time (`read`: the read channels, whose
/// bursts never span a block) or the whole transfer (the write channel), each run split at
/// 256 beats and 4 KiB boundaries.
pub fn expected_bursts(d: &Desc, beat: u64, read: bool) -> u64 {
    expected_bursts_after(d, beat, read, 0)
}

/// [`expected_bursts`] for the beats of the walk from beat `first` on (the ones before it hit
/// the GLB): a run that starts before `first` starts at it instead.
pub fn expected_bursts_after(d: &Desc, beat: u64, read: bool, first: u64) -> u64 {
    let group = match (d.stride == d.row_bytes, read) {
        (false, _) => 1,
        (true, true) => d.block_rows.max(1),
        (true, false) => d.rows.max(1),
    };
    let row_beats = d.row_bytes / beat;
    (0..d.rows)
        .step_by(group as usize)
        .map(|r| {
            let (start, end) = (r * row_beats, (r + group).min(d.rows) * row_beats);
            let from = start.max(first);
            if from >= end {
                return 0;
            }
            let at = d.base + (from / row_beats) * d.stride + (from % row_beats) * beat;
            bursts_of(at, (end - from) * beat, beat)
        })
        .sum()
}

/// Runs a scenario and checks every landed beat, every written byte and every counter (over
/// AXI4 also the bursts); returns the beats moved and the run's counters.
pub fn run(model: &Model, d: &DmaConfig, s: &Scenario) -> Result<(u64, DmaRun), String> {
    let beat = d.beat_bytes() as usize;
    let mem = MemoryConfig {
        size: MEM,
        beat_bytes: beat,
        latency: s.latency,
        bytes_per_cycle: (beat / s.bandwidth_div).max(1),
        banks: s.banks,
        bank_busy: s.bank_busy,
        stall_probability: s.stall,
        seed: s.seed,
    };
    let e = |x: anyhow::Error| format!("{x:#}");
    let mut b = DmaBench::new(model, d, mem).map_err(e)?;
    let initial = pattern(s.seed);
    b.mem.load_bytes(0, &initial).map_err(e)?;
    let mut expected = initial.clone();
    let mut read_beats = 0;
    let mut blocks = [0u64; 4];
    for (i, job) in s.reads.iter().enumerate() {
        if let Some(job) = job {
            b.start_read(i, *job).map_err(e)?;
            read_beats += job.desc.rows * job.desc.row_bytes / beat as u64;
            blocks[i] = job.desc.rows.div_ceil(job.desc.block_rows);
        }
    }
    let mut write_beats = 0;
    // unfused with a GLB: the write's first beats that stay in the GLB (a scratch round trip),
    // and the bytes of its region they leave there.
    let mut in_glb = 0;
    let mut held = vec![];
    let mut read_back = None;
    if let Some((w, seed)) = s.write {
        let row_beats = w.row_bytes / beat as u64;
        let total = w.rows * row_beats;
        if let (Some(k), Some(g)) = (s.scratch, d.glb) {
            in_glb = total.min(g.scratch_beats as u64 - k);
            held = vec![0u8; g.scratch_beats as usize * beat];
            let x_rows = d.x.map_or(1, |x| x.rows as u64);
            read_back = Some(ReadJob {
                desc: Desc {
                    base: w.base,
                    stride: beat as u64,
                    row_bytes: beat as u64,
                    rows: total,
                    block_rows: x_rows.min(total),
                },
                hold: 0,
            });
        }
        let mut rng = Rng(seed | 1);
        let data: Vec<Vec<u32>> = (0..w.rows * row_beats)
            .map(|_| (0..beat / 4).map(|_| rng.next_u64() as u32).collect())
            .collect();
        for (n, words) in data.iter().enumerate() {
            let (r, t) = (n as u64 / row_beats, n as u64 % row_beats);
            let at = (w.base + r * w.stride + t * beat as u64) as usize;
            // A scratch write's rows are contiguous: its beat n is beat k + n of the region.
            let (bytes, at) = match s.scratch {
                Some(k) if (n as u64) < in_glb => (&mut held, (k as usize + n) * beat),
                _ => (&mut expected, at),
            };
            for (k, word) in words.iter().enumerate() {
                bytes[at + 4 * k..at + 4 * k + 4].copy_from_slice(&word.to_le_bytes());
            }
        }
        if let Some(k) = s.scratch.filter(|_| read_back.is_some()) {
            b.set_scratch(w.base - k * beat as u64, std::mem::take(&mut held));
        }
        b.start_write(&w, &data).map_err(e)?;
        write_beats = total - in_glb;
    }
    b.run_to_idle(200_000).map_err(e)?;
    // The scratch channel reads the round trip's bytes back: the GLB's part from it.
    if let Some(job) = read_back {
        b.start_read(3, job).map_err(e)?;
        read_beats += job.desc.rows - in_glb;
        blocks[3] += job.desc.rows.div_ceil(job.desc.block_rows);
        b.run_to_idle(200_000).map_err(e)?;
    }
    let r = b.counters();
    if r.blocks != blocks {
        return Err(format!(
            "blocks checked {:?}, expected {blocks:?}",
            r.blocks
        ));
    }
    // The DMA's counters wrap at BEAT_COUNTER_BITS (the counter file widens them).
    let wrap = (1u64 << hdl::mem::dma::BEAT_COUNTER_BITS) - 1;
    if r.read_beats != read_beats & wrap || r.memory.reads != read_beats {
        return Err(format!(
            "read {} beats (memory saw {}), expected exactly {read_beats}",
            r.read_beats, r.memory.reads
        ));
    }
    if r.write_beats != write_beats & wrap || r.memory.writes != write_beats {
        return Err(format!(
            "wrote {} beats (memory saw {}), expected exactly {write_beats}",
            r.write_beats, r.memory.writes
        ));
    }
    if let Some(at) = (0..MEM).find(|&a| b.mem.bytes()[a] != expected[a]) {
        return Err(format!(
            "memory byte {at:#x} is {:#04x}, expected {:#04x} (writes landed in the wrong place)",
            b.mem.bytes()[at],
            expected[at]
        ));
    }
    if let Some(axi) = r.axi {
        let beat = beat as u64;
        let reads: u64 = (s.reads.iter().flatten())
            .map(|j| expected_bursts(&j.desc, beat, true))
            .sum::<u64>()
            + read_back.map_or(0, |j| expected_bursts_after(&j.desc, beat, true, in_glb));
        let writes = s
            .write
            .map_or(0, |(w, _)| expected_bursts_after(&w, beat, false, in_glb));
        if (axi.read_bursts, axi.write_bursts) != (reads, writes) {
            return Err(format!(
                "AXI4: {} read and {} write bursts, the addresses need {reads} and {writes}",
                axi.read_bursts, axi.write_bursts
            ));
        }
    }
    Ok((read_beats + write_beats, r))
}

/// Every class of bad descriptor on every channel: the error code, an idle channel, no memory
/// traffic; then a good descriptor runs and a second start reports busy. Returns the cases.
pub fn check_errors(model: &Model, d: &DmaConfig) -> anyhow::Result<u64> {
    let beat = d.beat_bytes() as u64;
    let range = 1u64 << d.addr_bits;
    let good = Desc {
        base: 0,
        stride: beat,
        row_bytes: beat,
        rows: 2,
        block_rows: 1,
    };
    let max_rows = d.landings().iter().map(|l| l.rows).min().unwrap_or(1) as u64;
    let cases: Vec<(&str, Desc, u64)> = vec![
        ("zero rows", Desc { rows: 0, ..good }, error::ZERO_SIZE),
        (
            "zero row bytes",
            Desc {
                row_bytes: 0,
                ..good
            },
            error::ZERO_SIZE,
        ),
        (
            "zero block rows",
            Desc {
                block_rows: 0,
                ..good
            },
            error::ZERO_SIZE,
        ),
        (
            "misaligned base",
            Desc { base: 4, ..good },
            error::MISALIGNED,
        ),
        (
            "misaligned stride",
            Desc {
                stride: beat + 4,
                ..good
            },
            error::MISALIGNED,
        ),
        (
            "misaligned row bytes",
            Desc {
                row_bytes: beat / 2,
                ..good
            },
            error::MISALIGNED,
        ),
        (
            "block taller than the landing buffer",
            Desc {
                block_rows: max_rows + 1,
                rows: max_rows + 1,
                ..good
            },
            error::TOO_LARGE,
        ),
        (
            "past the end of the address range",
            Desc {
                base: range - beat,
                ..good
            },
            error::OUT_OF_RANGE,
        ),
        (
            "stride past the end",
            Desc {
                stride: range / 2 + beat,
                rows: 3,
                ..good
            },
            error::OUT_OF_RANGE,
        ),
    ];
    let mut n = 0;
    for ch in channels(d) {
        let max_beats = match ch {
            "q" => d.q.row_beats,
            "k" => d.k.row_beats,
            "v" => d.v.row_beats,
            "x" => d.x.map_or(0, |x| x.row_beats),
            _ => d.o_row_beats,
        } as u64;
        let long = Desc {
            row_bytes: (max_beats + 1) * beat,
            stride: (max_beats + 1) * beat,
            ..good
        };
        let mut all = cases.clone();
        all.push(("row longer than the buffer", long, error::TOO_LARGE));
        // rowfused: K and V of more keys than its S arrays hold.
        if let (Some(keys), "k" | "v") = (d.kv_max_rows, ch) {
            all.push((
                "more keys than the S arrays hold",
                Desc {
                    rows: keys as u64 + 1,
                    ..good
                },
                error::TOO_LARGE,
            ));
        }
        if ch == "o" {
            all.retain(|(w, _, _)| !w.contains("block"));
            all.push((
                "more rows than the staging buffer",
                Desc {
                    rows: d.o_rows as u64 + 1,
                    ..good
                },
                error::TOO_LARGE,
            ));
        }
        for (what, desc, code) in all {
            let mut b = DmaBench::new(model, d, MemoryConfig::simple(MEM, beat as usize, 3))?;
            let got = b.start(ch, &desc)?;
            ensure!(got == code, "{ch}: {what}: error {got}, expected {code}");
            for _ in 0..20 {
                b.cycle()?;
            }
            ensure!(
                b.dut.get(&format!("{ch}_busy")) == 0,
                "{ch}: {what}: the channel is busy"
            );
            ensure!(
                b.mem.stats.reads + b.mem.stats.writes == 0,
                "{ch}: {what}: memory traffic"
            );
            ensure!(
                b.start(ch, &good)? == 0,
                "{ch}: a good descriptor after {what} failed"
            );
            ensure!(
                b.start(ch, &good)? == error::BUSY,
                "{ch}: a start while busy was not refused"
            );
            n += 1;
        }
    }
    if d.mem_if == MemIf::Axi4 {
        n += check_bus_errors(model, d)?;
    }
    Ok(n)
}

/// AXI4 error responses: on every channel, SLVERR and then DECERR on one burst of a transfer
/// (four one-beat rows a page apart, a burst each; the second one fails). The transfer still
/// completes with every burst answered, the channel reports the code after it, and the next
/// start clears the code and runs clean. Returns the cases.
fn check_bus_errors(model: &Model, d: &DmaConfig) -> anyhow::Result<u64> {
    let beat = d.beat_bytes() as u64;
    let mut n = 0;
    for ch in channels(d) {
        let base = if ch == "o" { MEM as u64 / 2 } else { 0 };
        let desc = Desc {
            base,
            stride: 4096,
            row_bytes: beat,
            rows: 4,
            block_rows: 2,
        };
        for (resp, code) in [
            (hdl::mem::dma::AXI_SLVERR, error::SLVERR),
            (hdl::mem::dma::AXI_DECERR, error::DECERR),
        ] {
            let mut b = DmaBench::new(model, d, MemoryConfig::simple(MEM, beat as usize, 3))?;
            b.mem.load_bytes(0, &pattern(5))?;
            let fault = AxiFault {
                lo: base + 4096,
                hi: base + 4096 + beat,
                resp,
            };
            for (round, want) in [(Some(fault), code), (None, 0)] {
                b.set_fault(round)?;
                match READ.iter().position(|&c| c == ch) {
                    Some(i) => b.start_read(i, ReadJob { desc, hold: 2 })?,
                    None => {
                        let data = vec![vec![0x5a5a_0000 + n as u32; beat as usize / 4]; 4];
                        b.start_write(&desc, &data)?;
                    }
                }
                b.run_to_idle(10_000)?;
                let got = b.dut.get(&format!("{ch}_error"));
                let what = if round.is_some() {
                    "after an error response"
                } else {
                    "on the start after it"
                };
                ensure!(
                    got == want,
                    "{ch}, AXI4 response {resp}: error code {got} {what}, expected {want} ({})",
                    error::describe(want)
                );
                let r = b.counters();
                let axi = r.axi.expect("an AXI4 port");
                ensure!(
                    axi.read_bursts + axi.write_bursts == 4,
                    "{ch}: {} bursts for four rows a page apart",
                    axi.read_bursts + axi.write_bursts
                );
                b.link.reset_stats();
            }
            n += 1;
        }
    }
    Ok(n)
}

/// The DMA's channels: its read channels, then O.
fn channels(d: &DmaConfig) -> Vec<&'static str> {
    READ[..d.read_channels()]
        .iter()
        .copied()
        .chain(["o"])
        .collect()
}

/// A K/V channel's move in a GLB round: 0 repeat its descriptor with `rows` rows, 1 take
/// the new job, 2 repeat after a flush.
type KvMove = (u8, u64, ReadJob);

/// A GLB scenario: rounds of K and V transfers (and Q beside them); from the second round on
/// each K/V channel repeats its descriptor with another row count (hits), takes a new one
/// (another tag: the region starts over), or repeats it after a flush.
#[derive(Clone, Debug)]
pub struct GlbScenario {
    first: [ReadJob; 2],
    /// Per later round: a Q job and the K and V channels' moves.
    rounds: Vec<(Option<ReadJob>, [KvMove; 2])>,
    latency: u32,
    bandwidth_div: usize,
    stall: f64,
    seed: u64,
}

fn glb_scenario(d: &DmaConfig) -> impl Strategy<Value = GlbScenario> {
    let beat = d.beat_bytes() as u64;
    let job = |l: &LandingConfig| {
        (
            desc(beat, l.row_beats as u64, l.rows as u64, 0, MEM as u64 / 2),
            0u32..12,
        )
            .prop_map(|(desc, hold)| ReadJob { desc, hold })
    };
    let kv = move |l: LandingConfig| (0u8..3, 1u64..=40, job(&l));
    (
        (job(&d.k), job(&d.v)),
        prop::collection::vec(
            (prop::option::weighted(0.5, job(&d.q)), (kv(d.k), kv(d.v))),
            1..4,
        ),
        prop_oneof![Just(1u32), 2u32..=30],
        prop::sample::select(vec![1usize, 2, 4]),
        prop::sample::select(vec![0.0, 0.3]),
        any::<u64>(),
    )
        .prop_map(
            |((k, v), rounds, latency, bandwidth_div, stall, seed)| GlbScenario {
                first: [k, v],
                rounds: rounds.into_iter().map(|(q, (k, v))| (q, [k, v])).collect(),
                latency,
                bandwidth_div,
                stall,
                seed,
            },
        )
}

/// The GLB's policy on the bench's side (`hdl::mem::glb`): per K/V region its tag and high-water
/// mark; a job's hits, fills and streamed beats.
#[derive(Clone, Copy, Default)]
struct RegionModel {
    tag: Option<(u64, u64, u64)>,
    filled: u64,
}

impl RegionModel {
    fn take(&mut self, d: &Desc, beat: u64, region: u64) -> [u64; 3] {
        let tag = (d.base, d.stride, d.row_bytes);
        if self.tag != Some(tag) {
            self.filled = 0;
        }
        self.tag = Some(tag);
        let (hit, fill, stream, mark) =
            hdl::mem::glb::take(d.rows * d.row_bytes / beat, self.filled, region);
        self.filled = mark;
        [hit, fill, stream]
    }
}

/// `cases` GLB scenarios: every landed beat compared with memory, the memory's reads equal to
/// the beats the policy sends to it, and the GLB's events (hits, fills, spills) equal to the
/// policy's; over AXI4 also the read bursts, from the addresses of the beats that miss.
/// Returns (scenarios, hit beats, conflict refusals).
pub fn glb_rounds(model: &Model, d: &DmaConfig, cases: u32, seed: u64) -> Result<[u64; 3]> {
    let g = d.glb.ok_or_else(|| anyhow::anyhow!("the DMA has no GLB"))?;
    let config = Config {
        cases,
        failure_persistence: None,
        max_shrink_iters: 100,
        ..Config::default()
    };
    let totals = std::cell::Cell::new([0u64; 3]);
    let beat = d.beat_bytes() as u64;
    let region = g.region_beats as u64;
    let result = super::seeds::run(config, seed, &glb_scenario(d), |s| {
        let e = |x: anyhow::Error| TestCaseError::fail(format!("{x:#}"));
        let mem = MemoryConfig {
            size: MEM,
            beat_bytes: beat as usize,
            latency: s.latency,
            bytes_per_cycle: (beat as usize / s.bandwidth_div).max(1),
            banks: 1,
            bank_busy: 1,
            stall_probability: s.stall,
            seed: s.seed,
        };
        let mut b = DmaBench::new(model, d, mem).map_err(e)?;
        b.mem.load_bytes(0, &pattern(s.seed)).map_err(e)?;
        let mut regions = [RegionModel::default(); 2];
        // Policy totals: hit, fill, stream beats; plus Q's beats.
        let mut want = [0u64; 3];
        let mut q_beats = 0;
        let mut bursts = 0;
        let mut jobs: [ReadJob; 2] = s.first;
        for round in 0..=s.rounds.len() {
            let mut q = None;
            if round > 0 {
                let (qj, kv) = &s.rounds[round - 1];
                q = *qj;
                let mut flush = false;
                for (c, (action, rows, fresh)) in kv.iter().enumerate() {
                    match action {
                        0 | 2 => {
                            let l = if c == 0 { d.k } else { d.v };
                            let max_rows = ((MEM as u64 / 2 - jobs[c].desc.base)
                                .saturating_sub(jobs[c].desc.row_bytes)
                                / jobs[c].desc.stride)
                                + 1;
                            jobs[c].desc.rows = (*rows).min(max_rows).max(1);
                            jobs[c].desc.block_rows = jobs[c].desc.block_rows.min(l.rows as u64);
                            flush |= *action == 2;
                        }
                        _ => jobs[c] = *fresh,
                    }
                }
                if flush {
                    b.flush_glb().map_err(e)?;
                    regions = [RegionModel::default(); 2];
                }
            }
            if let Some(qj) = q {
                b.start_read(0, qj).map_err(e)?;
                q_beats += qj.desc.rows * qj.desc.row_bytes / beat;
                bursts += expected_bursts(&qj.desc, beat, true);
            }
            for c in 0..2 {
                b.start_read(c + 1, jobs[c]).map_err(e)?;
                let t = regions[c].take(&jobs[c].desc, beat, region);
                bursts += expected_bursts_after(&jobs[c].desc, beat, true, t[0]);
                for k in 0..3 {
                    want[k] += t[k];
                }
            }
            b.run_to_idle(200_000).map_err(e)?;
        }
        let r = b.counters();
        let from_memory = q_beats + want[1] + want[2];
        if r.memory.reads != from_memory || r.read_beats != from_memory {
            return Err(TestCaseError::fail(format!(
                "memory served {} beats (DMA counted {}), the GLB policy needs {from_memory} \
                 ({} hit, {} filled, {} streamed, {q_beats} of Q)",
                r.memory.reads, r.read_beats, want[0], want[1], want[2]
            )));
        }
        if let Some(axi) = r.axi {
            if axi.read_bursts != bursts {
                return Err(TestCaseError::fail(format!(
                    "AXI4: {} read bursts, the beats that miss the GLB need {bursts}",
                    axi.read_bursts
                )));
            }
        }
        let [reads, fills, refused, spills] = b.glb_events().expect("a GLB");
        if [reads, fills, spills] != want {
            return Err(TestCaseError::fail(format!(
                "GLB events: {reads} hit beats, {fills} fills, {spills} spills; the policy \
                 says {want:?}"
            )));
        }
        let t = totals.get();
        totals.set([t[0] + 1, t[1] + reads, t[2] + refused]);
        Ok(())
    });
    super::outcome(result, |minimal| {
        format!("(minimal failing scenario: {minimal:#?})")
    })?;
    Ok(totals.get())
}

/// What a set of random scenarios did, summed.
#[derive(Clone, Copy, Debug, Default)]
pub struct Totals {
    pub scenarios: u64,
    pub beats: u64,
    pub cycles: u64,
    /// The AXI4 slave's statistics (AXI4 port only): bursts, beats that overtook an older
    /// burst's, cycles a VALID waited; the longest burst.
    pub axi: Option<AxiStats>,
}

/// `cases` random scenarios (proptest, fixed seed).
pub fn random_transfers(
    model: &Model,
    d: &DmaConfig,
    cases: u32,
    seed: u64,
) -> anyhow::Result<Totals> {
    let config = Config {
        cases,
        failure_persistence: None,
        max_shrink_iters: 200,
        ..Config::default()
    };
    let totals = std::cell::Cell::new(Totals::default());
    let result = super::seeds::run(config, seed, &scenario(d), |s| {
        let (beats, r) = run(model, d, &s).map_err(TestCaseError::fail)?;
        let t = totals.get();
        let axi = r.axi.map(|a| {
            let o = t.axi.unwrap_or_default();
            AxiStats {
                read_bursts: o.read_bursts + a.read_bursts,
                write_bursts: o.write_bursts + a.write_bursts,
                longest_burst: o.longest_burst.max(a.longest_burst),
                overtaking_beats: o.overtaking_beats + a.overtaking_beats,
                stalled: o.stalled + a.stalled,
            }
        });
        totals.set(Totals {
            scenarios: t.scenarios + 1,
            beats: t.beats + beats,
            cycles: t.cycles + r.cycles,
            axi,
        });
        Ok(())
    });
    super::outcome(result, |minimal| {
        format!("(minimal failing scenario: {minimal:#?})")
    })?;
    Ok(totals.get())
}
