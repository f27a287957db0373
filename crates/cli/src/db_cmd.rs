//! `herd db`: what the profile database knows. `list` names every program
//! with runs or a learned profile; `show PROGRAM` gives its runs by unit
//! count, the Amdahl fit (S0 §2.3), the predicted time, power, energy and
//! SPN at every unit count on this machine, what `--threads auto` would
//! choose, and its learned profile (S1); `forget PROGRAM` removes it all;
//! `export` writes everything as JSON.

use std::fmt::Write;
use std::path::PathBuf;

use clap::{Args, Subcommand};
use herd_profile::ProgramProfile;
use herd_store::{ProfileStore, SqliteStore};

use crate::common::Failure;
use crate::output;

/// Arguments of `herd db`.
#[derive(Args, Debug)]
pub struct DbArgs {
    #[command(subcommand)]
    command: DbCommand,
    /// The profile database (default: $XDG_DATA_HOME/herd/herd.db, else ~/.local/share/herd/herd.db).
    #[arg(long, value_name = "PATH", global = true)]
    db: Option<PathBuf>,
    /// Print JSON instead of text (schema: docs/json.md).
    #[arg(long, global = true)]
    json: bool,
}

#[derive(Subcommand, Debug)]
enum DbCommand {
    /// Every program with recorded runs.
    List,
    /// A program's runs by unit count, its Amdahl fit, the unit counts it
    /// suggests, and its learned profile.
    Show(ShowArgs),
    /// Forget a program: its runs and its learned profile.
    Forget(ForgetArgs),
    /// Everything the database holds, as JSON: calibrations, and each
    /// program's runs and profile.
    Export(ExportArgs),
}

#[derive(Args, Debug)]
struct ForgetArgs {
    /// The program, as for `show`.
    program: String,
}

#[derive(Args, Debug)]
struct ExportArgs {
    /// Write here instead of standard output.
    #[arg(long, value_name = "FILE")]
    out: Option<PathBuf>,
}

#[derive(Args, Debug)]
struct ShowArgs {
    /// The program: its key as `herd db list` prints it, or any part of it
    /// that names one program.
    program: String,
    /// Predict for this policy's unit order (smt:spn: SPN first; others: speed first).
    #[arg(long, default_value_t = herd_policy::PolicySpec::linux())]
    policy: herd_policy::PolicySpec,
    #[command(flatten)]
    choice: crate::units::ChoiceArgs,
}

/// `herd db`.
pub fn run(args: &DbArgs) -> Result<(), Failure> {
    let path = herd_runtime::live::db_path(args.db.as_deref()).ok_or_else(|| {
        Failure::Input(anyhow::anyhow!(
            "no HOME or XDG_DATA_HOME: name the database with --db PATH"
        ))
    })?;
    if !path.exists() {
        return Err(Failure::Input(anyhow::anyhow!(
            "{}: no profile database yet (herd run records one)",
            path.display()
        )));
    }
    let mut store = SqliteStore::open(&path).map_err(|e| Failure::Input(e.into()))?;
    let programs = store.programs().map_err(|e| Failure::Input(e.into()))?;
    match &args.command {
        DbCommand::List => {
            if args.json {
                let list: Vec<_> = programs
                    .iter()
                    .map(|(p, n)| serde_json::json!({"program": p, "runs": n}))
                    .collect();
                return Ok(output::print_json(&list)?);
            }
            let mut s = String::new();
            for (p, n) in &programs {
                let _ = writeln!(s, "{n:>5} runs  {p}");
            }
            Ok(output::print(&s)?)
        }
        DbCommand::Forget(f) => {
            let key = pick(&programs, &f.program)?;
            let (runs, profiles, batch_runs) = store.forget(&key).map_err(|e| Failure::Internal(e.into()))?;
            if args.json {
                return Ok(output::print_json(&serde_json::json!({
                    "program": key, "runs": runs, "profile": profiles > 0, "batch_runs": batch_runs,
                }))?);
            }
            Ok(output::print(&format!(
                "forgot {key}: {runs} runs{}{}\n",
                if profiles > 0 {
                    " and its learned profile"
                } else {
                    ""
                },
                if batch_runs > 0 {
                    format!(", and {batch_runs} recorded runs of batches it was in")
                } else {
                    String::new()
                }
            ))?)
        }
        DbCommand::Export(e) => export(&store, &path, &programs, e),
        DbCommand::Show(show) => {
            let key = pick(&programs, &show.program)?;
            let runs = store.runs(&key).map_err(|e| Failure::Input(e.into()))?;
            let (power, label, tolerance) = show.choice.checked(Some(&store))?;
            let machine = crate::common::this_machine()?;
            let (sigma, _) = crate::units::smt_sigma(Some(&store));
            let curve = herd_plan::units::curve(
                &machine,
                &runs,
                &show.policy.to_string(),
                &power,
                tolerance,
                sigma,
            );
            let profile = store
                .profiles([key.as_str()])
                .map_err(|e| Failure::Input(e.into()))?
                .remove(&key);
            if args.json {
                return Ok(output::print_json(&serde_json::json!({
                    "program": key,
                    "runs": runs,
                    "policy": show.policy.to_string(),
                    "power_model": label,
                    "curve": curve,
                    "profile": profile,
                }))?);
            }
            let mut s = text(&key, runs.len(), show, &label, &curve);
            profile_text(&mut s, profile.as_ref());
            Ok(output::print(&s)?)
        }
    }
}

/// The one program `query` names: an exact key, else the only key that
/// contains it.
fn pick(programs: &[(String, i64)], query: &str) -> Result<String, Failure> {
    if programs.iter().any(|(p, _)| p == query) {
        return Ok(query.to_string());
    }
    let matches: Vec<&String> = programs
        .iter()
        .map(|(p, _)| p)
        .filter(|p| p.contains(query))
        .collect();
    match matches.as_slice() {
        [one] => Ok((*one).clone()),
        [] => Err(Failure::Input(anyhow::anyhow!(
            "no recorded program matches '{query}' (herd db list shows them)"
        ))),
        many => Err(Failure::Input(anyhow::anyhow!(
            "'{query}' matches {} programs; give more of the key:\n  {}",
            many.len(),
            many.iter().map(|s| s.as_str()).collect::<Vec<_>>().join("\n  ")
        ))),
    }
}

fn text(key: &str, runs: usize, show: &ShowArgs, label: &str, c: &herd_plan::units::Curve) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "program: {key} ({runs} runs)");
    let _ = writeln!(s, "\ncompleted runs by unit count:");
    let _ = writeln!(
        s,
        "{:>6}{:>6}{:>11}{:>10}{:>12}",
        "units", "runs", "median_s", "capacity", "energy_j"
    );
    for u in &c.by_units {
        let energy = match (u.energy_j, u.energy_measured) {
            (Some(e), true) => format!("{e:.1} RAPL"),
            (Some(e), false) => format!("{e:.1} model"),
            (None, _) => "-".into(),
        };
        let _ = writeln!(
            s,
            "{:>6}{:>6}{:>11.3}{:>10.2}{:>12}",
            u.units, u.runs, u.median_s, u.capacity, energy
        );
    }
    let (Some(sf), Some(t1)) = (c.serial_fraction, c.one_unit_s) else {
        let _ = writeln!(
            s,
            "\nno Amdahl fit yet: completed runs at two or more unit counts are needed \
             (run it with --threads 1, 2, 4, ...)"
        );
        return s;
    };
    let _ = writeln!(
        s,
        "\nAmdahl fit (least squares over {} unit counts): serial fraction S = {sf:.4}, one-unit time {t1:.3} s",
        c.by_units.len()
    );
    let _ = writeln!(
        s,
        "predicted on this machine, units in {}'s order, power from {label}:",
        show.policy
    );
    let _ = writeln!(
        s,
        "{:>6}{:>10}{:>11}{:>10}{:>12}{:>7}{:>9}{:>8}",
        "units", "capacity", "time_s", "power_w", "energy_j", "cores", "speedup", "SPN"
    );
    for p in &c.predictions {
        let _ = writeln!(
            s,
            "{:>6}{:>10.2}{:>11.3}{:>10.2}{:>12.1}{:>7}{:>9.3}{:>8.3}",
            p.units, p.capacity, p.time_s, p.power_w, p.energy_j, p.physical_cores, p.speedup, p.spn
        );
    }
    if let (Some(fs), Some(fe)) = (c.for_speed, c.for_energy) {
        let _ = writeln!(
            s,
            "\n--threads auto chooses {fs} (the fewest units within {}% of the best speedup); \
             with --goal energy, {fe} (the least energy)",
            show.choice.tolerance
        );
    }
    s
}

/// The learned profile (S1) in a few lines: what a user needs to judge
/// whether herd knows the program yet.
fn profile_text(s: &mut String, profile: Option<&ProgramProfile>) {
    let Some(p) = profile else {
        let _ = writeln!(s, "\nno learned profile yet (herd run and herd batch learn one)");
        return;
    };
    let _ = writeln!(
        s,
        "\nlearned profile: {} runs, {} phases, coverage {:.0}%, solo time {}, memory requests {}",
        p.runs,
        p.phases.phases().len(),
        100.0 * p.coverage,
        p.solo_time_s.map_or("unknown".into(), |t| format!("{t:.3} s")),
        p.mem_requests
            .map_or("not counted".into(), |m| format!("{m:.3e}")),
    );
    if let Some(n) = p.barrier_beats {
        let _ = writeln!(
            s,
            "  {n} heartbeats per thread between barriers (pack:palm plans from them)"
        );
    }
    if p.phases.phases().is_empty() {
        let _ = writeln!(
            s,
            "  no phases: the runs it learned from had no instruction and memory counters"
        );
        return;
    }
    let _ = writeln!(
        s,
        "{:>7}{:>10}{:>14}{:>14}{:>9}",
        "phase", "slices", "solo_ips/us", "solo_btr/us", "valid"
    );
    for (i, ph) in p.phases.phases().iter().enumerate() {
        let (ips, btr) = ph.estimate.solo().unwrap_or((0.0, 0.0));
        let _ = writeln!(
            s,
            "{i:>7}{:>10}{ips:>14.1}{btr:>14.3}{:>9}",
            ph.slices,
            if ph.estimate.is_valid() { "yes" } else { "no" }
        );
    }
}

/// `herd db export`: one JSON document (schema in docs/json.md).
fn export(
    store: &SqliteStore,
    path: &std::path::Path,
    programs: &[(String, i64)],
    args: &ExportArgs,
) -> Result<(), Failure> {
    let bad = |e: herd_store::StoreError| Failure::Input(e.into());
    let profiles = store
        .profiles(programs.iter().map(|(p, _)| p.as_str()))
        .map_err(bad)?;
    let mut list = Vec::new();
    for (program, _) in programs {
        list.push(serde_json::json!({
            "program": program,
            "runs": store.runs(program).map_err(bad)?,
            "profile": profiles.get(program),
        }));
    }
    let doc = serde_json::json!({
        "database": path,
        "schema_version": store.version().map_err(bad)?,
        "calibrations": store.calibrations().map_err(bad)?,
        "programs": list,
        "batch_runs": store.every_batch_run().map_err(bad)?,
    });
    match &args.out {
        None => Ok(output::print_json(&doc)?),
        Some(out) => {
            let text = serde_json::to_string_pretty(&doc).map_err(|e| Failure::Internal(e.into()))?;
            std::fs::write(out, text + "\n")
                .map_err(|e| Failure::Input(anyhow::anyhow!("{}: {e}", out.display())))?;
            eprintln!("herd: exported {} programs to {}", programs.len(), out.display());
            Ok(())
        }
    }
}
