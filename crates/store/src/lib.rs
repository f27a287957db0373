//! herd's profile database.
//!
//! SQLite, because it is what the field trusts for a single-file store that
//! survives crashes: the database runs in WAL mode and every completed run
//! is written in one transaction, so a herd killed mid-write loses at most
//! the run it was writing, never one already recorded. The schema is
//! versioned with SQLite's `user_version`; [`SqliteStore::open`] migrates
//! older files forward and refuses newer ones.
//!
//! Four kinds of record: completed runs (S0's unit-count history), the
//! learned profile of each program (S1's database: phases, solo estimates,
//! memory requests, solo time, coverage, run count), the machine's
//! calibrations (its peak memory bandwidth, from `herd calibrate`), and the
//! makespans of whole batches, for the guard across runs
//! (`herd_engine::guard_runs`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use herd_profile::ProgramProfile;

use rusqlite::{Connection, OptionalExtension, TransactionBehavior, params};
use serde::Serialize;

/// Why the store failed.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// SQLite refused an operation.
    #[error("{path}: {source}")]
    Sqlite {
        /// The database file.
        path: PathBuf,
        /// SQLite's error.
        source: rusqlite::Error,
    },
    /// The file was written by a newer herd.
    #[error("{path}: schema version {found} is newer than this herd knows ({known}); upgrade herd")]
    TooNew {
        /// The database file.
        path: PathBuf,
        /// The version in the file.
        found: i64,
        /// The newest version this herd knows.
        known: i64,
    },
    /// A stored profile could not be read back (written by another herd
    /// version, or edited by hand).
    #[error("{path}: the stored profile of '{program}' is unreadable ({source}); `herd db forget` clears it")]
    BadProfile {
        /// The database file.
        path: PathBuf,
        /// The program whose profile it is.
        program: String,
        /// Why it did not parse.
        source: serde_json::Error,
    },
    /// The folder for the database could not be made.
    #[error("{path}: {source}")]
    Io {
        /// The folder.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
}

/// One completed run of a program.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunRecord {
    /// The program's key: executable and argument signature.
    pub program: String,
    /// The policy it ran under.
    pub policy: String,
    /// When it started, seconds since the Unix epoch.
    pub started_unix_s: f64,
    /// Wall time.
    pub wall_s: f64,
    /// CPU time of the program.
    pub cpu_s: f64,
    /// Most threads seen at once.
    pub threads: u32,
    /// Its exit code (128 + signal when a signal ended it).
    pub exit_code: Option<i32>,
    /// herd's own CPU time.
    pub herd_cpu_s: f64,
    /// The units (threads) herd was asked to run it with (`--threads`),
    /// when it was.
    pub units: Option<u32>,
    /// Machine energy measured by RAPL over the run, where available.
    pub energy_j: Option<f64>,
    /// The power model's estimate of the machine's energy over the run.
    pub model_energy_j: Option<f64>,
}

/// One measurement of the machine, such as its peak memory bandwidth.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Calibration {
    /// What was measured (e.g. [`PEAK_BTR`]).
    pub name: String,
    /// The value, in `unit`.
    pub value: f64,
    /// The value's unit, for people reading the file.
    pub unit: String,
    /// When it was measured, seconds since the Unix epoch.
    pub measured_unix_s: f64,
    /// How it was measured (free text: probe, CPUs, rounds).
    pub detail: String,
}

/// One finished run of a whole batch (`herd batch`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BatchRunRecord {
    /// The batch's programs: their keys, sorted, one a line (copies
    /// repeated), so the same programs make the same batch whatever the
    /// file calls them.
    pub mix: String,
    /// The policy it was run for.
    pub policy: String,
    /// Whether the kernel placed it (herd placed nothing), not the policy.
    pub by_kernel: bool,
    /// When its last program ended, from the start.
    pub makespan_s: f64,
    /// When it started, seconds since the Unix epoch.
    pub started_unix_s: f64,
}

/// The calibration name of the machine's peak memory bandwidth, in bus
/// transactions (cache lines) per µs, summed over all CPUs.
pub const PEAK_BTR: &str = "peak_btr";

/// The calibration name of S0's σ measured on two SMT siblings: two busy
/// siblings deliver 1 + σ of one.
pub const SMT_SIGMA: &str = "smt_sigma";

/// The same measure on two CPUs the kernel calls separate cores: 1 when
/// they share nothing that shows; less when they do (a virtual machine's
/// vCPUs on one host core's threads, a shared power budget).
pub const CORE_PAIR_SIGMA: &str = "core_pair_sigma";

/// The calibration names of S0's power model fitted to RAPL readings, in
/// watts: idle, first package, each further package, per core, per extra
/// sibling (`herd_model::PowerModel`'s fields, in that order).
pub const POWER_MODEL: [&str; 5] = [
    "power_idle_w",
    "power_first_package_w",
    "power_next_package_w",
    "power_core_w",
    "power_sibling_w",
];

/// Where herd keeps what it learns about programs across runs.
pub trait ProfileStore {
    /// Records a completed run; returns its id.
    fn record_run(&mut self, run: &RunRecord) -> Result<i64, StoreError>;
    /// Every run of `program`, oldest first.
    fn runs(&self, program: &str) -> Result<Vec<RunRecord>, StoreError>;
    /// The stored profiles of those of `programs` that have one.
    fn profiles<'a>(
        &self,
        programs: impl IntoIterator<Item = &'a str>,
    ) -> Result<BTreeMap<String, ProgramProfile>, StoreError>;
    /// Stores `profiles`, replacing what was stored for each, in one
    /// transaction: after a crash, either all of a run's learning is
    /// stored or none.
    fn save_profiles(
        &mut self,
        profiles: &BTreeMap<String, ProgramProfile>,
        now_unix_s: f64,
    ) -> Result<(), StoreError>;
}

/// Schema migrations, in order; migration i brings the file to version i + 1.
const MIGRATIONS: &[&str] = &[
    "CREATE TABLE run (
        id INTEGER PRIMARY KEY,
        program TEXT NOT NULL,
        policy TEXT NOT NULL,
        started_unix_s REAL NOT NULL,
        wall_s REAL NOT NULL,
        cpu_s REAL NOT NULL,
        threads INTEGER NOT NULL,
        exit_code INTEGER,
        herd_cpu_s REAL NOT NULL
    );
    CREATE INDEX run_program ON run (program);",
    // Version 2 (S0): the unit count asked for, measured and modelled energy.
    "ALTER TABLE run ADD COLUMN units INTEGER;
    ALTER TABLE run ADD COLUMN energy_j REAL;
    ALTER TABLE run ADD COLUMN model_energy_j REAL;",
    // Version 3 (S1): learned program profiles, stored as the profile
    // crate's JSON (its phase table and Markov counts are nested, and only
    // herd reads them whole), and the machine's calibrations.
    "CREATE TABLE profile (
        program TEXT PRIMARY KEY,
        body TEXT NOT NULL,
        updated_unix_s REAL NOT NULL
    );
    CREATE TABLE calibration (
        name TEXT PRIMARY KEY,
        value REAL NOT NULL,
        unit TEXT NOT NULL,
        measured_unix_s REAL NOT NULL,
        detail TEXT NOT NULL
    );",
    // Version 4: whole batches' makespans, under the policy and under the
    // kernel, for the guard across runs.
    "CREATE TABLE batch_run (
        id INTEGER PRIMARY KEY,
        mix TEXT NOT NULL,
        policy TEXT NOT NULL,
        by_kernel INTEGER NOT NULL,
        makespan_s REAL NOT NULL,
        started_unix_s REAL NOT NULL
    );
    CREATE INDEX batch_run_mix ON batch_run (mix, policy);",
];

/// Wraps SQLite's errors with the file they concern. Takes the path, not
/// the store, so a method can hold it while it borrows the connection
/// mutably for a transaction.
fn sqlite_err(path: &Path) -> impl Fn(rusqlite::Error) -> StoreError + Copy + '_ {
    move |source| StoreError::Sqlite {
        path: path.to_path_buf(),
        source,
    }
}

/// A `batch_run` row selected as `mix, policy, by_kernel, makespan_s,
/// started_unix_s`.
fn batch_run_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<BatchRunRecord> {
    Ok(BatchRunRecord {
        mix: r.get(0)?,
        policy: r.get(1)?,
        by_kernel: r.get(2)?,
        makespan_s: r.get(3)?,
        started_unix_s: r.get(4)?,
    })
}

/// The SQLite profile store.
#[derive(Debug)]
pub struct SqliteStore {
    path: PathBuf,
    conn: Connection,
}

/// The default database path: `$XDG_DATA_HOME/herd/herd.db`, else
/// `~/.local/share/herd/herd.db`. `None` when neither variable is set.
pub fn default_path(xdg_data_home: Option<&str>, home: Option<&str>) -> Option<PathBuf> {
    match (
        xdg_data_home.filter(|s| !s.is_empty()),
        home.filter(|s| !s.is_empty()),
    ) {
        (Some(x), _) => Some(Path::new(x).join("herd/herd.db")),
        (None, Some(h)) => Some(Path::new(h).join(".local/share/herd/herd.db")),
        (None, None) => None,
    }
}

/// How long opening waits for other herds holding the file.
const OPEN_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

/// Puts the file in WAL mode. The switch needs the file to itself, and
/// SQLite does not run the busy handler for it: ten herds opening a new
/// file at once failed now and then with "database is locked" (CI's
/// `ten_concurrent_runs_all_count_in_the_profile`). WAL stays with the
/// file, so the mode is read first (no switch, no lock, once any herd has
/// made it), and a busy switch is tried again, waiting a little longer
/// each time, until `OPEN_WAIT` has passed. A file system that refuses WAL
/// leaves the mode as it was, as before.
fn to_wal(conn: &Connection) -> Result<(), rusqlite::Error> {
    let start = std::time::Instant::now();
    let mut pause = std::time::Duration::from_millis(1);
    loop {
        let mode: String = conn.pragma_query_value(None, "journal_mode", |r| r.get(0))?;
        if mode.eq_ignore_ascii_case("wal") {
            return Ok(());
        }
        match conn.pragma_update_and_check(None, "journal_mode", "WAL", |r| r.get::<_, String>(0)) {
            Ok(_) => return Ok(()),
            Err(rusqlite::Error::SqliteFailure(f, _))
                if matches!(
                    f.code,
                    rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked
                ) && start.elapsed() < OPEN_WAIT =>
            {
                std::thread::sleep(pause);
                pause = (pause * 2).min(std::time::Duration::from_millis(50));
            }
            Err(e) => return Err(e),
        }
    }
}

impl SqliteStore {
    /// Opens (creating if needed) the database at `path` and migrates it.
    pub fn open(path: &Path) -> Result<SqliteStore, StoreError> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|source| StoreError::Io {
                path: dir.to_path_buf(),
                source,
            })?;
        }
        let err = sqlite_err(path);
        let mut conn = Connection::open(path).map_err(err)?;
        // A writer waits for a lock. WAL: readers never block the writer,
        // and a crash mid-write leaves every committed transaction intact.
        conn.busy_timeout(OPEN_WAIT).map_err(err)?;
        to_wal(&conn).map_err(err)?;
        conn.pragma_update(None, "synchronous", "NORMAL").map_err(err)?;
        // The version is read and the migrations run under one write lock
        // taken up front (BEGIN IMMEDIATE): two herds opening a new file at
        // once would otherwise both read version 0 and the second fail on
        // "table run already exists".
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(err)?;
        let version: i64 = tx
            .pragma_query_value(None, "user_version", |r| r.get(0))
            .map_err(err)?;
        let known = MIGRATIONS.len() as i64;
        if version > known {
            return Err(StoreError::TooNew {
                path: path.to_path_buf(),
                found: version,
                known,
            });
        }
        for (i, sql) in MIGRATIONS.iter().enumerate().skip(version as usize) {
            tx.execute_batch(sql).map_err(err)?;
            tx.pragma_update(None, "user_version", i as i64 + 1)
                .map_err(err)?;
        }
        tx.commit().map_err(err)?;
        Ok(SqliteStore {
            path: path.to_path_buf(),
            conn,
        })
    }

    /// Read-modify-write of profiles under one write lock taken up front
    /// (BEGIN IMMEDIATE): for each of `programs`, `update` gets what is
    /// stored now (`None`: nothing, or a profile that no longer reads) and
    /// returns what to store (`None`: leave it). Concurrent runs of one
    /// program each see the profile the one before stored, so none of
    /// their learning is lost.
    pub fn update_profiles<'a>(
        &mut self,
        programs: impl IntoIterator<Item = &'a str>,
        now_unix_s: f64,
        mut update: impl FnMut(&str, Option<ProgramProfile>) -> Option<ProgramProfile>,
    ) -> Result<(), StoreError> {
        let err = sqlite_err(&self.path);
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(err)?;
        {
            let mut read = tx
                .prepare("SELECT body FROM profile WHERE program = ?1")
                .map_err(err)?;
            let mut write = tx
                .prepare("INSERT OR REPLACE INTO profile (program, body, updated_unix_s) VALUES (?1, ?2, ?3)")
                .map_err(err)?;
            for program in programs {
                let body: Option<String> = read.query_row([program], |r| r.get(0)).optional().map_err(err)?;
                let stored = body.and_then(|b| serde_json::from_str(&b).ok());
                if let Some(profile) = update(program, stored) {
                    // A profile holds only numbers, strings and maps with
                    // string keys, which serde_json always encodes.
                    let body = serde_json::to_string(&profile).expect("a profile encodes as JSON");
                    write.execute(params![program, body, now_unix_s]).map_err(err)?;
                }
            }
        }
        tx.commit().map_err(err)
    }

    /// The schema version of the open file.
    pub fn version(&self) -> Result<i64, StoreError> {
        self.conn
            .pragma_query_value(None, "user_version", |r| r.get(0))
            .map_err(sqlite_err(&self.path))
    }

    /// Every program with a recorded run or a learned profile, with its
    /// recorded run count (0 for a profile alone: `herd batch` learns
    /// without recording runs).
    pub fn programs(&self) -> Result<Vec<(String, i64)>, StoreError> {
        let err = sqlite_err(&self.path);
        let mut stmt = self
            .conn
            .prepare(
                "SELECT program, SUM(n) FROM (
                    SELECT program, COUNT(*) AS n FROM run GROUP BY program
                    UNION ALL SELECT program, 0 FROM profile)
                 GROUP BY program ORDER BY program",
            )
            .map_err(err)?;
        let rows = stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?))).map_err(err)?;
        rows.collect::<Result<_, _>>().map_err(err)
    }

    /// Forgets `program`: its runs, its profile, and the recorded runs of
    /// every batch it was in. Returns how many runs, profiles (0 or 1) and
    /// batch runs went.
    pub fn forget(&mut self, program: &str) -> Result<(usize, usize, usize), StoreError> {
        let err = sqlite_err(&self.path);
        let tx = self.conn.transaction().map_err(err)?;
        let runs = tx
            .execute("DELETE FROM run WHERE program = ?1", [program])
            .map_err(err)?;
        let profiles = tx
            .execute("DELETE FROM profile WHERE program = ?1", [program])
            .map_err(err)?;
        // A mix is its programs' keys one a line: the program is one of
        // its lines.
        let batch_runs = tx
            .execute(
                "DELETE FROM batch_run
                 WHERE instr(char(10) || mix || char(10), char(10) || ?1 || char(10)) > 0",
                [program],
            )
            .map_err(err)?;
        tx.commit().map_err(err)?;
        Ok((runs, profiles, batch_runs))
    }

    /// Every recorded batch run, oldest first.
    pub fn every_batch_run(&self) -> Result<Vec<BatchRunRecord>, StoreError> {
        let err = sqlite_err(&self.path);
        let mut stmt = self
            .conn
            .prepare("SELECT mix, policy, by_kernel, makespan_s, started_unix_s FROM batch_run ORDER BY id")
            .map_err(err)?;
        let rows = stmt.query_map([], batch_run_row).map_err(err)?;
        rows.collect::<Result<_, _>>().map_err(err)
    }

    /// The calibration called `name`, if measured.
    pub fn calibration(&self, name: &str) -> Result<Option<Calibration>, StoreError> {
        self.conn
            .query_row(
                "SELECT name, value, unit, measured_unix_s, detail FROM calibration WHERE name = ?1",
                [name],
                |r| {
                    Ok(Calibration {
                        name: r.get(0)?,
                        value: r.get(1)?,
                        unit: r.get(2)?,
                        measured_unix_s: r.get(3)?,
                        detail: r.get(4)?,
                    })
                },
            )
            .optional()
            .map_err(sqlite_err(&self.path))
    }

    /// Every calibration, by name.
    pub fn calibrations(&self) -> Result<Vec<Calibration>, StoreError> {
        let err = sqlite_err(&self.path);
        let mut stmt = self
            .conn
            .prepare("SELECT name FROM calibration ORDER BY name")
            .map_err(err)?;
        let names: Vec<String> = stmt
            .query_map([], |r| r.get(0))
            .map_err(err)?
            .collect::<Result<_, _>>()
            .map_err(err)?;
        Ok(names
            .iter()
            .map(|n| self.calibration(n))
            .collect::<Result<Vec<_>, _>>()?
            .into_iter()
            .flatten()
            .collect())
    }

    /// Records a finished run of a batch.
    pub fn record_batch_run(&mut self, r: &BatchRunRecord) -> Result<(), StoreError> {
        self.conn
            .execute(
                "INSERT INTO batch_run (mix, policy, by_kernel, makespan_s, started_unix_s)
                 VALUES (?1, ?2, ?3, ?4, ?5)",
                params![r.mix, r.policy, r.by_kernel, r.makespan_s, r.started_unix_s],
            )
            .map(|_| ())
            .map_err(sqlite_err(&self.path))
    }

    /// The latest `last` runs of the batch `mix` for `policy`, oldest first.
    pub fn batch_runs(
        &self,
        mix: &str,
        policy: &str,
        last: usize,
    ) -> Result<Vec<BatchRunRecord>, StoreError> {
        let err = sqlite_err(&self.path);
        let mut stmt = self
            .conn
            .prepare(
                "SELECT mix, policy, by_kernel, makespan_s, started_unix_s FROM batch_run
                 WHERE mix = ?1 AND policy = ?2 ORDER BY id DESC LIMIT ?3",
            )
            .map_err(err)?;
        let rows = stmt
            .query_map(
                params![mix, policy, i64::try_from(last).unwrap_or(i64::MAX)],
                batch_run_row,
            )
            .map_err(err)?;
        let mut out: Vec<BatchRunRecord> = rows.collect::<Result<_, _>>().map_err(err)?;
        out.reverse();
        Ok(out)
    }

    /// Stores `c`, replacing an earlier measurement of the same name.
    pub fn set_calibration(&mut self, c: &Calibration) -> Result<(), StoreError> {
        self.conn
            .execute(
                "INSERT OR REPLACE INTO calibration (name, value, unit, measured_unix_s, detail)
                 VALUES (?1, ?2, ?3, ?4, ?5)",
                params![c.name, c.value, c.unit, c.measured_unix_s, c.detail],
            )
            .map(|_| ())
            .map_err(sqlite_err(&self.path))
    }
}

impl ProfileStore for SqliteStore {
    fn record_run(&mut self, run: &RunRecord) -> Result<i64, StoreError> {
        let err = sqlite_err(&self.path);
        let tx = self.conn.transaction().map_err(err)?;
        tx.execute(
            "INSERT INTO run (program, policy, started_unix_s, wall_s, cpu_s, threads, exit_code, herd_cpu_s,
                              units, energy_j, model_energy_j)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)",
            params![
                run.program,
                run.policy,
                run.started_unix_s,
                run.wall_s,
                run.cpu_s,
                run.threads,
                run.exit_code,
                run.herd_cpu_s,
                run.units,
                run.energy_j,
                run.model_energy_j
            ],
        )
        .map_err(err)?;
        let id = tx.last_insert_rowid();
        tx.commit().map_err(err)?;
        Ok(id)
    }

    fn runs(&self, program: &str) -> Result<Vec<RunRecord>, StoreError> {
        let err = sqlite_err(&self.path);
        let mut stmt = self
            .conn
            .prepare(
                "SELECT program, policy, started_unix_s, wall_s, cpu_s, threads, exit_code, herd_cpu_s,
                        units, energy_j, model_energy_j
                 FROM run WHERE program = ?1 ORDER BY id",
            )
            .map_err(err)?;
        let rows = stmt
            .query_map([program], |r| {
                Ok(RunRecord {
                    program: r.get(0)?,
                    policy: r.get(1)?,
                    started_unix_s: r.get(2)?,
                    wall_s: r.get(3)?,
                    cpu_s: r.get(4)?,
                    threads: r.get(5)?,
                    exit_code: r.get(6)?,
                    herd_cpu_s: r.get(7)?,
                    units: r.get(8)?,
                    energy_j: r.get(9)?,
                    model_energy_j: r.get(10)?,
                })
            })
            .map_err(err)?;
        rows.collect::<Result<_, _>>().map_err(err)
    }

    fn profiles<'a>(
        &self,
        programs: impl IntoIterator<Item = &'a str>,
    ) -> Result<BTreeMap<String, ProgramProfile>, StoreError> {
        let err = sqlite_err(&self.path);
        let mut stmt = self
            .conn
            .prepare("SELECT body FROM profile WHERE program = ?1")
            .map_err(err)?;
        let mut out = BTreeMap::new();
        for program in programs {
            let body: Option<String> = stmt.query_row([program], |r| r.get(0)).optional().map_err(err)?;
            if let Some(body) = body {
                let profile = serde_json::from_str(&body).map_err(|source| StoreError::BadProfile {
                    path: self.path.clone(),
                    program: program.to_string(),
                    source,
                })?;
                out.insert(program.to_string(), profile);
            }
        }
        Ok(out)
    }

    fn save_profiles(
        &mut self,
        profiles: &BTreeMap<String, ProgramProfile>,
        now_unix_s: f64,
    ) -> Result<(), StoreError> {
        self.update_profiles(profiles.keys().map(String::as_str), now_unix_s, |program, _| {
            profiles.get(program).cloned()
        })
    }
}

/// Used by tests and `herd` to check a file: SQLite's own integrity check.
pub fn integrity_ok(path: &Path) -> bool {
    Connection::open(path)
        .and_then(|c| {
            c.query_row("PRAGMA integrity_check", [], |r| r.get::<_, String>(0))
                .optional()
        })
        .is_ok_and(|r| r.as_deref() == Some("ok"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(program: &str, wall_s: f64) -> RunRecord {
        RunRecord {
            program: program.into(),
            policy: "linux".into(),
            started_unix_s: 1.0,
            wall_s,
            cpu_s: wall_s / 2.0,
            threads: 4,
            exit_code: Some(0),
            herd_cpu_s: 0.001,
            units: Some(4),
            energy_j: None,
            model_energy_j: Some(wall_s * 100.0),
        }
    }

    #[test]
    fn runs_survive_reopening() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("sub/herd.db");
        {
            let mut s = SqliteStore::open(&path).unwrap();
            s.record_run(&run("a", 1.0)).unwrap();
            s.record_run(&run("a", 2.0)).unwrap();
            s.record_run(&run("b", 3.0)).unwrap();
        }
        let s = SqliteStore::open(&path).unwrap();
        assert_eq!(s.version().unwrap(), MIGRATIONS.len() as i64);
        assert_eq!(
            s.runs("a").unwrap().iter().map(|r| r.wall_s).collect::<Vec<_>>(),
            vec![1.0, 2.0]
        );
        assert_eq!(
            s.programs().unwrap(),
            vec![("a".to_string(), 2), ("b".to_string(), 1)]
        );
        assert!(integrity_ok(&path));
    }

    #[test]
    fn a_version_1_file_migrates_and_keeps_its_runs() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("herd.db");
        {
            let c = Connection::open(&path).unwrap();
            c.execute_batch(MIGRATIONS[0]).unwrap();
            c.pragma_update(None, "user_version", 1).unwrap();
            c.execute(
                "INSERT INTO run (program, policy, started_unix_s, wall_s, cpu_s, threads, exit_code, herd_cpu_s)
                 VALUES ('old', 'linux', 1.0, 2.0, 1.0, 2, 0, 0.0)",
                [],
            )
            .unwrap();
        }
        let mut s = SqliteStore::open(&path).unwrap();
        assert_eq!(s.version().unwrap(), MIGRATIONS.len() as i64);
        let old = s.runs("old").unwrap();
        assert_eq!((old[0].wall_s, old[0].units, old[0].energy_j), (2.0, None, None));
        s.record_run(&run("old", 1.0)).unwrap();
        assert_eq!(s.runs("old").unwrap()[1].units, Some(4));
    }

    #[test]
    fn batch_runs_come_back_per_batch_and_policy_oldest_first() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("herd.db");
        let mut s = SqliteStore::open(&path).unwrap();
        let rec = |mix: &str, policy: &str, by_kernel: bool, makespan_s: f64| BatchRunRecord {
            mix: mix.into(),
            policy: policy.into(),
            by_kernel,
            makespan_s,
            started_unix_s: 1.0,
        };
        for (i, by_kernel) in [false, true, false, false].into_iter().enumerate() {
            s.record_batch_run(&rec("a\nb", "bw:greedy", by_kernel, i as f64))
                .unwrap();
        }
        s.record_batch_run(&rec("a\nb", "cosched:fair", false, 9.0))
            .unwrap();
        s.record_batch_run(&rec("a", "bw:greedy", false, 9.0)).unwrap();
        drop(s);
        let s = SqliteStore::open(&path).unwrap();
        let all = s.batch_runs("a\nb", "bw:greedy", 100).unwrap();
        assert_eq!(
            all.iter().map(|r| r.makespan_s).collect::<Vec<_>>(),
            vec![0.0, 1.0, 2.0, 3.0]
        );
        assert!(all[1].by_kernel && !all[0].by_kernel);
        let last = s.batch_runs("a\nb", "bw:greedy", 2).unwrap();
        assert_eq!(
            last.iter().map(|r| r.makespan_s).collect::<Vec<_>>(),
            vec![2.0, 3.0]
        );
        assert!(s.batch_runs("c", "bw:greedy", 9).unwrap().is_empty());
        assert_eq!(s.every_batch_run().unwrap().len(), 6);
        // Forgetting a program forgets the batches it was in, and only
        // those: "a" is a line of "a\nb" and of "a", not of "ab".
        let mut s = s;
        s.record_batch_run(&rec("ab", "bw:greedy", false, 9.0)).unwrap();
        assert_eq!(s.forget("a").unwrap(), (0, 0, 6));
        assert_eq!(s.every_batch_run().unwrap().len(), 1);
    }

    /// A profile learned from one run of `slices` identical slices.
    fn learned(slices: u32) -> ProgramProfile {
        let mut p = ProgramProfile::default();
        let mut learner = herd_profile::RunLearner::new();
        let slice = herd_profile::Slice {
            instructions: 1_000_000,
            cpu_ns: 1_000_000,
            mem_bytes: 64_000,
            llc_refs: None,
            llc_misses: None,
            code_samples: None,
        };
        for _ in 0..slices {
            learner.observe(&mut p, &slice, herd_profile::Validity::OwnLow);
        }
        learner.finish(&mut p);
        p
    }

    #[test]
    fn profiles_round_trip_and_replace() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("herd.db");
        let mut s = SqliteStore::open(&path).unwrap();
        let mut batch = BTreeMap::new();
        batch.insert("a x".to_string(), learned(3));
        batch.insert("b".to_string(), learned(1));
        s.save_profiles(&batch, 10.0).unwrap();
        batch.insert("a x".to_string(), learned(5));
        s.save_profiles(&batch, 11.0).unwrap();
        drop(s);
        let s = SqliteStore::open(&path).unwrap();
        let back = s.profiles(["a x", "b", "never"]).unwrap();
        assert_eq!(back, batch);
        assert_eq!(back["a x"].phases.phases()[0].slices, 5);
        // A profile alone lists its program, with no recorded runs.
        assert_eq!(s.programs().unwrap(), vec![("a x".into(), 0), ("b".into(), 0)]);
    }

    #[test]
    fn forget_removes_runs_and_profile_of_one_program_only() {
        let tmp = tempfile::tempdir().unwrap();
        let mut s = SqliteStore::open(&tmp.path().join("herd.db")).unwrap();
        s.record_run(&run("a", 1.0)).unwrap();
        s.record_run(&run("a", 2.0)).unwrap();
        s.record_run(&run("b", 3.0)).unwrap();
        let mut batch = BTreeMap::new();
        batch.insert("a".to_string(), learned(2));
        batch.insert("b".to_string(), learned(2));
        s.save_profiles(&batch, 1.0).unwrap();
        assert_eq!(s.forget("a").unwrap(), (2, 1, 0));
        assert_eq!(s.forget("a").unwrap(), (0, 0, 0));
        assert_eq!(s.programs().unwrap(), vec![("b".into(), 1)]);
        assert_eq!(s.profiles(["a", "b"]).unwrap().len(), 1);
    }

    #[test]
    fn an_unreadable_profile_names_its_program() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("herd.db");
        let s = SqliteStore::open(&path).unwrap();
        s.conn
            .execute(
                "INSERT INTO profile (program, body, updated_unix_s) VALUES ('p q', '{\"phases\": 3}', 0)",
                [],
            )
            .unwrap();
        let e = s.profiles(["p q"]).unwrap_err();
        assert!(matches!(&e, StoreError::BadProfile { program, .. } if program == "p q"));
        assert!(e.to_string().contains("herd db forget"), "{e}");
    }

    #[test]
    fn calibrations_are_replaced_not_repeated() {
        let tmp = tempfile::tempdir().unwrap();
        let mut s = SqliteStore::open(&tmp.path().join("herd.db")).unwrap();
        assert_eq!(s.calibration(PEAK_BTR).unwrap(), None);
        let mut c = Calibration {
            name: PEAK_BTR.into(),
            value: 120.0,
            unit: "transactions/us".into(),
            measured_unix_s: 5.0,
            detail: "test".into(),
        };
        s.set_calibration(&c).unwrap();
        c.value = 130.0;
        s.set_calibration(&c).unwrap();
        assert_eq!(s.calibration(PEAK_BTR).unwrap(), Some(c.clone()));
        assert_eq!(s.calibrations().unwrap(), vec![c]);
    }

    #[test]
    fn a_newer_schema_is_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("herd.db");
        Connection::open(&path)
            .unwrap()
            .pragma_update(None, "user_version", 99)
            .unwrap();
        assert!(matches!(
            SqliteStore::open(&path),
            Err(StoreError::TooNew { found: 99, .. })
        ));
    }

    #[test]
    fn default_path_follows_xdg() {
        assert_eq!(
            default_path(Some("/x"), Some("/home/u")),
            Some(PathBuf::from("/x/herd/herd.db"))
        );
        assert_eq!(
            default_path(None, Some("/home/u")),
            Some(PathBuf::from("/home/u/.local/share/herd/herd.db"))
        );
        assert_eq!(default_path(Some(""), None), None);
    }
}
