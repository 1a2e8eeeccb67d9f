//! One worker thread: an epoll loop over its share of the flows. The hot path
//! takes no lock and allocates nothing: per-flow counters are plain loads and
//! stores to atomics that only this thread writes.

use crate::transfer::{Receiver, Sender, Step};
use plumb_spec::ZeroCopy;
use rustix::buffer::spare_capacity;
use rustix::event::epoll;
use std::io;
use std::net::TcpStream;
use std::os::fd::{AsFd, OwnedFd};
use std::sync::atomic::{
    AtomicBool, AtomicU64, Ordering::Acquire, Ordering::Relaxed, Ordering::Release,
};
use std::sync::Arc;

/// Byte counters of one flow. Written only by the flow's worker, read by the
/// sampler; 64-byte alignment keeps neighbours off each other's cache line.
#[derive(Default)]
#[repr(align(64))]
pub struct FlowCounters {
    pub sent: AtomicU64,
    pub received: AtomicU64,
    pub transactions: AtomicU64,
    /// UDP: datagrams, and the receiver's view of the sequence numbers.
    pub packets_sent: AtomicU64,
    pub packets_received: AtomicU64,
    /// Sequence numbers skipped over (a datagram arriving later takes one
    /// back as `late`).
    pub gaps: AtomicU64,
    pub late: AtomicU64,
    /// The sequence number the receiver expects next.
    pub expect: AtomicU64,
    /// udp-rr client: requests that timed out.
    pub timeouts: AtomicU64,
    /// MSG_ZEROCOPY: successful sends, completions read, completions the
    /// kernel flagged as copied, sends refused with ENOBUFS, and pieces
    /// written as plain copies after an ENOBUFS with nothing outstanding.
    pub zc_sends: AtomicU64,
    pub zc_completions: AtomicU64,
    pub zc_copied: AtomicU64,
    pub zc_enobufs: AtomicU64,
    pub zc_fallback: AtomicU64,
    /// Of the completions, those read while the test was stopping: mostly
    /// data the kernel freed unsent when the peer reset the flow, which it
    /// reports as not copied although it never went anywhere.
    pub zc_close_completions: AtomicU64,
    pub zc_close_copied: AtomicU64,
    /// TCP_ZEROCOPY_RECEIVE: bytes mapped, and bytes read the ordinary way
    /// because the kernel could not map them.
    pub rx_mapped: AtomicU64,
    pub rx_copied: AtomicU64,
}

impl FlowCounters {
    #[inline]
    pub(crate) fn add_transaction(&self) {
        self.transactions
            .store(self.transactions.load(Relaxed) + 1, Release);
    }
    #[inline]
    pub(crate) fn bump(c: &AtomicU64, n: u64) {
        c.store(c.load(Relaxed) + n, Release);
    }
    #[inline]
    pub(crate) fn add_sent(&self, n: u64) {
        // Single writer: a load and a store, no locked read-modify-write.
        self.sent.store(self.sent.load(Relaxed) + n, Release);
    }
    #[inline]
    pub(crate) fn add_received(&self, n: u64) {
        self.received
            .store(self.received.load(Relaxed) + n, Release);
    }
}

/// A flow that failed, and when relative to the end of the window.
#[derive(Debug, Clone)]
pub struct FlowError {
    pub flow: u32,
    pub error: String,
    pub after_window: bool,
}

pub(crate) struct WorkerPlan {
    pub flows: Arc<Vec<TcpStream>>,
    pub counters: Arc<Vec<FlowCounters>>,
    pub range: std::ops::Range<usize>,
    pub sends: bool,
    pub receives: bool,
    pub msg_size: usize,
    pub zerocopy: plumb_spec::ZeroCopy,
    pub rx: plumb_spec::RxMode,
    pub stop: Arc<AtomicBool>,
    pub window_closed: Arc<AtomicBool>,
    pub wake: Arc<OwnedFd>,
    pub cpu: Option<u32>,
    pub rr: Option<crate::rr::RrPlan>,
    pub crr: Option<crate::crr::CrrPlan>,
    pub listener: Option<Arc<std::net::TcpListener>>,
    pub udp: Option<crate::udp::UdpPlan>,
    /// UDP sockets: one per flow on the client, one per worker on the server.
    pub udp_socks: Arc<Vec<std::net::UdpSocket>>,
    /// Datagrams dropped for a wrong tag or length.
    pub strays: Arc<AtomicU64>,
    pub latency: Option<Arc<crate::latency::LatencySlot>>,
    pub epoch: Arc<AtomicU64>,
    /// The engine's time base for latency stamps.
    pub clock: std::time::Instant,
}

/// The epoll token of a worker's wake-up eventfd.
pub(crate) const WAKE: u64 = u64::MAX;

impl WorkerPlan {
    /// A flow that failed; after the window when the window or the test has
    /// already ended, where a reset is the peer tearing down.
    pub(crate) fn flow_error(&self, flow: usize, error: String) -> FlowError {
        FlowError {
            flow: flow as u32,
            error,
            after_window: self.window_closed.load(Relaxed) || self.stop.load(Relaxed),
        }
    }

    /// Reads the wake-up eventfd so that it stops signalling.
    pub(crate) fn drain_wake(&self) {
        let mut b = [0u8; 8];
        let _ = rustix::io::read(&*self.wake, &mut b);
    }

    /// Hands the latencies timed so far to the engine when it has asked for
    /// them since the last call (a new epoch).
    pub(crate) fn hand_over_latency(
        &self,
        local: &mut hdrhistogram::Histogram<u64>,
        seen: &mut u64,
    ) {
        let epoch = self.epoch.load(Acquire);
        if epoch != *seen {
            if let Some(slot) = &self.latency {
                slot.flush(local, epoch);
            }
            *seen = epoch;
        }
    }

    /// An epoll instance watching the wake-up eventfd.
    pub(crate) fn epoll_with_wake(&self) -> io::Result<OwnedFd> {
        let ep = epoll::create(epoll::CreateFlags::CLOEXEC)?;
        epoll::add(
            &ep,
            &*self.wake,
            epoll::EventData::new_u64(WAKE),
            epoll::EventFlags::IN,
        )?;
        Ok(ep)
    }

    /// As [`WorkerPlan::epoll_with_wake`], also over the sockets of this
    /// worker's range, each keyed by its index.
    pub(crate) fn epoll_over<S: AsFd>(
        &self,
        socks: &[S],
        flags: epoll::EventFlags,
    ) -> io::Result<OwnedFd> {
        let ep = self.epoll_with_wake()?;
        for i in self.range.clone() {
            epoll::add(&ep, &socks[i], epoll::EventData::new_u64(i as u64), flags)?;
        }
        Ok(ep)
    }
}

/// Waits for events on `ep` into `events` (emptied first), for at most
/// `timeout_ns` when given; false when a signal cut the wait short.
pub(crate) fn wait(
    ep: &OwnedFd,
    events: &mut Vec<epoll::Event>,
    timeout_ns: Option<u64>,
) -> io::Result<bool> {
    events.clear();
    let timeout = timeout_ns.map(|ns| rustix::time::Timespec {
        tv_sec: (ns / 1_000_000_000) as i64,
        tv_nsec: (ns % 1_000_000_000) as i64,
    });
    match epoll::wait(ep, spare_capacity(events), timeout.as_ref()) {
        Ok(_) => Ok(true),
        Err(rustix::io::Errno::INTR) => Ok(false),
        Err(e) => Err(e.into()),
    }
}

/// Operations on one ready flow before the loop moves on, so that a flow that
/// never blocks cannot starve the others.
const BURST: usize = 8;

pub(crate) fn run(plan: WorkerPlan) -> io::Result<Vec<FlowError>> {
    if let Some(cpu) = plan.cpu {
        plumb_sys::affinity::pin_current_thread(cpu)?;
    }
    let interest = match (plan.sends, plan.receives) {
        (true, true) => epoll::EventFlags::IN | epoll::EventFlags::OUT,
        (true, false) => epoll::EventFlags::OUT,
        _ => epoll::EventFlags::IN,
    };
    let ep = plan.epoll_over(&plan.flows, interest)?;

    let send_buf: Vec<u8> = (0..plan.msg_size).map(|i| (i % 251) as u8).collect();
    let mut recv_buf = vec![0u8; plan.msg_size];
    // Every write boundary is a message boundary as with a blocking sender:
    // a short write is finished before the next message starts.
    let mut senders = Vec::with_capacity(plan.range.len());
    if plan.sends {
        for _ in plan.range.clone() {
            senders.push(Sender::new(plan.zerocopy, &send_buf, plan.range.len())?);
        }
    }
    let mut receivers = Vec::with_capacity(plan.range.len());
    if plan.receives {
        for i in plan.range.clone() {
            receivers.push(Receiver::new(plan.rx, &plan.flows[i])?);
        }
    }
    let file = match plan.zerocopy {
        ZeroCopy::Sendfile | ZeroCopy::Splice if plan.sends => {
            Some(crate::transfer::message_file(&send_buf)?)
        }
        _ => None,
    };
    // MSG_ZEROCOPY flows waiting for completions are watched for the error
    // queue only (EPOLLERR is always reported), not for room to write.
    let mut parked = vec![false; plan.range.len()];
    let mut errors = Vec::new();
    let mut live = plan.range.len();
    let mut events: Vec<epoll::Event> = Vec::with_capacity(256);

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
            let stream = &plan.flows[i];
            let c = &plan.counters[i];
            let flags = ev.flags;
            let mut failed: Option<io::Error> = None;
            let mut eof = false;

            let k = i - plan.range.start;
            if plan.receives
                && flags.intersects(
                    epoll::EventFlags::IN | epoll::EventFlags::HUP | epoll::EventFlags::ERR,
                )
            {
                for _ in 0..BURST {
                    match receivers[k].receive(stream, c, &mut recv_buf) {
                        Ok(Step::Moved(0)) => {
                            eof = true;
                            break;
                        }
                        Ok(Step::Moved(n)) => c.add_received(n as u64),
                        Ok(_) => break,
                        Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                        Err(e) => {
                            failed = Some(e);
                            break;
                        }
                    }
                }
            }
            if plan.sends && failed.is_none() && !eof && flags.contains(epoll::EventFlags::ERR) {
                if let Some(z) = senders[k].zerocopy() {
                    if let Err(e) = z.reap(stream, c) {
                        failed = Some(e);
                    }
                }
            }
            if plan.sends
                && failed.is_none()
                && !eof
                && flags.intersects(epoll::EventFlags::OUT | epoll::EventFlags::ERR)
            {
                let mut park = false;
                for _ in 0..BURST {
                    match senders[k].send(stream, c, &send_buf, file.as_ref()) {
                        Ok(Step::Moved(n)) => c.add_sent(n as u64),
                        Ok(Step::WouldBlock) => break,
                        Ok(Step::Parked) => {
                            park = true;
                            break;
                        }
                        Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                        Err(e) => {
                            failed = Some(e);
                            break;
                        }
                    }
                }
                // Parked: completions are due, and EPOLLERR will say when.
                // Otherwise room to write is what the flow waits for.
                if park != parked[k] && failed.is_none() {
                    parked[k] = park;
                    epoll::modify(
                        &ep,
                        stream,
                        epoll::EventData::new_u64(i as u64),
                        if park {
                            interest - epoll::EventFlags::OUT
                        } else {
                            interest
                        },
                    )?;
                }
            }
            if !plan.receives && flags.contains(epoll::EventFlags::HUP) && failed.is_none() {
                eof = true;
            }
            if failed.is_some() || eof {
                let _ = epoll::delete(&ep, stream);
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
    }
    drain_completions(&plan, &mut senders);
    Ok(errors)
}

/// How long a stopping worker waits for the completions of the zero-copy
/// sends still outstanding; the peer is reading or resetting meanwhile.
const DRAIN: std::time::Duration = std::time::Duration::from_secs(2);

/// Reads the completions of the sends still outstanding so that the counts
/// balance, for at most [`DRAIN`]. What is left is reported as outstanding.
fn drain_completions(plan: &WorkerPlan, senders: &mut [Sender]) {
    let deadline = std::time::Instant::now() + DRAIN;
    loop {
        let mut left = 0;
        for (k, s) in senders.iter_mut().enumerate() {
            if let Some(z) = s.zerocopy() {
                let i = plan.range.start + k;
                let c = &plan.counters[i];
                let (n0, c0) = (c.zc_completions.load(Relaxed), c.zc_copied.load(Relaxed));
                if z.outstanding() > 0 && z.reap(&plan.flows[i], c).is_ok() {
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
