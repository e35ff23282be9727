//! Floating-point units: IEEE binary16/binary32 multipliers, adder, conversions, max, ceil,
//! scale by a power of two, reciprocal, and the building blocks they share (`arith`, `ieee`).

pub mod arith;
pub mod fp16_mul;
pub mod fp16_to_fp32;
pub mod fp32_add;
pub mod fp32_misc;
pub mod fp32_mul;
pub mod fp32_recip;
pub mod fp32_to_fp16;
pub mod ieee;
