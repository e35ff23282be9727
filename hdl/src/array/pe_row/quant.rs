//! Integer QKᵀ: the row's multiply of each query row's scores, C' = (C · s_q) ·
//! s_k, per query row and block (model: `kernels::quant::QuantQk::scale`).
//!
//! The scales travel in the Q and K rows themselves: elements 0 and 1 of a quantized row hold
//! its binary32 scale (low half first), the packed integers follow (`kernels::quant` packs
//! them). A block's QK phase starts with two scale steps (bus operations `ScaleLo` and
//! `ScaleHi`, NOPs to the PEs), which put elements 0 and 1 of every query row (on `a_q`) and
//! of PE 0's first key of the block (its column operand; every key of a block carries the
//! block's scale) on the buses. The row keeps the low halves, then at the query row's `ScaleHi`
//! step with key 0 multiplies C (`c_const`) by s_q and the product by s_k (two binary32
//! multipliers, a register after each) into C'[slot][ii]: one per query row and S slot (the
//! block's parity), so the softmax of block j reads its C' while block j + 1's QK writes the
//! other. QK runs at most two blocks ahead of PV, so a slot is rewritten only after the
//! softmax that read it is done. C' is kept a positive normal (`positive_normal`): a query row
//! past the sequence reads a stale scale, and its masked scores must stay −Inf.

use super::{Parts, PeRowConfig, RowIn};
use crate::array::pe::PeOp;
use crate::fault::Fault;
use crate::operands::Binary;
use crate::{and_all, cat, mux, mux_index, ModuleBuilder, Sig};

/// `kernels::quant::positive_normal`: a positive normal or +Inf kept, anything else (zero,
/// subnormal, negative, NaN) the smallest normal.
fn positive_normal(m: &mut ModuleBuilder, c: Sig) -> Sig {
    let exp = c.slice(30, 23);
    let nan = exp.all() & c.slice(22, 0).any();
    let bad = c.msb() | exp.is_zero() | nan;
    let min_normal = m.lit(32, 0x0080_0000);
    mux(bad, min_normal, c)
}

/// C' of each query row for the block in S slot `slot`; None in floating-point QK designs
/// (C is `c_const` then).
pub(super) fn scaled_constants(
    m: &mut ModuleBuilder,
    cfg: &PeRowConfig,
    parts: &Parts,
    i: &RowIn,
    slot: Sig,
) -> Option<Vec<Sig>> {
    cfg.pe.qk?;
    let a_n = cfg.a;
    let ew = cfg.elem_bits().0;
    let st = &i.step;
    let is = |op: PeOp| st.op.eq(op as u64);
    let qk_step = st.valid & !st.pv;
    let lo = qk_step & is(PeOp::ScaleLo);
    let hi = qk_step & is(PeOp::ScaleHi);
    let key0 = st.jj.is_zero();
    let k_elem = i.b_col.slice(ew - 1, 0);
    // The low halves: Q's per query row, K's of the block's first key.
    let q_lo: Vec<Sig> = (0..a_n)
        .map(|r| {
            let en = lo & st.ii.eq(r as u64);
            m.hold(&format!("sq_lo{r}"), i.a_q, en)
        })
        .collect();
    let k_lo = m.hold("sk_lo", k_elem, lo & key0);
    // The whole scales at the row's ScaleHi step with key 0, registered with where C' goes.
    let take = hi & key0;
    let sq = cat(&[i.a_q, mux_index(st.ii, &q_lo)]);
    let sq = m.hold("sq", sq, take);
    let sk = m.hold("sk", cat(&[k_elem, k_lo]), take);
    let v1 = m.delay("cq_valid", take);
    let ii1 = m.hold("cq_ii", st.ii, take);
    let slot1 = m.hold("cq_slot", st.slot, take);
    // (C · s_q), registered; then its product with s_k.
    let cq = m
        .instantiate(
            &parts.mul0,
            "u_cq",
            &Binary {
                a: i.c_const,
                b: sq,
            },
        )
        .y;
    let cq = m.delay("cq", cq);
    let v2 = m.delay("cs_valid", v1);
    let ii2 = m.delay("cs_ii", ii1);
    let slot2 = m.delay("cs_slot", slot1);
    let sk2 = m.delay("cs_sk", sk);
    let cs = m
        .instantiate(&parts.mul0, "u_cs", &Binary { a: cq, b: sk2 })
        .y;
    let cs = positive_normal(m, cs);
    let rows = (0..a_n)
        .map(|r| {
            let slots: Vec<Sig> = (0..2u64)
                .map(|k| {
                    let en = and_all(&[v2, ii2.eq(r as u64), slot2.eq(k)]);
                    m.hold(&format!("cs_r{r}_s{k}"), cs, en)
                })
                .collect();
            // Fault: the other slot's C'.
            let right = mux(slot, slots[1], slots[0]);
            let other = mux(slot, slots[0], slots[1]);
            m.with_fault(cfg.faults, Fault::StaleScale, |_| other, right)
        })
        .collect();
    Some(rows)
}
