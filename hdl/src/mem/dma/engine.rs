//! `dma_engine`: the channels and the memory port.

use super::axi::axi_port;
use super::channel::{self, counter, finish_read};
use super::glb;
use super::simple::simple_port;
use super::{DmaConfig, MemIf, BEAT_COUNTER_BITS};
use crate::ir::iface::Ports;
use crate::mem::axi_check::{self};
use crate::{Design, ModRef, RegHandle};

/// Defines the engine.
pub fn build_engine(d: &mut Design, cfg: &DmaConfig) -> ModRef {
    let check = (cfg.mem_if == MemIf::Axi4).then(|| axi_check::build(d, cfg));
    let glb_blocks = cfg.glb.map(|g| glb::GlbBlocks {
        bank: crate::mem::sram::build(d, &g.bank()),
        check: crate::mem::glb_check::build(d, cfg),
    });
    let cfg = *cfg;
    d.define(&cfg.engine_name(), |d, m| {
        let port = match cfg.mem_if {
            MemIf::Simple => format!(
                "one {}-bit valid/ready memory port, round-robin, up to {} reads in flight",
                cfg.width, cfg.max_outstanding
            ),
            MemIf::Axi4 => format!(
                "a {}-bit AXI4 master (INCR bursts, {} ID bits, up to {} bursts per ID)",
                cfg.width, cfg.axi_id_bits, cfg.axi_outstanding
            ),
        };
        let glb_doc = match cfg.glb {
            Some(g) => format!(
                ", a GLB of {} banks x {} words x {} bits keeping {} beats each of K and V",
                g.banks(),
                g.bank_words,
                g.word_bits,
                g.region_beats
            ),
            None => String::new(),
        };
        m.doc(&format!(
            "dma_engine: Q/K/V{} read channels (2-D block walks, double-buffered) and an O write\n\
             channel on {port}{glb_doc}.\n\
             See hdl/src/mem/dma/ for the protocol and error codes.",
            if cfg.x.is_some() { "/X (scratch)" } else { "" }
        ));
        let hold = m.input("hold", 1);
        let iw = cfg.index_bits;
        // The read channels (Q, K, V, and unfused's scratch channel X), then O.
        let names = ["q", "k", "v", "x"];
        let lands = cfg.landings();
        let cons: Vec<RegHandle> = names[..lands.len()]
            .iter()
            .map(|n| m.reg(&format!("{n}_cons_block"), iw, Some(0)))
            .collect();
        let mut chans = vec![];
        for (i, &name) in names[..lands.len()].iter().enumerate() {
            chans.push(channel::build(
                m,
                &cfg,
                name,
                lands[i].rows,
                lands[i].row_beats,
                Some(cons[i]),
            ));
        }
        chans.push(channel::build(
            m,
            &cfg,
            "o",
            cfg.o_rows,
            cfg.o_row_beats,
            None,
        ));
        // With a GLB, a K/V channel whose next beat is there presents no memory request.
        let regions = cfg
            .glb
            .map(|g| glb::classify(m, &cfg, &g, &mut chans, hold));
        let scratch = regions.as_ref().and_then(|r| r.1.as_ref());
        let port = match cfg.mem_if {
            MemIf::Simple => simple_port(m, &cfg, &chans, hold),
            MemIf::Axi4 => {
                let check = check.as_ref().expect("built for AXI4");
                axi_port(m, &cfg, &chans, hold, check)
            }
        };

        let side = match (cfg.glb, &regions, &glb_blocks) {
            (Some(g), Some((r, _)), Some(b)) => Some(glb::finish(
                (d, m),
                &cfg,
                &g,
                b,
                &chans,
                (r, scratch),
                &port,
            )),
            _ => None,
        };
        // Channel updates: a K/V walker also steps on a GLB hit, and lands it a cycle later.
        let mut land_ports = vec![];
        for (i, ch) in chans.iter().enumerate() {
            let kv = (1..3).contains(&i);
            let (mut step, mut response) = (port.steps[i], port.responses.get(i).copied());
            if let (Some(s), true) = (&side, kv) {
                step = step | s.grants[i - 1];
                response = response.map(|r| r | s.lands[i - 1]);
            }
            // unfused's scratch region: X reads and O writes in the GLB.
            if let Some(x) = side.as_ref().and_then(|s| s.scratch.as_ref()) {
                if i == 3 {
                    step = step | x.x_grant;
                    response = response.map(|r| r | x.x_land);
                } else if i == chans.len() - 1 {
                    step = step | x.o_grant;
                }
            }
            let step = m.name(&format!("{}_accepted", ch.name), step);
            let bus = port.bus_errors.as_ref().map(|e| e[i]);
            let (done_requests, block_requested) = ch.finish_requests(m, &cfg, step, bus);
            if let Some(response) = response {
                let response = m.name(&format!("{}_response", ch.name), response);
                let events = (response, block_requested);
                land_ports.push(finish_read(m, &cfg, ch, cons[i], &lands[i], events));
            } else {
                m.discard(block_requested);
                ch.finish_active(m, port.o_done.unwrap_or(done_requests));
                m.output("o_rd_row", ch.req.row.q);
                m.output("o_rd_beat", ch.req.beat.q);
                // The write channel's single block never ends before its last row.
                m.discard(ch.req.block.q);
            }
        }
        for (ch, [we, buf, row, beat]) in chans.iter().zip(land_ports) {
            m.output(&format!("{}_land_we", ch.name), we);
            m.output(&format!("{}_land_slot", ch.name), buf);
            m.output(&format!("{}_land_row", ch.name), row);
            m.output(&format!("{}_land_beat", ch.name), beat);
        }
        m.output("land_data", port.rsp_data);
        let mut quiet = port.quiet;
        if let Some(s) = side {
            m.output("glb_k_data", s.data[0]);
            m.output("glb_v_data", s.data[1]);
            if let Some(x) = &s.scratch {
                m.output("glb_x_data", x.x_data);
            }
            for (n, e) in s.events.named() {
                m.output(&format!("glb_{n}"), e);
            }
            if let Some(l) = &s.link {
                for (n, e) in l.named() {
                    m.output(&format!("glb_link_{n}"), e);
                }
            }
            quiet = quiet & !s.in_flight;
        }
        let read_beats = counter(m, "read_beats", port.read_beat, BEAT_COUNTER_BITS);
        let write_beats = counter(m, "write_beats", port.write_beat, BEAT_COUNTER_BITS);
        m.output("read_beats", read_beats);
        m.output("write_beats", write_beats);
        m.output("quiet", quiet);
        m.set_latency(1);
    })
}
