//! buf2d, the SRAM-buffered 2-D baseline: the same array and arithmetic as reg2d, with S and P
//! in an SRAM buffer beside each PE row. After QK the row engine copies S out of the PE
//! registers (which then hold one block) into the row's S array; the sweeps read it there and
//! write P into the row's P array, which PV reads.

use anyhow::{ensure, Result};
use serde::{Deserialize, Serialize};

use super::{Arrays, Dataflow, PHome, Plan, SHome, Sram, Tile};

/// buf2d's knobs (the `[buf2d]` section).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct BufParams {
    /// Ports of each P buffer bank (2: one read and one write port, so the softmax of a block
    /// may write P while PV reads the previous block's; 1: one shared port, so the softmax and
    /// PV take turns).
    pub ports: u32,
    /// The on-chip buffer capacity available, in bytes (0: no limit). The banks are sized to
    /// what the tiling needs; a tiling that needs more than this is refused.
    pub bytes: u64,
    /// Emit the buffer banks as memory-macro blackboxes (same ports) instead of behavioural
    /// synchronous RAM (`gen` and `synth` only; simulation uses the behaviour).
    #[serde(rename = "macro")]
    pub macro_blackbox: bool,
    /// Bits per word of the S and P arrays (0: one element per word, FP32 S and FP16 P;
    /// 32 · 2^n: a word of w/32 scores or w/16 weights of one query row, so an access moves
    /// that many and the banks have fewer, wider words).
    pub word_bits: u32,
    /// SRAM banks each row's S array and P array is split into (1, or a power of two),
    /// interleaved on the low bits of the word address: the same accesses, each to a smaller
    /// macro (cheaper per access in the energy model, as in CACTI).
    pub banks: u32,
}

impl Default for BufParams {
    fn default() -> Self {
        BufParams {
            ports: 2,
            bytes: 0,
            macro_blackbox: false,
            word_bits: 0,
            banks: 1,
        }
    }
}

impl BufParams {
    /// Bytes of on-chip buffer the tiling of `cfg` needs: per PE row an S array (a x Bc FP32,
    /// one block) and a P array (a x Bc FP16, two blocks), addressed by (query row, key), so
    /// each count is rounded up to a power of two.
    pub fn bytes_needed(&self, cfg: &Tile) -> u64 {
        let (s_per, p_per) = self.elems_per_word();
        let (s_words, p_words) = self.array_words(cfg);
        let s_bytes = s_words * 4 * s_per as u64;
        let p_bytes = p_words * 2 * p_per as u64;
        cfg.rows as u64 * (s_bytes + p_bytes)
    }

    /// Words of one row's S array and P array (both blocks) for the tiling of `cfg`, each
    /// addressed by query row and word, so each count a power of two (a word that holds a
    /// row's whole block needs no index).
    pub fn array_words(&self, cfg: &Tile) -> (u64, u64) {
        let a = (cfg.br / cfg.rows.max(1)).max(1);
        let words = |per: u32| {
            let index = if per > 1 && cfg.bc == per {
                0
            } else {
                crate::addr_bits((cfg.bc / per).max(1))
            };
            1u64 << (crate::addr_bits(a) + index)
        };
        let (s_per, p_per) = self.elems_per_word();
        (words(s_per), 2 * words(p_per))
    }

    /// The bytes of each bank (a row's S and P arrays split `banks` ways): `bytes` shared out,
    /// or what the tiling needs when that is 0 (no limit).
    pub fn bank_bytes(&self, cfg: &Tile) -> u64 {
        let total = match self.bytes {
            0 => self.bytes_needed(cfg),
            b => b,
        };
        total / (cfg.rows * self.banks) as u64
    }

    /// Scores per S word and weights per P word (`word_bits`; 0: one each).
    pub fn elems_per_word(&self) -> (u32, u32) {
        match self.word_bits {
            0 => (1, 1),
            w => (w / 32, w / 16),
        }
    }
}

impl Dataflow for BufParams {
    /// S copied into the row's S array (one block) after QK, P in the buffer's P banks.
    fn plan(&self) -> Plan {
        Plan {
            arrays: Arrays::Shared { interleaves: false },
            s: SHome::Array { rows: None },
            p: PHome::Bank { ports: self.ports },
            s_slots: 1,
            vlink_latency: 0,
            spares: None,
            noc: None,
            sram: Sram {
                per_word: self.elems_per_word(),
                banks: self.banks,
                blackbox: self.macro_blackbox,
            },
        }
    }

    fn sram_bank_bytes(&self, cfg: &Tile) -> Option<u64> {
        Some(self.bank_bytes(cfg))
    }

    fn row_name(&self) -> String {
        format!(
            "_buf{}{}",
            self.ports,
            if self.macro_blackbox { "m" } else { "" }
        )
    }

    fn validate(&self, cfg: &Tile) -> Result<()> {
        let b = self;
        ensure!(
            matches!(b.ports, 1 | 2),
            "buf2d.ports = {} is not supported: allowed 1 (one shared port per P bank) or 2 (one \
             read and one write port)",
            b.ports
        );
        let w = b.word_bits;
        ensure!(
            w == 0 || (w >= 32 && w.is_power_of_two() && w <= 1024),
            "buf2d.word_bits = {w} is not supported: 0 (one element per word: 32-bit S, 16-bit \
             P words) or a power of two from 32 to 1024"
        );
        ensure!(
            cfg.bc.is_multiple_of((w / 16).max(1)),
            "buf2d.word_bits = {w} does not fit bc = {}: a P word holds {} weights of one query \
             row, which must divide the block's bc keys; lower word_bits to at most {} or use a \
             bc that is a multiple of {}",
            cfg.bc,
            w / 16,
            16 * (1u32 << cfg.bc.trailing_zeros()),
            w / 16
        );
        let (s_words, p_words) = b.array_words(cfg);
        let most = s_words.min(p_words) / 2;
        ensure!(
            b.banks.is_power_of_two() && b.banks as u64 <= most,
            "buf2d.banks = {} is not supported here: a power of two from 1 to {most} (each bank \
             of a row's S array ({s_words} words) and P array ({p_words} words) holds at least \
             two words)",
            b.banks
        );
        let need = b.bytes_needed(cfg);
        ensure!(
            b.bytes == 0 || b.bytes >= need,
            "buf2d.bytes = {} is too small: the tiling needs {need} B of buffer (per PE row \
             a*bc FP32 scores and 2*a*bc FP16 weights, a = br/rows, in words of word_bits, each \
             count rounded up to a power of two per query row and word): raise bytes, set it to \
             0 (no limit) or shrink br or bc",
            b.bytes
        );
        Ok(())
    }
}
