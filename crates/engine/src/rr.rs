//! One request/response worker: an epoll loop over its flows. The client
//! keeps `pipeline` requests outstanding per flow and times each from the
//! moment its first byte is written to the moment the last byte of its
//! response is read; the server answers every complete request. A message
//! may go out in several writes (`8,rest`), each its own `write()`, so that
//! Nagle and delayed ACKs interact as they do in real applications.

use crate::latency::{new_histogram, LatencySlot};
use crate::worker::{wait, FlowError, WorkerPlan, WAKE};
use rustix::event::epoll;
use std::io::{self, Read, Write};
use std::sync::atomic::Ordering::{Acquire, Relaxed};

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
#[derive(Clone, Copy, Default)]
struct Out {
    /// Messages still to write, the current one included.
    pending: u32,
    /// Which write of the current message, and how much of it is done.
    part: u32,
    off: u32,
    /// EPOLLOUT is armed because a write would have blocked.
    armed: bool,
}

const READS_PER_EVENT: usize = 8;

pub(crate) fn run(plan: WorkerPlan) -> io::Result<Vec<FlowError>> {
    let rr = plan.rr.clone().expect("an rr worker has an rr plan");
    if let Some(cpu) = plan.cpu {
        plumb_sys::affinity::pin_current_thread(cpu)?;
    }
    if plan.range.len() == 1 && rr.rate.is_none() {
        return run_one(&plan, &rr);
    }
    let ep = plan.epoll_over(&plan.flows, epoll::EventFlags::IN)?;

    let n = plan.range.len();
    let base = plan.range.start;
    let depth = rr.depth.max(1) as usize;
    // Open loop: this worker's share of the rate, as a fixed schedule of
    // planned send times, handed to its flows in turn.
    let interval_ns = rr
        .rate
        .filter(|_| rr.client)
        .map(|r| 1e9 * plan.flows.len() as f64 / (r * n.max(1) as f64));
    let mut next_due_ns: f64 = plan.clock.elapsed().as_nanos() as f64;
    let mut turn = 0usize;
    // Every flow has `depth` requests outstanding: the schedule waits for a
    // response, and the wait shows in the latency of what is issued late.
    let mut backlogged = false;
    let largest = rr.out_writes.iter().copied().max().unwrap_or(1);
    let send_buf: Vec<u8> = (0..largest).map(|i| (i % 251) as u8).collect();
    let mut recv_buf = vec![0u8; rr.in_size.clamp(4096, 256 * 1024)];
    let mut out = vec![
        Out {
            pending: rr.initial,
            ..Out::default()
        };
        n
    ];
    let mut partial = vec![0usize; n];
    // Start times of the outstanding requests of each flow, a ring of
    // `depth` slots per flow: (head, len) index it.
    let mut started = vec![0u64; if rr.client { n * depth } else { 0 }];
    let mut ring = vec![(0u32, 0u32); if rr.client { n } else { 0 }];
    let mut local = new_histogram();
    let mut epoch_seen = plan.epoch.load(Acquire);
    let clock = plan.clock;
    let mut errors = Vec::new();
    let mut live = n;
    let mut events: Vec<epoll::Event> = Vec::with_capacity(256);

    // One step of the state machine for flow i: write what is owed, arm or
    // disarm EPOLLOUT. Err is a flow failure.
    let pump = |i: usize,
                out: &mut [Out],
                started: &mut [u64],
                ring: &mut [(u32, u32)]|
     -> io::Result<()> {
        let k = i - base;
        let stream = &plan.flows[i];
        let c = &plan.counters[i];
        let o = &mut out[k];
        let mut blocked = false;
        while o.pending > 0 {
            if rr.client && interval_ns.is_none() && o.part == 0 && o.off == 0 {
                let (head, len) = ring[k];
                if (len as usize) < depth {
                    let slot = k * depth + (head as usize + len as usize) % depth;
                    started[slot] = clock.elapsed().as_nanos() as u64;
                    ring[k].1 = len + 1;
                }
            }
            let want = rr.out_writes[o.part as usize] - o.off as usize;
            match (&*stream).write(&send_buf[..want]) {
                Ok(w) => {
                    c.add_sent(w as u64);
                    o.off += w as u32;
                    if o.off as usize == rr.out_writes[o.part as usize] {
                        o.off = 0;
                        o.part += 1;
                        if o.part as usize == rr.out_writes.len() {
                            o.part = 0;
                            o.pending -= 1;
                        }
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    blocked = true;
                    break;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            }
        }
        if blocked != o.armed {
            let flags = if blocked {
                epoll::EventFlags::IN | epoll::EventFlags::OUT
            } else {
                epoll::EventFlags::IN
            };
            epoll::modify(&ep, stream, epoll::EventData::new_u64(i as u64), flags)?;
            o.armed = blocked;
        }
        Ok(())
    };

    // The client starts its pipelines.
    let mut dead = vec![false; n];
    if rr.client {
        for i in plan.range.clone() {
            if let Err(e) = pump(i, &mut out, &mut started, &mut ring) {
                dead[i - base] = true;
                live -= 1;
                errors.push(plan.flow_error(i, crate::setup::plain_io(&e)));
            }
        }
    }

    while live > 0 && !plan.stop.load(Relaxed) {
        let timeout_ns = interval_ns.filter(|_| !backlogged).map(|_| {
            let now = clock.elapsed().as_nanos() as f64;
            (next_due_ns - now).max(0.0) as u64
        });
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
            let stream = &plan.flows[i];
            let c = &plan.counters[i];
            let mut failed: Option<io::Error> = None;
            let mut eof = false;
            let flags = ev.flags;
            if flags
                .intersects(epoll::EventFlags::IN | epoll::EventFlags::HUP | epoll::EventFlags::ERR)
            {
                for _ in 0..READS_PER_EVENT {
                    match (&*stream).read(&mut recv_buf) {
                        Ok(0) => {
                            eof = true;
                            break;
                        }
                        Ok(got) => {
                            c.add_received(got as u64);
                            partial[k] += got;
                            while partial[k] >= rr.in_size {
                                partial[k] -= rr.in_size;
                                c.add_transaction();
                                if interval_ns.is_none() {
                                    out[k].pending += 1;
                                }
                                if rr.client {
                                    let (head, len) = ring[k];
                                    if len > 0 {
                                        let t0 = started[k * depth + head as usize];
                                        let now = clock.elapsed().as_nanos() as u64;
                                        local.saturating_record(now.saturating_sub(t0).max(1));
                                        ring[k] = ((head + 1) % depth as u32, len - 1);
                                    }
                                }
                            }
                            if got < recv_buf.len() {
                                break;
                            }
                        }
                        Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                        Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                        Err(e) => {
                            failed = Some(e);
                            break;
                        }
                    }
                }
            }
            if failed.is_none() && !eof {
                if let Err(e) = pump(i, &mut out, &mut started, &mut ring) {
                    failed = Some(e);
                }
            }
            if failed.is_some() || eof {
                let _ = epoll::delete(&ep, stream);
                dead[k] = true;
                live -= 1;
                errors.push(plan.flow_error(
                    i,
                    match failed {
                        Some(e) => crate::setup::plain_io(&e),
                        None => "closed by the peer".to_string(),
                    },
                ));
            }
        }
        if let Some(iv) = interval_ns {
            let now = clock.elapsed().as_nanos() as f64;
            backlogged = false;
            while next_due_ns <= now && live > 0 {
                let mut placed = None;
                for _ in 0..n {
                    let k = turn;
                    turn = (turn + 1) % n;
                    if !dead[k] && (ring[k].1 as usize) < depth {
                        placed = Some(k);
                        break;
                    }
                }
                let Some(k) = placed else {
                    backlogged = true;
                    break;
                };
                let (head, len) = ring[k];
                started[k * depth + (head as usize + len as usize) % depth] = next_due_ns as u64;
                ring[k].1 = len + 1;
                out[k].pending += 1;
                next_due_ns += iv;
                if let Err(e) = pump(base + k, &mut out, &mut started, &mut ring) {
                    let _ = epoll::delete(&ep, &plan.flows[base + k]);
                    dead[k] = true;
                    live -= 1;
                    errors.push(plan.flow_error(base + k, crate::setup::plain_io(&e)));
                }
            }
        }
        plan.hand_over_latency(&mut local, &mut epoch_seen);
    }
    Ok(errors)
}

/// How long a blocking read waits before the worker looks at the stop flag
/// and the latency epoch.
const POLL: std::time::Duration = std::time::Duration::from_millis(10);

/// A worker with a single closed-loop flow: blocking reads and writes on
/// the socket itself. With one flow there is nothing to multiplex, and
/// leaving out epoll_wait saves a system call per message, which at one
/// flow is a measurable part of the round trip (as netperf and sockperf
/// also do). Reads and writes time out after `POLL` so that stop and the
/// latency hand-over are still seen.
fn run_one(plan: &WorkerPlan, rr: &RrPlan) -> io::Result<Vec<FlowError>> {
    let i = plan.range.start;
    let stream = &plan.flows[i];
    let c = &plan.counters[i];
    let fail = |e: String| Ok(vec![plan.flow_error(i, e)]);
    stream.set_nonblocking(false)?;
    stream.set_read_timeout(Some(POLL))?;
    stream.set_write_timeout(Some(POLL))?;
    let largest = rr.out_writes.iter().copied().max().unwrap_or(1);
    let send_buf: Vec<u8> = (0..largest).map(|i| (i % 251) as u8).collect();
    let mut recv_buf = vec![0u8; rr.in_size.clamp(4096, 256 * 1024)];
    let clock = plan.clock;
    let mut started: std::collections::VecDeque<u64> =
        std::collections::VecDeque::with_capacity(rr.depth.max(1) as usize);
    let mut owed = rr.initial;
    let mut partial = 0usize;
    let mut local = new_histogram();
    let mut epoch_seen = plan.epoch.load(Acquire);
    let timed_out = |e: &io::Error| {
        matches!(
            e.kind(),
            io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut | io::ErrorKind::Interrupted
        )
    };
    'run: while !plan.stop.load(Relaxed) {
        while owed > 0 {
            if rr.client {
                started.push_back(clock.elapsed().as_nanos() as u64);
            }
            for &want in &rr.out_writes {
                let mut off = 0;
                while off < want {
                    match (&*stream).write(&send_buf[off..want]) {
                        Ok(w) => {
                            c.add_sent(w as u64);
                            off += w;
                        }
                        Err(e) if timed_out(&e) => {
                            if plan.stop.load(Relaxed) {
                                break 'run;
                            }
                        }
                        Err(e) => return fail(crate::setup::plain_io(&e)),
                    }
                }
            }
            owed -= 1;
        }
        match (&*stream).read(&mut recv_buf) {
            Ok(0) => return fail("closed by the peer".to_string()),
            Ok(got) => {
                c.add_received(got as u64);
                partial += got;
                while partial >= rr.in_size {
                    partial -= rr.in_size;
                    c.add_transaction();
                    owed += 1;
                    if let Some(t0) = started.pop_front() {
                        let now = clock.elapsed().as_nanos() as u64;
                        local.saturating_record(now.saturating_sub(t0).max(1));
                    }
                }
            }
            Err(e) if timed_out(&e) => {}
            Err(e) => return fail(crate::setup::plain_io(&e)),
        }
        plan.hand_over_latency(&mut local, &mut epoch_seen);
    }
    Ok(Vec::new())
}

/// For the engine: whether a slot has caught up with an epoch.
pub(crate) fn caught_up(slot: &LatencySlot, epoch: u64) -> bool {
    slot.seen.load(Acquire) >= epoch
}
