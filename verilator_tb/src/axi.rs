//! The testbench's AXI4 slave: a [`Memory`]'s bytes behind the `m_axi_*` ports of a design's
//! AXI4 master, with seeded random timing and a protocol checker.
//!
//! **Timing.** Every ready the slave drives (`arready`, `awready`, `wready`) is withheld with
//! probability `stall_probability` each cycle, and so is every response it could present
//! (`rvalid`, `bvalid`). A read burst's first beat is due `latency` cycles after its AR, its
//! beats follow one a cycle; a write response is due `latency` cycles after the burst's last
//! W beat (and its AW). With `reorder`, each cycle the R beat comes from a random ID among those
//! with a burst due, so bursts of different IDs interleave beat by beat and overtake each
//! other, as AXI4 allows; bursts of one ID stay in order. Write data may arrive before its AW.
//!
//! **Checks** (each fails the run with the cycle and the rule): a VALID stays high until its
//! READY, with its payload unchanged (AR, AW, W); INCR bursts only, of the port's full beat
//! size, aligned, inside the memory, never across a 4 KiB boundary; WLAST on exactly the last
//! beat of its burst; no response channel without READY held (the slave holds R and B itself).
//!
//! **Faults.** A burst that touches `fault` gets its response code on every R beat (reads) or
//! its B (writes), to test how a master reports SLVERR and DECERR.

use std::collections::VecDeque;

use anyhow::{bail, ensure, Result};

use crate::dut::{Dut, PortId};
use crate::memory::Memory;

/// A response code for every burst that touches bytes [lo, hi).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AxiFault {
    pub lo: u64,
    pub hi: u64,
    /// 2 SLVERR, 3 DECERR.
    pub resp: u64,
}

/// How the slave behaves.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AxiTiming {
    /// Cycles from an AR to its first R beat, and from a write burst's end to its B (≥ 1).
    pub latency: u32,
    /// Probability each cycle that a ready or a response the slave could give is withheld.
    pub stall_probability: f64,
    /// Answer read bursts of different IDs in random order, interleaved beat by beat.
    pub reorder: bool,
    pub seed: u64,
    pub fault: Option<AxiFault>,
}

impl Default for AxiTiming {
    fn default() -> Self {
        AxiTiming {
            latency: 20,
            stall_probability: 0.0,
            reorder: false,
            seed: 1,
            fault: None,
        }
    }
}

/// The INCR bursts of `beat`-byte beats a master needs for the `bytes` bytes from `at` if it
/// makes each as long as AXI4 allows: at most 256 beats and never across a 4 KiB boundary.
/// Computed from the addresses alone, as an expected value for a master's burst count.
pub fn bursts_of(mut at: u64, bytes: u64, beat: u64) -> u64 {
    let (end, mut n) = (at + bytes, 0);
    while at < end {
        let page_end = (at / 4096 + 1) * 4096;
        at = end.min(page_end).min(at + 256 * beat);
        n += 1;
    }
    n
}

/// A burst the slave has taken: ID, address, beats, when its first response is due.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Burst {
    id: u64,
    addr: u64,
    beats: u64,
    due: u64,
    /// Reads: beats already sent.
    sent: u64,
}

/// What the slave counts.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct AxiStats {
    pub read_bursts: u64,
    pub write_bursts: u64,
    /// The longest burst taken, in beats.
    pub longest_burst: u64,
    /// R beats that came from a burst other than the oldest one due (reordering exercised).
    pub overtaking_beats: u64,
    /// Cycles a VALID waited for a READY the slave withheld.
    pub stalled: u64,
}

/// A channel's VALID/READY with the payload it must keep while waiting.
#[derive(Clone, Default)]
struct Held {
    pending: bool,
    payload: Vec<u64>,
}

impl Held {
    /// Checks this cycle's presentation against the last one and records whether it waits.
    fn check(&mut self, ch: &str, valid: bool, ready: bool, payload: Vec<u64>) -> Result<()> {
        if self.pending {
            ensure!(
                valid,
                "AXI4 protocol: {ch}VALID fell before {ch}READY (a VALID must stay high until \
                 its handshake)"
            );
            ensure!(
                payload == self.payload,
                "AXI4 protocol: the {ch} payload changed while {ch}VALID waited for {ch}READY"
            );
        }
        self.pending = valid && !ready;
        self.payload = payload;
        Ok(())
    }
}

/// What the port showed in one cycle, before the clock edge.
struct Seen {
    ar: Vec<u64>,
    aw: Vec<u64>,
    arready: bool,
    awready: bool,
    wready: bool,
    wvalid: bool,
    wdata: Vec<u32>,
    wstrb: Vec<u32>,
    wlast: bool,
    rready: bool,
    bready: bool,
}

/// The ports of an AXI4 master named `m_axi_*`.
struct Ports {
    ar: [PortId; 6],
    arready: PortId,
    aw: [PortId; 6],
    awready: PortId,
    wvalid: PortId,
    wdata: PortId,
    wstrb: PortId,
    wlast: PortId,
    wready: PortId,
    rvalid: PortId,
    rid: PortId,
    rdata: PortId,
    rresp: PortId,
    rlast: PortId,
    rready: PortId,
    bvalid: PortId,
    bid: PortId,
    bresp: PortId,
    bready: PortId,
}

/// The slave, connected to a design's `m_axi_*` ports one cycle at a time.
pub struct AxiLink {
    ports: Ports,
    timing: AxiTiming,
    beat_bytes: u64,
    rng: u64,
    cycle: u64,
    /// Read bursts in the order taken.
    reads: VecDeque<Burst>,
    /// The read burst (index into `reads`) whose beat is presented, held until RREADY.
    r_cur: Option<usize>,
    /// Write bursts whose AW was taken, in order, and the W beats taken ahead of their AW.
    aws: VecDeque<Burst>,
    w_beats: VecDeque<(Vec<u32>, Vec<u32>, bool)>,
    /// Write responses (ID, due, code) in order; the front one is presented until BREADY.
    bs: VecDeque<(u64, u64, u64)>,
    b_cur: bool,
    held: [Held; 3],
    idle_data: Vec<u32>,
    pub stats: AxiStats,
}

impl AxiLink {
    pub fn new(dut: &Dut, timing: AxiTiming, beat_bytes: usize) -> Result<Self> {
        ensure!(
            timing.latency >= 1,
            "the AXI4 slave's latency must be at least 1 cycle"
        );
        ensure!(
            (0.0..0.95).contains(&timing.stall_probability),
            "the AXI4 slave's stall probability {} is out of range: allowed [0, 0.95)",
            timing.stall_probability
        );
        let p = |n: &str| dut.port(&format!("m_axi_{n}"));
        let six = |x: &str| -> Result<[PortId; 6]> {
            Ok([
                p(&format!("{x}valid"))?,
                p(&format!("{x}id"))?,
                p(&format!("{x}addr"))?,
                p(&format!("{x}len"))?,
                p(&format!("{x}size"))?,
                p(&format!("{x}burst"))?,
            ])
        };
        let rdata = p("rdata")?;
        let ports = Ports {
            ar: six("ar")?,
            arready: p("arready")?,
            aw: six("aw")?,
            awready: p("awready")?,
            wvalid: p("wvalid")?,
            wdata: p("wdata")?,
            wstrb: p("wstrb")?,
            wlast: p("wlast")?,
            wready: p("wready")?,
            rvalid: p("rvalid")?,
            rid: p("rid")?,
            rdata,
            rresp: p("rresp")?,
            rlast: p("rlast")?,
            rready: p("rready")?,
            bvalid: p("bvalid")?,
            bid: p("bid")?,
            bresp: p("bresp")?,
            bready: p("bready")?,
        };
        Ok(AxiLink {
            idle_data: vec![0; dut.width(rdata).div_ceil(32) as usize],
            ports,
            timing,
            beat_bytes: beat_bytes as u64,
            rng: timing.seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1,
            cycle: 0,
            reads: VecDeque::new(),
            r_cur: None,
            aws: VecDeque::new(),
            w_beats: VecDeque::new(),
            bs: VecDeque::new(),
            b_cur: false,
            held: Default::default(),
            stats: AxiStats::default(),
        })
    }

    fn random(&mut self) -> u64 {
        crate::memory::xorshift(&mut self.rng)
    }

    /// Whether to withhold a ready or a response this cycle.
    fn stall(&mut self) -> bool {
        let p = self.timing.stall_probability;
        p > 0.0 && (self.random() >> 11) as f64 / (1u64 << 53) as f64 > 1.0 - p
    }

    /// The response code of a burst at `addr` of `beats` beats.
    fn resp(&self, addr: u64, beats: u64) -> u64 {
        match self.timing.fault {
            Some(f) if addr < f.hi && addr + beats * self.beat_bytes > f.lo => f.resp,
            _ => 0,
        }
    }

    /// Starts the statistics afresh (a new run on the same slave).
    pub fn reset_stats(&mut self) {
        self.stats = AxiStats::default();
    }

    /// Sets the error responses of the bursts taken from now on.
    pub fn set_fault(&mut self, fault: Option<AxiFault>) {
        self.timing.fault = fault;
    }

    /// Reads and writes nothing in flight: every burst answered.
    pub fn idle(&self) -> bool {
        self.reads.is_empty()
            && self.aws.is_empty()
            && self.w_beats.is_empty()
            && self.bs.is_empty()
    }

    /// Before the clock edge: presents this cycle's readies and responses.
    pub fn present(&mut self, dut: &mut Dut, mem: &Memory) {
        let ready: Vec<bool> = (0..3).map(|_| !self.stall()).collect();
        dut.set_id(self.ports.arready, ready[0] as u64);
        dut.set_id(self.ports.awready, ready[1] as u64);
        dut.set_id(self.ports.wready, ready[2] as u64);
        // R: the held beat, or a new one from a burst that is due.
        if self.r_cur.is_none() && !self.stall() {
            let due: Vec<usize> = (0..self.reads.len())
                .filter(|&i| {
                    let b = &self.reads[i];
                    b.due <= self.cycle && !self.reads.iter().take(i).any(|o| o.id == b.id)
                })
                .collect();
            if !due.is_empty() {
                let pick = if self.timing.reorder {
                    due[(self.random() % due.len() as u64) as usize]
                } else {
                    due[0]
                };
                if pick != due[0] {
                    self.stats.overtaking_beats += 1;
                }
                self.r_cur = Some(pick);
            }
        }
        match self.r_cur {
            Some(i) => {
                let b = self.reads[i];
                let addr = b.addr + b.sent * self.beat_bytes;
                let words = mem.beat_words(addr as usize, self.beat_bytes as usize);
                dut.set_id(self.ports.rvalid, 1);
                dut.set_id(self.ports.rid, b.id);
                dut.set_words_id(self.ports.rdata, &words);
                dut.set_id(self.ports.rresp, self.resp(b.addr, b.beats));
                dut.set_id(self.ports.rlast, (b.sent + 1 == b.beats) as u64);
            }
            None => {
                dut.set_id(self.ports.rvalid, 0);
                dut.set_words_id(self.ports.rdata, &self.idle_data);
                dut.set_id(self.ports.rlast, 0);
            }
        }
        // B: the front response once due.
        if !self.b_cur {
            let due = matches!(self.bs.front(), Some(&(_, t, _)) if t <= self.cycle);
            self.b_cur = due && !self.stall();
        }
        match (self.b_cur, self.bs.front()) {
            (true, Some(&(id, _, resp))) => {
                dut.set_id(self.ports.bvalid, 1);
                dut.set_id(self.ports.bid, id);
                dut.set_id(self.ports.bresp, resp);
            }
            _ => dut.set_id(self.ports.bvalid, 0),
        }
    }

    /// Reads an address channel's VALID and payload (valid, id, addr, len, size, burst).
    fn address(dut: &mut Dut, ports: &[PortId; 6]) -> Vec<u64> {
        ports.iter().map(|&p| dut.get_id(p)).collect()
    }

    /// Checks a burst an address channel just handed over.
    fn burst(&self, ch: &str, a: &[u64], mem: &Memory) -> Result<Burst> {
        let (id, addr, len, size, kind) = (a[1], a[2], a[3], a[4], a[5]);
        let beats = len + 1;
        ensure!(
            kind == 1,
            "{ch} burst at {addr:#x}: {ch}BURST = {kind}, the DMA issues INCR (1) only"
        );
        ensure!(
            1u64 << size == self.beat_bytes,
            "{ch} burst at {addr:#x}: {ch}SIZE = {size} is not the port's {}-byte beat",
            self.beat_bytes
        );
        ensure!(
            addr.is_multiple_of(self.beat_bytes),
            "{ch} burst at {addr:#x} is not aligned to the beat"
        );
        let end = addr + beats * self.beat_bytes;
        ensure!(
            addr / 4096 == (end - 1) / 4096,
            "AXI4 protocol: the {ch} burst at {addr:#x} of {beats} beats crosses a 4 KiB \
             boundary"
        );
        ensure!(
            end as usize <= mem.bytes().len(),
            "{ch} burst at {addr:#x} of {beats} beats lies outside the {}-byte memory",
            mem.bytes().len()
        );
        Ok(Burst {
            id,
            addr,
            beats,
            due: self.cycle + self.timing.latency as u64,
            sent: 0,
        })
    }

    /// The handshakes of this cycle, the clock edge, then the protocol checks (so that an RTL
    /// assertion on the same cycle reports first). Fails on a protocol violation or a burst the
    /// memory cannot serve.
    pub fn edge(&mut self, dut: &mut Dut, mem: &mut Memory) -> Result<()> {
        let cycle = dut.cycles();
        let seen = self.sample(dut);
        dut.tick();
        self.take(seen, mem)
            .map_err(|e| e.context(format!("cycle {cycle}")))?;
        self.cycle += 1;
        mem.stats.cycles += 1;
        Ok(())
    }

    /// What the port shows this cycle.
    fn sample(&self, dut: &mut Dut) -> Seen {
        let p = &self.ports;
        let wvalid = dut.get_id(p.wvalid) == 1;
        let (wdata, wstrb, wlast) = if wvalid {
            (
                dut.get_words_id(p.wdata),
                dut.get_words_id(p.wstrb),
                dut.get_id(p.wlast) == 1,
            )
        } else {
            (vec![], vec![], false)
        };
        Seen {
            ar: Self::address(dut, &p.ar),
            aw: Self::address(dut, &p.aw),
            arready: dut.get_id(p.arready) == 1,
            awready: dut.get_id(p.awready) == 1,
            wready: dut.get_id(p.wready) == 1,
            wvalid,
            wdata,
            wstrb,
            wlast,
            rready: dut.get_id(p.rready) == 1,
            bready: dut.get_id(p.bready) == 1,
        }
    }

    fn take(&mut self, s: Seen, mem: &mut Memory) -> Result<()> {
        let (arv, awv) = (s.ar[0] == 1, s.aw[0] == 1);
        self.held[0].check("AR", arv, s.arready, s.ar.clone())?;
        self.held[1].check("AW", awv, s.awready, s.aw.clone())?;
        let mut w_payload: Vec<u64> = s.wdata.iter().chain(&s.wstrb).map(|&x| x as u64).collect();
        w_payload.push(s.wlast as u64);
        self.held[2].check("W", s.wvalid, s.wready, w_payload)?;
        self.stats.stalled += [(arv, s.arready), (awv, s.awready), (s.wvalid, s.wready)]
            .iter()
            .filter(|(v, r)| *v && !*r)
            .count() as u64;
        if arv && s.arready {
            let b = self.burst("AR", &s.ar, mem)?;
            self.stats.read_bursts += 1;
            self.stats.longest_burst = self.stats.longest_burst.max(b.beats);
            self.reads.push_back(b);
        }
        if awv && s.awready {
            let b = self.burst("AW", &s.aw, mem)?;
            self.stats.write_bursts += 1;
            self.stats.longest_burst = self.stats.longest_burst.max(b.beats);
            self.aws.push_back(b);
        }
        if s.wvalid && s.wready {
            self.w_beats.push_back((s.wdata, s.wstrb, s.wlast));
        }
        self.complete_writes(mem)?;
        // R handshake.
        if let Some(i) = self.r_cur {
            if s.rready {
                let b = &mut self.reads[i];
                b.sent += 1;
                mem.stats.reads += 1;
                mem.stats.bytes_read += self.beat_bytes;
                if b.sent == b.beats {
                    self.reads.remove(i);
                }
                self.r_cur = None;
            }
        }
        // B handshake.
        if self.b_cur && s.bready {
            self.bs.pop_front();
            self.b_cur = false;
        }
        Ok(())
    }

    /// Writes every burst whose AW and W beats have all arrived; schedules its B. W beats
    /// are matched to AWs in order; WLAST must mark exactly each burst's last beat.
    fn complete_writes(&mut self, mem: &mut Memory) -> Result<()> {
        while let Some(&b) = self.aws.front() {
            let n = b.beats as usize;
            let have = self.w_beats.len().min(n);
            if let Some(i) = self.w_beats.iter().take(have).position(|w| w.2) {
                ensure!(
                    i + 1 == n,
                    "AXI4 protocol: WLAST on beat {} of the {n}-beat write burst at {:#x}",
                    i + 1,
                    b.addr
                );
            }
            if have < n {
                return Ok(());
            }
            for k in 0..n {
                let (data, strb, _) = self.w_beats.pop_front().expect("counted above");
                let addr = (b.addr + k as u64 * self.beat_bytes) as usize;
                mem.write_strobed(addr, &data, &strb)?;
                mem.stats.writes += 1;
                mem.stats.bytes_written += self.beat_bytes;
            }
            self.aws.pop_front();
            let due = self.cycle + self.timing.latency as u64;
            self.bs.push_back((b.id, due, self.resp(b.addr, b.beats)));
        }
        if self.w_beats.len() > 256 {
            bail!("AXI4 protocol: more than 256 W beats without their AW or WLAST");
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::bursts_of;

    #[test]
    fn bursts_split_at_256_beats_and_4_kib() {
        assert_eq!(bursts_of(0, 0, 8), 0);
        assert_eq!(bursts_of(0, 8, 8), 1);
        // 8-byte beats: 256 beats are 2 KiB, so a page holds two full bursts.
        assert_eq!(bursts_of(0, 4096, 8), 2);
        assert_eq!(bursts_of(0, 4096 + 8, 8), 3);
        // Two beats on either side of a page boundary.
        assert_eq!(bursts_of(4096 - 16, 32, 8), 2);
        // 64-byte beats: a page is 64 beats, the page limit comes first.
        assert_eq!(bursts_of(64, 3 * 4096, 64), 4);
    }
}
