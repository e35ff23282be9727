//! The host's rounding of input values to the core's operand format: binary16, binary32 or
//! binary64 values to binary16 or bfloat16, nearest even, in one rounding (a binary64 value is
//! never rounded through binary32 first: that would round twice). One definition serves every
//! front end: the CLI's `.npy` inputs and Python's numpy and torch tensors.
//!
//! A finite value that rounds to infinity is out of the format's range. A front end refuses it
//! by name ([`OutOfRange`]) or, when the user asked for it, clamps it to the largest finite
//! value and counts it: a silent ±Inf operand makes a NaN output whose f64 reference (on the
//! original values) is finite. NaN and ±Inf pass as themselves.

use crate::format::Format;
use crate::fp::convert;
use crate::reference::value_of;

/// A finite input that `format` cannot hold: element `index` (flat, C order), of `value` (a
/// value of the input's format `from`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct OutOfRange {
    pub index: usize,
    pub value: f64,
    pub from: Format,
    pub format: Format,
}

impl OutOfRange {
    /// "= 1e300 is outside the BF16 range (±3.3895314e38; magnitudes from 3.3961775e38 round
    /// to infinity)": the part of a message every front end shares.
    pub fn describe(&self) -> String {
        // The value as its own format prints it shortest: 3.4e38 for a binary32 input.
        let value = match self.from.bits() {
            64 => format!("{:e}", self.value),
            _ => format!("{:e}", self.value as f32),
        };
        format!(
            "= {value} is outside the {} range (±{}; magnitudes from {} round to infinity)",
            self.format.short_name(),
            show(largest_finite(self.format)),
            show(overflow_threshold(self.format))
        )
    }
}

/// A magnitude as a message shows it: 65504, 3.3895314e38.
pub fn show(x: f64) -> String {
    let x = x as f32;
    if x.abs() < 1e7 {
        format!("{x}")
    } else {
        format!("{x:e}")
    }
}

/// The largest finite value of `format`: 65504 for binary16.
pub fn largest_finite(format: Format) -> f64 {
    value_of(format.inf() - 1, format)
}

/// The magnitude from which values round to infinity in `format` (half an ulp above its
/// largest finite value): 65520 for binary16.
pub fn overflow_threshold(format: Format) -> f64 {
    largest_finite(format) + 2f64.powi(format.bias() as i32 - format.man as i32 - 1)
}

/// `values` (bit patterns of `from`: binary16, binary32 or binary64) rounded to `to`, nearest
/// even, as 16-bit operands; values already in `to` are kept as they are. A finite value that
/// rounds to infinity is refused, or with `saturate` clamped to ±[`largest_finite`] and
/// counted (the second result).
pub fn round_operands(
    values: impl IntoIterator<Item = u64>,
    from: Format,
    to: Format,
    saturate: bool,
) -> Result<(Vec<u16>, u64), OutOfRange> {
    assert!(
        to.bits() == 16,
        "operands are 16-bit values, not {}",
        to.name()
    );
    let (max, inf) = (to.inf() - 1, to.inf());
    let values = values.into_iter();
    let mut out = Vec::with_capacity(values.size_hint().0);
    let mut saturated = 0u64;
    for (index, x) in values.enumerate() {
        let y = if from == to { x } else { convert(x, from, to) };
        let finite = x & !from.sign_mask() < from.inf();
        out.push(if finite && y & !to.sign_mask() == inf {
            if !saturate {
                return Err(OutOfRange {
                    index,
                    value: value_of(x, from),
                    from,
                    format: to,
                });
            }
            saturated += 1;
            ((y & to.sign_mask()) | max) as u16
        } else {
            y as u16
        });
    }
    Ok((out, saturated))
}

/// The multi-index of flat element `i` of a C-order array of `shape`, as a message names it.
pub fn multi_index(shape: &[usize], mut i: usize) -> Vec<usize> {
    let mut idx = vec![0; shape.len()];
    for (k, &n) in shape.iter().enumerate().rev() {
        idx[k] = i % n.max(1);
        i /= n.max(1);
    }
    idx
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bf16(x: f64, saturate: bool) -> Result<u16, OutOfRange> {
        round_operands([x.to_bits()], Format::FP64, Format::BF16, saturate).map(|(v, _)| v[0])
    }

    #[test]
    fn binary64_rounds_once() {
        // 1 + 2^-8 + 2^-30: through binary32 it is 1 + 2^-8 exactly, a tie that rounds to
        // even (1.0); once, it is above the tie and rounds up to 1 + 2^-7 (0x3F81).
        let x = 1.0 + 2f64.powi(-8) + 2f64.powi(-30);
        assert_eq!(bf16(x, false), Ok(0x3F81));
        assert_eq!(bf16(1.0 + 2f64.powi(-8), false), Ok(0x3F80));
        let (h, _) =
            round_operands([x.to_bits()], Format::FP64, Format::FP16, false).expect("in range");
        assert_eq!(h, vec![half::f16::from_f64(x).to_bits()]);
    }

    #[test]
    fn the_range_ends_where_values_round_to_infinity() {
        for f in [Format::FP16, Format::BF16] {
            let edge = overflow_threshold(f);
            let below = f64::from_bits(edge.to_bits() - 1);
            let (b, _) = round_operands([below.to_bits()], Format::FP64, f, false).unwrap();
            assert_eq!(b[0] as u64, f.inf() - 1, "{f:?} just below {edge}");
            let e = round_operands([0f64.to_bits(), (-edge).to_bits()], Format::FP64, f, false)
                .unwrap_err();
            assert_eq!((e.index, e.value), (1, -edge));
            let (c, n) = round_operands([(-edge).to_bits()], Format::FP64, f, true).unwrap();
            assert_eq!((c[0] as u64, n), (f.sign_mask() | (f.inf() - 1), 1));
        }
        assert_eq!(overflow_threshold(Format::FP16), 65520.0);
        assert!(bf16(1e300, false)
            .unwrap_err()
            .describe()
            .contains("BF16 range"));
    }

    #[test]
    fn specials_pass_as_themselves() {
        assert_eq!(bf16(f64::INFINITY, false), Ok(0x7F80));
        assert_eq!(bf16(f64::NEG_INFINITY, false), Ok(0xFF80));
        assert_eq!(bf16(f64::NAN, false), Ok(0x7FC0));
        assert_eq!(bf16(-0.0, false), Ok(0x8000));
        let same = round_operands([0x7C00, 0x3C00], Format::FP16, Format::FP16, false);
        assert_eq!(same, Ok((vec![0x7C00, 0x3C00], 0)));
    }
}
