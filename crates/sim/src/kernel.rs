//! The simulated kernel scheduler: what `linux` means in simulation.
//!
//! What it models, at the level the performance model sees:
//! - one run queue per CPU, shared fairly (CFS as ideal processor sharing:
//!   q runnable tasks on a CPU each get 1/q of it);
//! - wake-up and fork placement within the task's affinity: the previous
//!   CPU if its whole core is idle; else an idle *core* (all siblings idle),
//!   preferring the previous CPU's LLC, else the package with the most idle
//!   CPUs; else an idle CPU (an SMT sibling) by the same preference; else
//!   the shortest queue. Filling new threads this way hands out full cores
//!   spread over packages first and siblings last: S0's Table 1 order;
//! - new-idle balancing: a CPU that goes idle pulls a waiting task from the
//!   longest queue that task may leave;
//! - periodic balancing every `balance_ms`: idle pulls, moving a task off a
//!   core whose siblings are all busy onto a fully idle core, evening queue
//!   lengths until they differ by at most one, and then fairness across
//!   CPUs: when queues differ by one, the least-served task on a long queue
//!   trades places with the most-served task on a short one (what CFS's
//!   vruntime-aware balancing achieves over time), so N tasks on C < N
//!   CPUs each get C/N of a CPU.
//!
//! With `model.kernel = "linux-2.6"` ([`KernelModel::Linux26`], S3's
//! kernel) it behaves as Linux 2.6.27 did instead: a waking task goes back
//! to the CPU it last ran on whether or not that CPU is busy (idle CPUs
//! then pull), and there is no fairness across CPUs: balancing evens queue
//! lengths and nothing more.
//!
//! What it leaves out: task weights and nice levels, wake-up preemption and
//! latency targets (below the period herd decides at), NUMA balancing of
//! memory pages, energy-aware placement, cgroup CPU shares, and any
//! awareness of memory bandwidth, NUMA traffic or core speed.

use std::collections::BinaryHeap;

use herd_model::KernelModel;
use herd_topo::{CpuSet, Machine};

use crate::queues::Queues;

/// Per-CPU tables and run queues, indexed by CPU position (dense, in OS order).
#[derive(Debug, Clone)]
pub(crate) struct Kernel {
    /// OS index of each position.
    pub os: Vec<u32>,
    pos_of: Vec<usize>,
    /// Core of each position.
    pub core: Vec<usize>,
    /// LLC of each position.
    pub llc: Vec<Option<usize>>,
    /// Package of each position.
    pub package: Vec<usize>,
    /// NUMA node of each position.
    pub numa: Vec<usize>,
    /// Core kind of each position.
    pub kind: Vec<usize>,
    /// Positions of each core's CPUs.
    pub core_cpus: Vec<Vec<usize>>,
    /// Threads queued on each position.
    pub queues: Queues,
    packages: usize,
    /// Which scheduler generation this kernel behaves as.
    pub era: KernelModel,
    /// For each set of allowed CPUs of more than [`MASKED_FROM`] seen, the
    /// positions it allows as a rank mask for the queues' index (a handful
    /// of sets: the machine, its nodes, a gang's CPUs). Cleared when the
    /// tie-breaks change.
    masks: rustc_hash::FxHashMap<CpuSet, Vec<u64>>,
    /// Each package's positions as a rank mask: its idle CPUs are counted
    /// a word at a time.
    package_masks: Vec<Vec<u64>>,
    /// The fairness round's candidates, kept for their lists.
    most_served: MostServed,
}

/// From how many allowed CPUs a wake-up's search goes by the allowed set's
/// rank mask (a hash look-up, then a few words per queue length) rather
/// than through the queues' index CPU by CPU. At 256 CPUs a gang's node
/// passed over so many CPUs of other nodes that the index gave up and
/// scanned: the scan was an eighth of a cosched:fair run.
const MASKED_FROM: usize = 32;

/// Masks kept at most: a policy that hands out ever new large sets does
/// not grow the table without end.
const MASKS_KEPT: usize = 1024;

impl Kernel {
    pub fn new(m: &Machine) -> Self {
        let cpus = m.cpus();
        let max_os = cpus.iter().map(|c| c.os as usize).max().unwrap_or(0);
        let mut pos_of = vec![usize::MAX; max_os + 1];
        for (p, c) in cpus.iter().enumerate() {
            pos_of[c.os as usize] = p;
        }
        let mut core_cpus = vec![Vec::new(); m.cores().len()];
        for (p, c) in cpus.iter().enumerate() {
            core_cpus[c.core].push(p);
        }
        let mut k = Kernel {
            os: cpus.iter().map(|c| c.os).collect(),
            pos_of,
            core: cpus.iter().map(|c| c.core).collect(),
            llc: cpus.iter().map(|c| c.llc).collect(),
            package: cpus.iter().map(|c| c.package).collect(),
            numa: cpus.iter().map(|c| c.numa).collect(),
            kind: cpus.iter().map(|c| c.kind).collect(),
            core_cpus,
            queues: Queues::new(&(0..cpus.len()).collect::<Vec<_>>()),
            packages: m.packages().len(),
            era: KernelModel::Current,
            masks: Default::default(),
            package_masks: Vec::new(),
            most_served: MostServed::default(),
        };
        k.mask_packages();
        k
    }

    /// Each package's rank mask, for the tie-breaks as they are.
    fn mask_packages(&mut self) {
        self.package_masks = (0..self.packages)
            .map(|pk| self.queues.rank_mask(|p| self.package[p] == pk))
            .collect();
    }

    /// Breaks placement ties in an order drawn from `seed` instead of by
    /// position. Which idle CPU a real kernel hands a new task depends on
    /// where its parent runs and where the scan starts: luck, to whoever
    /// runs the experiment. Where CPUs differ (S3's fast and slow cores),
    /// by position the scenario's job order alone would decide which tasks
    /// get the fast ones.
    pub fn shuffle_ties(&mut self, seed: u64) {
        let mut rng = herd_policy::Rng::new(seed);
        // Fisher-Yates.
        let mut tie = self.queues.ties().to_vec();
        for i in (1..tie.len()).rev() {
            let j = rng.below(i as u64 + 1) as usize;
            tie.swap(i, j);
        }
        self.queues.set_ties(&tie);
        self.masks.clear();
        self.mask_packages();
    }

    /// Number of CPUs.
    pub fn len(&self) -> usize {
        self.os.len()
    }

    /// The position of OS CPU `os`.
    pub fn pos(&self, os: u32) -> Option<usize> {
        self.pos_of.get(os as usize).copied().filter(|&p| p != usize::MAX)
    }

    fn allows(&self, allowed: &CpuSet, pos: usize) -> bool {
        allowed.contains(self.os[pos])
    }

    fn core_idle(&self, core: usize) -> bool {
        self.core_cpus[core].iter().all(|&p| self.queues[p].is_empty())
    }

    fn idle_per_package(&self) -> Vec<usize> {
        let idle: Vec<usize> = self
            .package_masks
            .iter()
            .map(|m| self.queues.empty_count_in(m))
            .collect();
        #[cfg(debug_assertions)]
        {
            let mut counted = vec![0; self.packages];
            for (p, q) in self.queues.iter().enumerate() {
                if q.is_empty() {
                    counted[self.package[p]] += 1;
                }
            }
            assert_eq!(idle, counted, "idle CPUs counted by package masks");
        }
        idle
    }

    /// Where a waking or new thread goes; `None` if `allowed` names no CPU here.
    pub fn select(&mut self, allowed: &CpuSet, prev: Option<usize>) -> Option<usize> {
        // One allowed CPU is the answer whatever the queues say: every
        // search below has it as its only candidate. (A pinned thread
        // resumed or moved: unguarded cosched:fair resumes some 200 a turn
        // at 1,000 tasks, and each search cost several hundred
        // instructions for it.)
        let allowed_len = allowed.len();
        if allowed_len == 1 {
            return allowed.first().and_then(|os| self.pos(os));
        }
        if let Some(p) = prev {
            // 2.6.27 had no idle search on wake-up (select_idle_sibling
            // came in 2.6.32): the task went back where it last ran.
            let wake_home = self.era == KernelModel::Linux26;
            if self.allows(allowed, p) && (wake_home || self.core_idle(self.core[p])) {
                return Some(p);
            }
        }
        // The allowed set's rank mask, made at its first use: one look-up
        // serves both searches below.
        let masked = allowed_len > MASKED_FROM;
        if masked && !self.masks.contains_key(allowed) {
            if self.masks.len() >= MASKS_KEPT {
                self.masks.clear();
            }
            let mask = self.queues.rank_mask(|p| self.allows(allowed, p));
            self.masks.insert(allowed.clone(), mask);
        }
        let mask = self.masks.get(allowed).filter(|_| masked);
        let allowed_pos = || allowed.iter().filter_map(|os| self.pos(os));
        // The shortest allowed queue first: if it is not empty, no allowed
        // CPU is idle and neither search below can find one (an
        // oversubscribed machine, where most threads start or resume).
        let scan =
            || allowed_pos().min_by_key(|&p| (self.queues[p].len(), Some(p) != prev, self.queues.ties()[p]));
        // The queues' index, shortest first, passes over at most as many
        // CPUs as a scan of the allowed ones would look at.
        let shortest = if let Some(mask) = mask {
            let found = self.queues.shortest_in(prev, mask);
            debug_assert_eq!(found, scan(), "the queues' index by mask agrees with a scan");
            found
        } else {
            match self
                .queues
                .shortest_where(prev, allowed_len, |p| self.allows(allowed, p))
            {
                Some(found) => {
                    debug_assert_eq!(found, scan(), "the queues' index agrees with a scan");
                    found
                }
                None => scan(),
            }
        };
        if shortest.is_none_or(|p| !self.queues[p].is_empty()) {
            return shortest;
        }
        let idle = self.idle_per_package();
        let prev_llc = prev.and_then(|p| self.llc[p]);
        // Lower is better: same LLC as before, then the idlest package, then
        // position (or the seeded order).
        let rank = |p: usize| {
            (
                prev_llc.is_none() || self.llc[p] != prev_llc,
                usize::MAX - idle[self.package[p]],
                self.queues.ties()[p],
            )
        };
        // One pass for both searches, a CPU on an idle core first, else
        // one with an empty queue: each the first of the lowest rank, as
        // `min_by_key` gives. (Two passes, with a rank for every allowed
        // CPU, made a third of a simulated cosched:fair turn, which
        // resumes programs every period.) A CPU on an idle core has an
        // empty queue itself.
        let mut on_idle_core: Option<((bool, usize, usize), usize)> = None;
        let mut empty: Option<((bool, usize, usize), usize)> = None;
        let mut visit = |p: usize| {
            let r = rank(p);
            if empty.is_none_or(|(best, _)| r < best) {
                empty = Some((r, p));
            }
            if on_idle_core.is_none_or(|(best, _)| r < best) && self.core_idle(self.core[p]) {
                on_idle_core = Some((r, p));
            }
        };
        // Through the rank mask, only the empty allowed queues are visited
        // (few on a busy machine); the order of visits does not matter, as
        // the tie-break makes every rank distinct.
        match mask {
            Some(mask) => self.queues.empty_in(mask).for_each(&mut visit),
            None => allowed_pos()
                .filter(|&p| self.queues[p].is_empty())
                .for_each(&mut visit),
        }
        on_idle_core.or(empty).map(|(_, p)| p)
    }

    pub fn enqueue(&mut self, thread: usize, pos: usize) {
        self.queues.push(pos, thread);
    }

    pub fn dequeue(&mut self, thread: usize, pos: usize) {
        if let Some(i) = self.queues[pos].iter().position(|&t| t == thread) {
            self.queues.remove(pos, i);
        }
    }

    fn take_movable(&mut self, from: usize, to: usize, allowed: &[CpuSet]) -> Option<usize> {
        let os_to = self.os[to];
        // The most recently queued thread that may run on `to`: it has the
        // coldest cache here, as Linux's can_migrate_task prefers.
        let i = self.queues[from]
            .iter()
            .rposition(|&t| allowed[t].contains(os_to))?;
        Some(self.queues.remove(from, i))
    }

    /// Whether any balancing step could move something: an idle CPU beside
    /// a queue of two or more, a fully idle core beside a core with two busy
    /// siblings, or queues two or more apart. One pass; in the common
    /// oversubscribed steady state the answer is no.
    fn could_move(&self) -> bool {
        let (mut shortest, mut longest) = (usize::MAX, 0);
        for q in self.queues.iter() {
            shortest = shortest.min(q.len());
            longest = longest.max(q.len());
        }
        if longest >= shortest + 2 {
            return true;
        }
        let (mut idle_core, mut crowded_core) = (false, false);
        for cpus in &self.core_cpus {
            let busy = cpus.iter().filter(|&&p| !self.queues[p].is_empty()).count();
            idle_core |= busy == 0;
            crowded_core |= busy >= 2;
        }
        idle_core && crowded_core
    }

    /// New-idle balancing: every idle CPU pulls from the longest queue it
    /// can. Returns the moves (thread, from, to).
    pub fn pull_idle(&mut self, allowed: &[CpuSet]) -> Vec<(usize, usize, usize)> {
        let mut moves = Vec::new();
        // Busy everywhere (the usual oversubscribed state): nothing to pull.
        if self.queues.iter().all(|q| !q.is_empty()) {
            return moves;
        }
        // The queues that can give (two or more threads), each with where
        // any of its threads may run: an idle CPU asks each queue one
        // question, not one per queued thread. Asking each thread was three
        // quarters of the instructions of a simulated run with 1,000
        // threads confined to 8 of 256 CPUs (each of the 248 idle CPUs
        // asked every confined thread, each balancing). Only
        // these queues give, and only lose threads, in this pass: an idle
        // CPU takes one thread and stays below two.
        let mut sources: Vec<(usize, CpuSet)> = (0..self.len())
            .filter(|&p| self.queues[p].len() >= 2)
            .map(|p| (p, self.reach(p, allowed)))
            .collect();
        if sources.is_empty() {
            return moves;
        }
        for to in 0..self.len() {
            if !self.queues[to].is_empty() {
                continue;
            }
            let (llc, os_to) = (self.llc[to], self.os[to]);
            // Keys are unique by position, so the pick is the one a scan of
            // every queue in order makes.
            let source = sources
                .iter()
                .enumerate()
                .filter(|(_, (p, reach))| self.queues[*p].len() >= 2 && reach.contains(os_to))
                .max_by_key(|(_, (p, _))| (self.queues[*p].len(), self.llc[*p] == llc, usize::MAX - *p))
                .map(|(i, &(p, _))| (i, p));
            if let Some((i, from)) = source {
                if let Some(t) = self.take_movable(from, to, allowed) {
                    self.queues.push(to, t);
                    moves.push((t, from, to));
                    sources[i].1 = self.reach(from, allowed);
                }
            }
        }
        moves
    }

    /// Where any thread queued on position `p` may run.
    fn reach(&self, p: usize, allowed: &[CpuSet]) -> CpuSet {
        let mut reach = CpuSet::new();
        for &t in &self.queues[p] {
            reach.union_with(&allowed[t]);
        }
        reach
    }

    /// Periodic balancing (see the module docs). Bounded: at most one move
    /// per CPU per step.
    pub fn balance(
        &mut self,
        allowed: &[CpuSet],
        service: &[f64],
        min_gap: f64,
    ) -> Vec<(usize, usize, usize)> {
        if !min_gap.is_finite() && !self.could_move() {
            return Vec::new();
        }
        let mut moves = self.pull_idle(allowed);
        // A busy core with a fully idle core elsewhere: spread out. The idle
        // list is computed once, and only when some queue is empty (the
        // queues' index tells in a few words): in the common oversubscribed
        // state it is empty without a pass over the cores.
        let mut idle_cores: Vec<usize> = if self.queues.any_empty() {
            (0..self.core_cpus.len()).filter(|&c| self.core_idle(c)).collect()
        } else {
            Vec::new()
        };
        for core in 0..self.core_cpus.len() {
            if idle_cores.is_empty() {
                break;
            }
            let busy: Vec<usize> = self.core_cpus[core]
                .iter()
                .copied()
                .filter(|&p| !self.queues[p].is_empty())
                .collect();
            if busy.len() < 2 {
                continue;
            }
            let from = busy[busy.len() - 1];
            let Some(&t) = self.queues[from].last() else {
                continue;
            };
            let target = idle_cores
                .iter()
                .position(|&c| allowed[t].contains(self.os[self.core_cpus[c][0]]));
            if let Some(i) = target {
                let to = self.core_cpus[idle_cores.remove(i)][0];
                self.queues.pop(from);
                self.queues.push(to, t);
                moves.push((t, from, to));
            }
        }
        // Even out queue lengths.
        for _ in 0..self.len() {
            let Some(from) = (0..self.len()).max_by_key(|&p| (self.queues[p].len(), usize::MAX - p)) else {
                break;
            };
            let longest = self.queues[from].len();
            let Some((t, to)) = self.even_target(from, longest, allowed) else {
                break;
            };
            let thread = self.queues.remove(from, t);
            self.queues.push(to, thread);
            moves.push((thread, from, to));
        }
        if min_gap.is_finite() {
            self.rotate(allowed, service, min_gap, &mut moves);
        }
        moves
    }

    /// For evening out queue lengths: the first queue, shortest first and
    /// then by position, at least two shorter than `from`'s `longest` that
    /// may take one of `from`'s threads, with the most recently queued such
    /// thread's index. One pass for the least (length, position), not a
    /// sort: this runs once per move, and a sort of every CPU per move was
    /// a third of the simulated kernel's balancing at 256 CPUs; nor a pass
    /// per length, which with 1,000 threads confined to 8 CPUs was a pass
    /// over every CPU for each of 120 lengths.
    fn even_target(&self, from: usize, longest: usize, allowed: &[CpuSet]) -> Option<(usize, usize)> {
        // Evened out already (the usual case): one pass says so.
        let shortest = self.queues.iter().map(Vec::len).min()?;
        if shortest + 2 > longest {
            return None;
        }
        // Where any of `from`'s threads may run: a CPU outside it takes
        // none, and a CPU inside it takes at least one.
        let reach = self.reach(from, allowed);
        let to = (0..self.len())
            .filter(|&p| self.queues[p].len() + 2 <= longest && reach.contains(self.os[p]))
            .min_by_key(|&p| (self.queues[p].len(), p))?;
        let os_to = self.os[to];
        let i = self.queues[from]
            .iter()
            .rposition(|&t| allowed[t].contains(os_to))?;
        Some((i, to))
    }

    /// Fairness across CPUs when queue lengths differ by one: swaps the
    /// least-served thread of a long queue with the most-served thread of a
    /// short queue while the gap exceeds `min_gap` ns of CPU time. Bounded
    /// by one swap per long queue.
    fn rotate(
        &mut self,
        allowed: &[CpuSet],
        service: &[f64],
        min_gap: f64,
        moves: &mut Vec<(usize, usize, usize)>,
    ) {
        let Some(longest) = self.queues.iter().map(Vec::len).max() else {
            return;
        };
        if longest < 2 || self.queues.iter().all(|q| q.len() == longest) {
            return;
        }
        let long: Vec<usize> = (0..self.len())
            .filter(|&p| self.queues[p].len() == longest)
            .collect();
        // Threads on shorter queues, most served first, gathered once: with
        // the usual wide affinities the first candidate fits every long
        // queue, so this stays about O(T) (a heap built once, a few taken)
        // rather than O(CPUs x T).
        let mut short = std::mem::take(&mut self.most_served);
        let shorter = (0..self.len()).filter(|&p| self.queues[p].len() + 1 == longest);
        short.gather(
            shorter.flat_map(|p| self.queues[p].iter().map(move |&t| (t, p))),
            service,
        );
        // The shorter queues' CPUs, gathered when first needed: a
        // least-served thread allowed on none of them cannot trade, and is
        // not held against every candidate (with threads pinned one to a
        // CPU, that scan was most of a balancing). A thread allowed on most
        // CPUs finds a trade at once, and is not checked.
        let mut short_cpus: Option<CpuSet> = None;
        // Each short queue trades once per round, so lengths stay put.
        let mut traded = vec![false; self.len()];
        for from in long {
            // The thread here that has had the least CPU.
            let Some(&lo) = self.queues[from]
                .iter()
                .min_by(|&&a, &&b| service[a].total_cmp(&service[b]))
            else {
                continue;
            };
            if allowed[lo].len() * 2 < self.len() {
                let short_cpus = short_cpus.get_or_insert_with(|| {
                    (0..self.len())
                        .filter(|&p| self.queues[p].len() + 1 == longest)
                        .map(|p| self.os[p])
                        .collect()
                });
                if !allowed[lo].intersects(short_cpus) {
                    continue;
                }
            }
            // The most-served thread on a shorter queue that can trade places.
            let Some((hi, to)) = (0..).map_while(|k| short.get(k)).find(|&(t, p)| {
                !traded[p] && allowed[lo].contains(self.os[p]) && allowed[t].contains(self.os[from])
            }) else {
                continue;
            };
            if service[hi] - service[lo] <= min_gap {
                // Candidates only get less served from here on.
                break;
            }
            traded[to] = true;
            self.dequeue(lo, from);
            self.dequeue(hi, to);
            self.queues.push(to, lo);
            self.queues.push(from, hi);
            moves.push((lo, from, to));
            moves.push((hi, to, from));
        }
        self.most_served = short;
    }
}

/// Threads on shorter queues, most served first (then by queue, then as
/// queued), sorted only as far as they are asked for: a fairness round
/// trades a few of them (six taken a round, on average, at a thousand
/// threads), and a full sort of every one was a twentieth of a simulated
/// `linux` hour. Kept by the kernel between rounds, so its lists are
/// reused, not allocated each round.
#[derive(Debug, Default, Clone)]
struct MostServed {
    /// (service as ordered by `f64::total_cmp`, `u64::MAX` less the place
    /// gathered): the heap's greatest first. The threads are gathered in
    /// queue order, so the first gathered of equal services is on the
    /// first queue: the place stands for (queue, place in it) in half the
    /// bytes, and the heap is made and sifted in half the moves.
    heap: BinaryHeap<(i64, u64)>,
    /// (thread, queue) by place gathered.
    gathered: Vec<(usize, usize)>,
    sorted: Vec<(usize, usize)>,
}

impl MostServed {
    /// Gathers `threads` as (thread, queue), in queue order, afresh.
    fn gather(&mut self, threads: impl Iterator<Item = (usize, usize)>, service: &[f64]) {
        // `f64::total_cmp`'s order, as an integer's.
        let key = |x: f64| {
            let bits = x.to_bits() as i64;
            bits ^ ((((bits >> 63) as u64) >> 1) as i64)
        };
        self.gathered.clear();
        self.gathered.extend(threads);
        debug_assert!(
            self.gathered.is_sorted_by_key(|&(_, p)| p),
            "gathered out of queue order"
        );
        let mut heap = std::mem::take(&mut self.heap).into_vec();
        heap.clear();
        let places = self.gathered.iter().enumerate();
        heap.extend(places.map(|(i, &(t, _))| (key(service[t]), u64::MAX - i as u64)));
        self.heap = BinaryHeap::from(heap);
        self.sorted.clear();
    }

    /// The `k`th most served, if there are so many.
    fn get(&mut self, k: usize) -> Option<(usize, usize)> {
        while self.sorted.len() <= k {
            let (_, place) = self.heap.pop()?;
            self.sorted.push(self.gathered[(u64::MAX - place) as usize]);
        }
        Some(self.sorted[k])
    }
}

#[cfg(test)]
mod tests;
