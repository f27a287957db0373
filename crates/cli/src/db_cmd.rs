//! `herd db`: what the profile database knows. `list` names every program
//! with runs; `show PROGRAM` gives its runs by unit count, the Amdahl fit
//! (S0 §2.3), the predicted time, power, energy and SPN at every unit count
//! on this machine, and what `--threads auto` would choose.

use std::fmt::Write;
use std::path::PathBuf;

use clap::{Args, Subcommand};
use herd_store::{ProfileStore, SqliteStore};

use crate::{Failure, output};

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
    /// A program's runs by unit count, its Amdahl fit and the unit counts it suggests.
    Show(ShowArgs),
}

#[derive(Args, Debug)]
struct ShowArgs {
    /// The program: its key as `herd db list` prints it, or any part of it
    /// that names one program.
    program: String,
    /// Predict for this policy's unit order (smt:spn: SPN first; others: speed first).
    #[arg(long, default_value = "linux")]
    policy: String,
    #[command(flatten)]
    choice: crate::units::ChoiceArgs,
}

/// `herd db`.
pub fn run(args: &DbArgs) -> Result<(), Failure> {
    let path = crate::units::db_path(args.db.as_deref()).ok_or_else(|| {
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
    let store = SqliteStore::open(&path).map_err(|e| Failure::Input(e.into()))?;
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
        DbCommand::Show(show) => {
            let key = pick(&programs, &show.program)?;
            let runs = store.runs(&key).map_err(|e| Failure::Input(e.into()))?;
            herd_policy::build(&show.policy).map_err(|e| Failure::Input(e.into()))?;
            let (power, label, tolerance) = show.choice.checked()?;
            let machine = crate::this_machine()?;
            let curve = crate::units::curve(&machine, &runs, &show.policy, &power, tolerance);
            if args.json {
                return Ok(output::print_json(&serde_json::json!({
                    "program": key,
                    "runs": runs,
                    "policy": show.policy,
                    "power_model": label,
                    "curve": curve,
                }))?);
            }
            Ok(output::print(&text(&key, runs.len(), show, &label, &curve))?)
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

fn text(key: &str, runs: usize, show: &ShowArgs, label: &str, c: &crate::units::Curve) -> String {
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
