//! Numbers a scenario file must give within a range, checked as they are
//! read, so the error names the field and its line. Shared by machine
//! scenarios (`scenario`), their consolidation studies and cluster
//! scenarios.

use serde::{Deserialize, Deserializer};

/// A number that must be finite and > 0.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Positive(pub f64);
/// A number that must be finite and >= 0.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct NonNegative(pub f64);
/// A count that must be >= 1.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Count(pub u32);

/// A finite number that passes `ok`, or an error saying what it must be.
fn checked_number<'de, D: Deserializer<'de>>(d: D, ok: fn(f64) -> bool, must: &str) -> Result<f64, D::Error> {
    let v = f64::deserialize(d)?;
    if v.is_finite() && ok(v) {
        Ok(v)
    } else {
        Err(serde::de::Error::custom(format!("must be {must}, got {v}")))
    }
}

impl<'de> Deserialize<'de> for Positive {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        checked_number(d, |v| v > 0.0, "a positive number").map(Positive)
    }
}

impl<'de> Deserialize<'de> for NonNegative {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        checked_number(d, |v| v >= 0.0, "a number >= 0").map(NonNegative)
    }
}

impl<'de> Deserialize<'de> for Count {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let v = i64::deserialize(d)?;
        match u32::try_from(v) {
            Ok(n) if n >= 1 => Ok(Count(n)),
            _ => Err(serde::de::Error::custom(format!(
                "must be a whole number >= 1, got {v}"
            ))),
        }
    }
}
