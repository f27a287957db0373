//! The parts of the simulated world that each own one concern, split out
//! of `World` so that its own fields are the kernel model (threads, queues,
//! jobs, time) and each part below can be read alone:
//!
//! - [`Rates`]: the memory-contention solver and what the last solve left
//!   (warm start, classes, what changed since): rebuilt after a change, read
//!   to advance time;
//! - [`SensorView`]: what the sensor showed last and the bookkeeping that
//!   lets an unchanged period reuse it; the oracle's exact profiles;
//! - [`Accounting`]: what the run used (power, cores, memory traffic) and
//!   the timeline the report draws.
//!
//! The split follows who writes a field: `recompute` writes `Rates`,
//! `engine_io` writes `SensorView`, and time passing writes `Accounting`.

use herd_model::{MemSystem, Stream, StreamClasses};
use herd_policy::{Knowledge, Snapshot};

use super::{Counters, Segment};

/// The contention solver's state.
pub(super) struct Rates {
    /// The machine's memory system: the controllers and links streams queue at.
    pub(super) mem: MemSystem,
    /// When the next thread event is due (absolute ns); set whenever rates
    /// are set, valid until they change.
    pub(super) next_event_ns: f64,
    /// The last contention solution's arrival rates, to warm-start the next.
    pub(super) last_solution: Option<herd_model::Solution>,
    /// Progressing threads' streams grouped into classes, updated only for
    /// threads whose stream changed; a change that leaves the classes as
    /// they were (a swap of like threads) needs no solve. The last solve's
    /// ns per instruction, by class.
    pub(super) classes: StreamClasses,
    pub(super) class_ns_per_instr: Vec<f64>,
    /// Each thread's memory stream as of the last recompute (`None` while
    /// it makes no progress), by thread.
    pub(super) streams: Vec<Option<Stream>>,
    /// What changed since the last recompute: threads whose phase, barrier
    /// or CPU changed, and CPUs whose queue changed (their own threads'
    /// shares and their siblings' SMT shares follow). Only their threads'
    /// streams are rebuilt; everything is on the first recompute.
    pub(super) touched_threads: Vec<usize>,
    pub(super) touched_cpus: Vec<usize>,
    /// Scratch: which threads this recompute rebuilt.
    pub(super) rebuilt: Vec<bool>,
    /// Each CPU's SMT share of its core as of the last recompute, which
    /// sets it again only for the cores of the CPUs it counts again.
    pub(super) smt_buf: Vec<f64>,
    pub(super) speed_of_kind: Vec<f64>,
    /// Each CPU's SMT share of its core by how many of the core's CPUs
    /// are busy (`smt_share`), made once: a recompute looks it up for
    /// each core it counts, and its division was a quarter of the
    /// recompute's own time at 256 CPUs when it counted every core.
    pub(super) smt_share_by_busy: Vec<f64>,
}

/// What the sensor shows.
pub(super) struct SensorView {
    /// Each job's solo time, for the oracle (empty unless set).
    pub(super) solo_times_s: Vec<f64>,
    /// The last oracle answer, kept so the view can borrow it.
    pub(super) oracle: Knowledge,
    /// Each job's memory requests per run, for the oracle (filled on first use).
    pub(super) oracle_requests: Vec<f64>,
    /// The period (counted in observations) in which rates or placements
    /// last changed, and the time by which every migration warm-up is paid:
    /// observations of a period with neither equal the previous period's.
    pub(super) last_change_period: u64,
    pub(super) debt_paid_ns: f64,
    /// Observations so far, and the time of the one before the last
    /// (`last_observe_ns` is the last).
    pub(super) observes: u64,
    pub(super) before_last_observe_ns: u64,
    /// The last snapshot, and when it was taken.
    pub(super) snapshot: Snapshot,
    pub(super) last_observe_ns: u64,
    /// Energy and memory traffic up to the last snapshot: a snapshot shows
    /// what was used since.
    pub(super) seen_energy_j: f64,
    pub(super) seen_mem_bytes: f64,
    /// Thread indices behind `snapshot.tasks`, in order; rebuilt when a
    /// thread arrives or finishes.
    pub(super) present: Vec<usize>,
    pub(super) tasks_changed: bool,
    /// Each thread's counters as of the last observation, and what the
    /// last full one reported (a reused one reports it again), by thread:
    /// side by side, as every full observation reads and writes both.
    pub(super) seen: Vec<Seen>,
    /// Reused observations since the last full one whose reports are not
    /// yet added to `seen`: each adds `reported` once, and the additions
    /// are made, in the same order, when `seen` is next needed (a pass
    /// over every thread per reused observation was its whole cost).
    pub(super) repeats_unseen: u32,
    /// The run observes without reading (`Sensor::observe_unread`): the
    /// tasks and jobs in the snapshot are not kept up to date.
    pub(super) unread: bool,
    /// Something in the run reads the counters beyond CPU time, waits and
    /// instructions; when not (`Sensor::leave_counters`), they stay as a
    /// blank view has them (`None`, 0).
    pub(super) counters_read: bool,
}

/// What the run used.
pub(super) struct Accounting {
    /// The machine's power draw as of the last recompute (constant until the next).
    pub(super) power_w: f64,
    /// Busy CPUs and cores as of the last recompute.
    pub(super) busy: super::busy::BusyCores,
    /// Which physical cores any thread has run on for some time (S0
    /// counts them; a placement undone at the same instant does not
    /// count).
    pub(super) core_used: Vec<bool>,
    /// Memory traffic of all threads so far.
    pub(super) mem_bytes_total: f64,
    /// The timeline (when asked for), and each CPU's segment still open:
    /// (start, job, sharing).
    pub(super) trace: Option<Vec<Segment>>,
    pub(super) open_segments: Vec<Option<(u64, usize, usize)>>,
}

/// One thread's counters as of the last observation (`upto`) and what the
/// last full observation reported of it (`last`).
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Seen {
    pub(super) upto: Counters,
    pub(super) last: Counters,
}
