//! Energy from RAPL through the powercap interface
//! (`/sys/class/powercap/intel-rapl:*`, also used for AMD packages).
//!
//! herd sums the package zones and the DRAM zones (top-level or nested; DRAM
//! energy is not part of a package's). It leaves out `psys`, which covers the
//! whole platform and would count the packages twice, and the core and
//! uncore subzones, which are inside their package. Counters wrap at
//! `max_energy_range_uj`; a read smaller than the last one has wrapped once
//! (at 100 ms periods a counter cannot wrap twice: the range is hours of
//! full power).

use std::fs;
use std::path::{Path, PathBuf};

/// One energy counter.
#[derive(Debug, Clone)]
struct Zone {
    energy_file: PathBuf,
    range_uj: u64,
    last_uj: u64,
}

/// The machine's RAPL zones and their last readings.
#[derive(Debug, Clone)]
pub struct Rapl {
    zones: Vec<Zone>,
    /// Zone names, for messages (`package-0`, `dram`...).
    pub names: Vec<String>,
}

fn read_u64(path: &Path) -> Option<u64> {
    fs::read_to_string(path).ok()?.trim().parse().ok()
}

impl Rapl {
    /// The zones under `sys_root` (normally `/sys`) that herd can read, or
    /// `None` when there are none (no RAPL, or `energy_uj` readable by root
    /// only and herd is not root).
    pub fn discover(sys_root: &Path) -> Option<Rapl> {
        let base = sys_root.join("class/powercap");
        let mut dirs: Vec<PathBuf> = fs::read_dir(&base)
            .ok()?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| {
                p.file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.starts_with("intel-rapl:"))
            })
            .collect();
        dirs.sort();
        let mut zones = Vec::new();
        let mut names = Vec::new();
        for dir in dirs {
            let dir_name = dir
                .file_name()
                .and_then(|n| n.to_str())
                .unwrap_or_default()
                .to_string();
            let name = fs::read_to_string(dir.join("name"))
                .unwrap_or_default()
                .trim()
                .to_string();
            // intel-rapl:N is a top-level zone; intel-rapl:N:M a subzone.
            let top = dir_name.matches(':').count() == 1;
            let counted = (top && name.starts_with("package")) || name == "dram";
            if !counted {
                continue;
            }
            let energy_file = dir.join("energy_uj");
            let (Some(last_uj), Some(range_uj)) =
                (read_u64(&energy_file), read_u64(&dir.join("max_energy_range_uj")))
            else {
                continue;
            };
            zones.push(Zone {
                energy_file,
                range_uj,
                last_uj,
            });
            names.push(name);
        }
        (!zones.is_empty()).then_some(Rapl { zones, names })
    }

    /// Joules used since the last call (or since discovery), over all zones.
    /// A zone that cannot be read this time counts nothing and keeps its
    /// last reading.
    pub fn delta_j(&mut self) -> f64 {
        let mut uj = 0u64;
        for z in &mut self.zones {
            let Some(now) = read_u64(&z.energy_file) else {
                continue;
            };
            uj += if now >= z.last_uj {
                now - z.last_uj
            } else {
                // Wrapped once.
                z.range_uj.saturating_sub(z.last_uj) + now
            };
            z.last_uj = now;
        }
        uj as f64 * 1e-6
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn zone(root: &Path, dir: &str, name: &str, energy: u64, range: u64) {
        let d = root.join("class/powercap").join(dir);
        fs::create_dir_all(&d).unwrap();
        fs::write(d.join("name"), format!("{name}\n")).unwrap();
        fs::write(d.join("energy_uj"), format!("{energy}\n")).unwrap();
        fs::write(d.join("max_energy_range_uj"), format!("{range}\n")).unwrap();
    }

    fn set(root: &Path, dir: &str, energy: u64) {
        fs::write(
            root.join("class/powercap").join(dir).join("energy_uj"),
            energy.to_string(),
        )
        .unwrap();
    }

    #[test]
    fn packages_and_dram_count_psys_and_cores_do_not() {
        let tmp = tempfile::tempdir().unwrap();
        let r = tmp.path();
        zone(r, "intel-rapl:0", "package-0", 1_000_000, 262_143_328_850);
        zone(r, "intel-rapl:0:0", "core", 500_000, 262_143_328_850);
        zone(r, "intel-rapl:0:1", "dram", 100_000, 65_712_999_613);
        zone(r, "intel-rapl:1", "package-1", 2_000_000, 262_143_328_850);
        zone(r, "intel-rapl:2", "psys", 9_000_000, 262_143_328_850);
        let mut rapl = Rapl::discover(r).unwrap();
        assert_eq!(rapl.names, ["package-0", "dram", "package-1"]);
        set(r, "intel-rapl:0", 3_000_000); // +2 J
        set(r, "intel-rapl:0:0", 9_500_000); // a subzone: not counted
        set(r, "intel-rapl:0:1", 600_000); // +0.5 J
        set(r, "intel-rapl:1", 2_250_000); // +0.25 J
        set(r, "intel-rapl:2", 99_000_000); // psys: not counted
        assert!((rapl.delta_j() - 2.75).abs() < 1e-9);
        assert_eq!(rapl.delta_j(), 0.0, "nothing used since");
    }

    #[test]
    fn a_wrapped_counter_adds_what_was_left_of_the_range() {
        let tmp = tempfile::tempdir().unwrap();
        let r = tmp.path();
        zone(r, "intel-rapl:0", "package-0", 999_000_000, 1_000_000_000);
        let mut rapl = Rapl::discover(r).unwrap();
        set(r, "intel-rapl:0", 500_000);
        assert!((rapl.delta_j() - 1.5).abs() < 1e-9);
    }

    #[test]
    fn no_powercap_or_unreadable_energy_is_none() {
        let tmp = tempfile::tempdir().unwrap();
        assert!(Rapl::discover(tmp.path()).is_none());
        let d = tmp.path().join("class/powercap/intel-rapl:0");
        fs::create_dir_all(&d).unwrap();
        fs::write(d.join("name"), "package-0").unwrap();
        // energy_uj missing, as when only root may read it.
        assert!(Rapl::discover(tmp.path()).is_none());
    }
}
