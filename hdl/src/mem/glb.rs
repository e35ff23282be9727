//! The global buffer (GLB): a banked SRAM level between the DMA's K/V channels and the memory
//! port that keeps each K/V head on chip, so that every Q tile after the first reads its keys
//! and values from SRAM instead of DRAM (docs/glb.md).
//!
//! **What it holds.** K and V each own half of it, a region of `region_beats` memory beats.
//! A region is tagged by the descriptor that filled it (base, stride, row bytes), and a
//! high-water mark `filled` says how many beats of the walk, from the descriptor's first
//! beat, it holds. Every K/V descriptor of one K/V head walks the same rows from key 0 (only
//! the row count grows, under a causal mask), so a beat's position in the walk is its word in
//! the region: no per-line tags.
//!
//! **Policy.** A beat below `filled` is a hit: the GLB serves it (registered read, landing one
//! cycle later) and it never reaches the memory port. Any other beat is read from memory; if
//! it lies inside the region its response also fills the GLB, else it streams past (a spill:
//! the head's K or V does not fit). So the first `region_beats` of each K/V head stay pinned
//! while the head is in use, and the rest streams: on the core's loop order (every tile sweeps
//! the same keys) a pinned prefix serves the most any buffer of that size can, where LRU or
//! FIFO serve nothing on a sweep longer than the buffer. A descriptor with another tag
//! restarts the region; `flush` (every launch) and an AXI4 error on a fill invalidate it.
//!
//! **Banks.** `groups` bank groups of `slices` banks each, side by side across the memory
//! beat (`word_bits` each). Word i of K is in group i mod G, row i / G; V's word i in group
//! (i + G/2) mod G, row `bank_words`/2 + i / G. Per cycle there are at most three requests: a
//! fill (a memory response, which cannot wait) and the K and V hit reads. A fill always wins
//! its group (with one port per bank; two-port banks read and write at once); K and V in the
//! same group take turns (the loser of the last conflict goes first). A refused hit retries the
//! next cycle and counts as a conflict stall.

use anyhow::{ensure, Result};
use serde::{Deserialize, Serialize};

use crate::{addr_bits, interface};

/// Where the GLB sits: stacked over the array (its bits cross a vertical bond) or beside it
/// (they travel on-chip wire). Pricing only: the RTL is the same.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum GlbPlacement {
    #[default]
    Stacked,
    Planar,
}

impl GlbPlacement {
    pub fn name(self) -> &'static str {
        match self {
            GlbPlacement::Stacked => "stacked",
            GlbPlacement::Planar => "planar",
        }
    }
}

impl std::fmt::Display for GlbPlacement {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// The GLB's knobs, as a configuration gives them (`glb_bytes`, `glb_banks`, ...).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct GlbParams {
    /// Capacity in bytes; 0: no GLB (every tile reads K and V from memory).
    pub bytes: u64,
    /// SRAM banks (a power of two).
    pub banks: u32,
    /// Bits per bank word; 0: the memory port's width.
    pub word_bits: u32,
    /// Ports per bank: 1 (one shared read/write port) or 2 (one read, one write).
    pub ports: u32,
    /// Emit the banks as memory-macro blackboxes.
    pub blackbox: bool,
    /// Stacked or planar (pricing).
    pub placement: GlbPlacement,
    /// Planar: mm of wire between the GLB and the array; 0: derived from the macros' area.
    pub wire_mm: f64,
    /// Stacked: spare lanes in each group of `spare_group` lanes of the bond's bundles (each
    /// bank group's lanes up and its read data down), with the link self-test and
    /// shifted-lane repair (`crate::link`). 0: no spares, no test.
    pub spares: u32,
    /// Lanes that share a group's spares.
    pub spare_group: u32,
}

impl Default for GlbParams {
    fn default() -> Self {
        GlbParams {
            bytes: 0,
            banks: 16,
            word_bits: 0,
            ports: 1,
            // A GLB is megabytes: an SRAM compiler's macros, not synthesized flip-flops
            // (simulation always uses the behaviour).
            blackbox: true,
            placement: GlbPlacement::Stacked,
            wire_mm: 0.0,
            spares: 0,
            spare_group: crate::variants::SPARE_GROUP,
        }
    }
}

/// The GLB region of unfused's scratch (S and P) in [`GlbConfig::place`].
pub const SCRATCH: usize = 2;

/// Each region's group offset in quarters of the group count: K 0, V 2, the scratch 1.
const REGION_GROUP_QUARTERS: [u64; 3] = [0, 2, 1];

/// The largest GLB regflash builds (a region's beats must fit 32 bits).
pub const MAX_GLB_BYTES: u64 = 1 << 32;

/// The GLB as the DMA builds it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GlbConfig {
    /// Bank groups (a power of two): a memory beat lives in one group.
    pub groups: u32,
    /// Banks per group, side by side across the beat.
    pub slices: u32,
    /// Words per bank (a power of two, at least 2).
    pub bank_words: u32,
    /// Bits per bank word (`slices * word_bits` is the memory port's width).
    pub word_bits: u32,
    /// 1 or 2 ports per bank.
    pub ports: u32,
    pub blackbox: bool,
    /// Beats each of K and V may keep: whole K/V block pairs.
    pub region_beats: u32,
    /// unfused: beats of the scratch region's prefix the GLB holds (its upper half); 0: no
    /// scratch region (K and V own half each).
    pub scratch_beats: u32,
    /// Stacked with spare lanes: the bond's spares (None: the banks wired as before).
    pub bond: Option<crate::variants::Spares>,
}

impl GlbConfig {
    /// The bank's SRAM configuration.
    pub fn bank(&self) -> crate::mem::sram::SramConfig {
        crate::mem::sram::SramConfig {
            depth: self.bank_words,
            width: self.word_bits,
            ports: self.ports,
            blackbox: self.blackbox,
        }
    }

    pub fn banks(&self) -> u32 {
        self.groups * self.slices
    }

    /// Bits of a group index.
    pub fn group_bits(&self) -> u32 {
        self.groups.trailing_zeros()
    }

    /// Bits of the per-bank counter window's select: a group index (at least 1 bit).
    pub fn sel_bits(&self) -> u32 {
        self.group_bits().max(1)
    }

    /// Bits of a beat counter that reaches `region_beats`.
    pub fn mark_bits(&self) -> u32 {
        crate::bits_for(self.region_beats as u64)
    }

    /// The bond's lanes of one bank group: up (write enable, address and data, read enable
    /// and address) and down (read data).
    pub fn bond_group_lanes(&self) -> (u32, u32) {
        let rb = row_bits(self);
        let data = self.slices * self.word_bits;
        (2 + 2 * rb + data, data)
    }

    /// With spare lanes on the bond: its two bundles, each as one bank group's shape (a
    /// `vlink` per group). Empty without spares.
    pub fn bond_bundles(&self) -> Vec<(crate::link::Bundle, kernels::link::Geometry)> {
        use crate::link::Bundle;
        let Some(sp) = self.bond else {
            return vec![];
        };
        let (up, down) = self.bond_group_lanes();
        [(Bundle::GlbUp, up), (Bundle::GlbDown, down)]
            .into_iter()
            .map(|(b, lanes)| {
                let g = kernels::link::Geometry {
                    lanes,
                    group: sp.group,
                    spares: sp.spares,
                };
                (b, g)
            })
            .collect()
    }

    /// Bits of the bond's failed-lane count (every bank group's physical lanes up and down).
    pub fn bond_count_bits(&self) -> u32 {
        let lanes: u32 = self.bond_bundles().iter().map(|(_, g)| g.physical()).sum();
        crate::link::count_bits(self.groups * lanes)
    }

    /// The name suffix of a DMA with this GLB.
    pub fn suffix(&self) -> String {
        format!(
            "_glb{}x{}d{}w{}p{}r{}{}",
            self.groups,
            self.slices,
            self.bank_words,
            self.word_bits,
            self.ports,
            self.region_beats,
            if self.blackbox { "m" } else { "" }
        ) + &if self.scratch_beats > 0 {
            format!("s{}", self.scratch_beats)
        } else {
            String::new()
        } + &match self.bond {
            Some(b) => format!("_bond{}g{}", b.spares, b.group),
            None => String::new(),
        }
    }

    /// Words per bank a K/V region may use: half the bank, a quarter with a scratch region.
    pub fn kv_rows(&self) -> u32 {
        self.bank_words / if self.scratch_beats > 0 { 4 } else { 2 }
    }

    /// The block-level checks.
    pub fn validate(&self, width: u32) -> Result<()> {
        ensure!(
            self.groups.is_power_of_two()
                && self.slices.is_power_of_two()
                && self.slices * self.word_bits == width,
            "the GLB's {} groups of {} banks of {} bits do not make a {width}-bit beat",
            self.groups,
            self.slices,
            self.word_bits
        );
        ensure!(
            self.bank_words.is_power_of_two() && self.bank_words >= 2,
            "a GLB bank of {} words is not a power of two of at least 2",
            self.bank_words
        );
        ensure!(
            self.region_beats >= 1 && self.region_beats.div_ceil(self.groups) <= self.kv_rows(),
            "the GLB's K and V regions of {} beats do not fit {} groups of {} words",
            self.region_beats,
            self.groups,
            self.bank_words
        );
        ensure!(
            self.scratch_beats == 0
                || (self.bank_words >= 4
                    && self.scratch_beats as u64
                        == self.groups as u64 * self.bank_words as u64 / 2),
            "the GLB's scratch region of {} beats is not the upper half of {} groups of {} words",
            self.scratch_beats,
            self.groups,
            self.bank_words
        );
        ensure!(
            self.ports == 1 || self.ports == 2,
            "a GLB bank has 1 or 2 ports"
        );
        Ok(())
    }

    /// Where word `i` of region `c` (0: K, 1: V, 2: unfused's scratch) lives: (group, row).
    /// K's word i is in group i mod G, V's in (i + G/2) mod G, the scratch's in (i + G/4) mod
    /// G; the scratch region is the banks' upper half, K and V a quarter each below it (half
    /// each without it).
    pub fn place(&self, c: usize, i: u64) -> (u64, u64) {
        let g = self.groups as u64;
        let group = (i + REGION_GROUP_QUARTERS[c] * g / 4) % g;
        let row = if c == SCRATCH {
            self.bank_words as u64 / 2 + i / g
        } else {
            c as u64 * self.kv_rows() as u64 + i / g
        };
        (group, row)
    }
}

impl GlbParams {
    /// True when the design has a GLB.
    pub fn present(&self) -> bool {
        self.bytes > 0
    }

    /// Bits per bank word for a memory port of `width` bits.
    pub fn word_bits_for(&self, width: u32) -> u32 {
        if self.word_bits == 0 {
            width
        } else {
            self.word_bits
        }
    }

    /// Checks the knobs for a memory port of `width` bits and K/V rows of `row_bytes` bytes
    /// in blocks of `bc` rows, with unfused's scratch region (`scratch`: half the GLB) or
    /// without; errors name the key.
    pub fn validate(&self, width: u32, row_bytes: u64, bc: u32, scratch: bool) -> Result<()> {
        ensure!(
            self.wire_mm.is_finite() && self.wire_mm >= 0.0,
            "glb_wire_mm = {} is out of range: allowed 0 (derived from the GLB's area) or a \
             positive length in mm",
            self.wire_mm
        );
        ensure!(
            self.spares <= 4,
            "glb_spares = {} is out of range: allowed 0 (no spare lanes) to 4 spares per group",
            self.spares
        );
        ensure!(
            (2..=64).contains(&self.spare_group),
            "glb_spare_group = {} is out of range: a group of 2 to 64 lanes shares its spares",
            self.spare_group
        );
        if !self.present() {
            ensure!(
                self.spares == 0,
                "glb_spares = {} needs a GLB: set glb_bytes, or leave glb_spares at 0",
                self.spares
            );
            return Ok(());
        }
        ensure!(
            self.spares == 0 || self.placement == GlbPlacement::Stacked,
            "glb_spares = {} needs a stacked GLB (its bond is the vertical link the spares \
             serve); glb_placement = \"planar\" has none: set glb_placement = \"stacked\" \
             or glb_spares = 0",
            self.spares
        );
        let wb = self.word_bits_for(width);
        ensure!(
            wb.is_power_of_two() && (8..=width).contains(&wb),
            "glb_word_bits = {wb} is not supported: allowed are powers of two from 8 to the \
             memory port's {width} bits (a beat spans mem_width / glb_word_bits banks)"
        );
        let slices = width / wb;
        ensure!(
            self.banks.is_power_of_two() && self.banks >= slices && self.banks <= 4096,
            "glb_banks = {} is not supported: allowed are powers of two from {slices} (a \
             {width}-bit beat spans {slices} banks of glb_word_bits = {wb}) to 4096",
            self.banks
        );
        ensure!(
            self.ports == 1 || self.ports == 2,
            "glb_ports = {} is not supported: a GLB bank has 1 port (shared read/write) or 2 \
             (one read, one write)",
            self.ports
        );
        ensure!(
            self.bytes <= MAX_GLB_BYTES,
            "glb_bytes = {} is too large: allowed up to {MAX_GLB_BYTES} (4 GiB)",
            self.bytes
        );
        let pair = 2 * bc as u64 * row_bytes;
        let (kv_bytes, half) = if scratch {
            (
                self.bytes / 2,
                " in the half unfused leaves K and V (the other half holds S and P)",
            )
        } else {
            (self.bytes, "")
        };
        let least = if scratch { 2 * pair } else { pair };
        ensure!(
            kv_bytes >= pair,
            "glb_bytes = {} cannot hold one K/V block pair ({pair} bytes: bc = {bc} rows of \
             {row_bytes} bytes, twice){half}: raise glb_bytes to at least {least} (a power of \
             two multiple of glb_banks), or set 0 for no GLB",
            self.bytes
        );
        let bank_bytes = self.bytes / self.banks as u64;
        let word_bytes = (wb / 8) as u64;
        let words = if scratch { 4 } else { 2 };
        ensure!(
            self.bytes.is_multiple_of(self.banks as u64)
                && bank_bytes.is_power_of_two()
                && bank_bytes >= words * word_bytes,
            "glb_bytes = {} in glb_banks = {} banks is not a power-of-two bank of at least \
             {words} {wb}-bit words: use a capacity of glb_banks x a power of two (say {})",
            self.bytes,
            self.banks,
            self.banks as u64
                * (words * word_bytes)
                    .max(bank_bytes.next_power_of_two())
                    .max((least / self.banks as u64).next_power_of_two())
        );
        if self.spares > 0 {
            // Each bundle's lanes are numbered within half a probe's lane field.
            let groups = self.banks / slices;
            let rb = addr_bits((bank_bytes / word_bytes) as u32);
            let g = |lanes: u32| kernels::link::Geometry {
                lanes,
                group: self.spare_group,
                spares: self.spares,
            };
            for (what, lanes) in [("up", 2 + 2 * rb + width), ("down", width)] {
                let all = groups as u64 * g(lanes).physical() as u64;
                let most = crate::link::Bundle::GlbUp.max_lanes() as u64;
                ensure!(
                    all <= most,
                    "glb_spares = {}: the GLB's bond {what} has {all} physical lanes ({groups} \
                     bank groups), past the {most} the link probe numbers: use fewer glb_banks \
                     (wider groups) or glb_spares = 0",
                    self.spares
                );
            }
        }
        Ok(())
    }

    /// The GLB the DMA builds for a memory port of `width` bits and K/V rows of `row_beats`
    /// beats in blocks of `bc` rows, with unfused's scratch region in its upper half
    /// (`scratch`) or without (`None` without a GLB). The knobs must be valid.
    pub fn rtl(&self, width: u32, row_beats: u32, bc: u32, scratch: bool) -> Option<GlbConfig> {
        if !self.present() {
            return None;
        }
        let wb = self.word_bits_for(width);
        let slices = width / wb;
        let beat_bytes = (width / 8) as u64;
        let block_beats = bc as u64 * row_beats as u64;
        // Whole K/V block pairs: each of K and V keeps the same number of blocks.
        let kv_bytes = if scratch { self.bytes / 2 } else { self.bytes };
        let pairs = kv_bytes / (2 * block_beats * beat_bytes);
        Some(GlbConfig {
            groups: self.banks / slices,
            slices,
            bank_words: (self.bytes / self.banks as u64 / (wb / 8) as u64) as u32,
            word_bits: wb,
            ports: self.ports,
            blackbox: self.blackbox,
            region_beats: (pairs * block_beats) as u32,
            scratch_beats: if scratch {
                (self.bytes / 2 / beat_bytes) as u32
            } else {
                0
            },
            bond: (self.spares > 0).then_some(crate::variants::Spares {
                spares: self.spares,
                group: self.spare_group,
            }),
        })
    }
}

/// The policy for one descriptor of `need` beats on a region of `region` beats that holds
/// `filled` beats of the same tag: (hits, fills, streamed beats, the new mark).
pub fn take(need: u64, filled: u64, region: u64) -> (u64, u64, u64, u64) {
    let hit = need.min(filled);
    let fill = need.min(region).saturating_sub(hit);
    (hit, fill, need - hit - fill, filled.max(hit + fill))
}

interface! {
    /// The GLB's control input: `flush` invalidates both regions (every launch).
    pub struct GlbCtl { flush }
}

interface! {
    /// unfused with a GLB: the scratch region's base address (S_ADDR) and, with an O
    /// descriptor's start, whether it writes S or P to the scratch region (the O tile's
    /// writes never go to the GLB). The GLB holds the region's first `scratch_beats` beats.
    pub struct GlbScratch { base, o_write }
}

interface! {
    /// A channel's landing data from the GLB (a hit) or memory.
    pub struct GlbLand { data }
}

interface! {
    /// The GLB's events of a cycle, for the counter file: hit reads granted (0-2, each a
    /// memory beat; 0-3 with unfused's scratch reads), a fill written (with unfused's scratch,
    /// the writes: 0-2, a fill and an O channel's S or P beat), requests refused by a bank
    /// conflict (0-2; 0-4 with the scratch channel's reads and the O channel's writes), a K/V
    /// beat read from memory that streamed past the GLB (a spill); and per bank group (bit n:
    /// group n) whether it was read or written (each an access of a word in every bank of the
    /// group).
    pub struct GlbEvents { reads, fill, refused, spill, group_reads, group_writes }
}

impl GlbEvents<u32> {
    pub fn widths(g: &GlbConfig) -> Self {
        // unfused's scratch adds a read (X) and a write (O) a cycle: up to two writes, four
        // requests refused.
        let scratch = g.scratch_beats > 0;
        GlbEvents {
            reads: 2,
            fill: if scratch { 2 } else { 1 },
            refused: if scratch { 3 } else { 2 },
            spill: 1,
            group_reads: g.groups,
            group_writes: g.groups,
        }
    }
}

interface! {
    /// The per-bank counter window's select (`glb_bank_sel`): which bank group's counters
    /// the window shows.
    pub struct GlbBankSel { sel }
}

impl GlbBankSel<u32> {
    pub fn widths(g: &GlbConfig) -> Self {
        GlbBankSel { sel: g.sel_bits() }
    }
}

interface! {
    /// The per-bank counter window (`glb_bank_reads`, `glb_bank_writes`): the selected bank
    /// group's word reads and writes since the run's start (each bank of the group accessed
    /// one `word_bits` word); with one group the select is one bit, and 1 shows 0.
    pub struct GlbBankCounts { reads, writes }
}

impl GlbBankCounts<u32> {
    /// Both counters `w` bits wide (the core's counter width).
    pub fn widths(w: u32) -> Self {
        GlbBankCounts {
            reads: w,
            writes: w,
        }
    }
}

/// Rows of a region index for `bank_words`-word banks.
pub fn row_bits(g: &GlbConfig) -> u32 {
    addr_bits(g.bank_words)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn glb(bytes: u64, banks: u32) -> GlbParams {
        GlbParams {
            bytes,
            banks,
            ..GlbParams::default()
        }
    }

    /// The source's level on `seed`: 4 MiB in 32 banks of 512-bit words keeps 128 K/V block
    /// pairs (8,192 keys of d = 128) per head.
    #[test]
    fn the_seed_level_keeps_8192_keys() {
        let g = glb(4 << 20, 32);
        g.validate(512, 256, 64, false).unwrap();
        let c = g.rtl(512, 4, 64, false).unwrap();
        assert_eq!((c.groups, c.slices, c.bank_words), (32, 1, 2048));
        assert_eq!(c.region_beats, 8192 * 4);
        c.validate(512).unwrap();
        // Narrower banks: a 512-bit beat spans four 128-bit banks.
        let g = GlbParams {
            word_bits: 128,
            ..g
        };
        let c = g.rtl(512, 4, 64, false).unwrap();
        assert_eq!((c.groups, c.slices, c.bank_words), (8, 4, 8192));
        c.validate(512).unwrap();
        assert!(GlbParams::default().rtl(512, 4, 64, false).is_none());
    }

    /// Every word of both regions has its own place in the banks.
    #[test]
    fn regions_map_to_distinct_words() {
        for (bytes, banks, word_bits) in [(2048, 4, 0), (2048, 1, 0), (4096, 2, 128), (8192, 8, 64)]
        {
            let g = GlbParams {
                word_bits,
                ..glb(bytes, banks)
            };
            // With unfused's scratch region too: the banks' upper half, K and V a quarter each.
            for scratch in [false, true] {
                g.validate(256, 32, 8, scratch).unwrap();
                let c = g.rtl(256, 1, 8, scratch).unwrap();
                c.validate(256).unwrap();
                let mut seen = std::collections::HashSet::new();
                let regions = [c.region_beats, c.region_beats, c.scratch_beats];
                for (t, &n) in regions.iter().enumerate() {
                    for i in 0..n as u64 {
                        let (group, row) = c.place(t, i);
                        assert!(group < c.groups as u64 && row < c.bank_words as u64);
                        assert!(seen.insert((group, row)), "{c:?}: {t} {i}");
                    }
                }
                if scratch {
                    assert_eq!(c.scratch_beats as u64 * 32, bytes / 2);
                    assert_eq!(
                        seen.len() as u64 * 32,
                        bytes / 2 + 2 * c.region_beats as u64 * 32
                    );
                }
            }
        }
    }

    /// Knobs that cannot work are refused, naming the key and what would.
    #[test]
    fn bad_knobs_are_refused() {
        let err = |g: GlbParams| g.validate(256, 32, 8, false).unwrap_err().to_string();
        let e = err(glb(256, 1));
        assert!(
            e.contains("cannot hold one K/V block pair (512 bytes"),
            "{e}"
        );
        let e = err(glb(3072, 3));
        assert!(e.contains("glb_banks = 3 is not supported"), "{e}");
        let e = err(glb(3072, 4));
        assert!(e.contains("is not a power-of-two bank"), "{e}");
        let e = err(GlbParams {
            word_bits: 512,
            ..glb(2048, 4)
        });
        assert!(e.contains("glb_word_bits = 512 is not supported"), "{e}");
        let e = err(GlbParams {
            word_bits: 64,
            ..glb(2048, 2)
        });
        assert!(e.contains("spans 4 banks"), "{e}");
        let e = err(GlbParams {
            ports: 3,
            ..glb(2048, 4)
        });
        assert!(e.contains("glb_ports = 3"), "{e}");
        let e = err(GlbParams {
            wire_mm: -1.0,
            ..glb(0, 4)
        });
        assert!(e.contains("glb_wire_mm = -1"), "{e}");
        // unfused keeps half for S and P: K and V need a pair in the other half.
        let e = glb(512, 1)
            .validate(256, 32, 8, true)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("in the half unfused leaves K and V") && e.contains("at least 1024"),
            "{e}"
        );
        glb(1024, 1).validate(256, 32, 8, true).unwrap();
        // No GLB: the bank knobs are not checked.
        glb(0, 3).validate(256, 32, 8, false).unwrap();
    }
}
