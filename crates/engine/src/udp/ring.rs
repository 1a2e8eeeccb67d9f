//! The UDP workloads on the io_uring engine, over the same machine as the
//! epoll loop ([`super::machine`]). A client's datagrams go out from slots
//! of the ring's send region, each slot with its own header, and come in
//! through multishot receives into the buffer ring; a stream's server
//! receives the same way; a udp-rr server takes each request into a letter
//! that keeps its sender's address, and answers from it.

use super::machine::{
    count_received, datagram_sent, next_datagram, put_header, put_stamp, RrClient,
};
use super::{blocked, filtered, UdpPlan};
use crate::flow::{FlowCounters, Loop, Shared};
use crate::ring::{self, receive_buffers, Done, Op, RingFlows, Shape};
use plumb_sys::uring::Queue;
use std::io;
use std::os::fd::AsFd;
use std::sync::atomic::Ordering::Acquire;

/// Datagrams a udp-stream flow keeps in flight, each from its own slot.
const SLOTS: usize = 4;

/// Bytes of receive buffers a worker's ring holds at most.
const RING_RECEIVE_BYTES: usize = 16 << 20;

/// Letters a udp-rr server's worker keeps armed: requests it can take in
/// while earlier answers are on their way.
const LETTERS: usize = 32;

/// The most a datagram carries: a letter takes any request whole.
const DATAGRAM_MOST: usize = 65_536;

/// Makes the UDP sockets of this worker blocking, so that the ring waits
/// for room or data rather than failing with EAGAIN.
fn block(lp: &Loop) -> io::Result<()> {
    for i in lp.sh.range.clone() {
        lp.sh.udp_socks[i].set_nonblocking(false)?;
    }
    Ok(())
}

/// udp-stream client flows on a ring: each keeps [`SLOTS`] datagrams in
/// flight. A datagram's sequence number is taken as its slot is filled; a
/// send the device or the host's filter refused goes again from the same
/// slot, so that the numbers stay those of what went out.
pub(crate) struct UdpStreamRing {
    plan: UdpPlan,
    base: usize,
    dead: Vec<bool>,
    /// Per flow: the sequence number its next datagram takes.
    next_seq: Vec<u64>,
    /// Per slot: whether its datagram was marked as inside the window.
    open: Vec<bool>,
    queued: Vec<u32>,
}

impl UdpStreamRing {
    pub(crate) fn new(plan: UdpPlan, sh: &Shared) -> UdpStreamRing {
        let n = sh.range.len();
        UdpStreamRing {
            plan,
            base: sh.range.start,
            dead: vec![false; n],
            next_seq: vec![0; n],
            open: vec![false; n * SLOTS],
            queued: vec![0; n],
        }
    }

    /// Slot `s` (of the worker's) gets flow `k`'s next datagram, sent.
    fn fill_and_send(&mut self, lp: &Loop, q: &mut Queue, s: usize) -> io::Result<()> {
        let k = s / SLOTS;
        let i = self.base + k;
        let size = self.plan.out_size;
        let open = lp.sh.in_window.load(Acquire);
        next_datagram(
            q.send_region(s * size, size),
            self.plan.tag,
            i,
            self.next_seq[k],
            open,
        );
        self.next_seq[k] += 1;
        self.open[s] = open;
        self.send(lp, q, s)
    }

    fn send(&mut self, lp: &Loop, q: &mut Queue, s: usize) -> io::Result<()> {
        let k = s / SLOTS;
        let i = self.base + k;
        let size = self.plan.out_size;
        q.send_datagram(
            lp.sh.udp_socks[i].as_fd(),
            s * size,
            size,
            ring::tag(s, Op::Send),
        )?;
        self.queued[k] += 1;
        Ok(())
    }
}

impl RingFlows for UdpStreamRing {
    fn shape(&self, lp: &Loop) -> Shape {
        let n = lp.sh.range.len();
        Shape {
            ops: (n * SLOTS) as u32,
            send_len: n * SLOTS * self.plan.out_size,
            ..Shape::default()
        }
    }

    fn start(&mut self, lp: &mut Loop, q: &mut Queue) -> io::Result<()> {
        block(lp)?;
        lp.live = lp.sh.range.len();
        for s in 0..lp.live * SLOTS {
            self.fill_and_send(lp, q, s)?;
        }
        Ok(())
    }

    fn complete(&mut self, lp: &mut Loop, q: &mut Queue, done: Done<'_>) -> io::Result<()> {
        let (s, c) = (done.flow, done.c);
        let k = s / SLOTS;
        let i = self.base + k;
        self.queued[k] -= 1;
        if self.dead[k] {
            return Ok(());
        }
        match c.error() {
            None => {
                datagram_sent(&lp.sh.counters[i], c.result as usize, self.open[s]);
                if ring::going(lp, false) {
                    self.fill_and_send(lp, q, s)?;
                }
            }
            Some(_) if c.cancelled() => {}
            Some(e) if blocked(&e) || filtered(&e) => {
                if ring::going(lp, false) {
                    self.send(lp, q, s)?;
                }
            }
            // A refused send means the server's socket is gone: the end
            // of the test, or a failure inside it.
            Some(e) => {
                self.dead[k] = true;
                lp.flow_failed(i, plumb_sys::plain_io(&e));
            }
        }
        Ok(())
    }

    /// A datagram queued when the test stops still counts once its send
    /// completes, as the epoll sender counts each send it made.
    fn owed(&self) -> u64 {
        self.queued.iter().map(|&n| u64::from(n)).sum()
    }
}

/// udp-rr client flows on a ring: each flow's request goes out from the
/// flow's slot of the send region, its answers come in through a multishot
/// receive, and the timer sends what the machine owes: the next request of
/// a closed-loop flow whose request timed out, or an open loop's requests
/// as they fall due. A request due while the flow's last send is still in
/// flight waits for it, so that its slot is not rewritten under the kernel
/// (the machine keeps its planned time).
pub(crate) struct UdpRrRing {
    m: RrClient,
    plan: UdpPlan,
    base: usize,
    sending: Vec<bool>,
    /// Requests due once the send in flight completes.
    due: Vec<u32>,
    owed: Vec<usize>,
}

impl UdpRrRing {
    pub(crate) fn new(plan: UdpPlan, sh: &Shared) -> UdpRrRing {
        let n = sh.range.len();
        UdpRrRing {
            m: super::rr_client(&plan, sh),
            plan,
            base: sh.range.start,
            sending: vec![false; n],
            due: vec![0; n],
            owed: Vec::new(),
        }
    }

    fn request(&mut self, lp: &Loop, q: &mut Queue, k: usize) -> io::Result<()> {
        if self.m.ended(k) || !ring::going(lp, false) {
            return Ok(());
        }
        if self.sending[k] {
            self.due[k] += 1;
            return Ok(());
        }
        let i = self.base + k;
        let size = self.plan.out_size;
        self.m.request(
            k,
            q.send_region(k * size, size),
            lp.now_ns(),
            &lp.sh.counters[i],
        );
        q.send_datagram(
            lp.sh.udp_socks[i].as_fd(),
            k * size,
            size,
            ring::tag(i, Op::Send),
        )?;
        self.sending[k] = true;
        Ok(())
    }

    fn end(&mut self, lp: &mut Loop, k: usize, why: String) {
        self.m.end(k);
        lp.flow_failed(self.base + k, why);
    }
}

impl RingFlows for UdpRrRing {
    fn shape(&self, lp: &Loop) -> Shape {
        let n = lp.sh.range.len();
        Shape {
            ops: 2 * n as u32,
            send_len: n * self.plan.out_size,
            receive: Some(receive_buffers(
                n,
                ring::fitted(self.plan.in_size),
                RING_RECEIVE_BYTES,
            )),
            ..Shape::default()
        }
    }

    fn start(&mut self, lp: &mut Loop, q: &mut Queue) -> io::Result<()> {
        block(lp)?;
        lp.live = lp.sh.range.len();
        for k in 0..lp.live {
            let i = self.base + k;
            q.receive(lp.sh.udp_socks[i].as_fd(), ring::tag(i, Op::Receive))?;
            for _ in 0..self.m.opening() {
                self.request(lp, q, k)?;
            }
        }
        Ok(())
    }

    fn on_timer(&mut self, lp: &mut Loop, q: &mut Queue) -> io::Result<Option<u64>> {
        let counters = &lp.sh.counters[lp.sh.range.clone()];
        let next = self.m.timer(lp.now_ns(), counters, &mut self.owed);
        for i in 0..self.owed.len() {
            self.request(lp, q, self.owed[i])?;
        }
        self.owed.clear();
        Ok(next.map(|t| t.saturating_sub(lp.now_ns())))
    }

    fn complete(&mut self, lp: &mut Loop, q: &mut Queue, done: Done<'_>) -> io::Result<()> {
        let (i, op, c, data) = (done.flow, done.op, done.c, done.data);
        let k = i - self.base;
        if op == Op::Send {
            self.sending[k] = false;
        }
        if self.m.ended(k) {
            return Ok(());
        }
        match (op, c.error()) {
            (Op::Send, None) => lp.sh.counters[i].add_sent(c.result as u64),
            // Lost as on the wire: its timeout covers it.
            (Op::Send, Some(e)) if blocked(&e) || filtered(&e) || c.cancelled() => {}
            (Op::Receive, None) => {
                let now = lp.now_ns();
                let timings = &mut lp.timings;
                let owes = self.m.answer(
                    k,
                    data,
                    now,
                    &lp.sh.counters[i],
                    &lp.sh.strays,
                    |planned, ns, ways| timings.record_answer(planned, ns, ways),
                );
                if owes {
                    self.request(lp, q, k)?;
                }
                let fd = lp.sh.udp_socks[i].as_fd();
                ring::receive_again(lp, q, &c, fd, ring::tag(i, Op::Receive))?;
            }
            // Every buffer was taken: armed again now that the batch
            // hands them back.
            (Op::Receive, Some(_)) if c.out_of_buffers() => {
                let fd = lp.sh.udp_socks[i].as_fd();
                ring::receive_again(lp, q, &c, fd, ring::tag(i, Op::Receive))?;
            }
            (Op::Connect | Op::Accept | Op::Fill | Op::Errors | Op::Copy | Op::Token, _) => {}
            (_, Some(e)) => {
                if !c.cancelled() {
                    self.end(lp, k, plumb_sys::plain_io(&e));
                }
                return Ok(());
            }
        }
        if op == Op::Send && self.due[k] > 0 {
            self.due[k] -= 1;
            self.request(lp, q, k)?;
        }
        Ok(())
    }
}

/// A UDP server worker on a ring, or the receiving client of a
/// `--direction recv` stream: a stream's sockets (the server worker's one,
/// the client's one a flow) each read by a multishot receive, or the
/// server's one socket by [`LETTERS`] receives that keep each request's
/// sender for its answer (udp-rr).
pub(crate) struct UdpServerRing {
    plan: UdpPlan,
    /// Per letter: the flow its answer in flight is for.
    answering: Vec<u32>,
    /// Where [`RingFlows::settle`] reads a datagram off the socket.
    inbuf: Vec<u8>,
}

impl UdpServerRing {
    pub(crate) fn new(plan: UdpPlan) -> UdpServerRing {
        UdpServerRing {
            answering: vec![0; LETTERS],
            inbuf: vec![0u8; DATAGRAM_MOST],
            plan,
        }
    }
}

impl RingFlows for UdpServerRing {
    fn shape(&self, _: &Loop) -> Shape {
        Shape {
            ops: if self.plan.rr { 2 * LETTERS as u32 } else { 1 },
            // Answers go out of the letters.
            send_len: 1,
            // Datagrams of every flow come to this one socket: buffers as
            // for many flows.
            receive: (!self.plan.rr)
                .then(|| receive_buffers(256, ring::fitted(self.plan.in_size), RING_RECEIVE_BYTES)),
            letters: self.plan.rr.then_some((LETTERS, DATAGRAM_MOST)),
            ..Shape::default()
        }
    }

    fn start(&mut self, lp: &mut Loop, q: &mut Queue) -> io::Result<()> {
        block(lp)?;
        // A receiver runs until stopped, whatever its peer does.
        lp.live = 1;
        if self.plan.rr {
            let sock = lp.sh.udp_socks[lp.sh.range.start].as_fd();
            for slot in 0..LETTERS {
                q.receive_letter(sock, slot, ring::tag(slot, Op::Receive))?;
            }
        } else {
            for i in lp.sh.range.clone() {
                q.receive(lp.sh.udp_socks[i].as_fd(), ring::tag(i, Op::Receive))?;
            }
        }
        Ok(())
    }

    fn complete(&mut self, lp: &mut Loop, q: &mut Queue, done: Done<'_>) -> io::Result<()> {
        let (slot, op, c, data) = (done.flow, done.op, done.c, done.data);
        // A stream's receive is tagged with its socket; udp-rr's letters
        // share the worker's one.
        let sock = match self.plan.rr {
            true => lp.sh.udp_socks[lp.sh.range.start].as_fd(),
            false => lp.sh.udp_socks[slot].as_fd(),
        };
        let udp = &self.plan;
        match (op, c.error()) {
            (Op::Receive, None) if udp.rr => {
                let got = c.result as usize;
                let counted = count_received(
                    &q.letter(slot)[..got],
                    udp.tag,
                    true,
                    udp.test_counters(&lp.sh),
                    &lp.sh.strays,
                );
                match counted {
                    Some((flow, seq)) if ring::going(lp, false) => {
                        lp.sh.counters[flow as usize].add_transaction();
                        put_header(q.letter(slot), udp.tag, flow, seq);
                        put_stamp(q.letter(slot), plumb_sys::proc::monotonic_ns());
                        self.answering[slot] = flow;
                        q.answer_letter(sock, slot, udp.out_size, ring::tag(slot, Op::Send))?;
                    }
                    _ if ring::going(lp, false) => {
                        q.receive_letter(sock, slot, ring::tag(slot, Op::Receive))?;
                    }
                    _ => {}
                }
            }
            (Op::Receive, None) => {
                count_received(
                    data,
                    udp.tag,
                    false,
                    udp.test_counters(&lp.sh),
                    &lp.sh.strays,
                );
                ring::receive_again(lp, q, &c, sock, ring::tag(slot, Op::Receive))?;
            }
            (Op::Send, result) => {
                // An answer that could not be sent is lost, as on the
                // wire; the client's timeout covers it.
                if result.is_none() {
                    let c2 = &lp.sh.counters[self.answering[slot] as usize];
                    c2.add_sent(c.result as u64);
                    FlowCounters::bump(&c2.packets_sent, 1);
                }
                if ring::going(lp, false) {
                    q.receive_letter(sock, slot, ring::tag(slot, Op::Receive))?;
                }
            }
            // A timeout, an ICMP error from a client that went away, or
            // every buffer taken: they belong to no flow and stop nothing.
            (Op::Receive, Some(_)) if ring::going(lp, false) && !c.cancelled() => {
                if udp.rr {
                    q.receive_letter(sock, slot, ring::tag(slot, Op::Receive))?;
                } else {
                    ring::receive_again(lp, q, &c, sock, ring::tag(slot, Op::Receive))?;
                }
            }
            _ => {}
        }
        Ok(())
    }

    /// A stream's receiver counts the datagrams the ring took in before
    /// a hand-over, and those still on its socket (the ring's buffers can
    /// all be taken while the loop waits for a CPU), as the epoll server
    /// reads what its socket holds.
    fn settles(&self) -> bool {
        !self.plan.rr
    }

    fn settle(&mut self, lp: &mut Loop) -> u64 {
        self.plan.settle_stream(&lp.sh, &mut self.inbuf)
    }
}
