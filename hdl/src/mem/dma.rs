//! The DMA: `dma_engine` (descriptor walkers, arbitration, memory port) and `dma` (the engine
//! with its landing buffers and the O staging buffer).
//!
//! **Memory port** (valid/ready, `width` bits, byte addresses): `mem_req_valid/ready`,
//! `mem_req_addr`, `mem_req_write`, `mem_req_wdata`; responses `mem_rsp_valid`, `mem_rsp_data`
//! arrive in request order, one per read, and are always accepted.
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
//! **Write channel** `o`: the consumer fills the staging buffer (`o_wr_*`), then a descriptor
//! (`o_base`, `o_stride`, `o_row_bytes`, `o_rows`) and `o_start` write its rows to memory;
//! `o_busy` falls when the last beat is accepted (writes are posted).
//!
//! **Descriptor errors** (`x_error`, sticky until the next start; the channel stays idle and
//! never hangs): 1 zero size; 2 base, stride or row bytes not a multiple of the beat; 3 rows or
//! row longer than the landing or staging buffer; 4 beyond the address range (2^addr_bits
//! bytes); 5 started while busy (the running transfer continues).
//!
//! **Arbitration**: round robin among the channels with a request; reads also need room in the
//! tag FIFO (`max_outstanding` reads in flight), which records which channel each response
//! belongs to. A response walker per channel mirrors its request walk, so addresses are not
//! stored.
//!
//! **Counters**: `read_beats`, `write_beats`; per read channel `x_wait` (cycles the consumer
//! asserted `x_want` for a block after the first and it had not landed: prefetch should keep
//! this 0) and `x_first_wait` (the same for each transfer's first block).

use anyhow::{ensure, Result};

use crate::iface::Block;
use crate::landing::{self, LandingConfig};
use crate::{
    addr_bits, and_all, bits_for, cat, group, interface, mux, mux_index, or_all, Design, ModRef,
    ModuleBuilder, RegHandle, Sig,
};

/// Configuration of the DMA.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DmaConfig {
    /// Memory port width in bits: a power of two from 32 to 1024.
    pub width: u32,
    /// Byte address width; the address range is 2^addr_bits bytes.
    pub addr_bits: u32,
    /// Width of row counts.
    pub index_bits: u32,
    /// Reads in flight at most: a power of two.
    pub max_outstanding: u32,
    pub q: LandingConfig,
    pub k: LandingConfig,
    pub v: LandingConfig,
    /// Staging buffer of the write channel: rows and beats per row, banked by `o_rows_per_bank`
    /// rows (a write port per bank: each PE row writes its own outputs).
    pub o_rows: u32,
    pub o_row_beats: u32,
    pub o_rows_per_bank: u32,
}

/// Error codes of `x_error`.
pub mod error {
    /// Width of an error code.
    pub const BITS: u32 = 3;
    pub const ZERO_SIZE: u64 = 1;
    pub const MISALIGNED: u64 = 2;
    pub const TOO_LARGE: u64 = 3;
    pub const OUT_OF_RANGE: u64 = 4;
    pub const BUSY: u64 = 5;

    /// What an error code means.
    pub fn describe(code: u64) -> &'static str {
        match code {
            0 => "no error",
            ZERO_SIZE => "a descriptor of zero size",
            MISALIGNED => "a base, stride or row length that is not a multiple of the beat",
            TOO_LARGE => "rows or a row longer than the landing or staging buffer",
            OUT_OF_RANGE => "a transfer beyond the address range",
            BUSY => "a start while the channel was busy",
            _ => "an unknown error code",
        }
    }
}

/// Width of the beat counters (`read_beats`, `write_beats`: beats since reset).
pub const BEAT_COUNTER_BITS: u32 = 48;

/// The narrowest byte address: a descriptor's row bytes are `ROW_BYTES_BITS` wide, and an
/// address must reach any row it describes.
pub const MIN_ADDR_BITS: u32 = ROW_BYTES_BITS;
/// The widest byte address.
pub const MAX_ADDR_BITS: u32 = 48;

/// The port width (`mem_width`: a power of two from 32 to 1024 bits) and the address width
/// (`MIN_ADDR_BITS` to `MAX_ADDR_BITS`), checked before anything is derived from them.
pub fn validate_widths(width: u32, addr_bits: u32) -> Result<()> {
    ensure!(
        width.is_power_of_two() && (32..=1024).contains(&width),
        "mem_width = {width} is not supported: allowed are powers of two from 32 to 1024 bits"
    );
    ensure!(
        (MIN_ADDR_BITS..=MAX_ADDR_BITS).contains(&addr_bits),
        "addr_bits = {addr_bits} is out of range: allowed {MIN_ADDR_BITS} to {MAX_ADDR_BITS}"
    );
    Ok(())
}

/// Width of the row-bytes descriptor fields.
pub const ROW_BYTES_BITS: u32 = 16;

impl DmaConfig {
    pub fn validate(&self) -> Result<()> {
        validate_widths(self.width, self.addr_bits)?;
        ensure!(
            self.max_outstanding.is_power_of_two() && (2..=4096).contains(&self.max_outstanding),
            "max_outstanding = {} is not supported: allowed are powers of two from 2 to 4096",
            self.max_outstanding
        );
        for (name, l) in [("Q", &self.q), ("K", &self.k), ("V", &self.v)] {
            l.validate()?;
            ensure!(
                l.width == self.width,
                "the {name} landing buffer must be {} bits wide",
                self.width
            );
            ensure!(
                (l.row_beats * self.beat_bytes()) < (1 << ROW_BYTES_BITS),
                "{name} rows of {} beats are too long for the DMA's row-bytes field",
                l.row_beats
            );
        }
        ensure!(
            self.o_rows >= 1 && self.o_row_beats >= 1,
            "the O staging buffer needs a row of a beat"
        );
        ensure!(
            self.o_rows_per_bank >= 1 && self.o_rows.is_multiple_of(self.o_rows_per_bank),
            "the O staging buffer's {} rows do not split into banks of {}",
            self.o_rows,
            self.o_rows_per_bank
        );
        Ok(())
    }

    pub fn beat_bytes(&self) -> u32 {
        self.width / 8
    }

    /// log2 of the beat size in bytes.
    pub fn beat_shift(&self) -> u32 {
        self.beat_bytes().trailing_zeros()
    }

    pub fn o_row_bits(&self) -> u32 {
        addr_bits(self.o_rows)
    }

    pub fn o_beat_bits(&self) -> u32 {
        addr_bits(self.o_row_beats)
    }

    /// Banks of the O staging buffer.
    pub fn o_banks(&self) -> u32 {
        self.o_rows / self.o_rows_per_bank
    }

    /// Bits of the row-within-bank field of an O staging write (0 for one row per bank).
    pub fn o_local_row_bits(&self) -> u32 {
        if self.o_rows_per_bank == 1 {
            0
        } else {
            addr_bits(self.o_rows_per_bank)
        }
    }

    pub fn engine_name(&self) -> String {
        format!(
            "dma_engine_w{}_a{}_i{}_t{}_q{}x{}_k{}x{}_v{}x{}_o{}x{}",
            self.width,
            self.addr_bits,
            self.index_bits,
            self.max_outstanding,
            self.q.rows,
            self.q.row_beats,
            self.k.rows,
            self.k.row_beats,
            self.v.rows,
            self.v.row_beats,
            self.o_rows,
            self.o_row_beats
        )
    }

    pub fn module_name(&self) -> String {
        let lay = |l: &LandingConfig| match l.layout {
            landing::Layout::RowBanked { rows_per_bank } => format!("rb{rows_per_bank}"),
            landing::Layout::BeatSliced => "bs".into(),
        };
        format!(
            "{}_{}{}{}o{}",
            self.engine_name().replacen("dma_engine", "dma", 1),
            lay(&self.q),
            lay(&self.k),
            lay(&self.v),
            self.o_rows_per_bank
        )
    }
}

/// Descriptor inputs of a channel.
struct Descriptor {
    start: Sig,
    base: Sig,
    stride: Sig,
    row_bytes: Sig,
    rows: Sig,
    /// Read channels only.
    block_rows: Option<Sig>,
}

impl Descriptor {
    fn inputs(m: &mut ModuleBuilder, cfg: &DmaConfig, name: &str, blocks: bool) -> Self {
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

/// The error code of a descriptor (0 when it can run).
fn check_descriptor(
    m: &mut ModuleBuilder,
    cfg: &DmaConfig,
    d: &Descriptor,
    max_rows: u32,
    max_row_beats: u32,
) -> Sig {
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
    // Last byte: base + (rows - 1) * stride + row_bytes - 1, wide enough not to wrap.
    let w = a + cfg.index_bits + 2;
    let rows_m1 = d.rows - 1;
    let span = rows_m1.mul_wide(d.stride);
    let span = span.zext(w);
    let base = d.base.zext(w);
    let bytes = d.row_bytes.zext(w);
    let last = base + span;
    let last = last + bytes;
    let last = last - 1;
    let last = m.name("last_byte", last);
    let high = last.slice(w - 1, a);
    let out_of_range = high.any();
    let low_bits = last.slice(a - 1, 0);
    m.discard(low_bits);
    let ok = m.zero(3);
    let c4 = m.lit(3, error::OUT_OF_RANGE);
    let c3 = m.lit(3, error::TOO_LARGE);
    let c2 = m.lit(3, error::MISALIGNED);
    let c1 = m.lit(3, error::ZERO_SIZE);
    let e = mux(out_of_range, c4, ok);
    let e = mux(too_large, c3, e);
    let e = mux(misaligned, c2, e);
    mux(zero, c1, e)
}

/// Beats per row from a row-bytes field (the descriptor check guarantees the value fits).
fn beats_of(m: &mut ModuleBuilder, cfg: &DmaConfig, row_bytes: Sig, bits: u32) -> Sig {
    let beats = row_bytes >> cfg.beat_shift();
    if bits >= ROW_BYTES_BITS {
        return beats.zext(bits);
    }
    let high = beats.slice(ROW_BYTES_BITS - 1, bits);
    m.discard(high);
    beats.trunc(bits)
}

/// A 32-bit event counter.
fn counter(m: &mut ModuleBuilder, name: &str, event: Sig, width: u32) -> Sig {
    let r = m.reg(name, width, Some(0));
    let inc = r.q + 1;
    m.set_next(r, inc);
    m.set_enable(r, event);
    r.q
}

/// Registers that walk rows and beats (a request walker and a response walker per channel).
struct Walker {
    beat: RegHandle,
    row: RegHandle,
    rows_left: RegHandle,
    block: RegHandle,
}

impl Walker {
    fn new(m: &mut ModuleBuilder, prefix: &str, beat_bits: u32, row_bits: u32, iw: u32) -> Self {
        Walker {
            beat: m.reg(&format!("{prefix}_beat"), beat_bits, Some(0)),
            row: m.reg(&format!("{prefix}_row"), row_bits, Some(0)),
            rows_left: m.reg(&format!("{prefix}_rows_left"), iw, Some(0)),
            block: m.reg(&format!("{prefix}_block"), iw, Some(0)),
        }
    }

    /// Sets the walk: `load` restarts it for `rows` rows, `step` takes one beat. Returns (this
    /// beat ends a row, this row ends a block).
    fn advance(
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
struct Channel {
    name: &'static str,
    desc: Descriptor,
    code: Sig,
    load: Sig,
    active: RegHandle,
    error: RegHandle,
    stride: RegHandle,
    row_beats: RegHandle,
    block_rows: Option<RegHandle>,
    row_addr: RegHandle,
    req: Walker,
    req_valid: Sig,
    req_addr: Sig,
}

/// Builds a channel's state and request. Read channels (`land` given) may run one block ahead
/// of their consumer (`cons_block`); the write channel walks the staging buffer's rows.
fn channel(
    m: &mut ModuleBuilder,
    cfg: &DmaConfig,
    name: &'static str,
    rows: u32,
    row_beats: u32,
    read: Option<RegHandle>,
) -> Channel {
    let a = cfg.addr_bits;
    let iw = cfg.index_bits;
    let desc = Descriptor::inputs(m, cfg, name, read.is_some());
    let code = check_descriptor(m, cfg, &desc, rows, row_beats);
    let code = m.name(&format!("{name}_check"), code);
    let active = m.reg(&format!("{name}_active"), 1, Some(0));
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

    let idle = !active.q;
    let fresh = desc.start & idle;
    let valid_desc = code.is_zero();
    let load = fresh & valid_desc;
    let load = m.name(&format!("{name}_load"), load);
    let rows_pending = req.rows_left.q.any();
    let mut conds = vec![active.q, rows_pending];
    if let Some(cons_block) = read {
        // Fetch at most one block ahead of the consumer (the double buffer).
        let ahead = req.block.q - cons_block.q;
        let two = m.lit(iw, 2);
        conds.push(ahead.lt(two));
    }
    let req_valid = and_all(&conds);
    let req_valid = m.name(&format!("{name}_req_valid"), req_valid);
    let beat_a = req.beat.q.zext(a);
    let offset = beat_a << cfg.beat_shift();
    let req_addr = row_addr.q + offset;
    Channel {
        name,
        desc,
        code,
        load,
        active,
        error,
        stride,
        row_beats: rb,
        block_rows,
        row_addr,
        req,
        req_valid,
        req_addr,
    }
}

impl Channel {
    /// Descriptor registers, error status and the request walk, given whether the request was
    /// accepted this cycle. Returns `done_requests`: the last beat was just accepted.
    fn finish_requests(&self, m: &mut ModuleBuilder, cfg: &DmaConfig, accepted: Sig) -> Sig {
        let beats = beats_of(m, cfg, self.desc.row_bytes, self.row_beats.q.width());
        m.set_next(self.stride, self.desc.stride);
        m.set_enable(self.stride, self.load);
        m.set_next(self.row_beats, beats);
        m.set_enable(self.row_beats, self.load);
        let block_rows = match (self.block_rows, self.desc.block_rows) {
            (Some(r), Some(input)) => {
                m.set_next(r, input);
                m.set_enable(r, self.load);
                r.q
            }
            // The write channel has one block: all its rows.
            _ => m.lit(cfg.index_bits, 0),
        };
        let busy = m.lit(3, error::BUSY);
        let err_d = mux(self.active.q, busy, self.code);
        m.set_next(self.error, err_d);
        m.set_enable(self.error, self.desc.start);

        let (last_beat, _) = self.req.advance(
            m,
            accepted,
            self.load,
            self.desc.rows,
            self.row_beats.q,
            block_rows,
        );
        let next_row = self.row_addr.q + self.stride.q;
        let row_addr_d = mux(self.load, self.desc.base, next_row);
        m.set_next(self.row_addr, row_addr_d);
        let row_done = accepted & last_beat;
        let en = self.load | row_done;
        m.set_enable(self.row_addr, en);
        let last_row = self.req.rows_left.q.eq(1);
        row_done & last_row
    }

    /// `active`: set by a load, cleared by `done`.
    fn finish_active(&self, m: &mut ModuleBuilder, done: Sig) {
        let one = m.lit(1, 1);
        let zero = m.zero(1);
        let d = mux(self.load, one, zero);
        m.set_next(self.active, d);
        let en = self.load | done;
        m.set_enable(self.active, en);
        m.output(&format!("{}_busy", self.name), self.active.q);
        m.output(&format!("{}_error", self.name), self.error.q);
    }
}

/// The response side of a read channel: walker, landed flags, consumer handshake, counters.
/// Returns the landing port (we, buf, row, beat).
fn finish_read(
    m: &mut ModuleBuilder,
    cfg: &DmaConfig,
    ch: &Channel,
    cons_block: RegHandle,
    land: &LandingConfig,
    response: Sig,
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
        ch.load,
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
    let landed_d = mux(ch.load, zero2, landed_d);
    m.set_next(landed, landed_d);
    let zero_blk = m.zero(iw);
    let cons_inc = cons_block.q + 1;
    let cons_d = mux(ch.load, zero_blk, cons_inc);
    m.set_next(cons_block, cons_d);
    let cons_en = ch.load | released;
    m.set_enable(cons_block, cons_en);

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
    m.output(&format!("{name}_slot"), cons_buf);
    m.output(&format!("{name}_block"), cons_block.q);
    m.output(&format!("{name}_wait"), wait);
    m.output(&format!("{name}_first_wait"), first_wait);
    [response, land_buf, rsp.row.q, rsp.beat.q]
}

/// Index of the lowest set bit of a 4-bit value (and whether any is set).
fn lowest_set(m: &mut ModuleBuilder, v: Sig) -> (Sig, Sig) {
    let bits: Vec<Sig> = (0..4).map(|i| v.bit(i)).collect();
    let mut idx = m.lit(2, 3);
    for i in (0..3).rev() {
        let lit = m.lit(2, i as u64);
        idx = mux(bits[i], lit, idx);
    }
    (v.any(), idx)
}

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
    /// (`ready`) in landing slot `slot`, the current block's number, the consumer's wait cycles
    /// (later blocks, first blocks).
    pub struct ChannelStatus { busy, error, ready, slot, block, wait, first_wait }
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

group! {
    /// The DMA's inputs: the memory port's ready and response, the channels' commands and the
    /// O staging writes.
    pub struct DmaIn<T> {
        mem_req_ready, mem_rsp_valid, mem_rsp_data;
        q: ReadCmd<T>,
        k: ReadCmd<T>,
        v: ReadCmd<T>,
        o: WriteDesc<T>,
        o_wr: StageWrite<T>,
    }
}

group! {
    /// The DMA's outputs: the memory request, the channels' statuses, the beat counters.
    pub struct DmaOut<T> {
        read_beats, write_beats;
        mem_req: MemReq<T>,
        q: ReadChannel<T>,
        k: ReadChannel<T>,
        v: ReadChannel<T>,
        o: WriteStatus<T>,
    }
}

/// The DMA's block.
pub type DmaBlock = Block<DmaIn, DmaOut<u32>>;

group! {
    /// The engine's inputs: the memory port's ready and response, the descriptors, the O
    /// staging buffer's read data.
    pub struct EngineIn<T> {
        mem_req_ready, mem_rsp_valid, mem_rsp_data, o_rd_data;
        q: ReadDesc<T>,
        k: ReadDesc<T>,
        v: ReadDesc<T>,
        o: WriteDesc<T>,
    }
}

group! {
    /// The engine's outputs: beat counters, the response data for the landing buffers and the
    /// O staging read address; the memory request, the channels' statuses, the landing writes.
    pub struct EngineOut<T> {
        read_beats, write_beats, land_data, o_rd_row, o_rd_beat;
        mem_req: MemReq<T>,
        q: ChannelStatus<T>,
        k: ChannelStatus<T>,
        v: ChannelStatus<T>,
        o: WriteStatus<T>,
        q_land: LandWrite<T>,
        k_land: LandWrite<T>,
        v_land: LandWrite<T>,
    }
}

impl DmaConfig {
    fn read_desc(&self) -> ReadDesc<u32> {
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

    fn channel_status(&self) -> ChannelStatus<u32> {
        ChannelStatus {
            busy: 1,
            error: error::BITS,
            ready: 1,
            slot: 1,
            block: self.index_bits,
            wait: 32,
            first_wait: 32,
        }
    }

    fn read_channel(&self, l: &LandingConfig) -> ReadChannel<u32> {
        ReadChannel {
            rd_data: l.banks() * self.width,
            status: self.channel_status(),
        }
    }

    fn write_desc(&self) -> WriteDesc<u32> {
        WriteDesc {
            start: 1,
            base: self.addr_bits,
            stride: self.addr_bits,
            row_bytes: ROW_BYTES_BITS,
            rows: self.index_bits,
        }
    }

    fn land_write(&self, l: &LandingConfig) -> LandWrite<u32> {
        LandWrite {
            we: 1,
            slot: 1,
            row: l.row_bits(),
            beat: l.beat_bits(),
        }
    }

    /// The engine's input widths.
    pub fn engine_inputs(&self) -> EngineIn<u32> {
        EngineIn {
            mem_req_ready: 1,
            mem_rsp_valid: 1,
            mem_rsp_data: self.width,
            o_rd_data: self.width,
            q: self.read_desc(),
            k: self.read_desc(),
            v: self.read_desc(),
            o: self.write_desc(),
        }
    }

    /// The engine's output widths.
    pub fn engine_outputs(&self) -> EngineOut<u32> {
        let o_rows = addr_bits(self.o_rows);
        EngineOut {
            read_beats: BEAT_COUNTER_BITS,
            write_beats: BEAT_COUNTER_BITS,
            land_data: self.width,
            o_rd_row: o_rows,
            o_rd_beat: self.o_beat_bits(),
            mem_req: self.output_widths().mem_req,
            q: self.channel_status(),
            k: self.channel_status(),
            v: self.channel_status(),
            o: WriteStatus {
                busy: 1,
                error: error::BITS,
            },
            q_land: self.land_write(&self.q),
            k_land: self.land_write(&self.k),
            v_land: self.land_write(&self.v),
        }
    }

    /// The DMA's input widths.
    pub fn input_widths(&self) -> DmaIn<u32> {
        let banks = self.o_banks();
        DmaIn {
            mem_req_ready: 1,
            mem_rsp_valid: 1,
            mem_rsp_data: self.width,
            q: self.read_cmd(&self.q),
            k: self.read_cmd(&self.k),
            v: self.read_cmd(&self.v),
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
        DmaOut {
            read_beats: BEAT_COUNTER_BITS,
            write_beats: BEAT_COUNTER_BITS,
            mem_req: MemReq {
                valid: 1,
                addr: self.addr_bits,
                write: 1,
                wdata: self.width,
            },
            q: self.read_channel(&self.q),
            k: self.read_channel(&self.k),
            v: self.read_channel(&self.v),
            o: WriteStatus {
                busy: 1,
                error: error::BITS,
            },
        }
    }
}

/// Defines the engine.
pub fn build_engine(d: &mut Design, cfg: &DmaConfig) -> ModRef {
    let cfg = *cfg;
    d.define(&cfg.engine_name(), |_, m| {
        m.doc(&format!(
            "dma_engine: Q/K/V read channels (2-D block walks, double-buffered) and an O write\n\
             channel on one {}-bit valid/ready memory port, round-robin, up to {} reads in flight.\n\
             See hdl/src/mem/dma.rs for the protocol and error codes.",
            cfg.width, cfg.max_outstanding
        ));
        let w = cfg.width;
        let a = cfg.addr_bits;
        let mem_req_ready = m.input("mem_req_ready", 1);
        let mem_rsp_valid = m.input("mem_rsp_valid", 1);

        // Channels and their requests.
        let iw = cfg.index_bits;
        let cons: Vec<RegHandle> = ["q", "k", "v"]
            .iter()
            .map(|n| m.reg(&format!("{n}_cons_block"), iw, Some(0)))
            .collect();
        let lands = [cfg.q, cfg.k, cfg.v];
        let mut chans = vec![];
        for (i, name) in ["q", "k", "v"].into_iter().enumerate() {
            chans.push(channel(m, &cfg, name, lands[i].rows, lands[i].row_beats, Some(cons[i])));
        }
        chans.push(channel(m, &cfg, "o", cfg.o_rows, cfg.o_row_beats, None));

        // Tag FIFO: which read channel each response belongs to.
        let depth = cfg.max_outstanding;
        let pw = addr_bits(depth) + 1;
        let head = m.reg("tag_head", pw, Some(0));
        let tail = m.reg("tag_tail", pw, Some(0));
        let in_flight = tail.q - head.q;
        let depth_lit = m.lit(pw, depth as u64);
        let room = in_flight.lt(depth_lit);
        let room = m.name("tag_room", room);

        // Round-robin arbitration from `rr` upwards.
        let reqs: Vec<Sig> = chans
            .iter()
            .enumerate()
            .map(|(i, c)| if i < 3 { c.req_valid & room } else { c.req_valid })
            .collect();
        let mut rev = reqs.clone();
        rev.reverse();
        let req_vec = cat(&rev);
        let req_vec = m.name("requests", req_vec);
        let rr = m.reg("rr", 2, Some(0));
        let ones4 = m.ones(4);
        let at_or_above = ones4 << rr.q;
        let upper = req_vec & at_or_above;
        let (upper_any, upper_idx) = lowest_set(m, upper);
        let (any_req, lowest_idx) = lowest_set(m, req_vec);
        let grant = mux(upper_any, upper_idx, lowest_idx);
        let grant = m.name("grant", grant);
        let accept = any_req & mem_req_ready;
        let accept = m.name("accept", accept);
        let grant_next = grant + 1;
        m.set_next(rr, grant_next);
        m.set_enable(rr, accept);
        let is_write = grant.eq(3);
        let addrs: Vec<Sig> = chans.iter().map(|c| c.req_addr).collect();
        let addr = mux_index(grant, &addrs);
        let wdata = m.input("o_rd_data", w);
        m.output("mem_req_valid", any_req);
        m.output("mem_req_addr", addr);
        m.output("mem_req_write", is_write);
        m.output("mem_req_wdata", wdata);

        // Tag FIFO push on accepted reads, pop on responses.
        let is_read = !is_write;
        let push = accept & is_read;
        let tags = m.memory("tags", depth, 2);
        let tail_idx = tail.q.trunc(pw - 1);
        let grant_tag = grant;
        m.mem_write(tags, push, tail_idx, grant_tag);
        let tail_inc = tail.q + 1;
        m.set_next(tail, tail_inc);
        m.set_enable(tail, push);
        let head_idx = head.q.trunc(pw - 1);
        let rsp_tag = m.mem_read(tags, head_idx);
        let rsp_tag = m.name("rsp_tag", rsp_tag);
        let head_inc = head.q + 1;
        m.set_next(head, head_inc);
        m.set_enable(head, mem_rsp_valid);

        // Channel updates.
        let mut land_ports = vec![];
        for (i, ch) in chans.iter().enumerate() {
            let granted = grant.eq(i as u64);
            let accepted = accept & granted;
            let accepted = m.name(&format!("{}_accepted", ch.name), accepted);
            let done_requests = ch.finish_requests(m, &cfg, accepted);
            if i < 3 {
                let mine = rsp_tag.eq(i as u64);
                let response = mem_rsp_valid & mine;
                let response = m.name(&format!("{}_response", ch.name), response);
                land_ports.push(finish_read(m, &cfg, ch, cons[i], &lands[i], response));
            } else {
                ch.finish_active(m, done_requests);
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
        let rsp_data = m.input("mem_rsp_data", w);
        m.output("land_data", rsp_data);
        let read_beats = counter(m, "read_beats", push, BEAT_COUNTER_BITS);
        let write_accept = accept & is_write;
        let write_beats = counter(m, "write_beats", write_accept, BEAT_COUNTER_BITS);
        m.output("read_beats", read_beats);
        m.output("write_beats", write_beats);
        let _ = a;
        m.set_latency(1);
    })
}

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
    let landings: Vec<Block<landing::LandIn, landing::RdData<u32>>> = [cfg.q, cfg.k, cfg.v]
        .iter()
        .map(|l| landing::build(d, l))
        .collect();
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
             See hdl/src/mem/dma.rs and hdl/src/mem/landing.rs.",
                cfg.o_rows, cfg.o_row_beats, cfg.o_rows_per_bank
            ));
            m.set_latency(1);
            let o_rd = m.net("o_rd_data", cfg.width);
            let to_engine = EngineIn {
                mem_req_ready: i.mem_req_ready,
                mem_rsp_valid: i.mem_rsp_valid,
                mem_rsp_data: i.mem_rsp_data,
                o_rd_data: o_rd,
                q: i.q.desc,
                k: i.k.desc,
                v: i.v.desc,
                o: i.o,
            };
            let e = m.instantiate(&engine, "u_engine", &to_engine);
            let rd = staging(m, &cfg, &i.o_wr, e.o_rd_row, e.o_rd_beat);
            m.drive(o_rd, rd);
            let mut land = |n: usize, cmd: &ReadCmd, w: &LandWrite, status: ChannelStatus| {
                let ins = landing::LandIn {
                    we: w.we,
                    slot: w.slot,
                    row: w.row,
                    beat: w.beat,
                    data: e.land_data,
                    rd_addr: cmd.rd_addr,
                };
                let name = ["u_q_landing", "u_k_landing", "u_v_landing"][n];
                let rd_data = m.instantiate(&landings[n], name, &ins).rd_data;
                ReadChannel { rd_data, status }
            };
            DmaOut {
                read_beats: e.read_beats,
                write_beats: e.write_beats,
                mem_req: e.mem_req,
                q: land(0, &i.q, &e.q_land, e.q),
                k: land(1, &i.k, &e.k_land, e.k),
                v: land(2, &i.v, &e.v_land, e.v),
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
    wr: &StageWrite,
    rd_row: Sig,
    rd_beat: Sig,
) -> Sig {
    let banks = cfg.o_banks();
    let (lrb, bb, w) = (cfg.o_local_row_bits(), cfg.o_beat_bits(), cfg.width);
    if lrb == 0 {
        // One row per bank: the row field is a placeholder bit, unused.
        m.discard(wr.row);
    }
    let mut bank_data = vec![];
    for n in 0..banks {
        let mem = m.memory(&format!("o_staging{n}"), 1 << (lrb + bb), w);
        let beat = wr.beat.slice(n * bb + bb - 1, n * bb);
        let data = wr.data.slice(n * w + w - 1, n * w);
        let idx = if lrb > 0 {
            cat(&[wr.row.slice(n * lrb + lrb - 1, n * lrb), beat])
        } else {
            beat
        };
        m.mem_write(mem, wr.en.bit(n), idx, data);
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
