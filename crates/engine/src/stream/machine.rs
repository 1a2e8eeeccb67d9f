//! A stream end as a state machine with no I/O: where each flow's outgoing
//! and incoming messages stand, and the self probes (`--self-probes`) that
//! ride inside the bulk flows. A driver (the epoll loop, the ring loop)
//! asks it what to write next and tells it what each write and read moved;
//! time comes in from the driver, so the machine runs the same against
//! sockets and in memory.
//!
//! A self probe is timed by the client, from its planned time to its
//! answer, on the loaded connection itself, so that it needs no clock
//! shared by the two hosts:
//! - where the client sends the bulk (upload), the message it starts next
//!   after the planned time is marked (its first [`TOKEN`] bytes carry a
//!   magic number and the probe's sequence number), and the server, on
//!   reading a marked message, writes the sequence number back on the
//!   connection's idle direction;
//! - where the server sends the bulk (download), the client writes the
//!   sequence number on the idle direction at the planned time, and the
//!   server marks the next message it starts, which the client reads.
//!
//! Either way the answer waits behind what the bulk sender has queued, in
//! its socket and on the path, which is what TCP_NOTSENT_LOWAT, pacing and
//! the bottleneck's queue change; and a probe that waited for the sender
//! to finish a message counts that wait, as an open loop's request does.

use crate::flow::FlowCounters;
use crate::schedule::Schedule;
use std::collections::VecDeque;
use std::ops::Range;

/// Bytes of a mark at a message's start, and of a token on the idle
/// direction: a magic number and a sequence number, little-endian.
pub(crate) const TOKEN: usize = 16;

/// "plumbslf": what sets a mark apart from the pattern, whose first bytes
/// count up from 0.
const MAGIC: u64 = 0x666c_7362_6d75_6c70;

/// Self probes a client flow may have outstanding; past that the schedule
/// waits, and what fell due meanwhile keeps its planned time.
const MOST_OUTSTANDING: usize = 4096;

fn token(seq: u64) -> [u8; TOKEN] {
    let mut t = [0u8; TOKEN];
    t[..8].copy_from_slice(&MAGIC.to_le_bytes());
    t[8..].copy_from_slice(&seq.to_le_bytes());
    t
}

/// The sequence number a mark or token carries; None for bytes of the
/// pattern.
fn read_token(t: &[u8; TOKEN]) -> Option<u64> {
    let (magic, seq) = t.split_at(8);
    (u64::from_le_bytes(magic.try_into().ok()?) == MAGIC)
        .then(|| u64::from_le_bytes(seq.try_into().expect("8 bytes")))
}

/// What one end of a stream does, as the machine needs it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct StreamShape {
    pub client: bool,
    pub sends: bool,
    pub msg_size: usize,
    /// The most bytes one read takes.
    pub read_size: usize,
    /// Self probes a second over the flows of the engine; None for none.
    pub self_probes: Option<f64>,
}

/// What flow `k`'s write due is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Due<'a> {
    /// The rest of a marked message's mark.
    Mark(&'a [u8]),
    /// This range of the message's pattern.
    Body(Range<usize>),
}

/// The self probes of one worker's flows, indexed from 0.
struct Probes {
    /// Client: the schedule of planned times.
    schedule: Option<Schedule>,
    next_seq: u64,
    /// Client: each flow's outstanding probes, (sequence, planned time).
    planned: Vec<VecDeque<(u64, u64)>>,
    /// Bulk sender: each flow's sequence numbers to mark, in order, and
    /// the mark of the message being written (taken when the message is
    /// first due, kept until it has gone whole: a first write that moved
    /// nothing does not lose it).
    to_mark: Vec<VecDeque<u64>>,
    mark: Vec<Option<[u8; TOKEN]>>,
    /// Bulk receiver: the start of the message coming in.
    head: Vec<[u8; TOKEN]>,
    /// Idle direction, writing: tokens owed, the one being written and how
    /// far it is.
    tokens_owed: Vec<VecDeque<u64>>,
    token_out: Vec<Option<([u8; TOKEN], usize)>>,
    /// Idle direction, reading: a token's bytes so far.
    token_in: Vec<([u8; TOKEN], usize)>,
}

/// The stream flows of one worker, indexed from 0.
pub(crate) struct StreamMachine {
    shape: StreamShape,
    /// Per flow: bytes into the message going out and the one coming in.
    out_at: Vec<usize>,
    in_at: Vec<usize>,
    dead: Vec<bool>,
    probes: Option<Probes>,
}

impl StreamMachine {
    /// `flows` of the worker's, of `all` the engine runs, starting at
    /// `now_ns` (the client's first self probe is due then).
    pub(crate) fn new(shape: StreamShape, flows: usize, all: usize, now_ns: u64) -> StreamMachine {
        let probes = shape.self_probes.map(|rate| Probes {
            schedule: shape
                .client
                .then(|| Schedule::new(rate, flows, all, now_ns)),
            next_seq: 0,
            planned: vec![VecDeque::new(); flows],
            to_mark: vec![VecDeque::new(); flows],
            mark: vec![None; flows],
            head: vec![[0; TOKEN]; flows],
            tokens_owed: vec![VecDeque::new(); flows],
            token_out: vec![None; flows],
            token_in: vec![([0; TOKEN], 0); flows],
        });
        StreamMachine {
            out_at: vec![0; flows],
            in_at: vec![0; flows],
            dead: vec![false; flows],
            probes,
            shape,
        }
    }

    /// Whether the flows carry self probes.
    pub(crate) fn probes(&self) -> bool {
        self.probes.is_some()
    }

    /// Flow `k` ended: it owes nothing more.
    pub(crate) fn end(&mut self, k: usize) {
        self.dead[k] = true;
    }

    pub(crate) fn ended(&self, k: usize) -> bool {
        self.dead[k]
    }

    /// Whether flow `k` is between two outgoing messages.
    pub(crate) fn at_boundary(&self, k: usize) -> bool {
        self.out_at[k] == 0
    }

    /// Whether the message flow `k` starts next is marked (a driver that
    /// sends whole messages sends a marked one on its own, in two writes).
    pub(crate) fn mark_next(&self, k: usize) -> bool {
        self.out_at[k] == 0
            && self
                .probes
                .as_ref()
                .is_some_and(|p| p.mark[k].is_some() || !p.to_mark[k].is_empty())
    }

    /// The write flow `k`'s message is due: the rest of its mark, or the
    /// rest of its pattern. A message is marked when it starts, if a mark
    /// is owed then.
    #[inline]
    pub(crate) fn due(&mut self, k: usize) -> Due<'_> {
        let at = self.out_at[k];
        if let Some(p) = self.probes.as_mut() {
            if at == 0 && p.mark[k].is_none() {
                p.mark[k] = p.to_mark[k].pop_front().map(token);
            }
            if at < TOKEN {
                if let Some(m) = &p.mark[k] {
                    return Due::Mark(&m[at..]);
                }
            }
        }
        Due::Body(at..self.shape.msg_size)
    }

    /// `n` bytes of flow `k`'s write due went out.
    #[inline]
    pub(crate) fn wrote(&mut self, k: usize, n: usize, c: &FlowCounters) {
        c.add_sent(n as u64);
        let at = self.out_at[k] + n;
        self.out_at[k] = if at >= self.shape.msg_size {
            if let Some(p) = self.probes.as_mut() {
                p.mark[k] = None;
            }
            0
        } else {
            at
        };
    }

    /// Where flow `k`'s next read goes in a message-long buffer: the rest
    /// of the message coming in, at most a read's size.
    #[inline]
    pub(crate) fn room(&self, k: usize) -> Range<usize> {
        let at = self.in_at[k];
        at..self
            .shape
            .msg_size
            .min(at.saturating_add(self.shape.read_size))
    }

    /// Flow `k` read `n` bytes; `bytes` are they where the driver has them
    /// (a receive that discards in the kernel has none). A client hands the
    /// latency of each self probe they answer to `timed`, as of `now_ns`.
    #[inline]
    pub(crate) fn read(
        &mut self,
        k: usize,
        n: usize,
        bytes: Option<&[u8]>,
        c: &FlowCounters,
        now_ns: impl FnOnce() -> u64,
        timed: impl FnMut(u64, u64),
    ) {
        c.add_received(n as u64);
        let at = self.in_at[k];
        let size = self.shape.msg_size;
        let (Some(p), Some(bytes)) = (self.probes.as_mut(), bytes) else {
            self.in_at[k] = (at + n) % size;
            return;
        };
        // Each message's first bytes are gathered; once whole, a mark among
        // them is answered. Reads may cut a message anywhere.
        let mut seqs = Vec::new();
        let (mut at, mut off) = (at, 0);
        while off < n {
            let step = (size - at).min(n - off);
            if at < TOKEN {
                let take = (TOKEN - at).min(step);
                p.head[k][at..at + take].copy_from_slice(&bytes[off..off + take]);
                if at + take == TOKEN {
                    seqs.extend(read_token(&p.head[k]));
                }
            }
            at = (at + step) % size;
            off += step;
        }
        self.in_at[k] = at;
        if !seqs.is_empty() {
            self.answered(k, &seqs, c, now_ns, timed);
        }
    }

    /// Marks or tokens with these sequence numbers came in on flow `k`: a
    /// client times the probes, a server answers each.
    fn answered(
        &mut self,
        k: usize,
        seqs: &[u64],
        c: &FlowCounters,
        now_ns: impl FnOnce() -> u64,
        mut timed: impl FnMut(u64, u64),
    ) {
        let p = self.probes.as_mut().expect("self probes");
        if !self.shape.client {
            // Upload: echo each on the idle direction; download: mark a
            // message with each.
            let to = if self.shape.sends {
                &mut p.to_mark[k]
            } else {
                &mut p.tokens_owed[k]
            };
            to.extend(seqs);
            return;
        }
        let now = now_ns();
        for &seq in seqs {
            // Answers come in order on one connection; one for a probe
            // not outstanding (a peer's mistake) times nothing.
            while let Some(&(s, planned)) = p.planned[k].front() {
                if s > seq {
                    break;
                }
                p.planned[k].pop_front();
                if s == seq {
                    c.add_transaction();
                    timed(planned, now.saturating_sub(planned));
                }
            }
        }
    }

    /// The rest of the token flow `k` owes on the idle direction, if any.
    pub(crate) fn token_due(&mut self, k: usize) -> Option<&[u8]> {
        let p = self.probes.as_mut()?;
        if p.token_out[k].is_none() {
            p.token_out[k] = p.tokens_owed[k].pop_front().map(|s| (token(s), 0));
        }
        p.token_out[k].as_ref().map(|(t, at)| &t[*at..])
    }

    /// `n` bytes of flow `k`'s token due went out.
    pub(crate) fn token_wrote(&mut self, k: usize, n: usize) {
        if let Some(p) = self.probes.as_mut() {
            if let Some((_, at)) = p.token_out[k].as_mut() {
                *at += n;
                if *at >= TOKEN {
                    p.token_out[k] = None;
                }
            }
        }
    }

    /// Flow `k` read `bytes` on its idle direction: tokens, each answered
    /// as [`Self::read`] answers a mark.
    pub(crate) fn tokens_in(
        &mut self,
        k: usize,
        bytes: &[u8],
        c: &FlowCounters,
        now_ns: impl FnOnce() -> u64,
        timed: impl FnMut(u64, u64),
    ) {
        let Some(p) = self.probes.as_mut() else {
            return;
        };
        let mut seqs = Vec::new();
        for &b in bytes {
            let (t, at) = &mut p.token_in[k];
            t[*at] = b;
            *at += 1;
            if *at == TOKEN {
                *at = 0;
                seqs.extend(read_token(t));
            }
        }
        if !seqs.is_empty() {
            self.answered(k, &seqs, c, now_ns, timed);
        }
    }

    /// Client: each self probe due by `now_ns` goes to the next flow in
    /// turn that has room for it, planned then; each flow given one that
    /// now owes a token is pushed on `placed`. When the next is due; None
    /// without a schedule, and while no flow has room.
    pub(crate) fn schedule(&mut self, now_ns: u64, placed: &mut Vec<usize>) -> Option<u64> {
        let p = self.probes.as_mut()?;
        let (dead, sends) = (&self.dead, self.shape.sends);
        let Probes {
            schedule,
            next_seq,
            planned,
            to_mark,
            tokens_owed,
            ..
        } = p;
        schedule.as_mut()?.run(now_ns, |k, at| {
            if dead[k] || planned[k].len() >= MOST_OUTSTANDING {
                return false;
            }
            let seq = *next_seq;
            *next_seq += 1;
            planned[k].push_back((seq, at));
            if sends {
                to_mark[k].push_back(seq);
            } else {
                tokens_owed[k].push_back(seq);
                placed.push(k);
            }
            true
        })
    }
}

/// A client and a server machine joined in memory: each write arrives
/// after a delay, in order as TCP keeps it, and is read in pieces cut at
/// random; a write takes part of what is due, as a socket with little room
/// does. Every choice comes from a seeded generator, so a failure repeats.
#[cfg(test)]
mod tests {
    use super::*;
    use crate::dice::Dice;
    use std::sync::atomic::Ordering::Relaxed;

    /// Bytes in flight one way on one flow, each piece with when it arrives.
    type Wire = VecDeque<(u64, Vec<u8>)>;

    struct End {
        m: StreamMachine,
        c: FlowCounters,
        timed: Vec<u64>,
        /// The bulk direction's pattern, as a sender writes it.
        pattern: Vec<u8>,
    }

    fn end(client: bool, sends: bool, msg: usize, rate: f64) -> End {
        let shape = StreamShape {
            client,
            sends,
            msg_size: msg,
            read_size: msg,
            self_probes: Some(rate),
        };
        End {
            m: StreamMachine::new(shape, 1, 1, 0),
            c: FlowCounters::default(),
            timed: Vec::new(),
            pattern: (0..msg).map(|i| i as u8).collect(),
        }
    }

    /// Sends what is due on the bulk direction (when `bulk`) and the
    /// idle one, a random part of each write, arriving 100 µs to 2 ms
    /// later and never before the piece ahead.
    fn write(e: &mut End, now: u64, bulk: &mut Wire, idle: &mut Wire, dice: &mut Dice) {
        let put = |w: &mut Wire, b: Vec<u8>, dice: &mut Dice| {
            let ahead = w.back().map_or(0, |p| p.0);
            let at = (now + 100_000 * dice.upto(20) as u64).max(ahead);
            w.push_back((at, b));
        };
        if e.m.shape.sends {
            for _ in 0..dice.upto(4) {
                let piece = match e.m.due(0) {
                    Due::Mark(m) => m.to_vec(),
                    Due::Body(r) => e.pattern[r].to_vec(),
                };
                if dice.upto(5) == 1 {
                    // The socket had no room: the write moved nothing.
                    break;
                }
                let n = dice.upto(piece.len());
                e.m.wrote(0, n, &e.c);
                put(bulk, piece[..n].to_vec(), dice);
            }
        }
        while let Some(t) = e.m.token_due(0) {
            let n = dice.upto(t.len());
            let piece = t[..n].to_vec();
            e.m.token_wrote(0, n);
            put(idle, piece, dice);
        }
    }

    /// Reads what has arrived by `now`, in reads of any size.
    fn read(e: &mut End, now: u64, bulk: &mut Wire, idle: &mut Wire, dice: &mut Dice) {
        let came = |w: &mut Wire| {
            let mut got = Vec::new();
            while w.front().is_some_and(|p| p.0 <= now) {
                got.extend(w.pop_front().unwrap().1);
            }
            got
        };
        let (b, t) = (came(bulk), came(idle));
        let End { m, c, timed, .. } = e;
        let mut off = 0;
        while off < b.len() {
            let room = m.room(0).len();
            let n = dice.upto(room).min(b.len() - off);
            m.read(
                0,
                n,
                Some(&b[off..off + n]),
                c,
                || now,
                |_, ns| timed.push(ns),
            );
            off += n;
        }
        if !t.is_empty() {
            m.tokens_in(0, &t, c, || now, |_, ns| timed.push(ns));
        }
    }

    #[test]
    fn every_self_probe_is_answered_once_and_timed_from_its_plan() {
        for upload in [true, false] {
            for seed in 1..=5u64 {
                let mut dice = Dice(seed * 7919);
                let msg = 100 + dice.upto(300);
                // 1000 probes a second for 0.2 s.
                let mut client = end(true, upload, msg, 1000.0);
                let mut server = end(false, !upload, msg, 1000.0);
                let (mut up_bulk, mut up_idle) = (Wire::new(), Wire::new());
                let (mut down_bulk, mut down_idle) = (Wire::new(), Wire::new());
                let mut placed = Vec::new();
                let step = 50_000;
                for t in (0..400_000_000u64).step_by(step) {
                    if t < 200_000_000 {
                        client.m.schedule(t, &mut placed);
                    }
                    // Upload: the client's bulk goes up and the server's
                    // tokens come down; download the other way round.
                    let (c_bulk, c_idle, s_bulk, s_idle) = if upload {
                        (&mut up_bulk, &mut up_idle, &mut down_bulk, &mut down_idle)
                    } else {
                        (&mut down_bulk, &mut down_idle, &mut up_bulk, &mut up_idle)
                    };
                    write(&mut client, t, c_bulk, c_idle, &mut dice);
                    write(&mut server, t, s_bulk, s_idle, &mut dice);
                    // Each end reads what the other wrote: the bulk on
                    // the other end's bulk wire, tokens on its idle one.
                    read(&mut server, t, c_bulk, c_idle, &mut dice);
                    read(&mut client, t, s_bulk, s_idle, &mut dice);
                }
                // What is still on its way arrives.
                let far = u64::MAX / 4;
                if upload {
                    read(&mut server, far, &mut up_bulk, &mut up_idle, &mut dice);
                    read(&mut client, far, &mut down_bulk, &mut down_idle, &mut dice);
                } else {
                    read(&mut server, far, &mut down_bulk, &mut down_idle, &mut dice);
                    read(&mut client, far, &mut up_bulk, &mut up_idle, &mut dice);
                }
                let what = format!("upload {upload} seed {seed} msg {msg}");
                // 200 planned (one every ms), every one answered once.
                assert_eq!(client.timed.len(), 200, "{what}");
                assert_eq!(client.c.transactions.load(Relaxed), 200, "{what}");
                assert!(client.m.probes.as_ref().unwrap().planned[0].is_empty());
                // A probe crosses two wires (0.1 to 2 ms each) and may
                // wait for a message to finish: never less than 0.2 ms.
                assert!(client.timed.iter().all(|&ns| ns >= 200_000), "{what}");
                // Every byte written was read, and the marks took the
                // place of pattern bytes rather than adding any.
                let (sender, receiver) = if upload {
                    (&client, &server)
                } else {
                    (&server, &client)
                };
                let sent = sender.c.sent.load(Relaxed);
                assert!(sent > 0, "{what}");
                assert_eq!(receiver.c.received.load(Relaxed), sent, "{what}");
            }
        }
    }

    #[test]
    fn a_message_is_marked_once_at_its_start_and_reads_keep_its_boundaries() {
        let shape = StreamShape {
            client: false,
            sends: true,
            msg_size: 40,
            read_size: 40,
            self_probes: Some(1.0),
        };
        let mut m = StreamMachine::new(shape, 1, 1, 0);
        let c = FlowCounters::default();
        assert_eq!(m.due(0), Due::Body(0..40));
        m.wrote(0, 10, &c);
        // A mark owed midway waits for the next message.
        m.probes.as_mut().unwrap().to_mark[0].push_back(7);
        assert!(!m.mark_next(0));
        assert_eq!(m.due(0), Due::Body(10..40));
        m.wrote(0, 30, &c);
        assert!(m.mark_next(0));
        let want = token(7);
        m.probes.as_mut().unwrap().to_mark[0].push_back(8);
        assert_eq!(m.due(0), Due::Mark(&want[..]));
        // Asked again before anything went: still the same mark.
        assert_eq!(m.due(0), Due::Mark(&want[..]));
        m.wrote(0, 5, &c);
        assert_eq!(m.due(0), Due::Mark(&want[5..]));
        m.wrote(0, 11, &c);
        assert_eq!(m.due(0), Due::Body(16..40));
        m.wrote(0, 24, &c);
        let next = token(8);
        assert_eq!(m.due(0), Due::Mark(&next[..]), "the next owed");
        m.wrote(0, 40, &c);
        assert_eq!(m.due(0), Due::Body(0..40), "then none");
        // A receiver's room is the rest of the message, at most a read.
        let shape = StreamShape {
            read_size: 15,
            sends: false,
            ..shape
        };
        let mut r = StreamMachine::new(shape, 1, 1, 0);
        assert_eq!(r.room(0), 0..15);
        r.read(0, 15, None, &c, || 0, |_, _| {});
        assert_eq!(r.room(0), 15..30);
        r.read(0, 15, None, &c, || 0, |_, _| {});
        assert_eq!(r.room(0), 30..40);
        r.read(0, 10, None, &c, || 0, |_, _| {});
        assert_eq!(r.room(0), 0..15);
    }
}
