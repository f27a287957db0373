//! How a policy declares itself to the registry: its name, one line about
//! it, its parameters with typed defaults and accepted values, and its
//! constructor ([`Entry`]); and the checked, typed arguments the
//! constructor gets ([`Args`]).
//!
//! Each policy module declares its entries beside its code; `lib.rs` lists
//! the modules; [`crate::PolicySpec`] parses a spec against that list. So
//! the catalogue (`herd policies`), parsing and building cannot disagree.

use std::fmt;

use crate::Policy;

/// A parameter's value: a number or a word.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Value {
    /// A number (whole numbers too, checked by [`Accepts`]).
    Number(f64),
    /// A word from the parameter's list.
    Word(&'static str),
}

impl fmt::Display for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::Number(x) => write!(f, "{x}"),
            Value::Word(w) => f.write_str(w),
        }
    }
}

/// What values a parameter accepts.
#[derive(Debug, Clone, Copy)]
pub enum Accepts {
    /// One of these words.
    Words(&'static [&'static str]),
    /// A number in a range, or one of `words` (such as `all`).
    Number {
        /// The range.
        range: Range,
        /// Words accepted besides numbers.
        words: &'static [&'static str],
    },
}

/// A range of numbers.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Range {
    /// Lowest value (`f64::NEG_INFINITY`: none).
    pub min: f64,
    /// Whether `min` itself is excluded.
    pub min_open: bool,
    /// Highest value (`f64::INFINITY`: none).
    pub max: f64,
    /// Whether `max` itself is excluded.
    pub max_open: bool,
    /// Whole numbers only.
    pub whole: bool,
}

impl Range {
    /// Numbers above 0.
    pub const POSITIVE: Range = Range::from(0.0, true, f64::INFINITY, false);
    /// 0 and above.
    pub const NON_NEGATIVE: Range = Range::from(0.0, false, f64::INFINITY, false);
    /// [0, 1].
    pub const UNIT: Range = Range::from(0.0, false, 1.0, false);
    /// [0, 1).
    pub const UNIT_OPEN: Range = Range::from(0.0, false, 1.0, true);

    /// `[min, max]` or open at either end.
    pub const fn from(min: f64, min_open: bool, max: f64, max_open: bool) -> Range {
        Range {
            min,
            min_open,
            max,
            max_open,
            whole: false,
        }
    }

    /// Whole numbers from `min` to `max` (`u64::MAX`: no upper bound).
    pub const fn whole(min: u64, max: u64) -> Range {
        let max = if max == u64::MAX {
            f64::INFINITY
        } else {
            max as f64
        };
        Range {
            min: min as f64,
            min_open: false,
            max,
            max_open: false,
            whole: true,
        }
    }

    /// Whether `x` is in the range.
    pub fn contains(&self, x: f64) -> bool {
        let above = if self.min_open {
            x > self.min
        } else {
            x >= self.min
        };
        let below = if self.max_open {
            x < self.max
        } else {
            x <= self.max
        };
        x.is_finite() && above && below && (!self.whole || x.fract() == 0.0)
    }
}

impl fmt::Display for Range {
    /// As an error or the catalogue says it: "a positive number",
    /// "a number in [0, 1)", "a whole number from 1 to 64".
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let noun = if self.whole { "a whole number" } else { "a number" };
        let bounded = self.max.is_finite();
        match (self.min_open, bounded) {
            (true, false) if self.min == 0.0 && !self.whole => f.write_str("a positive number"),
            (open, false) => write!(f, "{noun} {} {}", if open { ">" } else { ">=" }, self.min),
            (_, true) if self.whole => write!(f, "{noun} from {} to {}", self.min, self.max),
            (lo, true) => write!(
                f,
                "a number in {}{}, {}{}",
                if lo { '(' } else { '[' },
                self.min,
                self.max,
                if self.max_open { ')' } else { ']' }
            ),
        }
    }
}

impl fmt::Display for Accepts {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Accepts::Words(w) => write!(f, "one of {}", w.join(", ")),
            Accepts::Number { range, words: [] } => write!(f, "{range}"),
            Accepts::Number { range, words } => write!(f, "{} or {range}", words.join(", ")),
        }
    }
}

/// A parameter a policy takes.
#[derive(Debug, Clone, Copy)]
pub struct Param {
    /// The key, as in `key=value`.
    pub key: &'static str,
    /// The value when the spec does not give one.
    pub default: Value,
    /// What values it takes.
    pub accepts: Accepts,
    /// What it does.
    pub about: &'static str,
}

impl Param {
    /// `text` as this parameter's value, or why not.
    fn parse(&self, text: &str) -> Result<Value, String> {
        let words = match self.accepts {
            Accepts::Words(w) | Accepts::Number { words: w, .. } => w,
        };
        if let Some(w) = words.iter().find(|w| **w == text) {
            return Ok(Value::Word(w));
        }
        match self.accepts {
            Accepts::Number { range, .. } => text
                .parse::<f64>()
                .ok()
                .filter(|x| range.contains(*x))
                .map(Value::Number)
                .ok_or_else(|| format!("{}={text}: must be {}", self.key, self.accepts)),
            Accepts::Words(w) => Err(format!("{}={text}: expected one of {}", self.key, w.join(", "))),
        }
    }
}

/// Builds a policy from checked arguments.
pub type Build = fn(&Args) -> Box<dyn Policy>;

/// Checks arguments together: `Err` says why they do not go together.
pub type Check = fn(&Args) -> Result<(), String>;

/// A policy as the registry knows it.
#[derive(Clone, Copy)]
pub struct Entry {
    /// The name `--policy` takes.
    pub name: &'static str,
    /// One line about it.
    pub about: &'static str,
    /// Its parameters.
    pub params: &'static [Param],
    /// Its constructor. Every value it reads was checked against `params`.
    pub build: Build,
    /// What its parameters must satisfy together (each alone is checked
    /// against `params`), or why not.
    pub check: Option<Check>,
}

impl fmt::Debug for Entry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Entry")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

/// Why a policy spec was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PolicyError {
    /// No policy has that name.
    #[error("unknown policy '{0}' (herd policies lists them)")]
    Unknown(String),
    /// A parameter is unknown or its value is bad.
    #[error("policy '{policy}': {why}")]
    Param {
        /// The policy.
        policy: String,
        /// What is wrong.
        why: String,
    },
}

/// A spec's parameters, checked against its entry: every declared key has
/// a typed value (the given one, else the default).
#[derive(Debug, Clone, PartialEq)]
pub struct Args {
    /// The policy.
    policy: &'static str,
    /// (key, value) for every parameter the entry declares, in its order.
    values: Vec<(&'static str, Value)>,
    /// The keys the spec gave, in its order (each once).
    given: Vec<&'static str>,
}

impl Args {
    /// Checks `text` (`key=value,...`) against `entry`.
    pub(crate) fn parse(entry: &Entry, text: &str) -> Result<Args, PolicyError> {
        let bad = |why: String| PolicyError::Param {
            policy: entry.name.into(),
            why,
        };
        let mut values: Vec<(&'static str, Value)> =
            entry.params.iter().map(|p| (p.key, p.default)).collect();
        let mut given = Vec::new();
        for pair in text.split(',').filter(|p| !p.is_empty()) {
            let (k, v) = pair
                .split_once('=')
                .ok_or_else(|| bad(format!("'{pair}' is not key=value")))?;
            let Some(i) = entry.params.iter().position(|p| p.key == k) else {
                let known: Vec<&str> = entry.params.iter().map(|p| p.key).collect();
                let known = if known.is_empty() {
                    "none".to_string()
                } else {
                    known.join(", ")
                };
                return Err(bad(format!("unknown parameter '{k}' (known: {known})")));
            };
            // Twice is a typo or a paste, and which one was meant is a guess.
            if given.contains(&values[i].0) {
                return Err(bad(format!("'{k}' given twice")));
            }
            values[i].1 = entry.params[i].parse(v).map_err(bad)?;
            given.push(values[i].0);
        }
        let args = Args {
            policy: entry.name,
            values,
            given,
        };
        if let Some(check) = entry.check {
            check(&args).map_err(bad)?;
        }
        Ok(args)
    }

    /// The value of `key`. A key the entry does not declare is a defect in
    /// the registry, which `every_entry_builds_with_every_accepted_value`
    /// finds.
    pub fn get(&self, key: &str) -> Value {
        match self.values.iter().find(|(k, _)| *k == key) {
            Some((_, v)) => *v,
            None => panic!(
                "policy {} reads parameter '{key}', which it does not declare",
                self.policy
            ),
        }
    }

    /// The number `key`, or `None` when it is one of its words.
    pub fn number(&self, key: &str) -> Option<f64> {
        match self.get(key) {
            Value::Number(x) => Some(x),
            Value::Word(_) => None,
        }
    }

    /// The word `key`, or `None` when it is a number.
    pub fn word(&self, key: &str) -> Option<&'static str> {
        match self.get(key) {
            Value::Word(w) => Some(w),
            Value::Number(_) => None,
        }
    }

    /// The number `key` where its parameter takes numbers only.
    pub fn real(&self, key: &str) -> f64 {
        self.number(key)
            .unwrap_or_else(|| panic!("policy {} parameter '{key}' is not a number", self.policy))
    }

    /// Whether the spec gave `key` (rather than the default).
    pub fn given(&self, key: &str) -> bool {
        self.given.contains(&key)
    }

    /// How many keys the spec gave.
    pub fn given_count(&self) -> usize {
        self.given.len()
    }

    /// The given parameters as the spec text `key=value,...` (in the
    /// order given), with `key` set to `value`.
    pub(crate) fn text_with(&self, key: Option<(&'static str, Value)>) -> String {
        let mut parts: Vec<String> = self
            .given
            .iter()
            .filter(|g| key.is_none_or(|(k, _)| k != **g))
            .map(|g| format!("{g}={}", self.get(g)))
            .collect();
        if let Some((k, v)) = key {
            parts.push(format!("{k}={v}"));
        }
        parts.join(",")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn palm_refuses_a_floor_above_its_ceiling_and_huge_periods() {
        let e = crate::PolicySpec::parse("pack:palm:min_period_us=70000").unwrap_err();
        assert!(e.to_string().contains("is above max_period_ms=64"), "{e}");
        assert!(crate::PolicySpec::parse("pack:palm:min_period_us=70000,period_us=500").is_ok());
        assert!(crate::PolicySpec::parse("pack:palm:max_period_ms=1e308").is_err());
        assert!(crate::PolicySpec::parse("pack:palm:min_period_us=64000").is_ok());
    }

    #[test]
    fn a_key_given_twice_is_refused() {
        let e = crate::PolicySpec::parse("pack:palm:cores=2,cores=3").unwrap_err();
        assert_eq!(e.to_string(), "policy 'pack:palm': 'cores' given twice");
        assert!(crate::PolicySpec::parse("pack:palm:cores=2,min_period_us=250").is_ok());
    }

    #[test]
    fn ranges_say_what_they_take() {
        assert_eq!(Range::POSITIVE.to_string(), "a positive number");
        assert_eq!(Range::NON_NEGATIVE.to_string(), "a number >= 0");
        assert_eq!(Range::UNIT.to_string(), "a number in [0, 1]");
        assert_eq!(Range::UNIT_OPEN.to_string(), "a number in [0, 1)");
        assert_eq!(Range::whole(1, 64).to_string(), "a whole number from 1 to 64");
        assert_eq!(Range::whole(1, u64::MAX).to_string(), "a whole number >= 1");
        assert!(Range::UNIT_OPEN.contains(0.0) && !Range::UNIT_OPEN.contains(1.0));
        assert!(!Range::POSITIVE.contains(0.0) && !Range::POSITIVE.contains(f64::NAN));
        assert!(!Range::whole(0, 1).contains(0.5) && Range::whole(0, 1).contains(1.0));
    }
}
