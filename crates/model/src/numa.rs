//! S2's model of multithreaded programs on a NUMA node (Akhmetshin &
//! Yuldashev), generalised from two sockets to N nodes.
//!
//! S2 models each memory controller and the interconnect as an M/M/1 queue.
//! A thread alternates non-memory work and memory accesses; with beta the
//! non-memory time per access and k_q the share of accesses that pass
//! through queue q, one access takes
//!
//! ```text
//!   t = beta + sum_q k_q / (mu_q - lambda_q)          (S2, eq. 5)
//! ```
//!
//! and every thread sends 1/t accesses per unit time, so the arrival rate
//! at q is lambda_q = sum over threads of k_q / t. Co-running programs add
//! their arrivals to the same queues, which is how one program slows
//! another. The program's time is its accesses per thread times t of its
//! slowest threads (threads of a parallel program wait for each other).
//!
//! Generalised to N nodes: each node has a controller queue and each pair
//! of nodes a link queue (`MemSystem`'s queues). A thread on node h sends
//! its accesses to node k with share d_k; an access to another node also
//! passes the link (h, k) and pays the extra unloaded latency that the
//! machine's distance implies (`MemSystem::remote_ratio`), which is how
//! remote accesses are routed by distance. The shares come from the
//! program's placement: a fraction `shared_fraction` of its accesses goes
//! to data shared by all its threads, spread over the nodes its threads run
//! on in proportion to their threads (first touch by a parallel
//! initialisation); the rest is each thread's own data, on its own node.
//! With two nodes, one program scattered evenly and `shared_fraction` = 1
//! gives S2's k_MC1 = k_MC2 = k_QPI = 1/2.
//!
//! The fixed point is `MemSystem::solve_routes`: bounded sweeps, saturation
//! (lambda reaching mu) held at capacity and reported, and a flag when the
//! sweeps did not settle.

use serde::{Deserialize, Serialize};

use crate::memory::MemSystem;
use crate::params::LINE_BYTES;

/// What S2 knows of a program: measured once, or estimated (`cluster`).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Character {
    /// Non-memory time per memory access of one thread, in ns (S2's
    /// beta = t / N): small for memory-bound programs.
    pub beta_ns: f64,
    /// Memory accesses (cache lines) each thread makes in a run.
    pub accesses_per_thread: f64,
    /// Share of accesses to data shared by all the program's threads, in
    /// [0, 1]; the rest goes to each thread's own node.
    pub shared_fraction: f64,
}

/// A program and where its threads run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Placed {
    /// Its characteristics.
    pub character: Character,
    /// Threads on each NUMA node (index = node).
    pub threads_per_node: Vec<u32>,
    /// Where its memory is, as a share per NUMA node (measured: pages per
    /// node from `/proc/PID/numa_maps`, or known in simulation). Empty: the
    /// first-touch rule of `Character::shared_fraction`. Every thread then
    /// sends its accesses to node k with this share, wherever it runs:
    /// moving threads does not move pages.
    #[serde(default)]
    pub memory: Vec<f64>,
}

/// Why a prediction cannot be made.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum NumaError {
    /// A program's placement names more or fewer nodes than the machine has.
    #[error("program {program}: placement gives {given} nodes, the machine has {nodes}")]
    Nodes {
        /// Index of the program.
        program: usize,
        /// Entries in its `threads_per_node`.
        given: usize,
        /// Nodes of the machine.
        nodes: usize,
    },
    /// A program has no threads (or stands for no copies).
    #[error("program {0}: no threads placed")]
    NoThreads(usize),
    /// The copies given are not one count per program.
    #[error("{given} copy counts for {programs} programs")]
    Copies {
        /// Counts given.
        given: usize,
        /// Programs.
        programs: usize,
    },
    /// A memory distribution is not one non-negative share per node with a
    /// positive sum.
    #[error("program {0}: memory shares must be one number >= 0 per NUMA node, not all 0")]
    Memory(usize),
    /// A characteristic is out of range.
    #[error("program {program}: {field} {value} is out of range ({range})")]
    Character {
        /// Index of the program.
        program: usize,
        /// The field.
        field: &'static str,
        /// Its value.
        value: f64,
        /// The allowed range.
        range: &'static str,
    },
}

/// One program's predicted run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProgramPrediction {
    /// Predicted run time with everything else placed, in seconds.
    pub time_s: f64,
    /// Predicted run time alone on the machine with the same placement.
    pub clean_time_s: f64,
    /// `time_s / clean_time_s` (S2's T_cont / T_clean).
    pub slowdown_ratio: f64,
    /// Memory traffic while running, in GB/s.
    pub bw_gbps: f64,
}

/// What the model predicts for a set of co-running programs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Prediction {
    /// Per program, in input order.
    pub programs: Vec<ProgramPrediction>,
    /// Traffic through each node's controller, in GB/s.
    pub node_bw_gbps: Vec<f64>,
    /// Utilisation (lambda / mu) of every queue: controllers, then links.
    pub utilisation: Vec<f64>,
    /// Queues held at capacity (lambda reached mu): their waits are what
    /// it takes to bring demand down to capacity, not an M/M/1 steady state.
    pub saturated: Vec<usize>,
    /// Whether the fixed point settled; when false the numbers are the last
    /// iterate and should not be trusted.
    pub converged: bool,
}

fn check(nodes: usize, programs: &[Placed]) -> Result<(), NumaError> {
    for (i, p) in programs.iter().enumerate() {
        if p.threads_per_node.len() != nodes {
            return Err(NumaError::Nodes {
                program: i,
                given: p.threads_per_node.len(),
                nodes,
            });
        }
        if p.threads_per_node.iter().all(|&t| t == 0) {
            return Err(NumaError::NoThreads(i));
        }
        let c = &p.character;
        let bad = |field, value, range| NumaError::Character {
            program: i,
            field,
            value,
            range,
        };
        if !(c.beta_ns.is_finite() && c.beta_ns >= 0.0) {
            return Err(bad("beta_ns", c.beta_ns, ">= 0"));
        }
        if !(c.accesses_per_thread.is_finite() && c.accesses_per_thread >= 0.0) {
            return Err(bad("accesses_per_thread", c.accesses_per_thread, ">= 0"));
        }
        if !(0.0..=1.0).contains(&c.shared_fraction) {
            return Err(bad("shared_fraction", c.shared_fraction, "0..=1"));
        }
        if !p.memory.is_empty() {
            let sum: f64 = p.memory.iter().sum();
            if p.memory.len() != nodes || p.memory.iter().any(|m| !(m.is_finite() && *m >= 0.0)) || sum <= 0.0
            {
                return Err(NumaError::Memory(i));
            }
        }
    }
    Ok(())
}

/// One solver user per (program, node with its threads).
struct Group {
    program: usize,
    threads: f64,
}

/// Predicts every program's time and slowdown when they run together on
/// the machine `mem` describes.
pub fn predict(mem: &MemSystem, programs: &[Placed]) -> Result<Prediction, NumaError> {
    predict_with(mem, programs, true)
}

/// As [`predict`]; without `clean`, each program's clean time (one more
/// solve per program) is not computed and `clean_time_s` and
/// `slowdown_ratio` are NaN. A node selector comparing many nodes needs
/// only the contended times.
pub fn predict_with(mem: &MemSystem, programs: &[Placed], clean: bool) -> Result<Prediction, NumaError> {
    predict_copies(mem, programs, None, clean)
}

/// As [`predict_with`], where program i stands for `copies[i]` identical
/// programs placed alike (`None`: one each): one solver user per node of
/// each, with that many times the traffic, so a thousand jobs of a few
/// kinds cost a solve of a few users. Each prediction is one copy's. With
/// every count 1 the arithmetic is [`predict_with`]'s exactly.
pub fn predict_copies(
    mem: &MemSystem,
    programs: &[Placed],
    copies: Option<&[u32]>,
    clean: bool,
) -> Result<Prediction, NumaError> {
    let n = mem.nodes();
    check(n, programs)?;
    if let Some(c) = copies {
        if c.len() != programs.len() {
            return Err(NumaError::Copies {
                given: c.len(),
                programs: programs.len(),
            });
        }
        if let Some(i) = c.iter().position(|&k| k == 0) {
            return Err(NumaError::NoThreads(i));
        }
    }
    let (together, groups) = solve(mem, programs, copies);
    let mut out = Vec::with_capacity(programs.len());
    // Each program's groups, in order: `solve` makes them program by
    // program, so one pass finds them all (a search of every group per
    // program made a prediction quadratic in programs).
    let mut first_group = 0;
    for (i, p) in programs.iter().enumerate() {
        let count = groups[first_group..]
            .iter()
            .take_while(|g| g.program == i)
            .count();
        let mine = first_group..first_group + count;
        first_group += count;
        let time_s = program_time_s(p, &together.ns_per_instr[mine.clone()]);
        let clean_time_s = if clean {
            let (alone, _) = solve(mem, std::slice::from_ref(p), None);
            program_time_s(p, &alone.ns_per_instr)
        } else {
            f64::NAN
        };
        let accesses_per_ns: f64 = groups[mine.clone()]
            .iter()
            .zip(&together.ns_per_instr[mine])
            .map(|(g, t)| g.threads / t)
            .sum();
        out.push(ProgramPrediction {
            time_s,
            clean_time_s,
            slowdown_ratio: if clean_time_s > 0.0 {
                time_s / clean_time_s
            } else {
                1.0
            },
            bw_gbps: accesses_per_ns * LINE_BYTES,
        });
    }
    let queues = mem.queue_count();
    Ok(Prediction {
        programs: out,
        node_bw_gbps: together.lambda[..n].iter().map(|l| l * LINE_BYTES).collect(),
        utilisation: (0..queues).map(|q| together.lambda[q] / mem.mu(q)).collect(),
        saturated: (0..queues).filter(|&q| together.saturated[q]).collect(),
        converged: together.converged,
    })
}

/// What threads placed as `threads_per_node` draw from an otherwise idle
/// machine with no work between accesses (beta = 0): the most any program
/// so placed can draw, in GB/s. A traffic figure must stay below it.
pub fn max_bw_gbps(
    mem: &MemSystem,
    threads_per_node: &[u32],
    memory: &[f64],
    shared_fraction: f64,
) -> Result<f64, NumaError> {
    let p = Placed {
        character: Character {
            beta_ns: 0.0,
            accesses_per_thread: 1.0,
            shared_fraction,
        },
        threads_per_node: threads_per_node.to_vec(),
        memory: memory.to_vec(),
    };
    Ok(predict_with(mem, &[p], false)?.programs[0].bw_gbps)
}

/// The share of [`max_bw_gbps`] a figure from elsewhere (a profile from a
/// larger machine, a hint) is held to, so [`from_alone`] can meet it.
pub const DRAWABLE_SHARE: f64 = 0.95;

/// S2's characteristics of a program that, placed as `threads_per_node` on
/// an empty machine, runs `solo_time_s` and draws `bw_gbps`: what one can
/// measure (time, and traffic from counters or a bandwidth monitor) turned
/// into what the model needs. beta by bisection (traffic falls as beta
/// grows), then the accesses that make the time come out. The error says
/// why the figures cannot be met.
pub fn from_alone(
    mem: &MemSystem,
    threads_per_node: &[u32],
    solo_time_s: f64,
    bw_gbps: f64,
    shared_fraction: f64,
) -> Result<Character, String> {
    from_alone_in(mem, threads_per_node, &[], solo_time_s, bw_gbps, shared_fraction)
}

/// [`from_alone`] for a program whose memory is distributed as `memory`
/// (see [`Placed::memory`]; empty: first touch).
pub fn from_alone_in(
    mem: &MemSystem,
    threads_per_node: &[u32],
    memory: &[f64],
    solo_time_s: f64,
    bw_gbps: f64,
    shared_fraction: f64,
) -> Result<Character, String> {
    let threads: u32 = threads_per_node.iter().sum();
    if !(bw_gbps.is_finite() && bw_gbps > 0.0 && solo_time_s.is_finite() && solo_time_s > 0.0) {
        return Err(format!(
            "time alone ({solo_time_s} s) and traffic alone ({bw_gbps} GB/s) must be positive"
        ));
    }
    let alone = |beta_ns: f64| {
        let p = Placed {
            character: Character {
                beta_ns,
                accesses_per_thread: 1.0,
                shared_fraction,
            },
            threads_per_node: threads_per_node.to_vec(),
            memory: memory.to_vec(),
        };
        predict_with(mem, &[p], false)
            .map(|pr| pr.programs[0].clone())
            .map_err(|e| e.to_string())
    };
    let most = max_bw_gbps(mem, threads_per_node, memory, shared_fraction).map_err(|e| e.to_string())?;
    if bw_gbps >= most {
        return Err(format!(
            "{bw_gbps} GB/s is more than {threads} threads can draw from this node's memory ({most:.1} GB/s at most)"
        ));
    }
    // Bisection on log(beta): 64 halvings of ln(1e15) = 34.5 leave an
    // interval of 2e-18, below what f64 can tell apart near the root.
    let (mut lo, mut hi) = (1e-6f64.ln(), 1e9f64.ln());
    for _ in 0..64 {
        let mid = 0.5 * (lo + hi);
        if alone(mid.exp())?.bw_gbps > bw_gbps {
            lo = mid
        } else {
            hi = mid
        }
    }
    let beta_ns = (0.5 * (lo + hi)).exp();
    let per_access_s = alone(beta_ns)?.time_s;
    Ok(Character {
        beta_ns,
        accesses_per_thread: solo_time_s / per_access_s,
        shared_fraction,
    })
}

/// Time of a program's slowest thread group, in seconds, from its groups'
/// ns per access.
fn program_time_s(p: &Placed, ns_per_access: &[f64]) -> f64 {
    let slowest = ns_per_access.iter().copied().fold(0.0, f64::max);
    p.character.accesses_per_thread * slowest * 1e-9
}

/// Builds routes (S2's shares per queue) and solves.
/// `copies[i]` multiplies program i's users' traffic (see
/// [`predict_copies`]).
fn solve(
    mem: &MemSystem,
    programs: &[Placed],
    copies: Option<&[u32]>,
) -> (crate::memory::Solution, Vec<Group>) {
    let n = mem.nodes();
    // Sized once: a group per program and node it has threads on, at most
    // two routes (controller and link) per group and node. Grown push by
    // push, these were a thirtieth of a cluster simulation's instructions
    // (`herd sim scenarios/cluster-1000.toml`).
    let count: usize = programs
        .iter()
        .map(|p| p.threads_per_node.iter().filter(|&&t| t > 0).count())
        .sum();
    let (mut base, mut rate, mut groups) = (
        Vec::with_capacity(count),
        Vec::with_capacity(count),
        Vec::with_capacity(count),
    );
    let mut routes = Vec::with_capacity(count * n * 2);
    for (i, p) in programs.iter().enumerate() {
        // 1.0 leaves each rate exactly as without copies.
        let times = copies.map_or(1.0, |c| f64::from(c[i]));
        let total: f64 = p.threads_per_node.iter().map(|&t| f64::from(t)).sum();
        let s = p.character.shared_fraction;
        for (h, &t) in p.threads_per_node.iter().enumerate() {
            if t == 0 {
                continue;
            }
            let j = groups.len();
            let mut b = p.character.beta_ns;
            let measured: f64 = p.memory.iter().sum();
            for (k, &tk) in p.threads_per_node.iter().enumerate() {
                // Share of this thread's accesses that go to node k: where
                // the memory is when known, else first touch.
                let d = if measured > 0.0 {
                    p.memory[k] / measured
                } else {
                    s * f64::from(tk) / total + if k == h { 1.0 - s } else { 0.0 }
                };
                if d <= 0.0 {
                    continue;
                }
                // Service at the controller (S2's sojourn is 1/(mu - lambda):
                // service plus wait; the solver adds the wait).
                b += d / mem.mu(k);
                routes.push((j, k, d));
                if k != h {
                    let link = mem.link_index(h, k);
                    b += d * (1.0 / mem.mu(link) + mem.request_ns * (mem.remote_ratio[h][k] - 1.0));
                    routes.push((j, link, d));
                }
            }
            debug_assert!(n == p.threads_per_node.len());
            base.push(b);
            rate.push(f64::from(t) * times);
            groups.push(Group {
                program: i,
                threads: f64::from(t),
            });
        }
    }
    (mem.solve_routes(&base, &rate, &routes, None), groups)
}

/// Thread counts per node for `threads` threads placed compactly: nodes
/// filled one after another, nearest to `first` first (by the machine's
/// distances), each up to its free CPUs. `None` when they do not fit.
pub fn compact(threads: u32, free: &[u32], first: usize, distances: &[Vec<f64>]) -> Option<Vec<u32>> {
    let mut order: Vec<usize> = (0..free.len()).collect();
    order.sort_by(|&a, &b| {
        let d = |k: usize| {
            distances
                .get(first)
                .and_then(|r| r.get(k))
                .copied()
                .unwrap_or(0.0)
        };
        d(a).total_cmp(&d(b))
            .then((a != first).cmp(&(b != first)))
            .then(a.cmp(&b))
    });
    let mut left = threads;
    let mut out = vec![0; free.len()];
    for k in order {
        let take = left.min(free[k]);
        out[k] = take;
        left -= take;
    }
    (left == 0).then_some(out)
}

/// Thread counts per node for `threads` threads scattered: round-robin over
/// the nodes that have free CPUs, as evenly as they allow. `None` when they
/// do not fit.
pub fn scatter(threads: u32, free: &[u32]) -> Option<Vec<u32>> {
    if threads > free.iter().sum() {
        return None;
    }
    let mut out = vec![0; free.len()];
    let mut left = threads;
    // At most `threads` rounds, each placing at least one thread.
    while left > 0 {
        for (k, f) in free.iter().enumerate() {
            if left > 0 && out[k] < *f {
                out[k] += 1;
                left -= 1;
            }
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memory::Contention;

    /// S2's node: two controllers of mu and a QPI link of mu_q.
    fn s2_node(mu: f64, mu_q: f64) -> MemSystem {
        MemSystem {
            node_mu: vec![mu, mu],
            link_mu: mu_q,
            request_ns: 6.4,
            remote_ratio: vec![vec![1.0, 1.0], vec![1.0, 1.0]],
            contention: Contention::MM1,
        }
    }

    fn program(beta_ns: f64, shared: f64, placement: Vec<u32>) -> Placed {
        Placed {
            character: Character {
                beta_ns,
                accesses_per_thread: 1e9,
                shared_fraction: shared,
            },
            threads_per_node: placement,
            memory: Vec::new(),
        }
    }

    /// A program standing for two copies predicts what the two programs
    /// predict side by side (to the solver's tolerance); with every count
    /// 1 the arithmetic is the plain prediction's, bit for bit; bad counts
    /// are refused.
    #[test]
    fn copies_predict_what_the_programs_do_side_by_side() {
        let mem = s2_node(0.5, 0.2);
        let a = program(2.0, 0.5, vec![2, 1]);
        let b = program(9.0, 0.0, vec![0, 3]);
        let apart = predict_with(&mem, &[a.clone(), a.clone(), b.clone(), a.clone()], false).unwrap();
        let kinds = predict_copies(&mem, &[a.clone(), b.clone()], Some(&[3, 1]), false).unwrap();
        for (k, i) in [(0, 0), (0, 1), (0, 3), (1, 2)] {
            let (x, y) = (kinds.programs[k].time_s, apart.programs[i].time_s);
            assert!((x - y).abs() <= 1e-6 * y, "kind {k} {x} against program {i} {y}");
            let (x, y) = (kinds.programs[k].bw_gbps, apart.programs[i].bw_gbps);
            assert!(
                (x - y).abs() <= 1e-6 * y,
                "kind {k} {x} GB/s against program {i} {y}"
            );
        }
        for (x, y) in kinds.node_bw_gbps.iter().zip(&apart.node_bw_gbps) {
            assert!((x - y).abs() <= 1e-6 * y, "node {x} GB/s against {y}");
        }
        let ones = predict_copies(&mem, &[a.clone(), b.clone()], Some(&[1, 1]), false).unwrap();
        let plain = predict_with(&mem, &[a.clone(), b.clone()], false).unwrap();
        for (x, y) in ones.programs.iter().zip(&plain.programs) {
            assert_eq!(x.time_s.to_bits(), y.time_s.to_bits());
        }
        assert_eq!(
            predict_copies(&mem, &[a.clone(), b.clone()], Some(&[1]), false).unwrap_err(),
            NumaError::Copies {
                given: 1,
                programs: 2
            }
        );
        assert_eq!(
            predict_copies(&mem, &[a, b], Some(&[1, 0]), false).unwrap_err(),
            NumaError::NoThreads(1)
        );
    }

    /// S2's equation (5) in its own form, solved independently: for one
    /// program of n threads with shares k per queue, the time per access t
    /// satisfies t = beta + sum k_q / (mu_q - n k_q / t). The right side
    /// falls as t grows, so t - rhs(t) rises and bisection finds the root.
    fn s2_eq5(beta: f64, n: f64, k: &[f64], mu: &[f64]) -> f64 {
        let f = |t: f64| {
            let mut rhs = beta;
            for (kq, mq) in k.iter().zip(mu) {
                let lam = n * kq / t;
                if lam >= *mq {
                    return f64::NEG_INFINITY; // t too small: a queue overflows
                }
                rhs += kq / (mq - lam);
            }
            t - rhs
        };
        let (mut lo, mut hi) = (1e-6, 1e9);
        for _ in 0..400 {
            let mid = 0.5 * (lo + hi);
            if f(mid) < 0.0 { lo = mid } else { hi = mid }
        }
        0.5 * (lo + hi)
    }

    #[test]
    fn one_scattered_program_matches_s2_equation_5() {
        let (mu, mu_q) = (0.4, 0.25);
        let mem = s2_node(mu, mu_q);
        // 8 threads, 4 per socket; shared_fraction 1: half of every thread's
        // accesses are remote, so k_MC1 = k_MC2 = k_QPI = 1/2 (per thread,
        // and the link carries both directions' remote halves).
        for beta in [2.0, 10.0, 40.0] {
            let p = program(beta, 1.0, vec![4, 4]);
            let pred = predict(&mem, std::slice::from_ref(&p)).unwrap();
            assert!(pred.converged);
            let t = s2_eq5(beta, 8.0, &[0.5, 0.5, 0.5], &[mu, mu, mu_q]);
            // 1e9 accesses per thread: seconds equal ns per access.
            let ours = pred.programs[0].time_s;
            assert!((ours - t).abs() / t < 1e-7, "beta {beta}: {ours} vs {t}");
            assert!(
                (pred.programs[0].slowdown_ratio - 1.0).abs() < 1e-12,
                "alone: no slowdown"
            );
        }
    }

    #[test]
    fn compact_on_one_node_matches_the_m_m_1_closed_form() {
        // All on node 0, all local: t = beta + 1/(mu - n/t), a quadratic:
        // t^2 mu - t (n + beta mu + 1) + beta n = 0, larger root.
        let mu = 0.4;
        let mem = s2_node(mu, 0.25);
        let (beta, n) = (30.0, 8.0);
        let pred = predict(&mem, &[program(beta, 0.5, vec![8, 0])]).unwrap();
        let b = n + beta * mu + 1.0;
        let t = (b + (b * b - 4.0 * mu * beta * n).sqrt()) / (2.0 * mu);
        let ours = pred.programs[0].time_s; // 1e9 accesses: seconds = ns per access
        assert!((ours - t).abs() / t < 1e-7, "{ours} vs {t}");
        assert!(pred.utilisation[1] == 0.0 && pred.utilisation[2] == 0.0);
    }

    #[test]
    fn a_co_runner_slows_a_program_down_and_saturation_is_reported() {
        let mem = s2_node(0.4, 0.25);
        let heavy = program(2.0, 0.5, vec![4, 4]);
        let light = program(200.0, 0.5, vec![4, 4]);
        let both = predict(&mem, &[heavy.clone(), light.clone()]).unwrap();
        assert!(both.converged);
        assert!(both.programs[1].slowdown_ratio > 1.0);
        assert!(both.programs[0].slowdown_ratio > 1.0);
        // Two heavy programs. Every thread waits for its access, so under
        // M/M/1 the queues approach capacity but never reach it: a longer
        // wait lowers the arrival rate.
        let heavy = [program(0.1, 0.0, vec![8, 8]), program(0.1, 0.0, vec![8, 8])];
        let two = predict(&mem, &heavy).unwrap();
        assert!(two.converged && two.saturated.is_empty(), "{two:?}");
        assert!(
            two.utilisation[..2].iter().all(|&u| u > 0.9 && u < 1.0),
            "{two:?}"
        );
        // A bounded waiting law (S1's) can be overrun: the solver holds the
        // queues at capacity and says so.
        let mut bounded = mem.clone();
        bounded.contention = Contention::Superlinear {
            alpha: 3.0,
            exponent: 2.0,
        };
        let two = predict(&bounded, &heavy).unwrap();
        assert!(
            two.saturated.contains(&0) && two.saturated.contains(&1),
            "{two:?}"
        );
        for u in &two.utilisation[..2] {
            assert!((u - 1.0).abs() < 1e-6, "held at capacity: {u}");
        }
        assert!(two.programs.iter().all(|p| p.time_s.is_finite()));
    }

    #[test]
    fn scatter_beats_compact_when_one_controller_would_saturate() {
        let mem = s2_node(0.4, 0.25);
        let c = |placement| predict(&mem, &[program(5.0, 0.2, placement)]).unwrap().programs[0].time_s;
        assert!(c(vec![4, 4]) < c(vec![8, 0]));
        // A compute-bound program barely cares.
        let light = |placement| {
            predict(&mem, &[program(2000.0, 0.2, placement)])
                .unwrap()
                .programs[0]
                .time_s
        };
        assert!((light(vec![4, 4]) / light(vec![8, 0]) - 1.0).abs() < 0.01);
    }

    #[test]
    fn bad_input_is_a_typed_error() {
        let mem = s2_node(0.4, 0.25);
        assert!(matches!(
            predict(&mem, &[program(1.0, 0.5, vec![1])]),
            Err(NumaError::Nodes { .. })
        ));
        assert!(matches!(
            predict(&mem, &[program(1.0, 0.5, vec![0, 0])]),
            Err(NumaError::NoThreads(0))
        ));
        assert!(matches!(
            predict(&mem, &[program(f64::NAN, 0.5, vec![1, 0])]),
            Err(NumaError::Character { field: "beta_ns", .. })
        ));
        assert!(matches!(
            predict(&mem, &[program(1.0, 1.5, vec![1, 0])]),
            Err(NumaError::Character {
                field: "shared_fraction",
                ..
            })
        ));
    }

    #[test]
    fn characteristics_from_time_and_traffic_alone_give_them_back() {
        let mem = s2_node(0.6, 0.4);
        let c = from_alone(&mem, &[4, 4], 300.0, 12.0, 0.5).unwrap();
        let pred = predict(&mem, &[program(c.beta_ns, 0.5, vec![4, 4])]).unwrap();
        let p = &pred.programs[0];
        assert!((p.bw_gbps / 12.0 - 1.0).abs() < 1e-9, "{}", p.bw_gbps);
        let t = p.time_s / 1e9 * c.accesses_per_thread;
        assert!((t / 300.0 - 1.0).abs() < 1e-9, "{t}");
        let too_much = from_alone(&mem, &[1, 0], 300.0, 500.0, 0.5).unwrap_err();
        assert!(too_much.contains("GB/s at most"), "{too_much}");
        assert!(from_alone(&mem, &[1, 0], 0.0, 1.0, 0.5).is_err());
    }

    #[test]
    fn measured_memory_routes_accesses_wherever_the_threads_run() {
        let mem = s2_node(0.4, 0.25);
        let on_node0 = |placement: Vec<u32>| {
            let mut p = program(5.0, 0.5, placement);
            p.memory = vec![1.0, 0.0];
            predict(&mem, &[p]).unwrap()
        };
        // All memory on node 0: compact there is local, scatter sends half
        // the threads across the link; node 1's controller stays idle.
        let (compact, scatter) = (on_node0(vec![8, 0]), on_node0(vec![4, 4]));
        assert_eq!(compact.utilisation[1], 0.0);
        assert_eq!(scatter.utilisation[1], 0.0);
        assert!(scatter.utilisation[2] > 0.0 && compact.utilisation[2] == 0.0);
        assert!(compact.programs[0].time_s < scatter.programs[0].time_s);
        let mut bad = program(5.0, 0.5, vec![4, 4]);
        bad.memory = vec![0.0, 0.0];
        assert_eq!(predict(&mem, &[bad]), Err(NumaError::Memory(0)));
    }

    #[test]
    fn compact_and_scatter_layouts() {
        let d = vec![
            vec![10.0, 21.0, 31.0],
            vec![21.0, 10.0, 21.0],
            vec![31.0, 21.0, 10.0],
        ];
        assert_eq!(compact(6, &[4, 4, 4], 2, &d), Some(vec![0, 2, 4]));
        assert_eq!(compact(6, &[4, 4, 4], 0, &d), Some(vec![4, 2, 0]));
        assert_eq!(compact(13, &[4, 4, 4], 0, &d), None);
        assert_eq!(scatter(7, &[4, 1, 4]), Some(vec![3, 1, 3]));
        assert_eq!(scatter(10, &[4, 1, 4]), None);
    }
}
