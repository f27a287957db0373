//! Loading a [`Machine`] through hwloc: this machine, an XML export, a Linux
//! filesystem root (hwloc's test tarballs), or hwloc's own synthetic syntax.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Mutex;

use hwlocality::Topology;
use hwlocality::object::TopologyObject;
use hwlocality::object::types::ObjectType;

use crate::{Machine, MachineBuilder, TopoError};

/// Where hwloc should read the machine from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source<'a> {
    /// The machine herd runs on.
    ThisMachine,
    /// An hwloc XML export (`lstopo file.xml`).
    Xml(&'a Path),
    /// A directory holding `sys/` and `proc/` of some Linux machine, read
    /// through hwloc's `HWLOC_FSROOT`.
    FsRoot(&'a Path),
    /// hwloc's plain synthetic syntax, e.g. `package:2 core:4 pu:2`.
    HwlocSynthetic(&'a str),
}

// hwloc reads HWLOC_FSROOT from the environment when a topology loads, so
// loads must not overlap with each other while it is set.
static LOAD_LOCK: Mutex<()> = Mutex::new(());

/// Loads the machine from `source` through hwloc.
pub fn load(source: Source<'_>) -> Result<Machine, TopoError> {
    let _guard = LOAD_LOCK.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    let (name, topology) = match source {
        Source::ThisMachine => (
            "this machine".to_string(),
            Topology::new().map_err(|e| hwloc_err("this machine", e))?,
        ),
        Source::Xml(path) => {
            check_readable_file(path)?;
            let name = path.display().to_string();
            let topo = Topology::builder()
                .from_xml_file(path)
                .map_err(|_| xml_rejected(path))?
                .build()
                .map_err(|_| xml_rejected(path))?;
            (name, topo)
        }
        Source::FsRoot(dir) => {
            check_fsroot(dir)?;
            let name = dir.display().to_string();
            (name.clone(), load_fsroot(dir).map_err(|e| hwloc_err(&name, e))?)
        }
        Source::HwlocSynthetic(spec) => {
            let name = format!("hwloc synthetic: {spec}");
            let topo = Topology::builder()
                .from_synthetic(spec)
                .map_err(|e| TopoError::Spec {
                    spec: spec.into(),
                    why: e.to_string(),
                })?
                .build()
                .map_err(|e| hwloc_err(&name, e))?;
            (name, topo)
        }
    };
    convert(&name, &topology)
}

fn load_fsroot(dir: &Path) -> Result<Topology, Box<dyn std::error::Error>> {
    // SAFETY: set_var is unsound only when another thread reads the
    // environment at the same time. herd's binary loads topologies on its
    // main thread before it starts any other; LOAD_LOCK keeps loads in one
    // process (tests) from overlapping, and the variable is removed before
    // the lock is released.
    unsafe { std::env::set_var("HWLOC_FSROOT", dir) };
    let result = Topology::builder().build();
    // SAFETY: as above.
    unsafe { std::env::remove_var("HWLOC_FSROOT") };
    Ok(result?)
}

fn hwloc_err(source: &str, e: impl std::fmt::Display) -> TopoError {
    TopoError::Hwloc {
        input: source.to_string(),
        why: e.to_string(),
    }
}

/// hwloc's own error for a bad XML is a bare EINVAL; say what we can see.
fn xml_rejected(path: &Path) -> TopoError {
    let head: String = std::fs::read(path)
        .map(|bytes| String::from_utf8_lossy(&bytes[..bytes.len().min(4096)]).into_owned())
        .unwrap_or_default();
    let version = head
        .split_once("<topology")
        .and_then(|(_, rest)| rest.split_once("version=\""))
        .and_then(|(_, rest)| rest.split_once('"'))
        .map(|(v, _)| v.to_string());
    let why = match version {
        Some(v) if !v.starts_with('1') && !v.starts_with('2') => {
            format!(
                "XML format {v} is newer than this hwloc reads (1.x and 2.x); re-export it with hwloc 2 (lstopo file.xml)"
            )
        }
        Some(_) => "the XML is malformed or inconsistent".to_string(),
        None => "not an hwloc XML export (no <topology version=...> element)".to_string(),
    };
    hwloc_err(&path.display().to_string(), why)
}

fn check_readable_file(path: &Path) -> Result<(), TopoError> {
    let io = |e: std::io::Error| TopoError::Io {
        path: path.to_path_buf(),
        why: e.to_string(),
    };
    let meta = std::fs::metadata(path).map_err(io)?;
    if !meta.is_file() {
        return Err(TopoError::Io {
            path: path.to_path_buf(),
            why: "not a regular file".into(),
        });
    }
    // Open it ourselves: hwloc's message for an unreadable file is only "invalid".
    std::fs::File::open(path).map_err(io)?;
    Ok(())
}

fn check_fsroot(dir: &Path) -> Result<(), TopoError> {
    let cpu_dir = dir.join("sys/devices/system/cpu");
    if !cpu_dir.is_dir() {
        return Err(TopoError::Io {
            path: dir.to_path_buf(),
            why: "not a Linux filesystem root: it has no sys/devices/system/cpu".into(),
        });
    }
    Ok(())
}

/// Intel's hybrid parts pair "Core" and "Atom" cores. hwloc reports their
/// frequencies but not their IPC; Intel's own figures put Golden Cove ~19%
/// above Cypress Cove, itself ~19% above Skylake, which Gracemont matches:
/// an Atom-class core does about 0.7 of a Core-class core's work per cycle.
const ATOM_IPC_RATIO: f64 = 0.7;

struct KindInfo {
    cpus: hwlocality::cpu::cpuset::CpuSet,
    raw_capacity: Option<f64>,
    label: String,
    max_freq_mhz: Option<u32>,
}

fn kinds_of(topology: &Topology) -> Vec<KindInfo> {
    let Ok(kinds) = topology.cpu_kinds() else {
        return Vec::new();
    };
    let n = kinds.len();
    kinds
        .enumerate()
        .map(|(rank, kind)| {
            let info = |key: &str| {
                kind.infos
                    .iter()
                    .find(|i| i.name().to_str() == Ok(key))
                    .and_then(|i| i.value().to_str().ok().map(str::to_string))
            };
            let max_freq_mhz = info("FrequencyMaxMHz")
                .and_then(|f| f.parse::<u32>().ok())
                .filter(|&f| f > 0);
            let core_type = info("CoreType");
            let ipc = if core_type.as_deref() == Some("IntelAtom") {
                ATOM_IPC_RATIO
            } else {
                1.0
            };
            // Without frequencies, hwloc's order (least efficient = strongest
            // last) is all we know: space the kinds evenly by rank.
            let raw_capacity = match max_freq_mhz {
                Some(f) => Some(f64::from(f) * ipc),
                None if n > 1 => Some((rank + 1) as f64 / n as f64),
                None => None,
            };
            KindInfo {
                cpus: kind.cpuset.clone(),
                raw_capacity,
                label: core_type.unwrap_or_else(|| {
                    if n == 1 {
                        "core".into()
                    } else {
                        format!("kind{rank}")
                    }
                }),
                max_freq_mhz,
            }
        })
        .collect()
}

fn convert(name: &str, topology: &Topology) -> Result<Machine, TopoError> {
    let mut b = MachineBuilder::new(name);
    let packages: Vec<&TopologyObject> = topology.objects_with_type(ObjectType::Package).collect();
    let package_ids: Vec<usize> = packages
        .iter()
        .map(|p| b.package(p.os_index().map(|i| i as u32)))
        .collect();
    // A machine with no package objects is one package.
    let lone_package = packages.is_empty().then(|| b.package(None));
    let package_of = |obj: &TopologyObject| -> Option<usize> {
        let pkg = obj.first_ancestor_with_type(ObjectType::Package)?;
        packages
            .iter()
            .position(|p| p.global_persistent_index() == pkg.global_persistent_index())
            .map(|i| package_ids[i])
    };

    let nodes: Vec<&TopologyObject> = topology.objects_with_type(ObjectType::NUMANode).collect();
    let node_ids: Vec<usize> = nodes
        .iter()
        .map(|n| {
            let os = n.os_index().unwrap_or(0) as u32;
            let memory = Some(n.total_memory()).filter(|&m| m > 0);
            b.numa_node(os, package_of(n).or(lone_package), memory)
        })
        .collect();
    if nodes.is_empty() {
        return Err(TopoError::Invalid {
            input: name.into(),
            why: "hwloc found no NUMA node".into(),
        });
    }

    // LLC: L3 where there is one, else the largest cache level hwloc knows.
    let llc_type = [ObjectType::L3Cache, ObjectType::L2Cache, ObjectType::L1Cache]
        .into_iter()
        .find(|&t| topology.objects_with_type(t).next().is_some());
    let llcs: Vec<&TopologyObject> = llc_type
        .map(|t| topology.objects_with_type(t).collect())
        .unwrap_or_default();
    let llc_ids: Vec<usize> = llcs
        .iter()
        .map(|c| {
            let (level, size) = match c.attributes() {
                Some(hwlocality::object::attributes::ObjectAttributes::Cache(a)) => {
                    (a.depth() as u8, a.size().map(|s| s.get()))
                }
                _ => (0, None),
            };
            b.llc(level, size)
        })
        .collect();

    let kinds = kinds_of(topology);
    let max_raw = kinds.iter().filter_map(|k| k.raw_capacity).fold(0.0, f64::max);
    let kind_ids: Vec<usize> = kinds
        .iter()
        .map(|k| {
            let cap = match k.raw_capacity {
                Some(raw) if max_raw > 0.0 => raw / max_raw,
                _ => 1.0,
            };
            b.kind(cap, k.label.clone(), k.max_freq_mhz)
        })
        .collect();
    // CPUs that no hwloc kind covers: with a single kind they belong to it
    // (partial frequency data); otherwise they are a kind of their own.
    let unclassified = match kinds.len() {
        0 => Some(b.kind(1.0, "core", None)),
        1 => kind_ids.first().copied(),
        _ => None,
    };
    let mut extra_kind = None;

    // Group PUs into cores in hwloc's logical order; a PU outside any Core
    // object is a core of its own.
    struct CoreEntry {
        os: Option<u32>,
        cpus: Vec<u32>,
        package: usize,
        numa: usize,
        llc: Option<usize>,
        kind: usize,
    }
    let mut cores: Vec<CoreEntry> = Vec::new();
    let mut position_of: HashMap<u64, usize> = HashMap::new();
    for pu in topology.objects_with_type(ObjectType::PU) {
        let os = pu.os_index().ok_or_else(|| TopoError::Invalid {
            input: name.into(),
            why: "a PU has no OS index".into(),
        })? as u32;
        let core_obj = pu.first_ancestor_with_type(ObjectType::Core);
        let key = core_obj.map_or(pu.global_persistent_index(), |c| c.global_persistent_index());
        if let Some(&i) = position_of.get(&key) {
            cores[i].cpus.push(os);
            continue;
        }
        let numa = nodes
            .iter()
            .position(|n| n.cpuset().is_some_and(|s| s.is_set(os as usize)))
            .map_or(node_ids[0], |i| node_ids[i]);
        let llc = llc_type
            .and_then(|t| pu.first_ancestor_with_type(t))
            .and_then(|c| {
                llcs.iter()
                    .position(|l| l.global_persistent_index() == c.global_persistent_index())
                    .map(|i| llc_ids[i])
            });
        let package = package_of(pu).or(lone_package).unwrap_or(0);
        let kind = match kinds.iter().position(|k| k.cpus.is_set(os as usize)) {
            Some(i) => kind_ids[i],
            None => match unclassified {
                Some(k) => k,
                None => *extra_kind.get_or_insert_with(|| b.kind(1.0, "unclassified", None)),
            },
        };
        position_of.insert(key, cores.len());
        let core_os = core_obj.and_then(|c| c.os_index()).map(|i| i as u32);
        cores.push(CoreEntry {
            os: core_os,
            cpus: vec![os],
            package,
            numa,
            llc,
            kind,
        });
    }
    for c in &cores {
        b.core(c.package, c.numa, c.llc, c.kind, c.os, &c.cpus);
    }

    if let Some(matrix) = numa_distances(topology, &nodes) {
        b.numa_distances(matrix);
    }
    b.build()
}

fn numa_distances(topology: &Topology, nodes: &[&TopologyObject]) -> Option<Vec<Vec<f64>>> {
    let all = topology.distances(None).ok()?;
    let d = all.iter().find(|d| {
        d.num_objects() == nodes.len()
            && d.objects()
                .all(|o| o.is_some_and(|o| o.object_type() == ObjectType::NUMANode))
    })?;
    let index: Vec<usize> = d
        .objects()
        .map(|o| {
            let gp = o.map(|o| o.global_persistent_index());
            nodes.iter().position(|n| Some(n.global_persistent_index()) == gp)
        })
        .collect::<Option<_>>()?;
    let mut m = vec![vec![0.0; nodes.len()]; nodes.len()];
    for ((i, j), v) in d.enumerate_distances() {
        m[index[i]][index[j]] = v as f64;
    }
    Some(m)
}
