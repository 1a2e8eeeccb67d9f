//! UDP workers. Every datagram opens with a 16-byte header: a tag taken
//! from the test's cookie (so that strays are dropped, not counted), the
//! flow index and a sequence number. The client owns one connected socket
//! per flow; the server has one socket per worker, all bound to the same
//! port with SO_REUSEPORT, and finds the flow in the header.
//!
//! udp-stream: the client sends as fast as its sockets take datagrams; the
//! server counts them and, per flow, the sequence numbers it skipped (lost)
//! and those that came after a later one (reordered), as iperf3 does.
//!
//! udp-rr: each client flow keeps one request outstanding. A request with no
//! response within the timeout is counted and the flow sends the next one,
//! so a lost datagram costs one timeout, never the run.

use crate::flow::{
    later, pattern, FlowCounters, Handler, Loop, Next, PageBuf, Shared, BOUND, POLL,
};
use rustix::event::epoll;
use rustix::net::{self, SocketAddrAny};
use std::io;
use std::net::UdpSocket;
use std::sync::atomic::Ordering::{Acquire, Relaxed};

mod machine;
mod ring;

pub(crate) use ring::{UdpRrRing, UdpServerRing, UdpStreamRing};

use machine::{count_received, datagram_sent, next_datagram, put_header, RrClient};

/// What one end of a UDP test does.
#[derive(Debug, Clone)]
pub struct UdpPlan {
    pub client: bool,
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
}

impl UdpPlan {
    pub fn tag_of(cookie: &plumb_sys::Cookie) -> u32 {
        u32::from_le_bytes([cookie.0[0], cookie.0[1], cookie.0[2], cookie.0[3]])
    }
}

/// Datagrams sent or read for one ready socket before the loop moves on.
const BURST: usize = 16;

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

/// udp-stream client flows: each sends as fast as its socket takes
/// datagrams.
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
/// connected socket each. A worker with one flow blocks in recv on its
/// socket, as the server does; its interrupter's period is a quarter of
/// the request timeout (at most `POLL`), so a timeout is seen at most that
/// late.
pub(crate) struct UdpRrClient {
    m: RrClient,
    plan: UdpPlan,
    base: usize,
    out: PageBuf,
    inbuf: Vec<u8>,
    owed: Vec<usize>,
}

impl UdpRrClient {
    pub(crate) fn new(plan: UdpPlan, sh: &Shared) -> UdpRrClient {
        UdpRrClient {
            m: RrClient::new(plan.tag, plan.timeout_ns, sh.range.start, sh.range.len()),
            base: sh.range.start,
            out: pattern(plan.out_size),
            inbuf: vec![0u8; 65536],
            owed: Vec::new(),
            plan,
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
        if let Err(e) = self.send(lp, k) {
            self.end(lp, k, plumb_sys::plain_io(&e));
        }
    }
}

impl Handler for UdpRrClient {
    fn start(&mut self, lp: &mut Loop) -> io::Result<()> {
        let n = lp.sh.range.len();
        if n == 1 {
            let wait = POLL.min(
                std::time::Duration::from_nanos(self.plan.timeout_ns / 4)
                    .max(std::time::Duration::from_micros(100)),
            );
            lp.sh.udp_socks[self.base].set_nonblocking(false)?;
            lp.block(self.base as u64, wait)?;
        } else {
            lp.watch_range(&lp.sh.udp_socks, epoll::EventFlags::IN)?;
        }
        lp.live = n;
        for k in 0..n {
            self.send_or_end(lp, k);
        }
        Ok(())
    }

    fn on_timer(&mut self, lp: &mut Loop) -> io::Result<Option<u64>> {
        let mut owed = std::mem::take(&mut self.owed);
        let range = lp.sh.range.clone();
        let next = self
            .m
            .expire(lp.now_ns(), &lp.sh.counters[range], &mut owed);
        for k in owed.drain(..) {
            self.send_or_end(lp, k);
        }
        self.owed = owed;
        Ok(next.map(|due| due.saturating_sub(lp.now_ns())))
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
                lp.sh.clock.elapsed().as_nanos() as u64,
                &lp.sh.counters[i],
                &lp.sh.strays,
                |ns| timings.record(ns),
            );
            if owes {
                self.send_or_end(lp, k);
                // One request is outstanding and it was just sent: nothing
                // more to read yet.
                break;
            }
        }
        Ok(Next::Done)
    }

    fn on_writable(&mut self, _: &mut Loop, _: u64, _: epoll::EventFlags) -> io::Result<()> {
        Ok(())
    }
}

/// A UDP server worker owns exactly one socket, so it blocks in recvfrom
/// on it instead of multiplexing: one system call per datagram.
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

    /// A stream server reads what its socket holds, without waiting, and
    /// counts each datagram: those that arrived before the engine asked for
    /// its counts. At most as many as the socket's receive buffer holds of
    /// datagrams of `in_size` bytes (each takes at least its size of the
    /// buffer, SO_RCVBUF as the kernel doubled it), so that a sender
    /// outrunning the drain cannot hold the hand-over, nor count what
    /// arrived after it. How many it read.
    fn settle_stream(&self, sh: &Shared, buf: &mut [u8]) -> u64 {
        let sock = &sh.udp_socks[sh.range.start];
        let counters = self.test_counters(sh);
        let held = socket2::SockRef::from(sock)
            .recv_buffer_size()
            .unwrap_or(64 << 20);
        let most = (held / self.in_size.max(1)) as u64 + 1;
        let mut read = 0;
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
}

impl Handler for UdpServer {
    fn start(&mut self, lp: &mut Loop) -> io::Result<()> {
        // A response the socket has no room for waits in the kernel until
        // there is, or until a signal cuts the send short; then it is
        // dropped, as a full queue on the wire would drop it.
        let i = lp.sh.range.start;
        lp.sh.udp_socks[i].set_nonblocking(false)?;
        lp.block(i as u64, BOUND)?;
        // The server runs until stopped.
        lp.live = 1;
        Ok(())
    }

    fn on_readable(&mut self, lp: &mut Loop, id: u64, _: epoll::EventFlags) -> io::Result<Next> {
        let sock = &lp.sh.udp_socks[id as usize];
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
            // A timeout, or an ICMP error from a client that went away:
            // they belong to no flow and stop nothing.
            Err(_) => return Ok(Next::Done),
        };
        let Some((flow, seq)) = self.count(lp, got) else {
            return Ok(Next::Done);
        };
        if let Some(from) = from {
            let c = &lp.sh.counters[flow as usize];
            c.add_transaction();
            put_header(&mut self.out, udp.tag, flow, seq);
            // A response that cannot be sent is lost, as on the wire; the
            // client's timeout covers it.
            if let Ok(w) = send_to(sock, &self.out, &from) {
                c.add_sent(w as u64);
                FlowCounters::bump(&c.packets_sent, 1);
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
            rr,
            tag: 0x5eed,
            out_size: 64,
            in_size: 64,
            flows: 1,
            timeout_ns: 20_000_000,
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
}
