//! S0's SMT- and energy-aware placement: `smt:speed` (policy 1, speedup
//! first) and `smt:spn` (policy 2, SPN first).
//!
//! Both hand out *units* (hardware threads) in an order computed from the
//! topology ([`order::speed_first`], [`order::spn_first`]) and pin each
//! thread to one unit for its life. With several programs each gets a
//! consistent set: a program's next thread takes the unit after its last
//! one when that is free, and a program's first thread opens a core nobody
//! uses, so programs do not interleave on cores while free cores remain.
//! A program's new thread first takes a unit that only its own idle
//! threads hold: a main thread placed before its workers existed, now
//! asleep in join, would otherwise keep the first sibling of a core to
//! itself and push smt:spn's two workers onto two cores (seen on an
//! emulated 2s2c2t guest whose first turn came before the workers). When
//! one of the program's placed threads is asleep but worked over the
//! period (a main thread that has just started its workers, or a barrier
//! worker between phases), its new threads wait one period to see which.

use rustc_hash::FxHashMap as HashMap;

use herd_topo::{CpuSet, Machine};

use crate::param::Entry;
use crate::working::{Working, worked};
use crate::{JobId, Plan, Policy, Reason, TaskId, TaskState, View, order};

/// Registry entry: `smt:speed`.
pub(crate) const SMT_SPEED: Entry = Entry {
    name: "smt:speed",
    about: "S0 policy 1, speedup first: full cores spread over packages before any SMT sibling (Linux's order)",
    params: &[],
    build: |_| Box::new(SmtPlace::new(SmtGoal::Speed)),
    check: None,
};

/// Registry entry: `smt:spn`.
pub(crate) const SMT_SPN: Entry = Entry {
    name: "smt:spn",
    about: "S0 policy 2, SPN first: both siblings of a core, then the next core, then a new package",
    params: &[],
    build: |_| Box::new(SmtPlace::new(SmtGoal::Spn)),
    check: None,
};

/// Which of S0's two orders.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SmtGoal {
    /// Policy 1: strongest units first (full cores spread out, siblings last).
    Speed,
    /// Policy 2: most speedup per watt per physical core (fill cores and
    /// packages before opening new ones).
    Spn,
}

/// `smt:speed` and `smt:spn`.
#[derive(Debug)]
pub struct SmtPlace {
    goal: SmtGoal,
    /// The unit order, and for each unit how many present tasks use it.
    order: Vec<u32>,
    unit_of: HashMap<u32, usize>,
    /// Each unit's core's units (itself among them; none for a CPU the
    /// machine does not know), found once: whether a core is free is asked
    /// for every new task.
    core_units: Vec<Option<Vec<usize>>>,
    load: Loads,
    /// Each unit's reason, for the plans (written once: formatting one per
    /// task was half of a first decision at a thousand tasks).
    why: Vec<Reason>,
    /// Each placed task's unit (index into `order`) and job.
    placed: HashMap<TaskId, (usize, JobId)>,
    /// How many of each job's tasks are placed (jobs with none left out).
    placed_of: HashMap<JobId, u32>,
    /// Each job's most recently given unit.
    last_unit: HashMap<JobId, usize>,
    /// Which unplaced tasks work.
    working: Working,
    note: Option<String>,
    /// The tasks of the last snapshot, and whether one of them was left
    /// unplaced (not working yet): with the same tasks and none waiting,
    /// every one has its unit and there is nothing to do (two passes of
    /// map look-ups over every task a turn otherwise).
    last_ids: crate::view::SeenTasks,
    waiting: bool,
    /// The jobs whose new threads waited a period at the last decision
    /// (sorted): they wait no longer.
    held_back: Vec<JobId>,
}

impl SmtPlace {
    /// The policy for `goal`.
    pub fn new(goal: SmtGoal) -> Self {
        SmtPlace {
            goal,
            order: Vec::new(),
            unit_of: HashMap::default(),
            core_units: Vec::new(),
            load: Loads::default(),
            why: Vec::new(),
            placed: HashMap::default(),
            placed_of: HashMap::default(),
            last_unit: HashMap::default(),
            working: Working::default(),
            note: None,
            last_ids: Default::default(),
            waiting: false,
            held_back: Vec::new(),
        }
    }

    fn setup(&mut self, m: &Machine) {
        self.order = match self.goal {
            SmtGoal::Speed => order::speed_first(m),
            SmtGoal::Spn => order::spn_first(m),
        };
        self.unit_of = self.order.iter().enumerate().map(|(u, &c)| (c, u)).collect();
        self.core_units = (self.order.iter())
            .map(|&cpu| {
                let sib = m.siblings(cpu)?.iter();
                Some(sib.filter_map(|c| self.unit_of.get(&c).copied()).collect())
            })
            .collect();
        self.load = Loads::new(self.order.len());
        let units = self.order.len();
        let mut text = String::with_capacity(96);
        self.why = (self.order.iter().enumerate())
            .map(|(u, &cpu)| unit_reason(m, u, units, cpu, &mut text))
            .collect();
        self.note = Some(explain_orders(m, self.goal, &self.order));
    }

    /// The unit for a new task of a job whose last unit is `last` (none:
    /// a job not placed before). `whole_from`: no unit before it has a
    /// wholly free core; each new task only fills units, so within one
    /// decision the search for a free core goes on from where the last
    /// stopped (from the start, every job after the cores' first threads
    /// were taken scanned every free sibling: a fifth of smt:speed's first
    /// decision at 1,024 tasks).
    /// `idle`: the units the job's threads hold that did not work over the
    /// last period, in order, each with how many of them (job, unit,
    /// count): such a unit is the job's to reuse while nobody else holds it.
    fn pick(&self, last: Option<usize>, idle: &[(JobId, usize, u32)], whole_from: &mut usize) -> usize {
        if let Some(&(_, u, _)) = idle.iter().find(|&&(_, u, n)| self.load.of(u) == n) {
            return u;
        }
        let free = |u: usize| self.load.of(u) == 0;
        // The unit after the job's last, keeping the job's units together.
        if let Some(u) = last {
            if u + 1 < self.order.len() && free(u + 1) {
                return u + 1;
            }
        }
        let core_free = |u: usize| self.core_units[u].as_ref().is_some_and(|units| units.iter().all(|&v| free(v)));
        // The free units in order, then (oversubscribed) the least-used,
        // earliest in the order: the first of the loads' order.
        if last.is_none() {
            match self.load.free_from(*whole_from).find(|&u| core_free(u)) {
                Some(u) => {
                    *whole_from = u;
                    return u;
                }
                None => *whole_from = self.order.len(),
            }
        }
        self.load.least().unwrap_or(0)
    }
}

/// How many present tasks use each unit, and for each load the units
/// that have it, as bits in unit order: the free units in order and the
/// least-used unit come from the first words of the lowest levels, found
/// in a few steps instead of a search of every unit for each new task (384
/// units a task at 1,024 tasks on 384 CPUs); a change moves one bit (an
/// ordered set of (load, unit) was a sixth of a first decision there).
#[derive(Debug, Default)]
struct Loads {
    load: Vec<u32>,
    levels: Vec<Vec<u64>>,
}

impl Loads {
    /// `n` units, none used.
    fn new(n: usize) -> Self {
        let mut free = vec![u64::MAX; n.div_ceil(64)];
        if n % 64 != 0
            && let Some(last) = free.last_mut()
        {
            *last = (1u64 << (n % 64)) - 1;
        }
        Loads {
            load: vec![0; n],
            levels: vec![free],
        }
    }

    fn of(&self, u: usize) -> u32 {
        self.load[u]
    }

    /// One more (`delta` 1) or one fewer (-1) task on unit `u`.
    fn add(&mut self, u: usize, delta: i32) {
        let was = self.load[u];
        let now = was.saturating_add_signed(delta);
        let (w, bit) = (u / 64, 1u64 << (u % 64));
        self.levels[was as usize][w] &= !bit;
        while self.levels.len() <= now as usize {
            self.levels.push(vec![0; self.load.len().div_ceil(64)]);
        }
        self.levels[now as usize][w] |= bit;
        self.load[u] = now;
    }

    /// The unused units from `start` on, in order.
    fn free_from(&self, start: usize) -> impl Iterator<Item = usize> + '_ {
        self.levels.first().into_iter().flat_map(move |words| units_in(words, start))
    }

    /// The least-used unit, earliest in the order among equals.
    fn least(&self) -> Option<usize> {
        self.levels.iter().find_map(|words| units_in(words, 0).next())
    }
}

/// The units whose bits are set in `words`, in order, from `start` on.
fn units_in(words: &[u64], start: usize) -> impl Iterator<Item = usize> + '_ {
    let skip = (start / 64).min(words.len());
    // The bits below `start` in its word, cleared.
    let low = !0u64 << (start % 64);
    words[skip..].iter().enumerate().flat_map(move |(i, &word)| {
        let mut rest = if i == 0 { word & low } else { word };
        std::iter::from_fn(move || {
            (rest != 0).then(|| {
                let bit = rest.trailing_zeros() as usize;
                rest &= rest - 1;
                (skip + i) * 64 + bit
            })
        })
    })
}

/// Unit `u`'s reason: "unit {u + 1} of {units}: CPU {cpu}, {a shared
/// sibling | the full-resource thread} of core {core} in package
/// {package}", written piece by piece into `text` (cleared first; one
/// buffer for every unit) and shared from there (`format!` of each unit's
/// was 40% of smt:\*'s meeting the machine at 384 CPUs, its allocations
/// much of the rest).
fn unit_reason(m: &Machine, u: usize, units: usize, cpu: u32, text: &mut String) -> Reason {
    let shared = m.siblings(cpu).is_some_and(|s| s.iter().next() != Some(cpu));
    let (core, package) = m.cpu(cpu).map_or((0, 0), |c| (c.core, c.package));
    let mut n = itoa::Buffer::new();
    text.clear();
    text.push_str("unit ");
    text.push_str(n.format(u + 1));
    text.push_str(" of ");
    text.push_str(n.format(units));
    text.push_str(": CPU ");
    text.push_str(n.format(cpu));
    text.push_str(if shared {
        ", a shared sibling of core "
    } else {
        ", the full-resource thread of core "
    });
    text.push_str(n.format(core));
    text.push_str(" in package ");
    text.push_str(n.format(package));
    Reason::Shared(std::sync::Arc::from(text.as_str()))
}

/// Why the two orders differ on `m`, or why they coincide: what `--explain`
/// prints once.
/// (`order`: `goal`'s own order, made already: only the other one is made
/// here, to compare.)
fn explain_orders(m: &Machine, goal: SmtGoal, order: &[u32]) -> String {
    let (this, what) = match goal {
        SmtGoal::Speed => (
            "smt:speed",
            "strongest units first: full cores spread over packages, siblings last",
        ),
        SmtGoal::Spn => (
            "smt:spn",
            "SPN first: both siblings of a core, then the next core of the package, then a new package",
        ),
    };
    let other = match goal {
        SmtGoal::Speed => order::spn_first(m),
        SmtGoal::Spn => order::speed_first(m),
    };
    if other == order {
        let mut why = Vec::new();
        if m.smt_max() <= 1 {
            why.push("no core has SMT siblings".to_string());
        }
        if m.packages().len() <= 1 {
            why.push("there is one package".to_string());
        }
        if m.kinds().len() <= 1 {
            why.push("all cores are of one kind".to_string());
        }
        format!(
            "{this} ({what}): on this machine smt:speed and smt:spn place alike, because {}; \
             both hand out cores in the same order",
            why.join(" and ")
        )
    } else {
        format!("{this} ({what})")
    }
}

impl Policy for SmtPlace {
    /// Its decisions read CPU time, waits, states and heartbeats, never
    /// the counters.
    fn reads_counters(&self, _machine: &herd_topo::Machine) -> bool {
        false
    }
    fn name(&self) -> String {
        match self.goal {
            SmtGoal::Speed => "smt:speed".into(),
            SmtGoal::Spn => "smt:spn".into(),
        }
    }

    fn prepare(&mut self, machine: &Machine) {
        if self.order.is_empty() {
            self.setup(machine);
        }
    }

    fn decide(&mut self, view: &View<'_>) -> Plan {
        let m = view.machine;
        self.prepare(m);
        let snap = view.snapshot;
        // The tasks new since the last list, and those gone.
        let (mut fresh, mut gone) = (Vec::new(), Vec::new());
        let changed = self.last_ids.changed_noting(snap, |t| fresh.push(t), |id| gone.push(id));
        if !changed && !self.waiting {
            self.working.none_unplaced(snap);
            let mut plan = Plan::default();
            if view.decision == 0 {
                plan.note = self.note.clone().map(Into::into);
            }
            return plan;
        }
        // Every placed task was in the last list (placed when present,
        // freed when gone): the gone ones free their units, and a job left
        // with none no longer continues its run of units.
        for id in &gone {
            if let Some((u, job)) = self.placed.remove(id) {
                self.load.add(u, -1);
                if let Some(n) = self.placed_of.get_mut(&job) {
                    *n -= 1;
                    if *n == 0 {
                        self.placed_of.remove(&job);
                        self.last_unit.remove(&job);
                    }
                }
            }
        }
        // The last list's tasks all had units: the unplaced are the new
        // ones (a look-up per task otherwise).
        let all_placed = changed && !self.waiting;
        // New tasks in rank order, so a job's threads take its units in
        // order. Only working threads take units ([`Working`]): such a
        // thread takes a unit the period it works.
        let placed = &self.placed;
        let mut new = if all_placed {
            self.working.unplaced_among(snap, fresh.iter().copied(), |_| false)
        } else {
            self.working.unplaced(snap, |id| placed.contains_key(&id), |_| false)
        };
        new.sort_by_key(|t| (t.job, t.rank, t.id));
        let mut new_jobs: Vec<JobId> = new.iter().map(|t| t.job).collect();
        new_jobs.dedup();
        // Present tasks not placed: new ones, and those not working yet;
        // and, of the jobs with new tasks, the units of placed tasks that
        // did not work (one pass, one look-up per task that counts).
        let mut unplaced = if all_placed { fresh.len() } else { 0 };
        let mut idle: Vec<(JobId, usize)> = Vec::new();
        // Jobs with a placed task asleep now that worked over the period:
        // a main thread that has just started its workers and waits in
        // join, or a barrier worker between phases. One more period tells
        // them apart.
        let mut unsure: Vec<JobId> = Vec::new();
        // A job's tasks come together: whether it has new ones is asked once
        // per run of them.
        let mut last: Option<(JobId, bool)> = None;
        for t in snap.tasks.iter().filter(|_| !all_placed || !new.is_empty()) {
            let of_new = match last {
                Some((job, of_new)) if job == t.job => of_new,
                _ => {
                    let of_new = new_jobs.binary_search(&t.job).is_ok();
                    last = Some((t.job, of_new));
                    of_new
                }
            };
            if all_placed && !of_new {
                continue;
            }
            match self.placed.get(&t.id) {
                None => unplaced += usize::from(!all_placed),
                Some(_) if !of_new => {}
                Some(&(u, job)) if !worked(snap, t) => idle.push((job, u)),
                Some(&(_, job)) if t.state != TaskState::Runnable => unsure.push(job),
                Some(_) => {}
            }
        }
        unsure.sort_unstable();
        unsure.dedup();
        // Per job and unit, how many idle tasks: runs of a job's units in order.
        idle.sort_unstable();
        let idle: Vec<(JobId, usize, u32)> = idle
            .chunk_by(|a, b| a == b)
            .map(|run| (run[0].0, run[0].1, run.len() as u32))
            .collect();
        self.waiting = unplaced > new.len();
        let mut plan = Plan::default();
        // The note (for --explain) goes with the first plan and with any that
        // places something, not with every period's empty one.
        if view.decision == 0 || !new.is_empty() {
            plan.note = self.note.clone().map(Into::into);
        }
        self.placed.reserve(new.len());
        plan.tasks.reserve(new.len());
        let mut whole_from = 0;
        // `new` is in job order: each job's last unit is looked up once and
        // kept once, not at every task (a map insert per task was a tenth of
        // a first decision at 1,024 tasks).
        let mut held_back = Vec::new();
        for run in new.chunk_by(|a, b| a.job == b.job) {
            let job = run[0].job;
            // A job's new threads wait a period while one of its placed
            // threads may be idle or not (once: the next period they are
            // placed as it then looks). On an emulated guest a main thread
            // blocked in join had used 399 ms of its period to exec and
            // start the workers, and kept its unit to itself.
            if unsure.binary_search(&job).is_ok() && self.held_back.binary_search(&job).is_err() {
                held_back.push(job);
                continue;
            }
            let mut last = self.last_unit.get(&job).copied();
            let from = idle.partition_point(|&(j, _, _)| j < job);
            let to = from + idle[from..].partition_point(|&(j, _, _)| j == job);
            for t in run {
                let u = self.pick(last, &idle[from..to], &mut whole_from);
                self.load.add(u, 1);
                self.placed.insert(t.id, (u, job));
                *self.placed_of.entry(job).or_default() += 1;
                last = Some(u);
                plan.run(t.id, CpuSet::single(self.order[u]), self.why[u].clone());
            }
            if let Some(u) = last {
                self.last_unit.insert(job, u);
            }
        }
        self.waiting |= !held_back.is_empty();
        self.held_back = held_back;
        plan
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each unit's reason, written piece by piece, is the text `format!`
    /// made: machines with and without SMT, one and several packages.
    #[test]
    fn unit_reasons_read_as_formatted() {
        for spec in ["core:4", "package:2 core:4 pu:2", "package:2 numa:4 l3:3 core:8 pu:2"] {
            let m = Machine::synthetic(spec).expect("machine");
            for goal in [SmtGoal::Speed, SmtGoal::Spn] {
                let order = match goal {
                    SmtGoal::Speed => order::speed_first(&m),
                    SmtGoal::Spn => order::spn_first(&m),
                };
                let units = order.len();
                for (u, &cpu) in order.iter().enumerate() {
                    let shared = m.siblings(cpu).is_some_and(|s| s.iter().next() != Some(cpu));
                    let want = format!(
                        "unit {} of {units}: CPU {cpu}, {} of core {} in package {}",
                        u + 1,
                        if shared {
                            "a shared sibling"
                        } else {
                            "the full-resource thread"
                        },
                        m.cpu(cpu).map_or(0, |c| c.core),
                        m.cpu(cpu).map_or(0, |c| c.package),
                    );
                    let mut text = String::from("left over from the unit before");
                    assert_eq!(&*unit_reason(&m, u, units, cpu, &mut text), want, "{spec}");
                }
            }
        }
    }

    /// After any adds and removals, the free units and the least-used one
    /// are what a search of every unit finds.
    #[test]
    fn loads_answer_as_a_search_of_every_unit() {
        let mut rng = crate::Rng::new(4);
        // Unit counts within one word, of whole words, and over several.
        for n in [37, 64, 130] {
            let mut loads = Loads::new(n);
            for step in 0..2_000 {
                let u = rng.below(n as u64) as usize;
                let delta = if loads.of(u) > 0 && rng.below(3) == 0 { -1 } else { 1 };
                loads.add(u, delta);
                let free: Vec<usize> = (0..n).filter(|&u| loads.of(u) == 0).collect();
                assert_eq!(loads.free_from(0).collect::<Vec<_>>(), free, "{n} units, step {step}");
                // From any unit on, past the last too.
                let start = rng.below(n as u64 + 70) as usize;
                let after: Vec<usize> = free.iter().copied().filter(|&u| u >= start).collect();
                assert_eq!(
                    loads.free_from(start).collect::<Vec<_>>(),
                    after,
                    "{n} units from {start}, step {step}"
                );
                let least = (0..n).min_by_key(|&u| (loads.of(u), u));
                assert_eq!(loads.least(), least, "{n} units, step {step}");
            }
        }
    }
}
