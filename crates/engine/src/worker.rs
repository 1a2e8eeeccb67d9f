//! One worker thread: an epoll loop over its share of the flows. The hot path
//! takes no lock and allocates nothing: per-flow counters are plain loads and
//! stores to atomics that only this thread writes.

use rustix::buffer::spare_capacity;
use rustix::event::epoll;
use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::os::fd::OwnedFd;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
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
}

impl FlowCounters {
    #[inline]
    pub(crate) fn add_transaction(&self) {
        self.transactions
            .store(self.transactions.load(Relaxed) + 1, Relaxed);
    }
    #[inline]
    pub(crate) fn bump(c: &AtomicU64, n: u64) {
        c.store(c.load(Relaxed) + n, Relaxed);
    }
    #[inline]
    pub(crate) fn add_sent(&self, n: u64) {
        // Single writer: a load and a store, no locked read-modify-write.
        self.sent.store(self.sent.load(Relaxed) + n, Relaxed);
    }
    #[inline]
    pub(crate) fn add_received(&self, n: u64) {
        self.received
            .store(self.received.load(Relaxed) + n, Relaxed);
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

const WAKE: u64 = u64::MAX;
/// Operations on one ready flow before the loop moves on, so that a flow that
/// never blocks cannot starve the others.
const BURST: usize = 8;

pub(crate) fn run(plan: WorkerPlan) -> io::Result<Vec<FlowError>> {
    if let Some(cpu) = plan.cpu {
        plumb_sys::affinity::pin_current_thread(cpu)?;
    }
    let ep = epoll::create(epoll::CreateFlags::CLOEXEC)?;
    let interest = match (plan.sends, plan.receives) {
        (true, true) => epoll::EventFlags::IN | epoll::EventFlags::OUT,
        (true, false) => epoll::EventFlags::OUT,
        _ => epoll::EventFlags::IN,
    };
    for i in plan.range.clone() {
        epoll::add(
            &ep,
            &plan.flows[i],
            epoll::EventData::new_u64(i as u64),
            interest,
        )?;
    }
    epoll::add(
        &ep,
        &*plan.wake,
        epoll::EventData::new_u64(WAKE),
        epoll::EventFlags::IN,
    )?;

    let send_buf: Vec<u8> = (0..plan.msg_size).map(|i| (i % 251) as u8).collect();
    let mut recv_buf = vec![0u8; plan.msg_size];
    // Bytes of the current message already written, per flow: a short write is
    // finished before the next message starts, so every write boundary is a
    // message boundary as with a blocking sender.
    let mut offset = vec![0usize; plan.range.len()];
    let mut errors = Vec::new();
    let mut live = plan.range.len();
    let mut events: Vec<epoll::Event> = Vec::with_capacity(256);

    while live > 0 && !plan.stop.load(Relaxed) {
        events.clear();
        match epoll::wait(&ep, spare_capacity(&mut events), None) {
            Ok(_) => {}
            Err(rustix::io::Errno::INTR) => continue,
            Err(e) => return Err(e.into()),
        }
        for ev in &events {
            let id = ev.data.u64();
            if id == WAKE {
                continue;
            }
            let i = id as usize;
            let stream = &plan.flows[i];
            let c = &plan.counters[i];
            let flags = ev.flags;
            let mut failed: Option<io::Error> = None;
            let mut eof = false;

            if plan.receives
                && flags.intersects(
                    epoll::EventFlags::IN | epoll::EventFlags::HUP | epoll::EventFlags::ERR,
                )
            {
                for _ in 0..BURST {
                    match (&*stream).read(&mut recv_buf) {
                        Ok(0) => {
                            eof = true;
                            break;
                        }
                        Ok(n) => c.add_received(n as u64),
                        Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                        Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                        Err(e) => {
                            failed = Some(e);
                            break;
                        }
                    }
                }
            }
            if plan.sends
                && failed.is_none()
                && !eof
                && flags.intersects(epoll::EventFlags::OUT | epoll::EventFlags::ERR)
            {
                let off = &mut offset[i - plan.range.start];
                for _ in 0..BURST {
                    match (&*stream).write(&send_buf[*off..]) {
                        Ok(n) => {
                            c.add_sent(n as u64);
                            *off += n;
                            if *off == send_buf.len() {
                                *off = 0;
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
            if !plan.receives && flags.contains(epoll::EventFlags::HUP) && failed.is_none() {
                eof = true;
            }
            if failed.is_some() || eof {
                let _ = epoll::delete(&ep, stream);
                live -= 1;
                errors.push(FlowError {
                    flow: i as u32,
                    error: match failed {
                        Some(e) => crate::setup::plain_io(&e),
                        None => "closed by the peer".to_string(),
                    },
                    after_window: plan.window_closed.load(Relaxed) || plan.stop.load(Relaxed),
                });
            }
        }
    }
    Ok(errors)
}
