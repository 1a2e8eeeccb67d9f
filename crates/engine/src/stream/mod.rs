//! Stream flows: the machine ([`machine`]) keeps where each flow's
//! messages stand and its self probes; the drivers here hand data to the
//! kernel and take it back: plain write/read, MSG_ZEROCOPY with a buffer
//! pool recycled by completion notifications, sendfile or splice from an
//! in-memory file, and receives that discard in the kernel (MSG_TRUNC).
//! Everything a flow needs is allocated when the worker starts; sending
//! and receiving allocate nothing.

use crate::flow::{
    clock, later, pattern, read_burst, FlowCounters, Handler, Loop, Next, PageBuf, Shared, BOUND,
};
use crate::plan::{on_engine, Conduct, Plan};
use crate::ring::{self, receive_buffers, Done, Op, RingFlows, Shape};
use crate::FlowError;
use plumb_spec::Io;
use plumb_spec::{RxMode, ZeroCopy};
use plumb_sys::sock::zerocopy::{self as zc, ErrQueueEntry};
use plumb_sys::uring::Queue;
use rustix::event::epoll::{self, EventFlags};
use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::atomic::Ordering::Relaxed;

mod machine;

use machine::{Due, StreamMachine, StreamShape, TOKEN};

/// What one end of a stream test does.
#[derive(Debug, Clone)]
pub struct StreamPlan {
    /// True on the client, which times the self probes.
    pub client: bool,
    pub sends: bool,
    pub receives: bool,
    pub msg_size: usize,
    /// How the sending end hands data to the kernel.
    pub zerocopy: ZeroCopy,
    /// How the receiving end takes it.
    pub rx: RxMode,
    /// The most bytes one read takes (the ring's receive buffer size), at
    /// most `msg_size`; None for a whole message.
    pub read_size: Option<usize>,
    /// Self probes a second over all the flows of the engine.
    pub self_probes: Option<f64>,
}

impl Plan for StreamPlan {
    fn for_spec(spec: &plumb_spec::Spec, server: bool, _: &crate::Link) -> StreamPlan {
        let (sends, receives) = spec.direction.activity(server);
        StreamPlan {
            client: !server,
            sends,
            receives,
            msg_size: spec.msg_size as usize,
            zerocopy: spec.zerocopy,
            rx: spec.rx,
            read_size: spec.read_size.map(|r| r as usize),
            self_probes: spec.self_probes.map(f64::from),
        }
    }

    /// The client of self probes times them.
    fn conduct(&self) -> Conduct {
        let schedule = self.self_probes.filter(|_| self.client);
        Conduct {
            transactional: false,
            timed: schedule.is_some(),
            hands_over: schedule.is_some(),
            schedule,
        }
    }

    fn run(self, sh: Shared, io: Io) -> io::Result<Vec<FlowError>> {
        on_engine(self, sh, io, StreamFlows::new, StreamRing::new)
    }
}

impl StreamPlan {
    fn read_size(&self) -> usize {
        self.read_size.unwrap_or(self.msg_size)
    }

    /// The size of each receive buffer of a ring: the read size asked, or
    /// where none was a message's, fitted.
    fn ring_buffer(&self) -> usize {
        self.read_size
            .unwrap_or_else(|| crate::ring::fitted(self.msg_size))
    }

    fn shape(&self) -> StreamShape {
        StreamShape {
            client: self.client,
            sends: self.sends,
            msg_size: self.msg_size,
            read_size: self.read_size(),
            self_probes: self.self_probes,
        }
    }
}

/// Operations on one ready flow before the loop moves on, so that a flow that
/// never blocks cannot starve the others.
const BURST: usize = 8;

/// Operations on a ready flow before the loop moves on, where the worker
/// has more than one flow: one, so that the flows take turns message by
/// message, as iperf3's loop over its streams does. A burst per flow
/// emptied each receiver's socket and filled each sender's, so that both
/// ends often found none of their flows ready and slept: 32 flows of
/// 256-byte messages with 8K buffers, one thread an end, moved 1.24 times
/// as many bytes with one at 1.10 times as many per busy CPU-second, and
/// the host's context switches per MB fell from 780 to 50. With two
/// threads an end, or four flows of 128K, it made no difference.
const TURN: usize = 1;

/// The stream flows of one worker: the machine, driven by the epoll loop.
pub(crate) struct StreamFlows {
    m: StreamMachine,
    plan: StreamPlan,
    interest: epoll::EventFlags,
    send_buf: PageBuf,
    recv_buf: PageBuf,
    /// The message as a file, for sendfile and splice.
    file: Option<OwnedFd>,
    base: usize,
    /// Reads or writes on a ready flow before the loop moves on.
    burst: usize,
    // Per-flow state in parallel vectors indexed by the flow's place in the
    // worker's range, rather than one struct per flow: a flow that only
    // sends has no receiver and one that only receives no sender, so the
    // unused side costs neither memory nor cache lines.
    senders: Vec<Sender>,
    receivers: Vec<Receiver>,
    /// MSG_ZEROCOPY flows waiting for completions are watched for the error
    /// queue only (EPOLLERR is always reported), not for room to write.
    parked: Vec<bool>,
    /// Flows given a self probe by the schedule, to write its token.
    placed: Vec<usize>,
}

impl StreamFlows {
    pub(crate) fn new(plan: StreamPlan, sh: &Shared) -> io::Result<StreamFlows> {
        // A sender with self probes reads their tokens on the idle
        // direction.
        let interest = match (plan.sends, plan.receives || plan.self_probes.is_some()) {
            (true, true) => epoll::EventFlags::IN | epoll::EventFlags::OUT,
            (true, false) => epoll::EventFlags::OUT,
            _ => epoll::EventFlags::IN,
        };
        let n = sh.range.len();
        let send_buf = pattern(plan.msg_size);
        // Every write boundary is a message boundary as with a blocking
        // sender: a short write is finished before the next message starts.
        let mut senders = Vec::with_capacity(n);
        if plan.sends {
            for _ in sh.range.clone() {
                senders.push(Sender::new(plan.zerocopy, &send_buf, n)?);
            }
        }
        let mut receivers = Vec::with_capacity(n);
        if plan.receives {
            for i in sh.range.clone() {
                receivers.push(Receiver::new(plan.rx, &sh.flows[i])?);
            }
        }
        let file = match plan.zerocopy {
            ZeroCopy::Sendfile | ZeroCopy::Splice if plan.sends => Some(message_file(&send_buf)?),
            _ => None,
        };
        Ok(StreamFlows {
            m: StreamMachine::new(plan.shape(), n, sh.flows.len(), sh.now_ns()),
            interest,
            recv_buf: PageBuf::zeroed(plan.msg_size),
            send_buf,
            file,
            base: sh.range.start,
            burst: if n > 1 { TURN } else { BURST },
            senders,
            receivers,
            parked: vec![false; n],
            placed: Vec::new(),
            plan,
        })
    }

    fn end(&mut self, lp: &mut Loop, i: usize, why: String) {
        self.m.end(i - self.base);
        lp.end_tcp_flow(i, why);
    }

    /// Writes the self probes' tokens flow `i` owes on its idle direction,
    /// until it owes none or the socket has no room (the next event tries
    /// again).
    fn write_tokens(&mut self, lp: &mut Loop, i: usize) {
        let k = i - self.base;
        while let Some(t) = self.m.token_due(k) {
            match (&lp.sh.flows[i]).write(t) {
                Ok(n) => self.m.token_wrote(k, n),
                Err(e) if later(&e) => return,
                Err(e) => return self.end(lp, i, plumb_sys::plain_io(&e)),
            }
        }
    }

    /// Reads what came in on the idle direction of sending flow `i`: self
    /// probes' tokens. Why the flow ended, if it did.
    fn read_tokens(&mut self, lp: &mut Loop, i: usize) -> Option<String> {
        let k = i - self.base;
        let (stream, c) = (&lp.sh.flows[i], &lp.sh.counters[i]);
        let now = clock(&lp.sh);
        let (m, timings) = (&mut self.m, &mut lp.timings);
        let mut buf = [0u8; 1024];
        read_burst(
            BURST,
            || {
                let n = (&*stream).read(&mut buf)?;
                m.tokens_in(k, &buf[..n], c, now, |planned, ns| {
                    timings.record(planned, ns)
                });
                Ok(Some(n))
            },
            |_| true,
        )
    }
}

impl Handler for StreamFlows {
    fn start(&mut self, lp: &mut Loop) -> io::Result<()> {
        let n = lp.sh.range.len();
        // One flow that only sends, by plain copies: a blocking write sleeps
        // in the kernel until the buffer has room, where a non-blocking one
        // comes back with EAGAIN for an epoll_wait and a second write.
        // Zero-copy sends wait for their completions on the error queue,
        // which only epoll tells, and self probes' tokens come in. A
        // receiver stays in epoll: a blocking read waits inside
        // tcp_recvmsg, taking and leaving the socket's lock against the
        // softirq that fills it, which moved the receiver's time into that
        // lock's spin by different amounts run to run. With the ends pinned
        // apart (2 CPUs, one flow of 128K messages, 10 x 5 s alternating)
        // a blocking receiver made no epoll_wait and no EAGAIN read (4900
        // and 3900 in 2 s before) yet moved 0.907 [0.790, 1.041] of the
        // bytes, 0.940 [0.832, 1.063] per busy CPU-second: no gain to take.
        // Nor in ending a read burst at a short read (the queue is empty
        // then, and the wait is level-triggered) instead of at the EAGAIN
        // read after it: a tenth fewer receives a byte, but more sleeps,
        // and 0.927 [0.782, 1.098] of the bytes pinned apart, 1.051 [0.885,
        // 1.249] unpinned (0.934 and 1.044 per busy CPU-second, 10 x 5 s).
        // The sending CPU is the one that is full in either case (profiled
        // beside qperf, whose sender costs the same per byte; its blocking
        // receiver spends about a sixth less a byte: epoll's own calls, the
        // EAGAIN read a wake-up and this loop's code, in that order).
        let sends_only = self.plan.sends && !self.plan.receives && !self.m.probes();
        if n == 1 && sends_only && self.plan.zerocopy == ZeroCopy::None {
            lp.sh.flows[self.base].set_nonblocking(false)?;
            lp.block(self.base as u64, BOUND)?;
        } else {
            lp.watch_range(&lp.sh.flows, self.interest)?;
        }
        lp.live = n;
        Ok(())
    }

    fn on_readable(&mut self, lp: &mut Loop, id: u64, flags: EventFlags) -> io::Result<Next> {
        let i = id as usize;
        let k = i - self.base;
        if !self.plan.receives {
            if self.m.probes() && flags.contains(epoll::EventFlags::IN) {
                if let Some(why) = self.read_tokens(lp, i) {
                    self.end(lp, i, why);
                    return Ok(Next::Done);
                }
                return Ok(Next::Wait);
            }
            // A sender hung up on with nothing to try writing.
            if flags.contains(epoll::EventFlags::HUP)
                && !flags.intersects(epoll::EventFlags::OUT | epoll::EventFlags::ERR)
            {
                self.end(lp, i, "closed by the peer".into());
                return Ok(Next::Done);
            }
            return Ok(Next::Wait);
        }
        let stream = &lp.sh.flows[i];
        let c = &lp.sh.counters[i];
        let receiver = &mut self.receivers[k];
        let now = clock(&lp.sh);
        let (m, buf, timings) = (&mut self.m, &mut self.recv_buf, &mut lp.timings);
        // One closure reads and tells the machine: the bytes it hands on
        // are those the read put in the buffer.
        let end = read_burst(
            self.burst,
            || {
                let room = m.room(k);
                match receiver.receive(stream, c, &mut buf[..], room.clone())? {
                    Step::Moved(n) => {
                        let bytes = receiver.keeps().then(|| &buf[room.start..room.start + n]);
                        m.read(k, n, bytes, c, now, |planned, ns| {
                            timings.record(planned, ns)
                        });
                        Ok(Some(n))
                    }
                    _ => Ok(None),
                }
            },
            |_| true,
        );
        match end {
            Some(why) => {
                self.end(lp, i, why);
                Ok(Next::Done)
            }
            None => {
                self.write_tokens(lp, i);
                Ok(Next::Wait)
            }
        }
    }

    fn on_writable(&mut self, lp: &mut Loop, id: u64, flags: epoll::EventFlags) -> io::Result<()> {
        let i = id as usize;
        let k = i - self.base;
        if self.plan.sends {
            let stream = &lp.sh.flows[i];
            let c = &lp.sh.counters[i];
            if flags.contains(epoll::EventFlags::ERR) {
                if let Some(z) = self.senders[k].zerocopy() {
                    if let Err(e) = z.reap(stream, c) {
                        self.end(lp, i, plumb_sys::plain_io(&e));
                        return Ok(());
                    }
                }
            }
            let mut park = false;
            for _ in 0..self.burst {
                let sent = self.senders[k].send(
                    &mut self.m,
                    k,
                    stream,
                    c,
                    &self.send_buf,
                    self.file.as_ref(),
                );
                match sent {
                    Ok(Step::Moved(n)) => self.m.wrote(k, n, c),
                    Ok(Step::WouldBlock) => break,
                    Ok(Step::Parked) => {
                        park = true;
                        break;
                    }
                    Err(e) if later(&e) => break,
                    Err(e) => {
                        self.end(lp, i, plumb_sys::plain_io(&e));
                        return Ok(());
                    }
                }
            }
            // Parked: completions are due, and EPOLLERR will say when.
            // Otherwise room to write is what the flow waits for.
            if park != self.parked[k] {
                self.parked[k] = park;
                let interest = if park {
                    self.interest - epoll::EventFlags::OUT
                } else {
                    self.interest
                };
                lp.rewatch(stream, id, interest)?;
            }
        }
        if !self.plan.receives && flags.contains(epoll::EventFlags::HUP) {
            self.end(lp, i, "closed by the peer".into());
        }
        Ok(())
    }

    fn on_timer(&mut self, lp: &mut Loop) -> io::Result<Option<u64>> {
        let mut placed = std::mem::take(&mut self.placed);
        let due = self.m.schedule(lp.now_ns(), &mut placed);
        for k in placed.drain(..) {
            if !self.m.ended(k) {
                self.write_tokens(lp, self.base + k);
            }
        }
        self.placed = placed;
        Ok(due.map(|t| t.saturating_sub(lp.now_ns())))
    }

    fn finish(&mut self, lp: &mut Loop) {
        drain_completions(lp, &mut self.senders);
    }
}

/// How long a stopping worker waits for the completions of the zero-copy
/// sends still outstanding; the peer is reading or resetting meanwhile.
const DRAIN: std::time::Duration = std::time::Duration::from_secs(2);

/// Reads the completions of the sends still outstanding so that the counts
/// balance, for at most [`DRAIN`]. What is left is reported as outstanding.
fn drain_completions(lp: &Loop, senders: &mut [Sender]) {
    let deadline = std::time::Instant::now() + DRAIN;
    loop {
        let mut left = 0;
        for (k, s) in senders.iter_mut().enumerate() {
            if let Some(z) = s.zerocopy() {
                let i = lp.sh.range.start + k;
                let c = &lp.sh.counters[i];
                let (n0, c0) = (c.zc_completions.load(Relaxed), c.zc_copied.load(Relaxed));
                if z.outstanding() > 0 && z.reap(&lp.sh.flows[i], c).is_ok() {
                    left += z.outstanding();
                }
                FlowCounters::bump(&c.zc_close_completions, c.zc_completions.load(Relaxed) - n0);
                FlowCounters::bump(&c.zc_close_copied, c.zc_copied.load(Relaxed) - c0);
            }
        }
        if left == 0 || std::time::Instant::now() >= deadline {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
}

/// Bytes of send buffers a MSG_ZEROCOPY flow cycles through: enough to keep
/// an autotuned send buffer full while completions come back...
const POOL_BYTES: usize = 8 << 20;
/// ...and what all the flows of one worker share when they are many.
const WORKER_POOL_BYTES: usize = 64 << 20;
/// The most zero-copy sends one flow keeps outstanding (the size of its
/// send-number to buffer map).
const MAX_OUTSTANDING: usize = 4096;

/// The result of one attempt to move bytes on a flow.
pub(crate) enum Step {
    /// Moved this many bytes; 0 on a receive is the end of the stream.
    Moved(usize),
    /// The socket would block.
    WouldBlock,
    /// MSG_ZEROCOPY: every buffer waits for its completion (or the kernel
    /// refused more outstanding sends); wait for the error queue.
    Parked,
}

/// A worker's in-memory file of one message, the source of sendfile and
/// splice.
pub(crate) fn message_file(pattern: &[u8]) -> io::Result<OwnedFd> {
    let fd = rustix::fs::memfd_create("plumb-stream", rustix::fs::MemfdFlags::CLOEXEC)?;
    let mut f = std::fs::File::from(fd);
    f.write_all(pattern)?;
    Ok(f.into())
}

/// MSG_ZEROCOPY state of one flow.
pub(crate) struct ZcFlow {
    /// `buffers` buffers of `size` bytes each, back to back.
    pool: Vec<u8>,
    size: usize,
    /// Sends not yet completed that reference each buffer.
    refs: Vec<u32>,
    /// Buffers with no send outstanding and not being sent.
    free: Vec<u16>,
    /// The buffer being sent and how far.
    current: Option<(u16, usize)>,
    /// Buffer of each outstanding send, indexed by send number modulo
    /// MAX_OUTSTANDING.
    owner: Vec<u16>,
    /// The number the kernel gives the next successful send.
    next_id: u32,
    outstanding: usize,
}

impl ZcFlow {
    /// A pool for one of `flows` flows of a worker.
    pub(crate) fn new(pattern: &[u8], flows: usize) -> ZcFlow {
        let size = pattern.len().max(1);
        let budget = POOL_BYTES.min(WORKER_POOL_BYTES / flows.max(1));
        let buffers = (budget / size).clamp(2, 256);
        let mut pool = Vec::with_capacity(buffers * size);
        for _ in 0..buffers {
            pool.extend_from_slice(pattern);
        }
        ZcFlow {
            pool,
            size,
            refs: vec![0; buffers],
            free: (0..buffers as u16).rev().collect(),
            current: None,
            owner: vec![0; MAX_OUTSTANDING],
            next_id: 0,
            outstanding: 0,
        }
    }

    pub(crate) fn outstanding(&self) -> usize {
        self.outstanding
    }

    /// Reads every completion waiting in the error queue and releases the
    /// buffers whose sends are all done.
    pub(crate) fn reap(&mut self, stream: &TcpStream, c: &FlowCounters) -> io::Result<()> {
        loop {
            match zc::read_errqueue(stream)? {
                None => return Ok(()),
                Some(ErrQueueEntry::Other { .. }) => continue,
                Some(e @ ErrQueueEntry::ZeroCopy { lo, copied, .. }) => {
                    let n = e.sends();
                    for k in 0..n {
                        let id = lo.wrapping_add(k as u32);
                        let b = self.owner[id as usize % MAX_OUTSTANDING] as usize;
                        self.refs[b] = self.refs[b].saturating_sub(1);
                        if self.refs[b] == 0 && self.current.map(|(cb, _)| cb as usize) != Some(b) {
                            self.free.push(b as u16);
                        }
                    }
                    self.outstanding = self.outstanding.saturating_sub(n as usize);
                    FlowCounters::bump(&c.zc_completions, n);
                    if copied {
                        FlowCounters::bump(&c.zc_copied, n);
                    }
                }
            }
        }
    }

    fn send(&mut self, stream: &TcpStream, c: &FlowCounters) -> io::Result<Step> {
        if self.current.is_none() || self.outstanding >= MAX_OUTSTANDING {
            if self.free.is_empty() || self.outstanding >= MAX_OUTSTANDING {
                self.reap(stream, c)?;
            }
            if self.outstanding >= MAX_OUTSTANDING {
                return Ok(Step::Parked);
            }
            if self.current.is_none() {
                match self.free.pop() {
                    Some(b) => self.current = Some((b, 0)),
                    None => return Ok(Step::Parked),
                }
            }
        }
        let (b, off) = self.current.expect("a buffer was chosen");
        let start = b as usize * self.size;
        let piece = start + off..start + self.size;
        match zc::send_zerocopy(stream, &self.pool[piece.clone()]) {
            Ok(n) => {
                self.owner[self.next_id as usize % MAX_OUTSTANDING] = b;
                self.next_id = self.next_id.wrapping_add(1);
                self.refs[b as usize] += 1;
                self.outstanding += 1;
                FlowCounters::bump(&c.zc_sends, 1);
                self.advance(n);
                Ok(Step::Moved(n))
            }
            Err(e) if e.raw_os_error() == Some(enobufs()) => {
                FlowCounters::bump(&c.zc_enobufs, 1);
                self.reap(stream, c)?;
                if self.outstanding > 0 {
                    return Ok(Step::Parked);
                }
                // Nothing outstanding to wait for: optmem_max is below what
                // even one notification needs. Copy this piece and go on.
                match (&*stream).write(&self.pool[piece]) {
                    Ok(n) => {
                        FlowCounters::bump(&c.zc_fallback, 1);
                        self.advance(n);
                        Ok(Step::Moved(n))
                    }
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(Step::WouldBlock),
                    Err(e) => Err(e),
                }
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(Step::WouldBlock),
            Err(e) => Err(e),
        }
    }

    fn advance(&mut self, n: usize) {
        if let Some((b, off)) = self.current.as_mut() {
            *off += n;
            if *off >= self.size {
                let b = *b as usize;
                self.current = None;
                if self.refs[b] == 0 {
                    self.free.push(b as u16);
                }
            }
        }
    }
}

fn enobufs() -> i32 {
    rustix::io::Errno::NOBUFS.raw_os_error()
}

/// How one flow sends.
pub(crate) enum Sender {
    /// write() of what the machine says is due.
    Copy,
    Zc(Box<ZcFlow>),
    /// sendfile() from the worker's message file at `offset`.
    Sendfile {
        offset: u64,
    },
    /// splice() from the message file (at `offset`) into the flow's pipe,
    /// then from the pipe to the socket.
    Splice {
        offset: u64,
        read: OwnedFd,
        write: OwnedFd,
        in_pipe: usize,
        capacity: usize,
    },
}

impl Sender {
    /// How one of a worker's `flows` flows sends in `mode`.
    pub(crate) fn new(mode: ZeroCopy, pattern: &[u8], flows: usize) -> io::Result<Sender> {
        Ok(match mode {
            ZeroCopy::None => Sender::Copy,
            ZeroCopy::Msg => Sender::Zc(Box::new(ZcFlow::new(pattern, flows))),
            ZeroCopy::Sendfile => Sender::Sendfile { offset: 0 },
            // The spec's validation keeps it on the ring engine.
            ZeroCopy::Uring => {
                return Err(io::Error::new(
                    io::ErrorKind::Unsupported,
                    "uring sends run on the io_uring engine",
                ))
            }
            ZeroCopy::Splice => {
                let (read, write) = zc::pipe()?;
                // A pipe holds at most what its capacity says; a message
                // larger than the capacity goes in several splices.
                let capacity = zc::set_pipe_size(&write, pattern.len().max(4096))
                    .or_else(|_| zc::set_pipe_size(&write, 1 << 20))
                    .unwrap_or(64 * 1024);
                Sender::Splice {
                    offset: 0,
                    read,
                    write,
                    in_pipe: 0,
                    capacity,
                }
            }
        })
    }

    /// One send on `stream`, flow `k` of `m`. `pattern` is the message;
    /// `file` the worker's message file (sendfile and splice). What moved
    /// is the caller's to tell the machine.
    pub(crate) fn send(
        &mut self,
        m: &mut StreamMachine,
        k: usize,
        stream: &TcpStream,
        c: &FlowCounters,
        pattern: &[u8],
        file: Option<&OwnedFd>,
    ) -> io::Result<Step> {
        let len = pattern.len();
        let r = match self {
            Sender::Copy => match m.due(k) {
                Due::Mark(mark) => (&*stream).write(mark),
                Due::Body(part) => (&*stream).write(&pattern[part]),
            }
            .map(Step::Moved),
            Sender::Zc(z) => return z.send(stream, c),
            Sender::Sendfile { offset } => {
                let file = file.expect("sendfile has its message file");
                let want = len - *offset as usize;
                rustix::fs::sendfile(stream, file, Some(offset), want)
                    .map_err(io::Error::from)
                    .map(|n| {
                        if *offset as usize >= len {
                            *offset = 0;
                        }
                        Step::Moved(n)
                    })
            }
            Sender::Splice {
                offset,
                read,
                write,
                in_pipe,
                capacity,
            } => {
                if *in_pipe == 0 {
                    let file = file.expect("splice has its message file");
                    let want = (len - *offset as usize).min(*capacity);
                    match zc::splice(file, Some(offset), &*write, want) {
                        Ok(n) => {
                            *in_pipe = n;
                            if *offset as usize >= len {
                                *offset = 0;
                            }
                        }
                        Err(e) => return Err(e),
                    }
                }
                zc::splice(&*read, None, stream, *in_pipe).map(|n| {
                    *in_pipe -= n;
                    Step::Moved(n)
                })
            }
        };
        match r {
            Ok(s) => Ok(s),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(Step::WouldBlock),
            Err(e) => Err(e),
        }
    }

    pub(crate) fn zerocopy(&mut self) -> Option<&mut ZcFlow> {
        match self {
            Sender::Zc(z) => Some(z),
            _ => None,
        }
    }
}

/// How one flow receives. A copying or discarding receiver takes whole
/// messages, as a reader of fixed-size records does: a read that comes back
/// short is followed by one for the rest of the message (the machine's
/// [`StreamMachine::room`]), never by one that runs on into the next; with
/// a read size below the message, each read takes at most that much of
/// the rest. A reader
/// asking for a whole buffer every time empties the receive queue at each
/// read; on loopback that came with ten times the reordered segments, and
/// the sender's spurious fast retransmits and their undoing cost a single
/// stream a quarter of its rate (BENCHMARKS.md).
pub(crate) enum Receiver {
    Copy,
    Skip,
    /// TCP_ZEROCOPY_RECEIVE into the flow's mapping of its socket; what
    /// the kernel cannot map is read the ordinary way.
    Mapped(plumb_sys::sock::rxzc::ReceiveMap),
}

/// Bytes of socket mapping each TCP_ZEROCOPY_RECEIVE flow has.
const RX_MAP_BYTES: usize = 2 << 20;

impl Receiver {
    pub(crate) fn new(mode: RxMode, stream: &TcpStream) -> io::Result<Receiver> {
        Ok(match mode {
            RxMode::Copy => Receiver::Copy,
            RxMode::Skip => Receiver::Skip,
            RxMode::Zerocopy => Receiver::Mapped(plumb_sys::sock::rxzc::ReceiveMap::new(
                stream,
                RX_MAP_BYTES,
            )?),
        })
    }

    /// Whether what a receive takes is in the buffer to look at.
    pub(crate) fn keeps(&self) -> bool {
        matches!(self, Receiver::Copy)
    }

    /// One receive on `stream` into `room` of `buf`, a message long (or
    /// discarded in the kernel, or mapped).
    pub(crate) fn receive(
        &mut self,
        stream: &TcpStream,
        c: &FlowCounters,
        buf: &mut [u8],
        room: std::ops::Range<usize>,
    ) -> io::Result<Step> {
        let r = match self {
            Receiver::Skip => zc::recv_discard(stream, &mut buf[room]),
            Receiver::Copy => (&*stream).read(&mut buf[room]),
            Receiver::Mapped(map) => match map.receive(stream) {
                Ok((mapped, _)) if mapped > 0 => {
                    FlowCounters::bump(&c.rx_mapped, mapped as u64);
                    Ok(mapped)
                }
                // Unmappable bytes first, or nothing queued: an ordinary
                // read takes them, and tells end of stream from no data.
                Ok((_, skip)) => {
                    let n = if skip > 0 {
                        skip.min(buf.len())
                    } else {
                        buf.len()
                    };
                    let r = (&*stream).read(&mut buf[..n]);
                    if let Ok(k) = r {
                        FlowCounters::bump(&c.rx_copied, k as u64);
                    }
                    r
                }
                Err(e) => Err(e),
            },
        };
        match r {
            Ok(n) => Ok(Step::Moved(n)),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(Step::WouldBlock),
            Err(e) => Err(e),
        }
    }
}

/// A worker's stream flows on a ring: each sending flow keeps
/// [`RING_SENDS`] whole messages queued (plain sends, or with
/// `--zerocopy uring` IORING_OP_SEND_ZC, whose notifications say whether
/// the kernel copied after all; with `--zerocopy msg` sends with
/// MSG_ZEROCOPY, whose notifications are read from the socket's error
/// queue beside the ring once a poll says it has some), each receiving
/// flow a multishot receive.
pub(crate) struct StreamRing {
    m: StreamMachine,
    plan: StreamPlan,
    base: usize,
    zc: bool,
    msg_zc: bool,
    /// MSG_ZEROCOPY: per flow, whether a poll for its error queue is armed.
    polling: Vec<bool>,
    /// sendfile and splice: the message as a file, spliced into each
    /// flow's pipe and from there to its socket.
    piped: Option<Piped>,
    /// Per flow: a self probe's token is being sent.
    token_busy: Vec<bool>,
    /// Where each flow's token slot starts in the send region: past the
    /// message.
    tokens_at: usize,
    /// Flows given a self probe by the schedule, to send its token.
    placed: Vec<usize>,
    /// `--rx zerocopy`: each flow's mapping, and the buffer of what the
    /// kernel cannot map. TCP_ZEROCOPY_RECEIVE has no ring operation: a
    /// poll on the ring says when a flow is readable, and the receives are
    /// made beside it as the epoll engine makes them.
    mapped: Vec<Receiver>,
    recv_buf: PageBuf,
    /// Per flow: sends queued whose completion has not come, and zero-copy
    /// sends completed whose notification has not (their pages pinned).
    queued: Vec<u32>,
    pinned: Vec<u32>,
    /// The most sends a flow has queued or pinned at once.
    most: u32,
}

/// `n` zero-copy notifications came for a flow, `copied` if the kernel
/// copied those sends after all; those that come once the test stops are
/// counted apart as well.
fn notified(lp: &Loop, counters: &FlowCounters, n: u64, copied: bool) {
    let stopping = lp.sh.stop.load(Relaxed);
    for (count, at_close) in [
        (&counters.zc_completions, &counters.zc_close_completions),
        (&counters.zc_copied, &counters.zc_close_copied),
    ]
    .into_iter()
    .take(if copied { 2 } else { 1 })
    {
        FlowCounters::bump(count, n);
        if stopping {
            FlowCounters::bump(at_close, n);
        }
    }
}

/// Messages each sending flow keeps queued on the ring, so that the socket
/// has the next while the last one's completion is read.
const RING_SENDS: u32 = 2;

/// Bytes of each receive buffer for a sender's self-probe tokens.
const TOKEN_BUFFER: usize = 512;

/// Bytes of receive buffers a worker's ring holds at most.
const RING_RECEIVE_BYTES: usize = 16 << 20;

/// sendfile and splice on a ring (IORING_OP_SPLICE; sendfile as a splice
/// through a pipe): a flow's message goes from the worker's message file
/// into the flow's pipe and, linked to that, from the pipe to the socket,
/// one chain at a time; what a short splice left in the pipe goes on
/// before the next message is spliced in.
struct Piped {
    file: OwnedFd,
    /// Per flow: its pipe (read end, write end), the pipe's capacity, the
    /// bytes in it, and where in the message the next splice starts.
    pipes: Vec<(OwnedFd, OwnedFd)>,
    capacity: Vec<usize>,
    in_pipe: Vec<usize>,
    offset: Vec<usize>,
}

impl Piped {
    fn new(msg_size: usize, flows: usize) -> io::Result<Piped> {
        let mut pipes = Vec::with_capacity(flows);
        let mut capacity = Vec::with_capacity(flows);
        for _ in 0..flows {
            let (read, write) = zc::blocking_pipe()?;
            // As the epoll sender's: a message larger than the pipe goes
            // in several splices.
            let cap = zc::set_pipe_size(&write, msg_size.max(4096))
                .or_else(|_| zc::set_pipe_size(&write, 1 << 20))
                .unwrap_or(64 * 1024);
            pipes.push((read, write));
            capacity.push(cap);
        }
        Ok(Piped {
            file: message_file(&pattern(msg_size))?,
            pipes,
            capacity,
            in_pipe: vec![0; flows],
            offset: vec![0; flows],
        })
    }

    /// Queues flow `k`'s next chain on socket `fd`: the rest of its pipe to
    /// the socket, or the next piece of the message into the pipe and on
    /// to the socket. How many operations it queued.
    fn queue(
        &self,
        q: &mut Queue,
        fd: BorrowedFd,
        k: usize,
        i: usize,
        msg: usize,
    ) -> io::Result<u32> {
        let (read, write) = &self.pipes[k];
        if self.in_pipe[k] > 0 {
            q.splice(
                read.as_fd(),
                None,
                fd,
                self.in_pipe[k],
                false,
                ring::tag(i, Op::Send),
            )?;
            return Ok(1);
        }
        let len = (msg - self.offset[k]).min(self.capacity[k]);
        let at = Some(self.offset[k] as u64);
        q.splice(
            self.file.as_fd(),
            at,
            write.as_fd(),
            len,
            true,
            ring::tag(i, Op::Fill),
        )?;
        q.splice(read.as_fd(), None, fd, len, false, ring::tag(i, Op::Send))?;
        Ok(2)
    }
}

impl StreamRing {
    pub(crate) fn new(plan: StreamPlan, sh: &Shared) -> io::Result<StreamRing> {
        let n = sh.range.len();
        let piped = matches!(plan.zerocopy, ZeroCopy::Sendfile | ZeroCopy::Splice) && plan.sends;
        Ok(StreamRing {
            piped: if piped {
                Some(Piped::new(plan.msg_size, n)?)
            } else {
                None
            },
            zc: plan.zerocopy == ZeroCopy::Uring,
            msg_zc: plan.zerocopy == ZeroCopy::Msg && plan.sends,
            polling: vec![false; n],
            base: sh.range.start,
            m: StreamMachine::new(plan.shape(), n, sh.flows.len(), sh.now_ns()),
            token_busy: vec![false; n],
            tokens_at: if plan.sends { plan.msg_size } else { 0 },
            placed: Vec::new(),
            mapped: if plan.receives && plan.rx == RxMode::Zerocopy {
                sh.range
                    .clone()
                    .map(|i| Receiver::new(RxMode::Zerocopy, &sh.flows[i]))
                    .collect::<io::Result<_>>()?
            } else {
                Vec::new()
            },
            recv_buf: PageBuf::zeroed(if plan.receives { plan.msg_size } else { 0 }),
            queued: vec![0; n],
            pinned: vec![0; n],
            // As MSG_ZEROCOPY's pool: enough pinned to keep an autotuned
            // send buffer full while the notifications come back.
            most: (POOL_BYTES / plan.msg_size.max(1)).max(RING_SENDS as usize) as u32,
            plan,
        })
    }

    /// Queues flow `i`'s sends until [`RING_SENDS`] are queued, as far as
    /// the pages pinned by zero-copy sends allow.
    fn top_up(&mut self, lp: &Loop, q: &mut Queue, i: usize) -> io::Result<()> {
        let k = i - self.base;
        let dead = self.m.ended(k);
        if let Some(p) = &self.piped {
            if self.queued[k] == 0 && ring::going(lp, dead) {
                let fd = lp.sh.flows[i].as_fd();
                self.queued[k] += p.queue(q, fd, k, i, self.plan.msg_size)?;
            }
            return Ok(());
        }
        if self.m.probes() {
            // A marked message goes alone, its mark linked to the rest, so
            // that nothing queued beside it can come between; nothing is
            // queued while it is on its way.
            if self.m.mark_next(k) {
                if self.queued[k] == 0 && ring::going(lp, dead) {
                    if let Due::Mark(mark) = self.m.due(k) {
                        let at = self.tokens_at + k * TOKEN;
                        q.send_region(at, TOKEN).copy_from_slice(mark);
                        let fd = lp.sh.flows[i].as_fd();
                        q.send_part(fd, at, TOKEN, true, ring::tag(i, Op::Send))?;
                        let rest = self.plan.msg_size - TOKEN;
                        q.send_part(fd, TOKEN, rest, false, ring::tag(i, Op::Send))?;
                        self.queued[k] += 2;
                    }
                }
                return Ok(());
            }
            if !self.m.at_boundary(k) {
                return Ok(());
            }
        }
        while ring::going(lp, dead)
            && self.queued[k] < RING_SENDS
            && self.queued[k] + self.pinned[k] < self.most
        {
            let fd = lp.sh.flows[i].as_fd();
            let tag = ring::tag(i, Op::Send);
            if self.msg_zc {
                q.send_msg_zerocopy(fd, self.plan.msg_size, tag)?;
            } else {
                q.send(fd, self.plan.msg_size, self.zc, tag)?;
            }
            self.queued[k] += 1;
        }
        Ok(())
    }

    fn end(&mut self, lp: &mut Loop, i: usize, why: String) {
        self.m.end(i - self.base);
        lp.end_tcp_flow(i, why);
    }

    /// Sends the self probes' token flow `i` owes on its idle direction,
    /// one send at a time.
    fn send_token(&mut self, lp: &Loop, q: &mut Queue, i: usize) -> io::Result<()> {
        let k = i - self.base;
        if self.token_busy[k] || !ring::going(lp, self.m.ended(k)) {
            return Ok(());
        }
        if let Some(t) = self.m.token_due(k) {
            let at = self.tokens_at + k * TOKEN;
            q.send_region(at, t.len()).copy_from_slice(t);
            let fd = lp.sh.flows[i].as_fd();
            q.send_part(fd, at, t.len(), false, ring::tag(i, Op::Token))?;
            self.token_busy[k] = true;
        }
        Ok(())
    }

    /// `--rx zerocopy`: flow `k` is readable; takes what is queued, a
    /// burst at most. The sockets block (for the ring's sends), so a read
    /// is made only where the socket has bytes queued, or has none at all
    /// although readable: its end, which the read then reports. Why the
    /// flow ended, if it did.
    fn receive_mapped(&mut self, lp: &mut Loop, k: usize) -> Option<String> {
        let i = self.base + k;
        let (stream, c) = (&lp.sh.flows[i], &lp.sh.counters[i]);
        for n in 0..BURST {
            let queued = plumb_sys::sock::inq(stream).unwrap_or(0);
            if queued == 0 && n > 0 {
                return None;
            }
            let room = 0..self.recv_buf.len();
            match self.mapped[k].receive(stream, c, &mut self.recv_buf, room) {
                Ok(Step::Moved(0)) => return Some("closed by the peer".into()),
                Ok(Step::Moved(got)) => self.m.read(k, got, None, c, || 0, |_, _| {}),
                Ok(_) => return None,
                Err(e) if later(&e) => return None,
                Err(e) => return Some(plumb_sys::plain_io(&e)),
            }
        }
        None
    }

    /// MSG_ZEROCOPY: polls flow `i`'s error queue while notifications are
    /// owed, also once the test stops, until they came or the drain ends.
    fn await_errors(&mut self, lp: &Loop, q: &mut Queue, i: usize) -> io::Result<()> {
        let k = i - self.base;
        if self.pinned[k] > 0 && !self.polling[k] {
            q.poll_errors(lp.sh.flows[i].as_fd(), ring::tag(i, Op::Errors))?;
            self.polling[k] = true;
        }
        Ok(())
    }

    /// Arms flow `i`'s receive: multishot into the buffer ring to copy, one
    /// MSG_TRUNC receive at a time to discard.
    fn arm_receive(&self, lp: &Loop, q: &mut Queue, i: usize) -> io::Result<()> {
        let fd = lp.sh.flows[i].as_fd();
        match self.plan.rx {
            RxMode::Skip if self.plan.receives => q.discard(fd, ring::tag(i, Op::Receive)),
            RxMode::Zerocopy if self.plan.receives => q.poll_in(fd, ring::tag(i, Op::Receive)),
            _ => q.receive(fd, ring::tag(i, Op::Receive)),
        }
    }
}

impl RingFlows for StreamRing {
    fn shape(&self, lp: &Loop) -> Shape {
        let n = lp.sh.range.len();
        let sends = if self.plan.sends { RING_SENDS } else { 0 };
        let tokens = if self.m.probes() { n } else { 0 };
        // A sender with self probes receives their tokens.
        let receive = if self.plan.receives {
            self.plan
                .rx
                .is_copy()
                .then(|| receive_buffers(n, self.plan.ring_buffer(), RING_RECEIVE_BYTES))
        } else {
            (tokens > 0).then(|| receive_buffers(n, TOKEN_BUFFER, TOKEN_BUFFER * 4 * n))
        };
        Shape {
            ops: n as u32 * (sends + 1) + tokens as u32,
            send_len: self.tokens_at + tokens * TOKEN,
            receive,
            discard: (self.plan.receives && self.plan.rx == RxMode::Skip)
                .then(|| self.plan.read_size()),
            ..Shape::default()
        }
    }

    fn start(&mut self, lp: &mut Loop, q: &mut Queue) -> io::Result<()> {
        ring::block_flows(lp)?;
        for i in lp.sh.range.clone() {
            if self.plan.receives || self.m.probes() {
                self.arm_receive(lp, q, i)?;
            }
            if self.plan.sends {
                self.top_up(lp, q, i)?;
            }
        }
        lp.live = lp.sh.range.len();
        Ok(())
    }

    fn complete(&mut self, lp: &mut Loop, q: &mut Queue, done: Done<'_>) -> io::Result<()> {
        let (i, op, c) = (done.flow, done.op, done.c);
        let counters = &lp.sh.counters[i];
        let k = i - self.base;
        let dead = self.m.ended(k);
        match op {
            Op::Send if c.notification => {
                // Counted for a flow that ended too, so that the sends
                // balance.
                self.pinned[k] -= 1;
                notified(lp, counters, 1, c.copied);
                self.top_up(lp, q, i)?;
            }
            Op::Errors => {
                self.polling[k] = false;
                let fd = lp.sh.flows[i].as_fd();
                let mut took = false;
                while let Ok(Some(e)) = zc::read_errqueue(fd) {
                    if let ErrQueueEntry::ZeroCopy { copied, .. } = e {
                        let n = e.sends();
                        self.pinned[k] = self.pinned[k].saturating_sub(n as u32);
                        notified(lp, counters, n, copied);
                    }
                    took = true;
                }
                if !took {
                    // POLLERR with nothing queued: the socket's own error,
                    // which ends the flow (and stops the poll firing).
                    if let Ok(Some(e)) = lp.sh.flows[i].take_error() {
                        if !dead {
                            self.end(lp, i, plumb_sys::plain_io(&e));
                        }
                        return Ok(());
                    }
                }
                self.await_errors(lp, q, i)?;
                self.top_up(lp, q, i)?;
            }
            Op::Fill => {
                self.queued[k] -= 1;
                match c.error() {
                    None => {
                        let p = self.piped.as_mut().expect("a filled pipe");
                        p.in_pipe[k] += c.result as usize;
                        p.offset[k] = (p.offset[k] + c.result as usize) % self.plan.msg_size;
                    }
                    Some(_) if dead || c.cancelled() => {}
                    Some(e) => self.end(lp, i, plumb_sys::plain_io(&e)),
                }
            }
            Op::Send | Op::Copy => {
                self.queued[k] -= 1;
                if let (Some(p), None) = (self.piped.as_mut(), c.error()) {
                    p.in_pipe[k] -= c.result as usize;
                }
                // A SEND_ZC send's notification follows it; a MSG_ZEROCOPY
                // send that moved bytes took one notification number.
                let msg_sent = self.msg_zc && op == Op::Send && c.error().is_none() && c.result > 0;
                if c.more || msg_sent {
                    self.pinned[k] += 1;
                    FlowCounters::bump(&counters.zc_sends, 1);
                }
                if self.msg_zc {
                    self.await_errors(lp, q, i)?;
                }
                match c.error() {
                    // MSG_ZEROCOPY: the error queue holds all the socket's
                    // optmem allows; a send waits for its notifications,
                    // and with none to wait for goes out copied.
                    Some(e) if self.msg_zc && e.raw_os_error() == Some(enobufs()) => {
                        FlowCounters::bump(&counters.zc_enobufs, 1);
                        if self.pinned[k] == 0 && ring::going(lp, dead) {
                            let fd = lp.sh.flows[i].as_fd();
                            q.send(fd, self.plan.msg_size, false, ring::tag(i, Op::Copy))?;
                            self.queued[k] += 1;
                            FlowCounters::bump(&counters.zc_fallback, 1);
                        }
                    }
                    // What a send moved counts, also once its flow has
                    // ended: a send the stop cancels partway reports its
                    // part, which the peer may read.
                    None => {
                        self.m.wrote(k, c.result as usize, counters);
                        self.top_up(lp, q, i)?;
                    }
                    Some(_) if dead || c.cancelled() => {}
                    Some(e) => self.end(lp, i, plumb_sys::plain_io(&e)),
                }
            }
            // Stream flows neither connect nor accept on the ring.
            Op::Connect | Op::Accept => {}
            Op::Token => {
                self.token_busy[k] = false;
                match c.error() {
                    None => {
                        self.m.token_wrote(k, c.result as usize);
                        self.send_token(lp, q, i)?;
                    }
                    Some(_) if dead || c.cancelled() => {}
                    Some(e) => self.end(lp, i, plumb_sys::plain_io(&e)),
                }
            }
            Op::Receive if dead => {}
            Op::Receive if !self.mapped.is_empty() => {
                // Readable: map or read what is queued, then poll again.
                if c.error().is_none() {
                    if let Some(why) = self.receive_mapped(lp, k) {
                        self.end(lp, i, why);
                        return Ok(());
                    }
                }
                if ring::going(lp, false) {
                    self.arm_receive(lp, q, i)?;
                }
            }
            Op::Receive => match c.error() {
                None if c.result == 0 => self.end(lp, i, "closed by the peer".into()),
                Some(e) if !c.out_of_buffers() && !c.cancelled() => {
                    self.end(lp, i, plumb_sys::plain_io(&e))
                }
                got => {
                    if got.is_none() {
                        let n = c.result as usize;
                        let now = clock(&lp.sh);
                        let timings = &mut lp.timings;
                        let timed = |planned, ns| timings.record(planned, ns);
                        if self.plan.receives {
                            let bytes = self.plan.rx.is_copy().then(|| &done.data[..n]);
                            self.m.read(k, n, bytes, counters, now, timed);
                            self.send_token(lp, q, i)?;
                        } else {
                            // A sender's tokens: a download's marks owed.
                            self.m.tokens_in(k, &done.data[..n], counters, now, timed);
                            self.top_up(lp, q, i)?;
                        }
                    }
                    if !c.more && ring::going(lp, false) {
                        self.arm_receive(lp, q, i)?;
                    }
                }
            },
        }
        Ok(())
    }

    fn on_timer(&mut self, lp: &mut Loop, q: &mut Queue) -> io::Result<Option<u64>> {
        let mut placed = std::mem::take(&mut self.placed);
        let due = self.m.schedule(lp.now_ns(), &mut placed);
        for k in placed.drain(..) {
            self.send_token(lp, q, self.base + k)?;
        }
        self.placed = placed;
        Ok(due.map(|t| t.saturating_sub(lp.now_ns())))
    }

    fn owed(&self) -> u64 {
        // A send still queued owes what it moved before the stop cancelled
        // it (and a zero-copy one its notification, as a pinned one does).
        (self.queued.iter().sum::<u32>() + self.pinned.iter().sum::<u32>()) as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::flow::{test_flows, test_shared, Loop};
    use std::net::TcpListener;

    /// A receiving end's machine of one flow: messages of `msg` bytes,
    /// at most `most` a read.
    fn receiving(msg: usize, most: usize) -> StreamMachine {
        let shape = StreamShape {
            client: true,
            sends: false,
            msg_size: msg,
            read_size: most,
            self_probes: None,
        };
        StreamMachine::new(shape, 1, 1, 0)
    }

    /// Drives `receiver` until end of stream; returns the bytes it took.
    fn drain(receiver: &mut Receiver, rx: &TcpStream, c: &FlowCounters) -> u64 {
        let mut buf = vec![0u8; 64 * 1024];
        let mut m = receiving(buf.len(), buf.len());
        let mut total = 0u64;
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        loop {
            assert!(std::time::Instant::now() < deadline, "no end of stream");
            match receiver.receive(rx, c, &mut buf, m.room(0)).unwrap() {
                Step::Moved(0) => return total,
                Step::Moved(n) => {
                    m.read(0, n, None, c, || 0, |_, _| {});
                    total += n as u64
                }
                _ => std::thread::sleep(std::time::Duration::from_micros(200)),
            }
        }
    }

    #[test]
    fn every_receive_mode_takes_exactly_what_was_sent() {
        for mode in [RxMode::Copy, RxMode::Skip, RxMode::Zerocopy] {
            let l = TcpListener::bind("127.0.0.1:0").unwrap();
            let addr = l.local_addr().unwrap();
            let writer = std::thread::spawn(move || {
                let mut tx = TcpStream::connect(addr).unwrap();
                let chunk = vec![9u8; 100_003];
                for _ in 0..30 {
                    tx.write_all(&chunk).unwrap();
                }
            });
            let (rx, _) = l.accept().unwrap();
            rx.set_nonblocking(true).unwrap();
            let c = FlowCounters::default();
            let mut r = Receiver::new(mode, &rx).unwrap();
            let got = drain(&mut r, &rx, &c);
            writer.join().unwrap();
            assert_eq!(got, 30 * 100_003, "{mode}");
            if mode == RxMode::Zerocopy {
                // Loopback pages cannot be mapped: all of it was copied.
                let mapped = c.rx_mapped.load(std::sync::atomic::Ordering::Relaxed);
                let copied = c.rx_copied.load(std::sync::atomic::Ordering::Relaxed);
                assert_eq!((mapped, copied), (0, got));
            }
        }
    }

    /// Flow `rx`'s receiver of `mode`, `most` bytes a read, messages of
    /// 1000 bytes; and a read of it that must move data.
    fn reader(
        mode: RxMode,
        most: usize,
        rx: &TcpStream,
    ) -> (Receiver, impl FnMut(&mut Receiver) -> usize + '_) {
        let c = FlowCounters::default();
        let mut buf = vec![0u8; 1000];
        let mut m = receiving(1000, most);
        let r = Receiver::new(mode, rx).unwrap();
        let read = move |r: &mut Receiver| match r.receive(rx, &c, &mut buf, m.room(0)).unwrap() {
            Step::Moved(n) => {
                m.read(0, n, None, &c, || 0, |_, _| {});
                n
            }
            _ => panic!("{mode}: nothing read"),
        };
        (r, read)
    }

    /// A connection over loopback: its sending and its receiving end.
    fn connected() -> (TcpStream, TcpStream) {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let tx = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        (tx, l.accept().unwrap().0)
    }

    /// Waits until `n` bytes are queued on `rx`, so that a read could take
    /// them all.
    fn queued(rx: &TcpStream, n: usize) {
        let mut peek = vec![0u8; 4000];
        while rx.peek(&mut peek).unwrap() < n {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
    }

    #[test]
    fn a_short_read_is_followed_by_one_for_the_rest_of_the_message() {
        for mode in [RxMode::Copy, RxMode::Skip] {
            let (mut tx, rx) = connected();
            let (mut r, mut read) = reader(mode, 1000, &rx);
            tx.write_all(&[1u8; 600]).unwrap();
            queued(&rx, 600);
            assert_eq!(read(&mut r), 600, "{mode}");
            tx.write_all(&[2u8; 2500]).unwrap();
            queued(&rx, 2500);
            assert_eq!(read(&mut r), 400, "{mode}: the rest of the first message");
            assert_eq!(read(&mut r), 1000, "{mode}: a whole message");
            assert_eq!(read(&mut r), 1000, "{mode}: a whole message");
            assert_eq!(read(&mut r), 100, "{mode}: what is queued");
        }
    }

    #[test]
    fn a_read_size_below_the_message_cuts_each_read_and_keeps_the_boundaries() {
        for mode in [RxMode::Copy, RxMode::Skip] {
            let (mut tx, rx) = connected();
            let (mut r, mut read) = reader(mode, 300, &rx);
            tx.write_all(&[3u8; 2500]).unwrap();
            queued(&rx, 2500);
            let reads: Vec<usize> = (0..9).map(|_| read(&mut r)).collect();
            // 300 at a time, and a message's last 100 bytes on their own.
            assert_eq!(
                reads,
                [300, 300, 300, 100, 300, 300, 300, 100, 300],
                "{mode}"
            );
        }
    }

    #[test]
    fn send_modes_keep_message_boundaries() {
        // Each mode writes the pattern over and over; the receiver sees the
        // same bytes at the same offsets whatever the mode.
        let pattern: Vec<u8> = (0..10_007).map(|i| (i % 251) as u8).collect();
        for mode in [
            ZeroCopy::None,
            ZeroCopy::Msg,
            ZeroCopy::Sendfile,
            ZeroCopy::Splice,
        ] {
            let l = TcpListener::bind("127.0.0.1:0").unwrap();
            let tx = TcpStream::connect(l.local_addr().unwrap()).unwrap();
            let (mut rx, _) = l.accept().unwrap();
            tx.set_nonblocking(true).unwrap();
            if mode == ZeroCopy::Msg {
                zc::set_zerocopy(&tx).unwrap();
            }
            let file = message_file(&pattern).unwrap();
            let c = FlowCounters::default();
            let mut s = Sender::new(mode, &pattern, 1).unwrap();
            let mut m = StreamMachine::new(
                StreamShape {
                    client: true,
                    sends: true,
                    msg_size: pattern.len(),
                    read_size: pattern.len(),
                    self_probes: None,
                },
                1,
                1,
                0,
            );
            let want = pattern.len() * 7 + 123;
            let reader = std::thread::spawn(move || {
                let mut got = vec![0u8; want];
                rx.read_exact(&mut got).unwrap();
                got
            });
            let mut sent = 0;
            while sent < want {
                match s.send(&mut m, 0, &tx, &c, &pattern, Some(&file)).unwrap() {
                    Step::Moved(n) => {
                        m.wrote(0, n, &c);
                        sent += n
                    }
                    _ => std::thread::sleep(std::time::Duration::from_micros(200)),
                }
            }
            let got = reader.join().unwrap();
            for (i, b) in got.iter().enumerate() {
                assert_eq!(*b, pattern[i % pattern.len()], "{mode} byte {i}");
            }
        }
    }

    #[test]
    fn many_flows_take_turns_a_message_each_and_a_lone_flow_writes_a_burst() {
        for flows in [1usize, 3] {
            let (clients, servers) = test_flows(flows);
            let plan = StreamPlan {
                client: true,
                sends: true,
                receives: false,
                msg_size: 256,
                zerocopy: ZeroCopy::None,
                rx: RxMode::Copy,
                read_size: Some(256),
                self_probes: None,
            };
            let sh = test_shared(clients, Vec::new(), flows, false);
            let mut h = StreamFlows::new(plan, &sh).unwrap();
            let mut lp = Loop::new(sh).unwrap();
            // The flow is writable once: what arrives at the other end is
            // what one turn wrote, read back from the kernel's queue there.
            h.on_writable(&mut lp, 0, epoll::EventFlags::OUT).unwrap();
            let want = if flows == 1 { BURST * 256 } else { TURN * 256 };
            let t = std::time::Instant::now();
            let queued = || plumb_sys::sock::inq(&servers[0]).unwrap() as usize;
            while queued() < want && t.elapsed() < std::time::Duration::from_secs(2) {
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
            assert_eq!(queued(), want, "{flows} flows");
            assert_eq!(lp.sh.counters[0].sent.load(Relaxed), want as u64);
        }
    }
}
