//! `herd calibrate`: measures this machine's peak memory bandwidth with the
//! streaming probe (herd_runtime::probe) on every CPU and stores it in the
//! profile database, where `herd run` and `herd batch` read it: S1's
//! low-contention states are fractions of this peak.

use std::fmt::Write;
use std::path::PathBuf;

use clap::Args;
use herd_model::PowerModel;
use herd_runtime::probe::{ProbeOptions, stream_probe};
use herd_store::{CORE_PAIR_SIGMA, Calibration, PEAK_BTR, POWER_MODEL, SMT_SIGMA, SqliteStore};

use crate::common::Failure;
use crate::output;

/// Arguments of `herd calibrate`.
#[derive(Args, Debug)]
pub struct CalibrateArgs {
    /// Seconds each round reads memory.
    #[arg(long, default_value_t = 1.0)]
    round_s: f64,
    /// Rounds; the peak is the best one.
    #[arg(long, default_value_t = 5)]
    rounds: u32,
    /// Each thread's buffer in MiB (default: twice the machine's last-level
    /// caches shared out over the threads, at least 32).
    #[arg(long, value_name = "MIB")]
    buffer_mib: Option<usize>,
    /// Measure and print, but do not store.
    #[arg(long)]
    no_store: bool,
    /// The profile database (default: $XDG_DATA_HOME/herd/herd.db, else ~/.local/share/herd/herd.db).
    #[arg(long, value_name = "PATH")]
    db: Option<PathBuf>,
    /// Print JSON instead of text (schema: docs/json.md).
    #[arg(long)]
    json: bool,
}

/// `herd calibrate`.
pub fn run(args: &CalibrateArgs) -> Result<(), Failure> {
    if !(args.round_s.is_finite() && args.round_s > 0.0 && args.round_s <= 60.0) {
        return Err(Failure::Input(anyhow::anyhow!(
            "--round-s must be more than 0 and at most 60, got {}",
            args.round_s
        )));
    }
    if args.rounds == 0 || args.rounds > 100 {
        return Err(Failure::Input(anyhow::anyhow!(
            "--rounds must be 1 to 100, got {}",
            args.rounds
        )));
    }
    if args.buffer_mib == Some(0) {
        return Err(Failure::Input(anyhow::anyhow!("--buffer-mib must be at least 1")));
    }
    // Open the database first, so a bad path fails before the probe runs.
    let store = match (args.no_store, herd_runtime::live::db_path(args.db.as_deref())) {
        (true, _) => None,
        (false, Some(path)) => Some((
            SqliteStore::open(&path).map_err(|e| Failure::Input(e.into()))?,
            path,
        )),
        (false, None) => {
            return Err(Failure::Input(anyhow::anyhow!(
                "no HOME or XDG_DATA_HOME: name the database with --db PATH, or pass --no-store"
            )));
        }
    };
    let machine = crate::common::this_machine()?;
    let cpus: Vec<u32> = machine.cpus().iter().map(|c| c.os).collect();
    let llc_bytes: u64 = machine.llcs().iter().filter_map(|l| l.size_bytes).sum();
    let bytes_per_thread = match args.buffer_mib {
        Some(m) => m << 20,
        None => ((2 * llc_bytes / cpus.len().max(1) as u64) as usize).max(32 << 20),
    };
    let opts = ProbeOptions {
        cpus,
        bytes_per_thread,
        round_s: args.round_s,
        rounds: args.rounds,
    };
    eprintln!(
        "herd: calibrate: reading {} MiB per CPU on {} CPUs, {} rounds of {} s",
        bytes_per_thread >> 20,
        opts.cpus.len(),
        opts.rounds,
        opts.round_s
    );
    let report = stream_probe(&opts, |r| {
        eprintln!("herd: calibrate: round {r}/{} done", args.rounds)
    })
    .map_err(|e| Failure::Internal(e.into()))?;
    // Two CPUs busy against one: siblings of the first core that has
    // several, else two CPUs of different cores.
    let siblings_of = machine.cores().iter().find(|c| c.cpus.len() >= 2).map(|c| {
        let mut it = c.cpus.iter();
        (it.next(), it.next())
    });
    let pair = match siblings_of {
        Some((Some(a), Some(b))) => Some((a, b, true)),
        _ => {
            let cpus = machine.cpus();
            cpus.iter()
                .find(|c| c.core != cpus[0].core)
                .map(|b| (cpus[0].os, b.os, false))
        }
    };
    let pair = match pair {
        Some((a, b, siblings)) => {
            eprintln!(
                "herd: calibrate: CPUs {a} and {b} busy together against one, {} rounds",
                args.rounds
            );
            // A pair herd may not run on (a cpuset without them) costs this
            // measure only, not the bandwidth one.
            match herd_runtime::pair_probe::pair_probe(a, b, args.round_s, args.rounds) {
                Ok(r) => Some((r, siblings)),
                Err(e) => {
                    eprintln!("herd: calibrate: no CPU-pair measure: {e}");
                    None
                }
            }
        }
        None => None,
    };
    // S0's power model, where RAPL can be read: idle, then growing sets
    // of busy CPUs.
    let power = match herd_runtime::rapl::Rapl::discover(std::path::Path::new("/sys")) {
        None => {
            Err("no readable RAPL here: the power model is not fitted (S0's dell-c6100 preset stays in use)")
        }
        Some(mut rapl) => {
            match herd_runtime::pair_probe::power_probe(&machine, &mut rapl, args.round_s, |i, n| {
                eprintln!("herd: calibrate: power reading {i}/{n}")
            }) {
                Err(e) => {
                    eprintln!("herd: calibrate: no power readings: {e}");
                    Err("the power readings could not be taken: not fitted")
                }
                Ok(samples) => PowerModel::fit(&samples, &PowerModel::dell_c6100())
                    .map(|(m, held)| (m, held, samples))
                    .ok_or("the RAPL readings did not separate idle, package and core power: not fitted"),
            }
        }
    };
    let peak = report.peak_btr();
    let gbps = |btr: f64| btr * herd_model::params::LINE_BYTES * 1e6 / 1e9;
    let measured_unix_s = crate::common::unix_now_s();
    let stored = match store {
        Some((mut s, path)) => {
            s.set_calibration(&Calibration {
                name: PEAK_BTR.into(),
                value: peak,
                unit: "transactions/us".into(),
                measured_unix_s,
                detail: format!(
                    "read-only stream, {} CPUs, {} MiB each, best of {} rounds of {} s (median {:.2})",
                    report.cpus.len(),
                    bytes_per_thread >> 20,
                    args.rounds,
                    args.round_s,
                    report.median_btr()
                ),
            })
            .map_err(|e| Failure::Internal(e.into()))?;
            if let Ok((m, _, samples)) = &power {
                for (name, value) in POWER_MODEL.iter().zip(m.terms()) {
                    s.set_calibration(&Calibration {
                        name: (*name).into(),
                        value,
                        unit: "W".into(),
                        measured_unix_s,
                        detail: format!(
                            "S0's power model fitted to {} RAPL readings (packages, not the node)",
                            samples.len()
                        ),
                    })
                    .map_err(|e| Failure::Internal(e.into()))?;
                }
            }
            if let Some((r, siblings)) = &pair {
                s.set_calibration(&Calibration {
                    name: if *siblings { SMT_SIGMA } else { CORE_PAIR_SIGMA }.into(),
                    value: r.sigma(),
                    unit: "fraction of a CPU".into(),
                    measured_unix_s,
                    detail: format!(
                        "an integer loop on CPUs {} and {} together against CPU {} alone, median of {} rounds of {} s",
                        r.cpus[0], r.cpus[1], r.cpus[0], args.rounds, args.round_s
                    ),
                })
                .map_err(|e| Failure::Internal(e.into()))?;
            }
            Some(path)
        }
        None => None,
    };
    if args.json {
        return Ok(output::print_json(&serde_json::json!({
            "peak_btr": peak,
            "median_btr": report.median_btr(),
            "peak_gbps": gbps(peak),
            "probe": report,
            "cpu_pair": pair.as_ref().map(|(r, siblings)| serde_json::json!({
                "siblings": siblings, "sigma": r.sigma(), "probe": r,
            })),
            "power_model": match &power {
                Ok((m, held, samples)) => serde_json::json!({"fitted": m, "held_at_preset": held, "samples": samples.len()}),
                Err(why) => serde_json::json!({"fitted": null, "why": why}),
            },
            "stored_in": stored,
        }))?);
    }
    let mut s = String::new();
    let _ = writeln!(
        s,
        "peak memory bandwidth: {peak:.2} transactions/us ({:.2} GB/s), median of rounds {:.2} ({:.2} GB/s)",
        gbps(peak),
        report.median_btr(),
        gbps(report.median_btr())
    );
    let rounds: Vec<String> = report.rounds_btr.iter().map(|b| format!("{b:.2}")).collect();
    let _ = writeln!(s, "rounds: {}", rounds.join(" "));
    if let Some((r, siblings)) = &pair {
        let sigma = r.sigma();
        let what = if *siblings {
            format!("SMT siblings {} and {}", r.cpus[0], r.cpus[1])
        } else {
            format!(
                "CPUs {} and {} (separate cores to the kernel)",
                r.cpus[0], r.cpus[1]
            )
        };
        let _ = writeln!(
            s,
            "{what}: both busy deliver {:.2} of one (sigma {sigma:.2})",
            1.0 + sigma
        );
        if !*siblings && sigma < 0.9 {
            let _ = writeln!(
                s,
                "  they share something the topology does not show (a VM's vCPUs on one host core's threads, \
                 a shared power budget, or other load while this ran: measure again on a quiet machine)"
            );
        }
    }
    match &power {
        Ok((m, held, samples)) => {
            let _ = writeln!(
                s,
                "power model (RAPL, {} readings; packages, not the node): idle {:.1} W, first package +{:.1}, \
                 next +{:.1}, core +{:.2}, sibling +{:.2}{}",
                samples.len(),
                m.idle_w,
                m.first_package_w,
                m.next_package_w,
                m.core_w,
                m.sibling_w,
                if held.is_empty() {
                    String::new()
                } else {
                    format!(" ({} kept from the preset)", held.join(", "))
                }
            );
        }
        Err(why) => {
            let _ = writeln!(s, "{why}");
        }
    }
    match stored {
        Some(p) => {
            let _ = writeln!(s, "stored in {} (herd run and herd batch read it)", p.display());
        }
        None => {
            let _ = writeln!(s, "not stored (--no-store)");
        }
    }
    Ok(output::print(&s)?)
}
