//! Request/response flows. The client keeps `pipeline` requests outstanding
//! per flow and times each from the moment its first byte is written to the
//! moment the last byte of its response is read; the server answers every
//! complete request. A message may go out in several writes (`8,rest`), each
//! its own `write()`, so that Nagle and delayed ACKs interact as they do in
//! real applications. In an open loop (`rate`) the client issues requests
//! on a fixed schedule instead, and a late one shows in its latency.

use crate::flow::{
    clock, later, pattern, read_burst, FlowCounters, Handler, Loop, Next, PageBuf, Shared, BOUND,
};
use crate::plan::{on_engine, Conduct, Plan};
use crate::ring::{self, receive_buffers, Done, Op, RingFlows, Shape};
use crate::FlowError;
use plumb_spec::Io;
use plumb_sys::uring::Queue;
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

mod machine;

pub(crate) use machine::RrMachine;

/// A request/response spec's sizes, which validation gives rr, crr and
/// udp-rr.
pub(crate) fn sizes(spec: &plumb_spec::Spec) -> &plumb_spec::RrSpec {
    spec.rr
        .as_ref()
        .expect("a validated request/response spec carries its sizes")
}

/// An end's side of a transaction: the writes it sends its message in
/// (those asked, else one) and the size of the message it reads.
pub(crate) fn messages(r: &plumb_spec::RrSpec, server: bool) -> (Vec<usize>, usize) {
    let (asked, out, in_size) = if server {
        (&r.resp_writes, r.resp_size, r.req_size)
    } else {
        (&r.req_writes, r.req_size, r.resp_size)
    };
    let writes = if asked.is_empty() {
        vec![out as usize]
    } else {
        asked.iter().map(|&n| n as usize).collect()
    };
    (writes, in_size as usize)
}

impl Plan for RrPlan {
    fn for_spec(spec: &plumb_spec::Spec, server: bool, _: &crate::Link) -> RrPlan {
        let r = sizes(spec);
        let (out_writes, in_size) = messages(r, server);
        let client = !server;
        RrPlan {
            client,
            out_writes,
            in_size,
            initial: if client && r.rate.is_none() {
                r.pipeline
            } else {
                0
            },
            depth: if client { r.pipeline } else { 0 },
            rate: r.rate.filter(|_| client).map(|x| x as f64),
        }
    }

    fn conduct(&self) -> Conduct {
        Conduct::transactions(self.client, self.rate)
    }

    fn run(self, sh: Shared, io: Io) -> io::Result<Vec<FlowError>> {
        let new = |plan, sh: &Shared| Ok(RrFlows::new(plan, sh));
        on_engine(self, sh, io, new, new)
    }
}

/// What a driver keeps of one flow beside the machine.
#[derive(Clone, Copy, Default, Debug)]
struct FlowIo {
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

/// Writes what flow `k` owes until it owes nothing (false) or the socket
/// would block (true); `cut` says whether bytes went before it blocked.
fn write_owed(
    m: &mut RrMachine,
    k: usize,
    stream: &TcpStream,
    buf: &[u8],
    c: &FlowCounters,
    now_ns: impl Fn() -> u64,
    cut: &mut bool,
) -> io::Result<bool> {
    let mut moved = false;
    while let Some(want) = m.write_due(k, &now_ns) {
        match (&*stream).write(&buf[..want]) {
            Ok(w) => {
                moved |= w > 0;
                m.wrote(k, w, c);
            }
            Err(e) if later(&e) => {
                // A write that moved nothing waits on the peer: reading
                // is what lets both go on.
                *cut = moved;
                return Ok(true);
            }
            Err(e) => return Err(e),
        }
    }
    *cut = false;
    Ok(false)
}

/// Reads per readable event before the loop moves on.
const READS_PER_EVENT: usize = 8;

/// The request/response flows of one worker: the machine, driven by the
/// epoll loop ([`Handler`]) or the ring loop ([`RingFlows`]).
pub(crate) struct RrFlows {
    m: RrMachine,
    base: usize,
    /// Every flow has `depth` requests outstanding: the schedule waits for
    /// a response, and the wait shows in the latency of what is issued late.
    backlogged: bool,
    placed: Vec<usize>,
    reads: usize,
    send_buf: PageBuf,
    recv_buf: Vec<u8>,
    io: Vec<FlowIo>,
}

impl RrFlows {
    pub(crate) fn new(plan: RrPlan, sh: &Shared) -> RrFlows {
        let n = sh.range.len();
        let m = RrMachine::new(plan, n, sh.flows.len(), sh.now_ns());
        let (largest, in_size) = m.sizes();
        RrFlows {
            m,
            base: sh.range.start,
            backlogged: false,
            placed: Vec::new(),
            reads: READS_PER_EVENT,
            send_buf: pattern(largest),
            recv_buf: vec![0u8; in_size.clamp(4096, 256 * 1024)],
            io: vec![FlowIo::default(); n],
        }
    }

    /// Writes what flow `k` owes and arms or disarms EPOLLOUT. Any error
    /// is the flow's failure.
    fn pump(&mut self, lp: &Loop, k: usize) -> io::Result<()> {
        let i = self.base + k;
        let stream = &lp.sh.flows[i];
        let io = &mut self.io[k];
        let blocked = write_owed(
            &mut self.m,
            k,
            stream,
            &self.send_buf,
            &lp.sh.counters[i],
            clock(&lp.sh),
            &mut io.cut,
        )?;
        if lp.blocking.is_none() && blocked != io.armed {
            let flags = if blocked {
                epoll::EventFlags::IN | epoll::EventFlags::OUT
            } else {
                epoll::EventFlags::IN
            };
            lp.rewatch(stream, i as u64, flags)?;
            io.armed = blocked;
        }
        Ok(())
    }

    /// Flow `k` took in `got` bytes.
    fn took(&mut self, lp: &mut Loop, k: usize, got: usize) {
        let now = clock(&lp.sh);
        let (c, timings) = (&lp.sh.counters[self.base + k], &mut lp.timings);
        self.m
            .read(k, got, c, now, |planned, ns| timings.record(planned, ns));
    }

    fn end(&mut self, lp: &mut Loop, k: usize, why: String) {
        self.m.end(k);
        lp.end_tcp_flow(self.base + k, why);
    }

    fn pump_or_end(&mut self, lp: &mut Loop, k: usize) {
        if let Err(e) = self.pump(lp, k) {
            self.end(lp, k, plumb_sys::plain_io(&e));
        }
    }

    /// Open loop: the machine places the requests due, and `issue` sends
    /// what each flow given one then owes. The nanoseconds until the next
    /// is due; None in a closed loop and while backlogged.
    fn schedule(
        &mut self,
        lp: &mut Loop,
        mut issue: impl FnMut(&mut RrFlows, &mut Loop, usize) -> io::Result<()>,
    ) -> io::Result<Option<u64>> {
        if !self.m.open_loop() {
            return Ok(None);
        }
        let mut placed = std::mem::take(&mut self.placed);
        let due = self.m.schedule(lp.now_ns(), &mut placed);
        self.backlogged = due.is_none();
        for k in placed.drain(..) {
            if !self.m.ended(k) {
                issue(self, lp, k)?;
            }
        }
        self.placed = placed;
        Ok(due.map(|t| t.saturating_sub(lp.now_ns())))
    }
}

impl Handler for RrFlows {
    fn start(&mut self, lp: &mut Loop) -> io::Result<()> {
        let n = lp.sh.range.len();
        if n == 1 && !self.m.open_loop() {
            lp.sh.flows[self.base].set_nonblocking(false)?;
            lp.block(self.base as u64, BOUND)?;
            // A second read would block until the interrupter with
            // requests owed.
            self.reads = 1;
        } else {
            lp.watch_range(&lp.sh.flows, epoll::EventFlags::IN)?;
        }
        lp.live = n;
        for k in 0..n {
            self.pump_or_end(lp, k);
        }
        Ok(())
    }

    fn on_readable(&mut self, lp: &mut Loop, id: u64, _: epoll::EventFlags) -> io::Result<Next> {
        let i = id as usize;
        let k = i - self.base;
        if self.m.ended(k) {
            return Ok(Next::Done);
        }
        if lp.blocking.is_some() && self.io[k].cut {
            return Ok(Next::Write);
        }
        let now = clock(&lp.sh);
        let stream = &lp.sh.flows[i];
        let (c, timings) = (&lp.sh.counters[i], &mut lp.timings);
        let cap = self.recv_buf.len();
        let mut buf = std::mem::take(&mut self.recv_buf);
        let m = &mut self.m;
        let end = read_burst(
            self.reads,
            || (&*stream).read(&mut buf).map(Some),
            |got| {
                m.read(k, got, c, now, |planned, ns| timings.record(planned, ns));
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
        if !self.m.ended(k) {
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

/// On a ring, each flow has one write in flight at a time (the messages
/// owed go out in order, each in its writes) and a multishot receive armed.
impl RingFlows for RrFlows {
    fn shape(&self, lp: &Loop) -> Shape {
        let n = lp.sh.range.len();
        Shape {
            ops: 2 * n as u32,
            send_len: self.send_buf.len(),
            receive: Some(receive_buffers(
                n,
                ring::fitted(self.m.sizes().1.next_power_of_two()),
                RING_RECEIVE_BYTES,
            )),
            ..Shape::default()
        }
    }

    fn start(&mut self, lp: &mut Loop, q: &mut Queue) -> io::Result<()> {
        ring::block_flows(lp)?;
        for i in lp.sh.range.clone() {
            q.receive(lp.sh.flows[i].as_fd(), ring::tag(i, Op::Receive))?;
        }
        lp.live = self.m.flows();
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
        match self.io.as_slice() {
            [lone] => lone.quiet as usize,
            _ => 0,
        }
    }

    fn on_timer(&mut self, lp: &mut Loop, q: &mut Queue) -> io::Result<Option<u64>> {
        self.schedule(lp, |me, lp, k| me.queue_write(lp, q, k))
    }

    fn complete(&mut self, lp: &mut Loop, q: &mut Queue, done: Done<'_>) -> io::Result<()> {
        let (i, op, c) = (done.flow, done.op, done.c);
        let k = i - self.base;
        if op == Op::Send {
            self.io[k].quiet = false;
        }
        if self.m.ended(k) {
            return Ok(());
        }
        match (op, c.error()) {
            (Op::Receive, None) if c.result == 0 => {
                self.end(lp, k, "closed by the peer".into());
                return Ok(());
            }
            (Op::Receive, None) => {
                self.took(lp, k, c.result as usize);
                let fd = lp.sh.flows[i].as_fd();
                ring::receive_again(lp, q, &c, fd, ring::tag(i, Op::Receive))?;
            }
            // Every buffer was taken: armed again now that the batch hands
            // them back.
            (Op::Receive, Some(_)) if c.out_of_buffers() => {
                let fd = lp.sh.flows[i].as_fd();
                ring::receive_again(lp, q, &c, fd, ring::tag(i, Op::Receive))?;
            }
            // rr flows neither connect, accept nor splice on the ring.
            (Op::Connect | Op::Accept | Op::Fill | Op::Errors | Op::Copy | Op::Token, None) => {}
            (Op::Send, None) => {
                self.m.wrote(k, c.result as usize, &lp.sh.counters[i]);
                self.io[k].armed = false;
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
        if self.io[k].armed || !ring::going(lp, self.m.ended(k)) {
            return Ok(());
        }
        let Some(len) = self.m.write_due(k, clock(&lp.sh)) else {
            return Ok(());
        };
        let i = self.base + k;
        q.send(lp.sh.flows[i].as_fd(), len, false, ring::tag(i, Op::Send))?;
        // MSG_WAITALL: the send completes whole or fails, so whether it
        // leaves anything owed is known now.
        let io = &mut self.io[k];
        io.armed = true;
        io.quiet = self.m.settles(k, len);
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

    fn client(out_writes: &[usize], initial: u32) -> RrMachine {
        let plan = RrPlan {
            client: true,
            out_writes: out_writes.to_vec(),
            in_size: 1,
            initial,
            // The start times' slots: as many as messages are owed, within
            // reason.
            depth: initial.min(64),
            rate: None,
        };
        RrMachine::new(plan, 1, 1, 0)
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
        let mut m = client(&writes, 8);
        let starts = std::cell::Cell::new(0);
        let now = || {
            starts.set(starts.get() + 1);
            0
        };
        let mut cut = false;
        let total = 8 * 1_000_008;
        // Nobody reads yet: 8 MB cannot fit the two socket buffers.
        while !write_owed(&mut m, 0, &tx, &buf, &c, now, &mut cut).unwrap() {
            assert!(
                m.write_due(0, || 0).is_some(),
                "8 MB went out with nobody reading"
            );
        }
        let reader = std::thread::spawn(move || {
            let mut got = vec![0u8; total];
            rx.read_exact(&mut got).unwrap();
            got.len()
        });
        while write_owed(&mut m, 0, &tx, &buf, &c, now, &mut cut).unwrap() {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        assert_eq!(reader.join().unwrap(), total);
        assert_eq!(
            c.sent.load(std::sync::atomic::Ordering::Relaxed),
            total as u64
        );
        assert!(!cut);
        assert_eq!(m.write_due(0, || 0), None);
        // Every message was timed once, as it started, however often its
        // first write found no room.
        assert_eq!(starts.get(), 8);
    }

    #[test]
    fn a_closed_peer_fails_the_write() {
        let (tx, rx) = pair();
        drop(rx);
        let c = FlowCounters::default();
        let mut m = client(&[1000], u32::MAX);
        let buf = pattern(1000);
        let mut cut = false;
        let r = (0..1000).find_map(|_| write_owed(&mut m, 0, &tx, &buf, &c, || 0, &mut cut).err());
        assert!(r.is_some(), "writing to a closed peer never failed");
    }
}
