//! The accounting of the UDP workloads with no I/O: what each datagram's
//! header says, how a receiver counts a datagram against its flow (lost,
//! reordered, inside the sender's window, a stray), and the udp-rr
//! client's requests, deadlines and answers. The epoll loop drives these
//! with sockets; the tests drive them over an in-memory path that drops,
//! delays and reorders datagrams.

use crate::flow::FlowCounters;
use crate::schedule::Schedule;
use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering::Relaxed;

const HEADER: usize = plumb_spec::UDP_HEADER as usize;

/// The sequence number's top bit: a stream's datagram sent inside the
/// sender's window. The receiver counts the marked ones it gets, so that
/// the loss over the sender's window is exact whenever the receiver's own
/// window opened and closed (its edges follow the control messages, late
/// by however long its CPU was busy elsewhere).
pub(super) const IN_WINDOW: u64 = 1 << 63;

/// The sequence number of a `--direction recv` client flow's hello, which
/// tells the server where the flow is: past any a stream reaches.
const HELLO: u64 = !IN_WINDOW;

/// Flow `flow`'s hello.
pub(super) fn hello(tag: u32, flow: u32) -> [u8; HEADER] {
    let mut buf = [0u8; HEADER];
    put_header(&mut buf, tag, flow, HELLO);
    buf
}

/// The flow a hello of this test's is from; None for anything else.
pub(super) fn hello_from(buf: &[u8], tag: u32) -> Option<u32> {
    header(buf, tag)
        .filter(|&(_, seq, _)| seq == HELLO)
        .map(|(flow, _, _)| flow)
}

/// Bytes of an answer that has room for the server's stamp after the
/// header: when it read the request, in ns on its CLOCK_MONOTONIC.
pub(super) const STAMPED: usize = plumb_spec::UDP_STAMPED as usize;

/// Stamps an answer with the time its request was read (`mono_ns`), where
/// it has room; a shorter answer goes without.
pub(super) fn put_stamp(buf: &mut [u8], mono_ns: u64) {
    if let Some(b) = buf.get_mut(HEADER..STAMPED) {
        b.copy_from_slice(&mono_ns.to_le_bytes());
    }
}

/// The server's stamp of an answer, where it has room for one.
fn stamp(buf: &[u8]) -> Option<u64> {
    Some(u64::from_le_bytes(
        buf.get(HEADER..STAMPED)?.try_into().ok()?,
    ))
}

pub(super) fn put_header(buf: &mut [u8], tag: u32, flow: u32, seq: u64) {
    buf[0..4].copy_from_slice(&tag.to_le_bytes());
    buf[4..8].copy_from_slice(&flow.to_le_bytes());
    buf[8..16].copy_from_slice(&seq.to_le_bytes());
}

/// (flow, seq, marked as sent inside the sender's window) of a datagram
/// with this test's tag.
pub(super) fn header(buf: &[u8], tag: u32) -> Option<(u32, u64, bool)> {
    if buf.len() < HEADER || buf[0..4] != tag.to_le_bytes() {
        return None;
    }
    let flow = u32::from_le_bytes(buf[4..8].try_into().ok()?);
    let seq = u64::from_le_bytes(buf[8..16].try_into().ok()?);
    Some((flow, seq & !IN_WINDOW, seq & IN_WINDOW != 0))
}

/// A udp-stream sender's datagram `seq` of flow `flow`: its header in
/// `buf`, marked when the sender's window is `open`.
pub(super) fn next_datagram(buf: &mut [u8], tag: u32, flow: usize, seq: u64, open: bool) {
    let mark = if open { IN_WINDOW } else { 0 };
    put_header(buf, tag, flow as u32, seq | mark);
}

/// The datagram [`next_datagram`] made, of `n` bytes, went out.
pub(super) fn datagram_sent(c: &FlowCounters, n: usize, open: bool) {
    c.add_sent(n as u64);
    FlowCounters::bump(&c.packets_sent, 1);
    if open {
        FlowCounters::bump(&c.window_sent, 1);
    }
}

/// Counts a datagram that came in against its flow, of `flows` whose
/// counters are `counters`: for a stream, against the flow's sequence
/// (skipped numbers are gaps until they come, late). Its (flow, seq), or
/// None for a stray (another test's tag, a flow that does not exist).
pub(super) fn count_received(
    buf: &[u8],
    tag: u32,
    rr: bool,
    counters: &[FlowCounters],
    strays: &AtomicU64,
) -> Option<(u32, u64)> {
    let Some((flow, seq, marked)) =
        header(buf, tag).filter(|&(flow, _, _)| (flow as usize) < counters.len())
    else {
        strays.fetch_add(1, Relaxed);
        return None;
    };
    let c = &counters[flow as usize];
    c.add_received(buf.len() as u64);
    FlowCounters::bump(&c.packets_received, 1);
    if rr {
        return Some((flow, seq));
    }
    if marked {
        FlowCounters::bump(&c.window_received, 1);
    }
    // SO_REUSEPORT hashes a flow's 4-tuple to one socket, so only one
    // worker writes a flow's sequence state.
    let expect = c.expect.load(Relaxed);
    if seq == expect {
        c.expect.store(seq + 1, Relaxed);
    } else if seq > expect {
        FlowCounters::bump(&c.gaps, seq - expect);
        c.expect.store(seq + 1, Relaxed);
    } else {
        FlowCounters::bump(&c.late, 1);
    }
    Some((flow, seq))
}

/// The udp-rr client's flows, `base..base + n` of the engine's: each keeps
/// up to `depth` requests outstanding, matched to their answers by
/// sequence number. A request with no answer within the timeout is counted
/// and forgotten, so a lost datagram costs one timeout, never the run.
/// In a closed loop each answer or timeout owes the flow its next request;
/// in an open loop (`rate`) requests go out on a fixed schedule, handed to
/// the flows in turn, each timed from when it was planned, whatever was
/// lost before it: probes that go on through loss.
pub(crate) struct RrClient {
    tag: u32,
    timeout_ns: u64,
    base: usize,
    depth: usize,
    /// Open loop: this worker's share of the rate.
    schedule: Option<Schedule>,
    // Per-flow state in parallel vectors indexed by the flow's place in the
    // worker's range, each queue allocated for `depth` when the worker
    // starts.
    /// Requests sent and not yet answered or timed out, oldest first:
    /// (sequence number, when it was sent or planned).
    outstanding: Vec<VecDeque<(u64, u64)>>,
    /// Open loop: planned send times given to the flow and not yet sent
    /// (a driver with one send in flight per flow sends them in turn).
    placed: Vec<VecDeque<u64>>,
    dead: Vec<bool>,
    /// Deadlines, soonest first: a request sent later may have been planned
    /// earlier than one already out.
    deadlines: BinaryHeap<Reverse<(u64, u32, u64)>>,
    /// Where the server reads the client's clock (one kernel): the
    /// server's clock less the engine's, which places its stamps on the
    /// engine's clock.
    clock_offset: Option<u64>,
}

impl RrClient {
    /// Flows `base..base + n` of the plan's, starting at `now_ns` (an open
    /// loop's first request is due then).
    pub(crate) fn new(plan: &super::UdpPlan, base: usize, n: usize, now_ns: u64) -> RrClient {
        let depth = plan.depth.max(1) as usize;
        RrClient {
            tag: plan.tag,
            timeout_ns: plan.timeout_ns,
            base,
            depth,
            schedule: plan.rate.map(|r| Schedule::new(r, n, plan.flows, now_ns)),
            outstanding: (0..n).map(|_| VecDeque::with_capacity(depth)).collect(),
            placed: (0..n).map(|_| VecDeque::with_capacity(depth)).collect(),
            dead: vec![false; n],
            deadlines: BinaryHeap::with_capacity(n * depth),
            clock_offset: None,
        }
    }

    /// The server reads the same clock, `offset` ahead of the engine's:
    /// each stamped answer splits its latency into the way to the server
    /// and the way back.
    pub(crate) fn share_clock(&mut self, offset: u64) {
        self.clock_offset = Some(offset);
    }

    pub(crate) fn open_loop(&self) -> bool {
        self.schedule.is_some()
    }

    /// Requests each flow sends as it starts: its depth in a closed loop,
    /// none in an open one (the schedule places them).
    pub(crate) fn opening(&self) -> usize {
        if self.open_loop() {
            0
        } else {
            self.depth
        }
    }

    pub(crate) fn ended(&self, k: usize) -> bool {
        self.dead[k]
    }

    pub(crate) fn end(&mut self, k: usize) {
        self.dead[k] = true;
    }

    /// Requests flow `k` has sent and awaits.
    pub(crate) fn awaiting(&self, k: usize) -> usize {
        self.outstanding[k].len()
    }

    /// Flow `k`'s next request, in `buf`, sent at `now_ns` (timed from then,
    /// or from its planned time in an open loop): counted as sent whether
    /// or not the socket takes it (one it refuses for want of buffer space
    /// is lost, and times out like one).
    pub(crate) fn request(&mut self, k: usize, buf: &mut [u8], now_ns: u64, c: &FlowCounters) {
        let seq = c.packets_sent.load(Relaxed);
        put_header(buf, self.tag, (self.base + k) as u32, seq);
        let t0 = self.placed[k].pop_front().unwrap_or(now_ns);
        self.outstanding[k].push_back((seq, t0));
        self.deadlines
            .push(Reverse((t0 + self.timeout_ns, k as u32, seq)));
        FlowCounters::bump(&c.packets_sent, 1);
    }

    /// The requests whose time is up by `now_ns`: each counted as timed
    /// out and forgotten; in a closed loop its flow is pushed on `owed`, to
    /// send its next. When the next deadline is, if any.
    pub(crate) fn expire(
        &mut self,
        now_ns: u64,
        counters: &[FlowCounters],
        owed: &mut Vec<usize>,
    ) -> Option<u64> {
        while let Some(&Reverse((due, k, seq))) = self.deadlines.peek() {
            if due > now_ns {
                break;
            }
            self.deadlines.pop();
            let k = k as usize;
            if self.dead[k] || forget(&mut self.outstanding[k], seq).is_none() {
                continue;
            }
            FlowCounters::bump(&counters[k].timeouts, 1);
            if !self.open_loop() {
                owed.push(k);
            }
        }
        self.deadlines.peek().map(|&Reverse((due, _, _))| due)
    }

    /// The timer fired at `now_ns`: the requests whose time is up are
    /// forgotten ([`RrClient::expire`]) and those due are placed
    /// ([`RrClient::schedule`]), each flow owed a send pushed on `owed`.
    /// When to look again, if ever.
    pub(crate) fn timer(
        &mut self,
        now_ns: u64,
        counters: &[FlowCounters],
        owed: &mut Vec<usize>,
    ) -> Option<u64> {
        let deadline = self.expire(now_ns, counters, owed);
        let due = self.schedule(now_ns, owed);
        deadline.into_iter().chain(due).min()
    }

    /// Flow `k` read datagram `buf` at `now_ns`: the answer to an
    /// outstanding request is a transaction, timed into `timed`; one read
    /// after its deadline (before the sweep saw it) a timeout and late, as
    /// if the sweep had run first, so no latency exceeds the timeout; an
    /// answer to a request already timed out late; another test's datagram
    /// a stray. Whether the flow owes its next request (a closed loop).
    /// Where the server shares the clock and stamped the answer, `timed`
    /// also gets the latency's two ways, to the server and back, which add
    /// up to it; a stamp outside the request's time (a clock not shared
    /// after all) gives none.
    pub(crate) fn answer(
        &mut self,
        k: usize,
        buf: &[u8],
        now_ns: u64,
        c: &FlowCounters,
        strays: &AtomicU64,
        timed: impl FnOnce(u64, u64, Option<[u64; 2]>),
    ) -> bool {
        match header(buf, self.tag) {
            Some((flow, seq, _)) if flow as usize == self.base + k => {
                c.add_received(buf.len() as u64);
                FlowCounters::bump(&c.packets_received, 1);
                let Some(t0) = forget(&mut self.outstanding[k], seq) else {
                    FlowCounters::bump(&c.late, 1);
                    return false;
                };
                let took = now_ns.saturating_sub(t0);
                if took > self.timeout_ns {
                    FlowCounters::bump(&c.timeouts, 1);
                    FlowCounters::bump(&c.late, 1);
                } else {
                    let ways = self.clock_offset.and_then(|offset| {
                        let read = stamp(buf)?.checked_sub(offset)?;
                        (t0..=now_ns)
                            .contains(&read)
                            .then(|| [read - t0, now_ns - read])
                    });
                    timed(t0, took, ways);
                    c.add_transaction();
                }
                !self.open_loop()
            }
            _ => {
                strays.fetch_add(1, Relaxed);
                false
            }
        }
    }

    /// Open loop: each request due by `now_ns` goes to the next flow in
    /// turn with room for it (fewer than `depth` outstanding or placed);
    /// each flow given one is pushed on `placed`, to send it. When the next
    /// is due; None in a closed loop, and while every flow is full (an
    /// answer or a timeout makes room, and the requests due meanwhile go
    /// out then, each timed from its planned time).
    pub(crate) fn schedule(&mut self, now_ns: u64, placed: &mut Vec<usize>) -> Option<u64> {
        let depth = self.depth;
        let (dead, outstanding, due) = (&self.dead, &self.outstanding, &mut self.placed);
        self.schedule.as_mut()?.run(now_ns, |k, planned| {
            if dead[k] || outstanding[k].len() + due[k].len() >= depth {
                return false;
            }
            due[k].push_back(planned);
            placed.push(k);
            true
        })
    }
}

/// Takes request `seq` out of a flow's outstanding ones: when it was sent
/// or planned, or None if it is not there (answered, or timed out).
fn forget(outstanding: &mut VecDeque<(u64, u64)>, seq: u64) -> Option<u64> {
    let at = outstanding.iter().position(|&(s, _)| s == seq)?;
    outstanding.remove(at).map(|(_, t0)| t0)
}

/// The machines over an in-memory path that drops, delays and reorders
/// datagrams, each choice from a seeded generator so that a failure
/// repeats; the test keeps its own ledger of what the path did and holds
/// the counts to it.
#[cfg(test)]
mod tests {
    use super::*;
    use crate::dice::Dice;

    const TAG: u32 = 0x5eed;

    /// Datagrams on the path: (arrives at, bytes).
    #[derive(Default)]
    struct Path(Vec<(u64, Vec<u8>)>);

    impl Path {
        /// Sends `d` at `now`: dropped one time in `drop_one_in`, else
        /// arriving 1 to `spread` µs later, so that datagrams pass each
        /// other. Whether it was dropped.
        fn send(
            &mut self,
            d: &[u8],
            now: u64,
            dice: &mut Dice,
            drop_one_in: u64,
            spread: u64,
        ) -> bool {
            if dice.below(drop_one_in) == 0 {
                return true;
            }
            self.0
                .push((now + 1000 * (1 + dice.below(spread)), d.to_vec()));
            false
        }

        /// What has arrived by `now`, in the order it arrived.
        fn arrived(&mut self, now: u64) -> Vec<Vec<u8>> {
            self.0.sort_by_key(|d| d.0);
            let n = self.0.iter().take_while(|d| d.0 <= now).count();
            self.0.drain(..n).map(|d| d.1).collect()
        }
    }

    fn counters(n: usize) -> Vec<FlowCounters> {
        (0..n).map(|_| FlowCounters::default()).collect()
    }

    fn sum(c: &[FlowCounters], f: impl Fn(&FlowCounters) -> &AtomicU64) -> u64 {
        c.iter().map(|c| f(c).load(Relaxed)).sum()
    }

    #[test]
    fn header_round_trip_and_strays() {
        let mut b = [0u8; 32];
        put_header(&mut b, 0xdead_beef, 7, 1 << 40);
        assert_eq!(header(&b, 0xdead_beef), Some((7, 1 << 40, false)));
        assert_eq!(header(&b, 0xdead_beee), None);
        assert_eq!(header(&b[..15], 0xdead_beef), None);
        put_header(&mut b, 0xdead_beef, 7, (1 << 40) | IN_WINDOW);
        assert_eq!(header(&b, 0xdead_beef), Some((7, 1 << 40, true)));
    }

    /// A stamped answer splits its latency at the server's read: the way
    /// there from the planned time, the way back to the answer's arrival;
    /// the two add up to the latency. An unshared clock, an answer too
    /// short for a stamp, or a stamp outside the request's time splits
    /// nothing.
    #[test]
    fn a_stamped_answer_splits_its_latency_into_its_two_ways() {
        let (c, strays) = (counters(1), AtomicU64::new(0));
        // The server's clock reads 5 s where the engine's reads 0.
        const OFFSET: u64 = 5_000_000_000;
        let answered = |m: &mut RrClient, len: usize, read: u64| {
            let mut req = vec![0u8; len];
            m.request(0, &mut req, 1_000_000, &c[0]);
            put_stamp(&mut req, OFFSET + read);
            let mut ways = None;
            m.answer(0, &req, 4_000_000, &c[0], &strays, |t0, ns, w| {
                assert_eq!((t0, ns), (1_000_000, 3_000_000));
                ways = w;
            });
            ways
        };
        let mut m = RrClient::new(&rr_plan(1, 1 << 40, 1, None), 0, 1, 0);
        assert_eq!(
            answered(&mut m, STAMPED, 3_500_000),
            None,
            "no clock shared"
        );
        m.share_clock(OFFSET);
        assert_eq!(
            answered(&mut m, STAMPED, 3_500_000),
            Some([2_500_000, 500_000])
        );
        assert_eq!(answered(&mut m, HEADER, 3_500_000), None, "no room");
        assert_eq!(
            answered(&mut m, STAMPED, 4_000_001),
            None,
            "after the answer"
        );
        assert_eq!(
            answered(&mut m, STAMPED, 999_999),
            None,
            "before the request"
        );
        assert_eq!(sum(&c, |c| &c.transactions), 5);
    }

    fn rr_plan(
        flows: usize,
        timeout_ns: u64,
        depth: u32,
        rate: Option<f64>,
    ) -> super::super::UdpPlan {
        super::super::UdpPlan {
            client: true,
            sends: true,
            rr: true,
            tag: TAG,
            out_size: 64,
            in_size: 64,
            flows,
            timeout_ns,
            depth,
            rate,
            same_clock: false,
        }
    }

    /// udp-rr: every request ends as exactly one of a transaction (its
    /// answer in time), a timeout with a late answer (the answer after its
    /// deadline), or a timeout alone (the request or the answer lost):
    /// lost is never counted late, and late never as a transaction; with
    /// several outstanding per flow each answer is matched to its own
    /// request; and an open loop sends every request its schedule planned,
    /// whatever was lost, each timed from its planned time.
    #[test]
    fn each_request_is_answered_in_time_late_or_lost_and_counted_so() {
        const FLOWS: usize = 4;
        const TIMEOUT: u64 = 100_000;
        const END: u64 = 50_000_000;
        // (outstanding per flow, open loop's requests a second)
        for (depth, rate) in [(1, None), (4, None), (8, Some(70_000.0))] {
            for seed in 1..=5 {
                let mut dice = Dice(seed);
                let (mut up, mut down) = (Path::default(), Path::default());
                let mut m = RrClient::new(&rr_plan(FLOWS, TIMEOUT, depth, rate), 0, FLOWS, 0);
                let (client, server) = (counters(FLOWS), counters(FLOWS));
                let strays = AtomicU64::new(0);
                let mut timed = Vec::new();
                // The test's ledger: when each (flow, seq) was sent (or in
                // an open loop planned), how each ended as the path saw it,
                // and the latency each answer in time should be timed at.
                let mut sent_at = std::collections::HashMap::new();
                let mut expected = Vec::new();
                let (mut lost_up, mut lost_down) = (0u64, 0u64);
                let (mut on_time, mut after) = (0u64, 0u64);
                let mut buf = [0u8; 64];
                let mut owed: Vec<usize> = (0..FLOWS)
                    .flat_map(|k| std::iter::repeat_n(k, m.opening()))
                    .collect();
                let mut now = 0;
                while now < END + 2 * TIMEOUT {
                    // What arrived, then the sweep, as the loop runs them.
                    for d in up.arrived(now) {
                        let (flow, seq) =
                            count_received(&d, TAG, true, &server, &strays).expect("a request");
                        let mut r = d.clone();
                        put_header(&mut r, TAG, flow, seq);
                        let at = sent_at[&(flow, seq)];
                        let arrives = |dice: &mut Dice, path: &mut Path| {
                            if path.send(&r, now, dice, 20, 80) {
                                return None;
                            }
                            Some(path.0.last().unwrap().0)
                        };
                        match arrives(&mut dice, &mut down) {
                            None => lost_down += 1,
                            Some(t) if t - at > TIMEOUT => after += 1,
                            Some(t) => {
                                on_time += 1;
                                expected.push(t - at);
                            }
                        }
                    }
                    for d in down.arrived(now) {
                        let (flow, _, _) = header(&d, TAG).unwrap();
                        let k = flow as usize;
                        if m.answer(k, &d, now, &client[k], &strays, |_, ns, _| timed.push(ns)) {
                            owed.push(k);
                        }
                    }
                    // Another test's datagram, now and then.
                    if dice.below(1000) == 0 {
                        let mut d = [0u8; 64];
                        put_header(&mut d, 0xbad, 0, 0);
                        assert!(!m.answer(0, &d, now, &client[0], &strays, |_, _, _| {}));
                    }
                    // The sweep runs less often than reads, as a loop's timer
                    // does: an answer past its deadline may be read first.
                    if now % 37_000 == 0 {
                        m.expire(now, &client, &mut owed);
                    }
                    if now < END {
                        m.schedule(now, &mut owed);
                        for k in owed.drain(..) {
                            let t0 = m.placed[k].front().copied().unwrap_or(now);
                            m.request(k, &mut buf, now, &client[k]);
                            let (flow, seq, _) = header(&buf, TAG).unwrap();
                            sent_at.insert((flow, seq), t0);
                            if up.send(&buf, now, &mut dice, 20, 80) {
                                lost_up += 1;
                            }
                        }
                    }
                    now += 1000;
                }
                let what = format!("depth {depth}, rate {rate:?}, seed {seed}");
                let requests = sum(&client, |c| &c.packets_sent);
                let tx = sum(&client, |c| &c.transactions);
                let timeouts = sum(&client, |c| &c.timeouts);
                let late = sum(&client, |c| &c.late);
                let lost = lost_up + lost_down;
                assert!(
                    requests > 1000 && lost > 50 && after > 50,
                    "{what}: {requests} {lost} {after}"
                );
                assert_eq!(requests, lost + on_time + after, "{what}");
                assert_eq!(tx, on_time, "{what}");
                assert_eq!(late, after, "{what}");
                assert_eq!(timeouts, lost + after, "{what}");
                assert_eq!(timed.len() as u64, tx);
                assert!(timed.iter().all(|&ns| ns <= TIMEOUT));
                // Each answer in time is timed from when its request was
                // sent or planned to when it came (the path delivers on
                // the loop's steps, so it is read as it arrives).
                timed.sort_unstable();
                expected.sort_unstable();
                assert_eq!(timed, expected, "{what}");
                if let Some(r) = rate {
                    // Every planned request went out, loss or none.
                    let due = (END as f64 * r / 1e9).round() as u64;
                    assert!(requests.abs_diff(due) <= 1, "{what}: {requests} of {due}");
                    assert!(m.outstanding.iter().all(|o| o.len() <= depth as usize));
                }
                // What the server read, the client had sent and the path kept.
                assert_eq!(sum(&server, |c| &c.packets_received), requests - lost_up);
                assert_eq!(sum(&client, |c| &c.packets_received), on_time + after);
                assert!(strays.load(Relaxed) > 0);
            }
        }
    }

    /// udp-stream: the receiver's gaps less its late datagrams are exactly
    /// those the path lost, and what it counts inside the sender's window
    /// is what the path delivered of what the sender marked.
    #[test]
    fn a_stream_receiver_counts_exactly_what_the_path_lost_and_reordered() {
        const FLOWS: usize = 3;
        for seed in 1..=5 {
            let mut dice = Dice(seed);
            let mut path = Path::default();
            let (tx, rx) = (counters(FLOWS), counters(FLOWS));
            let strays = AtomicU64::new(0);
            let mut buf = [0u8; 100];
            let (mut dropped, mut marked_delivered) = (0u64, 0u64);
            let mut now = 0;
            for step in 0..20_000u64 {
                // The sender's window opens a quarter in and closes at three.
                let open = (5_000..15_000).contains(&step);
                let k = dice.below(FLOWS as u64) as usize;
                next_datagram(&mut buf, TAG, k, tx[k].packets_sent.load(Relaxed), open);
                datagram_sent(&tx[k], buf.len(), open);
                // The last few of each flow arrive, so that every loss is
                // followed by a datagram that shows it.
                let drop_one_in = if step < 19_000 { 30 } else { u64::MAX };
                if path.send(&buf, now, &mut dice, drop_one_in, 20) {
                    dropped += 1;
                } else if open {
                    marked_delivered += 1;
                }
                for d in path.arrived(now) {
                    count_received(&d, TAG, false, &rx, &strays).unwrap();
                }
                now += 1000;
            }
            for d in path.arrived(u64::MAX) {
                count_received(&d, TAG, false, &rx, &strays).unwrap();
            }
            let sent = sum(&tx, |c| &c.packets_sent);
            let got = sum(&rx, |c| &c.packets_received);
            let (gaps, late) = (sum(&rx, |c| &c.gaps), sum(&rx, |c| &c.late));
            assert!(dropped > 300 && late > 300, "seed {seed}: {dropped} {late}");
            assert_eq!(got, sent - dropped);
            assert_eq!(gaps - late, dropped, "seed {seed}");
            assert_eq!(sum(&tx, |c| &c.window_sent), 10_000);
            assert_eq!(sum(&rx, |c| &c.window_received), marked_delivered);
            assert_eq!(sum(&rx, |c| &c.received), got * 100);
            assert_eq!(strays.load(Relaxed), 0);
        }
    }
}
