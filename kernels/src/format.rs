//! Number formats: the layouts the bit-exact models convert between.
//!
//! A [`Format`] is an IEEE 754 binary interchange layout (sign, `exp` exponent bits, `man`
//! fraction bits), named as HardFloat names its units (`e5m10` for binary16). Its constant
//! encodings (bias, infinities, the canonical quiet NaN, one, the masks) are `const fn`s here, so
//! that the RTL and the models derive every width and special value from the same place. Values
//! are bit patterns in the low [`Format::bits`] bits of a `u64`.

/// An IEEE 754 binary format.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Format {
    /// Exponent bits.
    pub exp: u32,
    /// Fraction bits (the significand without its hidden bit).
    pub man: u32,
}

impl Default for Format {
    /// binary16: the designs' operand format unless a configuration names another.
    fn default() -> Self {
        Format::FP16
    }
}

impl Format {
    /// binary16 (FP16).
    pub const FP16: Format = Format { exp: 5, man: 10 };
    /// bfloat16 (BF16): binary32's exponent range with 8 significant bits.
    pub const BF16: Format = Format { exp: 8, man: 7 };
    /// binary32 (FP32).
    pub const FP32: Format = Format { exp: 8, man: 23 };
    /// binary64 (FP64): the host's doubles, which the operands are rounded from directly.
    pub const FP64: Format = Format { exp: 11, man: 52 };

    /// Bits of a value.
    pub const fn bits(self) -> u32 {
        1 + self.exp + self.man
    }

    /// Bytes of a value.
    pub const fn bytes(self) -> u32 {
        self.bits() / 8
    }

    /// The HardFloat-style name: `e5m10`, `e8m23`.
    pub fn name(self) -> String {
        format!("e{}m{}", self.exp, self.man)
    }

    /// The format's long name: its IEEE 754 name where it has one (`binary16`), `bfloat16`,
    /// else its HardFloat-style [`Format::name`] (`e10m15`).
    pub fn long_name(self) -> String {
        match self {
            Format::FP16 => "binary16".into(),
            Format::BF16 => "bfloat16".into(),
            Format::FP32 => "binary32".into(),
            Format::FP64 => "binary64".into(),
            _ => self.name(),
        }
    }

    /// The exponent bias, 2^(exp−1) − 1: 15 for binary16, 127 for binary32.
    pub const fn bias(self) -> u64 {
        (1 << (self.exp - 1)) - 1
    }

    /// The all-ones biased exponent, which encodes Inf and NaN: 31 for binary16.
    pub const fn max_exp(self) -> u64 {
        (1 << self.exp) - 1
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

    /// +Inf: 0x7C00 for binary16, 0x7F80_0000 for binary32.
    pub const fn inf(self) -> u64 {
        self.max_exp() << self.man
    }

    /// The largest finite value, (2 − 2^−man) · 2^bias: 65504 for binary16, about 3.39e38 for
    /// bfloat16.
    pub fn max_finite(self) -> f64 {
        (2.0 - (-(self.man as f64)).exp2()) * (self.bias() as f64).exp2()
    }

    /// −Inf: 0xFC00 for binary16.
    pub const fn neg_inf(self) -> u64 {
        self.sign_mask() | self.inf()
    }

    /// The canonical quiet NaN: sign 0, exponent all ones, only the top fraction bit set
    /// (0x7E00 for binary16, 0x7FC0_0000 for binary32). Every NaN a model produces is this one.
    pub const fn qnan(self) -> u64 {
        self.inf() | (1 << (self.man - 1))
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
        let e = self.exp as i64;
        let m = self.man as i64;
        let bias = (1i64 << (e - 1)) - 1;
        // The largest and smallest product exponents (of the leading one), unbiased.
        let top = 2 * bias + 1;
        let bottom = 2 * (1 - bias - m);
        let product_man = 2 * m + 1;
        if product_man <= Format::FP32.man as i64 && top <= 127 && bottom >= -126 {
            Format::FP32
        } else {
            Format {
                exp: self.exp + 2,
                man: 2 * self.man + 1,
            }
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
        assert_eq!(p, Format { exp: 10, man: 15 });
        // Leading-one exponents of BF16 products: max² < 2^256, (2^-133)² = 2^-266.
        let (top, bottom) = (255i64, -266i64);
        assert!(top + (p.bias() as i64) < p.max_exp() as i64);
        assert!(bottom + p.bias() as i64 >= 1);
    }

    #[test]
    fn encodings_agree_with_std_binary64() {
        let f = Format { exp: 11, man: 52 };
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
