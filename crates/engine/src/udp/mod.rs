//! UDP workers. Every datagram opens with a 16-byte header: a tag taken
//! from the test's cookie (so that strays are dropped, not counted), the
//! flow index and a sequence number. The client owns one connected socket
//! per flow; the server has one socket per worker, all bound to the same
//! port with SO_REUSEPORT, and finds the flow in the header.
//!
//! udp-stream: the sender sends as fast as its sockets take datagrams; the
//! receiver counts them and, per flow, the sequence numbers it skipped
//! (lost) and those that came after a later one (reordered), as iperf3
//! does. The client sends unless the test is `--direction recv`: then each
//! client flow announces itself (see [`Announcer`]), the server answers
//! from a socket of its own connected to that flow, and the client's
//! sockets receive.
//!
//! udp-rr: each client flow keeps `--pipeline` requests outstanding (one by
//! default), or with `--rate` sends them on a fixed schedule. A request
//! with no response within the timeout is counted and forgotten, so a lost
//! datagram costs one timeout, never the run.

use crate::flow::{
    later, pattern, FlowCounters, Handler, Loop, Next, PageBuf, Shared, BOUND, POLL,
};
use crate::plan::{on_engine, Conduct, Plan};
use crate::FlowError;
use plumb_spec::Io;
use rustix::event::epoll;
use rustix::net::{self, SocketAddrAny};
use std::io;
use std::net::UdpSocket;
use std::sync::atomic::Ordering::{Acquire, Relaxed};

mod machine;
mod ring;

pub(crate) use ring::{UdpRrRing, UdpServerRing, UdpStreamRing};

use machine::{count_received, datagram_sent, next_datagram, put_header, put_stamp, RrClient};

/// What one end of a UDP test does.
#[derive(Debug, Clone)]
pub struct UdpPlan {
    pub client: bool,
    /// A stream's sender: the client, or with `--direction recv` the
    /// server.
    pub sends: bool,
    /// Request/response rather than a stream.
    pub rr: bool,
    /// The first four bytes of the cookie: the client sends it, the server
    /// checks it.
    pub tag: u32,
    /// Bytes of each datagram this end sends: the stream's message, the
    /// request or the response.
    pub out_size: usize,
    /// Bytes of each datagram this end takes in.
    pub in_size: usize,
    /// Flows of the whole test (the server's counters are indexed by flow).
    pub flows: usize,
    /// udp-rr client: how long a request waits for its response.
    pub timeout_ns: u64,
    /// udp-rr client: requests each flow may have outstanding.
    pub depth: u32,
    /// udp-rr client, open loop: requests a second over every flow.
    pub rate: Option<f64>,
    /// udp-rr client: the server runs on this kernel, so its answers'
    /// stamps are on this end's clock (see [`crate::Link::same_clock`]).
    pub same_clock: bool,
}

impl Plan for UdpPlan {
    fn for_spec(spec: &plumb_spec::Spec, server: bool, link: &crate::Link) -> UdpPlan {
        let (sends, _) = spec.direction.activity(server);
        let (out_size, in_size) = match (&spec.rr, server) {
            (Some(r), true) => (r.resp_size, r.req_size),
            (Some(r), false) => (r.req_size, r.resp_size),
            (None, _) => (spec.msg_size, spec.msg_size),
        };
        let rr = spec.rr.as_ref();
        UdpPlan {
            client: !server,
            sends,
            rr: spec.workload == plumb_spec::Workload::UdpRr,
            tag: UdpPlan::tag_of(&link.cookie),
            out_size: out_size as usize,
            in_size: in_size as usize,
            flows: spec.flows as usize,
            timeout_ns: rr
                .and_then(|r| r.timeout_ms)
                .unwrap_or(plumb_spec::UDP_RR_TIMEOUT_MS)
                * 1_000_000,
            depth: rr.map_or(1, |r| r.pipeline),
            rate: rr.and_then(|r| r.rate).map(|x| x as f64),
            same_clock: !server && link.same_clock,
        }
    }

    /// A udp-stream's receiver, either end, hands its counts over, so that
    /// the datagrams already queued on its sockets are read and counted
    /// first (they arrived in the window; left there, they would pass for
    /// lost).
    fn conduct(&self) -> Conduct {
        if self.rr {
            return Conduct::transactions(self.client, self.rate);
        }
        Conduct {
            transactional: false,
            timed: false,
            hands_over: !self.sends,
            schedule: None,
        }
    }

    fn run(self, sh: Shared, io: Io) -> io::Result<Vec<FlowError>> {
        match (self.rr, self.client, self.sends) {
            (false, _, true) => on_engine(
                self,
                sh,
                io,
                |plan, _| Ok(UdpStreamClient::new(plan)),
                |plan, sh| Ok(UdpStreamRing::new(plan, sh)),
            ),
            (true, true, _) => on_engine(
                self,
                sh,
                io,
                |plan, sh| Ok(UdpRrClient::new(plan, sh)),
                |plan, sh| Ok(UdpRrRing::new(plan, sh)),
            ),
            _ => on_engine(
                self,
                sh,
                io,
                |plan, _| Ok(UdpServer::new(plan)),
                |plan, _| Ok(UdpServerRing::new(plan)),
            ),
        }
    }
}

impl UdpPlan {
    pub fn tag_of(cookie: &plumb_sys::Cookie) -> u32 {
        u32::from_le_bytes([cookie.0[0], cookie.0[1], cookie.0[2], cookie.0[3]])
    }
}

/// Datagrams sent or read for one ready socket before the loop moves on.
const BURST: usize = 16;

/// How often a `--direction recv` client's flows say hello while the
/// server gathers them.
const HELLO_EVERY: std::time::Duration = std::time::Duration::from_millis(20);

/// The longest a client's flows say hello: the control connection's own
/// handshake gives up sooner.
const HELLO_FOR: std::time::Duration = std::time::Duration::from_secs(60);

/// The flows of a `--direction recv` udp-stream client saying where they
/// are: each of its sockets sends its flow's hello every [`HELLO_EVERY`]
/// until this is dropped (once the traffic starts), so that the server
/// hears of every flow whatever the path drops.
pub struct Announcer {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Announcer {
    /// Starts the hellos of `socks`, flow 0 onwards, of the test tagged
    /// `tag`.
    pub fn start(socks: &[UdpSocket], tag: u32) -> io::Result<Announcer> {
        let socks = (socks.iter())
            .map(UdpSocket::try_clone)
            .collect::<io::Result<Vec<_>>>()?;
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let stopped = stop.clone();
        let thread = std::thread::Builder::new()
            .name("plumb-hello".into())
            .spawn(move || {
                let until = std::time::Instant::now() + HELLO_FOR;
                while !stopped.load(Acquire) && std::time::Instant::now() < until {
                    for (k, sock) in socks.iter().enumerate() {
                        // A hello the path or a full queue drops goes again.
                        let _ = send(sock, &machine::hello(tag, k as u32));
                    }
                    std::thread::park_timeout(HELLO_EVERY);
                }
            })?;
        Ok(Announcer {
            stop,
            thread: Some(thread),
        })
    }
}

impl Drop for Announcer {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Release);
        if let Some(t) = self.thread.take() {
            t.thread().unpark();
            let _ = t.join();
        }
    }
}

/// The client's UDP sockets for `spec`'s flows (none for a TCP workload),
/// connected to the server's data port `data`; where the server sends,
/// with the flows' hellos, which go on until the [`Announcer`] is dropped
/// (once the server has started, and so has heard them all).
pub fn client_udp_sockets(
    data: std::net::SocketAddr,
    spec: &plumb_spec::Spec,
    cookie: &plumb_sys::Cookie,
) -> Result<(Vec<UdpSocket>, Option<Announcer>), crate::SetupError> {
    if !spec.workload.is_udp() {
        return Ok((Vec::new(), None));
    }
    let socks = crate::udp_client_sockets(data, spec.flows, &spec.socket)?;
    let announcer = spec
        .udp_from_server()
        .then(|| Announcer::start(&socks, UdpPlan::tag_of(cookie)))
        .transpose()
        .map_err(|e| crate::SetupError::io("start the UDP flows' hellos", e))?;
    Ok((socks, announcer))
}

/// The server's UDP sockets for `spec`'s flows, from `group`, those bound
/// to its data port: the group itself, or where the server sends, one
/// connected to each flow that said hello by `deadline`
/// ([`senders_to_announced`]).
pub fn server_udp_sockets(
    group: Vec<UdpSocket>,
    spec: &plumb_spec::Spec,
    cookie: &plumb_sys::Cookie,
    deadline: std::time::Instant,
) -> Result<Vec<UdpSocket>, crate::SetupError> {
    if !spec.udp_from_server() {
        return Ok(group);
    }
    let tag = UdpPlan::tag_of(cookie);
    senders_to_announced(group, spec.flows, tag, &spec.socket, deadline)
}

/// A `--direction recv` server's sockets: one per flow of `flows`, bound
/// where the client's flows sent their hellos (the address of `group`,
/// the sockets that heard them, closed once every flow was heard) and
/// connected to the flow, with the options of `opts`, in flow order. Each
/// then sends its flow's datagrams from the address the flow's socket is
/// connected to, and no other flow's come to it.
fn senders_to_announced(
    group: Vec<UdpSocket>,
    flows: u32,
    tag: u32,
    opts: &plumb_spec::SocketOpts,
    deadline: std::time::Instant,
) -> Result<Vec<UdpSocket>, crate::SetupError> {
    let setup = |what: &str, e: io::Error| crate::SetupError::io(what, e);
    let local = group[0]
        .local_addr()
        .map_err(|e| setup("read the UDP port", e))?;
    let mut peers: Vec<Option<std::net::SocketAddr>> = vec![None; flows as usize];
    let mut heard = 0;
    let mut buf = [0u8; 64];
    for sock in &group {
        sock.set_nonblocking(true)
            .map_err(|e| setup("wait for the client's flows", e))?;
    }
    while heard < flows {
        if std::time::Instant::now() > deadline {
            return Err(crate::SetupError::io(
                format!(
                    "udp-stream --direction recv: heard from {heard} of the client's {flows} flows"
                ),
                io::Error::from(io::ErrorKind::TimedOut),
            ));
        }
        let mut quiet = true;
        for sock in &group {
            while let Ok((got, from)) = sock.recv_from(&mut buf) {
                quiet = false;
                let Some(k) = machine::hello_from(&buf[..got], tag) else {
                    continue;
                };
                if let Some(peer @ None) = peers.get_mut(k as usize) {
                    *peer = Some(from);
                    heard += 1;
                }
            }
        }
        if quiet {
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
    }
    drop(group);
    (peers.into_iter().flatten())
        .enumerate()
        .map(|(k, peer)| {
            let sock = crate::setup::udp_socket(local, opts, |e| setup("create a UDP socket", e))?;
            // Every flow's socket shares the port the client sends to.
            sock.set_reuse_port(true)
                .map_err(|e| setup("set SO_REUSEPORT", e))?;
            sock.bind(&local.into())
                .map_err(|e| setup(&format!("send UDP from {local}"), e))?;
            sock.connect(&peer.into())
                .map_err(|e| setup(&format!("connect UDP flow {k} to {peer}"), e))?;
            Ok(sock.into())
        })
        .collect()
}

fn blocked(e: &io::Error) -> bool {
    // ENOBUFS: the device queue is full; the datagram was not sent and the
    // socket will take more soon.
    later(e) || e.raw_os_error() == Some(105)
}

/// A datagram the host's own packet filter dropped on the way out (EPERM):
/// lost like one dropped on the wire, not the end of the flow.
fn filtered(e: &io::Error) -> bool {
    e.raw_os_error() == Some(1)
}

// A datagram's system calls go straight to the kernel: libc's would wrap
// each in thread-cancellation bookkeeping, about 1 % of a sender's time.

fn send(sock: &UdpSocket, buf: &[u8]) -> io::Result<usize> {
    Ok(net::send(sock, buf, net::SendFlags::empty())?)
}

fn recv(sock: &UdpSocket, buf: &mut [u8], flags: net::RecvFlags) -> io::Result<usize> {
    Ok(net::recv(sock, buf, flags)?.0)
}

/// The datagram and who sent it.
fn recv_from(sock: &UdpSocket, buf: &mut [u8]) -> io::Result<(usize, Option<SocketAddrAny>)> {
    let (got, _, from) = net::recvfrom(sock, buf, net::RecvFlags::empty())?;
    Ok((got, from))
}

fn send_to(sock: &UdpSocket, buf: &[u8], to: &SocketAddrAny) -> io::Result<usize> {
    Ok(net::sendto(sock, buf, net::SendFlags::empty(), to)?)
}

/// udp-stream sending flows (the client's, or with `--direction recv` the
/// server's): each sends as fast as its connected socket takes datagrams.
pub(crate) struct UdpStreamClient {
    plan: UdpPlan,
    buf: PageBuf,
}

impl UdpStreamClient {
    pub(crate) fn new(plan: UdpPlan) -> UdpStreamClient {
        UdpStreamClient {
            buf: pattern(plan.out_size),
            plan,
        }
    }
}

impl Handler for UdpStreamClient {
    fn start(&mut self, lp: &mut Loop) -> io::Result<()> {
        let n = lp.sh.range.len();
        // One flow sends in blocking mode, as the stream's lone sender does
        // (see [`Loop::blocking`]): a UDP socket is nearly always writable,
        // so epoll only added a wait after every burst, a system call that
        // cost about 7 % of the datagrams on loopback; a socket without
        // room sleeps in the kernel instead.
        if n == 1 {
            let i = lp.sh.range.start;
            lp.sh.udp_socks[i].set_nonblocking(false)?;
            lp.block(i as u64, BOUND)?;
        } else {
            lp.watch_range(&lp.sh.udp_socks, epoll::EventFlags::OUT)?;
        }
        lp.live = n;
        Ok(())
    }

    fn on_readable(&mut self, _: &mut Loop, _: u64, _: epoll::EventFlags) -> io::Result<Next> {
        // Watched for room only: whatever woke it, try sending.
        Ok(Next::Write)
    }

    fn on_writable(&mut self, lp: &mut Loop, id: u64, _: epoll::EventFlags) -> io::Result<()> {
        let i = id as usize;
        let sock = &lp.sh.udp_socks[i];
        let c = &lp.sh.counters[i];
        let mut refused = None;
        for _ in 0..BURST {
            let open = lp.sh.in_window.load(Acquire);
            let seq = c.packets_sent.load(Relaxed);
            next_datagram(&mut self.buf, self.plan.tag, i, seq, open);
            match send(sock, &self.buf) {
                Ok(n) => datagram_sent(c, n, open),
                Err(e) if blocked(&e) => break,
                Err(e) if filtered(&e) => continue,
                Err(e) => {
                    refused = Some(e);
                    break;
                }
            }
        }
        if let Some(e) = refused {
            // A refused send means the server's socket is gone: the end of
            // the test, or a failure inside it.
            let socks = lp.sh.udp_socks.clone();
            lp.end_flow(i, &socks[i], plumb_sys::plain_io(&e));
        }
        Ok(())
    }
}

/// udp-rr client flows: the machine's requests and answers over one
/// connected socket each. A closed-loop worker with one flow blocks in recv
/// on its socket, as the server does; its interrupter's period is a quarter
/// of the request timeout (at most `POLL`), so a timeout is seen at most
/// that late. An open loop waits in epoll until the next request is due.
pub(crate) struct UdpRrClient {
    m: RrClient,
    base: usize,
    out: PageBuf,
    inbuf: Vec<u8>,
    /// Flows owed a request: by a timeout (closed loop) or the schedule.
    owed: Vec<usize>,
    timeout_ns: u64,
}

/// The udp-rr machine of this worker's client flows, starting now; where
/// the server runs on this kernel, told how far its stamps' clock is ahead
/// of the engine's.
pub(super) fn rr_client(plan: &UdpPlan, sh: &Shared) -> RrClient {
    let mut m = RrClient::new(plan, sh.range.start, sh.range.len(), sh.now_ns());
    if plan.same_clock {
        m.share_clock(plumb_sys::proc::monotonic_ns().saturating_sub(sh.now_ns()));
    }
    m
}

impl UdpRrClient {
    pub(crate) fn new(plan: UdpPlan, sh: &Shared) -> UdpRrClient {
        UdpRrClient {
            m: rr_client(&plan, sh),
            base: sh.range.start,
            out: pattern(plan.out_size),
            inbuf: vec![0u8; 65536],
            owed: Vec::new(),
            timeout_ns: plan.timeout_ns,
        }
    }

    /// Sends flow k's next request; a send that fails for want of buffer
    /// space is a lost request and times out like one.
    fn send(&mut self, lp: &Loop, k: usize) -> io::Result<()> {
        let i = self.base + k;
        let c = &lp.sh.counters[i];
        self.m.request(k, &mut self.out, lp.now_ns(), c);
        match send(&lp.sh.udp_socks[i], &self.out) {
            Ok(w) => {
                c.add_sent(w as u64);
                Ok(())
            }
            Err(e) if blocked(&e) || filtered(&e) => Ok(()),
            Err(e) => Err(e),
        }
    }

    fn end(&mut self, lp: &mut Loop, k: usize, why: String) {
        self.m.end(k);
        let socks = lp.sh.udp_socks.clone();
        lp.end_flow(self.base + k, &socks[self.base + k], why);
    }

    fn send_or_end(&mut self, lp: &mut Loop, k: usize) {
        if self.m.ended(k) {
            return;
        }
        if let Err(e) = self.send(lp, k) {
            self.end(lp, k, plumb_sys::plain_io(&e));
        }
    }
}

impl Handler for UdpRrClient {
    fn start(&mut self, lp: &mut Loop) -> io::Result<()> {
        let n = lp.sh.range.len();
        if n == 1 && !self.m.open_loop() {
            let wait = POLL.min(
                std::time::Duration::from_nanos(self.timeout_ns / 4)
                    .max(std::time::Duration::from_micros(100)),
            );
            lp.sh.udp_socks[self.base].set_nonblocking(false)?;
            lp.block(self.base as u64, wait)?;
        } else {
            lp.watch_range(&lp.sh.udp_socks, epoll::EventFlags::IN)?;
        }
        lp.live = n;
        for k in 0..n {
            for _ in 0..self.m.opening() {
                self.send_or_end(lp, k);
            }
        }
        Ok(())
    }

    fn on_timer(&mut self, lp: &mut Loop) -> io::Result<Option<u64>> {
        let counters = &lp.sh.counters[lp.sh.range.clone()];
        let next = self.m.timer(lp.now_ns(), counters, &mut self.owed);
        for i in 0..self.owed.len() {
            self.send_or_end(lp, self.owed[i]);
        }
        self.owed.clear();
        Ok(next.map(|t| t.saturating_sub(lp.now_ns())))
    }

    fn on_readable(&mut self, lp: &mut Loop, id: u64, _: epoll::EventFlags) -> io::Result<Next> {
        let i = id as usize;
        let k = i - self.base;
        if self.m.ended(k) {
            return Ok(Next::Done);
        }
        // One datagram per call in blocking mode: a second recv would wait.
        let burst = if lp.blocking.is_some() { 1 } else { BURST };
        for _ in 0..burst {
            let got = match recv(
                &lp.sh.udp_socks[i],
                &mut self.inbuf,
                net::RecvFlags::empty(),
            ) {
                Ok(got) => got,
                Err(e) if blocked(&e) => break,
                Err(e) => {
                    self.end(lp, k, plumb_sys::plain_io(&e));
                    return Ok(Next::Done);
                }
            };
            let timings = &mut lp.timings;
            let owes = self.m.answer(
                k,
                &self.inbuf[..got],
                lp.sh.now_ns(),
                &lp.sh.counters[i],
                &lp.sh.strays,
                |planned, ns, ways| timings.record_answer(planned, ns, ways),
            );
            if owes {
                self.send_or_end(lp, k);
            }
            // Nothing is awaited but what was just sent: nothing more to
            // read yet, and a recv would only say so.
            if self.m.awaiting(k) <= usize::from(owes) {
                break;
            }
        }
        Ok(Next::Done)
    }

    fn on_writable(&mut self, _: &mut Loop, _: u64, _: epoll::EventFlags) -> io::Result<()> {
        Ok(())
    }
}

/// A UDP server worker, or the receiving client of a `--direction recv`
/// stream. A server worker owns exactly one socket, so it blocks in
/// recvfrom on it instead of multiplexing: one system call per datagram; a
/// receiving client with several flows watches their sockets in epoll.
pub(crate) struct UdpServer {
    plan: UdpPlan,
    inbuf: Vec<u8>,
    out: PageBuf,
}

impl UdpPlan {
    /// What a server counts into: every flow of the test's counters, which
    /// the flow in a datagram's header indexes.
    fn test_counters<'a>(&self, sh: &'a Shared) -> &'a [FlowCounters] {
        &sh.counters[..self.flows.min(sh.counters.len())]
    }

    /// A stream's receiver reads what its sockets hold, without waiting,
    /// and counts each datagram: those that arrived before the engine asked
    /// for its counts. At most as many as a socket's receive buffer holds
    /// of datagrams of `in_size` bytes (each takes at least its size of the
    /// buffer, SO_RCVBUF as the kernel doubled it), so that a sender
    /// outrunning the drain cannot hold the hand-over, nor count what
    /// arrived after it. How many it read.
    fn settle_stream(&self, sh: &Shared, buf: &mut [u8]) -> u64 {
        let counters = self.test_counters(sh);
        let mut read = 0;
        for sock in &sh.udp_socks[sh.range.clone()] {
            let held = socket2::SockRef::from(sock)
                .recv_buffer_size()
                .unwrap_or(64 << 20);
            let most = read + (held / self.in_size.max(1)) as u64 + 1;
            while read < most {
                match recv(sock, buf, net::RecvFlags::DONTWAIT) {
                    Ok(got) => {
                        read += 1;
                        count_received(&buf[..got], self.tag, false, counters, &sh.strays);
                    }
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    // Empty (EAGAIN), or an ICMP error that belongs to no flow.
                    Err(_) => break,
                }
            }
        }
        read
    }
}

impl UdpServer {
    pub(crate) fn new(plan: UdpPlan) -> UdpServer {
        UdpServer {
            inbuf: vec![0u8; 65536],
            out: pattern(plan.out_size),
            plan,
        }
    }

    /// Counts the datagram of `got` bytes in the input buffer: its
    /// (flow, seq), or None for a stray.
    fn count(&self, lp: &Loop, got: usize) -> Option<(u32, u64)> {
        let udp = &self.plan;
        count_received(
            &self.inbuf[..got],
            udp.tag,
            udp.rr,
            udp.test_counters(&lp.sh),
            &lp.sh.strays,
        )
    }

    /// Counts the next datagram on socket `s`, answering a request; false
    /// when there was none to read.
    fn take_one(&mut self, lp: &mut Loop, s: usize) -> bool {
        let sock = &lp.sh.udp_socks[s];
        let udp = &self.plan;
        // Only a response needs the sender's address; a stream's receiver
        // does not have the kernel copy it out.
        let got = if udp.rr {
            recv_from(sock, &mut self.inbuf)
        } else {
            recv(sock, &mut self.inbuf, net::RecvFlags::empty()).map(|got| (got, None))
        };
        let (got, from) = match got {
            Ok(r) => r,
            // Empty, a timeout, or an ICMP error from a peer that went
            // away: they belong to no flow and stop nothing.
            Err(_) => return false,
        };
        let Some((flow, seq)) = self.count(lp, got) else {
            return true;
        };
        if let Some(from) = from {
            let c = &lp.sh.counters[flow as usize];
            c.add_transaction();
            put_header(&mut self.out, udp.tag, flow, seq);
            put_stamp(&mut self.out, plumb_sys::proc::monotonic_ns());
            // A response that cannot be sent is lost, as on the wire; the
            // client's timeout covers it.
            if let Ok(w) = send_to(sock, &self.out, &from) {
                c.add_sent(w as u64);
                FlowCounters::bump(&c.packets_sent, 1);
            }
        }
        true
    }
}

impl Handler for UdpServer {
    fn start(&mut self, lp: &mut Loop) -> io::Result<()> {
        // A response the socket has no room for waits in the kernel until
        // there is, or until a signal cuts the send short; then it is
        // dropped, as a full queue on the wire would drop it.
        let i = lp.sh.range.start;
        if lp.sh.range.len() == 1 {
            lp.sh.udp_socks[i].set_nonblocking(false)?;
            lp.block(i as u64, BOUND)?;
        } else {
            lp.watch_range(&lp.sh.udp_socks, epoll::EventFlags::IN)?;
        }
        // A receiver runs until stopped, whatever its peer does.
        lp.live = 1;
        Ok(())
    }

    fn on_readable(&mut self, lp: &mut Loop, id: u64, _: epoll::EventFlags) -> io::Result<Next> {
        // One datagram per call in blocking mode: a second recv would wait.
        let burst = if lp.blocking.is_some() { 1 } else { BURST };
        for _ in 0..burst {
            if !self.take_one(lp, id as usize) {
                break;
            }
        }
        Ok(Next::Done)
    }

    /// A stream's receiver reads what its socket holds before handing its
    /// counts over: those datagrams arrived before the engine asked.
    fn settle(&mut self, lp: &mut Loop) -> u64 {
        if self.plan.rr {
            // The client counts the transactions; a request still queued
            // here has no response yet, on either side of the edge.
            return 0;
        }
        self.plan.settle_stream(&lp.sh, &mut self.inbuf)
    }

    fn on_writable(&mut self, _: &mut Loop, _: u64, _: epoll::EventFlags) -> io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod flow_tests {
    use super::machine::header;
    use super::*;
    use crate::flow::{test_shared, Loop};
    use std::net::UdpSocket;
    use std::sync::atomic::Ordering::Relaxed;

    fn plan(client: bool, rr: bool) -> UdpPlan {
        UdpPlan {
            client,
            sends: client,
            rr,
            tag: 0x5eed,
            out_size: 64,
            in_size: 64,
            flows: 1,
            timeout_ns: 20_000_000,
            depth: 1,
            rate: None,
            same_clock: false,
        }
    }

    fn datagram(tag: u32, flow: u32, seq: u64) -> Vec<u8> {
        let mut b = vec![0u8; 64];
        put_header(&mut b, tag, flow, seq);
        b
    }

    #[test]
    fn the_server_counts_gaps_late_datagrams_and_strays() {
        let server = UdpSocket::bind("127.0.0.1:0").unwrap();
        let client = UdpSocket::bind("127.0.0.1:0").unwrap();
        client.connect(server.local_addr().unwrap()).unwrap();
        let mut lp = Loop::new(test_shared(Vec::new(), vec![server], 1, false)).unwrap();
        let mut h = UdpServer::new(plan(false, false));
        h.start(&mut lp).unwrap();
        for seq in [0, 1, 4, 2] {
            client.send(&datagram(0x5eed, 0, seq)).unwrap();
        }
        client.send(&datagram(0xbad, 0, 5)).unwrap();
        client.send(&datagram(0x5eed, 9, 5)).unwrap();
        for _ in 0..6 {
            h.on_readable(&mut lp, 0, epoll::EventFlags::IN).unwrap();
        }
        let c = &lp.sh.counters[0];
        assert_eq!(c.packets_received.load(Relaxed), 4);
        // 2 and 3 skipped when 4 came; 2 came later.
        assert_eq!(c.gaps.load(Relaxed), 2);
        assert_eq!(c.late.load(Relaxed), 1);
        assert_eq!(lp.sh.strays.load(Relaxed), 2, "wrong tag, unknown flow");
        assert_eq!(c.window_received.load(Relaxed), 0, "none marked");
    }

    #[test]
    fn what_the_sender_marked_is_counted_against_its_window() {
        let server = UdpSocket::bind("127.0.0.1:0").unwrap();
        let client = UdpSocket::bind("127.0.0.1:0").unwrap();
        client.connect(server.local_addr().unwrap()).unwrap();
        let mut rx = Loop::new(test_shared(Vec::new(), vec![server], 1, false)).unwrap();
        let mut server = UdpServer::new(plan(false, false));
        server.start(&mut rx).unwrap();
        let mut tx = Loop::new(test_shared(Vec::new(), vec![client], 1, false)).unwrap();
        let mut sender = UdpStreamClient::new(plan(true, false));
        // Before, inside and after the sender's window: a burst each.
        for open in [false, true, false] {
            tx.sh.in_window.store(open, Relaxed);
            sender
                .on_writable(&mut tx, 0, epoll::EventFlags::OUT)
                .unwrap();
        }
        let sent = &tx.sh.counters[0];
        assert_eq!(sent.packets_sent.load(Relaxed), 3 * BURST as u64);
        assert_eq!(sent.window_sent.load(Relaxed), BURST as u64);
        for _ in 0..3 * BURST {
            server
                .on_readable(&mut rx, 0, epoll::EventFlags::IN)
                .unwrap();
        }
        let got = &rx.sh.counters[0];
        assert_eq!(got.packets_received.load(Relaxed), 3 * BURST as u64);
        assert_eq!(got.window_received.load(Relaxed), BURST as u64);
        // The mark is not part of the sequence: nothing skipped.
        assert_eq!(got.gaps.load(Relaxed), 0);
        assert_eq!(got.expect.load(Relaxed), 3 * BURST as u64);
    }

    #[test]
    fn a_stream_receiver_counts_what_is_queued_before_it_hands_over() {
        let server = UdpSocket::bind("127.0.0.1:0").unwrap();
        let client = UdpSocket::bind("127.0.0.1:0").unwrap();
        client.connect(server.local_addr().unwrap()).unwrap();
        let mut sh = test_shared(Vec::new(), vec![server], 1, false);
        sh.latency = Some(std::sync::Arc::new(crate::latency::LatencySlot::new()));
        let slot = sh.latency.clone().unwrap();
        let mut lp = Loop::new(sh).unwrap();
        let mut h = UdpServer::new(plan(false, false));
        h.start(&mut lp).unwrap();
        // One datagram read the ordinary way, then 40 left in the queue
        // (and one stray) as the engine asks for the counts.
        client.send(&datagram(0x5eed, 0, 0)).unwrap();
        h.on_readable(&mut lp, 0, epoll::EventFlags::IN).unwrap();
        for seq in 1..=40 {
            client.send(&datagram(0x5eed, 0, seq)).unwrap();
        }
        client.send(&datagram(0xbad, 0, 41)).unwrap();
        let settled = h.settle(&mut lp);
        lp.hand_over(1, settled);
        let c = &lp.sh.counters[0];
        assert_eq!(settled, 41, "every queued datagram read, the stray too");
        assert_eq!(c.handed.packets_received.load(Relaxed), 41);
        assert_eq!(c.handed.received.load(Relaxed), 41 * 64);
        assert_eq!(c.handed.gaps.load(Relaxed), 0);
        assert_eq!(slot.settled.load(Relaxed), 41);
        assert_eq!(lp.sh.strays.load(Relaxed), 1);
        // The queue is empty now: a read that does not wait finds nothing.
        let mut b = [0u8; 64];
        let empty = rustix::net::recv(
            &lp.sh.udp_socks[0],
            &mut b[..],
            rustix::net::RecvFlags::DONTWAIT,
        );
        assert_eq!(empty.unwrap_err(), rustix::io::Errno::AGAIN);
        // A request/response server leaves its queue to the loop.
        let mut rr = UdpServer::new(plan(false, true));
        client.send(&datagram(0x5eed, 0, 42)).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(5));
        assert_eq!(rr.settle(&mut lp), 0);
    }

    #[test]
    fn a_server_sends_each_announced_flow_its_own_datagrams_from_the_port_it_was_told() {
        let group = UdpSocket::bind("127.0.0.1:0").unwrap();
        let port = group.local_addr().unwrap();
        let clients: Vec<UdpSocket> = (0..3)
            .map(|_| {
                let c = UdpSocket::bind("127.0.0.1:0").unwrap();
                c.connect(port).unwrap();
                c
            })
            .collect();
        // Another test's hello, and one for a flow this test does not have.
        let stray = UdpSocket::bind("127.0.0.1:0").unwrap();
        stray.send_to(&machine::hello(0xbad, 0), port).unwrap();
        stray.send_to(&machine::hello(0x5eed, 7), port).unwrap();
        let announcer = Announcer::start(&clients, 0x5eed).unwrap();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        let opts = plumb_spec::Spec::udp_stream().socket;
        let senders = senders_to_announced(vec![group], 3, 0x5eed, &opts, deadline).unwrap();
        drop(announcer);
        assert_eq!(senders.len(), 3);
        for (k, sender) in senders.iter().enumerate() {
            assert_eq!(
                sender.local_addr().unwrap(),
                port,
                "sent from the port told"
            );
            assert_eq!(
                sender.peer_addr().unwrap(),
                clients[k].local_addr().unwrap()
            );
            sender.send(&datagram(0x5eed, k as u32, 0)).unwrap();
        }
        // Each client flow's connected socket takes its own datagram.
        for (k, c) in clients.iter().enumerate() {
            c.set_read_timeout(Some(std::time::Duration::from_secs(2)))
                .unwrap();
            let mut b = [0u8; 64];
            let got = c.recv(&mut b).unwrap();
            assert_eq!(header(&b[..got], 0x5eed), Some((k as u32, 0, false)));
        }
        // A client whose flows never say hello is named by how many did.
        let quiet = UdpSocket::bind("127.0.0.1:0").unwrap();
        let soon = std::time::Instant::now() + std::time::Duration::from_millis(50);
        let e = senders_to_announced(vec![quiet], 2, 0x5eed, &opts, soon).unwrap_err();
        assert!(
            e.message.contains("heard from 0 of the client's 2 flows"),
            "{}",
            e.message
        );
    }

    /// A one-flow udp-rr client whose first request (0) the returned
    /// server socket has read, and the address to answer it at.
    fn rr_client_with_a_request_out() -> (UdpSocket, Loop, UdpRrClient, std::net::SocketAddr) {
        let server = UdpSocket::bind("127.0.0.1:0").unwrap();
        let client = UdpSocket::bind("127.0.0.1:0").unwrap();
        client.connect(server.local_addr().unwrap()).unwrap();
        let mut lp = Loop::new(test_shared(Vec::new(), vec![client], 1, true)).unwrap();
        let mut h = UdpRrClient::new(plan(true, true), &lp.sh);
        h.start(&mut lp).unwrap();
        let mut b = [0u8; 64];
        let (_, from) = server.recv_from(&mut b).unwrap();
        assert_eq!(header(&b, 0x5eed), Some((0, 0, false)));
        (server, lp, h, from)
    }

    #[test]
    fn an_answer_read_after_its_deadline_is_late_whatever_ran_first() {
        let (server, mut lp, mut h, from) = rr_client_with_a_request_out();
        // The answer comes after the 20 ms timeout, and is read before the
        // sweep runs: a timeout and a late answer, not a 25 ms transaction.
        std::thread::sleep(std::time::Duration::from_millis(25));
        server.send_to(&datagram(0x5eed, 0, 0), from).unwrap();
        h.on_readable(&mut lp, 0, epoll::EventFlags::IN).unwrap();
        h.on_timer(&mut lp).unwrap();
        let c = &lp.sh.counters[0];
        assert_eq!(c.transactions.load(Relaxed), 0);
        assert_eq!(
            c.timeouts.load(Relaxed),
            1,
            "counted once, not again by the sweep"
        );
        assert_eq!(c.late.load(Relaxed), 1);
        assert_eq!(c.packets_sent.load(Relaxed), 2, "the next request went out");
    }

    #[test]
    fn an_unanswered_request_times_out_and_the_next_one_is_answered() {
        let (server, mut lp, mut h, from) = rr_client_with_a_request_out();
        assert_eq!(lp.blocking, Some(0), "one flow blocks on its socket");
        let mut b = [0u8; 64];
        // Request 0 goes unanswered past its timeout: counted, and request 1
        // goes out.
        std::thread::sleep(std::time::Duration::from_millis(25));
        h.on_timer(&mut lp).unwrap();
        let c = &lp.sh.counters[0];
        assert_eq!(c.timeouts.load(Relaxed), 1);
        server.recv_from(&mut b).unwrap();
        assert_eq!(header(&b, 0x5eed), Some((0, 1, false)));
        // A late answer to 0 is late; the answer to 1 is a transaction.
        server.send_to(&datagram(0x5eed, 0, 0), from).unwrap();
        server.send_to(&datagram(0x5eed, 0, 1), from).unwrap();
        h.on_readable(&mut lp, 0, epoll::EventFlags::IN).unwrap();
        h.on_readable(&mut lp, 0, epoll::EventFlags::IN).unwrap();
        let c = &lp.sh.counters[0];
        assert_eq!(c.late.load(Relaxed), 1);
        assert_eq!(c.transactions.load(Relaxed), 1);
        assert_eq!(
            c.packets_sent.load(Relaxed),
            3,
            "0, 1, and 2 after the answer"
        );
    }

    /// What a hand-over reads is whole: the transactions counted are those
    /// whose latencies it took, also while the workers end on their own
    /// and hand over for the last time (the peer went away, as a server
    /// tearing its flows down at the window's close), which they do at any
    /// moment, not when the engine asks.
    #[test]
    fn the_transactions_handed_over_are_those_timed_even_as_workers_end() {
        use crate::{Engine, EngineConfig, Link};
        use std::sync::atomic::AtomicBool;
        use std::sync::Arc;
        use std::time::Duration;
        for round in 0..30 {
            let server = UdpSocket::bind("127.0.0.1:0").unwrap();
            let at = server.local_addr().unwrap();
            server
                .set_read_timeout(Some(Duration::from_millis(5)))
                .unwrap();
            let going = Arc::new(AtomicBool::new(true));
            let echo = {
                let going = going.clone();
                std::thread::spawn(move || {
                    let mut b = [0u8; 2048];
                    while going.load(Relaxed) {
                        if let Ok((n, from)) = server.recv_from(&mut b) {
                            let _ = server.send_to(&b[..n], from);
                        }
                    }
                })
            };
            let mut spec = plumb_spec::Spec::udp_rr();
            (spec.flows, spec.threads) = (4, 2);
            if let Some(rr) = spec.rr.as_mut() {
                rr.pipeline = 8;
            }
            let link = Link {
                cookie: plumb_sys::Cookie([round; 16]),
                peer: at,
                same_clock: false,
            };
            let config = EngineConfig::for_spec(&spec, plumb_samples::Role::Client, &link);
            let socks: Vec<UdpSocket> = (0..4)
                .map(|_| {
                    let s = UdpSocket::bind("127.0.0.1:0").unwrap();
                    s.connect(at).unwrap();
                    s
                })
                .collect();
            let engine = Engine::start_udp(config, Vec::new(), socks).unwrap();
            std::thread::sleep(Duration::from_millis(20));
            let start = engine.hand_over(None).counts.transactions();
            std::thread::sleep(Duration::from_millis(20));
            // The server goes away: each flow's next read fails, and its
            // worker ends, while the engine keeps asking.
            going.store(false, Relaxed);
            echo.join().unwrap();
            let mut timed = 0;
            let mut last = start;
            for _ in 0..200 {
                let h = engine.hand_over(Some(Duration::from_micros(200)));
                timed += h.timed.map_or(0, |t| t.hist.len());
                last = h.counts.transactions();
                assert_eq!(timed, last - start, "round {round}");
            }
            let h = engine.hand_over(None);
            timed += h.timed.map_or(0, |t| t.hist.len());
            assert_eq!(timed, h.counts.transactions() - start, "round {round}");
            assert!(last > start, "round {round}: nothing answered");
            let _ = engine.stop();
        }
    }
}
