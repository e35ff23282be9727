//! The control and status register map of `regflash_top`: one description that the AXI4-Lite
//! slave's RTL (`soc::csr`), the generated C header and markdown map (`soc::header`), the
//! register model (`kernels::csr`'s caller in `regflash::verify`) and the drivers all read, so
//! hardware and software cannot disagree on an offset or a field.
//!
//! 32-bit registers on a 4 KiB window (12 address bits). Identification (read-only, encodes the
//! generated parameters), control (`CTRL`: write 1 to start or abort), status, interrupt
//! enable and status (write 1 to clear), the problem (base addresses as LO/HI pairs, heads,
//! lengths, flags, the softmax constant), and every counter as a 64-bit LO/HI pair: reading LO
//! copies the counter's upper half into a shadow that HI returns, so a LO-then-HI read of one
//! counter is consistent while the core runs.

use crate::core::{CoreParams, COUNTERS, COUNTER_BITS};

/// Register-map version, in `ID_ARRAY[31:24]` (3: `ID_GLB` and the GLB's per-bank counter
/// window).
pub const VERSION: u32 = 3;
/// `ID` reads this ("RFLA").
pub const MAGIC: u32 = 0x5246_4C41;
/// Bits a base address, stride or list address holds in the registers (a LO/HI pair);
/// the core uses the low `addr_bits`.
pub const ADDR_VALUE_BITS: u32 = 64;
/// Address bits of the AXI4-Lite window (4 KiB).
pub const ADDR_BITS: u32 = 12;
/// Offset of the first counter pair; counter i is at `COUNTER_BASE + 8 i` (LO) and `+ 4` (HI).
pub const COUNTER_BASE: u32 = 0x100;
/// With a GLB: `GLB_BANK_SEL`, then the selected bank group's reads and writes as LO/HI pairs.
pub const GLB_BANK_BASE: u32 = 0x0E0;
/// `STATUS.ERR_CODE` after a software abort (every code: `dma::error::CODES`).
pub const ERR_ABORTED: u64 = crate::mem::dma::error::ABORTED;
/// `STATUS.DONE`.
pub const STATUS_DONE: u32 = 1 << 1;
/// `STATUS.ERR_CODE` for an invalid varlen descriptor list (see `batch.rs`).
pub const ERR_BATCH: u64 = crate::mem::dma::error::BATCH;
/// `STATUS.ERR_CODE` for an address the core cannot represent (bits at or above `addr_bits`
/// in a base, a stride or a list address; or a varlen sequence starting beyond the range).
pub const ERR_ADDRESS: u64 = crate::mem::dma::error::ADDRESS;

/// The rules a driver must follow that no register field states: (name, value, what it
/// bounds). `regflash.h` has them as `REGFLASH_CFG_<name>`, `registers.md` as a table.
pub fn limits(p: &CoreParams) -> Vec<(&'static str, u64, String)> {
    let max = (1u64 << p.index_bits) - 1;
    vec![
        (
            "ALIGN",
            p.dma.beat_bytes() as u64,
            format!(
                "bytes of the memory beat: every base address and every row and head stride of \
                 Q, K, V and O is a multiple of it, else the run stops with ERR_CODE {} \
                 (MISALIGNED)",
                crate::mem::dma::error::MISALIGNED
            ),
        ),
        (
            "LIST_ALIGN",
            4,
            format!(
                "CU_Q_ADDR and CU_K_ADDR are multiples of it, else a varlen START is refused \
                 with ERR_CODE {ERR_BATCH} (BATCH)"
            ),
        ),
        (
            "MAX_LEN",
            max,
            "the largest HEADS, Q_LEN, K_LEN, KV_GROUP and BATCH, and the longest varlen \
             sequence (2^INDEX_BITS - 1)"
                .into(),
        ),
        (
            "ROW_KEYS",
            p.row.plan().row_keys().map_or(max, u64::from),
            format!(
                "rowfused: the keys of a query tile's rows of S its S arrays hold; a longer \
                 K_LEN (or varlen key length) stops the run with ERR_CODE {} (TOO_LARGE), or \
                 with a scratch region (SCRATCH_BLOCK_BYTES > 0: spill) sends the blocks past \
                 it to the scratch region. The other designs: MAX_LEN",
                crate::mem::dma::error::TOO_LARGE
            ),
        ),
        (
            "SCRATCH_BLOCK_BYTES",
            scratch_block_bytes(p),
            format!(
                "unfused: bytes of the scratch region per block of Bc keys (Br rows of S, P \
                 written over it): a launch needs S_ADDR + ceil(K_LEN / Bc) * this within \
                 2^ADDR_BITS, else START is refused with ERR_CODE {ERR_ADDRESS} (ADDRESS); \
                 rowfused with spill: the same per block past ROW_KEYS, S_ADDR + max(0, \
                 ceil(K_LEN / Bc) - ROW_KEYS / Bc) * this; 0 in the other designs, which have \
                 no S_ADDR"
            ),
        ),
        (
            "IN_FORMAT",
            crate::format::in_format_code(p.row.pe.mac.formats().operand),
            format!(
                "the format of Q, K, V and of O's short form (OUT_F32 = 0): {}; the core reads \
                 every element as it, {} bits each",
                crate::format::IN_FORMATS
                    .iter()
                    .enumerate()
                    .map(|(i, (_, f))| format!("{i} {} ({})", f.short_name(), f.long_name()))
                    .collect::<Vec<_>>()
                    .join(", "),
                p.row.pe.mac.formats().operand.bits()
            ),
        ),
        (
            "QK_FORMAT",
            p.row.pe.qk.map_or(0, |f| f.bits() as u64),
            "integer QK: 0 none (Q and K in IN_FORMAT), 8 INT8, 4 INT4: each row of Q and K \
             then holds its binary32 scale in elements 0 and 1 (low half first; a key's is its \
             block's, of BC keys) and its values packed from element 2 (lane 0 in the low \
             bits), quantized by the host; SCALE multiplies the scales' product"
                .into(),
        ),
        (
            "ADDR_VALUE_BITS",
            ADDR_VALUE_BITS as u64,
            format!(
                "bits an address or stride register pair holds; bits {}..ADDR_BITS must be 0 \
                 (the core addresses 2^ADDR_BITS bytes), else START is refused with ERR_CODE \
                 {ERR_ADDRESS} (ADDRESS) and nothing is read or written",
                ADDR_VALUE_BITS - 1
            ),
        ),
    ]
}

/// unfused, and rowfused with `spill`: bytes of the scratch region per block of keys (Br rows
/// of S in whole beats); 0 in the other designs.
pub fn scratch_block_bytes(p: &CoreParams) -> u64 {
    match p.row.scratch() {
        true => p.br() as u64 * p.row.scratch_row_bytes().0 as u64,
        false => 0,
    }
}

/// Blocks of a query tile's row of S that stay on chip and take no scratch space: rowfused's
/// S array (with `spill`, the blocks past it go to the scratch region); 0 in unfused.
pub fn scratch_held_blocks(p: &CoreParams) -> u64 {
    match p.row.s_in_memory() {
        true => 0,
        false => p.row.s_blocks() as u64,
    }
}

/// Bytes of the scratch region a launch with `blocks` blocks of keys needs.
pub fn scratch_region_bytes(p: &CoreParams, blocks: u64) -> u64 {
    blocks.saturating_sub(scratch_held_blocks(p)) * scratch_block_bytes(p)
}

/// What every launch does, whatever its path: the contract beside the register fields.
pub const RULES: [&str; 4] = [
    "Every START the core accepts (STATUS.BUSY = 0) ends with exactly one DONE event: \
     STATUS.DONE is set and IRQ_STATUS.DONE becomes pending, on success and on every error, \
     whatever the previous launch did. A START while BUSY is ignored.",
    "A problem with nothing to compute (HEADS = 0, Q_LEN = 0, or a varlen batch whose \
     sequences have no queries) completes with DONE, ERR_CODE 0 and its interrupt, and \
     writes nothing. A query row that sees no key (K_LEN = 0, a varlen sequence without \
     keys, a causal row before the first key) is 0 in O.",
    "An address the core cannot represent is never used: START is refused with ERR_CODE 10 \
     (ADDRESS), nothing read or written, when a base, stride or (with BATCH > 0) offset-list \
     address has a bit at or above ADDR_BITS, or when a tensor reaches past 2^ADDR_BITS: \
     Q and O to base + (HEADS - 1) * head stride + (Q_LEN - 1) * row stride + row bytes, \
     K and V the same with their last head (HEADS - 1) / KV_GROUP and K_LEN (a tensor of no \
     rows reaches nothing), and in unfused the scratch region to S_ADDR + ceil(K_LEN / Bc) * \
     SCRATCH_BLOCK_BYTES (rowfused with spill: its blocks past ROW_KEYS). In a varlen batch \
     each sequence is checked so before it runs.",
    "Counters restart at each START (a varlen batch adds its sequences up); read a counter's \
     LO before its HI.",
];

/// How software may access a register.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    /// Read-only; a write is refused (SLVERR).
    Ro,
    /// Read-write; unimplemented bits read 0.
    Rw,
    /// Write 1 to act (the bit pulses for one cycle); reads 0.
    W1s,
    /// Write 1 to clear; reads the pending bits.
    W1c,
}

impl Access {
    pub fn name(self) -> &'static str {
        match self {
            Access::Ro => "RO",
            Access::Rw => "RW",
            Access::W1s => "W1S",
            Access::W1c => "W1C",
        }
    }
}

/// A problem value the core takes at `start`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ProblemReg {
    QAddr,
    KAddr,
    VAddr,
    OAddr,
    Heads,
    QLen,
    KLen,
    Flags,
    Scale,
    QRowStride,
    QHeadStride,
    KRowStride,
    KHeadStride,
    VRowStride,
    VHeadStride,
    ORowStride,
    OHeadStride,
    KvGroup,
    Batch,
    CuQAddr,
    CuKAddr,
    /// unfused: the scratch region's base.
    SAddr,
}

impl ProblemReg {
    /// Every problem value, in register order (`S_ADDR` only in unfused: [`ProblemReg::all`]).
    pub const ALL: [ProblemReg; 22] = [
        ProblemReg::QAddr,
        ProblemReg::KAddr,
        ProblemReg::VAddr,
        ProblemReg::OAddr,
        ProblemReg::Heads,
        ProblemReg::QLen,
        ProblemReg::KLen,
        ProblemReg::Flags,
        ProblemReg::Scale,
        ProblemReg::QRowStride,
        ProblemReg::QHeadStride,
        ProblemReg::KRowStride,
        ProblemReg::KHeadStride,
        ProblemReg::VRowStride,
        ProblemReg::VHeadStride,
        ProblemReg::ORowStride,
        ProblemReg::OHeadStride,
        ProblemReg::KvGroup,
        ProblemReg::Batch,
        ProblemReg::CuQAddr,
        ProblemReg::CuKAddr,
        ProblemReg::SAddr,
    ];

    /// The value has a register in core `p`'s map (`S_ADDR`: unfused only).
    pub fn present(self, p: &CoreParams) -> bool {
        self != ProblemReg::SAddr || p.row.scratch()
    }

    /// The problem values core `p`'s map has, in register order.
    pub fn all(p: &CoreParams) -> Vec<ProblemReg> {
        ProblemReg::ALL
            .into_iter()
            .filter(|r| r.present(p))
            .collect()
    }

    /// A byte address or stride: the registers hold 64 bits, the core takes `addr_bits`.
    pub fn is_address(self) -> bool {
        use ProblemReg::*;
        matches!(
            self,
            QAddr
                | KAddr
                | VAddr
                | OAddr
                | QRowStride
                | QHeadStride
                | KRowStride
                | KHeadStride
                | VRowStride
                | VHeadStride
                | ORowStride
                | OHeadStride
                | CuQAddr
                | CuKAddr
                | SAddr
        )
    }

    /// A varlen offset list's address (checked only while `BATCH` > 0).
    pub fn is_list(self) -> bool {
        matches!(self, ProblemReg::CuQAddr | ProblemReg::CuKAddr)
    }

    /// The core's input port it drives (`Flags` drives `causal` and `out_f32`).
    pub fn port(self) -> &'static str {
        match self {
            ProblemReg::QAddr => "q_addr",
            ProblemReg::KAddr => "k_addr",
            ProblemReg::VAddr => "v_addr",
            ProblemReg::OAddr => "o_addr",
            ProblemReg::Heads => "heads",
            ProblemReg::QLen => "q_len",
            ProblemReg::KLen => "k_len",
            ProblemReg::Flags => "flags",
            ProblemReg::Scale => "c_const",
            ProblemReg::QRowStride => "q_row_stride",
            ProblemReg::QHeadStride => "q_head_stride",
            ProblemReg::KRowStride => "k_row_stride",
            ProblemReg::KHeadStride => "k_head_stride",
            ProblemReg::VRowStride => "v_row_stride",
            ProblemReg::VHeadStride => "v_head_stride",
            ProblemReg::ORowStride => "o_row_stride",
            ProblemReg::OHeadStride => "o_head_stride",
            ProblemReg::KvGroup => "kv_group",
            ProblemReg::Batch => "batch",
            ProblemReg::CuQAddr => "cu_q_addr",
            ProblemReg::CuKAddr => "cu_k_addr",
            ProblemReg::SAddr => "s_addr",
        }
    }
}

/// What a register is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// A constant (identification).
    Const(u32),
    /// `CTRL`: bit 0 START, bit 1 ABORT.
    Ctrl,
    /// `STATUS`: BUSY, DONE, ERROR, ERR_CODE.
    Status,
    IrqEnable,
    IrqStatus,
    /// Bits `32 * half ..` of a problem value of `width` bits.
    Problem {
        reg: ProblemReg,
        half: u32,
        width: u32,
    },
    /// The low (`hi = false`) or high half of counter `index`.
    Counter {
        index: usize,
        hi: bool,
    },
    /// `GLB_BANK_SEL`: the bank group the window shows, `width` bits read-write.
    GlbBankSel {
        width: u32,
    },
    /// The low or high half of the selected bank group's word reads (`writes = false`) or
    /// writes.
    GlbBank {
        writes: bool,
        hi: bool,
    },
    /// `LINK_STATUS` (spare lanes on the vertical links): TESTING, BAD, CYCLES.
    LinkStatus,
    /// `LINK_FAILED`: the failed lanes the last link test found.
    LinkFailed,
    /// `LINK_PROBE`: the lane whose result LINK_STATUS.PROBED shows, read-write.
    LinkProbe,
}

/// A bit field of a register.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Field {
    pub name: String,
    pub lsb: u32,
    pub width: u32,
    pub doc: String,
}

/// One 32-bit register.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Register {
    pub name: String,
    pub offset: u32,
    pub access: Access,
    pub kind: Kind,
    pub fields: Vec<Field>,
    pub doc: String,
}

impl Register {
    /// Bits software can set (Rw, W1s, W1c) or that read back (all).
    pub fn mask(&self) -> u32 {
        self.fields
            .iter()
            .fold(0u32, |m, f| m | (((1u64 << f.width) - 1) << f.lsb) as u32)
    }
}

fn field(name: &str, lsb: u32, width: u32, doc: &str) -> Field {
    Field {
        name: name.into(),
        lsb,
        width,
        doc: doc.into(),
    }
}

/// The design's variant: its `ID_ARRAY.VARIANT` code and name.
pub fn variant(p: &CoreParams) -> (u32, &'static str) {
    let kind = p.row.variant.kind();
    (kind.code(), kind.register_name())
}

/// A 48-bit counter's LO or HI register: (suffix, what it holds, field width).
fn counter_half(hi: bool) -> (&'static str, &'static str, u32) {
    if hi {
        (
            "HI",
            "the upper half copied when LO was read",
            COUNTER_BITS - 32,
        )
    } else {
        (
            "LO",
            "bits 31..0 (reading copies the upper half for HI)",
            32,
        )
    }
}

/// The register map of the core `p`.
pub fn registers(p: &CoreParams) -> Vec<Register> {
    let mut regs = vec![];
    let mut push = |name: &str, offset: u32, access, kind, fields: Vec<Field>, doc: &str| {
        regs.push(Register {
            name: name.into(),
            offset,
            access,
            kind,
            fields,
            doc: doc.into(),
        })
    };
    let variant = variant(p).0;
    let mem_if = (p.dma.mem_if == crate::mem::dma::MemIf::Axi4) as u32;
    let glb = p.dma.glb;
    let log2 = |x: u32| x.trailing_zeros();
    let id_glb = glb.map_or(0, |g| {
        g.groups
            | log2(g.slices) << 16
            | log2(g.word_bits) << 20
            | log2(g.bank_words) << 24
            | (g.ports - 1) << 29
    });
    let id = [
        (
            "ID",
            MAGIC,
            vec![field("MAGIC", 0, 32, "0x5246_4C41 (\"RFLA\")")],
            "Identifies a regflash core.",
        ),
        (
            "ID_ARRAY",
            (p.rows - 1)
                | ((p.row.cols - 1) << 8)
                | (variant << 16)
                | (p.row.tiers() << 18)
                | (mem_if << 20)
                | (VERSION << 24),
            vec![
                field("ROWS_M1", 0, 8, "PE rows - 1"),
                field("COLS_M1", 8, 8, "PE columns - 1"),
                field("VARIANT", 16, 2, "0 reg2d, 1 buf2d, 2 reg3d, 3 rowfused"),
                field("TIERS", 18, 2, "tiers of the stack (1, or 2 or 3 in reg3d)"),
                field("MEM_IF", 20, 1, "memory interface: 0 simple, 1 AXI4"),
                field("VERSION", 24, 8, "register-map version"),
            ],
            "The PE array and the design.",
        ),
        (
            "ID_TILE",
            p.br() | (p.bc() << 16),
            vec![
                field("BR", 0, 16, "query rows per tile (Br)"),
                field("BC", 16, 16, "keys per block (Bc)"),
            ],
            "The tiling.",
        ),
        (
            "ID_DIM",
            p.d() | (p.dma.width << 16),
            vec![
                field("HEAD_DIM", 0, 16, "head dimension d"),
                field("MEM_WIDTH", 16, 16, "memory port width in bits"),
            ],
            "Head dimension and memory port.",
        ),
        (
            "ID_WIDTHS",
            p.index_bits | (p.addr_bits << 8) | (p.row.pe.regs << 16),
            vec![
                field("INDEX_BITS", 0, 8, "bits of heads and lengths"),
                field("ADDR_BITS", 8, 8, "bits of a byte address"),
                field("REGS_PER_PE", 16, 16, "32-bit registers per PE"),
            ],
            "Register widths.",
        ),
        (
            "ID_GLB",
            id_glb,
            vec![
                field("GROUPS", 0, 16, "GLB bank groups (0: no GLB)"),
                field("SLICES_LOG2", 16, 4, "log2 of the banks per group"),
                field("WORD_BITS_LOG2", 20, 4, "log2 of the bits of a bank word"),
                field("BANK_WORDS_LOG2", 24, 5, "log2 of the words per bank"),
                field("PORTS_M1", 29, 1, "ports per bank - 1"),
            ],
            "The global buffer (GLB): 0 without one.",
        ),
    ];
    for (k, (name, value, fields, doc)) in id.into_iter().enumerate() {
        push(
            name,
            4 * k as u32,
            Access::Ro,
            Kind::Const(value),
            fields,
            doc,
        );
    }
    let links = p.links();
    if let Some(sp) = p.row.spares() {
        push(
            "ID_LINK",
            0x018,
            Access::Ro,
            Kind::Const(sp.spares | sp.group << 8 | p.row.vlink_latency() << 16),
            vec![
                field(
                    "SPARES",
                    0,
                    8,
                    "spare lanes in each group of a vertical bundle",
                ),
                field("GROUP", 8, 8, "lanes that share a group's spares"),
                field("LATENCY", 16, 8, "register stages of a vertical link"),
            ],
            "The PE rows' vertical links' spare lanes (reg3d with spares only).",
        );
    }
    if let Some(sp) = p.glb_bond() {
        push(
            "ID_GLB_LINK",
            0x01C,
            Access::Ro,
            Kind::Const(sp.spares | sp.group << 8),
            vec![
                field(
                    "SPARES",
                    0,
                    8,
                    "spare lanes in each group of the GLB bond's bundles",
                ),
                field("GROUP", 8, 8, "lanes that share a group's spares"),
            ],
            "The stacked GLB's bond's spare lanes (a GLB with glb_spares only).",
        );
    }
    let mut ctrl = vec![
        field(
            "START",
            0,
            1,
            "start the problem in the problem registers (ignored while busy)",
        ),
        field(
            "ABORT",
            1,
            1,
            "stop the running problem: DONE with ERR_CODE 6",
        ),
    ];
    if links {
        ctrl.push(field(
            "LINK_TEST",
            2,
            1,
            "test the vertical links and reload their repair map (ignored while busy; BUSY \
             while it runs)",
        ));
    }
    push("CTRL", 0x020, Access::W1s, Kind::Ctrl, ctrl, "Control.");
    push(
        "STATUS",
        0x024,
        Access::Ro,
        Kind::Status,
        vec![
            field("BUSY", 0, 1, "a problem runs"),
            field("DONE", 1, 1, "the last problem finished (cleared by START)"),
            field("ERROR", 2, 1, "it finished with an error (ERR_CODE)"),
            field(
                "ERR_CODE",
                8,
                crate::mem::dma::error::BITS,
                &crate::mem::dma::error::CODES
                    .iter()
                    .map(|(c, n, _)| format!("{c} {n}"))
                    .collect::<Vec<_>>()
                    .join(", "),
            ),
        ],
        "Status.",
    );
    push(
        "IRQ_ENABLE",
        0x028,
        Access::Rw,
        Kind::IrqEnable,
        vec![field("DONE", 0, 1, "raise irq when a problem finishes")],
        "Interrupt enable.",
    );
    push(
        "IRQ_STATUS",
        0x02C,
        Access::W1c,
        Kind::IrqStatus,
        vec![field("DONE", 0, 1, "a problem finished (write 1 to clear)")],
        "Interrupt status; irq = |(IRQ_STATUS & IRQ_ENABLE).",
    );
    if links {
        push(
            "LINK_STATUS",
            0x030,
            Access::Ro,
            Kind::LinkStatus,
            vec![
                field(
                    "TESTING",
                    0,
                    1,
                    "a link test runs (at reset, or CTRL.LINK_TEST)",
                ),
                field(
                    "BAD",
                    1,
                    1,
                    "a group of lanes has more failed lanes than spares: START is refused with \
                     ERR_CODE 11 (LINK)",
                ),
                field(
                    "PROBED",
                    2,
                    1,
                    "the lane LINK_PROBE names failed the last link test",
                ),
                field("CYCLES", 16, 16, "cycles the last link test took"),
            ],
            "The vertical links' self-test.",
        );
        push(
            "LINK_FAILED",
            0x034,
            Access::Ro,
            Kind::LinkFailed,
            vec![field(
                "LANES",
                0,
                32,
                "physical lanes the last link test found failed (repaired while BAD is 0)",
            )],
            "Failed vertical-link lanes.",
        );
        push(
            "LINK_PROBE",
            0x038,
            Access::Rw,
            Kind::LinkProbe,
            vec![
                field(
                    "LANE",
                    0,
                    crate::link::LANE_BITS,
                    "a physical lane within the PE row: the bundle (0 P up, 1 O down, 2 S up) in \
                     bits 15:14, the lane of the bundle below; in row 255 (the GLB's bond) the \
                     lanes up in 0 to 32767, down from 32768",
                ),
                field(
                    "ROW",
                    16,
                    crate::link::ROW_BITS,
                    "the PE row, or 255 for the GLB's bond",
                ),
            ],
            "The lane whose test result LINK_STATUS.PROBED shows: walking it over a row's \
             bundles lists the failed lanes.",
        );
    }
    let pairs = |first: u32, regs: &[(ProblemReg, &'static str, &'static str)]| {
        regs.iter()
            .enumerate()
            .map(|(k, &(reg, name, doc))| (first + 8 * k as u32, reg, name, doc))
            .collect::<Vec<_>>()
    };
    let mut wide = pairs(
        0x040,
        &[
            (ProblemReg::QAddr, "Q_ADDR", "byte address of Q"),
            (ProblemReg::KAddr, "K_ADDR", "byte address of K"),
            (ProblemReg::VAddr, "V_ADDR", "byte address of V"),
            (ProblemReg::OAddr, "O_ADDR", "byte address of O"),
        ],
    );
    wide.extend(pairs(
        0x080,
        &[
            (
                ProblemReg::QRowStride,
                "Q_ROW_STRIDE",
                "bytes from a Q row to the next",
            ),
            (
                ProblemReg::QHeadStride,
                "Q_HEAD_STRIDE",
                "bytes from a Q head to the next",
            ),
            (
                ProblemReg::KRowStride,
                "K_ROW_STRIDE",
                "bytes from a K row to the next",
            ),
            (
                ProblemReg::KHeadStride,
                "K_HEAD_STRIDE",
                "bytes from a K head to the next",
            ),
            (
                ProblemReg::VRowStride,
                "V_ROW_STRIDE",
                "bytes from a V row to the next",
            ),
            (
                ProblemReg::VHeadStride,
                "V_HEAD_STRIDE",
                "bytes from a V head to the next",
            ),
            (
                ProblemReg::ORowStride,
                "O_ROW_STRIDE",
                "bytes from an O row to the next",
            ),
            (
                ProblemReg::OHeadStride,
                "O_HEAD_STRIDE",
                "bytes from an O head to the next",
            ),
        ],
    ));
    wide.extend(pairs(
        0x0C8,
        &[
            (
                ProblemReg::CuQAddr,
                "CU_Q_ADDR",
                "byte address of the varlen batch's BATCH + 1 cumulative query offsets (32-bit)",
            ),
            (
                ProblemReg::CuKAddr,
                "CU_K_ADDR",
                "byte address of the varlen batch's BATCH + 1 cumulative key offsets (32-bit)",
            ),
        ],
    ));
    if p.row.scratch() {
        wide.extend(pairs(
            0x0D8,
            &[(
                ProblemReg::SAddr,
                "S_ADDR",
                "byte address of the scratch region (unfused, rowfused with spill): S and P of \
                 a query tile between its passes (rowfused: S of the blocks past ROW_KEYS), \
                 SCRATCH_BLOCK_BYTES per block of Bc keys",
            )],
        ));
    }
    // Address-class values hold all 64 bits software writes: bits at or above `addr_bits`
    // read back as written and refuse START (ERR_ADDRESS), so no address aliases.
    let a = p.addr_bits;
    assert!(
        wide.len() == ProblemReg::all(p).iter().filter(|r| r.is_address()).count()
            && wide.iter().all(|w| w.1.is_address()),
        "the LO/HI pairs are the address values"
    );
    for (mut off, reg, name, doc) in wide {
        for half in 0..2 {
            let suffix = if half == 0 { "LO" } else { "HI" };
            let over = if 32 * half + 32 > a {
                format!(
                    "; bits {}..{a} must be 0 (ADDR_BITS = {a}), else START is refused with \
                     ERR_CODE {ERR_ADDRESS} (ADDRESS)",
                    ADDR_VALUE_BITS - 1
                )
            } else {
                String::new()
            };
            push(
                &format!("{name}_{suffix}"),
                off,
                Access::Rw,
                Kind::Problem {
                    reg,
                    half,
                    width: ADDR_VALUE_BITS,
                },
                vec![field(&format!("{name}_{suffix}"), 0, 32, doc)],
                &format!("Bits {}..{} of the {doc}{over}.", 32 * half + 31, 32 * half),
            );
            off += 4;
        }
    }
    let iw = p.index_bits;
    let mut off = 0x060;
    let scalars = [
        (ProblemReg::Heads, "HEADS", iw, "attention heads"),
        (ProblemReg::QLen, "Q_LEN", iw, "queries per head"),
        (ProblemReg::KLen, "K_LEN", iw, "keys per head"),
    ];
    for (reg, name, width, doc) in scalars {
        push(
            name,
            off,
            Access::Rw,
            Kind::Problem {
                reg,
                half: 0,
                width,
            },
            vec![field(name, 0, width, doc)],
            &format!("The number of {doc}."),
        );
        off += 4;
    }
    push(
        "FLAGS",
        off,
        Access::Rw,
        Kind::Problem {
            reg: ProblemReg::Flags,
            half: 0,
            width: 2,
        },
        vec![
            field(
                "CAUSAL",
                0,
                1,
                "causal mask (query i sees keys up to i + k_len - q_len)",
            ),
            field(
                "OUT_F32",
                1,
                1,
                "O in FP32 (else in the inputs' format, IN_FORMAT)",
            ),
        ],
        "Problem flags.",
    );
    push(
        "SCALE",
        off + 4,
        Access::Rw,
        Kind::Problem {
            reg: ProblemReg::Scale,
            half: 0,
            width: 32,
        },
        vec![field("C", 0, 32, "FP32 bits of log2(e) / sqrt(d)")],
        "The softmax constant (REGFLASH_CFG_SCALE in regflash.h for the generated d).",
    );
    push(
        "KV_GROUP",
        0x0C0,
        Access::Rw,
        Kind::Problem {
            reg: ProblemReg::KvGroup,
            half: 0,
            width: iw,
        },
        vec![field(
            "KV_GROUP",
            0,
            iw,
            "Q heads per K/V head (0 or 1: one each)",
        )],
        "Grouped-query attention: Q head h reads K/V head h / KV_GROUP.",
    );
    push(
        "BATCH",
        0x0C4,
        Access::Rw,
        Kind::Problem {
            reg: ProblemReg::Batch,
            half: 0,
            width: iw,
        },
        vec![field(
            "BATCH",
            0,
            iw,
            "sequences in a varlen batch (0: the one problem of Q_LEN and K_LEN)",
        )],
        "Varlen: sequences packed along the rows, described by CU_Q_ADDR and CU_K_ADDR.",
    );
    if let Some(g) = glb {
        let width = g.sel_bits();
        push(
            "GLB_BANK_SEL",
            GLB_BANK_BASE,
            Access::Rw,
            Kind::GlbBankSel { width },
            vec![field("SEL", 0, width, "the bank group the window shows")],
            "The GLB bank group whose counters GLB_BANK_READS and GLB_BANK_WRITES show.",
        );
        for (k, writes) in [false, true].into_iter().enumerate() {
            let what = if writes { "WRITES" } else { "READS" };
            let doc = if writes { "written" } else { "read" };
            for hi in [false, true] {
                let (suffix, half, w) = counter_half(hi);
                let name = format!("GLB_BANK_{what}_{suffix}");
                push(
                    &name,
                    GLB_BANK_BASE + 8 + 8 * k as u32 + 4 * hi as u32,
                    Access::Ro,
                    Kind::GlbBank { writes, hi },
                    vec![field(&name, 0, w, half)],
                    &format!(
                        "Words each bank of the selected group {doc} since START ({} bits \
                         each; SEL is log2 of the groups bits wide, 1 with one group, whose SEL = 1 \
                         reads 0), {half}.",
                        g.word_bits
                    ),
                );
            }
        }
    }
    for (index, name) in COUNTERS.iter().enumerate() {
        for hi in [false, true] {
            let upper = name.to_uppercase();
            let (suffix, lsb_doc, w) = counter_half(hi);
            push(
                &format!("CNT_{upper}_{suffix}"),
                COUNTER_BASE + 8 * index as u32 + 4 * hi as u32,
                Access::Ro,
                Kind::Counter { index, hi },
                vec![field(&format!("CNT_{upper}_{suffix}"), 0, w, lsb_doc)],
                &format!("Counter `{name}`, {lsb_doc}."),
            );
        }
    }
    regs.sort_by_key(|r| r.offset);
    regs
}
