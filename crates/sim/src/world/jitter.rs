//! Variation of the LLC miss rates the simulated sensor reports within a
//! phase (`[sensor] llc_jitter`). S3 measured that a program's LLC miss
//! rate moves by up to 5% between 200 ms intervals even within one phase
//! (its §3.1, citing [6-8]); its stability filter (Threshold2 = 5%) exists
//! because of that. Without it every simulated interval of a phase reads
//! the same rate, and a policy that reacts to every change (HASS-D) pays
//! nothing for it.

use herd_policy::Rng;

/// How long one draw holds: S3's sampling interval.
const HOLD_NS: u64 = 200_000_000;

/// Each thread's current factor and until when it holds.
#[derive(Debug, Default)]
pub(super) struct Jitter {
    /// Relative half-width: factors are drawn from [1 - j, 1 + j].
    j: f64,
    rng: Option<Rng>,
    factors: Vec<(f64, u64)>,
}

impl Jitter {
    /// Jitter of half-width `j`, drawn from `seed`.
    pub fn new(j: f64, seed: u64) -> Self {
        Jitter {
            j,
            // A stream of its own: other uses of the seed stay as they were.
            rng: (j > 0.0).then(|| Rng::new(seed ^ 0x11C_0717)),
            factors: Vec::new(),
        }
    }

    /// Whether it varies anything.
    pub fn active(&self) -> bool {
        self.rng.is_some()
    }

    /// Thread `t`'s factor at `now_ns`. Inlined: it is asked for every
    /// task at every full observation, and is 1 in most runs.
    #[inline]
    pub fn factor(&mut self, t: usize, now_ns: u64) -> f64 {
        let Some(rng) = self.rng.as_mut() else {
            return 1.0;
        };
        if self.factors.len() <= t {
            self.factors.resize(t + 1, (1.0, 0));
        }
        let (f, until) = &mut self.factors[t];
        if now_ns >= *until {
            *f = 1.0 + self.j * (2.0 * rng.next_f64() - 1.0);
            *until = now_ns + HOLD_NS;
        }
        *f
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn factors_stay_within_the_width_hold_for_an_interval_and_follow_the_seed() {
        let mut j = Jitter::new(0.05, 7);
        let a = j.factor(0, 0);
        assert!((0.95..=1.05).contains(&a));
        assert_eq!(j.factor(0, HOLD_NS - 1), a);
        let draws: Vec<f64> = (1..50).map(|k| j.factor(0, k * HOLD_NS)).collect();
        assert!(draws.iter().all(|f| (0.95..=1.05).contains(f)));
        assert!(draws.iter().any(|&f| f != a));
        let mut again = Jitter::new(0.05, 7);
        assert_eq!(again.factor(0, 0), a);
        assert_eq!(Jitter::new(0.0, 7).factor(3, 0), 1.0);
    }
}
