//! `landing_buffer`: the double-buffered registers a DMA read channel lands blocks in, laid out
//! for the PE array that consumes them.
//!
//! A block is `rows` rows of `row_beats` memory beats (`width` bits each); two blocks fit (buffer
//! 0 and 1). Write port (from the DMA): `we`, `slot`, `row`, `beat`, `data`. The read side depends
//! on the layout, and every bank is read at one shared address, so a read returns one beat per
//! bank side by side (`rd_data`, banks × width bits, bank 0 in the low bits):
//!
//! * `RowBanked { rows_per_bank }`: bank = row / rows_per_bank; `rd_addr` = {slot, row within
//!   bank, beat} (bit fields, each as wide as its largest value needs). For Q (a bank per PE
//!   row) and K (a bank per PE column): at each step every PE row or column reads its own
//!   row's beat in parallel.
//! * `BeatSliced`: bank = beat; `rd_addr` = {slot, row}: one read returns a whole row. For V,
//!   whose row j every PE column needs at once (each its own slice).
//!
//! Reads are combinational (latency 0); a write is visible after the clock edge.

use anyhow::{ensure, Result};

use crate::interface;
use crate::ir::iface::Block;
use crate::{addr_bits, cat, Design};

interface! {
    /// A landing write (enable, buffer slot, row, beat, data) and the read address.
    pub struct LandIn { we, slot, row, beat, data, rd_addr }
}

interface! {
    /// The read data.
    pub struct RdData { rd_data }
}

/// How rows map onto banks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Layout {
    RowBanked { rows_per_bank: u32 },
    BeatSliced,
}

/// Configuration of a landing buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LandingConfig {
    /// Rows per block.
    pub rows: u32,
    /// Beats per row.
    pub row_beats: u32,
    /// Beat width in bits.
    pub width: u32,
    pub layout: Layout,
}

impl LandingConfig {
    pub fn validate(&self) -> Result<()> {
        ensure!(
            self.rows >= 1 && self.row_beats >= 1,
            "a landing buffer needs at least one row of one beat"
        );
        if let Layout::RowBanked { rows_per_bank } = self.layout {
            ensure!(
                rows_per_bank >= 1 && self.rows.is_multiple_of(rows_per_bank),
                "{} rows do not split into banks of {rows_per_bank}",
                self.rows
            );
        }
        Ok(())
    }

    pub fn banks(&self) -> u32 {
        match self.layout {
            Layout::RowBanked { rows_per_bank } => self.rows / rows_per_bank,
            Layout::BeatSliced => self.row_beats,
        }
    }

    /// Bits of the row-within-bank field of `rd_addr` (row-banked) or of the row field.
    pub fn local_row_bits(&self) -> u32 {
        match self.layout {
            Layout::RowBanked { rows_per_bank: 1 } => 0,
            Layout::RowBanked { rows_per_bank } => addr_bits(rows_per_bank),
            Layout::BeatSliced => self.row_bits(),
        }
    }

    /// Width of `rd_addr`: {slot, row field, beat field (row-banked only)}.
    pub fn rd_addr_width(&self) -> u32 {
        match self.layout {
            Layout::RowBanked { .. } => 1 + self.local_row_bits() + self.beat_bits(),
            Layout::BeatSliced => 1 + self.row_bits(),
        }
    }

    /// Entries per bank (both buffers; addresses are bit fields, so powers of two).
    pub fn bank_depth(&self) -> u32 {
        1 << self.rd_addr_width()
    }

    pub fn row_bits(&self) -> u32 {
        addr_bits(self.rows)
    }

    pub fn beat_bits(&self) -> u32 {
        addr_bits(self.row_beats)
    }

    pub fn module_name(&self) -> String {
        let layout = match self.layout {
            Layout::RowBanked { rows_per_bank } => format!("rb{rows_per_bank}"),
            Layout::BeatSliced => "bs".into(),
        };
        format!(
            "landing_{}x{}_w{}_{layout}",
            self.rows, self.row_beats, self.width
        )
    }
}

/// Defines the landing buffer.
pub fn build(d: &mut Design, cfg: &LandingConfig) -> Block<LandIn, RdData<u32>> {
    let gate = crate::clock_gate::build(d);
    Block::of(d.define(&cfg.module_name(), |_, m| {
        m.doc(&format!(
            "landing_buffer: two blocks of {} rows x {} beats of {} bits, {} bank(s) of {} entries,\n\
             layout {:?}. Reads combinational, writes at the clock edge.",
            cfg.rows,
            cfg.row_beats,
            cfg.width,
            cfg.banks(),
            cfg.bank_depth(),
            cfg.layout
        ));
        let we = m.input("we", 1);
        let buf = m.input("slot", 1);
        let row = m.input("row", cfg.row_bits());
        let beat = m.input("beat", cfg.beat_bits());
        let data = m.input("data", cfg.width);
        let rd_addr = m.input("rd_addr", cfg.rd_addr_width());
        if let Layout::RowBanked { .. } = cfg.layout {
            if cfg.banks() == 1 && cfg.local_row_bits() == 0 {
                m.discard(row); // one row in one bank: the row index is always 0
            }
        }
        let mut outs = vec![];
        for bank in 0..cfg.banks() {
            let (sel, entry) = match cfg.layout {
                Layout::RowBanked { rows_per_bank } => {
                    let lo = m.lit(row.width(), (bank * rows_per_bank) as u64);
                    let ge = row.ge(lo);
                    // Rows never reach cfg.rows, so the last bank needs no upper bound.
                    let sel = if bank + 1 == cfg.banks() {
                        ge
                    } else {
                        let hi = m.lit(row.width(), ((bank + 1) * rows_per_bank) as u64);
                        let lt = row.lt(hi);
                        ge & lt
                    };
                    let entry = if cfg.local_row_bits() == 0 {
                        cat(&[buf, beat])
                    } else {
                        // row - lo < rows_per_bank, so the low bits of the operands suffice.
                        let k = cfg.local_row_bits();
                        let row_lo = row.trunc(k);
                        let lo_lo = lo.trunc(k);
                        let local = row_lo - lo_lo;
                        cat(&[buf, local, beat])
                    };
                    (sel, entry)
                }
                Layout::BeatSliced => {
                    let sel = if cfg.row_beats == 1 {
                        let one = m.lit(1, 1);
                        m.discard(beat);
                        one
                    } else {
                        beat.eq(bank as u64)
                    };
                    (sel, cat(&[buf, row]))
                }
            };
            // Each entry behind a clock gate opened by its write: a landing beat clocks one
            // entry's flip-flops, not the buffer's.
            let en = we & sel;
            let mem = crate::clock_gate::gated_memory(
                m,
                &gate,
                &format!("bank{bank}"),
                (cfg.bank_depth(), cfg.width),
                (en, entry, data),
            );
            outs.push(m.mem_read(mem, rd_addr));
        }
        outs.reverse();
        let rd_data = cat(&outs);
        m.output("rd_data", rd_data);
    }))
}
