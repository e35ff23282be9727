//! The catalogue of pure units: ports, bit-exact models, directed vectors and random stimulus,
//! each built from the configuration the unit is generated from.

use hdl::config::CoreConfig;
use kernels::format::Format;
use kernels::fp;
use kernels::mask::MaskSpec;
use kernels::reduce::tree;
use kernels::softmax::{scale_constant, weight_in};
use proptest::prelude::*;

use super::pure::{Fmt, PortSpec, PureUnit};
use super::stimulus::*;

fn one(name: &'static str, fmt: Fmt) -> PortSpec {
    PortSpec::one(name, fmt)
}

fn unary(name: &'static str, a: (&'static str, Fmt), y: Fmt, f: fn(u64) -> u64) -> PureUnit {
    PureUnit {
        name,
        inputs: vec![one(a.0, a.1)],
        outputs: vec![one("y", y)],
        model: Box::new(move |v| vec![f(v[0])]),
    }
}

fn binary(
    name: &'static str,
    a: Fmt,
    b: (&'static str, Fmt),
    y: Fmt,
    f: fn(u64, u64) -> u64,
) -> PureUnit {
    PureUnit {
        name,
        inputs: vec![one("a", a), one(b.0, b.1)],
        outputs: vec![one("y", y)],
        model: Box::new(move |v| vec![f(v[0], v[1])]),
    }
}

fn pairs<T: Copy + Into<u64>>(xs: &[T], ys: &[T]) -> Vec<Vec<u64>> {
    xs.iter()
        .flat_map(|&x| ys.iter().map(move |&y| vec![x.into(), y.into()]))
        .collect()
}

/// Softmax constants for a few head dimensions, and 1.
fn scale_constants() -> Vec<u32> {
    let mut v: Vec<u32> = [16, 64, 128, 256]
        .iter()
        .map(|&d| scale_constant(d))
        .collect();
    v.push(fp::F32_ONE);
    v
}

/// A strategy of operand pairs as vectors.
fn pair(s: BoxedStrategy<(u32, u32)>) -> BoxedStrategy<Vec<u64>> {
    s.prop_map(|(a, b)| vec![a as u64, b as u64]).boxed()
}

/// `fp_mul_e5m10`: ports and bit-exact model, directed vectors, random stimulus.
pub mod fp16_mul {
    use super::*;

    pub fn unit(_cfg: &CoreConfig) -> PureUnit {
        use Fmt::*;
        binary("fp_mul_e5m10", F16, ("b", F16), F32, |a, b| {
            fp::fp16_mul(a as u16, b as u16) as u64
        })
    }

    pub fn directed(_cfg: &CoreConfig) -> Vec<Vec<u64>> {
        let mut v = pairs(F16_SPECIALS, F16_SPECIALS);
        // Every binary16 value times a few representative factors.
        for a in 0..=u16::MAX {
            for b in [0x3C00u16, 0x0001, 0x03FF, 0x7BFF, 0xFC00, 0x8000, 0x3555] {
                v.push(vec![a as u64, b as u64]);
            }
        }
        v
    }

    pub fn random(_cfg: &CoreConfig) -> BoxedStrategy<Vec<u64>> {
        f16_mul_pair()
            .prop_map(|(a, b)| vec![a as u64, b as u64])
            .boxed()
    }
}

/// `fp_add_e8m23`: ports and bit-exact model, directed vectors, random stimulus.
pub mod fp32_add {
    use super::*;

    pub fn unit(_cfg: &CoreConfig) -> PureUnit {
        use Fmt::*;
        binary("fp_add_e8m23", F32, ("b", F32), F32, |a, b| {
            fp::fp32_add(a as u32, b as u32) as u64
        })
    }

    pub fn directed(_cfg: &CoreConfig) -> Vec<Vec<u64>> {
        let mut v = pairs(F32_SPECIALS, F32_SPECIALS);
        // Each special against its neighbours and their negations (cancellation, ties).
        for &x in F32_SPECIALS {
            for k in [1u32, 2, 3] {
                for y in [x.wrapping_add(k), x.wrapping_sub(k)] {
                    v.push(vec![x as u64, y as u64]);
                    v.push(vec![x as u64, (y ^ fp::F32_SIGN) as u64]);
                }
            }
        }
        v
    }

    pub fn random(_cfg: &CoreConfig) -> BoxedStrategy<Vec<u64>> {
        pair(f32_add_pair().boxed())
    }
}

/// `fp_cvt_e5m10_e8m23`: ports and bit-exact model, directed vectors, random stimulus.
pub mod fp16_to_fp32 {
    use super::*;

    pub fn unit(_cfg: &CoreConfig) -> PureUnit {
        use Fmt::*;
        unary("fp_cvt_e5m10_e8m23", ("a", F16), F32, |a| {
            fp::fp16_to_fp32(a as u16) as u64
        })
    }

    pub fn directed(_cfg: &CoreConfig) -> Vec<Vec<u64>> {
        (0..=u16::MAX).map(|x| vec![x as u64]).collect()
    }

    pub fn random(_cfg: &CoreConfig) -> BoxedStrategy<Vec<u64>> {
        f16_value().prop_map(|a| vec![a as u64]).boxed()
    }
}

/// `fp_cvt_e8m23_e5m10`: ports and bit-exact model, directed vectors, random stimulus.
pub mod fp32_to_fp16 {
    use super::*;

    pub fn unit(_cfg: &CoreConfig) -> PureUnit {
        use Fmt::*;
        unary("fp_cvt_e8m23_e5m10", ("a", F32), F16, |a| {
            fp::fp32_to_fp16(a as u32) as u64
        })
    }

    pub fn directed(_cfg: &CoreConfig) -> Vec<Vec<u64>> {
        fp16_rounding_boundaries()
            .into_iter()
            .chain(F32_SPECIALS.iter().copied())
            .map(|x| vec![x as u64])
            .collect()
    }

    pub fn random(_cfg: &CoreConfig) -> BoxedStrategy<Vec<u64>> {
        f32_for_fp16().prop_map(|a| vec![a as u64]).boxed()
    }
}

/// `fp_cvt_e8m7_e8m23`: bfloat16 → binary32, exact.
pub mod bf16_to_fp32 {
    use super::*;

    pub fn unit(_cfg: &CoreConfig) -> PureUnit {
        use Fmt::*;
        unary("fp_cvt_e8m7_e8m23", ("a", Fp(Format::BF16)), F32, |a| {
            fp::convert(a, Format::BF16, Format::FP32)
        })
    }

    /// Every bfloat16 value.
    pub fn directed(_cfg: &CoreConfig) -> Vec<Vec<u64>> {
        (0..=u16::MAX as u64).map(|x| vec![x]).collect()
    }

    pub fn random(_cfg: &CoreConfig) -> BoxedStrategy<Vec<u64>> {
        bf16_value().prop_map(|a| vec![a as u64]).boxed()
    }
}

/// `fp_cvt_e8m23_e8m7`: binary32 → bfloat16, round to nearest even.
pub mod fp32_to_bf16 {
    use super::*;

    pub fn unit(_cfg: &CoreConfig) -> PureUnit {
        use Fmt::*;
        unary("fp_cvt_e8m23_e8m7", ("a", F32), Fp(Format::BF16), |a| {
            fp::convert(a, Format::FP32, Format::BF16)
        })
    }

    /// Every bfloat16 value's binary32 encoding, the midpoints to its neighbour (ties both
    /// ways) and one binary32 ulp either side, both signs; the binary32 specials.
    pub fn directed(_cfg: &CoreConfig) -> Vec<Vec<u64>> {
        let mut v = vec![];
        for h in 0..0x7F80u32 {
            let x = h << 16;
            let mid = x | 0x8000;
            for y in [x, mid - 1, mid, mid + 1] {
                v.push(vec![y as u64]);
                v.push(vec![(y | fp::F32_SIGN) as u64]);
            }
        }
        v.extend(F32_SPECIALS.iter().map(|&x| vec![x as u64]));
        v
    }

    pub fn random(_cfg: &CoreConfig) -> BoxedStrategy<Vec<u64>> {
        f32_value().prop_map(|a| vec![a as u64]).boxed()
    }
}

/// `mac`: ports and bit-exact model, directed vectors, random stimulus.
pub mod mac {
    use super::*;

    pub fn unit(_cfg: &CoreConfig) -> PureUnit {
        use Fmt::*;
        PureUnit {
            name: "mac",
            inputs: vec![one("a", F16), one("b", F16), one("acc", F32)],
            outputs: vec![one("y", F32)],
            model: Box::new(|v| vec![fp::mac(v[2] as u32, v[0] as u16, v[1] as u16) as u64]),
        }
    }

    pub fn directed(_cfg: &CoreConfig) -> Vec<Vec<u64>> {
        let mut v = vec![];
        for &acc in F32_SPECIALS {
            for &a in F16_SPECIALS {
                for &b in F16_SPECIALS {
                    v.push(vec![a as u64, b as u64, acc as u64]);
                }
            }
        }
        v
    }

    pub fn random(_cfg: &CoreConfig) -> BoxedStrategy<Vec<u64>> {
        mac_triple()
            .prop_map(|(acc, a, b)| vec![a as u64, b as u64, acc as u64])
            .boxed()
    }
}

/// `fp_mul_e8m7`: the bfloat16 multiplier, its product exact in `e10m15`.
pub mod bf16_mul {
    use super::*;

    pub fn unit(_cfg: &CoreConfig) -> PureUnit {
        use Fmt::*;
        let (f, p) = (Format::BF16, Format::BF16.exact_product());
        binary("fp_mul_e8m7", Fp(f), ("b", Fp(f)), Fp(p), |a, b| {
            fp::mul_exact(a, b, Format::BF16)
        })
    }

    pub fn directed(_cfg: &CoreConfig) -> Vec<Vec<u64>> {
        let mut v = pairs(BF16_SPECIALS, BF16_SPECIALS);
        // Every bfloat16 value times a few representative factors.
        for a in 0..=u16::MAX {
            for b in [0x3F80u16, 0x0001, 0x007F, 0x7F7F, 0xFF80, 0x8000, 0x3EAB] {
                v.push(vec![a as u64, b as u64]);
            }
        }
        v
    }

    pub fn random(_cfg: &CoreConfig) -> BoxedStrategy<Vec<u64>> {
        bf16_mul_pair()
            .prop_map(|(a, b)| vec![a as u64, b as u64])
            .boxed()
    }
}

/// `fp_add_e10m15_e8m23`: a bfloat16 MAC's exact product into a binary32 accumulator.
pub mod wide_add {
    use super::*;

    fn product_format() -> Format {
        Format::BF16.exact_product()
    }

    pub fn unit(_cfg: &CoreConfig) -> PureUnit {
        use Fmt::*;
        binary(
            "fp_add_e10m15_e8m23",
            F32,
            ("b", Fp(product_format())),
            F32,
            |a, b| fp::add_wide(a as u32, b, product_format()) as u64,
        )
    }

    pub fn directed(_cfg: &CoreConfig) -> Vec<Vec<u64>> {
        let p = product_format();
        // The addend's specials: zeros, the smallest and largest finite (far outside
        // binary32), binary32's own extremes in this format, Inf, NaN.
        let from32 = |x: u32| fp::convert(x as u64, Format::FP32, p);
        let mut addends = vec![
            0,
            p.sign_mask(),
            1,
            p.frac_mask(),
            p.inf() - 1,
            p.inf(),
            p.neg_inf(),
            p.qnan(),
        ];
        addends.extend(F32_SPECIALS.iter().map(|&x| from32(x)));
        addends.extend(
            [0x3380_0000u32, 0x0000_0001, 0x7F7F_FFFF]
                .iter()
                .map(|&x| from32(x) + 1),
        );
        let mut v = vec![];
        for &acc in F32_SPECIALS {
            for &b in &addends {
                v.push(vec![acc as u64, b]);
            }
        }
        v
    }

    pub fn random(_cfg: &CoreConfig) -> BoxedStrategy<Vec<u64>> {
        wide_add_pair(product_format())
            .prop_map(|(acc, b)| vec![acc as u64, b])
            .boxed()
    }
}

/// `mac_e8m7`: the MAC on bfloat16 operands, a fused multiply-add into binary32.
pub mod mac_bf16 {
    use super::*;

    pub fn unit(_cfg: &CoreConfig) -> PureUnit {
        use Fmt::*;
        let f = Format::BF16;
        PureUnit {
            name: "mac_e8m7",
            inputs: vec![one("a", Fp(f)), one("b", Fp(f)), one("acc", F32)],
            outputs: vec![one("y", F32)],
            model: Box::new(|v| vec![fp::mac_fused(v[2] as u32, v[0], v[1], Format::BF16) as u64]),
        }
    }

    pub fn directed(_cfg: &CoreConfig) -> Vec<Vec<u64>> {
        let mut v = vec![];
        for &acc in F32_SPECIALS {
            for &a in BF16_SPECIALS {
                for &b in BF16_SPECIALS {
                    v.push(vec![a as u64, b as u64, acc as u64]);
                }
            }
        }
        v
    }

    pub fn random(_cfg: &CoreConfig) -> BoxedStrategy<Vec<u64>> {
        mac_triple_bf16()
            .prop_map(|(acc, a, b)| vec![a as u64, b as u64, acc as u64])
            .boxed()
    }
}

/// `fp_mul_e8m23`: ports and bit-exact model, directed vectors, random stimulus.
pub mod fp32_mul {
    use super::*;

    pub fn unit(_cfg: &CoreConfig) -> PureUnit {
        use Fmt::*;
        binary("fp_mul_e8m23", F32, ("b", F32), F32, |a, b| {
            fp::fp32_mul(a as u32, b as u32) as u64
        })
    }

    pub fn directed(cfg: &CoreConfig) -> Vec<Vec<u64>> {
        super::fp32_add::directed(cfg)
    }

    pub fn random(_cfg: &CoreConfig) -> BoxedStrategy<Vec<u64>> {
        pair(f32_mul_pair().boxed())
    }
}

/// `fp_max_e8m23`: ports and bit-exact model, directed vectors, random stimulus.
pub mod fp32_max {
    use super::*;

    pub fn unit(_cfg: &CoreConfig) -> PureUnit {
        use Fmt::*;
        binary("fp_max_e8m23", F32, ("b", F32), F32, |a, b| {
            fp::fp32_max(a as u32, b as u32) as u64
        })
    }

    pub fn directed(cfg: &CoreConfig) -> Vec<Vec<u64>> {
        super::fp32_add::directed(cfg)
    }

    pub fn random(_cfg: &CoreConfig) -> BoxedStrategy<Vec<u64>> {
        pair(f32_max_pair().boxed())
    }
}

/// `fp_ceil_e8m23`: ports and bit-exact model, directed vectors, random stimulus.
pub mod fp32_ceil {
    use super::*;

    pub fn unit(_cfg: &CoreConfig) -> PureUnit {
        use Fmt::*;
        unary("fp_ceil_e8m23", ("a", F32), F32, |a| {
            fp::fp32_ceil(a as u32) as u64
        })
    }

    pub fn directed(_cfg: &CoreConfig) -> Vec<Vec<u64>> {
        let mut v: Vec<Vec<u64>> = F32_SPECIALS.iter().map(|&x| vec![x as u64]).collect();
        // Integers and their neighbours, both signs, across the exponents where ceil acts.
        for e in 120u32..=152 {
            for m in [0u32, 1, 0x40_0000, 0x7F_FFFF, 0x12_3456] {
                for s in [0, fp::F32_SIGN] {
                    v.push(vec![(s | (e << 23) | m) as u64]);
                }
            }
        }
        v
    }

    pub fn random(_cfg: &CoreConfig) -> BoxedStrategy<Vec<u64>> {
        f32_for_ceil().prop_map(|a| vec![a as u64]).boxed()
    }
}

/// `fp_scale2_e8m23`: ports and bit-exact model, directed vectors, random stimulus.
pub mod fp32_scale2 {
    use super::*;

    pub fn unit(_cfg: &CoreConfig) -> PureUnit {
        use Fmt::*;
        binary("fp_scale2_e8m23", F32, ("n", Bits(8)), F32, |a, n| {
            fp::fp32_scale2(a as u32, n as u8) as u64
        })
    }

    pub fn directed(_cfg: &CoreConfig) -> Vec<Vec<u64>> {
        let mut v = vec![];
        for &x in F32_SPECIALS {
            for n in [
                0u64, 1, 2, 22, 23, 24, 25, 126, 127, 148, 149, 150, 151, 200, 254, 255,
            ] {
                v.push(vec![x as u64, n]);
            }
        }
        v
    }

    pub fn random(_cfg: &CoreConfig) -> BoxedStrategy<Vec<u64>> {
        (f32_value(), f32_scale2_shift())
            .prop_map(|(a, n)| vec![a as u64, n as u64])
            .boxed()
    }
}

/// `fp_exp2_e8m23`: ports and bit-exact model, directed vectors, random stimulus.
pub mod exp2 {
    use super::*;

    pub fn unit(_cfg: &CoreConfig) -> PureUnit {
        use Fmt::*;
        unary("fp_exp2_e8m23", ("x", F32), F32, |x| {
            fp::exp2(x as u32) as u64
        })
    }

    pub fn directed(_cfg: &CoreConfig) -> Vec<Vec<u64>> {
        let mut v: Vec<Vec<u64>> = F32_SPECIALS.iter().map(|&x| vec![x as u64]).collect();
        // Every multiple of 1/256 from -160 to 140, the range limits and their neighbours.
        for k in -160 * 256..=140 * 256 {
            v.push(vec![((k as f32) / 256.0).to_bits() as u64]);
        }
        for x in [128.0f32, -152.0, -149.0, -126.0, -150.0, -151.0] {
            for d in [-1i32, 0, 1] {
                v.push(vec![(x.to_bits() as i64 + d as i64) as u64]);
            }
        }
        v
    }

    pub fn random(_cfg: &CoreConfig) -> BoxedStrategy<Vec<u64>> {
        f32_for_exp2().prop_map(|x| vec![x as u64]).boxed()
    }
}

/// `fp_log2_e8m23`: ports and bit-exact model, directed vectors, random stimulus.
pub mod log2 {
    use super::*;

    pub fn unit(_cfg: &CoreConfig) -> PureUnit {
        use Fmt::*;
        unary("fp_log2_e8m23", ("x", F32), F32, |x| {
            fp::fp32_log2(x as u32) as u64
        })
    }

    pub fn directed(_cfg: &CoreConfig) -> Vec<Vec<u64>> {
        let mut v: Vec<Vec<u64>> = F32_SPECIALS.iter().map(|&x| vec![x as u64]).collect();
        // Every power of two (subnormals included) and its neighbours; every segment edge of
        // [1, 2) and [2^-140, ...) with its neighbours; 1 and the sums a row reaches.
        for e in 0u32..=255 {
            for x in [e << 23, (e << 23) | 1, ((e << 23) | 0x7F_FFFF)] {
                v.push(vec![x as u64]);
            }
        }
        for e in [1u32, 6, 126, 127, 128, 200] {
            for k in 0u32..64 {
                for d in [-1i64, 0, 1] {
                    let x = (((e << 23) | (k << 17)) as i64 + d) as u32;
                    v.push(vec![x as u64]);
                }
            }
        }
        for n in 1..=4096u32 {
            v.push(vec![(n as f32 / 8.0).to_bits() as u64]);
        }
        v
    }

    pub fn random(_cfg: &CoreConfig) -> BoxedStrategy<Vec<u64>> {
        f32_for_log2().prop_map(|x| vec![x as u64]).boxed()
    }
}

/// `row_reduce`: ports and bit-exact model, directed vectors, random stimulus.
pub mod row_reduce {
    use super::*;

    pub fn unit(cfg: &CoreConfig) -> PureUnit {
        use Fmt::*;
        PureUnit {
            name: "row_reduce",
            inputs: vec![PortSpec {
                name: "x",
                lanes: cfg.cols,
                fmt: F32,
            }],
            outputs: vec![one("max", F32), one("sum", F32)],
            model: Box::new(|v| {
                let lanes: Vec<u32> = v.iter().map(|&x| x as u32).collect();
                vec![
                    tree(&lanes, fp::fp32_max) as u64,
                    tree(&lanes, fp::fp32_add) as u64,
                ]
            }),
        }
    }

    pub fn directed(cfg: &CoreConfig) -> Vec<Vec<u64>> {
        let n = cfg.cols as usize;
        let mut v = vec![];
        for &x in F32_SPECIALS {
            // All lanes equal; one special among ones; the special against its negation.
            v.push(vec![x as u64; n]);
            for at in 0..n {
                let mut lanes = vec![fp::F32_ONE as u64; n];
                lanes[at] = x as u64;
                v.push(lanes);
            }
            let alternating = (0..n)
                .map(|i| if i % 2 == 0 { x } else { x ^ fp::F32_SIGN } as u64)
                .collect();
            v.push(alternating);
        }
        v
    }

    pub fn random(cfg: &CoreConfig) -> BoxedStrategy<Vec<u64>> {
        row_lanes(cfg.cols as usize)
            .prop_map(|v| v.into_iter().map(|x| x as u64).collect())
            .boxed()
    }
}

/// `softmax_exp`: ports and bit-exact model, directed vectors, random stimulus.
pub mod softmax_exp {
    use super::*;

    /// P in the configuration's operand format.
    pub fn unit(cfg: &CoreConfig) -> PureUnit {
        use Fmt::*;
        let format = cfg.in_format;
        PureUnit {
            name: "softmax_exp",
            inputs: vec![
                one("s", F32),
                one("m", F32),
                one("c", F32),
                one("masked", Bits(1)),
            ],
            outputs: vec![one("p", Fp(format))],
            model: Box::new(move |v| {
                vec![weight_in(v[0] as u32, v[1] as u32, v[2] as u32, v[3] == 1, format) as u64]
            }),
        }
    }

    pub fn directed(_cfg: &CoreConfig) -> Vec<Vec<u64>> {
        let mut v = vec![];
        let ms = [
            0.0f32,
            3.0,
            -7.0,
            100.0,
            f32::NEG_INFINITY,
            f32::INFINITY,
            f32::NAN,
        ];
        for &s in F32_SPECIALS {
            for &m in &ms {
                for &c in &scale_constants() {
                    for masked in [0, 1] {
                        v.push(vec![s as u64, m.to_bits() as u64, c as u64, masked]);
                    }
                }
            }
        }
        v
    }

    pub fn random(_cfg: &CoreConfig) -> BoxedStrategy<Vec<u64>> {
        softmax_exp_inputs(scale_constants())
            .prop_map(|(s, m, c, masked)| vec![s as u64, m as u64, c as u64, masked as u64])
            .boxed()
    }
}

/// `mask_gen`: ports and bit-exact model, directed vectors, random stimulus.
pub mod mask_gen {
    use super::*;

    /// Where the block's first key goes among the three ports (`k_base`, `k_alt0`, `k_alt1`),
    /// the others holding `decoy`: `pick` 0 keeps `k_base`, 1 takes `k_alt0`, 2 `k_alt1`, 3
    /// both takes set (`k_alt0` wins).
    fn place(k: u64, decoy: u64, pick: u64) -> [u64; 5] {
        match pick {
            0 => [k, decoy, 0, decoy, 0],
            1 => [decoy, k, 1, decoy, 0],
            2 => [decoy, decoy, 0, k, 1],
            _ => [decoy, k, 1, decoy, 1],
        }
    }

    /// A vector from `[q_base, k_base, q_len, k_len, causal]`, the key placed by `pick`.
    fn vector(v: &[u64], decoy: u64, pick: u64) -> Vec<u64> {
        let mut out = vec![v[0]];
        out.extend(place(v[1], decoy, pick));
        out.extend(&v[2..]);
        out
    }

    pub fn unit(cfg: &CoreConfig) -> PureUnit {
        use Fmt::*;
        let (br, bc, iw) = (cfg.br, cfg.bc, cfg.index_bits);
        PureUnit {
            name: "mask_gen",
            inputs: vec![
                one("q_base", Bits(iw)),
                one("k_base", Bits(iw)),
                one("k_alt0", Bits(iw)),
                one("k_take0", Bits(1)),
                one("k_alt1", Bits(iw)),
                one("k_take1", Bits(1)),
                one("q_len", Bits(iw)),
                one("k_len", Bits(iw)),
                one("causal", Bits(1)),
            ],
            outputs: vec![PortSpec {
                name: "mask",
                lanes: br * bc,
                fmt: Bits(1),
            }],
            model: Box::new(move |v| {
                let k_base = match (v[3], v[5]) {
                    (1, _) => v[2],
                    (_, 1) => v[4],
                    _ => v[1],
                };
                let (q_base, k_base) = (v[0] as usize, k_base as usize);
                let spec = MaskSpec {
                    q_len: v[6] as usize,
                    k_len: v[7] as usize,
                    causal: v[8] == 1,
                };
                (0..br as usize)
                    .flat_map(|i| (0..bc as usize).map(move |j| (i, j)))
                    .map(|(i, j)| spec.masked(q_base + i, k_base + j) as u64)
                    .collect()
            }),
        }
    }

    pub fn directed(cfg: &CoreConfig) -> Vec<Vec<u64>> {
        // Every combination of small bases and lengths, the key on each port in turn (the
        // others one block on, so a wrong pick moves the diagonal).
        let (br, bc) = (cfg.br as u64, cfg.bc as u64);
        let mut v = vec![];
        for q_len in [0, 1, br - 1, br, br + 1, 3 * br] {
            for k_len in [0, 1, bc - 1, bc, bc + 1, 3 * bc] {
                for q_base in [0, 1, br, 2 * br] {
                    for k_base in [0, 1, bc, 2 * bc] {
                        for causal in [0, 1] {
                            let pick = v.len() as u64 % 4;
                            let plain = [q_base, k_base, q_len, k_len, causal];
                            v.push(vector(&plain, k_base + bc, pick));
                        }
                    }
                }
            }
        }
        v
    }

    pub fn random(cfg: &CoreConfig) -> BoxedStrategy<Vec<u64>> {
        let limit = 1u64 << cfg.index_bits;
        (
            mask_inputs(cfg.br, cfg.bc, cfg.index_bits),
            0..limit,
            0u64..4,
        )
            .prop_map(|(v, decoy, pick)| vector(&v, decoy, pick))
            .boxed()
    }
}

/// The integer QKᵀ step of `f` (`int_dot_i8`, `int_dot_i4`): ports and model, directed
/// vectors (every pair of extreme packed operands onto extreme accumulators, with and without
/// the conversion), random stimulus (any bits, and accumulators near 2^24 and 2^31).
fn int_dot_unit(name: &'static str, f: kernels::quant::QkFormat) -> PureUnit {
    use kernels::quant::{dot_packed, int_to_f32};
    use Fmt::*;
    PureUnit {
        name,
        inputs: vec![
            one("a", Bits(16)),
            one("b", Bits(16)),
            one("acc", Bits(32)),
            one("last", Bits(1)),
        ],
        outputs: vec![one("y", Bits(32))],
        model: Box::new(move |v| {
            let s = dot_packed(v[2] as u32, v[0] as u16, v[1] as u16, f);
            vec![if v[3] == 1 { int_to_f32(s) } else { s } as u64]
        }),
    }
}

/// Packed operands whose lanes are all 0, 1, −1, the most negative or the most positive, and
/// mixed ones; accumulators at zero, ±2^24 ± 1, the int32 extremes.
fn int_dot_directed(f: kernels::quant::QkFormat) -> Vec<Vec<u64>> {
    let b = f.bits();
    let fill = |v: u64| (0..f.lanes()).fold(0u64, |a, i| a | ((v & ((1 << b) - 1)) << (i * b)));
    let ops: Vec<u64> = [0u64, 1, (1 << b) - 1, 1 << (b - 1), (1 << (b - 1)) - 1]
        .iter()
        .map(|&v| fill(v))
        .chain([0x1234, 0x8001, 0x7ffe, 0xffff])
        .collect();
    let accs = [
        0u64,
        1,
        0xffff_ffff,
        (1 << 24) - 1,
        (1 << 24) + 1,
        (1u64 << 32) - (1 << 24) - 1,
        0x7fff_ffff,
        0x8000_0000,
    ];
    let mut v = vec![];
    for &a in &ops {
        for &bb in &ops {
            for &acc in &accs {
                for last in [0, 1] {
                    v.push(vec![a, bb, acc, last]);
                }
            }
        }
    }
    v
}

fn int_dot_random() -> BoxedStrategy<Vec<u64>> {
    let acc = prop_oneof![
        any::<u32>(),
        (0u32..64).prop_map(|x| (1 << 24) - 32 + x),
        (0u32..64).prop_map(|x| ((1u32 << 24) - 32 + x).wrapping_neg()),
        (0u32..64).prop_map(|x| 0x7fff_ffe0u32.wrapping_add(x)),
    ];
    (any::<u16>(), any::<u16>(), acc, any::<bool>())
        .prop_map(|(a, b, acc, last)| vec![a as u64, b as u64, acc as u64, last as u64])
        .boxed()
}

/// `int_dot_i8`: two INT8 products a cycle.
pub mod int_dot_i8 {
    use super::*;
    use kernels::quant::QkFormat;

    pub fn unit(_cfg: &CoreConfig) -> PureUnit {
        int_dot_unit("int_dot_i8", QkFormat::Int8)
    }

    pub fn directed(_cfg: &CoreConfig) -> Vec<Vec<u64>> {
        int_dot_directed(QkFormat::Int8)
    }

    pub fn random(_cfg: &CoreConfig) -> BoxedStrategy<Vec<u64>> {
        int_dot_random()
    }
}

/// `int_dot_i4`: four INT4 products a cycle.
pub mod int_dot_i4 {
    use super::*;
    use kernels::quant::QkFormat;

    pub fn unit(_cfg: &CoreConfig) -> PureUnit {
        int_dot_unit("int_dot_i4", QkFormat::Int4)
    }

    pub fn directed(_cfg: &CoreConfig) -> Vec<Vec<u64>> {
        int_dot_directed(QkFormat::Int4)
    }

    pub fn random(_cfg: &CoreConfig) -> BoxedStrategy<Vec<u64>> {
        int_dot_random()
    }
}

/// The OCP FP8 operand formats' units (`E4M3`: true for E4M3, false for E5M2): small enough
/// that every value, and every operand pair, is a directed vector.
pub mod fp8 {
    use super::*;

    /// The format.
    pub fn format<const E4M3: bool>() -> Format {
        if E4M3 {
            Format::FP8_E4M3
        } else {
            Format::FP8_E5M2
        }
    }

    /// The unit's registry name, from its formats (`hdl::fp`'s naming).
    fn name<const E4M3: bool>(what: &str) -> &'static str {
        match (what, E4M3) {
            ("mul", true) => "fp_mul_e4m3fn",
            ("mul", false) => "fp_mul_e5m2",
            ("widen", true) => "fp_cvt_e4m3fn_e8m23",
            ("widen", false) => "fp_cvt_e5m2_e8m23",
            ("narrow", true) => "fp_cvt_e8m23_e4m3fn",
            ("narrow", false) => "fp_cvt_e8m23_e5m2",
            ("mac", true) => "mac_e4m3fn",
            ("mac", false) => "mac_e5m2",
            _ => unreachable!("no FP8 unit {what}"),
        }
    }

    fn values<const E4M3: bool>() -> impl Iterator<Item = u64> {
        0..=format::<E4M3>().mask()
    }

    fn value<const E4M3: bool>() -> BoxedStrategy<u64> {
        (0..=format::<E4M3>().mask()).boxed()
    }

    /// The accumulators of the directed MAC vectors: binary32's specials and, for every
    /// operand pair, −0, whose sum is the exact product itself.
    fn accumulators() -> impl Iterator<Item = u32> {
        F32_SPECIALS.iter().copied().step_by(3)
    }

    pub mod mul {
        use super::*;

        pub fn unit<const E4M3: bool>(_cfg: &CoreConfig) -> PureUnit {
            let (f, p) = (format::<E4M3>(), format::<E4M3>().exact_product());
            binary(
                name::<E4M3>("mul"),
                Fmt::Fp(f),
                ("b", Fmt::Fp(f)),
                Fmt::Fp(p),
                |a, b| fp::mul_exact(a, b, format::<E4M3>()),
            )
        }

        /// Every pair.
        pub fn directed<const E4M3: bool>(_cfg: &CoreConfig) -> Vec<Vec<u64>> {
            values::<E4M3>()
                .flat_map(|a| values::<E4M3>().map(move |b| vec![a, b]))
                .collect()
        }

        pub fn random<const E4M3: bool>(_cfg: &CoreConfig) -> BoxedStrategy<Vec<u64>> {
            (value::<E4M3>(), value::<E4M3>())
                .prop_map(|(a, b)| vec![a, b])
                .boxed()
        }
    }

    pub mod widen {
        use super::*;

        pub fn unit<const E4M3: bool>(_cfg: &CoreConfig) -> PureUnit {
            let f = format::<E4M3>();
            unary(name::<E4M3>("widen"), ("a", Fmt::Fp(f)), Fmt::F32, |a| {
                fp::convert(a, format::<E4M3>(), Format::FP32)
            })
        }

        /// Every value.
        pub fn directed<const E4M3: bool>(_cfg: &CoreConfig) -> Vec<Vec<u64>> {
            values::<E4M3>().map(|x| vec![x]).collect()
        }

        pub fn random<const E4M3: bool>(_cfg: &CoreConfig) -> BoxedStrategy<Vec<u64>> {
            value::<E4M3>().prop_map(|a| vec![a]).boxed()
        }
    }

    pub mod narrow {
        use super::*;

        pub fn unit<const E4M3: bool>(_cfg: &CoreConfig) -> PureUnit {
            let f = format::<E4M3>();
            unary(name::<E4M3>("narrow"), ("a", Fmt::F32), Fmt::Fp(f), |a| {
                fp::convert(a, Format::FP32, format::<E4M3>())
            })
        }

        /// Every value's binary32 encoding, the midpoints to its upper neighbour (ties both
        /// ways, at the largest value the one above saturation or Inf) and one binary32 ulp
        /// either side, both signs, and the binary32 specials.
        pub fn directed<const E4M3: bool>(_cfg: &CoreConfig) -> Vec<Vec<u64>> {
            let f = format::<E4M3>();
            let wide = |x: u64| fp::convert(x, f, Format::FP32) as u32;
            let mut v = vec![];
            let top = f.max_finite_bits();
            for x in 0..=top {
                let lo = wide(x);
                // Above the largest value, one ulp up (where the next value would be).
                let hi = if x < top {
                    wide(x + 1)
                } else {
                    2 * lo - wide(x - 1)
                };
                let mid = lo + (hi - lo) / 2;
                for y in [lo, mid.saturating_sub(1), mid, mid + 1] {
                    v.push(vec![y as u64]);
                    v.push(vec![(y | fp::F32_SIGN) as u64]);
                }
            }
            v.extend(F32_SPECIALS.iter().map(|&x| vec![x as u64]));
            v
        }

        pub fn random<const E4M3: bool>(_cfg: &CoreConfig) -> BoxedStrategy<Vec<u64>> {
            f32_value().prop_map(|a| vec![a as u64]).boxed()
        }
    }

    pub mod mac {
        use super::*;

        pub fn unit<const E4M3: bool>(_cfg: &CoreConfig) -> PureUnit {
            let f = format::<E4M3>();
            PureUnit {
                name: name::<E4M3>("mac"),
                inputs: vec![
                    one("a", Fmt::Fp(f)),
                    one("b", Fmt::Fp(f)),
                    one("acc", Fmt::F32),
                ],
                outputs: vec![one("y", Fmt::F32)],
                model: Box::new(|v| {
                    vec![fp::mac_fused(v[2] as u32, v[0], v[1], format::<E4M3>()) as u64]
                }),
            }
        }

        /// Every operand pair into −0 (the exact product), and into a third of binary32's
        /// specials.
        pub fn directed<const E4M3: bool>(_cfg: &CoreConfig) -> Vec<Vec<u64>> {
            let mut v = vec![];
            for a in values::<E4M3>() {
                for b in values::<E4M3>() {
                    v.push(vec![a, b, fp::ACC_CLEAR as u64]);
                    if (a ^ b) & 0x11 == 0 {
                        v.extend(accumulators().map(|acc| vec![a, b, acc as u64]));
                    }
                }
            }
            v
        }

        /// Random operands into random accumulators, and into the product's negation (a
        /// cancellation) with its last bits disturbed.
        pub fn random<const E4M3: bool>(_cfg: &CoreConfig) -> BoxedStrategy<Vec<u64>> {
            let f = format::<E4M3>();
            prop_oneof![
                (value::<E4M3>(), value::<E4M3>(), f32_value())
                    .prop_map(|(a, b, acc)| vec![a, b, acc as u64]),
                (value::<E4M3>(), value::<E4M3>(), 0u32..4).prop_map(move |(a, b, d)| {
                    let p = fp::mul_exact(a, b, f) as u32 ^ fp::F32_SIGN;
                    vec![a, b, p.wrapping_add(d) as u64]
                }),
            ]
            .boxed()
        }
    }
}
