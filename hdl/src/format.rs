//! Number formats: where a width in the RTL comes from.
//!
//! A [`Format`] is an IEEE 754 binary interchange layout (sign, `exp` exponent bits, `man`
//! fraction bits), named as HardFloat names its units (`e5m10` for binary16). The design has
//! three roles for a format, which every element width derives from: the operands Q, K, V and
//! the weights P ([`Formats::operand`]), the accumulator of S, O, the softmax state and the
//! sums ([`Formats::acc`]), and O as written to memory in its short form ([`Formats::out`];
//! the long form is the accumulator's).
//!
//! [`Format`] itself is the models' (`kernels::format`): the encodings (bias, infinities, the
//! canonical NaN, one) are defined once and checked against Rust's own binary64 and the `half`
//! crate. The arithmetic is written twice, independently, as models in `kernels` and as logic
//! here, and the two are compared in tests.

pub use kernels::format::Format;

/// The formats of a design, by role.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Formats {
    /// Q, K, V in memory and on the array's buses, and the weights P.
    pub operand: Format,
    /// S, the O accumulator, the softmax state, sums: what the MAC accumulates in.
    pub acc: Format,
    /// O written to memory in its short form.
    pub out: Format,
}

impl Formats {
    /// FP16 operands and output, FP32 accumulation: the design's one set today.
    pub const FP16_FP32: Formats = Formats {
        operand: Format::FP16,
        acc: Format::FP32,
        out: Format::FP16,
    };
}

impl Default for Formats {
    fn default() -> Self {
        Formats::FP16_FP32
    }
}
