//! The host's rounding of input values to the core's operand format: binary16, binary32 or
//! binary64 values to the operand format (binary16, bfloat16, FP8), nearest even, in one
//! rounding (a binary64 value is never rounded through binary32 first: that would round
//! twice). One definition serves every front end: the CLI's `.npy` inputs and Python's numpy
//! and torch tensors.
//!
//! A finite value that rounds past the largest finite value is out of the format's range. A
//! front end refuses it by name ([`OutOfRange`]) or, when the user asked for it, clamps it to
//! the largest finite value and counts it: a silent ±Inf operand makes a NaN output whose f64
//! reference (on the original values) is finite, and E4M3's silent saturation a finite but
//! wrong one. NaN and ±Inf pass as themselves (±Inf saturates in E4M3, which has none).

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
        let (largest, edge) = (largest_finite(self.format), overflow_threshold(self.format));
        let past = if self.format.has_inf() {
            format!("magnitudes from {} round to infinity", show(edge))
        } else {
            format!(
                "magnitudes above {} saturate to {}",
                show(edge),
                show(largest)
            )
        };
        format!(
            "= {value} is outside the {} range (±{}; {past})",
            self.format.short_name(),
            show(largest),
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

/// The largest finite value of `format`: 65504 for binary16, 448 for E4M3.
pub fn largest_finite(format: Format) -> f64 {
    format.max_finite()
}

/// Half an ulp above the largest finite value of `format`, where rounding leaves the range:
/// 65520 for binary16 (from which values round to infinity), 464 for E4M3 (above which they
/// would round to 480, which E4M3 lacks: it rounds to 448, its even neighbour, at the tie).
pub fn overflow_threshold(format: Format) -> f64 {
    largest_finite(format) + 2f64.powi(format.emax() as i32 - format.man as i32 - 1)
}

/// `values` (bit patterns of `from`: binary16, binary32 or binary64) rounded to `to`, nearest
/// even, as operands of at most 16 bits; values already in `to` are kept as they are. A
/// finite value that rounds past the largest finite value is refused, or with `saturate`
/// clamped to ±[`largest_finite`] and counted (the second result).
pub fn round_operands(
    values: impl IntoIterator<Item = u64>,
    from: Format,
    to: Format,
    saturate: bool,
) -> Result<(Vec<u16>, u64), OutOfRange> {
    assert!(
        to.bits() <= 16,
        "operands are values of at most 16 bits, not {}",
        to.name()
    );
    let max = to.max_finite_bits();
    // Past the range: Inf, or in a saturating format a value that lands on the largest one
    // from beyond the tie above it.
    let past = |x: u64, y: u64| {
        y & !to.sign_mask() == to.overflow()
            && (to.has_inf() || value_of(x, from).abs() > overflow_threshold(to))
    };
    let values = values.into_iter();
    let mut out = Vec::with_capacity(values.size_hint().0);
    let mut saturated = 0u64;
    for (index, x) in values.enumerate() {
        let y = if from == to { x } else { convert(x, from, to) };
        let finite = !from.is_nan(x) && !from.is_inf(x);
        out.push(if finite && past(x, y) {
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

/// Per-tensor power-of-two scales of the operands: each tensor stored as its values × 2^exp
/// (FlashAttention-3's FP8 descales, as powers of two, so that scaling and descaling are
/// exact). The stored Q·Kᵀ is 2^[`TensorScales::score_exp`] times the problem's, which the
/// softmax constant takes back; O comes out 2^`v` times the problem's.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TensorScales {
    pub q: i32,
    pub k: i32,
    pub v: i32,
}

impl TensorScales {
    /// The stored scores' exponent: Q's and K's together.
    pub fn score_exp(self) -> i32 {
        self.q + self.k
    }
}

/// Operands in `to` are stored at per-tensor scales: its range is narrower than binary16's,
/// the problems' own (FP8; not bfloat16, whose range is wider).
pub fn scaled_per_tensor(to: Format) -> bool {
    to.max_finite() < Format::FP16.max_finite()
}

/// The exponent e that puts a tensor's largest finite magnitude into `to`'s top binade:
/// max|x| · 2^e at most `to`'s largest finite value and above half of it. 0 for a tensor with
/// no finite nonzero value.
pub fn fit_exp(values: impl IntoIterator<Item = f64>, to: Format) -> i32 {
    let amax = values
        .into_iter()
        .filter(|x| x.is_finite())
        .fold(0.0f64, |m, x| m.max(x.abs()));
    if amax == 0.0 {
        return 0;
    }
    let mut e = (to.max_finite() / amax).log2().floor() as i32;
    // log2's rounding: step to the exponent the definition names.
    while amax * 2f64.powi(e) > to.max_finite() {
        e -= 1;
    }
    while amax * 2f64.powi(e + 1) <= to.max_finite() {
        e += 1;
    }
    e
}

/// `values` of `from` (binary16, binary32 or binary64 bits) as operands in `to` at the
/// per-tensor scale [`fit_exp`] gives them: each value times 2^e, rounded once (nearest
/// even), and e. In range by construction; NaN and ±Inf pass as [`round_operands`] passes
/// them.
pub fn round_scaled(values: &[u64], from: Format, to: Format) -> (Vec<u16>, i32) {
    let e = fit_exp(values.iter().map(|&x| value_of(x, from)), to);
    (round_at(values, from, to, e), e)
}

/// A tensor's `values` of `from` as operands in `to`, as every front end (the CLI's `.npy`
/// files, Python's arrays) stores them: where `to` is stored at per-tensor scales, at the
/// scale that fits them ([`round_scaled`]: nothing is out of range); otherwise as they are
/// ([`round_operands`]: a value past the range refused, or with `saturate` clamped and
/// counted). The bits, the values clamped, and the scale's exponent.
pub fn round_tensor(
    values: &[u64],
    from: Format,
    to: Format,
    saturate: bool,
) -> Result<(Vec<u16>, u64, i32), OutOfRange> {
    if scaled_per_tensor(to) {
        let (bits, e) = round_scaled(values, from, to);
        return Ok((bits, 0, e));
    }
    round_operands(values.iter().copied(), from, to, saturate).map(|(bits, n)| (bits, n, 0))
}

/// `values` of `from` as operands in `to` at the scale 2^`e` (each value times 2^e, rounded
/// once); `e` at most [`fit_exp`]'s for them, so that they stay in range.
pub fn round_at(values: &[u64], from: Format, to: Format, e: i32) -> Vec<u16> {
    let scaled = values
        .iter()
        .map(|&x| (value_of(x, from) * 2f64.powi(e)).to_bits());
    let (bits, _) = round_operands(scaled, Format::FP64, to, false)
        .expect("a tensor scaled into the format's range rounds within it");
    bits
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

    /// FP8: E4M3's tie above 448 rounds to it and is in range, anything past it is refused
    /// (or clamped and counted), though the conversion itself would saturate silently; E5M2
    /// overflows to infinity as binary16 does.
    #[test]
    fn fp8_ranges() {
        let e4 = |x: f64, saturate: bool| {
            round_operands([x.to_bits()], Format::FP64, Format::FP8_E4M3, saturate)
        };
        assert_eq!(e4(464.0, false).unwrap(), (vec![0x7E], 0));
        assert_eq!(e4(-464.0, false).unwrap(), (vec![0xFE], 0));
        let e = e4(464.5, false).unwrap_err();
        assert_eq!((e.index, e.value), (0, 464.5));
        assert!(
            e.describe()
                .contains("±448; magnitudes above 464 saturate to 448"),
            "{}",
            e.describe()
        );
        assert_eq!(e4(-1e9, true).unwrap(), (vec![0xFE], 1));
        assert_eq!(e4(f64::NAN, false).unwrap(), (vec![0x7F], 0));
        let e5 = |x: f64| round_operands([x.to_bits()], Format::FP64, Format::FP8_E5M2, false);
        assert_eq!(e5(61439.0).unwrap(), (vec![0x7B], 0));
        assert!(e5(61440.0)
            .unwrap_err()
            .describe()
            .contains("from 61440 round to infinity"));
        assert_eq!(
            (
                largest_finite(Format::FP8_E5M2),
                overflow_threshold(Format::FP8_E4M3)
            ),
            (57344.0, 464.0)
        );
    }

    /// A tensor's scale puts its largest magnitude in the format's top binade, exactly: the
    /// scaled values are the values times 2^e rounded once; zeros and non-finite values do
    /// not move it.
    #[test]
    fn per_tensor_scales_fit_the_top_binade() {
        let e4 = Format::FP8_E4M3;
        assert_eq!(fit_exp([1.0, -0.5], e4), 8); // 256 <= 448 < 512
        assert_eq!(fit_exp([448.0], e4), 0);
        assert_eq!(fit_exp([449.0, f64::INFINITY, f64::NAN], e4), -1);
        assert_eq!(fit_exp([0.0, -0.0], e4), 0);
        assert_eq!(fit_exp([65504.0], Format::FP8_E5M2), -1);
        assert!(
            scaled_per_tensor(e4)
                && !scaled_per_tensor(Format::BF16)
                && !scaled_per_tensor(Format::FP16)
        );
        let xs: Vec<u64> = [1.0f64, -3.0, 1e-3, 65504.0]
            .iter()
            .map(|x| x.to_bits())
            .collect();
        let (bits, e) = round_scaled(&xs, Format::FP64, e4);
        assert_eq!(e, fit_exp([65504.0], e4));
        for (&b, &x) in bits.iter().zip(&xs) {
            let want = crate::reference::round(f64::from_bits(x) * 2f64.powi(e), e4);
            assert_eq!(value_of(b as u64, e4), want);
        }
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
