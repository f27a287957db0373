//! The flags and names around the unit choice (`herd_plan::units`): how
//! `herd run --threads auto` and `herd db show` weigh unit counts, and a
//! program's key in the profile store.

use std::path::{Path, PathBuf};

use herd_model::PowerModel;

use crate::common::Failure;

/// The flags that say how to weigh unit counts, shared by `herd run` and
/// `herd db show`.
#[derive(clap::Args, Debug)]
pub struct ChoiceArgs {
    /// The power model for energy estimates and --goal energy: auto (the
    /// one `herd calibrate` fitted to this machine's RAPL readings where
    /// stored, else dell-c6100), a preset (dell-c6100, hp-dk388p) or a
    /// TOML file of its fields.
    #[arg(long, value_name = "auto|NAME|FILE", default_value = "auto")]
    pub power_model: String,
    /// For the speed choice: how far below the best predicted speedup, in
    /// per cent, a smaller unit count may be.
    #[arg(long, value_name = "PCT", default_value_t = 5.0)]
    pub tolerance: f64,
}

impl ChoiceArgs {
    /// The power model with its label, and the tolerance as a fraction;
    /// `store` holds a fitted model for `auto`.
    pub fn checked(
        &self,
        store: Option<&herd_store::SqliteStore>,
    ) -> Result<(PowerModel, String, f64), Failure> {
        if !(self.tolerance.is_finite() && (0.0..100.0).contains(&self.tolerance)) {
            return Err(Failure::Input(anyhow::anyhow!(
                "--tolerance must be a per cent in [0, 100), got {}",
                self.tolerance
            )));
        }
        let (model, label) = match (self.power_model.as_str(), store.and_then(stored_power_model)) {
            ("auto", Some(m)) => (
                m,
                "fitted by herd calibrate to this machine's RAPL readings".to_string(),
            ),
            ("auto", None) => power_model("dell-c6100")?,
            (spec, _) => power_model(spec)?,
        };
        Ok((model, label, self.tolerance / 100.0))
    }
}

/// The power model named by `--power-model`: a preset, or a TOML file with
/// the model's fields (docs/scenarios.md, `[model.power]`).
fn power_model(spec: &str) -> Result<(PowerModel, String), Failure> {
    if let Some(p) = PowerModel::preset(spec) {
        return Ok((p, format!("S0's {spec} preset")));
    }
    let text = std::fs::read_to_string(spec).map_err(|e| {
        Failure::Input(anyhow::anyhow!(
            "--power-model {spec}: not a preset (dell-c6100, hp-dk388p) nor a readable file: {e}"
        ))
    })?;
    let p: PowerModel = toml::from_str(&text).map_err(|e| Failure::Input(anyhow::anyhow!("{spec}: {e}")))?;
    Ok((p, spec.to_string()))
}

/// The program's key in the profile store: its executable as found and its
/// arguments as given (a `{threads}` template stays a template, so runs at
/// different unit counts share a key).
pub fn program_key(cmd: &[String]) -> String {
    program_key_in(cmd, None)
}

/// [`program_key`] for a program started in `cwd`.
pub fn program_key_in(cmd: &[String], cwd: Option<&Path>) -> String {
    let exe = herd_runtime::live::resolve(&cmd[0], cwd)
        .map_or(cmd[0].clone(), |p| absolute(&p).display().to_string());
    std::iter::once(exe)
        .chain(cmd[1..].iter().cloned())
        .collect::<Vec<_>>()
        .join(" ")
}

/// `path` with its folder made absolute and free of `.` and `..`, so one
/// program started from different folders has one key. The file name
/// itself stays: a multi-call binary's links (busybox) are different
/// programs.
fn absolute(path: &Path) -> PathBuf {
    let (Some(dir), Some(name)) = (path.parent(), path.file_name()) else {
        return path.to_path_buf();
    };
    let dir = if dir.as_os_str().is_empty() {
        Path::new(".")
    } else {
        dir
    };
    std::fs::canonicalize(dir).map_or_else(|_| path.to_path_buf(), |d| d.join(name))
}

/// S0's σ for this machine: `herd calibrate`'s measurement on two SMT
/// siblings where `store` holds one, else S0's 0.3; and whether it was
/// measured.
pub fn smt_sigma(store: Option<&herd_store::SqliteStore>) -> (f64, bool) {
    match store.and_then(|s| s.calibration(herd_store::SMT_SIGMA).ok().flatten()) {
        Some(c) if (0.0..=1.0).contains(&c.value) => (c.value, true),
        _ => (herd_policy::order::S0_SIGMA, false),
    }
}

/// The power model `herd calibrate` fitted and stored, if it did.
pub fn stored_power_model(store: &herd_store::SqliteStore) -> Option<PowerModel> {
    let mut v = [0.0; 5];
    for (slot, name) in v.iter_mut().zip(herd_store::POWER_MODEL) {
        *slot = store.calibration(name).ok().flatten()?.value;
    }
    Some(PowerModel::from_terms(v))
}
