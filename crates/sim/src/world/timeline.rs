//! The per-CPU timeline the HTML report draws: which job heads each CPU's
//! run queue over time, and how many threads share it.

use super::World;

/// One CPU's occupancy over an interval, for the report's timeline.
#[derive(Debug, Clone, PartialEq)]
pub struct Segment {
    /// OS index of the CPU.
    pub cpu: u32,
    /// Start.
    pub start_ns: u64,
    /// End.
    pub end_ns: u64,
    /// The job at the head of the CPU's queue.
    pub job: usize,
    /// How many threads shared the CPU.
    pub sharing: usize,
}

/// Most timeline segments kept per run; the report says when it was cut.
pub const MAX_SEGMENTS: usize = 20_000;

impl World<'_> {
    /// The recorded timeline, closed at the current time.
    pub fn take_trace(&mut self) -> Option<Vec<Segment>> {
        let now = self.now_ns;
        let mut trace = self.acct.trace.take()?;
        for (pos, open) in self.acct.open_segments.iter_mut().enumerate() {
            if let Some((start, job, sharing)) = open.take() {
                if trace.len() < MAX_SEGMENTS && now > start {
                    trace.push(Segment {
                        cpu: self.kernel.os[pos],
                        start_ns: start,
                        end_ns: now,
                        job,
                        sharing,
                    });
                }
            }
        }
        Some(trace)
    }

    /// Opens and closes segments where a CPU's head job or sharing changed.
    pub(super) fn record_timeline(&mut self) {
        let Some(trace) = self.acct.trace.as_mut() else {
            return;
        };
        for pos in 0..self.kernel.len() {
            let q = &self.kernel.queues[pos];
            let now_state = q.first().map(|&t| (self.threads[t].job, q.len()));
            let open = self.acct.open_segments[pos];
            if open.map(|(_, j, s)| (j, s)) == now_state {
                continue;
            }
            if let Some((start, job, sharing)) = open {
                if trace.len() < MAX_SEGMENTS && self.now_ns > start {
                    trace.push(Segment {
                        cpu: self.kernel.os[pos],
                        start_ns: start,
                        end_ns: self.now_ns,
                        job,
                        sharing,
                    });
                }
            }
            self.acct.open_segments[pos] = now_state.map(|(j, s)| (self.now_ns, j, s));
        }
    }
}
