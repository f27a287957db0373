//! Baselines: `linux` (no intervention) and OpenMP-style static pinning.

// Task and job ids are small integers the policy looks up for every task
// every period: rustc's Fx hash costs a multiply where SipHash costs ~20 ns.
use rustc_hash::{FxHashMap as HashMap, FxHashSet};

use herd_topo::CpuSet;

use crate::param::{Accepts, Entry, Param, Value};
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
    about: "pin threads to neighbouring hardware threads, job after job (OpenMP close)",
    params: &[PLACES, CPUS],
    build: |a| Box::new(Static::new(Layout::Compact, a.word("places") == Some("cores")).using(places(a))),
    check: None,
};

/// Registry entry: `static:scatter`.
pub(crate) const STATIC_SCATTER: Entry = Entry {
    name: "static:scatter",
    about: "pin threads spread over packages, NUMA nodes and cores (OpenMP spread)",
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

/// `static:compact` and `static:scatter`: each thread pinned once, in order.
///
/// Jobs take consecutive stretches of the CPU order, in order of arrival,
/// wrapping around when there are more threads than CPUs. With
/// `places=cores` a thread may use every sibling of its core.
#[derive(Debug)]
pub struct Static {
    layout: Layout,
    whole_cores: bool,
    /// How many places of the order to use (`None`: all).
    width: Option<usize>,
    order: Option<Vec<u32>>,
    job_start: HashMap<u32, usize>,
    next_start: usize,
    placed: HashMap<TaskId, u32>,
    /// The tasks of the last snapshot, in its order: when they are the
    /// same, every one is placed and there is nothing to do (a thousand
    /// map lookups a turn otherwise).
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
            last_ids: Default::default(),
        }
    }
}

impl Static {
    /// Uses only the first `width` places of the order (`None`: all).
    pub fn using(mut self, width: Option<usize>) -> Self {
        self.width = width;
        self
    }
}

impl Policy for Static {
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

    fn decide(&mut self, view: &View<'_>) -> Plan {
        let m = view.machine;
        let (layout, width) = (self.layout, self.width);
        let order = self.order.get_or_insert_with(|| {
            let mut o = match layout {
                Layout::Compact => order::compact(m),
                Layout::Scatter => order::scatter(m),
            };
            o.truncate(width.unwrap_or(usize::MAX).max(1));
            o
        });
        let mut plan = Plan::default();
        let tasks = &view.snapshot.tasks;
        if !self.last_ids.changed(tasks) {
            return plan;
        }
        let mut threads_of: Option<HashMap<u32, usize>> = None;
        for t in &view.snapshot.tasks {
            if self.placed.contains_key(&t.id) {
                continue;
            }
            let counts = threads_of.get_or_insert_with(|| {
                let mut c = HashMap::default();
                for o in &view.snapshot.tasks {
                    *c.entry(o.job).or_insert(0) += 1;
                }
                c
            });
            let threads = counts[&t.job];
            let start = *self.job_start.entry(t.job).or_insert_with(|| {
                let s = self.next_start;
                self.next_start += threads;
                s
            });
            let cpu = order[(start + t.rank as usize) % order.len()];
            self.placed.insert(t.id, cpu);
            let cpus = if self.whole_cores {
                m.siblings(cpu).cloned().unwrap_or_default()
            } else {
                CpuSet::single(cpu)
            };
            let why = match layout {
                Layout::Compact => "compact: next hardware thread in topology order",
                Layout::Scatter => "scatter: next place spread over packages, nodes and cores",
            };
            plan.run(t.id, cpus, why);
        }
        // Forget tasks that left, so the map does not grow without bound.
        if self.placed.len() > 2 * view.snapshot.tasks.len() + 64 {
            let present: FxHashSet<TaskId> = view.snapshot.tasks.iter().map(|t| t.id).collect();
            self.placed.retain(|id, _| present.contains(id));
        }
        plan
    }
}
