//! An open loop's schedule (`--rate`): planned send times at a fixed
//! interval, each handed to the next of a worker's flows in turn that has
//! room for it. rr, udp-rr and crr clients keep one each; what "room" means
//! and what a placed request becomes is theirs. A request is timed from its
//! planned time, so one that waited (for room, for a CPU) shows the wait in
//! its latency instead of being sent late and timed as if on time.

/// The planned send times of one worker's share of the rate.
pub(crate) struct Schedule {
    interval_ns: f64,
    next_due_ns: f64,
    turn: usize,
    flows: usize,
}

impl Schedule {
    /// `rate` requests a second over `all` flows of the engine, of which
    /// this worker runs `flows`, the first due at `now_ns`.
    pub(crate) fn new(rate: f64, flows: usize, all: usize, now_ns: u64) -> Schedule {
        Schedule {
            interval_ns: 1e9 * all.max(1) as f64 / (rate * flows.max(1) as f64),
            next_due_ns: now_ns as f64,
            turn: 0,
            flows,
        }
    }

    /// Each request due by `now_ns` goes to the next flow in turn that
    /// `take(flow, planned_ns)` accepts (it returns false for a flow with
    /// no room, or ended). When the next is due; None while no flow takes
    /// one: the requests due meanwhile go out once one does, in a burst,
    /// each timed from its own planned time.
    pub(crate) fn run(
        &mut self,
        now_ns: u64,
        mut take: impl FnMut(usize, u64) -> bool,
    ) -> Option<u64> {
        while self.next_due_ns <= now_ns as f64 {
            let planned = self.next_due_ns as u64;
            let taken = (0..self.flows).any(|_| {
                let k = self.turn;
                self.turn = (self.turn + 1) % self.flows;
                take(k, planned)
            });
            if !taken {
                return None;
            }
            self.next_due_ns += self.interval_ns;
        }
        Some(self.next_due_ns as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_go_to_the_flows_in_turn_at_the_worker_share_of_the_rate() {
        // 1000/s over 4 flows, 2 of them this worker's: one every 2 ms.
        let mut s = Schedule::new(1000.0, 2, 4, 0);
        let mut placed = Vec::new();
        let next = s.run(5_000_000, |k, t| {
            placed.push((k, t));
            true
        });
        assert_eq!(
            placed,
            [(0, 0), (1, 2_000_000), (0, 4_000_000)],
            "due by 5 ms"
        );
        assert_eq!(next, Some(6_000_000));
        // A flow without room is passed over; with none, the schedule
        // waits, and what fell due meanwhile keeps its planned time.
        placed.clear();
        assert_eq!(
            s.run(9_000_000, |k, t| {
                (k == 0).then(|| placed.push((k, t))).is_some()
            }),
            Some(10_000_000)
        );
        assert_eq!(placed, [(0, 6_000_000), (0, 8_000_000)]);
        assert_eq!(s.run(12_000_000, |_, _| false), None);
        placed.clear();
        s.run(12_000_000, |k, t| {
            placed.push((k, t));
            true
        });
        assert_eq!(placed, [(1, 10_000_000), (0, 12_000_000)]);
    }
}
