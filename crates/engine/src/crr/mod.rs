//! Connect-request-response-close (netperf TCP_CRR): every transaction is a
//! new TCP connection. The client keeps `slots` connections in progress, each
//! cycling connect, request, response, close; the server accepts on a
//! listener all its workers share (EPOLLEXCLUSIVE, so one wakes per
//! connection) and answers each connection once.
//!
//! Closing with RST (SO_LINGER 0, as neper does) leaves no TIME_WAIT behind;
//! closing with FIN is what applications do and costs a TIME_WAIT socket per
//! transaction on the side that closes first: the client with `fin`, which
//! is how a machine runs out of local ports, and the server with
//! `server-fin` (netperf's TCP_CRR, an HTTP/1.0 server), where neither end
//! sleeps until the other's close. The outcomes are reported by name.

mod machine;

use machine::{CrrMachine, Exchange, Next as Step};

use crate::flow::{clock, later, pattern, FlowError, Handler, Loop, Next, PageBuf, Shared, BOUND};
use crate::plan::{on_engine, Conduct, Plan};
use crate::ring::{self, receive_buffers, Done, Op, RingFlows, Shape};
use crate::setup::{apply_before_connect, apply_connected, bind_source};
use plumb_spec::{Close, Io, SocketOpts};
use plumb_sys::plain_io;
use plumb_sys::uring::{Completion, Queue};
use rustix::event::epoll::{self, EventFlags};
use socket2::{Domain, Protocol, Socket, Type};
use std::io::{self, Read, Write};
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsFd;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;

use crate::schedule::Schedule;

#[derive(Debug, Clone)]
pub struct CrrPlan {
    pub client: bool,
    /// Connections kept in progress by the client (its --flows).
    pub slots: usize,
    /// The writes an outgoing message is made of, and the size of an
    /// incoming one.
    pub out_writes: Vec<usize>,
    pub in_size: usize,
    /// How each connection ends.
    pub close: Close,
    /// Where the client connects.
    pub peer: Option<SocketAddr>,
    /// Server: the only address connections are served from (the client's,
    /// as its authenticated control connection came in). A crr connection
    /// carries no cookie, since announcing each one would add a message to
    /// every transaction; others are closed unread and counted as strays.
    pub accept_from: Option<IpAddr>,
    pub opts: SocketOpts,
    /// Client, open loop: transactions a second over every slot, each on a
    /// connection opened at its planned time and timed from it (connect
    /// included), in a slot whose last exchange is over.
    pub rate: Option<f64>,
}

impl Plan for CrrPlan {
    fn for_spec(spec: &plumb_spec::Spec, server: bool, link: &crate::Link) -> CrrPlan {
        let r = crate::rr::sizes(spec);
        let (out_writes, in_size) = crate::rr::messages(r, server);
        CrrPlan {
            client: !server,
            slots: spec.flows as usize,
            out_writes,
            in_size,
            close: r.close.unwrap_or(Close::Rst),
            peer: (!server).then_some(link.peer),
            accept_from: server.then(|| link.peer.ip()),
            opts: spec.socket.clone(),
            rate: r.rate.filter(|_| !server).map(|x| x as f64),
        }
    }

    fn conduct(&self) -> Conduct {
        Conduct::transactions(self.client, self.rate)
    }

    fn run(self, sh: Shared, io: Io) -> io::Result<Vec<FlowError>> {
        if self.client {
            let new = |plan, sh: &Shared| Ok(CrrClient::new(plan, sh));
            on_engine(self, sh, io, new, new)
        } else {
            let new = |plan, sh: &Shared| Ok(CrrServer::new(plan, sh));
            on_engine(self, sh, io, new, new)
        }
    }
}

/// Whether a crr server serves a connection from `from`. A loopback client
/// spreads its connections over 127.0.0.x sources, all of them this host.
fn accepts(client: Option<IpAddr>, from: IpAddr) -> bool {
    let (from, client) = match client {
        None => return true,
        Some(c) => (from.to_canonical(), c.to_canonical()),
    };
    from == client || (client.is_loopback() && from.is_loopback())
}

const LISTENER: u64 = u64::MAX - 1;

/// Why a connection could not be made, in the words a user acts on.
fn connect_error(e: &io::Error) -> String {
    match e.raw_os_error() {
        Some(99) | Some(98) => format!(
            "{}: out of local ports (net.ipv4.ip_local_port_range, TIME_WAIT sockets); --close rst or server-fin keeps TIME_WAIT off the client",
            plain_io(e)
        ),
        Some(23) | Some(24) => format!("{}: out of file descriptors (ulimit -n)", plain_io(e)),
        _ => plain_io(e),
    }
}

struct Conn {
    stream: TcpStream,
    connecting: bool,
    x: Exchange,
    armed_out: bool,
}

impl Conn {
    /// A connection at the start of its exchange: connecting (client) or
    /// accepted (server).
    fn new(stream: TcpStream, connecting: bool, x: Exchange) -> Conn {
        Conn {
            stream,
            connecting,
            x,
            armed_out: connecting,
        }
    }
}

/// Arms EPOLLOUT on a connection whose write would block, disarms it once
/// the write went through (nothing to arm where the worker blocks).
fn arm(lp: &Loop, conn: &mut Conn, id: u64, blocked: bool) -> io::Result<()> {
    if lp.blocking.is_none() && blocked != conn.armed_out {
        let fl = if blocked {
            epoll::EventFlags::IN | epoll::EventFlags::OUT
        } else {
            epoll::EventFlags::IN
        };
        lp.rewatch(&conn.stream, id, fl)?;
        conn.armed_out = blocked;
    }
    Ok(())
}

/// Buffers of one end's worker: the pattern it writes, room to read into.
struct Bufs {
    send: PageBuf,
    recv: Vec<u8>,
}

impl Bufs {
    fn new(m: &CrrMachine) -> Bufs {
        let (largest, in_size) = m.sizes();
        Bufs {
            send: pattern(largest),
            recv: vec![0u8; in_size.clamp(4096, 256 * 1024)],
        }
    }
}

/// Moves connection `id` on as far as its socket allows on an epoll
/// event (`readable` when the event says so): the machine's next step once
/// the exchange is over (close or fail), None while it waits. A read after
/// a write waits for the socket's next readiness where the machine says
/// so (a server's wait for the client's close).
fn drive(
    m: &CrrMachine,
    lp: &mut Loop,
    conn: &mut Conn,
    id: u64,
    counter: usize,
    bufs: &mut Bufs,
    mut readable: bool,
) -> io::Result<Option<Step>> {
    let now = clock(&lp.sh);
    // An event is the readiness an awaited read waits for.
    let mut next = match m.next(&conn.x) {
        Step::Await => Step::Read,
        next => next,
    };
    loop {
        next = match next {
            Step::Write(len) => match (&conn.stream).write(&bufs.send[..len]) {
                Ok(n) => m.wrote(&mut conn.x, n, &lp.sh.counters[counter]),
                Err(e) if later(&e) => {
                    arm(lp, conn, id, true)?;
                    return Ok(None);
                }
                Err(e) => m.failed(|| plain_io(&e)),
            },
            Step::Read if readable => match (&conn.stream).read(&mut bufs.recv) {
                Ok(0) => m.closed(&conn.x),
                Ok(got) => {
                    let (c, timings) = (&lp.sh.counters[counter], &mut lp.timings);
                    m.read(&mut conn.x, got, c, now, |planned, ns| {
                        timings.record(planned, ns)
                    })
                }
                Err(e) if later(&e) => {
                    readable = false;
                    Step::Read
                }
                Err(e) => m.failed(|| plain_io(&e)),
            },
            Step::Read | Step::Await => {
                arm(lp, conn, id, false)?;
                return Ok(None);
            }
            done @ (Step::Close | Step::Fail(_)) => return Ok(Some(done)),
        };
    }
}

/// The client's connection slots of one worker. A connection's state
/// machine (connect, write the request, read the response) takes any
/// readiness the same way: one step per event.
pub(crate) struct CrrClient {
    plan: CrrPlan,
    m: CrrMachine,
    peer: SocketAddr,
    sources: Vec<IpAddr>,
    base: usize,
    bufs: Bufs,
    conns: Vec<Option<Conn>>,
    /// One slot on epoll: its connections block, with timeouts, instead of
    /// waiting in epoll (see [`Loop::blocking`]).
    blocking: bool,
    /// Open loop: the schedule, the slots that failed (an idle slot has no
    /// connection either), and the slots placed a transaction, with its
    /// planned time.
    schedule: Option<Schedule>,
    failed: Vec<bool>,
    placed: Vec<(usize, u64)>,
}

impl CrrClient {
    pub(crate) fn new(plan: CrrPlan, sh: &Shared) -> CrrClient {
        let peer = plan.peer.expect("the client knows where to connect");
        let m = CrrMachine::new(&plan);
        let n = sh.range.len();
        let now = sh.now_ns();
        CrrClient {
            schedule: plan.rate.map(|r| Schedule::new(r, n, plan.slots, now)),
            failed: vec![false; n],
            placed: Vec::new(),
            peer,
            sources: crate::setup::sources_for(peer, plan.slots as u32, true),
            base: sh.range.start,
            bufs: Bufs::new(&m),
            m,
            conns: (0..n).map(|_| None).collect(),
            blocking: false,
            plan,
        }
    }

    /// A socket for slot `k`'s next connection, with the spec's options,
    /// bound to the slot's source address.
    fn socket(&self, k: usize, nonblocking: bool) -> io::Result<Socket> {
        let ty = if nonblocking {
            Type::STREAM.nonblocking()
        } else {
            Type::STREAM
        };
        let sock = Socket::new(
            Domain::for_address(self.peer),
            ty.cloexec(),
            Some(Protocol::TCP),
        )?;
        let _ = apply_before_connect(&sock, &self.plan.opts);
        bind_source(&sock, &self.sources, self.base + k)?;
        if self.plan.close == Close::Rst {
            sock.set_linger(Some(std::time::Duration::ZERO))?;
        }
        if self.plan.opts.nodelay {
            sock.set_tcp_nodelay(true)?;
        }
        Ok(sock)
    }

    /// Starts slot `k`'s next connection, its transaction timed from
    /// `planned` (an open loop's) or from now.
    fn open(&self, lp: &Loop, k: usize, planned: Option<u64>) -> io::Result<Conn> {
        let sock = self.socket(k, !self.blocking)?;
        let t0 = planned.unwrap_or_else(|| lp.now_ns());
        let connected = match sock.connect(&self.peer.into()) {
            Ok(()) => true,
            // EINPROGRESS, or EINTR: a blocking connect cut short by the
            // worker's interrupter goes on in the kernel all the same.
            Err(e) if matches!(e.raw_os_error(), Some(115) | Some(4)) => false,
            Err(e) => return Err(e),
        };
        let stream: TcpStream = sock.into();
        if self.blocking {
            if connected {
                let _ = apply_connected(&stream, &self.plan.opts);
            }
            return Ok(Conn::new(stream, !connected, self.m.begin(t0)));
        }
        lp.watch(
            &stream,
            (self.base + k) as u64,
            epoll::EventFlags::OUT | epoll::EventFlags::IN,
        )?;
        Ok(Conn::new(stream, true, self.m.begin(t0)))
    }

    fn open_or_fail(&mut self, lp: &mut Loop, k: usize, planned: Option<u64>) {
        match self.open(lp, k, planned) {
            Ok(c) => self.conns[k] = Some(c),
            Err(e) => self.fail(lp, k, connect_error(&e)),
        }
    }

    fn fail(&mut self, lp: &mut Loop, k: usize, why: String) {
        self.conns[k] = None;
        self.failed[k] = true;
        lp.flow_failed(self.base + k, why);
    }

    /// Open loop: places the transactions due by now in the idle slots, in
    /// turn, into `placed`. The nanoseconds until the next is due; None in
    /// a closed loop and while every slot is busy.
    fn schedule(&mut self, lp: &Loop) -> Option<u64> {
        let (conns, failed, placed) = (&self.conns, &self.failed, &mut self.placed);
        let now = lp.now_ns();
        let due = self.schedule.as_mut()?.run(now, |k, planned| {
            let idle = conns[k].is_none() && !failed[k] && !placed.iter().any(|p| p.0 == k);
            if idle {
                placed.push((k, planned));
            }
            idle
        });
        due.map(|t| t.saturating_sub(now))
    }

    /// Moves slot `k`'s connection on as far as the socket allows; opens
    /// the slot's next once its exchange is over.
    fn step(&mut self, lp: &mut Loop, id: u64, flags: epoll::EventFlags) -> io::Result<()> {
        let i = id as usize;
        let k = i - self.base;
        let Some(conn) = self.conns[k].as_mut() else {
            return Ok(());
        };
        if conn.connecting {
            if let Some(e) = conn.stream.take_error()? {
                self.fail(lp, k, connect_error(&e));
                return Ok(());
            }
            if !flags.intersects(epoll::EventFlags::OUT) {
                return Ok(());
            }
            conn.connecting = false;
            let _ = apply_connected(&conn.stream, &self.plan.opts);
        }
        let readable = flags
            .intersects(epoll::EventFlags::IN | epoll::EventFlags::HUP | epoll::EventFlags::ERR);
        match drive(&self.m, lp, conn, id, i, &mut self.bufs, readable)? {
            Some(Step::Fail(why)) => self.fail(lp, k, why),
            Some(_) => self.reopen(lp, k),
            None => {}
        }
        Ok(())
    }

    /// Closes slot `k`'s connection, its transaction done, and opens the
    /// next (an open loop's slot waits for the schedule): dropping the
    /// stream closes it, with RST where linger is 0.
    fn reopen(&mut self, lp: &mut Loop, k: usize) {
        self.conns[k] = None;
        if self.schedule.is_none() {
            self.open_or_fail(lp, k, None);
        }
    }
}

impl Handler for CrrClient {
    fn start(&mut self, lp: &mut Loop) -> io::Result<()> {
        if self.conns.len() == 1 && self.schedule.is_none() {
            self.blocking = true;
            // Each connection's socket is made blocking as it opens.
            lp.block(self.base as u64, BOUND)?;
        }
        lp.live = self.conns.len();
        if self.schedule.is_none() {
            for k in 0..self.conns.len() {
                self.open_or_fail(lp, k, None);
            }
        }
        Ok(())
    }

    fn on_timer(&mut self, lp: &mut Loop) -> io::Result<Option<u64>> {
        let next = self.schedule(lp);
        // Taken and put back, so that its room is kept.
        let mut placed = std::mem::take(&mut self.placed);
        for (k, planned) in placed.drain(..) {
            self.open_or_fail(lp, k, Some(planned));
        }
        self.placed = placed;
        Ok(next)
    }

    fn on_readable(&mut self, lp: &mut Loop, id: u64, flags: EventFlags) -> io::Result<Next> {
        self.step(lp, id, flags)?;
        Ok(Next::Done)
    }

    fn on_writable(&mut self, lp: &mut Loop, id: u64, flags: epoll::EventFlags) -> io::Result<()> {
        self.step(lp, id, flags)
    }
}

/// The server side of one worker: the shared listener, and the connections
/// it accepted, in slots that are reused as connections close.
pub(crate) struct CrrServer {
    plan: CrrPlan,
    m: CrrMachine,
    listener: Arc<TcpListener>,
    bufs: Bufs,
    conns: Vec<Option<Conn>>,
    free: Vec<usize>,
    /// A client of one slot on epoll: one connection at a time, accepted,
    /// read and written with blocking calls (see [`Loop::blocking`]).
    blocking: bool,
    /// Totals go to this worker's first counter: per-connection counters
    /// would mean nothing when connections last one transaction.
    counter: usize,
}

impl CrrServer {
    pub(crate) fn new(plan: CrrPlan, sh: &Shared) -> CrrServer {
        let m = CrrMachine::new(&plan);
        CrrServer {
            listener: sh.listener.clone().expect("the crr server has a listener"),
            bufs: Bufs::new(&m),
            m,
            conns: Vec::new(),
            free: Vec::new(),
            blocking: false,
            counter: sh.range.start,
            plan,
        }
    }

    fn accept(&mut self, lp: &mut Loop) -> io::Result<()> {
        use rustix::net::{acceptfrom_with, SocketFlags};
        // A blocking connection is accepted blocking, as the listener is.
        let flags = match self.blocking {
            true => SocketFlags::CLOEXEC,
            false => SocketFlags::CLOEXEC | SocketFlags::NONBLOCK,
        };
        for _ in 0..if self.blocking { 1 } else { 64 } {
            match acceptfrom_with(&*self.listener, flags).map_err(io::Error::from) {
                Ok((fd, from)) => {
                    let from = from.and_then(|a| SocketAddr::try_from(a).ok());
                    let Some(from) = from else {
                        continue;
                    };
                    if let Some(slot) = self.admit(lp, TcpStream::from(fd), from) {
                        let conn = self.conns[slot].as_ref().expect("admitted");
                        if !self.blocking {
                            lp.watch(&conn.stream, slot as u64, epoll::EventFlags::IN)?;
                        }
                    }
                }
                Err(e) if later(&e) => break,
                Err(e) if matches!(e.raw_os_error(), Some(23) | Some(24)) => {
                    self.out_of_files(lp, &e);
                    break;
                }
                // A connection reset before it was accepted.
                Err(_) => break,
            }
        }
        Ok(())
    }

    /// Takes a connection from `from` into a free slot, or closes it
    /// unread and counts it as a stray.
    fn admit(&mut self, lp: &Loop, stream: TcpStream, from: SocketAddr) -> Option<usize> {
        if !accepts(self.plan.accept_from, from.ip()) {
            lp.sh.strays.fetch_add(1, Relaxed);
            return None;
        }
        if self.plan.opts.nodelay {
            let _ = stream.set_nodelay(true);
        }
        let slot = self.free.pop().unwrap_or_else(|| {
            self.conns.push(None);
            self.conns.len() - 1
        });
        self.conns[slot] = Some(Conn::new(stream, false, self.m.begin(0)));
        Some(slot)
    }

    /// The process is out of descriptors: said once.
    fn out_of_files(&self, lp: &mut Loop, e: &io::Error) {
        if lp.errors.is_empty() {
            lp.errors.push(FlowError {
                flow: self.counter as u32,
                error: connect_error(e),
                after_window: lp.sh.window_closed.load(Relaxed),
            });
        }
    }

    /// A connection the ring accepted: its request is read next.
    fn accepted(&mut self, lp: &Loop, q: &mut Queue, stream: TcpStream) -> io::Result<()> {
        let Ok(from) = stream.peer_addr() else {
            // Reset before it could be looked at.
            return Ok(());
        };
        if let Some(slot) = self.admit(lp, stream, from) {
            let conn = self.conns[slot].as_ref().expect("admitted");
            q.receive_once(conn.stream.as_fd(), ring::tag(slot, Op::Receive))?;
        }
        Ok(())
    }

    /// Reads the request on connection `slot`, answers it once whole, and
    /// closes the connection as the close order has it.
    fn serve(&mut self, lp: &mut Loop, slot: usize) -> io::Result<()> {
        let Some(conn) = self.conns.get_mut(slot).and_then(|c| c.as_mut()) else {
            return Ok(());
        };
        if drive(
            &self.m,
            lp,
            conn,
            slot as u64,
            self.counter,
            &mut self.bufs,
            true,
        )?
        .is_some()
        {
            self.close(slot);
        }
        Ok(())
    }

    fn close(&mut self, slot: usize) {
        self.conns[slot] = None;
        self.free.push(slot);
    }
}

impl Handler for CrrServer {
    fn start(&mut self, lp: &mut Loop) -> io::Result<()> {
        if self.plan.slots == 1 {
            self.blocking = true;
            self.listener.set_nonblocking(false)?;
            lp.block(LISTENER, BOUND)?;
        } else {
            lp.watch(
                &*self.listener,
                LISTENER,
                epoll::EventFlags::IN | epoll::EventFlags::EXCLUSIVE,
            )?;
        }
        // The server runs until stopped, whatever its connections do.
        lp.live = 1;
        Ok(())
    }

    fn on_readable(&mut self, lp: &mut Loop, id: u64, _: epoll::EventFlags) -> io::Result<Next> {
        if self.blocking {
            // One connection at a time: the next waits in the backlog.
            if self.conns.first().is_none_or(|c| c.is_none()) {
                self.accept(lp)?;
            }
            self.serve(lp, 0)?;
        } else if id == LISTENER {
            self.accept(lp)?;
        } else {
            self.serve(lp, id as usize)?;
        }
        Ok(Next::Done)
    }

    fn on_writable(&mut self, lp: &mut Loop, id: u64, _: epoll::EventFlags) -> io::Result<()> {
        self.serve(lp, id as usize)
    }
}

/// Bytes of receive buffers a crr worker's ring holds at most.
const RING_RECEIVE_BYTES: usize = 8 << 20;

/// The ring's shape for `slots` connections, each with one operation in
/// flight at a time.
fn ring_shape(slots: usize, out_writes: &[usize], in_size: usize) -> Shape {
    Shape {
        ops: 2 * slots as u32 + 2,
        send_len: crate::flow::longest(out_writes),
        receive: Some(receive_buffers(
            slots,
            ring::fitted(in_size.next_power_of_two()),
            RING_RECEIVE_BYTES,
        )),
        ..Shape::default()
    }
}

/// Queues what connection `id` does next on the ring: its write due or a
/// single receive. The step once its exchange is over (close or fail).
fn queue(q: &mut Queue, conn: &Conn, next: Step, id: usize) -> io::Result<Option<Step>> {
    match next {
        Step::Write(len) => q.send(conn.stream.as_fd(), len, false, ring::tag(id, Op::Send))?,
        Step::Read | Step::Await => {
            q.receive_once(conn.stream.as_fd(), ring::tag(id, Op::Receive))?
        }
        done @ (Step::Close | Step::Fail(_)) => return Ok(Some(done)),
    }
    Ok(None)
}

/// What a completion on connection `conn` moves its exchange to: the
/// machine's next step; None for completions the exchange takes no part
/// in. Connect and accept are the drivers'.
fn completed(
    m: &CrrMachine,
    lp: &mut Loop,
    conn: &mut Conn,
    counter: usize,
    op: Op,
    c: &Completion,
) -> Option<Step> {
    let now = clock(&lp.sh);
    let (counters, timings) = (&lp.sh.counters[counter], &mut lp.timings);
    Some(match (op, c.error()) {
        (Op::Receive, Some(_)) if c.out_of_buffers() => Step::Read,
        (_, Some(e)) => m.failed(|| plain_io(&e)),
        (Op::Send, None) => m.wrote(&mut conn.x, c.result as usize, counters),
        (Op::Receive, None) if c.result == 0 => m.closed(&conn.x),
        (Op::Receive, None) => m.read(
            &mut conn.x,
            c.result as usize,
            counters,
            now,
            |planned, ns| timings.record(planned, ns),
        ),
        (Op::Connect | Op::Accept | Op::Fill | Op::Errors | Op::Copy | Op::Token, None) => {
            return None
        }
    })
}

/// On a ring each connection takes one step at a time: connect, the
/// request's writes, single receives until the response is whole (a
/// multishot receive still armed would keep the socket from closing).
impl RingFlows for CrrClient {
    fn shape(&self, _: &Loop) -> Shape {
        Shape {
            peer: Some(self.peer),
            ..ring_shape(self.conns.len(), &self.plan.out_writes, self.plan.in_size)
        }
    }

    fn start(&mut self, lp: &mut Loop, q: &mut Queue) -> io::Result<()> {
        lp.live = self.conns.len();
        if self.schedule.is_none() {
            for k in 0..self.conns.len() {
                self.open_on_ring(lp, q, k, None)?;
            }
        }
        Ok(())
    }

    fn on_timer(&mut self, lp: &mut Loop, q: &mut Queue) -> io::Result<Option<u64>> {
        let next = self.schedule(lp);
        let mut placed = std::mem::take(&mut self.placed);
        for (k, planned) in placed.drain(..) {
            self.open_on_ring(lp, q, k, Some(planned))?;
        }
        self.placed = placed;
        Ok(next)
    }

    fn complete(&mut self, lp: &mut Loop, q: &mut Queue, done: Done<'_>) -> io::Result<()> {
        let (i, op, c) = (done.flow, done.op, done.c);
        let k = i - self.base;
        let going = ring::going(lp, false);
        let Some(conn) = self.conns[k].as_mut().filter(|_| going) else {
            return Ok(());
        };
        let next = match (op, c.error()) {
            (Op::Connect, Some(e)) => Step::Fail(connect_error(&e)),
            (Op::Connect, None) => {
                conn.connecting = false;
                let _ = apply_connected(&conn.stream, &self.plan.opts);
                self.m.next(&conn.x)
            }
            _ => match completed(&self.m, lp, conn, i, op, &c) {
                Some(next) => next,
                None => return Ok(()),
            },
        };
        match queue(q, conn, next, i)? {
            Some(Step::Fail(why)) => self.fail(lp, k, why),
            // Dropping the stream closes it: RST with linger 0, else FIN.
            Some(_) => {
                self.conns[k] = None;
                if self.schedule.is_none() {
                    self.open_on_ring(lp, q, k, None)?;
                }
            }
            None => {}
        }
        Ok(())
    }
}

impl CrrClient {
    /// Starts slot `k`'s next connection with a connect on the ring, its
    /// transaction timed from `planned` (an open loop's) or from now.
    fn open_on_ring(
        &mut self,
        lp: &mut Loop,
        q: &mut Queue,
        k: usize,
        planned: Option<u64>,
    ) -> io::Result<()> {
        let i = self.base + k;
        match self.socket(k, false) {
            Ok(sock) => {
                q.connect(sock.as_fd(), ring::tag(i, Op::Connect))?;
                let t0 = planned.unwrap_or_else(|| lp.now_ns());
                self.conns[k] = Some(Conn::new(sock.into(), true, self.m.begin(t0)));
            }
            Err(e) => self.fail(lp, k, connect_error(&e)),
        }
        Ok(())
    }
}

/// On a ring the server accepts with a multishot accept on the listener
/// all its workers share, reads each request with single receives and
/// waits for the client's close with one more (or, with `server-fin`,
/// closes once its response is sent).
impl RingFlows for CrrServer {
    fn shape(&self, _: &Loop) -> Shape {
        ring_shape(self.plan.slots, &self.plan.out_writes, self.plan.in_size)
    }

    fn start(&mut self, lp: &mut Loop, q: &mut Queue) -> io::Result<()> {
        self.listener.set_nonblocking(false)?;
        q.accept(self.listener.as_fd(), ring::tag(0, Op::Accept))?;
        // The server runs until stopped, whatever its connections do.
        lp.live = 1;
        Ok(())
    }

    fn complete(&mut self, lp: &mut Loop, q: &mut Queue, done: Done<'_>) -> io::Result<()> {
        let (slot, op, mut c) = (done.flow, done.op, done.c);
        let going = ring::going(lp, false);
        if op == Op::Accept {
            match (c.accepted(), c.error()) {
                (Some(fd), _) if going => self.accepted(lp, q, TcpStream::from(fd))?,
                (_, Some(e)) if matches!(e.raw_os_error(), Some(23) | Some(24)) => {
                    self.out_of_files(lp, &e)
                }
                _ => {}
            }
            if !c.more && going {
                q.accept(self.listener.as_fd(), ring::tag(0, Op::Accept))?;
            }
            return Ok(());
        }
        let Some(conn) = self.conns.get_mut(slot).and_then(|c| c.as_mut()) else {
            return Ok(());
        };
        if !going {
            return Ok(());
        }
        let Some(next) = completed(&self.m, lp, conn, self.counter, op, &c) else {
            return Ok(());
        };
        if queue(q, conn, next, slot)?.is_some() {
            self.close(slot);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::accepts;
    use crate::{Engine, EngineConfig};
    use plumb_samples::Role;
    use plumb_spec::{Close, Io, RrSpec, Spec};
    use std::io::{Read, Write};
    use std::net::{IpAddr, TcpListener, TcpStream};
    use std::time::Duration;

    fn crr_server(accept_from: &str) -> (Engine, u16) {
        crr_server_closing(accept_from, Close::Rst, Io::Epoll)
    }

    fn crr_server_closing(accept_from: &str, close: Close, io: Io) -> (Engine, u16) {
        let mut spec = Spec::crr();
        spec.flows = 1;
        spec.threads = 1;
        spec.duration_ms = 1000;
        spec.warmup_ms = 0;
        spec.io = io;
        spec.rr = Some(RrSpec {
            close: Some(close),
            ..RrSpec::default()
        });
        let link = crate::Link {
            cookie: plumb_sys::Cookie([0; 16]),
            peer: std::net::SocketAddr::new(accept_from.parse().unwrap(), 0),
            same_clock: false,
        };
        let config = EngineConfig::for_spec(&spec, Role::Server, &link);
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let port = listener.local_addr().unwrap().port();
        let engine = Engine::start_with_listener(config, Vec::new(), Some(listener)).unwrap();
        (engine, port)
    }

    /// One transaction: a byte out, and what came back (None: closed).
    fn transact(port: u16) -> Option<u8> {
        let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let _ = s.write_all(&[7]);
        let mut b = [0u8; 1];
        match s.read(&mut b) {
            Ok(1) => Some(b[0]),
            Ok(_) => None,
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => None,
            Err(e) => panic!("neither served nor closed: {e}"),
        }
    }

    #[test]
    fn a_crr_server_serves_only_its_clients_address() {
        let (engine, port) = crr_server("127.0.0.1");
        assert!(
            transact(port).is_some(),
            "the client's own connection is served"
        );
        assert_eq!(engine.strays(), 0);
        engine.stop().unwrap();

        // A connection from elsewhere is closed unread.
        let (engine, port) = crr_server("198.18.0.1");
        assert_eq!(transact(port), None);
        let t0 = std::time::Instant::now();
        while engine.strays() == 0 && t0.elapsed() < Duration::from_secs(5) {
            std::thread::sleep(Duration::from_millis(10));
        }
        assert_eq!(engine.strays(), 1);
        assert_eq!(engine.counts().transactions(), 0);
        engine.stop().unwrap();
    }

    #[test]
    fn a_server_fin_server_closes_after_its_response_and_the_others_wait() {
        let ios = if crate::ring::ring_here() {
            vec![Io::Epoll, Io::Uring]
        } else {
            vec![Io::Epoll]
        };
        for io in ios {
            for close in [Close::ServerFin, Close::Fin] {
                let (engine, port) = crr_server_closing("127.0.0.1", close, io);
                let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
                s.set_read_timeout(Some(Duration::from_millis(500)))
                    .unwrap();
                s.write_all(&[7]).unwrap();
                let mut b = [0u8; 1];
                // A read cut short by a signal is read again.
                let mut read = |b: &mut [u8]| loop {
                    match s.read(b) {
                        Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                        r => break r,
                    }
                };
                assert_eq!(read(&mut b).unwrap(), 1, "{io} {close}: the response");
                // The end of the stream, or the server still waiting for ours.
                let after = read(&mut b);
                if close == Close::ServerFin {
                    assert_eq!(after.unwrap(), 0, "{io}: the server closed");
                } else {
                    let e = after.expect_err("the server waits for the client's close");
                    assert_eq!(e.kind(), std::io::ErrorKind::WouldBlock, "{io} {close}");
                }
                drop(s);
                assert_eq!(engine.counts().transactions(), 1, "{io} {close}");
                engine.stop().unwrap();
            }
        }
    }

    #[test]
    fn loopback_clients_may_use_any_loopback_source() {
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        assert!(accepts(None, ip("198.18.0.9")));
        assert!(accepts(Some(ip("127.0.0.1")), ip("127.0.0.7")));
        assert!(accepts(Some(ip("::ffff:198.18.0.1")), ip("198.18.0.1")));
        assert!(!accepts(Some(ip("198.18.0.1")), ip("198.18.0.2")));
        assert!(!accepts(Some(ip("198.18.0.1")), ip("127.0.0.1")));
    }
}
