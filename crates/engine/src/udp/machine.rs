//! The accounting of the UDP workloads with no I/O: what each datagram's
//! header says, how a receiver counts a datagram against its flow (lost,
//! reordered, inside the sender's window, a stray), and the udp-rr
//! client's requests, deadlines and answers. The epoll loop drives these
//! with sockets; the tests drive them over an in-memory path that drops,
//! delays and reorders datagrams.

use crate::flow::FlowCounters;
use std::collections::VecDeque;
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
/// one request outstanding; a request with no answer within the timeout is
/// counted and the flow sends the next, so a lost datagram costs one
/// timeout, never the run.
pub(crate) struct RrClient {
    tag: u32,
    timeout_ns: u64,
    base: usize,
    // Per-flow state in parallel vectors indexed by the flow's place in the
    // worker's range: the timeout sweep checks `dead` and `waiting` of the
    // flows whose deadlines passed, and nothing else.
    /// The sequence number each flow waits for and when it was sent.
    waiting: Vec<u64>,
    sent_at: Vec<u64>,
    dead: Vec<bool>,
    /// Deadlines in send order: every request waits the same timeout, so
    /// the queue is sorted by construction.
    deadlines: VecDeque<(u64, u32, u64)>,
}

/// No request is awaited (until the next goes out).
const NONE: u64 = u64::MAX;

impl RrClient {
    pub(crate) fn new(tag: u32, timeout_ns: u64, base: usize, n: usize) -> RrClient {
        RrClient {
            tag,
            timeout_ns,
            base,
            waiting: vec![NONE; n],
            sent_at: vec![0; n],
            dead: vec![false; n],
            deadlines: VecDeque::with_capacity(n),
        }
    }

    pub(crate) fn ended(&self, k: usize) -> bool {
        self.dead[k]
    }

    pub(crate) fn end(&mut self, k: usize) {
        self.dead[k] = true;
    }

    /// Flow `k`'s next request, in `buf`, sent at `now_ns`: counted as sent
    /// whether or not the socket takes it (one it refuses for want of
    /// buffer space is lost, and times out like one).
    pub(crate) fn request(&mut self, k: usize, buf: &mut [u8], now_ns: u64, c: &FlowCounters) {
        let seq = c.packets_sent.load(Relaxed);
        put_header(buf, self.tag, (self.base + k) as u32, seq);
        self.waiting[k] = seq;
        self.sent_at[k] = now_ns;
        self.deadlines
            .push_back((now_ns + self.timeout_ns, k as u32, seq));
        FlowCounters::bump(&c.packets_sent, 1);
    }

    /// The requests whose time is up by `now_ns`: each counted as timed
    /// out, and its flow pushed on `owed`, to send its next. When the next
    /// deadline is, if any.
    pub(crate) fn expire(
        &mut self,
        now_ns: u64,
        counters: &[FlowCounters],
        owed: &mut Vec<usize>,
    ) -> Option<u64> {
        while let Some(&(due, k, seq)) = self.deadlines.front() {
            if due > now_ns {
                break;
            }
            self.deadlines.pop_front();
            let k = k as usize;
            if self.dead[k] || self.waiting[k] != seq {
                continue;
            }
            FlowCounters::bump(&counters[k].timeouts, 1);
            self.waiting[k] = NONE;
            owed.push(k);
        }
        self.deadlines.front().map(|&(due, _, _)| due)
    }

    /// Flow `k` read datagram `buf` at `now_ns`: its answer is a
    /// transaction, timed into `timed`; one read after its deadline (before
    /// the sweep saw it) a timeout and late, as if the sweep had run first,
    /// so no latency exceeds the timeout; an answer to an earlier request
    /// late; another test's datagram a stray. Whether the flow owes its
    /// next request.
    pub(crate) fn answer(
        &mut self,
        k: usize,
        buf: &[u8],
        now_ns: u64,
        c: &FlowCounters,
        strays: &AtomicU64,
        timed: impl FnOnce(u64),
    ) -> bool {
        match header(buf, self.tag) {
            Some((flow, seq, _)) if flow as usize == self.base + k => {
                c.add_received(buf.len() as u64);
                FlowCounters::bump(&c.packets_received, 1);
                if seq != self.waiting[k] {
                    FlowCounters::bump(&c.late, 1);
                    return false;
                }
                let took = now_ns.saturating_sub(self.sent_at[k]);
                if took > self.timeout_ns {
                    FlowCounters::bump(&c.timeouts, 1);
                    FlowCounters::bump(&c.late, 1);
                } else {
                    timed(took);
                    c.add_transaction();
                }
                self.waiting[k] = NONE;
                true
            }
            _ => {
                strays.fetch_add(1, Relaxed);
                false
            }
        }
    }
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

    /// udp-rr: every request ends as exactly one of a transaction (its
    /// answer in time), a timeout with a late answer (the answer after its
    /// deadline), or a timeout alone (the request or the answer lost):
    /// lost is never counted late, and late never as a transaction.
    #[test]
    fn each_request_is_answered_in_time_late_or_lost_and_counted_so() {
        const FLOWS: usize = 4;
        const TIMEOUT: u64 = 100_000;
        for seed in 1..=5 {
            let mut dice = Dice(seed);
            let (mut up, mut down) = (Path::default(), Path::default());
            let mut m = RrClient::new(TAG, TIMEOUT, 0, FLOWS);
            let (client, server) = (counters(FLOWS), counters(FLOWS));
            let strays = AtomicU64::new(0);
            let mut timed = Vec::new();
            // The test's ledger: when each (flow, seq) was sent, and how
            // each ended as the path saw it.
            let mut sent_at = std::collections::HashMap::new();
            let (mut lost_up, mut lost_down) = (0u64, 0u64);
            let (mut on_time, mut after) = (0u64, 0u64);
            let mut buf = [0u8; 64];
            let mut owed: Vec<usize> = (0..FLOWS).collect();
            let end = 50_000_000;
            let mut now = 0;
            while now < end + 2 * TIMEOUT {
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
                        Some(_) => on_time += 1,
                    }
                }
                for d in down.arrived(now) {
                    let (flow, _, _) = header(&d, TAG).unwrap();
                    let k = flow as usize;
                    if m.answer(k, &d, now, &client[k], &strays, |ns| timed.push(ns)) {
                        owed.push(k);
                    }
                }
                // Another test's datagram, now and then.
                if dice.below(1000) == 0 {
                    let mut d = [0u8; 64];
                    put_header(&mut d, 0xbad, 0, 0);
                    assert!(!m.answer(0, &d, now, &client[0], &strays, |_| {}));
                }
                // The sweep runs less often than reads, as a loop's timer
                // does: an answer past its deadline may be read first.
                if now % 37_000 == 0 {
                    m.expire(now, &client, &mut owed);
                }
                if now < end {
                    for k in owed.drain(..) {
                        m.request(k, &mut buf, now, &client[k]);
                        let (flow, seq, _) = header(&buf, TAG).unwrap();
                        sent_at.insert((flow, seq), now);
                        if up.send(&buf, now, &mut dice, 20, 80) {
                            lost_up += 1;
                        }
                    }
                }
                now += 1000;
            }
            let requests = sum(&client, |c| &c.packets_sent);
            let tx = sum(&client, |c| &c.transactions);
            let timeouts = sum(&client, |c| &c.timeouts);
            let late = sum(&client, |c| &c.late);
            let lost = lost_up + lost_down;
            assert!(
                requests > 1000 && lost > 50 && after > 50,
                "seed {seed}: {requests} {lost} {after}"
            );
            assert_eq!(requests, lost + on_time + after, "seed {seed}");
            assert_eq!(tx, on_time, "seed {seed}");
            assert_eq!(late, after, "seed {seed}");
            assert_eq!(timeouts, lost + after, "seed {seed}");
            assert_eq!(timed.len() as u64, tx);
            assert!(timed.iter().all(|&ns| ns <= TIMEOUT));
            // What the server read, the client had sent and the path kept.
            assert_eq!(sum(&server, |c| &c.packets_received), requests - lost_up);
            assert_eq!(sum(&client, |c| &c.packets_received), on_time + after);
            assert!(strays.load(Relaxed) > 0);
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
