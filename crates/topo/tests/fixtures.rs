//! Details of loading real-machine fixtures (the counts of every fixture
//! against EXPECTED.tsv are checked through `herd topo --json` in the CLI's
//! tests), and plain synthetic specs give what hwloc's own backend gives.

use std::path::{Path, PathBuf};

use herd_topo::{Machine, Source, load};

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/topologies")
}

#[test]
fn hybrid_fixture_kinds_are_ordered_and_scaled() {
    let m = Machine::from_path(&fixtures().join("xml/20em64t-hybrid-1p6c2t+2ca4co1t.xml")).unwrap();
    let k = m.kinds();
    assert_eq!(k.len(), 2);
    // 12 P-core threads at 5000 MHz, 8 E-cores at 3900 MHz.
    assert_eq!((k[0].cpus.len(), k[1].cpus.len()), (8, 12));
    assert!((k[0].capacity - 3900.0 / 5000.0).abs() < 1e-9);
    assert_eq!(k[1].capacity, 1.0);
    assert_eq!(m.smt_max(), 2);
    // Lakefield: hwloc says which core is Atom; capacity folds in the IPC gap.
    let m = Machine::from_path(&fixtures().join("xml/5intel64-hybrid-lakefield.xml")).unwrap();
    assert_eq!(m.kinds()[0].label, "IntelAtom");
    assert!(m.kinds()[0].capacity < 0.7, "{}", m.kinds()[0].capacity);
}

#[test]
fn numa_details_come_through() {
    let m = Machine::from_path(&fixtures().join("xml/fakememinitiators-1np2c+1npp+gi.xml")).unwrap();
    // Memory-only nodes are kept, with no CPUs of their own.
    assert!(m.numa_nodes().iter().any(|n| n.cpus.is_empty()));
    let m = Machine::from_path(&fixtures().join("xml/64amd64-4s2n4ca2co.xml")).unwrap();
    let d = m
        .numa_distances()
        .expect("this export carries a NUMA distance matrix");
    assert_eq!(d.len(), 8);
    assert!((0..8).all(|i| d[i][i] <= d[i][(i + 1) % 8]));
}

#[test]
fn plain_synthetic_specs_agree_with_hwloc() {
    for spec in [
        "package:2 core:4 pu:2",
        "package:2 numa:2 l3:1 core:4 pu:2",
        "package:1 l2:4 core:2 pu:4",
        "core:3 pu:1",
    ] {
        let ours = Machine::synthetic(spec).unwrap();
        let theirs = load(Source::HwlocSynthetic(spec)).unwrap();
        let shape = |m: &Machine| {
            (
                m.cpus().len(),
                m.cores().len(),
                m.packages().len(),
                m.numa_nodes().len(),
                m.llcs().len(),
                m.smt_max(),
            )
        };
        assert_eq!(shape(&ours), shape(&theirs), "{spec}");
        for (a, b) in ours.cpus().iter().zip(theirs.cpus()) {
            assert_eq!(
                (a.os, a.core, a.package, a.numa, a.llc),
                (b.os, b.core, b.package, b.numa, b.llc),
                "{spec}"
            );
        }
    }
}

#[test]
fn bad_inputs_are_typed_errors() {
    let tmp = tempfile::tempdir().unwrap();
    let missing = Machine::from_path(&tmp.path().join("nope.xml")).unwrap_err();
    assert!(missing.to_string().contains("nope.xml"), "{missing}");
    let empty = Machine::from_path(tmp.path()).unwrap_err();
    assert!(empty.to_string().contains("no sys/devices/system/cpu"), "{empty}");
    let v3 = tmp.path().join("v3.xml");
    std::fs::write(
        &v3,
        "<?xml version=\"1.0\"?>\n<topology version=\"3.0\">\n</topology>\n",
    )
    .unwrap();
    assert!(matches!(
        Machine::from_path(&v3),
        Err(herd_topo::TopoError::Hwloc { .. })
    ));
    let garbage = tmp.path().join("garbage.xml");
    std::fs::write(&garbage, "this is not xml").unwrap();
    assert!(Machine::from_path(&garbage).is_err());
}

/// A machine restricted to some CPUs (the CPUs other herd instances do not
/// hold) keeps only what those CPUs use.
#[test]
fn a_restricted_machine_keeps_only_its_cpus_nodes_and_distances() {
    let m = herd_topo::Machine::synthetic("package:2 numa:1 core:2 pu:2").unwrap();
    assert_eq!((m.cpus().len(), m.numa_nodes().len()), (8, 2));
    let keep = herd_topo::CpuSet::parse_list("4-7").unwrap();
    let r = m.restricted(&keep).unwrap();
    assert_eq!(r.all_cpus(), &keep);
    assert_eq!(
        (
            r.cores().len(),
            r.numa_nodes().len(),
            r.packages().len(),
            r.smt_max()
        ),
        (2, 1, 1, 2)
    );
    assert_eq!(r.numa_distances().map(|d| d.len()), m.numa_distances().map(|_| 1));
    // One CPU of each core of the first package, and one of the second.
    let odd = herd_topo::CpuSet::parse_list("0,2,5").unwrap();
    let r = m.restricted(&odd).unwrap();
    assert_eq!((r.cores().len(), r.numa_nodes().len(), r.smt_max()), (3, 2, 1));
    assert!(
        m.restricted(&herd_topo::CpuSet::parse_list("100").unwrap())
            .is_err()
    );
}
