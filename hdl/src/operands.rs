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

/// A block of two operands and one result (`fp_add_e8m23`, `fp_mul_e8m23`, `fp_mul_e5m10`, `fp_max_e8m23`).
pub type BinaryBlock = Block<Binary, Y<u32>>;

/// A block of one operand and one result (`fp_ceil_e8m23`, `fp_cvt_e5m10_e8m23`, `fp_cvt_e8m23_e5m10`).
pub type UnaryBlock = Block<Unary, Y<u32>>;
