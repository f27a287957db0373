//! [`PolicySpec`]: a `--policy` text parsed once, at the edge (the CLI, a
//! scenario file), into the registry entry it names and checked, typed
//! arguments; passed down as that, never as a string.

use std::fmt;
use std::str::FromStr;

use crate::param::{Args, Entry, PolicyError, Value};
use crate::{Policy, baseline};

/// A policy and its checked parameters: `NAME[:key=value,...]`.
#[derive(Debug, Clone)]
pub struct PolicySpec {
    entry: &'static Entry,
    args: Args,
}

impl PolicySpec {
    /// Parses `text` against the registry.
    pub fn parse(text: &str) -> Result<PolicySpec, PolicyError> {
        // Names contain ':' themselves, so take the longest registered name
        // that the text starts with and that ends at ':' or the end.
        let entry = crate::catalog()
            .iter()
            .copied()
            .filter(|e| {
                text == e.name
                    || text
                        .strip_prefix(e.name)
                        .is_some_and(|rest| rest.starts_with(':'))
            })
            .max_by_key(|e| e.name.len())
            .ok_or_else(|| PolicyError::Unknown(text.to_string()))?;
        let args = Args::parse(entry, text[entry.name.len()..].trim_start_matches(':'))?;
        Ok(PolicySpec { entry, args })
    }

    /// The baseline: no intervention, the kernel places every task.
    pub fn linux() -> PolicySpec {
        PolicySpec {
            entry: &baseline::LINUX,
            args: Args::parse(&baseline::LINUX, "").expect("linux takes no parameters"),
        }
    }

    /// Whether this is the baseline every comparison is against.
    pub fn is_baseline(&self) -> bool {
        self.entry.name == baseline::LINUX.name
    }

    /// The policy's registered name, without parameters.
    pub fn name(&self) -> &'static str {
        self.entry.name
    }

    /// Its registry entry.
    pub fn entry(&self) -> &'static Entry {
        self.entry
    }

    /// Its checked parameters.
    pub fn args(&self) -> &Args {
        &self.args
    }

    /// A new policy object from this spec.
    pub fn build(&self) -> Box<dyn Policy> {
        (self.entry.build)(&self.args)
    }

    /// This spec with `key` set to `value`, checked as if it were given.
    pub fn with(&self, key: &'static str, value: Value) -> Result<PolicySpec, PolicyError> {
        // Rust prints a number as the shortest text that parses back to it,
        // so the value survives the round trip exactly.
        let text = self.args.text_with(Some((key, value)));
        PolicySpec::parse(&format!("{}:{text}", self.entry.name))
    }
}

impl PartialEq for PolicySpec {
    fn eq(&self, other: &PolicySpec) -> bool {
        self.entry.name == other.entry.name && self.args == other.args
    }
}

impl fmt::Display for PolicySpec {
    /// The spec as given: the name and the parameters the text gave.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let params = self.args.text_with(None);
        if params.is_empty() {
            f.write_str(self.entry.name)
        } else {
            write!(f, "{}:{params}", self.entry.name)
        }
    }
}

impl FromStr for PolicySpec {
    type Err = PolicyError;
    fn from_str(s: &str) -> Result<PolicySpec, PolicyError> {
        PolicySpec::parse(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_spec_shows_as_given_and_knows_the_baseline() {
        let s = PolicySpec::parse("pack:palm:cores=3").unwrap();
        assert_eq!(s.name(), "pack:palm");
        assert_eq!(s.to_string(), "pack:palm:cores=3");
        assert!(!s.is_baseline() && PolicySpec::linux().is_baseline());
        assert_eq!(PolicySpec::parse("linux").unwrap(), PolicySpec::linux());
        let w = s.with("period_us", Value::Number(250.0)).unwrap();
        assert_eq!(w.to_string(), "pack:palm:cores=3,period_us=250");
        assert!(s.with("period_us", Value::Number(-1.0)).is_err());
    }

    #[test]
    fn every_entry_builds_with_every_accepted_value() {
        use crate::param::Accepts;
        for e in crate::catalog() {
            let spec = PolicySpec::parse(e.name).unwrap();
            assert_eq!(spec.build().name(), e.name, "defaults show no parameters");
            for p in e.params {
                let mut tries: Vec<String> = Vec::new();
                match p.accepts {
                    Accepts::Words(w) => tries.extend(w.iter().map(|w| w.to_string())),
                    Accepts::Number { range, words } => {
                        tries.extend(words.iter().map(|w| w.to_string()));
                        let lo = if range.min.is_finite() { range.min } else { 0.0 };
                        let x = if range.min_open { lo + 1.0 } else { lo };
                        let x = if range.contains(x) { x } else { range.max };
                        tries.push(x.to_string());
                    }
                }
                for v in tries {
                    let text = format!("{}:{}={v}", e.name, p.key);
                    let s = PolicySpec::parse(&text).unwrap_or_else(|err| panic!("{text}: {err}"));
                    s.build();
                }
            }
        }
    }
}
