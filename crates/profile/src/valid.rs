//! S1's three low-contention states: a slice's sample reflects a program's
//! solo behaviour, and is *valid*, when contention could not have slowed it
//! much.
//!
//! Bandwidth is BTR: bus transactions (cache lines) per microsecond, as a
//! fraction of the machine's peak (S1's machine: 120 per µs).

use serde::{Deserialize, Serialize};

/// The thresholds, as fractions of peak BTR.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct LowContention {
    /// BTRSelfLow: below this a program is not memory-intensive (S1: 4%).
    pub self_low: f64,
    /// BTRSyswideLow: below this the whole machine is lightly loaded (S1: 1/3).
    pub syswide_low: f64,
}

impl Default for LowContention {
    fn default() -> Self {
        LowContention {
            self_low: 0.04,
            syswide_low: 1.0 / 3.0,
        }
    }
}

/// Why a sample was (or was not) valid.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Validity {
    /// State 1: the program's own bandwidth is low.
    OwnLow,
    /// State 2: the machine's bandwidth is low.
    SystemLow,
    /// State 3: at most one co-runner is memory-intensive.
    FewIntensive,
    /// None of the three: contention may have distorted it.
    Invalid,
}

impl Validity {
    /// Whether the sample counts as solo behaviour.
    pub fn is_valid(self) -> bool {
        self != Validity::Invalid
    }
}

impl LowContention {
    /// Whether a program moving `btr` transactions per µs is memory-intensive
    /// (S1: above BTRSelfLow of `peak_btr`).
    pub fn is_intensive(&self, btr: f64, peak_btr: f64) -> bool {
        btr > self.self_low * peak_btr
    }

    /// Classifies one program's slice from its own BTR, the whole
    /// machine's (transactions per µs) and how many of its co-runners were
    /// memory-intensive ([`Self::is_intensive`]), against `peak_btr`.
    pub fn classify(
        &self,
        own_btr: f64,
        system_btr: f64,
        intensive_corunners: usize,
        peak_btr: f64,
    ) -> Validity {
        if own_btr < self.self_low * peak_btr {
            return Validity::OwnLow;
        }
        if system_btr < self.syswide_low * peak_btr {
            return Validity::SystemLow;
        }
        if intensive_corunners <= 1 {
            Validity::FewIntensive
        } else {
            Validity::Invalid
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_three_states_in_order() {
        let lc = LowContention::default();
        let peak = 120.0;
        let intensive = |bs: &[f64]| bs.iter().filter(|&&b| lc.is_intensive(b, peak)).count();
        // 4% of 120 = 4.8 trans/us; a third = 40.
        assert_eq!(
            lc.classify(4.0, 100.0, intensive(&[50.0, 50.0]), peak),
            Validity::OwnLow
        );
        assert_eq!(
            lc.classify(30.0, 39.0, intensive(&[5.0, 4.0]), peak),
            Validity::SystemLow
        );
        assert_eq!(
            lc.classify(30.0, 90.0, intensive(&[50.0, 4.0, 1.0]), peak),
            Validity::FewIntensive
        );
        assert_eq!(
            lc.classify(30.0, 130.0, intensive(&[50.0, 50.0]), peak),
            Validity::Invalid
        );
        assert!(!Validity::Invalid.is_valid() && Validity::OwnLow.is_valid());
    }
}
