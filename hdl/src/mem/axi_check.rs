//! The AXI4 protocol checker of the DMA's master (simulation only: instantiated under
//! `ifdef REGFLASH_ASSERTIONS`, never synthesized). It watches the `m_axi_*` port:
//!
//! * `axi_ar_held`, `axi_aw_held`, `axi_w_held`: a VALID stays high until its READY, with
//!   its payload (ID, address, length; W data and WLAST) unchanged;
//! * `axi_ar_4k`, `axi_aw_4k`: no burst crosses a 4 KiB boundary;
//! * `axi_w_after_aw`, `axi_wlast`: a W beat belongs to the burst whose AW was presented
//!   last (this master opens a write burst's AW before its data and finishes it before the
//!   next AW), and WLAST marks exactly its last beat;
//! * `axi_r_in_flight`, `axi_b_in_flight`: a read beat carries the ID of a channel with a burst
//!   in flight, a write response comes only while a write burst is unanswered.

use super::dma::{AxiIn, AxiOut, DmaConfig, AXI_BOUNDARY, AXI_READ_IDS, AXI_WRITE_ID};
use crate::ir::iface::Block;
use crate::{bits_for, group, mux, or_all, Design, ModuleBuilder, Sig};

group! {
    /// What the checker watches: the master's inputs and outputs, under their port names
    /// without the `m_axi_` prefix.
    pub struct AxiWatch<T> {
        ;
        ins => AxiIn<T>,
        outs => AxiOut<T>,
    }
}

/// The checker's block (no outputs).
pub type AxiCheckBlock = Block<AxiWatch, ()>;

/// Defines the checker of the DMA `cfg`'s AXI4 master.
pub fn build(d: &mut Design, cfg: &DmaConfig) -> AxiCheckBlock {
    let inputs = AxiWatch {
        ins: cfg.axi_inputs(),
        outs: cfg.axi_outputs(),
    };
    let cfg = *cfg;
    let name = format!("{}_axi_check", cfg.engine_name());
    d.define_block(&name, &inputs, (), |_, m, w| {
        m.doc(
            "AXI4 protocol checker (simulation only) of the DMA's master: VALID held with its \
             payload, no 4 KiB crossing, WLAST, responses only for bursts in flight. See \
             hdl/src/mem/axi_check.rs.",
        );
        m.simulation_only();
        check(m, &cfg, &w.ins, &w.outs);
    })
}

fn check(m: &mut ModuleBuilder, cfg: &DmaConfig, i: &AxiIn, o: &AxiOut) {
    // VALID held until READY, payload stable.
    let channels: [(&str, Sig, Sig, Vec<Sig>); 3] = [
        ("ar", o.arvalid, i.arready, vec![o.arid, o.araddr, o.arlen]),
        ("aw", o.awvalid, i.awready, vec![o.awid, o.awaddr, o.awlen]),
        ("w", o.wvalid, i.wready, vec![o.wdata, o.wlast]),
    ];
    let mut new_aw = None;
    for (ch, valid, ready, payload) in channels {
        let waiting = m.reg(&format!("{ch}_waiting"), 1, Some(0));
        m.set_next(waiting, valid & !ready);
        let mut same = vec![];
        for (k, &p) in payload.iter().enumerate() {
            let last = m.reg(&format!("{ch}_last{k}"), p.width(), Some(0));
            m.set_next(last, p);
            same.push(p.eq(last.q));
        }
        let kept = valid & crate::and_all(&same);
        let ok = !waiting.q | kept;
        let what = format!(
            "{} VALID fell or its payload changed before READY",
            ch.to_uppercase()
        );
        m.assert_always(&format!("axi_{ch}_held"), ok, &what);
        if ch == "aw" {
            new_aw = Some(valid & !waiting.q);
        }
    }
    // No burst crosses 4 KiB: offset + beats * beat bytes <= 4096.
    let shift = cfg.beat_shift();
    for (ch, valid, addr, len) in [
        ("ar", o.arvalid, o.araddr, o.arlen),
        ("aw", o.awvalid, o.awaddr, o.awlen),
    ] {
        let w = 13.max(10 + shift);
        let offset = addr.slice(11, 0).zext(w);
        let beats = len.zext(9) + 1;
        let bytes = beats.zext(w) << shift;
        let end = offset + bytes;
        let ok = !valid | end.le(AXI_BOUNDARY);
        let what = format!("an {} burst crosses a 4 KiB boundary", ch.to_uppercase());
        m.assert_always(&format!("axi_{ch}_4k"), ok, &what);
    }
    // W beats: the burst whose AW was presented last, WLAST on its last beat.
    let new_aw = new_aw.expect("the AW channel is watched");
    let owed = m.reg("w_owed", 9, Some(0));
    let w_beat = o.wvalid & i.wready;
    // An AW presented this cycle owes its beats already: its first W may come with it.
    let loaded = o.awlen.zext(9) + 1;
    let now = mux(new_aw, loaded, owed.q);
    let left = now - 1;
    let d = mux(w_beat, left, now);
    m.set_next(owed, d);
    let what = "a new AW came before the previous burst's W beats";
    m.assert_always("axi_w_after_aw", !(new_aw & owed.q.any()), what);
    let ok = !o.wvalid | (now.any() & o.wlast.eq(now.eq(1)));
    let what = "a W beat without its AW, or WLAST not on exactly the burst's last beat";
    m.assert_always("axi_wlast", ok, what);
    // Responses only for bursts in flight.
    let ob = bits_for(256 * cfg.axi_outstanding as u64);
    let ar_take = o.arvalid & i.arready;
    let r_last = (i.rvalid & o.rready) & i.rlast;
    let mut legal = vec![];
    for (n, &id) in AXI_READ_IDS[..cfg.read_channels()].iter().enumerate() {
        let c = m.reg(&format!("reads{n}"), ob, Some(0));
        let up = ar_take & o.arid.eq(id);
        let down = r_last & i.rid.eq(id);
        let inc = c.q + 1;
        let dec = c.q - 1;
        m.set_next(c, mux(up, inc, dec));
        m.set_enable(c, up ^ down);
        legal.push(i.rid.eq(id) & c.q.any());
    }
    let ok = !i.rvalid | or_all(&legal);
    let what = "an R beat with an ID that has no read burst in flight";
    m.assert_always("axi_r_in_flight", ok, what);
    let writes = m.reg("writes", ob, Some(0));
    let up = o.awvalid & i.awready;
    let down = (i.bvalid & o.bready) & i.bid.eq(AXI_WRITE_ID);
    let inc = writes.q + 1;
    let dec = writes.q - 1;
    m.set_next(writes, mux(up, inc, dec));
    m.set_enable(writes, up ^ down);
    let ok = !i.bvalid | (i.bid.eq(AXI_WRITE_ID) & writes.q.any());
    let what = "a write response with no write burst in flight";
    m.assert_always("axi_b_in_flight", ok, what);
    // What no rule needs.
    for s in [
        i.bresp, i.rdata, i.rresp, o.awsize, o.awburst, o.awlock, o.awcache, o.awprot, o.awqos,
        o.wstrb, o.arsize, o.arburst, o.arlock, o.arcache, o.arprot, o.arqos,
    ] {
        m.discard(s);
    }
}
