//! reg3d: what each tier of PEs steps on, the softmax tier's S registers as the row sees
//! them, and the bits over the vertical links.

use super::{EngineRegs, Parts, PeRowConfig, PeStep, RowIn};
use crate::array::pe_tier::{STierIn, TierIn, TierOut};
use crate::{cat, mux, mux_index, ModuleBuilder, Sig};

/// What one tier of PEs steps on: its step bus, its column bus, the mask of its phase's block,
/// the address of its read port, and the prefix of its instance name.
pub(super) struct Tier<'a> {
    pub(super) step: PeStep,
    pub(super) b_col: Sig,
    pub(super) mask: Sig,
    pub(super) rd_addr: Sig,
    pub(super) prefix: &'a str,
}

impl<'a> Tier<'a> {
    /// The tier on the step bus and the column bus (the one tier in 2-D, the QK tier in reg3d).
    pub(super) fn qk(i: &RowIn, rd_addr: Sig, prefix: &'a str) -> Self {
        Tier {
            step: i.step,
            b_col: i.b_col,
            mask: i.mask_qk,
            rd_addr,
            prefix,
        }
    }
}

/// The softmax tier's S registers (three tiers), as the row sees them.
pub(super) struct STier {
    /// The score the sweep visits (PE `cc`'s register at the engine's slot, ii, jj).
    pub(super) value: Sig,
    /// Per PE: the link reads the QK PE's read port this cycle.
    pub(super) reads: Vec<Sig>,
    /// Per PE: the link writes the S register above it this cycle.
    pub(super) writes: Vec<Sig>,
    /// Narrow links: a block's walk wrote its last score above.
    pub(super) linked: Sig,
    /// With spare lanes: the S links' status.
    pub(super) link: Option<crate::link::LinkStatus>,
}

/// Bits over the vertical links this cycle (reg3d): a P weight up to the PV tier's bank (16),
/// an O value down to the readout (32), and in three tiers the scores up the S links. Zero in
/// 2-D designs.
pub(super) fn vlink_bits(
    m: &mut ModuleBuilder,
    cfg: &PeRowConfig,
    p_up: Sig,
    o_down: Sig,
    s: Sig,
) -> Sig {
    let w = cfg.vlink_width();
    let zero = m.zero(w);
    // One array, or two side by side (noc2d: P crosses the NoC, counted there): no vertical
    // links.
    if !cfg.concurrent_phases() || cfg.noc().is_some() {
        m.discard(s);
        return zero;
    }
    let (pw, ow) = cfg.elem_bits();
    let (p_bits, o_bits) = (m.lit(w, pw as u64), m.lit(w, ow as u64));
    let po = mux(p_up, p_bits, zero) + mux(o_down, o_bits, zero);
    if cfg.softmax_tier() {
        po + s
    } else {
        m.discard(s);
        po
    }
}

/// Bits over the S links this cycle (three tiers): 32 per score written above. Zero otherwise.
pub(super) fn s_link_bits(m: &mut ModuleBuilder, cfg: &PeRowConfig, s_link: Option<&STier>) -> Sig {
    let w = cfg.vlink_width();
    match s_link {
        Some(t) => {
            let n = m.sum(&t.writes, w - 5);
            let zero5 = m.zero(5);
            cat(&[n, zero5])
        }
        None => m.zero(w),
    }
}

/// The row's PEs and what they report.
pub(super) struct Pes {
    pub(super) rd_datas: Vec<Sig>,
    pub(super) acc_reads: Vec<Sig>,
    pub(super) rf_writes: Vec<Sig>,
    pub(super) macs: Sig,
    /// The tier's read data and its PEs' enables (QK steps: not masked) as buses (PE 0
    /// lowest).
    pub(super) rd_bus: Sig,
    pub(super) en_bus: Sig,
}

impl Pes {
    /// A tier's outputs, per PE.
    pub(super) fn of(cfg: &PeRowConfig, t: &TierOut) -> Pes {
        let (c_n, acc) = (cfg.cols, cfg.elem_bits().1);
        let bits = |x: Sig| (0..c_n).map(|c| x.bit(c)).collect::<Vec<Sig>>();
        Pes {
            rd_datas: (0..c_n)
                .map(|c| t.rd_data.slice(acc * c + acc - 1, acc * c))
                .collect(),
            acc_reads: bits(t.acc_read),
            rf_writes: bits(t.rf_write),
            macs: t.macs,
            rd_bus: t.rd_data,
            en_bus: t.en,
        }
    }

    /// Both tiers' accesses and MACs (the read data stay per tier).
    pub(super) fn and(mut self, other: Pes) -> Pes {
        self.acc_reads.extend(other.acc_reads);
        self.rf_writes.extend(other.rf_writes);
        let w = self.macs.width().max(other.macs.width()) + 1;
        self.macs = self.macs.zext(w) + other.macs.zext(w);
        self
    }
}

/// What the row's PE tiers need from the rest of the row: the engine's S and O register
/// addresses, the P operand, and the rescale shift of the step's row.
pub(super) struct ArrayIn {
    pub(super) s_base: Sig,
    pub(super) o_base: Sig,
    pub(super) p_value: Sig,
    pub(super) shift: Sig,
}

/// The row's PE tiers as the engine sees them: their accesses and MACs, the score the sweeps
/// read, the O value the readout reads, and a softmax tier's S links.
pub(super) struct Array {
    pub(super) pes: Pes,
    pub(super) value: Sig,
    pub(super) o_value: Sig,
    pub(super) s_link: Option<STier>,
}

/// The row's PEs: one tier (2-D), or reg3d's QK and PV tiers and, with three tiers, the softmax
/// tier's S registers between them.
pub(super) fn array(
    m: &mut ModuleBuilder,
    cfg: &PeRowConfig,
    parts: &Parts,
    i: &RowIn,
    e: &EngineRegs,
    x: ArrayIn,
) -> Array {
    let ArrayIn {
        s_base,
        o_base,
        p_value,
        shift,
    } = x;
    let tile_reset = i.sm.start & i.sm.first;
    let array = |m: &mut ModuleBuilder, k: usize, tier: Tier| {
        let ins = TierIn {
            a_q: i.a_q,
            p_val: p_value,
            b_col: tier.b_col,
            mask: tier.mask,
            rd_addr: tier.rd_addr,
            shift,
            pv_block_start: i.pv_block_start,
            tile_reset,
            step: tier.step,
        };
        let out = m.instantiate(&parts.tiers[k], &format!("u_{}tier", tier.prefix), &ins);
        // The enables feed only a softmax tier's S links.
        if !(cfg.softmax_tier() && k == 0) {
            m.discard(out.en);
        }
        Pes::of(cfg, &out)
    };
    let (pes, value, o_value, s_link) = match cfg.concurrent_phases() {
        // One tier: QK and PV steps on the same PEs, whose one read port serves the sweeps
        // (S) and the readout (O).
        false => {
            let rd_addr = m.name("rd_addr", mux(e.in_ro, o_base, s_base));
            let mut tier = Tier::qk(i, rd_addr, "");
            // Interleaved, QK and PV steps of different blocks take turns on the one bus, each
            // with its block's mask.
            if cfg.interleaved() {
                tier.mask = m.name("step_mask", mux(i.step.pv, i.mask_pv, i.mask_qk));
            }
            let pes = array(m, 0, tier);
            m.discard_all(&i.step_pv);
            m.discard(i.v_col);
            if !cfg.interleaved() {
                m.discard(i.mask_pv);
            }
            let value = m.name("rd_value", mux_index(e.cc.q, &pes.rd_datas));
            (pes, value, value, None)
        }
        // reg3d: the QK tier's PEs hold S, the PV tier's hold O (the readout reads them). The
        // sweeps read S in the QK PEs, or with a softmax tier in its S registers, which the QK
        // PEs' read ports feed over the S links.
        true => {
            let aw = cfg.pe.addr_width();
            let qk_rd = if cfg.softmax_tier() {
                m.net("link_rd_addr", aw)
            } else {
                s_base
            };
            let mut qk = array(m, 0, Tier::qk(i, qk_rd, "qk_"));
            let pv_tier = Tier {
                step: i.step_pv,
                b_col: i.v_col,
                mask: i.mask_pv,
                rd_addr: o_base,
                prefix: "pv_",
            };
            let pv = array(m, 1, pv_tier);
            let o_value = m.name("o_value", mux_index(e.cc.q, &pv.rd_datas));
            let (s_value, link) = if cfg.softmax_tier() {
                let block = parts.s_tier.as_ref().expect("three tiers");
                let ins = STierIn {
                    rd_data: qk.rd_bus,
                    en: qk.en_bus,
                    slot: e.slot,
                    ii: e.ii.q,
                    jj: e.jj.q,
                    cc: e.cc.q,
                    step: i.step,
                };
                let out = m.instantiate(block, "u_s_tier", &ins);
                m.drive(qk_rd, out.rd_addr);
                let bits = |x: Sig| (0..cfg.cols).map(|c| x.bit(c)).collect::<Vec<Sig>>();
                let link = STier {
                    value: out.value,
                    reads: bits(out.reads),
                    writes: bits(out.writes),
                    linked: out.linked,
                    link: out.link,
                };
                qk.acc_reads.extend(link.reads.iter().copied());
                qk.rf_writes.extend(link.writes.iter().copied());
                (link.value, Some(link))
            } else {
                (mux_index(e.cc.q, &qk.rd_datas), None)
            };
            let s_value = m.name("s_value", s_value);
            (qk.and(pv), s_value, o_value, link)
        }
    };
    Array {
        pes,
        value,
        o_value,
        s_link,
    }
}
