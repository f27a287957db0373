//! A world that plays back recorded snapshots: a fake live sensor, actuator
//! and clock. It lets a test run a policy "live" on exactly the views a
//! simulation produced, and check that it decides the same.

use herd_policy::{Plan, Snapshot};

use crate::{Actuator, Clock, Sensor};

/// Plays `snapshots` back in order and records every plan applied.
#[derive(Debug, Clone, Default)]
pub struct Replay {
    snapshots: Vec<Snapshot>,
    next: usize,
    now_ns: u64,
    /// Every plan the engine applied, in order.
    pub applied: Vec<Plan>,
}

impl Replay {
    /// A replay of these snapshots.
    pub fn new(snapshots: Vec<Snapshot>) -> Self {
        let now_ns = snapshots.first().map_or(0, |s| s.now_ns);
        Replay {
            snapshots,
            next: 0,
            now_ns,
            applied: Vec::new(),
        }
    }
}

impl Sensor for Replay {
    fn observe(&mut self) -> &Snapshot {
        let i = self.next.min(self.snapshots.len().saturating_sub(1));
        self.next += 1;
        &self.snapshots[i]
    }
    fn finished(&self) -> bool {
        self.next >= self.snapshots.len()
    }
}

impl Actuator for Replay {
    fn apply(&mut self, plan: &Plan) {
        self.applied.push(plan.clone());
    }
}

impl Clock for Replay {
    fn now_ns(&self) -> u64 {
        self.now_ns
    }
    fn advance_to(&mut self, t_ns: u64) {
        // Time moves to the next recorded snapshot, as a real clock would
        // have when the sensor read it.
        self.now_ns = self.snapshots.get(self.next).map_or(t_ns, |s| s.now_ns);
    }
}
