//! How JSON reports write numbers. JSON has no NaN or infinity (serde_json would write
//! `null`, which reads as "missing"), so every floating-point field of a report goes through
//! [`real`]: a finite value is a JSON number, NaN is the string `"NaN"`, and the infinities are
//! `"Infinity"` and `"-Infinity"` (the spellings JavaScript's `Number()` and Python's `float()`
//! both read back).

use serde::{Deserialize, Deserializer, Serializer};

/// A finite f64 as a number, NaN and ±Inf as the strings above.
pub fn real<S: Serializer>(x: &f64, s: S) -> Result<S::Ok, S::Error> {
    if x.is_finite() {
        s.serialize_f64(*x)
    } else {
        s.serialize_str(nonfinite_name(*x))
    }
}

/// [`real`] for an optional value (`None` is `null`: the value does not apply).
pub fn opt_real<S: Serializer>(x: &Option<f64>, s: S) -> Result<S::Ok, S::Error> {
    match x {
        Some(x) => real(x, s),
        None => s.serialize_none(),
    }
}

/// Reads what [`real`] wrote: a number, or one of the three names.
pub fn de_real<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Real {
        Number(f64),
        Name(String),
    }
    match Real::deserialize(d)? {
        Real::Number(x) => Ok(x),
        Real::Name(n) => match n.as_str() {
            "NaN" => Ok(f64::NAN),
            "Infinity" => Ok(f64::INFINITY),
            "-Infinity" => Ok(f64::NEG_INFINITY),
            _ => Err(serde::de::Error::custom(format!(
                "`{n}` is not a number (expected a number, \"NaN\", \"Infinity\" or \"-Infinity\")"
            ))),
        },
    }
}

/// Reads what [`opt_real`] wrote.
pub fn de_opt_real<'de, D: Deserializer<'de>>(d: D) -> Result<Option<f64>, D::Error> {
    #[derive(Deserialize)]
    struct Wrap(#[serde(deserialize_with = "de_real")] f64);
    Ok(Option::<Wrap>::deserialize(d)?.map(|w| w.0))
}

fn nonfinite_name(x: f64) -> &'static str {
    if x.is_nan() {
        "NaN"
    } else if x > 0.0 {
        "Infinity"
    } else {
        "-Infinity"
    }
}

#[cfg(test)]
mod tests {
    #[derive(serde::Serialize)]
    struct R {
        #[serde(serialize_with = "super::real")]
        a: f64,
        #[serde(serialize_with = "super::real")]
        b: f64,
        #[serde(serialize_with = "super::real")]
        c: f64,
        #[serde(serialize_with = "super::real")]
        d: f64,
        #[serde(serialize_with = "super::opt_real")]
        e: Option<f64>,
    }

    #[test]
    fn special_values_are_named_not_null() {
        let r = R {
            a: 1.5,
            b: f64::NAN,
            c: f64::INFINITY,
            d: f64::NEG_INFINITY,
            e: None,
        };
        assert_eq!(
            serde_json::to_string(&r).unwrap(),
            r#"{"a":1.5,"b":"NaN","c":"Infinity","d":"-Infinity","e":null}"#
        );
    }
}
