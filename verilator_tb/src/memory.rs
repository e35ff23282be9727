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

use anyhow::{bail, Result};

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

    fn random(&mut self) -> f64 {
        self.rng ^= self.rng << 13;
        self.rng ^= self.rng >> 7;
        self.rng ^= self.rng << 17;
        (self.rng >> 11) as f64 / (1u64 << 53) as f64
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
