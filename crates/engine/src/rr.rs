//! Request/response flows. The client keeps `pipeline` requests outstanding
//! per flow and times each from the moment its first byte is written to the
//! moment the last byte of its response is read; the server answers every
//! complete request. A message may go out in several writes (`8,rest`), each
//! its own `write()`, so that Nagle and delayed ACKs interact as they do in
//! real applications. In an open loop (`rate`) the client issues requests
//! on a fixed schedule instead, and a late one shows in its latency.

use crate::flow::{
    later, pattern, read_burst, FlowCounters, Handler, Loop, Next, PageBuf, Shared, Timings,
    Writing, BOUND,
};
use crate::ring::{self, receive_buffers, Op, RingFlows, Shape};
use plumb_sys::uring::{Completion, Queue};
use rustix::event::epoll;
use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::os::fd::AsFd;

/// What one end of a request/response flow writes and expects.
#[derive(Debug, Clone)]
pub struct RrPlan {
    /// True on the client: it sends requests and times transactions.
    pub client: bool,
    /// The writes one outgoing message is made of.
    pub out_writes: Vec<usize>,
    /// Bytes of one incoming message.
    pub in_size: usize,
    /// Outgoing messages each flow starts with (the client's pipeline; 0 on
    /// the server, which only answers, and in an open loop).
    pub initial: u32,
    /// Most requests a client flow may have outstanding.
    pub depth: u32,
    /// Open loop: transactions per second over all flows of the engine.
    pub rate: Option<f64>,
}

/// The outgoing side of one flow.
#[derive(Clone, Copy, Default, Debug, PartialEq, Eq)]
struct Out {
    /// Messages still to write, the current one included.
    pending: u32,
    /// Where the current message's writes stand.
    at: Writing,
    /// EPOLLOUT is armed because a write would have blocked; on a ring, a
    /// write is in flight.
    armed: bool,
    /// On a ring: the write in flight finishes what the flow owes (see
    /// [`RingFlows::quiet`]).
    quiet: bool,
    /// A blocking write moved bytes and was then cut short (a signal):
    /// the rest goes out before the next read, which would otherwise wait
    /// for an answer to a message the peer does not have whole.
    cut: bool,
}

impl Out {
    /// Bytes of the write due now, if a message is owed.
    pub(crate) fn due(&self, writes: &[usize]) -> Option<usize> {
        (self.pending > 0).then(|| self.at.due(writes))
    }

    /// `w` bytes of the write due went out.
    pub(crate) fn wrote(&mut self, writes: &[usize], w: usize) {
        if self.at.wrote(writes, w) {
            self.pending -= 1;
        }
    }

    /// Writes the messages owed, each as its `writes`, until none is left
    /// (false) or the socket would block (true). `starting` is called as
    /// each message is about to start.
    fn write_owed(
        &mut self,
        stream: &TcpStream,
        writes: &[usize],
        buf: &[u8],
        c: &FlowCounters,
        mut starting: impl FnMut(),
    ) -> io::Result<bool> {
        let mut moved = false;
        while let Some(want) = self.due(writes) {
            if self.at.starts() {
                starting();
            }
            match (&*stream).write(&buf[..want]) {
                Ok(w) => {
                    moved |= w > 0;
                    c.add_sent(w as u64);
                    self.wrote(writes, w);
                }
                Err(e) if later(&e) => {
                    // A write that moved nothing waits on the peer: reading
                    // is what lets both go on.
                    self.cut = moved;
                    return Ok(true);
                }
                Err(e) => return Err(e),
            }
        }
        self.cut = false;
        Ok(false)
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

/// Reads per readable event before the loop moves on.
const READS_PER_EVENT: usize = 8;

/// The request/response flows of one worker.
pub(crate) struct RrFlows {
    plan: RrPlan,
    base: usize,
    /// Open loop: this worker's share of the rate, as a fixed schedule of
    /// planned send times, handed to its flows in turn.
    interval_ns: Option<f64>,
    next_due_ns: f64,
    turn: usize,
    /// Every flow has `depth` requests outstanding: the schedule waits for
    /// a response, and the wait shows in the latency of what is issued late.
    backlogged: bool,
    reads: usize,
    send_buf: PageBuf,
    recv_buf: Vec<u8>,
    // Per-flow state in parallel vectors indexed by the flow's place in the
    // worker's range rather than a struct per flow: the open-loop schedule
    // scans `dead` and the outstanding count of every flow for each request
    // it places, and the start times are client-only.
    out: Vec<Out>,
    partial: Vec<usize>,
    starts: Starts,
    dead: Vec<bool>,
}

impl RrFlows {
    pub(crate) fn new(plan: RrPlan, sh: &Shared) -> RrFlows {
        let n = sh.range.len();
        let depth = plan.depth.max(1) as usize;
        let interval_ns = plan
            .rate
            .filter(|_| plan.client)
            .map(|r| 1e9 * sh.flows.len() as f64 / (r * n.max(1) as f64));
        let largest = plan.out_writes.iter().copied().max().unwrap_or(1);
        RrFlows {
            base: sh.range.start,
            interval_ns,
            next_due_ns: sh.clock.elapsed().as_nanos() as f64,
            turn: 0,
            backlogged: false,
            reads: READS_PER_EVENT,
            send_buf: pattern(largest),
            recv_buf: vec![0u8; plan.in_size.clamp(4096, 256 * 1024)],
            out: vec![
                Out {
                    pending: plan.initial,
                    ..Out::default()
                };
                n
            ],
            partial: vec![0; n],
            starts: Starts {
                depth,
                started: vec![0; if plan.client { n * depth } else { 0 }],
                ring: vec![(0, 0); if plan.client { n } else { 0 }],
            },
            dead: vec![false; n],
            plan,
        }
    }

    /// Writes what flow `k` owes and arms or disarms EPOLLOUT. Any error
    /// is the flow's failure.
    fn pump(&mut self, lp: &Loop, k: usize) -> io::Result<()> {
        let i = self.base + k;
        let stream = &lp.sh.flows[i];
        let stamp = self.stamps();
        let starts = &mut self.starts;
        let blocked = self.out[k].write_owed(
            stream,
            &self.plan.out_writes,
            &self.send_buf,
            &lp.sh.counters[i],
            || {
                if stamp {
                    starts.open(k, lp.now_ns());
                }
            },
        )?;
        let o = &mut self.out[k];
        if lp.blocking.is_none() && blocked != o.armed {
            let flags = if blocked {
                epoll::EventFlags::IN | epoll::EventFlags::OUT
            } else {
                epoll::EventFlags::IN
            };
            lp.rewatch(stream, i as u64, flags)?;
            o.armed = blocked;
        }
        Ok(())
    }

    /// Whether messages are timed from when they start: a closed-loop
    /// client's (an open loop times from the schedule).
    fn stamps(&self) -> bool {
        self.plan.client && self.interval_ns.is_none()
    }

    /// Flow `k` is about to start a message, as written by `write_owed` or
    /// queued on a ring.
    pub(crate) fn starting(&mut self, k: usize, now_ns: u64) {
        if self.stamps() {
            self.starts.open(k, now_ns);
        }
    }

    /// Flow `k` took in `got` bytes: the messages they complete are
    /// transactions, each owes a message back (a closed loop), and a
    /// client times each against its start.
    pub(crate) fn took(&mut self, c: &FlowCounters, timings: &mut Timings, k: usize, got: usize) {
        c.add_received(got as u64);
        for _ in 0..complete(&mut self.partial[k], got, self.plan.in_size) {
            c.add_transaction();
            if self.interval_ns.is_none() {
                self.out[k].pending += 1;
            }
            if self.plan.client {
                if let Some(t0) = self.starts.close(k) {
                    timings.record_since(t0);
                }
            }
        }
    }

    fn end(&mut self, lp: &mut Loop, k: usize, why: String) {
        self.dead[k] = true;
        lp.end_tcp_flow(self.base + k, why);
    }

    fn pump_or_end(&mut self, lp: &mut Loop, k: usize) {
        if let Err(e) = self.pump(lp, k) {
            self.end(lp, k, plumb_sys::plain_io(&e));
        }
    }
}

impl Handler for RrFlows {
    fn start(&mut self, lp: &mut Loop) -> io::Result<()> {
        let n = lp.sh.range.len();
        if n == 1 && self.interval_ns.is_none() {
            lp.sh.flows[self.base].set_nonblocking(false)?;
            lp.block(self.base as u64, BOUND)?;
            // A second read would block until the interrupter with
            // requests owed.
            self.reads = 1;
        } else {
            lp.watch_range(&lp.sh.flows, epoll::EventFlags::IN)?;
        }
        lp.live = n;
        if self.plan.client {
            for k in 0..n {
                self.pump_or_end(lp, k);
            }
        }
        Ok(())
    }

    fn on_readable(&mut self, lp: &mut Loop, id: u64, _: epoll::EventFlags) -> io::Result<Next> {
        let i = id as usize;
        let k = i - self.base;
        if self.dead[k] {
            return Ok(Next::Done);
        }
        if lp.blocking.is_some() && self.out[k].cut {
            return Ok(Next::Write);
        }
        let stream = &lp.sh.flows[i];
        let (c, timings) = (&lp.sh.counters[i], &mut lp.timings);
        let cap = self.recv_buf.len();
        let mut buf = std::mem::take(&mut self.recv_buf);
        let end = read_burst(
            self.reads,
            || (&*stream).read(&mut buf).map(Some),
            |got| {
                self.took(c, timings, k, got);
                // A short read emptied the socket.
                got == cap
            },
        );
        self.recv_buf = buf;
        match end {
            Some(why) => {
                self.end(lp, k, why);
                Ok(Next::Done)
            }
            // A response owes the next request, a request its response.
            None => Ok(Next::Write),
        }
    }

    fn on_writable(&mut self, lp: &mut Loop, id: u64, _: epoll::EventFlags) -> io::Result<()> {
        let k = id as usize - self.base;
        if !self.dead[k] {
            self.pump_or_end(lp, k);
        }
        Ok(())
    }

    fn on_timer(&mut self, lp: &mut Loop) -> io::Result<Option<u64>> {
        self.schedule(lp, |me, lp, k| {
            me.pump_or_end(lp, k);
            Ok(())
        })
    }
}

impl RrFlows {
    /// Open loop: each request due by now goes to the next flow in turn
    /// with room for it, timed from when it was due, and `issue` sends what
    /// that flow then owes. The nanoseconds until the next is due; None in
    /// a closed loop, and while every flow has its `depth` outstanding (a
    /// response makes room).
    fn schedule(
        &mut self,
        lp: &mut Loop,
        mut issue: impl FnMut(&mut RrFlows, &mut Loop, usize) -> io::Result<()>,
    ) -> io::Result<Option<u64>> {
        let Some(iv) = self.interval_ns else {
            return Ok(None);
        };
        let n = self.out.len();
        let now = lp.now_ns() as f64;
        self.backlogged = false;
        while self.next_due_ns <= now && lp.live > 0 {
            let mut placed = None;
            for _ in 0..n {
                let k = self.turn;
                self.turn = (self.turn + 1) % n;
                if !self.dead[k] && self.starts.room(k) {
                    placed = Some(k);
                    break;
                }
            }
            let Some(k) = placed else {
                self.backlogged = true;
                break;
            };
            self.starts.open(k, self.next_due_ns as u64);
            self.out[k].pending += 1;
            self.next_due_ns += iv;
            issue(self, lp, k)?;
        }
        if self.backlogged {
            return Ok(None);
        }
        let now = lp.now_ns() as f64;
        Ok(Some((self.next_due_ns - now).max(0.0) as u64))
    }
}

/// On a ring, each flow has one write in flight at a time (the messages
/// owed go out in order, each in its writes) and a multishot receive armed.
impl RingFlows for RrFlows {
    fn shape(&self, lp: &Loop) -> Shape {
        let n = lp.sh.range.len();
        Shape {
            peer: None,
            discard: None,
            ops: 2 * n as u32,
            send_len: self.send_buf.len(),
            receive: Some(receive_buffers(
                n,
                ring::fitted(self.plan.in_size.next_power_of_two()),
                RING_RECEIVE_BYTES,
            )),
        }
    }

    fn start(&mut self, lp: &mut Loop, q: &mut Queue) -> io::Result<()> {
        ring::block_flows(lp)?;
        for i in lp.sh.range.clone() {
            q.receive(lp.sh.flows[i].as_fd(), ring::tag(i, Op::Receive))?;
        }
        lp.live = lp.sh.range.len();
        for k in 0..lp.live {
            self.queue_write(lp, q, k)?;
        }
        Ok(())
    }

    /// A lone flow only: its batch is one message, so a call saved is half
    /// of them; a worker of thousands of flows measured about 8 % slower
    /// waiting for its hundreds of sends' completions than taking them as
    /// they came.
    fn quiet(&self) -> usize {
        match self.out.as_slice() {
            [lone] => lone.quiet as usize,
            _ => 0,
        }
    }

    fn on_timer(&mut self, lp: &mut Loop, q: &mut Queue) -> io::Result<Option<u64>> {
        self.schedule(lp, |me, lp, k| me.queue_write(lp, q, k))
    }

    fn complete(
        &mut self,
        lp: &mut Loop,
        q: &mut Queue,
        i: usize,
        op: Op,
        c: Completion,
    ) -> io::Result<()> {
        let k = i - self.base;
        if op == Op::Send {
            self.out[k].quiet = false;
        }
        if self.dead[k] {
            return Ok(());
        }
        let stream = lp.sh.flows[i].as_fd();
        match (op, c.error()) {
            (Op::Receive, None) if c.result == 0 => {
                self.end(lp, k, "closed by the peer".into());
                return Ok(());
            }
            (Op::Receive, None) => {
                self.took(&lp.sh.counters[i], &mut lp.timings, k, c.result as usize);
                if !c.more && ring::going(lp, false) {
                    q.receive(stream, ring::tag(i, Op::Receive))?;
                }
            }
            // Every buffer was taken: armed again now that the batch hands
            // them back.
            (Op::Receive, Some(_)) if c.out_of_buffers() => {
                if ring::going(lp, false) {
                    q.receive(stream, ring::tag(i, Op::Receive))?;
                }
            }
            // rr flows neither connect nor accept on the ring.
            (Op::Connect | Op::Accept, None) => {}
            (Op::Send, None) => {
                lp.sh.counters[i].add_sent(c.result as u64);
                self.out[k].wrote(&self.plan.out_writes, c.result as usize);
                self.out[k].armed = false;
            }
            (_, Some(e)) => {
                self.end(lp, k, plumb_sys::plain_io(&e));
                return Ok(());
            }
        }
        self.queue_write(lp, q, k)
    }
}

/// Bytes of receive buffers a worker's ring holds at most.
const RING_RECEIVE_BYTES: usize = 8 << 20;

impl RrFlows {
    /// Queues the write flow `k` owes next, unless one is in flight (its
    /// `armed`, which the ring loop uses for that).
    fn queue_write(&mut self, lp: &Loop, q: &mut Queue, k: usize) -> io::Result<()> {
        if self.out[k].armed || !ring::going(lp, self.dead[k]) {
            return Ok(());
        }
        let Some(len) = self.out[k].due(&self.plan.out_writes) else {
            return Ok(());
        };
        if self.out[k].at.starts() {
            self.starting(k, lp.now_ns());
        }
        let i = self.base + k;
        q.send(lp.sh.flows[i].as_fd(), len, false, ring::tag(i, Op::Send))?;
        // MSG_WAITALL: the send completes whole or fails, so whether it
        // leaves anything owed is known now.
        let mut after = self.out[k];
        after.wrote(&self.plan.out_writes, len);
        let o = &mut self.out[k];
        o.armed = true;
        o.quiet = after.pending == 0;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A connected TCP pair on loopback: (writer side non-blocking, reader).
    fn pair() -> (TcpStream, TcpStream) {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let a = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (b, _) = l.accept().unwrap();
        a.set_nonblocking(true).unwrap();
        (a, b)
    }

    #[test]
    fn owed_messages_go_out_whole_in_their_writes_and_resume_after_blocking() {
        let (tx, mut rx) = pair();
        socket2::SockRef::from(&tx)
            .set_send_buffer_size(4096)
            .unwrap();
        let writes = [8usize, 1_000_000];
        let buf = pattern(1_000_000);
        let c = FlowCounters::default();
        let mut out = Out {
            pending: 8,
            ..Out::default()
        };
        let mut starts = 0;
        let total = 8 * 1_000_008;
        // Nobody reads yet: 8 MB cannot fit the two socket buffers.
        while !out
            .write_owed(&tx, &writes, &buf, &c, || starts += 1)
            .unwrap()
        {
            assert!(out.pending > 0, "8 MB went out with nobody reading");
        }
        let reader = std::thread::spawn(move || {
            let mut got = vec![0u8; total];
            rx.read_exact(&mut got).unwrap();
            got.len()
        });
        while out.pending > 0 {
            if out
                .write_owed(&tx, &writes, &buf, &c, || starts += 1)
                .unwrap()
            {
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
        }
        assert_eq!(reader.join().unwrap(), total);
        assert_eq!(
            c.sent.load(std::sync::atomic::Ordering::Relaxed),
            total as u64
        );
        assert_eq!(out.at, Writing::default());
        // Every message was announced as it started, a blocked one at most
        // once more when its first write found no room.
        assert!((8..=16).contains(&starts), "{starts}");
    }

    #[test]
    fn a_closed_peer_fails_the_write() {
        let (tx, rx) = pair();
        drop(rx);
        let c = FlowCounters::default();
        let mut out = Out {
            pending: u32::MAX,
            ..Out::default()
        };
        let buf = pattern(1000);
        let r = (0..1000).find_map(|_| out.write_owed(&tx, &[1000], &buf, &c, || {}).err());
        assert!(r.is_some(), "writing to a closed peer never failed");
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
