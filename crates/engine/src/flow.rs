//! What every workload's flows share with the worker loop: the counters a
//! flow's worker alone writes, how a flow failure is reported, the worker's
//! share of the engine, and the interface a workload implements so that the
//! one loop of [`crate::worker`] can drive it. The workloads (stream, rr,
//! crr, udp) depend on this module and the loop depends on them; nothing
//! here knows a workload.

use crate::latency::{new_histogram, new_ways, LatencySlot, Ways};
use rustix::event::epoll;
use std::io;
use std::net::{TcpListener, TcpStream, UdpSocket};
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
    /// Where the engine times transactions: the counts as of the worker's
    /// last latency hand-over, whose transactions are exactly those whose
    /// latencies the engine holds.
    pub handed: Tally,
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
    /// udp-stream: datagrams the sender marked as sent inside its window,
    /// and of those, what the receiver got (whenever they came).
    pub window_sent: AtomicU64,
    pub window_received: AtomicU64,
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

/// The counts of a flow that [`crate::Engine::counts`] reads, as its worker
/// left them when it last handed its latencies over.
#[derive(Default)]
pub struct Tally {
    pub sent: AtomicU64,
    pub received: AtomicU64,
    pub transactions: AtomicU64,
    pub packets_sent: AtomicU64,
    pub packets_received: AtomicU64,
    pub timeouts: AtomicU64,
    pub gaps: AtomicU64,
    pub late: AtomicU64,
    pub window_received: AtomicU64,
}

impl FlowCounters {
    /// Copies the counts into [`FlowCounters::handed`]; the worker calls it
    /// as it hands its latencies over.
    pub(crate) fn hand_over(&self) {
        let h = &self.handed;
        for (from, to) in [
            (&self.transactions, &h.transactions),
            (&self.packets_sent, &h.packets_sent),
            (&self.packets_received, &h.packets_received),
            (&self.timeouts, &h.timeouts),
            (&self.gaps, &h.gaps),
            (&self.late, &h.late),
            (&self.window_received, &h.window_received),
            // The engine reads under the slot's lock that the worker holds
            // as it copies (see LatencySlot::flush).
            (&self.sent, &h.sent),
            (&self.received, &h.received),
        ] {
            to.store(from.load(Relaxed), Release);
        }
    }

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

/// What one worker shares with the engine: the sockets and counters of
/// every flow (the worker touches only those of its range), the flags the
/// engine raises, and where its latencies go.
pub(crate) struct Shared {
    pub flows: Arc<Vec<TcpStream>>,
    pub counters: Arc<Vec<FlowCounters>>,
    /// This worker's flows, or for crr its connection slots, or for a UDP
    /// server its one socket.
    pub range: std::ops::Range<usize>,
    pub stop: Arc<AtomicBool>,
    pub window_closed: Arc<AtomicBool>,
    /// Set while this end's window is open (see
    /// [`crate::Engine::mark_window_open`]).
    pub in_window: Arc<AtomicBool>,
    /// How the engine gets this worker to look at its flags.
    pub nudge: Nudge,
    /// A crr server's listener, shared by its workers.
    pub listener: Option<Arc<TcpListener>>,
    /// UDP sockets: one per flow on the client, one per worker on the server.
    pub udp_socks: Arc<Vec<UdpSocket>>,
    /// Datagrams dropped for a wrong tag or length, crr connections from
    /// another address.
    pub strays: Arc<AtomicU64>,
    /// Where this worker hands its counts over when the engine asks (a new
    /// epoch): None when the engine reads the live counters instead.
    pub latency: Option<Arc<LatencySlot>>,
    /// Whether the hand-over carries latencies: this end times transactions.
    pub timed: bool,
    /// Whether it carries each transaction as well (see
    /// [`crate::EngineConfig::keeps_each`]).
    pub each: bool,
    pub epoch: Arc<AtomicU64>,
    /// The engine's time base for latency stamps.
    pub clock: std::time::Instant,
}

impl Shared {
    /// Nanoseconds on the engine's clock.
    #[inline]
    pub(crate) fn now_ns(&self) -> u64 {
        self.clock.elapsed().as_nanos() as u64
    }
}

/// The engine's clock as a function, in nanoseconds since its start, for a
/// machine that reads the time only where it needs it; it holds no borrow
/// of `sh`, so the loop stays free to lend its other parts.
pub(crate) fn clock(sh: &Shared) -> impl Fn() -> u64 + Copy {
    let clock = sh.clock;
    move || clock.elapsed().as_nanos() as u64
}

/// How the engine gets a worker to look at its flags (stop, the epoch):
/// the worker's eventfd ends its epoll or ring wait, and a worker blocked
/// on its one socket (see [`Loop::blocking`]) is signalled out of the call
/// instead. A ring worker is never signalled: it would take the EINTR of
/// its wait for an error.
#[derive(Clone)]
pub(crate) struct Nudge {
    pub wake: Arc<OwnedFd>,
    /// Set by [`Loop::block`], once the worker's handler is in place.
    blocks: Arc<AtomicBool>,
}

impl Nudge {
    pub(crate) fn new() -> io::Result<Nudge> {
        let wake = rustix::event::eventfd(
            0,
            rustix::event::EventfdFlags::CLOEXEC | rustix::event::EventfdFlags::NONBLOCK,
        )?;
        Ok(Nudge {
            wake: Arc::new(wake),
            blocks: Arc::new(AtomicBool::new(false)),
        })
    }

    /// Nudges the worker running on `thread` once.
    pub(crate) fn nudge<T>(&self, thread: &std::thread::JoinHandle<T>) {
        let _ = rustix::io::write(&*self.wake, &1u64.to_ne_bytes());
        if self.blocks.load(Acquire) {
            let _ = plumb_sys::interrupt::interrupt(thread);
        }
    }

    /// Nudges the worker on `thread` until `done`, for at most `within`;
    /// whether it is done. A signal that lands just before the worker
    /// blocks is lost, so it is sent again every millisecond.
    pub(crate) fn until<T>(
        &self,
        thread: &std::thread::JoinHandle<T>,
        within: std::time::Duration,
        done: impl Fn() -> bool,
    ) -> bool {
        let t = std::time::Instant::now();
        let mut nudged = t;
        self.nudge(thread);
        while !done() {
            let now = std::time::Instant::now();
            if now - t >= within {
                return false;
            }
            if now - nudged >= std::time::Duration::from_millis(1) {
                self.nudge(thread);
                nudged = now;
            }
            std::thread::sleep(std::time::Duration::from_micros(100));
        }
        true
    }
}

/// What a readable flow wants next from the loop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Next {
    /// Nothing more unless the flow is also writable.
    Wait,
    /// The read left something to write: call `on_writable` now.
    Write,
    /// The flow ended (its failure is recorded) or is not this worker's.
    Done,
}

/// Reads a TCP flow up to `reads` times: `read` returns the bytes one read
/// took (0 at the end of the stream) or None when the socket has no more,
/// and `took` is handed each count and says whether to read again. Returns
/// why the flow ended, if it did: the peer closed it or a read failed.
#[inline]
pub(crate) fn read_burst(
    reads: usize,
    mut read: impl FnMut() -> io::Result<Option<usize>>,
    mut took: impl FnMut(usize) -> bool,
) -> Option<String> {
    for _ in 0..reads {
        match read() {
            Ok(Some(0)) => return Some("closed by the peer".to_string()),
            Ok(Some(n)) if took(n) => {}
            Ok(_) => break,
            Err(e) if later(&e) => break,
            Err(e) => return Some(plumb_sys::plain_io(&e)),
        }
    }
    None
}

/// A workload's flows as the worker loop drives them. The loop is generic
/// over the handler, so every call is static and inlined: no virtual call
/// per event, let alone per byte. Each method is told the token its socket
/// was registered with (its flow index, or the workload's own numbering).
pub(crate) trait Handler {
    /// Registers the sockets and sends what the flows open with; a single
    /// socket that needs no multiplexing may set [`Loop::blocking`].
    fn start(&mut self, lp: &mut Loop) -> io::Result<()>;
    /// The socket of `id` is readable (IN), hung up (HUP) or in error (ERR).
    fn on_readable(&mut self, lp: &mut Loop, id: u64, flags: epoll::EventFlags)
        -> io::Result<Next>;
    /// The socket of `id` is writable (OUT) or in error (ERR), or a read
    /// asked for it.
    fn on_writable(&mut self, lp: &mut Loop, id: u64, flags: epoll::EventFlags) -> io::Result<()>;
    /// Before each wait: work that is due by the clock. Returns how long the
    /// wait may last at most, in nanoseconds (None: until an event).
    fn on_timer(&mut self, _lp: &mut Loop) -> io::Result<Option<u64>> {
        Ok(None)
    }
    /// Just before a hand-over: takes in what has already arrived, so that
    /// the counts handed over include it. Returns how many messages that
    /// was.
    fn settle(&mut self, _lp: &mut Loop) -> u64 {
        0
    }
    /// After the loop, before the worker returns.
    fn finish(&mut self, _lp: &mut Loop) {}
}

/// The epoll token of a worker's wake-up eventfd.
pub(crate) const WAKE: u64 = u64::MAX;

/// How long the ring waits for completions before the worker looks at the
/// stop flag and the latency epoch, and the longest period of a udp-rr
/// client's interrupter, which sweeps for lost requests.
pub(crate) const POLL: std::time::Duration = std::time::Duration::from_millis(10);

/// The period of a blocking worker's own interrupter (see
/// [`Loop::blocking`]) where nothing is due by the clock: the engine
/// signals the worker when it raises a flag ([`Nudge`]), so the timer only
/// bounds what a lost signal could cost. A period of 10 ms cost a
/// udp-stream 5 % of its datagrams.
pub(crate) const BOUND: std::time::Duration = std::time::Duration::from_secs(1);

/// Whether a call on a flow's socket gave up for now: the socket would
/// block, or a blocking worker's interrupter cut the call short. Either way
/// the worker goes back to its loop, which looks at its flags and calls
/// again.
#[inline]
pub(crate) fn later(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted
    )
}

/// The loop's own state, lent to the handler on every call.
pub(crate) struct Loop {
    pub sh: Shared,
    /// The epoll loop's instance; None on a ring, which waits on its own
    /// completions.
    pub ep: Option<OwnedFd>,
    /// Flows still running; the loop ends when none is.
    pub live: usize,
    pub errors: Vec<FlowError>,
    /// The one socket this worker reads and writes in blocking mode
    /// instead of waiting in epoll: with one socket there is nothing to
    /// multiplex and leaving out epoll_wait saves a system call per
    /// message, a measurable part of a round trip (netperf and sockperf do
    /// the same). Set by [`Loop::block`].
    pub blocking: Option<u64>,
    /// Cuts the blocking socket's calls short every period, so that stop
    /// and a hand-over are seen at most that late even if the engine's
    /// signal ([`Nudge`]) was lost, and due work is done. The socket has no
    /// timeouts of its own: with them the kernel arms and cancels a timer
    /// at every sleep, which cost a 1-byte rr 11 % of its CPU time per
    /// transaction and a udp-rr 15 %.
    interrupter: Option<plumb_sys::interrupt::Interrupter>,
    /// A field of its own so that a handler may record while it holds a
    /// flow's counters.
    pub timings: Timings,
}

/// The latencies a worker timed since it last handed them over.
pub(crate) struct Timings {
    /// None when this end does not time transactions.
    hist: Option<hdrhistogram::Histogram<u64>>,
    /// Each transaction's planned time and latency, where this end keeps
    /// them one by one.
    each: Option<Vec<[u64; 2]>>,
    /// The two ways of the latencies that have them, to the server and
    /// back (udp-rr on one kernel), made with the first.
    ways: Option<Box<Ways>>,
    epoch_seen: u64,
}

impl Timings {
    /// Records a transaction planned (or begun) at `planned` on the
    /// engine's clock that took `ns`.
    #[inline]
    pub(crate) fn record(&mut self, planned: u64, ns: u64) {
        if let Some(h) = self.hist.as_mut() {
            h.saturating_record(ns.max(1));
        }
        if let Some(each) = self.each.as_mut() {
            each.push([planned, ns]);
        }
    }

    /// Records a transaction as [`Timings::record`] does, and where the
    /// answer gave them, the latency's two ways.
    #[inline]
    pub(crate) fn record_answer(&mut self, planned: u64, ns: u64, ways: Option<[u64; 2]>) {
        self.record(planned, ns);
        if let (Some(w), true) = (ways, self.hist.is_some()) {
            let h = self.ways.get_or_insert_with(new_ways);
            for (h, ns) in h.iter_mut().zip(w) {
                h.saturating_record(ns.max(1));
            }
        }
    }
}

impl Loop {
    /// The epoll loop's state: an epoll instance watching the wake-up
    /// eventfd.
    pub(crate) fn new(sh: Shared) -> io::Result<Loop> {
        let ep = epoll::create(epoll::CreateFlags::CLOEXEC)?;
        epoll::add(
            &ep,
            &*sh.nudge.wake,
            epoll::EventData::new_u64(WAKE),
            epoll::EventFlags::IN,
        )?;
        Ok(Loop::with(sh, Some(ep)))
    }

    /// The ring loop's state, with no epoll instance.
    pub(crate) fn on_ring(sh: Shared) -> Loop {
        Loop::with(sh, None)
    }

    fn with(sh: Shared, ep: Option<OwnedFd>) -> Loop {
        let timings = Timings {
            hist: sh.timed.then(new_histogram),
            each: (sh.timed && sh.each).then(Vec::new),
            ways: None,
            // Not the engine's epoch now: one it bumped before this thread
            // ran is still owed a hand-over.
            epoch_seen: 0,
        };
        Loop {
            sh,
            ep,
            live: 0,
            errors: Vec::new(),
            blocking: None,
            interrupter: None,
            timings,
        }
    }

    /// The epoll instance, which only the epoll loop has.
    pub(crate) fn epoll(&self) -> io::Result<&OwnedFd> {
        (self.ep.as_ref())
            .ok_or_else(|| io::Error::other("a ring worker watches no socket in epoll"))
    }

    /// Makes the socket of token `id` the one this worker blocks on (see
    /// [`Loop::blocking`]; the caller makes it blocking), its calls cut
    /// short every `every`.
    pub(crate) fn block(&mut self, id: u64, every: std::time::Duration) -> io::Result<()> {
        self.interrupter = Some(plumb_sys::interrupt::Interrupter::every(every)?);
        self.sh.nudge.blocks.store(true, Release);
        self.blocking = Some(id);
        Ok(())
    }

    /// Watches `fd` under token `id`.
    pub(crate) fn watch(&self, fd: impl AsFd, id: u64, flags: epoll::EventFlags) -> io::Result<()> {
        epoll::add(self.epoll()?, fd, epoll::EventData::new_u64(id), flags)?;
        Ok(())
    }

    /// Watches the sockets of this worker's range, each under its index.
    pub(crate) fn watch_range<S: AsFd>(
        &self,
        socks: &[S],
        flags: epoll::EventFlags,
    ) -> io::Result<()> {
        for i in self.sh.range.clone() {
            self.watch(&socks[i], i as u64, flags)?;
        }
        Ok(())
    }

    /// Changes what `fd` (token `id`) is watched for.
    pub(crate) fn rewatch(
        &self,
        fd: impl AsFd,
        id: u64,
        flags: epoll::EventFlags,
    ) -> io::Result<()> {
        epoll::modify(self.epoll()?, fd, epoll::EventData::new_u64(id), flags)?;
        Ok(())
    }

    /// Flow `flow` failed: it stops being watched and counted as live. The
    /// failure is after the window when the window or the test has already
    /// ended, where a reset is the peer tearing down.
    pub(crate) fn end_flow(&mut self, flow: usize, fd: impl AsFd, error: String) {
        if let Some(ep) = &self.ep {
            let _ = epoll::delete(ep, fd);
        }
        self.flow_failed(flow, error);
    }

    /// As [`Loop::end_flow`] for a flow whose socket is already closed.
    pub(crate) fn flow_failed(&mut self, flow: usize, error: String) {
        self.live -= 1;
        let e = self.flow_error(flow, error);
        self.errors.push(e);
    }

    /// As [`Loop::end_flow`] for TCP flow `flow` of the engine.
    pub(crate) fn end_tcp_flow(&mut self, flow: usize, error: String) {
        let flows = self.sh.flows.clone();
        self.end_flow(flow, &flows[flow], error);
    }

    pub(crate) fn flow_error(&self, flow: usize, error: String) -> FlowError {
        FlowError {
            flow: flow as u32,
            error,
            after_window: self.sh.window_closed.load(Relaxed) || self.sh.stop.load(Relaxed),
        }
    }

    /// Nanoseconds on the engine's clock.
    #[inline]
    pub(crate) fn now_ns(&self) -> u64 {
        self.sh.now_ns()
    }

    /// Reads the wake-up eventfd so that it stops signalling.
    pub(crate) fn drain_wake(&self) {
        let mut b = [0u8; 8];
        let _ = rustix::io::read(&*self.sh.nudge.wake, &mut b);
    }

    /// The epoch the engine has asked for a hand-over in since this worker
    /// last handed over, if it has.
    pub(crate) fn owed_hand_over(&self) -> Option<u64> {
        let epoch = self.sh.epoch.load(Acquire);
        (epoch != self.timings.epoch_seen).then_some(epoch)
    }

    /// Hands over the latencies timed so far together with the counts of
    /// each flow: one thread does both, so the counts and the latencies
    /// match. `settled` is what [`Handler::settle`] took in just before.
    pub(crate) fn hand_over(&mut self, epoch: u64, settled: u64) {
        let t = &mut self.timings;
        if let Some(slot) = &self.sh.latency {
            let counters = &self.sh.counters[self.sh.range.clone()];
            let counts = || counters.iter().for_each(FlowCounters::hand_over);
            let mut none = Vec::new();
            let each = t.each.as_mut().unwrap_or(&mut none);
            let ways = t.ways.as_deref_mut();
            slot.flush(counts, t.hist.as_mut(), each, ways, epoch, settled);
        }
        t.epoch_seen = epoch;
    }

    /// The last hand-over, as the worker ends: nobody need wait for it again.
    pub(crate) fn hand_over_final(&mut self) {
        self.hand_over(crate::latency::FINAL, 0);
    }
}

/// Where the writing of one message in its writes stands (rr's `8,rest`
/// is two writes): which write, and how much of it went out.
#[derive(Clone, Copy, Default, Debug, PartialEq, Eq)]
pub(crate) struct Writing {
    part: u32,
    off: u32,
}

impl Writing {
    /// Bytes of the write due now.
    pub(crate) fn due(&self, writes: &[usize]) -> usize {
        writes[self.part as usize] - self.off as usize
    }

    /// Whether the write due now starts the message.
    pub(crate) fn starts(&self) -> bool {
        *self == Writing::default()
    }

    /// `n` bytes of the write due went out; true when that finished the
    /// message, whose next one starts from the first write.
    pub(crate) fn wrote(&mut self, writes: &[usize], n: usize) -> bool {
        self.off += n as u32;
        if self.off as usize == writes[self.part as usize] {
            self.off = 0;
            self.part += 1;
            if self.part as usize == writes.len() {
                self.part = 0;
                return true;
            }
        }
        false
    }
}

/// The longest of a message's writes: what one send of it must hold.
pub(crate) fn longest(writes: &[usize]) -> usize {
    writes.iter().copied().max().unwrap_or(1)
}

/// A pattern of `len` bytes to send (the receiver does not look at it).
pub(crate) fn pattern(len: usize) -> PageBuf {
    let mut buf = PageBuf::zeroed(len);
    fill_pattern(&mut buf);
    buf
}

/// Writes the pattern of [`pattern`] into `buf`.
pub(crate) fn fill_pattern(buf: &mut [u8]) {
    // A block copied over and over rather than a byte at a time: a 16 MB
    // request's buffer is filled after the run's clock has started, and
    // byte by byte in an unoptimised build that ate its warm-up and more.
    let block: [u8; 251] = std::array::from_fn(|i| i as u8);
    for chunk in buf.chunks_mut(block.len()) {
        chunk.copy_from_slice(&block[..chunk.len()]);
    }
}

/// A buffer whose first byte starts a page. The kernel copies to and from
/// user space fastest between aligned addresses, and a large Vec from the
/// allocator starts 16 bytes into its first page (the allocator's header).
pub(crate) struct PageBuf {
    raw: Vec<u8>,
    start: usize,
    len: usize,
}

impl PageBuf {
    pub(crate) fn zeroed(len: usize) -> PageBuf {
        let page = rustix::param::page_size();
        let raw = vec![0u8; len + page];
        let start = raw.as_ptr().align_offset(page);
        PageBuf { raw, start, len }
    }
}

impl std::ops::Deref for PageBuf {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.raw[self.start..self.start + self.len]
    }
}

impl std::ops::DerefMut for PageBuf {
    fn deref_mut(&mut self) -> &mut [u8] {
        &mut self.raw[self.start..self.start + self.len]
    }
}

/// `n` connected loopback TCP flows, (client ends, server ends), every
/// socket non-blocking and without Nagle, as the engine's flows are.
#[cfg(test)]
pub(crate) fn test_flows(n: usize) -> (Vec<TcpStream>, Vec<TcpStream>) {
    let l = TcpListener::bind("127.0.0.1:0").expect("a loopback listener");
    let clients: Vec<TcpStream> = (0..n)
        .map(|_| TcpStream::connect(l.local_addr().unwrap()).expect("a loopback connect"))
        .collect();
    let servers: Vec<TcpStream> = (0..n).map(|_| l.accept().expect("an accept").0).collect();
    for s in clients.iter().chain(&servers) {
        s.set_nonblocking(true).unwrap();
        s.set_nodelay(true).unwrap();
    }
    (clients, servers)
}

/// A worker's share over the given sockets, all of them in its range, for
/// driving a handler by hand in tests.
#[cfg(test)]
pub(crate) fn test_shared(
    flows: Vec<TcpStream>,
    udp_socks: Vec<UdpSocket>,
    counted: usize,
    timed: bool,
) -> Shared {
    Shared {
        range: 0..flows.len().max(udp_socks.len()),
        flows: Arc::new(flows),
        counters: Arc::new((0..counted).map(|_| FlowCounters::default()).collect()),
        stop: Arc::new(AtomicBool::new(false)),
        window_closed: Arc::new(AtomicBool::new(false)),
        in_window: Arc::new(AtomicBool::new(false)),
        nudge: Nudge::new().expect("an eventfd"),
        listener: None,
        udp_socks: Arc::new(udp_socks),
        strays: Arc::new(AtomicU64::new(0)),
        latency: timed.then(|| Arc::new(LatencySlot::new())),
        timed,
        each: timed,
        epoch: Arc::new(AtomicU64::new(0)),
        clock: std::time::Instant::now(),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_pattern_counts_to_250_and_starts_over_at_every_length() {
        for len in [0, 1, 250, 251, 252, 4096, 100_003] {
            let buf = super::pattern(len);
            assert_eq!(buf.len(), len);
            assert!(buf.iter().enumerate().all(|(i, &b)| b == (i % 251) as u8));
        }
    }
}
