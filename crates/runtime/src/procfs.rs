//! Per-thread facts from `/proc`: state, last CPU, CPU time, run-queue wait,
//! migrations, allowed CPUs. Parsers are pure functions over the file text;
//! readers take an injectable proc root.

use std::fs;
use std::path::{Path, PathBuf};

use herd_topo::CpuSet;

/// What `/proc/<pid>/task/<tid>/{stat,schedstat,sched}` say about a thread.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ThreadSample {
    /// The thread id.
    pub tid: i32,
    /// The state letter: R running, S sleeping, D disk, T stopped, Z zombie...
    pub state: char,
    /// The CPU it last ran on.
    pub cpu: u32,
    /// CPU time consumed (schedstat), ns.
    pub run_ns: u64,
    /// Time spent runnable but waiting for a CPU (schedstat), ns.
    pub wait_ns: u64,
    /// Times it was put on a CPU (schedstat's third field; 0 where the
    /// kernel gives none).
    pub slices: u64,
    /// When it started, in clock ticks after boot (`stat`'s field 22).
    pub start_ticks: u64,
    /// Moves between CPUs (`se.nr_migrations` in `sched`), when readable.
    pub migrations: Option<u64>,
    /// Its process's thread count when its `stat` was read (field 20,
    /// the same in every thread's `stat`).
    pub threads: u32,
}

impl ThreadSample {
    /// Its schedstat times.
    pub fn times(&self) -> Times {
        (self.run_ns, self.wait_ns, self.slices)
    }
}

/// Parses `/proc/<pid>/numa_maps`: the process's memory per NUMA node (OS
/// node number, kB), summed over its mappings. Each line counts pages per
/// node (`N1=512`) of the mapping's page size (`kernelpagesize_kB=2048` for
/// huge pages; 4 kB when not said).
pub fn parse_numa_maps(text: &str) -> Vec<(u32, u64)> {
    let mut kb: std::collections::BTreeMap<u32, u64> = std::collections::BTreeMap::new();
    for line in text.lines() {
        let page_kb = line
            .split_whitespace()
            .find_map(|f| f.strip_prefix("kernelpagesize_kB="))
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(4);
        for field in line.split_whitespace() {
            let Some((node, pages)) = field.strip_prefix('N').and_then(|f| f.split_once('=')) else {
                continue;
            };
            if let (Ok(node), Ok(pages)) = (node.parse::<u32>(), pages.parse::<u64>()) {
                *kb.entry(node).or_default() += pages.saturating_mul(page_kb);
            }
        }
    }
    kb.into_iter().collect()
}

/// Adds `more` (kB by node, as [`parse_numa_maps`] gives) into `into`,
/// which stays ordered by node: a program's memory with its forked
/// processes'.
pub fn add_node_kb(into: &mut Vec<(u32, u64)>, more: &[(u32, u64)]) {
    for &(node, kb) in more {
        match into.binary_search_by_key(&node, |&(n, _)| n) {
            Ok(i) => into[i].1 += kb,
            Err(i) => into.insert(i, (node, kb)),
        }
    }
}

/// Where a process's memory is: [`parse_numa_maps`] of its file; `None`
/// when it cannot be read (gone, no permission, no NUMA support).
pub fn numa_memory_kb(proc_root: &Path, pid: i32) -> Option<Vec<(u32, u64)>> {
    let text = fs::read_to_string(proc_root.join(pid.to_string()).join("numa_maps")).ok()?;
    Some(parse_numa_maps(&text))
}

/// What a thread's `/proc/.../stat` says that herd uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stat {
    /// The state letter.
    pub state: char,
    /// The CPU it last ran on.
    pub cpu: u32,
    /// When it started, in clock ticks after boot.
    pub start_ticks: u64,
    /// Its process's thread count.
    pub threads: u32,
}

/// Parses `/proc/.../stat`. The command name may hold spaces and
/// parentheses, so fields are counted after the last ')'.
pub fn parse_stat(text: &str) -> Option<Stat> {
    let rest = &text[text.rfind(')')? + 1..];
    // rest starts at field 3 (state); field 20 (num_threads) is 17 after
    // it, field 22 (starttime) 2 after that, field 39 (processor) 17 after
    // that. Walked, not collected: this runs for every thread every period.
    let mut fields = rest.split_ascii_whitespace();
    let state = fields.next()?.chars().next()?;
    let threads = fields.nth(16)?.parse().ok()?;
    let start_ticks = fields.nth(1)?.parse().ok()?;
    let cpu = fields.nth(16)?.parse().ok()?;
    Some(Stat {
        state,
        cpu,
        start_ticks,
        threads,
    })
}

/// Parses `/proc/stat`'s per-CPU lines into (CPU, idle + iowait ticks).
pub fn parse_cpu_idle(text: &str) -> Vec<(u32, u64)> {
    text.lines()
        .filter_map(|l| {
            let mut f = l.split_whitespace();
            let cpu = f.next()?.strip_prefix("cpu")?.parse().ok()?;
            let v: Vec<u64> = f.take(5).filter_map(|x| x.parse().ok()).collect();
            (v.len() == 5).then(|| (cpu, v[3] + v[4]))
        })
        .collect()
}

/// Parses `/proc/stat`: (runnable threads on the machine now, online
/// CPUs). More runnable threads than CPUs means some wait in run queues.
pub fn parse_runnable(text: &str) -> Option<(u32, u32)> {
    let running = text
        .lines()
        .find_map(|l| l.strip_prefix("procs_running "))?
        .trim()
        .parse()
        .ok()?;
    let cpus = text
        .lines()
        .filter(|l| {
            l.strip_prefix("cpu")
                .is_some_and(|r| r.starts_with(|c: char| c.is_ascii_digit()))
        })
        .count();
    Some((running, cpus as u32))
}

/// The id the kernel last gave a new process or thread in herd's pid
/// namespace: `/proc/loadavg`'s last field. Unchanged between two reads,
/// nothing was forked or cloned in between, here or in a namespace below
/// (a fork there takes an id here too), short of the ids wrapping all the
/// way round (`pid_max`, 4 million by default) in between.
pub fn last_pid(proc_root: &Path) -> Option<i32> {
    parse_last_pid(&fs::read_to_string(proc_root.join("loadavg")).ok()?)
}

/// Parses `/proc/loadavg`: "0.52 0.58 0.59 2/80 12345" gives 12345.
fn parse_last_pid(text: &str) -> Option<i32> {
    text.split_whitespace().nth(4)?.parse().ok()
}

/// A thread's schedstat: (run ns, wait ns, times put on a CPU).
pub type Times = (u64, u64, u64);

/// Parses `/proc/.../schedstat`: (run ns, wait ns, times put on a CPU; 0
/// when the kernel writes only two fields).
pub fn parse_schedstat(text: &str) -> Option<Times> {
    let mut f = text.split_whitespace().map(|x| x.parse::<u64>().ok());
    Some((f.next()??, f.next()??, f.next().flatten().unwrap_or(0)))
}

/// Parses `se.nr_migrations` out of `/proc/.../sched`.
pub fn parse_migrations(text: &str) -> Option<u64> {
    text.lines()
        .find(|l| l.trim_start().starts_with("se.nr_migrations"))
        .and_then(|l| l.split(':').nth(1))
        .and_then(|v| v.trim().parse().ok())
}

/// Parses `Cpus_allowed_list` out of `/proc/.../status`.
pub fn parse_allowed(text: &str) -> Option<CpuSet> {
    let line = text.lines().find(|l| l.starts_with("Cpus_allowed_list:"))?;
    CpuSet::parse_list(line.split_once(':')?.1).ok()
}

/// The thread ids of process `pid`, ascending. Empty once it is gone.
pub fn threads(proc_root: &Path, pid: i32) -> Vec<i32> {
    let mut tids: Vec<i32> = fs::read_dir(proc_root.join(pid.to_string()).join("task"))
        .map(|d| {
            d.filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
                .collect()
        })
        .unwrap_or_default();
    tids.sort_unstable();
    tids
}

/// Field `n` (1-based, as `man 5 proc` numbers them; 3 or later) of
/// process or thread `id`'s `stat`.
fn stat_field<T: std::str::FromStr>(proc_root: &Path, id: i32, n: usize) -> Option<T> {
    let text = fs::read_to_string(proc_root.join(id.to_string()).join("stat")).ok()?;
    // After the command's closing parenthesis: field 3 (state) onwards.
    text[text.rfind(')')? + 1..]
        .split_whitespace()
        .nth(n.checked_sub(3)?)?
        .parse()
        .ok()
}

/// The parent of a process from its `stat` text.
fn parse_ppid(text: &str) -> Option<i32> {
    // After the command's closing parenthesis: state, then ppid.
    text[text.rfind(')')? + 1..]
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

/// For each of `roots`, the processes below it (children, their children,
/// ...), from each process's parent in `/proc/<pid>/stat`: one pass over
/// `/proc` for all roots. Real programs fork workers (stress-ng's
/// stressors, make's compilers, a shell's commands), and those do the
/// work a policy must see and place. A process that exits or is adopted
/// elsewhere during the pass is simply missed until the next.
pub fn descendants(proc_root: &Path, roots: &[i32]) -> Vec<Vec<i32>> {
    let mut children: std::collections::HashMap<i32, Vec<i32>> = std::collections::HashMap::new();
    let Ok(dir) = fs::read_dir(proc_root) else {
        return vec![Vec::new(); roots.len()];
    };
    let mut buf = String::new();
    for entry in dir.flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|n| n.parse::<i32>().ok()) else {
            continue;
        };
        buf.clear();
        let read = fs::File::open(entry.path().join("stat"))
            .and_then(|mut f| std::io::Read::read_to_string(&mut f, &mut buf));
        if let (Ok(_), Some(ppid)) = (read, parse_ppid(&buf)) {
            children.entry(ppid).or_default().push(pid);
        }
    }
    roots
        .iter()
        .map(|&root| {
            let mut found = Vec::new();
            let mut next = vec![root];
            while let Some(p) = next.pop() {
                for &c in children.get(&p).map_or(&[][..], Vec::as_slice) {
                    // A pid loop cannot happen in a consistent /proc, but a
                    // pass is not atomic: never visit a process twice.
                    if c != root && !found.contains(&c) {
                        found.push(c);
                        next.push(c);
                    }
                }
            }
            found.sort_unstable();
            found
        })
        .collect()
}

/// Whether this kernel keeps per-thread `children` lists (what [`subtree`]
/// reads).
pub fn children_lists(proc_root: &Path) -> bool {
    proc_root.join("thread-self/children").exists()
}

/// The processes below `root`, read from its threads' `children` lists
/// (`/proc/<pid>/task/<tid>/children`) and theirs: a cost that grows with
/// the program's own processes, where [`descendants`] reads every
/// process's `stat` on the machine. Falls back to that pass where the
/// kernel has no `children` lists (built without CONFIG_PROC_CHILDREN).
pub fn subtree(proc_root: &Path, root: i32) -> Vec<i32> {
    let mut lister = |pid: i32| threads(proc_root, pid);
    subtree_since(
        proc_root,
        root,
        &mut lister,
        &|_| None,
        &mut ChildrenSeen::default(),
    )
}

/// Threads' `children` lists as last read, each with the thread's
/// schedstat times read just before it.
#[derive(Debug, Default)]
pub struct ChildrenSeen(std::collections::HashMap<i32, (Times, Vec<i32>)>);

/// [`subtree`], reading again only the lists of threads that ran since
/// they were last read: a thread that has not run has forked nothing, and
/// the live world watches a thousand threads of which a few fork. `tids`
/// lists a process's threads; `times` gives a thread's schedstat times now
/// (`None`: unknown, read its list). A list can also shrink without its
/// thread running (a child exits, and an orphan may move to a
/// subreaper), so when any list came from `seen`, every process found is
/// checked to be its parent's child still, and on any doubt all is read
/// afresh.
pub fn subtree_since(
    proc_root: &Path,
    root: i32,
    tids: &mut dyn FnMut(i32) -> Vec<i32>,
    times: &dyn Fn(i32) -> Option<Times>,
    seen: &mut ChildrenSeen,
) -> Vec<i32> {
    let any_kept = std::cell::Cell::new(false);
    let mut children_of = |pid: i32, seen: &mut ChildrenSeen, trust: bool| -> Option<Vec<i32>> {
        let list = tids(pid);
        let mut out = Vec::new();
        let mut any = false;
        for tid in list {
            let now = times(tid);
            if let (true, Some(now), Some((then, kept))) = (trust, now, seen.0.get(&tid))
                && now == *then
            {
                any = true;
                any_kept.set(true);
                out.extend_from_slice(kept);
                continue;
            }
            // A thread that exits meanwhile takes its list with it.
            if let Ok(text) = fs::read_to_string(task_dir(proc_root, pid, tid).join("children")) {
                any = true;
                let kids: Vec<i32> = text.split_whitespace().filter_map(|c| c.parse().ok()).collect();
                out.extend_from_slice(&kids);
                match now {
                    Some(now) => seen.0.insert(tid, (now, kids)),
                    None => seen.0.remove(&tid),
                };
            }
        }
        any.then_some(out)
    };
    let mut walk = |seen: &mut ChildrenSeen, trust: bool| -> Option<Vec<i32>> {
        let mut next = children_of(root, seen, trust)?;
        let mut found = Vec::new();
        while let Some(p) = next.pop() {
            if p == root || found.contains(&p) {
                continue;
            }
            found.push(p);
            next.extend(children_of(p, seen, trust).unwrap_or_default());
        }
        Some(found)
    };
    let Some(mut found) = walk(seen, true) else {
        // No lists here (or the root is gone): the whole pass.
        return descendants(proc_root, &[root]).pop().unwrap_or_default();
    };
    if any_kept.get()
        && !found
            .iter()
            .all(|&p| parent(proc_root, p).is_some_and(|pp| pp == root || found.contains(&pp)))
    {
        found = walk(seen, false).unwrap_or_default();
    }
    found.sort_unstable();
    found
}

impl ChildrenSeen {
    /// Forgets the threads for which `alive` is false.
    pub fn retain(&mut self, alive: impl Fn(i32) -> bool) {
        self.0.retain(|tid, _| alive(*tid));
    }
}

/// The parent of process `pid`, from its main thread's `stat` (the whole
/// process's sums every thread's CPU time).
fn parent(proc_root: &Path, pid: i32) -> Option<i32> {
    let dir = proc_root.join(pid.to_string());
    let text = fs::read_to_string(dir.join("task").join(pid.to_string()).join("stat"))
        .or_else(|_| fs::read_to_string(dir.join("stat")))
        .ok()?;
    parse_ppid(&text)
}

/// Samples one thread once; `None` if it is gone (threads come and go
/// between listing and reading: that is normal, not an error). The live
/// sensor keeps a [`ThreadFiles`] open instead of calling this every period.
pub fn sample(proc_root: &Path, pid: i32, tid: i32) -> Option<ThreadSample> {
    ThreadFiles::open(proc_root, pid, tid)?.sample(&mut Vec::new())
}

/// The state letter of process `pid` (R, S, D, T, Z...), `None` once it is gone.
/// Read from its main thread's `stat`, which says the same letter: the
/// whole process's `stat` sums every thread's CPU time (23-27 µs a read at
/// 1,024 threads here, against 4 µs for the main thread's), and the live
/// world asks every turn.
pub fn state(proc_root: &Path, pid: i32) -> Option<char> {
    let dir = proc_root.join(pid.to_string());
    let text = fs::read_to_string(dir.join("task").join(pid.to_string()).join("stat"))
        .or_else(|_| fs::read_to_string(dir.join("stat")))
        .ok()?;
    parse_stat(&text).map(|s| s.state)
}

/// Whether a SIGSTOP sent to process `pid` is still pending (`ShdPnd` or
/// `SigPnd` in its `status`): a process waiting for a CPU takes its stop
/// only when it next runs, before it runs a line of its own. With 30
/// busy programs beside a batch on 2 CPUs, a stop was still pending after
/// herd's 50 ms wait.
pub fn stop_pending(proc_root: &Path, pid: i32) -> bool {
    fs::read_to_string(proc_root.join(pid.to_string()).join("status")).is_ok_and(|t| stop_in_status(&t))
}

/// Whether a `/proc/<pid>/status` text shows SIGSTOP pending.
fn stop_in_status(status: &str) -> bool {
    let bit = 1u64 << (libc::SIGSTOP - 1);
    status.lines().any(|line| {
        ["ShdPnd:", "SigPnd:"].iter().any(|key| {
            line.strip_prefix(key)
                .and_then(|mask| u64::from_str_radix(mask.trim(), 16).ok())
                .is_some_and(|mask| mask & bit != 0)
        })
    })
}

/// Process `pid`'s name (`comm`) and state letter, from one read of its
/// `stat`: a name may hold spaces and parentheses, so it runs to the last
/// `)`.
pub fn name_and_state(proc_root: &Path, pid: i32) -> Option<(String, char)> {
    let text = fs::read_to_string(proc_root.join(pid.to_string()).join("stat")).ok()?;
    let (_, rest) = text.split_once(" (")?;
    let (name, after) = rest.rsplit_once(") ")?;
    Some((name.to_string(), after.chars().next()?))
}

/// When process or thread `id` started, in clock ticks since boot (`stat`
/// field 22): with the id, it names one process for good, where an id
/// alone may be reused once the process is gone.
pub fn start_time(proc_root: &Path, id: i32) -> Option<u64> {
    stat_field(proc_root, id, 22)
}

/// The process (thread group) thread `tid` belongs to.
pub fn tgid(proc_root: &Path, tid: i32) -> Option<i32> {
    let text = fs::read_to_string(proc_root.join(tid.to_string()).join("status")).ok()?;
    text.lines()
        .find_map(|l| l.strip_prefix("Tgid:"))?
        .trim()
        .parse()
        .ok()
}

/// `/proc/<pid>/task/<tid>`.
fn task_dir(proc_root: &Path, pid: i32, tid: i32) -> std::path::PathBuf {
    proc_root.join(pid.to_string()).join("task").join(tid.to_string())
}

/// The kernel's exact migration count for a thread. `sched` is a large file
/// the kernel formats on every read, too costly for every thread every
/// period; the live sensor uses perf's `cpu-migrations` instead, and counts
/// changes of the last CPU where perf is not available.
pub fn sample_migrations(proc_root: &Path, pid: i32, tid: i32) -> Option<u64> {
    let path = task_dir(proc_root, pid, tid).join("sched");
    parse_migrations(&fs::read_to_string(path).ok()?)
}

/// A thread's `stat` and `schedstat`, kept open: re-reading an open /proc
/// file from offset 0 skips the path walk and open/close, which is most of
/// what sampling every thread every period costs. Where herd has no
/// descriptors to spare ([`ThreadFiles::by_path`]) it reads them by path
/// each time instead: slower, but the thread is still seen.
#[derive(Debug)]
pub struct ThreadFiles {
    tid: i32,
    kept: Option<(fs::File, Option<fs::File>)>,
    dir: PathBuf,
}

impl ThreadFiles {
    /// Opens thread `tid` of `pid` and keeps its files open; `None` if it
    /// is gone. Out of descriptors, it reads by path instead.
    pub fn open(proc_root: &Path, pid: i32, tid: i32) -> Option<ThreadFiles> {
        let dir = task_dir(proc_root, pid, tid);
        match fs::File::open(dir.join("stat")) {
            Ok(stat) => Some(ThreadFiles {
                tid,
                kept: Some((stat, fs::File::open(dir.join("schedstat")).ok())),
                dir,
            }),
            Err(e) if crate::fds::exhausted(&e) => Some(ThreadFiles { tid, kept: None, dir }),
            Err(_) => None,
        }
    }

    /// Thread `tid` of `pid`, read by path every time: no descriptor kept.
    pub fn by_path(proc_root: &Path, pid: i32, tid: i32) -> ThreadFiles {
        ThreadFiles {
            tid,
            kept: None,
            dir: task_dir(proc_root, pid, tid),
        }
    }

    /// Descriptors this keeps open.
    pub fn descriptors(&self) -> usize {
        self.kept
            .as_ref()
            .map_or(0, |(_, s)| 1 + usize::from(s.is_some()))
    }

    /// The thread's schedstat times now, where its schedstat is kept open;
    /// `None` otherwise or once it is gone.
    pub fn times(&self, buf: &mut Vec<u8>) -> Option<Times> {
        let (_, Some(schedstat)) = self.kept.as_ref()? else {
            return None;
        };
        read_all(schedstat, buf).and_then(parse_schedstat)
    }

    /// Samples the thread, or hands `last` back when its schedstat shows it
    /// neither ran nor waited for a CPU since, and it was not runnable
    /// then: such a thread is where it was, in the state it was, so its
    /// `stat` (four times the cost of its schedstat, most of a turn) need
    /// not be read. The second value says whether it was read. `None` once
    /// the thread is gone. Without schedstat (a kernel without
    /// `CONFIG_SCHED_INFO`) every sample is read in full.
    ///
    /// What this cannot see: a thread woken since `last` but not yet run
    /// (the kernel adds its wait to schedstat only when it gets a CPU), so
    /// the caller passes `last` only when no run queue holds waiting
    /// threads for long, and re-reads every thread now and then.
    /// `times_now`: its schedstat times read a moment ago this turn
    /// ([`ThreadFiles::times`]), not read again.
    pub fn sample_or_keep(
        &self,
        buf: &mut Vec<u8>,
        last: Option<&ThreadSample>,
        times_now: Option<Times>,
    ) -> Option<(ThreadSample, bool)> {
        let last = last.filter(|l| l.state != 'R');
        let Some((stat, Some(schedstat))) = &self.kept else {
            return self.sample(buf).map(|s| (s, true));
        };
        let times = match times_now {
            Some(times) => times,
            None if last.is_none() => return self.sample(buf).map(|s| (s, true)),
            None => match read_all(schedstat, buf).and_then(parse_schedstat) {
                Some(times) => times,
                None => return self.sample(buf).map(|s| (s, true)),
            },
        };
        if let Some(last) = last
            && times == last.times()
        {
            return Some((*last, false));
        }
        // It moved (or may not be kept): its stat now, with the schedstat
        // just read.
        Some((self.made(parse_stat(read_all(stat, buf)?)?, times), true))
    }

    /// Samples the thread; `None` once it is gone.
    pub fn sample(&self, buf: &mut Vec<u8>) -> Option<ThreadSample> {
        let (stat, times) = match &self.kept {
            Some((stat, schedstat)) => (
                parse_stat(read_all(stat, buf)?)?,
                schedstat
                    .as_ref()
                    .and_then(|f| parse_schedstat(read_all(f, buf)?))
                    .unwrap_or((0, 0, 0)),
            ),
            None => (
                parse_stat(&fs::read_to_string(self.dir.join("stat")).ok()?)?,
                fs::read_to_string(self.dir.join("schedstat"))
                    .ok()
                    .and_then(|t| parse_schedstat(&t))
                    .unwrap_or((0, 0, 0)),
            ),
        };
        Some(self.made(stat, times))
    }

    /// A sample of this thread from its stat and its schedstat's (run,
    /// wait, slices).
    fn made(&self, stat: Stat, (run_ns, wait_ns, slices): Times) -> ThreadSample {
        ThreadSample {
            tid: self.tid,
            state: stat.state,
            cpu: stat.cpu,
            run_ns,
            wait_ns,
            slices,
            start_ticks: stat.start_ticks,
            migrations: None,
            threads: stat.threads,
        }
    }
}

/// Reads an open /proc file from the start into `buf`.
fn read_all<'a>(file: &fs::File, buf: &'a mut Vec<u8>) -> Option<&'a str> {
    use std::os::unix::fs::FileExt;
    buf.resize(4096, 0);
    // A thread that has exited reads as an error (ESRCH) or as nothing.
    let n = file.read_at(buf, 0).ok().filter(|&n| n > 0)?;
    std::str::from_utf8(&buf[..n]).ok()
}

/// The CPUs thread `tid` of `pid` may run on, as the kernel reports them.
pub fn allowed(proc_root: &Path, pid: i32, tid: i32) -> Option<CpuSet> {
    let path = task_dir(proc_root, pid, tid).join("status");
    parse_allowed(&fs::read_to_string(path).ok()?)
}

#[cfg(test)]
mod tests {

    #[test]
    fn a_pending_stop_is_read_from_either_mask() {
        let status = |shared: &str, own: &str| {
            format!("SigPnd:\t{own}\nShdPnd:\t{shared}\nSigBlk:\t0000000000040000\n")
        };
        assert!(!stop_in_status(&status("0000000000000000", "0000000000000000")));
        // SIGSTOP is signal 19: bit 18.
        assert!(stop_in_status(&status("0000000000040000", "0000000000000000")));
        assert!(stop_in_status(&status("0000000000000000", "0000000000040001")));
        // SIGCONT (18) pending is not a stop; a blocked mask is not pending.
        assert!(!stop_in_status(&status("0000000000020000", "0000000000000000")));
        assert!(
            !stop_pending(Path::new("/proc"), std::process::id() as i32),
            "this process runs"
        );
        assert!(!stop_pending(Path::new("/proc"), i32::MAX), "a missing process");
    }

    #[test]
    fn cpu_idle_is_idle_plus_iowait_per_cpu() {
        let text =
            "cpu  10 0 5 100 3 0 0 0 0 0\ncpu0 5 0 2 40 1 0 0 0 0 0\ncpu1 5 0 3 60 2 0 0 0 0 0\nintr 7\n";
        assert_eq!(parse_cpu_idle(text), vec![(0, 41), (1, 62)]);
        assert!(parse_cpu_idle("cpu0 1 2\n").is_empty(), "a short line is skipped");
    }

    use super::*;

    #[test]
    fn descendants_follow_parents_through_generations() {
        let dir = tempfile::tempdir().unwrap();
        let proc_stat = |pid: i32, ppid: i32| {
            let d = dir.path().join(pid.to_string());
            fs::create_dir_all(&d).unwrap();
            fs::write(d.join("stat"), format!("{pid} (a (b) c) S {ppid} 1 1 0")).unwrap();
        };
        proc_stat(10, 1);
        proc_stat(11, 10);
        proc_stat(12, 11);
        proc_stat(13, 1);
        proc_stat(14, 13);
        fs::create_dir_all(dir.path().join("self")).unwrap();
        assert_eq!(
            descendants(dir.path(), &[10, 13, 99]),
            vec![vec![11, 12], vec![14], Vec::<i32>::new()]
        );
        assert_eq!(parse_ppid("5 (x) R 4 5"), Some(4));
    }

    #[test]
    fn start_time_is_field_22() {
        let dir = tempfile::tempdir().unwrap();
        fs::create_dir_all(dir.path().join("7")).unwrap();
        let fields: Vec<String> = (4..=22).map(|i| i.to_string()).collect();
        fs::write(
            dir.path().join("7/stat"),
            format!("7 (a) b) S {}", fields.join(" ")),
        )
        .unwrap();
        assert_eq!(start_time(dir.path(), 7), Some(22));
        assert!(start_time(Path::new("/proc"), std::process::id() as i32).is_some());
    }

    #[test]
    fn the_last_pid_moves_with_a_fork_and_not_without() {
        assert_eq!(parse_last_pid("0.52 0.58 0.59 2/80 12345\n"), Some(12345));
        assert_eq!(parse_last_pid("0.52 0.58 0.59 2/80"), None);
        let root = Path::new("/proc");
        let before = last_pid(root).expect("this kernel's /proc/loadavg");
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let _ = child.wait();
        let after = last_pid(root).unwrap();
        assert_ne!(before, after, "a fork takes a new id");
        assert!(
            after >= child.id() as i32 || after < before,
            "the child's id or a later one, or wrapped"
        );
    }

    /// A fake `<root>/<pid>/task/<tid>/children` holding `list`.
    fn write_children(root: &Path, pid: i32, tid: i32, list: &str) {
        let d = root.join(format!("{pid}/task/{tid}"));
        fs::create_dir_all(&d).unwrap();
        fs::write(d.join("children"), list).unwrap();
    }

    #[test]
    fn a_subtree_follows_every_threads_children_lists() {
        let dir = tempfile::tempdir().unwrap();
        let children = |pid: i32, tid: i32, list: &str| write_children(dir.path(), pid, tid, list);
        // 10 forked 11 from its main thread and 12 from another; 11 forked 13.
        children(10, 10, "11 ");
        children(10, 15, "12 ");
        children(11, 11, "13 ");
        children(12, 12, "");
        children(13, 13, "");
        assert_eq!(subtree(dir.path(), 10), vec![11, 12, 13]);
        assert_eq!(subtree(dir.path(), 13), Vec::<i32>::new());
        // The real thing: a child of this test process is found.
        let me = std::process::id() as i32;
        let mut child = std::process::Command::new("sleep").arg("5").spawn().unwrap();
        assert!(subtree(Path::new("/proc"), me).contains(&(child.id() as i32)));
        child.kill().unwrap();
        child.wait().unwrap();
    }

    /// Issue 28: a thread that has not run since its list was read is not
    /// read again; one that ran is; a kept list naming a process that is
    /// no longer its parent's child makes the whole tree read afresh.
    #[test]
    fn a_subtree_reads_again_only_the_lists_of_threads_that_ran() {
        let dir = tempfile::tempdir().unwrap();
        let children = |pid: i32, tid: i32, list: &str| write_children(dir.path(), pid, tid, list);
        let stat = |pid: i32, ppid: i32| {
            let d = dir.path().join(format!("{pid}/task/{pid}"));
            fs::create_dir_all(&d).unwrap();
            fs::write(d.join("stat"), format!("{pid} (p) S {ppid} 1 1 0")).unwrap();
        };
        children(10, 10, "");
        children(10, 15, "12");
        children(12, 12, "");
        stat(12, 10);
        let ran = std::cell::Cell::new(1u64);
        let times = |tid: i32| Some(if tid == 15 { (ran.get(), 0, 1) } else { (1, 0, 1) });
        let mut tids = |pid: i32| threads(dir.path(), pid);
        let mut seen = ChildrenSeen::default();
        assert_eq!(
            subtree_since(dir.path(), 10, &mut tids, &times, &mut seen),
            vec![12]
        );
        // Thread 15 forks 13 without (as far as schedstat says) running:
        // impossible for a real thread, so the file is not read.
        children(10, 15, "12 13");
        children(13, 13, "");
        stat(13, 10);
        assert_eq!(
            subtree_since(dir.path(), 10, &mut tids, &times, &mut seen),
            vec![12]
        );
        // It ran: read again.
        ran.set(2);
        assert_eq!(
            subtree_since(dir.path(), 10, &mut tids, &times, &mut seen),
            vec![12, 13]
        );
        // 12 exits and its pid goes to a process that is not 10's child:
        // the kept list would name it, the check sees it, all is read again.
        children(10, 15, "13");
        stat(12, 1);
        assert_eq!(
            subtree_since(dir.path(), 10, &mut tids, &times, &mut seen),
            vec![13]
        );
    }

    #[test]
    fn procs_running_and_online_cpus() {
        let text = "cpu  1 2 3\ncpu0 1 1 1\ncpu1 0 1 2\nintr 5\nctxt 9\nprocs_running 3\nprocs_blocked 0\n";
        assert_eq!(parse_runnable(text), Some((3, 2)));
        assert_eq!(parse_runnable("cpu0 1\n"), None);
        let real = fs::read_to_string("/proc/stat").unwrap();
        let (running, cpus) = parse_runnable(&real).unwrap();
        assert!(running >= 1 && cpus >= 1, "{running} {cpus}");
    }

    /// Issue 28: a thread last seen asleep whose schedstat has not moved
    /// keeps its sample (its `stat` is not read); one whose schedstat
    /// moved, or last seen runnable, is read.
    #[test]
    fn a_sample_is_kept_only_for_a_thread_asleep_that_did_not_run() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path().join("7/task/8");
        fs::create_dir_all(&d).unwrap();
        let write = |state: char, schedstat: &str| {
            let fields =
                "1 1 1 0 -1 0 0 0 0 0 5 5 0 0 20 0 1 0 100 1 1 1 1 1 0 0 0 0 0 0 0 0 0 0 17 3 0 0 0 0 0";
            fs::write(d.join("stat"), format!("8 (w) {state} {fields}")).unwrap();
            fs::write(d.join("schedstat"), schedstat).unwrap();
        };
        write('S', "100 20 3\n");
        let files = ThreadFiles::open(dir.path(), 7, 8).unwrap();
        let mut buf = Vec::new();
        let (first, read) = files.sample_or_keep(&mut buf, None, None).unwrap();
        assert!(read);
        assert_eq!(
            (first.state, first.cpu, first.run_ns, first.wait_ns),
            ('S', 3, 100, 20)
        );
        // Woken onto CPU 2 but not yet run: schedstat the same.
        write('R', "100 20 3\n");
        assert_eq!(
            files.sample_or_keep(&mut buf, Some(&first), None),
            Some((first, false))
        );
        // It ran.
        write('R', "150 20 4\n");
        let (ran, read) = files.sample_or_keep(&mut buf, Some(&first), None).unwrap();
        assert!(read);
        assert_eq!((ran.state, ran.run_ns), ('R', 150));
        // Runnable last time: read whatever schedstat says.
        assert!(files.sample_or_keep(&mut buf, Some(&ran), None).unwrap().1);
        // It waited for a CPU (dequeued unrun): its wait moved, so read.
        write('S', "100 25 3\n");
        assert!(files.sample_or_keep(&mut buf, Some(&first), None).unwrap().1);
        // Gone (a kept /proc file of an exited thread reads as an error or
        // nothing): None, kept sample or not.
        fs::write(d.join("stat"), "").unwrap();
        fs::write(d.join("schedstat"), "").unwrap();
        assert_eq!(files.sample_or_keep(&mut buf, Some(&first), None), None);
        assert_eq!(files.sample_or_keep(&mut buf, None, None), None);
    }

    #[test]
    fn numa_maps_count_memory_per_node_with_page_sizes() {
        let text = "7f00 default anon=3 dirty=3 N0=2 N1=1 kernelpagesize_kB=4\n\
                    7f80 bind:1 huge anon=2 N1=2 kernelpagesize_kB=2048\n\
                    7fa0 default file=/lib/x.so mapped=5 N0=5\n";
        assert_eq!(parse_numa_maps(text), vec![(0, 28), (1, 4100)]);
        assert!(parse_numa_maps("garbage N=x Nq=1\n").is_empty());
        // This thread is running while it reads its own stat (its name is
        // the test's, cut to 15 bytes, which may hold spaces or colons).
        // SAFETY: gettid has no preconditions.
        let me = unsafe { libc::gettid() };
        let comm = fs::read_to_string(format!("/proc/{me}/comm")).unwrap();
        assert_eq!(
            name_and_state(Path::new("/proc"), me),
            Some((comm.trim_end_matches('\n').to_string(), 'R'))
        );
        let mut sum = vec![(1, 10)];
        add_node_kb(&mut sum, &[(0, 5), (1, 2), (3, 7)]);
        assert_eq!(sum, vec![(0, 5), (1, 12), (3, 7)]);
        let me = numa_memory_kb(Path::new("/proc"), std::process::id() as i32);
        // Where the kernel has NUMA support, this process has memory somewhere.
        if let Some(nodes) = me {
            assert!(nodes.iter().map(|(_, kb)| kb).sum::<u64>() > 0, "{nodes:?}");
        }
    }

    #[test]
    fn stat_survives_odd_command_names() {
        let text = "4242 (my (odd) prog) R 1 4242 4242 0 -1 4194304 100 0 0 0 7 3 0 0 20 0 3 0 100 \
                    1000 10 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0";
        assert_eq!(
            parse_stat(text),
            Some(Stat {
                state: 'R',
                cpu: 1,
                start_ticks: 100,
                threads: 3
            })
        );
        assert_eq!(parse_stat("garbage"), None);
    }

    #[test]
    fn schedstat_sched_and_status() {
        assert_eq!(
            parse_schedstat("739276038 122338455 1616\n"),
            Some((739276038, 122338455, 1616))
        );
        assert_eq!(parse_schedstat(""), None);
        // A kernel that writes two fields: no count of times on a CPU.
        assert_eq!(parse_schedstat("5 6"), Some((5, 6, 0)));
        let sched = "bash (1412, #threads: 1)\n---\nse.exec_start : 1.0\nse.nr_migrations                             :                  321\n";
        assert_eq!(parse_migrations(sched), Some(321));
        let status = "Name:\tbash\nCpus_allowed:\t3\nCpus_allowed_list:\t0-1\n";
        assert_eq!(parse_allowed(status).unwrap().to_string(), "0-1");
    }

    #[test]
    fn this_process_can_be_read() {
        let pid = std::process::id() as i32;
        let tids = threads(Path::new("/proc"), pid);
        assert!(tids.contains(&pid));
        let s = sample(Path::new("/proc"), pid, pid).expect("own main thread");
        assert!(s.run_ns > 0 || s.state != 'Z');
        assert!(sample_migrations(Path::new("/proc"), pid, pid).is_some());
        assert!(allowed(Path::new("/proc"), pid, pid).is_some_and(|c| !c.is_empty()));
        assert!(
            sample(Path::new("/proc"), pid, i32::MAX).is_none(),
            "a missing thread is None"
        );
    }
}
