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

use crate::flow::{
    later, pattern, FlowError, Handler, Loop, Next, PageBuf, Shared, Writing, BOUND,
};
use crate::ring::{self, receive_buffers, Op, RingFlows, Shape};
use crate::setup::{apply_before_connect, apply_connected, bind_source};
use plumb_spec::{Close, SocketOpts};
use plumb_sys::plain_io;
use plumb_sys::uring::{Completion, Queue};
use rustix::event::epoll;
use socket2::{Domain, Protocol, Socket, Type};
use std::io::{self, Read, Write};
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsFd;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;

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
    at: Writing,
    /// Incoming bytes of the current message.
    got: usize,
    /// The outgoing message has been written completely.
    written: bool,
    armed_out: bool,
    t0: u64,
}

impl Conn {
    /// A connection at the start of its exchange: connecting (client) or
    /// accepted (server), nothing written or read yet.
    fn new(stream: TcpStream, connecting: bool, t0: u64) -> Conn {
        Conn {
            stream,
            connecting,
            at: Writing::default(),
            got: 0,
            written: false,
            armed_out: connecting,
            t0,
        }
    }
}

impl Conn {
    /// `n` more bytes of the incoming message; true when they are the ones
    /// that make it whole (on the client, the transaction is done).
    fn received(&mut self, n: usize, in_size: usize) -> bool {
        let before = self.got;
        self.got += n;
        before < in_size && self.got >= in_size
    }

    /// The peer's close (a read of 0 bytes) after a whole incoming message
    /// is the exchange's normal end; before it, the peer gave up.
    fn whole(&self, in_size: usize) -> bool {
        self.got >= in_size
    }

    /// Bytes of the write due now, unless the message is written.
    fn due(&self, writes: &[usize]) -> Option<usize> {
        (!self.written).then(|| self.at.due(writes))
    }

    /// `n` bytes of the write due went out.
    fn wrote(&mut self, writes: &[usize], n: usize) {
        self.written |= self.at.wrote(writes, n);
    }
}

/// Writes what is left of the outgoing message; returns the bytes written
/// and whether the socket would block before the message was done.
fn write_out(conn: &mut Conn, writes: &[usize], buf: &[u8]) -> io::Result<(u64, bool)> {
    let mut sent = 0u64;
    while let Some(want) = conn.due(writes) {
        match (&conn.stream).write(&buf[..want]) {
            Ok(n) => {
                sent += n as u64;
                conn.wrote(writes, n);
            }
            Err(e) if later(&e) => return Ok((sent, true)),
            Err(e) => return Err(e),
        }
    }
    Ok((sent, false))
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

/// Whether the server closes a connection first, once its response is
/// out (`server-fin`); otherwise the client closes it once the response is
/// in, and the server closes on the client's close.
fn server_closes_first(close: Close) -> bool {
    close == Close::ServerFin
}

/// One transaction of the client's: counted, and timed from its connect.
fn transaction_done(
    timings: &mut crate::flow::Timings,
    counters: &crate::flow::FlowCounters,
    t0: u64,
) {
    timings.record_since(t0);
    counters.add_transaction();
}

/// Where a client connection stands after a step.
enum Step {
    Pending,
    /// The response is in: the transaction is done.
    Complete,
    /// The server's close came after its response (`server-fin`).
    Ended,
    Failed(String),
}

/// The client's connection slots of one worker. A connection's state
/// machine (connect, write the request, read the response) takes any
/// readiness the same way: one step per event.
pub(crate) struct CrrClient {
    plan: CrrPlan,
    peer: SocketAddr,
    sources: Vec<IpAddr>,
    base: usize,
    send_buf: PageBuf,
    recv_buf: Vec<u8>,
    conns: Vec<Option<Conn>>,
    /// One slot on epoll: its connections block, with timeouts, instead of
    /// waiting in epoll (see [`Loop::blocking`]).
    blocking: bool,
}

impl CrrClient {
    pub(crate) fn new(plan: CrrPlan, sh: &Shared) -> CrrClient {
        let peer = plan.peer.expect("the client knows where to connect");
        let largest = plan.out_writes.iter().copied().max().unwrap_or(1);
        CrrClient {
            peer,
            sources: crate::setup::sources_for(peer, plan.slots as u32, true),
            base: sh.range.start,
            send_buf: pattern(largest),
            recv_buf: vec![0u8; plan.in_size.clamp(4096, 256 * 1024)],
            conns: (0..sh.range.len()).map(|_| None).collect(),
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

    /// Starts slot `k`'s next connection.
    fn open(&self, lp: &Loop, k: usize) -> io::Result<Conn> {
        let sock = self.socket(k, !self.blocking)?;
        let t0 = lp.now_ns();
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
            return Ok(Conn::new(stream, !connected, t0));
        }
        lp.watch(
            &stream,
            (self.base + k) as u64,
            epoll::EventFlags::OUT | epoll::EventFlags::IN,
        )?;
        Ok(Conn::new(stream, true, t0))
    }

    fn open_or_fail(&mut self, lp: &mut Loop, k: usize) {
        match self.open(lp, k) {
            Ok(c) => self.conns[k] = Some(c),
            Err(e) => self.fail(lp, k, connect_error(&e)),
        }
    }

    fn fail(&mut self, lp: &mut Loop, k: usize, why: String) {
        self.conns[k] = None;
        lp.flow_failed(self.base + k, why);
    }

    /// Moves slot `k`'s connection on as far as the socket allows.
    fn advance(&mut self, lp: &Loop, k: usize, flags: epoll::EventFlags) -> io::Result<Step> {
        let i = self.base + k;
        let c = &lp.sh.counters[i];
        let Some(conn) = self.conns[k].as_mut() else {
            return Ok(Step::Pending);
        };
        if conn.connecting {
            if let Some(e) = conn.stream.take_error()? {
                return Ok(Step::Failed(connect_error(&e)));
            }
            if !flags.intersects(epoll::EventFlags::OUT) {
                return Ok(Step::Pending);
            }
            conn.connecting = false;
            let _ = apply_connected(&conn.stream, &self.plan.opts);
        }
        if !conn.written {
            match write_out(conn, &self.plan.out_writes, &self.send_buf) {
                Ok((sent, blocked)) => {
                    c.add_sent(sent);
                    arm(lp, conn, i as u64, blocked)?;
                }
                Err(e) => return Ok(Step::Failed(plain_io(&e))),
            }
        }
        if flags.intersects(epoll::EventFlags::IN | epoll::EventFlags::HUP | epoll::EventFlags::ERR)
        {
            loop {
                match (&conn.stream).read(&mut self.recv_buf) {
                    Ok(0) if conn.whole(self.plan.in_size) => return Ok(Step::Ended),
                    Ok(0) => {
                        return Ok(Step::Failed("the server closed before its response".into()))
                    }
                    Ok(got) => {
                        c.add_received(got as u64);
                        if conn.received(got, self.plan.in_size) {
                            return Ok(Step::Complete);
                        }
                    }
                    Err(e) if later(&e) => break,
                    Err(e) => return Ok(Step::Failed(plain_io(&e))),
                }
            }
        }
        Ok(Step::Pending)
    }

    fn step(&mut self, lp: &mut Loop, id: u64, flags: epoll::EventFlags) -> io::Result<()> {
        let i = id as usize;
        let k = i - self.base;
        match self.advance(lp, k, flags)? {
            Step::Pending => {}
            Step::Complete => {
                let t0 = self.conns[k].as_ref().map_or(0, |c| c.t0);
                transaction_done(&mut lp.timings, &lp.sh.counters[i], t0);
                if !server_closes_first(self.plan.close) {
                    self.reopen(lp, k);
                } else if let Step::Ended | Step::Failed(_) =
                    // The server's FIN follows its response closely.
                    self.advance(lp, k, epoll::EventFlags::IN)?
                {
                    self.reopen(lp, k);
                }
            }
            Step::Ended => self.reopen(lp, k),
            Step::Failed(why) => self.fail(lp, k, why),
        }
        Ok(())
    }

    /// Closes slot `k`'s connection, its transaction done, and opens the
    /// next: dropping the stream closes it, with RST where linger is 0.
    fn reopen(&mut self, lp: &mut Loop, k: usize) {
        self.conns[k] = None;
        self.open_or_fail(lp, k);
    }
}

impl Handler for CrrClient {
    fn start(&mut self, lp: &mut Loop) -> io::Result<()> {
        if self.conns.len() == 1 {
            self.blocking = true;
            // Each connection's socket is made blocking as it opens.
            lp.block(self.base as u64, BOUND)?;
        }
        lp.live = self.conns.len();
        for k in 0..self.conns.len() {
            self.open_or_fail(lp, k);
        }
        Ok(())
    }

    fn on_readable(
        &mut self,
        lp: &mut Loop,
        id: u64,
        flags: epoll::EventFlags,
    ) -> io::Result<Next> {
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
    listener: Arc<TcpListener>,
    send_buf: PageBuf,
    recv_buf: Vec<u8>,
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
        let largest = plan.out_writes.iter().copied().max().unwrap_or(1);
        CrrServer {
            listener: sh.listener.clone().expect("the crr server has a listener"),
            send_buf: pattern(largest),
            recv_buf: vec![0u8; plan.in_size.clamp(4096, 256 * 1024)],
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
        self.conns[slot] = Some(Conn::new(stream, false, 0));
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

    /// Reads the request on connection `slot` and answers it once whole.
    fn serve(&mut self, lp: &Loop, slot: usize) -> io::Result<()> {
        let c = &lp.sh.counters[self.counter];
        let Some(conn) = self.conns.get_mut(slot).and_then(|c| c.as_mut()) else {
            return Ok(());
        };
        let mut close = false;
        // A whole request is answered before anything more is read: what
        // follows it is the client's close, which comes after the answer.
        while !conn.whole(self.plan.in_size) || conn.written {
            match (&conn.stream).read(&mut self.recv_buf) {
                Ok(0) => {
                    close = true;
                    break;
                }
                Ok(got) => {
                    c.add_received(got as u64);
                    conn.received(got, self.plan.in_size);
                }
                Err(e) if later(&e) => break,
                // RST from a client closing with linger 0: the normal end.
                Err(_) => {
                    close = true;
                    break;
                }
            }
        }
        if !close && conn.whole(self.plan.in_size) && !conn.written {
            match write_out(conn, &self.plan.out_writes, &self.send_buf) {
                Ok((sent, blocked)) => {
                    c.add_sent(sent);
                    if conn.written {
                        c.add_transaction();
                        close = server_closes_first(self.plan.close);
                    }
                    arm(lp, conn, slot as u64, blocked)?;
                }
                Err(_) => close = true,
            }
        }
        if close {
            self.conns[slot] = None;
            self.free.push(slot);
        }
        Ok(())
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
        letters: None,
        peer: None,
        discard: None,
        ops: 2 * slots as u32 + 2,
        send_len: out_writes.iter().copied().max().unwrap_or(1),
        receive: Some(receive_buffers(
            slots,
            ring::fitted(in_size.next_power_of_two()),
            RING_RECEIVE_BYTES,
        )),
    }
}

/// Queues the write `conn` owes next; false once its message is written.
fn queue_write(q: &mut Queue, conn: &Conn, writes: &[usize], tag: u64) -> io::Result<bool> {
    match conn.due(writes) {
        Some(len) => {
            q.send(conn.stream.as_fd(), len, false, tag)?;
            Ok(true)
        }
        None => Ok(false),
    }
}

/// On a ring each connection takes one step at a time: connect, the
/// request's writes, single receives until the response is whole (a
/// multishot receive still armed would keep the socket from closing).
impl RingFlows for CrrClient {
    fn shape(&self, _: &Loop) -> Shape {
        Shape {
            letters: None,
            peer: Some(self.peer),
            ..ring_shape(self.conns.len(), &self.plan.out_writes, self.plan.in_size)
        }
    }

    fn start(&mut self, lp: &mut Loop, q: &mut Queue) -> io::Result<()> {
        lp.live = self.conns.len();
        for k in 0..self.conns.len() {
            self.open_on_ring(lp, q, k)?;
        }
        Ok(())
    }

    fn complete(
        &mut self,
        lp: &mut Loop,
        q: &mut Queue,
        i: usize,
        op: Op,
        c: Completion,
        _: &[u8],
    ) -> io::Result<()> {
        let k = i - self.base;
        let going = ring::going(lp, false);
        let counters = &lp.sh.counters[i];
        let Some(conn) = self.conns[k].as_mut().filter(|_| going) else {
            return Ok(());
        };
        let send = ring::tag(i, Op::Send);
        let receive = ring::tag(i, Op::Receive);
        let failed = match (op, c.error()) {
            (Op::Receive, Some(_)) if c.out_of_buffers() => {
                q.receive_once(conn.stream.as_fd(), receive)?;
                None
            }
            (Op::Connect, Some(e)) => Some(connect_error(&e)),
            (_, Some(e)) => Some(plain_io(&e)),
            (Op::Connect, None) => {
                conn.connecting = false;
                let _ = apply_connected(&conn.stream, &self.plan.opts);
                queue_write(q, conn, &self.plan.out_writes, send)?;
                None
            }
            (Op::Send, None) => {
                counters.add_sent(c.result as u64);
                conn.wrote(&self.plan.out_writes, c.result as usize);
                if !queue_write(q, conn, &self.plan.out_writes, send)? {
                    q.receive_once(conn.stream.as_fd(), receive)?;
                }
                None
            }
            (Op::Receive, None) if c.result == 0 && conn.whole(self.plan.in_size) => {
                self.conns[k] = None;
                self.open_on_ring(lp, q, k)?;
                None
            }
            (Op::Receive, None) if c.result == 0 => {
                Some("the server closed before its response".to_string())
            }
            (Op::Receive, None) => {
                counters.add_received(c.result as u64);
                let done = conn.received(c.result as usize, self.plan.in_size);
                if done {
                    transaction_done(&mut lp.timings, counters, conn.t0);
                }
                if done && !server_closes_first(self.plan.close) {
                    // Dropping the stream closes it: RST with linger 0, else FIN.
                    self.conns[k] = None;
                    self.open_on_ring(lp, q, k)?;
                } else {
                    // More of the response, or the server's close after it.
                    q.receive_once(conn.stream.as_fd(), receive)?;
                }
                None
            }
            // A client neither accepts nor splices.
            (Op::Accept | Op::Fill, None) => None,
        };
        if let Some(why) = failed {
            self.fail(lp, k, why);
        }
        Ok(())
    }
}

impl CrrClient {
    /// Starts slot `k`'s next connection with a connect on the ring.
    fn open_on_ring(&mut self, lp: &mut Loop, q: &mut Queue, k: usize) -> io::Result<()> {
        let i = self.base + k;
        match self.socket(k, false) {
            Ok(sock) => {
                q.connect(sock.as_fd(), ring::tag(i, Op::Connect))?;
                self.conns[k] = Some(Conn::new(sock.into(), true, lp.now_ns()));
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

    fn complete(
        &mut self,
        lp: &mut Loop,
        q: &mut Queue,
        slot: usize,
        op: Op,
        mut c: Completion,
        _: &[u8],
    ) -> io::Result<()> {
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
        let counters = &lp.sh.counters[self.counter];
        let Some(conn) = self.conns.get_mut(slot).and_then(|c| c.as_mut()) else {
            return Ok(());
        };
        let (send, receive) = (ring::tag(slot, Op::Send), ring::tag(slot, Op::Receive));
        let close = match (op, c.error()) {
            _ if !going => false,
            (Op::Receive, Some(_)) if c.out_of_buffers() => {
                q.receive_once(conn.stream.as_fd(), receive)?;
                false
            }
            // RST from a client closing with linger 0: the normal end.
            (_, Some(_)) => true,
            (Op::Receive, None) if c.result == 0 => true,
            (Op::Receive, None) => {
                counters.add_received(c.result as u64);
                conn.received(c.result as usize, self.plan.in_size);
                if !conn.whole(self.plan.in_size)
                    || conn.written
                    || !queue_write(q, conn, &self.plan.out_writes, send)?
                {
                    q.receive_once(conn.stream.as_fd(), receive)?;
                }
                false
            }
            (Op::Send, None) => {
                counters.add_sent(c.result as u64);
                conn.wrote(&self.plan.out_writes, c.result as usize);
                let done = !queue_write(q, conn, &self.plan.out_writes, send)?;
                if done {
                    counters.add_transaction();
                }
                if done && !server_closes_first(self.plan.close) {
                    q.receive_once(conn.stream.as_fd(), receive)?;
                }
                done && server_closes_first(self.plan.close)
            }
            (Op::Connect | Op::Accept | Op::Fill, None) => false,
        };
        if close {
            self.conns[slot] = None;
            self.free.push(slot);
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

#[cfg(test)]
mod flow_tests {
    use super::*;

    #[test]
    fn a_message_goes_out_in_its_writes_once() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let stream = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (mut peer, _) = l.accept().unwrap();
        stream.set_nonblocking(true).unwrap();
        let mut conn = Conn::new(stream, false, 0);
        let buf = pattern(100);
        assert_eq!(write_out(&mut conn, &[1, 99], &buf).unwrap(), (100, false));
        assert!(conn.written);
        // Written is written: nothing more goes out until the next connection.
        assert_eq!(write_out(&mut conn, &[1, 99], &buf).unwrap(), (0, false));
        let mut got = [0u8; 100];
        peer.read_exact(&mut got).unwrap();
        drop(conn);
        assert_eq!(peer.read(&mut got).unwrap(), 0, "nothing after the message");
    }

    #[test]
    fn a_message_split_over_reads_completes_once_and_the_close_order_is_one_rule() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let stream = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let mut conn = Conn::new(stream, false, 0);
        // 100 bytes in reads of 30, 30, 40 and then 5 more: the third
        // completes it, no other does.
        let done: Vec<bool> = [30, 30, 40, 5]
            .iter()
            .map(|&n| conn.received(n, 100))
            .collect();
        assert_eq!(done, [false, false, true, false]);
        assert!(conn.whole(100));
        let mut short = Conn::new(
            TcpStream::connect(l.local_addr().unwrap()).unwrap(),
            false,
            0,
        );
        assert!(!short.received(99, 100));
        assert!(!short.whole(100), "a close now is the peer giving up");
        assert!(server_closes_first(Close::ServerFin));
        assert!(!server_closes_first(Close::Fin) && !server_closes_first(Close::Rst));
    }
}
