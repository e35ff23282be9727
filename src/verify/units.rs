//! The catalogue of pure units: ports, bit-exact models, directed vectors and random stimulus.

use kernels::fp;
use proptest::prelude::*;

use super::pure::{Fmt, PureUnit};
use super::stimulus::*;

/// fp16_mul: y = a × b.
pub const FP16_MUL: PureUnit = PureUnit {
    name: "fp16_mul",
    inputs: &[("a", Fmt::F16), ("b", Fmt::F16)],
    output: ("y", Fmt::F32),
    model: |v| fp::fp16_mul(v[0] as u16, v[1] as u16) as u64,
};

/// fp32_add: y = a + b.
pub const FP32_ADD: PureUnit = PureUnit {
    name: "fp32_add",
    inputs: &[("a", Fmt::F32), ("b", Fmt::F32)],
    output: ("y", Fmt::F32),
    model: |v| fp::fp32_add(v[0] as u32, v[1] as u32) as u64,
};

/// fp16_to_fp32.
pub const FP16_TO_FP32: PureUnit = PureUnit {
    name: "fp16_to_fp32",
    inputs: &[("a", Fmt::F16)],
    output: ("y", Fmt::F32),
    model: |v| fp::fp16_to_fp32(v[0] as u16) as u64,
};

/// fp32_to_fp16.
pub const FP32_TO_FP16: PureUnit = PureUnit {
    name: "fp32_to_fp16",
    inputs: &[("a", Fmt::F32)],
    output: ("y", Fmt::F16),
    model: |v| fp::fp32_to_fp16(v[0] as u32) as u64,
};

/// mac: y = acc + a × b.
pub const MAC: PureUnit = PureUnit {
    name: "mac",
    inputs: &[("a", Fmt::F16), ("b", Fmt::F16), ("acc", Fmt::F32)],
    output: ("y", Fmt::F32),
    model: |v| fp::mac(v[2] as u32, v[0] as u16, v[1] as u16) as u64,
};

/// Every pure unit.
pub const PURE_UNITS: &[PureUnit] = &[FP16_MUL, FP32_ADD, FP16_TO_FP32, FP32_TO_FP16, MAC];

/// The pure unit called `name`.
pub fn pure_unit(name: &str) -> Option<&'static PureUnit> {
    PURE_UNITS.iter().find(|u| u.name == name)
}

fn pairs<T: Copy + Into<u64>>(xs: &[T], ys: &[T]) -> Vec<Vec<u64>> {
    xs.iter()
        .flat_map(|&x| ys.iter().map(move |&y| vec![x.into(), y.into()]))
        .collect()
}

/// Directed vectors of unit `name`: every pair (or triple) of special values, plus
/// exhaustive or boundary sweeps where the input space allows.
pub fn directed(name: &str) -> Vec<Vec<u64>> {
    match name {
        "fp16_mul" => {
            let mut v = pairs(F16_SPECIALS, F16_SPECIALS);
            // Every binary16 value times a few representative factors.
            for a in 0..=u16::MAX {
                for b in [0x3C00u16, 0x0001, 0x03FF, 0x7BFF, 0xFC00, 0x8000, 0x3555] {
                    v.push(vec![a as u64, b as u64]);
                }
            }
            v
        }
        "fp32_add" => {
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
        "fp16_to_fp32" => (0..=u16::MAX).map(|x| vec![x as u64]).collect(),
        "fp32_to_fp16" => fp16_rounding_boundaries()
            .into_iter()
            .chain(F32_SPECIALS.iter().copied())
            .map(|x| vec![x as u64])
            .collect(),
        "mac" => {
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
        other => panic!("no directed vectors for `{other}`"),
    }
}

/// Random, biased stimulus for unit `name`: one vector (input values in port order) per value.
pub fn strategy(name: &str) -> BoxedStrategy<Vec<u64>> {
    match name {
        "fp16_mul" => f16_mul_pair()
            .prop_map(|(a, b)| vec![a as u64, b as u64])
            .boxed(),
        "fp32_add" => f32_add_pair()
            .prop_map(|(a, b)| vec![a as u64, b as u64])
            .boxed(),
        "fp16_to_fp32" => f16_value().prop_map(|a| vec![a as u64]).boxed(),
        "fp32_to_fp16" => f32_for_fp16().prop_map(|a| vec![a as u64]).boxed(),
        "mac" => mac_triple()
            .prop_map(|(acc, a, b)| vec![a as u64, b as u64, acc as u64])
            .boxed(),
        other => panic!("no stimulus for `{other}`"),
    }
}
