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
//! **Write channel** `o`: the consumer fills the staging buffer (`o_wr_*`), then a descriptor
//! (`o_base`, `o_stride`, `o_row_bytes`, `o_rows`) and `o_start` write its rows to memory;
//! `o_busy` falls when the last beat is accepted (writes are posted).
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
//! **Counters**: `read_beats`, `write_beats`; per read channel `x_wait` (cycles the consumer
//! asserted `x_want` for a block after the first and it had not landed: prefetch should keep
//! this 0) and `x_first_wait` (the same for each transfer's first block).

use anyhow::{ensure, Result};

use crate::axi_check::{self, AxiCheckBlock, AxiWatch};
use crate::iface::{Block, Ports};
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
    /// The memory interface: the simple port, or an AXI4 master.
    pub mem_if: MemIf,
    /// AXI4: ID width (reads carry the channel's ID, Q 0, K 1, V 2; writes [`AXI_WRITE_ID`]).
    pub axi_id_bits: u32,
    /// AXI4: bursts in flight at most per ID.
    pub axi_outstanding: u32,
    /// Built for fault injection (`Fault::EarlyWlast` acts in the AXI4 master, selected at
    /// run time; see `fault.rs`).
    pub faults: bool,
}

/// The memory interface of the DMA (and of the core and the top).
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum MemIf {
    /// One request per beat on a valid/ready port, responses in order (`mem_req_*`,
    /// `mem_rsp_*`).
    #[default]
    Simple,
    /// An AXI4 master (`m_axi_*`): INCR bursts of up to 256 beats that never cross 4 KiB, an
    /// ID per read channel, write responses awaited, SLVERR/DECERR reported as error codes.
    Axi4,
}

impl MemIf {
    pub const ALL: [MemIf; 2] = [MemIf::Simple, MemIf::Axi4];

    pub fn name(self) -> &'static str {
        match self {
            MemIf::Simple => "simple",
            MemIf::Axi4 => "axi4",
        }
    }
}

impl std::str::FromStr for MemIf {
    type Err = anyhow::Error;
    fn from_str(name: &str) -> Result<Self> {
        MemIf::ALL
            .into_iter()
            .find(|m| m.name() == name)
            .ok_or_else(|| {
                anyhow::anyhow!("unknown memory interface `{name}`: choose simple or axi4")
            })
    }
}

impl std::fmt::Display for MemIf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// AXI4 read IDs by channel (Q, K, V) and the write ID (O).
pub const AXI_READ_IDS: [u64; 3] = [0, 1, 2];
pub const AXI_WRITE_ID: u64 = 3;
/// AXI4 burst limits: beats per INCR burst, and the boundary no burst crosses.
pub const AXI_MAX_BEATS: u64 = 256;
pub const AXI_BOUNDARY: u64 = 4096;
/// AXI4 `*BURST` of an incrementing burst, the only kind the DMA issues.
pub const AXI_INCR: u64 = 1;
/// AXI4 `*CACHE` of every burst: normal, non-cacheable, bufferable.
pub const AXI_CACHE: u64 = 0b0011;
/// AXI4 response codes.
pub const AXI_OKAY: u64 = 0;
pub const AXI_SLVERR: u64 = 2;
pub const AXI_DECERR: u64 = 3;

/// Error codes of `x_error`.
pub mod error {
    /// Width of an error code.
    pub const BITS: u32 = 4;
    pub const ZERO_SIZE: u64 = 1;
    pub const MISALIGNED: u64 = 2;
    pub const TOO_LARGE: u64 = 3;
    pub const OUT_OF_RANGE: u64 = 4;
    pub const BUSY: u64 = 5;
    /// Software asked for an abort (the core's code).
    pub const ABORTED: u64 = 6;
    /// An AXI4 response was SLVERR (the slave failed the access).
    pub const SLVERR: u64 = 7;
    /// An AXI4 response was DECERR (no slave at the address).
    pub const DECERR: u64 = 8;
    /// An invalid varlen offset list (the SoC top's batch controller).
    pub const BATCH: u64 = 9;
    /// An address the core cannot represent (the SoC top: refused at START).
    pub const ADDRESS: u64 = 10;

    /// Every error code: (code, name, what it means). `STATUS.ERR_CODE`, `regflash.h`'s
    /// `REGFLASH_ERR_*` and `registers.md` are generated from this table.
    pub const CODES: [(u64, &str, &str); 10] = [
        (
            ZERO_SIZE,
            "ZERO_SIZE",
            "a descriptor of zero size (the core's channels; a problem with nothing to compute \
             is not one: it completes)",
        ),
        (
            MISALIGNED,
            "MISALIGNED",
            "a base, stride or row length that is not a multiple of the memory beat \
             (REGFLASH_CFG_ALIGN bytes)",
        ),
        (
            TOO_LARGE,
            "TOO_LARGE",
            "rows or a row longer than the landing or staging buffer",
        ),
        (
            OUT_OF_RANGE,
            "OUT_OF_RANGE",
            "a transfer beyond the address range (2^ADDR_BITS bytes)",
        ),
        (BUSY, "BUSY", "a start while the channel was busy"),
        (ABORTED, "ABORTED", "aborted by software"),
        (SLVERR, "SLVERR", "an AXI4 slave error response (SLVERR)"),
        (
            DECERR,
            "DECERR",
            "an AXI4 decode error response (DECERR: no slave at the address)",
        ),
        (
            BATCH,
            "BATCH",
            "an invalid varlen offset list (misaligned, decreasing, or a sequence longer than \
             2^INDEX_BITS - 1)",
        ),
        (
            ADDRESS,
            "ADDRESS",
            "an address the core cannot represent: a base, stride or offset-list address with \
             bits at or above ADDR_BITS, or a tensor of the launch reaching past 2^ADDR_BITS \
             (its last head's last row), refused at START with nothing read or written; in a \
             varlen batch, the sequence so refused stops the batch before it",
        ),
    ];

    /// What an error code means.
    pub fn describe(code: u64) -> &'static str {
        if code == 0 {
            return "no error";
        }
        CODES
            .iter()
            .find(|c| c.0 == code)
            .map_or("an unknown error code", |c| c.2)
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
        if self.mem_if == MemIf::Axi4 {
            ensure!(
                (2..=16).contains(&self.axi_id_bits),
                "axi_id_bits = {} is out of range: allowed 2 to 16 (the DMA uses IDs 0 to 3)",
                self.axi_id_bits
            );
            ensure!(
                (1..=256).contains(&self.axi_outstanding),
                "axi_outstanding = {} is out of range: allowed 1 to 256 bursts per ID",
                self.axi_outstanding
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
        let port = match self.mem_if {
            MemIf::Simple => String::new(),
            MemIf::Axi4 => format!("_axi{}x{}", self.axi_id_bits, self.axi_outstanding),
        };
        let port = match self.mem_if {
            MemIf::Axi4 if self.faults => format!("{port}_faults"),
            _ => port,
        };
        format!(
            "dma_engine_w{}_a{}_i{}_t{}_q{}x{}_k{}x{}_v{}x{}_o{}x{}{port}",
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
    let eb = error::BITS;
    let ok = m.zero(eb);
    let c4 = m.lit(eb, error::OUT_OF_RANGE);
    let c3 = m.lit(eb, error::TOO_LARGE);
    let c2 = m.lit(eb, error::MISALIGNED);
    let c1 = m.lit(eb, error::ZERO_SIZE);
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
    /// `bus` (AXI4) is a response's error code, nonzero when one failed: the channel keeps the
    /// first.
    fn finish_requests(
        &self,
        m: &mut ModuleBuilder,
        cfg: &DmaConfig,
        accepted: Sig,
        bus: Option<Sig>,
    ) -> Sig {
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
        let busy = m.lit(error::BITS, error::BUSY);
        let err_d = mux(self.active.q, busy, self.code);
        match bus {
            None => {
                m.set_next(self.error, err_d);
                m.set_enable(self.error, self.desc.start);
            }
            Some(code) => {
                let first = code.any() & self.error.q.is_zero();
                m.set_next(self.error, mux(self.desc.start, err_d, code));
                m.set_enable(self.error, self.desc.start | first);
            }
        }

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
    m.output(&format!("{name}_next"), next);
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
    /// The DMA's inputs: `hold` (start no new request or burst), the memory port (one of the
    /// two, by `mem_if`), the channels' commands and the O staging writes.
    pub struct DmaIn<T> {
        hold;
        mem: Option<MemIn<T>>,
        m_axi: Option<AxiIn<T>>,
        q: ReadCmd<T>,
        k: ReadCmd<T>,
        v: ReadCmd<T>,
        o: WriteDesc<T>,
        o_wr: StageWrite<T>,
    }
}

group! {
    /// The DMA's outputs: the beat counters, `quiet` (nothing in flight on the memory port),
    /// the memory port (by `mem_if`), the channels' statuses.
    pub struct DmaOut<T> {
        read_beats, write_beats, quiet;
        mem_req: Option<MemReq<T>>,
        m_axi: Option<AxiOut<T>>,
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
        hold, o_rd_data;
        mem: Option<MemIn<T>>,
        m_axi: Option<AxiIn<T>>,
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
        read_beats, write_beats, quiet, land_data, o_rd_row, o_rd_beat;
        mem_req: Option<MemReq<T>>,
        m_axi: Option<AxiOut<T>>,
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
            next: 1,
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
            mem,
            m_axi,
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
        let (mem_req, m_axi) = self.mem_outputs();
        EngineOut {
            read_beats: BEAT_COUNTER_BITS,
            write_beats: BEAT_COUNTER_BITS,
            quiet: 1,
            land_data: self.width,
            o_rd_row: o_rows,
            o_rd_beat: self.o_beat_bits(),
            mem_req,
            m_axi,
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
        let (mem, m_axi) = self.mem_inputs();
        DmaIn {
            hold: 1,
            mem,
            m_axi,
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
        let (mem_req, m_axi) = self.mem_outputs();
        DmaOut {
            read_beats: BEAT_COUNTER_BITS,
            write_beats: BEAT_COUNTER_BITS,
            quiet: 1,
            mem_req,
            m_axi,
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

/// What the memory port does for the channels each cycle: the request walkers' steps (Q, K,
/// V, O), the read responses by channel, bus errors by channel (AXI4), the O channel's end
/// (AXI4: every write response back), the beats read and written, the response data, and
/// whether nothing is in flight.
struct PortSteps {
    steps: [Sig; 4],
    responses: [Sig; 3],
    bus_errors: Option<[Sig; 4]>,
    o_done: Option<Sig>,
    read_beat: Sig,
    write_beat: Sig,
    rsp_data: Sig,
    quiet: Sig,
}

/// The simple port: round robin among the channels with a request, one beat per request;
/// reads also need room in the tag FIFO (`max_outstanding` reads in flight), which records
/// which channel each (in-order) response belongs to. `hold` stops new requests.
fn simple_port(m: &mut ModuleBuilder, cfg: &DmaConfig, chans: &[Channel], hold: Sig) -> PortSteps {
    let w = cfg.width;
    let mem_req_ready = m.input("mem_req_ready", 1);
    let mem_rsp_valid = m.input("mem_rsp_valid", 1);
    let depth = cfg.max_outstanding;
    let pw = addr_bits(depth) + 1;
    let head = m.reg("tag_head", pw, Some(0));
    let tail = m.reg("tag_tail", pw, Some(0));
    let in_flight = tail.q - head.q;
    let depth_lit = m.lit(pw, depth as u64);
    let room = in_flight.lt(depth_lit);
    let room = m.name("tag_room", room);
    let open = !hold;
    let reqs: Vec<Sig> = chans
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let v = c.req_valid & open;
            if i < 3 {
                v & room
            } else {
                v
            }
        })
        .collect();
    let (any_req, grant, rr) = round_robin(m, "rr", &reqs);
    let accept = any_req & mem_req_ready;
    let accept = m.name("accept", accept);
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
    m.mem_write(tags, push, tail_idx, grant);
    let tail_inc = tail.q + 1;
    m.set_next(tail, tail_inc);
    m.set_enable(tail, push);
    let head_idx = head.q.trunc(pw - 1);
    let rsp_tag = m.mem_read(tags, head_idx);
    let rsp_tag = m.name("rsp_tag", rsp_tag);
    let head_inc = head.q + 1;
    m.set_next(head, head_inc);
    m.set_enable(head, mem_rsp_valid);
    let steps: [Sig; 4] = std::array::from_fn(|i| {
        let granted = grant.eq(i as u64);
        accept & granted
    });
    let responses: [Sig; 3] = std::array::from_fn(|i| mem_rsp_valid & rsp_tag.eq(i as u64));
    PortSteps {
        steps,
        responses,
        bus_errors: None,
        o_done: None,
        read_beat: push,
        write_beat: accept & is_write,
        rsp_data: m.input("mem_rsp_data", w),
        quiet: in_flight.is_zero(),
    }
}

/// Round robin from register `name` (2 bits, the channel after the last grant) among up to 4
/// requests: (any request, the grant, the register, which the caller enables on an accepted
/// grant).
fn round_robin(m: &mut ModuleBuilder, name: &str, reqs: &[Sig]) -> (Sig, Sig, RegHandle) {
    let mut bits = reqs.to_vec();
    while bits.len() < 4 {
        bits.push(m.zero(1));
    }
    bits.reverse();
    let req_vec = cat(&bits);
    let req_vec = m.name(&format!("{name}_requests"), req_vec);
    let rr = m.reg(name, 2, Some(0));
    let ones4 = m.ones(4);
    let at_or_above = ones4 << rr.q;
    let upper = req_vec & at_or_above;
    let (upper_any, upper_idx) = lowest_set(m, upper);
    let (any_req, lowest_idx) = lowest_set(m, req_vec);
    let grant = mux(upper_any, upper_idx, lowest_idx);
    let grant = m.name(&format!("{name}_grant"), grant);
    let grant_next = grant + 1;
    m.set_next(rr, grant_next);
    (any_req, grant, rr)
}

/// Beats of the burst channel `ch` would issue now (9 bits, 1 to 256 while it has a request):
/// to the end of its row, or with contiguous rows (stride = row bytes) to the end of its block
/// (the read channels) or transfer (O); at most 256; never across a 4 KiB boundary.
fn burst_beats(m: &mut ModuleBuilder, cfg: &DmaConfig, ch: &Channel, contig: Sig) -> Sig {
    let rows_left = ch.req.rows_left.q;
    let in_block = match ch.block_rows {
        Some(br) => {
            let w = br.q.width().max(ch.req.row.q.width());
            let left = br.q.zext(w) - ch.req.row.q.zext(w);
            let left = left.zext(w.max(rows_left.width()));
            left.min(rows_left.zext(w.max(rows_left.width())))
        }
        None => rows_left,
    };
    let cw = in_block.width().max(9);
    let cap = m.lit(cw, AXI_MAX_BEATS);
    let rows = in_block.zext(cw).min(cap).trunc(9);
    let rb = ch.row_beats.q;
    let pw = 9 + rb.width();
    let beat = ch.req.beat.q.zext(pw);
    let run_block = rows.mul_wide(rb) - beat;
    let run_row = rb.zext(pw) - beat;
    let run = mux(contig, run_block, run_row);
    let shift = cfg.beat_shift();
    let page = AXI_BOUNDARY >> shift;
    let offset = ch.req_addr.slice(11, shift).zext(pw);
    let to_boundary = m.lit(pw, page) - offset;
    let max = m.lit(pw, AXI_MAX_BEATS);
    let beats = run.min(to_boundary).min(max);
    let high = beats.slice(pw - 1, 9);
    m.discard(high);
    beats.trunc(9)
}

/// Counts things in flight in `r`: `up` adds one, `down` takes one (both: unchanged).
fn count_in_flight(m: &mut ModuleBuilder, r: RegHandle, up: Sig, down: Sig) {
    let inc = r.q + 1;
    let dec = r.q - 1;
    m.set_next(r, mux(up, inc, dec));
    m.set_enable(r, up ^ down);
}

/// The AXI4 LEN field (beats - 1, 8 bits) of a burst of `beats` (9 bits, 1 to 256).
fn axi_len(m: &mut ModuleBuilder, beats: Sig) -> Sig {
    let len = beats - 1;
    m.discard(len.bit(8));
    len.trunc(8)
}

/// The error code of an AXI4 response `resp` when `valid` (SLVERR or DECERR; 0 for OKAY and
/// EXOKAY).
fn bus_error(m: &mut ModuleBuilder, resp: Sig, valid: Sig) -> Sig {
    let decerr = m.lit(error::BITS, error::DECERR);
    let slverr = m.lit(error::BITS, error::SLVERR);
    let code = mux(resp.eq(AXI_DECERR), decerr, slverr);
    let failed = valid & resp.bit(1);
    let none = m.zero(error::BITS);
    mux(failed, code, none)
}

/// The AXI4 master (`m_axi_*`). Reads: a channel at the start of a burst (its request walker
/// not inside one) presents an AR for [`burst_beats`] with its ID, round robin among Q, K and
/// V, held with its payload until accepted; after the handshake its walker steps through the
/// burst's remaining beats (one a cycle) before it may present the next. At most
/// `axi_outstanding` bursts per ID are in flight. R is always ready; beats go to the channel
/// their ID names (bursts of different IDs may interleave), RLAST ends a burst. Writes: the O
/// channel opens a burst by loading the AW register (held until accepted) and then offers its
/// beats on W from the staging buffer, WLAST on the last; W never waits for AWREADY. O is done
/// when every write response is back. A response other than OKAY sets the channel's error
/// (SLVERR 7, DECERR 8). `hold` stops new bursts; those already presented complete.
fn axi_port(
    m: &mut ModuleBuilder,
    cfg: &DmaConfig,
    chans: &[Channel],
    hold: Sig,
    check: &AxiCheckBlock,
) -> PortSteps {
    let ib = cfg.axi_id_bits;
    let a = cfg.addr_bits;
    let w = cfg.width;
    let arready = m.input("m_axi_arready", 1);
    let rvalid = m.input("m_axi_rvalid", 1);
    let rid = m.input("m_axi_rid", ib);
    let rdata = m.input("m_axi_rdata", w);
    let rresp = m.input("m_axi_rresp", 2);
    let rlast = m.input("m_axi_rlast", 1);
    let awready = m.input("m_axi_awready", 1);
    let wready = m.input("m_axi_wready", 1);
    let bvalid = m.input("m_axi_bvalid", 1);
    let bid = m.input("m_axi_bid", ib);
    let bresp = m.input("m_axi_bresp", 2);
    let ob = bits_for(cfg.axi_outstanding as u64);
    let limit = m.lit(ob, cfg.axi_outstanding as u64);
    let open = !hold;

    // Per channel: contiguous rows, the burst it would issue, its walker inside a burst.
    let contig: Vec<Sig> = chans
        .iter()
        .map(|c| {
            let r = m.reg(&format!("{}_contig", c.name), 1, Some(0));
            let bytes = c.desc.row_bytes.zext(a.max(ROW_BYTES_BITS)).trunc(a);
            let same = c.desc.stride.eq(bytes);
            m.set_next(r, same);
            m.set_enable(r, c.load);
            r.q
        })
        .collect();
    let beats: Vec<Sig> = chans
        .iter()
        .zip(&contig)
        .map(|(c, &k)| {
            let b = burst_beats(m, cfg, c, k);
            m.name(&format!("{}_burst_beats", c.name), b)
        })
        .collect();
    let left: Vec<RegHandle> = chans
        .iter()
        .map(|c| m.reg(&format!("{}_burst_left", c.name), 9, Some(0)))
        .collect();
    let inside: Vec<Sig> = left.iter().map(|l| l.q.any()).collect();

    // R: responses by ID.
    let responses: [Sig; 3] = std::array::from_fn(|i| rvalid & rid.eq(AXI_READ_IDS[i]));
    let bursts_back: [Sig; 3] = std::array::from_fn(|i| responses[i] & rlast);

    // AR: new bursts round robin; a presented AR is held until accepted.
    let ar_held = m.reg("ar_held", 1, Some(0));
    let ar_held_id = m.reg("ar_held_id", 2, Some(0));
    let mut cand = vec![];
    let reads_out: Vec<RegHandle> = (0..3)
        .map(|i| m.reg(&format!("{}_bursts", chans[i].name), ob, Some(0)))
        .collect();
    for i in 0..3 {
        let room = reads_out[i].q.lt(limit);
        let c = and_all(&[chans[i].req_valid, !inside[i], room, open, !ar_held.q]);
        cand.push(c);
    }
    let (any_new, new_grant, ar_rr) = round_robin(m, "ar_rr", &cand);
    let grant = mux(ar_held.q, ar_held_id.q, new_grant);
    let grant = m.name("ar_grant", grant);
    let arvalid = any_new | ar_held.q;
    let ar_accept = arvalid & arready;
    m.set_enable(ar_rr, ar_accept & !ar_held.q);
    m.set_next(ar_held, arvalid & !arready);
    m.set_next(ar_held_id, grant);
    let ar_addrs: Vec<Sig> = chans[..3].iter().map(|c| c.req_addr).collect();
    let ar_beats: Vec<Sig> = beats[..3].to_vec();
    let araddr = mux_index(grant, &ar_addrs);
    let ar_len = mux_index(grant, &ar_beats);
    let arlen = axi_len(m, ar_len);
    let mut steps = vec![];
    for i in 0..3 {
        let accepted = ar_accept & grant.eq(i as u64);
        let accepted = m.name(&format!("{}_ar_accepted", chans[i].name), accepted);
        count_in_flight(m, reads_out[i], accepted, bursts_back[i]);
        steps.push(accepted | inside[i]);
    }

    // AW / W: the O channel.
    let o = &chans[3];
    let aw_valid = m.reg("aw_valid", 1, Some(0));
    let aw_addr = m.reg("aw_addr", a, Some(0));
    let aw_len = m.reg("aw_len", 8, Some(0));
    let writes_out = m.reg("o_bursts", ob, Some(0));
    let slot_free = !aw_valid.q | awready;
    let room = writes_out.q.lt(limit);
    let open_burst = and_all(&[o.req_valid, !inside[3], room, open, slot_free]);
    let open_burst = m.name("o_open_burst", open_burst);
    m.set_next(aw_valid, open_burst | (aw_valid.q & !awready));
    m.set_next(aw_addr, o.req_addr);
    m.set_enable(aw_addr, open_burst);
    let o_len_m1 = axi_len(m, beats[3]);
    m.set_next(aw_len, o_len_m1);
    m.set_enable(aw_len, open_burst);
    let b_back = bvalid & bid.eq(AXI_WRITE_ID);
    count_in_flight(m, writes_out, open_burst, b_back);
    let wvalid = inside[3];
    let w_accept = wvalid & wready;
    // The fault: WLAST one beat early (and missing on single-beat bursts).
    let wlast = m.with_fault(
        cfg.faults,
        crate::fault::Fault::EarlyWlast,
        |_| left[3].q.eq(2),
        left[3].q.eq(1),
    );
    steps.push(w_accept);
    // Burst countdowns: a read walker steps the burst's remaining beats after its AR; the O
    // walker steps on each W beat of the burst it opened.
    for i in 0..3 {
        let start = steps[i] & !inside[i];
        let len_m1 = beats[i] - 1;
        let d = mux(start, len_m1, left[i].q - 1);
        m.set_next(left[i], d);
        m.set_enable(left[i], steps[i]);
    }
    let d = mux(open_burst, beats[3], left[3].q - 1);
    m.set_next(left[3], d);
    m.set_enable(left[3], open_burst | w_accept);

    // The port.
    let write_id = m.lit(ib, AXI_WRITE_ID);
    let size = m.lit(3, cfg.beat_shift() as u64);
    let wdata = m.input("o_rd_data", w);
    let cache = m.lit(4, AXI_CACHE);
    let incr = m.lit(2, AXI_INCR);
    let outs = AxiOut {
        awvalid: aw_valid.q,
        awid: write_id,
        awaddr: aw_addr.q,
        awlen: aw_len.q,
        awsize: size,
        awburst: incr,
        awlock: m.zero(1),
        awcache: cache,
        awprot: m.zero(3),
        awqos: m.zero(4),
        wvalid,
        wdata,
        wstrb: m.ones(w / 8),
        wlast,
        bready: m.lit(1, 1),
        arvalid,
        arid: grant.zext(ib),
        araddr,
        arlen,
        arsize: size,
        arburst: incr,
        arlock: m.zero(1),
        arcache: cache,
        arprot: m.zero(3),
        arqos: m.zero(4),
        rready: m.lit(1, 1),
    };
    for (n, s) in outs.named() {
        m.output(&format!("m_axi_{n}"), s);
    }
    let ins = AxiIn {
        awready,
        wready,
        bvalid,
        bid,
        bresp,
        arready,
        rvalid,
        rid,
        rdata,
        rresp,
        rlast,
    };
    m.instantiate(check, "u_axi_check", &AxiWatch { ins, outs });
    let mut bus_errors: Vec<Sig> = (0..3).map(|i| bus_error(m, rresp, responses[i])).collect();
    bus_errors.push(bus_error(m, bresp, b_back));
    let o_done = and_all(&[
        o.active.q,
        !o.req.rows_left.q.any(),
        !inside[3],
        writes_out.q.is_zero(),
    ]);
    let mut idle = vec![!ar_held.q, !aw_valid.q, !inside[3], writes_out.q.is_zero()];
    idle.extend(reads_out.iter().map(|n| n.q.is_zero()));
    let routed = or_all(&responses);
    PortSteps {
        steps: [steps[0], steps[1], steps[2], steps[3]],
        responses,
        bus_errors: Some([bus_errors[0], bus_errors[1], bus_errors[2], bus_errors[3]]),
        o_done: Some(o_done),
        read_beat: routed,
        write_beat: w_accept,
        rsp_data: rdata,
        quiet: and_all(&idle),
    }
}

/// Defines the engine.
pub fn build_engine(d: &mut Design, cfg: &DmaConfig) -> ModRef {
    let check = (cfg.mem_if == MemIf::Axi4).then(|| axi_check::build(d, cfg));
    let cfg = *cfg;
    d.define(&cfg.engine_name(), |_, m| {
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
        m.doc(&format!(
            "dma_engine: Q/K/V read channels (2-D block walks, double-buffered) and an O write\n\
             channel on {port}.\n\
             See hdl/src/mem/dma.rs for the protocol and error codes."
        ));
        let hold = m.input("hold", 1);
        let iw = cfg.index_bits;
        let cons: Vec<RegHandle> = ["q", "k", "v"]
            .iter()
            .map(|n| m.reg(&format!("{n}_cons_block"), iw, Some(0)))
            .collect();
        let lands = [cfg.q, cfg.k, cfg.v];
        let mut chans = vec![];
        for (i, name) in ["q", "k", "v"].into_iter().enumerate() {
            chans.push(channel(
                m,
                &cfg,
                name,
                lands[i].rows,
                lands[i].row_beats,
                Some(cons[i]),
            ));
        }
        chans.push(channel(m, &cfg, "o", cfg.o_rows, cfg.o_row_beats, None));
        let port = match cfg.mem_if {
            MemIf::Simple => simple_port(m, &cfg, &chans, hold),
            MemIf::Axi4 => {
                let check = check.as_ref().expect("built for AXI4");
                axi_port(m, &cfg, &chans, hold, check)
            }
        };

        // Channel updates.
        let mut land_ports = vec![];
        for (i, ch) in chans.iter().enumerate() {
            let step = m.name(&format!("{}_accepted", ch.name), port.steps[i]);
            let bus = port.bus_errors.map(|e| e[i]);
            let done_requests = ch.finish_requests(m, &cfg, step, bus);
            if i < 3 {
                let response = m.name(&format!("{}_response", ch.name), port.responses[i]);
                land_ports.push(finish_read(m, &cfg, ch, cons[i], &lands[i], response));
            } else {
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
        let read_beats = counter(m, "read_beats", port.read_beat, BEAT_COUNTER_BITS);
        let write_beats = counter(m, "write_beats", port.write_beat, BEAT_COUNTER_BITS);
        m.output("read_beats", read_beats);
        m.output("write_beats", write_beats);
        m.output("quiet", port.quiet);
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
                hold: i.hold,
                mem: i.mem,
                m_axi: i.m_axi,
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
                quiet: e.quiet,
                mem_req: e.mem_req,
                m_axi: e.m_axi,
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
