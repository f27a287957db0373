//! herd's immutable machine model and the builder every loader goes through.

use crate::{CpuSet, TopoError};

/// One hardware thread (what Linux calls a CPU), known by its OS index.
#[derive(Debug, Clone, PartialEq)]
pub struct Cpu {
    /// The OS index, as in `/sys/devices/system/cpu/cpuN` and affinity masks.
    pub os: u32,
    /// Index into [`Machine::cores`].
    pub core: usize,
    /// Index into [`Machine::llcs`]; `None` when the machine reports no shared cache.
    pub llc: Option<usize>,
    /// Index into [`Machine::numa_nodes`] of the node local to this CPU.
    pub numa: usize,
    /// Index into [`Machine::packages`].
    pub package: usize,
    /// Index into [`Machine::kinds`].
    pub kind: usize,
}

/// A physical core: one or more SMT siblings.
#[derive(Debug, Clone, PartialEq)]
pub struct Core {
    /// The core's OS index when the source gives one (it is not unique across packages).
    pub os: Option<u32>,
    /// Index into [`Machine::packages`].
    pub package: usize,
    /// The SMT siblings of this core, the core's CPUs.
    pub cpus: CpuSet,
    /// Index into [`Machine::kinds`].
    pub kind: usize,
}

/// A last-level-cache domain: the CPUs that share the L3 (else the largest shared cache).
#[derive(Debug, Clone, PartialEq)]
pub struct Llc {
    /// Cache level (3 for an L3).
    pub level: u8,
    /// Cache size when known.
    pub size_bytes: Option<u64>,
    /// CPUs sharing this cache.
    pub cpus: CpuSet,
}

/// A NUMA node. Memory-only nodes (no local CPUs) are included.
#[derive(Debug, Clone, PartialEq)]
pub struct NumaNode {
    /// The OS index, as in `/sys/devices/system/node/nodeN`.
    pub os: u32,
    /// Memory size when known.
    pub memory_bytes: Option<u64>,
    /// CPUs whose local node this is; empty for a memory-only node.
    pub cpus: CpuSet,
    /// The package the node sits in, when it sits in exactly one.
    pub package: Option<usize>,
}

/// A processor package (socket).
#[derive(Debug, Clone, PartialEq)]
pub struct Package {
    /// The OS index when the source gives one.
    pub os: Option<u32>,
    /// CPUs in the package.
    pub cpus: CpuSet,
}

/// A kind of core (hybrid machines have several), with its relative capacity.
#[derive(Debug, Clone, PartialEq)]
pub struct CoreKind {
    /// Compute capacity relative to the strongest kind, which has 1.0.
    pub capacity: f64,
    /// A short label, e.g. `IntelCore`, `IntelAtom`, `fast`.
    pub label: String,
    /// Maximum frequency when known.
    pub max_freq_mhz: Option<u32>,
    /// CPUs of this kind.
    pub cpus: CpuSet,
}

/// The machine: packages, NUMA nodes, LLC domains, cores, CPUs and core kinds.
///
/// Indices (`core`, `llc`, `numa`, `package`, `kind`) are dense positions in
/// the corresponding vectors, in the source's logical order. CPU sets use OS
/// indices. Kinds are ordered weakest first, as hwloc orders them.
#[derive(Debug, Clone, PartialEq)]
pub struct Machine {
    /// Where the machine came from (a file, a spec, "this machine").
    pub source: String,
    cpus: Vec<Cpu>,
    cores: Vec<Core>,
    llcs: Vec<Llc>,
    numa_nodes: Vec<NumaNode>,
    packages: Vec<Package>,
    kinds: Vec<CoreKind>,
    numa_distances: Option<Vec<Vec<f64>>>,
    all: CpuSet,
    // OS index -> position in `cpus`; u32::MAX where no CPU has that index.
    by_os: Vec<u32>,
}

impl Machine {
    /// This machine with only the CPUs in `keep`: cores, caches, NUMA
    /// nodes, packages and kinds left without a CPU are dropped, and the
    /// NUMA distances kept for the nodes that remain. What a herd run
    /// places on when other herd instances hold some CPUs.
    pub fn restricted(&self, keep: &CpuSet) -> Result<Machine, TopoError> {
        let mut b = MachineBuilder::new(format!("{} (CPUs {keep})", self.source));
        let mut packages: Vec<Option<usize>> = vec![None; self.packages.len()];
        let mut nodes: Vec<Option<usize>> = vec![None; self.numa_nodes.len()];
        let mut llcs: Vec<Option<usize>> = vec![None; self.llcs.len()];
        let mut kinds: Vec<Option<usize>> = vec![None; self.kinds.len()];
        let mut kept_nodes = Vec::new();
        for core in &self.cores {
            let cpus: Vec<u32> = core.cpus.iter().filter(|c| keep.contains(*c)).collect();
            let Some(first) = cpus.first().and_then(|&c| self.cpu(c)) else {
                continue;
            };
            let package =
                *packages[core.package].get_or_insert_with(|| b.package(self.packages[core.package].os));
            let numa = match nodes[first.numa] {
                Some(n) => n,
                None => {
                    let node = &self.numa_nodes[first.numa];
                    let pkg = node
                        .package
                        .map(|p| *packages[p].get_or_insert_with(|| b.package(self.packages[p].os)));
                    kept_nodes.push(first.numa);
                    *nodes[first.numa].insert(b.numa_node(node.os, pkg, node.memory_bytes))
                }
            };
            let llc = first
                .llc
                .map(|l| *llcs[l].get_or_insert_with(|| b.llc(self.llcs[l].level, self.llcs[l].size_bytes)));
            let kind = *kinds[core.kind].get_or_insert_with(|| {
                let k = &self.kinds[core.kind];
                b.kind(k.capacity, k.label.clone(), k.max_freq_mhz)
            });
            b.core(package, numa, llc, kind, core.os, &cpus);
        }
        if let Some(d) = &self.numa_distances {
            b.numa_distances(
                kept_nodes
                    .iter()
                    .map(|&i| kept_nodes.iter().map(|&j| d[i][j]).collect())
                    .collect(),
            );
        }
        b.build()
    }

    /// CPUs in ascending OS index order.
    pub fn cpus(&self) -> &[Cpu] {
        &self.cpus
    }
    /// Physical cores.
    pub fn cores(&self) -> &[Core] {
        &self.cores
    }
    /// Last-level-cache domains.
    pub fn llcs(&self) -> &[Llc] {
        &self.llcs
    }
    /// NUMA nodes, memory-only ones included.
    pub fn numa_nodes(&self) -> &[NumaNode] {
        &self.numa_nodes
    }
    /// Packages.
    pub fn packages(&self) -> &[Package] {
        &self.packages
    }
    /// Core kinds, weakest first; a machine with no kind information has one.
    pub fn kinds(&self) -> &[CoreKind] {
        &self.kinds
    }
    /// Relative NUMA distances (10 = local, as in ACPI SLIT), indexed by node position.
    pub fn numa_distances(&self) -> Option<&[Vec<f64>]> {
        self.numa_distances.as_deref()
    }
    /// Every CPU of the machine.
    pub fn all_cpus(&self) -> &CpuSet {
        &self.all
    }
    /// The CPU with OS index `os`.
    pub fn cpu(&self, os: u32) -> Option<&Cpu> {
        let pos = *self.by_os.get(os as usize)?;
        self.cpus.get(pos as usize)
    }
    /// The most hardware threads any core has (1 without SMT).
    pub fn smt_max(&self) -> usize {
        self.cores.iter().map(|c| c.cpus.len()).max().unwrap_or(0)
    }
    /// The SMT siblings of CPU `os`, itself included.
    pub fn siblings(&self, os: u32) -> Option<&CpuSet> {
        self.cpu(os).map(|c| &self.cores[c.core].cpus)
    }
    /// Whether the machine has more than one core kind.
    pub fn is_asymmetric(&self) -> bool {
        self.kinds.len() > 1
    }
    /// The relative capacity of the core that CPU `os` belongs to.
    pub fn capacity(&self, os: u32) -> Option<f64> {
        self.cpu(os).map(|c| self.kinds[c.kind].capacity)
    }
}

/// Builds a [`Machine`] core by core; every loader (hwloc, synthetic specs,
/// tests) goes through it, so the invariants are checked in one place.
///
/// ```
/// use herd_topo::MachineBuilder;
/// let mut b = MachineBuilder::new("two cores");
/// let pkg = b.package(Some(0));
/// let node = b.numa_node(0, Some(pkg), None);
/// let llc = b.llc(3, None);
/// let kind = b.kind(1.0, "core", None);
/// b.core(pkg, node, Some(llc), kind, None, &[0]);
/// b.core(pkg, node, Some(llc), kind, None, &[1]);
/// assert_eq!(b.build().unwrap().cpus().len(), 2);
/// ```
#[derive(Debug, Clone, Default)]
pub struct MachineBuilder {
    source: String,
    packages: Vec<Option<u32>>,
    numa: Vec<(u32, Option<usize>, Option<u64>)>,
    llcs: Vec<(u8, Option<u64>)>,
    kinds: Vec<(f64, String, Option<u32>)>,
    cores: Vec<CoreSpec>,
    distances: Option<Vec<Vec<f64>>>,
}

#[derive(Debug, Clone)]
struct CoreSpec {
    package: usize,
    numa: usize,
    llc: Option<usize>,
    kind: usize,
    os: Option<u32>,
    cpus: Vec<u32>,
}

impl MachineBuilder {
    /// A builder for a machine described by `source`.
    pub fn new(source: impl Into<String>) -> Self {
        Self {
            source: source.into(),
            ..Self::default()
        }
    }
    /// Adds a package; returns its index.
    pub fn package(&mut self, os: Option<u32>) -> usize {
        self.packages.push(os);
        self.packages.len() - 1
    }
    /// Adds a NUMA node; returns its index.
    pub fn numa_node(&mut self, os: u32, package: Option<usize>, memory_bytes: Option<u64>) -> usize {
        self.numa.push((os, package, memory_bytes));
        self.numa.len() - 1
    }
    /// Adds an LLC domain; returns its index.
    pub fn llc(&mut self, level: u8, size_bytes: Option<u64>) -> usize {
        self.llcs.push((level, size_bytes));
        self.llcs.len() - 1
    }
    /// Adds a core kind; returns its index. Kinds are re-ordered weakest first by `build`.
    pub fn kind(&mut self, capacity: f64, label: impl Into<String>, max_freq_mhz: Option<u32>) -> usize {
        self.kinds.push((capacity, label.into(), max_freq_mhz));
        self.kinds.len() - 1
    }
    /// Adds a core with its CPUs (OS indices); returns its index.
    pub fn core(
        &mut self,
        package: usize,
        numa: usize,
        llc: Option<usize>,
        kind: usize,
        os: Option<u32>,
        cpus: &[u32],
    ) -> usize {
        self.cores.push(CoreSpec {
            package,
            numa,
            llc,
            kind,
            os,
            cpus: cpus.to_vec(),
        });
        self.cores.len() - 1
    }
    /// Sets the NUMA distance matrix, indexed by node position.
    pub fn numa_distances(&mut self, matrix: Vec<Vec<f64>>) {
        self.distances = Some(matrix);
    }

    /// Checks the invariants and freezes the machine.
    pub fn build(self) -> Result<Machine, TopoError> {
        let invalid = |why: String| {
            Err(TopoError::Invalid {
                input: self.source.clone(),
                why,
            })
        };
        if self.cores.is_empty() {
            return invalid("the machine has no cores".into());
        }
        for (i, (cap, label, _)) in self.kinds.iter().enumerate() {
            if !(cap.is_finite() && *cap > 0.0 && *cap <= 1.0) {
                return invalid(format!(
                    "core kind {i} ({label}) has capacity {cap}; it must be in (0, 1]"
                ));
            }
        }
        // Kinds weakest first, ties in insertion order; `remap` is old -> new index.
        let mut order: Vec<usize> = (0..self.kinds.len()).collect();
        order.sort_by(|&a, &b| self.kinds[a].0.total_cmp(&self.kinds[b].0));
        let mut remap = vec![0; order.len()];
        for (new, &old) in order.iter().enumerate() {
            remap[old] = new;
        }
        let mut kinds: Vec<CoreKind> = order
            .iter()
            .map(|&i| CoreKind {
                capacity: self.kinds[i].0,
                label: self.kinds[i].1.clone(),
                max_freq_mhz: self.kinds[i].2,
                cpus: CpuSet::new(),
            })
            .collect();
        let mut packages: Vec<Package> = self
            .packages
            .iter()
            .map(|&os| Package {
                os,
                cpus: CpuSet::new(),
            })
            .collect();
        let mut llcs: Vec<Llc> = self
            .llcs
            .iter()
            .map(|&(level, size_bytes)| Llc {
                level,
                size_bytes,
                cpus: CpuSet::new(),
            })
            .collect();
        let mut numa_nodes: Vec<NumaNode> = self
            .numa
            .iter()
            .map(|&(os, package, memory_bytes)| NumaNode {
                os,
                memory_bytes,
                cpus: CpuSet::new(),
                package,
            })
            .collect();
        if numa_nodes
            .iter()
            .any(|n| n.package.is_some_and(|p| p >= packages.len()))
        {
            return invalid("a NUMA node names a package that does not exist".into());
        }
        let mut cpus = Vec::new();
        let mut cores = Vec::with_capacity(self.cores.len());
        let mut all = CpuSet::new();
        for (ci, spec) in self.cores.iter().enumerate() {
            if spec.cpus.is_empty() {
                return invalid(format!("core {ci} has no CPUs"));
            }
            if spec.package >= packages.len()
                || spec.numa >= numa_nodes.len()
                || spec.kind >= kinds.len()
                || spec.llc.is_some_and(|l| l >= llcs.len())
            {
                return invalid(format!(
                    "core {ci} names a package, node, cache or kind that does not exist"
                ));
            }
            let kind = remap[spec.kind];
            let mut set = CpuSet::new();
            for &os in &spec.cpus {
                if os >= crate::cpuset::MAX_CPUS {
                    return invalid(format!(
                        "CPU {os} is beyond the supported {}",
                        crate::cpuset::MAX_CPUS
                    ));
                }
                if !all.insert(os) {
                    return invalid(format!("CPU {os} appears twice"));
                }
                set.insert(os);
                cpus.push(Cpu {
                    os,
                    core: ci,
                    llc: spec.llc,
                    numa: spec.numa,
                    package: spec.package,
                    kind,
                });
            }
            packages[spec.package].cpus = packages[spec.package].cpus.union(&set);
            numa_nodes[spec.numa].cpus = numa_nodes[spec.numa].cpus.union(&set);
            kinds[kind].cpus = kinds[kind].cpus.union(&set);
            if let Some(l) = spec.llc {
                llcs[l].cpus = llcs[l].cpus.union(&set);
            }
            cores.push(Core {
                os: spec.os,
                package: spec.package,
                cpus: set,
                kind,
            });
        }
        if let Some(i) = kinds.iter().position(|k| k.cpus.is_empty()) {
            return invalid(format!("core kind {i} ({}) has no CPUs", kinds[i].label));
        }
        if let Some(m) = &self.distances {
            let n = numa_nodes.len();
            if m.len() != n
                || m.iter()
                    .any(|row| row.len() != n || row.iter().any(|d| !d.is_finite() || *d <= 0.0))
            {
                return invalid(format!(
                    "the NUMA distance matrix must be {n}x{n} positive numbers"
                ));
            }
        }
        cpus.sort_by_key(|c| c.os);
        let max_os = cpus.last().map_or(0, |c| c.os as usize);
        let mut by_os = vec![u32::MAX; max_os + 1];
        for (pos, c) in cpus.iter().enumerate() {
            by_os[c.os as usize] = pos as u32;
        }
        Ok(Machine {
            source: self.source,
            cpus,
            cores,
            llcs,
            numa_nodes,
            packages,
            kinds,
            numa_distances: self.distances,
            all,
            by_os,
        })
    }
}
