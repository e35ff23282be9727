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

pub use kernels::format::{Format, Specials};

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

/// The operand formats a design takes (`in_format`), by their keys in a configuration. Its
/// index is the format's code in the register map's `IN_FORMAT` field.
pub const IN_FORMATS: [(&str, Format); 4] = [
    ("fp16", Format::FP16),
    ("bf16", Format::BF16),
    ("fp8e4m3", Format::FP8_E4M3),
    ("fp8e5m2", Format::FP8_E5M2),
];

/// The operand format named `key` (`"fp16"`, `"bf16"`, `"fp8e4m3"`, `"fp8e5m2"`), or an error
/// naming the choices.
pub fn in_format_from_key(key: &str) -> anyhow::Result<Format> {
    IN_FORMATS
        .iter()
        .find(|(k, _)| *k == key)
        .map(|&(_, f)| f)
        .ok_or_else(|| {
            let choices: Vec<String> = IN_FORMATS
                .iter()
                .map(|(k, f)| format!("\"{k}\" ({})", f.long_name()))
                .collect();
            anyhow::anyhow!(
                "in_format = \"{key}\" is not a supported operand format: choose {} (the \
                 first is the default); every one accumulates in FP32",
                choices.join(", ")
            )
        })
}

/// The code of an operand format in the register map's `IN_FORMAT` field: its index in
/// [`IN_FORMATS`].
pub fn in_format_code(f: Format) -> u64 {
    IN_FORMATS
        .iter()
        .position(|&(_, g)| g == f)
        .expect("a design's operand format is one of IN_FORMATS") as u64
}

/// The integer format of QKᵀ named `key` (`"int8"`, `"int4"`), or an error naming the choices.
pub fn qk_format_from_key(key: &str) -> anyhow::Result<kernels::quant::QkFormat> {
    use kernels::quant::QkFormat;
    [QkFormat::Int8, QkFormat::Int4]
        .into_iter()
        .find(|f| f.name() == key)
        .ok_or_else(|| {
            anyhow::anyhow!(
                "qk_format = \"{key}\" is not a supported QK format: choose \"int8\" or \"int4\" \
                 (Q and K quantized, scores in int32), or leave the key out for QK in the \
                 operand format"
            )
        })
}

/// The configuration key of an operand format: `"fp16"`, `"bf16"`.
pub fn in_format_key(f: Format) -> &'static str {
    IN_FORMATS
        .iter()
        .find(|&&(_, g)| g == f)
        .map(|&(k, _)| k)
        .expect("a design's operand format is one of IN_FORMATS")
}

/// The bit-exact model a unit on operands of `f` names in its documentation: binary16, the
/// designs' default, has models of its own (`own`: `kernels::fp::mac`); every other format
/// the format-generic one (`generic`: `kernels::fp::mac_fused`).
pub fn model_name(f: Format, own: &'static str, generic: &'static str) -> &'static str {
    if f == Format::default() {
        own
    } else {
        generic
    }
}

/// `""` for binary16, the designs' default, else `_` and the format's name (`_e8m7`): how a
/// module that depends on the operand format says so in its name.
pub fn suffix(f: Format) -> String {
    if f == Format::default() {
        String::new()
    } else {
        format!("_{}", f.name())
    }
}
