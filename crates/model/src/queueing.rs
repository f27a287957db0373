//! A latency-critical service as an M/M/c queue: Poisson arrivals at
//! `lambda` requests per second, exponential service at `mu` per second on
//! each of `c` cores, one queue (memcached-like: any worker takes the next
//! request). Used by S4's consolidation case study to size the service and
//! to judge its tail latency.
//!
//! The response time T = W + S, with S ~ Exp(mu) and the wait W zero with
//! probability 1 - C (Erlang C), else Exp(theta) with theta = c mu - lambda.
//! Its tail (Gross & Harris, Fundamentals of Queueing Theory, 2.3):
//! P(T > t) = (1 - C) e^(-mu t) + C P(Exp(theta) + Exp(mu) > t), where the
//! sum of the two exponentials has the hypoexponential tail
//! (theta e^(-mu t) - mu e^(-theta t)) / (theta - mu), or (1 + mu t) e^(-mu t)
//! when theta = mu.

/// Erlang C: the probability that a request waits, with offered load
/// `a = lambda / mu` on `c` servers (`a < c`). Computed through Erlang B's
/// recurrence, which stays finite for any c (the textbook sum of a^k / k!
/// overflows beyond a few hundred servers).
pub fn erlang_c(a: f64, c: u32) -> f64 {
    let mut b = 1.0;
    for k in 1..=c {
        b = a * b / (k as f64 + a * b);
    }
    let c = c as f64;
    c * b / (c - a * (1.0 - b))
}

/// P(T > t) for the queue, `t` in seconds (`lambda < c mu`).
fn tail(lambda: f64, mu: f64, c: u32, t: f64) -> f64 {
    let wait = erlang_c(lambda / mu, c);
    let theta = c as f64 * mu - lambda;
    let both = if (theta - mu).abs() < 1e-9 * mu {
        (1.0 + mu * t) * (-mu * t).exp()
    } else {
        (theta * (-mu * t).exp() - mu * (-theta * t).exp()) / (theta - mu)
    };
    (1.0 - wait) * (-mu * t).exp() + wait * both
}

/// The `q`-quantile (0 < q < 1, e.g. 0.99) of the response time in seconds,
/// with `lambda` requests/s, `mu` requests/s per core and `c` cores.
/// `None` when the queue is overloaded (lambda >= c mu): latency grows
/// without bound. No load: the service time's own quantile.
pub fn response_quantile_s(lambda: f64, mu: f64, c: u32, q: f64) -> Option<f64> {
    debug_assert!(mu > 0.0 && (0.0..1.0).contains(&q));
    let lambda = lambda.max(0.0);
    if c == 0 || lambda >= c as f64 * mu {
        return None;
    }
    let p = 1.0 - q;
    // The tail falls from 1 at t = 0; bracket the quantile, then bisect.
    let mut hi = 1.0 / mu;
    while tail(lambda, mu, c, hi) > p {
        hi *= 2.0;
        if !hi.is_finite() {
            return None;
        }
    }
    let mut lo = 0.0;
    for _ in 0..100 {
        let mid = 0.5 * (lo + hi);
        if tail(lambda, mu, c, mid) > p {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    Some(hi)
}

/// The fewest cores, from 1 to `most`, that keep the `q`-quantile response
/// time at `lambda` within `slo_s`; `None` when even `most` cannot.
pub fn cores_for(lambda: f64, mu: f64, q: f64, slo_s: f64, most: u32) -> Option<u32> {
    (1..=most).find(|&c| response_quantile_s(lambda, mu, c, q).is_some_and(|t| t <= slo_s))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_server_is_mm1_whose_response_time_is_exponential() {
        // M/M/1: T ~ Exp(mu - lambda), so the p99 is ln(100) / (mu - lambda).
        let (lambda, mu) = (600.0, 1000.0);
        let p99 = response_quantile_s(lambda, mu, 1, 0.99).unwrap();
        let exact = 100f64.ln() / (mu - lambda);
        assert!((p99 - exact).abs() < 1e-9 * exact, "{p99} vs {exact}");
        // Erlang C with one server is the utilisation.
        assert!((erlang_c(0.6, 1) - 0.6).abs() < 1e-12);
    }

    #[test]
    fn erlang_c_matches_the_textbook_sum_and_stays_finite_for_many_cores() {
        // a = 8 on c = 10: the sum formula, evaluated directly.
        let (a, c) = (8.0f64, 10u32);
        let fact = |n: u32| (1..=n).map(f64::from).product::<f64>();
        let top = a.powi(c as i32) / fact(c) * (c as f64 / (c as f64 - a));
        let sum: f64 = (0..c).map(|k| a.powi(k as i32) / fact(k)).sum();
        assert!((erlang_c(a, c) - top / (sum + top)).abs() < 1e-12);
        let big = erlang_c(900.0, 1000);
        assert!(big.is_finite() && big > 0.0 && big < 1.0);
    }

    #[test]
    fn overload_has_no_quantile_and_more_cores_never_hurt() {
        assert_eq!(response_quantile_s(2000.0, 1000.0, 2, 0.99), None);
        let mut last = f64::INFINITY;
        for c in 3..10 {
            let t = response_quantile_s(2000.0, 1000.0, c, 0.99).unwrap();
            assert!(t <= last);
            last = t;
        }
        // Idle service: the service time's own p99.
        let idle = response_quantile_s(0.0, 1000.0, 4, 0.99).unwrap();
        assert!((idle - 100f64.ln() / 1000.0).abs() < 1e-9);
        // 20k requests/s of 50 µs each need 1 core of work; a 1 ms p99 asks for more.
        let c = cores_for(20_000.0, 20_000.0, 0.99, 1e-3, 16).unwrap();
        assert!(c >= 2 && response_quantile_s(20_000.0, 20_000.0, c, 0.99).unwrap() <= 1e-3);
        assert!(response_quantile_s(20_000.0, 20_000.0, c - 1, 0.99).is_none_or(|t| t > 1e-3));
        assert_eq!(cores_for(1e9, 1000.0, 0.99, 1e-3, 4), None);
    }
}
