//! Functional model of a processing element: a register file updated by MAC, clear-MAC and load
//! operations applied in order. (When each operation takes effect is the hardware's business;
//! the RTL harness applies an operation to this model at the cycle the RTL writes it back.)
//!
//! An accumulation in the MAC's pipeline (`MacFeed`, a PE built with feedback) continues the
//! previous operation's result without the register file: functionally it is `Mac` on the
//! register the run accumulates into, and a masked `MacFeed` leaves the run's value as it is.
//! The hardware writes the register once, at the run's end; [`PeModel::result`] gives each
//! operation's value from an accumulator the caller holds, for a harness that follows the run.

use crate::format::Format;
use crate::fp::{fp32_scale2, mac_fused, ACC_CLEAR};
use crate::quant::{dot_packed, int_to_f32, QkFormat};

/// A PE operation; its discriminant is the RTL's `op` code (`hdl::array::pe::PeOp`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum PeOp {
    Nop = 0,
    /// `rf[addr] = rf[addr] + a × b`.
    Mac = 1,
    /// `rf[addr] = −0 + a × b`.
    MacClear = 2,
    /// `rf[addr] = data`.
    Load = 3,
    /// `rf[addr] = +0 + a × b`: the first product of an O accumulator (O starts at +0).
    MacZero = 4,
    /// `rf[addr] = rf[addr] · 2^−shift + a × b`: the first product of a block into an O
    /// accumulator, applying the block's rescale.
    MacScale = 5,
    /// Integer QKᵀ (a PE with a `qk` format): `rf[addr] = 0 + Σ a_i × b_i` over the packed
    /// lanes, int32.
    IntClear = 8,
    /// `rf[addr] = rf[addr] + Σ a_i × b_i`, int32.
    IntMac = 9,
    /// `rf[addr] = binary32(rf[addr] + Σ a_i × b_i)`: the score's last step converts it.
    IntLast = 10,
    /// `rf[addr] = rf[addr] + a × b` with `rf[addr]` the result of the run's previous
    /// operation, taken from the MAC's output instead of the register file (a PE with
    /// feedback; the run's register is written once, when the run ends).
    MacFeed = 6,
}

/// The register file of one PE.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PeModel {
    pub regs: Vec<u32>,
    /// The operands' format: binary16 ([`mac`]) or bfloat16 ([`mac_fused`]).
    pub format: Format,
    /// The integer format of QKᵀ's packed operands (the `Int*` operations), if any.
    pub qk: Option<QkFormat>,
}

impl PeModel {
    /// `n` registers, all +0 (the RTL's register file powers up as zeros in simulation), for
    /// binary16 operands.
    pub fn new(n: usize) -> Self {
        Self::with_format(n, Format::FP16)
    }

    /// [`PeModel::new`] for operands in `format`.
    pub fn with_format(n: usize, format: Format) -> Self {
        PeModel {
            regs: vec![0; n],
            format,
            qk: None,
        }
    }

    fn mac(&self, acc: u32, a: u16, b: u16) -> u32 {
        mac_fused(acc, a as u64, b as u64, self.format)
    }

    fn int_format(&self) -> QkFormat {
        self.qk
            .expect("an integer operation needs a PE built with a qk format")
    }

    /// The value operation `op` writes, with `old` the register's (or the run's) value before
    /// it; `None` for a NOP.
    pub fn result(&self, op: PeOp, old: u32, a: u16, b: u16, data: u32, shift: u8) -> Option<u32> {
        Some(match op {
            PeOp::Nop => return None,
            PeOp::Mac | PeOp::MacFeed => self.mac(old, a, b),
            PeOp::MacClear => self.mac(ACC_CLEAR, a, b),
            PeOp::Load => data,
            PeOp::MacZero => self.mac(0, a, b),
            PeOp::MacScale => self.mac(fp32_scale2(old, shift), a, b),
            PeOp::IntClear => dot_packed(0, a, b, self.int_format()),
            PeOp::IntMac => dot_packed(old, a, b, self.int_format()),
            PeOp::IntLast => int_to_f32(dot_packed(old, a, b, self.int_format())),
        })
    }

    /// Applies one operation (`shift` matters to `MacScale` only).
    pub fn apply(&mut self, op: PeOp, addr: usize, a: u16, b: u16, data: u32, shift: u8) {
        if let Some(v) = self.result(op, self.regs[addr], a, b, data, shift) {
            self.regs[addr] = v;
        }
    }
}
