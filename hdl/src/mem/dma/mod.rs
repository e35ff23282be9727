//! The DMA: `dma_engine` (descriptor walkers, arbitration, memory port) and `dma` (the engine
//! with its landing buffers and the O staging buffer).
//!
//! **Memory port**, by `mem_if`. `simple` (valid/ready, `width` bits, byte addresses):
//! `mem_req_valid/ready`, `mem_req_addr`, `mem_req_write`, `mem_req_wdata`; responses
//! `mem_rsp_valid`, `mem_rsp_data` arrive in request order, one per read, and are always
//! accepted. `axi4`: an AXI4 master `m_axi_*` with INCR bursts (see `axi_port` and
//! `axi_check.rs`). Either way `hold` stops new requests (bursts) and `quiet` says nothing is
//! in flight: the core's abort waits for it before resetting the engine.
//!
//! **Read channels** `q`, `k`, `v`. A descriptor (`x_base`, `x_stride` bytes between rows,
//! `x_row_bytes`, `x_rows` in all, `x_block_rows` per block) is taken by a `x_start` pulse. The
//! channel reads the rows block by block, in natural row-major layout, into a double-buffered
//! landing buffer: it fetches block j+1 while the consumer holds block j, never more than one
//! block ahead. `x_ready` says the current block (`x_block`, in slot `x_slot`) has landed; the
//! consumer reads it through the landing buffer's port and pulses `x_release` when done, which
//! frees the buffer for block j+2. A last block may have fewer rows. `x_busy` stays high until
//! the last block is released.
//!
//! **Scratch channel** `x` (unfused only): a fourth read channel of the same kind, with a
//! landing buffer banked by PE row like Q's; it reads S and P back from the scratch region.
//! Channels are arbitrated in the order Q, K, V, X, O (round robin over eight places with
//! five channels); its AXI4 read ID is 3.
//!
//! **Write channel** `o`: the consumer fills the staging buffer (`o_wr_*`), then a descriptor
//! (`o_base`, `o_stride`, `o_row_bytes`, `o_rows`) and `o_start` write its rows to memory;
//! `o_busy` falls when the last beat is accepted (writes are posted).
//!
//! **Descriptor check.** A start while idle takes the descriptor into registers; the channel is
//! busy from then on, and its check decides `CHECK_CYCLES` (2) cycles later: the transfer
//! starts, or the error code is set and the channel is idle again (the span's multiply is
//! spread over the two cycles).
//!
//! **Descriptor errors** (`x_error`, sticky until the next start; the channel stays idle and
//! never hangs): 1 zero size; 2 base, stride or row bytes not a multiple of the beat; 3 rows or
//! row longer than the landing or staging buffer; 4 beyond the address range (2^addr_bits
//! bytes); 5 started while busy (the running transfer continues). AXI4 response errors: 7
//! SLVERR, 8 DECERR (the channel keeps the first).
//!
//! **Arbitration** (simple port): round robin among the channels with a request; reads also
//! need room in the tag FIFO (`max_outstanding` reads in flight), which records which channel
//! each response belongs to. A response walker per channel mirrors its request walk, so addresses are not
//! stored.
//!
//! **Counters**: `read_beats`, `write_beats` (16 bits, wrapping: the core's counter file sums
//! each cycle's difference into 48-bit counters); per read channel `x_wait` (cycles the consumer
//! asserted `x_want` for a block after the first and it had not landed: prefetch should keep
//! this 0) and `x_first_wait` (the same for each transfer's first block).

//!
//! Files: `config` (parameters, `MemIf`, error codes), `bus` (ports and widths), `channel`
//! (descriptors and walkers), `simple` and `axi` (the two memory ports), `engine`
//! (`dma_engine`); this file adds the landing and staging buffers (`dma`).

mod axi;
mod bus;
mod channel;
mod config;
mod engine;
mod glb;
mod simple;

pub use bus::*;
pub use channel::CHECK_CYCLES;
pub use config::*;
pub use engine::build_engine;

use crate::ir::iface::Block;
use crate::mem::landing::{self};
use crate::{addr_bits, cat, mux, mux_index, Design, ModuleBuilder, Sig};

/// The DMA's block.
pub type DmaBlock = Block<DmaIn, DmaOut<u32>>;

/// Defines the DMA: the engine, a landing buffer per read channel, and the O staging buffer.
/// Ports: the engine's, minus its landing and staging sides, plus `x_rd_addr` → `x_rd_data`
/// per read channel (see `landing.rs`) and the staging banks' write ports `o_wr_en`, `o_wr_row`
/// (one unused bit with one row per bank), `o_wr_beat`, `o_wr_data` (one field per bank, bank 0
/// in the low bits). Returned as a typed view: [`DmaIn`] in, [`DmaOut`] out.
pub fn build(d: &mut Design, cfg: &DmaConfig) -> DmaBlock {
    let engine = Block::view(
        build_engine(d, cfg),
        &cfg.engine_inputs(),
        cfg.engine_outputs(),
    );
    let landings: Vec<Block<landing::LandIn, landing::RdData<u32>>> = cfg
        .landings()
        .iter()
        .map(|l| landing::build(d, l))
        .collect();
    let gate = crate::clock_gate::build(d);
    let cfg = *cfg;
    let inputs = cfg.input_widths();
    d.define_block(
        &cfg.module_name(),
        &inputs,
        cfg.output_widths(),
        |_, m, i| {
            m.doc(&format!(
                "dma: dma_engine with double-buffered landing buffers for Q, K and V and the O\n\
             staging buffer ({} rows x {} beats in banks of {} rows).\n\
             See hdl/src/mem/dma/ and hdl/src/mem/landing.rs.",
                cfg.o_rows, cfg.o_row_beats, cfg.o_rows_per_bank
            ));
            m.set_latency(1);
            let o_rd = m.net("o_rd_data", cfg.width);
            let to_engine = EngineIn {
                hold: i.hold,
                glb: i.glb,
                glb_scratch: i.glb_scratch,
                glb_link: i.glb_link,
                mem: i.mem,
                m_axi: i.m_axi,
                o_rd_data: o_rd,
                q: i.q.desc,
                k: i.k.desc,
                v: i.v.desc,
                x: i.x.as_ref().map(|x| x.desc),
                o: i.o,
            };
            let e = m.instantiate(&engine, "u_engine", &to_engine);
            let rd = staging(m, &cfg, &gate, &i.o_wr, (e.o_rd_row, e.o_rd_beat));
            m.drive(o_rd, rd);
            // With a GLB, K and V land from it or from memory: a data bus each.
            let data = [
                e.land_data,
                e.glb.as_ref().map_or(e.land_data, |g| g.k_data),
                e.glb.as_ref().map_or(e.land_data, |g| g.v_data),
                e.glb
                    .as_ref()
                    .and_then(|g| g.x.as_ref())
                    .map_or(e.land_data, |x| x.data),
            ];
            let mut land = |n: usize, cmd: &ReadCmd, w: &LandWrite, status: ChannelStatus| {
                let ins = landing::LandIn {
                    we: w.we,
                    slot: w.slot,
                    row: w.row,
                    beat: w.beat,
                    data: data[n],
                    rd_addr: cmd.rd_addr,
                };
                let name = ["u_q_landing", "u_k_landing", "u_v_landing", "u_x_landing"][n];
                let rd_data = m.instantiate(&landings[n], name, &ins).rd_data;
                ReadChannel { rd_data, status }
            };
            DmaOut {
                read_beats: e.read_beats,
                write_beats: e.write_beats,
                quiet: e.quiet,
                glb: e.glb.as_ref().map(|g| g.events),
                glb_link: e.glb_link,
                mem_req: e.mem_req,
                m_axi: e.m_axi,
                q: land(0, &i.q, &e.q_land, e.q),
                k: land(1, &i.k, &e.k_land, e.k),
                v: land(2, &i.v, &e.v_land, e.v),
                x: match (&i.x, &e.x_land, e.x) {
                    (Some(c), Some(w), Some(st)) => Some(land(3, c, w, st)),
                    _ => None,
                },
                o: e.o,
            }
        },
    )
}

/// The O staging buffer: a bank per `o_rows_per_bank` rows, each with its own write port; the
/// engine reads row `rd_row`, beat `rd_beat` (row r lives in bank r / rows_per_bank at
/// r % rows_per_bank).
fn staging(
    m: &mut ModuleBuilder,
    cfg: &DmaConfig,
    gate: &crate::clock_gate::ClockGate,
    wr: &StageWrite,
    (rd_row, rd_beat): (Sig, Sig),
) -> Sig {
    let banks = cfg.o_banks();
    let (lrb, bb, w) = (cfg.o_local_row_bits(), cfg.o_beat_bits(), cfg.width);
    if lrb == 0 {
        // One row per bank: the row field is a placeholder bit, unused.
        m.discard(wr.row);
    }
    let mut bank_data = vec![];
    for n in 0..banks {
        let beat = wr.beat.slice(n * bb + bb - 1, n * bb);
        let data = wr.data.slice(n * w + w - 1, n * w);
        let idx = if lrb > 0 {
            cat(&[wr.row.slice(n * lrb + lrb - 1, n * lrb), beat])
        } else {
            beat
        };
        // Each entry behind a clock gate opened by its write (`clock_gate::gated_memory`).
        let mem = crate::clock_gate::gated_memory(
            m,
            gate,
            &format!("o_staging{n}"),
            (1 << (lrb + bb), w),
            (wr.en.bit(n), idx, data),
        );
        let local = if lrb == 0 {
            rd_beat
        } else {
            let base = (n * cfg.o_rows_per_bank) as u64;
            let base_lo = m.lit(lrb, base & ((1 << lrb) - 1));
            cat(&[rd_row.trunc(lrb) - base_lo, rd_beat])
        };
        bank_data.push(m.mem_read(mem, local));
    }
    if banks == 1 {
        if lrb == 0 {
            m.discard(rd_row); // one row: its index is always 0
        }
        return bank_data[0];
    }
    let bits = addr_bits(banks);
    let mut sel = m.zero(bits);
    for n in 1..banks {
        let lo = m.lit(rd_row.width(), (n * cfg.o_rows_per_bank) as u64);
        let nl = m.lit(bits, n as u64);
        sel = mux(rd_row.ge(lo), nl, sel);
    }
    mux_index(sel, &bank_data)
}
