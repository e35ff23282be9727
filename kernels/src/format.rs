//! Number formats: the layouts the bit-exact models convert between.
//!
//! A [`Format`] is a binary floating-point layout (sign, `exp` exponent bits, `man` fraction
//! bits) and the policy for its special values ([`Specials`]), named as HardFloat names its
//! units (`e5m10` for binary16; `e4m3fn` for OCP FP8 E4M3, which has no infinities). Its
//! constant encodings (bias, the largest finite value, the canonical quiet NaN, what overflow
//! gives, one, the masks) are `const fn`s here, so that the RTL and the models derive every
//! width and special value from the same place, and every format-dependent choice asks the
//! format rather than its name. Values are bit patterns in the low [`Format::bits`] bits of a
//! `u64`.

/// A binary floating-point format.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Format {
    /// Exponent bits.
    pub exp: u32,
    /// Fraction bits (the significand without its hidden bit).
    pub man: u32,
    /// What the all-ones exponent encodes, and what overflow gives.
    pub specials: Specials,
}

/// The formats with names of their own: (format, short name, long name, the dtype torch and
/// ml_dtypes give it).
const NAMED: [(Format, &str, &str, &str); 6] = [
    (Format::FP16, "FP16", "binary16", "float16"),
    (Format::BF16, "BF16", "bfloat16", "bfloat16"),
    (Format::FP32, "FP32", "binary32", "float32"),
    (Format::FP64, "FP64", "binary64", "float64"),
    (
        Format::FP8_E4M3,
        "FP8 E4M3",
        "OCP FP8 E4M3",
        "float8_e4m3fn",
    ),
    (Format::FP8_E5M2, "FP8 E5M2", "OCP FP8 E5M2", "float8_e5m2"),
];

/// The special values of a format: what its all-ones exponent field encodes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Specials {
    /// IEEE 754: the all-ones exponent is ±Inf (fraction 0) or NaN; a finite value beyond the
    /// range rounds to ±Inf.
    Ieee,
    /// OCP 8-bit floating point's E4M3 (`fn`: finite and NaN): no infinities; only S.1…1.1…1
    /// is NaN, so the all-ones exponent holds normal numbers (E4M3 reaches 448, not 240).
    /// Conversions saturate, as the OCP specification's saturating mode and FlashAttention-3's
    /// FP8 kernels do: a value beyond the range, ±Inf included, gives ±the largest finite value.
    FiniteSaturating,
}

impl Default for Format {
    /// binary16: the designs' operand format unless a configuration names another.
    fn default() -> Self {
        Format::FP16
    }
}

impl Format {
    /// binary16 (FP16).
    pub const FP16: Format = Format::ieee(5, 10);
    /// bfloat16 (BF16): binary32's exponent range with 8 significant bits.
    pub const BF16: Format = Format::ieee(8, 7);
    /// binary32 (FP32).
    pub const FP32: Format = Format::ieee(8, 23);
    /// binary64 (FP64): the host's doubles, which the operands are rounded from directly.
    pub const FP64: Format = Format::ieee(11, 52);
    /// OCP FP8 E4M3 (`float8_e4m3fn`): 4 significant bits, no infinities, ±448 at most.
    pub const FP8_E4M3: Format = Format {
        exp: 4,
        man: 3,
        specials: Specials::FiniteSaturating,
    };
    /// OCP FP8 E5M2: binary16's exponent range with 3 significant bits, IEEE specials.
    pub const FP8_E5M2: Format = Format::ieee(5, 2);

    /// The IEEE 754 layout with `exp` exponent and `man` fraction bits.
    pub const fn ieee(exp: u32, man: u32) -> Format {
        Format {
            exp,
            man,
            specials: Specials::Ieee,
        }
    }

    /// The format has infinities (IEEE specials).
    pub const fn has_inf(self) -> bool {
        matches!(self.specials, Specials::Ieee)
    }

    /// Bits of a value.
    pub const fn bits(self) -> u32 {
        1 + self.exp + self.man
    }

    /// Bytes of a value.
    pub const fn bytes(self) -> u32 {
        self.bits() / 8
    }

    /// The HardFloat-style name: `e5m10`, `e8m23`; a finite-only format adds `fn` as
    /// PyTorch's and ml_dtypes' `float8_e4m3fn` does (`e4m3fn`).
    pub fn name(self) -> String {
        let suffix = match self.specials {
            Specials::Ieee => "",
            Specials::FiniteSaturating => "fn",
        };
        format!("e{}m{}{suffix}", self.exp, self.man)
    }

    /// The format's long name: its standard name where it has one (`binary16`, `bfloat16`,
    /// `OCP FP8 E4M3`), else its HardFloat-style [`Format::name`] (`e10m15`).
    pub fn long_name(self) -> String {
        self.named()
            .map_or_else(|| self.name(), |n| n.2.to_string())
    }

    /// The name messages give the format: `FP16`, `BF16`, `FP8 E4M3`; else its
    /// [`Format::name`].
    pub fn short_name(self) -> String {
        self.named()
            .map_or_else(|| self.name(), |n| n.1.to_string())
    }

    /// The dtype torch and ml_dtypes name the format by (`float16`, `bfloat16`,
    /// `float8_e4m3fn`), if it is one of theirs.
    pub fn dtype_name(self) -> Option<&'static str> {
        self.named().map(|n| n.3)
    }

    /// numpy has a dtype of the format's own (binary16, 32, 64; not bfloat16 or FP8, which
    /// a numpy front end reads as float32 values).
    pub fn numpy_has(self) -> bool {
        matches!(self.dtype_name(), Some("float16" | "float32" | "float64"))
    }

    fn named(self) -> Option<&'static (Format, &'static str, &'static str, &'static str)> {
        NAMED.iter().find(|n| n.0 == self)
    }

    /// The exponent bias, 2^(exp−1) − 1: 15 for binary16, 127 for binary32.
    pub const fn bias(self) -> u64 {
        (1 << (self.exp - 1)) - 1
    }

    /// The all-ones biased exponent: 31 for binary16. With IEEE specials it encodes Inf and
    /// NaN; in E4M3 it holds normal numbers and, with an all-ones fraction, the NaN.
    pub const fn max_exp(self) -> u64 {
        (1 << self.exp) - 1
    }

    /// The largest unbiased exponent of a finite value: the bias (15 for binary16), one more
    /// in a finite-only format (8 for E4M3).
    pub const fn emax(self) -> i64 {
        let top = if self.has_inf() {
            self.max_exp() - 1
        } else {
            self.max_exp()
        };
        top as i64 - self.bias() as i64
    }

    /// `x` (a value in the low bits) is a NaN.
    pub const fn is_nan(self, x: u64) -> bool {
        let magnitude = x & !self.sign_mask();
        match self.specials {
            Specials::Ieee => magnitude > self.inf(),
            Specials::FiniteSaturating => magnitude == self.mask() >> 1,
        }
    }

    /// `x` (a value in the low bits) is ±Inf: never in a finite-only format.
    pub const fn is_inf(self, x: u64) -> bool {
        self.has_inf() && x & !self.sign_mask() == self.inf()
    }

    /// The largest finite value's bits: 0x7BFF for binary16, 0x7E (448) for E4M3.
    pub const fn max_finite_bits(self) -> u64 {
        match self.specials {
            Specials::Ieee => self.inf() - 1,
            Specials::FiniteSaturating => (self.mask() >> 1) - 1,
        }
    }

    /// What a finite value beyond the range gives, unsigned: +Inf, or in a saturating format
    /// the largest finite value.
    pub const fn overflow(self) -> u64 {
        match self.specials {
            Specials::Ieee => self.inf(),
            Specials::FiniteSaturating => self.max_finite_bits(),
        }
    }

    /// Every bit of a value: the low [`Format::bits`] bits.
    pub const fn mask(self) -> u64 {
        u64::MAX >> (64 - self.bits())
    }

    /// The sign bit: 0x8000 for binary16.
    pub const fn sign_mask(self) -> u64 {
        1 << (self.bits() - 1)
    }

    /// The fraction field: the low `man` bits, 0x3FF for binary16.
    pub const fn frac_mask(self) -> u64 {
        (1 << self.man) - 1
    }

    /// +Inf: 0x7C00 for binary16, 0x7F80_0000 for binary32. In a finite-only format, the
    /// encoding Inf would have (there it is a normal number: 256 in E4M3); ask
    /// [`Format::has_inf`] or use [`Format::overflow`].
    pub const fn inf(self) -> u64 {
        self.max_exp() << self.man
    }

    /// The largest finite value: 65504 for binary16, about 3.39e38 for bfloat16, 448 for E4M3.
    pub fn max_finite(self) -> f64 {
        let fraction = (self.max_finite_bits() & self.frac_mask()) as f64;
        (1.0 + fraction * (-(self.man as f64)).exp2()) * (self.emax() as f64).exp2()
    }

    /// −Inf: 0xFC00 for binary16.
    pub const fn neg_inf(self) -> u64 {
        self.sign_mask() | self.inf()
    }

    /// The canonical quiet NaN: sign 0, exponent all ones, only the top fraction bit set
    /// (0x7E00 for binary16, 0x7FC0_0000 for binary32); E4M3's one NaN, 0x7F. Every NaN a
    /// model produces is this one.
    pub const fn qnan(self) -> u64 {
        match self.specials {
            Specials::Ieee => self.inf() | (1 << (self.man - 1)),
            Specials::FiniteSaturating => self.mask() >> 1,
        }
    }

    /// 1.0: 0x3C00 for binary16, 0x3F80_0000 for binary32.
    pub const fn one(self) -> u64 {
        self.bias() << self.man
    }

    /// −0: the sign bit alone.
    pub const fn neg_zero(self) -> u64 {
        self.sign_mask()
    }

    /// The format of the exact product of two `self` values, as a MAC hands it to its
    /// binary32 adder: binary32 itself when it holds every product exactly and as a normal
    /// number (binary16: 22 significant bits, exponents in [2^-48, 2^32)); otherwise two more
    /// exponent bits and 2·man + 1 fraction bits, which hold every product, subnormal factors
    /// included, as a normal number (bfloat16: `e10m15`, products in [2^-266, 2^256)).
    pub const fn exact_product(self) -> Format {
        let m = self.man as i64;
        let bias = self.bias() as i64;
        // The largest and smallest product exponents (of the leading one), unbiased.
        let top = 2 * self.emax() + 1;
        let bottom = 2 * (1 - bias - m);
        let product_man = 2 * m + 1;
        if product_man <= Format::FP32.man as i64 && top <= 127 && bottom >= -126 {
            Format::FP32
        } else {
            Format::ieee(self.exp + 2, 2 * self.man + 1)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The largest finite values, against the host's binary32 and the `half` crate's.
    #[test]
    fn largest_finite_values() {
        assert_eq!(Format::FP16.max_finite(), half::f16::MAX.to_f64());
        assert_eq!(Format::BF16.max_finite(), half::bf16::MAX.to_f64());
        assert_eq!(Format::FP32.max_finite(), f32::MAX as f64);
        assert_eq!(Format::FP64.max_finite(), f64::MAX);
    }

    #[test]
    fn encodings_of_the_named_formats() {
        let f = Format::FP16;
        assert_eq!(
            (f.bits(), f.bytes(), f.name()),
            (16, 2, "e5m10".to_string())
        );
        assert_eq!((f.bias(), f.max_exp(), f.mask()), (15, 31, 0xFFFF));
        assert_eq!((f.sign_mask(), f.frac_mask()), (0x8000, 0x3FF));
        assert_eq!((f.inf(), f.neg_inf(), f.qnan()), (0x7C00, 0xFC00, 0x7E00));
        assert_eq!((f.one(), f.neg_zero()), (0x3C00, 0x8000));

        let f = Format::FP32;
        assert_eq!(
            (f.bits(), f.bytes(), f.name()),
            (32, 4, "e8m23".to_string())
        );
        assert_eq!((f.bias(), f.max_exp(), f.mask()), (127, 255, 0xFFFF_FFFF));
        assert_eq!((f.sign_mask(), f.frac_mask()), (0x8000_0000, 0x7F_FFFF));
        assert_eq!(
            (f.inf(), f.neg_inf(), f.qnan()),
            (0x7F80_0000, 0xFF80_0000, 0x7FC0_0000)
        );
        assert_eq!((f.one(), f.neg_zero()), (0x3F80_0000, 0x8000_0000));

        let f = Format::BF16;
        assert_eq!((f.bits(), f.bytes(), f.name()), (16, 2, "e8m7".to_string()));
        assert_eq!((f.bias(), f.max_exp(), f.mask()), (127, 255, 0xFFFF));
        assert_eq!((f.sign_mask(), f.frac_mask()), (0x8000, 0x7F));
        assert_eq!((f.inf(), f.neg_inf(), f.qnan()), (0x7F80, 0xFF80, 0x7FC0));
        assert_eq!((f.one(), f.neg_zero()), (0x3F80, 0x8000));
    }

    /// FP16's products fit binary32; BF16's need `e10m15`, and every BF16 product's exponent
    /// (subnormal factors included) lies inside that format's normal range.
    #[test]
    fn exact_product_formats() {
        assert_eq!(Format::FP16.exact_product(), Format::FP32);
        let p = Format::BF16.exact_product();
        assert_eq!(p, Format::ieee(10, 15));
        // Leading-one exponents of BF16 products: max² < 2^256, (2^-133)² = 2^-266.
        let (top, bottom) = (255i64, -266i64);
        assert!(top + (p.bias() as i64) < p.max_exp() as i64);
        assert!(bottom + p.bias() as i64 >= 1);
    }

    #[test]
    fn encodings_agree_with_std_binary64() {
        let f = Format::ieee(11, 52);
        assert_eq!(f.mask(), u64::MAX);
        assert_eq!(f.sign_mask(), (-0.0f64).to_bits());
        assert_eq!(f.inf(), f64::INFINITY.to_bits());
        assert_eq!(f.neg_inf(), f64::NEG_INFINITY.to_bits());
        assert_eq!(f.qnan(), 0x7FF8_0000_0000_0000);
        assert_eq!(f.one(), 1.0f64.to_bits());
        assert_eq!(f.bias(), 1023);
    }

    #[test]
    fn bit_model_constants_are_the_formats_encodings() {
        use crate::fp::*;
        let (h, s) = (Format::FP16, Format::FP32);
        assert_eq!(F16_QNAN as u64, h.qnan());
        assert_eq!(F16_INF as u64, h.inf());
        assert_eq!(F16_SIGN as u64, h.sign_mask());
        assert_eq!(F32_QNAN as u64, s.qnan());
        assert_eq!(F32_INF as u64, s.inf());
        assert_eq!(F32_NEG_INF as u64, s.neg_inf());
        assert_eq!(F32_SIGN as u64, s.sign_mask());
        assert_eq!(F32_ONE as u64, s.one());
        assert_eq!(ACC_CLEAR as u64, s.neg_zero());
    }
}
