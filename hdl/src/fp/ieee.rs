//! IEEE-754 constants the blocks emit (the same values as `kernels::fp`, which hdl does not
//! depend on: the models and the hardware are written independently and compared in tests).

/// Canonical quiet NaN, binary32.
pub const F32_QNAN: u64 = 0x7FC0_0000;
/// +Inf, binary32 (also the exponent field mask when shifted: all ones).
pub const F32_INF: u64 = 0x7F80_0000;
/// Canonical quiet NaN, binary16.
pub const F16_QNAN: u64 = 0x7E00;
/// +Inf, binary16.
pub const F16_INF: u64 = 0x7C00;
/// −0, binary32: the value a cleared accumulator starts from (identity of addition).
pub const F32_NEG_ZERO: u64 = 0x8000_0000;
/// 1.0, binary32.
pub const F32_ONE: u64 = 0x3F80_0000;
/// −Inf, binary32.
pub const F32_NEG_INF: u64 = 0xFF80_0000;
