//! Memory contention: queues at each NUMA node's memory controller and on
//! each interconnect link, solved as a fixed point.
//!
//! A thread ("stream") spends `compute_ns_per_instr` per instruction on its
//! core plus, for each of its `requests_per_instr` cache-line requests, the
//! unloaded request cost (`request_ns`, times the remote-latency ratio when
//! the line lives on another node) plus the waiting time at every queue on
//! the request's route: the home node's controller, and the link between
//! the thread's node and the memory's node when they differ.
//!
//! Waiting time at a queue with arrival rate lambda and service rate mu:
//! - [`Contention::MM1`] (S2, after Akhmetshin & Yuldashev): an M/M/1 queue,
//!   sojourn 1/(mu - lambda), so waiting beyond service is
//!   u / (mu (1 - u)) with u = lambda/mu; it grows without bound at u -> 1.
//! - [`Contention::Superlinear`] (S1: slowdown grows superlinearly with the
//!   total bandwidth): waiting = request_ns * alpha * u^exponent.
//!
//! Arrival rates depend on speeds and speeds on waiting times, so the
//! solution is a fixed point. A queue cannot carry more than mu: when the
//! demand at the largest finite waiting time still exceeds mu, the queue is
//! *saturated* and the waiting time rises until the arrival rate is mu.
//!
//! The solver sweeps the queues (Gauss-Seidel); for each queue it solves a
//! one-dimensional monotone equation by bisection. Every loop is bounded;
//! a solve that does not settle says so in [`Solution::converged`].

use serde::{Deserialize, Serialize};

/// How waiting time grows with load.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Contention {
    /// S1: waiting = request_ns * alpha * utilisation^exponent.
    Superlinear {
        /// Scale: at full utilisation a request waits alpha times its unloaded cost.
        alpha: f64,
        /// Growth exponent (> 1 for superlinear).
        exponent: f64,
    },
    /// S2: each controller and link is an M/M/1 queue.
    #[serde(rename = "mm1")]
    MM1,
}

/// Where a stream's memory lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    /// On one node.
    Node(usize),
    /// Spread evenly over all nodes.
    Interleaved,
    /// S2's program model: a share of the requests (in millionths) to data
    /// all the program's threads share, on `node` (where it was first
    /// touched); the rest to the thread's own node.
    Shared {
        /// Where the shared data is.
        node: usize,
        /// Millionths of the requests that go there (an integer, so equal
        /// streams compare equal bit for bit).
        share_ppm: u32,
    },
}

impl Target {
    /// Each node's share of the requests of a stream whose CPU is on `home`
    /// (nodes beyond `n` fold onto the last).
    fn shares(self, home: usize, n: usize, mut each: impl FnMut(usize, f64)) {
        match self {
            Target::Node(k) => each(k.min(n - 1), 1.0),
            Target::Interleaved => (0..n).for_each(|k| each(k, 1.0 / n as f64)),
            Target::Shared { node, share_ppm } => {
                let shared = f64::from(share_ppm.min(1_000_000)) * 1e-6;
                let (node, home) = (node.min(n - 1), home.min(n - 1));
                if node == home {
                    each(home, 1.0);
                } else {
                    each(node, shared);
                    each(home, 1.0 - shared);
                }
            }
        }
    }
}

/// One thread's memory behaviour at its current placement.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Stream {
    /// Non-memory time per instruction on its core, SMT sharing included.
    pub compute_ns_per_instr: f64,
    /// Cache-line requests to memory per instruction.
    pub requests_per_instr: f64,
    /// The fraction of its CPU's time it gets (1/q with q tasks sharing).
    pub cpu_share: f64,
    /// The NUMA node of its CPU.
    pub home: usize,
    /// Where its memory lives.
    pub target: Target,
}

/// The machine's memory system.
#[derive(Debug, Clone, PartialEq)]
pub struct MemSystem {
    /// Requests per ns each node's controller serves at most.
    pub node_mu: Vec<f64>,
    /// Requests per ns each link serves at most (one link per node pair).
    pub link_mu: f64,
    /// Unloaded cost of one local request, in ns.
    pub request_ns: f64,
    /// Unloaded remote/local latency ratio for each (home, memory) pair.
    pub remote_ratio: Vec<Vec<f64>>,
    /// The waiting-time law.
    pub contention: Contention,
}

/// The fixed point.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Solution {
    /// Time per instruction of each stream, in ns, contention included.
    pub ns_per_instr: Vec<f64>,
    /// Arrival rate at each queue (controllers first, then links), requests/ns.
    pub lambda: Vec<f64>,
    /// Waiting time at each queue, ns per request.
    pub wait_ns: Vec<f64>,
    /// Which queues are saturated (arrival rate held at capacity).
    pub saturated: Vec<bool>,
    /// Whether the sweeps settled within tolerance.
    pub converged: bool,
    /// Sweeps used.
    pub sweeps: u32,
}

const MAX_SWEEPS: u32 = 200;
const BISECTIONS: u32 = 100;
/// Relative change in any waiting time below which the sweeps stop.
const TOLERANCE: f64 = 1e-7;

impl MemSystem {
    /// Number of nodes.
    pub fn nodes(&self) -> usize {
        self.node_mu.len()
    }

    /// Index of the queue for the link between nodes `a` and `b` (a != b).
    pub fn link_index(&self, a: usize, b: usize) -> usize {
        let n = self.nodes();
        let (lo, hi) = if a < b { (a, b) } else { (b, a) };
        debug_assert!(lo != hi && hi < n);
        // Row-major upper triangle, after the n controllers.
        n + lo * n - lo * (lo + 1) / 2 + (hi - lo - 1)
    }

    /// Queues: one controller per node, then one link per node pair.
    pub fn queue_count(&self) -> usize {
        let n = self.nodes();
        n + n * (n.saturating_sub(1)) / 2
    }

    /// Service rate of queue `q`, requests per ns.
    pub fn mu(&self, q: usize) -> f64 {
        if q < self.nodes() {
            self.node_mu[q]
        } else {
            self.link_mu
        }
    }

    /// Waiting time (beyond service) at queue `q` carrying `lambda`.
    /// Infinite for an M/M/1 queue at or past capacity.
    pub fn wait_at(&self, q: usize, lambda: f64) -> f64 {
        let mu = self.mu(q);
        let u = (lambda / mu).max(0.0);
        match self.contention {
            Contention::MM1 if u >= 1.0 => f64::INFINITY,
            Contention::MM1 => u / (mu * (1.0 - u)),
            Contention::Superlinear { alpha, exponent } => {
                self.request_ns * alpha * pow(u.min(1.0), exponent)
            }
        }
    }

    /// Every stream's route as one flat list of (stream, queue, requests per
    /// instruction through it): one allocation however many streams.
    #[cfg(test)]
    fn routes(&self, streams: &[Stream]) -> Vec<(usize, usize, f64)> {
        let mut out = Vec::new();
        self.routes_into(streams, &mut out);
        out
    }

    /// [`MemSystem::routes`], into `out` (emptied first).
    fn routes_into(&self, streams: &[Stream], out: &mut Vec<(usize, usize, f64)>) {
        let n = self.nodes();
        out.clear();
        out.reserve(streams.len() * 2);
        for (j, s) in streams.iter().enumerate() {
            let mut through = |node: usize, frac: f64| {
                out.push((j, node, s.requests_per_instr * frac));
                if node != s.home {
                    out.push((j, self.link_index(s.home, node), s.requests_per_instr * frac));
                }
            };
            s.target.shares(s.home, n, |k, frac| {
                if frac > 0.0 {
                    through(k, frac)
                }
            });
        }
    }

    /// Unloaded time per instruction of each stream.
    #[cfg(test)]
    fn base_ns(&self, streams: &[Stream]) -> Vec<f64> {
        let mut out = Vec::new();
        self.base_ns_into(streams, &mut out);
        out
    }

    /// [`MemSystem::base_ns`], into `out` (emptied first).
    fn base_ns_into(&self, streams: &[Stream], out: &mut Vec<f64>) {
        let n = self.nodes();
        out.clear();
        out.extend(streams.iter().map(|s| {
            let mut mem = 0.0;
            s.target
                .shares(s.home, n, |k, frac| mem += frac * self.remote_ratio[s.home][k]);
            s.compute_ns_per_instr + s.requests_per_instr * self.request_ns * mem
        }));
    }

    /// The fixed point for `streams`, stream j standing for `weight[j]`
    /// identical streams; the solver's working lists in `scratch`.
    pub(crate) fn solve_weighted(
        &self,
        streams: &[Stream],
        weight: &[f64],
        warm: Option<&Solution>,
        scratch: &mut SolveScratch,
    ) -> Solution {
        let SolveScratch {
            base,
            rate,
            routes,
            queues,
        } = scratch;
        self.base_ns_into(streams, base);
        self.routes_into(streams, routes);
        rate.clear();
        rate.extend(streams.iter().zip(weight).map(|(s, w)| w * s.cpu_share));
        self.solve_routes_with(base, rate, routes, warm, queues)
    }

    /// The fixed point for explicit routes: user j spends `base_ns[j]` plus,
    /// for every `(j, q, a)` in `routes`, `a` times queue q's waiting time
    /// per unit of work, and sends `rate[j] * a / time` requests per ns to
    /// q (`rate` = how many such users it stands for, times their CPU share).
    /// [`MemSystem::solve`] builds routes from streams; S2's program model
    /// (`numa`) builds them from per-node access shares.
    pub fn solve_routes(
        &self,
        base_ns: &[f64],
        rate: &[f64],
        routes: &[(usize, usize, f64)],
        warm: Option<&Solution>,
    ) -> Solution {
        self.solve_routes_with(base_ns, rate, routes, warm, &mut QueueScratch::default())
    }

    /// [`MemSystem::solve_routes`], its working lists in `scratch`: a
    /// caller that solves often keeps them (the simulator re-solves after
    /// every change; made afresh, nine lists a solve were about a
    /// fifteenth of an S1 scenario's instructions).
    fn solve_routes_with(
        &self,
        base_ns: &[f64],
        rate: &[f64],
        routes: &[(usize, usize, f64)],
        warm: Option<&Solution>,
        scratch: &mut QueueScratch,
    ) -> Solution {
        debug_assert_eq!(base_ns.len(), rate.len());
        let nq = self.queue_count();
        let base = base_ns;
        let QueueScratch {
            first,
            next,
            who,
            weight,
            sa,
            r,
        } = scratch;
        // Queue q's users, in route order, are first[q]..first[q + 1] in
        // the columns: the stream (`who`) and the weight of q's waiting
        // time in its ns/instr. One buffer counted out before it is filled
        // (a vector per queue, grown push by push on every solve, spent 8%
        // of a solve's instructions allocating).
        let counts = |j: usize, a: f64| a > 0.0 && rate[j] > 0.0;
        first.clear();
        first.resize(nq + 1, 0);
        for &(j, q, a) in routes {
            if counts(j, a) {
                first[q + 1] += 1;
            }
        }
        for q in 0..nq {
            first[q + 1] += first[q];
        }
        who.clear();
        who.resize(first[nq], 0);
        weight.clear();
        weight.resize(first[nq], 0.0);
        next.clone_from(first);
        for &(j, q, a) in routes {
            if counts(j, a) {
                (who[next[q]], weight[next[q]]) = (j, a);
                next[q] += 1;
            }
        }
        // Each user's rate times its weight, the same in every sweep: made
        // once a solve, not each time a queue's terms are (building them
        // was about a quarter of the solve's own time).
        sa.clear();
        sa.extend(who.iter().zip(weight.iter()).map(|(&j, &a)| rate[j] * a));
        r.clear();
        r.resize(first[nq], 0.0);
        let warm = warm.filter(|w| w.lambda.len() == nq && w.wait_ns.len() == nq);
        let mut lambda: Vec<f64> = match warm {
            Some(w) => w
                .lambda
                .iter()
                .enumerate()
                .map(|(q, &l)| l.clamp(0.0, self.mu(q)))
                .collect(),
            None => vec![0.0; nq],
        };
        let mut wait: Vec<f64> = match warm {
            Some(w) => w
                .wait_ns
                .iter()
                .map(|&x| if x.is_finite() { x.max(0.0) } else { 0.0 })
                .collect(),
            None => vec![0.0; nq],
        };
        let mut saturated = vec![false; nq];
        // t[j] = base[j] + sum over its route of weight * wait.
        let mut t = base.to_vec();
        for &(j, q, a) in routes {
            if a > 0.0 && wait[q].is_finite() {
                t[j] += a * wait[q];
            }
        }
        let mut converged = false;
        let mut sweeps = 0;
        while sweeps < MAX_SWEEPS {
            sweeps += 1;
            let mut change: f64 = 0.0;
            for q in 0..nq {
                let users = first[q]..first[q + 1];
                if users.is_empty() {
                    lambda[q] = 0.0;
                    wait[q] = 0.0;
                    continue;
                }
                // Hold the other queues: t[j] = rest + a * w at this queue.
                let old = if wait[q].is_finite() { wait[q] } else { 0.0 };
                let (who, weight) = (&who[users.clone()], &weight[users.clone()]);
                let r = &mut r[users.clone()];
                for ((r, &j), &a) in r.iter_mut().zip(who).zip(weight) {
                    *r = t[j] - a * old;
                }
                let terms = Terms {
                    sa: &sa[users],
                    r,
                    a: weight,
                };
                let (w, l, sat) = self.solve_queue(q, &terms, lambda[q], old);
                for (&j, &a) in who.iter().zip(weight) {
                    t[j] += a * (w - old);
                }
                change = change.max((w - old).abs() / old.abs().max(self.request_ns));
                wait[q] = w;
                lambda[q] = l;
                saturated[q] = sat;
            }
            if change < TOLERANCE {
                converged = true;
                break;
            }
        }
        Solution {
            ns_per_instr: t,
            lambda,
            wait_ns: wait,
            saturated,
            converged,
            sweeps,
        }
    }

    /// d(wait)/d(lambda) at queue `q`.
    fn wait_slope(&self, q: usize, lambda: f64) -> f64 {
        let mu = self.mu(q);
        match self.contention {
            Contention::MM1 => 1.0 / ((mu - lambda) * (mu - lambda)),
            Contention::Superlinear { alpha, exponent } => {
                let u = (lambda / mu).clamp(0.0, 1.0);
                self.request_ns * alpha * exponent * pow(u, exponent - 1.0) / mu
            }
        }
    }

    /// For one queue whose users spend `rest + a * w` ns per instruction
    /// and send `share * a / (rest + a * w)` requests per ns (`terms` holds
    /// (share * a, rest, a)): the waiting time, arrival rate and saturation
    /// at its fixed point. Newton's method on F(x) = arrivals(wait(x)) - x,
    /// which decreases in x, kept inside a bracket that bisection shrinks
    /// whenever a Newton step would leave it.
    fn solve_queue(&self, q: usize, terms: &Terms, guess: f64, guess_w: f64) -> (f64, f64, bool) {
        let arrivals = |w: f64| terms.flow_and_slope(w).0;
        let mu = self.mu(q);
        let top = mu * (1.0 - 1e-12);
        let w_top = self.wait_at(q, top);
        if w_top.is_finite() && arrivals(w_top) > top {
            // Saturated: raise the wait until the demand fits the capacity.
            // Demand is convex and decreasing in the wait, so a Newton step
            // lands left of the root from either side, and from the left the
            // steps climb to it monotonically. Start from the last solution.
            let mut w = guess_w.max(w_top);
            for _ in 0..BISECTIONS {
                let (demand, slope) = terms.flow_and_slope(w);
                if slope >= 0.0 {
                    break;
                }
                let next = (w + (demand - mu) / -slope).max(w_top);
                let done = (next - w).abs() <= w * 1e-13;
                w = next;
                if done {
                    break;
                }
            }
            return (w, arrivals(w).min(mu), true);
        }
        let (mut lo, mut hi) = (0.0, top);
        let mut x = guess.clamp(0.0, top);
        for _ in 0..BISECTIONS {
            #[cfg(test)]
            tests::STEPS.with(|n| n.set(n.get() + 1));
            let w = self.wait_at(q, x);
            // F and F' in one pass over the users.
            let (flow, df_dw) = terms.flow_and_slope(w);
            let f = flow - x;
            if f > 0.0 {
                lo = x
            } else {
                hi = x
            }
            let slope = df_dw * self.wait_slope(q, x) - 1.0;
            let newton = x - f / slope;
            // A step within the tolerance ends the search where it lands,
            // in the bracket or on its edge. x is always one of the
            // bracket's ends (just set), so a step of an ulp or none (x the
            // fixed point exactly, as a warm start often is: F(x) = 0) was
            // never inside it, and bisection walked away from the root and
            // back for up to some 50 steps: 78% of the iterations in a tenth
            // of the scale bench's `linux` hour, 63% of numa:model's first
            // decision's at 1,024 tasks.
            if newton.is_finite() && (newton - x).abs() <= mu * 1e-14 {
                x = newton;
                break;
            }
            let next = if newton > lo && newton < hi && newton.is_finite() {
                newton
            } else {
                0.5 * (lo + hi)
            };
            if (next - x).abs() <= mu * 1e-14 || hi - lo <= mu * 1e-15 {
                x = next;
                break;
            }
            x = next;
        }
        (self.wait_at(q, x), x, false)
    }
}

/// The lists a solve works in, kept between solves by a caller that
/// solves often ([`crate::StreamClasses`]): the streams' unloaded times,
/// rates and routes, and each queue's users.
#[derive(Debug, Default, Clone)]
pub struct SolveScratch {
    base: Vec<f64>,
    rate: Vec<f64>,
    routes: Vec<(usize, usize, f64)>,
    queues: QueueScratch,
}

/// [`MemSystem::solve_routes_with`]'s lists: where each queue's users start
/// in the columns, a cursor per queue, and the users' columns (as
/// [`Terms`]'s, with the stream each is).
#[derive(Debug, Default, Clone)]
struct QueueScratch {
    first: Vec<usize>,
    next: Vec<usize>,
    who: Vec<usize>,
    weight: Vec<f64>,
    sa: Vec<f64>,
    r: Vec<f64>,
}

/// One queue's users, as columns: user i sends `sa[i] / (r[i] + a[i] * w)`
/// requests per ns when the queue's wait is w.
#[derive(Debug, Clone, Copy)]
struct Terms<'a> {
    sa: &'a [f64],
    r: &'a [f64],
    a: &'a [f64],
}

impl Terms<'_> {
    /// Total flow at wait `w` and its derivative in `w`: the solver's inner
    /// loop. Four explicit lanes let the compiler use vector divisions while
    /// the summation order stays fixed (results are reproducible).
    fn flow_and_slope(&self, w: f64) -> (f64, f64) {
        let (mut flow, mut slope) = ([0.0f64; 4], [0.0f64; 4]);
        let lanes = self
            .sa
            .chunks_exact(4)
            .zip(self.r.chunks_exact(4))
            .zip(self.a.chunks_exact(4));
        for ((sa, r), a) in lanes {
            for k in 0..4 {
                let inv = 1.0 / (r[k] + a[k] * w);
                let f = sa[k] * inv;
                flow[k] += f;
                slope[k] -= f * a[k] * inv;
            }
        }
        let rest = self.sa.len() - self.sa.len() % 4;
        for ((sa, r), a) in self.sa[rest..].iter().zip(&self.r[rest..]).zip(&self.a[rest..]) {
            let inv = 1.0 / (r + a * w);
            let f = sa * inv;
            flow[0] += f;
            slope[0] -= f * a * inv;
        }
        (
            (flow[0] + flow[1]) + (flow[2] + flow[3]),
            (slope[0] + slope[1]) + (slope[2] + slope[3]),
        )
    }
}

/// u^e, exact and fast for the usual whole exponents. The default
/// exponent's powers (2, and 1 in the slope) are written out: `powi` with
/// an exponent known only at run time is a call (`__powidf2`, 2% of a
/// simulated hour), and its square-and-multiply gives exactly `u` and
/// `u * u` for them.
fn pow(u: f64, e: f64) -> f64 {
    if e == e.trunc() && e.abs() < 16.0 {
        match e as i32 {
            1 => u,
            2 => u * u,
            n => u.powi(n),
        }
    } else {
        u.powf(e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The written-out powers are `powi`'s, bit for bit: its exponent
    /// hidden from the optimiser, as `pow`'s is, so that it is the runtime
    /// call (`__powidf2`) and not the same written-out product.
    #[test]
    fn whole_powers_are_powis() {
        let mut u = 1e-9;
        while u < 4.0 {
            for e in [1.0, 2.0] {
                let n = std::hint::black_box(e as i32);
                assert_eq!(pow(u, e).to_bits(), u.powi(n).to_bits(), "{u}^{e}");
            }
            u = u * 1.37 + 1e-7;
        }
    }

    fn one_node(contention: Contention) -> MemSystem {
        MemSystem {
            node_mu: vec![0.4],
            link_mu: 0.25,
            request_ns: 6.4,
            remote_ratio: vec![vec![1.0]],
            contention,
        }
    }

    fn stream(c: f64, r: f64) -> Stream {
        Stream {
            compute_ns_per_instr: c,
            requests_per_instr: r,
            cpu_share: 1.0,
            home: 0,
            target: Target::Node(0),
        }
    }

    /// One memory-bound thread alone on an M/M/1 controller: the fixed point
    /// t = c + r (s + 1/(mu - r/t) - 1/mu) has a closed form (the larger root
    /// of mu t^2 - (2r + A mu) t + A r = 0 with A = c + r s - r/mu).
    #[test]
    fn single_stream_matches_the_closed_form() {
        let sys = one_node(Contention::MM1);
        let (c, r) = (0.5, 0.05);
        let sol = sys.solve(&[stream(c, r)]);
        let mu = 0.4;
        let a = c + r * 6.4 - r / mu;
        let b = 2.0 * r + a * mu;
        let t = (b + (b * b - 4.0 * mu * a * r).sqrt()) / (2.0 * mu);
        assert!(sol.converged);
        assert!(
            (sol.ns_per_instr[0] - t).abs() / t < 1e-9,
            "{} vs {t}",
            sol.ns_per_instr[0]
        );
    }

    #[test]
    fn superlinear_saturates_at_capacity() {
        let sys = one_node(Contention::Superlinear {
            alpha: 3.0,
            exponent: 2.0,
        });
        // 16 streamers each wanting far more than 1/16 of the controller.
        let streams = vec![stream(0.2, 0.1); 16];
        let sol = sys.solve(&streams);
        assert!(sol.saturated[0]);
        assert!((sol.lambda[0] - 0.4).abs() / 0.4 < 1e-6, "{}", sol.lambda[0]);
        let served: f64 = sol.ns_per_instr.iter().map(|t| 0.1 / t).sum();
        assert!((served - 0.4).abs() / 0.4 < 1e-6);
    }

    /// A guess that is the fixed point exactly is the answer, in one step.
    /// Node 0 serves 0.5 requests/ns and waits 16 u^2 ns at utilisation
    /// u; one user sends 2 / (4 + w) requests/ns at wait w. At 0.25/ns,
    /// u = 1/2, w = 4 and the user sends 2 / 8 = 0.25/ns: every value is
    /// exact in binary, so F(0.25) is 0.0. (The solver used to take the
    /// guess for the bracket's top and bisect away from it, returning
    /// 0.2499999999999972.)
    #[test]
    fn an_exact_fixed_point_is_kept() {
        let sys = MemSystem {
            node_mu: vec![0.5],
            link_mu: 0.25,
            request_ns: 4.0,
            remote_ratio: vec![vec![1.0]],
            contention: Contention::Superlinear {
                alpha: 4.0,
                exponent: 2.0,
            },
        };
        let terms = Terms {
            sa: &[2.0],
            r: &[4.0],
            a: &[1.0],
        };
        assert_eq!(terms.flow_and_slope(4.0).0, 0.25, "the example is exact");
        let (w, lambda, saturated) = sys.solve_queue(0, &terms, 0.25, 4.0);
        assert_eq!((w, lambda, saturated), (4.0, 0.25, false));
    }

    thread_local! {
        /// Newton steps taken by `solve_queue` outside saturation, on this
        /// test's thread.
        pub(super) static STEPS: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
    }

    /// Started from its own answer, a queue's solve takes a step or two,
    /// for both contention models and many mixes of users: the answer is
    /// a fixed point to within an ulp, and the step from it is within the
    /// tolerance. (It used to bisect away from such a point and back, up to
    /// some 50 steps, whenever F there was 0 or the step an ulp or none.)
    #[test]
    fn a_converged_guess_ends_the_search_at_once() {
        let mut state = 0x2545_f491_4f6c_dd1du64;
        let mut unit = move || {
            state = state
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            (state >> 11) as f64 / (1u64 << 53) as f64
        };
        let models = [
            Contention::MM1,
            Contention::Superlinear {
                alpha: 3.0,
                exponent: 2.0,
            },
        ];
        let (mut cases, mut worst) = (0, 0);
        for model in models {
            let sys = one_node(model);
            for _ in 0..300 {
                let (mut sa, mut r, mut weight) = (vec![], vec![], vec![]);
                for _ in 0..1 + (unit() * 8.0) as usize {
                    let a = 0.01 + 0.2 * unit();
                    sa.push(a * unit() * 0.5);
                    r.push(0.3 + unit());
                    weight.push(a);
                }
                let terms = Terms {
                    sa: &sa,
                    r: &r,
                    a: &weight,
                };
                let (w, x, saturated) = sys.solve_queue(0, &terms, 0.0, 0.0);
                if saturated {
                    continue;
                }
                STEPS.with(|n| n.set(0));
                let again = sys.solve_queue(0, &terms, x, w);
                let steps = STEPS.with(|n| n.get());
                assert!((again.1 - x).abs() <= 0.4 * 1e-14, "{x} -> {}", again.1);
                worst = worst.max(steps);
                cases += 1;
            }
        }
        assert!(cases > 300, "only {cases} unsaturated cases");
        assert!(worst <= 2, "a converged guess took {worst} steps");
    }

    /// S2's machine: two nodes and a link, M/M/1.
    fn two_nodes() -> MemSystem {
        MemSystem {
            node_mu: vec![0.5, 0.5],
            link_mu: 0.25,
            request_ns: 6.4,
            remote_ratio: vec![vec![1.0, 1.7], vec![1.7, 1.0]],
            contention: Contention::MM1,
        }
    }

    /// S2's shared data: a stream sending 30% of its requests to the shared
    /// data on node 1 and the rest home to node 0 routes and costs exactly
    /// that split; with the shared data at home it is a local stream.
    #[test]
    fn shared_memory_splits_requests_between_the_shared_node_and_home() {
        let sys = two_nodes();
        let mut s = stream(0.4, 0.02);
        s.target = Target::Shared {
            node: 1,
            share_ppm: 300_000,
        };
        let base = sys.base_ns(&[s])[0];
        assert!((base - (0.4 + 0.02 * 6.4 * (0.7 + 0.3 * 1.7))).abs() < 1e-12);
        let routes = sys.routes(&[s]);
        // Home controller 70%, node 1's controller and the link 30% each.
        let through = |q: usize| routes.iter().filter(|r| r.1 == q).map(|r| r.2).sum::<f64>();
        assert!((through(0) - 0.014).abs() < 1e-12 && (through(1) - 0.006).abs() < 1e-12);
        assert!((through(sys.link_index(0, 1)) - 0.006).abs() < 1e-12);
        s.target = Target::Shared {
            node: 0,
            share_ppm: 300_000,
        };
        let mut local = stream(0.4, 0.02);
        local.target = Target::Node(0);
        assert_eq!(sys.solve(&[s]).ns_per_instr, sys.solve(&[local]).ns_per_instr);
    }

    /// Two nodes and a link (S2's machine): Gauss-Seidel agrees with a plain
    /// damped iteration on the arrival rates, computed independently here.
    #[test]
    fn two_node_fixed_point_agrees_with_damped_iteration() {
        let sys = two_nodes();
        let mut streams = Vec::new();
        for i in 0..8 {
            let home = i % 2;
            let target = if i < 4 {
                Target::Node(0)
            } else {
                Target::Interleaved
            };
            streams.push(Stream {
                compute_ns_per_instr: 0.4,
                requests_per_instr: 0.02,
                cpu_share: 1.0,
                home,
                target,
            });
        }
        let sol = sys.solve(&streams);
        assert!(sol.converged);
        // Independent: iterate lambda <- (1-d) lambda + d * arrivals(wait(lambda)).
        let routes = sys.routes(&streams);
        let base = sys.base_ns(&streams);
        let mut lambda = [0.0; 3];
        for _ in 0..20000 {
            let wait: Vec<f64> = (0..3).map(|q| sys.wait_at(q, lambda[q])).collect();
            let mut t = base.clone();
            for &(j, q, a) in &routes {
                t[j] += a * wait[q];
            }
            let mut next = [0.0; 3];
            for &(j, q, a) in &routes {
                next[q] += a / t[j];
            }
            for (l, n) in lambda.iter_mut().zip(next) {
                *l = 0.9 * *l + 0.1 * n;
            }
        }
        for (q, (ours, theirs)) in sol.lambda.iter().zip(lambda).enumerate() {
            assert!((ours - theirs).abs() < 1e-9, "queue {q}: {ours} vs {theirs}");
        }
        assert_eq!(sys.link_index(0, 1), 2);
        assert_eq!(sys.link_index(1, 0), 2);
    }

    #[test]
    fn a_warm_start_reaches_the_same_fixed_point() {
        for contention in [
            Contention::MM1,
            Contention::Superlinear {
                alpha: 3.0,
                exponent: 2.0,
            },
        ] {
            let sys = MemSystem {
                node_mu: vec![0.4, 0.4],
                link_mu: 0.25,
                request_ns: 6.4,
                remote_ratio: vec![vec![1.0, 1.7], vec![1.7, 1.0]],
                contention,
            };
            let streams: Vec<Stream> = (0..12)
                .map(|i| Stream {
                    compute_ns_per_instr: 0.3 + 0.05 * i as f64,
                    requests_per_instr: 0.01 * (1 + i % 4) as f64,
                    cpu_share: if i % 3 == 0 { 0.5 } else { 1.0 },
                    home: i % 2,
                    target: if i % 5 == 0 {
                        Target::Interleaved
                    } else {
                        Target::Node(i % 2)
                    },
                })
                .collect();
            let cold = sys.solve(&streams);
            // Start from a perturbed answer, as after a small change.
            let mut guess = cold.clone();
            guess.lambda.iter_mut().for_each(|l| *l *= 0.7);
            guess.wait_ns.iter_mut().for_each(|w| *w *= 1.3);
            let warm = sys.solve_from(&streams, Some(&guess));
            assert!(cold.converged && warm.converged);
            for (a, b) in cold.ns_per_instr.iter().zip(&warm.ns_per_instr) {
                assert!((a - b).abs() / a < 1e-9, "{a} vs {b}");
            }
        }
    }

    #[test]
    fn no_memory_traffic_means_no_waiting() {
        let sys = one_node(Contention::MM1);
        let sol = sys.solve(&[stream(0.5, 0.0)]);
        assert_eq!(sol.ns_per_instr, vec![0.5]);
    }
}
