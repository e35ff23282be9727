//! The cycle model: the core's control, cycle by cycle, without its datapath. It steps the
//! sequencer (tile state machine, phase selection for one array, or two phase streams: reg3d's
//! tiers, or QK and PV interleaved on one array; phase bookkeeping and drain delays), the
//! softmax trigger, the row engine as a busy timer (`PeRowConfig::softmax_cycles`,
//! `readout_cycles`), the readout, the fetch cursors, the DMA's
//! channels (request and response walks, double-buffered landing, round-robin arbitration,
//! the tag FIFO) and the testbench memory (latency, peak bandwidth) exactly as the RTL does,
//! so it predicts `cycles`, `mac_cycles` and the stall counters of a run with no random
//! memory stalls. `verify::attention::check` holds every such RTL run to it, counter for
//! counter.
//!
//! It runs at some tens of millions of cycles a second; problems beyond `EXACT_LIMIT` cycles
//! are estimated from exact runs of smaller problems of the same configuration (`estimate`):
//! a tile's cycles are linear in its blocks once its pipeline is full, and the tiles of a head
//! repeat.

use std::collections::VecDeque;

use hdl::core::readout::Readout as Ro;
use hdl::core::sequencer::Seq;
use hdl::core::CoreParams;
use hdl::mem::dma::CHECK_CYCLES;
use hdl::variants::{Plan, SHome, WholeRows};

use crate::schedule::{needed_keys, tile_scratch_beats, Shape};

/// How the memory behaves (the testbench memory's deterministic knobs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MemTiming {
    /// Cycles from taking a read to presenting its response.
    pub latency: u32,
    /// Peak bytes per cycle; 0: one beat per cycle.
    pub bytes_per_cycle: usize,
}

/// What the model predicts: the core's timing counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Timing {
    pub cycles: u64,
    pub mac_cycles: u64,
    pub stall_kv: u64,
    pub stall_q: u64,
    pub stall_softmax: u64,
    pub stall_other: u64,
    /// GLB hit reads refused by a bank conflict (0 without a GLB).
    pub glb_conflict_stalls: u64,
    /// noc2d: cycles the P path's sender held a flit for want of a credit.
    pub noc_stalls: u64,
}

impl Timing {
    /// The counters by the core's names.
    pub fn counters(&self) -> [(&'static str, u64); 8] {
        [
            ("cycles", self.cycles),
            ("mac_cycles", self.mac_cycles),
            ("stall_kv", self.stall_kv),
            ("stall_q", self.stall_q),
            ("stall_softmax", self.stall_softmax),
            ("stall_other", self.stall_other),
            ("glb_conflict_stalls", self.glb_conflict_stalls),
            ("noc_stalls", self.noc_stalls),
        ]
    }
}

/// A beat walk over rows (the DMA's request and response walkers).
#[derive(Clone, Copy, Debug, Default)]
struct Walk {
    beat: u64,
    row: u64,
    rows_left: u64,
    block: u64,
}

impl Walk {
    /// (this beat ends a row, this row ends a block).
    fn ends(&self, row_beats: u64, block_rows: u64) -> (bool, bool) {
        (
            self.beat == row_beats - 1,
            self.row == block_rows - 1 || self.rows_left == 1,
        )
    }

    fn step(&mut self, row_beats: u64, block_rows: u64) {
        let (last_beat, block_end) = self.ends(row_beats, block_rows);
        if last_beat {
            self.beat = 0;
            self.row = if block_end { 0 } else { self.row + 1 };
            self.rows_left -= 1;
            self.block += block_end as u64;
        } else {
            self.beat += 1;
        }
    }
}

/// A DMA read channel (Q, K or V): descriptor, walks, landing flags, consumer's block.
#[derive(Clone, Copy, Debug, Default)]
struct ReadCh {
    active: bool,
    block_rows: u64,
    /// Beats per row of the descriptor (the scratch channel's vary: S or P rows).
    row_beats: u64,
    req: Walk,
    rsp: Walk,
    landed: [bool; 2],
    cons: u64,
    /// Beats requested (from memory or the GLB) and landed since the descriptor was taken.
    req_beats: u64,
    rsp_beats: u64,
    /// A taken descriptor under check (dma/channel.rs `check_descriptor`): the edges until it
    /// loads, its (rows, block rows, row beats) and its K/V head for the GLB.
    check: Option<(u32, (ReadLoad, u64))>,
}

impl ReadCh {
    /// Busy (its `busy` output): a descriptor under check or a transfer.
    fn busy(&self) -> bool {
        self.active || self.check.is_some()
    }

    fn ready(&self) -> bool {
        self.active && self.landed[(self.cons & 1) as usize]
    }

    /// The block after the current one has landed in the other slot (dma.rs `x_next`).
    fn next_ready(&self) -> bool {
        self.active && self.landed[((self.cons + 1) & 1) as usize]
    }

    fn wants(&self) -> bool {
        self.active && self.req.rows_left > 0 && self.req.block - self.cons < 2
    }
}

/// A read descriptor as the fetch unit starts it: (rows, block rows, beats per row).
type ReadLoad = (u64, u64, u64);

/// An O descriptor as taken: its rows, beats per row, and for a scratch write its first
/// word in the scratch region.
#[derive(Clone, Copy, Debug)]
struct OLoad {
    rows: u64,
    row_beats: u64,
    word: Option<u64>,
}

/// A GLB region (K's or V's, `crate::glb`): valid, its K/V head (the RTL tags the descriptor's
/// base, stride and row bytes, which within a launch name the K/V head), its high-water mark.
#[derive(Clone, Copy, Debug, Default)]
struct Region {
    valid: bool,
    tag: u64,
    filled: u64,
}

/// A fetch cursor of K or V: the (head, tile) its next descriptor is for.
#[derive(Clone, Copy, Debug, Default)]
struct Cursor {
    head: u64,
    q_base: u64,
    /// Still since the last edge (fetch.rs: the keys it needs are registered, a cycle after a
    /// move).
    settled: bool,
}

/// The control state of the core and its memory.
struct Model<'a> {
    p: &'a CoreParams,
    s: Shape,
    mem: MemTiming,
    /// Two phase streams: reg3d's tiers, or interleaved on one array (`interleaved`: QK never
    /// steps two cycles running, `qk_went`: it stepped last cycle).
    streams: bool,
    interleaved: bool,
    qk_went: bool,
    /// Cycles from a QK phase's last step to its S being ready (`PeRowConfig::s_ready_latency`),
    /// asked every cycle, so computed once.
    s_ready_latency: u32,
    two_port: bool,
    /// The variant's plan. S in memory (unfused): every QK and max pass (S written out), every
    /// exp pass (S read back, P written out), every PV (P read back). An S array of whole rows
    /// that spills (rowfused with `spill`): the blocks past its `held` go out after their max
    /// pass and come back through the scratch channel for their exp pass.
    plan: Plan,
    /// A two-pass softmax (rowfused, unfused): every QK and max pass of a tile first, then exp
    /// pass and PV per block.
    two_pass: bool,
    held: u64,
    x_phase: u8,
    qk_steps: u64,
    pv_steps: u64,
    row_beats: u64,
    beat: u64,
    // Sequencer.
    state: Seq,
    head: u64,
    q_base: u64,
    nblk: u64,
    /// The QK phase (one stream: the one phase) and its step; the PV stream.
    in_qk: bool,
    in_pv: bool,
    qk_step: u64,
    pv_step: u64,
    ph_blk: u64,
    qk_issued: u64,
    pv_issued: u64,
    qk_done: u64,
    pv_done: u64,
    sm_done: u64,
    /// Shift registers of the QK and PV drain delays (bit i: the pulse i + 1 cycles ago).
    qk_drain: u64,
    pv_drain: u64,
    /// Narrow S links (pe_tier.rs `s_tier_walk`): beats of the walk left, a landed block
    /// waiting, and the walks' last beats on their way up (bit i: i + 1 cycles ago).
    walk: bool,
    walk_left: u64,
    walk_pend: bool,
    walk_fin: u64,
    s_full: bool,
    sm_running: bool,
    sm_seen: bool,
    done: bool,
    // Row engine: busy cycles left; buf2d's copy ends (s_free) when `copy_left` reaches 1.
    eng_left: u64,
    copy_left: u64,
    // Readout.
    ro: Ro,
    ro_seen: bool,
    ro_rows: u64,
    // Fetch cursors.
    qf_head: u64,
    /// The Q cursor has been still a cycle (fetch.rs: its descriptor's base is registered).
    qf_settled: bool,
    kf: Cursor,
    vf: Cursor,
    // DMA: the read channels Q, K, V (and X), then O.
    ch: [ReadCh; 4],
    reads: usize,
    o_active: bool,
    /// A taken O descriptor under check: the edges until it loads, and the load.
    o_check: Option<(u32, OLoad)>,
    o_req: Walk,
    o_row_beats: u64,
    /// O's rows, in the output format.
    o_tile_beats: u64,
    rr: usize,
    glb: Option<hdl::mem::glb::GlbConfig>,
    regions: [Region; 2],
    /// The GLB's K/V turn (false: K first) and the hits landing this cycle (granted last).
    prio: bool,
    glb_land: [bool; 2],
    /// unfused with a GLB: the scratch beats it holds (0: none), X's hit landing this cycle,
    /// whether O's descriptor writes the scratch region and its next beat's word there.
    scratch_region: u64,
    x_land: bool,
    o_scratch: bool,
    o_word: u64,
    tags: VecDeque<usize>,
    in_flight: VecDeque<u64>,
    credit: u64,
    /// noc2d: the P path between the arrays.
    noc: Option<Noc>,
    cycle: u64,
    t: Timing,
}

/// noc2d's P path (`kernels::noc::Path`, the RTL's model cycle by cycle): the rows' writes
/// due (the cycle and the bank address), the blocks landed in the tile.
struct Noc {
    path: kernels::noc::Path,
    writes: VecDeque<(u64, u32)>,
    arrived: u64,
    zeros: Vec<u32>,
}

impl Noc {
    /// The path at this cycle's edge with the rows' write due now, if any: whether a block's
    /// last word lands, and whether the sender waited for a credit.
    fn edge(&mut self, cycle: u64) -> (bool, bool) {
        let due = self.writes.front().is_some_and(|w| w.0 == cycle);
        if !due && self.path.idle() {
            return (false, false);
        }
        let waddr = if due {
            self.writes.pop_front().expect("due").1
        } else {
            0
        };
        let w = kernels::noc::PathIn {
            we: due,
            waddr,
            wdata: &self.zeros,
        };
        let o = self
            .path
            .step(w)
            .unwrap_or_else(|e| panic!("the P path at cycle {cycle}: {e}"));
        (o.arrived, o.stalled)
    }
}

const Q: usize = 0;
const K: usize = 1;
const V: usize = 2;
const X: usize = 3;
const SCRATCH: usize = hdl::mem::glb::SCRATCH;

impl<'a> Model<'a> {
    fn new(p: &'a CoreParams, s: Shape, mem: MemTiming) -> Self {
        let (qk, pv) = p.block_steps();
        let beat = (p.dma.width / 8) as u64;
        Model {
            p,
            s,
            mem,
            streams: p.row.two_streams(),
            interleaved: p.row.interleaved(),
            qk_went: false,
            s_ready_latency: p.row.s_ready_latency(),
            two_port: !p.row.plan().shared_p_port(),
            plan: p.row.plan(),
            two_pass: p.row.two_pass(),
            held: p.row.s_blocks() as u64,
            x_phase: 0,
            qk_steps: qk as u64,
            pv_steps: pv as u64,
            row_beats: p.operand_row_bytes() as u64 / beat,
            beat,
            state: Seq::Idle,
            head: 0,
            q_base: 0,
            nblk: 0,
            in_qk: false,
            in_pv: false,
            qk_step: 0,
            pv_step: 0,
            ph_blk: 0,
            qk_issued: 0,
            pv_issued: 0,
            qk_done: 0,
            pv_done: 0,
            sm_done: 0,
            qk_drain: 0,
            pv_drain: 0,
            walk: p.row.s_walk(),
            walk_left: 0,
            walk_pend: false,
            walk_fin: 0,
            s_full: false,
            sm_running: false,
            sm_seen: false,
            done: false,
            eng_left: 0,
            copy_left: 0,
            ro: Ro::Idle,
            ro_seen: false,
            ro_rows: 0,
            qf_head: 0,
            qf_settled: false,
            kf: Cursor::default(),
            vf: Cursor::default(),
            ch: [ReadCh::default(); 4],
            reads: p.dma.read_channels(),
            o_active: false,
            o_check: None,
            o_req: Walk::default(),
            o_row_beats: 0,
            o_tile_beats: (s.out_bytes * s.head_dim) as u64 / beat,
            rr: 0,
            glb: p.dma.glb,
            regions: [Region::default(); 2],
            prio: false,
            glb_land: [false; 2],
            scratch_region: p.dma.glb.map_or(0, |g| g.scratch_beats as u64),
            x_land: false,
            o_scratch: false,
            o_word: 0,
            tags: VecDeque::new(),
            in_flight: VecDeque::new(),
            credit: beat,
            noc: p.noc_path().map(|c| Noc {
                path: kernels::noc::Path::new(c),
                writes: VecDeque::new(),
                arrived: 0,
                zeros: vec![0; c.rows as usize],
            }),
            cycle: 0,
            t: Timing::default(),
        }
    }

    /// The O channel is busy (its `o_busy`): a descriptor under check or a transfer.
    fn o_busy(&self) -> bool {
        self.o_active || self.o_check.is_some()
    }

    fn keys(&self, q_base: u64) -> u64 {
        let s = &self.s;
        needed_keys(
            s.q_len,
            s.k_len,
            s.causal,
            q_base as usize,
            self.p.br() as usize,
        ) as u64
    }

    /// The DMA's round-robin places: its channels (the read channels and O), 4 or 8.
    fn rr_places(&self) -> usize {
        (self.reads + 1).max(4).next_power_of_two()
    }

    /// unfused: beats of a block row of S, or of P (`p`).
    fn scratch_row_beats(&self, p: bool) -> u64 {
        let (sb, pb) = self.p.row.scratch_row_bytes();
        (if p { pb } else { sb }) as u64 / self.beat
    }

    fn tile_rows(&self) -> u64 {
        (self.q_base + self.p.br() as u64)
            .min(self.s.q_len as u64)
            .saturating_sub(self.q_base)
    }

    /// One clock cycle: every combinational decision from the registers (the softmax trigger,
    /// the phase selection, the tile state machine, the readout, the fetch unit, the DMA's
    /// arbitration), the counters, then the clock edge.
    fn cycle(&mut self, start: bool) {
        let go = start && self.state == Seq::Idle;
        // The memory response presented this cycle, and its channel.
        let response = match self.in_flight.front() {
            Some(&due) if due <= self.cycle => Some(self.tags[0]),
            _ => None,
        };
        let ready = [
            self.ch[Q].ready(),
            self.ch[K].ready(),
            self.ch[V].ready(),
            self.ch[X].ready(),
        ];
        let next = [self.ch[K].next_ready(), self.ch[V].next_ready()];
        let sm = self.softmax_trigger();
        let ph = self.phases(&ready, next, &sm);
        self.count(go, &ready, &ph);
        let tile = self.tile(go, &ready);
        let fetch = self.fetch(&ph, &tile, &sm);
        let hits = self.hit_mode();
        let scratch = self.scratch_mode();
        let glb = self.glb_grants(response, hits, scratch);
        let accept = self.arbitrate(hits, scratch);
        // ---- the clock edge ----
        if go {
            self.regions.iter_mut().for_each(|r| r.valid = false);
        }
        self.dma_edge(accept, response, &ready, &fetch, &glb);
        self.control_edge(go, &sm, &ph, &tile, &fetch);
        self.cycle += 1;
    }

    /// The softmax trigger (sequencer.rs `softmax_trigger`).
    fn softmax_trigger(&self) -> Softmax {
        let rows_busy = self.eng_left > 0;
        let first = self.sm_done == 0;
        let p_turn = self.two_port || self.streams || !self.in_pv;
        // rowfused: the max passes of blocks 0 .. nblk − 1, then their exp passes.
        let second = self.two_pass && self.sm_done >= self.nblk;
        let blk = self.sm_done - if second { self.nblk } else { 0 };
        let past = self.plan.spills() && blk >= self.held;
        let landed = self.x_phase == 1 && self.ch[X].ready();
        let bank_free = self.pv_issued + 1 >= blk;
        // unfused: a pass writes its block through the O channel (free once the last write is
        // done); an exp pass reads its S from the scratch channel. rowfused's spill: the same
        // for a block past the S arrays, whose exp pass also waits for P as rowfused's does.
        let p_free = match self.plan.s {
            SHome::Memory => !self.o_busy() && (!second || landed),
            SHome::Array {
                rows: Some(WholeRows { spill: true, .. }),
            } if past => match second {
                true => bank_free && landed,
                false => !self.o_busy(),
            },
            SHome::Array { rows: Some(_) } => bank_free || !second,
            SHome::Registers | SHome::SoftmaxTier { .. } | SHome::Array { rows: None } => bank_free,
        };
        let go = self.state == Seq::Run
            && self.sm_done < self.nblk * (1 + self.two_pass as u64)
            && (self.qk_done > self.sm_done || second)
            && p_free
            && (self.ro == Ro::Idle || !first)
            && !self.sm_running
            && !rows_busy
            && p_turn;
        Softmax {
            go,
            first,
            second,
            past,
            finished: self.sm_running && self.sm_seen && !rows_busy,
        }
    }

    /// Phase selection: one phase at a time (`phases`) or two streams (`phases_streams`).
    fn phases(&self, ready: &[bool; 4], next: [bool; 2], sm: &Softmax) -> Phases {
        let s_run = self.state == Seq::Run;
        // Which phase steps: both streams in reg3d, QK unless it stepped last cycle and else
        // PV when interleaved, the one phase in 2-D.
        let qk_go = self.in_qk && !(self.interleaved && self.qk_went);
        let pv_go = self.in_pv && !(self.interleaved && qk_go);
        let qk_last = qk_go && self.qk_step == self.qk_steps - 1;
        let pv_last = pv_go && self.pv_step == self.pv_steps - 1;
        let qk_issued_n = self.qk_issued + qk_last as u64;
        let pv_issued_n = self.pv_issued + pv_last as u64;
        let qk_more = qk_issued_n < self.nblk;
        let pv_more = pv_issued_n < qk_issued_n;
        let sm_ahead = match self.plan.s {
            SHome::Memory => self.x_phase == 2 && ready[X],
            SHome::Registers | SHome::SoftmaxTier { .. } | SHome::Array { .. } => {
                self.sm_done > pv_issued_n + self.two_pass as u64 * self.nblk
            }
        };
        // noc2d: a PV also waits for its block's P to land across the NoC.
        let sm_ahead = sm_ahead && self.noc.as_ref().is_none_or(|n| n.arrived > pv_issued_n);
        let s_free_in = self.plan.s_in_sram() && self.copy_left == 1;
        let mut ph = Phases {
            qk_go,
            pv_go,
            qk_last,
            pv_last,
            qk_issued_n,
            pv_issued_n,
            pv_more,
            sm_ahead,
            s_free_in,
            ..Phases::default()
        };
        if self.streams {
            let slot_free = qk_issued_n < self.sm_done + 2;
            // A tier's next block may start in its current block's last step when the DMA
            // has already landed it in the other slot.
            let k_ok = if qk_last { next[0] } else { ready[K] };
            let v_ok = if pv_last { next[1] } else { ready[V] };
            let qk_free = !self.in_qk || qk_last;
            let pv_free = !self.in_pv || pv_last;
            ph.start_qk = s_run && qk_free && qk_more && slot_free && k_ok && ready[Q];
            ph.start_pv = s_run && pv_free && pv_more && sm_ahead && v_ok;
            ph.waiting = s_run && !(qk_go || pv_go);
            ph.want_qk = qk_more;
            ph.want_pv = !qk_more;
            ph.s_free = slot_free;
            ph.p_free = true;
        } else {
            let no_phase = !(self.in_qk || self.in_pv);
            let choose = s_run && (no_phase || qk_last || pv_last);
            ph.want_qk = qk_more && (self.two_pass || qk_issued_n < pv_issued_n + 2);
            ph.want_pv = !ph.want_qk;
            ph.s_free = match self.plan.s {
                // Two S blocks in the PE registers: QK(j + 2) waits for the max pass of j.
                SHome::Memory => qk_issued_n < self.sm_done + 2,
                SHome::Array { .. } => !self.s_full || s_free_in,
                SHome::Registers | SHome::SoftmaxTier { .. } => true,
            };
            ph.p_free = self.two_port || !(self.sm_running || sm.go);
            let qk_can = ph.want_qk && ready[K] && ready[Q] && ph.s_free && !qk_last;
            let pv_can = ph.want_pv && pv_more && sm_ahead && ready[V] && ph.p_free && !pv_last;
            ph.start_qk = choose && qk_can;
            ph.start_pv = choose && pv_can;
            ph.waiting = s_run && no_phase;
        }
        ph
    }

    /// The timing counters (counters.rs): busy cycles, MAC cycles, and each idle cycle's one
    /// stall cause.
    fn count(&mut self, go: bool, ready: &[bool; 4], ph: &Phases) {
        if self.state == Seq::Idle || go {
            return;
        }
        self.t.cycles += 1;
        if ph.qk_go || ph.pv_go {
            self.t.mac_cycles += 1;
            return;
        }
        let qk_wait = ph.waiting && ph.want_qk;
        let pv_wait = ph.waiting && ph.want_pv && ph.pv_more;
        let need_kv = (qk_wait && !ready[K]) || (pv_wait && ph.sm_ahead && !ready[V]);
        let need_q = qk_wait && ready[K] && !ready[Q];
        let need_sm = (pv_wait && !ph.sm_ahead)
            || (qk_wait && ready[K] && ready[Q] && !ph.s_free)
            || (pv_wait && ph.sm_ahead && ready[V] && !ph.p_free);
        let stall = if need_kv {
            &mut self.t.stall_kv
        } else if need_q {
            &mut self.t.stall_q
        } else if need_sm {
            &mut self.t.stall_softmax
        } else {
            &mut self.t.stall_other
        };
        *stall += 1;
    }

    /// The main state machine's decisions (sequencer.rs `main_fsm`) and the readout's
    /// (readout.rs).
    fn tile(&self, go: bool, ready: &[bool; 4]) -> Tile {
        let empty = self.nblk == 0;
        let ro_idle = self.ro == Ro::Idle;
        let rows_busy = self.eng_left > 0;
        let end_ok = self.pv_done >= self.nblk && ro_idle;
        let go_wait = self.state == Seq::TileGo && empty && !ready[Q];
        let tiles_done = self.q_base >= self.s.q_len as u64;
        let fin_ok = ro_idle && !self.o_busy();
        let next = match self.state {
            Seq::Idle if go => Seq::Head,
            Seq::Head if self.head >= self.s.heads as u64 => Seq::Finish,
            Seq::Head => Seq::Tile,
            Seq::Tile if tiles_done => Seq::Head,
            Seq::Tile => Seq::Plan,
            Seq::Plan => Seq::TileGo,
            Seq::TileGo if !go_wait => Seq::Run,
            Seq::Run if self.pv_issued >= self.nblk => Seq::End,
            Seq::End if end_ok => Seq::Tile,
            Seq::Finish if fin_ok => Seq::Idle,
            s => s,
        };
        Tile {
            next,
            finish: self.state == Seq::Finish && fin_ok,
            go_once: self.state == Seq::TileGo && !go_wait,
            head_next: self.state == Seq::Tile && tiles_done,
            handoff: self.state == Seq::End && end_ok,
            ro_go: self.ro == Ro::Pend && !rows_busy && !self.o_busy(),
            ro_finished: self.ro == Ro::Run && self.ro_seen && !rows_busy,
            o_start: self.ro == Ro::Write && !self.o_busy(),
        }
    }

    /// The fetch unit (fetch.rs): the channels' releases and descriptors, the cursors' moves.
    fn fetch(&self, ph: &Phases, tile: &Tile, sm: &Softmax) -> Fetch {
        let (br, bc) = (self.p.br() as u64, self.p.bc() as u64);
        let (heads, q_len) = (self.s.heads as u64, self.s.q_len as u64);
        let running = self.state != Seq::Idle;
        let q_start = running && self.qf_head < heads && !self.ch[Q].busy() && self.qf_settled;
        let q_rel =
            (ph.qk_last && self.ph_blk + 1 == self.nblk) || (tile.go_once && self.nblk == 0);
        // A K or V cursor takes its next tile when its channel is idle (a descriptor when the
        // tile needs keys), or moves to the next head.
        let cursor = |c: &Cursor, active: bool| {
            let on = running && c.head < heads;
            let head_over = c.q_base >= q_len;
            (on && !head_over && !active && c.settled, on && head_over)
        };
        let (k_take, k_next_head) = cursor(&self.kf, self.ch[K].busy());
        let (v_take, v_next_head) = cursor(&self.vf, self.ch[V].busy());
        let (k_need, v_need) = (self.keys(self.kf.q_base), self.keys(self.vf.q_base));
        // The scratch channel (sequencer.rs `scratch`), once the O channel and it are quiet:
        // unfused reads the tile's S back once the max passes' writes are done, then its P once
        // the exp passes' are; rowfused's spill reads the blocks past the S arrays back once
        // every max pass is done.
        let (x_load, x_rel) = if self.plan.scratch() {
            let rows = self.tile_rows();
            let quiet = self.state == Seq::Run && !self.o_busy() && !self.ch[X].busy();
            // (start, blocks read back, a P read) and the release of a landed block.
            let (go, blocks, p_go, rel) = if self.plan.s_in_memory() {
                let s_go = quiet && self.x_phase == 0 && self.nblk > 0 && self.sm_done == self.nblk;
                let p_go = quiet && self.x_phase == 1 && self.sm_done == 2 * self.nblk;
                let rel = match self.x_phase {
                    2 => ph.pv_last,
                    _ => sm.finished && sm.second,
                };
                (s_go || p_go, self.nblk, p_go, rel)
            } else {
                let go = quiet
                    && self.x_phase == 0
                    && self.nblk > self.held
                    && self.sm_done >= self.nblk;
                let rel = sm.finished && sm.second && sm.past;
                (go, self.nblk.saturating_sub(self.held), false, rel)
            };
            let mask = (1u64 << self.p.index_bits) - 1;
            let beats = self.scratch_row_beats(p_go);
            (go.then_some(((blocks * rows) & mask, rows, beats)), rel)
        } else {
            (None, false)
        };
        Fetch {
            release: [q_rel, ph.qk_last, ph.pv_last, x_rel],
            load: [
                q_start.then_some((q_len, br, self.row_beats)),
                (k_take && k_need > 0).then_some((k_need, bc, self.row_beats)),
                (v_take && v_need > 0).then_some((v_need, bc, self.row_beats)),
                x_load,
            ],
            q_start,
            kv: [(k_take, k_next_head), (v_take, v_next_head)],
            kv_tag: [self.kf.head, self.vf.head].map(|h| h / self.s.kv_group.max(1) as u64),
        }
    }

    /// Whether K's and V's next beats are in the GLB (hit mode: no memory request).
    fn hit_mode(&self) -> [bool; 2] {
        std::array::from_fn(|c| {
            let r = &self.regions[c];
            r.valid && self.ch[K + c].req_beats < r.filled
        })
    }

    /// unfused with a GLB: whether X's and O's next beats are in the GLB's scratch region (X
    /// walks the region from its start; O's scratch writes from their block's word).
    fn scratch_mode(&self) -> [bool; 2] {
        let r = self.scratch_region;
        [self.ch[X].req_beats < r, self.o_scratch && self.o_word < r]
    }

    /// The GLB's decisions this cycle (glb.rs): the fill of this cycle's K/V response if it
    /// lies inside its region, O's scratch write (unless the fill is in its group), the K and
    /// V hit reads granted (a write takes its group with one-port banks; K and V in one group
    /// take turns), then X's scratch read in a group still free.
    fn glb_grants(
        &mut self,
        response: Option<usize>,
        hits: [bool; 2],
        scratch: [bool; 2],
    ) -> GlbStep {
        let Some(g) = self.glb else {
            return GlbStep::default();
        };
        let region = g.region_beats as u64;
        let fill = response.filter(|&c| {
            (c == K || c == V) && self.regions[c - K].valid && self.ch[c].rsp_beats < region
        });
        let fill_group = fill.map(|c| g.place(c - K, self.ch[c].rsp_beats).0);
        let o_want = scratch[1] && self.o_active && self.o_req.rows_left > 0;
        let o_group = g.place(SCRATCH, self.o_word).0;
        let o_grant = o_want && fill_group != Some(o_group);
        let busy =
            |grp: u64| g.ports == 1 && (fill_group == Some(grp) || (o_grant && o_group == grp));
        let want: [bool; 2] = std::array::from_fn(|c| hits[c] && self.ch[K + c].wants());
        let group: [u64; 2] = std::array::from_fn(|c| g.place(c, self.ch[K + c].req_beats).0);
        let ok: [bool; 2] = std::array::from_fn(|c| want[c] && !busy(group[c]));
        let clash = ok[0] && ok[1] && group[0] == group[1];
        // The loser of the last clash goes first (`prio`: V's turn).
        let grant = [
            ok[0] && !(clash && self.prio),
            ok[1] && (self.prio || !clash),
        ];
        if clash {
            self.prio = grant[0];
        }
        let x_want = scratch[0] && self.ch[X].wants();
        let x_group = g.place(SCRATCH, self.ch[X].req_beats).0;
        let x_grant = x_want && !busy(x_group) && !(0..2).any(|c| grant[c] && group[c] == x_group);
        self.t.glb_conflict_stalls += (0..2).filter(|&c| want[c] && !grant[c]).count() as u64
            + (x_want && !x_grant) as u64
            + (o_want && !o_grant) as u64;
        GlbStep {
            fill,
            grant,
            x_grant,
            o_grant,
        }
    }

    /// The DMA's grant this cycle, if the memory takes it: round robin from `rr` over the
    /// channels with a request (reads also need a tag; K and V in hit mode have none).
    fn arbitrate(&self, hits: [bool; 2], scratch: [bool; 2]) -> Option<usize> {
        let room = (self.tags.len() as u64) < self.p.dma.max_outstanding as u64;
        // The read channels, then O; round robin over 4 places, or 8 with the X channel.
        // On the stack: the model asks every cycle.
        let mut reqs = [false; 8];
        reqs[Q] = self.ch[Q].wants() && room;
        reqs[K] = self.ch[K].wants() && room && !hits[0];
        reqs[V] = self.ch[V].wants() && room && !hits[1];
        let mut o = 3;
        if self.reads > 3 {
            reqs[3] = self.ch[X].wants() && room && !scratch[0];
            o = 4;
        }
        reqs[o] = self.o_active && self.o_req.rows_left > 0 && !scratch[1];
        let n = self.rr_places();
        debug_assert!(n > o && n <= reqs.len());
        let grant = (self.rr..n)
            .find(|&c| reqs[c])
            .or_else(|| (0..n).find(|&c| reqs[c]));
        grant.filter(|_| self.credit >= self.beat)
    }

    /// The DMA's and the memory's registers at the edge: the accepted request, the response,
    /// the channels' walks, landing flags and consumers, descriptors taken, the O channel.
    fn dma_edge(
        &mut self,
        accept: Option<usize>,
        response: Option<usize>,
        ready: &[bool; 4],
        fetch: &Fetch,
        glb: &GlbStep,
    ) {
        for c in 0..2 {
            if glb.grant[c] {
                let ch = &mut self.ch[K + c];
                ch.req.step(ch.row_beats, ch.block_rows);
                ch.req_beats += 1;
            }
        }
        // A fill comes with a response, so never in the cycle its channel takes a descriptor
        // (a channel loads only when idle): the RTL's load-before-fill order cannot differ.
        if let Some(c) = glb.fill {
            self.regions[c - K].filled = self.ch[c].rsp_beats + 1;
        }
        let hit_landing = self.glb_land;
        self.glb_land = glb.grant;
        let x_landing = self.x_land;
        self.x_land = glb.x_grant;
        if glb.x_grant {
            let ch = &mut self.ch[X];
            ch.req.step(ch.row_beats, ch.block_rows);
            ch.req_beats += 1;
        }
        if glb.o_grant || accept == Some(self.reads) {
            let last = self.o_req.ends(self.o_row_beats, u64::MAX).0 && self.o_req.rows_left == 1;
            self.o_req.step(self.o_row_beats, u64::MAX);
            self.o_active &= !last;
            self.o_word += 1;
        }
        if let Some(g) = accept {
            self.rr = (g + 1) % self.rr_places();
            self.credit -= self.beat;
            if g < self.reads {
                self.tags.push_back(g);
                self.in_flight
                    .push_back(self.cycle + self.mem.latency as u64);
                let c = &mut self.ch[g];
                c.req.step(c.row_beats, c.block_rows);
                c.req_beats += 1;
            }
        }
        if response.is_some() {
            self.in_flight.pop_front();
            self.tags.pop_front();
        }
        let bpc = match self.mem.bytes_per_cycle {
            0 => self.beat,
            b => b as u64,
        };
        self.credit = (self.credit + bpc).min(self.beat);
        for (c, ch) in self.ch.iter_mut().enumerate() {
            let rb = ch.row_beats;
            let from_glb = ((c == K || c == V) && hit_landing[c - K]) || (c == X && x_landing);
            let landed = if response == Some(c) || from_glb {
                let (last_beat, block_end) = ch.rsp.ends(rb, ch.block_rows);
                let buf = (ch.rsp.block & 1) as usize;
                ch.rsp.step(rb, ch.block_rows);
                ch.rsp_beats += 1;
                (last_beat && block_end).then_some(buf)
            } else {
                None
            };
            let done = ch.active && ch.rsp.rows_left == 0 && ch.cons == ch.rsp.block;
            // A descriptor taken CHECK_CYCLES edges ago loads when its check decides.
            if let Some(((rows, block_rows, row_beats), tag)) = decided(&mut ch.check) {
                let walk = Walk {
                    rows_left: rows,
                    ..Walk::default()
                };
                *ch = ReadCh {
                    active: true,
                    block_rows,
                    row_beats,
                    req: walk,
                    rsp: walk,
                    landed: [false; 2],
                    cons: 0,
                    req_beats: 0,
                    rsp_beats: 0,
                    check: None,
                };
                // The GLB keeps what it holds of the same K/V head, else starts over.
                if c == K || c == V {
                    let r = &mut self.regions[c - K];
                    if !(r.valid && r.tag == tag) {
                        r.filled = 0;
                    }
                    (r.valid, r.tag) = (true, tag);
                }
                continue;
            }
            if let Some(load) = fetch.load[c].filter(|_| !ch.busy()) {
                let tag = if c == K || c == V {
                    fetch.kv_tag[c - K]
                } else {
                    0
                };
                ch.check = Some((CHECK_CYCLES, (load, tag)));
            }
            if fetch.release[c] && ready[c] {
                ch.landed[(ch.cons & 1) as usize] = false;
                ch.cons += 1;
            }
            if let Some(buf) = landed {
                ch.landed[buf] = true;
            }
            ch.active &= !done;
        }
    }

    /// The control registers at the edge: the fetch cursors, the row engine, the readout, the
    /// softmax trigger, the phases and their steps, the bookkeeping, heads and tiles.
    fn control_edge(&mut self, go: bool, sm: &Softmax, ph: &Phases, tile: &Tile, fetch: &Fetch) {
        let p = self.p;
        let br = p.br() as u64;
        let rows_busy = self.eng_left > 0;
        // O: a descriptor taken CHECK_CYCLES edges ago loads when its check decides.
        if let Some(ld) = decided(&mut self.o_check) {
            self.o_active = true;
            self.o_req = Walk {
                rows_left: ld.rows,
                ..Walk::default()
            };
            self.o_row_beats = ld.row_beats;
            self.o_scratch = ld.word.is_some();
            if let Some(w) = ld.word {
                self.o_word = w;
            }
        }
        if tile.o_start && !self.o_busy() {
            let ld = OLoad {
                rows: self.ro_rows,
                row_beats: self.o_tile_beats,
                word: None,
            };
            self.o_check = Some((CHECK_CYCLES, ld));
        }
        // A finished pass writes its block through the O channel to its place in the scratch
        // region, packed from the region's start: in unfused every pass (S after a max pass,
        // P over it after an exp pass), in rowfused's spill the max pass of a block past the S
        // arrays (S alone).
        let scratch_write = match (self.plan.s_in_memory(), self.plan.spills()) {
            (true, _) if sm.finished => Some((
                self.sm_done - if sm.second { self.nblk } else { 0 },
                sm.second,
            )),
            (_, true) if sm.finished && !sm.second && sm.past => {
                Some((self.sm_done - self.held, false))
            }
            _ => None,
        };
        if let Some((blk, p_pass)) = scratch_write {
            let row_beats = self.scratch_row_beats(p_pass);
            let ld = OLoad {
                rows: self.tile_rows(),
                row_beats,
                word: Some(blk * self.tile_rows() * row_beats),
            };
            self.o_check = Some((CHECK_CYCLES, ld));
        }
        if self.plan.scratch() {
            if self.state == Seq::TileGo {
                self.x_phase = 0;
            } else if fetch.load[X].is_some() {
                self.x_phase += 1;
            }
        }
        // Fetch cursors.
        if go {
            (self.qf_head, self.qf_settled) = (0, false);
            self.kf = Cursor::default();
            self.vf = Cursor::default();
        } else {
            self.qf_head += fetch.q_start as u64;
            self.qf_settled = !fetch.q_start;
            for (c, &(take, next_head)) in [&mut self.kf, &mut self.vf].into_iter().zip(&fetch.kv) {
                c.settled = !(next_head || take);
                if next_head {
                    c.head += 1;
                    c.q_base = 0;
                } else if take {
                    c.q_base += br;
                }
            }
        }
        // Row engine: busy for a softmax's or a readout's cycles; a softmax takes precedence.
        if self.eng_left > 0 {
            self.eng_left -= 1;
            self.copy_left = self.copy_left.saturating_sub(1);
        } else if sm.go {
            self.eng_left = p.row.softmax_cycles(sm.first, sm.second, sm.past) as u64;
            if let Some(n) = &mut self.noc {
                // The block's P leaves the rows on the exp sweeps' schedule, into its slot.
                let c = n.path.cfg;
                let slot = (self.sm_done % 2) as u32;
                let times = p.row.p_write_times(sm.first);
                for (w, t) in times.into_iter().enumerate() {
                    let key = c.in_block(c.address(w as u32));
                    let at = slot << (c.ii_bits + c.j_bits) | key;
                    n.writes.push_back((self.cycle + t as u64, at));
                }
            }
            let copies = self.plan.s_in_sram() && !sm.second;
            self.copy_left = copies as u64 * p.row.s_free_cycles(sm.first, sm.past) as u64;
        } else if tile.ro_go {
            self.eng_left = p.row.readout_cycles() as u64;
        }
        // Readout.
        self.ro_seen = (self.ro_seen || rows_busy) && self.ro == Ro::Run;
        if tile.handoff {
            self.ro_rows = self.tile_rows();
        }
        self.ro = match self.ro {
            Ro::Idle if tile.handoff => Ro::Pend,
            Ro::Pend if tile.ro_go => Ro::Run,
            Ro::Run if tile.ro_finished => Ro::Write,
            Ro::Write if tile.o_start => Ro::Idle,
            r => r,
        };
        // Softmax trigger: running from its start until the engine, seen busy, is idle.
        self.sm_seen = !sm.go && (rows_busy || self.sm_seen) && !sm.finished;
        self.sm_running = sm.go || (self.sm_running && !sm.finished);
        self.step_phases(ph);
        if self.plan.s_in_sram() {
            self.s_full = ph.qk_last || (self.s_full && !ph.s_free_in);
        }
        // Bookkeeping: issued at the last step, drained after the PE (and S link) latency, or
        // with narrow S links when the walk's last beat is up.
        let qk_drained = if self.walk {
            self.walk_edge(ph.qk_last)
        } else {
            delayed(self.qk_drain, ph.qk_last, self.s_ready_latency)
        };
        let pv_drained = delayed(self.pv_drain, ph.pv_last, p.row.pe.latency());
        self.qk_drain = (self.qk_drain << 1) | ph.qk_last as u64;
        self.pv_drain = (self.pv_drain << 1) | ph.pv_last as u64;
        let tile_reset = self.state == Seq::TileGo;
        let count = |x: &mut u64, inc: bool| *x = if tile_reset { 0 } else { *x + inc as u64 };
        count(&mut self.qk_issued, ph.qk_last);
        count(&mut self.pv_issued, ph.pv_last);
        count(&mut self.qk_done, qk_drained);
        count(&mut self.pv_done, pv_drained);
        count(&mut self.sm_done, sm.finished);
        if let Some(n) = &mut self.noc {
            let (landed, stalled) = n.edge(self.cycle);
            count(&mut n.arrived, landed);
            self.t.noc_stalls += stalled as u64;
        }
        // Heads and tiles (the block count from the tile's first row before it moves on).
        if self.state == Seq::Plan {
            self.nblk = self.keys(self.q_base).div_ceil(p.bc() as u64);
        }
        if go || tile.head_next {
            self.head = if go { 0 } else { self.head + 1 };
            self.q_base = 0;
        } else if tile.handoff {
            self.q_base += br;
        }
        self.done |= tile.finish;
        self.state = tile.next;
    }

    /// The S links' serializer (pe_tier.rs `s_tier_walk`) this cycle and at its edge: a block
    /// lands `pe.latency()` cycles after its QK phase's last step and is walked (a·b scores,
    /// `s_beats` cycles each) once the walker is free; returns its last beat's arrival above.
    fn walk_edge(&mut self, qk_last: bool) -> bool {
        let row = &self.p.row;
        let landed = delayed(self.qk_drain, qk_last, row.pe.latency());
        let busy = self.walk_left > 0;
        let fin = self.walk_left == 1;
        let take = (!busy || fin) && (landed || self.walk_pend);
        let link = row.vlink_latency();
        let linked = delayed(self.walk_fin, fin, link);
        self.walk_fin = (self.walk_fin << 1) | fin as u64;
        self.walk_pend = (self.walk_pend || landed) && !(take && !(self.walk_pend && landed));
        self.walk_left = if take {
            (row.a * row.b * row.s_beats()) as u64
        } else {
            self.walk_left.saturating_sub(1)
        };
        linked
    }

    /// The phases' registers: one array's phase and step (a phase may begin in its
    /// predecessor's last step), or two streams (each steps when it goes).
    fn step_phases(&mut self, ph: &Phases) {
        if self.streams {
            let stream = |on: &mut bool, step: &mut u64, begin: bool, last: bool, go: bool| {
                if begin {
                    (*on, *step) = (true, 0);
                } else if last {
                    *on = false;
                } else {
                    *step += go as u64;
                }
            };
            stream(
                &mut self.in_qk,
                &mut self.qk_step,
                ph.start_qk,
                ph.qk_last,
                ph.qk_go,
            );
            stream(
                &mut self.in_pv,
                &mut self.pv_step,
                ph.start_pv,
                ph.pv_last,
                ph.pv_go,
            );
            self.qk_went = ph.qk_go;
            if ph.start_qk {
                self.ph_blk = ph.qk_issued_n;
            }
            return;
        }
        if ph.start_qk || ph.start_pv {
            self.ph_blk = if ph.start_qk {
                ph.qk_issued_n
            } else {
                ph.pv_issued_n
            };
            (self.qk_step, self.pv_step) = (0, 0);
        } else {
            self.qk_step += self.in_qk as u64;
            self.pv_step += self.in_pv as u64;
        }
        if ph.start_qk || ph.start_pv || ph.qk_last || ph.pv_last {
            (self.in_qk, self.in_pv) = (ph.start_qk, ph.start_pv);
        }
    }
}

/// A descriptor under check at a clock edge: one edge nearer its decision; the descriptor, taken
/// out, when this edge decides it (dma/channel.rs: `CHECK_CYCLES` after the start).
fn decided<T>(check: &mut Option<(u32, T)>) -> Option<T> {
    let (left, _) = check.as_mut()?;
    *left -= 1;
    if *left > 0 {
        return None;
    }
    check.take().map(|(_, load)| load)
}

/// A pulse `n` cycles after it entered the shift register `bits` (bit i: i + 1 cycles ago),
/// or `now` itself for `n = 0`.
fn delayed(bits: u64, now: bool, n: u32) -> bool {
    match n {
        0 => now,
        n => (bits >> (n - 1)) & 1 == 1,
    }
}

/// The softmax trigger's decisions this cycle.
struct Softmax {
    go: bool,
    /// The block is the tile's first (the engine initializes the rows first).
    first: bool,
    /// rowfused: an exp pass (no copy of S).
    second: bool,
    /// rowfused's spill: the block is past the S arrays.
    past: bool,
    finished: bool,
}

/// Phase selection's decisions this cycle, and what the stall counters read of it.
#[derive(Default)]
struct Phases {
    /// The QK and the PV stream step this cycle.
    qk_go: bool,
    pv_go: bool,
    start_qk: bool,
    start_pv: bool,
    qk_last: bool,
    pv_last: bool,
    qk_issued_n: u64,
    pv_issued_n: u64,
    waiting: bool,
    want_qk: bool,
    want_pv: bool,
    pv_more: bool,
    sm_ahead: bool,
    s_free: bool,
    p_free: bool,
    /// buf2d: the engine copies a block's last score out of the PE registers this cycle.
    s_free_in: bool,
}

/// The tile state machine's and the readout's decisions this cycle.
struct Tile {
    next: Seq,
    finish: bool,
    go_once: bool,
    head_next: bool,
    handoff: bool,
    ro_go: bool,
    ro_finished: bool,
    o_start: bool,
}

/// The GLB's decisions this cycle: the channel whose response fills it, the hit reads granted.
#[derive(Default)]
struct GlbStep {
    fill: Option<usize>,
    grant: [bool; 2],
    /// unfused's scratch region: X's read and O's write granted.
    x_grant: bool,
    o_grant: bool,
}

/// The fetch unit's decisions: per read channel (Q, K, V, X) the release and the descriptor
/// (rows, rows per block, beats per row) it starts, and the cursors' moves.
struct Fetch {
    release: [bool; 4],
    load: [Option<ReadLoad>; 4],
    /// The K/V head of K's and V's descriptor (what the GLB's tag names).
    kv_tag: [u64; 2],
    q_start: bool,
    /// K's and V's cursor: (take the next tile, move to the next head).
    kv: [(bool, bool); 2],
}

/// Problems of more cycles than this are estimated from smaller exact runs.
pub const EXACT_LIMIT: u64 = 40_000_000;

/// MAC steps of the largest probe an extrapolation runs.
pub const PROBE_STEPS: u64 = 3_000_000;

/// The timing counters of `s` on the core `p` with memory `mem`, cycle by cycle, or None if
/// the core would not finish within `limit` cycles (a hang in the model).
pub fn simulate(p: &CoreParams, s: &Shape, mem: MemTiming, limit: u64) -> Option<Timing> {
    let mut m = Model::new(p, *s, mem);
    m.cycle(true);
    while !m.done {
        if m.cycle > limit {
            return None;
        }
        // A stop asked on the watch (an interrupted Python call) ends the stepping: what it
        // returns then is partial, and every watched caller checks the watch before it uses
        // a figure (`crate::watch`).
        if m.cycle.is_multiple_of(1 << 16) && crate::watch::stopping() {
            break;
        }
        m.cycle(false);
    }
    Some(m.t)
}

/// A generous cycle bound for `simulate`: four times the MAC steps and the memory beats at
/// the memory's pace, plus a thousand cycles and four latencies per block and query row.
fn limit_for(p: &CoreParams, s: &Shape, mem: MemTiming) -> u64 {
    let (reads, writes) = s.beats(p);
    let beat = (p.dma.width / 8) as u64;
    let bpc = match mem.bytes_per_cycle {
        0 => beat,
        b => b as u64,
    };
    let (computed, skipped) = s.blocks(p);
    4 * (s.mac_steps(p) + (reads + writes) * beat.div_ceil(bpc) + noc_cycles(p, s))
        + (computed + skipped + (s.heads * s.q_len) as u64 + 16) * (1000 + 4 * mem.latency as u64)
}

/// noc2d: the cycles P's flits take at the line's rate (a flit a cycle with four-flit FIFOs,
/// `depth` every four cycles with fewer); 0 in the other designs.
fn noc_cycles(p: &CoreParams, s: &Shape) -> u64 {
    p.noc_path().map_or(0, |c| {
        let words = s.blocks(p).0 * c.block_words() as u64;
        words * c.flits_per_word() as u64 * 4 / c.router.depth.min(4) as u64
    })
}

/// Cycles a problem may take at least, for choosing between stepping and extrapolating: its
/// MAC steps (one tier's in reg3d), its memory beats or noc2d's flits, whichever is more.
fn size(p: &CoreParams, s: &Shape) -> u64 {
    let (reads, writes) = s.beats(p);
    s.mac_steps(p).max(reads + writes).max(noc_cycles(p, s))
}

/// How an estimate was made.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Method {
    /// Stepped cycle by cycle: equal to the RTL (held by every deterministic RTL run).
    Exact,
    /// A quadratic in the sequence length through exact runs at these (q_len, k_len), with one
    /// and two heads (linear in heads).
    Extrapolated { probes: Vec<(usize, usize)> },
}

impl Method {
    pub fn describe(&self) -> String {
        match self {
            Method::Exact => "exact (stepped cycle by cycle)".into(),
            Method::Extrapolated { probes } => format!(
                "extrapolated from exact runs at seq {}",
                probes
                    .iter()
                    .map(|(q, k)| if q == k {
                        q.to_string()
                    } else {
                        format!("{q}x{k}")
                    })
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        }
    }
}

/// The timing of `s`, stepped cycle by cycle whatever its length (what the RTL is held to).
pub fn exact(p: &CoreParams, s: &Shape, mem: MemTiming) -> Timing {
    simulate(p, s, mem, limit_for(p, s, mem)).expect("the cycle model finishes")
}

/// The timing of `s`: stepped exactly when it is at most `EXACT_LIMIT` cycles long, else
/// extrapolated (`extrapolate`).
pub fn estimate(p: &CoreParams, s: &Shape, mem: MemTiming) -> (Timing, Method) {
    if size(p, s) <= EXACT_LIMIT {
        let t = simulate(p, s, mem, limit_for(p, s, mem)).expect("the cycle model finishes");
        return (t, Method::Exact);
    }
    extrapolate(p, s, mem, PROBE_STEPS)
}

/// The timing of `s` from exact runs of shorter sequences of the same configuration, each of
/// at most about `probe_steps` MAC steps. A tile's cycles are linear in its blocks once its
/// pipeline is full and tiles repeat with the alignment of lcm(Br, Bc) query rows, so at
/// lengths that are multiples of that unit the cycles of a head are a quadratic in the length
/// (non-causal: tiles × blocks; causal: the sum of a tile's blocks over the tiles), and heads
/// add alike. Three lengths m, 2m, 3m units fix the quadratic, one and two heads the heads.
pub fn extrapolate(
    p: &CoreParams,
    s: &Shape,
    mem: MemTiming,
    probe_steps: u64,
) -> (Timing, Method) {
    let (br, bc) = (p.br() as usize, p.bc() as usize);
    let unit = br / gcd(br, bc) * bc;
    let ratio = s.k_len as f64 / s.q_len.max(1) as f64;
    let probe = |m: usize, heads: usize| {
        let q = m * unit;
        let k = ((q as f64 * ratio / unit as f64).round() as usize).max(1) * unit;
        Shape {
            heads,
            q_len: q,
            k_len: k,
            ..*s
        }
    };
    let mut m = 1;
    while size(p, &probe(3 * (m + 1), 1)) <= probe_steps {
        m += 1;
    }
    // A shape the probes cannot shrink (few query rows against very many keys): step it.
    if size(p, &probe(3 * m, s.heads.min(2))) >= size(p, s) / 2 {
        return (exact(p, s, mem), Method::Exact);
    }
    let xs = [m, 2 * m, 3 * m];
    // At a length off the unit: the quadratic at the next multiple of the unit, scaled by the
    // MAC steps (a partial tile or block costs nearly the steps of a whole one).
    let x_up = s.q_len.div_ceil(unit);
    let x = x_up as f64;
    let rounded = Shape {
        q_len: x_up * unit,
        k_len: s.k_len.div_ceil(unit) * unit,
        ..*s
    };
    let scale = s.mac_steps(p) as f64 / rounded.mac_steps(p).max(1) as f64;
    let smallest = probe(xs[0], 1);
    let run = |sh: Shape| {
        let q = glb_scaled(p, s, &sh, &smallest);
        simulate(&q, &sh, mem, limit_for(&q, &sh, mem)).expect("finishes")
    };
    let one: Vec<Timing> = xs.iter().map(|&n| run(probe(n, 1))).collect();
    let two: Vec<Timing> = if s.heads > 1 {
        xs.iter().map(|&n| run(probe(n, 2))).collect()
    } else {
        one.clone()
    };
    let quad = |ys: &[Timing], f: fn(&Timing) -> u64| {
        let (x0, x1, x2) = (xs[0] as f64, xs[1] as f64, xs[2] as f64);
        let y: Vec<f64> = ys.iter().map(|t| f(t) as f64).collect();
        y[0] * (x - x1) * (x - x2) / ((x0 - x1) * (x0 - x2))
            + y[1] * (x - x0) * (x - x2) / ((x1 - x0) * (x1 - x2))
            + y[2] * (x - x0) * (x - x1) / ((x2 - x0) * (x2 - x1))
    };
    let h = s.heads as f64;
    let fit = |f: fn(&Timing) -> u64| {
        let (a, b) = (quad(&one, f), quad(&two, f));
        ((a + (h - 1.0) * (b - a)) * scale).max(0.0).round() as u64
    };
    let t = Timing {
        cycles: fit(|t| t.cycles),
        mac_cycles: fit(|t| t.mac_cycles),
        stall_kv: fit(|t| t.stall_kv),
        stall_q: fit(|t| t.stall_q),
        stall_softmax: fit(|t| t.stall_softmax),
        stall_other: fit(|t| t.stall_other),
        glb_conflict_stalls: fit(|t| t.glb_conflict_stalls),
        noc_stalls: fit(|t| t.noc_stalls),
    };
    let probes = xs
        .iter()
        .map(|&n| probe(n, 1))
        .map(|p| (p.q_len, p.k_len))
        .collect();
    (t, Method::Extrapolated { probes })
}

/// The core `p` for a probe `probe` of the problem `s`: with a GLB that cannot hold a K/V
/// head of `s`, one whose region holds the same fraction of the probe's keys (in beats, at
/// least one: the model needs no whole blocks), so that the probes stay on the same side of
/// the capacity knee and a tile's hit and streamed parts keep their proportions; unfused's
/// scratch region the same against a tile's S, and rowfused's S arrays (with its spill)
/// against the keys, unless every probe (`smallest` the least) is already past its knee.
fn glb_scaled(p: &CoreParams, s: &Shape, probe: &Shape, smallest: &Shape) -> CoreParams {
    let mut q = *p;
    if let Some(g) = q.dma.glb.as_mut() {
        let rb = s.kv_row_beats(p);
        let need = s.k_len as u64 * rb;
        if need > g.region_beats as u64 {
            let share = g.region_beats as f64 / need as f64;
            let beats = (share * (probe.k_len as u64 * rb) as f64).round();
            g.region_beats = beats.max(1.0) as u32;
        }
        // unfused: the scratch region likewise, against a full tile's S.
        if g.scratch_beats > 0 {
            let tile_s = |k_len: usize| tile_scratch_beats(p, p.br() as u64, k_len).0;
            let need = tile_s(s.k_len);
            // Probes all past the knee keep the region (each tile's GLB part is the region
            // whatever the length); else all scale it.
            if need > g.scratch_beats as u64 && tile_s(smallest.k_len) <= g.scratch_beats as u64 {
                let share = g.scratch_beats as f64 / need as f64;
                let beats = (share * tile_s(probe.k_len) as f64).round();
                g.scratch_beats = beats.max(1.0) as u32;
            }
        }
    }
    // rowfused's spill: the S arrays' capacity likewise, in whole blocks, against the keys.
    if let Some(rows) = q.row.plan().whole_rows() {
        let keys = rows.keys as usize;
        if rows.spill && s.k_len > keys && smallest.k_len < keys {
            let bc = p.bc() as usize;
            let blocks = (keys / bc) as f64 * probe.k_len as f64 / s.k_len as f64;
            q.row
                .variant
                .set_row_keys((blocks.round().max(1.0) as usize * bc) as u32);
        }
    }
    q
}

fn gcd(a: usize, b: usize) -> usize {
    if b == 0 {
        a.max(1)
    } else {
        gcd(b, a % b)
    }
}

/// Every counter of a run of `s` without simulating the RTL: the schedule's exact counts
/// (`Shape::counters`) and the cycle model's timing, by the core's counter names.
pub fn counters(
    p: &CoreParams,
    s: &Shape,
    mem: MemTiming,
) -> (std::collections::BTreeMap<String, u64>, Method) {
    let (t, method) = estimate(p, s, mem);
    let mut c: std::collections::BTreeMap<String, u64> = s
        .counters(p)
        .into_iter()
        .map(|(n, v)| (n.to_string(), v))
        .collect();
    c.extend(t.counters().map(|(n, v)| (n.to_string(), v)));
    (c, method)
}
