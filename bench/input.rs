//! What a bench reads from its environment, checked: a value that is not
//! what it should be is named on stderr before anything runs, exit 2 (never
//! a panic, never silently the default). Each bench is a crate of its own
//! and names itself in `crate::BENCH`; the benches of several crates take
//! this file in with `#[path]`, as a crate for four functions would cost
//! the build more than they are.

// Each bench uses some of these, none all.
#![allow(dead_code)]

use std::str::FromStr;

/// Says what is wrong with the bench's input, and stops: exit 2.
pub fn bad(what: String) -> ! {
    eprintln!("{}: {what}", crate::BENCH);
    std::process::exit(2);
}

/// The value of `name`, `default` when unset; one that does not parse, or
/// that `ok` refuses, is bad input (`what`: what it must be).
pub fn env_or<T: FromStr>(name: &str, default: T, what: &str, ok: impl Fn(&T) -> bool) -> T {
    match std::env::var(name) {
        Err(_) => default,
        Ok(v) => match v.trim().parse::<T>() {
            Ok(x) if ok(&x) => x,
            _ => bad(format!("{name} must be {what}, not {v:?}")),
        },
    }
}

/// A positive number of seconds in `name`, `default` when unset.
pub fn seconds(name: &str, default: f64) -> f64 {
    env_or(name, default, "a positive number of seconds", |x: &f64| {
        x.is_finite() && *x > 0.0
    })
}

/// A whole number >= 1 in `name`, `default` when unset.
pub fn count<T: FromStr + PartialOrd + From<u8>>(name: &str, default: T) -> T {
    env_or(name, default, "a whole number >= 1", |n: &T| *n >= T::from(1))
}

/// Whole numbers >= 1, comma-separated, in `name`; `default` (in the same
/// form) when unset.
pub fn counts(name: &str, default: &str) -> Vec<usize> {
    let text = std::env::var(name).unwrap_or_else(|_| default.into());
    let list: Option<Vec<usize>> = text
        .split(',')
        .map(|v| v.trim().parse().ok().filter(|&n| n >= 1))
        .collect();
    match list {
        Some(list) if !list.is_empty() => list,
        _ => bad(format!(
            "{name} must be whole numbers >= 1, comma-separated, not {text:?}"
        )),
    }
}
