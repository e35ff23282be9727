//! The DMA's parameters, its memory interface (`MemIf`), AXI4 constants and error codes.

use anyhow::{ensure, Result};

use crate::addr_bits;
use crate::mem::glb::GlbConfig;
use crate::mem::landing::{self, LandingConfig};

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
    /// Built for fault injection (`Fault::EarlyWlast` acts in the AXI4 master, `GlbNoHit` and
    /// `GlbStaleTag` in the GLB, selected at run time; see `fault.rs`).
    pub faults: bool,
    /// The global buffer between the K/V channels and the memory port (`crate::mem::glb`).
    pub glb: Option<GlbConfig>,
    /// The most rows a K or V descriptor may have (rowfused: the keys its S arrays hold);
    /// a longer one stops with `TOO_LARGE`. None: no limit but `index_bits`.
    pub kv_max_rows: Option<u32>,
    /// The scratch read channel `x` and its landing buffer (unfused: S and P read back from
    /// memory); None without one.
    pub x: Option<LandingConfig>,
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

/// AXI4: ID bits and bursts in flight per ID unless the configuration says otherwise.
pub const DEFAULT_AXI_ID_BITS: u32 = 4;
pub const DEFAULT_AXI_OUTSTANDING: u32 = 8;

/// AXI4 read IDs by channel (Q, K, V, and the scratch channel X where there is one: each
/// read channel's ID is its place here) and the write ID (O).
pub const AXI_READ_IDS: [u64; 4] = [0, 1, 2, 3];
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
    /// A vertical link with more failed lanes than spares (reg3d with spare lanes: the core
    /// refuses START).
    pub const LINK: u64 = 11;

    /// Every error code: (code, name, what it means). `STATUS.ERR_CODE`, `regflash.h`'s
    /// `REGFLASH_ERR_*` and `registers.md` are generated from this table.
    pub const CODES: [(u64, &str, &str); 11] = [
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
            "rows or a row longer than the landing or staging buffer, or (rowfused) a K or V \
             descriptor of more keys than the S arrays hold (REGFLASH_CFG_ROW_KEYS)",
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
        (
            LINK,
            "LINK",
            "a vertical link the self-test could not repair: a group of TSV lanes with more \
             failed lanes than spares (LINK_STATUS.BAD, LINK_FAILED); START is refused with \
             nothing read or written until a link test (CTRL.LINK_TEST, or reset) finds it \
             repairable",
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

/// Width of the beat counters (`read_beats`, `write_beats`: beats since reset, modulo 2^16;
/// the core's counter file sums each cycle's beats from their low bits into 48-bit counters).
/// Narrow, so that the count is not a long carry after the memory port's handshake.
pub const BEAT_COUNTER_BITS: u32 = 16;

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
        let x = self.x.map(|x| ("X (scratch)", x));
        for (name, l) in [("Q", self.q), ("K", self.k), ("V", self.v)]
            .into_iter()
            .chain(x)
        {
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
        if let Some(g) = &self.glb {
            g.validate(self.width)?;
        }
        Ok(())
    }

    /// Read channels: Q, K, V and the scratch channel where there is one.
    pub fn read_channels(&self) -> usize {
        3 + self.x.is_some() as usize
    }

    /// The landing buffers of the read channels, in channel order.
    pub fn landings(&self) -> Vec<LandingConfig> {
        [self.q, self.k, self.v].into_iter().chain(self.x).collect()
    }

    /// Bits of a count of a K or V descriptor's beats (rows up to 2^index_bits - 1).
    pub fn kv_beat_bits(&self) -> u32 {
        self.index_bits + crate::bits_for(self.k.row_beats.max(self.v.row_beats) as u64)
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
        let port = match &self.glb {
            Some(g) => format!("{port}{}", g.suffix()),
            None => port,
        };
        // A master or a GLB built for fault injection holds the faults' logic.
        let port = match (self.mem_if, &self.glb) {
            (MemIf::Axi4, _) | (_, Some(_)) if self.faults => format!("{port}_faults"),
            _ => port,
        };
        let port = match self.kv_max_rows {
            Some(n) => format!("{port}_kv{n}"),
            None => port,
        };
        let port = match self.x {
            Some(x) => format!("{port}_x{}x{}", x.rows, x.row_beats),
            None => port,
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
            "{}_{}{}{}{}o{}",
            self.engine_name().replacen("dma_engine", "dma", 1),
            lay(&self.q),
            lay(&self.k),
            lay(&self.v),
            self.x.as_ref().map_or(String::new(), lay),
            self.o_rows_per_bank
        )
    }
}
