//! `herd topo`: the machine as a tree or as JSON (schema in docs/json.md).

use std::fmt::Write;

use clap::Args;
use herd_topo::Machine;
use serde::Serialize;

use crate::common::{Failure, MachineArgs};
use crate::output;

/// Arguments of `herd topo`.
#[derive(Args, Debug)]
pub struct TopoArgs {
    #[command(flatten)]
    machine: MachineArgs,
    /// Print JSON instead of a tree.
    #[arg(long)]
    json: bool,
}

/// `herd topo`.
pub fn run(args: &TopoArgs) -> Result<(), Failure> {
    let m = args.machine.load()?;
    if args.json {
        output::print_json(&TopoJson::from(&m))?;
    } else {
        output::print(&tree(&m))?;
    }
    Ok(())
}

/// The JSON document of `herd topo --json`.
#[derive(Serialize)]
pub struct TopoJson {
    source: String,
    cpus: usize,
    cores: usize,
    packages: usize,
    numa_nodes: usize,
    llcs: usize,
    smt_max: usize,
    kinds: Vec<KindJson>,
    cpu_list: Vec<CpuJson>,
    numa_list: Vec<NumaJson>,
    numa_distances: Option<Vec<Vec<f64>>>,
}

#[derive(Serialize)]
struct KindJson {
    id: usize,
    label: String,
    capacity: f64,
    max_freq_mhz: Option<u32>,
    cpus: Vec<u32>,
}

#[derive(Serialize)]
struct CpuJson {
    os: u32,
    core: usize,
    llc: Option<usize>,
    numa: usize,
    package: usize,
    kind: usize,
    siblings: Vec<u32>,
}

#[derive(Serialize)]
struct NumaJson {
    id: usize,
    os: u32,
    package: Option<usize>,
    memory_bytes: Option<u64>,
    cpus: Vec<u32>,
}

impl From<&Machine> for TopoJson {
    fn from(m: &Machine) -> Self {
        TopoJson {
            source: m.source.clone(),
            cpus: m.cpus().len(),
            cores: m.cores().len(),
            packages: m.packages().len(),
            numa_nodes: m.numa_nodes().len(),
            llcs: m.llcs().len(),
            smt_max: m.smt_max(),
            kinds: m
                .kinds()
                .iter()
                .enumerate()
                .map(|(id, k)| KindJson {
                    id,
                    label: k.label.clone(),
                    capacity: k.capacity,
                    max_freq_mhz: k.max_freq_mhz,
                    cpus: k.cpus.iter().collect(),
                })
                .collect(),
            cpu_list: m
                .cpus()
                .iter()
                .map(|c| CpuJson {
                    os: c.os,
                    core: c.core,
                    llc: c.llc,
                    numa: c.numa,
                    package: c.package,
                    kind: c.kind,
                    siblings: m.cores()[c.core].cpus.iter().collect(),
                })
                .collect(),
            numa_list: m
                .numa_nodes()
                .iter()
                .enumerate()
                .map(|(id, n)| NumaJson {
                    id,
                    os: n.os,
                    package: n.package,
                    memory_bytes: n.memory_bytes,
                    cpus: n.cpus.iter().collect(),
                })
                .collect(),
            numa_distances: m.numa_distances().map(<[_]>::to_vec),
        }
    }
}

fn plural(n: usize, word: &str) -> String {
    if n == 1 {
        format!("{n} {word}")
    } else {
        format!("{n} {word}s")
    }
}

fn bytes(n: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = n as f64;
    let mut unit = 0;
    while v >= 1024.0 && unit + 1 < UNITS.len() {
        v /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{n} B")
    } else {
        format!("{v:.1} {}", UNITS[unit])
    }
}

/// An lstopo-like tree: package > NUMA node > LLC > core > CPUs, with SMT
/// siblings and core kinds marked.
pub fn tree(m: &Machine) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "Machine ({})", m.source);
    let _ = writeln!(
        s,
        "  {}, {}, {}, {}, {}, {} per core, {}",
        plural(m.cpus().len(), "CPU"),
        plural(m.cores().len(), "core"),
        plural(m.packages().len(), "package"),
        plural(m.numa_nodes().len(), "NUMA node"),
        plural(m.llcs().len(), "LLC"),
        plural(m.smt_max(), "thread"),
        plural(m.kinds().len(), "core kind"),
    );
    for (i, k) in m.kinds().iter().enumerate() {
        let freq = k
            .max_freq_mhz
            .map(|f| format!(", max {f} MHz"))
            .unwrap_or_default();
        let _ = writeln!(
            s,
            "  kind {i}: {} capacity {:.2}{freq}: CPUs {}",
            k.label, k.capacity, k.cpus
        );
    }
    let node_line = |s: &mut String, indent: &str, id: usize| {
        let n = &m.numa_nodes()[id];
        let mem = n
            .memory_bytes
            .map(|b| format!(" ({})", bytes(b)))
            .unwrap_or_default();
        let only = if n.cpus.is_empty() { " memory only" } else { "" };
        let _ = writeln!(s, "{indent}NUMANode N#{}{mem}{only}", n.os);
    };
    for (p, pkg) in m.packages().iter().enumerate() {
        let os = pkg.os.map(|o| format!(" P#{o}")).unwrap_or_default();
        let _ = writeln!(s, "  Package{os}");
        for (id, node) in m.numa_nodes().iter().enumerate() {
            if node.package != Some(p) && !(node.package.is_none() && node.cpus.intersects(&pkg.cpus)) {
                continue;
            }
            node_line(&mut s, "    ", id);
            let cores: Vec<usize> = (0..m.cores().len())
                .filter(|&c| m.cores()[c].package == p && core_node(m, c) == id)
                .collect();
            write_cores_by_llc(&mut s, m, &cores);
        }
    }
    for (id, node) in m.numa_nodes().iter().enumerate() {
        if node.package.is_none() && !m.packages().iter().any(|p| node.cpus.intersects(&p.cpus)) {
            node_line(&mut s, "  ", id);
        }
    }
    s
}

fn core_node(m: &Machine, core: usize) -> usize {
    let first = m.cores()[core].cpus.first().and_then(|os| m.cpu(os));
    first.map_or(0, |c| c.numa)
}

fn write_cores_by_llc(s: &mut String, m: &Machine, cores: &[usize]) {
    let llc_of = |c: usize| {
        m.cores()[c]
            .cpus
            .first()
            .and_then(|os| m.cpu(os))
            .and_then(|cpu| cpu.llc)
    };
    let mut llcs: Vec<Option<usize>> = Vec::new();
    for &c in cores {
        if !llcs.contains(&llc_of(c)) {
            llcs.push(llc_of(c));
        }
    }
    for llc in llcs {
        let indent = match llc {
            Some(l) => {
                let cache = &m.llcs()[l];
                let size = cache
                    .size_bytes
                    .map(|b| format!(" ({})", bytes(b)))
                    .unwrap_or_default();
                let _ = writeln!(s, "      L{} #{l}{size}", cache.level);
                "        "
            }
            None => "      ",
        };
        for &c in cores.iter().filter(|&&c| llc_of(c) == llc) {
            let core = &m.cores()[c];
            let kind = if m.is_asymmetric() {
                let k = &m.kinds()[core.kind];
                format!(" [{} {:.2}]", k.label, k.capacity)
            } else {
                String::new()
            };
            let cpus = if core.cpus.len() > 1 {
                format!("CPUs {} (SMT siblings)", core.cpus)
            } else {
                format!("CPU {}", core.cpus)
            };
            let _ = writeln!(s, "{indent}Core #{c}{kind}: {cpus}");
        }
    }
}
