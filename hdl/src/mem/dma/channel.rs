//! A channel: its descriptor, taken at start and checked over the next cycles; the request
//! and response walkers over its rows and blocks; the landing or staging side.

use super::{error, DmaConfig, MemIf, ROW_BYTES_BITS};
use crate::fp::arith::split_counter;
use crate::mem::landing::LandingConfig;
use crate::{addr_bits, and_all, bits_for, mux, or_all, ModuleBuilder, RegHandle, Sig};

/// Descriptor inputs of a channel.
pub(super) struct Descriptor {
    pub(super) start: Sig,
    pub(super) base: Sig,
    pub(super) stride: Sig,
    pub(super) row_bytes: Sig,
    pub(super) rows: Sig,
    /// Read channels only.
    pub(super) block_rows: Option<Sig>,
}

impl Descriptor {
    pub(super) fn inputs(m: &mut ModuleBuilder, cfg: &DmaConfig, name: &str, blocks: bool) -> Self {
        Descriptor {
            start: m.input(&format!("{name}_start"), 1),
            base: m.input(&format!("{name}_base"), cfg.addr_bits),
            stride: m.input(&format!("{name}_stride"), cfg.addr_bits),
            row_bytes: m.input(&format!("{name}_row_bytes"), ROW_BYTES_BITS),
            rows: m.input(&format!("{name}_rows"), cfg.index_bits),
            block_rows: blocks.then(|| m.input(&format!("{name}_block_rows"), cfg.index_bits)),
        }
    }
}

/// The descriptor check's three stages after the descriptor is taken: the quick checks, the
/// span's partial products and its offset; two partial sums; the span's sum against the
/// address space.
pub const CHECK_CYCLES: u32 = 3;
// (The stage counter is two bits.)
const _: () = assert!(CHECK_CYCLES >= 1 && CHECK_CYCLES < 4);

/// The error code of a taken descriptor (0 when it can run), known [`CHECK_CYCLES`] cycles
/// after the start: `d` holds the descriptor's registers from the cycle after it. The span's
/// last byte is base + rows × stride − stride + row_bytes − 1. In the first cycle the zero,
/// alignment and size checks, rows × stride's partial products (each nibble of rows times the
/// stride) and the offset (base + row_bytes − stride − 1) are registered; in the second two
/// sums of about half of them each; in the third their sum is checked against the address
/// space, so no cycle carries a whole multiply or more than a few operands.
pub(super) fn check_descriptor(
    m: &mut ModuleBuilder,
    cfg: &DmaConfig,
    d: &Descriptor,
    limits: (u32, u32, Option<u32>),
    prefix: &str,
) -> Sig {
    let (max_rows, max_row_beats, max_total_rows) = limits;
    let lb = cfg.beat_shift();
    let a = cfg.addr_bits;
    let zero_rows = d.rows.is_zero();
    let zero_bytes = d.row_bytes.is_zero();
    let mut zero = zero_rows | zero_bytes;
    if let Some(br) = d.block_rows {
        let zero_br = br.is_zero();
        zero = zero | zero_br;
    }
    let low = |x: Sig| {
        let bits = x.slice(lb - 1, 0);
        bits.any()
    };
    let (base_low, stride_low, bytes_low) = (low(d.base), low(d.stride), low(d.row_bytes));
    let misaligned = or_all(&[base_low, stride_low, bytes_low]);
    let max_bytes = m.lit(ROW_BYTES_BITS, (max_row_beats * cfg.beat_bytes()) as u64);
    let long_row = d.row_bytes.gt(max_bytes);
    let rows_field = d.block_rows.unwrap_or(d.rows);
    let max_rows_lit = m.lit(rows_field.width(), max_rows as u64);
    let many_rows = rows_field.gt(max_rows_lit);
    let too_large = long_row | many_rows;
    // rowfused's K and V: no more keys than its S arrays hold.
    let too_large = match max_total_rows {
        Some(n) if (n as u64) < (1u64 << cfg.index_bits) - 1 => {
            let lit = m.lit(cfg.index_bits, n as u64);
            too_large | d.rows.gt(lit)
        }
        _ => too_large,
    };
    let eb = error::BITS;
    let ok = m.zero(eb);
    let c3 = m.lit(eb, error::TOO_LARGE);
    let c2 = m.lit(eb, error::MISALIGNED);
    let c1 = m.lit(eb, error::ZERO_SIZE);
    let e = mux(too_large, c3, ok);
    let e = mux(misaligned, c2, e);
    let quick = mux(zero, c1, e);
    let quick = m.delay_n(&format!("{prefix}_check_quick"), quick, CHECK_CYCLES - 1);
    // rows × stride by nibbles of rows, each product registered (rows − 1 would put a
    // decrement before the products: the offset takes the stride off instead).
    let iw = d.rows.width();
    // Last byte: base + rows × stride − stride + row_bytes − 1, wide enough not to wrap
    // (rows is at least 1 where the check runs: zero rows is refused first).
    let w = a + cfg.index_bits + 2;
    let offset = d.base.zext(w) + d.row_bytes.zext(w);
    let offset = offset - d.stride.zext(w);
    let offset = offset - 1;
    let mut terms = vec![m.delay(&format!("{prefix}_span_offset"), offset)];
    for lo in (0..iw).step_by(4) {
        let hi = (lo + 4).min(iw) - 1;
        let part = d.rows.slice(hi, lo).mul_wide(d.stride);
        let part = m.delay(&format!("{prefix}_span{}", lo / 4), part);
        terms.push(part.zext(w) << lo);
    }
    // Two partial sums, registered, then theirs.
    let back = terms.split_off(terms.len().div_ceil(2));
    let halves: Vec<Sig> = [terms, back]
        .into_iter()
        .enumerate()
        .map(|(k, ts)| {
            let sum = ts.into_iter().reduce(|a, b| a + b).expect("a term each");
            m.delay(&format!("{prefix}_span_sum{k}"), sum)
        })
        .collect();
    let last = halves[0] + halves[1];
    let last = m.name(&format!("{prefix}_last_byte"), last);
    let high = last.slice(w - 1, a);
    let out_of_range = high.any();
    let low_bits = last.slice(a - 1, 0);
    m.discard(low_bits);
    let c4 = m.lit(eb, error::OUT_OF_RANGE);
    let ok = m.zero(eb);
    mux(quick.any(), quick, mux(out_of_range, c4, ok))
}

/// Beats per row from a row-bytes field (the descriptor check guarantees the value fits).
pub(super) fn beats_of(m: &mut ModuleBuilder, cfg: &DmaConfig, row_bytes: Sig, bits: u32) -> Sig {
    let beats = row_bytes >> cfg.beat_shift();
    if bits >= ROW_BYTES_BITS {
        return beats.zext(bits);
    }
    let high = beats.slice(ROW_BYTES_BITS - 1, bits);
    m.discard(high);
    beats.trunc(bits)
}

/// Counts things in flight in `r`: `up` adds one, `down` takes one (both: unchanged);
/// `restart` (if any) clears it instead.
pub(super) fn count_in_flight(
    m: &mut ModuleBuilder,
    r: RegHandle,
    (up, down): (Sig, Sig),
    restart: Option<Sig>,
) {
    let inc = r.q + 1;
    let dec = r.q - 1;
    let d = mux(up, inc, dec);
    let moved = up ^ down;
    match restart {
        Some(clear) => {
            let zero = m.zero(r.q.width());
            m.set_next(r, mux(clear, zero, d));
            m.set_enable(r, clear | moved);
        }
        None => {
            m.set_next(r, d);
            m.set_enable(r, moved);
        }
    }
}

/// An event counter from reset (no carry ripples through its width: [`split_counter`]).
pub(super) fn counter(m: &mut ModuleBuilder, name: &str, event: Sig, width: u32) -> Sig {
    split_counter(m, name, width, event, None)
}

/// Registers that walk rows and beats (a request walker and a response walker per channel).
pub(super) struct Walker {
    pub(super) beat: RegHandle,
    pub(super) row: RegHandle,
    pub(super) rows_left: RegHandle,
    pub(super) block: RegHandle,
}

impl Walker {
    pub(super) fn new(
        m: &mut ModuleBuilder,
        prefix: &str,
        beat_bits: u32,
        row_bits: u32,
        iw: u32,
    ) -> Self {
        Walker {
            beat: m.reg(&format!("{prefix}_beat"), beat_bits, Some(0)),
            row: m.reg(&format!("{prefix}_row"), row_bits, Some(0)),
            rows_left: m.reg(&format!("{prefix}_rows_left"), iw, Some(0)),
            block: m.reg(&format!("{prefix}_block"), iw, Some(0)),
        }
    }

    /// Sets the walk: `load` restarts it for `rows` rows, `step` takes one beat. Returns (this
    /// beat ends a row, this row ends a block).
    pub(super) fn advance(
        &self,
        m: &mut ModuleBuilder,
        step: Sig,
        load: Sig,
        rows: Sig,
        row_beats: Sig,
        block_rows: Sig,
    ) -> (Sig, Sig) {
        let w = self.beat.q.width().max(row_beats.width());
        let beat = self.beat.q.zext(w);
        let rb = row_beats.zext(w);
        let rb_m1 = rb - 1;
        let last_beat = beat.eq(rb_m1);
        let rw = self.row.q.width().max(block_rows.width());
        let row = self.row.q.zext(rw);
        let br = block_rows.zext(rw);
        let br_m1 = br - 1;
        let last_in_block = row.eq(br_m1);
        let one_left = self.rows_left.q.eq(1);
        let block_end = last_in_block | one_left;

        let zero_beat = m.zero(self.beat.q.width());
        let beat_inc = self.beat.q + 1;
        let beat_d = mux(last_beat, zero_beat, beat_inc);
        let beat_d = mux(load, zero_beat, beat_d);
        let zero_row = m.zero(self.row.q.width());
        let row_inc = self.row.q + 1;
        let row_d = mux(block_end, zero_row, row_inc);
        let row_d = mux(load, zero_row, row_d);
        let left_dec = self.rows_left.q - 1;
        let rows_d = mux(load, rows, left_dec);
        let zero_blk = m.zero(self.block.q.width());
        let block_inc = self.block.q + 1;
        let block_d = mux(block_end, block_inc, self.block.q);
        let block_d = mux(load, zero_blk, block_d);
        m.set_next(self.beat, beat_d);
        m.set_next(self.row, row_d);
        m.set_next(self.rows_left, rows_d);
        m.set_next(self.block, block_d);
        let beat_en = step | load;
        m.set_enable(self.beat, beat_en);
        let row_step = step & last_beat;
        let row_en = row_step | load;
        m.set_enable(self.row, row_en);
        m.set_enable(self.rows_left, row_en);
        m.set_enable(self.block, row_en);
        (last_beat, block_end)
    }
}

/// What every channel shares: descriptor, state, and its request (before arbitration).
pub(super) struct Channel {
    pub(super) name: &'static str,
    /// The descriptor as taken: registers loaded at the start, `start` the cycle its check
    /// decides (`decide`).
    pub(super) desc: Descriptor,
    /// A start the channel takes (idle), and one it refuses (busy: a load or a check under
    /// way).
    pub(super) accept: Sig,
    pub(super) refused: Sig,
    pub(super) code: Sig,
    /// A checked descriptor that runs: the channel turns active.
    pub(super) load: Sig,
    /// Any decided descriptor, whether it runs or not: the walk's registers take it.
    pub(super) take: Sig,
    pub(super) active: RegHandle,
    /// The descriptor check's stage (0: none under way).
    pub(super) checking: RegHandle,
    pub(super) error: RegHandle,
    pub(super) stride: RegHandle,
    pub(super) row_beats: RegHandle,
    pub(super) block_rows: Option<RegHandle>,
    pub(super) row_addr: RegHandle,
    pub(super) req: Walker,
    pub(super) req_valid: Sig,
    /// The current beat's byte address: the row's address plus the beat's offset.
    pub(super) req_addr: RegHandle,
    /// A read channel's blocks requested and not yet released by its consumer (0 to 2).
    pub(super) ahead: Option<RegHandle>,
    /// AXI4: the request walk did not move in the previous cycle (no step, no descriptor
    /// taken), so a burst length registered from it then is its length now.
    pub(super) walk_still: Option<RegHandle>,
}

/// Builds a channel's state and request. Read channels (`land` given) may run one block ahead
/// of their consumer (`cons_block`); the write channel walks the staging buffer's rows. A start
/// while idle takes the descriptor into registers; its check ([`check_descriptor`]) decides
/// [`CHECK_CYCLES`] cycles later, and the channel then loads it (or keeps the error).
pub(super) fn build(
    m: &mut ModuleBuilder,
    cfg: &DmaConfig,
    name: &'static str,
    rows: u32,
    row_beats: u32,
    read: Option<RegHandle>,
) -> Channel {
    let a = cfg.addr_bits;
    let iw = cfg.index_bits;
    let input = Descriptor::inputs(m, cfg, name, read.is_some());
    let active = m.reg(&format!("{name}_active"), 1, Some(0));
    let checking = m.reg(&format!("{name}_checking"), 2, Some(0));
    let idle = !active.q & checking.q.is_zero();
    let accept = m.name(&format!("{name}_accept"), input.start & idle);
    let refused = input.start & !idle;
    // The check's stages: 1 to CHECK_CYCLES after the start, then 0.
    let zero2 = m.zero(2);
    let one2 = m.lit(2, 1);
    let stepping = checking.q.any() & !checking.q.eq(CHECK_CYCLES as u64);
    let stage_d = mux(accept, one2, mux(stepping, checking.q + 1, zero2));
    m.set_next(checking, stage_d);
    let decide = checking.q.eq(CHECK_CYCLES as u64);
    let mut hold = |field: &str, x: Sig| m.hold(&format!("{name}_d_{field}"), x, accept);
    let desc = Descriptor {
        start: decide,
        base: hold("base", input.base),
        stride: hold("stride", input.stride),
        row_bytes: hold("row_bytes", input.row_bytes),
        rows: hold("rows", input.rows),
        block_rows: input.block_rows.map(|b| hold("block_rows", b)),
    };
    let total = cfg.kv_max_rows.filter(|_| matches!(name, "k" | "v"));
    let code = check_descriptor(m, cfg, &desc, (rows, row_beats, total), name);
    let code = m.name(&format!("{name}_check"), code);
    let error = m.reg(&format!("{name}_error"), error::BITS, Some(0));
    let stride = m.reg(&format!("{name}_stride"), a, Some(0));
    let rb = m.reg(
        &format!("{name}_row_beats"),
        bits_for(row_beats as u64),
        Some(0),
    );
    let block_rows = read.map(|_| m.reg(&format!("{name}_block_rows"), iw, Some(0)));
    let row_addr = m.reg(&format!("{name}_row_addr"), a, Some(0));
    let req = Walker::new(
        m,
        &format!("{name}_req"),
        addr_bits(row_beats),
        addr_bits(rows),
        iw,
    );

    let valid_desc = code.is_zero();
    let load = decide & valid_desc;
    let load = m.name(&format!("{name}_load"), load);
    // The walk's registers take every decided descriptor, a refused one too: the channel
    // stays inactive then, so their values do not matter, and their enables do not wait on
    // the check's sum (only `active`, the error and the GLB's tags do).
    let take = decide;
    let rows_pending = req.rows_left.q.any();
    let mut conds = vec![active.q, rows_pending];
    // Fetch at most one block ahead of the consumer (the double buffer): the request walk's
    // blocks less the consumer's, 0 to 2, counted in a register of its own (so the request's
    // valid is no subtraction).
    let ahead = read.map(|_| m.reg(&format!("{name}_ahead"), 2, Some(0)));
    if let Some(ahead) = ahead {
        conds.push(!ahead.q.bit(1));
    }
    let req_valid = and_all(&conds);
    let req_valid = m.name(&format!("{name}_req_valid"), req_valid);
    // The request's byte address is a register of its own (the row's address plus the beat's
    // offset, kept as the walk steps), so the memory port's address is a multiplexer from
    // registers.
    let req_addr = m.reg(&format!("{name}_req_addr"), a, Some(0));
    Channel {
        name,
        desc,
        accept,
        refused,
        code,
        load,
        take,
        active,
        checking,
        error,
        stride,
        row_beats: rb,
        block_rows,
        row_addr,
        req,
        req_valid,
        req_addr,
        ahead,
        walk_still: (cfg.mem_if == MemIf::Axi4)
            .then(|| m.reg(&format!("{name}_walk_still"), 1, Some(0))),
    }
}

impl Channel {
    /// Descriptor registers, error status and the request walk, given whether the request was
    /// accepted this cycle. Returns (`done_requests`: the last beat was just accepted, the
    /// accepted beat ended a block).
    /// `bus` (AXI4) is a response's error code, nonzero when one failed: the channel keeps the
    /// first.
    pub(super) fn finish_requests(
        &self,
        m: &mut ModuleBuilder,
        cfg: &DmaConfig,
        accepted: Sig,
        bus: Option<Sig>,
    ) -> (Sig, Sig) {
        if let Some(still) = self.walk_still {
            m.set_next(still, !(accepted | self.take));
        }
        let beats = beats_of(m, cfg, self.desc.row_bytes, self.row_beats.q.width());
        m.set_next(self.stride, self.desc.stride);
        m.set_enable(self.stride, self.take);
        m.set_next(self.row_beats, beats);
        m.set_enable(self.row_beats, self.take);
        let block_rows = match (self.block_rows, self.desc.block_rows) {
            (Some(r), Some(input)) => {
                m.set_next(r, input);
                m.set_enable(r, self.take);
                r.q
            }
            // The write channel has one block: all its rows.
            _ => m.lit(cfg.index_bits, 0),
        };
        // A start while busy is refused at once; a taken descriptor's code comes with its
        // check's decision (0 when it runs).
        let busy = m.lit(error::BITS, error::BUSY);
        let err_d = mux(self.refused, busy, self.code);
        let set = self.refused | self.desc.start;
        match bus {
            None => {
                m.set_next(self.error, err_d);
                m.set_enable(self.error, set);
            }
            Some(code) => {
                let first = code.any() & self.error.q.is_zero();
                m.set_next(self.error, mux(set, err_d, code));
                m.set_enable(self.error, set | first);
            }
        }

        let (last_beat, block_end) = self.req.advance(
            m,
            accepted,
            self.take,
            self.desc.rows,
            self.row_beats.q,
            block_rows,
        );
        let next_row = self.row_addr.q + self.stride.q;
        let row_addr_d = mux(self.take, self.desc.base, next_row);
        m.set_next(self.row_addr, row_addr_d);
        let row_done = accepted & last_beat;
        let en = self.take | row_done;
        m.set_enable(self.row_addr, en);
        // The next beat's address: the row's next beat, or the next row's first.
        let beat_bytes = m.lit(self.req_addr.q.width(), 1 << cfg.beat_shift());
        let next_beat = self.req_addr.q + beat_bytes;
        let req_addr_d = mux(last_beat, row_addr_d, next_beat);
        let req_addr_d = mux(self.take, self.desc.base, req_addr_d);
        m.set_next(self.req_addr, req_addr_d);
        m.set_enable(self.req_addr, accepted | self.take);
        let last_row = self.req.rows_left.q.eq(1);
        (row_done & last_row, row_done & block_end)
    }

    /// `active`: set by a load, cleared by `done`.
    pub(super) fn finish_active(&self, m: &mut ModuleBuilder, done: Sig) {
        let one = m.lit(1, 1);
        let zero = m.zero(1);
        let d = mux(self.load, one, zero);
        m.set_next(self.active, d);
        let en = self.load | done;
        m.set_enable(self.active, en);
        // Busy from the start: the check, then the transfer.
        let busy = self.active.q | self.checking.q.any();
        m.output(&format!("{}_busy", self.name), busy);
        m.output(&format!("{}_error", self.name), self.error.q);
    }
}

/// The response side of a read channel: walker, landed flags, consumer handshake, counters.
/// Returns the landing port (we, buf, row, beat).
pub(super) fn finish_read(
    m: &mut ModuleBuilder,
    cfg: &DmaConfig,
    ch: &Channel,
    cons_block: RegHandle,
    land: &LandingConfig,
    (response, block_requested): (Sig, Sig),
) -> [Sig; 4] {
    let name = ch.name;
    let iw = cfg.index_bits;
    let want = m.input(&format!("{name}_want"), 1);
    let release = m.input(&format!("{name}_release"), 1);
    let rsp = Walker::new(
        m,
        &format!("{name}_rsp"),
        land.beat_bits(),
        land.row_bits(),
        iw,
    );
    let block_rows = ch.block_rows.expect("a read channel has blocks").q;
    let (last_beat, block_end) = rsp.advance(
        m,
        response,
        ch.take,
        ch.desc.rows,
        ch.row_beats.q,
        block_rows,
    );
    let block_landed = and_all(&[response, last_beat, block_end]);
    let landed = m.reg(&format!("{name}_landed"), 2, Some(0));
    let land_buf = rsp.block.q.bit(0);
    let cons_buf = cons_block.q.bit(0);
    let landed0 = landed.q.bit(0);
    let landed1 = landed.q.bit(1);
    let here = mux(cons_buf, landed1, landed0);
    let ready = ch.active.q & here;
    let ready = m.name(&format!("{name}_ready_int"), ready);
    // The block after the current one has landed in the other slot: a consumer that releases
    // the current block this cycle may start on the next one in the cycle after.
    let there = mux(cons_buf, landed0, landed1);
    let next = ch.active.q & there;
    let released = release & ready;
    // landed: set the buffer whose block just landed, clear the one just released.
    let one2 = m.lit(2, 1);
    let zero2 = m.zero(2);
    let set = one2 << land_buf;
    let set = mux(block_landed, set, zero2);
    let clear = one2 << cons_buf;
    let clear = mux(released, clear, zero2);
    let keep = !clear;
    let kept = landed.q & keep;
    let landed_d = kept | set;
    let landed_d = mux(ch.take, zero2, landed_d);
    m.set_next(landed, landed_d);
    let zero_blk = m.zero(iw);
    let cons_inc = cons_block.q + 1;
    let cons_d = mux(ch.take, zero_blk, cons_inc);
    m.set_next(cons_block, cons_d);
    let cons_en = ch.take | released;
    m.set_enable(cons_block, cons_en);
    let ahead = ch.ahead.expect("a read channel counts its blocks ahead");
    count_in_flight(m, ahead, (block_requested, released), Some(ch.take));

    // Done once every row has landed and every landed block has been released.
    let all_landed = rsp.rows_left.q.is_zero();
    let all_released = cons_block.q.eq(rsp.block.q);
    let done = and_all(&[ch.active.q, all_landed, all_released]);
    ch.finish_active(m, done);

    let not_ready = !ready;
    let waiting = and_all(&[ch.active.q, want, not_ready]);
    let first = cons_block.q.is_zero();
    let later = !first;
    let wait_later = waiting & later;
    let wait_first = waiting & first;
    let wait = counter(m, &format!("{name}_wait"), wait_later, 32);
    let first_wait = counter(m, &format!("{name}_first_wait"), wait_first, 32);
    m.output(&format!("{name}_ready"), ready);
    m.output(&format!("{name}_next"), next);
    m.output(&format!("{name}_slot"), cons_buf);
    m.output(&format!("{name}_block"), cons_block.q);
    m.output(&format!("{name}_wait"), wait);
    m.output(&format!("{name}_first_wait"), first_wait);
    [response, land_buf, rsp.row.q, rsp.beat.q]
}

/// Index of the lowest set bit of `v` (a power-of-two width; the index in log2 of it bits)
/// and whether any is set.
pub(super) fn lowest_set(m: &mut ModuleBuilder, v: Sig) -> (Sig, Sig) {
    let n = v.width();
    let bits: Vec<Sig> = (0..n).map(|i| v.bit(i)).collect();
    let mut idx = m.lit(addr_bits(n), (n - 1) as u64);
    for i in (0..n as usize - 1).rev() {
        let lit = m.lit(addr_bits(n), i as u64);
        idx = mux(bits[i], lit, idx);
    }
    (v.any(), idx)
}
