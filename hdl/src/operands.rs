//! Port groups shared by the small blocks: two operands, one operand, one result.

use crate::interface;
use crate::ir::iface::Block;

interface! {
    /// Two operands.
    pub struct Binary { a, b }
}

interface! {
    /// One operand.
    pub struct Unary { a }
}

interface! {
    /// One operand called `x`.
    pub struct X { x }
}

interface! {
    /// One result.
    pub struct Y { y }
}

/// A block of two operands and one result (`fp32_add`, `fp32_mul`, `fp16_mul`, `fp32_max`).
pub type BinaryBlock = Block<Binary, Y<u32>>;

/// A block of one operand and one result (`fp32_ceil`, `fp16_to_fp32`, `fp32_to_fp16`).
pub type UnaryBlock = Block<Unary, Y<u32>>;
