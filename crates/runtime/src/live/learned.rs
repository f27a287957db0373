//! What the loop learns around a live run (S1's profile database): the
//! programs' stored profiles and the machine's calibrated peak bandwidth
//! are loaded before the run, and the profiles it extended are stored
//! after it. A database problem is a warning, never a lost run: the run
//! then learns from itself alone.

use std::path::{Path, PathBuf};

use herd_engine::Learning;
use herd_store::{PEAK_BTR, ProfileStore, SqliteStore};

/// The profile database: `db` when given, else the default under
/// `$XDG_DATA_HOME` or `$HOME` (`None` when neither is set).
pub fn db_path(db: Option<&Path>) -> Option<PathBuf> {
    db.map(Path::to_path_buf).or_else(|| {
        herd_store::default_path(
            std::env::var("XDG_DATA_HOME").ok().as_deref(),
            std::env::var("HOME").ok().as_deref(),
        )
    })
}

/// The open database a run's learning goes back to.
pub struct Stored {
    store: Option<SqliteStore>,
}

/// Loads what the database knows of `programs` (profile-store keys) and
/// the machine's peak bandwidth. Returns the learning to run with, the
/// store to save into, and a note for the user when something is missing.
pub fn load(db: Option<&Path>, programs: &[String]) -> (Learning, Stored, Option<String>) {
    let Some(path) = db_path(db) else {
        let note = "no HOME or XDG_DATA_HOME: nothing learned is kept (use --db PATH)".to_string();
        return (
            Learning::new(Default::default(), None),
            Stored { store: None },
            Some(note),
        );
    };
    let store = match SqliteStore::open(&path) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("herd: warning: {e}; learning from this run alone");
            return (
                Learning::new(Default::default(), None),
                Stored { store: None },
                None,
            );
        }
    };
    // One program at a time, so one unreadable profile costs only itself.
    let mut profiles = std::collections::BTreeMap::new();
    for p in programs {
        match store.profiles([p.as_str()]) {
            Ok(found) => profiles.extend(found),
            Err(e) => eprintln!("herd: warning: {e}; it starts afresh"),
        }
    }
    let peak = match store.calibration(PEAK_BTR) {
        Ok(c) => c.map(|c| c.value),
        Err(e) => {
            eprintln!("herd: warning: {e}");
            None
        }
    };
    let note = peak.is_none().then(|| {
        format!(
            "the peak memory bandwidth is not calibrated in {} (run `herd calibrate`): \
             no sample can be judged solo, so solo estimates rest on contended samples",
            path.display()
        )
    });
    (
        Learning::new(profiles, peak).journaled(),
        Stored { store: Some(store) },
        note,
    )
}

/// Stores what `learning` learned.
pub fn save(stored: Stored, learning: Learning) {
    let Some(mut store) = stored.store else {
        return;
    };
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64());
    // Another run of the same program may have stored its profile since
    // this one loaded it: this run's learning is replayed onto that one.
    let learned = learning.into_learned();
    let programs: Vec<&str> = learned.profiles.keys().map(String::as_str).collect();
    if let Err(e) = store.update_profiles(programs, now, |program, stored| learned.rebased(program, stored)) {
        eprintln!("herd: warning: what this run learned was not stored: {e}");
    }
}
