//! Baselines: `linux` (no intervention) and OpenMP-style static pinning.

// Task and job ids are small integers the policy looks up for every task
// every period: rustc's Fx hash costs a multiply where SipHash costs ~20 ns.
use rustc_hash::FxHashMap as HashMap;
use smallvec::SmallVec;

use herd_topo::CpuSet;

use crate::param::{Accepts, Entry, Param, Value};
use crate::working::{Working, worked};
use crate::{Plan, Policy, TaskId, View, order};

/// The baseline's name: every comparison is against it.
pub const BASELINE: &str = "linux";

/// Registry entry: `linux`.
pub(crate) const LINUX: Entry = Entry {
    name: BASELINE,
    about: "no intervention: the kernel places every task (the baseline)",
    params: &[],
    build: |_| Box::new(Linux),
    check: None,
};

const PLACES: Param = Param {
    key: "places",
    default: Value::Word("threads"),
    accepts: Accepts::Words(&["threads", "cores"]),
    about: "threads: pin each thread to one hardware thread; cores: to every sibling of its core",
};

const CPUS: Param = Param {
    key: "cpus",
    default: Value::Word("all"),
    accepts: Accepts::Number {
        range: crate::param::Range::whole(1, u64::MAX),
        words: &["all"],
    },
    about: "K: use only the first K places of the order, threads wrapping around them (OpenMP with fewer places than threads)",
};

/// The places a static policy uses: `None` for all.
fn places(a: &crate::param::Args) -> Option<usize> {
    a.number("cpus").map(|k| k as usize)
}

/// Registry entry: `static:compact`.
pub(crate) const STATIC_COMPACT: Entry = Entry {
    name: "static:compact",
    about: "pin each main thread, and other threads once they work, to neighbouring hardware threads, job after job (OpenMP close)",
    params: &[PLACES, CPUS],
    build: |a| Box::new(Static::new(Layout::Compact, a.word("places") == Some("cores")).using(places(a))),
    check: None,
};

/// Registry entry: `static:scatter`.
pub(crate) const STATIC_SCATTER: Entry = Entry {
    name: "static:scatter",
    about: "pin each main thread, and other threads once they work, spread over packages, NUMA nodes and cores (OpenMP spread)",
    params: &[PLACES, CPUS],
    build: |a| Box::new(Static::new(Layout::Scatter, a.word("places") == Some("cores")).using(places(a))),
    check: None,
};

/// `linux`: herd does nothing; the kernel places every task.
///
/// In simulation the simulator's kernel model stands in for Linux (see the
/// `sim` crate's `kernel` module for what it models and leaves out); on a
/// real machine Linux itself decides.
#[derive(Debug, Default)]
pub struct Linux;

impl Policy for Linux {
    /// Its decisions read CPU time, waits, states and heartbeats, never
    /// the counters.
    fn reads_counters(&self, _machine: &herd_topo::Machine) -> bool {
        false
    }
    fn name(&self) -> String {
        BASELINE.into()
    }
    fn reads_snapshot(&self) -> bool {
        false
    }
    fn decide(&mut self, _view: &View<'_>) -> Plan {
        Plan {
            note: Some("no intervention: the kernel places every task".into()),
            ..Plan::default()
        }
    }
}

/// Which static layout.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layout {
    /// Threads on neighbouring hardware threads (OpenMP `close`, S2 compact).
    Compact,
    /// Threads spread over packages, nodes and cores (OpenMP `spread`, S2 scatter).
    Scatter,
}

/// `static:compact` and `static:scatter`: each working thread pinned once,
/// in order.
///
/// Jobs take consecutive stretches of the CPU order, in order of arrival,
/// wrapping around when there are more threads than CPUs. With
/// `places=cores` a thread may use every sibling of its core.
///
/// A job's main thread takes the first place of its stretch when first
/// seen; its other threads take places as they start to work
/// ([`Working`]), each the first place whose CPU none of the job's threads
/// worked on in the last period: an OpenMP team, all working from the
/// start, takes them in rank order, as OpenMP's `close` and `spread` bind
/// it. A process tree is no team: a Python pool's sleeping helper
/// threads, or the shell and `cc` between `make` and each compiler, would
/// otherwise take places by their rank and leave the workers sharing one
/// CPU of two (a Python pool took 1.23x and `make -j2` 1.3x plain Linux's
/// time that way).
#[derive(Debug)]
pub struct Static {
    layout: Layout,
    whole_cores: bool,
    /// How many places of the order to use (`None`: all).
    width: Option<usize>,
    order: Option<Vec<u32>>,
    job_start: HashMap<u32, usize>,
    next_start: usize,
    /// Each placed task's job and place in its job's stretch.
    placed: HashMap<TaskId, (u32, usize)>,
    /// Per job, how many present placed tasks hold each place of its
    /// stretch: inline for jobs of up to 8 places (a vector allocated per
    /// job was 7% of static:scatter's first decision at 256 jobs).
    held: HashMap<u32, SmallVec<[u32; 8]>>,
    working: Working,
    /// Whether a task present last turn was left unplaced (not working
    /// yet): it is looked at again even if the tasks are the same.
    waiting: bool,
    /// The tasks of the last snapshot, in its order: when they are the
    /// same and none waits, every one is placed and there is nothing to do
    /// (a thousand map lookups a turn otherwise).
    last_ids: crate::view::SeenTasks,
}

impl Static {
    /// A static policy with this layout.
    pub fn new(layout: Layout, whole_cores: bool) -> Self {
        Static {
            layout,
            whole_cores,
            width: None,
            order: None,
            job_start: HashMap::default(),
            next_start: 0,
            placed: HashMap::default(),
            held: HashMap::default(),
            working: Working::default(),
            waiting: false,
            last_ids: Default::default(),
        }
    }
}

impl Static {
    /// Makes the CPU order for `m` if there is none yet.
    fn order_for(&mut self, m: &herd_topo::Machine) {
        let (layout, width) = (self.layout, self.width);
        self.order.get_or_insert_with(|| {
            let mut o = match layout {
                Layout::Compact => order::compact(m),
                Layout::Scatter => order::scatter(m),
            };
            o.truncate(width.unwrap_or(usize::MAX).max(1));
            o
        });
    }

    /// Uses only the first `width` places of the order (`None`: all).
    pub fn using(mut self, width: Option<usize>) -> Self {
        self.width = width;
        self
    }
}

impl Policy for Static {
    /// Its decisions read CPU time, waits, states and heartbeats, never
    /// the counters.
    fn reads_counters(&self, _machine: &herd_topo::Machine) -> bool {
        false
    }
    fn name(&self) -> String {
        let base = match self.layout {
            Layout::Compact => "static:compact",
            Layout::Scatter => "static:scatter",
        };
        let mut p = Vec::new();
        if self.whole_cores {
            p.push("places=cores".to_string());
        }
        if let Some(k) = self.width {
            p.push(format!("cpus={k}"));
        }
        if p.is_empty() {
            base.into()
        } else {
            format!("{base}:{}", p.join(","))
        }
    }

    fn prepare(&mut self, machine: &herd_topo::Machine) {
        self.order_for(machine);
    }

    fn decide(&mut self, view: &View<'_>) -> Plan {
        let m = view.machine;
        let layout = self.layout;
        self.order_for(m);
        let order = self.order.as_ref().expect("just made");
        let mut plan = Plan::default();
        let snap = view.snapshot;
        let tasks = &snap.tasks;
        // The tasks new since the last change, and those gone.
        let (mut fresh, mut gone) = (Vec::new(), Vec::new());
        let changed = self.last_ids.changed_noting(snap, |t| fresh.push(t), |id| gone.push(id));
        if !changed && !self.waiting {
            self.working.none_unplaced(snap);
            return plan;
        }
        // Tasks that left free their places (every placed task was in the
        // last list: placed when present, swept when gone).
        let mut swept = false;
        for id in &gone {
            if let Some((job, place)) = self.placed.remove(id) {
                swept = true;
                if let Some(h) = self.held.get_mut(&job) {
                    h[place] -= 1;
                }
            }
        }
        if swept {
            // A job's counts add up to its placed tasks: none left, none held.
            self.held.retain(|_, h| h.iter().any(|&n| n > 0));
        }
        let placed = &self.placed;
        // A program's main thread is pinned from the first look, as
        // `taskset` would start it: it is the program (and an OpenMP
        // team's first member).
        let main = |t: &crate::TaskView| t.rank == 0;
        let mut new = if changed && !self.waiting {
            // The last list's tasks are all placed: the new ones are not
            // (a map look-up per task otherwise).
            self.working.unplaced_among(snap, fresh.into_iter(), main)
        } else {
            self.working.unplaced(snap, |id| placed.contains_key(&id), main)
        };
        self.waiting = new.len() < tasks.len().saturating_sub(self.placed.len());
        if new.is_empty() {
            return plan;
        }
        // A snapshot lists a job's threads in rank order, as the sensors
        // find them: checked, not sorted (a stable sort of a first
        // decision's 1,024 tasks was a tenth of its instructions).
        if !new.is_sorted_by_key(|t| (t.job, t.rank, t.id)) {
            new.sort_by_key(|t| (t.job, t.rank, t.id));
        }
        // The jobs of the new threads (most turns have one), each one's
        // thread count and the CPUs its placed threads worked on over the
        // last period, in one pass over the tasks.
        let mut new_jobs: Vec<u32> = new.iter().map(|t| t.job).collect();
        new_jobs.dedup();
        let mut threads_of = vec![0usize; new_jobs.len()];
        // (the job's index in `new_jobs`, a CPU one of its placed threads
        // worked on): none on a first decision, where a set per job
        // allocated for each of 256 jobs cost pages and instructions.
        let mut worked_on: Vec<(usize, u32)> = Vec::new();
        // Nothing placed yet (a first decision): no thread's place to look up.
        let any_placed = !self.placed.is_empty();
        // A job's tasks come together in a snapshot: its index is searched
        // for once per run of them, not per task.
        let mut last: Option<(u32, Option<usize>)> = None;
        for o in tasks {
            let k = match last {
                Some((job, k)) if job == o.job => k,
                _ => {
                    let k = new_jobs.binary_search(&o.job).ok();
                    last = Some((o.job, k));
                    k
                }
            };
            let Some(k) = k else {
                continue;
            };
            threads_of[k] += 1;
            if any_placed
                && worked(snap, o)
                && let Some(&(job, place)) = self.placed.get(&o.id)
            {
                let start = self.job_start.get(&job).copied().unwrap_or(0);
                worked_on.push((k, order[(start + place) % order.len()]));
            }
        }
        // In job order, as `new_jobs`: each job's run of them is taken below.
        worked_on.sort_unstable_by_key(|&(k, _)| k);
        let mut worked_on = worked_on.as_slice();
        // At once, not grown insert by insert (a first decision places
        // every task).
        self.placed.reserve(new.len());
        self.job_start.reserve(new_jobs.len());
        self.held.reserve(new_jobs.len());
        plan.tasks.reserve(new.len());
        let why = match layout {
            Layout::Compact => "compact: next hardware thread in topology order",
            Layout::Scatter => "scatter: next place spread over packages, nodes and cores",
        };
        // `new` is in job order, as `new_jobs`: each run of a job's new
        // threads is the next job's, its start and held places looked up once.
        for (k, (run, (&job, &threads))) in new
            .chunk_by(|a, b| a.job == b.job)
            .zip(new_jobs.iter().zip(threads_of.iter()))
            .enumerate()
        {
            // The CPUs the job's placed threads worked on (bit sets, not
            // hash sets), and how many: whether every CPU of the order is
            // among them is asked per new thread.
            let mut busy = CpuSet::new();
            let mut busy_n = 0;
            while let Some((&(j, cpu), rest)) = worked_on.split_first()
                && j == k
            {
                busy_n += usize::from(busy.insert(cpu));
                worked_on = rest;
            }
            let start = *self.job_start.entry(job).or_insert_with(|| {
                let s = self.next_start;
                self.next_start += threads;
                s
            });
            let cpu_at = |place: usize| order[(start + place) % order.len()];
            let held = self.held.entry(job).or_insert_with(|| SmallVec::with_capacity(threads));
            for t in run {
                // The first place whose CPU none of the job's threads worked on
                // (a place held by a thread that sleeps, as make does while
                // its compilers work, is not taken from the next worker); with
                // every CPU of the stretch worked on, the first place no
                // present thread holds, wrapping around the stretch as an
                // oversubscribed OpenMP team does.
                // Places `len` apart share a CPU: the first `len` places show
                // every CPU of the order, and once all are worked on none
                // need be looked at.
                let open = if busy_n < order.len() { order.len() } else { 0 };
                let place = (0..open)
                    .find(|&p| !busy.contains(cpu_at(p)))
                    .or_else(|| held.iter().position(|&n| n == 0))
                    .unwrap_or(held.len());
                // Pushed, not resized: `SmallVec::resize` goes element
                // by element through a generic path (as costly as the
                // allocations inline places saved), and a place is one
                // past the last at most times.
                while held.len() <= place {
                    held.push(0);
                }
                held[place] += 1;
                let cpu = cpu_at(place);
                busy_n += usize::from(busy.insert(cpu));
                self.placed.insert(t.id, (job, place));
                let cpus = if self.whole_cores {
                    m.siblings(cpu).cloned().unwrap_or_default()
                } else {
                    CpuSet::single(cpu)
                };
                plan.run(t.id, cpus, why);
            }
        }
        plan
    }
}
