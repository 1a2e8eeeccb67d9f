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

use crate::latency::new_histogram;
use crate::worker::{wait, FlowCounters, FlowError, WorkerPlan, WAKE};
use rustix::event::epoll;
use std::collections::VecDeque;
use std::io;
use std::sync::atomic::Ordering::{Acquire, Relaxed};

pub const HEADER: usize = plumb_spec::UDP_HEADER as usize;

/// What one end of a UDP test does.
#[derive(Debug, Clone)]
pub struct UdpPlan {
    pub client: bool,
    /// Request/response rather than a stream.
    pub rr: bool,
    /// The first four bytes of the cookie; the client fills it in, the
    /// server checks it.
    pub tag: u32,
    /// Bytes of each datagram this end sends: the stream's message, the
    /// request or the response.
    pub out_size: usize,
    /// Flows of the whole test (the server's counters are indexed by flow).
    pub flows: usize,
    /// udp-rr client: how long a request waits for its response.
    pub timeout_ns: u64,
}

impl UdpPlan {
    pub fn tag_of(cookie: &crate::Cookie) -> u32 {
        u32::from_le_bytes([cookie.0[0], cookie.0[1], cookie.0[2], cookie.0[3]])
    }
}

fn put_header(buf: &mut [u8], tag: u32, flow: u32, seq: u64) {
    buf[0..4].copy_from_slice(&tag.to_le_bytes());
    buf[4..8].copy_from_slice(&flow.to_le_bytes());
    buf[8..16].copy_from_slice(&seq.to_le_bytes());
}

/// (flow, seq) of a datagram with this test's tag.
fn header(buf: &[u8], tag: u32) -> Option<(u32, u64)> {
    if buf.len() < HEADER || buf[0..4] != tag.to_le_bytes() {
        return None;
    }
    let flow = u32::from_le_bytes(buf[4..8].try_into().ok()?);
    let seq = u64::from_le_bytes(buf[8..16].try_into().ok()?);
    Some((flow, seq))
}

/// Datagrams sent or read for one ready socket before the loop moves on.
const BURST: usize = 16;

fn blocked(e: &io::Error) -> bool {
    // ENOBUFS: the device queue is full; the datagram was not sent and the
    // socket will take more soon.
    e.kind() == io::ErrorKind::WouldBlock || e.raw_os_error() == Some(105)
}

/// A datagram the host's own packet filter dropped on the way out (EPERM):
/// lost like one dropped on the wire, not the end of the flow.
fn filtered(e: &io::Error) -> bool {
    e.raw_os_error() == Some(1)
}

pub(crate) fn run(plan: WorkerPlan) -> io::Result<Vec<FlowError>> {
    if let Some(cpu) = plan.cpu {
        plumb_sys::affinity::pin_current_thread(cpu)?;
    }
    let udp = plan.udp.clone().expect("a UDP worker has a UDP plan");
    match (udp.client, udp.rr) {
        (true, false) => stream_client(&plan, &udp),
        (true, true) => rr_client(&plan, &udp),
        (false, _) => server(&plan, &udp),
    }
}

fn stream_client(plan: &WorkerPlan, udp: &UdpPlan) -> io::Result<Vec<FlowError>> {
    let ep = plan.epoll_over(&plan.udp_socks, epoll::EventFlags::OUT)?;
    let mut buf: Vec<u8> = (0..udp.out_size).map(|i| (i % 251) as u8).collect();
    let mut events: Vec<epoll::Event> = Vec::with_capacity(256);
    let mut errors = Vec::new();
    let mut live = plan.range.len();
    while live > 0 && !plan.stop.load(Relaxed) {
        if !wait(&ep, &mut events, None)? {
            continue;
        }
        for ev in &events {
            let id = ev.data.u64();
            if id == WAKE {
                plan.drain_wake();
                continue;
            }
            let i = id as usize;
            let sock = &plan.udp_socks[i];
            let c = &plan.counters[i];
            for _ in 0..BURST {
                let seq = c.packets_sent.load(Relaxed);
                put_header(&mut buf, udp.tag, i as u32, seq);
                match sock.send(&buf) {
                    Ok(n) => {
                        c.add_sent(n as u64);
                        FlowCounters::bump(&c.packets_sent, 1);
                    }
                    Err(e) if blocked(&e) => break,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted || filtered(&e) => continue,
                    Err(e) => {
                        // A refused send means the server's socket is gone:
                        // the end of the test, or a failure inside it.
                        let _ = epoll::delete(&ep, sock);
                        live -= 1;
                        errors.push(plan.flow_error(i, crate::setup::plain_io(&e)));
                        break;
                    }
                }
            }
        }
    }
    Ok(errors)
}

/// A udp-rr client worker with one flow blocks in recv on its socket, as
/// the server does; the receive timeout is a quarter of the request timeout
/// (at most `POLL`), so a timeout is seen at most that late.
fn rr_client_one(plan: &WorkerPlan, udp: &UdpPlan) -> io::Result<Vec<FlowError>> {
    let i = plan.range.start;
    let sock = &plan.udp_socks[i];
    let c = &plan.counters[i];
    let wait = POLL.min(
        std::time::Duration::from_nanos(udp.timeout_ns / 4)
            .max(std::time::Duration::from_micros(100)),
    );
    sock.set_nonblocking(false)?;
    sock.set_read_timeout(Some(wait))?;
    sock.set_write_timeout(Some(POLL))?;
    let clock = plan.clock;
    let now_ns = || clock.elapsed().as_nanos() as u64;
    let mut out: Vec<u8> = (0..udp.out_size).map(|i| (i % 251) as u8).collect();
    let mut inbuf = vec![0u8; 65536];
    let mut local = new_histogram();
    let mut epoch_seen = plan.epoch.load(Acquire);
    let fail = |e: &io::Error| Ok(vec![plan.flow_error(i, crate::setup::plain_io(e))]);
    'run: while !plan.stop.load(Relaxed) {
        // Send the next request; one the kernel will not take is lost and
        // times out like one lost on the wire.
        let seq = c.packets_sent.load(Relaxed);
        put_header(&mut out, udp.tag, i as u32, seq);
        let t0 = now_ns();
        FlowCounters::bump(&c.packets_sent, 1);
        match sock.send(&out) {
            Ok(w) => c.add_sent(w as u64),
            Err(e) if blocked(&e) || filtered(&e) || timed_out(&e) => {}
            Err(e) => return fail(&e),
        }
        loop {
            plan.hand_over_latency(&mut local, &mut epoch_seen);
            if plan.stop.load(Relaxed) {
                break 'run;
            }
            if now_ns().saturating_sub(t0) >= udp.timeout_ns {
                FlowCounters::bump(&c.timeouts, 1);
                continue 'run;
            }
            let got = match sock.recv(&mut inbuf) {
                Ok(got) => got,
                Err(e) if timed_out(&e) => continue,
                Err(e) => return fail(&e),
            };
            match header(&inbuf[..got], udp.tag) {
                Some((flow, s)) if flow as usize == i => {
                    c.add_received(got as u64);
                    FlowCounters::bump(&c.packets_received, 1);
                    if s == seq {
                        local.saturating_record(now_ns().saturating_sub(t0).max(1));
                        c.add_transaction();
                        continue 'run;
                    }
                    FlowCounters::bump(&c.late, 1);
                }
                _ => {
                    plan.strays.fetch_add(1, Relaxed);
                }
            }
        }
    }
    Ok(Vec::new())
}

fn rr_client(plan: &WorkerPlan, udp: &UdpPlan) -> io::Result<Vec<FlowError>> {
    if plan.range.len() == 1 {
        return rr_client_one(plan, udp);
    }
    let ep = plan.epoll_over(&plan.udp_socks, epoll::EventFlags::IN)?;
    let n = plan.range.len();
    let base = plan.range.start;
    let clock = plan.clock;
    let now_ns = || clock.elapsed().as_nanos() as u64;
    let mut out: Vec<u8> = (0..udp.out_size).map(|i| (i % 251) as u8).collect();
    let mut inbuf = vec![0u8; 65536];
    // The sequence number each flow waits for and when it was sent.
    let mut waiting = vec![0u64; n];
    let mut sent_at = vec![0u64; n];
    // Deadlines in send order: every request waits the same timeout, so
    // the queue is sorted by construction.
    let mut deadlines: VecDeque<(u64, u32, u64)> = VecDeque::with_capacity(n);
    let mut local = new_histogram();
    let mut epoch_seen = plan.epoch.load(Acquire);
    let mut events: Vec<epoll::Event> = Vec::with_capacity(256);
    let mut errors = Vec::new();
    let mut dead = vec![false; n];
    let mut live = n;

    // Sends flow k's next request; a send that fails for want of buffer
    // space is a lost request and times out like one.
    let mut send = |k: usize,
                    waiting: &mut [u64],
                    sent_at: &mut [u64],
                    deadlines: &mut VecDeque<(u64, u32, u64)>|
     -> io::Result<()> {
        let i = base + k;
        let c = &plan.counters[i];
        let seq = c.packets_sent.load(Relaxed);
        put_header(&mut out, udp.tag, i as u32, seq);
        let t = now_ns();
        waiting[k] = seq;
        sent_at[k] = t;
        deadlines.push_back((t + udp.timeout_ns, k as u32, seq));
        FlowCounters::bump(&c.packets_sent, 1);
        loop {
            match plan.udp_socks[i].send(&out) {
                Ok(w) => {
                    c.add_sent(w as u64);
                    return Ok(());
                }
                Err(e) if blocked(&e) || filtered(&e) => return Ok(()),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            }
        }
    };

    for (k, dead) in dead.iter_mut().enumerate() {
        if let Err(e) = send(k, &mut waiting, &mut sent_at, &mut deadlines) {
            *dead = true;
            live -= 1;
            errors.push(plan.flow_error(base + k, crate::setup::plain_io(&e)));
        }
    }

    while live > 0 && !plan.stop.load(Relaxed) {
        // Requests whose time is up: counted, and the flow goes on.
        let now = now_ns();
        while let Some(&(due, k, seq)) = deadlines.front() {
            if due > now {
                break;
            }
            deadlines.pop_front();
            let k = k as usize;
            if dead[k] || waiting[k] != seq {
                continue;
            }
            FlowCounters::bump(&plan.counters[base + k].timeouts, 1);
            if let Err(e) = send(k, &mut waiting, &mut sent_at, &mut deadlines) {
                dead[k] = true;
                live -= 1;
                errors.push(plan.flow_error(base + k, crate::setup::plain_io(&e)));
            }
        }
        let timeout_ns = deadlines
            .front()
            .map(|&(due, _, _)| due.saturating_sub(now_ns()));
        if !wait(&ep, &mut events, timeout_ns)? {
            continue;
        }
        for ev in &events {
            let id = ev.data.u64();
            if id == WAKE {
                plan.drain_wake();
                continue;
            }
            let i = id as usize;
            let k = i - base;
            if dead[k] {
                continue;
            }
            let c = &plan.counters[i];
            for _ in 0..BURST {
                let got = match plan.udp_socks[i].recv(&mut inbuf) {
                    Ok(got) => got,
                    Err(e) if blocked(&e) => break,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    Err(e) => {
                        let _ = epoll::delete(&ep, &plan.udp_socks[i]);
                        dead[k] = true;
                        live -= 1;
                        errors.push(plan.flow_error(i, crate::setup::plain_io(&e)));
                        break;
                    }
                };
                match header(&inbuf[..got], udp.tag) {
                    Some((flow, seq)) if flow as usize == i => {
                        c.add_received(got as u64);
                        FlowCounters::bump(&c.packets_received, 1);
                        if seq == waiting[k] {
                            local.saturating_record(now_ns().saturating_sub(sent_at[k]).max(1));
                            c.add_transaction();
                            // Nothing is awaited until the next send.
                            waiting[k] = u64::MAX;
                            if let Err(e) = send(k, &mut waiting, &mut sent_at, &mut deadlines) {
                                dead[k] = true;
                                live -= 1;
                                errors.push(plan.flow_error(i, crate::setup::plain_io(&e)));
                            }
                            // One request is outstanding and it was just
                            // sent: nothing more to read yet.
                            break;
                        } else {
                            FlowCounters::bump(&c.late, 1);
                        }
                    }
                    _ => {
                        plan.strays.fetch_add(1, Relaxed);
                    }
                }
            }
        }
        plan.hand_over_latency(&mut local, &mut epoch_seen);
    }
    Ok(errors)
}

/// How long a blocking receive waits before the worker looks at the stop
/// flag and the latency epoch.
const POLL: std::time::Duration = std::time::Duration::from_millis(10);

fn timed_out(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut | io::ErrorKind::Interrupted
    )
}

/// Each server worker owns exactly one socket, so it blocks in recvfrom
/// on it instead of multiplexing: one system call per datagram.
fn server(plan: &WorkerPlan, udp: &UdpPlan) -> io::Result<Vec<FlowError>> {
    let sock = &plan.udp_socks[plan.range.start];
    sock.set_nonblocking(false)?;
    sock.set_read_timeout(Some(POLL))?;
    // A response the socket cannot take within this time is dropped, as a
    // full queue on the wire would.
    sock.set_write_timeout(Some(POLL))?;
    let mut inbuf = vec![0u8; 65536];
    let mut out: Vec<u8> = (0..udp.out_size).map(|i| (i % 251) as u8).collect();
    while !plan.stop.load(Relaxed) {
        let (got, from) = match sock.recv_from(&mut inbuf) {
            Ok(r) => r,
            Err(e) if timed_out(&e) => continue,
            // ICMP errors from a client that went away land here; they
            // belong to no flow and stop nothing.
            Err(_) => continue,
        };
        let Some((flow, seq)) =
            header(&inbuf[..got], udp.tag).filter(|&(flow, _)| (flow as usize) < udp.flows)
        else {
            plan.strays.fetch_add(1, Relaxed);
            continue;
        };
        let c = &plan.counters[flow as usize];
        c.add_received(got as u64);
        FlowCounters::bump(&c.packets_received, 1);
        if udp.rr {
            c.add_transaction();
            put_header(&mut out, udp.tag, flow, seq);
            // A response that cannot be sent is lost, as on the wire; the
            // client's timeout covers it.
            if let Ok(w) = sock.send_to(&out, from) {
                c.add_sent(w as u64);
                FlowCounters::bump(&c.packets_sent, 1);
            }
            continue;
        }
        // SO_REUSEPORT hashes a flow's 4-tuple to one socket, so only this
        // worker writes this flow's sequence state.
        let expect = c.expect.load(Relaxed);
        if seq == expect {
            c.expect.store(seq + 1, Relaxed);
        } else if seq > expect {
            FlowCounters::bump(&c.gaps, seq - expect);
            c.expect.store(seq + 1, Relaxed);
        } else {
            FlowCounters::bump(&c.late, 1);
        }
    }
    Ok(Vec::new())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_round_trip_and_strays() {
        let mut b = [0u8; 32];
        put_header(&mut b, 0xdead_beef, 7, 1 << 40);
        assert_eq!(header(&b, 0xdead_beef), Some((7, 1 << 40)));
        assert_eq!(header(&b, 0xdead_beee), None);
        assert_eq!(header(&b[..15], 0xdead_beef), None);
    }
}
