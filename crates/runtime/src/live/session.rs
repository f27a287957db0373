//! A live session: herd's loop over programs on this machine, from the
//! moment they are in a [`LiveWorld`] to the moment the machine is theirs
//! again. `herd run`, `herd batch` and `herd attach` differ in how their
//! programs start and what they print; this owns what they share:
//!
//! - loading what earlier runs learned and saving what this one learned;
//! - the one live call of `herd_engine::run`;
//! - restoring the machine (continue, thaw, affinities, lanes) on every
//!   exit: [`Session::finish`] on the normal path, and `Drop` on an error
//!   return or a panic unwinding past the session; a signal ends the loop,
//!   so it takes the normal path;
//! - the figures the summaries print (wall time, herd's and the programs'
//!   CPU time, the loop's overhead).

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Instant;

use herd_engine::{Actuator, Clock, Config, GuardReport, Learning, Overhead, Ran, Sensor};
use herd_policy::{Estimates, Plan, Policy, View};
use herd_topo::Machine;

use super::LiveWorld;
use super::learned::{self, Stored};
use crate::meter::{CpuMeter, cpu_seconds};

/// Whether a session learns (S1's profile database).
#[derive(Debug, Clone, Copy)]
pub enum Learn<'a> {
    /// Nothing is loaded or stored (`herd attach`: the process is not
    /// herd's and its program key is unknown).
    Off,
    /// From and into this database (`None`: the default path).
    Db(Option<&'a Path>),
}

/// See the module docs.
pub struct Session {
    /// `None` once finished, so `Drop` knows the machine is restored.
    world: Option<LiveWorld>,
    learning: Option<(Learning, Stored)>,
    /// What the loop cost and what its guard did (empty while no loop has run).
    ran: Ran,
    started: Instant,
    herd_cpu_before_s: f64,
    programs_cpu_before_s: f64,
}

/// A session's end: the programs (restored, maybe still running) and its
/// figures.
pub struct Finished {
    /// The programs, restored: wait for them, pass a signal on.
    pub world: LiveWorld,
    /// The loop's turns and cost (all zero when no loop ran).
    pub overhead: Overhead,
    /// What the guard did, when the loop ran under one.
    pub guard: Option<GuardReport>,
    /// Wall time from the session's start.
    pub wall_s: f64,
    /// herd's own CPU time over the session.
    pub herd_cpu_s: f64,
    programs_cpu_before_s: f64,
}

impl Finished {
    /// The CPU time of the programs since the session started: what the
    /// kernel counted for the children this process has waited for, so
    /// call it after `world.wait_all()`.
    pub fn programs_cpu_s(&self) -> f64 {
        cpu_seconds(libc::RUSAGE_CHILDREN) - self.programs_cpu_before_s
    }
}

impl Session {
    /// A session over `world`'s programs; with `learn`, loads what the
    /// database knows of them. The note says what is missing (no database,
    /// no calibrated peak), for the caller to show or not.
    pub fn start(world: LiveWorld, learn: Learn<'_>) -> (Session, Option<String>) {
        let (learning, note) = match learn {
            Learn::Off => (None, None),
            Learn::Db(db) => {
                let keys: Vec<String> = world.programs().iter().map(|p| p.program.clone()).collect();
                let (learning, stored, note) = learned::load(db, &keys);
                (Some((learning, stored)), note)
            }
        };
        let session = Session {
            world: Some(world),
            learning,
            ran: Ran::default(),
            started: Instant::now(),
            herd_cpu_before_s: cpu_seconds(libc::RUSAGE_SELF),
            programs_cpu_before_s: cpu_seconds(libc::RUSAGE_CHILDREN),
        };
        (session, note)
    }

    /// What the session's learning starts from: the stored profiles and
    /// the calibrated peak bandwidth (`None`: learning off). A trace
    /// records it before the loop runs, so a replay starts the same.
    pub fn learning_start(&self) -> Option<(BTreeMap<String, herd_profile::ProgramProfile>, Option<f64>)> {
        self.learning
            .as_ref()
            .map(|(l, _)| (l.profiles(), l.knowledge().peak_btr))
    }

    /// The programs, for setting up before the loop (mechanisms, progress
    /// and budget files, lanes).
    pub fn world(&mut self) -> &mut LiveWorld {
        self.world
            .as_mut()
            .expect("a session is used only until it finishes")
    }

    /// Runs herd's loop under `policy` until the programs end or a signal
    /// stops it; `on_decision` sees every view and plan. Its cost is in
    /// [`Finished::overhead`].
    pub fn run(
        &mut self,
        policy: &mut dyn Policy,
        machine: &Machine,
        config: &Config,
        on_decision: impl FnMut(&View<'_>, &Plan),
    ) {
        let world = self
            .world
            .as_mut()
            .expect("a session is used only until it finishes");
        // What earlier runs stored, as the policies' estimates (S3's
        // offline signature and history), as the simulator's `history` does.
        let estimates = self
            .learning
            .as_ref()
            .map_or_else(Estimates::new, |(l, _)| l.estimates());
        self.ran = herd_engine::run(
            policy,
            machine,
            &estimates,
            self.learning.as_mut().map(|(l, _)| l),
            world,
            &mut CpuMeter::default(),
            config,
            on_decision,
        );
    }

    /// No loop: the programs go and Linux places them (a batch's
    /// comparison run); returns when they have all ended or a signal came.
    pub fn let_run(&mut self) {
        let world = self.world();
        world.apply(&Plan::default());
        while !world.finished() {
            let t = world.now_ns() + 5_000_000;
            world.advance_to(t);
        }
    }

    /// Restores the machine, stores what was learned, and returns the
    /// programs and the session's figures.
    pub fn finish(mut self) -> Finished {
        let mut world = self.world.take().expect("a session finishes once");
        world.restore();
        self.save();
        Finished {
            world,
            overhead: self.ran.overhead,
            guard: self.ran.guard.take(),
            wall_s: self.started.elapsed().as_secs_f64(),
            herd_cpu_s: cpu_seconds(libc::RUSAGE_SELF) - self.herd_cpu_before_s,
            programs_cpu_before_s: self.programs_cpu_before_s,
        }
    }

    fn save(&mut self) {
        if let Some((learning, stored)) = self.learning.take() {
            learned::save(stored, learning);
        }
    }
}

impl Drop for Session {
    /// An error return or a panic left the session unfinished: give the
    /// machine back and keep what was learned.
    fn drop(&mut self) {
        if let Some(world) = self.world.as_mut() {
            world.restore();
            self.save();
        }
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;
    use std::sync::Arc;

    use herd_engine::{Actuator, Sensor};
    use herd_policy::Plan;

    use super::*;
    use crate::live::{Program, spawn};

    /// A session that unwinds (a panic mid-run) leaves its program running:
    /// `Drop` continues what herd stopped.
    #[test]
    fn a_panic_past_the_session_continues_a_paused_program() {
        let child = spawn(&["sleep".into(), "30".into()]).unwrap();
        let pid = child.id() as i32;
        let world = LiveWorld::new(
            vec![Program::new("sleep".into(), "sleep".into(), pid, Some(child))],
            Arc::default(),
        );
        let (session, _) = Session::start(world, Learn::Off);
        let mut session = std::panic::AssertUnwindSafe(session);
        let state = || crate::procfs::state(Path::new("/proc"), pid);
        let unwound = std::panic::catch_unwind(move || {
            let world = session.world();
            world.observe();
            let mut plan = Plan::default();
            plan.pause(pid as u64, "test");
            world.apply(&plan);
            assert_eq!(state(), Some('T'), "the plan stopped it");
            panic!("a defect mid-run");
        });
        assert!(unwound.is_err());
        let after = state();
        // SAFETY: kill(2) on our own child's pid; no memory is involved.
        unsafe { libc::kill(pid, libc::SIGKILL) };
        assert_ne!(after, Some('T'), "the session's Drop continued it");
    }
}
