//! Functional model of a processing element: a register file updated by MAC, clear-MAC and load
//! operations applied in order. (When each operation takes effect is the hardware's business;
//! the RTL harness applies an operation to this model at the cycle the RTL writes it back.)

use crate::format::Format;
use crate::fp::{fp32_scale2, mac, mac_fused, ACC_CLEAR};
use crate::quant::{dot_packed, int_to_f32, QkFormat};

/// A PE operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PeOp {
    Nop,
    /// `rf[addr] = rf[addr] + a × b`.
    Mac,
    /// `rf[addr] = −0 + a × b`.
    MacClear,
    /// `rf[addr] = data`.
    Load,
    /// `rf[addr] = +0 + a × b`: the first product of an O accumulator (O starts at +0).
    MacZero,
    /// `rf[addr] = rf[addr] · 2^−shift + a × b`: the first product of a block into an O
    /// accumulator, applying the block's rescale.
    MacScale,
    /// Integer QKᵀ (a PE with a `qk` format): `rf[addr] = 0 + Σ a_i × b_i` over the packed
    /// lanes, int32.
    IntClear,
    /// `rf[addr] = rf[addr] + Σ a_i × b_i`, int32.
    IntMac,
    /// `rf[addr] = binary32(rf[addr] + Σ a_i × b_i)`: the score's last step converts it.
    IntLast,
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
        if self.format == Format::FP16 {
            mac(acc, a, b)
        } else {
            mac_fused(acc, a as u64, b as u64, self.format)
        }
    }

    fn int_format(&self) -> QkFormat {
        self.qk
            .expect("an integer operation needs a PE built with a qk format")
    }

    /// Applies one operation (`shift` matters to `MacScale` only).
    pub fn apply(&mut self, op: PeOp, addr: usize, a: u16, b: u16, data: u32, shift: u8) {
        match op {
            PeOp::Nop => {}
            PeOp::Mac => self.regs[addr] = self.mac(self.regs[addr], a, b),
            PeOp::MacClear => self.regs[addr] = self.mac(ACC_CLEAR, a, b),
            PeOp::Load => self.regs[addr] = data,
            PeOp::MacZero => self.regs[addr] = self.mac(0, a, b),
            PeOp::MacScale => self.regs[addr] = self.mac(fp32_scale2(self.regs[addr], shift), a, b),
            PeOp::IntClear => self.regs[addr] = dot_packed(0, a, b, self.int_format()),
            PeOp::IntMac => self.regs[addr] = dot_packed(self.regs[addr], a, b, self.int_format()),
            PeOp::IntLast => {
                self.regs[addr] = int_to_f32(dot_packed(self.regs[addr], a, b, self.int_format()))
            }
        }
    }
}
