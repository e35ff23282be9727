//! The testbench memory: a byte array behind a valid/ready request port with in-order read
//! responses, configurable latency, peak bandwidth, banks and seeded random back-pressure, and
//! counters of what crossed the port.
//!
//! Each cycle, in this order: [`Memory::response`] gives the read response presented this
//! cycle (if any); [`Memory::ready`] decides whether the request presented this cycle is taken;
//! after the clock edge, [`Memory::accept`] applies a taken request and [`Memory::end_cycle`]
//! retires the presented response and advances time. A read taken in cycle t is presented in
//! cycle t + latency. Writes are applied when taken (posted).

use std::collections::VecDeque;
use std::path::Path;

use anyhow::{bail, Context, Result};

use crate::dut::{Dut, PortId};
use crate::npy::{self, Tensor};

/// How the memory behaves.
#[derive(Clone, Debug, PartialEq)]
pub struct MemoryConfig {
    /// Bytes of storage (addresses 0 .. size).
    pub size: usize,
    /// Bytes per beat (the port width / 8).
    pub beat_bytes: usize,
    /// Cycles from taking a read to presenting its response (at least 1).
    pub latency: u32,
    /// Peak bandwidth in bytes per cycle (a token bucket; at most one beat per cycle).
    pub bytes_per_cycle: usize,
    /// Banks, interleaved by beat address.
    pub banks: usize,
    /// Cycles a bank stays busy after an access (1: a new access every cycle).
    pub bank_busy: u32,
    /// Probability that the port refuses a request in a cycle, whatever else holds.
    pub stall_probability: f64,
    pub seed: u64,
}

impl MemoryConfig {
    /// Latency `latency`, full bandwidth, one bank, no stalls.
    pub fn simple(size: usize, beat_bytes: usize, latency: u32) -> Self {
        MemoryConfig {
            size,
            beat_bytes,
            latency,
            bytes_per_cycle: beat_bytes,
            banks: 1,
            bank_busy: 1,
            stall_probability: 0.0,
            seed: 1,
        }
    }
}

/// What crossed the port.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MemoryStats {
    pub reads: u64,
    pub writes: u64,
    pub bytes_read: u64,
    pub bytes_written: u64,
    /// Cycles a request was presented and refused.
    pub refused: u64,
    pub cycles: u64,
}

/// The memory model.
pub struct Memory {
    cfg: MemoryConfig,
    data: Vec<u8>,
    in_flight: VecDeque<(u64, Vec<u32>)>,
    cycle: u64,
    credit: usize,
    bank_free: Vec<u64>,
    rng: u64,
    presented: bool,
    pub stats: MemoryStats,
}

impl Memory {
    pub fn new(cfg: MemoryConfig) -> Result<Self> {
        if cfg.latency == 0 {
            bail!("memory latency must be at least 1 cycle");
        }
        if cfg.beat_bytes == 0 || !cfg.beat_bytes.is_multiple_of(4) {
            bail!(
                "the beat must be a whole number of 32-bit words, not {} bytes",
                cfg.beat_bytes
            );
        }
        if cfg.bytes_per_cycle == 0 || cfg.banks == 0 || cfg.bank_busy == 0 {
            bail!("bandwidth, banks and bank busy time must be positive");
        }
        if !(0.0..1.0).contains(&cfg.stall_probability) {
            bail!("the stall probability must be in [0, 1)");
        }
        Ok(Memory {
            data: vec![0; cfg.size],
            bank_free: vec![0; cfg.banks],
            rng: cfg.seed | 1,
            credit: cfg.beat_bytes,
            cfg,
            in_flight: VecDeque::new(),
            cycle: 0,
            presented: false,
            stats: MemoryStats::default(),
        })
    }

    pub fn config(&self) -> &MemoryConfig {
        &self.cfg
    }

    /// The whole contents.
    pub fn bytes(&self) -> &[u8] {
        &self.data
    }

    /// Copies `bytes` to `addr`.
    pub fn load_bytes(&mut self, addr: usize, bytes: &[u8]) -> Result<()> {
        let end = addr
            .checked_add(bytes.len())
            .filter(|&e| e <= self.data.len());
        let Some(end) = end else {
            bail!(
                "{} bytes at {addr:#x} do not fit a memory of {} bytes",
                bytes.len(),
                self.data.len()
            );
        };
        self.data[addr..end].copy_from_slice(bytes);
        Ok(())
    }

    /// Stores a tensor (row-major, little-endian) at `addr`.
    pub fn load_tensor(&mut self, addr: usize, t: &Tensor) -> Result<()> {
        self.load_bytes(addr, &t.bytes())
    }

    /// Stores a `.npy` file's FP16 or FP32 array at `addr`; returns it.
    pub fn load_npy(&mut self, addr: usize, path: &Path) -> Result<Tensor> {
        let t = npy::read(path)?;
        self.load_tensor(addr, &t)?;
        Ok(t)
    }

    /// `len` bytes from `addr`.
    pub fn read_bytes(&self, addr: usize, len: usize) -> &[u8] {
        &self.data[addr..addr + len]
    }

    /// The beat of `bytes` bytes at `addr` as 32-bit words (the caller checked the range).
    pub fn beat_words(&self, addr: usize, bytes: usize) -> Vec<u32> {
        self.data[addr..addr + bytes]
            .chunks(4)
            .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect()
    }

    /// Writes a beat (32-bit words) at `addr`, only the bytes whose strobe bit (`strb`, packed
    /// in 32-bit words, bit i for byte i) is set.
    pub fn write_strobed(&mut self, addr: usize, words: &[u32], strb: &[u32]) -> Result<()> {
        let len = words.len() * 4;
        if addr + len > self.data.len() {
            bail!("a write of {len} bytes at {addr:#x} lies outside the memory");
        }
        for (i, w) in words.iter().enumerate() {
            for (k, b) in w.to_le_bytes().into_iter().enumerate() {
                let n = 4 * i + k;
                if strb[n / 32] >> (n % 32) & 1 == 1 {
                    self.data[addr + n] = b;
                }
            }
        }
        Ok(())
    }

    fn random(&mut self) -> f64 {
        (xorshift(&mut self.rng) >> 11) as f64 / (1u64 << 53) as f64
    }

    /// The read response presented this cycle, as 32-bit words.
    pub fn response(&mut self) -> Option<&[u32]> {
        let due = matches!(self.in_flight.front(), Some((t, _)) if *t <= self.cycle);
        self.presented = due;
        if due {
            self.in_flight.front().map(|(_, d)| d.as_slice())
        } else {
            None
        }
    }

    fn bank(&self, addr: u64) -> usize {
        ((addr / self.cfg.beat_bytes as u64) % self.cfg.banks as u64) as usize
    }

    /// Whether the request at `addr` presented this cycle (if any) is taken.
    pub fn ready(&mut self, request: Option<u64>) -> bool {
        let stall = self.cfg.stall_probability > 0.0 && self.random() < self.cfg.stall_probability;
        let Some(addr) = request else {
            return !stall;
        };
        let ok = !stall
            && self.credit >= self.cfg.beat_bytes
            && self.bank_free[self.bank(addr)] <= self.cycle;
        if !ok {
            self.stats.refused += 1;
        }
        ok
    }

    /// Applies a request taken this cycle. Fails on an address outside the memory or not aligned
    /// to the beat (the hardware must never present one).
    pub fn accept(&mut self, addr: u64, write: Option<&[u32]>) -> Result<()> {
        let beat = self.cfg.beat_bytes;
        let a = addr as usize;
        if !addr.is_multiple_of(beat as u64) || a + beat > self.data.len() {
            bail!(
                "request at {addr:#x} is misaligned or outside the {}-byte memory",
                self.data.len()
            );
        }
        self.credit -= beat;
        let bank = self.bank(addr);
        self.bank_free[bank] = self.cycle + self.cfg.bank_busy as u64;
        match write {
            Some(words) => {
                for (i, w) in words.iter().enumerate() {
                    self.data[a + 4 * i..a + 4 * i + 4].copy_from_slice(&w.to_le_bytes());
                }
                self.stats.writes += 1;
                self.stats.bytes_written += beat as u64;
            }
            None => {
                let words = self.data[a..a + beat]
                    .chunks(4)
                    .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                    .collect();
                self.in_flight
                    .push_back((self.cycle + self.cfg.latency as u64, words));
                self.stats.reads += 1;
                self.stats.bytes_read += beat as u64;
            }
        }
        Ok(())
    }

    /// Ends the cycle: retires the presented response, refills bandwidth credit.
    pub fn end_cycle(&mut self) {
        if self.presented {
            self.in_flight.pop_front();
            self.presented = false;
        }
        self.cycle += 1;
        self.stats.cycles += 1;
        self.credit = (self.credit + self.cfg.bytes_per_cycle).min(self.cfg.beat_bytes);
    }

    /// Reads taken and not yet presented.
    pub fn outstanding(&self) -> usize {
        self.in_flight.len()
    }
}

/// The memory-side ports of a design (`mem_req_valid`, `mem_req_ready`, `mem_req_addr`,
/// `mem_req_write`, `mem_req_wdata`, `mem_rsp_valid`, `mem_rsp_data`), connected to a
/// [`Memory`] one cycle at a time.
pub struct MemLink {
    req_valid: PortId,
    req_ready: PortId,
    req_addr: PortId,
    req_write: PortId,
    req_wdata: PortId,
    rsp_valid: PortId,
    rsp_data: PortId,
    idle_rsp: Vec<u32>,
}

impl MemLink {
    pub fn new(dut: &Dut) -> Result<Self> {
        let p = |n: &str| dut.port(&format!("mem_{n}"));
        let rsp_data = p("rsp_data")?;
        Ok(MemLink {
            req_valid: p("req_valid")?,
            req_ready: p("req_ready")?,
            req_addr: p("req_addr")?,
            req_write: p("req_write")?,
            req_wdata: p("req_wdata")?,
            rsp_valid: p("rsp_valid")?,
            idle_rsp: vec![0; dut.width(rsp_data).div_ceil(32) as usize],
            rsp_data,
        })
    }

    /// Before the clock edge: presents this cycle's read response (if any).
    pub fn present(&self, dut: &mut Dut, mem: &mut Memory) {
        match mem.response() {
            Some(w) => {
                dut.set_id(self.rsp_valid, 1);
                dut.set_words_id(self.rsp_data, w);
            }
            None => {
                dut.set_id(self.rsp_valid, 0);
                dut.set_words_id(self.rsp_data, &self.idle_rsp);
            }
        }
    }

    /// The request handshake, the clock edge, and the memory's side of the edge. Fails if
    /// the design presents a request the memory cannot take (misaligned or out of range).
    pub fn edge(&self, dut: &mut Dut, mem: &mut Memory) -> Result<()> {
        let valid = dut.get_id(self.req_valid) == 1;
        let addr = if valid { dut.get_id(self.req_addr) } else { 0 };
        let ready = mem.ready(valid.then_some(addr));
        dut.set_id(self.req_ready, ready as u64);
        let wdata = (valid && ready && dut.get_id(self.req_write) == 1)
            .then(|| dut.get_words_id(self.req_wdata));
        dut.tick();
        if valid && ready {
            mem.accept(addr, wdata.as_deref())
                .with_context(|| format!("cycle {}", dut.cycles()))?;
        }
        mem.end_cycle();
        Ok(())
    }
}

/// xorshift64 (13, 7, 17; the models' `kernels::patterns::Rng`): the next value of `state`,
/// which must not be 0. The memory's and the AXI port's seeded back-pressure draw from it.
pub(crate) fn xorshift(state: &mut u64) -> u64 {
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    *state
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Presents a read request every cycle for `cycles` cycles; returns the cycles in which
    /// requests were taken and responses presented.
    fn drive(mem: &mut Memory, cycles: u64, addr: impl Fn(u64) -> u64) -> (Vec<u64>, Vec<u64>) {
        let (mut taken, mut answered) = (vec![], vec![]);
        for c in 0..cycles {
            if mem.response().is_some() {
                answered.push(c);
            }
            let a = addr(c);
            if mem.ready(Some(a)) {
                mem.accept(a, None).unwrap();
                taken.push(c);
            }
            mem.end_cycle();
        }
        (taken, answered)
    }

    #[test]
    fn latency_and_in_order_data() {
        let mut mem = Memory::new(MemoryConfig::simple(1024, 32, 5)).unwrap();
        let bytes: Vec<u8> = (0..=255).collect();
        mem.load_bytes(256, &bytes).unwrap();
        let mut seen = vec![];
        for c in 0..20u64 {
            if let Some(w) = mem.response() {
                seen.push((c, w[0]));
            }
            if c < 3 && mem.ready(Some(256 + 32 * c)) {
                mem.accept(256 + 32 * c, None).unwrap();
            }
            mem.end_cycle();
        }
        let first = |k: u32| {
            u32::from_le_bytes([
                4 * 8 * k as u8,
                4 * 8 * k as u8 + 1,
                4 * 8 * k as u8 + 2,
                4 * 8 * k as u8 + 3,
            ])
        };
        assert_eq!(seen, vec![(5, first(0)), (6, first(1)), (7, first(2))]);
        assert_eq!(mem.stats.reads, 3);
        assert_eq!(mem.stats.bytes_read, 96);
    }

    #[test]
    fn bandwidth_banks_and_backpressure_limit_the_rate() {
        let rate = |cfg: MemoryConfig, stride: u64| {
            let mut mem = Memory::new(cfg).unwrap();
            let (taken, _) = drive(&mut mem, 1000, |c| (c * stride) % 512);
            taken.len()
        };
        let base = MemoryConfig::simple(1024, 32, 3);
        assert_eq!(
            rate(base.clone(), 32),
            1000,
            "full bandwidth: a beat per cycle"
        );
        assert_eq!(
            rate(
                MemoryConfig {
                    bytes_per_cycle: 16,
                    ..base.clone()
                },
                32
            ),
            500
        );
        assert_eq!(
            rate(
                MemoryConfig {
                    bytes_per_cycle: 8,
                    ..base.clone()
                },
                32
            ),
            250
        );
        // One bank busy for 2 cycles halves the rate; two interleaved banks restore it.
        assert_eq!(
            rate(
                MemoryConfig {
                    bank_busy: 2,
                    ..base.clone()
                },
                32
            ),
            500
        );
        assert_eq!(
            rate(
                MemoryConfig {
                    bank_busy: 2,
                    banks: 2,
                    ..base.clone()
                },
                32
            ),
            1000
        );
        // Same bank every time (stride of two beats over two banks): half again.
        assert_eq!(
            rate(
                MemoryConfig {
                    bank_busy: 2,
                    banks: 2,
                    ..base.clone()
                },
                64
            ),
            500
        );
        let stalled = rate(
            MemoryConfig {
                stall_probability: 0.5,
                ..base.clone()
            },
            32,
        );
        assert!((400..600).contains(&stalled), "{stalled}");
        assert_eq!(
            stalled,
            rate(
                MemoryConfig {
                    stall_probability: 0.5,
                    ..base
                },
                32
            ),
            "seeded: reproducible"
        );
    }

    #[test]
    fn writes_and_bad_requests() {
        let mut mem = Memory::new(MemoryConfig::simple(256, 8, 1)).unwrap();
        assert!(mem.ready(Some(8)));
        mem.accept(8, Some(&[0x0403_0201, 0x0807_0605])).unwrap();
        mem.end_cycle();
        assert_eq!(mem.read_bytes(8, 8), &[1, 2, 3, 4, 5, 6, 7, 8]);
        assert_eq!(mem.stats.writes, 1);
        assert!(mem.accept(4, None).is_err(), "misaligned");
        assert!(mem.accept(256, None).is_err(), "outside");
        assert!(mem.load_bytes(250, &[0; 8]).is_err());
        assert!(Memory::new(MemoryConfig {
            latency: 0,
            ..MemoryConfig::simple(64, 8, 1)
        })
        .is_err());
    }
}
