//! S0's SMT- and energy-aware placement: `smt:speed` (policy 1, speedup
//! first) and `smt:spn` (policy 2, SPN first).
//!
//! Both hand out *units* (hardware threads) in an order computed from the
//! topology ([`order::speed_first`], [`order::spn_first`]) and pin each
//! thread to one unit for its life. With several programs each gets a
//! consistent set: a program's next thread takes the unit after its last
//! one when that is free, and a program's first thread opens a core nobody
//! uses, so programs do not interleave on cores while free cores remain.

use rustc_hash::{FxHashMap as HashMap, FxHashSet};

use herd_topo::{CpuSet, Machine};

use crate::param::Entry;
use crate::working::Working;
use crate::{JobId, Plan, Policy, TaskId, View, order};

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
    load: Vec<u32>,
    /// Each placed task's unit (index into `order`) and job.
    placed: HashMap<TaskId, (usize, JobId)>,
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
}

impl SmtPlace {
    /// The policy for `goal`.
    pub fn new(goal: SmtGoal) -> Self {
        SmtPlace {
            goal,
            order: Vec::new(),
            unit_of: HashMap::default(),
            load: Vec::new(),
            placed: HashMap::default(),
            last_unit: HashMap::default(),
            working: Working::default(),
            note: None,
            last_ids: Default::default(),
            waiting: false,
        }
    }

    fn setup(&mut self, m: &Machine) {
        self.order = match self.goal {
            SmtGoal::Speed => order::speed_first(m),
            SmtGoal::Spn => order::spn_first(m),
        };
        self.unit_of = self.order.iter().enumerate().map(|(u, &c)| (c, u)).collect();
        self.load = vec![0; self.order.len()];
        self.note = Some(explain_orders(m, self.goal));
    }

    /// The unit for a new task of `job`.
    fn pick(&self, m: &Machine, job: JobId) -> usize {
        let free = |u: usize| self.load[u] == 0;
        // The unit after the job's last, keeping the job's units together.
        if let Some(&u) = self.last_unit.get(&job) {
            if u + 1 < self.order.len() && free(u + 1) {
                return u + 1;
            }
        }
        let core_free = |u: usize| {
            m.siblings(self.order[u]).is_some_and(|sib| {
                sib.iter()
                    .all(|cpu| self.unit_of.get(&cpu).is_none_or(|&v| free(v)))
            })
        };
        if !self.last_unit.contains_key(&job) {
            if let Some(u) = (0..self.order.len()).find(|&u| free(u) && core_free(u)) {
                return u;
            }
        }
        if let Some(u) = (0..self.order.len()).find(|&u| free(u)) {
            return u;
        }
        // Oversubscribed: the least-used unit, earliest in the order.
        (0..self.order.len())
            .min_by_key(|&u| (self.load[u], u))
            .unwrap_or(0)
    }
}

/// Why the two orders differ on `m`, or why they coincide: what `--explain`
/// prints once.
fn explain_orders(m: &Machine, goal: SmtGoal) -> String {
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
    if order::speed_first(m) == order::spn_first(m) {
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
    fn name(&self) -> String {
        match self.goal {
            SmtGoal::Speed => "smt:speed".into(),
            SmtGoal::Spn => "smt:spn".into(),
        }
    }

    fn decide(&mut self, view: &View<'_>) -> Plan {
        let m = view.machine;
        if self.order.is_empty() {
            self.setup(m);
        }
        if !self.last_ids.changed(view.snapshot) && !self.waiting {
            self.working.none_unplaced(view.snapshot);
            let mut plan = Plan::default();
            if view.decision == 0 {
                plan.note = self.note.clone().map(Into::into);
            }
            return plan;
        }
        // New tasks in rank order, so a job's threads take its units in
        // order. Only working threads take units ([`Working`]): such a
        // thread takes a unit the period it works.
        let placed = &self.placed;
        let mut new = self.working.unplaced(view.snapshot, |id| placed.contains_key(&id), |_| false);
        new.sort_by_key(|t| (t.job, t.rank, t.id));
        // Present tasks not placed: new ones, and those not working yet.
        let unplaced = view
            .snapshot
            .tasks
            .iter()
            .filter(|t| !self.placed.contains_key(&t.id))
            .count();
        // Every other task present is placed; more placed than that means
        // some left. Only then free their units: in the steady state this
        // runs every period and costs one lookup per task.
        if self.placed.len() > view.snapshot.tasks.len() - unplaced {
            let present: FxHashSet<TaskId> = view.snapshot.tasks.iter().map(|t| t.id).collect();
            let load = &mut self.load;
            self.placed.retain(|id, (u, _)| {
                let keep = present.contains(id);
                if !keep {
                    load[*u] -= 1;
                }
                keep
            });
            // Jobs that left no longer continue their run of units.
            let jobs: FxHashSet<JobId> = self.placed.values().map(|&(_, j)| j).collect();
            self.last_unit.retain(|j, _| jobs.contains(j));
        }
        self.waiting = unplaced > new.len();
        let mut plan = Plan::default();
        // The note (for --explain) goes with the first plan and with any that
        // places something, not with every period's empty one.
        if view.decision == 0 || !new.is_empty() {
            plan.note = self.note.clone().map(Into::into);
        }
        for t in new {
            let u = self.pick(m, t.job);
            self.load[u] += 1;
            self.placed.insert(t.id, (u, t.job));
            self.last_unit.insert(t.job, u);
            let cpu = self.order[u];
            let shared = m.siblings(cpu).is_some_and(|s| s.iter().next() != Some(cpu));
            let why = format!(
                "unit {} of {}: CPU {cpu}, {} of core {} in package {}",
                u + 1,
                self.order.len(),
                if shared {
                    "a shared sibling"
                } else {
                    "the full-resource thread"
                },
                m.cpu(cpu).map_or(0, |c| c.core),
                m.cpu(cpu).map_or(0, |c| c.package),
            );
            plan.run(t.id, CpuSet::single(cpu), why);
        }
        plan
    }
}
