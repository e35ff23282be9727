//! The GLB's checker (simulation only: instantiated under `ifdef REGFLASH_ASSERTIONS`, never
//! synthesized). From the K and V descriptors, the memory port's steps and responses and the
//! GLB's grants alone, it keeps its own account of which beats of each region landed from
//! memory under the region's tag (`crate::mem::glb`'s policy, written again here):
//!
//! * `kv_fetched_once`: a K/V beat already in the GLB is never read from memory again (for a
//!   head that fits: its K and V come from memory once);
//! * `glb_hit_landed`: the GLB serves only beats that landed from memory under the same tag
//!   since the last flush (never another head's, never a beat it does not hold).

use crate::ir::iface::Block;
use crate::mem::dma::{DmaConfig, ROW_BYTES_BITS};
use crate::{and_all, group, interface, mux, Design, ModuleBuilder};

interface! {
    /// A K/V channel as the checker sees it: a descriptor taken (`load`, with its base, stride
    /// and row bytes), a memory request accepted (`mem_step`), a hit read granted (`hit`), a
    /// response from memory (`mem_rsp`), an error response (`drop`).
    pub struct GlbChannelWatch { load, base, stride, row_bytes, mem_step, hit, mem_rsp, drop }
}

group! {
    /// What the checker watches.
    pub struct GlbWatch<T> {
        flush;
        k: GlbChannelWatch<T>,
        v: GlbChannelWatch<T>,
    }
}

/// The checker's block (no outputs).
pub type GlbCheckBlock = Block<GlbWatch, ()>;

/// Defines the checker of the DMA `cfg`'s GLB.
pub fn build(d: &mut Design, cfg: &DmaConfig) -> GlbCheckBlock {
    let channel = GlbChannelWatch {
        load: 1,
        base: cfg.addr_bits,
        stride: cfg.addr_bits,
        row_bytes: ROW_BYTES_BITS,
        mem_step: 1,
        hit: 1,
        mem_rsp: 1,
        drop: 1,
    };
    let inputs = GlbWatch {
        flush: 1,
        k: channel,
        v: channel,
    };
    let cfg = *cfg;
    let name = format!("{}_glb_check", cfg.engine_name());
    d.define_block(&name, &inputs, (), |_, m, w| {
        m.doc(
            "GLB checker (simulation only) of the DMA: a K/V beat in the GLB is never read \
             from memory again, and the GLB serves only beats that landed under the same tag. \
             See hdl/src/mem/glb_check.rs.",
        );
        m.simulation_only();
        let k = check(m, &cfg, "k", w.flush, &w.k);
        let v = check(m, &cfg, "v", w.flush, &w.v);
        m.assert_always(
            "kv_fetched_once",
            !(k[0] | v[0]),
            "a K or V beat the GLB holds was read from memory again",
        );
        m.assert_always(
            "glb_hit_landed",
            !(k[1] | v[1]),
            "the GLB served a K or V beat that did not land from memory under its tag",
        );
    })
}

/// One channel's account; returns (a beat the GLB holds is read from memory, a hit for a beat
/// it does not hold).
fn check(
    m: &mut ModuleBuilder,
    cfg: &DmaConfig,
    n: &str,
    flush: crate::Sig,
    c: &GlbChannelWatch,
) -> [crate::Sig; 2] {
    let g = cfg.glb.expect("a GLB");
    let cw = cfg.kv_beat_bits().max(g.mark_bits()) + 1;
    let r =
        |m: &mut ModuleBuilder, what: &str, width| m.reg(&format!("{n}_{what}"), width, Some(0));
    let valid = r(m, "valid", 1);
    let base = r(m, "base", cfg.addr_bits);
    let stride = r(m, "stride", cfg.addr_bits);
    let row_bytes = r(m, "row_bytes", ROW_BYTES_BITS);
    // Beats 0 .. seen - 1 of the region landed from memory under the tag.
    let seen = r(m, "seen", cw);
    // Beats requested (from memory or the GLB) and landed since the descriptor was taken; a
    // hit lands the cycle after its grant.
    let req = r(m, "req", cw);
    let rsp = r(m, "rsp", cw);
    let hit_landing = m.delay(&format!("{n}_hit_landing"), c.hit);
    let same_tag = and_all(&[
        valid.q,
        !flush,
        base.q.eq(c.base),
        stride.q.eq(c.stride),
        row_bytes.q.eq(c.row_bytes),
    ]);
    for (reg, v) in [(base, c.base), (stride, c.stride), (row_bytes, c.row_bytes)] {
        m.set_next(reg, v);
        m.set_enable(reg, c.load);
    }
    let one = m.lit(1, 1);
    let kept = valid.q & !flush & !c.drop;
    m.set_next(valid, mux(c.load, one, kept));
    let zero = m.zero(cw);
    let region = m.lit(cw, g.region_beats as u64);
    let extends = and_all(&[c.mem_rsp, rsp.q.eq(seen.q), rsp.q.lt(region)]);
    let seen_inc = seen.q + 1;
    let seen_kept = mux(same_tag, seen.q, zero);
    m.set_next(seen, mux(c.load, seen_kept, seen_inc));
    m.set_enable(seen, c.load | extends);
    let req_inc = req.q + 1;
    m.set_next(req, mux(c.load, zero, req_inc));
    m.set_enable(req, c.load | c.mem_step | c.hit);
    let rsp_inc = rsp.q + 1;
    m.set_next(rsp, mux(c.load, zero, rsp_inc));
    m.set_enable(rsp, c.load | c.mem_rsp | hit_landing);
    let held = valid.q & req.q.lt(seen.q);
    [c.mem_step & held, c.hit & !held]
}
