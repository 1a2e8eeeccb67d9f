//! A request/response end as a state machine with no I/O: what each flow
//! owes, what it has outstanding and when each outstanding request started,
//! and the open loop's schedule. A driver (the epoll loop, the ring loop)
//! asks it what to write next, and tells it what each write and read moved;
//! it counts bytes and transactions into the flow's counters and hands each
//! timed transaction's latency to the driver's sink. Time comes in from the
//! driver, so the machine runs the same against sockets and in memory.

use super::RrPlan;
use crate::flow::{FlowCounters, Writing};
use crate::schedule::Schedule;

/// Where one flow's outgoing messages stand.
#[derive(Clone, Copy, Default, Debug, PartialEq, Eq)]
struct Out {
    /// Messages still to write, the current one included.
    pending: u32,
    /// Where the current message's writes stand.
    at: Writing,
    /// The current message's start is taken: a first write retried after
    /// the socket had no room does not start it twice.
    opened: bool,
}

impl Out {
    /// `w` bytes of the write due went out.
    fn wrote(&mut self, writes: &[usize], w: usize) {
        if self.at.wrote(writes, w) {
            self.pending -= 1;
            self.opened = false;
        }
    }
}

/// Messages of `size` bytes completed by `got` more bytes; what is left of
/// an incomplete one stays in `partial`.
fn complete(partial: &mut usize, got: usize, size: usize) -> u32 {
    *partial += got;
    let n = *partial / size;
    *partial -= n * size;
    n as u32
}

/// Start times of each flow's outstanding requests: `depth` slots per
/// flow, a ring indexed by (head, len).
struct Starts {
    depth: usize,
    started: Vec<u64>,
    ring: Vec<(u32, u32)>,
}

impl Starts {
    fn room(&self, k: usize) -> bool {
        (self.ring[k].1 as usize) < self.depth
    }

    /// A request of flow `k` started at `t_ns`.
    fn open(&mut self, k: usize, t_ns: u64) {
        let (head, len) = self.ring[k];
        if (len as usize) < self.depth {
            self.started[k * self.depth + (head as usize + len as usize) % self.depth] = t_ns;
            self.ring[k].1 = len + 1;
        }
    }

    /// The oldest outstanding request of flow `k` got its response: when
    /// it started.
    fn close(&mut self, k: usize) -> Option<u64> {
        let (head, len) = self.ring[k];
        (len > 0).then(|| {
            self.ring[k] = ((head + 1) % self.depth as u32, len - 1);
            self.started[k * self.depth + head as usize]
        })
    }
}

/// The request/response flows of one worker, indexed from 0.
pub(crate) struct RrMachine {
    plan: RrPlan,
    /// Open loop: this worker's share of the rate.
    schedule: Option<Schedule>,
    // Per-flow state in parallel vectors rather than a struct per flow:
    // the open-loop schedule scans `dead` and the outstanding count of
    // every flow for each request it places, and the start times are
    // client-only.
    out: Vec<Out>,
    partial: Vec<usize>,
    starts: Starts,
    dead: Vec<bool>,
}

impl RrMachine {
    /// `flows` of the worker's, of `all` the engine runs, starting at
    /// `now_ns` (an open loop's first request is due then).
    pub(crate) fn new(plan: RrPlan, flows: usize, all: usize, now_ns: u64) -> RrMachine {
        let depth = plan.depth.max(1) as usize;
        let schedule = plan
            .rate
            .filter(|_| plan.client)
            .map(|r| Schedule::new(r, flows, all, now_ns));
        let timed = if plan.client { flows } else { 0 };
        RrMachine {
            schedule,
            out: vec![
                Out {
                    pending: plan.initial,
                    ..Out::default()
                };
                flows
            ],
            partial: vec![0; flows],
            starts: Starts {
                depth,
                started: vec![0; timed * depth],
                ring: vec![(0, 0); timed],
            },
            dead: vec![false; flows],
            plan,
        }
    }

    pub(crate) fn flows(&self) -> usize {
        self.out.len()
    }

    pub(crate) fn open_loop(&self) -> bool {
        self.schedule.is_some()
    }

    /// The longest write and the size of a message coming in.
    pub(crate) fn sizes(&self) -> (usize, usize) {
        (
            crate::flow::longest(&self.plan.out_writes),
            self.plan.in_size,
        )
    }

    pub(crate) fn ended(&self, k: usize) -> bool {
        self.dead[k]
    }

    /// Flow `k` ended (closed by the peer, or failed): it owes nothing more.
    pub(crate) fn end(&mut self, k: usize) {
        self.dead[k] = true;
    }

    /// Whether messages are timed from when they start: a closed-loop
    /// client's (an open loop times from the schedule).
    fn stamps(&self) -> bool {
        self.plan.client && self.schedule.is_none()
    }

    /// Bytes of the write flow `k` owes now; None when it owes none or has
    /// ended. A closed-loop client's message is timed from the first time
    /// its first write is asked for.
    #[inline]
    pub(crate) fn write_due(&mut self, k: usize, now_ns: impl FnOnce() -> u64) -> Option<usize> {
        let o = self.out[k];
        if o.pending == 0 || self.dead[k] {
            return None;
        }
        if !o.opened && o.at.starts() {
            if self.stamps() {
                self.starts.open(k, now_ns());
            }
            self.out[k].opened = true;
        }
        Some(o.at.due(&self.plan.out_writes))
    }

    /// Whether a write of `len` bytes, the one due, leaves flow `k` owing
    /// nothing until a message comes in.
    pub(crate) fn settles(&self, k: usize, len: usize) -> bool {
        let mut after = self.out[k];
        after.wrote(&self.plan.out_writes, len);
        after.pending == 0
    }

    /// `n` bytes of flow `k`'s write due went out.
    #[inline]
    pub(crate) fn wrote(&mut self, k: usize, n: usize, c: &FlowCounters) {
        c.add_sent(n as u64);
        self.out[k].wrote(&self.plan.out_writes, n);
    }

    /// Flow `k` took in `got` bytes: the messages they complete are
    /// transactions, each owes a message back (a closed loop), and a client
    /// hands each one's latency to `timed`, as of `now_ns` (read once per
    /// call, and only where a transaction is timed).
    #[inline]
    pub(crate) fn read(
        &mut self,
        k: usize,
        got: usize,
        c: &FlowCounters,
        now_ns: impl FnOnce() -> u64,
        mut timed: impl FnMut(u64, u64),
    ) {
        c.add_received(got as u64);
        let done = complete(&mut self.partial[k], got, self.plan.in_size);
        if done == 0 {
            return;
        }
        let mut now = Some(now_ns);
        let mut at = 0;
        for _ in 0..done {
            c.add_transaction();
            if self.schedule.is_none() {
                self.out[k].pending += 1;
            }
            if self.plan.client {
                if let Some(t0) = self.starts.close(k) {
                    if let Some(f) = now.take() {
                        at = f();
                    }
                    timed(t0, at.saturating_sub(t0));
                }
            }
        }
    }

    /// Open loop: each request due by `now_ns` goes to the next flow in
    /// turn with room for it, timed from when it was due; each flow given
    /// one is pushed on `placed`, to write what it then owes. When the next
    /// is due; None in a closed loop, and while every flow has its `depth`
    /// outstanding (a response makes room).
    pub(crate) fn schedule(&mut self, now_ns: u64, placed: &mut Vec<usize>) -> Option<u64> {
        let (dead, starts, out) = (&self.dead, &mut self.starts, &mut self.out);
        self.schedule.as_mut()?.run(now_ns, |k, planned| {
            if dead[k] || !starts.room(k) {
                return false;
            }
            starts.open(k, planned);
            out[k].pending += 1;
            placed.push(k);
            true
        })
    }
}

/// A client and a server machine joined in memory: what one writes reaches
/// the other after a delay, in order as TCP keeps it, and is read in pieces
/// cut and joined at random; a write takes part of what is due, as a socket
/// with little room does. Every choice comes from a seeded generator, so a
/// failure repeats.
#[cfg(test)]
mod tests {
    use super::*;
    use crate::dice::Dice;
    use std::collections::VecDeque;
    use std::sync::atomic::Ordering::Relaxed;

    /// Pieces written and not yet read, each with when it arrives.
    type Wire = VecDeque<(u64, usize)>;

    /// One end: its machine, its flows' counters, what it timed, and the
    /// wires it writes to, one per flow.
    struct End {
        m: RrMachine,
        c: Vec<FlowCounters>,
        timed: Vec<u64>,
        wires: Vec<Wire>,
    }

    impl End {
        fn new(plan: RrPlan, flows: usize, rate_flows: usize) -> End {
            End {
                m: RrMachine::new(plan, flows, rate_flows, 0),
                c: (0..flows).map(|_| FlowCounters::default()).collect(),
                timed: Vec::new(),
                wires: vec![Wire::new(); flows],
            }
        }

        /// Writes what each flow owes at `now`, the write due cut short at
        /// random, each piece arriving 5 to 50 µs later (never before the
        /// one ahead of it).
        fn write(&mut self, now: u64, dice: &mut Dice) {
            for k in 0..self.m.flows() {
                while let Some(due) = self.m.write_due(k, || now) {
                    let n = dice.upto(due);
                    self.m.wrote(k, n, &self.c[k]);
                    let ahead = self.wires[k].back().map_or(0, |p| p.0);
                    let at = (now + 1000 * (4 + dice.upto(46) as u64)).max(ahead);
                    self.wires[k].push_back((at, n));
                    if dice.upto(4) == 1 {
                        // The socket had no room for more now.
                        break;
                    }
                }
            }
        }

        /// Reads what `from` wrote that has arrived by `now`, in reads of
        /// any size.
        fn read(&mut self, from: &mut End, now: u64, dice: &mut Dice) {
            for k in 0..self.m.flows() {
                let mut came = 0;
                while from.wires[k].front().is_some_and(|p| p.0 <= now) {
                    came += from.wires[k].pop_front().unwrap().1;
                }
                while came > 0 {
                    let n = dice.upto(came);
                    came -= n;
                    let timed = &mut self.timed;
                    self.m
                        .read(k, n, &self.c[k], || now, |_, ns| timed.push(ns));
                }
            }
        }

        fn sum(&self, f: impl Fn(&FlowCounters) -> &std::sync::atomic::AtomicU64) -> u64 {
            self.c.iter().map(|c| f(c).load(Relaxed)).sum()
        }

        fn outstanding(&self, k: usize) -> u32 {
            self.m.starts.ring[k].1
        }
    }

    const REQ: usize = 100;
    const RESP: usize = 3000;
    const FLOWS: usize = 3;

    fn client(pipeline: u32, rate: Option<f64>) -> End {
        let plan = RrPlan {
            client: true,
            out_writes: vec![8, REQ - 8],
            in_size: RESP,
            initial: if rate.is_some() { 0 } else { pipeline },
            depth: pipeline,
            rate,
        };
        End::new(plan, FLOWS, FLOWS)
    }

    fn server() -> End {
        let plan = RrPlan {
            client: false,
            out_writes: vec![RESP],
            in_size: REQ,
            initial: 0,
            depth: 0,
            rate: None,
        };
        End::new(plan, FLOWS, FLOWS)
    }

    /// Runs the pair for `ms` of time in steps of 1 µs, then stops the
    /// client writing and lets everything on the wires be read.
    fn exchange(c: &mut End, s: &mut End, ms: u64, seed: u64) {
        let mut dice = Dice(seed);
        let mut placed = Vec::new();
        let end = ms * 1_000_000;
        let mut now = 0;
        while now < end || c.wires.iter().chain(&s.wires).any(|w| !w.is_empty()) {
            if now < end {
                c.m.schedule(now, &mut placed);
                placed.clear();
                c.write(now, &mut dice);
                for k in 0..FLOWS {
                    assert!(c.outstanding(k) <= c.m.starts.depth as u32);
                }
            }
            s.read(c, now, &mut dice);
            s.write(now, &mut dice);
            c.read(s, now, &mut dice);
            now += 1000;
        }
    }

    #[test]
    fn every_byte_and_transaction_is_counted_once_on_both_ends() {
        for (pipeline, seed) in [(1, 1), (4, 2), (16, 3)] {
            let (mut c, mut s) = (client(pipeline, None), server());
            exchange(&mut c, &mut s, 20, seed);
            let tx = c.sum(|c| &c.transactions);
            assert!(tx > 100, "pipeline {pipeline}: {tx} transactions");
            // Bytes: what one end wrote, the other read.
            assert_eq!(c.sum(|c| &c.sent), s.sum(|c| &c.received));
            assert_eq!(s.sum(|c| &c.sent), c.sum(|c| &c.received));
            // The server answered every whole request, and the client read
            // every answer: one transaction each, on each end.
            assert_eq!(s.sum(|c| &c.transactions), tx);
            assert_eq!(s.sum(|c| &c.sent), tx * RESP as u64);
            let requests = c.sum(|c| &c.sent) as usize;
            assert!(requests / REQ == tx as usize || requests / REQ == tx as usize + FLOWS);
            // Each transaction the client counted, it timed: at least the
            // two one-way delays, at most its wait behind the pipeline.
            assert_eq!(c.timed.len() as u64, tx);
            assert!(c.timed.iter().all(|&ns| ns >= 10_000), "{:?}", c.timed);
            assert!(s.timed.is_empty());
        }
    }

    #[test]
    fn a_response_read_a_byte_at_a_time_completes_one_transaction() {
        let mut c = client(2, None);
        let f = &FlowCounters::default();
        assert_eq!(c.m.write_due(0, || 10), Some(8));
        c.m.wrote(0, 8, f);
        assert_eq!(c.m.write_due(0, || 99), Some(REQ - 8));
        c.m.wrote(0, REQ - 8, f);
        // The second message of the pipeline starts now.
        assert_eq!(c.m.write_due(0, || 20), Some(8));
        let mut timed = Vec::new();
        for b in 0..RESP {
            c.m.read(0, 1, f, || 1000 + b as u64, |_, ns| timed.push(ns));
        }
        assert_eq!(f.transactions.load(Relaxed), 1);
        // Timed from the first write of the first message to the last byte.
        assert_eq!(timed, [1000 + RESP as u64 - 1 - 10]);
        // The next request is owed; the second's start stays its own.
        c.m.wrote(0, 8, f);
        c.m.read(0, RESP, f, || 5000, |_, ns| timed.push(ns));
        assert_eq!(timed[1], 5000 - 20);
        // Two at once, one short of the third: two transactions.
        c.m.read(0, 3 * RESP - 1, f, || 6000, |_, ns| timed.push(ns));
        assert_eq!(f.transactions.load(Relaxed), 4);
    }

    #[test]
    fn an_open_loop_issues_on_schedule_and_times_from_it() {
        // 20,000 a second over the engine's flows, one every 50 µs, well
        // within what 4 outstanding a flow carry.
        let (mut c, mut s) = (client(4, Some(20_000.0)), server());
        exchange(&mut c, &mut s, 10, 7);
        let tx = c.sum(|c| &c.transactions);
        // At 0, 50 µs, ..., 9.95 ms: 200.
        assert_eq!(tx, 200, "{tx}");
        assert_eq!(c.timed.len() as u64, tx);
        // A flow whose `depth` are out takes none: the schedule moves on to
        // the next, and when none has room it waits for a response.
        let mut m = client(1, Some(1e9)).m;
        let mut placed = Vec::new();
        assert_eq!(m.schedule(10, &mut placed), None);
        assert_eq!(placed, [0, 1, 2]);
        let f = FlowCounters::default();
        for _ in 0..2 {
            assert_eq!(m.write_due(1, || 0), Some(8));
            m.wrote(1, 8, &f);
            assert_eq!(m.write_due(1, || 0), Some(REQ - 8));
            m.wrote(1, REQ - 8, &f);
            assert_eq!(m.write_due(1, || 0), None);
            let mut timed = Vec::new();
            m.read(1, RESP, &f, || 50, |_, ns| timed.push(ns));
            placed.clear();
            // Due since 3 ns: flow 1 had the only room, and its latency
            // counts from when the request was due.
            assert_eq!(m.schedule(50, &mut placed), None);
            assert_eq!(placed, [1]);
            assert!(timed[0] >= 40, "{timed:?}");
        }
    }

    #[test]
    fn incoming_bytes_complete_messages_across_reads() {
        let mut partial = 0;
        assert_eq!(complete(&mut partial, 3, 10), 0);
        assert_eq!(complete(&mut partial, 7, 10), 1);
        assert_eq!(complete(&mut partial, 25, 10), 2);
        assert_eq!(partial, 5);
        assert_eq!(complete(&mut partial, 5, 10), 1);
        assert_eq!(partial, 0);
    }
}
