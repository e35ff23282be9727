//! The cycle model: the core's control, cycle by cycle, without its datapath. It steps the
//! sequencer (tile state machine, phase selection for one array or reg3d's two tier streams,
//! phase bookkeeping and drain delays), the softmax trigger, the row engine as a busy timer
//! (`PeRowConfig::softmax_cycles`, `readout_cycles`), the readout, the fetch cursors, the DMA's
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

use hdl::core::CoreParams;

use crate::schedule::{needed_keys, Shape};

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
}

impl Timing {
    /// The counters by the core's names.
    pub fn counters(&self) -> [(&'static str, u64); 6] {
        [
            ("cycles", self.cycles),
            ("mac_cycles", self.mac_cycles),
            ("stall_kv", self.stall_kv),
            ("stall_q", self.stall_q),
            ("stall_softmax", self.stall_softmax),
            ("stall_other", self.stall_other),
        ]
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Seq {
    Idle,
    Head,
    Tile,
    TileGo,
    Run,
    End,
    Finish,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Ro {
    Idle,
    Pend,
    Run,
    Write,
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
    req: Walk,
    rsp: Walk,
    landed: [bool; 2],
    cons: u64,
}

impl ReadCh {
    fn ready(&self) -> bool {
        self.active && self.landed[(self.cons & 1) as usize]
    }

    fn wants(&self) -> bool {
        self.active && self.req.rows_left > 0 && self.req.block - self.cons < 2
    }
}

/// A fetch cursor of K or V: the (head, tile) its next descriptor is for.
#[derive(Clone, Copy, Debug, Default)]
struct Cursor {
    head: u64,
    q_base: u64,
}

/// The control state of the core and its memory.
struct Model<'a> {
    p: &'a CoreParams,
    s: Shape,
    mem: MemTiming,
    tiered: bool,
    two_port: bool,
    buffered: bool,
    qk_steps: u64,
    pv_steps: u64,
    row_beats: u64,
    beat: u64,
    // Sequencer.
    state: Seq,
    head: u64,
    q_base: u64,
    nblk: u64,
    /// The QK phase (2-D: the one phase) and its step; reg3d's PV stream.
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
    kf: Cursor,
    vf: Cursor,
    // DMA.
    ch: [ReadCh; 3],
    o_active: bool,
    o_req: Walk,
    o_row_beats: u64,
    rr: usize,
    tags: VecDeque<usize>,
    in_flight: VecDeque<u64>,
    credit: u64,
    cycle: u64,
    t: Timing,
}

const Q: usize = 0;
const K: usize = 1;
const V: usize = 2;

impl<'a> Model<'a> {
    fn new(p: &'a CoreParams, s: Shape, mem: MemTiming) -> Self {
        let (qk, pv) = p.block_steps();
        let beat = (p.dma.width / 8) as u64;
        Model {
            p,
            s,
            mem,
            tiered: p.row.tiered.is_some(),
            two_port: p.row.buffer.is_none_or(|b| b.ports != 1),
            buffered: p.row.buffer.is_some(),
            qk_steps: qk as u64,
            pv_steps: pv as u64,
            row_beats: (2 * s.head_dim as u64) / beat,
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
            kf: Cursor::default(),
            vf: Cursor::default(),
            ch: [ReadCh::default(); 3],
            o_active: false,
            o_req: Walk::default(),
            o_row_beats: (s.out_bytes * s.head_dim) as u64 / beat,
            rr: 0,
            tags: VecDeque::new(),
            in_flight: VecDeque::new(),
            credit: beat,
            cycle: 0,
            t: Timing::default(),
        }
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

    fn tile_rows(&self) -> u64 {
        (self.q_base + self.p.br() as u64).min(self.s.q_len as u64) - self.q_base
    }

    /// One clock cycle: every combinational decision from the registers, then the edge.
    fn cycle(&mut self, start: bool) {
        let p = self.p;
        let (br, bc) = (p.br() as u64, p.bc() as u64);
        let heads = self.s.heads as u64;
        let q_len = self.s.q_len as u64;
        // Memory response presented this cycle and its channel.
        let response = match self.in_flight.front() {
            Some(&due) if due <= self.cycle => Some(self.tags[0]),
            _ => None,
        };
        let ready = [self.ch[Q].ready(), self.ch[K].ready(), self.ch[V].ready()];
        let o_busy = self.o_active;
        let rows_busy = self.eng_left > 0;
        let s_free_in = self.buffered && self.copy_left == 1;
        let ro_idle = self.ro == Ro::Idle;
        let idle = self.state == Seq::Idle;
        let go = start && idle;
        let s_run = self.state == Seq::Run;

        // Softmax trigger.
        let first_block = self.sm_done == 0;
        let in_pv_2d = !self.tiered && self.in_pv;
        let p_turn = self.two_port || !in_pv_2d;
        let sm_go = s_run
            && self.sm_done < self.nblk
            && self.qk_done > self.sm_done
            && self.pv_issued + 1 >= self.sm_done
            && (ro_idle || !first_block)
            && !self.sm_running
            && !rows_busy
            && p_turn;
        let sm_finished = self.sm_running && self.sm_seen && !rows_busy;

        // Phase selection.
        let qk_last = self.in_qk && self.qk_step == self.qk_steps - 1;
        let pv_last = self.in_pv && self.pv_step == self.pv_steps - 1;
        let qk_issued_n = self.qk_issued + qk_last as u64;
        let pv_issued_n = self.pv_issued + pv_last as u64;
        let qk_more = qk_issued_n < self.nblk;
        let pv_more = pv_issued_n < qk_issued_n;
        let sm_ahead = self.sm_done > pv_issued_n;
        let (start_qk, start_pv, waiting, want_qk, want_pv, s_free, p_free);
        if self.tiered {
            let slot_free = qk_issued_n < self.sm_done + 2;
            start_qk = s_run && !self.in_qk && qk_more && slot_free && ready[K] && ready[Q];
            start_pv = s_run && !self.in_pv && pv_more && sm_ahead && ready[V];
            waiting = s_run && !(self.in_qk || self.in_pv);
            want_qk = qk_more;
            want_pv = !qk_more;
            s_free = slot_free;
            p_free = true;
        } else {
            let no_phase = !(self.in_qk || self.in_pv);
            let choose = s_run && (no_phase || qk_last || pv_last);
            want_qk = qk_more && qk_issued_n < pv_issued_n + 2;
            want_pv = !want_qk;
            s_free = !self.buffered || !self.s_full || s_free_in;
            p_free = self.two_port || !(self.sm_running || sm_go);
            let qk_can = want_qk && ready[K] && ready[Q] && s_free && !qk_last;
            let pv_can = want_pv && pv_more && sm_ahead && ready[V] && p_free && !pv_last;
            start_qk = choose && qk_can;
            start_pv = choose && pv_can;
            waiting = s_run && no_phase;
        }

        // Counters: busy cycles, MAC cycles, stall reasons (counters.rs).
        let busy = !idle && !go;
        let step_valid = self.in_qk || self.in_pv;
        if busy {
            self.t.cycles += 1;
            self.t.mac_cycles += step_valid as u64;
            if !step_valid {
                let qk_wait = waiting && want_qk;
                let need_k = qk_wait && !ready[K];
                let need_q = qk_wait && ready[K] && !ready[Q];
                let pv_wait = waiting && want_pv && pv_more;
                let need_sm = pv_wait && !sm_ahead;
                let need_v = pv_wait && sm_ahead && !ready[V];
                let need_s = qk_wait && ready[K] && ready[Q] && !s_free;
                let need_p = pv_wait && sm_ahead && ready[V] && !p_free;
                if need_k || need_v {
                    self.t.stall_kv += 1;
                } else if need_q {
                    self.t.stall_q += 1;
                } else if need_sm || need_s || need_p {
                    self.t.stall_softmax += 1;
                } else {
                    self.t.stall_other += 1;
                }
            }
        }

        // Main state machine.
        let empty = self.nblk == 0;
        let end_ok = self.pv_done >= self.nblk && ro_idle;
        let go_wait = self.state == Seq::TileGo && empty && !ready[Q];
        let go_once = self.state == Seq::TileGo && !go_wait;
        let fin_ok = ro_idle && !o_busy;
        let tiles_done = self.q_base >= q_len;
        let head_next = self.state == Seq::Tile && tiles_done;
        let handoff = self.state == Seq::End && end_ok;
        let next_state = match self.state {
            Seq::Idle if go => Seq::Head,
            Seq::Head if self.head >= heads => Seq::Finish,
            Seq::Head => Seq::Tile,
            Seq::Tile if tiles_done => Seq::Head,
            Seq::Tile => Seq::TileGo,
            Seq::TileGo if !go_wait => Seq::Run,
            Seq::Run if self.pv_issued >= self.nblk => Seq::End,
            Seq::End if end_ok => Seq::Tile,
            Seq::Finish if fin_ok => {
                self.done = true;
                Seq::Idle
            }
            s => s,
        };

        // Readout.
        let ro_go = self.ro == Ro::Pend && !rows_busy && !o_busy;
        let ro_finished = self.ro == Ro::Run && self.ro_seen && !rows_busy;
        let o_start = self.ro == Ro::Write && !o_busy;

        // Fetch: descriptors and releases.
        let running = !idle;
        let q_start = running && self.qf_head < heads && !self.ch[Q].active;
        let q_rel = (qk_last && self.ph_blk + 1 == self.nblk) || (go_once && empty);
        let kv_take = |c: &Cursor, active: bool| {
            let on = running && c.head < heads;
            let head_over = c.q_base >= q_len;
            (on && !head_over && !active, on && head_over)
        };
        let (k_take, k_next_head) = kv_take(&self.kf, self.ch[K].active);
        let (v_take, v_next_head) = kv_take(&self.vf, self.ch[V].active);
        let k_need = self.keys(self.kf.q_base);
        let v_need = self.keys(self.vf.q_base);
        let release = [q_rel, qk_last, pv_last];
        let load = [
            q_start.then_some((q_len, br)),
            (k_take && k_need > 0).then_some((k_need, bc)),
            (v_take && v_need > 0).then_some((v_need, bc)),
        ];

        // DMA arbitration: round robin from rr; reads need a tag.
        let room = (self.tags.len() as u64) < p.dma.max_outstanding as u64;
        let mut reqs = [false; 4];
        for (c, r) in reqs.iter_mut().take(3).enumerate() {
            *r = self.ch[c].wants() && room;
        }
        reqs[3] = self.o_active && self.o_req.rows_left > 0;
        let grant = (self.rr..4)
            .find(|&c| reqs[c])
            .or_else(|| (0..4).find(|&c| reqs[c]));
        let mem_ready = self.credit >= self.beat;
        let accept = grant.filter(|_| mem_ready);

        // ---- the clock edge ----
        if let Some(g) = accept {
            self.rr = (g + 1) % 4;
            self.credit -= self.beat;
            if g < 3 {
                self.tags.push_back(g);
                self.in_flight
                    .push_back(self.cycle + self.mem.latency as u64);
                let c = &mut self.ch[g];
                c.req.step(self.row_beats, c.block_rows);
            } else {
                let last =
                    self.o_req.ends(self.o_row_beats, u64::MAX).0 && self.o_req.rows_left == 1;
                self.o_req.step(self.o_row_beats, u64::MAX);
                if last {
                    self.o_active = false;
                }
            }
        }
        if response.is_some() {
            self.in_flight.pop_front();
            self.tags.pop_front();
        }
        let bpc = if self.mem.bytes_per_cycle == 0 {
            self.beat
        } else {
            self.mem.bytes_per_cycle as u64
        };
        self.credit = (self.credit + bpc).min(self.beat);
        for c in 0..3 {
            let rb = self.row_beats;
            let ch = &mut self.ch[c];
            let was_ready = ready[c];
            let landed_now = match response {
                Some(tag) if tag == c => {
                    let (last_beat, block_end) = ch.rsp.ends(rb, ch.block_rows);
                    let buf = (ch.rsp.block & 1) as usize;
                    ch.rsp.step(rb, ch.block_rows);
                    (last_beat && block_end).then_some(buf)
                }
                _ => None,
            };
            let released = release[c] && was_ready;
            let cons_buf = (ch.cons & 1) as usize;
            let done = ch.active && ch.rsp.rows_left == 0 && ch.cons == ch.rsp.block;
            if let Some((rows, block_rows)) = load[c].filter(|_| !ch.active) {
                *ch = ReadCh {
                    active: true,
                    block_rows,
                    req: Walk {
                        rows_left: rows,
                        ..Walk::default()
                    },
                    rsp: Walk {
                        rows_left: rows,
                        ..Walk::default()
                    },
                    landed: [false; 2],
                    cons: 0,
                };
                continue;
            }
            if released {
                ch.landed[cons_buf] = false;
                ch.cons += 1;
            }
            if let Some(buf) = landed_now {
                ch.landed[buf] = true;
            }
            if done {
                ch.active = false;
            }
        }
        if o_start && !self.o_active {
            self.o_active = true;
            self.o_req = Walk {
                rows_left: self.ro_rows,
                ..Walk::default()
            };
        }

        // Fetch cursors.
        if go {
            self.qf_head = 0;
            self.kf = Cursor::default();
            self.vf = Cursor::default();
        } else {
            self.qf_head += q_start as u64;
            for (c, take, next_head) in [
                (&mut self.kf, k_take, k_next_head),
                (&mut self.vf, v_take, v_next_head),
            ] {
                if next_head {
                    c.head += 1;
                    c.q_base = 0;
                } else if take {
                    c.q_base += br;
                }
            }
        }

        // Row engine: a softmax takes precedence over a readout.
        if self.eng_left > 0 {
            self.eng_left -= 1;
            self.copy_left = self.copy_left.saturating_sub(1);
        } else if sm_go {
            self.eng_left = p.row.softmax_cycles(first_block) as u64;
            self.copy_left = if self.buffered {
                (p.row.a * p.bc()) as u64
            } else {
                0
            };
        } else if ro_go {
            self.eng_left = p.row.readout_cycles() as u64;
        }

        // Readout state.
        self.ro_seen = (self.ro_seen || rows_busy) && self.ro == Ro::Run;
        if handoff {
            self.ro_rows = self.tile_rows();
        }
        self.ro = match self.ro {
            Ro::Idle if handoff => Ro::Pend,
            Ro::Pend if ro_go => Ro::Run,
            Ro::Run if ro_finished => Ro::Write,
            Ro::Write if o_start => Ro::Idle,
            r => r,
        };

        // Softmax trigger state.
        let seen = !sm_go && (rows_busy || self.sm_seen);
        self.sm_seen = seen && !sm_finished;
        if sm_go {
            self.sm_running = true;
        } else if sm_finished {
            self.sm_running = false;
        }

        // Phases and their steps.
        if self.tiered {
            if start_qk {
                self.in_qk = true;
                self.qk_step = 0;
                self.ph_blk = qk_issued_n;
            } else if qk_last {
                self.in_qk = false;
            } else if self.in_qk {
                self.qk_step += 1;
            }
            if start_pv {
                self.in_pv = true;
                self.pv_step = 0;
            } else if pv_last {
                self.in_pv = false;
            } else if self.in_pv {
                self.pv_step += 1;
            }
        } else {
            if start_qk || start_pv {
                self.ph_blk = if start_qk { qk_issued_n } else { pv_issued_n };
                self.qk_step = 0;
                self.pv_step = 0;
            } else {
                self.qk_step += self.in_qk as u64;
                self.pv_step += self.in_pv as u64;
            }
            if start_qk || start_pv || qk_last || pv_last {
                self.in_qk = start_qk;
                self.in_pv = start_pv;
            }
        }
        if self.buffered {
            self.s_full = qk_last || (self.s_full && !s_free_in);
        }

        // Bookkeeping: issued at the last step, drained after the PE (and S link) latency.
        let qk_lat = p.row.s_ready_latency();
        let pv_lat = p.row.pe.latency();
        let qk_drained = (self.qk_drain >> (qk_lat - 1)) & 1 == 1;
        let pv_drained = (self.pv_drain >> (pv_lat - 1)) & 1 == 1;
        self.qk_drain = (self.qk_drain << 1) | qk_last as u64;
        self.pv_drain = (self.pv_drain << 1) | pv_last as u64;
        let tile_reset = self.state == Seq::TileGo;
        let count = |x: &mut u64, inc: bool| {
            if tile_reset {
                *x = 0;
            } else if inc {
                *x += 1;
            }
        };
        count(&mut self.qk_issued, qk_last);
        count(&mut self.pv_issued, pv_last);
        count(&mut self.qk_done, qk_drained);
        count(&mut self.pv_done, pv_drained);
        count(&mut self.sm_done, sm_finished);

        // Heads and tiles (the block count from the tile's first row before it moves on).
        if self.state == Seq::Tile {
            self.nblk = self.keys(self.q_base).div_ceil(bc);
        }
        if go || head_next {
            self.head = if go { 0 } else { self.head + 1 };
        }
        if go || head_next {
            self.q_base = 0;
        } else if handoff {
            self.q_base += br;
        }
        self.state = next_state;
        self.cycle += 1;
    }
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
    4 * (s.mac_steps(p) + (reads + writes) * beat.div_ceil(bpc))
        + (computed + skipped + (s.heads * s.q_len) as u64 + 16) * (1000 + 4 * mem.latency as u64)
}

/// Cycles a problem may take at least, for choosing between stepping and extrapolating: its
/// MAC steps (one tier's in reg3d) or its memory beats, whichever is more.
fn size(p: &CoreParams, s: &Shape) -> u64 {
    let (reads, writes) = s.beats(p);
    s.mac_steps(p).max(reads + writes)
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
    let run = |sh: Shape| simulate(p, &sh, mem, limit_for(p, &sh, mem)).expect("finishes");
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
    };
    let probes = xs
        .iter()
        .map(|&n| probe(n, 1))
        .map(|p| (p.q_len, p.k_len))
        .collect();
    (t, Method::Extrapolated { probes })
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
