//! The DMA's ports: descriptors, landing and staging sides, the memory port (simple or AXI4),
//! and their widths.

use super::{error, DmaConfig, MemIf, BEAT_COUNTER_BITS, ROW_BYTES_BITS};
use crate::link::{LinkReq, LinkState};
use crate::mem::glb::{GlbCtl, GlbEvents, GlbLand, GlbScratch};
use crate::mem::landing::LandingConfig;
use crate::{addr_bits, group, interface};

interface! {
    /// A read channel's descriptor (`start` with base, stride, row_bytes, rows, block_rows) and
    /// block hand-over (`want`, `release`): what the engine takes.
    pub struct ReadDesc { start, base, stride, row_bytes, rows, block_rows, want, release }
}

group! {
    /// A read channel's command to the DMA: the landing buffer's read address and the
    /// descriptor (ports `x_rd_addr`, `x_start`, ...).
    pub struct ReadCmd<T> {
        rd_addr;
        desc => ReadDesc<T>,
    }
}

interface! {
    /// A read channel's status from the engine: descriptor busy, error code, a block landed
    /// (`ready`) in landing slot `slot`, the next block landed too (`next`, in the other
    /// slot), the current block's number, the consumer's wait cycles (later blocks, first
    /// blocks).
    pub struct ChannelStatus { busy, error, ready, next, slot, block, wait, first_wait }
}

group! {
    /// A read channel as the DMA reports it: the landing buffer's read data and the status.
    pub struct ReadChannel<T> {
        rd_data;
        status => ChannelStatus<T>,
    }
}

interface! {
    /// The engine's write into a landing buffer (`x_land_*`): enable, slot, row, beat.
    pub struct LandWrite { we, slot, row, beat }
}

interface! {
    /// The O channel's descriptor.
    pub struct WriteDesc { start, base, stride, row_bytes, rows }
}

interface! {
    /// The O channel's status.
    pub struct WriteStatus { busy, error }
}

interface! {
    /// The O staging banks' write ports (one field per bank, bank 0 in the low bits).
    pub struct StageWrite { en, row, beat, data }
}

interface! {
    /// A memory request (`mem_req_*`): valid (with `ready` the other way), byte address,
    /// write, write data.
    pub struct MemReq { valid, addr, write, wdata }
}

interface! {
    /// The simple memory port's inputs (`mem_*`): the request's ready, the response (valid,
    /// data).
    pub struct MemIn { req_ready, rsp_valid, rsp_data }
}

interface! {
    /// The AXI4 master's inputs (`m_axi_*`).
    pub struct AxiIn { awready, wready, bvalid, bid, bresp, arready, rvalid, rid, rdata, rresp, rlast }
}

interface! {
    /// The AXI4 master's outputs (`m_axi_*`).
    pub struct AxiOut {
        awvalid, awid, awaddr, awlen, awsize, awburst, awlock, awcache, awprot, awqos, wvalid,
        wdata, wstrb, wlast, bready, arvalid, arid, araddr, arlen, arsize, arburst, arlock,
        arcache, arprot, arqos, rready
    }
}

group! {
    /// The engine's GLB side (`glb_*`, with a GLB only): the K and V landing data (hits
    /// land from the GLB, misses from memory) and the GLB's events of the cycle.
    pub struct GlbOut<T> {
        k_data, v_data;
        events => GlbEvents<T>,
        x: Option<GlbLand<T>>,
    }
}

group! {
    /// The DMA's inputs: `hold` (start no new request or burst), the memory port (one of the
    /// two, by `mem_if`), the GLB's flush (with a GLB), the channels' commands and the O
    /// staging writes.
    pub struct DmaIn<T> {
        hold;
        glb: Option<GlbCtl<T>>,
        glb_scratch: Option<GlbScratch<T>>,
        glb_link: Option<LinkReq<T>>,
        mem: Option<MemIn<T>>,
        m_axi: Option<AxiIn<T>>,
        q: ReadCmd<T>,
        k: ReadCmd<T>,
        v: ReadCmd<T>,
        x: Option<ReadCmd<T>>,
        o: WriteDesc<T>,
        o_wr: StageWrite<T>,
    }
}

group! {
    /// The DMA's outputs: the beat counters, `quiet` (nothing in flight on the memory port),
    /// the GLB's events (with a GLB), the memory port (by `mem_if`), the channels' statuses.
    pub struct DmaOut<T> {
        read_beats, write_beats, quiet;
        glb: Option<GlbEvents<T>>,
        glb_link: Option<LinkState<T>>,
        mem_req: Option<MemReq<T>>,
        m_axi: Option<AxiOut<T>>,
        q: ReadChannel<T>,
        k: ReadChannel<T>,
        v: ReadChannel<T>,
        x: Option<ReadChannel<T>>,
        o: WriteStatus<T>,
    }
}

group! {
    /// The engine's inputs: the memory port's ready and response, the descriptors, the O
    /// staging buffer's read data.
    pub struct EngineIn<T> {
        hold, o_rd_data;
        glb: Option<GlbCtl<T>>,
        glb_scratch: Option<GlbScratch<T>>,
        glb_link: Option<LinkReq<T>>,
        mem: Option<MemIn<T>>,
        m_axi: Option<AxiIn<T>>,
        q: ReadDesc<T>,
        k: ReadDesc<T>,
        v: ReadDesc<T>,
        x: Option<ReadDesc<T>>,
        o: WriteDesc<T>,
    }
}

group! {
    /// The engine's outputs: beat counters, the response data for the landing buffers and the
    /// O staging read address; the memory request, the channels' statuses, the landing writes.
    pub struct EngineOut<T> {
        read_beats, write_beats, quiet, land_data, o_rd_row, o_rd_beat;
        glb: Option<GlbOut<T>>,
        glb_link: Option<LinkState<T>>,
        mem_req: Option<MemReq<T>>,
        m_axi: Option<AxiOut<T>>,
        q: ChannelStatus<T>,
        k: ChannelStatus<T>,
        v: ChannelStatus<T>,
        x: Option<ChannelStatus<T>>,
        o: WriteStatus<T>,
        q_land: LandWrite<T>,
        k_land: LandWrite<T>,
        v_land: LandWrite<T>,
        x_land: Option<LandWrite<T>>,
    }
}

impl DmaConfig {
    /// A read channel's descriptor widths.
    pub fn read_desc(&self) -> ReadDesc<u32> {
        ReadDesc {
            start: 1,
            base: self.addr_bits,
            stride: self.addr_bits,
            row_bytes: ROW_BYTES_BITS,
            rows: self.index_bits,
            block_rows: self.index_bits,
            want: 1,
            release: 1,
        }
    }

    /// A read channel's command widths for landing buffer `l`.
    pub fn read_cmd(&self, l: &LandingConfig) -> ReadCmd<u32> {
        ReadCmd {
            rd_addr: l.rd_addr_width(),
            desc: self.read_desc(),
        }
    }

    pub(super) fn channel_status(&self) -> ChannelStatus<u32> {
        ChannelStatus {
            busy: 1,
            error: error::BITS,
            ready: 1,
            next: 1,
            slot: 1,
            block: self.index_bits,
            wait: 32,
            first_wait: 32,
        }
    }

    pub(super) fn read_channel(&self, l: &LandingConfig) -> ReadChannel<u32> {
        ReadChannel {
            rd_data: l.banks() * self.width,
            status: self.channel_status(),
        }
    }

    /// The write channel's descriptor widths.
    pub fn write_desc(&self) -> WriteDesc<u32> {
        WriteDesc {
            start: 1,
            base: self.addr_bits,
            stride: self.addr_bits,
            row_bytes: ROW_BYTES_BITS,
            rows: self.index_bits,
        }
    }

    pub(super) fn land_write(&self, l: &LandingConfig) -> LandWrite<u32> {
        LandWrite {
            we: 1,
            slot: 1,
            row: l.row_bits(),
            beat: l.beat_bits(),
        }
    }

    /// The AXI4 master's input widths.
    pub fn axi_inputs(&self) -> AxiIn<u32> {
        let ib = self.axi_id_bits;
        AxiIn {
            awready: 1,
            wready: 1,
            bvalid: 1,
            bid: ib,
            bresp: 2,
            arready: 1,
            rvalid: 1,
            rid: ib,
            rdata: self.width,
            rresp: 2,
            rlast: 1,
        }
    }

    /// The AXI4 master's output widths.
    pub fn axi_outputs(&self) -> AxiOut<u32> {
        let (ib, a) = (self.axi_id_bits, self.addr_bits);
        AxiOut {
            awvalid: 1,
            awid: ib,
            awaddr: a,
            awlen: 8,
            awsize: 3,
            awburst: 2,
            awlock: 1,
            awcache: 4,
            awprot: 3,
            awqos: 4,
            wvalid: 1,
            wdata: self.width,
            wstrb: self.width / 8,
            wlast: 1,
            bready: 1,
            arvalid: 1,
            arid: ib,
            araddr: a,
            arlen: 8,
            arsize: 3,
            arburst: 2,
            arlock: 1,
            arcache: 4,
            arprot: 3,
            arqos: 4,
            rready: 1,
        }
    }

    /// The GLB's control input (with a GLB).
    fn glb_ctl(&self) -> Option<GlbCtl<u32>> {
        self.glb.map(|_| GlbCtl { flush: 1 })
    }

    /// unfused with a GLB: the scratch region's base and the O descriptor's scratch flag.
    fn glb_scratch(&self) -> Option<GlbScratch<u32>> {
        self.glb
            .filter(|g| g.scratch_beats > 0)
            .map(|_| GlbScratch {
                base: self.addr_bits,
                o_write: 1,
            })
    }

    /// The GLB's bond with spare lanes: its link test's request and probe.
    fn glb_link_req(&self) -> Option<LinkReq<u32>> {
        self.glb.and_then(|g| g.bond).map(|_| LinkReq::widths())
    }

    /// The GLB's bond with spare lanes: its link test's state.
    fn glb_link_state(&self) -> Option<LinkState<u32>> {
        let g = self.glb.filter(|g| g.bond.is_some())?;
        Some(LinkState::widths(g.bond_count_bits()))
    }

    /// The memory port's input widths: the simple port's or the AXI4 master's.
    pub fn mem_inputs(&self) -> (Option<MemIn<u32>>, Option<AxiIn<u32>>) {
        match self.mem_if {
            MemIf::Simple => (
                Some(MemIn {
                    req_ready: 1,
                    rsp_valid: 1,
                    rsp_data: self.width,
                }),
                None,
            ),
            MemIf::Axi4 => (None, Some(self.axi_inputs())),
        }
    }

    /// The memory port's output widths.
    pub fn mem_outputs(&self) -> (Option<MemReq<u32>>, Option<AxiOut<u32>>) {
        match self.mem_if {
            MemIf::Simple => (
                Some(MemReq {
                    valid: 1,
                    addr: self.addr_bits,
                    write: 1,
                    wdata: self.width,
                }),
                None,
            ),
            MemIf::Axi4 => (None, Some(self.axi_outputs())),
        }
    }

    /// The engine's input widths.
    pub fn engine_inputs(&self) -> EngineIn<u32> {
        let (mem, m_axi) = self.mem_inputs();
        EngineIn {
            hold: 1,
            glb: self.glb_ctl(),
            glb_scratch: self.glb_scratch(),
            glb_link: self.glb_link_req(),
            mem,
            m_axi,
            o_rd_data: self.width,
            q: self.read_desc(),
            k: self.read_desc(),
            v: self.read_desc(),
            x: self.x.map(|_| self.read_desc()),
            o: self.write_desc(),
        }
    }

    /// The engine's output widths.
    pub fn engine_outputs(&self) -> EngineOut<u32> {
        let o_rows = addr_bits(self.o_rows);
        let (mem_req, m_axi) = self.mem_outputs();
        EngineOut {
            read_beats: BEAT_COUNTER_BITS,
            write_beats: BEAT_COUNTER_BITS,
            quiet: 1,
            land_data: self.width,
            o_rd_row: o_rows,
            o_rd_beat: self.o_beat_bits(),
            glb: self.glb.map(|g| GlbOut {
                k_data: self.width,
                v_data: self.width,
                events: GlbEvents::widths(&g),
                x: (g.scratch_beats > 0).then_some(GlbLand { data: self.width }),
            }),
            glb_link: self.glb_link_state(),
            mem_req,
            m_axi,
            q: self.channel_status(),
            k: self.channel_status(),
            v: self.channel_status(),
            x: self.x.map(|_| self.channel_status()),
            o: WriteStatus {
                busy: 1,
                error: error::BITS,
            },
            q_land: self.land_write(&self.q),
            k_land: self.land_write(&self.k),
            v_land: self.land_write(&self.v),
            x_land: self.x.map(|x| self.land_write(&x)),
        }
    }

    /// The DMA's input widths.
    pub fn input_widths(&self) -> DmaIn<u32> {
        let banks = self.o_banks();
        let (mem, m_axi) = self.mem_inputs();
        DmaIn {
            hold: 1,
            glb: self.glb_ctl(),
            glb_scratch: self.glb_scratch(),
            glb_link: self.glb_link_req(),
            mem,
            m_axi,
            q: self.read_cmd(&self.q),
            k: self.read_cmd(&self.k),
            v: self.read_cmd(&self.v),
            x: self.x.map(|x| self.read_cmd(&x)),
            o: self.write_desc(),
            o_wr: StageWrite {
                en: banks,
                row: (banks * self.o_local_row_bits()).max(1),
                beat: banks * self.o_beat_bits(),
                data: banks * self.width,
            },
        }
    }

    /// The DMA's output widths.
    pub fn output_widths(&self) -> DmaOut<u32> {
        let (mem_req, m_axi) = self.mem_outputs();
        DmaOut {
            read_beats: BEAT_COUNTER_BITS,
            write_beats: BEAT_COUNTER_BITS,
            quiet: 1,
            glb: self.glb.map(|g| GlbEvents::widths(&g)),
            glb_link: self.glb_link_state(),
            mem_req,
            m_axi,
            q: self.read_channel(&self.q),
            k: self.read_channel(&self.k),
            v: self.read_channel(&self.v),
            x: self.x.map(|x| self.read_channel(&x)),
            o: WriteStatus {
                busy: 1,
                error: error::BITS,
            },
        }
    }
}
