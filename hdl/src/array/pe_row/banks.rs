//! The row's SRAM banks: the P bank (both variants) and buf2d's S array, in words of one or
//! more elements and one or more banks.

use super::{Parts, PeRowConfig, RowIn};
use crate::mem::sram::{SramBlock, SramIn};
use crate::{cat, mux, mux_index, ModuleBuilder, Sig};

/// The row's P bank: the exp sweep writes each weight (through the write nets, driven by
/// `exp_sweep`); the sequencer issues the read a cycle ahead of a PV step (`p_rd`), once per
/// query row and key, and the registered read data holds the row operand for the key's e
/// output columns.
pub(super) struct PBank {
    pub(super) value: Sig,
    /// The bank's read (a word's first key).
    pub(super) re: Sig,
    /// The bank's write port (we, waddr, wdata), which the exp sweep drives; None in unfused
    /// (P leaves through the staging buffer).
    pub(super) write: Option<(Sig, Sig, Sig)>,
}

/// unfused's P: the PV steps read the weight from the row's bank of the scratch channel's
/// landing buffer (the core addresses it from `p_rd`, a cycle ahead), held in a register as
/// the P bank's read would be.
pub(super) fn p_landing(m: &mut ModuleBuilder, cfg: &PeRowConfig, i: &RowIn) -> PBank {
    let data = i.x.expect("unfused has a scratch landing buffer").data;
    let per = cfg.scratch_per_beat().1;
    let op = cfg.elem_bits().0;
    let used = data.slice(per * op - 1, 0);
    if per * op < data.width {
        m.discard(data.slice(data.width - 1, per * op));
    }
    // The core addresses the landing buffer (slot, query row, beat); the row picks the lane.
    let (j, lb) = (i.p_rd.j, per.trailing_zeros());
    let lane = (lb > 0).then(|| j.slice(lb - 1, 0));
    if j.width > lb {
        m.discard(j.slice(j.width - 1, lb));
    }
    m.discard(i.p_rd.ii);
    m.discard(i.p_rd.slot);
    let weight = element(used, op, lane);
    PBank {
        value: m.hold("p_value", weight, i.p_rd.re),
        re: i.p_rd.re,
        write: None,
    }
}

pub(super) fn p_bank(m: &mut ModuleBuilder, cfg: &PeRowConfig, parts: &Parts, i: &RowIn) -> PBank {
    // The array's write port: the word address (a bank's, and the bank) and the word.
    let pw = cfg.p_write_widths();
    let (we, waddr, wdata) = (
        m.net("p_we", pw.we),
        m.net("p_waddr", pw.addr),
        m.net("p_wdata", pw.data),
    );
    let per = cfg.p_per_word();
    let word = Word::of(cfg, i.p_rd.j, per);
    // A query row's word is read with its first key; its other keys come from the row's copy
    // of it (below), as the PV steps visit every query row at a key before the next key.
    let re = word.at_first(i.p_rd.re);
    let ins = SramIn {
        we,
        waddr,
        wdata,
        re,
        raddr: word.address(&[i.p_rd.slot, i.p_rd.ii]),
    };
    let p_bank = parts.p_bank.as_ref().expect("a P bank");
    let word_rd = banked(m, p_bank, "p_bank", ins, cfg.banks());
    let value = match word.field {
        None => word_rd,
        Some((f, first, _)) => {
            // Captured with each read, held for its PV steps: the element, the query row,
            // and whether the bank's read register or the row's copy holds the word.
            let f_rd = m.hold("p_field_rd", f, i.p_rd.re);
            let ii_rd = m.hold("p_ii_rd", i.p_rd.ii, i.p_rd.re);
            let fetched = m.hold("p_fetched", first, i.p_rd.re);
            let copies: Vec<Sig> = (0..cfg.a)
                .map(|r| {
                    let en = fetched & ii_rd.eq(r as u64);
                    m.hold(&format!("p_word_r{r}"), word_rd, en)
                })
                .collect();
            let held = mux_index(ii_rd, &copies);
            element(mux(fetched, word_rd, held), cfg.elem_bits().0, Some(f_rd))
        }
    };
    if cfg.p_array().ports == 1 {
        m.assert_always(
            "p_one_access",
            !(we & re),
            "the single-port P bank got a read (PV) and a write (softmax) in the same cycle",
        );
    }
    PBank {
        value,
        re,
        write: Some((we, waddr, wdata)),
    }
}

/// An array of `banks` banks of `bank`, interleaved on the word address's low bits: each
/// access goes to one bank, and the read data comes from the bank last read (each bank's read
/// register holds its word, as the one bank's does). Returns the read data.
pub(super) fn banked(
    m: &mut ModuleBuilder,
    bank: &SramBlock,
    name: &str,
    ins: SramIn,
    banks: u32,
) -> Sig {
    let lg = banks.trailing_zeros();
    if lg == 0 {
        return m.instantiate(bank, name, &ins).rd_data;
    }
    let split = |a: Sig| (a.slice(lg - 1, 0), a.slice(a.width - 1, lg));
    let (wbank, waddr) = split(ins.waddr);
    let (rbank, raddr) = split(ins.raddr);
    let reads: Vec<Sig> = (0..banks as u64)
        .map(|k| {
            let one = SramIn {
                we: ins.we & wbank.eq(k),
                waddr,
                wdata: ins.wdata,
                re: ins.re & rbank.eq(k),
                raddr,
            };
            m.instantiate(bank, &format!("{name}{k}"), &one).rd_data
        })
        .collect();
    let last = m.hold(&format!("{name}_rd_bank"), rbank, ins.re);
    mux_index(last, &reads)
}

/// Key `j` of a query row in words of `per` keys.
pub(super) struct Word {
    /// The word's index in the row (None: one word holds the row's block).
    pub(super) index: Option<Sig>,
    /// The key's element in the word, and whether it is the word's first and its last (None
    /// with one key a word).
    pub(super) field: Option<(Sig, Sig, Sig)>,
}

impl Word {
    pub(super) fn of(cfg: &PeRowConfig, j: Sig, per: u32) -> Word {
        let lg = per.trailing_zeros();
        if lg == 0 {
            return Word {
                index: Some(j),
                field: None,
            };
        }
        let index = (cfg.word_bits(per) > 0).then(|| j.slice(j.width - 1, lg));
        let f = j.slice(lg - 1, 0);
        Word {
            index,
            field: Some((f, f.is_zero(), f.eq((per - 1) as u64))),
        }
    }

    /// The word's address in a bank of words at (`above`, word).
    pub(super) fn address(&self, above: &[Sig]) -> Sig {
        let parts: Vec<Sig> = above.iter().copied().chain(self.index).collect();
        cat(&parts)
    }

    /// `x` in the word's first key only.
    pub(super) fn at_first(&self, x: Sig) -> Sig {
        self.field.map_or(x, |(_, first, _)| x & first)
    }

    /// `x` in the word's last key only.
    pub(super) fn at_last(&self, x: Sig) -> Sig {
        self.field.map_or(x, |(_, _, last)| x & last)
    }
}

/// A word of `per` elements: `x` (the word's last) above the `per` − 1 before it, which a shift
/// register gathers on `en` (the oldest in the lowest bits: element f at bits f·w ..).
pub(super) fn gather(m: &mut ModuleBuilder, name: &str, x: Sig, en: Sig, per: u32) -> Sig {
    if per == 1 {
        return x;
    }
    let w = x.width;
    let held = m.reg(name, w * (per - 1), None);
    let shifted = if per > 2 {
        cat(&[x, held.q.slice(w * (per - 1) - 1, w)])
    } else {
        x
    };
    m.set_next(held, shifted);
    m.set_enable(held, en);
    cat(&[x, held.q])
}

/// Element `field` (`w` bits each) of `word` (the word itself when it holds one).
pub(super) fn element(word: Sig, w: u32, field: Option<Sig>) -> Sig {
    let Some(f) = field else {
        return word;
    };
    let xs: Vec<Sig> = (0..word.width / w)
        .map(|k| word.slice(k * w + w - 1, k * w))
        .collect();
    mux_index(f, &xs)
}
